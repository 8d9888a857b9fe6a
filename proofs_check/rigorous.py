"""``--rigorous``: prove a bracket of each instance's optimum in ball arithmetic and re-judge the statements
about it with the same rule as the float pipeline (docs/rigorous.md).

One engine, :func:`rejudge`, on live checks: the family's recipe (:data:`RECIPES`, report view and live objects
-> a ``solvers.rigorous.RigorousBound``) bounds the candidate the check already holds (``SolveReport.live``; only a
saved report, a dict without them, is read back, by the family's one :data:`SAVED_READERS` function), and every :class:`~proofs_check.core.Check`
whose statement is about the optimum (``Check.statement``, a :mod:`proofs_check.statements` value) is judged
again by that statement's own ``judge`` on the proven :class:`~proofs_check.statements.ExactBracket`. No check
is recognised by its name or its evidence, none is renamed.

- :func:`judge_report` / :func:`judge_checks`: ``run --rigorous`` (claims pass their live reports / checks);
- :func:`apply`: the live ``SolveReport`` of ``solve --rigorous``, ``table --rigorous`` and ``sweep --rigorous``
  (no second solve), or a saved report dict (``REPORT.json``), whose checks come back with the statements they
  serialised (``evidence["statement"]``, :func:`proofs_check.statements.from_dict`).

The result: ``certificate["rigorous"] = {"lower": [lo, hi], "upper": [lo, hi] | None, "method",
"precision_bits", "inputs", ...}`` (float pairs rounded outward), or ``{"status": "not certified" |
"unsupported", "reason"}`` (the float verdicts stand); each judged check carries ``rigorous`` (True: VERIFIED
in balls) and ``rigorous_lower`` / ``rigorous_upper`` / ``float_verdict`` in its evidence. UFM families
(:data:`GEOMETRY_RECIPES`): after a rigorously VERIFIED optimum, the statements about every minimiser get
``"rigorous"`` and ``evidence["rigorous_geometry"]`` from the ball-arithmetic uniqueness proof of the balanced
closed form; their verdicts are never changed.
"""

from __future__ import annotations

import time

from proofs_check import statements as st
from proofs_check.core import Check, Verdict, summarise

#: How the inputs of the instance enter the ball arithmetic (stated in ``certificate.rigorous.inputs``).
INPUTS = ("exact: each parameter is the double the CLI or the caller parsed (converted exactly, radius 0); targets "
          "and weights derived from them (label-smoothing targets, class weights) are exact rationals of those "
          "doubles")


class NotSupported(Exception):
    """No rigorous recipe for this family or instance (the plain verdicts stand)."""


# ---------------------------------------------------------------------------------------------------
# Per-family recipes: (view, prec) -> solvers.rigorous.RigorousBound, on the check's live objects (view["live"])
# ---------------------------------------------------------------------------------------------------

def _ufm(view: dict, prec: int):
    from solvers import rigorous as R

    inst = view["live"]["instance"]
    rb = R.ufm_from_instance(inst.loss, inst.k, inst.n, inst.lw, inst.lh, inst.lb, prec=prec)
    if inst.hypotheses():
        # the lower bound holds at every d; the candidate's value is attained only when d >= k - 1
        rb.upper = None
        rb.details["upper_note"] = "; ".join(inst.hypotheses())
    return rb


def _scl(view: dict, prec: int):
    from solvers import rigorous as R
    from theory import scl as T

    live = view.get("live") or {}
    p = view.get("instance") or {}
    T.SCLInstance(tuple(p["counts"]), p["tau"], p["d"], p.get("nonneg", True), p.get("batches"))  # validates
    return R.scl_from_instance(p, prec=prec, H=live.get("H"))


def _feature_collapse(view: dict, prec: int):
    from solvers import rigorous as R

    return R.feature_collapse_from_instance(view.get("instance") or {}, prec=prec)


def live_candidate(live: dict):
    """(layout, grouped point) of the candidate a ``solve ufm`` check left in ``SolveReport.live`` (``problem``
    and either ``layout`` and ``point`` or the K x K class-reduced ``X``, ``b``), or None."""
    import numpy as np

    from solvers import losses as L
    from solvers import rigorous as R
    from solvers import ufm_general as SG

    p = live.get("problem")
    if p is None:
        return None
    if live.get("layout") is not None and live.get("point") is not None:
        if live["layout"].m > R.VERIFIED_MAX:
            raise NotSupported(f"{live['layout'].m} groups of exchangeable classes > {R.VERIFIED_MAX} (verified "
                               f"floating-point Cholesky of the reduced m x m form)")
        return live["layout"], live["point"]
    if live.get("X") is None or p.G != p.K or p.K > R.VERIFIED_MAX:
        return None
    X, b = np.asarray(live["X"], float), np.asarray(live["b"], float)
    return L.SlotLayout(np.arange(p.K)), SG.GroupedPoint(X, np.zeros(p.K), b)


def _ufm_general(view: dict, prec: int):
    from solvers import rigorous as R
    from solvers import ufm_general as SG

    live = view["live"]
    cand = live_candidate(live)
    if cand is None:
        p = live["problem"]
        raise NotSupported("the check's candidate has no ball recipe (" + (
            "groups other than one per class" if p.G != p.K else
            f"K = {p.K} > {R.VERIFIED_MAX} classes without groups of exchangeable classes" if p.K > R.VERIFIED_MAX
            else "no class-reduced point") + ")")
    p, (layout, pt) = live["problem"], cand
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


def _ufm_regression(view: dict, prec: int):
    from solvers.rigorous import regression as RR

    return RR.recipe(view, prec)


RECIPES = {"ufm-ce": _ufm, "ufm-mse": _ufm, "ufm": _ufm_general, "ufm-regression": _ufm_regression, "scl": _scl,
           "feature_collapse": _feature_collapse}


# ---------------------------------------------------------------------------------------------------
# A saved report (``REPORT.json``, a dict without the check's live objects): the one place it is read back
# ---------------------------------------------------------------------------------------------------

#: Float candidate of a saved `solve ufm` report (it does not carry its point): one start of the family's
#: grouped solver (a choice: only the tightness of the bound depends on it), on the solver's own work limits
#: (iterations and its gap target, never wall time: the bracket, and so a verdict, must not depend on the load).
UFM_GENERAL_STARTS = 1


def _saved_ufm(report: dict) -> dict:
    """A saved `solve ufm-ce|ufm-mse` report: its ``theory.ufm.UFMInstance`` (exact parameters, no solve)."""
    from theory import ufm as T

    p = report.get("instance") or {}
    return {"instance": T.UFMInstance(p["loss"], p["k"], p["n"], p["d"], p["lw"], p["lh"], p.get("lb", 0.0))}


def ufm_general_problem(inst: dict):
    """The ``solvers.ufm_general.GeneralUFM`` of a saved ``solve ufm`` report, from ``report["instance"]`` (the
    loss rebuilt from its name: only for a report without its live problem)."""
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
    sc = str(ld.get("smoothing_convention", "torch"))
    if not sc.startswith(("torch", "others")):
        raise ValueError(f"loss.smoothing_convention must start with 'torch' or 'others', got {sc[:60]!r}")
    conv = "others" if sc.startswith("others") else "torch"
    weights = ld.get("class_weights")
    key = {"ce": "ce", "ls": "ls", "weighted-ce": "weighted-ce", "weighted-ls": "ls", "mse": "mse"}.get(name)
    if key is None:
        raise NotSupported(f"no rigorous recipe for loss {name!r}")
    loss = L.make_loss(key, len(counts), smoothing=float(ld.get("smoothing", 0.0) or 0.0), convention=conv,
                       weights=weights)
    for k, attr in (("target_true", "q_true"), ("target_other", "q_other")):
        # the targets the file states are derived from the smoothing and its convention: an edited one is a
        # different instance from the one rebuilt here, so the file is inconsistent
        if k in ld and (not isinstance(ld[k], (int, float)) or isinstance(ld[k], bool)
                        or float(ld[k]) != float(getattr(loss, attr, ld[k]))):
            raise ValueError(f"loss.{k} = {ld[k]!r} is not the {attr} {getattr(loss, attr, None)!r} of smoothing "
                             f"{ld.get('smoothing')!r} ({conv} convention)")
    return SG.classification(loss, counts, inst["d"], inst["lambda_w"], inst["lambda_h"],
                             inst.get("lambda_b", 0.0) or 0.0)


def ufm_general_candidate(p):
    """(layout, grouped point) of the family's float solver for a saved report: ``solvers.ufm_general.solve_grouped``
    on the groups of exchangeable classes, or, when there are none (all groups singletons), ``solve_factored`` on
    the K x K class-reduced problem seen as K singleton groups (``SlotLayout(arange(K))``: beta plays no role)."""
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
        sol = SG.solve_factored(p, rank=min(p.K, p.G), starts=UFM_GENERAL_STARTS, seed=0)
        X = SG.clean_candidate(p, sol.variables["X"], sol.variables["b"])
        return L.SlotLayout(np.arange(p.K)), SG.GroupedPoint(np.asarray(X, float), np.zeros(p.K),
                                                             np.asarray(sol.variables["b"], float))
    sol = SG.solve_grouped(p, layout, starts=UFM_GENERAL_STARTS, seed=0)
    return layout, SG.clean_grouped(p, sol.variables["point"], layout)


def _saved_ufm_general(report: dict) -> dict:
    """A saved `solve ufm` report: the problem rebuilt from its instance and a float candidate solved again."""
    p = ufm_general_problem(report.get("instance") or {})
    layout, pt = ufm_general_candidate(p)
    return {"problem": p, "layout": layout, "point": pt}


#: family -> (report dict -> the live objects its recipe bounds), for a report without them (a saved
#: ``REPORT.json``): the only functions that read an instance back from a dictionary. The other families' recipes
#: take the instance's parameters as they are (and the live candidate where the check left one).
SAVED_READERS = {"ufm-ce": _saved_ufm, "ufm-mse": _saved_ufm, "ufm": _saved_ufm_general}
#: what the recipe needs in the live objects of those families
LIVE_NEEDS = {"ufm-ce": "instance", "ufm-mse": "instance", "ufm": "problem"}


def live_objects(view: dict, *, saved: bool) -> dict:
    """The live objects the family's recipe bounds: ``view["live"]`` (``SolveReport.live``) when it holds what the
    recipe needs; otherwise, with ``saved`` (a report dict read back), the family's :data:`SAVED_READERS`
    function; without ``saved`` NotSupported (a live report never gets a second solve)."""
    fam = view.get("family")
    live = dict(view.get("live") or {})
    need = LIVE_NEEDS.get(fam)
    if need is None or live.get(need) is not None:
        return live
    if not saved:
        raise NotSupported(f"the {fam} report holds no live {need} (its check did not keep it): no second solve")
    return {**live, **SAVED_READERS[fam](view)}


# ---------------------------------------------------------------------------------------------------
# `ncproofs solve --rigorous REPORT.json`: a saved report file, checked before it is re-judged
# ---------------------------------------------------------------------------------------------------

#: Largest saved solve report read back (K = 1000 class-mean cosines: about 31 MB indented).
MAX_SAVED_REPORT_BYTES = 256 * 2 ** 20
#: How the saved-report errors begin (the CLI prints them after "ncproofs: error: ").
SAVED = "solve REPORT.json"


def _saved_instance_ufm(report: dict) -> None:
    fam, loss = report["family"], (report.get("instance") or {}).get("loss")
    if loss != fam.removeprefix("ufm-"):
        raise ValueError(f"a {fam} report with loss {loss!r}")
    _saved_ufm(report)


def _saved_instance_scl(report: dict) -> None:
    from theory import scl as T

    p = report["instance"]
    T.SCLInstance(tuple(p["counts"]), p["tau"], p["d"], p.get("nonneg", True), p.get("batches"))


def _saved_instance_feature_collapse(report: dict) -> None:
    from solvers import rigorous as R

    R._fc_instance(report["instance"])


def _saved_instance_ufm_regression(report: dict) -> None:
    from solvers.rigorous import regression as RR

    try:
        RR.targets_from_instance(report["instance"])
    except RR.Unsupported:  # targets that cannot be rebuilt: the recipe says so (status "unsupported")
        pass


def _saved_instance_ufm_general(report: dict) -> None:
    try:
        ufm_general_problem(report["instance"])
    except NotSupported:  # a kind or loss without a ball recipe: the recipe says so (status "unsupported")
        pass


#: family -> a check that the saved report's instance can be read back (raises on a damaged one; no solve)
SAVED_INSTANCE_CHECKS = {"ufm-ce": _saved_instance_ufm, "ufm-mse": _saved_instance_ufm, "ufm": _saved_instance_ufm_general,
                         "scl": _saved_instance_scl, "feature_collapse": _saved_instance_feature_collapse,
                         "ufm-regression": _saved_instance_ufm_regression}


def _no_constant(name: str):
    raise ValueError(f"the non-standard JSON constant {name} (ncproofs writes none)")


def read_saved_report(path, known_families=()) -> dict:
    """The saved solve report ``path`` (the output of ``ncproofs solve FAMILY ... --json``), checked to be one
    that :func:`apply` can re-judge; otherwise :class:`theory._validate.InputError`, one line naming the file and
    what is wrong: not a regular readable file of at most :data:`MAX_SAVED_REPORT_BYTES`, not JSON, not a solve
    report (another command's output, an unreadable schema version, a claim entry without id or verdict, a
    serialised statement that does not parse), a family without a rigorous recipe (``known_families``: the
    names that are families, for "unknown family"), an instance its family cannot read back, or a value statement
    whose prediction differs from its check's ``evidence.predicted``."""
    import json

    from proofs_check.envelope import SCHEMA_VERSION
    from theory._validate import InputError, input_file

    shown = input_file(SAVED, path, max_bytes=MAX_SAVED_REPORT_BYTES)

    def bad(what: str) -> InputError:
        return InputError(f"{SAVED}: {shown} {what}")

    try:
        with open(shown, "rb") as f:
            report = json.loads(f.read().decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise bad(f"is not valid JSON ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None
    if not isinstance(report, dict):
        raise bad(f"is not a solve report (its top level is a JSON {type(report).__name__}, not an object)")
    cmd = report.get("command")
    if cmd != "solve":
        raise bad("is a run report (`ncproofs run --json`), not a solve report: re-judge a run with `ncproofs run "
                  "--rigorous`" if cmd == "run" else
                  f"is not a solve report (its command is {cmd!r}; a saved report is the output of "
                  "`ncproofs solve FAMILY ... --json`)")
    ver = report.get("schema_version")
    if not isinstance(ver, str) or ver.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise bad(f"has schema_version {ver!r}: this ncproofs reads {SCHEMA_VERSION.split('.')[0]}.x")
    fam = report.get("family")
    for key, typ in (("family", str), ("instance", dict), ("claims", list)):
        if not isinstance(report.get(key), typ):
            raise bad(f"is damaged: its {key!r} is {type(report.get(key)).__name__}, not a JSON "
                      f"{ {str: 'string', dict: 'object', list: 'array'}[typ]}")
    if fam not in RECIPES:
        raise bad(f"is a report of family {fam!r}, which has no saved-report reader (no rigorous recipe); "
                  f"supported: {', '.join(sorted(RECIPES))}" if fam in known_families or fam.replace("_", "-")
                  in known_families else f"names an unknown family {fam!r} (supported: {', '.join(sorted(RECIPES))})")
    if not isinstance(report.get("predicted") or {}, dict):
        raise bad("is damaged: its 'predicted' is not a JSON object")
    verdicts = {v.value for v in Verdict}
    for i, c in enumerate(report["claims"]):
        if not (isinstance(c, dict) and isinstance(c.get("id"), str) and c.get("verdict") in verdicts
                and isinstance(c.get("evidence", {}), dict) and isinstance(c.get("reason", ""), str)):
            raise bad(f"is damaged: claims[{i}] is not a check (an object with a string 'id', a 'verdict' among "
                      f"{', '.join(sorted(verdicts))}, an object 'evidence')")
        _check_saved_statement(c, bad)
    try:
        SAVED_INSTANCE_CHECKS[fam](report)
    except KeyError as exc:
        raise bad(f"is damaged: its {fam} instance has no {exc}") from None
    except (InputError, TypeError, ValueError, AttributeError) as exc:
        raise bad(f"is damaged: its {fam} instance cannot be read back: {' '.join(str(exc).split())[:300]}") from None
    return report


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_saved_statement(c: dict, bad) -> None:
    """A check's serialised statement parses, and a value statement predicts what its evidence says it does."""
    ev = c.get("evidence") or {}
    if "statement" not in ev or ev["statement"] is None:
        if _number(ev.get("predicted")) and _number(ev.get("lower_bound")):
            # the evidence of a value statement (a predicted optimum against a certified lower bound) with its
            # statement removed would be carried unjudged: the file is damaged
            raise bad(f"is damaged: check {c['id']!r} states a predicted optimum and a lower bound but no "
                      "'statement' (every value check ncproofs writes carries one)")
        return
    s = st.from_dict(ev["statement"])
    if s is None:
        raise bad(f"is damaged: the statement of check {c['id']!r} is not a statement ({str(ev['statement'])[:120]})")
    if type(s) is not st.ValueEquals:
        return
    # (not the report's predicted.value: with `solve ufm --claim-value` the statement is the user's claim)
    v = ev.get("predicted")
    if isinstance(v, (int, float)) and not isinstance(v, bool) and st.to_fraction(v) != st.to_fraction(s.predicted):
        raise bad(f"is inconsistent: check {c['id']!r} states the optimum is {s.predicted!r}, its evidence.predicted "
                  f"is {v!r} (edited by hand?)")


# ---------------------------------------------------------------------------------------------------
# Statements about every minimiser (uniqueness, geometry): docs/rigorous.md "Uniqueness and geometry (UFM)"
# ---------------------------------------------------------------------------------------------------

#: The statements about every minimiser are the checks whose statement is a
#: :class:`~proofs_check.statements.EveryMinimiser` (typed by the claim that built them, never recognised by id).
#: After the value bracket they carry ``"rigorous"``: True only when the float verdict is VERIFIED and every
#: ingredient of its proof is proven in ball arithmetic (verdicts are never changed by this).

HOW_BALLS_UNIQUE = ("unique minimiser proven in ball arithmetic: the closed form's dual certificate is strictly "
                    "complementary with an injective face (docs/ufm.md 'Uniqueness'; docs/rigorous.md)")

#: Why a saved report from before typed statements about every minimiser gets no ball-arithmetic proof of them.
LEGACY_POINT_REASON = ("unsupported: the saved report (schema_version {ver}) predates typed statements about every "
                       "minimiser (schema 1.2), so its checks do not say which are; re-run `ncproofs solve ... --json` "
                       "to judge them in ball arithmetic (the float verdicts stand)")


def _is_point(c: Check) -> bool:
    """A statement about every minimiser (its statement is an ``EveryMinimiser``), unless NOT_APPLICABLE."""
    return isinstance(c.statement, st.EveryMinimiser) and c.verdict is not Verdict.NOT_APPLICABLE


def _legacy_saved(view: dict) -> str | None:
    """The schema_version of a saved report written before typed statements about every minimiser (< 1.2), or
    None (a newer report, or a live one: no schema_version)."""
    ver = view.get("schema_version")
    if not isinstance(ver, str):
        return None
    try:
        major, minor = (int(x) for x in ver.split(".")[:2])
    except ValueError:
        return ver
    return ver if (major, minor) < (1, 2) else None


def _balanced_prover(u: dict):
    """``prove(statement) -> (proven, detail)`` for the statements about every minimiser (``EveryMinimiser``),
    given the proof ``u`` of :func:`solvers.rigorous.ufm_balanced_uniqueness` (the closed form is the unique
    minimiser): uniqueness, the proven geometry (another one is not proven), collapse, self-duality and the
    bias follow from it; any other property (``minority-geometry``) has no proof here."""
    geo = u["geometry"]
    short = {"phase": u["phase"], "margin": u["margin"], "delta": u["delta"], "delta_lower": u["delta_lower"],
             "precision_bits": u["precision_bits"]}
    facts = {
        "collapse": "Z* = m J_K E is class-constant and unique: h_i = mu_{y_i} at every minimiser",
        "self-duality": "Z* is symmetric PSD in class coordinates (m >= 0), so every balanced factorization has "
                        "mu_c = sqrt(lw/(n lh)) w_c",
        "constant-bias": f"every minimiser's bias is b* + c 1 with b* = 0 ({u['bias']})",
        "bias-one-over-k": "every minimiser's bias is b* = 1/K (MSE: equal gradients give equal logits)",
    }

    def prove(s: st.EveryMinimiser) -> tuple[bool, dict]:
        if s.property == "unique":
            return True, {**short, "how": HOW_BALLS_UNIQUE, "uniqueness": u}
        if s.property == "geometry" and s.geometry == geo:
            return True, {**short, "how": (
                "every minimiser has Z = Z* (unique), whose class-mean Gram is proportional to (Z*^T Z*)^(1/2)"
                " = m sqrt(n) J_K: a simplex ETF exactly" if geo == "simplex-etf" else
                "every minimiser has Z = 0, hence W = 0 and H = 0 (lam ||W H||_* = (lw ||W||^2 + lh "
                "||H||^2)/2 at a minimiser)")}
        if s.property == "geometry":
            return False, {**short, "contradicted": True,
                           "reason": f"ball arithmetic: the unique minimiser's class means are {geo}, not {s.geometry}"}
        if s.property in facts:
            return True, {**short, "how": facts[s.property]}
        return False, {"reason": f"no ball-arithmetic proof that every minimiser has {s.property}"}

    return prove


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

    p = out["live"]["instance"]
    u = R.ufm_balanced_uniqueness(p.loss, p.k, p.n, p.lw, p.lh, p.lb, p.d, prec=prec)
    trivial = (out.get("predicted") or {}).get("trivial")
    _phase_matches(u, None if trivial is None else not trivial)
    return _balanced_prover(u)


#: Why imbalanced counts (or unequal weights) have no ball-arithmetic uniqueness proof.
NO_EXACT_MINIMISER = ("no exact minimiser is known (imbalanced counts or unequal class weights): the uniqueness "
                      "theorem needs the dual certificate at an exact minimiser, and at the float candidate its "
                      "conditions hold only up to the solver's accuracy (face singular values 1 - O(gap)); without a "
                      "proven radius in the collapse phase (docs/ufm.md 'Radius') evaluating them in balls proves "
                      "nothing, so these statements keep their float evidence")


def _loss_ball_form(loss) -> dict:
    """The parameters under which the balanced uniqueness recipe (``solvers.rigorous.ufm_balanced_uniqueness``)
    knows a live loss object, by its class: the softmax losses (``solvers.losses.CrossEntropy``: ce, ls, their
    weighted forms) and one-hot MSE (``SquaredError`` with T = I); any other loss says by name that it has none."""
    import numpy as np

    from solvers import losses as L

    if isinstance(loss, L.CrossEntropy):
        return {"name": loss.name, "smoothing": float(loss.eps), "convention": loss.convention,
                "weights": [float(w) for w in loss.w] if loss.weighted else None}
    if isinstance(loss, L.SquaredError) and loss.T.shape[0] == loss.T.shape[1] \
            and np.array_equal(loss.T, np.eye(loss.T.shape[0])):
        return {"name": "mse", "smoothing": 0.0, "convention": "torch", "weights": None}
    raise NotSupported(f"the loss {getattr(loss, 'name', '?')!r} ({type(loss).__name__}) has no ball-arithmetic "
                       "uniqueness recipe")


def _geo_ufm_general(out: dict, prec: int) -> dict:
    """``solve ufm``: balanced counts, equal weights, a softmax loss or MSE, no bias penalty (the report's
    statements are then at the closed form); otherwise NotSupported with the reason. On the live problem."""
    from solvers import rigorous as R

    p = out["live"]["problem"]
    if p.kind != "classification":
        raise NotSupported(f"no uniqueness recipe for kind {p.kind!r}")
    counts = [int(c) for c in p.counts]
    lf = _loss_ball_form(p.loss)
    weights = lf["weights"]
    if len(set(counts)) != 1 or (weights and len(set(weights)) != 1):
        raise NotSupported(NO_EXACT_MINIMISER)
    if p.G != p.K:
        raise NotSupported("groups other than one per class")
    if float(p.lb) != 0.0:
        raise NotSupported("a bias penalty: the report's statements are not at a closed form")
    if lf["name"] not in R.BALANCED_SOFTMAX_LOSSES + ("mse",):
        raise NotSupported(f"no uniqueness recipe for loss {lf['name']!r}")
    u = R.ufm_balanced_uniqueness(lf["name"], p.K, counts[0], p.lw, p.lh, 0.0, p.d, smoothing=lf["smoothing"],
                                  convention=lf["convention"], weight=weights[0] if weights else 1.0, prec=prec)
    geo = (out.get("predicted") or {}).get("geometry")
    _phase_matches(u, None if geo is None else geo == "simplex-etf")
    return _balanced_prover(u)


GEOMETRY_RECIPES = {"ufm-ce": _geo_ufm, "ufm-mse": _geo_ufm, "ufm": _geo_ufm_general}


def _judge_point(c: Check, prove, why: str | None) -> Check:
    """``c`` (an ``EveryMinimiser`` statement) with ``rigorous`` and ``evidence["rigorous_geometry"]`` from the
    geometry recipe's ``prove``; the verdict is unchanged."""
    if why is not None:
        proven, detail = False, {"reason": why}
    else:
        proven, detail = prove(c.statement)
    ok = bool(proven) and c.verdict is Verdict.VERIFIED
    info = {**detail, "proven": ok}
    if proven and not ok:
        info["reason"] = (f"provable in ball arithmetic, but the float verdict {c.verdict.value} is not upgraded "
                          "(docs/rigorous.md)")
    reason = c.reason + (f" [proven in ball arithmetic: margin delta >= {detail.get('delta_lower')!r}]" if ok else "")
    return Check(c.name, c.verdict, reason, {**c.evidence, "rigorous_geometry": info}, c.independent, rigorous=ok,
                 statement=c.statement)


# ---------------------------------------------------------------------------------------------------
# The one engine: the proven bracket, each statement about the optimum judged by its own rule
# ---------------------------------------------------------------------------------------------------

def _about_optimum(c: Check) -> bool:
    return c.statement is not None and c.statement.about == st.OPTIMUM and c.verdict is not Verdict.NOT_APPLICABLE


def _is_value(c: Check) -> bool:
    """"The optimum equals v" (not "the reported value is the optimum"): what the uniqueness proof needs."""
    return isinstance(c.statement, st.ValueEquals) and not isinstance(c.statement, st.CertifiedOptimum)


def _unsupported(status: str, reason: str, prec: int) -> dict:
    return {"lower": None, "upper": None, "method": None, "precision_bits": prec, "status": status, "reason": reason}


def _bracket(view: dict, prec: int, saved: bool):
    """(RigorousBound or None, certificate.rigorous dict, live objects) of the family's recipe on ``view`` and
    its live objects (:func:`live_objects`; the geometry recipe gets the same)."""
    from solvers import rigorous as R

    recipe = RECIPES.get(view.get("family"))
    live = dict(view.get("live") or {})
    try:
        if recipe is None:
            raise NotSupported(f"no rigorous recipe for family {view.get('family')!r} (supported: "
                               f"{', '.join(sorted(RECIPES))})")
        live = live_objects(view, saved=saved)
        rb = recipe({**view, "live": live}, prec)
        rig = rb.to_dict()
        rig.setdefault("inputs", INPUTS)
        return rb, rig, live
    except (NotSupported, R.Unsupported) as exc:
        return None, _unsupported("unsupported", str(exc), prec), live
    except R.NotCertified as exc:
        return None, _unsupported("not certified", str(exc), prec), live


VALUE_NOT_PROVEN = "the optimal value is not rigorously VERIFIED: the uniqueness proof needs the proven optimum"


def rejudge(view: dict, checks: list, *, prec: int | None = None,
            saved: bool = True) -> tuple[list, dict, list, bool]:
    """The checks of one instance re-judged in ball arithmetic. ``view``: ``family``, ``instance``,
    ``predicted`` and optionally ``live`` (the candidate of the check, ``SolveReport.live``). ``saved``: when
    ``live`` lacks what the recipe needs, read it back from ``view`` (:data:`SAVED_READERS`; for ``solve ufm``
    that solves again); False: NotSupported instead (a live report: no second solve).

    Returns (checks, certificate.rigorous, diagnostics, rigorous): each check about the optimum judged by its
    statement on the proven bracket (``rigorous`` True when VERIFIED there), the statements about every
    minimiser marked by the family's geometry recipe, and whether every judged check is proven."""
    from solvers import rigorous as R

    R.require_flint()
    prec = int(prec or R.PRECISION_BITS)
    t0 = time.perf_counter()
    rb, rig, live = _bracket(view, prec, saved)
    rig["seconds_total"] = round(time.perf_counter() - t0, 6)
    diags: list[str] = []
    out = list(checks)
    judged = 0
    all_rigorous = rb is not None
    if rb is not None:
        lower, upper = rig["lower"][0], (rig["upper"][1] if rig.get("upper") else None)
        bracket = st.ExactBracket(lower, upper, f"ball arithmetic, {rig.get('precision_bits', prec)} bits")
        for i, c in enumerate(out):
            if not _about_optimum(c):
                continue
            v, why, extra = c.statement.judge(bracket)
            ev = {**c.evidence, **extra, "rigorous_lower": lower, "rigorous_upper": upper,
                  "float_verdict": c.verdict.value, "float_reason": c.reason}
            # a proof in ball arithmetic against the stated number: independent evidence
            out[i] = Check(c.name, v, why, ev, True, rigorous=v is Verdict.VERIFIED, statement=c.statement)
            judged += 1
            all_rigorous = all_rigorous and v is Verdict.VERIFIED
        if not judged:
            diags.append("--rigorous: no applicable value claim to judge (the bracket is reported in the certificate)")
    else:
        diags.append(f"--rigorous: {rig['status']}: {rig['reason']} (the float verdicts stand)")
        for i, c in enumerate(out):
            if _about_optimum(c):
                out[i] = Check(c.name, c.verdict, c.reason,
                               {**c.evidence, "rigorous_status": f"{rig['status']}: {rig['reason']}"},
                               c.independent, rigorous=False, statement=c.statement)
    # statements about every minimiser: only after a rigorously VERIFIED optimum (uniqueness needs it)
    grecipe = GEOMETRY_RECIPES.get(view.get("family"))
    legacy = _legacy_saved(view) if saved and grecipe is not None else None
    if legacy is not None:
        out, all_rigorous = _legacy_points(out, LEGACY_POINT_REASON.format(ver=legacy), rig, diags), False
    pidx = [i for i, c in enumerate(out) if grecipe is not None and _is_point(c)]
    if pidx:
        value_ok = rb is not None and judged > 0 and all_rigorous and any(_is_value(c) and c.rigorous for c in out)
        gres, why = None, None
        t1 = time.perf_counter()
        if not value_ok:
            why = VALUE_NOT_PROVEN
        else:
            try:
                gres = grecipe({**view, "live": live}, prec)
            except (NotSupported, R.Unsupported) as exc:
                why = f"unsupported: {exc}"
            except R.NotCertified as exc:
                why = f"not certified: {exc}"
        for i in pidx:
            out[i] = _judge_point(out[i], gres, why)
            judged += 1
            all_rigorous = all_rigorous and bool(out[i].rigorous)
        rig["geometry"] = {"judged": [out[i].name for i in pidx], "proven": [out[i].name for i in pidx if out[i].rigorous],
                           "reason": why, "seconds": round(time.perf_counter() - t1, 6)}
        if why is not None:
            diags.append(f"--rigorous: statements about the minimiser not proven in balls: {why} (float verdicts stand)")
        if why == VALUE_NOT_PROVEN and rb is not None:
            # the instance has a proven bracket but no value statement is VERIFIED on it: the float minimiser
            # verdicts rest on a certified optimum that the balls do not confirm (apply_saved withdraws a saved one)
            for i in pidx:
                out[i].evidence["rigorous_geometry"]["contradicted"] = True
    verdict = summarise(out, what="statements")[0]
    return out, rig, diags, bool(verdict is Verdict.VERIFIED and all_rigorous and judged > 0)


def _legacy_points(out: list, reason: str, rig: dict, diags: list) -> list:
    """A saved report from before typed statements about every minimiser: its applicable checks that state no
    statement may be about every minimiser (which, it does not say), so none is proven in balls: each gets
    ``rigorous`` False and the reason, and the report is not rigorous (never VERIFIED by default)."""
    res = []
    for c in out:
        if c.statement is None and c.verdict is not Verdict.NOT_APPLICABLE:
            c = Check(c.name, c.verdict, c.reason, {**c.evidence, "rigorous_geometry": {"proven": False, "reason": reason}},
                      c.independent, rigorous=False, statement=None)
        res.append(c)
    rig["geometry"] = {"judged": [], "proven": [], "reason": reason, "seconds": 0.0}
    diags.append(f"--rigorous: statements about the minimiser not proven in balls: {reason}")
    return res


# ---------------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------------

def checks_of_report(out: dict) -> list:
    """The checks of a report dict (``SolveReport.to_dict()``, a saved ``REPORT.json``), each with the statement
    it serialised (``evidence["statement"]``); the one place where a report is read back."""
    res = []
    for c in out.get("claims") or []:
        ev = dict(c.get("evidence") or {})
        res.append(Check(c.get("id", "?"), Verdict(c["verdict"]), c.get("reason", ""), ev,
                         bool(c.get("independent", True)), rigorous=c.get("rigorous"),
                         statement=st.from_dict(ev.get("statement"))))
    return res


def apply(out, *, prec: int | None = None) -> dict:
    """The solve report ``out`` as a dict (``SolveReport.to_dict()`` form) with the rigorous certificate and its
    checks re-judged by :func:`rejudge` (see the module docstring); ``out`` is not modified.

    ``out`` a live :class:`~proofs_check.core.SolveReport` (``solve``, ``table`` and ``sweep --rigorous``): the
    recipe bounds the candidate its check holds (``SolveReport.live``) and each check is judged by its own
    statement; no second solve (a report without the live objects its family's recipe needs is unsupported).
    ``out`` a dict (a saved ``REPORT.json``): the checks come back with the statements they serialised and the
    live objects through the family's :data:`SAVED_READERS` function (``solve ufm``: the problem rebuilt and
    its candidate solved again)."""
    from proofs_check.core import SolveReport, clean

    if isinstance(out, SolveReport):
        res = out.to_dict()
        view = {"family": out.family, "instance": out.instance, "predicted": out.predicted, "live": out.live}
        checks, rig, diags, rigorous = rejudge(view, list(out.claims), prec=prec, saved=False)
    else:
        res = dict(out)
        checks, rig, diags, rigorous = rejudge(res, checks_of_report(res), prec=prec, saved=True)
    cert = dict(res.get("certificate") or {})
    cert["rigorous"] = rig
    res["certificate"] = cert
    res["claims"] = [{"id": c.name, "verdict": c.verdict.value, "reason": c.reason, "independent": bool(c.independent),
                      "evidence": clean(c.evidence_out()), "rigorous": bool(c.rigorous)} for c in checks]
    v, reason = summarise(checks, what="statements")
    res["verdict"], res["reason"] = v.value, reason
    # as ClaimResult.rigorous: the report is VERIFIED and every statement judged in balls (values, and the
    # statements about the minimiser where a geometry recipe exists) is proven there
    res["rigorous"] = rigorous
    res["diagnostics"] = list(res.get("diagnostics") or []) + diags
    return clean(res)


def apply_saved(report: dict, source: str, *, prec: int | None = None) -> dict:
    """:func:`apply` on a saved report (read by :func:`read_saved_report` from the file ``source``). A check whose
    verdict is the file's (not judged again on the proven bracket, nor proven in ball arithmetic: statements
    without a statement about the optimum, NOT_APPLICABLE ones) keeps it, as a live ``solve --rigorous`` keeps its
    float verdict, and is marked ``evidence["saved_verdict"]`` with one diagnostic naming them; ``rejudged_from``
    records the file and the version that wrote it."""
    out = apply(report, prec=prec)
    carried, withdrawn = [], []
    typed = checks_of_report(out)
    values = [t for t in typed if t.statement is not None and t.statement.about == st.OPTIMUM]
    value_ok = any(t.verdict is Verdict.VERIFIED and t.rigorous is True for t in values)
    for c, t in zip(out["claims"], typed):
        ev = c.setdefault("evidence", {})
        rg = ev.get("rigorous_geometry") or {}
        why = None
        if c.get("verdict") == Verdict.VERIFIED.value and c.get("rigorous") is not True:
            if rg.get("contradicted"):
                why = rg.get("reason")
            elif (t.statement is None or t.statement.about != st.OPTIMUM) and values and not value_ok:
                why = ("no statement about the optimum is VERIFIED on the proven bracket of the instance in the file, "
                       "and this check's float verdict was made on the instance the file's certificate solved")
            elif isinstance(t.statement, st.PointWithinRadius) and t.statement.judge()[0] is not Verdict.VERIFIED:
                why = f"its own numbers do not prove it: {t.statement.judge()[1]}"
        if why is not None:
            # the file says VERIFIED, but the ball arithmetic on the instance in the file contradicts it (the unique
            # minimiser has another geometry), the value statements it rests on are not VERIFIED in balls, or the
            # numbers of its statement do not prove it: the file's word alone proves nothing
            c["verdict"] = Verdict.INCONCLUSIVE.value
            c["reason"] = f"the file says VERIFIED, not confirmed on the instance in the file: {why}"
            ev["saved_verdict"] = f"withdrawn: VERIFIED in {source}, not confirmed in ball arithmetic"
            withdrawn.append(c["id"])
            continue
        if "rigorous_lower" not in ev and c.get("rigorous") is not True:
            ev["saved_verdict"] = f"carried from {source}: not judged again"
            carried.append(c["id"])
    if carried:
        out["diagnostics"].append(f"{len(carried)} verdict(s) carried from {source}, not judged again (no statement "
                                  f"about the optimum, no ball-arithmetic proof): {', '.join(carried)}")
    rejudged = [c for c in out["claims"] if "rigorous_lower" in (c.get("evidence") or {}) or c.get("rigorous") is True]
    if withdrawn:
        out["diagnostics"].append(f"{len(withdrawn)} VERIFIED verdict(s) of {source} withdrawn (INCONCLUSIVE): the "
                                  f"ball arithmetic does not confirm them on the instance in the file: "
                                  f"{', '.join(withdrawn)}")
    if withdrawn or (not rejudged and out.get("verdict") == Verdict.VERIFIED.value):
        v, reason = summarise(checks_of_report(out), what="statements")
        if v is Verdict.VERIFIED and not rejudged:
            # every verdict is the file's: the file's word alone proves nothing
            v, reason = Verdict.INCONCLUSIVE, (f"no statement of {source} was judged again in ball arithmetic (its "
                                               "VERIFIED verdicts are carried from the file, not proven by it)")
        out["verdict"], out["reason"] = v.value, reason
        out["rigorous"] = False
    out["rejudged_from"] = {"path": source, **{k: report.get(k) for k in ("ncproofs_version", "git_commit")}}
    return out


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
# `run --rigorous`: live reports and checks
# ---------------------------------------------------------------------------------------------------

def _report_rigorous(view: dict, checks) -> bool:
    """As ClaimResult.rigorous: VERIFIED, at least one check judged in balls and every judged one proven."""
    judged = [c.rigorous for c in checks if c.rigorous is not None]
    return bool(summarise(checks, what="statements")[0] is Verdict.VERIFIED and judged and all(judged))


def judge_report(rep, ctx=None, *, prec: int | None = None):
    """``rep`` (a :class:`proofs_check.core.SolveReport`) with its checks re-judged in ball arithmetic when
    ``ctx.rigorous`` (``ncproofs run --rigorous``), else ``rep`` unchanged. The recipe bounds the candidate in
    ``rep.live`` when the family's check left one there. Returns a new SolveReport (``Check.rigorous`` set on
    the judged checks, ``certificate["rigorous"]``, the diagnostics of :func:`rejudge`)."""
    import copy

    if ctx is not None and not getattr(ctx, "rigorous", False):
        return rep
    view = {"family": rep.family, "instance": rep.instance, "predicted": rep.predicted, "live": rep.live}
    checks, rig, diags, _ = rejudge(view, list(rep.claims), prec=prec)
    new = copy.copy(rep)
    new.claims = checks
    new.certificate = {**(rep.certificate or {}), "rigorous": rig}
    new.diagnostics = list(rep.diagnostics) + diags
    return new


def judge_checks(family: str, instance: dict, checks, ctx=None, *, live: dict | None = None,
                 prec: int | None = None, **_unused) -> list:
    """Checks that a claim built for one instance of ``family`` (``instance``: the dict its ``check_instance``
    report would hold), re-judged like :func:`judge_report` when ``ctx.rigorous``; unchanged otherwise. Each
    check is judged by its own statement, whatever its name (``value_names`` of earlier versions is accepted
    and not needed)."""
    checks = list(checks)
    if ctx is not None and not getattr(ctx, "rigorous", False):
        return checks
    view = {"family": family, "instance": instance, "predicted": {}, "live": dict(live or {})}
    out, _, diags, _ = rejudge(view, checks, prec=prec)
    if diags:
        for c in out:
            if c.rigorous is False:
                c.evidence.setdefault("rigorous_diagnostics", list(diags))
    return out
