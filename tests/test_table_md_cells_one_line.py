"""Markdown tables (`ncproofs table ... --format md`, `ncproofs sweep --summary`, `--export F.md`): every row is one
line with one cell per column, whatever the cells hold. Before the fix a newline in a cell (a sweepable's reason,
a string parameter) ended the row and broke the table, and a `|` in a header split it into two columns
(docs/outputs.md)."""

from __future__ import annotations

import re

from proofs_check.tables import Table

HOSTILE = ["a,b", 'q"uote', "new\nline", "cr\r\nlf", "tab\tx", "pipe|x", "50% & #_$\\", "\x00nul", "\u2028sep"]


def _cells(line: str) -> list[str]:
    assert line.startswith("| ") and line.endswith(" |"), line
    return re.split(r"(?<!\\)\|", line[1:-1])


def test_every_md_row_is_one_line_with_one_cell_per_column():
    t = Table(["key", "s|t", "value"], [[i, h, float(i)] for i, h in enumerate(HOSTILE)], caption="cap")
    out = t.render("md")
    table_lines = out.split("\n\n")[0].split("\n")
    assert len(table_lines) == 2 + len(HOSTILE)
    for line in table_lines[:1] + table_lines[2:]:
        assert len(_cells(line)) == 3, line
    for i, h in enumerate(HOSTILE):
        cell = _cells(table_lines[2 + i])[1].strip()
        # the visible characters survive, pipes escaped, line breaks as spaces
        assert cell.replace("\\|", "|").split() == "".join(" " if not c.isprintable() else c for c in h).split()


def test_sweep_summary_md_export_keeps_rows_whole(tmp_path, monkeypatch):
    from proofs_check.cli import main
    from proofs_check.sweep import register_sweepable

    mod = tmp_path / "md_cells_sweep.py"
    mod.write_text("from proofs_check.sweep import register_sweepable\n"
                   "def fn(params, seed):\n"
                   "    return {'verdict': 'VERIFIED', 'reason': 'first\\nsecond | third', 'score': 1.0}\n"
                   "register_sweepable('mdcells.s', fn, parameters=('s',), version='1', replace=True)\n")
    cfg = tmp_path / "s.toml"
    cfg.write_text('[sweep]\nfamily = "mdcells.s"\nmodules = ["md_cells_sweep"]\nseeds = 1\nworkers = 1\n'
                   '[parameters]\ns = ["a\\nb", "c|d"]\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["sweep", str(cfg), "--quiet", "--workers", "1"]) == 0
    out = tmp_path / "s.md"
    assert main(["sweep", str(cfg), "--summary", "--export", str(out)]) == 0
    lines = out.read_text().split("\n\n")[0].split("\n")
    assert len(lines) == 4
    ncol = len(_cells(lines[0]))
    assert all(len(_cells(ln)) == ncol for ln in lines[2:])
    assert register_sweepable  # imported for the module above
