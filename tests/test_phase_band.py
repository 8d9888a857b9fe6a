"""Within PHASE_RTOL of the UFM phase threshold float64 cannot tell a vanishing simplex ETF from the zero
minimiser: no statement about the minimiser may be VERIFIED there from float64 alone, in any of the UFM commands
(`solve ufm` once VERIFIED "the closed form (zero) is the unique minimiser" at lw = lh = fl(1/6), k = 3, n = 4,
where 36 fl(1/6)^2 < 1 exactly, so the true minimiser is a simplex ETF with margin ~1.7e-16). Every UFM command
decides the side in exact rationals and VERIFIES the zero phase where it holds (docs/ufm.md and
docs/ufm_general.md, "Exact phase at the threshold"); the collapse side stays INCONCLUSIVE."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from proofs_check import cli

SIXTH_BELOW = 0.16666666666666666  # fl(1/6) < 1/6: collapse phase, margin ~1e-16
SIXTH_ABOVE = 0.16666666666666669  # the next double: zero phase


def test_the_instances_straddle_the_threshold_exactly():
    assert 36 * Fraction(SIXTH_BELOW) ** 2 < 1 < 36 * Fraction(SIXTH_ABOVE) ** 2  # s = sqrt(n lw lh) vs 1/k


POINT_STATEMENTS = ("minimiser-unique", "geometry-", "collapse", "self-duality", "constant-bias", "bias-one-over-k")


@pytest.mark.parametrize("lam", [SIXTH_BELOW, SIXTH_ABOVE])
@pytest.mark.parametrize("family", [["ufm"], ["ufm", "--loss", "mse"], ["ufm-ce"], ["ufm-mse"]])
def test_minimiser_statements_in_the_band_are_verified_only_by_exact_rationals(family, lam, capsys):
    size = ["-d", "3", "--classes", "3", "--per-class", "4"] if family[0] == "ufm" else \
        ["--classes", "3", "--per-class", "4", "--dim", "3"]
    rc = cli.main(["solve", *family, *size, "--lambda-w", repr(lam), "--lambda-h", repr(lam), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    by = {c["id"]: c for c in out["claims"]}
    assert by["optimal-value"]["verdict"] == "VERIFIED"  # the value is decided on both sides
    points = [c for c in out["claims"] if c["id"].startswith(POINT_STATEMENTS)]
    if lam == SIXTH_ABOVE:
        # every UFM command decides the side of rho0 = 1 in exact rationals (docs/ufm.md, docs/ufm_general.md,
        # "Exact phase at the threshold"): zero phase, so Z = 0 is the unique minimiser, VERIFIED with that reason
        assert points and all(c["verdict"] == "VERIFIED" for c in points), [(c["id"], c["verdict"]) for c in points]
        assert "exact phase" in by["minimiser-unique"]["reason"]
        assert any(c["id"] == "geometry-zero" for c in points)
        return
    assert points and all(c["verdict"] == "INCONCLUSIVE" for c in points), [(c["id"], c["verdict"]) for c in points]
