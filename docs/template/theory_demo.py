"""theory/<family>.py: what the paper predicts. Imports nothing from solvers or proofs_check."""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from theory._validate import as_float

#: The accepted range of lam: below 1e-150 the optimum -1/(2 lam) overflows float64's safe range.
LAM_RANGE = (1e-150, 1e150)


@dataclass(frozen=True)
class DemoInstance:
    lam: float

    def __post_init__(self):
        lam = as_float("lam", self.lam, positive=True)
        from theory._validate import InputError

        if not LAM_RANGE[0] <= lam <= LAM_RANGE[1]:
            raise InputError(f"lam must be in [{LAM_RANGE[0]:g}, {LAM_RANGE[1]:g}], got {lam:g}")
        object.__setattr__(self, "lam", lam)

    def hypotheses(self) -> list[str]:
        """Failed hypotheses of the theorem for this instance (empty: it applies)."""
        return []


def optimum(inst: DemoInstance) -> float:
    return -1.0 / (2.0 * inst.lam)


def minimiser(inst: DemoInstance) -> float:
    return 1.0 / inst.lam


def derivation():
    """Stationarity of (lam/2) x^2 - x at x = 1/lam: must simplify to 0."""
    lam, x = sp.symbols("lam x", positive=True)
    return sp.diff(lam / 2 * x**2 - x, x).subs(x, 1 / lam)
