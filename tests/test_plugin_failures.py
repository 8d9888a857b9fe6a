"""What a failing proof check shows under pytest (tested with pytester): the claim, the verdict, the
instance, the reason with its witness, and for a crash in the user's own ``solve`` the user's file and
line; no frames of the plugin or of ncproofs itself."""

from __future__ import annotations

import pytest

USER_TESTS = '''
import hypothesis.strategies as st
from proofs_check import user as U


def my_solve(p):
    scale = p["k"] - p["k"]
    return 1.0 / scale  # the user's bug


crash = U.UserClaim(id="mine.crash", statement="the value is one", source="my notes",
                    params={"k": st.integers(2, 4)}, solve=my_solve, predict=lambda p: 1.0, kind="equals",
                    rtol=1e-9)
test_crash = crash.as_test()

wrong = U.UserClaim(id="mine.wrong", statement="k equals k + 1", source="my notes",
                    params={"k": st.integers(2, 4)}, solve=lambda p: float(p["k"]),
                    predict=lambda p: p["k"] + 1.0, kind="equals", rtol=1e-9)
test_wrong = wrong.as_test()


def test_fixture(ncproofs_check):
    ncproofs_check(wrong, {"k": 3})
'''


@pytest.fixture()
def outcome(pytester, monkeypatch):
    from proofs_check import user

    monkeypatch.setattr(user, "_TALLY", {})  # the inner session's tallies stay out of this session's summary
    pytester.makepyfile(test_user_claims=USER_TESTS)
    res = pytester.runpytest("-p", "no:cacheprovider", "-p", "proofs_check.plugin")
    return res, res.stdout.str()


def _section(out: str, name: str) -> str:
    start = out.index(f" {name} ")
    end = out.find("\n___", start + 1)
    end = out.find("\n===", start + 1) if end < 0 else end
    return out[start:end]


def test_refuted_claim_shows_claim_verdict_instance_and_witness(outcome):
    res, out = outcome
    res.assert_outcomes(failed=3)
    sec = _section(out, "test_wrong")
    assert "ncproofs claim 'mine.wrong' REFUTED at instance (k=2)" in sec  # shrunk to the smallest k
    assert "statement: k equals k + 1" in sec and "predicted 3, measured 2" in sec
    assert "Falsifying example" in sec or "Failing test case" in sec  # hypothesis < 6.15x / newer
    assert "FAILED test_user_claims.py::test_wrong - ncproofs claim 'mine.wrong' REFUTED" in out


def test_crash_in_the_users_solve_shows_the_users_line(outcome):
    _, out = outcome
    sec = _section(out, "test_crash")
    assert "ERROR" in sec and "ZeroDivisionError: float division by zero" in sec
    assert "test_user_claims.py\", line 7, in my_solve" in sec and "return 1.0 / scale" in sec
    assert "at test_user_claims.py:7 in my_solve" in sec  # in the one-line reason too


@pytest.mark.parametrize("name", ["test_wrong", "test_crash", "test_fixture"])
def test_no_plugin_frames(outcome, name):
    _, out = outcome
    sec = _section(out, name)
    for internal in ("proofs_check/user.py", "proofs_check/plugin.py", "proofs_check/core.py", "hypothesis/core.py",
                     "def outer", "def assert_instance"):
        assert internal not in sec, (internal, sec)
    assert len(sec.splitlines()) < 30, sec


def test_fixture_failure_is_compact_too(outcome):
    _, out = outcome
    sec = _section(out, "test_fixture")
    assert "ncproofs claim 'mine.wrong' REFUTED at instance (k=3)" in sec and "predicted 4, measured 3" in sec
