"""What ``ncproofs run`` computes before its workers fork, and after they finish, stays exact and cheap
to get right: the closed forms built while the claim modules are imported, and the report writing."""

from __future__ import annotations

import sympy as sp

import theory.crh as T


def _matrix_square(counts) -> sp.Rational:
    """alpha_cos^2 from the definition with sympy matrices: tr(J D)^2 / (tr(J D J D) (k - 1))."""
    k, n = len(counts), sum(counts)
    D = sp.diag(*[sp.Rational(c, n) for c in counts])
    J = sp.eye(k) - sp.ones(k, k) / k
    return sp.Rational((J * D).trace() ** 2 / ((J * D * J * D).trace() * (k - 1)))


def test_nc_imbalanced_cosine_is_exactly_the_matrix_formula():
    # (231, ..., 222) and (59, ..., 290): nsimplify had returned nearby power products, off by 4e-18 and 4e-17
    for counts in [(150, 20, 20, 20), (2, 2), (50, 1), (3, 1), (1, 2, 3, 4, 5, 6, 7, 8),
                   (231, 242, 195, 108, 49, 250, 15, 200, 222), (59, 194, 40, 293, 282, 115, 290)]:
        v = T.nc_imbalanced_cosine(counts)
        assert v.is_positive, counts
        assert sp.Rational(sp.expand(v ** 2)) == _matrix_square(counts), counts


def test_nc_imbalanced_cosine_balanced_is_one_and_default_form():
    assert T.nc_imbalanced_cosine((7, 7, 7)) == 1
    assert T.nc_imbalanced_cosine((150, 20, 20, 20)) == 21 * sp.sqrt(779) / 779


def test_claim_blas_limit_covers_libraries_loaded_after_the_first_claim():
    import sys
    import types

    from threadpoolctl import threadpool_info

    from proofs_check import runner

    with runner._blas_limit():
        assert all(i["num_threads"] == runner.CLAIM_BLAS_THREADS for i in threadpool_info() if i["user_api"] == "blas")
    view = runner._BLAS_VIEW[0]
    with runner._blas_limit():  # nothing imported since: the same view of the libraries
        assert runner._BLAS_VIEW[0] is view
    sys.modules["_ncproofs_test_new_module"] = types.ModuleType("_ncproofs_test_new_module")
    try:
        with runner._blas_limit():  # a module more (a library may have come with it): the libraries found again
            assert runner._BLAS_VIEW[0] is not view
            assert all(i["num_threads"] == runner.CLAIM_BLAS_THREADS for i in threadpool_info()
                       if i["user_api"] == "blas")
    finally:
        del sys.modules["_ncproofs_test_new_module"]


def test_write_reports_markdown_and_json_from_one_dict(tmp_path, monkeypatch):
    import json

    from proofs_check import runner
    from proofs_check.core import Check, Claim, Provenance, Verdict

    claim = Claim("ufm.test.one", "ufm", "a statement", "a source", Provenance.DERIVED,
                  lambda ctx: iter([Check("c", Verdict.VERIFIED, "ok", {"x": 1.5})]))
    run = runner.run_claims([claim], progress=False)
    calls = []
    real = runner.RunResult.to_dict
    monkeypatch.setattr(runner.RunResult, "to_dict", lambda self: calls.append(1) or real(self))
    runner.write_reports(run, str(tmp_path / "r.md"), str(tmp_path / "r.json"))
    assert len(calls) == 1
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["claims"][0]["id"] == "ufm.test.one" and doc["overall_verdict"] == "VERIFIED"
    assert (tmp_path / "r.md").read_text() == runner.markdown_report(run, doc)


def test_run_freezes_the_collector_only_as_a_program(tmp_path, monkeypatch):
    """``gc.freeze`` at the end of ``ncproofs run`` skips the shutdown's collections; called with an argument
    list (tests, scripts) ``main`` leaves the caller's collector alone, and the program's reports are complete."""
    import gc
    import json
    import subprocess
    import sys

    from proofs_check import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NCPROOFS_CACHE_DIR", str(tmp_path / "cache"))
    before = gc.get_freeze_count()
    assert cli.main(["run", "--only", "ufm.ce.trivial-phase", "--quiet", "--report", "", "--json", "in.json"]) == 0
    assert gc.get_freeze_count() == before
    proc = subprocess.run([sys.executable, "-m", "proofs_check.cli", "run", "--only", "ufm.ce.trivial-phase", "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().endswith("reports: ncproofs-report.md, ncproofs-report.json")
    doc = json.loads((tmp_path / "ncproofs-report.json").read_text())
    assert [c["id"] for c in doc["claims"]] == ["ufm.ce.trivial-phase"]
    assert (tmp_path / "ncproofs-report.md").read_text().startswith("# ncproofs report")
