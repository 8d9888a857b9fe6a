"""Resumable parameter sweeps: ``ncproofs sweep CONFIG.toml``.

A sweep runs one registered *sweepable* function over many instances (a grid or random
samples of its parameters, times a list of seeds) and writes every finished instance to a
SQLite store at once, keyed by a hash of the instance's configuration. Rerunning the same
command after a crash, SIGKILL or Ctrl-C skips what is stored and computes only the rest.

Sweepables
----------
``register_sweepable(name, fn, parameters=..., defaults=..., validate=...)`` registers
``fn(params: dict, seed: int) -> dict``. The returned dict has at least ``"verdict"``
(VERIFIED | INCONCLUSIVE | REFUTED | ERROR); optional ``"reason"`` (text), ``"score"``
(a number, larger = worse, used to rank the worst instances) and any other JSON-able
entries (stored as the instance's evidence). A crash inside ``fn`` is stored as an ERROR
with the exception text, never lost and never counted as VERIFIED.

Instance key
------------
``sha256(json.dumps({"family": name, "version": version, "params": params, "seed": seed},
sort_keys=True, separators=(",", ":")))``, hex, first 32 characters; ``params`` are the
instance parameters after the sweepable's defaults are merged in. Changing any parameter, the
seed or the sweepable's ``version`` gives a new key (so old results are never reused for a
changed computation).

Config (TOML, read with ``tomllib``)::

    [sweep]
    family = "geometry.noisy-etf"   # a registered sweepable
    mode = "grid"                   # "grid" (default) or "random"
    seeds = [0, 1]                  # list, or an int n meaning 0..n-1 (default [0])
    samples = 100                   # random mode: number of parameter draws
    sample_seed = 0                 # random mode: seed of the draws (default 0)
    modules = ["my_sweeps"]         # modules to import first (they register sweepables)
    store = "results.sqlite"        # default store (relative to the config file)
    workers = 2                     # local worker processes (default: CPU count)

    [parameters]
    k = [2, 3, 4]                                 # grid: values; random: uniform choice
    noise = {min = 1e-6, max = 1e-1, log = true}  # random: (log-)uniform; grid: needs num
    r = 1.0                                       # a fixed value
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import importlib
import itertools
import json
import math
import os
import socket
import sqlite3
import sys
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, TextIO

from proofs_check.commands import UsageError
from proofs_check.core import Check, ClaimResult, Verdict, clean, worst

#: Seconds to wait for a Dask scheduler before giving up with a clear error.
DEFAULT_CONNECT_TIMEOUT = 5.0

SCHEMA_VERSION = "1"
VERDICT_ORDER = ("ERROR", "REFUTED", "INCONCLUSIVE", "VERIFIED")  # worst first
_SEVERITY_SQL = "CASE verdict WHEN 'ERROR' THEN 3 WHEN 'REFUTED' THEN 2 WHEN 'INCONCLUSIVE' THEN 1 ELSE 0 END"


# --------------------------------------------------------------------------------------
# Registry of sweepable functions
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sweepable:
    name: str
    fn: Callable[[dict, int], dict]
    parameters: tuple[str, ...] | None  # None: any parameter name is accepted
    defaults: Mapping[str, Any]
    validate: Callable[[dict], None] | None
    version: str
    description: str


_REGISTRY: dict[str, Sweepable] = {}


def register_sweepable(name: str, fn: Callable[[dict, int], dict], *, parameters: Iterable[str] | None = None,
                       defaults: Mapping[str, Any] | None = None, validate: Callable[[dict], None] | None = None,
                       version: str = "1", description: str = "", replace: bool = False) -> Sweepable:
    """Register ``fn(params, seed) -> {"verdict": ..., ...}`` under ``name`` for ``ncproofs sweep``.

    ``parameters`` lists the accepted parameter names (unknown names in a config are an error);
    ``defaults`` are merged into every instance (and so into its key); ``validate(params)``
    raises ``ValueError`` naming the bad parameter; ``version`` is part of every instance key:
    bump it when the computation changes so stored results are not reused.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("sweepable name must be a non-empty string")
    if name in _REGISTRY and not replace and _REGISTRY[name].fn is not fn:
        raise ValueError(f"sweepable {name!r} is already registered (pass replace=True to override)")
    params = None if parameters is None else tuple(parameters)
    defaults = dict(defaults or {})
    if params is not None:
        extra = sorted(set(defaults) - set(params))
        if extra:
            raise ValueError(f"defaults for {name!r} name unknown parameters: {', '.join(extra)}")
    sw = Sweepable(name, fn, params, defaults, validate, str(version), description)
    _REGISTRY[name] = sw
    return sw


def sweepables() -> dict[str, Sweepable]:
    return dict(_REGISTRY)


_DISCOVERED = False


def discover_builtin() -> None:
    """Import every ``proofs_check.families`` module once, so that families which call
    :func:`register_sweepable` at import (as the CLI loads them) are registered here too
    (in a Dask or spawned worker, or when the Python API is used without the CLI)."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    _DISCOVERED = True
    from proofs_check.commands import discover

    discover()


def get_sweepable(name: str) -> Sweepable:
    if name not in _REGISTRY:
        discover_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UsageError(f"sweep.family: unknown sweepable {name!r} (registered: "
                         f"{', '.join(sorted(_REGISTRY)) or 'none'})") from None


def result_from_checks(checks: list[Check], *, score: float | None = None, **extra) -> dict:
    """A sweepable result from core Checks: worst verdict, reason of the worst checks, evidence."""
    verdict = worst(c.verdict for c in checks)
    bad = [c for c in checks if c.verdict == verdict and verdict != Verdict.VERIFIED]
    reason = "; ".join(f"{c.name}: {c.reason}" for c in bad[:3]) if bad else f"all {len(checks)} checks hold"
    out = {"verdict": verdict.value, "reason": reason, "score": score,
           "checks": [c.to_dict() for c in checks]}
    out.update(extra)
    return out


def result_from_claim(res: ClaimResult, *, score: float | None = None) -> dict:
    """A sweepable result from a core ClaimResult."""
    return {"verdict": res.verdict.value, "reason": res.reason, "score": score,
            "checks": [c.to_dict() for c in res.checks]}


# ---- built-in sweepable: a noisy simplex ETF, classified by theory.geometry ------------

def _noisy_etf_validate(p: dict) -> None:
    from theory._validate import as_float, as_int

    as_int("k", p["k"], minimum=2)
    if p.get("d") is not None:
        as_int("d", p["d"], minimum=1)
    as_float("noise", p["noise"], nonnegative=True)
    as_float("r", p["r"], positive=True)
    as_float("tol", p["tol"], positive=True)


def noisy_etf(params: dict, seed: int) -> dict:
    """Claim: a simplex ETF (k vectors of norm r in R^d) plus i.i.d. Gaussian noise of std
    ``noise`` per coordinate is still classified as "simplex-etf" by ``theory.geometry.classify_gram``
    at tolerance ``tol``. True at noise 0; fails once the noise moves the normalised Gram by more
    than ``tol``. score = distance of the normalised Gram to the ETF template (null if undefined).
    If d < k-1 no simplex ETF exists: INCONCLUSIVE (hypothesis fails)."""
    import numpy as np

    from proofs_check.core import geometry_is, hypothesis_fails
    from theory.geometry import classify_gram, simplex_etf

    k, noise, r, tol = int(params["k"]), float(params["noise"]), float(params["r"]), float(params["tol"])
    d = k if params.get("d") is None else int(params["d"])
    if d < k - 1:
        chk = hypothesis_fails("etf-exists", f"a simplex ETF of k = {k} vectors needs d >= k-1 = {k - 1}, got d = {d}")
        return result_from_checks([chk])
    rng = np.random.default_rng(seed)
    M = simplex_etf(k, d, r) + noise * rng.standard_normal((d, k))
    g = classify_gram(M.T @ M, tol)
    chk = geometry_is("geometry", "simplex-etf", g, evidence={"k": k, "d": d, "noise": noise})
    return result_from_checks([chk], score=g.distance_etf)


register_sweepable("geometry.noisy-etf", noisy_etf, parameters=("k", "d", "noise", "r", "tol"),
                   defaults={"d": None, "noise": 0.0, "r": 1.0, "tol": 1e-3},
                   validate=_noisy_etf_validate, version="1",
                   description="noisy simplex ETF classified by theory.geometry.classify_gram")


# --------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------

_SWEEP_KEYS = ("family", "mode", "seeds", "samples", "sample_seed", "modules", "store", "workers", "description")


@dataclass(frozen=True)
class Instance:
    key: str
    params: dict
    seed: int


def instance_key(family: str, version: str, params: Mapping[str, Any], seed: int) -> str:
    payload = json.dumps({"family": family, "version": version, "params": dict(params), "seed": int(seed)},
                         sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def _scalar_ok(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str)) and not (isinstance(v, float) and not math.isfinite(v))


@dataclass
class SweepSpec:
    family: str
    mode: str
    parameters: dict
    seeds: list[int]
    samples: int | None = None
    sample_seed: int = 0
    modules: list[str] = field(default_factory=list)
    store: str | None = None
    workers: int | None = None
    path: str | None = None
    raw: dict = field(default_factory=dict)

    @property
    def sweepable(self) -> Sweepable:
        return get_sweepable(self.family)

    def config_hash(self) -> str:
        return hashlib.sha256(json.dumps({k: self.raw.get(k) for k in ("sweep", "parameters")}, sort_keys=True,
                                         default=str).encode()).hexdigest()[:16]

    def instances(self) -> list[Instance]:
        """Every instance of the sweep, in a deterministic order, duplicates removed."""
        sw = self.sweepable
        combos = self._grid() if self.mode == "grid" else self._random()
        out, seen = [], set()
        for p in combos:
            params = dict(sw.defaults)
            params.update(p)
            params = {k: params[k] for k in sorted(params)}
            if sw.validate is not None:
                try:
                    sw.validate(dict(params))
                except ValueError as exc:
                    shown = ", ".join(f"{k}={v!r}" for k, v in p.items())
                    raise UsageError(f"parameters: invalid instance ({shown}): {exc}") from None
            for s in self.seeds:
                key = instance_key(sw.name, sw.version, params, s)
                if key not in seen:
                    seen.add(key)
                    out.append(Instance(key, params, s))
        return out

    def _grid(self) -> list[dict]:
        names, axes = [], []
        for name, spec in self.parameters.items():
            names.append(name)
            if isinstance(spec, list):
                axes.append(spec)
            elif isinstance(spec, dict):
                axes.append(_grid_axis(name, spec))
            else:
                axes.append([spec])
        return [dict(zip(names, vals)) for vals in itertools.product(*axes)]

    def _random(self) -> list[dict]:
        import numpy as np

        rng = np.random.default_rng(self.sample_seed)
        out = []
        for _ in range(self.samples or 0):
            p = {}
            for name, spec in self.parameters.items():  # insertion order: deterministic draws
                if isinstance(spec, list):
                    p[name] = spec[int(rng.integers(len(spec)))]
                elif isinstance(spec, dict):
                    p[name] = _draw(name, spec, rng)
                else:
                    p[name] = spec
            out.append(p)
        return out


def _num(name: str, spec: dict, key: str) -> float:
    v = spec.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise UsageError(f"parameters.{name}.{key} must be a finite number, got {v!r}")
    return v


def _check_range_spec(name: str, spec: dict, *, grid: bool) -> None:
    allowed = {"min", "max", "log", "integer"} | ({"num"} if grid else set())
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise UsageError(f"parameters.{name}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")
    lo, hi = _num(name, spec, "min"), _num(name, spec, "max")
    if hi < lo:
        raise UsageError(f"parameters.{name}: max must be >= min, got min={lo}, max={hi}")
    if spec.get("log") and lo <= 0:
        raise UsageError(f"parameters.{name}: log = true needs min > 0, got min={lo}")
    for flag in ("log", "integer"):
        if flag in spec and not isinstance(spec[flag], bool):
            raise UsageError(f"parameters.{name}.{flag} must be true or false, got {spec[flag]!r}")
    if spec.get("integer") and not (float(lo).is_integer() and float(hi).is_integer()):
        raise UsageError(f"parameters.{name}: integer = true needs integer min and max")
    if grid:
        n = spec.get("num")
        if spec.get("integer") and n is None:
            return
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise UsageError(f"parameters.{name}.num must be an integer >= 1 for a grid range, got {n!r}")


def _grid_axis(name: str, spec: dict) -> list:
    import numpy as np

    lo, hi, n = spec["min"], spec["max"], spec.get("num")
    if spec.get("integer") and n is None:
        return list(range(int(lo), int(hi) + 1))
    vals = (np.geomspace if spec.get("log") else np.linspace)(lo, hi, int(n))
    if spec.get("integer"):
        return sorted({int(round(v)) for v in vals})
    return [float(v) for v in vals]


def _draw(name: str, spec: dict, rng) -> Any:
    lo, hi = spec["min"], spec["max"]
    if spec.get("integer"):
        if spec.get("log"):  # log-uniform over [lo - 1/2, hi + 1/2), rounded, clamped to [lo, hi]
            x = math.exp(rng.uniform(math.log(max(lo - 0.5, 0.5)), math.log(hi + 0.5)))
            return int(min(max(math.floor(x + 0.5), lo), hi))
        return int(rng.integers(int(lo), int(hi) + 1))
    if spec.get("log"):
        return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
    return float(rng.uniform(lo, hi))


def _import_modules(modules: Iterable[str]) -> None:
    for m in modules:
        try:
            importlib.import_module(m)
        except Exception as exc:  # ImportError or an error inside the module
            raise UsageError(f"sweep.modules: cannot import {m!r}: {type(exc).__name__}: {exc}") from None


def parse_config(data: dict, path: str | None = None) -> SweepSpec:
    """Validate a parsed TOML document into a :class:`SweepSpec`; errors name the key."""
    unknown_top = sorted(set(data) - {"sweep", "parameters"})
    if unknown_top:
        raise UsageError(f"{unknown_top[0]}: unknown table (a sweep config has [sweep] and [parameters])")
    sweep = data.get("sweep")
    if not isinstance(sweep, dict):
        raise UsageError("[sweep] table is missing (it must name the family: family = \"...\")")
    for key in sweep:
        if key not in _SWEEP_KEYS:
            raise UsageError(f"sweep.{key}: unknown key (known: {', '.join(_SWEEP_KEYS)})")
    modules = sweep.get("modules", [])
    if isinstance(modules, str):
        modules = [modules]
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise UsageError(f"sweep.modules must be a list of module names, got {modules!r}")
    if path is not None:  # modules next to the config file are importable
        cfg_dir = str(Path(path).resolve().parent)
        if cfg_dir not in sys.path:
            sys.path.insert(0, cfg_dir)
    _import_modules(modules)
    family = sweep.get("family")
    discover_builtin()
    if not isinstance(family, str):
        raise UsageError(f"sweep.family is required: one of {', '.join(sorted(_REGISTRY)) or 'none registered'}")
    sw = get_sweepable(family)
    mode = sweep.get("mode", "grid")
    if mode not in ("grid", "random"):
        raise UsageError(f"sweep.mode must be \"grid\" or \"random\", got {mode!r}")
    seeds = sweep.get("seeds", [0])
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if seeds < 1:
            raise UsageError(f"sweep.seeds must be >= 1 (a count) or a list of integers, got {seeds}")
        seeds = list(range(seeds))
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise UsageError(f"sweep.seeds must be a non-empty list of integers or a count, got {seeds!r}")
    samples = sweep.get("samples")
    if mode == "random":
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
            raise UsageError(f"sweep.samples must be an integer >= 1 in random mode, got {samples!r}")
    elif samples is not None:
        raise UsageError("sweep.samples is only used with mode = \"random\"")
    sample_seed = sweep.get("sample_seed", 0)
    if isinstance(sample_seed, bool) or not isinstance(sample_seed, int):
        raise UsageError(f"sweep.sample_seed must be an integer, got {sample_seed!r}")
    workers = sweep.get("workers")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise UsageError(f"sweep.workers must be an integer >= 1, got {workers!r}")
    store = sweep.get("store")
    if store is not None and not isinstance(store, str):
        raise UsageError(f"sweep.store must be a path, got {store!r}")

    params = data.get("parameters", {})
    if not isinstance(params, dict):
        raise UsageError("[parameters] must be a table")
    for name, spec in params.items():
        if sw.parameters is not None and name not in sw.parameters:
            raise UsageError(f"parameters.{name}: unknown parameter for family {family!r} "
                             f"(known: {', '.join(sw.parameters)})")
        if isinstance(spec, list):
            if not spec:
                raise UsageError(f"parameters.{name}: empty list of values")
            bad = [v for v in spec if not _scalar_ok(v)]
            if bad:
                raise UsageError(f"parameters.{name}: unsupported value {bad[0]!r} (numbers, strings, booleans)")
        elif isinstance(spec, dict):
            _check_range_spec(name, spec, grid=(mode == "grid"))
        elif not _scalar_ok(spec):
            raise UsageError(f"parameters.{name}: unsupported value {spec!r} (numbers, strings, booleans)")
    if sw.parameters is not None:
        missing = [p for p in sw.parameters if p not in params and p not in sw.defaults]
        if missing:
            raise UsageError(f"parameters.{missing[0]} is required for family {family!r}")
    return SweepSpec(family, mode, dict(params), seeds, samples, sample_seed, modules, store, workers, path, data)


def load_config(path: str) -> SweepSpec:
    import tomllib

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise UsageError(f"{path}: config file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: malformed TOML: {exc}") from None
    return parse_config(data, path)


# --------------------------------------------------------------------------------------
# Store
# --------------------------------------------------------------------------------------

def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Store:
    """SQLite store: one row per finished instance (primary key = instance key).

    Every result is committed on its own transaction as soon as it arrives (WAL journal,
    synchronous=FULL), so a SIGKILL loses at most the instances still being computed.
    """

    def __init__(self, path: str):
        self.path = str(path)
        try:
            self.db = sqlite3.connect(self.path, timeout=30.0)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.executescript("""
            CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS runs (
                run_id INTEGER PRIMARY KEY AUTOINCREMENT, started_at TEXT NOT NULL, finished_at TEXT,
                family TEXT NOT NULL, config_hash TEXT NOT NULL, config TEXT NOT NULL, scheduler TEXT NOT NULL,
                total INTEGER NOT NULL, skipped INTEGER NOT NULL, computed INTEGER NOT NULL DEFAULT 0,
                status TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS results (
                key TEXT PRIMARY KEY, family TEXT NOT NULL, version TEXT NOT NULL, params TEXT NOT NULL,
                seed INTEGER NOT NULL, verdict TEXT NOT NULL, reason TEXT, score REAL, result TEXT NOT NULL,
                seconds REAL, run_id INTEGER NOT NULL, finished_at TEXT NOT NULL, worker TEXT);
            CREATE INDEX IF NOT EXISTS results_family ON results(family, verdict);
            """)
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
            self.db.commit()
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"--store {self.path}: not a usable SQLite store ({exc})") from None
        schema = self.db.execute("SELECT value FROM meta WHERE name='schema'").fetchone()[0]
        if schema != SCHEMA_VERSION:
            raise UsageError(f"--store {self.path}: schema {schema}, this ncproofs writes schema {SCHEMA_VERSION}")

    def close(self) -> None:
        self.db.close()

    def done_keys(self, keys: Iterable[str] | None = None) -> set[str]:
        rows = self.db.execute("SELECT key FROM results").fetchall()
        have = {r[0] for r in rows}
        return have if keys is None else have & set(keys)

    def begin_run(self, spec: SweepSpec, scheduler: str, total: int, skipped: int) -> int:
        cur = self.db.execute(
            "INSERT INTO runs (started_at, family, config_hash, config, scheduler, total, skipped, status) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'running')",
            (_now(), spec.family, spec.config_hash(), json.dumps(spec.raw, default=str), scheduler, total, skipped))
        self.db.commit()
        return int(cur.lastrowid)

    def end_run(self, run_id: int, status: str, computed: int) -> None:
        self.db.execute("UPDATE runs SET finished_at=?, status=?, computed=? WHERE run_id=?",
                        (_now(), status, computed, run_id))
        self.db.commit()

    def put(self, inst: Instance, family: str, version: str, result: dict, seconds: float, run_id: int,
            worker: str) -> bool:
        """Write one finished instance (committed at once). Returns False if it was already stored."""
        result = clean(result)
        score = result.get("score")
        score = float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None
        cur = self.db.execute(
            "INSERT INTO results (key, family, version, params, seed, verdict, reason, score, result, seconds, "
            "run_id, finished_at, worker) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO NOTHING",
            (inst.key, family, version, json.dumps(inst.params, sort_keys=True), inst.seed, result["verdict"],
             result.get("reason"), score, json.dumps(result, allow_nan=False), seconds, run_id, _now(), worker))
        self.db.commit()
        return cur.rowcount == 1

    def rows(self, keys: Iterable[str] | None = None, family: str | None = None) -> list[dict]:
        q = "SELECT key, family, params, seed, verdict, reason, score, seconds, run_id FROM results"
        args: tuple = ()
        if family is not None:
            q += " WHERE family = ?"
            args = (family,)
        q += f" ORDER BY {_SEVERITY_SQL} DESC, score IS NULL, score DESC, key"
        out = []
        wanted = None if keys is None else set(keys)
        for key, fam, params, seed, verdict, reason, score, secs, run_id in self.db.execute(q, args):
            if wanted is not None and key not in wanted:
                continue
            out.append({"key": key, "family": fam, "params": json.loads(params), "seed": seed, "verdict": verdict,
                        "reason": reason, "score": score, "seconds": secs, "run_id": run_id})
        return out


# --------------------------------------------------------------------------------------
# Execution
# --------------------------------------------------------------------------------------

def _execute(name: str, modules: list[str], params: dict, seed: int) -> tuple[dict, float, str]:
    """Run one instance (in a worker). Never raises: a crash becomes an ERROR result."""
    t0 = time.perf_counter()
    worker = f"{socket.gethostname()}:{os.getpid()}"
    try:
        _import_modules(modules)
        if name not in _REGISTRY:
            discover_builtin()
        sw = _REGISTRY.get(name)
        if sw is None:
            raise RuntimeError(f"sweepable {name!r} is not registered in this worker "
                               f"(list the module that registers it under sweep.modules)")
        res = sw.fn(dict(params), int(seed))
        if not isinstance(res, dict) or "verdict" not in res:
            raise TypeError(f"sweepable {name!r} must return a dict with a 'verdict', got {type(res).__name__}")
        try:
            v = Verdict(str(res["verdict"]))
        except ValueError:
            raise ValueError(f"sweepable {name!r} returned verdict {res['verdict']!r} "
                             f"(expected one of {', '.join(VERDICT_ORDER)})") from None
        out = dict(res)
        out["verdict"] = v.value
        out = clean(out)
    except Exception as exc:
        msg = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        out = {"verdict": Verdict.ERROR.value, "reason": msg, "traceback": traceback.format_exc(limit=8)}
    return out, time.perf_counter() - t0, worker


def _fmt_secs(s: float | None) -> str:
    if s is None or not math.isfinite(s):
        return "--:--"
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


class SweepProgress:
    """Progress bar with done/total and ETA on stderr: a rewriting line on a terminal, a line
    every few seconds otherwise."""

    WIDTH = 28
    PLAIN_EVERY = 5.0  # seconds between lines when not on a terminal
    TTY_EVERY = 0.1  # seconds between redraws on a terminal (thousands of fast instances)

    def __init__(self, total: int, already: int, stream: TextIO | None = None, enabled: bool = True):
        self.total, self.already = total, already
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.t0 = time.perf_counter()
        self.computed = 0
        self.counts = {v: 0 for v in VERDICT_ORDER}
        self._last = 0.0

    def line(self) -> str:
        done = self.already + self.computed
        frac = done / self.total if self.total else 1.0
        fill = int(round(frac * self.WIDTH))
        elapsed = time.perf_counter() - self.t0
        remaining = self.total - done
        eta = (elapsed / self.computed * remaining) if self.computed else None
        if remaining == 0:
            eta = 0.0
        bad = ", ".join(f"{v} {n}" for v, n in self.counts.items() if n and v != "VERIFIED")
        return (f"[{'#' * fill}{'.' * (self.WIDTH - fill)}] {done}/{self.total} {100 * frac:5.1f}%  "
                f"elapsed {_fmt_secs(elapsed)}  ETA {_fmt_secs(eta)}" + (f"  ({bad})" if bad else ""))

    def update(self, verdict: str) -> None:
        self.computed += 1
        self.counts[verdict] = self.counts.get(verdict, 0) + 1
        if not self.enabled:
            return
        now = time.perf_counter()
        last = self.already + self.computed == self.total
        if self.tty:
            if now - self._last >= self.TTY_EVERY or last:
                self._last = now
                self.stream.write("\r\033[K" + self.line())
                self.stream.flush()
        elif now - self._last >= self.PLAIN_EVERY or last:
            self._last = now
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def start(self) -> None:
        if self.enabled:
            msg = f"sweep: {self.total} instances, {self.already} already stored, {self.total - self.already} to compute"
            self.stream.write(msg + "\n")
            self.stream.flush()

    def finish(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()


@dataclass
class SweepOutcome:
    total: int
    skipped: int
    computed: int
    status: str  # "finished" | "interrupted"
    store: str
    run_id: int


def _scheduler_address(scheduler: str | None) -> str | None:
    if scheduler:
        return scheduler
    env = os.environ.get("DASK_SCHEDULER_ADDRESS")
    return env or None


def run_sweep(spec: SweepSpec, store_path: str, *, scheduler: str | None = None, workers: int | None = None,
              progress: bool = True, stream: TextIO | None = None,
              connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> SweepOutcome:
    """Run the pending instances of ``spec`` and store each one as it finishes.

    ``scheduler``: a Dask scheduler address (else ``DASK_SCHEDULER_ADDRESS``, else local processes).
    ``workers``: local worker processes (1 = in this process).
    """
    sw = spec.sweepable
    instances = spec.instances()
    address = _scheduler_address(scheduler)
    client = _dask_client(address, connect_timeout) if address else None  # fail fast, before touching the store
    try:
        store = Store(store_path)
    except BaseException:
        if client is not None:
            client.close()
        raise
    try:
        done = store.done_keys(i.key for i in instances)
        pending = [i for i in instances if i.key not in done]
        nworkers = workers or spec.workers or (os.cpu_count() or 1)
        sched_name = f"dask:{address}" if address else f"local:{min(nworkers, max(len(pending), 1))}"
        run_id = store.begin_run(spec, sched_name, len(instances), len(done))
        prog = SweepProgress(len(instances), len(done), stream, progress)
        prog.start()
        computed = 0

        def on_result(inst: Instance, payload: tuple[dict, float, str]) -> None:
            nonlocal computed
            res, secs, worker = payload
            store.put(inst, sw.name, sw.version, res, secs, run_id, worker)
            computed += 1
            prog.update(res["verdict"])

        status = "finished"
        try:
            if client is not None:
                _run_dask(client, sw, spec.modules, pending, on_result)
            elif nworkers <= 1 or len(pending) <= 1:
                for inst in pending:
                    on_result(inst, _execute(sw.name, spec.modules, inst.params, inst.seed))
            else:
                _run_pool(nworkers, sw, spec.modules, pending, on_result)
        except KeyboardInterrupt:
            status = "interrupted"
            # Ctrl-C may land between storing a result and counting it: count what the store holds.
            computed = len(store.done_keys(i.key for i in pending))
        finally:
            prog.finish()
            store.end_run(run_id, status, computed)
        if status == "interrupted":
            raise SweepInterrupted(len(instances), len(done) + computed, store_path)
        return SweepOutcome(len(instances), len(done), computed, status, store_path, run_id)
    finally:
        store.close()
        if client is not None:
            client.close()


class SweepInterrupted(KeyboardInterrupt):
    def __init__(self, total: int, stored: int, store: str):
        super().__init__(f"interrupted: {stored}/{total} instances stored in {store}; rerun the same command to resume")
        self.total, self.stored, self.store = total, stored, store


def _run_pool(nworkers: int, sw: Sweepable, modules: list[str], pending: list[Instance], on_result) -> None:
    window = 2 * nworkers
    it = iter(pending)
    import multiprocessing as mp

    # Workers start from a fresh interpreter (forkserver, else spawn), never a fork of this
    # process: no inherited SQLite connection, the same behaviour as a Dask worker (sweepables
    # come from sweep.modules and the family modules), and no fork-with-threads hazards.
    methods = mp.get_all_start_methods()
    ctx = mp.get_context("forkserver" if "forkserver" in methods else "spawn")
    with cf.ProcessPoolExecutor(max_workers=min(nworkers, len(pending)), mp_context=ctx) as pool:
        inflight: dict[cf.Future, Instance] = {}
        try:
            for inst in itertools.islice(it, window):
                inflight[pool.submit(_execute, sw.name, modules, inst.params, inst.seed)] = inst
            while inflight:
                finished, _ = cf.wait(inflight, return_when=cf.FIRST_COMPLETED)
                for fut in finished:
                    inst = inflight.pop(fut)
                    try:
                        payload = fut.result()
                    except cf.process.BrokenProcessPool as exc:
                        raise RuntimeError(f"a worker process died ({exc}); finished instances are stored, "
                                           "rerun to resume") from None
                    on_result(inst, payload)
                    nxt = next(it, None)
                    if nxt is not None:
                        inflight[pool.submit(_execute, sw.name, modules, nxt.params, nxt.seed)] = nxt
        except BaseException:
            for fut in inflight:
                fut.cancel()
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def _dask_client(address: str, timeout: float):
    try:
        from distributed import Client
    except ImportError:
        raise UsageError("--scheduler: Dask is not installed; install the optional extra: "
                         "pip install 'dask[distributed]' (or ncproofs[dask])") from None
    import logging

    log = logging.getLogger("distributed")
    old = log.level
    log.setLevel(logging.CRITICAL)  # a failed connect is reported once, below, not as a log storm
    try:
        return Client(address, timeout=f"{timeout}s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise UsageError(f"--scheduler: cannot reach the Dask scheduler at {address} within {timeout:g} s "
                         f"({type(exc).__name__}: {exc})") from None
    finally:
        log.setLevel(old)


def _run_dask(client, sw: Sweepable, modules: list[str], pending: list[Instance], on_result) -> None:
    import uuid

    from distributed import as_completed

    nthreads = sum(client.nthreads().values()) or 1
    window = max(2 * nthreads, 4)
    tag = uuid.uuid4().hex[:8]
    it = iter(pending)
    owner: dict[str, Instance] = {}

    def submit(inst: Instance):
        fut = client.submit(_execute, sw.name, modules, inst.params, inst.seed,
                            key=f"ncproofs-{inst.key[:16]}-{tag}", pure=False)
        owner[fut.key] = inst
        return fut

    ac = as_completed([submit(i) for i in itertools.islice(it, window)], loop=client.loop)
    try:
        for fut in ac:
            inst = owner.pop(fut.key)
            try:
                payload = fut.result()
            except Exception as exc:  # a lost worker etc.: an ERROR row would hide it; report it
                raise RuntimeError(f"Dask task for instance {inst.key} failed ({type(exc).__name__}: {exc}); "
                                   "finished instances are stored, rerun to resume") from None
            on_result(inst, payload)
            nxt = next(it, None)
            if nxt is not None:
                ac.add(submit(nxt))
    except BaseException:
        client.cancel(list(ac.futures) if hasattr(ac, "futures") else [])
        raise


# --------------------------------------------------------------------------------------
# Summary and tables
# --------------------------------------------------------------------------------------

def counts(rows: list[dict]) -> dict[str, int]:
    out = {v: 0 for v in VERDICT_ORDER}
    for r in rows:
        out[r["verdict"]] = out.get(r["verdict"], 0) + 1
    return out


def results_table(rows: list[dict], caption: str = ""):
    """All given rows as a :class:`proofs_check.tables.Table` (worst first)."""
    from proofs_check.tables import Table

    names: list[str] = []
    for r in rows:
        for k in r["params"]:
            if k not in names:
                names.append(k)
    cols = ["key", "family", *names, "seed", "verdict", "score", "reason"]
    body = [[r["key"][:12], r["family"], *[r["params"].get(n) for n in names], r["seed"], r["verdict"],
             r["score"], (r["reason"] or "")[:160]] for r in rows]
    return Table(cols, body, caption=caption, digits=6,
                 meta={"columns": {"key": "first 12 hex digits of the instance key (sha256 of its configuration)",
                                   "score": "sweepable-defined badness, larger = worse"}})


def summary_text(rows: list[dict], *, pending: int | None = None, worst_n: int = 10, fmt: str = "md") -> str:
    c = counts(rows)
    lines = [f"stored: {len(rows)}" + (f", pending: {pending}" if pending is not None else ""),
             "verdicts: " + ", ".join(f"{v} {n}" for v, n in c.items())]
    overall = worst(r["verdict"] for r in rows).value if rows else None
    lines.append(f"overall: {overall if overall else 'none stored'}")
    bad = [r for r in rows if r["verdict"] != "VERIFIED"][:worst_n]
    if worst_n > 0 and rows:
        shown = bad or rows[:worst_n]
        lines.append("")
        lines.append(f"worst {len(shown)} instance(s):" if bad else f"all VERIFIED; the {len(shown)} with the largest score:")
        lines.append(results_table(shown).render(fmt).rstrip("\n"))
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------
# CLI glue (used by proofs_check.families.workflow)
# --------------------------------------------------------------------------------------

def add_arguments(p) -> None:
    from proofs_check.tables import FORMATS

    p.add_argument("config", nargs="?", metavar="CONFIG",
                   help="sweep config (TOML); optional with --summary")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run on an existing Dask cluster, e.g. tcp://host:8786 (default: $DASK_SCHEDULER_ADDRESS, "
                        "else local processes; needs the dask[distributed] extra)")
    p.add_argument("--store", metavar="PATH", default=None,
                   help="SQLite results store (default: sweep.store in the config, else CONFIG with .sqlite)")
    p.add_argument("--summary", action="store_true",
                   help="do not compute: print verdict counts and the worst instances from the store")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="local worker processes (default: sweep.workers, else the CPU count; 1 = in-process)")
    p.add_argument("--worst", type=int, default=10, metavar="N", help="number of worst instances shown (default 10)")
    p.add_argument("--format", choices=FORMATS, default="md", help="table format for --summary / --export")
    p.add_argument("--export", metavar="PATH", default=None,
                   help="write every stored result of the sweep as a table (md/latex/csv/json by --format)")
    p.add_argument("--connect-timeout", type=float, default=DEFAULT_CONNECT_TIMEOUT, metavar="S",
                   help=f"seconds to wait for the Dask scheduler (default {DEFAULT_CONNECT_TIMEOUT:g})")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _store_path(args, spec: SweepSpec | None) -> str:
    if args.store:
        return args.store
    if spec is not None and spec.store:
        base = Path(spec.path).resolve().parent if spec.path else Path.cwd()
        return str(base / spec.store)
    if spec is not None and spec.path:
        return str(Path(spec.path).with_suffix(".sqlite"))
    raise UsageError("--summary needs CONFIG or --store PATH")


def main_from_args(args) -> int:
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    if args.worst < 0:
        raise UsageError(f"--worst must be >= 0, got {args.worst}")
    if not (args.connect_timeout > 0):
        raise UsageError(f"--connect-timeout must be > 0, got {args.connect_timeout}")
    spec = load_config(args.config) if args.config else None
    if spec is None and not args.summary:
        raise UsageError("sweep needs CONFIG (a TOML file), or --summary --store PATH")
    path = _store_path(args, spec)
    if args.summary:
        if not os.path.exists(path):
            raise UsageError(f"--store {path}: no such store (run the sweep first)")
        store = Store(path)
        try:
            if spec is not None:
                keys = [i.key for i in spec.instances()]
                rows = store.rows(keys)
                pending = len(keys) - len(rows)
            else:
                rows, pending = store.rows(), None
        finally:
            store.close()
        sys.stdout.write(summary_text(rows, pending=pending, worst_n=args.worst, fmt=args.format))
        _maybe_export(args, rows, path)
        return 0
    try:
        out = run_sweep(spec, path, scheduler=args.scheduler, workers=args.workers, progress=not args.quiet,
                        connect_timeout=args.connect_timeout)
    except SweepInterrupted as exc:
        print(f"ncproofs: {exc}", file=sys.stderr)
        return 130
    except RuntimeError as exc:
        print(f"ncproofs: error: {exc}", file=sys.stderr)
        return 1
    store = Store(path)
    try:
        rows = store.rows([i.key for i in spec.instances()])
    finally:
        store.close()
    print(f"sweep {spec.family}: {out.total} instances ({out.skipped} already stored, {out.computed} computed) "
          f"-> {path}")
    sys.stdout.write(summary_text(rows, pending=out.total - len(rows), worst_n=args.worst, fmt=args.format))
    _maybe_export(args, rows, path)
    return 1 if any(r["verdict"] in ("REFUTED", "ERROR") for r in rows) else 0


def _maybe_export(args, rows: list[dict], store_path: str) -> None:
    if not args.export:
        return
    text = results_table(rows, caption=f"ncproofs sweep results from {os.path.basename(store_path)}").render(args.format)
    with open(args.export, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"table: {args.export}", file=sys.stderr)
