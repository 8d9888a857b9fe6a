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
    c["evidence"]["statement"]["predicted"] *= 1 + sign * 1e-6  # the statement travels in the report
    out = PR.apply(base)
    assert _value_claim(out, "optimal-value")["verdict"] == "REFUTED"
    assert out["verdict"] == "REFUTED" and out["rigorous"] is False


def test_false_lower_bound_claim_is_refuted_by_the_feasible_value():
    base = _report()
    c = _value_claim(base, "theorem-lower-bound")
    c["evidence"]["statement"]["bound"] *= 1 + 1e-6
    out = PR.apply(base)
    assert _value_claim(out, "theorem-lower-bound")["verdict"] == "REFUTED"


def test_full_batch_ufm_above_the_dense_limit_is_unsupported_and_keeps_float_verdicts():
    """Imbalanced full-batch SCL-UFM goes through the dense Gram recipe (tests/test_rigorous_run.py); above
    DENSE_MAX samples it is unsupported, before any solve, and the float verdicts stand."""
    params = {"counts": [R.DENSE_MAX, 1], "tau": 0.5, "d": 2, "nonneg": False, "batches": None}
    with pytest.raises(R.Unsupported, match="samples"):
        R.scl_from_instance(params)


# ---------------------------------------------------------------------------------------------------
# Mini-batches (docs/rigorous.md "SCL, mini-batches"): the N x N Gram dual in balls
# ---------------------------------------------------------------------------------------------------

def mp_theorem2(counts, batches, tau):
    """The Theorem 2 closed form (docs/scl.md), written here from the statement, at 50 digits (mpmath):
    sum over batches B and classes c with n_{B,c} >= 2 of n_{B,c} log(n_{B,c} - 1 + (|B| - n_{B,c}) e^{-1/tau})
    (log1p form so that tau = 1e-3, e^{-1000}, keeps its relative accuracy)."""
    labels = [c for c, n in enumerate(counts) for _ in range(n)]
    with mpmath.workdps(50):
        e = mpmath.exp(-1 / mpmath.mpf(tau))
        tot = mpmath.mpf(0)
        for B in batches:
            m = len(B)
            for c in set(labels[i] for i in B):
                n = sum(1 for i in B if labels[i] == c)
                if n >= 2:
                    tot += n * mpmath.log1p((n - 2) + (m - n) * e)
        return tot


MB_BATCHINGS = [
    ((4, 4), [[0, 1, 4, 5], [2, 3, 6, 7]]),  # THEOREM2_BATCHINGS (C1 fails)
    ((3, 3, 3), [[0, 1, 3, 4], [1, 2, 6, 7], [4, 5, 6, 8], [0, 2, 5, 8]]),
    ((5, 3, 2), [[0, 1, 2, 5, 8], [3, 4, 6, 7, 9], [0, 1, 2, 5, 8], [0, 3], [1, 2]]),  # repeats, one-class batch
    ((2, 2, 2), [[0, 1, 2], [2, 3, 4, 5], [1, 4]]),  # UNIQUENESS_CASES (C2 fails)
    ((2, 2), [[0, 1], [2, 3], [0, 2, 3], [1, 2, 3]]),  # one-class batches only hold two samples
    ((7, 3, 1), [[0, 1, 2, 7, 10], [3, 4, 5, 8, 9], [6, 7, 8, 9, 10], [0, 6, 10]]),  # imbalanced, singleton class
]
MB_CASES = [(c, b, tau) for c, b in MB_BATCHINGS for tau in (0.1, 0.5, 1.0, 2.0)] + \
    [((5, 3, 2), MB_BATCHINGS[2][1], 1e-3), ((4, 3, 2), [[0, 1, 4, 5, 7], [2, 3, 6, 7, 8], [0, 4, 8]], 0.3)]


@pytest.mark.parametrize("counts,batches,tau", MB_CASES)
def test_minibatch_ufm_plus_bracket_contains_the_50_digit_theorem2_value(counts, batches, tau):
    k = len(counts)
    rb = R.scl_from_instance({"counts": list(counts), "tau": tau, "d": k, "nonneg": True, "batches": batches})
    f = mp_theorem2(counts, batches, tau)
    with mpmath.workdps(50):
        lo = _mpf(R.endpoints(rb.lower)[0])
        hi = _mpf(R.endpoints(rb.upper)[1])
        assert lo <= f <= hi
        assert hi - lo <= 1e-8 * f  # the float certificate is exact at the OF (docs/scl.md)
    d = rb.to_dict()
    assert d["lower"][0] <= d["upper"][1]


def test_minibatch_ufm_plus_has_no_feasible_value_below_k_and_no_size_limit():
    b = MB_BATCHINGS[1][1]
    rb = R.scl_from_instance({"counts": [3, 3, 3], "tau": 0.5, "d": 2, "nonneg": True, "batches": b})
    assert rb.upper is None and "d = 2 < k = 3" in rb.details["upper_note"]
    with mpmath.workdps(50):
        assert _mpf(R.endpoints(rb.lower)[0]) <= mp_theorem2((3, 3, 3), b, 0.5)
    # 40 classes x 30 samples (N = 1200 > the dense limit): the per-(batch, class) structure needs no N x N matrix
    counts = (30,) * 40
    rng = np.random.default_rng(5)
    batches = [sorted(int(i) for i in rng.choice(sum(counts), 64, replace=False)) for _ in range(50)]
    rb = R.scl_from_instance({"counts": list(counts), "tau": 0.5, "d": 41, "nonneg": True, "batches": batches})
    f = mp_theorem2(counts, batches, 0.5)
    with mpmath.workdps(50):
        lo, hi = _mpf(R.endpoints(rb.lower)[0]), _mpf(R.endpoints(rb.upper)[1])
        assert lo <= f <= hi and hi - lo <= 1e-8 * f


@pytest.mark.parametrize("counts,batches,tau", [MB_CASES[5], MB_CASES[8], MB_CASES[13], MB_CASES[22]])
def test_dense_minibatch_recipe_agrees_at_the_of_and_is_valid_at_random_candidates(counts, batches, tau):
    y = T.labels_from_counts(counts)
    N = y.size
    f = mp_theorem2(counts, batches, tau)
    rb = R.scl_gram_dense(counts, batches, tau, True, T.of_gram(counts))  # the generic route, LDL^T-verified
    with mpmath.workdps(50):
        hi = _mpf(R.endpoints(rb.lower)[1])
        assert hi <= f and f - hi <= 1e-12 * f
    rng = np.random.default_rng(11)
    for _ in range(3):
        X = np.abs(rng.standard_normal((len(counts) + 1, N)))  # a feasible UFM+ point far from the optimum
        X /= np.linalg.norm(X, axis=0)
        G = X.T @ X
        rb = R.scl_gram_dense(counts, batches, tau, True, G)
        with mpmath.workdps(50):
            assert _mpf(R.endpoints(rb.lower)[1]) <= f
        fl = SS.gram_certificate(G, y, batches, tau, nonneg=True).lower_bound
        assert abs(rb.lower_bound - fl) <= 1e-8 * max(1.0, abs(fl))  # the same construction as the float code
        # and the feasible value of that point brackets from above (its float loss, within round-off)
        up = R.scl_gram_feasible(counts, batches, tau, True, X)
        assert abs(R.upper_float(up) - SS.scl_loss(X, y, batches, tau, grad=False)) <= 1e-12 * max(1.0, abs(f))


def _row_sum_mu(counts, batches, tau):
    """mu_i = sum over class(i) of the float symmetric gradient at the OF Gram (solvers.scl.scl_loss)."""
    y = T.labels_from_counts(counts)
    _, Cg = SS.scl_loss(T.of_gram(counts), y, batches, tau, gram=True)
    return np.array([Cg[i, y == y[i]].sum() for i in range(y.size)])


def test_perturbed_minibatch_dual_points_that_are_not_psd_are_rejected():
    counts, batches, tau = (5, 3, 2), MB_BATCHINGS[2][1], 0.5
    f = mp_theorem2(counts, batches, tau)
    mu = _row_sum_mu(counts, batches, tau)
    # structured recipe: mu lowered by 1e-6 keeps S PSD (S = Laplacians + 1e-6 I): a (looser) bound
    rb = R.scl_minibatch_of(counts, batches, tau, 3, mu=mu - 1e-6)
    with mpmath.workdps(50):
        lo = _mpf(R.endpoints(rb.lower)[1])
        assert lo <= f and f - lo <= 10 * 1e-6 * 10  # N = 10 samples x 1e-6 (+ the float mu's round-off)
    # one entry raised by 1e-6: 1_c^T S 1_c = -1e-6 < 0, S is not PSD: no bound
    bad = mu.copy()
    bad[6] += 1e-6
    with pytest.raises(R.NotCertified):
        R.scl_minibatch_of(counts, batches, tau, 3, mu=bad)
    # dense recipe without repair: the same two dual points
    rb = R.scl_gram_dense(counts, batches, tau, True, T.of_gram(counts), mu=mu - 1e-6, repair=False)
    assert rb.lower_bound <= float(f)
    with pytest.raises(R.NotCertified):
        R.scl_gram_dense(counts, batches, tau, True, T.of_gram(counts), mu=bad, repair=False)


MB_UFM_CASES = [((3, 3, 3), 0.5, [[0, 1, 3, 4], [1, 2, 6, 7], [4, 5, 6, 8], [0, 2, 5, 8]]),  # MINIBATCH_UFM
                ((4, 4), 1.0, [[0, 1, 4, 5], [2, 3, 6, 7], [0, 2, 4, 6]]),
                ((3, 3, 2, 2), 2.0, [[0, 1, 3, 4, 6], [2, 5, 7, 8, 9], [0, 3, 6, 8], [1, 4, 7, 9]])]


@pytest.mark.parametrize("counts,tau,batches", MB_UFM_CASES)
def test_minibatch_ufm_bracket_contains_independent_bounds_and_is_narrow(counts, tau, batches):
    k = len(counts)
    y = T.labels_from_counts(counts)
    rb = R.scl_from_instance({"counts": list(counts), "tau": tau, "d": k, "nonneg": False, "batches": batches})
    lo, hi = rb.lower_bound, rb.upper_bound
    # independent: a float proven bound of the conic relaxation (repaired dual at Clarabel's point, with its
    # stated allowance) must lie below the proven feasible value ...
    rel = SS.gram_relaxation(counts, batches, tau, nonneg=False)
    assert rel.value <= hi
    # ... and a separate factored solve (other seed, more starts) is a feasible point above the proven lower bound
    other = SS.solve_factored(T.SCLInstance(counts, tau, k, False, batches), starts=4, seed=7)
    assert lo <= other.value + 1e-12 * abs(other.value)
    assert hi - lo <= 1e-8 * abs(hi)  # the float certificate is tight here (conic route)
    # the collapsed ETF is feasible (d >= k - 1): its float loss is above the proven lower bound; for (3,3,3) it
    # is not the minimiser (docs/scl.md, scl.ufm.minibatch_not_etf): it exceeds the proven feasible value
    etf = SS.scl_loss(T.etf_features(counts, k), y, batches, tau, grad=False)
    assert lo <= etf + 1e-12 * abs(etf)
    if counts == (3, 3, 3):
        assert hi < etf - 1e-6


def test_minibatch_ufm_beyond_the_dense_limit_is_unsupported_before_any_solve():
    counts = (61, 60)
    with pytest.raises(R.Unsupported, match="dense LDL"):
        R.scl_from_instance({"counts": list(counts), "tau": 0.5, "d": 2, "nonneg": False,
                             "batches": [list(range(0, 121, 2)), list(range(1, 121, 2))]})


MB_REPORT_BATCHES = [[0, 1, 3, 4], [1, 2, 6, 7], [4, 5, 6, 8], [0, 2, 5, 8]]


def _mb_report(nonneg=True, d=3):
    return C.check_instance(T.SCLInstance((3, 3, 3), 0.5, d, nonneg, MB_REPORT_BATCHES), starts=2).to_dict()


def test_minibatch_true_statements_are_rigorously_verified():
    out = PR.apply(_mb_report())
    assert out["certificate"]["rigorous"]["lower"] is not None
    assert out["rigorous"] is True and out["verdict"] == "VERIFIED"
    assert _value_claim(out, "optimal-value")["rigorous"] is True
    assert _value_claim(out, "theorem-lower-bound")["rigorous"] is True


@pytest.mark.parametrize("sign", [1, -1])
def test_minibatch_false_claimed_optimum_off_by_1e6_is_refuted(sign):
    base = _mb_report()
    c = _value_claim(base, "optimal-value")
    c["evidence"]["statement"]["predicted"] *= 1 + sign * 1e-6  # the statement travels in the report
    out = PR.apply(base)
    assert _value_claim(out, "optimal-value")["verdict"] == "REFUTED"
    assert out["verdict"] == "REFUTED" and out["rigorous"] is False


def test_minibatch_false_lower_bound_claim_is_refuted_by_the_feasible_value():
    base = _mb_report()
    c = _value_claim(base, "theorem-lower-bound")
    c["evidence"]["statement"]["bound"] *= 1 + 1e-6
    out = PR.apply(base)
    assert _value_claim(out, "theorem-lower-bound")["verdict"] == "REFUTED"


def test_minibatch_ufm_report_gets_a_bracket():
    out = PR.apply(_mb_report(nonneg=False))
    rig = out["certificate"]["rigorous"]
    assert rig["lower"] is not None and rig["upper"] is not None
    assert rig["lower"][0] <= out["certificate"]["upper"] <= rig["upper"][1] + 1e-12
    assert rig["width"] <= 1e-8 * rig["upper"][1]
