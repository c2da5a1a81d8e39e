"""The preflight's rows and its table: ``preflight.md`` and ``preflight.json``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

STATUSES = ("ok", "failed", "needs asset", "blocked")


@dataclass
class Row:
    """One stage's preflight result."""

    stage: str
    cmd: str
    status: str = "not run"          # ok | failed | needs asset | blocked
    seconds: float = 0.0
    error: str = ""
    asset: str = ""
    fetch: str = ""
    note: str = ""
    model: str = ""                  # how the backbone was had: the real one, or its hub-shaped stand-in
    init: str = ""                   # a training's sentlab.json init: module=source (checkpoint, random, a method)
    steps: Optional[int] = None      # optimiser steps taken in the slice
    batch: Optional[int] = None      # slice batch (x grad_accum)
    sec_per_step: Optional[float] = None
    sentences: Optional[int] = None  # sentences encoded (evaluation, or dev evaluation in training)
    eval_pairs: Optional[int] = None  # evaluate.max_pairs the stage ran with when not the slice's (whitening's floor)
    sec_per_sentence: Optional[float] = None
    peak_rss_mb: Optional[float] = None
    cuda_peak_mb: Optional[float] = None
    full_steps: Optional[int] = None
    projected_s: Optional[float] = None
    projected_peak_mb: Optional[float] = None
    projected_cuda_mb: Optional[float] = None
    probe: dict = field(default_factory=dict)

    def measured(self, res: dict) -> None:
        """Fill the measures from a stage process's result (:meth:`sentlab.preflight.probe.Probe.result`)."""
        self.probe = res
        self.steps = res.get("steps") or None
        self.sec_per_step = res.get("sec_per_step")
        plans = res.get("plans") or []
        if plans:
            self.batch = plans[-1]["batch_size"] * plans[-1]["grad_accum"]
        if res.get("enc_sentences"):
            self.sentences = res["enc_sentences"]
            self.sec_per_sentence = res["enc_seconds"] / res["enc_sentences"]
        self.peak_rss_mb, self.cuda_peak_mb = res.get("peak_rss_mb"), res.get("cuda_peak_mb")


def _fmt(v, nd=2):
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.{nd}f}" if abs(v) < 1000 else f"{v:,.0f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _hms(s: Optional[float]) -> str:
    if s is None:
        return ""
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def markdown(rows: list[Row], meta: dict) -> str:
    ok = sum(r.status == "ok" for r in rows)
    cuda = meta.get("projected_cuda_mb")
    lines = [f"# Preflight: profile `{meta['profile']}`", "",
             (f"**Partial: {meta['partial']}.** " if meta.get("partial") else "") +
             f"{ok}/{len(rows)} stages ok. Backbone: {meta['backbone']}. Device: {meta['device']}"
             + (f", {meta['device_note']}" if meta.get("device_note") else "") + ". "
             f"Slice: {meta['slice']}. Scratch: `{meta['scratch']}`.", "",
             f"Projected full run on this device: **{_hms(meta['projected_total_s'])}** (sum of the stages, one "
             f"after another), peak RSS **{_fmt(meta['projected_peak_mb'], 0)} MB**"
             + (f", CUDA peak **{_fmt(cuda, 0)} MB**" if cuda else "") + ". Linear estimates from the slice.", "",
             "| stage | status | init | s | s/step (slice batch) | full steps | s/sentence | peak RSS MB | CUDA MB | "
             "projected | projected peak MB | error / asset / note |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        what = r.error or ""
        if r.status == "needs asset":
            what = f"needs **{r.asset}**: `{r.fetch}`" + (f" — {r.note}" if r.note else "")
        elif r.note:
            what = (what + "; " if what else "") + r.note
        lines.append("| " + " | ".join([
            r.stage, r.status, r.init, _fmt(r.seconds, 1), _fmt(r.sec_per_step, 2), _fmt(r.full_steps),
            _fmt(r.sec_per_sentence, 4), _fmt(r.peak_rss_mb, 0), _fmt(r.cuda_peak_mb, 0), _hms(r.projected_s),
            _fmt(r.projected_peak_mb, 0), what.replace("|", "\\|")]) + " |")
    return "\n".join(lines) + "\n"


def write(rows: list[Row], meta: dict, out: Path) -> str:
    """Write preflight.md/.json (also after every stage: a long run shows where it is); returns the Markdown."""
    from ..runtime.io import write_json, write_text

    meta["projected_total_s"] = sum(r.projected_s or 0 for r in rows)
    meta["projected_peak_mb"] = max([r.projected_peak_mb or 0 for r in rows] or [0])
    cuda = [r.projected_cuda_mb for r in rows if r.projected_cuda_mb]
    meta["projected_cuda_mb"] = max(cuda) if cuda else None
    meta["counts"] = {s: sum(r.status == s for r in rows) for s in STATUSES}
    md = markdown(rows, meta)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "preflight.md", md)
    write_json(out / "preflight.json", {"meta": meta, "rows": [asdict(r) for r in rows]})
    return md
