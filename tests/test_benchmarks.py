"""Smoke test of the benchmark harness (structure only: speed is never asserted in tests)."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_benchmark_quick_runs_and_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "run.py"), "--quick", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert data["gemm_gflops_float64"] > 0
    methods = {row["method"] for row in data["rows"]}
    assert {"ncproofs factored (starts=1)", "plain scipy L-BFGS (defaults)", "plain scipy L-BFGS (tight tolerances)", "peer-style GD (momentum 0.9, lr 0.1)"} <= methods
    for row in data["rows"]:
        if row["method"].startswith("certificate"):
            assert row["reached"]  # the closed-form certificate closes the gap on every instance
        if row["method"].startswith("ncproofs"):
            assert row["reached"] and row["gap"] <= 1e-6
