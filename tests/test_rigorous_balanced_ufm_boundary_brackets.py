"""`solve ufm-ce|ufm-mse --rigorous`: the proven bracket [lower, upper] contains the exact optimum of the instance
(the doubles as given), computed independently at 50 digits from the closed forms of docs/ufm.md
(CE: f* = log k when s = sqrt(n lw lh) >= 1/k, else -log(1 - (k-1)s) + (k-1) s log(1/s - (k-1)); MSE: z =
max(sqrt(n) - N lam, 0), f* = (k-1)((sqrt(n) - z)^2/(2N) + lam z)), at boundary instances: the zero-phase
threshold exactly and one double either side, k = 2, n = 1, lambda 1e-12, a bias penalty (CE: f* unchanged).
The report is never REFUTED on these true instances."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import mpmath as mp
import numpy as np
import pytest

pytest.importorskip("flint")

from proofs_check.cli import main  # noqa: E402


def _f_ce(k, n, lw, lh):
    s = mp.sqrt(n * mp.mpf(lw) * mp.mpf(lh))
    if s >= mp.mpf(1) / k:
        return mp.log(k)
    return -mp.log(1 - (k - 1) * s) + (k - 1) * s * mp.log(1 / s - (k - 1))


def _f_mse(k, n, lw, lh):
    lam, N = mp.sqrt(mp.mpf(lw) * mp.mpf(lh)), k * n
    z = max(mp.sqrt(n) - N * lam, 0)
    if z == 0:
        return mp.mpf(k - 1) * n / (2 * N)  # (sqrt n)^2 exactly
    return (k - 1) * ((mp.sqrt(n) - z) ** 2 / (2 * N) + lam * z)


_Q = 0.25
_X = float(1 / (3 * np.sqrt(2)))  # k = 3, n = 2: s = sqrt(2) x = 1/3 up to rounding
CASES = [(4, 1, lw, _Q, ()) for lw in (_Q, float(np.nextafter(_Q, 0)), float(np.nextafter(_Q, 1)))]
CASES += [(3, 2, x, x, ()) for x in (_X, float(np.nextafter(_X, 0)), float(np.nextafter(_X, 1)))]
CASES += [(2, 1, 1e-3, 2e-3, ()), (2, 5, 0.3, 0.3, ()), (5, 1, 1e-12, 1e-12, ()), (3, 4, 1e-12, 0.3, ())]
BIAS = [(4, 3, 5e-3, 5e-3, ("--lambda-b", "0.7")), (3, 2, 0.2, 0.2, ("--lambda-b", "1e-3"))]


def _solve(fam, k, n, lw, lh, extra):
    o, e = io.StringIO(), io.StringIO()
    argv = ["solve", fam, "-k", str(k), "-n", str(n), "-d", str(k + 1), "--lambda-w", repr(lw), "--lambda-h",
            repr(lh), "--json", "--rigorous", *extra]
    with redirect_stdout(o), redirect_stderr(e):
        rc = main(argv)
    assert o.getvalue(), e.getvalue()
    return rc, json.loads(o.getvalue())


@pytest.mark.parametrize("fam,k,n,lw,lh,extra", [("ufm-ce", *c) for c in CASES + BIAS] + [("ufm-mse", *c) for c in CASES])
def test_proven_bracket_contains_the_exact_optimum(fam, k, n, lw, lh, extra):
    mp.mp.dps = 50
    rc, out = _solve(fam, k, n, lw, lh, extra)
    true = (_f_ce if fam == "ufm-ce" else _f_mse)(k, n, lw, lh)
    rig = out["certificate"]["rigorous"]
    lo, up = mp.mpf(rig["lower"][0]), mp.mpf(rig["upper"][1])
    assert lo <= true <= up, (fam, k, n, lw, lh, rig["lower"], rig["upper"], mp.nstr(true, 25))
    assert up - lo <= 1e-12 * max(1, abs(true))  # tight, so the containment means something
    assert out["verdict"] != "REFUTED" and rc == 0, [(c["id"], c["verdict"]) for c in out["claims"]]
    opt = next(c for c in out["claims"] if c["id"] == "optimal-value")
    assert opt["verdict"] == "VERIFIED" and opt["rigorous"] is True
