"""Deep UFM (docs/deep_ufm.md): the deep linear MSE optimum against 50-digit mpmath and against multi-start
gradient descent on the full deep model; the certificates' enclosures; exact witness evaluation; symbolic steps."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proofs_check.core import Verdict, symbolic_zero
from solvers import deep_ufm as S
from theory import deep_ufm as T
from theory._validate import InputError
from tests._reference import mp_scalar_min

pytest.importorskip("flint")


CASES = [(1, 6, (0.01,), 3), (4, 12, (0.01,), 3), (5, 500, (1e-3,), 5), (1, 3, (0.3,), 1), (1, 2, (0.2,), 2),
         (9, 15, (0.01,), 3), (1, 15, (0.01,), 3), (1, 10, (0.004,), 4), (3, 3, (1e-6,), 8), (2, 4, (0.5,), 2)]


@pytest.mark.parametrize("count,N,lams,L", CASES)
def test_scalar_certificate_encloses_50_digit_minimum(count, N, lams, L):
    lam = lams * (L + 1)
    v, s = mp_scalar_min(count, N, lam, L)
    sc = S.certify_scalar(count, N, lam, L)
    assert sc.lower <= float(v) <= sc.upper
    assert sc.upper - sc.lower <= 1e-12 * max(1.0, float(v))
    # the branch (the minimiser is 0 or positive) matches the 50-digit scan
    assert sc.branch == ("positive" if s > 0 else "zero")
    if s > 0:
        assert sc.s_plus[0] <= float(s) * (1 + 1e-12) and float(s) * (1 - 1e-12) <= sc.s_plus[1]
    # the float prediction agrees too
    C = T.reg_constant(T.DeepUFMInstance(L, "linear", "mse", (count, 1), 2, lam))
    pred = T.scalar_solution(math.sqrt(count), N, C, L)
    assert abs(pred.value - float(v)) <= 1e-12 * max(1.0, float(v))


@settings(max_examples=15, deadline=None)
@given(count=st.integers(1, 50), extra=st.integers(0, 200), L=st.integers(1, 7),
       loglam=st.floats(-6, 0))
def test_scalar_certificate_property(count, extra, L, loglam):
    N = count + extra + 1
    lam = (10.0 ** loglam,) * (L + 1)
    v, _ = mp_scalar_min(count, N, lam, L, dps=30)
    sc = S.certify_scalar(count, N, lam, L)
    assert sc.lower <= float(v) * (1 + 1e-14) + 1e-300 and float(v) * (1 - 1e-14) <= sc.upper


def test_rank_threshold_in_lambda():
    """Balanced K = 3, L = 3: rank K below a threshold lambda*, 0 above; lambda* located by 50-digit bisection on
    phi(s_+) = phi(0), and the certificate's rank flips there (a threshold, not a continuous decay)."""
    K, n, L = 3, 2, 3
    N = K * n

    def positive_better(lam):
        v, s = mp_scalar_min(n, N, (lam,) * (L + 1), L, dps=40)
        return s > 0

    lo, hi = 1e-3, 1.0
    assert positive_better(lo) and not positive_better(hi)
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if positive_better(mid) else (lo, mid)
    below = S.certify_linear_mse(T.balanced(L, "linear", "mse", K, n, K, lo * 0.99))
    above = S.certify_linear_mse(T.balanced(L, "linear", "mse", K, n, K, hi * 1.01))
    assert below.details["rank"] == K and above.details["rank"] == 0
    # just below the threshold the positive singular value is bounded away from 0 (a jump)
    sc = S.certify_scalar(n, N, (lo * 0.99,) * (L + 1), L)
    assert sc.s_plus[0] > 0.1 * math.sqrt(n)


def test_imbalanced_optimum_against_mpmath_and_width():
    """Imbalanced counts, width 3 < K = 4: the optimum is the sum of the three largest classes' scalar minima plus
    the dropped class's ||y||^2/(2N), computed here in mpmath."""
    counts, D, L, lam = (9, 4, 1, 1), 3, 3, 0.01
    inst = T.DeepUFMInstance(L, "linear", "mse", counts, D, (lam,))
    N = sum(counts)
    total = mp.mpf(0)
    for i, c in enumerate(sorted(counts, reverse=True)):
        total += mp_scalar_min(c, N, (lam,) * (L + 1), L)[0] if i < D else mp.mpf(c) / (2 * N)
    cert = S.certify_linear_mse(inst)
    assert cert.lower_bound <= float(total) <= cert.upper
    assert abs(T.linear_mse_optimum(inst).value - float(total)) < 1e-13


def test_gradient_descent_never_below_certificate():
    """Multi-start L-BFGS on the FULL deep linear model (one column per sample, several seeds): never below the
    proven lower bound beyond round-off, and the best start reaches it (the certificate is not loose)."""
    for inst in (T.balanced(3, "linear", "mse", 3, 2, 3, 0.01), T.DeepUFMInstance(2, "linear", "mse", (5, 2, 1), 3,
                                                                                   (0.02, 0.01, 0.05))):
        cert = S.certify_linear_mse(inst)
        best = math.inf
        for seed in (0, 1):
            sol = S.multistart(inst, starts=3, seed=seed, max_evals=3000, collapsed=False)
            for r in sol.diagnostics["runs"]:
                assert r["value"] >= cert.lower_bound - 1e-12
            best = min(best, sol.value)
        assert best <= cert.upper + 1e-8


def test_realised_point_attains_the_optimum_with_rotations():
    inst = T.DeepUFMInstance(4, "linear", "mse", (6, 3, 3, 1), 4, (1e-3, 2e-3, 1e-3, 5e-3, 1e-2))
    pred = T.linear_mse_optimum(inst)
    cert = S.certify_linear_mse(inst)
    for seed in (0, 1, 2):
        model, x = S.linear_point(inst, pred.singular_values, collapsed=False, seed=seed)
        v = model.value(x)
        assert cert.lower_bound - 1e-13 <= v <= cert.upper + 1e-12
        # balancedness at the optimum: lambda_{l+1} W_{l+1}^T W_{l+1} = lambda_l W_l W_l^T (and W_1^T W_1 vs H H^T)
        H, Ws = model.unpack(x)
        lam = inst.lams
        facs = [H] + Ws
        for j in range(len(facs) - 1):
            A, B = facs[j], facs[j + 1]
            lhs = lam[j + 1] * B.T @ B
            rhs = lam[j] * A @ A.T
            assert np.allclose(lhs, rhs, atol=1e-10 * max(1.0, np.abs(rhs).max()))


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    for act in ("linear", "relu"):
        for loss in ("mse", "ce"):
            for collapsed in (True, False):
                inst = T.DeepUFMInstance(3, act, loss, (2, 1, 3), 4, (0.01, 0.02, 0.03, 0.04))
                m = S.DeepModel(inst, collapsed=collapsed)
                x = rng.standard_normal(m.nvar)
                f, g = m.value_grad(x)
                d = rng.standard_normal(m.nvar)
                h = 1e-6
                fd = (m.value(x + h * d) - m.value(x - h * d)) / (2 * h)
                assert abs(fd - g @ d) <= 1e-6 * max(1.0, abs(fd))


def test_collapsed_and_full_models_agree_on_collapsed_points():
    inst = T.DeepUFMInstance(3, "relu", "mse", (3, 1, 2), 4, (0.01,))
    mc = S.DeepModel(inst, collapsed=True)
    mf = S.DeepModel(inst, collapsed=False)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(mc.nvar)
    H, Ws = mc.unpack(x)
    Hf = H[:, np.repeat(np.arange(3), inst.counts)]
    assert abs(mc.value(x) - mf.value(mf.pack(Hf, Ws))) < 1e-12


def test_exact_value_matches_float_and_mpmath():
    """fmpq evaluation of a class-collapsed ReLU point against an mpmath evaluation written out here."""
    inst = T.balanced(3, "relu", "mse", 3, 2, 4, 0.01)
    m = S.DeepModel(inst)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(m.nvar) * 0.7
    exact = S.exact_mse_value(inst, x)
    H, Ws = m.unpack(x)
    with mp.workdps(60):
        h = mp.matrix(H.tolist())
        for W in Ws[:-1]:
            z = mp.matrix(W.tolist()) * h
            h = mp.matrix([[max(z[i, j], 0) for j in range(z.cols)] for i in range(z.rows)])
        O = mp.matrix(Ws[-1].tolist()) * h
        loss = mp.fsum((O[i, c] - (1 if i == c else 0)) ** 2 * 2 for i in range(3) for c in range(3)) / (2 * 6)
        reg = mp.mpf(0.01) / 2 * 2 * mp.fsum(mp.mpf(v) ** 2 for v in H.ravel().tolist())
        reg += mp.fsum(mp.mpf(0.01) / 2 * mp.fsum(mp.mpf(v) ** 2 for v in W.ravel().tolist()) for W in Ws)
        ref = loss + reg
        assert abs(mp.mpf(int(exact.p)) / int(exact.q) - ref) < mp.mpf(10) ** -40
    assert abs(S.fmpq_float(exact) - m.value(x)) < 1e-12


def test_stored_witnesses_are_below_dnc_exactly():
    ws = S.stored_witnesses()
    assert len(ws) >= 2
    for inst, x in ws:
        r = S.witness_report(inst, x)
        assert r["below_dnc_proven"], inst.label()
        # independent: the DNC value in 50-digit mpmath
        v, s = mp_scalar_min(inst.n, inst.N, inst.lams, inst.layers)
        assert s > 0
        assert r["value_exact"] < inst.K * float(v)
        # the witness is lower rank somewhere in the network
        assert min(f["rank"] for f in r["structure"]["features"][:-1]) < inst.K


def test_dnc_point_value_and_enclosure():
    inst = T.balanced(4, "relu", "mse", 5, 1, 8, 0.004)
    enc = S.certify_dnc(inst)
    sc = T.scalar_solution(1.0, 5, T.reg_constant(inst), 4)
    model, x = S.dnc_point(inst, sc.s_plus)
    assert enc[0] - 1e-14 <= model.value(x) <= enc[1] + 1e-14
    H, Ws = model.unpack(x)
    assert (H >= 0).all() and all((W >= 0).all() for W in Ws)  # ReLU inactive at DNC
    v, _ = mp_scalar_min(1, 5, inst.lams, 4)
    assert enc[0] <= 5 * float(v) * (1 + 1e-15) + 1e-15


def test_symbolic_steps_and_a_false_step():
    for L in (1, 2, 3, 6):
        assert symbolic_zero("s", T.derivation_stationarity(L)).verdict is Verdict.VERIFIED
        assert all(symbolic_zero("b", e).verdict is Verdict.VERIFIED for e in T.derivation_balanced_factorisation(L))
    assert all(x == 0 for x in T.derivation_balancedness())
    import sympy as sp

    t, y, N, C = sp.symbols("t y N C", positive=True)
    wrong = sp.diff((t ** 4 - y) ** 2 / (2 * N) + C * t ** 2, t) - t / N * (4 * t ** 6 - 3 * y * t ** 2 + 2 * N * C)
    assert symbolic_zero("wrong", wrong).verdict is not Verdict.VERIFIED  # a wrong step is never verified
    assert sp.expand(wrong) != 0


def test_ce_bound_holds_below_zero_point():
    """Derived: every point with value <= log K has at most floor(log K/(C tau^p)) singular values above tau."""
    inst = T.balanced(3, "linear", "ce", 4, 1, 4, 0.2)
    m = S.DeepModel(inst)
    rng = np.random.default_rng(0)
    tau = 0.5
    B = T.ce_rank_bound(inst, tau)
    for _ in range(30):
        x = rng.standard_normal(m.nvar) * rng.uniform(0.05, 1.5)
        if m.value(x) <= math.log(4):
            assert int(np.sum(S.product_singular_values(m, x) > tau)) <= B


@pytest.mark.parametrize("kwargs,what", [
    ({"layers": 0}, "layers"), ({"layers": 13}, "layers"), ({"activation": "tanh"}, "activation"),
    ({"loss": "hinge"}, "loss"), ({"counts": (3,)}, "counts"), ({"counts": (3, 0)}, "counts[1]"),
    ({"width": 0}, "width"), ({"lams": (0.1, 0.2)}, "lambda"), ({"lams": (-1.0,)}, "lambda[0]"),
    ({"lams": (float("nan"),)}, "lambda[0]"), ({"lams": (1e-20,)}, "lambda[0]")])
def test_bad_instances_name_the_parameter(kwargs, what):
    base = dict(layers=3, activation="linear", loss="mse", counts=(2, 2), width=2, lams=(0.1,))
    base.update(kwargs)
    with pytest.raises(InputError, match=what.replace("[", r"\[").replace("]", r"\]")):
        T.DeepUFMInstance(**base)


def test_budget_refused_before_work():
    inst = T.balanced(4, "relu", "mse", 100, 1, 512, 1e-3)
    m = S.DeepModel(inst)
    with pytest.raises(InputError, match="work budget"):
        S.multistart(inst, starts=50, max_evals=100_000)
    assert m.evals == 0


def test_torch_objective_matches_numpy():
    pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    for act in ("linear", "relu"):
        for loss in ("mse", "ce"):
            inst = T.DeepUFMInstance(3, act, loss, (2, 1, 3), 4, (0.01, 0.02, 0.03, 0.04))
            m = S.DeepModel(inst)
            x = rng.standard_normal(m.nvar)
            f, g = m.value_grad(x)
            f2, g2 = S.TorchObjective(m).value_grad(x)
            assert abs(f - f2) <= 1e-12 * max(1.0, abs(f)) and np.abs(g - g2).max() <= 1e-12 * max(1.0, np.abs(g).max())
    sol = S.multistart(T.balanced(3, "linear", "mse", 3, 2, 3, 0.01), starts=1, max_evals=500, backend="torch")
    cert = S.certify_linear_mse(T.balanced(3, "linear", "mse", 3, 2, 3, 0.01))
    assert sol.value >= cert.lower_bound - 1e-12 and "torch" in sol.method


def _nuclear(M):
    return float(np.linalg.svd(M, compute_uv=False).sum())


@settings(max_examples=200)
@given(D=st.integers(1, 6), seed=st.integers(0, 10**6), shift=st.floats(-2.0, 2.0))
def test_relu_does_not_increase_the_nuclear_norm_of_two_columns(D, seed, shift):
    # the lemma behind S.certify_relu_two_column_bound (docs/deep_ufm.md, "Two samples and one ReLU")
    Z = np.random.default_rng(seed).standard_normal((D, 2)) + shift
    assert _nuclear(np.maximum(Z, 0.0)) <= _nuclear(Z) * (1 + 1e-12) + 1e-300


def test_relu_can_increase_the_nuclear_norm_of_three_columns():
    # why the lemma is stated for two columns only (docs/deep_ufm.md): ratio 1.036
    Z = np.array([[3.0, 4.0, 0.0], [-1.0, 0.0, 2.0], [0.0, 3.0, 3.0]])
    assert _nuclear(np.maximum(Z, 0.0)) > 1.03 * _nuclear(Z)


@pytest.mark.parametrize("L,K,n,D,lam", [(2, 3, 1, 3, 0.01), (3, 2, 2, 3, 0.01), (4, 3, 1, 4, 0.005),
                                         (2, 2, 1, 3, 0.01), (2, 2, 1, 2, 0.2)])
def test_relu_lower_bounds_hold_at_random_and_locally_optimal_points_of_the_full_model(L, K, n, D, lam):
    inst = T.balanced(L, "relu", "mse", K, n, D, lam)
    chain = S.certify_relu_chain_bound(inst)
    bound = chain["lower_bound"]
    assert bound == pytest.approx(T.relu_chain_bound(inst), rel=1e-12)  # ball arithmetic vs the float formula
    two = S.certify_relu_two_column_bound(inst)
    if two is not None:
        assert two["lower_bound"] >= bound
        bound = two["lower_bound"]
    binary = S.certify_relu_two_class_bound(inst)  # K = 2: the linear optimum's bound, above the chain bound
    assert (binary is None) == (K != 2)
    if binary is not None:
        assert binary["lower_bound"] >= bound
        bound = binary["lower_bound"]
    model = S.DeepModel(inst, collapsed=False)
    rng = np.random.default_rng(L * 100 + K * 10 + n)
    vals = []
    for i in range(30):
        x = S.random_start(model, rng, scale=[0.3, 1.0, 2.0][i % 3], rank=[None, 1][i % 2])
        vals.append(model.value(x))
        if i < 4:
            vals.append(model.value(S._lbfgs(model, x, 400).x))
    dnc = S.certify_dnc(inst)
    assert min(vals) >= bound and (dnc is None or dnc[1] >= bound)


def test_relu_chain_bound_is_the_linear_optimum_for_one_layer():
    inst = T.balanced(1, "linear", "mse", 3, 2, 3, 0.01)
    assert S.certify_relu_chain_bound(inst)["lower_bound"] == pytest.approx(S.certify_linear_mse(inst).lower_bound,
                                                                            rel=1e-14)


# ------------------------------------------------------------------------------------------
# two classes, any depth (docs/deep_ufm.md, "Two classes, any depth"): the ReLU optimum is the linear one
# ------------------------------------------------------------------------------------------

_LAMS = (0.001, 0.004, 0.01, 0.03, 0.1, 0.3)


@settings(max_examples=60, deadline=None)
@given(L=st.integers(1, 5), D=st.integers(1, 4), n1=st.integers(1, 3), n2=st.integers(1, 3),
       lam=st.sampled_from(_LAMS), seed=st.integers(0, 10**6), scale=st.sampled_from([0.2, 0.7, 1.5, 3.0]),
       low_rank=st.booleans(), local=st.booleans())
def test_relu_two_class_bound_is_below_every_random_feasible_point(L, D, n1, n2, lam, seed, scale, low_rank, local):
    # a bound above one feasible point would be a bug in the proof: random points of the full ReLU model (one column
    # per sample, any counts), rank-1 starts (the ReLU "rank restoring" regime) and short local solves
    inst = T.DeepUFMInstance(L, "relu", "mse", (n1, n2), D, (lam,))
    bound = S.certify_relu_two_class_bound(inst)["lower_bound"]
    model = S.DeepModel(inst, collapsed=False)
    rng = np.random.default_rng(seed)
    x = S.random_start(model, rng, scale=scale, rank=1 if low_rank else None)
    if local:
        x = S._lbfgs(model, x, 150).x
    assert model.value(x) >= bound


def test_relu_two_class_bound_is_none_outside_two_classes_and_attained_by_dnc():
    assert S.certify_relu_two_class_bound(T.balanced(2, "relu", "mse", 3, 1, 3, 0.01)) is None
    assert S.certify_relu_two_class_bound(T.balanced(2, "relu", "ce", 2, 1, 3, 0.01)) is None
    inst = T.balanced(4, "relu", "mse", 2, 1, 2, 0.01)
    b = S.certify_relu_two_class_bound(inst)["lower_bound"]
    lo, hi = S.certify_dnc(inst)
    sc = T.scalar_solution(1.0, 2, T.reg_constant(inst), 4)
    model, x = S.dnc_point(inst, sc.s_plus)  # a ReLU point (nonnegative, ReLU inactive) with the DNC value
    assert b <= lo and hi - b <= 1e-14 and model.value(x) >= b
    # 50 digits: the bound matches 2 phi(s_+) (the DNC value), which is below phi's zero value 1/2 here
    ref = 2 * mp_scalar_min(1, 2, inst.lams, 4)[0]
    assert abs(b - float(ref)) <= 1e-14 and float(ref) < 0.5


def _fq_mat(A):
    import flint

    return flint.fmpq_mat([[flint.fmpq(int(v)) for v in row] for row in A])


def _fq_trace_form(Zrows, Yinv):
    """sum over rows r of r^T Yinv r (exact)."""
    import flint

    tot = flint.fmpq(0)
    for r in Zrows:
        for i in range(2):
            for j in range(2):
                tot += flint.fmpq(int(r[i])) * Yinv[i, j] * flint.fmpq(int(r[j]))
    return tot


@settings(max_examples=200, deadline=None)
@given(D=st.integers(2, 4), Dout=st.integers(1, 4), seed=st.integers(0, 10**6))
def test_nonnegative_two_column_layer_needs_no_more_weight_after_relu_exact(D, Dout, seed):
    # inequality (3) of docs/deep_ufm.md in exact rationals: for A >= 0 (D x 2, rank 2) and any W, with
    # G = A^T A, P = Z^T Z (Z = W A) and Q = relu(Z)^T relu(Z): tr(Q G^-1) <= tr(P G^-1) <= ||W||_F^2, and the
    # linear map W' = relu(Z) A^+ reproduces relu(Z) with ||W'||_F^2 = tr(Q G^-1)
    rng = np.random.default_rng(seed)
    A = rng.integers(0, 6, size=(D, 2))
    if np.linalg.matrix_rank(A) < 2:
        A[0, 0], A[1, 1] = A[0, 0] + 1, A[1, 1] + 2
        A[0, 1], A[1, 0] = 0, 0
    W = rng.integers(-5, 6, size=(Dout, D))
    Z = W @ A
    R = np.maximum(Z, 0)
    Aq = _fq_mat(A)
    Ginv = (Aq.transpose() * Aq).inv()
    q, p = _fq_trace_form(R, Ginv), _fq_trace_form(Z, Ginv)
    assert q <= p <= int((W * W).sum())
    Wp = _fq_mat(R) * Ginv * Aq.transpose()  # relu(Z) A^+ (A has full column rank)
    assert Wp * Aq == _fq_mat(R)
    assert sum(Wp[i, j] ** 2 for i in range(Wp.nrows()) for j in range(Wp.ncols())) == q


def test_the_layer_inequality_fails_for_an_input_with_obtuse_columns():
    # why the first layer (H may have obtuse columns) needs the two-column lemma instead: A = [[1, -1], [0, 1]],
    # W = I: relu(A) = I needs ||W'||_F^2 = tr(G^-1) = 3 > ||W||_F^2 = 2 from A linearly
    A = np.array([[1.0, -1.0], [0.0, 1.0]])
    Wp = np.maximum(A, 0.0) @ np.linalg.inv(A)
    assert np.allclose(Wp @ A, np.maximum(A, 0.0)) and (Wp ** 2).sum() == pytest.approx(3.0, rel=1e-14)


def test_two_class_construction_gives_a_linear_point_no_worse_with_the_same_output():
    # the proof's construction (S.two_class_linear_point) on random ReLU points: the linear twin's point has the
    # same output on the collapsed features and an objective <= the ReLU point's; float64 pseudo-inverses are only
    # accurate for well-conditioned layer inputs, so nearly rank-deficient draws are skipped (the exact inequality
    # is the rational test above)
    rng = np.random.default_rng(7)
    tested = 0
    for t in range(150):
        L, D = int(rng.integers(1, 6)), int(rng.integers(1, 5))
        counts = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        lams = tuple(float(10 ** rng.uniform(-3, 0)) for _ in range(L + 1))
        inst = T.DeepUFMInstance(L, "relu", "mse", counts, D, lams)
        model = S.DeepModel(inst, collapsed=bool(t % 2))
        x = S.random_start(model, rng, scale=[0.3, 1.0, 2.0][t % 3])
        H, Ws = model.unpack(x)
        hs, _, _ = model.forward(H, Ws)
        sv = [np.linalg.svd(h, compute_uv=False) for h in hs[1:]]
        if any(len(s) > 1 and 0 < s[-1] < 1e-4 * s[0] for s in sv):
            continue
        lin, xl = S.two_class_linear_point(model, x)
        v, vl = model.value(x), lin.value(xl)
        lb = S.certify_relu_two_class_bound(inst)["lower_bound"]
        assert lb * (1 - 1e-12) <= vl <= v * (1 + 1e-10) + 1e-15, (inst.label(), v, vl, lb)
        if model.m == 2:  # collapsed input: the features are already one per class, the output must be kept
            Hl, Wl = lin.unpack(xl)
            O_lin = lin.forward(Hl, Wl)[2]
            O = model.forward(H, Ws)[2]
            assert np.allclose(O_lin[:, lin.labels == 0], O[:, [0]], rtol=1e-8, atol=1e-10)
            assert np.allclose(O_lin[:, lin.labels == 1], O[:, [1]], rtol=1e-8, atol=1e-10)
        tested += 1
    assert tested >= 100
    with pytest.raises(InputError):
        S.two_class_linear_point(S.DeepModel(T.balanced(2, "relu", "mse", 3, 1, 3, 0.01)), np.zeros(36))
