"""A caption given with ``--format csv`` was silently dropped (a csv file has no place for it): it is refused in
one line naming --caption and the format, exit 2; the formats that carry a caption still show it."""

from __future__ import annotations

import pytest

from proofs_check.cli import main

ARGS = ["table", "ufm", "--classes", "2,3", "--lambda", "1e-3"]


def test_csv_with_a_caption_is_refused_naming_both_options(capsys):
    rc = main(ARGS + ["--format", "csv", "--caption", "My caption"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "--caption" in err[0] and "--format csv" in err[0]


@pytest.mark.parametrize("fmt", ["md", "latex", "json"])
def test_formats_with_a_caption_show_it(capsys, fmt):
    rc = main(ARGS + ["--format", fmt, "--caption", "Zeta caption 42"])
    assert rc == 0 and "Zeta caption 42" in capsys.readouterr().out


def test_csv_without_a_caption_is_written(capsys):
    rc = main(ARGS + ["--format", "csv"])
    out = capsys.readouterr().out
    assert rc == 0 and "," in out and "Zeta" not in out
