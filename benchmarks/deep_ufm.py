"""Benchmark of the deep UFM family (docs/deep_ufm.md): the certified deep linear MSE optimum at K = 100, L = 5
(target < 5 s) and the DNC-versus-low-rank witness search at K = 10, L = 4, width 64 (target < 60 s on 2 cores).
Prints wall and CPU seconds and the machine load (the development machine was shared by ~8 jobs). Not run by the
tests.

    PYTHONPATH=. python benchmarks/deep_ufm.py [--starts 4] [--max-evals 3000]
"""

from __future__ import annotations

import argparse
import os
import time

from solvers import deep_ufm as S
from solvers.common import blas_threads
from theory import deep_ufm as T


def _timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=4)
    ap.add_argument("--max-evals", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")
    # 1. deep linear MSE, K = 100, L = 5: certificate + the realised optimum in the full network
    from proofs_check.claims.deep_ufm import check_instance

    for counts, label in (((5,) * 100, "balanced n = 5"), (tuple(range(1, 101)), "counts 1..100")):
        inst = T.DeepUFMInstance(5, "linear", "mse", counts, 100, (1e-3,))
        cert, w, c = _timed(lambda: S.certify_linear_mse(inst))
        print(f"linear MSE K = 100 L = 5 D = 100 ({label}): certificate {w:.3f} s wall ({c:.3f} s CPU), "
              f"[{cert.lower_bound!r}, {cert.upper!r}], rank {cert.details['rank']}")
        rep, w, c = _timed(lambda: check_instance(inst, starts=1, max_evals=200, symbolic=False))
        print(f"  check_instance (certificate, realised point in the full model, 1 x 200-evaluation multi-start): "
              f"{w:.2f} s wall ({c:.2f} s CPU), verdict {rep.verdict.value}")
    # 2. witness search K = 10, L = 4, width 64
    inst = T.balanced(4, "relu", "mse", 10, 1, 64, 0.002)
    with blas_threads(0):
        r, w, c = _timed(lambda: S.witness_search(inst, starts=a.starts, seed=a.seed, max_evals=a.max_evals))
    runs = r["runs"]
    print(f"witness search K = 10 L = 4 D = 64 lambda = 0.002 ({len(runs)} starts x <= {a.max_evals} evaluations): "
          f"{w:.1f} s wall ({c:.1f} s CPU); best {r['value_exact']:.10g} (exact) vs DNC "
          f"[{r['dnc_enclosure'][0]:.10g}, {r['dnc_enclosure'][1]:.10g}]: below = {r['below_dnc_proven']}, "
          f"class-mean ranks {[f['rank'] for f in r['structure']['features']]}")
    for run in runs:
        print(f"   {run['start']:>16}: {run['value']:.8g} ({run['evaluations']} evaluations)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
