"""solvers/lbfgs.py: the wall-clock deadline holds inside one L-BFGS run."""

from __future__ import annotations


def test_lbfgs_deadline_stops_inside_a_run():
    """The wall-clock budget holds inside one L-BFGS run (a review saw solve_factored's 60 s budget run 142 s,
    because it was checked only between starts)."""
    import time

    import numpy as np

    from solvers import lbfgs

    def slow_quadratic(x):
        time.sleep(0.01)
        return float(0.5 * x @ (np.arange(1, x.size + 1) * x)), np.arange(1, x.size + 1) * x

    t0 = time.perf_counter()
    res = lbfgs.minimize(slow_quadratic, np.ones(200), gtol=1e-300, maxiter=10_000, deadline=t0 + 0.3)
    assert res.message == "time budget reached"
    assert res.nit >= 1
    # without a deadline the same run goes on (stopped here by maxiter instead)
    res2 = lbfgs.minimize(slow_quadratic, np.ones(200), gtol=1e-300, maxiter=3)
    assert res2.message != "time budget reached"
