"""Solver layer of the SCL family: the loss against a brute-force loop of the definition, the
gradient against finite differences, the factored solver and the convex certificates against the
theorem bounds, and the batching analysis against the numerics (hypothesis over counts, tau,
batchings and seeds)."""

import math

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from solvers import scl as S
from theory import scl as T
from theory._validate import InstanceError
from theory.geometry import class_means, classify_gram

# hypothesis budgets: a fraction of the active profile (default 15 -> 5 for solver-heavy tests)
HEAVY = settings(max_examples=max(3, settings.default.max_examples // 3), deadline=None)
LIGHT = settings(max_examples=settings.default.max_examples, deadline=None)

#: agreement of two independent routes to an optimum: Clarabel's relative gap is 1e-8
REL = 1e-6


def brute_force_loss(H, labels, batches, tau):
    """The spec's definition, written as loops over anchors, positives and the denominator."""
    H = np.asarray(H, float)
    N = H.shape[1]
    batches = [list(range(N))] if batches is None else batches
    total = 0.0
    for B in batches:
        for i in B:
            P = [j for j in B if j != i and labels[j] == labels[i]]
            if not P:
                continue
            acc = 0.0
            for j in P:
                inner = 0.0
                for l in B:
                    if l != i:
                        inner += math.exp((float(H[:, i] @ H[:, l]) - float(H[:, i] @ H[:, j])) / tau)
                acc += math.log(inner)
            total += acc / len(P)
    return total


@st.composite
def instances(draw, max_k=4, max_n=6, batched=None):
    k = draw(st.integers(2, max_k))
    counts = tuple(draw(st.lists(st.integers(1, max_n), min_size=k, max_size=k)))
    tau = draw(st.floats(0.1, 2.0))
    N = sum(counts)
    use_batches = draw(st.booleans()) if batched is None else batched
    batches = None
    if use_batches:
        nb = draw(st.integers(1, 5))
        batches = [sorted(draw(st.sets(st.integers(0, N - 1), min_size=1, max_size=N))) for _ in range(nb)]
    seed = draw(st.integers(0, 2**16))
    return counts, tau, batches, seed


# ---- the loss ------------------------------------------------------------------------------

@LIGHT
@given(instances(), st.booleans())
def test_loss_matches_brute_force(inst, unit):
    counts, tau, batches, seed = inst
    rng = np.random.default_rng(seed)
    y = T.labels_from_counts(counts)
    H = rng.standard_normal((3, y.size))
    if unit:
        H /= np.linalg.norm(H, axis=0)
    got = S.scl_loss(H, y, batches, tau, grad=False)
    want = brute_force_loss(H, y, batches, tau)
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)
    # the Gram form is the same function
    assert S.scl_loss(H.T @ H, y, batches, tau, gram=True, grad=False) == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_loss_spec_values_at_configurations():
    for counts, tau, bound, etf in [((5, 3, 2), 0.5, 12.422968, 10.465194), ((4, 4, 4), 0.5, 16.881050, 14.679291),
                                    ((3, 2), 1.0, 4.506563, 3.141731)]:
        y = T.labels_from_counts(counts)
        k = len(counts)
        assert S.scl_loss(T.of_features(counts, k), y, None, tau, grad=False) == pytest.approx(bound, abs=5e-7)
        assert S.scl_loss(T.etf_features(counts, k), y, None, tau, grad=False) == pytest.approx(etf, abs=5e-7)


def test_loss_anchor_without_positive_and_stability():
    y = np.array([0, 1, 2])
    H = np.eye(3)
    assert S.scl_loss(H, y, None, 1.0, grad=False) == 0.0  # nobody has a positive
    # tiny tau: log-sum-exp must not overflow (logits up to 1/tau = 1e4)
    y = T.labels_from_counts((3, 2))
    Hof = T.of_features((3, 2), 2)
    v = S.scl_loss(Hof, y, None, 1e-4, grad=False)
    assert math.isfinite(v) and v == pytest.approx(3 * math.log(2) + 2 * math.log(1), abs=1e-9)


@LIGHT
@given(instances(), st.booleans())
def test_gradient_finite_differences(inst, gram):
    counts, tau, batches, seed = inst
    rng = np.random.default_rng(seed)
    y = T.labels_from_counts(counts)
    H = rng.standard_normal((3, y.size)) / math.sqrt(3)
    X = H.T @ H if gram else H
    f, g = S.scl_loss(X, y, batches, tau, gram=gram)
    E = rng.standard_normal(X.shape)
    if gram:
        E = E + E.T  # symmetric direction
    h = 1e-6
    fd = (S.scl_loss(X + h * E, y, batches, tau, gram=gram, grad=False)
          - S.scl_loss(X - h * E, y, batches, tau, gram=gram, grad=False)) / (2 * h)
    # central differences: error O(h^2 f''') + O(eps f / h) ~ 1e-8 relative
    assert np.sum(g * E) == pytest.approx(fd, rel=1e-6, abs=1e-7)


def test_full_batch_in_any_order():
    y = T.labels_from_counts((3, 2, 2))
    H = np.random.default_rng(3).standard_normal((4, 7))
    perm = [6, 2, 0, 5, 1, 3, 4]
    want = brute_force_loss(H, y, None, 0.3)
    f0, g0 = S.scl_loss(H, y, None, 0.3)
    f1, g1 = S.scl_loss(H, y, [perm], 0.3)
    assert f0 == pytest.approx(want, rel=1e-12) and f1 == pytest.approx(want, rel=1e-12)
    assert np.allclose(g0, g1, rtol=1e-12, atol=1e-12)


def test_compiled_batching_reuse_and_checks():
    y = T.labels_from_counts((2, 2))
    cb = S.compile_batching(y, [[0, 1, 2], [1, 2, 3]])
    H = np.random.default_rng(0).standard_normal((2, 4))
    assert S.scl_loss(H, y, cb, 0.5, grad=False) == pytest.approx(brute_force_loss(H, y, [[0, 1, 2], [1, 2, 3]], 0.5),
                                                                   rel=1e-12)
    with pytest.raises(InstanceError, match="labels must match"):
        S.scl_loss(np.zeros((2, 4)), [0, 0, 1, 2], cb, 0.5)


@pytest.mark.parametrize("call,match", [
    (lambda: S.scl_loss(np.full((2, 4), np.nan), [0, 0, 1, 1], None, 1.0), "finite"),
    (lambda: S.scl_loss(np.ones((2, 3)), [0, 0, 1, 1], None, 1.0), "size 4 along axis 1"),
    (lambda: S.scl_loss(np.ones((2, 4)), [0, 0, 1, 1], None, 0.0), "tau must be > 0"),
    (lambda: S.scl_loss(np.ones((2, 4)), [0, 0, 2, 2], None, 1.0), "class 1 is empty"),
    (lambda: S.scl_loss(np.ones((2, 4)), [0, 0, 1, 1], [[0, 9]], 1.0), "out of range"),
    (lambda: S.scl_loss(np.ones((2, 4)), [0, 0, 1, 1], [[]], 1.0), "is empty"),
    (lambda: S.scl_loss(np.ones((4, 3)), [0, 0, 1, 1], None, 1.0, gram=True), "G must have size 4"),
    (lambda: S.gram_relaxation((40, 40), None, 1.0), "N <= 60"),
    (lambda: S.gram_relaxation((2, 2), None, 1.0, solver="MOSEK"), "CLARABEL or SCS"),
    (lambda: S.solve_factored(T.SCLInstance((2, 2), 1.0, 2), init=-np.ones((2, 4))), "nonnegative"),
    (lambda: S.solve_factored(T.SCLInstance((9, 9), 1.0, 1, False)), "exhaustive search handles"),
])
def test_bad_input(call, match):
    with pytest.raises(InstanceError, match=match):
        call()


# ---- optima: factored solver, certificate and bound agree (UFM+, d >= k) -------------------

@HEAVY
@given(instances(max_k=4, max_n=6))
@example(((2, 2, 1, 5), 1.0, [[0, 1, 4, 5, 6, 7], [0], [3, 6, 7, 8], [0, 2, 3, 4, 5, 7, 8], [2, 3, 9]], 0))
def test_ufm_plus_optimum_certificate_bound_agree(inst):
    counts, tau, batches, seed = inst
    k = len(counts)
    y = T.labels_from_counts(counts)
    bound = T.theorem2_bound(counts, batches, tau)
    tol = REL * max(1.0, bound)
    of_val = S.scl_loss(T.of_features(counts, k), y, batches, tau, grad=False)
    assert of_val == pytest.approx(bound, rel=1e-12, abs=1e-12)  # the OF attains the bound
    rel = S.gram_relaxation(counts, batches, tau, nonneg=True)
    assert rel.ok
    assert rel.value == pytest.approx(bound, abs=tol)  # relaxation value = bound (spec)
    assert rel.loss_at_G == pytest.approx(rel.value, abs=tol)  # cvxpy objective = the loss
    # d = k has genuine non-global local minima (KKT points; e.g. (2,2,1,5) with 5 batches: 14.64 vs
    # 14.24 for about 1 start in 3), so the factored route relies on multi-start: 8 starts
    sol = S.solve_factored(T.SCLInstance(counts, tau, k, True, batches), starts=8, seed=seed)
    assert sol.value >= bound - tol  # no feasible point below the bound
    assert sol.value <= bound + 1e-5 * max(1.0, bound)  # multi-start reaches it
    assert np.all(sol.variables["H"] >= 0)
    assert np.allclose(np.linalg.norm(sol.variables["H"], axis=0), 1)


@HEAVY
@given(instances(max_k=3, max_n=4, batched=False))
def test_ufm_plus_full_batch_geometry_is_of(inst):
    counts, tau, _, seed = inst
    assume(sum(1 for n in counts if n == 1) < 2)  # two singletons: non-unique (tested elsewhere)
    y = T.labels_from_counts(counts)
    sol = S.solve_factored(T.SCLInstance(counts, tau, len(counts) + 1, True), starts=3, seed=seed)
    M = class_means(sol.variables["H"], y)
    assert classify_gram(M.T @ M).classification == "orthogonal-frame"
    assert sol.value == pytest.approx(T.theorem1_bound(counts, tau), abs=1e-5 * max(1.0, sol.value))


# ---- uniqueness: C1/C2 prediction against the numerics -------------------------------------

@HEAVY
@given(instances(max_k=4, max_n=6, batched=True))
@example(((3, 1, 1, 6), 0.5, [[0, 1, 2, 3, 7, 8, 10], [0, 2, 8, 9]], 0))  # Clarabel needed a retry here
def test_uniqueness_prediction_matches_numerics(inst):
    counts, tau, batches, _ = inst
    k = len(counts)
    an = T.analyze_batching(counts, batches, k + 1)
    assume(an.of_unique is not None)
    rel = S.gram_relaxation(counts, batches, tau, nonneg=True)
    assert rel.ok
    diff = rel.distance_to(T.of_gram(counts))
    bound = T.theorem2_bound(counts, batches, tau)
    if an.of_unique:
        assert diff <= 1e-2, an.to_dict()  # the interior-point optimum is the OF Gram
    else:
        H2 = T.alternative_minimiser(counts, batches, k + 1)
        assert np.all(H2 >= 0) and np.allclose(np.linalg.norm(H2, axis=0), 1)
        v2 = S.scl_loss(H2, T.labels_from_counts(counts), batches, tau, grad=False)
        assert v2 == pytest.approx(bound, rel=1e-12, abs=1e-12)  # a second minimiser...
        assert np.max(np.abs(H2.T @ H2 - T.of_gram(counts))) == 1.0  # ...with another Gram
        assert diff >= 0.1, an.to_dict()  # and the relaxation's interior sees the non-uniqueness


def test_literal_c1_overpredicts_uniqueness():
    """Spec's literal C1 holds here, but the one-class batch [0, 1] does not force collapse."""
    counts, batches, tau = (2, 2), [[0, 1], [2, 3], [0, 2, 3], [1, 2, 3]], 0.5
    an = T.analyze_batching(counts, batches)
    assert an.C1_literal and an.C2 and not an.C1
    rel = S.gram_relaxation(counts, batches, tau)
    assert np.max(np.abs(rel.G - T.of_gram(counts))) >= 0.1
    H2 = T.alternative_minimiser(counts, batches, 3)
    y = T.labels_from_counts(counts)
    assert S.scl_loss(H2, y, batches, tau, grad=False) == pytest.approx(T.theorem2_bound(counts, batches, tau), rel=1e-12)


def test_relaxation_free_samples():
    # samples 2 and 5 are in no batch: left out of the program, put back on fresh directions
    counts, batches, tau = (3, 3), [[0, 1, 3, 4]], 0.5
    rel = S.gram_relaxation(counts, batches, tau)
    assert rel.ok and rel.free_samples == [2, 5]
    assert rel.value == pytest.approx(T.theorem2_bound(counts, batches, tau), rel=1e-6)
    assert rel.loss_at_G == pytest.approx(rel.value, rel=1e-6)
    assert rel.G[2, 2] == 1 and rel.G[2, 0] == 0 and np.all(np.linalg.eigvalsh(rel.G) > -1e-7)
    assert rel.distance_to(T.of_gram(counts)) >= 1.0
    # nothing with an anchor at all: value 0, everything free
    rel = S.gram_relaxation((2, 2), [[0, 2], [1, 3]], tau)
    assert rel.value == 0.0 and rel.free_samples == [0, 1, 2, 3]


def test_one_class_batch_of_three_numerics():
    counts, batches = (3, 2), [[0, 1, 2], [0, 1, 3, 4], [2, 3, 4]]
    rel = S.gram_relaxation(counts, batches, 0.5)
    assert np.max(np.abs(rel.G - T.of_gram(counts))) <= 1e-2


def test_binding_numerics_issue_example():
    counts, batches = (4, 4), [[0, 1, 4, 5], [2, 3, 6, 7]]
    before = S.gram_relaxation(counts, batches, 0.5)
    after = S.gram_relaxation(counts, T.batch_binding(counts, batches), 0.5)
    assert np.max(np.abs(before.G - T.of_gram(counts))) >= 0.1
    assert np.max(np.abs(after.G - T.of_gram(counts))) <= 1e-2


# ---- d < k and the UFM without nonnegativity ----------------------------------------------

def test_low_dim_strict_gap_and_shared_singletons():
    s = S.solve_factored(T.SCLInstance((4, 4, 4), 0.5, 2, True), starts=3, seed=0, maxiter=1500)
    assert s.value > T.theorem1_bound((4, 4, 4), 0.5) + 1.0
    s = S.solve_factored(T.SCLInstance((3, 1, 1), 0.5, 2, True), starts=3, seed=0)
    assert s.value == pytest.approx(2.460226, abs=5e-7)  # spec: attained with d = 2 < k = 3
    # d = 1, UFM+: the only feasible point is all ones; loss = 3 log(4) + 2 log(4) (every logit equal)
    s = S.solve_factored(T.SCLInstance((3, 2), 1.0, 1, True))
    assert s.value == pytest.approx(5 * math.log(4), rel=1e-14)


def test_balanced_ufm_is_etf_and_imbalanced_is_not():
    y = T.labels_from_counts((4, 4, 4))
    s = S.solve_factored(T.SCLInstance((4, 4, 4), 0.5, 2, False), starts=3)
    assert s.value == pytest.approx(14.679291, abs=5e-7)
    M = class_means(s.variables["H"], y)
    assert classify_gram(M.T @ M).classification == "simplex-etf"
    r = S.gram_relaxation((4, 4, 4), None, 0.5, nonneg=False)
    assert r.value == pytest.approx(14.679291, abs=5e-6)
    # imbalanced: certified optimum strictly below the ETF value; geometry differs visibly
    y = T.labels_from_counts((5, 3, 2))
    s = S.solve_factored(T.SCLInstance((5, 3, 2), 0.5, 3, False), starts=3)
    r = S.gram_relaxation((5, 3, 2), None, 0.5, nonneg=False)
    assert s.value == pytest.approx(r.value, abs=1e-5)
    assert s.value < 10.465194 - 1e-3
    M = class_means(s.variables["H"], y)
    g = classify_gram(M.T @ M)
    assert g.classification == "other" and g.distance_etf > 1e-2
    cos = (M.T @ M) / np.outer(np.linalg.norm(M, axis=0), np.linalg.norm(M, axis=0))
    assert cos[1, 2] > cos[0, 1] + 0.1  # minority classes closer to each other


def test_line_ufm_exhaustive():
    # d = 1, UFM, (3,3): the optimum separates the classes by sign; check against enumeration by hand
    s = S.solve_factored(T.SCLInstance((3, 3), 1.0, 1, False))
    H = s.variables["H"][0]
    assert abs(H[:3].sum()) == 3 and abs(H[3:].sum()) == 3 and H[0] == -H[3]
    assert s.value == pytest.approx(T.etf_value((3, 3), 1.0), rel=1e-12)
