"""Rigorous (ball-arithmetic) bracket for `solve ufm-regression` (docs/rigorous.md, "Regression";
solvers/rigorous/regression.py).

Independent reference: the optimum computed here with mpmath at 50 significant digits (mp.dps = 50) from the
targets themselves: the centred targets formed in mpmath from the exact doubles, their singular values by
``mpmath.svd_r``, and the closed form of docs/ufm_general.md ("Regression"),
f* = (1/(2N)) sum_j min(s_j, N lam)^2 + lam sum_j max(s_j - N lam, 0), lam = sqrt(lw lh) in mpmath. Nothing of
solvers.ufm_general or solvers.rigorous.regression is used for it.
"""

import json

import numpy as np
import pytest

flint = pytest.importorskip("flint")
mpmath = pytest.importorskip("mpmath")
hyp = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from proofs_check import rigorous as PR  # noqa: E402
from proofs_check.claims.ufm import check_regression  # noqa: E402
from proofs_check.cli import main  # noqa: E402
from solvers import rigorous as R  # noqa: E402
from solvers.rigorous import regression as RR  # noqa: E402
from theory._validate import InputError  # noqa: E402

#: The brief's bound on the bracket width, relative to the optimum.
WIDTH_RTOL = 1e-8
#: Absolute part, for an optimum that is exactly 0 (N = 1): far below 1e-8 of any other optimum drawn here.
WIDTH_ATOL_PER_Y2 = 1e-30
#: The mpmath reference is accurate to ~1e-48 relative at 50 digits; containment is checked with this slack.
REF_SLACK = mpmath.mpf(10) ** -40


def _ref_optimum(Y, lw, lh):
    """f* at 50 digits, independently of the code under test (module docstring)."""
    with mpmath.workdps(50):
        N, m = Y.shape
        A = [[mpmath.mpf(float(x)) for x in row] for row in Y]
        mean = [mpmath.fsum(A[i][j] for i in range(N)) / N for j in range(m)]
        C = mpmath.matrix([[A[i][j] - mean[j] for j in range(m)] for i in range(N)])
        s = mpmath.svd_r(C, compute_uv=False)
        lam = mpmath.sqrt(mpmath.mpf(lw) * mpmath.mpf(lh))
        c = N * lam
        s = [s[i] for i in range(len(s))]
        return (mpmath.fsum(min(x, c) ** 2 for x in s) / (2 * N) + lam * mpmath.fsum(max(x - c, 0) for x in s))


def _targets(N, m, rank, scale_exp, offset, seed):
    rng = np.random.default_rng(seed)
    if rank is None or rank >= min(N, m):
        Y = rng.standard_normal((N, m))
    else:  # rank-deficient (before rounding to doubles): product of thin factors
        Y = rng.standard_normal((N, rank)) @ rng.standard_normal((rank, m))
    return Y * 10.0 ** scale_exp + offset


def _assert_bracket(rb, Y, lw, lh, *, need_upper=True):
    f = _ref_optimum(Y, lw, lh)
    with mpmath.workdps(50):
        lo = mpmath.mpf(rb.lower_bound)
        assert lo <= f + REF_SLACK * abs(f), (float(lo), float(f))
        if not need_upper:
            return f
        assert rb.upper is not None, rb.details
        up = mpmath.mpf(rb.upper_bound)
        assert f - REF_SLACK * abs(f) <= up, (float(up), float(f))
        atol = WIDTH_ATOL_PER_Y2 * (1 + float(np.sum(Y * Y)))
        assert up - lo <= WIDTH_RTOL * f + atol, (float(lo), float(up), float(f))
    return f


LAMS = st.one_of(st.sampled_from([1e-12, 1e-9, 1e-6]),  # tiny lambda: every singular value thresholded
                 st.floats(1e-6, 1e2).map(float))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(N=st.integers(1, 9), m=st.integers(1, 6), rank=st.one_of(st.none(), st.integers(1, 3)),
       lw=LAMS, lh=LAMS, scale_exp=st.integers(-3, 3), offset=st.sampled_from([0.0, 3.0, -1e3]),
       seed=st.integers(0, 2 ** 31 - 1))
def test_bracket_contains_the_mpmath_optimum_and_is_narrow(N, m, rank, lw, lh, scale_exp, offset, seed):
    Y = _targets(N, m, rank, scale_exp, offset, seed)
    rb = RR.regression_from_targets(Y, lw, lh, d=m)
    _assert_bracket(rb, Y, lw, lh)


@pytest.mark.parametrize("N,m,lw,lh", [
    (6, 2, 1e-2, 1e-2),     # the family's reference instance shape
    (40, 3, 1e-12, 1e-12),  # smallest lambda the family accepts
    (5, 12, 1e-3, 1e-2),    # N < m: Gram on the N side
    (8, 3, 10.0, 10.0),     # N lam above every singular value: Z* = 0
    (1, 3, 1e-2, 1e-2),     # N = 1 (the family itself refuses it): f* = 0
])
def test_fixed_instances(N, m, lw, lh):
    Y = _targets(N, m, None, 0, 0.5, 7)
    rb = RR.regression_from_targets(Y, lw, lh, d=m)
    _assert_bracket(rb, Y, lw, lh)


def test_rank_deficient_targets_with_tiny_lambda():
    Y = _targets(12, 5, 2, 1, 2.0, 11)
    rb = RR.regression_from_targets(Y, 1e-10, 1e-10, d=5)
    _assert_bracket(rb, Y, 1e-10, 1e-10)


def test_d_below_candidate_rank_gives_lower_bound_only():
    Y = _targets(10, 4, None, 0, 0.0, 3)
    rb = RR.regression_from_targets(Y, 1e-4, 1e-4, d=2)
    assert rb.upper is None and "upper_note" in rb.details
    _assert_bracket(rb, Y, 1e-4, 1e-4, need_upper=False)


def test_family_refuses_a_single_sample():
    with pytest.raises(InputError):
        check_regression(np.ones((1, 3)), 3, 1e-2, 1e-2)


def test_smaller_side_above_120_is_unsupported():
    Y = np.zeros((121, 121))
    with pytest.raises(R.Unsupported, match="121"):
        RR.regression_from_targets(Y, 1e-2, 1e-2, d=121)


# ---- given dual points: weak duality and the rejection of infeasible ones -------------------------------

@settings(max_examples=25, deadline=None)
@given(N=st.integers(2, 8), m=st.integers(1, 5), lw=LAMS, lh=LAMS, amp=st.floats(1e-4, 1e2),
       seed=st.integers(0, 2 ** 31 - 1))
def test_any_projected_dual_point_gives_a_valid_lower_bound(N, m, lw, lh, amp, seed):
    """A random dual point (repaired by projection and scaling) must never give a bound above the optimum."""
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal((N, m))
    V = amp * rng.standard_normal((m, N))
    rb = RR.regression_from_targets(Y, lw, lh, d=m, dual=V)
    _assert_bracket(rb, Y, lw, lh, need_upper=False)


def _closed_form_dual(Y, lw, lh):
    V, _, _ = RR.float_dual_and_candidate(Y, lw, lh)
    return V


def test_forced_scale_too_large_is_rejected():
    Y = _targets(7, 3, None, 0, 0.0, 5)
    V = _closed_form_dual(Y, 1e-2, 1e-2)
    with pytest.raises(R.NotCertified, match="forced scale"):
        RR.regression_from_targets(Y, 1e-2, 1e-2, d=3, dual=1.01 * V, scale=1.0)
    with pytest.raises(R.NotCertified, match="forced scale"):
        RR.regression_from_targets(Y, 1e-2, 1e-2, d=3, dual=V, scale=1.0 + 1e-6)  # t > 1 is not a dual scaling
    # control: the same dual point with a scale that is feasible passes
    rb = RR.regression_from_targets(Y, 1e-2, 1e-2, d=3, dual=1.01 * V, scale=0.99)
    _assert_bracket(rb, Y, 1e-2, 1e-2, need_upper=False)


def test_broken_bias_constraint_is_rejected_without_projection():
    Y = _targets(6, 2, None, 0, 0.0, 9)
    V = _closed_form_dual(Y, 1e-2, 1e-2)
    bad = V + 1e-3  # rows no longer sum to 0
    with pytest.raises(R.NotCertified, match="bias constraint"):
        RR.regression_from_targets(Y, 1e-2, 1e-2, d=2, dual=bad, project=False)
    # the float closed form's own point has row sums ~1e-17, not exactly 0: also rejected without projection
    if np.any(V.sum(axis=1) != 0):
        with pytest.raises(R.NotCertified):
            RR.regression_from_targets(Y, 1e-2, 1e-2, d=2, dual=V, project=False)
    # with projection the broken point is repaired and gives a valid bound
    rb = RR.regression_from_targets(Y, 1e-2, 1e-2, d=2, dual=bad)
    _assert_bracket(rb, Y, 1e-2, 1e-2, need_upper=False)
    # control: a point whose rows sum to exactly 0 passes without projection
    ok = np.zeros_like(V)
    ok[:, 0], ok[:, 1] = 0.003, -0.003
    rb = RR.regression_from_targets(Y, 1e-2, 1e-2, d=2, dual=ok, project=False)
    _assert_bracket(rb, Y, 1e-2, 1e-2, need_upper=False)


# ---- the recipe through proofs_check.rigorous.apply ---------------------------------------------------

YREG = np.array([[1.0, 0.5], [0.2, -1.0], [-0.7, 0.3], [1.5, 1.1], [-0.4, -0.6], [0.9, -0.2]])


def _claim(out, cid="optimal-value"):
    return next(c for c in out["claims"] if c["id"] == cid)


@pytest.mark.parametrize("lw,lh", [(1e-2, 1e-2), (5e-2, 2e-2), (0.3, 0.3)])
def test_apply_verifies_the_optimum_and_refutes_a_claim_off_by_1e6(monkeypatch, lw, lh):
    monkeypatch.setitem(PR.RECIPES, "ufm-regression", RR.recipe)
    f = float(_ref_optimum(YREG, lw, lh))
    good = PR.apply(check_regression(YREG, 2, lw, lh, claimed_value=f).to_dict())
    rig = good["certificate"]["rigorous"]
    assert rig["lower"] is not None and rig["upper"] is not None, rig
    assert _claim(good)["verdict"] == "VERIFIED" and _claim(good)["rigorous"] is True
    assert good["rigorous"] is True
    for factor in (1 + 1e-6, 1 - 1e-6):
        out = PR.apply(check_regression(YREG, 2, lw, lh, claimed_value=f * factor).to_dict())
        c = _claim(out)
        assert c["verdict"] == "REFUTED" and "ball arithmetic" in c["reason"], c
        assert out["verdict"] == "REFUTED"


def test_recipe_reads_the_targets_file_and_checks_its_hash(monkeypatch, tmp_path):
    monkeypatch.setitem(PR.RECIPES, "ufm-regression", RR.recipe)
    monkeypatch.setattr(RR, "INLINE_TARGETS_MAX", 4)  # force the file route
    Y = _targets(9, 3, None, 0, 0.0, 21)
    path = tmp_path / "y.npy"
    np.save(path, Y)
    rep = check_regression(Y, 3, 1e-2, 1e-2, targets_path=str(path)).to_dict()
    assert "targets" not in rep["instance"] and rep["instance"]["targets_path"] == str(path)
    out = PR.apply(rep)
    rig = out["certificate"]["rigorous"]
    assert rig["lower"] is not None, rig
    f = _ref_optimum(Y, 1e-2, 1e-2)
    with mpmath.workdps(50):
        assert mpmath.mpf(rig["lower"][0]) <= f <= mpmath.mpf(rig["upper"][1])
    # the file changed after the report: the recipe refuses (unsupported), the float verdicts stand
    Y2 = Y.copy()
    Y2[0, 0] += 1e-9
    np.save(path, Y2)
    out = PR.apply(rep)
    rig = out["certificate"]["rigorous"]
    assert rig["lower"] is None and rig["status"] == "unsupported" and "sha256" in rig["reason"]
    assert _claim(out)["rigorous"] is False


def test_inline_targets_tampered_are_refused(monkeypatch):
    monkeypatch.setitem(PR.RECIPES, "ufm-regression", RR.recipe)
    rep = check_regression(YREG, 2, 1e-2, 1e-2).to_dict()
    rep["instance"]["targets"][0][0] = 1.5
    with pytest.raises(R.Unsupported, match="sha256"):
        RR.recipe(rep, 128)


def test_cli_report_round_trips_through_json(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(PR.RECIPES, "ufm-regression", RR.recipe)
    Y = _targets(11, 3, None, 0, 1.0, 4)
    path = tmp_path / "y.npy"
    np.save(path, Y)
    rc = main(["solve", "ufm-regression", "--targets", str(path), "-d", "3", "--lambda-w", "1e-2",
               "--lambda-h", "2e-2", "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 0, rep
    out = PR.apply(rep)
    rig = out["certificate"]["rigorous"]
    f = _ref_optimum(Y, 1e-2, 2e-2)
    with mpmath.workdps(50):
        assert mpmath.mpf(rig["lower"][0]) <= f <= mpmath.mpf(rig["upper"][1])
        assert mpmath.mpf(rig["upper"][1]) - mpmath.mpf(rig["lower"][0]) <= WIDTH_RTOL * f
    assert _claim(out)["rigorous"] is True


@pytest.mark.slow
def test_large_tall_targets():
    """N = 3000, m = 120 (the largest smaller side): float closed form inside the bracket, width <= 1e-8."""
    Y = _targets(3000, 120, None, 0, 0.0, 2)
    rb = RR.regression_from_targets(Y, 1e-3, 1e-3, d=120)
    from solvers.ufm_general import regression_closed_form

    f = regression_closed_form(Y, 1e-3, 1e-3)["value"]  # float64 (no 50-digit SVD at this size)
    assert rb.upper_bound - rb.lower_bound <= WIDTH_RTOL * f
    assert rb.lower_bound - 1e-12 * f <= f <= rb.upper_bound + 1e-12 * f
