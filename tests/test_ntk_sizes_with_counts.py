"""``solve ntk`` / ``table ntk``: --classes, --per-class and --s next to the options that set the class sizes
(--counts, --kernel) or run the flows' table. They were silently ignored: ``solve ntk --counts 2,3 --classes 3
--per-class 7`` solved counts 2,3 with exit 0, ``table ntk --counts 4,4 --s 2 --classes 5`` printed the s = 1
rows. A contradicting value is now one line naming both options, exit 2; a consistent one still runs."""

import json

import numpy as np
import pytest

from proofs_check.cli import main


def _err(capsys, *argv):
    rc = main(list(argv))
    err = capsys.readouterr().err.strip()
    return rc, err


@pytest.mark.parametrize("extra, named", [
    (["--classes", "3"], "--classes"),
    (["--classes", "3", "--per-class", "7"], "--classes"),
    (["--per-class", "3"], "--per-class"),
])
def test_solve_counts_contradicted_by_classes_or_per_class(capsys, extra, named):
    rc, err = _err(capsys, "solve", "ntk", "--counts", "2,3", *extra)
    assert rc == 2
    assert len(err.splitlines()) == 1 and named in err and "--counts" in err


def test_solve_consistent_sizes_run_the_counts(capsys):
    rc = main(["solve", "ntk", "--counts", "4,4", "--classes", "2", "--per-class", "4", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["instance"]["model"]["counts"] == [4, 4]


def test_solve_kernel_contradicted_by_per_class(capsys, tmp_path):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(6, 6))
    path = tmp_path / "k.npy"
    np.save(path, a @ a.T + 6 * np.eye(6))
    rc, err = _err(capsys, "solve", "ntk", "--kernel", str(path), "--classes", "3", "--per-class", "3")
    assert rc == 2
    assert len(err.splitlines()) == 1 and "--per-class" in err and "--kernel" in err
    rc = main(["solve", "ntk", "--kernel", str(path), "--classes", "3", "--per-class", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["instance"]["model"]["counts"] == [2, 2, 2]


@pytest.mark.parametrize("extra, named", [
    (["--s", "2"], "--s"),
    (["--classes", "5"], "--classes"),
    (["--per-class", "3"], "--per-class"),
])
def test_flows_table_refuses_options_it_does_not_use(capsys, extra, named):
    rc, err = _err(capsys, "table", "ntk", "--counts", "4,4", *extra, "--format", "csv")
    assert rc == 2
    assert len(err.splitlines()) == 1 and named in err


def test_constants_table_still_takes_s(capsys):
    rc = main(["table", "ntk", "--classes", "2", "--per-class", "4", "--s", "2", "--format", "json"])
    out = capsys.readouterr().out
    assert rc == 0
    # escape rate s sqrt(m lambda_c) with lambda_c = kd + (m-1) kc - m kn = 1 + 1.8 - 0.8 = 2, m = 4, s = 2
    assert "5.656854" in out
