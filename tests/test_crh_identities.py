"""CRH exact identities: symbolic (sympy) and to machine precision on random matrices
(hypothesis over shapes and ranks); deliberately false identities must be REFUTED."""

import re

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, strategies as st

from proofs_check.claims import crh as C
from proofs_check.core import RunContext, Verdict
from solvers import crh as S
from theory import crh as T

TOL = 1e-10  # same budget as C.IDENTITY_RTOL: rounding on O(1) matrices of size <= 9 is ~1e-15


def rel(a, b):
    return np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b)))


def eig_power(A, p):
    """Independent PSD power (via SVD of the symmetric PSD matrix, not theory.crh.psd_power)."""
    U, s, _ = np.linalg.svd((A + A.T) / 2)
    f = np.ones_like(s) if p == 0 else np.where(s > 1e-13 * max(s.max(), 1e-300), s, 0.0) ** p
    return (U * f) @ U.T


shape_rank = st.tuples(st.integers(1, 9), st.integers(1, 9)).flatmap(
    lambda mn: st.tuples(st.just(mn[0]), st.just(mn[1]), st.integers(1, min(mn))))


def random_W(seed, m, n, r):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, r)) @ rng.standard_normal((r, n)) / np.sqrt(r), rng


# ---- symbolic -----------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [T.sym_backprop, T.sym_transfer, T.sym_scaled_projector, T.sym_isotropy_on_range,
                                T.sym_stationarity, T.sym_one_step])
def test_symbolic_identities_simplify(fn):
    for name, obj in fn().items():
        kind, obj = obj if isinstance(obj, tuple) else ("zero", obj)
        if kind == "true":
            assert sp.simplify(obj) is sp.true, name
        else:
            entries = list(obj) if hasattr(obj, "shape") else [obj]
            assert all(sp.simplify(e) == 0 for e in entries), name


def test_symbolic_false_transfer_exponent_is_nonzero():
    out = T.sym_transfer(shift=2)
    assert any(sp.simplify(e) != 0 for v in out.values() for e in v)


def test_exponent_table_matches_hand_derivation():
    table = T.exponent_table()
    # Hand derivation (spec/crh.md): with H_a ~ Z_a^x, G_b ~ Z_b^y the six relations read
    # a-RGA: x = y+1, a-RWA: x = 1, a-GWA: y = 0, b-RGA: x+1 = y, b-RWA: x = 0, b-GWA: y = 1.
    expect = {("a-RGA", "b-RWA"): (0, -1), ("a-RGA", "b-GWA"): (2, 1), ("a-RWA", "b-RGA"): (1, 2),
              ("a-RWA", "b-GWA"): (1, 1), ("a-GWA", "b-RGA"): (-1, 0), ("a-GWA", "b-RWA"): (0, 0)}
    degenerate = {("a-RGA", "b-RGA"), ("a-RWA", "b-RWA"), ("a-GWA", "b-GWA")}
    assert len(table) == 9
    for pair, entry in table.items():
        if pair in degenerate:
            assert entry["degenerate"]
        else:
            assert (entry["x"], entry["y"]) == expect[pair]
    from fractions import Fraction as F
    assert T.exponent_values(table) == {F(-1), F(0), F(1, 3), F(1, 2), F(1), F(2), F(3)}
    # pair (a-RWA, b-RGA): H_a ~ Z, G_a ~ Z^3 so H_a ~ G_a^(1/3)
    assert table[("a-RWA", "b-RGA")]["exponents"]["a-RGA"] == sp.Rational(1, 3)


# ---- numeric, hypothesis over shapes and ranks ---------------------------------------------

@given(shape_rank, st.integers(0, 2**31 - 1), st.integers(1, 30))
def test_backprop_moments(smr, seed, n):
    m, d, r = smr
    W, rng = random_W(seed, m, d, r)
    h = rng.standard_normal((n, d))
    g = rng.standard_normal((n, m))
    M = S.layer_matrices(W, h, g)
    Hb = sum(np.outer(W @ x, W @ x) for x in h) / n  # per-sample loop, independent of the solver
    Ga = sum(np.outer(W.T @ y, W.T @ y) for y in g) / n
    assert rel(M.H_b, Hb) < TOL and rel(W @ M.H_a @ W.T, Hb) < TOL
    assert rel(M.G_a, Ga) < TOL and rel(W.T @ M.G_b @ W, Ga) < TOL


@given(shape_rank, st.integers(0, 2**31 - 1), st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.7, 3.0]))
def test_transfer_numeric(smr, seed, p):
    m, d, r = smr
    W, _ = random_W(seed, m, d, r)
    lhs = W @ eig_power(W.T @ W, p) @ W.T
    assert rel(lhs, eig_power(W @ W.T, p + 1)) < 1e-9
    assert rel(W @ T.psd_power(W.T @ W, p) @ W.T, T.psd_power(W @ W.T, p + 1)) < 1e-9


@given(shape_rank, st.integers(0, 2**31 - 1))
def test_isotropy_on_range_numeric(smr, seed):
    m, d, r = smr
    W, rng = random_W(seed, m, d, r)
    U, s, Vt = np.linalg.svd(W)
    k = int(np.sum(s > 1e-10 * s[0]))
    P = Vt[:k].T @ Vt[:k]
    K = rng.standard_normal((d, d))
    H = 2.0 * P + (np.eye(d) - P) @ K @ K.T @ (np.eye(d) - P)
    assert np.max(np.abs(W @ (H - 2.0 * np.eye(d)) @ W.T)) < TOL * max(1, np.linalg.norm(W) ** 2 * np.linalg.norm(H))


@given(shape_rank, st.integers(0, 2**31 - 1), st.floats(0.001, 0.5), st.floats(0.0, 0.1))
def test_one_step_numeric(smr, seed, eta, gamma):
    m, d, r = smr
    W, rng = random_W(seed, m, d, r)
    Sb = rng.standard_normal((m, d))
    Wn = W + eta * (Sb - gamma * W)
    D = Sb - gamma * W
    pred_b = eta * (Sb @ W.T + W @ Sb.T - 2 * gamma * W @ W.T) + eta ** 2 * D @ D.T
    pred_a = eta * (Sb.T @ W + W.T @ Sb - 2 * gamma * W.T @ W) + eta ** 2 * D.T @ D
    assert rel(Wn @ Wn.T - W @ W.T, pred_b) < TOL
    assert rel(Wn.T @ Wn - W.T @ W, pred_a) < TOL


@given(st.integers(2, 8), st.integers(0, 2**31 - 1), st.floats(0.1, 5.0))
def test_scaled_projector_numeric(d, seed, c):
    rng = np.random.default_rng(seed)
    Q = S.haar_orthogonal(d, 1, rng)[0]
    lam = c * rng.integers(0, 2, d)
    A = Q @ np.diag(lam) @ Q.T
    assert rel(A @ A, c * A) < TOL
    lam[0] = 0.5 * c  # an eigenvalue outside {0, c}: ||A^2 - cA||_F = |l^2 - c l| there
    B = Q @ np.diag(lam) @ Q.T
    assert np.linalg.norm(B @ B - c * B) == pytest.approx(0.25 * c * c, rel=1e-9)


# ---- claims: true ones VERIFIED, false ones REFUTED ----------------------------------------

CTX = RunContext()


@pytest.mark.parametrize("claim", [C.backprop_claim(), C.transfer_claim(), C.scaled_projector_claim(),
                                   C.isotropy_claim(), C.one_step_claim(), C.exponent_table_claim(),
                                   C.balance_claim()], ids=lambda c: c.id)
def test_identity_claims_verified(claim):
    r = claim.run(CTX)
    assert r.verdict == Verdict.VERIFIED, r.reason


def test_false_backprop_identity_refuted():
    # H_b = W^T H_a W for a square W: wrong
    r = C.backprop_claim(predict_H_b=lambda W, H: W.T @ H @ W if W.shape[0] == W.shape[1] else W @ H @ W.T).run(CTX)
    assert r.verdict == Verdict.REFUTED
    assert any(c.verdict == Verdict.REFUTED and c.name.startswith("symbolic") for c in r.checks)
    assert any(c.verdict == Verdict.REFUTED and c.name.startswith("numeric") for c in r.checks)


def test_false_G_a_identity_refuted():
    r = C.backprop_claim(predict_G_a=lambda W, G: 1.01 * (W.T @ G @ W)).run(CTX)
    assert r.verdict == Verdict.REFUTED


@pytest.mark.parametrize("shift", [2, 0.5, 0.999])
def test_wrong_transfer_exponent_refuted(shift):
    r = C.transfer_claim(shift=shift).run(CTX)
    assert r.verdict == Verdict.REFUTED


def test_wrong_projector_eigenvalues_refuted():
    r = C.scaled_projector_claim(eigenvalues=lambda c: (0.0, 2 * c)).run(CTX)
    assert r.verdict == Verdict.REFUTED


def test_isotropy_on_wrong_subspace_refuted():
    def null_space(W):
        _, s, Vt = np.linalg.svd(W)
        k = int(np.sum(s > 1e-10 * s[0]))
        return np.eye(W.shape[1]) - Vt[:k].T @ Vt[:k]
    r = C.isotropy_claim(projector=null_space).run(CTX)
    assert r.verdict == Verdict.REFUTED


def test_one_step_without_second_order_term_refuted():
    r = C.one_step_claim(eta2_term=lambda S_, W, g: 0 * (S_ @ W.T)).run(CTX)
    assert r.verdict == Verdict.REFUTED


def test_wrong_exponent_table_refuted():
    from fractions import Fraction as F
    ref = dict(T.REFERENCE_PAIRS)
    ref[("a-RWA", "b-GWA")] = (F(1), F(2))  # wrong: (a-RWA, b-GWA) gives x = y = 1
    r = C.exponent_table_claim(reference=ref).run(CTX)
    assert r.verdict == Verdict.REFUTED


def test_balance_fails_for_tanh():
    # tanh is not positively homogeneous: the rescaling identity must fail (REFUTED)
    r = C.balance_claim(activation="tanh", claim_id="x").run(CTX)
    assert r.verdict == Verdict.REFUTED


# ---- fail closed and never REFUTED on true statements ------------------------------------------

def test_worst_error_fails_closed():
    assert C._worst([0.0, 1e-3]) == 1e-3
    assert np.isnan(C._worst([0.0, float("nan")]))  # Python's max(0.0, nan) would return 0.0
    assert np.isnan(C._worst([None, 0.0])) and np.isnan(C._worst([]))


def test_nan_measurement_is_inconclusive_never_verified():
    # a projector that produces NaN: every numeric comparison must fail closed (INCONCLUSIVE)
    r = C.isotropy_claim(projector=lambda W: np.full((W.shape[1], W.shape[1]), np.nan), claim_id="nan").run(CTX)
    assert r.verdict == Verdict.INCONCLUSIVE, r.reason
    numeric = [c for c in r.checks if c.name.startswith("numeric")]
    assert numeric and all(c.verdict == Verdict.INCONCLUSIVE for c in numeric)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("factory", [C.backprop_claim, C.transfer_claim, C.scaled_projector_claim, C.isotropy_claim,
                                     C.one_step_claim, C.balance_claim, C.nc_breaking_claim, C.reparam_claim,
                                     C.nfa_changes_claim], ids=lambda f: f.__name__)
def test_true_identities_never_refuted_over_seeds(factory, seed):
    r = factory().run(RunContext(seed=seed))
    assert r.verdict == Verdict.VERIFIED, (r.claim.id, seed, r.reason)


def test_every_verified_identity_has_an_independent_check():
    # thread statements that are false as written are REFUTED with a witness (tests/test_crh_magnitude.py)
    refuted = {"crh.linear-regression.normalisation"}
    for claim in C.CLAIMS:
        if "experiment" in claim.tags:
            continue
        r = claim.run(CTX)
        if claim.id in refuted:
            assert r.verdict == Verdict.REFUTED, (claim.id, r.reason)
            continue
        assert r.verdict == Verdict.VERIFIED, (claim.id, r.reason)
        assert any(c.independent and c.verdict == Verdict.VERIFIED and not c.name.startswith("symbolic")
                   for c in r.checks), claim.id  # a numeric check against a separate computation
        assert all(re.fullmatch(r"[a-z0-9.\[\]-]+", c.name) for c in r.checks), [c.name for c in r.checks]


def test_wrong_nc_alignment_prediction_refuted():
    # the four non-RGA alignments claimed to stay at 0.80 under 150/20/20/20 imbalance (true: 0.7524)
    pred = {r: (1.0 if r.endswith("RGA") else 0.80) for r in T.RELATION_NAMES}
    assert C.nc_claim(predicted=pred, claim_id="x").run(CTX).verdict == Verdict.REFUTED


def test_balance_rescaling_derivative_is_measured_without_gradient_code():
    r = C.balance_claim(activation="tanh", claim_id="x").run(CTX)
    fd = next(c for c in r.checks if c.name == "fd-rescaling-tanh")
    assert fd.verdict == Verdict.REFUTED and fd.independent  # tanh is not positively homogeneous


# ---- the cheap order of symbolic_checks decides as sympy.simplify does (issue 28) -------------

def test_symbolic_checks_cheap_order_gives_the_simplify_verdicts():
    x, y = sp.symbols("x y", real=True)
    # true, but not by expansion: only simplify proves it (the cheap steps must not refute it)
    hard_true = sp.Matrix([sp.sin(x) ** 2 + sp.cos(x) ** 2 - 1, (x ** 2 - y ** 2) / (x - y) - x - y])
    assert all(sp.expand(e) != 0 for e in hard_true) and all(sp.simplify(e) == 0 for e in hard_true)
    (ok,) = C.symbolic_checks({"hard but true": hard_true}, seed=3)
    assert ok.verdict is Verdict.VERIFIED, ok.reason
    # false in the second entry only: REFUTED, with the witness of that entry
    false = sp.Matrix([sp.sin(x) ** 2 + sp.cos(x) ** 2 - 1, (x + y) ** 2 - x ** 2 - y ** 2])
    (bad,) = C.symbolic_checks({"false": false}, seed=3)
    assert bad.verdict is Verdict.REFUTED and bad.evidence["value"] > 1e-3, bad.reason
    assert bad.evidence["expression"] == str(false[1])


def test_sym_stationarity_expansion_keeps_false_statements_nonzero():
    for factor in (1 + 1e-4, 1.01, 2):
        out = T.sym_stationarity(predict_b=lambda W, g: factor * g * W * W.T)
        assert any(e != 0 for e in out["E[g_b h_b^T] = gamma Z_b"][1]), factor
    out = T.sym_stationarity()
    assert all(e == 0 for k in ("E[g_b h_b^T] = gamma Z_b", "E[g_a h_a^T] = gamma Z_a") for e in out[k][1])
