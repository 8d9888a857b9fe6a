"""Dynamics curves of ``ncproofs solve ntk`` (report key ``"curves"``, drawn by ``--plot``): the values
along the integration's grid, checked against the flow's own laws (gradient flow: the loss never
increases; the scatter statement), against numbers computed here from the initial state, and against
the final-state geometry of the report (a separate code path)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from proofs_check.claims import ntk as cl
from proofs_check.cli import main
from proofs_check.core import tolerance
from solvers import ntk as sv
from theory import ntk as th

REF = th.NTKInstance(3, 4, (1.0, 0.6, 0.2), 1.0)
NAMES = ("loss", "residual ||R||_F", "scatter tr(D D^T)", "ETF distance of class means")
#: DOP853 runs at rtol 1e-11 (solvers.ntk.RTOL): dense-output values along the run carry relative errors of
#: that order, so an "increase" of the loss below 1e-9 of its initial value is not resolved
LOSS_ROUNDOFF = 1e-9


def _report(**kw):
    return cl.check_instance(REF, **kw).to_dict()


@pytest.fixture(scope="module")
def random_out():
    return _report(init="random", init_scale=1e-3, T=30.0, seed=2)


@pytest.fixture(scope="module")
def ezero_out():
    return _report(init="e-zero", init_scale=0.3, T=20.0, seed=1, mean_weight=0.3)


def _y(out, name):
    return np.array([np.nan if v is None else v for v in out["curves"][name]["y"]], dtype=float)


def _x(out, name="loss"):
    return np.array(out["curves"][name]["x"], dtype=float)


@pytest.mark.parametrize("which", ["random_out", "ezero_out"])
def test_curves_shape_and_time_axis(which, request):
    out = request.getfixturevalue(which)
    assert set(out["curves"]) == set(NAMES)
    x = _x(out)
    assert 2 <= x.size <= 500
    assert np.all(np.diff(x) > 0), "x must be strictly increasing"
    assert x[0] == 0.0 and x[-1] == pytest.approx(out["routes"]["feature_flow"]["t_reached"], rel=1e-15)
    for name in NAMES:
        c = out["curves"][name]
        assert c["x"] == out["curves"]["loss"]["x"] and len(c["y"]) == x.size
        assert all(v is None or math.isfinite(v) for v in c["y"])
    json.dumps(out, allow_nan=False)


@pytest.mark.parametrize("which", ["random_out", "ezero_out"])
def test_loss_curve_is_gradient_flow_and_matches_the_report(which, request):
    out = request.getfixturevalue(which)
    loss = _y(out, "loss")
    assert np.all(np.isfinite(loss))
    inc = float(np.max(np.diff(loss)))
    assert inc <= LOSS_ROUNDOFF * loss[0], f"loss increased by {inc:.3g} along a gradient flow"
    assert loss[-1] < 1e-3 * loss[0]  # the run fits the targets: the curve is not flat
    assert loss[0] == out["phases"]["loss_initial"] and loss[-1] == out["phases"]["loss_final"]
    assert loss[-1] == out["solution"]["value"]
    # the residual curve is the same residual: loss = (s/2) ||R||_F^2 at every time
    res = _y(out, "residual ||R||_F")
    assert np.allclose(loss, 0.5 * REF.s * res ** 2, rtol=1e-12, atol=1e-300)


def test_loss_curve_starts_at_the_initial_state():
    """Initial loss recomputed here from the seeded initialisation (not from the run)."""
    out = _report(init="random", init_scale=0.2, T=5.0, seed=7)
    st = sv.init_random(REF, REF.classes + 1, 0.2, 7)
    Y = np.repeat(np.eye(REF.classes), REF.per_class, axis=1)
    R = st.W @ st.H + st.b[:, None] - Y
    assert _y(out, "loss")[0] == pytest.approx(0.5 * REF.s * float(np.sum(R * R)), rel=1e-14)
    assert _y(out, "residual ||R||_F")[0] == pytest.approx(float(np.linalg.norm(R)), rel=1e-14)
    D = st.H - np.repeat(st.H.reshape(-1, REF.classes, REF.per_class).mean(axis=2), REF.per_class, axis=1)
    assert _y(out, "scatter tr(D D^T)")[0] == pytest.approx(float(np.sum(D * D)), rel=1e-14)


@pytest.mark.parametrize("which", ["random_out", "ezero_out"])
def test_scatter_curve_obeys_the_monotonicity_statement(which, request):
    """tr(D D^T) never increases (statement ntk-scatter), with the statement's own tolerance."""
    out = request.getfixturevalue(which)
    sc = _y(out, "scatter tr(D D^T)")
    claim = next(c for c in out["claims"] if c["id"] == "ntk-scatter")
    assert claim["verdict"] == "VERIFIED"
    floor = claim["evidence"]["checks"][0]["evidence"]["rounding_floor"]
    tol = tolerance(sc[0], rtol=cl.SCATTER_TOL, atol=floor)
    assert float(np.max(np.diff(sc))) <= tol
    assert sc[0] == out["phases"]["scatter_initial"] and sc[-1] == out["phases"]["scatter_final"]


@pytest.mark.parametrize("which", ["random_out", "ezero_out"])
def test_etf_distance_ends_at_the_reported_geometry(which, request):
    """Last point against theory.geometry.classify_gram on the final state (a separate computation)."""
    out = request.getfixturevalue(which)
    d = _y(out, "ETF distance of class means")
    assert d[-1] == pytest.approx(out["geometry"]["distance_etf"], abs=1e-12)
    assert np.all((d[np.isfinite(d)] >= 0) & (d[np.isfinite(d)] <= 2.0))


def test_etf_distance_is_scale_free_and_null_at_zero_means():
    rng = np.random.default_rng(0)
    M = rng.standard_normal((1, 5, 3))
    base = sv._etf_distances(M)[0]
    J = np.eye(3) - 1 / 3
    G = M[0].T @ M[0]
    assert base == pytest.approx(np.linalg.norm(G / np.linalg.norm(G) - J / np.linalg.norm(J)), rel=1e-13)
    tiny = sv._etf_distances(np.stack([M[0] * 1e-150, np.zeros((5, 3)), M[0] * 1e150]))
    assert tiny[0] == pytest.approx(base, rel=1e-13) and tiny[2] == pytest.approx(base, rel=1e-13)
    assert math.isnan(tiny[1])


def test_flow_curves_thin_dedupe_and_null():
    t = np.linspace(0.0, 2.0, 1201)
    series = {k: np.exp(-t) for k in ("loss", "residual_norm", "scatter", "etf_distance")}
    series["etf_distance"] = series["etf_distance"].copy()
    series["etf_distance"][0] = np.nan
    series["scatter"] = series["scatter"].copy()
    series["scatter"][-1] = np.inf
    c = sv.flow_curves(t, series)
    x = np.array(c["loss"]["x"])
    assert x.size <= sv.MAX_CURVE_POINTS and x[0] == 0.0 and x[-1] == 2.0 and np.all(np.diff(x) > 0)
    assert c["ETF distance of class means"]["y"][0] is None and c["scatter tr(D D^T)"]["y"][-1] is None
    assert c["loss"]["y"] == pytest.approx(np.exp(-x).tolist(), rel=1e-15)
    json.dumps(c, allow_nan=False)
    # a run stopped at t = 0: every grid time is 0; one point is kept
    z = sv.flow_curves(np.zeros(401), {k: np.ones(401) for k in series})
    assert z["loss"]["x"] == [0.0] and z["loss"]["y"] == [1.0]


def test_curves_do_not_change_verdicts(monkeypatch):
    kw = dict(init="random", init_scale=1e-3, T=20.0, seed=4)
    with_curves = _report(**kw)
    monkeypatch.setattr(sv, "flow_curves", lambda *a, **k: {})
    without = _report(**kw)
    assert without["verdict"] == with_curves["verdict"] and without["reason"] == with_curves["reason"]
    assert [(c["id"], c["verdict"]) for c in without["claims"]] == [(c["id"], c["verdict"]) for c in with_curves["claims"]]


def _dynamics_axis(fig):
    axes = [ax for ax in fig.axes if ax.get_title() == "dynamics"]
    assert len(axes) == 1
    return axes[0]


def test_cli_plot_png_draws_the_curves(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib", reason="matplotlib (optional extra) is not installed")
    from proofs_check import plots

    figs = []
    real = plots.build_figure

    def spy(out, **kw):
        fig = real(out, **kw)
        figs.append((out, fig))
        return fig

    monkeypatch.setattr(plots, "build_figure", spy)
    path = tmp_path / "f.png"
    rc = main(["solve", "ntk", "--time", "20", "--plot", str(path), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(figs) == 1
    ax = _dynamics_axis(figs[0][1])
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert set(lines) == set(NAMES)
    for name in NAMES:
        xd, yd = lines[name].get_data()
        assert np.array_equal(np.asarray(xd, float), _x(out, name))
        assert np.array_equal(np.asarray(yd, float), _y(out, name), equal_nan=True)
    assert ax.get_yscale() == "log"  # every series is positive
