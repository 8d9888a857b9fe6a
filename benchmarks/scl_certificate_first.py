#!/usr/bin/env python
"""Certificate-first `ncproofs solve scl` (docs/scl.md, "Certificate first"): CPU and wall seconds through the CLI
entry point (proofs_check.cli.main, in-process) for the full batch k = 1000 classes of 2 samples and a mini-batch
instance with k = 100 classes, plus the same instances with --method factored refused/estimated by the budget.

    python benchmarks/scl_certificate_first.py [--k 1000] [--mini-k 100]

CPU time (time.process_time) is the number that does not depend on the machine's load; wall time is printed too.
Speed is never asserted in tests.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def _run(argv):
    from proofs_check.cli import main

    buf = io.StringIO()
    c0, w0 = time.process_time(), time.perf_counter()
    with contextlib.redirect_stdout(buf):
        rc = main(argv + ["--json"])
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    try:
        out = json.loads(buf.getvalue())
    except ValueError:
        out = {}
    return rc, out, cpu, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--mini-k", type=int, default=100)
    a = ap.parse_args()
    import proofs_check.cli  # noqa: F401  (imports outside the timing)

    counts = ",".join(["2"] * a.k)
    rc, out, cpu, wall = _run(["solve", "scl", "--counts", counts, "--tau", "0.5"])
    print(f"full batch k = {a.k}, n = 2, tau = 0.5: rc {rc}, verdict {out.get('verdict')}, "
          f"CPU {cpu:.2f} s, wall {wall:.2f} s")
    # mini-batch: k classes of 2, batches pairing consecutive classes (each holds 2 classes x 2 samples)
    k = a.mini_k
    batches = ";".join(",".join(str(4 * (c // 2) * 1 + i) for i in range(4)) for c in range(0, k, 2))
    extra = ";".join(f"{2 * c},{2 * c + 1},{2 * c + 2},{2 * c + 3}" for c in range(1, k - 1, 2))
    rc, out, cpu, wall = _run(["solve", "scl", "--counts", ",".join(["2"] * k), "--tau", "0.5",
                               "--batches", batches + ";" + extra])
    print(f"mini-batch k = {k}, n = 2, {k - 1} batches of 4: rc {rc}, verdict {out.get('verdict')}, "
          f"CPU {cpu:.2f} s, wall {wall:.2f} s")


if __name__ == "__main__":
    main()
