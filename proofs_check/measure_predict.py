"""``ncproofs measure``'s predictions and graded words: the certified optimum of the matching model
(UFM cross-entropy / squared loss, SCL) at the data's class counts, the network's own UFM
objective, and the words next to a Gram distance (docs/measure.md, "Predictions").
Every name is re-exported by :mod:`proofs_check.measure`.
"""

from __future__ import annotations

import math

import numpy as np

from theory import metrics as MT
from theory._validate import InputError, as_float

PREDICT = ("ufm-ce", "ufm-mse", "scl", "auto")

#: Largest K for which the UFM closed form's KKT certificate (class-reduced, O(K^2) memory, ~3 s at
#: K = 1000 on 2 cores, O(K^3)) is run; above it the prediction is reported with the certificate marked
#: "not run" (``ncproofs solve ufm-ce`` runs it on its own).
UFM_CERTIFICATE_MAX_K = 1000

#: Graded words for a normalised Gram distance (a Frobenius distance between unit-norm matrices, in
#: [0, 2]). The thresholds only choose the word; the number is always printed next to it and no
#: statement is decided from it (a measurement is not a verdict).
GRADES = ((0.05, "close to"), (0.2, "near"), (0.5, "partway to"), (math.inf, "far from"))


# ---------------------------------------------------------------------------------------------
# Predictions (the certified optimum of the matching model)
# ---------------------------------------------------------------------------------------------

def _resolve_predict(predict, lw, lh, tau) -> str | None:
    given_ufm = lw is not None or lh is not None
    if predict is None:
        for opt, v in (("--lambda-w", lw), ("--lambda-h", lh), ("--tau", tau)):
            if v is not None:
                raise InputError(f"{opt} is given without --predict (name the model: --predict ufm-ce, ufm-mse or scl)")
        return None
    if predict not in PREDICT:
        raise InputError(f"--predict must be one of {', '.join(PREDICT)}, got {predict!r}")
    if given_ufm and tau is not None:
        raise InputError("--tau and --lambda-w/--lambda-h are given together: --tau belongs to --predict scl, the "
                         "lambdas to --predict ufm-ce/ufm-mse")
    if predict == "auto":
        if tau is not None:
            return "scl"
        if given_ufm:
            return "ufm-ce"
        raise InputError("--predict auto needs --tau (SCL) or --lambda-w and --lambda-h (UFM, cross-entropy; name "
                         "--predict ufm-mse for the squared loss)")
    if predict.startswith("ufm"):
        if tau is not None:
            raise InputError(f"--tau does not apply to --predict {predict} (it needs --lambda-w and --lambda-h)")
        if lw is None or lh is None:
            raise InputError(f"--predict {predict} needs --lambda-w and --lambda-h (the UFM weight decays)")
    if predict == "scl" and tau is None:
        raise InputError("--predict scl needs --tau (the temperature)")
    if predict == "scl" and given_ufm:
        raise InputError("--lambda-w/--lambda-h do not apply to --predict scl (it needs --tau)")
    return predict


def validate_prediction_options(predict, lw, lh, tau) -> tuple[str | None, dict]:
    """Check the prediction options before any work (InputError naming the option)."""
    model = _resolve_predict(predict, lw, lh, tau)
    params = {}
    if model is not None and model.startswith("ufm"):
        from theory.ufm import LAMBDA_MAX, LAMBDA_MIN

        for opt, v in (("--lambda-w", lw), ("--lambda-h", lh)):
            x = as_float(opt, v, positive=True)
            if not LAMBDA_MIN <= x <= LAMBDA_MAX:
                raise InputError(f"{opt} must be in [{LAMBDA_MIN:g}, {LAMBDA_MAX:g}] (docs/ufm.md), got {x:g}")
            params["lambda_w" if opt == "--lambda-w" else "lambda_h"] = x
    if model == "scl":
        from theory.scl import validate_tau

        try:
            params["tau"] = validate_tau(tau)
        except InputError as exc:
            raise InputError(f"--tau: {exc}") from None
    return model, params


def predict_geometry(model: str | None, params: dict, counts: np.ndarray, d: int, min_entry: float) -> dict:
    """The prediction for the data's class counts: {"gram": PredictedGram | None, "reason", "record"}."""
    if model is None:
        return {"gram": None, "reason": "no prediction requested (--predict)", "record": None}
    K = int(counts.size)
    balanced = bool(np.all(counts == counts[0]))
    rec: dict = {"model": model, "parameters": dict(params), "classes": K, "dim": d,
                 "balanced": balanced, "counts_range": [int(counts.min()), int(counts.max())]}
    if K < 2:
        return _no_prediction(rec, "a single class (K = 1): no model prediction of a class-mean geometry")
    if model.startswith("ufm"):
        return _predict_ufm(model, params, counts, d, rec)
    return _predict_scl(params, counts, d, min_entry, rec)


def _no_prediction(rec: dict, reason: str) -> dict:
    rec.update({"geometry": None, "reason": reason})
    return {"gram": None, "reason": f"prediction unavailable: {reason}", "record": rec}


def _predict_ufm(model: str, params: dict, counts: np.ndarray, d: int, rec: dict) -> dict:
    from theory import ufm as TU

    K = int(counts.size)
    loss = model.split("-")[1]
    rec["source"] = ("Zhu et al., NeurIPS 2021, Thm 3.1 (UFM, CE); docs/ufm.md" if loss == "ce" else
                     "Zhou et al., ICML 2022; Han, Papyan & Donoho, ICLR 2022 (UFM, MSE); docs/ufm.md")
    rec["convention"] = ("f = (1/N) sum_i loss(W h_i + b, y_i) + lambda_w/2 ||W||^2 + lambda_h/2 ||H||^2 (docs/ufm.md): "
                         "lambda_h penalises the features themselves")
    if not bool(np.all(counts == counts[0])):
        return _predict_ufm_imbalanced(loss, params, counts, d, rec)
    n = int(counts[0])
    inst = TU.UFMInstance(loss, K, n, d, params["lambda_w"], params["lambda_h"])
    failed = inst.hypotheses()
    rec["instance"] = inst.to_dict()
    if failed:
        return _no_prediction(rec, "; ".join(failed))
    pred = TU.optimum(inst)
    rec.update({"value": pred.value, "trivial": pred.trivial, "geometry": pred.geometry,
                "threshold": ({"s": TU.ce_threshold(inst), "trivial_when_s_at_least": 1.0 / K} if loss == "ce" else
                              {"sqrt_n": math.sqrt(n), "N_lambda": inst.N * inst.lam})})
    if not pred.trivial:
        # closed-form class means: beta U with U^T U = J_K (theory.ufm.optimal_point): norm beta sqrt((K-1)/K)
        W, Mu, _ = TU.optimal_class_point(inst)
        norms = np.linalg.norm(Mu - Mu.mean(axis=1, keepdims=True), axis=0)
        rec["predicted_mean_norm"] = float(norms.mean())
        rec["predicted_classifier_norm"] = float(np.linalg.norm(W, axis=1).mean())
    rec["certificate"] = _ufm_certificate(inst)
    if pred.trivial:
        return {"gram": None, "reason": ("the predicted optimum is W = H = 0 (trivial phase: the class means are zero, "
                                         "their Gram has no direction)"), "record": rec}
    return {"gram": MT.PredictedGram("simplex-etf (UFM closed form)", 1.0, None), "reason": None, "record": rec}


#: Largest K for which measure runs the any-loss engine's certificate for imbalanced counts (its geometry report
#: holds the K x K cosines up to 100 classes; `ncproofs solve ufm --counts` runs larger instances on its own).
UFM_IMBALANCED_MAX_K = 100


def _predict_ufm_imbalanced(loss: str, params: dict, counts: np.ndarray, d: int, rec: dict) -> dict:
    """The imbalanced UFM optimum from the any-loss engine (solvers.ufm_general + its certificate,
    proofs_check.claims.ufm.check_general, as `ncproofs solve ufm --counts`)."""
    K = int(counts.size)
    rec["source"] = ("the any-loss engine: proofs_check.claims.ufm.check_general (docs/ufm_general.md; imbalanced "
                     "UFM: Fang et al., PNAS 2021, minority collapse)")
    cmd = (f"ncproofs solve ufm --loss {loss} --counts {','.join(map(str, counts.tolist()))} --dim {d} "
           f"--lambda-w {params['lambda_w']:g} --lambda-h {params['lambda_h']:g}")
    rec["command"] = cmd if K <= 50 else f"ncproofs solve ufm --loss {loss} --counts N1,...,N{K} --dim {d} ..."
    if K > UFM_IMBALANCED_MAX_K:
        return _no_prediction(rec, f"imbalanced classes with K = {K} > {UFM_IMBALANCED_MAX_K}: measure runs the "
                                   "any-loss engine's certificate up to 100 classes; run `ncproofs solve ufm --counts "
                                   "...` for this instance")
    from proofs_check.claims.ufm import check_general
    from solvers import losses as L
    from solvers import ufm_general as SG

    p = SG.classification(L.make_loss(loss, K), [int(c) for c in counts], d, params["lambda_w"], params["lambda_h"])
    rep = check_general(p, starts=1, seed=0).to_dict()
    cert = rep.get("certificate") or {}
    geo = rep.get("geometry") or {}
    stm = {c["id"]: c["verdict"] for c in rep.get("claims", [])}
    rec.update({"value": cert.get("upper"), "trivial": False,
                "certificate": {"run": True, "verdict_of_the_model_check": rep["verdict"], "reason": rep["reason"],
                                "method": cert.get("method"), "lower_bound": cert.get("lower_bound"),
                                "gap": cert.get("gap"), "statements": stm,
                                "how": "proofs_check.claims.ufm.check_general at the data's counts, d and lambdas"}})
    norms, cos = geo.get("class_mean_norms"), geo.get("class_mean_cosines")
    if stm.get("minimiser-unique") != "VERIFIED":
        return _no_prediction(rec, "the any-loss engine did not certify a unique minimiser for these counts "
                                   f"({rep['verdict']}: {rep['reason']}): a certified value does not certify a point")
    if norms is None or cos is None:
        return _no_prediction(rec, "the engine's geometry report has no class-mean Gram for this K")
    nr = np.asarray(norms, dtype=np.float64)
    P = np.asarray(cos, dtype=np.float64) * np.outer(nr, nr)
    if not np.linalg.norm(P) > 0:
        return {"gram": None, "reason": "the predicted optimum has zero class means (trivial phase): no direction",
                "record": dict(rec, geometry=None, trivial=True)}
    rec.update({"geometry": "imbalanced UFM minimiser (certified unique)", "predicted_mean_norm": float(nr.mean()),
                "predicted_centred_gram": P.tolist(),
                "minority": geo.get("minority")})
    return {"gram": MT.PredictedGram("imbalanced UFM minimiser", matrix=P), "reason": None, "record": rec}


def _network_objective(model, params, record, sc, acc, inp, one: bool) -> dict | None:
    """The network's own UFM objective f(W, H, b) and its gap to the certified optimum (docs/measure.md)."""
    if model is None or not model.startswith("ufm"):
        return None
    loss = model.split("-")[1]
    out = {"loss": loss, "convention": ("f = (1/N) sum_i CE(W h_i + b, y_i) + lambda_w/2 ||W||^2 + lambda_h/2 "
                                        "sum_i ||h_i||^2" if loss == "ce" else
                                        "f = 1/(2N) sum_i ||W h_i + b - e_{y_i}||^2 + lambda_w/2 ||W||^2 + "
                                        "lambda_h/2 sum_i ||h_i||^2")}
    if inp.weights is None:
        return dict(out, value=None, reason="needs the classifier W (--weights or the file key 'weights')")
    sc = getattr(sc, "nc4", sc)  # the projected route carries its NC4 pass
    if not one or sc is None or getattr(sc, "loss", None) is None:
        return dict(out, value=None, reason="computed on the one-pass route only (not with --passes 2, torch or float32)")
    N = acc.N
    f = sc.loss_sum / N + 0.5 * params["lambda_w"] * float(np.sum(inp.weights ** 2)) + 0.5 * params["lambda_h"] * acc.sq_sum
    out["value"] = f
    fstar = None if record is None else record.get("value")
    cert = (record or {}).get("certificate") or {}
    lb = cert.get("lower_bound")
    out["certified_optimum"] = fstar
    out["certified_lower_bound"] = lb
    if fstar is not None:
        out["gap"] = f - fstar
        out["relative_gap"] = (f - fstar) / abs(fstar) if fstar else None
    if lb is not None and f < lb - 1e-9 * max(1.0, abs(lb)):
        out["note"] = ("below the certified lower bound: the network's objective does not match the model's convention "
                       "(is the feature penalty per sample? docs/ufm.md)")
    return out


def _ufm_certificate(inst) -> dict:
    if inst.k > UFM_CERTIFICATE_MAX_K:
        return {"run": False, "reason": f"K = {inst.k} > {UFM_CERTIFICATE_MAX_K}: the O(K^3) class-reduced "
                                        f"certificate is not run here; `ncproofs solve ufm-{inst.loss}` runs it"}
    from proofs_check.claims import ufm as CU

    rep = CU.check_instance(inst, method="closed-form").to_dict()
    cert = rep.get("certificate") or {}
    return {"run": True, "verdict_of_the_model_check": rep["verdict"], "reason": rep["reason"],
            "method": cert.get("method"), "lower_bound": cert.get("lower_bound"), "gap": cert.get("gap"),
            "statements": {c["id"]: c["verdict"] for c in rep["claims"]},
            "how": "proofs_check.claims.ufm.check_instance(method='closed-form') at the data's K, n, d and lambdas "
                   "(docs/ufm.md 'Uniqueness')"}


def _predict_scl(params: dict, counts: np.ndarray, d: int, min_entry: float, rec: dict) -> dict:
    from theory import scl as TS

    K = int(counts.size)
    tau = params["tau"]
    nonneg = bool(min_entry >= 0.0)
    rec["nonnegative_features"] = nonneg
    rec["convention"] = "unit-norm features, logits h.h'/tau, full batch (docs/scl.md)"
    if nonneg:
        rec["source"] = "Kini et al., ICLR 2024, Thm 1 (UFM+, reconstructed); docs/scl.md"
        rec["model"] = "scl (UFM+: nonnegative features, e.g. after a ReLU)"
        singles = int(np.sum(counts < 2))
        if singles >= 2:  # one singleton keeps the OF the unique minimiser (docs/scl.md; `solve scl --counts 2,1`)
            return _no_prediction(rec, f"{singles} classes with a single sample: the UFM+ minimiser then shares "
                                       "directions between singleton classes (docs/scl.md); no class-mean prediction "
                                       "is made")
        if d < K:
            return _no_prediction(rec, f"d >= K (room for an orthogonal frame): d = {d} < K = {K}")
        rec.update({"geometry": "orthogonal-frame", "value": TS.theorem1_bound(tuple(int(c) for c in counts), tau)
                    if int(counts.sum()) <= TS.MAX_SAMPLES else None,
                    "certificate": {"run": False, "reason": "the collapsed orthogonal frame attains the Theorem 1 lower "
                                    "bound (equal closed forms); the uniqueness certificate of `ncproofs solve scl` "
                                    "needs the N x N Gram and is not run by measure"}})
        return {"gram": MT.PredictedGram("orthogonal frame (centred: J_K)", 1.0, None), "reason": None, "record": rec,
                "compare": "gram_distance_of"}
    rec["source"] = "Graf et al., ICML 2021 (balanced SCL, simplex ETF); docs/scl.md"
    rec["model"] = "scl (unit sphere, features with negative entries)"
    if not bool(np.all(counts == counts[0])):
        return _no_prediction(rec, f"imbalanced classes (counts {int(counts.min())}..{int(counts.max())}) with "
                                   "features of both signs: the SCL optimum on the sphere is not available in this "
                                   "repository for imbalanced classes")
    if int(counts[0]) < 2:
        return _no_prediction(rec, "one sample per class: the SCL loss has no positive pairs")
    if d < K - 1:
        return _no_prediction(rec, f"d >= K-1 (room for a simplex ETF): d = {d} < K-1 = {K - 1}")
    rec.update({"geometry": "simplex-etf", "value": TS.graf_balanced_value(K, int(counts[0]), tau),
                "certificate": {"run": False, "reason": "Graf et al.'s value; the geometry certificate of `ncproofs "
                                "solve scl` needs the N x N Gram and is not run by measure"}})
    return {"gram": MT.PredictedGram("simplex-etf (SCL)", 1.0, None), "reason": None, "record": rec}


# ---------------------------------------------------------------------------------------------
# Graded labels
# ---------------------------------------------------------------------------------------------

def grade(distance: float | None) -> str | None:
    if distance is None or not math.isfinite(distance):
        return None
    for limit, word in GRADES:
        if distance <= limit:
            return word
    return "far from"  # pragma: no cover


def geometry_fit(K: int, d: int) -> dict:
    """Whether a simplex ETF (needs d >= K - 1) and an orthogonal frame (d >= K) fit in R^d, and when not, the
    smallest normalised Gram distance any configuration of K means in R^d can have (docs/metrics.md)."""
    out = {}
    for name, need, dim in (("simplex_etf", K - 1, K - 1), ("orthogonal_frame", K, K)):
        fits = d >= need
        out[name] = {"fits": fits, "needs_d": need,
                     "min_distance": 0.0 if fits or dim < 1 else math.sqrt(max(2.0 - 2.0 * math.sqrt(d / dim), 0.0))}
    return out


def _fit_note(name: str, K: int, d: int) -> str:
    g = geometry_fit(K, d)[name]
    if g["fits"]:
        return ""
    what = "simplex-ETF" if name == "simplex_etf" else "orthogonal-frame"
    return (f" ({K} {what} vectors need d >= {g['needs_d']}, d = {d}: the geometry cannot fit; no {K} means in "
            f"R^{d} are closer than {g['min_distance']:.3g})")


def graded_labels(metrics: dict, prediction: dict | None, K: int | None = None, d: int | None = None) -> list[str]:
    out = []
    for key, name, fit in (("gram_distance_etf", "simplex ETF", "simplex_etf"),
                           ("gram_distance_of", "orthogonal frame", "orthogonal_frame")):
        v = metrics.get(key)
        if v is not None:
            note = _fit_note(fit, K, d) if K is not None and d is not None and K >= 2 else ""
            out.append(f"{grade(v)} {name}: Gram distance {v:.3g}{note}")
    if prediction and prediction.get("geometry"):
        key = prediction.get("compare_key", "gram_distance_predicted")
        v = metrics.get(key)
        if v is not None:
            out.append(f"{grade(v)} the predicted {prediction['geometry']} ({prediction['model']}): Gram distance "
                       f"{v:.3g} ({key})")
    return out
