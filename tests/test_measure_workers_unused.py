"""`ncproofs measure --workers W` on a route that reads on one thread (--passes 2, float32 accumulation): the report
names the unused option in `diagnostics` (it said only `instance.workers = 1`); the one-pass route uses it, and the
numbers do not depend on it."""

import numpy as np

from proofs_check import measure as M


def _file(tmp_path):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 40)
    np.savez(tmp_path / "f.npz", features=rng.normal(size=(120, 4)) + np.eye(3, 4)[y] * 3, labels=y)
    return str(tmp_path / "f.npz")


def test_two_pass_route_notes_unused_workers(tmp_path):
    rep = M.measure(_file(tmp_path), passes=2, workers=3, batch_size=16)
    assert rep["instance"]["workers"] == 1
    notes = [d for d in rep["diagnostics"] if "--workers 3 not used" in d]
    assert len(notes) == 1 and "two passes" in notes[0]


def test_one_pass_route_uses_workers_and_agrees(tmp_path):
    f = _file(tmp_path)
    one = M.measure(f, passes=1, workers=3, batch_size=16)
    two = M.measure(f, passes=2, batch_size=16)
    assert one["instance"]["workers"] == 3
    assert not [d for d in one["diagnostics"] if "not used" in d]
    assert not [d for d in two["diagnostics"] if "not used" in d]  # --workers not typed: no note
    for key in ("nc1", "nc1_trace", "cdnv_mean", "gram_distance_etf"):
        assert abs(one["metrics"][key] - two["metrics"][key]) <= 1e-12 * abs(two["metrics"][key])
