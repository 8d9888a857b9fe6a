"""User claims (proofs_check.user) and the pytest plugin (proofs_check.plugin).

Expected values are closed forms from spec/geometry.md (simplex ETF cosine -1/(k-1),
orthogonal frame cosine 0), not values computed by the code under test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

from proofs_check import sweep
from proofs_check.core import Check, Claim, Verdict
from proofs_check.runner import run_claims
from proofs_check.user import Bounds, ClaimFailure, Measured, ProvenPoint, UserClaim, UserContext, classes, configure, current_context
from solvers.common import Certificate, Solution
from theory.geometry import orthogonal_frame, simplex_etf

ROOT = Path(__file__).resolve().parents[1]


def etf_cosine(p) -> float:
    M = simplex_etf(p["k"], r=p.get("r", 1.0))
    return float(M[:, 0] @ M[:, 1] / (np.linalg.norm(M[:, 0]) * np.linalg.norm(M[:, 1])))


def cosine_claim(predict, **kw) -> UserClaim:
    """Factory: the claim 'the ETF pairwise cosine equals predict(p)' (so tests can feed false ones)."""
    return UserClaim(id="t.etf-cosine", statement="pairwise cosine of a simplex ETF", source="spec/geometry.md",
                     params={"k": classes(2, 9)}, predict=predict, solve=etf_cosine, **{"rtol": 1e-9, **kw})


# ---- verdicts of each kind, true and false statements ------------------------------------

@given(k=st.integers(2, 12))
def test_equals_true_verified_and_off_by_small_amount_refuted(k):
    assert cosine_claim(lambda p: -1.0 / (p["k"] - 1)).check_instance({"k": k}).verdict == Verdict.VERIFIED
    off = cosine_claim(lambda p: -1.0 / (p["k"] - 1) + 1e-6).check_instance({"k": k})
    assert off.verdict == Verdict.REFUTED
    assert off.checks[0].evidence["abs_error"] == pytest.approx(1e-6, rel=1e-3)
    assert off.checks[0].evidence["instance"] == {"k": k}


def test_equals_tolerance_is_honoured_and_must_be_stated():
    loose = cosine_claim(lambda p: -1.0 / (p["k"] - 1) + 1e-6, rtol=0.0, atol=2e-6)
    assert loose.check_instance({"k": 3}).verdict == Verdict.VERIFIED
    with pytest.raises(ValueError, match=r"state the tolerance \(rtol= and/or atol=\)"):
        UserClaim(id="x", statement="s", source="s", params={}, predict=lambda p: 0, solve=lambda p: 0)
    with pytest.raises(ValueError, match="rtol must be a finite number >= 0"):
        UserClaim(id="x", statement="s", source="s", params={}, predict=lambda p: 0, solve=lambda p: 0, rtol=-1)
    with pytest.raises(ValueError, match="provenance must be one of quoted, reconstructed, derived, got 'derivedd'"):
        UserClaim(id="x", statement="s", source="s", params={}, predict=lambda p: 0, solve=lambda p: 0, atol=0,
                  provenance="derivedd")
    with pytest.raises(ValueError, match="kind must be one of"):
        UserClaim(id="x", statement="s", source="s", params={}, predict=lambda p: 0, solve=lambda p: 0, kind="eq")


def _sq_dist(p):
    """Squared distances between the vectors of a unit-norm ETF: 2k/(k-1) (spec/geometry.md)."""
    M = simplex_etf(p["k"])
    return [float(np.sum((M[:, i] - M[:, j]) ** 2)) for i in range(p["k"]) for j in range(i + 1, p["k"])]


@pytest.mark.parametrize("k", [2, 3, 7])
def test_lower_and_upper_bounds(k):
    """Feasible values alone only refute "min >= L" and only verify "min <= U"; the other side
    needs a proven lower bound (the squared distances of an ETF are the feasible values here)."""
    def claim(kind, bound, solve=_sq_dist):
        return UserClaim(id="t.b", statement="s", source="s", params={}, predict=lambda p: bound, solve=solve,
                         kind=kind, atol=1e-9)

    exact = 2 * k / (k - 1)
    res = claim("lower_bound", exact).check_instance({"k": k})
    assert res.verdict == Verdict.INCONCLUSIVE and "no proven lower bound" in res.reason
    assert res.checks[0].evidence["feasible_points"] == k * (k - 1) // 2
    assert claim("upper_bound", exact).check_instance({"k": k}).verdict == Verdict.VERIFIED
    res = claim("lower_bound", exact + 1e-6).check_instance({"k": k})
    assert res.verdict == Verdict.REFUTED and "a feasible point attains" in res.reason
    assert claim("upper_bound", exact - 1e-6).check_instance({"k": k}).verdict == Verdict.INCONCLUSIVE
    proven = lambda p: Bounds(feasible=_sq_dist(p), proven_lower=exact, certificate="exact")  # noqa: E731
    assert claim("lower_bound", exact, proven).check_instance({"k": k}).verdict == Verdict.VERIFIED
    res = claim("upper_bound", exact - 1e-6, proven).check_instance({"k": k})
    assert res.verdict == Verdict.REFUTED and "proven lower bound" in res.reason


def test_optimum_kind_needs_a_certificate_not_a_convergence_flag():
    def claim(pred, sol):
        return UserClaim(id="t.opt", statement="s", source="s", params={}, predict=lambda p: pred,
                         solve=lambda p: sol, kind="optimum", rtol=1e-8)

    cert = Certificate(lower_bound=1.0 - 1e-10, upper=1.0, method="kkt-dual")
    good = Solution(value=1.0, method="lbfgs", converged=True, seconds=0.0, certificate=cert)
    assert claim(1.0, good).check_instance({}).verdict == Verdict.VERIFIED
    assert claim(1.0 + 1e-5, good).check_instance({}).verdict == Verdict.REFUTED  # feasible point below it
    nocert = Solution(value=1.0, method="lbfgs", converged=True, seconds=0.0)
    res = claim(1.0, nocert).check_instance({})
    assert res.verdict == Verdict.INCONCLUSIVE and "no certificate" in res.reason
    # a feasible value is an upper bound whether or not the solver reported convergence: the
    # certificate decides (core.optimum_matches); the flag is kept in the evidence
    notconv = Solution(value=1.0, method="lbfgs", converged=False, seconds=0.0, certificate=cert)
    res = claim(1.0, notconv).check_instance({})
    assert res.verdict == Verdict.VERIFIED and res.checks[0].evidence["converged"] is False
    d = {"value": 1.0, "lower_bound": 0.5, "converged": True}
    res = claim(1.0, d).check_instance({})
    assert res.verdict == Verdict.INCONCLUSIVE and "certificate gap" in res.reason


@pytest.mark.parametrize("k", [3, 5])
def test_geometry_kind(k):
    def claim(expected, frame, proven=True):
        def solve(p):
            gram = frame(p["k"]).T @ frame(p["k"])
            return ProvenPoint(gram, how="exact construction", unique=True) if proven else gram
        return UserClaim(id="t.geo", statement="s", source="s", params={}, predict=lambda p: expected,
                         solve=solve, kind="geometry")

    assert claim("simplex-etf", simplex_etf).check_instance({"k": k}).verdict == Verdict.VERIFIED
    assert claim("orthogonal-frame", orthogonal_frame).check_instance({"k": k}).verdict == Verdict.VERIFIED
    wrong = claim("simplex-etf", orthogonal_frame).check_instance({"k": k})
    assert wrong.verdict == Verdict.REFUTED and "geometry is orthogonal-frame, expected simplex-etf" in wrong.reason
    # a bare Gram is a point not proven to be the minimiser: never a verdict about the minimiser
    bare = claim("simplex-etf", orthogonal_frame, proven=False).check_instance({"k": k})
    assert bare.verdict == Verdict.INCONCLUSIVE and "not proven to be the minimiser" in bare.reason
    assert bare.checks[0].evidence["verdict_at_solver_point"] == "REFUTED"


def test_requires_crash_custom_and_measured_evidence():
    c = cosine_claim(lambda p: -1.0 / (p["k"] - 1), requires=lambda p: None if p["k"] >= 3 else "needs k >= 3")
    res = c.check_instance({"k": 2})
    assert res.verdict == Verdict.NOT_APPLICABLE and "hypothesis fails: needs k >= 3" in res.reason
    boom = UserClaim(id="t.boom", statement="s", source="s", params={}, predict=lambda p: 0,
                     solve=lambda p: 1 / 0, atol=0)
    res = boom.check_instance({})
    assert res.verdict == Verdict.ERROR and "ZeroDivisionError" in res.reason
    custom = UserClaim(id="t.custom", statement="s", source="s", params={}, kind="custom",
                       solve=lambda p: [Check("a", Verdict.VERIFIED, "ok"), Check("b", Verdict.REFUTED, "bad")])
    assert custom.check_instance({}).verdict == Verdict.REFUTED
    meas = UserClaim(id="t.m", statement="s", source="s", params={}, predict=lambda p: 2.0, atol=0,
                     solve=lambda p: Measured(2.0, {"iterations": 17}))
    res = meas.check_instance({})
    assert res.verdict == Verdict.VERIFIED and res.checks[0].evidence["iterations"] == 17


def test_solve_receives_the_context():
    seen = []
    c = UserClaim(id="t.ctx", statement="s", source="s", params={}, predict=lambda p: 0.0, atol=0,
                  solve=lambda p, ctx: seen.append(ctx) or 0.0)
    c.check_instance({}, UserContext(solver="cvxpy", max_k=4, seed=3))
    assert seen[0].solver == "cvxpy" and seen[0].max_k == 4 and seen[0].seed == 3


def test_as_claim_runs_with_the_core_runner():
    true = cosine_claim(lambda p: -1.0 / (p["k"] - 1)).as_claim([{"k": 2}, {"k": 5}])
    false = cosine_claim(lambda p: -1.0 / p["k"]).as_claim([{"k": 2}, {"k": 5}])
    assert isinstance(true, Claim) and true.provenance.value == "derived"
    run = run_claims([true, false], progress=False)
    assert [r.verdict for r in run.results] == [Verdict.VERIFIED, Verdict.REFUTED]
    assert [c.name for c in run.results[1].checks] == ["prediction[k=2]", "prediction[k=5]"]
    assert run.exit_status == 1


def test_user_claim_as_a_sweepable(tmp_path):
    false = cosine_claim(lambda p: -1.0 / (p["k"] - 1) if p["k"] < 4 else -1.0 / p["k"])
    sweep.register_sweepable("t.user-cosine", false.sweepable(), parameters=("k",), replace=True)
    spec = sweep.parse_config({"sweep": {"family": "t.user-cosine"}, "parameters": {"k": [2, 3, 4, 5]}})
    out = sweep.run_sweep(spec, str(tmp_path / "u.sqlite"), workers=1, progress=False)
    assert out.computed == 4
    store = sweep.Store(str(tmp_path / "u.sqlite"))
    rows = {r["params"]["k"]: r for r in store.rows()}
    store.close()
    assert {k: r["verdict"] for k, r in rows.items()} == {2: "VERIFIED", 3: "VERIFIED", 4: "REFUTED", 5: "REFUTED"}
    assert rows[4]["score"] == pytest.approx(1 / 3 - 1 / 4, rel=1e-9)  # |-1/3 - (-1/4)|


def test_assert_instance_message_has_instance_reason_and_evidence():
    c = cosine_claim(lambda p: -1.0 / p["k"])
    with pytest.raises(ClaimFailure) as ei:
        c.assert_instance({"k": 3})
    msg = str(ei.value)
    assert "'t.etf-cosine' REFUTED at instance (k=3)" in msg
    assert "source: spec/geometry.md (derived)" in msg
    assert "predicted=-0.3333333333" in msg and "measured=-0.5" in msg and "abs_error=" in msg


def test_configure_and_classes_cap():
    old = current_context()
    try:
        configure(max_k=3)
        assert current_context().max_k == 3

        seen = set()

        @given(k=classes(2, 9))
        def draw(k):
            seen.add(k)

        draw()
        assert seen <= {2, 3}
        with pytest.raises(ValueError, match="max_k must be an integer >= 2, got 1"):
            configure(max_k=1)
        configure(max_k=None)
        assert current_context().max_k is None and current_context().solver == old.solver
    finally:
        configure(max_k=old.max_k)


# ---- the plugin, through pytest in a subprocess (as a user would run it) -------------------

USER_TESTS = '''
import numpy as np
from proofs_check.user import user_claim, classes
from proofs_check.core import Claim, Check, Verdict
from theory.geometry import simplex_etf


def etf_cos(p):
    M = simplex_etf(p["k"])
    return float(M[:, 0] @ M[:, 1] / (np.linalg.norm(M[:, 0]) * np.linalg.norm(M[:, 1])))


@user_claim(id="mine.etf-cosine", statement="simplex ETF cosine is -1/(k-1)", source="my notes, eq. (3)",
            params={"k": classes(2, 9)}, predict=lambda p: -1.0 / (p["k"] - 1), rtol=1e-9)
def test_true_claim(p):
    return etf_cos(p)


@user_claim(id="mine.wrong-from-4", statement="cosine is -1/(k-1) for k < 4 and -1/k from k = 4 (false)",
            source="a wrong conjecture", params={"k": classes(2, 9)},
            predict=lambda p: -1.0 / (p["k"] - 1) if p["k"] < 4 else -1.0 / p["k"], rtol=1e-9)
def test_false_claim(p):
    return etf_cos(p)


def test_options_reach_fixtures(ncproofs_solver, ncproofs_max_k, ncproofs_context):
    assert ncproofs_solver == "my-solver"
    assert ncproofs_max_k == ncproofs_context.max_k


def test_fixture_check_of_a_core_claim(ncproofs_check):
    bad = Claim("mine.core", "user", "one is two", "nowhere", "derived",
                lambda ctx: [Check("compare", Verdict.REFUTED, "1 != 2", {"lhs": 1, "rhs": 2})])
    ncproofs_check(bad)


def test_gpu_marked():
    pass
test_gpu_marked = __import__("pytest").mark.gpu(test_gpu_marked)


def test_slow_marked():
    pass
test_slow_marked = __import__("pytest").mark.slow(test_slow_marked)
'''


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    f = tmp_path / "test_mine.py"
    f.write_text(USER_TESTS)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("NCPROOFS_MAX_K", None)
    env["NCPROOFS_HYPOTHESIS"] = "ignored-here"
    cmd = [sys.executable, "-m", "pytest", "-p", "proofs_check.plugin", "-p", "no:cacheprovider", "-rfs",
           "--rootdir", str(tmp_path), "-o", "addopts=", "--ncproofs-solver", "my-solver", str(f), *args]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_plugin_false_claim_fails_with_shrunk_counterexample_and_evidence(tmp_path):
    res = _pytest(tmp_path)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "FAILED test_mine.py::test_false_claim" in out
    assert "FAILED test_mine.py::test_fixture_check_of_a_core_claim" in out
    assert "2 failed, 2 passed, 2 skipped" in out
    # hypothesis shrinks to the minimal failing instance, k = 4, and the message carries the evidence
    # hypothesis' wording changed across versions ("Falsifying example:" -> "Failing test case:")
    assert ("Falsifying example: test_false_claim(" in out or "Failing test case: test_false_claim(" in out), out
    assert "p={'k': 4}" in out
    assert "ncproofs claim 'mine.wrong-from-4' REFUTED at instance (k=4)" in out
    assert "predicted=-0.25" in out and "measured=-0.3333333333" in out and "abs_error=0.08333333333" in out
    assert "source: a wrong conjecture (derived)" in out
    # the core-claim fixture reports its evidence too
    assert "ncproofs claim 'mine.core' REFUTED" in out and "lhs=1, rhs=2" in out
    # markers: gpu skipped with the reason (no torch/CUDA here), slow skipped without the flag
    assert "gpu: " in out and "slow: run with --runslow or --ncproofs-slow" in out
    # the terminal summary lists the user claims with their verdict counts
    assert "ncproofs user claims" in out and "mine.wrong-from-4:" in out and "REFUTED" in out


def test_plugin_max_k_caps_instances_and_slow_flag_runs_slow_tests(tmp_path):
    # with k <= 3 the false claim (wrong only from k = 4 on) is never exercised: the cap is applied
    res = _pytest(tmp_path, "--ncproofs-max-k", "3", "--ncproofs-slow", "-k", "claim or slow or options")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "1 failed, 4 passed" in out, out  # the slow test ran; the false claim passed under the cap
    assert "FAILED test_mine.py::test_fixture_check_of_a_core_claim" in out  # the only failure
    res = _pytest(tmp_path, "--ncproofs-max-k", "1")
    assert res.returncode != 0 and "--ncproofs-max-k must be >= 2, got 1" in res.stdout + res.stderr


def test_plugin_claim_tests_parametrizes_registered_claims(tmp_path):
    (tmp_path / "test_builtin.py").write_text(textwrap.dedent('''
        from proofs_check import registry
        from proofs_check.core import Claim, Check, Verdict

        def ok(ctx):
            yield Check("c", Verdict.VERIFIED, "holds")

        def bad(ctx):
            yield Check("c", Verdict.REFUTED, "witness", {"gap": 0.5})

        def unsure(ctx):
            yield Check("c", Verdict.INCONCLUSIVE, "solver did not converge")

        registry.all_claims = lambda: [Claim("fam.ok", "fam", "s", "src", "quoted", ok),
                                       Claim("fam.bad", "fam", "s", "src", "reconstructed", bad),
                                       Claim("fam.unsure", "fam", "s", "src", "derived", unsure)]
        from proofs_check.plugin import claim_tests
        test_claim = claim_tests()
        '''))
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, "-m", "pytest", "-p", "proofs_check.plugin", "-p", "no:cacheprovider",
                          "-o", "addopts=", "--rootdir", str(tmp_path), "-v", "test_builtin.py"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    out = res.stdout
    assert "test_claim[fam.ok] PASSED" in out and "test_claim[fam.unsure] PASSED" in out
    assert "test_claim[fam.bad] FAILED" in out and "'fam.bad' REFUTED" in out and "gap=0.5" in out
    assert "InconclusiveWarning: fam.unsure: INCONCLUSIVE: c: solver did not converge" in out  # a warning, never a silent pass
