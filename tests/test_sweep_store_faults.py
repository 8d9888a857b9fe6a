"""Sweep store faults (proofs_check/sweep/store.py): --summary/--export open the store read-only, a SQLite file that
is not an ncproofs store is refused and left unmodified, damaged rows are bad input (one line, exit 2), and an
instance refused by its budget is stored INCONCLUSIVE, not ERROR."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import textwrap

import pytest

from proofs_check import cli

CONFIG = textwrap.dedent("""
    [sweep]
    family = "geometry.noisy-etf"
    [parameters]
    k = [3, 4]
    noise = [0.0, 0.1]
    """)


def _one_line_exit_2(capsys, args):
    rc = cli.main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("ncproofs: error: "), (rc, err)
    return err[0]


@pytest.fixture()
def store(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "h.toml").write_text(CONFIG)
    cli.main(["sweep", "h.toml", "--quiet", "--workers", "1"])
    capsys.readouterr()
    return tmp_path / "h.sqlite"


def _sha(path):
    return hashlib.sha1(path.read_bytes()).hexdigest()


def test_summary_reads_without_writing(store, capsys):
    before = _sha(store)
    con = sqlite3.connect(store)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    before = _sha(store)
    assert cli.main(["sweep", "h.toml", "--summary"]) in (0, 1)
    assert "geometry.noisy-etf" in capsys.readouterr().out
    assert _sha(store) == before


def test_a_foreign_sqlite_file_is_refused_and_not_modified(store, tmp_path, capsys):
    foreign = tmp_path / "foreign.sqlite"
    con = sqlite3.connect(foreign)
    con.execute("create table t(a)")
    con.commit()
    con.close()
    for extra in (["--summary"], ["--quiet", "--workers", "1"]):
        line = _one_line_exit_2(capsys, ["sweep", "h.toml", "--store", str(foreign), *extra])
        assert "not an ncproofs store" in line
    con = sqlite3.connect(foreign)
    assert [r[0] for r in con.execute("select name from sqlite_master")] == ["t"]
    con.close()


@pytest.mark.parametrize("sql,what", [("update results set verdict='WEIRD' where rowid=1", "verdict 'WEIRD'"),
                                      ("update results set result='{bad json'", "damaged row")])
def test_a_damaged_row_is_bad_input(store, tmp_path, capsys, sql, what):
    con = sqlite3.connect(store)
    con.execute(sql)
    con.commit()
    con.close()
    line = _one_line_exit_2(capsys, ["sweep", "h.toml", "--summary", "--export", str(tmp_path / "e.csv")])
    assert "--store" in line and what in line


def test_a_budget_refusal_in_a_sweep_is_not_a_defect(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ref.toml").write_text('[sweep]\nfamily = "ufm"\nmode = "grid"\nworkers = 1\n[parameters]\n'
                                       'loss = "ce"\nk = [3, 5000]\nn = 5\nd = 5000\nlw = 1e-3\nlh = 1e-3\n')
    rc = cli.main(["sweep", "ref.toml", "--quiet"])
    capsys.readouterr()
    con = sqlite3.connect(tmp_path / "ref.sqlite")
    rows = {json.loads(p)["k"]: (v, r) for p, v, r in con.execute("select params, verdict, reason from results")}
    con.close()
    assert rows[5000][0] == "INCONCLUSIVE" and rows[5000][1].startswith("refused: ufm-ce (k = 5000")
    assert rows[3][0] == "VERIFIED"
    assert rc == 0  # nothing REFUTED, no ERROR
