"""Budgets in work, not in seconds (issue 28).

Every refusal of an input that is too large compares an estimate of WORK (flop-equivalents, flops, score entries,
multiply-adds, class pairs) with a fixed limit in the same unit, and only *states* this machine's speed ("about S s
here at the measured R Gflop/s"). Each refusal is triggered through the CLI and checked: exit status 2, one line,
the parameter or instance named, the work and the limit in one unit (the work above the limit), and the same
decision, work and limit when the measured rate is made 100 times slower or faster (only the stated seconds move).
"""

from __future__ import annotations

import re

import pytest

from proofs_check.cli import main
from theory import _work as W

NUMBER = r"([-+0-9.eE]+|inf)"
RATE = re.compile(r"measured single-thread rate ([-+0-9.eE]+) Gflop/s: about ([-+0-9.eE]+) s here")


def _main(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own errors
        return exc.code


def _work_and_limit(err: str, unit: str) -> tuple[float, float]:
    m = re.search(rf"work {NUMBER} {re.escape(unit)} \(limit {NUMBER} {re.escape(unit)}\b", err)
    assert m, f"no 'work W {unit} (limit L {unit}' in: {err}"
    return float(m[1]), float(m[2])


def _refused_identically(argv, unit, needles, capsys, monkeypatch) -> str:
    """Run ``argv`` at the measured rate, 100x slower and 100x faster; return the first message."""
    base = W.measured_flops()
    seen = []
    for rate in (base, base / 100.0, base * 100.0):
        monkeypatch.setattr(W, "measured_flops", lambda r=rate: r)
        rc = _main(list(argv))
        err = capsys.readouterr().err
        assert rc == 2, (rate, err)
        assert err.startswith("ncproofs: error:") and err.count("\n") == 1, err
        for needle in needles:
            assert needle in err, (needle, err)
        work, limit = _work_and_limit(err, unit)
        assert work > limit, err
        m = RATE.search(err)
        assert m, f"no measured rate stated in: {err}"
        assert float(m[1]) == pytest.approx(rate / 1e9, rel=2e-3)
        seen.append((work, limit, float(m[2]), err))
    (w0, l0, s0, e0), (w1, l1, s1, _), (w2, l2, s2, _) = seen
    assert (w1, l1) == (w0, l0) == (w2, l2)  # the decision's numbers do not depend on the machine's speed
    assert s1 == pytest.approx(100.0 * s0, rel=2e-2) and s2 == pytest.approx(s0 / 100.0, rel=2e-2)
    assert re.sub(RATE, "", seen[1][3]) == re.sub(RATE, "", e0)  # only the stated rate and seconds differ
    return e0


def _counts(n: int, each: int) -> str:
    return ",".join([str(each)] * n)


CASES = {
    # solvers/feature_collapse.py: check_budget (was "instance needs about N s for S start(s) (limit 120 s on 2 cores)")
    "feature-collapse starts": (
        ["solve", "feature-collapse", "--concepts", "3", "--length", "5", "--words-per-concept", "2", "--dim", "4",
         "--lambda", "0.1", "--starts", "64"], "score entries", ["64 start(s)", "K * sentences * (L + 4)", "--starts"]),
    # solvers/feature_collapse_ln.py: check_bound_budget (was "work W (limit L)" without a unit or a rate)
    "trainable-LN sign enumeration": (
        ["solve", "feature-collapse", "--concepts", "4", "--length", "3", "--words-per-concept", "4", "--dim", "4",
         "--lambda", "0.1", "--layernorm", "--trainable-ln", "--ln-decay", "0.1", "--latents", "random",
         "--classes", "200"], "multiply-adds", ["2^(n_w-1) sign vectors", "2^15 x 600 x 16", "--words-per-concept"]),
    # solvers/ntk.py: check_work (was "~N s and ~B GB of dense output exceed the budget (60 s, 1.2 GB)")
    "ntk flow": (
        ["solve", "ntk", "--classes", "3", "--per-class", "3", "--time", "1e4", "--max-seconds", "0.01"],
        "flop-equivalents", ["feature-model flow", "DOP853 steps", "--max-seconds 0.01", "exceed the budget"]),
    # solvers/ntk_general.py: check_budget (was "... and ~F flops exceed the work budget (S steps, 4e12 flops)")
    "ntk general flow": (
        ["solve", "ntk", "--counts", "6,3,2", "--time", "1e9"], "flops",
        ["feature-model flow", "limit 200000 steps", "work budget", "--time"]),
    # proofs_check/claims/ntk_general.py: discrete steps (was "~F flops exceed the work budget 4e12")
    "ntk discrete steps": (
        ["solve", "ntk", "--counts", "300,300,300", "--sgd-batch", "900", "--step-size", "0.01", "--steps", "1000000"],
        "flops", ["discrete steps", "1000000 steps", "--steps"]),
    # proofs_check/families/ntk.py: _check_table_work, the lower bound (was "need more than ~F flops in all")
    "ntk table (lower bound)": (
        ["table", "ntk", "--kernel-perturbation", "0", "--counts", _counts(60, 30)], "flops",
        ["--counts x --kernel-perturbation", "at least"]),
    # solvers/crh_budget.py (was "(about S s > limit 120 s at the calibrated rate 2e+09/s of a 2-core machine")
    "crh": (
        ["solve", "crh", "--steps", "100000000"], "flop-equivalents", ["steps=100000000", "reduce steps"]),
    # solvers/deep_ufm.py: check_budget (was "W flop > limit L" without the rate)
    "deep-ufm solve": (
        ["solve", "deep-ufm", "--layers", "3", "--activation", "relu", "--classes", "50", "--per-class", "100",
         "--width", "100", "--lambda", "0.01", "--starts", "20", "--max-evals", "100000"], "flop",
        ["21 starts x 100000 evaluations", "--starts"]),
    # proofs_check/families/deep_ufm.py: the table (was "table work estimate W flop > limit L")
    "deep-ufm table": (
        ["table", "deep-ufm", "--layers", "3", "--classes", "50", "--width", "100", "--starts", "20",
         "--max-evals", "100000"], "flop", ["table deep-ufm", "--max-evals"]),
    # proofs_check/claims/ufm_relu.py (was "> 1.2e+11 (about 2 minutes at the ~1e9 flop/s measured on a loaded ...")
    "ufm nonneg features": (
        ["solve", "ufm", "--nonneg-features", "--classes", "100", "--dim", "200", "--per-class", "1",
         "--lambda-w", "0.01", "--lambda-h", "0.01"], "flops", ["K = 100, d = 200", "--dim"]),
    # theory/scl.py: check_budget (was "(~S s at the 5e+08 flop/s measured on the 2-core machine), limit 120 s")
    "scl": (
        ["solve", "scl", "--counts", "300,300", "--tau", "0.1", "--dim", "100", "--starts", "30",
         "--method", "factored"], "flop-equivalents", ["N = 600, d = 100", "30 starts", "reduce starts"]),
    # proofs_check/families/scl.py: batching (was "about 108 s at 1000 classes; limit 2 minutes")
    "batching": (
        ["batching", "--counts", _counts(400, 2), "--batches", "0,1;2,3"], "class pairs per batch",
        ["--counts: 400 classes > 300"]),
    # the shared helper solvers.common.work_text (ufm general, classic, the ufm table): the limit now has its unit
    "ufm general": (
        ["solve", "ufm", "--loss", "ce", "--counts", ",".join(str(i) for i in range(1, 1501)), "--dim", "1500",
         "--lambda-w", "1e-3", "--lambda-h", "1e-3"], "flop-equivalents", ["instance too large", "Budgets"]),
    "ufm classic closed form": (
        ["solve", "ufm-ce", "-k", "100000", "-n", "100000", "-d", "100000", "--lambda-w", "1e-3", "--lambda-h", "1e-3"],
        "flop-equivalents", ["ufm-ce (k = 100000, n = 100000, d = 100000)"]),
    "ufm table": (
        ["table", "ufm", "--loss", "ce", "--counts", ",".join(str(i) for i in range(1, 301)),
         "--counts", ",".join(str(i) for i in range(1, 301)), "--lambda-w", "1e-3,2e-3,3e-3,4e-3", "--lambda-h",
         "1e-3", "--starts", "8"], "flop-equivalents", ["table ufm", "distinct counts"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_refusal_states_work_and_does_not_depend_on_the_rate(name, capsys, monkeypatch):
    argv, unit, needles = CASES[name]
    _refused_identically(argv, unit, needles, capsys, monkeypatch)


def test_ntk_table_total_work(capsys, monkeypatch):
    """proofs_check/families/ntk.py, the table's summed estimate (was "need ~F flops in all, above the work budget"):
    a limit between the sizes-only lower bound (3.6e6 flops for 6,3,2) and the estimate (5.8e6) reaches it."""
    from solvers import ntk_general as sg

    monkeypatch.setattr(sg, "MAX_FLOPS", 4.5e6)
    err = _refused_identically(["table", "ntk", "--kernel-perturbation", "0", "--counts", "6,3,2"], "flops",
                               ["the table's flows together exceed the work budget", "--counts"], capsys, monkeypatch)
    assert _work_and_limit(err, "flops")[1] == 4.5e6 and "at least" not in err


def test_work_limits_are_counts_the_rate_never_enters(monkeypatch):
    """Instances just inside the work limits stay accepted at any stated rate (the decision never reads it)."""
    from solvers import feature_collapse as FC
    from theory import scl as T
    from theory.feature_collapse import FCInstance

    inst = FCInstance(3, 5, 2, 4, 0.1)  # 243 classes x 7776 sentences x 9 score entries per evaluation
    per_start = FC.budget(inst, 1)["work_entries"]
    fits = int(FC.WORK_LIMIT_ENTRIES // per_start)
    scl = T.SCLInstance((300, 300), 0.1, 100)
    est = T.estimate_cost(scl, starts=1)
    scl_start = T.MIN_EVALS_PER_START * est["eval_flops"]  # the certificates' work comes once, the starts' per start
    scl_starts = int((T.WORK_LIMIT_FLOPS - (est["work_flops"] - scl_start)) // scl_start)
    assert scl_starts >= 2
    for rate in (1e6, 1e9, 1e14):
        monkeypatch.setattr(W, "measured_flops", lambda r=rate: r)
        FC.check_budget(inst, fits)  # accepted
        with pytest.raises(ValueError, match="score entries"):
            FC.check_budget(inst, fits + 1)
        T.check_budget(scl, starts=scl_starts)
        with pytest.raises(ValueError, match="flop-equivalents"):
            T.check_budget(scl, starts=scl_starts + 1)


def test_rigorous_grouped_recipe_states_work(monkeypatch):
    """solvers/rigorous/feature_collapse.py (was "about N s (limit 30 s") under --rigorous: not a refusal of the
    input (the rigorous pass says it does not apply) but the same rule: work in ball-operation units, the limit in
    the same unit, the same decision at any rate."""
    pytest.importorskip("flint")
    import solvers.rigorous as R
    import solvers.rigorous.feature_collapse as RF
    from theory import feature_collapse as T

    monkeypatch.setattr(RF, "FC_MAX_GROUPED_SECONDS", 1e-6)
    inst = T.FCInstance(3, 2, 2, 4, 0.05, K=5, latents="random", seed=1)
    msgs = []
    for rate in (1e8, 1e12):
        monkeypatch.setattr(W, "measured_flops", lambda r=rate: r)
        with pytest.raises(R.Unsupported) as exc:
            R.feature_collapse_from_instance(inst.to_dict())
        msgs.append(str(exc.value))
    work, limit = _work_and_limit(msgs[0], "ball-operation units")
    assert work > limit == pytest.approx(20.0) and _work_and_limit(msgs[1], "ball-operation units") == (work, limit)


def test_no_rate_no_problem(capsys, monkeypatch):
    """A machine whose rate cannot be measured still gets the same refusal, without the seconds-here statement."""
    def broken():
        raise RuntimeError("no clock")

    monkeypatch.setattr(W, "measured_flops", broken)
    assert _main(CASES["crh"][0]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "limit 2.4e+11 flop-equivalents, the same on every machine)" in err
    assert "s here" not in err
