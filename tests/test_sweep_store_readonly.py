"""A finished store can be read from a read-only folder (opened immutable), and a damaged result
row is refused by --summary as it is by --export (it showed as a clean VERIFIED row)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from proofs_check.commands import UsageError
from proofs_check.sweep.store import Store


def _finished_store(tmp_path):
    cfg = tmp_path / "s.toml"
    cfg.write_text('[sweep]\nfamily = "geometry.noisy-etf"\n[parameters]\nk = [3, 4]\n')
    db = tmp_path / "s.sqlite"
    r = subprocess.run([sys.executable, "-m", "proofs_check", "sweep", str(cfg), "--store", str(db), "--workers", "1"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    return cfg, db


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores folder permissions")
def test_store_in_a_read_only_folder_can_be_read(tmp_path):  # pragma: no cover - CI runs as root
    cfg, db = _finished_store(tmp_path)
    os.chmod(tmp_path, 0o555)
    try:
        rows = Store(db, readonly=True).rows()
        assert len(rows) == 2
    finally:
        os.chmod(tmp_path, 0o755)


def test_read_only_folder_opens_immutable(tmp_path, monkeypatch):
    cfg, db = _finished_store(tmp_path)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if (mode == os.W_OK and os.path.samefile(p, tmp_path))
                        else real_access(p, mode))
    seen = []
    real_connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda target, *a, **k: seen.append(target) or real_connect(target, *a, **k))
    rows = Store(db, readonly=True).rows()
    assert len(rows) == 2 and any("immutable=1" in u for u in seen)


def test_damaged_result_is_refused_by_summary_too(tmp_path):
    cfg, db = _finished_store(tmp_path)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE results SET result = '{not json' WHERE rowid = (SELECT min(rowid) FROM results)")
    with pytest.raises(UsageError, match="damaged row"):
        Store(db, readonly=True).rows()
    r = subprocess.run([sys.executable, "-m", "proofs_check", "sweep", str(cfg), "--store", str(db), "--summary"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and "damaged row" in r.stderr, (r.returncode, r.stderr)
