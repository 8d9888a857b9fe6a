"""Output files: every path is checked before any work (one-line error, exit 2, nothing computed)
and written atomically (temp file beside it, fsync, rename). proofs_check.outputs and its use by
run --report/--json, table --output and solve --plot (sweep --export: tests/test_sweep.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import time
from pathlib import Path

import pytest

from proofs_check import cli, commands, runner
from proofs_check.outputs import check_output_path, write_bytes_atomic, write_text_atomic
from theory._validate import InputError

SOLVE = ["solve", "ufm-mse", "-k", "3", "-n", "2", "-d", "4", "--lambda-w", "0.01", "--lambda-h", "0.01"]


@pytest.fixture
def spy(monkeypatch, tmp_path):
    """Records every solve / table build / claim run the CLI starts (the real ones still run)."""
    monkeypatch.chdir(tmp_path)  # `run` has default report paths in the working directory
    calls: list[str] = []
    solves, tables, extras = commands.discover()

    def wrap(name, fn):
        def inner(*a, **k):
            calls.append(name)
            return fn(*a, **k)
        return inner

    solves = [dataclasses.replace(c, run=wrap(f"solve {c.name}", c.run)) for c in solves]
    tables = [dataclasses.replace(c, build=wrap(f"table {c.name}", c.build)) for c in tables]
    monkeypatch.setattr(cli, "discover", lambda: (solves, tables, extras))
    monkeypatch.setattr(runner, "run_claims", wrap("run", runner.run_claims))
    return calls


def _bad_paths(tmp_path: Path, suffix: str) -> list[tuple[str, str]]:
    """(path, the part of the message that must name the problem)."""
    a_file = tmp_path / "plain.txt"
    a_file.write_text("x")
    folder = tmp_path / "folder"
    folder.mkdir()
    cases = [
        (str(tmp_path / "missing" / f"out{suffix}"), f"directory {tmp_path / 'missing'} does not exist"),
        (str(folder), f"{folder} is a directory"),
        (str(a_file / f"out{suffix}"), f"{a_file} is not a directory"),
        (f"/proc/out{suffix}", "cannot create a file in directory /proc"),  # exists, not writable even as root
    ]
    if os.geteuid() != 0:  # root writes into a read-only mode directory anyway
        ro = tmp_path / "readonly"
        ro.mkdir()
        ro.chmod(0o500)
        cases.append((str(ro / f"out{suffix}"), f"directory {ro} is not writable"))
    return cases


def _listing(tmp_path: Path) -> set[str]:
    return {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if not str(p).startswith("/proc")}


def _expect_refused(argv, option, message, spy, capsys, tmp_path):
    before = _listing(tmp_path)
    rc = cli.main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith(f"ncproofs: error: {option}: ") and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    # the spy, not a clock, shows that no work started (a timed assertion would depend on machine load)
    assert spy == [], f"work started before the output path was checked: {spy}"
    assert _listing(tmp_path) == before  # nothing written, no temp file left


@pytest.mark.parametrize("option", ["--report", "--json"])
def test_run_refuses_a_bad_report_path_before_running_claims(tmp_path, capsys, spy, option):
    for path, message in _bad_paths(tmp_path, ".md" if option == "--report" else ".json"):
        _expect_refused(["run", "--quiet", "--only", "crh.identity.backprop", option, path], option, message,
                        spy, capsys, tmp_path)


def test_table_refuses_a_bad_output_path_before_building(tmp_path, capsys, spy):
    for path, message in _bad_paths(tmp_path, ".md"):
        _expect_refused(["table", "ufm", "--output", path], "--output", message, spy, capsys, tmp_path)


def test_solve_refuses_a_bad_plot_path_before_solving(tmp_path, capsys, spy):
    pytest.importorskip("matplotlib", reason="matplotlib (optional extra) is not installed")
    for path, message in _bad_paths(tmp_path, ".png"):
        if path.endswith("folder"):
            path = str(tmp_path / "folder.png")
            os.mkdir(path)  # a directory with a figure's name
            message = f"{path} is a directory"
        _expect_refused(SOLVE + ["--plot", path], "--plot", message, spy, capsys, tmp_path)


def test_table_output_is_written_atomically_and_matches_stdout(tmp_path, capsys, spy):
    assert cli.main(["table", "ufm", "--format", "csv"]) == 0
    expected = capsys.readouterr().out
    out = tmp_path / "t.csv"
    out.write_text("old contents\n")
    out.chmod(0o640)
    assert cli.main(["table", "ufm", "--format", "csv", "--output", str(out)]) == 0
    assert out.read_text() == expected
    assert stat.S_IMODE(out.stat().st_mode) == 0o640  # the replaced file keeps its permissions
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_solve_plot_is_written(tmp_path, capsys, spy):
    pytest.importorskip("matplotlib", reason="matplotlib (optional extra) is not installed")
    fig = tmp_path / "fig.png"
    assert cli.main(SOLVE + ["--plot", str(fig)]) in (0, 1)
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert spy == ["solve ufm-mse"]
    assert [p.name for p in tmp_path.iterdir()] == ["fig.png"]


def test_write_reports_is_atomic(tmp_path, monkeypatch):
    from proofs_check.core import RunContext

    run = runner.RunResult([], RunContext(), 0.0)
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    runner.write_reports(run, str(md), str(js))
    assert md.read_text().startswith("# ncproofs report")
    assert json.loads(js.read_text())["tool"] == "ncproofs"
    old = js.read_text()

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", boom)  # the disk fills up while the new report is written
    with pytest.raises(OSError, match="No space left"):
        runner.write_reports(run, None, str(js))
    assert js.read_text() == old  # the previous report is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.md"]  # no temp file left


# ---- proofs_check.outputs itself ----------------------------------------------------------------

def test_check_output_path_cases(tmp_path):
    assert check_output_path(None, "--x") is None and check_output_path("", "--x") is None
    target = tmp_path / "a.txt"
    assert check_output_path(str(target), "--x") == target  # new file in a writable folder
    target.write_text("x")
    assert check_output_path(target, "--x") == target  # an existing regular file
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"--x: .*pipe is a named pipe \(fifo\), not a file that can be written"):
        check_output_path(str(fifo), "--x")
    with pytest.raises(InputError, match="--x: /dev/null is a device"):
        check_output_path("/dev/null", "--x")
    with pytest.raises(InputError, match="--x: the path contains a NUL character"):
        check_output_path("a\x00b", "--x")
    with pytest.raises(TypeError):
        check_output_path(3, "--x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "pipe"]  # the probe file is gone


def test_write_atomic_follows_symlinks_and_cleans_up(tmp_path, monkeypatch):
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_text_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"  # the target is rewritten, the link kept
    write_bytes_atomic(tmp_path / "b.bin", b"\x00\x01")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError(5, "I/O error")))
    with pytest.raises(OSError):
        write_text_atomic(real, "newer")
    assert real.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.bin", "link.txt", "real.txt"]
    with pytest.raises(TypeError):
        write_text_atomic(real, b"bytes")
