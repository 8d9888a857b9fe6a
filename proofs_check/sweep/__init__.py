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
changed computation). A rigorous sweep (``rigorous = true``, or ``ncproofs sweep --rigorous``) adds
``"rigorous": true`` to that object: its results never share a key with plain ones.

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
    rigorous = false                # true: each solve report judged in ball arithmetic (sweepables with
                                    # solve reports: ufm); part of every instance key and the config hash

    [parameters]
    k = [2, 3, 4]                                 # grid: values; random: uniform choice
    noise = {min = 1e-6, max = 1e-1, log = true}  # random: (log-)uniform; grid: needs num
    r = 1.0                                       # a fixed value

Package layout (every public name is importable from ``proofs_check.sweep``)
-------------------------------------------------------------------------------
``registry`` (sweepables and result helpers), ``config`` (TOML -> :class:`SweepSpec`, instance
keys), ``store`` (SQLite store and leases), ``execution`` (:func:`run_sweep`), ``localpool`` /
``dask_backend`` / ``task`` (where instances run), ``progress`` (the progress line),
``export`` (summaries, tables, DataFrame / CSV / JSON / Parquet exports, ``--group-by``
aggregation), ``cli`` (``ncproofs sweep``), ``demo`` (the built-in ``geometry.noisy-etf``).
"""

from __future__ import annotations

from proofs_check.commands import UsageError
from proofs_check.sweep.registry import (
    RIGOROUS_SUFFIX, VERDICT_ORDER, Sweepable, _REGISTRY, discover_builtin, get_sweepable, register_sweepable,
    result_from_checks, result_from_claim, rigorous_result, rigorous_sweepables, sweepables)
from proofs_check.sweep.demo import noisy_etf
from proofs_check.sweep.config import (
    MAX_INSTANCES, MAX_WORKERS, Instance, SweepSpec, instance_key, load_config, parse_config)
from proofs_check.sweep.store import LEASE_SECONDS, SCHEMA_VERSION, Store
from proofs_check.sweep.task import _execute
from proofs_check.sweep.localpool import WorkerDied, _worker_main
from proofs_check.sweep.progress import SweepProgress
from proofs_check.sweep.dask_backend import DEFAULT_CONNECT_TIMEOUT
from proofs_check.sweep.execution import SweepInterrupted, SweepOutcome, SweepSignal, check_rigorous, run_sweep
from proofs_check.sweep.export import (
    aggregate, counts, flat_table, key_numbers, results_table, summary_text, to_dataframe, write_export)
from proofs_check.sweep.cli import add_arguments, main_from_args

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT", "RIGOROUS_SUFFIX", "Instance", "LEASE_SECONDS", "MAX_INSTANCES", "MAX_WORKERS", "SCHEMA_VERSION",
    "Store", "SweepInterrupted", "SweepOutcome", "SweepProgress", "SweepSignal", "SweepSpec", "Sweepable",
    "UsageError", "VERDICT_ORDER", "WorkerDied", "add_arguments", "aggregate", "counts", "flat_table", "discover_builtin", "get_sweepable",
    "instance_key", "key_numbers", "load_config", "main_from_args", "noisy_etf", "parse_config", "register_sweepable",
    "result_from_checks", "result_from_claim", "results_table", "check_rigorous", "rigorous_result",
    "rigorous_sweepables", "run_sweep", "summary_text", "sweepables", "to_dataframe",
    "write_export",
]
# private names kept importable for older callers and tests (not part of the API)
_COMPAT_PRIVATE = (_REGISTRY, _execute, _worker_main)
