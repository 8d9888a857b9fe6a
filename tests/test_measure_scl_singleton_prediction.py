"""`ncproofs measure --predict scl` on nonnegative features: one singleton class keeps the collapsed orthogonal
frame the unique UFM+ minimiser (two singletons may share a direction), so the prediction is made with Theorem 1's
value, computed here from its formula. Before, any singleton was refused with the reason for two ("shares directions
between singleton classes"). Two singletons still give no prediction, with the count in the reason."""

import math

import numpy as np

from proofs_check import measure as M


def _measure(tmp_path, y, d=4):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "f.npz", features=np.abs(rng.normal(size=(y.size, d))), labels=y)
    return M.measure(str(tmp_path / "f.npz"), predict="scl", tau=0.5)


def test_one_singleton_class_gets_the_orthogonal_frame(tmp_path):
    y = np.array([0] + [1] * 6 + [2] * 5)
    rep = _measure(tmp_path, y)
    pred = rep["predicted"]
    assert pred["geometry"] == "orthogonal-frame" and pred["compare_key"] == "gram_distance_of"
    N, tau = 12, 0.5
    bound = sum(n * math.log(n - 1 + (N - n) * math.exp(-1 / tau)) for n in (6, 5))  # the singleton is no anchor
    assert abs(pred["value"] - bound) <= 1e-12 * bound


def test_two_singleton_classes_get_no_prediction(tmp_path):
    y = np.array([0, 1] + [2] * 10)
    rep = _measure(tmp_path, y)
    assert rep["predicted"]["geometry"] is None
    assert "2 classes with a single sample" in rep["reasons"]["gram_distance_predicted"]


def test_one_singleton_below_the_dimension_is_refused_for_d(tmp_path):
    y = np.array([0] + [1] * 6 + [2] * 5)
    rep = _measure(tmp_path, y, d=2)
    assert rep["predicted"]["geometry"] is None and "d >= K" in rep["reasons"]["gram_distance_predicted"]
