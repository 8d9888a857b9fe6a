"""Work budgets stated in work, not in seconds (shared by theory/, solvers/ and proofs_check/).

Every refusal of an instance that is too large compares an estimate of WORK (flop-equivalents, objective
evaluations, score entries, ODE steps, operations) with a fixed limit in the same unit, so the same command is
refused or accepted identically on every machine and at any load. This machine's speed is only *stated*: the
message translates the work into "about S s here" at the single-thread GEMM rate measured now
(:func:`measured_flops`). Nothing here decides anything.
"""

from __future__ import annotations

#: The single-thread GEMM rate (flop/s) :func:`measured_flops` gives on the shared 2-core development machine on
#: which the work models' seconds were calibrated (measured 5.0e10-5.5e10 flop/s, load ~1). A work model whose
#: unit costs ``seconds_per_unit`` there costs about ``seconds_per_unit x CALIBRATION_FLOPS / measured rate`` here.
CALIBRATION_FLOPS = 5e10

_MEASURED: list = []


def measured_flops() -> float:
    """This machine's current single-thread GEMM rate (flop/s; 3 products of 256 x 256, best of 3; cached).
    Informative only: no decision may depend on it."""
    if not _MEASURED:
        import time

        import numpy as np

        A = np.random.default_rng(0).standard_normal((256, 256))
        best = float("inf")
        try:
            from threadpoolctl import threadpool_limits

            limit = threadpool_limits(1, user_api="blas")
        except Exception:  # the rate is informative only
            limit = None
        try:
            for _ in range(3):
                t = time.perf_counter()
                A @ A
                best = min(best, time.perf_counter() - t)
        finally:
            if limit is not None:
                limit.restore_original_limits()
        _MEASURED.append(2.0 * 256 ** 3 / max(best, 1e-9))
    return _MEASURED[0]


def rate_text(calibration_seconds: float) -> str:
    """"this machine's measured single-thread rate R Gflop/s: about S s here" for work that costs
    ``calibration_seconds`` on the calibration machine ('' when the rate cannot be measured)."""
    try:
        rate = measured_flops()
        here = float(calibration_seconds) * CALIBRATION_FLOPS / rate
        return f"this machine's measured single-thread rate {rate / 1e9:.3g} Gflop/s: about {here:.3g} s here"
    except Exception:  # the statement is informative only
        return ""


def work_text(work: float, limit: float, unit: str = "flop-equivalents", *, seconds_per_unit: float,
              limit_note: str = "") -> str:
    """'estimated work W UNIT (limit L UNIT[ LIMIT_NOTE], the same on every machine; this machine's measured
    single-thread rate R Gflop/s: about S s here)'. ``seconds_per_unit``: what one unit of work costs on the
    calibration machine (CALIBRATION_FLOPS), used only to state the seconds here."""
    here = rate_text(float(work) * float(seconds_per_unit))
    note = f" {limit_note}" if limit_note else ""
    return (f"estimated work {float(work):.3g} {unit} (limit {float(limit):.3g} {unit}{note}, the same on every "
            f"machine{'; ' + here if here else ''})")
