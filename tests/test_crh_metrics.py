"""Alignment metrics, Haar null baselines, PAH fits, the alignment report, NC geometry, bad input."""

import json

import numpy as np
import pytest
from hypothesis import given, strategies as st

from proofs_check.claims import crh as C
from proofs_check.core import RunContext, Verdict, clean
from solvers import crh as S
from theory import InstanceError
from theory import crh as T


def spd(rng, d, rank=None):
    A = rng.standard_normal((d, rank or d))
    return A @ A.T


# ---- metric properties ----------------------------------------------------------------------

@given(st.integers(2, 8), st.integers(0, 2**31 - 1), st.floats(0.01, 100.0))
def test_cosine_is_one_for_proportional(d, seed, c):
    A = spd(np.random.default_rng(seed), d)
    assert S.alpha_cosine(A, c * A) == pytest.approx(1.0, abs=1e-12)
    assert S.alpha_pearson(A, c * A) == pytest.approx(1.0, abs=1e-12)


@given(st.integers(2, 8), st.integers(0, 2**31 - 1))
def test_cosine_below_one_when_not_proportional(d, seed):
    rng = np.random.default_rng(seed)
    A, B = spd(rng, d), spd(rng, d)
    # Cauchy-Schwarz is strict unless B = cA; compare with an independent Frobenius computation
    cos = np.trace(A @ B) / (np.linalg.norm(A) * np.linalg.norm(B))
    assert S.alpha_cosine(A, B) == pytest.approx(cos, abs=1e-12)
    assert S.alpha_cosine(A, B) < 1 - 1e-9


@given(st.integers(2, 8), st.integers(0, 2**31 - 1), st.floats(0.01, 100.0), st.floats(-5, 5))
def test_pearson_invariant_to_scaling_and_all_ones_shift(d, seed, c, t):
    rng = np.random.default_rng(seed)
    A, B = spd(rng, d), spd(rng, d)
    base = S.alpha_pearson(A, B)
    assert S.alpha_pearson(c * A, B) == pytest.approx(base, abs=1e-12)
    assert S.alpha_pearson(A, c * B + t * np.ones((d, d))) == pytest.approx(base, abs=1e-12)
    # reference: numpy's corrcoef
    assert base == pytest.approx(np.corrcoef(A.ravel(), B.ravel())[0, 1], abs=1e-12)


def test_pearson_one_but_cosine_not_for_all_ones_offset():
    A = np.diag([3.0, 1.0, 2.0])
    B = A + 5 * np.ones((3, 3))
    assert S.alpha_pearson(A, B) == pytest.approx(1.0)
    assert S.alpha_cosine(A, B) < 0.99


def test_undefined_alignment_is_none():
    Z = np.zeros((3, 3))
    A = np.eye(3)
    assert S.alpha_cosine(Z, A) is None
    assert S.alpha_pearson(np.ones((3, 3)), A) is None  # constant entries


def test_haar_orthogonal_is_orthogonal_and_uniform():
    Q = S.haar_orthogonal(4, 2000, np.random.default_rng(0))
    assert np.max(np.abs(Q @ Q.transpose(0, 2, 1) - np.eye(4))) < 1e-12
    # Haar: E[Q_ij] = 0 and E[Q_ij^2] = 1/d; with 2000 draws the standard errors are ~0.011 and ~0.004
    assert np.abs(Q.mean(axis=0)).max() < 0.06
    assert np.abs((Q ** 2).mean(axis=0) - 0.25).max() < 0.03


@given(st.integers(3, 8), st.integers(0, 2**31 - 1))
def test_null_of_matrix_with_itself_rotated_is_below_one(d, seed):
    A = spd(np.random.default_rng(seed), d)
    nb = S.null_alignment(A, A, metric="cosine", draws=100, seed=seed)
    assert nb.mean < 1 - 1e-3
    assert nb.draws == 100 and nb.std > 0


def test_null_baseline_is_high_for_small_layers():
    # spec: small layers (d = 4) give nulls up to 0.93; independent random covariances 0.1 - 0.8
    rng = np.random.default_rng(1)
    A, B = spd(rng, 4), spd(rng, 4)
    nb = S.null_alignment(A, B, metric="pearson", draws=500, seed=2)
    assert 0.0 < nb.mean < 0.95 and nb.q95 > nb.mean


# ---- PAH fits --------------------------------------------------------------------------------

@given(st.integers(3, 8), st.integers(0, 2**31 - 1), st.sampled_from([-1.0, 1 / 3, 0.5, 1.0, 2.0, 3.0]))
def test_pah_recovers_exact_power(d, seed, x):
    rng = np.random.default_rng(seed)
    Q = S.haar_orthogonal(d, 1, rng)[0]
    lam = np.exp(rng.uniform(-1, 1, d))
    Z = Q @ np.diag(lam) @ Q.T
    A = 2.5 * Q @ np.diag(lam ** x) @ Q.T
    fit = S.pah_exponent(A, Z)
    assert fit.slope == pytest.approx(x, abs=1e-8)
    assert fit.intercept == pytest.approx(np.log(2.5), abs=1e-8)
    assert fit.n_used == d


def test_pah_drops_null_directions_and_reports_none_when_underdetermined():
    Z = np.diag([2.0, 1.0, 0.0, 0.0])
    A = np.diag([4.0, 1.0, 7.0, 7.0])
    fit = S.pah_exponent(A, Z)
    assert fit.n_used == 2 and fit.slope == pytest.approx(2.0)
    assert S.pah_exponent(np.eye(3), np.diag([1.0, 0, 0])).slope is None
    assert S.pah_exponent(np.eye(3), np.eye(3)).slope is None  # equal eigenvalues: slope undefined


# ---- the one-call report ------------------------------------------------------------------------

def test_alignment_report_dict_and_table():
    rng = np.random.default_rng(0)
    W = rng.standard_normal((5, 4))
    rep = S.alignment_report(W, rng.standard_normal((50, 4)), rng.standard_normal((50, 5)), null_draws=20)
    d = rep.to_dict()
    json.dumps(clean(d), allow_nan=False)
    assert set(d["alignments"]) == set(T.RELATION_NAMES)
    assert set(d["null"]["a-RGA"]) == {"pearson", "cosine"}
    text = str(rep)
    for r in T.RELATION_NAMES:
        assert r in text
    assert len(d["singular_values"]) == 5


def test_normalized_mode_is_scale_free_per_sample():
    rng = np.random.default_rng(3)
    W = rng.standard_normal((4, 3))
    h, g = rng.standard_normal((40, 3)), rng.standard_normal((40, 4))
    scales = rng.uniform(0.1, 10, (40, 1))
    a = S.layer_matrices(W, h, g, mode="normalized")
    b = S.layer_matrices(W, h * scales, g / scales, mode="normalized")
    assert np.allclose(a.H_a, b.H_a, atol=1e-12) and np.allclose(a.G_b, b.G_b, atol=1e-12)


def test_bias_column_keeps_identities_exact():
    rng = np.random.default_rng(4)
    W, b = rng.standard_normal((3, 5)), rng.standard_normal(3)
    h, g = rng.standard_normal((30, 5)), rng.standard_normal((30, 3))
    M = S.layer_matrices(W, h, g, bias=b)
    hb = h @ W.T + b
    assert np.allclose(M.H_b, hb.T @ hb / 30, atol=1e-12)
    assert M.H_a.shape == (6, 6) and M.Z_a.shape == (6, 6)


# ---- NC geometry at the last layer ------------------------------------------------------------

@pytest.mark.parametrize("k,d", [(3, 3), (4, 4), (4, 7), (6, 5)])
def test_balanced_nc_gives_all_six_alignments_one(k, d):
    W, H, G = C.nc_layer([30] * k, d)
    rep = S.alignment_report(W, H, G, null_draws=0)
    for r in T.RELATION_NAMES:
        assert rep.alignments[r]["cosine"] == pytest.approx(1.0, abs=1e-10)
        assert rep.alignments[r]["pearson"] == pytest.approx(1.0, abs=1e-10)


def test_imbalanced_nc_lowers_four_alignments():
    W, H, G = C.nc_layer((150, 20, 20, 20))
    rep = S.alignment_report(W, H, G, null_draws=0)
    # independent reference: cos(J D J, J) with D = diag(counts)/N (spec: "about 0.75")
    pi = np.array([150, 20, 20, 20]) / 210
    J = np.eye(4) - 1 / 4
    ref = np.trace(J @ np.diag(pi) @ J @ J) / (np.linalg.norm(J @ np.diag(pi) @ J) * np.linalg.norm(J))
    assert ref == pytest.approx(0.7524, abs=1e-4)
    for r in ("a-RWA", "a-GWA", "b-RWA", "b-GWA"):
        assert rep.alignments[r]["cosine"] == pytest.approx(ref, abs=1e-10)
    for r in ("a-RGA", "b-RGA"):
        assert rep.alignments[r]["cosine"] == pytest.approx(1.0, abs=1e-10)
    assert float(T.nc_imbalanced_cosine((150, 20, 20, 20))) == pytest.approx(ref, abs=1e-12)


def test_nc_claim_and_false_version():
    assert C.nc_claim().run(RunContext()).verdict == Verdict.VERIFIED
    false = C.nc_claim(predicted={r: 1.0 for r in T.RELATION_NAMES}, claim_id="x")  # "imbalance keeps all six at 1"
    assert false.run(RunContext()).verdict == Verdict.REFUTED


# ---- bad input ----------------------------------------------------------------------------------

def test_bad_input_messages():
    rng = np.random.default_rng(0)
    W = rng.standard_normal((3, 4))
    h, g = rng.standard_normal((10, 4)), rng.standard_normal((10, 3))
    with pytest.raises(InstanceError, match="h_a must have shape"):
        S.alignment_report(W, rng.standard_normal((10, 5)), g)
    with pytest.raises(InstanceError, match="g_b must have shape"):
        S.alignment_report(W, h, rng.standard_normal((10, 4)))
    with pytest.raises(InstanceError, match="as many samples"):
        S.alignment_report(W, h, g[:9])
    with pytest.raises(InstanceError, match="at least 2 samples"):
        S.alignment_report(W, h[:1], g[:1], mode="normalized")
    h2 = h.copy()
    h2[0, 0] = np.nan
    with pytest.raises(InstanceError, match="h_a must contain only finite"):
        S.alignment_report(W, h2, g)
    with pytest.raises(InstanceError, match="W must be 2-dimensional"):
        S.alignment_report(np.ones(3), h, g)
    with pytest.raises(InstanceError, match="mode"):
        S.alignment_report(W, h, g, mode="centred")
    with pytest.raises(InstanceError, match="bias must have shape"):
        S.alignment_report(W, h, g, bias=np.ones(4))
    with pytest.raises(InstanceError, match="B must have the shape"):
        S.alpha_cosine(np.eye(3), np.eye(4))
    with pytest.raises(InstanceError, match="metric"):
        S.alpha(np.eye(3), np.eye(3), "spearman")


def test_experiment_instance_validation():
    with pytest.raises(InstanceError, match=r"weight_decays\[1\] \(weight decay\) must be in \[0, 100\]"):
        T.CRHExperiment(weight_decays=(0.0, -1e-3))
    with pytest.raises(InstanceError, match="must be a number, got NaN"):
        T.CRHExperiment(weight_decays=(float("nan"),))
    with pytest.raises(InstanceError, match="lr must be > 0"):
        T.CRHExperiment(lr=0)
    with pytest.raises(InstanceError, match="batch_size must be <= 512"):
        T.CRHExperiment(batch_size=1000)
    with pytest.raises(InstanceError, match="activation"):
        T.CRHExperiment(activation="gelu")
    with pytest.raises(InstanceError, match="steps must be <= 1000000000"):
        T.CRHExperiment(steps=10 ** 12)
    with pytest.raises(InstanceError, match=r"lr \(SGD step size\) must be in \[1e-12, 100\]"):
        T.CRHExperiment(lr=1e9)
    with pytest.raises(InstanceError, match="weight_decays must have at least 1"):
        T.CRHExperiment(weight_decays=())
    with pytest.raises(InstanceError, match=r"widths\[1\] must be <= 4096"):
        T.CRHExperiment(widths=(16, 10 ** 6, 4))
    with pytest.raises(InstanceError, match="noise"):
        T.CRHExperiment(noise=float("inf"))


@pytest.mark.parametrize("which", ["NC1", "NC2", "NC3"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_breaking_one_nc_property_lowers_specific_alignments(which, seed):
    # derived pattern (theory.crh.NC_BREAK_UNAFFECTED, written out here independently)
    keep = {"NC1": {"a-GWA", "b-RGA", "b-RWA", "b-GWA"}, "NC2": {"a-RGA", "a-RWA", "a-GWA"}, "NC3": {"a-GWA"}}[which]
    W, H, G = S.nc_broken_layer(which, seed=seed)
    rep = S.alignment_report(W, H, G, null_draws=0)
    for r in T.RELATION_NAMES:
        c = rep.alignments[r]["cosine"]
        if r in keep:
            assert c == pytest.approx(1.0, abs=1e-10), (which, r)
        else:
            assert c < 1 - 1e-4, (which, r)


def test_nc_breaking_claim_and_false_pattern():
    assert C.nc_breaking_claim().run(RunContext()).verdict == Verdict.VERIFIED
    wrong = dict(T.NC_BREAK_UNAFFECTED)
    wrong["NC1"] = frozenset({"a-RWA"})  # "breaking NC1 keeps H_a ~ Z_a": false
    assert C.nc_breaking_claim(unaffected=wrong, claim_id="x").run(RunContext()).verdict == Verdict.REFUTED


@given(st.lists(st.integers(1, 60), min_size=2, max_size=6), st.integers(0, 3))
def test_imbalanced_nc_closed_form_over_class_counts(counts, extra_d):
    k = len(counts)
    W, H, G = C.nc_layer(counts, k + extra_d)
    rep = S.alignment_report(W, H, G, null_draws=0)
    pi = np.array(counts) / sum(counts)
    J = np.eye(k) - 1 / k
    JDJ = J @ np.diag(pi) @ J
    ref = np.sum(JDJ * J) / (np.linalg.norm(JDJ) * np.linalg.norm(J))
    assert float(T.nc_imbalanced_cosine(counts)) == pytest.approx(ref, abs=1e-12)
    for r in T.RELATION_NAMES:
        want = 1.0 if r.endswith("RGA") else ref
        assert rep.alignments[r]["cosine"] == pytest.approx(want, abs=1e-9), r


@pytest.mark.parametrize("call,msg", [
    (lambda: S.nc_layer([10 ** 9, 1]), r"counts\[0\] must be <= 10000000"),
    (lambda: S.nc_layer(5), "counts must be a sequence"),
    (lambda: S.nc_layer([1] * 10000), "between 2 and 4096 classes"),
    (lambda: S.nc_layer([3, 3], scale=float("nan")), "scale"),
    (lambda: S.haar_orthogonal(1000, 10 ** 6, np.random.default_rng(0)), "GB > limit 2.5 GB"),
    (lambda: S.null_alignment(np.eye(3), np.eye(3), draws=10 ** 7), r"draws must be <= 100000"),
    (lambda: S.alignment_report(np.eye(3), np.eye(3), np.eye(3), null_draws=10 ** 9), "null_draws must be <="),
    (lambda: S.nc_broken_layer("NC1", k=10 ** 6), "k must be <= 256"),
    (lambda: T.nc_imbalanced_cosine([1] * 1000), "at most 64 classes"),
    (lambda: T.sym_backprop(100, 100), "m must be <= 4"),
])
def test_api_sizes_refused_before_allocation(call, msg):
    with pytest.raises(InstanceError, match=msg):
        call()


# ---- vectorised helpers give the numbers of the per-run / per-draw loops they replace (issue 28) ----

@pytest.mark.parametrize("n, k, m", [(64, 8, 8), (512, 32, 32), (300, 40, 30)])  # one block; row blocks
def test_batched_products_equal_the_per_run_loops_bitwise(n, k, m):
    rng = np.random.default_rng(n + k)
    X, M, Y = rng.standard_normal((3, n, k)), rng.standard_normal((3, k, m)), rng.standard_normal((3, n, m))
    assert np.array_equal(S._bmm(X, M), np.stack([S._rows_matmul(x, w) for x, w in zip(X, M)]))
    assert np.array_equal(S._bmm(X, Y, trans=True), np.stack([S._tmatmul(x, y) for x, y in zip(X, Y)]))
    for mode in S.MODES:
        assert np.array_equal(S._second_moment(X, mode), np.stack([S._second_moment(x, mode) for x in X]))


def test_null_degeneracy_test_matches_the_per_draw_rule():
    rng = np.random.default_rng(5)
    for d in (3, 16):
        A = spd(rng, d)
        Bs = rng.standard_normal((40, d, d))
        Bs[3], Bs[7] = 1.0, 0.0  # constant, zero
        Bs[9] = 2.0 + 1e-15 * rng.standard_normal((d, d))  # constant up to rounding
        got = S._batch_alpha(A, Bs, "pearson")
        a = A.ravel() - A.mean()
        for i, B in enumerate(Bs):
            b = B.ravel() - B.mean()
            if S._constant(np.linalg.norm(b), B):
                assert np.isnan(got[i]), i
            else:
                assert got[i] == pytest.approx(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)), abs=1e-14), i
        assert np.isnan(got[[3, 7, 9]]).all()
