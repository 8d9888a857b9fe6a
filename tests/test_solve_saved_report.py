"""`ncproofs solve --rigorous REPORT.json`: a saved solve report (the output of `ncproofs solve FAMILY ... --json`)
re-judged in ball arithmetic (issue 31: the one path that reads a report back from a dictionary, through
proofs_check.rigorous.read_saved_report / apply_saved). Guards: the verdicts equal a live `solve --rigorous` on the
same instance; a tampered prediction never comes out VERIFIED; every bad file is one line and exit 2."""

from __future__ import annotations

import io
import json
import os
from contextlib import redirect_stderr, redirect_stdout

import pytest

pytest.importorskip("flint")

from proofs_check.cli import main  # noqa: E402

LAM = ["--lambda-w", "1e-3", "--lambda-h", "1e-3"]
INSTANCES = {
    "ufm-general-ce": ["ufm", "--loss", "ce", "--classes", "4", "--per-class", "3", "-d", "4"] + LAM,
    "ufm-general-mse-imbalanced": ["ufm", "--loss", "mse", "--counts", "6,6,2,1", "-d", "4"] + LAM,
    "ufm-ce": ["ufm-ce", "-k", "4", "-n", "3", "-d", "5", "--lambda-w", "1e-2", "--lambda-h", "2e-2"],
    "ufm-mse": ["ufm-mse", "-k", "3", "-n", "2", "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2"],
    "scl": ["scl", "--counts", "3,3,3", "--tau", "0.5"],
    "feature-collapse": ["feature-collapse", "--concepts", "3", "--length", "2", "--words-per-concept", "2",
                         "--dim", "4", "--lambda", "0.05"],
}


def _main(argv):
    o, e = io.StringIO(), io.StringIO()
    with redirect_stdout(o), redirect_stderr(e):
        rc = main(list(argv))
    return rc, o.getvalue(), e.getvalue()


def _verdicts(out: dict) -> dict:
    return {c["id"]: (c["verdict"], c.get("rigorous")) for c in out["claims"]}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Per instance: (the saved plain report's path, the live `solve --rigorous --json` output, its rc)."""
    d = tmp_path_factory.mktemp("saved")
    res = {}
    for name, argv in INSTANCES.items():
        rc, out, err = _main(["solve"] + argv + ["--json"])
        assert rc == 0, err
        path = d / f"{name}.json"
        path.write_text(out, encoding="utf-8")
        rc_live, live, err = _main(["solve"] + argv + ["--json", "--rigorous"])
        res[name] = (path, json.loads(live), rc_live)
    return res


def _rejudge(path, *extra):
    rc, out, err = _main(["solve", "--rigorous", str(path), "--json", *extra])
    return rc, (json.loads(out) if out else None), err


# what the live `solve --rigorous` gives (measured on these instances): the comparison below must not pass
# by both paths failing the same way
LIVE_OPTIMUM = {"ufm-general-ce": True, "ufm-general-mse-imbalanced": False, "ufm-ce": True, "ufm-mse": True,
                "scl": True, "feature-collapse": True}


@pytest.mark.parametrize("name", list(INSTANCES))
def test_saved_report_rejudged_as_the_live_rigorous_solve(reports, name):
    path, live, rc_live = reports[name]
    rc, out, err = _rejudge(path)
    assert rc == rc_live == 0, err
    assert out["command"] == "solve" and out["family"] == live["family"]
    assert _verdicts(out) == _verdicts(live)
    assert out["verdict"] == live["verdict"] == "VERIFIED"
    assert out["rigorous"] is live["rigorous"] is LIVE_OPTIMUM[name]
    opt = next(c for c in out["claims"] if c["id"] == "optimal-value")
    assert opt["verdict"] == "VERIFIED" and opt["rigorous"] is True and "rigorous_lower" in opt["evidence"]
    rig = out["certificate"]["rigorous"]
    assert rig["lower"][0] <= live["certificate"]["rigorous"]["upper"][1]
    assert out["rejudged_from"]["path"] == str(path)


def test_saved_report_text_output_is_the_live_one(reports):
    path, _, _ = reports["ufm-ce"]
    rc, text, err = _main(["solve", "--rigorous", str(path)])
    argv = INSTANCES["ufm-ce"]
    rc_live, live_text, _ = _main(["solve"] + argv + ["--rigorous"])
    assert rc == rc_live == 0, err
    keep = ("  [", "verdict:", "rigorous (", "family:", "instance:", "predicted:", "geometry:")
    lines = [x for x in text.splitlines() if x.startswith(keep)]
    assert lines == [x for x in live_text.splitlines() if x.startswith(keep)]
    assert "statements about the minimiser proven in balls: 5 of 5" in text


def test_verdicts_carried_from_the_file_are_marked(reports):
    path, _, _ = reports["ufm-general-mse-imbalanced"]
    rc, out, _ = _rejudge(path)
    carried = {c["id"] for c in out["claims"] if "saved_verdict" in c["evidence"]}
    assert "optimal-value" not in carried and "minority-collapse-threshold" in carried
    assert any("carried from" in d for d in out["diagnostics"])


def test_a_saved_rigorous_report_rejudges_to_the_same_verdicts(reports, tmp_path):
    _, live, _ = reports["scl"]
    path = tmp_path / "scl-rigorous.json"
    path.write_text(json.dumps(live), encoding="utf-8")
    rc, out, err = _rejudge(path)
    assert rc == 0, err
    assert _verdicts(out) == _verdicts(live)


# --- tampering --------------------------------------------------------------------------------------------

def _load(path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _tamper_prediction(report: dict, cid: str, sign: int) -> dict:
    """The check's stated number moved by 3 tolerances (so the statement is false) everywhere the report states
    it (statement, evidence, the report's predicted.value): a consistent forgery, so only the proof can catch it."""
    c = next(c for c in report["claims"] if c["id"] == cid)
    s = c["evidence"]["statement"]
    key = "predicted" if "predicted" in s else "bound"
    s[key] += sign * 3 * s["tol"]
    if isinstance(c["evidence"].get("predicted"), float):
        c["evidence"]["predicted"] = s[key]
    if key == "predicted":
        report["predicted"]["value"] = s[key]
    return report


# (a lower bound moved down stays true: "min >= B - 3 tol" is not a forgery of a false statement)
@pytest.mark.parametrize("name,cid,sign", [(n, "optimal-value", s) for n in INSTANCES for s in (1, -1)]
                         + [("scl", "theorem-lower-bound", 1)])
def test_tampered_prediction_is_never_verified(reports, tmp_path, name, cid, sign):
    path, _, _ = reports[name]
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(_tamper_prediction(_load(path), cid, sign)), encoding="utf-8")
    rc, out, err = _rejudge(bad)
    c = next(c for c in out["claims"] if c["id"] == cid)
    assert c["verdict"] in ("REFUTED", "INCONCLUSIVE") and c["rigorous"] is False
    assert out["verdict"] != "VERIFIED" and out["rigorous"] is False
    # the proven brackets of these instances are far tighter than a tolerance: the forgery is refuted by a witness
    assert c["verdict"] == "REFUTED" and rc == 1 and c["evidence"]["witness_gap"] > 0


def test_tampered_instance_is_judged_on_the_instance_in_the_file(reports, tmp_path):
    report = _load(reports["ufm-ce"][0])
    report["instance"]["lw"] *= 2  # the stated optimum is the old instance's
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(report), encoding="utf-8")
    rc, out, _ = _rejudge(bad)
    assert rc == 1 and _verdicts(out)["optimal-value"] == ("REFUTED", False)


def test_tampered_verdict_of_a_value_statement_is_judged_again(reports, tmp_path):
    report = _load(reports["ufm-ce"][0])
    for c in report["claims"]:
        if c["id"] == "optimal-value":
            c["verdict"], c["reason"] = "REFUTED", "edited"
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(report), encoding="utf-8")
    rc, out, _ = _rejudge(bad)
    assert rc == 0 and _verdicts(out)["optimal-value"] == ("VERIFIED", True)


def test_statement_edited_apart_from_its_evidence_is_bad_input(reports, tmp_path):
    report = _load(reports["ufm-ce"][0])
    c = next(c for c in report["claims"] if c["id"] == "optimal-value")
    c["evidence"]["statement"]["predicted"] *= 1.5
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(report), encoding="utf-8")
    rc, out, err = _rejudge(bad)
    assert rc == 2 and out is None and err.count("\n") == 1
    assert str(bad) in err and "inconsistent" in err and "evidence.predicted" in err


# --- refusals: one line, exit 2, before any work ------------------------------------------------------------

def test_without_rigorous_one_line_and_exit_2(reports):
    rc, out, err = _main(["solve", str(reports["ufm-ce"][0])])
    assert rc == 2 and out == ""
    assert err == "ncproofs: error: solve REPORT.json: re-judging a saved report needs --rigorous\n"


def test_without_flint_the_existing_refusal(reports, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "flint" else real(n, *a))
    rc, out, err = _main(["solve", "--rigorous", str(reports["ufm-ce"][0])])
    assert rc == 2 and out == "" and err.count("\n") == 1 and 'pip install "ncproofs[rigorous]"' in err


def _good(reports) -> dict:
    return _load(reports["ufm-ce"][0])


def _edit(reports, fn) -> str:
    r = _good(reports)
    fn(r)
    return json.dumps(r)


def _claim(r, cid="optimal-value"):
    return next(c for c in r["claims"] if c["id"] == cid)


BAD_FILES = {
    "run report": (lambda rep: json.dumps({"schema_version": "1.1", "ncproofs_version": "0", "git_commit": None,
                                           "command": "run", "claims": []}), "is a run report"),
    "other command": (lambda rep: json.dumps({"schema_version": "1.1", "command": "table", "columns": []}),
                      "its command is 'table'"),
    "truncated": (lambda rep: _edit(rep, lambda r: None)[:200], "is not valid JSON"),
    "empty": (lambda rep: "", "is not valid JSON"),
    "not utf-8": (lambda rep: "\udcff", "is not valid JSON"),
    "nan constant": (lambda rep: _edit(rep, lambda r: None).replace('"lw": 0.01', '"lw": NaN'),
                     "non-standard JSON constant NaN"),
    "top-level array": (lambda rep: "[1, 2]", "its top level is a JSON list"),
    "schema major": (lambda rep: _edit(rep, lambda r: r.update(schema_version="2.0")), "schema_version '2.0'"),
    "unknown family": (lambda rep: _edit(rep, lambda r: r.update(family="ufm-xyz")), "unknown family 'ufm-xyz'"),
    "family without reader": (lambda rep: _edit(rep, lambda r: r.update(family="ntk")), "no saved-report reader"),
    "claims not a list": (lambda rep: _edit(rep, lambda r: r.update(claims={})), "its 'claims' is dict"),
    "instance missing": (lambda rep: _edit(rep, lambda r: r.pop("instance")), "its 'instance' is NoneType"),
    "bad verdict": (lambda rep: _edit(rep, lambda r: _claim(r).update(verdict="MAYBE")), "claims[0] is not a check"),
    "bad statement": (lambda rep: _edit(rep, lambda r: _claim(r)["evidence"].update(statement={"type": "ValueEquals"})),
                      "is not a statement"),
    "instance key missing": (lambda rep: _edit(rep, lambda r: r["instance"].pop("k")), "instance has no 'k'"),
    "instance out of range": (lambda rep: _edit(rep, lambda r: r["instance"].update(k=-1)), "must be >= 2, got -1"),
    "instance wrong loss": (lambda rep: _edit(rep, lambda r: r["instance"].update(loss="mse")), "loss 'mse'"),
    "scl instance damaged": (lambda rep: _edit(rep, lambda r: r.update(family="scl")), "instance has no 'counts'"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_report_file_is_one_line_naming_it(reports, tmp_path, case):
    make, expect = BAD_FILES[case]
    path = tmp_path / "bad.json"
    text = make(reports)
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    rc, out, err = _main(["solve", "--rigorous", str(path), "--json"])
    assert rc == 2 and out == "", err
    assert err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err
    assert err.startswith("ncproofs: error: solve REPORT.json: ") and str(path) in err and expect in err, err


def test_paths_that_are_not_regular_files(tmp_path):
    d = tmp_path / "dir.json"
    d.mkdir()
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for p, expect in ((d, "is a directory"), (fifo, "FIFO"), (tmp_path / "missing.json", "no such file")):
        rc, out, err = _main(["solve", "--rigorous", str(p)])
        assert rc == 2 and out == "" and err.count("\n") == 1 and expect in err and str(p) in err, err


def test_solve_family_parsing_is_unchanged():
    e = io.StringIO()
    with redirect_stderr(e), pytest.raises(SystemExit) as exc:  # argparse's own error, as before
        main(["solve", "nosuch"])
    assert exc.value.code == 2 and "invalid choice: 'nosuch'" in e.getvalue()
    from proofs_check.cli import build_parser

    helptext = build_parser()[0]._subparsers._group_actions[0].choices["solve"].format_help()
    assert "solve --rigorous REPORT.json" in helptext
    # an option value ending in .json (--html PATH) is not taken for the report
    from proofs_check.cli import _saved_report_argv

    assert not _saved_report_argv(["solve", "--html", "x.json", "ufm-ce"])
    assert _saved_report_argv(["solve", "--html", "x.html", "--rigorous", "r.json"])
    assert not _saved_report_argv(["run", "r.json"])


def test_rejudged_output_follows_the_json_schema(reports):
    jsonschema = pytest.importorskip("jsonschema")
    from proofs_check.envelope import schema_path

    schema = json.loads(schema_path().read_text(encoding="utf-8"))
    for name in ("ufm-general-mse-imbalanced", "scl"):
        rc, out, err = _rejudge(reports[name][0])
        jsonschema.validate(out, schema)
