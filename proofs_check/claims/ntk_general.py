"""NTK collapse beyond the perfect block kernel: general and imbalanced kernels, cross-entropy, discrete
and mini-batch steps, and the review thread's statements about Assumption 3.2 (docs/ntk.md, "Beyond the
block kernel").

Source of the model: Seleznova, Weitzner, Giryes, Kutyniok, Chou, "Neural (Tangent Kernel) Collapse",
NeurIPS 2023 (arXiv 2305.16427); the questions and the reviewer's implications: the review thread of that
paper (OpenReview). Every claim is built by a factory that takes the statement's prediction, so a test can
feed a false variant and see it REFUTED.

Model (all claims): classes of sizes n_c ordered class by class, one-hot targets, features H (n x N),
classifier W, bias b, Z = W H + b 1^T, G = dL/dZ (MSE: s (Z - Y); CE: s (softmax Z - Y)), flow
dW = -G H^T, db = -G 1, dH = -W^T G K with a fixed SPD kernel K. Flows: solvers.ntk_general (DOP853, rtol
1e-11, with a second run at 100x tighter tolerances whose difference estimates the integration error;
it enters every tolerance).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Callable, Iterable

import numpy as np

from proofs_check.core import (Check, Claim, Provenance, RunContext, SolveReport, Verdict, close, condition, fmt,
                               hypothesis_fails, summarise, symbolic_zero)
from solvers import ntk_general as sg
from theory import ntk as th
from theory._validate import InstanceError, as_float, as_int

FAMILY = "ntk"
SOURCE_MODEL = ("Seleznova et al. NeurIPS 2023 (Neural (Tangent Kernel) Collapse): feature model and invariant; "
                "extension derived here (docs/ntk.md, 'Beyond the block kernel')")
SOURCE_THREAD = ("review thread of Seleznova et al., Neural (Tangent Kernel) Collapse (NeurIPS 2023); "
                 "checked in docs/ntk.md, 'Beyond the block kernel'")

KAPPA = (1.0, 0.6, 0.2)
BALANCED = (4, 4, 4)
IMBALANCED = (6, 3, 2)
EPS = 1e-6
T_FLOW = 30.0
RHO = 0.3
#: Invariant drift tolerance (relative to max(1, ||W^T W|| + ||H K^-1 H^T||)); measured ~1e-15.
INVARIANT_TOL = 1e-9
#: Identities at a state (rounding only).
IDENTITY_TOL = 1e-9
#: ETF tolerance: 1e-6 + 100 eps^2 (small-init corrections are O(eps^2)) + 10 x the estimated integration error.
ETF_ATOL = 1e-6
#: "Not an ETF" needs a distance above this multiple of the ETF tolerance.
WITNESS_FACTOR = 100.0
#: Finite-difference Jacobians (central differences of smooth functions: truncation ~ step^2, rounding ~1e-16/step).
FD_STEP = 1e-5
FD_RTOL = 1e-7
#: Escape rate: the rate of ||M|| on the grid lies within the split top rates (perturbed kernels split the
#: degenerate class-mean eigenvalue) up to this relative tolerance (measured 1e-5 on the block kernel).
ESCAPE_RTOL = 2e-3


def _claim(claim_id, statement, check, provenance=Provenance.DERIVED, source=SOURCE_MODEL, tags=()) -> Claim:
    return Claim(claim_id, FAMILY, statement, source, provenance, check, (), tags)


# --------------------------------------------------------------------------------------
# Shared instances (cached: several claims read the same flows)
# --------------------------------------------------------------------------------------

@lru_cache(maxsize=32)
def model_for(counts: tuple, rho: float = 0.0, kind: str = "generic", loss: str = "mse", seed: int = 0,
              kappa: tuple = KAPPA) -> sg.GeneralModel:
    """Block kernel (counts, kappa) plus a perturbation of relative Frobenius size rho: ``kind`` "generic"
    (theory.ntk.perturbation) or "within" (theory.ntk.within_class_perturbation, keeps the ETF condition)."""
    if kind == "generic":
        return sg.block_model(counts, kappa, rho, seed, loss=loss)
    Kb = th.imbalanced_block_kernel(counts, kappa)
    K = Kb + th.within_class_perturbation(counts, float(np.linalg.norm(Kb)), rho, seed)
    return sg.GeneralModel(K, counts, 1.0, loss, {"kappa": list(kappa), "perturbation": rho, "kind": kind})


def flow_for(counts: tuple, rho: float = 0.0, kind: str = "generic", loss: str = "mse", seed: int = 0,
             init: str = "random", eps: float = EPS, T: float = T_FLOW) -> tuple[sg.GeneralModel, sg.GeneralFlowReport]:
    """The flow of :func:`model_for` (n = C + 1, 201 grid times, with the error-estimate run), memoised by its full
    parameters (``flow_for(c, 0.0)`` and ``flow_for(c, 0.0, "generic", "mse")`` are the same flow, integrated once)."""
    return _flow_for(tuple(int(c) for c in counts), float(rho), str(kind), str(loss), int(seed), str(init), float(eps),
                     float(T))


@lru_cache(maxsize=32)
def _flow_for(counts: tuple, rho: float, kind: str, loss: str, seed: int, init: str, eps: float,
              T: float) -> tuple[sg.GeneralModel, sg.GeneralFlowReport]:
    model = model_for(counts, rho, kind, loss, seed)
    n = model.C + 1
    st0 = sg.init_random(model, n, eps, seed) if init == "random" else sg.init_e_zero(model, n, eps, seed)
    return model, sg.run_flow(model, st0, T, n_grid=201, error_estimate=True, check_grid=loss == "ce")


def _stopped(rep: sg.GeneralFlowReport) -> list[Check]:
    s = rep.trajectory.stopped
    return [] if not s else [Check("integration", Verdict.INCONCLUSIVE, f"{s}: not decided", {"stopped": s})]


def _err(rep, key) -> float | None:
    e = rep.error.get(key)
    return None if e is None else float(e)


def etf_tolerance(rep, eps: float = EPS) -> float | None:
    e = _err(rep, "distance_etf")
    return None if e is None else ETF_ATOL + 100 * eps * eps + 10 * e


def _label(counts, rho, kind="generic", loss="mse") -> str:
    return f"counts {list(counts)}, rho {rho:g}{' (' + kind + ')' if rho and kind != 'generic' else ''}, {loss}"


def invariant_drift_check(name: str, rep: sg.GeneralFlowReport) -> Check:
    d = float(rep.series["E_drift"].max())
    scale = max(1.0, float(rep.series["E_scale"].max()))
    return close(name, 0.0, d, rtol=0.0, atol=INVARIANT_TOL * scale, what="max_t ||E(t) - E(0)||_F",
                 evidence={"scale": scale, "steps": rep.trajectory.steps})


def _random_state(rng, C, n, N, scale=0.7):
    return sg.GState(scale * rng.standard_normal((C, n)), scale * rng.standard_normal(C),
                     scale * rng.standard_normal((n, N)))


# --------------------------------------------------------------------------------------
# ntk.general.invariant / ntk.ce.invariant
# --------------------------------------------------------------------------------------

def _discrete_checks(model: sg.GeneralModel, step_change: Callable, seed: int, label: str) -> Iterable[Check]:
    """Discrete mini-batch steps from an O(1) state: the exact change of E at recorded steps against the
    predicted change; a nonzero change is a witness that E is not conserved by discrete steps."""
    rng = np.random.default_rng(4000 + seed)
    st = _random_state(rng, model.C, model.C + 1, model.N, 0.5)
    Kinv = model.Kinv
    worst_mis, worst_change, witness = 0.0, 0.0, None
    for k, B in enumerate(sg.batch_schedule(model.N, max(1, model.N // 3), 6, seed)):
        _, G = sg.loss_grad(model, st)
        GB = np.zeros_like(G)
        GB[:, B] = G[:, B]
        eta = 0.05
        new = sg.GState(st.W - eta * GB @ st.H.T, st.b - eta * GB.sum(axis=1), st.H - eta * st.W.T @ GB @ model.K)
        change = th.general_invariant(new.W, new.H, Kinv) - th.general_invariant(st.W, st.H, Kinv)
        pred = np.asarray(step_change(st.W, st.H, GB, model.K, eta), float)
        scale = max(1.0, float(np.linalg.norm(st.W.T @ st.W) + np.linalg.norm(st.H @ Kinv @ st.H.T)))
        mis = float(np.linalg.norm(change - pred)) / scale
        if mis > worst_mis:
            worst_mis, witness = mis, {"step": k, "eta": eta, "batch": B.tolist(), "change_norm": float(np.linalg.norm(change)),
                                       "predicted_norm": float(np.linalg.norm(pred))}
        worst_change = max(worst_change, float(np.linalg.norm(change)) / scale)
        st = new
    yield condition(f"discrete mini-batch steps change E by the predicted amount ({label})", worst_mis <= IDENTITY_TOL,
                    verified=f"max ||E(after) - E(before) - predicted||/scale = {fmt(worst_mis, 3)} <= {IDENTITY_TOL:g} "
                             f"over 6 steps (eta = 0.05); E itself changed by up to {fmt(worst_change, 3)} x scale "
                             "(not conserved: witness)",
                    refuted=f"witness step: ||E(after) - E(before) - predicted||/scale = {fmt(worst_mis, 3)} > "
                            f"{IDENTITY_TOL:g} ({witness})",
                    evidence={"max_mismatch": worst_mis, "max_change": worst_change, "witness": witness})


def _invariant_claim(claim_id: str, loss: str, step_change: Callable | None) -> Claim:
    step_change = step_change or th.discrete_step_change

    def check(ctx: RunContext) -> Iterable[Check]:
        dims = (3, 2, 2) if ctx.full else (2, 2, 2)
        yield _matrix_zero_check(f"dE/dt = 0 along dW = -G H^T, dH = -W^T G K for a generic symmetric K and a generic "
                                 f"G = dL/dZ (N, C, n = {dims}; det K cleared)", th.sym_general_invariant_derivative(*dims))
        sym_pred = None
        if step_change is not th.discrete_step_change:
            import sympy as sp

            def sym_pred(W, H, G, K, e):  # the prediction evaluated symbolically where it accepts sympy matrices
                out = step_change(W, H, G, K, e)
                return sp.Matrix(out) if not isinstance(out, sp.MatrixBase) else out
        name = "E(W - eta G H^T, H - eta W^T G K) - E(W, H) = predicted change (symbolic, generic K, G; det K cleared)"
        if sym_pred is None:
            yield _matrix_zero_check(name, th.sym_discrete_step_change_default(*dims))
        else:
            try:
                yield _matrix_zero_check(name, th.sym_discrete_step_change(*dims, sym_pred))
            except (TypeError, ValueError, AttributeError) as exc:  # a prediction that takes no sympy matrices
                yield Check(name, Verdict.INCONCLUSIVE, f"the prediction cannot be evaluated symbolically ({exc})", {})
        for counts, rho in ((IMBALANCED, RHO), (BALANCED, 0.1)):
            model, rep = flow_for(counts, rho, "generic", loss)
            yield from _stopped(rep)
            yield invariant_drift_check(f"flow conserves E ({_label(counts, rho, loss=loss)})", rep)
        model = model_for(IMBALANCED, RHO, "generic", loss)
        rng = np.random.default_rng(5000 + ctx.seed)
        st0 = _random_state(rng, model.C, model.C + 1, model.N, 0.5)
        batches = [b for b in sg.batch_schedule(model.N, 4, 4, ctx.seed)]
        _, info = sg.minibatch_flow(model, st0, batches, 0.5)
        if info["stopped"]:
            yield Check("mini-batch flow", Verdict.INCONCLUSIVE, info["stopped"], info)
        else:
            yield close(f"mini-batch flow (4 batches of 4, 0.5 time each, {_label(IMBALANCED, RHO, loss=loss)}) conserves E",
                        0.0, info["max_drift"], rtol=0.0, atol=INVARIANT_TOL * info["scale"],
                        what="max ||E - E(0)||_F at the switching times", evidence=info)
        yield from _discrete_checks(model, step_change, ctx.seed, _label(IMBALANCED, RHO, loss=loss))

    if loss == "mse":
        stmt = ("For any fixed symmetric positive definite feature kernel K and any loss (G = dL/dZ), "
                "E = W^T W - H K^-1 H^T is conserved by the gradient flow and by the mini-batch flow (the batch "
                "entering only through G); a discrete step W -= eta G H^T, H -= eta W^T G K changes it by exactly "
                "eta^2 (H G^T G H^T - W^T G K G^T W).")
    else:
        stmt = ("Under cross-entropy (G = s(softmax(Z) - Y)) the invariant carries over: E = W^T W - H K^-1 H^T is "
                "conserved by the gradient flow and the mini-batch flow for any fixed SPD kernel; a discrete step "
                "changes it by exactly eta^2 (H G^T G H^T - W^T G K G^T W).")
    return _claim(claim_id, stmt, check, tags=("symbolic", "numeric"))


def _matrix_zero_check(name: str, exprs) -> Check:
    import sympy as sp

    exprs = list(exprs)
    bad = [e for e in exprs if sp.expand(e) != 0]
    if not bad:
        return Check(name, Verdict.VERIFIED, f"all {len(exprs)} distinct entries expand to 0", {"entries": len(exprs)})
    e = bad[0]
    syms = sorted(e.free_symbols, key=str)
    rng = np.random.default_rng(0)
    sub = {x: float(rng.uniform(0.2, 1.3)) for x in syms}
    val = float(abs(complex(sp.N(e.subs(sub), 30))))
    if val > 1e-9:
        return Check(name, Verdict.REFUTED, f"an entry is nonzero ({fmt(val, 3)}) at a numeric point",
                     {"expression": str(e)[:300], "value": val, "witness": {str(k): v for k, v in list(sub.items())[:40]}})
    return symbolic_zero(name, e)


def general_invariant_claim(step_change: Callable | None = None, claim_id: str = "ntk.general.invariant") -> Claim:
    """E = W^T W - H K^-1 H^T is conserved for a general fixed SPD kernel by the flow and the mini-batch flow,
    for any loss; a discrete step changes it by exactly eta^2 (H G^T G H^T - W^T G K G^T W).

    Source: invariant of Seleznova et al. (block kernel, MSE), extended here (derived). Conditions: K symmetric
    positive definite and fixed; G = dL/dZ at the current state.
    Checked: sympy dE/dt = 0 with generic symmetric K and generic G; sympy identity of the discrete change
    against ``step_change(W, H, G, K, eta)`` (default theory.ntk.discrete_step_change); drift of flows with a
    perturbed imbalanced and a perturbed balanced kernel; a piecewise mini-batch flow; six discrete mini-batch
    steps (exact change against the prediction). A prediction "E is conserved by discrete steps"
    (``step_change`` returning 0) is REFUTED by the symbolic identity and by a witness step."""
    return _invariant_claim(claim_id, "mse", step_change)


def ce_invariant_claim(step_change: Callable | None = None, claim_id: str = "ntk.ce.invariant") -> Claim:
    """The cross-entropy version of :func:`general_invariant_claim` (same checks with CE flows and steps)."""
    return _invariant_claim(claim_id, "ce", step_change)


# --------------------------------------------------------------------------------------
# ntk.general.nc1-at-e-zero
# --------------------------------------------------------------------------------------

def tight_bound_state(counts, kappa=KAPPA) -> tuple[sg.GeneralModel, sg.GState]:
    """Block kernel, W = 0, b = 0, H = x v^T with v a unit zero-sum vector inside class 0: the general NC1
    bound holds with equality (E = -x x^T v^T K^-1 v, e = ||x||^2/lambda_0, Lambda_0 = lambda_0)."""
    model = model_for(tuple(counts), 0.0, "generic", "mse", 0, tuple(kappa))
    v = np.zeros(model.N)
    v[0], v[1] = 1 / math.sqrt(2), -1 / math.sqrt(2)
    x = np.array([0.7, -0.3, 0.2])
    return model, sg.GState(np.zeros((model.C, 3)), np.zeros(model.C), np.outer(x, v))


def _bound_ratio(model, st, constant, Lambda0=None) -> float:
    E = th.general_invariant(st.W, st.H, model.Kinv)
    b = th.general_nc1_bound(st.W, st.H, E, model.K, model.counts, constant, Lambda0)
    return b["scatter"] / b["bound"] if b["bound"] > 0 else (math.inf if b["scatter"] > 0 else 0.0)


def gram_identity_check(name: str, model: sg.GeneralModel, st: sg.GState, class_inverse: np.ndarray) -> Check:
    """G_u Xi^-1 G_u = (I - b 1^T)^T (I - b 1^T) at a state near E = 0, D = 0, zero loss, within the exact
    remainder bound of theory.ntk.gram_identity_remainder (plus rounding)."""
    rem = th.gram_identity_remainder(st.W, st.b, st.H, model.K, model.counts, model.Kinv)
    lhs = rem["Gu"] @ class_inverse @ rem["Gu"]
    rhs = rem["B"].T @ rem["B"]
    err = float(np.linalg.norm(lhs - rhs))
    tol = rem["bound"] * (1 + 1e-6) + IDENTITY_TOL * (1 + float(np.linalg.norm(rhs)))
    return close(name, 0.0, err, rtol=0.0, atol=tol, what="||G_u Xi^-1 G_u - B^T B||_F",
                 evidence={k: v for k, v in rem.items() if k not in ("B", "Gu")})


def general_nc1_claim(constant: float = 1.0, class_inverse: Callable | None = None,
                      claim_id: str = "ntk.general.nc1-at-e-zero") -> Claim:
    """For a general fixed SPD kernel: at every state ||D||_F^2 <= (r L/2)(e + sqrt(e^2 + 4||W D||_F^2/(r L)))
    with L = lambda_max(P_0 K P_0), e = max(0, -lambda_min E); hence E = 0 and zero loss (W D = 0) give
    D = 0 exactly (NC1), and there the uncentred class-mean Gram satisfies G_u Xi^-1 G_u = (I - b 1^T)^T
    (I - b 1^T) with Xi^-1 = S K^-1 S^T.

    Source: derived here (generalises the block-kernel statement of Seleznova et al.).
    Conditions: K symmetric positive definite; any loss for the inequality, MSE zero loss for the Gram.
    Checked: the bound at 30 random states of perturbed kernels (can fail), its equality at a tight state
    (``constant`` < 1 is REFUTED there), along E = 0 flows with a perturbed kernel (E stays 0, NC1 decreases),
    and the Gram identity at the end of small-initialisation flows within the exact remainder bound with
    ``class_inverse(K, counts)`` (default S K^-1 S^T; the block closed form on a perturbed kernel is REFUTED).
    The sympy lemma K^-1 >= P (P K P)^+ P (2 x 2 case) is a consistency check."""
    constant = as_float("constant", constant)  # NaN is refused, never a witness
    cinv = class_inverse or th.class_level_inverse

    def check(ctx: RunContext) -> Iterable[Check]:
        import sympy as sp

        a, bb, d = sp.symbols("a b d", positive=True)
        Kinv = sp.Matrix([[a, bb], [bb, d]]).inv()
        lemma = Kinv[0, 0] - 1 / a - bb ** 2 / (a * (a * d - bb ** 2))
        lemma = sp.cancel(lemma) if sp.cancel(lemma) == 0 else sp.simplify(lemma)  # a rational function: cancel proves it
        yield Check("lemma K^-1 >= P (P K P)^+ P (2 x 2): (K^-1)_11 - 1/a = b^2/(a (a d - b^2)) >= 0",
                    symbolic_zero("lemma", lemma).verdict,
                    "symbolic identity (the right side is >= 0 for a PD 2 x 2 kernel)", {}, independent=False)
        rng = np.random.default_rng(6000 + ctx.seed)
        worst = 0.0
        for k in range(30):
            model = model_for(IMBALANCED if k % 2 else BALANCED, [0.1, 0.3, 1.0][k % 3], "generic", "mse", k % 3)
            st = _random_state(rng, model.C, model.C + 1 + k % 3, model.N, float(rng.uniform(0.2, 2.0)))
            worst = max(worst, _bound_ratio(model, st, constant))
        yield condition("general NC1 bound at 30 random states (perturbed kernels)", worst <= 1 + 1e-9,
                        verified=f"max ||D||^2 / bound = {fmt(worst, 6)} <= 1",
                        refuted=f"witness: ||D||^2 exceeds the bound by a factor {fmt(worst, 6)}",
                        evidence={"max_ratio": worst})
        model, st = tight_bound_state(BALANCED)
        r = _bound_ratio(model, st, constant)
        yield condition("tight state (block kernel, W = 0, rank-one within-class H)", r <= 1 + 1e-9,
                        verified=f"||D||^2 / bound = {fmt(r, 12)} (equality: the constant cannot be lowered)",
                        refuted=f"witness: ||D||^2 / bound = {fmt(r, 8)} > 1", evidence={"ratio": r})
        model, rep = flow_for(IMBALANCED, RHO, "generic", "mse", 0, "e-zero", 1.0, 20.0)
        yield from _stopped(rep)
        E0n = float(np.linalg.norm(rep.series["E0"]))
        yield close("E = 0 initialisation (perturbed kernel): E(0) = 0 and stays 0", 0.0,
                    max(E0n, float(rep.series["E_drift"].max())), rtol=0.0,
                    atol=INVARIANT_TOL * max(1.0, float(rep.series["E_scale"].max())), what="||E(t)||")
        L = th.compressed_within_eigenvalue(model.K, model.counts)
        ratios = [_bound_ratio(model, s, constant, L) for s in rep.trajectory.states]
        sc = rep.series["scatter"]
        yield condition("E = 0 flow: bound at every grid time; tr(D D^T) falls", max(ratios) <= 1 + 1e-9 and sc[-1] < sc[0],
                        verified=f"max ratio {fmt(max(ratios), 5)}; tr(D D^T) {fmt(sc[0], 4)} -> {fmt(sc[-1], 4)}",
                        refuted=f"max ratio {fmt(max(ratios), 5)}, tr(D D^T) {fmt(sc[0], 4)} -> {fmt(sc[-1], 4)}",
                        evidence={"max_ratio": max(ratios), "scatter": [float(sc[0]), float(sc[-1])]})
        for counts, rho in ((BALANCED, RHO), (IMBALANCED, RHO)):
            model, rep = flow_for(counts, rho, "generic", "mse")
            yield from _stopped(rep)
            yield gram_identity_check(f"zero-loss class Gram identity at T ({_label(counts, rho)})", model,
                                      rep.trajectory.final, np.asarray(cinv(model.K, model.counts), float))

    return _claim(claim_id, "For any fixed SPD feature kernel K: ||D||_F^2 <= (r L/2)(e + sqrt(e^2 + 4||W D||^2/(r L))), "
                  "L = lambda_max(P_0 K P_0), at every state; so E = 0 and zero loss imply D = 0 (exact NC1), and the "
                  "class-mean Gram then solves G_u (S K^-1 S^T) G_u = (I - b 1^T)^T (I - b 1^T).", check,
                  tags=("symbolic", "numeric"))


# --------------------------------------------------------------------------------------
# ntk.general.etf
# --------------------------------------------------------------------------------------

def etf_condition(K: np.ndarray, counts) -> bool:
    """The sufficient condition: balanced classes and K S^T = S^T (a I + c 1 1^T) (relative defect <= 1e-10)."""
    s = th.block_sum_structure(K, counts)
    return bool(s["balanced"] and s["defect"] <= 1e-10)


def _etf_decision(rep) -> tuple[str, float, float]:
    d = rep.final["distance_etf"]
    tol = etf_tolerance(rep)
    if d is None or tol is None:
        return "undecided", d, tol
    if d <= tol:
        return "etf", d, tol
    if d > WITNESS_FACTOR * tol:
        return "not-etf", d, tol
    return "undecided", d, tol


def general_etf_claim(condition_fn: Callable | None = None, claim_id: str = "ntk.general.etf") -> Claim:
    """Under a general fixed SPD kernel the small-initialisation flow's centred class means form a simplex ETF
    when the classes are balanced and K S^T = S^T (a I + c 1 1^T) (K maps the class-indicator space into
    itself like a block kernel), with M^T M = sqrt(a/m) J; a generic perturbation K = Kb + K0 breaks the ETF.

    Source: derived here (the ETF of Seleznova et al. for block kernels; the reviewer's question on K0 + Kb).
    Conditions: MSE, init scale 1e-6, T = 30, features n = C + 1 (docs/ntk.md).
    Checked: ``condition_fn(K, counts) -> bool`` (default :func:`etf_condition`) is evaluated on a
    within-class perturbation (condition holds), a generic perturbation and an imbalanced block kernel; where
    it predicts an ETF the flow's ETF distance must be <= 1e-6 + 100 eps^2 + 10 x integration error (else
    REFUTED with the flow as witness) and the Gram scale sqrt(a/m) is compared; the generic perturbation
    (rho = 0.3) must be a witness of "not an ETF" (distance > 100 x that tolerance). A condition that calls
    every kernel ETF-compatible is REFUTED by that witness."""
    cond = condition_fn or etf_condition

    def check(ctx: RunContext) -> Iterable[Check]:
        # the mechanism: at collapsed states (H = U S) the whole right-hand side sees K only through K S^T, so a
        # kernel with the block kernel's K S^T drives the class means exactly like it
        mw, mb, mg = model_for(BALANCED, RHO, "within"), model_for(BALANCED, 0.0), model_for(BALANCED, RHO, "generic")
        rng = np.random.default_rng(7500 + ctx.seed)
        S = th.class_indicator(BALANCED)
        worst_w, worst_g = 0.0, 0.0
        for _ in range(3):
            W, b, U = rng.standard_normal((3, 4)), rng.standard_normal(3), rng.standard_normal((4, 3))
            st = sg.GState(W, b, U @ S)
            ref = sg.rhs_state(mb, st)
            for mod, which in ((mw, "w"), (mg, "g")):
                d = sg.rhs_state(mod, st)
                diff = max(float(np.max(np.abs(d.W - ref.W))), float(np.max(np.abs(d.b - ref.b))),
                           float(np.max(np.abs(d.H - ref.H))))
                if which == "w":
                    worst_w = max(worst_w, diff)
                else:
                    worst_g = max(worst_g, diff)
        yield close("collapsed states: the flow under Kb + P0 X P0 equals the flow under Kb (same K S^T)", 0.0, worst_w,
                    rtol=0.0, atol=IDENTITY_TOL, what="max |rhs difference|",
                    evidence={"generic_perturbation_difference": worst_g})
        cases = ((BALANCED, RHO, "within"), (BALANCED, RHO, "generic"), (BALANCED, 0.1, "generic"), (IMBALANCED, 0.0, "generic"))
        for counts, rho, kind in cases:
            model, rep = flow_for(counts, rho, kind, "mse")
            yield from _stopped(rep)
            predicted = bool(cond(model.K, counts))
            dec, d, tol = _etf_decision(rep)
            ev = {"distance_etf": d, "tolerance": tol, "block_sums": th.block_sum_structure(model.K, counts),
                  "cosines": rep.final["cosines"], "integration_error": rep.error}
            name = f"ETF at T ({_label(counts, rho, kind)}), condition predicts {'ETF' if predicted else 'no ETF'}"
            if predicted:
                yield condition(name, dec == "etf", verified=f"ETF distance {fmt(d, 3)} <= {fmt(tol, 3)}",
                                refuted=f"witness: the condition predicts an ETF but the flow's class means are at ETF "
                                        f"distance {fmt(d, 3)} > {fmt(tol, 3)}", evidence=ev,
                                inconclusive=(dec == "undecided"))
                if dec == "etf" and counts[0] == counts[-1]:
                    a = th.block_sum_structure(model.K, counts)["a"]
                    G = rep.final["gram"]
                    J = np.eye(len(counts)) - 1.0 / len(counts)
                    yield close(f"Gram scale sqrt(a/m) ({_label(counts, rho, kind)})", math.sqrt(a / counts[0]) * J, G,
                                rtol=0.0, atol=1e-6 + 10 * (_err(rep, "gram") or 0.0) + 100 * EPS ** 2,
                                what="M^T M", evidence={"a": a})
            elif kind == "generic" and rho >= RHO:
                yield condition(name + ": witness", dec == "not-etf",
                                verified=f"not an ETF: distance {fmt(d, 3)} > {WITNESS_FACTOR:g} x {fmt(tol, 3)}",
                                refuted=f"the statement says this perturbation breaks the ETF, but the distance is "
                                        f"{fmt(d, 3)} (tolerance {fmt(tol, 3)})", evidence=ev,
                                inconclusive=(dec == "undecided"))
        # the witness must also refute a condition that accepts it
        model, rep = flow_for(BALANCED, RHO, "generic", "mse")
        dec, d, tol = _etf_decision(rep)
        yield condition("the generic perturbation (rho = 0.3) is not ETF-compatible", dec == "not-etf",
                        verified=f"distance {fmt(d, 3)} (witness: class-mean cosines {np.round(rep.final['cosines'][0], 6).tolist()})",
                        refuted=f"distance {fmt(d, 3)} not beyond {WITNESS_FACTOR:g} x {fmt(tol, 3)}",
                        evidence={"cosines": rep.final["cosines"]}, inconclusive=(dec == "undecided"))

    return _claim(claim_id, "Small-initialisation MSE flows under a fixed SPD kernel end in a simplex ETF of the centred "
                  "class means when the classes are balanced and K S^T = S^T (a I + c 1 1^T) (then M^T M = sqrt(a/m) J); "
                  "a generic perturbation K = Kb + K0 (rho = 0.3) does not (witness).", check, tags=("numeric",))


# --------------------------------------------------------------------------------------
# ntk.imbalanced.nc1 / ntk.imbalanced.etf
# --------------------------------------------------------------------------------------

def imbalanced_nc1_claim(within_eigenvalue: Callable | None = None, claim_id: str = "ntk.imbalanced.nc1") -> Claim:
    """Block kernels with unequal class sizes: K acts on the within-class space as lambda_0 = kappa_d - kappa_c
    (multiplicity N - C), so dD/dt = -s lambda_0 W^T W D, tr(D D^T) never increases, E = 0 and zero loss give
    D = 0, and small-initialisation flows reach NC1 = O(eps^2).

    Source: derived here. Conditions: block constants with a PD kernel, any class sizes >= 1.
    Checked: sympy K v = lambda_0 v for zero-sum-in-class v (counts 3,2,1; symbolic kappa); numpy eigenvalues
    (lambda_0 with multiplicity N - C and the eigenvalues of Gamma); dD/dt from the definition against
    -s lambda_0 W^T W D at random states with ``within_eigenvalue(kappa)`` (default kappa_d - kappa_c; a wrong
    one is REFUTED); tr(D D^T) monotone and NC1 <= 1e4 eps^2 at T on the flow with counts 6,3,2."""
    lam_fn = within_eigenvalue or (lambda k: k[0] - k[1])

    def check(ctx: RunContext) -> Iterable[Check]:
        import sympy as sp

        kd, kc, kn = th.kappa_symbols()
        counts = (3, 2, 1)
        lab = np.repeat(np.arange(3), counts)
        N = sum(counts)
        K = sp.Matrix(N, N, lambda i, j: kd if i == j else (kc if lab[i] == lab[j] else kn))
        lam = lam_fn((kd, kc, kn))
        exprs = []
        for c in range(3):
            idx = np.flatnonzero(lab == c)
            for j in idx[1:]:
                v = sp.zeros(N, 1)
                v[int(idx[0])], v[int(j)] = 1, -1
                exprs.extend(list(K * v - lam * v))
        yield _matrix_zero_check("K v = lambda_0 v on zero-sum-in-class vectors (counts 3,2,1, symbolic kappa)",
                                 [e for e in exprs if e != 0] or [sp.Integer(0)])
        for cts in (IMBALANCED, (5, 2, 2, 1)):
            Kn = th.imbalanced_block_kernel(cts, KAPPA)
            ev = np.linalg.eigvalsh(Kn)
            pred = np.sort(np.concatenate([np.full(sum(cts) - len(cts), float(lam_fn(KAPPA))),
                                           np.sort(np.linalg.eigvals(th.imbalanced_class_matrix(cts, KAPPA)).real)]))
            yield close(f"spectrum of the imbalanced block kernel (counts {list(cts)})", pred, ev, rtol=0.0, atol=1e-10,
                        what="sorted eigenvalues (lambda_0 x (N - C) and eig Gamma)")
        model = model_for(IMBALANCED, 0.0)
        rng = np.random.default_rng(7000 + ctx.seed)
        worst = 0.0
        P0 = th.within_projector(model.counts)
        for _ in range(5):
            st = _random_state(rng, model.C, model.C + 1, model.N)
            d = sg.rhs_state(model, st)
            pred = -model.s * float(lam_fn(KAPPA)) * st.W.T @ st.W @ (st.H @ P0)
            worst = max(worst, float(np.max(np.abs(d.H @ P0 - pred))))
        yield close("dD/dt = -s lambda_0 W^T W D at 5 random states (counts 6,3,2)", 0.0, worst, rtol=0.0, atol=IDENTITY_TOL,
                    what="max |dD/dt + s lambda_0 W^T W D|")
        model, rep = flow_for(IMBALANCED, 0.0)
        yield from _stopped(rep)
        sc = rep.series["scatter"]
        inc = float(max(0.0, np.diff(sc).max(initial=0.0)))
        yield condition("tr(D D^T) non-increasing along the flow (counts 6,3,2)", inc <= 1e-9 * sc[0] + 1e-30,
                        verified=f"largest increase {fmt(inc, 3)} (initial {fmt(sc[0], 3)})",
                        refuted=f"witness: tr(D D^T) increases by {fmt(inc, 3)}", evidence={"max_increase": inc})
        nc1 = rep.final["nc1"]
        tol = 1e4 * EPS ** 2 + 10 * (_err(rep, "nc1") or 0.0)
        yield condition("NC1 at T = 30 (eps = 1e-6, counts 6,3,2)", nc1 is not None and nc1 <= tol,
                        verified=f"NC1 = {fmt(nc1, 3)} <= 1e4 eps^2 = {fmt(tol, 3)}",
                        refuted=f"NC1 = {fmt(nc1, 3)} > {fmt(tol, 3)}", evidence={"nc1": nc1}, inconclusive=True)

    return _claim(claim_id, "With unequal class sizes the block kernel still acts as lambda_0 = kappa_d - kappa_c on the "
                  "within-class space: dD/dt = -s lambda_0 W^T W D, tr(D D^T) never increases, E = 0 and zero loss "
                  "give D = 0, and small-initialisation flows reach NC1 = O(eps^2).", check, tags=("symbolic", "numeric"))


def imbalanced_etf_claim(predict_etf: bool = False, class_inverse: Callable | None = None,
                         claim_id: str = "ntk.imbalanced.etf") -> Claim:
    """With unequal class sizes the small-initialisation limit is not a simplex ETF (witness: counts 6,3,2);
    its class-mean Gram solves G_u Xi^-1 G_u = (I - b 1^T)^T (I - b 1^T) with the closed form
    Xi^-1 = diag(n) Gamma^-1 (K S^T = S^T Gamma).

    Source: derived here (the question of the review thread on imbalanced data).
    Conditions: MSE, block constants (1, 0.6, 0.2), eps = 1e-6, T = 30, n = C + 1.
    Checked: sympy K S^T = S^T Gamma (counts 3,2,1); ``class_inverse(counts, kappa)`` (default
    theory.ntk.imbalanced_class_inverse) against S K^-1 S^T and in the Gram identity at the flow's end;
    ``predict_etf`` (False: not an ETF) against the flow's ETF distance (witness beyond 100 x tolerance); the
    balanced control 4,4,4 is an ETF."""
    cinv = class_inverse or th.imbalanced_class_inverse

    def check(ctx: RunContext) -> Iterable[Check]:
        import sympy as sp

        kd, kc, kn = th.kappa_symbols()
        counts = (3, 2, 1)
        lab = np.repeat(np.arange(3), counts)
        N = sum(counts)
        K = sp.Matrix(N, N, lambda i, j: kd if i == j else (kc if lab[i] == lab[j] else kn))
        S = sp.Matrix(3, N, lambda c, i: 1 if lab[i] == c else 0)
        n = sp.Matrix(counts)
        Gam = sp.diag(*[(kd - kc) + n[c] * (kc - kn) for c in range(3)]) + kn * sp.ones(3, 1) * n.T
        yield _matrix_zero_check("K S^T = S^T Gamma, Gamma = diag(lambda_0 + n_c (kc - kn)) + kn 1 n^T (counts 3,2,1)",
                                 [e for e in (K * S.T - S.T * Gam) if sp.expand(e) != 0] or [sp.Integer(0)])
        model, rep = flow_for(IMBALANCED, 0.0)
        yield from _stopped(rep)
        Xi = np.asarray(cinv(model.counts, KAPPA), float)
        yield close("closed-form Xi^-1 = S K^-1 S^T (counts 6,3,2)", th.class_level_inverse(model.K, model.counts), Xi,
                    rtol=1e-10, atol=1e-12, what="Xi^-1")
        yield gram_identity_check("zero-loss class Gram identity at T (counts 6,3,2)", model, rep.trajectory.final, Xi)
        dec, d, tol = _etf_decision(rep)
        cos = rep.final["cosines"]
        ev = {"distance_etf": d, "tolerance": tol, "cosines": cos, "bias": rep.final["bias"]}
        if predict_etf:
            yield condition("ETF at T (counts 6,3,2)", dec == "etf", verified=f"distance {fmt(d, 3)} <= {fmt(tol, 3)}",
                            refuted=f"witness: ETF distance {fmt(d, 3)} > {fmt(tol, 3)}; cosines {np.round(cos, 6).tolist()}",
                            evidence=ev, inconclusive=(dec == "undecided"))
        else:
            yield condition("not an ETF at T (counts 6,3,2)", dec == "not-etf",
                            verified=f"witness: distance {fmt(d, 3)} > {WITNESS_FACTOR:g} x {fmt(tol, 3)}; cosines "
                                     f"{np.round(cos, 6).tolist()}",
                            refuted=f"the flow's class means are an ETF (distance {fmt(d, 3)} <= {fmt(tol, 3)})",
                            evidence=ev, inconclusive=(dec == "undecided"))
        model, rep = flow_for(BALANCED, 0.0)
        dec, d, tol = _etf_decision(rep)
        yield condition("balanced control (counts 4,4,4) is an ETF", dec == "etf",
                        verified=f"distance {fmt(d, 3)} <= {fmt(tol, 3)}", refuted=f"distance {fmt(d, 3)} > {fmt(tol, 3)}",
                        evidence={"distance_etf": d}, inconclusive=(dec == "undecided"))

    stmt = ("With unequal class sizes (block kernel) the small-initialisation MSE flow's centred class means are "
            + ("a simplex ETF" if predict_etf else "not a simplex ETF in general (counts 6,3,2)")
            + "; the class-mean Gram solves G_u Xi^-1 G_u = (I - b 1^T)^T (I - b 1^T) with Xi^-1 = diag(n) Gamma^-1.")
    return _claim(claim_id, stmt, check, tags=("symbolic", "numeric"))


# --------------------------------------------------------------------------------------
# ntk.ce.nc1-decays, ntk.ce.collapse
# --------------------------------------------------------------------------------------

#: The rate inequality exact >= rate x lower at a state: both sides are sums of products computed with relative
#: accuracy (softmax differences via expm1, theory.ntk.ce_within_dissipation); measured exact/lower - 1 = 1.5e-12
#: at eps = 1e-6 (the true O(eps^2) excess), so 1e-9 is rounding room only.
CE_RATE_RTOL = 1e-9
#: Monotone scatter along a flow: an increase between grid times must stay within this multiple of the estimated
#: integration error (|scatter_primary - scatter_tight| at both times) plus the rounding floor of D = H - class
#: means (CE_SCATTER_ROUNDING max_t ||H||_F)^2 (D is a difference of O(||H||) numbers).
CE_SCATTER_ERROR_FACTOR = 10.0
CE_SCATTER_ROUNDING = 1e-13
#: NC1 collapse at the horizon: the proven upper bound of NC1(T) must be at most this multiple of eps^2 (the
#: within-class part stays O(eps), the class means are O(1) once escaped; measured ~1e-1 eps^2 at T = 30).
CE_NC1_EPS_FACTOR = 1e4
#: "No collapse" (a false prediction): NC1(T) keeps at least this fraction of NC1(0).
CE_NO_COLLAPSE_KEEP = 0.9
#: CE flows of the decay claims: block kernels (K P_0 = P_0 K), balanced and imbalanced, from small and O(1)
#: initialisations, and a within-class perturbation (the kernel still preserves the within-class space).
CE_DECAY_FLOWS = ((BALANCED, 0.0, "generic", EPS), (IMBALANCED, 0.0, "generic", EPS), (BALANCED, 0.0, "generic", 0.3),
                  (BALANCED, RHO, "within", EPS))


def linearised_growth_rate(model: sg.GeneralModel, n: int) -> float:
    """Largest real part of the eigenvalues of the central-difference Jacobian of the right-hand side at W = H = 0
    with the bias fitted (softmax(b) = n/N for CE, b = n/N for MSE)."""
    C, N = model.C, model.N
    frac = np.asarray(model.counts, float) / N
    b = np.log(frac) if model.loss == "ce" else frac
    st = sg.GState(np.zeros((C, n)), b, np.zeros((n, N)))
    y0 = np.concatenate([st.W.ravel(), st.b, st.H.ravel()])

    def f(y):
        W, bb, H = y[:C * n].reshape(C, n), y[C * n:C * n + C], y[C * n + C:].reshape(n, N)
        d = sg.rhs_state(model, sg.GState(W, bb, H))
        return np.concatenate([d.W.ravel(), d.b, d.H.ravel()])

    J = np.empty((y0.size, y0.size))
    for i in range(y0.size):
        e = np.zeros(y0.size)
        e[i] = FD_STEP
        J[:, i] = (f(y0 + e) - f(y0 - e)) / (2 * FD_STEP)
    return float(np.max(np.linalg.eigvals(J).real))


def within_potential(model: sg.GeneralModel, st: sg.GState) -> float:
    """Phi = tr(D K^-1 D^T), D = H P_0 (= ||D||_F^2/lambda_0 for a block kernel)."""
    D = st.H @ th.within_projector(model.counts)
    return float(np.sum((D @ model.Kinv) * D))


def potential_rate(model: sg.GeneralModel, st: sg.GState) -> float:
    """d/dt Phi = 2 tr(D K^-1 dD^T) from the solver's right-hand side (sg.rhs_state), D = H P_0."""
    P0 = th.within_projector(model.counts)
    D = st.H @ P0
    dD = sg.rhs_state(model, st).H @ P0
    return float(2 * np.sum((D @ model.Kinv) * dD))


def ce_rate_checks(model: sg.GeneralModel, states, rate: float, label: str) -> Check:
    """d/dt Phi <= -2 rate s sum_i q_i ||J Delta_i||^2 at each state (theory.ntk.ce_within_dissipation): VERIFIED when
    exact >= rate x lower (1 - CE_RATE_RTOL) at every state, REFUTED with the first violating state."""
    worst, at = math.inf, None
    for k, st in enumerate(states):
        d = th.ce_within_dissipation(st.W, st.b, st.H, model.counts)
        if d["lower"] > 0:
            r = d["exact"] / (rate * d["lower"])
            if not r >= worst:  # NaN fails closed: it becomes the reported state
                worst, at = r, {"state": k, **d}
    name = f"d/dt tr(D K^-1 D^T) <= -2 ({rate:g}) s sum_i q_i ||J Delta_i||^2 at every state ({label})"
    if at is None or not math.isfinite(worst):  # D = 0 everywhere, or a non-finite number: no witness either way
        return Check(name, Verdict.INCONCLUSIVE, f"not decided: min ratio {fmt(worst, 3)} (no state with a within-class "
                     "part, or a non-finite value)", {"min_ratio": None if at is None else at.get("ratio")})
    ok = worst >= 1 - CE_RATE_RTOL
    return condition(name, ok,
                     verified=f"min exact/({rate:g} x lower) = {fmt(worst, 12)} over {len(states)} states",
                     refuted=f"witness: state {None if at is None else at['state']} has exact/({rate:g} x lower) = "
                             f"{fmt(worst, 12)} < 1 - {CE_RATE_RTOL:g}",
                     evidence={"min_ratio": worst, "at": at, "states": len(states)})


def ce_scatter_monotone_check(model: sg.GeneralModel, rep: sg.GeneralFlowReport, label: str) -> Check:
    """The flow's within-class potential Phi never increases (grid times) beyond the integration error estimate."""
    if rep.series_error is None:
        return Check(f"tr(D K^-1 D^T) non-increasing along the flow ({label})", Verdict.INCONCLUSIVE,
                     "no integration-error estimate on the grid (run stopped)", {})
    phi = np.array([within_potential(model, s_) for s_ in rep.trajectory.states])
    lam0 = th.compressed_within_eigenvalue(model.K, model.counts)
    hmax = max(float(np.linalg.norm(s_.H)) for s_ in rep.trajectory.states)
    err = CE_SCATTER_ERROR_FACTOR * rep.series_error["scatter"] / lam0
    floor = (CE_SCATTER_ROUNDING * hmax) ** 2 / lam0
    inc = np.diff(phi) - (err[1:] + err[:-1] + floor)
    worst = float(np.max(inc)) if inc.size else 0.0
    k = int(np.argmax(inc)) if inc.size else 0
    return condition(f"tr(D K^-1 D^T) non-increasing along the flow ({label})", worst <= 0,
                     verified=f"Phi(0) = {fmt(phi[0], 4)} -> Phi(T) = {fmt(phi[-1], 4)}, no increase beyond the integration "
                              f"error ({len(phi)} grid times)",
                     refuted=f"Phi increases by {fmt(float(np.diff(phi)[k]), 3)} between grid times {k} and {k + 1}, beyond "
                             "the error estimate (not a proof: the integration error is estimated)",
                     evidence={"phi_0": float(phi[0]), "phi_T": float(phi[-1]), "max_excess": worst},
                     inconclusive=True)


def _ce_flow(counts, rho, kind, eps):
    return flow_for(tuple(counts), rho, kind, "ce", 0, "random", eps)


def ce_nc1_decay_claim(rate: float = 1.0, eigen_index: int = 0, claim_id: str = "ntk.ce.nc1-decays") -> Claim:
    """Cross-entropy, a kernel that maps the within-class space into itself (K P_0 = P_0 K: block kernels with any
    class sizes, within-class perturbations): with Phi = tr(D K^-1 D^T), D = H P_0, Delta_i = z_i - zbar_c,

        d/dt Phi = -2 s sum_i <Delta_i, softmax(z_i) - softmax(zbar_c)> <= -2 s sum_i q_i ||J Delta_i||^2 <= 0,

    q_i = min_k min(softmax_k(z_i), softmax_k(zbar_c)), J = I - 1 1^T/C (block kernel: Phi = ||D||_F^2/lambda_0). The
    within-class scatter never increases, and decays at least at that rate; the constant 1 is sharp (Delta -> 0 at
    uniform logits, e.g. a small initialisation).

    Source: derived here (docs/ntk.md, "Cross-entropy"), for the review thread's question "does this hold for CE?".
    Conditions: CE loss, fixed SPD kernel with K P_0 = P_0 K.
    Checked: sympy d/dt ||D||^2 = -2 lambda <W D, G> for the block kernel with symbolic kappa and a generic G
    (``eigen_index`` 0 = lambda_0; another eigenvalue is REFUTED with a numeric witness); sympy the two softmax facts
    (Hessian of log softmax, variance identity); the derivative formula against the solver's right-hand side at
    O(1) random states; the inequality with constant ``rate`` at every grid state of CE flows (balanced and
    imbalanced block kernels, eps = 1e-6 and 0.3, a within-class perturbation); the flows' Phi non-increasing
    within the integration error. ``rate`` > 1 is REFUTED at the small-initialisation states (ratio 1 + O(eps^2))."""

    def check(ctx: RunContext) -> Iterable[Check]:
        yield _matrix_zero_check("d/dt ||D||^2 = -2 lambda_0 <W D, G> (block kernel, symbolic kappa, generic G; counts 2,2)",
                                 th.sym_ce_within_derivative((2, 2), 2, eigen_index))
        if eigen_index == 0:
            yield _matrix_zero_check("the same for counts 2,1 (imbalanced)", th.sym_ce_within_derivative((2, 1), 2, 0))
        yield _matrix_zero_check("softmax: Hessian of log sigma_0 = -(diag sigma - sigma sigma^T); variance identity (C = 3)",
                                 th.sym_softmax_lemmas(3))
        rng = np.random.default_rng(7)
        worst = 0.0
        for counts, rho, kind in ((BALANCED, 0.0, "generic"), (IMBALANCED, 0.0, "generic"), (BALANCED, RHO, "within")):
            model = model_for(counts, rho, kind, "ce")
            for _ in range(3):
                st = _random_state(rng, model.C, model.C + 1, model.N)
                pred = -2 * model.s * th.ce_within_dissipation(st.W, st.b, st.H, model.counts)["exact"]
                meas = potential_rate(model, st)
                worst = max(worst, abs(pred - meas) / max(1.0, abs(meas)))
        yield condition("d/dt Phi = -2 s sum_i <Delta_i, sigma(z_i) - sigma(zbar_c)> against the solver's right-hand side "
                        "(9 random O(1) states, counts 4,4,4 / 6,3,2 / within-class perturbation)", worst <= IDENTITY_TOL,
                        verified=f"max relative difference {fmt(worst, 3)}",
                        refuted=f"witness: relative difference {fmt(worst, 3)} > {IDENTITY_TOL:g}", evidence={"max_rel": worst})
        for counts, rho, kind, eps in CE_DECAY_FLOWS:
            model, rep = _ce_flow(counts, rho, kind, eps)
            label = f"{_label(counts, rho, kind, 'ce')}, eps {eps:g}"
            yield from _stopped(rep)
            yield ce_rate_checks(model, rep.trajectory.states, rate, label)
            yield ce_scatter_monotone_check(model, rep, label)

    lam = "lambda_0" if eigen_index == 0 else ["lambda_0", "lambda_c", "lambda_g"][eigen_index]
    stmt = ("Cross-entropy with a kernel that preserves the within-class space (K P_0 = P_0 K, e.g. any block kernel): "
            "Phi = tr(D K^-1 D^T) obeys d/dt Phi = -2 s sum_i <z_i - zbar_c, softmax(z_i) - softmax(zbar_c)> <= "
            f"-2 ({rate:g}) s sum_i q_i ||J (z_i - zbar_c)||^2 <= 0, q_i = min_k min(softmax_k(z_i), softmax_k(zbar_c)) "
            f"(block kernel: d/dt ||D||^2 = -2 s {lam} (...)): the within-class scatter never increases, at that rate.")
    return _claim(claim_id, stmt, check, tags=("symbolic", "numeric"))


def ce_collapse_checks(counts, collapses: bool = True, eps: float = EPS) -> list[Check]:
    """NC1 collapse at the horizon of a small-initialisation CE flow on a block kernel (:func:`ce_collapse_check`)."""
    model, rep = _ce_flow(counts, 0.0, "generic", eps)
    return _stopped(rep) + [ce_collapse_check(model, rep, eps, collapses, _label(counts, 0.0, loss="ce"))]


def ce_collapse_check(model: sg.GeneralModel, rep: sg.GeneralFlowReport, eps: float, collapses: bool = True,
                      label: str = "this flow") -> Check:
    """The proven bound NC1(T) <= (C/N) Lambda_0 Phi(0)/||M(T)||^2 of a CE flow with K P_0 = P_0 K (Phi never
    increases, ntk.ce.nc1-decays), ||M(T)||^2 lowered by 10 C x the estimated integration error of the Gram, against
    CE_NC1_EPS_FACTOR eps^2 (``collapses``; above it INCONCLUSIVE: not escaped yet) or, for the false prediction "no
    collapse", against CE_NO_COLLAPSE_KEEP NC1(0) (REFUTED when the proven bound is below it)."""
    st0, stT = rep.trajectory.states[0], rep.trajectory.final
    lam0 = th.compressed_within_eigenvalue(model.K, model.counts)
    _, M, _ = sg.class_decompose(stT.H, model.counts)
    gerr = _err(rep, "gram")
    m2 = None if gerr is None else float(np.sum(M * M)) - 10 * model.C * gerr
    bound = th.ce_nc1_upper_bound(lam0 * within_potential(model, st0), M, model.N) if m2 and m2 > 0 else None
    if bound is not None:
        bound *= float(np.sum(M * M)) / m2
    nc1_0 = sg.measure(model, st0)["nc1"]
    nc1_T = rep.final["nc1"]
    ev = {"nc1_upper_T": bound, "nc1_T": nc1_T, "nc1_0": nc1_0, "M_sq_T": float(np.sum(M * M)), "gram_error": gerr,
          "loss_T": rep.final["loss"], "distance_etf_T": rep.final["distance_etf"]}
    name = f"NC1(T) <= (C/N) Lambda_0 Phi(0)/||M(T)||^2 ({label}, eps {eps:g}, T {rep.trajectory.T:g})"
    if bound is None:
        return Check(name, Verdict.INCONCLUSIVE, "no bound: the class means have not escaped or no error estimate", ev)
    if not collapses:
        return condition(name + ": NC1 keeps 0.9 of NC1(0) (false prediction)", bound >= CE_NO_COLLAPSE_KEEP * nc1_0,
                         verified=f"bound {fmt(bound, 3)} >= {CE_NO_COLLAPSE_KEEP:g} NC1(0)",
                         refuted=f"witness: proven NC1(T) <= {fmt(bound, 3)} < {CE_NO_COLLAPSE_KEEP:g} x NC1(0) = "
                                 f"{fmt(CE_NO_COLLAPSE_KEEP * nc1_0, 3)}", evidence=ev)
    tol = CE_NC1_EPS_FACTOR * eps * eps
    return condition(name, bound <= tol and nc1_T is not None and nc1_T <= bound * (1 + 1e-6),
                     verified=f"proven NC1(T) <= {fmt(bound, 3)} <= {CE_NC1_EPS_FACTOR:g} eps^2 = {fmt(tol, 3)} "
                              f"(measured {fmt(nc1_T, 3)}, NC1(0) = {fmt(nc1_0, 3)})",
                     refuted=f"bound {fmt(bound, 3)} above {fmt(tol, 3)} or the measured NC1 {fmt(nc1_T, 3)} above it "
                             "(run longer?)", evidence=ev, inconclusive=True)


def ce_collapse_claim(constant: float = 1.0, escape_rate: Callable | None = None, collapses: bool = True,
                      claim_id: str = "ntk.ce.collapse") -> Claim:
    """Cross-entropy: what carries over from MSE, and NC1 collapse from a small initialisation. For any fixed SPD
    kernel the state-wise bound ||D||^2 <= (r L/2)(e + sqrt(e^2 + 4||W D||^2/(r L))) (E conserved) and the escape
    rate s sqrt(lambda_max(R_0 K R_0^T)) hold; for a block kernel (K P_0 = P_0 K) the within-class potential never
    increases (``ntk.ce.nc1-decays``), so NC1(t) <= (C/N) Lambda_0 Phi(0)/||M(t)||^2 = O(eps^2) once the class means
    have escaped: NC1 collapse, decided at the flow's horizon. Not claimed: the limit geometry (ETF) and the rate of
    NC1 -> 0 as t -> infinity (CE has no zero-loss state; the norms grow without bound).

    Source: derived here (the review thread's question "does this hold for CE?").
    Checked: the bound at every grid time of a CE flow (perturbed imbalanced kernel) with ``constant`` (1; a
    smaller one is REFUTED at the tight state); ``escape_rate(K, counts, s)`` (default
    theory.ntk.escape_rate_general) against the largest eigenvalue of the finite-difference Jacobian of the CE
    right-hand side at W = H = 0; the proven NC1(T) bound on CE flows from eps = 1e-6 with the block kernel (counts
    4,4,4 and 6,3,2) against 1e4 eps^2 (INCONCLUSIVE if the means have not escaped). ``collapses=False`` (the false
    "CE flows do not collapse": NC1 keeps 0.9 of its initial value) is REFUTED by the proven bound."""
    constant = as_float("constant", constant)  # NaN is refused, never a witness
    esc = escape_rate or th.escape_rate_general

    def check(ctx: RunContext) -> Iterable[Check]:
        model, rep = flow_for(IMBALANCED, RHO, "generic", "ce")
        yield from _stopped(rep)
        L = th.compressed_within_eigenvalue(model.K, model.counts)
        ratios = [_bound_ratio(model, s, constant, L) for s in rep.trajectory.states]
        yield condition("state-wise NC1 bound along a CE flow (counts 6,3,2, rho 0.3)", max(ratios) <= 1 + 1e-9,
                        verified=f"max ||D||^2/bound = {fmt(max(ratios), 5)}",
                        refuted=f"witness: ||D||^2 exceeds the bound by {fmt(max(ratios), 5)}", evidence={"max_ratio": max(ratios)})
        m2, st = tight_bound_state(BALANCED)
        r = _bound_ratio(m2, st, constant)
        yield condition("tight state for the bound", r <= 1 + 1e-9, verified=f"ratio {fmt(r, 12)}",
                        refuted=f"witness: ratio {fmt(r, 8)} > 1", evidence={"ratio": r})
        small = model_for(BALANCED, RHO, "generic", "ce")
        pred = float(esc(small.K, small.counts, small.s))
        meas = linearised_growth_rate(small, small.C + 1)
        yield close("CE escape rate = linearised growth rate at W = H = 0 (counts 4,4,4, rho 0.3)", pred, meas,
                    rtol=FD_RTOL, atol=1e-9, what="growth rate")
        for counts in (BALANCED, IMBALANCED):
            yield from ce_collapse_checks(counts, collapses)

    stmt = ("Cross-entropy: the state-wise NC1 bound (E conserved) and the escape rate s sqrt(lambda_max(R_0 K R_0^T)) "
            "carry over to any kernel; with a block kernel the within-class scatter never increases, so from a small "
            "initialisation NC1(t) <= (C/N) Lambda_0 Phi(0)/||M(t)||^2 = O(eps^2) once the class means have escaped "
            "(NC1 collapse at the horizon). Not claimed: the ETF limit and a rate of NC1 -> 0 as t -> infinity.")
    if not collapses:
        stmt = "(false) Cross-entropy flows from a small initialisation do not collapse: NC1 keeps 0.9 of its initial value."
    return _claim(claim_id, stmt, check, tags=("numeric",))


CLAIMS = [
    general_invariant_claim(),
    general_nc1_claim(),
    general_etf_claim(),
    imbalanced_nc1_claim(),
    imbalanced_etf_claim(),
    ce_invariant_claim(),
    ce_collapse_claim(),
    ce_nc1_decay_claim(),
]


# --------------------------------------------------------------------------------------
# One instance: ``ncproofs solve ntk --kernel ... | --kernel-perturbation ... | --counts ...``
# --------------------------------------------------------------------------------------

DEFAULT_T = 30.0
DEFAULT_EPS = 1e-6
#: Small-initialisation statements (ETF limit, NC1 = O(eps^2), escape rate) apply up to this scale.
SMALL_INIT_MAX = 1e-2
#: The ETF statements of a solve are about the limit: decided only once the loss at T is below this fraction of
#: the initial loss (a flow stopped mid-way, e.g. --time 2, is no witness either way; measured 1e-13 at T = 8 and
#: 1e-24 at T = 30 on the block kernel, 3e-15 at T = 30 on counts 6,3,2 with rho 0.3).
ETF_CONVERGED_RTOL = 1e-8
MAX_TABLE_ROWS = 200


def load_kernel(path: str, max_samples: int = th.MAX_GENERAL_SAMPLES) -> np.ndarray:
    """An N x N kernel from a .npy file (header checked before the data is read: shape, dtype, size)."""
    import os

    if not os.path.isfile(path):
        raise InstanceError(f"--kernel: no such file: {path}")
    try:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _fortran, dtype = reader(fh)
    except Exception as exc:
        raise InstanceError(f"--kernel: {path} is not a .npy array file ({type(exc).__name__}: {exc})") from None
    if len(shape) != 2 or shape[0] != shape[1]:
        raise InstanceError(f"--kernel: must be a square N x N array, got shape {shape}")
    if shape[0] > max_samples:
        raise InstanceError(f"--kernel: N = {shape[0]} exceeds the limit {max_samples} samples")
    if dtype.kind not in "fiu":
        raise InstanceError(f"--kernel: must hold real numbers, got dtype {dtype}")
    try:
        K = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise InstanceError(f"--kernel: cannot read {path}: {exc}") from None
    return np.asarray(K, dtype=float)


def build_model(*, counts=None, classes: int = 3, per_class: int = 4, kappa=KAPPA, kernel=None, rho: float = 0.0,
                seed: int = 0, s: float = 1.0, loss: str = "mse") -> sg.GeneralModel:
    """The model of one instance: class sizes (``counts``, else ``classes`` x ``per_class``), the kernel (a given
    array, else the block kernel with ``kappa``), plus the perturbation K0 of relative Frobenius size ``rho``."""
    rho = as_float("kernel perturbation rho", rho, nonnegative=True)
    seed = as_int("seed", seed, minimum=0)
    if loss not in sg.LOSSES:
        raise InstanceError(f"loss must be one of {', '.join(sg.LOSSES)}, got {loss!r}")
    if kernel is not None:
        K = np.asarray(kernel, dtype=float) if np.asarray(kernel).dtype.kind in "fiu" else np.asarray(kernel)
        N = K.shape[0] if K.ndim == 2 else -1
        if counts is None:
            C = as_int("C (classes)", classes, minimum=2)
            if N < 0 or N % C:
                raise InstanceError(f"--kernel: N = {N} samples is not a multiple of C = {C} classes (pass --counts)")
            counts = (N // C,) * C
        counts = th.check_counts(counts)
        K = th.validate_kernel(K, int(sum(counts)), "--kernel")
        desc = {"kernel": "given", "perturbation": rho, "kernel_seed": seed}
        if rho > 0:
            K = K + th.perturbation(K.shape[0], float(np.linalg.norm(K)), rho, seed)
        return sg.GeneralModel(K, counts, s, loss, desc)
    if counts is None:
        counts = (as_int("m (samples per class)", per_class, minimum=1),) * as_int("C (classes)", classes, minimum=2)
    return sg.block_model(counts, kappa, rho, seed, s, loss)


def _statement(claim_id: str, checks: list[Check]) -> Check:
    v, reason = summarise(checks)
    applicable = [c for c in checks if c.verdict is not Verdict.NOT_APPLICABLE]
    return Check(claim_id, v, reason, {"checks": [c.to_dict() for c in checks]},
                 independent=any(c.independent for c in applicable) if applicable else True)


def _general_options(model: sg.GeneralModel, feature_dim, init, init_scale, T, seed, sgd_batch, step_size,
                     steps) -> dict:
    """Validate the options of one general-kernel instance and refuse discrete work beyond the budget."""
    if init not in ("random", "e-zero"):
        raise InstanceError(f"init must be random or e-zero for a general kernel, got {init!r}")
    C, N = model.C, model.N
    n = as_int("n (feature dimension)", feature_dim if feature_dim is not None else C + 1, minimum=1, maximum=256)
    if n * N + C * n > 200_000:
        raise InstanceError(f"state size n N + C n = {n * N + C * n} exceeds the limit 200000")
    eps = as_float("init_scale", DEFAULT_EPS if init_scale is None else init_scale, positive=True)
    if not 1e-100 <= eps <= 1e3:
        raise InstanceError(f"init_scale must be in [1e-100, 1e3], got {eps:g}")
    T = as_float("time", DEFAULT_T / model.s if T is None else T, positive=True)
    if T < np.finfo(float).tiny:  # 1e-320: the error estimate's grid of 201 times collapsed (numpy's All-NaN warning)
        raise InstanceError(f"time must be at least {np.finfo(float).tiny:.3g} (a normal float64), got {T:g}")
    seed = as_int("seed", seed, minimum=0)
    o = {"init": init, "n": n, "eps": eps, "T": T, "seed": seed, "discrete": sgd_batch is not None or step_size is not None,
         "sgd_batch": sgd_batch, "step_size": step_size}
    if o["discrete"]:
        if step_size is None:
            raise InstanceError("--sgd-batch needs --step-size ETA (the discrete step size)")
        eta = as_float("step size", step_size, positive=True)
        batch = as_int("sgd batch", N if sgd_batch is None else sgd_batch, minimum=1, maximum=N)
        nsteps = as_int("steps" if steps is not None else "steps = ceil(time / step size)",
                        steps if steps is not None else max(1, int(math.ceil(T / eta))), minimum=1,
                        maximum=sg.MAX_DISCRETE_STEPS)
        work = nsteps * (6.0 * C * batch * N + 4.0 * C * n * N)
        if work > sg.MAX_FLOPS:
            raise InstanceError(f"discrete steps: {nsteps} steps x (6 C batch N + 4 C n N) flops exceed the work budget: "
                                f"{sg.flops_text(work)}; reduce --steps")
        o.update(eta=eta, batch=batch, nsteps=nsteps)
    return o


def _discrete_invariant(model: sg.GeneralModel, st0: sg.GState, o: dict, diagnostics: list[str], extra: dict):
    """Discrete steps: the exact change of E per step (``ntk.general.invariant``). Returns (statement, states,
    final state, final measures, integration errors (None))."""
    run = sg.discrete_run(model, st0, o["eta"], o["batch"], o["nsteps"], o["seed"])
    st = run["final"]
    recs = run["records"]
    worst = max((r["mismatch"] / max(1.0, r["scale"]) for r in recs), default=0.0)
    witness = max(recs, key=lambda r: r["change"], default=None)
    inv = [condition("exact change of E per discrete step", worst <= IDENTITY_TOL,
                     verified=f"E(after) - E(before) = eta^2 (H G^T G H^T - W^T G K G^T W) to {fmt(worst, 3)} x scale at "
                              f"{len(recs)} recorded steps; E is not conserved (largest change {fmt(witness['change'] if witness else 0, 3)})",
                     refuted=f"per-step change differs from the formula by {fmt(worst, 3)} x scale",
                     evidence={"records": recs, "total_drift": run["E_drift"]})]
    if run["diverged_at"] is not None:
        diagnostics.append(f"discrete steps diverged at step {run['diverged_at']} (reduce --step-size)")
        inv.append(Check("discrete run", Verdict.INCONCLUSIVE, f"diverged at step {run['diverged_at']}", {}))
    extra["sgd"] = {"batch": o["batch"], "step_size": o["eta"], "steps": o["nsteps"], "E_total_drift": run["E_drift"],
                    "records": recs, "batches": "epoch permutations np.random.default_rng(2_000_000 + seed)"}
    err = {k: None for k in ("nc1", "cosines", "distance_etf", "gram", "bias")}
    return _statement("ntk.general.invariant", inv), [st0, st], st, sg.measure(model, st, model.Kinv), err


def _general_nc1_statement(model: sg.GeneralModel, states, st, fin: dict, err: dict, o: dict, L0: float) -> Check:
    """``ntk.general.nc1-at-e-zero``: the state-wise bound at every recorded time, and NC1 = O(eps^2) at T (MSE flows
    from a small random start)."""
    C, N, eps = model.C, model.N, o["eps"]
    ratios = [_bound_ratio(model, s_, 1.0, L0) for s_ in states]
    E_end = th.general_invariant(st.W, st.H, model.Kinv)
    b_end = th.general_nc1_bound(st.W, st.H, E_end, model.K, model.counts, 1.0, L0)
    trB = float(np.sum(sg.class_decompose(st.H, model.counts)[1] ** 2)) / C
    nc1_upper = (b_end["bound"] / N) / trB if trB > 0 else None
    nc1_checks = [condition("||D||^2 <= (r L/2)(e + sqrt(e^2 + 4||WD||^2/(r L))) at every recorded time", max(ratios) <= 1 + 1e-9,
                            verified=f"max ratio {fmt(max(ratios), 5)}; proven NC1(T) <= {fmt(nc1_upper, 3)} "
                                     f"(measured {fmt(fin['nc1'], 3)}), L = lambda_max(P0 K P0) = {fmt(L0, 5)}",
                            refuted=f"witness: ratio {fmt(max(ratios), 5)} > 1", evidence={"max_ratio": max(ratios), "bound_T": b_end,
                                                                                          "nc1_upper_T": nc1_upper})]
    if model.loss == "mse" and o["init"] == "random" and not o["discrete"]:
        if eps > SMALL_INIT_MAX:
            nc1_checks.append(hypothesis_fails("NC1 = O(eps^2) at T", f"init scale eps -> 0 (eps = {eps:g} > {SMALL_INIT_MAX:g})"))
        else:
            tol = 1e4 * eps * eps + 10 * (err.get("nc1") or 0.0)
            nc1_checks.append(condition("NC1 = O(eps^2) at T", fin["nc1"] is not None and fin["nc1"] <= tol,
                                        verified=f"NC1(T) = {fmt(fin['nc1'], 3)} <= 1e4 eps^2 = {fmt(tol, 3)}",
                                        refuted=f"NC1(T) = {fmt(fin['nc1'], 3)} > {fmt(tol, 3)} (run longer?)",
                                        evidence={"nc1": fin["nc1"]}, inconclusive=True))
    return _statement("ntk.general.nc1-at-e-zero", nc1_checks)


def _general_geometry_statement(model: sg.GeneralModel, st0, st, fin: dict, err: dict, o: dict) -> Check:
    """``ntk.general.etf``: the class-mean geometry of the small-initialisation MSE limit."""
    eps, d = o["eps"], fin["distance_etf"]
    geo_checks: list[Check] = []
    if model.loss == "ce":  # the statement is about the MSE flow's zero-loss limit; CE flows have no finite limit
        geo_checks.append(hypothesis_fails("ETF of the small-initialisation limit",
                                           f"MSE loss (the statement is about the MSE flow's zero-loss limit; a CE flow "
                                           f"has none); measured ETF distance at T {fmt(d, 3)}", {"distance_etf": d}))
    elif o["discrete"] or o["init"] != "random" or eps > SMALL_INIT_MAX:
        geo_checks.append(hypothesis_fails("ETF of the small-initialisation limit",
                                           "gradient flow from a small random initialisation (eps <= 1e-2)"))
    else:
        tol = None if err.get("distance_etf") is None else ETF_ATOL + 100 * eps * eps + 10 * err["distance_etf"]
        pred = etf_condition(model.K, model.counts)
        loss0 = sg.loss_grad(model, st0)[0]
        converged = fin["loss"] <= ETF_CONVERGED_RTOL * loss0
        if tol is None:
            geo_checks.append(Check("ETF distance", Verdict.INCONCLUSIVE, "no integration-error estimate (run stopped)", {}))
        elif not converged:  # the statement is about the limit: an unconverged state is no witness either way
            geo_checks.append(Check("ETF of the small-initialisation limit", Verdict.INCONCLUSIVE,
                                    f"not decided at T = {o['T']:g}: the flow has not converged (loss {fmt(fin['loss'], 3)} > "
                                    f"{ETF_CONVERGED_RTOL:g} x the initial loss {fmt(loss0, 3)}; run longer); ETF distance "
                                    f"at T {fmt(d, 3)}", {"distance_etf": d, "loss": fin["loss"], "initial_loss": loss0,
                                                          "condition_predicts_etf": bool(pred)}))
        elif pred:
            geo_checks.append(condition("ETF (balanced, K S^T = S^T (a I + c 1 1^T))", d is not None and d <= tol,
                                        verified=f"ETF distance {fmt(d, 3)} <= {fmt(tol, 3)}",
                                        refuted=f"witness: ETF distance {fmt(d, 3)} > {fmt(tol, 3)}", evidence={"distance_etf": d}))
        else:
            geo_checks.append(condition("not an ETF (the sufficient condition fails)", d is not None and d > WITNESS_FACTOR * tol,
                                        verified=f"not a simplex ETF: distance {fmt(d, 3)} > {WITNESS_FACTOR:g} x {fmt(tol, 3)}",
                                        refuted=f"distance {fmt(d, 3)} is within {WITNESS_FACTOR:g} x {fmt(tol, 3)} "
                                                "(an ETF although the sufficient condition fails, or undecided)",
                                        evidence={"distance_etf": d, "block_sums": th.block_sum_structure(model.K, model.counts)},
                                        inconclusive=True))
        geo_checks.append(gram_identity_check("zero-loss class Gram G_u (S K^-1 S^T) G_u = B^T B at T", model, st,
                                              th.class_level_inverse(model.K, model.counts)))
    return _statement("ntk.general.etf", geo_checks)


def _general_rates_statement(model: sg.GeneralModel, rep: sg.GeneralFlowReport, o: dict) -> tuple[Check, list]:
    """``ntk.general.rates``: the fitted growth of ||M|| between the smallest and largest s sqrt(lambda(R_0 K R_0^T))."""
    N = model.N
    S = th.class_indicator(model.counts)
    nvec = np.asarray(model.counts, float)
    R0 = np.outer(nvec / N, np.ones(N)) - S
    A = R0 @ model.K @ R0.T
    ev = np.linalg.eigvalsh((A + A.T) / 2)
    nz = ev[ev > 1e-10 * ev[-1]]
    nzr = (model.s * np.sqrt(nz)).tolist()
    fit = rep.escape
    if o["init"] != "random" or o["eps"] > SMALL_INIT_MAX:
        rc = [hypothesis_fails("escape rate", "small random initialisation")]
    elif fit.get("rate") is None:
        rc = [Check("escape rate", Verdict.INCONCLUSIVE, fit.get("reason", "no window"), fit)]
    else:
        lo, hi = min(nzr) * (1 - ESCAPE_RTOL), max(nzr) * (1 + ESCAPE_RTOL)
        rc = [condition("escape rate of ||M|| within s sqrt(eig(R_0 K R_0^T))", lo <= fit["rate"] <= hi,
                        verified=f"fitted {fmt(fit['rate'], 6)} in [{fmt(min(nzr), 6)}, {fmt(max(nzr), 6)}] (+-{ESCAPE_RTOL:g})",
                        refuted=f"fitted {fmt(fit['rate'], 6)} outside [{fmt(lo, 6)}, {fmt(hi, 6)}]",
                        evidence={"fit": fit, "predicted_rates": nzr}, inconclusive=True)]
    return _statement("ntk.general.rates", rc), nzr


def _ce_statements(model: sg.GeneralModel, rep: sg.GeneralFlowReport | None, states, o: dict) -> list[Check]:
    """Under CE: ``ntk.ce.nc1-decays`` (the rate inequality at every recorded state and Phi non-increasing along the
    flow) and ``ntk.ce.collapse`` (the proven NC1(T) bound of a small-initialisation flow), both for kernels with
    K P_0 = P_0 K (NOT_APPLICABLE otherwise, and for discrete steps)."""
    keeps = th.commutes_with_within(model.K, model.counts)
    why = None
    if o["discrete"]:
        why = "gradient flow (discrete steps are not a flow)"
    elif not keeps:
        why = "K maps the within-class space into itself (K P_0 = P_0 K; this kernel does not)"
    if why is not None:
        return [_statement("ntk.ce.nc1-decays", [hypothesis_fails("within-class dissipation", why)]),
                _statement("ntk.ce.collapse", [hypothesis_fails("NC1 collapse bound", why)])]
    decay = _stopped(rep) + [ce_rate_checks(model, states, 1.0, "recorded states"),
                             ce_scatter_monotone_check(model, rep, "this flow")]
    if o["init"] != "random" or o["eps"] > SMALL_INIT_MAX:
        coll = [hypothesis_fails("NC1 collapse bound", f"small random initialisation (eps <= {SMALL_INIT_MAX:g})")]
    else:
        coll = _stopped(rep) + [ce_collapse_check(model, rep, o["eps"])]
    return [_statement("ntk.ce.nc1-decays", decay), _statement("ntk.ce.collapse", coll)]


def _general_report(model: sg.GeneralModel, o: dict, st, fin: dict, err: dict, rep, statements, diagnostics,
                    nzr, L0: float, extra: dict, t0: float) -> SolveReport:
    """The solve report of one general-kernel instance (the ``solve ntk --json`` schema of docs/ntk.md)."""
    import time as _time

    from theory.geometry import classify_gram, nc_metrics

    d = fin["distance_etf"]
    T = o["T"]
    met = nc_metrics(st.H, model.labels, st.W, st.b, center_w=True)
    geo = classify_gram(fin["gram"])
    horizon = {"T": T, "grid": "201 evenly spaced times" if not o["discrete"] else None}
    return SolveReport(
        family=FAMILY,
        instance={"model": model.to_dict(), "feature_dim": o["n"], "init": o["init"], "init_scale": o["eps"], "time": T,
                  "seed": o["seed"], "sgd_batch": o["sgd_batch"], "step_size": o["step_size"],
                  "steps": extra.get("sgd", {}).get("steps")},
        predicted={"geometry": ("simplex-etf" if etf_condition(model.K, model.counts) else "not an ETF (generic kernel)")
                   if model.loss == "mse" else None, "escape_rates": nzr, "Lambda0": L0},
        solution={"value": fin["loss"], "method": "discrete mini-batch steps" if o["discrete"] else
                  "DOP853 gradient flow (eigenbasis of K for MSE)", "converged": None,
                  "seconds": _time.perf_counter() - t0},
        certificate={"lower_bound": 0.0, "gap": fin["loss"], "method": "loss >= 0"},
        geometry={"classification": geo.classification, "class_mean_cosines": fin["cosines"],
                  "metrics": met.to_dict(), "distance_etf": d, "note": f"at the final state (t = {T:g})"},
        claims=statements,
        routes={"flow": None if rep is None else {"steps": rep.trajectory.steps, "nfev": rep.trajectory.nfev,
                                                  "stopped": rep.trajectory.stopped,
                                                  "check_run_steps": rep.check_run.steps if rep.check_run else None}},
        diagnostics=diagnostics,
        extra={"final": {"nc1": fin["nc1"], "nc1_pinv": fin["nc1_pinv"], "cosines": fin["cosines"],
                         "cosines_sample_mean": fin["cosines_sample_mean"], "distance_etf": d,
                         "bias": fin["bias"], "gram": fin["gram"], "loss": fin["loss"], "scatter": fin["scatter"],
                         "W_fro_sq": fin["W_fro_sq"]},
               "integration_error": err,
               "invariant": None if rep is None else {"max_drift": float(rep.series["E_drift"].max()),
                                                     "scale": float(rep.series["E_scale"].max())},
               "rates": {"escape_predicted": nzr, "escape_fitted": None if rep is None else rep.escape},
               "conventions": {
                   "model": "Z = W H + b 1^T; MSE L = (s/2)||Z - Y||_F^2, G = s(Z - Y); CE L = s sum_i (logsumexp z_i - "
                            "z_{i,y_i}), G = s(softmax Z - Y); dW = -G H^T, db = -G 1, dH = -W^T G K",
                   "kernel": "K = Kb + K0, Kb block (kappa_d, kappa_c, kappa_n) over the class sizes (or the given file), "
                             "K0 = rho ||Kb||_F A A^T/||A A^T||_F, A = default_rng(1_000_000 + seed).standard_normal((N, N))",
                   "init": "W = eps N(0,1) (C x n), then H = eps N(0,1) (n x N), from default_rng(seed); b = 0; n = C + 1 "
                           "by default (e-zero: H = W^T Q^T K^(1/2))",
                   "horizon": horizon,
                   "nc1": "tr(Sigma_W)/tr(Sigma_B), Sigma_W over all samples / N, Sigma_B over the unweighted class means "
                          "centred by their unweighted mean / C (theory.geometry.nc_metrics)",
                   "cosines": "cosines of the class means centred by their unweighted mean (cosines_sample_mean: centred "
                              "by the sample mean H 1/N)"},
               **extra},
        seconds=_time.perf_counter() - t0,
    )


def check_general_instance(model: sg.GeneralModel, *, feature_dim: int | None = None, init: str = "random",
                           init_scale: float | None = None, T: float | None = None, seed: int = 0,
                           sgd_batch: int | None = None, step_size: float | None = None, steps: int | None = None,
                           max_steps: int = sg.MAX_STEPS) -> SolveReport:
    """Integrate (or step) one general-kernel instance and judge each statement that applies to it:
    ``ntk.general.invariant`` (flow: drift; discrete steps: the exact change per step), ``ntk.general.nc1-at-e-zero``
    (the state-wise bound at every time and NC1 at T), the class-mean geometry (``ntk.general.etf``), the
    escape rate and, under CE, ``ntk.ce.nc1-decays`` and ``ntk.ce.collapse`` (kernels with K P_0 = P_0 K; else
    NOT_APPLICABLE). Budgets in work (DOP853 steps, flops, discrete steps) are checked before any integration.

    Returns a :class:`proofs_check.core.SolveReport` (``to_dict()`` is the ``solve --json`` schema, with the
    extra keys ``final``, ``integration_error``, ``invariant``, ``rates``, ``conventions`` and, for discrete steps,
    ``sgd``). Raises ``theory._validate.InstanceError`` (an InputError) for bad options or work beyond the budget."""
    import time as _time

    t0 = _time.perf_counter()
    o = _general_options(model, feature_dim, init, init_scale, T, seed, sgd_batch, step_size, steps)
    n, eps = o["n"], o["eps"]
    st0 = sg.init_random(model, n, eps, o["seed"]) if init == "random" else sg.init_e_zero(model, n, eps, o["seed"])
    statements: list[Check] = []
    diagnostics: list[str] = []
    L0 = th.compressed_within_eigenvalue(model.K, model.counts)
    extra: dict = {}
    rep = None
    if o["discrete"]:
        inv, states, st, fin, err = _discrete_invariant(model, st0, o, diagnostics, extra)
        statements.append(inv)
    else:
        rep = sg.run_flow(model, st0, o["T"], n_grid=201, error_estimate=True, max_steps=max_steps,
                          check_grid=model.loss == "ce")
        if rep.trajectory.stopped:
            diagnostics.append(f"flow: {rep.trajectory.stopped}")
        st = rep.trajectory.final
        states = rep.trajectory.states
        fin, err = rep.final, rep.error
        statements.append(_statement("ntk.general.invariant", _stopped(rep) + [
            invariant_drift_check("flow conserves E (fixed SPD kernel, G = dL/dZ)", rep)]))
    statements.append(_general_nc1_statement(model, states, st, fin, err, o, L0))
    statements.append(_general_geometry_statement(model, st0, st, fin, err, o))
    nzr = None
    if not o["discrete"]:
        rates, nzr = _general_rates_statement(model, rep, o)
        statements.append(rates)
    if model.loss == "ce":
        statements += _ce_statements(model, rep, states, o)
    return _general_report(model, o, st, fin, err, rep, statements, diagnostics, nzr, L0, extra, t0)


def table_rows(counts_list, rhos, kappa=KAPPA, loss: str = "mse", seed: int = 0, eps: float = DEFAULT_EPS,
               T: float = DEFAULT_T) -> list[list]:
    """Rows (counts, rho, NC1(T), ETF distance, min/max off-diagonal cosine, integration error of the distance)
    of small-initialisation flows (n = C + 1)."""
    rows = []
    if len(counts_list) * len(rhos) > MAX_TABLE_ROWS:
        raise InstanceError(f"--counts x --kernel-perturbation: the grid has {len(counts_list)} x {len(rhos)} rows, "
                            f"more than the limit {MAX_TABLE_ROWS}")
    for counts in counts_list:
        for rho in rhos:
            model = build_model(counts=tuple(counts), kappa=kappa, rho=rho, seed=seed, loss=loss)
            rep = sg.run_flow(model, sg.init_random(model, model.C + 1, eps, seed), T, n_grid=201)
            cos = rep.final["cosines"]
            off = cos[~np.eye(model.C, dtype=bool)]
            rows.append([",".join(str(c) for c in counts), rho, rep.final["nc1"], rep.final["distance_etf"],
                         float(np.min(off)), float(np.max(off)), rep.error.get("distance_etf"), rep.trajectory.stopped or "T"])
    return rows
