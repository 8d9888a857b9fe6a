"""One-hot MSE with a decayed bias (lambda_b > 0), balanced, in its exact zero phase K^2 n lw lh >= 1
(docs/ufm_general.md, "MSE with a regularised bias"): the unique minimiser is Z = 0 with b0 = 1/(K (1 + lb)), so the
package's own geometry statement is `geometry-zero`, VERIFIED; a claimed simplex ETF is REFUTED.

Before the fix the default statement there was `geometry-simplex-etf` (the default for routes without a closed-form
prediction) and the package REFUTED it itself: `ncproofs solve ufm --loss mse -k 3 -n 2 -d 3 --lambda-w 0.5
--lambda-h 0.5 --lambda-b 0.25` (K^2 n lw lh = 4.5) printed "verdict: REFUTED" for a true instance nobody had made a
false statement about. The zero minimiser is confirmed here independently: the sample-level objective written from
its definition is stationary at (W, H, b) = (0, 0, b0) and scipy's minimum from random starts equals its value
(1/2)(1 - 1/(K (1 + lb)))."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from proofs_check.cli import main as cli_main
from proofs_check.claims.ufm_general import check_general
from proofs_check.core import Verdict
from solvers import ufm_general as SG
from solvers.losses import make_loss


def _objective(K, n, d, lw, lh, lb):
    N = K * n
    Y = np.repeat(np.eye(K), n, axis=1)

    def f(x):
        W, H, b = x[:K * d].reshape(K, d), x[K * d:K * d + d * N].reshape(d, N), x[K * d + d * N:]
        R = W @ H + b[:, None] - Y
        val = 0.5 * np.sum(R * R) / N + 0.5 * (lw * np.sum(W * W) + lh * np.sum(H * H) + lb * np.sum(b * b))
        G = R / N
        return val, np.concatenate([(G @ H.T + lw * W).ravel(), (W.T @ G + lh * H).ravel(), G.sum(axis=1) + lb * b])

    return f, K * d + d * N + K


def _claims(rep):
    return {c.name: c for c in rep.claims}


@pytest.mark.parametrize("K,n,lw,lh,lb", [(3, 2, 0.5, 0.5, 0.25), (2, 1, 0.5, 0.5, 0.25), (4, 1, 0.3, 0.25, 2.0)])
def test_zero_phase_states_zero_and_verifies_it(K, n, lw, lh, lb):
    assert K * K * n * lw * lh >= 1.0
    p = SG.classification(make_loss("mse", K), [n] * K, K, lw, lh, lb)
    rep = check_general(p, starts=1)
    c = _claims(rep)
    assert rep.verdict is Verdict.VERIFIED, rep.reason
    assert c["geometry-zero"].verdict is Verdict.VERIFIED
    assert "geometry-simplex-etf" not in c
    claimed = _claims(check_general(p, starts=1, expected_geometry="simplex-etf"))
    assert claimed["geometry-simplex-etf"].verdict is Verdict.REFUTED
    # independent: (0, 0, b0) is stationary and no random start gets below its value
    b0 = 1.0 / (K * (1.0 + lb))
    f, size = _objective(K, n, K, lw, lh, lb)
    f0, g0 = f(np.concatenate([np.zeros(size - K), np.full(K, b0)]))
    assert abs(f0 - 0.5 * (1.0 - b0)) < 1e-15 and np.max(np.abs(g0)) < 1e-15
    rng = np.random.default_rng(0)
    best = min(minimize(f, rng.normal(size=size), jac=True, method="L-BFGS-B",
                        options={"maxiter": 20000, "ftol": 1e-16, "gtol": 1e-12}).fun for _ in range(4))
    assert best >= rep.certificate["lower_bound"] - 1e-12 and abs(best - f0) < 1e-9


def test_collapse_phase_still_states_the_simplex_etf():
    # K^2 n lw lh = 9 * 2 * 0.0025 = 0.045 < 1: the minimiser is nonzero and its centred class means a simplex ETF
    p = SG.classification(make_loss("mse", 3), [2, 2, 2], 3, 0.05, 0.05, 1.0)
    c = _claims(check_general(p, starts=1))
    assert c["geometry-simplex-etf"].verdict is Verdict.VERIFIED and "geometry-zero" not in c


def test_command_line_verdict_is_verified(capsys):
    rc = cli_main(["solve", "ufm", "--loss", "mse", "-k", "3", "-n", "2", "-d", "3", "--lambda-w", "0.5",
                   "--lambda-h", "0.5", "--lambda-b", "0.25"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "[VERIFIED] geometry-zero" in out and "REFUTED" not in out
