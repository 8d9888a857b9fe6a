"""Tables for papers: one data object, rendered as Markdown, LaTeX (booktabs), CSV or JSON.

LaTeX output compiles in a plain ``article`` that loads booktabs, array and siunitx (the preamble the
tests use also loads amsmath, amssymb, graphicx, longtable and caption). What the LaTeX renderer
guarantees (docs/outputs.md):

- every text is escaped; plain-text math in captions and headers (``e^{-1/tau}``,
  ``lw/2||W||^2``, ``lambda_crit``, ``tau -> 0+``) is converted to ``$...$`` by a conservative
  converter (:func:`plain_to_latex`): a stretch it cannot convert with certainty stays escaped
  text, so the output compiles either way; a family may give ``latex_caption`` /
  ``latex_columns`` (alias ``latex_headers``) written in LaTeX itself, used verbatim;
- numeric columns are siunitx ``S`` columns (aligned at the decimal point) with one notation per
  column (fixed when every nonzero |x| is in :data:`FIXED_RANGE`, else scientific), ``precision`` /
  ``sig`` significant digits with trailing zeros kept or ``decimals`` fixed decimals, per column;
  missing numbers print ``na_rep`` (default ``--``); all-empty columns are left out;
- ``\\caption`` and ``\\label`` (default ``tab:ncproofs-<family>``), the document's type size (never
  ``\\small``, never scaled); a table wider than the line is split into a main table and tables of
  further columns that repeat the instance columns (``wide=True``: one tabular); long text columns wrap;
- the caption is short (its first sentence, repository paths removed; the rest is a note under the
  table) and ends with ``\\cite{...}`` of the papers the table relies on (keys of
  :mod:`proofs_check.citations`; ``ncproofs cite`` prints their BibTeX).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from theory._validate import InputError, int_from_text

FORMATS = ("md", "latex", "csv", "json")
#: digits of the printed numbers: 1 .. 17 (float64 needs at most 17 significant digits)
MAX_DIGITS = 17
#: significant digits of numbers in LaTeX tables unless --precision says otherwise: four
#: digits is what a paper table shows (the JSON/CSV formats keep every digit)
LATEX_DEFAULT_DIGITS = 4
#: what a missing number (None, NaN, inf) prints as in LaTeX unless --na-rep says otherwise
LATEX_DEFAULT_NA = "--"
#: a text column whose longest cell has more characters than this wraps (a p column)
_WRAP_CHARS = 24
_LABEL_RE = re.compile(r"^[A-Za-z0-9:._/+\-]+$")


# ---- cells ------------------------------------------------------------------------------------

def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _cell(x: Any, digits: int, na: str = "null", mode: str | None = None) -> str:
    if x is None:
        return na
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        if not math.isfinite(x):
            return na
        if mode is not None:
            return directed_format(x, digits, mode)
        return f"{x:.{digits}g}"
    return str(x)


def _md_text(text: str) -> str:
    """A Markdown table cell or header: ``|`` escaped, line breaks and other control characters as spaces (a
    newline inside a cell, e.g. a sweepable's reason, ended the row and broke the table)."""
    return "".join(" " if (not ch.isprintable() and ch != " ") else ch for ch in str(text)).replace("|", "\\|")


def _latex_number(x: Any, digits: int, na: str, mode: str | None = None) -> str:
    """A number in math mode with ``digits`` significant digits (rounded to nearest, or toward -inf / +inf
    with ``mode`` "down" / "up"); ``na`` (escaped) if missing."""
    if isinstance(x, float) and not math.isfinite(x):
        return latex_escape(na)
    if isinstance(x, int):
        s = str(x)
    elif mode is not None:
        s = directed_format(float(x), digits, mode)
    else:
        s = f"{x:.{digits}g}"
    m = re.fullmatch(r"(-?[0-9.]+)e([+-])0*([0-9]+)", s)
    if m:
        mant, sign, exp = m.groups()
        s = rf"{mant}\times10^{{{'-' if sign == '-' else ''}{exp}}}"
    return f"${s}$"


#: directions of :attr:`Table.rounding`: "down" (toward -inf: a proven lower bound stays a lower bound when
#: printed), "up" (toward +inf: a proven feasible value / upper bound stays an upper bound)
ROUNDING_MODES = ("down", "up")


def directed_format(x: float, digits: int, mode: str) -> str:
    """``x`` with ``digits`` significant digits, rounded toward -inf (``mode="down"``) or +inf (``"up"``), in
    the style of Python's ``f"{x:.{digits}g}"`` (trailing zeros dropped, ``1e-05`` exponents). The decimal is
    computed from the exact binary value of ``x`` (:mod:`decimal`), so a printed lower bound is <= x and a
    printed upper bound is >= x, at every precision."""
    from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext

    if mode not in ROUNDING_MODES:
        raise ValueError(f"rounding mode must be one of {', '.join(ROUNDING_MODES)}, got {mode!r}")
    if not math.isfinite(x):
        raise ValueError(f"directed_format needs a finite number, got {x!r}")
    if x == 0:
        return "0" if math.copysign(1.0, x) > 0 else "-0"
    d = Decimal(x)  # exact
    how = ROUND_FLOOR if mode == "down" else ROUND_CEILING
    with localcontext() as ctx:
        ctx.prec = 60
        q = d.quantize(Decimal(1).scaleb(d.adjusted() - digits + 1), rounding=how)
        if q.adjusted() > d.adjusted():  # 9.99 -> 10.0 (up): one digit too many, a power of ten: exact
            q = q.quantize(Decimal(1).scaleb(q.adjusted() - digits + 1), rounding=how)
        exp = q.adjusted()
        if -4 <= exp < digits:
            text = format(q, "f")
            if "." in text:
                text = text.rstrip("0").rstrip(".")
            return text
        mant = format(q.scaleb(-exp), "f")
        if "." in mant:
            mant = mant.rstrip("0").rstrip(".")
        return f"{mant}e{'-' if exp < 0 else '+'}{abs(exp):02d}"


# ---- LaTeX number columns (siunitx S columns, one notation per column) ------------------------------------------

#: a float column prints in fixed notation when every nonzero |x| lies in this range, else the whole column is
#: scientific (never ``1.86e-8`` next to ``0.000409`` in one column)
FIXED_RANGE = (1e-3, 1e5)
#: \linewidth of the standard article class at 10 pt, in points: wider tables are split (see :meth:`Table.to_latex`)
LINEWIDTH_PT = 345.0
#: width of a digit (and a rough average character) at 10 pt, in points
_CHAR_PT = 5.0
_SEP_PT = 12.0  # 2 x \tabcolsep


def _quantize(x: float, exp: int, mode: str | None):
    """The exact binary value of ``x`` rounded to a multiple of 10^exp: to nearest (ties to even, as Python's
    formatting), or toward -inf / +inf with ``mode`` "down" / "up"."""
    from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal, localcontext

    how = {None: ROUND_HALF_EVEN, "down": ROUND_FLOOR, "up": ROUND_CEILING}[mode]
    with localcontext() as ctx:
        ctx.prec = 80
        return Decimal(x).quantize(Decimal(1).scaleb(exp), rounding=how)


def _sig_decimal(x: float, sig: int, mode: str | None):
    """``x`` rounded to ``sig`` significant digits (Decimal; 9.9996 -> 10.00 keeps ``sig`` digits)."""
    from decimal import Decimal

    e = Decimal(x).adjusted()
    q = _quantize(x, e - sig + 1, mode)
    if q != 0 and q.adjusted() > e:
        q = _quantize(x, q.adjusted() - sig + 1, mode)
    return q


def _plain(q) -> str:
    text = format(q, "f")
    if text.startswith("-") and not text.strip("-0."):
        text = text[1:]  # -0.000 rounded to nearest: 0.000
    return text


def format_fixed(x: float, decimals: int, mode: str | None = None) -> str:
    """``x`` with exactly ``decimals`` decimals (trailing zeros kept), rounded to nearest or ``mode``."""
    return _plain(_quantize(x, -decimals, mode))


def format_sig(x: float, sig: int, mode: str | None = None, notation: str = "fixed") -> str:
    """``x`` with ``sig`` significant digits, trailing zeros kept (``1.100``, not ``1.1``): ``notation`` "fixed"
    (``0.0004090``) or "sci" (``4.090e-4``, the form siunitx reads)."""
    if x == 0:
        return "0" if notation == "fixed" or sig == 1 else "0." + "0" * (sig - 1)
    q = _sig_decimal(x, sig, mode)
    if notation == "fixed":
        return _plain(q)
    exp = q.adjusted()
    mant = _plain(q.scaleb(-exp))
    return f"{mant}e{exp}"


def _numeric_strings(values: list, *, sig: int, decimals: int | None, mode: str | None,
                     exact: bool = False) -> tuple[list, str]:
    """The printed numbers of one numeric column (None for a missing cell) and its notation ("int", "fixed",
    "sci"). Integer columns print as integers; a float column is fixed when every nonzero |x| is in
    :data:`FIXED_RANGE` (or ``decimals`` is given), else scientific; one notation for the whole column."""
    finite = [v for v in values if v is not None and math.isfinite(float(v))]
    if finite and all(isinstance(v, int) for v in finite) and decimals is None:
        return [None if v is None or not math.isfinite(float(v)) else str(int(v)) for v in values], "int"
    if decimals is not None:
        notation = "fixed"
    else:
        nz = [abs(float(v)) for v in finite if float(v) != 0.0]
        notation = "fixed" if all(FIXED_RANGE[0] <= a < FIXED_RANGE[1] for a in nz) else "sci"
    out = []
    for v in values:
        if v is None or not math.isfinite(float(v)):
            out.append(None)
        elif decimals is not None:
            out.append(format_fixed(float(v), decimals, mode))
        else:
            text = format_sig(float(v), sig, mode, notation)
            if exact:  # an input parameter: its own digits (0.001, 0.5), no padding zeros
                m, e, x = text.partition("e")
                if "." in m:
                    m = m.rstrip("0").rstrip(".")
                text = m + e + x
            out.append(text)
    return out, notation


def _table_format(strings: list[str], notation: str) -> str:
    """siunitx ``table-format`` of the printed numbers of a column (sign, integer digits, decimals, exponent)."""
    nums = [x for x in strings if x is not None]
    if not nums:
        return "1.0"
    sign = "-" if any(x.startswith("-") for x in nums) else ""
    mants, exps = [], []
    for x in nums:
        m, _, e = x.lstrip("-").partition("e")
        mants.append(m)
        if e:
            exps.append(e)
    ints = max(len(m.split(".")[0]) for m in mants)
    decs = max(len(m.split(".")[1]) if "." in m else 0 for m in mants)
    spec = f"{sign}{ints}.{decs}"
    if exps:
        esign = "-" if any(e.startswith("-") for e in exps) else ""
        spec += f"e{esign}{max(len(e.lstrip('-')) for e in exps)}"
    return spec


def _format_width_pt(spec: str) -> float:
    m = re.fullmatch(r"(-?)([0-9]+)\.([0-9]+)(?:e(-?)([0-9]+))?", spec)
    if not m:
        return 30.0
    sign, ints, decs, esign, edig = m.groups()
    w = (int(ints) + int(decs)) * _CHAR_PT + (2.8 if int(decs) else 0) + (7.8 if sign else 0)
    if edig:
        w += 7.8 + 10.0 + 3.5 * (int(edig) + (1 if esign else 0))  # \times 10^{-e}
    return w


def _header_width_pt(head: str) -> float:
    """A rough width of a LaTeX header: commands count as one character, braces and $ as none."""
    text = re.sub(r"\\[A-Za-z]+\*?", "x", head)
    text = re.sub(r"[${}^_]", "", text)
    return len(text) * _CHAR_PT * 0.9


def parse_column_digits(text, what: str = "--decimals") -> dict:
    """``--decimals`` / ``--sig`` values: ``N`` (every column), ``COL=N,COL=N`` (those columns) or both
    (``4,gap=2``). Returns ``{column or "*": N}``; a malformed entry is an InputError naming the option."""
    if text is None:
        return {}
    if isinstance(text, Mapping):
        return dict(text)
    if isinstance(text, int) and not isinstance(text, bool):
        return {"*": text}
    if not isinstance(text, str):
        raise TypeError(f"{what} must be N or COL=N,COL=N, got {type(text).__name__}")
    out = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise InputError(f"{what}: empty entry in {text!r} (expected N or COL=N,COL=N)")
        col, eq, num = part.rpartition("=")
        if not eq:
            col, num = "*", part
        elif not col.strip():
            raise InputError(f"{what}: {part!r} names no column (expected N or COL=N,COL=N)")
        col = col.strip()
        if col in out:  # '3,5' or 'gap=2,gap=3': which one was meant? (the last one won silently)
            raise InputError(f"{what}: " + ("N is given twice" if col == "*" else f"column {col!r} is given twice")
                             + f" in {text!r}")
        try:
            out[col] = int_from_text(num)  # the integer syntax of every option (no 3_0, no other scripts' digits)
        except ValueError:
            raise InputError(f"{what}: {part!r} is not N or COL=N (N an integer)") from None
    return out


def _check_digits_map(m: dict, columns: Sequence[str], what: str, lo: int, hi: int) -> dict:
    for col, n in m.items():
        if col != "*" and col not in columns:
            raise InputError(f"{what}: no column {col!r}; the columns are: " + ", ".join(columns))
        if isinstance(n, bool) or not isinstance(n, int) or not lo <= n <= hi:
            raise InputError(f"{what} must be in {lo}..{hi}, got {n!r}" + ("" if col == "*" else f" for {col}"))
    return m


_PATH_IN_PARENS = re.compile(r"\s*\((?:see\s+)?docs/[A-Za-z0-9_\\\-]+\.md(?:,\s*[^()]*)?\)")
_PATH_BEFORE_PAREN = re.compile(r"[;,]\s*(?:see\s+)?docs/[A-Za-z0-9_\\\-]+\.md(?:,\s*'[^']*')?(?=\))")
_PATH_BARE = re.compile(r"\s*(?:see\s+)?docs/[A-Za-z0-9_\\\-]+\.md(?:,\s*'[^']*')?")
_ABBREV = ("al", "e.g", "i.e", "cf", "Thm", "Eq", "vs", "Sec", "resp", "etc", "Fig", "approx", "mult", "res", "stat")


def strip_file_paths(text: str) -> str:
    """A caption without repository file paths (``(docs/ufm.md)``, ``; docs/crh.md)``, ``docs/x.md.``): a
    caption cites papers (by \\cite key or name and year), not files of this repository."""
    text = _PATH_IN_PARENS.sub("", text)
    text = _PATH_BEFORE_PAREN.sub("", text)
    text = _PATH_BARE.sub("", text)
    text = re.sub(r"\(\s*\)", "", text)
    text = re.sub(r"\s+([.,;:])", r"\1", text)
    text = re.sub(r"[;,:]+\s*([.)])", r"\1", text)
    text = re.sub(r"([.;,])\1+", r"\1", text)
    return re.sub(r"\s{2,}", " ", text).strip()


#: a first sentence longer than this is cut at its first top-level ": " or "; " (the caption stays short)
CAPTION_MAX_CHARS = 300


def split_caption(text: str) -> tuple[str, str]:
    """(first sentence, the rest) of a LaTeX caption: the split is a ". " outside math and braces, not after an
    abbreviation (et al., e.g., Thm.), followed by an upper-case letter, a digit, a parenthesis or math; a first
    sentence longer than :data:`CAPTION_MAX_CHARS` is cut at its first ": " or "; " outside math, braces and
    parentheses."""
    first, rest = _split_sentence(text)
    if len(first) > CAPTION_MAX_CHARS:
        depth, math_on = 0, False
        for i, ch in enumerate(first[:CAPTION_MAX_CHARS]):
            if ch == "$" and (i == 0 or first[i - 1] != "\\"):
                math_on = not math_on
            elif ch in "({[":
                depth += 1
            elif ch in ")}]":
                depth -= 1
            elif ch in ":;" and not math_on and depth == 0 and first[i + 1:i + 2] == " " and i > 20:
                tail = first[i + 2:].strip()
                return first[:i] + ".", (tail[:1].upper() + tail[1:] + (" " + rest if rest else "")).strip()
    return first, rest


def _split_sentence(text: str) -> tuple[str, str]:
    depth, math_on = 0, False
    for i, ch in enumerate(text):
        if ch == "\\" and i + 1 < len(text) and text[i + 1] == "$":
            continue
        if ch == "$" and (i == 0 or text[i - 1] != "\\"):
            math_on = not math_on
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "." and not math_on and depth == 0 and text[i + 1:i + 2] == " ":
            nxt = text[i + 2:i + 3]
            word = re.search(r"([A-Za-z.]+)$", text[:i])
            if word and word.group(1).rstrip(".") in _ABBREV:
                continue
            if nxt and (nxt.isupper() or nxt.isdigit() or nxt in "($\\"):
                return text[:i + 1], text[i + 2:].strip()
    return text, ""


#: column names that identify an instance (kept in every part of a split LaTeX table)
KEY_NAMES = frozenset("k n K N L D d C m s counts label lambda lambda_w lambda_h lw lh eps tau gamma weight_decay "
                      "layer rho kappa loss".split())


def key_columns(table) -> list[str]:
    """The columns that identify a row: :attr:`Table.key_columns` where given, else the leading columns named
    in :data:`KEY_NAMES` (at most four), else the first column."""
    if table.key_columns:
        return [c for c in table.key_columns if c in table.columns]
    out = []
    for c in table.columns[:4]:
        if c not in KEY_NAMES:
            break
        out.append(c)
    return out or list(table.columns[:1])


# text escaping and plain-text math live in proofs_check/latex_text.py (imported by citations.py too)
from proofs_check.latex_text import GREEK, caption_source, latex_escape, math_to_latex, plain_to_latex  # noqa: E402,F401


# ---- the table ------------------------------------------------------------------------------------

@dataclass
class Table:
    """Columns, rows (lists of numbers/strings/None) and a caption stating conventions.

    ``latex_columns`` (alias ``latex_headers``) and ``latex_caption`` are optional LaTeX sources
    (math allowed, used verbatim); without them the plain headers and caption are converted by
    :func:`plain_to_latex`."""

    columns: list[str]
    rows: list[list[Any]]
    caption: str = ""
    latex_columns: list[str] | None = None  # optional LaTeX headers (math allowed, not escaped)
    digits: int = 8
    meta: dict = field(default_factory=dict)
    latex_caption: str | None = None  # optional LaTeX caption (math allowed, not escaped)
    latex_headers: list[str] | None = None  # alias of latex_columns
    #: {column name: "down" | "up"}: numbers of that column printed (md, LaTeX) rounded toward -inf / +inf
    #: instead of to nearest (proven bounds stay bounds); csv/json keep every digit
    rounding: dict | None = None
    #: [(LaTeX text, [column names])]: a header row above the column headers spanning those adjacent columns
    #: (LaTeX only, with \cmidrule); a group whose columns are not adjacent after --columns is left out
    header_groups: list | None = None
    #: plain-text notes printed below the table (md: after the caption; LaTeX: a footnote-size paragraph under
    #: the tabular, kept when --caption replaces the caption; json: "notes"; csv: none)
    notes: list | None = None
    #: columns that identify a row (repeated in every part when a LaTeX table is split); default: the leading
    #: columns named like instance parameters (:func:`key_columns`)
    key_columns: list | None = None
    #: columns of the first LaTeX table when it is split (the rest go to "further columns" tables); default: the
    #: columns in order
    primary: list | None = None

    def __post_init__(self):
        if self.latex_headers is not None:
            if self.latex_columns is not None and list(self.latex_columns) != list(self.latex_headers):
                raise InputError("latex_headers and latex_columns are the same thing: give one of them")
            self.latex_columns = self.latex_headers
        self.latex_headers = self.latex_columns
        self.validate()

    def validate(self) -> None:
        """Check the table (also before each rendering: rows may be appended after construction).
        Raises InputError / TypeError naming the field."""
        cols = self.columns
        if isinstance(cols, (str, bytes)) or not isinstance(cols, (list, tuple)):
            raise TypeError(f"columns must be a list of strings, got {type(cols).__name__} {cols!r}")
        if not cols:
            raise InputError("columns must not be empty (a table needs at least one column)")
        for i, c in enumerate(cols):
            if not isinstance(c, str):
                raise TypeError(f"columns[{i}] must be a string, got {type(c).__name__} {c!r}")
        if isinstance(self.rows, (str, bytes)) or not isinstance(self.rows, (list, tuple)):
            raise TypeError(f"rows must be a list of rows (lists of cells), got {type(self.rows).__name__}")
        for i, r in enumerate(self.rows):
            if isinstance(r, (str, bytes, Mapping)) or not isinstance(r, (list, tuple)):
                raise TypeError(f"rows[{i}] must be a list of cells, got {type(r).__name__} {r!r}")
            if len(r) != len(cols):
                raise InputError(f"rows[{i}] has {len(r)} cells, expected {len(cols)} (one per column)")
        if not isinstance(self.caption, str):
            raise TypeError(f"caption must be a string, got {type(self.caption).__name__}")
        if self.latex_caption is not None and not isinstance(self.latex_caption, str):
            raise TypeError(f"latex_caption must be a string or None, got {type(self.latex_caption).__name__}")
        if self.latex_columns is not None:
            lc = self.latex_columns
            if isinstance(lc, (str, bytes)) or not isinstance(lc, (list, tuple)):
                raise TypeError(f"latex_columns must be a list of strings or None, got {type(lc).__name__}")
            if len(lc) != len(cols):
                raise InputError(f"latex_columns has {len(lc)} entries, expected {len(cols)} (one per column)")
            for i, c in enumerate(lc):
                if not isinstance(c, str):
                    raise TypeError(f"latex_columns[{i}] must be a string, got {type(c).__name__}")
        if isinstance(self.digits, bool) or not isinstance(self.digits, int):
            raise TypeError(f"digits must be an integer in 1..{MAX_DIGITS}, got {type(self.digits).__name__} "
                            f"{self.digits!r}")
        if not 1 <= self.digits <= MAX_DIGITS:
            raise InputError(f"digits must be in 1..{MAX_DIGITS}, got {self.digits}")
        if not isinstance(self.meta, Mapping):
            raise TypeError(f"meta must be a dict, got {type(self.meta).__name__}")
        if self.rounding is not None:
            if not isinstance(self.rounding, Mapping):
                raise TypeError(f"rounding must be a dict {{column: 'down' | 'up'}} or None, got "
                                f"{type(self.rounding).__name__}")
            for c, m in self.rounding.items():
                if c not in cols:
                    raise InputError(f"rounding: no column {c!r}")
                if m not in ROUNDING_MODES:
                    raise InputError(f"rounding[{c!r}] must be one of {', '.join(ROUNDING_MODES)}, got {m!r}")
        if self.header_groups is not None:
            for g in self.header_groups:
                if (not isinstance(g, (list, tuple)) or len(g) != 2 or not isinstance(g[0], str)
                        or not isinstance(g[1], (list, tuple)) or not g[1] or any(c not in cols for c in g[1])):
                    raise InputError(f"header_groups entries must be (LaTeX text, [column names]), got {g!r}")
        if self.notes is not None:
            if isinstance(self.notes, (str, bytes)) or not isinstance(self.notes, (list, tuple)) or \
                    not all(isinstance(n, str) for n in self.notes):
                raise TypeError("notes must be a list of strings or None")

    # ---- options -------------------------------------------------------------------------------

    def select(self, columns: Sequence[str] | None) -> "Table":
        """A copy with only ``columns`` (names as in ``self.columns``, or 1-based positions), in
        the given order. Unknown names are an InputError listing the available ones."""
        if columns is None:
            return self
        if isinstance(columns, (str, bytes)) or not isinstance(columns, (list, tuple)):
            raise TypeError(f"columns must be a list of column names, got {type(columns).__name__}")
        if not columns:
            raise InputError("--columns must name at least one column")
        idx = []
        for c in columns:
            if not isinstance(c, str):
                raise TypeError(f"columns entries must be strings, got {type(c).__name__}")
            name = c.strip()
            if name in self.columns:
                idx.append(self.columns.index(name))
            elif name.isascii() and name.isdigit() and 1 <= int(name) <= len(self.columns):
                idx.append(int(name) - 1)
            else:
                raise InputError(f"--columns: no column {name!r}; the columns are: " + ", ".join(self.columns))
            if idx.count(idx[-1]) > 1:  # 'counts,tau,counts' or 'k,1': a csv with two equal headers
                raise InputError(f"--columns: column {self.columns[idx[-1]]!r} is named twice in "
                                 f"{','.join(columns)!r}")
        lc = [self.latex_columns[i] for i in idx] if self.latex_columns is not None else None
        cols = [self.columns[i] for i in idx]
        rounding = ({c: m for c, m in self.rounding.items() if c in cols} if self.rounding is not None else None)
        groups = None
        if self.header_groups is not None:
            groups = []
            for text, names in self.header_groups:
                pos = [cols.index(n) for n in names if n in cols]
                if len(pos) == len(names) and pos == list(range(pos[0], pos[0] + len(pos))):
                    groups.append((text, list(names)))
        return Table(cols, [[r[i] for i in idx] for r in self.rows], self.caption,
                     latex_columns=lc, digits=self.digits, meta=dict(self.meta), latex_caption=self.latex_caption,
                     rounding=rounding, header_groups=groups,
                     notes=list(self.notes) if self.notes is not None else None,
                     key_columns=[c for c in self.key_columns if c in cols] if self.key_columns is not None else None,
                     primary=[c for c in self.primary if c in cols] if self.primary is not None else None)

    def without_empty_columns(self) -> "Table":
        """A copy without the columns whose every cell is missing (None, NaN, inf or empty text); the table
        itself when there is none (or when every column is empty)."""
        def empty(x):
            return x is None or (isinstance(x, float) and not math.isfinite(x)) or (isinstance(x, str) and not x.strip())

        keep = [c for j, c in enumerate(self.columns) if not self.rows or not all(empty(r[j]) for r in self.rows)]
        if len(keep) == len(self.columns) or not keep:
            return self
        return self.select(keep)

    def render(self, fmt: str, *, precision: int | None = None, na_rep: str | None = None,
               label: str | None = None, caption: str | None = None, columns: Sequence[str] | None = None,
               cite_keys: Sequence[str] | None = None, longtable: bool = False, decimals=None, sig=None,
               wide: bool = False) -> str:
        """Render as ``fmt`` (md, latex, csv, json). ``precision``: significant digits of the
        numbers (md, latex; default: the table's digits, 4 in LaTeX); ``na_rep``: text of a
        missing number (md default "null", LaTeX default "--"); ``label``: the LaTeX label;
        ``caption``: replaces the caption (LaTeX source in the latex format, verbatim);
        ``columns``: the columns to keep; ``cite_keys``: BibTeX keys cited in the caption; ``longtable``
        (latex): a ``longtable`` that breaks across pages, its header repeated on each page; ``decimals`` /
        ``sig`` (latex): per-column digits, ``N``, ``{"col": N}`` or the CLI text ``"4,gap=2"`` (fixed decimals, or
        significant digits; ``sig`` defaults to ``precision``); ``wide`` (latex): one table with every column
        even when it is wider than the line (default: split into a main table and tables of further columns,
        never scaled)."""
        if not isinstance(fmt, str):
            raise TypeError(f"fmt (format) must be one of {', '.join(FORMATS)}, got {type(fmt).__name__} {fmt!r}")
        if fmt not in FORMATS:
            raise InputError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        self.validate()
        if precision is not None:
            if isinstance(precision, bool) or not isinstance(precision, int):
                raise TypeError(f"precision must be an integer in 1..{MAX_DIGITS}, got {type(precision).__name__}")
            if not 1 <= precision <= MAX_DIGITS:
                raise InputError(f"--precision must be in 1..{MAX_DIGITS} (significant digits), got {precision}")
        if na_rep is not None and not isinstance(na_rep, str):
            raise TypeError(f"na_rep must be a string, got {type(na_rep).__name__}")
        if caption is not None and not isinstance(caption, str):
            raise TypeError(f"caption must be a string, got {type(caption).__name__}")
        if label is not None:
            if not isinstance(label, str):
                raise TypeError(f"label must be a string, got {type(label).__name__}")
            if label and not _LABEL_RE.match(label):
                raise InputError(f"--label must consist of letters, digits and : . _ / + -, got {label!r}")
        keys = list(cite_keys or [])
        t = self.select(columns)
        if not isinstance(longtable, bool):
            raise TypeError(f"longtable must be True or False, got {type(longtable).__name__}")
        if longtable and fmt != "latex":
            raise InputError(f"--longtable needs --format latex, got --format {fmt}")
        dec_map = _check_digits_map(parse_column_digits(decimals, "--decimals"), t.columns, "--decimals", 0, MAX_DIGITS)
        sig_map = _check_digits_map(parse_column_digits(sig, "--sig"), t.columns, "--sig", 1, MAX_DIGITS)
        if (dec_map or sig_map or wide) and fmt != "latex":
            raise InputError(f"--decimals, --sig and --wide need --format latex, got --format {fmt}")
        if caption is not None and fmt == "csv":
            raise InputError("--caption needs --format md, latex or json (a csv file has no caption), got --format csv")
        if fmt == "latex":
            return t.to_latex(precision=precision, na_rep=na_rep, label=label, caption=caption, cite_keys=keys,
                              longtable=longtable, decimals=dec_map, sig=sig_map, wide=bool(wide))
        if fmt == "md":
            return t.without_empty_columns().to_md(precision=precision, na_rep=na_rep, caption=caption, cite_keys=keys)
        if fmt == "csv":
            return t.to_csv()
        return t.to_json(caption=caption, cite_keys=keys)

    # ---- formats -------------------------------------------------------------------------------

    def to_md(self, *, precision: int | None = None, na_rep: str | None = None, caption: str | None = None,
              cite_keys: Sequence[str] = ()) -> str:
        digits = precision or self.digits
        na = "null" if na_rep is None else na_rep
        lines = ["| " + " | ".join(_md_text(c) for c in self.columns) + " |", "|" + "---|" * len(self.columns)]
        modes = [(self.rounding or {}).get(c) for c in self.columns]
        for r in self.rows:
            lines.append("| " + " | ".join(_md_text(_cell(x, digits, na, m)) for x, m in zip(r, modes)) + " |")
        cap = self.caption if caption is None else caption
        if cite_keys:
            cap = (cap + " " if cap else "") + "Sources: " + ", ".join(f"[{k}]" for k in cite_keys) + "."
        if cap:
            lines += ["", cap]
        if self.notes:
            lines += [""] + [f"Note: {n}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def latex_header_cells(self) -> list[str]:
        if self.latex_columns is not None:
            return list(self.latex_columns)
        return [plain_to_latex(c, header=True) for c in self.columns]

    def latex_caption_text(self, caption: str | None = None, cite_keys: Sequence[str] = ()) -> str:
        if caption is not None:
            cap = caption
        elif self.latex_caption is not None:
            cap = self.latex_caption
        else:
            cap = plain_to_latex(self.caption)
        if cite_keys:
            cap = (cap.rstrip() + " " if cap.strip() else "") + "Sources: \\cite{" + ",".join(cite_keys) + "}."
        return cap

    def to_latex(self, *, precision: int | None = None, na_rep: str | None = None, label: str | None = None,
                 caption: str | None = None, cite_keys: Sequence[str] = (), longtable: bool = False,
                 decimals: Mapping | None = None, sig: Mapping | None = None, wide: bool = False,
                 linewidth_pt: float = LINEWIDTH_PT) -> str:
        """booktabs + siunitx LaTeX (docs/outputs.md): numeric columns are ``S`` columns (decimal points aligned)
        with one notation per column; all-empty columns are left out; the type is the document's (never scaled);
        a table wider than ``linewidth_pt`` is split into the main table (:attr:`primary` columns, else the first
        that fit) and tables of further columns that repeat the :func:`key_columns`, unless ``wide``."""
        t = self.without_empty_columns()
        digits = precision or min(t.digits, LATEX_DEFAULT_DIGITS)
        na = LATEX_DEFAULT_NA if na_rep is None else na_rep
        decimals, sig = dict(decimals or {}), dict(sig or {})
        heads = t.latex_header_cells()
        ncol = len(t.columns)
        modes = [(t.rounding or {}).get(c) for c in t.columns]
        cells_by_col, spec, widths = [], [], []
        keys = key_columns(t)
        for j, name in enumerate(t.columns):
            values = [r[j] for r in t.rows]
            numeric = bool(values) and all(x is None or _is_number(x) for x in values)
            if numeric and any(x is not None for x in values):
                col_dec = decimals.get(name, decimals.get("*"))
                col_sig = sig.get(name, sig.get("*", digits))
                strings, notation = _numeric_strings(values, sig=col_sig, decimals=col_dec, mode=modes[j],
                                                     exact=(name in keys and (bool(t.key_columns) or name in KEY_NAMES)
                                                            and name not in sig and col_dec is None))
                fmt = _table_format(strings, notation)
                cells_by_col.append([x if x is not None else "{" + latex_escape(na) + "}" for x in strings])
                spec.append("S[table-format=" + fmt + ",group-digits=false]")
                heads[j] = "{" + heads[j] + "}"
                widths.append(max(_format_width_pt(fmt), _header_width_pt(heads[j]), len(na) * _CHAR_PT) + _SEP_PT)
                continue
            cells, longest = [], 0
            for x in values:
                if x is None or (isinstance(x, float) and not math.isfinite(x)):
                    cells.append(latex_escape(na))
                    longest = max(longest, len(na))
                elif _is_number(x):
                    cells.append(_latex_number(x, digits, na, modes[j]))
                    longest = max(longest, digits + 5)
                else:
                    text = "yes" if x is True else "no" if x is False else str(x)
                    cells.append(latex_escape(text))
                    longest = max(longest, len(text))
            cells_by_col.append(cells)
            if longest > _WRAP_CHARS:
                em = min(12.0, max(6.0, 0.45 * _WRAP_CHARS))
                spec.append(r">{\raggedright\arraybackslash}p{" + f"{em:g}em" + "}")
                widths.append(em * 10.0 + _SEP_PT)
            else:
                spec.append("l")
                widths.append(max(longest * _CHAR_PT, _header_width_pt(heads[j])) + _SEP_PT)
        body = [" & ".join(cells_by_col[j][i] for j in range(ncol)) + r" \\" for i in range(len(t.rows))]
        if caption is not None:
            cap, rest = t.latex_caption_text(caption_source(caption), cite_keys), ""
        else:
            short, rest = split_caption(strip_file_paths(t.latex_caption_text(None)))
            cap = t.latex_caption_text(short, cite_keys)
        notes = ([rest] if rest else []) + [strip_file_paths(plain_to_latex(n)) for n in (t.notes or [])]
        lab = label if label is not None else (f"tab:ncproofs-{t.meta.get('family')}"
                                               if isinstance(t.meta.get("family"), str) else "")
        if longtable:
            return t._latex_longtable(spec, heads, body, ncol, cap, lab, notes)
        parts = [list(range(ncol))] if wide else t._latex_parts(widths, linewidth_pt)
        out = []
        for p, idx in enumerate(parts):
            sub = t.select([t.columns[j] for j in idx]) if len(idx) < ncol else t
            if p == 0:
                pcap, plab = cap, lab
            else:
                pcap = ("Further columns of Table~\\ref{" + lab + "}." if lab else "Further columns of the table above.")
                plab = f"{lab}-more" + (f"{p}" if p > 1 else "") if lab else ""
            rows = [" & ".join(cells_by_col[j][i] for j in idx) + r" \\" for i in range(len(t.rows))]
            out.append(sub._latex_float([spec[j] for j in idx], [heads[j] for j in idx], rows, pcap, plab,
                                        notes if p == 0 else []))
        return "\n".join(out)

    def _latex_parts(self, widths: list[float], linewidth: float) -> list[list[int]]:
        """Column indices of each LaTeX table: everything when it fits ``linewidth``; else the key columns plus
        the :attr:`primary` columns (or the next columns that fit), then the key columns plus the next columns
        that fit, until every column is shown once."""
        ncol = len(self.columns)
        if sum(widths) <= linewidth or ncol <= 2:
            return [list(range(ncol))]
        keys = [self.columns.index(c) for c in key_columns(self)]
        rest = [j for j in range(ncol) if j not in keys]
        parts = []
        if self.primary:
            first = [self.columns.index(c) for c in self.primary if c in self.columns]
            first = keys + [j for j in first if j not in keys]
            parts.append(sorted(first, key=lambda j: (j not in keys, first.index(j))))
            rest = [j for j in rest if j not in first]
        base = sum(widths[j] for j in keys)
        cur, w = list(keys), base
        for j in rest:
            if w + widths[j] > linewidth and len(cur) > len(keys):
                parts.append(cur)
                cur, w = list(keys), base
            cur.append(j)
            w += widths[j]
        if len(cur) > len(keys):
            parts.append(cur)
        return parts or [list(range(ncol))]

    def _latex_float(self, spec, heads, body, cap, lab, notes) -> str:
        """One ``table`` float at the document's type size, decimal-aligned ``S`` columns, never scaled."""
        out = ["% generated by ncproofs; needs \\usepackage{booktabs,array,siunitx}",
               "\\begin{table}[tbp]", "\\centering"]
        if len(spec) > 6:
            out.append("\\setlength{\\tabcolsep}{4pt}")
        if cap:
            out.append("\\caption{" + cap + "}")
        if lab:
            out.append("\\label{" + lab + "}")
        out += ["\\begin{tabular}{" + "".join(spec) + "}", "\\toprule"]
        out += self._latex_group_rows()
        out += [" & ".join(heads) + " \\\\", "\\midrule"]
        out += body
        out += ["\\bottomrule", "\\end{tabular}"]
        if notes:  # a justified paragraph at the document's size (a minipage resets \centering)
            out.append("\\par\\smallskip\\begin{minipage}{\\linewidth}" + " ".join(notes) + "\\end{minipage}")
        out.append("\\end{table}")
        return "\n".join(out) + "\n"

    def _latex_longtable(self, spec, heads, body, ncol, cap, lab, notes=()) -> str:
        """A longtable: breaks across pages, the header rows repeated on every page, "continued" at the foot
        of every page but the last. Never scaled and never split: --columns keeps it narrow."""
        header = self._latex_group_rows() + [" & ".join(heads) + " \\\\", "\\midrule"]
        out = ["% generated by ncproofs; needs \\usepackage{booktabs,array,siunitx,longtable}", "\\begingroup"]
        if ncol > 6:
            out.append("\\setlength{\\tabcolsep}{4pt}")
        out.append("\\begin{longtable}{" + "".join(spec) + "}")
        if cap or lab:
            out.append(("\\caption{" + cap + "}" if cap else "") + ("\\label{" + lab + "}" if lab else "") + "\\\\")
        out += ["\\toprule"] + header + ["\\endfirsthead"]
        out += ["\\toprule"] + header + ["\\endhead"]
        out += ["\\midrule", "\\multicolumn{%d}{r}{\\footnotesize continued on the next page}\\\\" % ncol, "\\endfoot",
                "\\bottomrule", "\\endlastfoot"]
        out += body
        out.append("\\end{longtable}")
        if notes:
            out.append("{" + " ".join(notes) + "\\par}")
        out.append("\\endgroup")
        return "\n".join(out) + "\n"

    def _latex_group_rows(self) -> list[str]:
        """The header row of :attr:`header_groups` (``\\multicolumn`` + ``\\cmidrule``), or nothing."""
        if not self.header_groups:
            return []
        starts = {}
        for text, names in self.header_groups:
            pos = [self.columns.index(n) for n in names]
            starts[min(pos)] = (text, len(pos))
        cells, rules, j = [], [], 0
        while j < len(self.columns):
            if j in starts:
                text, n = starts[j]
                cells.append("\\multicolumn{%d}{c}{%s}" % (n, text))
                rules.append("\\cmidrule(lr){%d-%d}" % (j + 1, j + n))
                j += n
            else:
                cells.append("")
                j += 1
        return [" & ".join(cells) + " \\\\", "".join(rules)]

    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.columns)
        for r in self.rows:
            w.writerow(["" if x is None or (isinstance(x, float) and not math.isfinite(x)) else
                        (repr(float(x)) if isinstance(x, float) else x) for x in r])
        return buf.getvalue()

    def to_json(self, *, caption: str | None = None, cite_keys: Sequence[str] = ()) -> str:
        from proofs_check.core import clean

        from proofs_check.envelope import envelope

        d = {"columns": self.columns, "rows": clean(self.rows),
             "caption": self.caption if caption is None else caption, "meta": clean(self.meta)}
        if cite_keys:
            d["citations"] = list(cite_keys)
        if self.notes:
            d["notes"] = list(self.notes)
        return json.dumps(envelope("table", d), indent=2) + "\n"


# ---- CLI helpers (cli.py calls these for every `table` subcommand) --------------------------------

def _columns_arg(text: str) -> list[str]:
    import argparse

    cols = [c.strip() for c in text.split(",")]
    if not any(cols):
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, got {text!r}"[:200])
    if not all(cols):  # "a,,b", "a,": an empty entry is an error, never dropped (as in every list option)
        raise argparse.ArgumentTypeError(f"expected comma-separated column names with no empty entry, got {text!r}"[:200])
    return cols


def add_render_arguments(p) -> None:
    """--precision, --na-rep, --label, --caption, --columns, --no-cite on a `table` subparser."""
    p.add_argument("--precision", type=int, default=None, metavar="DIGITS",
                   help=f"significant digits of the numbers (md/latex; default: {LATEX_DEFAULT_DIGITS} in LaTeX, "
                        "the table's own in md; csv/json keep every digit)")
    p.add_argument("--na-rep", default=None, metavar="TEXT",
                   help=f"text of a missing number (default: '{LATEX_DEFAULT_NA}' in LaTeX, 'null' in md)")
    p.add_argument("--label", default=None, help="LaTeX \\label (default tab:ncproofs-FAMILY)")
    p.add_argument("--caption", default=None,
                   help="replace the caption (in --format latex: LaTeX source, used verbatim)")
    p.add_argument("--columns", type=_columns_arg, default=None, metavar="A,B,...",
                   help="keep only these columns, in this order (names as in --format csv, or 1-based positions)")
    p.add_argument("--longtable", action="store_true",
                   help="--format latex: a longtable that breaks across pages (header repeated on each page) instead "
                        "of a float scaled to the line width; needs \\usepackage{longtable}")
    p.add_argument("--decimals", default=None, metavar="N|COL=N,...",
                   help="--format latex: fixed decimals, for every column (N) or per column (COL=N, comma-separated; "
                        "'4,gap=2' is both); trailing zeros kept, decimal points aligned (siunitx S columns)")
    p.add_argument("--sig", default=None, metavar="N|COL=N,...",
                   help="--format latex: significant digits, for every column or per column (default --precision, 4); "
                        "each column is all fixed or all scientific, chosen from its range")
    p.add_argument("--wide", action="store_true",
                   help="--format latex: one table with every column even when wider than the line (default: a "
                        "main table and tables of further columns that repeat the instance columns; never scaled)")
    p.add_argument("--no-cite", action="store_true",
                   help="do not name the sources (\\cite keys of `ncproofs cite`) in the caption")
    p.add_argument("--rigorous", action="store_true",
                   help="pass each row's solve report through the ball-arithmetic recipe (python-flint) and add the "
                        "proven bracket (lower bound rounded down, feasible value rounded up) and whether the row's "
                        "value statement is proven (docs/rigorous.md); only tables whose rows are solve reports of a "
                        "family with a recipe")


#: the format of ``ncproofs table ... --output F`` without ``--format``, from F's extension (else md)
OUTPUT_EXTENSIONS = {".md": "md", ".markdown": "md", ".tex": "latex", ".latex": "latex", ".csv": "csv", ".json": "json"}


def format_for_output(path) -> str:
    """``--format`` when it is not given: from the ``--output`` extension (``t.csv`` -> csv, ``t.tex`` -> latex),
    md for stdout or another extension."""
    if not path:
        return "md"
    import os

    return OUTPUT_EXTENSIONS.get(os.path.splitext(str(path))[1].lower(), "md")


def render_from_args(table: Table, args, family: str | None = None) -> str:
    """Render ``table`` with the options of :func:`add_render_arguments` (missing ones: defaults)."""
    keys: list[str] = []
    if family and not getattr(args, "no_cite", False):
        from proofs_check.citations import keys_for_family

        from proofs_check.citations import FAMILY_KEYS

        # a table of one loss cites that loss's papers (the cross-entropy UFM table: Zhu et al. 2021, Ji et al.
        # 2022, Lu and Steinerberger 2022; not the MSE papers)
        loss = table.meta.get("loss") if isinstance(table.meta, Mapping) else None
        specific = f"{family}-{loss}" if isinstance(loss, str) else None
        keys = keys_for_family(specific if specific in FAMILY_KEYS else family)
    label = getattr(args, "label", None)
    if label is None and family:
        label = f"tab:ncproofs-{family}"
    return table.render(getattr(args, "format", "md"), precision=getattr(args, "precision", None),
                        na_rep=getattr(args, "na_rep", None), label=label, caption=getattr(args, "caption", None),
                        columns=getattr(args, "columns", None), cite_keys=keys,
                        longtable=bool(getattr(args, "longtable", False)), decimals=getattr(args, "decimals", None),
                        sig=getattr(args, "sig", None), wide=bool(getattr(args, "wide", False)))


# ---- proof-grade numbers: `ncproofs table FAMILY --rigorous` (docs/outputs.md "Proven brackets") -------------

#: columns that ``--rigorous`` appends to a table (their meaning: :data:`RIGOROUS_NOTE`)
RIGOROUS_COLUMNS = ("proven_lower", "proven_upper", "value_statement", "rigorous")
#: LaTeX headers of :data:`RIGOROUS_COLUMNS`; the two bracket columns sit under one group header
RIGOROUS_LATEX = ("lower", "upper", "value statement", "rigorous")
RIGOROUS_GROUP = "proven (ball arithmetic)"
#: The ball-arithmetic pass over a table's rows: its work budget is every row, each within its recipe's own
#: size limits (counts, checked before any work: the same rows get brackets at any machine load); this is only
#: the wall-clock safety net (s), 12 times the 100 s the table limits aim at: rows reached after it get no
#: bracket and a note "stopped by the wall-clock safety limit"
RIGOROUS_TABLE_BUDGET_S = 1200.0
RIGOROUS_NOTE = ("proven (ball arithmetic): the bracket lower <= optimum <= upper (columns proven_lower, proven_upper) "
                 "proven with python-flint Arb balls (docs/rigorous.md), the lower bound printed rounded down and the "
                 "feasible value rounded up; value statement: the row's value statement judged by that bracket "
                 "(REFUTED: the bracket excludes it); rigorous: yes when that statement is VERIFIED in ball "
                 "arithmetic.")


def rigorous_table(recipe_family: str):
    """Mark a ``TableCommand`` builder as supporting ``--rigorous``: its rows are solve reports of
    ``recipe_family`` (a key of :data:`proofs_check.rigorous.RECIPES`); with ``args.rigorous`` it passes them
    to :func:`add_rigorous`."""
    def mark(build):
        build.rigorous_recipe = recipe_family
        return build
    return mark


def rigorous_tables(commands) -> list[str]:
    """Names of the table commands (``{name: TableCommand}`` or a list) whose builder supports ``--rigorous``
    with a recipe registered in :data:`proofs_check.rigorous.RECIPES`."""
    from proofs_check.rigorous import RECIPES

    cmds = commands.values() if isinstance(commands, Mapping) else commands
    return [c.name for c in cmds if getattr(c.build, "rigorous_recipe", None) in RECIPES]


def _row_rigorous(out: dict | None, value_claim: str) -> tuple[list, str | None]:
    """The four cells of one row from an applied report, and a note when the bracket is missing or half."""
    if out is None:
        return [None, None, None, False], "no solve report for this row"
    rig = (out.get("certificate") or {}).get("rigorous") or {}
    lower = rig["lower"][0] if rig.get("lower") else None
    upper = rig["upper"][1] if rig.get("upper") else None
    claim = next((c for c in out.get("claims") or [] if str(c.get("id", "")).startswith(value_claim)), None)
    verdict = claim.get("verdict") if claim is not None else None
    proven = bool(claim.get("rigorous")) if claim is not None else False
    note = None
    if lower is None:
        note = (f"no proven bracket ({rig.get('status', 'none')}: {rig.get('reason', 'no rigorous certificate')}); "
                "the float verdict stands")
    elif upper is None:
        why = (rig.get("details") or {}).get("upper_note")
        note = "no proven feasible value" + (f" ({why})" if why else "") + "; only the lower bound is proven"
    if claim is None:
        note = (note + "; " if note else "") + f"no statement {value_claim!r} to judge"
    return [lower, upper, verdict, proven], note


def add_rigorous(table: Table, reports: Sequence, *, labels: Sequence[str] | None = None,
                 value_claim: str = "optimal-value", statement: str | None = None,
                 budget_s: float | None = None) -> Table:
    """``table`` with the columns of :data:`RIGOROUS_COLUMNS` appended: ``reports[i]`` (the live ``SolveReport``
    of row i, whose candidate the recipe bounds without a second solve, or a solve-report dict in
    ``SolveReport.to_dict()`` form; None for a row without one) goes through
    :func:`proofs_check.rigorous.apply`; its proven bracket (``certificate.rigorous``: lower bound
    ``lower[0]``, feasible value ``upper[1]``), the verdict of its ``value_claim`` statement after the
    judgement (the first statement whose id starts with ``value_claim``) and whether that statement is
    rigorous; ``statement`` (text) says what the row's value statement is. Every row is attempted (the work
    budget: each recipe refuses what exceeds its size limits); ``budget_s`` (default
    :data:`RIGOROUS_TABLE_BUDGET_S`) is only a wall-clock safety net: rows reached after it are not attempted
    (no bracket, a note says so). Missing numbers are None (the table's ``--na-rep``) and a
    note names the row (``labels[i]``, else its number) and the reason. The bracket columns print rounded
    outward in md and LaTeX (:attr:`Table.rounding`); csv/json keep the doubles (already rounded outward)."""
    from proofs_check import rigorous as RG

    budget_s = RIGOROUS_TABLE_BUDGET_S if budget_s is None else float(budget_s)
    if len(reports) != len(table.rows):
        raise ValueError(f"add_rigorous: {len(reports)} reports for {len(table.rows)} rows")
    clash = [c for c in RIGOROUS_COLUMNS if c in table.columns]
    if clash:
        raise ValueError(f"add_rigorous: the table already has a column {clash[0]!r}")
    import time

    rows, notes, bits = [], [RIGOROUS_NOTE] + ([statement] if statement else []), set()
    t0 = time.perf_counter()
    for i, (row, rep) in enumerate(zip(table.rows, reports)):
        if rep is not None and time.perf_counter() - t0 > budget_s:
            if not isinstance(rep, Mapping):  # a live SolveReport
                rep = rep.to_dict()
            out = {**rep, "certificate": {**(rep.get("certificate") or {}), "rigorous": {
                "lower": None, "upper": None, "status": "not attempted",
                "reason": f"stopped by the wall-clock safety limit ({budget_s:g} s) of the table's --rigorous pass; "
                          f"the work budget (every row) was not reached"}}}
        else:
            out = RG.apply(rep) if rep is not None else None
        cells, note = _row_rigorous(out, value_claim)
        rows.append(list(row) + cells)
        if out is not None:
            pb = ((out.get("certificate") or {}).get("rigorous") or {}).get("precision_bits")
            if pb:
                bits.add(int(pb))
        if note:
            label = labels[i] if labels is not None else None
            notes.append(f"row {i + 1}" + (f" ({label})" if label else "") + f": {note}.")
    latex = (list(table.latex_columns) if table.latex_columns is not None
             else [plain_to_latex(c, header=True) for c in table.columns])
    meta = dict(table.meta)
    meta["rigorous"] = {"method": "ball arithmetic (python-flint), docs/rigorous.md",
                        "precision_bits": sorted(bits), "value_claim": value_claim,
                        "columns": {"proven_lower": "proven lower bound of the optimum (lower[0])",
                                    "proven_upper": "proven feasible value (upper[1]), an upper bound of the optimum",
                                    "value_statement": f"verdict of {value_claim!r} judged by the bracket",
                                    "rigorous": f"{value_claim!r} VERIFIED in ball arithmetic"}}
    keys = key_columns(table)
    value_col = next((c for c in table.columns if c not in keys), None)
    # the narrow main LaTeX table: instance, value, the proven bracket, whether it is rigorous (details follow)
    primary = list(table.primary) if table.primary else keys + ([value_col] if value_col else [])
    primary += [c for c in ("proven_lower", "proven_upper", "rigorous") if c not in primary]
    return Table(list(table.columns) + list(RIGOROUS_COLUMNS), rows, table.caption, key_columns=table.key_columns,
                 primary=primary,
                 latex_columns=latex + list(RIGOROUS_LATEX), digits=table.digits, meta=meta,
                 latex_caption=table.latex_caption,
                 rounding={**(table.rounding or {}), "proven_lower": "down", "proven_upper": "up"},
                 header_groups=list(table.header_groups or []) + [(RIGOROUS_GROUP, ["proven_lower", "proven_upper"])],
                 notes=list(table.notes or []) + notes)
