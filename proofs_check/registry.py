"""Claim registry: every module in ``proofs_check.claims`` that defines ``CLAIMS`` (a list of
:class:`~proofs_check.core.Claim`) is discovered automatically, so adding a family means adding
one module, not editing a central list."""

from __future__ import annotations

import fnmatch
import importlib
import pkgutil

from proofs_check.core import Claim


def claim_modules() -> list[str]:
    import proofs_check.claims as pkg

    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))


def all_claims() -> list[Claim]:
    """Every registered claim, in module order then definition order. Ids are unique."""
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


def select(claims: list[Claim], patterns: list[str] | None) -> list[Claim]:
    """Claims whose id or family matches any pattern (glob, or substring when no glob chars)."""
    if not patterns:
        return list(claims)
    out = []
    for c in claims:
        for p in patterns:
            glob = any(ch in p for ch in "*?[")
            if (glob and (fnmatch.fnmatch(c.id, p) or fnmatch.fnmatch(c.family, p))) or \
                    (not glob and (p in c.id or p == c.family)):
                out.append(c)
                break
    return out


def get(claim_id: str) -> Claim:
    for c in all_claims():
        if c.id == claim_id:
            return c
    raise KeyError(f"unknown claim id {claim_id!r}")
