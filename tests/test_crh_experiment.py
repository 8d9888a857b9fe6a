"""The MLP experiment, gradients, exact critical points, reparametrisation, measured claims, CLI, torch."""

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from proofs_check.claims import crh as C
from proofs_check.cli import main
from proofs_check.core import RunContext, Verdict
from solvers import crh as S
from theory import crh as T

CTX = RunContext()


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_gradient_matches_finite_differences(activation):
    cfg = T.CRHExperiment(n_samples=20, widths=(3, 5, 4, 2), task_rank=2, steps=2, n_records=1, activation=activation)
    X, Y, W0, _ = S.make_task(cfg)
    rng = np.random.default_rng(0)
    th = S.pack(W0)
    f0, g = S.objective(th, X, Y, cfg.widths, 0.03, activation)
    for _ in range(5):
        v = rng.standard_normal(th.size)
        h = 1e-6
        fd = (S.objective(th + h * v, X, Y, cfg.widths, 0.03, activation)[0] -
              S.objective(th - h * v, X, Y, cfg.widths, 0.03, activation)[0]) / (2 * h)
        assert fd == pytest.approx(g @ v, rel=1e-6, abs=1e-9)


def test_per_sample_gradients_match_chain_rule():
    # g_b of layer l is -dl/dz_l: compare with a finite difference on one sample's loss
    cfg = T.CRHExperiment(n_samples=4, batch_size=2, widths=(3, 4, 2), task_rank=1, steps=2, n_records=1)
    X, Y, Ws, _ = S.make_task(cfg)
    hs, gbs, _ = S.forward_backward(Ws, X, Y)
    x, y = X[:1], Y[:1]
    z1 = x @ Ws[0].T
    e = np.array([[0.0, 1.0, 0.0, 0.0]]) * 1e-6
    loss = lambda z: 0.5 * np.sum((np.tanh(z) @ Ws[1].T - y) ** 2)  # noqa: E731
    fd = (loss(z1 + e) - loss(z1 - e)) / 2e-6
    assert -fd == pytest.approx(gbs[0][0, 1], rel=1e-6)


def test_sgd_matches_unvectorised_reference():
    # the vectorised run (two weight decays at once) equals a plain per-run loop
    cfg = T.CRHExperiment(weight_decays=(0.0, 0.05), steps=30, n_samples=16, batch_size=4,
                          widths=(3, 4, 2), task_rank=1, n_records=1)
    res = S.run_experiment(cfg)
    X, Y, W0, rng = S.make_task(cfg)
    perms = []
    for t in range(cfg.steps):
        if t % 4 == 0:
            perms.append(rng.permutation(16))
    for r, gam in enumerate(cfg.weight_decays):
        Ws = [W.copy() for W in W0]
        for t in range(cfg.steps):
            idx = perms[t // 4][(t % 4) * 4:(t % 4 + 1) * 4]
            hs, gbs, _ = S.forward_backward(Ws, X[idx], Y[idx])
            Ws = [W + cfg.lr * (gb.T @ h / 4 - gam * W) for W, h, gb in zip(Ws, hs, gbs)]
        for l in range(2):
            assert np.allclose(res.W_final[r][l], Ws[l], atol=1e-12)


def test_critical_point_stationarity():
    sol = C._critical(C.CRIT_QUICK, C.CRIT_GAMMA)  # shared with the stationarity claim (cached)
    assert sol.diagnostics["grad_max"] < C.CRIT_GRAD_ACCEPT
    X, Y, _, _ = S.make_task(C.CRIT_QUICK)
    Ws = [sol.variables[f"W{l}"] for l in range(3)]
    hs, gbs, _ = S.forward_backward(Ws, X, Y)
    for l, W in enumerate(Ws):
        Sx = gbs[l].T @ hs[l] / X.shape[0]
        assert np.max(np.abs(Sx - C.CRIT_GAMMA * W)) < 1e-6
        hb = hs[l] @ W.T
        assert np.max(np.abs(gbs[l].T @ hb / X.shape[0] - C.CRIT_GAMMA * W @ W.T)) < 1e-6


def test_stationarity_claim_and_false_version():
    r = C.stationarity_claim().run(CTX)
    assert r.verdict == Verdict.VERIFIED, r.reason
    # the numeric evidence comes from finite differences, not from the gradient L-BFGS used
    fd = [c for c in r.checks if c.name.startswith("fd-stationarity")]
    assert len(fd) == 3 and all(c.verdict == Verdict.VERIFIED and c.independent for c in fd)
    false = C.stationarity_claim(predict_b=lambda W, g: 2 * g * W @ W.T, claim_id="x").run(CTX)
    assert false.verdict == Verdict.REFUTED
    # both the sympy derivation and the finite-difference measurement see the false statement
    assert {c.name for c in false.checks if c.verdict == Verdict.REFUTED} >= {"fd-stationarity-z-b"}
    assert any(c.verdict == Verdict.REFUTED and c.name.startswith("symbolic") for c in false.checks)


def test_stationarity_false_side_a_refuted():
    false = C.stationarity_claim(predict_a=lambda W, g: g * W.T @ W + 1e-3 * np.eye(W.shape[1]), claim_id="x").run(CTX)
    assert false.verdict == Verdict.REFUTED


def test_finite_difference_gradients_match_backprop():
    cfg = T.CRHExperiment(n_samples=12, widths=(3, 5, 4, 2), task_rank=2, steps=2, n_records=1)
    X, Y, Ws, _ = S.make_task(cfg)
    Q = np.array([[1.0, 0.3], [-0.2, 0.9]])
    for T_ in (None, np.linalg.inv(Q)):
        _, gbs, _ = S.forward_backward(Ws, X, Y, loss_matrix=T_)
        for l in range(3):
            fd = S.per_sample_gradients_fd(Ws, X, Y, l, loss_matrix=T_)
            assert np.max(np.abs(fd - gbs[l])) < 1e-8
    th = S.pack(Ws)
    assert np.max(np.abs(S.objective_gradient_fd(th, X, Y, cfg.widths, 0.1) - S.objective(th, X, Y, cfg.widths, 0.1)[1])) < 1e-8


def test_reparametrisation_claims():
    r = C.reparam_claim().run(CTX)
    assert r.verdict == Verdict.VERIFIED, r.reason
    # the backpropagation route and the loss are restatements (equal by construction): consistency only
    flags = {c.name: c.independent for c in r.checks}
    assert flags == {"fd-alignment-unchanged": True, "backprop-alignment-unchanged": False, "loss-unchanged": False}
    assert C.nfa_changes_claim().run(CTX).verdict == Verdict.VERIFIED
    # false: the NFA statistic claimed invariant; last-layer GWA claimed invariant for non-orthogonal Q
    assert C.reparam_claim(("a-GWA", "b-GWA", "NFA"), claim_id="x").run(CTX).verdict == Verdict.REFUTED
    assert C.reparam_claim(("b-GWA",), layers="all", claim_id="y").run(CTX).verdict == Verdict.REFUTED
    assert C.reparam_claim(("a-GWA",), layers="all", claim_id="z").run(CTX).verdict == Verdict.REFUTED
    # false relation: RWA claimed invariant in every layer (Z_a of the last layer becomes W^T Q^T Q W)
    assert C.reparam_claim(("a-RWA",), layers="all", claim_id="w").run(CTX).verdict == Verdict.REFUTED


def test_reparametrisation_with_wrong_compensation_refuted():
    # l'(f') = l(Q^T f') is not the compensating loss: hidden gradients change, GWA changes
    r = C.reparam_claim(compensation=lambda Q: Q.T, claim_id="x").run(CTX)
    assert r.verdict == Verdict.REFUTED
    fd = next(c for c in r.checks if c.name == "fd-alignment-unchanged")
    assert fd.verdict == Verdict.REFUTED and fd.independent


# ---- the measured experiment claims (quick profile, one shared 2e4-step run, ~10 s) -------------------

def test_quick_experiment_shows_the_effect():
    res = C.experiment(C.EXP_QUICK)
    assert not any(res.diverged)
    lo, hi = (C.experiment_report(C.EXP_QUICK, r, 2) for r in (0, 1))
    a_lo = np.array([lo.alignments[r]["pearson"] for r in T.RELATION_NAMES])
    a_hi = np.array([hi.alignments[r]["pearson"] for r in T.RELATION_NAMES])
    # spec: last hidden layer at gamma = 1e-2 about 0.86-0.99; at gamma = 0 most below about 0.6
    assert np.all(a_hi > a_lo)
    assert a_hi.min() > 0.8
    assert np.sum(a_lo < 0.6) >= 4
    null = np.array([hi.null[r]["pearson"].mean for r in T.RELATION_NAMES])
    assert np.all(a_hi > null + 0.5)


def test_measured_claims_quick():
    for claim in (C.alignment_wd_claim(), C.rank_claim(), C.stationarity_sgd_claim()):
        r = claim.run(CTX)
        assert r.verdict == Verdict.VERIFIED, (claim.id, r.reason)


def test_false_measured_claims_refuted():
    # alignment claimed at gamma = 0 above the gamma = 1e-2 level; decreasing with weight decay; rank 2
    assert C.alignment_level_claim(0.0, 0.86, claim_id="a").run(CTX).verdict == Verdict.REFUTED
    assert C.alignment_wd_claim(direction="decreases", claim_id="b").run(CTX).verdict == Verdict.REFUTED
    assert C.rank_claim(rank=2, claim_id="c").run(CTX).verdict == Verdict.REFUTED
    assert C.rank_claim(gamma=0.0, claim_id="d").run(CTX).verdict != Verdict.VERIFIED  # no rank drop without decay


def test_stationarity_claim_at_gamma_zero_is_not_applicable():
    assert C.stationarity_sgd_claim(gamma=0.0, claim_id="s0").run(CTX).verdict == Verdict.NOT_APPLICABLE


@pytest.mark.slow
def test_full_spec_experiment():
    # spec: 2e5 steps; layer 3 at gamma = 1e-2: six alignments about 0.86-0.99, hidden weights rank 4
    ctx = RunContext("full")
    for claim in (C.alignment_wd_claim(), C.rank_claim(), C.stationarity_sgd_claim(),
                  C.alignment_level_claim(1e-2, 0.86, claim_id="lvl")):
        r = claim.run(ctx)
        assert r.verdict == Verdict.VERIFIED, (claim.id, r.reason)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_quick_effect_other_seeds(seed):
    cfg = T.CRHExperiment(weight_decays=(0.0, 1e-2), steps=20_000, n_records=50, seed=seed)
    assert C.alignment_wd_claim(cfg=cfg, claim_id="s").run(CTX).verdict == Verdict.VERIFIED


# ---- CLI -------------------------------------------------------------------------------------------

def test_cli_solve_json(capsys):
    rc = main(["solve", "crh", "--weight-decay", "0.05", "--steps", "400", "--records", "5", "--null-draws", "5",
               "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc in (0, 1)
    assert out["family"] == "crh" and out["instance"]["steps"] == 400
    assert [r["weight_decay"] for r in out["runs"]] == [0.0, 0.05]
    layer = out["runs"][1]["layers"][2]
    assert set(layer["alignments"]) == set(T.RELATION_NAMES)
    assert layer["stationarity_residual"] is not None and out["runs"][0]["layers"][2]["stationarity_residual"] is None
    assert out["verdict"] in ("VERIFIED", "INCONCLUSIVE", "REFUTED")
    # 400 steps are far from stationary: the theorem's hypothesis fails, so nothing is decided against it
    rank = next(c for c in out["claims"] if c["id"] == "rank-drop[0.05]")
    assert rank["verdict"] == "NOT_APPLICABLE" and "stationary weights" in rank["reason"]
    assert all(c["verdict"] != "REFUTED" for c in out["claims"])
    assert {c["id"] for c in out["claims"]} == {"alignment-vs-weight-decay[0.05]", "rank-drop[0.05]",
                                               "stationarity[0.05]"}
    assert layer["cauchy_schwarz_bound"] is not None and layer["magnitude_ratio"] >= layer["cauchy_schwarz_bound"]
    assert all(set(c) >= {"id", "verdict", "reason", "independent", "evidence"} for c in out["claims"])
    assert out["solution"]["steps_done"] == 400 and out["solution"]["budget_reached"] is False


def test_cli_solve_text(capsys):
    rc = main(["solve", "crh", "--weight-decay", "0.05", "--steps", "200", "--records", "3", "--null-draws", "3"])
    out = capsys.readouterr().out
    assert rc in (0, 1)
    assert "weight decay 0.05" in out and "a-RGA" in out and "verdict:" in out


@pytest.mark.parametrize("argv,msg", [
    (["solve", "crh", "--weight-decay", "-0.1", "--steps", "10"], "--weight-decay (weight decay) must be in [0, 100]"),
    (["solve", "crh", "--weight-decay", "1e300", "--steps", "10"], "--weight-decay (weight decay) must be in [0, 100]"),
    (["solve", "crh", "--weight-decay", "nan", "--steps", "10"], "finite"),
    (["solve", "crh", "--weight-decay", "inf", "--steps", "10"], "finite"),
    (["solve", "crh", "--weight-decay", "", "--steps", "10"], "--weight-decay"),
    (["solve", "crh", "--weight-decay", ",,", "--steps", "10"], "--weight-decay"),
    (["solve", "crh", "--lr", "0", "--steps", "10"], "--lr must be > 0"),
    (["solve", "crh", "--lr", "1e300", "--steps", "10"], "--lr must be > 0, in [1e-12, 100]"),
    (["solve", "crh", "--lr", "nan", "--steps", "10"], "--lr"),
    (["solve", "crh", "--steps", "1"], "--steps must be >= 2"),
    (["solve", "crh", "--steps", "-5"], "--steps must be >= 2"),
    (["solve", "crh", "--steps", "1000000000000"], "--steps must be >= 2 and <= 1e+09"),
    (["solve", "crh", "--steps", "500000000"], "estimated"),
    (["solve", "crh", "--steps", "10", "--null-draws", "1"], "--null-draws must be in [2, 100000]"),
    (["solve", "crh", "--steps", "10", "--null-draws", "100000000"], "--null-draws must be in [2, 100000]"),
    (["solve", "crh", "--steps", "10", "--records", "0"], "--records must be >= 1"),
    (["solve", "crh", "--steps", "10", "--seed", "-1"], "--seed"),
    (["solve", "crh", "--steps", "10", "--time-budget", "0"], "--time-budget (wall-clock safety limit) must be in (0, 1800]"),
    (["solve", "crh", "--steps", "10", "--time-budget", "1e9"], "--time-budget (wall-clock safety limit) must be in (0, 1800]"),
    (["solve", "crh", "--steps", "10", "--init-scale", "0"], "--init-scale must be in [0.001, 1e+06]"),
    (["solve", "crh", "--steps", "10", "--init-scale", "1e9"], "--init-scale must be in [0.001, 1e+06]"),
    (["solve", "crh", "--steps", "10", "--neuron-noise", "-1", "--noise-layer", "1"], "--neuron-noise must be in [0"),
    (["solve", "crh", "--steps", "10", "--neuron-noise", "0.3"], "--neuron-noise > 0 needs --noise-layer"),
    (["solve", "crh", "--steps", "10", "--neuron-noise", "0.3", "--noise-layer", "4"], "--noise-layer must be a hidden"),
    (["solve", "crh", "--steps", "10", "--neuron-noise", "0.3", "--noise-layer", "0"], "--noise-layer must be a hidden"),
    (["table", "crh", "--weight-decays", "0,-1", "--steps", "10"], "must be in [0, 100]"),
    (["table", "crh", "--weight-decays", "", "--steps", "10"], "--weight-decays"),
    (["table", "crh", "--steps", "900000000"], "estimated"),
])
def test_cli_bad_input(argv, msg, capsys):
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's own type errors (empty lists) exit 2 directly
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("ncproofs: error:") and msg in err and err.count("\n") == 1


def test_cli_safety_limit_reached_is_inconclusive_and_says_so(capsys):
    rc = main(["solve", "crh", "--weight-decay", "0.05", "--steps", "400000", "--records", "5", "--null-draws", "5",
               "--time-budget", "0.3", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["verdict"] == "INCONCLUSIVE"
    assert 0 < out["solution"]["steps_done"] < 400_000 and out["solution"]["budget_reached"] is True
    msg = "stopped by the wall-clock safety limit"
    assert all(c["verdict"] == "INCONCLUSIVE" and msg in c["reason"] for c in out["claims"])
    assert any(msg in d and "the work budget was not reached" in d for d in out["diagnostics"])


def test_check_instance_returns_solve_report():
    from proofs_check.core import SolveReport
    rep = C.check_instance(C.EXP_QUICK)  # the quick profile's cached run
    assert isinstance(rep, SolveReport)
    d = rep.to_dict()
    assert d["family"] == "crh" and len(d["runs"]) == 2 and d["runs"][1]["layers"][2]["alignments"] is not None
    v = {c["id"]: c["verdict"] for c in d["claims"]}
    assert v == {"alignment-vs-weight-decay[0.01]": "VERIFIED", "rank-drop[0.01]": "VERIFIED",
                 "stationarity[0.01]": "VERIFIED"}
    assert d["verdict"] == "VERIFIED"


def test_short_training_is_outside_the_theorem_not_a_witness():
    cfg = T.CRHExperiment(weight_decays=(0.0, 0.05), steps=300, n_records=3)
    for claim in (C.alignment_wd_claim(0.0, 0.05, direction="decreases", cfg=cfg, claim_id="a"),
                  C.rank_claim(rank=1, gamma=0.05, cfg=cfg, claim_id="b")):
        r = claim.run(CTX)
        assert r.verdict == Verdict.NOT_APPLICABLE and "stationary weights" in r.reason, (claim.id, r.reason)
    assert C.stationarity_sgd_claim(0.05, cfg=cfg, claim_id="d").run(CTX).verdict == Verdict.INCONCLUSIVE


def test_check_instance_refuses_over_budget_before_work():
    from theory._validate import InputError
    with pytest.raises(InputError, match=r"estimated work .* flop-equivalents \(limit 2\.4e\+11 flop-equivalents, the same on every machine"):
        C.check_instance(T.CRHExperiment(steps=10 ** 9, n_records=10))
    with pytest.raises(InputError, match="estimated memory"):
        S.experiment_budget(T.CRHExperiment(steps=2, n_records=1, n_samples=10 ** 7, widths=(4096, 4096, 4)), check=True)
    with pytest.raises(InputError, match="null_draws"):
        C.check_instance(T.CRHExperiment(steps=10, n_records=1), null_draws=1)
    with pytest.raises(InputError, match="baseline"):
        C.check_instance(T.CRHExperiment(weight_decays=(0.01,), steps=10, n_records=1), null_draws=2)


def test_run_experiment_stops_at_wall_clock_budget():
    cfg = T.CRHExperiment(weight_decays=(0.0, 0.01), steps=400_000, n_records=10)
    res = S.run_experiment(cfg, time_budget_s=0.2)
    assert res.budget_reached and 0 < res.steps_done < cfg.steps and res.n_recorded == 0
    assert res.layer(1, 2) is None and res.stationarity_residual(1, 2) is None
    r = C.rank_claim(cfg=cfg, claim_id="r", time_budget_s=0.2).run(CTX)
    assert r.verdict == Verdict.INCONCLUSIVE and "stopped by the wall-clock safety limit" in r.reason


def test_cli_table(capsys):
    rc = main(["table", "crh", "--weight-decays", "0,0.05", "--steps", "300", "--records", "3", "--null-draws", "4",
               "--format", "csv"])
    assert rc == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("weight_decay,layer,a-RGA")
    assert len(lines) == 1 + 2 * 4


def test_quick_preset_steps():
    from proofs_check.families.crh import _config
    import argparse
    ns = argparse.Namespace(steps=None, quick=True, lr=0.05, seed=0, records=None, time_budget=None)
    assert _config(ns, [0.0, 1e-2]).steps == 20_000
    assert _config(ns, [0.0, 1e-3]).steps == 200_000  # gamma * lr * steps >= 10, capped at the spec's 2e5


# ---- optional torch path ---------------------------------------------------------------------------

def test_torch_linear_recorder_matches_numpy():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    lin = torch.nn.Linear(5, 3, bias=True, dtype=torch.float64)
    x = torch.randn(40, 5, dtype=torch.float64)
    y = torch.randn(40, 3, dtype=torch.float64)
    with S.LinearRecorder(lin) as rec:
        for i in range(0, 40, 10):
            out = lin(x[i:i + 10])
            loss = 0.5 * ((out - y[i:i + 10]) ** 2).sum(dim=1).mean()
            loss.backward()
    W, b, h, g = rec.samples()
    Xn, Yn = x.numpy(), y.numpy()
    assert np.allclose(h, Xn)
    assert np.allclose(g, Yn - (Xn @ W.T + b), atol=1e-12)  # -dl/dh_b per sample
    rep = rec.report(null_draws=0)
    ref = S.alignment_report(W, Xn, Yn - (Xn @ W.T + b), bias=b, null_draws=0)
    for r in T.RELATION_NAMES:
        assert rep.alignments[r]["cosine"] == pytest.approx(ref.alignments[r]["cosine"], abs=1e-12)


def test_diverged_run_is_inconclusive_not_error():
    cfg = T.CRHExperiment(weight_decays=(0.0, 0.01), steps=300, lr=5.0, n_records=5, n_samples=64,
                          widths=(4, 8, 8, 2), task_rank=2)
    res = C.experiment(cfg)
    assert any(res.diverged)
    for claim in (C.alignment_wd_claim(cfg=cfg, claim_id="a"), C.rank_claim(cfg=cfg, claim_id="b"),
                  C.stationarity_sgd_claim(cfg=cfg, claim_id="c")):
        r = claim.run(CTX)
        # the theorem's stationarity hypothesis fails: not applicable, never VERIFIED or REFUTED
        assert r.verdict == Verdict.NOT_APPLICABLE, (claim.id, r.reason)
        assert "hypothesis fails" in r.reason and "diverged" in r.reason


@settings(max_examples=12, deadline=None)
@given(lr=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e-12, 100.0, 5.0, 1e-300])),
       gamma=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 100.0, 1e-300])))
def test_cli_any_lr_and_weight_decay_gives_a_verdict_or_one_line_refusal(lr, gamma):
    import contextlib
    import io
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            rc = main(["solve", "crh", f"--lr={lr!r}", f"--weight-decay={gamma!r}", "--steps", "6", "--records", "1",
                       "--null-draws", "2", "--json"])
        except SystemExit as e:  # argparse's own errors
            rc = e.code
    if rc == 2:
        assert err.getvalue().startswith("ncproofs: error:") and err.getvalue().count("\n") == 1
    else:
        assert rc in (0, 1) and "internal error" not in err.getvalue()
        d = json.loads(out.getvalue())
        assert d["verdict"] in ("VERIFIED", "INCONCLUSIVE", "REFUTED", "NOT_APPLICABLE")
        assert all(c["verdict"] != "ERROR" for c in d["claims"])


# ---- the batched forms of the SGD loop and checkpoints (solvers/crh.py) --------------------------------------

def test_stacked_forward_backward_is_bitwise_the_per_run_one():
    rng = np.random.default_rng(5)
    widths, R = (5, 7, 6, 3), 3
    Ws = [rng.standard_normal((R, o, i)) for i, o in zip(widths[:-1], widths[1:])]
    X, Y = rng.standard_normal((40, 5)), rng.standard_normal((40, 3))
    for act in ("tanh", "relu"):
        hs, gbs, loss = S.forward_backward(Ws, X, Y, act)
        for r in range(R):
            h1, g1, l1 = S.forward_backward([W[r] for W in Ws], X, Y, act)
            assert all(np.array_equal(a[r], b) for a, b in zip(hs, h1)), act
            assert all(np.array_equal(a[r], b) for a, b in zip(gbs, g1)), act
            assert loss[r] == l1, act


def test_normalised_rows_keep_zero_and_nan_rows_at_zero():
    X = np.array([[3.0, 4.0], [0.0, 0.0], [np.nan, 1.0]])
    U = S._normalise_rows(X)
    assert np.array_equal(U, np.array([[0.6, 0.8], [0.0, 0.0], [0.0, 0.0]]))
    assert np.array_equal(S._normalise_rows(X[:1]), np.array([[0.6, 0.8]]))


def test_chunked_step_outer_sum_is_the_sum_of_d_d_transposed():
    rng = np.random.default_rng(2)
    Ds = [rng.standard_normal((2, 4, 3)) for _ in range(5)]
    buf = np.empty((2, 4, S._DD_CHUNK * 3))
    for k, D in enumerate(Ds):
        buf[:, :, 3 * k:3 * (k + 1)] = D
    acc = {"DD": [np.ones((2, 4, 4))]}
    S._flush_dd(acc, [buf], [3], len(Ds))
    direct = np.ones((2, 4, 4)) + sum(np.matmul(D, D.transpose(0, 2, 1)) for D in Ds)
    assert np.allclose(acc["DD"][0], direct, rtol=1e-13, atol=1e-13)
    S._flush_dd(acc, [buf], [3], 0)  # nothing held: unchanged
    assert np.allclose(acc["DD"][0], direct, rtol=1e-13, atol=1e-13)
