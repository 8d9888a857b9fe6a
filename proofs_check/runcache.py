"""A cache of deterministic claim results (the expensive sympy derivations) across ``ncproofs run``s.

Which claims: symbolic ones (tag ``symbolic`` without ``numeric``/``experiment``, or an id in
:data:`SYMBOLIC_IDS`), run without ``--rigorous``, whose verdict is VERIFIED, REFUTED or
NOT_APPLICABLE (an INCONCLUSIVE or ERROR result may depend on a budget or the machine: never
cached).

Never stale: the key is a SHA-256 over the claim id, profile and seed, the Python, numpy, scipy,
sympy and mpmath versions, and the *source text* of every module the claim's module imports,
directly or through others (read with ``ast``, imports inside functions included) among
``theory/``, ``solvers/`` and ``proofs_check/``. Any edit of any of those files gives a new key;
old entries are simply never read again (``ncproofs run --clear-cache`` deletes them).

Where: ``$NCPROOFS_CACHE_DIR``, else ``$XDG_CACHE_HOME/ncproofs``, else ``~/.cache/ncproofs``;
one JSON file per entry (written atomically); ``timings/<profile>.json``: each claim's CPU
seconds in the last run, which only orders the work of parallel workers (longest first; no verdict
reads it); ``index/imports.json``: the import lists of the modules by the SHA-256 of their source (parsing
them all took about 1 CPU s a run; an edited source has a new hash, so it is parsed again). ``ncproofs run --no-cache`` or
``NCPROOFS_CACHE=0`` turns it off. A cache that cannot be read or written is ignored (the claim
simply runs).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import platform
from pathlib import Path
from typing import Iterable

from proofs_check.core import Check, Claim, ClaimResult, RunContext, Verdict, clean

#: symbolic claims without the ``symbolic`` tag (pure sympy derivations, deterministic)
SYMBOLIC_IDS = frozenset({"ufm.ce.symbolic-derivation", "ufm.mse.symbolic-derivation", "crh.identity.backprop",
                          "crh.identity.transfer", "crh.identity.scaled_projector", "crh.identity.isotropy_on_range",
                          "crh.identity.one_step", "crh.identity.stationarity", "crh.identity.relu_balance",
                          "crh.identity.transfer-inverse", "crh.pah.exponent_table"})
CACHED_VERDICTS = frozenset({Verdict.VERIFIED, Verdict.REFUTED, Verdict.NOT_APPLICABLE})
FORMAT = 1  # of the entry files
ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("theory", "solvers", "proofs_check")


def default_dir() -> Path:
    env = os.environ.get("NCPROOFS_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "ncproofs"


def enabled_by_env() -> bool:
    return os.environ.get("NCPROOFS_CACHE", "1") not in ("0", "false", "no", "off")


def cacheable(claim: Claim, ctx: RunContext) -> bool:
    tags = set(claim.tags)
    symbolic = ("symbolic" in tags and not tags & {"numeric", "experiment", "user"}) or claim.id in SYMBOLIC_IDS
    return symbolic and not ctx.rigorous


# ---- the modules a claim depends on ------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = p
    return mods


def _resolve(name: str | None) -> str | None:
    mods = _modules()
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def _raw_imports(source: bytes, filename: str, module: str, is_pkg: bool) -> list[list]:
    """The import statements of a source (``ast``, imports inside functions included) as name pairs
    ``[name, fallback]`` to resolve against the project's modules: ``from a import b`` is ``a.b`` (a
    submodule) else ``a``; relative imports are made absolute."""
    tree = ast.parse(source, filename=filename)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend([a.name, None] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            out.extend([f"{name}.{a.name}", name] for a in node.names)
    return out


#: parsed import lists by (module, SHA-256 of its source): parsing every module with ``ast`` took
#: about 1 CPU s of each ``ncproofs run``; the lists of unchanged sources are read back from the cache
#: directory (``index/imports.json``), so only an edited module is parsed again
_PARSED: dict[str, list] = {}
_PARSED_DIRTY = False


def _load_parsed(directory: Path | None) -> None:
    global _PARSED_DIRTY
    if directory is None or _PARSED:
        return
    try:
        doc = json.loads((directory / "index" / "imports.json").read_text(encoding="utf-8"))
        if isinstance(doc, dict) and doc.get("format") == FORMAT and isinstance(doc.get("imports"), dict):
            _PARSED.update(doc["imports"])
    except (OSError, ValueError):
        pass
    _PARSED_DIRTY = False


def _save_parsed(directory: Path | None) -> None:
    global _PARSED_DIRTY
    if directory is None or not _PARSED_DIRTY:
        return
    try:
        from proofs_check.outputs import write_text_atomic

        (directory / "index").mkdir(parents=True, exist_ok=True)
        write_text_atomic(directory / "index" / "imports.json", json.dumps({"format": FORMAT, "imports": _PARSED}))
        _PARSED_DIRTY = False
    except (OSError, ValueError, TypeError):
        pass


@functools.lru_cache(maxsize=None)
def _imports(module: str) -> frozenset[str]:
    global _PARSED_DIRTY
    path = _modules()[module]
    is_pkg = path.name == "__init__.py"
    data = path.read_bytes()
    memo = f"{module}:{hashlib.sha256(data).hexdigest()}"  # the list of exactly these bytes
    raw = _PARSED.get(memo)
    if not (isinstance(raw, list) and all(isinstance(r, list) and len(r) == 2 for r in raw)):
        raw = _raw_imports(data, str(path), module, is_pkg)
        _PARSED[memo] = raw
        _PARSED_DIRTY = True
    out = set()
    for name, fallback in raw:
        r = (_resolve(name) if isinstance(name, str) else None) or (_resolve(fallback) if isinstance(fallback, str)
                                                                   else None)
        if r:
            out.add(r)
    # a submodule import runs its packages' __init__ too
    parts = module.split(".")
    out.update(".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in _modules())
    out.discard(module)
    return frozenset(out)


def closure(module: str) -> list[str]:
    """``module`` and every project module it imports, directly or not (sorted)."""
    seen, todo = set(), [module]
    while todo:
        m = todo.pop()
        if m in seen or m not in _modules():
            continue
        seen.add(m)
        todo.extend(_imports(m))
    return sorted(seen)


@functools.lru_cache(maxsize=None)
def _source_hash(module: str) -> str:
    return hashlib.sha256(_modules()[module].read_bytes()).hexdigest()


def _versions() -> dict:
    import mpmath
    import numpy
    import scipy
    import sympy

    return {"python": platform.python_version(), "numpy": numpy.__version__, "scipy": scipy.__version__,
            "sympy": sympy.__version__, "mpmath": mpmath.__version__}


def key(claim: Claim, ctx: RunContext) -> str | None:
    """The cache key of a claim's result (None when its module is not one of the project's)."""
    module = getattr(claim.check, "__module__", None)
    if module not in _modules():
        return None
    deps = closure(module)
    doc = {"format": FORMAT, "id": claim.id, "profile": ctx.profile, "seed": ctx.seed, "versions": _versions(),
           "sources": {m: _source_hash(m) for m in deps}}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


# ---- entries ----------------------------------------------------------------------------------------

class RunCache:
    """Read and write cached results in ``directory`` (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike | None = None):
        self.dir = Path(directory) if directory is not None else default_dir()
        self.hits = self.misses = self.stored = 0
        _load_parsed(self.dir)

    def _path(self, k: str) -> Path:
        return self.dir / f"{k}.json"

    def get(self, claim: Claim, ctx: RunContext) -> ClaimResult | None:
        if not cacheable(claim, ctx):
            return None
        k = key(claim, ctx)
        if k is None:
            return None
        try:
            doc = json.loads(self._path(k).read_text(encoding="utf-8"))
            if doc.get("key") != k or doc.get("id") != claim.id:
                raise ValueError("mismatched entry")
            checks = [Check(c["name"], Verdict(c["verdict"]), c["reason"], dict(c.get("evidence") or {}),
                            bool(c.get("independent", True)), c.get("rigorous")) for c in doc["checks"]]
            res = ClaimResult(claim, Verdict(doc["verdict"]), doc["reason"], checks, float(doc["seconds"]))
        except (OSError, ValueError, KeyError, TypeError):
            self.misses += 1
            return None
        self.hits += 1
        return res

    def put(self, res: ClaimResult, ctx: RunContext) -> None:
        if not cacheable(res.claim, ctx) or res.verdict not in CACHED_VERDICTS:
            return
        k = key(res.claim, ctx)
        if k is None:
            return
        doc = {"key": k, "id": res.claim.id, "verdict": res.verdict.value, "reason": res.reason,
               "seconds": res.seconds, "checks": [c.to_dict() for c in res.checks]}
        try:
            from proofs_check.outputs import write_text_atomic

            self.dir.mkdir(parents=True, exist_ok=True)
            write_text_atomic(self._path(k), json.dumps(clean(doc), allow_nan=False))
            self.stored += 1
        except (OSError, ValueError, TypeError):
            pass  # a cache that cannot be written is no error: the claim ran

    # ---- CPU seconds of the last run (the order in which parallel workers take claims; no verdict reads them)

    def _timings_path(self, ctx: RunContext) -> Path:
        return self.dir / "timings" / f"{ctx.profile}{'-rigorous' if ctx.rigorous else ''}.json"

    def timings(self, ctx: RunContext) -> dict[str, float]:
        """Claim id -> CPU seconds it took when last run under ``ctx``'s profile ({} when unknown)."""
        try:
            doc = json.loads(self._timings_path(ctx).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(doc, dict):
            return {}
        return {k: float(v) for k, v in doc.items() if isinstance(k, str) and isinstance(v, (int, float))
                and not isinstance(v, bool) and v >= 0}

    def record_timings(self, ctx: RunContext, seconds: dict[str, float]) -> None:
        """Merge ``seconds`` (claim id -> CPU seconds) into the stored timings, and store the import lists
        parsed in this run (``imports.json``); write errors are ignored (called once, at the end of a run)."""
        _save_parsed(self.dir)
        if not seconds:
            return
        doc = self.timings(ctx)
        doc.update({k: round(float(v), 4) for k, v in seconds.items()})
        try:
            from proofs_check.outputs import write_text_atomic

            self._timings_path(ctx).parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(self._timings_path(ctx), json.dumps(doc, sort_keys=True))
        except (OSError, ValueError, TypeError):
            pass

    def clear(self) -> int:
        """Delete every entry; returns how many."""
        n = 0
        for p in self.dir.glob("*.json") if self.dir.is_dir() else ():
            try:
                p.unlink()
                n += 1
            except OSError:
                pass
        return n


def cacheable_ids(claims: Iterable[Claim], ctx: RunContext) -> list[str]:
    return [c.id for c in claims if cacheable(c, ctx)]
