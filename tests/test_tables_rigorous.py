"""`ncproofs table FAMILY --rigorous`: proven brackets (ball arithmetic) in paper tables.

Reference values are computed here, independently of the code under test, with mpmath at 50 digits from the
closed forms of docs/ufm.md (CE-UFM: s = sqrt(n lw lh); s >= 1/k: f* = log k, else c* = log(1/s - (k - 1)),
f* = -log(1 - (k - 1) s) + (k - 1) s c*) and docs/scl.md (Theorem 1: sum over classes with n_c >= 2 of
n_c log(n_c - 1 + (N - n_c) e^{-1/tau})). Comparisons with the printed numbers are exact (fractions of the
printed decimals and of the doubles), so a bound printed rounded to nearest instead of outward fails.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
from fractions import Fraction

import pytest

pytest.importorskip("flint")
mpmath = pytest.importorskip("mpmath")

from proofs_check.cli import main  # noqa: E402
from proofs_check.tables import directed_format  # noqa: E402

HAVE_TEX = shutil.which("pdflatex") is not None
needs_tex = pytest.mark.skipif(not HAVE_TEX and not os.environ.get("CI"),
                               reason="pdflatex not installed (apt-get install texlive-latex-recommended); "
                                      "required in CI")
PREAMBLE = r"""\documentclass{article}
\usepackage{booktabs,amsmath,amssymb,siunitx,graphicx,array,longtable,caption}
\begin{document}
"""
NEW = ["proven_lower", "proven_upper", "value_statement", "rigorous"]
UFM_ARGS = ["ufm", "--loss", "ce", "--classes", "3,5", "--per-class", "2,3", "--lambda", "0.01,0.001,0.2"]
SCL_ARGS = ["scl", "--counts", "5,3,2", "--counts", "3,3,3", "--tau", "0.1,0.5,2"]


def ce_closed_form(k: int, n: int, lam: float):
    """f* of the balanced CE-UFM with lw = lh = lam (doubles as given), 50 digits (docs/ufm.md)."""
    with mpmath.workdps(50):
        lam = mpmath.mpf(lam)  # the double, exactly
        s = mpmath.sqrt(n) * lam  # sqrt(n lw lh)
        if s >= mpmath.mpf(1) / k:
            return mpmath.log(k)
        c = mpmath.log(1 / s - (k - 1))
        return -mpmath.log(1 - (k - 1) * s) + (k - 1) * s * c


def scl_theorem1(counts, tau: float):
    with mpmath.workdps(50):
        N = sum(counts)
        e = mpmath.exp(-1 / mpmath.mpf(tau))
        return sum(n * mpmath.log(n - 1 + (N - n) * e) for n in counts if n >= 2)


def _frac(x) -> Fraction:
    """An mpf (50 digits) or a double or a printed decimal, as an exact fraction."""
    if isinstance(x, mpmath.mpf):
        m, e = mpmath.mpf(x).man_exp
        return Fraction(int(m)) * (Fraction(2) ** int(e))
    if isinstance(x, float):
        return Fraction(x)
    return Fraction(str(x))


def _run(capsys, *args) -> tuple[int, str, str]:
    rc = main(["table", *args])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _json(capsys, *args) -> dict:
    rc, out, err = _run(capsys, *args, "--format", "json")
    assert rc == 0, err
    return json.loads(out)


def _rows(d: dict) -> list[dict]:
    return [dict(zip(d["columns"], r)) for r in d["rows"]]


# ---- LaTeX: compiles, bracket columns bracket the 50-digit closed form -----------------------------------------

def _latex_number(cell: str) -> Fraction:
    """A number of a siunitx S column (``1.234``, ``-1.5e-12``; siunitx typesets it) as an exact fraction."""
    m = re.fullmatch(r"(-?[0-9.]+)(?:e(-?[0-9]+))?", cell.strip())
    assert m, f"not a LaTeX number: {cell!r}"
    v = Fraction(m.group(1))
    return v * Fraction(10) ** int(m.group(2)) if m.group(2) else v


def _latex_body(tex: str) -> tuple[list[str], list[list[str]]]:
    """Header cells (siunitx braces removed) and body rows of the first tabular of ``tex``."""
    lines = tex.splitlines()
    i, j = lines.index("\\midrule"), lines.index("\\bottomrule")
    head = [h.strip().removeprefix("{").removesuffix("}") for h in lines[i - 1].removesuffix("\\\\").split(" & ")]
    return head, [[c.strip() for c in ln.removesuffix("\\\\").split(" & ")] for ln in lines[i + 1:j]]


@pytest.mark.parametrize("precision", ["3", "6"])
def test_latex_bracket_contains_closed_form_and_compiles(capsys, tmp_path, precision):
    # --wide: every column in one tabular (the default splits it: test_default_rigorous_latex_is_narrow)
    rc, tex, err = _run(capsys, *UFM_ARGS, "--rigorous", "--format", "latex", "--precision", precision, "--wide")
    assert rc == 0, err
    assert "\\multicolumn{2}{c}{proven (ball arithmetic)}" in tex and "\\cmidrule(lr)" in tex
    head, body = _latex_body(tex)
    assert head[-4:] == ["lower", "upper", "value statement", "rigorous"]
    assert len(body) == 2 * 2 * 3
    for cells in body:
        k, n, lam = int(cells[0]), int(cells[1]), float(_latex_number(cells[2]))
        ref = _frac(ce_closed_form(k, n, lam))
        lo, hi = _latex_number(cells[-4]), _latex_number(cells[-3])
        assert lo <= ref <= hi, (k, n, lam, lo, hi)
        assert cells[-2] == "VERIFIED" and cells[-1] == "yes"
    _compile(tmp_path, tex)


test_latex_bracket_contains_closed_form_and_compiles = needs_tex(test_latex_bracket_contains_closed_form_and_compiles)


def _compile(tmp_path, tex: str) -> None:
    if not HAVE_TEX:
        pytest.fail("pdflatex missing in CI")
    doc = tmp_path / "doc.tex"
    doc.write_text(PREAMBLE + tex + "\n\\end{document}\n")
    proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    log = (tmp_path / "doc.log").read_text(errors="replace")
    errors = [ln for ln in log.splitlines() if ln.startswith("!")]
    assert proc.returncode == 0 and not errors, f"pdflatex failed: {errors[:5]}\n{log[-2000:]}"


@needs_tex
@pytest.mark.parametrize("args", [SCL_ARGS, ["feature-collapse", "--concepts", "3", "--length", "2",
                                             "--words-per-concept", "2", "--layernorm", "--lambdas", "0.01",
                                             "--dims", "3,4", "--zipf"]])
def test_other_rigorous_latex_tables_compile(capsys, tmp_path, args):
    rc, tex, err = _run(capsys, *args, "--rigorous", "--format", "latex", "--wide")
    assert rc == 0, err
    head, body = _latex_body(tex)
    assert head[-4:] == ["lower", "upper", "value statement", "rigorous"]
    for cells in body:  # a proven bracket, lower <= upper, on every row of these instances
        assert _latex_number(cells[-4]) <= _latex_number(cells[-3])
    _compile(tmp_path, tex)


def test_markdown_bracket_printed_outward(capsys):
    """md at 4 digits: the printed bounds still bracket the 50-digit value (nearest rounding would not)."""
    rc, out, err = _run(capsys, *UFM_ARGS, "--rigorous", "--precision", "4")
    assert rc == 0, err
    lines = [ln for ln in out.splitlines() if ln.startswith("| ")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert head[-4:] == NEW
    for ln in lines[1:]:
        r = dict(zip(head, [c.strip() for c in ln.strip("|").split("|")]))
        ref = _frac(ce_closed_form(int(r["k"]), int(r["n"]), float(r["lambda"])))
        assert Fraction(r["proven_lower"]) <= ref <= Fraction(r["proven_upper"])
    assert "Note: proven (ball arithmetic)" in out


# ---- CSV / JSON: the bracket as numbers --------------------------------------------------------------------------

def test_json_and_csv_carry_bracket_as_numbers(capsys):
    d = _json(capsys, *UFM_ARGS, "--rigorous")
    assert d["columns"][-4:] == NEW and "rigorous" in d["meta"] and d["notes"]
    rows = _rows(d)
    for r in rows:
        assert isinstance(r["proven_lower"], float) and isinstance(r["proven_upper"], float)
        ref = _frac(ce_closed_form(r["k"], r["n"], r["lambda"]))
        assert _frac(r["proven_lower"]) <= ref <= _frac(r["proven_upper"])
        # tight: within the family's tolerance (1e-9 relative, docs/rigorous.md)
        assert r["proven_upper"] - r["proven_lower"] <= 1e-9 * abs(r["proven_upper"])
        assert r["value_statement"] == "VERIFIED" and r["rigorous"] is True
    rc, text, err = _run(capsys, *UFM_ARGS, "--rigorous", "--format", "csv")
    assert rc == 0, err
    got = list(csv.DictReader(io.StringIO(text)))
    assert [float(g["proven_lower"]) for g in got] == [r["proven_lower"] for r in rows]  # every digit
    assert [float(g["proven_upper"]) for g in got] == [r["proven_upper"] for r in rows]
    assert {g["rigorous"] for g in got} == {"True"}


def test_scl_bracket_contains_theorem1_value(capsys):
    rows = _rows(_json(capsys, *SCL_ARGS, "--rigorous"))
    assert len(rows) == 6
    for r in rows:
        counts = [int(c) for c in r["counts"].split(",")]
        ref = _frac(scl_theorem1(counts, r["tau"]))
        assert _frac(r["proven_lower"]) <= ref <= _frac(r["proven_upper"]), r
        assert r["value_statement"] == "VERIFIED" and r["rigorous"] is True


# ---- a false value statement: REFUTED by the bracket ----------------------------------------------------------

def test_false_closed_form_row_is_refuted(capsys, monkeypatch):
    """The balanced closed form, made 1e-6 relative too large for k = 3, n = 2 only: that row's statement is
    REFUTED (the proven upper end is below it), its bracket still holds the true value; other rows stay
    VERIFIED."""
    from solvers import losses as L

    loss = L.make_loss("ce", 3)
    cls = type(loss)
    orig = cls.closed_form

    def wrong(self, K, n, lam):
        cf = orig(self, K, n, lam)
        if cf is not None and K == 3 and n == 2:
            cf = {**cf, "value": cf["value"] * (1 + 1e-6)}
        return cf

    monkeypatch.setattr(cls, "closed_form", wrong)
    rows = _rows(_json(capsys, "ufm", "--loss", "ce", "--classes", "3,4", "--per-class", "2", "--lambda", "0.01",
                       "--rigorous"))
    by_k = {r["k"]: r for r in rows}
    bad, good = by_k[3], by_k[4]
    assert bad["value_statement"] == "REFUTED" and bad["rigorous"] is False
    ref = _frac(ce_closed_form(3, 2, 0.01))
    assert _frac(bad["proven_lower"]) <= ref <= _frac(bad["proven_upper"])
    assert _frac(bad["proven_upper"]) < _frac(bad["closed_form"])
    assert good["value_statement"] == "VERIFIED" and good["rigorous"] is True
    rc, tex, _ = _run(capsys, "ufm", "--loss", "ce", "--classes", "3", "--per-class", "2", "--lambda", "0.01",
                      "--rigorous", "--format", "latex", "--wide")
    assert rc == 0
    assert _latex_body(tex)[1][0][-2:] == ["REFUTED", "no"]


# ---- a row without a bracket: --na-rep and a note -------------------------------------------------------------

def test_row_without_bracket_shows_na_rep_and_note(capsys, monkeypatch):
    from proofs_check import rigorous as RG

    real = RG.RECIPES["scl"]

    def only_tau_half(out, prec):
        if out["instance"]["tau"] == 0.5:
            raise RG.NotSupported("test: no recipe for this row")
        return real(out, prec)

    monkeypatch.setitem(RG.RECIPES, "scl", only_tau_half)
    rc, out, err = _run(capsys, "scl", "--counts", "3,3", "--tau", "0.5,1", "--rigorous", "--na-rep", "NA")
    assert rc == 0, err
    lines = [ln for ln in out.splitlines() if ln.startswith("| ")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [dict(zip(head, [c.strip() for c in ln.strip("|").split("|")])) for ln in lines[1:]]
    assert rows[0]["proven_lower"] == "NA" and rows[0]["proven_upper"] == "NA" and rows[0]["rigorous"] == "no"
    assert rows[0]["value_statement"] == "INCONCLUSIVE"  # the table solved nothing in floats
    assert rows[1]["proven_lower"] != "NA" and rows[1]["rigorous"] == "yes"
    note = [ln for ln in out.splitlines() if ln.startswith("Note: row 1")]
    assert len(note) == 1 and "counts=3,3, tau=0.5" in note[0] and "test: no recipe for this row" in note[0]
    rc, tex, _ = _run(capsys, "scl", "--counts", "3,3", "--tau", "0.5,1", "--rigorous", "--format", "latex",
                      "--caption", "My caption.", "--wide")
    cells = _latex_body(tex)[1][0]
    assert cells[-4:-2] == ["{--}", "{--}"]  # siunitx S columns: text cells are braced
    assert "\\caption{My caption." in tex
    assert "row 1 (counts" in tex and "test: no recipe for this row" in tex  # the note survives --caption


# ---- refusals -------------------------------------------------------------------------------------------------

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "proofs_check.cli", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args", [["ntk"], ["crh", "--weight-decays", "0"]])
def test_family_without_recipe_refused_one_line(args):
    r = _cli("table", *args, "--rigorous")
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert f"table {args[0]} --rigorous" in lines[0]
    for fam in ("table ufm", "table scl", "table feature-collapse"):
        assert fam in lines[0]


def test_without_flint_exit_2_before_work(capsys, monkeypatch):
    import importlib.util

    import proofs_check.claims.ufm as CU

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flint" else real(name, *a))

    def boom(*a, **k):
        raise AssertionError("work started before the python-flint check")

    monkeypatch.setattr(CU, "certify_value", boom)
    rc, out, err = _run(capsys, "ufm", "--classes", "3", "--lambda", "0.1", "--rigorous")
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "python-flint" in err


# ---- the default output is unchanged ----------------------------------------------------------------------------

@pytest.mark.parametrize("args", [UFM_ARGS, SCL_ARGS, ["ufm", "--counts", "6,6,2,1", "--lambda", "0.01"],
                                  ["feature-collapse", "--concepts", "2", "--length", "2", "--words-per-concept", "2",
                                   "--lambdas", "0.01,10"]])
def test_rigorous_only_appends_columns(capsys, args):
    plain = _json(capsys, *args)
    rig = _json(capsys, *args, "--rigorous")
    assert rig["columns"] == plain["columns"] + NEW
    assert [r[:len(plain["columns"])] for r in rig["rows"]] == plain["rows"]
    assert rig["caption"] == plain["caption"]
    assert {k: v for k, v in rig["meta"].items() if k != "rigorous"} == plain["meta"]
    assert "notes" not in plain and "rigorous" not in plain["meta"]
    # the plain LaTeX has none of the new header material
    rc, tex, _ = _run(capsys, *args, "--format", "latex")
    assert rc == 0 and "ball arithmetic" not in tex and "\\multicolumn" not in tex and "\\footnotesize" not in tex


# ---- outward rounding, against exact fractions ----------------------------------------------------------------

def test_directed_format_brackets_the_double():
    rng = random.Random(7)
    xs = [0.1, 1e-5, 2.5e-12, 9.9999, 99999.5, -0.001234567, 1e22, 5e-324, 1.7976931348623157e308]
    xs += [rng.uniform(-1, 1) * 10.0 ** rng.randint(-300, 300) for _ in range(400)]
    for x in xs:
        for digits in (1, 3, 4, 8, 17):
            lo, hi = directed_format(x, digits, "down"), directed_format(x, digits, "up")
            assert Fraction(lo) <= Fraction(x) <= Fraction(hi), (x, digits, lo, hi)
            for s in (lo, hi):
                mant = re.sub(r"e[+-][0-9]+$", "", s).lstrip("-").replace(".", "").lstrip("0")
                assert len(mant) <= digits, (x, digits, s)
            # at most one unit in the last printed digit apart (not a loose interval)
            assert Fraction(hi) - Fraction(lo) <= 2 * abs(Fraction(x)) * Fraction(10) ** (1 - digits)
    assert directed_format(0.25, 1, "down") == "0.2" and directed_format(0.25, 1, "up") == "0.3"
    assert directed_format(1.0, 4, "down") == "1" and directed_format(1.0, 4, "up") == "1"


def test_default_rigorous_latex_is_narrow(capsys):
    """Without --wide the 14-column rigorous UFM table is split, never scaled: the main table holds the
    instance, f*, the proven bracket and 'rigorous'; the other columns follow in tables that repeat the instance
    columns and refer to the main table."""
    rc, tex, err = _run(capsys, *UFM_ARGS, "--rigorous", "--format", "latex")
    assert rc == 0, err
    assert "resizebox" not in tex and "\\small" not in tex.replace("\\smallskip", "")
    tabulars = tex.split("\\begin{table}")[1:]
    assert len(tabulars) >= 2
    head, body = _latex_body(tabulars[0])
    assert head == ["$k$", "$n$", "$\\lambda$", "$f^\\star$", "lower", "upper", "rigorous"]
    assert all(cells[-1] == "yes" for cells in body)
    rest = [h for t in tabulars[1:] for h in _latex_body(t)[0]]
    assert {"lower bound", "gap", "certified", "value statement"} <= set(rest)
    for t in tabulars[1:]:
        assert _latex_body(t)[0][:3] == ["$k$", "$n$", "$\\lambda$"] and "\\ref{tab:ncproofs-ufm}" in t
