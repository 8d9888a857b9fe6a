"""Grouping exchangeable classes in the general UFM engine (docs/ufm_general.md, "Grouping exchangeable
classes"). Independent checks: the slot forms of the losses against the generic K-vector evaluation, the
grouped objective's gradient against finite differences, the grouped certificate against the K x K
certificate at the expanded point, the grouped optimum against the ungrouped solver and against sample-level
cvxpy reference values (tests/test_ufm_general.py), and the per-group geometry against the K x K geometry."""

from __future__ import annotations

import numpy as np
import pytest

from proofs_check.claims.ufm import check_general
from solvers import losses as L
from solvers import ufm_general as SG

IMB = [6, 6, 2, 1]
LOSSES = [("ce", {}), ("ls", {"smoothing": 0.1}), ("ls", {"smoothing": 0.2, "convention": "others"}),
          ("weighted-ce", {"weights": [1, 1, 1, 2, 2, 0.5, 3, 3, 3, 3]}), ("mse", {})]
LABELS = np.array([0, 0, 0, 1, 1, 2, 3, 3, 3, 3])


@pytest.mark.parametrize("name,kw", LOSSES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(LOSSES)])
def test_slot_forms_match_the_k_vector_evaluation(name, kw):
    loss = L.make_loss(name, 10, **kw)
    lay = L.SlotLayout(LABELS)
    rng = np.random.default_rng(3)
    for scale in (0.1, 3.0, 40.0):
        Zs = rng.standard_normal((lay.m + 1, lay.m)) * scale
        v1, g1 = loss.value_grad_slots(Zs, lay)
        v2, g2 = L.Loss.value_grad_slots(loss, Zs, lay)  # generic: expand to K-vectors, value_grad
        assert np.allclose(v1, v2, rtol=1e-13, atol=1e-13 * scale)
        assert np.allclose(g1, g2, rtol=1e-12, atol=1e-15)
        c1 = loss.conjugate_slots(0.5 * g1, lay)
        c2 = L.Loss.conjugate_slots(loss, 0.5 * g1, lay)
        assert np.all(np.isfinite(c1)) and np.allclose(c1, c2, rtol=1e-12, atol=1e-13)
    # outside the simplex (softmax losses): +inf, as the K-vector conjugate
    if name != "mse":
        bad = loss.conjugate_slots(np.full((lay.m + 1, lay.m), 5.0), lay)
        assert np.all(np.isinf(bad))


def test_plain_ce_slot_value_keeps_relative_accuracy_at_large_margin():
    loss = L.make_loss("ce", 10)
    lay = L.SlotLayout(LABELS)
    Zs = np.zeros((lay.m + 1, lay.m))
    Zs[lay.m] = 40.0  # own logit 40 above the rest: loss = log(1 + 9 e^-40) ~ 9 e^-40
    v, g = loss.value_grad_slots(Zs, lay)
    assert np.allclose(v, 9 * np.exp(-40.0), rtol=1e-14)
    assert np.allclose(g[lay.m], -9 * np.exp(-40.0), rtol=1e-12)


@pytest.mark.parametrize("name,kw", [("ce", {}), ("mse", {}), ("ls", {"smoothing": 0.1})])
def test_grouped_objective_gradient_matches_finite_differences(name, kw):
    p = SG.classification(L.make_loss(name, 8, **kw), [5, 5, 5, 2, 2, 1, 1, 1], 8, 5e-3, 2e-2, 0.0)
    lay = SG.class_layout(p)
    assert lay is not None and lay.m == 3
    fun, _, _ = SG._grouped_fun(p, lay, lay.m)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(2 * lay.m * lay.m + 3 * lay.m)
    f, g = fun(x)
    for _ in range(5):
        d = rng.standard_normal(x.size)
        h = 1e-6
        fd = (fun(x + h * d)[0] - fun(x - h * d)[0]) / (2 * h)
        assert abs(fd - g @ d) <= 1e-6 * (1 + abs(fd))


def test_layout_groups_by_count_and_weight_and_never_groups_user_losses():
    p = SG.classification(L.make_loss("weighted-ce", 4, weights=[1, 2, 1, 1]), [3, 3, 3, 1], 4, 1e-2, 1e-2)
    lay = SG.class_layout(p)
    assert lay.labels.tolist() == [0, 1, 0, 2]
    assert SG.class_layout(SG.classification(L.make_loss("ce", 3), [3, 2, 1], 3, 1e-2, 1e-2)) is None

    def sq(U, y):
        m = U.shape[1]
        R = U.copy()
        R[y, np.arange(m)] -= 1.0
        return 0.5 * np.sum(R * R, axis=0), R

    user = L.UserLoss("sq", sq, infimum=0.0, K=4)
    assert SG.class_layout(SG.classification(user, [3, 3, 3, 1], 4, 1e-2, 1e-2)) is None


# sample-level cvxpy/Clarabel references of tests/test_ufm_general.py (counts 6,6,2,1, lw = 5e-3, lh = 1e-2)
REFS = [("ce", {}, 0.1913184754855772), ("mse", {}, 0.03548848015189614),
        ("ls", {"smoothing": 0.1, "convention": "others"}, 0.547026230273218),
        ("ls", {"smoothing": 0.1}, 0.47032304944617903),
        ("weighted-ce", {"weights": [1, 1, 2, 3]}, 0.20362274203553576)]


@pytest.mark.parametrize("name,kw,ref", REFS, ids=[f"{r[0]}-{i}" for i, r in enumerate(REFS)])
def test_grouped_certificate_agrees_with_the_full_certificate_and_references(name, kw, ref):
    p = SG.classification(L.make_loss(name, 4, **kw), IMB, 4, 5e-3, 1e-2)
    lay = SG.class_layout(p)
    assert lay.m == 3
    sol = SG.solve_grouped(p, lay, starts=1)
    pt = sol.variables["point"]
    c = SG.certificate_grouped(p, pt, lay)
    assert c.lower_bound <= ref + 1e-12 and c.upper >= ref - 1e-12  # the bracket holds the independent value
    assert c.gap <= 1e-9 * ref
    X, b = SG.grouped_full(p, pt, lay)
    full = SG.certificate(p, X, b)  # K x K computation at the expanded point
    assert abs(full.upper - c.upper) <= 1e-13 and abs(full.lower_bound - c.lower_bound) <= 1e-12


def test_grouped_optimum_matches_the_ungrouped_solver():
    counts = [4] * 6 + [2] * 5 + [1] * 4
    p = SG.classification(L.make_loss("ce", len(counts)), counts, len(counts), 1e-3, 3e-3)
    lay = SG.class_layout(p)
    g = SG.solve_grouped(p, lay, starts=1)
    f = SG.solve_factored(p, starts=1)
    assert abs(g.value - f.value) <= 1e-9 * f.value
    assert SG.certificate_grouped(p, g.variables["point"], lay).gap <= 1e-9 * g.value


def test_grouped_geometry_matches_the_full_geometry():
    counts = [6, 6, 6, 2, 2, 1, 1, 1]
    p = SG.classification(L.make_loss("ce", 8), counts, 8, 5e-3, 1e-2)
    lay = SG.class_layout(p)
    pt = SG.solve_grouped(p, lay, starts=1).variables["point"]
    X, b = SG.grouped_full(p, pt, lay)
    g1, g2 = SG.geometry(p, X, b), SG.geometry_grouped(p, pt, lay)
    assert np.allclose(np.array(g1["classifier_norms"])[lay.reps], g2["classifier_norms_per_group"], rtol=1e-10)
    assert np.allclose(np.array(g1["class_mean_norms"])[lay.reps], g2["class_mean_norms_per_group"], rtol=1e-10)
    cos1 = np.asarray(g1["_cosines_full"][1])
    assert np.isclose(cos1[0, 1], g2["classifier_cosine_within_group"][0], atol=1e-10)
    for key in ("minority_classifier_cosine", "minority_mean_cosine", "classifier_norm_ratio", "mean_norm_ratio"):
        assert np.isclose(g1["minority"][key], g2["minority"][key], rtol=1e-9, atol=1e-12), key
    assert g1["rank"] == g2["rank"]


@pytest.mark.parametrize("rel", [1e-6, -1e-6, 1e-3])
def test_false_value_on_a_grouped_instance_is_refuted(rel):
    counts = [5] * 10 + [1] * 10
    p = SG.classification(L.make_loss("ce", 20), counts, 20, 1e-3, 1e-3)
    true = check_general(p, starts=1).to_dict()
    assert any("groups of exchangeable classes" in d for d in true["diagnostics"])
    val = next(c for c in true["claims"] if c["id"] == "optimal-value")
    assert val["verdict"] == "VERIFIED"
    f = true["solution"]["value"]
    rep = check_general(p, starts=1, claimed_value=f * (1 + rel)).to_dict()
    c = next(c for c in rep["claims"] if c["id"] == "optimal-value")
    assert c["verdict"] == "REFUTED", c["reason"]


@pytest.mark.slow
def test_k1000_long_tail_certified():
    from theory.scl import longtail_counts

    counts = longtail_counts(1000, 100, 100.0)
    p = SG.classification(L.make_loss("ce", 1000), counts, 1000, 1e-3, 1e-3)
    rep = check_general(p, starts=1).to_dict()
    val = next(c for c in rep["claims"] if c["id"] == "optimal-value")
    assert val["verdict"] == "VERIFIED", val["reason"]
    assert rep["certificate"]["groups"] == 100


def test_many_classes_in_few_groups_are_accepted_and_certified_per_group():
    # K = 3000 (K x K = 9e6 entries > the 4e6 limit of the ungrouped engine), 3 distinct counts
    counts = [4] * 1000 + [2] * 1000 + [1] * 1000
    p = SG.classification(L.make_loss("ce", 3000), counts, 3000, 1e-3, 1e-3)
    rep = check_general(p, starts=1).to_dict()
    val = next(c for c in rep["claims"] if c["id"] == "optimal-value")
    assert val["verdict"] == "VERIFIED", val["reason"]
    assert rep["certificate"]["groups"] == 3
    uq = next(c for c in rep["claims"] if c["id"] == "minimiser-unique")
    # K > 2000: no K x K matrices, but uniqueness is structural (strict convexity in the centred logits, rank
    # <= K - 1 <= d); no geometry statement is made without a radius
    assert uq["verdict"] == "VERIFIED" and uq["evidence"]["rank_bound_structural"] == 2999
    assert next(c for c in rep["claims"] if c["id"] == "minority-geometry")["verdict"] == "INCONCLUSIVE"
    # N lam = 7 >= ||grad at Z = 0|| here: the optimum is Z = 0 with the prior-fitting bias (value = entropy of
    # the class frequencies, computed here independently); zero classifiers have no cosine (null), rank 0
    freq = np.array(counts, float) / sum(counts)
    assert abs(rep["solution"]["value"] + float(np.sum(freq * np.log(freq)))) <= 1e-9
    assert rep["geometry"]["rank"] == 0 and rep["solution"]["rank"] == 0
    mino = rep["geometry"]["minority"]
    assert mino["minority_classifier_cosine"] is None and mino["minority_classifiers_zero"] is True
    # smaller lambda: nonzero classifiers, cosines exist
    p = SG.classification(L.make_loss("ce", 3000), counts, 3000, 1e-5, 1e-5)
    rep = check_general(p, starts=1).to_dict()
    assert next(c for c in rep["claims"] if c["id"] == "optimal-value")["verdict"] == "VERIFIED"
    mino = rep["geometry"]["minority"]
    assert -1.0 <= mino["minority_classifier_cosine"] <= 1.0 and mino["classifier_norm_ratio"] > 0


def test_many_distinct_counts_are_still_refused():
    from theory._validate import InputError

    with pytest.raises(InputError, match="exceeds"):
        SG.classification(L.make_loss("ce", 2500), list(range(1, 2501)), 2500, 1e-3, 1e-3)
