"""The layer rule, read from the source (ast), not from what happens to be imported at run time:

- ``theory/`` (predictions) imports neither ``solvers`` nor ``proofs_check``;
- ``solvers/`` (the truth) never imports ``proofs_check``;
- no import circle among the modules of the three packages (imports inside functions count:
  they are circles too, merely deferred);
- no module above 1,200 lines and no function above 150 lines (one concern per module and function;
  docs/DEVELOPING.md).

Imports under ``if TYPE_CHECKING:`` are ignored (they never run). A package's own ``__init__`` that
a submodule import executes is not an edge.
"""

from __future__ import annotations

import ast
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("theory", "solvers", "proofs_check")
LAYER = {"theory": 0, "solvers": 1, "proofs_check": 2}

MAX_MODULE_LINES = 1200
MAX_FUNCTION_LINES = 150


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = p
    return mods


MODULES = _modules()


def _resolve(name: str | None) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _type_checking_block(node: ast.AST) -> bool:
    t = getattr(node, "test", None)
    return isinstance(node, ast.If) and ((isinstance(t, ast.Name) and t.id == "TYPE_CHECKING")
                                        or (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"))


def _imports(module: str, path: Path) -> dict[str, int]:
    """Modules of the three packages that ``module`` imports -> first line."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_pkg = path.name == "__init__.py"
    out: dict[str, int] = {}

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if _type_checking_block(child):
                for n in child.orelse:
                    visit_stmt(n)
                continue
            visit_stmt(child)

    def visit_stmt(node):
        if isinstance(node, ast.Import):
            for a in node.names:
                r = _resolve(a.name)
                if r:
                    out.setdefault(r, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            for a in node.names:
                r = _resolve(f"{name}.{a.name}") or _resolve(name)
                if r:
                    out.setdefault(r, node.lineno)
        visit(node)

    visit(tree)
    out.pop(module, None)
    return out


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _upward():
    return [(m, t, ln) for m, out in GRAPH.items() for t, ln in out.items()
            if LAYER[t.split(".")[0]] > LAYER[m.split(".")[0]]]


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter[0]; counter[0] += 1
        stack.append(root); on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1
                    stack.append(w); on.add(w)
                    work.append((w, iter(graph[w])))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop(); on.discard(x); comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_reader_sees_imports():
    # the test can fail: it sees the imports that exist (a reader that sees nothing passes everything)
    assert "theory._validate" in GRAPH["proofs_check.registry"]
    assert "proofs_check.core" in GRAPH["proofs_check.registry"]
    assert _cycles({"a": {"b": 1}, "b": {"a": 1}, "c": {}}) == [["a", "b"]]


def test_theory_imports_neither_solvers_nor_proofs_check():
    bad = [f"{m} -> {t} (line {ln})" for m, t, ln in _upward() if m.startswith("theory")]
    assert not bad, "theory/ must not import solvers/ or proofs_check/: " + "; ".join(bad)


def test_solvers_never_import_proofs_check():
    bad = [f"{m} -> {t} (line {ln})" for m, t, ln in _upward() if m.startswith("solvers")]
    assert not bad, "solvers/ must not import proofs_check/: " + "; ".join(bad)


def test_no_import_circle():
    bad = _cycles(GRAPH)
    assert not bad, "import circles: " + "; ".join(" <-> ".join(c) for c in bad)


def _long_functions(tree: ast.AST, limit: int) -> list[tuple[str, int, int]]:
    return [(n.name, n.lineno, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit]


def test_the_size_reader_sees_long_functions():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert _long_functions(ast.parse(f"def f():\n{body}\n"), MAX_FUNCTION_LINES) == [("f", 1, MAX_FUNCTION_LINES + 1)]
    assert _long_functions(ast.parse("def g():\n    return 1\n"), MAX_FUNCTION_LINES) == []


def test_no_module_above_the_size_limits():
    big = [f"{p.relative_to(ROOT)}: {n} lines" for p in MODULES.values()
           if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]
    assert not big, f"modules above {MAX_MODULE_LINES} lines (split by concern): " + "; ".join(big)


def test_no_function_above_the_size_limits():
    long = [f"{p.relative_to(ROOT)}:{ln} {name} ({n} lines)" for p in MODULES.values()
            for name, ln, n in _long_functions(ast.parse(p.read_text()), MAX_FUNCTION_LINES)]
    assert not long, f"functions above {MAX_FUNCTION_LINES} lines: " + "; ".join(long)
