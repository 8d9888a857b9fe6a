"""Benchmark: time of the exact-risk evaluation, one L-BFGS start and the certificates.

Run: PYTHONPATH=. python benchmarks/feature_collapse_solve.py
"""

import time

import numpy as np

from solvers import feature_collapse as S
from theory.feature_collapse import FCInstance

CASES = [
    ("n_c=3 L=2 s_c=2 (spec row 1)", FCInstance(3, 2, 2, 4, 0.05)),
    ("n_c=2 L=4 s_c=3 (spec row 2)", FCInstance(2, 4, 3, 3, 0.05)),
    ("n_c=4 L=3 s_c=3 Zipf", FCInstance(4, 3, 3, 4, 0.01, freqs=(6 / 11, 3 / 11, 2 / 11))),
    ("n_c=4 L=3 s_c=3 LayerNorm", FCInstance(4, 3, 3, 5, 0.05, layernorm=True)),
]


def main():
    print(f"{'instance':34} {'sentences':>9} {'eval ms':>8} {'1 start s':>9} {'gap':>9} {'cvxpy s':>8}")
    for name, inst in CASES:
        prob = S.FCProblem(inst)
        x = np.random.default_rng(0).normal(size=(inst.n_w + inst.K * inst.L) * inst.d)
        t0 = time.perf_counter()
        for _ in range(20):
            prob.fun(x)
        ev = (time.perf_counter() - t0) / 20 * 1e3
        sol = S.solve(inst, n_starts=1)
        cv = ""
        if not inst.layernorm and prob.S * inst.K <= S.MAX_CVXPY_WORK:
            c = S.cvxpy_convex_optimum(inst, prob)
            cv = f"{c['seconds']:.2f}"
        print(f"{name:34} {prob.S:9d} {ev:8.2f} {sol.seconds:9.2f} {sol.certificate.gap:9.1e} {cv:>8}")


if __name__ == "__main__":
    main()
