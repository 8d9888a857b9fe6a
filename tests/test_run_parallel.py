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


def _claim(cid, verdict=Verdict.VERIFIED, delay=0.0, evidence=None, tags=(), module=None):
    def check(ctx):
        time.sleep(delay)
        yield Check("c", verdict, f"{cid} ran in process {os.getpid()}", dict(evidence or {}, pid=os.getpid()))

    # the workers take the claims of one module together: each test claim is its own module unless told
    check.__module__ = module or f"tests.fake_claims.{cid}"
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


def test_claims_of_one_module_run_in_one_worker_in_claim_order():
    # claims of a module share memoised work: one worker runs them in claim order, as a serial run does
    order = []
    claims = [_claim("ufm.t.a1", module="tests.fake.a"), _claim("ufm.t.b1", module="tests.fake.b", delay=0.3),
              _claim("ufm.t.a2", module="tests.fake.a"), _claim("ufm.t.a3", module="tests.fake.a")]
    run = runner.run_claims(claims, RunContext(), progress=False, workers=2, on_result=lambda r: order.append(r.claim.id))
    pid = {r.claim.id: r.checks[0].evidence["pid"] for r in run.results}
    # one worker runs the whole module (which worker takes the other module is a race: a worker that finishes
    # first may take it too)
    assert pid["ufm.t.a1"] == pid["ufm.t.a2"] == pid["ufm.t.a3"] and os.getpid() not in pid.values()
    assert order == ["ufm.t.a1", "ufm.t.b1", "ufm.t.a2", "ufm.t.a3"]
    # longest first: the expected costs order the modules, never the results
    groups = runner._groups(claims, [0, 1, 2, 3], {"ufm.t.b1": 5.0})
    assert groups == [[1], [0, 2, 3]]
    assert runner._groups(claims, [0, 1, 2, 3], {"ufm.t.a1": 9.0}) == [[0, 2, 3], [1]]


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


# ---- the same numbers over processes ------------------------------------------------------------------

#: real claims of five modules (symbolic, L-BFGS with certificates, kernels, a training loop); the
#: random-latents claim's values changed in their last bits with the BLAS thread count before the runner
#: fixed it for every claim (runner.CLAIM_BLAS_THREADS)
_SUBSET = ("ufm.mse.symbolic-derivation", "feature_collapse.thm1.type1-optimal",
           "feature_collapse.random-latents.word-collapse", "ntk.e-zero", "crh.identity.relu_balance",
           "ufm_general.regression.optimal-value")


def _timeless(x):
    """A report without what may differ between runs of the same claims: times and process ids."""
    if isinstance(x, dict):
        return {k: _timeless(v) for k, v in x.items()
                if k not in ("pid", "cached", "jobs") and "second" not in k and "elapsed" not in k}
    if isinstance(x, list):
        return [_timeless(v) for v in x]
    return x


def test_jobs_1_and_2_give_bit_identical_reports(tmp_path, capsys):
    docs = []
    for jobs in ("1", "2"):
        path = tmp_path / f"r{jobs}.json"
        argv = ["run", "--quiet", "--no-cache", "--report", "", "--json", str(path), "--jobs", jobs]
        for cid in _SUBSET:
            argv += ["--only", cid]
        main(argv)
        docs.append(json.loads(path.read_text()))
    assert docs[1]["jobs"] == 2 and docs[0]["jobs"] == 1
    assert [c["id"] for c in docs[0]["claims"]] == [c["id"] for c in docs[1]["claims"]]
    assert len(docs[0]["claims"]) == len(_SUBSET)
    for a, b in zip(docs[0]["claims"], docs[1]["claims"]):
        assert _timeless(a) == _timeless(b), a["id"]  # every verdict, reason and number, bit for bit
        assert a["cpu_seconds"] >= 0 and b["cpu_seconds"] >= 0
    assert _timeless(docs[0]) == _timeless(docs[1])
    capsys.readouterr()


# ---- which worker takes which module (time only, never a result) ------------------------------------

def _bare_pool(claims, groups, needs=None, workers=2):
    """A :class:`runner._Pool` without processes: the scheduling state only."""
    pool = object.__new__(runner._Pool)
    pool.claims, pool.pending, pool.items = claims, [list(g) for g in groups], {}
    pool.needs = {g[0]: frozenset(m for i in g for m in (needs or {}).get(claims[i].id, ())) for g in groups}
    pool.workers = [runner._Worker(None, None) for _ in range(workers)]
    return pool


def _fam_claim(cid, family, module):
    c = _claim(cid, module=module)
    return Claim(cid, family, "s", "src", Provenance.DERIVED, c.check)


def test_a_free_worker_takes_its_family_then_the_modules_of_the_libraries_it_has_loaded():
    claims = [_fam_claim("ntk.t.a", "ntk", "m.ntk_a"), _fam_claim("crh.t.a", "crh", "m.crh_a"),
              _fam_claim("scl.t.a", "scl", "m.scl"), _fam_claim("ntk.t.b", "ntk", "m.ntk_b"),
              _fam_claim("ufm.t.a", "ufm", "m.ufm"), _fam_claim("crh.t.b", "crh", "m.crh_b")]
    needs = {"scl.t.a": ["cvxpy"], "ufm.t.a": ["cvxpy"], "ntk.t.a": ["scipy.integrate"]}
    pool = _bare_pool(claims, [[i] for i in range(6)], needs)
    a, b = pool.workers
    pick = lambda w: pool.pending[pool._choose(w)][0]  # noqa: E731
    for w in (a, b):  # what _dispatch does, without a pipe
        g = pool.pending.pop(pool._choose(w))
        w.families.add(pool._family(g))
        w.loaded |= pool.needs[g[0]]
    assert a.families == {"ntk"} and b.families == {"crh"} and a.loaded == {"scipy.integrate"} and not b.loaded
    assert pick(a) == 3 and pick(b) == 5  # its own family first, longest first
    pool.pending = [[2], [4]]  # scl then ufm: both import cvxpy
    g = pool.pending.pop(pool._choose(b))
    b.families.add(pool._family(g))
    b.loaded |= pool.needs[g[0]]
    assert g == [2] and pick(b) == 4  # the worker that has cvxpy takes the other module that imports it
    assert pick(a) == 4  # the only group left: a free worker never waits
    pool.pending = [[4], [1]]
    assert pick(a) == 1  # another worker has cvxpy: a takes the group that does not import it again


def test_the_cache_keeps_the_heavy_libraries_each_claim_imported(tmp_path, monkeypatch):
    import sys
    import types

    monkeypatch.setattr(runner, "HEAVY_IMPORTS", runner.HEAVY_IMPORTS + ("_ncproofs_test_heavy",))

    def check(ctx):
        sys.modules["_ncproofs_test_heavy"] = types.ModuleType("_ncproofs_test_heavy")
        yield Check("c", Verdict.VERIFIED, "ok", {})

    check.__module__ = "tests.fake_claims.heavy"
    heavy = Claim("ufm.t.heavy", "ufm", "s", "src", Provenance.DERIVED, check)
    try:
        for workers in (1, 2):
            sys.modules.pop("_ncproofs_test_heavy", None)
            cache = runcache.RunCache(tmp_path / str(workers))
            run = runner.run_claims([heavy, _claim("ufm.t.light")], RunContext(), progress=False,
                                    workers=workers, cache=cache)
            assert run.results[0].imports == ["_ncproofs_test_heavy"] and run.results[1].imports == []
            assert cache.imports(RunContext()) == {"ufm.t.heavy": ["_ncproofs_test_heavy"]}
        # a library stays listed once seen, the other profiles keep their own lists
        cache.record_imports(RunContext(), {"ufm.t.heavy": [], "ufm.t.light": ["cvxpy"]})
        assert cache.imports(RunContext()) == {"ufm.t.heavy": ["_ncproofs_test_heavy"], "ufm.t.light": ["cvxpy"]}
        assert cache.imports(RunContext("full")) == {}
    finally:
        sys.modules.pop("_ncproofs_test_heavy", None)


def test_the_parent_imports_before_the_fork_only_what_every_worker_would_import(monkeypatch):
    imported = []
    monkeypatch.setattr(runner, "HEAVY_IMPORTS", ("lib_everyone", "lib_one_family", "lib_missing"))
    monkeypatch.setattr(runner.sys, "modules", dict(runner.sys.modules))
    import importlib

    monkeypatch.setattr(importlib, "import_module",
                        lambda m: imported.append(m) if m != "lib_missing" else (_ for _ in ()).throw(ImportError(m)))
    claims = [_fam_claim(f"{f}.t.{k}", f, f"m.{f}{k}") for f in ("crh", "ntk", "scl") for k in "ab"]
    groups = [[i] for i in range(len(claims))]
    costs = {c.id: 1.0 for c in claims}
    # lib_everyone: recorded by claims of two of the three families (two thirds of the work, more than a worker's
    # share); lib_one_family: one family, a third of the work
    needs = {"crh.t.a": ["lib_everyone"], "ntk.t.b": ["lib_everyone", "lib_one_family"], "scl.t.a": ["lib_missing"]}
    assert runner._preload(claims, groups, 2, needs, costs) == ["lib_everyone"] and imported == ["lib_everyone"]
    needs["scl.t.b"] = ["lib_missing"]
    needs["crh.t.b"] = ["lib_missing"]
    imported.clear()
    assert runner._preload(claims, groups, 2, needs, costs) == ["lib_everyone"]  # a failed import is left alone
    assert imported == ["lib_everyone"]
    # no record: the default list, when the claims span several families
    imported.clear()
    monkeypatch.setattr(runner, "DEFAULT_PRELOAD", ("lib_everyone",))
    assert runner._preload(claims, groups, 2, {}, {}) == ["lib_everyone"]
    assert runner._preload(claims[:2], groups[:2], 2, {}, {}) == []  # one family: nothing


def test_a_worker_that_dies_leaves_its_claims_to_the_parent():
    parent = os.getpid()

    def check(ctx):
        if os.getpid() != parent:
            os._exit(3)  # the worker process dies in the middle of its group
        yield Check("c", Verdict.VERIFIED, "ran here", {"pid": os.getpid()})

    check.__module__ = "tests.fake_claims.dies"
    dies = Claim("ufm.t.dies", "ufm", "s", "src", Provenance.DERIVED, check)
    claims = [dies, _claim("ufm.t.after", module="tests.fake_claims.dies"), _claim("ufm.t.other"),
              _claim("ufm.t.more")]
    run = runner.run_claims(claims, RunContext(), progress=False, workers=2)
    assert [r.verdict for r in run.results] == [Verdict.VERIFIED] * 4
    pid = {r.claim.id: r.checks[0].evidence["pid"] for r in run.results}
    assert pid["ufm.t.dies"] == pid["ufm.t.after"] == parent  # the dead worker's group, recomputed here
    assert pid["ufm.t.other"] != parent and pid["ufm.t.more"] != parent  # the other worker ran the rest
