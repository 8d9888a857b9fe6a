"""`ncproofs measure CHECKPOINT_DIR_OR_GLOB`: one row per checkpoint in epoch order, each matching the dense
reference (tests/measure_reference.py); the NC-vs-epoch figure (PNG, and PDF with TrueType fonts)."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from measure_reference import reference_metrics, synthetic  # noqa: E402

from proofs_check import cli  # noqa: E402


def _write(tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    data = {}
    for epoch, spread in ((20, 0.05), (0, 1.0), (5, 0.3)):  # written out of order
        H, y, W, b = synthetic(seed=1, N=300, d=6, K=4, spread=spread)
        np.savez(folder / f"epoch_{epoch}.npz", features=H, labels=y, weights=W, bias=b)
        data[epoch] = (H, y, W, b)
    (folder / "notes.txt").write_text("not a checkpoint")
    return folder, data


def test_directory_and_glob_give_rows_in_epoch_order(tmp_path, capsys):
    folder, data = _write(tmp_path)
    for spec in (str(folder), str(folder / "epoch_*.npz")):
        assert cli.main(["measure", spec, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        rows = out["checkpoints"]
        assert [r["epoch"] for r in rows] == [0, 5, 20]
        for r in rows:
            ref = reference_metrics(*data[r["epoch"]])
            for k in ("nc1", "cdnv_mean", "equinorm", "gram_distance_etf", "nc3", "nc4"):
                assert r["metrics"][k] == pytest.approx(ref[k], rel=1e-8), (r["epoch"], k)
    assert rows[0]["metrics"]["nc1"] > rows[-1]["metrics"]["nc1"]  # tighter classes, smaller NC1
    assert cli.main(["measure", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "3 checkpoints" in text and text.index("\n           0") < text.index("\n          20")


def test_epoch_figure_png_and_pdf_fonts(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="matplotlib is the optional [plots] extra")
    folder, _ = _write(tmp_path)
    assert cli.main(["measure", str(folder), "--plot", str(tmp_path / "nc.png")]) == 0
    capsys.readouterr()
    assert (tmp_path / "nc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cli.main(["measure", str(folder), "--plot", str(tmp_path / "nc.pdf")]) == 0
    pdf = (tmp_path / "nc.pdf").read_bytes()
    assert pdf[:5] == b"%PDF-" and b"/FontFile2" in pdf and b"/Type3" not in pdf  # TrueType (Type 42), no Type 3


def test_empty_glob_is_one_line_exit_2(tmp_path, capsys):
    assert cli.main(["measure", str(tmp_path / "none_*.npz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no checkpoint files" in err[0]
