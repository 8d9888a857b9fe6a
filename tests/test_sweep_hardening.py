"""Sweep configs run only the code they name, stay within memory, and cannot hang or exit a sweep.

Reproductions: a ``uuid.py`` / ``sqlite3.py`` beside a config ran although the config named no
module; ``modules = "os"`` was taken as a list; a module calling ``sys.exit(0)`` made the sweep exit
0 with nothing computed; ``k = 1e300`` became a 301-digit integer; ``max_instances = 1e11`` let a
grid fill the memory; a sweepable that never returns hung the sweep; VERIFIED with an inf value
was stored as VERIFIED with a null.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from proofs_check.sweep.config import load_config
from theory._validate import InputError

SHADOWS = ("uuid", "csv", "pickle", "socket", "sqlite3", "zlib", "hashlib", "secrets", "scipy", "concurrent")

HANG_MODULE = """
import math, time
from proofs_check.sweep import register_sweepable

def hang(params, seed):
    if params["i"] == 1:
        while True:          # never returns (and swallows ordinary exceptions)
            try:
                time.sleep(0.05)
            except Exception:
                pass
    if params["i"] == 2:
        return {"verdict": "VERIFIED", "value": math.inf}
    return {"verdict": "VERIFIED", "value": float(params["i"])}

register_sweepable("test.hang", hang, parameters=("i",))
"""


def _write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def _sweep(cfg: Path, *args, env=None, timeout=120):
    # run from an empty folder (``python -m`` puts its working folder first on sys.path, as Python does)
    empty = cfg.parent / "cwd"
    empty.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "proofs_check", "sweep", str(cfg), *map(str, args)], cwd=empty,
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def test_files_beside_the_config_never_run(tmp_path):
    marker = tmp_path / "ran.txt"
    for name in SHADOWS:
        _write(tmp_path / f"{name}.py", f"open({str(marker)!r}, 'a').write('{name}\\n')\n")
    cfg = _write(tmp_path / "s.toml", """
        [sweep]
        family = "geometry.noisy-etf"
        [parameters]
        k = 3
        """)
    r = _sweep(cfg, "--store", tmp_path / "s.sqlite", "--workers", 2)
    assert r.returncode in (0, 1), r.stderr
    assert not marker.exists(), f"code beside the config ran: {marker.read_text()}"


def test_named_module_is_found_beside_the_config_but_after_the_standard_library(tmp_path, monkeypatch):
    _write(tmp_path / "hangmod.py", HANG_MODULE)
    _write(tmp_path / "uuid.py", "raise SystemExit('the shadow uuid ran')\n")
    cfg = _write(tmp_path / "s.toml", """
        [sweep]
        family = "test.hang"
        modules = ["hangmod"]
        [parameters]
        i = 0
        """)
    monkeypatch.setattr(sys, "path", list(sys.path))
    load_config(cfg)
    d = str(tmp_path.resolve())
    assert sys.path[-1] == d and sys.path.index(d) > 0


@pytest.mark.parametrize("text,needle", [
    ('[sweep]\nfamily = "geometry.noisy-etf"\nmodules = "os"\n[parameters]\nk = 3\n', "sweep.modules must be a list"),
    ('[sweep]\nfamily = "geometry.noisy-etf"\n[parameters]\nk = 1e300\n', "out of range"),
    ('[sweep]\nfamily = "geometry.noisy-etf"\n[parameters]\nk = {min = 2, max = 1e300, integer = true}\n',
     "at most 2^63 - 1"),
    ('[sweep]\nfamily = "geometry.noisy-etf"\nmax_instances = 100000000000\n[parameters]\n'
     'k = {min = 2, max = 100000000, integer = true}\n', "sweep.max_instances must be <="),
    ('[sweep]\nfamily = "geometry.noisy-etf"\ninstance_time_limit = -1\n[parameters]\nk = 3\n',
     "instance_time_limit"),
])
def test_bad_configs_are_refused_before_work(tmp_path, text, needle):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    with pytest.raises(InputError, match=needle.replace("^", "\\^")):
        load_config(cfg)


def test_module_that_exits_does_not_end_the_sweep_successfully(tmp_path):
    _write(tmp_path / "exitmod.py", "import sys\nsys.exit(0)\n")
    cfg = _write(tmp_path / "s.toml", """
        [sweep]
        family = "x"
        modules = ["exitmod"]
        """)
    r = _sweep(cfg)
    assert r.returncode == 2 and "called sys.exit(0)" in r.stderr, (r.returncode, r.stderr)


@pytest.mark.parametrize("workers", [1, 2])
def test_instance_past_its_time_limit_is_inconclusive_and_the_rest_completes(tmp_path, workers):
    _write(tmp_path / "hangmod.py", HANG_MODULE)
    cfg = _write(tmp_path / "s.toml", """
        [sweep]
        family = "test.hang"
        modules = ["hangmod"]
        instance_time_limit = 6
        [parameters]
        i = {min = 0, max = 4, integer = true}
        """)
    db = tmp_path / "s.sqlite"
    r = _sweep(cfg, "--store", db, "--workers", workers, timeout=90)
    assert r.returncode in (0, 1), r.stderr
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT params, verdict, result FROM results").fetchall()
    by_i = {json.loads(p)["i"]: (v, json.loads(res)) for p, v, res in rows}
    assert sorted(by_i) == [0, 1, 2, 3, 4]
    assert by_i[1][0] == "INCONCLUSIVE" and by_i[1][1]["reason"].startswith("stopped by the wall-clock safety limit (6 s, sweep.instance_time_limit)")
    assert by_i[2][0] == "INCONCLUSIVE" and "not finite" in by_i[2][1]["reason"]
    assert all(by_i[i][0] == "VERIFIED" for i in (0, 3, 4))
