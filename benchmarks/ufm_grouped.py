"""Benchmark of the general UFM engine on imbalanced counts with grouping of exchangeable classes
(docs/ufm_general.md, "Grouping exchangeable classes"): ``ncproofs solve ufm --loss ce --counts ... --json`` run
as a subprocess under /usr/bin/time (wall seconds, CPU seconds, peak RSS), on
- a long-tail profile over K = 1000 classes (n_c = floor(100 * 100^(-c/999)): 100 distinct counts), and
- with --zipf, a Zipf profile over K = 10 000 classes (n_c = max(1, floor(20000 / (c + 1))): ~280 distinct counts),
- with --bias, the k = 200 long tail n_c = max(1, floor(100 * 0.98^c)) (84 distinct counts) with a bias penalty,
  lw = lh = 1e-3, --lambda-b 0.01 (docs/benchmarks.md, "solve ufm --rigorous").

Run: PYTHONPATH=. python benchmarks/ufm_grouped.py [--zipf] [--bias] [--only-bias] [--repeat 3] [--out FILE]
Exit status 0 when every run's optimal value is VERIFIED.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.results_io import write_results  # noqa: E402
from theory.scl import longtail_counts  # noqa: E402


def zipf_counts(K: int, top: int) -> list[int]:
    return [max(1, top // (c + 1)) for c in range(K)]


def run_once(counts: list[int], lam: float, d: int, lb: float = 0.0) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        cmd = [sys.executable, "-m", "proofs_check.cli", "solve", "ufm", "--loss", "ce", "--counts",
               ",".join(map(str, counts)), "--dim", str(d), "--lambda-w", str(lam), "--lambda-h", str(lam),
               "--starts", "1", "--json"] + (["--lambda-b", str(lb)] if lb > 0 else [])
        timer = shutil.which("time") or "/usr/bin/time"
        with open(out, "w") as f:
            proc = subprocess.run([timer, "-v", *cmd], stdout=f, stderr=subprocess.PIPE, text=True, timeout=900)
        rep = json.load(open(out))
    err = proc.stderr

    def grab(pat, conv=float):
        m = re.search(pat, err)
        return conv(m.group(1)) if m else None

    wall = grab(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([0-9:.]+)", str)
    if wall is not None:
        parts = [float(x) for x in wall.split(":")]
        wall = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    cpu = (grab(r"User time \(seconds\): ([0-9.]+)") or 0.0) + (grab(r"System time \(seconds\): ([0-9.]+)") or 0.0)
    val = next(c for c in rep["claims"] if c["id"] == "optimal-value")
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": (grab(r"Maximum resident set size \(kbytes\): ([0-9]+)") or 0) / 1024,
            "verdict": val["verdict"], "value": rep["solution"]["value"], "gap": rep["certificate"]["gap"],
            "groups": rep["certificate"].get("groups"), "minority": (rep["geometry"] or {}).get("minority"),
            "rank": (rep["solution"] or {}).get("rank"), "solver_s": (rep["solution"] or {}).get("seconds"),
            "solver_message": ((rep.get("routes") or {}).get("factored") or {}).get("message"),
            "claims": {c["id"]: c["verdict"] for c in rep["claims"]}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zipf", action="store_true", help="also the Zipf profile over 10 000 classes")
    ap.add_argument("--bias", action="store_true", help="also the k = 200 long tail with --lambda-b 0.01")
    ap.add_argument("--only-bias", action="store_true", help="only the k = 200 long tail with --lambda-b 0.01")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    lt = list(longtail_counts(1000, 100, 100.0))
    # lambda = 1e-3 is the zero phase for this profile (Z = 0, prior-fitting bias); 2e-4 and 1e-5 are not
    cases = [] if args.only_bias else [(f"longtail K=1000 majority 100 ratio 100, lambda {lam:g}", lt, lam, 1000, 0.0)
                                       for lam in (1e-3, 2e-4, 1e-5)]
    if args.zipf and not args.only_bias:
        cases += [(f"zipf K=10000 top 20000, lambda {lam:g}", zipf_counts(10_000, 20_000), lam, 10_000, 0.0)
                  for lam in (2e-4, 1e-5)]
    if args.bias or args.only_bias:
        lt200 = [max(1, math.floor(100 * 0.98 ** c)) for c in range(200)]
        cases += [("longtail k=200 100 * 0.98^c, lambda 1e-3, lambda_b 0.01", lt200, 1e-3, 200, 0.01)]
    rows = []
    for name, counts, lam, d, lb in cases:
        runs = [run_once(counts, lam, d, lb) for _ in range(args.repeat)]
        row = {"case": name, "K": len(counts), "N": sum(counts), "distinct_counts": len(set(counts)), "lambda": lam,
               "lambda_b": lb,
               "wall_best": min(r["wall_s"] for r in runs), "wall_median": statistics.median(r["wall_s"] for r in runs),
               "cpu_best": min(r["cpu_s"] for r in runs), "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
               "verdicts": [r["verdict"] for r in runs], "value": runs[0]["value"], "gap": runs[0]["gap"],
               "groups": runs[0]["groups"], "minority": runs[0]["minority"], "rank": runs[0]["rank"],
               "solver_s_best": min(r["solver_s"] or math.inf for r in runs), "solver_message": runs[0]["solver_message"],
               "claims": runs[0]["claims"]}
        rows.append(row)
        print(f"{name}: {row['verdicts']} wall {row['wall_best']:.1f} s (median {row['wall_median']:.1f}), cpu "
              f"{row['cpu_best']:.1f} s, peak {row['peak_rss_mb']:.0f} MB, value {row['value']:.10g}, gap "
              f"{row['gap']:.2e}, groups {row['groups']}, rank {row['rank']}, solver {row['solver_s_best']:.1f} s "
              f"({row['solver_message']})")
    write_results({"benchmark": "ufm_grouped", "load_average": os.getloadavg(), "nproc": os.cpu_count(),
                   "rows": rows}, args.out, prefix="ufm_grouped-")
    return 0 if all(v == "VERIFIED" for r in rows for v in r["verdicts"]) else 1


if __name__ == "__main__":
    sys.exit(main())
