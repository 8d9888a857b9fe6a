"""Benchmark of the block-NTK feature flow: integration time and RHS evaluations against the
problem size (C, m, n) and the init scale. Not run by the tests.

    PYTHONPATH=. python benchmarks/ntk_flow.py
"""

import time

from solvers import ntk as sv
from theory import ntk as th


def main() -> None:
    print(f"{'C':>3} {'m':>3} {'n':>3} {'eps':>8} {'T':>5} {'nfev':>7} {'integrate s':>12} {'measure s':>10} {'drift':>10}")
    for C, m, n, eps, T in [(3, 4, 4, 1e-6, 30.0), (4, 3, 5, 1e-6, 30.0), (5, 5, 6, 1e-6, 30.0),
                            (10, 10, 11, 1e-6, 30.0), (3, 4, 5, 0.7, 20.0), (10, 20, 12, 1e-3, 30.0)]:
        inst = th.NTKInstance(C, m, (1.0, 0.6, 0.2 if C * m < 100 else 0.0))
        t0 = time.perf_counter()
        rep = sv.run_flow(inst, sv.init_random(inst, n, eps, seed=0), T)
        t1 = time.perf_counter()
        sv.fit_escape_rate(rep.trajectory)
        sv.fit_late_within_rate(rep.trajectory)
        t2 = time.perf_counter()
        d = rep.solution.diagnostics
        print(f"{C:>3} {m:>3} {n:>3} {eps:>8.0e} {T:>5.0f} {d['nfev']:>7} {t1 - t0:>12.3f} {t2 - t1:>10.3f} "
              f"{d['max_invariant_drift']:>10.2e}")


if __name__ == "__main__":
    main()
