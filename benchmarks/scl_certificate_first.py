#!/usr/bin/env python
"""Certificate-first `ncproofs solve scl` (docs/scl.md, "Certificate first"): CPU seconds of the full batch k = 1000
classes of 2 samples (tau = 0.5) and of a mini-batch instance with k = 100 classes of 2 (99 batches of 4), each

- through the installed command (``ncproofs solve scl ... --json`` in a subprocess: import, parsing, the engine,
  the report; CPU of the child from ``resource.getrusage``), the number docs/benchmarks.md reports;
- through the CLI entry point in-process (``proofs_check.cli.main``; imports outside the timing);
- through the engine alone (``solvers.scl_engine.solve_instance``), with the routes it took: whether the
  certificate came first, whether the bounded confirmation solve ran and its value was used (the feasible value
  it reports), the route of the proven bound.

    python benchmarks/scl_certificate_first.py [--k 1000] [--mini-k 100] [--json PATH]

CPU time does not depend on the machine's load; wall time is printed too. Speed is never asserted in tests.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)


def _minibatches(k: int) -> str:
    """k classes of 2 (samples 2c, 2c + 1): batches of 4 pairing classes (0,1), (2,3), ... and (1,2), (3,4), ..."""
    pairs = [",".join(str(4 * (c // 2) + i) for i in range(4)) for c in range(0, k, 2)]
    links = [f"{2 * c},{2 * c + 1},{2 * c + 2},{2 * c + 3}" for c in range(1, k - 1, 2)]
    return ";".join(pairs + links)


def _cli_subprocess(argv):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    exe = [sys.executable, "-c", "import sys; from proofs_check.cli import main; sys.exit(main(sys.argv[1:]))"]
    r = subprocess.run(exe + argv + ["--json"], capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - w0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        out = json.loads(r.stdout)
    except ValueError:
        out = {}
    return r.returncode, out, cpu, wall


def _cli_inprocess(argv):
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


def _engine(counts, tau, batches):
    from solvers.scl_engine import solve_instance
    from theory.scl import SCLInstance

    inst = SCLInstance(counts, tau, len(counts) + 1, True, batches)
    c0, w0 = time.process_time(), time.perf_counter()
    res = solve_instance(inst)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "certified_first": res.certified_first,
            "confirmation_ran": res.confirmation is not None,
            "confirmation_value_used": res.confirmation is not None and res.upper_from == "solver",
            "bound_route": res.bounds.route, "gap": res.certificate["gap"], "skipped": res.diagnostics}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--mini-k", type=int, default=100)
    ap.add_argument("--json", default=None, help="write the numbers to this file")
    a = ap.parse_args()
    import proofs_check.cli  # noqa: F401  (imports outside the in-process timing)

    cases = [(f"full batch k = {a.k}, n = 2, tau = 0.5", (2,) * a.k, None),
             (f"mini-batch k = {a.mini_k}, n = 2, {a.mini_k - 1} batches of 4, tau = 0.5", (2,) * a.mini_k,
              _minibatches(a.mini_k))]
    rows = []
    for label, counts, batches in cases:
        argv = ["solve", "scl", "--counts", ",".join(map(str, counts)), "--tau", "0.5"]
        if batches is not None:
            argv += ["--batches", batches]
        rc, out, cpu, wall = _cli_subprocess(argv)
        rc2, out2, cpu2, wall2 = _cli_inprocess(argv)
        blist = None if batches is None else [[int(i) for i in b.split(",")] for b in batches.split(";")]
        eng = _engine(counts, 0.5, blist)
        row = {"instance": label, "command_rc": rc, "command_verdict": out.get("verdict"),
               "command_cpu_s": round(cpu, 3), "command_wall_s": round(wall, 3),
               "inprocess_verdict": out2.get("verdict"), "inprocess_cpu_s": round(cpu2, 3),
               "inprocess_wall_s": round(wall2, 3), "engine": eng}
        rows.append(row)
        print(f"{label}: `ncproofs solve scl` rc {rc}, {row['command_verdict']}, CPU {cpu:.2f} s (wall {wall:.2f} s); "
              f"in-process CPU {cpu2:.2f} s; engine CPU {eng['cpu_s']:.2f} s, certificate first {eng['certified_first']}, "
              f"confirmation ran {eng['confirmation_ran']} (value used {eng['confirmation_value_used']}), "
              f"bound: {eng['bound_route']}, gap {eng['gap']:.3g}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump({"rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
