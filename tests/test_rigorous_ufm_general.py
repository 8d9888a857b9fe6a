"""Rigorous (ball-arithmetic) certificates for `solve ufm` with any counts (docs/rigorous.md, "UFM, any loss,
imbalanced counts").

Independent references: the balanced closed form of docs/ufm_general.md ("Balanced closed form for label
smoothing"), evaluated here with mpmath at 50 digits and checked against the 8-digit reference values of the
spec; for imbalanced counts (no closed form) the float pipeline's own certificate (a separate computation in
float64 with its round-off allowance): the rigorous bracket must be consistent with it. With a bias penalty
(lb > 0): the convex reformulation P(X, b) = (1/N) sum_g n_g loss(x_g / sqrt(n_g) + b) + lam ||X||_* +
(lb/2)||b||^2 written directly in cvxpy here (K x K, solved by Clarabel with tight settings) and evaluated in
numpy at Clarabel's point.
"""

import numpy as np
import pytest

flint = pytest.importorskip("flint")
mpmath = pytest.importorskip("mpmath")

from proofs_check import rigorous as PR  # noqa: E402
from proofs_check.claims import ufm as C  # noqa: E402
from solvers import losses as L  # noqa: E402
from solvers import rigorous as R  # noqa: E402
from solvers.rigorous import linalg as RL  # noqa: E402
from solvers.rigorous import ufm_general as RG  # noqa: E402


def _dense_max(monkeypatch, value: int) -> None:
    """Move DENSE_MAX where the grouped recipe and its dense spectral bound read it."""
    for mod in (RG, RL):
        monkeypatch.setattr(mod, "DENSE_MAX", value)
from solvers import ufm_general as SG  # noqa: E402


def _closed_form_mp(K, n, lw, lh, q_y, w=1):
    """docs/ufm_general.md: a = (1 - q_y) + (K - 1) s / w, s = sqrt(n) lam; c* = log((1 - a)(K - 1)/a),
    f* = w [-log(1 - a) + a c*] (collapse phase, a < (K - 1)/K)."""
    with mpmath.workdps(50):
        lam = mpmath.sqrt(mpmath.mpf(lw) * mpmath.mpf(lh))
        s = mpmath.sqrt(n) * lam
        a = (1 - mpmath.mpf(q_y)) + (K - 1) * s / w
        assert a < mpmath.mpf(K - 1) / K
        c = mpmath.log((1 - a) * (K - 1) / a)
        return w * (-mpmath.log(1 - a) + a * c)


def _report(loss, counts, d, lw, lh, claimed=None, lb=0.0):
    p = SG.classification(loss, list(counts), d, lw, lh, lb)
    return C.check_general(p, starts=1, claimed_value=claimed).to_dict()


def _claim(out, cid="optimal-value"):
    return next(c for c in out["claims"] if c["id"] == cid)


@pytest.mark.parametrize("name,eps,lw,lh,ref", [
    ("ce", 0.0, 5e-3, 1e-2, 0.19781481),   # spec: balanced CE (4, 3, 4, 5e-3, 1e-2)
    ("ls", 0.1, 5e-3, 5e-3, 0.43817131),   # spec: label smoothing, PyTorch convention, eps = 0.1
])
def test_balanced_reference_values_inside_the_rigorous_bracket(name, eps, lw, lh, ref):
    K, n = 4, 3
    q_y = 1.0 - eps + eps / K
    f = _closed_form_mp(K, n, lw, lh, q_y)
    assert abs(f - mpmath.mpf(ref)) < 5e-9  # the transcription of the closed form matches the spec
    out = PR.apply(_report(L.make_loss(name, K, smoothing=eps), [n] * K, 4, lw, lh))
    rig = out["certificate"]["rigorous"]
    assert rig["lower"] is not None and rig["upper"] is not None, rig
    with mpmath.workdps(50):
        assert mpmath.mpf(rig["lower"][0]) <= f <= mpmath.mpf(rig["upper"][1])
        assert mpmath.mpf(rig["upper"][1]) - mpmath.mpf(rig["lower"][0]) < 1e-9 * f


IMBALANCED = [
    ("ce", L.make_loss("ce", 4), (6, 6, 2, 1)),
    ("ls-others", L.make_loss("ls", 5, smoothing=0.1, convention="others"), (5, 5, 3, 3, 1)),
    ("weighted-ce", L.make_loss("weighted-ce", 4, weights=[1.0, 1.0, 2.0, 3.0]), (6, 6, 2, 1)),
    ("mse", L.make_loss("mse", 4), (6, 6, 2, 1)),
    ("ce-distinct-counts", L.make_loss("ce", 5), (5, 4, 3, 2, 1)),   # no exchangeable classes: K x K route
    ("mse-distinct-counts", L.make_loss("mse", 5), (7, 4, 3, 2, 1)),
]


@pytest.mark.parametrize("tag,loss,counts", IMBALANCED, ids=[t[0] for t in IMBALANCED])
def test_imbalanced_bracket_is_consistent_with_the_float_certificate(tag, loss, counts):
    rep = _report(loss, counts, 8, 5e-3, 5e-3)
    float_lower, float_upper = rep["certificate"]["lower_bound"], rep["certificate"]["upper"]
    out = PR.apply(rep)
    rig = out["certificate"]["rigorous"]
    assert rig["lower"] is not None and rig["upper"] is not None, rig
    lo, up = rig["lower"][0], rig["upper"][1]
    assert lo <= float_upper                      # a proven lower bound is below a feasible value
    assert lo >= float_lower - 1e-9 * abs(float_upper)
    assert up >= float_lower                      # a feasible value is above the float proven bound
    assert up - lo <= 1e-9 * abs(float_upper)
    c = _claim(out)
    assert c["verdict"] == "VERIFIED" and c["rigorous"] is True
    # the report is rigorous only when it is VERIFIED and every statement judged in balls is proven (the
    # statements about the minimiser of imbalanced counts have no ball recipe: judged, not proven)
    judged = [x for x in out["claims"] if x["id"] == "optimal-value" or "rigorous_geometry" in x.get("evidence", {})]
    assert out["rigorous"] is (out["verdict"] == "VERIFIED" and all(x["rigorous"] for x in judged))


@pytest.mark.parametrize("factor", [1 + 1e-6, 1 - 1e-6])
def test_false_claimed_value_is_refuted(factor):
    loss, counts = L.make_loss("ce", 4), (6, 6, 2, 1)
    v = _report(loss, counts, 8, 5e-3, 5e-3)["certificate"]["upper"]
    out = PR.apply(_report(loss, counts, 8, 5e-3, 5e-3, claimed=v * factor))
    c = _claim(out)
    assert c["verdict"] == "REFUTED", c
    assert out["verdict"] == "REFUTED"


def test_small_dimension_keeps_only_the_lower_bound():
    out = PR.apply(_report(L.make_loss("ce", 4), (6, 6, 2, 1), 1, 5e-3, 5e-3))
    rig = out["certificate"]["rigorous"]
    assert rig["lower"] is not None and rig["upper"] is None
    assert "upper_note" in rig["details"]


def _setup():
    p = SG.classification(L.make_loss("ce", 4), [6, 6, 2, 1], 8, 5e-3, 5e-3)
    layout, pt = PR.ufm_general_candidate(p)
    Zs = SG.slot_logits(p, pt, layout)
    _, Gs = p.loss.value_grad_slots(Zs, layout)
    # a dyadic dual point whose columns sum to exactly 0 (own slot := -sum of the others with multiplicity)
    D = np.round(Gs * 2.0 ** 30) / 2.0 ** 30
    m = layout.m
    D[m] = -(layout.mult[:m] * D[:m]).sum(axis=0)
    return p, layout, Zs, D


def _bound(p, layout, Zs, **kw):
    return R.ufm_general_grouped(p.loss, p.counts, p.lw, p.lh, p.lb, layout, Zs, **kw)


def test_given_dual_point_is_accepted_and_perturbations_are_rejected():
    p, layout, Zs, D = _setup()
    ok = _bound(p, layout, Zs, dual=D)           # control: the exact dyadic point is feasible after projection
    ref = _bound(p, layout, Zs)
    assert abs(ok.lower_bound - ref.lower_bound) < 1e-6   # the rounded point is nearly as tight
    bad = D.copy()
    bad[1, 0] += 2.0 ** -30                       # a column no longer sums to 0: off the simplex
    with pytest.raises(R.NotCertified):
        _bound(p, layout, Zs, dual=bad)
    with pytest.raises(R.NotCertified):           # bias constraint not exact and no projection
        _bound(p, layout, Zs, dual=D, project=False)
    with pytest.raises(R.NotCertified):           # forced scale t = 1 with ||A||_2 ~ 10 lam
        _bound(p, layout, Zs, dual=10 * D, scale=1.0)
    neg = D.copy()
    m = layout.m
    neg[1, 0] -= 0.5                              # off-label entry -0.5 (q = 0 there): x < 0 off the simplex
    neg[m, 0] += 0.5 * layout.mult[1, 0]
    with pytest.raises(R.NotCertified):
        _bound(p, layout, Zs, dual=neg)


def test_unsupported_inputs_keep_the_float_verdicts():
    rep = _report(L.make_loss("ce", 4), (6, 6, 2, 1), 8, 5e-3, 5e-3)
    rep["instance"] = dict(rep["instance"], counts={"distinct": 3, "min": 1, "max": 6})
    out = PR.apply(rep)
    assert out["certificate"]["rigorous"]["status"] == "unsupported"
    assert out["rigorous"] is False and out["verdict"] == rep["verdict"]


# ---------------------------------------------------------------------------------------------------
# Bias penalty lb > 0 (docs/rigorous.md "UFM, any loss, imbalanced counts"): independent reference in cvxpy
# ---------------------------------------------------------------------------------------------------

#: Accuracy allowed to the cvxpy reference (Clarabel, tol_gap 1e-12: measured within 2e-14 absolute of the
#: rigorous upper end on these instances); only its upper side (the reference is a feasible value) is used.
REF_RTOL = 1e-9
#: Width of the rigorous bracket required (measured 4e-11 .. 9e-10 relative on these instances).
WIDTH_RTOL = 1e-8


def _cvx_reference(kind, counts, lw, lh, lb, eps=0.0):
    """P(X, b) minimised over the K x K matrix X and the bias b, written from the definitions (not from the
    code under test): CE with torch label smoothing q = (1 - eps) e_y + eps/K, or MSE (1/2)||z - e_y||^2.
    Returns the objective evaluated in numpy at Clarabel's point (a feasible value: >= the optimum)."""
    cp = pytest.importorskip("cvxpy")
    from solvers.common import solve_conic

    K = len(counts)
    n = np.asarray(counts, dtype=float)
    N, lam = float(n.sum()), float(np.sqrt(lw * lh))
    X, b = cp.Variable((K, K)), cp.Variable(K)
    Dm = np.diag(1.0 / np.sqrt(n))
    Z = X @ Dm + cp.reshape(b, (K, 1), order="F") @ np.ones((1, K))
    if kind == "ce":
        Q = (eps / K) * np.ones((K, K)) + (1.0 - eps) * np.eye(K)
        per = cp.log_sum_exp(Z, axis=0) - cp.sum(cp.multiply(Q, Z), axis=0)
    else:
        per = 0.5 * cp.sum(cp.square(Z - np.eye(K)), axis=0)
    prob = cp.Problem(cp.Minimize((n @ per) / N + lam * cp.normNuc(X) + lb / 2 * cp.sum_squares(b)))
    info = solve_conic(prob, solver="CLARABEL")
    assert X.value is not None, info
    Xv, bv = np.asarray(X.value), np.asarray(b.value)
    Zv = Xv @ Dm + bv[:, None]
    if kind == "ce":
        mx = Zv.max(axis=0)
        lse = mx + np.log(np.exp(Zv - mx).sum(axis=0))
        perv = lse - (Q * Zv).sum(axis=0)
    else:
        perv = 0.5 * ((Zv - np.eye(K)) ** 2).sum(axis=0)
    return float(n @ perv / N + lam * np.linalg.svd(Xv, compute_uv=False).sum() + lb / 2 * bv @ bv)


PENALISED = [(kind, counts, lb, 0.0) for kind, counts in (("ce", (3, 3, 3, 3)), ("ce", (6, 6, 2, 1)),
                                                            ("mse", (6, 6, 2, 1)))
             for lb in (1e-3, 1e-1, 1.0)]
PENALISED += [("ls", (6, 6, 2, 1), 1e-1, 0.1),            # label smoothing (torch convention)
              ("ce", (5, 4, 3, 2, 1), 1e-1, 0.0),         # all counts distinct: K singleton groups
              ("mse", (7, 7, 7, 1), 1.0, 0.0)]


@pytest.mark.parametrize("kind,counts,lb,eps", PENALISED,
                         ids=[f"{k}-{'-'.join(map(str, c))}-lb{lb:g}" for k, c, lb, _ in PENALISED])
def test_bias_penalty_bracket_contains_the_cvxpy_optimum(kind, counts, lb, eps):
    lw = lh = 5e-3
    loss = L.make_loss(kind, len(counts), smoothing=eps) if eps else L.make_loss(kind, len(counts))
    if eps:
        assert loss.q_true == 1.0 - eps + eps / len(counts)   # the reference's convention is the loss's
    out = PR.apply(_report(loss, counts, 8, lw, lh, lb=lb))
    rig = out["certificate"]["rigorous"]
    assert rig["lower"] is not None and rig["upper"] is not None, rig
    lo, up = rig["lower"][0], rig["upper"][1]
    ref = _cvx_reference("mse" if kind == "mse" else "ce", counts, lw, lh, lb, eps)
    assert lo <= ref + 1e-15 * abs(ref)                   # the proven lower bound is below a feasible value
    assert ref <= up + REF_RTOL * abs(ref)                # the tight reference does not beat the upper end
    assert up - lo <= WIDTH_RTOL * abs(ref)
    det = rig["details"]
    assert det["lb"] == lb and det["variant"] in ("penalty", "projected")
    assert det["variants"][det["variant"]]["lower"] == max(v["lower"] for v in det["variants"].values())
    c = _claim(out)
    assert c["verdict"] == "VERIFIED" and c["rigorous"] is True


def test_bias_penalty_reference_discriminates_a_missing_penalty_term():
    """Control: the feasible value without (lb/2)||b||^2, or the penalty variant without its dual term, is off
    the reference by far more than the tolerances above (so the containment test can fail)."""
    lw = lh = 5e-3
    lb = 1e-1
    p = SG.classification(L.make_loss("ce", 4), [6, 6, 2, 1], 8, lw, lh, lb)
    layout, pt = PR.ufm_general_candidate(p)
    ref = _cvx_reference("ce", (6, 6, 2, 1), lw, lh, lb)
    up_ok, _ = R.ufm_general_feasible(p.loss, p.counts, lw, lh, layout, pt.A, pt.beta, pt.b, lb=lb)
    up_bad, _ = R.ufm_general_feasible(p.loss, p.counts, lw, lh, layout, pt.A, pt.beta, pt.b)
    assert ref <= R.upper_float(up_ok) + REF_RTOL * abs(ref)
    assert R.upper_float(up_bad) < ref - 1e3 * REF_RTOL * abs(ref)
    Zs = SG.slot_logits(p, pt, layout)
    pen = R.ufm_general_grouped(p.loss, p.counts, lw, lh, lb, layout, Zs, variant="penalty")
    assert pen.lower_bound <= ref
    assert pen.lower_bound + pen.details["bias_penalty_term"] > ref + 1e3 * REF_RTOL * abs(ref)
    proj = R.ufm_general_grouped(p.loss, p.counts, lw, lh, lb, layout, Zs, variant="projected")
    assert proj.lower_bound <= ref and proj.details["variant"] == "projected"


@pytest.mark.parametrize("factor", [1 + 1e-6, 1 - 1e-6])
def test_bias_penalty_false_claimed_value_is_refuted(factor):
    loss, counts, lb = L.make_loss("ce", 4), (6, 6, 2, 1), 1e-1
    ref = _cvx_reference("ce", counts, 5e-3, 5e-3, lb)
    out = PR.apply(_report(loss, counts, 8, 5e-3, 5e-3, claimed=ref * factor, lb=lb))
    c = _claim(out)
    assert c["verdict"] == "REFUTED", c
    assert out["verdict"] == "REFUTED"
    control = PR.apply(_report(loss, counts, 8, 5e-3, 5e-3, claimed=ref, lb=lb))
    assert _claim(control)["verdict"] == "VERIFIED" and _claim(control)["rigorous"] is True


def test_bias_penalty_cli_json_rigorous():
    import json
    import subprocess
    import sys

    ref = _cvx_reference("ce", (6, 6, 2, 1), 5e-3, 5e-3, 0.1)
    cmd = [sys.executable, "-m", "proofs_check", "solve", "ufm", "--counts", "6,6,2,1", "-d", "8", "--lambda-w",
           "5e-3", "--lambda-h", "5e-3", "--lambda-b", "0.1", "--starts", "1", "--rigorous", "--json",
           "--claim-value", repr(ref * (1 + 1e-6))]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    out = json.loads(res.stdout)
    rig = out["certificate"]["rigorous"]
    assert rig["lower"][0] <= ref <= rig["upper"][1] + REF_RTOL * ref
    assert _claim(out)["verdict"] == "REFUTED"


def test_bias_penalty_dual_points_are_checked():
    p0, layout, Zs, D = _setup()
    p = SG.classification(p0.loss, list(p0.counts), 8, p0.lw, p0.lh, 0.1)
    ok = _bound(p, layout, Zs, dual=D)              # control: accepted (both variants)
    assert set(ok.details["variants"]) == {"penalty", "projected"}
    with pytest.raises(R.NotCertified):             # forced scale t = 1 with ||A||_2 ~ 10 lam: both variants fail
        _bound(p, layout, Zs, dual=10 * D, scale=1.0)
    with pytest.raises(R.NotCertified):
        _bound(p, layout, Zs, dual=10 * D, scale=1.0, variant="penalty")
    bad = D.copy()
    bad[1, 0] += 2.0 ** -30                         # a column no longer sums to 0: off the simplex
    with pytest.raises(R.NotCertified):
        _bound(p, layout, Zs, dual=bad)
    # the penalty variant needs no bias constraint: accepted with project=False, where lb = 0 rejects it
    free = _bound(p, layout, Zs, dual=D, project=False)
    assert free.details["variant"] == "penalty" and "variants" not in free.details
    with pytest.raises(R.NotCertified):
        _bound(p0, layout, Zs, dual=D, project=False)
    with pytest.raises(R.NotCertified):             # no penalty variant without a penalty
        _bound(p0, layout, Zs, variant="penalty")


# ---------------------------------------------------------------------------------------------------
# More than DENSE_MAX = 120 groups: the spectral norm by verified floating point (solvers/rigorous/linalg.py,
# docs/rigorous.md "Large m: verified floating point"). The fast tests force that path at small m
# (DENSE_MAX monkeypatched to 0) and compare it with the LDL^T path in balls (an independent proof) and with the
# cvxpy reference; at m = 130 the two proofs are compared on a dense dual point; the slow test runs K = 200 end to
# end through the CLI.
# ---------------------------------------------------------------------------------------------------

#: Agreement required between the two spectral proofs: the LDL^T bound is within ~1e-12 of the true norm (its
#: first step is 1e-13 above the float estimate), the verified floating-point one within ~(m + 4)^2 u ~ 1e-14 at
#: these sizes; 1e-10 leaves margin and still catches an error in either.
SPECTRAL_AGREE_RTOL = 1e-10


@pytest.mark.parametrize("kind,counts", [("ce", (5, 4, 3, 2, 1)), ("mse", (6, 6, 2, 1)), ("ce", (7, 7, 7, 1))])
def test_verified_float_spectral_path_agrees_with_ldl(monkeypatch, kind, counts):
    loss = L.make_loss(kind, len(counts))
    p = SG.classification(loss, list(counts), 8, 5e-3, 5e-3)
    layout, pt = PR.ufm_general_candidate(p)
    Zs = SG.slot_logits(p, pt, layout)
    ldl = _bound(p, layout, Zs)
    assert ldl.details["spectral_method"] == "LDL^T in balls"
    _dense_max(monkeypatch, 0)
    ver = _bound(p, layout, Zs)
    assert ver.details["spectral_method"].startswith("verified Cholesky")
    s_l, s_v = ldl.details["spectral_norm_bound"], ver.details["spectral_norm_bound"]
    assert s_v >= s_l * (1 - SPECTRAL_AGREE_RTOL)        # both are upper bounds of the same norm
    assert s_v <= s_l * (1 + SPECTRAL_AGREE_RTOL)
    assert abs(ver.lower_bound - ldl.lower_bound) <= SPECTRAL_AGREE_RTOL * abs(ldl.lower_bound)


def test_verified_float_spectral_path_rejects_a_scale_too_large(monkeypatch):
    """Dual point 10 D (||A||_2 ~ 10 lam): the largest admissible t is lam / sigma, with sigma from the LDL^T proof
    (within ~1e-12 of the true norm). A forced t 1e-8 above it must be rejected on the verified path, 1e-8 below
    accepted."""
    p, layout, Zs, D = _setup()
    ref = _bound(p, layout, Zs, dual=10 * D)
    t_max = ref.details["lam"] / ref.details["spectral_norm_bound"]
    assert 0.01 < t_max < 0.5
    _dense_max(monkeypatch, 0)
    ok = _bound(p, layout, Zs, dual=10 * D, scale=t_max * (1 - 1e-8))
    assert ok.details["spectral_method"].startswith("verified Cholesky")
    with pytest.raises(R.NotCertified):
        _bound(p, layout, Zs, dual=10 * D, scale=t_max * (1 + 1e-8))


@pytest.mark.parametrize("factor", [None, 1 + 1e-6, 1 - 1e-6])
def test_verified_float_path_end_to_end_small(monkeypatch, factor):
    """The whole recipe (candidate, verified spectral norm, arb_mat product in the feasible value) with DENSE_MAX
    forced to 0, against the cvxpy optimum: the bracket contains it; a claim off by 1e-6 relative is REFUTED."""
    counts = (5, 4, 3, 2, 1)
    ref = _cvx_reference("ce", counts, 5e-3, 5e-3, 0.0)
    _dense_max(monkeypatch, 0)
    claimed = None if factor is None else ref * factor
    out = PR.apply(_report(L.make_loss("ce", len(counts)), counts, 8, 5e-3, 5e-3, claimed=claimed))
    rig = out["certificate"]["rigorous"]
    assert rig["details"]["spectral_method"].startswith("verified Cholesky")
    lo, up = rig["lower"][0], rig["upper"][1]
    assert lo <= ref + 1e-15 * abs(ref)
    assert ref <= up + REF_RTOL * abs(ref)
    assert up - lo <= WIDTH_RTOL * abs(ref)
    c = _claim(out)
    if factor is None:
        assert c["verdict"] == "VERIFIED" and c["rigorous"] is True
    else:
        assert c["verdict"] == "REFUTED", c


def _entropy_optimum_mp(counts):
    """CE-UFM with lam above ||grad at X = 0||_2: the optimum is X = 0 with softmax(b) = n / N, value
    -sum_c (n_c / N) log(n_c / N) (mpmath, 50 digits)."""
    with mpmath.workdps(50):
        N = sum(counts)
        return -sum(mpmath.mpf(c) / N * mpmath.log(mpmath.mpf(c) / N) for c in counts)


def _zero_is_optimal_margin(counts, lam):
    """||G||_2 / lam for the gradient at (X = 0, b = log(n / N)): column c = sqrt(n_c) (n / N - e_c) / N. X = 0 is
    optimal when < 1 (checked with a wide margin, so float64 suffices)."""
    n = np.asarray(counts, dtype=float)
    N = n.sum()
    G = (n[:, None] / N - np.eye(len(n))) * np.sqrt(n)[None, :] / N
    return float(np.linalg.svd(G, compute_uv=False)[0]) / lam


@pytest.mark.slow
def test_k200_distinct_counts_cli_rigorous():
    """`solve ufm --counts 1..200 --dim 200 --lambda-w 1e-3 --lambda-h 1e-3 --rigorous --json` (200 singleton
    groups: the verified floating-point path): the bracket contains the 50-digit optimum, is no wider than 1e-8
    relative, and a claim 1e-6 above it is REFUTED; the exact judge accepts the true value with that bracket."""
    import json
    import subprocess
    import sys

    counts = list(range(1, 201))
    assert _zero_is_optimal_margin(counts, 1e-3) < 0.8
    ref = _entropy_optimum_mp(counts)
    cmd = [sys.executable, "-m", "proofs_check", "solve", "ufm", "--loss", "ce", "--counts",
           ",".join(map(str, counts)), "--dim", "200", "--lambda-w", "1e-3", "--lambda-h", "1e-3", "--starts", "1",
           "--rigorous", "--json", "--claim-value", repr(float(ref) * (1 + 1e-6))]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    out = json.loads(res.stdout)
    rig = out["certificate"]["rigorous"]
    assert rig["details"]["groups"] == 200
    assert rig["details"]["spectral_method"].startswith("verified Cholesky")
    lo, up = rig["lower"][0], rig["upper"][1]
    assert mpmath.mpf(lo) <= ref <= mpmath.mpf(up)
    assert up - lo <= 1e-8 * float(ref)
    c = _claim(out)
    assert c["verdict"] == "REFUTED", c
    tol = c["evidence"]["tolerance"]
    from proofs_check.statements import ExactBracket, ValueEquals

    assert ValueEquals(float(ref), tol).judge(ExactBracket(lo, up))[0].name == "VERIFIED"


def test_m130_verified_path_agrees_with_ldl_in_balls(monkeypatch):
    """m = 130 singleton groups (above DENSE_MAX: the verified floating-point path) at a dense dual point (the
    gradient at X = 0, b = log(n / N), which is not optimal at lam = 1e-4: ||G||_2 ~ 13 lam; no float solve
    needed). Reference: the LDL^T proof in balls at 256 bits on the same ball matrix (DENSE_MAX raised to 200 for
    it). The two spectral bounds agree to 1e-10 and the verified path rejects a forced t 1e-8 above lam / sigma,
    accepts 1e-8 below."""
    K = 130
    counts = np.arange(1, K + 1)
    p = SG.classification(L.make_loss("ce", K), list(counts), K, 1e-4, 1e-4)
    layout = L.SlotLayout(np.arange(K))
    pt = SG.GroupedPoint(np.zeros((K, K)), np.zeros(K), np.log(counts / counts.sum()))
    Zs = SG.slot_logits(p, pt, layout)
    ver = _bound(p, layout, Zs)
    assert ver.details["spectral_method"].startswith("verified Cholesky")
    _dense_max(monkeypatch, 200)
    ldl = _bound(p, layout, Zs)
    assert ldl.details["spectral_method"] == "LDL^T in balls"
    s_l, s_v = ldl.details["spectral_norm_bound"], ver.details["spectral_norm_bound"]
    assert s_l * (1 - SPECTRAL_AGREE_RTOL) <= s_v <= s_l * (1 + SPECTRAL_AGREE_RTOL)
    assert abs(ver.lower_bound - ldl.lower_bound) <= 1e-9 * abs(ldl.lower_bound)
    _dense_max(monkeypatch, 120)
    t_max = ldl.details["lam"] / s_l
    assert t_max < 0.5
    ok = _bound(p, layout, Zs, scale=t_max * (1 - 1e-8))
    assert ok.details["spectral_method"].startswith("verified Cholesky")
    with pytest.raises(R.NotCertified):
        _bound(p, layout, Zs, scale=t_max * (1 + 1e-8))
