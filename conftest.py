"""Root pytest configuration: the --runslow flag and the hypothesis profiles.

Default run: slow tests skipped, hypothesis example counts capped (profile "ncproofs-default").
``pytest --runslow`` adds the slow sweeps; ``NCPROOFS_HYPOTHESIS=thorough`` raises example counts.
"""

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ncproofs-default", max_examples=15, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow], derandomize=True)
settings.register_profile("thorough", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("NCPROOFS_HYPOTHESIS", "ncproofs-default"))


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="also run tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
