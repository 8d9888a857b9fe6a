"""Loss objects (solvers/losses.py): values against PyTorch / written-out formulas, gradients against finite
differences, conjugates against Fenchel-Young (equality at the gradient), the user-loss example of
docs/ufm_general.md (certified against an independent cvxpy solve), refusal of a non-convex loss."""

import math

import numpy as np
import pytest

from solvers import losses as L
from solvers import ufm_general as SG
from theory._validate import InputError

RNG = np.random.default_rng(3)
K = 5
U = RNG.standard_normal((K, 7)) * 2
Y = np.array([0, 1, 2, 3, 4, 0, 2])

ALL = [L.make_loss("ce", K), L.make_loss("ls", K, smoothing=0.2), L.make_loss("ls", K, smoothing=0.2, convention="others"),
       L.make_loss("weighted-ce", K, weights=[1, 2, 3, 0.5, 1]), L.make_loss("mse", K)]


@pytest.mark.parametrize("loss", ALL, ids=lambda l: l.name + getattr(l, "convention", ""))
def test_gradient_finite_differences(loss):
    v, g = loss.value_grad(U, Y)
    D = RNG.standard_normal(U.shape)
    h = 1e-6
    fd = (loss.value_grad(U + h * D, Y)[0] - loss.value_grad(U - h * D, Y)[0]) / (2 * h)
    assert np.max(np.abs(fd - np.sum(g * D, axis=0))) <= 1e-7


@pytest.mark.parametrize("loss", ALL, ids=lambda l: l.name + getattr(l, "convention", ""))
def test_conjugate_fenchel_young(loss):
    v, g = loss.value_grad(U, Y)
    c = loss.conjugate(g, Y)
    # equality at v = grad: loss(u) + loss*(grad) = <u, grad>
    assert np.max(np.abs(v + c - np.sum(U * g, axis=0))) <= 1e-10 * (1 + np.max(np.abs(v)))
    # inequality at other points of the domain (scaled gradients at other logits)
    for _ in range(5):
        U2 = RNG.standard_normal(U.shape) * 3
        _, g2 = loss.value_grad(U2, Y)
        c2 = loss.conjugate(0.7 * g2, Y)
        assert np.all(v + c2 >= np.sum(U * 0.7 * g2, axis=0) - 1e-12)


def test_label_smoothing_targets_written_out():
    eps = 0.2
    lt = L.make_loss("ls", K, smoothing=eps)
    lo = L.make_loss("ls", K, smoothing=eps, convention="others")
    lse = np.log(np.sum(np.exp(U), axis=0))
    for j, y in enumerate(Y):
        qt = np.full(K, eps / K)
        qt[y] += 1 - eps
        qo = np.full(K, eps / (K - 1))
        qo[y] = 1 - eps
        assert abs(lt.value_grad(U[:, [j]], [y])[0][0] - (lse[j] - qt @ U[:, j])) <= 1e-12
        assert abs(lo.value_grad(U[:, [j]], [y])[0][0] - (lse[j] - qo @ U[:, j])) <= 1e-12


def test_label_smoothing_matches_pytorch():
    torch = pytest.importorskip("torch")
    lt = L.make_loss("ls", K, smoothing=0.2)
    ref = torch.nn.functional.cross_entropy(torch.tensor(U.T), torch.tensor(Y), label_smoothing=0.2,
                                            reduction="none").numpy()
    assert np.max(np.abs(lt.value_grad(U, Y)[0] - ref)) <= 1e-12


def test_ls_closed_form_matches_spec_reference():
    # spec: label smoothing (PyTorch), k = 4, n = 3, lw = lh = 5e-3: 0.43817131
    assert abs(L.make_loss("ls", 4, smoothing=0.1).closed_form(4, 3, 5e-3)["value"] - 0.43817131) <= 1e-8


@pytest.mark.parametrize("eps", [-0.1, 1.0, 1.5, float("nan")])
def test_bad_smoothing(eps):
    with pytest.raises(InputError):
        L.make_loss("ls", K, smoothing=eps)


# ---- the user-defined loss example of docs/ufm_general.md --------------------------------------------

def squared_hinge(U, y):
    """sum over c != y of max(0, 1 + u_c - u_y)^2, per column, and its gradient."""
    m = U.shape[1]
    M = np.maximum(0.0, 1.0 + U - U[y, np.arange(m)])
    M[y, np.arange(m)] = 0.0
    G = 2.0 * M
    G[y, np.arange(m)] = -G.sum(axis=0)
    return (M * M).sum(axis=0), G


def test_user_loss_example_certified_against_cvxpy():
    from proofs_check.claims.ufm import check_general

    loss = L.UserLoss("squared-hinge", squared_hinge, infimum=0.0, K=4)
    counts, lw, lh = [6, 6, 2, 1], 5e-3, 1e-2
    rep = check_general(SG.classification(loss, counts, 4, lw, lh)).to_dict()
    assert next(c for c in rep["claims"] if c["id"] == "optimal-value")["verdict"] == "VERIFIED"
    assert rep["certificate"]["method"] == "dual (linearisation)"
    cp = pytest.importorskip("cvxpy")
    y = np.repeat(np.arange(4), counts)
    N = y.size
    Z = cp.Variable((4, N))
    b = cp.Variable(4)
    Uv = Z + cp.reshape(b, (4, 1), order="F") @ np.ones((1, N))
    terms = []
    for c in range(4):
        idx = np.flatnonzero(y != c)
        for i in np.flatnonzero(y == c):
            others = [k for k in range(4) if k != c]
            terms.append(cp.sum_squares(cp.pos(1 + Uv[others, i] - Uv[c, i])))
    obj = sum(terms) / N + math.sqrt(lw * lh) * cp.normNuc(Z)
    ref = cp.Problem(cp.Minimize(obj)).solve(solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    assert abs(rep["solution"]["value"] - ref) <= 1e-6 * ref


def test_user_loss_false_value_refuted():
    from proofs_check.claims.ufm import check_general

    loss = L.UserLoss("squared-hinge", squared_hinge, infimum=0.0, K=4)
    p = SG.classification(loss, [6, 6, 2, 1], 4, 5e-3, 1e-2)
    v = check_general(p, starts=1).to_dict()["solution"]["value"]
    assert check_general(p, starts=1, claimed_value=v * (1 - 1e-5)).to_dict()["verdict"] == "REFUTED"
    assert check_general(p, starts=1, claimed_value=v * (1 + 1e-5)).to_dict()["verdict"] == "REFUTED"


def test_nonconvex_user_loss_refused():
    def sine(U, y):
        return np.sum(np.sin(U), axis=0), np.cos(U)

    with pytest.raises(InputError, match="not convex"):
        L.UserLoss("sine", sine, infimum=-10.0, K=4)


def test_user_loss_wrong_gradient_refused():
    def bad(U, y):
        return np.sum(U * U, axis=0), U  # gradient should be 2U

    with pytest.raises(InputError, match="finite differences"):
        L.UserLoss("bad", bad, infimum=0.0, K=4)


def test_user_loss_without_bound_is_not_certified():
    from proofs_check.claims.ufm import check_general

    loss = L.UserLoss("squared-hinge", squared_hinge, K=4)  # no infimum, no conjugate
    rep = check_general(SG.classification(loss, [3, 3, 3], 3, 1e-2, 1e-2)).to_dict()
    assert rep["verdict"] != "VERIFIED"


def test_docs_example_runs(capsys):
    """The python block of docs/ufm_general.md, "A user-defined loss", executed as written."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "ufm_general.md").read_text()
    block = re.search(r"## A user-defined loss.*?```python\n(.*?)```", text, re.S).group(1)
    exec(compile(block, "docs/ufm_general.md", "exec"), {})
    out = capsys.readouterr().out.split()
    assert out[0] == "VERIFIED" and abs(float(out[1]) - 0.0364621280) <= 1e-9
