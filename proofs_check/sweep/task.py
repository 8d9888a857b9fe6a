"""Running one instance (in a worker process, a Dask worker or in-process)."""

from __future__ import annotations

import math
import os
import socket
import time
import traceback

from proofs_check.core import Verdict, clean
from theory._validate import InputError
from proofs_check.sweep.config import _import_modules
from proofs_check.sweep.registry import _REGISTRY, RIGOROUS_SUFFIX, VERDICT_ORDER, discover_builtin, rigorous_result


def _execute(name: str, modules: list[str], params: dict, seed: int) -> tuple[dict, float, str]:
    """Run one instance (in a worker). Never raises: a crash becomes an ERROR result. ``name`` ending in
    :data:`~proofs_check.sweep.registry.RIGOROUS_SUFFIX`: the sweepable's solve report goes through
    ``proofs_check.rigorous.apply`` (:func:`~proofs_check.sweep.registry.rigorous_result`)."""
    t0 = time.perf_counter()
    worker = f"{socket.gethostname()}:{os.getpid()}"
    rigorous = name.endswith(RIGOROUS_SUFFIX)
    if rigorous:
        name = name[:-len(RIGOROUS_SUFFIX)]
    try:
        _import_modules(modules)
        if name not in _REGISTRY:
            discover_builtin()
        sw = _REGISTRY.get(name)
        if sw is None:
            raise RuntimeError(f"sweepable {name!r} is not registered in this worker "
                               f"(list the module that registers it under sweep.modules)")
        res = rigorous_result(sw, params, seed) if rigorous else sw.fn(dict(params), int(seed))
        if not isinstance(res, dict) or "verdict" not in res:
            raise TypeError(f"sweepable {name!r} must return a dict with a 'verdict', got {type(res).__name__}")
        try:
            v = Verdict(str(res["verdict"]))
        except ValueError:
            raise ValueError(f"sweepable {name!r} returned verdict {res['verdict']!r} "
                             f"(expected one of {', '.join(VERDICT_ORDER)})") from None
        out = dict(res)
        out["verdict"] = v.value
        if v is Verdict.VERIFIED:
            bad = [k for k, x in out.items() if isinstance(x, (float, int)) and not isinstance(x, bool)
                   and not math.isfinite(x)]
            if bad:  # a number that is not finite never passes: not VERIFIED with a null
                out["verdict"] = Verdict.INCONCLUSIVE.value
                out["reason"] = (f"the sweepable returned VERIFIED with a number that is not finite ({bad[0]} = "
                                 f"{out[bad[0]]!r}); a NaN or inf never passes")
        out = clean(out)
    except InputError as exc:
        # the family refused the instance (its size is over the budget, a parameter out of range): that is not a
        # defect, so not ERROR; stored as INCONCLUSIVE with the refusal (rerun with other limits after deleting it)
        msg = " ".join(str(exc).split())
        out = {"verdict": Verdict.INCONCLUSIVE.value, "reason": f"refused: {msg}", "refused": True}
    except Exception as exc:
        msg = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        out = {"verdict": Verdict.ERROR.value, "reason": msg, "traceback": traceback.format_exc(limit=8)}
    return out, time.perf_counter() - t0, worker

