"""Benchmark of the block-NTK feature flow: integration time, DOP853 steps against the work
estimate made before the run (solvers.ntk.estimate_flow_work), stored dense output, and the
measurement time, against the problem size (C, m, n) and the init scale. Not run by the tests.

    PYTHONPATH=. python benchmarks/ntk_flow.py
"""

import time

from solvers import ntk as sv
from theory import ntk as th


def main() -> None:
    print(f"{'C':>3} {'m':>3} {'n':>3} {'eps':>8} {'T':>5} {'steps':>6} {'est.steps':>9} {'est.s':>7} "
          f"{'integrate s':>11} {'measure s':>9} {'dense MB':>8} {'drift':>10}")
    for C, m, n, eps, T in [(3, 4, 4, 1e-6, 30.0), (4, 3, 5, 1e-6, 30.0), (5, 5, 6, 1e-6, 30.0),
                            (10, 10, 11, 1e-6, 30.0), (3, 4, 5, 0.7, 20.0), (3, 4, 4, 3.0, 5.0),
                            (5, 5, 256, 1e-6, 30.0), (3, 4, 4, 1e-6, 3000.0)]:
        inst = th.NTKInstance(C, m, (1.0, 0.6, 0.2 if C * m < 100 else 0.0))
        st0 = sv.init_random(inst, n, eps, seed=0)
        est = sv.estimate_flow_work(inst, st0, T)
        t0 = time.perf_counter()
        rep = sv.run_flow(inst, st0, T, deadline=time.perf_counter() + 60.0)
        t1 = time.perf_counter()
        sv.fit_escape_rate(rep.trajectory)
        sv.fit_late_within_rate(rep.trajectory)
        t2 = time.perf_counter()
        d = rep.solution.diagnostics
        dense = d["steps"] * (64 * est["state_size"] + sv.STEP_OVERHEAD_BYTES) / 1e6
        print(f"{C:>3} {m:>3} {n:>3} {eps:>8.0e} {T:>5.0f} {d['steps']:>6} {est['steps']:>9.0f} {est['seconds']:>7.2f} "
              f"{rep.trajectory.seconds:>11.3f} {t2 - t1:>9.3f} {dense:>8.1f} {d['max_invariant_drift']:>10.2e}"
              + (f"  ({d['stopped']})" if d["stopped"] else ""))


if __name__ == "__main__":
    main()
