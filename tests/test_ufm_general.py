"""The general UFM engine (docs/ufm_general.md): any loss, any class counts, regression.

Reference values are independent of the code under test: the spec's values (independent convex and factored
solves), and sample-level cvxpy/Clarabel solves of the nuclear-norm program run once by hand (commands in
docs/ufm_general.md, "Reference values"); they agree with each other to ~1e-13.
"""

import json
import math

import numpy as np
import pytest

from proofs_check.claims.ufm import check_general, check_regression
from proofs_check.cli import main
from solvers import losses as L
from solvers import ufm_general as SG

REL = 1e-6  # the reproduction tolerance for values
IMB = [6, 6, 2, 1]

# (loss name, kwargs, counts, lw, lh, reference value, source)
REFERENCES = [
    ("ce", {}, [3] * 4, 5e-3, 1e-2, 0.19781481, "spec: balanced CE closed form"),
    ("ls", {"smoothing": 0.1}, [3] * 4, 5e-3, 5e-3, 0.43817131, "spec: label smoothing, torch convention"),
    ("ce", {}, [2] * 3, 0.01, 0.01, 0.14833175, "spec ufm.md"),
    ("ce", {}, [2] * 5, 1e-3, 1e-3, 0.04275647, "spec ufm.md"),
    ("ce", {}, [2] * 4, 0.2, 0.2, math.log(4), "spec ufm.md (trivial phase)"),
    ("mse", {}, [2] * 3, 0.01, 0.01, 0.02768427, "spec ufm.md"),
    ("mse", {}, [4] * 3, 0.05, 0.05, 0.17, "spec ufm.md"),
    ("ce", {}, IMB, 5e-3, 1e-2, 0.1913184754855772, "cvxpy sample-level"),
    ("mse", {}, IMB, 5e-3, 1e-2, 0.03548848015189614, "cvxpy sample-level"),
    ("ls", {"smoothing": 0.1, "convention": "others"}, IMB, 5e-3, 1e-2, 0.547026230273218, "cvxpy sample-level"),
    ("ls", {"smoothing": 0.1, "convention": "torch"}, IMB, 5e-3, 1e-2, 0.47032304944617903, "cvxpy sample-level"),
    ("weighted-ce", {"weights": [1, 1, 2, 3]}, IMB, 5e-3, 1e-2, 0.20362274203553576, "cvxpy sample-level"),
]


def _problem(name, kw, counts, lw, lh, d=None, lb=0.0):
    loss = L.make_loss(name, len(counts), **kw)
    return SG.classification(loss, counts, d or len(counts), lw, lh, lb)


@pytest.mark.parametrize("name,kw,counts,lw,lh,ref,src", REFERENCES)
def test_reference_values_certified(name, kw, counts, lw, lh, ref, src):
    rep = check_general(_problem(name, kw, counts, lw, lh), starts=1).to_dict()
    assert abs(rep["solution"]["value"] - ref) <= REL * ref, src
    assert abs(rep["certificate"]["lower_bound"] - ref) <= REL * ref, src
    val = next(c for c in rep["claims"] if c["id"] == "optimal-value")
    assert val["verdict"] == "VERIFIED", val["reason"]


def test_mse_bias_penalty_reference():
    # spec ufm.md: lb = 0.01 gives 0.0293344 for k = 3, n = 2, lw = lh = 0.01
    p = _problem("mse", {}, [2] * 3, 0.01, 0.01, lb=0.01)
    rep = check_general(p, starts=1).to_dict()
    assert abs(rep["solution"]["value"] - 0.0293344) <= 1e-6
    assert rep["verdict"] in ("VERIFIED", "INCONCLUSIVE")
    assert next(c for c in rep["claims"] if c["id"] == "optimal-value")["verdict"] == "VERIFIED"


@pytest.mark.parametrize("name,kw,counts,lw,lh,ref,src", [r for r in REFERENCES if r[2] == IMB])
def test_false_values_refuted(name, kw, counts, lw, lh, ref, src):
    for wrong in (ref * (1 + 1e-5), ref * (1 - 1e-5)):
        rep = check_general(_problem(name, kw, counts, lw, lh), starts=1, claimed_value=wrong).to_dict()
        assert rep["verdict"] == "REFUTED", (wrong, rep["reason"])


def test_ls_balanced_geometry_etf_verified_and_cosines():
    rep = check_general(_problem("ls", {"smoothing": 0.1}, [3] * 4, 5e-3, 5e-3), starts=1).to_dict()
    assert rep["verdict"] == "VERIFIED"
    C = np.array(rep["geometry"]["class_mean_cosines"])
    expected = np.full((4, 4), -1 / 3) + np.eye(4) * (4 / 3)  # simplex ETF cosines
    assert np.max(np.abs(C - expected)) <= 1e-4


def test_imbalanced_geometry_matches_independent_cvxpy():
    cp = pytest.importorskip("cvxpy")
    counts, lw, lh = IMB, 5e-3, 1e-2
    K = len(counts)
    y = np.repeat(np.arange(K), counts)
    N = y.size
    Z = cp.Variable((K, N))
    b = cp.Variable(K)
    U = Z + cp.reshape(b, (K, 1), order="F") @ np.ones((1, N))
    Y = np.zeros((K, N))
    Y[y, np.arange(N)] = 1
    obj = (cp.sum(cp.log_sum_exp(U, axis=0)) - cp.sum(cp.multiply(Y, U))) / N + math.sqrt(lw * lh) * cp.normNuc(Z)
    cp.Problem(cp.Minimize(obj)).solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    Zs = Z.value
    # class means of the balanced factorization: H^T H = sqrt(lw/lh) (Z^T Z)^{1/2}; means = per-class averages
    w, V = np.linalg.eigh(Zs.T @ Zs)
    S = (V * np.sqrt(np.clip(w, 0, None))) @ V.T * math.sqrt(lw / lh)
    E = np.zeros((K, N))
    E[y, np.arange(N)] = 1.0 / np.asarray(counts)[y]
    MG = E @ S @ E.T
    J = np.eye(K) - 1.0 / K
    MGc = J @ MG @ J
    nrm = np.sqrt(np.diag(MGc))
    C_ref = MGc / np.outer(nrm, nrm)
    rep = check_general(_problem("ce", {}, counts, lw, lh), starts=1).to_dict()
    C = np.array(rep["geometry"]["class_mean_cosines"])
    assert np.max(np.abs(C - C_ref)) <= 1e-4
    assert np.max(np.abs(np.array(rep["geometry"]["class_mean_norms"]) - nrm)) <= 1e-4 * nrm.max()
    # no closed form: the geometry certificate proves uniqueness and an enclosure, and the independent cvxpy
    # optimum's cosines lie inside the proven intervals (widened by cvxpy's own accuracy, ~1e-7 here)
    claims = {c["id"]: c for c in rep["claims"]}
    assert claims["minimiser-unique"]["verdict"] == "VERIFIED"
    assert claims["class-mean-cosines"]["verdict"] == "VERIFIED"
    hw = rep["geometry"]["geometry_enclosure"]["class_mean_cosines_halfwidth"]
    assert 0 < hw <= 1e-4
    assert np.max(np.abs(C - C_ref)) <= hw + 1e-6


def test_d_below_rank_not_tight_no_geometry():
    rep = check_general(_problem("ce", {}, [3] * 6, 1e-3, 1e-3, d=2), starts=1).to_dict()
    c = next(c for c in rep["claims"] if c["id"] == "relaxation-tight")
    assert c["verdict"] == "INCONCLUSIVE" and "not tight" in c["reason"]
    assert rep["predicted"]["value"] is None
    assert "class_mean_cosines" not in rep["geometry"]
    ev = c["evidence"]
    assert ev["relaxation_lower_bound"] < ev["best_point_value"]
    # the relaxation bound is the balanced closed form (d >= K - 1 value), a proven lower bound for d = 2
    cf = L.make_loss("ce", 6).closed_form(6, 3, 1e-3)["value"]
    assert abs(ev["relaxation_lower_bound"] - cf) <= 1e-6 * cf


def test_d_below_rank_false_value_refuted():
    # claiming the relaxation's value for d = 2 is false: the best point is above, but REFUTED needs a witness:
    # a claimed value BELOW the proven relaxation bound is refuted
    rep = check_general(_problem("ce", {}, [3] * 6, 1e-3, 1e-3, d=2), starts=1, claimed_value=0.01).to_dict()
    assert rep["verdict"] == "REFUTED"


# ---- regression ----------------------------------------------------------------------------------

YREG = np.array([[1.0, 0.5], [0.2, -1.0], [-0.7, 0.3], [1.5, 1.1], [-0.4, -0.6], [0.9, -0.2]])
REG_REFS = [(1e-2, 1e-2, 0.03441037256747004), (5e-2, 2e-2, 0.10471251904428237), (0.3, 0.3, 0.5367541745046033)]


@pytest.mark.parametrize("lw,lh,ref", REG_REFS)
def test_regression_reference(lw, lh, ref):
    rep = check_regression(YREG, 2, lw, lh).to_dict()
    assert abs(rep["predicted"]["value"] - ref) <= REL * ref
    assert rep["verdict"] == "VERIFIED", rep["reason"]
    bad = check_regression(YREG, 2, lw, lh, claimed_value=ref * (1 + 1e-5)).to_dict()
    assert bad["verdict"] == "REFUTED"


def test_regression_formula_against_spec():
    # the spec's value formula, written out here independently of solvers.ufm_general
    N = YREG.shape[0]
    lam = math.sqrt(1e-2 * 1e-2)
    s = np.linalg.svd((YREG - YREG.mean(0)).T, compute_uv=False)
    val = np.sum(np.minimum(s, N * lam) ** 2) / (2 * N) + lam * np.sum(np.maximum(s - N * lam, 0))
    assert abs(val - REG_REFS[0][2]) <= 1e-9


def test_regression_d_below_rank_not_applicable():
    """The closed form (d >= rank) is NOT_APPLICABLE below the rank; the rank-d optimum is decided (von Neumann:
    the d largest soft-thresholded singular values, computed here independently by brute force over the rank-d
    truncations of the SVT), and claimed values follow the rule of every route."""
    rep = check_regression(YREG, 1, 1e-2, 1e-2).to_dict()
    cl = {c["id"]: c for c in rep["claims"]}
    assert cl["optimal-value"]["verdict"] == "NOT_APPLICABLE"
    assert cl["rank-d-value"]["verdict"] == "VERIFIED"
    N = YREG.shape[0]
    lam = 1e-2
    s = np.linalg.svd(YREG - YREG.mean(axis=0), compute_uv=False)
    # every choice of one kept singular value, the best is the largest (von Neumann)
    vals = [sum((min(s[j], N * lam) ** 2 if j == k else s[j] ** 2) for j in range(s.size)) / (2 * N)
            + lam * max(s[k] - N * lam, 0.0) for k in range(s.size)]
    f1 = min(vals)
    assert rep["solution"]["value"] == pytest.approx(f1, rel=1e-12)
    assert rep["certificate"]["upper"] == pytest.approx(f1, rel=1e-12)  # attainable with d = 1
    for wrong, verdict in ((f1 * (1 - 1e-5), "REFUTED"), (f1 * (1 + 1e-5), "REFUTED"), (f1, "VERIFIED")):
        r = check_regression(YREG, 1, 1e-2, 1e-2, claimed_value=wrong).to_dict()
        assert {c["id"]: c for c in r["claims"]}["claimed-value"]["verdict"] == verdict


@pytest.mark.parametrize("lam", [1e-9, 1e-12])
def test_tiny_lambda_closed_forms_decided(lam):
    """lambda = 1e-9 .. 1e-12: the closed forms are VERIFIED (regression, balanced CE/LS/MSE) and a value 1e-6 off
    is REFUTED (the float certificate at these scales: log1p conjugate, SVD residual)."""
    r = check_regression(YREG, YREG.shape[1], lam, lam).to_dict()
    assert r["verdict"] == "VERIFIED", [c["reason"] for c in r["claims"]]
    v = r["solution"]["value"]
    assert check_regression(YREG, YREG.shape[1], lam, lam, claimed_value=v * (1 + 1e-6)).to_dict()["verdict"] == "REFUTED"
    for name, kw in (("ce", {}), ("ls", {"smoothing": 0.1}), ("mse", {})):
        rep = check_general(_problem(name, kw, [3] * 4, lam, lam), starts=1).to_dict()
        assert rep["verdict"] == "VERIFIED", (name, [(c["id"], c["reason"]) for c in rep["claims"]])


def test_others_convention_beyond_its_hypothesis_is_not_applicable():
    """`others` smoothing with eps > (K-1)/K: q_true < q_other, the closed form and the minority threshold do not
    apply (NOT_APPLICABLE, never REFUTED); the certified value and the geometry certificate still decide."""
    rep = check_general(_problem("ls", {"smoothing": 0.9, "convention": "others"}, [3] * 4, 5e-3, 5e-3),
                        starts=1).to_dict()
    cl = {c["id"]: c for c in rep["claims"]}
    assert cl["closed-form"]["verdict"] == "NOT_APPLICABLE" and cl["optimal-value"]["verdict"] == "VERIFIED"
    assert rep["verdict"] == "VERIFIED"
    rep = check_general(_problem("ls", {"smoothing": 0.9, "convention": "others"}, [5, 5, 2, 2], 5e-3, 5e-3),
                        starts=1).to_dict()
    cl = {c["id"]: c for c in rep["claims"]}
    assert cl["minority-collapse-threshold"]["verdict"] == "NOT_APPLICABLE"
    assert "REFUTED" not in [c["verdict"] for c in rep["claims"]]


def test_imbalanced_mse_closed_form_against_reference_and_rank_d():
    """Imbalanced MSE in closed form (SVT of D^{1/2} P): the cvxpy reference of this file (counts 6,6,2,1,
    lw = 5e-3, lh = 1e-2: 0.03548848015189614) and a K = 300 instance without any search; below the rank the
    rank-d value is decided."""
    rep = check_general(_problem("mse", {}, IMB, 5e-3, 1e-2), starts=1).to_dict()
    assert rep["predicted"]["value"] == pytest.approx(0.03548848015189614, rel=1e-9)
    assert rep["verdict"] == "VERIFIED"
    counts = [max(1, 60 - c // 5) for c in range(300)]
    rep = check_general(_problem("mse", {}, counts, 1e-4, 1e-4), starts=1).to_dict()
    assert {c["id"]: c for c in rep["claims"]}["optimal-value"]["verdict"] == "VERIFIED"
    assert "closed form" in rep["solution"]["method"]
    rep = check_general(_problem("mse", {}, [5, 2, 1], 5e-3, 5e-3, d=1), starts=1).to_dict()
    cl = {c["id"]: c for c in rep["claims"]}
    assert cl["optimal-value"]["verdict"] == "NOT_APPLICABLE" and cl["rank-d-value"]["verdict"] == "VERIFIED"


# ---- CLI -----------------------------------------------------------------------------------------

def _cli(capsys, argv):
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_solve_ufm_json(capsys):
    rc, out, _ = _cli(capsys, ["solve", "ufm", "--loss", "ls", "--smoothing", "0.1", "--smoothing-convention", "others",
                               "--counts", "6,6,2,1", "--dim", "4", "--lambda-w", "5e-3", "--lambda-h", "1e-2", "--json"])
    d = json.loads(out)
    assert abs(d["solution"]["value"] - 0.547026230273218) <= 1e-6 * 0.547
    assert "others" in d["instance"]["loss"]["smoothing_convention"]
    assert d["geometry"]["minority"]["classifier_norm_ratio"] < 1.0
    assert "certificate" in d and d["certificate"]["gap"] <= 1e-8


@pytest.mark.parametrize("argv", [
    ["--loss", "ls", "--smoothing", "1.0", "--classes", "3", "--per-class", "2"],
    ["--loss", "ls", "--smoothing", "-0.1", "--classes", "3", "--per-class", "2"],
    ["--loss", "ce", "--counts", "6,0,2"],
    ["--loss", "weighted-ce", "--counts", "6,2"],
    ["--loss", "weighted-ce", "--counts", "6,2", "--class-weights", "1,0"],
    ["--loss", "ce", "--counts", "6,2", "--classes", "2", "--per-class", "2"],
])
def test_cli_bad_input_exit_2(capsys, argv):
    rc, out, err = _cli(capsys, ["solve", "ufm", *argv, "--dim", "4", "--lambda-w", "1e-2", "--lambda-h", "1e-2"])
    assert rc == 2
    assert len(err.strip().splitlines()) == 1


def test_cli_regression(tmp_path, capsys):
    f = tmp_path / "Y.npy"
    np.save(f, YREG)
    rc, out, _ = _cli(capsys, ["solve", "ufm-regression", "--targets", str(f), "--dim", "2", "--lambda-w", "1e-2",
                               "--lambda-h", "1e-2", "--json"])
    assert rc == 0
    assert abs(json.loads(out)["solution"]["value"] - REG_REFS[0][2]) <= 1e-6 * REG_REFS[0][2]
    bad = tmp_path / "bad.npy"
    np.save(bad, np.ones(5))
    rc, out, err = _cli(capsys, ["solve", "ufm-regression", "--targets", str(bad), "--dim", "2", "--lambda-w", "1e-2",
                                 "--lambda-h", "1e-2"])
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "shape" in err
