"""Benchmark of the UFM closed-form check (value certificate + uniqueness certificate + geometry of every
minimiser) as ``ncproofs solve ufm-ce --method closed-form`` runs it.

Run: PYTHONPATH=. python benchmarks/ufm_closed_form.py [--quick] [--out FILE]
For each k: wall and CPU seconds of ``check_instance`` (best and median of --repeat runs), the verdict, the
certificate gap and the uniqueness margin delta; writes one JSON file (benchmarks/results/ by default).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.results_io import write_results  # noqa: E402
from proofs_check.claims import ufm as C  # noqa: E402
from theory import ufm as T  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="k = 10, 100 only")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    ks = (10, 100) if args.quick else (10, 100, 300, 1000)
    rows = []
    for loss in ("ce", "mse"):
        for k in ks:
            inst = T.UFMInstance(loss, k, 5, k + 24, 1e-5, 1e-5)
            walls, cpus = [], []
            for _ in range(args.repeat):
                t0, c0 = time.perf_counter(), time.process_time()
                rep = C.check_instance(inst, method="closed-form")
                rep.to_dict()
                walls.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
            row = {"loss": loss, "k": k, "n": 5, "d": k + 24, "lambda": 1e-5, "verdict": rep.verdict.value,
                   "wall_best": min(walls), "wall_median": statistics.median(walls), "cpu_best": min(cpus),
                   "gap": rep.certificate["gap"], "delta": rep.geometry["uniqueness"]["delta"]}
            rows.append(row)
            print(f"{loss} k={k:5d}: {row['verdict']:9s} wall {row['wall_best']:.3f} s (median "
                  f"{row['wall_median']:.3f}), cpu {row['cpu_best']:.3f} s, gap {row['gap']:.1e}, delta {row['delta']:.3f}")
    write_results({"benchmark": "ufm_closed_form", "load_average": os.getloadavg(), "rows": rows}, args.out,
                  prefix="ufm_closed_form-")
    return 0 if all(r["verdict"] == "VERIFIED" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
