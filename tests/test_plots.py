"""Figures: class-mean cosines next to the predicted target, colour scale fixed to [-1, 1]."""

from __future__ import annotations

import argparse
import math
import re
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


def _heat_axes(fig):
    """Heatmap panels (colour bars also hold an image-like mappable but no AxesImage)."""
    return [ax for ax in fig.axes if ax.images]


def test_figure_has_fixed_colour_scale_and_the_right_data(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (optional extra) is not installed")
    k = 4
    rng = np.random.default_rng(0)
    cos = (np.eye(k) + 0.05 * rng.standard_normal((k, k))).tolist()  # values well inside (-1, 1)
    cos[3] = [None] * k
    curves = {"loss": [1.0, 0.5, 0.25], "rate": {"x": [0, 5], "y": [0.3, 0.1]}}
    fig = plots.build_figure(_out(cos, curves=curves))
    heat = _heat_axes(fig)
    assert len(heat) == 3  # measured, predicted, difference
    for ax in heat[:2]:
        assert ax.images[0].get_clim() == (-1.0, 1.0)  # not autoscaled to the data range
    measured = np.ma.filled(heat[0].images[0].get_array().astype(float), np.nan)
    assert np.allclose(measured[:3], np.array(cos[:3], dtype=float)) and np.all(np.isnan(measured[3]))
    target = np.asarray(heat[1].images[0].get_array())
    assert np.allclose(target[~np.eye(k, dtype=bool)], -1.0 / 3.0)
    # the difference panel: measured - ETF template, computed here from the definition
    etf = np.full((k, k), -1.0 / 3.0) + np.eye(k) * (4.0 / 3.0)
    want = np.array(cos[:3], dtype=float) - etf[:3]
    diff = np.ma.filled(heat[2].images[0].get_array().astype(float), np.nan)
    assert np.allclose(diff[:3], want, rtol=0, atol=1e-12) and np.all(np.isnan(diff[3]))
    lo, hi = heat[2].images[0].get_clim()
    assert lo == -hi and hi == pytest.approx(np.max(np.abs(want)))  # symmetric, fitted to the data
    line_axes = [ax for ax in fig.axes if ax.lines]
    assert len(line_axes) == 1 and line_axes[0].get_yscale() == "log"
    assert [ln.get_label() for ln in line_axes[0].lines] == ["loss", "rate"]
    path = tmp_path / "fig.png"
    assert plots.plot_solution(_out(cos), str(path)) == str(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = tmp_path / "fig.svg"
    plots.plot_solution(_out(cos), str(svg))
    assert svg.read_text().lstrip().startswith("<?xml")
    pdf = tmp_path / "fig.pdf"
    plots.plot_solution(_out(cos), str(pdf))
    assert pdf.read_bytes()[:5] == b"%PDF-"


def _texts(fig) -> str:
    out = [fig._suptitle.get_text() if fig._suptitle else ""]
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()] + [t.get_text() for t in ax.texts]
    return "\n".join(out)


@pytest.mark.parametrize("verdict", ["VERIFIED", "REFUTED", "INCONCLUSIVE", "NOT_APPLICABLE", "ERROR"])
def test_no_verdict_words_in_the_figure(verdict):
    pytest.importorskip("matplotlib", reason="matplotlib (optional extra) is not installed")
    fig = plots.build_figure(_out([[1.0, -0.9], [-0.9, 1.0]], verdict=verdict))
    text = _texts(fig).upper()
    for word in ("VERIFIED", "REFUTED", "INCONCLUSIVE", "NOT_APPLICABLE", "ERROR"):
        assert word not in text


def test_measured_equals_predicted_draws_the_difference_not_two_identical_panels():
    pytest.importorskip("matplotlib", reason="matplotlib (optional extra) is not installed")
    k = 3
    etf = (np.full((k, k), -0.5) + np.eye(k) * 1.5).tolist()
    fig = plots.build_figure(_out(etf, verdict="VERIFIED"))
    heat = _heat_axes(fig)
    assert len(heat) == 2  # measured and difference; the identical predicted panel is left out
    diff = np.asarray(heat[1].images[0].get_array(), dtype=float)
    assert np.allclose(diff, 0.0, rtol=0, atol=1e-15)
    lo, hi = heat[1].images[0].get_clim()
    assert hi > 0 and lo == -hi  # a zero difference still has a scale
    assert "max |difference| = 0" in heat[1].get_title()
    # every panel shows something: no half-empty axes
    assert all(ax.images or ax.lines or ax.collections or ax.get_label() == "<colorbar>" for ax in fig.axes)
    # two colour bars: cosines and the difference
    assert sum(ax.get_label() == "<colorbar>" for ax in fig.axes) == 2


def test_imbalanced_class_sizes_in_tick_labels_and_no_empty_panel():
    pytest.importorskip("matplotlib", reason="matplotlib (optional extra) is not installed")
    cos = [[1.0, -0.54, -0.54], [-0.54, 1.0, -0.41], [-0.54, -0.41, 1.0]]
    out = _out(cos, geometry=None)
    out["instance"] = {"counts": [4, 2, 2], "tau": 0.5, "k": 3}
    fig = plots.build_figure(out)
    heat = _heat_axes(fig)
    assert len(heat) == 1
    ax = heat[0]
    xt = [t.get_text() for t in ax.get_xticklabels()]
    yt = [t.get_text() for t in ax.get_yticklabels()]
    assert xt == ["0\nn=4", "1\nn=2", "2\nn=2"] and yt == ["0 (n=4)", "1 (n=2)", "2 (n=2)"]
    panels = [a for a in fig.axes if a.get_label() != "<colorbar>"]
    assert panels == [ax]  # no panel with only a message in it


def _png_size(data: bytes) -> tuple[int, int]:
    import struct

    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_plot_size_and_dpi(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (optional extra) is not installed")
    path = tmp_path / "s.png"
    plots.plot_solution(_out([[1.0, -1.0], [-1.0, 1.0]]), str(path), size=(6.0, 3.0), dpi=50)
    assert _png_size(path.read_bytes()) == (300, 150)
    plots.plot_solution(_out([[1.0, -1.0], [-1.0, 1.0]]), str(path), size=(6.0, 3.0), dpi=100)
    assert _png_size(path.read_bytes()) == (600, 300)
    with pytest.raises(UsageError, match="plot-dpi"):
        plots.plot_solution(_out([[1.0]]), str(path), dpi=5)
    with pytest.raises(UsageError, match="plot-size"):
        plots.plot_solution(_out([[1.0]]), str(path), size=(0.5, 3.0))


def test_plot_size_and_dpi_arguments(capsys):
    p = argparse.ArgumentParser()
    plots.add_plot_argument(p)
    a = p.parse_args(["--plot", "x.pdf", "--plot-size", "10x4", "--plot-dpi", "300"])
    assert a.plot_size == (10.0, 4.0) and a.plot_dpi == 300
    assert p.parse_args([]).plot_dpi == plots.DEFAULT_DPI and p.parse_args([]).plot_size is None
    for bad in (["--plot-size", "10"], ["--plot-size", "0x4"], ["--plot-size", "100x4"], ["--plot-dpi", "0"],
                ["--plot-dpi", "abc"]):
        with pytest.raises(SystemExit):
            p.parse_args(bad)
    assert "plot-size" in capsys.readouterr().err


def test_unknown_target_still_draws_the_measurement(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (optional extra) is not installed")
    fig = plots.build_figure(_out([[1.0, 0.0], [0.0, 1.0]], geometry=None))
    assert len([ax for ax in fig.axes if ax.images]) == 1
    assert any("no predicted target" in ax.get_title() for ax in fig.axes)


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
    from theory._validate import InputError

    with pytest.raises(InputError, match="(folder|directory) .* does not exist"):
        plots.plot_solution(_out([[1.0]]), str(tmp_path / "nope" / "o.png"))
    with pytest.raises(UsageError, match="neither class-mean cosines nor curves"):
        plots.plot_solution({"family": "x"}, str(tmp_path / "e.png"))


def test_missing_matplotlib_is_a_clear_usage_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(UsageError, match=r"--plot needs matplotlib, an optional extra: pip install matplotlib"):
        plots.plot_solution(_out([[1.0]]), str(tmp_path / "o.png"))
    with pytest.raises(UsageError, match="needs matplotlib"):
        plots.check_plot_available()


def test_dynamics_axis_label_and_scale_follow_the_curves():
    pytest.importorskip("matplotlib")
    # the curves' own x label; a negative value next to positive series spanning decades: symlog, not linear
    curves = {"loss": {"x": [0, 1, 2], "y": [1.0, 1e-3, 1e-6], "x_label": "time t"},
              "alignment": {"x": [0, 2], "y": [-0.1, 0.9], "x_label": "time t"}}
    fig = plots.build_figure({"family": "ntk", "instance": {}, "curves": curves})
    ax = [a for a in fig.axes if a.get_title() == "dynamics"][0]
    assert ax.get_xlabel() == "time t" and ax.get_yscale() == "symlog"
    # mixed labels fall back to a neutral one; all positive stays log
    curves["alignment"] = {"x": [0, 2], "y": [0.1, 0.9], "x_label": "SGD step"}
    fig = plots.build_figure({"family": "ntk", "instance": {}, "curves": curves})
    ax = [a for a in fig.axes if a.get_title() == "dynamics"][0]
    assert ax.get_xlabel() == "iteration" and ax.get_yscale() == "log"


# ---- journal checks: fonts, overlap, labels, style (issue 29) ------------------------------------------------

import shutil
import subprocess


def _journal_out(k: int, *, sizes: bool = True, curves: bool = False) -> dict:
    rng = np.random.default_rng(k)
    cos = np.eye(k) + 0.05 * rng.standard_normal((k, k))
    inst = {"k": k, "n": 5, "lw": 0.01, "lh": 1e-3, "gamma": None}
    if sizes:
        inst["counts"] = [100 + 37 * i for i in range(k)]
    out = {"family": "ufm", "instance": inst, "predicted": {"geometry": "simplex-etf"},
           "geometry": {"classification": "other", "class_mean_cosines": cos.tolist()}}
    if curves:
        out["curves"] = {"residual ||R||_F": {"x": [0, 1, 2], "y": [1.0, 0.1, 0.01], "x_label": "time t"},
                         "loss, gamma=0.01": {"x": [0, 1, 2], "y": [2.0, 0.5, 0.2], "x_label": "time t"}}
    return out


def _drawn_texts(fig):
    """(text, window box) of every Text the renderer actually draws (tick labels of hidden ticks are not drawn)."""
    import matplotlib.text

    drawn = []
    orig = matplotlib.text.Text.draw

    def spy(self, renderer):
        orig(self, renderer)
        if self.get_visible() and self.get_text().strip():
            e = self.get_window_extent(renderer)
            drawn.append((self.get_text(), (e.x0, e.y0, e.x1, e.y1)))

    matplotlib.text.Text.draw = spy
    try:
        fig.canvas.draw()
    finally:
        matplotlib.text.Text.draw = orig
    return drawn


def _intersections(drawn):
    bad = []
    for a in range(len(drawn)):
        for b in range(a + 1, len(drawn)):
            (ta, p), (tb, q) = drawn[a], drawn[b]
            if p[0] < q[2] and q[0] < p[2] and p[1] < q[3] and q[1] < p[3]:
                bad.append((ta, tb))
    return bad


@pytest.mark.parametrize("k,sizes", [(3, False), (8, True), (10, True), (30, True)])
def test_no_two_labels_overlap_at_any_k(k, sizes):
    pytest.importorskip("matplotlib", reason="matplotlib (optional extra) is not installed")
    fig = plots.build_figure(_journal_out(k, sizes=sizes, curves=k == 3))
    drawn = _drawn_texts(fig)
    assert len(drawn) > 10
    assert _intersections(drawn) == []
    cells = sum(len(ax.texts) for ax in _heat_axes(fig))
    if k > plots.ANNOTATE_MAX_K:
        assert cells == 0  # no cell numbers above the limit: the colour bar carries the scale
    else:
        assert cells >= k * k  # the cosines are written in the cells of the measured panel


def test_overlap_check_can_fail():
    """The check above sees overlapping labels: 30 class labels written into a 1-inch axis do intersect."""
    pytest.importorskip("matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_xticks(range(30))
    ax.set_xticklabels([f"class {i}" for i in range(30)])
    assert _intersections(_drawn_texts(fig))


def test_measure_figure_has_titles_axis_labels_and_no_overlap(tmp_path):
    pytest.importorskip("matplotlib")
    rng = np.random.default_rng(1)
    out = {"metrics": {"gram_distance_etf": 0.31, "gram_distance_of": 0.82, "gram_distance_predicted": None}}
    fig = plots.measure_figure(out, rng.standard_normal((100, 20)))
    panels = [a for a in fig.axes if a.get_label() != "<colorbar>"]
    assert len(panels) == 2
    for ax in panels:
        assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    assert "100" in fig._suptitle.get_text() and "64" in panels[0].get_title()
    assert _intersections(_drawn_texts(fig)) == []
    path = plots.plot_measure(out, rng.standard_normal((5, 4)), str(tmp_path / "m.pdf"))
    assert open(path, "rb").read(5) == b"%PDF-"


def test_titles_axis_labels_and_mathtext():
    pytest.importorskip("matplotlib")
    fig = plots.build_figure(_journal_out(4, curves=True))
    sup = fig._suptitle.get_text()
    assert r"$\lambda_W$ = 0.01" in sup and r"$\lambda_H$" in sup
    assert "None" not in sup and "gamma" not in sup and "lw=" not in sup  # a None parameter is left out
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel(), ax
    dyn = [a for a in fig.axes if a.get_title() == "dynamics"][0]
    labels = [t.get_text() for t in dyn.get_legend().get_texts()]
    assert r"residual $\|R\|_{F}$" in labels and any(r"$\gamma" in t for t in labels)
    assert plots.math_label("lw") == r"$\lambda_W$" and plots.math_label("tau") == r"$\tau$"
    # text the converter cannot make valid mathtext stays literal (a lone $ is escaped)
    assert plots.math_label("cost in $") == r"cost in \$"


def test_style_is_one_overridable_rc_dict():
    pytest.importorskip("matplotlib")
    st = plots.style()
    assert st["pdf.fonttype"] == 42 and st["ps.fonttype"] == 42
    assert plots.style({"font.size": 6.0})["font.size"] == 6.0 and plots.style()["font.size"] == st["font.size"]
    fig = plots.build_figure(_journal_out(3, sizes=False), rc={"axes.titlesize": 6.5})
    assert fig.axes[0].title.get_fontsize() == 6.5
    import matplotlib

    before = matplotlib.rcParams["pdf.fonttype"]
    with plots.figure_style():
        assert matplotlib.rcParams["pdf.fonttype"] == 42
    assert matplotlib.rcParams["pdf.fonttype"] == before  # the user's global settings are left alone


def _pdffonts(data: bytes, tmp_path) -> str:
    path = tmp_path / "f.pdf"
    path.write_bytes(data)
    return subprocess.run(["pdffonts", str(path)], capture_output=True, text=True, timeout=60, check=True).stdout


@pytest.mark.skipif(shutil.which("pdffonts") is None, reason="pdffonts (poppler-utils) is not installed")
def test_pdf_and_ps_embed_truetype_not_type3(tmp_path):
    pytest.importorskip("matplotlib")
    out = _journal_out(5, curves=True)
    fonts = _pdffonts(plots.figure_bytes(out, "pdf"), tmp_path)
    rows = fonts.splitlines()[2:]
    assert rows and all("TrueType" in r and " yes " in r for r in rows), fonts  # embedded TrueType (Type 42)
    assert "Type 3" not in fonts
    rng = np.random.default_rng(2)
    with plots.figure_style():
        mfig = plots.measure_figure({"metrics": {"gram_distance_etf": 0.5}}, rng.standard_normal((6, 3)))
        mdata = plots._savefig_bytes(mfig, "pdf", 100)
    assert "Type 3" not in _pdffonts(mdata, tmp_path)
    small = _journal_out(3, sizes=False)
    ps = plots.figure_bytes(small, "ps").decode("latin-1")
    assert "/FontType 42" in ps and "/FontType 3" not in ps
    # the check can fail: matplotlib's own default (Type 3) is seen
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 2))
    FigureCanvasAgg(fig)
    fig.add_subplot().set_title("Type 3 glyphs")
    with plots.figure_style({"pdf.fonttype": 3, "axes.unicode_minus": False}):
        t3 = plots._savefig_bytes(fig, "pdf", 72)
    assert "Type 3" in _pdffonts(t3, tmp_path)
