"""Feature collapse in ball arithmetic: the nuclear-norm bound and the LayerNorm SDP dual
(docs/rigorous.md "Feature collapse")."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

from solvers.rigorous.balls import (  # noqa: F401
    NotCertified, PRECISION_BITS, RigorousBound, Unsupported, _Precision, _Timer, certainly_positive,
    exact, lower_float, upper_float,
)
from solvers.rigorous.linalg import (  # noqa: F401
    DENSE_MAX, lambda_min_lower, ldl_positive_definite,
)


# ---------------------------------------------------------------------------------------------------
# Feature collapse (docs/feature_collapse.md "Certificates"): nuclear-norm bound and the LayerNorm SDP dual
# ---------------------------------------------------------------------------------------------------

#: Ball evaluations of the exact risk are Python-level: K x sentences x L score terms up to this many.
FC_MAX_TERMS = 300_000


def _fc_ce_balls(Zb, X, y, p_b, K, L, n_w):
    """CE(Z) = sum_s p_s log sum_j exp(h_j(s) - h_y(s)) and its gradient (K L x n_w) for a ball matrix Z
    (list of K L rows of n_w balls), h_j(s) = sum_l Z[j L + l][X[s, l]]; returns (CE, G)."""
    from flint import arb

    S = len(y)
    ce = arb(0)
    G = [[arb(0)] * n_w for _ in range(K * L)]
    for s in range(S):
        xs = X[s]
        h = [sum((Zb[j * L + l][int(xs[l])] for l in range(L)), arb(0)) for j in range(K)]
        ys = int(y[s])
        r = [h[j] - h[ys] for j in range(K)]
        m = max(float(x.mid()) for x in r)
        e = [(x - m).exp() for x in r]
        off = sum((e[j] for j in range(K) if j != ys), arb(0))
        tot = off + e[ys]
        # loss = log(sum_j e^{r_j}) = m + log(tot); stable: log1p(off) when m = 0 (the label is the largest)
        loss = off.log1p() if m == 0.0 else m + tot.log()
        ce += p_b[s] * loss
        for j in range(K):
            g = (-off / tot) if j == ys else e[j] / tot
            g = p_b[s] * g
            for l in range(L):
                G[j * L + l][int(xs[l])] += g
    return ce, G


def _matmul_balls(A, B):
    n, m, q = len(A), len(B), len(B[0]) if B else 0
    from flint import arb

    return [[sum((A[i][t] * B[t][j] for t in range(m)), arb(0)) for j in range(q)] for i in range(n)]


def _feature_collapse_enumerated(params: dict, *, prec: int = PRECISION_BITS) -> RigorousBound:
    """The reference recipe (kept for the tests of :func:`feature_collapse_from_instance`, which computes the same
    bracket from the exact structure): every (class, sentence) pair enumerated in Python-level balls, so limited to
    K x sentences x L <= FC_MAX_TERMS and n_w <= DENSE_MAX. Rigorous bracket at the claimed configuration
    (theory.feature_collapse.claimed_configuration):

    - the exact risk is re-enumerated in balls: sentence probabilities p_s = (1/K) prod_l mu(word) from the
      instance's frequencies taken as exact rationals (uniform: 1/s_c; given doubles: normalised exactly to
      sum 1), scores, softmax, CE (stable log1p form) and its gradient G;
    - candidate: W, U (doubles, exact); without LayerNorm E = W, with it E = sqrt(d) (W - mean) / ||.|| in
      balls; Z = U E^T in balls; feasible value CE(Z) + (lw/2)||W||^2 + (lu/2)||U||^2;
    - no LayerNorm (nuclear-kkt): LB = CE(Z) - <G, Z> - R max(0, ||G||_2 - lambda), R = log(K)/lambda, with
      ||G||_2^2 <= s verified by an LDL^T in balls of s I - G^T G (s just above the float estimate);
    - LayerNorm (sdp-dual): nu_i = <(A E)_i, E_i>/d, A = G^T G/(2 lambda), shifted by a verified lower bound of
      lambda_min(diag(nu) - A) (LDL^T in balls); LB = CE(Z) - <G, Z> - d sum(nu).
    """
    import numpy as np
    from flint import arb

    from theory import feature_collapse as T
    from theory.feature_collapse import claimed_configuration

    tm = _Timer()
    inst = _fc_instance(params)
    K, L, n_w, s_c, d = inst.K, inst.L, inst.n_w, inst.s_c, inst.d
    if K * inst.n_sentences * L > FC_MAX_TERMS or n_w > DENSE_MAX:
        raise Unsupported(f"ball enumeration limited to K x sentences x L <= {FC_MAX_TERMS} and n_w <= {DENSE_MAX} "
                          f"(got {K * inst.n_sentences * L}, n_w = {n_w})")
    pred = T.predict(inst)
    cfg, why = claimed_configuration(inst, pred)
    if cfg is None:
        raise Unsupported(f"no claimed configuration to certify: {why}")
    W, U, _E = (np.asarray(a, dtype=float) for a in cfg)
    X, y, p = T.sentence_distribution(inst)
    freqs = inst.freqs
    tm.lap("float candidate and sentences")
    with _Precision(prec):
        # the instance's word distribution, exactly: uniform is 1/s_c (the doubles 1/3 do not sum to 1), and
        # given frequencies are normalised exactly to sum 1 (mu_beta = f_beta / sum f, rationals)
        if getattr(inst, "uniform", False) or params.get("freqs") is None:
            fq = [Fraction(1, s_c)] * s_c
        else:
            tot = sum(Fraction(float(f)) for f in freqs)
            fq = [Fraction(float(f)) / tot for f in freqs]
        fb = [exact(f) for f in fq]
        p_b = []
        for s in range(len(y)):
            v = arb(1)
            for l in range(L):
                v *= fb[int(X[s, l]) % s_c]
            p_b.append(v / K)
        if abs(float(sum(p_b, arb(0)).mid()) - 1.0) > 1e-9 or max(abs(float(pb.mid()) - ps) for pb, ps in
                                                                    zip(p_b, p)) > 1e-12:
            raise NotCertified("sentence probabilities from the frequencies do not match the enumeration")
        Wb = [[exact(x) for x in row] for row in W]
        Ub = [[exact(x) for x in row] for row in U]
        Eb = _layernorm_balls(Wb, d) if inst.layernorm else Wb
        Zb = _matmul_balls(Ub, [list(col) for col in zip(*Eb)])  # U E^T: (K L) x n_w
        tm.lap("candidate in balls")
        ce, G = _fc_ce_balls(Zb, X, y, p_b, K, L, n_w)
        tm.lap("exact risk and gradient in balls")
        reg = (exact(inst.lw) / 2) * sum((x * x for row in Wb for x in row), arb(0)) + \
            (exact(inst.lu) / 2) * sum((x * x for row in Ub for x in row), arb(0))
        upper = ce + reg
        inner = sum((G[i][j] * Zb[i][j] for i in range(K * L) for j in range(n_w)), arb(0))
        lam = exact(inst.lam)
        Gf = np.array([[float(x.mid()) for x in row] for row in G])
        GtG = _matmul_balls([list(col) for col in zip(*G)], G)  # n_w x n_w
        details: dict = {}
        if not inst.layernorm:
            top = float(np.linalg.eigvalsh(Gf.T @ Gf)[-1]) if Gf.size else 0.0
            s_ok = None
            for rel in (1e-14, 1e-12, 1e-10, 1e-8, 1e-6):
                s_try = top * (1 + rel) + 1e-300
                T_ = [[(arb(s_try) if i == j else arb(0)) - GtG[i][j] for j in range(n_w)] for i in range(n_w)]
                if ldl_positive_definite(T_):
                    s_ok = arb(s_try)
                    break
            if s_ok is None:
                raise NotCertified("could not verify an upper bound on ||G||_2")
            gnorm = s_ok.sqrt()
            R_ = arb(K).log() / lam
            excess = (gnorm - lam).max(arb(0))
            lower = ce - inner - R_ * excess
            method = "ball-arithmetic nuclear-kkt (||G||_2 verified by LDL^T of s I - G^T G)"
            details.update(grad_spectral_norm_upper=upper_float(gnorm), nuclear_radius=upper_float(R_))
        else:
            A = [[GtG[i][j] / (2 * lam) for j in range(n_w)] for i in range(n_w)]
            Af = np.array([[float(x.mid()) for x in row] for row in A])
            Ef = np.array([[float(x.mid()) for x in row] for row in Eb])
            nu = np.einsum("ij,ij->i", Af @ Ef, Ef) / d
            nub = [exact(float(v)) for v in nu]
            Mm = [[(nub[i] if i == j else arb(0)) - A[i][j] for j in range(n_w)] for i in range(n_w)]
            Mf = np.diag(nu) - Af
            lmin = lambda_min_lower(Mm, float(np.linalg.eigvalsh(0.5 * (Mf + Mf.T))[0]))
            shift = arb(0) if lmin >= 0 else -lmin
            lower = ce - inner - d * (sum(nub, arb(0)) + n_w * shift)
            method = "ball-arithmetic sdp-dual (PSD shift verified by LDL^T)"
            details.update(dual_shift=upper_float(shift) if not shift.is_zero() else 0.0)
        tm.lap("dual value")
    details["sentences"] = len(y)
    return RigorousBound(lower, upper, method, prec, details, tm.steps)


#: Structured recipe (:func:`feature_collapse_from_instance`) with latents that are not all n_c^L tuples equally
#: often: one softmax entry in Python-level balls per (class type, sentence group). Seconds per entry, measured on
#: the shared 2-core machine (python-flint 0.9, 128 bits): sub + exp + sums + weights ~1.3 us, plus 0.05 us per
#: position (arb_mat column additions of the scores), plus the gradient accumulation: dense incidence products
#: 0.25 us + 0.016 us per (position x cell), or column additions 0.45 us + 0.05 us per position, whichever the model
#: says is cheaper (measured totals: 2.7 us dense / 3.4 us columns at L = 15 with 3 cells, 1.7 us at L = 5 with 9
#: cells, 1.2 us at L = 2 with 100 cells; the model gives 3.0 / 3.3, 2.5, 2.0). Refused (Unsupported, with the
#: count and the estimate) above FC_MAX_GROUPED_SECONDS before any ball work.
FC_SECONDS_PER_ENTRY = 1.3e-6
FC_SECONDS_PER_ENTRY_POSITION = 0.05e-6
FC_SECONDS_DENSE_INCIDENCE = (0.25e-6, 0.016e-6)
FC_SECONDS_COLUMN_INCIDENCE = (0.45e-6, 0.05e-6)
FC_MAX_GROUPED_SECONDS = 30.0
#: The refusal counts WORK in ball-operation units of this model time (every FC_SECONDS_* constant is a whole number
#: of them: 26 per entry, 1 per position, ...) against FC_MAX_GROUPED_SECONDS / FC_SECONDS_PER_BALL_OP = 6e8 units:
#: the same on every machine; the machine's measured rate is only stated.
FC_SECONDS_PER_BALL_OP = 0.05e-6
#: Sentence groups per arb_mat product of the dense gradient accumulation (memory: (class types + L cells) x FC_CHUNK
#: balls).
FC_CHUNK = 256
#: Largest dense matrix of the structured recipe's LDL^T tests (spectral norm: min(cells, rows of the reduced
#: gradient); LayerNorm: cells). One LDL^T in 128-bit balls: 0.11 s at 120, 0.34 s at 200, 1.1 s at 300 (measured).
FC_DENSE_MAX = 300
#: Consistency check of the structured risk and gradient against the float enumeration of every sentence
#: (solvers.feature_collapse.FCProblem.ce at the same candidate): relative deviation allowed on CE (plus the float
#: evaluation's own round-off allowance) and on the largest entry of the cell-summed gradient (plus 4 S EPS, the
#: float summation error of an entry whose terms sum to <= 1). A formula error gives O(1) relative deviations.
FC_FLOAT_CHECK_RTOL = 1e-9


def _fc_instance(params: dict):
    from theory import feature_collapse as T

    return T.FCInstance(params["n_c"], params["L"], params["s_c"], params["d"], params["lambda"], K=params.get("K"),
                        layernorm=bool(params.get("layernorm", False)), freqs=tuple(params["freqs"]) if
                        params.get("freqs") else None, latents=params.get("latents", "full"),
                        seed=int(params.get("seed", 0)))


def _fc_word_masses(inst, params: dict) -> list:
    """mu_beta as exact rationals: uniform 1/s_c (the doubles 1/3 do not sum to 1); given frequencies (the
    instance's doubles) normalised exactly to sum 1."""
    if getattr(inst, "uniform", False) or params.get("freqs") is None:
        return [Fraction(1, inst.s_c)] * inst.s_c
    tot = sum(Fraction(float(f)) for f in inst.freqs)
    return [Fraction(float(f)) / tot for f in inst.freqs]


def _fc_candidate(inst):
    """(W, U) of the claimed configuration (doubles), or Unsupported."""
    import numpy as np

    from theory import feature_collapse as T
    from theory.feature_collapse import claimed_configuration

    cfg, why = claimed_configuration(inst, T.predict(inst))
    if cfg is None:
        raise Unsupported(f"no claimed configuration to certify: {why}")
    W, U, E = (np.asarray(a, dtype=float) for a in cfg)
    if not (np.all(np.isfinite(W)) and np.all(np.isfinite(U))):
        raise NotCertified("non-finite claimed configuration")
    return W, U, E


@dataclass
class _FCStructure:
    """Exact structure of a candidate (W, U) (docs/rigorous.md "Feature collapse"), found on the doubles.

    cells: the words of one concept whose rows of W are identical doubles (so are their rows of E); the
    gradient's columns within a cell are proportional to the words' masses. urows: the distinct rows of U,
    rowtype[j, l] the one of U_(j,l). product: every latent tuple is used exactly m times and U_(j,l) depends on
    (l, z_(j,l)) only (then CE and its gradient factorise over positions); else classes with the same latent
    and rows of U form types (multiplicity) and the sentences of a type form groups (one cell per position)."""

    cell_concept: list
    cell_words: list
    cells_of: list
    urows: object
    rowtype: object
    product: bool
    m: int = 1
    rowtype_lc: list = field(default_factory=list)
    types: list = field(default_factory=list)
    type_of_class: object = None
    sentence_groups: int = 0


def _fc_structure(inst, W, U) -> _FCStructure:
    import numpy as np

    n_c, s_c, K, L = inst.n_c, inst.s_c, inst.K, inst.L
    Wk, Uk = W + 0.0, U + 0.0  # -0.0 -> +0.0: equal reals get equal bytes
    cell_concept, cell_words, cells_of = [], [], []
    for a in range(n_c):
        idx: dict = {}
        for w in range(a * s_c, (a + 1) * s_c):
            key = Wk[w].tobytes()
            if key not in idx:
                idx[key] = len(cell_words)
                cell_concept.append(a)
                cell_words.append([])
            cell_words[idx[key]].append(w)
        cells_of.append(sorted(set(idx.values())))
    uidx: dict = {}
    rowtype = np.empty(K * L, dtype=np.int64)
    for i in range(K * L):
        rowtype[i] = uidx.setdefault(Uk[i].tobytes(), len(uidx))
    urows = np.zeros((len(uidx), U.shape[1]))
    for key, i in uidx.items():
        urows[i] = np.frombuffer(key, dtype=float)
    rowtype = rowtype.reshape(K, L)
    z = inst.latent_vars
    st = _FCStructure(cell_concept, cell_words, cells_of, urows, rowtype, product=False)
    if inst.symmetric:
        lc = [[-1] * n_c for _ in range(L)]
        ok = True
        for l in range(L):
            for c in range(n_c):
                r = np.unique(rowtype[z[:, l] == c, l])
                if r.size != 1:
                    ok = False
                    break
                lc[l][c] = int(r[0])
            if not ok:
                break
        if ok:
            st.product, st.m, st.rowtype_lc = True, K // n_c ** L, lc
            st.sentence_groups = L * len(cell_concept)
            return st
    tidx: dict = {}
    st.type_of_class = np.empty(K, dtype=np.int64)
    for j in range(K):
        key = (tuple(int(c) for c in z[j]), tuple(int(r) for r in rowtype[j]))
        if key not in tidx:
            tidx[key] = len(st.types)
            st.types.append([key[0], key[1], 0])
        t = tidx[key]
        st.types[t][2] += 1
        st.type_of_class[j] = t
    st.sentence_groups = sum(math.prod(len(cells_of[c]) for c in lat) for lat, _r, _n in st.types)
    return st


def _fc_product_balls(inst, st: _FCStructure, V, mass_b):
    """CE and the cell-summed gradient Gc ((K L) x cells) when every latent is used m times and U_(j,l) = u_l(z_jl):
    sum_j exp(h_j(x)) = m prod_l sum_c exp(V_l[c, x_l]), so with q_l(c | cell) the softmax over concepts at position l,
    A_l(c) = sum_cells mass(cell) q_l(c | cell) (cell masses within their concept):
    CE = log m + (1/n_c) sum_l sum_cells mass(cell) log1p(sum_{c != concept} e^{V_l[c, cell] - V_l[concept, cell]}),
    Gc[(j,l), cell] = (mass(cell)/K) (q_l(z_jl | cell) prod_{l' != l} A_l'(z_jl') - [concept(cell) = z_jl])."""
    from flint import arb

    n_c, L, K = inst.n_c, inst.L, inst.K
    nC = len(mass_b)
    one, zero = arb(1), arb(0)
    rt = st.rowtype_lc
    q = [[None] * nC for _ in range(L)]
    ce = zero
    for l in range(L):
        for cell in range(nC):
            a = st.cell_concept[cell]
            base = V[rt[l][a]][cell]
            e = [zero if c == a else (V[rt[l][c]][cell] - base).exp() for c in range(n_c)]
            off = sum(e, zero)
            e[a] = one
            den = 1 + off
            ce += mass_b[cell] * off.log1p()
            q[l][cell] = [x / den for x in e]
    ce = ce / n_c + (arb(st.m).log() if st.m > 1 else zero)
    A = [[sum((mass_b[cell] * q[l][cell][c] for cell in range(nC)), zero) for c in range(n_c)] for l in range(L)]
    mk = [mb / K for mb in mass_b]
    z = inst.latent_vars
    rows, row_u = [], []
    for j in range(K):
        zj = [int(c) for c in z[j]]
        vals = [A[l][zj[l]] for l in range(L)]
        pre = [one]
        for v in vals:
            pre.append(pre[-1] * v)
        suf = [one] * (L + 1)
        for l in range(L - 1, -1, -1):
            suf[l] = suf[l + 1] * vals[l]
        for l in range(L):
            ex, c = pre[l] * suf[l + 1], zj[l]
            ql = q[l]
            rows.append([mk[cell] * (ql[cell][c] * ex - (1 if st.cell_concept[cell] == c else 0)) for cell in range(nC)])
            row_u.append(rt[l][c])
    return ce, rows, row_u, [1] * len(rows)


def _fc_grouped_cost(L: int, nC: int):
    """(seconds per softmax entry, dense incidence products?) of :func:`_fc_grouped_balls` (model: FC_SECONDS_*)."""
    dense = FC_SECONDS_DENSE_INCIDENCE[0] + FC_SECONDS_DENSE_INCIDENCE[1] * L * nC
    cols = FC_SECONDS_COLUMN_INCIDENCE[0] + FC_SECONDS_COLUMN_INCIDENCE[1] * L
    return FC_SECONDS_PER_ENTRY + FC_SECONDS_PER_ENTRY_POSITION * L + min(dense, cols), dense <= cols


def _fc_grouped_balls(inst, st: _FCStructure, V, mass_b):
    """CE and Gc per class type: for each type tau and each sentence group (one cell per position, within the
    concepts of its latent; probability (1/K) prod_l mass(cell_l), exact rationals' balls) the scores of every type
    (sum over positions of the arb_mat columns V[rows of U, cell]), the softmax (types counted with multiplicity;
    stable log1p) and the gradient's first term (arb_mat product of FC_CHUNK weighted softmax columns with the
    groups' 0/1 incidence matrix); the label term is
    (mass(cell)/K) [concept(cell) = z_tl] (the marginal of a class's sentences at position l)."""
    import itertools

    from flint import arb, arb_mat

    L, K = inst.L, inst.K
    nC = len(mass_b)
    nLC = L * nC
    T_ = len(st.types)
    one, zero = arb(1), arb(0)
    mult = [n for _lat, _r, n in st.types]
    dup = any(n > 1 for n in mult)
    Vcol = [[arb_mat([[V[rts[l]][cell]] for _lat, rts, _n in st.types]) for cell in range(nC)] for l in range(L)]
    # gradient accumulation: dense products of FC_CHUNK weighted columns with the 0/1 incidence matrix (cost
    # ~ L cells per entry, C-level) while that is cheaper, else one T x 1 column added per (group, position)
    dense = _fc_grouped_cost(L, nC)[1]
    Gfirst = arb_mat(T_, nLC)
    Gcol = None if dense else [[arb_mat(T_, 1) for _ in range(nC)] for _ in range(L)]
    invK = exact(Fraction(1, K))
    ce = zero

    def groups():
        for tau, (lat, _rts, _n) in enumerate(st.types):
            for combo in itertools.product(*(st.cells_of[c] for c in lat)):
                yield tau, combo

    it = groups()
    while True:
        chunk = list(itertools.islice(it, FC_CHUNK))
        if not chunk:
            break
        cols = []
        for tau, combo in chunk:
            hm = Vcol[0][combo[0]]
            for l in range(1, L):
                hm = hm + Vcol[l][combo[l]]
            h = hm.entries()
            hy = h[tau]
            e = [(x - hy).exp() for x in h]
            e[tau] = zero
            off = sum(((x * n if n > 1 else x) for x, n in zip(e, mult)), arb(mult[tau] - 1)) if dup else sum(e, zero)
            e[tau] = one
            P = invK
            for c in combo:
                P = P * mass_b[c]
            wt = P * mult[tau] if mult[tau] > 1 else P
            ce += wt * off.log1p()
            coef = wt / (1 + off)
            if dense:
                cols.append([coef * x for x in e])
            else:
                wcol = arb_mat([[coef * x] for x in e])
                for l, c in enumerate(combo):
                    Gcol[l][c] = Gcol[l][c] + wcol
        if dense:
            C = len(chunk)
            B = [[0] * nLC for _ in range(C)]
            for col, (_tau, combo) in enumerate(chunk):
                for l, c in enumerate(combo):
                    B[col][l * nC + c] = 1
            Gfirst += arb_mat([list(r) for r in zip(*cols)]) * arb_mat(B)
    if not dense:
        Gfirst = arb_mat([[Gcol[l][cell][t, 0] for l in range(L) for cell in range(nC)] for t in range(T_)])
    mk = [mb / K for mb in mass_b]
    Gl = Gfirst.tolist()
    rows, row_u, row_w = [], [], []
    for t, (lat, rts, n_t) in enumerate(st.types):
        for l in range(L):
            g = Gl[t][l * nC:(l + 1) * nC]
            rows.append([g[cell] - (mk[cell] if st.cell_concept[cell] == lat[l] else 0) for cell in range(nC)])
            row_u.append(rts[l])
            row_w.append(n_t)
    return ce, rows, row_u, row_w


def _fc_float_check(inst, W, U, E, st: _FCStructure, ce, rows) -> dict:
    """Compare the structured CE and gradient (ball midpoints) with the float enumeration of every sentence
    (independent code: solvers.feature_collapse.FCProblem); NotCertified beyond FC_FLOAT_CHECK_RTOL. Skipped (and
    said so) when the float problem is beyond its own budget."""
    import numpy as np

    from solvers.feature_collapse import EPS, FCProblem
    from theory._validate import InputError

    try:
        prob = FCProblem(inst)
    except InputError as exc:
        return {"float_check": f"skipped: {exc}"}
    Z = U @ E.T
    ce_f, G_f = prob.ce(Z)
    Ind = np.zeros((inst.n_w, len(st.cell_words)))
    for c, ws in enumerate(st.cell_words):
        Ind[ws, c] = 1.0
    Gcf = G_f @ Ind
    Gm = np.array([[float(x.mid()) for x in row] for row in rows])
    if not st.product:
        idx = (st.type_of_class[:, None] * inst.L + np.arange(inst.L)[None, :]).reshape(-1)
        Gm = Gm[idx]
    ce_m = float(ce.mid())
    ce_dev = abs(ce_m - ce_f)
    ce_tol = FC_FLOAT_CHECK_RTOL * abs(ce_f) + prob.ce_roundoff(Z, ce_f)
    g_dev = float(np.abs(Gm - Gcf).max(initial=0.0))
    g_tol = FC_FLOAT_CHECK_RTOL * float(np.abs(Gcf).max(initial=0.0)) + 4 * prob.S * EPS
    if not (ce_dev <= ce_tol and g_dev <= g_tol):
        raise NotCertified(f"structured risk disagrees with the float enumeration (CE deviation {ce_dev:.3g}, "
                           f"tolerance {ce_tol:.3g}; gradient deviation {g_dev:.3g}, tolerance {g_tol:.3g})")
    return {"float_check": "agrees", "float_check_ce_deviation": ce_dev, "float_check_grad_deviation": g_dev}


def _fc_gram_upper(Gram, top: float):
    """A ball s with Gram <= s I for every matrix in the symmetric ball matrix ``Gram`` (so ||G||_2^2 <= s when
    Gram = G^T G or G G^T): s I - Gram verified positive definite by LDL^T, s just above the float estimate ``top``
    (relative steps 1e-14 .. 1e-6); NotCertified when none is verified."""
    from flint import arb

    n = len(Gram)
    for rel in (1e-14, 1e-12, 1e-10, 1e-8, 1e-6):
        s_try = arb(max(top, 0.0) * (1 + rel) + 1e-300)
        if ldl_positive_definite([[(s_try if i == j else 0) - Gram[i][j] for j in range(n)] for i in range(n)]):
            return s_try
    raise NotCertified("could not verify an upper bound on ||G||_2")


def _fc_lambda_min_lower(S, guess: float):
    """As :func:`lambda_min_lower` (LDL^T just below the float estimate, Gershgorin fallback) up to FC_DENSE_MAX."""
    from flint import arb

    k = len(S)
    gersh = None
    for i in range(k):
        r = S[i][i] - sum((abs(S[i][j]) for j in range(k) if j != i), arb(0))
        gersh = r if gersh is None else gersh.min(r)
    g_lo = arb(lower_float(gersh))
    if not math.isfinite(guess):
        return g_lo
    scale = max(max(abs(float(S[i][j].mid())) for i in range(k) for j in range(k)), 1e-300)
    for rel in (1e-13, 1e-10, 1e-7, 1e-4):
        sigma = guess - rel * scale * k
        if sigma <= float(g_lo.mid()):
            break
        sb = arb(sigma)
        if ldl_positive_definite([[S[i][j] - (sb if i == j else 0) for j in range(k)] for i in range(k)]):
            return sb
    return g_lo


def _layernorm_balls(rows, d: int):
    """LayerNorm without affine part or eps, in balls: sqrt(d) (w - mean(w)) / ||w - mean(w)|| per row (rows of
    balls); NotCertified when a centred row is not certainly nonzero."""
    from flint import arb

    out = []
    sd = arb(d).sqrt()
    for row in rows:
        mean = sum(row, arb(0)) / len(row)
        v = [x - mean for x in row]
        nrm = sum((x * x for x in v), arb(0)).sqrt()
        if not certainly_positive(nrm):
            raise NotCertified("LayerNorm undefined at the candidate")
        out.append([sd * x / nrm for x in v])
    return out


def feature_collapse_from_instance(params: dict, *, prec: int = PRECISION_BITS) -> RigorousBound:
    """Rigorous bracket for a feature-collapse instance (report dict ``instance``) at the claimed configuration
    (theory.feature_collapse.claimed_configuration), computed from the exact
    structure (docs/rigorous.md "Feature collapse"; the reference enumeration of every sentence is
    :func:`_feature_collapse_enumerated`):

    - cells: words of one concept with identical rows of W (doubles). The risk depends on a sentence only through
      its cells, so sentences are grouped by (class, cell at each position); a group's probability is the exact
      rational product of its cells' masses (sums of the words' rational masses), and the gradient's column of a
      word is its cell's column times mass(word)/mass(cell) (exact);
    - with every latent used m times and U_(j,l) a function of (l, z_jl): CE and the gradient factorise over
      positions (:func:`_fc_product_balls`, K L x cells work); otherwise one softmax per (class type, sentence group)
      (:func:`_fc_grouped_balls`), refused above an estimated FC_MAX_GROUPED_SECONDS;
    - the reduced gradient Gc (rows x cells) gives <G, Z> = <Gc, Zc>, ||G||_2 = ||Gc diag(rho)||_2 with
      rho_cell = ||(mass(w)/mass(cell))_w||_2 (verified by LDL^T of s I minus the smaller Gram matrix), and with
      LayerNorm the dual point nu_w = (mass(w)/mass(cell)) nu_cell, feasible when diag(nu_cell) - Gc^T Gc/(2 lambda)
      is PSD (Cauchy-Schwarz within a cell), dual value d sum(nu_cell);
    - the structured CE and gradient are checked against the float enumeration (NotCertified when they disagree).
    """
    import numpy as np
    from flint import arb, arb_mat

    tm = _Timer()
    inst = _fc_instance(params)
    K, L, s_c, d, n_c = inst.K, inst.L, inst.s_c, inst.d, inst.n_c
    W, U, E = _fc_candidate(inst)
    st = _fc_structure(inst, W, U)
    nC = len(st.cell_concept)
    n_rows = K * L if st.product else len(st.types) * L
    dense = nC if inst.layernorm else min(nC, n_rows)
    if dense > FC_DENSE_MAX:
        raise Unsupported(f"reduced dual matrix of size {dense} > {FC_DENSE_MAX} (dense LDL^T in balls; {nC} cells of "
                          f"words with identical embeddings, {n_rows} gradient rows)")
    if not st.product:
        entries = len(st.types) * st.sentence_groups
        est = entries * _fc_grouped_cost(L, nC)[0]
        ops, limit = est / FC_SECONDS_PER_BALL_OP, FC_MAX_GROUPED_SECONDS / FC_SECONDS_PER_BALL_OP
        if ops > limit:
            from theory._work import work_text

            raise Unsupported(f"{len(st.types)} class types x {st.sentence_groups} sentence groups = {entries} softmax "
                              f"entries in balls: {work_text(ops, limit, 'ball-operation units', seconds_per_unit=FC_SECONDS_PER_BALL_OP)}"
                              "; the latents are not all n_c^L tuples equally often, so the risk does not factorise "
                              "over positions")
    mu = _fc_word_masses(inst, params)
    cell_mass = [sum((mu[w % s_c] for w in ws), Fraction(0)) for ws in st.cell_words]
    for a in range(n_c):
        if sum((cell_mass[c] for c in st.cells_of[a]), Fraction(0)) != 1:
            raise NotCertified(f"word masses of concept {a} do not sum to 1 exactly")
    # the exact masses are the instance's: each within 1e-12 of the float sum of its words' frequencies
    mu_f = inst.mu
    if max(abs(float(q) - math.fsum(mu_f[w % s_c] for w in ws)) for q, ws in zip(cell_mass, st.cell_words)) > 1e-12:
        raise NotCertified("cell masses from the frequencies do not match the instance's frequencies")
    rho2 = [sum(((mu[w % s_c] / q) ** 2 for w in ws), Fraction(0)) for q, ws in zip(cell_mass, st.cell_words)]
    tm.lap("float candidate and structure")
    with _Precision(prec):
        mass_b = [exact(q) for q in cell_mass]
        reps = [ws[0] for ws in st.cell_words]
        Wr = [[exact(x) for x in W[w]] for w in reps]
        Ec = _layernorm_balls(Wr, d) if inst.layernorm else Wr
        V = (arb_mat([[exact(x) for x in row] for row in st.urows]) * arb_mat(Ec).transpose()).tolist()
        ucount = np.bincount(st.rowtype.reshape(-1), minlength=len(st.urows))
        reg = (exact(inst.lw) / 2) * sum((len(ws) * sum((x * x for x in row), arb(0))
                                          for ws, row in zip(st.cell_words, Wr)), arb(0)) + \
            (exact(inst.lu) / 2) * sum((int(n) * sum((exact(x) * exact(x) for x in urow), arb(0))
                                        for n, urow in zip(ucount, st.urows)), arb(0))
        tm.lap("candidate in balls")
        if st.product:
            ce, rows, row_u, row_w = _fc_product_balls(inst, st, V, mass_b)
        else:
            ce, rows, row_u, row_w = _fc_grouped_balls(inst, st, V, mass_b)
        tm.lap("exact risk and gradient in balls")
        details = _fc_float_check(inst, W, U, E, st, ce, rows)
        tm.lap("float enumeration check")
        upper = ce + reg
        inner = sum(((sum((g * v for g, v in zip(row, V[u])), arb(0)) * (n if n > 1 else 1))
                     for row, u, n in zip(rows, row_u, row_w)), arb(0))
        lam = exact(inst.lam)
        wrow = [arb(n).sqrt() if n > 1 else None for n in row_w]
        if not inst.layernorm:
            rho = [exact(r).sqrt() for r in rho2]
            Gs = arb_mat([[g * r for g, r in zip(row, rho)] if w is None else [g * r * w for g, r in zip(row, rho)]
                          for row, w in zip(rows, wrow)])
            Gram = Gs.transpose() * Gs if nC <= len(rows) else Gs * Gs.transpose()
            Gl = Gram.tolist()
            Gf = np.array([[float(x.mid()) for x in row] for row in Gl])
            top = float(np.linalg.eigvalsh(0.5 * (Gf + Gf.T))[-1]) if Gf.size else 0.0
            gnorm = _fc_gram_upper(Gl, top).sqrt()
            R_ = arb(K).log() / lam
            lower = ce - inner - R_ * (gnorm - lam).max(arb(0))
            method = "ball-arithmetic nuclear-kkt, structured (||G||_2 verified by LDL^T of the reduced Gram matrix)"
            details.update(grad_spectral_norm_upper=upper_float(gnorm), nuclear_radius=upper_float(R_))
        else:
            Gs = arb_mat([row if w is None else [g * w for g in row] for row, w in zip(rows, wrow)])
            A = (Gs.transpose() * Gs).tolist()
            A = [[x / (2 * lam) for x in row] for row in A]
            Af = np.array([[float(x.mid()) for x in row] for row in A])
            Ef = np.array([[float(x.mid()) for x in row] for row in Ec])
            nu = np.einsum("ij,ij->i", Af @ Ef, Ef) / d
            nub = [exact(float(v)) for v in nu]
            Mm = [[(nub[i] if i == j else arb(0)) - A[i][j] for j in range(nC)] for i in range(nC)]
            Mf = np.diag(nu) - Af
            lmin = _fc_lambda_min_lower(Mm, float(np.linalg.eigvalsh(0.5 * (Mf + Mf.T))[0]))
            shift = arb(0) if lmin >= 0 else -lmin
            lower = ce - inner - d * (sum(nub, arb(0)) + nC * shift)
            method = "ball-arithmetic sdp-dual, structured (PSD shift verified by LDL^T on cells)"
            details.update(dual_shift=upper_float(shift) if not shift.is_zero() else 0.0)
        tm.lap("dual value")
    details.update(sentences=inst.n_sentences, cells=nC, path="product over positions" if st.product else
                   "grouped sentences", sentence_groups=st.sentence_groups,
                   class_types=K if st.product else len(st.types))
    return RigorousBound(lower, upper, method, prec, details, tm.steps)
