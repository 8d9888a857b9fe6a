"""``solve --rigorous``: re-derive a report's certificate in ball arithmetic and judge its value claims
(docs/rigorous.md).

:func:`apply` takes the JSON dict of a :class:`proofs_check.core.SolveReport` (``report.to_dict()``),
rebuilds the instance from ``report["instance"]``, recomputes the certificate with the recipes of
:mod:`solvers.rigorous` and returns a new dict with

- ``certificate["rigorous"] = {"lower": [lo, hi], "upper": [lo, hi], "method", "precision_bits", ...}``
  (float pairs rounded outward; the proven lower bound is ``lower[0]``, the proven feasible value
  ``upper[1]``), or ``{"status": "not certified" | "unsupported" | ..., "reason"}``;
- on each value claim (``optimal-value`` and the lower-bound statements) a ``"rigorous"`` flag and
  the rigorous numbers in its evidence; its verdict is decided by the rigorous bracket:
  VERIFIED (rigorous) when [lower, upper] brackets the claimed optimum within the claim's tolerance,
  REFUTED when the bracket proves it false (claimed < lower - tol, or claimed > upper + tol),
  INCONCLUSIVE otherwise (a plain VERIFIED never survives a bracket that does not contain the claim);
- UFM families (:data:`GEOMETRY_RECIPES`): after a rigorously VERIFIED optimum, the statements about every
  minimiser (uniqueness, geometry, collapse, self-duality, bias) get ``"rigorous"`` and
  ``evidence["rigorous_geometry"]`` from the ball-arithmetic uniqueness proof of the balanced closed form
  (:func:`solvers.rigorous.ufm_balanced_uniqueness`); their verdicts are never changed;
- a top-level ``"rigorous": true`` when every judged statement (value claims, and those statements) is
  rigorously VERIFIED, and the verdict and reason recomputed with :func:`proofs_check.core.summarise`.

Without a rigorous bracket (unsupported family, a dual point that fails a ball check) the plain verdicts
keep their meaning, ``"rigorous": false`` says so, and a diagnostic gives the reason.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction

from proofs_check.core import Verdict, fmt, is_finite, summarise


@dataclass
class _Item:
    """What summarise needs from a claim dict."""

    name: str
    verdict: Verdict
    reason: str
    independent: bool = True


class NotSupported(Exception):
    """No rigorous recipe for this family or instance (the plain verdicts stand)."""


# ---------------------------------------------------------------------------------------------------
# Per-family recipes: report dict -> solvers.rigorous.RigorousBound
# ---------------------------------------------------------------------------------------------------

def _ufm(out: dict, prec: int):
    from solvers import rigorous as R
    from theory import ufm as T

    p = out.get("instance") or {}
    inst = T.UFMInstance(p["loss"], p["k"], p["n"], p["d"], p["lw"], p["lh"], p.get("lb", 0.0))
    rb = R.ufm_from_instance(inst.loss, inst.k, inst.n, inst.lw, inst.lh, inst.lb, prec=prec)
    if inst.hypotheses():
        # the lower bound holds at every d; the candidate's value is attained only when d >= k - 1
        rb.upper = None
        rb.details["upper_note"] = "; ".join(inst.hypotheses())
    return rb


def _scl(out: dict, prec: int):
    from solvers import rigorous as R
    from theory import scl as T

    p = out.get("instance") or {}
    T.SCLInstance(tuple(p["counts"]), p["tau"], p["d"], p.get("nonneg", True), p.get("batches"))  # validates
    return R.scl_from_instance(p, prec=prec)


def _feature_collapse(out: dict, prec: int):
    from solvers import rigorous as R

    return R.feature_collapse_from_instance(out.get("instance") or {}, prec=prec)


#: Float candidate for `solve ufm --rigorous`: one start of the family's grouped solver (a choice: only the
#: tightness of the bound depends on it), with a wall-clock budget (s) inside the CLI's 2-minute limit.
UFM_GENERAL_STARTS = 1
UFM_GENERAL_BUDGET_S = 60.0


def ufm_general_problem(inst: dict):
    """Rebuild the ``solvers.ufm_general.GeneralUFM`` of a ``solve ufm`` report from ``report["instance"]``."""
    from solvers import losses as L
    from solvers import ufm_general as SG

    if inst.get("kind") != "classification":
        raise NotSupported(f"no rigorous recipe for kind {inst.get('kind')!r} (classification only)")
    counts = inst.get("counts")
    if not isinstance(counts, list):
        raise NotSupported("the report lists no counts (a report written before they were always kept): the "
                           "instance cannot be rebuilt")
    ld = inst.get("loss") or {}
    name = ld.get("name")
    conv = "others" if str(ld.get("smoothing_convention", "torch")).startswith("others") else "torch"
    weights = ld.get("class_weights")
    key = {"ce": "ce", "ls": "ls", "weighted-ce": "weighted-ce", "weighted-ls": "ls", "mse": "mse"}.get(name)
    if key is None:
        raise NotSupported(f"no rigorous recipe for loss {name!r}")
    loss = L.make_loss(key, len(counts), smoothing=float(ld.get("smoothing", 0.0) or 0.0), convention=conv,
                       weights=weights)
    return SG.classification(loss, counts, inst["d"], inst["lambda_w"], inst["lambda_h"],
                             inst.get("lambda_b", 0.0) or 0.0)


def ufm_general_candidate(p):
    """(layout, grouped point) of the family's float solver: ``solvers.ufm_general.solve_grouped`` on the groups
    of exchangeable classes, or, when there are none (all groups singletons), ``solve_factored`` on the K x K
    class-reduced problem seen as K singleton groups (``SlotLayout(arange(K))``: beta plays no role)."""
    import numpy as np

    from solvers import losses as L
    from solvers import rigorous as R
    from solvers import ufm_general as SG

    layout = SG.class_layout(p)
    m = layout.m if layout is not None else p.K
    if m > R.VERIFIED_MAX:  # checked before the float solve: no work for an instance the recipe refuses
        raise NotSupported(f"{m} groups of exchangeable classes > {R.VERIFIED_MAX} (verified floating-point "
                           f"Cholesky of the reduced m x m form)")
    if layout is None:
        if p.G != p.K:
            raise NotSupported("groups other than one per class have no ball recipe")
        sol = SG.solve_factored(p, rank=min(p.K, p.G), starts=UFM_GENERAL_STARTS, seed=0,
                                time_budget=UFM_GENERAL_BUDGET_S)
        X = SG.clean_candidate(p, sol.variables["X"], sol.variables["b"])
        return L.SlotLayout(np.arange(p.K)), SG.GroupedPoint(np.asarray(X, float), np.zeros(p.K),
                                                             np.asarray(sol.variables["b"], float))
    sol = SG.solve_grouped(p, layout, starts=UFM_GENERAL_STARTS, seed=0, time_budget=UFM_GENERAL_BUDGET_S)
    return layout, SG.clean_grouped(p, sol.variables["point"], layout)


def _ufm_general(out: dict, prec: int):
    from solvers import rigorous as R
    from solvers import ufm_general as SG

    p = ufm_general_problem(out.get("instance") or {})
    layout, pt = ufm_general_candidate(p)
    Zs = SG.slot_logits(p, pt, layout)
    rb = R.ufm_general_grouped(p.loss, p.counts, p.lw, p.lh, p.lb, layout, Zs, prec=prec)
    t0 = time.perf_counter()
    up, rank = R.ufm_general_feasible(p.loss, p.counts, p.lw, p.lh, layout, pt.A, pt.beta, pt.b, lb=p.lb,
                                      prec=prec)
    rb.steps["feasible value"] = time.perf_counter() - t0
    rb.details["candidate_rank_bound"] = rank
    if p.d >= rank:
        rb.upper = up
    else:
        rb.details["upper_note"] = (f"d = {p.d} < {rank} (rank bound of the candidate): its convex value is not "
                                    f"proven attained by a factored point; only the lower bound holds")
    return rb


def _ufm_regression(out: dict, prec: int):
    from solvers import rigorous_regression as RR

    return RR.recipe(out, prec)


RECIPES = {"ufm-ce": _ufm, "ufm-mse": _ufm, "ufm": _ufm_general, "ufm-regression": _ufm_regression, "scl": _scl,
           "feature_collapse": _feature_collapse}

#: Claim ids judged as "the optimum equals the claimed value" (evidence: predicted, tolerance); claims
#: whose evidence has ``claimed_lower_bound`` (theorem-lower-bound, etf-lower-bound) are judged as
#: "min >= claimed".
VALUE_CLAIMS = ("optimal-value",)


# ---------------------------------------------------------------------------------------------------
# Statements about every minimiser (uniqueness, geometry): docs/rigorous.md "Uniqueness and geometry (UFM)"
# ---------------------------------------------------------------------------------------------------

#: Statement ids about every minimiser, per family with a geometry recipe (a trailing "-" is a prefix). After
#: the value bracket they carry ``"rigorous"``: True only when the float verdict is VERIFIED and every
#: ingredient of its proof is proven in ball arithmetic (verdicts are never changed by this).
POINT_STATEMENTS = {
    "ufm-ce": ("minimiser-unique", "geometry-", "collapse", "self-duality", "constant-bias"),
    "ufm-mse": ("minimiser-unique", "geometry-", "collapse", "bias-one-over-k"),
    "ufm": ("minimiser-unique", "geometry-", "minority-geometry"),
}

HOW_BALLS_UNIQUE = ("unique minimiser proven in ball arithmetic: the closed form's dual certificate is strictly "
                    "complementary with an injective face (docs/ufm.md 'Uniqueness'; docs/rigorous.md)")


def _is_point(family: str, c: dict) -> bool:
    if c.get("verdict") == Verdict.NOT_APPLICABLE.value:
        return False
    cid = str(c.get("id", ""))
    return any(cid.startswith(p) if p.endswith("-") else cid == p for p in POINT_STATEMENTS.get(family, ()))


def _balanced_statements(out: dict, u: dict) -> dict:
    """{statement id: (proven, detail)} for the statements of ``out`` about every minimiser, given the proof
    ``u`` of :func:`solvers.rigorous.ufm_balanced_uniqueness` (the closed form is the unique minimiser)."""
    geo = u["geometry"]
    short = {"phase": u["phase"], "margin": u["margin"], "delta": u["delta"], "delta_lower": u["delta_lower"],
             "precision_bits": u["precision_bits"]}
    res = {"minimiser-unique": (True, {**short, "how": HOW_BALLS_UNIQUE, "uniqueness": u})}
    facts = {
        f"geometry-{geo}": ("every minimiser has Z = Z* (unique), whose class-mean Gram is proportional to (Z*^T Z*)^(1/2)"
                            " = m sqrt(n) J_K: a simplex ETF exactly" if geo == "simplex-etf" else
                            "every minimiser has Z = 0, hence W = 0 and H = 0 (lam ||W H||_* = (lw ||W||^2 + lh "
                            "||H||^2)/2 at a minimiser)"),
        "collapse": "Z* = m J_K E is class-constant and unique: h_i = mu_{y_i} at every minimiser",
        "self-duality": "Z* is symmetric PSD in class coordinates (m >= 0), so every balanced factorization has "
                        "mu_c = sqrt(lw/(n lh)) w_c",
        "constant-bias": f"every minimiser's bias is b* + c 1 with b* = 0 ({u['bias']})",
        "bias-one-over-k": "every minimiser's bias is b* = 1/K (MSE: equal gradients give equal logits)",
    }
    for c in out.get("claims") or []:
        cid = str(c.get("id", ""))
        if cid in facts:
            res[cid] = (True, {**short, "how": facts[cid]})
        elif cid.startswith("geometry-") and cid not in res:
            res[cid] = (False, {**short, "reason": f"ball arithmetic: the unique minimiser's class means are {geo}, "
                                                  f"not {cid[len('geometry-'):]}"})
    return res


def _phase_matches(u: dict, collapse_in_report) -> None:
    if collapse_in_report is None:
        raise NotSupported("the report states no phase of its closed form")
    if bool(collapse_in_report) != (u["phase"] == "collapse"):
        raise NotSupported(f"the report's closed form is in the {'collapse' if collapse_in_report else 'zero'} phase, "
                           f"the exact instance in the {u['phase']} phase (rationals): the statements are not about "
                           "the exact minimiser")


def _geo_ufm(out: dict, prec: int) -> dict:
    """``solve ufm-ce`` / ``ufm-mse``: the balanced closed form, proven the unique minimiser in balls."""
    from solvers import rigorous as R

    p = out.get("instance") or {}
    u = R.ufm_balanced_uniqueness(p["loss"], p["k"], p["n"], p["lw"], p["lh"], p.get("lb", 0.0) or 0.0, p["d"],
                                  prec=prec)
    trivial = (out.get("predicted") or {}).get("trivial")
    _phase_matches(u, None if trivial is None else not trivial)
    return _balanced_statements(out, u)


#: Why imbalanced counts (or unequal weights) have no ball-arithmetic uniqueness proof.
NO_EXACT_MINIMISER = ("no exact minimiser is known (imbalanced counts or unequal class weights): the uniqueness "
                      "theorem needs the dual certificate at an exact minimiser, and at the float candidate its "
                      "conditions hold only up to the solver's accuracy (face singular values 1 - O(gap)); without a "
                      "proven radius in the collapse phase (docs/ufm.md 'Radius') evaluating them in balls proves "
                      "nothing, so these statements keep their float evidence")


def _geo_ufm_general(out: dict, prec: int) -> dict:
    """``solve ufm``: balanced counts, equal weights, a softmax loss or MSE, no bias penalty (the report's
    statements are then at the closed form); otherwise NotSupported with the reason."""
    from solvers import rigorous as R

    inst = out.get("instance") or {}
    if inst.get("kind") != "classification":
        raise NotSupported(f"no uniqueness recipe for kind {inst.get('kind')!r}")
    counts = inst.get("counts")
    if not isinstance(counts, list) or not counts:
        raise NotSupported("the report lists no counts: the instance cannot be rebuilt")
    ld = inst.get("loss") or {}
    weights = ld.get("class_weights")
    if len(set(int(c) for c in counts)) != 1 or (weights and len(set(float(w) for w in weights)) != 1):
        raise NotSupported(NO_EXACT_MINIMISER)
    if inst.get("groups", len(counts)) != len(counts):
        raise NotSupported("groups other than one per class")
    if float(inst.get("lambda_b", 0.0) or 0.0) != 0.0:
        raise NotSupported("a bias penalty: the report's statements are not at a closed form")
    name = ld.get("name")
    if name not in R.BALANCED_SOFTMAX_LOSSES + ("mse",):
        raise NotSupported(f"no uniqueness recipe for loss {name!r}")
    conv = "others" if str(ld.get("smoothing_convention", "torch")).startswith("others") else "torch"
    u = R.ufm_balanced_uniqueness(name, len(counts), int(counts[0]), inst["lambda_w"], inst["lambda_h"], 0.0,
                                  inst["d"], smoothing=float(ld.get("smoothing", 0.0) or 0.0), convention=conv,
                                  weight=float(weights[0]) if weights else 1.0, prec=prec)
    geo = (out.get("predicted") or {}).get("geometry")
    _phase_matches(u, None if geo is None else geo == "simplex-etf")
    return _balanced_statements(out, u)


GEOMETRY_RECIPES = {"ufm-ce": _geo_ufm, "ufm-mse": _geo_ufm, "ufm": _geo_ufm_general}


def _judge_point(c: dict, results: dict, why: str | None) -> dict:
    """The claim dict with ``"rigorous"`` and ``evidence["rigorous_geometry"]``; the verdict is unchanged."""
    cid = str(c.get("id", ""))
    if why is not None:
        proven, detail = False, {"reason": why}
    else:
        proven, detail = results.get(cid, (False, {"reason": f"no ball-arithmetic proof of {cid!r}"}))
    ok = bool(proven) and c.get("verdict") == Verdict.VERIFIED.value
    info = {**detail, "proven": ok}
    if proven and not ok:
        info["reason"] = (f"provable in ball arithmetic, but the float verdict {c.get('verdict')} is not upgraded "
                          "(docs/rigorous.md)")
    new = dict(c)
    new["evidence"] = {**(c.get("evidence") or {}), "rigorous_geometry": info}
    new["rigorous"] = ok
    if ok:
        new["reason"] = f"{c.get('reason', '')} [proven in ball arithmetic: margin delta >= {detail.get('delta_lower')!r}]"
    return new


# ---------------------------------------------------------------------------------------------------
# Judging value claims against a rigorous bracket (exact rational comparisons)
# ---------------------------------------------------------------------------------------------------

def judge_value(claimed, tol, lower: float, upper: float | None) -> tuple[Verdict, str]:
    """"The optimum equals ``claimed``" against a proven bracket lower <= f* <= upper (doubles, already
    rounded outward). Comparisons are exact (rationals): REFUTED when claimed < lower - tol or claimed >
    upper + tol; VERIFIED when upper - lower <= tol and claimed lies in [lower - tol, upper + tol];
    INCONCLUSIVE otherwise (also when a number is missing or not finite)."""
    if not is_finite(claimed, tol, lower) or float(tol) < 0:
        return Verdict.INCONCLUSIVE, "no finite claimed value, tolerance or rigorous lower bound"
    c, t, lo = Fraction(float(claimed)), Fraction(float(tol)), Fraction(float(lower))
    if c < lo - t:
        return Verdict.REFUTED, (f"rigorous lower bound {fmt(lower, 17)} > claimed optimum {fmt(claimed, 17)} + "
                                 f"tolerance {fmt(tol, 3)} (ball arithmetic)")
    if not is_finite(upper):
        return Verdict.INCONCLUSIVE, "no rigorous feasible value (upper end of the bracket)"
    hi = Fraction(float(upper))
    if c > hi + t:
        return Verdict.REFUTED, (f"a feasible point has value <= {fmt(upper, 17)} (ball arithmetic) < claimed "
                                 f"optimum {fmt(claimed, 17)} - tolerance {fmt(tol, 3)}")
    if hi - lo > t:
        return Verdict.INCONCLUSIVE, (f"rigorous bracket [{fmt(lower, 17)}, {fmt(upper, 17)}] is wider than the "
                                      f"tolerance {fmt(tol, 3)}")
    return Verdict.VERIFIED, (f"optimum {fmt(claimed, 17)} proven in ball arithmetic: bracket [{fmt(lower, 17)}, "
                              f"{fmt(upper, 17)}] within tolerance {fmt(tol, 3)}")


def judge_lower_bound(claimed, tol, lower: float, upper: float | None) -> tuple[Verdict, str]:
    """"min >= claimed" against the bracket: VERIFIED when lower >= claimed - tol; REFUTED when a feasible
    value upper < claimed - tol; INCONCLUSIVE otherwise."""
    if not is_finite(claimed, tol, lower) or float(tol) < 0:
        return Verdict.INCONCLUSIVE, "no finite claimed bound, tolerance or rigorous lower bound"
    c, t, lo = Fraction(float(claimed)), Fraction(float(tol)), Fraction(float(lower))
    if is_finite(upper) and Fraction(float(upper)) < c - t:
        return Verdict.REFUTED, (f"a feasible point has value <= {fmt(upper, 17)} (ball arithmetic) < claimed lower "
                                 f"bound {fmt(claimed, 17)} - tolerance {fmt(tol, 3)}")
    if lo >= c - t:
        return Verdict.VERIFIED, (f"rigorous lower bound {fmt(lower, 17)} >= claimed {fmt(claimed, 17)} - "
                                  f"tolerance {fmt(tol, 3)} (ball arithmetic)")
    return Verdict.INCONCLUSIVE, f"rigorous lower bound {fmt(lower, 17)} is below the claimed {fmt(claimed, 17)}"


#: Statements "the optimum is below a reference value by more than the tolerance" (evidence ``reference``,
#: ``tolerance``) and "the reported feasible value is the optimum" (evidence ``feasible_value``, ``tolerance``).
BELOW_CLAIMS = ("optimum-below-etf-value", "etf-not-minimiser")
CERTIFIED_VALUE_CLAIMS = ("certified-optimum",)


def _kind(c: dict) -> str | None:
    ev = c.get("evidence") or {}
    if c.get("verdict") == Verdict.NOT_APPLICABLE.value:
        return None
    cid = str(c.get("id", ""))
    if cid.startswith(VALUE_CLAIMS) and "predicted" in ev:
        return "value"
    if "claimed_lower_bound" in ev:
        return "lower"
    if cid.startswith(BELOW_CLAIMS) and "reference" in ev and "tolerance" in ev:
        return "below"
    if cid.startswith(CERTIFIED_VALUE_CLAIMS) and "feasible_value" in ev and "tolerance" in ev:
        return "certified"
    return None


def is_value_claim(c: dict) -> bool:
    """A claim dict that the rigorous bracket judges (unless NOT_APPLICABLE): an ``optimal-value*`` statement with
    a ``predicted`` value, a lower-bound statement (evidence ``claimed_lower_bound``), "the optimum is below a
    reference" (``optimum-below-etf-value``, ``etf-not-minimiser``: evidence ``reference``) or "the reported
    feasible value is optimal" (``certified-optimum``: evidence ``feasible_value``)."""
    return _kind(c) is not None


def judge_below(reference, tol, lower: float, upper: float | None) -> tuple[Verdict, str]:
    """"min < reference - tol" against the bracket: VERIFIED when a proven feasible value upper < reference -
    tol; REFUTED when the proven lower bound >= reference; INCONCLUSIVE otherwise."""
    if not is_finite(reference, tol, lower) or float(tol) < 0:
        return Verdict.INCONCLUSIVE, "no finite reference, tolerance or rigorous lower bound"
    r, t, lo = Fraction(float(reference)), Fraction(float(tol)), Fraction(float(lower))
    if lo >= r:
        return Verdict.REFUTED, (f"rigorous lower bound {fmt(lower, 17)} >= reference {fmt(reference, 17)}: the "
                                 f"optimum is not below it (ball arithmetic)")
    if is_finite(upper) and Fraction(float(upper)) < r - t:
        return Verdict.VERIFIED, (f"a feasible point has value <= {fmt(upper, 17)} < reference {fmt(reference, 17)} "
                                  f"- tolerance {fmt(tol, 3)} (ball arithmetic)")
    return Verdict.INCONCLUSIVE, (f"rigorous bracket [{fmt(lower, 17)}, {fmt(upper, 17) if is_finite(upper) else '-'}] "
                                  f"does not decide min < {fmt(reference, 17)} - {fmt(tol, 3)}")


def _judge_claim(c: dict, lower: float, upper: float | None) -> dict | None:
    """The claim dict updated by the rigorous bracket, or None when it is not a value claim."""
    ev = c.get("evidence") or {}
    kind = _kind(c)
    if kind == "value":
        v, why = judge_value(ev.get("predicted"), ev.get("tolerance"), lower, upper)
    elif kind == "lower":
        v, why = judge_lower_bound(ev.get("claimed_lower_bound"), ev.get("tolerance"), lower, upper)
    elif kind == "below":
        v, why = judge_below(ev.get("reference"), ev.get("tolerance"), lower, upper)
    elif kind == "certified":
        v, why = judge_value(ev.get("feasible_value"), ev.get("tolerance"), lower, upper)
    else:
        return None
    new = dict(c)
    new["evidence"] = {**ev, "rigorous_lower": lower, "rigorous_upper": upper, "float_verdict": c.get("verdict"),
                       "float_reason": c.get("reason")}
    new["verdict"] = v.value
    new["reason"] = why
    new["rigorous"] = v is Verdict.VERIFIED
    new["independent"] = True  # a proof in ball arithmetic against the claimed number
    return new


# ---------------------------------------------------------------------------------------------------
# The entry point used by the CLI
# ---------------------------------------------------------------------------------------------------

def apply(out: dict, *, prec: int | None = None) -> dict:
    """A copy of the solve report ``out`` (a ``SolveReport.to_dict()``) with the rigorous certificate and
    the value claims judged by it (see the module docstring). Does not modify ``out``."""
    from solvers import rigorous as R

    R.require_flint()
    prec = int(prec or R.PRECISION_BITS)
    res = dict(out)
    cert = dict(res.get("certificate") or {})
    diags = list(res.get("diagnostics") or [])
    t0 = time.perf_counter()
    recipe = RECIPES.get(res.get("family"))
    claims = [dict(c) for c in res.get("claims") or []]
    rb = None
    try:
        if recipe is None:
            raise NotSupported(f"no rigorous recipe for family {res.get('family')!r} (supported: "
                               f"{', '.join(sorted(RECIPES))})")
        rb = recipe(res, prec)
        rig = rb.to_dict()
    except NotSupported as exc:
        rig = {"lower": None, "upper": None, "method": None, "precision_bits": prec, "status": "unsupported",
               "reason": str(exc)}
    except R.Unsupported as exc:
        rig = {"lower": None, "upper": None, "method": None, "precision_bits": prec, "status": "unsupported",
               "reason": str(exc)}
    except R.NotCertified as exc:
        rig = {"lower": None, "upper": None, "method": None, "precision_bits": prec, "status": "not certified",
               "reason": str(exc)}
    rig["seconds_total"] = round(time.perf_counter() - t0, 6)
    cert["rigorous"] = rig
    res["certificate"] = cert
    judged = 0
    all_rigorous = rb is not None
    if rb is not None:
        lower, upper = rig["lower"][0], (rig["upper"][1] if rig.get("upper") else None)
        for i, c in enumerate(claims):
            new = _judge_claim(c, lower, upper)
            if new is None:
                continue
            judged += 1
            all_rigorous = all_rigorous and bool(new["rigorous"])
            claims[i] = new
    else:
        diags.append(f"--rigorous: {rig['status']}: {rig['reason']} (the float verdicts stand)")
        for i, c in enumerate(claims):
            if is_value_claim(c):
                claims[i] = {**c, "evidence": {**(c.get("evidence") or {}),
                                               "rigorous_status": f"{rig['status']}: {rig['reason']}"}}
    for c in claims:
        c.setdefault("rigorous", False)
    if rb is not None and not judged:
        diags.append("--rigorous: no applicable value claim to judge (the bracket is reported in the certificate)")
    # statements about every minimiser: only after a rigorously VERIFIED optimum (uniqueness needs it)
    grecipe = GEOMETRY_RECIPES.get(res.get("family"))
    pidx = [i for i, c in enumerate(claims) if grecipe is not None and _is_point(res["family"], c)]
    if pidx:
        value_ok = (rb is not None and judged > 0 and all_rigorous
                    and any(_kind(c) == "value" and c.get("rigorous") for c in claims))
        gres, why = {}, None
        t1 = time.perf_counter()
        if not value_ok:
            why = "the optimal value is not rigorously VERIFIED: the uniqueness proof needs the proven optimum"
        else:
            try:
                gres = grecipe(res, prec)
            except NotSupported as exc:
                why = f"unsupported: {exc}"
            except R.Unsupported as exc:
                why = f"unsupported: {exc}"
            except R.NotCertified as exc:
                why = f"not certified: {exc}"
        for i in pidx:
            claims[i] = _judge_point(claims[i], gres, why)
            judged += 1
            all_rigorous = all_rigorous and bool(claims[i]["rigorous"])
        rig["geometry"] = {"judged": [claims[i]["id"] for i in pidx],
                           "proven": [claims[i]["id"] for i in pidx if claims[i]["rigorous"]],
                           "reason": why, "seconds": round(time.perf_counter() - t1, 6)}
        if why is not None:
            diags.append(f"--rigorous: statements about the minimiser not proven in balls: {why} (float verdicts stand)")
    res["claims"] = claims
    items = [_Item(c.get("id", "?"), Verdict(c["verdict"]), c.get("reason", ""), bool(c.get("independent", True)))
             for c in claims]
    v, reason = summarise(items, what="statements")
    res["verdict"], res["reason"] = v.value, reason
    # as ClaimResult.rigorous: the report is VERIFIED and every statement judged in balls (values, and the
    # statements about the minimiser where a geometry recipe exists) is proven there
    res["rigorous"] = bool(v is Verdict.VERIFIED and all_rigorous and judged > 0)
    res["diagnostics"] = diags
    return res


def render_line(out: dict) -> str:
    """One line for the text output of ``solve --rigorous``."""
    rig = (out.get("certificate") or {}).get("rigorous") or {}
    if not rig.get("lower"):
        return f"rigorous: {rig.get('status', 'none')} ({rig.get('reason', '')})"
    up = rig.get("upper")
    return (f"rigorous ({rig.get('precision_bits')}-bit balls, {rig.get('method')}): lower bound >= {rig['lower'][0]!r}"
            + (f", feasible value <= {up[1]!r}" if up else ", no feasible value")
            + f"; judged statements rigorous: {'yes' if out.get('rigorous') else 'no'}"
            + (f"; statements about the minimiser proven in balls: {len(geo['proven'])} of {len(geo['judged'])}"
               if (geo := rig.get("geometry")) else ""))


# ---------------------------------------------------------------------------------------------------
# `run --rigorous`: the same judgement for the checks a claim builds from its instances
# ---------------------------------------------------------------------------------------------------

def _to_checks(judged: dict, originals) -> list:
    """Checks from the claim dicts of :func:`apply`, in order; ``Check.rigorous`` is set on value statements and
    on the statements about every minimiser that a geometry recipe judged (True: proven in ball arithmetic;
    False: judged, not proven), None elsewhere."""
    from proofs_check.core import Check

    out = []
    for c, orig in zip(judged["claims"], originals):
        was_value = is_value_claim({"id": orig["id"], "verdict": orig["verdict"], "evidence": orig["evidence"]})
        # a statement about every minimiser judged by a geometry recipe (evidence "rigorous_geometry" added)
        was_point = ("rigorous_geometry" in (c.get("evidence") or {})
                     and "rigorous_geometry" not in (orig.get("evidence") or {}))
        out.append(Check(c["id"], Verdict(c["verdict"]), c.get("reason", ""), dict(c.get("evidence") or {}),
                         bool(c.get("independent", True)),
                         rigorous=bool(c.get("rigorous")) if (was_value or was_point) else None))
    return out


def judge_report(rep, ctx=None, *, prec: int | None = None):
    """``rep`` (a :class:`proofs_check.core.SolveReport`) with its value statements judged in ball arithmetic
    when ``ctx.rigorous`` (``ncproofs run --rigorous``), else ``rep`` unchanged. Returns a new SolveReport:
    claims as :class:`Check` with ``rigorous`` set on the value statements, ``certificate["rigorous"]`` and the
    diagnostics of :func:`apply`."""
    import copy

    if ctx is not None and not getattr(ctx, "rigorous", False):
        return rep
    d = rep.to_dict()
    judged = apply(d, prec=prec)
    new = copy.copy(rep)
    new.claims = _to_checks(judged, d["claims"])
    new.certificate = judged.get("certificate")
    new.diagnostics = list(judged.get("diagnostics") or [])
    return new


def judge_checks(family: str, instance: dict, checks, ctx=None, *, value_names=(), prec: int | None = None) -> list:
    """Checks that a claim built for one instance of ``family`` (``instance``: the dict its ``check_instance``
    report would hold), judged like :func:`judge_report` when ``ctx.rigorous``; unchanged otherwise.
    ``value_names``: names of checks that state the optimum (evidence ``predicted``/``tolerance``) without
    being called ``optimal-value``."""
    from proofs_check.core import SolveReport

    checks = list(checks)
    if ctx is not None and not getattr(ctx, "rigorous", False):
        return checks
    names = [c.name for c in checks]
    for c in checks:  # judged under the canonical id, renamed back below
        if c.name in value_names:
            c.name = "optimal-value"
    rep = judge_report(SolveReport(family, instance, claims=checks), None, prec=prec)
    for c, name in zip(rep.claims, names):
        c.name = name
        if rep.diagnostics and c.rigorous is False:
            c.evidence.setdefault("rigorous_diagnostics", list(rep.diagnostics))
    return rep.claims
