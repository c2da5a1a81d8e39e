"""Diagnostic figures (matplotlib, Agg backend; written atomically as PNG).

:func:`density_figure` is PaSeR's Fig. 5 / SimCSE's cosine density plot: one
curve per gold similarity level of STS-B test, a Gaussian KDE
(:class:`scipy.stats.gaussian_kde`, Scott's bandwidth) of the cosines of that
level's pairs; a level with fewer than two distinct cosines is drawn as a
histogram instead (a KDE is undefined there), and an empty level is named in
the legend with ``n=0``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .diagnostics import DENSITY_EDGES, bin_index


def density_figure(gold: np.ndarray, cos: np.ndarray, path: str | os.PathLike, title: str,
                   edges=DENSITY_EDGES) -> Path:
    """Write the cosine density plot by gold level to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy.stats import gaussian_kde


    gold = np.asarray(gold, dtype=np.float64)
    cos = np.asarray(cos, dtype=np.float64)
    idx = bin_index(gold, edges)
    lo = min(-0.05, float(cos.min()) - 0.05) if len(cos) else -1.0
    grid = np.linspace(lo, 1.0, 400)
    colors = plt.get_cmap("viridis")(np.linspace(0.0, 0.9, len(edges) - 1))
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    try:
        for b in range(len(edges) - 1):
            c = cos[idx == b]
            right = "]" if b == len(edges) - 2 else ")"
            label = f"[{edges[b]:g},{edges[b + 1]:g}{right}  n={len(c)}"
            if len(np.unique(c)) >= 2:
                ax.plot(grid, gaussian_kde(c)(grid), color=colors[b], label=label)
            elif len(c):
                ax.hist(c, bins=10, range=(lo, 1.0), density=True, histtype="step", color=colors[b], label=label)
            else:
                ax.plot([], [], color=colors[b], label=label)
        ax.set_xlabel("cosine similarity")
        ax.set_ylabel("density")
        ax.set_title(title)
        ax.legend(title="gold level", fontsize="small")
        fig.tight_layout()
        return _save_png(fig, path)
    finally:
        plt.close(fig)


def note_figure(path: str | os.PathLike, title: str, reason: str) -> Path:
    """A PNG that says why there is no plot (a model not run in this profile, diagnostics off), so the
    stage's declared figure output always exists and never shows a stale plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 2.0), dpi=120)
    try:
        ax.axis("off")
        ax.text(0.5, 0.6, title, ha="center", va="center", fontsize=11)
        ax.text(0.5, 0.3, f"no density plot: {reason}", ha="center", va="center", fontsize=9, color="0.3")
        return _save_png(fig, path)
    finally:
        plt.close(fig)


def _save_png(fig, path: str | os.PathLike) -> Path:
    """Write ``fig`` as a PNG at ``path`` atomically."""
    from ...runtime.io import atomic_path

    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    return path
