"""`ncproofs list --counts-from RUN.json` / `registry.check_counts`: a check's `independent` flag in a saved report
must be true or false. Before the fix it was read with `bool()`, so `"false"`, `NaN` and `2` counted as
independent checks (and as what a VERIFIED verdict rests on); now they are bad input naming the check
(docs/user_claims.md, "Counts of independent and consistency checks")."""

from __future__ import annotations

import json

import pytest

from proofs_check.cli import main
from proofs_check.registry import InputError, check_counts, counts_from_report


@pytest.mark.parametrize("flag", ["false", "true", float("nan"), 2, 0, None, [], {}])
def test_a_flag_that_is_not_a_boolean_is_refused(flag):
    with pytest.raises(InputError, match="check 0 has 'independent'"):
        check_counts({"checks": [{"verdict": "VERIFIED", "independent": flag}]})


def test_booleans_and_a_missing_flag_count_as_before():
    got = check_counts({"checks": [{"verdict": "VERIFIED", "independent": True},
                                   {"verdict": "VERIFIED", "independent": False},
                                   {"verdict": "NOT_APPLICABLE"}]})
    assert got == {"independent": 2, "consistency": 1, "not_applicable": 1, "independent_verified": 1, "total": 3}


def test_list_counts_from_a_report_with_a_string_flag_exits_2(tmp_path, capsys):
    rep = tmp_path / "run.json"
    rep.write_text(json.dumps({"claims": [{"id": "scl.tau_limits",
                                           "checks": [{"verdict": "VERIFIED", "independent": "false"}]}]}))
    assert main(["list", "--only", "scl.tau_limits", "--counts-from", str(rep)]) == 2
    err = capsys.readouterr().err
    assert "independent" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(InputError):
        counts_from_report(str(rep))
