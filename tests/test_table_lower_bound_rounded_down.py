"""The proven lower bound columns of `table ufm` (`lower_bound`) and `table deep-ufm` (`proven_lower`) are printed
rounded down in md and LaTeX, so a printed lower bound is still a lower bound of the optimum. Before the fix they
were rounded to nearest: `table ufm --loss ce --classes 3 --lambda 0.5 --precision 3` printed the lower bound
1.0986122886681065 as 1.10, above the optimum log 3 = 1.09861 (docs/outputs.md). csv/json keep the doubles."""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction

from proofs_check.cli import main

UFM = ["table", "ufm", "--loss", "ce", "--classes", "3,4", "--lambda", "0.01,0.5"]


def _md_rows(text: str) -> list[dict]:
    lines = [ln for ln in text.split("\n\n")[0].splitlines()]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(head, (c.strip() for c in ln.strip("|").split("|")))) for ln in lines[2:]]


def _json_rows(capsys, args) -> list[dict]:
    assert main(args + ["--format", "json"]) == 0
    t = json.loads(capsys.readouterr().out)
    return [dict(zip(t["columns"], r)) for r in t["rows"]]


def test_ufm_md_lower_bound_never_exceeds_the_double_nor_the_optimum(capsys):
    exact = _json_rows(capsys, UFM)
    for prec in (1, 2, 3, 4, 6):
        assert main(UFM + ["--format", "md", "--precision", str(prec)]) == 0
        for row, md in zip(exact, _md_rows(capsys.readouterr().out)):
            printed = Fraction(md["lower_bound"])
            assert printed <= Fraction(row["lower_bound"]), (prec, md["lower_bound"], row["lower_bound"])
            assert printed <= Fraction(row["f*"])
    # the trivial phase of CE at lambda = 0.5: the optimum is log k; the printed lower bound must not exceed it
    assert main(UFM + ["--format", "md", "--precision", "3"]) == 0
    rows = _md_rows(capsys.readouterr().out)
    trivial = [r for r in rows if r["lambda"] == "0.5"]
    assert trivial and all(float(r["lower_bound"]) <= math.log(int(r["k"])) for r in trivial)
    assert [r["lower_bound"] for r in trivial] == ["1.09", "1.38"]


def test_ufm_latex_lower_bound_is_rounded_down(capsys):
    exact = _json_rows(capsys, UFM)
    assert main(UFM + ["--format", "latex", "--wide"]) == 0
    body = capsys.readouterr().out.split("\\midrule\n", 1)[1].split("\\bottomrule", 1)[0].strip().splitlines()
    for row, line in zip(exact, body):
        cells = [c.strip() for c in line.rstrip("\\ ").split("&")]
        assert Fraction(cells[4]) <= Fraction(row["lower_bound"]), (cells[4], row["lower_bound"])
        assert re.fullmatch(r"\d\.\d{3}", cells[4]) or re.fullmatch(r"0\.\d{4}", cells[4])


def test_csv_and_json_keep_the_doubles(capsys):
    exact = _json_rows(capsys, UFM)
    assert main(UFM + ["--format", "csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    col = lines[0].split(",").index("lower_bound")
    assert [float(ln.split(",")[col]) for ln in lines[1:]] == [r["lower_bound"] for r in exact]


def test_deep_ufm_proven_lower_is_rounded_down(capsys):
    args = ["table", "deep-ufm", "--layers", "2", "--classes", "3", "--lambda", "0.01"]
    exact = _json_rows(capsys, args)
    for prec in (2, 3, 5):
        assert main(args + ["--format", "md", "--precision", str(prec)]) == 0
        for row, md in zip(exact, _md_rows(capsys.readouterr().out)):
            assert Fraction(md["proven_lower"]) <= Fraction(row["proven_lower"]), (prec, md, row)
