"""CLI of the SCL family: solve scl (JSON schema, verdicts, failed hypotheses), batching, table scl,
and one-line errors with exit status 2."""

import json

import pytest

from proofs_check.cli import main


def run_json(capsys, argv):
    rc = main(argv)
    out = capsys.readouterr().out
    return rc, json.loads(out)


def test_solve_full_batch_json(capsys):
    rc, out = run_json(capsys, ["solve", "scl", "--counts", "5,3,2", "--tau", "0.5", "--dim", "4", "--starts", "2", "--json"])
    assert rc == 0
    for key in ("family", "instance", "predicted", "solution", "certificate", "geometry", "verdict", "reason", "claims"):
        assert key in out
    assert out["family"] == "scl" and out["verdict"] == "VERIFIED"
    assert out["predicted"]["value"] == pytest.approx(12.422968, abs=5e-7)
    assert out["solution"]["value"] == pytest.approx(12.422968, abs=5e-6)
    assert abs(out["certificate"]["gap"]) < 1e-5
    assert out["geometry"]["classification"] == "orthogonal-frame" and out["geometry"]["collapsed"] is True
    cos = out["geometry"]["class_mean_cosines"]
    assert cos[0][1] == pytest.approx(0, abs=1e-6)
    assert "Theorem 1" in out["predicted"]["theorem"]


def _claim(out, cid):
    return next(c for c in out["claims"] if c["id"] == cid)


def test_solve_batches_nonunique_reports_why(capsys):
    rc, out = run_json(capsys, ["solve", "scl", "--counts", "4,4", "--tau", "0.5", "--batches", "0,1,4,5;2,3,6,7",
                                "--starts", "2", "--json"])
    assert rc == 0
    # the value statements hold (proven); the geometry statement's hypothesis (C1 and C2) fails
    assert _claim(out, "optimal-value")["verdict"] == "VERIFIED"
    geo = _claim(out, "geometry-of")
    assert geo["verdict"] == "NOT_APPLICABLE" and "C1 fails" in geo["reason"] and "non-unique" in geo["reason"]
    assert out["batching"]["C1"] is False and out["batching"]["of_unique"] is False
    assert "Theorem 2" in out["predicted"]["theorem"]


def test_solve_binding_verified(capsys):
    rc, out = run_json(capsys, ["solve", "scl", "--counts", "4,4", "--tau", "0.5", "--batches", "0,1,4,5;2,3,6,7",
                                "--binding", "--starts", "2", "--json"])
    assert out["verdict"] == "VERIFIED", out["reason"]
    assert _claim(out, "unique-minimiser")["verdict"] == "VERIFIED"
    assert out["instance"]["batches"][1] == [2, 3, 6, 7, 0, 4]


def test_solve_low_dim_and_singletons(capsys):
    rc, out = run_json(capsys, ["solve", "scl", "--counts", "4,4,4", "--tau", "0.5", "--dim", "2", "--starts", "2", "--json"])
    # the bound holds at every d (proven); attainment and the OF need d >= k: not applicable
    assert _claim(out, "theorem-lower-bound")["verdict"] == "VERIFIED"
    assert _claim(out, "optimal-value")["verdict"] == "NOT_APPLICABLE"
    assert "d = 2 < k = 3" in _claim(out, "geometry-of")["reason"]
    rc, out = run_json(capsys, ["solve", "scl", "--counts", "3,1,1", "--tau", "0.5", "--dim", "4", "--starts", "2", "--json"])
    geo = _claim(out, "geometry-of")
    assert geo["verdict"] == "NOT_APPLICABLE" and "singletons" in geo["reason"]
    assert _claim(out, "optimal-value")["verdict"] == "VERIFIED"


def test_solve_ufm_balanced_and_imbalanced(capsys):
    rc, out = run_json(capsys, ["solve", "scl", "--counts", "3,3,3", "--tau", "0.5", "--no-nonneg", "--dim", "2",
                                "--starts", "2", "--json"])
    assert out["verdict"] == "VERIFIED" and _claim(out, "geometry-etf")["verdict"] == "VERIFIED"
    rc, out = run_json(capsys, ["solve", "scl", "--counts", "5,3,2", "--tau", "0.5", "--no-nonneg", "--dim", "3",
                                "--starts", "2", "--json"])
    # value statements proven; the geometry of the imbalanced minimiser is proven in a radius around the solver's
    # polished collapsed candidate (was INCONCLUSIVE "no geometry certificate" before; docs/scl.md, Imbalanced UFM)
    assert _claim(out, "certified-optimum")["verdict"] == "VERIFIED"
    assert _claim(out, "optimum-below-etf-value")["verdict"] == "VERIFIED"
    for cid in ("geometry-not-etf", "within-class-collapse", "minority-classes-closer"):
        c = _claim(out, cid)
        assert c["verdict"] == "VERIFIED" and c["evidence"]["radius"] < 1e-4, (cid, c["reason"])
    assert out["verdict"] == "VERIFIED"
    assert out["predicted"]["value"] is None  # no closed form predicted for imbalanced UFM


def test_batching_json(capsys):
    rc, top = run_json(capsys, ["batching", "--counts", "4,4", "--batches", "0,1,4,5;2,3,6,7", "--json"])
    assert rc == 0
    out = top["batching"]  # the analysis, under the same key as in `solve scl --json`
    assert top["family"] == "scl" and top["instance"]["counts"] == [4, 4] and top["command"] == "batching"
    assert out["C1"] is False and out["C2"] is True and out["of_unique"] is False
    assert out["binding"] == [[0, 1, 4, 5], [2, 3, 6, 7, 0, 4]]
    assert out["binding_C1"] is True and out["binding_of_unique"] is True
    assert out["d"] == 3


def test_batching_text(capsys):
    assert main(["batching", "--counts", "4,4", "--batches", "0,1,4,5;2,3,6,7"]) == 0
    text = capsys.readouterr().out
    assert "C1: False, C2: True" in text and "batch-binding" in text


@pytest.mark.parametrize("fmt", ["md", "latex", "csv", "json"])
def test_table_formats(capsys, fmt):
    assert main(["table", "scl", "--counts", "5,3,2", "--counts", "4,4,4", "--tau", "0.1,0.5,1", "--format", fmt]) == 0
    text = capsys.readouterr().out
    if fmt == "json":
        data = json.loads(text)
        rows = {(r[0], r[1]): r for r in data["rows"]}
        assert rows[("5,3,2", 0.5)][3] == pytest.approx(12.422968, abs=5e-7)
        assert rows[("5,3,2", 0.5)][6] is None  # ReLU cost: balanced only
        assert rows[("4,4,4", 0.5)][5] == pytest.approx(14.679291, abs=5e-7)
        assert rows[("4,4,4", 0.5)][6] == pytest.approx(16.881050 - 14.679291, abs=1e-6)
        assert len(data["rows"]) == 6
    if fmt == "latex":
        assert "\\toprule" in text and "unit-norm" in text and "summed over anchors" in text
    if fmt == "csv":
        assert "np.float64" not in text and text.splitlines()[0].startswith("counts,tau")


def test_table_profiles(capsys):
    assert main(["table", "scl", "--profile", "longtail", "--classes", "5", "--majority", "100", "--ratio", "10",
                 "--tau", "0.5", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rows"][0][0] == "100,56,31,17,10"
    assert main(["table", "scl", "--profile", "step", "--classes", "4", "--majority", "10", "--ratio", "5",
                 "--tau", "0.5", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0][0] == "10,10,2,2"


@pytest.mark.parametrize("argv,msg", [
    (["solve", "scl", "--counts", "5,3", "--tau", "0"], "tau must be > 0"),
    (["solve", "scl", "--counts", "5,3", "--tau", "-1"], "tau must be > 0"),
    (["solve", "scl", "--counts", "5,0,2", "--tau", "1"], "counts[1] must be >= 1"),
    (["solve", "scl", "--counts", "5,3", "--tau", "1", "--batches", "0,1;;2"], "batches[1] is empty"),
    (["solve", "scl", "--counts", "5,3", "--tau", "1", "--batches", "0,99"], "out of range"),
    (["solve", "scl", "--counts", "5,3", "--tau", "1", "--batches", "0,0,1"], "repeats sample index"),
    (["solve", "scl", "--counts", "5,3", "--tau", "1", "--binding"], "--binding needs --batches"),
    (["solve", "scl", "--counts", "5,3", "--tau", "nan"], "tau"),
    (["solve", "scl", "--counts", "5,3", "--tau", "1", "--dim", "0"], "d must be >= 1"),
    (["batching", "--counts", "4,4", "--batches", "0,1", "--dim", "1"], "dim must be >= k"),
    (["table", "scl", "--tau", "0.5"], "give --counts or --profile"),
    (["table", "scl", "--profile", "step", "--tau", "0.5"], "needs --classes"),
    (["table", "scl", "--counts", "3,2", "--tau", "0,1"], "tau must be > 0"),
])
def test_bad_input_exit_2(capsys, argv, msg):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("ncproofs: error:") and msg in err and len(err.strip().splitlines()) == 1
