"""The Python API fails closed: nothing to compare, strings and booleans, vacuous tolerances.

Reproductions: a UserClaim comparing two empty arrays was VERIFIED; "1.0" and True were coerced to
numbers and VERIFIED; rtol = 1e308 was accepted (it makes any statement pass).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import sympy

from proofs_check.core import Verdict, close
from proofs_check.user import UserClaim
from theory._validate import InputError


@pytest.mark.parametrize("predicted,measured", [([], []), (np.zeros(0), np.zeros(0)), ("1.0", 1.0), (1.0, "1.0"),
                                                (True, 1.0), (1.0, np.bool_(True)), ([1.0, 2.0], ["1.0", 2.0]),
                                                (np.array([True, False]), [1.0, 0.0]), (None, 1.0), (1.0, {"a": 1})])
def test_close_never_passes_what_is_not_a_number(predicted, measured):
    assert close("c", predicted, measured, rtol=1e-9, atol=1e-9).verdict is Verdict.INCONCLUSIVE


@pytest.mark.parametrize("exact", [sympy.Rational(1, 3), Fraction(1, 3), sympy.Float(1) / 3])
def test_exact_numbers_still_compare(exact):
    assert close("c", exact, 1 / 3, rtol=1e-12).verdict is Verdict.VERIFIED
    assert close("c", exact, 1 / 3 + 1e-6, rtol=1e-12).verdict is Verdict.REFUTED


def _claim(**kw):
    base = dict(id="mine.values", statement="the measured values equal the prediction", source="my notes",
                params={}, predict=lambda p: np.zeros(0), solve=lambda p: np.zeros(0), kind="equals", rtol=1e-9)
    base.update(kw)
    return UserClaim(**base)


def test_user_claim_with_nothing_to_compare_is_not_verified():
    res = _claim().check_instance({})
    assert res.verdict is Verdict.INCONCLUSIVE


def test_user_claim_with_strings_or_booleans_is_not_verified():
    assert _claim(predict=lambda p: "2", solve=lambda p: 2.0).check_instance({}).verdict is Verdict.INCONCLUSIVE
    assert _claim(predict=lambda p: 1.0, solve=lambda p: True).check_instance({}).verdict is Verdict.INCONCLUSIVE


@pytest.mark.parametrize("rtol", [1.0, 1e308])
def test_vacuous_relative_tolerance_is_refused(rtol):
    with pytest.raises(InputError, match="rtol must be < 1"):
        _claim(rtol=rtol)


def test_false_user_claim_is_still_refuted():
    res = _claim(predict=lambda p: [1.0, 2.0], solve=lambda p: [1.0, 2.5]).check_instance({})
    assert res.verdict is Verdict.REFUTED


def test_squared_error_refuses_non_finite_targets():
    from solvers.losses import SquaredError

    with pytest.raises(InputError, match="targets T must contain only finite numbers"):
        SquaredError(np.array([[np.nan, 1.0], [0.0, 1.0]]))
    with pytest.raises(InputError, match="targets T must contain only finite numbers"):
        SquaredError(np.array([[np.inf, 1.0], [0.0, 1.0]]))


@pytest.mark.parametrize("budget", [float("nan"), -1.0, 0.0])
def test_factored_solver_budget_must_be_a_positive_number(budget):
    from solvers import ufm as U
    from theory import ufm as T

    with pytest.raises(InputError, match="time_budget"):
        U.solve_factored(T.UFMInstance("ce", k=3, n=2, d=3, lw=1e-2, lh=1e-2), time_budget=budget)
