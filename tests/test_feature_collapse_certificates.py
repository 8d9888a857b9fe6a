"""Feature collapse certificates: the uniqueness (dual) certificate against brute-force search, its
failure modes, and the round-off allowances of the lower bounds."""

import math

import mpmath as mp
import numpy as np
import pytest

from solvers import feature_collapse as S
from theory import feature_collapse as T
from theory.feature_collapse import FCInstance

CERTIFIED = [FCInstance(3, 2, 2, 4, 0.05), FCInstance(3, 2, 3, 4, 0.05, freqs=T.zipf_freqs(3)), FCInstance(3, 2, 2, 3, 0.05, layernorm=True),
             FCInstance(2, 1, 2, 3, 0.05, K=4, latents="random", seed=6)]


def _closed_form(inst):
    p = T.predict(inst)
    W, U = T.configuration(inst, p)
    prob = S.FCProblem(inst)
    E, _ = prob.features(W)
    return prob, W, U, E


@pytest.mark.parametrize("inst", CERTIFIED)
def test_certified_unique_minimiser_is_where_brute_force_search_lands(inst):
    """Independent search (multi-start L-BFGS on the network) ends, for these well-conditioned instances,
    at the point the certificate calls the unique minimiser: Z and the Gram matrices agree."""
    prob, W, U, E = _closed_form(inst)
    dc = S.dual_certificate(prob, E, U)
    assert dc["unique"], dc
    sol = S.solve(inst, n_starts=3, seed=1, certify=False)
    Zp = U @ E.T
    assert np.linalg.norm(sol.variables["Z"] - Zp) <= 1e-4 * np.linalg.norm(Zp)
    Es = sol.variables["E"]
    assert np.linalg.norm(Es @ Es.T - E @ E.T) <= 1e-4 * np.linalg.norm(E @ E.T)


def test_near_threshold_value_gap_does_not_locate_the_point_but_the_certificate_does():
    """Just below lambda_crit the landscape is flat: an L-BFGS point within 1e-12 of the optimal value is
    ~1e-3 (relative) away from the minimiser, so a value gap certifies nothing about the point; the
    dual certificate at the closed form is what proves the geometry (strictly complementary there)."""
    inst = FCInstance(3, 2, 2, 5, 0.19243084472090224)
    prob, W, U, E = _closed_form(inst)
    dc = S.dual_certificate(prob, E, U)
    assert dc["unique"] and dc["complementarity_gap"] > 0.5
    sol = S.solve(inst, n_starts=1, seed=1, certify=False)
    v = prob.objective(W, U, grad=False)
    assert sol.value >= v - 1e-12  # the certified point is not beaten
    assert sol.value - v <= 1e-9


def test_certificate_fails_at_a_wrong_point_and_at_the_threshold():
    inst = FCInstance(3, 2, 2, 4, 0.05)
    prob, W, U, E = _closed_form(inst)
    dc = S.dual_certificate(prob, 1.01 * W, U)
    assert not dc["unique"] and "KKT" in dc["why"]
    # exactly at the threshold Z = 0 is optimal but not strictly complementary (a flat direction)
    g = S.zero_gradient_spectral_norm(inst)
    at = FCInstance(3, 2, 2, 4, g)
    z = S.dual_certificate(S.FCProblem(at), np.zeros((at.n_w, at.d)), np.zeros((at.K * at.L, at.d)))
    assert not z["unique"] and "strictly complementary" in z["why"]
    above = FCInstance(3, 2, 2, 4, g * (1 + 1e-6))
    z = S.dual_certificate(S.FCProblem(above), np.zeros((above.n_w, above.d)), np.zeros((above.K * above.L, above.d)))
    assert z["unique"]


@pytest.mark.parametrize("lam", [1e-9, 1e-3, 0.5, 50.0])
@pytest.mark.parametrize("layernorm", [False, True])
def test_lower_bounds_are_below_feasible_values(lam, layernorm):
    inst = FCInstance(3, 2, 2, 3, lam, layernorm=layernorm, freqs=(0.7, 0.3))
    prob = S.FCProblem(inst)
    rng = np.random.default_rng(3)
    best = math.inf
    for _ in range(4):
        W = rng.normal(size=(inst.n_w, inst.d))
        U = rng.normal(size=(inst.K * inst.L, inst.d))
        E, _ = prob.features(W)
        best = min(best, prob.objective(W, U, grad=False))
        b = S.sdp_lower_bound(prob, E, U) if layernorm else S.nuclear_lower_bound(prob, U @ E.T)
        assert b["roundoff"] > 0
        assert b["lower_bound"] <= best
    sol = S.solve(inst, n_starts=1, seed=0)
    assert sol.certificate.lower_bound <= sol.value


def test_stable_cross_entropy_at_small_lambda_matches_mpmath():
    inst = FCInstance(3, 2, 2, 3, 1e-9)
    prob, W, U, E = _closed_form(inst)
    Z = U @ E.T
    ce = prob.ce(Z, grad=False)
    sc = prob.scores(Z)
    with mp.workdps(50):
        ref = mp.fsum(mp.mpf(float(prob.p[s])) * (mp.log(mp.fsum(mp.exp(mp.mpf(float(x))) for x in sc[:, s]))
                                                 - mp.mpf(float(sc[prob.y[s], s]))) for s in range(prob.S))
    assert ce == pytest.approx(float(ref), rel=1e-10)
    assert abs(ce - float(ref)) <= prob.ce_roundoff(Z, ce)
