#!/usr/bin/env python
"""One factored UFM gradient (``solvers.ufm.JointObjective``) against single-thread GEMMs of its three shapes.

    PYTHONPATH=. python benchmarks/ufm_gradient.py [--reps 400] [--large] [--only ce-100-5-128] [--out results.json]

For each instance, ``--reps`` rounds; each round evaluates, in a fresh random order (so that load from other
processes and the cache state left by the previous call hit all alike):

- ``gradient``: the gradient as the solver runs it (below ``BLOCK_MIN_FLOPS`` the fused single-block
  evaluation, single-threaded; above it column blocks on threads, each with single-threaded BLAS);
- ``blocked (one block)``: the blocked evaluation in one block (``fused=False``; small instances only);
- two references of exactly the gradient's flop count, 3 x 2 k d N: the three products W H (k x d times d x N),
  G H^T and W^T G (G k x N) with random operands, written into preallocated arrays,
  ``numpy matmul``: ``np.matmul(..., out=...)`` (numpy's OpenBLAS), and ``scipy dgemm``:
  ``scipy.linalg.blas.dgemm`` (scipy's OpenBLAS, the routine the fused gradient calls; same shapes and
  transpositions as the gradient's products).

Small instances run under single-threaded BLAS (``blas_threads(0)``); ``--large`` adds k = 1000 (n = 5,
d = 1024; 8 column blocks on min(cores, 8) threads), whose references then also run single-threaded, so its
ratio is the gradient on all cores against one-core GEMMs (its time is the number to compare over time).
Reported: best and median wall time, best process CPU time (``time.process_time``), the ratio reference /
gradient of the best times and the median over rounds of the per-round ratio (both measured in the same
round, so load that changes between rounds cancels). 1 = the gradient costs no more than its three products.
Speed is measured here, never asserted in tests.
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

INSTANCES = [("ce", 100, 5, 128), ("mse", 100, 5, 128), ("ce", 100, 10, 100), ("mse", 100, 10, 100),
             ("ce", 10, 5, 16)]
LARGE = [("ce", 1000, 5, 1024), ("mse", 1000, 5, 1024)]
REFS = ("numpy matmul", "scipy dgemm")


def measure(loss: str, k: int, n: int, d: int, reps: int, seed: int = 0) -> dict:
    from scipy.linalg.blas import dgemm

    inst = T.UFMInstance(loss, k, n, d, 1e-3, 1e-3)
    N = inst.N
    x = S.initial_points(inst, 1, 3)[0]
    x[-k:] = np.random.default_rng(1).standard_normal(k)
    J = S.JointObjective(inst)
    rng = np.random.default_rng(0)
    W, H, G = rng.standard_normal((k, d)), rng.standard_normal((d, N)), rng.standard_normal((k, N))
    U, PW, gH = np.empty((k, N)), np.empty((k, d)), np.empty((d, N))

    def matmul3():
        np.matmul(W, H, out=U)
        np.matmul(G, H.T, out=PW)
        np.matmul(W.T, G, out=gH)

    def dgemm3():  # the fused gradient's calls: U^T = H^T W^T, (G H^T)^T = H G^T, (W^T G)^T = G^T W
        dgemm(1.0, H.T, W.T, c=U.T, overwrite_c=1)
        dgemm(1.0, H.T, G.T, c=PW.T, trans_a=1, overwrite_c=1)
        dgemm(1.0, G.T, W.T, c=gH.T, trans_b=1, overwrite_c=1)

    fns = {"gradient": lambda: J(x)}
    if J.blocks == 1:
        plain = S.JointObjective(inst, blocks=1, fused=False)
        fns["blocked (one block)"] = lambda: plain(x)
    fns.update({"numpy matmul": matmul3, "scipy dgemm": dgemm3})
    names = list(fns)
    wall = {a: [] for a in names}
    cpu = {a: [] for a in names}
    order = np.random.default_rng(seed)
    with blas_threads(0.0):
        for fn in fns.values():
            fn()
        for _ in range(reps):
            for a in order.permutation(names):
                c0, t0 = time.process_time(), time.perf_counter()
                fns[a]()
                wall[a].append(time.perf_counter() - t0)
                cpu[a].append(time.process_time() - c0)
    out = {"instance": f"{loss} k={k} n={n} d={d}", "flops_per_product": 2 * k * d * N, "blocks": J.blocks,
           "workers": J.workers, "fused": J.fused, "reps": reps}
    wl = {a: np.array(v) for a, v in wall.items()}
    for a in names:
        out[a] = {"best_ms": 1e3 * float(wl[a].min()), "median_ms": 1e3 * float(np.median(wl[a])),
                  "best_cpu_ms": 1e3 * min(cpu[a])}
    for a in names:
        if a in REFS:
            continue
        for r in REFS:
            key = "matmul" if r == "numpy matmul" else "dgemm"
            out[a][f"ratio_best_{key}"] = float(wl[r].min() / wl[a].min())
            out[a][f"ratio_paired_median_{key}"] = float(np.median(wl[r] / wl[a]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=400, help="rounds of interleaved evaluations (default 400)")
    ap.add_argument("--large", action="store_true", help="also k = 1000 (n = 5, d = 1024), with --large-reps rounds")
    ap.add_argument("--large-reps", type=int, default=10, help="rounds at k = 1000 (default 10)")
    ap.add_argument("--only", default=None, help="run one instance, e.g. ce-100-5-128 (loss-k-n-d)")
    ap.add_argument("--out", default=None, help="JSON output path")
    args = ap.parse_args(argv)
    if args.reps < 1 or args.large_reps < 1:
        ap.error("--reps and --large-reps must be >= 1")
    specs = [(s, args.reps) for s in INSTANCES] + ([(s, args.large_reps) for s in LARGE] if args.large else [])
    if args.only is not None:
        specs = [(s, r) for s, r in [(s, args.reps) for s in INSTANCES] + [(s, args.large_reps) for s in LARGE]
                 if "-".join(map(str, s)) == args.only]
        if not specs:
            ap.error(f"--only must name one of {', '.join('-'.join(map(str, s)) for s in INSTANCES + LARGE)}")
    rows = []
    load0 = os.getloadavg()
    for spec, reps in specs:
        r = measure(*spec, reps=reps)
        rows.append(r)
        line = [f"{r['instance']:<22} blocks {r['blocks']} on {r['workers']} threads, fused {r['fused']}, "
                f"load {os.getloadavg()[0]:.2f}:"]
        for a in [a for a in r if isinstance(r[a], dict)]:
            m = r[a]
            text = f"{a} {m['best_ms']:.3f} ms (median {m['median_ms']:.3f}, CPU {m['best_cpu_ms']:.3f})"
            if "ratio_best_matmul" in m:
                text += (f" ratio best / paired median: matmul {m['ratio_best_matmul']:.3f} / "
                         f"{m['ratio_paired_median_matmul']:.3f}, dgemm {m['ratio_best_dgemm']:.3f} / "
                         f"{m['ratio_paired_median_dgemm']:.3f}")
            line.append(text)
        print("\n    ".join(line), flush=True)
    write_results({"load_average_start": load0, "load_average_end": os.getloadavg(), "rows": rows}, args.out,
                  "ufm_gradient-")
    return 0


if __name__ == "__main__":
    sys.exit(main())
