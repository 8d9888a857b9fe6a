"""Run claims with a progress display; summarise and write reports."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from typing import Callable, TextIO

from proofs_check.core import Claim, ClaimResult, RunContext, Verdict, clean, shorten, summarise


#: what makes ``ncproofs run`` exit 1: REFUTED/ERROR (default), or also INCONCLUSIVE (strict CI mode)
FAIL_ON = ("refuted", "inconclusive")

#: Tag of a claim whose statement, quoted or reconstructed from a paper's review thread, is false:
#: the package's answer is REFUTED with a witness, and the corrected statement is its own claim.
#: REFUTED is then the expected verdict: it does not fail a run. The claim can still fail: VERIFIED
#: (the witness no longer holds) fails the run, INCONCLUSIVE counts as INCONCLUSIVE.
EXPECT_REFUTED = "expect-refuted"


def refuted_as_expected(r: ClaimResult) -> bool:
    """A claim tagged :data:`EXPECT_REFUTED` that is REFUTED (with its witness): the expected answer. A claim
    ``X`` for which ``X-corrected`` is registered is a false statement as written by the naming convention
    (docs/DEVELOPING.md, "Naming") and is treated the same, tag or not."""
    return r.verdict is Verdict.REFUTED and (EXPECT_REFUTED in r.claim.tags
                                             or f"{r.claim.id}-corrected" in _registered_ids())


def _registered_ids() -> frozenset:
    global _IDS
    if _IDS is None:
        try:
            from proofs_check.registry import all_claims

            _IDS = frozenset(c.id for c in all_claims())
        except Exception:  # a registry that does not load: only the tag counts
            _IDS = frozenset()
    return _IDS


_IDS: frozenset | None = None


def surprise(r: ClaimResult) -> bool:
    """A claim tagged :data:`EXPECT_REFUTED` that came out VERIFIED: the package refuted it before."""
    return r.verdict is Verdict.VERIFIED and EXPECT_REFUTED in r.claim.tags


@dataclass
class _Answered:
    """What the overall verdict sees of a claim tagged :data:`EXPECT_REFUTED`."""
    id: str
    verdict: Verdict
    reason: str
    independent: bool = True


@dataclass
class RunResult:
    results: list[ClaimResult]
    context: RunContext
    seconds: float
    workers: int = 1

    def _judged(self) -> list:
        """The results the overall verdict is taken over: a thread statement REFUTED as expected counts as
        an answered question (VERIFIED: the package decided it as its docs say), a surprise as a failure."""
        out = []
        for r in self.results:
            if refuted_as_expected(r):
                out.append(_Answered(r.claim.id, Verdict.VERIFIED, "refuted as expected (a false thread statement)"))
            elif surprise(r):
                out.append(_Answered(r.claim.id, Verdict.REFUTED, "VERIFIED, but the package refuted this thread "
                                                                  "statement before (its witness no longer holds)"))
            else:
                out.append(r)
        return out

    @property
    def verdict(self) -> Verdict:
        """Worst over the applicable claims (NOT_APPLICABLE claims do not count; a false thread statement
        REFUTED as expected counts as answered)."""
        return summarise(self._judged(), what="claims")[0]

    @property
    def reason(self) -> str:
        return summarise(self._judged(), what="claims")[1]

    @property
    def expected_refuted(self) -> list[str]:
        return [r.claim.id for r in self.results if refuted_as_expected(r)]

    def counts(self) -> dict[str, int]:
        out = {v.value: 0 for v in Verdict}
        for r in self.results:
            out[r.verdict.value] += 1
        return out

    @property
    def exit_status(self) -> int:
        """0 when nothing is REFUTED and nothing errored, 1 otherwise."""
        return self.exit_status_for("refuted")

    def exit_status_for(self, fail_on: str = "refuted") -> int:
        """``fail_on="refuted"``: 1 when a claim is REFUTED or ERROR; ``"inconclusive"`` (strict CI mode):
        also when one is INCONCLUSIVE. NOT_APPLICABLE never fails a run."""
        if fail_on not in FAIL_ON:
            raise ValueError(f"fail_on must be one of {', '.join(FAIL_ON)}, got {fail_on!r}")
        bad = {Verdict.REFUTED, Verdict.ERROR} | ({Verdict.INCONCLUSIVE} if fail_on == "inconclusive" else set())
        return 1 if any(r.verdict in bad for r in self._judged()) else 0

    def to_dict(self) -> dict:
        from proofs_check.envelope import envelope
        from proofs_check.registry import aliases_of

        claims = [r.to_dict() for r in self.results]
        for d, r in zip(claims, self.results):  # former ids: scripts reading saved reports by an old id find it
            d["aliases"] = aliases_of(d["id"])
            d["cached"] = bool(getattr(r, "cached", False))
            d["cpu_seconds"] = cpu_seconds(r)
        return clean(envelope("run", {
            "tool": "ncproofs", "profile": self.context.profile, "seed": self.context.seed,
            "rigorous": self.context.rigorous,
            "rigorous_claims": [r.claim.id for r in self.results if r.rigorous] if self.context.rigorous else None,
            "overall_verdict": self.verdict.value if self.results else None,
            "overall_reason": self.reason if self.results else None,
            "counts": self.counts(),
            "refuted_as_expected": self.expected_refuted, "seconds": round(self.seconds, 3),
            "cpu_seconds": round(sum(cpu_seconds(r) or 0.0 for r in self.results), 3), "jobs": self.workers,
            "environment": {"python": platform.python_version(), "numpy": _version("numpy"),
                            "scipy": _version("scipy"), "sympy": _version("sympy"),
                            "platform": platform.platform()},
            "claims": claims,
        }))


def _version(package: str) -> str:
    """A package's version without importing it when no claim did (scipy and sympy take ~1 s to import)."""
    mod = sys.modules.get(package)
    if getattr(mod, "__version__", None):
        return str(mod.__version__)
    try:
        from importlib.metadata import version

        return version(package)
    except Exception:  # noqa: BLE001 - not installed or no metadata: the report says so
        return "unknown"


class Progress:
    """Live progress on a stream: a rewriting status line on a terminal, one line per claim otherwise."""

    def __init__(self, total: int, stream: TextIO | None = None, enabled: bool = True):
        self.total, self.stream, self.enabled = total, stream or sys.stderr, enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.t0 = time.perf_counter()

    def start(self, i: int, claim: Claim) -> None:
        if self.tty:
            self.stream.write(f"\r\033[K[{i:>3}/{self.total}] {claim.id} ...")
            self.stream.flush()

    def done(self, i: int, res: ClaimResult) -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.t0
        verdict = res.verdict.value + ("*" if res.rigorous else "")
        line = f"[{i:>3}/{self.total}] {verdict:<14} {res.claim.id:<40} {res.seconds:7.2f} s  (total {elapsed:6.1f} s)"
        if res.verdict is not Verdict.VERIFIED:
            line += "\n        " + shorten(res.reason)
        self.stream.write(("\r\033[K" if self.tty else "") + line + "\n")
        self.stream.flush()


def run_claims(claims: list[Claim], ctx: RunContext | None = None, *, progress: bool = True,
               stream: TextIO | None = None,
               on_result: Callable[[ClaimResult], None] | None = None, workers: int = 1,
               cache=None) -> RunResult:
    """Run ``claims`` under ``ctx`` (default: quick profile, seed 0).

    ``workers`` > 1 runs claims in that many forked processes (claims are independent: each builds its
    own instances from ``ctx``); results, progress lines, ``on_result`` calls and reports keep the
    order of ``claims`` whatever the completion order, and the verdicts, reasons and evidence are
    those of a serial run, bit for bit (``tests/test_run_parallel.py``). A worker takes the claims of
    one module at a time, in claim order (they share memoised work), the modules longest first (the
    CPU seconds of the previous run, kept by ``cache``; without them the ``experiment`` claims first),
    preferring the modules of a family it has run (:class:`_Pool`), so the run ends close to total
    CPU / workers. A result that cannot
    come back from a worker (not picklable) is recomputed here. Without ``fork`` (Windows, macOS
    spawn) the run is serial. ``cache``: a :class:`proofs_check.runcache.RunCache` for the
    deterministic symbolic claims (None: no cache).

    Each result carries ``cpu_seconds``: the CPU time (user + system, every thread) of the process
    that ran it, spent on it (a cache lookup for a cached result); ``RunResult.to_dict`` reports them.

    Returns a :class:`RunResult` (per-claim :class:`ClaimResult`, the overall verdict over the
    applicable claims, exit status). A claim that crashes gives an ERROR result, it does not raise.
    Raises only what ``RunContext`` raises for bad options, and ``ValueError`` for ``workers`` < 1.
    """
    ctx = ctx or RunContext()
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    prog = Progress(len(claims), stream, progress)
    t0 = time.perf_counter()
    cached: dict[int, ClaimResult] = {}
    if cache is not None:
        for i, c in enumerate(claims):
            c0 = time.process_time()
            r = cache.get(c, ctx)
            if r is not None:
                r.cached = True
                r.cpu_seconds = time.process_time() - c0
                cached[i] = r
    todo = [i for i in range(len(claims)) if i not in cached]
    costs = cache.timings(ctx) if cache is not None else {}
    needs = cache.imports(ctx) if cache is not None else {}
    pool = _start_pool(claims, ctx, _groups(claims, todo, costs), workers, needs, costs)
    results = []
    try:
        for i, c in enumerate(claims):
            prog.start(i + 1, c)
            r = cached.get(i)
            if r is None:
                r = _collect(pool, i, c, ctx)
                if cache is not None:
                    cache.put(r, ctx)
            results.append(r)
            prog.done(i + 1, r)
            if on_result:
                on_result(r)
    finally:
        if pool is not None:
            pool.close()
    if cache is not None:
        cache.record_timings(ctx, {r.claim.id: r.cpu_seconds for r in results
                                   if not getattr(r, "cached", False) and r.cpu_seconds is not None})
        cache.record_imports(ctx, {r.claim.id: getattr(r, "imports", None) or () for r in results})
    return RunResult(results, ctx, time.perf_counter() - t0, workers if pool is not None else 1)


def cpu_seconds(r: ClaimResult) -> float | None:
    """CPU seconds of a result in this run (see :func:`run_claims`), None when it was not measured."""
    v = getattr(r, "cpu_seconds", None)
    return None if v is None else round(float(v), 4)


#: BLAS threads while a claim runs (``ncproofs run``, serial or in processes alike, so the numbers do not
#: depend on ``--jobs``): the claims' products are small, and a threaded OpenBLAS spin-waits on them.
#: Measured on 2 cores (docs/benchmarks.md, "ncproofs run"): feature_collapse.thm1.type1-optimal took
#: 0.87 CPU s with 2 BLAS threads and 0.07 with 1 (L-BFGS-B's small dense updates); the parallelism of a
#: run is over claims (``--jobs``).
CLAIM_BLAS_THREADS = 1


#: threadpoolctl's view of the loaded BLAS libraries and ``len(sys.modules)`` when it was taken: finding the
#: libraries costs about 2.5 ms (every loaded shared object is inspected), 0.27 CPU s over the quick run's
#: claims, setting the limit with a known view 0.01 ms. A library comes with a new extension module, so the
#: view is taken again whenever ``sys.modules`` has grown or shrunk: each claim still starts with every BLAS
#: library loaded at that moment limited, as before.
_BLAS_VIEW: list = [None, -1]


def _blas_limit():
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - a dependency; without it BLAS keeps its threads
        import contextlib

        return contextlib.nullcontext()
    if _BLAS_VIEW[0] is None or _BLAS_VIEW[1] != len(sys.modules):
        _BLAS_VIEW[0] = ThreadpoolController()  # the libraries loaded now
        _BLAS_VIEW[1] = len(sys.modules)
    return _BLAS_VIEW[0].limit(limits=CLAIM_BLAS_THREADS, user_api="blas")


#: Libraries that take a noticeable part of a second to import and that some claims need and others do not:
#: a worker remembers which it has loaded (:class:`_Pool`), and the run cache keeps which each claim imported
#: (``RunCache.record_imports``), so that the next run gives the claims that import one of them to one worker
#: (cvxpy: scl.theorem1.low_dim_gap and ufm.ce.optimal-value, 1-2 CPU s each time it is imported)
HEAVY_IMPORTS = ("cvxpy", "scipy.integrate", "scipy.optimize", "scipy.stats", "scipy.sparse", "torch",
                 "matplotlib", "sympy", "mpmath", "flint")


def _timed_run(claim: Claim, ctx: RunContext) -> ClaimResult:
    before = [m for m in HEAVY_IMPORTS if m not in sys.modules]
    c0 = time.process_time()
    with _blas_limit():
        r = claim.run(ctx)
    r.cpu_seconds = time.process_time() - c0
    r.imports = [m for m in before if m in sys.modules]
    return r


#: expected CPU seconds of a claim never timed (the order of a first run only): experiments and numeric
#: claims are the long ones
_DEFAULT_COST = {"experiment": 1.0, "numeric": 0.2, "symbolic": 0.2}


def _expected_cost(claim: Claim, costs: dict) -> float:
    """CPU seconds a claim is expected to take: the last run's (``costs``), else a guess from its tags."""
    known = costs.get(claim.id)
    if isinstance(known, (int, float)) and not isinstance(known, bool) and known >= 0:
        return float(known)
    return max((_DEFAULT_COST.get(t, 0.05) for t in claim.tags), default=0.05)


def _groups(claims, todo: list[int], costs: dict) -> list[list[int]]:
    """``todo`` as the tasks of the workers: the claims of one module together, in claim order (claims of
    a module share memoised work, e.g. one training run for several statements: a worker computes it once,
    as a serial run does), the groups by decreasing expected CPU time (longest first; ties: claim order).
    The grouping and the order decide which process runs what and when, never a result."""
    def cost(i):
        return _expected_cost(claims[i], costs)

    by_module: dict[str, list[int]] = {}
    for i in todo:
        by_module.setdefault(getattr(claims[i].check, "__module__", None) or f"#{i}", []).append(i)
    groups = list(by_module.values())
    return sorted(groups, key=lambda g: (-sum(cost(i) for i in g), g[0]))


# ---- processes ------------------------------------------------------------------------------------
# A worker runs a group of claims by their indices in the list the parent forked with (claims hold
# closures, which do not pickle) and sends back each one's verdict, reason, checks, seconds and CPU
# seconds, pickled, or None for a result that does not pickle (the parent runs that claim again).
# The parent hands a free worker its next group itself (not a shared queue), so that the groups of one
# family go to the worker that ran that family before (:meth:`_Pool._choose`).

_FORKED: tuple[list, RunContext] | None = None


def _worker_main(conn, inherited) -> None:
    """A worker's loop: receive a group (a list of claim indices; None ends it), run its claims in order
    (:func:`_timed_run`), send back the list of pickled results."""
    import pickle

    for other in inherited:  # the parent's ends of the workers forked before this one
        other.close()
    claims, ctx = _FORKED
    while True:
        try:
            group = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if group is None:
            return
        out = []
        for i in group:
            r = _timed_run(claims[i], ctx)
            try:
                out.append(pickle.dumps((r.verdict, r.reason, r.checks, r.seconds, r.cpu_seconds, r.imports)))
            except Exception:  # noqa: BLE001 - anything that does not pickle is recomputed by the parent
                out.append(None)
        conn.send(out)


class _Worker:
    def __init__(self, process, conn):
        self.process, self.conn = process, conn
        self.group: list[int] | None = None  # the group it runs now
        self.families: set = set()  # the families of the groups it has run
        self.loaded: set = set()  # the HEAVY_IMPORTS those groups imported in earlier runs
        self.dead = False


class _Pool:
    """Forked workers and the groups still to run (longest first); ``items``: claim index -> what its worker
    sent back (None: run it here).

    The next group of a free worker (:meth:`_choose`), the first rule that finds one: the longest pending
    group of a family it has run (modules of one family share imports and memoised work: the ntk modules
    import scipy.integrate, the crh modules train the same networks; measured on 2 cores, the families run
    as units took ~1 CPU s less than their modules spread over both workers); the longest that imported,
    in an earlier run (``needs``: claim id -> :data:`HEAVY_IMPORTS`), a library this worker has loaded and
    no other, and none that only another worker has (cvxpy: scl and ufm); the longest of a family no other
    worker has run, without such a library; the longest without one; the longest. A free worker never
    waits while a group is pending, so the run still ends close to total CPU / workers. Which worker runs
    what decides nothing but the time."""

    def __init__(self, claims, ctx, groups: list[list[int]], workers: int, needs: dict | None = None):
        import multiprocessing as mp

        global _FORKED
        fork = mp.get_context("fork")
        self.claims, self.pending, self.items = claims, [list(g) for g in groups], {}
        needs = needs or {}
        self.needs = {g[0]: frozenset(m for i in g for m in needs.get(claims[i].id, ()) if m in HEAVY_IMPORTS)
                      for g in self.pending}
        self.workers: list[_Worker] = []
        _FORKED = (list(claims), ctx)
        try:
            for _ in range(min(workers, len(groups))):
                mine, theirs = fork.Pipe()
                p = fork.Process(target=_worker_main, args=(theirs, [w.conn for w in self.workers]), daemon=True)
                p.start()
                theirs.close()
                self.workers.append(_Worker(p, mine))
        except BaseException:
            self.close()
            raise
        finally:
            _FORKED = None  # the children have their copy; the parent keeps no reference
        for w in self.workers:
            self._dispatch(w)

    def _family(self, group: list[int]) -> str:
        return getattr(self.claims[group[0]], "family", "")

    def _choose(self, w: _Worker) -> int:
        fams = [self._family(g) for g in self.pending]
        for k, f in enumerate(fams):
            if f in w.families:
                return k
        rest = [x for x in self.workers if x is not w]
        others, theirs = set().union(*(x.families for x in rest)), set().union(*(x.loaded for x in rest))
        needs = [self.needs.get(g[0], frozenset()) for g in self.pending]
        dup = [bool((n & theirs) - w.loaded) for n in needs]  # would import again what another worker has
        for k, n in enumerate(needs):
            if not dup[k] and (n & w.loaded) - theirs:
                return k
        for k, f in enumerate(fams):
            if f not in others and not dup[k]:
                return k
        return next((k for k in range(len(fams)) if not dup[k]), 0)

    def _lost(self, group) -> None:
        for j in group or ():
            self.items[j] = None  # run here (the same verdict)

    def _dispatch(self, w: _Worker) -> None:
        if w.dead or not self.pending:
            return
        g = self.pending.pop(self._choose(w))
        try:
            w.conn.send(g)
        except (OSError, ValueError):  # a worker that died
            w.dead = True
            self._lost(g)
            return
        w.group = g
        w.families.add(self._family(g))
        w.loaded |= self.needs.get(g[0], frozenset())

    def result(self, i: int):
        """What the worker that ran claim ``i`` sent back (None: run it here), waiting for it as needed."""
        import pickle
        from multiprocessing.connection import wait

        while i not in self.items:
            busy = [w for w in self.workers if w.group is not None]
            if not busy:  # every worker died: the rest runs here
                for g in self.pending:
                    self._lost(g)
                self.pending = []
                break
            for conn in wait([w.conn for w in busy]):
                w = next(x for x in busy if x.conn is conn)
                group, w.group = w.group, None
                try:
                    out = conn.recv()
                    if not isinstance(out, list) or len(out) != len(group):
                        raise ValueError("malformed reply")
                except (EOFError, OSError, ValueError, pickle.UnpicklingError):  # a worker that died
                    w.dead = True
                    self._lost(group)
                    continue
                for j, blob in zip(group, out):
                    try:
                        self.items[j] = None if blob is None else pickle.loads(blob)
                    except Exception:  # noqa: BLE001 - a result that does not come back is recomputed here
                        self.items[j] = None
                self._dispatch(w)
        return self.items.pop(i, None)

    def close(self) -> None:
        """Stop the workers: idle ones are told to end, busy ones (a run interrupted) are terminated."""
        for w in self.workers:
            if w.group is None and not w.dead:
                try:
                    w.conn.send(None)
                except (OSError, ValueError):
                    pass
        for w in self.workers:
            if w.group is not None or w.dead:
                w.process.terminate()
            w.process.join(timeout=10)
            if w.process.is_alive():  # pragma: no cover - a worker that ignores the end of its input
                w.process.kill()
                w.process.join()
            w.conn.close()


#: Imported before the workers fork when the cache has no record of what the claims import (a first run) and
#: the claims span several families: scipy.optimize (0.45 CPU s, 1.2 at load 5) was imported by the claims of
#: five of the seven families, scipy.integrate (0.05-0.1 s more) by the ntk family and, through cvxpy, by scl
#: and ufm, so every worker would import them again.
DEFAULT_PRELOAD = ("scipy.optimize", "scipy.integrate")


def _preload(claims, groups: list[list[int]], workers: int, needs: dict, costs: dict) -> list[str]:
    """The heavy libraries to import in the parent before it forks: those the claims of some families
    imported in an earlier run (``needs``; only the first claim of a process to import a library records
    it, so a library counts for the claim's whole family) where those families take more than a worker's
    share of the expected CPU time (so that every worker would import it: once in the parent, shared by the
    fork, costs the same wall time and less CPU), or :data:`DEFAULT_PRELOAD` without any record. Returns the
    names imported (a library that fails to import is left to the claims, which report their own error)."""
    import importlib

    todo = [i for g in groups for i in g]
    if needs:
        family_cost: dict = {}
        users: dict[str, set] = {}
        for i in todo:
            fam = getattr(claims[i], "family", None)
            family_cost[fam] = family_cost.get(fam, 0.0) + _expected_cost(claims[i], costs)
            for m in needs.get(claims[i].id, ()):
                users.setdefault(m, set()).add(fam)
        total = sum(family_cost.values())
        names = [m for m in HEAVY_IMPORTS if sum(family_cost[f] for f in users.get(m, ())) > total / workers]
    else:
        names = list(DEFAULT_PRELOAD) if len({getattr(claims[i], "family", None) for i in todo}) > 1 else []
    done = []
    for m in names:
        if m not in sys.modules:
            try:
                importlib.import_module(m)
            except Exception:  # noqa: BLE001 - the claims that need it import it (and fail) themselves
                continue
        done.append(m)
    return done


def _start_pool(claims, ctx, groups: list[list[int]], workers, needs: dict | None = None,
                costs: dict | None = None):
    import multiprocessing as mp

    if workers <= 1 or len(groups) <= 1 or "fork" not in mp.get_all_start_methods():
        return None
    _preload(claims, groups, min(workers, len(groups)), needs or {}, costs or {})
    return _Pool(claims, ctx, groups, workers, needs)


def _collect(pool, i: int, claim: Claim, ctx: RunContext) -> ClaimResult:
    if pool is None:
        return _timed_run(claim, ctx)
    item = pool.result(i)
    if item is None:  # a worker that died, or a result that does not pickle
        return _timed_run(claim, ctx)
    verdict, reason, checks, seconds, cpu, imports = item
    r = ClaimResult(claim, verdict, reason, checks, seconds)
    r.cpu_seconds, r.imports = cpu, imports
    return r


def default_workers(n_claims: int | None = None) -> int:
    """Processes for ``ncproofs run`` (``--jobs auto``, the default): the CPUs this process may use, at
    most 8, and no more than the claims to run (one claim: serial, no process started).

    The claims are independent and forked from a parent that has imported their modules, so a worker
    costs milliseconds. Measured on 2 cores (docs/benchmarks.md, "ncproofs run"): the quick profile in
    8.1 s wall with two workers, 12.9 s with one (near-idle); at load 4.6-6.6 from other processes 17 s
    against 58 s for the same CPU time (two scheduler shares instead of one), where the former default
    (the CPUs minus the load average) had chosen one."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    n = max(1, min(n, 8))
    return n if n_claims is None else max(1, min(n, n_claims))


def _short(x) -> str:
    if isinstance(x, float):
        return f"{x:.6g}"
    if isinstance(x, list):
        return "[" + ", ".join(_short(v) for v in x[:4]) + (", …" if len(x) > 4 else "") + "]"
    return "null" if x is None else str(x)


def key_numbers_text(r: ClaimResult) -> str:
    return ", ".join(f"{k.split('.')[-1]}={_short(v)}" for k, v in r.key_numbers().items())


def short_source(claim) -> str:
    """The source as a short citation for the console ("Kini et al., ICLR 2024, Theorem 2"); the
    full string is in the reports, the BibTeX from `ncproofs cite`."""
    try:
        from proofs_check.citations import cite_claim

        cit = cite_claim(claim)
        papers = [ref for ref in cit.references if ref.entry_type != "misc"]
        if papers:
            return papers[0].short() + (f", {cit.locator}" if cit.locator else "")
        if cit.docs:
            return f"docs/{cit.docs[0]}.md"
    except Exception:  # a citation lookup never breaks a run summary
        pass
    return claim.source


def summary_table(run: RunResult) -> str:
    """Plain-text summary table for the terminal."""
    rows = [("claim", "source", "provenance", "verdict", "checks i+c", "key numbers", "s")]
    for r in run.results:
        rows.append((r.claim.id, short_source(r.claim), r.claim.provenance.value,
                     r.verdict.value + ("*" if r.rigorous else ""),
                     f"{r.independent_checks}+{len(r.checks) - r.independent_checks}",
                     key_numbers_text(r), f"{r.seconds:.2f}"))
    caps = (38, 40, 13, 14, 10, 60, 8)
    rows = [tuple(str(c)[: w - 1] + "…" if len(str(c)) > w else str(c) for c, w in zip(row, caps)) for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(caps))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    counts = run.counts()
    lines.append("")
    others = [r for r in run.results if r.verdict is not Verdict.VERIFIED]
    if others:
        lines.append("")
        lines.append("not VERIFIED (full reasons in the report):")
        order = {Verdict.ERROR: 0, Verdict.REFUTED: 1, Verdict.INCONCLUSIVE: 2, Verdict.NOT_APPLICABLE: 3}
        for r in sorted(others, key=lambda r: (refuted_as_expected(r), order.get(r.verdict, 9))):
            shown = "REFUTED*" if refuted_as_expected(r) else r.verdict.value
            lines.append(f"  {shown:<14} {r.claim.id}: {shorten(r.reason, 120)}")
        if run.expected_refuted:
            lines.append(f"  (REFUTED*: {len(run.expected_refuted)} false statements from the papers' review threads, "
                         "refuted with a witness as expected; each corrected statement is its own claim)")
    lines.append("(checks i+c: independent + consistency checks of each claim)")
    if run.context.rigorous:
        rig = [r for r in run.results if r.rigorous]
        lines.append(f"(VERIFIED*: value statements proven in ball arithmetic, docs/rigorous.md; {len(rig)} of "
                     f"{len(run.results)} claims; statements about minimisers are proven in balls only for the UFM closed "
                     "forms, elsewhere they keep their float evidence)")
    lines.append("")
    lines.append(f"overall: {run.verdict.value}  ({', '.join(f'{v} {k}' for k, v in counts.items() if v)})"
                 f"  in {run.seconds:.1f} s, profile {run.context.profile}"
                 + (", rigorous" if run.context.rigorous else ""))
    if run.verdict is not Verdict.VERIFIED and run.results:
        lines.append("why: " + shorten(run.reason))
    return "\n".join(lines)


def _md_escape(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def markdown_report(run: RunResult, d: dict | None = None) -> str:
    """The Markdown report; ``d``: ``run.to_dict()`` when the caller has it (it is computed once for both reports)."""
    d = run.to_dict() if d is None else d
    out = ["# ncproofs report", "",
           f"Overall verdict: **{d['overall_verdict']}**, profile `{run.context.profile}`, seed {run.context.seed}, "
           f"{run.seconds:.1f} s.", "",
           "Counts: " + ", ".join(f"{k} {v}" for k, v in d["counts"].items() if v), ""]
    if run.context.rigorous:
        out += [f"Run with `--rigorous`: {len(d['rigorous_claims'])} claims have their value statements proven in "
                "ball arithmetic (marked *rigorous*; docs/rigorous.md); statements about minimisers are proven in balls "
                "only for the UFM closed forms, elsewhere they keep their float evidence.", ""]
    others = [r for r in run.results if r.verdict is not Verdict.VERIFIED]
    if others:
        out += ["Not VERIFIED:", ""] + [f"- `{r.claim.id}` **{r.verdict.value}**"
                                         + (" (as expected: a false statement from a review thread)"
                                            if refuted_as_expected(r) else "")
                                         + f": {_md_escape(shorten(r.reason, 300))}" for r in others] + [""]
    out += [
           "| claim | source | provenance | verdict | key numbers | seconds |", "|---|---|---|---|---|---|"]
    for r in run.results:
        out.append(f"| `{r.claim.id}` | {_md_escape(r.claim.source)} | {r.claim.provenance.value} | "
                   f"**{r.verdict.value}**{' (rigorous)' if r.rigorous else ''} | {_md_escape(key_numbers_text(r))} | "
                   f"{r.seconds:.2f} |")
    out.append("")
    for r in run.results:
        out += [f"## `{r.claim.id}`: {r.verdict.value}", "",
                f"- Statement: {r.claim.statement}",
                f"- Source: {r.claim.source} ({r.claim.provenance.value})",
                f"- Reason: {r.reason}", "",
                "| check | kind | verdict | reason |", "|---|---|---|---|"]
        for c in r.checks:
            kind = "independent" if c.independent else "consistency"
            if c.rigorous is not None:
                kind += ", ball arithmetic" if c.rigorous else ", not proven in balls"
            out.append(f"| {_md_escape(c.name)} | {kind} | {c.verdict.value} | {_md_escape(c.reason)} |")
        out.append("")
    return "\n".join(out)


def write_reports(run: RunResult, md_path: str | None, json_path: str | None) -> None:
    """Write the Markdown and/or JSON report, each atomically (temp file, fsync, rename):
    a reader never sees half a report, and a crash leaves the previous one."""
    from proofs_check.outputs import write_text_atomic

    d = run.to_dict() if md_path or json_path else None
    if md_path:
        write_text_atomic(md_path, markdown_report(run, d))
    if json_path:
        write_text_atomic(json_path, json.dumps(d, indent=2, allow_nan=False) + "\n")
