"""Smoke test of benchmarks/rigorous_bench.py (structure only; speed is never asserted)."""

import json
import os
import sys

import pytest

pytest.importorskip("flint")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def test_quick_bench_certifies_every_instance(tmp_path):
    from benchmarks import rigorous_bench

    out = tmp_path / "r.json"
    assert rigorous_bench.main(["--quick", "--repeat", "1", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert rows and all(r["rigorous"] for r in rows)
    for r in rows:
        if r.get("lower") is not None and r.get("upper") is not None:
            assert r["lower"] <= r["upper"]
