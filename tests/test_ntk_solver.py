"""Solver layer of the block-NTK family: right-hand side against finite differences, the linear
residual flow's three rates (hypothesis), the invariant and the scatter along runs, the small-init
limit against the spec's reference table, the lazy regime, the E = 0 initialisation."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from solvers import ntk as sv
from theory import ntk as th
from theory._validate import InstanceError
from theory.geometry import classify_gram, nc_metrics

from tests.test_ntk_theory import REFERENCE_TABLE, pd_instances

REF = th.NTKInstance(3, 4, (1.0, 0.6, 0.2))


def _loss(inst, W, b, H):
    R = W @ H + b[:, None] - sv.targets(inst.classes, inst.per_class)
    return 0.5 * inst.s * float(np.sum(R * R))


@pytest.mark.parametrize("s", [1.0, 0.7])
def test_rhs_is_kernel_preconditioned_gradient_flow(s):
    """dW = -dL/dW, db = -dL/db, dH = -(dL/dH) K, with dL from central finite differences."""
    inst = th.NTKInstance(3, 2, (1.2, 0.5, 0.1), s=s)
    rng = np.random.default_rng(0)
    stt = sv.State(rng.standard_normal((3, 4)), rng.standard_normal(3), rng.standard_normal((4, 6)))
    d = sv.rhs_state(inst, stt)
    h = 1e-6

    def fd(name):
        base = getattr(stt, name)
        g = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            plus = {k: getattr(stt, k).copy() for k in ("W", "b", "H")}
            minus = {k: getattr(stt, k).copy() for k in ("W", "b", "H")}
            plus[name][idx] += h
            minus[name][idx] -= h
            g[idx] = (_loss(inst, **plus) - _loss(inst, **minus)) / (2 * h)
        return g

    K = th.block_kernel(3, 2, inst.kappa)
    np.testing.assert_allclose(d.W, -fd("W"), atol=1e-7)
    np.testing.assert_allclose(d.b, -fd("b"), atol=1e-7)
    np.testing.assert_allclose(d.H, -fd("H") @ K, atol=1e-7)


@given(pd_instances(), st.integers(1, 4), st.integers(0, 1000))
def test_block_kernel_product(inst, rows, seed):
    R = np.random.default_rng(seed).standard_normal((rows, inst.N))
    K = th.block_kernel(inst.classes, inst.per_class, inst.kappa)
    np.testing.assert_allclose(sv.apply_block_kernel(R, inst.classes, inst.per_class, inst.kappa), R @ K,
                               atol=1e-12 * (1 + np.abs(K).max() * inst.N))


def test_residual_components_are_orthogonal_parts():
    rng = np.random.default_rng(1)
    R = rng.standard_normal((3, 12))
    P0, Pc, Pg = th.projectors(3, 4)
    comps = sv.residual_components(R, 3, 4)
    assert comps["global"] == pytest.approx(np.linalg.norm(R @ Pg))
    assert comps["class"] == pytest.approx(np.linalg.norm(R @ Pc))
    assert comps["within"] == pytest.approx(np.linalg.norm(R @ P0))
    batch = sv.batch_residual_components(R[None], 3, 4)
    assert batch["class"][0] == pytest.approx(comps["class"])


@settings(max_examples=8)
@given(pd_instances(), st.floats(0.3, 3.0), st.integers(0, 1000))
def test_linear_residual_rates(inst, s, seed):
    """Each residual part decays at s lambda on its own window (C 2..5, m 2..5, K PD)."""
    inst = th.NTKInstance(inst.classes, inst.per_class, inst.kappa, s=s)
    R0 = np.random.default_rng(seed).standard_normal((inst.classes, inst.N))
    res = sv.linear_residual_flow(inst, R0)
    l0, lc, lg = inst.eigenvalues
    for name, lam in (("global", lg), ("class", lc), ("within", l0)):
        assert res.rates[name]["rate"] == pytest.approx(s * lam, rel=1e-6), name


def test_linear_residual_zero_component_is_null():
    """One-hot labels with zero initial outputs have no within-class residual: its rate is None."""
    res = sv.linear_residual_flow(REF, -sv.targets(3, 4))
    assert res.rates["within"]["rate"] is None
    assert "zero" in res.rates["within"]["reason"]
    assert res.rates["class"]["rate"] == pytest.approx(2.0, rel=1e-6)


def test_invariant_drift_and_monotone_scatter_on_moderate_run():
    """O(1) random init (||E(0)|| ~ 30): E drifts by < 1e-9, tr(D D^T) never increases."""
    rep = sv.run_flow(REF, sv.init_random(REF, 5, 0.7, seed=2), 20.0, n_grid=201)
    d = rep.solution.diagnostics
    assert d["invariant_scale"] > 10
    assert d["max_invariant_drift"] < 1e-9
    sc = rep.series["scatter"]
    assert np.all(np.diff(sc) <= 1e-9 * sc[0])
    assert sc[-1] < 0.8 * sc[0]  # it really decreases here
    # the invariant is not conserved by a wrong form (the h_bar term dropped): the check can fail
    W0, H0 = rep.trajectory.states[0].W, rep.trajectory.states[0].H
    W1, H1 = rep.trajectory.final.W, rep.trajectory.final.H
    hb0, hb1 = th.decompose(H0, 3, 4)[0], th.decompose(H1, 3, 4)[0]
    wrong0 = th.invariant(W0, H0, REF) + REF.N * np.outer(hb0, hb0) / REF.eigenvalues[2]
    wrong1 = th.invariant(W1, H1, REF) + REF.N * np.outer(hb1, hb1) / REF.eigenvalues[2]
    assert np.linalg.norm(wrong1 - wrong0) > 1e-3


@pytest.mark.parametrize("row", REFERENCE_TABLE, ids=["C3m4", "C4m3"])
def test_small_init_flow_reproduces_reference_table(row):
    """The measured limit (eps = 1e-6) reproduces the spec's reference table to its 4 decimals."""
    C, m, kappa, l0, lc, lg, msq, wsq, esc, late = row
    inst = th.NTKInstance(C, m, kappa)
    rep = sv.run_flow(inst, sv.init_random(inst, C + 1, 1e-6, seed=5), 30.0, n_grid=201)
    fm = rep.measures
    np.testing.assert_allclose(fm["mean_sq_norms"], msq, atol=5e-5)
    assert fm["W_fro_sq"] == pytest.approx(wsq, abs=5e-5)
    assert sv.fit_escape_rate(rep.trajectory)["rate"] == pytest.approx(esc, abs=5e-4)
    assert sv.fit_late_within_rate(rep.trajectory)["rate"] == pytest.approx(late, abs=5e-5)
    assert classify_gram(fm["gram"]).classification == "simplex-etf"
    assert fm["self_duality_ratio"] == pytest.approx(math.sqrt(m / lc), rel=1e-6)
    assert fm["self_duality_misfit"] < 1e-6
    met = nc_metrics(rep.trajectory.final.H, inst.labels, rep.trajectory.final.W, rep.trajectory.final.b,
                     center_w=True)
    assert met.NC1 < 1e-8 and met.NC3 < 1e-6 and met.NC4 == 0.0


def test_escape_rate_needs_small_init():
    rep = sv.run_flow(REF, sv.init_random(REF, 4, 0.1, seed=0), 10.0, n_grid=101)
    esc = sv.fit_escape_rate(rep.trajectory)
    assert esc["rate"] is None and "smaller init scale" in esc["reason"]


def test_late_rate_needs_long_run():
    rep = sv.run_flow(REF, sv.init_random(REF, 4, 1e-6, seed=0), 3.0, n_grid=101)
    late = sv.fit_late_within_rate(rep.trajectory)
    assert late["rate"] is None and "run longer" in late["reason"]


def test_lazy_construction():
    lz = sv.init_lazy(REF, REF.N + REF.classes, 5.0, seed=1)
    W, H = lz.state.W, lz.state.H
    np.testing.assert_allclose(W @ W.T, 25.0 * np.eye(3), atol=1e-10)
    np.testing.assert_allclose(H.T @ H, 25.0 * th.block_kernel(3, 4, REF.kappa), atol=1e-10)
    assert lz.gamma == pytest.approx(tuple(50.0 * k + 1.0 for k in REF.kappa))
    Theta = sv.output_kernel_matrix(lz.state, REF)
    np.testing.assert_allclose(Theta, np.kron(np.eye(3), th.block_kernel(3, 4, lz.gamma)), atol=1e-9)


def test_lazy_regime_fits_at_gamma_rates_without_collapse():
    from proofs_check.claims.ntk import lazy_run

    lz, pred, rep, rates = lazy_run(REF, L=10.0, seed=0)
    for comp in ("global", "class", "within"):
        assert rates[comp]["rate"] == pytest.approx(pred[comp], rel=1e-2)
    nc0 = nc_metrics(rep.trajectory.states[0].H, REF.labels).NC1
    nc1 = nc_metrics(rep.trajectory.final.H, REF.labels).NC1
    assert nc0 > 0.5 and nc1 > 0.99 * nc0
    assert rep.solution.value < 1e-6 * rep.series["loss"][0]


def test_rate_windows_found_when_components_decay_within_one_scan_step():
    """A long run (2000 e-folds of the fastest part): each window is still found by zooming in."""
    from proofs_check.claims import ntk as cl

    lz, pred, rep, rates = cl.lazy_run(REF, L=5.0, seed=0, efolds=100.0)
    for comp in ("global", "class", "within"):
        assert rates[comp]["rate"] == pytest.approx(pred[comp], rel=4e-2), comp
        assert rates[comp]["points"] == sv.WINDOW_POINTS


@given(st.integers(2, 4), st.integers(2, 4), st.integers(1, 5), st.floats(0.0, 0.9), st.integers(0, 100))
def test_e_zero_init_is_exact(C, m, n, mw, seed):
    inst = th.NTKInstance(C, m, (1.0, 0.4, 0.1))
    st0 = sv.init_e_zero(inst, n, 0.8, seed=seed, mean_weight=mw)
    assert np.abs(th.invariant(st0.W, st0.H, inst)).max() < 1e-12


def test_e_zero_flow_keeps_e_zero_and_is_not_an_etf_for_c3():
    from proofs_check.claims.ntk import e_zero_run

    rep = e_zero_run(REF, seed=3)
    assert rep.solution.diagnostics["max_invariant_drift"] < 1e-9
    fm = rep.measures
    assert fm["g_norm"] > 0.1
    geo = classify_gram(fm["gram"])
    assert geo.classification != "simplex-etf" and geo.distance_etf > 1e-2
    np.testing.assert_allclose(fm["gram"], th.nonetf_gram(REF, fm["g"]), atol=1e-3)


def test_e_zero_flow_c2_is_always_an_etf():
    from proofs_check.claims.ntk import e_zero_run

    inst = th.NTKInstance(2, 3, (1.0, 0.5, 0.1))
    rep = e_zero_run(inst, seed=3)
    assert rep.measures["g_norm"] > 0.01
    assert classify_gram(rep.measures["gram"]).classification == "simplex-etf"


def test_nc1_bound_tight_instance_and_along_flow():
    for inst in (REF, th.NTKInstance(4, 3, (1.0, 0.5, 0.0))):
        stt = sv.tight_nc1_instance(inst)
        assert np.abs(sv.rhs_state(inst, stt).pack()).max() < 1e-14  # zero loss: stationary
        b = sv.nc1_finite_time_bound(inst, stt.W, stt.H, th.invariant(stt.W, stt.H, inst))
        assert b["rank"] == 1 and b["scatter"] == pytest.approx(b["zero_loss_bound"], rel=1e-12)
    rep = sv.run_flow(REF, sv.init_random(REF, 5, 0.7, seed=4), 10.0, n_grid=51)
    for stt in rep.trajectory.states:
        b = sv.nc1_finite_time_bound(REF, stt.W, stt.H, rep.E0)
        assert b["scatter"] <= b["bound"] * (1 + 1e-12)


@pytest.mark.parametrize("call,needle", [
    (lambda: sv.feature_flow(REF, sv.init_random(REF, 3, 0.1), -1.0), "time must be >= 0"),
    (lambda: sv.feature_flow(REF, sv.init_random(REF, 3, 0.1), 0.0), "time must be > 0"),
    (lambda: sv.init_random(REF, 3, 0.0), "init_scale must be > 0"),
    (lambda: sv.init_random(REF, 0, 0.1), "n (feature dimension) must be >= 1"),
    (lambda: sv.init_lazy(REF, 5, 10.0), "n (feature dimension) must be >= N + C = 15"),
    (lambda: sv.init_e_zero(REF, 3, 1.0, mean_weight=1.0), "mean_weight must be < 1"),
    (lambda: sv.linear_residual_flow(REF, np.zeros((2, 12))), "R0 must have shape"),
])
def test_bad_solver_input(call, needle):
    with pytest.raises(InstanceError) as exc:
        call()
    assert needle in str(exc.value)
