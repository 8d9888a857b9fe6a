"""CPU and wall time of the multi-seed CRH claims of issue 25 (quick and full profile).

    PYTHONPATH=. python benchmarks/crh_claims.py [--full]

Runs each claim once in this process, in registry order, so the cached experiments are shared as in a
serial ``ncproofs run --only crh`` (the first claim of a group pays for its experiment). Prints the
verdict, the CPU seconds of the process and the wall seconds. Numbers for docs/benchmarks.md
("CRH multi-seed claims"). Not run by the tests.
"""

import sys
import time

from proofs_check.claims import crh as C
from proofs_check.core import RunContext

IDS = ("crh.magnitude.first-moment", "crh.magnitude.cauchy-schwarz", "crh.magnitude.gamma-exponent",
       "crh.magnitude.gamma-exponent-corrected", "crh.layers.later-better", "crh.lazy.no-alignment",
       "crh.lazy.no-alignment-corrected", "crh.noise-injection.rga", "crh.identity.transfer-inverse",
       "crh.linear-regression.normalisation", "crh.linear-regression.normalisation-corrected")


def main() -> None:
    ctx = RunContext("full" if "--full" in sys.argv else "quick")
    claims = [c for c in C.CLAIMS if c.id in IDS]
    cpu_total = wall_total = 0.0
    print(f"{'claim':<48} {'verdict':<10} {'cpu s':>7} {'wall s':>7}")
    for c in claims:
        t0, c0 = time.perf_counter(), time.process_time()
        r = c.run(ctx)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        cpu_total += cpu
        wall_total += wall
        print(f"{c.id:<48} {r.verdict.value:<10} {cpu:7.2f} {wall:7.2f}")
    print(f"{'total (' + ctx.profile + ')':<48} {'':<10} {cpu_total:7.2f} {wall_total:7.2f}")


if __name__ == "__main__":
    main()
