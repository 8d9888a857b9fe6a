"""Every command that reads a file refuses what is not a regular file before opening it (a FIFO
blocks forever, /dev/zero never ends) and files above its size budget: one line, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from theory._validate import InputError, input_file


def _run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "proofs_check", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "Y.npy"
    os.mkfifo(p)
    return p


@pytest.mark.parametrize("argv", [
    ("solve", "ufm-regression", "--targets", "{f}", "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2"),
    ("list", "--counts-from", "{f}"),
    ("sweep", "{f}"),
])
@pytest.mark.parametrize("which", ["fifo", "/dev/zero"])
def test_non_regular_files_are_refused_without_blocking(tmp_path, fifo, argv, which):
    target = str(fifo) if which == "fifo" else "/dev/zero"
    r = _run(*(a.format(f=target) for a in argv), cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1
    assert ("FIFO" if which == "fifo" else "character device") in r.stderr


def test_deeply_nested_sweep_config_is_bad_input(tmp_path):
    cfg = tmp_path / "deep.toml"
    cfg.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    r = _run("sweep", cfg, cwd=tmp_path)
    assert r.returncode == 2 and "nested too deeply" in r.stderr and "internal error" not in r.stderr


def test_input_file_budget_and_kinds(tmp_path):
    f = tmp_path / "a.json"
    f.write_bytes(b"x" * 100)
    assert input_file("--x", f, max_bytes=100) == str(f)
    with pytest.raises(InputError, match="--x: .* holds 100 bytes, above the limit of 99"):
        input_file("--x", f, max_bytes=99)
    with pytest.raises(InputError, match="--x: .* is a directory"):
        input_file("--x", tmp_path)
    with pytest.raises(InputError, match="--x: no such file"):
        input_file("--x", tmp_path / "missing")
    with pytest.raises(InputError, match="--x: no file given"):
        input_file("--x", "")
    with pytest.raises(InputError, match="--x: a path is needed"):
        input_file("--x", 5)
