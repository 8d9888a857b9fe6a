#!/usr/bin/env python
"""SCL benchmark: certified UFM+ optimum at N = 200 samples, k = 10, against a peer-style solver.

    python benchmarks/scl_bench.py [--quick] [--cap SECONDS] [--out results.json]

For every instance (full batch, UFM+, d = k + 1, tau = 0.5):
- ``certificate``: the class-reduced k x k convex relaxation (solvers.scl.class_reduced_relaxation),
  timed. Its value is a lower bound on the loss at every d (the N x N doubly-nonnegative
  relaxation reduced by within-class symmetry, same value); its row reports the relative distance
  between that value and the loss re-evaluated at the expanded Gram (0 up to solver accuracy).
- ``ncproofs factored (numpy)`` / ``(torch, <device>, <dtype>)``: solvers.scl.solve_factored with up
  to 6 starts, stopped as soon as the float64 loss is within a relative 1e-6 of the certified
  value (later starts only run when an earlier one ends at a local minimum). "certified in" =
  certificate + numpy factored time.
- ``peer-style GD``: full-batch gradient descent with heavy-ball momentum 0.9 and lr 0.1 on the
  same parametrised objective (h = v∘v/||v∘v||, the same loss and gradient code, float64, the same
  BLAS threading), from the start our solver succeeded from. Stopped at the target or at the cap
  (10x our factored time, at least 2 s, at most --cap); a capped ratio is a lower bound (">=").
``--large`` adds the certificate at large k without a conic solver: the class-reduced dual bound
(solvers.scl.class_reduced_dual) at the predicted optimum, timed at k = 30 against Clarabel on the
same k x k program and alone at k = 100, 300, 1000 (UFM+ with step-imbalanced classes, balanced
UFM), with its distance to the closed forms; and UFM+ certified end to end at k = 31 and 50
(N = 62, 100, d = k + 1) by the factored solver with basin hopping plus the dual bound.
Results go to JSON (default benchmarks/results/scl-<timestamp>.json). Speed is never asserted in tests.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from results_io import write_results  # noqa: E402
from solvers import scl as S  # noqa: E402
from solvers.backends import torch_available  # noqa: E402
from solvers.common import blas_threads  # noqa: E402
from theory import scl as T  # noqa: E402

TARGET_REL_GAP = 1e-6
TAU = 0.5
STARTS = 6


def peer_gd(V0, cb, tau, nonneg, f_target, time_cap, lr=0.1, momentum=0.9, max_iter=10**8):
    """Heavy-ball GD (as torch.optim.SGD with momentum) on the parametrised objective."""
    t0 = time.perf_counter()
    V = V0.copy()
    buf = np.zeros_like(V)
    best = np.inf
    with blas_threads(2.0 * V.shape[0] * V.shape[1] ** 2):
        for it in range(1, max_iter + 1):
            H, _, nr = S._features_from_params(V, nonneg)
            f, gH = S._loss_features(H, cb, tau, True)
            if not np.isfinite(f):
                return time.perf_counter() - t0, it, best, "diverged"
            best = min(best, f)
            if f <= f_target:
                return time.perf_counter() - t0, it, best, "target"
            if time.perf_counter() - t0 > time_cap:
                return time.perf_counter() - t0, it, best, "cap"
            buf = momentum * buf + S._param_grad(V, H, nr, gH, nonneg)
            V = V - lr * buf
    return time.perf_counter() - t0, max_iter, best, "max-iter"


def bench_instance(name, counts, cap_max, torch_device=None) -> list[dict]:
    k = len(counts)
    inst = T.SCLInstance(counts, TAU, k + 1, True)
    label = f"{name} counts={','.join(map(str, counts))} N={inst.N} k={k} d={k + 1} tau={TAU}"
    rows = []
    t0 = time.perf_counter()
    relax = S.class_reduced_relaxation(counts, TAU)
    t_cert = time.perf_counter() - t0
    fstar = relax.value
    target = fstar + TARGET_REL_GAP * abs(fstar)
    cert_gap = abs(relax.loss_at_G - fstar) / abs(fstar)
    rows.append({"instance": label, "method": f"certificate ({relax.kind}, {relax.solver})", "seconds": t_cert,
                 "iterations": None, "gap": cert_gap, "reached": relax.ok and cert_gap <= TARGET_REL_GAP,
                 "ratio": None, "certified_value": fstar, "theorem1_bound": T.theorem1_bound(counts, TAU),
                 "status": relax.status})
    sol = S.solve_factored(inst, starts=STARTS, seed=0, stop_at=target)
    t_ours = sol.seconds
    ok = sol.value <= target
    used = sol.diagnostics["starts"]
    rows.append({"instance": label, "method": "ncproofs factored (numpy)", "seconds": t_ours,
                 "iterations": sol.diagnostics["evaluations"], "gap": (sol.value - fstar) / abs(fstar), "reached": ok,
                 "ratio": 1.0, "starts_used": used, "start_values": sol.diagnostics["start_values"],
                 "certified_seconds": t_cert + t_ours})
    if torch_device is not None:
        for dtype in ("float64", "float32"):
            st = S.solve_factored(inst, starts=STARTS, seed=0, stop_at=target, backend="torch", device=torch_device,
                                  dtype=dtype)
            rows.append({"instance": label, "method": f"ncproofs factored (torch, {st.diagnostics['device']}, {dtype})",
                         "seconds": st.seconds, "iterations": st.diagnostics["evaluations"],
                         "gap": (st.value - fstar) / abs(fstar), "reached": st.value <= target,
                         "ratio": st.seconds / t_ours, "starts_used": st.diagnostics["starts"],
                         "fallback": st.diagnostics["fallback"]})
    V0 = S.initial_params(inst, used, 0)[used - 1]  # the start our solver reached the target from
    cap = min(max(10 * t_ours, 2.0), cap_max)
    cb = S.compile_batching(inst.labels, None)
    secs, its, best, stop = peer_gd(V0, cb, TAU, True, target, cap)
    rows.append({"instance": label, "method": "peer-style GD (momentum 0.9, lr 0.1, float64)", "seconds": secs,
                 "iterations": its, "gap": (best - fstar) / abs(fstar), "reached": stop == "target", "stopped_by": stop,
                 "ratio": secs / t_ours if stop in ("target", "cap") else None, "ratio_is_lower_bound": stop == "cap",
                 "cap_seconds": cap})
    return rows


def bench_large() -> list[dict]:
    rows = []
    for k in (30, 100, 300, 1000):
        for nonneg in (True, False):
            counts = T.step_counts(k, 20, 4, 0.5) if nonneg else (20,) * k
            inst = T.SCLInstance(counts, TAU, k + 1, nonneg)
            closed = T.theorem1_bound(counts, TAU) if nonneg else T.etf_value(counts, TAU)
            model = "UFM+ step R=4" if nonneg else "UFM balanced"
            label = f"{model} k={k} N={inst.N}"
            t0 = time.perf_counter()
            d = S.class_reduced_dual(counts, TAU, nonneg=nonneg, candidates=S.reduced_candidates(inst))
            secs = time.perf_counter() - t0
            rows.append({"instance": label, "method": "class-reduced dual bound (predicted optimum as candidate)",
                         "seconds": secs, "iterations": None, "gap": (closed - d.value) / abs(closed),
                         "reached": d.ok and closed - d.value <= TARGET_REL_GAP * abs(closed), "ratio": None})
            if k == 30:
                t0 = time.perf_counter()
                r = S.class_reduced_relaxation(counts, TAU, nonneg=nonneg)
                conic = time.perf_counter() - t0
                rows.append({"instance": label, "method": "class-reduced relaxation (Clarabel)",
                             "seconds": conic, "iterations": None,
                             "gap": (r.value - closed) / abs(closed) if r.ok else float("nan"),
                             "reached": r.ok, "ratio": conic / secs})
    for k in (31, 50):
        counts = (2,) * k
        inst = T.SCLInstance(counts, TAU, k + 1, True)
        t0 = time.perf_counter()
        d0 = S.class_reduced_dual(counts, TAU, nonneg=True, candidates=S.reduced_candidates(inst))
        sol = S.solve_factored(inst, starts=STARTS, seed=0, hops=20, hop_until=d0.value + TARGET_REL_GAP * abs(d0.value))
        d = S.class_reduced_dual(counts, TAU, nonneg=True, candidates=S.reduced_candidates(inst, sol.variables["H"]))
        secs = time.perf_counter() - t0
        rows.append({"instance": f"UFM+ balanced k={k} N={inst.N} d={k + 1}",
                     "method": f"certified: factored ({STARTS} starts, {sol.diagnostics['hops']} hops) + dual bound",
                     "seconds": secs, "iterations": sol.diagnostics["evaluations"], "gap": (sol.value - d.value) / abs(d.value),
                     "reached": sol.value - d.value <= TARGET_REL_GAP * abs(d.value), "ratio": None,
                     "start_values": sol.diagnostics["start_values"]})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small instances (CI smoke test, well under a minute)")
    ap.add_argument("--cap", type=float, default=300.0, help="maximum seconds per baseline run (default 300)")
    ap.add_argument("--device", default=None, help="torch device for the torch rows (default: cuda if available, else cpu)")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch rows")
    ap.add_argument("--out", default=None, help="JSON output path")
    ap.add_argument("--large", action="store_true", help="add the dual bound at k = 30..1000 and UFM+ at k = 31, 50")
    args = ap.parse_args(argv)
    if args.quick:
        instances = [("balanced", (5,) * 4), ("step", (8, 8, 2, 2))]
        cap = min(args.cap, 3.0)
    else:
        instances = [("balanced", (20,) * 10), ("step R=9", T.step_counts(10, 36, 9, 0.5))]
        cap = args.cap
    device = None
    if torch_available() and not args.no_torch:
        import torch

        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    _warm_up(device)  # imports and first calls (cvxpy, torch) are not part of the timings
    rows = []
    for name, counts in instances:
        new = bench_instance(name, counts, cap, device)
        _print_rows(new)
        rows += new
    if args.large:
        new = bench_large()
        _print_rows(new)
        rows += new
    out = {"date": dt.datetime.now(dt.timezone.utc).isoformat(), "machine": platform.platform(),
           "processor": platform.processor(), "cpu_count": os.cpu_count(), "numpy": np.__version__,
           "torch": _torch_version(), "target_relative_gap": TARGET_REL_GAP, "tau": TAU, "rows": rows}
    for r in rows:
        if "certified_seconds" in r:
            print(f"certified (reduced certificate + factored solve): {r['instance']}: {r['certified_seconds']:.2f} s")
    write_results(out, args.out, "scl-")
    return 0


def _warm_up(device):
    inst = T.SCLInstance((2, 2), TAU, 3, True)
    S.class_reduced_relaxation((2, 2), TAU)
    S.solve_factored(inst, starts=1)
    if device is not None:
        S.solve_factored(inst, starts=1, backend="torch", device=device)


def _torch_version():
    try:
        import torch

        return torch.__version__
    except Exception:
        return None


def _print_rows(rows):
    for r in rows:
        ratio = "" if r["ratio"] is None else (">=" if r.get("ratio_is_lower_bound") else "") + f"{r['ratio']:.1f}x"
        its = "" if r["iterations"] is None else str(r["iterations"])
        print(f"{r['instance']:<58} {r['method']:<52} {r['seconds']:9.3f} s {its:>8} evals, gap {r['gap']:.1e} "
              f"{'reached' if r['reached'] else 'NOT reached':<11} {ratio}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
