"""Property tests: on random small instances the certified optimum of the exact risk matches the
prediction of the applicable theorem (I, II or III) to 1e-6 relative."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from solvers import feature_collapse as S
from theory import feature_collapse as T
from theory.feature_collapse import FCInstance

REL = 1e-6  # the tolerance for optimum vs prediction
GEOM = 1e-5  # see proofs_check.claims.feature_collapse.GEOM_RTOL


@st.composite
def instances(draw, max_work=25_000):
    n_c = draw(st.integers(2, 4))
    L = draw(st.integers(2, 3))
    s_c = draw(st.sampled_from([2, 3, 1]))
    assume(n_c ** (2 * L) * s_c ** L <= max_work)  # K * (number of sentences): keeps the default run fast
    ln = draw(st.booleans())
    if s_c > 1 and draw(st.sampled_from([True, False])):
        raw = draw(st.lists(st.floats(0.05, 1.0), min_size=s_c, max_size=s_c))
        freqs = tuple(np.asarray(raw) / np.sum(raw))
    else:
        freqs = None
    # With LayerNorm at d = 2 every embedding maps to one of the two points +-(1, -1): the risk is
    # piecewise constant in the embeddings' directions and gradient search cannot move between sign
    # patterns (a search limitation, reported INCONCLUSIVE by the claims via the certificate gap;
    # see test_layernorm_d2_search_gap_is_inconclusive_not_refuted), so the property uses d >= 3.
    lo = max(n_c, 3) if ln else n_c - 1
    d = draw(st.integers(lo, max(n_c + 1, lo)))
    if ln:
        lam = draw(st.floats(0.005, 2.0))
    else:
        probe = FCInstance(n_c, L, s_c, d, 1.0, freqs=freqs)
        thr = T.lambda_crit_symmetric_freqs(probe)
        # both sides of the exact threshold, never within 5% of it
        factor = draw(st.one_of(st.floats(0.2, 0.95), st.floats(1.05, 2.0)))
        lam = factor * thr
    return FCInstance(n_c, L, s_c, d, lam, layernorm=ln, freqs=freqs)


def _check(inst, n_starts=3):
    pred = T.predict(inst)
    sol = S.solve(inst, n_starts=n_starts, seed=0)
    scale = max(1.0, abs(pred.objective))
    assert abs(sol.value - pred.objective) <= REL * scale, (inst, sol.value, pred.objective)
    assert sol.certificate.gap <= REL * scale, sol.certificate.to_dict()
    assert sol.certificate.lower_bound <= pred.objective + REL * scale
    if pred.geometry == "trivial":
        assert np.abs(sol.variables["Z"]).max() <= GEOM
    else:
        W, U = T.configuration(inst, pred)
        Zp = U @ W.T
        assert np.linalg.norm(sol.variables["Z"] - Zp) <= GEOM * np.linalg.norm(Zp)


@settings(max_examples=8)
@given(instances())
def test_optimum_matches_prediction(inst):
    _check(inst)


@pytest.mark.slow
@settings(max_examples=40)
@given(instances(max_work=300_000))
def test_optimum_matches_prediction_larger(inst):
    _check(inst, n_starts=4)


def test_layernorm_d2_search_gap_does_not_block_the_proof():
    """The falsifying example the slow property once found (LayerNorm, n_c = d = 2): the search may
    stop above the prediction, but the certificates at the closed form prove the statement; the
    search's trouble is a diagnostic, never a verdict."""
    from proofs_check.claims.feature_collapse import check_instance
    from proofs_check.core import Verdict

    rep = check_instance(FCInstance(2, 2, 3, 2, 1.0, layernorm=True), n_starts=4, seed=0)
    assert rep.verdict is Verdict.VERIFIED, rep.reason


@st.composite
def small_instances(draw):
    n_c = draw(st.integers(2, 3))
    L = draw(st.integers(1, 2))
    s_c = draw(st.integers(1, 3))
    ln = draw(st.booleans())
    d = draw(st.integers(max(2, n_c) if ln else max(1, n_c - 1), n_c + 1))
    lam = 10 ** draw(st.floats(-6, 1))
    freqs = None
    if s_c > 1 and draw(st.booleans()):
        raw = np.asarray(draw(st.lists(st.floats(0.05, 1.0), min_size=s_c, max_size=s_c)))
        freqs = tuple(raw / raw.sum())
    return FCInstance(n_c, L, s_c, d, lam, layernorm=ln, freqs=freqs)


@settings(max_examples=6, deadline=None)
@given(small_instances())
def test_true_statements_never_refuted(inst):
    from proofs_check.claims.feature_collapse import check_instance
    from proofs_check.core import Verdict

    rep = check_instance(inst, n_starts=1, seed=0, cvxpy="no")
    assert rep.verdict in (Verdict.VERIFIED, Verdict.INCONCLUSIVE, Verdict.NOT_APPLICABLE), (inst, rep.reason)


@settings(max_examples=5, deadline=None)
@given(small_instances(), st.floats(1.002, 1.05), st.sampled_from(["b", "objective"]))
def test_false_constants_never_verified(inst, factor, field):
    import dataclasses

    from proofs_check.claims.feature_collapse import check_instance
    from proofs_check.core import Verdict

    pred = T.predict(inst)
    assume(getattr(pred, field) not in (None, 0.0))
    wrong = lambda i: dataclasses.replace(T.predict(i), **{field: getattr(T.predict(i), field) * factor})  # noqa
    rep = check_instance(inst, predict=wrong, n_starts=1, seed=0, cvxpy="no")
    assert rep.verdict in (Verdict.REFUTED, Verdict.INCONCLUSIVE, Verdict.NOT_APPLICABLE), (inst, rep.reason)
