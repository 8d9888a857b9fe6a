"""Benchmark of ``solve --rigorous`` (ball-arithmetic certificates, docs/rigorous.md).

Run: PYTHONPATH=. python benchmarks/rigorous_bench.py [--quick] [--repeat R] [--out FILE]

For each instance: wall seconds of the plain check (``check_instance(...).to_dict()``, what ``solve`` runs)
and of ``proofs_check.rigorous.apply`` on its output (best of --repeat), the cost of each step of the
recipe (from the recipe's own timer), the rigorous bracket and its width relative to the optimum. The headline
instance is the issue's: balanced CE-UFM k = 1000, n = 5, d = 1024, lambda = 1e-5, --method closed-form.
Writes one JSON file (benchmarks/results/ by default). Needs python-flint.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.results_io import write_results  # noqa: E402


def _instances(quick: bool):
    from proofs_check.claims import feature_collapse as CF
    from proofs_check.claims import scl as CS
    from proofs_check.claims import ufm as CU
    from theory import feature_collapse as TF
    from theory import scl as TS
    from theory import ufm as TU

    ks = (10, 100) if quick else (10, 100, 1000)
    for loss in ("ce", "mse"):
        for k in ks:
            inst = TU.UFMInstance(loss, k, 5, 1024 if k == 1000 else k + 24, 1e-5, 1e-5)
            yield (f"ufm-{loss} k={k} n=5 d={inst.d} lambda=1e-5 closed-form",
                   lambda inst=inst: CU.check_instance(inst, method="closed-form").to_dict())
    inst = TS.SCLInstance((20,) * 10, 0.5, 11, False)
    yield "scl UFM balanced k=10 n=20 tau=0.5", lambda inst=inst: CS.check_instance(inst, starts=2).to_dict()
    inst = TS.SCLInstance((5, 3, 2), 0.5, 4, True)
    yield "scl UFM+ (5,3,2) tau=0.5", lambda inst=inst: CS.check_instance(inst).to_dict()
    inst = TF.FCInstance(3, 2, 3, 4, 0.05, freqs=TF.zipf_freqs(3))
    yield "feature-collapse n_c=3 L=2 s_c=3 zipf", lambda inst=inst: CF.check_instance(inst).to_dict()
    inst = TF.FCInstance(3, 2, 2, 3, 0.05, layernorm=True, freqs=(0.8, 0.2))
    yield "feature-collapse n_c=3 L=2 s_c=2 LayerNorm", lambda inst=inst: CF.check_instance(inst).to_dict()


def main(argv=None) -> int:
    from proofs_check import rigorous as PR

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small instances only")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    rows = []
    for name, run in _instances(args.quick):
        plain, rig = [], []
        for _ in range(max(1, args.repeat)):
            t0 = time.perf_counter()
            out = run()
            t1 = time.perf_counter()
            r = PR.apply(out)
            t2 = time.perf_counter()
            plain.append(t1 - t0)
            rig.append(t2 - t1)
        cert = r["certificate"]["rigorous"]
        lo = (cert.get("lower") or [None])[0]
        up = (cert.get("upper") or [None, None])[1]
        rel = (up - lo) / abs(up) if lo is not None and up is not None and up else None
        row = {"instance": name, "plain_seconds": min(plain), "rigorous_seconds": min(rig),
               "ratio": (min(plain) + min(rig)) / min(plain), "verdict": r["verdict"], "rigorous": r["rigorous"],
               "lower": lo, "upper": up, "relative_width": rel, "method": cert.get("method"),
               "steps": cert.get("seconds"), "status": cert.get("status")}
        rows.append(row)
        print(f"{name:48s} plain {row['plain_seconds']:.3f} s, +rigorous {row['rigorous_seconds']:.4f} s "
              f"(x{row['ratio']:.3f}), {row['verdict']}, rigorous={row['rigorous']}, width "
              f"{rel if rel is None else f'{rel:.1e}'}")
    # the recipes alone at k = 1000 (no solver): the class structure makes them O(1) / O(k) ball operations
    from solvers import rigorous as R

    for name, fn in (("recipe only: ufm-ce k=1000", lambda: R.ufm_from_instance("ce", 1000, 5, 1e-5, 1e-5)),
                     ("recipe only: scl UFM balanced k=1000 n=20", lambda: R.scl_structured((20,) * 1000, 0.5,
                                                                                             False, 1000)),
                     ("recipe only: scl UFM+ k=1000 (STEP 20/5)", lambda: R.scl_structured((20,) * 500 + (5,) * 500,
                                                                                            0.5, True, 1001))):
        ts = []
        for _ in range(max(1, args.repeat)):
            t0 = time.perf_counter()
            rb = fn()
            ts.append(time.perf_counter() - t0)
        d = rb.to_dict()
        print(f"{name:48s} {min(ts):.4f} s, bracket {d['lower'][0]!r} .. {d['upper'][1]!r}")
        rows.append({"instance": name, "rigorous_seconds": min(ts), "lower": d["lower"][0], "upper": d["upper"][1],
                     "steps": d["seconds"], "rigorous": True})
    # end to end on the command line (a fresh interpreter each time, imports included): the instance
    import subprocess

    cmd = [sys.executable, "-m", "proofs_check.cli", "solve", "ufm-ce", "-k", "1000", "-n", "5", "-d", "1024",
           "--lambda-w", "1e-5", "--lambda-h", "1e-5", "--method", "closed-form", "--json"]
    if not args.quick:
        cli = {}
        for label, extra in (("plain", []), ("rigorous", ["--rigorous"])):
            ts = []
            for _ in range(max(1, args.repeat)):
                t0 = time.perf_counter()
                subprocess.run(cmd + extra, check=False, capture_output=True)
                ts.append(time.perf_counter() - t0)
            cli[label] = min(ts)
        print(f"CLI solve ufm-ce k=1000 --method closed-form --json: plain {cli['plain']:.2f} s, --rigorous "
              f"{cli['rigorous']:.2f} s (x{cli['rigorous'] / cli['plain']:.2f})")
        rows.append({"instance": "CLI ufm-ce k=1000 closed-form", "plain_seconds": cli["plain"],
                     "rigorous_seconds": cli["rigorous"], "ratio": cli["rigorous"] / cli["plain"], "rigorous": True})
    write_results({"benchmark": "rigorous", "load_average": os.getloadavg(), "rows": rows}, args.out,
                  prefix="rigorous-")
    return 0 if all(r["rigorous"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
