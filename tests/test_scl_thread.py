"""SCL thread statements, activations, the strict low-dimensional gap, the closed-form OF dual point and
certificate-first `solve scl`: true statements VERIFIED, every factory's false variant REFUTED."""

import json

import numpy as np
import pytest

from proofs_check.claims import scl as C
from proofs_check.claims import scl_thread as TH
from proofs_check.cli import main
from proofs_check.core import RunContext, Verdict
from solvers import scl as S
from theory import scl as T
from tests._reference import scl_eq2_without_j

CTX = RunContext("quick", 0)


def v(claim):
    return claim.run(CTX).verdict


def test_distances():
    assert v(TH.make_distances_claim()) is Verdict.VERIFIED
    assert v(TH.make_distances_claim(rescale=lambda k: k / (k - 1), claim_id="x")) is Verdict.REFUTED
    assert v(TH.make_distances_claim(etf_distance=lambda k, t: 2 * k / (t * (k + 1)), claim_id="x")) is Verdict.REFUTED


def test_eq1_eq2():
    assert v(TH.make_eq1_eq2_claim()) is Verdict.VERIFIED


    assert v(TH.make_eq1_eq2_claim(eq2=scl_eq2_without_j, claim_id="x")) is Verdict.REFUTED


def test_rank_as_written_refuted_corrected_verified():
    r = TH.make_rank_claim().run(CTX)
    assert r.verdict is Verdict.REFUTED and "rank 2" in r.reason
    corr = next(c for c in TH.CLAIMS if c.id == "scl.thread.rank-corrected")
    assert v(corr) is Verdict.VERIFIED
    # independent: the ETF features have rank k - 1, the OF rank k
    assert np.linalg.matrix_rank(T.etf_features((4, 4, 4), 3)) == 2
    assert np.linalg.matrix_rank(T.of_features((4, 4, 4), 4)) == 3


def test_graf_special_case():
    assert v(TH.make_graf_special_case_claim()) is Verdict.VERIFIED
    # a batching without C2 (classes never meet with two members of one of them) is refuted
    bad = lambda counts, b: [[0, 1], [2, 3], [0, 2], [1, 3]]
    assert v(TH.make_graf_special_case_claim(batching=bad, cases=[((2, 2), 3)], claim_id="x")) is Verdict.REFUTED


def test_binary_antipodal():
    assert v(TH.make_binary_antipodal_claim()) is Verdict.VERIFIED
    assert v(TH.make_binary_antipodal_claim(geometry="orthogonal-frame", cases=[((5, 2), 0.5)], claim_id="x")) \
        is Verdict.REFUTED
    wrong = lambda counts, tau: T.binary_antipodal_value(counts, tau) * (1 + 1e-5)
    assert v(TH.make_binary_antipodal_claim(value=wrong, cases=[((3, 1), 1.0)], claim_id="x")) is Verdict.REFUTED


def test_activations():
    assert v(TH.make_activation_claim()) is Verdict.REFUTED  # softplus does not attain the bound
    corr = next(c for c in TH.CLAIMS if c.id == "scl.activations.same-result-corrected")
    assert v(corr) is Verdict.VERIFIED
    for name, wrong in (("relu", "infimum"), ("sigmoid", "same"), ("gelu", "same"), ("leaky-relu", "infimum")):
        assert v(TH.make_activation_claim(prediction={name: wrong}, claim_id="x")) is Verdict.REFUTED, name
    # independent facts: softplus / sigmoid never reach 0, gelu / silu take negative values
    x = np.linspace(-30, 30, 2001)
    assert np.all(T.ACTIVATIONS["softplus"][0](x) > 0) and np.all(T.ACTIVATIONS["sigmoid"][0](x) > 0)
    assert T.ACTIVATIONS["gelu"][0](np.array([-1.0]))[0] < 0 and T.ACTIVATIONS["silu"][0](np.array([-1.0]))[0] < 0


def test_low_dim_gap_decided():
    r = C.make_lowdim_claim(strict=[((4, 4, 4), 0.5, 2), ((3, 2), 1.0, 1)], shared=[]).run(CTX)
    assert r.verdict is Verdict.VERIFIED, r.reason
    r = C.make_lowdim_claim(required_dim=lambda n: len(n) - 1, strict=[((4, 4, 4), 0.5, 2)], shared=[],
                            claim_id="x").run(CTX)
    assert r.verdict is Verdict.REFUTED, r.reason


@pytest.mark.parametrize("counts,tau,d", [((3, 3, 3), 0.5, 2), ((2, 2, 2, 2), 1.0, 3), ((3, 2), 1.0, 1),
                                         ((3, 3, 1, 1), 0.5, 2)])
def test_low_rank_gap_valid_at_random_low_rank_points(counts, tau, d):
    g = S.low_rank_gap(counts, tau, d)
    bound = T.theorem1_bound(counts, tau)
    y = T.labels_from_counts(counts)
    rng = np.random.default_rng(1)
    best = np.inf
    for _ in range(300):
        H = np.abs(rng.standard_normal((d, y.size))) ** rng.uniform(1, 6)
        H /= np.linalg.norm(H, axis=0)
        best = min(best, S.scl_loss(H, y, None, tau, grad=False))
    # a solver's best point at dimension d, too
    sol = S.solve_factored(T.SCLInstance(counts, tau, d, True), starts=3, seed=0)
    best = min(best, sol.value)
    assert best >= bound + g["delta"] - 1e-9


@pytest.mark.parametrize("counts,tau", [((3, 2, 2), 0.5), ((4, 1, 3), 1.0), ((2, 2), 0.2)])
def test_of_closed_form_certificate_matches_dense(counts, tau):
    y = T.labels_from_counts(counts)
    dense = S.gram_certificate(T.of_gram(counts), y, None, tau, nonneg=True, face="orthogonal-frame", counts=counts)
    cf = S.of_closed_form_certificate(counts, tau)
    assert cf.lower_bound == pytest.approx(dense.lower_bound, abs=1e-9)
    assert 2 * dense.sigma == pytest.approx(cf.sigma, rel=1e-9)
    assert np.max(np.abs(dense.nu_blocks - cf.nu_blocks)) < 1e-12
    assert cf.bounds(0.0)["gram_radius"] == 0.0


def test_certificate_first_no_solve_at_large_k():
    inst = T.SCLInstance((2,) * 300, 0.5, 301, True)
    rep = C.check_instance(inst, starts=6, seed=0, hops=20)
    assert rep.verdict is Verdict.VERIFIED, rep.reason
    out = rep.to_dict()
    assert "closed form certified" in out["solution"]["method"]
    assert any("confirmation solve skipped" in dgn for dgn in out["diagnostics"])


def test_certificate_first_confirmation_and_factored(capsys):
    rc = main(["solve", "scl", "--counts", "3,2,2", "--tau", "0.5", "--json"])
    out = json.loads(capsys.readouterr().out)
    ids = {c["id"]: c["verdict"] for c in out["claims"]}
    assert rc == 0 and ids["confirmation-solve"] == "VERIFIED" and out["verdict"] == "VERIFIED"
    rc = main(["solve", "scl", "--counts", "3,2,2", "--tau", "0.5", "--method", "factored", "--starts", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and "confirmation-solve" not in {c["id"] for c in out["claims"]} and out["verdict"] == "VERIFIED"


def test_activation_cli(capsys):
    rc = main(["solve", "scl", "--counts", "3,2,2", "--tau", "0.5", "--activation", "softplus", "--json"])
    out = json.loads(capsys.readouterr().out)
    ids = {c["id"]: c["verdict"] for c in out["claims"]}
    assert rc == 0 and ids["infimum-value"] == "VERIFIED" and ids["activation-bound-not-attained"] == "VERIFIED"
    assert ids["unique-minimiser"] == "NOT_APPLICABLE"
    rc = main(["solve", "scl", "--counts", "3,3", "--tau", "0.5", "--activation", "silu", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["instance"]["nonneg"] is False
    with pytest.raises(SystemExit) as e:
        main(["solve", "scl", "--counts", "3,3", "--tau", "0.5", "--activation", "tanh"])
    assert e.value.code == 2


@pytest.mark.slow
def test_factored_solve_same_value_under_a_cpu_hog():
    """Work budgets, not wall time: the same instance with --method factored gives the same value bit for bit with
    two busy-looping processes on the machine."""
    import subprocess
    import sys

    inst = T.SCLInstance((3, 3, 2), 0.5, 4, True)
    a = C.check_instance(inst, starts=3, seed=0, hops=5, method="factored").to_dict()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        b = C.check_instance(inst, starts=3, seed=0, hops=5, method="factored").to_dict()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert a["verdict"] == b["verdict"] and a["solution"]["value"] == b["solution"]["value"]
