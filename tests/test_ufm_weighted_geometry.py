"""Weighted cross-entropy on balanced classes: the simplex-ETF statement is the package's for a loss symmetric
under permutations of the classes; unequal class weights break the symmetry (as imbalance does), so the
statement is NOT_APPLICABLE there (never REFUTED), and it stays a checked statement for equal weights."""

import json

import numpy as np
import pytest

from proofs_check.cli import main

BASE = ["solve", "ufm", "--loss", "weighted-ce", "--counts", "2,2,2", "-d", "2", "--lambda-w", "0.01",
        "--lambda-h", "0.01", "--json"]


def _solve(capsys, weights):
    rc = main(BASE + ["--class-weights", weights])
    out = json.loads(capsys.readouterr().out)
    return rc, out, {c["id"]: c for c in out["claims"]}


def test_unequal_weights_state_no_simplex_etf(capsys):
    rc, out, claims = _solve(capsys, "1,2,3")
    geo = claims["geometry-simplex-etf"]
    assert geo["verdict"] == "NOT_APPLICABLE" and "class weights are unequal" in geo["reason"]
    assert rc == 0 and out["verdict"] == "VERIFIED"
    # independent of the package's classifier: the certified minimiser's class means are not equiangular
    # (a simplex ETF of 3 classes has every off-diagonal cosine -1/2)
    cos = np.array(out["class_mean_cosines"] if "class_mean_cosines" in out else out["geometry"]["class_mean_cosines"])
    off = cos[~np.eye(3, dtype=bool)]
    assert np.ptp(off) > 0.05 and np.max(np.abs(off + 0.5)) > 0.03


def test_equal_weights_keep_the_statement(capsys):
    rc, out, claims = _solve(capsys, "2,2,2")
    assert claims["geometry-simplex-etf"]["verdict"] == "VERIFIED"
    assert rc == 0 and out["verdict"] == "VERIFIED"


def test_smoothed_target_preferring_other_classes_states_no_geometry(capsys):
    """eps = 0.6667, 'others' convention: q_true = 0.3333 < q_other = 0.33335, outside the closed form's
    hypothesis q_true > q_other; the certified minimiser is Z = 0 (the target is almost uniform), so the
    former default statement 'simplex-etf' was REFUTED although the package predicts nothing there."""
    rc = main(["solve", "ufm", "--loss", "ls", "--smoothing", "0.6667", "--smoothing-convention", "others",
               "--counts", "2,2,2", "-d", "2", "--lambda-w", "0.01", "--lambda-h", "0.01", "--json"])
    out = json.loads(capsys.readouterr().out)
    claims = {c["id"]: c for c in out["claims"]}
    assert claims["geometry-simplex-etf"]["verdict"] == "NOT_APPLICABLE"
    assert "q_true > q_other" in claims["geometry-simplex-etf"]["reason"]
    assert claims["closed-form"]["verdict"] == "NOT_APPLICABLE"
    assert rc == 0 and out["verdict"] == "VERIFIED"
