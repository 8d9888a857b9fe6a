"""`solve ntk` on the general-kernel routes (--counts, --kernel, --kernel-perturbation, --loss ce, --sgd-batch):
options those routes do not read are refused in one line (exit 2) instead of being ignored. `--max-seconds 1e-9
--counts 4,4` ran to VERIFIED (the block kernel's budget; the general runs have a fixed work budget), and
`--time 5 --steps 10 --step-size 0.1` reported time 5 for a run of 10 x 0.1."""

import json

import pytest

from proofs_check.cli import main


@pytest.mark.parametrize("argv, named", [
    (["--counts", "4,4", "--max-seconds", "1e-9"], "--max-seconds"),
    (["--loss", "ce", "--max-seconds", "30"], "--max-seconds"),
    (["--counts", "4,4", "--time", "5", "--steps", "10", "--step-size", "0.1"], "--time"),
])
def test_unread_options_are_refused(capsys, argv, named):
    rc = main(["solve", "ntk", *argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and named in err


def test_time_alone_sets_the_discrete_steps(capsys):
    rc = main(["solve", "ntk", "--counts", "4,4", "--time", "1", "--step-size", "0.1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc in (0, 1)
    assert out["instance"]["time"] == 1.0 and out["instance"]["steps"] == 10  # ceil(1 / 0.1)


def test_block_kernel_still_takes_max_seconds(capsys):
    rc = main(["solve", "ntk", "--max-seconds", "1e-9"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "exceed the budget" in err  # the block route reads it: a run beyond it is refused
