"""Throughput of ``ncproofs measure`` (one pass, docs/measure.md) against a plain chunked numpy implementation.

    python benchmarks/measure_throughput.py [--rows N] [--dim D] [--classes 10,100,1000] [--reps R]
                                            [--dir DIR] [--keep] [--out F.json] [--quick]

One float32 ``.npy`` feature file of N x D (default N = 600 000, D = 512: 1.23 GB) is written once
(in chunks; every row is a class mean of the K = max(--classes) classes plus noise) with one label
file per K (labels of the largest K reduced modulo each smaller K, so every class is present). Then,
interleaved, R times:

- ``cat F > /dev/null``: the speed at which this machine reads the file. The file was just written
  and nothing is dropped, so this is the **page-cache** speed (memory bandwidth through a pipe), not
  the disk's.
- ``os.preadv`` of 8 MiB chunks into one buffer (how measure reads), also from the page cache.
- ``dd iflag=direct`` (O_DIRECT, Linux): the file read past the page cache, i.e. the disk's speed
  (skipped where O_DIRECT is refused).
- ``ncproofs measure`` (``proofs_check.measure.measure``: the CLI's code path; labels only, no
  weights) at its defaults (workers = the CPUs available; ``--passes auto``: one pass, or the projected route
  of two passes for K <= about d/4.5, docs/measure.md), and with ``--one-pass`` also ``--passes 1`` there.
- ``--cold``: the page cache is dropped before each measure and baseline run, so both read from the disk.
- ``numpy baseline``: what a user writes (:func:`baseline`): ``np.load(mmap_mode="r")``, two chunked
  passes of 65 536 rows in float64, class sums by ``np.add.at``, the scatter about the pass-1 means
  by ``dev.T @ dev`` (numpy's default threaded BLAS), then NC1 and the trace ratio from the d x d
  matrices. It computes fewer metrics than measure (no CDNV, no K x K pairs).

``--floor`` adds, in this process with one BLAS thread: the float64 syrk of one 2048 x D chunk and a loop of
``ClassStats.update`` over in-memory float32 chunks (MB of float32 rows per CPU second: what one core can do
without reading), and the same loop with the float32 syrk for comparison of speed (not used: not exact enough).

Reported per run (imports done before the clock starts): MB/s of the file (bytes / wall seconds), the CPU
seconds of the process (all threads), MB per CPU second,
the 1-minute load average at the start and the end, the ratio to ``cat`` and to the baseline, and the
relative difference of NC1 and of the trace ratio between the two. Speed is never asserted in tests.
The files are deleted at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from theory.metrics import projected_route_cheaper  # noqa: E402


def write_data(folder: Path, N: int, d: int, classes: list[int], seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    Kmax = max(classes)
    means = (rng.normal(size=(Kmax, d)) * 2.0).astype(np.float32)
    f = folder / f"features_{N}x{d}.npy"
    y = (np.arange(N, dtype=np.int64) * 7919) % Kmax
    with open(f, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f4", "fortran_order": False, "shape": (N, d)})
        step = max(1, 16_000_000 // (4 * d))
        for s in range(0, N, step):
            e = min(N, s + step)
            X = means[y[s:e]] + rng.standard_normal(size=(e - s, d), dtype=np.float32) * 0.5
            fh.write(X.astype("<f4", copy=False).tobytes())
    labels = {}
    for K in classes:
        p = folder / f"labels_K{K}.npy"
        np.save(p, y % K)
        labels[K] = p
    return {"features": f, "labels": labels, "bytes": f.stat().st_size}


def baseline(features, labels, chunk: int = 65536) -> dict:
    """A plain chunked numpy implementation of NC1 (two passes, np.add.at, threaded BLAS as numpy ships it)."""
    X = np.load(features, mmap_mode="r")
    y = np.load(labels)
    N, d = X.shape
    K = int(y.max()) + 1
    counts = np.bincount(y, minlength=K)
    sums = np.zeros((K, d))
    for s in range(0, N, chunk):
        Xc = np.asarray(X[s:s + chunk], dtype=np.float64)
        np.add.at(sums, y[s:s + chunk], Xc)
    mu = sums / counts[:, None]
    Sw = np.zeros((d, d))
    for s in range(0, N, chunk):
        Xc = np.asarray(X[s:s + chunk], dtype=np.float64)
        dev = Xc - mu[y[s:s + chunk]]
        Sw += dev.T @ dev
    Sw /= N
    M = mu - mu.mean(axis=0)
    Sb = M.T @ M / K
    nc1 = float(np.trace(Sw @ np.linalg.pinv(Sb, rcond=1e-12))) / K
    return {"nc1": nc1, "nc1_trace": float(np.trace(Sw) / np.trace(Sb))}


def _child(kind: str, features: str, labels: str) -> dict:
    """One timed run in this (child) process."""
    if kind.startswith("measure"):
        from proofs_check.measure import measure  # imported before the clock starts (as numpy is for both)
    load0 = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    if kind.startswith("measure"):
        rep = measure(features, labels, time_limit=None, passes=1 if kind == "measure1" else "auto")
        m = {"nc1": rep["metrics"]["nc1"], "nc1_trace": rep["metrics"]["nc1_trace"]}
        extra = {"passes": rep["instance"]["passes"], "workers": rep["instance"]["workers"],
                 "batch_size": rep["instance"]["batch_size"]}
    else:
        m = baseline(features, labels)
        extra = {}
    return {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "load_start": load0,
            "load_end": os.getloadavg()[0], "metrics": m, **extra}


def run_child(kind: str, features: Path, labels: Path) -> dict:
    code = (f"import sys, json; sys.path.insert(0, {str(HERE)!r}); sys.path.insert(0, {str(HERE.parent)!r}); "
            "import measure_throughput as T; print(json.dumps(T._child(*sys.argv[1:])))")
    proc = subprocess.run([sys.executable, "-c", code, kind, str(features), str(labels)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def drop_page_cache() -> None:
    """Empty Linux's page cache (root only), so the next read comes from the disk."""
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as fh:
        fh.write("1\n")


def time_cat(path: Path) -> dict:
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    r0 = os.times()
    with open(os.devnull, "wb") as null:
        subprocess.run(["cat", str(path)], stdout=null, check=True)
    r1 = os.times()
    return {"wall_s": time.perf_counter() - t0, "cpu_s": (r1.children_user - r0.children_user)
            + (r1.children_system - r0.children_system), "load_start": load0, "load_end": os.getloadavg()[0]}


def time_pread(path: Path, chunk: int = 1 << 23) -> dict:
    """Read the file with os.preadv in 8 MiB chunks into one buffer, as measure's reader does (page cache)."""
    load0 = os.getloadavg()[0]
    buf = bytearray(chunk)
    view = memoryview(buf)
    t0, c0 = time.perf_counter(), time.process_time()
    fd = os.open(path, os.O_RDONLY)
    try:
        pos, size = 0, os.fstat(fd).st_size
        while pos < size:
            n = os.preadv(fd, [view], pos)
            if n == 0:
                break
            pos += n
    finally:
        os.close(fd)
    return {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "load_start": load0,
            "load_end": os.getloadavg()[0]}


def time_direct(path: Path) -> dict | None:
    """Read the file with O_DIRECT (``dd iflag=direct``): the disk's speed, past the page cache (None if refused)."""
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=8M", "iflag=direct"], capture_output=True)
    if proc.returncode != 0:
        return None
    return {"wall_s": time.perf_counter() - t0, "cpu_s": None, "load_start": load0, "load_end": os.getloadavg()[0]}


def floor(d: int, K: int = 1000, B: int = 2048, chunks: int = 48, seed: int = 0) -> list[dict]:
    """One-core rates without reading: the float64 syrk of a chunk, the ClassStats.update loop (MB of float32
    rows per CPU second), and a float32 syrk of the same chunk (speed only)."""
    import scipy.linalg.blas as blas
    from threadpoolctl import threadpool_limits

    from theory.metrics import ClassStats

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((B * chunks, d), dtype=np.float32) + 1.0
    y = rng.integers(0, K, B * chunks)
    mb = B * d * 4 / 1e6
    rows = []
    with threadpool_limits(limits=1, user_api="blas"):
        A = X[:B].astype(np.float64)
        for name, M, syrk in (("float64 syrk of one chunk", A, blas.dsyrk), ("float32 syrk of one chunk", X[:B], blas.ssyrk)):
            C = np.zeros((d, d), dtype=M.dtype, order="F")
            C = syrk(1.0, M.T, beta=1.0, c=C, trans=0, lower=0, overwrite_c=1)
            c0 = time.process_time()
            for _ in range(chunks):
                C = syrk(1.0, M.T, beta=1.0, c=C, trans=0, lower=0, overwrite_c=1)
            cpu = (time.process_time() - c0) / chunks
            rows.append({"method": name, "B": B, "ms": 1e3 * cpu, "mb_per_cpu_s": mb / cpu})
        for K_ in sorted({10, K}):
            st = ClassStats(K_, d)
            st.update(X[:B], y[:B] % K_)
            c0 = time.process_time()
            for s in range(B, B * chunks, B):
                st.update(X[s:s + B], y[s:s + B] % K_)
            cpu = (time.process_time() - c0) / (chunks - 1)
            rows.append({"method": f"ClassStats.update loop, K = {K_}", "B": B, "ms": 1e3 * cpu, "mb_per_cpu_s": mb / cpu})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=600_000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--classes", default="10,100,1000")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--quick", action="store_true", help="N = 20 000, one repetition (a smoke run)")
    ap.add_argument("--floor", action="store_true", help="also the one-core rates without reading (see above)")
    ap.add_argument("--one-pass", action="store_true",
                    help="also measure --passes 1 where auto takes the projected route (K <= about d/4.5)")
    ap.add_argument("--cold", action="store_true",
                    help="drop the page cache before each measure and baseline run (needs root: sync; "
                         "echo 1 > /proc/sys/vm/drop_caches), so both read from the disk")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.reps = 20_000, 1
    classes = [int(k) for k in args.classes.split(",")]
    folder = Path(args.dir or tempfile.mkdtemp(prefix="measure_tp_"))
    folder.mkdir(parents=True, exist_ok=True)
    with open("/proc/loadavg") if os.path.exists("/proc/loadavg") else open(os.devnull) as fh:
        print(f"load average (1, 5, 15 min) at the start: {fh.read().strip() or 'n/a'}", flush=True)
    if args.floor:
        for r in floor(args.dim):
            print(json.dumps(r), flush=True)
    t0 = time.perf_counter()
    data = write_data(folder, args.rows, args.dim, classes)
    mb = data["bytes"] / 1e6
    print(f"features {data['features']}: {args.rows} x {args.dim} float32, {mb:.0f} MB (written in "
          f"{time.perf_counter() - t0:.1f} s); cpus {os.cpu_count()}", flush=True)
    rows = []
    try:
        for rep in range(args.reps):
            c = time_cat(data["features"])
            rows.append({"method": "cat (page cache)", "K": None, "rep": rep, **c, "mb_s": mb / c["wall_s"]})
            print(json.dumps(rows[-1]), flush=True)
            c = time_pread(data["features"])
            rows.append({"method": "pread 8 MiB (page cache)", "K": None, "rep": rep, **c, "mb_s": mb / c["wall_s"]})
            print(json.dumps(rows[-1]), flush=True)
            c = time_direct(data["features"])
            if c is not None:
                rows.append({"method": "dd iflag=direct (disk)", "K": None, "rep": rep, **c, "mb_s": mb / c["wall_s"]})
                print(json.dumps(rows[-1]), flush=True)
            for K in classes:
                kinds = [("measure", "ncproofs measure")]
                if args.one_pass and projected_route_cheaper(args.dim, K):
                    kinds.append(("measure1", "ncproofs measure --passes 1"))
                for kind, name in kinds:
                    if args.cold:
                        drop_page_cache()
                    ours = run_child(kind, data["features"], data["labels"][K])
                    rows.append({"method": name, "K": K, "rep": rep, **ours, "mb_s": mb / ours["wall_s"],
                                 "cold": bool(args.cold)})
                    print(json.dumps(rows[-1]), flush=True)
                if not args.no_baseline:
                    if args.cold:
                        drop_page_cache()
                    base = run_child("baseline", data["features"], data["labels"][K])
                    rows.append({"method": "numpy baseline", "K": K, "rep": rep, **base,
                                 "mb_s": mb / base["wall_s"]})
                    print(json.dumps(rows[-1]), flush=True)
    finally:
        if not args.keep:
            for p in [data["features"], *data["labels"].values()]:
                p.unlink(missing_ok=True)
            if args.dir is None:
                folder.rmdir()
    cat_best = max(r["mb_s"] for r in rows if r["method"].startswith("cat"))
    pread_best = max(r["mb_s"] for r in rows if r["method"].startswith("pread"))
    disk = [r["mb_s"] for r in rows if r["method"].startswith("dd")]
    print(f"\nread speed (page cache): cat F > /dev/null {cat_best:.0f} MB/s, os.preadv 8 MiB chunks {pread_best:.0f} MB/s"
          + (f"; disk (O_DIRECT) {max(disk):.0f} MB/s" if disk else ""))
    with open("/proc/loadavg") if os.path.exists("/proc/loadavg") else open(os.devnull) as fh:
        print(f"load average (1, 5, 15 min) at the end: {fh.read().strip() or 'n/a'}")
    print(f"\n| K | method | MB/s (wall) | CPU s | load avg start-end | / cat ({cat_best:.0f} MB/s) | / baseline | "
          "rel. diff NC1, trace |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["method"].startswith(("cat", "pread", "dd")):
            cpu = "" if r["cpu_s"] is None else f"{r['cpu_s']:.2f}"
            print(f"| | {r['method']} | {r['mb_s']:.0f} | {cpu} | "
                  f"{r['load_start']:.1f}-{r['load_end']:.1f} | | | |")
            continue
        ratio_b = diff = ""
        if r["method"].startswith("ncproofs measure"):
            b = [x for x in rows if x["method"] == "numpy baseline" and x["K"] == r["K"] and x["rep"] == r["rep"]]
            if b:
                ratio_b = f"{r['mb_s'] / b[0]['mb_s']:.1f}x"
                diff = ", ".join(f"{abs(r['metrics'][k] - b[0]['metrics'][k]) / abs(b[0]['metrics'][k]):.1e}"
                                 for k in ("nc1", "nc1_trace"))
        print(f"| {r['K']} | {r['method']} | {r['mb_s']:.0f} | {r['cpu_s']:.2f} ({mb / r['cpu_s']:.0f} MB/CPU-s) | "
              f"{r['load_start']:.1f}-"
              f"{r['load_end']:.1f} | {r['mb_s'] / cat_best:.2f} | {ratio_b} | {diff} |")
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "N": args.rows, "d": args.dim, "bytes": data["bytes"]},
                                             indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
