"""Every JSON output carries the envelope (schema_version, ncproofs_version, git_commit, command) and
validates against proofs_check/schema/ncproofs-output.schema.json; ``solve`` and ``batching`` share the
solve report's keys; ``list --json`` is an object; ``--version``; ``run --fail-on inconclusive``."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from proofs_check import envelope as E
from proofs_check.cli import main

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the test extra: pip install -e '.[test]'")
SCHEMA = json.loads(E.schema_path().read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def _json(capsys, args, rc=0):
    assert main(args) == rc
    return json.loads(capsys.readouterr().out)


def _valid(doc):
    errors = sorted(VALIDATOR.iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "; ".join(f"{list(e.path)}: {e.message[:200]}" for e in errors[:5])
    assert list(doc)[:4] == list(E.ENVELOPE_KEYS)  # the envelope comes first
    assert doc["schema_version"] == E.SCHEMA_VERSION and doc["ncproofs_version"] == E.ncproofs_version()
    return doc


def test_schema_is_a_valid_json_schema_and_rejects_what_it_should():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    good = E.envelope("list", {"claims": []})
    assert VALIDATOR.is_valid(good)
    assert not VALIDATOR.is_valid({k: v for k, v in good.items() if k != "schema_version"})
    assert not VALIDATOR.is_valid({**good, "schema_version": "2.0"})
    assert not VALIDATOR.is_valid({**good, "git_commit": "not a commit"})
    assert not VALIDATOR.is_valid(E.envelope("solve", {"family": "ufm-ce"}))  # solve needs the report keys
    bad_run = E.envelope("run", {"profile": "quick", "seed": 0, "rigorous": False, "overall_verdict": "MAYBE",
                                 "overall_reason": "", "counts": {}, "seconds": 0, "claims": [],
                                 "environment": {"python": "", "numpy": "", "scipy": "", "sympy": "", "platform": ""}})
    assert not VALIDATOR.is_valid(bad_run)


def test_versions_and_commit():
    assert re.fullmatch(r"\d+\.\d+", E.SCHEMA_VERSION)
    from importlib.metadata import version

    assert E.ncproofs_version() == version("ncproofs")
    c = E.git_commit()
    assert c is None or re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", c)


def test_version_option(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ncproofs {E.ncproofs_version()}") and f"JSON schema {E.SCHEMA_VERSION}" in out


def test_list_json_is_an_enveloped_object(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    doc = _valid(_json(capsys, ["list", "--json"]))
    assert doc["command"] == "list" and isinstance(doc["claims"], list) and len(doc["claims"]) >= 10


def test_solve_scl_and_batching_share_the_top_level_keys(capsys):
    solve = _valid(_json(capsys, ["solve", "scl", "--counts", "2,2", "--tau", "1", "--starts", "1", "--json"]))
    batching = _valid(_json(capsys, ["batching", "--counts", "4,4", "--batches", "0,1,4,5;2,3,6,7", "--json"]))
    assert set(E.INSTANCE_KEYS) <= set(solve) and set(E.INSTANCE_KEYS) <= set(batching)
    assert solve["command"] == "solve" and batching["command"] == "batching"
    assert batching["batching"]["C1"] is False  # the analysis under the key `solve scl --batches` uses


def test_solve_ufm_json_validates(capsys):
    doc = _valid(_json(capsys, ["solve", "ufm-ce", "-k", "3", "-n", "2", "-d", "3", "--lambda-w", "0.01",
                                "--lambda-h", "0.01", "--json"]))
    assert doc["family"] == "ufm-ce" and doc["verdict"] == "VERIFIED"


def test_run_report_and_fail_on_inconclusive(tmp_path, monkeypatch, capsys):
    from proofs_check import runner
    from proofs_check.core import Check, Claim, Provenance, RunContext, Verdict

    path = tmp_path / "r.json"
    assert main(["run", "--only", "ufm.ce.symbolic-derivation", "--quiet", "--report", "", "--json", str(path)]) == 0
    doc = _valid(json.loads(path.read_text()))
    assert doc["command"] == "run" and doc["claims"][0]["aliases"] == ["ufm-ce-symbolic-derivation"]
    # per-claim CPU seconds (and their sum), the processes used; the schema refuses negative times
    assert doc["claims"][0]["cpu_seconds"] >= 0 and doc["jobs"] == 1
    assert doc["cpu_seconds"] == round(sum(c["cpu_seconds"] for c in doc["claims"]), 3)
    assert not VALIDATOR.is_valid({**doc, "claims": [{**doc["claims"][0], "cpu_seconds": -1.0}]})
    assert not VALIDATOR.is_valid({**doc, "jobs": 0})

    def claim(verdict):
        return Claim(f"ufm.test.{verdict.value.lower()}", "ufm", "s", "src", Provenance.DERIVED,
                     lambda ctx: iter([Check("c", verdict, "r")]))

    inconclusive = runner.run_claims([claim(Verdict.VERIFIED), claim(Verdict.INCONCLUSIVE)], RunContext(),
                                     progress=False)
    assert inconclusive.exit_status_for("refuted") == 0 and inconclusive.exit_status_for("inconclusive") == 1
    na = runner.run_claims([claim(Verdict.VERIFIED), claim(Verdict.NOT_APPLICABLE)], RunContext(), progress=False)
    assert na.exit_status_for("inconclusive") == 0  # a failed hypothesis never fails a run
    refuted = runner.run_claims([claim(Verdict.REFUTED)], RunContext(), progress=False)
    assert refuted.exit_status_for("refuted") == 1
    _valid(inconclusive.to_dict())
    # through the CLI: the option exists and the default stays lenient
    monkeypatch.setattr("proofs_check.registry.all_claims", lambda: [claim(Verdict.INCONCLUSIVE)])
    common = ["run", "--quiet", "--report", "", "--json", ""]
    assert main(common) == 0
    assert main(common + ["--fail-on", "inconclusive"]) == 1
    capsys.readouterr()


def test_table_and_measure_json(capsys, tmp_path):
    doc = _valid(_json(capsys, ["table", "ufm", "--loss", "ce", "--classes", "3", "--lambda", "1e-2", "--format",
                                "json"]))
    assert doc["command"] == "table" and doc["columns"]
    r = np.random.default_rng(0)
    X, y = r.normal(size=(30, 4)), np.repeat(np.arange(3), 10)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    doc = _valid(_json(capsys, ["measure", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.npy"), "--json"]))
    assert doc["command"] == "measure"


def test_internal_error_json_is_enveloped(capsys, monkeypatch):
    import proofs_check.cli as cli

    def boom(*a, **k):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(cli, "_dispatch", boom)
    doc = _json(capsys, ["solve", "ufm-ce", "-k", "3", "-n", "2", "-d", "3", "--lambda-w", "0.01", "--lambda-h",
                         "0.01", "--json"], rc=1)
    assert doc["verdict"] == "ERROR" and doc["schema_version"] == E.SCHEMA_VERSION and "traceback" in doc
