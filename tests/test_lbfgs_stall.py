"""solvers.lbfgs.minimize's opt-in stall rule (``stall_iters``): a run whose gtol is below the gradient's floor
stops after that many iterations without progress instead of spending every evaluation; a run that converges
is unchanged by it."""

from __future__ import annotations

import numpy as np

from solvers import lbfgs


def _floored(x):
    # the value sits on its rounding floor (1 + 1e-20 |x|^2 == 1 in float64) while max |g| stays 2e-9, above
    # gtol = 1e-9: every line search "succeeds" (sufficient decrease below rounding) and nothing improves
    return 1.0 + 1e-20 * float(x @ x), np.where(x >= 0.0, 2e-9, -2e-9)


def test_stall_rule_stops_a_run_whose_gtol_is_below_the_floor():
    x0 = np.linspace(-1.0, 1.0, 7)
    free = lbfgs.minimize(_floored, x0, gtol=1e-9, maxiter=400)
    stop = lbfgs.minimize(_floored, x0, gtol=1e-9, maxiter=400, stall_iters=10)
    assert stop.message.startswith("stalled") and "in 10 iterations" in stop.message
    assert not free.message.startswith("stalled")
    assert stop.nfev < free.nfev / 3, (stop.nfev, free.nfev)
    assert stop.f == 1.0 and stop.nit == 10


def test_stall_rule_leaves_a_converging_run_unchanged():
    A = np.diag(np.arange(1.0, 11.0))

    def quad(x):
        return 0.5 * float(x @ A @ x), A @ x

    x0 = np.ones(10)
    a = lbfgs.minimize(quad, x0, gtol=1e-10, maxiter=500)
    b = lbfgs.minimize(quad, x0, gtol=1e-10, maxiter=500, stall_iters=5)
    assert a.message.startswith("converged") and b.message.startswith("converged")
    assert a.nit == b.nit and np.array_equal(a.x, b.x)
