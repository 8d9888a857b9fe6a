"""Rigorous (ball-arithmetic) certificates for the full-batch SCL class-reduced relaxation (docs/rigorous.md).

Expected values: 50-digit mpmath evaluations of the spec's closed forms (docs/scl.md: the Theorem 1 bound
for UFM+, the collapsed-ETF value for balanced UFM), written here independently of the code under test.
"""

import numpy as np
import pytest

flint = pytest.importorskip("flint")
mpmath = pytest.importorskip("mpmath")

from proofs_check import rigorous as PR  # noqa: E402
from proofs_check.claims import scl as C  # noqa: E402
from solvers import rigorous as R  # noqa: E402
from solvers import scl as SS  # noqa: E402
from theory import scl as T  # noqa: E402


def mp_value(counts, tau, nonneg):
    with mpmath.workdps(50):
        tau = mpmath.mpf(tau)
        k, N = len(counts), sum(counts)
        e = mpmath.exp(-1 / tau) if nonneg else mpmath.exp(-mpmath.mpf(k) / ((k - 1) * tau))
        return mpmath.fsum(n * mpmath.log1p((n - 2) + (N - n) * e) for n in counts if n >= 2)  # no cancellation


def _mpf(q):
    return mpmath.mpf(q.numerator) / q.denominator


CASES = [((5, 3, 2), 0.5, True), ((4, 4, 4), 0.5, True), ((3, 2), 1.0, True), ((7, 3, 1), 0.05, True),
         ((3, 1, 1), 0.5, True), ((6, 2, 2, 9), 3e-3, True), ((4, 4, 4), 0.5, False), ((3, 3), 0.2, False),
         ((2,) * 30, 1e-3, False)]


@pytest.mark.parametrize("counts,tau,nonneg", CASES)
def test_bracket_contains_the_50_digit_optimum_and_is_narrow(counts, tau, nonneg):
    k = len(counts)
    rb = R.scl_structured(counts, tau, nonneg, d=k + 1)
    f = mp_value(counts, tau, nonneg)
    with mpmath.workdps(50):
        lo = _mpf(R.endpoints(rb.lower)[0])
        hi = _mpf(R.endpoints(rb.upper)[1])
        assert lo <= f <= hi
        assert hi - lo <= 1e-8 * f
    d = rb.to_dict()
    assert d["lower"][0] <= d["upper"][1]


def test_large_k_balanced_etf_is_fast_and_tight():
    counts = (20,) * 1000
    rb = R.scl_structured(counts, 0.5, False, d=999)
    f = mp_value(counts, 0.5, False)
    with mpmath.workdps(50):
        assert _mpf(R.endpoints(rb.lower)[0]) <= f <= _mpf(R.endpoints(rb.upper)[1])


def test_no_feasible_value_below_the_dimension_the_configuration_needs():
    assert R.scl_structured((5, 3, 2), 0.5, True, d=2).upper is None
    assert R.scl_structured((5, 3, 1), 0.5, True, d=3).upper is not None  # shared singleton direction
    assert R.scl_structured((4, 4, 4), 0.5, False, d=1).upper is None


@pytest.mark.parametrize("nonneg", [True, False])
def test_dense_recipe_is_valid_at_random_candidates_and_tight_at_the_optimum(nonneg):
    counts, tau = (4, 4, 4), 0.5
    k = len(counts)
    f = mp_value(counts, tau, nonneg)
    n = np.array(counts, float)
    M0 = np.diag(n) if nonneg else n[0] * k / (k - 1) * (np.eye(k) - 1 / k)
    rb = R.scl_reduced_dense(counts, tau, nonneg, M0)
    with mpmath.workdps(50):
        lo_hi = _mpf(R.endpoints(rb.lower)[1])
        assert lo_hi <= f and f - lo_hi <= 1e-12 * f
    rng = np.random.default_rng(3)
    for _ in range(4):
        B = rng.standard_normal((k, k)) * rng.uniform(0.1, 3)
        M1 = B @ B.T + (np.abs(B @ B.T) if nonneg else 0)
        rb = R.scl_reduced_dense(counts, tau, nonneg, M1)
        with mpmath.workdps(50):
            assert _mpf(R.endpoints(rb.lower)[1]) <= f
        fl = SS.class_reduced_dual(counts, tau, nonneg=nonneg, candidates=[M1]).value
        assert abs(rb.lower_bound - fl) <= 1e-9 * max(1.0, abs(fl))  # the same construction as the float code


def test_perturbed_dual_point_that_is_not_psd_is_rejected():
    counts, tau = (5, 3, 2), 0.5
    M0 = np.diag(np.array(counts, float))
    F0, Cg = SS.reduced_loss(M0, counts, tau)
    mu = np.diag(Cg).copy()
    # S = C - N - Diag(mu) = 0 at the OF; mu lowered by 1e-6 leaves S = 1e-6 I (PSD, verified): a bound
    rb = R.scl_reduced_dense(counts, tau, True, M0, mu=mu - 1e-6, repair=False)
    assert rb.lower_bound <= float(mp_value(counts, tau, True))
    # mu raised by 1e-6: S = -1e-6 I is not PSD: no bound
    with pytest.raises(R.NotCertified):
        R.scl_reduced_dense(counts, tau, True, M0, mu=mu + 1e-6, repair=False)


def _report(counts=(5, 3, 2), tau=0.5, d=4, nonneg=True):
    return C.check_instance(T.SCLInstance(counts, tau, d, nonneg)).to_dict()


def _value_claim(out, cid):
    return next(c for c in out["claims"] if c["id"] == cid)


@pytest.mark.parametrize("nonneg,bound_id", [(True, "theorem-lower-bound"), (False, "etf-lower-bound")])
def test_true_statements_are_rigorously_verified(nonneg, bound_id):
    out = PR.apply(_report(counts=(4, 4, 4), d=4, nonneg=nonneg))
    assert out["rigorous"] is True and out["verdict"] == "VERIFIED"
    assert _value_claim(out, "optimal-value")["rigorous"] is True
    assert _value_claim(out, bound_id)["rigorous"] is True


@pytest.mark.parametrize("sign", [1, -1])
def test_false_claimed_optimum_off_by_1e6_is_refuted(sign):
    base = _report()
    c = _value_claim(base, "optimal-value")
    c["evidence"]["predicted"] *= 1 + sign * 1e-6
    out = PR.apply(base)
    assert _value_claim(out, "optimal-value")["verdict"] == "REFUTED"
    assert out["verdict"] == "REFUTED" and out["rigorous"] is False


def test_false_lower_bound_claim_is_refuted_by_the_feasible_value():
    base = _report()
    c = _value_claim(base, "theorem-lower-bound")
    c["evidence"]["claimed_lower_bound"] *= 1 + 1e-6
    out = PR.apply(base)
    assert _value_claim(out, "theorem-lower-bound")["verdict"] == "REFUTED"


def test_minibatch_and_imbalanced_ufm_are_unsupported_and_keep_float_verdicts():
    out = PR.apply(_report(counts=(5, 3, 2), d=3, nonneg=False))
    assert out["certificate"]["rigorous"]["status"] == "unsupported"
    assert out["rigorous"] is False
    inst = T.SCLInstance((2, 2), 0.5, 3, True, ((0, 1, 2), (1, 2, 3)))
    out = PR.apply(C.check_instance(inst, starts=2).to_dict())
    assert out["certificate"]["rigorous"]["status"] == "unsupported"
