"""`ncproofs run --rigorous`: value statements of a run judged in ball arithmetic (docs/rigorous.md).

The claims are the registry's own (their predictions come from the theory modules); the false variants
are built with the claim factories and a prediction off by 1e-6 relative, which the rigorous bracket
(about 1e-15 wide) must refute."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("flint")

from proofs_check import cli  # noqa: E402
from proofs_check import rigorous as PR  # noqa: E402
from proofs_check.claims import scl as CS  # noqa: E402
from proofs_check.claims import ufm as CU  # noqa: E402
from proofs_check.core import RunContext, Verdict  # noqa: E402
from solvers import rigorous as R  # noqa: E402
from theory import scl as TS  # noqa: E402
from theory import ufm as TU  # noqa: E402
from theory._validate import InputError  # noqa: E402


def _run(tmp_path, *args):
    out = tmp_path / "r.json"
    md = tmp_path / "r.md"
    code = cli.main(["run", "--quiet", "--report", str(md), "--json", str(out), *args])
    return code, json.loads(out.read_text()), md.read_text()


def test_run_rigorous_marks_value_claims_proven(tmp_path, capsys):
    code, rep, md = _run(tmp_path, "--only", "ufm-ce-optimal-value", "--only", "ufm-mse-collapse-etf", "--rigorous")
    assert code == 0 and rep["rigorous"] is True
    assert sorted(rep["rigorous_claims"]) == ["ufm.ce.optimal-value", "ufm.mse.collapse-etf"]
    for c in rep["claims"]:
        assert c["verdict"] == "VERIFIED" and c["rigorous"] is True
        judged = [ch for ch in c["checks"] if "rigorous" in ch]
        assert judged and all(ch["rigorous"] is True for ch in judged)
        for ch in judged:
            if "rigorous_geometry" in ch["evidence"]:  # a statement about the minimiser (test_rigorous_geometry.py)
                continue
            lo, up = ch["evidence"]["rigorous_lower"], ch["evidence"]["rigorous_upper"]
            assert lo <= ch["evidence"]["predicted"] + ch["evidence"]["tolerance"]
            assert up >= ch["evidence"]["predicted"] - ch["evidence"]["tolerance"]
            assert 0 <= up - lo <= 1e-8 * abs(up)
    # statements about the minimiser are not judged by the value bracket but proven by the uniqueness recipe in balls
    geo = [ch for ch in rep["claims"][1]["checks"] if "geometry" in ch["name"] or "collapse" in ch["name"]]
    assert geo and all(ch["rigorous"] is True and ch["evidence"]["rigorous_geometry"]["proven"] is True for ch in geo)
    assert "VERIFIED*" in capsys.readouterr().out
    assert "(rigorous)" in md


def test_run_without_rigorous_carries_no_rigorous_marks(tmp_path):
    code, rep, md = _run(tmp_path, "--only", "ufm-ce-optimal-value")
    assert code == 0 and rep["rigorous"] is False and rep["rigorous_claims"] is None
    assert rep["claims"][0]["rigorous"] is False
    assert all("rigorous" not in ch for ch in rep["claims"][0]["checks"])
    assert "(rigorous)" not in md


@pytest.mark.parametrize("loss,sign", [("ce", 1), ("ce", -1), ("mse", 1)])
def test_false_optimum_is_refuted_in_balls_inside_a_run(loss, sign):
    def predict(inst):
        return TU.optimum(inst).value * (1 + sign * 1e-6)

    res = CU.value_claim(loss, predict=predict).run(RunContext(rigorous=True))
    assert res.verdict is Verdict.REFUTED and not res.rigorous
    refuted = [ch for ch in res.checks if ch.verdict is Verdict.REFUTED]
    assert refuted and all("ball arithmetic" in ch.reason for ch in refuted)


def test_false_scl_bound_is_refuted_in_balls_inside_a_run():
    def bound(counts, tau):
        return TS.theorem1_bound(counts, tau) * (1 + 1e-6)

    res = CS.make_theorem1_claim(bound=bound).run(RunContext(rigorous=True))
    assert res.verdict is Verdict.REFUTED
    assert any(ch.verdict is Verdict.REFUTED and "ball arithmetic" in ch.reason for ch in res.checks)


def test_unsupported_recipe_keeps_float_verdicts_and_is_not_rigorous(monkeypatch):
    def unsupported(out, prec):
        raise R.Unsupported("test: no recipe")

    monkeypatch.setitem(PR.RECIPES, "ufm-ce", unsupported)
    res = CU.value_claim("ce").run(RunContext(rigorous=True))
    assert res.verdict is Verdict.VERIFIED and res.rigorous is False
    judged = [ch for ch in res.checks if ch.rigorous is not None]
    assert judged and all(ch.rigorous is False for ch in judged)
    assert all("test: no recipe" in ch.evidence.get("rigorous_status", "") for ch in judged)


def test_a_bracket_that_misses_the_claim_refutes_it(monkeypatch):
    from flint import arb

    def shifted(out, prec):  # a (test) bracket strictly above every claimed optimum of the claim
        return R.RigorousBound(arb(1e3), arb(1e3 + 1e-9), "test", prec)

    monkeypatch.setitem(PR.RECIPES, "ufm-ce", shifted)
    res = CU.value_claim("ce").run(RunContext(rigorous=True))
    assert res.verdict is Verdict.REFUTED


def test_run_rigorous_without_flint_exits_2_before_work(tmp_path, monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flint" else real(name, *a))
    out = tmp_path / "r.json"
    code = cli.main(["run", "--quiet", "--only", "ufm-ce-optimal-value", "--rigorous", "--report", "", "--json",
                     str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "python-flint" in err[0]
    assert not out.exists()


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_run_context_rigorous_must_be_bool(bad):
    with pytest.raises(InputError, match="rigorous"):
        RunContext(rigorous=bad)


def test_min_below_decides_only_with_a_proof():
    # "min < reference - tol" with min in [lower, upper], judged by the statement on an exact bracket
    from proofs_check.statements import ExactBracket, MinBelow

    def below(ref, tol, lo, up):
        return MinBelow(ref, tol).judge(ExactBracket(lo, up))[0]

    assert below(2.0, 1e-9, 1.0, 1.0 + 1e-12) is Verdict.VERIFIED
    assert below(1.0, 1e-9, 1.0, 1.0 + 1e-12) is Verdict.REFUTED  # proven min >= reference
    assert below(1.0 + 1e-10, 1e-9, 1.0, 1.0 + 1e-12) is Verdict.INCONCLUSIVE  # within the tolerance
    assert below(2.0, 1e-9, 1.0, None) is Verdict.INCONCLUSIVE  # no proven feasible value
    assert below(float("nan"), 1e-9, 1.0, 1.0) is Verdict.INCONCLUSIVE


def test_minibatch_ufm_statements_are_judged_in_balls():
    """Mini-batch SCL without ReLU: "the ETF is not the minimiser" (a feasible value below the ETF's) and the
    certified optimum are decided by the rigorous bracket; a reference below the proven lower bound is refuted."""
    inst = TS.SCLInstance((3, 3, 3), 0.5, 3, False, [[0, 1, 3, 4], [1, 2, 6, 7], [4, 5, 6, 8], [0, 2, 5, 8]])
    rep = CS.check_instance(inst, starts=2)
    out = PR.apply(rep.to_dict())
    rig = out["certificate"]["rigorous"]
    assert rig.get("lower"), rig
    by = {c["id"]: c for c in out["claims"]}
    assert by["etf-not-minimiser"]["verdict"] == "VERIFIED" and by["etf-not-minimiser"]["rigorous"] is True
    assert by["certified-optimum"]["rigorous"] is True
    assert out["rigorous"] is True
    # the false statement "min < lower bound - 1e-9 relative" is refuted by the proven lower bound
    d = rep.to_dict()
    lo = rig["lower"][0]
    for c in d["claims"]:
        if c["id"] == "etf-not-minimiser":
            # the statement travels in the saved report (evidence["statement"]): change what it states
            c["evidence"] = {**c["evidence"], "statement": {**c["evidence"]["statement"], "reference": lo * (1 - 1e-9)}}
    bad = PR.apply(d)
    assert next(c for c in bad["claims"] if c["id"] == "etf-not-minimiser")["verdict"] == "REFUTED"


def test_imbalanced_full_batch_scl_ufm_has_a_rigorous_bracket():
    """Imbalanced full-batch SCL without ReLU (no closed form): the dense Gram recipe with the full batch as the
    one batch; the bracket is tight, lies below the ETF configuration's value (evaluated independently by the
    theory module's closed form) and contains the float solver's certified value within its gap."""
    inst = TS.SCLInstance((5, 3, 2), 0.5, 3, False)
    rep = CS.check_instance(inst, starts=2)
    out = PR.apply(rep.to_dict())
    rig = out["certificate"]["rigorous"]
    lo, up = rig["lower"][0], rig["upper"][1]
    assert 0 <= up - lo <= 1e-8 * abs(up)
    assert up < TS.etf_value((5, 3, 2), 0.5)
    cert = rep.to_dict()["certificate"]
    assert lo <= rep.to_dict()["solution"]["value"] and cert["lower_bound"] <= up
    by = {c["id"]: c for c in out["claims"]}
    assert by["optimum-below-etf-value"]["rigorous"] is True and by["certified-optimum"]["rigorous"] is True


def test_solve_ufm_regression_rigorous_is_registered(tmp_path, capsys):
    """`solve ufm-regression --rigorous` goes through solvers.rigorous.regression (tests/test_rigorous_regression.py
    holds the bracket's own tests); a claimed value off by 1e-6 relative is refuted in balls."""
    import numpy as np

    Y = np.random.default_rng(3).normal(size=(12, 3))
    path = tmp_path / "Y.npy"
    np.save(path, Y)
    args = ["solve", "ufm-regression", "--targets", str(path), "--dim", "3", "--lambda-w", "1e-2", "--lambda-h",
            "2e-2", "--json", "--rigorous"]
    assert cli.main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rigorous"] is True and out["certificate"]["rigorous"]["lower"]
    f = out["certificate"]["rigorous"]["upper"][1]
    assert cli.main(args + ["--claim-value", repr(f * (1 + 1e-6))]) == 1
    bad = json.loads(capsys.readouterr().out)
    val = next(c for c in bad["claims"] if c["id"] == "optimal-value")
    assert val["verdict"] == "REFUTED" and "ball arithmetic" in val["reason"]


def test_html_report_marks_rigorous_claims(tmp_path):
    html = tmp_path / "r.html"
    code = cli.main(["run", "--quiet", "--only", "ufm-ce-optimal-value", "--only", "ufm-ce-trivial-phase",
                     "--rigorous", "--report", "", "--json", "", "--html", str(html)])
    text = html.read_text()
    assert code == 0
    head_rows = [t for t in text.split("<tbody class='claim'")[1:]]
    by_id = {("ufm-ce-optimal-value" if "ufm.ce.optimal-value" in t else "trivial"): t for t in head_rows}
    assert ">rigorous</span>" in by_id["ufm-ce-optimal-value"] and "ball arithmetic" in by_id["ufm-ce-optimal-value"]
    assert ">rigorous</span>" not in by_id["trivial"]  # no value statement: nothing proven in balls


def test_solve_ufm_rigorous_beyond_200_classes(capsys):
    """The report carries every count (it used to summarise them above 200 groups, so --rigorous could not
    rebuild the instance); a long tail of 300 classes gets a tight bracket through the CLI."""
    counts = [max(1, int(30 * 0.99 ** c)) for c in range(300)]
    args = ["solve", "ufm", "--loss", "ce", "--counts", ",".join(map(str, counts)), "--dim", "300",
            "--lambda-w", "1e-3", "--lambda-h", "1e-3", "--starts", "1", "--json", "--rigorous"]
    cli.main(args)
    out = json.loads(capsys.readouterr().out)
    assert out["instance"]["counts"] == counts
    rig = out["certificate"]["rigorous"]
    assert rig["lower"] and rig["upper"], rig
    lo, up = rig["lower"][0], rig["upper"][1]
    assert 0 <= up - lo <= 1e-8 * abs(up)
    # the float certificate (an independent float64 computation) and the ball bracket overlap
    cert = out["certificate"]
    assert lo <= cert["upper"] and cert["lower_bound"] <= up
    val = next(c for c in out["claims"] if c["id"] == "optimal-value")
    assert val["verdict"] == "VERIFIED" and val["rigorous"] is True
