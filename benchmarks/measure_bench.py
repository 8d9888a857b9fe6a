"""Benchmark of ``ncproofs measure``: peak resident memory and time against a one-shot numpy computation.

    python benchmarks/measure_bench.py [--quick | --large-k] [--dir DIR] [--keep] [--out F.json]

Default: N = 1 000 000 samples, d = 256, K = 100 classes, float32 ``.npy`` features (1.02 GB) with
int64 labels, classifier W and bias (so NC3/NC4 are computed too). ``--large-k``: K = 50 000
classes at d = 1024 (N = 100 000), the tiled K x K path (without W: NC4 would cost 2 N d K = 1e13 flops). ``--quick``: N = 100 000, d = 64, K = 10.

Each method runs in its own child process (started by ``os.wait4`` so that the child's peak resident
set size, ``ru_maxrss``, is read exactly):

- ``ncproofs measure``: the CLI as a user runs it (``ncproofs measure F.npy --labels Y.npy --weights
  W.npy --bias B.npy --json``): two streaming passes reading the file with ``os.pread`` in chunks.
- ``numpy one-shot``: the straightforward implementation: ``np.load`` the whole file, convert to
  float64, class means by boolean masks, ``dev = H - mu[y]``, ``Sigma_W = dev.T @ dev / N``,
  pinv, dense K x K Grams, NC4 from the N x K logits and distances (``one_shot`` below). The time is
  reported with and without the load.

The peak RSS of the child includes the interpreter and the imports; an ``import only`` child
(``ncproofs --help``) gives that floor. Results go to stdout (Markdown) and, with ``--out``, JSON.
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


def write_data(folder: Path, N: int, d: int, K: int, seed: int = 0) -> dict:
    """Features (float32 .npy, written in chunks: never all in memory), labels, W, b."""
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(K, d)).astype(np.float32) * 2.0
    f = folder / "features.npy"
    header = {"descr": "<f4", "fortran_order": False, "shape": (N, d)}
    y = np.empty(N, dtype=np.int64)
    with open(f, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        step = max(1, 20_000_000 // (4 * d))
        for s in range(0, N, step):
            e = min(N, s + step)
            yc = (np.arange(s, e) * 7919) % K  # every class present, interleaved
            y[s:e] = yc
            X = means[yc] + rng.standard_normal(size=(e - s, d), dtype=np.float32) * 0.5
            fh.write(np.ascontiguousarray(X, dtype="<f4").tobytes())
    np.save(folder / "labels.npy", y)
    np.save(folder / "weights.npy", means.astype(np.float64) + 0.1 * rng.normal(size=(K, d)))
    np.save(folder / "bias.npy", 0.01 * rng.normal(size=K))
    return {"features": f, "labels": folder / "labels.npy", "weights": folder / "weights.npy",
            "bias": folder / "bias.npy", "bytes": f.stat().st_size}


def one_shot(paths: dict) -> dict:
    """The straightforward numpy implementation on data loaded into memory (docs/metrics.md)."""
    t0 = time.perf_counter()
    H = np.load(paths["features"]).astype(np.float64)
    y = np.load(paths["labels"])
    W = np.load(paths["weights"])
    b = np.load(paths["bias"])
    t1 = time.perf_counter()
    N, d = H.shape
    K = int(y.max()) + 1
    counts = np.bincount(y, minlength=K)
    mu = np.stack([H[y == c].mean(axis=0) for c in range(K)])
    mu_G = mu.mean(axis=0)
    M = mu - mu_G
    dev = H - mu[y]
    Sw = dev.T @ dev / N
    Sb = M.T @ M / K
    out = {"nc1": float(np.trace(Sw @ np.linalg.pinv(Sb, rcond=1e-12))) / K,
           "nc1_trace": float(np.trace(Sw) / np.trace(Sb))}
    sig2 = np.bincount(y, weights=np.einsum("ij,ij->i", dev, dev), minlength=K) / counts
    del dev
    G = M @ M.T
    r = np.sqrt(np.diag(G))
    D2 = r[:, None] ** 2 + r[None, :] ** 2 - 2 * G
    iu = np.triu_indices(K, 1)
    V = (sig2[:, None] + sig2[None, :])[iu] / (2 * D2[iu])
    out.update(cdnv_mean=float(V.mean()), cdnv_max=float(V.max()), equinorm=float(r.std() / r.mean()))
    C = (G / np.outer(r, r))[iu]
    out.update(equiangularity=float(C.std()), max_equiangularity=float(np.abs(C + 1 / (K - 1)).mean()))
    E = np.eye(K) - 1.0 / K
    out["gram_distance_etf"] = float(np.linalg.norm(G / np.linalg.norm(G) - E / np.linalg.norm(E)))
    U = mu @ mu.T
    out["gram_distance_of"] = float(np.linalg.norm(U / np.linalg.norm(U) - np.eye(K) / np.sqrt(K)))
    out["nc3"] = float(np.linalg.norm(W / np.linalg.norm(W) - M / np.linalg.norm(M)))
    logits = H @ W.T + b
    dist = -2 * H @ mu.T + np.sum(mu * mu, axis=1)
    out["nc4"] = float(np.mean(np.argmax(logits, axis=1) != np.argmin(dist, axis=1)))
    t2 = time.perf_counter()
    return {"metrics": out, "load_s": t1 - t0, "compute_s": t2 - t1, "total_s": t2 - t0}


_RSS_WRAPPER = r"""
import os, sys, json, time
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, ru = os.wait4(pid, 0)
sys.stderr.write(json.dumps({"maxrss_mb": ru.ru_maxrss / 1024.0, "wall_s": time.perf_counter() - t0,
                             "status": status}) + "\n")
"""


def run_measured(argv: list[str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", _RSS_WRAPPER, *argv], capture_output=True, text=True)
    lines = proc.stderr.strip().splitlines()
    info = json.loads(lines[-1])
    info["stdout"] = proc.stdout
    info["stderr"] = "\n".join(lines[:-1])
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--large-k", action="store_true")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.quick:
        N, d, K = 100_000, 64, 10
    elif args.large_k:
        N, d, K = 100_000, 1024, 50_000
    else:
        N, d, K = 1_000_000, 256, 100
    folder = Path(args.dir or tempfile.mkdtemp(prefix="measure_bench_"))
    folder.mkdir(parents=True, exist_ok=True)
    paths = write_data(folder, N, d, K)
    ncp = [sys.executable, "-m", "proofs_check"]
    rows = []
    floor = run_measured([*ncp, "--help"])
    rows.append({"method": "import only (ncproofs --help)", "maxrss_mb": floor["maxrss_mb"], "wall_s": floor["wall_s"]})
    cmd = [*ncp, "measure", str(paths["features"]), "--labels", str(paths["labels"]), "--json", "--time-limit", "3600"]
    if not args.large_k:  # NC4 at K = 50 000 would be 2 N d K = 1e13 flops: measured without W
        cmd += ["--weights", str(paths["weights"]), "--bias", str(paths["bias"])]
    ours = run_measured(cmd)
    if ours["status"] != 0:
        print(ours["stderr"], file=sys.stderr)
        return 1
    rep = json.loads(ours["stdout"])
    rows.append({"method": "ncproofs measure (streaming, 2 passes)", "maxrss_mb": ours["maxrss_mb"],
                 "wall_s": ours["wall_s"], "inside_s": rep["seconds"], "timing": rep["timing"]})
    base = None
    if not args.no_baseline and not args.large_k:
        code = (f"import sys, json; sys.path.insert(0, {str(HERE)!r}); import measure_bench as B; "
                f"print(json.dumps(B.one_shot({{k: v for k, v in json.loads(sys.argv[1]).items()}})))")
        b = run_measured([sys.executable, "-c", code, json.dumps({k: str(v) for k, v in paths.items()})])
        if b["status"] == 0:
            base = json.loads(b["stdout"])
            rows.append({"method": "numpy one-shot (np.load + dense)", "maxrss_mb": b["maxrss_mb"], "wall_s": b["wall_s"],
                         "inside_s": base["total_s"], "load_s": base["load_s"], "compute_s": base["compute_s"]})
            worst = max(abs(rep["metrics"][k] - v) / max(abs(v), 1e-300) for k, v in base["metrics"].items())
            rows.append({"method": "max relative difference of the metrics", "value": worst})
        else:
            rows.append({"method": "numpy one-shot", "failed": b["stderr"][-300:], "maxrss_mb": b["maxrss_mb"]})
    result = {"N": N, "d": d, "K": K, "file_bytes": paths["bytes"], "cpu_count": os.cpu_count(), "rows": rows}
    print(f"N = {N}, d = {d}, K = {K}, features file {paths['bytes'] / 1e9:.3g} GB (float32 .npy)\n")
    print("| method | peak RSS (MB) | wall s (process) | s inside |")
    print("|---|---|---|---|")
    for r in rows:
        if "value" in r:
            print(f"| {r['method']} | {r['value']:.2g} | | |")
            continue
        print(f"| {r['method']} | {r.get('maxrss_mb', float('nan')):.0f} | {r.get('wall_s', float('nan')):.2f} | "
              f"{r.get('inside_s', float('nan')):.2f} |")
    if base:
        print(f"\nnumpy one-shot: load {base['load_s']:.2f} s + compute {base['compute_s']:.2f} s; "
              f"measure passes: {rep['timing']}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
    if not args.keep and args.dir is None:
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
