"""`solve ufm-regression --targets`: the .npy header is checked before loading (size budget, truncation, not a .npy
file: one line, exit 2), and wide targets never form an m x m matrix (solvers/ufm_general.py, claims/ufm.py:
check_regression)."""

from __future__ import annotations

import pytest

from proofs_check import cli


def _one_line_exit_2(capsys, args):
    rc = cli.main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("ncproofs: error: "), (rc, err)
    return err[0]


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
