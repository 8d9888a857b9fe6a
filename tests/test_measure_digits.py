"""The end-to-end digits example (examples/digits_measure.py): a small network trained on scikit-learn's
digits moves toward the certified UFM prediction, and the measurement of a saved snapshot matches the
independent dense reference."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

pytest.importorskip("torch", reason="the digits example needs torch (optional extra [torch])")
pytest.importorskip("sklearn", reason="the digits example needs scikit-learn (optional extra [measure])")

import digits_measure as D  # noqa: E402
from measure_reference import reference_metrics  # noqa: E402


def test_digits_example_fast_snapshot_measured_like_the_reference(tmp_path):
    """Default-suite version (a few epochs): the example trains, saves and measures, the certified prediction
    is the simplex ETF, and every metric of each snapshot agrees with the independent dense reference. Whether
    training moves toward the prediction is the slow test below."""
    paths = D.train_and_save(tmp_path, (0, 5))
    reports = D.measure_all(paths)
    assert reports[-1]["predicted"]["geometry"] == "simplex-etf"
    for path, rep in zip(paths, reports):
        z = np.load(path)
        ref = reference_metrics(z["features"], z["labels"], z["weights"], z["bias"], np.eye(10) - 1.0 / 10)
        for k, v in ref.items():
            assert rep["metrics"][k] == pytest.approx(v, rel=1e-8, abs=1e-12), (path.name, k)


@pytest.mark.slow  # 125 s on the 2-core machine: 300 epochs of training
def test_digits_example_moves_toward_the_certified_prediction(tmp_path):
    epochs = (0, 100, 300)
    paths = D.train_and_save(tmp_path, epochs)
    reports = D.measure_all(paths)
    first, last = reports[0], reports[-1]
    pred = last["predicted"]
    assert pred["geometry"] == "simplex-etf" and pred["trivial"] is False
    assert pred["certificate"]["statements"]["geometry-simplex-etf"] == "VERIFIED"
    # the geometry moves toward the prediction: every collapse metric at least halves from initialisation
    for k in ("nc1", "gram_distance_predicted", "nc3", "cdnv_mean", "equiangularity"):
        assert last["metrics"][k] < 0.5 * first["metrics"][k], (k, first["metrics"][k], last["metrics"][k])
    assert last["metrics"]["gram_distance_predicted"] < 0.25
    assert last["metrics"]["nc4"] <= 0.01
    # the measured class-mean norm is within 20% of the UFM optimum's (a model, not the network)
    assert last["scale"]["mean_centred_class_mean_norm"] == pytest.approx(pred["predicted_mean_norm"], rel=0.2)
    # the measurement of the snapshot agrees with the dense reference
    z = np.load(paths[-1])
    K = 10
    ref = reference_metrics(z["features"], z["labels"], z["weights"], z["bias"], np.eye(K) - 1.0 / K)
    for k, v in ref.items():
        assert last["metrics"][k] == pytest.approx(v, rel=1e-8, abs=1e-12), k
