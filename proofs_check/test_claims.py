"""Every registered claim as a pytest test (quick profile): ``pytest --pyargs proofs_check``.

A claim passes when it is VERIFIED or INCONCLUSIVE (e.g. an open discrepancy reported as such);
NOT_APPLICABLE (a hypothesis of the theorem fails for every instance checked) is a skip with the
failed hypothesis as the reason; REFUTED or ERROR fails with the claim's reason and its failing checks, except for a claim tagged
``expect-refuted`` (a false statement from a review thread), whose expected answer is REFUTED.
"""

import pytest

from proofs_check.core import RunContext, Verdict
from proofs_check.registry import all_claims
from proofs_check.runner import EXPECT_REFUTED, refuted_as_expected

_CLAIMS = all_claims()


@pytest.mark.proof
@pytest.mark.parametrize("claim", _CLAIMS, ids=[c.id for c in _CLAIMS])
def test_claim(claim, request):
    full = request.config.getoption("--runslow", default=False)
    res = claim.run(RunContext("full" if full else "quick"))
    if res.verdict == Verdict.NOT_APPLICABLE:
        pytest.skip(f"NOT_APPLICABLE: {claim.id}: {res.reason}")
    bad = [c for c in res.checks if c.verdict in (Verdict.REFUTED, Verdict.ERROR)]
    detail = "\n".join(f"  {c.verdict.value}: {c.name}: {c.reason}\n    evidence: {c.to_dict()['evidence']}"
                       for c in bad[:5])
    if EXPECT_REFUTED in claim.tags or refuted_as_expected(res):  # a false statement as written (tagged, or
        # with its `-corrected` sibling registered): REFUTED with its witness is the answer
        assert res.verdict is not Verdict.VERIFIED, f"{claim.id}: expected REFUTED (a false thread statement), " \
                                                    f"got VERIFIED: {res.reason}"
        assert res.verdict is not Verdict.ERROR, f"{claim.id}: {res.reason}\n{detail}"
        return
    assert res.verdict not in (Verdict.REFUTED, Verdict.ERROR), f"{claim.id}: {res.reason}\n{detail}"
