"""`ncproofs sweep --summary --export F.latex` writes LaTeX, as `F.tex` does and as `ncproofs table -o F.latex` does;
before the fix `.latex` fell through to Markdown (docs/workflow.md, "Exports for analysis")."""

from __future__ import annotations

from proofs_check.sweep.export import export_format
from proofs_check.tables import OUTPUT_EXTENSIONS


def test_latex_extension_is_latex():
    assert export_format("results.latex", None) == "latex"
    assert export_format("results.TEX", None) == "latex"
    assert export_format("results.txt", None) == "md"
    assert export_format("results.latex", "csv") == "csv"


def test_sweep_export_and_table_output_agree_on_every_table_extension():
    for ext, fmt in OUTPUT_EXTENSIONS.items():
        assert export_format("x" + ext, None) == fmt, ext
