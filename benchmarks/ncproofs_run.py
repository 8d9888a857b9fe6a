#!/usr/bin/env python
"""Benchmark of ``ncproofs run`` (quick profile by default): wall and CPU time, by ``--jobs``, cache cold/warm.

    python benchmarks/ncproofs_run.py [--jobs auto,1] [--full] [--top 15] [--out results.json]

For every ``--jobs`` value: one run with an empty cache directory (cold: every symbolic derivation is
computed and stored) and one with the cache it left (warm), each as its own process
(``python -m proofs_check.cli run --quiet --report '' --json <tmp>``). Reported per run: wall seconds,
CPU seconds of the process and its workers (user + system, ``RUSAGE_CHILDREN``), the 1-minute load
average before and after (``/proc/loadavg``: a loaded machine inflates wall times, not CPU times), the
verdict counts and the overall verdict, the claims' CPU seconds from the report (``cpu_seconds``) and
the ``--top`` slowest claims. The verdicts of all runs must be the same (printed, and ``same_verdicts``
in the JSON). Speed is measured here, never asserted in tests; results go to JSON (default
benchmarks/results/ncproofs-run-<timestamp>.json).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from results_io import write_results  # noqa: E402


def loadavg() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def one_run(jobs: str, cache_dir: str, full: bool, top: int) -> dict:
    """One ``ncproofs run`` in a child process; its times, load and verdicts."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "run.json")
        cmd = [sys.executable, "-m", "proofs_check.cli", "run", "--quiet", "--report", "", "--json", report,
               "--jobs", jobs] + (["--full"] if full else [])
        env = dict(os.environ, NCPROOFS_CACHE_DIR=cache_dir)
        load0 = loadavg()
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        load1 = loadavg()
        doc = json.load(open(report)) if os.path.exists(report) else {}
    claims = doc.get("claims", [])
    ranked = sorted(claims, key=lambda c: -(c.get("cpu_seconds") or 0.0))[:top]
    return {"jobs_option": jobs, "jobs": doc.get("jobs"), "exit_status": proc.returncode,
            "stderr_tail": proc.stderr[-400:] if proc.returncode not in (0, 1) else "",
            "wall_s": round(wall, 3), "cpu_s": round((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), 3),
            "claims_cpu_s": doc.get("cpu_seconds"), "load_before": load0, "load_after": load1,
            "overall_verdict": doc.get("overall_verdict"), "counts": doc.get("counts"),
            "cached": sum(1 for c in claims if c.get("cached")),
            "verdicts": {c["id"]: c["verdict"] for c in claims},
            "top": [{"id": c["id"], "cpu_s": c.get("cpu_seconds"), "wall_s": c.get("seconds")} for c in ranked]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="auto,1", help="comma-separated --jobs values (default auto,1)")
    ap.add_argument("--full", action="store_true", help="the full profile instead of the quick one")
    ap.add_argument("--top", type=int, default=15, help="slowest claims listed per run (default 15)")
    ap.add_argument("--out", default=None, help="results JSON path")
    args = ap.parse_args(argv)
    runs = []
    for jobs in [j.strip() for j in args.jobs.split(",") if j.strip()]:
        with tempfile.TemporaryDirectory() as cache:
            for state in ("cold", "warm"):
                r = one_run(jobs, cache, args.full, args.top)
                r["cache"] = state
                runs.append(r)
                print(f"--jobs {jobs:<4} cache {state}: {r['wall_s']:6.2f} s wall, {r['cpu_s']:6.2f} s CPU "
                      f"(claims {r['claims_cpu_s']}), {r['jobs']} process(es), load {r['load_before']} -> "
                      f"{r['load_after']}, {r['overall_verdict']} {r['counts']}, {r['cached']} cached")
    first = runs[0]
    print(f"slowest claims (--jobs {first['jobs_option']}, cold):")
    for c in first["top"]:  # reports before cpu_seconds existed have none
        print(f"  {c['cpu_s'] if c['cpu_s'] is not None else '-':>7} CPU s  {c['wall_s']:7.3f} s  {c['id']}")
    same = all(r["verdicts"] == first["verdicts"] for r in runs)
    print("same verdicts in every run:", same)
    write_results({"benchmark": "ncproofs run", "profile": "full" if args.full else "quick", "cpus": os.cpu_count(),
                   "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                   "same_verdicts": same, "runs": runs}, args.out, prefix="ncproofs-run-")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
