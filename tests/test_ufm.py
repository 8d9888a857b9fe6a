"""Classic UFM: closed forms, certificates, solvers and claims (spec/ufm.md)."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from proofs_check.claims import ufm as C
from proofs_check.core import RunContext, Verdict
from solvers import ufm as S
from theory import ufm as T
from theory._validate import InstanceError


# --- reference values (computed independently, spec/ufm.md) -----------------------------

@pytest.mark.parametrize("k,n,lw,lh,ref", [(3, 2, 0.01, 0.01, 0.14833175), (5, 2, 0.001, 0.001, 0.04275647),
                                           (4, 2, 0.2, 0.2, math.log(4))])
def test_ce_reference_values(k, n, lw, lh, ref):
    assert T.ce_optimum(T.UFMInstance("ce", k, n, k, lw, lh)).value == pytest.approx(ref, abs=1e-8)


@pytest.mark.parametrize("k,n,lw,lh,ref", [(3, 2, 0.01, 0.01, 0.02768427), (3, 4, 0.05, 0.05, 0.17)])
def test_mse_reference_values(k, n, lw, lh, ref):
    assert T.mse_optimum(T.UFMInstance("mse", k, n, k, lw, lh)).value == pytest.approx(ref, abs=1e-8)


def test_mse_regularized_bias_changes_the_value():
    # spec: lb = 0.01 gives 0.0293344 instead of 0.0276843 (not covered by the closed form)
    inst = T.UFMInstance("ce", 3, 2, 3, 0.01, 0.01)  # reuse shapes; build the MSE objective by hand
    y = inst.labels()
    from scipy.optimize import minimize

    def f(x):
        W, H, b = x[:9].reshape(3, 3), x[9:27].reshape(3, 6), x[27:]
        R = W @ H + b[:, None]
        R[y, np.arange(6)] -= 1
        return 0.5 * np.sum(R * R) / 6 + 0.005 * (np.sum(W * W) + np.sum(H * H) + np.sum(b * b))

    best = min(minimize(f, np.random.default_rng(s).standard_normal(30) * 0.3, method="BFGS",
                        options={"gtol": 1e-10}).fun for s in range(3))
    assert best == pytest.approx(0.0293344, abs=2e-7)


# --- closed form vs the convex program on random instances -------------------------------

lam_exp = st.floats(-3.5, -0.3)


@settings(max_examples=8)
@given(loss=st.sampled_from(["ce", "mse"]), k=st.integers(2, 6), n=st.integers(1, 4),
       ew=lam_exp, eh=lam_exp, lb=st.sampled_from([0.0, 0.01]))
def test_closed_form_matches_convex_solver(loss, k, n, ew, eh, lb):
    lw, lh = 10.0 ** ew, 10.0 ** eh
    if loss == "mse":
        lb = 0.0
    inst = T.UFMInstance(loss, k, n, k, lw, lh, lb)
    if loss == "ce":
        s = T.ce_threshold(inst)
        assume(abs(s * k - 1) > 0.05)  # first-order/interior-point solvers stall at the threshold
    else:
        assume(abs(math.sqrt(n) - inst.N * inst.lam) > 0.05)
    sol = S.solve_convex(inst)
    pred = T.optimum(inst).value
    assert sol.value == pytest.approx(pred, abs=1e-6 * max(1, pred))
    # the dual certificate of the convex solution brackets the closed form
    assert sol.certificate.lower_bound <= pred + 1e-9


@settings(max_examples=15)
@given(loss=st.sampled_from(["ce", "mse"]), k=st.integers(2, 30), n=st.integers(1, 6),
       ew=st.floats(-4, 0), eh=st.floats(-4, 0))
def test_kkt_certificate_accepts_the_closed_form(loss, k, n, ew, eh):
    inst = T.UFMInstance(loss, k, n, k, 10.0 ** ew, 10.0 ** eh)
    cert = S.closed_form_certificate(inst)
    pred = T.optimum(inst).value
    assert cert.details["valid"]
    assert cert.gap <= 1e-10 * max(1, pred)
    assert cert.lower_bound == pytest.approx(pred, abs=1e-10 * max(1, pred))
    if not T.optimum(inst).trivial:
        assert cert.details["kkt_residual"] < 1e-8 and cert.details["kkt_spectral"] <= 1 + 1e-9


@pytest.mark.parametrize("loss", ["ce", "mse"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kkt_certificate_rejects_a_perturbed_candidate(loss, seed):
    inst = T.UFMInstance(loss, 4, 3, 4, 5e-3, 1e-2)
    Z, b = T.optimal_logits(inst)
    rng = np.random.default_rng(seed)
    cert = S.certificate(inst, Z + 0.05 * rng.standard_normal(Z.shape), b)
    assert cert.gap > 1e-6  # the perturbed point is not certified optimal
    assert cert.lower_bound <= T.optimum(inst).value + 1e-12  # but the bound stays valid
    assert cert.details["kkt_residual"] > 1e-4


def test_closed_form_point_attains_the_value_with_the_predicted_geometry():
    inst = T.UFMInstance("ce", 5, 3, 6, 2e-3, 5e-3)
    W, H, b = T.optimal_point(inst)
    assert S.objective(inst, W, H, b) == pytest.approx(T.ce_optimum(inst).value, abs=1e-12)
    mu = H[:, ::inst.n]
    assert np.allclose(mu, math.sqrt(inst.lw / (inst.n * inst.lh)) * W.T)  # self-duality


# --- solvers ------------------------------------------------------------------------------

@pytest.mark.parametrize("loss,lb", [("ce", 0.0), ("ce", 0.3), ("mse", 0.0)])
def test_gradient_matches_finite_differences(loss, lb):
    inst = T.UFMInstance(loss, 3, 2, 4, 0.03, 0.07, lb)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(inst.k * inst.d + inst.d * inst.N + inst.k)
    f, g = S.objective_and_grad(x, inst)
    eps = 1e-6
    for i in rng.choice(x.size, 12, replace=False):
        e = np.zeros_like(x)
        e[i] = eps
        fd = (S.objective_and_grad(x + e, inst)[0] - S.objective_and_grad(x - e, inst)[0]) / (2 * eps)
        assert g[i] == pytest.approx(fd, rel=1e-6, abs=1e-8)


@settings(max_examples=6)
@given(loss=st.sampled_from(["ce", "mse"]), k=st.integers(2, 6), n=st.integers(1, 3), seed=st.integers(0, 99))
def test_factored_solver_reaches_the_certified_value(loss, k, n, seed):
    inst = T.UFMInstance(loss, k, n, k + 1, 1e-3, 3e-3)
    sol = S.solve_factored(inst, starts=1, seed=seed)
    cert = S.closed_form_certificate(inst)
    assert sol.converged
    assert sol.value >= cert.lower_bound - 1e-10  # the certificate is a true lower bound
    assert sol.value - cert.lower_bound <= 1e-8


# --- claims: true ones hold, false ones are refuted ----------------------------------------

def _verdict(claim):
    return claim.run(RunContext()).verdict


@pytest.mark.parametrize("loss", ["ce", "mse"])
def test_value_claim_refuted_when_off_by_a_factor(loss):
    assert _verdict(C.value_claim(loss, predict=lambda i: 1.001 * T.optimum(i).value)) is Verdict.REFUTED
    assert _verdict(C.value_claim(loss, predict=lambda i: 0.999 * T.optimum(i).value)) is Verdict.REFUTED


@pytest.mark.parametrize("loss", ["ce", "mse"])
def test_geometry_claim_refuted_for_the_wrong_geometry(loss):
    assert _verdict(C.geometry_claim(loss, expected="orthogonal-frame")) is Verdict.REFUTED


@pytest.mark.parametrize("loss", ["ce", "mse"])
def test_trivial_phase_claim_refuted_for_a_wrong_threshold(loss):
    for f in (1.1, 0.9, 1.01, 0.99):
        assert _verdict(C.trivial_phase_claim(threshold=lambda k: f / k, loss=loss)) is Verdict.REFUTED, f
    assert _verdict(C.trivial_phase_claim(loss=loss)) is Verdict.VERIFIED


def test_trivial_phase_claim_off_below_the_witness_resolution_is_not_verified():
    # 1e-8 relative: outside the 1e-9 comparison band, but the witness cannot separate it: INCONCLUSIVE
    v = _verdict(C.trivial_phase_claim(threshold=lambda k: (1 + 1e-8) / k))
    assert v in (Verdict.REFUTED, Verdict.INCONCLUSIVE)


def test_check_instance_outside_hypotheses_is_not_applicable():
    out = C.check_instance(T.UFMInstance("ce", 5, 2, 2, 0.01, 0.01), starts=1).to_dict()
    assert out["verdict"] == "NOT_APPLICABLE" and "d >= k-1" in out["reason"]
    assert out["solution"]["route"] == "factored"  # the convex value is not attainable at d = 2


def test_check_instance_trivial_phase_reports_zero_geometry_with_null_cosines():
    out = C.check_instance(T.UFMInstance("ce", 4, 2, 4, 0.2, 0.2), starts=1)
    assert out["verdict"] == "VERIFIED"
    assert out["geometry"]["classification"] == "zero"
    assert all(x is None for row in out["geometry"]["class_mean_cosines"] for x in row)


# --- bad input -------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,msg", [
    (dict(k=0), "k \\(classes\\) must be >= 2"),
    (dict(n=0), "n \\(samples per class\\) must be >= 1"),
    (dict(d=0), "d \\(feature dimension\\) must be >= 1"),
    (dict(lw=-1.0), "lambda_w must be >= 0"),
    (dict(lh=float("nan")), "lambda_h must be a number, got NaN"),
    (dict(lw=0.0), "must be > 0"),
    (dict(loss="hinge"), "loss must be one of"),
])
def test_bad_instances_name_the_parameter(kwargs, msg):
    args = dict(loss="ce", k=3, n=2, d=3, lw=0.01, lh=0.01)
    args.update(kwargs)
    with pytest.raises(InstanceError, match=msg):
        T.UFMInstance(**args)


def test_mse_refuses_a_bias_penalty():
    with pytest.raises(InstanceError, match="lambda_b must be 0 for ufm-mse"):
        T.UFMInstance("mse", 3, 2, 3, 0.01, 0.01, 0.1)
