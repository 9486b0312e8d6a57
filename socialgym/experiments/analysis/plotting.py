"""Figures for the experiments' PNG plots: report, sweep, study, moderation, evaluation, cocoon.

A figure here is a matplotlib ``Figure`` on its own Agg canvas, never a pyplot one: pyplot's
global figure list and process-wide backend are left alone (nothing to close afterwards, no
``matplotlib.use`` that would change a caller's interactive session). matplotlib is imported
when the first figure is made, so importing this module costs nothing.
"""

from __future__ import annotations

import io
from pathlib import Path

from socialgym.rundir.files import atomic_write


def figure(width: float, height: float, *, layout: str | None = "constrained", dpi: float | None = None):
    """A ``width`` x ``height`` inch Figure on an Agg canvas. ``layout``: matplotlib's layout
    engine (``"constrained"``, ``"tight"``, or None to place things by hand, e.g. with
    ``fig.tight_layout(rect=...)``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout=layout, dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def save(fig, path: str | Path, *, dpi: float = 100) -> None:
    """Write ``fig`` as a PNG to ``path`` and free what it drew."""
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=dpi, format="png")
    fig.clear()
    atomic_write(path, buffer.getvalue())     # never through a link planted at ``path``


__all__ = ["figure", "save"]
