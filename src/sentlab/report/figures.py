"""The papers' figures from the pipeline's outputs (matplotlib, Agg backend, written atomically).

* :func:`alignment_uniformity_figure` — PT-BERT Fig. 3: alignment and uniformity on STS-B (dev,
  every dev evaluation) over training steps, one line per method, from ``reports/curves/<m>.csv``;
* :func:`dev_curve_figure` — STS-B dev Spearman over steps (model selection curves);
* :func:`decoder_depth_figure` — PaSeR Fig. 4: STS Avg. vs decoder layers.

Each returns a :class:`FigureResult`: the PNG path, the data drawn per series and, read back
from the matplotlib axes, the labels of the lines actually drawn (what tests check), plus the
series that could not be drawn and why (the figure's caption lists them too).
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

CURVE_COLUMNS = ("step", "stsb_dev", "alignment", "uniformity", "loss")
HIGHLIGHT = ("ptbert", "simcse")  # PT-BERT Fig. 3 compares these two


@dataclass
class FigureResult:
    path: Path
    series: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    drawn: dict[str, list[str]] = field(default_factory=dict)   # axes title -> line labels (from matplotlib)
    missing: dict[str, str] = field(default_factory=dict)       # series -> why it is not drawn


def read_curve(path: Path) -> list[dict[str, float]]:
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            row = {}
            for k in CURVE_COLUMNS:
                v = (r.get(k) or "").strip()
                try:
                    row[k] = float(v) if v else math.nan
                except ValueError:
                    row[k] = math.nan
            if not math.isnan(row["step"]):
                rows.append(row)
    return rows


def curve_status(name: str, models_dir: Path) -> str:
    f = Path(models_dir) / name / "sentlab.json"
    if not f.is_file():
        return "no models/%s/sentlab.json: its train stage did not run or failed" % name
    try:
        return json.loads(f.read_text()).get("status", "unknown")
    except ValueError:
        return f"unreadable {f}"


def load_curves(curves_dir: Path, models_dir: Path = Path("models")) -> tuple[dict[str, list[dict]], dict[str, str]]:
    """(name -> curve rows, name -> why no curve) for every ``curves_dir/*.csv``."""
    curves, missing = {}, {}
    for f in sorted(Path(curves_dir).glob("*.csv")):
        try:
            rows = read_curve(f)
        except (OSError, csv.Error) as e:
            missing[f.stem] = f"unreadable curve file ({e})"
            continue
        if rows:
            curves[f.stem] = rows
        else:
            missing[f.stem] = "empty curve: " + curve_status(f.stem, models_dir)
    return curves, missing


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _order(names) -> list[str]:
    return sorted(names, key=lambda n: (n not in HIGHLIGHT, HIGHLIGHT.index(n) if n in HIGHLIGHT else 0, n))


def _save(fig, path: Path) -> None:
    from ..runtime.io import atomic_path

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")


def _missing_text(missing: dict[str, str]) -> str:
    if not missing:
        return ""
    items = [f"{k}: {v}" for k, v in sorted(missing.items())]
    return "not drawn — " + "; ".join(items[:6]) + (f"; … (+{len(items) - 6})" if len(items) > 6 else "")


def _lines_figure(curves, missing, path, panels, suptitle, context) -> FigureResult:
    plt = _plt()
    path = Path(path)
    res = FigureResult(path, missing=dict(missing))
    names = _order(curves)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), dpi=120, squeeze=False)
    try:
        for ax, (key, ylabel) in zip(axes[0], panels):
            for n in names:
                pts = [(r["step"], r[key]) for r in curves[n] if not math.isnan(r.get(key, math.nan))]
                if not pts:
                    res.missing.setdefault(n, f"no {key} values in its curve")
                    continue
                xs, ys = zip(*pts)
                res.series.setdefault(n, {"step": list(xs)})[key] = list(ys)
                if list(res.series[n]["step"]) != list(xs):
                    res.series[n][f"{key}_step"] = list(xs)
                ax.plot(xs, ys, marker="o", markersize=3, label=n, linewidth=2.2 if n in HIGHLIGHT else 1.2)
            ax.set_xlabel("training step")
            ax.set_ylabel(ylabel)
            ax.set_title(ylabel)
            if ax.get_lines():
                ax.legend(fontsize="small")
            else:
                ax.text(0.5, 0.5, "no curves in this profile", ha="center", va="center", transform=ax.transAxes)
            res.drawn[ylabel] = [ln.get_label() for ln in ax.get_lines()]
        fig.suptitle(suptitle)
        note = "\n".join(x for x in (context, _missing_text(res.missing)) if x)
        if note:
            fig.text(0.01, 0.01, note, fontsize=6, color="0.3", wrap=True)
        fig.tight_layout(rect=(0, 0.06 if note else 0, 1, 0.95))
        _save(fig, path)
    finally:
        plt.close(fig)
    return res


def alignment_uniformity_figure(curves: dict[str, list[dict]], missing: dict[str, str], path, backbone: str = "",
                                profile: str = "") -> FigureResult:
    """PT-BERT Fig. 3 (a) alignment and (b) uniformity on STS-B dev over training steps (lower is better)."""
    return _lines_figure(curves, missing, path, (("alignment", "alignment (STS-B dev)"),
                                                  ("uniformity", "uniformity (STS-B dev)")),
                         "PT-BERT Fig. 3: alignment and uniformity over training steps",
                         f"backbone {backbone}, profile {profile}; lower is better" if backbone else "lower is better")


def dev_curve_figure(curves, missing, path, backbone: str = "", profile: str = "") -> FigureResult:
    return _lines_figure(curves, missing, path, (("stsb_dev", "STS-B dev Spearman x100"),),
                         "Model selection: STS-B dev over training steps",
                         f"backbone {backbone}, profile {profile}" if backbone else "")


def decoder_depth_figure(points: dict[int, Optional[float]], reasons: dict[int, str], path,
                         backbone: str = "", profile: str = "") -> FigureResult:
    """PaSeR Fig. 4: Avg. of the 7 STS tasks vs decoder layers (reproduced only: the paper prints no values)."""
    plt = _plt()
    path = Path(path)
    res = FigureResult(path, missing={f"{d} layers": r for d, r in reasons.items()})
    have = sorted((d, v) for d, v in points.items() if v is not None)
    fig, ax = plt.subplots(figsize=(5.6, 4.0), dpi=120)
    try:
        if have:
            xs, ys = zip(*have)
            ax.plot(xs, ys, marker="o", label="reproduced")
            res.series["reproduced"] = {"decoder_layers": list(xs), "Avg": list(ys)}
        else:
            ax.text(0.5, 0.5, "no decoder-depth variant evaluated in this profile", ha="center", va="center",
                    transform=ax.transAxes)
        ax.set_xlabel("decoder layers")
        ax.set_ylabel("STS Avg. (Spearman x100)")
        ax.set_xticks(range(1, 9))
        ax.set_title("PaSeR Fig. 4: STS vs decoder depth")
        if ax.get_lines():
            ax.legend(fontsize="small")
        res.drawn[ax.get_title()] = [ln.get_label() for ln in ax.get_lines()]
        note = (f"backbone {backbone}, profile {profile}; paper values not printed (plot only). "
                + _missing_text(res.missing))
        fig.text(0.01, 0.01, note, fontsize=6, color="0.3", wrap=True)
        fig.tight_layout(rect=(0, 0.08, 1, 1))
        _save(fig, path)
    finally:
        plt.close(fig)
    return res
