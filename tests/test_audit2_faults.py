"""Faults and bad inputs found by an audit (2026-12-01): same output path twice, stores that are not ncproofs
stores or are damaged, read-only stores, malformed run reports. Each is bad input: one line, exit 2."""

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


@pytest.mark.parametrize("second", [["--json", "same.out"], ["--json", "", "--html", "./same.out"]])
def test_run_refuses_one_path_for_two_reports(tmp_path, monkeypatch, capsys, second):
    monkeypatch.chdir(tmp_path)
    line = _one_line_exit_2(capsys, ["run", "--quiet", "--only", "ufm-ce-trivial-phase", "--report", "same.out",
                                     *second])
    assert "same file as --report" in line
    assert not (tmp_path / "same.out").exists()  # refused before any work


def test_run_refuses_a_symlink_to_the_other_report(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.json").write_text("{}")
    (tmp_path / "link.md").symlink_to(tmp_path / "r.json")
    assert "same file" in _one_line_exit_2(capsys, ["run", "--quiet", "--only", "ufm-ce-trivial-phase", "--report",
                                                    "link.md", "--json", "r.json"])


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


@pytest.mark.parametrize("text", ["[]", "NaN", "[" * 100000, '{"claims": [{"id": "x", "checks": "many"}]}'])
def test_counts_from_a_malformed_report_is_bad_input(tmp_path, monkeypatch, capsys, text):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.json").write_text(text)
    assert "--counts-from" in _one_line_exit_2(capsys, ["list", "--counts-from", "a.json"])
    # a malformed default report next to the user is ignored by a plain `list`
    (tmp_path / "ncproofs-report.json").write_text(text)
    assert cli.main(["list"]) == 0
    assert "not run" in capsys.readouterr().out
