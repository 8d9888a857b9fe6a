"""`kind="optimum"` user claims: what the solve returns is taken as numbers only when it is numbers. Before the
fix `{"value": True, "lower_bound": True}` and `{"value": "1.0", "lower_bound": "1.0"}` VERIFIED "min = 1"
(`float(True)`, `float("1.0")`), a `Solution` whose certificate has `lower_bound=None` crashed inside the tool
(`float(None)`) instead of being "no certificate", and `Bounds(...)` was refused although it states exactly a
feasible value and a proven lower bound (docs/user_claims.md)."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest

from proofs_check.core import Verdict
from proofs_check.user import Bounds, UserClaim
from solvers.common import Certificate, Solution


def _claim(solve, predicted=1.0, **kw):
    kw.setdefault("rtol", 1e-6)
    return UserClaim(id="opt", statement="min = 1", source="docs/user_claims.md", params={"k": st.just(3)},
                     solve=solve, predict=lambda p: predicted, kind="optimum", **kw)


def _verdict(claim):
    return claim.check_instance({"k": 3})


@pytest.mark.parametrize("ret", [{"value": True, "lower_bound": True}, {"value": "1.0", "lower_bound": "1.0"},
                                 {"value": 1.0, "lower_bound": "1.0"}, {"value": np.bool_(True), "lower_bound": 1.0}])
def test_strings_and_booleans_never_verify_an_optimum(ret):
    res = _verdict(_claim(lambda p: ret))
    assert res.verdict is not Verdict.VERIFIED
    assert res.verdict is Verdict.ERROR and "must be a real number" in res.reason


def test_certificate_without_lower_bound_is_no_certificate_not_a_crash():
    sol = Solution(1.0, "lbfgs", True, 0.1, certificate=Certificate(None, 1.0, "none"))
    res = _verdict(_claim(lambda p: sol))
    assert res.verdict is Verdict.INCONCLUSIVE and "no certificate" in res.reason


def test_bounds_decide_an_optimum_both_ways():
    assert _verdict(_claim(lambda p: Bounds(feasible=[1.5, 1.0 + 1e-9], proven_lower=1.0 - 1e-9))).verdict \
        is Verdict.VERIFIED
    # the least feasible value is below the claimed optimum: REFUTED with that witness
    res = _verdict(_claim(lambda p: Bounds(feasible=[1.2, 0.9], proven_lower=0.85)))
    assert res.verdict is Verdict.REFUTED and "0.9" in res.reason
    # a proven lower bound above it: REFUTED
    assert _verdict(_claim(lambda p: Bounds(proven_lower=1.1))).verdict is Verdict.REFUTED
    # feasible values alone (a heuristic) never verify an optimum
    assert _verdict(_claim(lambda p: Bounds(feasible=1.0))).verdict is Verdict.INCONCLUSIVE
    # NaN feasible values fail closed
    assert _verdict(_claim(lambda p: Bounds(feasible=[float("nan")], proven_lower=1.0))).verdict \
        is Verdict.INCONCLUSIVE


def test_numpy_numbers_still_accepted():
    res = _verdict(_claim(lambda p: {"value": np.float64(1.0), "lower_bound": np.array(1.0)}))
    assert res.verdict is Verdict.VERIFIED
