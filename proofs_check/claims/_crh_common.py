"""Shared parts of the CRH/PAH claims (``proofs_check.claims.crh`` re-exports everything here): the family's
names, the tolerances shared by several claim modules, the symbolic-check helper, random instances, and the
cached SGD experiment with the hypothesis checks every measured claim starts with.

Source and provenance of the claims: see :mod:`proofs_check.claims.crh` and docs/crh.md.
"""

from __future__ import annotations

import functools
import random as _random
import re

import numpy as np
import sympy as sp

from proofs_check.core import (Check, Claim, Verdict, fmt, hypothesis_fails, is_finite, symbolic_true, symbolic_zero,
                               within)
from solvers import crh as S
from theory import crh as T
from theory._validate import InputError

FAMILY = "crh"
PAPER = "Ziyin, Chuang, Galanti, Poggio, ICLR 2025"
DERIVED_SRC = "docs/crh.md, exact identities (derived in this project)"


#: The theorem assumes stationary weights: above this stationarity residual
#: ||E[g_b h_a^T] - gamma W|| / ||gamma W|| the hypothesis is taken to fail.
STATIONARY_TOL = 0.25


def _claim(claim_id, statement, source, provenance, check, key=(), tags=()):
    return Claim(id=claim_id, family=FAMILY, statement=statement, source=source, provenance=provenance,
                 check=check, key=tuple(key), tags=tuple(tags))


def kebab(text: str) -> str:
    """A kebab-case check name from free text ("H_b = W H_a W^T" -> "h-b-w-h-a-w-t")."""
    return re.sub(r"[^a-z0-9.\[\]]+", "-", str(text).lower()).strip("-")[:80] or "check"


def _worst(values) -> float:
    """Largest of a list of errors; NaN if any is NaN or missing (fails closed: Python's max()
    would silently skip a NaN that comes second)."""
    arr = np.array([np.nan if v is None else float(v) for v in values], dtype=float)
    return float(np.max(arr)) if arr.size and not np.isnan(arr).any() else float("nan")


# --------------------------------------------------------------------------------------------
# Symbolic helpers
# --------------------------------------------------------------------------------------------

def _concretise(expr):
    """Replace undefined functions (l, phi) by concrete smooth ones so the expression can be
    evaluated numerically (for witnesses of a false statement)."""
    from sympy.core.function import AppliedUndef

    expr = sp.sympify(expr)
    for f in {a.func for a in expr.atoms(AppliedUndef)}:
        expr = expr.replace(f, lambda *args: sum(sp.sin(i + 1 + a) + a ** 2 / (i + 2) for i, a in enumerate(args)))
    return expr.doit()


def _substitutions(expr, seed: int, n: int = 2) -> list[dict]:
    rng = _random.Random(seed)
    out = []
    for _ in range(n):
        sub = {}
        for s in sorted(expr.free_symbols, key=lambda s: s.name):  # set order varies with PYTHONHASHSEED
            lo = 0.3 if (s.is_positive or s.is_nonnegative) else -1.5
            sub[s] = sp.Float(rng.uniform(lo, 1.7), 20)
        out.append(sub)
    return out


def _first_nonzero(entries, seed: int):
    """The first entry that ``sympy.simplify`` does not reduce to 0 (None when all do), found cheaply: an
    entry that expands to 0 is 0 (a proof); one that is nonzero at a witness point of :func:`_substitutions`
    (30 digits) is not, so simplify could not give 0 either; only the others are simplified."""
    for e in entries:
        e = sp.sympify(e)
        if e == 0 or sp.expand(e) == 0:
            continue
        ce = _concretise(e)
        try:
            if any(abs(complex(sp.N(ce.subs(sub), 30))) > 1e-9 for sub in _substitutions(ce, seed)):
                return e
        except (TypeError, ValueError, ZeroDivisionError):  # no number at a point: simplify decides
            pass
        if sp.simplify(e) != 0:
            return e
    return None


def symbolic_checks(items: dict, seed: int = 0, *, prefix: str = "symbolic") -> list[Check]:
    """Checks for {formula: matrix/expression} (must be 0) or {formula: ("zero"|"true", obj)}.
    Check names are ``<prefix>-<i>`` (kebab-case); the formula is in the reason and evidence.
    A sympy simplification to 0 is a proof (independent); a false identity is REFUTED with a
    numeric witness."""
    out = []
    for i, (formula, obj) in enumerate(items.items(), start=1):
        name = f"{prefix}-{i}"
        kind, obj = obj if isinstance(obj, tuple) else ("zero", obj)
        if kind == "true":
            c = symbolic_true(name, obj)
            out.append(Check(name, c.verdict, f"{formula}: {c.reason}", {**c.evidence, "identity": formula}))
            continue
        entries = list(obj) if hasattr(obj, "shape") else [obj]
        bad = _first_nonzero(entries, seed)
        if bad is None:
            out.append(Check(name, Verdict.VERIFIED, f"{formula}: all {len(entries)} entries simplify to 0",
                             {"entries": len(entries), "identity": formula}))
            continue
        e = _concretise(bad)
        c = symbolic_zero(name, e, substitutions=_substitutions(e, seed))
        out.append(Check(name, c.verdict, f"{formula}: {c.reason}", {**c.evidence, "identity": formula}))
    return out


def _rng(ctx, salt: int) -> np.random.Generator:
    return np.random.default_rng([ctx.seed, salt])


def _rel_err(A, B) -> float:
    A, B = np.asarray(A, dtype=float), np.asarray(B, dtype=float)
    if not (np.all(np.isfinite(A)) and np.all(np.isfinite(B))):
        return float("nan")
    return float(np.max(np.abs(A - B)) / max(1.0, float(np.max(np.abs(B)))))


def _random_W(rng, shape, rank=None):
    m, n = shape
    r = min(m, n) if rank is None else rank
    return rng.standard_normal((m, r)) @ rng.standard_normal((r, n)) / np.sqrt(r)


def _shapes(ctx):
    """(d_b, d_a, rank) instances: square, wide, tall, rank-deficient."""
    base = [(3, 3, 3), (2, 5, 2), (6, 3, 3), (5, 5, 2), (4, 7, 1)]
    return base + ([(12, 9, 9), (10, 10, 4), (8, 12, 5)] if ctx.full else [])


# --------------------------------------------------------------------------------------------
# The MLP experiment: measured hypotheses (reconstructed)
# --------------------------------------------------------------------------------------------

#: `ncproofs run` quick profile: gamma in {0, 1e-2}, 5e3 steps of batch 32 at lr 0.2: the same
#: gamma * eta * steps = 10 (weight-decay time) and the same SGD noise scale eta / batch = 1/160 as 2e4
#: steps of batch 8 at lr 0.05, in a quarter of the steps (~0.6 s CPU instead of ~1.5 s). Measured margins (the
#: 1e4-step batch-16 instance used before in parentheses): mean gain 0.563 (0.566; >= 0.10), lowest alignment
#: 0.903 (0.901; >= 0.8), smallest Haar-null excess 0.687 (0.687; > 0), ranks 4 (dropped singular values
#: <= 0.0163 (0.0169) < 0.02), stationarity residual 0.151 (0.156; <= 0.25).
EXP_QUICK = T.CRHExperiment(weight_decays=(0.0, 1e-2), steps=5000, lr=0.2, batch_size=32, n_records=50)
#: Full profile: the reference experiment (2e5 steps, average over the second half).
EXP_FULL = T.CRHExperiment(weight_decays=(0.0, 1e-3, 1e-2), steps=200_000, n_records=200)


@functools.lru_cache(maxsize=8)
def experiment(cfg: T.CRHExperiment, time_budget_s: float | None = None) -> S.ExperimentResult:
    """The (cached) SGD experiment; refuses instances over the budget, stops at the wall-clock budget."""
    return S.run_experiment(cfg, time_budget_s=time_budget_s)


@functools.lru_cache(maxsize=32)
def experiment_report(cfg: T.CRHExperiment, run: int, layer: int, mode: str = "normalized",
                      null_draws: int = S.NULL_DRAWS, time_budget_s: float | None = None) -> S.AlignmentReport | None:
    """Alignment report of one run and layer (None when the run recorded no checkpoint)."""
    res = experiment(cfg, time_budget_s)
    M = res.layer(run, layer, mode)
    if M is None:
        return None
    return S.report_from_matrices(M, null_draws=null_draws, seed=cfg.seed + 97 * run + layer, keep_matrices=False)


def _cfg(ctx, cfg):
    if cfg is not None:
        return cfg
    return EXP_FULL if ctx.full else EXP_QUICK


def _run_index(cfg, gamma) -> int:
    for i, g in enumerate(cfg.weight_decays):
        if abs(g - gamma) <= 1e-12 * max(1.0, abs(gamma)):
            return i
    raise InputError(f"weight decay {gamma} is not among the experiment's weight_decays {cfg.weight_decays}")


def _layer_index(cfg, layer: int) -> int:
    return layer % cfg.n_layers


def _alignments(rep, metric="pearson"):
    return {r: rep.alignments[r][metric] for r in T.RELATION_NAMES}


def _training_problem(res: S.ExperimentResult, runs, name: str):
    """A check when the experiment cannot support a statement: the wall-clock budget stopped it
    (INCONCLUSIVE) or a run diverged (the theorem's stationarity hypothesis fails: NOT_APPLICABLE)."""
    if res.budget_reached:
        return Check(name, Verdict.INCONCLUSIVE, res.budget_message,
                     {"steps_done": res.steps_done, "steps": res.config.steps, "time_budget_s": res.time_budget_s})
    bad = [res.gamma(r) for r in runs if res.diverged[r]]
    if bad:
        return hypothesis_fails(name, f"stationary weights (the run with weight decay {fmt(bad[0])} diverged: "
                                "non-finite weights)", {"diverged_weight_decays": bad})
    return None


def _stationarity_hypothesis(res: S.ExperimentResult, runs, name: str, layers):
    """The CRH theorem assumes stationary weights: for every run with gamma > 0 the SGD stationarity
    residual of each layer the statement is about (0-based ``layers``) must be <= STATIONARY_TOL,
    else the statement is NOT_APPLICABLE there (a measurement outside the theorem's hypotheses is
    no witness against it)."""
    for r in runs:
        g = res.gamma(r)
        if g == 0:
            continue
        resid = _worst(res.stationarity_residual(r, l) for l in layers)
        if not within(resid, STATIONARY_TOL):
            where = ", ".join(str(l + 1) for l in layers)
            return hypothesis_fails(name, f"stationary weights (SGD stationarity residual {fmt(resid, 3)} > "
                                    f"{STATIONARY_TOL} in layer {where} at weight decay {fmt(g)}; train longer)",
                                    {"stationarity_residual": resid if is_finite(resid) else None,
                                     "threshold": STATIONARY_TOL, "gamma": g, "layers": [l + 1 for l in layers],
                                     "steps": res.config.steps})
    return None
