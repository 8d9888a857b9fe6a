"""solvers/<family>.py: the model's objective, a solver and a certificate. Returns data only."""

from __future__ import annotations

import time

from scipy.optimize import minimize_scalar

from solvers.common import Certificate, Solution


def objective(lam: float, x: float) -> float:
    return 0.5 * lam * x * x - x


def solve(inst) -> Solution:
    t0 = time.perf_counter()
    res = minimize_scalar(lambda x: objective(inst.lam, x), bounds=(0.0, 10.0 / inst.lam), method="bounded",
                          options={"xatol": 1e-12 / inst.lam})
    return Solution(objective(inst.lam, res.x), "bounded-brent", bool(res.success), time.perf_counter() - t0,
                    {"x": res.x})


def certificate(inst, x: float) -> Certificate:
    """Proven lower bound: the objective is lam-strongly convex, so f* >= f(x) - f'(x)^2 / (2 lam)."""
    g = inst.lam * x - 1.0
    f = objective(inst.lam, x)
    return Certificate(f - g * g / (2 * inst.lam), f, "strong-convexity bound",
                       {"radius": abs(g) / inst.lam})  # |x - x*| <= |f'(x)| / lam
