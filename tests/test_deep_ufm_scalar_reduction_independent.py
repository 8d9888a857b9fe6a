"""`solve deep-ufm` (linear, MSE): the certified enclosure [lower_bound, upper] contains the optimum computed
independently from the scalar reduction of docs/deep_ufm.md, min f = sum_{i <= min(D, K)} min_s phi(s; sqrt(n_i))
+ sum_{i > r} n_i/(2N), phi(s; y) = (s - y)^2/(2N) + C s^(2/(L+1)), C = (L+1)/2 (lambda_H prod lambda_l)^(1/(L+1)),
each scalar minimum found here by a dense grid and golden-section refinement at 40 digits (not the package's
root isolation); and the verdicts are the same with python-flint hidden (the exact-rational fallback)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout

import mpmath as mp
import pytest

from proofs_check.cli import main


def _scalar_min(y, N, C, p):
    y = mp.mpf(y)

    def phi(s):
        return (s - y) ** 2 / (2 * N) + C * mp.power(s, p)

    grid = [y * mp.mpf(i) / 2000 for i in range(1, 2001)]
    i = min(range(len(grid)), key=lambda j: phi(grid[j]))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    for _ in range(160):
        a, b = lo + (hi - lo) * mp.mpf("0.381966"), lo + (hi - lo) * mp.mpf("0.618034")
        if phi(a) < phi(b):
            hi = b
        else:
            lo = a
    return min(phi(mp.mpf(0)), phi((lo + hi) / 2))


def _f_star(counts, D, L, lam):
    N, prod = sum(counts), mp.mpf(1)
    for x in lam:
        prod *= mp.mpf(x)
    C, p = mp.mpf(L + 1) / 2 * mp.power(prod, mp.mpf(1) / (L + 1)), mp.mpf(2) / (L + 1)
    ys = sorted((mp.sqrt(c) for c in counts), reverse=True)
    r = min(D, len(counts))
    return sum(_scalar_min(y, N, C, p) for y in ys[:r]) + sum(y ** 2 / (2 * N) for y in ys[r:])


CASES = [(1, [2, 2], 3, [0.03] * 2), (2, [2, 2, 2], 4, [1e-3] * 3), (2, [2] * 5, 6, [0.1] * 3),
         (3, [2, 2], 3, [0.03] * 4), (4, [2, 2, 2], 4, [0.1] * 5), (2, [5, 3, 1], 2, [1e-2] * 3),
         (3, [4, 1], 4, [1e-2, 2e-2, 5e-3, 1e-1]), (4, [3, 3, 3], 1, [5e-3] * 5), (2, [1, 1, 1], 3, [1e-12] * 3)]


def _argv(L, counts, D, lam):
    return ["solve", "deep-ufm", "-L", str(L), "--counts", ",".join(map(str, counts)), "-D", str(D), "--lambda",
            ",".join(map(repr, lam)), "--json", "--starts", "1"]


@pytest.mark.parametrize("L,counts,D,lam", CASES)
def test_certified_enclosure_contains_the_scalar_reduction_optimum(L, counts, D, lam):
    mp.mp.dps = 40
    o, e = io.StringIO(), io.StringIO()
    with redirect_stdout(o), redirect_stderr(e):
        rc = main(_argv(L, counts, D, lam))
    out = json.loads(o.getvalue())
    true = _f_star(counts, D, L, lam)
    lo, up = out["certificate"]["lower_bound"], out["certificate"]["upper"]
    # the grid search is itself accurate to ~1e-20 relative: a slack of 1e-15 relative covers it
    slack = mp.mpf("1e-15") * abs(true)
    assert mp.mpf(lo) <= true + slack and true - slack <= mp.mpf(up), (lo, mp.nstr(true, 20), up)
    assert up - lo <= 1e-12 * max(1.0, abs(float(true)))
    opt = next(c for c in out["claims"] if c["id"] == "optimal-value")
    assert opt["verdict"] == "VERIFIED" and out["verdict"] == "VERIFIED" and rc == 0


_HIDDEN = ("import sys, io, json, contextlib; sys.modules['flint'] = None\n"
           "from proofs_check.cli import main\n"
           "o = io.StringIO()\n"
           "with contextlib.redirect_stdout(o), contextlib.redirect_stderr(io.StringIO()): main(json.loads(sys.argv[1]))\n"
           "d = json.loads(o.getvalue()); print(json.dumps([d['verdict'], {c['id']: c['verdict'] for c in d['claims']},"
           " (d['certificate'] or {}).get('arithmetic')]))\n")


@pytest.mark.parametrize("argv", [
    _argv(3, [4, 1], 4, [1e-2, 2e-2, 5e-3, 1e-1]),
    _argv(2, [2, 2, 2], 4, [1e-2]) + ["--activation", "relu"],
    _argv(4, [1, 1], 2, [5e-2]) + ["--activation", "relu"],
])
def test_same_verdicts_with_python_flint_hidden(argv):
    pytest.importorskip("flint")
    o = io.StringIO()
    with redirect_stdout(o), redirect_stderr(io.StringIO()):
        main(list(argv))
    d = json.loads(o.getvalue())
    r = subprocess.run([sys.executable, "-c", _HIDDEN, json.dumps(argv)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-500:]
    verdict, claims, arith = json.loads(r.stdout)
    assert arith != (d["certificate"] or {}).get("arithmetic") or arith is None  # the fallback really ran
    assert verdict == d["verdict"] and claims == {c["id"]: c["verdict"] for c in d["claims"]}
