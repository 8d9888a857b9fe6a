"""Contract: true theorems at boundary instances are never REFUTED and never ERROR.

Boundaries: exactly at a phase threshold, tiny lambda (1e-7), small tau (1e-3 and the smallest
accepted 1e-4), k = 2, n = 1, d = k - 1, imbalanced counts, several seeds; where a hypothesis fails
(d < k - 1) the statement must be NOT_APPLICABLE, not REFUTED.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from proofs_check.core import RunContext, Verdict

CTX = RunContext()


def _v(x) -> Verdict:
    return Verdict(x.verdict if hasattr(x, "verdict") else x["verdict"])


def _not_refuted(res, what=""):
    v = _v(res)
    reason = getattr(res, "reason", "") if hasattr(res, "reason") else res.get("reason", "")
    assert v is not Verdict.REFUTED, f"true statement REFUTED: {what}: {reason}"
    assert v is not Verdict.ERROR, f"crash: {what}: {reason}"
    return v


# ============================================================================================
# SCL
# ============================================================================================

from proofs_check.claims import scl as SC  # noqa: E402
from theory import scl as ST  # noqa: E402

SCL_TRUE = [
    ((2, 2), 1e-3, 2, True), ((2, 2), 1e-4, 3, True), ((3, 2), 1e-3, 2, True), ((5, 3, 2), 1e-4, 3, True),
    ((2, 1), 0.5, 2, True), ((1, 1), 0.5, 2, True), ((10, 1), 0.1, 2, True), ((7, 2, 1), 0.3, 3, True),
    ((3, 1, 1), 0.5, 3, True), ((2, 2), 1e8, 2, True), ((20, 2), 1e-3, 2, True), ((2, 2, 2), 0.05, 3, True),
    ((3, 3), 1e-3, 1, False), ((3, 3), 1e-4, 1, False), ((4, 4, 4), 1e-3, 2, False), ((2, 2), 1e8, 1, False),
    ((5, 3, 2), 0.5, 3, False), ((10, 1), 0.1, 2, False), ((1, 1, 1), 0.5, 2, False), ((3, 3, 3, 3), 0.1, 3, False),
    # hypotheses fail: d < k (UFM+), d < k - 1 (UFM)
    ((4, 4, 4), 0.5, 2, True), ((3, 2), 1.0, 1, True), ((4, 4, 4, 4), 0.5, 2, False), ((3, 3, 3), 1e-3, 1, False),
]


@pytest.mark.parametrize("counts,tau,d,nonneg", SCL_TRUE)
@pytest.mark.parametrize("seed", [0, 3])
def test_scl_true_boundaries(counts, tau, d, nonneg, seed):
    rep = SC.check_instance(ST.SCLInstance(counts, tau, d, nonneg), starts=2, seed=seed)
    _not_refuted(rep, f"scl {counts} tau={tau} d={d} nonneg={nonneg} seed={seed}")
    for c in rep.claims:
        assert c.verdict not in (Verdict.REFUTED, Verdict.ERROR), (c.name, c.reason)


@pytest.mark.parametrize("counts,d", [((4, 4, 4, 4), 2), ((3, 3, 3), 1)])
def test_scl_ufm_below_k_minus_1_not_applicable(counts, d):
    rep = SC.check_instance(ST.SCLInstance(counts, 0.5, d, False), starts=2)
    ov = [c for c in rep.claims if c.name == "optimal-value"]
    assert ov and ov[0].verdict is Verdict.NOT_APPLICABLE


@pytest.mark.parametrize("counts,batches,tau", [
    ((4, 4), [[0, 1, 4, 5], [2, 3, 6, 7]], 1e-3),
    ((3, 3, 3), [[0, 1, 3, 4], [1, 2, 6, 7], [4, 5, 6, 8], [0, 2, 5, 8]], 1e-3),
    ((2, 1), [[0, 2], [1, 2]], 0.5),
    ((3, 2), [[0, 1, 2], [3, 4], [0, 3]], 0.2),  # one-class batches
])
@pytest.mark.parametrize("nonneg", [True, False])
def test_scl_true_minibatch_boundaries(counts, batches, tau, nonneg):
    k = len(counts)
    rep = SC.check_instance(ST.SCLInstance(counts, tau, k + 1, nonneg, batches), starts=2)
    _not_refuted(rep, f"scl minibatch {counts} {batches} tau={tau} nonneg={nonneg}")


def test_scl_true_factories_small_tau():
    r = SC.make_theorem1_claim(instances=[((2, 2), 1e-3), ((5, 3, 2), 1e-4), ((2, 1), 0.5)]).run(CTX)
    _not_refuted(r, "theorem1 small tau")
    r = SC.make_graf_claim(instances=[((3, 3), 1e-3, 1), ((2, 2, 2), 1e-4, 2), ((1, 1), 0.5, 1)]).run(CTX)
    _not_refuted(r, "graf small tau")
    r = SC.make_relu_cost_claim(instances=[((3, 3), 1e-3), ((2, 2), 1e8)]).run(CTX)
    _not_refuted(r, "relu cost extremes")


# ============================================================================================
# Feature collapse
# ============================================================================================

from proofs_check.claims import feature_collapse as FC  # noqa: E402
from solvers import feature_collapse as FS  # noqa: E402
from theory import feature_collapse as FT  # noqa: E402
from theory.feature_collapse import FCInstance  # noqa: E402


def _fc_crit(n_c, L, s_c, d):
    return FT.type1_prediction(FCInstance(n_c, L, s_c, d, 0.05)).lambda_crit


FC_TRUE = [
    FCInstance(2, 1, 1, 1, 1e-7), FCInstance(2, 1, 1, 1, 1e-10), FCInstance(3, 2, 2, 2, 1e-7),
    FCInstance(2, 3, 2, 2, 1e-3), FCInstance(3, 2, 2, 4, 0.05, layernorm=True),
    FCInstance(2, 2, 2, 2, 1e-7, layernorm=True), FCInstance(2, 3, 2, 2, 0.05, freqs=(0.99, 0.01)),
    FCInstance(2, 1, 3, 1, 1e-3, freqs=(0.5, 0.3, 0.2)), FCInstance(3, 1, 1, 2, 1e4),
    FCInstance(2, 1, 2, 3, 0.05, K=4, latents="random", seed=6),
    # hypotheses fail: d < n_c - 1, LayerNorm with d < n_c
    FCInstance(4, 1, 1, 2, 0.05), FCInstance(3, 1, 2, 2, 0.05, layernorm=True),
]


@pytest.mark.parametrize("inst", FC_TRUE, ids=lambda i: f"nc{i.n_c}L{i.L}s{i.s_c}d{i.d}lam{i.lam:g}ln{int(i.layernorm)}")
def test_fc_true_boundaries(inst):
    rep = FC.check_instance(inst, n_starts=1)
    _not_refuted(rep, f"fc {inst}")


@pytest.mark.parametrize("n_c,L,s_c,d", [(3, 2, 2, 4), (2, 1, 1, 1), (2, 3, 2, 2), (4, 1, 2, 3)])
@pytest.mark.parametrize("offset", [0.0, 1e-12, -1e-12, 1e-6, -1e-6])
def test_fc_at_threshold(n_c, L, s_c, d, offset):
    lc = _fc_crit(n_c, L, s_c, d)
    inst = FCInstance(n_c, L, s_c, d, lc * (1 + offset))
    rep = FC.check_instance(inst, n_starts=1)
    _not_refuted(rep, f"fc at threshold {inst} offset {offset}")


def test_fc_below_dim_not_applicable():
    rep = FC.check_instance(FCInstance(4, 1, 1, 2, 0.05), n_starts=1)
    assert rep.verdict is Verdict.NOT_APPLICABLE


# ============================================================================================
# NTK
# ============================================================================================

from proofs_check.claims import ntk as NC  # noqa: E402
from theory import ntk as NT  # noqa: E402

NTK_TRUE = [
    (NT.NTKInstance(2, 2, (1.0, 0.5, 0.1)), {}),
    (NT.NTKInstance(2, 2, (1.0, 0.0, 0.0)), {}),
    (NT.NTKInstance(3, 4, (1.0, 0.6, 0.2)), {"seed": 5}),
    (NT.NTKInstance(3, 4, (1.0, 0.6, 0.2), s=1e-8), {}),
    (NT.NTKInstance(3, 4, (1.0, 0.6, 0.2), s=1e8), {}),
    (NT.NTKInstance(2, 3, (1.0, 0.999, 0.998)), {}),  # nearly singular
    (NT.NTKInstance(3, 4, (1.0, 0.6, 0.2)), {"feature_dim": 1}),  # n < C - 1: not applicable
    (NT.NTKInstance(3, 4, (1.0, 0.6, 0.2)), {"feature_dim": 2}),  # n = C - 1
    (NT.NTKInstance(3, 4, (1.0, 0.6, 0.2)), {"init": "lazy"}),
    (NT.NTKInstance(3, 4, (1.0, 0.6, 0.2)), {"init": "e-zero"}),
    (NT.NTKInstance(2, 2, (1.0, 0.5, 0.1)), {"init": "e-zero", "mean_weight": 0.8}),
    (NT.NTKInstance(3, 4, (1.0, 0.6, 0.2)), {"gamma": (2.0, 1.0, 0.3)}),
    (NT.NTKInstance(3, 4, (1.0, 0.6, 0.2)), {"init_scale": 1e-2}),
    (NT.NTKInstance(3, 4, (1.0, 0.6, 0.2)), {"init_scale": 1e-100}),
]


@pytest.mark.parametrize("inst,kw", NTK_TRUE, ids=lambda x: str(x)[:60])
def test_ntk_true_boundaries(inst, kw):
    rep = NC.check_instance(inst, max_seconds=60.0, **kw)
    _not_refuted(rep, f"ntk {inst} {kw}")


# ============================================================================================
# UFM (findings: xfail strict, the UFM modules belong to another engineer)
# ============================================================================================

from proofs_check.claims import ufm as UC  # noqa: E402
from theory import ufm as UT  # noqa: E402

UFM_TRUE = [
    ("ce", 2, 1, 1, 1e-7, 1e-7), ("ce", 2, 1, 2, 1e-7, 1e-7), ("mse", 2, 1, 1, 1e-7, 1e-7),
    ("ce", 3, 1, 2, 1e-3, 1e-3), ("mse", 4, 1, 3, 1e-7, 1e-7), ("ce", 5, 2, 4, 1e-7, 1e-3),
    ("ce", 3, 2, 3, 1e-7, 1.0), ("mse", 3, 2, 3, 1e-7, 10.0),
    ("ce", 4, 2, 2, 1e-2, 1e-2), ("mse", 4, 2, 2, 1e-2, 1e-2),  # d < k - 1: not applicable
]


@pytest.mark.parametrize("case", UFM_TRUE, ids=lambda c: "-".join(map(str, c)))
def test_ufm_true_boundaries(case):
    rep = UC.check_instance(UT.UFMInstance(*case), starts=1)
    _not_refuted(rep, f"ufm {case}")


@pytest.mark.parametrize("loss", ["ce", "mse"])
@pytest.mark.parametrize("k,n", [(2, 1), (3, 2), (5, 1), (4, 3)])
@pytest.mark.parametrize("offset", [0.0, 1e-12, -1e-12, 1e-6, -1e-6])
def test_ufm_at_threshold(loss, k, n, offset):
    # s = sqrt(n lw lh) = 1/k exactly (lw = lh): the phase boundary
    lam = (1.0 / k) * (1 + offset) / math.sqrt(n)
    rep = UC.check_instance(UT.UFMInstance(loss, k, n, k, lam, lam), starts=1)
    _not_refuted(rep, f"ufm {loss} k={k} n={n} at threshold offset {offset}")


# ============================================================================================
# CRH (identities at their boundaries; the experiment claims are covered by the family tests)
# ============================================================================================

from proofs_check.claims import crh as CC  # noqa: E402
from theory import crh as CT  # noqa: E402


def test_crh_true_identities():
    for c in (CC.backprop_claim(), CC.transfer_claim(), CC.scaled_projector_claim(), CC.isotropy_claim(),
              CC.one_step_claim(), CC.exponent_table_claim(), CC.nc_claim(), CC.nc_claim(counts=(2, 2)),
              CC.nc_claim(counts=(50, 1)), CC.nc_breaking_claim()):
        _not_refuted(c.run(CTX), c.id)


@pytest.mark.parametrize("seed", [0, 1])
def test_crh_check_instance_tiny_experiment(seed):
    cfg = CT.CRHExperiment(weight_decays=(0.0, 1e-2), steps=200, n_records=2, n_samples=32, widths=(4, 6, 3),
                           task_rank=1, seed=seed)
    rep = CC.check_instance(cfg, null_draws=2)
    _not_refuted(rep, f"crh tiny experiment seed {seed}")


# ============================================================================================
# User claims
# ============================================================================================

import hypothesis.strategies as hst  # noqa: E402

from proofs_check import user as U  # noqa: E402


def _user(kind, predict, solve, **kw):
    return U.UserClaim(id="contract.true-boundary", statement=f"the {kind} of the user's solve equals the true "
                       "prediction at a boundary instance", source="tests/test_contract_true_boundaries_not_refuted.py",
                       params={"k": hst.just(2)}, solve=solve,
                       predict=predict, kind=kind, **kw)


@pytest.mark.parametrize("counts,tau", [((2, 2), 1e-3), ((3, 2), 1.0), ((2, 1), 0.5), ((5, 3, 2), 1e-4)])
def test_user_true_optimum_from_scl_report(counts, tau):
    rep = lambda p: SC.check_instance(ST.SCLInstance(counts, tau, len(counts), True), starts=2)  # noqa: E731
    base = ST.theorem1_bound(counts, tau)
    for kind in ("optimum", "lower_bound", "upper_bound"):
        r = _user(kind, lambda p: base, rep, rtol=1e-9).check_instance({"k": 2})
        _not_refuted(r, f"user {kind} scl {counts} tau={tau}")


@pytest.mark.parametrize("case", [("ce", 2, 1, 2, 1e-7, 1e-7), ("mse", 3, 1, 2, 1e-3, 1e-3)])
def test_user_true_from_ufm_report(case):
    inst = UT.UFMInstance(*case)
    base = float(UC.default_predict(inst))
    rep = lambda p: UC.check_instance(inst, starts=1)  # noqa: E731
    for kind in ("optimum", "lower_bound", "upper_bound"):
        r = _user(kind, lambda p: base, rep, rtol=1e-9).check_instance({"k": 2})
        _not_refuted(r, f"user {kind} ufm {case}")
    r = _user("geometry", lambda p: "simplex-etf", rep).check_instance({"k": 2})
    _not_refuted(r, f"user geometry ufm {case}")


def test_user_true_geometry_tiny_unique_etf():
    from theory.geometry import centering_matrix

    G = 1e-12 * centering_matrix(3)
    r = _user("geometry", lambda p: "simplex-etf", lambda p: U.ProvenPoint(G, how="exact", unique=True)
              ).check_instance({"k": 2})
    _not_refuted(r, "tiny unique ETF")
    r = _user("geometry", lambda p: "simplex-etf", lambda p: U.ProvenPoint(G, how="exact", unique=True, zero_tol=0.0)
              ).check_instance({"k": 2})
    assert r.verdict is Verdict.VERIFIED, r.reason


# ============================================================================================
# Random sweeps of true statements (hypothesis, few examples by default)
# ============================================================================================

from hypothesis import HealthCheck, given, settings  # noqa: E402

_SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@settings(max_examples=12, **_SETTINGS)
@given(counts=hst.lists(hst.integers(1, 6), min_size=2, max_size=4),
       tau=hst.sampled_from((1e-4, 1e-3, 0.05, 0.5, 1.0, 1e8)), dk=hst.integers(-2, 1), nonneg=hst.booleans(),
       seed=hst.integers(0, 5))
def test_scl_random_true_never_refuted(counts, tau, dk, nonneg, seed):
    k = len(counts)
    d = max(1, k + dk)
    rep = SC.check_instance(ST.SCLInstance(tuple(counts), tau, d, nonneg), starts=2, seed=seed)
    _not_refuted(rep, f"scl random {counts} tau={tau} d={d} nonneg={nonneg} seed={seed}")


@pytest.mark.slow
@settings(max_examples=150, **_SETTINGS)
@given(counts=hst.lists(hst.integers(1, 8), min_size=2, max_size=5),
       tau=hst.sampled_from((1e-4, 1e-3, 0.01, 0.05, 0.2, 0.5, 1.0, 3.0, 1e8)), dk=hst.integers(-2, 1),
       nonneg=hst.booleans(), seed=hst.integers(0, 50))
def test_scl_random_true_never_refuted_slow(counts, tau, dk, nonneg, seed):
    test_scl_random_true_never_refuted.hypothesis.inner_test(counts, tau, dk, nonneg, seed)


@settings(max_examples=12, **_SETTINGS)
@given(k=hst.integers(2, 6), n=hst.integers(1, 3), dk=hst.integers(-2, 1), lw=hst.floats(-7, 1), lh=hst.floats(-7, 1),
       loss=hst.sampled_from(["ce", "mse"]), seed=hst.integers(0, 5))
def test_ufm_random_true_never_refuted(k, n, dk, lw, lh, loss, seed):
    inst = UT.UFMInstance(loss, k, n, max(1, k + dk), 10 ** lw, 10 ** lh)
    _not_refuted(UC.check_instance(inst, starts=1, seed=seed), f"ufm random {inst} seed {seed}")


@settings(max_examples=10, **_SETTINGS)
@given(n_c=hst.integers(2, 4), L=hst.integers(1, 3), s_c=hst.integers(1, 3), dk=hst.integers(-2, 1),
       lam=hst.floats(-7, 0.5), layernorm=hst.booleans())
def test_fc_random_true_never_refuted(n_c, L, s_c, dk, lam, layernorm):
    d = max(2 if layernorm else 1, n_c - 1 + dk)
    try:
        inst = FCInstance(n_c, L, s_c, d, 10 ** lam, layernorm=layernorm)
        FS.check_budget(inst, 1)
    except ValueError:
        return
    # with LayerNorm the cvxpy SDP is a reported cross-check that no verdict reads (the sdp-dual bound
    # decides), and it took 15 of the test's 26 CPU s: not solved here; without LayerNorm cvxpy's bound is used
    _not_refuted(FC.check_instance(inst, n_starts=1, cvxpy="no" if layernorm else "auto"), f"fc random {inst}")
