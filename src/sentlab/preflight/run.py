"""The preflight run: the scratch copy, the slice, every stage in order, collected into the table."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from ..methods.blocks import validate_params

from ..config.models import load_models
from ..config.yaml_files import deep_merge, read_yaml
from ..errors import SentlabError
from . import slice as S
from .projection import project
from .stage_runner import StageRunner, error_paragraph
from .scratch import check_location, make_scratch, scratch_env
from .stages import Stage, consumers, consumers_first, dvc_stages, prune_weights, with_upstream
from .standins import (backbone_standin, changed_models, classify_asset, corpus_shortfall, corpus_standin,
                       hub_standins, method_hub_models, standin_for)
from .table import Row, write


def _device() -> str:
    import torch

    if torch.cuda.is_available():
        return f"CUDA {torch.cuda.get_device_name(0)}"
    return f"CPU ({os.cpu_count()} cores, torch {torch.__version__})"


def _init_of(scratch: Path, st: Stage) -> str:
    """``module=source`` of the ``init`` in the ``sentlab.json`` of the model a training stage wrote ("" otherwise)."""
    for out in st.outs:
        f = scratch / out / "sentlab.json"
        if out.startswith("models/") and f.is_file():
            init = json.loads(f.read_text()).get("init") or {}
            return ", ".join(f"{k}={v}" for k, v in init.items())
    return ""


def run_one(runner: StageRunner, st: Stage, row: Row) -> None:
    """Run ``st`` and fill ``row`` with its status, error and measures."""
    t = time.perf_counter()
    res, log = runner.run(st)
    row.seconds = time.perf_counter() - t
    ok = res.get("rc", 1) == 0
    row.init = _init_of(runner.scratch, st) if ok else ""
    if ok:
        row.status = "ok"
    elif res.get("kind") == "asset":
        row.status, row.error = "needs asset", ""
        row.asset, row.fetch = classify_asset(res.get("error", ""))
        row.note = res.get("error", "")[:300]
    else:
        row.status, row.error = "failed", res.get("error") or error_paragraph(log)
    row.measured(res)


class Preflight:
    """One preflight: the scratch copy's values, the edits in force (slice, stand-ins), the rows."""

    def __init__(self, scratch: Path, profile: str, sl: dict, values: dict, runner: StageRunner, how: str):
        self.scratch, self.profile, self.sl, self.values, self.runner, self.how = \
            scratch, profile, sl, values, runner, how
        self.slice = S.slice_edits(values, sl, S.slice_device(values)[0])
        self.whitening_pairs = S.whitening_min_pairs(values)
        self.standin_edits: list[dict] = []
        self.affected: dict[str, tuple[str, str, str]] = {}   # model -> (asset, fetch, description)
        self.models = load_models(scratch / "models.yaml")
        self.rows: dict[str, Row] = {}
        self.dropped: dict[str, tuple[str, str, str]] = {}   # stage a stand-in removed -> (asset, fetch, description)

    def whitening_pairs_now(self) -> int:
        """:func:`~sentlab.preflight.slice.whitening_min_pairs` of the values with the stand-ins in force (the NLI
        stand-in moves an NLI-fitted whitening to the STS pool)."""
        values = self.values
        for edit in self.standin_edits:
            values = deep_merge(values, edit)
        return S.whitening_min_pairs(values) if self.standin_edits else self.whitening_pairs

    def suite_stages(self) -> set[str]:
        """The ``<suite>@<model>`` stages of the scratch copy's stage list as it is now (a stand-in may drop some)."""
        from ..stages.stage_list import suite_items, suite_stage

        return {suite_stage(s, m) for s, m in suite_items(read_yaml(self.scratch / "models.yaml") or {})}

    def write_params(self, *extra: dict) -> dict:
        return S.write_params(self.scratch, self.values, self.slice, *self.standin_edits, *extra)

    def check(self, st: Stage) -> Row:
        row = Row(st.name, st.cmd, model=self.how)
        if st.name in self.dropped:   # an earlier stage's stand-in removed it (its data is not here either)
            row.status, row.error = "needs asset", ""
            row.asset, row.fetch, desc = self.dropped[st.name]
            row.note = f"continued without this stage, {desc}"
            return row
        bad = [u for u in st.upstream if u in self.rows and self.rows[u].status != "ok"
               and not self.rows[u].note.startswith("continued")]
        if bad:
            row.status, row.error = "blocked", f"not run: {', '.join(bad)} did not succeed"
            return row
        whitening = self.whitening_pairs_now()
        if st.name == S.WHITENING_STAGE and whitening > self.sl["max_pairs"]:
            self.write_params({"evaluate": {"max_pairs": whitening}})
            try:
                run_one(self.runner, st, row)
            finally:
                self.write_params()
            row.eval_pairs = whitening
            row.note = (f"run with {whitening} pairs per task (the other evaluations: {self.sl['max_pairs']}): "
                        f"its fit on the STS pool needs 1.5x the backbone's width in sentences")
            return row
        run_one(self.runner, st, row)
        if row.status == "needs asset":
            self._stand_in(st, row)
        elif row.status == "ok" and row.steps:
            hit = self.affected.get(st.name.split("@", 1)[-1])
            if hit:  # trained with a method block a stand-in changed
                row.status, row.asset, row.fetch = "needs asset", hit[0], hit[1]
                row.note = f"continued with a stand-in, {hit[2]}: that run ok"
        return row

    def _stand_in(self, st: Stage, row: Row) -> None:
        edit, desc = standin_for(row.asset, self.values)
        if not edit:
            return
        suites = self.suite_stages()
        before = self.write_params()
        self.standin_edits.append(edit)
        after = self.write_params()
        for model in changed_models(before, after, self.models):
            self.affected.setdefault(model, (row.asset, row.fetch, desc))
        for gone in suites - self.suite_stages():
            self.dropped.setdefault(gone, (row.asset, row.fetch, desc))
        kind, _, item = st.name.partition("@")
        if ((kind == "evaluate_baseline" and item not in ((after.get("evaluate") or {}).get("baselines") or []))
                or st.name in self.dropped):
            # the stand-in drops it (GloVe without its vectors, a retrieval stage without QQP's and AskUbuntu's data)
            row.note = f"continued without this stage, {desc}"
            return
        again = Row(st.name, st.cmd, model=self.how)
        run_one(self.runner, st, again)
        row.note = f"continued with a stand-in, {desc}: that run {again.status}" + (
            f" ({again.error})" if again.error else "")
        if again.status == "ok":
            row.measured(again.probe)
            row.init = again.init
        else:
            row.note = f"stand-in ({desc}) {again.status}: {again.error}"


def preflight(workspace: Path, profile: Optional[str] = None, *, out: Optional[Path] = None,
              scratch: Optional[Path] = None, sl: Optional[dict] = None, keep_weights: bool = False,
              stages_filter: Optional[str] = None, quiet: bool = False) -> tuple[int, list[Row], dict]:
    """Run the preflight; returns (exit status, rows, meta). See :mod:`sentlab.preflight`."""
    workspace = Path(workspace).resolve()
    sl = {**S.SLICE, **(sl or {})}
    profile = profile or read_yaml(workspace / "params.yaml").get("profile", "quick")
    scratch = Path(scratch or tempfile.mkdtemp(prefix=f"sentlab-preflight-{profile}-")).resolve()
    check_location(workspace, scratch)
    make_scratch(workspace, scratch)
    out_dir = out or scratch / "reports" / "preflight"
    meta = {"profile": profile, "backbone": "", "device": _device(), "slice": sl, "scratch": str(scratch),
            "workspace": str(workspace)}
    try:
        values = S.apply_profile(scratch, profile)
        real = validate_params(values, source=f"profile {profile}")
        corpus_sample = corpus_standin(real)
        device, meta["device_note"] = S.slice_device(values)
        if not quiet:
            print(f"preflight: {meta['device_note']}", file=sys.stderr, flush=True)
        edits = S.slice_edits(values, sl, device)
        if corpus_sample:   # the slice trains on the sample; the prepare row says the corpus is missing
            edits = deep_merge(edits, {"prepare": {"corpus": corpus_sample}})
        S.write_params(scratch, values, edits)
    except SentlabError as e:  # the profile does not validate: one row says why, nothing else can run
        row = Row("profile", f"sentlab profile {profile}", status="failed", error=str(e))
        return _finish([row], meta, out_dir, quiet)
    env = scratch_env(scratch)
    standin, how, missing_backbone = backbone_standin(real.model.backbone, scratch)
    meta["backbone"] = how
    standin, extra = hub_standins(method_hub_models(real), scratch, standin)   # DiffCSE's generator
    if extra:
        meta["hub_standins"] = extra
    if standin is not None:
        env["SENTLAB_DATA_MIRROR"] = str(standin)
    stages = dvc_stages(scratch)
    if stages_filter:
        stages = with_upstream(stages, stages_filter)
    stages = consumers_first(stages)
    readers = consumers(stages)
    pf = Preflight(scratch, profile, sl, values, StageRunner(scratch, env), how)
    rows: list[Row] = []
    for st in stages:
        row = pf.check(st)
        if st.name == "prepare" and row.status == "ok":
            short = corpus_shortfall(real, corpus_sample)
            if short:
                row.status, (row.asset, row.fetch) = "needs asset", short
                row.note = "the slice ran on the sample; the full run stops at prepare until the corpus is here"
        if missing_backbone and row.status == "needs asset" and row.asset == missing_backbone[0]:
            row.fetch = missing_backbone[1]
        pf.rows[st.name] = row
        rows.append(row)
        project([row], real, sl, scratch, pf.models)  # as it comes: a partial table (stopped early) has its figures
        if not quiet:
            print(f"preflight: {st.name}: {row.status} ({row.seconds:.1f}s)" + (
                f": {row.error[:200]}" if row.error else ""), file=sys.stderr, flush=True)
        if not keep_weights:
            prune_weights(scratch, readers, pf.rows)
        write(rows, {**meta, "partial": f"{len(rows)} of {len(stages)} stages so far"}, out_dir)
    meta["standin_mirror"] = str(standin) if standin else None
    return _finish(rows, meta, out_dir, quiet)


def _finish(rows: list[Row], meta: dict, out: Path, quiet: bool) -> tuple[int, list[Row], dict]:
    meta.pop("partial", None)
    md = write(rows, meta, out)
    if not quiet:
        print(md)
        print(f"preflight: wrote {out / 'preflight.md'} and {out / 'preflight.json'}")
    rc = 0 if rows and all(r.status == "ok" for r in rows) else 1
    return rc, rows, meta
