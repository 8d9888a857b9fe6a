"""`ncproofs table ufm`: bad list options (one line, exit 2), losses, profiles, certified columns."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "proofs_check.cli", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("option,value", [("--classes", ""), ("--classes", ",,,"), ("--per-class", ""),
                                          ("--per-class", ", ,"), ("--lambda", ""), ("--lambda", ",,")])
def test_empty_list_option_is_one_line_exit_2(option, value):
    args = ["table", "ufm", "--loss", "ce", "--classes", "3", "--lambda", "0.1"]
    i = args.index(option) if option in args else None
    if i is None:
        args += [option, value]
    else:
        args[i + 1] = value
    r = _cli(*args)
    assert r.returncode == 2, r.stdout
    assert option in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert r.stdout == ""
