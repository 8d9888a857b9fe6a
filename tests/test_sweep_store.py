"""The sweep store's open path: "database is locked" from PRAGMA journal_mode=WAL (which SQLite
returns without waiting for the busy timeout when several sweeps open a new store at once) is
retried; every other error is not."""

from __future__ import annotations

import sqlite3

import pytest

from proofs_check.sweep import store


def test_locked_is_retried_until_it_works():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise sqlite3.OperationalError("database is locked")
        return "wal"

    assert store._retry_locked(flaky, timeout=5.0) == "wal"
    assert len(calls) == 3


def test_other_errors_and_a_lock_past_the_timeout_are_raised():
    def broken():
        raise sqlite3.OperationalError("no such table: results")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        store._retry_locked(broken, timeout=5.0)

    def locked():
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(sqlite3.OperationalError, match="locked"):
        store._retry_locked(locked, timeout=0.05)


def test_many_processes_open_one_new_store_at_once(tmp_path):
    """Eight interpreters open the same new store at the same moment: all succeed."""
    import subprocess
    import sys
    import time

    path = tmp_path / "s.sqlite"
    start = time.time() + 1.0
    code = ("import sys, time\nfrom proofs_check.sweep.store import Store\n"
            f"t = {start!r}\nwhile time.time() < t: pass\nStore(sys.argv[1]).close()\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path)], stderr=subprocess.PIPE, text=True)
             for _ in range(8)]
    errs = [(p.wait(timeout=60), p.stderr.read()) for p in procs]
    assert all(rc == 0 for rc, _ in errs), [e for rc, e in errs if rc]
