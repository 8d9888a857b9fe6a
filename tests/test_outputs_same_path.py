"""`ncproofs run` refuses one path for two reports (also through a symlink) before any work: one line, exit 2
(proofs_check/outputs.py: check_distinct_outputs)."""

from __future__ import annotations

import pytest

from proofs_check import cli


def _one_line_exit_2(capsys, args):
    rc = cli.main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("ncproofs: error: "), (rc, err)
    return err[0]


@pytest.mark.parametrize("second", [["--json", "same.out"], ["--json", "", "--html", "./same.out"]])
def test_run_refuses_one_path_for_two_reports(tmp_path, monkeypatch, capsys, second):
    monkeypatch.chdir(tmp_path)
    line = _one_line_exit_2(capsys, ["run", "--quiet", "--only", "ufm.ce.trivial-phase", "--report", "same.out",
                                     *second])
    assert "same file as --report" in line
    assert not (tmp_path / "same.out").exists()  # refused before any work


def test_run_refuses_a_symlink_to_the_other_report(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.json").write_text("{}")
    (tmp_path / "link.md").symlink_to(tmp_path / "r.json")
    assert "same file" in _one_line_exit_2(capsys, ["run", "--quiet", "--only", "ufm.ce.trivial-phase", "--report",
                                                    "link.md", "--json", "r.json"])
