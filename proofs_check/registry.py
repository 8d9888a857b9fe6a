"""Claim registry: every module in ``proofs_check.claims`` that defines ``CLAIMS`` (a list of
:class:`~proofs_check.core.Claim`) is discovered automatically, so adding a family means adding
one module, not editing a central list.

Counts of independent and consistency checks (:func:`check_counts`) are known only after a claim
has run: a claim's check function decides at run time which checks it yields (per instance, per
route, NOT_APPLICABLE where a hypothesis fails), so no static count would be honest. They are
read from a :class:`~proofs_check.core.ClaimResult`, its ``to_dict()``, a ``SolveReport`` or a
saved ``ncproofs run --json`` report (:func:`counts_from_report`); :func:`listing` builds the
rows of ``ncproofs list`` with the counts where a run has measured them and ``None`` elsewhere.
"""

from __future__ import annotations

import fnmatch
import importlib
import json
import os
import pkgutil
import re
from typing import Any, Iterable, Mapping

from proofs_check.core import Claim, ClaimResult, SolveReport, Verdict
from theory._validate import InputError, input_file


class UnknownClaimError(InputError, KeyError):
    """An unknown claim id: bad input (an ``InputError``), and a ``KeyError`` for older callers."""

    __str__ = InputError.__str__


def claim_modules() -> list[str]:
    import proofs_check.claims as pkg

    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))


def all_claims() -> list[Claim]:
    """Every registered claim, in module order then definition order. Ids are unique.

    Returns a list of :class:`~proofs_check.core.Claim`; raises ``RuntimeError`` on a duplicate id
    (a defect of the claim modules)."""
    claims: list[Claim] = []
    seen: dict[str, str] = {}
    for name in claim_modules():
        mod = importlib.import_module(f"proofs_check.claims.{name}")
        for c in getattr(mod, "CLAIMS", []):
            if c.id in seen:
                raise RuntimeError(f"duplicate claim id {c.id!r} in {name} and {seen[c.id]}")
            seen[c.id] = name
            claims.append(c)
    return claims


# ---- naming grammar, aliases and selection -------------------------------------------------

#: The families. A claim id is ``<family>.<segment>(.<segment>)*``: its first part is the claim's
#: family, each segment is lower case ``[a-z0-9][a-z0-9_-]*`` (docs/DEVELOPING.md, "Naming").
FAMILIES = ("ufm", "ufm_general", "scl", "feature_collapse", "ntk", "crh", "deep_ufm")
SEGMENT = r"[a-z0-9][a-z0-9_-]*"
ID_RE = re.compile(rf"^(?:{'|'.join(FAMILIES)})(?:\.{SEGMENT})+$")

#: Former claim ids (before one grammar) -> canonical id. ``--only OLD``, :func:`get` and saved
#: reports keep working; ``ncproofs list`` and the JSON reports show the alias next to the id.
ALIASES: dict[str, str] = {
    **{f"ufm-{loss}-{name}": f"ufm.{loss}.{name}" for loss in ("ce", "mse")
       for name in ("symbolic-derivation", "optimal-value", "collapse-etf", "trivial-phase")},
    "ufm-ce-bias-penalty-invariance": "ufm.ce.bias-penalty-invariance",
    "ufm-ls-optimal-value": "ufm_general.label-smoothing.optimal-value",
    "ufm-ls-collapse-etf": "ufm_general.label-smoothing.collapse-etf",
    "ufm-regression-optimal-value": "ufm_general.regression.optimal-value",
    **{f"ntk-{name}": f"ntk.{name}" for name in ("spectrum", "inverse", "rates", "invariant", "scatter", "nc1-bound",
                                                  "small-init-limit", "lazy-no-collapse", "e-zero")},
}


def valid_id(claim_id: str, family: str | None = None) -> bool:
    """Does ``claim_id`` follow the grammar (and start with ``family`` when given)?"""
    return (isinstance(claim_id, str) and ID_RE.match(claim_id) is not None
            and (family is None or claim_id.split(".", 1)[0] == family))


def canonical_family(name: str) -> str | None:
    """The family a name spells (``feature-collapse`` and ``feature_collapse`` are one family), or None."""
    fam = name.strip().lower().replace("-", "_")
    return fam if fam in FAMILIES else None


def aliases_of(claim_id: str) -> list[str]:
    """Former ids of a claim (oldest spelling first)."""
    return [old for old, new in ALIASES.items() if new == claim_id]


def resolve_id(name: str) -> str:
    """The canonical id of an id or a former id (unchanged when it is not an alias)."""
    return ALIASES.get(name, name)


def _patterns(patterns) -> list[str] | None:
    """None, one pattern (a string) or a list of non-empty strings."""
    if patterns is None:
        return None
    if isinstance(patterns, str):
        patterns = [patterns]
    if isinstance(patterns, (bytes, Mapping)) or not isinstance(patterns, Iterable):
        raise TypeError(f"patterns must be a list of strings (claim ids, families or globs), got "
                        f"{type(patterns).__name__} {patterns!r}")
    out = list(patterns)
    for i, p in enumerate(out):
        if not isinstance(p, str):
            raise TypeError(f"patterns[{i}] must be a string, got {type(p).__name__} {p!r}")
        if not p.strip():
            raise InputError(f"patterns[{i}] must be a non-empty string (an id, a family or a glob), got {p!r}")
    return out


def _claims(claims) -> list[Claim]:
    if isinstance(claims, (str, bytes, Mapping)) or not isinstance(claims, Iterable):
        raise TypeError(f"claims must be a list of proofs_check.core.Claim, got {type(claims).__name__}")
    out = list(claims)
    for i, c in enumerate(out):
        if not isinstance(c, Claim):
            raise TypeError(f"claims[{i}] must be a proofs_check.core.Claim, got {type(c).__name__}")
    return out


def _names(c: Claim) -> list[str]:
    return [c.id, *aliases_of(c.id)]


def match(claims: list[Claim], pattern: str) -> list[Claim]:
    """The claims one pattern selects, by the first rule that selects any:

    1. a family name (``-`` and ``_`` alike): exactly that family (``ufm`` is the classic model only;
       ``ufm_general`` the any-loss engine; ``'ufm*'`` both);
    2. a claim id or a former id (an alias): that claim;
    3. a glob (``*?[``): ids, former ids and families matching it;
    4. otherwise: ids and former ids containing the pattern.
    """
    fam = canonical_family(pattern)
    if fam is not None:
        out = [c for c in claims if c.family == fam]
        if out:
            return out
    exact = [c for c in claims if pattern in _names(c)]
    if exact:
        return exact
    if any(ch in pattern for ch in "*?["):
        return [c for c in claims if any(fnmatch.fnmatchcase(n, pattern) for n in _names(c))
                or fnmatch.fnmatchcase(c.family, pattern.replace("-", "_"))]
    return [c for c in claims if any(pattern in n for n in _names(c))]


def select(claims: list[Claim], patterns: list[str] | str | None, *, strict: bool = False) -> list[Claim]:
    """Claims that any pattern selects (:func:`match`), in registry order. ``patterns`` is None or
    empty (all claims), one string, or a list of strings.

    Returns the matching claims; raises ``TypeError`` for patterns that are not strings, and with
    ``strict`` an :class:`UnknownClaimError` (bad input, with "did you mean") for a pattern that
    selects nothing."""
    claims = _claims(claims)
    patterns = _patterns(patterns)
    if not patterns:
        return list(claims)
    chosen: set[int] = set()
    for p in patterns:
        hit = match(claims, p)
        if not hit and strict:
            raise UnknownClaimError(f"--only {p}: no claim matches{suggest(claims, p)} (see `ncproofs list`)")
        chosen.update(id(c) for c in hit)
    return [c for c in claims if id(c) in chosen]


def suggest(claims: list[Claim], name: str) -> str:
    """``"; did you mean X or Y?"`` for the closest families and ids (empty when none is close)."""
    import difflib

    names = sorted({*FAMILIES, *(n for c in claims for n in _names(c))})
    key = name.strip().lower()
    close = difflib.get_close_matches(key, names, n=3, cutoff=0.6)
    close += [n for n in difflib.get_close_matches(key.replace("-", "_"), names, n=3, cutoff=0.6) if n not in close]
    if not close:  # a segment of an id: offer ids that contain a close segment
        segs = {s: n for n in names for s in n.replace("-", ".").split(".")}
        close = [segs[s] for s in difflib.get_close_matches(key, list(segs), n=3, cutoff=0.75)]
    close = list(dict.fromkeys(close))[:3]
    return "; did you mean " + " or ".join(close) + "?" if close else ""


def get(claim_id: str) -> Claim:
    """The registered claim with this id (or former id, :data:`ALIASES`); an unknown id raises
    :class:`UnknownClaimError` (an ``InputError`` and a ``KeyError``) with "did you mean"."""
    if not isinstance(claim_id, str):
        raise TypeError(f"claim_id must be a string, got {type(claim_id).__name__} {claim_id!r}")
    if not claim_id.strip():
        raise InputError("claim_id must be a non-empty string")
    claims = all_claims()
    want = resolve_id(claim_id)
    for c in claims:
        if c.id == want:
            return c
    raise UnknownClaimError(f"claim_id: unknown claim id {claim_id!r}{suggest(claims, claim_id)} "
                            "(see `ncproofs list`)")


# ---- counts of independent and consistency checks (known after a run) ----------------------

def _check_dicts(result: Any) -> list[dict]:
    """The checks of a result as dicts with "verdict" and "independent"."""
    if isinstance(result, ClaimResult):
        return [{"verdict": c.verdict.value, "independent": bool(c.independent)} for c in result.checks]
    if isinstance(result, SolveReport):
        return [{"verdict": c.verdict.value, "independent": bool(c.independent)} for c in result.claims]
    if isinstance(result, Mapping):
        items = result.get("checks", result.get("claims"))
        if not isinstance(items, list) or not all(isinstance(c, Mapping) for c in items):
            raise InputError("result: a dict must hold a list of checks under 'checks' (a ClaimResult.to_dict()) "
                             "or 'claims' (a SolveReport.to_dict())")
        out = []
        for i, c in enumerate(items):
            try:
                v = Verdict(c.get("verdict")).value
            except ValueError:
                raise InputError(f"result: check {i} has no valid verdict ({c.get('verdict')!r})") from None
            # a check without the flag was written before the flag existed: count it as independent,
            # as core.Check does by default
            ind = c.get("independent", True)
            if not isinstance(ind, bool):  # "false", NaN and 2 were all counted as independent (bool() of them)
                raise InputError(f"result: check {i} has 'independent' = {ind!r}: it must be true or false")
            out.append({"verdict": v, "independent": ind})
        return out
    raise TypeError(f"result must be a ClaimResult, a SolveReport or one of their to_dict() dicts, got "
                    f"{type(result).__name__}")


def check_counts(result: Any) -> dict[str, int]:
    """Counts of a run's checks: ``independent`` (compared with a separate computation),
    ``consistency`` (restatements, ``independent=False``), ``not_applicable`` (of either kind, a
    failed hypothesis), ``independent_verified`` (what a VERIFIED verdict rests on: a claim with 0
    here is never VERIFIED) and ``total``.

    ``result``: a :class:`~proofs_check.core.ClaimResult` (from ``Claim.run``), a ``SolveReport``,
    or the ``to_dict()`` of either (e.g. one entry of the ``claims`` list of ``ncproofs run --json``).
    """
    checks = _check_dicts(result)
    ind = sum(1 for c in checks if c["independent"])
    return {"independent": ind, "consistency": len(checks) - ind,
            "not_applicable": sum(1 for c in checks if c["verdict"] == Verdict.NOT_APPLICABLE.value),
            "independent_verified": sum(1 for c in checks if c["independent"]
                                        and c["verdict"] == Verdict.VERIFIED.value),
            "total": len(checks)}


def check_counts_text(counts: Mapping[str, int] | None) -> str:
    """``"3 independent + 1 consistency"`` (``"not run"`` without counts)."""
    if counts is None:
        return "not run"
    text = f"{counts['independent']} independent + {counts['consistency']} consistency"
    if counts.get("not_applicable"):
        text += f" ({counts['not_applicable']} not applicable)"
    return text


#: Largest saved run report read back (`list --counts-from`): a full run's JSON is a few MB.
MAX_REPORT_BYTES = 256 * 2 ** 20


def counts_from_report(report: str | os.PathLike | Mapping) -> dict[str, dict[str, int]]:
    """Check counts per claim id from a saved ``ncproofs run --json`` report (a path or the loaded dict)."""
    if isinstance(report, (str, os.PathLike)):
        path = input_file("report", report, max_bytes=MAX_REPORT_BYTES)
        try:
            with open(path, encoding="utf-8") as f:
                report = json.load(f)
        except FileNotFoundError:
            raise InputError(f"report: no such file {path!r}") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
            raise InputError(f"report: cannot read {path!r} as an `ncproofs run --json` report: "
                             f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}") from None
        if not isinstance(report, Mapping):  # valid JSON, but not a report: bad input, not a defect
            raise InputError(f"report: {path!r} is not an `ncproofs run --json` report (its top level is a "
                             f"{type(report).__name__}, not an object)")
    if not isinstance(report, Mapping):
        raise TypeError(f"report must be a path or a dict (an `ncproofs run --json` report), got "
                        f"{type(report).__name__}")
    claims = report.get("claims")
    if not isinstance(claims, list) or not all(isinstance(c, Mapping) and isinstance(c.get("id"), str)
                                               for c in claims):
        raise InputError("report: not an `ncproofs run --json` report (needs a list 'claims' of objects with 'id')")
    out = {}
    for c in claims:
        try:
            out[resolve_id(c["id"])] = check_counts(c)  # a report saved before the renames: former ids
        except (TypeError, ValueError, KeyError) as exc:  # a malformed entry of a file is bad input
            raise InputError(f"report: claim {c['id']!r} is not an `ncproofs run --json` claim entry (its 'checks' "
                             f"must be a list of checks with 'verdict' and 'independent'): "
                             f"{' '.join(str(exc).split())[:200]}") from None
    return out


def listing(claims: list[Claim], counts: Mapping[str, Mapping[str, int]] | None = None) -> list[dict]:
    """Rows for ``ncproofs list``: id, family, provenance, source, statement, and the check counts of a
    run where known (``counts``: claim id -> :func:`check_counts`, e.g. :func:`counts_from_report`);
    ``None`` for a claim that has not been run (the counts exist only after running)."""
    claims = _claims(claims)
    if counts is not None and not isinstance(counts, Mapping):
        raise TypeError(f"counts must be a dict claim id -> check counts, got {type(counts).__name__}")
    counts = counts or {}
    rows = []
    for c in claims:
        n = counts.get(c.id)
        rows.append({"id": c.id, "aliases": aliases_of(c.id), "family": c.family,
                     "provenance": c.provenance.value, "source": c.source, "statement": c.statement,
                     "independent_checks": None if n is None else n["independent"],
                     "consistency_checks": None if n is None else n["consistency"],
                     "checks": check_counts_text(n)})
    return rows
