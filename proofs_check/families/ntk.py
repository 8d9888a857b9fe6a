"""CLI for the block-structured NTK family: ``ncproofs solve ntk`` and ``ncproofs table ntk``."""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from proofs_check.commands import SolveCommand, TableCommand, float_list, int_list
from proofs_check.core import Check, Verdict, close, condition, fmt, worst
from proofs_check.tables import Table
from solvers import ntk as sv
from theory import ntk as th
from theory._validate import InstanceError, as_float
from theory.geometry import classify_gram, cosine_matrix, nc_metrics

REFERENCE_ROWS = ((3, 4, (1.0, 0.6, 0.2)), (4, 3, (1.0, 0.5, 0.0)))


def _triple(name: str, values) -> tuple[float, float, float]:
    if values is None:
        return None
    if len(values) != 3:
        raise InstanceError(f"{name} must have exactly 3 comma-separated entries ({name}_d,{name}_c,{name}_n), "
                            f"got {len(values)}")
    return tuple(values)


# --------------------------------------------------------------------------------------
# solve
# --------------------------------------------------------------------------------------

def _solve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--classes", "-C", type=int, default=3, help="number of classes C >= 2 (default 3)")
    p.add_argument("--per-class", "-m", type=int, default=4, help="samples per class m >= 2 (default 4)")
    p.add_argument("--kappa", type=float_list, default=[1.0, 0.6, 0.2], metavar="KD,KC,KN",
                   help="feature-kernel constants (default 1,0.6,0.2); the block kernel must be positive definite")
    p.add_argument("--gamma", type=float_list, default=None, metavar="GD,GC,GN",
                   help="output-kernel constants: also integrate dR/dt = -s R K_gamma and fit its three rates")
    p.add_argument("--feature-dim", "-n", type=int, default=None,
                   help="feature dimension n (default C+1; N+C for --init lazy)")
    p.add_argument("--init-scale", type=float, default=1e-6, metavar="EPS",
                   help="initialisation scale (default 1e-6; for --init lazy the scale L of W and H)")
    p.add_argument("--time", type=float, default=None, metavar="T",
                   help="integration time (default 30; 60 for --init e-zero; 12/(s lambda_0^gamma) for --init lazy, "
                        "i.e. 12 e-folds of the slowest residual part: the lazy flow is stiff, its rates grow like L^2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--s", type=float, default=1.0, help="loss scale s (rescales time; default 1)")
    p.add_argument("--init", choices=("random", "e-zero", "lazy"), default="random",
                   help="random: i.i.d. N(0, eps^2) W, H (default); e-zero: exact E = 0; "
                        "lazy: W W^T = L^2 I and block features of size L")
    p.add_argument("--mean-weight", type=float, default=0.0,
                   help="for --init e-zero: weight in [0,1) of the all-ones direction (M^T h_bar != 0)")


def _claim_entry(cid: str, checks: list[Check]) -> dict:
    v = worst(c.verdict for c in checks)
    bad = [c for c in checks if c.verdict == v and v != Verdict.VERIFIED]
    reason = "; ".join(f"{c.name}: {c.reason}" for c in bad[:2]) if bad else f"all {len(checks)} checks hold"
    return {"id": cid, "verdict": v.value, "reason": reason, "checks": [c.to_dict() for c in checks]}


def _rate_entry(pred, fit: dict) -> dict:
    return {"predicted": pred, "fitted": fit.get("rate"), "window": [fit.get("t_start"), fit.get("t_end")],
            "efolds": fit.get("efolds"), "reason": fit.get("reason")}


def run_solve(args: argparse.Namespace) -> dict:
    from proofs_check.claims import ntk as cl

    inst = th.NTKInstance(args.classes, args.per_class, _triple("kappa", args.kappa), args.s)
    gamma = _triple("gamma", args.gamma)
    if gamma is not None:  # validated under its own name so the message says which kernel is not PD
        th.check_positive_definite("gamma", inst.classes, inst.per_class, gamma)
    gi = th.NTKInstance(inst.classes, inst.per_class, gamma, args.s) if gamma is not None else None
    eps = as_float("init_scale", args.init_scale, positive=True)
    if args.time is not None:
        T = as_float("time", args.time, nonnegative=True)
        if T <= 0:
            raise InstanceError(f"time must be > 0, got {T:g}")
    C, m, N = inst.classes, inst.per_class, inst.N
    n = args.feature_dim if args.feature_dim is not None else (N + C if args.init == "lazy" else C + 1)
    lz = None
    if args.init == "random":
        st0 = sv.init_random(inst, n, eps, args.seed)
        T = 30.0 if args.time is None else T
    elif args.init == "e-zero":
        st0 = sv.init_e_zero(inst, n, eps, args.seed, args.mean_weight)
        T = 60.0 if args.time is None else T
    else:
        lz = sv.init_lazy(inst, n, eps, args.seed)
        st0 = lz.state
        if args.time is None:
            T = 12.0 / min(th.residual_rates(th.NTKInstance(C, m, lz.gamma, inst.s)).values())
    t0 = time.perf_counter()
    rep = sv.run_flow(inst, st0, T, n_grid=401)
    traj = rep.trajectory
    st = traj.final
    claims: list[dict] = []

    # spectrum
    K = th.block_kernel(C, m, inst.kappa)
    numeric = np.linalg.eigvalsh(K)
    pred_spec = np.sort(np.repeat(np.array(inst.eigenvalues), th.multiplicities(C, m)))
    claims.append(_claim_entry("ntk-spectrum", [close("spectrum", pred_spec, numeric, rtol=0.0, atol=cl.EIG_ATOL,
                                                      what="sorted eigenvalues")]))
    rates: dict = {}
    # linear residual flow (gamma)
    if gi is not None:
        R0 = np.random.default_rng(args.seed).standard_normal((C, N)) - sv.targets(C, m)
        lin = sv.linear_residual_flow(gi, R0)
        rates["linear_residual"] = {k: _rate_entry(lin.predicted[k], lin.rates[k]) for k in ("global", "class", "within")}
        claims.append(_claim_entry("ntk-rates", [
            close(f"{k} rate", lin.predicted[k], lin.rates[k].get("rate"), rtol=cl.LINEAR_RATE_RTOL, what=f"{k} rate")
            for k in ("global", "class", "within")]))
    # invariant
    d = rep.solution.diagnostics
    Kinv = th.kernel_inverse(inst)
    scale = max(1.0, max(float(np.linalg.norm(s.W.T @ s.W)) + float(np.linalg.norm(s.H @ Kinv @ s.H.T))
                         for s in traj.states))
    claims.append(_claim_entry("ntk-invariant", [close("max_t ||E(t) - E(0)||_F", 0.0, d["max_invariant_drift"],
                                                       rtol=0.0, atol=cl.INVARIANT_TOL * scale, what="invariant drift")]))
    inc = d["scatter_max_relative_increase"]
    claims.append(_claim_entry("ntk-scatter", [condition("tr(D D^T) non-increasing", inc <= cl.SCATTER_TOL,
                                                         verified=f"largest relative increase {fmt(inc, 3)}",
                                                         refuted=f"scatter increased by {fmt(inc, 3)} (relative)")]))
    ratios = []
    for s_ in traj.states:
        b = sv.nc1_finite_time_bound(inst, s_.W, s_.H, rep.E0)
        ratios.append(b["scatter"] / b["bound"] if b["bound"] > 0 else 0.0)
    bend = sv.nc1_finite_time_bound(inst, st.W, st.H, rep.E0)
    claims.append(_claim_entry("ntk-nc1-bound", [condition(
        "finite-time NC1 bound at every grid time", max(ratios) <= 1 + 1e-9,
        verified=f"max ||D||^2/bound = {fmt(max(ratios), 5)}; zero-loss bound r l0 max(0,-lmin E) = "
                 f"{fmt(bend['zero_loss_bound'], 5)}",
        refuted=f"||D||^2 exceeds the bound by a factor {fmt(max(ratios), 5)}")]))

    # phases (always fitted; None with the reason when no window exists)
    lim = th.small_init_limits(inst)
    esc = sv.fit_escape_rate(traj)
    late = sv.fit_late_within_rate(traj)
    rates["escape"] = _rate_entry(lim["escape_rate"], esc)
    rates["late_within"] = _rate_entry(lim["late_within_rate"], late)
    fm = rep.measures
    limits = {
        "mean_sq_norm": {"predicted": lim["mean_sq_norm"], "measured": fm["mean_sq_norms"]},
        "W_fro_sq": {"predicted": lim["W_fro_sq"], "measured": fm["W_fro_sq"]},
        "self_duality": {"predicted": lim["self_duality"], "measured": fm["self_duality_ratio"],
                         "misfit": fm["self_duality_misfit"]},
        "bias": {"predicted": lim["bias"], "measured": fm["bias"]},
        "escape_rate": {"predicted": lim["escape_rate"], "measured": esc.get("rate")},
        "late_within_rate": {"predicted": lim["late_within_rate"], "measured": late.get("rate")},
    }
    if args.init == "random":
        claims.append(_claim_entry("ntk-small-init-limit", cl.small_init_checks(inst, rep, esc, late, eps, n)))
        predicted_geometry = "simplex-etf"
    else:  # the small-initialisation limit is not a statement about this initialisation: not checked
        predicted_geometry = None
    if lz is not None:
        gl = th.NTKInstance(C, m, lz.gamma, inst.s)
        pr = th.residual_rates(gl)

        def sample(ts):
            W, b_, H = traj.batch(ts)
            return sv.batch_residual_components(W @ H + b_[:, :, None] - sv.targets(C, m)[None], C, m)

        fr = sv.fit_decay_rates(sample, T)
        rates["lazy_feature_model"] = {k: _rate_entry(pr[k], fr[k]) for k in ("global", "class", "within")}
        rates["lazy_feature_model"]["gamma"] = lz.gamma
        claims.append(_claim_entry("ntk-lazy-no-collapse", cl.lazy_checks(inst, lz, pr, rep, fr)))
        predicted_geometry = "no collapse (NC1 stays O(1))"
    if args.init == "e-zero":
        claims.append(_claim_entry("ntk-e-zero", cl.e_zero_checks(inst, rep)))
        predicted_geometry = "NC1; simplex ETF only if M^T h_bar = 0"

    met = nc_metrics(st.H, inst.labels, st.W, st.b, center_w=True)
    geo = classify_gram(fm["gram"])
    _, M, _ = th.decompose(st.H, C, m)
    verdict = worst(c["verdict"] for c in claims)
    bad = [c for c in claims if c["verdict"] == verdict.value and verdict != Verdict.VERIFIED]
    return {
        "family": "ntk",
        "instance": {**inst.to_dict(), "gamma": list(gamma) if gamma else None, "feature_dim": n, "init": args.init,
                     "init_scale": eps, "time": T, "seed": args.seed,
                     "mean_weight": args.mean_weight if args.init == "e-zero" else None},
        "predicted": {"value": 0.0, "geometry": predicted_geometry,
                      "eigenvalues": list(inst.eigenvalues), "multiplicities": list(th.multiplicities(C, m)),
                      "alpha": th.alpha(inst), **{k: lim[k] for k in ("mean_sq_norm", "W_fro_sq", "escape_rate",
                                                                      "late_within_rate", "self_duality", "bias")}},
        "solution": {**rep.solution.to_dict(), "seconds": time.perf_counter() - t0},
        "certificate": {"lower_bound": 0.0, "gap": rep.solution.value, "method": "loss >= 0 (MSE)"},
        "geometry": {"classification": geo.classification, "class_mean_cosines": cosine_matrix(M),
                     "metrics": met.to_dict(), "distance_etf": geo.distance_etf},
        "spectrum": {"predicted": th.spectrum(inst), "numeric": numeric,
                     "max_abs_error": float(np.max(np.abs(numeric - pred_spec)))},
        "rates": rates,
        "invariant": {"max_drift": d["max_invariant_drift"], "scale": scale, "E0_norm": d["invariant_scale"],
                      "lambda_min_E": float(np.linalg.eigvalsh(rep.E0)[0])},
        "limits": limits,
        "phases": {"loss_initial": d["loss_initial"], "loss_final": rep.solution.value,
                   "residual_final": d["residual_final"], "hbar_norm": fm["hbar_norm"], "g_norm": fm["g_norm"],
                   "scatter_initial": float(rep.series["scatter"][0]), "scatter_final": float(rep.series["scatter"][-1])},
        "verdict": verdict.value,
        "reason": "; ".join(f"{c['id']}: {c['reason']}" for c in bad[:2]) if bad else f"all {len(claims)} claims hold",
        "claims": [{"id": c["id"], "verdict": c["verdict"], "reason": c["reason"]} for c in claims],
    }


def _g(x, digits=6) -> str:
    if x is None:
        return "null"
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_g(v, digits) for v in x[:6]) + (", …" if len(x) > 6 else "") + "]"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def render_solve(out: dict) -> str:
    i = out["instance"]
    p = out["predicted"]
    lines = [f"ntk: C={i['classes']}, m={i['per_class']}, kappa={_g(i['kappa'])}, s={_g(i['s'])}, n={i['feature_dim']}, "
             f"init={i['init']} (scale {_g(i['init_scale'])}), T={_g(i['time'])}, seed={i['seed']}"
             + (f", gamma={_g(i['gamma'])}" if i.get("gamma") else "")]
    sp = out["spectrum"]
    lines.append("spectrum: " + ", ".join(f"{e['name']} = {_g(e['value'])} (x{e['multiplicity']})" for e in sp["predicted"])
                 + f"; numeric max error {_g(sp['max_abs_error'], 3)}; alpha = {_g(p['alpha'])}")
    lines.append("rates (predicted / fitted):")
    for group, comps in out["rates"].items():
        if group in ("escape", "late_within"):
            e = comps
            lines.append(f"  {group:<22} {_g(e['predicted'])} / {_g(e['fitted'])}"
                         + (f"  ({e['reason']})" if e.get("fitted") is None and e.get("reason") else ""))
            continue
        for k, e in comps.items():
            if isinstance(e, dict):
                lines.append(f"  {group + '.' + k:<22} {_g(e['predicted'])} / {_g(e['fitted'])}")
    inv = out["invariant"]
    lines.append(f"invariant: max drift {_g(inv['max_drift'], 3)} (scale {_g(inv['scale'], 3)}), "
                 f"||E(0)|| = {_g(inv['E0_norm'], 4)}, lambda_min(E) = {_g(inv['lambda_min_E'], 4)}")
    lines.append("small-init limits (predicted / measured):")
    for k, e in out["limits"].items():
        lines.append(f"  {k:<18} {_g(e['predicted'])} / {_g(e['measured'])}")
    ph = out["phases"]
    lines.append(f"loss {_g(ph['loss_initial'], 4)} -> {_g(ph['loss_final'], 4)}; scatter tr(DD^T) "
                 f"{_g(ph['scatter_initial'], 4)} -> {_g(ph['scatter_final'], 4)}; |h_bar| = {_g(ph['hbar_norm'], 3)}, "
                 f"|M^T h_bar| = {_g(ph['g_norm'], 3)}")
    geo = out["geometry"]
    lines.append(f"geometry: {geo['classification']} (distance to ETF {_g(geo['distance_etf'], 3)}); metrics: "
                 + ", ".join(f"{k}={_g(v, 3)}" for k, v in geo["metrics"].items()))
    for c in out["claims"]:
        lines.append(f"  [{c['verdict']}] {c['id']}: {c['reason']}")
    lines.append(f"verdict: {out['verdict']} ({out['reason']})")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# table
# --------------------------------------------------------------------------------------

def _table_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--classes", "-C", type=int_list, default=None, metavar="C1,C2,...",
                   help="class counts (default: the spec's reference rows)")
    p.add_argument("--per-class", "-m", type=int_list, default=None, metavar="M1,M2,...", help="samples per class")
    p.add_argument("--kappa", type=float_list, action="append", default=None, metavar="KD,KC,KN",
                   help="kernel constants; repeat for several kernels")
    p.add_argument("--s", type=float, default=1.0, help="loss scale s (rates scale by s)")


def build_table(args: argparse.Namespace) -> Table:
    if args.classes is None and args.per_class is None and args.kappa is None:
        grid = list(REFERENCE_ROWS)
    else:
        Cs = args.classes or [3]
        ms = args.per_class or [4]
        ks = [_triple("kappa", k) for k in (args.kappa or [[1.0, 0.6, 0.2]])]
        grid = list(itertools.product(Cs, ms, ks))
    rows = []
    for C, m, k in grid:
        inst = th.NTKInstance(C, m, k, args.s)
        lim = th.small_init_limits(inst)
        l0, lc, lg = inst.eigenvalues
        rows.append([C, m, k[0], k[1], k[2], l0, lc, lg, th.alpha(inst), lim["mean_sq_norm"], lim["W_fro_sq"],
                     lim["escape_rate"], lim["late_within_rate"]])
    cols = ["C", "m", "kappa_d", "kappa_c", "kappa_n", "lambda_0", "lambda_c", "lambda_g", "alpha",
            "||mu_c - h_bar||^2", "||W||_F^2", "escape rate", "late within-class rate"]
    latex = ["$C$", "$m$", r"$\kappa_d$", r"$\kappa_c$", r"$\kappa_n$", r"$\lambda_0$", r"$\lambda_c$", r"$\lambda_g$",
             r"$\alpha$", r"$\|\mu_c-\bar h\|^2$", r"$\|W\|_F^2$", "escape", "late within"]
    caption = (f"Block NTK (Seleznova et al. 2023 model), s = {args.s:g}: kernel eigenvalues lambda_0 (mult. C(m-1)), "
               "lambda_c (C-1), lambda_g (1); alpha = m kappa_n/lambda_g; small-initialisation limits "
               "||mu_c - h_bar||^2 = sqrt(lambda_c/m)(1-1/C), ||W||_F^2 = sqrt(m/lambda_c)(C-1), escape rate "
               "s sqrt(m lambda_c), late within-class rate s lambda_0 sqrt(m/lambda_c) (derived).")
    return Table(cols, rows, caption, latex_columns=latex, digits=6, meta={"family": "ntk", "s": args.s})


COMMANDS = [
    SolveCommand("ntk", "block-structured NTK gradient flow: spectrum, three rates, invariant, collapse",
                 _solve_args, run_solve, render_solve),
    TableCommand("ntk", "predicted block-NTK constants (eigenvalues, rates, limits) over a grid of kernels",
                 _table_args, build_table),
]
