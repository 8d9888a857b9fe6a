"""CPU seconds of every CRH claim run in isolation, as a worker of ``ncproofs run --jobs N`` runs it.

    PYTHONPATH=. python benchmarks/crh_quick_profile.py [--full] [--only SUBSTRING] [--json PATH]

Each claim runs in a forked child of a process that has imported the claim modules but run nothing, so
no cached experiment is shared (a worker of ``ncproofs run -j N`` pays for every experiment its claim
needs). Prints the verdict, the child's CPU seconds (``time.process_time``: all its threads, BLAS
included) and wall seconds. Numbers for docs/benchmarks.md ("CRH claims in the quick profile"). Not
run by the tests.
"""

import json
import os
import sys
import time

from proofs_check.core import RunContext
from proofs_check.registry import all_claims


def _child(claim, ctx, fd) -> None:
    c0, t0 = time.process_time(), time.perf_counter()
    r = claim.run(ctx)
    out = {"id": claim.id, "verdict": r.verdict.value, "cpu": time.process_time() - c0,
           "wall": time.perf_counter() - t0}
    os.write(fd, json.dumps(out).encode())
    os._exit(0)


def main() -> None:
    args = sys.argv[1:]
    ctx = RunContext("full" if "--full" in args else "quick")
    only = args[args.index("--only") + 1] if "--only" in args else "crh."
    claims = [c for c in all_claims() if c.family == "crh" and only in c.id]
    rows = []
    print(f"{'claim':<48} {'verdict':<10} {'cpu s':>7} {'wall s':>7}")
    for c in claims:
        r_fd, w_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r_fd)
            _child(c, ctx, w_fd)
        os.close(w_fd)
        data = b""
        while chunk := os.read(r_fd, 65536):
            data += chunk
        os.close(r_fd)
        os.waitpid(pid, 0)
        row = json.loads(data)
        rows.append(row)
        print(f"{row['id']:<48} {row['verdict']:<10} {row['cpu']:7.2f} {row['wall']:7.2f}", flush=True)
    print(f"{'total (' + ctx.profile + ', isolated)':<48} {'':<10} {sum(r['cpu'] for r in rows):7.2f} "
          f"{sum(r['wall'] for r in rows):7.2f}")
    if "--json" in args:
        with open(args[args.index("--json") + 1], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
