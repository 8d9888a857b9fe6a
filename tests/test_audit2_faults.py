"""Faults and bad inputs found by an audit (2026-12-01): same output path twice, stores that are not ncproofs
stores or are damaged, read-only stores, malformed run reports. Each is bad input: one line, exit 2."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import textwrap

import pytest

from proofs_check import cli

CONFIG = textwrap.dedent("""
    [sweep]
    family = "geometry.noisy-etf"
    [parameters]
    k = [3, 4]
    noise = [0.0, 0.1]
    """)


def _one_line_exit_2(capsys, args):
    rc = cli.main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("ncproofs: error: "), (rc, err)
    return err[0]


@pytest.mark.parametrize("second", [["--json", "same.out"], ["--json", "", "--html", "./same.out"]])
def test_run_refuses_one_path_for_two_reports(tmp_path, monkeypatch, capsys, second):
    monkeypatch.chdir(tmp_path)
    line = _one_line_exit_2(capsys, ["run", "--quiet", "--only", "ufm-ce-trivial-phase", "--report", "same.out",
                                     *second])
    assert "same file as --report" in line
    assert not (tmp_path / "same.out").exists()  # refused before any work


def test_run_refuses_a_symlink_to_the_other_report(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.json").write_text("{}")
    (tmp_path / "link.md").symlink_to(tmp_path / "r.json")
    assert "same file" in _one_line_exit_2(capsys, ["run", "--quiet", "--only", "ufm-ce-trivial-phase", "--report",
                                                    "link.md", "--json", "r.json"])


@pytest.fixture()
def store(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "h.toml").write_text(CONFIG)
    cli.main(["sweep", "h.toml", "--quiet", "--workers", "1"])
    capsys.readouterr()
    return tmp_path / "h.sqlite"


def _sha(path):
    return hashlib.sha1(path.read_bytes()).hexdigest()


def test_summary_reads_without_writing(store, capsys):
    before = _sha(store)
    con = sqlite3.connect(store)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    before = _sha(store)
    assert cli.main(["sweep", "h.toml", "--summary"]) in (0, 1)
    assert "geometry.noisy-etf" in capsys.readouterr().out
    assert _sha(store) == before


def test_a_foreign_sqlite_file_is_refused_and_not_modified(store, tmp_path, capsys):
    foreign = tmp_path / "foreign.sqlite"
    con = sqlite3.connect(foreign)
    con.execute("create table t(a)")
    con.commit()
    con.close()
    for extra in (["--summary"], ["--quiet", "--workers", "1"]):
        line = _one_line_exit_2(capsys, ["sweep", "h.toml", "--store", str(foreign), *extra])
        assert "not an ncproofs store" in line
    con = sqlite3.connect(foreign)
    assert [r[0] for r in con.execute("select name from sqlite_master")] == ["t"]
    con.close()


@pytest.mark.parametrize("sql,what", [("update results set verdict='WEIRD' where rowid=1", "verdict 'WEIRD'"),
                                      ("update results set result='{bad json'", "damaged row")])
def test_a_damaged_row_is_bad_input(store, tmp_path, capsys, sql, what):
    con = sqlite3.connect(store)
    con.execute(sql)
    con.commit()
    con.close()
    line = _one_line_exit_2(capsys, ["sweep", "h.toml", "--summary", "--export", str(tmp_path / "e.csv")])
    assert "--store" in line and what in line


@pytest.mark.parametrize("text", ["[]", "NaN", "[" * 100000, '{"claims": [{"id": "x", "checks": "many"}]}'])
def test_counts_from_a_malformed_report_is_bad_input(tmp_path, monkeypatch, capsys, text):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.json").write_text(text)
    assert "--counts-from" in _one_line_exit_2(capsys, ["list", "--counts-from", "a.json"])
    # a malformed default report next to the user is ignored by a plain `list`
    (tmp_path / "ncproofs-report.json").write_text(text)
    assert cli.main(["list"]) == 0
    assert "not run" in capsys.readouterr().out


def _npy_header_only(path, shape, size=None):
    """A .npy file whose header announces ``shape`` (float64) and that holds ``size`` bytes in all (sparse)."""
    import os
    import struct

    hdr = "{'descr': '<f8', 'fortran_order': False, 'shape': %s, }" % (tuple(shape),)
    hdr = hdr + " " * (117 - len(hdr)) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
    n = 1
    for s in shape:
        n *= s
    os.truncate(path, size if size is not None else 128 + 8 * n)


@pytest.mark.parametrize("shape,size,what", [((100_000_000, 3), None, "announces 300000000 entries"),
                                             ((10 ** 12, 4), 193, "announces"),
                                             ((100, 3), 500, "truncated")])
def test_regression_targets_header_is_checked_before_loading(tmp_path, capsys, shape, size, what):
    import resource

    path = tmp_path / "t.npy"
    _npy_header_only(path, shape, size)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    line = _one_line_exit_2(capsys, ["solve", "ufm-regression", "-d", "3", "--lambda-w", "1e-2", "--lambda-h", "1e-2",
                                     "--targets", str(path)])
    assert "--targets" in line and what in line
    # nothing was loaded: the peak resident size did not grow by the announced gigabytes
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB


def test_not_an_npy_file_is_named_as_such(tmp_path, capsys):
    path = tmp_path / "g.npy"
    path.write_text("hello world")
    assert "not a valid .npy file" in _one_line_exit_2(capsys, ["solve", "ufm-regression", "-d", "3", "--lambda-w",
                                                                "1e-2", "--lambda-h", "1e-2", "--targets", str(path)])


def test_lbfgs_deadline_stops_inside_a_run():
    """The wall-clock budget holds inside one L-BFGS run (an audit saw solve_factored's 60 s budget run 142 s,
    because it was checked only between starts)."""
    import time

    import numpy as np

    from solvers import lbfgs

    def slow_quadratic(x):
        time.sleep(0.01)
        return float(0.5 * x @ (np.arange(1, x.size + 1) * x)), np.arange(1, x.size + 1) * x

    t0 = time.perf_counter()
    res = lbfgs.minimize(slow_quadratic, np.ones(200), gtol=1e-300, maxiter=10_000, deadline=t0 + 0.3)
    assert res.message == "time budget reached"
    assert res.nit >= 1
    # without a deadline the same run goes on (stopped here by maxiter instead)
    res2 = lbfgs.minimize(slow_quadratic, np.ones(200), gtol=1e-300, maxiter=3)
    assert res2.message != "time budget reached"


def test_regression_geometry_never_forms_an_m_by_m_matrix_for_wide_targets():
    """Wide targets (m = 3000 columns, N = 4): the classifier norms come from the thin SVD; the reported norms
    match sqrt(diag(q (Z Z^T)^{1/2})) computed here on a small slice of the same closed form."""
    import math

    import numpy as np

    from proofs_check.claims.ufm import check_regression
    from solvers.ufm_general import regression_closed_form

    Y = np.random.default_rng(2).normal(size=(4, 3000))
    rep = check_regression(Y, 3, 1e-2, 1e-2, factored=False).to_dict()
    assert rep["geometry"]["classifier_gram"] is None
    Z = regression_closed_form(Y, 1e-2, 1e-2)["Z"]
    # independent: ||w_i||^2 = q [(Z Z^T)^{1/2}]_ii = q sum_j U_ij^2 s_j, with U, s from an eigendecomposition of Z^T Z
    lam, Vn = np.linalg.eigh(Z.T @ Z)
    keep = lam > 1e-12 * lam.max()
    U = (Z @ Vn[:, keep]) / np.sqrt(lam[keep])
    norms = np.sqrt(math.sqrt(1.0) * (U * U) @ np.sqrt(lam[keep]))
    assert np.allclose(rep["geometry"]["classifier_norms"], norms[:1000], rtol=1e-9, atol=1e-12)


def test_batching_refuses_too_many_classes_and_summarises_pairs(capsys):
    line = _one_line_exit_2(capsys, ["batching", "--counts", ",".join(["2"] * 301), "--batches", "0,1,2,3"])
    assert "--counts" in line and "301 classes > 300" in line
    batches = ";".join(f"{2 * i},{2 * i + 1},{2 * i + 2},{2 * i + 3}" for i in range(29))
    assert cli.main(["batching", "--counts", ",".join(["2"] * 30), "--batches", batches]) == 0
    out = capsys.readouterr().out
    # 435 pairs: one summary line and the failing pairs, not a line per pair
    assert "of 435 pairs hold" in out and "classes (0,1): yes" not in out
    assert out.count("\n") <= 30 + 200 + 12  # a line per class, at most 200 failing pairs, the rest summarised
    assert "more (see --json)" in out


def test_a_budget_refusal_in_a_sweep_is_not_a_defect(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ref.toml").write_text('[sweep]\nfamily = "ufm"\nmode = "grid"\nworkers = 1\n[parameters]\n'
                                       'loss = "ce"\nk = [3, 5000]\nn = 5\nd = 5000\nlw = 1e-3\nlh = 1e-3\n')
    rc = cli.main(["sweep", "ref.toml", "--quiet"])
    capsys.readouterr()
    con = sqlite3.connect(tmp_path / "ref.sqlite")
    rows = {json.loads(p)["k"]: (v, r) for p, v, r in con.execute("select params, verdict, reason from results")}
    con.close()
    assert rows[5000][0] == "INCONCLUSIVE" and rows[5000][1].startswith("refused: ufm-ce (k = 5000")
    assert rows[3][0] == "VERIFIED"
    assert rc == 0  # nothing REFUTED, no ERROR


def test_measure_refuses_weights_that_overflow_and_features_that_underflow(tmp_path, capsys):
    import numpy as np

    r = np.random.default_rng(0)
    X, y, W = r.normal(size=(30, 4)), np.repeat(np.arange(3), 10), r.normal(size=(3, 4))
    for name, arr in (("X", X), ("y", y), ("W", W), ("Wbig", W * 1e200), ("Xt", X * 1e-200)):
        np.save(tmp_path / f"{name}.npy", arr)
    line = _one_line_exit_2(capsys, ["measure", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.npy"),
                                     "--weights", str(tmp_path / "Wbig.npy")])
    assert "--weights" in line and "overflow" in line
    line = _one_line_exit_2(capsys, ["measure", str(tmp_path / "Xt.npy"), "--labels", str(tmp_path / "y.npy")])
    assert "underflow" in line
    # accepted scales are measured, and NC3 does not depend on the scale of W (W and W * 1e100 agree)
    np.save(tmp_path / "Wmid.npy", W * 1e100)
    nc3 = []
    for w in ("W", "Wmid"):
        assert cli.main(["measure", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.npy"), "--weights",
                         str(tmp_path / f"{w}.npy"), "--json"]) == 0
        nc3.append(json.loads(capsys.readouterr().out)["metrics"]["nc3"])
    assert nc3[0] == pytest.approx(nc3[1], rel=1e-12) and 0 < nc3[0] < 4
