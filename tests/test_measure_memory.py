"""Peak resident memory of `ncproofs measure` does not grow with the file: a 410 MB float32 .npy is measured
in a child process whose peak RSS (os.wait4) stays far below the file size (slow: writes the file)."""

from __future__ import annotations

import json
import os
import sys

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "benchmarks"))

import measure_bench as B  # noqa: E402


@pytest.mark.slow
def test_peak_memory_is_independent_of_n(tmp_path):
    N, d, K = 400_000, 256, 50
    paths = B.write_data(tmp_path, N, d, K)
    assert paths["bytes"] > 400e6
    ncp = [sys.executable, "-m", "proofs_check"]
    floor = B.run_measured([*ncp, "--help"])
    ours = B.run_measured([*ncp, "measure", str(paths["features"]), "--labels", str(paths["labels"]), "--weights",
                           str(paths["weights"]), "--batch-size", "8192", "--json"])
    assert ours["status"] == 0, ours["stderr"]
    rep = json.loads(ours["stdout"])
    assert rep["samples"] == N and rep["metrics"]["nc1"] is not None
    # chunks of 8192 x 256 float64 (17 MB, a few copies) + K x d state: far below the 410 MB file
    assert ours["maxrss_mb"] - floor["maxrss_mb"] < 150, (ours["maxrss_mb"], floor["maxrss_mb"])
