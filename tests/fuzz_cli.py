"""A fuzzer for the ``ncproofs`` command line, run in-process (``proofs_check.cli.main(argv)``).

Used by tests/test_fuzz_cli.py (a few fixed-seed examples in the default suite, a bigger batch
marked slow) and runnable by hand for a long session::

    python tests/fuzz_cli.py --seed 7 --cases 300 [--only solve] [--memory-gb 3]

Every command and family is discovered from :func:`proofs_check.commands.discover` (through the
parser the CLI builds): the fuzzer starts from a small, cheap, valid argument vector per command
(``BASES``) and replaces one or two options by hostile values chosen from the option's kind
(numbers, integers, lists, free strings, input files, output paths, choices). The contract checked
on every call (:func:`check_outcome`):

* the exit status is 0 or 1 with a normal output (a verdict, a table, a listing), or 2 with exactly
  one line on stderr that names the option (or the file) it refuses;
* never "internal error", never a traceback, never a hang beyond the per-call alarm;
* (the slow run) memory bounded: the batch runs in a subprocess under ``RLIMIT_AS``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import signal
import stat
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

#: seconds a single call may take before it counts as a hang (refusals must come before the work)
CALL_ALARM_S = 20

#: small, cheap, valid argument vectors per command (the fuzzer mutates their options)
BASES: dict[tuple[str, ...], list[str]] = {
    ("run",): ["--only", "geometry", "--quiet", "--jobs", "1", "--no-cache", "--report", "", "--json", ""],
    ("list",): ["--only", "ufm"],
    ("cite",): ["--only", "ufm"],
    ("solve", "ufm-ce"): ["-k", "3", "-n", "2", "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2"],
    ("solve", "ufm-mse"): ["-k", "3", "-n", "2", "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2"],
    ("solve", "ufm"): ["--loss", "ce", "-k", "3", "-n", "2", "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2"],
    ("solve", "ufm-regression"): ["--targets", "{Y}", "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2"],
    ("solve", "scl"): ["--counts", "2,2,2", "--tau", "0.5", "--dim", "3"],
    ("solve", "ntk"): ["--classes", "2", "--per-class", "2"],
    ("solve", "deep-ufm"): ["-L", "2", "-k", "2", "-n", "1", "-D", "2", "--lambda", "0.01", "--starts", "1",
                            "--max-evals", "50"],
    ("solve", "feature-collapse"): ["--concepts", "2", "--length", "2", "--words-per-concept", "2", "--dim", "2",
                                    "--lambda", "0.1", "--starts", "1"],
    ("solve", "feature-collapse-hier"): ["--meta-concepts", "2", "--concepts-per-meta", "2",
                                         "--words-per-concept", "2", "--length", "4", "--chunk", "2",
                                         "--dims", "3,3", "--starts", "1", "--iterations", "20"],
    ("solve", "crh"): ["--quick", "--steps", "20", "--null-draws", "10"],
    ("table", "ufm"): ["--loss", "ce", "--classes", "3", "--lambda", "1e-2"],
    ("table", "scl"): ["--counts", "2,2", "--tau", "0.5"],
    ("table", "ntk"): ["--classes", "2", "--per-class", "2"],
    ("table", "deep-ufm"): ["--layers", "1", "--classes", "2", "--lambda", "0.01", "--starts", "1",
                            "--max-evals", "50", "--activation", "linear"],
    ("table", "feature-collapse"): ["--concepts", "2", "--length", "2", "--words-per-concept", "2",
                                    "--lambdas", "0.1", "--layernorm", "--dims", "2"],
    ("table", "crh"): ["--quick", "--steps", "20", "--null-draws", "10", "--weight-decays", "0.01"],
    ("measure",): ["{X}", "--labels", "{y}"],
    ("batching",): ["--counts", "2,2", "--batches", "0,1;2,3", "--dim", "2"],
    ("sweep",): ["{cfg}", "--store", "{store}", "--workers", "1", "--quiet"],
}

#: option dests whose value is a file the command reads
INPUT_FILE_OPTIONS = {"targets", "counts_from", "kernel", "features", "labels", "weights", "bias", "config"}
#: option dests whose value is a path the command writes (or a store it opens)
OUTPUT_FILE_OPTIONS = {"output", "plot", "html", "report", "json_path", "export", "store"}

NUMBERS = ["nan", "-nan", "inf", "-inf", "1e308", "-1e308", "1e400", "-0.0", "0", "-1", "1e-320", "5e-324",
           "99999999999999999999999", "9223372036854775807", "-9223372036854775808", "1e16", "3.5", "0x10",
           "", " ", "abc", "1,2", "\x00", "１", "nan,1", "True"]
INTEGERS = ["0", "-1", "-3", "1", "2", "99999999999999999999", "9223372036854775807", "2147483648", "100000000",
            "1e3", "3.0", "", "abc", "\x00", "٣", "-0", "+5"]
LISTS = ["", ",", "1,,2", "2,", "nan,1", "inf", "1e308,1e308", "-1,2", "0,0", "1e400", "99999999999999999999,3",
         ",".join(["2"] * 5000), "a,b", "\x00", "1;2", "2"]
STRINGS = ["", " ", "\x00", "a" * 5000, "é✓ünï", "../", "/", "-", "%s%n{}", "\n", "*", "[", "ufm.*"]
CHOICE_JUNK = ["", "\x00", "NOPE", "é"]


@dataclass
class Outcome:
    argv: list[str]
    rc: int | None
    out: str
    err: str
    problem: str | None = None
    seconds: float = 0.0


class Hang(BaseException):
    """Raised by the per-call alarm (a BaseException: the CLI's ``except Exception`` cannot swallow it)."""


def _alarm(signum, frame):  # pragma: no cover - only on a hang
    raise Hang()


# ---- hostile files -------------------------------------------------------------------------------

def make_files(root: Path) -> dict[str, str]:
    """The valid inputs of the bases and a zoo of hostile files under ``root``."""
    import numpy as np

    root.mkdir(parents=True, exist_ok=True)
    f: dict[str, str] = {}
    rng = np.random.default_rng(0)
    np.save(root / "Y.npy", np.eye(3) + 0.1 * rng.standard_normal((3, 3)))
    np.save(root / "X.npy", rng.standard_normal((12, 3)))
    np.save(root / "y.npy", np.repeat(np.arange(3), 4))
    (root / "s.toml").write_text('[sweep]\nfamily = "geometry.noisy-etf"\n[parameters]\nk = 3\n')
    f.update(Y=str(root / "Y.npy"), X=str(root / "X.npy"), y=str(root / "y.npy"), cfg=str(root / "s.toml"),
             store=str(root / "s.sqlite"))
    hostile = {}
    d = root / "adir"
    d.mkdir(exist_ok=True)
    hostile["dir"] = str(d)
    fifo = root / "fifo.npy"
    if not fifo.exists():
        os.mkfifo(fifo)
    hostile["fifo"] = str(fifo)
    hostile["zero"] = "/dev/zero"
    hostile["full"] = "/dev/full"
    hostile["null"] = "/dev/null"
    hostile["missing"] = str(root / "missing" / "nothing.npy")
    hostile["empty"] = str(_write(root / "empty.npy", b""))
    good = (root / "X.npy").read_bytes()
    hostile["truncated"] = str(_write(root / "trunc.npy", good[: len(good) // 2]))
    hostile["header_only"] = str(_write(root / "hdr.npy", good[:128]))
    hdr = io.BytesIO()
    np.lib.format.write_array_header_1_0(hdr, {"descr": "<f8", "fortran_order": False, "shape": (10 ** 9, 10 ** 4)})
    hostile["huge_shape"] = str(_write(root / "huge.npy", hdr.getvalue() + bytes(64)))
    np.save(root / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    hostile["object_npy"] = str(root / "obj.npy")
    np.save(root / "nan.npy", np.full((3, 3), np.nan))
    hostile["nan_npy"] = str(root / "nan.npy")
    np.save(root / "str.npy", np.array(["a", "b"]))
    hostile["str_npy"] = str(root / "str.npy")
    np.save(root / "scalar.npy", np.float64(3.0))
    hostile["scalar_npy"] = str(root / "scalar.npy")
    np.save(root / "zero_size.npy", np.zeros((0, 3)))
    hostile["zero_size_npy"] = str(root / "zero_size.npy")
    np.save(root / "cplx.npy", np.ones((3, 3), dtype=complex))
    hostile["complex_npy"] = str(root / "cplx.npy")
    np.save(root / "big_int.npy", np.array([[2 ** 62, 1], [1, 1]], dtype=np.int64))
    hostile["int_npy"] = str(root / "big_int.npy")
    hostile["deep_json"] = str(_write(root / "deep.json", b"[" * 100_000 + b"]" * 100_000))
    hostile["json_wrong"] = str(_write(root / "wrong.json", json.dumps({"claims": "x", "results": [1, None]}).encode()))
    hostile["json_nan"] = str(_write(root / "nan.json", b'{"results": [{"id": NaN}]}'))
    hostile["deep_toml"] = str(_write(root / "deep.toml", b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n"))
    hostile["toml_bomb"] = str(_write(root / "bomb.toml", (
        '[sweep]\nfamily = "geometry.noisy-etf"\nmax_instances = 100000000000\n[parameters]\n'
        'k = {min = 2, max = 100000000, integer = true}\nnoise = {min = 0.0, max = 1.0, num = 100}\n').encode()))
    hostile["toml_inline_bomb"] = str(_write(root / "ibomb.toml", (
        "[sweep]\nfamily = 'geometry.noisy-etf'\n[parameters]\n" + "\n".join(
            f"p{i} = [{','.join(str(j) for j in range(10))}]" for i in range(12)) + "\n").encode()))
    hostile["toml_garbage"] = str(_write(root / "garbage.toml", b"\xff\xfe\x00 = = [\n"))
    hostile["toml_types"] = str(_write(root / "types.toml", (
        "[sweep]\nfamily = 5\nmodules = [1, 2]\nseeds = 'x'\n[parameters]\nk = {min = 'a'}\n").encode()))
    hostile["toml_k_huge"] = str(_write(root / "khuge.toml", (
        "[sweep]\nfamily = 'geometry.noisy-etf'\n[parameters]\nk = 1e300\n").encode()))
    hostile["toml_k_negative"] = str(_write(root / "kneg.toml", (
        "[sweep]\nfamily = 'geometry.noisy-etf'\n[parameters]\nk = -5\nnoise = nan\n").encode()))
    hostile["toml_unknown_family"] = str(_write(root / "unk.toml", (
        "[sweep]\nfamily = 'no.such'\n[parameters]\nk = 3\n").encode()))
    hostile["binary"] = str(_write(root / "bin.npy", bytes(range(256)) * 8))
    hostile["sqlite_junk"] = str(_write(root / "junk.sqlite", b"SQLite format 3\x00" + bytes(200)))
    hostile["npz_not_zip"] = str(_write(root / "bad.npz", b"PK\x03\x04" + bytes(100)))
    hostile["pt_junk"] = str(_write(root / "bad.pt", b"\x80\x02junk" * 10))
    hostile["st_junk"] = str(_write(root / "bad.safetensors", (2 ** 60).to_bytes(8, "little") + b"{}"))
    hostile["long_name"] = str(root / ("n" * 300 + ".npy"))
    hostile["nul_name"] = str(root / "a\x00b.npy")
    hostile["unicode_name"] = str(root / "ü✓.npy")
    f["hostile"] = hostile  # type: ignore[assignment]
    return f


def _write(p: Path, data: bytes) -> Path:
    p.write_bytes(data)
    return p


def output_targets(root: Path) -> list[str]:
    """Paths to write to that must be refused (or written) cleanly."""
    d = root / "outdir"
    d.mkdir(exist_ok=True)
    fifo = root / "out.fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    return [str(d), str(d) + "/", "/dev/full", str(fifo), str(root / "missing" / "x.md"), str(root / ("o" * 300)),
            "/", "", "\x00", str(root / "a\x00b.md"), "/proc/version", str(root / "ü✓.md")]


# ---- the parser: options per command --------------------------------------------------------------

def commands() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """(command, family) -> its subparser, discovered from the CLI's own parser (every command the
    families export, so a new family is fuzzed without editing this file)."""
    from proofs_check import cli

    parser, smap, tmap, emap = cli.build_parser()
    out: dict[tuple[str, ...], argparse.ArgumentParser] = {}

    def walk(p, prefix):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                seen = set()
                for name, sp in a.choices.items():
                    if id(sp) in seen:
                        continue
                    seen.add(id(sp))
                    walk(sp, prefix + (name,))
                return
        out[prefix] = p

    walk(parser, ())
    return out


def option_actions(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in p._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


def kind_of(a: argparse.Action) -> str:
    t = getattr(a.type, "__name__", None)
    if a.dest in INPUT_FILE_OPTIONS:
        return "infile"
    if a.dest in OUTPUT_FILE_OPTIONS:
        return "outfile"
    if a.nargs == 0:
        return "flag"
    if a.choices:
        return "choice"
    if t == "int":
        return "int"
    if t == "float":
        return "float"
    if t in ("float_list", "int_list", "_counts_arg"):
        return "list"
    return "string"


def hostile_values(a: argparse.Action, files: dict, outs: list[str], rng: random.Random) -> list[str]:
    k = kind_of(a)
    if k == "infile":
        return list(files["hostile"].values()) + STRINGS[:4]
    if k == "outfile":
        return outs + ["p.exe", "p", "p.png/", "x.gif"]
    if k == "choice":
        return CHOICE_JUNK
    if k == "int":
        return INTEGERS + NUMBERS[:8]
    if k == "float":
        return NUMBERS
    if k == "list":
        return LISTS + NUMBERS[:6]
    return STRINGS + NUMBERS[:4] + INTEGERS[:4]


def option_string(a: argparse.Action) -> str | None:
    return max(a.option_strings, key=len) if a.option_strings else None


def base_argv(cmd: tuple[str, ...], files: dict) -> list[str]:
    args = BASES.get(cmd)
    if args is None:
        return list(cmd)
    return list(cmd) + [x.format(**{k: v for k, v in files.items() if isinstance(v, str)}) for x in args]


def mutate(argv: list[str], cmd: tuple[str, ...], a: argparse.Action, value: str) -> list[str]:
    """``argv`` with option ``a`` set to ``value`` (replacing its value in the base, or appended)."""
    out = list(argv)
    opt = option_string(a)
    if opt is None:  # a positional: replace the first base argument after the command words
        n = len(cmd)
        if len(out) > n and not out[n].startswith("-"):
            out[n] = value
        else:
            out.insert(n, value)
        return out
    for i, x in enumerate(out):
        if x in a.option_strings and a.nargs != 0 and i + 1 < len(out):
            out[i + 1] = value
            return out
    if a.nargs == 0:
        return out + [opt]
    return out + [opt, value]


# ---- one call -------------------------------------------------------------------------------------

def call(argv: list[str], cwd: Path, alarm_s: float = CALL_ALARM_S) -> Outcome:
    """Run ``cli.main(argv)`` in ``cwd`` with stdout/stderr captured and a per-call alarm."""
    import time

    from proofs_check import cli

    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    prev = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, alarm_s)
    t0 = time.monotonic()
    rc: int | None
    problem = None
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli.main(list(argv))
            except SystemExit as exc:
                code = exc.code
                rc = code if isinstance(code, int) else (0 if code is None else 2)
    except Hang:
        rc, problem = None, f"hang: no answer within {alarm_s} s"
    except BaseException as exc:  # noqa: BLE001 - the CLI must not raise anything
        rc, problem = None, f"raised {type(exc).__name__}: {exc}\n{traceback.format_exc()[-2000:]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, prev)
        os.chdir(old)
    o = Outcome(list(argv), rc, out.getvalue(), err.getvalue(), problem, time.monotonic() - t0)
    if o.problem is None:
        o.problem = check_outcome(o)
    return o


def _err_lines(err: str) -> list[str]:
    return [ln for ln in err.strip().splitlines() if ln.strip()]


def check_outcome(o: Outcome, option: argparse.Action | None = None, value: str | None = None) -> str | None:
    """The contract of one call; ``None`` when it holds, else what is wrong."""
    text = o.out + o.err
    if "Traceback (most recent call last)" in text:
        return "traceback printed"
    if "internal error" in o.err:
        return "internal error"
    if o.rc not in (0, 1, 2):
        return f"exit status {o.rc}"
    if o.rc == 2:
        lines = _err_lines(o.err)
        if "usage:" in o.out and not o.err.strip():  # `ncproofs` / `ncproofs solve` without a command
            return None
        if len(lines) != 1:
            return f"exit 2 with {len(lines)} stderr lines"
        if option is not None and not names_option(lines[0], option, value):
            return "exit 2 without naming the option"
    if o.rc == 1 and "out of memory" in o.err:
        return "out of memory on a small instance"
    return None


def names_option(line: str, a: argparse.Action, value: str | None) -> bool:
    if a.nargs == 0:  # a flag changes which other option matters (--summary: --store); any named one will do
        return True
    cands = list(a.option_strings) + [a.dest, a.dest.replace("_", "-"), a.dest.replace("_", " ")]
    if a.metavar:
        cands.append(str(a.metavar))
    if value:
        cands.append(value)
        cands.append(repr(value)[1:-1])
    return any(c and c in line for c in cands)


# ---- batches --------------------------------------------------------------------------------------

def _selected(cmd: tuple[str, ...], only: str | None) -> bool:
    name = " ".join(cmd)
    return only is None or name == only or name.startswith(only + " ")


@dataclass
class Case:
    cmd: tuple[str, ...]
    argv: list[str]
    mutated: list[tuple[str, str]] = field(default_factory=list)  # (dest, value)


def cases(files: dict, outs: list[str], rng: random.Random, n: int, only: str | None = None,
          pairs: float = 0.25) -> list[Case]:
    """``n`` cases: each a base with one option (sometimes two) replaced by a hostile value."""
    cmds = commands()
    keys = [k for k in cmds if k and _selected(k, only)]
    out = []
    for _ in range(n):
        cmd = rng.choice(keys)
        acts = [a for a in option_actions(cmds[cmd]) if not isinstance(a, argparse._VersionAction)
                and a.dest not in ("rigorous",)]
        argv = base_argv(cmd, files)
        mutated = []
        for _j in range(2 if rng.random() < pairs else 1):
            if not acts:
                break
            a = rng.choice(acts)
            v = rng.choice(hostile_values(a, files, outs, rng))
            argv = mutate(argv, cmd, a, v)
            mutated.append((a.dest, v))
        out.append(Case(cmd, argv, mutated))
    return out


#: a short list per option kind for the systematic sweep (every command x option x value)
SHORT = {
    "float": ["nan", "-inf", "1e308", "-1", "0", "-0.0", "1e-320", "99999999999999999999999", "", "\x00"],
    "int": ["-1", "0", "99999999999999999999", "9223372036854775807", "100000000", "", "3.0"],
    "list": ["", "1,,2", "nan,1", "-1,2", "0,0", "1e308,1e308", "99999999999999999999,3", ",".join(["2"] * 5000)],
    "string": ["", "\x00", "a" * 5000, "é✓", "../", "/"],
    "choice": ["", "NOPE"],
    "flag": [""],
}


#: sizes inside the options' own ranges: the command must refuse them by its budget or finish fast
SIZES = {"int": ["1000", "100000", "10000000"], "list": ["1000,1000", "100000,2", "2," * 999 + "2"],
         "float": ["1e-12", "1e-6", "1e6"]}


def systematic(files: dict, outs: list[str], only: str | None = None, sizes: bool = False) -> list[Case]:
    """Every command x option x value of its kind (``SHORT``; every hostile file / output target), or with
    ``sizes`` the large values of ``SIZES`` (budgets: refused before work or fast)."""
    cmds = commands()
    out = []
    for cmd, p in cmds.items():
        if not cmd or not _selected(cmd, only):
            continue
        for a in option_actions(p):
            if isinstance(a, argparse._VersionAction) or a.dest == "rigorous":
                continue
            k = kind_of(a)
            if sizes:
                if k not in SIZES or "seed" in a.dest:
                    continue
                vals = SIZES[k]
            else:
                vals = (list(files["hostile"].values()) if k == "infile" else outs + ["p.exe", "p.png/"]
                        if k == "outfile" else SHORT[k])
            for v in vals:
                out.append(Case(cmd, mutate(base_argv(cmd, files), cmd, a, v), [(a.dest, v)]))
    return out


def run_case(c: Case, cwd: Path, alarm_s: float = CALL_ALARM_S) -> Outcome:
    o = call(c.argv, cwd, alarm_s)
    if o.problem is None and o.rc == 2 and c.mutated:
        acts = {a.dest: a for a in option_actions(commands()[c.cmd])}
        line = _err_lines(o.err)[0] if _err_lines(o.err) else ""
        if not any(names_option(line, acts[d], v) for d, v in c.mutated if d in acts):
            o.problem = "exit 2 without naming the option"
    return o


def _limit_memory(gb: float | None) -> None:
    if gb:
        import resource

        lim = int(gb * 2 ** 30)
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--only", default=None, help="command prefix, e.g. 'solve ufm' or 'sweep'")
    ap.add_argument("--memory-gb", type=float, default=None, help="RLIMIT_AS for this process")
    ap.add_argument("--alarm", type=float, default=CALL_ALARM_S)
    ap.add_argument("--root", default=None, help="folder for the files (default: a temporary one)")
    ap.add_argument("--jsonl", default=None, help="append one JSON line per problem")
    ap.add_argument("--systematic", action="store_true", help="every command x option x value (SHORT)")
    ap.add_argument("--start", type=int, default=0, help="systematic: first case")
    ap.add_argument("--sizes", action="store_true", help="every command x size option x large value (SIZES)")
    ap.add_argument("--pairs", type=float, default=0.25, help="random mode: share of cases with two hostile options")
    ns = ap.parse_args(argv)
    _limit_memory(ns.memory_gb)
    import tempfile

    root = Path(ns.root or tempfile.mkdtemp(prefix="ncproofs-fuzz-"))
    files = make_files(root / "in")
    outs = output_targets(root)
    cwd = root / "cwd"
    cwd.mkdir(exist_ok=True)
    rng = random.Random(ns.seed)
    bad = 0
    todo = (systematic(files, outs, ns.only, ns.sizes)[ns.start:ns.start + ns.cases] if ns.systematic or ns.sizes
            else cases(files, outs, rng, ns.cases, ns.only, pairs=ns.pairs))
    for c in todo:
        o = run_case(c, cwd, ns.alarm)
        if o.problem:
            bad += 1
            rec = {"problem": o.problem.splitlines()[0], "argv": o.argv, "rc": o.rc, "err": o.err[-600:],
                   "seconds": round(o.seconds, 2)}
            print(json.dumps(rec, ensure_ascii=True), flush=True)
            if ns.jsonl:
                with open(ns.jsonl, "a") as fh:
                    fh.write(json.dumps(rec, ensure_ascii=True) + "\n")
        # the stores/reports a case wrote must not leak into the next one
        for p in cwd.iterdir():
            if p.is_file() and not stat.S_ISFIFO(p.lstat().st_mode):
                p.unlink()
        st = Path(files["store"])
        for suffix in ("", "-wal", "-shm"):
            q = Path(str(st) + suffix)
            if q.exists():
                q.unlink()
    print(f"{ns.cases} cases, {bad} problems", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
