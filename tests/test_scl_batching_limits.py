"""`ncproofs batching` refuses more than 300 classes before work and summarises the pairs above 20 classes
(proofs_check/families/scl.py)."""

from __future__ import annotations

from proofs_check import cli


def _one_line_exit_2(capsys, args):
    rc = cli.main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("ncproofs: error: "), (rc, err)
    return err[0]


def test_batching_refuses_too_many_classes_and_summarises_pairs(capsys):
    line = _one_line_exit_2(capsys, ["batching", "--counts", ",".join(["2"] * 301), "--batches", "0,1,2,3"])
    assert "--counts" in line and "301 classes > 300" in line
    batches = ";".join(f"{2 * i},{2 * i + 1},{2 * i + 2},{2 * i + 3}" for i in range(29))
    assert cli.main(["batching", "--counts", ",".join(["2"] * 30), "--batches", batches]) == 0
    out = capsys.readouterr().out
    # 435 pairs: one summary line and the failing pairs, not a line per pair
    assert "of 435 pairs hold" in out and "classes (0,1): yes" not in out
    assert out.count("\n") <= 30 + 200 + 12  # a line per class, at most 200 failing pairs, the rest summarised
    assert "more (see --json)" in out
