"""Cross-entropy UFM with nonnegative features (solvers.ufm_nonneg, proofs_check.claims.ufm_relu): the DNN bound
is valid at random feasible points, the balanced closed form against an independent full-sample solve, every
claim factory REFUTED on a false variant, and the CLI."""

import json
import math

import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar

from proofs_check.claims import ufm_relu as R
from proofs_check.cli import main
from proofs_check.core import RunContext, Verdict
from solvers import losses as L
from solvers import ufm_general as SG
from solvers import ufm_nonneg as NN
from theory import ufm_nonneg as TN

CTX = RunContext("quick", 0)


def _p(counts, d, lw, lh, loss="ce", **kw):
    return SG.classification(L.make_loss(loss, len(counts), **kw), list(counts), d, lw, lh, 0.0)


def _full_value(p, W, H):
    """f on the full sample matrix (no class reduction): mean CE + decays."""
    y = np.repeat(np.arange(p.K), p.counts)
    vals, _ = p.loss.value_grad(W @ H, y)
    return float(vals.mean()) + 0.5 * p.lw * float(np.sum(W * W)) + 0.5 * p.lh * float(np.sum(H * H))


@pytest.mark.parametrize("counts,d,lw,lh", [((3, 3, 3), 3, 1e-2, 1e-2), ((6, 2), 2, 1e-2, 1e-2), ((4, 2, 1), 5, 1e-3, 5e-3)])
def test_bound_below_random_feasible_points(counts, d, lw, lh):
    p = _p(counts, d, lw, lh)
    sol = NN.solve(p, starts=2, seed=1)
    cert = NN.certificate_at(p, sol.variables["W"], sol.variables["U"], upper=sol.value)
    rng = np.random.default_rng(3)
    N = sum(counts)
    for _ in range(50):
        W = rng.standard_normal((len(counts), d)) * rng.uniform(0.1, 3)
        H = np.abs(rng.standard_normal((d, N))) * rng.uniform(0.1, 3)
        assert _full_value(p, W, H) >= cert.lower_bound
    assert sol.value - cert.lower_bound <= 1e-6 * sol.value


def test_balanced_closed_form_independent():
    K, n, lw, lh = 3, 2, 1e-2, 1e-2
    N = K * n
    c = math.sqrt(lw * lh * N * (K - 1))
    one_d = minimize_scalar(lambda s: math.log1p((K - 1) * math.exp(-s)) + c * s, bounds=(0, 50), method="bounded",
                            options={"xatol": 1e-12})
    assert TN.balanced_value(K, n, lw, lh) == pytest.approx(one_d.fun, abs=1e-10)
    # an independent full-sample multi-start solve (softplus parametrisation H = exp(V) >= 0) reaches it
    p = _p((n,) * K, K, lw, lh)
    best = np.inf
    rng = np.random.default_rng(0)
    for _ in range(4):
        x0 = np.concatenate([rng.standard_normal(K * K), np.abs(rng.standard_normal(K * N))])

        def f(x):
            W = x[:K * K].reshape(K, K)
            H = x[K * K:].reshape(K, N)
            return _full_value(p, W, H)

        r = minimize(f, x0, method="L-BFGS-B", bounds=[(None, None)] * (K * K) + [(0, None)] * (K * N),
                     options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-12})
        best = min(best, r.fun)
    assert best == pytest.approx(TN.balanced_value(K, n, lw, lh), rel=1e-6)


def test_symbolic_steps_zero():
    assert TN.sym_balanced_duality_gap() == 0
    assert TN.sym_balanced_feasibility() == 0
    assert all(x == 0 for x in TN.sym_offdiag_cancel(3))


def test_k10_n5_certified():
    p = _p((5,) * 10, 10, 5e-3, 5e-3)
    r = R.solve_and_certify(p, starts=2, seed=0)
    assert (r["upper"] - r["cert"].lower_bound) <= 1e-6 * r["upper"]
    assert r["point_bounds"]["max_cross_cosine_upper"] < 1e-3


def test_claims_true_and_false_variants():
    inst = [((2, 2), 2, 5e-3, 5e-3)]
    assert R.make_balanced_geometry_claim(instances=inst).run(CTX).verdict is Verdict.VERIFIED
    wrong = lambda K, n, lw, lh: TN.balanced_value(K, n, lw, lh) * (1 + 1e-5)
    assert R.make_balanced_geometry_claim(value=wrong, instances=inst).run(CTX).verdict is Verdict.REFUTED
    assert R.make_balanced_geometry_claim(geometry="simplex-etf", instances=inst).run(CTX).verdict is Verdict.REFUTED
    assert R.make_balanced_geometry_claim(negative_classifier=False, instances=inst).run(CTX).verdict is Verdict.REFUTED
    imb = [((6, 2), 2, 1e-2, 1e-2)]
    assert R.make_imbalanced_claim(not_of=True, bias=False, instances=imb).run(CTX).verdict is Verdict.REFUTED
    assert R.make_imbalanced_claim(not_of=False, bias=False, instances=imb).run(CTX).verdict is Verdict.VERIFIED
    imb_b = [((8, 4, 2), 4, 5e-3, 5e-3)]
    assert R.make_imbalanced_claim(not_of=True, bias=True, instances=imb_b).run(CTX).verdict is Verdict.VERIFIED
    assert R.make_imbalanced_claim(not_of=False, bias=True, instances=imb_b).run(CTX).verdict is Verdict.REFUTED


def test_of_restricted_bias_bound_below_random_orthogonal_points():
    """The bound of every orthogonal configuration (free bias) is below the value of random such configurations."""
    p = _p((8, 4, 2), 4, 5e-3, 5e-3)
    lb = NN.of_restricted_bias_bound(p)["lower_bound"]
    rng = np.random.default_rng(0)
    K, N = 3, 14
    y = np.repeat(np.arange(K), p.counts)
    for _ in range(200):
        W = rng.standard_normal((K, 4)) * rng.uniform(0.1, 5)
        a = np.abs(rng.standard_normal(K)) * rng.uniform(0.1, 5)
        H = np.zeros((4, N))
        H[y, np.arange(N)] = a[y]
        b = rng.standard_normal(K) * rng.uniform(0, 3)
        vals, _ = p.loss.value_grad(W @ H + b[:, None], y)
        f = float(vals.mean()) + 0.5 * p.lw * float(np.sum(W * W)) + 0.5 * p.lh * float(np.sum(H * H))
        assert f >= lb


def test_classifier_sign_claim_and_false_variants():
    assert R.make_classifier_sign_claim().run(CTX).verdict is Verdict.VERIFIED
    assert R.make_classifier_sign_claim(direction=(1.0, 1.0)).run(CTX).verdict is Verdict.REFUTED
    assert R.make_classifier_sign_claim(negative_entries=False).run(CTX).verdict is Verdict.REFUTED
    m, w = R.max_margin_direction()
    assert m == pytest.approx(1 / math.sqrt(2), abs=1e-12)
    assert w == pytest.approx([1 / math.sqrt(2), -1 / math.sqrt(2)], abs=1e-9)


def test_cli(capsys):
    rc = main(["solve", "ufm", "--loss", "ce", "--nonneg-features", "--counts", "8,4,2", "--dim", "3",
               "--lambda-w", "5e-3", "--lambda-h", "5e-3", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["verdict"] == "VERIFIED"
    assert {c["id"] for c in out["claims"]} >= {"optimal-value", "geometry-orthogonal-frame", "classifier-negative-entry"}
    rc = main(["solve", "ufm", "--loss", "ls", "--smoothing", "0.1", "--nonneg-features", "--classes", "3",
               "--per-class", "2", "--dim", "2", "--lambda-w", "1e-2", "--lambda-h", "1e-2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and {c["id"]: c["verdict"] for c in out["claims"]}["geometry-orthogonal-frame"] == "NOT_APPLICABLE"
    for bad in (["--lambda-b", "0.1"], ["--loss", "mse"]):
        assert main(["solve", "ufm", "--nonneg-features", "--counts", "2,2", "--dim", "2", "--lambda-w", "1e-2",
                     "--lambda-h", "1e-2"] + bad) == 2
