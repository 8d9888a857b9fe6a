"""scl.thread.graf-special-case decides its b = 2 case (it used to be a permanent NOT_APPLICABLE): at b = 2 the
all-combinations batching has loss identically 0, so the OF is not the unique minimiser (VERIFIED), and the statement
without the b >= 3 restriction (min_batch = 2) is REFUTED with a second minimiser as witness."""

from __future__ import annotations

import numpy as np

from proofs_check.claims import scl_thread as STH
from proofs_check.core import RunContext, Verdict
from solvers import scl as S
from theory import scl as T


def _b2_checks(claim):
    checks = list(claim.check(RunContext()))
    return [c for c in checks if "b=2]" in c.name]


def test_b2_case_decides_and_holds():
    checks = _b2_checks(STH.make_graf_special_case_claim(cases=[((2, 2), 2), ((2, 2, 2), 2)], claim_id="x"))
    assert len(checks) == 6
    assert all(c.verdict is Verdict.VERIFIED for c in checks), [(c.name, c.verdict, c.reason) for c in checks]
    assert sum(c.independent for c in checks) == 4  # the merge witness and the random zero-loss feature, per case


def test_registered_claim_counts_its_b2_case():
    from proofs_check.registry import all_claims

    claim = next(c for c in all_claims() if c.id == "scl.thread.graf-special-case")
    res = claim.run(RunContext())
    assert res.verdict is Verdict.VERIFIED
    b2 = [c for c in res.checks if "b=2]" in c.name]
    assert b2 and all(c.verdict is Verdict.VERIFIED for c in b2)
    assert not any(c.verdict is Verdict.NOT_APPLICABLE for c in res.checks)


def test_false_b2_statement_is_refuted_with_a_witness():
    res = STH.make_graf_special_case_claim(cases=[((2, 2), 2)], min_batch=2, claim_id="x").run(RunContext())
    assert res.verdict is Verdict.REFUTED
    refuted = [c for c in res.checks if c.verdict is Verdict.REFUTED]
    assert {c.name.split(" [")[0] for c in refuted} == {"C1 and C2 hold", "OF is the unique minimiser",
                                                        "a random feature is a minimiser at b = 2"}
    w = next(c for c in refuted if c.name.startswith("a random feature"))
    assert w.evidence["loss"] == 0.0 and w.evidence["gram_diff_from_of"] > 0.1


def test_false_b3_non_uniqueness_is_refuted():
    res = STH.make_graf_special_case_claim(cases=[((2, 2), 3)], min_batch=4, claim_id="x").run(RunContext())
    assert res.verdict is Verdict.REFUTED


def test_b2_loss_vanishes_by_hand():
    """Independent of scl_loss: with a pair {i, j} the anchor term is LSE over the single logit G_ij / tau minus
    that logit (same class), or absent (different classes): 0 at any features; scl_loss agrees."""
    rng = np.random.default_rng(3)
    counts = (3, 2)
    y = T.labels_from_counts(counts)
    H = rng.standard_normal((4, y.size))
    H /= np.linalg.norm(H, axis=0)
    batches = T.all_combinations_batching(counts, 2)
    assert len(batches) == 10 and all(len(b) == 2 for b in batches)
    assert S.scl_loss(H, y, batches, 0.5, grad=False) == 0.0
    assert S.scl_loss(H, y, T.all_combinations_batching(counts, 3), 0.5, grad=False) > 0.0
