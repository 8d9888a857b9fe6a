"""Theory layer of the SCL family: closed forms against the spec's independent reference values,
profiles, the batching analysis, symbolic steps, and bad input."""

import math

import numpy as np
import pytest
import sympy as sp

from theory import scl as T
from theory._validate import InstanceError

# spec/scl.md reference table (computed independently of this project; 6 decimals)
SPEC_TABLE = [((5, 3, 2), 0.5, 12.422968, 10.465194),
              ((4, 4, 4), 0.5, 16.881050, 14.679291),
              ((3, 2), 1.0, 4.506563, 3.141731)]


@pytest.mark.parametrize("counts,tau,bound,etf", SPEC_TABLE)
def test_spec_reference_values(counts, tau, bound, etf):
    assert T.theorem1_bound(counts, tau) == pytest.approx(bound, abs=5e-7)
    assert T.etf_value(counts, tau) == pytest.approx(etf, abs=5e-7)


def test_spec_shared_singletons_reference():
    # spec: (3,1,1), tau = 0.5, d = 2 attains 2.460226
    assert T.theorem1_bound((3, 1, 1), 0.5) == pytest.approx(2.460226, abs=5e-7)
    assert T.required_dim_for_bound((3, 1, 1)) == 2
    assert T.required_dim_for_bound((3, 2, 1)) == 3
    assert T.required_dim_for_bound((3, 3)) == 2


def test_bound_by_hand_formula():
    # (2,2), tau = 1: each of 4 anchors: log(1 + 2/e); written out independently
    assert T.theorem1_bound((2, 2), 1.0) == pytest.approx(4 * math.log(1 + 2 * math.exp(-1)), rel=1e-15)
    # singleton classes contribute nothing
    assert T.theorem1_bound((2, 1), 1.0) == pytest.approx(2 * math.log(1 + 1 * math.exp(-1)), rel=1e-15)


def test_theorem2_full_batch_is_theorem1_and_sums_batches():
    c, tau = (3, 2, 2), 0.7
    assert T.theorem2_bound(c, None, tau) == T.theorem1_bound(c, tau)
    assert T.theorem2_bound(c, [list(range(7))], tau) == pytest.approx(T.theorem1_bound(c, tau), rel=1e-15)
    # batch [0,1,3]: class 0 has 2 members, class 1 one (left out): 2 log(1 + 1 e^{-1/tau})
    b1 = 2 * math.log(1 + math.exp(-1 / tau))
    assert T.theorem2_bound(c, [[0, 1, 3]], tau) == pytest.approx(b1, rel=1e-15)
    assert T.theorem2_bound(c, [[0, 1, 3], [0, 1, 3]], tau) == pytest.approx(2 * b1, rel=1e-15)  # repeats count
    assert T.theorem2_bound(c, [[0, 3, 5]], tau) == 0.0  # no class with two members


def test_graf_value_and_relu_cost():
    # (4,4,4), tau = .5: N log(n-1 + (N-n) e^{-k/((k-1) tau)}) = 12 log(3 + 8 e^{-3})
    assert T.graf_balanced_value(3, 4, 0.5) == pytest.approx(12 * math.log(3 + 8 * math.exp(-3)), rel=1e-15)
    assert T.relu_cost((4, 4, 4), 0.5) == pytest.approx(16.881050 - 14.679291, abs=1e-6)
    assert T.relu_cost((5, 3, 2), 0.5) is None


def test_tau_limits_numeric():
    lo, hi = T.tau_limits(4, 10)
    assert lo == pytest.approx(math.log(3)) and hi == pytest.approx(math.log(9))
    assert T.per_anchor_bound(4, 10, 1e-3) == pytest.approx(lo, abs=1e-12)
    assert T.per_anchor_bound(4, 10, 1e8) == pytest.approx(hi, abs=1e-8)


def test_profiles():
    assert T.step_counts(4, 10, 5, 0.5) == (10, 10, 2, 2)
    assert T.step_counts(5, 100, 10, 0.4) == (100, 100, 10, 10, 10)
    # long-tail: floor(100 * 10^{-c/4}) = 100, 56, 31, 17, 10
    assert T.longtail_counts(5, 100, 10) == (100, 56, 31, 17, 10)
    with pytest.raises(InstanceError, match="ratio"):
        T.step_counts(4, 10, 0.5)
    with pytest.raises(InstanceError, match="empty"):
        T.longtail_counts(3, 2, 10)


def test_of_features_and_grams():
    H = T.of_features((2, 1, 3), 4)
    assert H.shape == (4, 6) and np.all(H >= 0)
    assert np.allclose(np.linalg.norm(H, axis=0), 1)
    assert np.array_equal(H.T @ H, T.of_gram((2, 1, 3)))
    E = T.etf_features((2, 2, 2), 2)
    assert np.allclose(np.linalg.norm(E, axis=0), 1)
    assert (E[:, 0] @ E[:, 2]) == pytest.approx(-0.5)


def test_weighted_centering_cosines_spec():
    cos = T.weighted_centering_cosines((5, 3, 2))
    assert [cos[0, 1], cos[0, 2], cos[1, 2]] == pytest.approx([-0.7715, -0.5244, -0.1373], abs=5e-5)
    # unweighted (balanced) centring is the ETF: cosine -1/(k-1)
    cb = T.weighted_centering_cosines((3, 3, 3, 3))
    assert cb[0, 1] == pytest.approx(-1 / 3)


# ---- symbolic steps -------------------------------------------------------------------------

def test_symbolic_steps():
    assert sp.simplify(T.sym_per_anchor_rewrite_zero()) == 0
    assert sp.simplify(T.sym_jensen_convexity()) is sp.true
    df, rel = T.sym_bound_decreasing()
    assert sp.simplify(rel) is sp.true
    assert sp.simplify(T.sym_of_anchor_value()) == 0
    assert sp.simplify(T.sym_etf_two_forms()) == 0
    assert sp.simplify(T.sym_relu_cost_positive()) is sp.true
    for k in (2, 3, 5):
        assert T.sym_centering_of_to_etf(k) == sp.zeros(k, k)
    assert T.sym_tau_limits() == (0, 0)


# ---- batching analysis ---------------------------------------------------------------------

def test_batching_issue_example():
    an = T.analyze_batching((4, 4), [[0, 1, 4, 5], [2, 3, 6, 7]])
    assert an.d == 3
    assert an.C1 is False and an.C2 is True and an.of_unique is False
    assert an.components[0] == [[0, 1], [2, 3]]
    bind = T.batch_binding((4, 4), [[0, 1, 4, 5], [2, 3, 6, 7]])
    assert bind == ((0, 1, 4, 5), (2, 3, 6, 7, 0, 4))
    after = T.analyze_batching((4, 4), bind)
    assert after.C1 and after.C2 and after.of_unique is True


def test_two_singletons_violate_c2():
    an = T.analyze_batching((3, 1, 1), None)
    assert an.C1 and not an.C2 and an.C2_per_pair[(1, 2)] is False and an.of_unique is False
    H = T.alternative_minimiser((3, 1, 1), None, 4)
    assert H[:, 3] @ H[:, 4] == 1.0  # the singletons merged


def test_one_class_batches_do_not_count_for_c1():
    # spec's literal C1 counts batch [0,1] (class 0 only) as an edge; it does not force collapse
    an = T.analyze_batching((2, 2), [[0, 1], [2, 3], [0, 2, 3], [1, 2, 3]])
    assert an.C1_literal and an.C2
    assert an.C1_per_class == [False, True] and an.of_unique is False
    assert an.notes


def test_one_class_batch_of_three_links_components():
    # batch [0,1,2] (class 0 only) forces equal similarities; batch [0,1,3] collapses 0 and 1, hence all
    an = T.analyze_batching((3, 2), [[0, 1, 2], [0, 1, 3, 4], [2, 3, 4]])
    assert an.C1 and an.C2 and an.of_unique is True


def test_c1_at_d_equal_k_is_undecided():
    an = T.analyze_batching((4, 4), [[0, 1, 4, 5], [2, 3, 6, 7]], d=2)
    assert an.of_unique is None and "d = k" in an.reason
    assert T.alternative_minimiser((4, 4), [[0, 1, 4, 5], [2, 3, 6, 7]], 2) is None


def test_uncovered_sample_breaks_c1():
    an = T.analyze_batching((3, 3), [[0, 1, 3, 4]])
    assert an.uncovered == [2, 5] and not an.C1 and an.of_unique is False


# ---- bad input -----------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,match", [
    (dict(counts=(3, 2), tau=0.0, d=3), "tau must be > 0"),
    (dict(counts=(3, 2), tau=-1.0, d=3), "tau must be > 0"),
    (dict(counts=(3, 2), tau=float("nan"), d=3), "tau must be a number"),
    (dict(counts=(3, 2), tau=float("inf"), d=3), "tau must be finite"),
    (dict(counts=(3, 0), tau=1.0, d=3), r"counts\[1\] must be >= 1"),
    (dict(counts=(3,), tau=1.0, d=3), "counts must have at least 2 entries"),
    (dict(counts=(3, 2.5), tau=1.0, d=3), r"counts\[1\] must be an integer"),
    (dict(counts=(3, 2), tau=1.0, d=0), "d must be >= 1"),
    (dict(counts=(3, 2), tau=1.0, d=3, batches=[]), "at least one batch"),
    (dict(counts=(3, 2), tau=1.0, d=3, batches=[[0, 1], []]), r"batches\[1\] is empty"),
    (dict(counts=(3, 2), tau=1.0, d=3, batches=[[0, 5]]), "out of range"),
    (dict(counts=(3, 2), tau=1.0, d=3, batches=[[0, -1]]), r"batches\[0\]\[1\] must be >= 0"),
    (dict(counts=(3, 2), tau=1.0, d=3, batches=[[0, 0, 1]]), "repeats sample index 0"),
    (dict(counts=(3, 2), tau=1.0, d=3, batches="0,1"), "list of lists"),
    (dict(counts=(3, 2), tau=1.0, d=3, batches=[3]), r"batches\[0\] must be a list"),
    (dict(counts=(3, 2), tau=1.0, d=3, batches=[[0, 1.5]]), "must be an integer"),
    (dict(counts=(3, 2), tau=1.0, d=3, nonneg="yes"), "nonneg"),
])
def test_bad_instances(kwargs, match):
    with pytest.raises(InstanceError, match=match):
        T.SCLInstance(**kwargs)


def test_bad_input_helpers():
    with pytest.raises(InstanceError, match="d must be >= k"):
        T.of_features((2, 2, 2), 2)
    with pytest.raises(InstanceError, match="dim must be >= k"):
        T.analyze_batching((2, 2, 2), [[0, 1]], d=2)
    with pytest.raises(InstanceError, match=r"batches\[1\] is empty"):
        T.parse_batches_text("0,1;;2")
    with pytest.raises(InstanceError, match="comma-separated integers"):
        T.parse_batches_text("0,a")
    with pytest.raises(InstanceError, match="tau must be > 0"):
        T.theorem1_bound((2, 2), 0)
