"""The command-line fuzzer (tests/fuzz_cli.py) in the default suite, its reproduced defects as
regression tests, and the same bad values through the CLI and the Python API.

Default suite: a handful of fixed-seed cases per run (hypothesis, derandomised) over every command
the families export, each call in-process under a per-call alarm. ``--runslow``: a bigger batch in a
subprocess under ``RLIMIT_AS`` = 3 GiB (memory bounded), over every command x option x value of
its kind. Contract of every call: exit 0/1 with a normal output, or exit 2 with exactly one stderr
line naming the option; never "internal error", a traceback or a hang.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
import fuzz_cli as F  # noqa: E402


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    files = F.make_files(root / "in")
    outs = F.output_targets(root)
    cwd = root / "cwd"
    cwd.mkdir()
    return files, outs, cwd


def _ok(o: F.Outcome) -> None:
    assert o.problem is None, (o.problem, o.argv, o.rc, o.err[-800:])


def _refused(argv, cwd, *needles) -> str:
    o = F.call(list(argv), cwd)
    _ok(o)
    assert o.rc == 2, (o.rc, o.out[-300:], o.err)
    line = o.err.strip()
    for n in needles:
        assert n in line, line
    return line


# ---- the fuzzer itself -----------------------------------------------------------------------------

FAST_COMMANDS = [("list",), ("cite",), ("batching",), ("table", "scl"), ("table", "ntk"), ("table", "ufm"),
                 ("solve", "scl"), ("solve", "ufm-ce"), ("solve", "ufm-regression"), ("measure",), ("sweep",)]


@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_one_hostile_option(zoo, data):
    files, outs, cwd = zoo
    cmd = data.draw(st.sampled_from(FAST_COMMANDS), label="command")
    acts = [a for a in F.option_actions(F.commands()[cmd]) if a.dest != "rigorous"]
    a = data.draw(st.sampled_from(acts), label="option")
    k = F.kind_of(a)
    pool = (list(files["hostile"].values()) if k == "infile" else outs if k == "outfile" else F.SHORT[k])
    v = data.draw(st.sampled_from(pool), label="value")
    c = F.Case(cmd, F.mutate(F.base_argv(cmd, files), cmd, a, v), [(a.dest, v)])
    _ok(F.run_case(c, cwd))


def test_every_command_is_fuzzed():
    """A family that adds a command gets a cheap base (else the fuzzer only sees its refusals)."""
    missing = [c for c in F.commands() if c and c not in F.BASES and c not in (("solve",), ("table",))]
    assert not missing, f"add a cheap valid argument vector to tests/fuzz_cli.py BASES for {missing}"


@pytest.mark.slow
@pytest.mark.parametrize("only", ["list", "cite", "batching", "table", "measure", "sweep", "solve"])
def test_fuzz_systematic_under_a_memory_limit(tmp_path, only):
    r = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "fuzz_cli.py"), "--systematic",
                        "--only", only, "--cases", "100000", "--memory-gb", "3", "--root", str(tmp_path)],
                       capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [101, 202])
def test_fuzz_random_pairs_under_a_memory_limit(tmp_path, seed):
    r = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "fuzz_cli.py"), "--seed", str(seed),
                        "--cases", "300", "--memory-gb", "3", "--root", str(tmp_path)],
                       capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


# ---- reproduced defects ----------------------------------------------------------------------------

def test_output_name_too_long_names_the_option(zoo):
    files, outs, cwd = zoo
    long = str(cwd / ("o" * 300))
    _refused(["run", "--only", "geometry", "--report", "", "--json", long], cwd, "--json", "File name too long")
    _refused(["cite", "-o", long], cwd, "--output", "File name too long")


def test_nul_character_in_any_option_is_one_line(zoo):
    files, outs, cwd = zoo
    bad = files["X"][:-4] + "\x00.npy"
    _refused(["measure", bad, "--labels", files["y"]], cwd, "FEATURES", "NUL")
    _refused(["measure", files["X"], "--labels", files["y"], "--weights", bad], cwd, "--weights", "NUL")
    _refused(["solve", "ufm-regression", "--targets", bad, "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2"],
             cwd, "--targets", "NUL")


LONG = ",".join(["2"] * 5000)


@pytest.mark.parametrize("argv,needles", [
    # MemoryError building K class sizes before the limit on K was checked
    (["solve", "deep-ufm", "-L", "2", "-k", "9223372036854775807", "-n", "1", "-D", "2", "--lambda", "0.01"],
     ["--classes must be <= 10000"]),
    # tables with thousands of rows ran for minutes (hangs under the alarm)
    (["table", "deep-ufm", "--layers", LONG, "--classes", "2", "--lambda", "0.01"], ["--layers", "limit 200"]),
    (["table", "deep-ufm", "--layers", "1", "--classes", "2", "--lambda", LONG], ["--lambda", "limit 200"]),
    (["table", "feature-collapse", "--concepts", "2", "--length", "2", "--words-per-concept", "2", "--lambdas", LONG,
      "--layernorm", "--dims", "2"], ["--lambdas", "limit 200"]),
    (["table", "feature-collapse", "--concepts", "2", "--length", "2", "--words-per-concept", "2", "--lambdas", "0.1",
      "--layernorm", "--dims", LONG], ["--dims", "limit 200"]),
    # OverflowError in fsum
    (["solve", "feature-collapse", "--concepts", "2", "--length", "2", "--words-per-concept", "2", "--dim", "2",
      "--lambda", "0.1", "--freqs", "1e308,1e308"], ["--freqs"]),
    (["table", "feature-collapse", "--concepts", "2", "--length", "2", "--words-per-concept", "2", "--lambdas", "0.1",
      "--freqs", "1e308,1e308"], ["--freqs"]),
    # OverflowError (ceil(T / eta) infinite) and a state overflowing with 21 lines of numpy warnings
    (["solve", "ntk", "--classes", "2", "--per-class", "2", "--step-size", "1e-320"], ["--step-size"]),
    (["solve", "ntk", "--classes", "2", "--per-class", "2", "--step-size", "1e308"], ["--step-size"]),
    (["solve", "ntk", "--classes", "2", "--per-class", "2", "--step-size", "100", "--steps", "1000"],
     ["--step-size", "diverged"]),
    # refusals that named an internal parameter
    (["solve", "ntk", "--classes", "2", "--per-class", "2", "--kernel-perturbation", "1e308"],
     ["--kernel-perturbation"]),
    (["solve", "ntk", "--counts", LONG], ["--counts", "exceeds the limit"]),
    (["table", "ntk", "--counts", "99999999999999999999,3"], ["--counts"]),
    (["table", "ntk", "--kernel-perturbation", "1e308,1"], ["--kernel-perturbation"]),
    # ufm-mse --starts 10^8 fitted the flop budget and ran for hours
    (["solve", "ufm-mse", "-k", "3", "-n", "2", "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2", "--starts",
      "100000000"], ["--starts must be in [1, 1000]"]),
    (["solve", "ufm", "--loss", "ce", "-k", "3", "-n", "2", "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2",
      "--starts", "100000000"], ["--starts"]),
    # a table of general-kernel flows had no total budget (each flow was checked alone): C = 1000 ran for minutes
    (["table", "ntk", "--counts", ",".join(["2"] * 1000)], ["--counts", "work budget"]),
    # the default n = C + 1 > 256 was refused only after the N x N kernel was built (a minute for C = 1000)
    (["solve", "ntk", "--counts", ",".join(["2"] * 1000)], ["--counts", "limit 256"]),
    # --jobs 100000 forked one process per claim
    (["run", "--only", "geometry", "--jobs", "100000"], ["--jobs must be in [1, 64]"]),
    # '../' reached Dask's IDNA encoder (UnicodeError: internal error)
    (["sweep", "{cfg}", "--scheduler", "../"], ["--scheduler", "not a host name"]),
])
def test_reproduced_defects_are_one_line_refusals(zoo, argv, needles):
    files, outs, cwd = zoo
    _refused([a.format(cfg=files["cfg"]) for a in argv], cwd, *needles)


# ---- the Python API: the same bad values, refused naming the parameter ------------------------------

import fuzz_api as A  # noqa: E402

_FAST_TARGETS = [t for t in A.TARGETS if not t.name.startswith("solvers.")]  # the solvers' own test: refusals only


@pytest.mark.parametrize("target", _FAST_TARGETS, ids=lambda t: t.name)
def test_api_constructors_refuse_hostile_values_naming_the_parameter(target):
    bad = A.problems([target])
    assert not bad, "\n".join(f"{r.target}.{r.param} = {r.label}: {r.outcome} {r.message}" for r in bad)


@pytest.mark.parametrize("target", [t for t in A.TARGETS if t.name.startswith("solvers.")], ids=lambda t: t.name)
def test_api_solvers_refuse_hostile_values_naming_the_parameter(target):
    bad = A.problems([target])
    assert not bad, "\n".join(f"{r.target}.{r.param} = {r.label}: {r.outcome} {r.message}" for r in bad)


@pytest.mark.parametrize("cli_value,api_value,argv,build,needle", [
    # integers beyond int64: the CLI refuses them before dispatch, the API in as_int (1e300 became a 301-digit int)
    ("99999999999999999999", 10 ** 20, ["solve", "ufm-ce", "-n", "2", "-d", "3", "--lambda-w", "1e-2", "--lambda-h",
                                        "1e-2", "-k"], lambda v: A._ufm(loss="ce", k=v, n=2, d=3, lw=1e-2, lh=1e-2),
     "2^63 - 1"),
    ("1e300", 1e300, ["solve", "ntk", "--per-class", "2", "--classes"],
     lambda v: A._ntk(classes=v, per_class=2, kappa=(1.0, 0.6, 0.2)), None),
    ("nan", float("nan"), ["solve", "ufm-ce", "-k", "3", "-n", "2", "-d", "3", "--lambda-h", "1e-2", "--lambda-w"],
     lambda v: A._ufm(loss="ce", k=3, n=2, d=3, lw=v, lh=1e-2), None),
    ("1e308,1e308", (1e308, 1e308), ["solve", "feature-collapse", "--concepts", "2", "--length", "2",
                                     "--words-per-concept", "2", "--dim", "2", "--lambda", "0.1", "--freqs"],
     lambda v: A._fc(n_c=2, L=2, s_c=2, d=2, lam=0.1, freqs=v), "freqs"),
    ("-1", -1, ["solve", "scl", "--counts", "2,2", "--tau", "0.5", "--dim"],
     lambda v: A._scl(counts=(2, 2), tau=0.5, d=v), None),
    ("0", 0, ["solve", "deep-ufm", "-L", "2", "-k", "2", "-n", "1", "--lambda", "0.01", "-D"],
     lambda v: A._deep(layers=2, activation="linear", loss="mse", counts=(1, 1), width=v, lams=(0.01,)), "width"),
])
def test_same_bad_value_through_the_cli_and_the_api(zoo, cli_value, api_value, argv, build, needle):
    files, outs, cwd = zoo
    line = _refused(argv + [cli_value], cwd)
    with pytest.raises((TypeError, ValueError)) as info:
        build(api_value)
    if needle:
        assert needle in line and needle in str(info.value), (line, str(info.value))


def test_api_string_parameters_refuse_arrays_naming_the_parameter():
    import numpy as np

    arr = np.array(["ce", "mse"])
    with pytest.raises(ValueError, match="loss must be one of"):
        A._ufm(loss=arr, k=3, n=2, d=3, lw=1e-2, lh=1e-2)
    with pytest.raises(ValueError, match="latents must be"):
        A._fc(n_c=2, L=2, s_c=2, d=2, lam=0.1, latents=arr)


@pytest.mark.parametrize("build,param", [
    (lambda: A._ufm_factored(rebalance_every=-1), "rebalance_every"),   # never ended
    (lambda: A._ufm_factored(maxiter=float("nan")), "maxiter"),         # accepted
    (lambda: A._ufm_factored(gtol=float("nan")), "gtol"),               # accepted
    (lambda: A._ufm_factored(gtol=1e300), "gtol"),                      # stopped at once, 'converged'
    (lambda: A._ufm_factored(stop_at=float("nan")), "stop_at"),         # accepted
    (lambda: A._ufm_factored(starts=True), "starts"),                   # accepted as 1
    (lambda: A._ufm_factored(seed=float("nan")), "seed"),               # SeedSequence's message
    (lambda: A._ufm_factored(init_scale=1e300), "init_scale"),          # 'SVD did not converge'
    (lambda: A._ufm_factored(starts=10 ** 30), "starts"),               # never ended
    (lambda: A._scl_factored(hop_until="x"), "hop_until"),              # accepted
    (lambda: A._scl_factored(stop_at=float("nan")), "stop_at"),         # accepted
    (lambda: A._fc_solve(budget_s=float("nan")), "budget_s"),           # switched the budget off
    (lambda: A._fc_solve(seed="3"), "seed"),                            # SeedSequence's message
])
def test_solver_options_are_checked_before_work_naming_the_parameter(build, param):
    with pytest.raises((TypeError, ValueError), match=param):
        build()


@pytest.mark.parametrize("path", [5, "a\x00b.npy", ["x.npy"]])
def test_measure_api_refuses_what_is_not_a_path(path):
    from proofs_check.measure import measure
    from theory._validate import InputError

    with pytest.raises(InputError, match="FEATURES"):
        measure(path)


@pytest.mark.parametrize("argv", [["list"], ["solve", "ufm-ce", "-k", "3", "-n", "2", "-d", "3", "--lambda-w", "1e-2",
                                             "--lambda-h", "1e-2", "--json"]])
def test_standard_output_on_a_full_disk_is_one_line(tmp_path, argv):
    """`> /dev/full`: was an internal error (and, with --json, two tracebacks)."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "proofs_check", *argv], cwd=tmp_path, stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == ["ncproofs: error: standard output: No space left on device (errno 28)"]
