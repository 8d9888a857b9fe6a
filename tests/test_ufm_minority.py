"""The minority-collapse threshold of the regularised imbalanced UFM (docs/ufm_general.md, "Minority collapse
threshold"; derived here): theta_a = w_a (q_true - q_other) sqrt(n_a) / (N lam); collapse (identical classifiers
and class means on the smallest-count group) iff theta_a < 1. Checked against the restricted (collapsed)
problem solved and certified independently of the formula; false thresholds are never VERIFIED."""

from __future__ import annotations

import math

import pytest

from proofs_check.claims.ufm import check_general
from solvers import losses as L
from solvers import ufm_general as SG
from theory import ufm as T

COUNTS = [40] * 5 + [4] * 5  # N = 220, minority n = 4 (sqrt 2)
N = sum(COUNTS)


def _claim(loss, lam, threshold=1.0):
    p = SG.classification(loss, COUNTS, 10, lam, lam)
    rep = check_general(p, starts=1, minority_threshold=threshold).to_dict()
    return next(c for c in rep["claims"] if c["id"] == "minority-collapse-threshold"), rep


def test_theta_formula():
    assert math.isclose(T.minority_collapse_ratio(4, 220, 1e-2, 1e-2), 2.0 / 2.2, rel_tol=1e-15)
    assert math.isclose(T.minority_collapse_ratio(4, 220, 1e-2, 1e-2, weight=3.0, target_gap=0.5), 3.0 / 2.2,
                        rel_tol=1e-15)


@pytest.mark.parametrize("lam,collapse", [(1e-2, True), (8e-3, False), (2e-2, True), (5e-3, False)])
def test_ce_threshold_both_sides_verified(lam, collapse):
    theta = math.sqrt(4) / (N * lam)  # 0.909, 1.136, 0.455, 1.818
    assert (theta < 1) == collapse
    c, rep = _claim(L.make_loss("ce", 10), lam)
    assert c["verdict"] == "VERIFIED", c["reason"]
    assert c["evidence"]["predicted"] == ("collapse" if collapse else "no collapse")
    if not collapse:
        assert c["evidence"]["excess_lower"] > c["evidence"]["tolerance"]
    cos = rep["geometry"]["minority"]["minority_classifier_cosine"]
    if collapse and cos is not None:  # nonzero minority classifiers: identical within round-off at the candidate
        assert cos > 1 - 1e-5


def test_false_threshold_predicting_collapse_is_refuted():
    # theta = 1.136: the truth is "no collapse"; a threshold of 2 predicts collapse
    c, _ = _claim(L.make_loss("ce", 10), 8e-3, threshold=2.0)
    assert c["verdict"] == "REFUTED", c["reason"]


@pytest.mark.parametrize("threshold", [0.5, 0.9])
def test_false_threshold_predicting_no_collapse_is_never_verified(threshold):
    # theta = 0.909 < 1: the truth is collapse; thresholds below theta predict no collapse
    c, _ = _claim(L.make_loss("ce", 10), 1e-2, threshold=threshold)
    assert c["verdict"] != "VERIFIED", c["reason"]


@pytest.mark.parametrize("lam,collapse", [(5.5e-3, True), (4e-3, False)])
def test_label_smoothing_uses_the_target_gap(lam, collapse):
    # eps = 0.5, torch convention: q_true - q_other = 0.5, so theta = 0.5 sqrt(4) / (N lam): 0.826, 1.136
    # (the CE formula without the gap would give 1.65 and 2.27: "no collapse" in both cases)
    c, _ = _claim(L.make_loss("ls", 10, smoothing=0.5), lam)
    assert c["verdict"] == "VERIFIED", c["reason"]
    assert c["evidence"]["predicted"] == ("collapse" if collapse else "no collapse")


@pytest.mark.parametrize("lam,collapse", [(1e-2, True), (8e-3, False)])
def test_mse_threshold(lam, collapse):
    c, _ = _claim(L.make_loss("mse", 10), lam)
    assert c["verdict"] == "VERIFIED", c["reason"]
    assert c["evidence"]["predicted"] == ("collapse" if collapse else "no collapse")
