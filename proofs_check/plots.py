"""Figures for papers (matplotlib, an optional extra: ``pip install 'ncproofs[plots]'``).

``ncproofs solve FAMILY ... --plot out.png`` draws, from the solve output (the common
``solve --json`` schema):

- the measured class-mean Gram as cosines (``geometry.class_mean_cosines``), colour scale
  fixed to [-1, 1] so that figures of different instances are comparable; undefined cosines
  (null: a zero class mean) are drawn grey;
- beside it the predicted target: ``predicted.class_mean_cosines`` when the family gives the
  matrix, else the template of ``predicted.geometry`` ("simplex-etf": 1 on the diagonal,
  -1/(k-1) off it; "orthogonal-frame": the identity), with the same colour scale;
- for dynamics, the curves in ``out["curves"]`` (or ``out["history"]``): a dict
  ``name -> list of numbers`` or ``name -> {"x": [...], "y": [...]}`` (loss, rates, ...),
  on a log y axis when every value is positive.

cli.py wires it with :func:`add_plot_argument` (on every ``solve`` subparser) and
:func:`maybe_plot` (after ``cmd.run(args)``). The format follows the file suffix
(.png, .pdf, .svg). Everything else in ncproofs works without matplotlib.
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np

from proofs_check.commands import UsageError

#: Colour limits of every cosine heatmap: cosines live in [-1, 1]; fixing the scale makes
#: figures comparable across instances (an ETF with k = 3 is visibly more negative than k = 10).
COSINE_LIMITS = (-1.0, 1.0)
CMAP = "RdBu_r"
_ANNOTATE_MAX_K = 10  # write the numbers in the cells up to this many classes


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


def _heatmap(ax, mat: np.ndarray, title: str):
    masked = np.ma.masked_invalid(mat)
    import matplotlib

    base = matplotlib.colormaps[CMAP]
    # undefined cosines (null) are grey; with_extremes exists since matplotlib 3.4
    cmap = base.with_extremes(bad="0.75") if hasattr(base, "with_extremes") else base
    im = ax.imshow(masked, cmap=cmap, vmin=COSINE_LIMITS[0], vmax=COSINE_LIMITS[1], interpolation="nearest")
    k = mat.shape[0]
    ax.set_title(title, fontsize=10)
    ticks = range(k) if k <= 20 else range(0, k, max(1, k // 10))
    ax.set_xticks(list(ticks))
    ax.set_yticks(list(ticks))
    ax.set_xlabel("class")
    ax.set_ylabel("class")
    if k <= _ANNOTATE_MAX_K:
        for i in range(k):
            for j in range(k):
                v = mat[i, j]
                ax.text(j, i, "null" if not math.isfinite(v) else f"{v:.2f}", ha="center", va="center",
                        fontsize=7, color="white" if math.isfinite(v) and abs(v) > 0.6 else "black")
    return im


def build_figure(out: dict):
    """The matplotlib Figure for a solve output dict (not yet written)."""
    Figure, FigureCanvasAgg = _require_matplotlib()
    measured, target, label = gram_panels(out)
    curves = _curves(out)
    if measured is None and not curves:
        raise UsageError("--plot: this solve output has neither class-mean cosines nor curves to draw")
    panels = (measured is not None) + (measured is not None) + bool(curves)
    fig = Figure(figsize=(4.2 * panels + 0.8, 4.0), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, panels, squeeze=False)[0]
    i = 0
    im = None
    geo = out.get("geometry") or {}
    if measured is not None:
        cls = geo.get("classification")
        im = _heatmap(axes[0], measured, "measured class-mean cosines" + (f"\n({cls})" if cls else ""))
        if target is not None:
            im = _heatmap(axes[1], target, label.replace(": ", "\n", 1) if "\n" not in label else label)
        else:
            axes[1].axis("off")
            axes[1].text(0.5, 0.5, "no predicted target\n(predicted.geometry not a named template)",
                         ha="center", va="center", transform=axes[1].transAxes)
        fig.colorbar(im, ax=list(axes[:2]), shrink=0.8, label="cosine")
        i = 2
    if curves:
        ax = axes[i]
        positive = all(np.all(y[np.isfinite(y)] > 0) for _, y in curves.values())
        for name, (x, y) in curves.items():
            ax.plot(x, y, label=name)
        if positive:
            ax.set_yscale("log")
        ax.set_xlabel("iteration")
        ax.set_title("dynamics", fontsize=10)
        ax.legend(fontsize=8)
    inst = out.get("instance") or {}
    head = f"{out.get('family', '')}: " + ", ".join(f"{k}={v}" for k, v in list(inst.items())[:6])
    if out.get("verdict"):
        head += f"  [{out['verdict']}]"
    fig.suptitle(head, fontsize=10)
    return fig


def plot_solution(out: dict, path: str, *, dpi: int = 150) -> str:
    """Draw the figure for a solve output dict and write it to ``path``. Returns ``path``.

    The figure is rendered in memory and written atomically (a temp file beside ``path``,
    fsync, rename), so an existing figure is never left half-overwritten."""
    import io

    from proofs_check.outputs import write_bytes_atomic

    ext = _plot_path(path)
    check_plot_path(path)
    fig = build_figure(out)
    buf = io.BytesIO()
    fig.savefig(buf, dpi=dpi, format=ext)
    write_bytes_atomic(path, buf.getvalue())
    return path


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


def add_plot_argument(parser) -> None:
    """Add ``--plot PATH`` to a ``solve`` subparser (cli.py calls this for each family)."""
    parser.add_argument("--plot", metavar="PATH", default=None, type=_plot_arg,
                        help="draw the class-mean cosines next to the predicted target (and dynamics "
                             "curves) to PATH (.png/.pdf/.svg; needs matplotlib)")


def maybe_plot(args, out: dict, *, stream=None) -> str | None:
    """If ``--plot`` was given, draw ``out`` (a solve result) and say where; else do nothing.
    A missing matplotlib is a :class:`UsageError` (one-line error, exit 2)."""
    path = getattr(args, "plot", None)
    if not path:
        return None
    plot_solution(out, path)
    print(f"figure: {path}", file=stream or sys.stderr)
    return path


def check_plot_available() -> None:
    """Raise the clear UsageError early (before an expensive solve) when --plot cannot work."""
    _require_matplotlib()
