"""The template family in docs/template works and its claims can fail (what a newcomer copies)."""

import argparse

import pytest

from docs.template import claims_demo as C
from docs.template import families_demo as F
from docs.template import theory_demo as T
from proofs_check.core import Verdict
from theory._validate import InputError


def test_true_statements_verified():
    rep = C.check_instance(T.DemoInstance(0.5))
    assert rep.verdict is Verdict.VERIFIED, rep.reason
    assert {c["id"] for c in rep.to_dict()["claims"]} == {"optimal-value", "minimiser", "stationarity"}


@pytest.mark.parametrize("rel", [1e-6, -1e-6, 1e-3])
def test_false_value_refuted(rel):
    rep = C.check_instance(T.DemoInstance(2.0), predict=lambda i: T.optimum(i) * (1 + rel))
    assert rep.verdict is Verdict.REFUTED


def test_false_minimiser_refuted():
    rep = C.check_instance(T.DemoInstance(2.0), predict_point=lambda i: T.minimiser(i) * 1.01)
    assert rep.verdict is Verdict.REFUTED


def test_claim_factory_and_cli_command():
    assert C.make_value_claim().run().verdict is Verdict.VERIFIED
    assert C.make_value_claim(predict=lambda i: -1.0 / i.lam).run().verdict is Verdict.REFUTED
    assert F.COMMAND.run(argparse.Namespace(lam=1.0))["verdict"] == "VERIFIED"
    with pytest.raises(InputError, match="lam"):
        T.DemoInstance(1e-300)
