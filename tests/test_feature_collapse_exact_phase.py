"""Feature collapse at the trivial-phase threshold lambda = ||grad CE(0)||_2, where float64 cannot tell the sides:
the phase decided in exact rationals of the doubles (solvers.feature_collapse.exact_zero_phase;
docs/feature_collapse.md, "Exact phase at the threshold").

Independent evidence: grad CE(0) enumerated over every (class, sentence) pair in mpmath at 50 digits and its
largest singular value by mpmath's SVD; the objective CE(Z) + lambda ||Z||_* at 60 digits near Z = 0."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from proofs_check.claims import feature_collapse as FC
from proofs_check.cli import main
from proofs_check.core import RunContext, Verdict
from solvers import feature_collapse as S
from theory.feature_collapse import FCInstance

mpmath = pytest.importorskip("mpmath")
sp = pytest.importorskip("sympy")

# (n_c, L, s_c, d, lambda): lambda_crit = sqrt(L / (n_w K)) (K = n_c^L, uniform) is exactly the double lambda
AT_THRESHOLD = [(2, 1, 1, 2, 0.5), (2, 2, 4, 2, 0.25), (2, 3, 3, 2, 0.25), (4, 1, 1, 3, 0.25), (2, 4, 2, 2, 0.25)]


def test_the_instances_are_exactly_at_lambda_crit():
    for n_c, L, s_c, d, lam in AT_THRESHOLD:
        K = n_c ** L
        assert Fraction(lam) ** 2 == Fraction(L, n_c * s_c * K)


def _masses(inst):
    if inst.uniform:
        return [mpmath.mpf(1) / inst.s_c] * inst.s_c
    tot = sum(Fraction(f) for f in inst.freqs)
    return [mpmath.mpf((Fraction(f) / tot).numerator) / (Fraction(f) / tot).denominator for f in inst.freqs]


def _sentences(inst):
    """Every (class, word tuple, probability) in mpmath: class uniform, word beta of concept z_(k,l) by mu."""
    mu = _masses(inst)
    z = inst.latent_vars
    for k in range(inst.K):
        for betas in itertools.product(range(inst.s_c), repeat=inst.L):
            p = mpmath.mpf(1) / inst.K
            for b in betas:
                p *= mu[b]
            yield k, [int(z[k, l]) * inst.s_c + b for l, b in enumerate(betas)], p


def _grad_zero(inst):
    """grad CE(0) (K L x n_w) by enumeration: sum_s p_s (1/K - [j = y_s]) at (j L + l, x_(s,l))."""
    K, L = inst.K, inst.L
    G = mpmath.zeros(K * L, inst.n_w)
    for k, words, p in _sentences(inst):
        for j in range(K):
            g = p * (mpmath.mpf(1) / K - (1 if j == k else 0))
            for l, w in enumerate(words):
                G[j * L + l, w] += g
    return G


def _sigma_max(inst):
    return max(mpmath.svd_r(_grad_zero(inst), compute_uv=False))


def _objective(inst, Z):
    """CE(Z) + lambda ||Z||_* (Z: K L x n_w mpmath matrix), CE by enumeration of every sentence."""
    K, L = inst.K, inst.L
    ce = mpmath.mpf(0)
    for k, words, p in _sentences(inst):
        h = [sum(Z[j * L + l, w] for l, w in enumerate(words)) for j in range(K)]
        mx = max(h)
        ce += p * (mx + mpmath.log(sum(mpmath.exp(x - mx) for x in h)) - h[k])
    nuc = sum(mpmath.svd_r(Z, compute_uv=False))
    return ce + mpmath.mpf(inst.lam) * nuc


def _cli(capsys, n_c, L, s_c, d, lam):
    rc = main(["solve", "feature-collapse", "--concepts", str(n_c), "--length", str(L), "--words-per-concept",
               str(s_c), "--dim", str(d), "--lambda", repr(lam), "--json"])
    out = json.loads(capsys.readouterr().out)
    return rc, out, {c["id"]: c for c in out["claims"]}


# ---------------------------------------------------------------------------------------------------
# solve feature-collapse at lambda_crit and one double either side
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_c,L,s_c,d,lam", AT_THRESHOLD)
def test_at_lambda_crit_zero_is_verified_the_unique_minimiser(capsys, n_c, L, s_c, d, lam):
    rc, out, claims = _cli(capsys, n_c, L, s_c, d, lam)
    z = claims["minimiser-zero"]
    assert z["verdict"] == "VERIFIED" and "exact phase" in z["reason"] and "= lambda exactly" in z["reason"]
    ex = z["evidence"]["exact_phase"]
    assert ex["decided"] and ex["zero_minimiser"] and ex["at_threshold"]
    assert rc == 0 and out["verdict"] == "VERIFIED"
    # independently: the largest singular value of grad CE(0), enumerated at 50 digits, is lambda
    with mpmath.workdps(50):
        assert abs(_sigma_max(FCInstance(n_c, L, s_c, d, lam)) - lam) < mpmath.mpf("1e-45")


@pytest.mark.parametrize("n_c,L,s_c,d,lam", AT_THRESHOLD[:2])
def test_one_double_above_is_verified_and_one_below_is_not(capsys, n_c, L, s_c, d, lam):
    above, below = float(np.nextafter(lam, 1.0)), float(np.nextafter(lam, 0.0))
    rc, out, claims = _cli(capsys, n_c, L, s_c, d, above)
    z = claims["minimiser-zero"]
    assert z["verdict"] == "VERIFIED" and "exact phase" in z["reason"] and "< lambda" in z["reason"]
    assert z["evidence"]["exact_phase"]["at_threshold"] is False
    rc, out, claims = _cli(capsys, n_c, L, s_c, d, below)
    point = [c for c in out["claims"] if c["id"].startswith("minimiser-")]
    # the minimiser is a nonzero configuration of scale ~1e-8: nothing about it is VERIFIED, nothing REFUTED
    assert point and all(c["verdict"] == "INCONCLUSIVE" for c in point)
    assert all(c["verdict"] != "REFUTED" for c in out["claims"])
    assert any("exact phase: ||grad CE(0)||_2 > lambda" in d for d in out["diagnostics"])


def test_the_objective_at_60_digits_agrees_with_the_exact_phase():
    """n_c = 2, L = 2, s_c = 4: along minus the top singular pair of grad CE(0), F(-t u v^T) - F(0) is
    (lambda - sigma_max) t + O(t^2): positive at lambda = 1/4 = sigma_max (second order), negative one double
    below (t = 1e-24, where the first-order term ~2e-41 dominates the second-order ~1e-48)."""
    with mpmath.workdps(60):
        inst = FCInstance(2, 2, 4, 2, 0.25)
        U, s, V = mpmath.svd_r(_grad_zero(inst))
        i = max(range(len(s)), key=lambda j: s[j])
        D = -(U[:, i] * V[i, :])
        Z0 = mpmath.zeros(D.rows, D.cols)
        for lam, t, sign in ((0.25, mpmath.mpf("1e-6"), 1), (0.25, mpmath.mpf("1e-20"), 1),
                             (float(np.nextafter(0.25, 0.0)), mpmath.mpf("1e-24"), -1)):
            x = FCInstance(2, 2, 4, 2, lam)
            diff = _objective(x, t * D) - _objective(x, Z0)
            assert diff * sign > 0, (lam, t, diff)
            assert S.exact_zero_phase(x)["zero_minimiser"] is (sign > 0)


def test_a_false_geometry_at_lambda_crit_is_not_verified():
    """A type-I prediction (that of lambda = 0.1) at lambda_crit: its value is refuted, its geometry not VERIFIED."""
    from theory import feature_collapse as T

    inst = FCInstance(2, 2, 4, 2, 0.25)

    rep = FC.check_instance(inst, predict=lambda i: T.predict(FCInstance(2, 2, 4, 2, 0.1)), n_starts=1, cvxpy=False)
    by = {c.name: c for c in rep.claims}
    assert by["minimiser-type-i"].verdict is not Verdict.VERIFIED
    assert by["optimal-value"].verdict is Verdict.REFUTED  # the type-I value of lambda = 0.1 is far below log 4


# ---------------------------------------------------------------------------------------------------
# the claim feature_collapse.thm1.trivial-phase
# ---------------------------------------------------------------------------------------------------

def _phase_checks(res):
    return {c.name: c for c in res.checks if c.name.endswith(": phase")}


def test_trivial_phase_claim_decides_the_band_in_exact_rationals():
    res = FC.make_trivial_phase_claim().run(RunContext())
    assert res.verdict is Verdict.VERIFIED
    exact = [c for c in _phase_checks(res).values() if "exact_phase" in c.evidence]
    assert len(exact) == 3 and all(c.verdict is Verdict.VERIFIED for c in exact)
    assert any("= lambda exactly" in c.reason for c in exact)
    # the doubles either side of sqrt(1/27): the lower one below in rationals, the upper one above
    assert Fraction(0.19245008972987523) ** 2 < Fraction(1, 27) < Fraction(0.19245008972987526) ** 2


def test_a_threshold_off_by_one_in_1e12_is_refuted_at_lambda_crit():
    """Within THRESHOLD_RTOL (1e-9) of the true threshold the value check cannot tell; at lambda = lambda_crit the
    exact phase (zero) contradicts the claimed phase (lambda below the claimed threshold: nonzero)."""
    claim = FC.make_trivial_phase_claim(threshold=lambda s: FC.theorem1_threshold(s) * (1 + sp.Rational(1, 10 ** 12)),
                                        cases=lambda ctx: [FCInstance(2, 2, 4, 2, 0.25)], claim_id="x")
    res = claim.run(RunContext())
    (ph,) = _phase_checks(res).values()
    assert ph.verdict is Verdict.REFUTED and "= lambda exactly" in ph.reason
    assert res.verdict is Verdict.REFUTED


# ---------------------------------------------------------------------------------------------------
# exact_zero_phase and exact_psd
# ---------------------------------------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(n_c=st.integers(2, 3), L=st.integers(1, 2), s_c=st.integers(1, 3), side=st.sampled_from([-1, 0, 1]),
       random_latents=st.booleans(), seed=st.integers(0, 50), zipf=st.booleans())
def test_exact_phase_matches_the_enumerated_spectral_norm(n_c, L, s_c, side, random_latents, seed, zipf):
    """lambda = the double nearest sigma_max(grad CE(0)) (enumerated at 50 digits) and its neighbours: the exact
    decision equals sigma_max <= lambda at 50 digits."""
    from theory.feature_collapse import zipf_freqs

    kw = {"K": 4, "latents": "random", "seed": seed} if random_latents else {}
    freqs = zipf_freqs(s_c) if zipf and s_c > 1 else None
    with mpmath.workdps(50):
        sig = _sigma_max(FCInstance(n_c, L, s_c, 2, 0.1, freqs=freqs, **kw))
        lam = float(sig)
        if side:
            lam = float(np.nextafter(lam, side * np.inf))
        if not 1e-10 <= lam <= 1e4:
            return
        inst = FCInstance(n_c, L, s_c, 2, lam, freqs=freqs, **kw)
        ex = S.exact_zero_phase(inst, S.zero_gradient(inst)["gradient"])
        assert ex["decided"]
        d = mpmath.mpf(lam) - sig
        if abs(d) < mpmath.mpf("1e-45"):
            assert ex["zero_minimiser"] and ex["at_threshold"]
        else:
            assert ex["zero_minimiser"] == (d > 0) and not ex["at_threshold"]


def test_exact_gradient_matches_the_enumeration():
    for inst in (FCInstance(3, 2, 2, 4, 0.05), FCInstance(2, 1, 2, 3, 0.05, K=4, latents="random", seed=6),
                 FCInstance(2, 2, 3, 2, 0.05, freqs=(0.5, 0.3, 0.2))):
        G, den = S.exact_zero_gradient(inst)
        with mpmath.workdps(50):
            E = _grad_zero(inst)
            err = max(abs(mpmath.mpf(G[i][j]) / den - E[i, j]) for i in range(len(G)) for j in range(len(G[0])))
        assert err < mpmath.mpf("1e-40")


def test_no_exact_phase_with_layernorm_and_none_beyond_the_size():
    assert S.exact_zero_phase(FCInstance(3, 2, 2, 4, 0.05, layernorm=True)) is None
    big = S.exact_zero_phase(FCInstance(7, 2, 8, 4, 0.05))  # min(K L, n_w) = 56 > 48
    assert big["decided"] is False and "dimension" in big["why"]


@pytest.mark.parametrize("A,psd,zeros", [
    ([[0, 1], [1, 0]], False, 1),  # indefinite with a zero pivot first
    ([[1, 1], [1, 1]], True, 1),
    ([[0, 0], [0, 1]], True, 1),
    ([[1, 2], [2, 1]], False, 0),
    ([[2, -1, 0], [-1, 2, -1], [0, -1, 2]], True, 0),
    ([[1, 0], [0, -1e-300]], False, 0),
])
def test_exact_psd_small_matrices(A, psd, zeros):
    ok, z = S.exact_psd([[Fraction(x) for x in r] for r in A])
    assert ok is psd
    if psd:
        assert z == zeros


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 6), r=st.integers(0, 6), seed=st.integers(0, 10 ** 6), shift=st.integers(-3, 3))
def test_exact_psd_against_eigenvalues(n, r, seed, shift):
    """B B^T (rank <= r, integer) shifted by an integer multiple of I: PSD iff its smallest eigenvalue >= 0; the
    eigenvalues are compared only where numpy resolves them (away from 0), zero pivots = nullity when PSD."""
    rng = np.random.default_rng(seed)
    B = rng.integers(-3, 4, size=(n, min(r, n)))
    A = B @ B.T + shift * np.eye(n, dtype=int)
    ok, zeros = S.exact_psd([[Fraction(int(x)) for x in row] for row in A])
    ev = np.linalg.eigvalsh(A.astype(float))
    if ev.min() < -1e-9:
        assert not ok
    elif ev.min() > 1e-9:
        assert ok and zeros == 0
    elif ok:
        assert zeros == int(np.sum(np.abs(ev) < 1e-9))


def test_a_zero_prediction_one_double_below_lambda_crit_is_not_verified():
    """The trivial prediction (that of lambda_crit) fed at the double below: in rationals ||grad CE(0)||_2 >
    lambda, so W = U = 0 is not a minimiser; float64 cannot show a better point (the gain is ~1e-33), so the
    statement is INCONCLUSIVE with the exact side in its reason, never VERIFIED."""
    from theory import feature_collapse as T

    lam = float(np.nextafter(0.25, 0.0))
    rep = FC.check_instance(FCInstance(2, 2, 4, 2, lam), predict=lambda i: T.predict(FCInstance(2, 2, 4, 2, 0.25)),
                            n_starts=1, cvxpy=False)
    z = {c.name: c for c in rep.claims}["minimiser-zero"]
    assert z.verdict is Verdict.INCONCLUSIVE
    assert "exact phase: ||grad CE(0)||_2 > lambda" in z.reason
    assert z.evidence["exact_phase"]["zero_minimiser"] is False
