"""Resumable parameter sweeps: ``ncproofs sweep CONFIG.toml``.

A sweep runs one registered *sweepable* function over many instances (a grid or random
samples of its parameters, times a list of seeds) and writes every finished instance to a
SQLite store at once, keyed by a hash of the instance's configuration. Rerunning the same
command after a crash, SIGKILL or Ctrl-C skips what is stored and computes only the rest.

Faults and limits: local workers are processes of this sweep that end with it (SIGINT,
SIGTERM, SIGHUP, and SIGKILL of the sweep: see "local worker processes" below); two sweeps
on one store lease instances in the store (table ``leases``), so each instance is computed
once; a Dask scheduler must answer within ``--connect-timeout``; a lost scheduler or worker
leaves the run "interrupted" and the rerun resumes it; a config describing more than
``MAX_INSTANCES`` instances is refused before anything runs.

Sweepables
----------
``register_sweepable(name, fn, parameters=..., defaults=..., validate=...)`` registers
``fn(params: dict, seed: int) -> dict``. The returned dict has at least ``"verdict"``
(VERIFIED | NOT_APPLICABLE | INCONCLUSIVE | REFUTED | ERROR); optional ``"reason"`` (text), ``"score"``
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
    seeds = [0, 1]                  # integers >= 0, or an int n meaning 0..n-1 (default [0])
    samples = 100                   # random mode: number of parameter draws
    sample_seed = 0                 # random mode: seed of the draws (default 0)
    modules = ["my_sweeps"]         # modules to import first (they register sweepables)
    store = "results.sqlite"        # default store (relative to the config file)
    workers = 2                     # local worker processes (default: CPU count)
    max_instances = 1000000         # refuse bigger sweeps before any work (default MAX_INSTANCES)

    [parameters]
    k = [2, 3, 4]                                 # grid: values; random: uniform choice
    noise = {min = 1e-6, max = 1e-1, log = true}  # random: (log-)uniform; grid: needs num
    r = 1.0                                       # a fixed value
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import math
import os
import socket
import sqlite3
import struct
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
# worst first; NOT_APPLICABLE (a hypothesis fails) has no severity but is listed before VERIFIED
VERDICT_ORDER = ("ERROR", "REFUTED", "INCONCLUSIVE", "NOT_APPLICABLE", "VERIFIED")
_SEVERITY_SQL = ("CASE verdict WHEN 'ERROR' THEN 4 WHEN 'REFUTED' THEN 3 WHEN 'INCONCLUSIVE' THEN 2 "
                 "WHEN 'NOT_APPLICABLE' THEN 1 ELSE 0 END")


# --------------------------------------------------------------------------------------
# Registry of sweepable functions
# --------------------------------------------------------------------------------------

def _scalar_ok(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str)) and not (isinstance(v, float) and not math.isfinite(v))


@dataclass(frozen=True)
class Sweepable:
    name: str
    fn: Callable[[dict, int], dict] | None  # None: known only from a store's record (keys, no computing)
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
    ``defaults`` are merged into every instance (and so into its key; numbers, strings, booleans
    or None); ``validate(params)`` raises ``ValueError`` naming the bad parameter; ``version``
    is part of every instance key: bump it when the computation changes so stored results are
    not reused. Bad arguments raise ``TypeError`` (wrong type) or ``ValueError`` (bad value)
    naming the argument.
    """
    if not isinstance(name, str):
        raise TypeError(f"register_sweepable: name must be a str, got {type(name).__name__}")
    if not name or name != name.strip() or any(c.isspace() for c in name):
        raise ValueError(f"register_sweepable: name must be a non-empty string without spaces, got {name!r}")
    if not callable(fn):
        raise TypeError(f"register_sweepable({name!r}): fn must be callable fn(params, seed) -> dict, "
                        f"got {type(fn).__name__} {fn!r}")
    if validate is not None and not callable(validate):
        raise TypeError(f"register_sweepable({name!r}): validate must be callable validate(params) or None, "
                        f"got {type(validate).__name__}")
    if not isinstance(replace, bool):
        raise TypeError(f"register_sweepable({name!r}): replace must be True or False, got {replace!r}")
    if isinstance(version, bool) or not isinstance(version, (str, int)) or str(version) == "":
        raise TypeError(f"register_sweepable({name!r}): version must be a non-empty str (or an int), got {version!r}")
    if not isinstance(description, str):
        raise TypeError(f"register_sweepable({name!r}): description must be a str, got {type(description).__name__}")
    if parameters is None:
        params = None
    else:
        if isinstance(parameters, (str, bytes)) or not isinstance(parameters, Iterable):
            raise TypeError(f"register_sweepable({name!r}): parameters must be a list of names or None, "
                            f"got {parameters!r}")
        params = tuple(parameters)
        bad = [p for p in params if not isinstance(p, str) or not p]
        if bad:
            raise TypeError(f"register_sweepable({name!r}): parameters must be non-empty strings, got {bad[0]!r}")
        dup = sorted({p for p in params if params.count(p) > 1})
        if dup:
            raise ValueError(f"register_sweepable({name!r}): parameters name {dup[0]!r} twice")
    if defaults is None:
        defaults = {}
    if not isinstance(defaults, Mapping):
        raise TypeError(f"register_sweepable({name!r}): defaults must be a dict, got {type(defaults).__name__}")
    defaults = dict(defaults)
    for k, v in defaults.items():
        if not isinstance(k, str) or not k:
            raise TypeError(f"register_sweepable({name!r}): defaults keys must be parameter names, got {k!r}")
        if not _scalar_ok(v):
            raise ValueError(f"register_sweepable({name!r}): defaults[{k!r}] must be a finite number, a string, "
                             f"a boolean or None (it is part of the instance key), got {v!r}")
    if params is not None:
        extra = sorted(set(defaults) - set(params))
        if extra:
            raise ValueError(f"defaults for {name!r} name unknown parameters: {', '.join(extra)}")
    if name in _REGISTRY and not replace and _REGISTRY[name].fn is not fn:
        raise ValueError(f"sweepable {name!r} is already registered (pass replace=True to override)")
    sw = Sweepable(name, fn, params, defaults, validate, str(version), description)
    _REGISTRY[name] = sw
    return sw


def sweepables() -> dict[str, Sweepable]:
    return dict(_REGISTRY)


_DISCOVERED = False


def discover_builtin() -> None:
    """Import every ``proofs_check.families`` module once, so that families which call
    :func:`register_sweepable` at import (as the CLI loads them) are registered here too
    (in a worker process, or when the Python API is used without the CLI)."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    _DISCOVERED = True
    from proofs_check.commands import discover

    discover()


def get_sweepable(name: str) -> Sweepable:
    if not isinstance(name, str):
        raise TypeError(f"get_sweepable: name must be a str, got {type(name).__name__}")
    if name not in _REGISTRY:
        discover_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UsageError(f"sweep.family: unknown sweepable {name!r} (registered: "
                         f"{', '.join(sorted(_REGISTRY)) or 'none'})") from None


def _check_score(score) -> float | None:
    if score is None:
        return None
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise TypeError(f"score must be a number or None, got {type(score).__name__}")
    return score  # NaN/inf become null when stored (core.clean)


def result_from_checks(checks: list[Check], *, score: float | None = None, **extra) -> dict:
    """A sweepable result from core Checks: worst verdict, reason of the worst checks, evidence."""
    if isinstance(checks, Check):
        checks = [checks]
    if not isinstance(checks, (list, tuple)) or not checks:
        raise ValueError(f"result_from_checks: checks must be a non-empty list of core.Check, got {checks!r}")
    bad_type = [c for c in checks if not isinstance(c, Check)]
    if bad_type:
        raise TypeError(f"result_from_checks: checks must be core.Check objects, got {type(bad_type[0]).__name__}")
    _check_score(score)
    reserved = sorted(set(extra) & {"verdict", "reason", "score", "checks"})
    if reserved:
        raise ValueError(f"result_from_checks: {reserved[0]!r} is set from the checks; pass it differently")
    verdict = worst(c.verdict for c in checks)
    bad = [c for c in checks if c.verdict == verdict and verdict != Verdict.VERIFIED]
    reason = "; ".join(f"{c.name}: {c.reason}" for c in bad[:3]) if bad else f"all {len(checks)} checks hold"
    out = {"verdict": verdict.value, "reason": reason, "score": score,
           "checks": [c.to_dict() for c in checks]}
    out.update(extra)
    return out


def result_from_claim(res: ClaimResult, *, score: float | None = None) -> dict:
    """A sweepable result from a core ClaimResult."""
    if not isinstance(res, ClaimResult):
        raise TypeError(f"result_from_claim: res must be a core.ClaimResult, got {type(res).__name__}")
    _check_score(score)
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

_SWEEP_KEYS = ("family", "mode", "seeds", "samples", "sample_seed", "modules", "store", "workers", "description",
               "max_instances")

#: Largest number of instances a config may describe unless it raises ``sweep.max_instances``:
#: the instances are held in memory (about 1 kB each) and their keys read from the store before
#: anything runs, so a typo such as ``num = 100000`` on three axes is refused at once, with the
#: count, instead of filling the memory.
MAX_INSTANCES = 1_000_000
#: Largest worker count (--workers / sweep.workers): each is a Python process.
MAX_WORKERS = 512
#: Seeds are stored as SQLite INTEGER (signed 64 bit).
_MAX_SEED = 2 ** 63 - 1


@dataclass(frozen=True)
class Instance:
    key: str
    params: dict
    seed: int


def instance_key(family: str, version: str, params: Mapping[str, Any], seed: int) -> str:
    if not isinstance(family, str) or not isinstance(version, str):
        raise TypeError("instance_key: family and version must be str")
    if not isinstance(params, Mapping):
        raise TypeError(f"instance_key: params must be a dict, got {type(params).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= _MAX_SEED:
        raise ValueError(f"instance_key: seed must be an integer in [0, 2^63), got {seed!r}")
    payload = json.dumps({"family": family, "version": version, "params": dict(params), "seed": int(seed)},
                         sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


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

    def size(self) -> int:
        """Number of instances the config describes (before duplicates are removed), computed
        without building them: grid = product of the axis lengths x seeds; random = samples x seeds."""
        if self.mode == "random":
            return int(self.samples or 0) * len(self.seeds)
        n = 1
        for spec in self.parameters.values():
            n *= _axis_len(spec)
        return n * len(self.seeds)

    def config_hash(self) -> str:
        return hashlib.sha256(json.dumps({k: self.raw.get(k) for k in ("sweep", "parameters")}, sort_keys=True,
                                         default=str).encode()).hexdigest()[:16]

    def instances(self, sweepable: Sweepable | None = None, *, validate: bool = True) -> list[Instance]:
        """Every instance of the sweep, in a deterministic order, duplicates removed.

        ``sweepable``: the registered one by default; ``validate=False`` skips its
        ``validate`` (used by ``--summary``, which runs no code of the config's modules)."""
        sw = self.sweepable if sweepable is None else sweepable
        combos = self._grid() if self.mode == "grid" else self._random()
        out, seen = [], set()
        for p in combos:
            params = dict(sw.defaults)
            params.update(p)
            params = {k: params[k] for k in sorted(params)}
            if validate and sw.validate is not None:
                try:
                    sw.validate(dict(params))
                except (ValueError, TypeError) as exc:
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


def _axis_len(spec) -> int:
    """Length of one grid axis (an upper bound when integer rounding merges values)."""
    if isinstance(spec, list):
        return len(spec)
    if isinstance(spec, dict):
        n = spec.get("num")
        if spec.get("integer") and n is None:
            return int(spec["max"]) - int(spec["min"]) + 1
        return int(n)
    return 1


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


def _int_value(key: str, v, *, minimum: int, what: str = "an integer") -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise UsageError(f"{key} must be {what} >= {minimum}, got {v!r}")
    return v


def parse_config(data: dict, path: str | None = None, *, import_modules: bool = True) -> SweepSpec:
    """Validate a parsed TOML document into a :class:`SweepSpec`; errors name the key.

    Everything that needs no code of the config is checked first (keys, types, seeds, the
    number of instances against ``sweep.max_instances``); then, with ``import_modules=True``,
    the config's ``modules`` are imported (they are code that runs, like a conftest) and the
    parameters are checked against the sweepable. ``import_modules=False`` (``--summary``)
    never imports them: the family may then be unknown to this process."""
    if not isinstance(data, dict):
        raise TypeError(f"parse_config: data must be a dict (a parsed TOML document), got {type(data).__name__}")
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
    if not isinstance(modules, list) or not all(isinstance(m, str) and m.strip() for m in modules):
        raise UsageError(f"sweep.modules must be a list of module names, got {modules!r}")
    family = sweep.get("family")
    if family is not None and (not isinstance(family, str) or not family):
        raise UsageError(f"sweep.family must be the name of a registered sweepable, got {family!r}")
    mode = sweep.get("mode", "grid")
    if mode not in ("grid", "random"):
        raise UsageError(f"sweep.mode must be \"grid\" or \"random\", got {mode!r}")
    limit = _int_value("sweep.max_instances", sweep.get("max_instances", MAX_INSTANCES), minimum=1)
    seeds = sweep.get("seeds", [0])
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if seeds < 1:
            raise UsageError(f"sweep.seeds must be >= 1 (a count) or a list of integers, got {seeds}")
        if seeds > limit:
            raise UsageError(f"sweep.seeds: {seeds} seeds alone exceed the limit of {limit} instances "
                             "(sweep.max_instances)")
        seeds = list(range(seeds))
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise UsageError(f"sweep.seeds must be a non-empty list of integers or a count, got {seeds!r}")
    bad_seed = [s for s in seeds if not 0 <= s <= _MAX_SEED]
    if bad_seed:
        raise UsageError(f"sweep.seeds must be integers >= 0 (and < 2^63), got {bad_seed[0]}")
    samples = sweep.get("samples")
    if mode == "random":
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
            raise UsageError(f"sweep.samples must be an integer >= 1 in random mode, got {samples!r}")
    elif samples is not None:
        raise UsageError("sweep.samples is only used with mode = \"random\"")
    sample_seed = sweep.get("sample_seed", 0)
    if isinstance(sample_seed, bool) or not isinstance(sample_seed, int):
        raise UsageError(f"sweep.sample_seed must be an integer, got {sample_seed!r}")
    if not 0 <= sample_seed <= _MAX_SEED:
        raise UsageError(f"sweep.sample_seed must be an integer >= 0 (and < 2^63), got {sample_seed}")
    workers = sweep.get("workers")
    if workers is not None:
        _int_value("sweep.workers", workers, minimum=1)
        if workers > MAX_WORKERS:
            raise UsageError(f"sweep.workers must be <= {MAX_WORKERS} (one process each), got {workers}")
    store = sweep.get("store")
    if store is not None and (not isinstance(store, str) or not store.strip()):
        raise UsageError(f"sweep.store must be a non-empty path, got {store!r}")
    description = sweep.get("description")
    if description is not None and not isinstance(description, str):
        raise UsageError(f"sweep.description must be a string, got {description!r}")

    params = data.get("parameters", {})
    if not isinstance(params, dict):
        raise UsageError("[parameters] must be a table")
    for name, spec in params.items():
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
    spec_obj = SweepSpec(family or "", mode, dict(params), seeds, samples, sample_seed, modules, store, workers,
                         path, data)
    size = spec_obj.size()
    if size > limit:
        if mode == "grid":
            axes = " x ".join(f"{n}: {_axis_len(v)}" for n, v in params.items() if _axis_len(v) > 1)
            detail = f"{axes + ' x ' if axes else ''}{len(seeds)} seed(s)"
        else:
            detail = f"{samples} samples x {len(seeds)} seed(s)"
        raise UsageError(f"the sweep has {size} instances ({detail}), more than the limit of {limit}: "
                         "split it into several configs, or raise sweep.max_instances")

    if import_modules:
        if path is not None:  # modules next to the config file are importable
            cfg_dir = str(Path(path).resolve().parent)
            if cfg_dir not in sys.path:
                sys.path.insert(0, cfg_dir)
        _import_modules(modules)
    discover_builtin()
    if family is None:
        raise UsageError(f"sweep.family is required: one of {', '.join(sorted(_REGISTRY)) or 'none registered'}")
    sw = get_sweepable(family) if import_modules else _REGISTRY.get(family)
    if sw is not None:
        for name in params:
            if sw.parameters is not None and name not in sw.parameters:
                raise UsageError(f"parameters.{name}: unknown parameter for family {family!r} "
                                 f"(known: {', '.join(sw.parameters)})")
        if sw.parameters is not None:
            missing = [p for p in sw.parameters if p not in params and p not in sw.defaults]
            if missing:
                raise UsageError(f"parameters.{missing[0]} is required for family {family!r}")
    return spec_obj


def load_config(path: str, *, import_modules: bool = True) -> SweepSpec:
    """Read and validate a TOML sweep config (see :func:`parse_config`)."""
    import tomllib

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"load_config: path must be a str or os.PathLike, got {type(path).__name__}")
    path = os.fspath(path)
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory, not a sweep config (a TOML file)")
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise UsageError(f"{path}: config file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: malformed TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not a TOML file (not UTF-8 text: {exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the config ({exc.strerror or type(exc).__name__})") from None
    return parse_config(data, path, import_modules=import_modules)


# --------------------------------------------------------------------------------------
# Store
# --------------------------------------------------------------------------------------

def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


#: Seconds a lease on an instance lasts unless renewed. A sweep renews its leases every
#: LEASE_SECONDS / 4 (a background thread), so a lease expires only when its sweep stopped;
#: a lease of a dead process on the same host is taken over at once (its pid is gone).
LEASE_SECONDS = 60.0


def _lease_owner() -> str:
    import uuid

    return f"{socket.gethostname()}|{os.getpid()}|{uuid.uuid4().hex[:12]}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    try:  # a zombie (killed, not yet reaped) is dead for our purpose
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def _lease_stale(owner: str, expires: float, now: float) -> bool:
    if expires < now:
        return True
    host, _, rest = owner.partition("|")
    pid = rest.partition("|")[0]
    if host == socket.gethostname() and pid.isdigit():
        return not _pid_alive(int(pid))
    return False


class Store:
    """SQLite store: one row per finished instance (primary key = instance key).

    Every result is committed on its own transaction as soon as it arrives (WAL journal,
    synchronous=FULL), so a SIGKILL loses at most the instances still being computed.
    Several sweeps may share a store: each claims the instances it computes with a lease
    (table ``leases``: key, owner, expiry), taken in an ``IMMEDIATE`` transaction, so an
    instance is computed by one sweep at a time.
    """

    def __init__(self, path: str):
        self.path = str(path)
        self.db = None
        try:
            # isolation_level=None: autocommit; multi-statement writes use explicit
            # BEGIN IMMEDIATE ... COMMIT (the write lock is taken at BEGIN: no lock upgrades).
            self.db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
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
            CREATE TABLE IF NOT EXISTS leases (key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL);
            CREATE INDEX IF NOT EXISTS leases_owner ON leases(owner);
            CREATE TABLE IF NOT EXISTS sweepables (
                family TEXT NOT NULL, version TEXT NOT NULL, defaults TEXT NOT NULL, recorded_at TEXT NOT NULL,
                PRIMARY KEY (family, version));
            """)
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
            row = self.db.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
            self.db.execute("SELECT count(*) FROM results").fetchone()  # reads the table: a damaged file fails here
        except sqlite3.DatabaseError as exc:
            self.close()
            raise UsageError(f"--store {self.path}: not a usable SQLite store ({exc})") from None
        schema = row[0] if row else None
        if schema != SCHEMA_VERSION:
            self.close()
            raise UsageError(f"--store {self.path}: schema {schema}, this ncproofs writes schema {SCHEMA_VERSION}")

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

    def _begin(self) -> None:
        if self.db.in_transaction:  # left open by an interrupt (Ctrl-C, SIGTERM) inside a write
            self.db.rollback()
        self.db.execute("BEGIN IMMEDIATE")

    def _write(self, fn):
        self._begin()
        try:
            out = fn()
            self.db.execute("COMMIT")
            return out
        except BaseException:
            if self.db is not None and self.db.in_transaction:
                self.db.rollback()
            raise

    def done_keys(self, keys: Iterable[str] | None = None) -> set[str]:
        rows = self.db.execute("SELECT key FROM results").fetchall()
        have = {r[0] for r in rows}
        return have if keys is None else have & set(keys)

    def begin_run(self, spec: SweepSpec, scheduler: str, total: int, skipped: int,
                  sweepable: Sweepable | None = None) -> int:
        def write():
            cur = self.db.execute(
                "INSERT INTO runs (started_at, family, config_hash, config, scheduler, total, skipped, status) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 'running')",
                (_now(), spec.family, spec.config_hash(), json.dumps(spec.raw, default=str), scheduler, total,
                 skipped))
            if sweepable is not None:  # lets --summary compute keys without importing the config's modules
                self.db.execute("INSERT OR REPLACE INTO sweepables VALUES (?, ?, ?, ?)",
                                (sweepable.name, sweepable.version,
                                 json.dumps(dict(sweepable.defaults), sort_keys=True), _now()))
            return int(cur.lastrowid)

        return self._write(write)

    def end_run(self, run_id: int, status: str, computed: int) -> None:
        self._write(lambda: self.db.execute("UPDATE runs SET finished_at=?, status=?, computed=? WHERE run_id=?",
                                            (_now(), status, computed, run_id)))

    def computed_by_run(self, run_id: int) -> int:
        return int(self.db.execute("SELECT count(*) FROM results WHERE run_id=?", (run_id,)).fetchone()[0])

    def sweepable_record(self, family: str) -> Sweepable | None:
        """The (version, defaults) a sweep of ``family`` last recorded here, as a Sweepable that can
        compute instance keys but not results (``fn`` is None)."""
        row = self.db.execute("SELECT version, defaults FROM sweepables WHERE family=? ORDER BY rowid DESC LIMIT 1",
                              (family,)).fetchone()
        if row is None:
            return None
        return Sweepable(family, None, None, json.loads(row[1]), None, row[0], "recorded in the store")

    def claim(self, keys: list[str], owner: str, ttl: float = LEASE_SECONDS) -> tuple[set[str], set[str], set[str]]:
        """Lease the given instances to ``owner`` in one IMMEDIATE transaction.

        Returns ``(claimed, done, busy)``: leased now (or already ours), already stored, and
        leased by another live sweep. A lease that expired, or whose owner process on this
        host is gone, is taken over."""
        keys = list(dict.fromkeys(keys))

        def write():
            now = time.time()
            claimed, done, busy = set(), set(), set()
            for i in range(0, len(keys), 400):
                chunk = keys[i:i + 400]
                marks = ",".join("?" * len(chunk))
                done |= {r[0] for r in self.db.execute(f"SELECT key FROM results WHERE key IN ({marks})", chunk)}
                held = {r[0]: (r[1], r[2]) for r in
                        self.db.execute(f"SELECT key, owner, expires FROM leases WHERE key IN ({marks})", chunk)}
                for k in chunk:
                    if k in done:
                        continue
                    if k in held and held[k][0] != owner and not _lease_stale(held[k][0], held[k][1], now):
                        busy.add(k)
                        continue
                    self.db.execute("INSERT OR REPLACE INTO leases (key, owner, expires) VALUES (?, ?, ?)",
                                    (k, owner, now + ttl))
                    claimed.add(k)
            return claimed, done, busy

        return self._write(write)

    def renew(self, owner: str, ttl: float = LEASE_SECONDS) -> None:
        self._write(lambda: self.db.execute("UPDATE leases SET expires=? WHERE owner=?", (time.time() + ttl, owner)))

    def release(self, owner: str) -> None:
        self._write(lambda: self.db.execute("DELETE FROM leases WHERE owner=?", (owner,)))

    def put(self, inst: Instance, family: str, version: str, result: dict, seconds: float, run_id: int,
            worker: str, owner: str | None = None) -> bool:
        """Write one finished instance and drop its lease (one transaction, committed at once).
        Returns False if it was already stored."""
        result = clean(result)
        score = result.get("score")
        score = float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None
        row = (inst.key, family, version, json.dumps(inst.params, sort_keys=True), inst.seed, result["verdict"],
               result.get("reason"), score, json.dumps(result, allow_nan=False), seconds, run_id, _now(), worker)

        def write():
            cur = self.db.execute(
                "INSERT INTO results (key, family, version, params, seed, verdict, reason, score, result, seconds, "
                "run_id, finished_at, worker) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(key) DO NOTHING", row)
            if owner is not None:
                self.db.execute("DELETE FROM leases WHERE key=? AND owner=?", (inst.key, owner))
            return cur.rowcount == 1

        return self._write(write)

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


class _LeaseKeeper:
    """Renews this sweep's leases every LEASE_SECONDS / 4 from a thread with its own SQLite
    connection, so a long instance (or a computation in the main thread) keeps its lease."""

    def __init__(self, path: str, owner: str, ttl: float = LEASE_SECONDS):
        import threading

        self.path, self.owner, self.ttl = path, owner, ttl
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ncproofs-sweep-leases", daemon=True)

    def start(self) -> "_LeaseKeeper":
        self._thread.start()
        return self

    def _loop(self) -> None:
        try:
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        except sqlite3.Error:  # pragma: no cover - the main connection works, so does this one
            return
        try:
            while not self._stop.wait(self.ttl / 4):
                try:
                    db.execute("UPDATE leases SET expires=? WHERE owner=?", (time.time() + self.ttl, self.owner))
                except sqlite3.Error:  # busy beyond 30 s, etc.: try again at the next tick
                    pass
        finally:
            db.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class _Claims:
    """Hands out the pending instances to compute, leasing them in small batches; instances
    leased by another live sweep are retried every RECHECK seconds until stored or free."""

    RECHECK = 0.5

    def __init__(self, store: Store, owner: str, pending: list[Instance], batch: int, on_elsewhere=None):
        from collections import deque

        self.store, self.owner, self.batch = store, owner, max(1, int(batch))
        self.todo = deque(pending)
        self.ready: deque = deque()
        self.busy: dict[str, Instance] = {}
        self.elsewhere = 0
        self._on_elsewhere = on_elsewhere
        self._next_recheck = 0.0

    def take(self) -> Instance | None:
        """The next instance leased to this sweep, or None if none can be taken now."""
        while not self.ready:
            if self.todo:
                batch = [self.todo.popleft() for _ in range(min(self.batch, len(self.todo)))]
            elif self.busy and time.monotonic() >= self._next_recheck:
                batch = list(self.busy.values())
                self.busy.clear()
                self._next_recheck = time.monotonic() + self.RECHECK
            else:
                return None
            claimed, done, busy = self.store.claim([i.key for i in batch], self.owner)
            for inst in batch:
                if inst.key in claimed:
                    self.ready.append(inst)
                elif inst.key in done:
                    self.elsewhere += 1
                    if self._on_elsewhere is not None:
                        self._on_elsewhere(1)
                else:
                    self.busy[inst.key] = inst
        return self.ready.popleft()

    def exhausted(self) -> bool:
        return not (self.todo or self.ready or self.busy)

    def wait(self) -> None:
        """Sleep until the instances leased elsewhere are worth checking again."""
        time.sleep(max(0.05, min(self.RECHECK, self._next_recheck - time.monotonic())))


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


# ---- local worker processes -------------------------------------------------------------
#
# Each worker is a fresh interpreter (``python -c ...``) started by this process, with two
# pipes: tasks in, results out (length-prefixed pickles). Guarantees:
# - a worker exits when the sweep ends for any reason: on a normal end or an interrupt the
#   sweep closes the task pipe (the worker's reader thread sees EOF and exits at once); when
#   the sweep process dies, even by SIGKILL, the kernel closes the pipe, and on Linux the worker
#   also gets SIGKILL from PR_SET_PDEATHSIG (which works even when the worker is stuck in C
#   code holding the GIL); a watchdog thread also exits when the parent pid changes;
# - there is no forkserver, no resource tracker and no shared semaphore that could outlive the
#   sweep; workers ignore SIGINT (Ctrl-C reaches the whole process group: the sweep decides).

_FRAME = struct.Struct("<Q")
_WORKER_FLAG = "--ncproofs-sweep-worker"
_WORKER_CODE = ("import sys, os, json; p = json.loads(os.environ.pop('NCPROOFS_SWEEP_SYSPATH', '[]')); "
                "sys.path[:] = p + [x for x in sys.path if x not in p]; "
                "from proofs_check.sweep import _worker_main; _worker_main(sys.argv[1:])")


def _frame(obj) -> bytes:
    import pickle

    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _FRAME.pack(len(data)) + data


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _die_with_parent(parent: int) -> None:
    """Linux: ask the kernel to SIGKILL this process when its parent dies."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
        except Exception:  # pragma: no cover - no libc prctl: the pipe and the watchdog remain
            pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _worker_main(argv: list[str]) -> None:
    """Entry point of a local worker process (see the comment above)."""
    import pickle
    import queue
    import signal
    import threading

    if len(argv) != 4 or argv[0] != _WORKER_FLAG:
        raise SystemExit("proofs_check.sweep worker: started without its pipes")
    task_fd, result_fd, parent = int(argv[1]), int(argv[2]), int(argv[3])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent)
    tasks: queue.SimpleQueue = queue.SimpleQueue()

    def reader() -> None:
        try:
            while True:
                head = _read_exact(task_fd, _FRAME.size)
                body = None if head is None else _read_exact(task_fd, _FRAME.unpack(head)[0])
                if body is None:  # the sweep closed the pipe, or died
                    break
                tasks.put(pickle.loads(body))
        except BaseException:
            pass
        os._exit(0)

    def watchdog() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=reader, daemon=True).start()
    threading.Thread(target=watchdog, daemon=True).start()
    while True:
        idx, name, modules, params, seed = tasks.get()
        payload = _execute(name, modules, params, seed)
        try:
            frame = _frame((idx, payload))
        except Exception as exc:  # an unpicklable entry in the result: an ERROR, not a lost instance
            frame = _frame((idx, ({"verdict": "ERROR", "reason": f"result cannot be sent back: "
                                   f"{type(exc).__name__}: {exc}"}, payload[1], payload[2])))
        try:
            _write_all(result_fd, frame)
        except OSError:  # the sweep is gone
            os._exit(1)


class WorkerDied(RuntimeError):
    pass


class _Worker:
    def __init__(self, proc, task_w: int, result_r: int):
        self.proc, self.task_w, self.result_r = proc, task_w, result_r
        self.buf = bytearray()
        self.inflight: dict[int, Instance] = {}
        self.eof = False


class _LocalPool:
    """A fixed set of worker processes fed through pipes (see the comment above)."""

    def __init__(self, n: int):
        import subprocess

        self.workers: list[_Worker] = []
        self._next = 0
        env = dict(os.environ)
        env["NCPROOFS_SWEEP_SYSPATH"] = json.dumps([p for p in sys.path if isinstance(p, str)])
        try:
            for _ in range(n):
                task_r, task_w = os.pipe()
                result_r, result_w = os.pipe()
                try:
                    proc = subprocess.Popen(
                        [sys.executable, "-c", _WORKER_CODE, _WORKER_FLAG, str(task_r), str(result_w),
                         str(os.getpid())],
                        pass_fds=(task_r, result_w), stdin=subprocess.DEVNULL, env=env, close_fds=True)
                finally:
                    os.close(task_r)
                    os.close(result_w)
                self.workers.append(_Worker(proc, task_w, result_r))
        except BaseException:
            self.close()
            raise

    @property
    def inflight(self) -> int:
        return sum(len(w.inflight) for w in self.workers)

    def submit(self, w: _Worker, sw_name: str, modules: list[str], inst: Instance) -> None:
        self._next += 1
        w.inflight[self._next] = inst
        try:
            _write_all(w.task_w, _frame((self._next, sw_name, modules, inst.params, inst.seed)))
        except OSError:
            raise self._died(w) from None

    def _died(self, w: _Worker) -> WorkerDied:
        try:
            rc = w.proc.wait(timeout=2)
        except Exception:
            rc = None
        how = f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exit status {rc}"
        if w.inflight:  # a worker computes its tasks in order: the oldest is the one it was running
            inst = w.inflight[min(w.inflight)]
            shown = ", ".join(f"{k}={v!r}" for k, v in inst.params.items())
            doing = f"while computing instance {inst.key} ({shown}, seed={inst.seed})"
        else:
            doing = "while idle"
        return WorkerDied(f"a worker process died ({how}) {doing}; the run is recorded as interrupted, finished "
                          "instances are stored: rerun to resume")

    def poll(self, timeout: float | None) -> list[tuple[Instance, tuple]]:
        """Results that arrived within ``timeout`` seconds (all that are complete)."""
        import pickle
        import selectors

        live = [w for w in self.workers if not w.eof]
        if not live:
            return []
        out = []
        with selectors.DefaultSelector() as sel:
            for w in live:
                sel.register(w.result_r, selectors.EVENT_READ, w)
            events = sel.select(timeout)
        for key, _ in events:
            w = key.data
            chunk = os.read(w.result_r, 1 << 20)
            if not chunk:
                w.eof = True
                raise self._died(w)
            w.buf += chunk
            while len(w.buf) >= _FRAME.size:
                (n,) = _FRAME.unpack_from(w.buf)
                if len(w.buf) < _FRAME.size + n:
                    break
                idx, payload = pickle.loads(bytes(w.buf[_FRAME.size:_FRAME.size + n]))
                del w.buf[:_FRAME.size + n]
                out.append((w.inflight.pop(idx), payload))
        return out

    def close(self, grace: float = 2.0) -> None:
        """Close the task pipes (idle workers exit at once; busy ones abandon their instance),
        then SIGKILL whatever is still alive after ``grace`` seconds, and reap every worker."""
        for w in self.workers:
            if w.task_w >= 0:
                os.close(w.task_w)
                w.task_w = -1
        deadline = time.monotonic() + grace
        for w in self.workers:
            try:
                w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:
                w.proc.kill()
                w.proc.wait()
            if w.result_r >= 0:
                os.close(w.result_r)
                w.result_r = -1


def _run_inline(sw: Sweepable, modules: list[str], claims: _Claims, on_result) -> None:
    while True:
        inst = claims.take()
        if inst is None:
            if claims.exhausted():
                return
            claims.wait()
            continue
        on_result(inst, _execute(sw.name, modules, inst.params, inst.seed))


def _run_local(nworkers: int, sw: Sweepable, modules: list[str], claims: _Claims, on_result,
               per_worker: int = 2) -> None:
    pool = _LocalPool(nworkers)
    try:
        try:
            while True:
                for w in pool.workers:
                    while len(w.inflight) < per_worker:
                        inst = claims.take()
                        if inst is None:
                            break
                        pool.submit(w, sw.name, modules, inst)
                if not pool.inflight:
                    if claims.exhausted():
                        return
                    claims.wait()
                    continue
                for inst, payload in pool.poll(0.5):
                    on_result(inst, payload)
        except BaseException:
            # results already sent back are stored before the workers go
            try:
                while True:
                    got = pool.poll(0)
                    if not got:
                        break
                    for inst, payload in got:
                        on_result(inst, payload)
            except BaseException:
                pass
            raise
    finally:
        pool.close()


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

    def elsewhere(self, n: int) -> None:
        """``n`` pending instances were stored by another sweep on the same store."""
        self.already += n
        if self.enabled and self.tty:
            self.stream.write("\r\033[K" + self.line())
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
    computed: int  # by this process (this run)
    status: str  # "finished" | "interrupted"
    store: str
    run_id: int
    elsewhere: int = 0  # pending at the start, then computed by another sweep on the same store


def _scheduler_address(scheduler: str | None) -> str | None:
    if scheduler:
        return scheduler
    env = os.environ.get("DASK_SCHEDULER_ADDRESS")
    return env or None


class SweepSignal(KeyboardInterrupt):
    """SIGTERM / SIGHUP during a sweep, turned into an interrupt so the sweep stops cleanly."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class _Signals:
    """While a sweep runs (main thread only): SIGTERM and SIGHUP interrupt it like Ctrl-C, so
    the workers are stopped, the store says "interrupted" and the leases are released."""

    def __enter__(self):
        import signal
        import threading

        self._old = {}
        if threading.current_thread() is threading.main_thread():
            def handler(signum, frame):
                raise SweepSignal(signum)

            for name in ("SIGTERM", "SIGHUP"):
                sig = getattr(signal, name, None)
                if sig is not None:
                    try:
                        self._old[sig] = signal.signal(sig, handler)
                    except (ValueError, OSError):  # pragma: no cover
                        pass
        return self

    def __exit__(self, *exc):
        import signal

        for sig, old in self._old.items():
            signal.signal(sig, old)
        return False


def _check_run_args(spec, store_path, scheduler, workers, connect_timeout) -> None:
    if not isinstance(spec, SweepSpec):
        raise TypeError(f"run_sweep: spec must be a SweepSpec (see load_config/parse_config), got {type(spec).__name__}")
    if not isinstance(store_path, (str, os.PathLike)) or not os.fspath(store_path):
        raise TypeError(f"run_sweep: store_path must be a non-empty path, got {store_path!r}")
    if scheduler is not None and not isinstance(scheduler, str):
        raise TypeError(f"run_sweep: scheduler must be an address string or None, got {scheduler!r}")
    if workers is not None:
        if isinstance(workers, bool) or not isinstance(workers, int):
            raise TypeError(f"run_sweep: workers must be an int or None, got {workers!r}")
        if not 1 <= workers <= MAX_WORKERS:
            raise ValueError(f"run_sweep: workers must be in [1, {MAX_WORKERS}], got {workers}")
    if isinstance(connect_timeout, bool) or not isinstance(connect_timeout, (int, float)):
        raise TypeError(f"run_sweep: connect_timeout must be a number of seconds, got {connect_timeout!r}")
    if not (math.isfinite(connect_timeout) and connect_timeout > 0):
        raise ValueError(f"--connect-timeout must be a finite number > 0, got {connect_timeout}")


def run_sweep(spec: SweepSpec, store_path: str, *, scheduler: str | None = None, workers: int | None = None,
              progress: bool = True, stream: TextIO | None = None,
              connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> SweepOutcome:
    """Run the pending instances of ``spec`` and store each one as it finishes.

    ``scheduler``: a Dask scheduler address (else ``DASK_SCHEDULER_ADDRESS``, else local processes).
    ``workers``: local worker processes (1 = in this process).
    Another sweep on the same store may run at the same time: instances are leased in the
    store, so each is computed once; this sweep waits for the ones the other is computing.
    SIGINT, SIGTERM and SIGHUP stop it (``SweepInterrupted``), workers included; the run is
    recorded as "interrupted", as it is when the Dask scheduler or a worker is lost.
    """
    _check_run_args(spec, store_path, scheduler, workers, connect_timeout)
    store_path = os.fspath(store_path)
    sw = spec.sweepable
    if sw.fn is None:
        raise ValueError(f"run_sweep: sweepable {sw.name!r} has no function (a record from a store)")
    instances = spec.instances()
    address = _scheduler_address(scheduler)
    client = _dask_client(address, connect_timeout) if address else None  # fail fast, before touching the store
    try:
        store = Store(store_path)
    except BaseException:
        if client is not None:
            _close_client(client)
        raise
    owner = _lease_owner()
    keeper = None
    try:
        done = store.done_keys(i.key for i in instances)
        pending = [i for i in instances if i.key not in done]
        nworkers = workers or spec.workers or (os.cpu_count() or 1)
        nworkers = min(nworkers, max(len(pending), 1))
        if client is None and nworkers > 1 and os.name != "posix":  # pragma: no cover - pipes + pass_fds
            print("ncproofs: sweep: local worker processes need a POSIX system; computing in this process",
                  file=sys.stderr)
            nworkers = 1
        sched_name = f"dask:{address}" if address else f"local:{nworkers}"
        run_id = store.begin_run(spec, sched_name, len(instances), len(done), sw)
        prog = SweepProgress(len(instances), len(done), stream, progress)
        prog.start()
        claims = _Claims(store, owner, pending, batch=_dask_window(client) if client is not None else nworkers,
                         on_elsewhere=prog.elsewhere)
        keeper = _LeaseKeeper(store_path, owner).start()

        def on_result(inst: Instance, payload: tuple[dict, float, str]) -> None:
            res, secs, worker = payload
            store.put(inst, sw.name, sw.version, res, secs, run_id, worker, owner)
            prog.update(res["verdict"])

        status, signum = "interrupted", None
        try:
            with _Signals():
                if client is not None:
                    _run_dask(client, sw, spec.modules, claims, on_result, address)
                elif nworkers <= 1:
                    _run_inline(sw, spec.modules, claims, on_result)
                else:
                    _run_local(nworkers, sw, spec.modules, claims, on_result)
            status = "finished"
        except SweepSignal as exc:
            signum = exc.signum
        except KeyboardInterrupt:
            import signal

            signum = int(signal.SIGINT)
        finally:
            # a lost scheduler or worker (an exception) leaves status "interrupted": resume continues it
            keeper.stop()
            prog.finish()
            computed = store.computed_by_run(run_id)  # exact, also when an interrupt hit between store and count
            store.release(owner)
            store.end_run(run_id, status, computed)
        stored_now = store.done_keys(i.key for i in pending)
        elsewhere = len(stored_now) - computed
        if status == "interrupted":
            raise SweepInterrupted(len(instances), len(done) + len(stored_now), store_path, signum)
        return SweepOutcome(len(instances), len(done), computed, status, store_path, run_id, elsewhere)
    finally:
        if keeper is not None:
            keeper.stop()
        store.close()
        if client is not None:
            _close_client(client)


class _QuietDask:
    """Raise every ``distributed*`` logger to CRITICAL for a moment (Dask configures levels per
    logger, e.g. ``distributed.client``, so the parent's level alone is not enough)."""

    def __enter__(self):
        import logging

        names = ["distributed"] + [n for n in list(logging.root.manager.loggerDict) if n.startswith("distributed.")]
        self._old = [(logging.getLogger(n), logging.getLogger(n).level) for n in names]
        for log, _ in self._old:
            log.setLevel(logging.CRITICAL)
        return self

    def __exit__(self, *exc):
        for log, level in self._old:
            log.setLevel(level)
        return False


def _close_client(client) -> None:
    """Close a Dask client quietly: after a lost scheduler, closing cancels Dask's reconnect
    attempt, which it would otherwise log as an ERROR with a traceback."""
    with _QuietDask():
        try:
            client.close()
        except Exception:
            pass


class SweepInterrupted(KeyboardInterrupt):
    def __init__(self, total: int, stored: int, store: str, signum: int | None = None):
        import signal

        signum = int(signal.SIGINT) if signum is None else int(signum)
        how = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
        super().__init__(f"{how}: {stored}/{total} instances stored in {store}; rerun the same command to resume")
        self.total, self.stored, self.store, self.signum = total, stored, store, signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


# ---- Dask ---------------------------------------------------------------------------------

def _recv_exact(sock, n: int, deadline: float) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        sock.settimeout(left)
        try:
            chunk = sock.recv(min(n - len(buf), 65536))
        except (socket.timeout, TimeoutError):
            return None
        if not chunk:
            return b""
        buf += chunk
    return bytes(buf)


def _probe_scheduler(address: str, timeout: float) -> None:
    """Before Dask's own connect (whose handshake read has no time limit): open a TCP connection
    and read the greeting a Dask scheduler sends first (a small length-prefixed msgpack frame
    naming "pickle-protocol"), all within ``timeout``. A silent peer or another service is a
    one-line UsageError instead of a hang or a huge allocation."""
    from distributed.comm.addressing import parse_address, parse_host_port

    fail = f"--scheduler: cannot reach the Dask scheduler at {address} within {timeout:g} s"
    try:
        scheme, loc = parse_address(address)
        if scheme != "tcp":
            return  # tls://, ucx://, inproc://: Dask connects; the thread bound in _dask_client applies
        host, port = parse_host_port(loc, default_port=8786)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"--scheduler: malformed address {address!r} ({exc})") from None
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout)
    except (socket.timeout, TimeoutError):
        raise UsageError(f"{fail} (no TCP connection)") from None
    except OSError as exc:
        raise UsageError(f"{fail} ({type(exc).__name__}: {exc.strerror or exc})") from None
    with sock:
        head = _recv_exact(sock, _FRAME.size, deadline)
        if head is None:
            raise UsageError(f"{fail} (the peer accepted the connection but sent nothing: not a Dask scheduler?)")
        if head == b"" or len(head) < _FRAME.size:
            raise UsageError(f"{fail} (the peer closed the connection: not a Dask scheduler?)")
        (n,) = _FRAME.unpack(head)
        body = _recv_exact(sock, n, deadline) if 8 <= n <= 65536 else b""
        if body is None:
            raise UsageError(f"{fail} (the peer stopped answering: not a Dask scheduler?)")
        if b"pickle-protocol" not in body:
            raise UsageError(f"{fail} (the service at that address does not speak the Dask protocol)")


def _dask_client(address: str, timeout: float):
    try:
        import distributed  # noqa: F401
        from distributed import Client
    except ImportError:
        raise UsageError("--scheduler: Dask is not installed; install the optional extra: "
                         "pip install 'dask[distributed]' (or ncproofs[dask])") from None
    import threading

    with _QuietDask():  # a failed connect is reported once, below, not as a log storm
        t0 = time.monotonic()
        _probe_scheduler(address, timeout)
        left = max(timeout - (time.monotonic() - t0), min(timeout, 1.0))
        box: dict = {}
        lock = threading.Lock()

        def connect() -> None:
            try:
                c = Client(address, timeout=f"{left}s", set_as_default=False)
            except BaseException as exc:  # OSError, TimeoutError, MemoryError from a non-Dask peer, ...
                box["error"] = exc
                return
            with lock:
                late = box.get("gave_up", False)
                if not late:
                    box["client"] = c
            if late:  # nobody waits for it any more
                _close_client(c)

        th = threading.Thread(target=connect, name="ncproofs-dask-connect", daemon=True)
        th.start()
        th.join(left + 1.0)  # Dask's connect bounds the TCP connect but not every step after it
        with lock:
            box["gave_up"] = True
            if "client" in box:
                return box["client"]
        exc = box.get("error")
        why = (" ".join(f"{type(exc).__name__}: {exc}".split())[:300] if exc is not None
               else "no answer to the Dask handshake")
        raise UsageError(f"--scheduler: cannot reach the Dask scheduler at {address} within {timeout:g} s "
                         f"({why})")


def _dask_window(client) -> int:
    nthreads = sum(client.nthreads().values()) or 1
    return max(2 * nthreads, 4)


def _run_dask(client, sw: Sweepable, modules: list[str], claims: _Claims, on_result, address: str) -> None:
    """Feed leased instances to the cluster, a window at a time, storing each result as it
    arrives. When the scheduler connection is lost, Dask cancels every future at once: that is
    reported as a lost scheduler (RuntimeError; the run stays "interrupted")."""
    import asyncio
    import uuid

    from distributed import as_completed

    window = _dask_window(client)
    tag = uuid.uuid4().hex[:8]
    owner: dict = {}  # future key -> Instance
    ac = as_completed(loop=client.loop)

    def lost(detail: str) -> RuntimeError:
        detail = " ".join(str(detail).split())[:300]  # one line
        return RuntimeError(f"lost the Dask scheduler at {address} ({detail}); the run is recorded as "
                            "interrupted, finished instances are stored: rerun the same command to resume")

    try:
        while True:
            while len(owner) < window:
                inst = claims.take()
                if inst is None:
                    break
                fut = client.submit(_execute, sw.name, modules, inst.params, inst.seed,
                                    key=f"ncproofs-{inst.key[:16]}-{tag}", pure=False)
                owner[fut.key] = inst
                ac.add(fut)
            if not owner:
                if claims.exhausted():
                    return
                claims.wait()
                continue
            if not ac.has_ready():
                if client.status not in ("running", "connecting", "newly-created"):
                    raise lost(f"client status {client.status!r}")
                time.sleep(0.05)
                continue
            fut = next(ac)
            inst = owner.pop(fut.key)
            try:
                payload = fut.result()
            except (Exception, asyncio.CancelledError) as exc:
                if fut.status == "cancelled" or client.status != "running":
                    raise lost("the connection was lost and Dask cancelled the tasks" if fut.status == "cancelled"
                               else f"{type(exc).__name__}: {exc}") from None
                why = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
                raise RuntimeError(f"Dask task for instance {inst.key} failed ({why}); "
                                   "the run is recorded as interrupted, finished instances are stored: "
                                   "rerun to resume") from None
            on_result(inst, payload)
    except BaseException:
        try:
            client.cancel(list(ac.futures))
        except Exception:
            pass
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
    from proofs_check.tables import FORMATS

    if not isinstance(rows, list):
        raise TypeError(f"summary_text: rows must be a list of dicts (Store.rows()), got {type(rows).__name__}")
    if isinstance(worst_n, bool) or not isinstance(worst_n, int) or worst_n < 0:
        raise ValueError(f"summary_text: worst_n must be an integer >= 0, got {worst_n!r}")
    if fmt not in FORMATS:
        raise ValueError(f"summary_text: fmt must be one of {', '.join(FORMATS)}, got {fmt!r}")
    c = counts(rows)
    lines = [f"stored: {len(rows)}" + (f", pending: {pending}" if pending is not None else ""),
             "verdicts: " + ", ".join(f"{v} {n}" for v, n in c.items() if n or v != "NOT_APPLICABLE")]
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


def _check_args(args) -> None:
    if args.workers is not None and not 1 <= args.workers <= MAX_WORKERS:
        raise UsageError(f"--workers must be >= 1 and <= {MAX_WORKERS}, got {args.workers}")
    if args.worst < 0:
        raise UsageError(f"--worst must be >= 0, got {args.worst}")
    if not (math.isfinite(args.connect_timeout) and args.connect_timeout > 0):
        raise UsageError(f"--connect-timeout must be a finite number > 0, got {args.connect_timeout}")
    if args.store is not None and not args.store.strip():
        raise UsageError("--store must be a non-empty path")


def _check_store_file(path: str, *, must_exist: bool) -> None:
    from proofs_check.outputs import check_output_path

    if os.path.isdir(path):
        raise UsageError(f"--store {path}: is a directory, not a SQLite store")
    if must_exist:
        if not os.path.exists(path):
            raise UsageError(f"--store {path}: no such store (run the sweep first)")
        if not os.path.isfile(path):
            raise UsageError(f"--store {path}: not a regular file")
    else:
        check_output_path(path, "--store")  # its folder exists and is writable, before any work


def main_from_args(args) -> int:
    _check_args(args)
    from proofs_check.outputs import check_output_path

    check_output_path(args.export, "--export")  # before any work
    path = None
    try:
        if args.summary:
            return _summary(args)
        if not args.config:
            raise UsageError("sweep needs CONFIG (a TOML file), or --summary --store PATH")
        spec = load_config(args.config)
        path = _store_path(args, spec)
        _check_store_file(path, must_exist=False)
        try:
            out = run_sweep(spec, path, scheduler=args.scheduler, workers=args.workers, progress=not args.quiet,
                            connect_timeout=args.connect_timeout)
        except SweepInterrupted as exc:
            print(f"ncproofs: {exc}", file=sys.stderr)
            return exc.exit_status
        except RuntimeError as exc:  # a lost scheduler or worker: the run is recorded as interrupted
            print(f"ncproofs: error: {exc}", file=sys.stderr)
            return 1
        store = Store(path)
        try:
            rows = store.rows([i.key for i in spec.instances()])
        finally:
            store.close()
        by = f", {out.elsewhere} by another sweep on the same store" if out.elsewhere else ""
        print(f"sweep {spec.family}: {out.total} instances ({out.skipped} already stored, {out.computed} computed"
              f"{by}) -> {path}")
        sys.stdout.write(summary_text(rows, pending=out.total - len(rows), worst_n=args.worst, fmt=args.format))
        _maybe_export(args, rows, path)
        return 1 if any(r["verdict"] in ("REFUTED", "ERROR") for r in rows) else 0
    except sqlite3.DatabaseError as exc:  # damaged or locked store found after it was opened
        raise UsageError(f"--store {path or args.store}: not a usable SQLite store ({exc})") from None


def _summary(args) -> int:
    """``--summary``: read the store only. The config's ``modules`` are never imported (they are
    code); instance keys come from the built-in sweepable or from what the store recorded."""
    spec = load_config(args.config, import_modules=False) if args.config else None
    path = _store_path(args, spec)
    _check_store_file(path, must_exist=True)
    store = Store(path)
    try:
        pending = None
        if spec is not None:
            sw = _REGISTRY.get(spec.family) or store.sweepable_record(spec.family)
            if sw is not None:
                keys = [i.key for i in spec.instances(sw, validate=False)]
                rows = store.rows(keys)
                pending = len(keys) - len(rows)
            else:  # never run on this store, and not built in: everything stored for the family
                rows = store.rows(family=spec.family)
        else:
            rows = store.rows()
    except sqlite3.DatabaseError as exc:
        raise UsageError(f"--store {path}: not a usable SQLite store ({exc})") from None
    finally:
        store.close()
    sys.stdout.write(summary_text(rows, pending=pending, worst_n=args.worst, fmt=args.format))
    _maybe_export(args, rows, path)
    return 0


def _maybe_export(args, rows: list[dict], store_path: str) -> None:
    from proofs_check.outputs import write_text_atomic

    if not args.export:
        return
    text = results_table(rows, caption=f"ncproofs sweep results from {os.path.basename(store_path)}").render(args.format)
    write_text_atomic(args.export, text)
    print(f"table: {args.export}", file=sys.stderr)
