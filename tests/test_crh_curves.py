"""Dynamics curves of ``ncproofs solve crh`` (report key ``"curves"``, drawn by ``--plot``): the
full-data training loss per weight decay along SGD and the mean alignment of the last hidden layer at
a few checkpoints. Checked against a plain numpy forward pass written here (initial and final weights),
against the public alignment API on the final weights, and for not perturbing training or verdicts."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from proofs_check.claims import crh as C
from proofs_check.cli import main
from solvers import crh as S
from theory import crh as T

CFG = T.CRHExperiment(weight_decays=(0.0, 1e-2), steps=3000, n_records=10, seed=1)


def _loss(Ws, X, Y, activation="tanh"):
    """Training loss mean_i ||f(x_i) - y_i||^2 / 2 of one run (written here, sample by sample)."""
    total = 0.0
    for x, y in zip(X, Y):
        h = x
        for l, W in enumerate(Ws):
            h = W @ h
            if l < len(Ws) - 1:
                h = np.tanh(h) if activation == "tanh" else np.maximum(h, 0.0)
        total += 0.5 * float(np.sum((h - y) ** 2))
    return total / len(X)


def _no_nan(text):
    def bad(c):
        raise AssertionError(f"non-JSON number {c} in the output")
    return json.loads(text, parse_constant=bad)


@pytest.fixture(scope="module")
def out():
    return C.check_instance(CFG, null_draws=20).to_dict()


def test_curves_shape_axis_and_json(out):
    names = [f"loss, gamma={g:g}" for g in CFG.weight_decays] + \
        [f"mean alignment, layer {CFG.n_layers - 1}, gamma={g:g}" for g in CFG.weight_decays]
    assert list(out["curves"]) == names
    for name, c in out["curves"].items():
        x = np.array(c["x"])
        assert 2 <= x.size <= 500 and len(c["y"]) == x.size
        assert np.all(np.diff(x) > 0) and x[0] == 0 and x[-1] == CFG.steps
        assert all(v is None or math.isfinite(v) for v in c["y"])
    n_loss, n_align = S.curve_point_counts(CFG)
    assert len(out["curves"][names[0]]["x"]) == n_loss and len(out["curves"][names[-1]]["x"]) == n_align
    json.dumps(out, allow_nan=False)


def test_loss_curve_ends_match_the_report_and_an_independent_forward_pass(out):
    X, Y, W0, _ = S.make_task(CFG)
    res = C.experiment(CFG, None)
    first = _loss(W0, X, Y)
    for r, (g, row) in enumerate(zip(CFG.weight_decays, out["runs"])):
        y = out["curves"][f"loss, gamma={g:g}"]["y"]
        assert y[0] == pytest.approx(row["initial_loss"], rel=1e-12) and y[0] == pytest.approx(first, rel=1e-12)
        last = _loss(res.W_final[r], X, Y)
        assert y[-1] == pytest.approx(row["last_loss"], rel=1e-12) and y[-1] == pytest.approx(last, rel=1e-12)
        assert y[-1] < 0.1 * y[0]  # training fits: the curve is not flat
        # the reported final_loss is the average over the checkpoints of the second half: of the size of
        # the curve there (the checkpoints are other steps of the same run)
        half = [v for s, v in zip(out["curves"][f"loss, gamma={g:g}"]["x"], y) if s >= CFG.steps // 2]
        assert 0.5 * min(half) <= row["final_loss"] <= 2.0 * max(half)


def test_alignment_curve_ends_at_the_alignments_of_the_final_weights(out):
    """Last alignment point (after the last step) against solvers.crh.alignment_report on the final weights."""
    X, Y, _, _ = S.make_task(CFG)
    res = C.experiment(CFG, None)
    li = CFG.n_layers - 2
    for r, (g, row) in enumerate(zip(CFG.weight_decays, out["runs"])):
        ac = row["alignment_curves"]
        assert ac["layer"] == li + 1 and ac["steps"][-1] == CFG.steps and ac["steps"][0] == 0
        hs, gbs, _ = S.forward_backward(res.W_final[r], X, Y)
        rep = S.alignment_report(res.W_final[r][li], hs[li], gbs[li], mode="normalized", null_draws=0)
        for rel in T.RELATION_NAMES:
            assert ac["alignments"][rel][-1] == pytest.approx(rep.alignments[rel]["pearson"], abs=1e-12)
        mean = np.mean([rep.alignments[rel]["pearson"] for rel in T.RELATION_NAMES])
        assert out["curves"][f"mean alignment, layer {li + 1}, gamma={g:g}"]["y"][-1] == pytest.approx(mean, abs=1e-12)


def test_recording_changes_neither_training_nor_verdicts(out, monkeypatch):
    res = C.experiment(CFG, None)
    monkeypatch.setattr(S, "_record_dynamics", lambda *a, **k: None)
    bare = S.run_experiment(CFG)
    assert bare.dynamics.steps == [] and res.dynamics.steps
    for r in range(len(CFG.weight_decays)):
        assert bare.loss[r] == res.loss[r]
        assert all(np.array_equal(a, b) for a, b in zip(bare.W_final[r], res.W_final[r]))
    C.experiment.cache_clear()
    C.experiment_report.cache_clear()
    try:
        again = C.check_instance(CFG, null_draws=20).to_dict()
    finally:
        C.experiment.cache_clear()
        C.experiment_report.cache_clear()
    assert again["curves"] == {} and again["verdict"] == out["verdict"] and again["reason"] == out["reason"]
    assert [(c["id"], c["verdict"]) for c in again["claims"]] == [(c["id"], c["verdict"]) for c in out["claims"]]


def test_budget_stop_ends_the_curve_at_the_last_weights():
    cfg = T.CRHExperiment(weight_decays=(0.0, 1e-2), steps=2_000_000 // 20, n_records=10, seed=2)
    res = S.run_experiment(cfg, time_budget_s=0.3)
    assert res.budget_reached and 0 < res.steps_done < cfg.steps
    d = res.dynamics
    assert d.steps[0] == 0 and d.steps[-1] == res.steps_done and np.all(np.diff(d.steps) > 0)
    X, Y, _, _ = S.make_task(cfg)
    for r in range(2):
        assert d.loss_array()[-1, r] == pytest.approx(_loss(res.W_final[r], X, Y), rel=1e-12)


def test_diverged_run_gives_null_not_nan():
    cfg = T.CRHExperiment(weight_decays=(0.0, 1e-2), steps=200, n_records=5, lr=50.0, n_samples=64,
                          widths=(4, 8, 2), task_rank=2)
    rep = C.check_instance(cfg, null_draws=2).to_dict()
    assert any(r["diverged"] for r in rep["runs"])
    text = json.dumps(rep, allow_nan=False)
    ys = [v for c in rep["curves"].values() for v in c["y"]]
    assert None in ys and all(v is None or math.isfinite(v) for v in ys)
    _no_nan(text)


def test_cli_plot_svg_has_a_dynamics_panel(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="matplotlib (optional extra) is not installed")
    path = tmp_path / "f.svg"
    rc = main(["solve", "crh", "--steps", "2000", "--records", "10", "--null-draws", "10", "--plot", str(path),
               "--json"])
    out = _no_nan(capsys.readouterr().out)
    assert rc in (0, 1) and out["curves"]
    svg = path.read_text()
    assert svg.lstrip().startswith("<?xml") and "<!-- dynamics -->" in svg  # matplotlib's comment per text
    from proofs_check.plots import math_label

    for name in out["curves"]:
        assert f"<!-- {math_label(name)} -->" in svg  # legend entry, as mathtext (gamma -> $\\gamma$; issue 29)


def test_cli_plot_png_draws_the_curves(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib", reason="matplotlib (optional extra) is not installed")
    from proofs_check import plots

    figs = []
    real = plots.build_figure
    monkeypatch.setattr(plots, "build_figure", lambda o, **kw: figs.append(real(o, **kw)) or figs[-1])
    path = tmp_path / "f.png"
    main(["solve", "crh", "--steps", "2000", "--records", "10", "--null-draws", "10", "--plot", str(path), "--json"])
    out = _no_nan(capsys.readouterr().out)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and len(figs) == 1
    ax = [a for a in figs[0].axes if a.get_title() == "dynamics"]
    assert len(ax) == 1
    lines = {ln.get_label(): ln for ln in ax[0].get_lines()}
    assert set(lines) == set(out["curves"])
    for name, c in out["curves"].items():
        xd, yd = lines[name].get_data()
        assert np.array_equal(np.asarray(xd, float), np.array(c["x"], float))
        assert np.array_equal(np.asarray(yd, float), np.array([np.nan if v is None else v for v in c["y"]], float),
                              equal_nan=True)
