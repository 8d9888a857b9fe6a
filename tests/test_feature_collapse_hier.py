"""Two-level hierarchical feature collapse: model, relaxation bound, claims, CLI (issue 23)."""

import json
import math

import numpy as np
import pytest

from proofs_check.claims import feature_collapse_hier as C
from proofs_check.cli import main
from proofs_check.core import RunContext, Verdict
from solvers import feature_collapse_hier as SH
from theory import feature_collapse as T
from theory._validate import InputError
from theory.feature_collapse_hier import HierInstance, chunk_words, constructed_minimiser, level2_instance

SMALL = HierInstance(n_m=2, n_c=2, s_c=2, L1=2, L2=2, d1=3, d2=2, lam=0.1)
CTX = RunContext()


def test_gradient_matches_finite_differences():
    P = SH.HierProblem(SMALL)
    rng = np.random.default_rng(0)
    x = rng.normal(size=sum(P.sizes()))
    e = rng.normal(size=x.size)
    fd = (P.fun(x + 1e-6 * e)[0] - P.fun(x - 1e-6 * e)[0]) / 2e-6
    assert float(P.fun(x)[1] @ e) == pytest.approx(fd, rel=1e-6, abs=1e-9)


def test_exact_risk_matches_a_direct_enumeration():
    """Scores recomputed sentence by sentence from the tree (independent of the chunk indexing)."""
    import itertools

    h = SMALL
    P = SH.HierProblem(h)
    rng = np.random.default_rng(1)
    W, A, U = rng.normal(size=(h.n_w, h.d1)), rng.normal(size=(h.d2, h.L1 * h.d1)), rng.normal(size=(h.K * h.L2, h.d2))

    def ln(v):
        v = v - v.mean()
        return math.sqrt(v.size) * v / np.linalg.norm(v)

    words_of_meta = [[(m * h.n_c + c) * h.s_c + b for c in range(h.n_c) for b in range(h.s_c)] for m in range(h.n_m)]
    total = 0.0
    lat = list(itertools.product(range(h.n_m), repeat=h.L2))
    for k, z in enumerate(lat):
        chunks = [list(itertools.product(words_of_meta[m], repeat=h.L1)) for m in z]
        for sent in itertools.product(*chunks):
            q = [ln(A @ np.concatenate([ln(W[w]) for w in ch])) for ch in sent]
            sc = np.array([sum(U[j * h.L2 + i] @ q[i] for i in range(h.L2)) for j in range(h.K)])
            p = 1.0 / (h.K * np.prod([len(c) for c in chunks]))
            total += p * (np.log(np.exp(sc - sc.max()).sum()) + sc.max() - sc[k])
    total += 0.5 * h.lam * float(np.sum(U * U))
    assert P.objective(W, A, U, grad=False) == pytest.approx(total, rel=1e-12)


def test_relaxation_bound_below_random_points_and_attained_by_the_construction():
    P = SH.HierProblem(SMALL)
    pred = T.type2_prediction(level2_instance(SMALL))
    W, A, U = constructed_minimiser(SMALL, pred.b)
    _, _, Q, _ = P.chunk_features(W, A)
    rc = SH.relaxation_certificate(P, Q, U)
    assert P.objective(W, A, U, grad=False) - rc["lower_bound"] <= 1e-10
    rng = np.random.default_rng(2)
    for _ in range(20):
        x = rng.normal(size=sum(P.sizes()))
        assert rc["lower_bound"] <= P.fun(x)[0] + 1e-12


def test_chunks_enumerate_each_meta_concept():
    cw = chunk_words(SMALL)
    assert cw.shape == (2 * 16, 2) and len({tuple(r) for r in cw}) == 32
    assert np.all(cw[:16] < 4) and np.all(cw[16:] >= 4)  # meta 0 owns words 0..3


def test_claim_layer1_refuted_and_corrected_verified():
    r = C.make_hier_collapse_claim().run(CTX)
    assert r.verdict == Verdict.REFUTED
    v = {c.name.split(": ")[-1]: c for c in r.checks}
    assert v["layer-2-collapse"].verdict == Verdict.VERIFIED and v["layer-1-collapse"].verdict == Verdict.REFUTED
    assert abs(v["layer-1-collapse"].evidence["witness_value"] - v["layer-1-collapse"].evidence["constructed_value"]) \
        < 1e-12
    assert C.make_hier_collapse_claim(layer1_forced=False).run(CTX).verdict == Verdict.VERIFIED


def test_claim_false_layer2_geometry_refuted():
    r = C.make_hier_collapse_claim(layer2_cosine=0.0, layer1_forced=False).run(CTX)
    assert r.verdict == Verdict.REFUTED
    assert any(c.name.endswith("layer-2-collapse") and c.verdict == Verdict.REFUTED for c in r.checks)


def test_lbfgs_best_point_not_below_the_bound():
    rep = C.check_hier(SMALL, n_starts=2, maxiter=300)
    lb = rep.certificate["lower_bound"]
    assert rep.routes["lbfgs"]["value"] >= lb - 1e-12
    assert rep.geometry["layer2_within_meta_spread"] is not None


def test_default_instance_is_the_performance_one():
    h = HierInstance()
    assert (h.n_m, h.n_c, h.L, h.L2) == (3, 3, 4, 2)


def test_bad_hier_input():
    with pytest.raises(InputError, match="lambda"):
        HierInstance(lam=0.0)
    with pytest.raises(InputError, match="too large"):
        HierInstance(n_m=4, n_c=4, s_c=4, L1=2, L2=3)


def test_cli_hier_default_certificate_only(capsys):
    assert main(["solve", "feature-collapse-hier", "--levels", "2", "--starts", "0", "--json"]) == 1  # REFUTED: exit 1
    d = json.loads(capsys.readouterr().out)
    ids = {c["id"]: c["verdict"] for c in d["claims"]}
    assert ids == {"optimal-value": "VERIFIED", "layer-2-collapse": "VERIFIED", "layer-1-collapse": "REFUTED"}
    assert d["certificate"]["gap"] <= 1e-9
    for bad in (["--levels", "3"], ["--length", "5"], ["--dims", "4"]):
        assert main(["solve", "feature-collapse-hier"] + bad) == 2
        assert capsys.readouterr().err.strip()
