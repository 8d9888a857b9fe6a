"""Bad input across every command: exit status 2, one line on stderr naming the parameter, no
traceback, and no work first (each case must end quickly; a SIGALRM guard turns a hang into a
failure instead of a stuck suite). Defects are never reported as bad input (test_verdict_engine)."""

import re
import signal

import pytest

from proofs_check.cli import main

UFM = ["--classes", "3", "--per-class", "2", "--dim", "3", "--lambda-w", "0.01", "--lambda-h", "0.01"]


def _ufm(**over):
    args = dict(zip(UFM[::2], UFM[1::2]))
    for k, v in over.items():
        args["--" + k.replace("_", "-")] = v
    out = []
    for k, v in args.items():
        if v is not None:
            out += [k, v]
    return out


# (argv, a word the message must contain)
CASES = [
    # UFM: sizes, decays, ranges, budgets
    (["solve", "ufm-ce", *_ufm(classes="1")], "classes"),
    (["solve", "ufm-ce", *_ufm(classes="0")], "classes"),
    (["solve", "ufm-ce", *_ufm(classes="-3")], "classes"),
    (["solve", "ufm-ce", *_ufm(per_class="0")], "per"),
    (["solve", "ufm-ce", *_ufm(dim="0")], "dim"),
    (["solve", "ufm-ce", *_ufm(lambda_w="0")], "lambda"),
    (["solve", "ufm-ce", *_ufm(lambda_w="-1")], "lambda"),
    (["solve", "ufm-ce", *_ufm(lambda_w="nan")], "lambda"),
    (["solve", "ufm-ce", *_ufm(lambda_h="inf")], "lambda"),
    (["solve", "ufm-ce", *_ufm(lambda_w="1e-300", lambda_h="1e-300"), "--method", "closed-form", "--json"], "lambda"),
    (["solve", "ufm-ce", *_ufm(lambda_w="5e-324")], "lambda"),
    (["solve", "ufm-mse", *_ufm(lambda_w="1e-300", lambda_h="1e300")], "lambda"),
    (["solve", "ufm-ce", *_ufm(classes="100000", per_class="100000", dim="100000")], "memory"),
    (["solve", "ufm-ce", *_ufm(starts="100000000"), "--method", "factored"], "starts"),
    (["solve", "ufm-ce", *_ufm(starts="0")], "starts"),
    (["solve", "ufm-ce", *_ufm(dim="100000000"), "--method", "factored"], "GB"),
    (["solve", "ufm-ce", *_ufm(classes="500", per_class="500", dim="500"), "--method", "convex"], "convex"),
    (["solve", "ufm-ce", *_ufm(classes="abc")], "classes"),
    (["solve", "ufm-ce", *_ufm(seed="-1")], "seed"),
    # SCL
    (["solve", "scl", "--counts", "", "--tau", "0.1"], "counts"),
    (["solve", "scl", "--counts", ",,,", "--tau", "0.1"], "counts"),
    (["solve", "scl", "--counts", "3,0,2", "--tau", "0.1"], "counts"),
    (["solve", "scl", "--counts", "3,-1", "--tau", "0.1"], "counts"),
    (["solve", "scl", "--counts", "3", "--tau", "0.1"], "counts"),
    (["solve", "scl", "--counts", "3,3", "--tau", "0"], "tau"),
    (["solve", "scl", "--counts", "3,3", "--tau", "-1"], "tau"),
    (["solve", "scl", "--counts", "3,3", "--tau", "nan"], "tau"),
    (["solve", "scl", "--counts", "3,3", "--tau", "1e-320"], "tau"),
    (["solve", "scl", "--counts", "3,3", "--tau", "0.1", "--dim", "0"], "dim"),
    (["solve", "scl", "--counts", "3,3", "--tau", "0.1", "--dim", "100000000"], "dim"),
    (["solve", "scl", "--counts", "3,3", "--tau", "0.1", "--starts", "100000000"], "starts"),
    (["solve", "scl", "--counts", "100000000,100000000", "--tau", "0.1"], "counts"),
    (["solve", "scl", "--counts", "99999999999999999999999,2", "--tau", "0.1"], "counts"),
    (["solve", "scl", "--counts", "3,3", "--tau", "0.1", "--batches", "0,1;9,10"], "batch"),
    # feature collapse
    (["solve", "feature-collapse", "--concepts", "1", "--length", "2", "--words-per-concept", "2", "--dim", "3",
      "--lambda", "0.1"], "concepts"),
    (["solve", "feature-collapse", "--concepts", "2", "--length", "0", "--words-per-concept", "2", "--dim", "3",
      "--lambda", "0.1"], "length"),
    (["solve", "feature-collapse", "--concepts", "2", "--length", "2", "--words-per-concept", "2", "--dim", "3",
      "--lambda", "-0.1"], "lambda"),
    (["solve", "feature-collapse", "--concepts", "2", "--length", "2", "--words-per-concept", "2", "--dim", "3",
      "--lambda", "1e-300"], "lambda"),
    (["solve", "feature-collapse", "--concepts", "2", "--length", "2", "--words-per-concept", "2", "--dim", "3",
      "--lambda", "0.1", "--freqs", "0.5,0.6"], "freqs"),
    (["solve", "feature-collapse", "--concepts", "50", "--length", "50", "--words-per-concept", "50", "--dim", "3",
      "--lambda", "0.1"], ""),
    (["solve", "feature-collapse", "--concepts", "2", "--length", "2", "--words-per-concept", "2", "--dim", "3",
      "--lambda", "0.1", "--starts", "100000000"], "starts"),
    # NTK
    (["solve", "ntk", "--classes", "3", "--per-class", "2", "--init-scale", "1e-320"], "init"),
    (["solve", "ntk", "--classes", "3", "--per-class", "2", "--init-scale", "1e300"], "init"),
    (["solve", "ntk", "--classes", "3", "--per-class", "2", "--init-scale", "0"], "init"),
    (["solve", "ntk", "--classes", "3", "--per-class", "2", "--time", "1e12"], "time"),
    (["solve", "ntk", "--classes", "3", "--per-class", "2", "--time", "-1"], "time"),
    (["solve", "ntk", "--classes", "1", "--per-class", "2"], "classes"),
    (["solve", "ntk", "--classes", "3", "--per-class", "0"], "per"),
    (["solve", "ntk", "--classes", "3", "--per-class", "2", "--s", "1e300"], "s"),
    (["solve", "ntk", "--classes", "3", "--per-class", "2", "--feature-dim", "100000000"], "dim"),
    (["solve", "ntk", "--classes", "3", "--per-class", "2", "--kappa", "1,2"], "kappa"),
    # CRH
    (["solve", "crh", "--steps", "1000000000000"], "steps"),
    (["solve", "crh", "--steps", "0"], "steps"),
    (["solve", "crh", "--lr", "-1"], "lr"),
    (["solve", "crh", "--weight-decay", "-1"], "decay"),
    # tables
    (["table", "ufm", "--loss", "ce", "--classes", "", "--lambda", "0.1"], "classes"),
    (["table", "ufm", "--loss", "ce", "--classes", ",,,", "--lambda", "0.1"], "classes"),
    (["table", "ufm", "--loss", "ce", "--classes", "3", "--lambda", "-1"], "lambda"),
    (["table", "ufm", "--loss", "ce", "--classes", "1", "--lambda", "0.1"], "classes"),
    (["table", "ntk", "--classes", "", "--per-class", "2"], "classes"),
    (["table", "ntk", "--classes", ",,,", "--per-class", "2"], "classes"),
    (["table", "scl", "--counts", "", "--tau", "0.1"], "counts"),
    (["table", "scl", "--counts", "3,3", "--tau", ""], "tau"),
    (["table", "feature-collapse", "--concepts", "2", "--length", "2", "--words-per-concept", "2",
      "--lambdas", ""], "lambda"),
    # the loss options named as typed (the API says "class weights" / "smoothing eps")
    (["solve", "ufm", "--loss", "weighted-ce", "--class-weights", "1,0,1", *_ufm()], "--class-weights must be"),
    (["solve", "ufm", "--loss", "weighted-ce", "--class-weights", "1,1e9,1", *_ufm()], "--class-weights must lie"),
    (["solve", "ufm", "--loss", "weighted-ce", "--counts", "2,2", "--class-weights", "1,2,3",
      *_ufm(classes=None, per_class=None)], "--class-weights must have"),
    (["table", "ufm", "--loss", "weighted-ce", "--classes", "3", "--class-weights", "1,-1,1", "--lambda", "0.1"],
     "--class-weights must be"),
    (["solve", "ufm", "--loss", "ls", "--smoothing", "1.5", *_ufm()], "--smoothing must be"),
    # run / list
    (["run", "--only", "no-such-claim-xyz"], "only"),
    (["run", "--seed", "-1", "--only", "ufm"], "seed"),
    (["list", "--only", "no-such-claim-xyz"], ""),
]


@pytest.fixture
def alarm():
    def on_alarm(signum, frame):
        raise TimeoutError("bad input took more than 60 s: budgets must be checked before work")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("argv,word", CASES, ids=[" ".join(a)[:70] for a, _ in CASES])
def test_bad_input_is_one_line_exit_2(argv, word, capsys, alarm):
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse errors
        rc = e.code
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("ncproofs: note:")]
    if argv[0] == "list":  # an empty selection is not an error for list, but it must say so
        assert rc in (0, 2)
        return
    assert rc == 2, (rc, err)
    assert "Traceback" not in err
    assert len(lines) == 1, err
    assert lines[0].startswith("ncproofs: error:") or lines[0].startswith("usage:") is False
    assert word.lower() in lines[0].lower(), lines[0]


# ---- tolerances that make a statement unable to fail ------------------------------------------------------

def _user_claim(kind="equals", predict=lambda p: 1.0, solve=lambda p: 2.0, **tol):
    st = pytest.importorskip("hypothesis.strategies")
    from proofs_check.user import UserClaim

    return UserClaim(id="t.huge-atol", statement="s", source="src", params={"k": st.integers(2, 3)}, kind=kind,
                     predict=predict, solve=solve, **tol)


@pytest.mark.parametrize("atol", [1e300, 1.0, 5.0])
def test_user_claim_refuses_an_atol_at_the_predictions_scale(atol):
    """1 = 2 within atol: with atol >= max(1, |prediction|) it was VERIFIED (1e300: any statement); refused,
    naming atol and the bound, never VERIFIED."""
    from proofs_check.core import Verdict
    from theory._validate import InputError

    claim = _user_claim(atol=atol)
    with pytest.raises(InputError, match=re.escape("atol must be < 1 x max(1, |prediction|) = 1 at this")) as info:
        claim.checks({"k": 2})
    assert "atol" in str(info.value) and repr(atol) in str(info.value)
    assert claim.check_instance({"k": 2}).verdict is Verdict.ERROR
    big = _user_claim(kind="lower_bound", predict=lambda p: 3.0, solve=lambda p: 1.0, atol=atol + 10)
    with pytest.raises(InputError, match="atol must be"):  # min >= 3 "shown" by a feasible value 1
        big.checks({"k": 2})


@pytest.mark.parametrize("atol", [float("inf"), float("nan")])
def test_user_claim_refuses_a_non_finite_atol(atol):
    from theory._validate import InputError

    with pytest.raises(InputError, match="atol must be a finite number"):
        _user_claim(atol=atol)


def test_user_claim_small_atol_still_judges():
    """Below the bound the statement is judged as before: 0 = 1e-10 within 1e-8 (prediction 0: the floor 1);
    1e6 = 1e6 + 50 within 100 (scale 1e6); 1 = 2 within 0.5 is REFUTED."""
    from proofs_check.core import Verdict

    assert _user_claim(predict=lambda p: 0.0, solve=lambda p: 1e-10, atol=1e-8).check_instance(
        {"k": 2}).verdict is Verdict.VERIFIED
    assert _user_claim(predict=lambda p: 1e6, solve=lambda p: 1e6 + 50, atol=100.0).check_instance(
        {"k": 2}).verdict is Verdict.VERIFIED
    assert _user_claim(atol=0.5).check_instance({"k": 2}).verdict is Verdict.REFUTED


@pytest.mark.parametrize("gtol", [1e300, 1.0, float("inf"), float("nan"), -1e-9])
def test_ufm_solver_refuses_an_absurd_gtol_naming_it(gtol):
    """solvers.ufm.solve_factored(gtol=1e300) stopped every start at its random point and reported it
    'converged' (|grad| <= 10 gtol); refused before work with a ValueError naming gtol."""
    from solvers import ufm as U
    from theory.ufm import UFMInstance

    inst = UFMInstance("ce", k=3, n=2, d=3, lw=1e-2, lh=1e-2)
    with pytest.raises(ValueError, match="gtol"):
        U.solve_factored(inst, starts=1, maxiter=20, gtol=gtol)
    sol = U.solve_factored(inst, starts=1, maxiter=20, gtol=U.GTOL_MAX)  # the bound itself is accepted
    assert sol.value > 0
