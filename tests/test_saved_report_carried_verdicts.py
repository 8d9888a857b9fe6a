"""`ncproofs solve --rigorous REPORT.json` on tampered saved reports: a VERIFIED verdict that the file merely
carries is never the result when the ball arithmetic on the instance *in the file* does not confirm it.

Found (before the fix, on the saved `solve ufm-ce -k 4 -n 3 -d 5 --lambda-w 5e-3 --lambda-h 5e-3 --json`):
- lw = lh = 0.5 written into the instance (zero phase: the unique minimiser is Z = 0) kept
  `geometry-simplex-etf` VERIFIED (carried from the file) next to the REFUTED value; with d = 2 < k - 1 the
  report was INCONCLUSIVE with the minimiser statements still VERIFIED;
- the geometry statement edited to `orthogonal-frame`: the report came out VERIFIED, exit 0, although the ball
  proof says the unique minimiser is a simplex ETF;
- the `statement` keys removed and the predicted optimum edited to 0.2 (true 0.149...): VERIFIED, exit 0;
- the value check marked NOT_APPLICABLE, the other statements removed, the instance in the zero phase: VERIFIED.
The expected outcomes below follow from docs/ufm.md (zero phase when sqrt(n lw lh) > the threshold; a simplex ETF
needs d >= k - 1), not from the code under test."""

from __future__ import annotations

import copy
import io
import json
from contextlib import redirect_stderr, redirect_stdout

import pytest

pytest.importorskip("flint")

from proofs_check.cli import main  # noqa: E402

ARGV = ["solve", "ufm-ce", "-k", "4", "-n", "3", "-d", "5", "--lambda-w", "5e-3", "--lambda-h", "5e-3", "--json"]
POINT_IDS = ("minimiser-unique", "geometry-simplex-etf", "collapse", "self-duality", "constant-bias")


def _main(argv):
    o, e = io.StringIO(), io.StringIO()
    with redirect_stdout(o), redirect_stderr(e):
        rc = main(list(argv))
    return rc, o.getvalue(), e.getvalue()


@pytest.fixture(scope="module")
def saved():
    rc, out, err = _main(ARGV)
    assert rc == 0, err
    rep = json.loads(out)
    assert rep["verdict"] == "VERIFIED"
    assert {c["id"] for c in rep["claims"]} >= set(POINT_IDS) | {"optimal-value"}
    return rep


def _rejudge(tmp_path, rep):
    p = tmp_path / "edited.json"
    p.write_text(json.dumps(rep), encoding="utf-8")
    rc, out, err = _main(["solve", "--rigorous", str(p), "--json"])
    return rc, (json.loads(out) if out else None), err


def _claim(rep, cid):
    return next(c for c in rep["claims"] if c["id"] == cid)


def test_untampered_report_stays_verified(tmp_path, saved):
    rc, out, err = _rejudge(tmp_path, copy.deepcopy(saved))
    assert rc == 0 and out["verdict"] == "VERIFIED", err
    assert all(_claim(out, i)["verdict"] == "VERIFIED" for i in POINT_IDS)


@pytest.mark.parametrize("edit", ["zero-phase", "d-below-k-minus-1"])
def test_edited_instance_withdraws_the_carried_minimiser_verdicts(tmp_path, saved, edit):
    rep = copy.deepcopy(saved)
    if edit == "zero-phase":  # sqrt(n) lam = sqrt(3)/2 > the threshold: the minimiser is Z = 0, not an ETF
        rep["instance"].update(lw=0.5, lh=0.5)
    else:  # d = 2 < k - 1 = 3: the class means cannot form a simplex ETF of 4 vectors
        rep["instance"]["d"] = 2
    rc, out, err = _rejudge(tmp_path, rep)
    assert out is not None, err
    assert out["verdict"] != "VERIFIED"
    for i in POINT_IDS:
        c = _claim(out, i)
        assert c["verdict"] != "VERIFIED", (i, c["reason"])
        assert "withdrawn" in c["evidence"]["saved_verdict"]


def test_edited_geometry_statement_is_not_verified(tmp_path, saved):
    rep = copy.deepcopy(saved)
    _claim(rep, "geometry-simplex-etf")["evidence"]["statement"]["geometry"] = "orthogonal-frame"
    rc, out, err = _rejudge(tmp_path, rep)
    assert out is not None, err
    assert out["verdict"] == "INCONCLUSIVE"
    assert _claim(out, "geometry-simplex-etf")["verdict"] != "VERIFIED"
    assert out["rigorous"] is False


def test_removed_value_statement_with_a_false_prediction_is_refused(tmp_path, saved):
    rep = copy.deepcopy(saved)
    for c in rep["claims"]:
        c["evidence"].pop("statement", None)
    opt = _claim(rep, "optimal-value")
    opt["evidence"].update(predicted=0.2, attained=0.2)  # the true optimum is 0.14902...
    rep["predicted"]["value"] = 0.2
    for ver in ("1.2", "1.1"):
        rep["schema_version"] = ver
        rc, out, err = _rejudge(tmp_path, rep)
        assert rc == 2 and out is None
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "'optimal-value'" in lines[0] and "statement" in lines[0], err


def test_nothing_rejudged_is_never_verified(tmp_path, saved):
    rep = copy.deepcopy(saved)
    rep["instance"].update(lw=0.5, lh=0.5)  # zero phase: geometry-simplex-etf is false here
    _claim(rep, "optimal-value")["verdict"] = "NOT_APPLICABLE"
    for i in POINT_IDS:
        _claim(rep, i)["evidence"].pop("statement")
    rc, out, err = _rejudge(tmp_path, rep)
    assert out is not None, err
    assert out["verdict"] != "VERIFIED" and out["rigorous"] is False
    rep["claims"] = []
    rc, out, err = _rejudge(tmp_path, rep)
    assert out is not None and out["verdict"] != "VERIFIED", err


# SCL (UFM+, docs/scl.md): the orthogonal frame is the unique minimiser for nonnegative features; its statements
# about the point are PointWithinRadius (deviation + L radius <= tau) resting on the certified optimum.
SCL_ARGV = ["solve", "scl", "--counts", "3,3,3", "--tau", "0.5", "--json"]
SCL_POINT_IDS = ("geometry-orthogonal-frame", "within-class-collapse", "unique-minimiser")


@pytest.fixture(scope="module")
def saved_scl():
    rc, out, err = _main(SCL_ARGV)
    assert rc == 0, err
    rep = json.loads(out)
    assert rep["verdict"] == "VERIFIED" and {c["id"] for c in rep["claims"]} >= set(SCL_POINT_IDS)
    return rep


def test_scl_untampered_report_stays_verified(tmp_path, saved_scl):
    rc, out, err = _rejudge(tmp_path, copy.deepcopy(saved_scl))
    assert rc == 0 and out["verdict"] == "VERIFIED", err


@pytest.mark.parametrize("edit", ["signed-features", "value-not-applicable"])
def test_scl_point_statements_withdrawn_without_a_proven_optimum(tmp_path, saved_scl, edit):
    rep = copy.deepcopy(saved_scl)
    # features of any sign: the balanced SCL minimiser is a simplex ETF (docs/scl.md), not the orthogonal frame
    rep["instance"]["nonneg"] = False
    if edit == "value-not-applicable":
        for c in rep["claims"]:
            if c["id"] in ("theorem-lower-bound", "optimal-value"):
                c["verdict"] = "NOT_APPLICABLE"
    rc, out, err = _rejudge(tmp_path, rep)
    assert out is not None, err
    assert out["verdict"] != "VERIFIED"
    for i in SCL_POINT_IDS:
        assert _claim(out, i)["verdict"] != "VERIFIED", i


def test_scl_point_statement_whose_numbers_fail_is_not_verified(tmp_path, saved_scl):
    rep = copy.deepcopy(saved_scl)
    st = _claim(rep, "geometry-orthogonal-frame")["evidence"]["statement"]
    st["deviation"] = 50 * st["tau"]  # deviation far above the tolerance: the statement's own numbers refute it
    rc, out, err = _rejudge(tmp_path, rep)
    assert out is not None, err
    assert _claim(out, "geometry-orthogonal-frame")["verdict"] != "VERIFIED"
    assert out["verdict"] != "VERIFIED"


def test_statementless_checks_withdrawn_on_an_edited_instance(tmp_path):
    # solve ufm --counts 6,6,2,1 (MSE): minority-collapse-threshold and class-mean-cosines carry no statement;
    # with the counts edited to balanced 6,6,6,6 the saved optimum is REFUTED (the balanced MSE optimum differs,
    # docs/ufm.md) and those checks, made on the imbalanced instance, must not stay VERIFIED
    rc, out, err = _main(["solve", "ufm", "--counts", "6,6,2,1", "--loss", "mse", "--lambda-w", "5e-3",
                          "--lambda-h", "5e-3", "-d", "5", "--json"])
    assert rc == 0, err
    rep = json.loads(out)
    ids = {c["id"] for c in rep["claims"] if not (c["evidence"] or {}).get("statement")}
    assert {"minority-collapse-threshold", "class-mean-cosines"} <= ids
    rep["instance"].update(counts=[6, 6, 6, 6], N=24)
    rc, res, err = _rejudge(tmp_path, rep)
    assert res is not None, err
    assert _claim(res, "optimal-value")["verdict"] == "REFUTED"
    for i in ("minority-collapse-threshold", "class-mean-cosines", "minimiser-unique", "minority-geometry"):
        assert _claim(res, i)["verdict"] != "VERIFIED", i


@pytest.mark.parametrize("edit,what", [
    ({"smoothing_convention": "bogus"}, "smoothing_convention"),
    ({"target_true": 0.5}, "target_true"),  # torch eps = 0.1, K = 4: q_true = 1 - 3 (0.1/4) = 0.925 exactly
    ({"smoothing_convention": "others: eps/(K-1) off-label"}, "target_true"),  # others: q_true = 0.9, not 0.925
])
def test_label_smoothing_loss_inconsistent_with_its_targets_is_refused(tmp_path, edit, what):
    # before: an unknown convention was read as torch and the stated targets were ignored (VERIFIED, exit 0 for
    # a file whose loss description contradicts itself)
    rc, out, err = _main(["solve", "ufm", "--loss", "ls", "--smoothing", "0.1", "-k", "4", "-n", "3", "-d", "4",
                          "--lambda-w", "5e-3", "--lambda-h", "5e-3", "--json"])
    assert rc == 0, err
    rep = json.loads(out)
    assert rep["instance"]["loss"]["target_true"] == 0.925
    rep["instance"]["loss"].update(edit)
    rc, res, err = _rejudge(tmp_path, rep)
    lines = err.strip().splitlines()
    assert rc == 2 and res is None and len(lines) == 1 and what in lines[0], err
