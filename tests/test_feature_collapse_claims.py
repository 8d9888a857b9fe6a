"""Feature collapse claims: false statements are REFUTED (or at least never VERIFIED); true statements at the
boundaries (threshold, trivial phase, LayerNorm d = 2/3, duplicated latents, K = 2, L = 1) are never REFUTED;
failing hypotheses give NOT_APPLICABLE. Reference values: docs/feature_collapse.md (spec)."""

import dataclasses
import math

import numpy as np
import pytest
import sympy as sp

from proofs_check.claims import feature_collapse as C
from proofs_check.core import Provenance, RunContext, Verdict
from solvers import feature_collapse as S
from theory import feature_collapse as T
from theory._validate import InputError
from theory.feature_collapse import FCInstance

CTX = RunContext()
ONE = lambda ctx: [FCInstance(3, 2, 2, 4, 0.05)]  # noqa: E731
LC_ROW1 = 0.19245008972987526  # spec row 1: lambda_crit = sqrt(K L/n_w)/K = sqrt(2/54)/... = 0.19245


def _scaled(fn, field, factor):
    def predict(inst):
        p = fn(inst)
        v = getattr(p, field)
        return dataclasses.replace(p, **{field: tuple(x * factor for x in v) if isinstance(v, tuple) else v * factor})
    return predict


def _by_id(report):
    return {c.name: c for c in report.claims}


def test_provenance_and_ids():
    assert {c.provenance for c in C.CLAIMS} == {Provenance.RECONSTRUCTED}
    assert all(c.id.startswith("feature_collapse.") and c.family == "feature_collapse" for c in C.CLAIMS)
    conj = [c for c in C.CLAIMS if "thm2" in c.id][0]
    assert "CONJECTURE" in conj.statement and "never proved" in conj.statement


# ---- true statements --------------------------------------------------------------------------

def test_type1_claim_verified_on_reference_row():
    r = C.make_type1_claim(ONE).run(CTX)
    assert r.verdict == Verdict.VERIFIED, r.reason
    geo = [c for c in r.checks if c.name.endswith("minimiser-type-i")]
    assert geo and geo[0].verdict == Verdict.VERIFIED and "unique minimiser" in geo[0].reason


@pytest.mark.parametrize("inst", [
    FCInstance(3, 2, 2, 5, 0.19243084472090224),  # just below lambda_crit (was REFUTED: flat landscape)
    FCInstance(3, 2, 2, 5, 0.19246),  # just above
    FCInstance(3, 2, 2, 4, 0.3),  # trivial phase
    FCInstance(2, 1, 2, 3, 0.05, K=4, latents="random", seed=6),  # two classes share each latent (was REFUTED)
    FCInstance(2, 1, 2, 2, 0.1),  # K = 2, L = 1
    FCInstance(3, 2, 2, 3, 0.05, layernorm=True),  # LayerNorm d = 3
    FCInstance(2, 2, 3, 2, 1.0, layernorm=True),  # LayerNorm d = 2 (gradient search cannot move there)
    FCInstance(2, 1, 2, 2, 0.05, K=4, latents="random", seed=6, layernorm=True),  # LN + duplicated latents
    FCInstance(3, 2, 2, 3, 1e-7),  # small lambda
    FCInstance(3, 2, 2, 3, 1e4, layernorm=True),  # large lambda with LN: b* tiny
])
def test_true_boundary_instances_are_verified(inst):
    rep = C.check_instance(inst, n_starts=2)
    assert rep.verdict == Verdict.VERIFIED, rep.reason  # never REFUTED; here all proofs go through
    ids = set(_by_id(rep))
    assert "optimal-value" in ids and any(i.startswith("minimiser-") for i in ids)


def test_duplicated_latents_prediction_differs_from_the_formula_without_duplicates():
    inst = FCInstance(2, 1, 2, 3, 0.05, K=4, latents="random", seed=6)
    assert inst.symmetric and inst.duplicates == 1
    # the value certified by the dual bound (independent of the theory), vs both formulas
    p = T.type1_prediction(inst)
    W, U = T.configuration(inst, p)
    prob = S.FCProblem(inst)
    cert = S.certificate_at(prob, W, U, prob.objective(W, U, grad=False))
    assert cert.gap <= 1e-10 and abs(cert.lower_bound - p.objective) <= 1e-9
    # lambda_crit with duplicates = sqrt(L/(n_w K)) (K = m n_c^L) = the spectral norm at 0
    assert T.lambda_crit(inst) == pytest.approx(math.sqrt(1 / (4 * 4)), rel=1e-14)
    assert S.zero_gradient_spectral_norm(inst) == pytest.approx(0.25, rel=1e-12)


def test_trivial_phase_minimiser_is_zero_with_proof():
    rep = C.check_instance(FCInstance(3, 2, 2, 4, 0.3), n_starts=1)
    c = _by_id(rep)["minimiser-zero"]
    assert c.verdict == Verdict.VERIFIED and c.evidence["uniqueness_certificate"]["rank"] == 0


def test_type1_claim_on_trivial_phase_instances_does_not_crash():
    for inst in (FCInstance(3, 2, 2, 4, 0.3), FCInstance(3, 2, 3, 4, 0.3, freqs=T.zipf_freqs(3))):
        r = C.make_type1_claim(lambda ctx, i=inst: [i]).run(CTX)
        assert r.verdict in (Verdict.VERIFIED, Verdict.INCONCLUSIVE, Verdict.REFUTED, Verdict.NOT_APPLICABLE)
        assert not any(ch.verdict == Verdict.ERROR for ch in r.checks), r.reason


def test_layernorm_trivial_claim_gets_a_verdict_and_is_not_verified():
    inst = FCInstance(3, 2, 2, 3, 1e3, layernorm=True)
    trivial = lambda i: T.Prediction("theorem-3", "trivial", math.log(i.K), math.log(i.K), b=0.0)  # noqa: E731
    rep = C.check_instance(inst, predict=trivial, n_starts=1)
    assert rep.verdict in (Verdict.REFUTED, Verdict.INCONCLUSIVE), rep.reason
    assert _by_id(rep)["minimiser-zero"].verdict != Verdict.VERIFIED


def test_constants_claim_refutes_tampered_reference():
    rows = [(C.SPEC_ROWS[0][0], dict(C.SPEC_ROWS[0][1], a="1.629965"))]  # a* x 1.01
    assert C.make_constants_claim(rows=rows).run(CTX).verdict == Verdict.REFUTED
    paper = dict(C.PAPER_SETTING, a="1.43636")  # 1.42214 x 1.01
    assert C.make_constants_claim(paper=paper).run(CTX).verdict == Verdict.REFUTED
    wrong_thr = dict(C.SPEC_THRESHOLDS, zipf="0.1571")  # the uniform value claimed for Zipf
    assert C.make_constants_claim(thresholds=wrong_thr).run(CTX).verdict == Verdict.REFUTED
    assert C.make_constants_claim().run(CTX).verdict == Verdict.VERIFIED


def test_derivations_claim_refutes_wrong_identity():
    n, nw, K = sp.symbols("n_c n_w K", positive=True)
    L = 2
    wrong = {"lambda_crit without the -K n_c^-L term": sp.sqrt(K * L / nw) / (1 + K) - sp.sqrt(K * L / nw) / (
        1 + K - K * n ** (-L))}
    assert C.make_derivations_claim(lambda: wrong).run(CTX).verdict == Verdict.REFUTED


def test_threshold_text_written_out_is_what_sympy_prints():
    assert C.threshold_text(C.theorem1_threshold) == C.THEOREM1_THRESHOLD_TEXT
    claim = next(c for c in C.CLAIMS if c.id == "feature_collapse.thm1.trivial-phase")
    assert C.THEOREM1_THRESHOLD_TEXT in claim.statement


def test_derivation_check_proves_by_cancel_and_still_refutes():
    n, t = sp.symbols("n_c t", positive=True)
    true = sp.log(n) * (n ** 2 - 1) / (n - 1) - sp.log(n) * (n + 1)  # zero only after cancelling n - 1
    assert sp.expand(true) != 0
    ok = C.derivation_check("cancel", true)
    assert ok.verdict == Verdict.VERIFIED and "cancel" in ok.reason and "log" in ok.evidence["expression"]
    wrong = sp.exp(-t) * (n ** 2 - 1) / (n - 1) - sp.exp(-t) * n  # off by e^-t
    bad = C.derivation_check("wrong", wrong)
    assert bad.verdict == Verdict.REFUTED and bad.evidence["value"] > 1e-9


# ---- thresholds by value -------------------------------------------------------------------------

def test_trivial_phase_claim_verified_and_states_formula():
    claim = C.make_trivial_phase_claim()
    assert "sqrt" in claim.statement and "N_0" in claim.statement
    r = claim.run(CTX)
    assert r.verdict == Verdict.VERIFIED, r.reason


@pytest.mark.parametrize("factor", [1.01, 0.99, 1.0 + 1e-6])
def test_trivial_phase_claim_wrong_threshold_not_verified(factor):
    f = sp.Float(factor, 20)
    claim = C.make_trivial_phase_claim(threshold=lambda s: f * C.theorem1_threshold(s))
    assert str(f)[:4] in claim.statement  # the statement shows the claimed value
    r = claim.run(CTX)
    assert r.verdict == Verdict.REFUTED, r.reason
    # the symbolic step involves the claimed value and fails; the value comparison fails
    assert any(c.name.startswith("phi'(0)") and c.verdict == Verdict.REFUTED for c in r.checks)
    assert any("claimed threshold" in c.name and c.verdict == Verdict.REFUTED for c in r.checks)


def test_trivial_phase_claim_missing_sqrt_k_refuted():
    r = C.make_trivial_phase_claim(threshold=lambda s: sp.sqrt(s["L"] / s["n_w"]) / s["K"]).run(CTX)
    assert r.verdict == Verdict.REFUTED


def test_instance_threshold_claim_off_by_1e_minus_6_refuted():
    inst = FCInstance(3, 2, 2, 4, 0.05)
    rep = C.check_instance(inst, predict=_scaled(T.type1_prediction, "lambda_crit", 1 + 1e-6), n_starts=1)
    assert _by_id(rep)["threshold"].verdict == Verdict.REFUTED


# ---- false statements ----------------------------------------------------------------------------

def test_type1_claim_refutes_a_off_by_one_percent():
    r = C.make_type1_claim(ONE, predict=_scaled(T.type1_prediction, "a", 1.01)).run(CTX)
    assert r.verdict == Verdict.REFUTED
    assert any(c.name.endswith("minimiser-type-i") and c.verdict == Verdict.REFUTED for c in r.checks)


@pytest.mark.parametrize("field,factor", [("a", 1.0001), ("b", 0.999), ("t", 1.01), ("objective", 1.0001),
                                          ("objective", 1 - 1e-5)])
def test_type1_false_constants_never_verified(field, factor):
    r = C.make_type1_claim(ONE, predict=_scaled(T.type1_prediction, field, factor)).run(CTX)
    assert r.verdict in (Verdict.REFUTED, Verdict.INCONCLUSIVE)


def test_small_optimum_does_not_accept_a_one_percent_error():
    inst = FCInstance(3, 2, 2, 3, 1e-7)  # optimum ~ 1e-5
    rep = C.check_instance(inst, predict=_scaled(T.type1_prediction, "objective", 1.01), n_starts=1)
    assert _by_id(rep)["optimal-value"].verdict == Verdict.REFUTED


def test_wrong_geometry_zero_claimed_in_collapse_phase_refuted():
    inst = FCInstance(3, 2, 2, 4, 0.05)
    zero = lambda i: T.Prediction("theorem-1", "trivial", math.log(i.K), math.log(i.K), t=0.0, a=0.0, b=0.0)  # noqa
    rep = C.check_instance(inst, predict=zero, n_starts=1)
    assert _by_id(rep)["minimiser-zero"].verdict == Verdict.REFUTED
    assert rep.verdict == Verdict.REFUTED


def test_type1_claimed_for_zipf_without_layernorm_is_refuted():
    zipf = lambda ctx: [FCInstance(3, 2, 3, 4, 0.05, freqs=T.zipf_freqs(3))]  # noqa: E731
    r = C.make_type1_claim(zipf, predict=T.type1_prediction).run(CTX)
    assert r.verdict == Verdict.REFUTED
    assert any("optimal-value" in c.name and c.verdict == Verdict.REFUTED for c in r.checks)


def test_type3_claim_verified_and_refutes_wrong_r():
    one = lambda ctx: [FCInstance(2, 2, 2, 2, 0.1, freqs=(0.8, 0.2))]  # noqa: E731
    assert C.make_type3_claim(one).run(CTX).verdict == Verdict.VERIFIED
    r = C.make_type3_claim(one, predict=_scaled(T.type3_prediction, "r", 1.01)).run(CTX)
    assert r.verdict == Verdict.REFUTED
    assert any("gradient vanishes" in c.name and c.verdict == Verdict.REFUTED for c in r.checks)


def test_type2_claim_verified_and_refutes_wrong_b():
    one = lambda ctx: [FCInstance(3, 2, 2, 3, 0.05, layernorm=True, freqs=(0.7, 0.3))]  # noqa: E731
    r = C.make_type2_claim(one).run(CTX)
    assert r.verdict == Verdict.VERIFIED, r.reason
    mu = [c for c in r.checks if "does not depend on mu" in c.name]
    assert mu and mu[0].verdict == Verdict.VERIFIED and mu[0].independent
    r = C.make_type2_claim(one, predict=_scaled(T.type2_prediction, "b", 1.01)).run(CTX)
    assert r.verdict == Verdict.REFUTED


def test_type2_claim_wrong_frequency_dependence_not_verified():
    """A false Type II statement: b* depends on mu (scaled by 1 + (mu_1 - 1/s_c))."""
    def predict(inst):
        p = T.type2_prediction(inst)
        return dataclasses.replace(p, b=p.b * (1 + (inst.freqs[0] - 1 / inst.s_c)))
    one = lambda ctx: [FCInstance(3, 2, 2, 3, 0.05, layernorm=True, freqs=(0.7, 0.3))]  # noqa: E731
    r = C.make_type2_claim(one, predict=predict).run(CTX)
    assert r.verdict in (Verdict.REFUTED, Verdict.INCONCLUSIVE)
    mu = [c for c in r.checks if "does not depend on mu" in c.name]
    assert mu and mu[0].verdict != Verdict.VERIFIED


def test_layernorm_with_d_below_n_c_is_not_applicable():
    rep = C.check_instance(FCInstance(3, 2, 2, 2, 0.05, layernorm=True), n_starts=1)
    assert rep.verdict == Verdict.NOT_APPLICABLE and "d >= n_c" in rep.reason


def test_low_dim_claim_proven_by_uniqueness():
    r = C.make_low_dim_claim().run(CTX)
    assert r.verdict == Verdict.VERIFIED, r.reason


# ---- inputs and budgets ---------------------------------------------------------------------------

@pytest.mark.parametrize("lam", [1e-300, 1e-11, 1e5, float("inf")])
def test_lambda_outside_float64_safe_range_is_an_input_error(lam):
    with pytest.raises(InputError, match="lambda"):
        FCInstance(3, 2, 2, 4, lam)


def test_budget_refusal_states_estimate_and_limit():
    inst = FCInstance(3, 8, 3, 4, 0.1, K=40, latents="random")  # 40 * 3^8 = 262440 sentences
    with pytest.raises(InputError, match="limit"):
        C.check_instance(inst)
    inst = FCInstance(2, 10, 2, 4, 0.1)  # K = 1024 classes x 1024^2 ... refused before any work
    with pytest.raises(InputError, match="limit"):
        C.check_instance(inst)
