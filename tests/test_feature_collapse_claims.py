"""Feature collapse claims: each one refutes a deliberately false statement; hypotheses -> INCONCLUSIVE."""

import dataclasses

import pytest
import sympy as sp

from proofs_check.claims import feature_collapse as C
from proofs_check.core import Provenance, RunContext, Verdict
from solvers import feature_collapse as S
from theory import feature_collapse as T
from theory.feature_collapse import FCInstance

CTX = RunContext()
ONE = lambda ctx: [FCInstance(3, 2, 2, 4, 0.05)]  # noqa: E731


def _scaled(fn, field, factor):
    def predict(inst):
        p = fn(inst)
        v = getattr(p, field)
        return dataclasses.replace(p, **{field: tuple(x * factor for x in v) if isinstance(v, tuple) else v * factor})
    return predict


def test_provenance_and_ids():
    assert {c.provenance for c in C.CLAIMS} == {Provenance.RECONSTRUCTED}
    assert all(c.id.startswith("feature_collapse.") and c.family == "feature_collapse" for c in C.CLAIMS)
    conj = [c for c in C.CLAIMS if "thm2" in c.id][0]
    assert "CONJECTURE" in conj.statement and "never proved" in conj.statement


def test_type1_claim_verified_on_reference_row():
    r = C.make_type1_claim(ONE).run(CTX)
    assert r.verdict == Verdict.VERIFIED, r.reason


def test_type1_claim_refutes_a_off_by_one_percent():
    r = C.make_type1_claim(ONE, predict=_scaled(T.type1_prediction, "a", 1.01)).run(CTX)
    assert r.verdict == Verdict.REFUTED
    assert any("a*" in c.name and c.verdict == Verdict.REFUTED for c in r.checks)


def test_type1_claim_refutes_objective_off():
    r = C.make_type1_claim(ONE, predict=_scaled(T.type1_prediction, "objective", 1.0001)).run(CTX)
    assert r.verdict == Verdict.REFUTED


def test_type1_claimed_for_zipf_without_layernorm_is_refuted():
    zipf = lambda ctx: [FCInstance(3, 2, 3, 4, 0.05, freqs=T.zipf_freqs(3))]  # noqa: E731
    r = C.make_type1_claim(zipf, predict=T.type1_prediction).run(CTX)
    assert r.verdict == Verdict.REFUTED
    assert any("global optimum" in c.name and c.verdict == Verdict.REFUTED for c in r.checks)


def test_constants_claim_refutes_tampered_reference():
    rows = [(C.SPEC_ROWS[0][0], dict(C.SPEC_ROWS[0][1], a="1.629965"))]  # a* x 1.01
    assert C.make_constants_claim(rows=rows).run(CTX).verdict == Verdict.REFUTED
    paper = dict(C.PAPER_SETTING, a="1.43636")  # 1.42214 x 1.01
    assert C.make_constants_claim(paper=paper).run(CTX).verdict == Verdict.REFUTED
    wrong_thr = dict(C.SPEC_THRESHOLDS, zipf="0.1571")  # the uniform value claimed for Zipf
    assert C.make_constants_claim(thresholds=wrong_thr).run(CTX).verdict == Verdict.REFUTED
    assert C.make_constants_claim().run(CTX).verdict == Verdict.VERIFIED


def test_derivations_claim_refutes_wrong_identity():
    n, lam, nw, K = sp.symbols("n_c lambda n_w K", positive=True)
    L = 2
    wrong = {"lambda_crit without the -K n_c^-L term": sp.sqrt(K * L / nw) / (1 + K) - sp.sqrt(K * L / nw) / (
        1 + K - K * n ** (-L))}
    assert C.make_derivations_claim(lambda: wrong).run(CTX).verdict == Verdict.REFUTED


def test_trivial_phase_claim_refutes_wrong_threshold():
    r = C.make_trivial_phase_claim(threshold=lambda inst: 1.01 * T.lambda_crit(inst)).run(CTX)
    assert r.verdict == Verdict.REFUTED
    # sqrt(L/n_w)/K (a missing sqrt(K)) is wrong as well
    r = C.make_trivial_phase_claim(threshold=lambda inst: (inst.L / inst.n_w) ** 0.5 / inst.K).run(CTX)
    assert r.verdict == Verdict.REFUTED


def test_type3_claim_refutes_wrong_r():
    one = lambda ctx: [FCInstance(2, 2, 2, 2, 0.1, freqs=(0.8, 0.2))]  # noqa: E731
    assert C.make_type3_claim(one).run(CTX).verdict == Verdict.VERIFIED
    r = C.make_type3_claim(one, predict=_scaled(T.type3_prediction, "r", 1.01)).run(CTX)
    assert r.verdict == Verdict.REFUTED
    # the gradient at the (wrong) constructed point does not vanish
    assert any("gradient vanishes" in c.name and c.verdict == Verdict.REFUTED for c in r.checks)


def test_type2_claim_refutes_wrong_b():
    one = lambda ctx: [FCInstance(3, 2, 2, 3, 0.05, layernorm=True)]  # noqa: E731
    r = C.make_type2_claim(one, predict=_scaled(T.type2_prediction, "b", 1.01)).run(CTX)
    assert r.verdict == Verdict.REFUTED


def test_layernorm_with_d_below_n_c_is_inconclusive():
    inst = FCInstance(3, 2, 2, 2, 0.05, layernorm=True)
    sol = S.solve(inst, n_starts=1)
    checks = C.instance_checks(inst, sol, T.type2_prediction(inst))
    assert {c.verdict for c in checks} == {Verdict.INCONCLUSIVE}
    assert any("d >= n_c" in c.reason for c in checks)


def test_uncertified_mismatch_is_not_refuted():
    inst = FCInstance(3, 2, 2, 4, 0.05)
    sol = S.solve(inst, n_starts=1)
    sol.certificate = None  # no lower bound: nothing may be VERIFIED, a geometry mismatch is no counterexample
    checks = C.instance_checks(inst, sol, _scaled(T.type1_prediction, "a", 1.01)(inst))
    assert Verdict.VERIFIED not in {c.verdict for c in checks if "global optimum" in c.name}
    geometry = [c for c in checks if "predicted configuration" not in c.name]
    assert Verdict.REFUTED not in {c.verdict for c in geometry}
    # the tampered prediction is internally inconsistent: its configuration's exact risk is not its value,
    # a counterexample that needs no certificate
    assert [c.verdict for c in checks if "predicted configuration" in c.name] == [Verdict.REFUTED]
