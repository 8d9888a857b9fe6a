"""Registry of sweepable functions: :func:`register_sweepable`, :func:`get_sweepable`, and the
helpers that turn core checks into a sweepable's result dict."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from proofs_check.commands import UsageError
from proofs_check.core import Check, ClaimResult, Verdict, worst

# worst first; NOT_APPLICABLE (a hypothesis fails) has no severity but is listed before VERIFIED
VERDICT_ORDER = ("ERROR", "REFUTED", "INCONCLUSIVE", "NOT_APPLICABLE", "VERIFIED")


def _scalar_ok(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str)) and not (isinstance(v, float) and not math.isfinite(v))


@dataclass(frozen=True)
class Sweepable:
    name: str
    fn: Callable[[dict, int], dict] | None  # None: known only from a store's record (keys, no computing)
    parameters: tuple[str, ...] | None  # None: any parameter name is accepted
    defaults: Mapping[str, Any]
    validate: Callable[[dict], None] | None
    version: str
    description: str
    #: ``report(params, seed) -> SolveReport`` (live: the recipe bounds its candidate, no second solve; or its
    #: ``to_dict()``) and ``from_report(report) -> result``, with
    #: ``fn(params, seed) == from_report(report(params, seed).to_dict())``: given for sweepables whose instances are solve
    #: reports, so that a rigorous sweep (``rigorous = true``) can pass the report through
    #: ``proofs_check.rigorous.apply`` before it is summarised (None: no rigorous sweep)
    report: Callable[[dict, int], dict] | None = None
    from_report: Callable[[dict], dict] | None = None


#: the task name of a rigorous instance: the sweepable's name + this suffix (it travels to local and Dask workers
#: with the name, see proofs_check.sweep.task._execute); no sweepable name may end with it
RIGOROUS_SUFFIX = "#rigorous"

_REGISTRY: dict[str, Sweepable] = {}


def register_sweepable(name: str, fn: Callable[[dict, int], dict], *, parameters: Iterable[str] | None = None,
                       defaults: Mapping[str, Any] | None = None, validate: Callable[[dict], None] | None = None,
                       version: str = "1", description: str = "", replace: bool = False,
                       report: Callable[[dict, int], dict] | None = None,
                       from_report: Callable[[dict], dict] | None = None) -> Sweepable:
    """Register ``fn(params, seed) -> {"verdict": ..., ...}`` under ``name`` for ``ncproofs sweep``.

    ``parameters`` lists the accepted parameter names (unknown names in a config are an error);
    ``defaults`` are merged into every instance (and so into its key; numbers, strings, booleans
    or None); ``validate(params)`` raises ``ValueError`` naming the bad parameter; ``version``
    is part of every instance key: bump it when the computation changes so stored results are
    not reused. ``report(params, seed)`` (the live ``SolveReport`` of a family with a rigorous recipe, or its
    ``to_dict()``) and ``from_report(report dict)`` (the result dict), given together with ``fn = from_report .
    to_dict . report``, let
    ``rigorous = true`` sweeps pass each report through ``proofs_check.rigorous.apply`` (docs/workflow.md).

    Returns the registered :class:`Sweepable`. Raises ``TypeError`` (wrong type) or
    ``ValueError`` (bad value; a name already registered to another function without
    ``replace=True``) naming the argument.
    """
    if not isinstance(name, str):
        raise TypeError(f"register_sweepable: name must be a str, got {type(name).__name__}")
    if not name or name != name.strip() or any(c.isspace() for c in name):
        raise ValueError(f"register_sweepable: name must be a non-empty string without spaces, got {name!r}")
    if name.endswith(RIGOROUS_SUFFIX):
        raise ValueError(f"register_sweepable: name must not end with {RIGOROUS_SUFFIX!r} (the rigorous task name)")
    if (report is None) != (from_report is None):
        raise TypeError(f"register_sweepable({name!r}): report and from_report go together (both or neither)")
    if report is not None and not (callable(report) and callable(from_report)):
        raise TypeError(f"register_sweepable({name!r}): report and from_report must be callable")
    if not callable(fn):
        raise TypeError(f"register_sweepable({name!r}): fn must be callable fn(params, seed) -> dict, "
                        f"got {type(fn).__name__} {fn!r}")
    if validate is not None and not callable(validate):
        raise TypeError(f"register_sweepable({name!r}): validate must be callable validate(params) or None, "
                        f"got {type(validate).__name__}")
    if not isinstance(replace, bool):
        raise TypeError(f"register_sweepable({name!r}): replace must be True or False, got {replace!r}")
    if isinstance(version, bool) or not isinstance(version, (str, int)) or str(version) == "":
        raise TypeError(f"register_sweepable({name!r}): version must be a non-empty str (or an int), got {version!r}")
    if not isinstance(description, str):
        raise TypeError(f"register_sweepable({name!r}): description must be a str, got {type(description).__name__}")
    if parameters is None:
        params = None
    else:
        if isinstance(parameters, (str, bytes)) or not isinstance(parameters, Iterable):
            raise TypeError(f"register_sweepable({name!r}): parameters must be a list of names or None, "
                            f"got {parameters!r}")
        params = tuple(parameters)
        bad = [p for p in params if not isinstance(p, str) or not p]
        if bad:
            raise TypeError(f"register_sweepable({name!r}): parameters must be non-empty strings, got {bad[0]!r}")
        dup = sorted({p for p in params if params.count(p) > 1})
        if dup:
            raise ValueError(f"register_sweepable({name!r}): parameters name {dup[0]!r} twice")
    if defaults is None:
        defaults = {}
    if not isinstance(defaults, Mapping):
        raise TypeError(f"register_sweepable({name!r}): defaults must be a dict, got {type(defaults).__name__}")
    defaults = dict(defaults)
    for k, v in defaults.items():
        if not isinstance(k, str) or not k:
            raise TypeError(f"register_sweepable({name!r}): defaults keys must be parameter names, got {k!r}")
        if not _scalar_ok(v):
            raise ValueError(f"register_sweepable({name!r}): defaults[{k!r}] must be a finite number, a string, "
                             f"a boolean or None (it is part of the instance key), got {v!r}")
    if params is not None:
        extra = sorted(set(defaults) - set(params))
        if extra:
            raise ValueError(f"defaults for {name!r} name unknown parameters: {', '.join(extra)}")
    if name in _REGISTRY and not replace and _REGISTRY[name].fn is not fn:
        raise ValueError(f"sweepable {name!r} is already registered (pass replace=True to override)")
    sw = Sweepable(name, fn, params, defaults, validate, str(version), description, report, from_report)
    _REGISTRY[name] = sw
    return sw


def sweepables() -> dict[str, Sweepable]:
    """Returns a copy of the registry: ``{name: Sweepable}`` of everything registered so far in
    this process (call :func:`discover_builtin` first for the families' sweepables). Raises
    nothing."""
    return dict(_REGISTRY)


_DISCOVERED = False


def discover_builtin() -> None:
    """Import every ``proofs_check.families`` module once, so that families which call
    :func:`register_sweepable` at import (as the CLI loads them) are registered here too
    (in a worker process, or when the Python API is used without the CLI).

    Returns None. Raises whatever a family module raises at import (a defect of that module)."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    _DISCOVERED = True
    from proofs_check.commands import discover

    discover()


def get_sweepable(name: str) -> Sweepable:
    """Returns the :class:`Sweepable` registered under ``name`` (importing the families first if
    it is not registered yet). Raises ``TypeError`` when ``name`` is not a str and
    ``UsageError`` (an InputError) naming the registered ones when it is unknown."""
    if not isinstance(name, str):
        raise TypeError(f"get_sweepable: name must be a str, got {type(name).__name__}")
    if name not in _REGISTRY:
        discover_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UsageError(f"sweep.family: unknown sweepable {name!r} (registered: "
                         f"{', '.join(sorted(_REGISTRY)) or 'none'})") from None


def _check_score(score) -> float | None:
    if score is None:
        return None
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise TypeError(f"score must be a number or None, got {type(score).__name__}")
    return score  # NaN/inf become null when stored (core.clean)


def result_from_checks(checks: list[Check], *, score: float | None = None, **extra) -> dict:
    """A sweepable result from core Checks: worst verdict, reason of the worst checks, evidence.

    Returns ``{"verdict", "reason", "score", "checks": [Check.to_dict()...], **extra}``. Raises
    ``ValueError`` for an empty list or an ``extra`` key that the checks set (verdict, reason,
    score, checks) and ``TypeError`` for entries that are not ``core.Check`` or a non-numeric
    score."""
    if isinstance(checks, Check):
        checks = [checks]
    if not isinstance(checks, (list, tuple)) or not checks:
        raise ValueError(f"result_from_checks: checks must be a non-empty list of core.Check, got {checks!r}")
    bad_type = [c for c in checks if not isinstance(c, Check)]
    if bad_type:
        raise TypeError(f"result_from_checks: checks must be core.Check objects, got {type(bad_type[0]).__name__}")
    _check_score(score)
    reserved = sorted(set(extra) & {"verdict", "reason", "score", "checks"})
    if reserved:
        raise ValueError(f"result_from_checks: {reserved[0]!r} is set from the checks; pass it differently")
    verdict = worst(c.verdict for c in checks)
    bad = [c for c in checks if c.verdict == verdict and verdict != Verdict.VERIFIED]
    reason = "; ".join(f"{c.name}: {c.reason}" for c in bad[:3]) if bad else f"all {len(checks)} checks hold"
    out = {"verdict": verdict.value, "reason": reason, "score": score,
           "checks": [c.to_dict() for c in checks]}
    out.update(extra)
    return out


def result_from_claim(res: ClaimResult, *, score: float | None = None) -> dict:
    """A sweepable result from a core ClaimResult.

    Returns ``{"verdict", "reason", "score", "checks"}``. Raises ``TypeError`` when ``res`` is not
    a ``core.ClaimResult`` or ``score`` is not a number or None."""
    if not isinstance(res, ClaimResult):
        raise TypeError(f"result_from_claim: res must be a core.ClaimResult, got {type(res).__name__}")
    _check_score(score)
    return {"verdict": res.verdict.value, "reason": res.reason, "score": score,
            "checks": [c.to_dict() for c in res.checks]}



def rigorous_sweepables() -> list[str]:
    """Names of the registered sweepables that support ``rigorous = true`` (their instances are solve reports:
    ``report``/``from_report`` given), after importing the families.

    Returns the sorted list of names. Raises whatever a family module raises at import (a defect)."""
    discover_builtin()
    return sorted(n for n, sw in _REGISTRY.items() if sw.report is not None)


def rigorous_result(sw: Sweepable, params: dict, seed: int) -> dict:
    """One rigorous instance: ``sw.report(params, seed)`` through :func:`proofs_check.rigorous.apply`, then
    ``sw.from_report``, with the bracket as top-level entries (so exports and summaries show them):
    ``rigorous_lower`` (the proven lower bound, ``lower[0]``), ``rigorous_upper`` (the proven feasible value,
    ``upper[1]``; None without one), ``rigorous`` (the report's flag: VERIFIED and every statement judged in
    balls proven) and ``rigorous_status`` ("proven bracket", or why there is none). The verdict is the
    judged report's.

    Returns the result dict. Raises ``ValueError`` when ``sw`` has no ``report``/``from_report``, and what the
    sweepable or ``apply`` raises (``_execute`` stores it as an ERROR)."""
    from proofs_check import rigorous as RG

    if sw.report is None or sw.from_report is None:
        raise ValueError(f"sweepable {sw.name!r} has no solve report: no rigorous sweep (supported: "
                         f"{', '.join(rigorous_sweepables()) or 'none'})")
    out = RG.apply(sw.report(dict(params), int(seed)))
    res = dict(sw.from_report(out))
    rig = (out.get("certificate") or {}).get("rigorous") or {}
    res["rigorous_lower"] = rig["lower"][0] if rig.get("lower") else None
    res["rigorous_upper"] = rig["upper"][1] if rig.get("upper") else None
    res["rigorous"] = bool(out.get("rigorous"))
    res["rigorous_status"] = ("proven bracket" if rig.get("lower") else
                              f"{rig.get('status', 'none')}: {rig.get('reason', '')}")
    return res
