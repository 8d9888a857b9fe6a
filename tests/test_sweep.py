"""ncproofs sweep: config parsing and bad input, instance keys, the SQLite store, resume after
SIGKILL, local processes and Dask, summary and table export."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from proofs_check import cli, sweep

ROOT = Path(__file__).resolve().parents[1]


def _env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def _key(family: str, version: str, params: dict, seed: int) -> str:
    """The documented instance key, computed here independently of sweep.instance_key."""
    payload = json.dumps({"family": family, "version": version, "params": params, "seed": seed},
                         sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def _rows(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT key, params, seed, verdict, score, result, run_id FROM results").fetchall()
    finally:
        con.close()


def _run_cli(argv, capsys):
    rc = cli.main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


ETF_CONFIG = """
[sweep]
family = "geometry.noisy-etf"
seeds = 2

[parameters]
k = [2, 3]
noise = [0.0, 0.5]
"""


# ---- the built-in sweepable and the store -----------------------------------------------

def test_grid_sweep_stores_every_instance_with_its_key_and_verdict(tmp_path, capsys):
    cfg = _write(tmp_path / "etf.toml", ETF_CONFIG)
    db = tmp_path / "etf.sqlite"
    rc, out, err = _run_cli(["sweep", str(cfg), "--workers", "1", "--quiet"], capsys)
    # noise 0.5 on unit vectors moves the normalised Gram far beyond tol 1e-3: REFUTED -> exit 1
    assert rc == 1, err
    rows = _rows(db)
    assert len(rows) == 8  # 2 k x 2 noise x 2 seeds
    defaults = {"d": None, "r": 1.0, "tol": 1e-3}
    expected = {}
    for k in (2, 3):
        for noise in (0.0, 0.5):
            for seed in (0, 1):
                params = dict(defaults, k=k, noise=noise)
                expected[_key("geometry.noisy-etf", "1", params, seed)] = "VERIFIED" if noise == 0 else "REFUTED"
    got = {key: verdict for key, _, _, verdict, _, _, _ in rows}
    assert got == expected
    for key, params, seed, verdict, score, result, _ in rows:
        p = json.loads(params)
        if p["noise"] == 0.0:
            assert score is not None and score < 1e-9  # exact ETF: distance 0 up to rounding
        else:
            assert score > 1e-3
        assert json.loads(result)["checks"][0]["evidence"]["classification"] == \
            ("simplex-etf" if p["noise"] == 0 else "other")
    assert "verdicts: ERROR 0, REFUTED 4, INCONCLUSIVE 0, VERIFIED 4" in out


def test_no_etf_when_d_below_k_minus_1_is_not_applicable(tmp_path, capsys):
    cfg = _write(tmp_path / "c.toml", """
        [sweep]
        family = "geometry.noisy-etf"
        [parameters]
        k = 5
        d = 3
        """)
    rc, out, _ = _run_cli(["sweep", str(cfg), "--workers", "1", "--quiet"], capsys)
    assert rc == 0
    (row,) = _rows(tmp_path / "c.sqlite")
    assert row[3] == "NOT_APPLICABLE"  # a hypothesis of the claim fails (DESIGN: NOT APPLICABLE)
    assert "hypothesis fails" in json.loads(row[5])["reason"] and "d >= k-1 = 4" in json.loads(row[5])["reason"]


def test_rerun_computes_nothing_and_extending_the_grid_computes_only_new(tmp_path, capsys):
    cfg = _write(tmp_path / "a.toml", ETF_CONFIG)
    db = tmp_path / "store.sqlite"
    _run_cli(["sweep", str(cfg), "--store", str(db), "--workers", "1", "--quiet"], capsys)
    first = {r[0]: r for r in _rows(db)}
    rc, out, _ = _run_cli(["sweep", str(cfg), "--store", str(db), "--workers", "1", "--quiet"], capsys)
    assert "8 instances (8 already stored, 0 computed)" in out
    cfg2 = _write(tmp_path / "b.toml", ETF_CONFIG.replace("k = [2, 3]", "k = [2, 3, 4]"))
    rc, out, _ = _run_cli(["sweep", str(cfg2), "--store", str(db), "--workers", "1", "--quiet"], capsys)
    assert "12 instances (8 already stored, 4 computed)" in out
    rows = {r[0]: r for r in _rows(db)}
    assert len(rows) == 12
    for key, row in first.items():  # old rows untouched (same run id, same result)
        assert rows[key] == row
    con = sqlite3.connect(db)
    runs = con.execute("SELECT total, skipped, computed, status FROM runs ORDER BY run_id").fetchall()
    con.close()
    assert runs == [(8, 0, 8, "finished"), (8, 8, 0, "finished"), (12, 8, 4, "finished")]


def test_random_sweep_is_deterministic_and_respects_ranges(tmp_path):
    text = """
        [sweep]
        family = "geometry.noisy-etf"
        mode = "random"
        samples = 30
        sample_seed = 7
        [parameters]
        k = {min = 2, max = 6, integer = true}
        noise = {min = 1e-6, max = 1e-1, log = true}
        r = [0.5, 2.0]
        """
    a = sweep.load_config(str(_write(tmp_path / "r.toml", text))).instances()
    b = sweep.load_config(str(_write(tmp_path / "r2.toml", text))).instances()
    assert [i.key for i in a] == [i.key for i in b]
    assert len(a) == 30
    for inst in a:
        p = inst.params
        assert isinstance(p["k"], int) and 2 <= p["k"] <= 6
        assert 1e-6 <= p["noise"] <= 1e-1
        assert p["r"] in (0.5, 2.0)
        assert inst.key == _key("geometry.noisy-etf", "1", p, inst.seed)
    ks = {i.params["k"] for i in a}
    assert ks == {2, 3, 4, 5, 6}  # 30 draws from 5 values: all hit (miss probability < 5*(4/5)^30 ~ 6e-3, fixed seed)
    noises = sorted(i.params["noise"] for i in a)
    assert noises[0] < 1e-4 and noises[-1] > 1e-3  # log-uniform spreads over decades
    other = sweep.load_config(str(_write(tmp_path / "r3.toml", text.replace("sample_seed = 7", "sample_seed = 8"))))
    assert {i.key for i in other.instances()} != {i.key for i in a}


def test_grid_ranges_and_fixed_values(tmp_path):
    spec = sweep.load_config(str(_write(tmp_path / "g.toml", """
        [sweep]
        family = "geometry.noisy-etf"
        seeds = [3]
        [parameters]
        k = {min = 2, max = 4, integer = true}
        noise = {min = 1e-4, max = 1e-2, num = 3, log = true}
        r = 2.0
        """)))
    insts = spec.instances()
    assert len(insts) == 9
    assert sorted({i.params["k"] for i in insts}) == [2, 3, 4]
    assert sorted({i.params["noise"] for i in insts}) == pytest.approx([1e-4, 1e-3, 1e-2], rel=1e-12)
    assert {i.params["r"] for i in insts} == {2.0} and {i.seed for i in insts} == {3}


# ---- a sweepable defined in the user's module --------------------------------------------

SLOW_MODULE = """
import os, time
from proofs_check.sweep import register_sweepable

def slow(params, seed):
    with open(os.environ["NCPROOFS_TEST_LOG"], "a") as f:  # one line per computation started
        f.write(f"{params['i']}\\n")
    time.sleep(params["delay"])
    if params["i"] >= int(os.environ.get("NCPROOFS_TEST_HANG_FROM", 10 ** 9)):
        time.sleep(60)  # a long instance: its worker can only end by noticing that the sweep is gone
    if params["i"] == 13:
        raise RuntimeError("instance 13 crashes on purpose")
    return {"verdict": "REFUTED" if params["i"] % 7 == 0 else "VERIFIED", "score": params["i"],
            "square": params["i"] ** 2}

register_sweepable("test.slow", slow, parameters=("i", "delay"), defaults={"delay": 0.0})
"""


def _slow_config(tmp_path: Path, n: int, delay: float) -> Path:
    _write(tmp_path / "slowmod.py", SLOW_MODULE)
    return _write(tmp_path / "slow.toml", f"""
        [sweep]
        family = "test.slow"
        modules = ["slowmod"]
        [parameters]
        i = {{min = 0, max = {n - 1}, integer = true}}
        delay = {delay}
        """)


def _check_results(rows, n):
    keys = [r[0] for r in rows]
    assert len(keys) == len(set(keys)) == n  # every instance stored exactly once
    by_i = {json.loads(r[1])["i"]: r for r in rows}
    assert sorted(by_i) == list(range(n))  # none lost
    for i, r in by_i.items():
        res = json.loads(r[5])
        if i == 13:
            assert r[3] == "ERROR" and "instance 13 crashes on purpose" in res["reason"]
        else:
            assert r[3] == ("REFUTED" if i % 7 == 0 else "VERIFIED")
            assert res["square"] == i * i and r[4] == i  # stored result is the complete, right one
        assert r[0] == _key("test.slow", "1", {"delay": json.loads(r[1])["delay"], "i": i}, 0)


@pytest.mark.parametrize("workers", [1, 2])
def test_sigkill_then_resume_loses_nothing_and_recomputes_only_unfinished(tmp_path, workers):
    n = 40
    cfg = _slow_config(tmp_path, n, delay=0.1)
    db = tmp_path / "slow.sqlite"
    log1, log2 = tmp_path / "run1.log", tmp_path / "run2.log"
    cmd = [sys.executable, "-m", "proofs_check.cli", "sweep", str(cfg), "--store", str(db),
           "--workers", str(workers)]
    proc = subprocess.Popen(cmd, env=_env(NCPROOFS_TEST_LOG=log1), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        stored = 0
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists():
                try:
                    stored = len(_rows(db))
                except sqlite3.OperationalError:  # table not created yet
                    stored = 0
                if stored >= 10:
                    break
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep finished before it could be killed: " + proc.stderr.read().decode()
        os.killpg(proc.pid, signal.SIGKILL)  # the whole process group, workers included
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    after_kill = _rows(db)
    done1 = {json.loads(r[1])["i"] for r in after_kill}
    assert 10 <= len(done1) < n
    started1 = log1.read_text().split()
    assert done1 <= {int(x) for x in started1}

    res = subprocess.run(cmd, env=_env(NCPROOFS_TEST_LOG=log2), capture_output=True, text=True, timeout=180)
    assert res.returncode == 1, res.stderr  # REFUTED and ERROR instances present
    assert f"{n} instances ({len(done1)} already stored, {n - len(done1)} computed)" in res.stdout
    recomputed = [int(x) for x in log2.read_text().split()]
    assert len(recomputed) == len(set(recomputed))  # nothing computed twice in the resumed run
    assert set(recomputed) == set(range(n)) - done1  # exactly the unfinished ones
    rows = _rows(db)
    _check_results(rows, n)
    first_run = {r[0]: r for r in after_kill}
    for r in rows:
        if r[0] in first_run:
            assert r == first_run[r[0]]  # rows from before the kill are untouched
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    runs = con.execute("SELECT status, skipped, computed FROM runs ORDER BY run_id").fetchall()
    con.close()
    assert runs[0][0] == "running"  # the killed run never finished, and the store says so
    assert runs[1] == ("finished", len(done1), n - len(done1))


def test_crash_in_a_sweepable_is_an_error_row_not_a_lost_instance(tmp_path, capsys, monkeypatch):
    cfg = _slow_config(tmp_path, 15, delay=0.0)
    monkeypatch.setenv("NCPROOFS_TEST_LOG", str(tmp_path / "log"))
    monkeypatch.syspath_prepend(str(tmp_path))
    rc, out, _ = _run_cli(["sweep", str(cfg), "--workers", "1", "--quiet", "--worst", "3"], capsys)
    assert rc == 1
    _check_results(_rows(tmp_path / "slow.sqlite"), 15)
    assert "ERROR 1, REFUTED 3, INCONCLUSIVE 0, VERIFIED 11" in out
    # worst first: the ERROR row, then the REFUTED ones (i = 0, 7, 14) by score, largest first
    lines = [ln for ln in out.splitlines() if ln.startswith("| ") and "test.slow" in ln]
    assert [ln.split(" | ")[3] for ln in lines] == ["13", "14", "7"]


# ---- summary and tables ---------------------------------------------------------------------

def test_summary_and_table_export(tmp_path, capsys):
    cfg = _write(tmp_path / "etf.toml", ETF_CONFIG)
    db = tmp_path / "etf.sqlite"
    _run_cli(["sweep", str(cfg), "--workers", "1", "--quiet"], capsys)
    rc, out, _ = _run_cli(["sweep", "--summary", "--store", str(db)], capsys)
    assert rc == 0
    assert "stored: 8" in out and "REFUTED 4" in out and "VERIFIED 4" in out and "overall: REFUTED" in out
    rc, out, _ = _run_cli(["sweep", str(cfg), "--summary"], capsys)  # restricted to the config, with pending
    assert "stored: 8, pending: 0" in out
    half = _write(tmp_path / "etf2.toml", ETF_CONFIG.replace("k = [2, 3]", "k = [2, 3, 4]"))
    rc, out, _ = _run_cli(["sweep", str(half), "--summary", "--store", str(db)], capsys)
    assert "stored: 8, pending: 4" in out
    csv_path = tmp_path / "t.csv"
    _run_cli(["sweep", str(cfg), "--summary", "--export", str(csv_path), "--format", "csv"], capsys)
    table = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    assert len(table) == 8
    assert set(table[0]) >= {"key", "k", "noise", "seed", "verdict", "score"}
    assert [r["verdict"] for r in table[:4]] == ["REFUTED"] * 4  # worst first
    tex = tmp_path / "t.tex"
    _run_cli(["sweep", str(cfg), "--summary", "--export", str(tex), "--format", "latex"], capsys)
    # header + 8 rows in each tabular (a table wider than the line is split, never scaled: docs/outputs.md)
    first = tex.read_text().split("\\end{tabular}")[0]
    assert "\\toprule" in first and first.count("\\\\") == 9
    js = tmp_path / "t.json"
    _run_cli(["sweep", str(cfg), "--summary", "--export", str(js), "--format", "json"], capsys)
    doc = json.loads(js.read_text())  # pandas orient="split": columns, index, data (tests/test_sweep_export.py)
    assert set(doc) == {"columns", "index", "data"} and len(doc["data"]) == 8


def test_progress_line_shows_done_total_and_eta():
    buf = io.StringIO()
    prog = sweep.SweepProgress(total=10, already=4, stream=buf)
    prog.PLAIN_EVERY = 0.0
    prog.start()
    prog.update("VERIFIED")
    prog.update("REFUTED")
    text = buf.getvalue()
    assert "10 instances, 4 already stored, 6 to compute" in text
    assert "5/10" in text and "6/10" in text and " 60.0%" in text and "ETA" in text and "REFUTED 1" in text
    for _ in range(4):
        prog.update("VERIFIED")
    assert buf.getvalue().rstrip().splitlines()[-1].split("ETA ")[1].startswith("00:00")


# ---- bad input --------------------------------------------------------------------------

@pytest.mark.parametrize("text, message", [
    ("[sweep\nfamily = 1", "malformed TOML"),
    ("[sweep]\nfamily = \"no.such\"\n", "sweep.family: unknown sweepable 'no.such' (registered: "),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\n[parameters]\nk = [2]\nlam = [1.0]\n",
     "parameters.lam: unknown parameter for family 'geometry.noisy-etf' (known: k, d, noise, r, tol)"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\n[parameters]\nnoise = 0.1\n", "parameters.k is required"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\nmodee = \"grid\"\n[parameters]\nk = 2\n", "sweep.modee: unknown key"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\nmode = \"latin\"\n[parameters]\nk = 2\n", "sweep.mode must be"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\nmode = \"random\"\n[parameters]\nk = 2\n",
     "sweep.samples must be an integer >= 1 in random mode"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\n[parameters]\nk = [1, 2]\n",
     "parameters: invalid instance (k=1): k must be >= 2, got 1"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\n[parameters]\nk = 2\nnoise = [-0.1]\n",
     "noise must be >= 0, got -0.1"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\n[parameters]\nk = 2\nnoise = {min = 0.0, max = 1.0, log = true, num = 3}\n",
     "parameters.noise: log = true needs min > 0"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\n[parameters]\nk = 2\nnoise = {min = 0.0, max = 1.0}\n",
     "parameters.noise.num must be an integer >= 1 for a grid range"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\nseeds = 0\n[parameters]\nk = 2\n", "sweep.seeds must be >= 1"),
    ("[sweep]\nfamily = \"x\"\nmodules = [\"no_such_module_xyz\"]\n",
     "sweep.modules: cannot import 'no_such_module_xyz'"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\n[parameters]\nk = 2\n[extra]\n", "extra: unknown table"),
    ("[parameters]\nk = 2\n", "[sweep] table is missing"),
])
def test_bad_config_is_a_one_line_error_naming_the_key(tmp_path, capsys, text, message):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    rc, out, err = _run_cli(["sweep", str(cfg), "--quiet"], capsys)
    assert rc == 2
    assert err.startswith("ncproofs: error: ") and message in err, err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "bad.sqlite").exists()  # nothing written for a bad config


def test_bad_command_line(tmp_path, capsys):
    rc, _, err = _run_cli(["sweep", str(tmp_path / "missing.toml")], capsys)
    assert rc == 2 and "missing.toml: config file not found" in err
    rc, _, err = _run_cli(["sweep"], capsys)
    assert rc == 2 and "sweep needs CONFIG" in err
    rc, _, err = _run_cli(["sweep", "--summary"], capsys)
    assert rc == 2 and "--summary needs CONFIG or --store PATH" in err
    rc, _, err = _run_cli(["sweep", "--summary", "--store", str(tmp_path / "none.sqlite")], capsys)
    assert rc == 2 and "no such store" in err
    cfg = _write(tmp_path / "etf.toml", ETF_CONFIG)
    rc, _, err = _run_cli(["sweep", str(cfg), "--workers", "0"], capsys)
    assert rc == 2 and "--workers must be >= 1" in err
    notdb = tmp_path / "junk.sqlite"
    notdb.write_bytes(b"this is not a database" * 100)
    rc, _, err = _run_cli(["sweep", str(cfg), "--store", str(notdb)], capsys)
    assert rc == 2 and "not a usable SQLite store" in err


def test_registry_rejects_bad_registrations():
    with pytest.raises(ValueError, match="already registered"):
        sweep.register_sweepable("geometry.noisy-etf", lambda p, s: {"verdict": "VERIFIED"})
    with pytest.raises(ValueError, match="defaults for 'x' name unknown parameters: b"):
        sweep.register_sweepable("x", lambda p, s: {}, parameters=("a",), defaults={"b": 1})


def test_bad_return_values_become_error_rows():
    sweep.register_sweepable("test.badverdict", lambda p, s: {"verdict": "PROBABLY"}, replace=True)
    sweep.register_sweepable("test.notadict", lambda p, s: 3, replace=True)
    res, _, _ = sweep._execute("test.badverdict", [], {}, 0)
    assert res["verdict"] == "ERROR" and "returned verdict 'PROBABLY'" in res["reason"]
    res, _, _ = sweep._execute("test.notadict", [], {}, 0)
    assert res["verdict"] == "ERROR" and "must return a dict with a 'verdict'" in res["reason"]
    res, _, _ = sweep._execute("test.unregistered", [], {}, 0)
    assert res["verdict"] == "ERROR" and "not registered in this worker" in res["reason"]


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_unreachable_scheduler_is_a_clear_error_within_the_timeout(tmp_path):
    pytest.importorskip("distributed", reason="dask[distributed] (optional extra) is not installed")
    cfg = _write(tmp_path / "etf.toml", ETF_CONFIG)
    addr = f"tcp://127.0.0.1:{_free_port()}"
    # the subprocess timeout is only a hang guard; the command itself gives up after --connect-timeout
    res = subprocess.run([sys.executable, "-m", "proofs_check.cli", "sweep", str(cfg), "--scheduler", addr,
                          "--connect-timeout", "2"], env=_env(), capture_output=True, text=True, timeout=90)
    assert res.returncode == 2
    assert f"ncproofs: error: --scheduler: cannot reach the Dask scheduler at {addr} within 2 s" in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "etf.sqlite").exists()


def test_scheduler_without_dask_installed_says_how_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    cfg = _write(tmp_path / "etf.toml", ETF_CONFIG)
    rc, _, err = _run_cli(["sweep", str(cfg), "--scheduler", "tcp://127.0.0.1:1"], capsys)
    assert rc == 2 and "Dask is not installed" in err and "pip install 'dask[distributed]'" in err


# ---- Dask ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dask_cluster():
    distributed = pytest.importorskip("distributed", reason="dask[distributed] (optional extra) is not installed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=40)
    try:
        yield cluster
    finally:
        cluster.close()


def test_dask_sweep_matches_local_and_resumes(tmp_path, capsys, monkeypatch, dask_cluster):
    cfg = _write(tmp_path / "etf.toml", ETF_CONFIG.replace("k = [2, 3]", "k = [2, 3, 4]"))
    local_db, dask_db = tmp_path / "local.sqlite", tmp_path / "dask.sqlite"
    _run_cli(["sweep", str(cfg), "--store", str(local_db), "--workers", "1", "--quiet"], capsys)
    # half of it locally first, then the whole config on Dask: only the rest is computed there
    part = _write(tmp_path / "part.toml", ETF_CONFIG)
    _run_cli(["sweep", str(part), "--store", str(dask_db), "--workers", "1", "--quiet"], capsys)
    rc, out, err = _run_cli(["sweep", str(cfg), "--store", str(dask_db), "--scheduler",
                             dask_cluster.scheduler_address, "--quiet"], capsys)
    assert rc == 1, err
    assert "12 instances (8 already stored, 4 computed)" in out
    local = {r[0]: r[1:5] for r in _rows(local_db)}
    remote = {r[0]: r[1:5] for r in _rows(dask_db)}
    assert remote == local  # same keys, params, seeds, verdicts, scores
    con = sqlite3.connect(dask_db)
    workers = {w for (w,) in con.execute("SELECT DISTINCT worker FROM results WHERE run_id = 2")}
    sched = con.execute("SELECT scheduler FROM runs WHERE run_id = 2").fetchone()[0]
    con.close()
    assert sched == f"dask:{dask_cluster.scheduler_address}"
    assert str(os.getpid()) not in {w.rsplit(":", 1)[1] for w in workers}  # computed in the Dask workers
    # DASK_SCHEDULER_ADDRESS is used when --scheduler is not given
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", dask_cluster.scheduler_address)
    env_db = tmp_path / "env.sqlite"
    rc, out, _ = _run_cli(["sweep", str(part), "--store", str(env_db), "--quiet"], capsys)
    con = sqlite3.connect(env_db)
    assert con.execute("SELECT scheduler FROM runs").fetchone()[0] == f"dask:{dask_cluster.scheduler_address}"
    con.close()
    assert len(_rows(env_db)) == 8


def test_ctrl_c_stops_cleanly_and_the_rerun_completes(tmp_path):
    n = 40
    cfg = _slow_config(tmp_path, n, delay=0.1)
    db = tmp_path / "slow.sqlite"
    cmd = [sys.executable, "-m", "proofs_check.cli", "sweep", str(cfg), "--store", str(db), "--workers", "2"]
    proc = subprocess.Popen(cmd, env=_env(NCPROOFS_TEST_LOG=tmp_path / "log"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if db.exists() and len(_rows(db)) >= 6:
                    break
            except sqlite3.OperationalError:
                pass
            time.sleep(0.05)
        assert proc.poll() is None
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130
    stored = len(_rows(db))
    assert f"ncproofs: interrupted: {stored}/{n} instances stored" in err and "rerun the same command" in err
    assert "Traceback" not in err
    con = sqlite3.connect(db)
    assert con.execute("SELECT status, computed FROM runs").fetchall() == [("interrupted", stored)]
    con.close()
    res = subprocess.run(cmd, env=_env(NCPROOFS_TEST_LOG=tmp_path / "log2"), capture_output=True, text=True,
                         timeout=180)
    assert f"{n} instances ({stored} already stored, {n - stored} computed)" in res.stdout
    _check_results(_rows(db), n)


def test_random_integer_log_range_stays_inside_and_covers_the_ends(tmp_path):
    spec = sweep.parse_config({"sweep": {"family": "geometry.noisy-etf", "mode": "random", "samples": 400},
                               "parameters": {"k": {"min": 2, "max": 11, "integer": True, "log": True}}})
    ks = [d["k"] for d in spec._random()]  # the raw draws
    assert len(ks) == 400
    assert all(isinstance(k, int) and 2 <= k <= 11 for k in ks)
    assert min(ks) == 2 and max(ks) == 11
    # log-uniform: small values are more frequent than large ones
    assert sum(k <= 4 for k in ks) > sum(k >= 8 for k in ks)
    # identical draws are one instance (same key), computed and stored once
    assert sorted(i.params["k"] for i in spec.instances()) == list(range(2, 12))


# ---- faults and limits: workers end with the sweep, shared stores, silent schedulers ---------

def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``, from /proc: the sweep runs in its
    own session (start_new_session), so this finds its workers and any helper they started
    (a forkserver or resource tracker would be found too), whoever their parent is now."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in (b"Z", b"X"):
            out.append(int(entry))
    return out


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    if int(f.read().rsplit(b")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except OSError:
                pass
    return out


def _wait_rows(db: Path, proc, at_least: int, limit: float = 60) -> int:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if db.exists() and len(_rows(db)) >= at_least:
                return len(_rows(db))
        except sqlite3.OperationalError:
            pass
        time.sleep(0.05)
    return -1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killing_the_sweep_process_alone_ends_its_workers(tmp_path, sig):
    """The signal goes to the sweep process only (not its group), while both workers are inside
    a 60 s instance: the workers must notice and exit by themselves, nothing of the sweep may
    remain after 5 s, and what was stored is complete and stored once; the rerun computes
    exactly the rest (the dead sweep's leases do not block it)."""
    n = 12
    cfg = _slow_config(tmp_path, n, delay=0.5)
    db = tmp_path / "slow.sqlite"
    cmd = [sys.executable, "-m", "proofs_check.cli", "sweep", str(cfg), "--store", str(db), "--workers", "2"]
    proc = subprocess.Popen(cmd, env=_env(NCPROOFS_TEST_LOG=tmp_path / "run1.log", NCPROOFS_TEST_HANG_FROM=2),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert _wait_rows(db, proc, 2) >= 2, "the sweep ended or stalled before it could be killed"
        deadline = time.monotonic() + 10  # until both workers are inside a hanging instance (i >= 2)
        while time.monotonic() < deadline and len((tmp_path / "run1.log").read_text().split()) < 4:
            time.sleep(0.05)
        workers = _children(proc.pid)
        assert len(workers) == 2  # two worker processes, no forkserver / resource tracker
        os.kill(proc.pid, sig)  # the sweep process alone
        _, err = proc.communicate(timeout=30)
        deadline = time.monotonic() + 5
        while _group_members(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = _group_members(proc.pid)
        assert not left, f"processes of the sweep still alive 5 s after {sig.name}: {left}"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if proc.poll() is None:
            proc.wait()
    rows = _rows(db)
    done1 = {json.loads(r[1])["i"] for r in rows}
    assert done1 == {0, 1}  # the two short instances; the hanging ones were abandoned
    for r in rows:  # every stored result complete and right
        i = json.loads(r[1])["i"]
        assert r[3] == ("ERROR" if i == 13 else "REFUTED" if i % 7 == 0 else "VERIFIED")
        assert json.loads(r[5])["square"] == i * i
    con = sqlite3.connect(db)
    status = con.execute("SELECT status, computed FROM runs").fetchall()
    con.close()
    if sig == signal.SIGTERM:
        assert proc.returncode == 128 + signal.SIGTERM
        assert err.strip().splitlines()[-1] == (f"ncproofs: stopped by SIGTERM: {len(done1)}/{n} instances stored in "
                                                f"{db}; rerun the same command to resume")
        assert "Traceback" not in err
        assert status == [("interrupted", len(done1))]
    else:
        assert proc.returncode == -signal.SIGKILL
        assert status == [("running", 0)]  # killed: the store says it never finished
    started = time.monotonic()
    res = subprocess.run(cmd, env=_env(NCPROOFS_TEST_LOG=tmp_path / "run2.log"), capture_output=True, text=True,
                         timeout=120)
    assert f"{n} instances ({len(done1)} already stored, {n - len(done1)} computed)" in res.stdout, res.stderr
    recomputed = [int(x) for x in (tmp_path / "run2.log").read_text().split()]
    assert sorted(recomputed) == sorted(set(range(n)) - done1)  # each of the rest once, nothing twice
    # the dead sweep's leases were taken over at once, not after their 60 s expiry
    assert time.monotonic() - started < sweep.LEASE_SECONDS / 2
    assert len({r[0] for r in _rows(db)}) == len(_rows(db)) == n


CONCURRENT_MODULE = """
import os, time
from proofs_check.sweep import register_sweepable

def work(params, seed):
    with open(os.environ["NCPROOFS_TEST_LOG"], "a") as f:  # one line per computation: "i pid"
        f.write(f"{params['i']} {os.getpid()}\\n")
    time.sleep(params["delay"])
    return {"verdict": "VERIFIED", "score": params["i"]}

register_sweepable("test.shared", work, parameters=("i", "delay"), defaults={"delay": 0.0})
"""


def test_two_sweeps_on_one_store_compute_each_instance_once(tmp_path):
    n = 16
    _write(tmp_path / "sharedmod.py", CONCURRENT_MODULE)
    cfg = _write(tmp_path / "shared.toml", f"""
        [sweep]
        family = "test.shared"
        modules = ["sharedmod"]
        [parameters]
        i = {{min = 0, max = {n - 1}, integer = true}}
        delay = 0.25
        """)
    db = tmp_path / "shared.sqlite"
    log = tmp_path / "work.log"
    procs = [subprocess.Popen([sys.executable, "-m", "proofs_check.cli", "sweep", str(cfg), "--store", str(db),
                               "--workers", str(w), "--quiet"], env=_env(NCPROOFS_TEST_LOG=log),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
             for w in (1, 2)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            outs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    lines = log.read_text().split("\n")
    computed_i = [int(ln.split()[0]) for ln in lines if ln.strip()]
    assert sorted(computed_i) == list(range(n))  # every instance computed exactly once across both sweeps
    assert len(_rows(db)) == n
    import re

    mine = []
    for out in outs:
        m = re.search(rf"{n} instances \((\d+) already stored, (\d+) computed(?:, (\d+) by another sweep on the "
                      r"same store)?\)", out)
        assert m, out
        # a sweep that starts late (a loaded machine) finds some instances already stored by the other
        stored, here, other = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
        assert stored + here + other == n
        mine.append(here)
    assert sum(mine) == n  # each instance computed by exactly one of the two
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM leases").fetchone()[0] == 0  # released at the end
    assert sorted(c for (c,) in con.execute("SELECT computed FROM runs")) == sorted(mine)
    con.close()


def test_leases_are_exclusive_and_expire():
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.sqlite")
        a, b = sweep.Store(path), sweep.Store(path)
        try:
            owner_a = "elsewhere|1|a"  # another host: only expiry frees it
            claimed, done, busy = a.claim(["k1", "k2"], owner_a, ttl=0.5)
            assert claimed == {"k1", "k2"} and not done and not busy
            claimed, done, busy = b.claim(["k1", "k3"], "elsewhere|2|b", ttl=30)
            assert claimed == {"k3"} and busy == {"k1"}
            time.sleep(0.6)  # owner_a stopped renewing: its leases expire
            claimed, _, busy = b.claim(["k1", "k2"], "elsewhere|2|b", ttl=30)
            assert claimed == {"k1", "k2"} and not busy
            # a lease of a dead process on this host is taken over at once
            dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                                  text=True).stdout.strip()
            a.claim(["k9"], f"{socket.gethostname()}|{dead}|x", ttl=3600)
            claimed, _, busy = b.claim(["k9"], "elsewhere|2|b", ttl=30)
            assert claimed == {"k9"}
            live = f"{socket.gethostname()}|{os.getpid()}|y"  # this process: alive
            a.claim(["k10"], live, ttl=3600)
            assert b.claim(["k10"], "elsewhere|2|b")[2] == {"k10"}
        finally:
            a.close()
            b.close()


class _SilentServer:
    """A TCP listener on 127.0.0.1 that accepts and never answers (or answers like HTTP)."""

    def __init__(self, mode: str):
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.mode, self.conns = mode, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            if self.mode == "banner":  # a non-Dask service that speaks first (like SSH)
                c.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

    def close(self):
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.mark.parametrize("mode", ["silent", "banner"])
def test_silent_or_foreign_service_as_scheduler_fails_within_the_connect_timeout(tmp_path, mode):
    pytest.importorskip("distributed", reason="dask[distributed] (optional extra) is not installed")
    cfg = _write(tmp_path / "etf.toml", ETF_CONFIG)
    server = _SilentServer(mode)
    try:
        t0 = time.monotonic()
        res = subprocess.run([sys.executable, "-m", "proofs_check.cli", "sweep", str(cfg), "--scheduler",
                              f"tcp://127.0.0.1:{server.port}", "--connect-timeout", "1"], env=_env(),
                             capture_output=True, text=True, timeout=60)
        elapsed = time.monotonic() - t0
    finally:
        server.close()
    assert res.returncode == 2, res.stderr
    # never a hang: subprocess.run's timeout=60 above fails the test. How close the wait stays to
    # --connect-timeout depends on the machine's load (interpreter start-up), so it is not asserted
    # here (speed is measured by benchmarks, never by timed assertions); the message says which bound held.
    assert elapsed < 60
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert lines[0].startswith(f"ncproofs: error: --scheduler: cannot reach the Dask scheduler at "
                               f"tcp://127.0.0.1:{server.port} within 1 s (")
    assert ("sent nothing" in lines[0]) if mode == "silent" else ("does not speak the Dask protocol" in lines[0])
    assert not (tmp_path / "etf.sqlite").exists()


@pytest.mark.parametrize("value, message", [
    ("0", "--connect-timeout must be a finite number > 0, got 0.0"),
    ("-1", "--connect-timeout must be a finite number > 0, got -1.0"),
    ("inf", "--connect-timeout must be a finite number"),
    ("nan", "--connect-timeout must be a finite number"),
])
def test_connect_timeout_must_be_finite_and_positive(tmp_path, capsys, value, message):
    cfg = _write(tmp_path / "etf.toml", ETF_CONFIG)
    rc, _, err = _run_cli(["sweep", str(cfg), "--scheduler", "tcp://127.0.0.1:1", f"--connect-timeout={value}"],
                          capsys)
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
    with pytest.raises(ValueError, match="connect-timeout must be a finite number > 0"):
        sweep.run_sweep(sweep.load_config(str(cfg)), str(tmp_path / "x.sqlite"), connect_timeout=float(value))


def test_lost_scheduler_marks_the_run_interrupted_and_resume_completes_it(tmp_path):
    pytest.importorskip("distributed", reason="dask[distributed] (optional extra) is not installed")
    n = 12
    cfg = _slow_config(tmp_path, n, delay=0.3)
    db = tmp_path / "slow.sqlite"
    port = _free_port()
    env = _env(NCPROOFS_TEST_LOG=tmp_path / "log", PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}")
    dask_procs = [
        subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port",
                          str(port), "--no-dashboard"], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True),
        subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", f"tcp://127.0.0.1:{port}",
                          "--nthreads", "1", "--no-nanny", "--no-dashboard"], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True),
    ]
    try:
        proc = subprocess.Popen([sys.executable, "-m", "proofs_check.cli", "sweep", str(cfg), "--store", str(db),
                                 "--scheduler", f"tcp://127.0.0.1:{port}", "--connect-timeout", "30", "--quiet"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert _wait_rows(db, proc, 2, limit=90) >= 2, proc.stderr.read() if proc.poll() is not None else ""
            os.killpg(dask_procs[0].pid, signal.SIGKILL)  # the scheduler dies
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        for p in dask_procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    assert proc.returncode == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ncproofs: error: lost the Dask scheduler at tcp://127.0.0.1:{port}")
    assert "rerun the same command to resume" in lines[0]
    stored = len(_rows(db))
    con = sqlite3.connect(db)
    assert con.execute("SELECT status, computed FROM runs").fetchall() == [("interrupted", stored)]
    con.close()
    res = subprocess.run([sys.executable, "-m", "proofs_check.cli", "sweep", str(cfg), "--store", str(db),
                          "--workers", "2", "--quiet"], env=_env(NCPROOFS_TEST_LOG=tmp_path / "log2"),
                         capture_output=True, text=True, timeout=120)
    assert f"{n} instances ({stored} already stored, {n - stored} computed)" in res.stdout, res.stderr
    _check_results(_rows(db), n)


# ---- config validation: one line, exit 2, before any work ----------------------------------

def test_directory_as_config_and_damaged_store_are_one_line_errors(tmp_path, capsys):
    rc, _, err = _run_cli(["sweep", str(tmp_path)], capsys)
    assert rc == 2 and err == f"ncproofs: error: {tmp_path}: is a directory, not a sweep config (a TOML file)\n"
    cfg = _write(tmp_path / "etf.toml", ETF_CONFIG)
    db = tmp_path / "etf.sqlite"
    assert _run_cli(["sweep", str(cfg), "--workers", "1", "--quiet"], capsys)[0] == 1
    data = bytearray(db.read_bytes())
    assert len(data) > 4096
    data[100:] = b"\xa5" * (len(data) - 100)  # keep the 100-byte header, ruin every page
    db.write_bytes(bytes(data))
    for argv in (["sweep", str(cfg), "--workers", "1", "--quiet"], ["sweep", str(cfg), "--summary"],
                 ["sweep", "--summary", "--store", str(db)]):
        rc, _, err = _run_cli(argv, capsys)
        assert rc == 2, (argv, err)
        assert err.startswith(f"ncproofs: error: --store {db}: not a usable SQLite store (") and err.count("\n") == 1
    rc, _, err = _run_cli(["sweep", str(cfg), "--store", str(tmp_path)], capsys)
    assert rc == 2 and f"--store {tmp_path}: is a directory" in err


@pytest.mark.parametrize("text, message", [
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\nseeds = [-1, -2]\n[parameters]\nk = 2\n",
     "sweep.seeds must be integers >= 0 (and < 2^63), got -1"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\nseeds = []\n[parameters]\nk = 2\n",
     "sweep.seeds must be a non-empty list of integers or a count, got []"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\n[parameters]\nk = []\n", "parameters.k: empty list of values"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\nmodules = []\nsample_seed = -3\n[parameters]\nk = 2\n",
     "sweep.sample_seed must be an integer >= 0"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\nseeds = 2\n[parameters]\nk = {min = 2, max = 2001, integer = true}\n"
     "noise = {min = 0.0, max = 1.0, num = 2000}\n",
     "the sweep has 8000000 instances (k: 2000 x noise: 2000 x 2 seed(s)), more than the limit of 1000000"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\n[parameters]\nk = {min = 2, max = 1000000000000, integer = true}\n",
     "the sweep has 999999999999 instances"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\nmode = \"random\"\nsamples = 100\nseeds = 3\nmax_instances = 10\n"
     "[parameters]\nk = 2\n", "the sweep has 300 instances (100 samples x 3 seed(s)), more than the limit of 10"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\nseeds = 100000000000\n[parameters]\nk = 2\n",
     "sweep.seeds: 100000000000 seeds alone exceed the limit of 1000000"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\nworkers = 100000\n[parameters]\nk = 2\n", "sweep.workers must be <="),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\nstore = \"\"\n[parameters]\nk = 2\n", "sweep.store must be a non-empty"),
    ("[sweep]\nfamily = \"geometry.noisy-etf\"\nmax_instances = 0\n[parameters]\nk = 2\n",
     "sweep.max_instances must be an integer >= 1, got 0"),
    ("\xff\xfe not text", "not a TOML file (not UTF-8 text"),
])
def test_bad_config_values_are_refused_before_any_work(tmp_path, capsys, text, message):
    cfg = tmp_path / "bad.toml"
    cfg.write_bytes(text.encode("latin-1"))
    t0 = time.perf_counter()
    rc, out, err = _run_cli(["sweep", str(cfg), "--quiet"], capsys)
    assert time.perf_counter() - t0 < 2.0  # refused from the config alone (a 1e12 grid is never built)
    assert rc == 2 and message in err, err
    assert err.startswith("ncproofs: error: ") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "bad.sqlite").exists()


def test_max_instances_can_be_raised_and_counts_are_exact(tmp_path):
    spec = sweep.parse_config({"sweep": {"family": "geometry.noisy-etf", "seeds": 3, "max_instances": 12},
                               "parameters": {"k": [2, 3], "noise": {"min": 0.0, "max": 1.0, "num": 2}}})
    assert spec.size() == 12 and len(spec.instances()) == 12
    with pytest.raises(sweep.UsageError, match="the sweep has 12 instances .* limit of 11"):
        sweep.parse_config({"sweep": {"family": "geometry.noisy-etf", "seeds": 3, "max_instances": 11},
                            "parameters": {"k": [2, 3], "noise": {"min": 0.0, "max": 1.0, "num": 2}}})


TRAP_MODULE = """
import os
from pathlib import Path
Path(os.environ["NCPROOFS_TRAP"]).write_text("imported")  # proves the module ran
from proofs_check.sweep import register_sweepable

def f(params, seed):
    return {"verdict": "VERIFIED", "score": params["x"]}

register_sweepable("test.trap", f, parameters=("x", "y"), defaults={"y": 7}, version="3")
"""


def test_summary_and_export_never_import_the_config_modules(tmp_path):
    _write(tmp_path / "trapmod.py", TRAP_MODULE)
    cfg = _write(tmp_path / "trap.toml", """
        [sweep]
        family = "test.trap"
        modules = ["trapmod"]
        [parameters]
        x = [1, 2, 3]
        """)
    trap = tmp_path / "trap.flag"
    env = _env(NCPROOFS_TRAP=trap)
    base = [sys.executable, "-m", "proofs_check.cli", "sweep", str(cfg)]
    res = subprocess.run(base + ["--workers", "1", "--quiet"], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert trap.exists()  # a run imports them (they are code, like a conftest)
    trap.unlink()
    bigger = _write(tmp_path / "trap2.toml", cfg.read_text().replace("x = [1, 2, 3]", "x = [1, 2, 3, 4]"))
    res = subprocess.run(base + ["--summary"], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "stored: 3, pending: 0" in res.stdout  # keys from the version/defaults the store recorded
    res = subprocess.run([sys.executable, "-m", "proofs_check.cli", "sweep", str(bigger), "--summary",
                          "--store", str(tmp_path / "trap.sqlite"), "--export", str(tmp_path / "t.csv"),
                          "--format", "csv"], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "stored: 3, pending: 1" in res.stdout
    assert len(list(csv.DictReader(io.StringIO((tmp_path / "t.csv").read_text())))) == 3
    assert not trap.exists(), "--summary/--export imported the config's modules"


def test_export_path_is_checked_before_the_sweep_runs(tmp_path, capsys):
    cfg = _write(tmp_path / "etf.toml", ETF_CONFIG)
    for path, message in [(tmp_path / "no" / "t.csv", f"--export: directory {tmp_path / 'no'} does not exist"),
                          (tmp_path, f"--export: {tmp_path} is a directory"),
                          (Path("/proc/ncproofs-test/t.csv"), "--export: directory /proc/ncproofs-test does not exist")]:
        rc, out, err = _run_cli(["sweep", str(cfg), "--workers", "1", "--quiet", "--export", str(path)], capsys)
        assert rc == 2 and message in err and err.count("\n") == 1, err
        assert not (tmp_path / "etf.sqlite").exists()  # nothing computed
    rc, _, _ = _run_cli(["sweep", str(cfg), "--workers", "1", "--quiet", "--export", str(tmp_path / "t.md")], capsys)
    assert rc == 1 and (tmp_path / "t.md").read_text().count("geometry.noisy-etf") == 8
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []  # no temp file left


def test_public_api_validates_its_arguments(tmp_path):
    with pytest.raises(TypeError, match="fn must be callable"):
        sweep.register_sweepable("test.api", fn="x")
    with pytest.raises(TypeError, match="name must be a str"):
        sweep.register_sweepable(3, lambda p, s: {})
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        sweep.register_sweepable("", lambda p, s: {})
    with pytest.raises(TypeError, match="parameters must be a list of names"):
        sweep.register_sweepable("test.api", lambda p, s: {}, parameters="abc")
    with pytest.raises(ValueError, match="parameters name 'a' twice"):
        sweep.register_sweepable("test.api", lambda p, s: {}, parameters=("a", "a"))
    with pytest.raises(TypeError, match="defaults must be a dict"):
        sweep.register_sweepable("test.api", lambda p, s: {}, defaults=[1])
    with pytest.raises(ValueError, match=r"defaults\['a'\] must be a finite number"):
        sweep.register_sweepable("test.api", lambda p, s: {}, defaults={"a": float("nan")})
    with pytest.raises(TypeError, match="validate must be callable"):
        sweep.register_sweepable("test.api", lambda p, s: {}, validate=3)
    with pytest.raises(TypeError, match="version must be a non-empty str"):
        sweep.register_sweepable("test.api", lambda p, s: {}, version=None)
    with pytest.raises(TypeError, match="replace must be True or False"):
        sweep.register_sweepable("test.api", lambda p, s: {}, replace="yes")
    assert "test.api" not in sweep.sweepables()  # nothing half-registered
    with pytest.raises(ValueError, match="checks must be a non-empty list"):
        sweep.result_from_checks([])
    from proofs_check.core import hypothesis_fails

    with pytest.raises(TypeError, match="score must be a number or None, got str"):
        sweep.result_from_checks([hypothesis_fails("h", "fails")], score="bad")
    with pytest.raises(TypeError, match="res must be a core.ClaimResult"):
        sweep.result_from_claim(object())
    with pytest.raises(ValueError, match="seed must be an integer in"):
        sweep.instance_key("f", "1", {}, -1)
    with pytest.raises(TypeError, match="data must be a dict"):
        sweep.parse_config([1, 2])
    spec = sweep.parse_config({"sweep": {"family": "geometry.noisy-etf"}, "parameters": {"k": 2}})
    with pytest.raises(ValueError, match="workers must be in"):
        sweep.run_sweep(spec, str(tmp_path / "s.sqlite"), workers=0)
    with pytest.raises(TypeError, match="spec must be a SweepSpec"):
        sweep.run_sweep({"sweep": {}}, str(tmp_path / "s.sqlite"))
    assert not (tmp_path / "s.sqlite").exists()
    with pytest.raises(ValueError, match="worst_n must be an integer >= 0"):
        sweep.summary_text([], worst_n=-1)
    with pytest.raises(ValueError, match="fmt must be one of"):
        sweep.summary_text([], fmt="html")


CRASH_MODULE = """
import os, time
from proofs_check.sweep import register_sweepable

def f(params, seed):
    time.sleep(0.1)
    if params["i"] == 3:
        os._exit(3)  # the worker process dies (a segfault, the OOM killer ...)
    return {"verdict": "VERIFIED", "score": params["i"]}

register_sweepable("test.workercrash", f, parameters=("i",))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_an_instance_that_kills_its_worker_is_stored_as_error_and_the_sweep_finishes(tmp_path, capsys):
    _write(tmp_path / "workercrashmod.py", CRASH_MODULE)
    cfg = _write(tmp_path / "c.toml", """
        [sweep]
        family = "test.workercrash"
        modules = ["workercrashmod"]
        [parameters]
        i = {min = 0, max = 7, integer = true}
        """)
    rc, _, err = _run_cli(["sweep", str(cfg), "--workers", "2", "--quiet"], capsys)
    assert rc == 1  # an ERROR instance
    assert "Traceback" not in err
    con = sqlite3.connect(tmp_path / "c.sqlite")
    (status, computed), = con.execute("SELECT status, computed FROM runs").fetchall()
    assert status == "finished" and computed == 8
    rows = {json.loads(p)["i"]: (v, r) for p, v, r in con.execute(
        "SELECT params, verdict, json_extract(result, '$.reason') FROM results")}
    assert sorted(rows) == list(range(8))
    assert rows[3][0] == "ERROR" and "worker process died (exit status 3) while computing this instance" in rows[3][1]
    assert all(rows[i][0] == "VERIFIED" for i in range(8) if i != 3)
    assert con.execute("SELECT count(*) FROM leases").fetchone()[0] == 0
    con.close()
    workers_left = []
    for pid in _children(os.getpid()):
        try:
            if b"_worker_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                workers_left.append(pid)
        except OSError:
            pass
    assert not workers_left  # the replacement and the surviving worker were stopped and reaped


ALWAYS_CRASH_MODULE = """
import os
from proofs_check.sweep import register_sweepable

def f(params, seed):
    os._exit(5)

register_sweepable("test.alwayscrash", f, parameters=("i",))
"""


def test_workers_that_always_die_end_the_sweep_as_interrupted_with_one_line(tmp_path, capsys):
    from proofs_check.sweep import localpool

    _write(tmp_path / "alwayscrashmod.py", ALWAYS_CRASH_MODULE)
    cfg = _write(tmp_path / "c.toml", """
        [sweep]
        family = "test.alwayscrash"
        modules = ["alwayscrashmod"]
        [parameters]
        i = {min = 0, max = 39, integer = true}
        """)
    rc, _, err = _run_cli(["sweep", str(cfg), "--workers", "2", "--quiet"], capsys)
    assert rc == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("ncproofs: error: a worker process died (exit status 5) while computing instance ")
    assert f"{localpool.MAX_DEATHS_IN_A_ROW} deaths in a row without a result" in err
    con = sqlite3.connect(tmp_path / "c.sqlite")
    (status, computed), = con.execute("SELECT status, computed FROM runs").fetchall()
    assert status == "interrupted"
    errors = con.execute("SELECT count(*) FROM results WHERE verdict = 'ERROR'").fetchone()[0]
    assert errors == computed == localpool.MAX_DEATHS_IN_A_ROW - 1
    assert con.execute("SELECT count(*) FROM leases").fetchone()[0] == 0
    con.close()
