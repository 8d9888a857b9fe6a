#!/usr/bin/env python
"""Same input, same verdict at any machine load (issue 28): every budget-bound command run twice, quietly and
under a CPU hog, and the two JSON outputs compared value by value.

Each case is a list of ``python -m proofs_check ...`` commands (subprocesses); the last one's JSON (stdout with
``--json``, or the file it writes with ``--json PATH`` / ``--export PATH``) is the case's result. Every case runs
once on the quiet machine and once while ``--hog`` processes (default: one per CPU this process may use) spin,
started before and stopped after that run by this script. The pair agrees when the exit statuses are equal and
:func:`compare` finds no difference: the same keys, verdicts and strings, every number equal bit for bit; the
only fields skipped are timings (numbers under a key that :func:`is_timing_key` accepts: seconds, time, wall or
CPU clocks, elapsed time, a ``_s`` unit, the machine's measured rate or load; flags and messages under such keys
are compared) and, inside strings, durations in seconds and the measured machine rate (:func:`mask_text`).

The default list takes 10-15 minutes on 2 shared cores (load 3-8); ``--slow`` adds the Zipf K = 10 000 CE UFM
instance (n_c = max(1, floor(20000/(c+1))), lw = lh = 2e-4: 1.5-2.5 minutes quiet, 6-7 under the hog) and the
reference CRH experiment (200 000 SGD steps). ``--only SUBSTRING`` selects cases, ``--list`` prints them,
``--no-hog`` runs the quiet pass only (wall times), ``--keep`` keeps each run's outputs (and ``stdout.txt``).

    PYTHONPATH=. python benchmarks/under_load.py [--slow] [--only NAME] [--no-hog] [--out FILE]

Exit status 0 when every pair agrees, 1 otherwise. Results: benchmarks/results/under_load-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

# ----------------------------------------------------------------------------------------------- comparison

#: substrings of a key (any case) that name a timing
TIMING_PARTS = ("seconds", "time", "wall", "cpu", "elapsed", "duration", "load_average", "loadavg",
                "measured_rate", "machine_rate", "measured_flops", "gflops")
#: a seconds unit ending a key or a ``_``-separated part of it (``wall_s``, ``pass1_s``, ``solve_ms``,
#: ``cpu_s_total``), lower case and after a ``_``: ``s``, ``s_c`` (words per concept), ``S_eigenvalues`` are values
_UNIT_KEY = re.compile(r"_(s|ms|us)(_|$)")
#: inside strings: durations in seconds and the measured machine rate are timings too
_RATE_TEXT = re.compile(r"measured single-thread rate [-+0-9.eE]+ Gflop/s: about [-+0-9.eE]+ s here")
_SECONDS_TEXT = re.compile(r"(?<![\w.])[-+]?\d+(\.\d+)?([eE][-+]?\d+)? ?(s|ms|us|sec|seconds|CPU s|s wall)\b")


def is_timing_key(key: str) -> bool:
    """Whether a JSON key names a timing: ``seconds``, ``time``, ``wall``, ``cpu``, ``elapsed`` (any case), a
    ``_s``/``_ms`` unit and the machine's measured rate or load (``seconds``, ``certificate_seconds``,
    ``time_budget``, ``wall_s``, ``cpu_s``, ``elapsed``, ``measured_rate``). Counts and parameters such as
    ``n_starts``, ``max_steps``, ``s`` or ``s_c`` are not timings. :func:`compare` skips the value of a timing
    key only where it is a number (or null, or a list/dict of them): a flag such as ``stopped_by_wall_safety``
    or a message under such a key is compared."""
    k = str(key)
    low = k.lower()
    return any(p in low for p in TIMING_PARTS) or bool(_UNIT_KEY.search(k))


def is_timing_value(v) -> bool:
    """A number, null, or a list/dict of only those (booleans and strings are never timings)."""
    if isinstance(v, bool) or isinstance(v, str):
        return False
    if v is None or isinstance(v, (int, float)):
        return True
    if isinstance(v, list):
        return all(is_timing_value(x) for x in v)
    if isinstance(v, dict):
        return all(is_timing_value(x) for x in v.values())
    return False


def mask_text(s: str, dirs: tuple[str, ...] = ()) -> str:
    """A string with its timings replaced: the measured machine rate, durations in seconds, and the run's own
    temporary directories (``dirs``) by ``<DIR>``."""
    for d in dirs:
        if d:
            s = s.replace(d, "<DIR>")
    s = _RATE_TEXT.sub("measured single-thread rate <RATE>", s)
    return _SECONDS_TEXT.sub("<SECONDS>", s)


def _same_number(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a.hex() == b.hex() or (math.isnan(a) and math.isnan(b))
    return a == b


def compare(a, b, path: str = "$", dirs_a: tuple[str, ...] = (), dirs_b: tuple[str, ...] = (),
            skipped: set | None = None, limit: int = 50) -> list[str]:
    """Differences between two JSON documents (empty when they agree).

    Dictionaries must have the same keys, lists the same length, strings the same text after :func:`mask_text`
    (``dirs_a``/``dirs_b``: each run's temporary directories), numbers the same type and the same bits (floats
    by ``float.hex``), everything else ``==``. Keys for which :func:`is_timing_key` holds are skipped (their
    names are added to ``skipped``). At most ``limit`` differences are listed."""
    out: list[str] = []
    _walk(a, b, path, dirs_a, dirs_b, skipped if skipped is not None else set(), out, limit)
    return out


def _walk(a, b, path, da, db, skipped, out, limit):
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if is_timing_key(k) and is_timing_value(a.get(k)) and is_timing_value(b.get(k)):
                skipped.add(k)
                continue
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in the {'quiet' if k in a else 'loaded'} run")
                continue
            _walk(a[k], b[k], f"{path}.{k}", da, db, skipped, out, limit)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items against {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            _walk(x, y, f"{path}[{i}]", da, db, skipped, out, limit)
    elif isinstance(a, str) and isinstance(b, str):
        ma, mb = mask_text(a, da), mask_text(b, db)
        if ma != mb:
            out.append(f"{path}: {_text_diff(ma, mb)}")
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        if not _same_number(a, b):
            out.append(f"{path}: {a!r} against {b!r}")
    elif a != b or type(a) is not type(b):
        out.append(f"{path}: {a!r} against {b!r}"[:300])


def count_leaves(doc) -> dict:
    """How many numbers and strings :func:`compare` reads in ``doc`` (timing keys excluded)."""
    n = {"numbers": 0, "strings": 0, "other": 0}

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if not (is_timing_key(k) and is_timing_value(v)):
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            n["numbers"] += 1
        elif isinstance(x, str):
            n["strings"] += 1
        else:
            n["other"] += 1

    walk(doc)
    return n


def _text_diff(a: str, b: str) -> str:
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    lo = max(0, i - 60)
    return f"text differs at {i}: {a[lo:i + 80]!r} against {b[lo:i + 80]!r}"


# ----------------------------------------------------------------------------------------------- the hog

def _spin(stop, parent):
    x = 0
    while not stop.is_set() and os.getppid() == parent:  # ends with its parent, however that ends
        for _ in range(200000):
            x += 1


class Hog:
    """``n`` busy processes (default: one per CPU this process may use) for the duration of a ``with`` block."""

    def __init__(self, n: int | None = None):
        self.n = n or max(1, len(os.sched_getaffinity(0)))

    def __enter__(self):
        ctx = mp.get_context("fork")
        self.stop = ctx.Event()
        self.procs = [ctx.Process(target=_spin, args=(self.stop, os.getpid()), daemon=True) for _ in range(self.n)]
        for p in self.procs:
            p.start()
        time.sleep(0.2)  # let them reach the loop
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for p in self.procs:
            p.join(5)
            if p.is_alive():
                p.terminate()
                p.join(5)
        return False


# ----------------------------------------------------------------------------------------------- the cases

@dataclass
class Case:
    name: str
    commands: list          # argument lists for ``python -m proofs_check``; "{dir}" is the run's directory
    output: str = "stdout"  # "stdout" (JSON on stdout of the last command) or a file name in the run's directory
    slow: bool = False
    files: dict = field(default_factory=dict)  # name -> text written into the run's directory first
    setup: object = None    # setup(directory) writes input files (outside the timing)
    note: str = ""


def _twos(k: int) -> str:
    return ",".join(["2"] * k)


def _minibatches(k: int) -> str:
    """k classes of 2 (samples 2c, 2c + 1): batches of 4 pairing classes (0,1), (2,3), ... and (1,2), (3,4), ...
    (the instance of benchmarks/scl_certificate_first.py)."""
    pairs = [",".join(str(4 * (c // 2) + i) for i in range(4)) for c in range(0, k, 2)]
    links = [f"{2 * c},{2 * c + 1},{2 * c + 2},{2 * c + 3}" for c in range(1, k - 1, 2)]
    return ";".join(pairs + links)


def _longtail(k: int, majority: int, ratio: float) -> str:
    from theory.scl import longtail_counts

    return ",".join(map(str, longtail_counts(k, majority, ratio)))


def _features(d: str, n: int = 200_000, dim: int = 64, k: int = 10) -> None:
    """float32 features (n x dim, class means on a simplex plus noise, seed 0) and int64 labels, as .npy."""
    import numpy as np

    rng = np.random.default_rng(0)
    y = rng.integers(0, k, n)
    means = rng.standard_normal((k, dim))
    x = (means[y] + 0.3 * rng.standard_normal((n, dim))).astype(np.float32)
    np.save(os.path.join(d, "f.npy"), x)
    np.save(os.path.join(d, "y.npy"), y)


SWEEP_TOML = """[sweep]
family = "ufm"
mode = "grid"
seeds = 2
workers = 2
instance_time_limit = 1800

[parameters]
loss = ["ce", "mse"]
k = [3, 5]
n = 2
d = {d}
lw = [5e-3, 1e-2]
lh = 5e-3
"""

FAMILIES = ("ufm", "ufm_general", "scl", "feature_collapse", "ntk", "crh", "deep_ufm")


def cases() -> list[Case]:
    zipf = ",".join(str(max(1, 20000 // (c + 1))) for c in range(10_000))
    out = [
        Case("scl full batch k=1000 classes of 2, tau 0.5 (certificate first)",
             [["solve", "scl", "--counts", _twos(1000), "--tau", "0.5", "--json"]]),
        Case("scl mini-batch k=100 classes of 2, 99 batches of 4, tau 0.5",
             [["solve", "scl", "--counts", _twos(100), "--tau", "0.5", "--batches", _minibatches(100), "--json"]]),
        Case("scl factored multi-start 5,3,2 tau 0.5 --method factored (iterations, hops)",
             [["solve", "scl", "--counts", "5,3,2", "--tau", "0.5", "--method", "factored", "--json"]]),
        Case("ufm ce long tail K=200 (majority 50, ratio 50), lambda 1e-3 (evaluation budget per start)",
             [["solve", "ufm", "--loss", "ce", "--counts", _longtail(200, 50, 50.0), "--dim", "200",
               "--lambda-w", "1e-3", "--lambda-h", "1e-3", "--json"]]),
        Case("crh --quick (SGD steps, critical point L-BFGS)", [["solve", "crh", "--quick", "--json"]]),
        Case("ntk default flow (DOP853 steps from --max-seconds 60)",
             [["solve", "ntk", "--gamma", "1,0.6,0.2", "--json"]]),
        Case("ntk flows at the edge of their step budget (--max-seconds 0.61: accepted, the budget ~ the estimate)",
             [["solve", "ntk", "--gamma", "1,0.6,0.2", "--max-seconds", "0.61", "--json"]]),
        Case("ntk flows just over their step budget (--max-seconds 0.6: refused from the work estimate)",
             [["solve", "ntk", "--gamma", "1,0.6,0.2", "--max-seconds", "0.6", "--json"]]),
        Case("ntk e-zero init, imbalanced counts 5,3,2",
             [["solve", "ntk", "--init", "e-zero", "--counts", "5,3,2", "-C", "3", "--json"]]),
        Case("deep-ufm relu L=3 k=3 n=2 D=6, 3 starts, 400 evaluations each",
             [["solve", "deep-ufm", "--layers", "3", "--activation", "relu", "-k", "3", "-n", "2", "-D", "6",
               "--lambda", "5e-3", "--max-evals", "400", "--json"]]),
        Case("deep-ufm linear mse L=2 k=4 n=3 D=5 (default evaluation budget)",
             [["solve", "deep-ufm", "--layers", "2", "-k", "4", "-n", "3", "-D", "5", "--lambda", "1e-2",
               "--json"]]),
        Case("feature-collapse n_c=3 L=2 s_c=3 d=4 Zipf, 4 L-BFGS starts",
             [["solve", "feature-collapse", "--concepts", "3", "--length", "2", "--words-per-concept", "3",
               "--dim", "4", "--lambda", "0.05", "--zipf", "--starts", "4", "--json"]]),
        Case("feature-collapse n_c=3 L=2 s_c=2 d=4 LayerNorm, 6 starts",
             [["solve", "feature-collapse", "--concepts", "3", "--length", "2", "--words-per-concept", "2",
               "--dim", "4", "--lambda", "0.05", "--layernorm", "--starts", "6", "--json"]]),
    ]
    for passes, workers in (("1", "2"), ("2", "2")):
        out.append(Case(f"measure 200 000 x 64 float32, K = 10, --passes {passes} --workers {workers}",
                        [["measure", "f.npy", "--labels", "y.npy", "--passes", passes, "--workers", workers,
                          "--batch-size", "8192", "--json"]], setup=_features))
    for fam in FAMILIES:
        out.append(Case(f"run --only {fam} (quick profile)",
                        [["run", "--only", fam, "--json", "{dir}/run.json", "--report", "", "--quiet"]],
                        output="run.json"))
    out.append(Case("run (quick profile, every claim)",
                    [["run", "--json", "{dir}/run.json", "--report", "", "--quiet"]], output="run.json"))
    out.append(Case("sweep ufm grid (8 parameter points x 2 seeds, 2 workers) exported as JSON",
                    [["sweep", "{dir}/s.toml", "--quiet"],
                     ["sweep", "{dir}/s.toml", "--summary", "--export", "{dir}/s.json"]],
                    output="s.json", files={"s.toml": SWEEP_TOML.format(d=6)}))
    out.append(Case("ufm ce Zipf K=10000 (n_c = max(1, floor(20000/(c+1)))), lw = lh = 2e-4",
                    [["solve", "ufm", "--loss", "ce", "--counts", zipf, "--dim", "10000", "--lambda-w", "2e-4",
                      "--lambda-h", "2e-4", "--json"]], slow=True))
    out.append(Case("crh reference experiment (200 000 SGD steps)", [["solve", "crh", "--json"]], slow=True))
    return out


# ----------------------------------------------------------------------------------------------- running

def run_case(case: Case, root: str, env: dict, timeout: float) -> dict:
    """Run the case's commands in a fresh directory under ``root``; the last command's JSON is the result."""
    os.makedirs(root, exist_ok=True)
    d = tempfile.mkdtemp(dir=root)
    for name, text in case.files.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    if case.setup is not None:
        case.setup(d)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = os.getloadavg()[0]
    w0 = time.perf_counter()
    rcs, stdout, stderr = [], "", ""
    for argv in case.commands:
        cmd = [sys.executable, "-m", "proofs_check"] + [a.replace("{dir}", d) for a in argv]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=d, env=env, timeout=timeout)
            rcs.append(r.returncode)
            stdout, stderr = r.stdout, r.stderr
        except subprocess.TimeoutExpired:
            rcs.append("timeout")
            stdout, stderr = "", f"timed out after {timeout:g} s"
            break
    wall = time.perf_counter() - w0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.path.join(d, "stdout.txt"), "w") as f:  # kept with --keep
        f.write(stdout)
    doc, err = None, None
    try:
        if case.output == "stdout":
            doc = json.loads(stdout)
        else:
            with open(os.path.join(d, case.output)) as f:
                doc = json.load(f)
    except (ValueError, OSError) as exc:
        err = f"no JSON: {type(exc).__name__}: {exc}"
    doc = normalise(doc)
    res = {"rc": rcs, "wall_s": round(wall, 3),
           "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 3),
           "load_average_before": load0, "load_average_after": os.getloadavg()[0], "dir": d, "doc": doc,
           "stderr_tail": stderr[-2000:] if doc is None or err else "", "json_error": err}
    return res


def normalise(doc):
    """A pandas ``orient='split'`` table (``sweep --export x.json``) as ``{"rows": {key: {column: value}},
    "order": [keys]}``, so that a timing column is skipped by its name like a timing key; other documents as
    they are."""
    if isinstance(doc, dict) and set(doc) == {"columns", "index", "data"}:
        cols = doc["columns"]
        rows = [dict(zip(cols, r)) for r in doc["data"]]
        keys = [str(r.get("key", i)) for i, r in enumerate(rows)]
        return {"rows": dict(zip(keys, rows)), "order": keys}
    return doc


def summary_of(doc) -> dict:
    """Verdict counts of a result document (a solve report, a run report or a sweep export)."""
    if not isinstance(doc, dict):
        return {}
    if "verdict" in doc and "claims" in doc:
        return {"verdict": doc["verdict"], "claims": {c.get("id"): c.get("verdict") for c in doc["claims"]}}
    if isinstance(doc.get("rows"), dict):
        claims = list(doc["rows"].values())
    else:
        claims = doc.get("claims") or doc.get("results")
    if isinstance(claims, list):
        counts: dict = {}
        for c in claims:
            v = c.get("verdict") if isinstance(c, dict) else None
            counts[v] = counts.get(v, 0) + 1
        return {"verdicts": counts}
    return {}


def _print_row(row: dict) -> None:
    q, h = row["quiet"], row.get("hog")
    hs = f" | hog {h['wall_s']:.1f} s wall ({h['cpu_s']:.1f} CPU), load {h['load_average_after']:.1f}" if h else ""
    tag = "" if h is None else ("  SAME" if row["identical"] else "  DIFFERENT")
    if h is not None and row.get("compared"):
        tag += f" ({row['compared']['numbers']} numbers, {row['compared']['strings']} strings compared)"
    print(f"{row['case']}: rc {q['rc']}, quiet {q['wall_s']:.1f} s wall ({q['cpu_s']:.1f} CPU), load "
          f"{q['load_average_after']:.1f}{hs}{tag}  {json.dumps(row['summary'])[:300]}", flush=True)
    for d in (row.get("differences") or []) + (row.get("notes") or []):
        print("    " + d, flush=True)
    for tag, r in (("quiet", q), ("hog", h)):
        if r and r["json_error"]:
            what = "refused (exit 2)" if r["rc"] == [2] else r["json_error"]
            print(f"    {tag}: {what}: {r['stderr_tail'].strip()[-300:]}", flush=True)


PACKAGES = ("proofs_check", "solvers", "theory")


def snapshot(root: str) -> tuple[str, dict]:
    """Copy the packages of the working tree into ``root``/src (both runs of every case then execute the same
    code, whatever is edited meanwhile); return the folder and what was copied (git HEAD, files modified)."""
    src = os.path.join(root, "src")
    for pkg in PACKAGES:
        shutil.copytree(os.path.join(ROOT, pkg), os.path.join(src, pkg),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    info = {"snapshot": True, "taken": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        info["git_head"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                                          text=True).stdout.strip()
        st = subprocess.run(["git", "status", "--porcelain", "--", *PACKAGES], cwd=ROOT, capture_output=True,
                            text=True).stdout
        info["modified"] = [ln[3:] for ln in st.splitlines()]
    except OSError:
        pass
    return src, info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--slow", action="store_true", help="add the Zipf K = 10 000 UFM and the reference CRH runs")
    ap.add_argument("--only", action="append", default=None, help="cases whose name contains this (repeatable)")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--no-hog", action="store_true", help="the quiet runs only")
    ap.add_argument("--hog", type=int, default=None, help="busy processes (default: the CPUs this process may use)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="per command, seconds")
    ap.add_argument("--keep", action="store_true", help="keep the runs' directories")
    ap.add_argument("--no-snapshot", action="store_true",
                    help="run the working tree itself (default: a copy taken at the start, so that edits made "
                         "while the benchmark runs cannot differ between the two runs of a case)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    todo = [c for c in cases() if (args.slow or not c.slow)
            and (not args.only or any(s in c.name for s in args.only))]
    if args.list:
        for c in todo:
            print(c.name)
        return 0
    root = tempfile.mkdtemp(prefix="under_load-")
    src, code = snapshot(root) if not args.no_snapshot else (ROOT, {"snapshot": False})
    print(f"code: {json.dumps(code)}", flush=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    rows = []
    try:
        for c in todo:
            # each pass (quiet, hog) has its own cache of symbolic derivations, fresh for this benchmark
            env_q = dict(env, NCPROOFS_CACHE_DIR=os.path.join(root, "cache-quiet"))
            row = pair(c, root, env_q, os.path.join(root, "cache-hog"), args)
            rows.append(row)
            _print_row(row)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    for r in rows:
        for tag in ("quiet", "hog"):
            if r.get(tag):
                r[tag].pop("doc", None)
    same = all(r.get("identical", True) for r in rows)
    write_out = {"benchmark": "under_load", "code": code, "nproc": os.cpu_count(), "hog_processes": args.hog or len(
        os.sched_getaffinity(0)), "all_identical": same, "rows": rows}
    from benchmarks.results_io import write_results

    write_results(write_out, args.out, prefix="under_load-")
    n_diff = sum(1 for r in rows if r.get("identical") is False)
    print(f"{len(rows)} cases, {n_diff} differing" + ("" if not args.no_hog else " (quiet pass only)"))
    return 0 if same else 1


def pair(case: Case, root: str, env_quiet: dict, cache_hog: str, args) -> dict:
    """The case quietly, then under the hog (unless ``--no-hog``), each pass on its own derivation cache, and the
    comparison of the two results."""
    quiet = run_case(case, os.path.join(root, "quiet"), env_quiet, args.timeout)
    row = {"case": case.name, "commands": [" ".join(a if len(a) < 200 else a[:60] + "..." for a in c)
                                           for c in case.commands], "quiet": quiet}
    if not args.no_hog:
        env_hog = dict(env_quiet, NCPROOFS_CACHE_DIR=cache_hog)
        with Hog(args.hog):
            loaded = run_case(case, os.path.join(root, "hog"), env_hog, args.timeout)
        row["hog"] = loaded
        skipped: set = set()
        diffs = []
        if quiet["rc"] != loaded["rc"]:
            diffs.append(f"exit status {quiet['rc']} against {loaded['rc']}")
        if quiet["doc"] is None and loaded["doc"] is None:  # a refusal or an error: its message must agree
            diffs += compare(quiet["stderr_tail"], loaded["stderr_tail"], "$stderr", (quiet["dir"],),
                             (loaded["dir"],))
        elif quiet["doc"] is None or loaded["doc"] is None:
            diffs.append(f"no JSON to compare: {quiet['json_error']} / {loaded['json_error']}")
        else:
            qd, ld = quiet["doc"], loaded["doc"]
            if isinstance(qd, dict) and "order" in qd and isinstance(ld, dict) and "order" in ld:
                # the rows are compared by key; their order is reported apart
                if qd["order"] != ld["order"]:
                    row["notes"] = ["sweep export: the same rows in a different order"]
                qd, ld = dict(qd, order=sorted(qd["order"])), dict(ld, order=sorted(ld["order"]))
            diffs += compare(qd, ld, dirs_a=(quiet["dir"],), dirs_b=(loaded["dir"],), skipped=skipped)
        row["identical"] = not diffs
        row["differences"] = diffs
        row["skipped_timing_keys"] = sorted(skipped)
        row["compared"] = (count_leaves(quiet["doc"]) if quiet["doc"] is not None
                           else {"numbers": 0, "strings": 1, "other": 0})  # the refusal's message
    row["summary"] = summary_of(quiet["doc"])
    return row


if __name__ == "__main__":
    sys.exit(main())
