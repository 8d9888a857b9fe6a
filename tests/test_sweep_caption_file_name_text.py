"""The LaTeX caption of a sweep table (`ncproofs sweep --summary --export F.tex`, `--group-by ... --format latex`)
names the store file as text: before the fix the plain-text math converter typeset `run_2.sqlite` as
`$\\mathrm{run}_{2}.\\mathrm{sqlite}$` (a subscript 2) and `k_3.sqlite` as `$k_{3}...$` (docs/workflow.md)."""

from __future__ import annotations

import re

from proofs_check.sweep import aggregate, flat_table
from proofs_check.sweep.cli import _caption
from proofs_check.sweep.export import results_table

ROWS = [{"key": "0" * 64, "family": "geometry.noisy-etf", "params": {"k": 3}, "seed": 0, "verdict": "VERIFIED",
         "score": 0.1, "reason": "ok", "seconds": 0.01, "result": {"verdict": "VERIFIED", "score": 0.1}}]


def _latex_caption(table) -> str:
    return re.search(r"\\caption\{(.*?)\}\n", table.render("latex")).group(1)


def test_store_names_in_sweep_captions_are_text_not_math():
    for name, want in [("run_2.sqlite", r"run\_2.sqlite"), ("k_3.sqlite", r"k\_3.sqlite"),
                       ("a^b 50%.sqlite", r"a\textasciicircum{}b 50\%.sqlite")]:
        cap = _caption(f"/tmp/x/{name}")
        for table in (results_table(ROWS, cap), flat_table(ROWS, cap), aggregate(ROWS, "k", caption=cap)):
            got = _latex_caption(table)
            assert got == f"ncproofs sweep results from {want}", got
            assert "$" not in got
