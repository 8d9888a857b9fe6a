"""The phase of the classic UFM at the threshold rho0 = 1, decided in exact rational arithmetic
(solvers.ufm_classic.exact_phase; docs/ufm.md, "Exact phase at the threshold")."""

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from proofs_check.cli import main
from solvers import ufm_classic as UC
from theory.ufm import UFMInstance


def _solve(capsys, *args):
    rc = main(["solve", *args, "--json"])
    out = json.loads(capsys.readouterr().out)
    return rc, out, {c["id"]: c for c in out["claims"]}


# (family, k, n, lw, lh): rho0^2 = n / (N^2 lw lh) = 1 with doubles that are exact dyadic rationals
AT_THRESHOLD = [("ufm-ce", 2, 1, 0.5, 0.5), ("ufm-ce", 4, 4, 0.125, 0.125), ("ufm-ce", 4, 4, 0.0625, 0.25),
                ("ufm-mse", 2, 1, 0.5, 0.5), ("ufm-mse", 4, 1, 0.25, 0.25)]


@pytest.mark.parametrize("fam,k,n,lw,lh", AT_THRESHOLD)
def test_exactly_at_the_threshold_the_unique_minimiser_is_zero(capsys, fam, k, n, lw, lh):
    rc, out, claims = _solve(capsys, fam, "-k", str(k), "-n", str(n), "-d", str(k - 1), "--lambda-w", repr(lw),
                             "--lambda-h", repr(lh))
    ex = out["geometry"]["phase"]["exact"]
    assert ex["at_threshold"] is True and ex["rho0_squared"] == "1/1"
    assert claims["minimiser-unique"]["verdict"] == "VERIFIED" and "exact phase" in claims["minimiser-unique"]["reason"]
    assert claims["geometry-zero"]["verdict"] == "VERIFIED"
    assert rc == 0 and out["verdict"] == "VERIFIED"
    # the value there is the zero phase's: CE log k, MSE (k - 1) n / (2 N) (the loss of Z = 0 with b = 1/k)
    want = math.log(k) if fam == "ufm-ce" else (k - 1) / (2 * k)
    assert out["certificate"]["lower_bound"] == pytest.approx(want, rel=1e-12)


def test_inside_the_band_on_the_collapse_side_stays_undecided(capsys):
    """lw = lh = 0.49999999999: exact rho0 > 1 (a simplex ETF of scale ~1e-11 is the minimiser) but float64 is
    within the band: the statements about the minimiser are INCONCLUSIVE, never VERIFIED as zero."""
    rc, out, claims = _solve(capsys, "ufm-ce", "-k", "2", "-n", "1", "-d", "1", "--lambda-w", "0.49999999999",
                             "--lambda-h", "0.49999999999")
    assert claims["minimiser-unique"]["verdict"] == "INCONCLUSIVE"
    assert all(c["verdict"] != "REFUTED" for c in claims.values())
    assert not any(c["verdict"] == "VERIFIED" and c["id"] == "geometry-zero" for c in claims.values())


def _inst(k, n, lw, lh, loss="ce"):
    return UFMInstance(loss, k, n, k - 1, lw, lh)


def test_exact_phase_sides_of_one_double():
    at = UC.exact_phase(_inst(2, 1, 0.5, 0.5))
    below = UC.exact_phase(_inst(2, 1, 0.5, np.nextafter(0.5, 0.0)))  # lam below 1/2: rho0 > 1, collapse
    above = UC.exact_phase(_inst(2, 1, 0.5, np.nextafter(0.5, 1.0)))  # lam above: rho0 < 1, zero
    assert (at["zero_minimiser"], at["at_threshold"]) == (True, True)
    assert (below["zero_minimiser"], below["at_threshold"]) == (False, False)
    assert (above["zero_minimiser"], above["at_threshold"]) == (True, False)


@settings(max_examples=40, deadline=None)
@given(k=st.integers(2, 30), n=st.integers(1, 6), lw=st.floats(1e-4, 2.0), lh=st.floats(1e-4, 2.0))
def test_exact_ratio_matches_the_float_gradient_norm(k, n, lw, lh):
    """Independent of the Fraction formula: rho0 by a float SVD of the gradient at zero (the solver's
    zero_phase_ratio) equals sqrt of the exact rational to float accuracy, for CE and MSE."""
    from solvers import ufm as S

    for loss in ("ce", "mse"):
        inst = _inst(k, n, lw, lh, loss)
        ex = UC.exact_phase(inst)
        r2 = Fraction(ex["rho0_squared"])
        rho0 = S.zero_phase_ratio(inst)["rho0"]
        assert rho0 == pytest.approx(math.sqrt(float(r2)), rel=1e-12)
        assert ex["zero_minimiser"] == (r2 <= 1)
