"""`solve crh` / `table crh`: a typed --records above the number of steps in the second half of --steps is refused in
one line naming both options (exit 2). It used to be cut to that number silently (`--steps 10 --records 100`
averaged 5 checkpoints and said nothing). The default --records still adapts to short runs."""

import json

import pytest

from proofs_check.cli import main


@pytest.mark.parametrize("argv", [["solve", "crh", "--steps", "10", "--records", "100"],
                                  ["solve", "crh", "--steps", "11", "--records", "7"],
                                  ["table", "crh", "--weight-decays", "0.01", "--steps", "10", "--records", "6",
                                   "--format", "md"]])
def test_records_beyond_the_second_half_are_refused(capsys, argv):
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and "--records" in err and "--steps" in err


def test_records_at_the_limit_and_the_default_run(capsys):
    rc = main(["solve", "crh", "--steps", "11", "--records", "6", "--null-draws", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc in (0, 1) and out["instance"]["n_records"] == 6
    rc = main(["solve", "crh", "--steps", "10", "--null-draws", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc in (0, 1) and out["instance"]["n_records"] == 5
