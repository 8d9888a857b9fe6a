"""`solve ufm` (any loss) at the phase threshold rho0 = 1, where float64 cannot tell a vanishing simplex ETF from
Z = 0: the side is decided in exact rational arithmetic of the doubles (solvers.ufm_general.exact_phase;
docs/ufm_general.md, "Exact phase at the threshold").

Independent evidence: the UFM objective evaluated in mpmath at 60 digits from its definition (sample logits, the
targets as the exact rationals of eps, the nuclear norm by mpmath's SVD) at Z = 0 and at points near it; the float
gradient at Z = 0 (the loss's own value_grad, numpy's spectral norm) against the exact ratio."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from proofs_check.claims import ufm_general as CG
from proofs_check.cli import main
from proofs_check.core import Verdict
from solvers import losses as L
from solvers import ufm_general as SG

mpmath = pytest.importorskip("mpmath")

# (loss, options, K, n, lw, lh): rho0^2 = (w kappa)^2 / (K^2 n lw lh) = 1 exactly with dyadic doubles
AT_THRESHOLD = [
    ("ce", {}, 2, 1, 0.5, 0.5),
    ("ce", {}, 4, 4, 0.0625, 0.25),
    ("mse", {}, 2, 1, 0.5, 0.5),
    ("mse", {}, 4, 1, 0.25, 0.25),
    ("ls", {"smoothing": 0.5}, 2, 1, 0.25, 0.25),  # torch: q = (3/4, 1/4), kappa = 1/2
    ("ls", {"smoothing": 0.5}, 4, 1, 0.125, 0.125),  # torch: q_other = 1/8, kappa = 1/2
    ("ls", {"smoothing": 0.25, "convention": "others"}, 2, 1, 0.25, 0.25),  # q = (3/4, 1/4)
    ("weighted-ce", {"weights": [0.5, 0.5]}, 2, 1, 0.25, 0.25),  # w kappa = 1/2
    ("weighted-ce", {"weights": [2.0, 2.0, 2.0, 2.0]}, 4, 1, 0.25, 1.0),  # (w kappa)^2 = 4 = K^2 n lw lh
]


def _targets(name, opts, K):
    """(q_true, q_other, w) as exact rationals of the doubles (torch: q_other = eps/K; others: eps/(K - 1))."""
    eps = Fraction(opts.get("smoothing", 0.0))
    q_o = eps / K if opts.get("convention", "torch") == "torch" else eps / (K - 1)
    w = Fraction(opts.get("weights", [1.0])[0])
    return 1 - (K - 1) * q_o, q_o, w


def _problem(name, opts, K, n, lw, lh, d=None, lb=0.0):
    return SG.classification(L.make_loss(name, K, **opts), [n] * K, d or max(K - 1, 1), lw, lh, lb)


def _cli(capsys, name, opts, K, n, lw, lh, *extra):
    args = ["solve", "ufm", "--loss", name, "--classes", str(K), "--per-class", str(n), "-d", str(K - 1),
            "--lambda-w", repr(lw), "--lambda-h", repr(lh)]
    if "smoothing" in opts:
        args += ["--smoothing", repr(opts["smoothing"])]
    if "convention" in opts:
        args += ["--smoothing-convention", opts["convention"]]
    if "weights" in opts:
        args += ["--class-weights", ",".join(repr(w) for w in opts["weights"])]
    rc = main([*args, *extra, "--json"])
    out = json.loads(capsys.readouterr().out)
    return rc, out, {c["id"]: c for c in out["claims"]}


def test_the_instances_are_exactly_at_the_threshold():
    for name, opts, K, n, lw, lh in AT_THRESHOLD:
        q_t, q_o, w = _targets(name, opts, K)
        assert (w * (q_t - q_o)) ** 2 == Fraction(K * K * n) * Fraction(lw) * Fraction(lh), (name, K)


# ---------------------------------------------------------------------------------------------------
# the objective in mpmath, from its definition
# ---------------------------------------------------------------------------------------------------

def _objective(name, opts, K, n, lw, lh, U, b):
    """(1/N) sum_i loss(u_i + b; y_i) + sqrt(lw lh) ||U||_* at 60 digits; U: K x N (mpmath matrix, samples in
    class order), b: K list. Softmax losses: w (lse(z) - <q_y, z>); MSE: (1/2)||z - e_y||^2."""
    q_t, q_o, w = _targets(name, opts, K)
    N = K * n
    tot = mpmath.mpf(0)
    for i in range(N):
        y = i // n
        z = [U[c, i] + b[c] for c in range(K)]
        if name == "mse":
            tot += sum((z[c] - (1 if c == y else 0)) ** 2 for c in range(K)) / 2
        else:
            mx = max(z)
            lse = mx + mpmath.log(sum(mpmath.exp(zc - mx) for zc in z))
            q = [mpmath.mpf(q_t.numerator) / q_t.denominator if c == y else mpmath.mpf(q_o.numerator) / q_o.denominator
                 for c in range(K)]
            tot += mpmath.mpf(w.numerator) / w.denominator * (lse - sum(q[c] * z[c] for c in range(K)))
    nuc = sum(mpmath.svd_r(U, compute_uv=False)) if any(U[c, i] != 0 for c in range(K) for i in range(N)) else 0
    return tot / N + mpmath.sqrt(mpmath.mpf(lw) * mpmath.mpf(lh)) * nuc


def _etf_direction(K, n):
    """Sample logits of the simplex ETF direction: column i = e_{y_i} - 1/K (the collapse phase's shape)."""
    return mpmath.matrix([[(1 if c == i // n else 0) - mpmath.mpf(1) / K for i in range(K * n)] for c in range(K)])


@pytest.mark.parametrize("name,opts,K,n,lw,lh", AT_THRESHOLD[:1] + AT_THRESHOLD[2:3] + AT_THRESHOLD[4:5]
                         + AT_THRESHOLD[6:8])
def test_zero_is_below_every_nearby_point_at_60_digits(name, opts, K, n, lw, lh):
    """At rho0 = 1 exactly, F(t D, b0 + t d) > F(0, b0) for the ETF direction and random directions, at steps
    down to 1e-20 (first-order terms vanish along the ETF direction; the second-order term decides)."""
    rng = np.random.default_rng(7)
    b0 = [mpmath.mpf(1) / K if name == "mse" else mpmath.mpf(0)] * K
    with mpmath.workdps(60):
        f0 = _objective(name, opts, K, n, lw, lh, mpmath.zeros(K, K * n), b0)
        dirs = [(_etf_direction(K, n), [0] * K)]
        for _ in range(3):
            D = rng.standard_normal((K, K * n))
            dirs.append((mpmath.matrix(D.tolist()), rng.standard_normal(K).tolist()))
        for D, d in dirs:
            for t in (mpmath.mpf("1e-2"), mpmath.mpf("1e-8"), mpmath.mpf("1e-20")):
                f = _objective(name, opts, K, n, lw, lh, t * D, [b0[c] + t * d[c] for c in range(K)])
                assert f > f0, (name, t, f - f0)


@pytest.mark.parametrize("name,opts,K,n,lw", [("ce", {}, 2, 1, 0.5), ("mse", {}, 2, 1, 0.5),
                                              ("ls", {"smoothing": 0.5}, 2, 1, 0.25)])
def test_one_double_below_a_point_near_zero_beats_zero_at_60_digits_and_nothing_is_verified(capsys, name, opts, K,
                                                                                             n, lw):
    """lh one double below the threshold: rho0 > 1 by ~1e-16, so a simplex ETF of scale ~1e-16 is the minimiser
    (F(t ETF) < F(0) at t = 1e-24, at 60 digits). Float64 cannot resolve it: no statement about the minimiser is
    VERIFIED, none REFUTED, and the exact evidence says collapse."""
    lh = float(np.nextafter(lw, 0.0))
    b0 = [mpmath.mpf(1) / K if name == "mse" else mpmath.mpf(0)] * K
    with mpmath.workdps(60):
        f0 = _objective(name, opts, K, n, lw, lh, mpmath.zeros(K, K * n), b0)
        f = _objective(name, opts, K, n, lw, lh, mpmath.mpf("1e-24") * _etf_direction(K, n), b0)
        assert f < f0
    rc, out, claims = _cli(capsys, name, opts, K, n, lw, lh)
    assert claims["optimal-value"]["verdict"] == "VERIFIED"
    u = claims["minimiser-unique"]
    assert u["verdict"] == "INCONCLUSIVE" and "> 1" in u["reason"]
    ex = u["evidence"]["exact_phase"]
    assert ex["phase"] == "collapse" and ex["zero_minimiser"] is False
    assert Fraction(ex["rho0_squared"]) > 1
    point = [c for c in out["claims"] if c["id"].startswith(("minimiser-unique", "geometry-"))]
    assert point and all(c["verdict"] == "INCONCLUSIVE" for c in point)


# ---------------------------------------------------------------------------------------------------
# the commands at the exact threshold
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,opts,K,n,lw,lh", AT_THRESHOLD)
def test_exactly_at_the_threshold_zero_is_verified_the_unique_minimiser(capsys, name, opts, K, n, lw, lh):
    rc, out, claims = _cli(capsys, name, opts, K, n, lw, lh)
    u = claims["minimiser-unique"]
    assert u["verdict"] == "VERIFIED" and u["reason"].startswith("exact phase") and "= 1 exactly" in u["reason"]
    ex = u["evidence"]["exact_phase"]
    assert ex["at_threshold"] is True and ex["rho0_squared"] == "1/1" and ex["matrix_checked"] is True
    assert claims["geometry-zero"]["verdict"] == "VERIFIED"
    assert rc == 0 and out["verdict"] == "VERIFIED"
    # the value at Z = 0 with b0, evaluated independently at 60 digits, is the certified optimum
    b0 = [mpmath.mpf(1) / K if name == "mse" else mpmath.mpf(0)] * K
    with mpmath.workdps(60):
        f0 = float(_objective(name, opts, K, n, lw, lh, mpmath.zeros(K, K * n), b0))
    cert = out["certificate"]
    assert cert["lower_bound"] - 1e-12 <= f0 <= cert["upper"] + 1e-12
    assert out["predicted"]["geometry"] == "zero" and out["predicted"]["value"] == pytest.approx(f0, rel=1e-14)


def test_the_sixth_just_above_is_the_zero_phase_in_every_softmax_loss(capsys):
    """lw = lh = the double after 1/6 (k = 3, n = 4): 36 lw lh > 1 exactly, so rho0 < 1 by ~2e-16."""
    lam = 0.16666666666666669
    assert 36 * Fraction(lam) ** 2 > 1
    for name, opts in (("ce", {}), ("weighted-ce", {"weights": [1.0, 1.0, 1.0]})):
        rc, out, claims = _cli(capsys, name, opts, 3, 4, lam, lam)
        ex = claims["minimiser-unique"]["evidence"]["exact_phase"]
        assert ex["phase"] == "zero" and 0 < ex["one_minus_rho0_squared"] < 1e-15
        assert claims["minimiser-unique"]["verdict"] == "VERIFIED" and claims["geometry-zero"]["verdict"] == "VERIFIED"


def test_exact_zero_where_the_float_closed_form_says_collapse():
    """MSE, K = 5, n = 2, lw = 0.05405405405405406, lh = 0.37: the float formula max(sqrt(n) - N lam, 0) is a
    margin > 0 (collapse), the rationals put rho0 < 1: the prediction becomes the zero phase and Z = 0 is VERIFIED
    the unique minimiser."""
    K, n, lw, lh = 5, 2, 0.05405405405405406, 0.37
    assert Fraction(K * K * n) * Fraction(lw) * Fraction(lh) > 1  # rho0^2 < 1
    p = _problem("mse", {}, K, n, lw, lh)
    assert p.loss.closed_form(K, n, p.lam)["trivial"] is False  # float64 falls on the collapse side
    s = SG.solve(p, starts=1)
    assert s.uniqueness["route"] == "phase-threshold" and s.uniqueness["closed_form_phase"] == "collapse"
    assert s.closed_form["trivial"] is True and s.closed_form["value"] == pytest.approx((K - 1) / (2 * K), rel=1e-15)
    assert s.geometry_how == SG.HOW_EXACT_PHASE
    rep = CG.check_general(p, starts=1, minority_threshold=None)
    by = {c.name: c for c in rep.claims}
    assert by["minimiser-unique"].verdict is Verdict.VERIFIED and by["geometry-zero"].verdict is Verdict.VERIFIED
    assert rep.predicted["geometry"] == "zero"


# ---------------------------------------------------------------------------------------------------
# false statements at the threshold are refuted with the certificate
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,opts,K,n,lw,lh", [AT_THRESHOLD[0], AT_THRESHOLD[2], AT_THRESHOLD[4], AT_THRESHOLD[7]])
def test_a_claimed_simplex_etf_at_the_exact_threshold_is_refuted(name, opts, K, n, lw, lh):
    rep = CG.check_general(_problem(name, opts, K, n, lw, lh), starts=1, minority_threshold=None,
                           expected_geometry="simplex-etf")
    by = {c.name: c for c in rep.claims}
    g = by["geometry-simplex-etf"]
    assert g.verdict is Verdict.REFUTED and "geometry is zero" in g.reason
    assert g.evidence["geometry_certificate"] == SG.HOW_EXACT_PHASE
    assert g.evidence["certificate_gap"] <= 1e-12
    assert by["minimiser-unique"].verdict is Verdict.VERIFIED


def test_a_false_value_at_the_exact_threshold_is_refuted():
    rep = CG.check_general(_problem("ce", {}, 2, 1, 0.5, 0.5), starts=1, minority_threshold=None,
                           claimed_value=math.log(2) * (1 - 1e-6))
    v = {c.name: c for c in rep.claims}["optimal-value"]
    assert v.verdict is Verdict.REFUTED


def test_collapse_side_claimed_zero_is_not_verified_and_claimed_etf_is_not_refuted():
    """One double below the threshold the minimiser is a simplex ETF of vanishing scale: neither the float
    prediction (zero) nor the truth (simplex ETF) is decided; neither is refuted."""
    p = _problem("ce", {}, 2, 1, 0.5, float(np.nextafter(0.5, 0.0)))
    for geo in (None, "simplex-etf"):
        rep = CG.check_general(p, starts=1, minority_threshold=None, expected_geometry=geo)
        pts = [c for c in rep.claims if c.name.startswith(("minimiser-unique", "geometry-"))]
        assert pts and all(c.verdict is Verdict.INCONCLUSIVE for c in pts)


# ---------------------------------------------------------------------------------------------------
# --rigorous: the ball layer agrees
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,opts,K,n,lw,lh", [AT_THRESHOLD[0], AT_THRESHOLD[2], AT_THRESHOLD[5], AT_THRESHOLD[7]])
def test_rigorous_proves_the_same_at_the_threshold(name, opts, K, n, lw, lh):
    pytest.importorskip("flint")
    from proofs_check import rigorous as PR
    from solvers import rigorous as R

    out = PR.apply(CG.check_general(_problem(name, opts, K, n, lw, lh), starts=1, minority_threshold=None))
    cl = {c["id"]: c for c in out["claims"]}
    for cid in ("optimal-value", "minimiser-unique", "geometry-zero"):
        assert cl[cid]["verdict"] == "VERIFIED" and cl[cid]["rigorous"] is True, (cid, cl[cid]["reason"])
    assert out["verdict"] == "VERIFIED" and out["rigorous"] is True
    g = cl["minimiser-unique"]["evidence"]["rigorous_geometry"]
    assert g["phase"] == "threshold" and g["delta_lower"] == 1.0
    u = R.ufm_balanced_uniqueness("mse" if name == "mse" else "ce", K, n, lw, lh, smoothing=opts.get("smoothing", 0.0),
                                  convention=opts.get("convention", "torch"), weight=opts.get("weights", [1.0])[0])
    assert u["phase"] == "threshold" and u["geometry"] == "zero"


def test_rigorous_one_double_below_keeps_the_float_verdicts_unproven():
    pytest.importorskip("flint")
    from proofs_check import rigorous as PR

    p = _problem("ce", {}, 2, 1, 0.5, float(np.nextafter(0.5, 0.0)))
    out = PR.apply(CG.check_general(p, starts=1, minority_threshold=None))
    point = [c for c in out["claims"] if c["id"].startswith(("minimiser-unique", "geometry-"))]
    assert len(point) == 2 and all(c["verdict"] == "INCONCLUSIVE" and c["rigorous"] is False for c in point)
    assert out["rigorous"] is False


def test_rigorous_cli_at_the_threshold(capsys):
    pytest.importorskip("flint")
    rc, out, claims = _cli(capsys, "ls", {"smoothing": 0.5}, 2, 1, 0.25, 0.25, "--rigorous")
    assert rc == 0 and out["verdict"] == "VERIFIED"
    assert all(c["rigorous"] is True for c in out["claims"])


# ---------------------------------------------------------------------------------------------------
# exact_phase: the sides of one double, its hypotheses, and the float gradient
# ---------------------------------------------------------------------------------------------------

def test_exact_phase_sides_of_one_double():
    def ph(lh):
        return SG.exact_phase(_problem("ce", {}, 2, 1, 0.5, lh))

    at, below, above = ph(0.5), ph(float(np.nextafter(0.5, 0.0))), ph(float(np.nextafter(0.5, 1.0)))
    assert (at["zero_minimiser"], at["at_threshold"], at["phase"]) == (True, True, "threshold")
    assert (below["zero_minimiser"], below["phase"]) == (False, "collapse")
    assert (above["zero_minimiser"], above["at_threshold"], above["phase"]) == (True, False, "zero")


def test_exact_phase_is_not_decided_outside_its_hypotheses():
    # a bias penalty (b0 and the closed form differ; the engine has no closed form there), imbalanced counts,
    # unequal weights, a loss without a ball form, groups other than one per class
    assert SG.exact_phase(_problem("ce", {}, 2, 1, 0.5, 0.5, lb=0.1)) is None
    assert SG.exact_phase(_problem("mse", {}, 2, 1, 0.5, 0.5, lb=0.1)) is None
    assert SG.exact_phase(SG.classification(L.make_loss("ce", 2), [1, 2], 1, 0.5, 0.5)) is None
    assert SG.exact_phase(_problem("weighted-ce", {"weights": [1.0, 2.0]}, 2, 1, 0.5, 0.5)) is None

    def vg(U, y):
        R = np.asarray(U, dtype=float) - np.eye(2)[:, y]
        return 0.5 * np.sum(R * R, axis=0), R

    user = L.UserLoss("user-mse", vg, K=2, infimum=0.0)
    assert SG.exact_phase(SG.classification(user, [1, 1], 1, 0.5, 0.5)) is None


def test_the_exact_check_of_the_gradient_runs_only_up_to_its_size():
    small = SG.exact_phase(_problem("ce", {}, SG.EXACT_PHASE_MATRIX_MAX_K, 1, 0.5, 0.5))
    big = SG.exact_phase(_problem("ce", {}, SG.EXACT_PHASE_MATRIX_MAX_K + 1, 1, 0.5, 0.5))
    assert small["matrix_checked"] is True and big["matrix_checked"] is False
    K = SG.EXACT_PHASE_MATRIX_MAX_K + 1
    assert Fraction(big["rho0_squared"]) == Fraction(1, K * K) / (Fraction(0.5) * Fraction(0.5))


@settings(max_examples=40, deadline=None)
@given(K=st.integers(2, 12), n=st.integers(1, 5), lw=st.floats(1e-3, 2.0), lh=st.floats(1e-3, 2.0),
       kind=st.sampled_from(["ce", "mse", "ls-torch", "ls-others", "weighted"]), eps=st.floats(0.0, 0.45),
       w=st.floats(0.1, 10.0))
def test_exact_ratio_matches_the_float_gradient_norm(K, n, lw, lh, kind, eps, w):
    """Independent of the rational formula: rho0 = ||grad L(0, b0)||_2 / lam from the loss's own float gradient
    at the sample logits U = b0 (numpy's spectral norm) equals sqrt of the exact rational to float accuracy."""
    name, opts = {"ce": ("ce", {}), "mse": ("mse", {}), "ls-torch": ("ls", {"smoothing": eps}),
                  "ls-others": ("ls", {"smoothing": eps, "convention": "others"}),
                  "weighted": ("weighted-ce", {"weights": [w] * K})}[kind]
    if name == "ls" and eps < L.SMOOTHING_MIN:
        opts = {**opts, "smoothing": 0.0}
    p = _problem(name, opts, K, n, lw, lh)
    ex = SG.exact_phase(p)
    r2 = Fraction(ex["rho0_squared"])
    N = K * n
    y = np.repeat(np.arange(K), n)
    U = np.full((K, N), 1.0 / K if name == "mse" else 0.0)
    _, Gr = p.loss.value_grad(U, y)
    rho0 = np.linalg.norm(Gr / N, 2) / math.sqrt(lw * lh)
    assert rho0 == pytest.approx(math.sqrt(float(r2)), rel=1e-12)
    assert abs(float(np.sum(Gr, axis=1).max())) <= 1e-12 * max(1.0, w)  # b0 is the optimal bias at Z = 0
    assert ex["zero_minimiser"] == (r2 <= 1)
