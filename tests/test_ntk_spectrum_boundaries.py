"""`solve ntk`: the block kernel's spectrum against numpy's eigvalsh of the N x N kernel built here (kappa_d on the
diagonal, kappa_c within a class, kappa_n across classes), with negative and larger-than-kappa_c kappa_n, C = 2 and
m = 2; and the positive-definiteness boundary: lambda_g = kappa_d + (m-1) kappa_c + m(C-1) kappa_n = 0 exactly is
refused naming --kappa, one double inside is accepted; the small-initialisation limits agree with the closed forms
of docs/ntk.md evaluated here."""

import json

import numpy as np
import pytest

from proofs_check.cli import main


def _kernel(C, m, kd, kc, kn):
    y = np.repeat(np.arange(C), m)
    K = np.where(y[:, None] == y[None], kc, kn).astype(float)
    np.fill_diagonal(K, kd)
    return K


@pytest.mark.parametrize("C, m, kappa", [(2, 2, (1.0, 0.6, 0.2)), (3, 2, (1.0, 0.3, -0.1)), (2, 3, (2.0, 0.1, 0.4)),
                                         (4, 2, (1.0, -0.2, 0.05))])
def test_spectrum_and_limits_against_the_kernel_built_here(capsys, C, m, kappa):
    rc = main(["solve", "ntk", "-C", str(C), "-m", str(m), f"--kappa={','.join(map(repr, kappa))}", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc in (0, 1)
    eig = np.linalg.eigvalsh(_kernel(C, m, *kappa))
    pred = out["predicted"]
    values = np.repeat(pred["eigenvalues"], pred["multiplicities"])
    assert np.sort(values) == pytest.approx(eig, abs=1e-12)
    kd, kc, kn = kappa
    lam0, lamc = kd - kc, kd + (m - 1) * kc - m * kn
    assert pred["eigenvalues"][:2] == pytest.approx([lam0, lamc], abs=1e-14)
    assert pred["mean_sq_norm"] == pytest.approx(np.sqrt(lamc / m) * (1 - 1 / C), rel=1e-13)
    assert pred["W_fro_sq"] == pytest.approx(np.sqrt(m / lamc) * (C - 1), rel=1e-13)
    assert pred["escape_rate"] == pytest.approx(np.sqrt(m * lamc), rel=1e-13)
    assert pred["late_within_rate"] == pytest.approx(lam0 * np.sqrt(m / lamc), rel=1e-13)


def test_positive_definiteness_boundary(capsys):
    # C = m = 2, kappa = (1, 0, kn): lambda_g = 1 + 2 kn is 0 at kn = -0.5
    rc = main(["solve", "ntk", "-C", "2", "-m", "2", "--kappa=1,0,-0.5"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "--kappa" in err and "lambda_g" in err
    inside = float(np.nextafter(-0.5, 0.0))
    assert np.linalg.eigvalsh(_kernel(2, 2, 1.0, 0.0, inside)).min() > 0
    rc = main(["solve", "ntk", "-C", "2", "-m", "2", f"--kappa=1,0,{inside!r}", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc in (0, 1)
    assert out["predicted"]["eigenvalues"][2] == pytest.approx(1.0 + 2 * inside, abs=1e-30)
