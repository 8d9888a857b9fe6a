"""The Python API of the any-loss UFM (docs/ufm_general.md): what a caller states through ``check_general`` and the
loss objects is checked before any work, and refused in one InputError naming the parameter.

Before: ``minority_threshold=nan`` VERIFIED "theta = 14.3 > nan"; a misspelt ``geometry_expected`` key was ignored
(the reported values were VERIFIED instead of the statement the caller meant); ``expected_geometry="foo"`` was
REFUTED as if "foo" were a geometry; ``time_budget=0`` or ``-1`` stopped every solve at once and the report said
"d = 2 is below the rank 3 of the convex relaxation's optimum" for K = 3 softmax classes (rank <= K - 1 = 2);
``CrossEntropy(2.7)`` was the two-class loss, ``CrossEntropy(None)`` / ``(1e30)`` / ``smoothing=None`` raised
TypeError / OverflowError / numpy's "Maximum allowed dimension exceeded"; a loss ``None`` failed inside the solve
with an AttributeError."""

from __future__ import annotations

import math

import numpy as np
import pytest

from proofs_check.claims.ufm_general import check_general
from proofs_check.core import Verdict
from solvers import ufm_general as SG
from solvers.losses import CrossEntropy, make_loss
from theory._validate import InputError


def _imbalanced():
    # counts 5,1,1: the two one-sample classes are exchangeable, theta = 1 / (7 lam) = 14.3 with lam = 1e-2
    return SG.classification(make_loss("ce", 3), [5, 1, 1], 2, 1e-2, 1e-2)


@pytest.mark.parametrize("bad", [math.nan, -1.0, 0.0, math.inf, "1", True])
def test_minority_threshold_not_a_positive_number_is_refused(bad):
    with pytest.raises(InputError, match="minority_threshold"):
        check_general(_imbalanced(), starts=1, minority_threshold=bad)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, "5"])
def test_time_budget_not_a_positive_number_is_refused(bad):
    with pytest.raises(InputError, match="time_budget"):
        check_general(_imbalanced(), starts=1, time_budget=bad)
    with pytest.raises(InputError, match="time_budget"):
        SG.solve(_imbalanced(), starts=1, time_budget=bad)


@pytest.mark.parametrize("bad", ["foo", "etf", 3, ""])
def test_expected_geometry_not_a_geometry_class_is_refused(bad):
    p = SG.classification(make_loss("ce", 3), [2, 2, 2], 2, 1e-2, 1e-2)
    with pytest.raises(InputError, match="expected_geometry"):
        check_general(p, starts=1, expected_geometry=bad)


@pytest.mark.parametrize("bad", [{"class_mean_cosine": np.eye(3)}, {"minority_cosine": 0.5},
                                 {"classifier_norm_ratio": math.nan}, {"classifier_norm_ratio": "0.5"},
                                 {"class_mean_cosines": np.eye(2)}, [("classifier_norm_ratio", 1.0)]])
def test_geometry_expected_unknown_key_or_bad_value_is_refused(bad):
    with pytest.raises(InputError, match="geometry_expected"):
        check_general(_imbalanced(), starts=1, geometry_expected=bad)


def test_threshold_and_expectations_still_decide():
    """The options refused above still state what they say when well formed: theta = 14.3 > 1 (no collapse)
    VERIFIED; the same statement with threshold 100 (collapse predicted) REFUTED; a classifier norm ratio 10% off the
    proven interval REFUTED."""
    p = _imbalanced()
    ok = {c.name: c for c in check_general(p, starts=1, minority_threshold=1.0).claims}
    assert ok["minority-collapse-threshold"].verdict is Verdict.VERIFIED
    lo, hi = ok["minority-geometry"].evidence["measures"]["classifier_norm_ratio"]["interval"]
    false = {c.name: c for c in check_general(p, starts=1, minority_threshold=100.0).claims}
    assert false["minority-collapse-threshold"].verdict is Verdict.REFUTED
    off = {c.name: c for c in check_general(p, starts=1, minority_threshold=None,
                                            geometry_expected={"classifier_norm_ratio": 1.1 * hi}).claims}
    assert off["minority-geometry"].verdict is Verdict.REFUTED


@pytest.mark.parametrize("K", [2.7, "3", None, math.inf, 1e30, True, 10**8])
def test_cross_entropy_classes_must_be_an_integer_in_range(K):
    with pytest.raises(InputError, match=r"classes \(K\)"):
        CrossEntropy(K)


@pytest.mark.parametrize("kw", [{"smoothing": None}, {"smoothing": [0.1]}, {"smoothing": "0.1"},
                                {"weights": "abc"}, {"weights": [1.0, 2.0, None]}, {"weights": [1.0, 2.0, 1j]},
                                {"weights": [[1.0, 2.0, 3.0]]}, {"weights": np.ones((1, 3))}])
def test_cross_entropy_smoothing_and_weights_types_are_refused(kw):
    with pytest.raises(InputError, match="smoothing|class weights"):
        CrossEntropy(3, **kw)


def test_cross_entropy_accepts_integral_numbers():
    assert CrossEntropy(3.0).K == 3 and CrossEntropy(np.int64(4), np.float64(0.1)).K == 4
    assert np.array_equal(CrossEntropy(3, weights=np.array([1, 2, 3])).w, [1.0, 2.0, 3.0])


@pytest.mark.parametrize("loss", [None, "ce", 3])
def test_problem_needs_a_loss_object(loss):
    with pytest.raises(InputError, match="loss must be"):
        SG.classification(loss, [2, 2, 2], 2, 1e-2, 1e-2)


@pytest.mark.parametrize("p", [None, {"counts": [2, 2]}, "ufm"])
def test_check_general_needs_a_problem(p):
    with pytest.raises(InputError, match="GeneralUFM"):
        check_general(p)


# ---- the classic engine (docs/ufm.md), the nonnegative-features model and user losses ---------------------------

def _classic():
    from theory import ufm as T

    return T.UFMInstance("ce", 3, 2, 2, 1e-2, 1e-2)


@pytest.mark.parametrize("value", ["0.14833174700197288", None, [0.148], True, np.array([1.0, 2.0])])
def test_check_instance_prediction_must_be_a_real_number(value):
    """Before: "0.148..." (a string) was parsed and judged, None / a list / an array were TypeErrors."""
    from proofs_check.claims.ufm import check_instance

    with pytest.raises(InputError, match=r"predict\(inst\)"):
        check_instance(_classic(), method="closed-form", predict=lambda inst: value)


def test_check_instance_prediction_numbers_are_judged_and_nan_never_verified():
    from proofs_check.claims.ufm import check_instance

    f = 0.14833174700197288  # docs/ufm.md reference value (3, 2, .01, .01)
    for v in (f, np.float64(f), np.array([f])):
        assert check_instance(_classic(), method="closed-form", predict=lambda inst: v).verdict is Verdict.VERIFIED
    assert check_instance(_classic(), method="closed-form", predict=lambda inst: f * (1 + 1e-6)).verdict \
        is Verdict.REFUTED
    assert check_instance(_classic(), method="closed-form", predict=lambda inst: math.nan).verdict \
        is Verdict.INCONCLUSIVE


@pytest.mark.parametrize("kw", [{"inst": None}, {"inst": {"loss": "ce"}}, {"predict": 0.148}])
def test_check_instance_needs_an_instance_and_a_callable(kw):
    from proofs_check.claims.ufm import check_instance

    args = {"inst": _classic(), **kw}
    with pytest.raises(InputError, match="inst must be|predict must be"):
        check_instance(args.pop("inst"), method="closed-form", **args)


@pytest.mark.parametrize("kw", [{"starts": 0}, {"starts": -1}, {"starts": 2.5}, {"seed": -1},
                                {"claimed_value": math.nan}, {"claimed_value": "0.13"}])
def test_check_nonneg_options_are_checked(kw):
    """Before: starts = 0 ran no random start and was VERIFIED; a NaN claimed value was accepted."""
    from proofs_check.claims.ufm_relu import check_nonneg

    p = SG.classification(make_loss("ce", 3), [1, 1, 1], 3, 1e-2, 1e-2)
    with pytest.raises(InputError, match="starts|seed|claimed_value"):
        check_nonneg(p, **kw)
    with pytest.raises(InputError, match="GeneralUFM"):
        check_nonneg(None)


@pytest.mark.parametrize("kw", [{"infimum": "a"}, {"infimum": math.inf}, {"K": 1.5}, {"K": 0}, {"K": "3"}])
def test_user_loss_infimum_and_classes_are_checked(kw):
    from solvers.losses import UserLoss

    with pytest.raises(InputError, match="user loss: (infimum|K)"):
        UserLoss("sq", lambda U, y: ((U * U).sum(axis=0), 2 * U), **{"infimum": 0.0, **kw})
