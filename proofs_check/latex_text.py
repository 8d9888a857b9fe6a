"""Text for LaTeX: escaping (:func:`latex_escape`) and the conservative plain-text math converter
(:func:`plain_to_latex`, :func:`math_to_latex`) used by tables, captions, citations and figures.

Its own module so that :mod:`proofs_check.citations` (BibTeX values) and :mod:`proofs_check.tables`
(captions, headers) both use it without importing each other.
"""

from __future__ import annotations

import re

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


_CAPTION_ALWAYS_ESCAPED = {"%": r"\%", "&": r"\&", "#": r"\#"}

#: commands without an argument that a caption may use as they are (defined by LaTeX, amsmath, amssymb); any other
#: command is kept only when an argument follows (``\\citep{..}``, ``\\mymacro{}``): ``C:\\Users\\x`` is text
CAPTION_COMMANDS = GREEK | frozenset(
    "varepsilon vartheta varphi varrho varsigma Upsilon ell hbar infty partial nabla emptyset top bot star ast "
    "cdot cdots ldots dots vdots ddots times div pm mp le leq ge geq ne neq approx sim simeq equiv propto ll gg "
    "subset subseteq supset supseteq in notin cup cap wedge vee oplus otimes to rightarrow leftarrow Rightarrow "
    "Leftarrow leftrightarrow iff mapsto gets uparrow downarrow forall exists neg lnot langle rangle lvert rvert "
    "lVert rVert vert Vert mid circ bullet prime deg sum prod int oint lim sup inf min max log ln exp det dim ker "
    "arg sin cos tan quad qquad left right big Big bigg Bigg displaystyle textstyle LaTeX TeX S P dag ddag "
    "copyright pounds textbackslash textasciitilde textasciicircum textbar textless textgreater slash "
    "newline linebreak nobreak relax protect noindent".split())


def caption_source(text: str) -> str:
    """A user's ``--caption`` (LaTeX source) made safe for ``\\caption{...}``: kept verbatim where it is
    LaTeX (``$\\alpha$``, ``\\emph{x}``, ``\\%``), with the characters that cannot be meant there escaped:
    an unescaped ``%`` (it would comment out the closing brace), ``&`` and ``#``; ``_``, ``^``, ``<``, ``>``
    and ``|`` outside ``$...$`` / ``\\(...\\)``; control characters become spaces; Greek letters, arrows and
    other characters outside Latin-1 as in :func:`latex_escape`; a command is kept when it is one of
    :data:`CAPTION_COMMANDS` or an argument follows it (``\\cite{..}``, ``\\emph{..}``, your ``\\mymacro{}``),
    else it is text (``C:\\Users\\x``). A caption whose ``$`` or braces do not balance, or that ends in a
    lone backslash, is not LaTeX source: it is escaped as text whole (:func:`latex_escape`). The
    result compiles either way (tests/test_table_caption_latex_source.py)."""
    if not isinstance(text, str):
        raise TypeError(f"caption must be a string, got {type(text).__name__}")
    out: list[str] = []
    depth = 0
    in_math = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            if i + 1 >= n:
                return latex_escape(text)
            nxt = text[i + 1]
            if nxt.isascii() and nxt.isalpha():
                j = i + 1
                while j < n and text[j].isascii() and text[j].isalpha():
                    j += 1
                name = text[i + 1:j]
                k = j
                while k < n and text[k] == " ":
                    k += 1
                if name in CAPTION_COMMANDS or (k < n and text[k] in "{["):
                    out.append(text[i:j])
                else:  # not a command a caption can rely on: a Windows path, a typo
                    out.append((r"\backslash " if in_math else r"\textbackslash{}") + name)
                i = j
                continue
            if not nxt.isascii() or not nxt.isprintable():
                return latex_escape(text)
            if nxt in "()":
                if in_math == (nxt == "("):  # \( inside math, \) outside it
                    return latex_escape(text)
                in_math = nxt == "("
            out.append(text[i:i + 2])
            i += 2
            continue
        if ch in _CAPTION_ALWAYS_ESCAPED:
            out.append(_CAPTION_ALWAYS_ESCAPED[ch])
        elif ch == "$":
            in_math = not in_math
            out.append(ch)
        elif ch == "{":
            depth += 1
            out.append(ch)
        elif ch == "}":
            depth -= 1
            if depth < 0:
                return latex_escape(text)
            out.append(ch)
        elif ch in "_^<>|":
            out.append(ch if in_math else _TEXT_ESCAPES[ch])
        elif ord(ch) < 128:
            out.append(ch if ch.isprintable() else " ")
        elif ch in _UNICODE:
            out.append(_UNICODE[ch] if not in_math else _UNICODE[ch].replace(r"\ensuremath{", "{"))
        elif ord(ch) < 256 and ch.isprintable() and not in_math:
            out.append(ch)
        else:
            out.append("?")
        i += 1
    if depth != 0 or in_math:
        return latex_escape(text)
    return "".join(out)
