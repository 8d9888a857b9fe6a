"""Result types shared by every solver."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


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
