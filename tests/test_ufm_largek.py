"""Large-k machinery: torch backend agreement, class-reduced certificate, backend fallbacks."""

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from solvers import backends
from solvers import ufm as S
from theory import ufm as T


@pytest.mark.parametrize("loss,lb", [("ce", 0.0), ("ce", 0.05), ("mse", 0.0)])
def test_torch_objective_and_solver_agree_with_numpy(loss, lb):
    torch = pytest.importorskip("torch", reason="torch not installed (optional extra)")
    import torch.nn.functional as F

    inst = T.UFMInstance(loss, 4, 3, 5, 2e-3, 5e-3, lb)
    x = S.initial_points(inst, 1, seed=3)[0]
    f_np, g_np = S.objective_and_grad(x, inst)
    # torch autograd gradient of the same objective
    k, d, N = inst.k, inst.d, inst.N
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    W, H, b = xt[: k * d].reshape(k, d), xt[k * d: k * d + d * N].reshape(d, N), xt[k * d + d * N:]
    U = W @ H + b[:, None]
    y = torch.as_tensor(inst.labels())
    if loss == "ce":
        data = F.cross_entropy(U.T, y)
    else:
        data = 0.5 * ((U - F.one_hot(y, k).T.double()) ** 2).sum() / N
    f_t = data + 0.5 * (inst.lw * (W * W).sum() + inst.lh * (H * H).sum() + inst.lb * (b * b).sum())
    f_t.backward()
    assert float(f_t) == pytest.approx(f_np, rel=1e-12)
    np.testing.assert_allclose(xt.grad.numpy(), g_np, rtol=1e-8, atol=1e-12)
    a = S.solve_factored(inst, starts=1, seed=0, backend="numpy")
    t = S.solve_factored(inst, starts=1, seed=0, backend="torch", dtype="float64")
    assert t.diagnostics["backend"] == "torch" and t.converged
    assert t.value == pytest.approx(a.value, rel=1e-8)


def test_backend_fallback_messages(monkeypatch):
    monkeypatch.setattr(backends, "torch_available", lambda: False)
    c = backends.resolve("torch", "cuda", "float32")
    assert c.backend == "numpy" and "torch is not installed" in c.messages[0]
    with pytest.raises(ValueError, match="dtype must be one of"):
        backends.resolve("torch", None, "float16")
    with pytest.raises(ValueError, match="needs --backend torch"):
        backends.resolve("numpy", "cuda", "float64")


def test_cuda_fallback_when_unavailable():
    torch = pytest.importorskip("torch", reason="torch not installed (optional extra)")
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here: no fallback to test")
    c = backends.resolve("torch", "cuda", "float64")
    assert c.device == "cpu" and "CUDA is not available" in c.messages[0]


@settings(max_examples=10)
@given(loss=st.sampled_from(["ce", "mse"]), k=st.integers(2, 7), n=st.integers(1, 5), seed=st.integers(0, 1000),
       scale=st.floats(0.0, 1.0))
def test_class_reduced_certificate_equals_full(loss, k, n, seed, scale):
    inst = T.UFMInstance(loss, k, n, k, 3e-3, 1e-2)
    Z, b = T.optimal_logits(inst)
    rng = np.random.default_rng(seed)
    Zc = Z[:, ::n] + scale * rng.standard_normal((k, k))
    red = S.certificate_classwise(inst, Zc, b)
    full = S.certificate(inst, np.repeat(Zc, n, axis=1), b)
    assert red.lower_bound == pytest.approx(full.lower_bound, abs=1e-11)
    assert red.upper == pytest.approx(full.upper, abs=1e-11)
    assert red.details["kkt_residual"] == pytest.approx(full.details["kkt_residual"], abs=1e-8)


@pytest.mark.parametrize("loss", ["ce", "mse"])
def test_class_reduced_certificate_agrees_with_the_full_convex_solve(loss):
    inst = T.UFMInstance(loss, 4, 3, 4, 3e-3, 1e-2)
    red = S.closed_form_certificate(inst, reduced=True)
    cvx = S.solve_convex(inst)
    assert red.gap <= 1e-10
    assert cvx.value == pytest.approx(red.upper, abs=1e-7)
    assert cvx.certificate.lower_bound <= red.upper + 1e-10 and red.lower_bound <= cvx.value + 1e-10


def test_large_k_certificate_runs_without_the_full_problem():
    inst = T.UFMInstance("ce", 300, 5, 300, 1e-4, 1e-4)
    cert = S.closed_form_certificate(inst)
    assert cert.details["valid"] and cert.gap <= 1e-10
    assert cert.lower_bound == pytest.approx(T.ce_optimum(inst).value, abs=1e-10)


@settings(max_examples=10)
@given(loss=st.sampled_from(["ce", "mse"]), k=st.integers(2, 6), n=st.integers(1, 4), extra=st.integers(0, 3),
       seed=st.integers(0, 1000), scale=st.floats(0.01, 3.0))
def test_rebalance_keeps_the_product_and_never_increases_the_objective(loss, k, n, extra, seed, scale):
    inst = T.UFMInstance(loss, k, n, k - 1 + extra, 3e-3, 2e-2)
    x = S.initial_points(inst, 1, seed, init_scale=scale)[0]
    W, H, b = S.unpack(inst, x)
    x2 = S.rebalance(inst, x)
    W2, H2, b2 = S.unpack(inst, x2)
    np.testing.assert_allclose(W2 @ H2, W @ H, atol=1e-10 * max(1.0, np.abs(W @ H).max()))
    assert S.objective(inst, W2, H2, b2) <= S.objective(inst, W, H, b) + 1e-12
    # balanced: lw ||W||^2 = lh ||H||^2
    assert inst.lw * np.sum(W2 ** 2) == pytest.approx(inst.lh * np.sum(H2 ** 2), rel=1e-8, abs=1e-14)


@pytest.mark.parametrize("loss", ["ce", "mse"])
def test_rebalanced_and_plain_lbfgs_reach_the_same_certified_value(loss):
    inst = T.UFMInstance(loss, 6, 3, 6, 1e-3, 3e-3)
    cert = S.closed_form_certificate(inst)
    for every in (None, 5, 20):
        sol = S.solve_factored(inst, starts=1, seed=1, rebalance_every=every)
        assert sol.converged and sol.value - cert.lower_bound <= 1e-9


# --- variable projection (MSE): (H, b) eliminated in closed form --------------------------

mse_instances = st.builds(
    lambda k, n, d, lw, lh: T.UFMInstance("mse", k, n, d, lw, lh),
    k=st.integers(2, 9), n=st.integers(1, 4), d=st.integers(1, 10),
    lw=st.floats(1e-4, 1e-1), lh=st.floats(1e-4, 1e-1))


@settings(max_examples=25)
@given(inst=mse_instances, seed=st.integers(0, 10**6), scale=st.floats(0.01, 3.0))
def test_projected_objective_is_the_joint_objective_at_the_projected_point(inst, seed, scale):
    rng = np.random.default_rng(seed)
    w = scale * rng.standard_normal(inst.k * inst.d)
    f, g = S.projected_objective_and_grad(w, inst)
    x = S.projected_point(inst, w)
    fj, gj = S.objective_and_grad(x, inst)
    kd = inst.k * inst.d
    assert f == pytest.approx(fj, rel=1e-12, abs=1e-15)
    # (H, b) is stationary, and the projected gradient is the joint W-gradient (envelope theorem)
    np.testing.assert_allclose(gj[kd:], 0.0, atol=1e-12 * max(1.0, np.abs(gj).max()))
    np.testing.assert_allclose(g, gj[:kd], rtol=1e-9, atol=1e-13)
    # and it is the minimum over (H, b): any other (H, b) with the same W is no better
    for _ in range(3):
        H = x[kd: kd + inst.d * inst.N] + rng.standard_normal(inst.d * inst.N) * rng.uniform(1e-4, 1)
        b = x[kd + inst.d * inst.N:] + rng.standard_normal(inst.k) * rng.uniform(1e-4, 1)
        assert S.objective(inst, w.reshape(inst.k, inst.d), H.reshape(inst.d, inst.N), b) >= f - 1e-14


@settings(max_examples=15)
@given(inst=mse_instances, seed=st.integers(0, 10**6))
def test_projected_gradient_matches_finite_differences(inst, seed):
    rng = np.random.default_rng(seed)
    w, e = rng.standard_normal((2, inst.k * inst.d))
    _, g = S.projected_objective_and_grad(w, inst)
    h = 1e-6
    fd = (S.projected_objective_and_grad(w + h * e, inst)[0] - S.projected_objective_and_grad(w - h * e, inst)[0]) / (2 * h)
    assert fd == pytest.approx(g @ e, rel=1e-5, abs=1e-8)


@settings(max_examples=10, deadline=None)
@given(inst=mse_instances, seed=st.integers(0, 1000))
@example(inst=T.UFMInstance("mse", 8, 1, 6, 0.0332961800579416, 0.00010000000000000002), seed=41)  # a far trial step
def test_variable_projection_reaches_the_joint_and_certified_optimum(inst, seed):
    vp = S.solve_factored(inst, starts=2, seed=seed)
    joint = S.solve_factored(inst, starts=2, seed=seed, variable_projection=False)
    assert vp.diagnostics["variable_projection"] and not joint.diagnostics["variable_projection"]
    assert vp.converged
    if inst.d >= inst.k - 1:  # the closed form and its certificate apply
        cert = S.closed_form_certificate(inst)
        assert vp.value - cert.lower_bound <= 1e-9 * max(1.0, abs(cert.lower_bound))
    else:  # rank-constrained: no certificate; both routes must agree (or VP does better)
        assert vp.value <= joint.value + 1e-9 * max(1.0, abs(joint.value))


def test_variable_projection_refuses_ce_and_torch():
    with pytest.raises(ValueError, match="variable_projection needs loss 'mse'"):
        S.solve_factored(T.UFMInstance("ce", 3, 2, 3, 1e-2, 1e-2), variable_projection=True)


@settings(max_examples=25)
@given(loss=st.sampled_from(["ce", "mse"]), k=st.integers(2, 8), n=st.integers(1, 6), d=st.integers(1, 9),
       blocks=st.integers(2, 7), seed=st.integers(0, 10**6), scale=st.floats(0.01, 5.0), lb=st.sampled_from([0.0, 0.03]))
def test_column_blocked_objective_equals_the_reference_loss(loss, k, n, d, blocks, seed, scale, lb):
    inst = T.UFMInstance(loss, k, n, d, 2e-3, 7e-3, lb if loss == "ce" else 0.0)
    x = S.initial_points(inst, 1, seed, init_scale=scale)[0]
    x[-k:] = np.random.default_rng(seed).standard_normal(k)
    J = S.JointObjective(inst, blocks=blocks)
    assert J.blocks == min(blocks, inst.N)
    f, g = J(x)
    f1, g1 = S.JointObjective(inst, blocks=1)(x)
    W, H, b = S.unpack(inst, x)
    assert f == pytest.approx(S.objective(inst, W, H, b), rel=1e-12)  # the scipy-based reference loss
    assert f == pytest.approx(f1, rel=1e-13)
    np.testing.assert_allclose(g, g1, rtol=1e-11, atol=1e-14)
    f2, g2 = J(x)  # buffers are reused: a second evaluation gives the same answer
    assert f2 == f and np.array_equal(g2, g)


def test_variable_projection_falls_back_to_the_joint_route_when_not_positive_definite(monkeypatch):
    # N lh = 3e-11 is below the rounding of ||W||^2 ~ 1e7 and W W^T (10 x 10, rank 3) is singular
    inst = T.UFMInstance("mse", 10, 3, 3, 1e-12, 1e-12)
    w = 1e3 * np.random.default_rng(0).standard_normal(30)
    with pytest.raises(FloatingPointError, match="N lh = 3e-11"):
        S.projected_point(inst, w)
    # as an objective (a line-search trial point) it is +inf, so L-BFGS backtracks instead of leaving the route
    f, g = S.projected_objective_and_grad(w, inst)
    assert f == np.inf and g.shape == w.shape
    # the solver falls back to the joint route (with the reason) whenever the projection fails
    def fail(inst_, W):
        raise FloatingPointError("variable projection: W W^T + N lh I is not numerically positive definite (test)")
    monkeypatch.setattr(S, "_projection", fail)
    sol = S.solve_factored(T.UFMInstance("mse", 3, 2, 3, 1e-2, 1e-2), starts=2)
    assert not sol.diagnostics["variable_projection"] and sol.method == "factored-lbfgs(numpy)"
    assert "not numerically positive definite" in sol.diagnostics["variable_projection_fallback"]


@settings(max_examples=25)
@given(loss=st.sampled_from(["ce", "mse"]), k=st.integers(2, 8), n=st.integers(1, 6), d=st.integers(1, 9),
       seed=st.integers(0, 10**6), scale=st.floats(0.01, 5.0), lb=st.sampled_from([0.0, 0.03]))
def test_fused_single_block_gradient_equals_the_blocked_evaluation(loss, k, n, d, seed, scale, lb):
    inst = T.UFMInstance(loss, k, n, d, 2e-3, 7e-3, lb if loss == "ce" else 0.0)
    x = S.initial_points(inst, 1, seed, init_scale=scale)[0]
    x[-k:] = np.random.default_rng(seed).standard_normal(k)
    fused, plain = S.JointObjective(inst, blocks=1), S.JointObjective(inst, blocks=1, fused=False)
    assert fused.fused and not plain.fused
    f, g = fused(x)
    f0, g0 = plain(x)
    W, H, b = S.unpack(inst, x)
    assert f == pytest.approx(S.objective(inst, W, H, b), rel=1e-12)
    assert f == pytest.approx(f0, rel=1e-13)
    np.testing.assert_allclose(g, g0, rtol=1e-11, atol=1e-14)


def test_fused_gradient_falls_back_when_a_logit_exceeds_its_label_by_more_than_exp_range():
    # a logit 2000 above its label's: exp of the label-shifted logits overflows, the max-shifted block is used
    inst = T.UFMInstance("ce", 3, 2, 2, 1e-3, 1e-3)
    x = S.initial_points(inst, 1, 0)[0]
    x[-3:] = [2000.0, 0.0, 0.0]  # class 0's bias
    f, g = S.JointObjective(inst, blocks=1)(x)
    f0, g0 = S.JointObjective(inst, blocks=1, fused=False)(x)
    assert np.isfinite(f) and np.all(np.isfinite(g))
    assert f == pytest.approx(f0, rel=1e-13) and f > 2000.0 * 4 / 6  # 4 of 6 samples pay ~2000
    np.testing.assert_allclose(g, g0, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("loss", ["ce", "mse"])
@pytest.mark.parametrize("blocks", [None, 1, 3])
def test_joint_gradient_is_bit_identical_at_any_number_of_cores_and_blas_threads(monkeypatch, loss, blocks):
    from solvers.common import blas_all_threads, blas_threads

    inst = T.UFMInstance(loss, 6, 5, 7, 2e-3, 7e-3)
    x = S.initial_points(inst, 1, 4)[0]
    x[-6:] = np.random.default_rng(4).standard_normal(6)
    results = []
    for cores in (1, 2, 8):
        monkeypatch.setattr(S, "usable_cores", lambda cores=cores: cores)
        J = S.JointObjective(inst, blocks=blocks)
        assert J.workers == min(cores, J.blocks)
        for limit in (blas_threads(0.0), blas_all_threads()):
            with limit:
                results.append(J(x))
    f0, g0 = results[0]
    for f, g in results[1:]:
        assert f == f0 and np.array_equal(g, g0)


def test_column_blocks_depend_on_the_sizes_only_so_large_gradients_are_bit_identical_at_any_core_count(monkeypatch):
    from solvers.common import blas_threads

    inst = T.UFMInstance("ce", 300, 20, 300, 1e-3, 1e-3)  # 1.1e9 flops per product: 5 blocks
    x = S.initial_points(inst, 1, 1)[0]
    results = []
    for cores in (1, 2, 8):
        monkeypatch.setattr(S, "usable_cores", lambda cores=cores: cores)
        J = S.JointObjective(inst)
        assert J.blocks == int(2 * 300 * 300 * 6000 // S.BLOCK_MIN_FLOPS) == 5
        with blas_threads(0.0):
            results.append(J(x))
    assert all(f == results[0][0] and np.array_equal(g, results[0][1]) for f, g in results)
