"""`solve ufm-ce|ufm-mse --starts N` counts the factored solver's random starts; with --method closed-form or
convex no factored solve runs, so a typed --starts was silently ignored. It is refused in one line (exit 2)
naming --starts and the method; the default (no --starts) runs every method as before."""

from __future__ import annotations

import json

import pytest

from proofs_check.cli import main

BASE = ["-k", "3", "-n", "2", "-d", "3", "--lambda-w", "1e-3", "--lambda-h", "1e-3"]


@pytest.mark.parametrize("cmd", ["ufm-ce", "ufm-mse"])
@pytest.mark.parametrize("method", ["closed-form", "convex"])
def test_typed_starts_with_a_method_that_runs_no_factored_solve_is_refused(capsys, cmd, method):
    rc = main(["solve", cmd] + BASE + ["--method", method, "--starts", "5"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "--starts" in err[0] and f"--method {method}" in err[0]


def test_closed_form_without_starts_is_verified(capsys):
    rc = main(["solve", "ufm-ce"] + BASE + ["--method", "closed-form", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["claims"] and all(c["verdict"] == "VERIFIED" for c in out["claims"])


def test_starts_with_the_factored_method_is_accepted_and_range_checked(capsys):
    assert main(["solve", "ufm-ce"] + BASE + ["--method", "factored", "--starts", "2", "--json"]) == 0
    capsys.readouterr()
    assert main(["solve", "ufm-ce"] + BASE + ["--method", "factored", "--starts", "0"]) == 2
    assert "--starts must be in [1," in capsys.readouterr().err
