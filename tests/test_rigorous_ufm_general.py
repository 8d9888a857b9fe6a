"""Rigorous (ball-arithmetic) certificates for `solve ufm` with any counts (docs/rigorous.md, "UFM, any loss,
imbalanced counts").

Independent references: the balanced closed form of docs/ufm_general.md ("Balanced closed form for label
smoothing"), evaluated here with mpmath at 50 digits and checked against the 8-digit reference values of the
spec; for imbalanced counts (no closed form) the float pipeline's own certificate (a separate computation in
float64 with its round-off allowance): the rigorous bracket must be consistent with it.
"""

import numpy as np
import pytest

flint = pytest.importorskip("flint")
mpmath = pytest.importorskip("mpmath")

from proofs_check import rigorous as PR  # noqa: E402
from proofs_check.claims import ufm as C  # noqa: E402
from solvers import losses as L  # noqa: E402
from solvers import rigorous as R  # noqa: E402
from solvers import ufm_general as SG  # noqa: E402


def _closed_form_mp(K, n, lw, lh, q_y, w=1):
    """docs/ufm_general.md: a = (1 - q_y) + (K - 1) s / w, s = sqrt(n) lam; c* = log((1 - a)(K - 1)/a),
    f* = w [-log(1 - a) + a c*] (collapse phase, a < (K - 1)/K)."""
    with mpmath.workdps(50):
        lam = mpmath.sqrt(mpmath.mpf(lw) * mpmath.mpf(lh))
        s = mpmath.sqrt(n) * lam
        a = (1 - mpmath.mpf(q_y)) + (K - 1) * s / w
        assert a < mpmath.mpf(K - 1) / K
        c = mpmath.log((1 - a) * (K - 1) / a)
        return w * (-mpmath.log(1 - a) + a * c)


def _report(loss, counts, d, lw, lh, claimed=None):
    p = SG.classification(loss, list(counts), d, lw, lh)
    return C.check_general(p, starts=1, claimed_value=claimed).to_dict()


def _claim(out, cid="optimal-value"):
    return next(c for c in out["claims"] if c["id"] == cid)


@pytest.mark.parametrize("name,eps,lw,lh,ref", [
    ("ce", 0.0, 5e-3, 1e-2, 0.19781481),   # spec: balanced CE (4, 3, 4, 5e-3, 1e-2)
    ("ls", 0.1, 5e-3, 5e-3, 0.43817131),   # spec: label smoothing, PyTorch convention, eps = 0.1
])
def test_balanced_reference_values_inside_the_rigorous_bracket(name, eps, lw, lh, ref):
    K, n = 4, 3
    q_y = 1.0 - eps + eps / K
    f = _closed_form_mp(K, n, lw, lh, q_y)
    assert abs(f - mpmath.mpf(ref)) < 5e-9  # the transcription of the closed form matches the spec
    out = PR.apply(_report(L.make_loss(name, K, smoothing=eps), [n] * K, 4, lw, lh))
    rig = out["certificate"]["rigorous"]
    assert rig["lower"] is not None and rig["upper"] is not None, rig
    with mpmath.workdps(50):
        assert mpmath.mpf(rig["lower"][0]) <= f <= mpmath.mpf(rig["upper"][1])
        assert mpmath.mpf(rig["upper"][1]) - mpmath.mpf(rig["lower"][0]) < 1e-9 * f


IMBALANCED = [
    ("ce", L.make_loss("ce", 4), (6, 6, 2, 1)),
    ("ls-others", L.make_loss("ls", 5, smoothing=0.1, convention="others"), (5, 5, 3, 3, 1)),
    ("weighted-ce", L.make_loss("weighted-ce", 4, weights=[1.0, 1.0, 2.0, 3.0]), (6, 6, 2, 1)),
    ("mse", L.make_loss("mse", 4), (6, 6, 2, 1)),
    ("ce-distinct-counts", L.make_loss("ce", 5), (5, 4, 3, 2, 1)),   # no exchangeable classes: K x K route
    ("mse-distinct-counts", L.make_loss("mse", 5), (7, 4, 3, 2, 1)),
]


@pytest.mark.parametrize("tag,loss,counts", IMBALANCED, ids=[t[0] for t in IMBALANCED])
def test_imbalanced_bracket_is_consistent_with_the_float_certificate(tag, loss, counts):
    rep = _report(loss, counts, 8, 5e-3, 5e-3)
    float_lower, float_upper = rep["certificate"]["lower_bound"], rep["certificate"]["upper"]
    out = PR.apply(rep)
    rig = out["certificate"]["rigorous"]
    assert rig["lower"] is not None and rig["upper"] is not None, rig
    lo, up = rig["lower"][0], rig["upper"][1]
    assert lo <= float_upper                      # a proven lower bound is below a feasible value
    assert lo >= float_lower - 1e-9 * abs(float_upper)
    assert up >= float_lower                      # a feasible value is above the float proven bound
    assert up - lo <= 1e-9 * abs(float_upper)
    c = _claim(out)
    assert c["verdict"] == "VERIFIED" and c["rigorous"] is True
    assert out["rigorous"] is True


@pytest.mark.parametrize("factor", [1 + 1e-6, 1 - 1e-6])
def test_false_claimed_value_is_refuted(factor):
    loss, counts = L.make_loss("ce", 4), (6, 6, 2, 1)
    v = _report(loss, counts, 8, 5e-3, 5e-3)["certificate"]["upper"]
    out = PR.apply(_report(loss, counts, 8, 5e-3, 5e-3, claimed=v * factor))
    c = _claim(out)
    assert c["verdict"] == "REFUTED", c
    assert out["verdict"] == "REFUTED"


def test_small_dimension_keeps_only_the_lower_bound():
    out = PR.apply(_report(L.make_loss("ce", 4), (6, 6, 2, 1), 1, 5e-3, 5e-3))
    rig = out["certificate"]["rigorous"]
    assert rig["lower"] is not None and rig["upper"] is None
    assert "upper_note" in rig["details"]


def _setup():
    p = SG.classification(L.make_loss("ce", 4), [6, 6, 2, 1], 8, 5e-3, 5e-3)
    layout, pt = PR.ufm_general_candidate(p)
    Zs = SG.slot_logits(p, pt, layout)
    _, Gs = p.loss.value_grad_slots(Zs, layout)
    # a dyadic dual point whose columns sum to exactly 0 (own slot := -sum of the others with multiplicity)
    D = np.round(Gs * 2.0 ** 30) / 2.0 ** 30
    m = layout.m
    D[m] = -(layout.mult[:m] * D[:m]).sum(axis=0)
    return p, layout, Zs, D


def _bound(p, layout, Zs, **kw):
    return R.ufm_general_grouped(p.loss, p.counts, p.lw, p.lh, p.lb, layout, Zs, **kw)


def test_given_dual_point_is_accepted_and_perturbations_are_rejected():
    p, layout, Zs, D = _setup()
    ok = _bound(p, layout, Zs, dual=D)           # control: the exact dyadic point is feasible after projection
    ref = _bound(p, layout, Zs)
    assert abs(ok.lower_bound - ref.lower_bound) < 1e-6   # the rounded point is nearly as tight
    bad = D.copy()
    bad[1, 0] += 2.0 ** -30                       # a column no longer sums to 0: off the simplex
    with pytest.raises(R.NotCertified):
        _bound(p, layout, Zs, dual=bad)
    with pytest.raises(R.NotCertified):           # bias constraint not exact and no projection
        _bound(p, layout, Zs, dual=D, project=False)
    with pytest.raises(R.NotCertified):           # forced scale t = 1 with ||A||_2 ~ 10 lam
        _bound(p, layout, Zs, dual=10 * D, scale=1.0)
    neg = D.copy()
    m = layout.m
    neg[1, 0] -= 0.5                              # off-label entry -0.5 (q = 0 there): x < 0 off the simplex
    neg[m, 0] += 0.5 * layout.mult[1, 0]
    with pytest.raises(R.NotCertified):
        _bound(p, layout, Zs, dual=neg)


def test_unsupported_inputs_keep_the_float_verdicts():
    rep = _report(L.make_loss("ce", 4), (6, 6, 2, 1), 8, 5e-3, 5e-3)
    rep["instance"] = dict(rep["instance"], counts={"distinct": 3, "min": 1, "max": 6})
    out = PR.apply(rep)
    assert out["certificate"]["rigorous"]["status"] == "unsupported"
    assert out["rigorous"] is False and out["verdict"] == rep["verdict"]
    rep = _report(L.make_loss("ce", 4), (6, 6, 2, 1), 8, 5e-3, 5e-3)
    rep["instance"] = dict(rep["instance"], lambda_b=1e-2)
    out = PR.apply(rep)
    assert out["certificate"]["rigorous"]["status"] == "unsupported" and out["rigorous"] is False
