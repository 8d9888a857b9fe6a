"""The geometry certificate of the any-loss UFM engine (docs/ufm_general.md, "Geometry certificate").

The enclosure's inequality is tested at arbitrary points (not only minimisers): for every (X, b) with value F,
the projected centred logits lie within radius(F) of the dual point's centre. Independent solvers (cvxpy /
Clarabel on the class-reduced program, a long L-BFGS run from another seed) give epsilon-optimal points that must
lie inside the proven radius. False geometry statements are refuted; the work budgets give the same result under
a CPU hog on both cores.
"""

import math
import multiprocessing as mp
import os

import numpy as np
import pytest

from proofs_check.claims.ufm import GEOMETRY_TOL, check_general
from solvers import losses as L
from solvers import ufm_general as SG


def _problem(name, counts, lw=5e-3, lh=5e-3, d=None, **kw):
    K = len(counts)
    return SG.classification(L.make_loss(name, K, **kw), counts, d or K, lw, lh)


def _certified(p):
    """Candidate, certificate, dual columns and enclosure along the path of check_general."""
    lay = SG.class_layout(p)
    if lay is not None:
        sol = SG.solve_grouped(p, lay, starts=1)
        pt = SG.clean_grouped(p, sol.variables["point"], lay)
        cert = SG.certificate_grouped(p, pt, lay)
        X, b = SG.grouped_full(p, pt, lay)
        V = SG.dual_columns_grouped(p, pt, lay, cert)
    else:
        sol = SG.solve_factored(p, rank=min(p.K, p.G), starts=1)
        X = SG.clean_candidate(p, sol.variables["X"], sol.variables["b"])
        b = sol.variables["b"]
        cert = SG.certificate(p, X, b)
        V = SG.dual_columns(p, X, b, cert)
    enc = SG.minimiser_enclosure(p, V, cert.lower_bound, cert.upper)
    return X, b, cert, V, enc


def _projected(p, X, b):
    """(J) U D^{1/2} P: what the enclosure bounds for an arbitrary point (J only for softmax losses)."""
    sq = np.sqrt(p.counts.astype(float))
    U = X / sq + b[:, None]
    if isinstance(p.loss, L.CrossEntropy):
        U = U - U.mean(axis=0, keepdims=True)
    M = U * sq
    v = sq / math.sqrt(p.N)
    return M - np.outer(M @ v, v)


CASES = [("ce", [6, 6, 2, 1], {}), ("mse", [5, 2, 1], {}), ("ce", [10, 10, 1, 1], {}),
         ("ls", [6, 6, 2, 1], {"smoothing": 0.1}), ("ls", [5, 3, 1], {"smoothing": 0.2, "convention": "others"}),
         ("weighted-ce", [6, 6, 2, 1], {"weights": [1.0, 1.0, 2.0, 3.0]})]


@pytest.mark.parametrize("name,counts,kw", CASES)
def test_enclosure_holds_at_arbitrary_points(name, counts, kw):
    """The Fenchel-Young inequality behind the radius, at random (non-invariant, bias-shifted) points of every
    scale: ||proj(X, b) - Xhat||_F <= radius computed with upper = F(X, b)."""
    p = _problem(name, counts, **kw)
    X, b, cert, V, enc = _certified(p)
    assert enc["ok"], enc.get("why")
    rng = np.random.default_rng(0)
    tested = 0
    for scale in (1e-7, 1e-5, 1e-3, 1e-2, 1e-1):
        for _ in range(6):
            Xp = X + scale * np.linalg.norm(X) * rng.standard_normal(X.shape) / math.sqrt(X.size)
            bp = b + scale * rng.standard_normal(b.shape)
            F = SG.convex_value(p, Xp, bp)
            e2 = SG.minimiser_enclosure(p, V, cert.lower_bound, F)
            if not e2["ok"]:
                continue  # the gap of that point is beyond the quadratic bound's range
            dist = float(np.linalg.norm(_projected(p, Xp, bp) - e2["center"]))
            assert dist <= e2["radius"], (scale, dist, e2["radius"])
            tested += 1
    assert tested >= 12
    # the candidate itself, and the radius is not vacuous (it is what decides the statements)
    assert np.linalg.norm(_projected(p, X, b) - enc["center"]) <= enc["radius"] <= 1e-4 * enc["center_norm"]


def _cvxpy_class_reduced(p):
    cp = pytest.importorskip("cvxpy")
    K, G = p.K, p.G
    n = p.counts.astype(float)
    sq = np.sqrt(n)
    X = cp.Variable((K, G))
    b = cp.Variable(K)
    U = X @ np.diag(1.0 / sq) + cp.reshape(b, (K, 1), order="F") @ np.ones((1, G))
    if isinstance(p.loss, L.CrossEntropy):
        Q = p.loss.targets(p.y)
        w = p.loss.w[p.y]
        data = cp.sum(cp.multiply(w * n, cp.log_sum_exp(U, axis=0) - cp.sum(cp.multiply(Q, U), axis=0))) / p.N
    else:
        T = p.loss.T[:, p.y]
        data = cp.sum(cp.multiply(n, 0.5 * cp.sum(cp.square(U - T), axis=0))) / p.N
    prob = cp.Problem(cp.Minimize(data + p.lam * cp.normNuc(X)))
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-13, tol_gap_rel=1e-13, tol_feas=1e-13)
    return np.asarray(X.value), np.asarray(b.value)


@pytest.mark.parametrize("name,counts,kw", [CASES[0], CASES[1], CASES[4]])
def test_independent_solvers_lie_within_the_proven_radius(name, counts, kw):
    p = _problem(name, counts, **kw)
    X, b, cert, V, enc = _certified(p)
    points = [("cvxpy", *_cvxpy_class_reduced(p))]
    other = SG.solve_factored(p, rank=p.K, starts=1, seed=11)
    points.append(("lbfgs seed 11", other.variables["X"], other.variables["b"]))
    for label, Xo, bo in points:
        F = SG.convex_value(p, Xo, bo)
        e2 = SG.minimiser_enclosure(p, V, cert.lower_bound, max(F, cert.upper))
        assert e2["ok"], (label, e2.get("why"))
        dist = float(np.linalg.norm(_projected(p, Xo, bo) - e2["center"]))
        assert dist <= e2["radius"], (label, dist, e2["radius"])


def test_araki_yamagami_square_root_bound():
    """|| |A| - |B| ||_F <= sqrt(2) ||A - B||_F (used to carry the radius to the Gram matrices), on random,
    rank-deficient and nearly collapsed pairs."""
    rng = np.random.default_rng(3)

    def absm(A):
        U, s, Vt = np.linalg.svd(A)
        return (Vt.T * s) @ Vt

    worst = 0.0
    for _ in range(300):
        k = int(rng.integers(2, 7))
        A = rng.standard_normal((k, k))
        if rng.random() < 0.5:
            A[:, 0] = 0.0
        B = A + 10.0 ** rng.uniform(-8, 0) * rng.standard_normal((k, k))
        worst = max(worst, np.linalg.norm(absm(A) - absm(B)) / np.linalg.norm(A - B))
    assert worst <= math.sqrt(2.0) * (1 + 1e-9)


def test_cosine_intervals_contain_every_gram_within_the_halfwidths():
    rng = np.random.default_rng(5)
    for _ in range(50):
        M = rng.standard_normal((4, 5))
        Gc = M @ M.T
        H = np.full((4, 4), 10.0 ** rng.uniform(-6, -1))
        lo, hi, nlo, nhi = SG._interval_cos(Gc, H)
        for _ in range(20):
            D = rng.uniform(-1, 1, (4, 4)) * H
            Gp = Gc + 0.5 * (D + D.T)
            d = np.diag(Gp)
            if np.any(d <= 0):
                continue
            C = Gp / np.sqrt(np.outer(d, d))
            assert np.all(C >= lo - 1e-15) and np.all(C <= hi + 1e-15)
            assert np.all(np.sqrt(d) >= nlo - 1e-15) and np.all(np.sqrt(d) <= nhi + 1e-15)


def _claims(rep):
    return {c["id"]: c for c in rep["claims"]}


@pytest.mark.parametrize("name,counts,kw", CASES)
def test_imbalanced_geometry_verified(name, counts, kw):
    rep = check_general(_problem(name, counts, **kw), starts=1).to_dict()
    cl = _claims(rep)
    for cid in ("optimal-value", "minimiser-unique", "minority-geometry", "class-mean-cosines"):
        assert cl[cid]["verdict"] == "VERIFIED", (cid, cl[cid]["reason"])
    assert rep["geometry"]["geometry_enclosure"]["class_mean_cosines_halfwidth"] <= GEOMETRY_TOL


def test_false_geometry_statements_are_refuted():
    p = _problem("ce", [10, 10, 1, 1])
    rep = check_general(p, starts=1).to_dict()
    mino = rep["geometry"]["minority_intervals"]
    c = 0.5 * sum(mino["minority_classifier_cosine"])
    r = 0.5 * sum(mino["classifier_norm_ratio"])
    C = np.array(rep["geometry"]["class_mean_cosines"])
    ok = check_general(p, starts=1, geometry_expected={"minority_classifier_cosine": c + 2e-5,
                                                        "classifier_norm_ratio": r}).to_dict()
    assert _claims(ok)["minority-geometry"]["verdict"] == "VERIFIED"
    for exp in ({"minority_classifier_cosine": c + 3e-4}, {"classifier_norm_ratio": r * (1 - 1e-3)},
                {"minority_mean_cosine": -1.0 / 3.0}):
        bad = check_general(p, starts=1, geometry_expected=exp).to_dict()
        assert _claims(bad)["minority-geometry"]["verdict"] == "REFUTED", exp
    C2 = C.copy()
    C2[0, 2] = C2[2, 0] = C[0, 2] + 5e-4
    bad = check_general(p, starts=1, geometry_expected={"class_mean_cosines": C2}).to_dict()
    assert _claims(bad)["class-mean-cosines"]["verdict"] == "REFUTED"
    # the balanced simplex-ETF cosine -1/(K-1) for every pair is the wrong geometry here
    etf = np.full((4, 4), -1.0 / 3.0)
    np.fill_diagonal(etf, 1.0)
    bad = check_general(p, starts=1, geometry_expected={"class_mean_cosines": etf}).to_dict()
    assert _claims(bad)["class-mean-cosines"]["verdict"] == "REFUTED"


def test_rank_bound_at_d_equal_k_minus_1_and_below():
    # d = K - 1: the structural bound (1^T X* = 0) proves the relaxation tight and the minimiser unique
    rep = check_general(_problem("ce", [6, 6, 2, 1], d=3), starts=1).to_dict()
    cl = _claims(rep)
    assert cl["minimiser-unique"]["verdict"] == "VERIFIED", cl["minimiser-unique"]["reason"]
    assert cl["minimiser-unique"]["evidence"]["rank_bound_structural"] == 3
    # MSE: the free bias gives rank <= G - 1 = K - 1
    rep = check_general(_problem("mse", [5, 2, 1], d=2), starts=1).to_dict()
    assert _claims(rep)["minimiser-unique"]["verdict"] == "VERIFIED"


def _hog(stop):
    x = 0
    while not stop.is_set():
        for _ in range(100000):
            x += 1


class CpuHog:
    """Busy processes on every usable core while the block runs (stopped and joined at exit)."""

    def __init__(self, n: int | None = None):
        self.n = n or max(1, len(os.sched_getaffinity(0)))

    def __enter__(self):
        ctx = mp.get_context("fork")
        self.stop = ctx.Event()
        self.procs = [ctx.Process(target=_hog, args=(self.stop,), daemon=True) for _ in range(self.n)]
        for pr in self.procs:
            pr.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for pr in self.procs:
            pr.join(5)
            if pr.is_alive():
                pr.terminate()
                pr.join(5)
        return False


def test_same_verdict_and_value_under_a_cpu_hog():
    """Work budgets: the same instance gives bit-identical values and the same verdicts with both cores busy."""
    from theory import scl as SCLT

    counts = SCLT.longtail_counts(40, 30, 10.0)
    p = SG.classification(L.make_loss("ce", len(counts)), counts, len(counts), 1e-3, 1e-3)
    quiet = check_general(p, starts=1).to_dict()
    with CpuHog():
        loaded = check_general(p, starts=1).to_dict()
    assert quiet["solution"]["value"] == loaded["solution"]["value"]
    assert quiet["certificate"]["lower_bound"] == loaded["certificate"]["lower_bound"]
    assert [(c["id"], c["verdict"]) for c in quiet["claims"]] == [(c["id"], c["verdict"]) for c in loaded["claims"]]
    assert quiet["routes"]["factored"]["evaluations"] == loaded["routes"]["factored"]["evaluations"]


@pytest.mark.slow
def test_zipf_k10000_same_verdict_and_value_under_a_cpu_hog():
    """Issue 28's instance: Zipf over K = 10 000 classes (n_c = max(1, floor(20000/(c+1))), lw = lh = 2e-4), quiet
    and under a CPU hog: the work budgets give the same verdicts, value, bound and evaluation count (minutes)."""
    counts = [max(1, 20000 // (c + 1)) for c in range(10_000)]
    p = SG.classification(L.make_loss("ce", len(counts)), counts, len(counts), 2e-4, 2e-4)
    quiet = check_general(p, starts=1).to_dict()
    with CpuHog():
        loaded = check_general(p, starts=1).to_dict()
    assert quiet["solution"]["value"] == loaded["solution"]["value"]
    assert quiet["certificate"]["lower_bound"] == loaded["certificate"]["lower_bound"]
    assert [(c["id"], c["verdict"]) for c in quiet["claims"]] == [(c["id"], c["verdict"]) for c in loaded["claims"]]
    assert _claims(quiet)["optimal-value"]["verdict"] == "VERIFIED"
