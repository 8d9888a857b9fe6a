"""MkDocs hook: generates the page ``claims.md`` from the claim registry at build time.

For every claim of :func:`proofs_check.registry.all_claims` the page shows its id, statement,
source, provenance, tags, and the tolerances its checks use: the module-level constants of the
claim's module whose names contain ``TOL`` that the claim's check function refers to (directly,
in nested functions, in the factory that built it, or in module functions it calls, a few levels
deep), with their values and the comment that says where they come from. Each family also gets
the table of all its tolerance constants.

Run by ``mkdocs build`` through ``hooks:`` in mkdocs.yml; :func:`claims_markdown` is also
callable on its own (tests/test_docs_site.py).
"""

from __future__ import annotations

import html
import importlib
import inspect
import io
import re
import tokenize
import types
from typing import Any

PAGE = "claims.md"
#: names of tolerance constants: ..._TOL, ..._RTOL, ..._ATOL, TOL_...
_TOL_NAME = re.compile(r"(^|_)(R|A)?TOL(_|$)")
#: how many calls deep the check function is followed to find the constants it uses
_DEPTH = 3


# ---- tolerances: module constants and their comments ------------------------------------------------

def _comments(source: str) -> dict[int, str]:
    """Line number -> comment text (without ``#``/``#:``) of every comment in ``source``."""
    out: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = tok.string.lstrip("#:").strip()
    return out


def tolerance_constants(module: types.ModuleType) -> dict[str, dict[str, Any]]:
    """Tolerance constants of ``module`` (numbers named ``*TOL*``) with their value and comment:
    ``{name: {"value": v, "comment": text}}``, in source order. The comment is the block of
    comment lines right above the assignment plus a comment on the same line."""
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return {}
    comments = _comments(source)
    lines = source.splitlines()
    out: dict[str, dict[str, Any]] = {}
    for i, line in enumerate(lines, start=1):
        m = re.match(r"^([A-Z][A-Z0-9_]*)\s*(?::[^=]+)?=\s*(.+)$", line)
        if not m or not _TOL_NAME.search(m.group(1)):
            continue
        name = m.group(1)
        value = getattr(module, name, None)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        above = []
        j = i - 1
        while j >= 1 and lines[j - 1].lstrip().startswith("#"):
            above.append(comments.get(j, ""))
            j -= 1
        text = " ".join(reversed(above))
        if i in comments:
            text = (text + " " if text else "") + comments[i]
        out[name] = {"value": value, "comment": " ".join(text.split())}
    return out


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def tolerances_used(fn, module: types.ModuleType) -> list[str]:
    """Names of ``module``'s tolerance constants that ``fn`` refers to: in its code, its nested
    functions, the factory that built it (by qualified name) and, up to ``_DEPTH`` calls deep,
    the functions of the same module it names."""
    consts = tolerance_constants(module)
    seen_fns: set[int] = set()
    found: set[str] = set()
    todo = [(fn, 0)]
    qual = getattr(fn, "__qualname__", "")
    if "<locals>" in qual:  # a closure: the factory that built it names the constants too
        factory = getattr(module, qual.split(".<locals>")[0], None)
        if callable(factory):
            todo.append((factory, 0))
    while todo:
        f, depth = todo.pop()
        code = getattr(f, "__code__", None)
        if code is None or id(code) in seen_fns:
            continue
        seen_fns.add(id(code))
        for name in _code_names(code):
            if name in consts:
                found.add(name)
            elif depth < _DEPTH:
                g = getattr(module, name, None)
                if isinstance(g, types.FunctionType) and g.__module__ == module.__name__:
                    todo.append((g, depth + 1))
    return [n for n in consts if n in found]


# ---- the page ---------------------------------------------------------------------------------------

def md_escape(text: str) -> str:
    """Text safe for a Markdown paragraph or table cell: HTML escaped, Markdown specials
    backslash-escaped, on one line."""
    text = html.escape(" ".join(str(text).split()), quote=False)
    return re.sub(r"([\\`*_\[\]{}|#])", r"\\\1", text)


def _fmt(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def claims_markdown() -> str:
    """The Markdown of the claims page, from the registry (imports every claims module)."""
    from proofs_check.registry import all_claims

    claims = all_claims()
    families: dict[str, list] = {}
    for c in claims:
        families.setdefault(c.family, []).append(c)
    out = ["# Claims", "",
           "Generated from the claim registry (`proofs_check.registry.all_claims()`) when this site was built: "
           f"{len(claims)} claims in {len(families)} families. `ncproofs run --only ID` checks one; "
           "`ncproofs list` prints the same list. *Provenance*: **quoted** from the source, "
           "**reconstructed** from partial text or code, or **derived** in this project.",
           "",
           "Tolerances are the named constants of the claim's module that its checks refer to, with the "
           "comment that says where each comes from; each check shows the tolerance it applied in its "
           "evidence.", ""]
    out += ["| family | claims |", "|---|---|"]
    for fam, cs in families.items():
        out.append(f"| [{md_escape(fam)}](#{_anchor(fam)}) | {len(cs)} |")
    out.append("")
    for fam, cs in families.items():
        module = importlib.import_module(cs[0].check.__module__) if hasattr(cs[0].check, "__module__") else None
        out += [f"## {md_escape(fam)} {{#{_anchor(fam)}}}", ""]
        consts = tolerance_constants(module) if module is not None else {}
        for c in cs:
            cmod = importlib.import_module(c.check.__module__) if getattr(c.check, "__module__", None) else None
            used = tolerances_used(c.check, cmod) if cmod is not None else []
            cconsts = consts if cmod is module else (tolerance_constants(cmod) if cmod is not None else {})
            out += [f"### `{c.id}` {{#{c.id}}}", "", f"**Statement.** {md_escape(c.statement)}", "",
                    f"**Source.** {md_escape(c.source)}", "",
                    f"**Provenance.** {c.provenance.value}" + (f" · tags: {md_escape(', '.join(c.tags))}"
                                                                if c.tags else ""), ""]
            if used:
                out.append("**Tolerances.** " + "; ".join(f"`{n}` = {_fmt(cconsts[n]['value'])}" for n in used))
            else:
                out.append("**Tolerances.** none named in the claim's module (the checks state theirs in the "
                           "evidence)")
            out.append("")
        if consts:
            out += [f"#### Tolerance constants of `{module.__name__}`", "", "| name | value | where it comes from |",
                    "|---|---|---|"]
            for n, d in consts.items():
                out.append(f"| `{n}` | {_fmt(d['value'])} | {md_escape(d['comment']) or '(no comment)'} |")
            out.append("")
    return "\n".join(out) + "\n"


def _anchor(family: str) -> str:
    return "family-" + re.sub(r"[^a-z0-9]+", "-", family.lower()).strip("-")


# ---- the MkDocs hook ----------------------------------------------------------------------------------

def on_files(files, config):
    """Add the generated ``claims.md`` to the site's files."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=claims_markdown()))
    return files
