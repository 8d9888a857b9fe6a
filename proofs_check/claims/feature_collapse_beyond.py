"""Feature collapse beyond the symmetric model (issue 23): trainable LayerNorm, no weight decay, random latents.

Statements come from the review thread of Laurent, von Brecht, Bresson, "Feature Collapse" (ICLR 2024);
the precise forms, reductions and certificates are derived in docs/feature_collapse.md ("Beyond the
symmetric model"). Every claim is built by a factory taking the statement's prediction or parameters, so a
test can feed a false variant and see it REFUTED.

- trainable-ln.attained (quoted heuristic presumes a minimiser): REFUTED for undecayed affine parameters
  by the rescaling (U, g, beta) -> (U/c, c g, c beta) (sympy: scores unchanged) and the exact values along it;
  -corrected: no minimiser with lambda_LN = 0, a minimiser with lambda_LN > 0 (coercive).
- trainable-ln.type2: lambda_LN > 0, n_c = 2: the coordinate-aligned type-II point is THE minimiser
  (atomic-dual bound closes the gap; the face of the dual gauge is one sign vector; geometry argument).
- trainable-ln.landscape: "the minimisers are exactly the fixed-LN type-II configurations (any orientation)":
  REFUTED (a fixed-LN type-II orientation whose best value over (U, g, beta) is provably above the optimum);
  -corrected: the reduced problem is a group lasso; its minimisers are the coordinate-aligned ones.
- no-decay.no-minimum, no-decay.limit; random-latents.word-collapse, random-latents.geometry.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

import numpy as np

from proofs_check.core import (Check, Claim, Provenance, RunContext, Verdict, close, condition, exceeds, fmt,
                               is_finite, optimum_matches, symbolic_zero, within)
from proofs_check.claims.feature_collapse import FAMILY, GEOM_RTOL, _instance_label, value_tol

try:  # being moved into theory (issue 31); either location works
    from theory.feature_collapse import claimed_configuration
except ImportError:  # pragma: no cover - until the move lands
    from proofs_check.claims.feature_collapse import claimed_configuration
from solvers import feature_collapse as S
from solvers import feature_collapse_beyond as B
from solvers import feature_collapse_ln as LN
from theory import feature_collapse as T
from theory.feature_collapse import FCInstance

SRC_THREAD = "review thread of Laurent, von Brecht, Bresson, Feature Collapse, ICLR 2024 (docs/feature_collapse.md)"
SRC_DERIVED = "derived in ncproofs from Laurent, von Brecht, Bresson, Feature Collapse, ICLR 2024 (docs/feature_collapse.md)"

#: Face margin of the trainable-LN uniqueness certificate: every sign vector other than the concept signs has
#: gauge value <= mu (1 - FACE_RTOL) (observed second / mu ~ 0.5 to 0.8; round-off ~1e-15).
FACE_RTOL = 1e-7
#: Consecutive values of a witness sequence must decrease by more than this multiple of their round-off.
DECREASE_FACTOR = 10.0
#: Relative size of ||G 1|| (the bias direction of the gradient) below which beta = 0 at the minimiser is
#: decided (exactly 0 by the latent symmetry; float64 gives ~1e-16).
BIAS_RTOL = 1e-9


# ---------------------------------------------------------------------------------------------
# Trainable LayerNorm
# ---------------------------------------------------------------------------------------------

def _symbolic_rescaling() -> list[Check]:
    """sympy: scores sum_i u_i (g_i e_i + beta_i) are unchanged by (u, g, beta) -> (u/c, c g, c beta); the
    penalty on U is divided by c^2; min_g (lambda/2) v^2/g^2 + (lambda_LN/2) g^2 = sqrt(lambda lambda_LN) |v|."""
    import sympy as sp

    c, lam, lg, v, g = sp.symbols("c lambda lambda_LN v g", positive=True)
    us = sp.symbols("u1:4")
    gs = sp.symbols("g1:4")
    bs = sp.symbols("beta1:4")
    es = sp.symbols("e1:4")
    h = sum(u * (gg * e + b) for u, gg, e, b in zip(us, gs, es, bs))
    h_c = h.subs({**{u: u / c for u in us}, **{gg: c * gg for gg in gs}, **{b: c * b for b in bs}}, simultaneous=True)
    pen = lam / 2 * sum(u ** 2 for u in us)
    pen_c = pen.subs({u: u / c for u in us}, simultaneous=True)
    prof = lam / 2 * v ** 2 / g ** 2 + lg / 2 * g ** 2
    gstar = (lam / lg) ** sp.Rational(1, 4) * sp.sqrt(v)
    return [symbolic_zero("scores unchanged by (U, g, beta) -> (U/c, c g, c beta)", h_c - h),
            symbolic_zero("penalty on U divided by c^2", pen_c - pen / c ** 2),
            symbolic_zero("profiled penalty: d/dg = 0 at g^2 = sqrt(lambda/lambda_LN) |v|", sp.diff(prof, g).subs(g, gstar)),
            symbolic_zero("profiled penalty value = sqrt(lambda lambda_LN) |v|", prof.subs(g, gstar) - sp.sqrt(lam * lg) * v)]


def _ln_instances(ctx: RunContext) -> list[FCInstance]:
    out = [FCInstance(2, 2, 2, 3, 0.05, layernorm=True)]
    if ctx.full:
        out.append(FCInstance(2, 3, 2, 4, 0.05, layernorm=True, freqs=(0.7, 0.3)))
    return out


def attainment_checks(inst: FCInstance, ln_decay: float, claimed: bool, *, n_starts: int = 1, seed: int = 0,
                      maxiter: int = 300, point=None) -> list[Check]:
    """Statement "the trainable-LN objective has a minimiser" (``claimed`` True) or "has none" (False).

    lambda_LN = 0: every point with U != 0 is beaten by its rescaling (symbolic), every point with U = 0 has
    value log K; a feasible point below log K and the strictly decreasing exact values along its rescaling
    prove that no minimiser exists. lambda_LN > 0: the objective depends on W only through phi(W) (compact),
    and every point below log K has ||U||^2 <= 2 log K/lambda, ||g||^2 + ||beta||^2 <= 2 log K/lambda_LN:
    continuous on a compact sublevel set, so a minimiser exists."""
    lab = f"{_instance_label(inst)}, lambda_LN={ln_decay:g}"
    model = LN.TrainableLN(inst, ln_decay)
    stmt = "has a minimiser" if claimed else "has no minimiser"
    logk = math.log(inst.K)
    if point is None:
        sol = LN.solve_trainable(inst, ln_decay, n_starts=n_starts, seed=seed, maxiter=maxiter)
        point = (sol.variables["W"], sol.variables["U"], sol.variables["g"], sol.variables["beta"])
    val = model.objective(*point, grad=False)
    ev = {"instance": inst.to_dict(), "ln_decay": ln_decay, "proposed_minimiser_value": val, "log_K": logk}
    below = exceeds(logk - val, 1e-12 + 1e-9 * logk)
    if ln_decay == 0:
        seq = LN.rescaling_sequence(model, *point)
        vals = seq["values"]
        err = [model.prob.ce_roundoff(model.scores_matrix(point[0], point[1] / c, point[2] * c, point[3] * c), v)
               for c, v in zip(seq["factors"], vals)]
        dec = all(exceeds(a - b, DECREASE_FACTOR * (ea + eb)) for a, b, ea, eb in zip(vals, vals[1:], err, err[1:]))
        ev.update(witness_factors=seq["factors"], witness_values=vals, witness_ce=seq["cross_entropies"],
                  score_change=seq["score_change"], roundoff=err)
        if not (below and dec):
            return [Check(f"{lab}: the objective {stmt}", Verdict.INCONCLUSIVE,
                          "no feasible point below log K with a strictly decreasing rescaling sequence found "
                          f"(value {fmt(val)}, decreasing: {dec})", ev)]
        why = (f"no minimiser: every point with U != 0 is beaten by (W, U/c, c g, c beta) (same scores, penalty / c^2) "
               f"and every point with U = 0 has value log K = {fmt(logk)} > {fmt(val)}; witness sequence c = "
               f"{seq['factors']}: values {', '.join(fmt(v, 10) for v in vals)} (strictly decreasing, below the "
               f"proposed minimiser's {fmt(val, 10)}, towards CE = {fmt(seq['cross_entropies'][-1], 10)})")
        return [Check(f"{lab}: the objective {stmt}", Verdict.REFUTED if claimed else Verdict.VERIFIED,
                      ("refuted: " if claimed else "") + why, ev)]
    r_u = math.sqrt(2 * logk / inst.lam)
    r_g = math.sqrt(2 * logk / ln_decay)
    ev.update(sublevel_radius_U=r_u, sublevel_radius_affine=r_g)
    why = (f"a minimiser exists: the objective depends on W only through phi(W) (a compact set), and the sublevel set "
           f"below log K is bounded (||U|| <= {fmt(r_u, 4)}, ||(g, beta)|| <= {fmt(r_g, 4)}): a continuous function on "
           f"a nonempty compact set (feasible value {fmt(val)}) attains its minimum")
    return [Check(f"{lab}: the objective {stmt}", Verdict.VERIFIED if claimed else Verdict.REFUTED,
                  ("refuted: " if not claimed else "") + why, ev)]


def make_trainable_ln_attained_claim(ln_decay: float = 0.0, claimed: bool = True,
                                     instances: Callable[[RunContext], Iterable[FCInstance]] = _ln_instances,
                                     claim_id: str = "feature_collapse.trainable-ln.attained",
                                     corrected: bool = False) -> Claim:
    def check(ctx):
        yield from _symbolic_rescaling()[:2]
        for inst in instances(ctx):
            yield from attainment_checks(inst, ln_decay, claimed, seed=ctx.seed, maxiter=300 if ctx.full else 40)
            if corrected:
                yield from attainment_checks(inst, 0.1, True, seed=ctx.seed, maxiter=40)

    if corrected:
        stmt = ("Trainable LayerNorm (gain g and bias beta per coordinate): with undecayed affine parameters "
                "(lambda_LN = 0) the objective has NO minimiser: (U, g, beta) -> (U/c, c g, c beta) keeps every score "
                "and lowers the weight decay of U; with lambda_LN > 0 a minimiser exists (coercive).")
        prov, src = Provenance.DERIVED, SRC_DERIVED
    else:
        stmt = (f"Trainable LayerNorm with affine parameters decayed by lambda_LN = {ln_decay:g}: the objective "
                f"{'has a minimiser' if claimed else 'has no minimiser'} (the thread's heuristic presumes one: "
                "'we would not expect the bias and diagonal scaling to fundamentally change the loss landscape').")
        prov, src = Provenance.QUOTED, SRC_THREAD
    return Claim(claim_id, FAMILY, stmt, src, prov, check, key=("witness_values", "proposed_minimiser_value"),
                 tags=("numeric", "symbolic"))


def _aligned_type2(inst: FCInstance, ln_decay: float):
    return LN.aligned_candidate(inst, ln_decay)


def type2_checks(inst: FCInstance, ln_decay: float, *, candidate=_aligned_type2, n_starts: int = 0,
                 seed: int = 0) -> list[Check]:
    """The trainable-LN minimiser (lambda_LN > 0) is type II: statements ``optimal-value`` and
    ``minimiser-type-ii`` (as in ``solve feature-collapse --trainable-ln``)."""
    lab = f"{_instance_label(inst)}, lambda_LN={ln_decay:g}"
    model = LN.TrainableLN(inst, ln_decay)
    out: list[Check] = []
    cand = candidate(inst, ln_decay)
    sol = LN.solve_trainable(inst, ln_decay, n_starts=n_starts, seed=seed) if n_starts else None
    sol_val = sol.value if sol is not None and is_finite(sol.value) else None
    lbs, feas = [], []
    if cand is not None:
        W, U, g, beta = cand[:4]
        cval = model.objective(W, U, g, beta, grad=False)
        Zc = model.scores_matrix(W, U, g, beta)
        lbc = LN.atomic_lower_bound(model, Zc)
        lbs.append(lbc["lower_bound"])
        feas.append(cval)
    else:
        cval, lbc = None, None
    if sol is not None and sol.variables:
        lbs.append(LN.atomic_lower_bound(model, sol.variables["Z"])["lower_bound"])
    if sol_val is not None:
        feas.append(sol_val)
    # a candidate other than the package's own aligned type-II point is also compared with that feasible point
    # (so a false candidate is refuted by a point below it even without an L-BFGS search)
    rval = None
    if candidate is not _aligned_type2:
        ref = _aligned_type2(inst, ln_decay)
        if ref is not None:
            rval = model.objective(*ref[:4], grad=False)
            feas.append(rval)
    other = min((v for v in (sol_val, rval) if v is not None), default=None)
    lb = max(lbs) if lbs else None
    up = min(feas) if feas else None
    tol = value_tol(up if up is not None else 1.0)
    ev = {"instance": inst.to_dict(), "ln_decay": ln_decay, "candidate_value": cval, "lbfgs_value": sol_val,
          "aligned_type2_value": rval, "lower_bound": lb, "gap": (up - lb) if is_finite(up, lb) else None}
    pred = cval if cval is not None else up
    out.append(optimum_matches(f"{lab}: optimal-value", pred, attained=up, lower_bound=lb, tol=tol,
                               certificate="atomic-dual bound (trainable LN, derived)", evidence=ev))
    name = f"{lab}: minimiser-type-ii"
    if cand is None:
        out.append(Check(name, Verdict.INCONCLUSIVE, "no certificate about every minimiser: the aligned type-II "
                         "candidate exists only for n_c = 2 with the latent symmetry; proven bracket "
                         f"[{fmt(lb)}, {fmt(up)}], gap {fmt(ev['gap'], 3)}", ev))
        return out
    if other is not None and exceeds(cval - other, tol):
        out.append(Check(name, Verdict.REFUTED, f"the claimed configuration is not a minimiser: a feasible point attains "
                         f"{fmt(other)} < {fmt(cval)} (by {fmt(cval - other, 3)} > {fmt(tol, 3)})", ev))
        return out
    gap = cval - lb
    # geometry of the claimed point (exact by construction; measured)
    E = model.prob.features(cand[0])[0]
    alpha = np.repeat(np.arange(inst.n_c), inst.s_c)
    spread = max(float(np.abs(E[alpha == a] - E[alpha == a][0]).max()) for a in range(inst.n_c))
    anti = float(np.abs(E[alpha == 0][0] + E[alpha == 1][0]).max())
    sig_star = np.where(alpha == 0, 1.0, -1.0)
    face = LN.face_certificate(model, lbc["gauge"], sig_star, FACE_RTOL)
    G = lbc["G"]
    bias_dir = float(np.linalg.norm(G.sum(axis=1)) / max(np.linalg.norm(G), 1e-300))
    ev.update(face=face, within_concept_spread=spread, antipodal_residual=anti, bias_direction=bias_dir,
              reduced_c=cand[4], gains=cand[2].tolist())
    if not within(gap, tol):
        out.append(Check(name, Verdict.INCONCLUSIVE, f"no certificate about every minimiser: gap {fmt(gap, 3)} > "
                         f"{fmt(tol, 3)}", ev))
        return out
    if not (face["unique_face"] and within(bias_dir, BIAS_RTOL) and cand[4] > 0):
        out.append(Check(name, Verdict.INCONCLUSIVE, "no geometry certificate: the dual gauge's face is not the single "
                         f"concept sign vector (second / mu = {fmt(face['second_relative'], 4)}) or the bias direction "
                         f"{fmt(bias_dir, 3)} is not 0 or c* = 0", ev))
        return out
    if not (within(spread, GEOM_RTOL) and within(anti, GEOM_RTOL)):
        out.append(Check(name, Verdict.REFUTED, f"the certified minimiser is not type II (spread {fmt(spread, 3)}, "
                         f"antipodal residual {fmt(anti, 3)})", ev))
        return out
    out.append(Check(name, Verdict.VERIFIED,
                     "every minimiser is type II: phi(w_v) = sqrt(d) sigma_alpha(v) f_i, f_i = (d e_i - 1)/sqrt(d(d-1)) "
                     "for one coordinate i (words of a concept collapse, the two concepts antipodal = the simplex ETF), "
                     "beta = 0, |g_i| = sqrt(lambda/lambda_LN) ||U_i|| on the used coordinates (one coordinate when d >= 3; "
                     "with d = 2 both coordinates carry the same feature up to sign): the atomic-dual "
                     f"bound closes the gap ({fmt(gap, 3)}), the dual gauge's face is the concept sign vector alone (next "
                     f"sign vector at {fmt(face['second_relative'], 4)} mu), and an LN output with one entry of modulus "
                     "sqrt(d-1) is determined by it", ev))
    return out


def make_trainable_ln_type2_claim(ln_decays=(0.05, 0.5), candidate=_aligned_type2,
                                  instances: Callable[[RunContext], Iterable[FCInstance]] = _ln_instances,
                                  n_starts: int | None = None,
                                  claim_id: str = "feature_collapse.trainable-ln.type2") -> Claim:
    def check(ctx):
        for inst in instances(ctx):
            for lg in ln_decays:
                ns = n_starts if n_starts is not None else (2 if ctx.full else 0)
                yield from type2_checks(inst, lg, candidate=candidate, n_starts=ns, seed=ctx.seed)

    return Claim(claim_id, FAMILY,
                 "Trainable LayerNorm with gain and bias decayed by lambda_LN > 0 (and U by lambda): the minimiser is "
                 "type II on the instances checked (n_c = 2, latent symmetry): phi(w_(alpha,beta)) = sqrt(d) f_alpha with "
                 "antipodal f (the simplex ETF for two concepts), aligned with one coordinate axis; beta = 0. "
                 "Certified: atomic-dual bound + face of the dual gauge + the geometry of extreme LN outputs.",
                 SRC_DERIVED, Provenance.DERIVED, check, key=("gap", "face"), tags=("numeric",))


def rotated_type2_features(inst: FCInstance, angle: float = math.pi / 7) -> np.ndarray:
    """Fixed-LN type-II features phi(w) = sqrt(d) f_alpha with the concept ETF of theory.concept_vectors rotated by
    ``angle`` in the plane of the first two vectors of an orthonormal basis of 1^perp (a valid orientation of the
    fixed-LN minimiser, which is rotation invariant in 1^perp)."""
    d = inst.d
    F = T.concept_vectors(inst.n_c, d, orthogonal_to_ones=True)
    Q, _ = np.linalg.qr(np.column_stack([np.ones(d), np.eye(d)[:, : d - 1]]))
    b1, b2 = Q[:, 1], Q[:, 2] if d >= 3 else Q[:, 1]
    Rm = np.eye(d)
    if d >= 3:
        c, s = math.cos(angle), math.sin(angle)
        Rm = (np.eye(d) + (c - 1) * (np.outer(b1, b1) + np.outer(b2, b2)) + s * (np.outer(b2, b1) - np.outer(b1, b2)))
    return math.sqrt(d) * (F @ Rm.T)[np.repeat(np.arange(inst.n_c), inst.s_c)]


def aligned_type2_features(inst: FCInstance) -> np.ndarray:
    return LN.aligned_features(inst, 0)


def _fixed_features_best(model: LN.TrainableLN, E: np.ndarray, seed: int = 0, maxiter: int = 3000):
    """Best (U, g, beta) at fixed features E (L-BFGS) and the proven lower bound over all (U, g, beta) at E:
    CE(Z0) - <G, Z0> - (log K/mu) max(0, D_E - mu), D_E = max_i sqrt(lambda_max(Gram(G 1, G E_i)))."""
    from scipy.optimize import minimize

    inst = model.inst
    KL, d = inst.K * inst.L, inst.d
    rng = np.random.default_rng(seed)

    def fun(x):
        U, g, b = x[:KL * d].reshape(KL, d), x[KL * d:KL * d + d], x[KL * d + d:]
        v, _, dU, dg, db = model.objective(E, U, g, b)
        return v, np.concatenate([dU.ravel(), dg, db])

    x0 = np.concatenate([rng.normal(scale=1 / math.sqrt(d), size=KL * d), np.ones(d), np.zeros(d)])
    res = minimize(fun, x0, jac=True, method="L-BFGS-B", options={"maxiter": maxiter, "ftol": 1e-15, "gtol": 1e-11})
    U, g, b = res.x[:KL * d].reshape(KL, d), res.x[KL * d:KL * d + d], res.x[KL * d + d:]
    val = model.objective(E, U, g, b, grad=False)
    Z0 = model.scores_matrix(E, U, g, b)
    ce, G = model.prob.ce(Z0)
    p = G.sum(axis=1)
    Q = G @ E
    pp, pq, qq = float(p @ p), p @ Q, np.einsum("ij,ij->j", Q, Q)
    tr, det = pp + qq, pp * qq - pq * pq
    DE = float(np.sqrt(np.maximum(tr / 2 + np.sqrt(np.maximum(tr * tr / 4 - det, 0.0)), 0.0)).max())
    mu = model.mu
    R = math.log(inst.K) / mu
    err = (model.prob.ce_roundoff(Z0, ce) + S.ROUNDOFF_C * G.size * S.EPS * float(np.sum(np.abs(G * Z0)))
           + R * S.ROUNDOFF_C * (inst.n_w + 4) * S.EPS * float(np.linalg.norm(G)) * math.sqrt(inst.d) * math.sqrt(d))
    lb = ce - float(np.sum(G * Z0)) - R * max(0.0, DE - mu) - err
    return {"value": val, "lower_bound": lb, "dual_gauge": DE, "mu": mu}


def landscape_checks(inst: FCInstance, ln_decay: float, features: dict, seed: int = 0) -> list[Check]:
    """Each named feature configuration E (LN outputs) is claimed to be the features of a trainable-LN minimiser.
    REFUTED when the proven lower bound over all (U, g, beta) at E exceeds a feasible value (the certified optimum)
    by more than the tolerance; VERIFIED when the best value at E matches the proven global lower bound."""
    lab = f"{_instance_label(inst)}, lambda_LN={ln_decay:g}"
    model = LN.TrainableLN(inst, ln_decay)
    cand = LN.aligned_candidate(inst, ln_decay)
    out = []
    if cand is None:
        return [Check(f"{lab}: landscape", Verdict.INCONCLUSIVE, "no certified optimum (needs n_c = 2 and the latent "
                      "symmetry)", {"instance": inst.to_dict()})]
    W, U, g, b = cand[:4]
    opt_up = model.objective(W, U, g, b, grad=False)
    opt_lb = LN.atomic_lower_bound(model, model.scores_matrix(W, U, g, b))["lower_bound"]
    tol = value_tol(opt_up)
    for fname, E in features.items():
        r = _fixed_features_best(model, E, seed=seed)
        ev = {"instance": inst.to_dict(), "ln_decay": ln_decay, "features": fname, "best_at_features": r["value"],
              "lower_bound_at_features": r["lower_bound"], "optimum_upper": opt_up, "optimum_lower": opt_lb,
              "tolerance": tol}
        name = f"{lab}: features '{fname}' are a minimiser's"
        if exceeds(r["lower_bound"] - opt_up, tol):
            ev["witness_gap"] = r["lower_bound"] - opt_up
            out.append(Check(name, Verdict.REFUTED, f"every (U, g, beta) at these features has value >= "
                             f"{fmt(r['lower_bound'])} (proven) > {fmt(opt_up)} (a feasible point, the coordinate-aligned "
                             "type-II point): not a minimiser", ev))
        elif within(r["value"] - opt_lb, tol):
            out.append(Check(name, Verdict.VERIFIED, f"a point with these features attains {fmt(r['value'])}, within "
                             f"{fmt(tol, 3)} of the proven optimum bound {fmt(opt_lb)}", ev))
        else:
            out.append(Check(name, Verdict.INCONCLUSIVE, f"best value at these features {fmt(r['value'])}, bound "
                             f"{fmt(r['lower_bound'])}, optimum in [{fmt(opt_lb)}, {fmt(opt_up)}]: not decided", ev))
    return out


def _thread_features(inst):
    return {"fixed-LN type II (rotated by pi/7 in 1^perp)": rotated_type2_features(inst),
            "fixed-LN type II (coordinate-aligned)": aligned_type2_features(inst)}


def _corrected_features(inst):
    return {"coordinate-aligned type II": aligned_type2_features(inst)}


def make_trainable_ln_landscape_claim(features: Callable[[FCInstance], dict] = _thread_features,
                                      ln_decay: float = 0.05,
                                      instances: Callable[[RunContext], Iterable[FCInstance]] = _ln_instances,
                                      claim_id: str = "feature_collapse.trainable-ln.landscape",
                                      corrected: bool = False) -> Claim:
    def check(ctx):
        yield from _symbolic_rescaling()[2:]
        for inst in instances(ctx):
            yield from landscape_checks(inst, ln_decay, features(inst), seed=ctx.seed)

    if corrected:
        stmt = ("With lambda_LN > 0 and beta = 0 (optimal on the symmetric instances checked: the bias direction of the "
                "gradient vanishes), profiling out g turns the trainable-LN problem into "
                "CE(V phi(W)^T) + sqrt(lambda lambda_LN) sum_i ||V_(:,i)||_2 (V = U diag(g), a group lasso over coordinates; "
                "|g_i| = sqrt(lambda/lambda_LN) ||U_(:,i)|| at a minimiser): not rotation invariant; for n_c = 2 its "
                "minimisers are the type-II configurations aligned with a coordinate axis.")
        prov, src = Provenance.DERIVED, SRC_DERIVED
    else:
        stmt = ("'We would not expect the bias and diagonal scaling to fundamentally change the loss landscape', stated "
                "precisely: with lambda_LN > 0, after the balanced reparametrisation V = U diag(g), the minimisers of the "
                "trainable-LN problem are exactly the type-II configurations of the fixed-LN problem (the concept "
                "simplex ETF in any orientation orthogonal to 1).")
        prov, src = Provenance.QUOTED, SRC_THREAD
    return Claim(claim_id, FAMILY, stmt, src, prov, check, key=("witness_gap", "best_at_features"),
                 tags=("numeric", "symbolic"))


# ---------------------------------------------------------------------------------------------
# No weight decay
# ---------------------------------------------------------------------------------------------

def _no_decay_instances(ctx: RunContext) -> list[FCInstance]:
    out = [FCInstance(3, 2, 2, 4, 0.05),  # distinct latents (all 9)
           FCInstance(2, 1, 2, 3, 0.05, K=4, latents="random", seed=6),  # two groups of two classes
           FCInstance(2, 1, 2, 3, 0.05, K=2, latents="random", seed=0)]  # both classes share one latent
    if ctx.full:
        out += [FCInstance(3, 2, 2, 3, 0.05, layernorm=True), FCInstance(2, 2, 2, 3, 0.05, K=3, latents="random", seed=5)]
    return out


def thread_has_minimum(inst: FCInstance) -> bool:
    """The decided answer: a global minimum at lambda = 0 exists iff every class has the same latent variable."""
    return len(B.latent_groups(inst)) == 1


def _symbolic_no_decay() -> list[Check]:
    import sympy as sp

    t, n, N0, rho = sp.symbols("t n_c N_0 rho", positive=True)
    out = []
    for L in (1, 2, 3):
        f = sp.log(1 + N0 + rho * ((1 + (n - 1) * sp.exp(-t)) ** L - 1))
        out.append(symbolic_zero(f"CE along the type-I ray tends to log(1 + N0) (L={L})", sp.limit(f, t, sp.oo) - sp.log(1 + N0)))
    p, s = sp.symbols("p s", positive=True)
    gib = -(sp.log(p) + sp.log(s - p)) / 2
    out.append(symbolic_zero("Gibbs: -(log p1 + log p2)/2 with p1 + p2 = s is stationary at p1 = s/2", sp.diff(gib, p).subs(p, s / 2)))
    out.append(symbolic_zero("Gibbs: its value there is log(2/s) (> log 2 for s < 1)", gib.subs(p, s / 2) - sp.log(2 / s)))
    return out


def no_minimum_checks(inst: FCInstance, has_minimum: Callable[[FCInstance], bool]) -> list[Check]:
    lab = _instance_label(inst) + " (lambda = 0)"
    groups = B.latent_groups(inst)
    H = B.infimum_ce(inst)
    claimed = bool(has_minimum(inst))
    rv = B.ray_values(inst)
    vals, errs = rv["values"], rv["roundoff"]
    ev = {"instance": inst.to_dict(), "latent_groups": groups, "infimum": H, "ray_t": rv["t"], "ray_values": vals,
          "claimed_has_minimum": claimed}
    name = f"{lab}: {'a global minimum exists' if claimed else 'no global minimum'}"
    if len(groups) == 1:
        # CE >= log K (Gibbs with one group of K classes) and Z = 0 attains it
        v0 = S.FCProblem(inst).ce(np.zeros((inst.K * inst.L, inst.n_w)), grad=False)
        ok = within(abs(v0 - math.log(inst.K)), 1e-12)
        ev["value_at_zero"] = v0
        why = (f"all {inst.K} classes share one latent variable: CE >= log K = {fmt(math.log(inst.K))} for every point "
               f"(Gibbs), attained at Z = 0 (value {fmt(v0)}): a minimiser exists")
        if not ok:
            return [Check(name, Verdict.INCONCLUSIVE, f"CE(0) = {fmt(v0)} differs from log K", ev)]
        return [Check(name, Verdict.VERIFIED if claimed else Verdict.REFUTED, ("refuted: " if not claimed else "") + why, ev)]
    dec = all(exceeds(a - b, DECREASE_FACTOR * (ea + eb)) for a, b, ea, eb in zip(vals, vals[1:], errs, errs[1:]))
    above = all(exceeds(v - H, e) for v, e in zip(vals, errs))
    last_gap = vals[-1] - H
    ev.update(last_gap=last_gap)
    if not (dec and above):
        return [Check(name, Verdict.INCONCLUSIVE, f"the ray's values are not strictly decreasing above the infimum "
                      f"{fmt(H)} (decreasing {dec}, above {above})", ev)]
    why = (f"{len(groups)} distinct latent variables (multiplicities {groups}): CE > H = {fmt(H, 10)} at every point "
           f"(each loss is > its Gibbs bound since all softmax probabilities are > 0) and CE -> H along the ray t Z1 "
           f"(sympy limit; exact values {', '.join(fmt(v, 8) for v in vals)} at t = {rv['t']}, strictly decreasing): "
           f"for any proposed minimiser Z, the ray goes below CE(Z)")
    return [Check(name, Verdict.REFUTED if claimed else Verdict.VERIFIED, ("refuted: " if claimed else "") + why, ev)]


def make_no_decay_no_minimum_claim(has_minimum: Callable[[FCInstance], bool] = thread_has_minimum,
                                   instances: Callable[[RunContext], Iterable[FCInstance]] = _no_decay_instances,
                                   claim_id: str = "feature_collapse.no-decay.no-minimum") -> Claim:
    def check(ctx):
        yield from _symbolic_no_decay()
        for inst in instances(ctx):
            yield from no_minimum_checks(inst, has_minimum)

    return Claim(claim_id, FAMILY,
                 "'Without weight decay, the objective (2) does not have a global minimum', decided per latent "
                 "configuration: there is no global minimum whenever at least two distinct latent variables occur "
                 "(infimum sum_g (m_g/K) log m_g, 0 for distinct latents, approached along a ray and never attained); "
                 "a minimiser (Z = 0) exists only when every class has the same latent variable.",
                 SRC_THREAD, Provenance.QUOTED, check, key=("infimum", "last_gap"), tags=("numeric", "symbolic"))


def _limit_lambdas(inst: FCInstance) -> list[float]:
    lc = T.lambda_crit(inst)
    out, lam = [], 0.5 * lc
    while lam >= T.LAMBDA_MIN * (1 - 1e-12):
        out.append(lam)
        lam /= 10
    return out


def make_no_decay_limit_claim(predict=T.type1_prediction, base: FCInstance | None = None,
                              claim_id: str = "feature_collapse.no-decay.limit") -> Claim:
    """Along lambda -> 0 the certified minimiser stays type I (uniqueness certificate at every lambda of the grid,
    down to LAMBDA_MIN), and its direction Z/||Z||_* is a max-margin direction (primal = dual of the max-margin
    problem at the smallest lambda). ``predict`` gives the claimed configuration (a false one is refuted)."""

    def check(ctx):
        inst0 = base or FCInstance(3, 2, 2, 4, 0.05)
        lams = _limit_lambdas(inst0)
        certified = []
        Zs = []
        for lam in lams:
            inst = FCInstance(inst0.n_c, inst0.L, inst0.s_c, inst0.d, lam, K=inst0.K, latents=inst0.latents,
                              seed=inst0.seed)
            pred = predict(inst)
            cfg, why = claimed_configuration(inst, pred)
            name = f"lambda = {lam:.3g}: the certified minimiser is type I"
            if cfg is None:
                yield Check(name, Verdict.INCONCLUSIVE, f"no claimed configuration: {why}", {})
                continue
            prob = S.FCProblem(inst)
            W, U, E = cfg
            val = prob.objective(W, U, grad=False)
            lb = S.certificate_at(prob, E, U, val).lower_bound
            dc = S.dual_certificate(prob, E, U)
            tol = value_tol(val)
            ev = {"lambda": lam, "value": val, "lower_bound": lb, "gap": val - lb, "unique": dc.get("unique"),
                  "geometry": pred.geometry, "why": dc.get("why")}
            # a feasible point below the claimed configuration refutes it (the type-I closed form is one such point)
            ref = T.type1_prediction(inst)
            rcfg, _ = claimed_configuration(inst, ref)
            rval = prob.objective(rcfg[0], rcfg[1], grad=False) if rcfg is not None else None
            if is_finite(rval) and exceeds(val - rval, tol):
                ev["witness_value"] = rval
                yield Check(name, Verdict.REFUTED, f"the claimed configuration is not a minimiser: a feasible point "
                            f"attains {fmt(rval)} < {fmt(val)}", ev)
                continue
            if exceeds(lb - val, tol) or not (within(val - lb, tol) and dc.get("unique")):
                yield Check(name, Verdict.INCONCLUSIVE, f"not certified at this lambda (gap {fmt(val - lb, 3)}, "
                            f"unique {dc.get('unique')}: {dc.get('why')})", ev)
                continue
            if pred.geometry != "type-I":
                yield Check(name, Verdict.REFUTED, f"the certified minimiser is {pred.geometry}, not type I", ev)
                continue
            meas = S.measure(inst, W, U)
            off = meas["concept_cosine_offdiag"]
            ok = within(meas["within_concept_deviation"], GEOM_RTOL) and within(
                max(abs(off["min"] - off["etf"]), abs(off["max"] - off["etf"])), GEOM_RTOL)
            yield condition(name, ok, verified=f"certified unique minimiser (gap {fmt(val - lb, 3)}) with type-I geometry",
                            refuted="the certified minimiser is not type I", evidence=ev)
            certified.append(lam)
            Zs.append(U @ E.T)
        if Zs:
            dirs = [Z / np.linalg.svd(Z, compute_uv=False).sum() for Z in Zs]
            drift = max(float(np.abs(D - dirs[-1]).max()) for D in dirs)
            yield close("direction Z/||Z||_* is the same at every certified lambda", 0.0, drift, rtol=0, atol=1e-9,
                        what="largest entry change of the normalised minimiser", independent=False,
                        evidence={"certified_lambdas": certified})
            inst = FCInstance(inst0.n_c, inst0.L, inst0.s_c, inst0.d, certified[-1], K=inst0.K, latents=inst0.latents,
                              seed=inst0.seed)
            mm = B.max_margin_bracket(inst, Zs[-1])
            ev = dict(mm, certified_range=[min(certified), max(certified)], n_certified=len(certified),
                      grid=len(lams))
            ok = is_finite(mm["primal"], mm["dual"]) and within(mm["primal"] - mm["dual"], 1e-9 * mm["primal"])
            yield condition(f"the limit direction is a max-margin solution (certified range lambda in "
                            f"[{min(certified):.3g}, {max(certified):.3g}])", ok,
                            verified=f"max-margin primal {fmt(mm['primal'], 12)} = dual {fmt(mm['dual'], 12)} "
                                     f"({mm['n_active']} active margins): the type-I direction solves min ||Z||_* s.t. "
                                     "margins >= 1", refuted=f"primal {fmt(mm['primal'])} vs dual {fmt(mm['dual'])}: "
                                     "the dual point does not close", evidence=ev, inconclusive=True)
            if len(certified) < len(lams):
                yield Check("certified range reaches the smallest lambda", Verdict.INCONCLUSIVE,
                            f"certified at {len(certified)} of {len(lams)} grid points", {"certified": certified})

    return Claim(claim_id, FAMILY,
                 "'Without weight decay the results are qualitatively very similar', stated as the limit lambda -> 0: the "
                 "certified minimiser stays type I (unique, equiangular concepts, collapsed words) at every lambda of the "
                 "grid lambda_crit/2 * 10^-j down to 1e-10 (the smallest lambda the family accepts), with the same "
                 "direction, and that direction solves the max-margin problem min ||Z||_* s.t. all margins >= 1.",
                 SRC_THREAD, Provenance.RECONSTRUCTED, check, key=("certified_range", "primal", "dual"),
                 tags=("numeric",))


# ---------------------------------------------------------------------------------------------
# Random latents
# ---------------------------------------------------------------------------------------------

def _random_instances(ctx: RunContext) -> list[FCInstance]:
    out = [FCInstance(3, 3, 2, 6, 0.02, K=8, latents="random", seed=1)]
    if ctx.full:
        out.append(FCInstance(3, 2, 2, 6, 0.05, K=5, latents="random", seed=3))
    return out


def concept_groups(inst: FCInstance) -> list[list[int]]:
    return [list(range(a * inst.s_c, (a + 1) * inst.s_c)) for a in range(inst.n_c)]


def _equivariance_check(inst: FCInstance, v: int, w: int, seed: int = 0) -> Check:
    """grad CE(Z P) = grad CE(Z) P for the swap P of words v, w at a random Z: the swap is a symmetry of the data."""
    prob = S.FCProblem(inst)
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(inst.K * inst.L, inst.n_w))
    perm = np.arange(inst.n_w)
    perm[[v, w]] = perm[[w, v]]
    _, G = prob.ce(Z)
    _, Gp = prob.ce(Z[:, perm])
    err = float(np.abs(Gp - G[:, perm]).max())
    return close(f"{_instance_label(inst)}: grad CE(Z P) = grad CE(Z) P (swap words {v}, {w})", 0.0, err, rtol=0,
                 atol=1e-12, what="equivariance of the exact CE under the word swap")


def word_collapse_checks(inst: FCInstance, groups: list[list[int]], seed: int = 0, n_starts: int = 1) -> list[Check]:
    """The claimed word groups get the same embedding at every minimiser (no LayerNorm, d >= min(n_w, K L)).

    Proof for words of one concept with equal frequencies (the default groups): the swap P is a symmetry, so
    every minimiser's CE gradient G (shared by all minimisers of the convex form) satisfies G = G P; the nuclear
    norm's subgradient condition puts every minimiser's row space in row(G), orthogonal to e_v - e_w: Z e_v = Z e_w,
    and W W^T = (Z^T Z)^{1/2} (balanced) gives w_v = w_w. Numeric part (can fail): the tied problem's best value
    against the proven lower bound of the untied problem, and (for a false grouping) the proven lower bound of the
    tied problem against a feasible untied point (REFUTED: no minimiser ties these words)."""
    lab = _instance_label(inst)
    prob = S.FCProblem(inst)
    out = []
    if inst.layernorm or inst.d < min(inst.n_w, inst.K * inst.L):
        return [Check(f"{lab}: words collapse", Verdict.NOT_APPLICABLE, "hypothesis fails: no LayerNorm and "
                      f"d >= min(n_w, K L) = {min(inst.n_w, inst.K * inst.L)} (network = convex form)", {})]
    alpha = np.repeat(np.arange(inst.n_c), inst.s_c)
    same_concept = all(len(set(alpha[g])) == 1 for g in groups)
    equal_freq = all(len({inst.freqs[v % inst.s_c] for v in g}) == 1 for g in groups)
    # the swap symmetry is the hypothesis of the uniqueness argument (words of one concept, equal frequencies);
    # for other groups it is not expected, and its failure is no witness against the statement
    for g in groups if (same_concept and equal_freq) else ():
        if len(g) > 1:
            out.append(_equivariance_check(inst, g[0], g[1], seed))
    Tc = B.tie_matrix(inst, concept_groups(inst))
    ref = B.solve_tied(inst, Tc, n_starts=n_starts, seed=seed)  # the collapsed candidate
    ref_lb = S.nuclear_lower_bound(prob, ref["Z"])["lower_bound"]
    Tg = B.tie_matrix(inst, groups)
    tied = ref if np.array_equal(Tg, Tc) else B.solve_tied(inst, Tg, n_starts=n_starts, seed=seed)
    tied_lb = B.tied_lower_bound(prob, tied["Z"], Tg)["lower_bound"]
    up = min(ref["value"], tied["value"])
    tol = value_tol(up)
    ev = {"instance": inst.to_dict(), "groups": groups, "tied_value": tied["value"], "tied_lower_bound": tied_lb,
          "untied_lower_bound": ref_lb, "collapsed_value": ref["value"], "tolerance": tol,
          "same_concept_equal_freq": bool(same_concept and equal_freq)}
    name = f"{lab}: words {groups} share one embedding at every minimiser"
    if exceeds(tied_lb - up, tol):
        ev["witness_gap"] = tied_lb - up
        out.append(Check(name, Verdict.REFUTED, f"every point tying these words has value >= {fmt(tied_lb)} (proven) > "
                         f"{fmt(up)} (a feasible point): no minimiser ties them", ev))
    elif not within(tied["value"] - ref_lb, tol):
        out.append(Check(name, Verdict.INCONCLUSIVE, f"the tied optimum {fmt(tied['value'])} is not certified optimal "
                         f"(untied bound {fmt(ref_lb)})", ev))
    elif same_concept and equal_freq:
        out.append(Check(name, Verdict.VERIFIED, "every minimiser ties them (the word swap is a symmetry: G = G P at every "
                         "minimiser, row space in row(G)); the collapsed point attains the proven optimum "
                         f"({fmt(tied['value'])} vs bound {fmt(ref_lb)})", ev))
    else:
        out.append(Check(name, Verdict.INCONCLUSIVE, "a point tying them attains the optimum, but no argument shows that "
                         "every minimiser does (the words are not exchangeable)", ev))
    return out


def make_random_word_collapse_claim(groups: Callable[[FCInstance], list[list[int]]] = concept_groups,
                                    instances: Callable[[RunContext], Iterable[FCInstance]] = _random_instances,
                                    claim_id: str = "feature_collapse.random-latents.word-collapse") -> Claim:
    def check(ctx):
        for inst in instances(ctx):
            yield from word_collapse_checks(inst, groups(inst), seed=ctx.seed)

    return Claim(claim_id, FAMILY,
                 "Random latent variables (the latent symmetry fails), no LayerNorm, uniform frequencies, "
                 "d >= min(n_w, K L): the words of one concept get the same embedding at every minimiser (a theorem "
                 "from the word-swap symmetry and the shared CE gradient of the convex form; checked per instance "
                 "with a certified collapsed optimum).",
                 SRC_DERIVED, Provenance.DERIVED, check, key=("tied_value", "untied_lower_bound"), tags=("numeric",))


def thread_equiangular(inst: FCInstance) -> bool:
    """The decided prediction: concept embeddings are equiangular exactly under the latent symmetry."""
    return inst.symmetric


def geometry_checks(inst: FCInstance, equiangular: bool, seed: int = 0, n_starts: int = 1) -> list[Check]:
    """"The concept embeddings are a scaled equiangular set (equal norms, equal inner products) at every minimiser"
    (``equiangular`` True) or "at no minimiser" (False). Witness against equiangularity: the proven lower bound
    over every point with W W^T in span{P1, P2} above a feasible value. Proof of it (symmetric instances): the
    uniqueness certificate of the type-I point."""
    lab = _instance_label(inst)
    prob = S.FCProblem(inst)
    ref = B.solve_tied(inst, B.tie_matrix(inst, concept_groups(inst)), n_starts=n_starts, seed=seed)
    up = ref["value"]
    tol = value_tol(up)
    eq = B.solve_equiangular(inst, n_starts=n_starts, seed=seed)
    lbe = B.subspace_lower_bound(prob, eq["Z"], B.equiangular_basis(inst))
    meas = S.measure(inst, ref["W"], ref["U"])
    ev = {"instance": inst.to_dict(), "best_value": up, "equiangular_best": eq["value"],
          "equiangular_lower_bound": lbe["lower_bound"], "tolerance": tol,
          "concept_cosines_at_best_point": meas.get("concept_cosines"), "claimed_equiangular": equiangular}
    name = f"{lab}: concept embeddings {'are' if equiangular else 'are not'} equiangular at every minimiser"
    if exceeds(lbe["lower_bound"] - up, tol):
        ev["witness_gap"] = lbe["lower_bound"] - up
        why = (f"every point with equiangular equal-norm concept embeddings has value >= {fmt(lbe['lower_bound'])} "
               f"(proven) > {fmt(up)} (a feasible point): no minimiser is equiangular (cosines at the best point "
               f"{_offdiag(meas)})")
        return [Check(name, Verdict.VERIFIED if not equiangular else Verdict.REFUTED, ("refuted: " if equiangular else "")
                      + why, ev)]
    if inst.symmetric and inst.uniform:
        pred = T.type1_prediction(inst)
        cfg, _ = claimed_configuration(inst, pred)
        dc = S.dual_certificate(prob, cfg[2], cfg[1]) if cfg is not None else {"unique": False}
        val = prob.objective(cfg[0], cfg[1], grad=False) if cfg is not None else None
        lb = S.certificate_at(prob, cfg[2], cfg[1], val).lower_bound if cfg is not None else None
        ev.update(uniqueness=dc.get("unique"), type1_gap=(val - lb) if is_finite(val, lb) else None)
        if dc.get("unique") and within(val - lb, value_tol(val)) and pred.geometry == "type-I":
            return [Check(name, Verdict.VERIFIED if equiangular else Verdict.REFUTED,
                          ("refuted: " if not equiangular else "") + "the unique minimiser (certified) is type I: "
                          "equiangular concept embeddings", ev)]
    return [Check(name, Verdict.INCONCLUSIVE, "not decided: the equiangular bound does not exceed the best value and no "
                  "uniqueness certificate", ev)]


def _offdiag(meas):
    off = meas.get("concept_cosine_offdiag") or {}
    return f"in [{fmt(off.get('min'), 4)}, {fmt(off.get('max'), 4)}]"


def make_random_geometry_claim(equiangular: Callable[[FCInstance], bool] = thread_equiangular,
                               instances: Callable[[RunContext], Iterable[FCInstance]] = _random_instances,
                               claim_id: str = "feature_collapse.random-latents.geometry") -> Claim:
    def check(ctx):
        for inst in instances(ctx):
            yield from geometry_checks(inst, equiangular(inst), seed=ctx.seed)

    return Claim(claim_id, FAMILY,
                 "Random latent variables (the latent symmetry fails), no LayerNorm: the concept embeddings of the "
                 "minimisers are NOT a scaled equiangular set (equal norms and equal pairwise inner products, as in type I "
                 "and as 'large enough number of latent variables' would suggest); witnesses: a proven lower bound over "
                 "every equiangular configuration above a feasible value.",
                 SRC_THREAD, Provenance.RECONSTRUCTED, check, key=("witness_gap", "equiangular_lower_bound"),
                 tags=("numeric",))


CLAIMS = [
    make_trainable_ln_attained_claim(),
    make_trainable_ln_attained_claim(ln_decay=0.0, claimed=False, corrected=True,
                                     claim_id="feature_collapse.trainable-ln.attained-corrected"),
    make_trainable_ln_type2_claim(),
    make_trainable_ln_landscape_claim(),
    make_trainable_ln_landscape_claim(features=_corrected_features, corrected=True,
                                      claim_id="feature_collapse.trainable-ln.landscape-corrected"),
    make_no_decay_no_minimum_claim(),
    make_no_decay_limit_claim(),
    make_random_word_collapse_claim(),
    make_random_geometry_claim(),
]


# ---------------------------------------------------------------------------------------------
# `ncproofs solve feature-collapse --layernorm --trainable-ln [--ln-decay LAMBDA_LN]`
# ---------------------------------------------------------------------------------------------

def _infimum_check(model, t: float = 40.0, c: float = 1e9) -> Check:
    """lambda_LN = 0: the infimum of the objective is H = sum_g (m_g/K) log m_g (the infimum of CE): the objective is
    >= CE >= H (Gibbs, docs "No weight decay"), and the point (phi(W) = sqrt(d) f_alpha, U = t f_z / c, g = c 1,
    beta = 0) has value CE(t Z1) + lambda t^2 ||F_z||^2 / (2 c^2), within the tolerance of H."""
    inst = model.inst
    H = B.infimum_ce(inst)
    tol = value_tol(H)
    if inst.d < inst.n_c:
        return Check("infimum", Verdict.INCONCLUSIVE, f"no feasible point near the infimum H = {fmt(H)} built (the "
                     f"type-II ray needs d >= n_c = {inst.n_c})", {"infimum": H})
    F = T.concept_vectors(inst.n_c, inst.d, orthogonal_to_ones=True)
    W = math.sqrt(inst.d) * F[np.repeat(np.arange(inst.n_c), inst.s_c)]
    U = t * F[inst.latent_vars.reshape(-1)] / c
    v = model.objective(W, U, np.full(inst.d, c), np.zeros(inst.d), grad=False)
    return optimum_matches("infimum", H, attained=v, lower_bound=H, tol=tol,
                           certificate="closed form: objective >= CE >= H (Gibbs); feasible point on the rescaled "
                                       "type-II ray", evidence={"infimum": H, "feasible_value": v, "t": t, "c": c,
                                                               "latent_groups": B.latent_groups(inst)})


def _best_point_note(model, point) -> str:
    """The post-affine concept cosines at the best point (information: not a statement about the minimiser)."""
    if point is None:
        return ""
    inst = model.inst
    _, F, _ = model.post_features(point[0], point[2], point[3])
    alpha = np.repeat(np.arange(inst.n_c), inst.s_c)
    M = np.array([F[alpha == a].mean(axis=0) for a in range(inst.n_c)])
    n = np.linalg.norm(M, axis=1)
    if not np.all(n > 0):
        return ""
    C = (M @ M.T) / np.outer(n, n)
    off = C[~np.eye(inst.n_c, dtype=bool)]
    return (f"; at the best point (not certified) the post-affine concept cosines are {fmt(off.min(), 4)} to "
            f"{fmt(off.max(), 4)} (simplex ETF: {fmt(-1 / (inst.n_c - 1), 4)}), {int(np.sum(np.abs(point[2]) > 1e-6))} "
            "coordinates used")


def check_trainable(inst: FCInstance, ln_decay: float = 0.0, *, n_starts: int = 4, seed: int = 0):
    """The solve report of the trainable-LayerNorm network (SolveReport).

    Statements: ``has-minimiser`` (REFUTED with the witness sequence for lambda_LN = 0, VERIFIED by coercivity for
    lambda_LN > 0); with lambda_LN > 0 also ``optimal-value`` (the proven bracket [atomic-dual bound, best feasible
    value]) and ``minimiser-type-ii`` (VERIFIED only with the certificate about every minimiser: n_c = 2 with the
    latent symmetry; INCONCLUSIVE with the gap otherwise; REFUTED when U = 0 is optimal). Budgets: L-BFGS iterations
    (solvers.feature_collapse_ln.LN_MAXITER per start; 300 per start at lambda_LN = 0, where no minimiser exists)."""
    import time

    from proofs_check.core import SolveReport

    t0 = time.perf_counter()
    LN.ln_instance(inst)
    ln_decay = LN.validate_ln_decay(ln_decay)
    S.check_budget(inst, n_starts)
    if ln_decay > 0:
        LN.check_bound_budget(inst)
    model = LN.TrainableLN(inst, ln_decay)
    maxiter = LN.LN_MAXITER if ln_decay > 0 else 300
    sol = LN.solve_trainable(inst, ln_decay, n_starts=n_starts, seed=seed, maxiter=maxiter)
    claims: list[Check] = []
    diagnostics: list[str] = []
    routes = {"lbfgs": sol.to_dict()}
    point = None
    if sol.variables:
        point = (sol.variables["W"], sol.variables["U"], sol.variables["g"], sol.variables["beta"])
    else:
        diagnostics.append("every L-BFGS start reached an embedding proportional to 1 (LayerNorm undefined)")
    inst_d = dict(inst.to_dict(), trainable_ln=True, ln_decay=ln_decay)
    predicted = {"has_minimiser": ln_decay > 0, "reduced_problem": "CE(V phi(W)^T) + sqrt(lambda lambda_LN) sum_i "
                 "||V_(:,i)|| (V = U diag(g))" if ln_decay > 0 else "infimum not attained (rescaling)"}
    cert = None
    geometry: dict = {}
    if point is not None:
        for c in attainment_checks(inst, ln_decay, True, point=point):
            c.name = "has-minimiser"
            claims.append(c)
    if ln_decay == 0:
        claims.append(_infimum_check(model))
        predicted["infimum"] = B.infimum_ce(inst)
    if ln_decay > 0:
        cand = LN.aligned_candidate(inst, ln_decay)
        if cand is not None and cand[4] == 0:
            Z0 = np.zeros((inst.K * inst.L, inst.n_w))
            lb0 = LN.atomic_lower_bound(model, Z0)
            ok = exceeds(model.mu - lb0["dual_gauge"], 1e-9 * model.mu)
            claims.append(Check("minimiser-type-ii", Verdict.REFUTED if ok else Verdict.INCONCLUSIVE,
                                (f"U = 0 is optimal (dual gauge at Z = 0 {fmt(lb0['dual_gauge'])} < mu = {fmt(model.mu)}: "
                                 f"minimum log K = {fmt(math.log(inst.K))}), so every W with U = 0 (features arbitrary, "
                                 "not collapsed) is a minimiser") if ok else "at the threshold mu = dual gauge at 0",
                                {"dual_gauge_at_zero": lb0["dual_gauge"], "mu": model.mu}))
            predicted["geometry"] = "trivial (U = 0)"
        else:
            rep_candidate = (lambda i, lg: cand)
            checks = type2_checks(inst, ln_decay, candidate=rep_candidate, n_starts=0)
            lbs = []
            if cand is not None:
                lbs.append(LN.atomic_lower_bound(model, model.scores_matrix(*cand[:4]))["lower_bound"])
            if sol.variables:
                lbs.append(LN.atomic_lower_bound(model, sol.variables["Z"])["lower_bound"])
            feas = [x for x in ([model.objective(*cand[:4], grad=False)] if cand is not None else []) +
                    ([sol.value] if is_finite(sol.value) else [])]
            lb, up = (max(lbs) if lbs else None), (min(feas) if feas else None)
            cert = {"lower_bound": lb, "upper": up, "gap": (up - lb) if is_finite(lb, up) else None,
                    "method": "atomic-dual bound (sign-vector enumeration), derived in docs/feature_collapse.md"}
            tol = value_tol(up if up is not None else 1.0)
            claims.append(optimum_matches("optimal-value", up if cand is None else model.objective(*cand[:4], grad=False),
                                          attained=up, lower_bound=lb, tol=tol, certificate=cert["method"],
                                          evidence={"instance": inst_d}))
            geo = [c for c in checks if c.name.endswith("minimiser-type-ii")][0]
            geo.name = "minimiser-type-ii"
            if cand is not None and sol.variables and exceeds(model.objective(*cand[:4], grad=False) - sol.value, tol):
                geo = Check("minimiser-type-ii", Verdict.REFUTED, "the aligned type-II point is not a minimiser: the "
                            f"L-BFGS point attains {fmt(sol.value)} below it", geo.evidence)
            if cand is None:
                geo.reason = (f"no certificate about every minimiser (needs n_c = 2 and the latent symmetry): proven "
                              f"bracket [{fmt(lb)}, {fmt(up)}], gap {fmt(cert['gap'], 3)}; missing: a bound that sees the "
                              "coupling of the coordinates of one LayerNorm output (the convex envelope of the reduced "
                              "penalty in Z is the atomic gauge itself, so no convex relaxation in Z alone closes it)"
                              + _best_point_note(model, point))
            claims.append(geo)
            if cand is not None:
                predicted.update(geometry="type-II (coordinate-aligned)", c_star=cand[4], value=model.objective(
                    *cand[:4], grad=False))
    if point is not None:
        E, F, _ = model.post_features(point[0], point[2], point[3])
        alpha = np.repeat(np.arange(inst.n_c), inst.s_c)
        spread = max(float(np.linalg.norm(F[alpha == a] - F[alpha == a].mean(axis=0), axis=1).max())
                     for a in range(inst.n_c)) / max(float(np.linalg.norm(F, axis=1).max()), 1e-300)
        from theory.geometry import classify_gram, cosine_matrix

        means = np.array([F[alpha == a].mean(axis=0) for a in range(inst.n_c)])
        geometry = {"classification": classify_gram(means @ means.T).classification,
                    "what": "post-affine concept-mean features g * phi(w) + beta",
                    "source": "the L-BFGS point (not certified as the minimiser)", "post_affine_within_concept_spread":
                    spread, "post_affine_concept_cosines": cosine_matrix(means.T), "gain": point[2].tolist(),
                    "bias": point[3].tolist()}
    solution = sol.to_dict()
    solution.pop("start_values", None)
    return SolveReport(FAMILY, inst_d, predicted, solution, cert, geometry, claims, routes, diagnostics,
                       seconds=time.perf_counter() - t0)
