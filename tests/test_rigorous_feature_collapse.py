"""Rigorous (ball-arithmetic) certificates for feature collapse (docs/rigorous.md).

Independent values: the spec's closed forms (docs/feature_collapse.md: Theorem 1 for uniform frequencies,
Theorem 3 with LayerNorm, both with K = n_c^L latents) minimised in 50-digit mpmath here.
"""

import pytest

flint = pytest.importorskip("flint")
mpmath = pytest.importorskip("mpmath")

from proofs_check import rigorous as PR  # noqa: E402
from proofs_check.claims import feature_collapse as C  # noqa: E402
from solvers import rigorous as R  # noqa: E402
from theory import feature_collapse as T  # noqa: E402


def _mpf(q):
    return mpmath.mpf(q.numerator) / q.denominator


def mp_theorem1(n_c, L, s_c, lam):
    """min_t L log(1 + (n_c - 1) e^{-c}) + Lam t, c = n_c t/(n_c - 1), Lam = lam sqrt(n_w K L), K = n_c^L."""
    with mpmath.workdps(50):
        K, n_w = n_c ** L, n_c * s_c
        Lam = mpmath.mpf(lam) * mpmath.sqrt(n_w * K * L)
        ec = L * n_c / Lam - (n_c - 1)
        if ec <= 1:
            return L * mpmath.log(n_c)
        c = mpmath.log(ec)
        t = (n_c - 1) * c / n_c
        return L * mpmath.log(1 + (n_c - 1) * mpmath.exp(-c)) + Lam * t


def mp_theorem3(n_c, L, d, lam):
    """min_b L log(1 + (n_c - 1) e^{-kappa b}) + (lam/2) K L b^2, kappa = sqrt(d) n_c/(n_c - 1), K = n_c^L."""
    with mpmath.workdps(50):
        K = n_c ** L
        kap = mpmath.sqrt(d) * mpmath.mpf(n_c) / (n_c - 1)
        lam = mpmath.mpf(lam)

        def psi(b):
            return L * mpmath.log(1 + (n_c - 1) * mpmath.exp(-kap * b)) + lam / 2 * K * L * b * b

        b = mpmath.findroot(lambda x: mpmath.diff(psi, x), mpmath.mpf(1))
        return psi(b)


def _bracket(inst):
    rb = R.feature_collapse_from_instance(inst.to_dict())
    with mpmath.workdps(50):
        return _mpf(R.endpoints(rb.lower)[0]), _mpf(R.endpoints(rb.upper)[1]), rb


@pytest.mark.parametrize("n_c,L,s_c,d,lam", [(3, 2, 2, 4, 0.05), (2, 3, 2, 3, 0.02), (3, 2, 2, 4, 5.0),
                                              (3, 1, 3, 3, 1e-3)])
def test_theorem1_bracket_contains_the_50_digit_optimum(n_c, L, s_c, d, lam):
    lo, hi, rb = _bracket(T.FCInstance(n_c, L, s_c, d, lam))
    f = mp_theorem1(n_c, L, s_c, lam)
    with mpmath.workdps(50):
        assert lo <= f <= hi
        assert hi - lo <= 1e-8 * f
    assert rb.details["sentences"] > 0


@pytest.mark.parametrize("n_c,L,s_c,d,lam,freqs", [(3, 2, 2, 3, 0.05, (0.8, 0.2)), (2, 2, 2, 2, 0.1, None)])
def test_layernorm_bracket_contains_the_50_digit_optimum(n_c, L, s_c, d, lam, freqs):
    lo, hi, rb = _bracket(T.FCInstance(n_c, L, s_c, d, lam, layernorm=True, freqs=freqs))
    f = mp_theorem3(n_c, L, d, lam)
    with mpmath.workdps(50):
        assert lo <= f <= hi
        assert hi - lo <= 1e-8 * f
    assert "sdp-dual" in rb.method


def test_nonuniform_conjecture_instance_is_bracketed_narrowly():
    inst = T.FCInstance(3, 2, 3, 4, 0.05, freqs=T.zipf_freqs(3))
    lo, hi, rb = _bracket(inst)
    with mpmath.workdps(50):
        assert hi - lo <= 1e-8 * hi
        # the theory's 40-digit value (Theorem 2, solved by mpmath in theory.feature_collapse) lies inside
        assert lo <= mpmath.mpf(T.predict(inst).objective) * (1 + mpmath.mpf(1e-15)) and \
            mpmath.mpf(T.predict(inst).objective) * (1 - mpmath.mpf(1e-15)) <= hi


def test_false_claim_is_refuted_and_true_one_rigorously_verified():
    inst = T.FCInstance(3, 2, 2, 4, 0.05)
    out = PR.apply(C.check_instance(inst).to_dict())
    val = next(c for c in out["claims"] if c["id"].startswith("optimal-value"))
    assert val["verdict"] == "VERIFIED" and val["rigorous"] is True and out["rigorous"] is True
    # the family's value tolerance is 1e-6 relative (proofs_check.claims.feature_collapse.VALUE_RTOL), so a claim
    # off by 1e-6 sits on the tolerance; 1e-5 is refuted
    bad = C.check_instance(inst, predict=lambda i: _scaled(T.predict(i), 1 + 1e-5)).to_dict()
    out = PR.apply(bad)
    val = next(c for c in out["claims"] if c["id"].startswith("optimal-value"))
    assert val["verdict"] == "REFUTED" and out["verdict"] == "REFUTED"


def _scaled(pred, factor):
    import dataclasses

    return dataclasses.replace(pred, objective=pred.objective * factor)


def test_ldl_rejects_a_matrix_that_is_not_positive_definite():
    from flint import arb

    with R._Precision(128):
        ok = [[arb(2), arb(1)], [arb(1), arb(2)]]
        bad = [[arb(1), arb(2)], [arb(2), arb(1)]]  # eigenvalues 3, -1
        tiny = [[arb(1), arb(1)], [arb(1), arb(1)]]  # singular: PSD but not verifiable as PD
        assert R.ldl_positive_definite(ok)
        assert not R.ldl_positive_definite(bad)
        assert not R.ldl_positive_definite(tiny)
        assert R.lambda_min_lower(bad, -1.0) <= -1
