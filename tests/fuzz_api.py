"""A fuzzer for the public Python API: hostile values for one parameter at a time of the instance
dataclasses, the solvers' solve functions, ``UserClaim`` and ``measure()``.

Contract: a bad value raises InputError / TypeError / ValueError whose message names the
parameter (never AttributeError, ZeroDivisionError, IndexError, OverflowError, ...), and NaN,
infinities, strings, booleans, None (where None is no default), containers, complex numbers and
integers beyond int64 are never silently accepted.

Used by tests/test_fuzz_cli.py; by hand: ``python tests/fuzz_api.py``.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

import numpy as np

NAN = float("nan")
INF = float("inf")

#: (label, value, must_refuse): values a numeric parameter must refuse whatever its range
ALWAYS_BAD = [("nan", NAN, True), ("inf", INF, True), ("-inf", -INF, True), ("np.nan", np.float64("nan"), True),
              ("str", "3", True), ("bool", True, True), ("np.bool_", np.True_, True), ("None", None, True),
              ("list", [], True), ("object", object(), True), ("complex", 1 + 1j, True),
              ("beyond int64", 10 ** 30, True), ("1e300", 1e300, True), ("array", np.array([1.0, 2.0]), True)]
#: values that may be valid or refused depending on the range (never a crash)
EDGE = [("-1", -1, False), ("0", 0, False), ("-0.0", -0.0, False), ("1e308", 1e308, False),
        ("tiny", 5e-324, False), ("Fraction", Fraction(1, 3), False), ("np.int64", np.int64(3), False),
        ("int64 max", 2 ** 63 - 1, False)]

OK_ERRORS = (TypeError, ValueError)
#: seconds one API call may take (the bases are tiny instances)
CALL_ALARM_S = 20


class _Hang(BaseException):
    pass


@dataclass
class Target:
    name: str
    build: Callable[..., Any]  # build(**kwargs)
    base: dict
    #: parameter -> names that count as naming it in a message
    aliases: dict
    #: parameters where None is a legitimate value (the default "absent")
    none_ok: tuple = ()
    #: sequence parameters (a list or an array is the right type there; an empty one may be valid)
    sequences: tuple = ()


def _ufm(**kw):
    from theory.ufm import UFMInstance
    return UFMInstance(**kw)


def _scl(**kw):
    from theory.scl import SCLInstance
    return SCLInstance(**kw)


def _ntk(**kw):
    from theory.ntk import NTKInstance
    return NTKInstance(**kw)


def _deep(**kw):
    from theory.deep_ufm import DeepUFMInstance
    return DeepUFMInstance(**kw)


def _fc(**kw):
    from theory.feature_collapse import FCInstance
    return FCInstance(**kw)


def _hier(**kw):
    from theory.feature_collapse_hier import HierInstance
    return HierInstance(**kw)


def _crh(**kw):
    from theory.crh import CRHExperiment
    return CRHExperiment(**kw)


def _ufm_factored(**kw):
    from solvers import ufm as U
    from theory.ufm import UFMInstance
    inst = UFMInstance("ce", k=3, n=2, d=3, lw=1e-2, lh=1e-2)
    kw.setdefault("maxiter", 50)
    return U.solve_factored(inst, **kw)


def _scl_factored(**kw):
    from solvers import scl as S
    from theory.scl import SCLInstance
    kw.setdefault("maxiter", 50)
    return S.solve_factored(SCLInstance((2, 2), 0.5, 2), **kw)


def _fc_solve(**kw):
    from solvers import feature_collapse as S
    from theory.feature_collapse import FCInstance
    return S.solve(FCInstance(n_c=2, L=2, s_c=2, d=2, lam=0.1), certify=False, **kw)


def _user(**kw):
    from proofs_check.user import UserClaim
    return UserClaim(**kw)


TARGETS = [
    Target("UFMInstance", _ufm, dict(loss="ce", k=3, n=2, d=3, lw=1e-2, lh=1e-2, lb=0.0),
           {"loss": ["loss"], "k": ["k"], "n": ["n"], "d": ["d"], "lw": ["lambda_w"], "lh": ["lambda_h"],
            "lb": ["lambda_b"]}),
    Target("SCLInstance", _scl, dict(counts=(2, 2), tau=0.5, d=2, nonneg=True, batches=None),
           {"counts": ["counts"], "tau": ["tau"], "d": ["d"], "nonneg": ["nonneg"], "batches": ["batch"]},
           none_ok=("batches",), sequences=("counts", "batches")),
    Target("NTKInstance", _ntk, dict(classes=2, per_class=2, kappa=(1.0, 0.6, 0.2), s=1.0),
           {"classes": ["C", "classes"], "per_class": ["m", "per_class"], "kappa": ["kappa"], "s": ["s"]},
           sequences=("kappa",)),
    Target("DeepUFMInstance", _deep, dict(layers=2, activation="linear", loss="mse", counts=(1, 1), width=2,
                                          lams=(0.01,)),
           {"layers": ["layers"], "activation": ["activation"], "loss": ["loss"], "counts": ["counts"],
            "width": ["width"], "lams": ["lam", "lambda"]}, sequences=("counts", "lams")),
    Target("FCInstance", _fc, dict(n_c=2, L=2, s_c=2, d=2, lam=0.1),
           {"n_c": ["n_c"], "L": ["L"], "s_c": ["s_c"], "d": ["d"], "lam": ["lambda"], "K": ["K"],
            "layernorm": ["layernorm"], "freqs": ["freqs"], "latents": ["latents"], "seed": ["seed"]},
           none_ok=("K", "freqs"), sequences=("freqs",)),
    Target("HierInstance", _hier, dict(n_m=2, n_c=2, s_c=2, L1=2, L2=2, d1=3, d2=3, lam=0.05),
           {"n_m": ["n_m"], "n_c": ["n_c"], "s_c": ["s_c"], "L1": ["L1"], "L2": ["L2"], "d1": ["d1"],
            "d2": ["d2"], "lam": ["lambda"]}),
    Target("CRHExperiment", _crh, dict(weight_decays=(0.01,), steps=20, lr=0.05, batch_size=8, n_samples=64,
                                       widths=(4, 8, 2), task_rank=2, noise=0.1, seed=0, n_records=4),
           {"weight_decays": ["weight_decay"], "steps": ["steps"], "lr": ["lr"], "batch_size": ["batch_size"],
            "n_samples": ["n_samples"], "widths": ["widths"], "task_rank": ["task_rank"], "noise": ["noise"],
            "seed": ["seed"], "n_records": ["n_records", "records"], "init_scale": ["init_scale"],
            "neuron_noise": ["neuron_noise"], "noise_layer": ["noise_layer"], "seeds": ["seeds"],
            "activation": ["activation"]},
           none_ok=("init_scale", "noise_layer"), sequences=("weight_decays", "widths", "seeds")),
    Target("solvers.ufm.solve_factored", _ufm_factored, dict(starts=1, seed=0),
           {"starts": ["starts"], "seed": ["seed"], "init_scale": ["init_scale"], "maxiter": ["maxiter"],
            "gtol": ["gtol"], "time_budget": ["time_budget"], "stop_at": ["stop_at"],
            "rebalance_every": ["rebalance_every"]},
           none_ok=("gtol", "time_budget", "stop_at", "rebalance_every")),
    Target("solvers.scl.solve_factored", _scl_factored, dict(starts=1, seed=0),
           {"starts": ["starts"], "seed": ["seed"], "maxiter": ["maxiter"], "hops": ["hops"],
            "time_budget": ["time_budget"], "stop_at": ["stop_at"], "hop_until": ["hop_until"]},
           none_ok=("time_budget", "stop_at", "hop_until")),
    Target("solvers.feature_collapse.solve", _fc_solve, dict(n_starts=1, seed=0),
           {"n_starts": ["n_starts", "starts"], "seed": ["seed"], "budget_s": ["budget"]}),
    Target("UserClaim", _user, dict(id="mine.x", statement="s", source="notes", params={},
                                    predict=lambda p: 1.0, solve=lambda p: 1.0, kind="equals", rtol=1e-9),
           {"rtol": ["rtol"], "atol": ["atol"], "geometry_tol": ["geometry_tol"], "max_examples": ["max_examples"],
            "id": ["id"], "statement": ["statement"], "source": ["source"], "kind": ["kind"],
            "on_inconclusive": ["on_inconclusive"], "provenance": ["provenance"]},
           none_ok=("atol", "geometry_tol", "max_examples", "rtol")),
]


@dataclass
class APIResult:
    target: str
    param: str
    label: str
    outcome: str  # "refused", "accepted", or the defect
    message: str = ""


#: solver parameters whose large values are legitimately expensive (the API has no work budget there)
EXPENSIVE = {"starts", "n_starts", "maxiter", "hops", "time_budget", "budget_s", "stop_at", "hop_until",
             "rebalance_every", "max_examples"}


#: an absolute tolerance has no scale-free upper bound (a huge atol is vacuous, but where it starts depends on the
#: values compared, known only when the claim runs), and a huge time budget or target value means "no limit":
#: not required to refuse huge values
SCALE_DEPENDENT = {"atol", "time_budget", "budget_s", "stop_at", "hop_until", "gtol"}


def check(t: Target, param: str, label: str, value, must_refuse: bool) -> APIResult:
    if param in SCALE_DEPENDENT and label in ("beyond int64", "1e300"):
        must_refuse = False
    if param in EXPENSIVE and label in ("1e308", "int64 max", "Fraction", "tiny"):
        return APIResult(t.name, param, label, "ok")
    import signal

    kw = dict(t.base)
    kw[param] = value

    def _alarm(signum, frame):
        raise _Hang()

    prev = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, CALL_ALARM_S)
    try:
        t.build(**kw)
    except _Hang:
        return APIResult(t.name, param, label, f"hang: no answer within {CALL_ALARM_S} s")
    except OK_ERRORS as exc:
        msg = str(exc)
        names = t.aliases.get(param, [param])
        if must_refuse and not any(n in msg for n in names):  # an edge value may break another's constraint
            return APIResult(t.name, param, label, "refused without naming the parameter", msg[:200])
        if type(exc) in (OverflowError, ZeroDivisionError, IndexError, KeyError):
            return APIResult(t.name, param, label, f"{type(exc).__name__}", msg[:200])
        return APIResult(t.name, param, label, "refused", msg[:200])
    except Exception as exc:  # noqa: BLE001
        return APIResult(t.name, param, label, f"raised {type(exc).__name__}", str(exc)[:200])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, prev)
    if param in t.sequences and label in ("list", "array"):
        return APIResult(t.name, param, label, "ok")
    if must_refuse and not (value is None and param in t.none_ok):
        return APIResult(t.name, param, label, "accepted")
    return APIResult(t.name, param, label, "ok")


def problems(targets=None) -> list[APIResult]:
    out = []
    for t in targets or TARGETS:
        for param in t.aliases:
            for label, v, must in ALWAYS_BAD + EDGE:
                if param in ("id", "statement", "source", "kind", "on_inconclusive", "provenance", "loss",
                             "activation", "latents") and label in ("str",):
                    continue  # a string is the right type there
                if param in ("nonneg", "layernorm") and label in ("bool", "np.bool_"):
                    continue
                r = check(t, param, label, v, must)
                if r.outcome not in ("refused", "ok"):
                    out.append(r)
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    only = sys.argv[1:] or None
    for t in TARGETS:
        if only is None or t.name in only:
            for r in problems([t]):
                print(f"{r.target}.{r.param} = {r.label}: {r.outcome} {r.message}", flush=True)
