"""Same input, same verdict at any machine load (issue 28, docs/ufm_general.md "Budgets"), and the cost of the
geometry certificate (docs/ufm_general.md, "Geometry certificate").

1. Determinism: ``ncproofs solve ufm --loss ce`` on the Zipf profile over K = 10 000 classes (n_c = max(1,
   floor(20000/(c+1))), lw = lh = 2e-4) run quietly and under a CPU hog on every core (busy processes started and
   stopped by this script); the verdicts, the value, the proven bound and the evaluation count must be identical.
2. Geometry overhead: imbalanced instances solved through ``check_general`` with and without the geometry
   certificate (``SG.minimiser_enclosure`` + ``SG.geometry_enclosure`` timed separately), CPU seconds.

Run: PYTHONPATH=. python benchmarks/ufm_budget.py [--zipf] [--no-hog] [--out FILE]
Exit status 0 when every determinism pair agrees.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.results_io import write_results  # noqa: E402


def _spin(stop):
    x = 0
    while not stop.is_set():
        for _ in range(100000):
            x += 1


class Hog:
    def __init__(self, n=None):
        self.n = n or max(1, len(os.sched_getaffinity(0)))

    def __enter__(self):
        ctx = mp.get_context("fork")
        self.stop = ctx.Event()
        self.procs = [ctx.Process(target=_spin, args=(self.stop,), daemon=True) for _ in range(self.n)]
        for p in self.procs:
            p.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for p in self.procs:
            p.join(5)
            if p.is_alive():
                p.terminate()
        return False


def solve_cli(counts, lam, d) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        cmd = [sys.executable, "-m", "proofs_check.cli", "solve", "ufm", "--loss", "ce", "--counts",
               ",".join(map(str, counts)), "--dim", str(d), "--lambda-w", str(lam), "--lambda-h", str(lam), "--json"]
        t = time.perf_counter()
        with open(out, "w") as f:
            subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE, text=True, timeout=1800)
        wall = time.perf_counter() - t
        rep = json.load(open(out))
    fac = (rep.get("routes") or {}).get("factored") or {}
    return {"wall_s": wall, "claims": {c["id"]: c["verdict"] for c in rep["claims"]},
            "value": (rep.get("solution") or {}).get("value"), "lower_bound": (rep.get("certificate") or {}).get(
                "lower_bound"), "evaluations": fac.get("evaluations"), "message": fac.get("message"),
            "load_average": os.getloadavg()}


def determinism(name, counts, lam, d, hog: bool) -> dict:
    quiet = solve_cli(counts, lam, d)
    row = {"case": name, "quiet": quiet}
    if hog:
        with Hog():
            row["hog"] = solve_cli(counts, lam, d)
        keys = ("claims", "value", "lower_bound", "evaluations")
        row["identical"] = all(quiet[k] == row["hog"][k] for k in keys)
    print(json.dumps(row, indent=1))
    return row


def geometry_overhead() -> list[dict]:
    from proofs_check.claims.ufm import check_general
    from solvers import losses as L
    from solvers import ufm_general as SG
    from theory.scl import longtail_counts

    rows = []
    cases = [("ce 6,6,2,1", "ce", [6, 6, 2, 1], 5e-3, {}), ("mse 5,2,1", "mse", [5, 2, 1], 5e-3, {}),
             ("ce 10,10,1,1", "ce", [10, 10, 1, 1], 5e-3, {}),
             ("ce long tail K=1000 (majority 100, ratio 100), lambda 1e-5", "ce", list(longtail_counts(1000, 100, 100.0)),
              1e-5, {})]
    for name, loss, counts, lam, kw in cases:
        p = SG.classification(L.make_loss(loss, len(counts), **kw), counts, len(counts), lam, lam)
        c0 = time.process_time()
        rep = check_general(p, starts=1).to_dict()
        total = time.process_time() - c0
        # the geometry certificate alone, on the reported candidate's dual point
        lay = SG.class_layout(p)
        c1 = time.process_time()
        if lay is not None and rep["solution"].get("method", "").startswith("factored (grouped"):
            sol = SG.solve_grouped(p, lay, starts=1)
            pt = SG.clean_grouped(p, sol.variables["point"], lay)
            cert = SG.certificate_grouped(p, pt, lay)
            value_s = time.process_time() - c1
            c2 = time.process_time()
            enc = SG.minimiser_enclosure(p, SG.dual_columns_grouped(p, pt, lay, cert), cert.lower_bound, cert.upper)
        else:
            sol = SG.solve_factored(p, rank=p.K, starts=1) if SG.mse_imbalanced_closed_form(p) is None else None
            cf = SG.mse_imbalanced_closed_form(p)
            X, b = (cf["X"], cf["b"]) if cf else (sol.variables["X"], sol.variables["b"])
            cert = SG.certificate(p, X, b, grads=cf["grads"] if cf else None)
            value_s = time.process_time() - c1
            c2 = time.process_time()
            enc = SG.minimiser_enclosure(p, SG.dual_columns(p, X, b, cert), cert.lower_bound, cert.upper)
        if enc["ok"]:
            SG.geometry_enclosure(p, enc)
        geo_s = time.process_time() - c2
        row = {"case": name, "check_general_cpu_s": total, "value_certificate_cpu_s": value_s,
               "geometry_certificate_cpu_s": geo_s, "overhead_ratio": geo_s / max(value_s, 1e-9),
               "claims": {c["id"]: c["verdict"] for c in rep["claims"]},
               "cosine_halfwidth": (rep["geometry"].get("geometry_enclosure") or {}).get("class_mean_cosines_halfwidth"),
               "load_average": os.getloadavg()}
        print(json.dumps(row))
        rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zipf", action="store_true", help="the Zipf K = 10 000 determinism pair (minutes)")
    ap.add_argument("--no-hog", action="store_true", help="only the quiet runs")
    ap.add_argument("--no-geometry", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from theory.scl import longtail_counts

    rows = [determinism("long tail K=200 (majority 50, ratio 50), lambda 1e-3", list(longtail_counts(200, 50, 50.0)),
                        1e-3, 200, not args.no_hog)]
    if args.zipf:
        zipf = [max(1, 20000 // (c + 1)) for c in range(10_000)]
        rows.append(determinism("zipf K=10000 top 20000, lambda 2e-4", zipf, 2e-4, 10_000, not args.no_hog))
    geo = [] if args.no_geometry else geometry_overhead()
    write_results({"benchmark": "ufm_budget", "nproc": os.cpu_count(), "determinism": rows, "geometry": geo},
                  args.out, prefix="ufm_budget-")
    return 0 if all(r.get("identical", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
