"""Claims of the classic UFM family (docs/ufm.md) and the per-instance check used by
``ncproofs solve ufm-ce|ufm-mse``.

``check_instance`` returns a :class:`proofs_check.core.SolveReport`. It asks the classic engine once
(:func:`solvers.ufm_classic.solve_instance`: the routes planned from size estimates with why, the closed
form's point, its KKT dual certificate, phase and uniqueness certificate, the convex and factored routes,
the geometry evidence at Z* and at each solver point) and only states and judges:
- the optimal value (the prediction against the best feasible value and the best proven lower bound);
- the statements about every minimiser (uniqueness, geometry, collapse, self-duality, bias), measured at
  the closed form's Z* and counted only when Z* is proven the unique minimiser (docs/ufm.md, "Uniqueness");
- "the minimiser is zero" at each solver point in the zero phase, within its proven radius (evidence only).
"""

from __future__ import annotations

import dataclasses
import math
import time
from numbers import Real
from typing import Callable

import numpy as np

from proofs_check.core import (Check, Claim, Provenance, RunContext, SolveReport, Verdict, at_certified_point,
                               exceeds, fmt, geometry_is, hypothesis_fails, is_finite, optimum_matches, point_statement,
                               symbolic_zero, tolerance, within)
from proofs_check.rigorous import judge_checks, judge_report
from proofs_check.statements import EveryMinimiser
from solvers import ufm_classic as CS
from solvers.ufm import UNIT_ROUNDOFF
from theory import geometry as G
from theory import ufm as T
from theory._validate import InputError

#: Relative tolerance on optimal values. Measured: the closed-form certificate's gap is ~5e-13 relative at
#: every tested scale (lambda 1e-12..1e12, k up to 1000; the 1e-12 slack of the dual point's spectral norm
#: dominates) and L-BFGS reaches ~1e-12 relative; 1e-9 leaves room, while a 1e-6 relative error in a formula
#: is 1000 times larger and is refuted at every scale.
VALUE_RTOL = 1e-9
#: Absolute part of the value tolerance. Every value is evaluated with relative accuracy (stable formulas)
#: and f* >= ~1e-13 in the accepted lambda range, so the absolute part is only a floor 1e17 times below
#: any optimum: it can never absorb a relative error (the old rule max(1, |f*|) 1e-8 accepted a 1% error
#: at f* = 1e-7).
VALUE_ATOL = 1e-30
#: Relative band around the phase threshold rho0 = ||grad L(0)||_2 / lam = 1 inside which float64 cannot
#: tell a vanishing simplex ETF from the zero minimiser (rho0 is computed to ~1e-15).
PHASE_RTOL = 1e-9
#: Self-duality mu_c = sqrt(lw/(n lh)) w_c at the SVD factorization of Z*: exact up to round-off (~1e-14).
SELF_DUAL_TOL = 1e-8
#: Bias statements: spread of b* and the stationarity residual max |grad_b| at (Z*, b*), relative to the
#: gradient's scale (round-off ~1e-16).
BIAS_TOL = 1e-10
#: "The minimiser is zero" judged from a solver point with its proven radius: ||Z*||_F <= this.
ZERO_POINT_TAU = 1e-6
#: The engine's route names (``solvers.ufm_classic``), re-exported for the CLI and tests.
METHODS = CS.METHODS

ZHU = "Zhu et al., NeurIPS 2021, Thm 3.1 (UFM, CE); docs/ufm.md"
ZHOU = "Zhou et al., ICML 2022; Han, Papyan & Donoho, ICLR 2022 (UFM, MSE); docs/ufm.md"
DERIVED = "ncproofs derivation (docs/ufm.md)"
HOW_UNIQUE = ("the closed form is certified optimal (dual gap <= tol) and its KKT dual "
              "G = -grad L/lam is strictly complementary off an injective face (docs/ufm.md, 'Uniqueness')")

Predictor = Callable[[T.UFMInstance], float]


def default_predict(inst: T.UFMInstance) -> float:
    return T.optimum(inst).value


def check_instance(inst: T.UFMInstance, *, method: str = "auto", starts: int = 3, seed: int = 0,
                   predict: Predictor = default_predict, expected_geometry: str | None = None,
                   backend: str = "numpy", device: str | None = None, dtype: str = "float64",
                   max_memory: float | None = None) -> SolveReport:
    """Check one instance: the closed form's value (KKT dual certificate), the uniqueness of the minimiser
    and its geometry (docs/ufm.md), with the convex and factored solvers as further routes.

    The engine (:func:`solvers.ufm_classic.solve_instance`) is asked once; this function states and judges.
    ``predict`` and ``expected_geometry`` replace the theory's statements (tests feed false ones). Routes
    are planned from size estimates before anything is allocated; ``max_memory`` (bytes) replaces the
    default limit min(0.8 * available memory, 2.5 GB).
    """
    t0 = time.perf_counter()
    if not isinstance(inst, T.UFMInstance):  # None failed inside the engine with an AttributeError
        raise InputError(f"inst must be a theory.ufm.UFMInstance, got {type(inst).__name__}")
    if not callable(predict):
        raise InputError(f"predict must be a function of the instance returning the predicted value, got "
                         f"{type(predict).__name__}")
    if expected_geometry is not None and expected_geometry not in G.GEOMETRY_CLASSES:
        raise InputError(f"expected_geometry must be one of {', '.join(G.GEOMETRY_CLASSES)}, got {expected_geometry!r}")
    sol = CS.solve_instance(inst, method=method, starts=starts, seed=seed, backend=backend, device=device,
                            dtype=dtype, max_memory=max_memory, value_rtol=VALUE_RTOL, value_atol=VALUE_ATOL,
                            phase_rtol=PHASE_RTOL)
    pred = T.optimum(inst)
    predicted = _predicted_value(predict(inst))
    exp_geo = expected_geometry or pred.geometry
    failed = sol.hypotheses_failed
    tol = tolerance(predicted, rtol=VALUE_RTOL, atol=VALUE_ATOL)
    claims = [_value_statement(sol, predicted, tol)]
    if failed:
        claims.append(_every(hypothesis_fails(f"geometry-{exp_geo}", "; ".join(failed)), "geometry", exp_geo))
    else:
        claims.extend(_minimiser_statements(sol, exp_geo, tol))
    best_route = sol.best_route
    cert = sol.certificate
    predicted_d = {"value": predicted, "geometry": exp_geo, "trivial": pred.trivial, "margin": pred.margin,
                   "threshold_s": 1.0 / inst.k, "s": T.ce_threshold(inst), "hypotheses_failed": failed}
    return SolveReport(family=f"ufm-{inst.loss}", instance=inst.to_dict(), predicted=predicted_d,
                       solution=({**best_route[1], "route": best_route[0]} if best_route else None),
                       certificate=cert.to_dict() if cert else None, geometry=_report_geometry(sol), claims=claims,
                       routes=sol.routes, diagnostics=sol.diagnostics, seconds=time.perf_counter() - t0,
                       extra={"tolerance": {"value": tol, "value_rtol": VALUE_RTOL, "value_atol": VALUE_ATOL,
                                            "phase_rtol": PHASE_RTOL}},
                       live=sol.live)  # --rigorous bounds this instance as it is


def _predicted_value(v) -> float:
    """``predict(inst)`` as a float: a real number (NaN stays NaN and is never judged); None, a string (\"0.14\" was
    parsed and judged), a boolean or an array of several numbers is refused naming ``predict``."""
    if isinstance(v, np.ndarray) and v.size == 1 and v.dtype.kind in "fiu":
        v = v.reshape(-1)[0]
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (Real, np.floating, np.integer)):
        raise InputError(f"predict(inst) must return the predicted optimal value (a real number), got "
                         f"{type(v).__name__} {v!r}"[:300])
    return float(v)


def _value_statement(sol: CS.ClassicSolution, predicted: float, tol: float) -> Check:
    """The optimal value: the prediction against the least feasible value and the best proven lower bound."""
    if sol.hypotheses_failed:
        return hypothesis_fails("optimal-value", "; ".join(sol.hypotheses_failed),
                                {"predicted": predicted, "attained": sol.attained})
    if sol.attained is None:
        return Check("optimal-value", Verdict.INCONCLUSIVE, "no feasible point computed", {"tolerance": tol})
    best = sol.certificate
    return optimum_matches("optimal-value", predicted, attained=sol.attained, lower_bound=sol.lower_bound, tol=tol,
                           converged=sol.converged, certificate=best.method if best else "",
                           evidence={"value_rtol": VALUE_RTOL, "value_atol": VALUE_ATOL,
                                     "feasible_values": dict(sol.feasible)})


def _report_geometry(sol: CS.ClassicSolution) -> dict:
    """The engine's geometry, with what each zero-phase solver point alone states about "the minimiser is
    zero" (||Z*||_F <= ZERO_POINT_TAU within its proven radius; evidence, not a statement of the report)."""
    geometry = dict(sol.geometry)
    if "solver_points" not in geometry:
        return geometry
    pts = []
    for rep in geometry["solver_points"]:
        if "radius_proof" in rep:
            st = point_statement("minimiser-zero", rep["norm_Z"], ZERO_POINT_TAU, radius=rep["radius"],
                                 how=rep["radius_proof"], what="||Z||_F").to_dict()
            rep = _insert_after(rep, "radius_proof", "statement_zero", st)
        pts.append(rep)
    geometry["solver_points"] = pts
    return geometry


def _insert_after(d: dict, after: str, key: str, value) -> dict:
    out = {}
    for k, v in d.items():
        out[k] = v
        if k == after:
            out[key] = value
    return out


def _uniqueness_statement(sol: CS.ClassicSolution, tol: float) -> tuple[Check, bool, str]:
    """"Z* is the unique minimiser" (VERIFIED when the uniqueness certificate is valid, the closed form is
    certified within ``tol`` and rho0 is outside the phase band); returns it, whether it holds, and how."""
    cert, uniq, rho0 = sol.closed_form["cert"], sol.closed_form["uniq"], sol.closed_form["phase"]["rho0"]
    gap = cert.gap
    band = sol.phase in ("threshold", "unknown")
    exact = ((sol.geometry or {}).get("phase") or {}).get("exact")
    if exact is not None and exact["zero_minimiser"]:
        # float64 put rho0 within the band; exact rationals put it <= 1: Z = 0 is a minimiser (KKT) and the
        # unique one, also at rho0 = 1 exactly (solvers.ufm_classic.exact_phase; docs/ufm.md, "Exact phase")
        unique = within(gap, tol)
        how = (f"exact phase: rho0^2 = n / (N^2 lw lh) = {exact['rho0_squared']} <= 1 in exact rational arithmetic "
               "(the doubles of lw, lh), so Z* = 0 is a minimiser (KKT at 0) and the unique one (a second minimiser "
               "would make the loss affine on a segment from 0, which CE and MSE allow only along directions that "
               "leave the loss unchanged and raise the nuclear norm; docs/ufm.md, 'Exact phase at the threshold')")
    else:
        unique = bool(uniq["valid"]) and within(gap, tol) and not band
        how = HOW_UNIQUE + f"; delta = {fmt(uniq['delta'], 3)}, face dimension {uniq['face_dimension']}"
    ev_u = {k: v for k, v in uniq.items()}
    ev_u.update(certificate_gap=gap, tolerance=tol)
    if band:
        # the closed form's phase may be the wrong one here (a vanishing simplex ETF or zero): its uniqueness
        # certificate says nothing about the true minimiser, and neither do the statements measured at it
        c = Check("minimiser-unique", Verdict.INCONCLUSIVE,
                  f"at the phase threshold: rho0 = {rho0!r} is within {PHASE_RTOL:g} of 1, where float64 "
                  "cannot tell which of a vanishing simplex ETF and zero is the minimiser", ev_u)
    elif unique:
        c = Check("minimiser-unique", Verdict.VERIFIED,
                  f"Z* is the unique minimiser (b up to a constant shift for CE with a free bias): {how}", ev_u)
    else:
        bad = [k for k, ok in uniq["conditions"].items() if not ok]
        why = (f"conditions not confirmed: {', '.join(bad)}" if bad else
               f"the closed form is not certified (gap {fmt(gap, 3)} > {fmt(tol, 3)})")
        c = Check("minimiser-unique", Verdict.INCONCLUSIVE, f"uniqueness not proven: {why}", ev_u)
    return _every(c, "unique"), unique, how


def _every(check: Check, prop: str, geometry: str | None = None) -> Check:
    """``check`` labelled with the statement it makes about every minimiser (``EveryMinimiser``: what
    ``--rigorous`` dispatches on; the verdict is the claim's own)."""
    return dataclasses.replace(check, statement=EveryMinimiser(prop, geometry))


def _minimiser_statements(sol: CS.ClassicSolution, exp_geo: str, tol: float) -> list[Check]:
    """Geometry, collapse, self-duality and bias of every minimiser, measured at the closed form's Z* (the
    engine's evidence) and counted only when Z* is proven the unique minimiser (at_certified_point with
    unique=True)."""
    inst, cert, ev_min = sol.inst, sol.closed_form["cert"], sol.minimiser
    rho0, ph = sol.closed_form["phase"]["rho0"], sol.phase
    uq, unique, how = _uniqueness_statement(sol, tol)
    out = [uq]

    def at_min(check: Check, prop: str, geometry: str | None = None) -> Check:
        return _every(at_certified_point(check, value=cert.upper, lower_bound=cert.lower_bound, tol=tol,
                                         unique=unique, how=how), prop, geometry)

    name = f"geometry-{exp_geo}"
    ev = {"rho0": rho0, "phase": ph, "phase_rtol": PHASE_RTOL, "source": "closed-form Z*, SVD factorization"}
    if ph == "threshold":
        out.append(_every(Check(name, Verdict.INCONCLUSIVE,
                         f"at the phase threshold: rho0 = ||grad L(0)||_2/lam = {rho0!r} is within {PHASE_RTOL:g} of 1, "
                         "where float64 cannot tell a vanishing simplex ETF from the zero minimiser", ev), "geometry", exp_geo))
    elif ph == "unknown":
        out.append(_every(Check(name, Verdict.INCONCLUSIVE, "the phase ratio is not a finite number", ev), "geometry",
                          exp_geo))
    else:
        out.append(at_min(geometry_is(name, exp_geo, ev_min["classification"], evidence=ev), "geometry", exp_geo))
    if ph == "collapse":
        # Z* has equal columns within each class (class coordinates), so every balanced factorization has
        # h_i = mu_{y_i}: a structural fact of the candidate (consistency), made about every minimiser by uniqueness.
        out.append(at_min(Check("collapse", Verdict.VERIFIED,
                                "Z* is class-constant, so its factorization has h_i = mu_{y_i} (NC1 = 0)",
                                {"NC1": 0.0, "structure": "Z* = Zc (I_k kron 1_n^T)"}, independent=False), "collapse"))
        if inst.loss == "ce":
            sd = ev_min["self_duality_error"]
            ok = sd is not None and within(sd, SELF_DUAL_TOL)
            c = Check("self-duality", Verdict.VERIFIED if ok else (Verdict.REFUTED if is_finite(sd) else Verdict.INCONCLUSIVE),
                      f"||mu - sqrt(lw/(n lh)) W^T||/||mu|| = {fmt(sd, 3)} " + ("<=" if ok else ">") + f" {SELF_DUAL_TOL:g}",
                      {"self_duality_error": sd, "tolerance": SELF_DUAL_TOL})
            out.append(at_min(c, "self-duality"))
    out.append(at_min(_bias_check(inst, ev_min["bias"]), "constant-bias" if inst.loss == "ce" else "bias-one-over-k"))
    return out


def _bias_check(inst: T.UFMInstance, bias: dict) -> Check:
    """CE: the bias of every minimiser is constant (b* = 0 up to the free constant shift); MSE: b = 1/k.
    Judged from the engine's spread/offset of b* and the stationarity residual max |grad_b f| at (Z*, b*)."""
    resid, scale = bias["stationarity_residual"], bias["gradient_scale"]
    ev = {"bias": bias["bias"], "stationarity_residual": resid, "tolerance": BIAS_TOL}
    resid_ok = within(resid, BIAS_TOL * scale + 64 * UNIT_ROUNDOFF)
    if inst.loss == "ce":
        spread = bias["bias_spread"]
        ev["bias_spread"] = spread
        ok = within(spread, BIAS_TOL) and resid_ok
        return Check("constant-bias", Verdict.VERIFIED if ok else Verdict.INCONCLUSIVE,
                     f"b* spread {fmt(spread, 3)}, stationarity residual {fmt(resid, 3)}", ev)
    off = bias["max_abs_b_minus_1_over_k"]
    ev["max_abs_b_minus_1_over_k"] = off
    ok = within(off, BIAS_TOL) and resid_ok
    return Check("bias-one-over-k", Verdict.VERIFIED if ok else Verdict.INCONCLUSIVE,
                 f"max |b* - 1/k| = {fmt(off, 3)}, stationarity residual {fmt(resid, 3)}", ev)


# ---------------------------------------------------------------------------------------
# Claim factories (tests feed false statements through ``predict`` / ``expected``)
# ---------------------------------------------------------------------------------------

def _instances(loss: str, ctx: RunContext, phase: str) -> list[T.UFMInstance]:
    if loss == "ce":
        quick = {"collapse": [(3, 2, 3, 0.01, 0.01, 0.0), (5, 2, 5, 1e-3, 1e-3, 0.0), (4, 3, 6, 5e-3, 2e-2, 1e-2)],
                 "trivial": [(4, 2, 4, 0.2, 0.2, 0.0), (3, 1, 2, 0.5, 0.8, 0.0)]}
        full = {"collapse": [(6, 4, 8, 1e-3, 3e-3, 0.0), (8, 2, 7, 1e-4, 1e-3, 1e-3), (10, 3, 12, 2e-3, 2e-3, 0.0)],
                "trivial": [(6, 3, 6, 0.1, 0.2, 0.0)]}
    else:
        quick = {"collapse": [(3, 2, 3, 0.01, 0.01, 0.0), (3, 4, 3, 0.05, 0.05, 0.0), (5, 2, 4, 1e-3, 5e-3, 0.0)],
                 "trivial": [(3, 2, 3, 0.2, 0.2, 0.0)]}
        full = {"collapse": [(8, 3, 8, 1e-3, 1e-3, 0.0), (10, 2, 9, 2e-3, 1e-3, 0.0)],
                "trivial": [(6, 2, 6, 0.3, 0.1, 0.0)]}
    rows = quick[phase] + (full[phase] if ctx.full else [])
    return [T.UFMInstance(loss, k, n, d, lw, lh, lb) for k, n, d, lw, lh, lb in rows]


def _tag(inst: T.UFMInstance) -> str:
    return f"k={inst.k} n={inst.n} d={inst.d} lw={inst.lw:g} lh={inst.lh:g} lb={inst.lb:g}"


def value_claim(loss: str, *, predict: Predictor = default_predict, claim_id: str | None = None,
                statement: str | None = None) -> Claim:
    fam = f"ufm-{loss}"

    def check(ctx: RunContext):
        for phase in ("collapse", "trivial"):
            for inst in _instances(loss, ctx, phase):
                rep = judge_report(check_instance(inst, method="auto", starts=2, seed=ctx.seed, predict=predict), ctx)
                c = next(ch for ch in rep.claims if ch.name == "optimal-value")
                yield Check(_tag(inst), c.verdict, c.reason, c.evidence, c.independent, c.rigorous)
        # the certificate route alone at a larger k (cheap: class-reduced)
        big = T.UFMInstance(loss, 40 if not ctx.full else 200, 5, 40 if not ctx.full else 200, 1e-3, 1e-3)
        sol = CS.solve_instance(big, method="closed-form", evidence="value")
        p = predict(big)
        name = f"k={big.k} n={big.n} (closed form + KKT certificate only)"
        yield from judge_checks(fam, big.to_dict(), [optimum_matches(
            name, p, attained=sol.attained, lower_bound=sol.lower_bound,
            tol=tolerance(p, rtol=VALUE_RTOL, atol=VALUE_ATOL), certificate="kkt-dual")], ctx)  # judged by its statement

    if loss == "ce":
        st = statement or ("For balanced UFM with CE and weight decay (d >= k-1), the optimal value is "
                           "-log(1-(k-1)s) + (k-1)s log(1/s-(k-1)) with s = sqrt(n lw lh) when s < 1/k, and log k otherwise; "
                           "a bias penalty does not change it.")
    else:
        st = statement or ("For balanced UFM with MSE, weight decay and an unregularized bias (d >= k-1), the optimal "
                           "value is (k-1)((sqrt(n)-z)^2/(2N) + lam z) with lam = sqrt(lw lh), z = max(sqrt(n) - N lam, 0).")
    return Claim(claim_id or f"ufm.{loss}.optimal-value", "ufm", st, DERIVED, Provenance.DERIVED, check,
                 key=("predicted", "lower_bound", "gap"))


def geometry_claim(loss: str, *, expected: str = "simplex-etf", claim_id: str | None = None) -> Claim:
    """Every global minimiser (d >= k-1, collapse phase) is collapsed with simplex-ETF class means (and
    self-dual with a constant bias for CE; bias 1/k for MSE). Decided at the closed form, proven the unique
    minimiser; the factored solver runs as an independent route for the value."""
    fam = f"ufm-{loss}"

    def check(ctx: RunContext):
        for inst in _instances(loss, ctx, "collapse"):
            rep = judge_report(check_instance(inst, method="factored", starts=3 if ctx.full else 2, seed=ctx.seed,
                                              expected_geometry=expected), ctx)
            for c in rep.claims:
                yield Check(f"{_tag(inst)}: {c.name}", c.verdict, c.reason, c.evidence, c.independent, c.rigorous)

    if loss == "ce":
        st = ("Every global minimizer of the CE UFM with weight decay (d >= k-1, s < 1/k) has within-class collapse, "
              "class means forming a simplex ETF, self-duality mu_c = sqrt(lw/(n lh)) w_c, and a constant bias.")
        return Claim(claim_id or "ufm.ce.collapse-etf", "ufm", st, ZHU, Provenance.RECONSTRUCTED, check,
                     key=("delta", "self_duality_error", "certificate_gap"))
    st = ("Every global minimizer of the MSE UFM with weight decay and unregularized bias (d >= k-1, z > 0) has "
          "within-class collapse, simplex-ETF class means and bias 1/k.")
    return Claim(claim_id or "ufm.mse.collapse-etf", "ufm", st, ZHOU, Provenance.RECONSTRUCTED, check,
                 key=("delta", "certificate_gap"))


#: The numbers that decide the phase at a witness instance (the engine's; kept here for old imports).
threshold_witness = CS.threshold_witness


def trivial_phase_claim(*, threshold: Callable[[int], float] = lambda k: 1.0 / k, loss: str = "ce",
                        claim_id: str | None = None) -> Claim:
    """W = H = 0 is the global minimizer iff s = sqrt(n lw lh) >= threshold(k) (claimed 1/k, both losses).

    The threshold is computed by value: s0 = sqrt(n) ||grad L(0)||_2 (KKT at Z = 0), compared with the claim at
    relative tolerance PHASE_RTOL. A claimed threshold off by more is REFUTED with a witness instance at the
    geometric mean of the two thresholds: there either Z = 0 is proven optimal (dual certificate at 0) although
    the claim says it is not, or a feasible point beats Z = 0 by more than the value tolerance although the
    claim says Z = 0 is optimal. Without such a witness: INCONCLUSIVE.
    """

    def check(ctx: RunContext):
        ks = (2, 3, 5, 8) + ((13, 20) if ctx.full else ())
        for k in ks:
            for n in (1, 2, 5):
                claimed = float(threshold(k))
                s0 = CS.phase_threshold(loss, k, n)  # Z = 0 optimal iff s >= s0 (independent of lambda)
                ev = {"claimed_threshold": claimed, "threshold_by_value": s0, "rtol": PHASE_RTOL,
                      "formula_1_over_k": 1.0 / k}
                tag = f"k={k} n={n}"
                if not is_finite(claimed) or claimed <= 0:
                    yield Check(tag, Verdict.INCONCLUSIVE, f"claimed threshold is not a positive number ({claimed})", ev)
                    continue
                rel = abs(claimed - s0) / s0
                ev["relative_difference"] = rel
                if within(rel, PHASE_RTOL):
                    yield Check(tag, Verdict.VERIFIED, f"threshold by value {s0!r} = claimed {claimed!r} "
                                f"(relative {fmt(rel, 3)} <= {PHASE_RTOL:g})", ev)
                    continue
                s = math.sqrt(claimed * s0)
                try:
                    w = CS.threshold_witness(loss, k, n, s)
                except InputError as exc:
                    yield Check(tag, Verdict.INCONCLUSIVE, f"no witness instance in the accepted range: {exc}", ev)
                    continue
                ev.update(witness=w)
                vtol = tolerance(w["zero_value"], rtol=VALUE_RTOL, atol=VALUE_ATOL)
                if claimed > s0:  # the claim says Z = 0 is not optimal at s; a certificate proves it is
                    ok = w["rho0"] <= 1.0 and within(w["zero_value"] - w["zero_lower_bound"], vtol)
                    yield Check(tag, Verdict.REFUTED if ok else Verdict.INCONCLUSIVE,
                                (f"at s = {fmt(s)} < claimed threshold, W = H = 0 is proven optimal (rho0 = "
                                 f"{fmt(w['rho0'])}, dual gap {fmt(w['zero_value'] - w['zero_lower_bound'], 3)})")
                                if ok else "the witness is not decided within the tolerances", ev)
                else:  # the claim says Z = 0 is optimal at s; a feasible point is lower
                    ok = exceeds(w["zero_value"] - w["closed_form_value"], vtol)
                    yield Check(tag, Verdict.REFUTED if ok else Verdict.INCONCLUSIVE,
                                (f"at s = {fmt(s)} >= claimed threshold, a feasible point attains "
                                 f"{fmt(w['closed_form_value'])} < {fmt(w['zero_value'])} = value of W = H = 0")
                                if ok else "the witness's improvement is below the value tolerance", ev)
        if loss == "ce":
            yield symbolic_zero("g'(0) vanishes at s = 1/k", T.symbolic_ce_reduction()["threshold"])

    return Claim(claim_id or f"ufm.{loss}.trivial-phase", "ufm",
                 f"{loss.upper()} UFM: W = H = 0 is the global minimizer iff sqrt(n lw lh) >= 1/k.",
                 DERIVED, Provenance.DERIVED, check, key=("threshold_by_value",))


#: Instances (k, n, lw, lh) at which the symbolic-derivation claims compare the closed form with the minimum of
#: the one-scalar reduced problem: collapse phase at moderate and tiny weight decay, and one trivial-phase instance.
SYMBOLIC_NUMERIC_CASES = {
    "ce": [(3, 2, 1e-2, 1e-2), (5, 1, 1e-3, 5e-3), (2, 1, 1e-7, 1e-7), (4, 3, 0.2, 0.2)],
    "mse": [(3, 2, 1e-2, 1e-2), (5, 2, 1e-3, 5e-3), (2, 1, 1e-7, 1e-7), (4, 2, 0.5, 0.5)],
}
#: Relative tolerance of "closed form = reduced minimum": the reduced minimum is found to 40 digits, the closed
#: form is float64 with stable formulas (~1e-13 relative, docs/ufm.md); 1e-10 leaves room for both.
SYMBOLIC_NUMERIC_RTOL = 1e-10


def _reduced_minimum(loss: str, k: int, n: int, lam: float):
    """Minimum and minimiser over t >= 0 of the one-scalar reduced problem stated by the symbolic claims, found by
    bisection on the sign of its derivative in 40-digit arithmetic (no closed form is used): CE g(c) =
    log(1 + (k-1) e^-c) + (k-1) s c with s = sqrt(n) lam; MSE q(z) = (k-1)((sqrt(n) - z)^2/(2N) + lam z)."""
    import mpmath as mp

    with mp.workdps(40):
        k_, n_, lam_ = mp.mpf(k), mp.mpf(n), mp.mpf(lam)
        if loss == "ce":
            s = mp.sqrt(n_) * lam_
            f = lambda c: mp.log(1 + (k_ - 1) * mp.exp(-c)) + (k_ - 1) * s * c  # noqa: E731
            df = lambda c: (k_ - 1) * (s - mp.exp(-c) / (1 + (k_ - 1) * mp.exp(-c)))  # noqa: E731
        else:
            N_ = n_ * k_
            f = lambda z: (k_ - 1) * ((mp.sqrt(n_) - z) ** 2 / (2 * N_) + lam_ * z)  # noqa: E731
            df = lambda z: (k_ - 1) * (lam_ - (mp.sqrt(n_) - z) / N_)  # noqa: E731
        if df(0) >= 0:  # convex with a nonnegative slope at 0: the minimiser over t >= 0 is 0
            return float(f(0)), 0.0
        hi = mp.mpf(1)
        while df(hi) < 0:
            hi *= 2
        lo = mp.mpf(0)
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if df(mid) < 0 else (lo, mid)
        t = (lo + hi) / 2
        return float(f(t)), float(t)


def symbolic_claim(loss: str, *, predict: Callable[[T.UFMInstance], T.UFMPrediction] = T.optimum) -> Claim:
    """The symbolic derivation of the closed form, and the closed form the numeric claims use (``predict``, default
    :func:`theory.ufm.optimum`: its value and margin c* / singular value z) against the minimum of the stated
    one-scalar reduced problem at SYMBOLIC_NUMERIC_CASES, so a false closed form is REFUTED at a witness instance."""
    def check(ctx: RunContext):
        from proofs_check.core import close

        exprs = T.symbolic_ce_reduction() if loss == "ce" else T.symbolic_mse_reduction()
        for name, e in exprs.items():
            yield symbolic_zero(name, e)
        for k, n, lw, lh in SYMBOLIC_NUMERIC_CASES[loss]:
            inst = T.UFMInstance(loss, k, n, k, lw, lh)
            value, t = _reduced_minimum(loss, k, n, inst.lam)
            pred = predict(inst)
            tag = f"k={k} n={n} lw={lw:g} lh={lh:g}"
            what = "margin c*" if loss == "ce" else "singular value z*"
            yield close(f"closed-form value = reduced minimum [{tag}]", pred.value, value, rtol=SYMBOLIC_NUMERIC_RTOL,
                        what="optimal value", evidence={"instance": inst.to_dict(), "reduced_minimiser": t})
            yield close(f"closed-form {what} = reduced minimiser [{tag}]", pred.margin, t,
                        rtol=SYMBOLIC_NUMERIC_RTOL, atol=SYMBOLIC_NUMERIC_RTOL, what=what,
                        evidence={"instance": inst.to_dict(), "reduced_minimum": value})

    if loss == "ce":
        st = ("The CE UFM reduces to g(c) = log(1+(k-1)e^-c) + (k-1)s c (nuclear norm of c J_k Y is (k-1)sqrt(n)c); "
              "g is convex with stationary point c* = log(1/s-(k-1)), g(c*) = -log(1-(k-1)s) + (k-1)s c*, "
              "and g'(0) = 0 at s = 1/k.")
    else:
        st = ("The MSE UFM reduces to singular-value soft thresholding of the centred labels (singular values "
              "sqrt(n)) at N lam; the resulting value is (k-1)((sqrt(n)-z)^2/(2N) + lam z).")
    return Claim(f"ufm.{loss}.symbolic-derivation", "ufm", st, DERIVED, Provenance.DERIVED, check)


def bias_penalty_claim(predict: Predictor = default_predict) -> Claim:
    """A bias penalty does not change the CE optimum: ``predict(inst)`` (default the unregularized closed form, which
    ignores ``inst.lb``) is checked at lb = 0, 0.01, 1 against the certified value of each instance."""
    def check(ctx: RunContext):
        for lb in (0.0, 1e-2, 1.0):
            inst = T.UFMInstance("ce", 4, 2, 4, 5e-3, 1e-2, lb)
            rep = judge_report(check_instance(inst, method="factored", starts=1, seed=ctx.seed, predict=predict), ctx)
            c = next(ch for ch in rep.claims if ch.name == "optimal-value")
            # the statement: the unregularized closed form is the optimum with a bias penalty too,
            # certified by the factored value and the dual bound (with its bias term)
            yield Check(f"lb={lb:g}: optimum = unregularized closed form", c.verdict, c.reason,
                        {**c.evidence, "bias_mean": rep.geometry.get("bias_mean")}, c.independent, c.rigorous)

    return Claim("ufm.ce.bias-penalty-invariance", "ufm",
                 "A bias penalty (lb/2)||b||^2 does not change the optimal CE UFM value (the optimal bias is then 0).",
                 "docs/ufm.md (Zhu et al. setting)", Provenance.DERIVED, check)


CLAIMS = [
    symbolic_claim("ce"),
    value_claim("ce"),
    geometry_claim("ce"),
    trivial_phase_claim(),
    bias_penalty_claim(),
    trivial_phase_claim(loss="mse"),
    symbolic_claim("mse"),
    value_claim("mse"),
    geometry_claim("mse"),
]


# The any-loss engine's checks (`solve ufm`, `solve ufm-regression`, `table ufm`) live in
# proofs_check/claims/ufm_general.py; their former import path (this module) keeps working.
from proofs_check.claims.ufm_general import (  # noqa: E402,F401
    GEN_VALUE_ATOL, GEN_VALUE_RTOL, GEOMETRY_TOL, MAX_TARGET_ENTRIES, MINORITY_DEV_RTOL, certify_value,
    check_general, check_regression, closed_form_hypotheses, estimate_value, lower_bound_claim_general,
    minority_collapse_check)
