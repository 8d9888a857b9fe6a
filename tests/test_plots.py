"""Figures: class-mean cosines next to the predicted target, colour scale fixed to [-1, 1]."""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np
import pytest

from proofs_check import plots
from proofs_check.commands import UsageError


def _out(cos, geometry="simplex-etf", **extra):
    out = {"family": "demo", "instance": {"k": len(cos)}, "predicted": {"value": 1.0, "geometry": geometry},
           "geometry": {"classification": "other", "class_mean_cosines": cos}, "verdict": "REFUTED"}
    out.update(extra)
    return out


@pytest.mark.parametrize("k", [2, 3, 4, 10])
def test_target_templates(k):
    etf = plots.target_cosines("simplex-etf", k)
    off = etf[~np.eye(k, dtype=bool)]
    assert np.all(np.diag(etf) == 1.0)
    assert np.allclose(off, -1.0 / (k - 1), rtol=0, atol=1e-15)  # spec/geometry.md: cosine -1/(k-1)
    assert np.array_equal(plots.target_cosines("orthogonal-frame", k), np.eye(k))
    assert plots.target_cosines("other", k) is None


def test_panels_use_the_explicit_prediction_and_mark_nulls():
    cos = [[1.0, None], [None, None]]
    measured, target, label = plots.gram_panels(_out(cos))
    assert measured[0, 0] == 1.0 and math.isnan(measured[0, 1]) and math.isnan(measured[1, 1])
    assert np.array_equal(target, [[1.0, -1.0], [-1.0, 1.0]]) and label == "predicted: simplex-etf"
    explicit = _out([[1.0, 0.2], [0.2, 1.0]], predicted={"geometry": "custom", "class_mean_cosines": [[1, 0.5], [0.5, 1]]})
    _, target, _ = plots.gram_panels(explicit)
    assert np.array_equal(target, [[1.0, 0.5], [0.5, 1.0]])
    with pytest.raises(ValueError, match="square"):
        plots.gram_panels(_out([[1.0, 0.0]]))


def test_figure_has_fixed_colour_scale_and_the_right_data(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (optional extra) is not installed")
    k = 4
    rng = np.random.default_rng(0)
    cos = (np.eye(k) + 0.05 * rng.standard_normal((k, k))).tolist()  # values well inside (-1, 1)
    cos[3] = [None] * k
    curves = {"loss": [1.0, 0.5, 0.25], "rate": {"x": [0, 5], "y": [0.3, 0.1]}}
    fig = plots.build_figure(_out(cos, curves=curves))
    heat = [ax for ax in fig.axes if ax.images]
    assert len(heat) == 2
    for ax in heat:
        assert ax.images[0].get_clim() == (-1.0, 1.0)  # not autoscaled to the data range
    measured = np.ma.filled(heat[0].images[0].get_array().astype(float), np.nan)
    assert np.allclose(measured[:3], np.array(cos[:3], dtype=float)) and np.all(np.isnan(measured[3]))
    target = np.asarray(heat[1].images[0].get_array())
    assert np.allclose(target[~np.eye(k, dtype=bool)], -1.0 / 3.0)
    line_axes = [ax for ax in fig.axes if ax.lines]
    assert len(line_axes) == 1 and line_axes[0].get_yscale() == "log"
    assert [ln.get_label() for ln in line_axes[0].lines] == ["loss", "rate"]
    path = tmp_path / "fig.png"
    assert plots.plot_solution(_out(cos), str(path)) == str(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = tmp_path / "fig.svg"
    plots.plot_solution(_out(cos), str(svg))
    assert svg.read_text().lstrip().startswith("<?xml")


def test_unknown_target_still_draws_the_measurement(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (optional extra) is not installed")
    fig = plots.build_figure(_out([[1.0, 0.0], [0.0, 1.0]], geometry=None))
    assert len([ax for ax in fig.axes if ax.images]) == 1
    assert any("no predicted target" in t.get_text() for ax in fig.axes for t in ax.texts)


def test_plot_argument_and_maybe_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="matplotlib (optional extra) is not installed")
    p = argparse.ArgumentParser()
    plots.add_plot_argument(p)
    assert plots.maybe_plot(p.parse_args([]), _out([[1.0]])) is None
    path = tmp_path / "o.png"
    args = p.parse_args(["--plot", str(path)])
    assert plots.maybe_plot(args, _out([[1.0, -1.0], [-1.0, 1.0]])) == str(path)
    assert path.exists() and f"figure: {path}" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        p.parse_args(["--plot", str(tmp_path / "o.jpeg")])
    assert "must end in .png, .pdf or .svg" in capsys.readouterr().err
    with pytest.raises(UsageError, match="folder .* does not exist"):
        plots.plot_solution(_out([[1.0]]), str(tmp_path / "nope" / "o.png"))
    with pytest.raises(UsageError, match="neither class-mean cosines nor curves"):
        plots.plot_solution({"family": "x"}, str(tmp_path / "e.png"))


def test_missing_matplotlib_is_a_clear_usage_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(UsageError, match=r"--plot needs matplotlib, an optional extra: pip install matplotlib"):
        plots.plot_solution(_out([[1.0]]), str(tmp_path / "o.png"))
    with pytest.raises(UsageError, match="needs matplotlib"):
        plots.check_plot_available()
