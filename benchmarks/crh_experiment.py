"""Benchmark the CRH MLP experiment (not run by the tests).

    PYTHONPATH=. python benchmarks/crh_experiment.py [steps]

Prints the time of the vectorised SGD (1 and 3 weight decays, without and with checkpoints) and of
the alignment reports, so that the --quick preset time recorded in docs/crh.md can be re-measured.
"""

import sys
import time

from solvers import crh as S
from theory.crh import CRHExperiment


def main(steps: int = 20_000) -> None:
    for wds, rec in (((1e-2,), 1), ((0.0, 1e-3, 1e-2), 1), ((0.0, 1e-2), 50), ((0.0, 1e-3, 1e-2), 200)):
        cfg = CRHExperiment(weight_decays=wds, steps=steps, n_records=rec)
        t0, c0 = time.perf_counter(), time.process_time()
        res = S.run_experiment(cfg)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"runs={len(wds)} steps={steps} records={rec}: {wall:.2f} s wall, {cpu:.2f} s CPU, "
              f"{1e6 * wall / steps:.0f} us/step")
    t0 = time.perf_counter()
    for r in range(len(res.config.weight_decays)):
        for layer in range(res.config.n_layers):
            S.report_from_matrices(res.layer(r, layer, "normalized"), null_draws=200)
    print(f"alignment reports (200 Haar draws, {len(res.config.weight_decays) * res.config.n_layers} layers): "
          f"{time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
