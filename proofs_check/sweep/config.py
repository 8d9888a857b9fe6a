"""Sweep configs: TOML -> :class:`SweepSpec` (validated key by key), instance keys, the
grid and random instance generators."""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from proofs_check.commands import UsageError
from proofs_check.sweep.registry import _REGISTRY, Sweepable, _scalar_ok, discover_builtin, get_sweepable

_SWEEP_KEYS = ("family", "mode", "seeds", "samples", "sample_seed", "modules", "store", "workers", "description",
               "max_instances", "rigorous", "instance_time_limit")

#: Largest number of instances a config may describe unless it raises ``sweep.max_instances``:
#: the instances are held in memory (about 1 kB each) and their keys read from the store before
#: anything runs, so a typo such as ``num = 100000`` on three axes is refused at once, with the
#: count, instead of filling the memory.
MAX_INSTANCES = 1_000_000
#: Largest ``sweep.max_instances`` a config may set: the instances are built in memory (about 1 kB
#: each), so above this a sweep would need gigabytes before its first instance runs.
MAX_INSTANCES_LIMIT = 2_000_000
#: Default per-instance wall-clock limit (seconds) of a sweep (``sweep.instance_time_limit``): an
#: instance still running after it is stopped, stored as INCONCLUSIVE "stopped by the wall-clock safety limit", and its worker
#: replaced. A safety net against a sweepable that never returns, far above any built-in instance.
INSTANCE_TIME_LIMIT_S = 1800.0
#: Largest magnitude of a number in [parameters]: integers are stored as int64, and no parameter
#: of any family means anything above it (``k = 1e300`` would become a 301-digit integer).
MAX_PARAMETER_MAGNITUDE = 2 ** 63 - 1
#: Largest worker count (--workers / sweep.workers): each is a Python process.
MAX_WORKERS = 512
#: Seeds are stored as SQLite INTEGER (signed 64 bit).
_MAX_SEED = 2 ** 63 - 1


@dataclass(frozen=True)
class Instance:
    key: str
    params: dict
    seed: int


def instance_key(family: str, version: str, params: Mapping[str, Any], seed: int, *, rigorous: bool = False) -> str:
    """The instance key: the first 32 hex digits of the sha256 of
    ``json.dumps({"family", "version", "params", "seed"}, sort_keys=True, separators=(",", ":"))``; a rigorous
    instance (``rigorous = true``: the report judged in ball arithmetic) adds ``"rigorous": true`` to that
    object, so rigorous and plain results never share a key (plain keys are unchanged).

    Returns the key (str). Raises ``TypeError`` for a non-str family/version or non-dict params,
    ``ValueError`` for a seed outside [0, 2^63) or a non-finite number in ``params``."""
    if not isinstance(family, str) or not isinstance(version, str):
        raise TypeError("instance_key: family and version must be str")
    if not isinstance(params, Mapping):
        raise TypeError(f"instance_key: params must be a dict, got {type(params).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= _MAX_SEED:
        raise ValueError(f"instance_key: seed must be an integer in [0, 2^63), got {seed!r}")
    obj = {"family": family, "version": version, "params": dict(params), "seed": int(seed)}
    if rigorous:
        obj["rigorous"] = True
    payload = json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)
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
    #: ``rigorous = true`` in [sweep] (or ``ncproofs sweep --rigorous``): each instance's solve report goes
    #: through ``proofs_check.rigorous.apply``; part of every instance key and of the config hash
    rigorous: bool = False
    #: ``sweep.instance_time_limit`` (seconds): not part of any key or hash (it decides no verdict of a
    #: finished instance; an instance stopped by it is stored INCONCLUSIVE "stopped by the wall-clock safety limit")
    instance_time_limit: float = INSTANCE_TIME_LIMIT_S

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
        doc = {k: self.raw.get(k) for k in ("sweep", "parameters")}
        sweep = dict(doc["sweep"]) if isinstance(doc["sweep"], dict) else doc["sweep"]
        if isinstance(sweep, dict):  # the flag as the spec runs it (config key or --rigorous); plain: as before
            sweep.pop("rigorous", None)
            if self.rigorous:
                sweep["rigorous"] = True
            doc["sweep"] = sweep
        return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]

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
                key = instance_key(sw.name, sw.version, params, s, rigorous=self.rigorous)
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
    if abs(v) > MAX_PARAMETER_MAGNITUDE:
        raise UsageError(f"parameters.{name}.{key} must be at most 2^63 - 1 in magnitude, got {v!r}")
    return v


def _magnitude_ok(name: str, v) -> None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) > MAX_PARAMETER_MAGNITUDE:
        raise UsageError(f"parameters.{name}: {v!r} is out of range (numbers must be at most 2^63 - 1 in magnitude)")


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
        except SystemExit as exc:  # sys.exit() in a module must not end the sweep "successfully"
            raise UsageError(f"sweep.modules: importing {m!r} called sys.exit({exc.code!r}); a module of a sweep "
                             "must register sweepables, not exit") from None
        except Exception as exc:  # ImportError or an error inside the module
            raise UsageError(f"sweep.modules: cannot import {m!r}: {type(exc).__name__}: {exc}") from None


def _int_value(key: str, v, *, minimum: int, what: str = "an integer") -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise UsageError(f"{key} must be {what} >= {minimum}, got {v!r}")
    return v


# ---- validators of the config, one key each (called by parse_config in this order) ----------
#
# Each takes the [sweep] table (and what earlier ones returned), raises a UsageError naming the
# key, and returns the normalised value.

def _check_tables(data) -> dict:
    """The document has [sweep] (a table) and at most [parameters]; returns the [sweep] table."""
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
    return sweep


def _modules_of(sweep: dict) -> list[str]:
    modules = sweep.get("modules", [])
    if not isinstance(modules, list) or not all(isinstance(m, str) and m.strip() for m in modules):
        raise UsageError(f"sweep.modules must be a list of module names, got {modules!r}")
    return modules


def _family_of(sweep: dict) -> str | None:
    family = sweep.get("family")
    if family is not None and (not isinstance(family, str) or not family):
        raise UsageError(f"sweep.family must be the name of a registered sweepable, got {family!r}")
    return family


def _mode_of(sweep: dict) -> str:
    mode = sweep.get("mode", "grid")
    if mode not in ("grid", "random"):
        raise UsageError(f"sweep.mode must be \"grid\" or \"random\", got {mode!r}")
    return mode


def _limit_of(sweep: dict) -> int:
    limit = _int_value("sweep.max_instances", sweep.get("max_instances", MAX_INSTANCES), minimum=1)
    if limit > MAX_INSTANCES_LIMIT:
        raise UsageError(f"sweep.max_instances must be <= {MAX_INSTANCES_LIMIT} (the instances are built in memory, "
                         f"about 1 kB each), got {limit}; split the sweep into several configs")
    return limit


def _time_limit_of(sweep: dict) -> float:
    v = sweep.get("instance_time_limit", INSTANCE_TIME_LIMIT_S)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 < v <= 1e6:
        raise UsageError(f"sweep.instance_time_limit must be a number of seconds in (0, 1e6], got {v!r}")
    return float(v)


def _seeds_of(sweep: dict, limit: int) -> list[int]:
    seeds = sweep.get("seeds", [0])
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if seeds < 1:
            raise UsageError(f"sweep.seeds must be >= 1 (a count) or a list of integers, got {seeds}")
        if seeds > limit:
            raise UsageError(f"sweep.seeds: {seeds} seeds alone exceed the limit of {limit} instances "
                             "(sweep.max_instances)")
        seeds = list(range(seeds))
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool)
                                                            for s in seeds):
        raise UsageError(f"sweep.seeds must be a non-empty list of integers or a count, got {seeds!r}")
    bad_seed = [s for s in seeds if not 0 <= s <= _MAX_SEED]
    if bad_seed:
        raise UsageError(f"sweep.seeds must be integers >= 0 (and < 2^63), got {bad_seed[0]}")
    return seeds


def _samples_of(sweep: dict, mode: str) -> int | None:
    samples = sweep.get("samples")
    if mode == "random":
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
            raise UsageError(f"sweep.samples must be an integer >= 1 in random mode, got {samples!r}")
    elif samples is not None:
        raise UsageError("sweep.samples is only used with mode = \"random\"")
    return samples


def _sample_seed_of(sweep: dict) -> int:
    sample_seed = sweep.get("sample_seed", 0)
    if isinstance(sample_seed, bool) or not isinstance(sample_seed, int):
        raise UsageError(f"sweep.sample_seed must be an integer, got {sample_seed!r}")
    if not 0 <= sample_seed <= _MAX_SEED:
        raise UsageError(f"sweep.sample_seed must be an integer >= 0 (and < 2^63), got {sample_seed}")
    return sample_seed


def _workers_of(sweep: dict) -> int | None:
    workers = sweep.get("workers")
    if workers is not None:
        _int_value("sweep.workers", workers, minimum=1)
        if workers > MAX_WORKERS:
            raise UsageError(f"sweep.workers must be <= {MAX_WORKERS} (one process each), got {workers}")
    return workers


def _store_of(sweep: dict) -> str | None:
    store = sweep.get("store")
    if store is not None and (not isinstance(store, str) or not store.strip()):
        raise UsageError(f"sweep.store must be a non-empty path, got {store!r}")
    return store


def _rigorous_of(sweep: dict) -> bool:
    value = sweep.get("rigorous", False)
    if not isinstance(value, bool):
        raise UsageError(f"sweep.rigorous must be true or false, got {value!r}")
    return value


def _check_description(sweep: dict) -> None:
    description = sweep.get("description")
    if description is not None and not isinstance(description, str):
        raise UsageError(f"sweep.description must be a string, got {description!r}")


def _parameters_of(data: dict, mode: str) -> dict:
    """The [parameters] table: each entry a list of values, a range table or a fixed value."""
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
            for v in spec:
                _magnitude_ok(name, v)
        elif isinstance(spec, dict):
            _check_range_spec(name, spec, grid=(mode == "grid"))
        elif not _scalar_ok(spec):
            raise UsageError(f"parameters.{name}: unsupported value {spec!r} (numbers, strings, booleans)")
        else:
            _magnitude_ok(name, spec)
    return dict(params)


def _check_size(spec: "SweepSpec", limit: int) -> None:
    """Refuse a config that describes more than ``limit`` instances, before building any."""
    size = spec.size()
    if size <= limit:
        return
    if spec.mode == "grid":
        axes = " x ".join(f"{n}: {_axis_len(v)}" for n, v in spec.parameters.items() if _axis_len(v) > 1)
        detail = f"{axes + ' x ' if axes else ''}{len(spec.seeds)} seed(s)"
    else:
        detail = f"{spec.samples} samples x {len(spec.seeds)} seed(s)"
    raise UsageError(f"the sweep has {size} instances ({detail}), more than the limit of {limit}: "
                     "split it into several configs, or raise sweep.max_instances")


def _import_config_modules(path: str | None, modules: list[str]) -> None:
    """Import the modules the config names (and nothing else). The config's folder is searched only
    when it names modules, and LAST (appended to ``sys.path``), so a file beside the config never
    shadows a standard or installed module (a ``uuid.py`` or ``scipy.py`` there is never run): the
    trust model is in docs/workflow.md ("Which code a sweep runs")."""
    if not modules:
        return
    if path is not None:  # modules next to the config file are importable, after everything else
        cfg_dir = str(Path(path).resolve().parent)
        if cfg_dir not in sys.path:
            sys.path.append(cfg_dir)
    _import_modules(modules)


def _check_against_sweepable(family: str | None, params: dict, *, import_modules: bool) -> None:
    """The family is known (when its modules were imported) and the parameters fit it."""
    discover_builtin()
    if family is None:
        raise UsageError(f"sweep.family is required: one of {', '.join(sorted(_REGISTRY)) or 'none registered'}")
    sw = get_sweepable(family) if import_modules else _REGISTRY.get(family)
    if sw is None or sw.parameters is None:
        return
    for name in params:
        if name not in sw.parameters:
            raise UsageError(f"parameters.{name}: unknown parameter for family {family!r} "
                             f"(known: {', '.join(sw.parameters)})")
    missing = [p for p in sw.parameters if p not in params and p not in sw.defaults]
    if missing:
        raise UsageError(f"parameters.{missing[0]} is required for family {family!r}")


def parse_config(data: dict, path: str | None = None, *, import_modules: bool = True) -> SweepSpec:
    """Validate a parsed TOML document into a :class:`SweepSpec`.

    Everything that needs no code of the config is checked first (keys, types, seeds, the
    number of instances against ``sweep.max_instances``); then, with ``import_modules=True``,
    the config's ``modules`` are imported (they are code that runs, like a conftest) and the
    parameters are checked against the sweepable. ``import_modules=False`` (``--summary``)
    never imports them: the family may then be unknown to this process.

    Returns:
        the validated :class:`SweepSpec` (``path`` recorded, for relative store paths).

    Raises:
        UsageError: a bad key or value, one line naming the key (``sweep.seeds must be ...``);
            an unknown family or parameter; a module that cannot be imported; a sweep larger
            than ``sweep.max_instances``.
        TypeError: ``data`` is not a dict.
    """
    sweep = _check_tables(data)
    modules = _modules_of(sweep)
    family = _family_of(sweep)
    mode = _mode_of(sweep)
    limit = _limit_of(sweep)
    seeds = _seeds_of(sweep, limit)
    samples = _samples_of(sweep, mode)
    sample_seed = _sample_seed_of(sweep)
    workers = _workers_of(sweep)
    store = _store_of(sweep)
    _check_description(sweep)
    rigorous = _rigorous_of(sweep)
    params = _parameters_of(data, mode)
    spec = SweepSpec(family or "", mode, params, seeds, samples, sample_seed, modules, store, workers, path, data,
                     rigorous, _time_limit_of(sweep))
    _check_size(spec, limit)
    if import_modules:
        _import_config_modules(path, modules)
    _check_against_sweepable(family, params, import_modules=import_modules)
    return spec


#: Largest sweep config read: a TOML config is a few KB; a bigger file is not a config.
MAX_CONFIG_BYTES = 4 * 2 ** 20


def load_config(path: str, *, import_modules: bool = True) -> SweepSpec:
    """Read and validate a TOML sweep config (see :func:`parse_config`).

    Returns the :class:`SweepSpec`. Raises ``UsageError`` (an InputError) for a missing,
    unreadable, non-UTF-8 or malformed file, a directory, or any error of :func:`parse_config`;
    ``TypeError`` when ``path`` is not a path."""
    import tomllib

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"load_config: path must be a str or os.PathLike, got {type(path).__name__}")
    path = os.fspath(path)
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory, not a sweep config (a TOML file)")
    from theory._validate import input_file

    if not os.path.exists(path):
        raise UsageError(f"{path}: config file not found")
    input_file("CONFIG", path, max_bytes=MAX_CONFIG_BYTES)  # a FIFO or /dev/zero would never end
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except RecursionError:
        raise UsageError(f"{path}: malformed TOML: nested too deeply") from None
    except FileNotFoundError:
        raise UsageError(f"{path}: config file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: malformed TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not a TOML file (not UTF-8 text: {exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the config ({exc.strerror or type(exc).__name__})") from None
    return parse_config(data, path, import_modules=import_modules)

