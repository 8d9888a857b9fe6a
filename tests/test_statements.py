"""Typed statements (proofs_check/statements.py): one judge for float and exact brackets.

- the same statement judged on a float bracket and on an exact bracket holding the same numbers (doubles, or
  Arb balls around them) gives the same verdict;
- a battery of false statements about real instances is never VERIFIED, judged in floats or with --rigorous,
  and the two agree wherever both decide;
- issue 26: the label-smoothing bracket of `solve ufm --rigorous` contains the optimum of the exact instance
  (the doubles the CLI parsed), computed independently with mpmath at 50 digits.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from proofs_check import statements as st
from proofs_check.core import Verdict, lower_bound_claim, min_below, optimum_matches, point_statement, upper_bound_claim

flint = pytest.importorskip("flint")

finite = hs.floats(min_value=-10.0, max_value=10.0, allow_nan=False, allow_infinity=False)
tols = hs.floats(min_value=0.0, max_value=1.0, allow_nan=False, allow_infinity=False)
maybe = hs.one_of(hs.none(), finite)


def _statements(v, tol):
    return [st.ValueEquals(v, tol), st.CertifiedOptimum(v, tol), st.AtLeast(v, tol), st.AtMost(v, tol),
            st.MinBelow(v, tol)]


@given(v=finite, tol=tols, lo=maybe, hi=maybe)
def test_float_and_exact_brackets_on_the_same_numbers_agree(v, tol, lo, hi):
    for s in _statements(v, tol):
        vf = s.judge(st.FloatBracket(lo, hi))[0]
        ve = s.judge(st.ExactBracket(lo, hi))[0]
        # an Arb ball of radius 0 around the same doubles: the same numbers again
        vb = s.judge(st.ExactBracket(None if lo is None else flint.arb(lo), None if hi is None else flint.arb(hi)))[0]
        assert vf is ve is vb, (s, lo, hi)


@given(v=finite, tol=tols, lo=finite, w=hs.floats(min_value=0.0, max_value=1.0))
def test_a_wider_bracket_never_decides_differently(v, tol, lo, w):
    """Widening the bracket (a float allowance, or a ball's radius) can turn a decision into INCONCLUSIVE, never
    into the opposite verdict."""
    hi = lo + w
    for s in _statements(v, tol):
        tight = s.judge(st.ExactBracket(lo, hi))[0]
        wide = s.judge(st.FloatBracket(lo, hi, allowance=0.25))[0]
        ball = s.judge(st.ExactBracket(flint.arb(lo, 0.25), flint.arb(hi, 0.25)))[0]
        for x in (wide, ball):
            assert x is tight or x is Verdict.INCONCLUSIVE, (s, lo, hi, tight, x)


def test_non_finite_numbers_never_pass():
    nan, inf = float("nan"), float("inf")
    for s in _statements(nan, 1e-9) + _statements(1.0, nan) + _statements(1.0, -1.0):
        assert s.judge(st.ExactBracket(1.0, 1.0))[0] is Verdict.INCONCLUSIVE
    for s in _statements(1.0, 1e-9):
        for b in (st.FloatBracket(nan, nan), st.FloatBracket(-inf, inf), st.FloatBracket(1.0, 1.0, allowance=nan)):
            assert s.judge(b)[0] is not Verdict.VERIFIED, (s, b)


def test_builders_are_thin_constructors_and_keep_the_statement():
    c = optimum_matches("v", 1.0, attained=1.0, lower_bound=1.0 - 1e-12, tol=1e-9)
    assert c.verdict is Verdict.VERIFIED and c.statement == st.ValueEquals(1.0, 1e-9)
    assert c.to_dict()["evidence"]["statement"] == {"type": "ValueEquals", "predicted": 1.0, "tol": 1e-9}
    assert st.from_dict(c.to_dict()["evidence"]["statement"]) == c.statement
    assert lower_bound_claim("lb", 2.0, proven_lower=1.0, feasible_value=1.5, tol=1e-9).verdict is Verdict.REFUTED
    assert upper_bound_claim("ub", 0.5, feasible_value=1.5, proven_lower=1.0, tol=1e-9).verdict is Verdict.REFUTED
    assert min_below("mb", 1.0, feasible_value=1.5, proven_lower=1.0, tol=1e-9).verdict is Verdict.REFUTED
    p = point_statement("pt", 0.1, 0.05, radius=0.01, lipschitz=2.0)
    assert p.verdict is Verdict.REFUTED and p.statement.about == "point"
    assert st.from_dict({"type": "nope"}) is None and st.from_dict(None) is None


def test_to_fraction_reads_ball_ends_exactly():
    b = flint.arb(1, 2.0 ** -10)
    assert st.to_fraction(b, "lower") <= 1 - st.to_fraction(2.0 ** -10) + st.to_fraction(2.0 ** -60)
    assert st.to_fraction(b, "upper") >= 1 + st.to_fraction(2.0 ** -10) - st.to_fraction(2.0 ** -60)
    assert st.to_fraction(float("inf")) is None and st.to_fraction(True) is None


# ---- false statements about real instances, with and without --rigorous ------------------------------------

def _false_battery(value, lower, upper, tol):
    """Checks of false statements about an optimum ``value`` (its float bracket [lower, upper])."""
    off = 1e-6 * abs(value)
    mk = [
        lambda v: optimum_matches("value-high", v + off, attained=upper, lower_bound=lower, tol=tol),
        lambda v: optimum_matches("value-low", v - off, attained=upper, lower_bound=lower, tol=tol),
        lambda v: lower_bound_claim("at-least-above", v + off, proven_lower=lower, feasible_value=upper, tol=tol),
        lambda v: upper_bound_claim("at-most-below", v - off, feasible_value=upper, proven_lower=lower, tol=tol),
        lambda v: min_below("below-the-optimum", v - off, feasible_value=upper, proven_lower=lower, tol=tol),
    ]
    return [f(value) for f in mk]


def _ufm_case():
    from proofs_check.claims import ufm as CU
    from theory import ufm as TU

    inst = TU.UFMInstance("ce", 4, 3, 4, 5e-3, 5e-3)
    rep = CU.check_instance(inst, method="closed-form")
    cert = rep.certificate
    return "ufm-ce", inst.to_dict(), rep.predicted["value"], cert["lower_bound"], cert["upper"]


def _scl_case():
    from proofs_check.claims import scl as CS
    from theory import scl as TS

    inst = TS.SCLInstance((5, 3, 2), 0.5, 3, True)
    rep = CS.check_instance(inst)
    v = next(c for c in rep.claims if c.name == "optimal-value").evidence
    return "scl", inst.to_dict(), v["predicted"], v["lower_bound"], v["attained"]


def _ls_case():
    """Label smoothing, imbalanced counts (the any-loss engine): judged on the live candidate of the check."""
    from proofs_check.claims import ufm as CU
    from solvers import losses as L
    from solvers import ufm_general as SG

    p = SG.classification(L.make_loss("ls", 3, smoothing=0.1), [4, 3, 2], 3, 5e-3, 5e-3)
    rep = CU.check_general(p, starts=1, minority_threshold=None)
    assert rep.live.get("problem") is p
    v = next(c for c in rep.claims if c.name == "optimal-value").evidence
    return "ufm", p.to_dict(), v["attained"], v["lower_bound"], v["attained"], rep.live


@pytest.mark.parametrize("case", [_ufm_case, _scl_case, _ls_case])
def test_false_statements_are_never_verified_float_or_rigorous(case):
    from proofs_check.core import RunContext
    from proofs_check.rigorous import judge_checks

    family, instance, value, lower, upper, *live = case()
    live = live[0] if live else None
    tol = 1e-9 * abs(value)
    plain = _false_battery(value, lower, upper, tol)
    rig = judge_checks(family, instance, _false_battery(value, lower, upper, tol), RunContext(rigorous=True), live=live)
    assert len(rig) == len(plain)
    for p, r in zip(plain, rig):
        assert p.verdict is not Verdict.VERIFIED, p
        assert r.verdict is not Verdict.VERIFIED, r
        assert r.rigorous is False and "rigorous_lower" in r.evidence, r  # judged on the proven bracket
        if Verdict.INCONCLUSIVE not in (p.verdict, r.verdict):
            assert p.verdict is r.verdict, (p, r)
    # the true statement is VERIFIED both ways
    true = optimum_matches("value", value, attained=upper, lower_bound=lower, tol=tol)
    assert true.verdict is Verdict.VERIFIED
    assert judge_checks(family, instance, [true], RunContext(rigorous=True), live=live)[0].rigorous is True


# ---- issue 26: exact inputs ----------------------------------------------------------------------------------

def _ls_optimum_mpmath(eps: float, K: int, n: int, lw: float, lh: float):
    """Balanced label-smoothing UFM optimum (torch convention) of the exact instance at 50 digits: the doubles
    as given, q_true = 1 - eps + eps/K exactly (docs/ufm_general.md, 'Losses'; written out independently)."""
    import mpmath as mp

    with mp.workdps(50):
        e, a_w, a_h = mp.mpf(eps), mp.mpf(lw), mp.mpf(lh)
        q_true = 1 - e + e / K
        s = mp.sqrt(n) * mp.sqrt(a_w * a_h)
        a = (1 - q_true) + (K - 1) * s
        c = mp.log((1 - a) * (K - 1) / a)
        return -mp.log(1 - a) + a * c


def test_label_smoothing_bracket_contains_the_exact_optimum():
    """`solve ufm --loss ls --smoothing 0.1 -k 4 -n 3 -d 4 --lambda-w 5e-3 --lambda-h 5e-3 --rigorous`: with
    the float targets 0.925 / 0.025 (which sum to 1 + 5e-17) the proven upper end was 8e-17 below the optimum;
    targets in exact rationals of the parsed double put it inside."""
    import mpmath as mp

    argv = ["solve", "ufm", "--loss", "ls", "--smoothing", "0.1", "-k", "4", "-n", "3", "-d", "4", "--lambda-w",
            "5e-3", "--lambda-h", "5e-3", "--rigorous", "--json"]
    res = subprocess.run([sys.executable, "-m", "proofs_check.cli", *argv], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    rig = out["certificate"]["rigorous"]
    ref = _ls_optimum_mpmath(0.1, 4, 3, 5e-3, 5e-3)
    with mp.workdps(50):
        assert mp.mpf(rig["lower"][0]) <= ref <= mp.mpf(rig["upper"][1]), (rig["lower"], rig["upper"], ref)
    assert "exact" in rig["inputs"] and "double" in rig["inputs"]


@pytest.mark.parametrize("eps,K,conv", [(0.1, 4, "torch"), (0.3, 3, "others"), (1e-3, 7, "torch")])
def test_ball_form_targets_are_exact_and_sum_to_one(eps, K, conv):
    from fractions import Fraction

    from solvers import losses as L
    from solvers import rigorous as R

    f = R.ball_form(L.CrossEntropy(K, eps, conv))
    assert f.softmax and f.q_true + (K - 1) * f.q_other == 1
    e = Fraction(eps)
    assert f.q_other == (e / K if conv == "torch" else e / (K - 1))
    assert not math.isclose(float(f.q_true) - float(f.q_other), 0.0)


def test_a_loss_without_ball_form_says_so_by_name():
    import numpy as np

    from solvers import losses as L
    from solvers import rigorous as R

    user = L.UserLoss("my-loss", lambda U, y: (np.zeros(U.shape[1]), np.zeros_like(U)), check=False)
    with pytest.raises(R.Unsupported, match="my-loss.*UserLoss.*no ball form"):
        R.ball_form(user)


def test_run_rigorous_bounds_the_checks_own_candidate(monkeypatch):
    """`run --rigorous` on a live `solve ufm` report: the recipe bounds the candidate the check holds
    (SolveReport.live); solving again would fail here."""
    from proofs_check.claims import ufm as CU
    from proofs_check.core import RunContext
    from proofs_check.rigorous import judge_report
    from solvers import losses as L
    from solvers import ufm_general as SG

    p = SG.classification(L.make_loss("ls", 3, smoothing=0.1), [4, 3, 2], 3, 5e-3, 5e-3)
    rep = CU.check_general(p, starts=1, minority_threshold=None)

    def no_solve(*a, **k):
        raise AssertionError("second solve")

    monkeypatch.setattr(SG, "solve_grouped", no_solve)
    monkeypatch.setattr(SG, "solve_factored", no_solve)
    out = judge_report(rep, RunContext(rigorous=True))
    val = next(c for c in out.claims if c.name == "optimal-value")
    assert val.rigorous is True and out.certificate["rigorous"]["lower"], out.certificate["rigorous"]


@pytest.mark.parametrize("s", [st.EveryMinimiser("unique"), st.EveryMinimiser("geometry", "zero"),
                               st.EveryMinimiser("bias-one-over-k")])
def test_every_minimiser_round_trips_and_never_decides_on_a_bracket(s):
    assert st.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert s.about != st.OPTIMUM  # not re-judged on the value bracket
    for b in (st.FloatBracket(0.0, 0.0), st.ExactBracket(1.0, 1.0), st.FloatBracket(None, None)):
        assert s.judge(b)[0] is Verdict.INCONCLUSIVE


@pytest.mark.parametrize("d", [{"type": "EveryMinimiser", "property": "optimal"},
                               {"type": "EveryMinimiser", "property": "unique", "geometry": "zero"},
                               {"type": "EveryMinimiser", "property": "geometry"},
                               {"type": "EveryMinimiser"}])
def test_every_minimiser_with_an_unknown_or_malformed_property_is_not_a_statement(d):
    assert st.from_dict(d) is None
