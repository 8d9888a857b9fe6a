"""CLI: ncproofs solve / table feature-collapse."""

import json

import pytest

from proofs_check.cli import main

BASE = ["solve", "feature-collapse", "--concepts", "3", "--length", "2", "--dim", "4"]


def run(argv, capsys):
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_solve_json_reference_row(capsys):
    rc, out, _ = run(BASE + ["--words-per-concept", "2", "--lambda", "0.05", "--starts", "2", "--json"], capsys)
    assert rc == 0
    d = json.loads(out)
    assert d["family"] == "feature_collapse" and d["verdict"] == "VERIFIED"
    assert d["predicted"]["a"] == pytest.approx(1.614084, abs=5e-7)
    assert d["predicted"]["b"] == pytest.approx(0.931892, abs=5e-7)
    assert d["solution"]["value"] == pytest.approx(1.161977, abs=5e-7)
    assert d["certificate"]["gap"] <= 1e-6
    assert d["geometry"]["classification"] == "simplex-etf"
    assert d["geometry"]["metrics"]["rank_W"] == 2
    assert d["claims"] and all(c["verdict"] == "VERIFIED" for c in d["claims"])


def test_solve_layernorm_low_dim_inconclusive(capsys):
    rc, out, _ = run(["solve", "feature-collapse", "--concepts", "3", "--length", "2", "--dim", "2",
                      "--words-per-concept", "2", "--lambda", "0.05", "--layernorm", "--zipf", "--starts", "1",
                      "--json"], capsys)
    assert rc == 0
    d = json.loads(out)
    assert d["verdict"] == "NOT_APPLICABLE" and "d >= n_c" in d["reason"]


def test_solve_type3_reports_conjecture(capsys):
    rc, out, _ = run(BASE + ["--words-per-concept", "2", "--lambda", "0.1", "--freqs", "0.8,0.2", "--starts", "2"],
                     capsys)
    assert rc == 0
    assert "conjecture" in out and "verdict: VERIFIED" in out
    assert "proved" not in out


def test_solve_just_below_threshold_not_refuted(capsys):
    rc, out, _ = run(["solve", "feature-collapse", "--concepts", "3", "--length", "2", "--words-per-concept", "2",
                      "--dim", "5", "--lambda", "0.19243084472090224", "--json"], capsys)
    d = json.loads(out)
    assert rc == 0 and d["verdict"] == "VERIFIED", d["reason"]
    assert {c["id"] for c in d["claims"]} >= {"optimal-value", "minimiser-type-i", "threshold"}
    assert all(set(c) >= {"id", "verdict", "reason", "independent", "evidence"} for c in d["claims"])


def test_solve_duplicated_latents_not_refuted(capsys):
    rc, out, _ = run(["solve", "feature-collapse", "--concepts", "2", "--length", "1", "--words-per-concept", "2",
                      "--dim", "3", "--lambda", "0.05", "--latents", "random", "--classes", "4", "--seed", "6",
                      "--json"], capsys)
    d = json.loads(out)
    assert rc == 0 and d["verdict"] in ("VERIFIED", "NOT_APPLICABLE"), d["reason"]


def test_solve_layernorm_large_lambda_and_small_lambda(capsys):
    for extra in (["--layernorm", "--lambda", "1e4"], ["--lambda", "1e-7"]):
        rc, out, _ = run(BASE[:-1] + ["3", "--words-per-concept", "2", "--starts", "1", "--json"] + extra, capsys)
        d = json.loads(out)
        assert rc == 0 and d["verdict"] == "VERIFIED", (extra, d["reason"])


@pytest.mark.parametrize("extra,msg", [
    (["--words-per-concept", "2", "--lambda", "1e-300"], "lambda"),
    (["--words-per-concept", "2", "--lambda", "0.1", "--starts", "0"], "starts"),
    (["--words-per-concept", "2", "--lambda", "0.1", "--latents", "random", "--classes", "100000000"], "K"),
    (["--words", "7", "--lambda", "0.1"], "divisible"),
    (["--words-per-concept", "2", "--lambda", "0"], "lambda"),
    (["--words-per-concept", "2", "--lambda", "nan"], "nan"),
    (["--words-per-concept", "2", "--lambda", "0.1", "--classes", "5"], "inconsistent"),
    (["--words-per-concept", "2", "--lambda", "0.1", "--freqs", "0.5,0.6"], "sum to 1"),
    (["--words-per-concept", "2", "--lambda", "0.1", "--freqs", "1.5,-0.5"], "> 0"),
    (["--words-per-concept", "4", "--lambda", "0.1", "--length", "7"], "too large to enumerate"),
])
def test_solve_bad_input(extra, msg, capsys):
    rc, out, err = run(BASE + extra, capsys)
    assert rc == 2
    assert err.startswith("ncproofs: error:") and msg in err and err.count("\n") == 1


@pytest.mark.parametrize("fmt", ["md", "latex", "csv", "json"])
def test_table_paper_setting(fmt, capsys):
    rc, out, _ = run(["table", "feature-collapse", "--concepts", "3", "--length", "15", "--words", "1200",
                      "--classes", "1000", "--latents", "random", "--lambdas", "1e-3,0.004", "--format", fmt], capsys)
    assert rc == 0
    if fmt == "json":
        d = json.loads(out)
        row = dict(zip(d["columns"], d["rows"][0]))
        assert row["a*"] == pytest.approx(1.42214, abs=5e-6)
        assert row["lambda_crit"] == pytest.approx(0.0035320, abs=5e-8)
        assert dict(zip(d["columns"], d["rows"][1]))["geometry"] == "trivial"
    elif fmt == "latex":  # LaTeX tables carry 4 significant digits by default (--precision)
        assert "1.422" in out
    else:
        assert "1.42214" in out


def test_table_layernorm_dims(capsys):
    rc, out, _ = run(["table", "feature-collapse", "--concepts", "3", "--length", "2", "--words-per-concept", "2",
                      "--layernorm", "--lambdas", "0.05,10", "--dims", "3,4", "--format", "json"], capsys)
    d = json.loads(out)
    assert rc == 0 and len(d["rows"]) == 4
    assert all(dict(zip(d["columns"], r))["b*"] > 0 for r in d["rows"])  # no trivial phase with LayerNorm


def test_table_dims_without_layernorm_is_an_error(capsys):
    rc, _, err = run(["table", "feature-collapse", "--concepts", "3", "--length", "2", "--words-per-concept", "2",
                      "--lambdas", "0.05", "--dims", "3,4"], capsys)
    assert rc == 2 and "--dims applies only with --layernorm" in err


def test_table_type3_and_threshold(capsys):
    rc, out, _ = run(["table", "feature-collapse", "--concepts", "3", "--length", "2", "--words-per-concept", "3",
                      "--zipf", "--lambdas", "0.05,0.2", "--format", "json"], capsys)
    import json as _json
    d = _json.loads(out)
    rows = [dict(zip(d["columns"], r)) for r in d["rows"]]
    assert rc == 0 and rows[0]["geometry"] == "type-III" and rows[1]["geometry"] == "trivial"
    assert rows[0]["lambda_crit"] == pytest.approx(0.1732, abs=5e-5)
    assert rows[0]["global optimality"] == "conjecture"
