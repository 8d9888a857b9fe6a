"""`solve scl` below the closed forms' dimension (d < k - 1, or d < k with nonnegative features): the class-reduced
dual proves the lower bound, the value and geometry statements are NOT_APPLICABLE (their hypothesis fails), and
only a bounded confirmation runs (the multi-start search took 80 s at 1000 classes of 2 with d = 3);
`--method factored` still runs the search."""

from __future__ import annotations

import dataclasses
import json

from proofs_check import cli
from proofs_check.claims import scl as C
from theory import scl as T


def _solve(capsys, *extra, k=12):
    rc = cli.main(["solve", "scl", "--counts", ",".join(["2"] * k), "--tau", "0.5", "--dim", "3", "--json", *extra])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    return json.loads(cap.out)


def test_small_dimension_runs_a_bounded_confirmation_only(capsys):
    inst = T.SCLInstance(tuple([2] * 12), 0.5, 3)
    assert T.dimension_below_closed_forms(inst) and not T.certificate_first_applies(inst)
    out = _solve(capsys)
    v = {c["id"]: c for c in out["claims"]}
    assert v["theorem-lower-bound"]["verdict"] == "VERIFIED"
    assert v["optimal-value"]["verdict"] == "NOT_APPLICABLE" and "hypothesis fails" in v["optimal-value"]["reason"]
    conf = v["confirmation-solve"]
    assert conf["verdict"] == "VERIFIED" and "proven lower bound (not attained" in conf["reason"]
    assert conf["evidence"]["confirmation_value"] >= conf["evidence"]["proven_lower_bound"]
    assert out["solution"]["starts"] == 1
    assert any("below the closed forms' dimension" in d for d in out["diagnostics"])
    small = _solve(capsys, k=8)
    full = _solve(capsys, "--method", "factored", "--starts", "3", k=8)
    assert full["solution"]["starts"] > 1 and not any("below the closed forms" in d for d in full["diagnostics"])
    # the search's best value is never below the proven bound, and the bound is the same on both routes
    fv = {c["id"]: c for c in full["claims"]}
    assert fv["theorem-lower-bound"]["verdict"] == "VERIFIED"
    bound = {c["id"]: c for c in small["claims"]}["confirmation-solve"]["evidence"]["proven_lower_bound"]
    assert full["solution"]["value"] >= bound - 1e-9


def test_confirmation_below_the_proven_bound_is_refuted():
    inst = T.SCLInstance(tuple([2] * 8), 0.5, 3)
    parts = C.instance_checks(inst, starts=1, seed=0, hops=0)
    res = parts["result"]
    assert res.confirmation is not None and not res.certified_first
    bad = dataclasses.replace(res, confirmation=dict(res.confirmation, value=res.bounds.value - 1.0))
    chk = C._confirmation_check("confirmation-solve", bad, inst)
    assert chk.verdict.name == "REFUTED" and "below the proven lower bound" in chk.reason
