"""Claims: the small statements of the review thread of Kini et al. (ICLR 2024) about SCL, and the activations
sentence (docs/scl.md, "Thread statements" and "Other activations").

Each claim is built by a factory taking the statement's prediction, so tests can feed false variants; each has a
sympy part and an independent numeric part. Statements the thread gets wrong are REFUTED with a witness and
their corrections are separate claims (``-corrected``).
"""

from __future__ import annotations

import math

import numpy as np

from proofs_check.core import (Check, Claim, Provenance, RunContext, Verdict, close, condition, exceeds, fmt,
                               hypothesis_fails, is_finite, optimum_matches, symbolic_true, symbolic_zero, tolerance,
                               within)
from solvers import scl as S
from solvers import scl_engine as E
from theory import scl as T

FAMILY = "scl"
THREAD = "review thread of Kini et al., ICLR 2024 (arXiv 2306.07960); docs/scl.md"

#: Identities evaluated in float64 at random points: a few ulps of quantities of size <= 10 (measured <= 4e-15).
IDENTITY_ATOL = 1e-12
#: A "signed" activation realises a direction when the realised vector matches the target to this (bisection to
#: full precision: measured <= 4e-18).
REALISE_ATOL = 1e-12


def _sc():
    from proofs_check.claims import scl as C

    return C


# --------------------------------------------------------------------------------------
# scl.thread.distances
# --------------------------------------------------------------------------------------

def make_distances_claim(etf_distance=lambda k, tau: 2 * k / (tau * (k - 1)), of_distance=lambda k, tau: 2 / tau,
                         rescale=lambda k: (k - 1) / k, claim_id: str = "scl.thread.distances") -> Claim:
    """Statement: with features of squared norm 1/tau, class means of a simplex ETF are at squared distance
    2k/(tau(k-1)), of an OF at 2/tau, and the OF at temperature tau (k-1)/k has the ETF's distance at tau.
    Source: review thread of Kini et al. Checked: sympy (the three identities) and the distances measured on
    constructed ETF / OF features (theory.geometry) for k = 2..6 and several tau. Fails: any wrong formula."""

    def check(ctx: RunContext):
        a, b, c = T.sym_thread_distances()
        yield symbolic_zero("ETF squared distance 2k/(tau(k-1))", a)
        yield symbolic_zero("OF squared distance 2/tau", b)
        yield symbolic_zero("OF at tau (k-1)/k matches the ETF at tau", c)
        for k in range(2, 7):
            for tau in (0.1, 0.5, 2.0):
                E = T.etf_features((1,) * k, k) / math.sqrt(tau)
                O = T.of_features((1,) * k, k) / math.sqrt(tau)
                de = float(np.sum((E[:, 0] - E[:, 1]) ** 2))
                do = float(np.sum((O[:, 0] - O[:, 1]) ** 2))
                t2 = tau * float(rescale(k))
                do2 = float(np.sum((O[:, 0] - O[:, 1]) ** 2)) * tau / t2
                lab = f"k={k}, tau={tau}"
                yield close(f"ETF distance [{lab}]", float(etf_distance(k, tau)), de, rtol=1e-12, what="squared distance")
                yield close(f"OF distance [{lab}]", float(of_distance(k, tau)), do, rtol=1e-12, what="squared distance")
                yield close(f"OF at the rescaled temperature = ETF [{lab}]", de, do2, rtol=1e-12,
                            what="squared distance")

    return Claim(claim_id, FAMILY,
                 "With features of squared norm 1/tau: ETF class means are at squared distance 2k/(tau(k-1)), OF class "
                 "means at 2/tau; scaling tau by (k-1)/k gives the OF the ETF's distance.",
                 THREAD, Provenance.QUOTED, check, tags=("thread", "geometry"))


# --------------------------------------------------------------------------------------
# scl.thread.eq1-eq2
# --------------------------------------------------------------------------------------

def _eq1(H, y, tau):
    """Eq (1) (SupCon form): sum_i 1/(n_i - 1) sum_{j in P(i)} -log(exp(G_ij/tau) / sum_{l != i} exp(G_il/tau))."""
    G = H.T @ H / tau
    N = y.size
    tot = 0.0
    for i in range(N):
        others = [l for l in range(N) if l != i]
        pos = [j for j in others if y[j] == y[i]]
        if not pos:
            continue
        den = np.logaddexp.reduce(G[i, others])
        tot += sum(-(G[i, j] - den) for j in pos) / len(pos)
    return float(tot)


def _eq2(H, y, tau):
    """Eq (2): sum_i 1/(n_i - 1) sum_{j in P(i)} log sum_{l != i} exp((G_il - G_ij)/tau) (the l = j term is 1)."""
    G = H.T @ H / tau
    N = y.size
    tot = 0.0
    for i in range(N):
        others = [l for l in range(N) if l != i]
        pos = [j for j in others if y[j] == y[i]]
        if not pos:
            continue
        tot += sum(np.logaddexp.reduce(G[i, others] - G[i, j]) for j in pos) / len(pos)
    return float(tot)


def make_eq1_eq2_claim(eq2=_eq2, claim_id: str = "scl.thread.eq1-eq2") -> Claim:
    """Statement: Eq (1) and Eq (2) of Kini et al. define the same loss (in Eq (2) the sum over l includes j, whose
    term is exp(0) = 1). Source: review thread. Checked: sympy (exp of both forms agree for an anchor with m = 2..5
    others) and both forms (and the package's loss, solvers.scl.scl_loss) at random unit and nonnegative features.
    Fails: a form that drops the l = j term (log sum_{l != i, j}) differs numerically."""

    def check(ctx: RunContext):
        for m in (2, 3, 5):
            yield symbolic_zero(f"exp(Eq 1) = exp(Eq 2) for one anchor, m = {m}", T.sym_eq1_eq2(m))
        rng = np.random.default_rng(ctx.seed)
        for counts, tau, d in [((3, 2, 2), 0.7, 4), ((2, 2), 0.2, 3), ((4, 1, 3), 1.5, 5)]:
            y = T.labels_from_counts(counts)
            for nonneg in (False, True):
                H = rng.standard_normal((d, y.size))
                if nonneg:
                    H = np.abs(H)
                H /= np.linalg.norm(H, axis=0)
                a, b = _eq1(H, y, tau), float(eq2(H, y, tau))
                ref = S.scl_loss(H, y, None, tau, grad=False)
                lab = f"n={counts}, tau={tau}, {'nonnegative' if nonneg else 'signed'} features"
                yield close(f"Eq (1) = Eq (2) [{lab}]", a, b, rtol=0, atol=IDENTITY_ATOL, what="loss")
                yield close(f"Eq (2) = the package's loss [{lab}]", ref, b, rtol=0, atol=IDENTITY_ATOL, what="loss")

    return Claim(claim_id, FAMILY,
                 "Eq (1) and Eq (2) define the same loss: in Eq (2) the sum over l includes j, where the exponential is "
                 "exp(h_i.h_l - h_i.h_j) = exp(0) = 1.", THREAD, Provenance.QUOTED, check, tags=("thread", "symbolic"))


# --------------------------------------------------------------------------------------
# scl.thread.rank
# --------------------------------------------------------------------------------------

RANK_INSTANCES = [((5, 3, 2), 0.5, True), ((3, 3, 3), 0.5, True), ((4, 4, 4), 0.5, False), ((2, 2), 1.0, False)]


def make_rank_claim(rank_fn=lambda counts, nonneg: len(counts), instances=None, claim_id: str = "scl.thread.rank",
                    statement: str | None = None, provenance=Provenance.QUOTED, tags=("thread", "geometry",
                                                                                     "expect-refuted")) -> Claim:
    """Statement (as written in the thread): "the rank of the N x n feature matrix H is k" at the minimiser,
    "irrespective of the inclusion or not of ReLU" (``rank_fn`` -> k). Corrected (``rank_fn`` -> k with ReLU, k - 1
    without, balanced): the OF has rank k, the simplex ETF rank k - 1. Checked: sympy ranks of the OF and ETF
    class Grams; per instance the exact closed-form dual point (OF: solvers.scl.of_closed_form_certificate; ETF:
    etf_closed_form_certificate) proves that the collapsed configuration is the unique minimiser (radius 0), its
    value against the loss at it, and the numeric rank of its Gram. Fails: the rank claimed k without ReLU
    (every minimiser has rank k - 1: REFUTED)."""

    def check(ctx: RunContext):
        for k in (2, 3, 5):
            ro, re = T.sym_rank(k)
            yield symbolic_true(f"rank OF = k, rank ETF = k - 1 (k = {k})", (ro == k) & (re == k - 1))
        for counts, tau, nonneg in (instances or RANK_INSTANCES):
            k = len(counts)
            lab = f"n={counts}, tau={tau}, {'ReLU (UFM+)' if nonneg else 'no ReLU (UFM)'}"
            y = T.labels_from_counts(counts)
            if nonneg:
                cert = S.of_closed_form_certificate(counts, tau)
                G0 = T.of_gram(counts)
            else:
                if len(set(counts)) != 1 or counts[0] < 2:
                    yield hypothesis_fails(f"rank [{lab}]", "without ReLU the closed form is for balanced classes")
                    continue
                cert = S.etf_closed_form_certificate(counts, tau)
                E = T.etf_features(counts, k)
                G0 = E.T @ E
            val = S.scl_loss(G0, y, None, tau, gram=True, grad=False)
            tol = tolerance(val, rtol=1e-9, atol=_sc().loss_roundoff(T.SCLInstance(counts, tau, k + 1, nonneg)))
            yield optimum_matches(f"the collapsed configuration is optimal [{lab}]", val, attained=val,
                                  lower_bound=cert.lower_bound, tol=tol, certificate=cert.method)
            b = cert.bounds(0.0) if cert.face is not None else None
            rank = int(np.linalg.matrix_rank(G0, tol=1e-8))
            claimed = int(rank_fn(counts, nonneg))
            ev = {"rank_of_the_unique_minimiser": rank, "claimed": claimed, "k": k,
                  "gram_radius": None if b is None else b["gram_radius"]}
            if b is None or not within(b["gram_radius"], 0.0):
                yield Check(f"rank of every minimiser [{lab}]", Verdict.INCONCLUSIVE, "no exact uniqueness certificate",
                            ev)
            elif rank == claimed:
                yield Check(f"rank of every minimiser [{lab}]", Verdict.VERIFIED, f"every minimiser has the Gram of the "
                            f"collapsed configuration (exact dual point, radius 0): rank {rank} = claimed {claimed}", ev)
            else:
                yield Check(f"rank of every minimiser [{lab}]", Verdict.REFUTED, f"every minimiser has the Gram of the "
                            f"collapsed configuration (exact dual point, radius 0), of rank {rank} != claimed {claimed}",
                            ev)

    return Claim(claim_id, FAMILY, statement or
                 "Because of neural collapse the rank of the N x n feature matrix H is k, irrespective of the inclusion "
                 "or not of ReLU.", THREAD, provenance, check, tags=tuple(tags))


# --------------------------------------------------------------------------------------
# scl.thread.graf-special-case
# --------------------------------------------------------------------------------------

GRAF_BATCHINGS = [((2, 2), 3), ((2, 2, 2), 4), ((2, 2), 2)]
GRAF_BATCHINGS_FULL = [((3, 3), 3), ((2, 2, 2), 3), ((3, 2, 2), 4)]


def make_graf_special_case_claim(batching=T.all_combinations_batching, cases=None, min_batch: int = 3,
                                 claim_id: str = "scl.thread.graf-special-case") -> Claim:
    """Statement: Graf et al.'s batching (every subset of b samples) is a special case of Kini et al.'s batching
    conditions C1, C2 (so the OF is the unique UFM+ minimiser) exactly for b >= ``min_batch`` = 3, and the bound is
    sharp: at b = 2 every batch lacks either a positive pair or a negative, each anchor term is
    LSE over one logit minus that logit = 0, so the loss is identically 0 (= the Theorem 2 bound): C2 fails and
    every feasible H is a minimiser. Conditions: UFM+, d = k + 1, every n_c >= 2, tau = 0.5.
    Checked: C1/C2 by theory.scl.analyze_batching (a restatement: consistency) and, independently, by
    ``uniqueness_check`` (b >= 3: the dense dual certificate at the OF, uniqueness radius; b = 2: the merge
    witness attaining the proven optimum) and at b = 2 a random nonnegative unit H whose batched loss
    (solvers.scl.scl_loss) is 0 = the elementary lower bound (LSE_{l != i} >= mean over the positives, so every
    anchor term is >= 0), with a Gram far from the OF's: a second minimiser built without the analysis.
    Fails: a batching that misses C2 (its second minimiser attains the proven optimum: REFUTED); ``min_batch`` = 2
    (the OF claimed unique at b = 2: REFUTED by both witnesses) or 4 (b = 3 claimed non-unique: REFUTED by the
    certificate)."""

    def check(ctx: RunContext):
        C = _sc()
        tau = 0.5
        rng = np.random.default_rng(ctx.seed)
        for counts, b in (cases or (GRAF_BATCHINGS + (GRAF_BATCHINGS_FULL if ctx.full else []))):
            k = len(counts)
            lab = f"n={counts}, b={b}"
            batches = batching(counts, b)
            unique = b >= min_batch
            an = T.analyze_batching(counts, batches, k + 1)
            if unique:
                yield condition(f"C1 and C2 hold [{lab}]", an.C1 and an.C2, verified="C1 and C2 hold",
                                refuted=an.reason, evidence={"batches": len(batches)}, independent=False)
            else:
                yield condition(f"C1 or C2 fails [{lab}]", not (an.C1 and an.C2), verified=an.reason,
                                refuted="C1 and C2 hold", evidence={"batches": len(batches)}, independent=False)
            yield from C.uniqueness_check(f"OF is {'' if unique else 'not '}the unique minimiser [{lab}]", counts,
                                          batches, tau, k + 1, unique, an, conic=False)
            if b == 2:
                yield _zero_loss_witness(f"a random feature is a minimiser at b = 2 [{lab}]", counts, batches, tau,
                                         unique, rng)

    return Claim(claim_id, FAMILY,
                 "Graf et al.'s all-combinations batching (every subset of b >= 3 samples) satisfies the batching "
                 "conditions C1 and C2, so it is a special case of the mini-batch analysis (unique OF minimiser); "
                 "b >= 3 is sharp: at b = 2 the loss is identically 0 and the OF is not the unique minimiser.",
                 THREAD, Provenance.RECONSTRUCTED, check, tags=("thread", "batching"))


def _zero_loss_witness(name: str, counts, batches, tau: float, predicted_unique: bool, rng) -> Check:
    """b = 2: a random nonnegative unit H (d = k + 1) whose batched loss is 0. Every batched loss is >= 0 (per anchor,
    LSE_{l in B, l != i} G_il/tau >= max >= the mean over the positives), so such an H is a minimiser; with a
    Gram at least ``NONUNIQUE_MIN`` from the OF's it is a second one. ``predicted_unique`` is the statement."""
    C = _sc()
    k = len(counts)
    y = T.labels_from_counts(counts)
    H = np.abs(rng.standard_normal((k + 1, y.size)))
    H /= np.linalg.norm(H, axis=0)
    val = S.scl_loss(H, y, batches, tau, grad=False)
    gdiff = float(np.max(np.abs(H.T @ H - T.of_gram(counts))))
    ev = {"loss": val, "lower_bound": 0.0, "gram_diff_from_of": gdiff, "predicted_unique": predicted_unique}
    if not (within(abs(val), IDENTITY_ATOL) and exceeds(gdiff, C.NONUNIQUE_MIN)):
        return Check(name, Verdict.INCONCLUSIVE, f"the random feature is no second minimiser (loss {fmt(val)}, Gram "
                     f"{fmt(gdiff, 3)} from the OF's)", ev)
    witness = (f"a random nonnegative feature has loss {fmt(val)} = the lower bound 0 with a Gram {fmt(gdiff, 3)} "
               f"from the OF's")
    if predicted_unique:
        return Check(name, Verdict.REFUTED, f"predicted unique, but {witness}", ev)
    return Check(name, Verdict.VERIFIED, f"non-unique: {witness}", ev)


# --------------------------------------------------------------------------------------
# scl.thread.binary-antipodal
# --------------------------------------------------------------------------------------

BINARY = [((4, 4), 0.5), ((5, 2), 0.5), ((3, 1), 1.0)]


def make_binary_antipodal_claim(value=T.binary_antipodal_value, geometry: str = "simplex-etf", cases=None,
                                claim_id: str = "scl.thread.binary-antipodal") -> Claim:
    """Statement: binary SCL without ReLU (UFM, unit features, full batch) gives antipodal collapsed features,
    balanced and imbalanced; value sum_{c: n_c >= 2} n_c log(n_c - 1 + (N - n_c) e^{-2/tau}). Checked: sympy (the
    anchor value at the antipodal configuration); per instance the value bracket [proven bound (class-reduced or
    Gram dual), loss at the antipodal point], and the geometry certificate of the collapsed candidate (dense Gram
    dual + growth radius): within-class collapse and class means a 2-class simplex ETF (= antipodal).
    Fails: a wrong value (bracket) or geometry "orthogonal-frame" (REFUTED by the proven radius)."""

    def check(ctx: RunContext):
        import sympy as sp

        C = _sc()
        n, q, tau_s = sp.symbols("n q tau", positive=True)
        at = sp.log((n - 1) * sp.exp(1 / tau_s) + q * sp.exp(-1 / tau_s)) - 1 / tau_s
        yield symbolic_zero("anchor value at the antipodal configuration", sp.simplify(
            sp.expand(sp.exp(at)) - (n - 1 + q * sp.exp(-2 / tau_s))))
        for counts, tau in (cases or BINARY):
            lab = f"n={counts}, tau={tau}"
            inst = T.SCLInstance(counts, tau, 2, False)
            y = inst.labels
            H = np.zeros((2, inst.N))
            H[0, y == 0] = 1.0
            H[0, y == 1] = -1.0
            val = S.scl_loss(H, y, None, tau, grad=False)
            bounds, _ = E.certify_instance(inst, H, upper=val, conic=False)
            pred = float(value(counts, tau))
            yield optimum_matches(f"antipodal value [{lab}]", pred, attained=val, lower_bound=bounds.value,
                                  tol=C._tol(pred, bounds.allowance, inst), certificate=bounds.route or "")
            names = {"collapse": f"within-class collapse [{lab}]", "geometry": f"class means antipodal [{lab}]",
                     "minority": "_"}
            for c in C.imbalanced_geometry_checks(inst, H, claimed_geometry=geometry, names=names):
                if c.name != "_":
                    yield c

    return Claim(claim_id, FAMILY,
                 "Binary SCL without ReLU (unit features, full batch) gives collapsed antipodal class means, for "
                 "balanced and imbalanced classes.", THREAD, Provenance.QUOTED, check, tags=("thread", "ufm"))


# --------------------------------------------------------------------------------------
# scl.activations.same-result
# --------------------------------------------------------------------------------------

#: The result of Theorem 1 for features f(v)/||f(v)||: "same" (OF minimiser, bound attained), "infimum" (the bound is
#: the infimum, attained by no feature), "ufm" (every direction realised: the model without ReLU; the bound fails).
DERIVED_ACTIVATION_RESULT = {"relu": "same", "relu6": "same", "softplus": "infimum", "sigmoid": "infimum",
                             "gelu": "ufm", "silu": "ufm", "leaky-relu": "ufm"}
#: The thread's sentence: activations whose features are nonnegative and span [0, inf) (relu; softplus, whose range
#: (0, inf) is dense in it) "lead to the same result"; it says nothing about the others.
THREAD_ACTIVATION_RESULT = {"relu": "same", "softplus": "same"}

ACT_INSTANCE = ((3, 3, 3), 0.5)


def activation_checks(name: str, counts=ACT_INSTANCE[0], tau: float = ACT_INSTANCE[1], predicted: str | None = None,
                      prefix: str = "") -> list[Check]:
    """What Theorem 1 becomes for features h = f(v)/||f(v)|| (d = k + 1), judged against ``predicted``
    ("same" | "infimum" | "ufm"; None: report the facts only). docs/scl.md, "Other activations"."""
    import sympy as sp

    C = _sc()
    f, cat = T.ACTIVATIONS[name]
    k = len(counts)
    d = k + 1
    y = T.labels_from_counts(counts)
    bound = T.theorem1_bound(counts, tau)
    inst = T.SCLInstance(counts, tau, d, True)
    tol = C._tol(bound, 0.0, inst)
    out = []
    of_cert = S.of_closed_form_certificate(counts, tau)
    ev = {"activation": name, "category": cat, "theorem1_bound": bound, "proven_ufm_plus_lower_bound": of_cert.lower_bound}
    actual = None
    if cat == "nonneg-closed":
        V = 2.0 * T.of_features(counts, d) - 1.0   # +1 at the class coordinate, -1 elsewhere
        Hf = f(V)
        Hf = Hf / np.linalg.norm(Hf, axis=0)
        val = S.scl_loss(Hf, y, None, tau, grad=False)
        ev.update(realised_of_value=val, zero_attained=bool(f(np.array([-1.0]))[0] == 0.0))
        out.append(optimum_matches(prefix + "bound-attained-by-a-realised-feature", bound, attained=val,
                                   lower_bound=of_cert.lower_bound, tol=tol,
                                   certificate="features are nonnegative (a subset of UFM+: the closed-form OF dual "
                                               "bounds them) and the OF is realised exactly", evidence=ev))
        actual = "same" if out[-1].verdict == Verdict.VERIFIED else None
    elif cat == "positive-open":
        v, fx = T.sym_activation(name)
        pos = sp.ask(sp.Q.positive(fx), sp.Q.real(v))
        out.append(symbolic_true(prefix + f"{name}(v) > 0 for every real v", sp.true if pos else sp.false,
                                 note=f"sympy ask Q.positive({fx})"))
        vals = []
        for t in (2.0, 4.0, 8.0, 16.0, 32.0):
            V = t * (2.0 * T.of_features(counts, d) - 1.0)
            Hf = f(V)
            Hf = Hf / np.linalg.norm(Hf, axis=0)
            vals.append(S.scl_loss(Hf, y, None, tau, grad=False))
        ev.update(sequence_values=vals, sequence_excess=[x - bound for x in vals])
        approach = all(x >= of_cert.lower_bound - tol for x in vals) and within(vals[-1] - bound, tol)
        out.append(condition(prefix + "infimum-equals-bound", approach,
                             verified=f"realised features approach the bound: excess {fmt(vals[0] - bound, 3)} -> "
                                      f"{fmt(vals[-1] - bound, 3)} (never below the proven UFM+ bound)",
                             refuted="the realised sequence does not approach the bound", evidence=ev))
        # not attained: every realised feature is strictly positive, so G_ij > 0 between classes and, by the exact
        # OF dual point (F(G) - F(G_OF) >= <N, G>, N > 0 between classes), every value is strictly above the bound
        nu_ok = of_cert.face is not None
        out.append(condition(prefix + "bound-not-attained", bool(pos) and nu_ok,
                             verified="every realised feature has all entries > 0, so F(G) - bound >= <N, G> > 0 "
                                      "(exact OF dual point with positive between-class multipliers): no minimiser",
                             refuted="positivity or the multipliers are not proven", evidence=ev, inconclusive=True))
        actual = "infimum" if (pos and nu_ok and approach) else None
    else:
        rng = np.random.default_rng(0)
        res = 0.0
        for _ in range(10):
            u = rng.standard_normal(d)
            u /= np.linalg.norm(u)
            vv = T.realise_direction(name, u)
            res = max(res, float(np.max(np.abs(f(vv) - 0.05 * u))))
        ev["realise_residual"] = res
        out.append(condition(prefix + "every-direction-realised", within(res, REALISE_ATOL),
                             verified=f"random unit directions realised as f(v)/||f(v)|| (residual {fmt(res, 3)}): the "
                                      "feature set is the whole sphere (f(0) = 0, f increasing near 0): the UFM without "
                                      "ReLU", refuted=f"residual {fmt(res, 3)}", evidence=ev))
        E = T.etf_features(counts, d)
        V = np.stack([T.realise_direction(name, E[:, i]) for i in range(E.shape[1])], axis=1)
        Hf = f(V)
        Hf = Hf / np.linalg.norm(Hf, axis=0)
        val = S.scl_loss(Hf, y, None, tau, grad=False)
        ev["realised_etf_value"] = val
        below = exceeds(bound - val, tol)
        out.append(condition(prefix + "theorem1-bound-fails", below,
                             verified=f"a realised feature configuration (the ETF) has loss {fmt(val)} < the Theorem 1 "
                                      f"bound {fmt(bound)}", refuted="no realised configuration below the bound",
                             evidence=ev, inconclusive=True))
        actual = "ufm" if below and within(res, REALISE_ATOL) else None
    if predicted is not None:
        ev2 = {**ev, "predicted": predicted, "actual": actual}
        nm = prefix + f"same-result [{name}]"
        if actual is None:
            out.append(Check(nm, Verdict.INCONCLUSIVE, "the checks above did not decide the case", ev2))
        elif actual == predicted:
            out.append(Check(nm, Verdict.VERIFIED, f"{name}: '{actual}' as predicted", ev2))
        else:
            why = {"same": "the OF is realised and attains the proven optimum",
                   "infimum": "every realised feature is strictly positive: the bound is an infimum no feature attains",
                   "ufm": "a realised configuration lies below the Theorem 1 bound (the model is the UFM without ReLU)"}
            out.append(Check(nm, Verdict.REFUTED, f"{name}: predicted '{predicted}', but {why[actual]}", ev2))
    return out


def make_activation_claim(prediction: dict | None = None, claim_id: str = "scl.activations.same-result",
                          statement: str | None = None, provenance=Provenance.QUOTED,
                          tags=("thread", "ufm+", "activations", "expect-refuted")) -> Claim:
    """Statement (the thread): activations whose features are nonnegative and span [0, inf) "lead to the same
    result" (OF minimiser attaining the Theorem 1 bound): ``prediction`` maps activations to "same" | "infimum" |
    "ufm" (default: the thread's reading, relu and softplus -> "same"). The corrected claim uses
    DERIVED_ACTIVATION_RESULT. Checked per activation: the OF realised exactly (relu, relu6) against the closed-form
    OF dual bound; strict positivity (sympy) + a realised sequence approaching the bound (softplus, sigmoid); every
    direction realised and the ETF below the bound (gelu, silu, leaky-relu). Fails: softplus -> "same" (REFUTED:
    no feature attains the bound)."""
    pred = THREAD_ACTIVATION_RESULT if prediction is None else prediction

    def check(ctx: RunContext):
        for name in T.ACTIVATIONS:
            if name not in pred:
                yield hypothesis_fails(f"same-result [{name}]", f"the statement says nothing about {name}")
                continue
            yield from activation_checks(name, predicted=pred[name], prefix=f"{name}: ")

    return Claim(claim_id, FAMILY, statement or
                 "Activation functions whose post-activation features are nonnegative and span [0, inf) (ReLU; "
                 "softplus) lead to the same result as ReLU: the OF minimiser attaining the Theorem 1 bound.",
                 THREAD, provenance, check, tags=tuple(tags))


CLAIMS = [
    make_distances_claim(),
    make_eq1_eq2_claim(),
    make_rank_claim(),
    make_rank_claim(rank_fn=lambda counts, nonneg: len(counts) if nonneg else len(counts) - 1,
                    claim_id="scl.thread.rank-corrected", provenance=Provenance.DERIVED, tags=("thread", "geometry"),
                    statement="At the minimiser the feature matrix has rank k with ReLU (the OF) and rank k - 1 without "
                              "(balanced classes: the simplex ETF), so the thread's 'irrespective of ReLU' is off by one."),
    make_graf_special_case_claim(),
    make_binary_antipodal_claim(),
    make_activation_claim(),
    make_activation_claim(prediction=DERIVED_ACTIVATION_RESULT, claim_id="scl.activations.same-result-corrected",
                          provenance=Provenance.DERIVED, tags=("thread", "ufm+", "activations"),
                          statement="With h = f(v)/||f(v)||: relu and relu6 give the same result (OF, bound attained); "
                                    "softplus and sigmoid make the bound an infimum that no feature attains (every "
                                    "feature is strictly positive); gelu, silu and leaky-relu realise every direction, "
                                    "so the problem is the UFM without ReLU and the bound fails."),
]
