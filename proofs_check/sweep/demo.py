"""The built-in demo sweepable ``geometry.noisy-etf`` (registered on import)."""

from __future__ import annotations

from proofs_check.sweep.registry import register_sweepable, result_from_checks

# ---- built-in sweepable: a noisy simplex ETF, classified by theory.geometry ------------

def _noisy_etf_validate(p: dict) -> None:
    from theory._validate import as_float, as_int

    as_int("k", p["k"], minimum=2)
    if p.get("d") is not None:
        as_int("d", p["d"], minimum=1)
    as_float("noise", p["noise"], nonnegative=True)
    as_float("r", p["r"], positive=True)
    as_float("tol", p["tol"], positive=True)


def noisy_etf(params: dict, seed: int) -> dict:
    """Claim: a simplex ETF (k vectors of norm r in R^d) plus i.i.d. Gaussian noise of std
    ``noise`` per coordinate is still classified as "simplex-etf" by ``theory.geometry.classify_gram``
    at tolerance ``tol``. True at noise 0; fails once the noise moves the normalised Gram by more
    than ``tol``. score = distance of the normalised Gram to the ETF template (null if undefined).
    If d < k-1 no simplex ETF exists: NOT_APPLICABLE (the hypothesis fails).

    Returns a sweepable result (:func:`result_from_checks`). Raises ``InputError`` for parameters
    that ``theory.geometry`` refuses (the sweep stores that as an ERROR row)."""
    import numpy as np

    from proofs_check.core import geometry_is, hypothesis_fails
    from theory.geometry import classify_gram, simplex_etf

    k, noise, r, tol = int(params["k"]), float(params["noise"]), float(params["r"]), float(params["tol"])
    d = k if params.get("d") is None else int(params["d"])
    if d < k - 1:
        chk = hypothesis_fails("etf-exists", f"a simplex ETF of k = {k} vectors needs d >= k-1 = {k - 1}, got d = {d}")
        return result_from_checks([chk])
    rng = np.random.default_rng(seed)
    M = simplex_etf(k, d, r) + noise * rng.standard_normal((d, k))
    g = classify_gram(M.T @ M, tol)
    chk = geometry_is("geometry", "simplex-etf", g, evidence={"k": k, "d": d, "noise": noise})
    return result_from_checks([chk], score=g.distance_etf)


register_sweepable("geometry.noisy-etf", noisy_etf, parameters=("k", "d", "noise", "r", "tol"),
                   defaults={"d": None, "noise": 0.0, "r": 1.0, "tol": 1e-3},
                   validate=_noisy_etf_validate, version="1",
                   description="noisy simplex ETF classified by theory.geometry.classify_gram")

