"""benchmarks/ufm_gradient.py runs and reports both GEMM references (structure only; speed is never asserted)."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "ufm_gradient.py")


def test_gradient_benchmark_reports_the_gradient_against_both_references(tmp_path):
    out = tmp_path / "g.json"
    r = subprocess.run([sys.executable, SCRIPT, "--reps", "3", "--only", "ce-10-5-16", "--out", str(out)],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(out.read_text())["rows"]
    assert row["instance"] == "ce k=10 n=5 d=16" and row["flops_per_product"] == 2 * 10 * 16 * 50
    assert row["blocks"] == 1 and row["fused"] and row["reps"] == 3
    for name in ("gradient", "blocked (one block)", "numpy matmul", "scipy dgemm"):
        assert 0 < row[name]["best_ms"] <= row[name]["median_ms"]
    for key in ("ratio_best_matmul", "ratio_paired_median_matmul", "ratio_best_dgemm", "ratio_paired_median_dgemm"):
        assert row["gradient"][key] > 0


def test_gradient_benchmark_refuses_an_unknown_instance(tmp_path):
    r = subprocess.run([sys.executable, SCRIPT, "--only", "ce-7-7-7", "--out", str(tmp_path / "g.json")],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 2 and "--only must name one of" in r.stderr
