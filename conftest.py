"""Root pytest configuration: the --runslow flag, the hypothesis profiles, and one summary line per
missing optional extra.

Default run: slow tests skipped, hypothesis example counts capped (profile "ncproofs-default").
``pytest --runslow`` adds the slow sweeps; ``NCPROOFS_HYPOTHESIS=thorough`` raises example counts.

A test that needs an optional extra skips (``pytest.importorskip``); its skip reason is rewritten to
name the extra (``extra 'plots' (matplotlib) not installed: pip install -e ".[plots]"``), and the
terminal summary prints one line per extra with the number of tests it skipped, so a fresh
``pip install -e ".[test]"`` shows at a glance what is not being tested and why.
"""

import os
import re

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["pytester"]  # tests of the pytest plugin and of this file run pytest inside pytest

settings.register_profile("ncproofs-default", max_examples=15, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow], derandomize=True)
settings.register_profile("thorough", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("NCPROOFS_HYPOTHESIS", "ncproofs-default"))
# tests run every claim for real: no cached symbolic results (tests of the cache pass their own directory)
os.environ.setdefault("NCPROOFS_CACHE", "0")

#: top-level import name -> the optional extra of pyproject.toml that installs it
EXTRA_OF_MODULE = {
    "matplotlib": "plots", "flint": "rigorous", "torch": "torch", "dask": "dask", "distributed": "dask",
    "pandas": "analysis", "pyarrow": "analysis", "sklearn": "measure", "safetensors": "measure",
    "mkdocs": "docs", "material": "docs", "mkdocstrings": "docs", "python-flint": "rigorous",
    "scikit-learn": "measure",
}
_IMPORT_SKIP = re.compile(r"could not import '([A-Za-z0-9_.]+)'|No module named '([A-Za-z0-9_.]+)'|"
                          r"^([A-Za-z0-9_.-]+)\b.*? not installed|needs ([A-Za-z0-9_-]+) \(optional extra")
_EXTRA_REASON = re.compile(r"^extra '([a-z]+)' \(([A-Za-z0-9_.]+)\) not installed")
_SLOW_REASON = "slow: run with --runslow"


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="also run tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason=_SLOW_REASON)
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def extra_reason(reason: str) -> str | None:
    """The skip reason naming the extra, for a skip caused by a missing optional module; else None."""
    m = _IMPORT_SKIP.search(reason)
    if not m:
        return None
    module = next(g for g in m.groups() if g)
    module = module if module in EXTRA_OF_MODULE else module.split(".")[0]
    extra = EXTRA_OF_MODULE.get(module)
    if extra is None:
        return None
    return f"extra '{extra}' ({module}) not installed: pip install -e \".[{extra}]\""


def _rename_skip(report) -> None:
    lr = report.longrepr
    if report.skipped and isinstance(lr, tuple) and len(lr) == 3 and isinstance(lr[2], str):
        text = lr[2].removeprefix("Skipped: ")
        new = extra_reason(text)
        if new:
            report.longrepr = (lr[0], lr[1], f"Skipped: {new}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _rename_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _rename_skip(outcome.get_result())


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line per missing extra (and one for slow tests) instead of a line per skipped test."""
    by_extra: dict[tuple[str, str], list[int]] = {}
    slow = other = 0
    for rep in terminalreporter.stats.get("skipped", []):
        lr = rep.longrepr
        reason = lr[2].removeprefix("Skipped: ") if isinstance(lr, tuple) and len(lr) == 3 else str(lr)
        m = _EXTRA_REASON.match(reason)
        module_level = isinstance(rep, pytest.CollectReport)  # a whole module skipped at import
        if m:
            by_extra.setdefault((m.group(1), m.group(2)), [0, 0])[1 if module_level else 0] += 1
        elif reason == _SLOW_REASON:
            slow += 1
        else:
            other += 1
    if not (by_extra or slow or other):
        return
    terminalreporter.section("skipped tests, by reason", sep="-")
    for (extra, module), (tests, modules) in sorted(by_extra.items()):
        what = " and ".join(x for x in (f"{tests} test{'s' * (tests != 1)}" if tests else "",
                                         f"{modules} module{'s' * (modules != 1)}" if modules else "") if x)
        terminalreporter.line(f"skipped {what}: extra '{extra}' ({module}) not installed "
                              f"(pip install -e \".[{extra}]\" or \".[all]\")")
    if slow:
        terminalreporter.line(f"skipped {slow} slow test{'s' * (slow != 1)} (run with --runslow)")
    if other:
        terminalreporter.line(f"skipped {other} other test{'s' * (other != 1)} (a missing system tool, a hypothesis "
                              "that does not hold here, ...; pytest -rs lists them)")
