"""Cost of proving the deep UFM certificates without python-flint (docs/deep_ufm.md, "Without python-flint"):
the same certificates in python-flint arb and in exact rational intervals (solvers/rational_interval.py), on the
quick-profile instances of the four deep_ufm claims, plus the K = 100, L = 5 certificate of benchmarks/deep_ufm.py.
Prints the median wall and CPU seconds of ``--repeat`` runs per arithmetic and the machine load. Not run by the
tests.

    PYTHONPATH=. python benchmarks/deep_ufm_without_flint.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time


def _timed(fn, repeat):
    walls, cpus = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus)


def _cases():
    from proofs_check.claims import deep_ufm as C
    from proofs_check.core import RunContext
    from solvers import deep_ufm as S
    from theory import deep_ufm as T

    ctx = RunContext()
    linear = [i for i in C.linear_optimum_instances(ctx) + C.dnc_shallow_instances(ctx) + C.dnc_suboptimal_instances(ctx)
              if i.activation == "linear"]
    relu = [i for i in C.dnc_shallow_instances(ctx) + C.dnc_suboptimal_instances(ctx) if i.activation == "relu"]
    witnesses = S.stored_witnesses()
    big = T.DeepUFMInstance(5, "linear", "mse", tuple(range(1, 101)), 100, (1e-3,))

    def relu_bounds():
        for i in relu:
            S.certify_dnc(i)
            S.certify_relu_chain_bound(i)
            S.certify_relu_two_column_bound(i)
            S.certify_relu_two_class_bound(i)

    claims = {c.id: c for c in C.CLAIMS}
    return [
        (f"certify_linear_mse, {len(linear)} quick linear instances", lambda: [S.certify_linear_mse(i) for i in linear]),
        (f"DNC enclosure + ReLU bounds, {len(relu)} quick ReLU instances", relu_bounds),
        (f"exact value of the {len(witnesses)} stored witnesses", lambda: [S.exact_mse_value(i, x) for i, x in witnesses]),
        ("certify_linear_mse K = 100 L = 5 D = 100 counts 1..100", lambda: S.certify_linear_mse(big)),
        ("interval cover bound (near-threshold path), 4000 pieces, L = 5",
         lambda: S._cover_bound(S._backend(), 3, 6, (0.01,) * 6, 5, (0.25, 0.25), "benchmark")),
    ] + [(f"claim {cid} (quick)", lambda c=c: c.run(ctx)) for cid, c in claims.items()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")
    rows = {}
    modes = (["python-flint arb"] if importlib.util.find_spec("flint") else []) + ["exact rationals (fractions)"]
    for mode in modes:
        if mode.startswith("exact"):
            sys.modules["flint"] = None  # import flint fails: the standard-library path
        from solvers import deep_ufm as S

        assert S.arithmetic() == mode, (S.arithmetic(), mode)
        for name, fn in _cases():
            fn()  # warm (imports, sympy caches)
            rows.setdefault(name, {})[mode] = _timed(fn, a.repeat)
    for name, per in rows.items():
        cells = "; ".join(f"{m}: {w:.3f} s wall ({c:.3f} s CPU)" for m, (w, c) in per.items())
        print(f"{name}: {cells}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
