"""Run claims of the any-loss UFM (proofs_check/claims/ufm_general.py): true statements VERIFIED, plausible false
formulas REFUTED. The reference value is the independently computed one of docs/ufm_general.md."""

from __future__ import annotations

import math

import numpy as np
import pytest

from proofs_check.claims import ufm_general as CG
from proofs_check.core import RunContext, Verdict


@pytest.mark.parametrize("factory", [CG.make_ls_value_claim, CG.make_ls_geometry_claim,
                                     CG.make_regression_value_claim])
def test_true_statements_are_verified(factory):
    res = factory().run(RunContext())
    assert res.verdict is Verdict.VERIFIED, res.reason
    assert res.independent_checks >= 3


def test_ls_formula_matches_the_spec_reference():
    # docs/ufm_general.md: PyTorch convention, eps = 0.1, (k, n, lw, lh) = (4, 3, 5e-3, 5e-3) gives 0.43817131
    assert abs(CG.label_smoothing_value(4, 3, 5e-3, 5e-3, 0.1, "torch") - 0.43817131) <= 5e-9


def _wrong_convention(k, n, lw, lh, eps, conv):
    return CG.label_smoothing_value(k, n, lw, lh, eps, "others" if conv == "torch" else "torch")


def _no_smoothing(k, n, lw, lh, eps, conv):
    return CG.label_smoothing_value(k, n, lw, lh, 0.0, conv)


def _off_by_1e6(k, n, lw, lh, eps, conv):
    return CG.label_smoothing_value(k, n, lw, lh, eps, conv) * (1 + 1e-6)


@pytest.mark.parametrize("predict", [_wrong_convention, _no_smoothing, _off_by_1e6])
def test_false_label_smoothing_values_are_refuted(predict):
    res = CG.make_ls_value_claim(predict=predict).run(RunContext())
    assert res.verdict is Verdict.REFUTED, res.reason


def _uncentred(Y, lw, lh):
    Y = np.asarray(Y, float)
    N = Y.shape[0]
    s = np.linalg.svd(Y, compute_uv=False)
    lam = math.sqrt(lw * lh)
    return float(np.sum(np.minimum(s, N * lam) ** 2) / (2 * N) + lam * np.sum(np.maximum(s - N * lam, 0.0)))


def _threshold_at_lambda(Y, lw, lh):  # soft thresholding at lam instead of N lam
    Y = np.asarray(Y, float)
    N = Y.shape[0]
    s = np.linalg.svd(Y - Y.mean(axis=0), compute_uv=False)
    lam = math.sqrt(lw * lh)
    return float(np.sum(np.minimum(s, lam) ** 2) / (2 * N) + lam * np.sum(np.maximum(s - lam, 0.0)))


@pytest.mark.parametrize("predict", [_uncentred, _threshold_at_lambda])
def test_false_regression_values_are_refuted(predict):
    res = CG.make_regression_value_claim(predict=predict).run(RunContext())
    assert res.verdict is Verdict.REFUTED, res.reason


def test_full_profile_boundaries_k2_n1_d1():
    res = CG.make_ls_value_claim().run(RunContext("full"))
    assert res.verdict is Verdict.VERIFIED, res.reason
    assert any("k=2 n=1 d=1" in c.name for c in res.checks)




@pytest.mark.parametrize("factory", [CG.make_ls_value_claim, CG.make_regression_value_claim])
def test_rigorous_run_proves_the_values(factory):
    pytest.importorskip("flint")
    res = factory().run(RunContext(rigorous=True))
    assert res.verdict is Verdict.VERIFIED and res.rigorous, res.reason


# ---- imbalanced geometry and imbalanced MSE (docs/ufm_general.md, "Geometry certificate", "Imbalanced MSE") ----

@pytest.mark.parametrize("factory", [CG.make_imbalanced_geometry_claim, CG.make_imbalanced_mse_value_claim])
def test_imbalanced_claims_true_statements_verified(factory):
    res = factory().run(RunContext())
    assert res.verdict is Verdict.VERIFIED, res.reason
    assert res.independent_checks >= 3


def _etf(counts, name):
    K = len(counts)
    C = np.full((K, K), -1.0 / (K - 1))
    np.fill_diagonal(C, 1.0)
    return {"class_mean_cosines": C}


def test_imbalanced_geometry_false_expectation_refuted():
    # the balanced simplex-ETF cosines are not the imbalanced geometry; a minority norm ratio of 1 neither
    assert CG.make_imbalanced_geometry_claim(expected=_etf).run(RunContext()).verdict is Verdict.REFUTED
    res = CG.make_imbalanced_geometry_claim(expected=lambda c, n: {"classifier_norm_ratio": 1.0}).run(RunContext())
    assert res.verdict is Verdict.REFUTED


@pytest.mark.parametrize("predict", [lambda c, lw, lh: CG.imbalanced_mse_value(c, lw, lh) * (1 + 1e-6),
                                     lambda c, lw, lh: CG.imbalanced_mse_value([max(c)] * len(c), lw, lh)])
def test_imbalanced_mse_false_formulas_refuted(predict):
    assert CG.make_imbalanced_mse_value_claim(predict=predict).run(RunContext()).verdict is Verdict.REFUTED
