"""Tables for papers: one data object, rendered as Markdown, LaTeX (booktabs), CSV or JSON.

LaTeX output compiles in a plain ``article`` that loads booktabs, array and graphicx (the
preamble the tests use also loads amsmath, amssymb, siunitx, longtable and caption; the table
needs none of those). What the LaTeX renderer guarantees:

- every text is escaped; plain-text math in captions and headers (``e^{-1/tau}``,
  ``lw/2||W||^2``, ``lambda_crit``, ``tau -> 0+``) is converted to ``$...$`` by a conservative
  converter (:func:`plain_to_latex`): a stretch it cannot convert with certainty stays escaped
  text, so the output compiles either way; a family may give ``latex_caption`` /
  ``latex_columns`` (alias ``latex_headers``) written in LaTeX itself, used verbatim;
- numbers carry ``precision`` significant digits (default :data:`LATEX_DEFAULT_DIGITS`), in math
  mode (``$-1.25\\times10^{-3}$``); missing numbers print ``na_rep`` (default ``--``);
- ``\\caption`` and ``\\label`` (default ``tab:ncproofs-<family>``), ``\\small`` type, narrower
  column gaps for wide tables, long text columns wrap (``p`` columns), and a table still wider
  than ``\\linewidth`` is scaled down to it (measured by TeX itself, so it never overflows);
- the caption ends with ``\\cite{...}`` of the papers the table relies on (keys of
  :mod:`proofs_check.citations`; ``ncproofs cite --only FAMILY`` prints their BibTeX).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from theory._validate import InputError

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


def _cell(x: Any, digits: int, na: str = "null") -> str:
    if x is None:
        return na
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        if not math.isfinite(x):
            return na
        return f"{x:.{digits}g}"
    return str(x)


def _latex_number(x: Any, digits: int, na: str) -> str:
    """A number in math mode with ``digits`` significant digits; ``na`` (escaped) if missing."""
    if isinstance(x, float) and not math.isfinite(x):
        return latex_escape(na)
    if isinstance(x, int):
        s = str(x)
    else:
        s = f"{x:.{digits}g}"
    m = re.fullmatch(r"(-?[0-9.]+)e([+-])0*([0-9]+)", s)
    if m:
        mant, sign, exp = m.groups()
        s = rf"{mant}\times10^{{{'-' if sign == '-' else ''}{exp}}}"
    return f"${s}$"


# ---- text escaping and plain-text math ----------------------------------------------------------

#: non-ASCII characters that pdflatex cannot typeset without extra packages, as LaTeX
_UNICODE = {
    "≥": r"\ensuremath{\ge}", "≤": r"\ensuremath{\le}", "×": r"\ensuremath{\times}", "→": r"\ensuremath{\to}",
    "←": r"\ensuremath{\leftarrow}", "±": r"\ensuremath{\pm}", "∞": r"\ensuremath{\infty}",
    "≈": r"\ensuremath{\approx}", "≠": r"\ensuremath{\neq}", "−": "-", "–": "--", "—": "---", "…": r"\dots{}",
    "·": r"\ensuremath{\cdot}", "√": r"\ensuremath{\surd}", "‖": r"\ensuremath{\|}", "∑": r"\ensuremath{\sum}",
    "“": "``", "”": "''", "‘": "`", "’": "'", "°": r"\ensuremath{^\circ}", "⋆": r"\ensuremath{\star}",
    "α": r"\ensuremath{\alpha}", "β": r"\ensuremath{\beta}", "γ": r"\ensuremath{\gamma}",
    "δ": r"\ensuremath{\delta}", "ε": r"\ensuremath{\varepsilon}", "η": r"\ensuremath{\eta}",
    "θ": r"\ensuremath{\theta}", "κ": r"\ensuremath{\kappa}", "λ": r"\ensuremath{\lambda}",
    "μ": r"\ensuremath{\mu}", "ν": r"\ensuremath{\nu}", "π": r"\ensuremath{\pi}", "ρ": r"\ensuremath{\rho}",
    "σ": r"\ensuremath{\sigma}", "τ": r"\ensuremath{\tau}", "φ": r"\ensuremath{\phi}", "ψ": r"\ensuremath{\psi}",
    "ω": r"\ensuremath{\omega}", "Δ": r"\ensuremath{\Delta}", "Λ": r"\ensuremath{\Lambda}",
    "Σ": r"\ensuremath{\Sigma}", "Ω": r"\ensuremath{\Omega}",
}
_TEXT_ESCAPES = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
    "}": r"\}", "^": r"\textasciicircum{}", "~": r"\textasciitilde{}", "<": r"\textless{}",
    ">": r"\textgreater{}", "|": r"\textbar{}", '"': "''",
}


def latex_escape(s: str) -> str:
    """Escape text for LaTeX text mode: every special character, and non-ASCII characters that
    pdflatex cannot typeset (Greek letters, arrows, ...) as math; other characters outside
    Latin-1 become ``?`` (documented loss; a table is never left uncompilable)."""
    out = []
    for ch in str(s):
        if ch in _TEXT_ESCAPES:
            out.append(_TEXT_ESCAPES[ch])
        elif ord(ch) < 128:
            out.append(ch if ch.isprintable() or ch == " " else " ")
        elif ch in _UNICODE:
            out.append(_UNICODE[ch])
        elif ord(ch) < 256 and ch.isprintable():
            out.append(ch)
        else:
            out.append("?")
    return "".join(out)


_latex_escape = latex_escape  # older name

GREEK = frozenset("alpha beta gamma delta epsilon varepsilon zeta eta theta kappa lambda mu nu xi pi rho sigma "
                  "tau phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Phi Psi Omega".split())
_FUNCS = {"sum": r"\sum", "log": r"\log", "exp": r"\exp", "min": r"\min", "max": r"\max", "tr": r"\mathrm{tr}",
          "infinity": r"\infty", "sqrt": r"\sqrt", "det": r"\det", "rank": r"\operatorname{rank}"}
_ACCENTS = {"bar": r"\bar", "hat": r"\hat", "tilde": r"\tilde"}
_WEAK_WORDS = frozenset({"sum", "log", "exp", "sqrt", "tr", "CE", "min", "max", "infinity", "+", "-", "=", "/",
                         "*", "<", ">", "~", "x"})
_STOPWORDS = frozenset("of to as no is an or in at on by if be it we do so up us my he me am vs".split())
_SHORT_EXPR = re.compile(r"^[A-Za-z0-9()/*+\-.]{1,10}$")
_NUMBER = re.compile(r"^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?[+-]?$")


def _is_math_identifier(word: str) -> bool:
    """``n_c``, ``lambda_crit``, ``h_bar``, ``r_beta``: math; ``stat_residual``, ``bound_per_sample``
    (words joined by underscores, a column name): text."""
    parts = word.split("_")
    if len(parts) < 2 or not all(parts):
        return False
    base, rest = parts[0], parts[1:]
    if not re.fullmatch(r"[A-Za-z]+", base):
        return False
    if base in GREEK or len(base) == 1:
        return True
    if any(p in _ACCENTS for p in rest):
        return True
    return all(len(p) <= 2 or p.isdigit() or p in GREEK for p in rest) and len(base) <= 3


def _core(word: str) -> str:
    return word.strip(".,;:").strip("()[]")


def _strong(word: str) -> bool:
    """Certainly math: superscripts, norms, arrows, comparisons, Greek names, math identifiers."""
    w = word.rstrip(".,;:")
    if any(t in w for t in ("^", "||", "->", ">=", "<=", "sqrt(")):
        return True
    c = _core(word)
    if c in GREEK or re.fullmatch(r"[A-Za-z]\*", c):
        return True
    m = re.match(r"^\(?([A-Za-z][A-Za-z0-9_]*)=[A-Za-z0-9(\-]", w)
    if m and (len(m.group(1)) <= 3 or m.group(1) in GREEK or _is_math_identifier(m.group(1))):
        return True
    if re.fullmatch(r"[A-Za-z0-9_.'/()^+\-*]+", w) and any(t in GREEK for t in re.findall(r"[A-Za-z]+", w)):
        return True
    if re.search(r"\b(log|exp|tr)\(", w):
        return True
    for tok in re.findall(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+", w):
        if _is_math_identifier(tok):
            return True
    return False


def _weak(word: str, header: bool = False) -> bool:
    """May be math when next to certain math: single letters (not 'a', 'I'), numbers, operators,
    short expressions like (1/N), k-1, C(m-1)."""
    c = _core(word)
    w = word.rstrip(".,;:")
    if w in _WEAK_WORDS or c in _WEAK_WORDS:
        return True
    if re.fullmatch(r"[A-Za-z]\*?", c):
        return header or c not in ("a", "I", "A")
    if re.fullmatch(r"[a-z]{2}", c) and c == w and c not in _STOPWORDS:
        return True  # lw, lh: two-letter names next to certain math
    if _NUMBER.match(c):
        return True
    if _SHORT_EXPR.match(w) and re.search(r"[()/*+\-]", w) and re.search(r"[A-Za-z0-9]", w):
        return not re.search(r"[A-Za-z]{3,}", w)
    return False


class _NotMath(Exception):
    pass


def _balanced(s: str) -> bool:
    pairs = {")": "(", "]": "[", "}": "{"}
    stack = []
    for ch in s:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack.pop() != pairs[ch]:
                return False
    return not stack


def _ident_latex(ident: str) -> str:
    parts = ident.split("_")
    base, rest = parts[0], [p for p in parts[1:]]
    if base in GREEK:
        b = "\\" + base + " "
    elif base in _FUNCS:
        b = _FUNCS[base] + " "
    elif len(base) == 1:
        b = base
    elif base.isupper() and base not in ("CE", "ETF", "OF", "NC", "MSE"):
        b = base  # a product of matrices, e.g. WH
    else:
        b = r"\mathrm{" + base + "}"
    for p in rest:
        if p in _ACCENTS:
            b = _ACCENTS[p] + "{" + b.strip() + "}"
        elif p in GREEK:
            b = b.strip() + "_{\\" + p + "}"
        elif len(p) == 1 or p.isdigit():
            b = b.strip() + "_{" + p + "}"
        else:
            b = b.strip() + r"_{\mathrm{" + p + "}}"
    return b


_MATH_TOKEN = re.compile(r"\|\||->|>=|<=|[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*|[0-9]+(?:\.[0-9]+)?|\s+|.", re.S)


def _math_body(s: str) -> str:
    """Convert one stretch of plain-text math to LaTeX math (without the dollars). Raises
    _NotMath for anything it cannot convert with certainty."""
    toks = _MATH_TOKEN.findall(s)
    out: list[str] = []
    i = 0

    def group(j: int) -> tuple[str, int]:
        """Balanced (...) or {...} starting at toks[j]; returns (inner text, index after)."""
        opening = toks[j]
        closing = {"(": ")", "{": "}"}[opening]
        depth, k = 0, j
        while k < len(toks):
            if toks[k] == opening:
                depth += 1
            elif toks[k] == closing:
                depth -= 1
                if depth == 0:
                    return "".join(toks[j + 1:k]), k + 1
            k += 1
        raise _NotMath(s)

    while i < len(toks):
        t = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        if t == "||":
            out.append(r"\|")
        elif t == "->":
            out.append(r"\to ")
        elif t == ">=":
            out.append(r"\ge ")
        elif t == "<=":
            out.append(r"\le ")
        elif re.fullmatch(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*", t):
            if t == "sqrt" and nxt == "(":
                inner, i = group(i + 1)
                out.append(r"\sqrt{" + _math_body(inner) + "}")
                continue
            if "_" not in t and len(t) > 1 and not t.isalpha():
                # x2, W1: a letter and a number
                m = re.fullmatch(r"([A-Za-z])([0-9]+)", t)
                out.append(t if m else r"\mathrm{" + t + "}")
            else:
                out.append(_ident_latex(t))
        elif re.fullmatch(r"[0-9]+(?:\.[0-9]+)?", t):
            out.append(t)
            if nxt == "+" and (i + 2 >= len(toks) or toks[i + 2].isspace() or toks[i + 2] in ")],;"):
                out.append("^+")
                i += 2
                continue
        elif t in ("^", "_"):
            if not nxt or nxt.isspace():
                raise _NotMath(s)
            if nxt == "{":
                inner, i = group(i + 1)
                out.append(t + "{" + _math_body(inner) + "}")
                continue
            if nxt in "(":
                raise _NotMath(s)
            if nxt == "*":
                out.append(t + "*")
                i += 2
                continue
            # one token as the script (a letter, a number, an identifier)
            out.append(t + "{" + _math_body(nxt) + "}")
            i += 2
            continue
        elif t == "*":
            prev = toks[i - 1] if i else ""
            out.append("^*" if prev and re.search(r"[A-Za-z0-9]$", prev) and not re.match(r"[A-Za-z0-9]", nxt)
                       else r"\cdot ")
        elif t == "~":
            out.append(r"\sim ")
        elif t in "%#&":
            out.append("\\" + t)
        elif t.isspace():
            out.append(" ")
        elif t in "+-=/,.;:()[]<>|'!{}":
            out.append(t)
        else:
            raise _NotMath(s)  # a backslash, a dollar, a quote, non-ASCII: leave as text
        i += 1
    return "".join(out).strip()


def math_to_latex(s: str) -> str | None:
    """``$...$`` for a stretch of plain-text math, or None when it cannot be converted safely."""
    if not _balanced(s):
        return None
    try:
        body = _math_body(s)
    except (_NotMath, AttributeError):
        return None
    body = re.sub(r" {2,}", " ", body)
    return f"${body}$" if body else None


def _strip_run(s: str) -> tuple[str, str, str]:
    """(leading text, math candidate, trailing text): sentence punctuation at the end and
    unmatched outer brackets stay text."""
    lead, trail = "", ""
    while True:
        changed = False
        if s and s[-1] in ".,;:":
            trail, s, changed = s[-1] + trail, s[:-1], True
        if s.count(")") > s.count("(") and s.endswith(")"):
            trail, s, changed = ")" + trail, s[:-1], True
        if s.count("(") > s.count(")") and s.startswith("("):
            lead, s, changed = lead + "(", s[1:], True
        if not changed:
            return lead, s, trail


def _convert_run(s: str) -> str:
    """One stretch of words that look like math: the longest sub-stretch (whole words) that
    converts cleanly and holds certain math becomes $...$, recursively; the rest is text."""
    words = s.split(" ")
    n = len(words)
    for length in range(n, 0, -1):
        for start in range(0, n - length + 1):
            seg = " ".join(words[start:start + length])
            if not _strong(seg.replace(" ", "")) and not any(_strong(w) for w in words[start:start + length]):
                continue
            lead, core, trail = _strip_run(seg)
            conv = math_to_latex(core) if core else None
            if conv:
                before = " ".join(words[:start])
                after = " ".join(words[start + length:])
                return ((_convert_run(before) + " " if before else "") + latex_escape(lead) + conv
                        + latex_escape(trail) + (" " + _convert_run(after) if after else ""))
    return latex_escape(s)


def plain_to_latex(text: str, *, header: bool = False) -> str:
    """Plain text with plain-text math (as the family modules write captions and headers) ->
    LaTeX: stretches that are certainly math become ``$...$`` (Greek names, ``x^2``, ``||W||``,
    ``n_c``, ``->``, ``>=``, ``sqrt(...)``, with the numbers, single letters and operators
    between them); everything else is escaped text. Conservative: a stretch that does not convert
    cleanly (unbalanced brackets, a dangling ``^``) stays escaped text. ``header=True`` treats a
    lone letter (``k``, ``f*``) as math."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    if header:
        c = text.strip()
        if re.fullmatch(r"[A-Za-z]\*?|[A-Za-z]{2,3}\*", c) or c in GREEK or _is_math_identifier(c) or (
                _strong(c) and " " not in c):
            conv = math_to_latex(c)
            if conv:
                return conv
    words = re.split(r"(\s+)", text)
    kinds = []  # per word: 2 strong, 1 weak, 0 text (whitespace entries: None)
    for w in words:
        if not w or w.isspace():
            kinds.append(None)
        else:
            kinds.append(2 if _strong(w) else 1 if _weak(w, header) else 0)
    idx = [i for i, k in enumerate(kinds) if k is not None]
    in_math = [False] * len(words)
    for pos, i in enumerate(idx):
        if kinds[i] != 2:
            continue
        in_math[i] = True
        # extend to the left over weak words, to the right over weak words
        p = pos - 1
        while p >= 0 and kinds[idx[p]] == 1 and not re.search(r"[.;:]$", words[idx[p]]):
            in_math[idx[p]] = True
            p -= 1
        p = pos + 1
        while p < len(idx) and kinds[idx[p]] == 1 and not re.search(r"[.;:,]$", words[idx[p - 1]]):
            in_math[idx[p]] = True
            p += 1
    # runs of math words; a run breaks after a word ending in . ; : and after a comma unless
    # the next word is certainly math
    out: list[str] = []
    run: list[str] = []

    def flush():
        if not run:
            return
        out.append(_convert_run("".join(run).strip()))
        run.clear()

    for i, w in enumerate(words):
        if kinds[i] is None:
            (run if run else out).append(w if run else w)
            continue
        if in_math[i]:
            if run:
                prev = [j for j in range(i - 1, -1, -1) if kinds[j] is not None][0]
                pw = words[prev]
                if re.search(r"[.;:]$", pw) or (pw.endswith(",") and kinds[i] != 2):
                    # the whitespace before this word was appended to run: move it out
                    ws = run.pop() if run and run[-1].isspace() else ""
                    flush()
                    out.append(ws)
            run.append(w)
        else:
            if run:
                ws = run.pop() if run[-1].isspace() else ""
                flush()
                out.append(ws)
            out.append(latex_escape(w))
    if run:
        ws = run.pop() if run[-1].isspace() else ""
        flush()
        out.append(ws)
    return "".join(out)


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
            elif name.isdigit() and 1 <= int(name) <= len(self.columns):
                idx.append(int(name) - 1)
            else:
                raise InputError(f"--columns: no column {name!r}; the columns are: " + ", ".join(self.columns))
        lc = [self.latex_columns[i] for i in idx] if self.latex_columns is not None else None
        return Table([self.columns[i] for i in idx], [[r[i] for i in idx] for r in self.rows], self.caption,
                     latex_columns=lc, digits=self.digits, meta=dict(self.meta), latex_caption=self.latex_caption)

    def render(self, fmt: str, *, precision: int | None = None, na_rep: str | None = None,
               label: str | None = None, caption: str | None = None, columns: Sequence[str] | None = None,
               cite_keys: Sequence[str] | None = None) -> str:
        """Render as ``fmt`` (md, latex, csv, json). ``precision``: significant digits of the
        numbers (md, latex; default: the table's digits, 4 in LaTeX); ``na_rep``: text of a
        missing number (md default "null", LaTeX default "--"); ``label``: the LaTeX label;
        ``caption``: replaces the caption (LaTeX source in the latex format, verbatim);
        ``columns``: the columns to keep; ``cite_keys``: BibTeX keys cited in the caption."""
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
        if fmt == "latex":
            return t.to_latex(precision=precision, na_rep=na_rep, label=label, caption=caption, cite_keys=keys)
        if fmt == "md":
            return t.to_md(precision=precision, na_rep=na_rep, caption=caption, cite_keys=keys)
        if fmt == "csv":
            return t.to_csv()
        return t.to_json(caption=caption, cite_keys=keys)

    # ---- formats -------------------------------------------------------------------------------

    def to_md(self, *, precision: int | None = None, na_rep: str | None = None, caption: str | None = None,
              cite_keys: Sequence[str] = ()) -> str:
        digits = precision or self.digits
        na = "null" if na_rep is None else na_rep
        lines = ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        for r in self.rows:
            lines.append("| " + " | ".join(_cell(x, digits, na).replace("|", "\\|") for x in r) + " |")
        cap = self.caption if caption is None else caption
        if cite_keys:
            cap = (cap + " " if cap else "") + "Sources: " + ", ".join(f"[{k}]" for k in cite_keys) + "."
        if cap:
            lines += ["", cap]
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
                 caption: str | None = None, cite_keys: Sequence[str] = ()) -> str:
        digits = precision or min(self.digits, LATEX_DEFAULT_DIGITS)
        na = LATEX_DEFAULT_NA if na_rep is None else na_rep
        heads = self.latex_header_cells()
        ncol = len(self.columns)
        body = []
        numeric = [all(x is None or _is_number(x) for x in (r[j] for r in self.rows)) for j in range(ncol)]
        widths = [0] * ncol
        for r in self.rows:
            cells = []
            for j, x in enumerate(r):
                if x is None:
                    s = latex_escape(na)
                    widths[j] = max(widths[j], len(na))
                elif _is_number(x):
                    s = _latex_number(x, digits, na)
                    widths[j] = max(widths[j], digits + 5)
                else:
                    text = "yes" if x is True else "no" if x is False else str(x)
                    s = latex_escape(text)
                    widths[j] = max(widths[j], len(text))
                cells.append(s)
            body.append(" & ".join(cells) + r" \\")
        spec = []
        for j in range(ncol):
            if numeric[j]:
                spec.append("r")
            elif widths[j] > _WRAP_CHARS:
                # long text wraps: width ~ 0.45 em per character, at most 12 em
                em = min(12.0, max(6.0, 0.45 * _WRAP_CHARS))
                spec.append(r">{\raggedright\arraybackslash}p{" + f"{em:g}em" + "}")
            else:
                spec.append("l")
        cap = self.latex_caption_text(caption, cite_keys)
        lab = label if label is not None else (f"tab:ncproofs-{self.meta.get('family')}"
                                               if isinstance(self.meta.get("family"), str) else "")
        out = ["% generated by ncproofs; needs \\usepackage{booktabs,array,graphicx}",
               "\\begin{table}[tbp]", "\\centering", "\\small"]
        if ncol > 6:
            out.append("\\setlength{\\tabcolsep}{%gpt}" % (3 if ncol > 9 else 4))
        if cap:
            out.append("\\caption{" + cap + "}")
        if lab:
            out.append("\\label{" + lab + "}")
        # TeX measures the table: wider than the line -> scaled down to the line width
        out += ["\\ifdefined\\ncproofsbox\\else\\newsavebox{\\ncproofsbox}\\fi",
                "\\sbox{\\ncproofsbox}{%",
                "\\begin{tabular}{" + "".join(spec) + "}", "\\toprule",
                " & ".join(heads) + " \\\\", "\\midrule"]
        out += body
        out += ["\\bottomrule", "\\end{tabular}}%",
                "\\ifdim\\wd\\ncproofsbox>\\linewidth",
                "\\resizebox{\\linewidth}{!}{\\usebox{\\ncproofsbox}}%",
                "\\else\\usebox{\\ncproofsbox}\\fi",
                "\\end{table}"]
        return "\n".join(out) + "\n"

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

        d = {"columns": self.columns, "rows": clean(self.rows),
             "caption": self.caption if caption is None else caption, "meta": clean(self.meta)}
        if cite_keys:
            d["citations"] = list(cite_keys)
        return json.dumps(d, indent=2) + "\n"


# ---- CLI helpers (cli.py calls these for every `table` subcommand) --------------------------------

def _columns_arg(text: str) -> list[str]:
    import argparse

    cols = [c.strip() for c in text.split(",") if c.strip()]
    if not cols:
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, got {text!r}")
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
    p.add_argument("--no-cite", action="store_true",
                   help="do not name the sources (\\cite keys of `ncproofs cite`) in the caption")


def render_from_args(table: Table, args, family: str | None = None) -> str:
    """Render ``table`` with the options of :func:`add_render_arguments` (missing ones: defaults)."""
    keys: list[str] = []
    if family and not getattr(args, "no_cite", False):
        from proofs_check.citations import keys_for_family

        keys = keys_for_family(family)
    label = getattr(args, "label", None)
    if label is None and family:
        label = f"tab:ncproofs-{family}"
    return table.render(getattr(args, "format", "md"), precision=getattr(args, "precision", None),
                        na_rep=getattr(args, "na_rep", None), label=label, caption=getattr(args, "caption", None),
                        columns=getattr(args, "columns", None), cite_keys=keys)
