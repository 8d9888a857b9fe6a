"""Imbalanced full-batch SCL without ReLU (UFM): no closed-form minimiser, but the dual certificate at the
solver's polished collapsed candidate plus the growth of the loss around it give a proven radius
(solvers.scl.collapsed_certificate / collapsed_growth_radius; docs/scl.md "Imbalanced UFM: a radius around
the solver's candidate"), so collapse, "not ETF / not OF" and "minority classes closer" are decided.

Checked against something other than the code under test:
- the collapsed loss against scl_loss (the one definition) and finite differences;
- the growth lemma against the loss: for random feasible Grams (collapsed and not), with D_F(G, G0) from
  scl_loss and its gradient, the class-level displacement ||(alpha, beta)|| is <= the R returned for
  E = D_F(G, G0) (and a 100x larger curvature would fail somewhere);
- the radius against brute force: truncated solver runs and random perturbations lie within the radius
  computed for their own value excess;
- verdicts: the true statements VERIFIED with the radius in the evidence; false ones (simplex ETF,
  orthogonal frame, majority classes closer) REFUTED, never VERIFIED.
"""

import math

import numpy as np
import pytest

from proofs_check.claims import scl as C
from proofs_check.core import RunContext, Verdict
from solvers import scl as S
from theory import scl as T

CTX = RunContext("quick", 0)
INSTANCES = [((5, 3, 2), 0.5), ((6, 4, 2), 1.0), ((8, 8, 2, 2), 0.5)]


def _solver_class_gram(counts, tau, **kw):
    inst = T.SCLInstance(counts, tau, len(counts), False)
    sol = S.solve_factored(inst, starts=1, seed=0, **kw)
    return S.class_mean_gram(sol.variables["H"], inst.labels), sol


@pytest.mark.parametrize("counts,tau", INSTANCES)
def test_collapsed_loss_is_the_loss(counts, tau):
    rng = np.random.default_rng(0)
    k = len(counts)
    y = T.labels_from_counts(counts)
    for r in (k - 1, k):
        W = rng.standard_normal((r, k))
        W /= np.linalg.norm(W, axis=0)
        f, g = S.collapsed_loss(W, counts, tau)
        assert f == pytest.approx(S.scl_loss(W[:, y], y, None, tau, grad=False), rel=1e-12, abs=1e-12)
        D = rng.standard_normal(W.shape)
        h = 1e-6
        fd = (S.collapsed_loss(W + h * D, counts, tau, False)[0] - S.collapsed_loss(W - h * D, counts, tau, False)[0]) / (2 * h)
        assert fd == pytest.approx(float(np.sum(g * D)), rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("counts,tau", INSTANCES)
def test_candidate_is_the_solver_optimum_and_certified(counts, tau):
    A, sol = _solver_class_gram(counts, tau)
    cert = S.collapsed_certificate(counts, tau, A)
    assert cert.face == "collapsed", cert.face_reason
    assert cert.details["rank"] == len(counts) - 1
    b = cert.bounds(0.0)
    # the measured radii (docs/scl.md table): small enough for every statement's tolerance
    assert b["collapse"] < 2e-5 and b["class_gram_radius"] < 2e-5 and b["cosine_radius"] < 2e-5, b
    # the candidate is where the solver ended (to the solver's precision), not an unrelated point
    A0 = np.asarray(cert.details["A0"])
    assert np.abs(A0 - A).max() < 1e-4
    assert cert.center_value <= sol.value + 1e-9
    # the dual point's lower bound is a lower bound: below the solver's feasible value
    assert cert.lower_bound <= sol.value


def _class_z(m, A0, counts):
    """(alpha, beta) of a class-mean Gram m: alpha_c = a_c - A0_cc (n_c >= 2), beta_cc' = m_cc' - A0_cc' (c < c')."""
    n = np.asarray(counts, float)
    k = n.size
    a = (n * np.diag(m) - 1.0) / np.where(n >= 2, n - 1.0, 1.0)
    alpha = (a - np.diag(A0))[n >= 2]
    beta = np.array([m[i, j] - A0[i, j] for i in range(k) for j in range(i + 1, k)])
    return np.concatenate([alpha, beta])


def _points_around(W, counts, rng, scales=(1e-4, 1e-3, 1e-2, 0.05, 0.2)):
    """Feasible points around the collapsed candidate: perturbed features (not collapsed), and collapsed
    points with perturbed class directions (in k dimensions: off the candidate's rank)."""
    y = T.labels_from_counts(counts)
    k = len(counts)
    Wk = np.vstack([W, np.zeros((k + 1 - W.shape[0], k))])
    pts = []
    for s in scales:
        for _ in range(2):
            H = Wk[:, y] + s * rng.standard_normal((k + 1, y.size))
            pts.append(H / np.linalg.norm(H, axis=0))
            V = Wk + s * rng.standard_normal(Wk.shape)
            V /= np.linalg.norm(V, axis=0)
            pts.append(V[:, y])
    return pts


@pytest.mark.parametrize("counts,tau", INSTANCES)
def test_growth_lemma_against_the_loss(counts, tau):
    """||z|| <= R(E = D_F(G, G0), t_w = sum n_c (1 - m_cc)) at random feasible points, D_F from scl_loss."""
    A, _ = _solver_class_gram(counts, tau)
    cert = S.collapsed_certificate(counts, tau, A)
    A0, W = np.asarray(cert.details["A0"]), np.asarray(cert.details["W"])
    y = T.labels_from_counts(counts)
    n = np.asarray(counts, float)
    G0 = A0[np.ix_(y, y)]
    F0, C0 = S.scl_loss(G0, y, None, tau, gram=True)
    slack = 2 * S.loss_rounding(S.compile_batching(y, None), tau) + 1e-12 * float(np.abs(C0).sum())
    ratios = []
    for H in _points_around(W, counts, np.random.default_rng(1)):
        G = H.T @ H
        DF = S.scl_loss(G, y, None, tau, gram=True, grad=False) - F0 - float(np.sum(C0 * (G - G0)))
        assert DF >= -slack
        m = S.class_mean_gram(H, y)
        t_w = float(np.sum(n * (1 - np.diag(m))))
        z = _class_z(m, A0, counts)
        g = S.collapsed_growth_radius(counts, tau, A0, DF + slack, t_w, cert.details["dev0"])
        assert g is not None
        assert np.linalg.norm(z) <= g["R"] * (1 + 1e-9) + 1e-12, (np.linalg.norm(z), g)
        ratios.append(np.linalg.norm(z) / g["R"])
    # not vacuous: the quadratic bound is within a factor ~10 somewhere (a 100x larger curvature would fail)
    assert max(ratios) > 0.1, max(ratios)


@pytest.mark.parametrize("counts,tau", INSTANCES)
def test_radius_contains_every_epsilon_optimal_point(counts, tau):
    A, _ = _solver_class_gram(counts, tau)
    cert = S.collapsed_certificate(counts, tau, A)
    A0, W = np.asarray(cert.details["A0"]), np.asarray(cert.details["W"])
    y = T.labels_from_counts(counts)
    N = y.size
    G0 = A0[np.ix_(y, y)]
    small, large = np.argsort(counts, kind="stable")[:2], np.argsort(counts, kind="stable")[-2:]
    cos0 = A0 / np.sqrt(np.outer(np.diag(A0), np.diag(A0)))
    slack = 2 * S.loss_rounding(S.compile_batching(y, None), tau)
    inst = T.SCLInstance(counts, tau, len(counts), False)
    points = [S.solve_factored(inst, starts=1, seed=s, maxiter=it).variables["H"] for it in (3, 10, 30, 100) for s in (0, 1)]
    points += _points_around(W, counts, np.random.default_rng(2), scales=(1e-4, 1e-3, 1e-2, 0.1))
    ratios, checked_cos = [], 0
    for H in points:
        G = H.T @ H
        eps = S.scl_loss(G, y, None, tau, gram=True, grad=False) - cert.center_value + slack
        b = cert.bounds(eps)
        assert b is not None
        m = S.class_mean_gram(H, y)
        assert np.linalg.norm(G - G0) <= b["gram_radius"] * (1 + 1e-9) + 1e-12
        assert np.linalg.norm(m - A0) <= b["class_gram_radius"] * (1 + 1e-9) + 1e-12
        coll = max(float(np.linalg.norm(H[:, i] - H[:, y == y[i]].mean(axis=1))) for i in range(N))
        assert coll <= b["collapse"] * (1 + 1e-9) + 1e-12
        if math.isfinite(b["cosine_radius"]):
            cos = m / np.sqrt(np.outer(np.diag(m), np.diag(m)))
            for (i, j) in ((small[0], small[1]), (large[0], large[1])):
                assert abs(cos[i, j] - cos0[i, j]) <= b["cosine_radius"] * (1 + 1e-9) + 1e-12
            checked_cos += 1
        ratios.append(np.linalg.norm(m - A0) / b["class_gram_radius"])
    assert checked_cos >= 5
    assert max(ratios) > 1e-2, max(ratios)  # a 100x smaller radius would fail


def test_the_etf_is_not_a_complementary_candidate_for_imbalanced_counts():
    """The dual point at a non-optimal candidate (the collapsed ETF for imbalanced counts) has a complementarity
    residual (which enters E) far above the polished candidate's whole excess: a wrong center gets no small
    radius."""
    counts, tau = (5, 3, 2), 0.5
    y = T.labels_from_counts(counts)
    H = T.etf_features(counts, 2)
    cert = S.gram_certificate(H.T @ H, y, None, tau, nonneg=False)
    A, _ = _solver_class_gram(counts, tau)
    good = S.collapsed_certificate(counts, tau, A)
    assert cert.complementarity > 1e3 * good.excess(0.0)


def test_degenerate_initial_class_gram_does_not_crash():
    """A (near) zero class mean in the solver's point: the polish starts from its rank-2 part and still reaches
    the optimum, which the certificate then proves."""
    counts, tau = (5, 3, 2), 0.5
    A, _ = _solver_class_gram(counts, tau)
    A_bad = A.copy()
    A_bad[0, :] = A_bad[:, 0] = 0.0
    cert = S.collapsed_certificate(counts, tau, A_bad)
    good = S.collapsed_certificate(counts, tau, A)
    assert cert.face == "collapsed" and cert.bounds(0.0)["collapse"] < 1e-4  # measured: same optimum, 7e-6
    assert np.abs(np.asarray(cert.details["A0"]) - np.asarray(good.details["A0"])).max() < 1e-4


# ---- verdicts -----------------------------------------------------------------------------------

def _by_prefix(r):
    return {ch.name.split(" [")[0]: ch for ch in r.checks}


@pytest.mark.parametrize("counts,tau", INSTANCES)
def test_true_statements_verified_with_radius(counts, tau):
    r = C.make_imbalanced_ufm_claim(instances=[(counts, tau)]).run(CTX)
    assert r.verdict is Verdict.VERIFIED, r.reason
    by = _by_prefix(r)
    for name in ("within-class collapse", "class means are other", "minority classes closer"):
        ch = by[name]
        assert ch.verdict is Verdict.VERIFIED, (name, ch.reason)
        ev = ch.evidence
        assert ev["radius"] is not None and 0 <= ev["radius"] < 1e-4
        assert ev["radius_proof"] and "dual" in ev["radius_proof"]
    ev = by["class means are other"].evidence
    assert ev["distance_etf"] - ev["lipschitz"] * ev["radius"] > ev["tolerance"]
    assert ev["distance_of"] - ev["lipschitz"] * ev["radius"] > ev["tolerance"]
    mc = by["minority classes closer"].evidence
    assert mc["cos_minority_at_center"] - mc["cos_majority_at_center"] > 2 * mc["cosine_radius"]


@pytest.mark.parametrize("geometry", ["simplex-etf", "orthogonal-frame"])
def test_claimed_template_refuted(geometry):
    r = C.make_imbalanced_ufm_claim(geometry=geometry, instances=[((5, 3, 2), 0.5), ((8, 8, 2, 2), 0.5)]).run(CTX)
    assert r.verdict is Verdict.REFUTED, r.reason
    geo = [ch for ch in r.checks if ch.name.startswith("class means are")]
    assert len(geo) == 2 and all(ch.verdict is Verdict.REFUTED for ch in geo)
    assert all(ch.evidence["radius"] is not None for ch in geo)


def test_majority_closer_refuted():
    r = C.make_imbalanced_ufm_claim(minority_closer=False, instances=[((6, 4, 2), 1.0), ((8, 8, 2, 2), 0.5)]).run(CTX)
    assert r.verdict is Verdict.REFUTED, r.reason
    ch = [c for c in r.checks if c.name.startswith("majority classes closer")]
    assert len(ch) == 2 and all(c.verdict is Verdict.REFUTED for c in ch)


@pytest.mark.parametrize("claimed,cid", [(None, "geometry-not-etf"), ("simplex-etf", "geometry-etf")])
def test_check_instance_imbalanced_geometry(claimed, cid):
    inst = T.SCLInstance((5, 3, 2), 0.5, 3, False)
    rep = C.check_instance(inst, starts=2, predicted_geometry=claimed).to_dict()
    by = {c["id"]: c for c in rep["claims"]}
    want = "VERIFIED" if claimed is None else "REFUTED"
    assert by[cid]["verdict"] == want, by[cid]["reason"]
    assert by["within-class-collapse"]["verdict"] == "VERIFIED"
    assert by["minority-classes-closer"]["verdict"] == "VERIFIED"
    assert rep["verdict"] == want
