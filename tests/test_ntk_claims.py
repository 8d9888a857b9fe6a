"""Claims of the block-NTK family: provenance, true claims VERIFIED, false claims REFUTED,
failed hypotheses NOT_APPLICABLE (named), undecided checks INCONCLUSIVE."""

import pytest

from proofs_check.claims import ntk as cl
from proofs_check.core import Provenance, RunContext, Verdict
from proofs_check.registry import all_claims
from theory import ntk as th

QUICK = RunContext("quick")


def test_registered_with_provenance():
    ids = {c.id for c in all_claims() if c.family == "ntk"}
    assert ids >= {"ntk.spectrum", "ntk.inverse", "ntk.rates", "ntk.invariant", "ntk.scatter", "ntk.nc1-bound",
                   "ntk.small-init-limit", "ntk.lazy-no-collapse", "ntk.e-zero"}
    for c in cl.CLAIMS:
        assert c.provenance == Provenance.DERIVED  # the theorem text was not available (spec)
        assert "Seleznova" in c.source and "derived" in c.source
        assert "Theorem" not in c.source and "Thm" not in c.source  # never cite theorem numbers


# The true claims themselves run in proofs_check/test_claims.py (every registered claim); here the
# cheap ones are checked for VERIFIED (not just "not refuted").
@pytest.mark.parametrize("claim", [cl.spectrum_claim(), cl.lazy_claim(), cl.nc1_bound_claim()], ids=lambda c: c.id)
def test_true_claims_verified(claim):
    res = claim.run(QUICK)
    assert res.verdict == Verdict.VERIFIED, res.reason


def _wrong_lambda_c(C, m, kd, kc, kn):
    # lambda_c with (m-1) kappa_n in place of m kappa_n: off by kappa_n
    return (kd - kc, kd + (m - 1) * kc - (m - 1) * kn, kd + (m - 1) * kc + m * (C - 1) * kn)


def _wrong_lambda_0(C, m, kd, kc, kn):
    return (kd - kc + kn / 100, kd + (m - 1) * kc - m * kn, kd + (m - 1) * kc + m * (C - 1) * kn)


@pytest.mark.parametrize("eigen", [_wrong_lambda_c, _wrong_lambda_0])
def test_wrong_eigenvalue_refuted(eigen):
    res = cl.spectrum_claim(eigen, claim_id="false").run(QUICK)
    assert res.verdict == Verdict.REFUTED
    sym = [c for c in res.checks if c.name.startswith("K v")]
    num = [c for c in res.checks if c.name.startswith("numeric spectrum")]
    assert any(c.verdict == Verdict.REFUTED for c in sym)  # symbolically
    assert any(c.verdict == Verdict.REFUTED for c in num)  # and numerically
    witness = next(c for c in sym if c.verdict == Verdict.REFUTED).evidence
    assert "witness" in witness and witness["value"] > 1e-9


def test_wrong_rate_refuted():
    def rates(inst):
        r = th.residual_rates(inst)
        r["class"] *= 1.001  # 0.1% off
        return r

    res = cl.rates_claim(rates, claim_id="false").run(QUICK)
    assert res.verdict == Verdict.REFUTED
    assert all(c.verdict == Verdict.VERIFIED for c in res.checks if not c.name.startswith("class"))


@pytest.mark.parametrize("weights", [(1, 1, 0), (1, 0.99, 1), (2, 1, 1)])
def test_wrong_invariant_refuted(weights):
    res = cl.invariant_claim(weights, claim_id="false").run(QUICK)
    assert res.verdict == Verdict.REFUTED
    drift = next(c for c in res.checks if c.name.startswith("max_t"))
    assert drift.verdict == Verdict.REFUTED  # numerically as well


def test_wrong_deviation_ode_refuted():
    res = cl.scatter_claim("lambda_c", claim_id="false").run(QUICK)
    assert res.verdict == Verdict.REFUTED
    assert any(c.verdict == Verdict.REFUTED and c.name.startswith("numeric") for c in res.checks)


def test_nc1_bound_off_by_ten_percent_refuted():
    res = cl.nc1_bound_claim(0.9, claim_id="false").run(QUICK)
    assert res.verdict == Verdict.REFUTED
    bad = [c for c in res.checks if c.verdict == Verdict.REFUTED]
    assert bad and all("witness" in c.reason for c in bad)


@pytest.mark.parametrize("key,factor", [("mean_sq_norm", 1.001), ("W_fro_sq", 0.999), ("escape_rate", 1.01),
                                        ("late_within_rate", 1.01), ("self_duality", 1.001)])
def test_wrong_small_init_limit_refuted(key, factor):
    def limits(inst):
        d = dict(th.small_init_limits(inst))
        d[key] *= factor
        return d

    res = cl.small_init_claim(limits, claim_id="false").run(QUICK)
    assert res.verdict == Verdict.REFUTED, res.reason


def test_lazy_collapse_claim_refuted():
    res = cl.lazy_claim(collapses=True, claim_id="false").run(QUICK)
    assert res.verdict == Verdict.REFUTED
    assert "no collapse" in res.reason


def test_etf_from_e_zero_refuted_for_c3():
    """E = 0 with M^T h_bar != 0 (C = 3): claiming an ETF is refuted."""
    res = cl.e_zero_claim(predict_etf=True, claim_id="false").run(QUICK)
    assert res.verdict == Verdict.REFUTED
    bad = next(c for c in res.checks if c.verdict == Verdict.REFUTED)
    assert "expected simplex-etf" in bad.reason and bad.evidence["g_norm"] > 0.1


def test_e_zero_c2_is_not_applicable_not_refuted():
    inst = th.NTKInstance(2, 3, (1.0, 0.5, 0.1))
    checks = cl.e_zero_checks(inst, cl.e_zero_run(inst, seed=3))
    verdicts = {c.name: c.verdict for c in checks}
    assert verdicts["C = 2: the two centred means always form an ETF (C=2, m=3)"] == Verdict.VERIFIED
    assert verdicts["not-an-ETF (C=2, m=3)"] == Verdict.NOT_APPLICABLE
    na = next(c for c in checks if c.name == "not-an-ETF (C=2, m=3)")
    assert "hypothesis fails" in na.reason and "C >= 3" in na.reason
    assert not any(v == Verdict.REFUTED for v in verdicts.values())


def test_e_zero_without_mean_component_is_inconclusive():
    """With g = M^T h_bar ~ 0 nothing distinguishes the Gram from an ETF: INCONCLUSIVE, not VERIFIED."""
    rep = cl.e_zero_run(cl.REFERENCE[0], seed=0, mean_weight=0.0)
    checks = cl.e_zero_checks(cl.REFERENCE[0], rep)
    last = checks[-1]
    if rep.measures["g_norm"] < 0.1:
        assert last.verdict == Verdict.NOT_APPLICABLE and "too small" in last.reason
    assert not any(c.verdict == Verdict.REFUTED for c in checks)


def test_small_init_hypotheses():
    inst = cl.REFERENCE[0]
    rep, esc, late = cl.small_init_run(inst, eps=1e-6, T=30.0)
    big = cl.small_init_checks(inst, rep, esc, late, eps=0.5, n=4)
    assert [c.verdict for c in big] == [Verdict.NOT_APPLICABLE] and "not small" in big[0].reason
    assert "hypothesis fails" in big[0].reason and "eps -> 0" in big[0].reason
    short, esc2, late2 = cl.small_init_run(inst, eps=1e-6, T=3.0)
    unconverged = cl.small_init_checks(inst, short, esc2, late2, eps=1e-6, n=4)
    assert unconverged[-1].verdict == Verdict.INCONCLUSIVE and "not converged" in unconverged[-1].reason
    # the prediction itself is still checked against the fixed-point equations (independent of the run)
    assert all(c.verdict == Verdict.VERIFIED for c in unconverged[:-1]) and len(unconverged) == 7
    lowdim = cl.small_init_checks(th.NTKInstance(4, 3, (1, 0.5, 0)), rep, esc, late, eps=1e-6, n=2)
    assert lowdim[0].verdict == Verdict.NOT_APPLICABLE and "C - 1" in lowdim[0].reason


def test_symbolic_zero_helper_refutes_with_witness_and_verifies_identities():
    import sympy as sp

    x, y = sp.symbols("x y", real=True)
    ok = cl._matrix_zero("ok", [(x + y) ** 2 - x ** 2 - 2 * x * y - y ** 2])
    assert ok.verdict == Verdict.VERIFIED
    bad = cl._matrix_zero("bad", [0, x * y], [{x: 0.5, y: 0.5}])
    assert bad.verdict == Verdict.REFUTED and bad.evidence["value"] == pytest.approx(0.25)


def _small_init_sweep(inst, n, seed):
    lim = th.small_init_limits(inst)
    T = max(30.0, 20 / lim["late_within_rate"] + 15 / lim["escape_rate"])
    rep, esc, late = cl.small_init_run(inst, n=n, T=T, seed=seed)
    checks = cl.small_init_checks(inst, rep, esc, late, cl.SMALL_EPS, n)
    assert not any(c.verdict in (Verdict.REFUTED, Verdict.ERROR) for c in checks), \
        [(c.name, c.reason) for c in checks if c.verdict == Verdict.REFUTED]
    l0, lc, _ = inst.eigenvalues
    if l0 <= lc and n >= inst.classes - 1:
        # phases separated and a long enough run: every check of the limit is VERIFIED
        assert all(c.verdict == Verdict.VERIFIED for c in checks), [(c.name, c.reason) for c in checks]


from hypothesis import given, settings, strategies as st  # noqa: E402

from tests.test_ntk_theory import pd_instances  # noqa: E402


@settings(max_examples=4)
@given(pd_instances(), st.integers(-1, 2), st.integers(0, 100))
def test_small_init_limit_on_random_kernels(inst, dn, seed):
    """The limit checks on random PD kernels never REFUTE the (true) statement; with l0 <= lc they verify."""
    _small_init_sweep(inst, max(1, inst.classes + dn), seed)


@pytest.mark.slow
@settings(max_examples=40)
@given(pd_instances(), st.integers(-1, 2), st.integers(0, 100))
def test_small_init_limit_on_random_kernels_slow(inst, dn, seed):
    _small_init_sweep(inst, max(1, inst.classes + dn), seed)


def test_late_rate_needs_separated_phases():
    """l0 > lc: the within-class phase is not separate; the late-rate check is INCONCLUSIVE (hypothesis),
    the other limit checks still hold."""
    inst = th.NTKInstance(3, 3, (2.0, 0.0, 0.3))  # l0 = 2 > lc = 1.1
    l0, lc, _ = inst.eigenvalues
    assert l0 > lc
    rep, esc, late = cl.small_init_run(inst, T=40.0)
    checks = cl.small_init_checks(inst, rep, esc, late, cl.SMALL_EPS, 4)
    last = checks[-1]
    assert last.verdict == Verdict.NOT_APPLICABLE and "phases are not separated" in last.reason
    assert all(c.verdict == Verdict.VERIFIED for c in checks[:-1])
