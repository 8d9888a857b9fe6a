"""Claims of the deep unconstrained features model (docs/deep_ufm.md).

Sources: Dang et al., ICML 2023 (deep linear networks, MSE, balanced and imbalanced: the scalar reduction);
Súkeník, Lampert, Mondelli, NeurIPS 2024 (arXiv 2405.14468: DNC is not optimal beyond two layers and two
classes); Garrod and Keating, NeurIPS 2025 (arXiv 2410.23169: low-rank bias under cross-entropy). Only the
abstracts were available: the theorems are reconstructed (provenance "reconstructed") and everything used is
derived in docs/deep_ufm.md.

Every claim is built by a factory taking the statement's prediction (optimal value, optimal rank, DNC value,
"DNC is optimal", the CE rank bound), so tests feed false variants and see them REFUTED.
"""

from __future__ import annotations

import functools
import math
from typing import Callable, Iterable

import numpy as np

from proofs_check.core import (Check, Claim, Provenance, RunContext, SolveReport, Verdict, close, condition, exceeds,
                               fmt, hypothesis_fails, is_finite, lower_bound_claim, optimum_matches, symbolic_zero,
                               tolerance, within)
from solvers import deep_ufm as S
from theory import deep_ufm as T

FAMILY = "deep_ufm"
SRC_DANG = ("Dang et al., ICML 2023 (neural collapse in deep linear networks, balanced and imbalanced); "
            "docs/deep_ufm.md, Reduction")
SRC_SUKENIK = ("Súkeník, Lampert, Mondelli, NeurIPS 2024 (arXiv 2405.14468, neural collapse versus low-rank bias); "
               "docs/deep_ufm.md, DNC")
SRC_SML2023 = ("Súkeník, Mondelli, Lampert, NeurIPS 2023 (arXiv 2305.13165, deep neural collapse is provably optimal "
               "for binary classification); docs/deep_ufm.md, Two classes")
SRC_GK = ("Garrod and Keating, NeurIPS 2025 (arXiv 2410.23169, persistence of neural collapse despite low-rank "
          "bias); docs/deep_ufm.md, Cross-entropy")

#: values: the realised optimum is evaluated in float64 over <= 10^5 terms of size O(1) (error ~1e-14 relative);
#: 1e-10 relative leaves room and refutes a value off by 1e-8 relative
VALUE_RTOL, VALUE_ATOL = 1e-10, 1e-14
#: a multi-start value below the proven lower bound by more than this (relative) refutes the certificate
GD_RTOL = 1e-9
#: CE singular-value threshold (absolute, on the N-sample output) of the quick instances
CE_TAU = 0.1
#: accepted tau (1e-320 made the bound divide by 0; the float64 solver resolves no singular values outside)
CE_TAU_RANGE = (1e-12, 1e6)
#: the full model (one column per sample) is used for the multi-start check up to this many samples
FULL_MODEL_SAMPLES = 200


# ------------------------------------------------------------------------------------------
# symbolic checks (cached: they do not depend on the instance beyond L)
# ------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _symbolic(L: int) -> tuple:
    out = [symbolic_zero("stationarity-polynomial", T.derivation_stationarity(L))]
    if L >= 2:
        out.append(symbolic_zero("q-critical-point", T.derivation_qmin(L)))
    prod, reg = T.derivation_balanced_factorisation(L)
    out.append(symbolic_zero("balanced-factorisation-product", prod))
    out.append(symbolic_zero("balanced-factorisation-regulariser", reg))
    out.append(symbolic_zero("am-gm-step", T.derivation_amgm_two()))
    import sympy as sp

    out.append(symbolic_zero("balancedness-identity", sp.Add(*[x ** 2 for x in T.derivation_balancedness()])))
    return tuple(out)


#: the names of the sympy checks (proven symbolically, not by the certificates' arithmetic)
_SYMBOLIC_NAMES = ("stationarity-polynomial", "q-critical-point", "balanced-factorisation-", "am-gm-step",
                   "balancedness-identity")


def symbolic_checks(L: int) -> list[Check]:
    return [Check(c.name, c.verdict, c.reason, dict(c.evidence), c.independent) for c in _symbolic(int(L))]


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------

def _strictly_below(name: str, bound: float | None, *, feasible_value: float | None, exact: bool,
                    proven_lower: float | None, tol: float, evidence: dict | None = None) -> Check:
    """The statement "min < bound" (a local helper; core has no strict builder): VERIFIED by a feasible point
    proven below ``bound`` (``exact``: its value was compared exactly), REFUTED by a proven lower bound >=
    bound - tol, INCONCLUSIVE otherwise."""
    ev = dict(evidence or {})
    ev.update(bound=bound, feasible_value=feasible_value, proven_lower_bound=proven_lower, tolerance=tol,
              exact_comparison=exact)
    if not is_finite(bound):
        return Check(name, Verdict.INCONCLUSIVE, "no finite bound to compare with", ev)
    if exact and is_finite(feasible_value):
        return Check(name, Verdict.VERIFIED, f"a feasible point attains {fmt(feasible_value)} < {fmt(bound)} "
                     "(exact rational evaluation)", ev)
    if is_finite(feasible_value) and exceeds(bound - feasible_value, tol):
        return Check(name, Verdict.VERIFIED, f"a feasible point attains {fmt(feasible_value)} < {fmt(bound)}", ev)
    if is_finite(proven_lower) and within(bound - proven_lower, tol):
        ev["witness_gap"] = proven_lower - bound
        return Check(name, Verdict.REFUTED, f"proven lower bound {fmt(proven_lower)} >= {fmt(bound)} - tolerance", ev)
    return Check(name, Verdict.INCONCLUSIVE, "no point proven below the bound and no proven lower bound at it", ev)


def _budget_model(inst: T.DeepUFMInstance, starts: int, max_evals: int, collapsed: bool) -> None:
    S.check_budget(S.DeepModel(inst, collapsed=collapsed), starts, max_evals)


def _eval_point(inst, svals, seed=0):
    """The realised optimum evaluated in the full model (one column per sample) up to 10^5 samples."""
    collapsed = inst.N > 100_000
    model, x = S.linear_point(inst, svals, collapsed=collapsed, seed=seed)
    return model.value(x), ("collapsed" if collapsed else "full"), model, x


# ------------------------------------------------------------------------------------------
# one instance: every statement (the report of `ncproofs solve deep-ufm`)
# ------------------------------------------------------------------------------------------

def check_instance(inst: T.DeepUFMInstance, *, starts: int = 3, seed: int = 0, max_evals: int = 3000,
                   predict_value: Callable | None = None, predict_rank: Callable | None = None,
                   predict_dnc_value: Callable | None = None, predict_dnc_optimal: Callable | None = None,
                   ce_bound: Callable | None = None, tau: float = CE_TAU, search: bool = True,
                   symbolic: bool = True, backend: dict | None = None,
                   predict_relu_bound: Callable | None = None,
                   predict_relu_two_class: Callable | None = None) -> SolveReport:
    """Every statement about one deep UFM instance (docs/deep_ufm.md).

    Linear MSE: the certified optimum (``optimal-value``), the rank of every minimiser (``optimal-rank``), the
    multi-start check, the sympy steps, the DNC statements; ReLU MSE: the DNC value and "DNC is optimal" against
    a stored or searched witness evaluated exactly and against the proven ReLU chain bound (``relu-lower-bound``:
    "min >= predict_relu_bound(inst)"; for K = 2 ``relu-two-class-bound``: "min >= predict_relu_two_class(inst)",
    default the linear optimum); CE: the rank-bound measurement. ``predict_*`` and ``ce_bound``
    replace the theory (tests feed false ones); ``backend`` = {"backend", "device", "dtype"} for the local solves.

    Returns a :class:`proofs_check.core.SolveReport`. Raises ``InputError`` for ``starts`` or ``max_evals`` < 1
    and when a search exceeds its work budget (estimated before any work)."""
    import time

    t0 = time.perf_counter()
    rep = SolveReport(FAMILY, inst.to_dict())
    from theory._validate import InputError, as_float, as_int

    # checked here, not only by the CLI: nan / 2.5 / None raised TypeErrors naming nothing, True ran as 1
    starts, max_evals = as_int("starts", starts, minimum=1), as_int("max_evals", max_evals, minimum=1)
    seed = as_int("seed", seed, minimum=0)
    tau = as_float("tau", tau, positive=True)
    if not CE_TAU_RANGE[0] <= tau <= CE_TAU_RANGE[1]:
        raise InputError(f"tau must be in [{CE_TAU_RANGE[0]:g}, {CE_TAU_RANGE[1]:g}], got {tau:g}")
    from solvers.common import blas_threads

    with blas_threads(0):  # small products: threaded BLAS was measured 10-100x slower on the loaded machine
        _dispatch(rep, inst, starts=starts, seed=seed, max_evals=max_evals, predict_value=predict_value,
                  predict_rank=predict_rank, predict_dnc_value=predict_dnc_value,
                  predict_dnc_optimal=predict_dnc_optimal, ce_bound=ce_bound, tau=tau, search=search,
                  symbolic=symbolic, backend=dict(backend or {}), predict_relu_bound=predict_relu_bound,
                  predict_relu_two_class=predict_relu_two_class)
    rep.seconds = time.perf_counter() - t0
    return rep


def _dispatch(rep, inst, *, starts, seed, max_evals, predict_value, predict_rank, predict_dnc_value,
              predict_dnc_optimal, ce_bound, tau, search, symbolic, backend, predict_relu_bound=None,
              predict_relu_two_class=None) -> None:
    if inst.loss == "mse" and inst.activation == "relu" and inst.layers == 1:
        rep.diagnostics.append("L = 1: there is no ReLU between weight layers, the model is the linear one")
        inst = T.DeepUFMInstance(1, "linear", "mse", inst.counts, inst.width, inst.lams)
    if inst.loss == "ce":
        _ce_statements(rep, inst, starts=starts, seed=seed, max_evals=max_evals, bound=ce_bound or T.ce_rank_bound,
                       tau=tau, backend=backend)
    elif inst.activation == "linear":
        _linear_mse_statements(rep, inst, starts=starts, seed=seed, max_evals=max_evals,
                               predict_value=predict_value, predict_rank=predict_rank,
                               predict_dnc_value=predict_dnc_value, predict_dnc_optimal=predict_dnc_optimal,
                               symbolic=symbolic, backend=backend)
    else:
        _relu_mse_statements(rep, inst, starts=starts, seed=seed, max_evals=max_evals,
                             predict_dnc_value=predict_dnc_value, predict_dnc_optimal=predict_dnc_optimal,
                             search=search, backend=backend, predict_relu_bound=predict_relu_bound,
                             predict_relu_two_class=predict_relu_two_class)


def _dnc_checks(rep, inst, *, optimum_upper, optimum_lower, optimum_exact: bool, predict_dnc_value,
                predict_dnc_optimal, searched: int | None, lower_rank_info: dict | None = None) -> None:
    """The DNC value (prediction vs ball-arithmetic enclosure vs the DNC point evaluated in the model) and
    "DNC is optimal" (prediction) against the best point / proven lower bound."""
    failed = T.dnc_hypotheses(inst)
    if failed:
        rep.claims.append(hypothesis_fails("dnc-value", "; ".join(failed)))
        rep.claims.append(hypothesis_fails("dnc-optimal", "; ".join(failed)))
        return
    enc = S.certify_dnc(inst)
    pred = (predict_dnc_value or T.dnc_value)(inst)
    sc = T.scalar_solution(math.sqrt(inst.n), inst.N, T.reg_constant(inst), inst.layers)
    model, x = S.dnc_point(inst, sc.s_plus)
    v_point = model.value(x)
    tol = tolerance(v_point, rtol=VALUE_RTOL, atol=VALUE_ATOL)
    rep.predicted["dnc_value"] = pred
    rep.extra.setdefault("dnc", {}).update(enclosure=list(enc) if enc else None, point_value=v_point,
                                           s_plus=sc.s_plus)
    # the DNC value: the best point of the DNC family (proven enclosure) against the prediction; the DNC point's
    # model value must lie in the enclosure too (independent: the network evaluated, not the scalar formula)
    if enc is None:
        rep.claims.append(Check("dnc-value", Verdict.INCONCLUSIVE, "the DNC scale could not be isolated", {}))
    else:
        lo, hi = enc
        ok_point = within(lo - v_point, tol) and within(v_point - hi, tol)
        if not is_finite(pred):
            rep.claims.append(Check("dnc-value", Verdict.INCONCLUSIVE, "no finite predicted DNC value", {}))
        elif exceeds(lo - pred, tol) or exceeds(pred - hi, tol):
            rep.claims.append(Check("dnc-value", Verdict.REFUTED, f"predicted DNC value {fmt(pred)} outside the proven "
                                    f"enclosure [{fmt(lo)}, {fmt(hi)}] of the best DNC value",
                                    {"predicted": pred, "enclosure": [lo, hi], "point_value": v_point,
                                     "tolerance": tol}))
        elif not ok_point:
            rep.claims.append(Check("dnc-value", Verdict.REFUTED, f"the DNC point evaluates to {fmt(v_point)}, outside "
                                    f"[{fmt(lo)}, {fmt(hi)}]", {"enclosure": [lo, hi], "point_value": v_point}))
        else:
            rep.claims.append(Check("dnc-value", Verdict.VERIFIED, f"best DNC value {fmt(pred)} in the proven "
                                    f"enclosure [{fmt(lo)}, {fmt(hi)}]; the DNC point evaluates to {fmt(v_point)}",
                                    {"predicted": pred, "enclosure": [lo, hi], "point_value": v_point,
                                     "tolerance": tol, "certificate": "root isolation of the scalar problem",
                                     "arithmetic": S.arithmetic()}))
    if enc is None:
        rep.claims.append(Check("dnc-optimal", Verdict.INCONCLUSIVE, "no DNC enclosure", {}))
        return
    optimal = (predict_dnc_optimal or T.literature_dnc_optimal)(inst)
    rep.predicted["dnc_optimal"] = bool(optimal)
    ev = {"predicted_dnc_optimal": bool(optimal), "dnc_enclosure": list(enc), "best_value": optimum_upper,
          "proven_lower_bound": optimum_lower, "starts": searched, **(lower_rank_info or {})}
    tol = tolerance(enc[1], rtol=VALUE_RTOL, atol=VALUE_ATOL)
    if optimal:  # "min = DNC value": a point below refutes, a matching proven lower bound verifies
        if optimum_exact and is_finite(optimum_upper):
            rep.claims.append(Check("dnc-optimal", Verdict.REFUTED, f"'DNC is optimal' refuted: a feasible point "
                                    f"attains {fmt(optimum_upper)} < best DNC value {fmt(enc[0])} (exact evaluation)",
                                    {**ev, "witness_gap": enc[0] - optimum_upper}))
            return
        # the DNC point at the exact s_+ is a feasible point of either model (nonnegative: ReLU is inactive), so
        # enc[1] bounds a feasible value too (an unconverged search must not hide it)
        attained = optimum_upper if not is_finite(optimum_upper) else min(optimum_upper, enc[1])
        rep.claims.append(optimum_matches("dnc-optimal", 0.5 * (enc[0] + enc[1]), attained=attained,
                                          lower_bound=optimum_lower, tol=tol, evidence=ev,
                                          certificate=("deep linear scalar reduction" if inst.activation == "linear"
                                                       else "ReLU lower bound (docs/deep_ufm.md)")
                                          if optimum_lower is not None else ""))
        c = rep.claims[-1]
        if optimum_lower is None and c.verdict is Verdict.INCONCLUSIVE:
            c.reason = (f"not proven: no lower bound for the {inst.activation} model (non-convex); best of "
                        f"{searched} starts {fmt(optimum_upper)} >= best DNC value {fmt(enc[0])}")
        elif inst.activation == "relu" and c.verdict is Verdict.INCONCLUSIVE and is_finite(optimum_lower):
            gap = enc[0] - optimum_lower
            c.evidence.update(gap=gap, relative_gap=gap / enc[0])
            which = ("two-class bound" if inst.K == 2 else
                     "ReLU chain bound; the missing step: docs/deep_ufm.md, 'What is missing for L = 2, K >= 3'")
            c.reason = (f"not proven: the proven lower bound {fmt(optimum_lower)} ({which}) is below the best "
                        f"DNC value {fmt(enc[0])} by {fmt(gap)} ({100 * gap / enc[0]:.1f} %); no point below the DNC "
                        f"value among {searched} starts (best {fmt(optimum_upper)})")
        return
    rep.claims.append(_strictly_below("dnc-optimal", enc[0], feasible_value=optimum_upper, exact=optimum_exact,
                                      proven_lower=optimum_lower, tol=tol, evidence=ev))
    c = rep.claims[-1]
    if c.verdict is Verdict.VERIFIED:
        c.reason = "DNC is not optimal: " + c.reason
    elif c.verdict is Verdict.INCONCLUSIVE and (optimum_lower is None or inst.activation == "relu"):
        c.reason = (f"no point below the best DNC value {fmt(enc[0])} found among {searched} starts (best "
                    f"{fmt(optimum_upper)}); non-convex, " + ("no lower bound" if optimum_lower is None else
                    f"the proven lower bound {fmt(optimum_lower)} (ReLU chain bound) is below the DNC value"))


def _linear_mse_statements(rep, inst, *, starts, seed, max_evals, predict_value, predict_rank, predict_dnc_value,
                           predict_dnc_optimal, symbolic, backend) -> None:
    from theory._validate import InputError

    collapsed_gd = inst.N > FULL_MODEL_SAMPLES
    try:  # the multi-start check is an extra: over its work budget it is skipped (said in the diagnostics)
        _budget_model(inst, starts, max_evals, collapsed_gd)
        run_gd = True
    except InputError as exc:
        run_gd = False
        rep.diagnostics.append(f"multi-start check skipped: {exc}")
    cert = S.certify_linear_mse(inst)
    pred = T.linear_mse_optimum(inst)
    value = predict_value(inst) if predict_value else pred.value
    rank_pred = predict_rank(inst) if predict_rank else pred.rank
    rep.predicted.update(value=value, rank=rank_pred, singular_values=list(pred.singular_values[:64]))
    # the realised optimum from the certificate's own singular values (enclosure midpoints), evaluated in the
    # full network after random rotations: an independent computation of an upper bound
    svals = []
    counts = sorted(inst.counts, reverse=True)
    scal = cert.details["scalar"]
    for i, c in enumerate(counts):
        sc = scal.get(str(c)) if i < cert.details["rank_limit"] else None
        if sc is None or sc["branch"] == "zero":
            svals.append(0.0)
        elif sc["branch"] == "positive":
            svals.append(0.5 * (sc["s_plus"][0] + sc["s_plus"][1]))
        else:
            svals.append(pred.singular_values[i])
    attained, where, pmodel, px = _eval_point(inst, svals, seed=seed)
    tol = tolerance(value, rtol=VALUE_RTOL, atol=VALUE_ATOL)
    rep.certificate = cert.to_dict()
    rep.solution = {"value": attained, "method": f"balanced factorisation of the certified product ({where} model)",
                    "singular_values": svals[:64]}
    rep.claims.append(optimum_matches("optimal-value", value, attained=attained, lower_bound=cert.lower_bound,
                                      tol=tol, certificate=cert.method))
    rank = cert.details["rank"]
    ev = {"predicted_rank": rank_pred, "certified_rank": rank, "rank_range": cert.details["rank_range"],
          "rank_limit": cert.details["rank_limit"]}
    if rank is None:
        rep.claims.append(Check("optimal-rank", Verdict.INCONCLUSIVE, "at a rank threshold: phi(0) and phi(s_+) not "
                                "separated for some class (both ranks attain the optimum within the enclosure)", ev))
    elif rank_pred == rank:
        rep.claims.append(Check("optimal-rank", Verdict.VERIFIED, f"every global minimiser's product has rank {rank} "
                                f"(each scalar problem has a unique minimiser, proven in {S.arithmetic()})", ev))
    else:
        rep.claims.append(Check("optimal-rank", Verdict.REFUTED, f"predicted rank {rank_pred}, but every global "
                                f"minimiser's product has rank {rank} (proven)", ev))
    # multi-start gradient descent on the full deep model never goes below the certificate (a test that can fail)
    if symbolic:
        rep.claims.extend(symbolic_checks(inst.layers))
    rep.geometry["best_point"] = S.layer_structure(pmodel, px)
    if not run_gd:
        _dnc_checks(rep, inst, optimum_upper=attained, optimum_lower=cert.lower_bound, optimum_exact=False,
                    predict_dnc_value=predict_dnc_value, predict_dnc_optimal=predict_dnc_optimal, searched=0)
        return
    sol = S.multistart(inst, starts=starts, seed=seed, max_evals=max_evals, collapsed=collapsed_gd, **backend)
    gtol = tolerance(cert.lower_bound, rtol=GD_RTOL, atol=VALUE_ATOL)
    below = exceeds(cert.lower_bound - sol.value, gtol)
    rep.routes["multistart"] = {k: v for k, v in sol.to_dict().items() if k != "runs"}
    rep.routes["multistart"]["values"] = [r["value"] for r in sol.diagnostics["runs"]]
    rep.claims.append(condition("multistart-above-certificate", not below and is_finite(sol.value),
                                verified=f"best of {sol.diagnostics['starts']} L-BFGS starts on the "
                                f"{'collapsed' if collapsed_gd else 'full'} model: {fmt(sol.value)} >= proven "
                                f"lower bound {fmt(cert.lower_bound)}",
                                refuted=f"a local solve attains {fmt(sol.value)} < proven lower bound "
                                f"{fmt(cert.lower_bound)}: the certificate is wrong",
                                evidence={"best": sol.value, "lower_bound": cert.lower_bound, "tolerance": gtol}))
    rep.geometry["multistart_best"] = S.layer_structure(sol.variables["model"], sol.variables["x"])
    _dnc_checks(rep, inst, optimum_upper=attained, optimum_lower=cert.lower_bound, optimum_exact=False,
                predict_dnc_value=predict_dnc_value, predict_dnc_optimal=predict_dnc_optimal,
                searched=sol.diagnostics["starts"])


def _relu_mse_statements(rep, inst, *, starts, seed, max_evals, predict_dnc_value, predict_dnc_optimal,
                         search, backend, predict_relu_bound=None, predict_relu_two_class=None) -> None:
    stored = S.find_stored_witness(inst)
    if search and stored is None:
        _budget_model(inst, starts + 1, max_evals, True)
    candidates = []
    if stored is not None:
        candidates.append(S.witness_report(inst, stored, origin="stored witness (solvers/deep_ufm_witnesses.json)"))
    searched = 0
    if search and (stored is None or starts > 0):
        r = S.witness_search(inst, starts=starts, seed=seed, max_evals=max_evals, **backend)
        searched = r["search"]["starts"]
        rep.routes["search"] = {"starts": searched, "evaluations": r["search"].get("evaluations"),
                                "runs": [{k: v for k, v in run.items()} for run in r["runs"]]}
        candidates.append(r)
    if not candidates:
        rep.claims.append(Check("dnc-optimal", Verdict.INCONCLUSIVE, "no search was run", {}))
        return
    best = min(candidates, key=lambda c: c["value_exact"])
    rep.solution = {"value": best["value_exact"], "value_float": best["value_float"], "method": best["origin"],
                    "exact": True, "starts": searched}
    rep.geometry["best_point"] = best["structure"]
    bound = S.certify_relu_chain_bound(inst)
    two = S.certify_relu_two_column_bound(inst)  # N = 2, L = 2: the linear optimum's bound holds (a lemma)
    binary = S.certify_relu_two_class_bound(inst)  # K = 2, any L: the linear optimum's bound holds (a theorem)
    lower = None if bound is None else bound["lower_bound"]
    for extra in (two, binary):
        if extra is not None and is_finite(extra["lower_bound"]) and (lower is None or extra["lower_bound"] > lower):
            lower = extra["lower_bound"]
    rep.certificate = {"lower_bound": lower, "chain": bound, "two_column": two, "two_class": binary}
    rep.extra["lower_bound"] = lower
    if bound is None and binary is None:
        rep.diagnostics.append("ReLU model: no proven lower bound on the global optimum for unbalanced classes "
                               "(K >= 3); the best value is an upper bound only")
    if bound is not None:
        _relu_bound_checks(rep, inst, bound, best, predict_relu_bound, lower)
    if binary is not None:
        _relu_two_class_check(rep, inst, binary, best, predict_relu_two_class)
    info = {"witness_origin": best["origin"], "witness_exact_value": best["value_exact_fraction"],
            "feature_ranks": [f["rank"] for f in best["structure"]["features"]]}
    _dnc_checks(rep, inst, optimum_upper=best["value_exact"], optimum_lower=lower,
                optimum_exact=bool(best["below_dnc_proven"]), predict_dnc_value=predict_dnc_value,
                predict_dnc_optimal=predict_dnc_optimal, searched=searched + (stored is not None),
                lower_rank_info=info)
    if best["below_dnc_proven"]:
        fr = info["feature_ranks"]
        rep.extra["witness"] = {"value_exact": best["value_exact"], "fraction": best["value_exact_fraction"],
                                "feature_ranks": fr, "x": [float(v).hex() for v in best["x"]]}


def _relu_two_class_check(rep, inst, binary: dict, best: dict, predict) -> None:
    """K = 2: "min of the ReLU model >= predict(inst)" (default the deep linear optimum's value,
    :func:`theory.deep_ufm.linear_mse_optimum` of the identity twin; docs/deep_ufm.md, "Two classes, any depth"):
    VERIFIED by the certificate of :func:`solvers.deep_ufm.certify_relu_two_class_bound`, REFUTED by a feasible
    point below the claimed bound (the best point found, evaluated exactly, or the DNC point)."""
    if predict is None:
        lin = T.DeepUFMInstance(inst.layers, "linear", "mse", inst.counts, inst.width, inst.lams)
        claimed = T.linear_mse_optimum(lin).value
    else:
        claimed = predict(inst)
    dnc = S.certify_dnc(inst)
    feasible = min([best["value_exact"]] + ([dnc[1]] if dnc else []))
    rep.predicted["relu_two_class_bound"] = claimed
    rep.claims.append(lower_bound_claim("relu-two-class-bound", claimed, proven_lower=binary["lower_bound"],
                                        feasible_value=feasible,
                                        tol=tolerance(binary["lower_bound"], rtol=VALUE_RTOL, atol=VALUE_ATOL),
                                        certificate=binary["method"],
                                        evidence={"best_point_exact": best["value_exact"],
                                                  "dnc_upper": dnc[1] if dnc else None}))


def _relu_bound_checks(rep, inst, bound: dict, best: dict, predict_relu_bound, strongest: float) -> None:
    """"min >= B" for the derived ReLU chain bound B (``relu-lower-bound``: VERIFIED by the ball-arithmetic
    certificate, REFUTED by a feasible point below B: the best point found, evaluated exactly, or the DNC point),
    and the best point found never below the proven bound (``relu-search-above-bound``: a test of the proof that
    can fail; against the strongest proven bound)."""
    lower = bound["lower_bound"]
    claimed = (predict_relu_bound or T.relu_chain_bound)(inst)
    dnc = S.certify_dnc(inst)
    feasible = min([best["value_exact"]] + ([dnc[1]] if dnc else []))
    tol = tolerance(lower, rtol=VALUE_RTOL, atol=VALUE_ATOL)
    rep.predicted["relu_lower_bound"] = claimed
    rep.claims.append(lower_bound_claim("relu-lower-bound", claimed, proven_lower=lower, feasible_value=feasible,
                                        tol=tol, certificate=bound["method"],
                                        evidence={"best_point_exact": best["value_exact"],
                                                  "dnc_upper": dnc[1] if dnc else None}))
    # value_exact is the exact rational rounded to nearest: value_exact > lower (a float) implies exact > lower
    v, lower = best["value_exact"], strongest
    rep.claims.append(condition("relu-search-above-bound", bool(v > lower), inconclusive=bool(v == lower),
                                verified=f"the best point found ({best['origin']}, exact value "
                                f"{fmt(best['value_exact'])}) is above the proven lower bound {fmt(lower)}",
                                refuted=f"a point with exact value {fmt(best['value_exact'])} lies below the "
                                f"'proven' lower bound {fmt(lower)}: the bound is wrong",
                                evidence={"best_exact": best["value_exact"], "lower_bound": lower}))


def _ce_statements(rep, inst, *, starts, seed, max_evals, bound, tau, backend) -> None:
    m = S.ce_rank_measurement(inst, tau, seeds=(seed, seed + 1), starts=starts, max_evals=max_evals, **backend)
    B = bound(inst, tau)
    best = min(m["per_seed"], key=lambda p: p["value"])
    rep.solution = {"value": best["value"], "method": "multi-start L-BFGS (class-collapsed)", "seeds": m["per_seed"]}
    rep.predicted["rank_bound"] = B
    rep.claims.append(ce_bound_check("rank-bound", inst, m, B))


def ce_bound_check(name: str, inst, m: dict, B) -> Check:
    """Measurement: counts at the best points of every seed against the bound B. VERIFIED: every seed's best point
    obeys it (stated as a measurement); REFUTED: the lowest point found violates it; INCONCLUSIVE: the seeds
    disagree."""
    per = m["per_seed"]
    best = min(per, key=lambda p: p["value"])
    counts = [p["count"] for p in per]
    ev = {"bound": B, "tau": m["tau"], "counts": counts, "values": [p["value"] for p in per],
          "best_count": best["count"], "measurement": True, "activation": inst.activation}
    if inst.activation != "linear":
        ev["note"] = "the bound is derived for the linear model; for ReLU it is a conjecture being measured"
    if not isinstance(B, (int, np.integer)):
        return Check(name, Verdict.INCONCLUSIVE, "no integer bound", ev)
    zero = m.get("zero_value", math.log(inst.K))
    if best["count"] > B and not best["value"] <= zero:  # the bound is about points at or below the zero point
        return Check(name, Verdict.INCONCLUSIVE, f"the lowest point found (value {fmt(best['value'])}) is above the zero "
                     f"point's log K = {fmt(zero)}: no witness about the minimisers", ev)
    if best["count"] > B:
        return Check(name, Verdict.REFUTED, f"the lowest point found (value {fmt(best['value'])}) has {best['count']} "
                     f"singular values above tau = {m['tau']:g} > bound {B}", ev)
    if any(c > B for c in counts):
        return Check(name, Verdict.INCONCLUSIVE, f"seeds disagree: counts {counts} against bound {B}", ev)
    return Check(name, Verdict.VERIFIED, f"measured over {len(per)} seeds: counts {counts} <= bound {B} at every "
                 "best point (a measurement at points found, not a proof about the minimisers)", ev)


# ------------------------------------------------------------------------------------------
# claims (factories)
# ------------------------------------------------------------------------------------------

def _label(checks: Iterable[Check], inst: T.DeepUFMInstance) -> Iterable[Check]:
    for c in checks:
        c.name = f"{c.name} ({inst.label()})"
        yield c


def linear_optimum_instances(ctx: RunContext) -> list[T.DeepUFMInstance]:
    out = [T.balanced(3, "linear", "mse", 3, 2, 3, 0.01),
           T.DeepUFMInstance(3, "linear", "mse", (9, 4, 1, 1), 3, (0.01,)),  # imbalanced, width binds the rank
           T.DeepUFMInstance(2, "linear", "mse", (8, 3, 1), 3, (0.05,)),  # imbalanced: the minority drops out
           T.balanced(1, "linear", "mse", 2, 1, 2, 0.3)]  # convex L = 1
    if ctx.full:
        out += [T.balanced(5, "linear", "mse", 100, 5, 100, 1e-3), T.balanced(4, "linear", "mse", 4, 1, 4, 0.2),
                T.DeepUFMInstance(4, "linear", "mse", tuple(range(1, 11)), 8, (1e-3, 2e-3, 1e-3, 5e-3, 1e-2))]
    return out


def make_linear_optimum_claim(predict_value: Callable | None = None, predict_rank: Callable | None = None,
                              instances: Callable | None = None,
                              claim_id: str = "deep_ufm.linear-mse.optimum") -> Claim:
    """Statement: the deep linear MSE optimum is the sum of the scalar minima and its rank is the number of
    classes whose scalar minimiser is positive.

    Source: Dang et al. 2023 (reconstructed), derived in docs/deep_ufm.md. Conditions: linear, MSE, any counts.
    Checks: the predicted value against a feasible realised point (the full network evaluated) and a lower bound
    proven in ball arithmetic (refuted by either); the predicted rank against the proven rank; multi-start L-BFGS
    on the full model never below the proven bound; sympy checks of the reduction's steps."""

    def check(ctx: RunContext):
        for inst in (instances or linear_optimum_instances)(ctx):
            rep = check_instance(inst, starts=2 if not ctx.full else 4, seed=ctx.seed,
                                 max_evals=800 if not ctx.full else 3000,
                                 predict_value=predict_value, predict_rank=predict_rank)
            yield from _label([c for c in rep.claims if not c.name.startswith("dnc-")], inst)

    return Claim(claim_id, FAMILY, "Deep linear UFM with MSE (L layers, no bias, mean over samples): the global "
                 "minimum "
                 "equals sum_c min_{s>=0} (s - sqrt(n_c))^2/(2N) + C s^{2/(L+1)} over the min(D, K) largest classes "
                 "(C = ((L+1)/2)(lambda_H prod lambda_l)^{1/(L+1)}), attained at rank = #classes with a positive "
                 "scalar minimiser", SRC_DANG, Provenance.RECONSTRUCTED, check,
                 key=("gap", "certified_rank"))


def dnc_suboptimal_instances(ctx: RunContext) -> list[T.DeepUFMInstance]:
    out = [T.balanced(5, "relu", "mse", 3, 1, 6, 0.003), T.balanced(4, "relu", "mse", 5, 1, 8, 0.004),
           T.balanced(4, "linear", "mse", 5, 1, 5, 0.004)]  # outside the hypothesis: certified either way
    if ctx.full:
        out.append(T.balanced(4, "relu", "mse", 10, 1, 12, 0.002))
    return out


def make_dnc_suboptimal_claim(predict_optimal: Callable | None = None, predict_dnc_value: Callable | None = None,
                              instances: Callable | None = None,
                              claim_id: str = "deep_ufm.dnc.suboptimal") -> Claim:
    """Statement: with ReLU and MSE, L >= 3 layers and K >= 3 classes, DNC is not optimal: a lower-rank point has
    a strictly smaller objective than the best DNC point (for linear models the certified optimum decides).

    Source: Súkeník, Lampert, Mondelli 2024 (reconstructed). Conditions: MSE, balanced, D >= K.
    Checks: the best DNC value (prediction) against its ball-arithmetic enclosure and the DNC point's model value;
    "DNC is optimal" (``predict_optimal``) against a witness whose value is evaluated exactly (rationals) below
    the proven lower end of the DNC value (REFUTED), or for linear models against the certified optimum."""

    def check(ctx: RunContext):
        for inst in (instances or dnc_suboptimal_instances)(ctx):
            if inst.activation == "relu" and (inst.layers < 3 or inst.K < 3):
                yield hypothesis_fails(f"dnc-optimal ({inst.label()})", "L >= 3 and K >= 3 (the theorem's setting)")
                continue
            rep = check_instance(inst, starts=4 if ctx.full else 1, seed=ctx.seed, max_evals=1500,
                                 search=ctx.full or S.find_stored_witness(inst) is None,
                                 predict_dnc_optimal=predict_optimal, predict_dnc_value=predict_dnc_value,
                                 symbolic=False)
            yield from _label([c for c in rep.claims if c.name.startswith("dnc-")], inst)

    return Claim(claim_id, FAMILY, "Deep UFM with ReLU and MSE, L >= 3 layers and K >= 3 classes: deep neural "
                 "collapse is "
                 "not optimal (a lower-rank point has a strictly smaller objective than the best DNC point)",
                 SRC_SUKENIK, Provenance.RECONSTRUCTED, check, key=("witness_gap", "feature_ranks"))


def dnc_shallow_instances(ctx: RunContext) -> list[T.DeepUFMInstance]:
    """The quick profile holds the instances a certificate decides (linear: the scalar reduction; ReLU with K = 2 at
    any depth: the theorem "Two classes, any depth"; N = 2, L = 2: the two-column lemma). The full profile adds
    ReLU with L = 2 and K = 3, 5, where no proven bound reaches the DNC value yet (INCONCLUSIVE with the proven gap,
    ~30-41 %; docs/deep_ufm.md, "What is missing for L = 2, K >= 3"), and L = 5, K = 2, n = 2."""
    out = [T.balanced(2, "linear", "mse", 3, 2, 3, 0.01), T.balanced(4, "linear", "mse", 2, 2, 2, 0.01),
           T.balanced(4, "relu", "mse", 2, 1, 2, 0.01),
           T.balanced(2, "relu", "mse", 2, 1, 3, 0.01)]  # N = 2, L = 2: the two-column lemma closes the gap
    if ctx.full:
        out += [T.balanced(2, "relu", "mse", 3, 1, 3, 0.01), T.balanced(2, "relu", "mse", 5, 1, 6, 0.005),
                T.balanced(5, "relu", "mse", 2, 2, 4, 0.005)]
    return out


def make_dnc_shallow_claim(predict_optimal: Callable | None = None, predict_dnc_value: Callable | None = None,
                           instances: Callable | None = None, claim_id: str = "deep_ufm.dnc.optimal-shallow",
                           predict_relu_bound: Callable | None = None,
                           predict_relu_two_class: Callable | None = None) -> Claim:
    """Statement: for L = 2 layers or K = 2 classes (and for deep linear models), the best DNC point is a global
    minimiser.

    Source: Súkeník et al. 2023/2024 and Dang et al. 2023 (reconstructed). Conditions: MSE, balanced, D >= K.
    Checks: the DNC value against its enclosure; linear: the DNC value against the certified global optimum
    (VERIFIED when the proven lower bound matches; REFUTED by a point below); ReLU: "min = best DNC value" against
    the exactly evaluated best point found (REFUTED when below the DNC value) and the strongest proven ReLU lower
    bound (docs/deep_ufm.md): for K = 2 at any depth the deep linear optimum's certified bound (theorem "Two
    classes, any depth"), which reaches the DNC value wherever DNC is the linear optimum (VERIFIED there); for
    K >= 3 (L = 2) only the chain bound, which does not reach it, so INCONCLUSIVE with the gap stated.
    ``relu-lower-bound``: "min >= predict_relu_bound(inst)" (default the derived chain bound) and, for K = 2,
    ``relu-two-class-bound``: "min >= predict_relu_two_class(inst)" (default the linear optimum), each VERIFIED by
    its ball-arithmetic certificate and REFUTED by a feasible point below it; and the best point found never below
    the strongest proven bound (``relu-search-above-bound``, a test of the proofs)."""

    def check(ctx: RunContext):
        for inst in (instances or dnc_shallow_instances)(ctx):
            if not (inst.layers <= 2 or inst.K == 2 or inst.activation == "linear"):
                yield hypothesis_fails(f"dnc-optimal ({inst.label()})", "L <= 2 or K = 2 (or a linear model)")
                continue
            rep = check_instance(inst, starts=3 if ctx.full else 1, seed=ctx.seed, max_evals=800 if not ctx.full
                                 else 3000, predict_dnc_optimal=predict_optimal, predict_dnc_value=predict_dnc_value,
                                 symbolic=False, predict_relu_bound=predict_relu_bound,
                                 predict_relu_two_class=predict_relu_two_class)
            yield from _label([c for c in rep.claims if c.name.startswith(("dnc-", "relu-"))], inst)

    return Claim(claim_id, FAMILY, "Deep UFM with MSE, L = 2 layers or K = 2 classes (or linear): the best DNC point "
                 "is a global minimiser", SRC_SML2023 + "; " + SRC_SUKENIK + "; " + SRC_DANG, Provenance.RECONSTRUCTED,
                 check,
                 key=("gap",))


def ce_instances(ctx: RunContext) -> list[T.DeepUFMInstance]:
    Ls = (1, 2, 3, 4, 6) if ctx.full else (1, 2, 3)
    return [T.balanced(L, "linear", "ce", 5, 1, 5, 0.01) for L in Ls]


def make_ce_claim(bound: Callable | None = None, predict_trend: str = "non-increasing", final_below_dnc: bool = True,
                  instances: Callable | None = None, tau: float = CE_TAU,
                  claim_id: str = "deep_ufm.ce.low-rank-bias") -> Claim:
    """Statement (a measurement): for the deep linear CE UFM, at the best points found over 2 seeds the number of
    singular values of the output above tau obeys the derived bound at every depth, does not increase with L and,
    at the deepest L, is below the DNC count K - 1.

    Source: Garrod and Keating 2025 (reconstructed: low-rank bias as depth grows; the bound is derived in
    docs/deep_ufm.md). Conditions: CE. Checks: per depth the counts of every seed against ``bound`` (REFUTED when
    the lowest point found violates it); the trend of the lowest points' counts against ``predict_trend``
    ("non-increasing" or "constant": DNC's rank persists); the deepest count against K - 1. Never a proof."""

    def check(ctx: RunContext):
        insts = (instances or ce_instances)(ctx)
        best_counts = []
        for inst in insts:
            m = S.ce_rank_measurement(inst, tau, seeds=(ctx.seed, ctx.seed + 1), starts=2, max_evals=2000)
            B = (bound or T.ce_rank_bound)(inst, tau)
            c = ce_bound_check(f"rank-bound (L={inst.layers}, K={inst.K}, lambda={inst.lams[0]:g})", inst, m, B)
            best_counts.append(c.evidence["best_count"])
            yield c
        Ls = [i.layers for i in insts]
        ev = {"layers": Ls, "best_counts": best_counts, "tau": tau, "measurement": True, "dnc_count": insts[0].K - 1}
        if predict_trend == "constant":
            ok = len(set(best_counts)) == 1
            yield condition("trend", ok, verified=f"counts {best_counts} constant over L = {Ls} (measured)",
                            refuted=f"counts {best_counts} over L = {Ls} are not constant (measured at the best "
                            "points found)", evidence=ev)
        else:
            ok = all(b <= a for a, b in zip(best_counts, best_counts[1:]))
            yield condition("trend", ok, verified=f"counts {best_counts} non-increasing over L = {Ls} (measured)",
                            refuted=f"counts {best_counts} increase somewhere over L = {Ls} (measured)", evidence=ev)
        if final_below_dnc:
            yield condition("below-dnc-rank", best_counts[-1] < insts[-1].K - 1,
                            verified=f"at L = {Ls[-1]} the lowest point found has {best_counts[-1]} < K - 1 = "
                            f"{insts[-1].K - 1} singular values above tau (measured)",
                            refuted=f"at L = {Ls[-1]} the count {best_counts[-1]} is not below K - 1 (measured)",
                            evidence=ev)

    return Claim(claim_id, FAMILY, "Deep linear UFM with cross-entropy (measured at the best points found over 2 "
                 "seeds, "
                 f"tau = {tau:g}): the number of output singular values above tau is at most floor(log K / (C "
                 "tau^{2/(L+1)})) at every depth, does not increase with L, and falls below the DNC count K - 1",
                 SRC_GK, Provenance.RECONSTRUCTED, check, key=("best_counts",), tags=("measurement",))


def _with_arithmetic(claim: Claim) -> Claim:
    """Each check of the claim (but the sympy steps and failed hypotheses) says which arithmetic proved the
    certificates it rests on (``evidence["arithmetic"]``:
    python-flint arb when installed, else exact rationals with the standard library; both are rigorous, see
    docs/deep_ufm.md, "Without python-flint"). The CE claim is a measurement and proves nothing with them."""
    inner = claim.check

    def check(ctx: RunContext):
        how = S.arithmetic()
        for c in inner(ctx):
            # sympy proves the symbolic steps; a failed hypothesis proves nothing
            if (isinstance(c.evidence, dict) and not c.name.startswith(_SYMBOLIC_NAMES)
                    and c.verdict is not Verdict.NOT_APPLICABLE):
                c.evidence.setdefault("arithmetic", how)
            yield c

    import dataclasses

    return dataclasses.replace(claim, check=check)


CLAIMS = [_with_arithmetic(c) for c in (make_linear_optimum_claim(), make_dnc_suboptimal_claim(),
                                        make_dnc_shallow_claim())] + [make_ce_claim()]
