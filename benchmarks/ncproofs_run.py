#!/usr/bin/env python
"""Benchmark of ``ncproofs run`` (quick profile by default): wall and CPU time, by ``--jobs``, cache cold/warm.

    python benchmarks/ncproofs_run.py [--jobs auto,1] [--full] [--repeat 1] [--tree DIR ...] [--top 15]
                                      [--out results.json]

For every ``--tree`` (default this checkout; another one, e.g. ``git archive OLD | tar -x -C DIR``, measures
a before/after on the same machine at the same time: the trees alternate) and ``--jobs`` value, ``--repeat``
times: one run with an empty cache directory (cold: every symbolic derivation is computed and stored) and one
with the cache it left (warm), each as its own process started in the tree (``python -m proofs_check.cli run
--quiet --report '' --json <tmp>``, so that tree's packages are imported). Reported per run: wall seconds,
CPU seconds of the process and its workers (user + system, ``RUSAGE_CHILDREN``), the 1-minute load
average before and after (``/proc/loadavg``: a loaded machine inflates wall times, not CPU times), the
verdict counts and the overall verdict, the claims' CPU seconds from the report (``cpu_seconds``) and
the ``--top`` slowest claims, and per configuration the least and the median wall. The verdicts of all runs must
be the same (printed, and ``same_verdicts`` in the JSON). Speed is measured here, never asserted in tests; results go to JSON (default
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


def one_run(jobs: str, cache_dir: str, full: bool, top: int, tree: str = ROOT) -> dict:
    """One ``ncproofs run`` in a child process started in ``tree``; its times, load and verdicts."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "run.json")
        cmd = [sys.executable, "-m", "proofs_check.cli", "run", "--quiet", "--report", "", "--json", report,
               "--jobs", jobs] + (["--full"] if full else [])
        env = dict(os.environ, NCPROOFS_CACHE_DIR=cache_dir)
        load0 = loadavg()
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        load1 = loadavg()
        doc = json.load(open(report)) if os.path.exists(report) else {}
    claims = doc.get("claims", [])
    ranked = sorted(claims, key=lambda c: -(c.get("cpu_seconds") or 0.0))[:top]
    return {"tree": tree, "jobs_option": jobs, "jobs": doc.get("jobs"), "exit_status": proc.returncode,
            "reported_s": doc.get("seconds"),
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
    ap.add_argument("--repeat", type=int, default=1, help="cold + warm pairs per tree and --jobs value (default 1)")
    ap.add_argument("--tree", action="append", default=None,
                    help="a checkout to run (repeatable; default this one); the trees alternate")
    ap.add_argument("--top", type=int, default=15, help="slowest claims listed per run (default 15)")
    ap.add_argument("--out", default=None, help="results JSON path")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    trees = [os.path.abspath(t) for t in (args.tree or [ROOT])]
    runs = []
    for jobs in [j.strip() for j in args.jobs.split(",") if j.strip()]:
        for rep in range(args.repeat):
            for tree in trees:
                with tempfile.TemporaryDirectory() as cache:
                    for state in ("cold", "warm"):
                        r = one_run(jobs, cache, args.full, args.top, tree)
                        r["cache"], r["repeat"] = state, rep
                        runs.append(r)
                        print(f"{os.path.basename(tree) or tree} --jobs {jobs:<4} cache {state}: {r['wall_s']:6.2f} s wall "
                              f"(run {r['reported_s']} s), {r['cpu_s']:6.2f} s CPU (claims {r['claims_cpu_s']}), "
                              f"{r['jobs']} process(es), load {r['load_before']} -> {r['load_after']}, "
                              f"{r['overall_verdict']} {r['counts']}, {r['cached']} cached")
    summary = []
    for tree in trees:
        for jobs in dict.fromkeys(r["jobs_option"] for r in runs):
            for state in ("cold", "warm"):
                walls = sorted(r["wall_s"] for r in runs if (r["tree"], r["jobs_option"], r["cache"]) == (tree, jobs, state))
                if walls:
                    summary.append({"tree": tree, "jobs_option": jobs, "cache": state, "runs": len(walls),
                                    "least_wall_s": walls[0], "median_wall_s": walls[len(walls) // 2]})
                    print(f"{tree} --jobs {jobs} {state}: least {walls[0]:.2f} s, median {walls[len(walls) // 2]:.2f} s "
                          f"wall over {len(walls)}")
    first = runs[0]
    print(f"slowest claims (--jobs {first['jobs_option']}, cold):")
    for c in first["top"]:  # reports before cpu_seconds existed have none
        print(f"  {c['cpu_s'] if c['cpu_s'] is not None else '-':>7} CPU s  {c['wall_s']:7.3f} s  {c['id']}")
    same = all(r["verdicts"] == first["verdicts"] for r in runs)
    print("same verdicts in every run:", same)
    write_results({"benchmark": "ncproofs run", "profile": "full" if args.full else "quick", "cpus": os.cpu_count(),
                   "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                   "same_verdicts": same, "summary": summary, "runs": runs}, args.out, prefix="ncproofs-run-")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
