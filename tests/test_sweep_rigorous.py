"""Rigorous sweeps (`rigorous = true` in [sweep], or `ncproofs sweep --rigorous`): each instance's solve report
goes through proofs_check.rigorous.apply; the stored result keeps the proven bracket; rigorous and plain results
have different instance keys and config hashes.

Reference values: the CE-UFM closed form of docs/ufm.md (s = sqrt(n lw lh); s >= 1/k: f* = log k; else
c* = log(1/s - (k - 1)), f* = -log(1 - (k - 1) s) + (k - 1) s c*), evaluated here with mpmath at 50 digits and
compared with the stored doubles exactly (fractions). Instance keys and config hashes are recomputed here from
their documented formulas, independently of proofs_check.sweep.
"""

from __future__ import annotations

import csv
import hashlib
import json
import sqlite3
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest

pytest.importorskip("flint")
mpmath = pytest.importorskip("mpmath")

from proofs_check import cli, sweep  # noqa: E402

PARAMS = """
[parameters]
loss = "ce"
k = [3, 4]
n = 2
d = 4
lw = [0.01, 0.001]
lh = 0.02
method = "closed-form"
"""
RIGOROUS = "[sweep]\nfamily = \"ufm\"\nworkers = 1\nrigorous = true\n" + PARAMS
PLAIN = "[sweep]\nfamily = \"ufm\"\nworkers = 1\n" + PARAMS
# the ufm sweepable's defaults (proofs_check/families/ufm.py) merged into each instance, as the key needs
DEFAULTS = {"lb": 0.0, "starts": 2}


def ce_closed_form(k, n, lw, lh):
    with mpmath.workdps(50):
        s = mpmath.sqrt(n * mpmath.mpf(lw) * mpmath.mpf(lh))  # the doubles, exactly
        if s >= mpmath.mpf(1) / k:
            return mpmath.log(k)
        return -mpmath.log(1 - (k - 1) * s) + (k - 1) * s * mpmath.log(1 / s - (k - 1))


def _frac(x) -> Fraction:
    if isinstance(x, mpmath.mpf):
        m, e = x.man_exp
        return Fraction(int(m)) * Fraction(2) ** int(e)
    return Fraction(x)


def _key(params: dict, seed: int, rigorous: bool) -> str:
    """The documented key: sha256 of the sorted compact JSON of family, version, params, seed (+ rigorous)."""
    obj = {"family": "ufm", "version": "1", "params": params, "seed": seed}
    if rigorous:
        obj["rigorous"] = True
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


def _expected_params() -> list[dict]:
    return [{"d": 4, "k": k, "lh": 0.02, "loss": "ce", "lw": lw, "method": "closed-form", "n": 2, **DEFAULTS}
            for k in (3, 4) for lw in (0.01, 0.001)]


def _write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def _run(argv, capsys):
    rc = cli.main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _stored(db: Path) -> dict:
    con = sqlite3.connect(db)
    try:
        return {k: (json.loads(p), json.loads(r)) for k, p, r in con.execute("SELECT key, params, result FROM results")}
    finally:
        con.close()


def test_rigorous_sweep_stores_bracket_and_summary_shows_it(tmp_path, capsys):
    cfg = _write(tmp_path / "r.toml", RIGOROUS)
    rc, out, err = _run(["sweep", str(cfg), "--quiet"], capsys)
    assert rc == 0, err
    assert "4 instances (0 already stored, 4 computed)" in out
    assert "rigorous (ball arithmetic): 4 of 4 proven, 4 with a proven bracket" in out
    assert "rigorous_lower" in out and "rigorous_upper" in out
    stored = _stored(tmp_path / "r.sqlite")
    assert set(stored) == {_key(p, 0, True) for p in _expected_params()}
    for key, (p, res) in stored.items():
        ref = _frac(ce_closed_form(p["k"], p["n"], p["lw"], p["lh"]))
        lo, hi = res["rigorous_lower"], res["rigorous_upper"]
        assert isinstance(lo, float) and isinstance(hi, float)
        assert _frac(lo) <= ref <= _frac(hi), (p, lo, hi)
        assert hi - lo <= 1e-9 * hi
        assert res["rigorous"] is True and res["verdict"] == "VERIFIED"
        assert res["rigorous_status"] == "proven bracket"
    # --summary reads the store only; the export carries the bracket as numbers
    export = tmp_path / "r.csv"
    rc, out, err = _run(["sweep", str(cfg), "--summary", "--export", str(export)], capsys)
    assert rc == 0, err
    assert "rigorous (ball arithmetic): 4 of 4 proven" in out
    head = [ln for ln in out.splitlines() if ln.startswith("| key")][0]
    assert [c.strip() for c in head.strip("|").split("|")][-4:] == ["rigorous_lower", "rigorous_upper", "rigorous",
                                                                    "reason"]
    rows = list(csv.DictReader(export.open()))
    assert len(rows) == 4
    for r in rows:
        lo, hi = stored[r["key"]][1]["rigorous_lower"], stored[r["key"]][1]["rigorous_upper"]
        assert float(r["rigorous_lower"]) == lo and float(r["rigorous_upper"]) == hi and r["rigorous"] == "True"
    # the summary table prints the bracket outward (md, 6 digits): it still holds the 50-digit value
    body = [ln for ln in out.splitlines() if ln.startswith("| ") and not ln.startswith("| key")]
    cols = [c.strip() for c in head.strip("|").split("|")]
    for ln in body:
        cell = dict(zip(cols, [c.strip() for c in ln.strip("|").split("|")]))
        ref = _frac(ce_closed_form(int(cell["k"]), 2, float(cell["lw"]), 0.02))
        assert Fraction(cell["rigorous_lower"]) <= ref <= Fraction(cell["rigorous_upper"])


def test_plain_and_rigorous_never_share_results(tmp_path, capsys):
    rig = _write(tmp_path / "r.toml", RIGOROUS)
    plain = _write(tmp_path / "p.toml", PLAIN)
    store = str(tmp_path / "s.sqlite")
    rc, out, _ = _run(["sweep", str(plain), "--store", store, "--quiet"], capsys)
    assert rc == 0 and "(0 already stored, 4 computed)" in out
    assert "rigorous (ball arithmetic)" not in out and "rigorous_lower" not in out  # plain summary as before
    rc, out, _ = _run(["sweep", str(rig), "--store", store, "--quiet"], capsys)
    assert rc == 0 and "(0 already stored, 4 computed)" in out  # the plain results are not reused
    rc, out, _ = _run(["sweep", str(plain), "--store", store, "--quiet"], capsys)
    assert rc == 0 and "(4 already stored, 0 computed)" in out
    # --rigorous on the command line is the config key: the same (stored) instances
    rc, out, _ = _run(["sweep", str(plain), "--store", store, "--quiet", "--rigorous"], capsys)
    assert rc == 0 and "(4 already stored, 0 computed)" in out
    stored = _stored(Path(store))
    assert len(stored) == 8
    plain_keys = {_key(p, 0, False) for p in _expected_params()}
    rig_keys = {_key(p, 0, True) for p in _expected_params()}
    assert set(stored) == plain_keys | rig_keys and not plain_keys & rig_keys
    assert all("rigorous_lower" not in stored[k][1] for k in plain_keys)
    assert all(stored[k][1]["rigorous"] is True for k in rig_keys)
    # the config hash recorded per run: plain as documented before (sha256 of {sweep, parameters}), rigorous
    # with the flag
    con = sqlite3.connect(store)
    hashes = [h for (h,) in con.execute("SELECT config_hash FROM runs ORDER BY run_id")]
    con.close()
    import tomllib

    doc = tomllib.loads(PLAIN)
    plain_hash = hashlib.sha256(json.dumps({"sweep": doc["sweep"], "parameters": doc["parameters"]}, sort_keys=True,
                                           default=str).encode()).hexdigest()[:16]
    rig_doc = {"sweep": {**doc["sweep"], "rigorous": True}, "parameters": doc["parameters"]}
    rig_hash = hashlib.sha256(json.dumps(rig_doc, sort_keys=True, default=str).encode()).hexdigest()[:16]
    assert hashes == [plain_hash, rig_hash, plain_hash, rig_hash]


def test_rigorous_sweep_in_worker_processes(tmp_path, capsys):
    cfg = _write(tmp_path / "r.toml", RIGOROUS.replace("k = [3, 4]", "k = [3]"))
    rc, out, err = _run(["sweep", str(cfg), "--quiet", "--workers", "2"], capsys)
    assert rc == 0, err
    stored = _stored(tmp_path / "r.sqlite")
    assert len(stored) == 2
    for p, res in stored.values():
        ref = _frac(ce_closed_form(p["k"], p["n"], p["lw"], p["lh"]))
        assert _frac(res["rigorous_lower"]) <= ref <= _frac(res["rigorous_upper"]) and res["rigorous"] is True


def test_verdict_is_the_judged_report(tmp_path):
    """A sweepable whose report claims a value 1e-6 relative above the optimum with a (wrong) float VERIFIED:
    the rigorous sweep stores REFUTED (the bracket is the witness), the plain one the float verdict."""
    from proofs_check.families import ufm as F

    def report(params, seed):
        out = F._sweep_ufm_report(params, seed).to_dict()  # a saved report (dict): the instance read back
        claims = []
        for c in out["claims"]:
            if c["id"] == "optimal-value":
                ev = dict(c["evidence"])
                ev["predicted"] = ev["predicted"] * (1 + 1e-6)
                ev["statement"] = {**ev["statement"], "predicted": ev["predicted"]}  # what the report states
                c = {**c, "evidence": ev, "verdict": "VERIFIED"}
            claims.append(c)
        return {**out, "claims": claims, "verdict": "VERIFIED"}

    def from_report(out):
        return {"verdict": out["verdict"], "reason": out["reason"]}

    sweep.register_sweepable("test.rigorous-wrong-claim", lambda p, s: from_report(report(p, s)),
                             parameters=("loss", "k", "n", "d", "lw", "lh", "lb", "method", "starts"),
                             defaults=DEFAULTS, report=report, from_report=from_report, replace=True)
    text = PARAMS.replace("k = [3, 4]", "k = 3").replace("lw = [0.01, 0.001]", "lw = 0.01")
    for rigorous, verdict in ((True, "REFUTED"), (False, "VERIFIED")):
        doc = {"sweep": {"family": "test.rigorous-wrong-claim", "rigorous": rigorous}}
        import tomllib

        doc["parameters"] = tomllib.loads(text)["parameters"]
        spec = sweep.parse_config(doc)
        sweep.run_sweep(spec, str(tmp_path / "w.sqlite"), workers=1, progress=False)
        store = sweep.Store(str(tmp_path / "w.sqlite"))
        try:
            rows = store.rows([i.key for i in spec.instances()], with_result=True)
        finally:
            store.close()
        assert [r["verdict"] for r in rows] == [verdict]
        if rigorous:
            res = rows[0]["result"]
            assert res["rigorous"] is False and res["rigorous_lower"] is not None
            assert "optimal-value" in res["reason"]


# ---- refusals, before any work -----------------------------------------------------------------------------

DEMO = """
[sweep]
family = "geometry.noisy-etf"
rigorous = true
[parameters]
k = 3
d = 3
noise = 0.0
"""


def test_family_without_reports_refused_before_the_sweep(tmp_path, capsys):
    cfg = _write(tmp_path / "d.toml", DEMO)
    rc, out, err = _run(["sweep", str(cfg), "--quiet"], capsys)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "geometry.noisy-etf" in err and "ufm" in err
    assert not (tmp_path / "d.sqlite").exists()
    cfg = _write(tmp_path / "d2.toml", DEMO.replace("rigorous = true\n", ""))
    rc, out, err = _run(["sweep", str(cfg), "--quiet", "--rigorous"], capsys)
    assert rc == 2 and "geometry.noisy-etf" in err and not (tmp_path / "d2.sqlite").exists()


def test_without_flint_exit_2_before_work(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flint" else real(name, *a))
    cfg = _write(tmp_path / "r.toml", RIGOROUS)
    rc, out, err = _run(["sweep", str(cfg), "--quiet"], capsys)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "python-flint" in err
    assert not (tmp_path / "r.sqlite").exists()


def test_rigorous_key_must_be_boolean(tmp_path, capsys):
    cfg = _write(tmp_path / "r.toml", RIGOROUS.replace("rigorous = true", 'rigorous = "yes"'))
    rc, out, err = _run(["sweep", str(cfg), "--quiet"], capsys)
    assert rc == 2 and "sweep.rigorous must be true or false" in err


def test_plain_keys_unchanged():
    p = _expected_params()[0]
    assert sweep.instance_key("ufm", "1", p, 0) == _key(p, 0, False)
    assert sweep.instance_key("ufm", "1", p, 0, rigorous=True) == _key(p, 0, True)
