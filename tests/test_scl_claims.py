"""SCL claims: provenance as data, and every claim REFUTED when fed a deliberately false statement
(a bound off by 1e-3, the wrong geometry, the spec's literal C1, a wrong limit...)."""

import pytest

from proofs_check.claims import scl as C
from proofs_check.core import Provenance, RunContext, Verdict
from theory import scl as T

CTX = RunContext("quick", 0)


def run(claim):
    return claim.run(CTX)


def test_registry_provenance():
    ids = {c.id: c for c in C.CLAIMS}
    assert len(ids) == len(C.CLAIMS)
    for cid in ("scl.theorem1.full_batch_bound", "scl.theorem2.minibatch_bound", "scl.corollary.uniqueness",
                "scl.corollary.batch_binding", "scl.graf.balanced_etf", "scl.ufm.imbalanced_not_etf",
                "scl.ufm.minibatch_not_etf", "scl.relu_cost_positive"):
        assert ids[cid].provenance is Provenance.RECONSTRUCTED
    assert "Kini" in ids["scl.theorem1.full_batch_bound"].source
    assert "Graf" in ids["scl.graf.balanced_etf"].source
    assert ids["scl.theorem1.low_dim_gap"].provenance is Provenance.DERIVED
    assert all(c.family == "scl" for c in C.CLAIMS)


# ---- true statements on small instance lists -----------------------------------------------

def test_theorem1_verified_small():
    r = run(C.make_theorem1_claim(instances=[((3, 2), 1.0), ((2, 2, 1), 0.5)]))
    assert r.verdict is Verdict.VERIFIED, r.reason


@pytest.mark.parametrize("claim", [C.make_uniqueness_claim(), C.make_binding_claim(), C.make_centering_claim(),
                                   C.make_tau_limits_claim(), C.make_minibatch_ufm_claim()],
                         ids=lambda c: c.id)
def test_cheap_claims_verified(claim):
    r = run(claim)
    assert r.verdict is Verdict.VERIFIED, r.reason


# ---- false statements are REFUTED ----------------------------------------------------------

def test_theorem1_bound_raised_is_refuted():
    r = run(C.make_theorem1_claim(bound=lambda c, t: T.theorem1_bound(c, t) + 1e-3, instances=[((3, 2), 1.0)]))
    assert r.verdict is Verdict.REFUTED
    assert any("< claimed lower bound" in ch.reason for ch in r.checks if ch.verdict is Verdict.REFUTED)


def test_theorem1_bound_lowered_is_refuted():
    # a bound lowered by 1e-3 is still a valid lower bound, but no longer the optimum: the certificate says so
    r = run(C.make_theorem1_claim(bound=lambda c, t: T.theorem1_bound(c, t) - 1e-3, instances=[((4, 2), 0.5)]))
    assert r.verdict is Verdict.REFUTED


def test_theorem1_wrong_geometry_is_refuted():
    r = run(C.make_theorem1_claim(geometry="simplex-etf", instances=[((3, 3, 2), 0.5)]))
    assert r.verdict is Verdict.REFUTED


def test_lowdim_wrong_dimension_count_is_refuted():
    # "singletons need their own directions" (required dim = k) is refuted by (3,1,1), d = 2
    r = run(C.make_lowdim_claim(required_dim=lambda c: len(c), strict=[]))
    assert r.verdict is Verdict.REFUTED
    # "the bound is attained at any d" is never VERIFIED where it fails
    r = run(C.make_lowdim_claim(required_dim=lambda c: 1, strict=[((3, 2), 1.0, 1)], shared=[]))
    assert r.verdict is not Verdict.VERIFIED


def test_theorem2_bound_raised_is_refuted():
    r = run(C.make_theorem2_claim(bound=lambda c, b, t: T.theorem2_bound(c, b, t) + 1e-3,
                                  cases=[((4, 4), 0.5, [[0, 1, 4, 5], [2, 3, 6, 7]])]))
    assert r.verdict is Verdict.REFUTED


def test_uniqueness_literal_spec_c1_is_refuted():
    lit = lambda an: an.C1_literal and an.C2  # noqa: E731
    r = run(C.make_uniqueness_claim(predict=lit, cases=[((2, 2), [[0, 1], [2, 3], [0, 2, 3], [1, 2, 3]])]))
    assert r.verdict is Verdict.REFUTED


def test_uniqueness_always_unique_is_refuted():
    r = run(C.make_uniqueness_claim(predict=lambda an: True, cases=[((4, 4), [[0, 1, 4, 5], [2, 3, 6, 7]])]))
    assert r.verdict is Verdict.REFUTED


def test_uniqueness_never_unique_is_refuted():
    r = run(C.make_uniqueness_claim(predict=lambda an: False,
                                    cases=[((3, 3, 2), [[0, 1, 2, 3], [3, 4, 5, 6], [0, 6, 7]])]))
    assert r.verdict is Verdict.REFUTED


def test_binding_without_binding_is_refuted():
    r = run(C.make_binding_claim(binding=lambda c, b: tuple(tuple(x) for x in b),
                                 cases=[((4, 4), [[0, 1, 4, 5], [2, 3, 6, 7]])]))
    assert r.verdict is Verdict.REFUTED


def test_graf_value_raised_is_refuted():
    r = run(C.make_graf_claim(value=lambda c, t: T.etf_value(c, t) + 1e-3, instances=[((3, 3, 3), 0.5, 2)]))
    assert r.verdict is Verdict.REFUTED


def test_graf_wrong_geometry_is_refuted():
    r = run(C.make_graf_claim(geometry="orthogonal-frame", instances=[((3, 3, 3), 0.5, 3)]))
    assert r.verdict is Verdict.REFUTED


@pytest.mark.parametrize("geometry", ["orthogonal-frame", "simplex-etf"])
def test_imbalanced_ufm_claimed_of_or_etf_is_refuted(geometry):
    # was INCONCLUSIVE (no closed-form minimiser); now the dual certificate at the solver's polished collapsed
    # candidate gives a proven radius (docs/scl.md, Imbalanced UFM), and the template is violated within it
    r = run(C.make_imbalanced_ufm_claim(geometry=geometry, instances=[((5, 3, 2), 0.5)]))
    assert r.verdict is Verdict.REFUTED
    geo = [ch for ch in r.checks if ch.name.startswith("class means are")]
    assert geo and all(ch.verdict is Verdict.REFUTED for ch in geo)


def test_imbalanced_ufm_majority_closer_is_refuted():
    r = run(C.make_imbalanced_ufm_claim(minority_closer=False, instances=[((5, 3, 2), 0.5)]))
    assert r.verdict is Verdict.REFUTED
    assert not any(ch.verdict is Verdict.VERIFIED and ch.name.startswith("majority") for ch in r.checks)


def test_minibatch_ufm_etf_optimal_is_refuted():
    r = run(C.make_minibatch_ufm_claim(etf_optimal=True))
    assert r.verdict is Verdict.REFUTED


def test_relu_cost_false_is_refuted():
    r = run(C.make_relu_cost_claim(cost=lambda c, t: -T.relu_cost(c, t), instances=[((3, 3), 1.0)]))
    assert r.verdict is Verdict.REFUTED
    r = run(C.make_relu_cost_claim(cost=lambda c, t: T.relu_cost(c, t) + 1e-3, instances=[((3, 3), 1.0)]))
    assert r.verdict is Verdict.REFUTED


def test_centering_weighted_claimed_etf_is_refuted():
    r = run(C.make_centering_claim(weighted_cosines=lambda c: T.weighted_centering_cosines((1,) * len(c))))
    assert r.verdict is Verdict.REFUTED


def test_tau_limits_swapped_is_refuted():
    r = run(C.make_tau_limits_claim(limits=lambda n, N: T.tau_limits(n, N)[::-1]))
    assert r.verdict is Verdict.REFUTED
