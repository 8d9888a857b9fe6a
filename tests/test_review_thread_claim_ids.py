"""The claim ids the family issues name (scripts, tables and docs cite them) are registered exactly,
and every id docs/review_threads.md lists is a registered claim."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from proofs_check.registry import all_claims

NAMED = """
ntk.general.invariant ntk.general.nc1-at-e-zero ntk.general.etf ntk.imbalanced.nc1 ntk.imbalanced.etf
ntk.ce.invariant ntk.ce.collapse ntk.ce.nc1-decays ntk.reviewer.first-implications ntk.reviewer.corrected-implications
ntk.assumption.consequences ntk.assumption.consistency
feature_collapse.trainable-ln.attained feature_collapse.trainable-ln.type2 feature_collapse.trainable-ln.landscape
feature_collapse.no-decay.no-minimum feature_collapse.no-decay.limit feature_collapse.random-latents.word-collapse
feature_collapse.random-latents.geometry feature_collapse.hier.collapse
ufm.relu.balanced-geometry ufm.relu.imbalanced-not-of ufm.relu.classifier-sign scl.activations.same-result
scl.thread.distances scl.thread.eq1-eq2 scl.thread.rank scl.thread.graf-special-case scl.thread.binary-antipodal
scl.theorem1.low_dim_gap
crh.magnitude.first-moment crh.magnitude.cauchy-schwarz crh.magnitude.gamma-exponent
crh.linear-regression.normalisation crh.lazy.no-alignment crh.noise-injection.rga crh.layers.later-better
crh.identity.transfer-inverse
deep_ufm.linear-mse.optimum deep_ufm.dnc.suboptimal deep_ufm.dnc.optimal-shallow deep_ufm.ce.low-rank-bias
""".split()

IDS = {c.id for c in all_claims()}


@pytest.mark.parametrize("cid", NAMED)
def test_named_claim_is_registered_under_its_exact_id(cid):
    assert cid in IDS


def test_removed_claim_that_could_not_fail_is_gone():
    assert "feature_collapse.beyond-symmetry" not in IDS
    assert "crh.experiment.magnitude" not in IDS


def test_every_corrected_claim_has_its_false_original():
    for cid in IDS:
        if cid.endswith("-corrected"):
            assert cid[: -len("-corrected")] in IDS, cid


def test_review_threads_page_lists_registered_claims_only():
    text = (Path(__file__).resolve().parents[1] / "docs" / "review_threads.md").read_text()
    listed = set(re.findall(r"^\| `([a-z_]+\.[a-z0-9_.\-]+)` \|", text, flags=re.M))
    assert len(listed) >= len(NAMED)
    assert listed <= IDS, sorted(listed - IDS)
    assert set(NAMED) <= listed | {"scl.theorem1.low_dim_gap"}
