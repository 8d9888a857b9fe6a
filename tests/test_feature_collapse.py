"""Feature collapse: theory and solver unit tests (reference values from spec/feature_collapse.md)."""

import itertools
import math

import numpy as np
import pytest

from solvers import feature_collapse as S
from theory import feature_collapse as T
from theory._validate import InstanceError
from theory.feature_collapse import FCInstance

# ---- spec reference values (computed independently of this project) --------------------------

ROWS = [
    ((3, 2, 2, 4, 0.05), 0.19245, 1.504152, 1.614084, 0.931892, 1.161977),
    ((2, 4, 3, 3, 0.05), 0.20412, 0.984602, 1.793236, 0.549064, 1.487306),
]


@pytest.mark.parametrize("args,lc,t,a,b,obj", ROWS)
def test_spec_reference_rows(args, lc, t, a, b, obj):
    inst = FCInstance(*args)
    p = T.type1_prediction(inst)
    assert p.geometry == "type-I"
    assert p.lambda_crit == pytest.approx(lc, abs=5e-6)
    assert p.t == pytest.approx(t, abs=5e-7)
    assert p.a == pytest.approx(a, abs=5e-7)
    assert p.b == pytest.approx(b, abs=5e-7)
    assert p.objective == pytest.approx(obj, abs=5e-7)
    assert inst.n_w == args[0] * args[2] and inst.K == args[0] ** args[1]


def test_paper_setting():
    inst = T.instance_from_words(3, 15, 1200, 100, 1e-3, K=1000, latents="random")
    p = T.type1_prediction(inst)
    assert p.a == pytest.approx(1.42214, abs=5e-6)  # quoted in the paper
    assert p.b == pytest.approx(0.402242, abs=5e-7)
    assert p.lambda_crit == pytest.approx(0.0035320, abs=5e-8)


def test_spec_thresholds_nonuniform():
    zipf = FCInstance(3, 2, 3, 4, 0.05, freqs=(6 / 11, 3 / 11, 2 / 11))
    uni = FCInstance(3, 2, 3, 4, 0.05)
    assert S.zero_gradient_spectral_norm(zipf) == pytest.approx(0.1732, abs=5e-5)
    assert S.zero_gradient_spectral_norm(uni) == pytest.approx(0.1571, abs=5e-5)
    assert T.lambda_crit_symmetric_freqs(zipf) == pytest.approx(0.1732, abs=5e-5)
    assert T.zipf_freqs(3) == pytest.approx((6 / 11, 3 / 11, 2 / 11), rel=1e-15)


def test_closed_forms_match_minimiser():
    for args in [(3, 2, 2, 4, 0.05), (2, 4, 3, 3, 0.05), (4, 2, 2, 3, 0.01), (2, 3, 1, 2, 0.1)]:
        inst = FCInstance(*args)
        p = T.type1_prediction(inst)
        cf = T.type1_closed_form(inst)
        assert p.t == pytest.approx(cf["t"], rel=1e-12)
        assert p.cross_entropy == pytest.approx(cf["cross_entropy"], rel=1e-12)
        assert p.lambda_crit == pytest.approx(cf["lambda_crit"], rel=1e-12)
        # balance n_w a^2 = K L b^2 and a b = t
        assert inst.n_w * p.a ** 2 == pytest.approx(inst.K * inst.L * p.b ** 2, rel=1e-12)
        assert p.a * p.b == pytest.approx(p.t, rel=1e-12)


def test_sphere_sizes():
    for n_c, L in [(2, 1), (3, 2), (4, 5), (7, 3)]:
        sz = T.sphere_sizes(n_c, L)
        assert sum(sz) == n_c ** L
        inst = FCInstance(n_c, L, 1, n_c, 0.1) if n_c ** L <= 1000 else None
        if inst is not None:
            hc = T.hamming_counts(inst)
            expect = np.array(sz)
            expect[0] -= 1
            assert (hc == expect).all()


# ---- the exact risk against an independent brute-force loop ---------------------------------

def brute_force_risk(inst, W, U):
    """Loops over every class and every tuple of words; LayerNorm and CE written out by hand."""
    d = inst.d

    def phi(w):
        if not inst.layernorm:
            return list(w)
        m = sum(w) / d
        v = [x - m for x in w]
        n = math.sqrt(sum(x * x for x in v))
        return [math.sqrt(d) * x / n for x in v]

    feats = [phi(W[v]) for v in range(inst.n_w)]
    z = inst.latent_vars
    total = 0.0
    for k in range(inst.K):
        for betas in itertools.product(range(inst.s_c), repeat=inst.L):
            prob = 1.0 / inst.K
            for bt in betas:
                prob *= inst.freqs[bt]
            words = [z[k, l] * inst.s_c + betas[l] for l in range(inst.L)]
            scores = [sum(sum(U[j * inst.L + l][i] * feats[words[l]][i] for i in range(d)) for l in range(inst.L))
                      for j in range(inst.K)]
            mx = max(scores)
            lse = mx + math.log(sum(math.exp(s - mx) for s in scores))
            total += prob * (lse - scores[k])
    reg = 0.5 * inst.lw * float(np.sum(W ** 2)) + 0.5 * inst.lu * float(np.sum(U ** 2))
    return total + reg


@pytest.mark.parametrize("kw", [dict(), dict(layernorm=True), dict(freqs=(0.7, 0.2, 0.1)),
                                dict(K=5, latents="random", seed=3, layernorm=True, freqs=(0.5, 0.3, 0.2))])
def test_exact_risk_matches_brute_force(kw):
    inst = FCInstance(3, 2, 3, 4, 0.07, **kw)
    rng = np.random.default_rng(1)
    W = rng.normal(size=(inst.n_w, inst.d))
    U = rng.normal(size=(inst.K * inst.L, inst.d))
    assert S.exact_risk(inst, W, U) == pytest.approx(brute_force_risk(inst, W, U), rel=1e-12)


def test_distribution_sums_to_one_and_sampler():
    inst = FCInstance(2, 3, 3, 2, 0.1, freqs=(0.6, 0.3, 0.1))
    X, y, p = T.sentence_distribution(inst)
    assert X.shape == (inst.K * 27, 3) and p.sum() == pytest.approx(1.0, rel=1e-14)
    Xs, ys = T.sample_sentences(inst, 2000, seed=5)
    Xs2, ys2 = T.sample_sentences(inst, 2000, seed=5)
    assert (Xs == Xs2).all() and (ys == ys2).all()
    assert Xs.shape == (inst.K * 2000, 3) and np.bincount(ys).tolist() == [2000] * inst.K
    # concepts follow the latent variables; within-concept words follow mu
    z = inst.latent_vars
    assert (Xs // inst.s_c == z[ys]).all()
    freq = np.bincount((Xs % inst.s_c).ravel(), minlength=3) / Xs.size
    assert freq == pytest.approx([0.6, 0.3, 0.1], abs=0.01)


# ---- gradient -----------------------------------------------------------------------------

@pytest.mark.parametrize("layernorm", [False, True])
def test_gradient_matches_finite_differences(layernorm):
    inst = FCInstance(3, 2, 2, 4, 0.05, layernorm=layernorm, freqs=(0.7, 0.3))
    prob = S.FCProblem(inst)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(inst.n_w + inst.K * inst.L) * inst.d)
    _, g = prob.fun(x)
    h = 1e-6
    fd = np.empty_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        fd[i] = (prob.fun(x + e)[0] - prob.fun(x - e)[0]) / (2 * h)
    assert np.max(np.abs(fd - g)) <= 1e-7 * max(1.0, np.max(np.abs(g)))


# ---- constructed configurations: enumeration agrees with the closed-form objectives ----------

def test_type1_configuration_value():
    for args in [(3, 2, 2, 4, 0.05), (2, 4, 3, 3, 0.05), (3, 2, 2, 2, 0.05)]:
        inst = FCInstance(*args)
        p = T.type1_prediction(inst)
        W, U = T.configuration(inst, p)
        assert S.exact_risk(inst, W, U) == pytest.approx(p.objective, rel=1e-12)


def test_type3_and_type2_configuration_values():
    inst = FCInstance(3, 2, 3, 4, 0.05, freqs=T.zipf_freqs(3))
    p = T.type3_prediction(inst)
    W, U = T.configuration(inst, p)
    assert S.exact_risk(inst, W, U) == pytest.approx(p.objective, rel=1e-12)
    assert p.residual < T.MP_RESIDUAL_TOL
    assert list(p.r) == sorted(p.r, reverse=True)
    # uniform frequencies: type III reduces to type I (r_beta = a*, same b)
    u = FCInstance(3, 2, 3, 4, 0.05)
    p3, p1 = T.type3_prediction(u), T.type1_prediction(u)
    assert p3.r == pytest.approx([p1.a] * 3, rel=1e-12) and p3.b == pytest.approx(p1.b, rel=1e-12)
    ln = FCInstance(3, 2, 3, 4, 0.05, layernorm=True, freqs=T.zipf_freqs(3))
    p2 = T.type2_prediction(ln)
    W, U = T.configuration(ln, p2)
    assert S.exact_risk(ln, W, U) == pytest.approx(p2.objective, rel=1e-12)
    assert np.abs(W.sum(axis=1)).max() < 1e-12


def test_lower_bounds_never_exceed_feasible_values():
    rng = np.random.default_rng(2)
    for kw in [dict(), dict(layernorm=True), dict(freqs=(0.8, 0.2))]:
        inst = FCInstance(3, 2, 2, 3, 0.05, **kw)
        prob = S.FCProblem(inst)
        for _ in range(3):
            W = rng.normal(size=(inst.n_w, inst.d))
            U = rng.normal(size=(inst.K * inst.L, inst.d))
            E, _ = prob.features(W)
            lb = (S.sdp_lower_bound(prob, E, U) if inst.layernorm else S.nuclear_lower_bound(prob, U @ E.T))[
                "lower_bound"]
            sol_val = S.solve(inst, n_starts=1, seed=0, certify=False).value
            assert lb <= sol_val + 1e-9
            assert lb <= prob.objective(W, U, grad=False)


def test_solver_reference_instance_with_cvxpy():
    inst = FCInstance(3, 2, 2, 4, 0.05)
    sol = S.solve(inst, n_starts=2, cvxpy=True)
    assert sol.value == pytest.approx(1.161977, abs=5e-7)
    assert sol.certificate.gap <= 1e-6
    assert sol.certificate.details["cvxpy_value"] == pytest.approx(1.161977, abs=1e-5)
    assert sol.certificate.details["cvxpy_lower_bound"] <= sol.value


def test_trivial_phase_optimum_is_zero():
    inst = FCInstance(3, 2, 2, 4, 0.25)
    sol = S.solve(inst, n_starts=2)
    assert sol.value == pytest.approx(math.log(9), rel=1e-9)
    assert sol.certificate.gap <= 1e-9


# ---- bad input ----------------------------------------------------------------------------

@pytest.mark.parametrize("call,match", [
    (lambda: T.instance_from_words(3, 2, 7, 4, 0.1), "divisible"),
    (lambda: FCInstance(3, 2, 2, 4, 0.1, freqs=(0.5, 0.6)), "sum to 1"),
    (lambda: FCInstance(3, 2, 2, 4, 0.1, freqs=(1.2, -0.2)), "> 0"),
    (lambda: FCInstance(3, 2, 2, 4, 0.1, freqs=(0.5, 0.3, 0.2)), "s_c = 2 entries"),
    (lambda: FCInstance(3, 2, 2, 0, 0.1), "d"),
    (lambda: FCInstance(2, 2, 1, 1, 0.1, layernorm=True), "LayerNorm"),
    (lambda: FCInstance(3, 2, 2, 4, 0.0), "lambda"),
    (lambda: FCInstance(3, 2, 2, 4, -1.0), "lambda"),
    (lambda: FCInstance(3, 2, 2, 4, float("nan")), "NaN"),
    (lambda: FCInstance(3, 2, 2, 4, 0.1, K=5), "inconsistent with latents='full'"),
    (lambda: FCInstance(3, 2, 2, 4, 0.1, latents="random"), "required"),
    (lambda: FCInstance(1, 2, 2, 4, 0.1), "n_c"),
    (lambda: FCInstance(3, 2, 2, 4, 0.1, latents="some"), "latents"),
    (lambda: S.FCProblem(FCInstance(3, 9, 3, 4, 0.1, K=20000, latents="random")), "too large to enumerate"),
    (lambda: S.FCProblem(FCInstance(3, 6, 4, 4, 0.1)), "3\\^6 \\* 4\\^6|729 \\* 4\\^6"),
])
def test_bad_input(call, match):
    with pytest.raises(InstanceError, match=match):
        call()


def test_hypotheses_reported():
    assert T.hypotheses(FCInstance(3, 2, 2, 2, 0.1, layernorm=True))  # d < n_c with LN
    assert T.hypotheses(FCInstance(3, 2, 2, 1, 0.1))  # d < n_c - 1
    assert T.hypotheses(FCInstance(3, 2, 2, 4, 0.1, K=5, latents="random"))
    assert T.hypotheses(FCInstance(3, 2, 2, 2, 0.1)) == []


def test_torch_backend_matches_numpy():
    pytest.importorskip("torch")
    inst = FCInstance(3, 2, 2, 4, 0.05, layernorm=True, freqs=(0.7, 0.3))
    prob = S.FCProblem(inst)
    x = np.random.default_rng(0).normal(size=(inst.n_w + inst.K * inst.L) * inst.d)
    v1, g1 = prob.fun(x)
    v2, g2 = S._torch_fun(prob, "cpu")(x)
    assert v2 == pytest.approx(v1, rel=1e-12) and np.allclose(g1, g2, rtol=1e-10, atol=1e-12)


def test_torch_backend_missing_is_a_clear_error():
    try:
        import torch  # noqa: F401
        pytest.skip("torch is installed")
    except ImportError:
        pass
    with pytest.raises(InstanceError, match="torch"):
        S.solve(FCInstance(3, 2, 2, 4, 0.05), backend="torch")


def test_sdp_relaxation_is_tight_for_layernorm():
    # independent route: cvxpy solves the relaxation behind the sdp-dual certificate; Theorem 3
    # predicts that type II attains it
    inst = FCInstance(3, 2, 2, 3, 0.05, layernorm=True, freqs=(0.7, 0.3))
    r = S.cvxpy_sdp_relaxation(inst)
    assert r["status"] == "optimal"
    assert r["cvxpy_value"] == pytest.approx(T.type2_prediction(inst).objective, abs=1e-6)
