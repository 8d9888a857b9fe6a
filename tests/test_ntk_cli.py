"""``ncproofs solve ntk`` and ``ncproofs table ntk``: schema, numbers against the spec's reference
table, bad input (exit 2, one line naming the parameter)."""

import csv
import io
import json

import pytest

from proofs_check.cli import main


def _solve_json(capsys, *args):
    rc = main(["solve", "ntk", *args, "--json"])
    out = json.loads(capsys.readouterr().out)
    return rc, out


def test_solve_reference_instance_json(capsys):
    rc, out = _solve_json(capsys, "--classes", "3", "--per-class", "4", "--kappa", "1,0.6,0.2", "--gamma", "1,0.6,0.2",
                          "--feature-dim", "4", "--init-scale", "1e-6", "--time", "30", "--seed", "0")
    assert rc == 0
    assert out["family"] == "ntk" and out["verdict"] == "VERIFIED"
    assert set(out) >= {"instance", "predicted", "solution", "certificate", "geometry", "claims", "spectrum", "rates",
                        "invariant", "limits", "reason", "diagnostics", "routes", "budget"}
    assert set(out["solution"]) >= {"value", "method", "converged", "seconds"}
    assert out["predicted"]["eigenvalues"] == pytest.approx([0.4, 2.0, 4.4])
    assert out["predicted"]["multiplicities"] == [9, 2, 1]
    # spec reference row: 0.4714, 2.8284, 2.8284, 0.5657
    lim = out["limits"]
    assert all(x == pytest.approx(0.4714, abs=5e-5) for x in lim["mean_sq_norm"]["measured"])
    assert lim["W_fro_sq"]["measured"] == pytest.approx(2.8284, abs=5e-5)
    assert lim["escape_rate"]["measured"] == pytest.approx(2.8284, abs=5e-4)
    assert lim["late_within_rate"]["measured"] == pytest.approx(0.5657, abs=5e-5)
    lin = out["rates"]["linear_residual"]
    assert [lin[k]["fitted"] for k in ("global", "class", "within")] == pytest.approx([4.4, 2.0, 0.4], rel=1e-6)
    assert out["invariant"]["max_drift"] < 1e-9
    assert out["geometry"]["classification"] == "simplex-etf"
    assert set(out["geometry"]["metrics"]) >= {"NC1", "NC2_etf", "NC3", "NC4"}
    ids = [c["id"] for c in out["claims"]]
    assert ids == ["ntk-spectrum", "ntk-rates", "ntk-invariant", "ntk-scatter", "ntk-nc1-bound", "ntk-small-init-limit"]
    assert all(set(c) == {"id", "verdict", "reason", "independent", "evidence"} for c in out["claims"])
    assert all(c["verdict"] == "VERIFIED" and c["independent"] for c in out["claims"])


def test_solve_text_output_and_lazy(capsys):
    assert main(["solve", "ntk", "--init", "lazy", "--init-scale", "10"]) == 0  # T: 12 e-folds of the slowest part
    text = capsys.readouterr().out
    assert "[VERIFIED] ntk-lazy-no-collapse" in text and "lazy_feature_model.within" in text
    assert "small-init-limit" not in text  # not a statement about this initialisation


def test_lazy_with_small_scale_is_not_applicable(capsys):
    rc, out = _solve_json(capsys, "--init", "lazy", "--init-scale", "1", "--time", "5")
    lazy = next(c for c in out["claims"] if c["id"] == "ntk-lazy-no-collapse")
    assert lazy["verdict"] == "NOT_APPLICABLE" and "not large" in lazy["reason"] and "hypothesis fails" in lazy["reason"]
    assert rc == 0 and out["verdict"] == "VERIFIED"  # every statement that applies holds


def test_solve_e_zero_c3(capsys):
    rc, out = _solve_json(capsys, "--init", "e-zero", "--init-scale", "1", "--mean-weight", "0.8", "--time", "60",
                          "--seed", "3")
    assert rc == 0
    ez = next(c for c in out["claims"] if c["id"] == "ntk-e-zero")
    assert ez["verdict"] == "VERIFIED", ez["reason"]
    assert out["geometry"]["classification"] == "other"


def test_large_init_random_small_init_limit_not_applicable(capsys):
    """--init-scale 0.3: the small-init limit's hypothesis (eps -> 0) fails, every other statement
    holds: that statement is NOT_APPLICABLE (hypothesis named) and the overall verdict VERIFIED."""
    rc, out = _solve_json(capsys, "--init-scale", "0.3")
    assert rc == 0 and out["verdict"] == "VERIFIED", out["reason"]
    small = next(c for c in out["claims"] if c["id"] == "ntk-small-init-limit")
    assert small["verdict"] == "NOT_APPLICABLE"
    assert "hypothesis fails" in small["reason"] and "eps -> 0" in small["reason"]
    assert "1 not applicable" in out["reason"]
    assert all(c["verdict"] == "VERIFIED" for c in out["claims"] if c["id"] != "ntk-small-init-limit")
    rc, out = _solve_json(capsys, "--init-scale", "0.5", "--time", "5")
    assert out["rates"]["escape"]["fitted"] is None  # no escape window: null, never NaN


@pytest.mark.parametrize("args,needle", [
    (["--kappa", "1,1,0.2"], "kappa: block kernel is not positive definite: lambda_0 = kappa_d - kappa_c = 0 <= 0"),
    (["--kappa", "1,0.2,0.5"], "lambda_c"),
    (["--kappa", "1,0.6,-0.4"], "lambda_g"),
    (["--gamma", "1,1.5,0"], "gamma: block kernel is not positive definite: lambda_0"),
    (["--per-class", "1"], "m (samples per class) must be >= 2"),
    (["--classes", "1"], "C (classes) must be >= 2"),
    (["--time", "-1"], "time must be >= 0"),
    (["--time", "0"], "time must be > 0"),
    (["--init-scale", "-1"], "init_scale must be > 0"),
    (["--kappa", "1,0.5"], "kappa must have exactly 3"),
    (["--init", "lazy", "--feature-dim", "4"], "n (feature dimension) must be >= N + C"),
])
def test_solve_bad_input(args, needle, capsys):
    assert main(["solve", "ntk", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ncproofs: error: ") and needle in err
    assert err.count("\n") == 1  # one line, no traceback


def test_table_default_reproduces_reference_rows(capsys):
    assert main(["table", "ntk", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    ref = [("3", "4", 0.4, 2.0, 4.4, 0.4714, 2.8284, 2.8284, 0.5657),
           ("4", "3", 0.5, 2.0, 2.0, 0.6124, 3.6742, 2.4495, 0.6124)]
    assert len(rows) == 2
    for row, (C, m, l0, lc, lg, msq, wsq, esc, late) in zip(rows, ref):
        assert (row["C"], row["m"]) == (C, m)
        got = [float(row[k]) for k in ("lambda_0", "lambda_c", "lambda_g", "||mu_c - h_bar||^2", "||W||_F^2",
                                       "escape rate", "late within-class rate")]
        assert got == pytest.approx([l0, lc, lg, msq, wsq, esc, late], abs=5e-5)


def test_table_grid_and_formats(capsys):
    assert main(["table", "ntk", "--classes", "2,3", "--per-class", "2", "--kappa", "1,0.5,0", "--kappa", "2,0.5,0.1",
                 "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["rows"]) == 4 and data["columns"][0] == "C"
    assert main(["table", "ntk", "--format", "latex"]) == 0
    assert "\\toprule" in capsys.readouterr().out


def test_table_bad_kernel(capsys):
    assert main(["table", "ntk", "--classes", "3", "--per-class", "4", "--kappa", "1,1.2,0"]) == 2
    err = capsys.readouterr().err
    assert "lambda_0" in err and "C = 3, m = 4" in err
