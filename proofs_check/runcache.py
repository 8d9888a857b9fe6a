"""A cache of deterministic claim results (the expensive sympy derivations) across ``ncproofs run``s.

Which claims: symbolic ones (tag ``symbolic`` without ``numeric``/``experiment``, or an id in
:data:`SYMBOLIC_IDS`), run without ``--rigorous``, whose verdict is VERIFIED, REFUTED or
NOT_APPLICABLE (an INCONCLUSIVE or ERROR result may depend on a budget or the machine: never
cached).

Never stale: the key is a SHA-256 over the claim id, profile and seed, the Python, numpy, scipy,
sympy and mpmath versions, and the *source text* of every module the claim's module imports,
directly or through others (read from the source text, imports inside functions included) among
``theory/``, ``solvers/`` and ``proofs_check/``. Any edit of any of those files gives a new key;
old entries are simply never read again (``ncproofs run --clear-cache`` deletes them).

Where: ``$NCPROOFS_CACHE_DIR``, else ``$XDG_CACHE_HOME/ncproofs``, else ``~/.cache/ncproofs``;
one JSON file per entry (written atomically); ``timings/<profile>.json``: each claim's CPU
seconds in the last run, which only orders the work of parallel workers (longest first; no verdict
reads it), and ``timings/<profile>-imports.json``: the heavy libraries each claim imported (cvxpy,
scipy.integrate, ...), which only tells the workers which claims to take together. ``ncproofs run --no-cache`` or ``NCPROOFS_CACHE=0`` turns it off. A cache that cannot be read or written is ignored (the claim
simply runs).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
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


#: the parts of an import statement (bytes; backslash continuations joined first): the keyword ``import``;
#: ``from <dots and dotted name> import``; a dotted name (whitespace around the dots allowed, as Python does).
#: No word boundary is asked for before ``import`` and ``from`` (a leading ``\b`` makes ``re`` try every
#: position: 10x slower): ``reimport x`` counts too, which can only add a module
_CONTINUATION = re.compile(rb"\\\r?\n")
_IMPORT_WORD = re.compile(rb"import\b")
_FROM_CLAUSE = re.compile(rb"from\b[ \t\f]*([.\w \t\f]*?)[ \t\f]*\bimport\b")
_DOTTED = re.compile(rb"\*|[A-Za-z_]\w*(?:[ \t\f]*\.[ \t\f]*[A-Za-z_]\w*)*")
_LINE_REST = re.compile(rb"[^\n;#]*")
_BLANKS = re.compile(rb"[ \t\f]+")


def _import_targets(text: bytes, start: int) -> list[str]:
    """The names listed after an ``import`` keyword ending at ``text[start]``: a parenthesised list (over
    lines, comments dropped) or the rest of the logical line (up to ``;`` or a comment); ``as`` aliases
    dropped; ``*`` is ``*`` (``from a import *`` resolves to ``a``)."""
    n, i = len(text), start
    while i < n and text[i] in b" \t\f":
        i += 1
    if text[i:i + 1] == b"(":
        parts, j = [], i + 1
        while j < n:
            close, hash_ = text.find(b")", j), text.find(b"#", j)
            if close < 0:
                close = n
            if 0 <= hash_ < close:  # a comment inside the list (it may hold a ")")
                parts.append(text[j:hash_])
                eol = text.find(b"\n", hash_)
                j = n if eol < 0 else eol
                continue
            parts.append(text[j:close])
            break
        body = b"".join(parts)
    else:
        body = _LINE_REST.match(text, i).group(0)
    out = []
    for part in body.split(b","):
        m = _DOTTED.match(part.strip())
        if m:
            out.append(_BLANKS.sub(b"", m.group(0)).decode("ascii"))
    return out


def _raw_imports(source: bytes, filename: str, module: str, is_pkg: bool) -> list[list]:
    """The import statements of a source, imports inside functions included, as name pairs ``[name,
    fallback]`` to resolve against the project's modules: ``import a.b`` is ``a.b``; ``from a import b`` is
    ``a.b`` (a submodule) else ``a``; relative imports are made absolute.

    Read from the text, not parsed (``ast`` took 0.6-1 CPU s for the modules of a run's keys; this takes a
    few ms): every word ``import`` and every ``from ... import`` clause counts, wherever it stands (a
    statement after ``;`` or ``:``, continued lines, a docstring). Words in strings and comments can only
    add modules to a key, never drop one, so a key still changes with every module a claim imports
    (``tests/test_run_parallel.py`` compares with ``ast`` over every module of the project)."""
    text = _CONTINUATION.sub(b" ", source)
    out = [[name, None] for m in _IMPORT_WORD.finditer(text) for name in _import_targets(text, m.end())]
    for m in _FROM_CLAUSE.finditer(text):
        spec = _BLANKS.sub(b"", m.group(1)).decode("ascii", "replace")
        dots = len(spec) - len(spec.lstrip("."))
        name = spec[dots:]
        if dots:
            base = module.split(".") if is_pkg else module.split(".")[:-1]
            base = base[: len(base) - (dots - 1)]
            name = ".".join(base + ([name] if name else []))
        out.extend([f"{name}.{target}", name] for target in _import_targets(text, m.end()))
    return out


@functools.lru_cache(maxsize=None)
def _imports(module: str) -> frozenset[str]:
    path = _modules()[module]
    raw = _raw_imports(path.read_bytes(), str(path), module, path.name == "__init__.py")
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


@functools.lru_cache(maxsize=1)
def _versions() -> dict:
    """The versions the key holds, from the installed distributions' metadata: importing sympy and scipy to
    read ``__version__`` cost ~1 s before the first claim when no claim module had imported them yet. A
    library without metadata is imported and asked."""
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in ("numpy", "scipy", "sympy", "mpmath"):
        try:
            out[name] = metadata.version(name)
        except Exception:  # noqa: BLE001 - no metadata (a source checkout on the path): the module's own
            out[name] = str(getattr(__import__(name), "__version__", "unknown"))
    return out


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
        """Merge ``seconds`` (claim id -> CPU seconds) into the stored timings; write errors are ignored
        (called once, at the end of a run)."""
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

    # ---- the heavy libraries each claim imported (which claims a worker should take together; no verdict reads them)

    def _imports_path(self, ctx: RunContext) -> Path:
        return self.dir / "timings" / f"{ctx.profile}{'-rigorous' if ctx.rigorous else ''}-imports.json"

    def imports(self, ctx: RunContext) -> dict[str, list[str]]:
        """Claim id -> the heavy libraries (``runner.HEAVY_IMPORTS``) it imported in some earlier run under
        ``ctx``'s profile ({} when unknown)."""
        try:
            doc = json.loads(self._imports_path(ctx).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(doc, dict):
            return {}
        return {k: sorted({x for x in v if isinstance(x, str)}) for k, v in doc.items()
                if isinstance(k, str) and isinstance(v, list)}

    def record_imports(self, ctx: RunContext, imports: dict[str, Iterable[str]]) -> None:
        """Add ``imports`` (claim id -> libraries it imported) to the stored lists: a library stays listed
        once seen (a claim run after another one that imported it imports nothing); write errors are ignored."""
        new = {k: set(v) for k, v in imports.items() if v}
        if not new:
            return
        doc = self.imports(ctx)
        for k, v in new.items():
            doc[k] = sorted(set(doc.get(k, ())) | v)
        try:
            from proofs_check.outputs import write_text_atomic

            self._imports_path(ctx).parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(self._imports_path(ctx), json.dumps(doc, sort_keys=True))
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
