"""Where benchmark results go: one JSON file per run, for comparison over time."""

from __future__ import annotations

import datetime as dt
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def write_results(out: dict, path: str | None, prefix: str = "") -> str:
    """Write ``out`` to ``path`` (default benchmarks/results/<prefix><timestamp>.json); print and return the path."""
    path = path or os.path.join(HERE, "results", prefix + dt.datetime.now().strftime("%Y%m%d-%H%M%S") + ".json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
    print(f"results: {path}")
    return path
