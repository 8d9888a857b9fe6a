"""Figures of ``ncproofs measure``: the metrics of many checkpoints against the epoch (docs/measure.md).

Drawn with ``proofs_check.plots.figure_style()`` when that exists (one style for every ncproofs figure:
TrueType / Type 42 fonts in PDF and PS), else matplotlib's defaults with ``pdf.fonttype = ps.fonttype = 42``.
"""

from __future__ import annotations

import io
import math

#: Curves of the NC-vs-epoch figure: (metric key, mathtext label).
CURVES = (("nc1", r"$\mathrm{NC1} = \mathrm{tr}(\Sigma_W \Sigma_B^{+})/K$"),
          ("cdnv_mean", r"CDNV (mean over pairs)"),
          ("equinorm", r"equinorm $\mathrm{std}(r)/\mathrm{mean}(r)$"),
          ("equiangularity", r"equiangularity $\mathrm{std}\,\cos$"),
          ("gram_distance_etf", r"Gram distance to the simplex ETF"),
          ("gram_distance_predicted", r"Gram distance to the prediction"),
          ("nc3", r"$\mathrm{NC3}$ (self-duality)"),
          ("nc4", r"$\mathrm{NC4}$ (NCC disagreement)"))


def _style_context():
    try:
        from proofs_check import plots

        if hasattr(plots, "figure_style"):
            return plots.figure_style()
    except ImportError:  # pragma: no cover
        pass
    import contextlib

    import matplotlib

    @contextlib.contextmanager
    def ctx():
        with matplotlib.rc_context({"pdf.fonttype": 42, "ps.fonttype": 42}):
            yield

    return ctx()


def epochs_figure(rows: list[dict], path, title: str | None = None) -> None:
    """Log-scale metric curves against the epoch (rows: {"epoch", "metrics"}); zeros and nulls are skipped."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from proofs_check.outputs import write_bytes_atomic

    ext = str(path).rsplit(".", 1)[-1].lower()
    with _style_context():
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        drawn = 0
        for key, label in CURVES:
            pts = [(r["epoch"], r["metrics"].get(key)) for r in rows]
            pts = [(e, v) for e, v in pts if v is not None and math.isfinite(v) and v > 0]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, lw=1.2, label=label)
                drawn += 1
        ax.set_yscale("log")
        ax.set_xlabel("epoch (from the checkpoint file names)")
        ax.set_ylabel("metric value (log scale)")
        ax.set_title(title or f"Collapse metrics over {len(rows)} checkpoints")
        if drawn:
            ax.legend(fontsize=7, loc="best", frameon=False)
        ax.grid(True, which="major", alpha=0.3)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format=ext if ext in ("png", "pdf", "svg", "ps", "eps") else "png", dpi=130)
        plt.close(fig)
    write_bytes_atomic(path, buf.getvalue())
