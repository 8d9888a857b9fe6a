"""Summaries and exports of stored sweep results, for reading and for analysis.

Two shapes of table come out of a store:

- the **flat table** (:func:`flat_table`): one row per stored instance, one column per instance
  parameter and per key number of the result (see :func:`key_numbers`), full precision and the
  full instance key: for pandas, CSV, JSON (``orient="split"``) and Parquet;
- the **aggregate** (:func:`aggregate`, ``--group-by``): one row per group of instances with the
  count of each verdict, the worst verdict and the min / max of the chosen key numbers: for the
  LaTeX table of a paper (rendered by :class:`proofs_check.tables.Table`).

pandas and pyarrow are optional (``pip install pandas pyarrow``): they are imported only by
:func:`to_dataframe` and the Parquet format, which say how to install them when missing.
"""

from __future__ import annotations

import io
import json
import math
import os
from typing import Any, Sequence

from proofs_check.commands import UsageError
from proofs_check.core import clean, worst
from proofs_check.sweep.registry import VERDICT_ORDER


def _text_caption(caption: str) -> str | None:
    """The LaTeX caption of a sweep table: its text escaped, never read as plain-text math (the caption names the
    store file: 'run_2.sqlite' became $\\mathrm{run}_{2}.\\mathrm{sqlite}$)."""
    from proofs_check.latex_text import latex_escape

    return latex_escape(caption) if isinstance(caption, str) and caption else None


#: formats of ``--export`` (``--format`` or the file's extension): the Table formats and Parquet
EXPORT_FORMATS = ("md", "latex", "csv", "json", "parquet")
#: file extension -> export format, used when ``--format`` is not given
_EXTENSIONS = {".md": "md", ".markdown": "md", ".tex": "latex", ".latex": "latex", ".csv": "csv", ".json": "json",
               ".parquet": "parquet", ".pq": "parquet"}  # the same names as `ncproofs table -o F`
#: columns of the flat table that are not parameters or numbers (parameters come after "seed",
#: numbers after "seconds")
_LEADING = ("key", "family", "seed")
_TRAILING = ("verdict", "reason", "score", "seconds")
#: entries of a result that are not numbers of the instance
_NOT_NUMBERS = frozenset({"verdict", "reason", "score", "checks", "traceback"})
#: nested evidence is flattened to this depth ("check.a.b")
_MAX_DEPTH = 3
_PANDAS_HINT = "pip install pandas (or ncproofs[analysis])"
_PARQUET_HINT = "pip install pandas pyarrow (or ncproofs[analysis])"


def counts(rows: list[dict]) -> dict[str, int]:
    """Number of rows per verdict, every verdict of :data:`VERDICT_ORDER` present (worst first).

    Returns ``{verdict: count}``. Raises ``KeyError`` for a row without a ``"verdict"``."""
    out = {v: 0 for v in VERDICT_ORDER}
    for r in rows:
        out[r["verdict"]] = out.get(r["verdict"], 0) + 1
    return out


#: entries of a rigorous sweep's result shown by the summary (``rigorous = true``; docs/workflow.md)
RIGOROUS_RESULT_COLUMNS = ("rigorous_lower", "rigorous_upper", "rigorous")


def results_table(rows: list[dict], caption: str = "", *, rigorous: bool = False):
    """All given rows as a :class:`proofs_check.tables.Table` for reading (worst first): the
    first 12 hex digits of the key, the parameters, seed, verdict, score and the reason cut at
    160 characters. For analysis use :func:`flat_table` (every number, full precision).
    ``rigorous=True`` (rows with ``result``, of a rigorous sweep) adds the proven bracket ``rigorous_lower``,
    ``rigorous_upper`` (printed rounded down / up) and the ``rigorous`` flag before the reason.

    Returns the Table. Raises ``KeyError`` for rows without the keys of ``Store.rows()``."""
    from proofs_check.tables import Table

    if rigorous:
        plain = results_table(rows, caption)
        j = plain.columns.index("reason")
        body = [r[:j] + [(row.get("result") or {}).get(c) for c in RIGOROUS_RESULT_COLUMNS] + r[j:]
                for r, row in zip(plain.rows, rows)]
        meta = dict(plain.meta)
        meta["columns"] = {**meta["columns"], "rigorous_lower": "proven lower bound (ball arithmetic), rounded down",
                           "rigorous_upper": "proven feasible value (ball arithmetic), rounded up",
                           "rigorous": "VERIFIED and every statement judged in balls proven"}
        return Table(plain.columns[:j] + list(RIGOROUS_RESULT_COLUMNS) + plain.columns[j:], body, caption=caption,
                     latex_caption=_text_caption(caption), digits=plain.digits, meta=meta, rounding={"rigorous_lower": "down", "rigorous_upper": "up"})

    names: list[str] = []
    for r in rows:
        for k in r["params"]:
            if k not in names:
                names.append(k)
    cols = ["key", "family", *names, "seed", "verdict", "score", "reason"]
    body = [[r["key"][:12], r["family"], *[r["params"].get(n) for n in names], r["seed"], r["verdict"],
             r["score"], (r["reason"] or "")[:160]] for r in rows]
    return Table(cols, body, caption=caption, latex_caption=_text_caption(caption), digits=6,
                 meta={"columns": {"key": "first 12 hex digits of the instance key (sha256 of its configuration)",
                                   "score": "sweepable-defined badness, larger = worse"}})


def summary_text(rows: list[dict], *, pending: int | None = None, worst_n: int = 10, fmt: str = "md",
                 rigorous: bool = False) -> str:
    """The text ``ncproofs sweep`` prints: counts of verdicts, the overall (worst) verdict and
    the ``worst_n`` worst instances as a table in ``fmt`` (md, latex, csv or json). ``rigorous=True`` (a
    rigorous sweep; rows with ``result``): also how many instances are rigorous, and the bracket columns of
    :func:`results_table`.

    Returns the text (ending in a newline). Raises TypeError (``rows`` not a list) or ValueError
    (bad ``worst_n`` or ``fmt``)."""
    from proofs_check.tables import FORMATS

    if not isinstance(rows, list):
        raise TypeError(f"summary_text: rows must be a list of dicts (Store.rows()), got {type(rows).__name__}")
    if isinstance(worst_n, bool) or not isinstance(worst_n, int) or worst_n < 0:
        raise ValueError(f"summary_text: worst_n must be an integer >= 0, got {worst_n!r}")
    if fmt not in FORMATS:
        raise ValueError(f"summary_text: fmt must be one of {', '.join(FORMATS)}, got {fmt!r}")
    c = counts(rows)
    lines = [f"stored: {len(rows)}" + (f", pending: {pending}" if pending is not None else ""),
             "verdicts: " + ", ".join(f"{v} {n}" for v, n in c.items() if n or v != "NOT_APPLICABLE")]
    overall = worst(r["verdict"] for r in rows).value if rows else None
    lines.append(f"overall: {overall if overall else 'none stored'}")
    if rigorous:
        proven = sum(1 for r in rows if (r.get("result") or {}).get("rigorous") is True)
        bracket = sum(1 for r in rows if (r.get("result") or {}).get("rigorous_lower") is not None)
        lines.append(f"rigorous (ball arithmetic): {proven} of {len(rows)} proven, {bracket} with a proven bracket")
    bad = [r for r in rows if r["verdict"] != "VERIFIED"][:worst_n]
    if worst_n > 0 and rows:
        shown = bad or rows[:worst_n]
        lines.append("")
        lines.append(f"worst {len(shown)} instance(s):" if bad else f"all VERIFIED; the {len(shown)} with the largest score:")
        lines.append(results_table(shown, rigorous=rigorous).render(fmt).rstrip("\n"))
    return "\n".join(lines) + "\n"


# ---- loading rows -----------------------------------------------------------------------------

def load_rows(store, spec=None, *, family: str | None = None, with_result: bool = True) -> tuple[list[dict], int | None]:
    """Stored rows (worst first) of ``spec``'s instances, else of ``family``, else all.

    ``store`` is an open :class:`~proofs_check.sweep.store.Store`. The instance keys of ``spec``
    come from the registered sweepable, else from what a sweep recorded in the store (no code of
    the config is imported). Returns ``(rows, pending)``: ``pending`` is the number of the
    config's instances not stored yet (None without ``spec`` or when the keys are unknown)."""
    from proofs_check.sweep.registry import _REGISTRY

    if spec is None:
        return store.rows(family=family, with_result=with_result), None
    sw = _REGISTRY.get(spec.family) or store.sweepable_record(spec.family)
    if sw is None:  # never run on this store, and not built in: everything stored for the family
        return store.rows(family=spec.family, with_result=with_result), None
    keys = [i.key for i in spec.instances(sw, validate=False)]
    rows = store.rows(keys, with_result=with_result)
    return rows, len(keys) - len(rows)


# ---- the flat table -----------------------------------------------------------------------------

def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _flatten_numbers(prefix: str, d: dict, out: dict, depth: int = 1) -> None:
    for k, v in d.items():
        name = f"{prefix}.{k}"
        if _is_number(v) or (v is None and depth == 1):
            out[name] = v
        elif isinstance(v, dict) and depth < _MAX_DEPTH:
            _flatten_numbers(name, v, out, depth + 1)


def key_numbers(result: dict) -> dict[str, Any]:
    """The numbers of one stored result, by column name.

    - top-level entries the sweepable returned besides verdict, reason, score and checks, when
      they are numbers, strings or booleans (its *key numbers*), by their own name;
    - the numbers in each check's evidence, as ``"<check>.<entry>"`` (nested dicts as
      ``"<check>.<entry>.<sub>"``, up to three levels); lists and texts of the evidence are left
      out (they stay in the store).

    Missing numbers are None (JSON null), never NaN in a stored result.

    Returns ``{column name: value}`` (empty for a result that is not a dict). Raises nothing."""
    out: dict[str, Any] = {}
    if not isinstance(result, dict):
        return out
    for k, v in result.items():
        if k in _NOT_NUMBERS:
            continue
        if v is None or isinstance(v, (bool, int, float, str)):
            out[str(k)] = v
    for chk in result.get("checks") or []:
        if isinstance(chk, dict) and isinstance(chk.get("evidence"), dict) and chk.get("name"):
            _flatten_numbers(str(chk["name"]), chk["evidence"], out)
    return out


def _top_level_numbers(rows: list[dict]) -> list[str]:
    names: list[str] = []
    for r in rows:
        for k, v in (r.get("result") or {}).items():
            if k not in _NOT_NUMBERS and _is_number(v) and k not in names:
                names.append(k)
    return names


def _columns(rows: list[dict]) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """Column names of the flat table, and the names the parameters and numbers got there (a
    parameter or number named like a fixed column is prefixed ``param.`` / ``result.``)."""
    fixed = set(_LEADING) | set(_TRAILING)
    pnames: dict[str, str] = {}
    for r in rows:
        for k in r["params"]:
            if k not in pnames:
                pnames[k] = f"param.{k}" if k in fixed else k
    nnames: dict[str, str] = {}
    taken = fixed | set(pnames.values())
    for r in rows:
        for k in key_numbers(r.get("result") or {}):
            if k not in nnames:
                nnames[k] = f"result.{k}" if k in taken else k
    cols = [*_LEADING, *pnames.values(), *_TRAILING, *nnames.values()]
    return cols, pnames, nnames


def flat_table(rows: list[dict], caption: str = ""):
    """Rows with results (``Store.rows(with_result=True)``) as a :class:`proofs_check.tables.Table`
    with one row per instance: ``key`` (all 32 hex digits), ``family``, ``seed``, one column per
    instance parameter, ``verdict``, ``reason``, ``score``, ``seconds`` and one column per key
    number (:func:`key_numbers`). A value an instance does not have is None.

    Returns the Table (worst first, as the rows). Raises TypeError when ``rows`` is not a list
    of row dicts."""
    from proofs_check.tables import Table

    _check_rows(rows, "flat_table")
    cols, pnames, nnames = _columns(rows)
    index = {c: j for j, c in enumerate(cols)}
    body = []
    for r in rows:
        cells: list[Any] = [None] * len(cols)
        for c in _LEADING + _TRAILING:
            cells[index[c]] = r.get(c)
        for k, v in r["params"].items():
            cells[index[pnames[k]]] = v
        for k, v in key_numbers(r.get("result") or {}).items():
            cells[index[nnames[k]]] = v
        body.append(cells)
    return Table(cols, clean(body), caption=caption, latex_caption=_text_caption(caption), digits=17,
                 meta={"columns": {"key": "instance key (sha256 of its configuration, 32 hex digits)",
                                   "score": "sweepable-defined badness, larger = worse",
                                   "seconds": "wall-clock time of the instance",
                                   "<check>.<entry>": "a number of that check's evidence"}})


def _check_rows(rows, who: str) -> None:
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "params" in r and "verdict" in r for r in rows):
        raise TypeError(f"{who}: rows must be a list of row dicts (Store.rows(with_result=True)), "
                        f"got {type(rows).__name__}")


# ---- aggregation ----------------------------------------------------------------------------------

def _sort_key(v: Any) -> tuple:
    if v is None:
        return (2, 0, "")
    if isinstance(v, bool):
        return (0, int(v), "")
    if _is_number(v):
        return (0, v, "") if math.isfinite(v) else (1, 0, str(v))
    return (1, 0, str(v))


def _names_arg(value, option: str) -> list[str]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",")]
    if isinstance(value, (bytes, dict)) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{option} must be a list of column names (or 'a,b'), got {type(value).__name__}")
    names = [v.strip() if isinstance(v, str) else v for v in value]
    if not names or not all(isinstance(n, str) and n for n in names):
        raise UsageError(f"{option} must name at least one column, got {value!r}")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UsageError(f"{option} names {dup[0]!r} twice")
    return names


def aggregate(rows: list[dict], group_by: Sequence[str] | str, numbers: Sequence[str] | str | None = None,
              caption: str = ""):
    """One row per group of instances with equal values of the ``group_by`` columns (names of
    :func:`flat_table` columns, usually parameters), as a :class:`proofs_check.tables.Table`.

    Columns: the ``group_by`` columns, ``instances``, the count of each verdict that occurs in
    ``rows`` (worst first), ``worst`` (the worst verdict over the applicable instances of the
    group, :func:`proofs_check.core.worst`), then ``min <c>`` and ``max <c>`` for each column
    ``c`` of ``numbers`` (default: ``score`` and the other top-level numbers the sweepable
    returned; any numeric flat column may be named, e.g. ``geometry.distance_etf``). min / max
    are over the finite values of the group (None if it has none). Groups are sorted by their
    values (numbers ascending, missing last).

    Raises UsageError naming an unknown or non-numeric column (the message lists the columns),
    TypeError for arguments of the wrong type."""
    from proofs_check.tables import Table

    _check_rows(rows, "aggregate")
    flat = flat_table(rows)
    cols = flat.columns
    group = _names_arg(group_by, "--group-by")
    for g in group:
        if g not in cols:
            raise UsageError(f"--group-by: no column {g!r}; the columns are: {', '.join(cols)}")
    if numbers is None:
        nums = ["score"] + [c for c in _top_level_numbers(rows) if c in cols and c != "score"]
    else:
        nums = _names_arg(numbers, "--numbers")
    for c in nums:
        if c not in cols:
            raise UsageError(f"--numbers: no column {c!r}; the columns are: {', '.join(cols)}")
        j = cols.index(c)
        bad = next((r[j] for r in flat.rows if r[j] is not None and not _is_number(r[j])), None)
        if bad is not None:
            raise UsageError(f"--numbers: column {c!r} is not numeric (it holds {bad!r})")
    gidx = [cols.index(g) for g in group]
    nidx = [cols.index(c) for c in nums]
    vj = cols.index("verdict")
    groups: dict[tuple, list[list]] = {}
    for r in flat.rows:
        groups.setdefault(tuple(r[j] for j in gidx), []).append(r)
    present = [v for v in VERDICT_ORDER if any(r[vj] == v for r in flat.rows)]
    out_cols = [*group, "instances", *present, "worst"]
    for c in nums:
        out_cols += [f"min {c}", f"max {c}"]
    body = []
    for gkey in sorted(groups, key=lambda k: tuple(_sort_key(v) for v in k)):
        members = groups[gkey]
        verdicts = [r[vj] for r in members]
        row: list[Any] = [*gkey, len(members), *[verdicts.count(v) for v in present], worst(verdicts).value]
        for j in nidx:
            vals = [r[j] for r in members if _is_number(r[j]) and math.isfinite(r[j])]
            row += [min(vals) if vals else None, max(vals) if vals else None]
        body.append(row)
    meta = {"group_by": list(group), "numbers": list(nums),
            "columns": {"instances": "number of stored instances in the group",
                        "worst": "worst verdict over the applicable instances of the group"}}
    return Table(out_cols, body, caption=caption, latex_caption=_text_caption(caption), digits=6, meta=meta)


# ---- pandas, JSON (orient="split"), Parquet ----------------------------------------------------------

def _import_pandas(what: str, hint: str = _PANDAS_HINT):
    try:
        import pandas
    except ImportError:
        raise UsageError(f"{what} needs pandas, which is not installed: {hint}") from None
    return pandas


def _check_parquet_deps(what: str = "--format parquet") -> None:
    """Parquet needs pandas and pyarrow: one message naming every one that is missing."""
    import importlib

    missing = []
    for name in ("pandas", "pyarrow"):
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise UsageError(f"{what} needs pandas and pyarrow; not installed: {', '.join(missing)}: {_PARQUET_HINT}")


def table_to_dataframe(table):
    """A :class:`proofs_check.tables.Table` as a pandas DataFrame (columns in order; None stays
    missing). Raises UsageError when pandas is not installed."""
    pd = _import_pandas("table_to_dataframe")
    return pd.DataFrame.from_records([list(r) for r in table.rows], columns=list(table.columns))


def to_dataframe(source, *, config=None, family: str | None = None, group_by: Sequence[str] | str | None = None,
                 numbers: Sequence[str] | str | None = None):
    """Stored sweep results as a pandas DataFrame (pandas is imported here, not before).

    ``source``: the path of a SQLite store, an open :class:`~proofs_check.sweep.store.Store`,
    or rows from ``Store.rows(with_result=True)``. ``config``: a :class:`SweepSpec` or a config
    path restricting the rows to its instances (its modules are not imported); ``family``:
    only that sweepable's rows. Without ``group_by``: the flat table (:func:`flat_table`, one
    row per instance, one column per parameter and per key number); with ``group_by``: the
    aggregate (:func:`aggregate`, counts of verdicts and min / max of ``numbers``).

    Returns a ``pandas.DataFrame``. Raises UsageError when pandas is not installed (with the
    command that installs it), when the store does not exist or is not a store, or for an
    unknown column; TypeError for arguments of the wrong type."""
    pd = _import_pandas("to_dataframe")
    rows = _rows_from(source, config, family)
    table = flat_table(rows) if group_by is None else aggregate(rows, group_by, numbers)
    return pd.DataFrame.from_records([list(r) for r in table.rows], columns=list(table.columns))


def _rows_from(source, config, family) -> list[dict]:
    from proofs_check.sweep.config import SweepSpec, load_config
    from proofs_check.sweep.store import Store

    if isinstance(source, list):
        _check_rows(source, "to_dataframe")
        return source
    spec = None
    if config is not None:
        if isinstance(config, (str, os.PathLike)):
            spec = load_config(config, import_modules=False)
        elif isinstance(config, SweepSpec):
            spec = config
        else:
            raise TypeError(f"to_dataframe: config must be a SweepSpec or a config path, got {type(config).__name__}")
    if family is not None and not isinstance(family, str):
        raise TypeError(f"to_dataframe: family must be a str, got {type(family).__name__}")
    if isinstance(source, Store):
        return load_rows(source, spec, family=family)[0]
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"to_dataframe: source must be a store path, a Store or a list of rows, "
                        f"got {type(source).__name__}")
    path = os.fspath(source)
    if not os.path.isfile(path):
        raise UsageError(f"--store {path}: no such store (run the sweep first)")
    store = Store(path, readonly=True)
    try:
        return load_rows(store, spec, family=family)[0]
    finally:
        store.close()


def split_json(table) -> str:
    """A table as JSON in pandas' ``orient="split"`` layout (``columns``, ``index``, ``data``),
    so ``pd.read_json(path, orient="split")`` reads it. Missing numbers are null.

    Note: pandas infers column types when reading; keep strings that look like numbers (e.g. a
    parameter ``"001"``) as text with ``dtype={"name": str}``."""
    data = clean([list(r) for r in table.rows])
    return json.dumps({"columns": list(table.columns), "index": list(range(len(data))), "data": data},
                      indent=1, allow_nan=False) + "\n"


def parquet_bytes(table) -> bytes:
    """A table as Parquet (pandas + pyarrow). A column that mixes numbers and strings is written
    as strings (Parquet columns have one type). Raises UsageError when pandas or pyarrow is
    missing."""
    _check_parquet_deps()
    df = table_to_dataframe(table)
    for c in df.columns:
        kinds = {("num" if _is_number(v) else type(v).__name__) for v in df[c].tolist()
                 if v is not None and not (isinstance(v, float) and math.isnan(v))}
        if len(kinds) > 1:
            df[c] = [None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v) for v in df[c]]
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


def export_format(path: str, fmt: str | None) -> str:
    """The format of ``--export PATH``: ``fmt`` when given, else from the extension (.md, .tex,
    .csv, .json, .parquet/.pq), else md. Raises UsageError for an unknown ``fmt``."""
    if fmt is not None:
        if fmt not in EXPORT_FORMATS:
            raise UsageError(f"--format must be one of {', '.join(EXPORT_FORMATS)}, got {fmt!r}")
        return fmt
    return _EXTENSIONS.get(os.path.splitext(str(path))[1].lower(), "md")


def check_export(fmt: str, group_by=None, numbers=None) -> None:
    """Before any work: the optional packages of ``fmt`` are installed; ``--numbers`` goes with
    ``--group-by``. Raises UsageError."""
    if fmt == "parquet":
        _check_parquet_deps()
    if numbers is not None and group_by is None:
        raise UsageError("--numbers needs --group-by (it names the numbers aggregated per group)")


def export_table(rows: list[dict], fmt: str, *, group_by=None, numbers=None, caption: str = ""):
    """The table ``--export`` writes in ``fmt``: the aggregate with ``group_by``; else the flat
    table for csv / json / parquet and :func:`results_table` (for reading) for md / latex."""
    if group_by is not None:
        return aggregate(rows, group_by, numbers, caption=caption)
    if fmt in ("csv", "json", "parquet"):
        return flat_table(rows, caption=caption)
    return results_table(rows, caption=caption)


def render_export(table, fmt: str) -> bytes:
    """Bytes of ``table`` in ``fmt``: JSON in the ``orient="split"`` layout, Parquet via pyarrow,
    the other formats by :meth:`proofs_check.tables.Table.render`."""
    if fmt == "parquet":
        return parquet_bytes(table)
    if fmt == "json":
        return split_json(table).encode("utf-8")
    return table.render(fmt).encode("utf-8")


def write_export(path, rows: list[dict], fmt: str | None = None, *, group_by=None, numbers=None,
                 caption: str = "") -> str:
    """Write the export of ``rows`` to ``path`` atomically (see :func:`export_table`); returns
    the format used. Raises UsageError (missing optional package, unknown column, bad path)."""
    from proofs_check.outputs import write_bytes_atomic

    fmt = export_format(path, fmt)
    check_export(fmt, group_by, numbers)
    write_bytes_atomic(path, render_export(export_table(rows, fmt, group_by=group_by, numbers=numbers,
                                                        caption=caption), fmt))
    return fmt

