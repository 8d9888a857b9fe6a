"""Balanced softmax losses (CE, label smoothing, weighted CE with equal weights) with a decayed bias (lambda_b > 0):
the geometry statement of `solve ufm` (docs/ufm_general.md, "Geometry with a decayed bias").

The penalty only fixes the constant a free bias leaves open, so the minimiser is the free-bias Z* with b = 0: zero
when rho0 <= 1 (exact rationals), a simplex ETF otherwise. Before the fix:

- the package stated `geometry-simplex-etf` in the zero phase and REFUTED it itself: `--loss ce -k 3 -n 3 -d 3
  --lambda-w 0.3 --lambda-h 0.3 --lambda-b 0.1` was "verdict: REFUTED" for a true instance;
- the geometry certificate's candidate was classified as if it were the minimiser: with label smoothing 0.99, K = 2,
  lambda_b = 1 the candidate's class-mean cosine was -0.99795 (distance 0.00103 to the ETF template, tolerance 1e-3),
  and the true simplex ETF (antipodal means, cosine -1: the scipy minimum below) was REFUTED;
- one double below the threshold (a vanishing ETF) the candidate's zero class means REFUTED the simplex ETF;
- at the threshold lw = lh = 1/(2 sqrt 3) the geometry polish crashed (ZeroDivisionError in solvers.lbfgs: gradient
  entries ~1e-170 whose squares underflow to 0)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax

from proofs_check.claims.ufm_general import check_general
from proofs_check.core import Verdict
from solvers import lbfgs
from solvers import ufm_general as SG
from solvers.losses import make_loss


def _scipy_minimiser(K, n, d, lw, lh, lb, eps=0.0, starts=6):
    """The sample-level objective with label smoothing (PyTorch convention) written from its definition."""
    N = K * n
    Y = np.repeat(np.eye(K), n, axis=1)
    Q = (1 - eps) * Y + eps / K

    def f(x):
        W, H, b = x[:K * d].reshape(K, d), x[K * d:K * d + d * N].reshape(d, N), x[K * d + d * N:]
        Z = W @ H + b[:, None]
        val = np.sum(logsumexp(Z, axis=0) - np.sum(Q * Z, axis=0)) / N
        val += 0.5 * (lw * np.sum(W * W) + lh * np.sum(H * H) + lb * np.sum(b * b))
        G = (softmax(Z, axis=0) - Q) / N
        return val, np.concatenate([(G @ H.T + lw * W).ravel(), (W.T @ G + lh * H).ravel(), G.sum(axis=1) + lb * b])

    rng = np.random.default_rng(3)
    best = None
    for _ in range(starts):
        r = minimize(f, rng.normal(size=K * d + d * N + K), jac=True, method="L-BFGS-B",
                     options={"maxiter": 30000, "maxfun": 60000, "ftol": 1e-16, "gtol": 1e-14, "maxcor": 30})
        best = r if best is None or r.fun < best.fun else best
    H = best.x[K * d:K * d + d * N].reshape(d, N)
    means = np.stack([H[:, c * n:(c + 1) * n].mean(axis=1) for c in range(K)], axis=1)
    return best.fun, means


def _geometry(rep):
    return {c.name: c for c in rep.claims if c.name.startswith("geometry-")}


@pytest.mark.parametrize("loss,kw", [("ce", {}), ("ls", {"smoothing": 0.1}), ("weighted-ce", {"weights": [1.5] * 3})])
def test_zero_phase_is_stated_zero_and_verified(loss, kw):
    K, n, lw, lh, lb = 3, 3, 0.3, 0.3, 0.1  # rho0 = w kappa / (K sqrt(n lw lh)) < 1 for all three losses
    p = SG.classification(make_loss(loss, K, **kw), [n] * K, K, lw, lh, lb)
    rep = check_general(p, starts=1)
    assert rep.verdict is Verdict.VERIFIED, rep.reason
    assert {k: c.verdict for k, c in _geometry(rep).items()} == {"geometry-zero": Verdict.VERIFIED}
    claimed = _geometry(check_general(p, starts=1, expected_geometry="simplex-etf"))
    assert claimed["geometry-simplex-etf"].verdict is Verdict.REFUTED


def test_zero_phase_against_an_independent_minimum():
    val, means = _scipy_minimiser(3, 3, 3, 0.3, 0.3, 0.1)
    assert abs(val - math.log(3)) < 1e-9 and np.max(np.abs(means)) < 1e-4


def test_candidate_off_the_etf_does_not_refute_the_true_etf():
    K, n, lw, lh, lb, eps = 2, 3, 0.009263811606366414, 0.0008711379392526441, 1.0, 0.99
    rep = check_general(SG.classification(make_loss("ls", K, smoothing=eps), [n] * K, 2, lw, lh, lb), starts=1)
    geo = _geometry(rep)["geometry-simplex-etf"]
    assert geo.verdict is not Verdict.REFUTED, geo.reason
    # independent: the minimiser's class means are antipodal (the two-class simplex ETF)
    val, means = _scipy_minimiser(K, n, 2, lw, lh, lb, eps=eps, starts=4)
    cos = float(means[:, 0] @ means[:, 1] / (np.linalg.norm(means[:, 0]) * np.linalg.norm(means[:, 1])))
    assert cos < -1.0 + 1e-6 and val >= rep.certificate["lower_bound"] - 1e-12


def test_one_double_below_the_threshold_is_not_refuted():
    lw = float(np.nextafter(0.5, 0.0))  # rho0^2 = 1 / (4 lw lh) > 1 exactly: a vanishing simplex ETF
    rep = check_general(SG.classification(make_loss("ce", 2), [1, 1], 1, lw, 0.5, 1.0), starts=1)
    assert all(c.verdict is not Verdict.REFUTED for c in rep.claims), rep.reason


def test_collapse_phase_still_verified():
    rep = check_general(SG.classification(make_loss("ce", 3), [3] * 3, 3, 0.01, 0.01, 0.1), starts=1)
    assert _geometry(rep)["geometry-simplex-etf"].verdict is Verdict.VERIFIED


def test_threshold_instance_does_not_crash_in_the_polish():
    lam = 1.0 / (2.0 * math.sqrt(3.0))
    rep = check_general(SG.classification(make_loss("ls", 2, smoothing=1e-6), [3, 3], 1, lam, lam, 0.1), starts=1)
    assert rep.verdict is not Verdict.ERROR and all(c.verdict is not Verdict.REFUTED for c in rep.claims)


def test_lbfgs_first_step_with_an_underflowing_gradient_norm():
    quad = lambda x: (0.5 * float(x @ x), x.copy())  # noqa: E731
    r = lbfgs.minimize(quad, np.full(4, 1e-170), gtol=0.0, maxiter=20)  # ||g||^2 = 4e-340 underflows to 0
    assert np.all(np.abs(r.x) <= 1e-170) and r.f <= 0.5 * 4e-340
    r = lbfgs.minimize(quad, np.zeros(3), gtol=-1.0, maxiter=5)
    assert r.f == 0.0 and "zero" in r.message


@settings(max_examples=8, deadline=None)
@given(K=st.integers(2, 3), n=st.integers(1, 2), loss=st.sampled_from(["ce", "ls", "mse"]),
       log_ratio=st.floats(-1.0, 1.0), lb=st.sampled_from([0.01, 1.0]))
def test_property_no_statement_of_the_package_is_refuted(K, n, loss, log_ratio, lb):
    """Without a caller's statement nothing the package states about a true instance may be REFUTED: lambda from a
    tenth to ten times the zero-phase threshold lam0 = w kappa / (K sqrt(n)) (both phases, both sides)."""
    kw = {"smoothing": 0.5} if loss == "ls" else {}
    kappa = 0.5 if loss == "ls" else 1.0
    lam = kappa / (K * math.sqrt(n)) * 10.0 ** log_ratio
    rep = check_general(SG.classification(make_loss(loss, K, **kw), [n] * K, K, lam, lam, lb), starts=1)
    assert all(c.verdict not in (Verdict.REFUTED, Verdict.ERROR) for c in rep.claims), \
        [(c.name, c.reason) for c in rep.claims if c.verdict is Verdict.REFUTED]
