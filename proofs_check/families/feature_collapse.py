"""CLI: ``ncproofs solve feature-collapse`` and ``ncproofs table feature-collapse``."""

from __future__ import annotations

import argparse

from proofs_check.commands import SolveCommand, TableCommand, UsageError, float_list, int_list
from proofs_check.tables import Table, rigorous_table

FAMILY = "feature_collapse"


def _add_instance_args(p: argparse.ArgumentParser, *, need_dim: bool = True) -> None:
    p.add_argument("--concepts", type=int, required=True, metavar="NC", help="number of concepts n_c (>= 2)")
    p.add_argument("--length", type=int, required=True, metavar="L", help="sentence length L")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--words-per-concept", type=int, metavar="SC", help="words per concept s_c")
    g.add_argument("--words", type=int, metavar="NW", help="total words n_w (a multiple of n_c)")
    p.add_argument("--classes", type=int, metavar="K", default=None,
                   help="number of classes K (optional with --latents full, where K = n_c^L)")
    if need_dim:
        p.add_argument("--dim", type=int, required=True, metavar="D", help="embedding dimension d")
    p.add_argument("--layernorm", action="store_true", help="LayerNorm (no affine part, eps = 0); decay on U only")
    f = p.add_mutually_exclusive_group()
    f.add_argument("--freqs", type=float_list, metavar="MU", help="within-concept frequencies, e.g. 0.8,0.2 (sum 1)")
    f.add_argument("--zipf", action="store_true", help="Zipf within-concept frequencies mu_beta ~ 1/beta")
    p.add_argument("--latents", choices=("full", "random"), default="full",
                   help="full: all n_c^L latent variables (symmetric case); random: draw K of them")
    p.add_argument("--seed", type=int, default=0, help="seed for random latents and solver starts")


def _instance(args, *, lam: float, d: int):
    from theory import feature_collapse as T

    kw = dict(K=args.classes, layernorm=args.layernorm, latents=args.latents, seed=args.seed)
    if args.words is not None:
        n_c = args.concepts
        if args.words < 1:  # --words 0 was refused as "s_c (--words-per-concept) must be >= 1", an option not given
            raise UsageError(f"--words (n_w) must be >= 1, got {args.words}")
        if n_c is not None and n_c >= 1 and args.words % n_c:
            raise UsageError(f"--words = {args.words} must be divisible by --concepts = {n_c} "
                             f"(each concept has s_c = n_w/n_c words)")
        s_c = args.words // n_c if n_c else 0
    else:
        s_c = args.words_per_concept
    if args.zipf:
        kw["freqs"] = T.zipf_freqs(s_c) if isinstance(s_c, int) and s_c >= 1 else None
    elif args.freqs is not None:
        kw["freqs"] = tuple(args.freqs)
    return T.FCInstance(args.concepts, args.length, s_c, d, lam, **kw)


def _solve_args(p):
    _add_instance_args(p)
    p.add_argument("--lambda", dest="lam", type=float, required=True, metavar="LAM", help="weight decay lambda > 0")
    p.add_argument("--starts", type=int, default=4, help="number of random L-BFGS starts (default 4)")
    p.add_argument("--cvxpy", choices=("auto", "yes", "no"), default="auto",
                   help="also solve the convex program with cvxpy: nuclear-norm form (no LN) or SDP relaxation (LN); "
                        "auto: small instances")
    p.add_argument("--trainable-ln", action="store_true",
                   help="LayerNorm with a learned gain and bias per coordinate (needs --layernorm); decayed by --ln-decay")
    p.add_argument("--ln-decay", type=float, default=None, metavar="LAMBDA_LN",
                   help="weight decay of the LayerNorm gain and bias (with --trainable-ln; default 0: not decayed)")


def run_solve(args) -> dict:
    """Parse the arguments, build the instance and return ``check_instance(...).to_dict()`` (or, with
    --trainable-ln, ``proofs_check.claims.feature_collapse_beyond.check_trainable(...).to_dict()``)."""
    from proofs_check.claims.feature_collapse import check_instance

    if args.ln_decay is not None and not args.trainable_ln:
        raise UsageError("--ln-decay applies only with --trainable-ln")
    if args.trainable_ln and not args.layernorm:
        raise UsageError("--trainable-ln needs --layernorm (the gain and bias belong to the LayerNorm)")
    if args.trainable_ln and getattr(args, "rigorous", False):
        raise UsageError("--rigorous has no ball-arithmetic recipe for --trainable-ln (the fixed-LN recipe would judge a "
                         "different problem); drop --rigorous")
    inst = _instance(args, lam=args.lam, d=args.dim)
    if not 1 <= args.starts <= 64:
        raise UsageError(f"--starts must be in [1, 64], got {args.starts}")
    if args.trainable_ln:
        from proofs_check.claims.feature_collapse_beyond import check_trainable

        return check_trainable(inst, 0.0 if args.ln_decay is None else args.ln_decay, n_starts=args.starts,
                               seed=args.seed).to_dict()
    return check_instance(inst, n_starts=args.starts, seed=args.seed, cvxpy=args.cvxpy).to_dict()


def _table_args(p):
    _add_instance_args(p, need_dim=False)
    p.add_argument("--lambdas", type=float_list, required=True, metavar="LIST", help="comma-separated lambda values")
    p.add_argument("--dims", type=int_list, default=None, metavar="LIST",
                   help="comma-separated d values (LayerNorm; default n_c). Without LN the prediction does not "
                        "depend on d >= n_c - 1")


#: rows of `table feature-collapse` at most (--lambdas x --dims)
TABLE_MAX_ROWS = 200


def build_table(args) -> Table:
    from theory import feature_collapse as T

    if args.dims is not None and not args.layernorm:
        raise UsageError("--dims applies only with --layernorm (without LayerNorm the prediction does not depend "
                         "on d >= n_c - 1)")
    dims = args.dims if args.dims is not None else [max(args.concepts or 2, 2)]
    if not dims or not args.lambdas:
        raise UsageError("--lambdas and --dims must not be empty")
    if len(dims) * len(args.lambdas) > TABLE_MAX_ROWS:  # before any row (5000 --lambdas ran for minutes)
        raise UsageError(f"--lambdas x --dims: the table has {len(dims) * len(args.lambdas)} rows, more than the "
                         f"limit {TABLE_MAX_ROWS}")
    bad = [x for x in args.lambdas if not T.LAMBDA_MIN <= x <= T.LAMBDA_MAX]
    if bad:  # the instance's own message named --lambda, an option `table feature-collapse` does not have
        raise UsageError(f"--lambdas must lie in [{T.LAMBDA_MIN:g}, {T.LAMBDA_MAX:g}], got {bad[0]:g}")
    try:  # --dims 0: the instance's message named --dim (solve's option); checked before any row
        for d in dims:
            _instance(args, lam=args.lambdas[0], d=d)
    except T.InstanceError as exc:
        raise UsageError(str(exc).replace("(--dim)", "(--dims)")) from None
    rows, reports, labels = [], [], []
    rig = bool(getattr(args, "rigorous", False))
    meta = None
    for d in dims:
        for lam in args.lambdas:
            inst = _instance(args, lam=lam, d=d)
            p = T.predict(inst)
            if rig:
                reports.append(_row_report(inst, p))
                labels.append(f"lambda={lam:g}" + (f", d={d}" if inst.layernorm else ""))
            meta = meta or inst.to_dict()
            thr = p.lambda_crit
            rows.append([lam, d if inst.layernorm else None, p.theorem, p.geometry, thr, p.t, p.a, p.b,
                         " ".join(f"{x:.8g}" for x in p.r) if p.r else None, p.kappa, p.objective, p.cross_entropy,
                         "conjecture" if p.conjecture else "theorem", "; ".join(T.hypotheses(inst)) or "hold"])
    meta = dict(meta or {})
    meta.pop("lambda", None)
    meta.pop("d", None)
    cols = ["lambda", "d", "theorem", "geometry", "lambda_crit", "t*", "a*", "b*", "r_beta", "kappa", "objective",
            "CE*", "global optimality", "hypotheses"]
    latex = [r"$\lambda$", "$d$", "theorem", "geometry", r"$\lambda_{\mathrm{crit}}$", "$t^*$", "$a^*$", "$b^*$",
             r"$r_\beta$", r"$\kappa$", "objective", r"$\mathrm{CE}^*$", "global optimality", "hypotheses"]
    cap = (f"Feature collapse (Laurent, von Brecht, Bresson, ICLR 2024; statements reconstructed). "
           f"n_c={meta.get('n_c')}, L={meta.get('L')}, s_c={meta.get('s_c')}, n_w={meta.get('n_w')}, K={meta.get('K')}, "
           f"{'LayerNorm' if meta.get('layernorm') else 'no LayerNorm'}, latents={meta.get('latents')}. "
           "lambda_crit: Theorem 1 threshold (uniform) or exact threshold sqrt(L sum mu^2/(K n_c)) (type III); "
           "missing where it does not exist (LayerNorm: no trivial phase). d is shown only with LayerNorm.")
    table = Table(cols, rows, caption=cap, latex_columns=latex, meta=meta)
    if rig:
        from proofs_check.tables import add_rigorous

        table = add_rigorous(table, reports, labels=labels,
                             statement="the row's value statement: objective is the optimal value (of the claimed "
                                       "type I/II/III configuration; a conjecture where 'global optimality' says so).")
    return table


def _row_report(inst, pred) -> dict:
    """The `solve feature-collapse` report of one table row (``SolveReport.to_dict()`` form) for
    ``proofs_check.rigorous.apply``: the instance and its value statement ``optimal-value`` = the predicted
    objective with the family's tolerance. The table solves nothing in floats (INCONCLUSIVE until the
    ball-arithmetic bracket decides it)."""
    from proofs_check.claims.feature_collapse import value_tol

    name = "optimal-value" + (" (conjecture, checked on this instance)" if pred.conjecture else "")
    from proofs_check.statements import ValueEquals

    ev = {"predicted": pred.objective, "tolerance": value_tol(pred.objective), "instance": inst.to_dict(),
          "statement": ValueEquals(pred.objective, value_tol(pred.objective)).to_dict()}
    return {"family": FAMILY, "instance": inst.to_dict(), "predicted": {"value": pred.objective}, "certificate": {},
            "claims": [{"id": name, "verdict": "INCONCLUSIVE", "independent": True,
                        "reason": "predicted value only: `table feature-collapse` solves nothing in floats",
                        "evidence": ev}],
            "diagnostics": []}


def _hier_args(p):
    p.add_argument("--levels", type=int, default=2, help="depth of the tree (only 2: words -> concepts -> meta-concepts)")
    p.add_argument("--meta-concepts", type=int, default=3, metavar="NM", help="meta-concepts n_m (default 3)")
    p.add_argument("--concepts-per-meta", type=int, default=3, metavar="NC", help="concepts of each meta-concept (default 3)")
    p.add_argument("--words-per-concept", type=int, default=2, metavar="SC", help="words of each concept (default 2)")
    p.add_argument("--length", type=int, default=4, metavar="L", help="sentence length L = chunk * L2 (default 4)")
    p.add_argument("--chunk", type=int, default=2, metavar="L1", help="concepts produced by one meta-concept (default 2)")
    p.add_argument("--dims", type=int_list, default=[4, 4], metavar="D1,D2", help="layer widths d1,d2 (default 4,4)")
    p.add_argument("--lambda", dest="lam", type=float, default=0.05, metavar="LAM",
                   help="weight decay of the classifier (default 0.05)")
    p.add_argument("--starts", type=int, default=3, help="random L-BFGS starts (default 3; 0: certificate only)")
    p.add_argument("--iterations", type=int, default=400, help="L-BFGS iterations per start (work budget; default 400)")
    p.add_argument("--seed", type=int, default=0, help="seed of the starts")


def run_hier(args) -> dict:
    """``solve feature-collapse-hier``: ``proofs_check.claims.feature_collapse_hier.check_hier(...).to_dict()``."""
    from proofs_check.claims.feature_collapse_hier import check_hier
    from theory.feature_collapse_hier import HierInstance

    if getattr(args, "rigorous", False):
        raise UsageError("--rigorous has no ball-arithmetic recipe for feature-collapse-hier; drop --rigorous")
    if args.levels != 2:
        raise UsageError(f"--levels must be 2 (words -> concepts -> meta-concepts), got {args.levels}")
    if args.chunk < 1 or args.length < 1 or args.length % args.chunk:
        raise UsageError(f"--length = {args.length} must be a positive multiple of --chunk = {args.chunk}")
    if len(args.dims) != 2:
        raise UsageError(f"--dims must give two widths d1,d2, got {args.dims}")
    if not 0 <= args.starts <= 64:
        raise UsageError(f"--starts must be in [0, 64], got {args.starts}")
    if not 1 <= args.iterations <= 100_000:
        raise UsageError(f"--iterations must be in [1, 100000], got {args.iterations}")
    h = HierInstance(n_m=args.meta_concepts, n_c=args.concepts_per_meta, s_c=args.words_per_concept, L1=args.chunk,
                     L2=args.length // args.chunk, d1=args.dims[0], d2=args.dims[1], lam=args.lam)
    return check_hier(h, n_starts=args.starts, seed=args.seed, maxiter=args.iterations).to_dict()


COMMANDS = [
    SolveCommand("feature-collapse-hier", "two-level feature collapse (words -> concepts -> meta-concepts, LayerNorm "
                 "at each level): best point, level-2 relaxation bound, per-layer collapse", _hier_args, run_hier),
    SolveCommand("feature-collapse", "feature collapse (Laurent et al. 2024): exact risk, certified optimum vs "
                 "type I/II/III prediction", _solve_args, run_solve),
    TableCommand("feature-collapse", "feature collapse: predicted constants over a grid of lambda (and d with LN)",
                 _table_args, rigorous_table(FAMILY)(build_table)),
]
