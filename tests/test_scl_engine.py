"""solvers.scl_engine.solve_instance, the one entry point of the SCL engine: which routes it runs (certificate
first, the bounded confirmation, the factored search on request or when no certificate closes), what it returns
(point or certified predicted configuration, proven bound and its route, geometry evidence, routes with why),
and the re-exports of solvers.scl after the split. Expected values are closed forms written here."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from solvers import scl as S
from solvers import scl_engine as E
from theory.scl import SCLInstance

ROOT = Path(__file__).resolve().parents[1]


def _theorem1(counts, tau):
    """Kini et al. Theorem 1 bound, written out: sum_{n_c >= 2} n_c log(n_c - 1 + (N - n_c) e^{-1/tau})."""
    N = sum(counts)
    return sum(n * math.log(n - 1 + (N - n) * math.exp(-1.0 / tau)) for n in counts if n >= 2)


def test_certified_closed_form_with_a_used_confirmation_solve():
    counts, tau = (2,) * 20, 0.5
    res = E.solve_instance(SCLInstance(counts, tau, len(counts) + 1, True))
    ref = _theorem1(counts, tau)
    assert res.certified_first and res.face == "orthogonal-frame"
    assert res.bounds.value is not None and abs(res.bounds.value - ref) <= 1e-9 * ref
    assert res.upper_from in ("orthogonal frame", "solver") and abs(res.upper - ref) <= 1e-9 * ref
    # the confirmation ran under its work budget and its value is reported (never below the proven bound)
    assert res.confirmation is not None and res.sol is not None
    assert res.confirmation["iterations_budget"] <= E.CONFIRM_MAX_ITERS
    assert res.confirmation["value"] >= res.bounds.value - 1e-9 * ref
    assert res.face_cert is not None and res.face_cert.face == "orthogonal-frame"
    assert res.certificate["routes"] and res.certificate["method"] == res.bounds.route


def test_large_k_is_decided_by_the_certificate_without_a_solve():
    counts, tau = (2,) * 1000, 0.5
    res = E.solve_instance(SCLInstance(counts, tau, len(counts) + 1, True))
    ref = _theorem1(counts, tau)
    assert res.certified_first and res.sol is None and res.confirmation is None and res.H is None
    assert abs(res.bounds.value - ref) <= 1e-9 * ref and abs(res.upper - ref) <= 1e-9 * ref
    assert any("confirmation solve skipped" in d for d in res.diagnostics)
    assert res.geometry["classification"] == "orthogonal-frame"  # the certified center, said so in the note
    assert "certificate first" in res.geometry["note"]
    assert res.solution["method"].startswith("closed form certified")


def test_method_factored_always_searches():
    counts, tau = (3, 2), 1.0
    res = E.solve_instance(SCLInstance(counts, tau, 3, True), method="factored", starts=2)
    assert not res.certified_first and res.sol is not None and res.H.shape == (3, 5)
    assert "solver" in res.feasible and res.feasible["solver"] >= res.bounds.value - 1e-9


def test_a_nan_tolerance_never_certifies_first():
    """Fail closed: a tolerance that is not a number cannot close the gap, so the factored search runs."""
    counts, tau = (3, 3), 0.5
    res = E.solve_instance(SCLInstance(counts, tau, 3, True), starts=2, tol=lambda v, a=0.0: float("nan"))
    assert not res.certified_first and res.sol is not None
    assert any("not certified by the cheap bounds" in d for d in res.diagnostics)


def test_imbalanced_ufm_has_no_predicted_configuration_and_certifies_around_the_solver_point():
    res = E.solve_instance(SCLInstance((5, 3, 2), 0.5, 3, False), starts=2)
    assert res.face is None and not res.certified_first and res.sol is not None
    assert res.collapsed is not None and res.collapsed["cert"] is not None
    assert res.collapsed["A_sol"].shape == (3, 3)
    # the optimum is proven below the collapsed ETF's value (Kini et al.'s imbalanced statement)
    assert res.bounds.value <= res.upper < res.feasible["collapsed ETF"]


def test_solver_module_reexports_every_name_of_the_split_modules():
    for mod in ("scl_batching", "scl_factored", "scl_dual", "scl_reduced"):
        m = __import__(f"solvers.{mod}", fromlist=["_"])
        tree = ast.parse((ROOT / "solvers" / f"{mod}.py").read_text())
        names = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        names += [t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)]
        for name in names:
            assert getattr(S, name) is getattr(m, name), (mod, name)


@pytest.mark.parametrize("path", sorted((ROOT / "solvers").glob("scl*.py")) + sorted((ROOT / "proofs_check" / "claims").glob("scl*.py")),
                         ids=lambda p: p.name)
def test_scl_modules_fit_the_size_rules(path):
    text = path.read_text()
    assert len(text.splitlines()) <= 1200
    for n in ast.walk(ast.parse(text)):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert n.end_lineno - n.lineno + 1 <= 150, n.name


def test_instance_checks_is_a_judge_of_the_engine_result():
    from proofs_check.claims import scl as C

    parts = C.instance_checks(SCLInstance((2, 2, 2), 0.5, 4, True), starts=2)
    assert isinstance(parts["result"], E.SCLResult)
    assert parts["certificate"] == parts["result"].certificate
    assert np.isfinite(parts["certificate"]["lower_bound"])


@pytest.mark.parametrize("value,verdict", [(10.0 + 1e-3, "VERIFIED"), (10.0 - 1e-3, "REFUTED"),
                                           (float("nan"), "INCONCLUSIVE"), (float("inf"), "INCONCLUSIVE")])
def test_confirmation_check_fails_closed(value, verdict):
    """The confirmation solve's value against a proven bound of 10: above is consistent, below by more than the
    tolerance is a certificate defect, a value that is not a finite number decides nothing."""
    from proofs_check.claims import scl as C

    inst = SCLInstance((2, 2), 0.5, 3, True)
    bounds = E.BoundRoutes()
    bounds.offer("given", 10.0, 0.0)
    res = E.SCLResult("orthogonal-frame", {"solver": value}, bounds, None, None, True,
                      {"value": value, "iterations_budget": 20, "converged": True}, {})
    assert C._confirmation_check("confirmation-solve", res, inst).verdict.name == verdict
