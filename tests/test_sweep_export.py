"""Sweep exports for analysis: the flat table (one column per parameter and per key number),
pandas DataFrame, CSV, JSON that ``pd.read_json(orient="split")`` reads, Parquet, and the
``--group-by`` aggregate (counts of verdicts, worst verdict, min/max of key numbers).

Every expected value below is written out by hand from the toy sweepable's definition."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
import textwrap
from pathlib import Path

import pytest

from proofs_check import cli, sweep
from proofs_check.core import Check, Verdict
from proofs_check.sweep import export


def _toy(params: dict, seed: int) -> dict:
    """a = 1..4, b = "x"/"y": REFUTED when a >= 3 (a witness), NOT_APPLICABLE when b == "skip",
    else VERIFIED; score = a / 2 + seed; value = a * a; evidence gap = a / 10, nested level."""
    a, b = params["a"], params["b"]
    if b == "skip":
        chk = Check("hyp", Verdict.NOT_APPLICABLE, "b is skip", {"a": a})
        return sweep.result_from_checks([chk], score=None, value=a * a)
    v = Verdict.REFUTED if a >= 3 else Verdict.VERIFIED
    chk = Check("c1", v, "toy", {"gap": a / 10, "label": "text is not a number", "nested": {"level": a + 0.5},
                                 "missing": float("nan")})
    return sweep.result_from_checks([chk], score=a / 2 + seed, value=a * a)


sweep.register_sweepable("t.export-toy", _toy, parameters=("a", "b"), defaults={"b": "x"}, replace=True)

CONFIG = """
[sweep]
family = "t.export-toy"
seeds = 2

[parameters]
a = [1, 2, 3, 4]
b = ["x", "y"]
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("export")
    cfg = d / "toy.toml"
    cfg.write_text(textwrap.dedent(CONFIG))
    out = sweep.run_sweep(sweep.load_config(str(cfg)), str(d / "toy.sqlite"), workers=1, progress=False)
    assert out.computed == 16
    return d / "toy.sqlite"


def _rows(store: Path) -> list[dict]:
    s = sweep.Store(str(store))
    try:
        return s.rows(with_result=True)
    finally:
        s.close()


def _cli(argv, capsys):
    rc = cli.main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


# ---- the flat table -------------------------------------------------------------------------------

def test_key_numbers_flatten_top_level_entries_and_check_evidence():
    res = _toy({"a": 3, "b": "x"}, 1)
    got = export.key_numbers(res)
    assert got["value"] == 9
    assert got["c1.gap"] == pytest.approx(0.3)
    assert got["c1.nested.level"] == 3.5
    assert "c1.label" not in got  # texts of the evidence stay in the store only
    assert "score" not in got and "verdict" not in got  # fixed columns, not key numbers


def test_flat_table_has_one_column_per_parameter_and_per_key_number(store):
    t = export.flat_table(_rows(store))
    assert t.columns[:3] == ["key", "family", "seed"]
    assert {"a", "b", "verdict", "reason", "score", "seconds", "value", "c1.gap", "c1.nested.level",
            "c1.missing"} <= set(t.columns)
    assert len(t.rows) == 16
    col = {c: j for j, c in enumerate(t.columns)}
    for r in t.rows:
        assert len(r[col["key"]]) == 32  # the whole key, not the 12 digits of the readable table
        a, seed = r[col["a"]], r[col["seed"]]
        assert r[col["value"]] == a * a
        assert r[col["score"]] == pytest.approx(a / 2 + seed)
        assert r[col["c1.gap"]] == pytest.approx(a / 10)
        assert r[col["c1.missing"]] is None  # NaN in the evidence is null, never NaN
        assert r[col["verdict"]] == ("REFUTED" if a >= 3 else "VERIFIED")


def test_parameter_named_like_a_fixed_column_is_prefixed():
    rows = [{"key": "k" * 32, "family": "f", "params": {"seed": 5, "score": 1}, "seed": 0, "verdict": "VERIFIED",
             "reason": "", "score": 0.5, "seconds": 0.1, "result": {"verdict": "VERIFIED", "a": 2}}]
    t = export.flat_table(rows)
    r = dict(zip(t.columns, t.rows[0]))
    assert r["param.seed"] == 5 and r["seed"] == 0 and r["param.score"] == 1 and r["score"] == 0.5 and r["a"] == 2


# ---- aggregation --------------------------------------------------------------------------------------

def test_group_by_counts_verdicts_and_takes_min_max(store):
    t = export.aggregate(_rows(store), ["a"], numbers=["score", "c1.gap"])
    assert t.columns == ["a", "instances", "REFUTED", "VERIFIED", "worst", "min score", "max score",
                         "min c1.gap", "max c1.gap"]
    # per a: 2 values of b x 2 seeds = 4 instances; score = a/2 + seed, seed in {0, 1}
    expected = [[1, 4, 0, 4, "VERIFIED", 0.5, 1.5, 0.1, 0.1],
                [2, 4, 0, 4, "VERIFIED", 1.0, 2.0, 0.2, 0.2],
                [3, 4, 4, 0, "REFUTED", 1.5, 2.5, 0.3, 0.3],
                [4, 4, 4, 0, "REFUTED", 2.0, 3.0, 0.4, 0.4]]
    assert len(t.rows) == 4
    for got, want in zip(t.rows, expected):
        assert got[:5] == want[:5]
        assert got[5:] == pytest.approx(want[5:])


def test_group_by_two_columns_and_default_numbers(store):
    t = export.aggregate(_rows(store), "b,a")
    assert t.columns[:2] == ["b", "a"] and "min value" in t.columns and "max score" in t.columns
    assert [tuple(r[:2]) for r in t.rows] == [(b, a) for b in ("x", "y") for a in (1, 2, 3, 4)]
    assert all(r[2] == 2 for r in t.rows)  # two seeds per group


def test_worst_of_a_group_ignores_not_applicable():
    rows = [{"key": str(i) * 32, "family": "f", "params": {"g": 1}, "seed": i, "verdict": v, "reason": "",
             "score": None, "seconds": 0.0, "result": {"verdict": v}}
            for i, v in enumerate(["NOT_APPLICABLE", "VERIFIED", "NOT_APPLICABLE"])]
    t = export.aggregate(rows, ["g"])
    r = dict(zip(t.columns, t.rows[0]))
    assert r["worst"] == "VERIFIED" and r["NOT_APPLICABLE"] == 2 and r["VERIFIED"] == 1
    assert r["min score"] is None and r["max score"] is None  # no finite score in the group


@pytest.mark.parametrize("kwargs, message", [
    ({"group_by": ["nope"]}, "--group-by: no column 'nope'; the columns are: key, family, seed, a, b"),
    ({"group_by": ["a"], "numbers": ["verdict"]}, "--numbers: column 'verdict' is not numeric"),
    ({"group_by": ["a"], "numbers": ["zzz"]}, "--numbers: no column 'zzz'"),
    ({"group_by": []}, "--group-by must name at least one column"),
    ({"group_by": ["a", "a"]}, "--group-by names 'a' twice"),
])
def test_aggregate_bad_columns_are_usage_errors(store, kwargs, message):
    with pytest.raises(sweep.UsageError, match=message.replace("(", r"\(")):
        export.aggregate(_rows(store), **kwargs)


# ---- CLI: --group-by, --export formats -------------------------------------------------------------

def test_cli_group_by_latex_export(store, capsys, tmp_path):
    tex = tmp_path / "agg.tex"
    rc, out, err = _cli(["sweep", "--summary", "--store", str(store), "--group-by", "a", "--export", str(tex),
                         "--worst", "0"], capsys)
    assert rc == 0, err
    text = tex.read_text()  # format from the extension
    assert "\\toprule" in text
    body = text.split("\\midrule", 1)[1].split("\\bottomrule", 1)[0]
    assert [ln.split("&")[0].strip() for ln in body.strip().splitlines()] == ["1", "2", "3", "4"]  # 4 groups
    assert "by a:" in out and "| 3 | 4 | 4 | 0 | REFUTED |" in out  # printed as markdown too


def test_cli_csv_export_is_the_flat_table(store, capsys, tmp_path):
    path = tmp_path / "flat.csv"
    rc, _, err = _cli(["sweep", "--summary", "--store", str(store), "--export", str(path)], capsys)
    assert rc == 0, err
    table = list(csv.DictReader(io.StringIO(path.read_text())))
    assert len(table) == 16
    for r in table:
        assert float(r["c1.gap"]) == pytest.approx(int(r["a"]) / 10) and int(r["value"]) == int(r["a"]) ** 2


def test_cli_json_export_reads_with_pandas_split(store, capsys, tmp_path):
    pd = pytest.importorskip("pandas", reason="pandas (optional: pip install pandas) is not installed")
    path = tmp_path / "flat.json"
    rc, _, err = _cli(["sweep", "--summary", "--store", str(store), "--export", str(path), "--format", "json"],
                      capsys)
    assert rc == 0, err
    df = pd.read_json(path, orient="split", dtype={"key": str})
    assert df.shape[0] == 16 and {"a", "b", "value", "c1.gap", "verdict"} <= set(df.columns)
    assert (df["value"] == df["a"] ** 2).all()
    assert ((df["c1.gap"] - df["a"] / 10).abs() < 1e-12).all()
    assert df["c1.missing"].isna().all()


def test_cli_parquet_export_round_trips(store, capsys, tmp_path):
    pd = pytest.importorskip("pandas", reason="pandas (optional: pip install pandas pyarrow) is not installed")
    pytest.importorskip("pyarrow", reason="pyarrow (optional: pip install pyarrow) is not installed")
    path = tmp_path / "agg.parquet"
    rc, _, err = _cli(["sweep", "--summary", "--store", str(store), "--group-by", "a", "--export", str(path)],
                      capsys)
    assert rc == 0, err
    df = pd.read_parquet(path)
    assert df["a"].tolist() == [1, 2, 3, 4]
    assert df["REFUTED"].tolist() == [0, 0, 4, 4] and df["worst"].tolist() == ["VERIFIED"] * 2 + ["REFUTED"] * 2
    assert df["max score"].tolist() == pytest.approx([1.5, 2.0, 2.5, 3.0])


def test_cli_bad_export_options_exit_2_before_any_work(tmp_path, capsys, monkeypatch):
    cfg = tmp_path / "toy.toml"
    cfg.write_text(textwrap.dedent(CONFIG))
    db = tmp_path / "toy.sqlite"
    rc, _, err = _cli(["sweep", str(cfg), "--format", "parquet"], capsys)
    assert rc == 2 and "--format parquet is a file format" in err
    rc, _, err = _cli(["sweep", str(cfg), "--numbers", "score"], capsys)
    assert rc == 2 and "--numbers needs --group-by" in err
    # whatever else is installed (a newcomer's `.[test]` has neither pandas nor pyarrow), the message names
    # what is missing
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow -> ImportError
    rc, _, err = _cli(["sweep", str(cfg), "--export", str(tmp_path / "x.parquet"), "--workers", "1"], capsys)
    assert rc == 2 and "needs pandas and pyarrow" in err and "pyarrow" in err.split("not installed:")[1]
    assert "pip install" in err
    monkeypatch.setitem(sys.modules, "pandas", None)
    rc, _, err = _cli(["sweep", str(cfg), "--export", str(tmp_path / "x.parquet"), "--workers", "1"], capsys)
    assert rc == 2 and "not installed: pandas, pyarrow" in err
    assert not db.exists()  # refused before the sweep ran


# ---- pandas ---------------------------------------------------------------------------------------

def test_to_dataframe_flat_and_grouped(store):
    pytest.importorskip("pandas", reason="pandas (optional: pip install pandas) is not installed")
    df = sweep.to_dataframe(str(store))
    assert df.shape[0] == 16 and df["a"].dtype.kind == "i" and df["score"].dtype.kind == "f"
    assert sorted(df.loc[df["verdict"] == "REFUTED", "a"].unique().tolist()) == [3, 4]
    g = sweep.to_dataframe(str(store), group_by=["b"], numbers=["value"])
    assert g["b"].tolist() == ["x", "y"] and g["instances"].tolist() == [8, 8]
    assert g["min value"].tolist() == [1, 1] and g["max value"].tolist() == [16, 16]


def test_to_dataframe_restricted_to_a_config(store, tmp_path):
    pytest.importorskip("pandas", reason="pandas (optional: pip install pandas) is not installed")
    cfg = tmp_path / "part.toml"
    cfg.write_text(textwrap.dedent(CONFIG.replace("a = [1, 2, 3, 4]", "a = [2]")))
    df = sweep.to_dataframe(str(store), config=str(cfg))
    assert df.shape[0] == 4 and set(df["a"]) == {2}


def test_to_dataframe_without_pandas_says_how_to_install(store, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(sweep.UsageError, match=r"needs pandas, which is not installed: pip install pandas"):
        sweep.to_dataframe(str(store))


def test_to_dataframe_bad_source(tmp_path):
    pytest.importorskip("pandas", reason="pandas (optional: pip install pandas) is not installed")
    with pytest.raises(sweep.UsageError, match="no such store"):
        sweep.to_dataframe(str(tmp_path / "missing.sqlite"))
    with pytest.raises(TypeError, match="source must be"):
        sweep.to_dataframe(42)


def test_split_json_has_no_nan():
    from proofs_check.tables import Table

    text = export.split_json(Table(["x", "y"], [[1, float("nan")], [2, math.inf]]))
    assert json.loads(text) == {"columns": ["x", "y"], "index": [0, 1], "data": [[1, None], [2, None]]}
