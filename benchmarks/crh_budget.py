"""Estimated against measured time of the CRH experiment (calibrates solvers.crh.experiment_budget).

    PYTHONPATH=. python benchmarks/crh_budget.py

For a few instance shapes prints the estimate of ``experiment_budget`` (work in flop-equivalents, shown as
seconds at the calibrated REFERENCE_RATE; the budget check compares the work with WORK_BUDGET before any
work) and the measured wall/CPU time of ``run_experiment``. The estimate should be above the measured CPU
time (the wall-clock safety net, SAFETY_WALL_S, is far above the budget). Not run by the tests.
"""

import time

from solvers import crh as S
from theory.crh import CRHExperiment

CASES = [
    dict(weight_decays=(0.0, 1e-2), steps=20_000, n_records=50),
    dict(weight_decays=(0.0, 1e-3, 1e-2), steps=20_000, n_records=50),
    dict(weight_decays=(0.0, 1e-2), steps=2_000, n_records=200, n_samples=4096),
    dict(weight_decays=(0.0, 1e-2), steps=2_000, n_records=10, widths=(16, 128, 128, 128, 4)),
    dict(weight_decays=(0.0, 1e-2), steps=500, n_records=10, widths=(64, 256, 256, 4)),
    # the multi-seed grids of the crh.magnitude.* claims (quick and full profile)
    dict(weight_decays=(0.025, 0.05, 0.1), steps=4000, n_records=20, seeds=tuple(range(6)), lr=0.1,
         widths=(8, 16, 16, 2), n_samples=256, task_rank=2),
    dict(weight_decays=(0.0125, 0.025, 0.05, 0.1), steps=20_000, n_records=100, seeds=tuple(range(8)), lr=0.1,
         widths=(8, 16, 16, 16, 2), n_samples=256, task_rank=2),
]


def main() -> None:
    print(f"{'instance':<70} {'estimate s':>10} {'wall s':>8} {'cpu s':>8} {'est/wall':>8}")
    for kw in CASES:
        cfg = CRHExperiment(**kw)
        est = S.experiment_budget(cfg)["seconds"]
        t0, c0 = time.perf_counter(), time.process_time()
        S.run_experiment(cfg)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        label = ", ".join(f"{k}={v}" for k, v in kw.items())
        print(f"{label:<70.70} {est:10.2f} {wall:8.2f} {cpu:8.2f} {est / wall:8.2f}")


if __name__ == "__main__":
    main()
