"""Deep UFM certificates without python-flint (docs/deep_ufm.md, "Without python-flint"): with ``import flint``
made to fail, the scalar certificates, the n-th root enclosures, the exact witness values and the four claims are
proven with the standard library (solvers/rational_interval.py: intervals with exact Fraction endpoints).

Expected values are computed here independently: mpmath at 50 digits (the scalar minima, the roots), Fractions
written out here (the exact objective), and where python-flint is installed the arb path (same branches, same
verdicts).
"""

from __future__ import annotations

import importlib.util
import sys
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proofs_check.claims import deep_ufm as C
from proofs_check.core import RunContext, Verdict
from solvers import deep_ufm as S
from solvers import rational_interval as RI
from solvers.rational_interval import RInterval
from theory import deep_ufm as T
from tests._reference import fraction_objective, mp_scalar_min

CTX = RunContext()
HAVE_FLINT = importlib.util.find_spec("flint") is not None


@pytest.fixture
def no_flint(monkeypatch):
    """``import flint`` fails (as on the base install); the solvers look it up at every call."""
    monkeypatch.setitem(sys.modules, "flint", None)
    assert S.arithmetic() == S.RATIONAL_ARITHMETIC
    return monkeypatch


class _without_flint:
    """Context manager: ``import flint`` fails inside; whatever was in sys.modules is back afterwards (so one test
    can compare the fallback with the arb path)."""

    def __enter__(self):
        self.had, self.saved = "flint" in sys.modules, sys.modules.get("flint")
        sys.modules["flint"] = None
        return self

    def __exit__(self, *exc):
        if self.had:
            sys.modules["flint"] = self.saved
        else:
            sys.modules.pop("flint", None)


# ------------------------------------------------------------------------------------------
# independent references
# ------------------------------------------------------------------------------------------

# ------------------------------------------------------------------------------------------
# the interval class and the n-th root
# ------------------------------------------------------------------------------------------

def _rationals(max_bits: int = 80):
    return st.builds(lambda p, q: Fraction(p, q), st.integers(1, 2 ** max_bits), st.integers(1, 2 ** max_bits))


@settings(max_examples=150, deadline=None)
@given(x=_rationals(), n=st.integers(1, 13), bits=st.sampled_from([8, 30, 64, 192]))
def test_nth_root_enclosure_contains_the_root(x, n, bits):
    a, b = RI.root_enclosure(x, n, bits)
    assert a ** n <= x <= b ** n  # exact powers
    with mp.workdps(80):
        r = mp.root(mp.mpf(x.numerator) / x.denominator, n)
        assert mp.mpf(a.numerator) / a.denominator <= r * (1 + mp.mpf(10) ** -70)
        assert r * (1 - mp.mpf(10) ** -70) <= mp.mpf(b.numerator) / b.denominator
    # tight: about 2^-bits relative (the enclosure is not just [0, inf))
    assert b - a <= max(a, Fraction(1, 2 ** 40)) * Fraction(4, 2 ** min(bits, 60)) + Fraction(1, 2 ** bits)


@settings(max_examples=200, deadline=None)
@given(m=st.integers(0, 2 ** 400), n=st.integers(1, 15))
def test_integer_root_is_the_floor(m, n):
    r = RI.iroot(m, n)
    assert r ** n <= m < (r + 1) ** n


def test_exact_roots_are_points():
    assert RI.root_enclosure(Fraction(27, 8), 3) == (Fraction(3, 2), Fraction(3, 2))
    a, b = RI.root_enclosure(2, 2)
    assert a < b and a * a < 2 < b * b


_ends = st.fractions(min_value=-50, max_value=50, max_denominator=10 ** 6)


@settings(max_examples=150, deadline=None)
@given(a=_ends, b=_ends, c=_ends, d=_ends, u=st.fractions(0, 1), v=st.fractions(0, 1), n=st.integers(0, 7))
def test_interval_operations_enclose_the_point_operations(a, b, c, d, u, v, n):
    X, Y = RInterval(min(a, b), max(a, b)), RInterval(min(c, d), max(c, d))
    x = X.lo + u * (X.hi - X.lo)  # points of X and Y, exact
    y = Y.lo + v * (Y.hi - Y.lo)
    assert (X + Y).contains(x + y) and (X - Y).contains(x - y) and (X * Y).contains(x * y)
    assert (X ** n).contains(x ** n) and (3 * X).contains(3 * x) and (1 - X).contains(1 - x)
    if not Y.lo <= 0 <= Y.hi:
        assert (X / Y).contains(x / y) and (2 / Y).contains(Fraction(2) / y)
    # certain comparisons: True only when every point of X is below every point of Y
    if X < Y:
        assert x < y and X.hi < Y.lo
    if X > Y:
        assert x > y
    if X.lo <= Y.hi and Y.lo <= X.hi:  # overlapping: neither is proven
        assert not X < Y and not X > Y


def test_square_of_an_interval_around_zero_starts_at_zero():
    sq = RInterval(-1, 2) ** 2
    assert sq.lo == 0 and sq.hi == 4
    assert (RInterval(-3, -2) ** 2).lo == 4


def _significant_bits(n: int) -> int:
    n = abs(n)
    return (n >> ((n & -n).bit_length() - 1)).bit_length() if n else 0


@settings(max_examples=100, deadline=None)
@given(p=st.integers(-2 ** 2000, 2 ** 2000), q=st.integers(1, 2 ** 2000), bits=st.integers(2, 300))
def test_outward_rounding_is_outward_and_bounded(p, q, bits):
    x = Fraction(p, q)
    lo, hi = RI.round_down(x, bits), RI.round_up(x, bits)
    assert lo <= x <= hi
    if x != 0:
        assert hi - lo <= abs(x) * Fraction(4, 2 ** bits)
    if max(abs(p).bit_length(), q.bit_length()) > bits:
        for r in (lo, hi):  # rounded: dyadic with at most bits + 1 significant bits
            assert r.denominator & (r.denominator - 1) == 0 and _significant_bits(r.numerator) <= bits + 1
    # the interval constructor rounds big endpoints outward and keeps the point inside
    y = x + Fraction(1, 3 ** 700)
    big = RInterval(y, y + Fraction(1, 7 ** 400))
    assert big.contains(y) and big.lo <= y
    for r in (big.lo, big.hi):
        assert _significant_bits(r.numerator) <= RI.LIMIT_BITS + 1


# ------------------------------------------------------------------------------------------
# scalar certificates: enclose the 50-digit minimum, same branch as the arb path
# ------------------------------------------------------------------------------------------

SCALAR_CASES = [(1, 6, 0.01, 3), (4, 12, 0.01, 3), (5, 500, 1e-3, 5), (1, 3, 0.3, 1), (1, 2, 0.2, 2),
                (9, 15, 0.01, 3), (1, 10, 0.004, 4), (3, 3, 1e-6, 8), (2, 4, 0.5, 2),
                (1, 2, 2.0, 1),  # L = 1 above the soft threshold: s = 0
                (1, 2, 1e-12, 4),  # tiny lambda
                (2, 4, 0.02, 2),  # K = 2 classes of 2
                (1, 3, 0.01, 12)]  # the deepest allowed model


@pytest.mark.parametrize("count,N,lam,L", SCALAR_CASES)
def test_fallback_scalar_certificate_encloses_50_digit_minimum(count, N, lam, L):
    lams = (lam,) * (L + 1)
    ref = S.certify_scalar(count, N, lams, L) if HAVE_FLINT else None
    v, s = mp_scalar_min(count, N, lams, L)
    with _without_flint():
        sc = S.certify_scalar(count, N, lams, L)
    assert sc.arithmetic == S.RATIONAL_ARITHMETIC
    assert sc.lower <= float(v) <= sc.upper
    assert sc.upper - sc.lower <= 1e-12 * max(1.0, float(v))
    assert sc.branch == ("positive" if s > 0 else "zero")
    if s > 0:
        assert sc.s_plus[0] <= float(s) * (1 + 1e-12) and float(s) * (1 - 1e-12) <= sc.s_plus[1]
    if ref is not None:  # the arb path decides the same branch with enclosures that overlap
        assert ref.arithmetic == S.ARB_ARITHMETIC and ref.branch == sc.branch
        assert ref.lower <= sc.upper and sc.lower <= ref.upper


@settings(max_examples=20, deadline=None)
@given(count=st.integers(1, 50), extra=st.integers(0, 200), L=st.integers(1, 7), loglam=st.floats(-6, 0),
       spread=st.sampled_from([1, 1, 2, 5]))
def test_fallback_scalar_certificate_property(count, extra, L, loglam, spread):
    N = count + extra + 1
    lams = (10.0 ** loglam,) * (L + 1)
    v, s = mp_scalar_min(count, N, lams, L, dps=30) if spread == 1 else (None, None)
    with _without_flint():
        sc = S.certify_scalar(count, N, lams, L, spread=spread)
    if spread == 1:
        assert sc.lower <= float(v) * (1 + 1e-14) + 1e-300 and float(v) * (1 - 1e-14) <= sc.upper
        if sc.branch != "undecided":
            assert sc.branch == ("positive" if s > 0 else "zero")
    else:
        # the spread divides C by K^{(L-1)/(L+1)}: equal lambdas, each times K^{-(L-1)/(L+1)}
        with mp.workdps(40):
            lam_eff = mp.mpf(10.0 ** loglam) * mp.power(spread, -mp.mpf(L - 1) / (L + 1))
            v2, _ = mp_scalar_min(count, N, (lam_eff,) * (L + 1), L, dps=40)
        assert sc.lower <= float(v2) * (1 + 1e-14) + 1e-300 and float(v2) * (1 - 1e-14) <= sc.upper


@pytest.mark.parametrize("count,N,lam,L", [(3, 6, 0.01, 2), (1, 5, 0.004, 5), (2, 4, 0.03, 12)])
def test_fallback_cover_bound_is_a_lower_bound(count, N, lam, L):
    # the path taken when q(t*) is not separated from 0 (near the threshold): a proven but loose lower bound
    lams = (lam,) * (L + 1)
    v, _ = mp_scalar_min(count, N, lams, L)
    vz = (count / (2 * N),) * 2
    with _without_flint():
        sc = S._cover_bound(S._backend(), count, N, lams, L, vz, "test", pieces=800)
    assert sc.branch == "undecided" and sc.lower <= float(v) <= sc.upper
    assert sc.lower >= float(v) * 0.9  # not vacuous


def _threshold_lambda(count, N, L):
    """lambda (equal over the layers) where q(t*) = 0 (the double root), in 50-digit mpmath: q(t*) = 0 gives
    2 N C = (L+1) (y t*^{L-1} - t*^{2L}), C = (L+1) lambda / 2."""
    with mp.workdps(50):
        y = mp.sqrt(count)
        ts = ((L - 1) * y / (2 * L)) ** (mp.mpf(1) / (L + 1))
        return float((y * ts ** (L - 1) - ts ** (2 * L)) / N)


@pytest.mark.parametrize("bits", [14, 24, 192])
def test_near_the_threshold_low_precision_stays_rigorous(bits, monkeypatch):
    # q(t*) ~ 0: at low root precision q(t*) is not separated from 0 and the cover bound decides; at every
    # precision the enclosure holds the 50-digit minimum and a decided branch is the true one
    monkeypatch.setattr(RI, "ROOT_BITS", bits)
    count, N, L = 2, 6, 3
    lam = _threshold_lambda(count, N, L)
    for f in (1 - 1e-9, 1.0, 1 + 1e-9):
        lams = (lam * f,) * (L + 1)
        v, s = mp_scalar_min(count, N, lams, L)
        with _without_flint():
            sc = S.certify_scalar(count, N, lams, L)
        assert sc.lower <= float(v) * (1 + 1e-15) and float(v) * (1 - 1e-15) <= sc.upper
        if sc.branch != "undecided":
            assert sc.branch == ("positive" if s > 0 else "zero")
        if bits == 14:
            assert sc.branch == "undecided" and "cover" in sc.how


# ------------------------------------------------------------------------------------------
# linear optimum, DNC enclosure, ReLU bounds
# ------------------------------------------------------------------------------------------

LINEAR = [T.balanced(3, "linear", "mse", 3, 2, 3, 0.01), T.DeepUFMInstance(3, "linear", "mse", (9, 4, 1, 1), 3,
                                                                            (0.01,)),
          T.balanced(1, "linear", "mse", 2, 1, 2, 0.3), T.balanced(1, "linear", "mse", 2, 1, 2, 2.0),
          T.balanced(2, "linear", "mse", 2, 1, 1, 0.02), T.balanced(4, "linear", "mse", 3, 1, 3, 1e-12),
          T.DeepUFMInstance(4, "linear", "mse", (5, 3, 2, 1), 4, (1e-3, 2e-3, 1e-3, 5e-3, 1e-2))]


@pytest.mark.parametrize("inst", LINEAR, ids=lambda i: i.label())
def test_fallback_linear_certificate_matches_the_50_digit_optimum(inst):
    counts = sorted(inst.counts, reverse=True)
    r = min(inst.width, inst.K)
    total, rank = mp.mpf(0), 0
    for i, c in enumerate(counts):
        if i < r:
            v, s = mp_scalar_min(c, inst.N, inst.lams, inst.layers)
            total, rank = total + v, rank + (s > 0)
        else:
            total += mp.mpf(c) / (2 * inst.N)
    ref = S.certify_linear_mse(inst) if HAVE_FLINT else None
    with _without_flint():
        cert = S.certify_linear_mse(inst)
    assert cert.details["arithmetic"] == S.RATIONAL_ARITHMETIC and "exact rationals" in cert.method
    assert cert.lower_bound <= float(total) * (1 + 1e-15) + 1e-300 and float(total) <= cert.upper * (1 + 1e-15)
    assert cert.upper - cert.lower_bound <= 1e-12 * max(float(total), 1e-300)
    assert cert.details["rank"] == rank
    if ref is not None:
        assert ref.details["rank"] == cert.details["rank"]
        assert ref.lower_bound <= cert.upper and cert.lower_bound <= ref.upper


def test_fallback_dnc_enclosure_and_relu_bounds():
    inst = T.balanced(4, "relu", "mse", 5, 1, 8, 0.004)
    v, s = mp_scalar_min(1, 5, inst.lams, 4)
    with _without_flint():
        enc = S.certify_dnc(inst)
        chain = S.certify_relu_chain_bound(inst)
        two = S.certify_relu_two_class_bound(T.balanced(4, "relu", "mse", 2, 1, 2, 0.01))
    assert enc[0] <= 5 * float(v) <= enc[1] and enc[1] - enc[0] <= 1e-13
    assert chain["arithmetic"] == S.RATIONAL_ARITHMETIC
    assert chain["lower_bound"] == pytest.approx(T.relu_chain_bound(inst), rel=1e-12)
    ref2 = 2 * mp_scalar_min(1, 2, (0.01,) * 5, 4)[0]
    assert two["lower_bound"] <= float(ref2) <= two["upper"]


# ------------------------------------------------------------------------------------------
# exact evaluation of a point
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("inst", [T.balanced(3, "relu", "mse", 3, 2, 4, 0.01),
                                  T.DeepUFMInstance(2, "linear", "mse", (3, 1), 2, (0.01, 0.2, 0.03)),
                                  T.balanced(1, "relu", "mse", 2, 1, 3, 0.05),
                                  T.DeepUFMInstance(4, "relu", "mse", (2, 1, 1), 3, (1e-12,))],
                         ids=lambda i: i.label())
def test_fallback_exact_value_equals_an_own_fraction_computation(inst):
    m = S.DeepModel(inst)
    rng = np.random.default_rng(11)
    for trial in range(3):
        x = rng.standard_normal(m.nvar) * 0.8
        if trial == 1:  # very different exponents, exact zeros, a subnormal
            x[::5] *= 1e-200
            x[1::7] = 0.0
            x[2] = 5e-324
        with _without_flint():
            v = S.exact_mse_value(inst, x)
        assert isinstance(v, Fraction)
        assert v == fraction_objective(inst, x)
        assert S.fmpq_float(v) == pytest.approx(m.value(x), rel=1e-12, abs=1e-300)
        if HAVE_FLINT:
            q = S.exact_mse_value(inst, x)
            assert Fraction(int(q.p), int(q.q)) == v
        b = float(v)  # correctly rounded: the next floats either side are strictly outside
        assert S.fmpq_below(v, float(np.nextafter(b, np.inf)))
        assert not S.fmpq_below(v, float(np.nextafter(b, -np.inf)))


def test_fallback_stored_witnesses_are_below_dnc():
    ws = S.stored_witnesses()
    assert ws
    for inst, x in ws[:2]:
        v, _ = mp_scalar_min(inst.n, inst.N, inst.lams, inst.layers)
        with _without_flint():
            r = S.witness_report(inst, x)
        assert r["arithmetic"] == S.RATIONAL_ARITHMETIC and r["below_dnc_proven"]
        assert r["value_exact"] < inst.K * float(v)
        p, q = map(int, r["value_exact_fraction"].split("/"))
        assert Fraction(p, q) == fraction_objective(inst, x)


# ------------------------------------------------------------------------------------------
# the claims: same verdicts as with python-flint, false statements REFUTED
# ------------------------------------------------------------------------------------------

def _verdicts(res):
    return {c.name: c.verdict for c in res.checks}


def test_shipped_claims_verified_without_flint():
    ref = {c.id: c.run(CTX) for c in C.CLAIMS} if HAVE_FLINT else {}
    with _without_flint():
        results = {c.id: c.run(CTX) for c in C.CLAIMS}
    assert set(results) == {"deep_ufm.linear-mse.optimum", "deep_ufm.dnc.suboptimal", "deep_ufm.dnc.optimal-shallow",
                            "deep_ufm.ce.low-rank-bias"}
    for cid, res in results.items():
        assert res.verdict is Verdict.VERIFIED, (cid, res.reason)
        assert not any("python-flint" in (c.reason or "") and "not installed" in (c.reason or "") for c in res.checks)
        if cid != "deep_ufm.ce.low-rank-bias":  # a measurement: no certificate arithmetic to name
            proven = [c for c in res.checks if "arithmetic" in c.evidence]
            assert proven and all(c.evidence["arithmetic"] == S.RATIONAL_ARITHMETIC for c in proven)
        if cid in ref:
            assert ref[cid].verdict is res.verdict and _verdicts(ref[cid]) == _verdicts(res), cid


def _one(inst):
    return lambda ctx: [inst]


def test_false_values_and_ranks_refuted_without_flint(no_flint):
    inst = T.DeepUFMInstance(2, "linear", "mse", (8, 3, 1), 3, (0.05,))
    v = float(sum(mp_scalar_min(c, 12, (0.05,) * 3, 2)[0] for c in (8, 3, 1)))
    for f in (1 + 5e-10, 1 - 5e-10):  # just outside VALUE_RTOL = 1e-10: the proven enclosure decides
        res = C.make_linear_optimum_claim(predict_value=lambda i, f=f: v * f, instances=_one(inst)).run(CTX)
        assert res.verdict is Verdict.REFUTED, res.reason
    assert C.make_linear_optimum_claim(predict_value=lambda i: v, instances=_one(inst)).run(CTX).verdict \
        is Verdict.VERIFIED
    for bad in (1, 3):  # the true rank is 2 (the minority class drops out)
        res = C.make_linear_optimum_claim(predict_rank=lambda i, b=bad: b, instances=_one(inst)).run(CTX)
        assert res.verdict is Verdict.REFUTED
    # L = 1 above the soft threshold (optimum at the zero point), tiny lambda: true statements verified
    for edge in (T.balanced(1, "linear", "mse", 2, 1, 2, 2.0), T.balanced(4, "linear", "mse", 3, 1, 3, 1e-12)):
        res = C.make_linear_optimum_claim(instances=_one(edge)).run(CTX)
        assert res.verdict is Verdict.VERIFIED, (edge.label(), res.reason)


def test_false_dnc_statements_refuted_without_flint(no_flint):
    inst = T.balanced(5, "relu", "mse", 3, 1, 6, 0.003)
    res = C.make_dnc_suboptimal_claim(predict_dnc_value=lambda i: T.dnc_value(i) * (1 + 1e-8),
                                      instances=_one(inst)).run(CTX)
    assert res.verdict is Verdict.REFUTED, res.reason
    # "DNC is optimal" where the stored witness (exact Fraction value) is below the proven DNC value
    res = C.make_dnc_suboptimal_claim(predict_optimal=lambda i: True, instances=_one(inst)).run(CTX)
    assert res.verdict is Verdict.REFUTED, res.reason
    assert any(c.verdict is Verdict.REFUTED and c.evidence.get("witness_gap", 0) > 0 for c in res.checks)
    # linear: DNC is the certified optimum; "DNC is not optimal" refuted by the proven lower bound
    res = C.make_dnc_suboptimal_claim(predict_optimal=lambda i: False,
                                      instances=_one(T.balanced(4, "linear", "mse", 5, 1, 5, 0.004))).run(CTX)
    assert res.verdict is Verdict.REFUTED, res.reason
    # K = 2 ReLU at depth 4: DNC optimal is VERIFIED (two-class bound), the negation REFUTED, and a claimed lower
    # bound above the optimum is refuted by a feasible point
    k2 = T.balanced(4, "relu", "mse", 2, 1, 2, 0.01)
    assert C.make_dnc_shallow_claim(instances=_one(k2)).run(CTX).verdict is Verdict.VERIFIED
    assert C.make_dnc_shallow_claim(predict_optimal=lambda i: False, instances=_one(k2)).run(CTX).verdict \
        is Verdict.REFUTED
    v2 = 2 * float(mp_scalar_min(1, 2, (0.01,) * 5, 4)[0])
    res = C.make_dnc_shallow_claim(predict_relu_two_class=lambda i: v2 * (1 + 1e-6), instances=_one(k2)).run(CTX)
    assert res.verdict is Verdict.REFUTED, res.reason


def test_cli_quick_start_without_flint(no_flint, tmp_path, capsys, monkeypatch):
    from proofs_check.cli import main

    monkeypatch.chdir(tmp_path)
    code = main(["run", "--quiet", "--no-cache", "--only", "deep_ufm"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "overall: VERIFIED" in out and "INCONCLUSIVE" not in out
