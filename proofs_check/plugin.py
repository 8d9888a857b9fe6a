"""pytest plugin for ncproofs (entry point ``pytest11``; or ``pytest -p proofs_check.plugin``).

Markers: ``proof`` (a proof check: built-in claim or user claim), ``slow`` (skipped unless
``--runslow`` or ``--ncproofs-slow``), ``gpu`` (skipped with the reason when torch or CUDA is
missing).

Options: ``--ncproofs-max-k N`` caps the class count k of user claims (``proofs_check.user.classes``
strategies and any ``k`` parameter); ``--ncproofs-solver NAME`` is passed to user claims'
``solve(p, ctx)`` as ``ctx.solver``; ``--ncproofs-profile quick|full`` and ``--ncproofs-seed``.

Fixtures: ``ncproofs_context`` (a :class:`proofs_check.user.UserContext`), ``ncproofs_max_k``,
``ncproofs_solver``, and ``ncproofs_check``: a function that runs a core ``Claim`` (or a
``UserClaim`` on one instance) and fails the test with the verdict, reason and evidence unless
it is VERIFIED; a NOT_APPLICABLE result (a hypothesis of the theorem fails for the instance)
skips the test with the failed hypothesis as the reason.

Verdicts as test outcomes: VERIFIED passes; NOT_APPLICABLE is a skip (reason: the failed
hypothesis); REFUTED and ERROR fail with the evidence; INCONCLUSIVE fails in ``ncproofs_check``
and in user-claim property tests (``on_inconclusive="fail"``), and passes with an
``InconclusiveWarning`` in :func:`claim_tests` (built-in claims report open questions that way).

At the end of the session the terminal summary lists every user claim with the verdicts of the
instances tried.
"""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser):
    g = parser.getgroup("ncproofs", "ncproofs proof checks")
    g.addoption("--ncproofs-max-k", type=int, default=None, metavar="K",
                help="cap the class count k of user claims (default: $NCPROOFS_MAX_K or no cap)")
    g.addoption("--ncproofs-solver", default=None, metavar="NAME",
                help="solver backend passed to user claims as ctx.solver (default: $NCPROOFS_SOLVER or 'auto')")
    g.addoption("--ncproofs-profile", choices=("quick", "full"), default=None,
                help="run profile for proof checks (default quick)")
    g.addoption("--ncproofs-seed", type=int, default=None, help="seed passed to proof checks (default 0)")
    g.addoption("--ncproofs-slow", action="store_true", default=False,
                help="also run tests marked slow (same as --runslow where the project defines it)")


def pytest_configure(config):
    for line in ("proof: a proof check (built-in claim or user claim) run as a test",
                 "slow: long checks, skipped unless --runslow / --ncproofs-slow is given",
                 "gpu: needs torch with CUDA; skipped with the reason otherwise"):
        config.addinivalue_line("markers", line)
    from proofs_check import user

    max_k = config.getoption("--ncproofs-max-k")
    if max_k is not None and max_k < 2:
        raise pytest.UsageError(f"--ncproofs-max-k must be >= 2, got {max_k}")
    given = {"max_k": max_k, "solver": config.getoption("--ncproofs-solver"),
             "profile": config.getoption("--ncproofs-profile"), "seed": config.getoption("--ncproofs-seed")}
    user.configure(**{k: v for k, v in given.items() if v is not None})  # unset options keep env/defaults


def _cuda_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "gpu: torch is not installed (pip install 'ncproofs[torch]')"
    if not torch.cuda.is_available():
        return "gpu: CUDA is not available"
    return None


def pytest_collection_modifyitems(config, items):
    runslow = config.getoption("--ncproofs-slow") or bool(config.getoption("--runslow", default=False))
    gpu_reason = None
    checked_gpu = False
    for item in items:
        if "slow" in item.keywords and not runslow:
            item.add_marker(pytest.mark.skip(reason="slow: run with --runslow or --ncproofs-slow"))
        if "gpu" in item.keywords:
            if not checked_gpu:
                gpu_reason, checked_gpu = _cuda_reason(), True
            if gpu_reason:
                item.add_marker(pytest.mark.skip(reason=gpu_reason))


@pytest.fixture
def ncproofs_context():
    from proofs_check.user import current_context

    return current_context()


@pytest.fixture
def ncproofs_max_k(ncproofs_context):
    return ncproofs_context.max_k


@pytest.fixture
def ncproofs_solver(ncproofs_context):
    return ncproofs_context.solver


@pytest.fixture
def ncproofs_check(ncproofs_context):
    """``ncproofs_check(claim)`` for a core Claim, ``ncproofs_check(user_claim, params)`` for a
    UserClaim: returns the result when VERIFIED, fails with the evidence otherwise."""
    from proofs_check.core import Claim, Verdict
    from proofs_check.user import ClaimFailure, UserClaim, _evidence_text

    def run(claim, params=None):
        __tracebackhide__ = True
        if isinstance(claim, UserClaim):
            if params is None:
                raise TypeError("ncproofs_check(user_claim, params): params is required for a UserClaim")
            res = claim.check_instance(params, ncproofs_context)
            if res.verdict == Verdict.NOT_APPLICABLE:
                pytest.skip(f"NOT_APPLICABLE: {claim.id}: {res.reason}")
            if res.verdict != Verdict.VERIFIED:
                raise ClaimFailure(claim.failure_message(res, params), res, dict(params))
            return res
        if not isinstance(claim, Claim):
            raise TypeError(f"ncproofs_check expects a proofs_check Claim or UserClaim, got {type(claim).__name__}")
        if params is not None:
            raise TypeError("ncproofs_check(claim): params is only for a UserClaim (a core Claim chooses its instances)")
        res = claim.run(ncproofs_context.run_context)
        if res.verdict == Verdict.NOT_APPLICABLE:
            pytest.skip(f"NOT_APPLICABLE: {claim.id}: {res.reason}")
        if res.verdict != Verdict.VERIFIED:
            raise ClaimFailure(f"ncproofs claim {claim.id!r} {res.verdict.value}\n"
                               f"  statement: {claim.statement}\n  source: {claim.source} ({claim.provenance.value})\n"
                               f"  reason: {res.reason}\n  evidence:\n{_evidence_text(res.checks)}", res, {})
        return res

    return run


class InconclusiveWarning(UserWarning):
    """A proof check run as a test was INCONCLUSIVE: it passed as a test, but is not VERIFIED."""


def claim_tests(patterns: list[str] | None = None, *, allow_inconclusive: bool = True):
    """A parametrized test over the registered built-in claims, for a module inside
    ``proofs_check`` (so ``pytest --pyargs proofs_check`` runs them)::

        # proofs_check/test_claims.py
        from proofs_check.plugin import claim_tests
        test_claim = claim_tests()

    REFUTED and ERROR fail with the evidence; INCONCLUSIVE passes (with a warning) unless
    ``allow_inconclusive=False``; NOT_APPLICABLE (every check's hypothesis fails) is a skip with the
    failed hypothesis as the reason.
    """
    import warnings

    from proofs_check.core import Verdict
    from proofs_check.registry import all_claims, select
    from proofs_check.user import ClaimFailure, _evidence_text, current_context

    if patterns is not None and (isinstance(patterns, (str, bytes)) or not isinstance(patterns, (list, tuple))
                                 or not all(isinstance(p, str) for p in patterns)):
        raise TypeError(f"patterns must be a list of strings (claim ids, families or globs), got {patterns!r}")
    if not isinstance(allow_inconclusive, bool):
        raise TypeError(f"allow_inconclusive must be True or False, got {allow_inconclusive!r}")
    claims = select(all_claims(), patterns)

    @pytest.mark.proof
    @pytest.mark.parametrize("claim", claims, ids=[c.id for c in claims])
    def test_claim(claim):
        __tracebackhide__ = True
        res = claim.run(current_context().run_context)
        if res.verdict == Verdict.NOT_APPLICABLE:
            pytest.skip(f"NOT_APPLICABLE: {claim.id}: {res.reason}")
        msg = (f"ncproofs claim {claim.id!r} {res.verdict.value}\n  statement: {claim.statement}\n"
               f"  source: {claim.source} ({claim.provenance.value})\n  reason: {res.reason}\n"
               f"  evidence:\n{_evidence_text(res.checks)}")
        from proofs_check.runner import refuted_as_expected, surprise

        if refuted_as_expected(res):  # a false statement as written, refuted with its witness: the answer
            return
        if surprise(res):
            raise ClaimFailure(msg + "\n  expected REFUTED (a false statement as written): its witness no longer "
                               "holds", res, {})
        if res.verdict in (Verdict.REFUTED, Verdict.ERROR) or \
                (res.verdict == Verdict.INCONCLUSIVE and not allow_inconclusive):
            raise ClaimFailure(msg, res, {})
        if res.verdict == Verdict.INCONCLUSIVE:
            warnings.warn(InconclusiveWarning(f"{claim.id}: INCONCLUSIVE: {res.reason}"), stacklevel=1)

    return test_claim


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing proof check shows what decides it, not the plugin's machinery: the test's own line, the
    claim, its verdict, the instance (hypothesis' shrunk falsifying example), the reason and witness, and
    for an ERROR the user's own frames. Other failures keep pytest's report."""
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or report.when != "call" or not report.failed:
        return
    from proofs_check.user import ClaimFailure

    exc = call.excinfo.value
    if not isinstance(exc, ClaimFailure):
        return
    lines = [str(exc)]  # its first line is the one pytest's short summary shows
    notes = [n for n in getattr(exc, "__notes__", []) if n.strip()]
    if notes:
        lines.append("  hypothesis:")
        lines += ["    " + ln for n in notes for ln in str(n).splitlines()]
    report.longrepr = "\n".join(lines)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    from proofs_check.user import tallies

    t = tallies()
    if not t:
        return
    terminalreporter.section("ncproofs user claims (instances tried, incl. shrinking)")
    for cid, c in sorted(t.items()):
        parts = [f"{v} {c.get(v, 0)}" for v in ("VERIFIED", "INCONCLUSIVE", "REFUTED", "ERROR") if c.get(v)]
        if c.get("NOT_APPLICABLE"):
            parts.append(f"NOT_APPLICABLE (outside the hypotheses) {c['NOT_APPLICABLE']}")
        terminalreporter.write_line(f"{cid}: " + (", ".join(parts) or "none"))
    if os.environ.get("NCPROOFS_DEBUG"):  # pragma: no cover
        terminalreporter.write_line(repr(t))
