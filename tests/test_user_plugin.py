"""Verdicts as pytest outcomes (proofs_check.plugin, proofs_check/test_claims.py): VERIFIED passes,
NOT_APPLICABLE is a skip whose reason names the failed hypothesis, REFUTED/ERROR fail,
INCONCLUSIVE as documented (fails in ncproofs_check and user property tests, passes with a
warning in claim_tests). Run through pytest in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from proofs_check.core import Claim, Verdict, hypothesis_fails
from proofs_check.user import UserClaim, _record, tallies

ROOT = Path(__file__).resolve().parents[1]

USER_TESTS = '''
import hypothesis.strategies as st
from proofs_check.core import Claim, Check, Verdict, hypothesis_fails
from proofs_check.user import UserClaim, user_claim, classes


def needs_k_at_least_100(p):
    return None if p["k"] >= 100 else f"k >= 100 (the theorem's hypothesis), got k = {p['k']}"


@user_claim(id="mine.never-applies", statement="a statement for k >= 100 only", source="notes",
            params={"k": classes(2, 6)}, predict=lambda p: 1.0, atol=0, requires=needs_k_at_least_100)
def test_never_applicable(p):
    return 1.0


@user_claim(id="mine.sometimes-applies", statement="true for k >= 4", source="notes",
            params={"k": classes(2, 8)}, predict=lambda p: 1.0, atol=0,
            requires=lambda p: None if p["k"] >= 4 else "k >= 4")
def test_sometimes_applicable(p):
    return 1.0


@user_claim(id="mine.examples-only", statement="only explicit examples, outside the hypotheses", source="notes",
            params={"k": st.just(2)}, predict=lambda p: 1.0, atol=0, examples=[{"k": 2}], max_examples=1,
            requires=lambda p: "k >= 3 (hypothesis of Thm 1)")
def test_examples_outside(p):
    return 1.0


NA = Claim("mine.core-na", "user", "s", "src", "derived",
           lambda ctx: [hypothesis_fails("h", "d >= k-1 (no room for an ETF)")])


def test_fixture_core_claim_not_applicable(ncproofs_check):
    ncproofs_check(NA)


def test_fixture_user_claim_not_applicable(ncproofs_check):
    c = UserClaim(id="mine.u", statement="s", source="s", params={}, predict=lambda p: 0.0, atol=0,
                  solve=lambda p: 0.0, requires=lambda p: "lambda < threshold (Thm 2 needs it)")
    ncproofs_check(c, {"k": 3})


def test_fixture_inconclusive_fails(ncproofs_check):
    ncproofs_check(Claim("mine.unsure", "user", "s", "src", "derived",
                         lambda ctx: [Check("c", Verdict.INCONCLUSIVE, "no certificate")]))
'''


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("NCPROOFS_MAX_K", None)
    return env


def _pytest(cwd: Path, *args: str, timeout: int = 300) -> str:
    cmd = [sys.executable, "-m", "pytest", "-p", "proofs_check.plugin", "-p", "no:cacheprovider", "-rsfE",
           "--rootdir", str(cwd), "-o", "addopts=", *args]
    res = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    return res.stdout + res.stderr


def test_not_applicable_is_a_skip_with_the_failed_hypothesis(tmp_path):
    (tmp_path / "test_na.py").write_text(USER_TESTS)
    out = _pytest(tmp_path, "-v", "test_na.py")
    assert "test_never_applicable SKIPPED" in out, out
    assert "NOT_APPLICABLE: no instance tried satisfies the hypotheses" in out and "k >= 100" in out
    assert "test_sometimes_applicable PASSED" in out
    assert "test_examples_outside SKIPPED" in out and "k >= 3 (hypothesis of Thm 1)" in out
    assert "test_fixture_core_claim_not_applicable SKIPPED" in out
    assert "NOT_APPLICABLE: mine.core-na: h: hypothesis fails: d >= k-1 (no room for an ETF)" in out
    assert "test_fixture_user_claim_not_applicable SKIPPED" in out and "lambda < threshold" in out
    assert "test_fixture_inconclusive_fails FAILED" in out and "'mine.unsure' INCONCLUSIVE" in out
    assert "1 failed, 1 passed, 4 skipped" in out, out
    # the terminal summary counts NOT_APPLICABLE instances per claim
    assert "mine.never-applies: NOT_APPLICABLE (outside the hypotheses)" in out


def test_claim_tests_and_builtin_claim_tests_skip_not_applicable(tmp_path):
    (tmp_path / "fake_registry.py").write_text(textwrap.dedent('''
        from proofs_check import registry
        from proofs_check.core import Claim, Check, Verdict, hypothesis_fails

        def ok(ctx):
            yield Check("c", Verdict.VERIFIED, "holds")

        def na(ctx):
            yield hypothesis_fails("thm", "n_c equal (balanced classes)")

        def mixed(ctx):  # one applicable VERIFIED check, one not applicable: VERIFIED
            yield Check("c", Verdict.VERIFIED, "holds")
            yield hypothesis_fails("thm", "d >= k")

        def bad(ctx):
            yield hypothesis_fails("thm", "d >= k")
            yield Check("c", Verdict.REFUTED, "witness", {"gap": 0.5})

        registry.all_claims = lambda: [Claim("fam.ok", "fam", "s", "src", "quoted", ok),
                                       Claim("fam.na", "fam", "s", "src", "quoted", na),
                                       Claim("fam.mixed", "fam", "s", "src", "quoted", mixed),
                                       Claim("fam.bad", "fam", "s", "src", "quoted", bad)]
        '''))
    (tmp_path / "test_builtin.py").write_text(textwrap.dedent('''
        import fake_registry  # noqa: F401
        from proofs_check.plugin import claim_tests
        test_claim = claim_tests()
        '''))
    env_path = str(tmp_path)
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "proofs_check.plugin", "-p", "no:cacheprovider",
                          "-o", "addopts=", "--rootdir", str(tmp_path), "-v", "-rs", "test_builtin.py"],
                         cwd=tmp_path, env={**_env(), "PYTHONPATH": env_path + os.pathsep + _env()["PYTHONPATH"]},
                         capture_output=True, text=True, timeout=120).stdout
    assert "test_claim[fam.ok] PASSED" in out and "test_claim[fam.mixed] PASSED" in out, out
    assert "test_claim[fam.na] SKIPPED" in out and "n_c equal (balanced classes)" in out
    assert "test_claim[fam.bad] FAILED" in out
    # the built-in claims module (proofs_check/test_claims.py) with the same registry
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "fake_registry", "-p", "no:cacheprovider",
                          "-o", "addopts=", "-v", "-rs", "--pyargs", "proofs_check.test_claims"],
                         cwd=tmp_path, env={**_env(), "PYTHONPATH": env_path + os.pathsep + _env()["PYTHONPATH"]},
                         capture_output=True, text=True, timeout=120).stdout
    assert "test_claim[fam.ok] PASSED" in out and "test_claim[fam.mixed] PASSED" in out, out
    assert "test_claim[fam.na] SKIPPED" in out and "NOT_APPLICABLE: fam.na" in out
    assert "test_claim[fam.bad] FAILED" in out


def test_not_applicable_in_process():
    c = UserClaim(id="t.na", statement="s", source="s", params={}, predict=lambda p: 0.0, atol=0,
                  solve=lambda p: 0.0, requires=lambda p: None if p["k"] >= 3 else "k >= 3")
    assert c.check_instance({"k": 2}).verdict == Verdict.NOT_APPLICABLE
    assert c.check_instance({"k": 3}).verdict == Verdict.VERIFIED
    na = Claim("t.core-na", "user", "s", "src", "derived", lambda ctx: [hypothesis_fails("h", "x")])
    assert na.run().verdict == Verdict.NOT_APPLICABLE
    _record("t.tally", Verdict.NOT_APPLICABLE)
    _record("t.tally", Verdict.VERIFIED)
    t = tallies()["t.tally"]
    from proofs_check.user import _TALLY

    _TALLY.pop("t.tally", None)  # keep the session summary to real user claims
    assert t["NOT_APPLICABLE"] == 1 and t["outside"] == 1 and t["VERIFIED"] == 1


def test_inconclusive_user_property_test_fails_unless_discarded():
    from proofs_check.user import ClaimFailure, _Discard

    unsure = lambda p: {"value": 1.0, "lower_bound": None}  # noqa: E731
    c = UserClaim(id="t.u", statement="s", source="s", params={}, predict=lambda p: 1.0, solve=unsure,
                  kind="optimum", atol=1e-9)
    with pytest.raises(ClaimFailure, match="INCONCLUSIVE"):
        c.assert_instance({})
    d = UserClaim(id="t.u", statement="s", source="s", params={}, predict=lambda p: 1.0, solve=unsure,
                  kind="optimum", atol=1e-9, on_inconclusive="discard")
    with pytest.raises(_Discard):
        d.assert_instance({})
