"""Theory layer of the block-NTK family: closed forms against the spec's reference table and
independent numpy computations, symbolic derivations, and bad input."""

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, strategies as st

from theory import ntk as th
from theory._validate import InstanceError

# spec/ntk_collapse.md, "Reference values (s = 1, small-initialisation limit)", 4 decimals
REFERENCE_TABLE = [
    # C, m, kappa, lambda_0, lambda_c, lambda_g, ||mu_c - h_bar||^2, ||W||_F^2, escape, late within
    (3, 4, (1.0, 0.6, 0.2), 0.4, 2.0, 4.4, 0.4714, 2.8284, 2.8284, 0.5657),
    (4, 3, (1.0, 0.5, 0.0), 0.5, 2.0, 2.0, 0.6124, 3.6742, 2.4495, 0.6124),
]


@st.composite
def pd_instances(draw, max_c=5, max_m=5):
    """C 2..5, m 2..5 and kappa with K positive definite (drawn through its eigenvalues)."""
    C = draw(st.integers(2, max_c))
    m = draw(st.integers(2, max_m))
    l0 = draw(st.floats(0.05, 3.0))
    lc = draw(st.floats(0.05, 3.0))
    lg = draw(st.floats(0.05, 3.0))
    # invert the eigenvalue formulas: kc - kn = (lc - l0)/m, kn = (lg - lc)/(C m), kd = l0 + kc
    kn = (lg - lc) / (C * m)
    kc = kn + (lc - l0) / m
    kd = l0 + kc
    return th.NTKInstance(C, m, (kd, kc, kn))


@pytest.mark.parametrize("row", REFERENCE_TABLE, ids=lambda r: f"C{r[0]}m{r[1]}" if isinstance(r, tuple) else None)
def test_reference_table(row):
    C, m, kappa, l0, lc, lg, msq, wsq, esc, late = row
    inst = th.NTKInstance(C, m, kappa)
    assert inst.eigenvalues == pytest.approx((l0, lc, lg), abs=1e-12)
    lim = th.small_init_limits(inst)
    assert lim["mean_sq_norm"] == pytest.approx(msq, abs=5e-5)
    assert lim["W_fro_sq"] == pytest.approx(wsq, abs=5e-5)
    assert lim["escape_rate"] == pytest.approx(esc, abs=5e-5)
    assert lim["late_within_rate"] == pytest.approx(late, abs=5e-5)


def test_rates_scale_with_s_limits_do_not():
    a = th.NTKInstance(3, 4, (1.0, 0.6, 0.2))
    b = th.NTKInstance(3, 4, (1.0, 0.6, 0.2), s=2.5)
    la, lb = th.small_init_limits(a), th.small_init_limits(b)
    assert lb["escape_rate"] == pytest.approx(2.5 * la["escape_rate"])
    assert lb["late_within_rate"] == pytest.approx(2.5 * la["late_within_rate"])
    assert lb["mean_sq_norm"] == la["mean_sq_norm"] and lb["W_fro_sq"] == la["W_fro_sq"]
    assert th.residual_rates(b)["global"] == pytest.approx(2.5 * 4.4)


@given(pd_instances())
def test_spectrum_matches_numpy(inst):
    C, m = inst.classes, inst.per_class
    K = th.block_kernel(C, m, inst.kappa)
    # K written entry by entry from its definition (independent of block_kernel's formula)
    K2 = np.array([[inst.kappa[0] if i == j else (inst.kappa[1] if i // m == j // m else inst.kappa[2])
                    for j in range(C * m)] for i in range(C * m)])
    np.testing.assert_allclose(K, K2, atol=1e-14)
    pred = np.sort(np.repeat(inst.eigenvalues, th.multiplicities(C, m)))
    np.testing.assert_allclose(np.linalg.eigvalsh(K2), pred, atol=1e-10)


@given(pd_instances())
def test_inverse_and_projectors(inst):
    C, m = inst.classes, inst.per_class
    P0, Pc, Pg = th.projectors(C, m)
    for P in (P0, Pc, Pg):
        np.testing.assert_allclose(P @ P, P, atol=1e-12)
    np.testing.assert_allclose(P0 + Pc + Pg, np.eye(C * m), atol=1e-12)
    np.testing.assert_allclose(P0 @ Pc, 0, atol=1e-12)
    assert [round(np.trace(P)) for P in (P0, Pc, Pg)] == list(th.multiplicities(C, m))
    K = th.block_kernel(C, m, inst.kappa)
    np.testing.assert_allclose(th.kernel_inverse(inst), np.linalg.inv(K), rtol=1e-8, atol=1e-8 * np.linalg.cond(K))


@given(pd_instances())
def test_alpha_identity(inst):
    l0, lc, lg = inst.eigenvalues
    kd, kc, kn = inst.kappa
    m, C = inst.per_class, inst.classes
    a_code = kn / (l0 / m + kc + (C - 1) * kn)
    assert th.alpha(inst) == pytest.approx(a_code, rel=1e-9, abs=1e-12)
    assert 1 - th.alpha(inst) * C == pytest.approx(lc / lg, rel=1e-9)


@given(pd_instances(max_c=4, max_m=4), st.integers(1, 5), st.integers(0, 10_000))
def test_invariant_forms_agree(inst, n, seed):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((inst.classes, n))
    H = rng.standard_normal((n, inst.N))
    K = th.block_kernel(inst.classes, inst.per_class, inst.kappa)
    E_def = W.T @ W - H @ np.linalg.solve(K, H.T)
    scale = 1 + np.abs(E_def).max() * np.linalg.cond(K)
    np.testing.assert_allclose(th.invariant(W, H, inst), E_def, atol=1e-10 * scale)
    np.testing.assert_allclose(th.invariant_code_form(W, H, inst), E_def, atol=1e-10 * scale)


def test_decompose_reassembles():
    rng = np.random.default_rng(0)
    H = rng.standard_normal((3, 12))
    hbar, M, D = th.decompose(H, 3, 4)
    np.testing.assert_allclose(hbar[:, None] + np.repeat(M, 4, axis=1) + D, H, atol=1e-14)
    np.testing.assert_allclose(M.sum(axis=1), 0, atol=1e-14)
    np.testing.assert_allclose(D.reshape(3, 3, 4).sum(axis=2), 0, atol=1e-14)


def test_output_kernel_constants():
    assert th.output_kernel_constants((1.0, 0.5, 0.2), 4.0, (2.0, 1.0, 0.0)) == (7.0, 4.0, 1.8)


@given(st.integers(3, 5), st.floats(0.0, 0.9), st.integers(0, 1000))
def test_nonetf_gram_solves_identity(C, frac, seed):
    inst = th.NTKInstance(C, 3, (1.0, 0.4, 0.1))
    l0, lc, lg = inst.eigenvalues
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(C)
    u -= u.mean()
    u /= np.linalg.norm(u)
    g = u * math.sqrt(frac * lg / inst.N)  # (N/lg)|g|^2 = frac < 1
    G = th.nonetf_gram(inst, g)
    J = np.eye(C) - np.ones((C, C)) / C
    np.testing.assert_allclose((inst.per_class / lc) * G @ G + (inst.N / lg) * np.outer(g, g), J, atol=1e-12)
    np.testing.assert_allclose(G @ np.ones(C), 0, atol=1e-12)
    from theory.geometry import distance_to_etf
    d = distance_to_etf(G)
    if frac > 0.05:
        assert d > 1e-3  # not an ETF once g != 0 (C >= 3)
    if frac == 0:
        assert d < 1e-12


def test_nonetf_gram_rejects_large_g():
    inst = th.NTKInstance(3, 3, (1.0, 0.4, 0.1))
    with pytest.raises(InstanceError, match="g"):
        th.nonetf_gram(inst, np.array([10.0, -10.0, 0.0]))


def test_nc1_zero_loss_bound_formula():
    inst = th.NTKInstance(3, 4, (1.0, 0.6, 0.2))
    E = np.diag([-2.0, 0.5])
    assert th.nc1_zero_loss_bound(inst, E, 3) == pytest.approx(3 * 0.4 * 2.0)
    assert th.nc1_zero_loss_bound(inst, np.eye(2), 3) == 0.0


# ------------------------------------------------------------------ symbolic

@pytest.mark.parametrize("C,m", [(2, 2), (2, 3), (3, 2), (3, 3), (4, 2)])
def test_symbolic_spectrum(C, m):
    exprs, deficit = th.sym_spectrum_residuals(C, m)
    assert deficit == 0
    assert all(sp.expand(e) == 0 for e in exprs)


def test_symbolic_spectrum_wrong_eigenvalue_is_nonzero():
    def wrong(C, m, kd, kc, kn):
        return (kd - kc, kd + (m - 1) * kc - m * kn + kn / 10, kd + (m - 1) * kc + m * (C - 1) * kn)

    exprs, _ = th.sym_spectrum_residuals(3, 2, wrong)
    assert any(sp.expand(e) != 0 for e in exprs)


@pytest.mark.parametrize("C,m", [(2, 2), (3, 3)])
def test_symbolic_inverse(C, m):
    exprs, Kinv = th.sym_inverse_residual(C, m)
    assert exprs == [0]
    kd, kc, kn = th.kappa_symbols()
    num = np.array(Kinv.subs({kd: 1.0, kc: 0.6, kn: 0.2}).evalf(), dtype=float)
    np.testing.assert_allclose(num, np.linalg.inv(th.block_kernel(C, m, (1.0, 0.6, 0.2))), atol=1e-12)


def test_symbolic_alpha():
    assert [sp.simplify(e) for e in th.sym_alpha_identities()] == [0, 0]


def test_symbolic_invariant_derivative_zero():
    assert th.sym_invariant_derivative(2, 2, 2) == [0]


def test_symbolic_invariant_forms():
    dec, code = th.sym_invariant_forms(3, 2, 2)
    assert dec == [0] and code == [0]
    dec_bad, _ = th.sym_invariant_forms(3, 2, 2, weights=(1, 1, 0))
    assert any(e != 0 for e in dec_bad)


def test_symbolic_deviation_ode_and_scatter():
    ode, scatter, rhs = th.sym_deviation_ode(2, 2, 2)
    assert ode == [0] and scatter == 0 and rhs.is_nonpositive
    ode_bad, _, _ = th.sym_deviation_ode(2, 2, 2, eigen_index=1)
    assert any(e != 0 for e in ode_bad)


def test_symbolic_limits_and_configurations():
    assert all(sp.simplify(v) == 0 for v in th.sym_limit_identities().values())
    fit, E, G = th.sym_etf_configuration(3)
    assert all(x == 0 for x in fit + E + G)
    ident, ratio = th.sym_nonetf_identity(3)
    assert all(x == 0 for x in ident)
    assert sp.expand(ratio ** 2 - 1).is_negative


# ------------------------------------------------------------------ bad input

@pytest.mark.parametrize("kappa,which", [
    ((1.0, 1.0, 0.2), "lambda_0"),          # kd = kc
    ((1.0, 0.2, 0.5), "lambda_c"),          # kd + 3 kc - 4 kn = 1 + 0.6 - 2 < 0
    ((1.0, 0.6, -0.4), "lambda_g"),         # 1 + 1.8 - 8 * 0.4 < 0
])
def test_not_positive_definite_names_eigenvalue(kappa, which):
    with pytest.raises(InstanceError) as exc:
        th.NTKInstance(3, 4, kappa)
    msg = str(exc.value)
    assert "not positive definite" in msg and which in msg and "<= 0" in msg and "kappa" in msg
    assert "\n" not in msg


@pytest.mark.parametrize("kwargs,needle", [
    (dict(classes=3, per_class=1, kappa=(1, 0.5, 0)), "m (samples per class) must be >= 2"),
    (dict(classes=1, per_class=3, kappa=(1, 0.5, 0)), "C (classes) must be >= 2"),
    (dict(classes=3, per_class=3, kappa=(1, 0.5)), "kappa must have"),
    (dict(classes=3, per_class=3, kappa=(1, 0.5, 0, 0)), "exactly 3"),
    (dict(classes=3, per_class=3, kappa=(1, float("nan"), 0)), "kappa[1]"),
    (dict(classes=3, per_class=3, kappa=(1, 0.5, 0), s=0), "s must be > 0"),
    (dict(classes=2.5, per_class=3, kappa=(1, 0.5, 0)), "C (classes) must be an integer"),
])
def test_bad_instances(kwargs, needle):
    with pytest.raises(InstanceError) as exc:
        th.NTKInstance(**kwargs)
    assert needle in str(exc.value)
