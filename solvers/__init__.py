"""ncproofs solver layer: numeric models and optimizers. Returns data, never verdicts."""

from solvers.common import Certificate, Solution

__all__ = ["Certificate", "Solution"]
