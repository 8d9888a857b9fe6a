"""`ncproofs list --counts-from` with a malformed report is bad input (one line, exit 2); a malformed default
report next to the user is ignored (proofs_check/registry.py: counts_from_report)."""

from __future__ import annotations

import pytest

from proofs_check import cli


def _one_line_exit_2(capsys, args):
    rc = cli.main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("ncproofs: error: "), (rc, err)
    return err[0]


@pytest.mark.parametrize("text", ["[]", "NaN", "[" * 100000, '{"claims": [{"id": "x", "checks": "many"}]}'])
def test_counts_from_a_malformed_report_is_bad_input(tmp_path, monkeypatch, capsys, text):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.json").write_text(text)
    assert "--counts-from" in _one_line_exit_2(capsys, ["list", "--counts-from", "a.json"])
    # a malformed default report next to the user is ignored by a plain `list`
    (tmp_path / "ncproofs-report.json").write_text(text)
    assert cli.main(["list"]) == 0
    assert "not run" in capsys.readouterr().out
