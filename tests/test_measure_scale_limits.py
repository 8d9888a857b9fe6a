"""`ncproofs measure` refuses weights whose squares overflow and features whose squares underflow (one line,
exit 2); accepted scales give scale-free NC3 (proofs_check/measure.py)."""

from __future__ import annotations

import json

import pytest

from proofs_check import cli


def _one_line_exit_2(capsys, args):
    rc = cli.main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("ncproofs: error: "), (rc, err)
    return err[0]


def test_measure_refuses_weights_that_overflow_and_features_that_underflow(tmp_path, capsys):
    import numpy as np

    r = np.random.default_rng(0)
    X, y, W = r.normal(size=(30, 4)), np.repeat(np.arange(3), 10), r.normal(size=(3, 4))
    for name, arr in (("X", X), ("y", y), ("W", W), ("Wbig", W * 1e200), ("Xt", X * 1e-200)):
        np.save(tmp_path / f"{name}.npy", arr)
    line = _one_line_exit_2(capsys, ["measure", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.npy"),
                                     "--weights", str(tmp_path / "Wbig.npy")])
    assert "--weights" in line and "overflow" in line
    line = _one_line_exit_2(capsys, ["measure", str(tmp_path / "Xt.npy"), "--labels", str(tmp_path / "y.npy")])
    assert "underflow" in line
    # accepted scales are measured, and NC3 does not depend on the scale of W (W and W * 1e100 agree)
    np.save(tmp_path / "Wmid.npy", W * 1e100)
    nc3 = []
    for w in ("W", "Wmid"):
        assert cli.main(["measure", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.npy"), "--weights",
                         str(tmp_path / f"{w}.npy"), "--json"]) == 0
        nc3.append(json.loads(capsys.readouterr().out)["metrics"]["nc3"])
    assert nc3[0] == pytest.approx(nc3[1], rel=1e-12) and 0 < nc3[0] < 4
