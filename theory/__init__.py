"""ncproofs theory layer: closed-form predictions and symbolic derivations.

Pure functions of a problem instance. This package imports neither ``solvers`` nor
``proofs_check``.
"""

from theory._validate import InstanceError

__all__ = ["InstanceError"]
