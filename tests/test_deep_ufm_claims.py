"""Deep UFM claims: every factory with a false variant comes out REFUTED; the shipped claims are never REFUTED;
the CLI (solve/table deep-ufm) with bad inputs exits 2; the LaTeX table compiles."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from proofs_check.claims import deep_ufm as C
from proofs_check.cli import main
from proofs_check.core import RunContext, Verdict
from solvers import deep_ufm as S
from theory import deep_ufm as T

pytest.importorskip("flint")
CTX = RunContext()


def _verdicts(claim):
    res = claim.run(CTX)
    return res, {c.name: c.verdict for c in res.checks}


def test_shipped_claims_are_not_refuted():
    for claim in C.CLAIMS:
        res = claim.run(CTX)
        assert res.verdict not in (Verdict.REFUTED, Verdict.ERROR), (claim.id, res.reason)
    ids = {c.id for c in C.CLAIMS}
    assert ids == {"deep_ufm.linear-mse.optimum", "deep_ufm.dnc.suboptimal", "deep_ufm.dnc.optimal-shallow",
                   "deep_ufm.ce.low-rank-bias"}


def _one(inst):
    return lambda ctx: [inst]


def test_linear_optimum_true_and_false_value():
    inst = T.DeepUFMInstance(3, "linear", "mse", (9, 4, 1, 1), 3, (0.01,))
    ok = C.make_linear_optimum_claim(instances=_one(inst)).run(CTX)
    assert ok.verdict is Verdict.VERIFIED, ok.reason
    for factor in (1 + 1e-6, 1 - 1e-6):
        bad = C.make_linear_optimum_claim(predict_value=lambda i, f=factor: T.linear_mse_optimum(i).value * f,
                                          instances=_one(inst)).run(CTX)
        assert bad.verdict is Verdict.REFUTED, bad.reason


def test_linear_optimum_wrong_rank_refuted():
    # balanced, L = 3: rank K; claiming the DNC-free rank K - 1 (or the width's) is refuted by the proof
    inst = T.balanced(3, "linear", "mse", 3, 2, 3, 0.01)
    bad = C.make_linear_optimum_claim(predict_rank=lambda i: 2, instances=_one(inst)).run(CTX)
    assert bad.verdict is Verdict.REFUTED
    assert any("rank" in c.name and c.verdict is Verdict.REFUTED for c in bad.checks)
    # above the threshold the optimum is the zero point: claiming rank K is refuted
    inst0 = T.balanced(3, "linear", "mse", 3, 2, 3, 0.5)
    assert T.linear_mse_optimum(inst0).rank == 0
    bad0 = C.make_linear_optimum_claim(predict_rank=lambda i: i.K, instances=_one(inst0)).run(CTX)
    assert bad0.verdict is Verdict.REFUTED


def test_dnc_suboptimal_and_the_false_dnc_optimal():
    inst = T.balanced(5, "relu", "mse", 3, 1, 6, 0.003)  # stored witness
    ok = C.make_dnc_suboptimal_claim(instances=_one(inst)).run(CTX)
    assert ok.verdict is Verdict.VERIFIED, ok.reason
    bad = C.make_dnc_suboptimal_claim(predict_optimal=lambda i: True, instances=_one(inst)).run(CTX)
    assert bad.verdict is Verdict.REFUTED
    ch = [c for c in bad.checks if c.verdict is Verdict.REFUTED][0]
    assert ch.evidence["witness_gap"] > 0 and "exact" in ch.reason


def test_wrong_dnc_value_refuted():
    inst = T.balanced(4, "relu", "mse", 5, 1, 8, 0.004)
    bad = C.make_dnc_suboptimal_claim(predict_dnc_value=lambda i: T.dnc_value(i) * (1 + 1e-6),
                                      instances=_one(inst)).run(CTX)
    assert bad.verdict is Verdict.REFUTED
    lin = T.balanced(2, "linear", "mse", 3, 2, 3, 0.01)
    bad2 = C.make_dnc_shallow_claim(predict_dnc_value=lambda i: T.dnc_value(i) * 0.999, instances=_one(lin)).run(CTX)
    assert bad2.verdict is Verdict.REFUTED


def test_shallow_linear_certified_and_false_variant():
    lin = T.balanced(4, "linear", "mse", 2, 2, 2, 0.01)
    ok = C.make_dnc_shallow_claim(instances=_one(lin)).run(CTX)
    assert ok.verdict is Verdict.VERIFIED, ok.reason  # the proven lower bound matches the DNC value
    # "DNC is not optimal" for the linear model is refuted by the proof (the lower bound equals the DNC value)
    bad = C.make_dnc_shallow_claim(predict_optimal=lambda i: False, instances=_one(lin)).run(CTX)
    assert bad.verdict is Verdict.REFUTED
    # where the zero point beats the DNC point (large lambda), "DNC optimal" is refuted by the zero point
    z = T.balanced(3, "linear", "mse", 3, 2, 3, 0.1)
    assert T.dnc_value(z) is not None and T.linear_mse_optimum(z).rank == 0
    badz = C.make_dnc_shallow_claim(predict_optimal=lambda i: True, instances=_one(z)).run(CTX)
    assert badz.verdict is Verdict.REFUTED


def test_shallow_relu_is_inconclusive_with_the_proven_gap_where_the_bound_does_not_close():
    inst = T.balanced(2, "relu", "mse", 3, 1, 3, 0.01)
    res = C.make_dnc_shallow_claim(instances=_one(inst)).run(CTX)
    assert res.verdict is Verdict.INCONCLUSIVE and "proven lower bound" in res.reason and "below the best DNC" in res.reason
    ch = {c.name.split(" (")[0]: c for c in res.checks}
    assert ch["dnc-optimal"].evidence["relative_gap"] > 0.1  # the chain bound divides C by K^{(L-1)/(L+1)}
    assert ch["relu-lower-bound"].verdict is Verdict.VERIFIED
    assert ch["relu-search-above-bound"].verdict is Verdict.VERIFIED


def test_two_samples_one_relu_dnc_is_verified_and_the_false_variants_refuted():
    inst = T.balanced(2, "relu", "mse", 2, 1, 3, 0.01)  # N = 2, L = 2: the two-column lemma
    ok = C.make_dnc_shallow_claim(instances=_one(inst)).run(CTX)
    assert ok.verdict is Verdict.VERIFIED, ok.reason
    # "DNC is not optimal" is refuted by the proven lower bound (it reaches the DNC value)
    bad = C.make_dnc_shallow_claim(predict_optimal=lambda i: False, instances=_one(inst)).run(CTX)
    assert bad.verdict is Verdict.REFUTED and "proven lower bound" in bad.reason
    # a wrong optimal (DNC) value is refuted by the enclosure
    bad2 = C.make_dnc_shallow_claim(predict_dnc_value=lambda i: T.dnc_value(i) * 0.99, instances=_one(inst)).run(CTX)
    assert bad2.verdict is Verdict.REFUTED
    # where the zero point beats the DNC point, "DNC optimal" is refuted by the zero point (exact value 1/2)
    z = T.balanced(2, "relu", "mse", 2, 1, 2, 0.2)
    badz = C.make_dnc_shallow_claim(instances=_one(z)).run(CTX)
    assert badz.verdict is Verdict.REFUTED and "exact" in badz.reason


def test_false_relu_lower_bound_refuted_by_a_feasible_point():
    inst = T.balanced(4, "relu", "mse", 2, 1, 2, 0.01)
    bad = C.make_dnc_shallow_claim(predict_relu_bound=lambda i: 1.01 * T.dnc_value(i), instances=_one(inst)).run(CTX)
    assert bad.verdict is Verdict.REFUTED
    ch = [c for c in bad.checks if c.name.startswith("relu-lower-bound")][0]
    assert ch.verdict is Verdict.REFUTED and ch.evidence["feasible_value"] < 1.01 * T.dnc_value(inst)


def test_ce_claim_and_false_variants():
    insts = lambda ctx: [T.balanced(L, "linear", "ce", 5, 1, 5, 0.01) for L in (1, 3)]
    ok = C.make_ce_claim(instances=insts).run(CTX)
    assert ok.verdict is Verdict.VERIFIED, ok.reason
    assert "measure" in ok.checks[0].reason
    too_small = C.make_ce_claim(bound=lambda i, tau: 1, instances=insts).run(CTX)
    assert too_small.verdict is Verdict.REFUTED
    persists = C.make_ce_claim(predict_trend="constant", final_below_dnc=False, instances=insts).run(CTX)
    assert persists.verdict is Verdict.REFUTED


def _cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("argv,word", [
    (["--layers", "0", "--classes", "3", "--per-class", "1", "--width", "3", "--lambda", "0.1"], "layers"),
    (["--layers", "2", "--classes", "3", "--per-class", "1", "--width", "3", "--lambda", "0.1,0.2"], "lambda"),
    (["--layers", "2", "--counts", "3,1", "--classes", "2", "--width", "3", "--lambda", "0.1"], "--counts"),
    (["--layers", "2", "--classes", "1", "--per-class", "1", "--width", "3", "--lambda", "0.1"], "--classes"),
    (["--layers", "2", "--classes", "3", "--width", "3", "--lambda", "0.1"], "--per-class"),
    (["--layers", "2", "--classes", "3", "--per-class", "1", "--width", "0", "--lambda", "0.1"], "width"),
    (["--layers", "2", "--classes", "3", "--per-class", "1", "--width", "3", "--lambda", "0"], "lambda"),
    (["--layers", "2", "--classes", "3", "--per-class", "1", "--width", "3", "--lambda", "0.1", "--starts", "0"],
     "--starts"),
    (["--layers", "4", "--activation", "relu", "--classes", "100", "--per-class", "1", "--width", "1024",
      "--lambda", "0.001", "--starts", "50"], "work budget")])
def test_solve_bad_input_exit_2(capsys, argv, word):
    code, out, err = _cli(capsys, "solve", "deep-ufm", *argv)
    assert code == 2, (out, err)
    assert word in err and len(err.strip().splitlines()) == 1


def test_solve_json_linear_and_relu(capsys):
    code, out, _ = _cli(capsys, "solve", "deep-ufm", "--layers", "3", "--counts", "9,4,1,1", "--width", "3",
                        "--lambda", "0.01", "--starts", "1", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["verdict"] == "VERIFIED" and d["certificate"]["rank"] == 3
    code, out, _ = _cli(capsys, "solve", "deep-ufm", "--layers", "5", "--activation", "relu", "--classes", "3",
                        "--per-class", "1", "--width", "6", "--lambda", "0.003", "--starts", "1", "--max-evals",
                        "200", "--json")
    d = json.loads(out)
    assert {c["id"]: c["verdict"] for c in d["claims"]}["dnc-optimal"] == "VERIFIED"
    assert d["solution"]["exact"] and d["solution"]["value"] < d["dnc"]["enclosure"][0]


def test_table_bad_input(capsys):
    code, _, err = _cli(capsys, "table", "deep-ufm", "--classes", "1")
    assert code == 2 and "--classes" in err
    with pytest.raises(SystemExit) as e:  # argparse refuses an empty list itself (exit 2)
        main(["table", "deep-ufm", "--layers", ""])
    assert e.value.code == 2


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed")
def test_table_latex_compiles(tmp_path, capsys):
    code, out, _ = _cli(capsys, "table", "deep-ufm", "--layers", "1,2", "--classes", "2,3", "--activation", "linear",
                        "--format", "latex")
    assert code == 0 and "\\begin{tabular}" in out or "\\begin{table}" in out
    doc = ("\\documentclass{article}\\usepackage{booktabs,amsmath,amssymb,siunitx,graphicx,array,longtable}"
           "\\begin{document}\n" + out + "\n\\end{document}\n")
    (tmp_path / "t.tex").write_text(doc)
    proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:]


def test_no_witness_found_is_inconclusive_and_outside_hypothesis_not_applicable():
    inst = T.balanced(4, "relu", "mse", 3, 1, 3, 0.004)  # no stored witness; a 1-start search finds none here
    res = C.make_dnc_suboptimal_claim(instances=_one(inst)).run(CTX)
    assert res.verdict is Verdict.INCONCLUSIVE and "no point below" in res.reason
    # "DNC optimal" there is not verified either (no lower bound for ReLU)
    res2 = C.make_dnc_suboptimal_claim(predict_optimal=lambda i: True, instances=_one(inst)).run(CTX)
    assert res2.verdict is Verdict.INCONCLUSIVE
    na = C.make_dnc_suboptimal_claim(instances=_one(T.balanced(2, "relu", "mse", 3, 1, 3, 0.01))).run(CTX)
    assert na.verdict is Verdict.NOT_APPLICABLE
    imb = C.make_dnc_shallow_claim(instances=_one(T.DeepUFMInstance(2, "linear", "mse", (3, 1), 2, (0.01,)))).run(CTX)
    assert imb.verdict is Verdict.NOT_APPLICABLE  # DNC is defined for balanced classes


def test_two_classes_at_depth_four_dnc_is_verified_and_the_false_variants_refuted():
    inst = T.balanced(4, "relu", "mse", 2, 1, 2, 0.01)  # the chain bound alone left a 34 % gap here
    ok = C.make_dnc_shallow_claim(instances=_one(inst)).run(CTX)
    assert ok.verdict is Verdict.VERIFIED, ok.reason
    ch = {c.name.split(" (")[0]: c for c in ok.checks}
    assert ch["relu-two-class-bound"].verdict is Verdict.VERIFIED
    assert ch["relu-search-above-bound"].verdict is Verdict.VERIFIED
    # "DNC is not optimal" is refuted by the proven lower bound (it reaches the DNC value)
    bad = C.make_dnc_shallow_claim(predict_optimal=lambda i: False, instances=_one(inst)).run(CTX)
    assert bad.verdict is Verdict.REFUTED and "proven lower bound" in bad.reason
    # a two-class bound above the optimum is refuted by a feasible point (the DNC point or the best point found)
    hi = C.make_dnc_shallow_claim(predict_relu_two_class=lambda i: 1.01 * T.dnc_value(i), instances=_one(inst)).run(CTX)
    assert hi.verdict is Verdict.REFUTED
    c = [c for c in hi.checks if c.name.startswith("relu-two-class-bound")][0]
    assert c.verdict is Verdict.REFUTED and c.evidence["feasible_value"] < 1.01 * T.dnc_value(inst)
    # a wrong optimal (DNC) value, 0.1 % low, is refuted by the enclosure
    low = C.make_dnc_shallow_claim(predict_dnc_value=lambda i: T.dnc_value(i) * 0.999, instances=_one(inst)).run(CTX)
    assert low.verdict is Verdict.REFUTED
    # large lambda: the zero point (value 1/2) beats the best DNC value 0.565, "DNC optimal" is refuted exactly
    z = T.balanced(4, "relu", "mse", 2, 1, 2, 0.12)
    assert T.dnc_value(z) > 0.5
    badz = C.make_dnc_shallow_claim(instances=_one(z)).run(CTX)
    assert badz.verdict is Verdict.REFUTED and "exact" in badz.reason


def test_two_classes_two_samples_per_class_deep_relu_is_verified():
    inst = T.balanced(3, "relu", "mse", 2, 2, 3, 0.01)  # N = 4 columns: the class-collapse step is needed
    ok = C.make_dnc_shallow_claim(instances=_one(inst)).run(CTX)
    assert ok.verdict is Verdict.VERIFIED, ok.reason


def test_two_classes_verified_even_when_the_search_stops_above_the_dnc_value():
    # the DNC point (nonnegative, ReLU inactive) is itself feasible: an unconverged search (1 start, 800
    # evaluations at L = 5) must not leave "DNC is optimal" INCONCLUSIVE once the proven bound reaches the DNC value
    inst = T.balanced(5, "relu", "mse", 2, 2, 4, 0.005)
    res = C.make_dnc_shallow_claim(instances=_one(inst)).run(CTX)
    assert res.verdict is Verdict.VERIFIED, res.reason
    c = [c for c in res.checks if c.name.startswith("dnc-optimal")][0]
    assert c.evidence["attained"] <= S.certify_dnc(inst)[1]
