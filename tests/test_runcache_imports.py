"""The run cache's keys hold the source of every project module a claim's module imports. The import lists
are read from the source text (``runcache._raw_imports``), not parsed: they must hold every module that
``ast`` finds (a module missed would let an edit of it leave a stale result), for every module of the
project and for the statement forms Python allows."""

from __future__ import annotations

import ast

import pytest

from proofs_check import registry, runcache
from proofs_check.core import RunContext


def _ast_imports(source: bytes, module: str, is_pkg: bool) -> set[tuple]:
    """(name, fallback) of every import statement, from the syntax tree."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update((a.name, None) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            name = node.module
            if node.level:
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            out.update((f"{name}.{a.name}", name) for a in node.names)
    return out


def _scanned(source: bytes, module: str = "pkg.mod", is_pkg: bool = False) -> set[tuple]:
    return {tuple(r) for r in runcache._raw_imports(source, "<test>", module, is_pkg)}


def _resolved(pairs) -> set[str]:
    out = set()
    for name, fallback in pairs:
        r = runcache._resolve(name) or (runcache._resolve(fallback) if fallback else None)
        if r:
            out.add(r)
    return out


def test_every_project_module_lists_every_import_ast_finds():
    mods = runcache._modules()
    assert len(mods) > 50
    for module, path in mods.items():
        data = path.read_bytes()
        is_pkg = path.name == "__init__.py"
        want = _resolved(_ast_imports(data, module, is_pkg))
        got = _resolved(_scanned(data, module, is_pkg))
        assert want <= got, (module, sorted(want - got))


TRICKY = b'''\
"""A docstring."""
import a1, a2.b as x , a3 . c
import a4 as y; from b1 import c1
if True: import a5
try: from b2 import c2, c3 as z
except ImportError: pass
from b3 import (c4,  # a comment with ) inside
    c5 as w,
    # from nowhere import fake
    c6,
)
from \\
    b4 import c7
import a6 \\
    , a7
from. import c8
from .sub import c9
from .. import c10
from ..up . deep import c11
from b5 import *
def f():
    from b8 import c14
    return [i for i in range(3)]
x = 1 ; import a8
class K:
    from b6 import (c12)
\tfrom\tb7\timport\tc13
'''.replace(b"\n\tfrom", b"\nif 1:\n\tfrom")


def test_statement_forms_python_allows():
    compile(TRICKY, "<tricky>", "exec")  # the forms are valid Python
    want = _ast_imports(TRICKY, "pkg.sub2.mod", False)
    got = _scanned(TRICKY, "pkg.sub2.mod")
    assert want <= got, sorted(want - got)
    # the relative imports made absolute, continued lines, the parenthesised list past its comments
    for pair in [("pkg.sub2.c8", "pkg.sub2"), ("pkg.sub2.sub.c9", "pkg.sub2.sub"), ("pkg.c10", "pkg"),
                 ("pkg.up.deep.c11", "pkg.up.deep"), ("b4.c7", "b4"), ("a7", None), ("a8", None),
                 ("b3.c6", "b3"), ("b7.c13", "b7"), ("b8.c14", "b8"), ("a3.c", None)]:
        assert pair in want and pair in got, pair


def test_crlf_sources_and_packages():
    src = b"from . import a\r\nimport b.c as d\r\nfrom .e import (f,\r\n  g)\r\n"
    assert _ast_imports(src, "pkg", True) <= _scanned(src, "pkg", True)
    assert ("pkg.a", "pkg") in _scanned(src, "pkg", True)


@pytest.mark.parametrize("claim_id", ["ufm.mse.symbolic-derivation", "crh.identity.backprop"])
def test_key_depends_on_the_modules_the_claim_imports(claim_id, monkeypatch):
    c = registry.get(claim_id)
    deps = runcache.closure(c.check.__module__)
    assert "proofs_check.core" in deps and any(m.startswith("theory.") for m in deps)
    k0 = runcache.key(c, RunContext())
    real = runcache._source_hash
    edited = next(m for m in deps if m.startswith("theory."))
    monkeypatch.setattr(runcache, "_source_hash", lambda m: "edited" if m == edited else real(m))
    assert runcache.key(c, RunContext()) != k0
