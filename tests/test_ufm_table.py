"""`ncproofs table ufm`: bad list options (one line, exit 2), losses, profiles, certified columns."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "proofs_check.cli", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("option,value", [("--classes", ""), ("--classes", ",,,"), ("--per-class", ""),
                                          ("--per-class", ", ,"), ("--lambda", ""), ("--lambda", ",,")])
def test_empty_list_option_is_one_line_exit_2(option, value):
    args = ["table", "ufm", "--loss", "ce", "--classes", "3", "--lambda", "0.1"]
    i = args.index(option) if option in args else None
    if i is None:
        args += [option, value]
    else:
        args[i + 1] = value
    r = _cli(*args)
    assert r.returncode == 2, r.stdout
    assert option in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert r.stdout == ""


# ---- contents: independent reference values (spec and sample-level cvxpy, see tests/test_ufm_general.py) ----

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402

from proofs_check.cli import main  # noqa: E402


def _json(capsys, *args):
    assert main(["table", "ufm", *args, "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    return [dict(zip(d["columns"], r)) for r in d["rows"]], d


def test_balanced_ce_rows_are_certified_reference_values(capsys):
    rows, _ = _json(capsys, "--classes", "3,5", "--per-class", "2", "--lambda", "0.01,0.001,0.2")
    ref = {(3, 0.01): 0.14833175, (5, 0.001): 0.04275647}  # spec ufm.md (independent of this project)
    for r in rows:
        if (r["k"], r["lambda"]) in ref:
            assert abs(r["f*"] - ref[(r["k"], r["lambda"])]) <= 1e-8
        assert r["certified"] is True and 0 <= r["gap"] <= 1e-8 * r["f*"]
        assert r["lower_bound"] <= r["f*"]
    # docs/ufm.md: Z = 0 and f* = log k exactly when s = sqrt(n lw lh) >= 1/k (k = 5, lambda = 0.2: s = 0.28)
    trivial = [r for r in rows if math.sqrt(r["n"]) * r["lambda"] >= 1.0 / r["k"]]
    assert trivial and all(r["phase"] == "trivial" and abs(r["f*"] - math.log(r["k"])) <= 1e-12 for r in trivial)
    assert all(r["phase"] == "collapse" for r in rows if r not in trivial)


def test_separate_weight_decays_and_imbalanced_counts(capsys):
    rows, d = _json(capsys, "--counts", "6,6,2,1", "--lambda-w", "5e-3", "--lambda-h", "1e-2")
    assert d["columns"][:5] == ["counts", "k", "N", "lambda_w", "lambda_h"]
    (r,) = rows
    assert abs(r["f*"] - 0.1913184754855772) <= 1e-8 * 0.19  # cvxpy sample-level reference
    assert r["certified"] is True and r["lower_bound"] <= 0.1913184754855772 + 1e-12


@pytest.mark.parametrize("loss,extra,ref", [
    ("ls", ["--smoothing", "0.1", "--counts", "6,6,2,1"], 0.47032304944617903),
    ("ls", ["--smoothing", "0.1", "--smoothing-convention", "others", "--counts", "6,6,2,1"], 0.547026230273218),
    ("mse", ["--counts", "6,6,2,1"], 0.03548848015189614),
    ("weighted-ce", ["--class-weights", "1,1,2,3", "--counts", "6,6,2,1"], 0.20362274203553576),
])
def test_other_losses_reference_values(capsys, loss, extra, ref):
    rows, _ = _json(capsys, "--loss", loss, *extra, "--lambda-w", "5e-3", "--lambda-h", "1e-2")
    assert abs(rows[0]["f*"] - ref) <= 1e-8 * ref and rows[0]["certified"] is True


def test_label_smoothing_balanced_closed_form(capsys):
    rows, _ = _json(capsys, "--loss", "ls", "--smoothing", "0.1", "--classes", "4", "--per-class", "3",
                    "--lambda", "5e-3")
    assert abs(rows[0]["f*"] - 0.43817131) <= 1e-8 and rows[0]["eps"] == 0.1  # spec value (PyTorch convention)
    assert abs(rows[0]["closed_form"] - rows[0]["f*"]) <= 1e-12 and rows[0]["certified"] is True


def test_profiles_use_the_scl_generators(capsys):
    from theory.scl import longtail_counts, step_counts

    rows, _ = _json(capsys, "--profile", "step", "--classes", "10", "--majority", "8", "--ratio", "4",
                    "--step-fraction", "0.3", "--lambda", "1e-2")
    assert rows[0]["N"] == sum(step_counts(10, 8, 4, 0.3)) and rows[0]["k"] == 10
    rows, _ = _json(capsys, "--profile", "longtail", "--classes", "12", "--majority", "9", "--ratio", "3,9",
                    "--lambda", "1e-2")
    assert [r["N"] for r in rows] == [sum(longtail_counts(12, 9, 3)), sum(longtail_counts(12, 9, 9))]
    assert all(r["certified"] is True for r in rows)
    assert all(r["minority_classifier_cosine"] is None or -1 <= r["minority_classifier_cosine"] <= 1 for r in rows)


def test_certified_column_says_no_when_the_bound_does_not_close(monkeypatch, capsys):
    from solvers import ufm_general as SG

    real = SG.certificate_grouped

    def loose(p, pt, layout, **kw):
        c = real(p, pt, layout, **kw)
        c.lower_bound -= 1e-6 * abs(c.upper)  # a bound 100 x the tolerance below
        return c

    monkeypatch.setattr(SG, "certificate_grouped", loose)
    rows, _ = _json(capsys, "--counts", "6,6,2,1", "--lambda", "0.01")
    assert rows[0]["certified"] is False
    rows, _ = _json(capsys, "--classes", "3", "--lambda", "0.01")
    assert rows[0]["certified"] is False


@pytest.mark.parametrize("args,needle", [
    (["--counts", "6,6,2,1", "--ratio", ""], "--ratio"),
    (["--profile", "longtail", "--classes", "10", "--majority", "5", "--ratio", ""], "--ratio"),
    (["--lambda-w", "", "--lambda-h", "0.1"], "--lambda-w"),
    (["--lambda-w", "0.1", "--lambda-h", ",,"], "--lambda-h"),
    (["--loss", "ls", "--smoothing", ","], "--smoothing"),
    (["--counts", ""], "--counts"),
    (["--counts", ",,"], "--counts"),
    (["--loss", "weighted-ce", "--class-weights", ""], "--class-weights"),
    (["--lambda", "0.1", "--lambda-w", "0.1", "--lambda-h", "0.1"], "--lambda"),
    (["--lambda-w", "0.1"], "--lambda-h"),
    (["--profile", "longtail", "--classes", "10", "--ratio", "3"], "--majority"),
    (["--profile", "longtail", "--classes", "20", "--majority", "10", "--ratio", "100"], "--profile"),
    (["--loss", "weighted-ce", "--class-weights", "1,2", "--classes", "3"], "--class-weights"),
    (["--loss", "ls", "--classes", "3"], "--smoothing"),
    (["--loss", "ls", "--smoothing", "1.5", "--classes", "3"], "smoothing"),
    (["--counts", "3,0,2"], "--counts"),
    (["--counts", "6,6,2,1", "--per-class", "2"], "--per-class"),
    (["--classes", "3", "--lambda-w", "1e-300", "--lambda-h", "1"], "--lambda-w"),
])
def test_bad_table_input_is_one_line_exit_2(args, needle):
    r = _cli("table", "ufm", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


HAVE_TEX = shutil.which("pdflatex") is not None and shutil.which("pdftotext") is not None


@pytest.mark.skipif(not HAVE_TEX and not os.environ.get("CI"), reason="pdflatex/pdftotext not installed")
@pytest.mark.parametrize("args", [
    ["--counts", "6,6,2,1", "--counts", "5,3,3,3,1", "--lambda-w", "5e-3", "--lambda-h", "1e-2"],
    ["--loss", "ls", "--smoothing", "0.1,0.3", "--classes", "4", "--per-class", "3", "--lambda", "5e-3"],
    ["--loss", "mse", "--profile", "longtail", "--classes", "30", "--majority", "20", "--ratio", "10",
     "--lambda", "1e-3"],
])
def test_new_tables_compile_with_pdflatex(tmp_path, capsys, args):
    assert main(["table", "ufm", *args, "--format", "latex"]) == 0
    body = capsys.readouterr().out
    assert main(["table", "ufm", *args, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    tex = tmp_path / "t.tex"
    tex.write_text("\\documentclass{article}\n\\usepackage{booktabs,amsmath,amssymb,siunitx,graphicx,array,"
                   "longtable,caption}\n\\begin{document}\n" + body + "\n\\end{document}\n")
    proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    log = (tmp_path / "t.log").read_text(errors="replace")
    assert proc.returncode == 0 and not [x for x in log.splitlines() if x.startswith("!")]
    assert all(float(o) <= 10 for o in re.findall(r"Overfull \\hbox \(([0-9.]+)pt too wide\)", log))
    text = subprocess.run(["pdftotext", "-layout", "t.pdf", "-"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60).stdout
    assert not re.search(r"\|\||\^\{|->|lambda_|n_c\b", text)
    fstar = data["columns"].index("f*")
    for row in data["rows"]:
        assert f"{row[fstar]:.4g}" in text
