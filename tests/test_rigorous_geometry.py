"""Uniqueness and geometry of the balanced UFM closed form proven in ball arithmetic (docs/rigorous.md,
"Uniqueness and geometry (UFM)"; docs/ufm.md "Uniqueness").

Expected numbers come from mpmath at 50 digits on the exact doubles of the instance (the margin c* =
log(1/s - (k - 1)), MSE m = 1 - k s, the zero-phase margin 1 - 1/(k s)) or from exact rationals, never from the
code under test."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest

pytest.importorskip("flint")
mpmath = pytest.importorskip("mpmath")

from proofs_check import cli  # noqa: E402
from proofs_check import rigorous as PR  # noqa: E402
from proofs_check.claims import ufm as CU  # noqa: E402
from proofs_check.core import RunContext, Verdict  # noqa: E402
from solvers import losses as L  # noqa: E402
from solvers import rigorous as R  # noqa: E402
from solvers import ufm_general as SG  # noqa: E402
from theory import ufm as TU  # noqa: E402

POINT = {"ce": ("minimiser-unique", "geometry-simplex-etf", "collapse", "self-duality", "constant-bias"),
         "mse": ("minimiser-unique", "geometry-simplex-etf", "collapse", "bias-one-over-k")}


def _apply(loss, k, n, lw, lh, lb=0.0, d=None, **kw):
    rep = CU.check_instance(TU.UFMInstance(loss, k, n, d or k, lw, lh, lb), method="closed-form", **kw)
    return PR.apply(rep.to_dict())


def _claims(out):
    return {c["id"]: c for c in out["claims"]}


def _s(n, lw, lh):
    with mpmath.workdps(50):
        return mpmath.sqrt(n * mpmath.mpf(lw) * mpmath.mpf(lh))


def _inside(x, pair):
    return mpmath.mpf(pair[0]) <= x <= mpmath.mpf(pair[1])


# --------------------------------------------------------------------------------------------------------
# collapse phase: every statement about the minimiser proven, with the margin in the evidence
# --------------------------------------------------------------------------------------------------------

def _near(k, n):
    """lw = lh with s = sqrt(n) lam = (1 - 1e-6)/k: 1e-6 inside the collapse phase, outside the float band 1e-9."""
    lam = (1 - 1e-6) / (k * math.sqrt(n))
    return lam, lam


CASES = [(loss, k, regime) for loss in ("ce", "mse") for k in (2, 3, 10, 1000) for regime in ("tiny", "near")]


@pytest.mark.parametrize("loss,k,regime", [pytest.param(*c, marks=pytest.mark.slow) if c[1] == 1000 and c[2] == "near"
                                           else c for c in CASES])
def test_collapse_phase_statements_are_proven_in_balls(loss, k, regime):
    n = 2
    lw, lh = (1e-10, 1e-10) if regime == "tiny" else _near(k, n)
    out = _apply(loss, k, n, lw, lh)
    cl = _claims(out)
    assert out["verdict"] == "VERIFIED" and out["rigorous"] is True
    assert cl["optimal-value"]["rigorous"] is True
    s = _s(n, lw, lh)
    with mpmath.workdps(50):
        m_exact = mpmath.log(1 / s - (k - 1)) if loss == "ce" else 1 - k * s
    assert m_exact > 0
    for cid in POINT[loss]:
        c = cl[cid]
        assert c["verdict"] == "VERIFIED" and c["rigorous"] is True, cid
        g = c["evidence"]["rigorous_geometry"]
        assert g["proven"] is True and g["phase"] == "collapse"
        assert _inside(m_exact, g["margin"]), (cid, g["margin"], m_exact)
        # exact margin delta = 1 (the dual vanishes off the face); proven >= 1 - 2^-52
        assert 1 - 2.0 ** -52 <= g["delta_lower"] <= 1.0
    u = cl["minimiser-unique"]["evidence"]["rigorous_geometry"]["uniqueness"]
    assert _inside(mpmath.mpf(1), u["face_singular_value"]) and u["face_dimension"] == k - 1
    assert u["largest_off_face"][1] < 1e-20  # exactly 0 (the rows of the gradient sum to 0); ball radius only
    assert u["rho0_squared"][0] > 1
    assert set(out["certificate"]["rigorous"]["geometry"]["proven"]) == set(POINT[loss])


def test_bias_penalty_ce_statements_are_proven():
    out = _apply("ce", 4, 3, 5e-3, 2e-2, lb=1e-2, d=6)
    cl = _claims(out)
    assert out["rigorous"] is True
    assert cl["constant-bias"]["rigorous"] is True
    assert "bias penalty" in cl["constant-bias"]["evidence"]["rigorous_geometry"]["how"]


# --------------------------------------------------------------------------------------------------------
# zero phase, the exact threshold and just beyond it
# --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("loss,k,n,lam", [("ce", 4, 2, 0.2), ("mse", 3, 2, 0.3), ("ce", 10, 1, 0.5)])
def test_zero_phase_statements_are_proven_with_the_exact_margin(loss, k, n, lam):
    out = _apply(loss, k, n, lam, lam)
    cl = _claims(out)
    assert out["rigorous"] is True
    with mpmath.workdps(50):
        delta = 1 - 1 / (k * _s(n, lam, lam))
    assert delta > 0
    for cid in ("minimiser-unique", "geometry-zero", "constant-bias" if loss == "ce" else "bias-one-over-k"):
        g = cl[cid]["evidence"]["rigorous_geometry"]
        assert cl[cid]["rigorous"] is True and g["phase"] == "zero"
        assert _inside(delta, g["delta"])
        assert 0 < g["delta_lower"] <= delta


@pytest.mark.parametrize("loss,k,n,lam", [("ce", 2, 1, 0.5), ("ce", 4, 1, 0.25), ("mse", 2, 1, 0.5)])
def test_exact_threshold_zero_is_unique_in_rationals_and_in_balls(loss, k, n, lam):
    assert Fraction(k * k * n) * Fraction(lam) ** 2 == 1  # s = 1/k exactly (rationals)
    out = _apply(loss, k, n, lam, lam)
    cl = _claims(out)
    # float64 puts rho0 in its band; the float pipeline decides the side in exact rationals (rho0 = 1: Z* = 0 is
    # the unique minimiser, docs/ufm.md "Exact phase at the threshold"), and the ball layer proves the same
    for cid in ("minimiser-unique", "geometry-zero"):
        assert cl[cid]["verdict"] == "VERIFIED" and cl[cid]["rigorous"] is True, (cid, cl[cid]["reason"])
    assert "exact phase" in cl["minimiser-unique"]["reason"]
    assert out["verdict"] == "VERIFIED" and out["rigorous"] is True
    # the ball layer's own proof: face 1^perp with singular value exactly 1, M = 0
    u = R.ufm_balanced_uniqueness(loss, k, n, lam, lam)
    assert u["phase"] == "threshold" and u["face_dimension"] == k - 1 and u["geometry"] == "zero"
    assert u["delta_lower"] == 1.0


def test_just_beyond_the_threshold_the_exact_phase_decides_and_balls_give_the_margin():
    k, n = 5, 2
    lam = (1 + 1e-12) / (k * math.sqrt(n))  # zero phase, inside the float band 1e-9
    out = _apply("ce", k, n, lam, lam)
    cl = _claims(out)
    assert cl["geometry-zero"]["verdict"] == "VERIFIED" and cl["geometry-zero"]["rigorous"] is True
    g = cl["minimiser-unique"]["evidence"]["rigorous_geometry"]
    with mpmath.workdps(50):
        delta = 1 - 1 / (k * _s(n, lam, lam))
    assert 0 < delta < 1e-11
    assert g["phase"] == "zero" and 0.4 * delta <= g["delta_lower"] <= delta  # a tiny but proven margin
    assert cl["minimiser-unique"]["verdict"] == "VERIFIED" and cl["minimiser-unique"]["rigorous"] is True
    assert out["rigorous"] is True


def test_just_before_the_threshold_inside_the_band_nothing_about_the_minimiser_is_verified():
    k, n = 5, 2
    lam = (1 - 1e-12) / (k * math.sqrt(n))  # collapse phase (a simplex ETF of margin ~1e-12), inside the band
    out = _apply("ce", k, n, lam, lam)
    cl = _claims(out)
    point = [c for c in cl.values() if c["id"].startswith(("minimiser-unique", "geometry-", "constant-bias"))]
    assert point and all(c["verdict"] == "INCONCLUSIVE" and c["rigorous"] is False for c in point)


def test_float_phase_that_disagrees_with_the_exact_phase_is_not_marked():
    # docs/ufm.md: lw = lh = 0.16666666666666666 (just below 1/6), k = 3, n = 4: the exact minimiser is a tiny
    # simplex ETF (s < 1/3 in rationals) while the float closed form is Z = 0
    lw = 0.16666666666666666
    assert Fraction(9 * 4) * Fraction(lw) ** 2 < 1
    out = _apply("ce", 3, 4, lw, lw)
    assert out["predicted"]["trivial"] is True
    for cid in ("minimiser-unique", "geometry-zero", "constant-bias"):
        c = _claims(out)[cid]
        assert c["rigorous"] is False
        assert "collapse phase" in c["evidence"]["rigorous_geometry"]["reason"]
    assert R.ufm_balanced_uniqueness("ce", 3, 4, lw, lw)["phase"] == "collapse"


# --------------------------------------------------------------------------------------------------------
# dual points that violate the conditions are rejected
# --------------------------------------------------------------------------------------------------------

def _sc(k, n, lam, a_times_s, row_sum_sigma, *, face="perp", margin=1.0):
    """class_sym_strict_complementarity for V = a I + b 11^T with a = -a_times_s * k s and the row sum chosen
    so that the singular value on 1_k is row_sum_sigma (all in balls)."""
    with R._Precision(R.PRECISION_BITS) as flint:
        arb = flint.arb
        lamb = R.exact(lam) * R.exact(lam)
        lamb = lamb.sqrt()
        N = k * n
        s = arb(n).sqrt() * lamb
        a = -a_times_s * k * s
        rs = arb(row_sum_sigma) * N * lamb / arb(n).sqrt()
        b = (rs - a) / k
        return R.class_sym_strict_complementarity(R.ClassSym(a, b, k), n, lamb, face=face,
                                                  margin=None if margin is None else arb(margin))


def test_the_exact_dual_passes_the_checker():
    out = _sc(4, 3, 1e-3, 1, 0.0)
    assert out["delta_lower"] > 0.999 and out["face_dimension"] == 3


@pytest.mark.parametrize("sigma_one", [1.0, 1.5])
def test_dual_violating_strict_complementarity_is_rejected(sigma_one):
    # margin delta = 1 - sigma_one forced to 0 or below
    with pytest.raises(R.NotCertified, match="strict complementarity"):
        _sc(4, 3, 1e-3, 1, sigma_one)


def test_dual_with_a_face_value_other_than_one_is_rejected():
    with pytest.raises(R.NotCertified, match="not 1"):
        _sc(4, 3, 1e-3, 1 + 1e-9, 0.0)


def test_dual_not_aligned_with_the_candidate_or_negative_margin_is_rejected():
    with pytest.raises(R.NotCertified, match="aligned"):
        _sc(4, 3, 1e-3, -1, 0.0)
    with pytest.raises(R.NotCertified, match="PSD"):
        _sc(4, 3, 1e-3, 1, 0.0, margin=-1e-3)


def test_zero_phase_perturbed_dual_is_rejected():
    k, n, lam = 4, 2, 0.2
    # the exact zero-phase dual is V = -J_k: diagonal -(1 - 1/k), off-diagonal 1/k
    assert R.ufm_balanced_uniqueness("ce", k, n, lam, lam, dual=(-(1 - 1 / k), 1 / k))["delta_lower"] > 0.1
    # a row sum r adds r/(k s) to the singular value on 1_k: r = 2 pushes it above 1
    with pytest.raises(R.NotCertified, match="not certainly < 1"):
        R.ufm_balanced_uniqueness("ce", k, n, lam, lam, dual=(-(1 - 1 / k) + 2.0, 1 / k))
    # a larger diagonal part pushes the singular value on 1^perp above 1 (rho0 = 0.88 -> 1.2)
    with pytest.raises(R.NotCertified, match="not certainly < 1"):
        R.ufm_balanced_uniqueness("ce", k, n, lam, lam, dual=(-1.36 + 0.25, 0.25))


def test_low_dimension_in_the_collapse_phase_is_unsupported():
    with pytest.raises(R.Unsupported, match="d = 2"):
        R.ufm_balanced_uniqueness("ce", 4, 2, 1e-3, 1e-3, d=2)


# --------------------------------------------------------------------------------------------------------
# only after a rigorously VERIFIED optimum; verdicts never change
# --------------------------------------------------------------------------------------------------------

def test_no_rigorous_optimum_no_rigorous_geometry():
    def predict(inst):
        return TU.optimum(inst).value * (1 + 1e-6)

    out = _apply("ce", 3, 2, 1e-2, 1e-2, predict=predict)
    cl = _claims(out)
    assert cl["optimal-value"]["verdict"] == "REFUTED"
    for cid in POINT["ce"]:
        assert cl[cid]["verdict"] == "VERIFIED" and cl[cid]["rigorous"] is False  # float verdict stands
        assert "not rigorously VERIFIED" in cl[cid]["evidence"]["rigorous_geometry"]["reason"]


def test_unsupported_value_recipe_leaves_geometry_not_rigorous(monkeypatch):
    def unsupported(out, prec):
        raise R.Unsupported("test: no value recipe")

    monkeypatch.setitem(PR.RECIPES, "ufm-ce", unsupported)
    out = _apply("ce", 3, 2, 1e-2, 1e-2)
    for cid in POINT["ce"]:
        assert _claims(out)[cid]["rigorous"] is False
    assert out["rigorous"] is False


def test_failing_geometry_recipe_keeps_float_verdicts(monkeypatch):
    def failing(out, prec):
        raise R.NotCertified("test: condition fails")

    monkeypatch.setitem(PR.GEOMETRY_RECIPES, "ufm-ce", failing)
    out = _apply("ce", 3, 2, 1e-2, 1e-2)
    cl = _claims(out)
    assert cl["optimal-value"]["rigorous"] is True
    for cid in POINT["ce"]:
        assert cl[cid]["verdict"] == "VERIFIED" and cl[cid]["rigorous"] is False
        assert "test: condition fails" in cl[cid]["evidence"]["rigorous_geometry"]["reason"]
    assert out["verdict"] == "VERIFIED" and out["rigorous"] is False


def test_judge_report_sets_check_rigorous_on_point_statements():
    rep = CU.check_instance(TU.UFMInstance("mse", 3, 2, 3, 1e-2, 1e-2), method="closed-form")
    judged = PR.judge_report(rep, RunContext(rigorous=True))
    by = {c.name: c for c in judged.claims}
    for cid in POINT["mse"]:
        assert by[cid].rigorous is True
    assert by["optimal-value"].rigorous is True
    # without --rigorous nothing is marked
    assert all(c.rigorous is None for c in PR.judge_report(rep, RunContext()).claims)


# --------------------------------------------------------------------------------------------------------
# claims and the CLI
# --------------------------------------------------------------------------------------------------------

def test_false_geometry_claim_is_refuted_and_never_rigorous():
    res = CU.geometry_claim("ce", expected="orthogonal-frame").run(RunContext(rigorous=True))
    assert res.verdict is Verdict.REFUTED and res.rigorous is False
    geo = [ch for ch in res.checks if ch.name.endswith("geometry-orthogonal-frame")]
    assert geo and all(ch.verdict is Verdict.REFUTED and ch.rigorous is False for ch in geo)
    assert all("simplex-etf" in ch.evidence["rigorous_geometry"]["reason"] for ch in geo)


def test_run_cli_collapse_etf_claim_is_rigorous(tmp_path):
    out = tmp_path / "r.json"
    code = cli.main(["run", "--quiet", "--only", "ufm-ce-collapse-etf", "--rigorous", "--report", "", "--json",
                     str(out)])
    rep = json.loads(out.read_text())
    assert code == 0 and rep["rigorous_claims"] == ["ufm.ce.collapse-etf"]
    (c,) = rep["claims"]
    assert c["verdict"] == "VERIFIED" and c["rigorous"] is True
    for suffix in POINT["ce"]:
        chs = [ch for ch in c["checks"] if ch["name"].endswith(": " + suffix)]
        assert chs and all(ch["rigorous"] is True for ch in chs), suffix
        assert all(ch["evidence"]["rigorous_geometry"]["delta_lower"] > 0.999 for ch in chs)


# --------------------------------------------------------------------------------------------------------
# solve ufm (any loss): balanced closed forms proven; imbalanced counts keep their float evidence
# --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,kw,lam", [("ce", {}, 1e-2), ("ls", {"smoothing": 0.1, "convention": "torch"}, 1e-2),
                                         ("ls", {"smoothing": 0.2, "convention": "others"}, 1e-3),
                                         ("weighted-ce", {"weights": [2.0] * 4}, 1e-2), ("mse", {}, 1e-2),
                                         ("ce", {}, 0.3)])
def test_general_balanced_closed_forms_are_proven(name, kw, lam):
    K, n = 4, 3
    p = SG.classification(L.make_loss(name, K, **kw), [n] * K, K, lam, lam)
    out = PR.apply(CU.check_general(p, starts=1, minority_threshold=None).to_dict())
    cl = _claims(out)
    geo = [c for c in cl if c.startswith("geometry-")]
    assert len(geo) == 1 and out["rigorous"] is True
    for cid in ("minimiser-unique", geo[0]):
        assert cl[cid]["verdict"] == "VERIFIED" and cl[cid]["rigorous"] is True
    g = cl["minimiser-unique"]["evidence"]["rigorous_geometry"]
    # the exact margin from the targets as rationals: c* = log((1 - a)(K - 1)/a), a = (1 - q_y) + (K - 1) s / w
    eps = Fraction(kw.get("smoothing", 0.0))
    q_o = eps / K if kw.get("convention", "torch") == "torch" else eps / (K - 1)
    w = kw.get("weights", [1.0])[0]
    with mpmath.workdps(50):
        s = _s(n, lam, lam)
        if name == "mse":
            m = 1 - K * s
        else:
            a = (K - 1) * mpmath.mpf(q_o.numerator) / q_o.denominator + (K - 1) * s / w
            m = mpmath.log((1 - a) * (K - 1) / a) if a < mpmath.mpf(K - 1) / K else mpmath.mpf(0)
    assert (g["phase"] == "collapse") == (m > 0)
    assert _inside(m, g["margin"])


def test_general_imbalanced_statements_keep_float_evidence():
    p = SG.classification(L.make_loss("ce", 3), [5, 5, 2], 3, 1e-2, 1e-2)
    plain = CU.check_general(p, starts=1, minority_threshold=None).to_dict()
    out = PR.apply(plain)
    cl, fl = _claims(out), _claims(plain)
    assert cl["optimal-value"]["rigorous"] is True
    for cid in ("minimiser-unique", "minority-geometry"):
        # the float verdict (a proven radius decides it since the imbalanced geometry certificate) is kept
        assert cl[cid]["verdict"] == fl[cid]["verdict"] and cl[cid]["rigorous"] is False
        assert "no exact minimiser" in cl[cid]["evidence"]["rigorous_geometry"]["reason"]


# --------------------------------------------------------------------------------------------------------
# the statements about every minimiser are found by their statement (EveryMinimiser), never by their id
# --------------------------------------------------------------------------------------------------------

def _relabelled(rep, **changes):
    import dataclasses

    return dataclasses.replace(rep, claims=[changes.get(c.name, c) for c in rep.claims])


def test_point_statement_under_another_id_is_recognised_and_a_lookalike_id_is_not():
    import dataclasses

    rep = CU.check_instance(TU.UFMInstance("ce", 3, 2, 3, 1e-2, 1e-2), method="closed-form")
    by = {c.name: c for c in rep.claims}
    renamed = dataclasses.replace(by["geometry-simplex-etf"], name="class means form a simplex ETF")
    # a check whose id looks like a statement about every minimiser but whose statement says nothing of the kind
    lookalike = dataclasses.replace(by["collapse"], name="geometry-simplex-etf", statement=None)
    out = PR.apply(_relabelled(rep, **{"geometry-simplex-etf": renamed, "collapse": lookalike}))
    cl = _claims(out)
    g = cl["class means form a simplex ETF"]
    assert g["verdict"] == "VERIFIED" and g["rigorous"] is True and g["evidence"]["rigorous_geometry"]["proven"] is True
    fake = cl["geometry-simplex-etf"]
    assert "rigorous_geometry" not in fake["evidence"] and fake["rigorous"] is not True
    assert "geometry-simplex-etf" not in out["certificate"]["rigorous"]["geometry"]["judged"]


def test_other_geometry_statement_is_not_proven_by_the_unique_minimiser():
    import dataclasses

    from proofs_check.statements import EveryMinimiser

    rep = CU.check_instance(TU.UFMInstance("ce", 3, 2, 3, 1e-2, 1e-2), method="closed-form")
    by = {c.name: c for c in rep.claims}
    wrong = dataclasses.replace(by["geometry-simplex-etf"], statement=EveryMinimiser("geometry", "orthogonal-frame"))
    cl = _claims(PR.apply(_relabelled(rep, **{"geometry-simplex-etf": wrong})))
    c = cl["geometry-simplex-etf"]
    assert c["verdict"] == "VERIFIED" and c["rigorous"] is False  # the float verdict stands, not proven in balls
    assert "not orthogonal-frame" in c["evidence"]["rigorous_geometry"]["reason"]


def test_saved_report_without_typed_point_statements_is_unsupported_not_proven():
    rep = CU.check_instance(TU.UFMInstance("ce", 3, 2, 3, 1e-2, 1e-2), method="closed-form").to_dict()
    old = json.loads(json.dumps(rep))
    for c in old["claims"]:
        if c["id"] in POINT["ce"]:
            del c["evidence"]["statement"]
    out = PR.apply({**old, "schema_version": "1.1"})
    cl = _claims(out)
    assert cl["optimal-value"]["rigorous"] is True and out["rigorous"] is False
    for cid in POINT["ce"]:
        assert cl[cid]["verdict"] == "VERIFIED" and cl[cid]["rigorous"] is False  # float verdicts stand
        assert cl[cid]["evidence"]["rigorous_geometry"]["reason"].startswith("unsupported: the saved report")
    # the same report in the current schema, statements kept: proven
    new = PR.apply({**json.loads(json.dumps(rep)), "schema_version": "1.2"})
    assert new["rigorous"] is True and all(_claims(new)[cid]["rigorous"] is True for cid in POINT["ce"])
