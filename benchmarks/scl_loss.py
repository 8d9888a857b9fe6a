"""Benchmark of the SCL loss + gradient (solvers.scl.scl_loss) and of the certificates.

Run: PYTHONPATH=. python benchmarks/scl_loss.py [--quick]
Prints seconds per loss+gradient evaluation for full batches and random mini-batchings, and the
time of the factored solver and of the convex Gram relaxation on the spec's instances.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from solvers import scl as S
from theory import scl as T


def timeit(fn, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    sizes = [(10, 10), (100, 10), (1000, 20)] if args.quick else [(10, 10), (100, 10), (1000, 20), (3000, 50)]
    print("loss+gradient, full batch and 64-sample mini-batches (N/64 * 4 batches)")
    for k, n in sizes:
        counts = (n,) * k
        y = T.labels_from_counts(counts)
        N = y.size
        d = k + 1
        H = rng.standard_normal((d, N))
        H /= np.linalg.norm(H, axis=0)
        cb_full = S.compile_batching(y, None)
        t_full = timeit(lambda: S.scl_loss(H, y, cb_full, 0.5))
        bs = min(64, N)
        batches = [sorted(rng.choice(N, bs, replace=False).tolist()) for _ in range(max(1, 4 * N // bs))]
        cb = S.compile_batching(y, batches)
        t_mb = timeit(lambda: S.scl_loss(H, y, cb, 0.5))
        print(f"  k={k:5d} N={N:6d}: full {t_full * 1e3:9.2f} ms   {len(batches)} mini-batches {t_mb * 1e3:9.2f} ms")
    print("solvers on the spec instances (UFM+, d = k)")
    for counts, tau in [((5, 3, 2), 0.5), ((4, 4, 4), 0.5), ((3, 2), 1.0)]:
        inst = T.SCLInstance(counts, tau, len(counts), True)
        t0 = time.perf_counter()
        sol = S.solve_factored(inst, starts=4)
        t1 = time.perf_counter()
        rel = S.gram_relaxation(counts, None, tau)
        t2 = time.perf_counter()
        print(f"  {counts} tau={tau}: factored {t1 - t0:6.2f} s (value {sol.value:.9f}), "
              f"relaxation {t2 - t1:6.2f} s (value {rel.value:.9f}), bound {T.theorem1_bound(counts, tau):.9f}")


if __name__ == "__main__":
    main()
