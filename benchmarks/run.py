#!/usr/bin/env python
"""Performance benchmark: ncproofs' factored UFM solver against two baselines, same machine.

    python benchmarks/run.py [--quick] [--large] [--out results.json]

For every instance: the certified optimum (closed form + class-reduced KKT dual certificate,
timed), then the time each method needs to reach a relative objective gap of 1e-6 to the
certified value from the same start:
- ``ncproofs``: ``solvers.ufm.solve_factored(starts=1)``: solvers.lbfgs (memory 10) on the fused,
  column-blocked joint objective with (W, H) rebalancing (CE), or over W alone with (H, b)
  eliminated in closed form (MSE, variable projection);
- ``plain-lbfgs``: scipy L-BFGS-B on a direct numpy objective, default and tight options;
- ``peer-gd``: full-batch gradient descent, momentum 0.9, lr 0.1, float64.
Every method is timed the same way: one run, repeated (up to REPEATS runs, while the runs so far
took under REPEAT_BUDGET seconds) when it is short, reporting the best and the median run
(sub-second timings from a single run are dominated by noise and first-call effects).
A baseline that has not reached the target by the cap (150x our best time, at least 2 s, at
most ``--cap`` seconds) is stopped and its ratio is reported as a lower bound (">=").
Also: GFLOP/s of one joint gradient evaluation, as the solver runs it (single-threaded BLAS,
column blocks on threads), best and median of repeated evaluations, against the measured
float64 GEMM rate (all cores). Results go to JSON (default benchmarks/results/<timestamp>.json)
for comparison over time. Speed is measured here, never asserted in tests.
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
sys.path.insert(0, HERE)

from baselines import peer_gd, plain_lbfgs  # noqa: E402

from results_io import write_results  # noqa: E402
from solvers import ufm as S  # noqa: E402
from theory import ufm as T  # noqa: E402

TARGET_REL_GAP = 1e-6
#: A baseline is stopped at CAP_FACTOR x our time (at least 2 s, at most --cap): large enough to
#: test the issue's "100x the peer-style baseline" target, reported as a lower bound when hit.
CAP_FACTOR = 150


def gemm_gflops(n: int, reps: int = 3) -> float:
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    A @ B
    best = min(_timed(lambda: A @ B) for _ in range(reps))
    return 2 * n ** 3 / best / 1e9


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


#: Short runs are repeated (same start, same target) up to this many times, within this budget.
REPEATS = 5
REPEAT_BUDGET = 3.0


def repeated(fn):
    """Run ``fn`` (returns a result dict with "seconds") once, and again while cheap; best and median."""
    runs = [fn()]
    while len(runs) < REPEATS and sum(r["seconds"] for r in runs) < REPEAT_BUDGET:
        runs.append(fn())
    secs = sorted(r["seconds"] for r in runs)
    best = min(runs, key=lambda r: r["seconds"])
    return {**best, "seconds": secs[0], "median_seconds": float(np.median(secs)), "runs": len(runs)}


def gradient_gflops(inst: T.UFMInstance, budget: float = 1.0) -> dict:
    """One joint gradient as the solver evaluates it: best and median over repeated evaluations."""
    from solvers.common import blas_threads

    x = S.initial_points(inst, 1, 0)[0]
    J = S.JointObjective(inst)
    times = []
    with blas_threads(0.0):
        J(x)
        while len(times) < 5 or (sum(times) < budget and len(times) < 400):
            times.append(_timed(lambda: J(x)))
    flops = 3 * 2 * inst.k * inst.d * inst.N  # W H, G H^T, W^T G
    best, med = min(times), float(np.median(times))
    return {"gradient_seconds": best, "gradient_median_seconds": med, "gradient_gflops": flops / best / 1e9,
            "gradient_median_gflops": flops / med / 1e9, "gradient_blocks": J.blocks}


def bench_instance(loss, k, n, d, lam, cap_max, skip_baselines=False) -> list[dict]:
    inst = T.UFMInstance(loss, k, n, d, lam, lam)
    name = f"{loss} k={k} n={n} d={d} lambda={lam:g}"
    t0 = time.perf_counter()
    cert = S.closed_form_certificate(inst)
    t_cert = time.perf_counter() - t0
    fstar = cert.upper
    target = fstar + TARGET_REL_GAP * abs(fstar)
    rows = [{"instance": name, "method": "certificate (closed form + reduced KKT dual)", "seconds": t_cert,
             "iterations": None, "gap": cert.gap / abs(fstar), "reached": cert.gap <= TARGET_REL_GAP * abs(fstar),
             "ratio": None}]
    grad = gradient_gflops(inst)

    def ours():
        t0 = time.perf_counter()
        sol = S.solve_factored(inst, starts=1, seed=0, stop_at=target)
        return {"seconds": time.perf_counter() - t0, "sol": sol}

    r = repeated(ours)
    sol, t_ours = r.pop("sol"), r["seconds"]
    rows.append({"instance": name, "method": "ncproofs factored (starts=1)", "seconds": t_ours,
                 "median_seconds": r["median_seconds"], "runs": r["runs"], "solver": sol.method,
                 "iterations": sol.diagnostics["evaluations"], "gap": (sol.value - fstar) / abs(fstar),
                 "reached": sol.value <= target, "ratio": 1.0, **grad})
    if skip_baselines:
        return rows
    x0 = S.initial_points(inst, 1, 0)[0]
    args = (k, d, inst.N, inst.labels(), lam, lam, loss)
    cap = min(max(CAP_FACTOR * t_ours, 2.0), cap_max)
    import functools

    for label, fn in (("plain scipy L-BFGS (defaults)", plain_lbfgs),
                      ("plain scipy L-BFGS (tight tolerances)", functools.partial(plain_lbfgs, tight=True)),
                      ("peer-style GD (momentum 0.9, lr 0.1)", peer_gd)):
        def run_baseline(fn=fn):
            secs, its, best, stop = fn(x0.copy(), args, target, cap)
            return {"seconds": secs, "iterations": its, "best": best, "stop": stop}

        b = repeated(run_baseline)
        stop = b["stop"]
        # capped: the true ratio is at least secs/ours; stopped by its own test: it never gets there
        ratio = b["seconds"] / t_ours if stop in ("target", "cap") else None
        rows.append({"instance": name, "method": label, "seconds": b["seconds"], "median_seconds": b["median_seconds"],
                     "runs": b["runs"], "iterations": b["iterations"], "gap": (b["best"] - fstar) / abs(fstar),
                     "reached": stop == "target", "stopped_by": stop, "ratio": ratio,
                     "ratio_is_lower_bound": stop == "cap"})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small instances only (CI smoke test, < 1 minute)")
    ap.add_argument("--large", action="store_true", help="add k = 1000, n = 5, d = 1024 (certificate + our solve)")
    ap.add_argument("--cap", type=float, default=300.0, help="maximum seconds per baseline run (default 300)")
    ap.add_argument("--out", default=None, help="JSON output path")
    args = ap.parse_args(argv)
    if args.quick:
        instances = [("ce", 10, 5, 16, 1e-3), ("mse", 10, 5, 16, 1e-3)]
        cap = min(args.cap, 5.0)
    else:
        instances = [("ce", 10, 5, 16, 1e-3), ("mse", 10, 5, 16, 1e-3), ("ce", 50, 5, 64, 1e-4),
                     ("ce", 100, 5, 128, 1e-4), ("mse", 100, 5, 128, 1e-4)]
        cap = args.cap
    gemm = gemm_gflops(512 if args.quick else 2048)
    rows = []
    for spec in instances:
        rows += bench_instance(*spec, cap_max=cap)
        _print_rows(rows[-5:])
    if args.large:
        for loss in ("ce", "mse"):
            rows += bench_instance(loss, 1000, 5, 1024, 1e-4, cap_max=cap, skip_baselines=True)
            _print_rows(rows[-2:])
    out = {"date": dt.datetime.now(dt.timezone.utc).isoformat(), "machine": platform.platform(),
           "processor": platform.processor(), "cpu_count": os.cpu_count(), "numpy": np.__version__,
           "gemm_gflops_float64": gemm, "target_relative_gap": TARGET_REL_GAP, "rows": rows}
    print(f"\nfloat64 GEMM: {gemm:.1f} GFLOP/s")
    for r in rows:
        if "gradient_gflops" in r:
            print(f"  {r['instance']}: one gradient ({r['gradient_blocks']} column blocks) best "
                  f"{r['gradient_seconds'] * 1e3:.2f} ms = {r['gradient_gflops']:.1f} GFLOP/s "
                  f"({100 * r['gradient_gflops'] / gemm:.0f}% of GEMM), median {r['gradient_median_seconds'] * 1e3:.2f} ms "
                  f"({100 * r['gradient_median_gflops'] / gemm:.0f}%)")
    write_results(out, args.out, "")
    return 0


def _print_rows(rows):
    for r in rows:
        if r["ratio"] is None:
            ratio = "never (stopped by its own test)" if r.get("stopped_by") == "own-convergence-test" else ""
        else:
            ratio = (">=" if r.get("ratio_is_lower_bound") else "") + f"{r['ratio']:.1f}x"
        its = "" if r["iterations"] is None else str(r["iterations"])
        med = f"(median {r['median_seconds']:.3f} of {r['runs']})" if r.get("runs", 1) > 1 else ""
        print(f"{r['instance']:<34} {r['method']:<40} {r['seconds']:9.3f} s {med:<20} {its:>7} evals, gap {r['gap']:.1e} "
              f"{'reached' if r['reached'] else 'NOT reached':<11} {ratio}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
