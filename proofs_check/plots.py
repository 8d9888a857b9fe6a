"""Figures for papers (matplotlib, an optional extra: ``pip install 'ncproofs[plots]'``).

``ncproofs solve FAMILY ... --plot out.png [--plot-size 12x4] [--plot-dpi 300]`` draws, from the
solve output (the common ``solve --json`` schema):

- the measured class-mean Gram as cosines (``geometry.class_mean_cosines``), colour scale
  fixed to [-1, 1] so that figures of different instances are comparable; undefined cosines
  (null: a zero class mean) are drawn grey;
- the predicted target: ``predicted.class_mean_cosines`` when the family gives the matrix, else
  the template of ``predicted.geometry`` ("simplex-etf": 1 on the diagonal, -1/(k-1) off it;
  "orthogonal-frame": the identity), with the same colour scale; left out when it equals the
  measurement to display precision (two identical panels say nothing);
- the difference measured - predicted on its own symmetric colour scale with a colour bar and
  the largest absolute difference in the title; drawn also when the difference is zero;
- class sizes in the tick labels where the instance gives them (``counts``, or ``n`` per class);
- for dynamics, the curves in ``out["curves"]`` (or ``out["history"]``): a dict
  ``name -> list of numbers`` or ``name -> {"x": [...], "y": [...]}`` (loss, rates, ...),
  on a log y axis when every value is positive.

Every figure is drawn inside :func:`figure_style` with the rcParams of :func:`style` (journal
defaults: TrueType / Type 42 fonts in PDF and PS, never Type 3; font sizes for a one-column
figure); a user overrides them per call (``rc=`` of :func:`build_figure` / :func:`plot_solution`)
or for the session (:data:`USER_STYLE`). Labels are mathtext (``$\\lambda_W$``, ``$\\|R\\|_F$``);
instance parameters that are None are left out of the title. Cell numbers are written only up to
:data:`ANNOTATE_MAX_K` classes and only where they fit their cell (measured by the renderer);
above that the colour bar carries the scale, and tick labels are thinned until they do not
overlap.

Titles show the instance, never verdict words (the report gives verdicts). cli.py wires it with
:func:`add_plot_argument` (on every ``solve`` subparser) and :func:`maybe_plot` (after
``cmd.run(args)``). The format follows the file suffix (.png, .pdf, .svg). Everything else in
ncproofs works without matplotlib.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys

import numpy as np

from proofs_check.commands import UsageError

#: Colour limits of every cosine heatmap: cosines live in [-1, 1]; fixing the scale makes
#: figures comparable across instances (an ETF with k = 3 is visibly more negative than k = 10).
COSINE_LIMITS = (-1.0, 1.0)
CMAP = "RdBu_r"
#: write the numbers in the cells up to this many classes (above: the colour bar alone carries the scale; the
#: numbers of a k x k panel of a few inches would overlap); cells too small for their number drop it as well
ANNOTATE_MAX_K = 8
_ANNOTATE_MAX_K = ANNOTATE_MAX_K  # older name

#: rcParams of every figure (see :func:`style`): Type 42 (TrueType) fonts in PDF and PS (journal checkers such as
#: IEEE PDF eXpress reject Type 3 fonts), sizes for a figure printed at its size, no clipping of tick labels
STYLE: dict = {
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "svg.fonttype": "path",
    "font.size": 9.0,
    "axes.titlesize": 9.0,
    "axes.labelsize": 9.0,
    "xtick.labelsize": 8.0,
    "ytick.labelsize": 8.0,
    "legend.fontsize": 8.0,
    "figure.titlesize": 9.0,
    "mathtext.fontset": "dejavusans",
    "axes.unicode_minus": True,
    "image.interpolation": "nearest",
    "savefig.dpi": 150,
}
#: session-wide overrides of :data:`STYLE` (``plots.USER_STYLE["font.size"] = 8``), applied before the ``rc``
#: argument of a call
USER_STYLE: dict = {}


def style(rc: dict | None = None, **overrides) -> dict:
    """The rcParams every ncproofs figure is drawn with: :data:`STYLE`, then :data:`USER_STYLE`, then ``rc``,
    then keyword overrides (``style(**{"font.size": 8})``). Returns a new dict (the user may change it and pass
    it as ``rc=``). A font type other than 42 must be asked for explicitly."""
    out = dict(STYLE)
    out.update(USER_STYLE)
    if rc:
        if not isinstance(rc, dict):
            raise TypeError(f"rc must be a dict of matplotlib rcParams, got {type(rc).__name__}")
        out.update(rc)
    out.update(overrides)
    return out


@contextlib.contextmanager
def figure_style(rc: dict | None = None):
    """Context manager: matplotlib's ``rc_context`` with :func:`style` (``rc`` overrides it). Every figure of
    this module is built and saved inside it (fonts are chosen when the file is written)."""
    _require_matplotlib()
    import matplotlib

    with matplotlib.rc_context(style(rc)):
        yield


#: mathtext names of instance parameters and curve names (plain keys of the solve output)
_MATH_NAMES = {
    "lw": r"\lambda_W", "lh": r"\lambda_H", "lambda_w": r"\lambda_W", "lambda_h": r"\lambda_H",
    "lambda_W": r"\lambda_W", "lambda_H": r"\lambda_H", "lam": r"\lambda", "lambda": r"\lambda",
    "lb": r"\lambda_b", "gamma": r"\gamma", "tau": r"\tau", "eps": r"\varepsilon", "epsilon": r"\varepsilon",
    "rho": r"\rho", "kappa": r"\kappa", "beta": r"\beta", "alpha": r"\alpha", "sigma": r"\sigma",
    "eta": r"\eta", "mu": r"\mu", "nu": r"\nu", "s": "s", "k": "k", "K": "K", "n": "n", "d": "d", "D": "D",
    "L": "L", "N": "N", "C": "C", "m": "m", "T": "T", "t": "t",
    "lambda_crit": r"\lambda_{\mathrm{crit}}", "n_c": "n_c", "n_w": "n_w", "s_c": "s_c",
}


def _mathtext_ok(text: str) -> bool:
    """True when matplotlib's mathtext parses every $...$ of ``text``."""
    try:
        from matplotlib.mathtext import MathTextParser

        parser = MathTextParser("path")
        for seg in re.findall(r"(?<!\\)\$(.+?)(?<!\\)\$", text):
            parser.parse(f"${seg}$", dpi=72)
    except Exception:  # noqa: BLE001 - any parse failure: not safe mathtext
        return False
    return (text.count("$") - 2 * text.count(r"\$")) % 2 == 0


def math_label(text: str) -> str:
    """A plain-text label as mathtext: known names (``lw`` -> ``$\\lambda_W$``), then the conservative converter
    of :mod:`proofs_check.latex_text` (``||R||_F`` -> ``$\\|R\\|_{F}$``, ``gamma=0.01`` -> ``$\\gamma=0.01$``).
    Where the result would not be valid mathtext the text is kept as it is (``$`` escaped)."""
    text = str(text)
    if text in _MATH_NAMES:
        return f"${_MATH_NAMES[text]}$"
    from proofs_check.latex_text import plain_to_latex

    conv = plain_to_latex(text)
    # plain_to_latex escapes text-mode specials for LaTeX (\_, \textbackslash{}, ...): mathtext does not know them
    outside = re.sub(r"(?<!\\)\$[^$]*(?<!\\)\$", "", conv)
    if "\\" not in outside and _mathtext_ok(conv):
        return conv
    return text.replace("$", r"\$")


def _value_text(v) -> str | None:
    if v is None or isinstance(v, dict) or (isinstance(v, str) and v.strip() in ("", "None", "null")):
        return None
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}" if math.isfinite(v) else None
    if isinstance(v, (list, tuple)):
        if not v or any(isinstance(x, (list, tuple, dict)) for x in v):
            return None
        items = [_value_text(x) or "-" for x in v[:8]]
        return "(" + ", ".join(items) + (", ..." if len(v) > 8 else "") + ")"
    return str(v)


def instance_title(out: dict, limit: int = 6) -> str:
    """``family: $k$ = 3, $\\lambda_W$ = 0.01, ...`` from ``out["instance"]``: the first ``limit`` parameters
    that have a value (None, nested dicts and empty lists are left out, never printed as ``None``)."""
    inst = out.get("instance") or {}
    parts = []
    for key, v in inst.items():
        txt = _value_text(v)
        if txt is None or key in ("plot",):
            continue
        name = f"${_MATH_NAMES[key]}$" if key in _MATH_NAMES else math_label(str(key))
        parts.append(f"{name} = {txt}")
        if len(parts) >= limit:
            break
    fam = out.get("family") or ""
    return (f"{fam}: " if fam else "") + ", ".join(parts)


def _wrap(text: str, width: int, lines: int = 3) -> str:
    """Wrap at ", " only (never inside a $...$), at most ``lines`` lines."""
    out, cur = [], ""
    for part in text.split(", "):
        cand = part if not cur else cur + ", " + part
        if cur and len(re.sub(r"\$[^$]*\$", "xxxx", cand)) > width:
            out.append(cur + ",")
            cur = part
        else:
            cur = cand
    out.append(cur)
    return "\n".join(out[:lines])


def _require_matplotlib():
    try:
        import matplotlib  # noqa: F401
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("--plot needs matplotlib, an optional extra: pip install matplotlib "
                         "(or pip install 'ncproofs[plots]')") from None
    return Figure, FigureCanvasAgg


def target_cosines(geometry: str | None, k: int) -> np.ndarray | None:
    """Cosine matrix of a named predicted geometry with k vectors (None if not a named template)."""
    if geometry in ("simplex-etf", "etf") and k >= 2:
        return np.full((k, k), -1.0 / (k - 1)) + np.eye(k) * (1.0 + 1.0 / (k - 1))
    if geometry in ("orthogonal-frame", "of"):
        return np.eye(k)
    return None


def _as_cos_array(rows) -> np.ndarray | None:
    if rows is None:
        return None
    arr = np.array([[np.nan if x is None else float(x) for x in row] for row in rows], dtype=float)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(f"class_mean_cosines must be a square matrix, got shape {arr.shape}")
    return arr


def gram_panels(out: dict) -> tuple[np.ndarray | None, np.ndarray | None, str]:
    """(measured cosines with NaN for null, predicted target cosines or None, target label)."""
    geo = out.get("geometry") or {}
    measured = _as_cos_array(geo.get("class_mean_cosines"))
    pred = out.get("predicted") or {}
    target = _as_cos_array(pred.get("class_mean_cosines")) if pred.get("class_mean_cosines") is not None else None
    label = "predicted"
    name = pred.get("geometry")
    if isinstance(name, dict):
        name = name.get("classification") or name.get("name")
    if target is None and measured is not None:
        target = target_cosines(name, measured.shape[0])
    if name:
        label = f"predicted: {name}"
    if measured is not None and target is not None and target.shape != measured.shape:
        raise ValueError(f"predicted cosines have shape {target.shape}, measured {measured.shape}")
    return measured, target, label


def _curves(out: dict) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    raw = out.get("curves") or out.get("history") or {}
    curves = {}
    if not isinstance(raw, dict):
        return curves
    for name, c in raw.items():
        if isinstance(c, dict) and "y" in c:
            y = np.array([np.nan if v is None else v for v in c["y"]], dtype=float)
            x = np.array(c.get("x", range(len(y))), dtype=float)
        elif isinstance(c, (list, tuple)) and all(v is None or isinstance(v, (int, float)) for v in c):
            y = np.array([np.nan if v is None else v for v in c], dtype=float)
            x = np.arange(len(y), dtype=float)
        else:
            continue
        if y.size:
            curves[str(name)] = (x, y)
    return curves


def class_sizes(out: dict, k: int) -> list[int] | None:
    """Samples per class from the instance (``counts`` / ``n_per_class`` lists, or a balanced
    ``n`` with ``k`` classes); None when the solve output does not say."""
    inst = out.get("instance") or {}
    for key in ("counts", "class_sizes", "n_per_class", "per_class"):
        v = inst.get(key)
        if isinstance(v, (list, tuple)) and len(v) == k and all(isinstance(x, int) and not isinstance(x, bool)
                                                                 for x in v):
            return [int(x) for x in v]
    n = inst.get("n")
    if isinstance(n, int) and not isinstance(n, bool) and inst.get("k") == k:
        return [n] * k
    return None


def _cmap(name: str):
    import matplotlib

    base = matplotlib.colormaps[name]
    # undefined entries (null) are grey; with_extremes exists since matplotlib 3.4
    return base.with_extremes(bad="0.75") if hasattr(base, "with_extremes") else base


def _heatmap(ax, mat: np.ndarray, title: str, *, limits=COSINE_LIMITS, sizes: list[int] | None = None,
             fmt: str = "{:.2f}", dark: float = 0.6):
    masked = np.ma.masked_invalid(mat)
    im = ax.imshow(masked, cmap=_cmap(CMAP), vmin=limits[0], vmax=limits[1], interpolation="nearest")
    k = mat.shape[0]
    ax.set_title(title)
    ticks = list(range(k) if k <= 20 else range(0, k, max(1, k // 10)))
    ax.set_xticks(ticks)
    ax.set_yticks(ticks)
    if sizes is not None:
        # class sizes in the tick labels (imbalanced instances): "2\nn=5" below, "2 (n=5)" left
        ax.set_xticklabels([f"{i}\nn={sizes[i]}" for i in ticks], fontsize=7)
        ax.set_yticklabels([f"{i} (n={sizes[i]})" for i in ticks], fontsize=7)
    ax.set_xlabel("class")
    ax.set_ylabel("class")
    ax._ncproofs_heat = (k, ticks, sizes)  # what _fit_labels may thin
    if k <= ANNOTATE_MAX_K:
        span = max(abs(limits[0]), abs(limits[1]))
        for i in range(k):
            for j in range(k):
                v = mat[i, j]
                ax.text(j, i, "n/a" if not math.isfinite(v) else fmt.format(v).replace("-", "\u2212"),
                        ha="center", va="center", fontsize=7,
                        color="white" if math.isfinite(v) and abs(v) > dark * span else "black")
    return im


def _overlaps(boxes, pad: float = 0.0) -> bool:
    """Whether any two of the (x0, y0, x1, y1) boxes, each grown by ``pad`` on every side, intersect."""
    for a in range(len(boxes)):
        for b in range(a + 1, len(boxes)):
            p, q = boxes[a], boxes[b]
            if (p[0] - pad < q[2] + pad and q[0] - pad < p[2] + pad and p[1] - pad < q[3] + pad
                    and q[1] - pad < p[3] + pad):
                return True
    return False


def _box(t, renderer):
    e = t.get_window_extent(renderer)
    return (e.x0, e.y0, e.x1, e.y1)


def _fit_labels(fig, rounds: int = 4) -> None:
    """Measure the drawn figure and remove what would overlap: cell numbers that do not fit their cell (smaller
    type first, down to 5 pt; then none: the colour bar carries the scale) and tick labels that run into each
    other (every second, third, ... tick kept). Uses the renderer's own text extents."""
    for _ in range(rounds):
        if hasattr(fig, "draw_without_rendering"):  # layout and text extents without rasterising (matplotlib >= 3.6)
            fig.draw_without_rendering()
        else:
            fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        changed = False
        for ax in fig.axes:
            info = getattr(ax, "_ncproofs_heat", None)
            if info is None:
                continue
            k, ticks, sizes = info
            ext = ax.get_window_extent(renderer)
            cw, ch = ext.width / k, ext.height / k
            if ax.texts:
                big = max(max(t.get_window_extent(renderer).width / cw, t.get_window_extent(renderer).height / ch)
                          for t in ax.texts)
                if big > 0.85:  # shrink to 70 % of the cell: a later layout pass shifting a pixel changes nothing
                    size = ax.texts[0].get_fontsize() * 0.7 / big
                    if size < 5.0:
                        for t in list(ax.texts):
                            t.remove()
                    else:
                        for t in ax.texts:
                            t.set_fontsize(size)
                    changed = True
            step = ticks[1] - ticks[0] if len(ticks) > 1 else 1
            need = step
            for horizontal, labels in ((True, ax.get_xticklabels()), (False, ax.get_yticklabels())):
                shown = [t for t in labels if t.get_visible() and t.get_text()]
                boxes = [_box(t, renderer) for t in shown]
                if len(shown) > 1 and _overlaps(boxes, pad=1.5):
                    extent = max((b[2] - b[0]) if horizontal else (b[3] - b[1]) for b in boxes) + 4.0
                    per_class = cw if horizontal else ch
                    need = max(need, step + 1, math.ceil(extent / per_class))
            if need != step:
                new = list(range(0, k, need))
                for axis, fmt in ((ax.xaxis, "{i}\nn={n}"), (ax.yaxis, "{i} (n={n})")):
                    axis.set_ticks(new)
                    if sizes is not None:
                        axis.set_ticklabels([fmt.format(i=i, n=sizes[i]) for i in new], fontsize=7)
                    else:
                        axis.set_ticklabels([str(i) for i in new])
                ax._ncproofs_heat = (k, new, sizes)
                changed = True
        if not changed:
            return


#: measured and predicted cosines closer than this everywhere print the same numbers (two
#: decimals) and would draw two identical panels: then only the measured panel and the
#: difference panel (with its own scale) are drawn
IDENTICAL_DISPLAY_TOL = 5e-3
#: smallest half-range of the difference colour scale (a zero difference still gets a scale)
DIFF_MIN_SCALE = 1e-12

#: default figure height in inches per row of panels, width per panel (``--plot-size`` overrides)
PANEL_SIZE = (4.0, 4.0)
DEFAULT_DPI = 150
MAX_DPI = 1200
MAX_SIZE_IN = 60.0
#: pixels of a figure at most (width x height x dpi^2; ~13 bytes each while rendering): 40 x 40 in at 1000 dpi
#: (1.6e9 pixels) ran for minutes towards ~20 GB; 12 x 4 in at 1200 dpi (6.9e7) renders in ~7 CPU s
MAX_PIXELS = 1e8


def difference(measured: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, float]:
    """(measured - predicted with NaN where measured is null, max |difference| over the
    defined entries; NaN when none is defined)."""
    diff = measured - target
    finite = diff[np.isfinite(diff)]
    return diff, (float(np.max(np.abs(finite))) if finite.size else float("nan"))


def build_figure(out: dict, *, size: tuple[float, float] | None = None, rc: dict | None = None):
    """The matplotlib Figure for a solve output dict (not yet written), built inside :func:`figure_style`
    (``rc`` overrides :func:`style`).

    Panels: the measured cosines; the predicted target (left out when it equals the measurement
    to display precision, see :data:`IDENTICAL_DISPLAY_TOL`); the difference measured -
    predicted on its own symmetric colour scale (drawn also when it is zero); the dynamics
    curves. No verdict words in the titles: the figure shows data, the report gives verdicts.
    Every panel has a title and both axis labels; cell numbers and tick labels that would overlap are
    left out (:func:`_fit_labels`)."""
    with figure_style(rc):
        return _build_figure(out, size=size)


def _build_figure(out: dict, *, size: tuple[float, float] | None = None):
    Figure, FigureCanvasAgg = _require_matplotlib()
    measured, target, label = gram_panels(out)
    curves = _curves(out)
    if measured is None and not curves:
        raise UsageError("--plot: this solve output has neither class-mean cosines nor curves to draw")
    diff = maxdiff = None
    if measured is not None and target is not None:
        diff, maxdiff = difference(measured, target)
    identical = diff is not None and math.isfinite(maxdiff) and maxdiff < IDENTICAL_DISPLAY_TOL
    kinds = []
    if measured is not None:
        kinds.append("measured")
        if target is not None and not identical:
            kinds.append("predicted")
        if diff is not None:
            kinds.append("difference")
    if curves:
        kinds.append("curves")
    w, h = size if size is not None else (max(PANEL_SIZE[0] * len(kinds) + 0.8, 5.5), PANEL_SIZE[1])
    fig = Figure(figsize=(w, h), layout="constrained")
    FigureCanvasAgg(fig)
    axes = dict(zip(kinds, fig.subplots(1, len(kinds), squeeze=False)[0]))
    geo = out.get("geometry") or {}
    sizes = class_sizes(out, measured.shape[0]) if measured is not None else None
    if measured is not None:
        cls = geo.get("classification")
        title = "measured class-mean cosines" + (f"\n(classified: {cls})" if cls else "")
        if target is None:
            title += "\n(no predicted target)"
        im = _heatmap(axes["measured"], measured, title, sizes=sizes)
        cos_axes = [axes["measured"]]
        if "predicted" in axes:
            _heatmap(axes["predicted"], target, label.replace(": ", "\n", 1), sizes=sizes)
            cos_axes.append(axes["predicted"])
        fig.colorbar(im, ax=cos_axes, shrink=0.8, label="cosine")
        if diff is not None:
            half = max(maxdiff if math.isfinite(maxdiff) else 0.0, DIFF_MIN_SCALE)
            what = label.split(": ", 1)[-1] if ": " in label else "predicted"
            dtitle = ("measured \u2212 predicted" + (f" ({what})" if what != "predicted" else "")
                      + "\nmax |difference| = " + (f"{maxdiff:.2g}" if math.isfinite(maxdiff) else "undefined"))
            dim = _heatmap(axes["difference"], diff, dtitle, limits=(-half, half), sizes=sizes, fmt="{:.1e}",
                           dark=0.6)
            fig.colorbar(dim, ax=[axes["difference"]], shrink=0.8, label="difference of cosines", format="%.1e")
    if curves:
        ax = axes["curves"]
        finite = [y[np.isfinite(y)] for _, y in curves.values()]
        positive = all(np.all(v > 0) for v in finite)
        for name, (x, y) in curves.items():
            ax.plot(x, y, label=name)  # the line keeps the report's name; the legend shows it as mathtext
        if positive:
            ax.set_yscale("log")
        elif any(np.any(v > 0) for v in finite):
            # a few non-positive values (an alignment below 0) next to positive series spanning decades: symlog
            # keeps the decades readable instead of flattening them on a linear scale
            nz = np.concatenate([np.abs(v[v != 0]) for v in finite if np.any(v != 0)] or [np.array([1.0])])
            ax.set_yscale("symlog", linthresh=float(max(np.min(nz), 1e-300)))
        raw = out.get("curves") if isinstance(out.get("curves"), dict) else {}
        labels = {str(raw[n].get("x_label") or "") if isinstance(raw.get(n), dict) else "" for n in curves} - {""}
        ax.set_xlabel(math_label(labels.pop()) if len(labels) == 1 else "iteration")
        ylabels = {str(raw[n].get("y_label") or "") if isinstance(raw.get(n), dict) else "" for n in curves} - {""}
        ax.set_ylabel(math_label(ylabels.pop()) if len(ylabels) == 1 else
                      (math_label(next(iter(curves))) if len(curves) == 1 else "value"))
        ax.set_title("dynamics")
        handles = ax.get_lines()
        ax.legend(handles, [math_label(h.get_label()) for h in handles])
    head = instance_title(out)
    if head:
        fig.suptitle(_wrap(head, max(30, int(w * 13))))
    _fit_labels(fig)
    return fig


def plot_solution(out: dict, path: str, *, dpi: int = DEFAULT_DPI, size: tuple[float, float] | None = None,
                  rc: dict | None = None) -> str:
    """Draw the figure for a solve output dict and write it to ``path`` (.png, .pdf or .svg by
    the suffix). Returns ``path``. ``size``: (width, height) in inches; ``dpi``: raster
    resolution (PNG; PDF/SVG are vector, dpi only affects embedded images).

    The figure is rendered in memory and written atomically (a temp file beside ``path``,
    fsync, rename), so an existing figure is never left half-overwritten."""
    from proofs_check.outputs import write_bytes_atomic

    ext = _plot_path(path)
    check_plot_path(path)
    write_bytes_atomic(path, figure_bytes(out, ext, dpi=dpi, size=size, rc=rc))
    return path


def figure_bytes(out: dict, fmt: str = "png", *, dpi: int = DEFAULT_DPI,
                 size: tuple[float, float] | None = None, rc: dict | None = None) -> bytes:
    """The figure of a solve output as bytes in ``fmt`` (png, pdf, svg, ps, eps); for reports. Built and
    written inside :func:`figure_style` (Type 42 fonts in PDF/PS unless ``rc`` says otherwise)."""
    _check_dpi(dpi)
    if size is not None:
        _check_size(size)
    with figure_style(rc):
        return _savefig_bytes(build_figure(out, size=size, rc=rc), fmt, dpi)


def check_plot_pixels(size, dpi) -> None:
    """UsageError when ``size`` (inches) at ``dpi`` exceeds MAX_PIXELS (before the solve for an explicit
    ``--plot-size``; before rendering for the default size)."""
    if size is None or dpi is None:
        return
    w, h = (float(x) for x in size)
    if w * h * dpi * dpi > MAX_PIXELS:
        raise UsageError(f"--plot-size {w:g}x{h:g} at --plot-dpi {dpi} is {w * h * dpi * dpi:.3g} pixels, more than "
                         f"the limit {MAX_PIXELS:.3g}; give a smaller --plot-size or --plot-dpi")


def _savefig_bytes(fig, fmt: str, dpi: int) -> bytes:
    import io

    check_plot_pixels(fig.get_size_inches(), dpi)
    buf = io.BytesIO()
    fig.savefig(buf, dpi=dpi, format=fmt)
    return buf.getvalue()


def measure_figure(out: dict, means=None, *, size: tuple[float, float] | None = None, rc: dict | None = None,
                   max_classes: int = 64):
    """The figure of an ``ncproofs measure`` result (``out``: its dict; ``means``: the K x d centred class means,
    ``out["_centred_means"]`` where the measurement kept them): the cosines of the centred class means (the first
    ``max_classes`` classes) on the fixed [-1, 1] scale with a colour bar, and a bar chart of the normalised Gram
    distances to the simplex ETF, the orthogonal frame and the predicted geometry (those the metrics hold). Every
    panel has a title and axis labels; the figure a title naming the measurement. Drawn inside
    :func:`figure_style`."""
    with figure_style(rc):
        Figure, FigureCanvasAgg = _require_matplotlib()
        metrics = out.get("metrics") or {}
        names = [("gram_distance_etf", "simplex ETF"), ("gram_distance_of", "orthogonal frame"),
                 ("gram_distance_predicted", "predicted")]
        vals = [(lab, float(metrics[key])) for key, lab in names
                if isinstance(metrics.get(key), (int, float)) and math.isfinite(float(metrics[key]))]
        C = None
        if means is not None:
            M = np.asarray(means, dtype=float)
            if M.ndim != 2:
                raise ValueError(f"means must be a K x d matrix, got shape {M.shape}")
            K = M.shape[0]
            R = M[:max_classes]
            nr = np.linalg.norm(R, axis=1)
            ok = nr > 0
            C = np.full((R.shape[0], R.shape[0]), np.nan)
            Rn = R[ok] / nr[ok, None]
            C[np.ix_(ok, ok)] = Rn @ Rn.T
        if C is None and not vals:
            raise UsageError("--plot: this measurement has neither class means nor Gram distances to draw")
        n = int(C is not None) + int(bool(vals))
        w, h = size if size is not None else (4.6 * n + 0.6, 4.2)
        fig = Figure(figsize=(w, h), layout="constrained")
        FigureCanvasAgg(fig)
        axs = list(fig.subplots(1, n, squeeze=False)[0])
        if C is not None:
            ax = axs.pop(0)
            shown = C.shape[0]
            title = "cosines of the centred class means" + (f"\n(first {shown} of {K} classes)" if shown < K else "")
            im = _heatmap(ax, C, title)
            fig.colorbar(im, ax=[ax], shrink=0.8, label="cosine")
        if vals:
            ax = axs.pop(0)
            ax.bar(range(len(vals)), [v for _, v in vals], color="tab:blue")
            ax.set_xticks(range(len(vals)))
            ax.set_xticklabels([lab for lab, _ in vals])
            ax.set_xlabel("target geometry")
            ax.set_ylabel("normalised Gram distance")
            ax.set_title("distance of the measured geometry")
        head = f"$K$ = {K} classes, $d$ = {M.shape[1]}" if C is not None else ""
        fig.suptitle("measured collapse geometry" + (f": {head}" if head else ""))
        _fit_labels(fig)
        return fig


def plot_measure(out: dict, means, path: str, *, dpi: int = DEFAULT_DPI, size: tuple[float, float] | None = None,
                 rc: dict | None = None) -> str:
    """:func:`measure_figure` written to ``path`` (.png, .pdf or .svg by the suffix; atomically). Returns ``path``."""
    from proofs_check.outputs import write_bytes_atomic

    ext = _plot_path(str(path))
    _check_dpi(dpi)
    if size is not None:
        _check_size(size)
    with figure_style(rc):
        data = _savefig_bytes(measure_figure(out, means, size=size), ext, dpi)
    write_bytes_atomic(path, data)
    return str(path)


def _check_dpi(dpi) -> int:
    if isinstance(dpi, bool) or not isinstance(dpi, int):
        raise TypeError(f"dpi must be an integer, got {type(dpi).__name__}")
    if not 10 <= dpi <= MAX_DPI:
        raise UsageError(f"--plot-dpi must be in 10..{MAX_DPI}, got {dpi}")
    return dpi


def _check_size(size) -> tuple[float, float]:
    try:
        w, h = (float(x) for x in size)
    except (TypeError, ValueError):
        raise TypeError(f"size must be (width, height) in inches, got {size!r}") from None
    if not (math.isfinite(w) and math.isfinite(h) and 1.0 <= w <= MAX_SIZE_IN and 1.0 <= h <= MAX_SIZE_IN):
        raise UsageError(f"--plot-size must be WIDTHxHEIGHT in inches, each in [1, {MAX_SIZE_IN:g}], got {w:g}x{h:g}")
    return w, h


def check_plot_path(path: str | None) -> None:
    """Raise a one-line UsageError/InputError (before an expensive solve) when ``--plot PATH``
    cannot be written: wrong suffix, missing or unwritable folder, a directory or device."""
    from proofs_check.outputs import check_output_path

    if not path:
        return
    _plot_path(path)
    check_output_path(path, "--plot")


def _plot_path(path: str) -> str:
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext not in ("png", "pdf", "svg"):
        raise UsageError(f"--plot {path}: the file must end in .png, .pdf or .svg")
    return ext


def _plot_arg(text: str) -> str:
    import argparse

    try:
        _plot_path(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[1]) from None
    return text


def _size_arg(text: str) -> tuple[float, float]:
    import argparse

    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*[xX,]\s*([0-9]*\.?[0-9]+)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT in inches, e.g. 10x4, got {text!r}")
    try:
        return _check_size((float(m.group(1)), float(m.group(2))))
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _dpi_arg(text: str) -> int:
    import argparse

    from theory._validate import int_from_text

    try:
        value = int_from_text(text)  # the shared integer syntax (3_0 and other scripts' digits are refused)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}"[:200]) from None
    try:
        return _check_dpi(value)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_plot_argument(parser) -> None:
    """Add ``--plot PATH``, ``--plot-size WxH`` and ``--plot-dpi N`` to a ``solve`` subparser
    (cli.py calls this for each family)."""
    parser.add_argument("--plot", metavar="PATH", default=None, type=_plot_arg,
                        help="draw the measured class-mean cosines, the predicted target and their difference "
                             "(and dynamics curves) to PATH (.png/.pdf/.svg by the suffix; needs matplotlib)")
    parser.add_argument("--plot-size", metavar="WxH", default=None, type=_size_arg,
                        help="figure size in inches, e.g. 12x4 (default: 4 x 4 per panel)")
    parser.add_argument("--plot-dpi", metavar="N", default=DEFAULT_DPI, type=_dpi_arg,
                        help=f"resolution of a PNG figure in dots per inch (default {DEFAULT_DPI})")


def maybe_plot(args, out: dict, *, stream=None) -> str | None:
    """If ``--plot`` was given, draw ``out`` (a solve result) and say where; else do nothing.
    A missing matplotlib is a :class:`UsageError` (one-line error, exit 2)."""
    path = getattr(args, "plot", None)
    if not path:
        return None
    plot_solution(out, path, dpi=getattr(args, "plot_dpi", None) or DEFAULT_DPI, size=getattr(args, "plot_size", None))
    print(f"figure: {path}", file=stream or sys.stderr)
    return path


def check_plot_available() -> None:
    """Raise the clear UsageError early (before an expensive solve) when --plot cannot work."""
    _require_matplotlib()
