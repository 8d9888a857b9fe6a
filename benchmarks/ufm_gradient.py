#!/usr/bin/env python
"""One factored UFM gradient (``solvers.ufm.JointObjective``) against three single-thread GEMMs of its shapes.

    PYTHONPATH=. python benchmarks/ufm_gradient.py [--reps 400] [--out results.json]

For each instance, interleaved in one loop (so that load from other processes hits all alike), ``--reps``
evaluations of: the gradient as the solver runs it (below ``BLOCK_MIN_FLOPS`` the fused single-block
evaluation), the blocked evaluation in one block (``fused=False``, the previous code path), and the three
products W H, G H^T, W^T G of the same shapes with ``np.matmul(..., out=...)`` into preallocated arrays
(the reference). All under single-threaded BLAS (``blas_threads(0)``). Reported: best and median wall time
and best process CPU time (``time.process_time``) of each, and the ratio reference / gradient (1 = the
gradient costs no more than its three products). Each evaluation follows the others' work, so the caches are
as cold as between L-BFGS iterations. Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from results_io import write_results  # noqa: E402
from solvers import ufm as S  # noqa: E402
from solvers.common import blas_threads  # noqa: E402
from theory import ufm as T  # noqa: E402

INSTANCES = [("ce", 100, 10, 100), ("mse", 100, 10, 100), ("ce", 100, 5, 128), ("ce", 10, 5, 16)]


def measure(loss: str, k: int, n: int, d: int, reps: int) -> dict:
    inst = T.UFMInstance(loss, k, n, d, 1e-3, 1e-3)
    N = inst.N
    x = S.initial_points(inst, 1, 3)[0]
    x[-k:] = np.random.default_rng(1).standard_normal(k)
    J, plain = S.JointObjective(inst), S.JointObjective(inst, blocks=1, fused=False)
    rng = np.random.default_rng(0)
    W, H, G = rng.standard_normal((k, d)), rng.standard_normal((d, N)), rng.standard_normal((k, N))
    U, PW, gH = np.empty((k, N)), np.empty((k, d)), np.empty((d, N))

    def gemm3():
        np.matmul(W, H, out=U)
        np.matmul(G, H.T, out=PW)
        np.matmul(W.T, G, out=gH)

    fns = {"gradient": lambda: J(x), "blocked (one block)": lambda: plain(x), "three GEMMs": gemm3}
    wall = {a: [] for a in fns}
    cpu = {a: [] for a in fns}
    with blas_threads(0.0):
        for fn in fns.values():
            fn()
        for _ in range(reps):
            for a, fn in fns.items():
                c0, t0 = time.process_time(), time.perf_counter()
                fn()
                wall[a].append(time.perf_counter() - t0)
                cpu[a].append(time.process_time() - c0)
    out = {"instance": f"{loss} k={k} n={n} d={d}", "flops_per_product": 2 * k * d * N, "blocks": J.blocks,
           "fused": J.fused, "reps": reps}
    for a in fns:
        out[a] = {"best_ms": 1e3 * min(wall[a]), "median_ms": 1e3 * float(np.median(wall[a])),
                  "best_cpu_ms": 1e3 * min(cpu[a])}
    ref = out["three GEMMs"]
    for a in ("gradient", "blocked (one block)"):
        out[a]["ratio_best"] = ref["best_ms"] / out[a]["best_ms"]
        out[a]["ratio_median"] = ref["median_ms"] / out[a]["median_ms"]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=400, help="interleaved evaluations of each (default 400)")
    ap.add_argument("--out", default=None, help="JSON output path")
    args = ap.parse_args(argv)
    if args.reps < 1:
        ap.error("--reps must be >= 1")
    rows = []
    for spec in INSTANCES:
        r = measure(*spec, reps=args.reps)
        rows.append(r)
        line = [f"{r['instance']:<22} blocks {r['blocks']} fused {r['fused']}:"]
        for a in ("gradient", "blocked (one block)", "three GEMMs"):
            m = r[a]
            line.append(f"{a} {m['best_ms']:.3f} ms (median {m['median_ms']:.3f}, CPU {m['best_cpu_ms']:.3f})"
                        + (f" ratio {m['ratio_best']:.3f} / median {m['ratio_median']:.3f}" if "ratio_best" in m else ""))
        print("\n    ".join(line), flush=True)
    write_results({"load_average": os.getloadavg(), "rows": rows}, args.out, "ufm_gradient-")
    return 0


if __name__ == "__main__":
    sys.exit(main())
