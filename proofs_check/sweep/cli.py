"""``ncproofs sweep``: argument parsing and the command (used by proofs_check.families.workflow)."""

from __future__ import annotations

import math
import os
import sqlite3
import sys
from pathlib import Path

from proofs_check.commands import UsageError
from theory._validate import InputError
from proofs_check.sweep.config import MAX_WORKERS, SweepSpec, load_config
from proofs_check.sweep.execution import SweepInterrupted, run_sweep
from proofs_check.sweep.dask_backend import DEFAULT_CONNECT_TIMEOUT
from proofs_check.sweep.export import (EXPORT_FORMATS, aggregate, check_export, export_format, load_rows, summary_text,
                                       write_export)
from proofs_check.tables import FORMATS
from proofs_check.sweep.store import Store


def add_arguments(p) -> None:
    """Add the arguments of ``ncproofs sweep`` to the argparse (sub)parser ``p``.

    Returns None. Raises ``argparse.ArgumentError`` if ``p`` already has one of them."""
    p.add_argument("config", nargs="?", metavar="CONFIG",
                   help="sweep config (TOML); optional with --summary")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run on an existing Dask cluster, e.g. tcp://host:8786 (default: $DASK_SCHEDULER_ADDRESS, "
                        "else local processes; needs the dask[distributed] extra)")
    p.add_argument("--store", metavar="PATH", default=None,
                   help="SQLite results store (default: sweep.store in the config, else CONFIG with .sqlite)")
    p.add_argument("--summary", action="store_true",
                   help="do not compute: print verdict counts and the worst instances from the store")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="local worker processes (default: sweep.workers, else the CPU count; 1 = in-process)")
    p.add_argument("--worst", type=int, default=10, metavar="N", help="number of worst instances shown (default 10)")
    p.add_argument("--format", choices=EXPORT_FORMATS, default=None,
                   help="table format of the printed summary (md, latex, csv, json; default md) and of --export "
                        "(also parquet; default: from the file's extension, else md)")
    p.add_argument("--export", metavar="PATH", default=None,
                   help="write the sweep's stored results: csv/json/parquet one row per instance with a column per "
                        "parameter and per key number (json: pandas orient='split'); md/latex a readable table; "
                        "with --group-by the aggregate")
    p.add_argument("--group-by", metavar="A,B,...", default=None,
                   help="aggregate per group of these columns (usually parameters): count of each verdict, worst "
                        "verdict, min/max of --numbers; printed after the summary and written by --export")
    p.add_argument("--numbers", metavar="A,B,...", default=None,
                   help="numeric columns aggregated by --group-by (default: score and the sweepable's top-level "
                        "numbers; e.g. geometry.distance_etf for a number of a check's evidence)")
    p.add_argument("--connect-timeout", type=float, default=DEFAULT_CONNECT_TIMEOUT, metavar="S",
                   help=f"seconds to wait for the Dask scheduler (default {DEFAULT_CONNECT_TIMEOUT:g})")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--rigorous", action="store_true",
                   help="same as rigorous = true in [sweep]: each instance's solve report is judged in ball arithmetic "
                        "(python-flint; docs/rigorous.md) and stores the proven bracket (rigorous_lower, "
                        "rigorous_upper, rigorous); rigorous instances have their own keys. With --summary: show "
                        "the rigorous instances of CONFIG")


def _store_path(args, spec: SweepSpec | None) -> str:
    if args.store:
        return args.store
    if spec is not None and spec.store:
        base = Path(spec.path).resolve().parent if spec.path else Path.cwd()
        return str(base / spec.store)
    if spec is not None and spec.path:
        return str(Path(spec.path).with_suffix(".sqlite"))
    raise UsageError("--summary needs CONFIG or --store PATH")


def _check_args(args) -> None:
    if args.workers is not None and not 1 <= args.workers <= MAX_WORKERS:
        raise UsageError(f"--workers must be >= 1 and <= {MAX_WORKERS}, got {args.workers}")
    if args.worst < 0:
        raise UsageError(f"--worst must be >= 0, got {args.worst}")
    if not (math.isfinite(args.connect_timeout) and args.connect_timeout > 0):
        raise UsageError(f"--connect-timeout must be a finite number > 0, got {args.connect_timeout}")
    if args.store is not None and not args.store.strip():
        raise UsageError("--store must be a non-empty path")
    if args.format == "parquet" and not args.export:
        raise UsageError("--format parquet is a file format: use it with --export PATH")
    if args.export:
        check_export(export_format(args.export, args.format), args.group_by, args.numbers)
    elif args.numbers is not None and args.group_by is None:
        raise UsageError("--numbers needs --group-by (it names the numbers aggregated per group)")


def _check_store_file(path: str, *, must_exist: bool) -> None:
    from proofs_check.outputs import check_output_path

    if os.path.isdir(path):
        raise UsageError(f"--store {path}: is a directory, not a SQLite store")
    if must_exist:
        if not os.path.exists(path):
            raise UsageError(f"--store {path}: no such store (run the sweep first)")
        if not os.path.isfile(path):
            raise UsageError(f"--store {path}: not a regular file")
    else:
        check_output_path(path, "--store")  # its folder exists and is writable, before any work


def _short_path(text: str) -> str:
    return text if len(text) <= 80 else text[:40] + "…" + text[-20:]


def main_from_args(args) -> int:
    """Run ``ncproofs sweep`` with parsed arguments (:func:`add_arguments`).

    Returns the exit status: 0, 1 when an instance is REFUTED or ERROR (or a worker / the
    scheduler was lost), 128 + signal when interrupted. Raises ``UsageError`` (an InputError:
    the CLI prints it and exits 2) for bad arguments, configs, stores and output paths, checked
    before any work."""
    _check_args(args)
    from proofs_check.outputs import check_output_path

    check_output_path(args.export, "--export")  # before any work
    path = None
    try:
        if args.summary:
            return _summary(args)
        if not args.config:
            raise UsageError("sweep needs CONFIG (a TOML file), or --summary --store PATH")
        try:
            spec = load_config(args.config)
        except InputError as exc:  # name the file the key is in ('[sweep] table is missing' named neither)
            msg = str(exc)
            if str(args.config) in msg:
                raise
            raise UsageError(f"CONFIG {_short_path(str(args.config))}: {msg}") from None
        if getattr(args, "rigorous", False):
            spec.rigorous = True
        path = _store_path(args, spec)
        _check_store_file(path, must_exist=False)
        try:
            out = run_sweep(spec, path, scheduler=args.scheduler, workers=args.workers, progress=not args.quiet,
                            connect_timeout=args.connect_timeout)
        except SweepInterrupted as exc:
            print(f"ncproofs: {exc}", file=sys.stderr)
            return exc.exit_status
        except RuntimeError as exc:  # a lost scheduler or worker: the run is recorded as interrupted
            print(f"ncproofs: error: {exc}", file=sys.stderr)
            return 1
        store = Store(path)
        try:
            rows = store.rows([i.key for i in spec.instances()], with_result=_wants_results(args, spec))
        finally:
            store.close()
        by = f", {out.elsewhere} by another sweep on the same store" if out.elsewhere else ""
        print(f"sweep {spec.family}: {out.total} instances ({out.skipped} already stored, {out.computed} computed"
              f"{by}) -> {path}")
        sys.stdout.write(summary_text(rows, pending=out.total - len(rows), worst_n=args.worst, fmt=_print_format(args),
                                      rigorous=spec.rigorous))
        _maybe_group(args, rows, path)
        _maybe_export(args, rows, path)
        return 1 if any(r["verdict"] in ("REFUTED", "ERROR") for r in rows) else 0
    except sqlite3.DatabaseError as exc:  # damaged or locked store found after it was opened
        raise UsageError(f"--store {path or args.store}: not a usable SQLite store ({exc})") from None


def _summary(args) -> int:
    """``--summary``: read the store only. The config's ``modules`` are never imported (they are
    code); instance keys come from the built-in sweepable or from what the store recorded."""
    unused = [o for o, v in (("--workers", args.workers), ("--scheduler", args.scheduler)) if v is not None]
    if unused:  # options of a computing sweep: with --summary nothing is computed, so they did nothing
        raise UsageError(f"{' and '.join(unused)} {'have' if len(unused) > 1 else 'has'} no effect with --summary "
                         "(it reads the store only, nothing is computed)")
    spec = load_config(args.config, import_modules=False) if args.config else None
    if spec is not None and getattr(args, "rigorous", False):
        spec.rigorous = True
    elif spec is None and getattr(args, "rigorous", False):
        raise UsageError("--summary --rigorous needs CONFIG (the rigorous instances are those of a config)")
    path = _store_path(args, spec)
    _check_store_file(path, must_exist=True)
    store = Store(path, readonly=True)  # --summary reads only: never creates tables, works on read-only files
    try:
        rows, pending = load_rows(store, spec, with_result=_wants_results(args, spec))
    except sqlite3.DatabaseError as exc:
        raise UsageError(f"--store {path}: not a usable SQLite store ({exc})") from None
    finally:
        store.close()
    sys.stdout.write(summary_text(rows, pending=pending, worst_n=args.worst, fmt=_print_format(args),
                                  rigorous=bool(spec is not None and spec.rigorous)))
    _maybe_group(args, rows, path)
    _maybe_export(args, rows, path)
    return 0


def _print_format(args) -> str:
    """Format of what is printed: --format, except parquet (a file format), else md."""
    return args.format if args.format in FORMATS else "md"


def _wants_results(args, spec: SweepSpec | None = None) -> bool:
    """The whole stored results are read only when an export, an aggregate or the bracket columns of a
    rigorous sweep's summary need them."""
    return bool(args.export or args.group_by or (spec is not None and spec.rigorous))


def _caption(store_path: str) -> str:
    return f"ncproofs sweep results from {os.path.basename(store_path)}"


def _maybe_group(args, rows: list[dict], store_path: str) -> None:
    if args.group_by is None:
        return
    table = aggregate(rows, args.group_by, args.numbers, caption=_caption(store_path))
    sys.stdout.write("\n" + f"by {args.group_by}:\n" + table.render(_print_format(args)))


def _maybe_export(args, rows: list[dict], store_path: str) -> None:
    if not args.export:
        return
    fmt = write_export(args.export, rows, args.format, group_by=args.group_by, numbers=args.numbers,
                       caption=_caption(store_path))
    print(f"table ({fmt}): {args.export}", file=sys.stderr)
