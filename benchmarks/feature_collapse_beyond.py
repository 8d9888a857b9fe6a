"""Benchmark (issue 23): trainable-LayerNorm solves at the sizes of the LayerNorm tests, and the two-level model.

Run: PYTHONPATH=. python benchmarks/feature_collapse_beyond.py
Prints, per instance, the work (L-BFGS iterations over all starts), the wall-clock seconds, the proven bracket and
its gap, the verdicts, and the 1-minute load average (the shared machine's load changes the seconds, not the work).
"""

import os
import time

from proofs_check.claims.feature_collapse_beyond import check_trainable
from proofs_check.claims.feature_collapse_hier import check_hier
from theory.feature_collapse import FCInstance, zipf_freqs
from theory.feature_collapse_hier import HierInstance

#: The LayerNorm instances of tests/test_feature_collapse_claims.py and test_feature_collapse_cli.py.
LN_CASES = [
    ("n_c=3 L=2 s_c=2 d=3 lambda=0.05", FCInstance(3, 2, 2, 3, 0.05, layernorm=True)),
    ("n_c=2 L=2 s_c=3 d=2 lambda=1", FCInstance(2, 2, 3, 2, 1.0, layernorm=True)),
    ("n_c=3 L=2 s_c=3 d=4 Zipf", FCInstance(3, 2, 3, 4, 0.05, layernorm=True, freqs=zipf_freqs(3))),
    ("n_c=2 L=3 s_c=2 d=4 mu=(0.7,0.3)", FCInstance(2, 3, 2, 4, 0.05, layernorm=True, freqs=(0.7, 0.3))),
]


def _load():
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:  # pragma: no cover
        return "?"


def main():
    print(f"{'trainable LN instance':36} {'l_LN':>5} {'iters':>6} {'wall s':>6} {'cpu s':>6} {'gap':>9} {'type-II':>16} "
          f"{'load':>5}")
    for name, inst in LN_CASES:
        for lg in (0.0, 0.05):
            t0, c0 = time.perf_counter(), time.process_time()
            rep = check_trainable(inst, lg, n_starts=4)
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            its = sum(x or 0 for x in rep.solution.get("iterations", []))
            gap = (rep.certificate or {}).get("gap")
            v = {c.name: c.verdict.value for c in rep.claims}
            geo = v.get("minimiser-type-ii", "has-min " + v.get("has-minimiser", "?"))
            print(f"{name:36} {lg:5.2f} {its:6d} {dt:6.2f} {dc:6.2f} {gap if gap is not None else float('nan'):9.1e} "
                  f"{geo:>16} {_load():>5}")
    h = HierInstance()
    t0, c0 = time.perf_counter(), time.process_time()
    rep = check_hier(h, n_starts=3, maxiter=400)
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    lb = rep.routes["lbfgs"]
    print(f"\nhierarchical default (3 x 3 concepts, 2 levels, length 4, d = 4, 4): {dt:.1f} s wall, {dc:.1f} s cpu, load {_load()}, "
          f"L-BFGS iterations {lb['iterations']} (3 starts x <= 400), best L-BFGS value {lb['value']:.12f}, "
          f"its gap to the bound {lb['gap_to_bound']:.1e}, certified gap {rep.certificate['gap']:.1e}, verdicts "
          f"{ {c.name: c.verdict.value for c in rep.claims} }")


if __name__ == "__main__":
    main()
