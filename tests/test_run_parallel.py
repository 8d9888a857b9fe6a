"""`ncproofs run` over processes (same verdicts, output in claim order whatever the completion order)
and the cache of symbolic derivations (hit only for the same sources; never stale)."""

from __future__ import annotations

import json
import os
import time

import pytest

from proofs_check import registry, runcache, runner
from proofs_check.cli import main
from proofs_check.core import Check, Claim, Provenance, RunContext, Verdict

pytestmark = pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(),
                                reason="parallel runs need the fork start method (Linux)")


def _claim(cid, verdict=Verdict.VERIFIED, delay=0.0, evidence=None, tags=()):
    def check(ctx):
        time.sleep(delay)
        yield Check("c", verdict, f"{cid} ran in process {os.getpid()}", dict(evidence or {}, pid=os.getpid()))

    return Claim(cid, "ufm", "s", "src", Provenance.DERIVED, check, tags=tuple(tags))


def test_parallel_keeps_claim_order_and_verdicts():
    # the first claim finishes last: results, progress and callbacks still come in claim order
    claims = [_claim("ufm.t.slow", delay=0.6), _claim("ufm.t.refuted", Verdict.REFUTED),
              _claim("ufm.t.na", Verdict.NOT_APPLICABLE), _claim("ufm.t.fast")]
    seen = []
    par = runner.run_claims(claims, RunContext(), progress=False, workers=3, on_result=lambda r: seen.append(r.claim.id))
    ser = runner.run_claims(claims, RunContext(), progress=False, workers=1)
    assert [r.claim.id for r in par.results] == [c.id for c in claims] == seen
    assert [r.verdict for r in par.results] == [r.verdict for r in ser.results]
    assert par.verdict == ser.verdict == Verdict.REFUTED
    pids = {r.checks[0].evidence["pid"] for r in par.results}
    assert os.getpid() not in pids and len(pids) >= 2  # really ran in other processes
    assert all(r.claim is c for r, c in zip(par.results, claims))  # the parent's Claim objects


def test_a_result_that_does_not_pickle_is_recomputed_here():
    bad = _claim("ufm.t.lambda", evidence={"f": lambda: None})  # a lambda does not pickle
    run = runner.run_claims([bad, _claim("ufm.t.ok")], RunContext(), progress=False, workers=2)
    assert [r.verdict for r in run.results] == [Verdict.VERIFIED, Verdict.VERIFIED]
    assert run.results[0].checks[0].evidence["pid"] == os.getpid()


def test_workers_must_be_positive():
    with pytest.raises(ValueError, match="workers"):
        runner.run_claims([_claim("ufm.t.a")], workers=0)
    assert main(["run", "--only", "ufm.ce.symbolic-derivation", "--quiet", "--report", "", "--json", "",
                 "--jobs", "0"]) == 2


def test_cli_jobs_gives_the_same_report(tmp_path, capsys):
    reports = []
    for jobs in ("1", "2"):
        path = tmp_path / f"r{jobs}.json"
        assert main(["run", "--only", "ufm.ce.symbolic-derivation", "--only", "ufm.mse.symbolic-derivation",
                     "--quiet", "--no-cache", "--report", "", "--json", str(path), "--jobs", jobs]) == 0
        reports.append(json.loads(path.read_text()))
    strip = [[(c["id"], c["verdict"], [(k["name"], k["verdict"]) for k in c["checks"]]) for c in r["claims"]]
             for r in reports]
    assert strip[0] == strip[1]
    capsys.readouterr()


# ---- cache ----------------------------------------------------------------------------------------

def test_cache_hit_returns_the_stored_result_and_misses_on_other_sources(tmp_path, monkeypatch):
    c = registry.get("ufm.mse.symbolic-derivation")
    ctx = RunContext()
    assert runcache.cacheable(c, ctx) and not runcache.cacheable(c, RunContext(rigorous=True))
    cache = runcache.RunCache(tmp_path)
    first = runner.run_claims([c], ctx, progress=False, cache=cache)
    assert cache.stored == 1 and cache.hits == 0
    again = runner.run_claims([c], ctx, progress=False, cache=runcache.RunCache(tmp_path))
    assert getattr(again.results[0], "cached", False)
    assert [(k.name, k.verdict, k.reason) for k in again.results[0].checks] == \
           [(k.name, k.verdict, k.reason) for k in first.results[0].checks]
    assert again.to_dict()["claims"][0]["cached"] is True
    # a change to the source of any module involved (here: theory/ufm.py, imported by the claim) is a new key
    k0 = runcache.key(c, ctx)
    real = runcache._source_hash
    monkeypatch.setattr(runcache, "_source_hash",
                        lambda m: "edited" if m == "theory.ufm" else real(m))
    assert "theory.ufm" in runcache.closure(c.check.__module__)
    assert runcache.key(c, ctx) != k0
    assert runcache.RunCache(tmp_path).get(c, ctx) is None
    # other seeds and profiles are other keys
    monkeypatch.setattr(runcache, "_source_hash", real)
    assert runcache.key(c, RunContext(seed=1)) != k0 != runcache.key(c, RunContext("full"))


def test_cache_never_stores_inconclusive_or_numeric_claims(tmp_path):
    cache = runcache.RunCache(tmp_path)
    inc = _claim("ufm.t.inc", Verdict.INCONCLUSIVE, tags=("symbolic",))
    num = _claim("ufm.t.num", tags=("symbolic", "numeric"))
    runner.run_claims([inc, num], RunContext(), progress=False, cache=cache)
    assert cache.stored == 0 and not list(tmp_path.glob("*.json"))


def test_damaged_entry_is_a_miss(tmp_path):
    c = registry.get("ufm.mse.symbolic-derivation")
    ctx = RunContext()
    runner.run_claims([c], ctx, progress=False, cache=runcache.RunCache(tmp_path))
    (entry,) = tmp_path.glob("*.json")
    entry.write_text("{not json")
    assert runcache.RunCache(tmp_path).get(c, ctx) is None
    assert runcache.RunCache(tmp_path).clear() == 1
