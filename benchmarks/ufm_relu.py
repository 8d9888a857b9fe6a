#!/usr/bin/env python
"""Nonnegative-feature CE-UFM (`ncproofs solve ufm --nonneg-features`, docs/scl.md "Cross-entropy with ReLU
features"): best point + DNN dual bound, relative gap and CPU seconds for balanced k = 10 (n = 5) and k = 100
(the class-level relaxation: K x K eigenproblems), and an imbalanced instance.

    python benchmarks/ufm_relu.py

Speed is never asserted in tests.
"""

from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def main():
    from proofs_check.claims import ufm_relu as R
    from solvers import losses as L
    from solvers import ufm_general as SG

    for counts, d, lw, lh in [((5,) * 10, 10, 5e-3, 5e-3), ((5,) * 100, 100, 5e-4, 5e-4),
                              ((40, 20, 10, 5, 2), 5, 1e-3, 1e-3)]:
        p = SG.classification(L.make_loss("ce", len(counts)), list(counts), d, lw, lh, 0.0)
        c0, w0 = time.process_time(), time.perf_counter()
        rep = R.check_nonneg(p, starts=3, seed=0)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        out = rep.to_dict()
        cert = out["certificate"]
        rel = cert["gap"] / cert["upper"]
        print(f"K = {len(counts)}, counts {counts[:5]}{'...' if len(counts) > 5 else ''}, d = {d}: verdict "
              f"{out['verdict']}, value {cert['upper']:.10g}, bound {cert['lower_bound']:.10g}, relative gap "
              f"{rel:.2e}, CPU {cpu:.2f} s, wall {wall:.2f} s")


if __name__ == "__main__":
    main()
