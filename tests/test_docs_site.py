"""The documentation site: ``mkdocs build --strict`` passes (broken links, missing pages and
docstring problems are errors), the generated claims page lists every registered claim with its
statement, source and tolerances, and the public API states what it returns and raises.

Without mkdocs (pip install mkdocs mkdocs-material "mkdocstrings[python]") the build test is
skipped with that message, except where the environment variable NCPROOFS_REQUIRE_EXTRAS names
``docs`` (.ci/run sets it in its all-extras venv), where it must run. Plain ``CI`` is not enough: the
second CI phase is a test-only venv, where the docs extra is absent on purpose."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS_PACKAGES = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")


def _missing_docs_packages() -> list[str]:
    missing = []
    for name in DOCS_PACKAGES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def _claims_page_module():
    spec = importlib.util.spec_from_file_location("ncproofs_docs_claims_page", ROOT / "docs" / "hooks" /
                                                  "claims_page.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    missing = _missing_docs_packages()
    if missing:
        if "docs" in os.environ.get("NCPROOFS_REQUIRE_EXTRAS", "").replace(",", " ").split():
            pytest.fail(f"NCPROOFS_REQUIRE_EXTRAS names docs, but the docs packages are not installed ({', '.join(missing)}): "
                        "pip install mkdocs mkdocs-material 'mkdocstrings[python]'")
        pytest.skip(f"mkdocs is not installed ({', '.join(missing)} missing): "
                    "pip install mkdocs mkdocs-material 'mkdocstrings[python]' to build the docs site")
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                          "-d", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    return out


def _text(html: str) -> str:
    import html as h

    return " ".join(h.unescape(re.sub(r"<[^>]+>", "", html)).split())


def test_strict_build_has_every_page_and_no_python_files(site):
    for page in ("index.html", "claims/index.html", "workflow/index.html", "DEVELOPING/index.html",
                 "api/sweep/index.html", "api/core/index.html", "api/families/index.html",
                 "api/geometry/index.html", "api/tables/index.html", "api/proofs_check/index.html"):
        assert (site / page).is_file(), page
    assert not list(site.rglob("*.py")), "docs/*.py (template family, hooks) must not be published"
    assert not (site / "template").exists() and not (site / "hooks").exists()


def test_api_reference_is_generated_from_docstrings(site):
    sweep = _text((site / "api" / "sweep" / "index.html").read_text())
    for name in ("to_dataframe", "aggregate", "run_sweep", "register_sweepable", "parse_config", "Store"):
        assert name in sweep, name
    assert "pd.read_json" in sweep or "orient" in sweep  # text of the export docstrings, not only names
    fams = _text((site / "api" / "families" / "index.html").read_text())
    for mod in ("proofs_check.claims.scl", "proofs_check.claims.crh", "proofs_check.claims.ntk",
                "proofs_check.claims.feature_collapse", "proofs_check.claims.ufm"):
        assert f"{mod}.check_instance" in fams, mod


def test_claims_page_renders_every_claim_from_the_registry(site):
    from proofs_check.registry import all_claims

    page = _text((site / "claims" / "index.html").read_text())
    for c in all_claims():
        assert c.id in page, c.id
        assert " ".join(c.statement.split())[:60] in page, c.id
        assert " ".join(c.source.split())[:40] in page, c.id


def test_claims_markdown_names_the_tolerances_with_their_values_and_comments():
    from proofs_check.registry import all_claims

    cp = _claims_page_module()
    text = cp.claims_markdown()
    claims = all_claims()
    assert text.count("**Statement.**") == len(claims)
    import proofs_check.claims.scl as scl

    consts = cp.tolerance_constants(scl)
    assert consts["VALUE_RTOL"]["value"] == scl.VALUE_RTOL
    assert consts["VALUE_RTOL"]["comment"], "the comment saying where the tolerance comes from"
    assert f"| `VALUE_RTOL` | {scl.VALUE_RTOL:g} |" in text
    by_id = {c.id: c for c in claims}
    used = cp.tolerances_used(by_id["scl.theorem1.full_batch_bound"].check, scl)
    assert "VALUE_RTOL" in used and all(n in consts for n in used)


def test_tolerances_used_follows_closures_and_helpers():
    import types

    cp = _claims_page_module()
    mod = types.ModuleType("fake_claims")
    src = ("A_TOL = 1e-3  # from the paper\n"
           "# two lines\n# of comment\nB_RTOL = 2e-6\n"
           "UNUSED_ATOL = 5.0\n"
           "NOT_A_TOLERANCE = 3\n"
           "def helper():\n    return B_RTOL\n"
           "def factory():\n    def check(ctx):\n        return A_TOL + helper()\n    return check\n")
    exec(compile(src, "fake_claims.py", "exec"), mod.__dict__)
    cp.inspect = _FakeInspect(src)
    try:
        consts = cp.tolerance_constants(mod)
        assert list(consts) == ["A_TOL", "B_RTOL", "UNUSED_ATOL"]
        assert consts["A_TOL"]["comment"] == "from the paper" and consts["B_RTOL"]["comment"] == "two lines of comment"
        check = mod.factory()
        check.__module__ = "fake_claims"
        mod.helper.__module__ = "fake_claims"
        mod.__name__ = "fake_claims"
        assert cp.tolerances_used(check, mod) == ["A_TOL", "B_RTOL"]
    finally:
        cp.inspect = inspect


class _FakeInspect:
    def __init__(self, src: str):
        self.src = src

    def getsource(self, module):
        return self.src


def test_md_escape_keeps_text_literal():
    cp = _claims_page_module()
    assert cp.md_escape("a_b *c* [x](y) |B| <t>") == r"a\_b \*c\* \[x\](y) \|B\| &lt;t&gt;"


# ---- docstrings of the public API state what it returns and raises -------------------------------

def _public_api():
    import proofs_check.sweep as sweep
    import theory.geometry as geometry

    out = [getattr(sweep, n) for n in sweep.__all__ if inspect.isfunction(getattr(sweep, n))]
    out += [f for n, f in vars(geometry).items()
            if inspect.isfunction(f) and f.__module__ == "theory.geometry" and not n.startswith("_")]
    # check_instance of each family (ufm's module is documented by its own engineer: not listed here)
    for fam in ("scl", "crh", "feature_collapse", "ntk"):
        out.append(importlib.import_module(f"proofs_check.claims.{fam}").check_instance)
    return out


@pytest.mark.parametrize("fn", _public_api(), ids=lambda f: f"{f.__module__}.{f.__qualname__}")
def test_public_functions_say_what_they_return_and_raise(fn):
    doc = (inspect.getdoc(fn) or "").lower()
    assert "return" in doc, f"{fn.__module__}.{fn.__qualname__}: the docstring does not say what it returns"
    assert "raise" in doc, f"{fn.__module__}.{fn.__qualname__}: the docstring does not say what it raises"
