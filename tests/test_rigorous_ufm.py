"""Rigorous (ball-arithmetic) certificates for the balanced UFM (docs/rigorous.md).

Expected values come from a 50-digit mpmath evaluation of the closed forms of the spec (docs/ufm.md,
"Closed forms"), written here independently of theory.ufm and solvers.rigorous.
"""

import io
import json
import math
from contextlib import redirect_stderr, redirect_stdout
from fractions import Fraction

import pytest

flint = pytest.importorskip("flint")
mpmath = pytest.importorskip("mpmath")

from hypothesis import given, strategies as st  # noqa: E402

from proofs_check import rigorous as PR  # noqa: E402
from proofs_check.claims import ufm as C  # noqa: E402
from solvers import rigorous as R  # noqa: E402
from solvers import ufm as S  # noqa: E402
from theory import ufm as T  # noqa: E402

mp = mpmath.mp


def mp_optimum(loss, k, n, lw, lh):
    """f* of the balanced UFM from the spec's closed forms, 50 digits (the doubles lw, lh taken exactly)."""
    with mpmath.workdps(50):
        lw, lh = mpmath.mpf(lw), mpmath.mpf(lh)
        if loss == "ce":
            s = mpmath.sqrt(n * lw * lh)
            if k * s >= 1:
                return +mpmath.log(k)
            return -mpmath.log(1 - (k - 1) * s) + (k - 1) * s * mpmath.log(1 / s - (k - 1))
        lam = mpmath.sqrt(lw * lh)
        N = n * k
        z = max(mpmath.sqrt(n) - N * lam, mpmath.mpf(0))
        return (k - 1) * ((mpmath.sqrt(n) - z) ** 2 / (2 * N) + lam * z)


def contains(pair, x_mp):
    lo, hi = pair
    with mpmath.workdps(50):
        return mpmath.mpf(lo) <= x_mp <= mpmath.mpf(hi)


INSTANCES = [
    ("ce", 3, 2, 0.01, 0.01, 0.0), ("ce", 5, 2, 1e-3, 1e-3, 0.0), ("ce", 4, 2, 0.2, 0.2, 0.0),  # zero phase
    ("ce", 4, 3, 1e-2, 2e-2, 0.5), ("ce", 7, 3, 1e-7, 3e-6, 0.0), ("ce", 10, 1, 1e-12, 1e-12, 0.0),
    ("ce", 3, 2, 1e3, 1e-2, 0.0),
    ("mse", 3, 2, 0.01, 0.01, 0.0), ("mse", 3, 4, 0.05, 0.05, 0.0), ("mse", 6, 3, 1e-7, 1e-7, 0.0),
    ("mse", 5, 2, 0.3, 0.4, 0.0),  # zero phase
]


@pytest.mark.parametrize("loss,k,n,lw,lh,lb", INSTANCES)
def test_bracket_contains_the_50_digit_optimum_and_is_narrow(loss, k, n, lw, lh, lb):
    rb = R.ufm_from_instance(loss, k, n, lw, lh, lb)
    d = rb.to_dict()
    f = mp_optimum(loss, k, n, lw, lh)
    assert contains(d["lower"], f) or d["lower"][1] <= f, (d, f)  # lower ball's points are <= f*
    assert d["lower"][0] <= f <= d["upper"][1]
    # the optimum lies in [lower bound, feasible value] and the bracket is narrower than 1e-8 relative
    assert d["upper"][1] - d["lower"][0] <= 1e-8 * float(f)
    assert d["precision_bits"] == R.PRECISION_BITS
    assert set(("lower", "upper", "method", "precision_bits")) <= set(d)


def test_large_k_closed_form_without_dense_matrices():
    rb = R.ufm_from_instance("ce", 1000, 5, 1e-5, 1e-5)
    f = mp_optimum("ce", 1000, 5, 1e-5, 1e-5)
    d = rb.to_dict()
    assert d["lower"][0] <= f <= d["upper"][1]
    assert d["upper"][1] - d["lower"][0] <= 1e-12 * float(f)


def test_dual_point_is_the_float_pipelines_exactly():
    """The rigorous recipe converts the float certificate's own dual point (solvers.ufm)."""
    for loss, k, n, lw, lh in [("ce", 5, 3, 1e-3, 2e-3), ("mse", 4, 2, 1e-2, 1e-2), ("ce", 3, 2, 0.3, 0.3)]:
        inst = T.UFMInstance(loss, k, n, k, lw, lh)
        D = S.closed_form_direction(inst)
        rb = R.ufm_from_instance(loss, k, n, lw, lh)
        assert rb.details["dual_offdiag"] == float(D[0, 1])


@given(off=st.floats(1e-6, 0.4), margin=st.floats(0.0, 20.0), lam=st.floats(1e-4, 0.5),
       k=st.integers(2, 50), n=st.integers(1, 6))
def test_any_dual_point_gives_a_valid_bound_and_any_candidate_a_feasible_value(off, margin, lam, k, n):
    """Weak duality, against the 50-digit optimum: far from the optimum the bounds are loose, never wrong."""
    for loss in ("ce", "mse"):
        o = min(off, 0.9 / (k - 1)) if loss == "ce" else off
        try:
            rb = R.ufm_closed_form(loss, k, n, lam, lam, 0.0, margin=margin, dual_offdiag=o)
        except R.NotCertified:
            continue
        f = mp_optimum(loss, k, n, lam, lam)
        with mpmath.workdps(50):
            # every point of the lower ball is <= f*, every point of the upper ball >= f* (up to the 50-digit
            # evaluation of f*: the balls are exact to ~1e-37)
            lo_hi = _mpf(R.endpoints(rb.lower)[1])
            up_lo = _mpf(R.endpoints(rb.upper)[0])
            assert lo_hi <= f + mpmath.mpf(10) ** -30 * abs(f), (loss, rb.to_dict(), f)
            assert up_lo >= f - mpmath.mpf(10) ** -30 * abs(f), (loss, rb.to_dict(), f)


def _mpf(q):
    return mpmath.mpf(q.numerator) / q.denominator


# --- a dual point that is not feasible is rejected, never turned into a bound ------------------------

def test_dual_point_above_the_spectral_ball_is_rejected():
    k, n, lw, lh = 4, 3, 1e-2, 2e-2
    s = math.sqrt(n * lw * lh)
    R.ufm_closed_form("ce", k, n, lw, lh, 0.0, margin=1.0, dual_offdiag=s * (1 - 1e-9), scale=1.0)  # feasible
    with pytest.raises(R.NotCertified):
        R.ufm_closed_form("ce", k, n, lw, lh, 0.0, margin=1.0, dual_offdiag=s * (1 + 1e-9), scale=1.0)
    with pytest.raises(R.NotCertified):
        R.ufm_closed_form("mse", k, n, lw, lh, 0.0, margin=1.0, dual_offdiag=0.5, scale=1.0)


def test_dual_point_off_the_equality_constraint_is_rejected():
    k, n, lw, lh = 4, 3, 1e-2, 2e-2
    s = 2.0 ** -6  # dyadic: a = -k s and a + s are exact doubles
    # rows of V = a I + b 11^T sum to a + k b: one ulp off zero is infeasible for the free bias
    a = -k * s
    R.ufm_closed_form("ce", k, n, lw, lh, 0.0, margin=1.0, dual_offdiag=s, dual_diag=a + s, project=False)
    with pytest.raises(R.NotCertified):
        R.ufm_closed_form("ce", k, n, lw, lh, 0.0, margin=1.0, dual_offdiag=s,
                          dual_diag=math.nextafter(a + s, 0.0), project=False)
    with pytest.raises(R.NotCertified):
        R.ufm_closed_form("mse", k, n, lw, lh, 0.0, margin=1.0, dual_offdiag=s, dual_diag=a, project=False)


def test_dual_point_outside_the_simplex_is_rejected():
    # large lambda: t = 1; off-label entries 0.6 > 1/(k-1) make the label entry negative
    with pytest.raises(R.NotCertified):
        R.ufm_closed_form("ce", 3, 2, 10.0, 10.0, 0.0, margin=0.0, dual_offdiag=0.6)
    with pytest.raises(R.NotCertified):  # negative off-label entries
        R.ufm_closed_form("ce", 3, 2, 10.0, 10.0, 0.0, margin=0.0, dual_offdiag=-0.1)


def test_outward_rounding_contains_the_ball():
    from flint import arb

    with R._Precision(128):
        x = arb(1) / 3
        lo, hi = R.outward(x)
        assert Fraction(lo) < Fraction(1, 3) < Fraction(hi)
        assert R.outward(arb(0.1)) == [0.1, 0.1]
        y = arb(2).sqrt()
        lo, hi = R.outward(y)
        assert Fraction(lo) ** 2 < 2 < Fraction(hi) ** 2
        assert math.nextafter(lo, math.inf) >= hi or hi - lo < 1e-15


# --- verdicts under --rigorous ------------------------------------------------------------------------

def _report(loss="ce", k=4, n=3, d=5, lw=1e-2, lh=2e-2, predict=None, lb=0.0):
    inst = T.UFMInstance(loss, k, n, d, lw, lh, lb)
    kw = {"predict": predict} if predict else {}
    return C.check_instance(inst, method="closed-form", **kw).to_dict()


@pytest.mark.parametrize("loss", ["ce", "mse"])
def test_true_optimum_is_rigorously_verified(loss):
    out = PR.apply(_report(loss))
    val = next(c for c in out["claims"] if c["id"] == "optimal-value")
    assert val["verdict"] == "VERIFIED" and val["rigorous"] is True
    assert out["rigorous"] is True and out["verdict"] == "VERIFIED"
    rig = out["certificate"]["rigorous"]
    assert rig["lower"][0] <= val["evidence"]["predicted"] <= rig["upper"][1]
    assert rig["precision_bits"] == 128 and rig["method"]


@pytest.mark.parametrize("loss", ["ce", "mse"])
@pytest.mark.parametrize("sign", [1, -1])
def test_false_optimum_off_by_1e6_relative_is_refuted(loss, sign):
    out = PR.apply(_report(loss, predict=lambda i: T.optimum(i).value * (1 + sign * 1e-6)))
    val = next(c for c in out["claims"] if c["id"] == "optimal-value")
    assert val["verdict"] == "REFUTED" and val["rigorous"] is False
    assert out["verdict"] == "REFUTED" and out["rigorous"] is False
    assert "ball arithmetic" in val["reason"]


def test_plain_verified_does_not_survive_a_bracket_that_misses_it(monkeypatch):
    """A recipe whose bracket is too wide makes the value INCONCLUSIVE; one that excludes it, REFUTED."""
    from flint import arb

    base = _report("ce")
    f = base["predicted"]["value"]

    def wide(out, prec):
        return R.RigorousBound(arb(f) - 1e-3, arb(f) + 1e-3, "test", prec)

    def below(out, prec):
        return R.RigorousBound(arb(f) * (1 + 1e-6), arb(f) * (1 + 2e-6), "test", prec)

    monkeypatch.setitem(PR.RECIPES, "ufm-ce", wide)
    out = PR.apply(base)
    val = next(c for c in out["claims"] if c["id"] == "optimal-value")
    assert val["verdict"] == "INCONCLUSIVE" and out["verdict"] == "INCONCLUSIVE" and out["rigorous"] is False
    monkeypatch.setitem(PR.RECIPES, "ufm-ce", below)
    out = PR.apply(base)
    assert out["verdict"] == "REFUTED"
    assert base["verdict"] == "VERIFIED"  # apply does not modify its input


def test_not_certified_keeps_float_verdicts_and_says_so(monkeypatch):
    def bad(out, prec):
        raise R.NotCertified("test: dual point infeasible")

    monkeypatch.setitem(PR.RECIPES, "ufm-ce", bad)
    out = PR.apply(_report("ce"))
    assert out["rigorous"] is False
    assert out["certificate"]["rigorous"]["status"] == "not certified"
    assert any("not certified" in d for d in out["diagnostics"])


def test_unsupported_family_is_reported():
    out = PR.apply({"family": "nope", "instance": {}, "certificate": None, "claims": [
        {"id": "optimal-value", "verdict": "VERIFIED", "reason": "x", "independent": True,
         "evidence": {"predicted": 1.0, "tolerance": 1e-9,
                      "statement": {"type": "ValueEquals", "predicted": 1.0, "tol": 1e-9}}}], "diagnostics": []})
    assert out["certificate"]["rigorous"]["status"] == "unsupported"
    assert out["verdict"] == "VERIFIED" and out["rigorous"] is False


def test_low_dimension_gives_no_feasible_value_and_keeps_not_applicable():
    out = PR.apply(_report("ce", k=5, d=2))
    rig = out["certificate"]["rigorous"]
    assert rig["upper"] is None and rig["lower"][0] > 0
    assert next(c for c in out["claims"] if c["id"] == "optimal-value")["verdict"] == "NOT_APPLICABLE"


def test_exact_bracket_rules_of_the_value_statements():
    """The exact judging functions are gone: the statements' own judge on an ExactBracket decides."""
    from proofs_check.statements import AtLeast, ExactBracket, ValueEquals

    def value(c, tol, lo, up):
        return ValueEquals(c, tol).judge(ExactBracket(lo, up))[0].value

    assert value(1.0, 1e-9, 1.0, 1.0) == "VERIFIED"
    assert value(1.0 + 2e-9, 1e-9, 1.0, 1.0) == "REFUTED"
    assert value(1.0 - 2e-9, 1e-9, 1.0, 1.0) == "REFUTED"
    assert value(1.0, 1e-9, 1.0 - 1e-6, 1.0 + 1e-6) == "INCONCLUSIVE"
    assert value(1.0, 1e-9, 1.0, None) == "INCONCLUSIVE"
    assert value(float("nan"), 1e-9, 1.0, 1.0) == "INCONCLUSIVE"
    assert AtLeast(1.0, 1e-9).judge(ExactBracket(1.0, 1.0))[0].value == "VERIFIED"
    assert AtLeast(1.0, 1e-9).judge(ExactBracket(0.5, 0.9))[0].value == "REFUTED"
    assert AtLeast(1.0, 1e-9).judge(ExactBracket(0.5, 1.1))[0].value == "INCONCLUSIVE"


# --- command line -------------------------------------------------------------------------------------

def _main(argv):
    from proofs_check.cli import main

    o, e = io.StringIO(), io.StringIO()
    with redirect_stdout(o), redirect_stderr(e):
        rc = main(argv)
    return rc, o.getvalue(), e.getvalue()


ARGS = ["solve", "ufm-ce", "-k", "4", "-n", "3", "-d", "5", "--lambda-w", "1e-2", "--lambda-h", "2e-2",
        "--method", "closed-form"]


def test_cli_rigorous_json():
    rc, out, err = _main(ARGS + ["--json", "--rigorous"])
    assert rc == 0, err
    d = json.loads(out)
    rig = d["certificate"]["rigorous"]
    assert rig["lower"][0] <= rig["upper"][1] and rig["precision_bits"] == 128
    assert d["rigorous"] is True and d["verdict"] == "VERIFIED"
    assert next(c for c in d["claims"] if c["id"] == "optimal-value")["rigorous"] is True
    rc, out, err = _main(ARGS + ["--rigorous"])
    assert rc == 0 and "rigorous (128-bit balls" in out


def test_cli_without_flint_says_how_to_install_and_exits_2_before_any_work(monkeypatch):
    import importlib.util

    from proofs_check.families import ufm as F

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flint" else real(name, *a))

    def boom(*a, **k):
        raise AssertionError("work started")

    monkeypatch.setattr(C, "check_instance", boom)
    rc, out, err = _main(ARGS + ["--rigorous"])
    assert rc == 2
    assert err.count("\n") == 1 and 'pip install "ncproofs[rigorous]"' in err
    assert F is not None


def test_every_solve_subcommand_has_the_flag():
    from proofs_check.cli import build_parser

    _, smap, _, _ = build_parser()
    parser = build_parser()[0]
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    ssub = next(a for a in sub.choices["solve"]._actions if a.__class__.__name__ == "_SubParsersAction")
    assert set(smap) <= set(ssub.choices)
    for name in smap:
        opts = {o for a in ssub.choices[name]._actions for o in a.option_strings}
        assert "--rigorous" in opts, name


def test_family_without_recipe_keeps_its_verdict_under_the_flag():
    # the block-NTK dynamics have no dual certificate, so no rigorous recipe
    rc, out, err = _main(["solve", "ntk", "--init", "lazy", "--init-scale", "10", "--json", "--rigorous"])
    d = json.loads(out)
    assert d["certificate"]["rigorous"]["status"] == "unsupported" and d["rigorous"] is False
    assert rc == (1 if d["verdict"] in ("REFUTED", "ERROR") else 0)
