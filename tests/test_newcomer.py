"""What a newcomer meets: the README's commands need Python alone, every extra is listed (README, the
`all` extra, the skip summary), and CI runs the suite once with only the test extra."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS = PYPROJECT["project"]["optional-dependencies"]


def test_all_extra_is_every_extra_but_test():
    (entry,) = EXTRAS["all"]
    m = re.fullmatch(r"ncproofs\[([a-z,]+)\]", entry)
    assert m, entry
    assert set(m.group(1).split(",")) == set(EXTRAS) - {"all", "test"}


def test_readme_lists_every_extra_and_what_it_enables():
    readme = (ROOT / "README.md").read_text()
    rows = {m.group(1): m.group(3) for m in re.finditer(r"^\| `([a-z]+)` \| ([^|]+) \| ([^|]+) \|$", readme, re.M)}
    assert set(rows) == set(EXTRAS)
    assert all(text.strip() for text in rows.values())
    assert 'pip install -e ".[all]"' in readme


def test_skip_summary_knows_every_extra():
    import conftest

    assert set(conftest.EXTRA_OF_MODULE.values()) == set(EXTRAS) - {"all", "test"}
    assert conftest.extra_reason("could not import 'matplotlib': No module named 'matplotlib'").startswith(
        "extra 'plots' (matplotlib) not installed")
    assert conftest.extra_reason("python-flint not installed (pip install python-flint)").startswith("extra 'rigorous'")
    assert conftest.extra_reason("CUDA is available here: no fallback to test") is None


def test_the_torch_extra_is_a_range_and_ci_pins_torch_exactly():
    (torch,) = EXTRAS["torch"]
    assert torch.startswith("torch>=") and "==" not in torch
    ci = (ROOT / ".ci" / "run").read_text()
    assert "torch==2.13.0" in ci


def test_ci_runs_the_suite_with_only_the_test_extra():
    ci = (ROOT / ".ci" / "run").read_text()
    lines = [ln.strip() for ln in ci.splitlines()]
    i = lines.index('python -m pip install --quiet -e ".[test]"')
    assert any(ln.startswith("python -m pytest") for ln in lines[i:])
    assert any(ln.startswith("ncproofs run") for ln in lines[i:])
    assert lines[i - 1].startswith("python -m pip install --quiet --upgrade pip")
    assert any(ln.startswith("python3 -m venv") and ".ci-venv-test" in ln for ln in lines[:i])


def test_summary_line_per_extra(pytester):
    """A test that skips for a missing extra shows up once in the summary, naming the extra."""
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_x="""
        import pytest

        def test_a():
            pytest.importorskip("matplotlib_not_a_module_xyz")

        def test_b():
            pytest.importorskip("flint_is_not_this")

        def test_c():
            pytest.skip("could not import 'matplotlib': No module named 'matplotlib'")

        def test_d():
            pytest.skip("could not import 'matplotlib': No module named 'matplotlib'")
    """)
    res = pytester.runpytest("-p", "no:cacheprovider")
    out = res.stdout.str()
    assert "skipped 2 tests: extra 'plots' (matplotlib) not installed" in out
    assert "skipped 2 other tests" in out
