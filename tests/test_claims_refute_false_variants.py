"""Every registered claim can fail: for each claim id a false variant of its statement (a value off by a margin, a
wrong exponent, geometry, rank, dimension, sign or direction), built with the claim's own factory, is REFUTED
with a witness (a REFUTED check whose evidence holds the numbers that contradict it), the registered (true)
statement is VERIFIED, and a NaN fed as the prediction never passes (never VERIFIED, never a witness).

A claim registered as the false statement of a review thread (tag ``expect-refuted`` or an ``X-corrected``
sibling) is its own false variant; its corrected sibling is the true one.

The false variants are false by construction (a reference formula multiplied by a factor != 1, a wrong name,
the negated statement), never computed by the code under test. ``test_every_registered_claim_has_a_false_variant``
keeps the table complete: a new claim without an entry here fails it.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Callable

import numpy as np
import pytest
import sympy as sp

from proofs_check.claims import crh as CC
from proofs_check.claims import deep_ufm as DC
from proofs_check.claims import feature_collapse as FC
from proofs_check.claims import feature_collapse_beyond as FB
from proofs_check.claims import feature_collapse_hier as FH
from proofs_check.claims import ntk as NC
from proofs_check.claims import ntk_general as NG
from proofs_check.claims import ntk_thread as NTH
from proofs_check.claims import scl as SC
from proofs_check.claims import scl_thread as STH
from proofs_check.claims import ufm as UC
from proofs_check.claims import ufm_general as UG
from proofs_check.claims import ufm_relu as UR
from proofs_check.core import Claim, RunContext, Verdict
from proofs_check.registry import all_claims
from proofs_check.runner import EXPECT_REFUTED
from theory import crh as CT
from theory import deep_ufm as DT
from theory import feature_collapse as FT
from theory import ntk as NT
from theory import scl as ST
from theory import ufm as UT
from theory._validate import InputError
from tests._reference import scl_eq2_without_j

CTX = RunContext()
NAN = float("nan")
REGISTERED = {c.id: c for c in all_claims()}


def _false_as_written(cid: str) -> bool:
    c = REGISTERED[cid]
    return EXPECT_REFUTED in c.tags or f"{cid}-corrected" in REGISTERED


def _scaled(fn, field, factor):
    """A prediction function whose dataclass field (a number or a tuple of numbers) is multiplied by factor."""
    def predict(inst):
        p = fn(inst)
        v = getattr(p, field)
        return dataclasses.replace(p, **{field: tuple(x * factor for x in v) if isinstance(v, tuple) else v * factor})
    return predict


def _replaced(fn, field, value):
    def predict(inst):
        p = fn(inst)
        v = getattr(p, field)
        return dataclasses.replace(p, **{field: tuple(value for _ in v) if isinstance(v, tuple) else value})
    return predict


def _nan_like(x):
    return np.full(np.shape(x), NAN)


# ---- false variants -----------------------------------------------------------------------------------------

def _crh_isotropy_complement(W):
    """Claimed: isotropy is needed on the complement of W's row space (false: on the row space)."""
    _, s, Vt = np.linalg.svd(W)
    r = int(np.sum(s > 1e-10 * s[0]))
    return np.eye(W.shape[1]) - Vt[:r].T @ Vt[:r]


def _crh_exponent_table_shifted():
    ref = dict(CT.REFERENCE_PAIRS)
    pair = next(p for p, v in ref.items() if v is not None)
    x, y = ref[pair]
    ref[pair] = (Fraction(x) + Fraction(1, 1000), Fraction(y))
    return ref


def _crh_nc_cosines(delta):
    imb = float(CT.nc_imbalanced_cosine((150, 20, 20, 20)))
    return {r: (1.0 if r.endswith("RGA") else imb + delta) for r in CT.RELATION_NAMES}


def _crh_breaking_nothing_drops():
    pat = {k: set(v) for k, v in CT.NC_BREAK_UNAFFECTED.items()}
    pat[next(iter(pat))] = set(CT.RELATION_NAMES)  # claimed: breaking it changes no relation
    return pat


def _fc_wrong_derivation():
    n, nw, K = sp.symbols("n_c n_w K", positive=True)
    return {"lambda_crit without the -K n_c^-L term":
            sp.sqrt(K * 2 / nw) / (1 + K) - sp.sqrt(K * 2 / nw) / (1 + K - K * n ** (-2))}


def _fc_constants_rows_off():
    rows = [(inst, dict(vals)) for inst, vals in FC.make_constants_claim.__defaults__[0]]
    rows[0][1]["objective"] = str(float(rows[0][1]["objective"]) * 1.01)
    return rows


def _fb_type2_candidate_off(inst, lg):  # c* and U off by 1 %
    from solvers import feature_collapse_ln as LN

    W, U, g, b, c = LN.aligned_candidate(inst, lg)
    return W, U * 1.01, g, b, c * 1.01


def _fb_limit_off(inst):
    p = FT.type1_prediction(inst)
    return dataclasses.replace(p, a=p.a * 1.01, b=p.b * 1.01)


def _ntk_limits(key, value):
    def limits(inst):
        d = dict(NT.small_init_limits(inst))
        d[key] = value(d[key])
        return d
    return limits


def _ntk_rates(comp, value):
    def rates(inst):
        r = dict(NT.residual_rates(inst))
        r[comp] = value(r[comp])
        return r
    return rates


def _ntk_eigen(value):
    def eigen(C, m, kd, kc, kn):
        l0, lc, lg = NT.sym_eigenvalues(C, m, kd, kc, kn)
        return l0, value(lc), lg
    return eigen


def _ntk_zero_step_change(W, H, G, K, eta):  # claimed: discrete steps conserve the invariant (false: O(eta^2))
    return 0 * (W.T @ W)


def _ntk_wrong_consequences(k, g, w):
    return {"WWt_offdiag": 0.0, "W_sq_norm": w, "feature_gram": tuple(x - 1 - w * y + 2 for x, y in zip(g, k))}



def _ufm_value_times(factor):
    return lambda inst: UC.default_predict(inst) * factor


# claim id -> (false variant, NaN variant or None where the statement holds no number)
FALSE: dict[str, Callable[[], Claim]] = {}
NAN_VARIANT: dict[str, Callable[[], Claim]] = {}


def _case(cid, false, nan=None):
    assert cid not in FALSE, cid
    FALSE[cid] = false
    if nan is not None:
        NAN_VARIANT[cid] = nan


# CRH (docs/crh.md)
_case("crh.identity.backprop",
      lambda: CC.backprop_claim(predict_H_b=lambda W, H: (1 + 1e-6) * W @ H @ W.T, claim_id="x"),
      lambda: CC.backprop_claim(predict_H_b=lambda W, H: _nan_like(W @ H @ W.T), claim_id="x"))
_case("crh.identity.transfer", lambda: CC.transfer_claim(shift=2, claim_id="x"),
      lambda: CC.transfer_claim(shift=NAN, claim_id="x"))
_case("crh.identity.scaled_projector", lambda: CC.scaled_projector_claim(eigenvalues=lambda c: (0.0, c * (1 + 1e-6)),
                                                                         claim_id="x"),
      lambda: CC.scaled_projector_claim(eigenvalues=lambda c: (0.0, NAN), claim_id="x"))
_case("crh.identity.isotropy_on_range", lambda: CC.isotropy_claim(projector=_crh_isotropy_complement, claim_id="x"),
      lambda: CC.isotropy_claim(projector=lambda W: np.full((W.shape[1], W.shape[1]), NAN), claim_id="x"))
_case("crh.identity.one_step",
      lambda: CC.one_step_claim(eta2_term=lambda S_, W, g: 0.5 * (S_ - g * W) @ (S_ - g * W).T, claim_id="x"),
      lambda: CC.one_step_claim(eta2_term=lambda S_, W, g: _nan_like((S_ - g * W) @ (S_ - g * W).T), claim_id="x"))
_case("crh.identity.stationarity", lambda: CC.stationarity_claim(predict_b=lambda W, g: (1 + 1e-4) * g * W @ W.T,
                                                                 claim_id="x"),
      lambda: CC.stationarity_claim(predict_b=lambda W, g: _nan_like(W @ W.T), claim_id="x"))
_case("crh.identity.relu_balance", lambda: CC.balance_claim(activation="tanh", claim_id="x"))
_case("crh.pah.exponent_table", lambda: CC.exponent_table_claim(reference=_crh_exponent_table_shifted(), claim_id="x"))
_case("crh.nc.last_layer", lambda: CC.nc_claim(predicted=_crh_nc_cosines(0.01), claim_id="x"),
      lambda: CC.nc_claim(predicted={r: NAN for r in CT.RELATION_NAMES}, claim_id="x"))
_case("crh.nc.breaking", lambda: CC.nc_breaking_claim(unaffected=_crh_breaking_nothing_drops(), claim_id="x"))
_case("crh.reparam.gwa_invariance", lambda: CC.reparam_claim(("a-GWA", "b-GWA", "NFA"), claim_id="x"),
      lambda: CC.reparam_claim(compensation=lambda Q: np.full_like(Q, NAN), claim_id="x"))
_case("crh.reparam.nfa_changes", lambda: CC.nfa_changes_claim(False, claim_id="x"))
_case("crh.experiment.alignment_vs_weight_decay", lambda: CC.alignment_wd_claim(direction="decreases", claim_id="x"))
_case("crh.experiment.alignment_level", lambda: CC.alignment_level_claim(0.0, 0.86, claim_id="x"),
      lambda: CC.alignment_level_claim(1e-2, NAN, claim_id="x"))
_case("crh.experiment.rank_drop", lambda: CC.rank_claim(rank=2, claim_id="x"))
_case("crh.experiment.stationarity", lambda: CC.stationarity_sgd_claim(stationary=False, claim_id="x"))
_case("crh.magnitude.first-moment", lambda: CC.first_moment_claim(coefficient=2.0, claim_id="x"),
      lambda: CC.first_moment_claim(coefficient=NAN, claim_id="x"))
_case("crh.magnitude.cauchy-schwarz", lambda: CC.cauchy_schwarz_claim(claimed_ratio=1.0, claim_id="x"),
      lambda: CC.cauchy_schwarz_claim(claimed_ratio=NAN, claim_id="x"))
_case("crh.magnitude.gamma-exponent", lambda: REGISTERED["crh.magnitude.gamma-exponent"])
_case("crh.magnitude.gamma-exponent-corrected", lambda: CC.gamma_exponent_claim(3.0, corrected=True, claim_id="x"),
      lambda: CC.gamma_exponent_claim(NAN, corrected=True, claim_id="x"))
_case("crh.layers.later-better", lambda: CC.later_better_claim("earlier", claim_id="x"))
_case("crh.lazy.no-alignment", lambda: REGISTERED["crh.lazy.no-alignment"])
_case("crh.lazy.no-alignment-corrected",
      lambda: CC.lazy_claim(forced=(), unchanged=CC.LAZY_UNCHANGED, max_change=CC.LAZY_RWA_CHANGE, claim_id="x"),
      lambda: CC.lazy_claim(forced=CC.LAZY_FORCED, unchanged=CC.LAZY_UNCHANGED, max_change=NAN, claim_id="x"))
_case("crh.noise-injection.rga", lambda: CC.noise_claim(coefficient=2.0, claim_id="x"),
      lambda: CC.noise_claim(coefficient=NAN, claim_id="x"))
_case("crh.identity.transfer-inverse", lambda: CC.transfer_inverse_claim(full_rank=False, claim_id="x"))
_case("crh.linear-regression.normalisation", lambda: REGISTERED["crh.linear-regression.normalisation"])
_case("crh.linear-regression.normalisation-corrected", lambda: CC.linreg_claim("whitening", claim_id="x"))

# Deep UFM (docs/deep_ufm.md)
_case("deep_ufm.linear-mse.optimum",
      lambda: DC.make_linear_optimum_claim(predict_value=lambda i: DT.linear_mse_optimum(i).value * (1 + 1e-4)),
      lambda: DC.make_linear_optimum_claim(predict_value=lambda i: NAN))
_case("deep_ufm.dnc.suboptimal", lambda: DC.make_dnc_suboptimal_claim(predict_optimal=lambda i: True),
      lambda: DC.make_dnc_suboptimal_claim(predict_dnc_value=lambda i: NAN))
_case("deep_ufm.dnc.optimal-shallow", lambda: DC.make_dnc_shallow_claim(predict_optimal=lambda i: False),
      lambda: DC.make_dnc_shallow_claim(predict_dnc_value=lambda i: NAN))
_case("deep_ufm.ce.low-rank-bias", lambda: DC.make_ce_claim(predict_trend="constant", final_below_dnc=False),
      lambda: DC.make_ce_claim(bound=lambda i, tau: NAN))

# Feature collapse (docs/feature_collapse.md)
_case("feature_collapse.derivations", lambda: FC.make_derivations_claim(_fc_wrong_derivation, claim_id="x"))
_case("feature_collapse.thm1.constants", lambda: FC.make_constants_claim(rows=_fc_constants_rows_off(), claim_id="x"))
_case("feature_collapse.thm1.type1-optimal",
      lambda: FC.make_type1_claim(predict=_scaled(FT.type1_prediction, "objective", 1 + 1e-4), claim_id="x"),
      lambda: FC.make_type1_claim(predict=_replaced(FT.type1_prediction, "objective", NAN), claim_id="x"))
_case("feature_collapse.thm1.trivial-phase",
      lambda: FC.make_trivial_phase_claim(threshold=lambda s: FC.theorem1_threshold(s) * 1.01, claim_id="x"),
      lambda: FC.make_trivial_phase_claim(threshold=lambda s: sp.nan, claim_id="x"))
_case("feature_collapse.thm1.low-dim", lambda: FC.make_low_dim_claim("x", required_dim=lambda inst: inst.n_c))
_case("feature_collapse.thm2.type3",
      lambda: FC.make_type3_claim(predict=_scaled(FT.type3_prediction, "r", 1.01), claim_id="x"),
      lambda: FC.make_type3_claim(predict=_replaced(FT.type3_prediction, "r", NAN), claim_id="x"))
_case("feature_collapse.thm3.layernorm",
      lambda: FC.make_type2_claim(predict=_scaled(FT.type2_prediction, "b", 1.01), claim_id="x"),
      lambda: FC.make_type2_claim(predict=_replaced(FT.type2_prediction, "b", NAN), claim_id="x"))
_case("feature_collapse.trainable-ln.attained", lambda: REGISTERED["feature_collapse.trainable-ln.attained"])
_case("feature_collapse.trainable-ln.attained-corrected",
      lambda: FB.make_trainable_ln_attained_claim(ln_decay=0.1, claimed=False, claim_id="x"))
_case("feature_collapse.trainable-ln.type2",
      lambda: FB.make_trainable_ln_type2_claim(candidate=_fb_type2_candidate_off, n_starts=2, claim_id="x"))
_case("feature_collapse.trainable-ln.landscape", lambda: REGISTERED["feature_collapse.trainable-ln.landscape"])
_case("feature_collapse.trainable-ln.landscape-corrected",
      lambda: FB.make_trainable_ln_landscape_claim(
          features=lambda inst: {"rotated": FB.rotated_type2_features(inst, 0.4)}, claim_id="x"))
_case("feature_collapse.no-decay.no-minimum", lambda: FB.make_no_decay_no_minimum_claim(has_minimum=lambda inst: True,
                                                                                        claim_id="x"))
_case("feature_collapse.no-decay.limit", lambda: FB.make_no_decay_limit_claim(predict=_fb_limit_off, claim_id="x"),
      lambda: FB.make_no_decay_limit_claim(predict=_replaced(FT.type1_prediction, "a", NAN), claim_id="x"))
_case("feature_collapse.random-latents.word-collapse",
      lambda: FB.make_random_word_collapse_claim(groups=lambda inst: [list(range(0, 2 * inst.s_c))], claim_id="x"))
_case("feature_collapse.random-latents.geometry",
      lambda: FB.make_random_geometry_claim(equiangular=lambda inst: True, claim_id="x"))
_case("feature_collapse.hier.collapse", lambda: REGISTERED["feature_collapse.hier.collapse"])
_case("feature_collapse.hier.collapse-corrected",
      lambda: FH.make_hier_collapse_claim(layer2_cosine=0.0, layer1_forced=False, claim_id="x"),
      lambda: FH.make_hier_collapse_claim(layer2_cosine=NAN, layer1_forced=False, claim_id="x"))

# NTK (docs/ntk.md)
_case("ntk.spectrum", lambda: NC.spectrum_claim(_ntk_eigen(lambda lc: lc * (1 + 1e-6)), claim_id="false"),
      lambda: NC.spectrum_claim(_ntk_eigen(lambda lc: NAN), claim_id="false"))
_case("ntk.inverse",
      lambda: NC.inverse_claim("false", coefficients=lambda l0, lc, lg: (1 / l0, (1 + 1e-6) / lc, 1 / lg)),
      lambda: NC.inverse_claim("false", coefficients=lambda l0, lc, lg: (1 / l0, NAN, 1 / lg)))
_case("ntk.rates", lambda: NC.rates_claim(_ntk_rates("class", lambda r: r * 1.001), claim_id="false"),
      lambda: NC.rates_claim(_ntk_rates("class", lambda r: NAN), claim_id="false"))
_case("ntk.invariant", lambda: NC.invariant_claim((1.0, 1.01, 1.0), claim_id="false"),
      lambda: NC.invariant_claim((1.0, NAN, 1.0), claim_id="false"))
_case("ntk.scatter", lambda: NC.scatter_claim("lambda_c", claim_id="false"))
_case("ntk.nc1-bound", lambda: NC.nc1_bound_claim(0.99, claim_id="false"),
      lambda: NC.nc1_bound_claim(NAN, claim_id="false"))
_case("ntk.small-init-limit", lambda: NC.small_init_claim(_ntk_limits("mean_sq_norm", lambda v: v * 1.01),
                                                          claim_id="false"),
      lambda: NC.small_init_claim(_ntk_limits("mean_sq_norm", lambda v: NAN), claim_id="false"))
_case("ntk.lazy-no-collapse", lambda: NC.lazy_claim(collapses=True, claim_id="false"))
_case("ntk.e-zero", lambda: NC.e_zero_claim(predict_etf=True, claim_id="false"))
_case("ntk.general.invariant", lambda: NG.general_invariant_claim(step_change=_ntk_zero_step_change, claim_id="x"),
      lambda: NG.general_invariant_claim(
          step_change=lambda W, H, G, K, e: _nan_like(W.T @ W) if isinstance(W, np.ndarray) else sp.nan * (W.T * W),
          claim_id="x"))
_case("ntk.general.nc1-at-e-zero", lambda: NG.general_nc1_claim(constant=0.9, claim_id="x"),
      lambda: NG.general_nc1_claim(constant=NAN, claim_id="x"))
_case("ntk.general.etf", lambda: NG.general_etf_claim(condition_fn=lambda K, counts: True, claim_id="x"))
_case("ntk.imbalanced.nc1", lambda: NG.imbalanced_nc1_claim(within_eigenvalue=lambda k: k[0] - k[2], claim_id="x"),
      lambda: NG.imbalanced_nc1_claim(within_eigenvalue=lambda k: NAN, claim_id="x"))
_case("ntk.imbalanced.etf", lambda: NG.imbalanced_etf_claim(predict_etf=True, claim_id="x"))
_case("ntk.ce.invariant", lambda: NG.ce_invariant_claim(step_change=_ntk_zero_step_change, claim_id="x"))
_case("ntk.ce.collapse", lambda: NG.ce_collapse_claim(constant=0.9, claim_id="x"),
      lambda: NG.ce_collapse_claim(constant=NAN, claim_id="x"))
_case("ntk.ce.nc1-decays", lambda: NG.ce_nc1_decay_claim(rate=1.01, claim_id="x"),
      lambda: NG.ce_nc1_decay_claim(rate=NAN, claim_id="x"))
_case("ntk.reviewer.first-implications", lambda: REGISTERED["ntk.reviewer.first-implications"])
_case("ntk.reviewer.first-implications-corrected",
      lambda: NTH.reviewer_first_claim(implications=NT.reviewer_first_implications, corrected=True, claim_id="x"))
_case("ntk.reviewer.corrected-implications", lambda: REGISTERED["ntk.reviewer.corrected-implications"])
_case("ntk.reviewer.corrected-implications-corrected", lambda: NTH.reviewer_corrected_claim(sign=1.0, claim_id="x"),
      lambda: NTH.reviewer_corrected_claim(sign=NAN, claim_id="x"))
_case("ntk.assumption.consequences",
      lambda: NTH.assumption_consequences_claim(consequences=_ntk_wrong_consequences, claim_id="x"),
      lambda: NTH.assumption_consequences_claim(consequences=lambda k, g, w: {"WWt_offdiag": NAN, "W_sq_norm": NAN,
                                                                              "feature_gram": (NAN,) * len(g)},
                                                claim_id="x"))
_case("ntk.assumption.consistency", lambda: NTH.consistency_claim(holds_at_limit=True, claim_id="x"))

# SCL (docs/scl.md)
_case("scl.theorem1.full_batch_bound", lambda: SC.make_theorem1_claim(bound=lambda n, t: ST.theorem1_bound(n, t) * 1.01,
                                                                      claim_id="x"),
      lambda: SC.make_theorem1_claim(bound=lambda n, t: NAN, claim_id="x"))
_case("scl.theorem1.low_dim_gap", lambda: SC.make_lowdim_claim(required_dim=lambda n: len(n) + 1, claim_id="x"))
_case("scl.theorem2.minibatch_bound",
      lambda: SC.make_theorem2_claim(bound=lambda n, b, t: ST.theorem2_bound(n, b, t) * 1.01, claim_id="x"),
      lambda: SC.make_theorem2_claim(bound=lambda n, b, t: NAN, claim_id="x"))
_case("scl.corollary.uniqueness", lambda: SC.make_uniqueness_claim(predict=lambda an: True, claim_id="x"))
_case("scl.corollary.batch_binding",
      lambda: SC.make_binding_claim(binding=lambda c, b: tuple(tuple(x) for x in b), claim_id="x"))
_case("scl.graf.balanced_etf", lambda: SC.make_graf_claim(value=lambda n, t: ST.etf_value(n, t) * 1.01, claim_id="x"),
      lambda: SC.make_graf_claim(value=lambda n, t: NAN, claim_id="x"))
_case("scl.ufm.imbalanced_not_etf", lambda: SC.make_imbalanced_ufm_claim(geometry="simplex-etf", claim_id="x"))
_case("scl.ufm.minibatch_not_etf", lambda: SC.make_minibatch_ufm_claim(etf_optimal=True, claim_id="x"))
_case("scl.relu_cost_positive",
      lambda: SC.make_relu_cost_claim(cost=lambda n, t: ST.relu_cost(n, t) + 1e-3, claim_id="x"),
      lambda: SC.make_relu_cost_claim(cost=lambda n, t: NAN, claim_id="x"))
_case("scl.centering_of_to_etf",
      lambda: SC.make_centering_claim(weighted_cosines=lambda n: ST.weighted_centering_cosines(n) * 1.01, claim_id="x"),
      lambda: SC.make_centering_claim(weighted_cosines=lambda n: _nan_like(ST.weighted_centering_cosines(n)),
                                      claim_id="x"))
_case("scl.tau_limits",
      lambda: SC.make_tau_limits_claim(limits=lambda n, N: (math.log(n), math.log(N - 1)), claim_id="x"),
      lambda: SC.make_tau_limits_claim(limits=lambda n, N: (NAN, NAN), claim_id="x"))
_case("scl.thread.distances", lambda: STH.make_distances_claim(rescale=lambda k: k / (k - 1), claim_id="x"),
      lambda: STH.make_distances_claim(rescale=lambda k: NAN, claim_id="x"))
_case("scl.thread.eq1-eq2", lambda: STH.make_eq1_eq2_claim(eq2=scl_eq2_without_j, claim_id="x"),
      lambda: STH.make_eq1_eq2_claim(eq2=lambda H, y, tau: NAN, claim_id="x"))
_case("scl.thread.rank", lambda: REGISTERED["scl.thread.rank"])
_case("scl.thread.rank-corrected", lambda: STH.make_rank_claim(claim_id="x"))  # the thread's rank, irrespective of ReLU
_case("scl.thread.graf-special-case",
      lambda: STH.make_graf_special_case_claim(batching=lambda counts, b: [[0, 1], [2, 3], [0, 2], [1, 3]],
                                               cases=[((2, 2), 3)], claim_id="x"))
_case("scl.thread.binary-antipodal", lambda: STH.make_binary_antipodal_claim(geometry="orthogonal-frame", claim_id="x"),
      lambda: STH.make_binary_antipodal_claim(value=lambda *a: NAN, claim_id="x"))
_case("scl.activations.same-result", lambda: REGISTERED["scl.activations.same-result"])
_case("scl.activations.same-result-corrected",
      lambda: STH.make_activation_claim(prediction={**STH.DERIVED_ACTIVATION_RESULT, "relu": "infimum"}, claim_id="x"))

# UFM, CE and MSE (docs/ufm.md)
for _loss in ("ce", "mse"):
    _case(f"ufm.{_loss}.symbolic-derivation",
          lambda loss=_loss: UC.symbolic_claim(loss, predict=_scaled(UT.optimum, "value", 1 + 1e-6)),
          lambda loss=_loss: UC.symbolic_claim(loss, predict=_replaced(UT.optimum, "value", NAN)))
    _case(f"ufm.{_loss}.optimal-value",
          lambda loss=_loss: UC.value_claim(loss, predict=_ufm_value_times(1 + 1e-6), claim_id="x"),
          lambda loss=_loss: UC.value_claim(loss, predict=lambda inst: NAN, claim_id="x"))
    _case(f"ufm.{_loss}.collapse-etf",
          lambda loss=_loss: UC.geometry_claim(loss, expected="orthogonal-frame", claim_id="x"))
    _case(f"ufm.{_loss}.trivial-phase",
          lambda loss=_loss: UC.trivial_phase_claim(threshold=lambda k: 1 / (k - 1), loss=loss, claim_id="x"),
          lambda loss=_loss: UC.trivial_phase_claim(threshold=lambda k: NAN, loss=loss, claim_id="x"))
_case("ufm.ce.bias-penalty-invariance",
      lambda: UC.bias_penalty_claim(predict=lambda i: UC.default_predict(i) * (1 + i.lb)),
      lambda: UC.bias_penalty_claim(predict=lambda i: NAN))

# UFM, any loss (docs/ufm_general.md)
_case("ufm_general.label-smoothing.optimal-value",
      lambda: UG.make_ls_value_claim(predict=lambda *a: UG.label_smoothing_value(*a) * (1 + 1e-6), claim_id="x"),
      lambda: UG.make_ls_value_claim(predict=lambda *a: NAN, claim_id="x"))
_case("ufm_general.label-smoothing.collapse-etf", lambda: UG.make_ls_geometry_claim("x", geometry="orthogonal-frame"))
_case("ufm_general.regression.optimal-value",
      lambda: UG.make_regression_value_claim(predict=lambda Y, lw, lh: UG.regression_value(Y, lw, lh) * (1 + 1e-4),
                                             claim_id="x"),
      lambda: UG.make_regression_value_claim(predict=lambda Y, lw, lh: NAN, claim_id="x"))
_case("ufm_general.imbalanced.minimiser-geometry",
      lambda: UG.make_imbalanced_geometry_claim(expected=lambda c, n: {"classifier_norm_ratio": 1.0}, claim_id="x"),
      lambda: UG.make_imbalanced_geometry_claim(expected=lambda c, n: {"classifier_norm_ratio": NAN}, claim_id="x"))
_case("ufm_general.imbalanced-mse.optimal-value",
      lambda: UG.make_imbalanced_mse_value_claim(
          predict=lambda c, lw, lh: UG.imbalanced_mse_value(c, lw, lh) * (1 + 1e-6), claim_id="x"),
      lambda: UG.make_imbalanced_mse_value_claim(predict=lambda c, lw, lh: NAN, claim_id="x"))

# UFM with ReLU features (docs/ufm_relu.md)
_case("ufm.relu.balanced-geometry", lambda: UR.make_balanced_geometry_claim(geometry="simplex-etf", claim_id="x"),
      lambda: UR.make_balanced_geometry_claim(value=lambda *a: NAN, claim_id="x"))
_case("ufm.relu.imbalanced-not-of", lambda: UR.make_imbalanced_claim(not_of=False, bias=True, claim_id="x"))
_case("ufm.relu.imbalanced-of-without-bias", lambda: UR.make_imbalanced_claim(not_of=True, bias=False, claim_id="x"))
_case("ufm.relu.classifier-sign", lambda: UR.make_classifier_sign_claim(direction=(1.0, 1.0), claim_id="x"),
      lambda: UR.make_classifier_sign_claim(direction=(NAN, NAN), claim_id="x"))


# ---- the tests ----------------------------------------------------------------------------------------------

def _numbers(x) -> list[float]:
    """The finite numbers in an evidence entry (nested dicts, lists, arrays)."""
    if isinstance(x, dict):
        return [v for e in x.values() for v in _numbers(e)]
    if isinstance(x, (list, tuple)):
        return [v for e in x for v in _numbers(e)]
    if isinstance(x, np.ndarray):
        return [float(v) for v in x.ravel() if np.isfinite(v)] if x.dtype.kind in "fiu" else []
    if isinstance(x, (bool, np.bool_)) or x is None or isinstance(x, str):
        return []
    try:
        v = float(x)
    except (TypeError, ValueError):
        return []
    return [v] if math.isfinite(v) else []


def _assert_refuted_with_witness(res, what: str):
    assert res.verdict is Verdict.REFUTED, f"{what}: expected REFUTED (a false statement), got {res.verdict.value}: " \
                                           f"{res.reason}"
    refuting = [c for c in res.checks if c.verdict is Verdict.REFUTED]
    assert refuting, what
    # a witness: the refuting check states what contradicts the statement and keeps the numbers that show it
    assert all(c.reason for c in refuting), what
    assert any(_numbers(c.evidence) for c in refuting), \
        f"{what}: no REFUTED check keeps a finite number in its evidence: {[c.to_dict() for c in refuting]}"


def test_every_registered_claim_has_a_false_variant():
    assert set(FALSE) == set(REGISTERED), (f"claims without a false variant: {sorted(set(REGISTERED) - set(FALSE))}; "
                                           f"entries without a claim: {sorted(set(FALSE) - set(REGISTERED))}")


def test_every_false_as_written_claim_has_a_corrected_true_one():
    for cid in REGISTERED:
        if EXPECT_REFUTED in REGISTERED[cid].tags:
            assert f"{cid}-corrected" in REGISTERED, cid


FLINT_SKIP = "needs python-flint (optional extra 'rigorous'): the claim's certificates are in ball arithmetic"


def _run(claim):
    """The claim's result; skipped where its certificates need python-flint and it is not installed."""
    import importlib.util

    res = claim.run(CTX)
    if importlib.util.find_spec("flint") is None and "python-flint" in (res.reason or ""):
        pytest.skip(FLINT_SKIP)
    return res


@pytest.mark.parametrize("cid", sorted(REGISTERED))
def test_false_variant_refuted_with_a_witness(cid):
    claim = FALSE[cid]()
    if not _false_as_written(cid):
        assert claim is not REGISTERED[cid]
    _assert_refuted_with_witness(_run(claim), cid)


@pytest.mark.parametrize("cid", sorted(c for c in REGISTERED if not _false_as_written(c)))
def test_true_statement_verified(cid):
    res = _run(REGISTERED[cid])
    assert res.verdict is Verdict.VERIFIED, f"{cid}: {res.verdict.value}: {res.reason}"


@pytest.mark.parametrize("cid", sorted(NAN_VARIANT))
def test_nan_prediction_never_passes(cid):
    try:
        claim = NAN_VARIANT[cid]()
    except InputError:
        return  # refused as bad input, naming the parameter: never judged
    res = _run(claim)
    assert res.verdict is not Verdict.VERIFIED, f"{cid}: NaN prediction VERIFIED: {res.reason}"
    assert res.verdict is not Verdict.ERROR, f"{cid}: NaN prediction crashed the check: {res.reason}"
    assert res.verdict is not Verdict.REFUTED, f"{cid}: NaN taken as a witness: {res.reason}"
