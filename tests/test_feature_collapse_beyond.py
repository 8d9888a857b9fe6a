"""Feature collapse beyond the symmetric model (issue 23): trainable LayerNorm, no weight decay, random latents.

Every claim factory is fed a false variant that must be REFUTED; expected numbers come from hand derivations
(log 2 for two groups of two classes, sqrt(lambda lambda_LN) |v|), finite differences and random feasible points,
never from the code under test."""

import dataclasses
import json
import math

import numpy as np
import pytest

from proofs_check.claims import feature_collapse_beyond as C
from proofs_check.cli import main
from proofs_check.core import RunContext, Verdict
from solvers import feature_collapse as S
from solvers import feature_collapse_beyond as B
from solvers import feature_collapse_ln as LN
from theory import feature_collapse as T
from theory._validate import InputError
from theory.feature_collapse import FCInstance

CTX = RunContext()
LN_INST = FCInstance(2, 2, 2, 3, 0.05, layernorm=True)
ONE_LN = lambda ctx: [LN_INST]  # noqa: E731


def _fd_check(fun, x, seed=0, h=1e-6):
    rng = np.random.default_rng(seed)
    e = rng.normal(size=x.size)
    fd = (fun(x + h * e)[0] - fun(x - h * e)[0]) / (2 * h)
    return fd, float(fun(x)[1] @ e)


# ---- trainable LayerNorm: the model -----------------------------------------------------------------

def test_trainable_ln_gradient_matches_finite_differences():
    m = LN.TrainableLN(FCInstance(2, 2, 2, 3, 0.05, layernorm=True, freqs=(0.7, 0.3)), 0.1)
    x = np.random.default_rng(3).normal(size=sum(m.sizes()))
    fd, an = _fd_check(m.fun, x)
    assert an == pytest.approx(fd, rel=1e-6, abs=1e-9)


def test_rescaling_keeps_scores_and_lowers_the_value_without_decay():
    m = LN.TrainableLN(LN_INST, 0.0)
    rng = np.random.default_rng(1)
    W, U = rng.normal(size=(4, 3)), rng.normal(size=(8, 3))
    g, b = rng.normal(size=3), rng.normal(size=3)
    seq = LN.rescaling_sequence(m, W, U, g, b, factors=(1, 3, 9))
    assert seq["score_change"] < 1e-12
    pen = 0.5 * 0.05 * float(np.sum(U * U))
    # value(c) = CE + pen / c^2 (hand formula)
    for c, v, ce in zip(seq["factors"], seq["values"], seq["cross_entropies"]):
        assert v == pytest.approx(ce + pen / c ** 2, rel=1e-12)


def test_profiled_penalty_is_the_group_lasso():
    lam, lg, v = 0.05, 0.3, 1.7
    gs = np.linspace(0.05, 5, 200001)
    vals = lam / 2 * v ** 2 / gs ** 2 + lg / 2 * gs ** 2
    assert vals.min() == pytest.approx(math.sqrt(lam * lg) * v, rel=1e-8)


def test_atomic_bound_is_below_random_feasible_points():
    m = LN.TrainableLN(FCInstance(2, 2, 2, 3, 0.05, layernorm=True), 0.2)
    rng = np.random.default_rng(0)
    cand = LN.aligned_candidate(m.inst, 0.2)
    lb = LN.atomic_lower_bound(m, m.scores_matrix(*cand[:4]))["lower_bound"]
    for _ in range(30):
        W, U = rng.normal(size=(4, 3)), rng.normal(scale=2.0, size=(8, 3))
        g, b = rng.normal(size=3), rng.normal(size=3)
        assert lb <= m.objective(W, U, g, b, grad=False) + 1e-12


def test_sign_enumeration_and_ln_decay_validation():
    sig = LN.sign_vectors(4)
    assert sig.shape == (8, 4) and len({tuple(s) for s in sig}) == 8 and np.all(sig[:, 0] == 1)
    for bad in (-1e-3, float("nan"), 1e5):
        with pytest.raises(InputError, match="ln_decay"):
            LN.validate_ln_decay(bad)


# ---- trainable LayerNorm: claims ---------------------------------------------------------------------

def test_attained_claim_refuted_and_corrected_verified():
    r = C.make_trainable_ln_attained_claim(instances=ONE_LN).run(CTX)
    assert r.verdict == Verdict.REFUTED, r.reason
    ch = [c for c in r.checks if "has a minimiser" in c.name][0]
    vals = ch.evidence["witness_values"]
    assert all(a > b for a, b in zip(vals, vals[1:])) and vals[0] == ch.evidence["proposed_minimiser_value"]
    assert C.make_trainable_ln_attained_claim(claimed=False, corrected=True, instances=ONE_LN).run(CTX).verdict \
        == Verdict.VERIFIED


def test_attained_false_variant_with_decay_refuted():
    """'No minimiser' with lambda_LN > 0 is false (coercive)."""
    r = C.make_trainable_ln_attained_claim(ln_decay=0.1, claimed=False, instances=ONE_LN).run(CTX)
    assert r.verdict == Verdict.REFUTED


def test_type2_claim_verified_and_false_candidate_refuted():
    r = C.make_trainable_ln_type2_claim(instances=ONE_LN, ln_decays=(0.05,)).run(CTX)
    assert r.verdict == Verdict.VERIFIED, r.reason

    def wrong(inst, lg):  # c* off by 1 %
        W, U, g, b, c = LN.aligned_candidate(inst, lg)
        return W, U * 1.01, g, b, c * 1.01
    r = C.make_trainable_ln_type2_claim(instances=ONE_LN, ln_decays=(0.05,), candidate=wrong, n_starts=2).run(CTX)
    assert r.verdict == Verdict.REFUTED, r.reason


def test_type2_without_certificate_is_inconclusive_for_three_concepts():
    checks = C.type2_checks(FCInstance(3, 2, 2, 3, 0.05, layernorm=True), 0.1, n_starts=1)
    geo = [c for c in checks if c.name.endswith("minimiser-type-ii")][0]
    assert geo.verdict == Verdict.INCONCLUSIVE and "gap" in geo.reason


def test_landscape_claim_refuted_and_corrected_verified():
    r = C.make_trainable_ln_landscape_claim(instances=ONE_LN).run(CTX)
    assert r.verdict == Verdict.REFUTED
    bad = [c for c in r.checks if c.verdict == Verdict.REFUTED][0]
    assert "rotated" in bad.name and bad.evidence["witness_gap"] > 1e-3
    rc = C.make_trainable_ln_landscape_claim(features=C._corrected_features, corrected=True, instances=ONE_LN).run(CTX)
    assert rc.verdict == Verdict.VERIFIED, rc.reason


def test_landscape_false_variant_rotated_features_only_refuted():
    feats = lambda inst: {"rotated": C.rotated_type2_features(inst, 0.4)}  # noqa: E731
    assert C.make_trainable_ln_landscape_claim(features=feats, instances=ONE_LN).run(CTX).verdict == Verdict.REFUTED


def test_rotated_features_are_layernorm_outputs():
    E = C.rotated_type2_features(FCInstance(3, 2, 2, 4, 0.05, layernorm=True))
    assert np.allclose(E.sum(axis=1), 0, atol=1e-12) and np.allclose(np.sum(E * E, axis=1), 4)


# ---- no weight decay -------------------------------------------------------------------------------------

def test_infimum_by_hand():
    assert B.infimum_ce(FCInstance(3, 2, 2, 4, 0.05)) == 0.0
    assert B.infimum_ce(FCInstance(2, 1, 2, 3, 0.05, K=4, latents="random", seed=6)) == pytest.approx(math.log(2))
    assert B.infimum_ce(FCInstance(2, 1, 2, 3, 0.05, K=2, latents="random", seed=0)) == pytest.approx(math.log(2))


def test_no_minimum_claim_verified_and_false_variants_refuted():
    assert C.make_no_decay_no_minimum_claim().run(CTX).verdict == Verdict.VERIFIED
    literal = C.make_no_decay_no_minimum_claim(has_minimum=lambda inst: False).run(CTX)  # the thread, literally
    assert literal.verdict == Verdict.REFUTED
    assert any("share one latent" in c.reason for c in literal.checks if c.verdict == Verdict.REFUTED)
    assert C.make_no_decay_no_minimum_claim(has_minimum=lambda inst: True).run(CTX).verdict == Verdict.REFUTED


def test_no_decay_limit_verified_and_wrong_configuration_refuted():
    base = FCInstance(2, 2, 2, 2, 0.05)
    r = C.make_no_decay_limit_claim(base=base).run(CTX)
    assert r.verdict == Verdict.VERIFIED, r.reason

    def predict(inst):
        p = T.type1_prediction(inst)
        return dataclasses.replace(p, a=p.a * 1.01, b=p.b * 1.01)
    assert C.make_no_decay_limit_claim(predict=predict, base=base).run(CTX).verdict == Verdict.REFUTED


def test_max_margin_bracket_closes_on_type1_and_not_on_a_skewed_direction():
    inst = FCInstance(3, 2, 2, 4, 1e-6)
    W, U = T.configuration(inst, T.type1_prediction(inst))
    mm = B.max_margin_bracket(inst, U @ W.T)
    assert mm["dual"] <= mm["primal"] * (1 + 1e-12) and mm["primal"] - mm["dual"] <= 1e-9 * mm["primal"]
    rng = np.random.default_rng(0)
    mm2 = B.max_margin_bracket(inst, U @ W.T + 0.3 * rng.normal(size=(18, 6)))
    assert mm2["primal"] is None or mm2["primal"] > mm["dual"] * (1 + 1e-6)  # weak duality, not optimal


# ---- random latents --------------------------------------------------------------------------------------

RL = FCInstance(3, 3, 2, 6, 0.02, K=8, latents="random", seed=1)


def test_word_collapse_claim_verified_and_wrong_grouping_refuted():
    one = lambda ctx: [RL]  # noqa: E731
    assert C.make_random_word_collapse_claim(instances=one).run(CTX).verdict == Verdict.VERIFIED
    merged = lambda inst: [list(range(0, 2 * inst.s_c))]  # noqa: E731  words of concepts 0 and 1 tied
    r = C.make_random_word_collapse_claim(groups=merged, instances=one).run(CTX)
    assert r.verdict == Verdict.REFUTED


def test_equivariance_fails_for_unequal_frequencies():
    inst = FCInstance(3, 2, 2, 6, 0.05, K=5, latents="random", seed=3, freqs=(0.8, 0.2))
    assert C._equivariance_check(inst, 0, 1).verdict == Verdict.REFUTED
    assert C._equivariance_check(FCInstance(3, 2, 2, 6, 0.05, K=5, latents="random", seed=3), 0, 1).verdict \
        == Verdict.VERIFIED


def test_geometry_claim_verified_and_equiangular_variant_refuted():
    one = lambda ctx: [RL]  # noqa: E731
    r = C.make_random_geometry_claim(instances=one).run(CTX)
    assert r.verdict == Verdict.VERIFIED and r.checks[0].evidence["witness_gap"] > 1e-3
    assert C.make_random_geometry_claim(equiangular=lambda i: True, instances=one).run(CTX).verdict == Verdict.REFUTED


def test_subspace_bound_below_random_equiangular_points():
    prob = S.FCProblem(RL)
    eq = B.solve_equiangular(RL, n_starts=1, maxiter=300)
    lb = B.subspace_lower_bound(prob, eq["Z"], B.equiangular_basis(RL))["lower_bound"]
    rng = np.random.default_rng(2)
    F = T.concept_vectors(3, 6, orthogonal_to_ones=True)
    alpha = np.repeat(np.arange(3), 2)
    for _ in range(20):
        W = (rng.uniform(0.5, 2) * F + rng.normal() * np.ones(6) / math.sqrt(6))[alpha]
        U = rng.normal(size=(24, 6))
        assert lb <= prob.objective(W, U, grad=False) + 1e-12


def test_symmetric_instance_is_equiangular():
    checks = C.geometry_checks(FCInstance(3, 2, 2, 4, 0.05), True)
    assert checks[0].verdict == Verdict.VERIFIED, checks[0].reason


# ---- CLI -------------------------------------------------------------------------------------------------

def test_cli_trainable_ln(capsys):
    base = ["solve", "feature-collapse", "--concepts", "2", "--length", "2", "--words-per-concept", "2", "--dim", "3",
            "--lambda", "0.05", "--layernorm", "--trainable-ln", "--starts", "1", "--json"]
    assert main(base + ["--ln-decay", "0.05"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["verdict"] == "VERIFIED" and {c["id"] for c in d["claims"]} == {"has-minimiser", "optimal-value",
                                                                             "minimiser-type-ii"}
    assert main(base) == 1  # a REFUTED statement: exit 1
    d = json.loads(capsys.readouterr().out)
    c = [c for c in d["claims"] if c["id"] == "has-minimiser"][0]
    assert c["verdict"] == "REFUTED" and len(c["evidence"]["witness_values"]) >= 5


@pytest.mark.parametrize("extra,msg", [(["--trainable-ln"], "--layernorm"), (["--ln-decay", "1"], "--trainable-ln"),
                                       (["--layernorm", "--trainable-ln", "--ln-decay", "-1"], "ln_decay"),
                                       (["--layernorm", "--trainable-ln", "--ln-decay", "0.1", "--words-per-concept", "9"],
                                        "sign vectors")])
def test_cli_trainable_ln_bad_input(extra, msg, capsys):
    wpc = [] if "--words-per-concept" in extra else ["--words-per-concept", "2"]
    rc = main(["solve", "feature-collapse", "--concepts", "2", "--length", "2", "--dim", "3", "--lambda", "0.05"]
              + wpc + extra)
    assert rc == 2 and msg in capsys.readouterr().err


def test_cli_rigorous_refused_for_trainable_ln_and_hier(capsys):
    rc = main(["solve", "feature-collapse", "--concepts", "2", "--length", "2", "--words-per-concept", "2", "--dim", "3",
               "--lambda", "0.05", "--layernorm", "--trainable-ln", "--rigorous"])
    assert rc == 2 and "rigorous" in capsys.readouterr().err
    assert main(["solve", "feature-collapse-hier", "--rigorous"]) == 2 and "rigorous" in capsys.readouterr().err


def test_trainable_ln_without_decay_reports_the_infimum():
    rep = C.check_trainable(FCInstance(2, 1, 2, 3, 0.05, K=4, latents="random", seed=6, layernorm=True), 0.0,
                            n_starts=1)
    inf = [c for c in rep.claims if c.name == "infimum"][0]
    assert inf.verdict == Verdict.VERIFIED and inf.evidence["infimum"] == pytest.approx(math.log(2))  # two pairs
    assert math.log(2) <= inf.evidence["feasible_value"] <= math.log(2) + 1e-9


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=8, deadline=None)
@given(st.integers(2, 3), st.integers(1, 2), st.integers(1, 2), st.integers(2, 4), st.floats(0.01, 1.0),
       st.floats(0.01, 1.0), st.integers(0, 10 ** 6))
def test_atomic_bound_from_any_candidate_is_below_every_point(n_c, L, s_c, d, lam, lg, seed):
    """The atomic-dual bound is valid at ANY candidate Z0 (here random): below the objective at random points."""
    inst = FCInstance(n_c, L, s_c, d, lam, layernorm=True)
    m = LN.TrainableLN(inst, lg)
    rng = np.random.default_rng(seed)
    lb = LN.atomic_lower_bound(m, rng.normal(size=(inst.K * L, inst.n_w)))["lower_bound"]
    for _ in range(5):
        W, U = rng.normal(size=(inst.n_w, d)), rng.normal(size=(inst.K * L, d))
        g, b = rng.normal(size=d), rng.normal(size=d)
        assert lb <= m.objective(W, U, g, b, grad=False) + 1e-12
