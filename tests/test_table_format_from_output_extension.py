"""`ncproofs table FAMILY -o F` without `--format` writes the format F's extension names (`.csv`, `.tex`/`.latex`,
`.json`, `.md`; anything else and stdout: md), as `ncproofs sweep --export` does. Before the fix `-o t.csv` and
`-o t.tex` wrote a Markdown table into them (docs/outputs.md). An explicit `--format` still wins."""

from __future__ import annotations

import csv
import json

import pytest

from proofs_check.cli import main

SCL = ["table", "scl", "--counts", "3,3", "--counts", "5,2", "--tau", "1"]


@pytest.mark.parametrize("name,check", [
    ("t.csv", lambda s: list(csv.reader(s.splitlines()))[1][0] == "3,3"),
    ("T.CSV", lambda s: s.startswith("counts,tau,")),
    ("t.json", lambda s: json.loads(s)["columns"][0] == "counts"),
    ("t.tex", lambda s: "\\begin{tabular}" in s and "\\caption{" in s),
    ("t.latex", lambda s: "\\begin{tabular}" in s),
    ("t.md", lambda s: s.startswith("| counts | tau |")),
    ("t.txt", lambda s: s.startswith("| counts | tau |")),
])
def test_output_extension_chooses_the_format(tmp_path, name, check):
    out = tmp_path / name
    assert main([*SCL, "-o", str(out)]) == 0
    assert check(out.read_text())


def test_explicit_format_wins_and_stdout_stays_md(tmp_path, capsys):
    out = tmp_path / "t.csv"
    assert main([*SCL, "-o", str(out), "--format", "md"]) == 0
    assert out.read_text().startswith("| counts |")
    assert main(SCL) == 0
    assert capsys.readouterr().out.startswith("| counts |")


def test_a_caption_with_a_csv_output_is_refused_before_work(tmp_path, capsys):
    assert main([*SCL, "-o", str(tmp_path / "t.csv"), "--caption", "x"]) == 2
    assert "--caption" in capsys.readouterr().err and not (tmp_path / "t.csv").exists()
