"""A false statement quoted from a review thread is registered with the tag ``expect-refuted``: its
REFUTED verdict (with a witness) is the package's answer and does not fail ``ncproofs run``; the
same claim coming out VERIFIED does (the witness no longer holds)."""

from __future__ import annotations

from proofs_check.core import Check, Claim, RunContext, Verdict
from proofs_check.runner import EXPECT_REFUTED, RunResult


def _claim(cid: str, verdict: Verdict, tags=()) -> Claim:
    def check(ctx):
        yield Check("c", verdict, f"{verdict.value} by construction of this test", {}, True)

    return Claim(id=cid, family="ntk", statement="s", source="test", provenance="derived", check=check,
                 tags=tuple(tags))


def _run(*claims) -> RunResult:
    ctx = RunContext()
    return RunResult([c.run(ctx) for c in claims], ctx, 0.0)


def test_expected_refutation_does_not_fail_the_run():
    run = _run(_claim("ntk.a", Verdict.VERIFIED), _claim("ntk.thread-false", Verdict.REFUTED, [EXPECT_REFUTED]))
    assert run.verdict is Verdict.VERIFIED and run.exit_status == 0
    assert run.expected_refuted == ["ntk.thread-false"]
    assert run.to_dict()["refuted_as_expected"] == ["ntk.thread-false"]


def test_untagged_refutation_still_fails():
    run = _run(_claim("ntk.a", Verdict.REFUTED), _claim("ntk.b", Verdict.REFUTED, [EXPECT_REFUTED]))
    assert run.verdict is Verdict.REFUTED and run.exit_status == 1


def test_expected_refutation_that_verifies_is_a_failure():
    run = _run(_claim("ntk.thread-false", Verdict.VERIFIED, [EXPECT_REFUTED]))
    assert run.verdict is Verdict.REFUTED and run.exit_status == 1


def test_expected_refutation_left_undecided_is_inconclusive():
    run = _run(_claim("ntk.thread-false", Verdict.INCONCLUSIVE, [EXPECT_REFUTED]))
    assert run.verdict is Verdict.INCONCLUSIVE
    assert run.exit_status_for("refuted") == 0 and run.exit_status_for("inconclusive") == 1
