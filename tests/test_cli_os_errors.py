"""OS errors on the user's paths and out-of-range integers are bad input (one line, exit 2), never
"internal error": a 300-character file name, a full disk, a seed beyond int64 or negative, an
empty entry in a comma-separated list, a class count beyond int64."""

from __future__ import annotations

import errno
import subprocess
import sys

import pytest

from proofs_check import cli


def _run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "proofs_check", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def _one_line_exit_2(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "internal error" not in r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_plot_name_too_long_is_one_line(tmp_path):
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib (optional extra [plots])")
    name = "a" * 300 + ".png"
    r = _run("solve", "ufm-ce", "-k", 3, "-n", 2, "-d", 3, "--lambda-w", 1e-2, "--lambda-h", 1e-2, "--plot", name,
             cwd=tmp_path)
    _one_line_exit_2(r, "File name too long")


@pytest.mark.parametrize("args,needle", [
    (("run", "--seed", "99999999999999999999999", "--only", "ntk"), "--seed"),
    (("solve", "ufm-regression", "--targets", "x.npy", "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2",
      "--seed", "-3"), "--seed must be a non-negative integer"),
    (("table", "ufm", "--loss", "ce", "--classes", "3", "--lambda", "2,,3", "--format", "md"), "no empty entry"),
    (("table", "ufm", "--loss", "ce", "--classes", "3,", "--lambda", "1e-2", "--format", "md"), "no empty entry"),
    (("solve", "ufm", "--counts", "99999999999999999999,3", "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2"),
     "--counts"),
])
def test_out_of_range_integers_and_empty_entries(tmp_path, args, needle):
    _one_line_exit_2(_run(*args, cwd=tmp_path), needle)


def test_full_disk_under_cite_output_is_one_line(tmp_path, monkeypatch, capsys):
    from proofs_check import outputs

    def full(path, text, encoding="utf-8"):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(outputs, "write_text_atomic", full)
    monkeypatch.chdir(tmp_path)
    rc = cli.main(["cite", "-o", "refs.bib"])
    err = capsys.readouterr().err
    assert rc == 2 and "No space left on device" in err and "refs.bib" in err and "internal error" not in err
    assert not (tmp_path / "refs.bib").exists()


def test_os_error_without_a_path_stays_a_defect():
    assert cli._os_error_line(OSError(errno.EIO, "I/O error")) is None
    assert cli._os_error_line(OSError("no errno")) is None
    line = cli._os_error_line(OSError(errno.ENAMETOOLONG, "File name too long", "b" * 500))
    assert line is not None and len(line) < 200


@pytest.mark.parametrize("args,needle", [
    (("solve", "ufm-mse", "-k", "3", "-n", "2", "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2", "--method",
      "factored", "--device", "../"), "--device must be cpu, cuda or cuda:N"),
    (("sweep", "{cfg}", "--scheduler", "tcp://127.0.0.1:1", "--connect-timeout", "1e300"), "--connect-timeout"),
    (("sweep", "{cfg}", "--scheduler", "tcp://" + "h" * 300 + ":8786"), "at most 300 characters"),
])
def test_hostile_options_are_one_line(tmp_path, args, needle):
    cfg = tmp_path / "s.toml"
    cfg.write_text('[sweep]\nfamily = "geometry.noisy-etf"\n[parameters]\nk = 3\n')
    r = _run(*(a.format(cfg=cfg) for a in args), cwd=tmp_path)
    _one_line_exit_2(r, needle)


def test_store_path_must_be_a_path(tmp_path, monkeypatch):
    from proofs_check.sweep.store import Store

    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError, match="Store: path must be"):
        Store(5)
    assert not (tmp_path / "5").exists()


@pytest.mark.parametrize("address", ["http://127.0.0.1:1", "inproc://x", "ucx://127.0.0.1:1", "tls://127.0.0.1:1",
                                     "tcp://127.0.0.1:99999"])
def test_unsupported_scheduler_addresses_are_one_line_without_dask_tracebacks(tmp_path, address):
    cfg = tmp_path / "s.toml"
    cfg.write_text('[sweep]\nfamily = "geometry.noisy-etf"\n[parameters]\nk = 3\n')
    _one_line_exit_2(_run("sweep", cfg, "--scheduler", address, cwd=tmp_path), "--scheduler")


def test_bad_dask_scheduler_address_variable_is_named(tmp_path, monkeypatch):
    cfg = tmp_path / "s.toml"
    cfg.write_text('[sweep]\nfamily = "geometry.noisy-etf"\n[parameters]\nk = 3\n')
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "ws://127.0.0.1:1")
    _one_line_exit_2(_run("sweep", cfg, cwd=tmp_path), "DASK_SCHEDULER_ADDRESS")


@pytest.mark.parametrize("args,needle", [
    (("table", "ufm", "--loss", "ce", "--classes", "3", "--lambda", "1e400", "--format", "md"), "--lambda must be"),
    (("run", "--only", ""), "--only must be a non-empty PATTERN"),
    (("list", "--only", " "), "--only must be a non-empty PATTERN"),
])
def test_refusals_name_the_option_as_typed(tmp_path, args, needle):
    _one_line_exit_2(_run(*args, cwd=tmp_path), needle)
