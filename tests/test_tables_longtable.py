"""`--longtable`: LaTeX tables that break across pages, the header repeated on each page (docs/outputs.md)."""

from __future__ import annotations

import subprocess

import pytest

from proofs_check.cli import main
from proofs_check.tables import Table
from theory._validate import InputError

from tests.test_tables_latex import _compile, needs_tex


def _long(rows: int = 150) -> Table:
    return Table(["k", "lambda", "value", "phase"],
                 [[i, 1e-3 * i, 1.0 / i, "collapse" if i % 2 else "trivial"] for i in range(1, rows + 1)],
                 caption="values with lw/2||W||^2", meta={"family": "ufm"}, notes=["a note under the table"])


@needs_tex
def test_long_table_breaks_across_pages_with_the_header_on_each(tmp_path):
    tex = _long().render("latex", longtable=True, label="tab:long")
    _, text = _compile(tmp_path, tex + "\nSee Table~\\ref{tab:long}.\n", name="long")
    pages = text.split("\f")
    pages = [p for p in pages if p.strip()]
    assert len(pages) >= 3  # 150 rows do not fit on one page
    for p in pages:
        assert "lambda" in p.replace("λ", "lambda") and "value" in p  # the header on every page
    assert sum("continued on the next page" in p for p in pages) == len(pages) - 1  # every page but the last
    assert "150" in pages[-1] and "a note under the table" in pages[-1]
    first_rows = [line for line in pages[0].splitlines() if line.strip().startswith("1 ")]
    assert first_rows  # row 1 is on the first page, after the caption
    assert "Table 1: values" in pages[0].replace("  ", " ")


def test_longtable_needs_latex_and_is_one_line_exit_2(capsys):
    with pytest.raises(InputError, match="--longtable needs --format latex"):
        _long(3).render("md", longtable=True)
    rc = main(["table", "scl", "--counts", "3,3", "--tau", "1", "--format", "md", "--longtable"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--longtable" in err[0]


@needs_tex
def test_family_table_as_longtable_compiles(tmp_path):
    out = tmp_path / "t.tex"
    assert main(["table", "scl", "--counts", "3,3", "--counts", "5,2,2", "--tau", "0.1,1", "--format", "latex",
                 "--longtable", "--output", str(out)]) == 0
    tex = out.read_text()
    assert "\\begin{longtable}" in tex and "\\begin{table}" not in tex and "resizebox" not in tex
    _compile(tmp_path, tex, name="fam")
    # the default (no --longtable) is the float, unchanged
    assert main(["table", "scl", "--counts", "3,3", "--tau", "1", "--format", "latex", "--output",
                 str(tmp_path / "f.tex")]) == 0
    assert "\\begin{table}" in (tmp_path / "f.tex").read_text()
