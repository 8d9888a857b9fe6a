"""Messages name the parameter once and show numbers as numbers: no "FEATURES: FEATURES x.npy", no
"--labels: --labels y.npy", no numpy reprs such as np.float32(0.5)."""

from __future__ import annotations

import numpy as np
import pytest

from proofs_check.cli import _plain_numbers, main


@pytest.mark.parametrize("text,want", [("got np.float32(0.5)", "got 0.5"), ("k = np.int64(3)", "k = 3"),
                                       ("flag np.True_ and np.False_", "flag True and False"),
                                       ("np.float64(-1e-05) < 0", "-1e-05 < 0"), ("numpy np.linalg", "numpy np.linalg")])
def test_numpy_reprs_become_numbers(text, want):
    assert _plain_numbers(text) == want


def _err(capsys, args):
    assert main(args) == 2
    return capsys.readouterr().err.strip()


def test_measure_messages_name_the_parameter_once(tmp_path, capsys):
    np.save(tmp_path / "X1.npy", np.zeros(5))
    np.save(tmp_path / "X.npy", np.random.default_rng(0).normal(size=(4, 3)))
    np.save(tmp_path / "y.npy", np.zeros(5, dtype=int))
    np.save(tmp_path / "yf.npy", np.array([0, 0.5, 1, 1], dtype=np.float32))
    err = _err(capsys, ["measure", str(tmp_path / "X1.npy"), "--labels", str(tmp_path / "y.npy")])
    assert "FEATURES" in err and err.count("FEATURES") == 1 and "2-dimensional" in err
    err = _err(capsys, ["measure", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "yf.npy")])
    assert err.count("--labels") == 1 and "got 0.5" in err and "np." not in err
