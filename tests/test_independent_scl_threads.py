"""Independent recomputation of the key numbers of the SCL review-thread claims (Kini et al.; docs/scl.md,
docs/review_threads.md). Expected values come from plain numpy / scipy code written here from the formulas in
docs/scl.md, never from theory.scl or the package's solvers; the package is only the value under test.

- scl.thread.distances: own simplex-ETF / orthogonal-frame class means at squared norm 1/tau;
- scl.thread.eq1-eq2: own vectorised Eq (1) (SupCon form) against the package's loss, and the l = j term of
  Eq (2) is what makes the two agree (dropping it changes the value);
- scl.thread.binary-antipodal: the value sum_{n_c >= 2} n_c log(n_c - 1 + (N - n_c) e^{-2/tau}) recomputed, and
  an own multi-start minimisation over unit features in the plane reaches it and no lower;
- scl.thread.rank-corrected: rank k (OF) and k - 1 (balanced ETF) of own constructed minimisers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from scipy.special import expit, logsumexp

from proofs_check.claims import scl_thread as ST
from proofs_check.core import RunContext, Verdict
from solvers import scl as S
from solvers.scl_dual import low_rank_gap
from theory import scl as T
from tests._reference import scl_eq2_without_j

CTX = RunContext()


def _labels(counts):
    return np.repeat(np.arange(len(counts)), counts)


def _etf_means(k):
    M = np.eye(k) - np.ones((k, k)) / k
    return M / np.linalg.norm(M, axis=0)


def _supcon(H, y, tau):
    """Eq (1): sum_i 1/|P(i)| sum_{j in P(i)} -log(exp(h_i.h_j/tau) / sum_{l != i} exp(h_i.h_l/tau))."""
    G = H.T @ H / tau
    N = y.size
    off = ~np.eye(N, dtype=bool)
    G_masked = np.where(off, G, -np.inf)
    den = logsumexp(G_masked, axis=1)
    pos = (y[:, None] == y[None, :]) & off
    npos = pos.sum(axis=1)
    per = np.where(pos, den[:, None] - G, 0.0).sum(axis=1)
    return float(np.sum(per[npos > 0] / npos[npos > 0]))


@pytest.mark.parametrize("k", [2, 3, 4, 6])
@pytest.mark.parametrize("tau", [0.1, 0.5, 2.0])
def test_distances_recomputed(k, tau):
    E = _etf_means(k) / math.sqrt(tau)
    O = np.eye(k) / math.sqrt(tau)
    for M in (E, O):
        assert np.allclose(np.sum(M ** 2, axis=0), 1 / tau, rtol=1e-13)
    d_etf = np.sum((E[:, 0] - E[:, 1]) ** 2)
    d_of = np.sum((O[:, 0] - O[:, 1]) ** 2)
    assert d_etf == pytest.approx(2 * k / (tau * (k - 1)), rel=1e-12)
    assert d_of == pytest.approx(2 / tau, rel=1e-12)
    # the OF at temperature tau (k - 1)/k has the ETF's squared distance at tau
    t2 = tau * (k - 1) / k
    assert np.sum(((np.eye(k)[:, 0] - np.eye(k)[:, 1]) / math.sqrt(t2)) ** 2) == pytest.approx(d_etf, rel=1e-12)
    # and the package's ETF / OF constructions give the same numbers (value under test)
    Ep = T.etf_features((1,) * k, k) / math.sqrt(tau)
    Op = T.of_features((1,) * k, k) / math.sqrt(tau)
    assert np.sum((Ep[:, 0] - Ep[:, 1]) ** 2) == pytest.approx(d_etf, rel=1e-12)
    assert np.sum((Op[:, 0] - Op[:, 1]) ** 2) == pytest.approx(d_of, rel=1e-12)


def test_distances_claim_verdicts():
    assert ST.make_distances_claim().run(CTX).verdict is Verdict.VERIFIED
    # the ETF distance without the k/(k-1) factor, or no rescaling of tau, must be refuted
    assert ST.make_distances_claim(etf_distance=lambda k, tau: 2 / tau, claim_id="x").run(CTX).verdict \
        is Verdict.REFUTED
    assert ST.make_distances_claim(rescale=lambda k: 1.0, claim_id="x").run(CTX).verdict is Verdict.REFUTED


@pytest.mark.parametrize("counts,tau,d,nonneg", [((3, 2, 2), 0.7, 4, False), ((4, 1, 3), 1.5, 5, True),
                                                  ((2, 2), 0.2, 3, False), ((5, 3, 2), 0.5, 3, True)])
def test_eq1_equals_package_loss(counts, tau, d, nonneg):
    rng = np.random.default_rng(20240)
    y = _labels(counts)
    H = rng.standard_normal((d, y.size))
    if nonneg:
        H = np.abs(H)
    H /= np.linalg.norm(H, axis=0)
    want = _supcon(H, y, tau)
    got = S.scl_loss(H, y, None, tau, grad=False)
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)
    # Eq (2) with the l = j term (exp(0) = 1) is Eq (1); dropping it is not
    G = H.T @ H / tau
    N = y.size
    eq2 = drop = 0.0
    for i in range(N):
        others = [l for l in range(N) if l != i]
        pos = [j for j in others if y[j] == y[i]]
        for j in pos:
            eq2 += logsumexp(G[i, others] - G[i, j]) / len(pos)
            rest = [l for l in others if l != j]
            drop += logsumexp(G[i, rest] - G[i, j]) / len(pos)
    assert eq2 == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert abs(drop - want) > 1e-3


def test_eq1_eq2_claim_verdicts():
    assert ST.make_eq1_eq2_claim().run(CTX).verdict is Verdict.VERIFIED

    assert ST.make_eq1_eq2_claim(eq2=scl_eq2_without_j, claim_id="x").run(CTX).verdict is Verdict.REFUTED


def _binary_value(counts, tau):
    N = sum(counts)
    return sum(n * math.log(n - 1 + (N - n) * math.exp(-2 / tau)) for n in counts if n >= 2)


@pytest.mark.parametrize("counts,tau", [((4, 4), 0.5), ((5, 2), 0.5), ((3, 1), 1.0), ((2, 6), 0.3)])
def test_binary_antipodal_value_and_minimum(counts, tau):
    want = _binary_value(counts, tau)
    assert T.binary_antipodal_value(counts, tau) == pytest.approx(want, rel=1e-13)
    y = _labels(counts)
    # antipodal collapsed features: the package's loss equals the formula
    H = np.zeros((2, y.size))
    H[0] = np.where(y == 0, 1.0, -1.0)
    assert S.scl_loss(H, y, None, tau, grad=False) == pytest.approx(want, rel=1e-12)
    # own minimisation over unit features in the plane (angles), several fixed-seed starts: never below the
    # value, and the best start reaches it
    rng = np.random.default_rng(7)

    def f(theta):
        return _supcon(np.vstack([np.cos(theta), np.sin(theta)]), y, tau)

    best = math.inf
    for _ in range(6):
        r = optimize.minimize(f, rng.uniform(0, 2 * math.pi, y.size), method="BFGS", options={"gtol": 1e-10})
        assert r.fun >= want - 1e-9
        best = min(best, r.fun)
    assert best == pytest.approx(want, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_rank_of_constructed_minimisers(k):
    counts = (3,) * k
    y = _labels(counts)
    of = np.eye(k)[:, y]
    etf = _etf_means(k)[:, y]
    assert np.linalg.matrix_rank(of) == k
    assert np.linalg.matrix_rank(etf) == k - 1
    # the OF (nonnegative) and ETF feature matrices attain the collapsed values of docs/scl.md:
    # OF anchor: log(n - 1 + (N - n) e^{-1/tau}); ETF anchor: log(n - 1 + (N - n) e^{-(1 + 1/(k-1))/tau})
    tau, n, N = 0.5, 3, 3 * k
    assert S.scl_loss(of, y, None, tau, grad=False) == pytest.approx(
        N * math.log(n - 1 + (N - n) * math.exp(-1 / tau)), rel=1e-12)
    assert S.scl_loss(etf, y, None, tau, grad=False) == pytest.approx(
        N * math.log(n - 1 + (N - n) * math.exp(-(k / (k - 1)) / tau)), rel=1e-12)


def _theorem1(counts, tau):
    N = sum(counts)
    return sum(n * math.log(n - 1 + (N - n) * math.exp(-1 / tau)) for n in counts if n >= 2)


@pytest.mark.parametrize("counts,tau,bound,etf", [((5, 3, 2), 0.5, 12.422968, 10.465194),
                                                   ((4, 4, 4), 0.5, 16.881050, 14.679291),
                                                   ((3, 2), 1.0, 4.506563, 3.141731)])
def test_reference_table_recomputed(counts, tau, bound, etf):
    """docs/scl.md's reference table: the Theorem 1 bound (own formula, and the package's OF loss) and the
    collapsed-ETF value (own ETF means, own SupCon loss)."""
    y = _labels(counts)
    k = len(counts)
    assert _theorem1(counts, tau) == pytest.approx(bound, abs=5e-7)
    assert T.theorem1_bound(counts, tau) == pytest.approx(_theorem1(counts, tau), rel=1e-13)
    assert _supcon(np.eye(k)[:, y], y, tau) == pytest.approx(bound, abs=5e-7)
    assert _supcon(_etf_means(k)[:, y], y, tau) == pytest.approx(etf, abs=5e-7)
    assert T.etf_value(counts, tau) == pytest.approx(etf, abs=5e-7)


def _min_nonneg_planar(counts, tau, starts, seed):
    """Own multi-start minimisation of the full-batch loss over unit features in the closed nonnegative
    quadrant of the plane (angle = (pi/2) sigmoid(u)): an upper bound on the d = 2 UFM+ minimum."""
    y = _labels(counts)
    rng = np.random.default_rng(seed)

    def f(u):
        th = 0.5 * math.pi * expit(u)
        return _supcon(np.vstack([np.cos(th), np.sin(th)]), y, tau)

    return min(optimize.minimize(f, rng.normal(0, 3, y.size), method="BFGS").fun for _ in range(starts))


@pytest.mark.parametrize("counts,tau,delta,attained", [((4, 4, 4), 0.5, 1.06, False), ((3, 3, 1, 1), 0.5, 0.051, False),
                                                       ((3, 1, 1), 0.5, 0.0, True)])
def test_low_dim_gap_at_d2(counts, tau, delta, attained):
    """scl.theorem1.low_dim_gap at d = 2: the documented proven gaps delta are lower bounds of (min - bound), so an
    own planar minimisation must stay above bound + delta; (3,1,1) attains the bound (class at e1, both singletons
    at e2)."""
    bound = _theorem1(counts, tau)
    best = _min_nonneg_planar(counts, tau, starts=8, seed=11)
    assert best >= bound + delta - 1e-9
    if attained:
        y = _labels(counts)
        H = np.zeros((2, y.size))
        H[0, y == 0] = 1.0
        H[1, y != 0] = 1.0
        assert _supcon(H, y, tau) == pytest.approx(bound, rel=1e-13)
        assert best == pytest.approx(bound, abs=1e-5)
    else:
        assert best > bound + 1e-3
    gap = low_rank_gap(counts, tau, 2)
    assert (gap is None) == attained
    if not attained:
        assert gap["delta"] == pytest.approx(delta, abs=0.01 if delta > 0.5 else 1e-3)
        assert best >= bound + gap["delta"] - 1e-9


@pytest.mark.parametrize("nonneg,rank", [(True, 3), (False, 2)])
def test_rank_of_own_minimiser(nonneg, rank):
    """scl.thread.rank(-corrected): an own minimisation of the full-batch loss for (3,3,3), tau = 0.5, d = 3
    (features V/||V|| without ReLU, V^2/||V^2|| with it) reaches the OF value with rank 3 (ReLU) and the ETF value
    with rank 2 (no ReLU): the thread's 'rank k irrespective of ReLU' is off by one without ReLU."""
    counts, tau, d = (3, 3, 3), 0.5, 3
    y = _labels(counts)
    rng = np.random.default_rng(3)

    def feats(v):
        V = v.reshape(d, y.size)
        V = V ** 2 if nonneg else V
        return V / np.linalg.norm(V, axis=0)

    best = None
    for _ in range(4):
        r = optimize.minimize(lambda v: _supcon(feats(v), y, tau), rng.standard_normal(d * y.size), method="BFGS",
                              options={"gtol": 1e-9})
        if best is None or r.fun < best.fun:
            best = r
    k = len(counts)
    want = _supcon(np.eye(k)[:, y], y, tau) if nonneg else _supcon(_etf_means(k)[:, y], y, tau)
    assert best.fun == pytest.approx(want, abs=1e-5)
    s = np.linalg.svd(feats(best.x), compute_uv=False)
    assert int(np.sum(s > 1e-2 * s[0])) == rank
    assert ST.make_rank_claim().run(CTX).verdict is Verdict.REFUTED
    corrected = ST.make_rank_claim(rank_fn=lambda c, nn: len(c) if nn else len(c) - 1, claim_id="x")
    assert corrected.run(CTX).verdict is Verdict.VERIFIED


def _batched(H, y, batches, tau):
    return sum(_supcon(H[:, list(b)], y[list(b)], tau) for b in batches)


def test_graf_all_combinations_batching():
    """scl.thread.graf-special-case: own all-combinations batchings. b = 2: the loss is identically 0 (an anchor's
    only other sample is its positive, or it has none); b = 3 on (2,2): the OF attains the own Theorem 2 bound
    and a collapsed non-orthogonal configuration does not."""
    from itertools import combinations

    counts, tau = (2, 2), 0.5
    y = _labels(counts)
    rng = np.random.default_rng(4)
    H = np.abs(rng.standard_normal((3, y.size)))
    H /= np.linalg.norm(H, axis=0)
    b2 = list(combinations(range(y.size), 2))
    assert _batched(H, y, b2, tau) == 0.0
    assert S.scl_loss(H, y, [list(b) for b in b2], tau, grad=False) == pytest.approx(0.0, abs=1e-14)
    b3 = [list(b) for b in combinations(range(y.size), 3)]
    bound = 0.0
    for b in b3:
        nb = np.bincount(y[b], minlength=2)
        bound += sum(n * math.log(n - 1 + (len(b) - n) * math.exp(-1 / tau)) for n in nb if n >= 2)
    of = np.eye(2)[:, y]
    assert _batched(of, y, b3, tau) == pytest.approx(bound, rel=1e-13)
    assert T.theorem2_bound(counts, b3, tau) == pytest.approx(bound, rel=1e-13)
    assert S.scl_loss(of, y, b3, tau, grad=False) == pytest.approx(bound, rel=1e-13)
    tilted = np.array([[1.0, 1.0, math.cos(1.2), math.cos(1.2)], [0.0, 0.0, math.sin(1.2), math.sin(1.2)]])
    assert _batched(tilted, y, b3, tau) > bound + 1e-3


def test_softplus_bound_is_an_infimum():
    """scl.activations.same-result-corrected: softplus features are strictly positive, so the loss stays above the
    Theorem 1 bound, and v = t (2 e_c - 1) approaches it as t grows (own softplus, own loss)."""
    counts, tau = (3, 3, 3), 0.5
    y = _labels(counts)
    k = len(counts)
    bound = _theorem1(counts, tau)
    vals = []
    for t in (1.0, 4.0, 10.0, 30.0):
        V = t * (2 * np.eye(k)[:, y] - 1)
        F = np.logaddexp(0.0, V)
        vals.append(_supcon(F / np.linalg.norm(F, axis=0), y, tau))
    assert all(v > bound + 1e-8 for v in vals[:3])  # t = 30: the gap ~1e-13 is at rounding level
    assert all(a > b for a, b in zip(vals[:3], vals[1:3]))
    assert vals[-1] - bound < 1e-9
    # relu realises the OF exactly (v = 2 e_c - 1)
    R = np.maximum(2 * np.eye(k)[:, y] - 1, 0.0)
    assert _supcon(R / np.linalg.norm(R, axis=0), y, tau) == pytest.approx(bound, rel=1e-13)
