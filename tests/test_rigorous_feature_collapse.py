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
from solvers.rigorous import feature_collapse as RF  # noqa: E402  (the module whose constants the tests move)
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


# ---------------------------------------------------------------------------------------------------
# The structured recipe (cells of identical embeddings, product over positions or grouped sentences) against the
# reference enumeration of every (class, sentence) pair (R._feature_collapse_enumerated, independent code)
# ---------------------------------------------------------------------------------------------------

# (n_c, L, s_c, d, lam, kwargs, path): uniform, Zipf (type III: one cell per word), given frequencies, LayerNorm,
# the trivial phase, symmetric random latents with duplicates (m = 2: log m term), random latents (grouped), random
# latents with duplicated classes (multiplicities), random latents with frequencies / LayerNorm
SMALL = [
    (3, 2, 2, 4, 0.05, {}, "product"),
    (3, 2, 3, 4, 0.05, {"freqs": "zipf"}, "product"),
    (2, 3, 2, 3, 0.02, {"freqs": (0.7, 0.3)}, "product"),
    (3, 2, 2, 3, 0.05, {"layernorm": True, "freqs": (0.8, 0.2)}, "product"),
    (2, 2, 2, 2, 0.1, {"layernorm": True}, "product"),
    (3, 2, 3, 4, 0.5, {"freqs": "zipf"}, "product"),
    (2, 2, 2, 3, 0.05, {"K": 8, "latents": "random", "seed": 43}, "product"),
    (3, 2, 2, 4, 0.05, {"K": 5, "latents": "random", "seed": 1}, "grouped"),
    (2, 2, 2, 3, 0.05, {"K": 8, "latents": "random", "seed": 3}, "grouped"),
    (3, 2, 2, 4, 0.05, {"K": 5, "latents": "random", "seed": 1, "freqs": (0.7, 0.3)}, "grouped"),
    (3, 2, 2, 4, 0.05, {"K": 5, "latents": "random", "seed": 1, "layernorm": True}, "grouped"),
]


def _inst(n_c, L, s_c, d, lam, kw):
    kw = dict(kw)
    if kw.get("freqs") == "zipf":
        kw["freqs"] = T.zipf_freqs(s_c)
    return T.FCInstance(n_c, L, s_c, d, lam, **kw)


def _ends(rb):
    with mpmath.workdps(50):
        return _mpf(R.endpoints(rb.lower)[0]), _mpf(R.endpoints(rb.upper)[1])


@pytest.mark.parametrize("n_c,L,s_c,d,lam,kw,path,incidence",
                         [(*c, "dense") for c in SMALL] + [(*c, "columns") for c in SMALL if c[-1] == "grouped"])
def test_structured_recipe_equals_the_full_enumeration(n_c, L, s_c, d, lam, kw, path, incidence, monkeypatch):
    if incidence == "columns":  # the grouped path's other gradient accumulation (chosen by its cost model)
        monkeypatch.setattr(RF, "FC_SECONDS_DENSE_INCIDENCE", (1.0, 1.0))
    inst = _inst(n_c, L, s_c, d, lam, kw)
    ref = R._feature_collapse_enumerated(inst.to_dict())
    new = R.feature_collapse_from_instance(inst.to_dict())
    assert new.details["path"].startswith(path)
    assert new.details["float_check"] == "agrees"
    lo0, hi0 = _ends(ref)
    lo1, hi1 = _ends(new)
    with mpmath.workdps(50):
        # the feasible value CE + reg is the same number computed two ways (to the balls' round-off)
        assert abs(hi1 - hi0) <= 1e-13 * abs(hi0)
        if not inst.layernorm:
            # the same nuclear-kkt bound (same gradient, same spectral norm): equal lower ends
            assert abs(lo1 - lo0) <= 1e-13 * abs(hi0) + 1e-15
        assert lo1 <= hi0 and lo0 <= hi1  # the brackets overlap
        w0, w1 = hi0 - lo0, hi1 - lo1
        floor = mpmath.mpf(1e-15) * abs(hi0)
        assert max(w0, w1) <= 10 * max(min(w0, w1), floor)
    if path == "grouped" and kw.get("seed") == 3:
        assert new.details["class_types"] < inst.K  # duplicated latents: types with multiplicity


def test_structured_recipe_groups_words_and_sentences():
    """Type I (uniform): one cell per concept (L positions x 3 cells evaluated); Zipf (type III): one cell per word;
    random latents: one type per distinct latent, s_c^L sentence groups per type."""
    import numpy as np

    inst = T.FCInstance(3, 4, 3, 4, 0.05)
    rb = R.feature_collapse_from_instance(inst.to_dict())
    assert rb.details["cells"] == 3 and rb.details["sentence_groups"] == 4 * 3
    inst = T.FCInstance(3, 2, 3, 4, 0.05, freqs=T.zipf_freqs(3))
    rb = R.feature_collapse_from_instance(inst.to_dict())
    assert rb.details["cells"] == 9
    inst = T.FCInstance(3, 2, 2, 4, 0.05, K=5, latents="random", seed=1, freqs=(0.7, 0.3))
    rb = R.feature_collapse_from_instance(inst.to_dict())
    distinct = len(np.unique(inst.latent_vars, axis=0))  # classes with the same latent form one type
    assert distinct < inst.K and rb.details["class_types"] == distinct
    assert rb.details["sentence_groups"] == distinct * 2 ** 2  # type III: one cell per word, every sentence a group


def test_structured_recipe_rejects_a_wrong_factorisation(monkeypatch):
    """The float enumeration check catches a structural error: a grouped-path instance forced through the product
    formula (which assumes every latent tuple equally often) is NotCertified, not a wrong bracket."""
    inst = T.FCInstance(3, 2, 2, 4, 0.05, K=5, latents="random", seed=1)
    orig = R._fc_structure

    def forced(inst_, W, U):
        st = orig(inst_, W, U)
        import numpy as np

        z = inst_.latent_vars
        st.product, st.m = True, 1
        st.rowtype_lc = [[int(st.rowtype[np.flatnonzero(z[:, l] == c)[0], l]) if np.any(z[:, l] == c) else 0
                          for c in range(inst_.n_c)] for l in range(inst_.L)]
        return st

    monkeypatch.setattr(RF, "_fc_structure", forced)
    with pytest.raises(R.NotCertified, match="float enumeration"):
        R.feature_collapse_from_instance(inst.to_dict())


def test_structured_recipe_refuses_beyond_its_budget(monkeypatch):
    monkeypatch.setattr(RF, "FC_MAX_GROUPED_SECONDS", 1e-6)
    inst = T.FCInstance(3, 2, 2, 4, 0.05, K=5, latents="random", seed=1)
    # latents (1,1), (2,2), (0,0), (2,2), (0,0): 3 types; type I (uniform) has one cell per concept, 1 group per type
    with pytest.raises(R.Unsupported, match="3 class types x 3 sentence groups = 9 softmax entries"):
        R.feature_collapse_from_instance(inst.to_dict())


def test_underestimated_spectral_norm_is_rejected():
    """||G||_2^2 <= s is proven only for s above the true top eigenvalue: a guess 1e-4 below it is NotCertified (no
    tried s reaches it); the true guess gives an s above numpy's top eigenvalue."""
    import numpy as np
    from flint import arb

    rng = np.random.default_rng(0)
    Gm = rng.standard_normal((7, 4))
    Gram = Gm.T @ Gm
    top = float(np.linalg.eigvalsh(Gram)[-1])
    with R._Precision(128):
        Gb = [[arb(float(x)) for x in row] for row in Gram]
        s = R._fc_gram_upper(Gb, top)
        assert R.lower_float(s) >= top
        with pytest.raises(R.NotCertified):
            R._fc_gram_upper(Gb, top * (1 - 1e-4))


def test_infeasible_perturbed_layernorm_dual_point_is_repaired_or_rejected():
    """LayerNorm dual: nu lowered by 1e-3 makes diag(nu) - A indefinite; the LDL^T rejects it at shift 0, and the
    verified lambda_min lower bound is below the true one (so the shift repairs the point)."""
    import numpy as np
    from flint import arb

    rng = np.random.default_rng(1)
    Gm = rng.standard_normal((6, 4))
    A = Gm.T @ Gm
    nu = np.diag(A) + np.abs(A - np.diag(np.diag(A))).sum(axis=1)  # diagonally dominant: feasible
    nu = nu - 1e-3 - (np.linalg.eigvalsh(np.diag(nu) - A)[0])  # lambda_min(diag(nu) - A) = -1e-3 exactly-ish
    M = np.diag(nu) - A
    lmin = float(np.linalg.eigvalsh(M)[0])
    assert lmin < 0
    with R._Precision(128):
        Mb = [[arb(float(M[i, j])) for j in range(4)] for i in range(4)]
        assert not R.ldl_positive_definite(Mb)
        low = R._fc_lambda_min_lower(Mb, lmin)
        assert R.upper_float(low) <= lmin


@pytest.mark.parametrize("n_c,L,s_c,d,lam", [(3, 4, 3, 4, 0.05), (2, 6, 2, 3, 0.05), (3, 3, 3, 4, 1e-3),
                                              (2, 8, 1, 3, 0.02)])
def test_large_theorem1_bracket_contains_the_50_digit_optimum(n_c, L, s_c, d, lam):
    """Beyond the enumeration's limit (K x sentences x L = 2.1e6 for the first): the structured bracket holds
    Theorem 1's optimum (50-digit mpmath) and is at most 1e-8 wide relative."""
    inst = T.FCInstance(n_c, L, s_c, d, lam)
    assert inst.K * inst.n_sentences * L > R.FC_MAX_TERMS or L == 3
    lo, hi, rb = _bracket(inst)
    f = mp_theorem1(n_c, L, s_c, lam)
    with mpmath.workdps(50):
        assert lo <= f <= hi
        assert hi - lo <= 1e-8 * f


def test_large_layernorm_bracket_contains_the_50_digit_optimum():
    inst = T.FCInstance(3, 4, 3, 4, 0.05, layernorm=True, freqs=(0.5, 0.3, 0.2))
    lo, hi, rb = _bracket(inst)
    f = mp_theorem3(3, 4, 4, 0.05)
    with mpmath.workdps(50):
        assert lo <= f <= hi
        assert hi - lo <= 1e-8 * f
    assert "sdp-dual" in rb.method


def _float_bracket(rep):
    cert = rep["certificate"]
    return cert["lower_bound"], cert["upper"]


@pytest.mark.slow
@pytest.mark.parametrize("n_c,L,s_c,d,lam,kw", [(3, 4, 3, 4, 0.05, {}), (2, 6, 2, 3, 0.05, {}),
                                                 (3, 4, 3, 4, 0.05, {"freqs": "zipf"}),
                                                 (3, 4, 3, 4, 0.05, {"layernorm": True, "freqs": (0.5, 0.3, 0.2)}),
                                                 (3, 5, 2, 3, 0.01, {"freqs": (0.7, 0.3)})])
def test_large_bracket_contains_the_float_certified_optimum(n_c, L, s_c, d, lam, kw):
    inst = _inst(n_c, L, s_c, d, lam, kw)
    rep = C.check_instance(inst, n_starts=1).to_dict()
    flo, fup = _float_bracket(rep)
    lo, hi, rb = _bracket(inst)
    with mpmath.workdps(50):
        assert lo <= mpmath.mpf(fup) and mpmath.mpf(flo) <= hi  # the float certified interval meets the bracket
        assert hi - lo <= 1e-8 * hi
    if kw.get("freqs") == "zipf":  # Theorem 2's 40-digit value (the conjecture's point) lies inside
        v = mpmath.mpf(T.predict(inst).objective)
        assert lo <= v * (1 + mpmath.mpf(1e-15)) and v * (1 - mpmath.mpf(1e-15)) <= hi


def test_false_claim_is_refuted_beyond_the_enumeration_limit():
    """n_c = 2, L = 6, s_c = 2: K x sentences x L = 1.6e6 (the old recipe answered `unsupported`)."""
    inst = T.FCInstance(2, 6, 2, 3, 0.05)
    assert inst.K * inst.n_sentences * inst.L > R.FC_MAX_TERMS
    out = PR.apply(C.check_instance(inst, n_starts=1).to_dict())
    val = next(c for c in out["claims"] if c["id"].startswith("optimal-value"))
    assert val["verdict"] == "VERIFIED" and val["rigorous"] is True and out["rigorous"] is True
    bad = C.check_instance(inst, n_starts=1, predict=lambda i: _scaled(T.predict(i), 1 + 1e-5)).to_dict()
    out = PR.apply(bad)
    val = next(c for c in out["claims"] if c["id"].startswith("optimal-value"))
    assert val["verdict"] == "REFUTED" and out["verdict"] == "REFUTED"
    assert "rigorous" in (out["certificate"] or {}) and out["certificate"]["rigorous"].get("lower")


@pytest.mark.slow
def test_false_claim_is_refuted_on_the_large_zipf_instance():
    inst = T.FCInstance(3, 4, 3, 4, 0.05, freqs=T.zipf_freqs(3))
    bad = C.check_instance(inst, n_starts=1, predict=lambda i: _scaled(T.predict(i), 1 - 1e-5)).to_dict()
    out = PR.apply(bad)
    val = next(c for c in out["claims"] if c["id"].startswith("optimal-value"))
    assert val["verdict"] == "REFUTED" and out["verdict"] == "REFUTED"
