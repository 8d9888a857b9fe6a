"""LaTeX tables compile: every family's `ncproofs table ... --format latex` is compiled with
pdflatex inside a plain article (booktabs, amsmath, amssymb, siunitx, graphicx, array, longtable,
caption), the log must show no error and no Overfull \\hbox over 10 pt, and the PDF text
(pdftotext) must show the numbers. Plus unit tests of the options and of the plain-text math
converter (no TeX needed for those).

Needs the Debian packages texlive-latex-recommended, texlive-science and poppler-utils. Skipped
with a message where pdflatex is absent and CI is not set; in CI it must run.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess

import pytest

from proofs_check.cli import main
from proofs_check.tables import Table, latex_escape, plain_to_latex

PREAMBLE = r"""\documentclass{article}
\usepackage{booktabs,amsmath,amssymb,siunitx,graphicx,array,longtable,caption}
\begin{document}
"""

HAVE_TEX = shutil.which("pdflatex") is not None and shutil.which("pdftotext") is not None
needs_tex = pytest.mark.skipif(not HAVE_TEX and not os.environ.get("CI"),
                               reason="pdflatex/pdftotext not installed (apt-get install texlive-latex-recommended "
                                      "texlive-science poppler-utils); required in CI")

# small arguments for every family's table (the crh table trains a tiny network for 400 steps)
FAMILY_TABLES = {
    "scl": ["scl", "--counts", "3,3", "--counts", "5,2,2", "--tau", "0.1,1"],
    "scl-step": ["scl", "--profile", "step", "--classes", "4", "--majority", "6", "--ratio", "3", "--tau", "0.5"],
    "ufm-ce": ["ufm", "--loss", "ce", "--classes", "3,4", "--lambda", "0.01,0.5"],
    "ufm-mse": ["ufm", "--loss", "mse", "--classes", "3", "--lambda", "0.01,2"],
    "ntk": ["ntk"],
    "feature-collapse": ["feature-collapse", "--concepts", "2", "--length", "2", "--words-per-concept", "2",
                         "--lambdas", "0.001,0.1"],
    "feature-collapse-ln": ["feature-collapse", "--concepts", "3", "--length", "2", "--words-per-concept", "2",
                            "--layernorm", "--lambdas", "0.01", "--dims", "3,4", "--zipf"],
    "crh": ["crh", "--weight-decays", "0,0.01", "--steps", "400", "--records", "4", "--null-draws", "4",
            "--time-budget", "60"],
}


def _table(tmp_path, name: str, args: list[str], fmt: str, extra=()) -> str:
    out = tmp_path / f"{name}.{fmt}"
    rc = main(["table", *args, "--format", fmt, "--output", str(out), *extra])
    assert rc == 0, f"ncproofs table {' '.join(args)} exited {rc}"
    return out.read_text()


def _compile(tmp_path, body: str, name: str = "doc") -> tuple[str, str]:
    """Compile body in the plain article; return (log, pdftotext text). Asserts no error."""
    if not HAVE_TEX:
        pytest.fail("pdflatex/pdftotext missing in CI: apt-get install texlive-latex-recommended texlive-science "
                    "poppler-utils")
    tex = tmp_path / f"{name}.tex"
    tex.write_text(PREAMBLE + body + "\n\\end{document}\n")
    proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", tex.name], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    log = (tmp_path / f"{name}.log").read_text(errors="replace")
    errors = [line for line in log.splitlines() if line.startswith("!")]
    assert proc.returncode == 0 and not errors, f"pdflatex failed: {errors[:5]}\n{log[-3000:]}"
    over = [float(m) for m in re.findall(r"Overfull \\hbox \(([0-9.]+)pt too wide\)", log)]
    assert all(o <= 10.0 for o in over), f"Overfull \\hbox over 10 pt: {over}"
    text = subprocess.run(["pdftotext", "-layout", f"{name}.pdf", "-"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60).stdout
    return log, text


#: a line of body text before every table: the table's numbers must have its type size (no \small, no scaling)
REFERENCE_LINE = "Reference 0123456789 text.\n\n"
#: widths in cmr10 at 10 pt (points): digits are all 0.5 em, the period 0.278 em, the math minus 0.778 em
_W_DIGIT, _W_DOT, _W_MINUS = 5.0, 2.778, 7.778


def _bodies(latex: str) -> list[str]:
    """The body rows (between \\midrule and \\bottomrule) of every tabular in ``latex``."""
    return re.findall(r"\\midrule\n(.*?)\\bottomrule", latex, flags=re.S)


def _s_columns(spec: str) -> list[bool]:
    """For each column of a tabular spec: whether it is a siunitx S column."""
    out, i = [], 0
    while i < len(spec):
        ch = spec[i]
        if ch in "{[":  # skip a group
            close, depth = {"{": "}", "[": "]"}[ch], 0
            while True:
                depth += spec[i] == ch
                depth -= spec[i] == close
                i += 1
                if depth == 0:
                    break
            continue
        if ch in "Slcrp":
            out.append(ch == "S")
        i += 1
    return out


def _pdf_words(tmp_path, name: str) -> list[tuple[str, float, float, float, float]]:
    html = subprocess.run(["pdftotext", "-bbox", f"{name}.pdf", "-"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60).stdout
    return [(_norm(m.group(5)), float(m.group(1)), float(m.group(2)), float(m.group(3)), float(m.group(4)))
            for m in re.finditer(r'<word xMin="([0-9.]+)" yMin="([0-9.]+)" xMax="([0-9.]+)" yMax="([0-9.]+)">'
                                 r'([^<]*)</word>', html)]


def _dot_x(word: str, x0: float, x1: float) -> float:
    """x of the decimal point of a printed number (its right end for an integer), from cmr10's widths."""
    if "." not in word:
        return x1
    before = word.split(".")[0]
    return x0 + sum(_W_MINUS if c == "-" else _W_DIGIT for c in before)


def _check_alignment_and_size(tmp_path, name: str, latex: str) -> None:
    """In the compiled PDF (pdftotext -bbox): every number of a table has the height of the body text's words
    (the document's type size: a \\small or scaled table fails), and in each S column the decimal points (the
    right ends of integers) of all rows lie at one x, within 0.6 pt."""
    words = _pdf_words(tmp_path, name)
    ref = [w for w in words if w[0] == "0123456789"]
    assert ref, "the reference line is missing from the PDF text"
    h0 = ref[0][4] - ref[0][2]
    lines: dict[float, list] = {}
    for w in words:
        lines.setdefault(round(w[4], 0), []).append(w)
    used = set()
    for spec, body in zip(re.findall(r"\\begin\{(?:tabular|longtable)\}\{(.*)\}\n", latex), _bodies(latex)):
        is_s = _s_columns(spec)
        rows = [[c.strip() for c in ln.removesuffix("\\\\").rstrip().removesuffix("\\\\").split(" & ")]
                for ln in body.strip().splitlines()]
        xs: dict[int, list[float]] = {}
        for cells in rows:
            want = [(j, c.replace("-", "-").split("e")[0]) for j, c in enumerate(cells)
                    if j < len(is_s) and is_s[j] and re.fullmatch(r"-?[0-9.]+(e-?[0-9]+)?", c)]
            if not want:
                continue
            found = None
            for y in sorted(lines):
                if y in used:
                    continue
                seq = sorted(lines[y], key=lambda w: w[1])
                pos, hits = 0, []
                for j, tok in want:
                    while pos < len(seq) and seq[pos][0] != tok:
                        pos += 1
                    if pos == len(seq):
                        break
                    hits.append((j, seq[pos]))
                    pos += 1
                if len(hits) == len(want):
                    found = (y, hits)
                    break
            assert found, f"{name}: row {cells} not found in the PDF text"
            used.add(found[0])
            for j, w in found[1]:
                assert abs((w[4] - w[2]) - h0) < 0.3, f"{name}: {w[0]} is {w[4] - w[2]:.2f} pt high, text {h0:.2f}"
                xs.setdefault(j, []).append(_dot_x(w[0], w[1], w[3]))
        for j, v in xs.items():
            assert max(v) - min(v) < 0.6, f"{name}: column {j + 1} not aligned at the decimal point: {v}"


def _norm(text: str) -> str:
    return text.replace("\u2212", "-").replace("\u2013", "-")


def _sig(x: float, digits: int = 4) -> str:
    """What a paper table prints: `digits` significant digits (the documented default)."""
    return f"{x:.{digits}g}"


@needs_tex
@pytest.mark.parametrize("name", sorted(FAMILY_TABLES))
def test_family_table_compiles_and_shows_numbers(tmp_path, name):
    args = FAMILY_TABLES[name]
    latex = _table(tmp_path, name, args, "latex")
    data = json.loads(_table(tmp_path, name, args, "json"))
    assert "\\caption{" in latex and "\\label{tab:ncproofs-" in latex and "\\toprule" in latex
    for body in _bodies(latex):
        assert "null" not in body, "missing numbers must print the na-rep, not null"
    assert "docs/" not in latex and "resizebox" not in latex and not re.search(r"\\(small|footnotesize)(?![a-z])", latex)
    log, text = _compile(tmp_path, REFERENCE_LINE + latex, name)
    text = _norm(text)
    # every finite number appears with 4 significant digits in its column's notation (docs/outputs.md: a column
    # is fixed when every nonzero |x| is in [1e-3, 1e5), else scientific)
    shown = 0
    cols = data["columns"]
    for j, col in enumerate(cols):
        vals = [r[j] for r in data["rows"] if isinstance(r[j], (int, float)) and not isinstance(r[j], bool)
                and math.isfinite(r[j])]
        if not vals or len(vals) != sum(r[j] is not None for r in data["rows"]):
            continue  # a text column, or numbers mixed with text
        fixed = all(isinstance(v, int) for v in vals) or all(1e-3 <= abs(v) < 1e5 for v in vals if v != 0)
        for v in vals:
            if isinstance(v, int):
                want = str(v)
            elif fixed:
                want = _sig(float(v))
                if "e" in want:
                    continue
            else:
                want = f"{float(v):.3e}".split("e")[0].rstrip("0").rstrip(".")
            assert want in text, f"{name}: number {v} of column {col} (printed {want}) not in the PDF text"
            shown += 1
    assert shown >= 3, f"{name}: too few numbers checked ({shown})"
    _check_alignment_and_size(tmp_path, name, latex)
    # the caption is math, not plain text: no raw plain-text math forms survive
    assert not re.search(r"\|\||\^\{|->|lambda_|n_c\b", text), f"{name}: plain-text math left in the PDF text"


@needs_tex
def test_all_tables_in_one_document_with_bibliography(tmp_path):
    """All family tables in one document with the bibliography of `ncproofs cite`: the cited
    keys resolve (bibtex finds every \\cite of the captions)."""
    if shutil.which("bibtex") is None:
        pytest.skip("bibtex not installed")
    parts = [_table(tmp_path, n, a, "latex", ("--label", f"tab:{n}")) for n, a in FAMILY_TABLES.items() if n != "crh"]
    assert main(["cite", "--output", str(tmp_path / "refs.bib")]) == 0
    body = "\n".join(parts) + "\n\\clearpage\n\\bibliographystyle{plain}\n\\bibliography{refs}\n"
    _compile(tmp_path, body, "all")
    subprocess.run(["bibtex", "all"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    _compile(tmp_path, body, "all")
    log, text = _compile(tmp_path, body, "all")
    assert "Citation" not in "\n".join(l for l in log.splitlines() if "undefined" in l), "undefined citations"
    assert "Symmetric Neural-Collapse" in _norm(text).replace("\n", " ") or "Symmetric" in text


@needs_tex
def test_wide_table_fits_and_hostile_text_compiles(tmp_path):
    cols = [f"col_{i}" for i in range(18)] + ["notes"]
    rows = [[1234567.891 * (i + 1) for i in range(18)] + ["a & b % c $ d # e _ f { g } h ^ i ~ j \\ k < l > m | n λ ≥ 2"]]
    cap = "Hostile caption: 100% of {braces, $dollars$, x^2, a_b, ||W||, tau -> 0+, e^{-1/tau} and \\commands."
    t = Table(cols, rows, caption=cap)
    _, text = _compile(tmp_path, t.render("latex", precision=3), "wide")
    assert "1.23" in _norm(text)
    assert "Hostile caption" in text


@needs_tex
def test_old_plain_text_caption_would_not_compile(tmp_path):
    """The defect the renderer fixes: the plain caption put in \\caption as it is stops pdflatex
    (so the compile check above can fail)."""
    if not HAVE_TEX:
        pytest.fail("pdflatex missing in CI")
    tex = tmp_path / "bad.tex"
    tex.write_text(PREAMBLE + "\\begin{table}\\caption{loss lw/2||W||^2 e^{-1/tau}}\\end{table}\n\\end{document}\n")
    proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "bad.tex"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "Missing $ inserted" in (tmp_path / "bad.log").read_text(errors="replace")


# ---- options (no TeX needed) ----------------------------------------------------------------------

def _t():
    return Table(["k", "lambda", "value", "phase"], [[3, 0.001, 1.234567891, "collapse"], [4, 0.5, None, "trivial"]],
                 caption="values with lw/2||W||^2", meta={"family": "ufm"})


def test_precision_na_rep_label_caption_columns():
    t = _t()
    out = t.render("latex", precision=3, na_rep="n/a", label="tab:mine", caption="My $x$ caption",
                   columns=["value", "k"])
    # siunitx S columns: plain numbers, 3 significant digits with trailing zeros kept, the na-rep braced
    assert "1.23 & 3" in out and "1.2346" not in out
    assert "{n/a}" in out and "null" not in out
    assert "\\label{tab:mine}" in out and "\\caption{My $x$ caption}" in out
    body = out.split("\\midrule", 1)[1]
    assert body.splitlines()[1].startswith("1.23 & 3")  # column order as requested
    assert "collapse" not in out and "0.001" not in out
    md = t.render("md", precision=2, na_rep="-", columns=["k", "value"])
    assert "| 3 | 1.2 |" in md and "| 4 | - |" in md


def test_default_latex_precision_is_four_digits_and_dash_for_missing():
    out = _t().render("latex")
    assert "1.235 &" in out and "{--}" in out.split("\\midrule", 1)[1]
    assert "\\label{tab:ncproofs-ufm}" in out


def test_exponent_numbers_one_notation_per_column():
    """A column spanning more than [1e-3, 1e5) is scientific throughout (siunitx prints x 10^e), with the same
    significant digits in every cell; a column inside the range is fixed throughout."""
    t = Table(["x", "y"], [[1.5e-12, 0.00409], [-2.25e30, 0.901], [float("nan"), 1.1], [0.000409, 1.61]])
    out = t.render("latex", precision=3)
    body = out.split("\\midrule")[1]
    assert "1.50e-12 & 0.00409" in body and "-2.25e30 & 0.901" in body and "4.09e-4 & 1.61" in body
    assert "{--} & 1.10" in body  # trailing zero kept: 3 significant digits in every cell
    assert "nan" not in body.lower()
    assert "S[table-format=-1.2e-2," in out and "S[table-format=1.5," in out


@pytest.mark.parametrize("kw,match", [({"precision": 0}, "precision"), ({"precision": 18}, "precision"),
                                      ({"label": "bad label{"}, "label"), ({"columns": ["nope"]}, "nope"),
                                      ({"columns": []}, "columns")])
def test_bad_options_are_input_errors(kw, match):
    from theory._validate import InputError

    with pytest.raises(InputError, match=match):
        _t().render("latex", **kw)


def test_cli_options(tmp_path, capsys):
    rc = main(["table", "ufm", "--loss", "ce", "--classes", "3", "--lambda", "0.01", "--format", "latex",
               "--precision", "2", "--label", "tab:u", "--columns", "k,f*", "--no-cite"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "\\label{tab:u}" in out and "\\cite" not in out
    assert out.split("\\midrule", 1)[1].splitlines()[1] == "3 & 0.15 \\\\"
    rc = main(["table", "ufm", "--classes", "3", "--lambda", "0.01", "--columns", "zzz"])
    assert rc == 2
    assert "zzz" in capsys.readouterr().err


def test_latex_caption_and_headers_are_used_verbatim():
    t = Table(["a"], [[1.0]], caption="plain", latex_caption=r"The $\alpha$ table", latex_headers=[r"$\alpha$"])
    out = t.render("latex")
    assert r"\caption{The $\alpha$ table}" in out and r"{$\alpha$} \\" in out
    assert t.latex_columns == [r"$\alpha$"]


# ---- the converter ------------------------------------------------------------------------------

@pytest.mark.parametrize("plain,latex", [
    ("e^{-1/tau}", r"$e^{-1/\tau}$"),
    ("lw/2||W||^2", r"$\mathrm{lw}/2\|W\|^{2}$"),
    ("tau -> 0+", r"$\tau \to 0^+$"),
    ("lambda_crit", r"$\lambda_{\mathrm{crit}}$"),
    ("n_c >= 2", r"$n_{c} \ge 2$"),
    ("||mu_c - h_bar||^2", r"$\|\mu_{c} - \bar{h}\|^{2}$"),
    ("sqrt(m lambda_c)", r"$\sqrt{m \lambda_{c}}$"),
])
def test_plain_math_converted(plain, latex):
    assert plain_to_latex(plain) == latex


@pytest.mark.parametrize("plain", ["bound_per_sample is a column", "100% & more", "a ^ dangling x^",
                                   "{unbalanced e^{x", "\\input{/etc/passwd}", "$x$"])
def test_unconvertible_text_is_escaped(plain):
    out = plain_to_latex(plain)
    # no unescaped specials outside $...$
    outside = re.sub(r"(?<!\\)\$[^$]*(?<!\\)\$", "", out)
    assert not re.search(r"(?<!\\)[%&#_^~]", outside.replace("\\textasciicircum{}", "").replace(
        "\\textasciitilde{}", "")), out
    assert "\\input" not in out


def test_escape_specials():
    assert latex_escape("a_b & 5% #1 {x} ^ ~ \\") == (
        r"a\_b \& 5\% \#1 \{x\} \textasciicircum{} \textasciitilde{} \textbackslash{}")


# ---- issue 29: per-column digits, empty columns, citations, the alignment check itself ----------------------

def test_decimals_and_sig_per_column():
    t = Table(["k", "value", "gap"], [[3, 1.23456, 1.5e-9], [4, 12.5, 2.25e-7]], meta={"family": "ufm"})
    out = t.render("latex", decimals="value=2", sig="gap=2")
    rows = out.split("\\midrule\n", 1)[1].splitlines()[:2]
    assert rows == ["3 & 1.23 & 1.5e-9 \\\\", "4 & 12.50 & 2.2e-7 \\\\"]  # 2.25e-7 -> 2.2 (ties to even)
    assert "S[table-format=2.2," in out and "S[table-format=1.1e-1," in out
    out = t.render("latex", sig=2)
    assert "1.2 & 1.5e-9" in out and "12 & 2.2e-7" in out
    from theory._validate import InputError

    for kw, needle in (({"decimals": "nope=2"}, "no column 'nope'"), ({"sig": "0"}, "--sig must be in 1..17"),
                       ({"decimals": "value=x"}, "not N or COL=N"), ({"sig": "3,,"}, "empty entry")):
        with pytest.raises(InputError, match=needle):
            t.render("latex", **kw)
    with pytest.raises(InputError, match="need --format latex"):
        t.render("md", sig=3)


def test_cli_decimals_sig_wide(capsys):
    args = ["table", "ufm", "--loss", "mse", "--classes", "3", "--lambda", "0.01,2", "--format", "latex"]
    assert main(args + ["--decimals", "f*=3", "--wide"]) == 0
    tex = capsys.readouterr().out
    assert tex.count("\\begin{tabular}") == 1 and "& 0.028 &" in tex and "& 0.333 &" in tex
    assert main(args + ["--sig", "f*=x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--sig" in err[0]


def test_all_empty_columns_are_dropped_in_md_and_latex():
    t = Table(["lambda", "d", "value"], [[0.1, None, 1.0], [0.2, float("nan"), 2.0]])
    assert "d" not in t.render("md").splitlines()[0].split(" | ")
    latex = t.render("latex")
    assert "{$d$}" not in latex and latex.count("S[table-format") == 2
    assert json.loads(t.render("json"))["columns"] == ["lambda", "d", "value"]  # data formats keep every column


def test_captions_cite_papers_not_files_and_the_ce_table_cites_the_ce_papers(capsys):
    assert main(["table", "ufm", "--loss", "ce", "--classes", "3", "--lambda", "0.01", "--format", "latex"]) == 0
    tex = capsys.readouterr().out
    cites = re.findall(r"\\cite\{([^}]*)\}", tex)
    assert cites == ["zhu2021geometric,ji2022unconstrained,lu2022neural"]  # not the MSE papers
    assert "docs/" not in tex and "ufm\\_general" not in tex
    assert main(["table", "ufm", "--loss", "mse", "--classes", "3", "--lambda", "0.01", "--format", "latex"]) == 0
    tex = capsys.readouterr().out
    assert re.findall(r"\\cite\{([^}]*)\}", tex) == ["zhou2022optimization,han2022neural"]
    caption = re.search(r"\\caption\{(.*)\}\n", tex).group(1)
    assert len(caption) < 400  # short: the conventions are a note under the table


@needs_tex
def test_alignment_check_can_fail(tmp_path):
    """The pdftotext check sees a right-aligned (not decimal-aligned) column and a \\small table."""
    rows = "1.5 \\\\\n12.25 \\\\\n123.125 \\\\\n"
    ragged = "\\begin{table}\n\\begin{tabular}{r}\n\\toprule\nx \\\\\n\\midrule\n" + rows + "\\bottomrule\n\\end{tabular}\n\\end{table}\n"
    _compile(tmp_path, REFERENCE_LINE + ragged, "ragged")
    claimed = ragged.replace("{tabular}{r}", "{tabular}{S}")  # what the checker reads as the column types
    with pytest.raises(AssertionError, match="not aligned"):
        _check_alignment_and_size(tmp_path, "ragged", claimed)
    small = "{\\small " + Table(["x"], [[1.5], [12.25]]).render("latex").replace("\\begin{table}[tbp]", "") \
        .replace("\\end{table}", "") + "}"
    _compile(tmp_path, REFERENCE_LINE + small, "small")
    with pytest.raises(AssertionError, match="pt high"):
        _check_alignment_and_size(tmp_path, "small", small)


def test_significant_digit_formatting_agrees_with_python_and_rounds_outward():
    """format_sig keeps exactly `sig` significant digits (Python's own %.*e rounding, trailing zeros kept) and
    its directed modes bracket the double (exact fractions)."""
    import random
    from fractions import Fraction

    from proofs_check.tables import format_fixed, format_sig

    rng = random.Random(29)
    for _ in range(400):
        x = rng.choice([-1, 1]) * 10 ** rng.uniform(-12, 12)
        sig = rng.randint(1, 8)
        mant, exp = f"{x:.{sig - 1}e}".split("e")
        sci = format_sig(x, sig, notation="sci")
        assert sci == f"{mant}e{int(exp)}", (x, sig, sci)
        fixed = format_sig(x, sig, notation="fixed")
        assert Fraction(fixed) == Fraction(mant) * Fraction(10) ** int(exp)
        assert len(fixed.lstrip("-").replace(".", "").lstrip("0")) >= sig or Fraction(fixed) == 0
        lo, hi = format_sig(x, sig, "down", "fixed"), format_sig(x, sig, "up", "fixed")
        assert Fraction(lo) <= Fraction(x) <= Fraction(hi)
    assert format_sig(1.1, 4) == "1.100" and format_sig(0.000409, 3, notation="sci") == "4.09e-4"
    assert format_sig(9.99996, 4) == "10.00" and format_fixed(2.5, 0) == "2" and format_fixed(-1e-9, 2) == "0.00"
