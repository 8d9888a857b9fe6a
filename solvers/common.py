"""Result types shared by every solver."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from theory import _work


@dataclass
class Certificate:
    """A proven lower bound on the global optimum and how it was obtained.

    ``gap = upper - lower_bound`` bounds the distance of ``upper`` (the value of a feasible
    point) to the true global optimum. ``method`` names the route, e.g. "kkt-dual" (a dual
    feasible point built from the KKT conditions at a candidate), "convex-program" (a solved
    convex reformulation; its lower bound is the dual value of its solution), "theorem-bound".
    """

    lower_bound: float
    upper: float
    method: str
    details: dict = field(default_factory=dict)

    @property
    def gap(self) -> float:
        return float(self.upper - self.lower_bound)

    def to_dict(self) -> dict:
        return {"lower_bound": float(self.lower_bound), "gap": self.gap, "method": self.method,
                "upper": float(self.upper), **self.details}


@dataclass
class Solution:
    """What a solver found: value, optimizer variables, convergence diagnostics."""

    value: float
    method: str
    converged: bool
    seconds: float
    variables: dict[str, np.ndarray] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    certificate: Certificate | None = None

    def to_dict(self) -> dict:
        return {"value": float(self.value), "method": self.method, "converged": bool(self.converged),
                "seconds": float(self.seconds), **self.diagnostics}


#: Below this many flops per matrix product, BLAS runs single-threaded: thread start-up and
#: spin-waiting cost more than they save on small products, and on a loaded 2-core machine a
#: threaded 100 x 128 x 500 product was measured 25x slower than a single-threaded one.
SMALL_GEMM_FLOPS = 2e8


def blas_threads(flops_per_gemm: float):
    """Context manager: single-threaded BLAS for small products (any below SMALL_GEMM_FLOPS; 0 for always), unchanged otherwise."""
    import contextlib

    if flops_per_gemm >= SMALL_GEMM_FLOPS:
        return contextlib.nullcontext()
    return _controller().limit(limits=1, user_api="blas")


def blas_all_threads():
    """Context manager: BLAS on every usable core, e.g. for a memory-bound pass over a large
    array inside a region that :func:`blas_threads` made single-threaded (measured: the L-BFGS
    memory passes at 6 million variables ran 2-4x faster on two cores than on one)."""
    return _controller().limit(limits=usable_cores(), user_api="blas")


def usable_cores() -> int:
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _controller():
    global _CONTROLLER
    if _CONTROLLER is None:  # inspecting the loaded libraries costs ~2 ms: do it once
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


_CONTROLLER = None


# ---- the one conic-solve wrapper ---------------------------------------------------------------

#: Clarabel with tight interior-point tolerances: a dual certificate built from the primal point
#: inherits its error (default tolerances leave gaps ~1e-5 on cross-entropy programs; these ~1e-9).
CLARABEL_TIGHT = {"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12, "tol_ktratio": 1e-10,
                  "max_iter": 500}
#: Retries when Clarabel stops at "optimal_inaccurate": no equilibration, then smaller static
#: regularisation (each attempt is recorded in the returned diagnostics).
CLARABEL_RETRIES = ({"equilibrate_enable": False}, {"static_regularization_constant": 1e-10})
#: SCS fallback settings (first-order: loose, so only a fallback).
SCS_SETTINGS = {"eps": 1e-9, "max_iters": 100000}


def solve_conic(problem, *, solver: str | None = None, tight: bool = True, retries: bool = True) -> dict:
    """Solve a cvxpy problem with one fallback policy and return what happened, as data.

    Policy: Clarabel (tight settings unless ``tight=False``) and, when it does not reach "optimal",
    its retries; then SCS if Clarabel raised or is not installed. Solver warnings ("solution may be
    inaccurate") are captured, never printed: they come back in ``warnings``, and the status says
    what they meant. Never raises for solver trouble: ``status`` is then "solver error: ...".

    Returns ``{"status", "solver", "attempts": [{"solver", "options", "status"}], "warnings": [...],
    "optimal": bool}``. Callers decide nothing from "optimal": a lower bound must come from a dual
    point checked or repaired in floating point, not from the solver's word.
    """
    import warnings as _warnings

    import cvxpy as cp

    installed = cp.installed_solvers()
    order = [solver] if solver else [s for s in ("CLARABEL", "SCS") if s in installed]
    attempts, caught, status, used = [], [], "not solved", None
    for name in order:
        if name == "CLARABEL":
            base = dict(CLARABEL_TIGHT) if tight else {}
            plans = [base] + ([{**base, **r} for r in CLARABEL_RETRIES] if retries else [])
        elif name == "SCS":
            plans = [dict(SCS_SETTINGS)]
        else:
            plans = [{}]
        for opts in plans:
            with _warnings.catch_warnings(record=True) as rec:
                _warnings.simplefilter("always")
                try:
                    problem.solve(solver=name, **opts)
                    status = str(problem.status)
                except Exception as exc:  # solver trouble is data; the caller's verdict says INCONCLUSIVE
                    status = f"solver error: {type(exc).__name__}: {str(exc)[:200]}"
            caught.extend(str(w.message)[:200] for w in rec)
            attempts.append({"solver": name, "options": opts, "status": status})
            used = name
            if status == "optimal":
                break
        if status in ("optimal", "optimal_inaccurate"):
            break
    return {"status": status, "solver": used, "attempts": attempts, "warnings": caught,
            "optimal": status == "optimal"}


# ---- work budgets (docs/ufm_general.md, "Budgets") -----------------------------------------------

#: Reference rate of the solvers' work models (flop-equivalents per second). Refusals compare estimated WORK with
#: a fixed work limit (limit seconds x this rate), so the same input is refused or accepted on every machine and at
#: any load; the machine's measured rate is only stated, to translate the work into seconds here.
REFERENCE_FLOPS = 1e10


def measured_flops() -> float:
    """This machine's current single-thread GEMM rate (flop/s; :func:`theory._work.measured_flops`, cached)."""
    return _work.measured_flops()


def work_text(seconds_at_reference: float, limit_seconds: float) -> str:
    """'estimated work W flop-equivalents (limit L flop-equivalents, the same on every machine; ... measured rate
    R Gflop/s: about S s here)' for a work model expressed in seconds at REFERENCE_FLOPS (S = W / R)."""
    return _work.work_text(float(seconds_at_reference) * REFERENCE_FLOPS, float(limit_seconds) * REFERENCE_FLOPS,
                           "flop-equivalents", seconds_per_unit=1.0 / _work.CALIBRATION_FLOPS)
