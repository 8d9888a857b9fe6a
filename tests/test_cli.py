"""The command line: list, run, solve, table, errors (exit 2, one line, no traceback)."""

import json
import subprocess
import sys

import pytest

from proofs_check.cli import main


def cli(*args):
    return subprocess.run([sys.executable, "-m", "proofs_check.cli", *args], capture_output=True, text=True,
                          timeout=300)


def test_list_shows_source_and_provenance(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "ufm.ce.optimal-value" in out and "derived" in out and "reconstructed" in out


def test_run_only_writes_reports(tmp_path, capsys):
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    assert main(["run", "--only", "ufm-mse", "--report", str(md), "--json", str(js), "--quiet"]) == 0
    data = json.loads(js.read_text())
    assert {c["id"] for c in data["claims"]} == {"ufm.mse.symbolic-derivation", "ufm.mse.optimal-value",
                                                  "ufm.mse.collapse-etf", "ufm.mse.trivial-phase"}
    assert all(c["verdict"] == "VERIFIED" for c in data["claims"])
    assert all(c["provenance"] in ("quoted", "reconstructed", "derived") for c in data["claims"])
    assert "| claim | source | provenance | verdict |" in md.read_text()


def test_solve_json_schema(capsys):
    assert main(["solve", "ufm-ce", "--classes", "3", "--per-class", "2", "--dim", "3", "--lambda-w", "0.01",
                 "--lambda-h", "0.01", "--starts", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["family"] == "ufm-ce" and out["verdict"] == "VERIFIED"
    assert out["predicted"]["value"] == pytest.approx(0.14833175, abs=1e-8)
    assert set(out["solution"]) >= {"value", "method", "converged", "seconds"}
    assert set(out["certificate"]) >= {"lower_bound", "gap", "method"}
    assert out["geometry"]["classification"] == "simplex-etf"
    assert set(out["geometry"]["metrics"]) >= {"NC1", "NC1_pinv", "NC2_etf", "NC2_of", "NC3", "NC4", "equinorm"}
    assert all(set(c) == {"id", "verdict", "reason", "independent", "evidence"} for c in out["claims"])
    claims = {c["id"]: c for c in out["claims"]}
    # the geometry of every minimiser is VERIFIED only through the proven uniqueness, not a value gap
    assert claims["minimiser-unique"]["verdict"] == "VERIFIED" and claims["minimiser-unique"]["independent"]
    assert claims["geometry-simplex-etf"]["evidence"]["geometry_certificate"].startswith("the closed form is certified")
    assert claims["optimal-value"]["independent"] and not claims["collapse"]["independent"]
    assert claims["optimal-value"]["evidence"]["tolerance"] == pytest.approx(1e-9 * 0.14833175, rel=1e-6)


@pytest.mark.parametrize("method", ["closed-form", "convex", "factored"])
def test_solve_single_routes(method, capsys):
    main(["solve", "ufm-mse", "-k", "3", "-n", "2", "-d", "3", "--lambda-w", "0.01", "--lambda-h", "0.01",
          "--method", method, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert list(out["routes"]) == [method]


@pytest.mark.parametrize("args,needle", [
    (["solve", "ufm-ce", "-k", "0", "-n", "2", "-d", "2", "--lambda-w", "0.1", "--lambda-h", "0.1"], "k (classes) must be >= 2"),
    (["solve", "ufm-ce", "-k", "3", "-n", "-1", "-d", "2", "--lambda-w", "0.1", "--lambda-h", "0.1"], "n (samples per class)"),
    (["solve", "ufm-ce", "-k", "3", "-n", "2", "-d", "0", "--lambda-w", "0.1", "--lambda-h", "0.1"], "d (feature dimension)"),
    (["solve", "ufm-ce", "-k", "3", "-n", "2", "-d", "2", "--lambda-w", "-0.1", "--lambda-h", "0.1"], "lambda_w must be >= 0"),
    (["solve", "ufm-ce", "-k", "3", "-n", "2", "-d", "2", "--lambda-w", "nan", "--lambda-h", "0.1"], "finite"),
    (["solve", "ufm-mse", "-k", "3", "-n", "2", "-d", "2", "--lambda-w", "0.1", "--lambda-h", "0.1", "--lambda-b", "0.1"],
     "--lambda-b is not accepted for ufm-mse"),
    (["solve", "nonsense"], "invalid choice"),
    (["run", "--only", "no-such-claim-xyz"], "no claim matches"),
])
def test_bad_input_is_one_line_exit_2(args, needle):
    r = cli(*args)
    assert r.returncode == 2
    assert needle in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("fmt,needle", [("md", "| k |"), ("latex", "\\toprule"), ("csv", "k,n,lambda"),
                                        ("json", '"columns"')])
def test_table_formats(fmt, needle, capsys):
    assert main(["table", "ufm", "--format", fmt, "--classes", "3,4", "--lambda", "0.01"]) == 0
    assert needle in capsys.readouterr().out
