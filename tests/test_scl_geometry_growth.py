"""Balanced full-batch SCL without ReLU, k >= 4: the growth bound of the loss on the ETF face
(solvers.scl.etf_face_growth / etf_face_radius, docs/scl.md "Growth on the ETF face (k >= 4)")
turns the dual certificate into a proven radius, so the geometry statements about every minimiser
are decided.

What is checked against something other than the code under test:
- the growth constant mu against the loss itself (scl_loss, the one definition) at random points of
  the face {A PSD, diag A = 1, A 1 = 0}, built exactly (A0 + s Delta with Delta in the null space of
  the row-sum map, s up to the PSD limit);
- the radius against brute force: points of truncated solver runs and random perturbations of the
  ETF (not collapsed, not on the face) lie within the radius computed for their own value excess;
- verdicts: true instances VERIFIED with the radius term below the tolerance, false geometry claims
  (orthogonal frame, "other") REFUTED.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proofs_check.claims import scl as C
from proofs_check.core import RunContext, Verdict
from solvers import scl as S
from theory import scl as T
from theory.geometry import GEOMETRY_TOL

CTX = RunContext("quick", 0)
GEOMETRY_IDS = ("geometry-etf", "within-class-collapse", "unique-minimiser")
#: tolerance of each statement, as used by proofs_check.claims.scl.geometry_checks
TOLS = {"geometry-etf": GEOMETRY_TOL, "within-class-collapse": C.COLLAPSE_TOL, "unique-minimiser": C.UNIQUE_GRAM_TOL}


def _etf_gram(counts):
    H = T.etf_features(counts, len(counts) - 1)
    return H.T @ H


def _face_directions(k):
    """Orthonormal basis (as k x k symmetric matrices) of {Delta symmetric, diag Delta = 0, Delta 1 = 0}:
    the null space of the map from the k(k-1)/2 off-diagonal entries to the k row sums."""
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    B = np.zeros((k, len(pairs)))
    for p, (i, j) in enumerate(pairs):
        B[i, p] = B[j, p] = 1.0
    _, sv, Vt = np.linalg.svd(B)
    null = Vt[int(np.sum(sv > 1e-10)):]
    out = []
    for v in null:
        D = np.zeros((k, k))
        for p, (i, j) in enumerate(pairs):
            D[i, j] = D[j, i] = v[p]
        out.append(D)
    return out


def _random_face_point(k, rng, frac):
    """A on the ETF face: A0 + s Delta, Delta a random combination of the face directions, s = frac times
    the largest step keeping A PSD (A0 has eigenvalue k/(k-1) on 1^perp, Delta lives on 1^perp)."""
    A0 = (k / (k - 1.0)) * np.eye(k) - 1.0 / (k - 1.0)
    D = sum(rng.standard_normal() * Di for Di in _face_directions(k))
    lam = float(np.linalg.eigvalsh(D)[0])
    smax = (k / (k - 1.0)) / max(-lam, 1e-12)
    A = A0 + frac * smax * D
    return A0, A


def test_face_construction_is_the_face():
    rng = np.random.default_rng(1)
    for k in (4, 5, 8):
        assert len(_face_directions(k)) == k * (k - 1) // 2 - k  # the face has positive dimension for k >= 4
        for frac in (0.3, 1.0):
            _, A = _random_face_point(k, rng, frac)
            assert np.allclose(np.diag(A), 1.0) and np.allclose(A @ np.ones(k), 0.0, atol=1e-12)
            assert np.linalg.eigvalsh(A)[0] >= -1e-12
            assert np.abs(A).max() <= 1 + 1e-12


def _growth_lower(counts, tau, A, A0, mu, rho):
    """(n mu / 2) sum_c ||beta_c||^2 min(1, rho / ||beta_c||_inf): the growth bound on the face (alpha = 0)."""
    n = counts[0]
    tot = 0.0
    for c in range(len(counts)):
        beta = np.delete(A[c] - A0[c], c)
        ninf = float(np.abs(beta).max())
        if ninf > 0:
            tot += float(beta @ beta) * min(1.0, rho / ninf)
    return 0.5 * n * mu * tot


@settings(max_examples=60, deadline=None)
@given(k=st.sampled_from([4, 5, 6, 8]), n=st.sampled_from([2, 3]), tau=st.sampled_from([0.05, 0.3, 1.0, 10.0]),
       r=st.sampled_from(S.GROWTH_RHOS), frac=st.floats(0.01, 1.0), seed=st.integers(0, 2 ** 31 - 1))
def test_growth_constant_holds_on_the_face(k, n, tau, r, frac, seed):
    """F(A) - F(ETF) >= (n mu / 2) ||A - A0||^2 (quadratic regime; linear beyond rho) at random face points,
    with F evaluated by the loss itself on the collapsed Gram."""
    counts = (n,) * k
    y = T.labels_from_counts(counts)
    A0, A = _random_face_point(k, np.random.default_rng(seed), frac)
    rho = r * tau
    g = S.etf_face_growth(counts, tau, rho)
    mu = g["mu_centred"]  # on the face the rows of A - A0 sum to 0 (centred directions)
    assert mu >= g["mu"] > 0
    F0 = S.scl_loss(A0[np.ix_(y, y)], y, None, tau, gram=True, grad=False)
    F = S.scl_loss(A[np.ix_(y, y)], y, None, tau, gram=True, grad=False)
    slack = 2 * S.loss_rounding(S.compile_batching(y, None), tau)
    assert F - F0 >= _growth_lower(counts, tau, A, A0, mu, rho) - slack


@pytest.mark.parametrize("k,n,tau", [(4, 2, 0.3), (5, 3, 1.0), (6, 2, 10.0), (8, 2, 0.3)])
def test_growth_constant_is_not_vacuous(k, n, tau):
    """Near the ETF the loss grows at most a few times faster than (n mu / 2)||A - A0||^2 at the smallest
    rho (true curvature ~ e^{2 rho / tau} mu): a 4x larger mu would break the validity test above."""
    counts = (n,) * k
    y = T.labels_from_counts(counts)
    rho = S.GROWTH_RHOS[0] * tau
    mu = S.etf_face_growth(counts, tau, rho)["mu_centred"]
    rng = np.random.default_rng(0)
    F0 = S.scl_loss(_etf_gram(counts), y, None, tau, gram=True, grad=False)
    ratios = []
    for _ in range(5):
        A0, A = _random_face_point(k, rng, 0.02)
        F = S.scl_loss(A[np.ix_(y, y)], y, None, tau, gram=True, grad=False)
        lower = _growth_lower(counts, tau, A, A0, mu, rho)
        assert lower > 1e3 * S.loss_rounding(S.compile_batching(y, None), tau)  # measurable above rounding
        ratios.append((F - F0) / lower)
    assert min(ratios) >= 1.0
    assert max(ratios) < 4.0, ratios


@settings(max_examples=40, deadline=None)
@given(k=st.sampled_from([4, 5, 6]), n=st.sampled_from([2, 3]), tau=st.sampled_from([0.1, 0.3, 1.0, 10.0]),
       r=st.sampled_from(S.GROWTH_RHOS), scale=st.sampled_from([1e-3, 1e-2, 0.1, 0.5]),
       seed=st.integers(0, 2 ** 31 - 1))
def test_growth_off_the_face(k, n, tau, r, scale, seed):
    """Every direction (not collapsed, rows not summing to 0): the Bregman divergence
    D_F(G, G0) = F(G) - F(G0) - <grad F(G0), G - G0> (loss and gradient from scl_loss) is >= the bound of
    etf_face_growth's ``mu`` on the class-mean Gram (the within-class averaging step is part of what is tested)."""
    counts = (n,) * k
    y = T.labels_from_counts(counts)
    rng = np.random.default_rng(seed)
    Hc = T.etf_features(counts, k + 1)
    H = Hc + scale * rng.standard_normal(Hc.shape)
    H /= np.linalg.norm(H, axis=0)
    G, G0 = H.T @ H, _etf_gram(counts)
    F0, C0 = S.scl_loss(G0, y, None, tau, gram=True)
    F = S.scl_loss(G, y, None, tau, gram=True, grad=False)
    D = F - F0 - float(np.sum(C0 * (G - G0)))
    m, m0 = S.class_mean_gram(H, y), S.class_mean_gram(Hc, y)
    alpha = (n * np.diag(m) - 1) / (n - 1) - 1.0  # a_c - 1
    rho = r * tau
    mu = S.etf_face_growth(counts, tau, rho, float(np.abs(alpha).max()))["mu"]
    tot = 0.0
    for c in range(k):
        beta = np.delete(m[c] - m0[c], c)
        tot += float(np.sum((beta - alpha[c]) ** 2)) * min(1.0, rho / float(np.abs(beta).max()))
    slack = 2 * S.loss_rounding(S.compile_batching(y, None), tau) + 1e-12 * float(np.abs(C0).sum())
    assert D >= 0.5 * n * mu * tot - slack


def test_growth_underflow_gives_no_bound():
    assert S.etf_face_growth((2, 2, 2, 2), 1e-4, 1e-4)["mu"] == 0.0
    cert = S.gram_certificate(_etf_gram((2,) * 4), T.labels_from_counts((2,) * 4), None, 1e-4, nonneg=False,
                              face="simplex-etf", counts=(2,) * 4)
    assert cert.bounds(0.0) is None


# ---- the radius against brute force (points off the face, not collapsed) ----------------------

@pytest.mark.parametrize("counts,tau", [((2, 2, 2, 2), 0.3), ((3, 3, 3, 3, 3), 1.0),
                                        pytest.param((2,) * 6, 10.0, marks=pytest.mark.slow)])
def test_radius_contains_every_epsilon_optimal_point(counts, tau):
    y = T.labels_from_counts(counts)
    k, N = len(counts), len(y)
    G0 = _etf_gram(counts)
    cert = S.gram_certificate(G0, y, None, tau, nonneg=False, face="simplex-etf", counts=counts)
    assert cert.face == "simplex-etf", cert.face_reason
    b0 = cert.bounds(0.0)
    assert b0["gram_radius"] < 1e-2 and b0["collapse"] < 1e-4 and b0["class_gram_radius"] < 1e-3
    slack = 2 * S.loss_rounding(S.compile_batching(y, None), tau)
    rng = np.random.default_rng(0)
    inst = T.SCLInstance(counts, tau, k, False, None)
    points = []
    for it in (3, 10, 30, 100):  # truncated solver runs
        for seed in range(2):
            points.append(S.solve_factored(inst, starts=1, seed=seed, maxiter=it).variables["H"])
    Hc = T.etf_features(counts, k)
    for scale in (1e-4, 1e-3, 1e-2, 0.1, 0.5):  # perturbations of the ETF (off the face)
        for _ in range(3):
            H = Hc + scale * rng.standard_normal(Hc.shape)
            points.append(H / np.linalg.norm(H, axis=0))
    for frac in (0.01, 0.1, 0.5, 1.0):  # collapsed points on the face (where only the growth bound helps)
        _, A = _random_face_point(k, rng, frac)
        w, V = np.linalg.eigh(A)
        Hf = (V * np.sqrt(np.clip(w, 0, None))).T[:, y]
        points.append(Hf / np.linalg.norm(Hf, axis=0))
    M0 = S.class_mean_gram(Hc, y)
    ratios = []
    for H in points:
        G = H.T @ H
        eps = S.scl_loss(G, y, None, tau, gram=True, grad=False) - cert.center_value + slack
        b = cert.bounds(eps)
        assert b is not None and math.isfinite(b["class_gram_radius"])
        dist = float(np.linalg.norm(G - G0))
        mdist = float(np.linalg.norm(S.class_mean_gram(H, y) - M0))
        collapse = max(float(np.linalg.norm(H[:, i] - H[:, y == y[i]].mean(axis=1))) for i in range(N))
        assert dist <= b["gram_radius"] * (1 + 1e-9) + 1e-12, (eps, dist, b)
        assert mdist <= b["class_gram_radius"] * (1 + 1e-9) + 1e-12, (eps, mdist, b)
        assert collapse <= b["collapse"] * (1 + 1e-9) + 1e-12
        ratios.append(mdist / b["class_gram_radius"])
    # not vacuous: some points use a fair share of the class-mean radius (a 100x smaller one would fail)
    assert max(ratios) > 1e-2, max(ratios)


# ---- verdicts -----------------------------------------------------------------------------------

def _geometry_checks(counts, tau, d=None, **kw):
    inst = T.SCLInstance(tuple(counts), tau, d or len(counts) - 1, False, None)
    rep = C.check_instance(inst, starts=1, hops=0, **kw).to_dict()
    return rep, {c["id"]: c for c in rep["claims"]}


def _assert_verified_with_radius(counts, tau):
    rep, by = _geometry_checks(counts, tau)
    for cid in GEOMETRY_IDS:
        c = by[cid]
        assert c["verdict"] == "VERIFIED", (cid, c["reason"])
        ev = c["evidence"]
        r = ev["radius"]
        assert r is not None and math.isfinite(r) and r >= 0
        assert ev["deviation"] + ev["lipschitz"] * r <= TOLS[cid]  # the radius term fits inside the tolerance
    assert rep["verdict"] == "VERIFIED", rep["reason"]
    cert = by["geometry-etf"]["evidence"]["certificate"]
    assert cert["minimiser_bounds"]["growth_mu"] > 0  # the k >= 4 face curvature (positive) is part of the proof
    return by


def _numeric_route_radius(counts, tau):
    """The numeric dual point (gram_certificate at the ETF, float rounding allowance) with the k >= 4 growth
    bound, on its own (check_instance keeps the smaller of it and the closed-form radius)."""
    y = T.labels_from_counts(counts)
    cert = S.gram_certificate(_etf_gram(counts), y, None, tau, nonneg=False, face="simplex-etf", counts=counts)
    return cert.bounds(0.0)


@pytest.mark.parametrize("counts,tau", [((2, 2, 2, 2), 0.3), ((3, 3, 3, 3, 3), 0.5), ((2,) * 6, 1.0),
                                        ((2,) * 4, 10.0)])
def test_true_instances_verified(counts, tau):
    _assert_verified_with_radius(counts, tau)
    b = _numeric_route_radius(counts, tau)  # the numeric route alone also decides these (tau >= 0.3)
    assert b["growth_mu"] > 0 and b["class_gram_radius"] < 1e-4 and b["collapse"] < C.COLLAPSE_TOL


@pytest.mark.slow
@pytest.mark.parametrize("k", [4, 5, 6, 8])
@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("tau", [0.3, 1.0, 10.0])
def test_true_instances_verified_grid(k, n, tau):
    _assert_verified_with_radius((n,) * k, tau)


@pytest.mark.parametrize("counts,tau", [((2, 2, 2, 2), 0.05), ((3,) * 5, 0.1), pytest.param((2,) * 8, 0.05,
                                                                                            marks=pytest.mark.slow)])
def test_true_instances_at_small_tau_never_refuted(counts, tau):
    """Small tau: the numeric dual margin sigma ~ N e^{-k/((k-1) tau)} / tau is near the rounding allowance; the
    closed-form dual point (below) decides them; a true statement is never REFUTED."""
    _, by = _geometry_checks(counts, tau)
    for cid in GEOMETRY_IDS:
        assert by[cid]["verdict"] in ("VERIFIED", "INCONCLUSIVE"), (cid, by[cid]["reason"])


@pytest.mark.parametrize("claimed", ["orthogonal-frame", "other"])
def test_false_geometry_refuted_through_check_instance(claimed):
    _, by = _geometry_checks((2, 2, 2, 2), 0.3, predicted_geometry=claimed)
    c = by["geometry-" + claimed.replace("simplex-", "")]
    assert c["verdict"] == "REFUTED", c["reason"]


@pytest.mark.parametrize("claimed", ["orthogonal-frame", "other"])
def test_false_geometry_refuted_through_the_claim_factory(claimed):
    r = C.make_graf_claim(geometry=claimed, instances=[((2, 2, 2, 2), 0.3, 4), ((3,) * 5, 1.0, 5)]).run(CTX)
    assert r.verdict is Verdict.REFUTED, r.reason
    refuted = [ch for ch in r.checks if ch.verdict is Verdict.REFUTED]
    assert any(ch.name.startswith("geometry-" + claimed) for ch in refuted)
    assert not any(ch.verdict is Verdict.VERIFIED and ch.name.startswith("geometry-" + claimed) for ch in r.checks)


def test_true_claim_factory_verified_for_k4():
    r = C.make_graf_claim(instances=[((2, 2, 2, 2), 0.3, 4), ((3,) * 5, 1.0, 5)]).run(CTX)
    assert r.verdict is Verdict.VERIFIED, r.reason
    assert any(ch.name.startswith("geometry-etf") and ch.verdict is Verdict.VERIFIED for ch in r.checks)


# ---- the closed-form dual point at the ETF (small tau) -------------------------------------------

CLOSED_FORM_CASES = [((2,) * 4, 0.05), ((2,) * 4, 0.1), ((3,) * 5, 0.1), ((2,) * 8, 0.05), ((3,) * 3, 0.3),
                     ((2,) * 4, 1.0), ((2, 2), 0.05)]


@pytest.mark.parametrize("counts,tau", CLOSED_FORM_CASES)
def test_closed_form_dual_is_the_gradient_and_exact(counts, tau):
    """The closed-form C is the loss's own gradient at the ETF (scl_loss, gram=True), mu is the least-squares mu
    of the numeric dual point, S G0 = 0, <C, G0> = sum mu, and S's spectrum is {0 (k-1), sigma = N p_neg / tau,
    n (N-1) p_neg / ((n-1) tau)} with sigma the smallest positive eigenvalue."""
    y = T.labels_from_counts(counts)
    k, N, n = len(counts), len(y), counts[0]
    G0 = _etf_gram(counts)
    d = S.etf_closed_form_dual_matrices(counts, tau)
    F0, Cn = S.scl_loss(G0, y, None, tau, gram=True)
    scale = float(np.abs(Cn).max())
    # the numeric within-class entry p_w / tau - 1/((n-1) tau) cancels: its rounding is ~ eps / tau (the reason
    # the numeric dual point fails at small tau); the closed form must agree to that
    tol = 1e-12 * scale + 64 * S.EPS / tau
    assert np.abs(d["C"] - Cn).max() <= tol
    rows = np.einsum("ij,ij->i", Cn @ G0, G0) / np.einsum("ij,ij->i", G0, G0)
    assert np.abs(d["mu"] - rows).max() <= N * tol
    # exact identities of the closed form (evaluated in float from its own entries)
    assert np.abs(d["S"] @ G0).max() <= 1e-12 * scale * N
    assert abs(float(np.sum(d["C"] * G0)) - float(d["mu"].sum())) <= 1e-12 * scale * N * N
    ev = np.linalg.eigvalsh(d["S"])
    want = np.sort(np.concatenate([np.zeros(k - 1), [d["sigma"]], np.full(N - k, d["within_eigenvalue"])]))
    assert np.abs(ev - want).max() <= 1e-10 * max(scale, float(np.abs(ev).max()))
    assert d["sigma"] <= d["within_eigenvalue"]
    cert = S.etf_closed_form_certificate(counts, tau)
    assert cert.sigma == pytest.approx(d["sigma"], rel=1e-10)
    # the float loss at G0 rounds to ~eps N / tau absolute (cancellation of LSE - 1/tau); the closed form (log1p)
    # agrees with it to that, and with theory's ETF value to a few ulps
    assert abs(cert.center_value - F0) <= 2 * S.loss_rounding(S.compile_batching(y, None), tau)
    assert cert.center_value == pytest.approx(T.etf_value(counts, tau), rel=1e-12)
    assert cert.excess(0.0) == 0.0 and cert.complementarity == 0.0 and cert.eta == 0.0


@settings(max_examples=30, deadline=None)
@given(k=st.sampled_from([2, 3, 4, 6]), n=st.sampled_from([2, 3]), tau=st.sampled_from([0.1, 0.3, 1.0]),
       scale=st.sampled_from([1e-3, 1e-2, 0.1, 1.0]), seed=st.integers(0, 2 ** 31 - 1))
def test_closed_form_inequality_at_random_feasible_points(k, n, tau, scale, seed):
    """F(G) - F(G0) >= <S, G> >= sigma tr(QG) for random feasible G, with F from scl_loss (the identity
    F(G) - F(G0) = D_F(G, G0) + <S, G> with D_F >= 0 is what makes E = eps)."""
    counts = (n,) * k
    y = T.labels_from_counts(counts)
    rng = np.random.default_rng(seed)
    Hc = T.etf_features(counts, k + 1)
    H = Hc + scale * rng.standard_normal(Hc.shape)
    H /= np.linalg.norm(H, axis=0)
    G, G0 = H.T @ H, _etf_gram(counts)
    d = S.etf_closed_form_dual_matrices(counts, tau)
    Q = np.eye(len(y)) - S.face_projector(counts, "simplex-etf")
    F0 = S.scl_loss(G0, y, None, tau, gram=True, grad=False)
    F = S.scl_loss(G, y, None, tau, gram=True, grad=False)
    slack = 2 * S.loss_rounding(S.compile_batching(y, None), tau) + 1e-12 * float(np.abs(d["S"]).sum())
    sg = float(np.sum(d["S"] * G))
    assert F - F0 >= sg - slack
    assert sg >= d["sigma"] * float(np.sum(Q * G)) * (1 - 1e-9) - slack


@pytest.mark.parametrize("counts,tau", [((2, 2, 2, 2), 0.1), ((3, 3, 3), 0.1), ((3,) * 5, 0.3)])
def test_closed_form_radius_contains_every_epsilon_optimal_point(counts, tau):
    """Brute force for the closed-form certificate: truncated solver runs, perturbations and collapsed face
    points lie within the radius computed for their own value excess."""
    y = T.labels_from_counts(counts)
    k, N = len(counts), len(y)
    G0 = _etf_gram(counts)
    cert = S.etf_closed_form_certificate(counts, tau)
    slack = 2 * S.loss_rounding(S.compile_batching(y, None), tau)
    rng = np.random.default_rng(3)
    inst = T.SCLInstance(counts, tau, k, False, None)
    points = [S.solve_factored(inst, starts=1, seed=s, maxiter=it).variables["H"] for it in (3, 10, 30) for s in (0, 1)]
    Hc = T.etf_features(counts, k)
    for sc in (1e-4, 1e-3, 1e-2, 0.1):
        for _ in range(3):
            H = Hc + sc * rng.standard_normal(Hc.shape)
            points.append(H / np.linalg.norm(H, axis=0))
    if k >= 4:
        for frac in (0.01, 0.1, 0.5):
            _, A = _random_face_point(k, rng, frac)
            w, V = np.linalg.eigh(A)
            Hf = (V * np.sqrt(np.clip(w, 0, None))).T[:, y]
            points.append(Hf / np.linalg.norm(Hf, axis=0))
    M0 = S.class_mean_gram(Hc, y)
    ratios = []
    for H in points:
        G = H.T @ H
        eps = S.scl_loss(G, y, None, tau, gram=True, grad=False) - cert.center_value + slack
        b = cert.bounds(eps)
        assert b is not None
        assert np.linalg.norm(G - G0) <= b["gram_radius"] * (1 + 1e-9) + 1e-12
        mdist = float(np.linalg.norm(S.class_mean_gram(H, y) - M0))
        assert mdist <= b["class_gram_radius"] * (1 + 1e-9) + 1e-12
        coll = max(float(np.linalg.norm(H[:, i] - H[:, y == y[i]].mean(axis=1))) for i in range(N))
        assert coll <= b["collapse"] * (1 + 1e-9) + 1e-12
        ratios.append(mdist / b["class_gram_radius"])
    assert max(ratios) > 1e-2, max(ratios)


def test_closed_form_overstated_sigma_is_caught():
    """A sigma 10^4 x too large (a 100x smaller collapse radius: the radius is sqrt(eps / sigma)) is caught by
    a perturbed point (mutation of the certificate); the true one contains it (ratio ~0.09 measured)."""
    counts, tau = (2, 2, 2, 2), 0.1
    y = T.labels_from_counts(counts)
    cert = S.etf_closed_form_certificate(counts, tau)
    H = T.etf_features(counts, 4) + 1e-2 * np.random.default_rng(0).standard_normal((4, 8))
    H /= np.linalg.norm(H, axis=0)
    eps = S.scl_loss(H.T @ H, y, None, tau, grad=False, gram=True) - cert.center_value
    coll = max(float(np.linalg.norm(H[:, i] - H[:, y == y[i]].mean(axis=1))) for i in range(8))
    assert coll <= cert.bounds(eps + 2 * S.loss_rounding(S.compile_batching(y, None), tau))["collapse"]
    cert.sigma *= 1e4
    H = T.etf_features(counts, 4) + 1e-2 * np.random.default_rng(0).standard_normal((4, 8))
    H /= np.linalg.norm(H, axis=0)
    eps = S.scl_loss(H.T @ H, y, None, tau, grad=False, gram=True) - cert.center_value
    coll = max(float(np.linalg.norm(H[:, i] - H[:, y == y[i]].mean(axis=1))) for i in range(8))
    assert coll > cert.bounds(eps)["collapse"]


@pytest.mark.parametrize("counts,tau", [((2,) * 4, 0.05), ((2,) * 4, 0.1), ((2,) * 8, 0.05), ((2,) * 8, 0.1),
                                        ((3,) * 3, 0.05), ((2,) * 4, 1e-3)])
def test_small_tau_verified_by_the_closed_form(counts, tau):
    rep, by = _geometry_checks(counts, tau)
    assert rep["verdict"] == "VERIFIED", rep["reason"]
    for cid in GEOMETRY_IDS:
        c = by[cid]
        assert c["verdict"] == "VERIFIED", (cid, c["reason"])
        ev = c["evidence"]
        assert ev["radius"] == 0.0 and ev["deviation"] <= 1e-12  # exact dual point: every minimiser is G0
        assert "closed-form" in ev["radius_proof"]
    cert = by["geometry-etf"]["evidence"]["certificate"]
    assert cert["exact_dual"] is True and cert["complementarity"] == 0.0 and cert["eta"] == 0.0
    if tau <= 0.05:  # the numeric route alone does not decide these (its margin drowns in round-off)
        b = _numeric_route_radius(counts, tau)
        assert b is None or b["collapse"] > C.COLLAPSE_TOL


@pytest.mark.parametrize("claimed", ["orthogonal-frame", "other"])
@pytest.mark.parametrize("counts,tau", [((2,) * 4, 0.05), ((2,) * 8, 0.1)])
def test_small_tau_false_geometry_refuted(counts, tau, claimed):
    _, by = _geometry_checks(counts, tau, predicted_geometry=claimed)
    c = by["geometry-" + claimed]
    assert c["verdict"] == "REFUTED", c["reason"]
