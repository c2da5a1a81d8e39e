"""``sentlab preflight [--profile paper]``: every stage of a profile on a tiny slice, before a GPU day.

What it does, in order:

1. **Scratch copy.** The workspace's tracked and untracked-not-ignored files (``git ls-files -co
   --exclude-standard``) are copied to a scratch folder; no ``dvc.lock``, no ``data/``, ``models/``,
   ``reports/`` or ``mlflow.db`` is read or written in the workspace (``MLFLOW_TRACKING_URI`` points
   into the scratch folder).
2. **Tiny slice.** The scratch ``params.yaml`` gets the chosen profile and, in ``profiles.<profile>``,
   the slice: ``prepare.size``, a few training steps (``train.max_steps`` and every method block's
   own ``max_steps``, one dev evaluation at the end), a small batch, few STS-B dev pairs
   (``train.dev_max_pairs``) and few pairs per evaluation task (``evaluate.max_pairs``; the whitening
   baseline's stage alone, when the profile fits it on the STS pool, runs with enough pairs for 1.5x the
   backbone's width in fit sentences: :func:`whitening_min_pairs`); a method's
   ``max_sentences`` is capped at the slice's corpus; ``train.nproc`` is 1. Everything else is the
   profile's own: the backbone, the methods, the ablation variants, their settings.
3. **Every stage, in DVC order.** The stages are what ``dvc`` makes of the scratch ``dvc.yaml``
   (:func:`dvc.repo.reproduce.plan_repro`, the order ``dvc repro`` runs them), whatever they are —
   except that a stage reading a trained model (its evaluation) runs right after the training, so that
   the model's weights can be deleted then (:func:`consumers_first`; in DVC's order every training
   comes first, and the paper profile's 124 bert-base models would need ~60 GB of disk at once).
   A ``python script.py …`` stage runs in a process forked from a server that has already imported
   torch and transformers; anything else runs as a subprocess.
4. **Collect, never stop.** One row per stage: ``ok``; ``failed`` with the one-paragraph error (a
   traceback's last line when it is not a :class:`~sentlab.errors.SentlabError`); ``needs asset`` with
   the asset and the command that fetches it (:class:`~sentlab.errors.AssetMissingError`); ``blocked``
   when a stage it depends on did not succeed. A missing asset with a stand-in (SimCSE's NLI
   triples -> the SICK stand-in; WordNet for EDA's ``sr`` -> ``rd``) is recorded, then the stand-in
   is set in the scratch params and the stage run again, so the stages after it are still checked.
5. **Backbone.** The profile's backbone is used when it can be loaded; otherwise, when its
   architecture config is kept in :mod:`sentlab.backbones` and its tokenizer can be built offline,
   its hub-shaped stand-in (:mod:`sentlab.backbones.standin`: the original checkpoint's key names,
   shapes and dtypes, random values), put at ``models/<hub id>`` of a scratch mirror that links the
   real mirror's data (``SENTLAB_DATA_MIRROR`` of the stage processes): the stages load it through the
   resolver and ``from_pretrained`` code a downloaded checkpoint takes; every row says so. Without an
   offline tokenizer the stages that load it come out ``needs asset``. Each training row's ``init``
   column is its ``sentlab.json``'s ``init``: where each module's weights came from.
6. **Measures and projection.** Per stage: wall seconds; for training, seconds per optimiser step
   (between consecutive steps, at the slice batch) and the full run's step count (from the real
   profile's corpus size, batch, epochs and max_steps, :func:`sentlab.train.loop.plan_steps`); for
   evaluation, seconds per encoded sentence; peak RSS (``getrusage`` of the stage process) and the
   CUDA peak when CUDA is used. The projection of the full run: steps x seconds per step scaled
   by the batch ratio, plus its dev evaluations; evaluation time scaled by the number of pairs;
   prepare/annotate scaled by the corpus size; training memory = the peak plus its in-step part
   (peak minus the resident size after the first step) scaled by the batch ratio. Projections are
   linear estimates from a slice on this machine; on a GPU run it there.
7. **Output.** ``preflight.md`` and ``preflight.json`` (in ``--out``, default ``reports/preflight/``
   of the scratch folder, whose path is printed), the Markdown table on stdout; exit status 0 only
   when every stage is ok.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

from .errors import SentlabError

# The slice (CLI flags change them).
SLICE = {"size": 1200, "steps": 3, "batch_size": 8, "dev_max_pairs": 40, "max_pairs": 40}

# PaSeR's held-out reconstruction check (greedy decoding of ``recon_heldout`` sentences, frequency baselines
# fitted on ``recon_fit``) at the slice's scale: at the paper's 500 / 2,000 the check took 3-5 min of each PaSeR
# stage on a CPU (a random decoder never emits [SEP], so every sentence decodes the full 40 tokens).
RECON_SLICE = {"recon_heldout": 40, "recon_fit": 200}

# Upstream sizes of the corpora a full run trains on, for the projection when the data here is a sample:
# SimCSE's wiki1m_for_simcse.txt has 10^6 lines, its nli_for_simcse.csv 275,601 triples (SimCSE §4.1, 5.1).
UPSTREAM_ROWS = {"train": 1_000_000, "nli": 275_601}

# Assets that have a stand-in: the scratch params edit that lets the stages after it run.
# (message pattern, asset label, the edit of the raw profile block)
PRELOAD = ["torch", "transformers", "numpy", "pandas", "pyarrow", "sentlab.config", "sentlab.train.run",
           "sentlab.evaluate.runner", "sentlab.evaluate.protocol", "sentlab.tracking", "mlflow"]


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
    eval_pairs: Optional[int] = None  # evaluate.max_pairs the stage ran with (the slice's, or whitening's floor)
    sec_per_sentence: Optional[float] = None
    peak_rss_mb: Optional[float] = None
    cuda_peak_mb: Optional[float] = None
    full_steps: Optional[int] = None
    projected_s: Optional[float] = None
    projected_peak_mb: Optional[float] = None
    projected_cuda_mb: Optional[float] = None
    probe: dict = field(default_factory=dict)


# --- the scratch copy ---------------------------------------------------------------------------------
def workspace_files(workspace: Path) -> list[str]:
    """Tracked and untracked-not-ignored files of ``workspace`` (what a fresh clone plus new sources holds)."""
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=workspace, check=True,
                             capture_output=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError) as e:
        raise SentlabError(f"The preflight copies the files git knows in {workspace}, but `git ls-files` failed there "
                           f"({e}). Run it from the repository root of a git checkout.") from None
    return [f for f in out.split("\0") if f and (workspace / f).is_file()]


def make_scratch(workspace: Path, dest: Path) -> Path:
    """Copy the workspace's source files to ``dest`` (no dvc.lock: a fresh clone's first run), as a git repo."""
    for rel in workspace_files(workspace):
        if rel == "dvc.lock":
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(workspace / rel, dest / rel)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    return dest


# --- the slice ----------------------------------------------------------------------------------------
def slice_overrides(raw: dict, profile: str, sl: dict) -> dict:
    """The ``profiles.<profile>`` block of the scratch params: the profile's own with the slice on top."""
    from .config import TrainParams, deep_merge, resolve_profile
    from .methods.base import TRAIN_OVERRIDES  # noqa: F401  (the keys a method block may set for itself)

    merged = resolve_profile(raw, profile)
    prof = copy.deepcopy((raw.get("profiles") or {}).get(profile) or {})
    size = min(sl["size"], int((merged.get("prepare") or {}).get("size", sl["size"])))
    steps = sl["steps"]
    train = {"max_steps": steps, "eval_every": steps, "batch_size": sl["batch_size"], "grad_accum": 1,
             "dev_max_pairs": sl["dev_max_pairs"], "nproc": 1, "epochs": 1}
    cap = {"prepare": {"size": size}, "train": train, "evaluate": {"max_pairs": sl["max_pairs"]}}
    assert set(train) <= set(TrainParams.model_fields)
    for section in ("methods", "methods_from"):
        for mid, block in (merged.get(section) or {}).items():
            own = {k: train[k] for k in ("max_steps", "eval_every", "batch_size", "epochs")
                   if (block or {}).get(k) is not None}
            own["max_steps"], own["eval_every"] = steps, steps  # always: a method block may set its own later
            negatives = _method_default(mid, block, "negatives")  # CT: a batch holds 1 + negatives sentences
            if negatives is not None and negatives + 1 > sl["batch_size"]:
                own["batch_size"] = negatives + 1
            if (block or {}).get("max_sentences"):
                own["max_sentences"] = min(int(block["max_sentences"]), size // 2)
            for key, cap_n in RECON_SLICE.items():  # PaSeR's reconstruction check after training: a slice of it
                value = _method_default(mid, block, key)
                if value:
                    own[key] = min(int(value), cap_n)
            cap.setdefault(section, {})[mid] = own
    return deep_merge(prof, cap)


WHITENING_STAGE = "evaluate_baseline@whitening"


def whitening_min_pairs(merged: dict) -> int:
    """Pairs per task the whitening baseline's stage needs so that its ``sts_pool`` fit (the distinct sentences
    of the evaluated pairs of 7 tasks + STS-B dev: at most 16 per pair count) has 1.5x more sentences than the
    backbone has dimensions (else the covariance is singular: a failure of the slice, not of the profile); 0
    when the profile has no such baseline or the backbone's width is unknown here. Only that stage runs with
    them (:func:`preflight`): at 72 pairs per task every bert-base evaluation took twice as long."""
    ev = merged.get("evaluate") or {}
    wh = ev.get("whitening") or {}
    if "whitening" not in (ev.get("baselines") or []) or wh.get("fit_on", "sts_pool") != "sts_pool":
        return 0
    hidden = backbone_width(str((merged.get("model") or {}).get("backbone", "")))
    return math.ceil(1.5 * hidden / 16) if hidden else 0


def backbone_width(backbone: str) -> Optional[int]:
    """``hidden_size`` of ``backbone``: its kept architecture config, else its config.json when it is here."""
    from . import backbones

    kept = backbones.spec(backbone)
    if kept is not None:
        return int(kept["config"]["hidden_size"])
    try:
        from .assets import resolve_model

        cfg = json.loads((Path(resolve_model(backbone)) / "config.json").read_text(encoding="utf-8"))
        return int(cfg["hidden_size"])
    except Exception:  # noqa: BLE001 - not here: the stages that load it say so in their rows
        return None


def _method_default(mid: str, block: Optional[dict], key: str):
    """``key`` of method ``mid``'s Params in force for ``block`` (None when the method has no such key)."""
    from .methods import registered

    cls = registered().get(mid)
    if cls is None:
        return None
    try:
        own = {k: v for k, v in (block or {}).items() if k != "from"}  # methods_from: `from` names the parent
        return getattr(cls.Params(**own), key, None)
    except Exception:  # noqa: BLE001 - an invalid block is resolve_params' row to report
        return None


def write_slice_params(scratch: Path, profile: str, sl: dict, extra: Optional[dict] = None, check: bool = True) -> dict:
    """Point the scratch ``params.yaml`` at ``profile`` with the slice (and ``extra``, stand-ins) in its block."""
    from .config import SentlabError, deep_merge, read_yaml, resolve_profile, stage_lines_for, validate

    path = scratch / "params.yaml"
    raw = read_yaml(path)
    raw.setdefault("profiles", {})[profile] = deep_merge(slice_overrides(raw, profile, sl), extra or {})
    raw["profile"] = profile
    try:  # the profile's stages, as `sentlab profile` writes them
        raw["stage_lines"] = stage_lines_for(validate(resolve_profile(raw, profile), source=f"{path} (preflight slice)"))
    except SentlabError:
        if check:
            raise
        # params that do not validate as they are: the resolve_params stage says so in its row
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return raw


# --- the stages, in DVC order ------------------------------------------------------------------------
@dataclass
class Stage:
    name: str
    cmd: str
    upstream: list[str]
    outs: list[str]
    deps: list[str]


def dvc_stages(scratch: Path) -> list[Stage]:
    """The stages of the scratch ``dvc.yaml`` in the order ``dvc repro`` runs them."""
    from dvc.repo import Repo
    from dvc.repo.reproduce import get_active_graph, plan_repro

    with Repo(str(scratch)) as repo:
        graph = get_active_graph(repo.index.graph)
        out = []
        for s in plan_repro(graph):
            cmd = s.cmd if isinstance(s.cmd, str) else " && ".join(s.cmd)
            out.append(Stage(s.name, cmd, [u.name for u in graph.successors(s)],
                             [str(o.def_path) for o in s.outs], [str(d.def_path) for d in s.deps]))
    return out


# --- one stage in its own process ---------------------------------------------------------------------
class Probe:
    """Installed in a stage's process: times optimiser steps and encoded sentences, records the plan."""

    def __init__(self):
        self.steps: dict[int, list[float]] = {}
        self.rss_after_first_step: Optional[float] = None
        self.enc_sentences = 0
        self.enc_seconds = 0.0
        self.plans: list[dict] = []
        self.cuda = False
        self.start_rss_mb = current_rss_mb()

    def install(self) -> None:
        import torch
        from torch.optim.optimizer import register_optimizer_step_post_hook

        import sentlab.encoder as E
        import sentlab.train.loop as L

        register_optimizer_step_post_hook(self._on_step)
        plan = L.plan_steps
        probe = self

        def timed(encode):  # the encoder's two forward loops: encode() and the embedding cache's encode_poolings()
            def inner(enc, sentences, *a, **k):
                t = time.perf_counter()
                out = encode(enc, sentences, *a, **k)
                if enc.device.type == "cuda":
                    torch.cuda.synchronize()
                probe.enc_seconds += time.perf_counter() - t
                probe.enc_sentences += len(sentences)
                return out
            return inner

        def recorded_plan(n, cfg, world=1):
            r = plan(n, cfg, world)
            probe.plans.append({"sentences": n, "batch_size": cfg.batch_size, "grad_accum": cfg.grad_accum,
                                "steps_per_epoch": r[0], "total_steps": r[1]})
            return r

        E.SentenceEncoder._encode_sorted = timed(E.SentenceEncoder._encode_sorted)
        E.SentenceEncoder._encode_in_order = timed(E.SentenceEncoder._encode_in_order)
        L.plan_steps = recorded_plan

    def _on_step(self, optimizer, args, kwargs) -> None:
        import torch

        if any(p.is_cuda for g in optimizer.param_groups for p in g["params"][:1]):
            torch.cuda.synchronize()
            self.cuda = True
        self.steps.setdefault(id(optimizer), []).append(time.perf_counter())
        if self.rss_after_first_step is None:
            self.rss_after_first_step = current_rss_mb()

    def result(self) -> dict:
        import resource

        times = max(self.steps.values(), key=len) if self.steps else []
        gaps = [b - a for a, b in zip(times, times[1:])]
        out = {"steps": len(times), "sec_per_step": (sorted(gaps)[len(gaps) // 2] if gaps else None),
               "enc_sentences": self.enc_sentences, "enc_seconds": self.enc_seconds, "plans": self.plans,
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               "rss_after_first_step_mb": self.rss_after_first_step, "start_rss_mb": self.start_rss_mb,
               "cuda_peak_mb": None}
        try:
            import torch

            if torch.cuda.is_available() and torch.cuda.is_initialized():
                out["cuda_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
        except Exception:  # noqa: BLE001 - no CUDA: nothing to read
            pass
        return out


def current_rss_mb() -> Optional[float]:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _run_in_child(argv: list[str], scratch: str, env: dict, result_path: str, log_path: str) -> None:
    """Body of the stage process: run ``python script args`` in-process, record the probe and the error."""
    os.chdir(scratch)
    os.environ.clear()
    os.environ.update(env)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    import runpy

    from . import pipeline_util
    from .errors import AssetMissingError

    probe = Probe()
    probe.install()
    caught: list[BaseException] = []
    report = pipeline_util.report_errors

    def recording(fn):
        def inner():
            try:
                return fn()
            except BaseException as e:  # noqa: BLE001 - recorded, then handled as the stage would
                caught.append(e)
                raise
        return report(inner)

    pipeline_util.report_errors = recording
    script, args = argv[0], argv[1:]
    sys.argv = [script, *args]
    sys.path.insert(0, str(Path(script).resolve().parent))
    rc, error, kind = 0, "", ""
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException as e:  # noqa: BLE001 - a crash is a row, not the end of the preflight
        rc = 1
        caught.append(e)
        traceback.print_exc()
    if caught:
        e = caught[-1]
        kind = "asset" if isinstance(e, AssetMissingError) else type(e).__name__
        error = str(e) if isinstance(e, SentlabError) else _last_frame(e)
    sys.stdout.flush()
    sys.stderr.flush()
    Path(result_path).write_text(json.dumps({"rc": rc, "error": error, "kind": kind, **probe.result()}))


def _last_frame(e: BaseException) -> str:
    """``Type: message (file:line in function)`` of an unexpected exception: its innermost frame."""
    tb = traceback.extract_tb(e.__traceback__)
    where = f" ({Path(tb[-1].filename).name}:{tb[-1].lineno} in {tb[-1].name})" if tb else ""
    msg = " ".join(str(e).split())[:600]
    return f"{type(e).__name__}: {msg}{where}"


class StageRunner:
    """Runs stages in processes forked from one server that has imported the heavy modules once."""

    def __init__(self, scratch: Path, env: dict):
        import multiprocessing as mp

        self.scratch, self.env = scratch, env
        self.ctx = mp.get_context("forkserver")
        self.ctx.set_forkserver_preload(PRELOAD)
        self.logs = scratch / ".preflight" / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    def run(self, stage: Stage) -> tuple[dict, str]:
        """(result dict, log text) of one stage."""
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", stage.name)
        log, res = self.logs / f"{safe}.log", self.logs / f"{safe}.json"
        res.unlink(missing_ok=True)
        argv = shlex.split(stage.cmd)
        if len(argv) >= 2 and argv[0] in ("python", "python3") and argv[1].endswith(".py") and "&&" not in argv:
            p = self.ctx.Process(target=_run_in_child, args=(argv[1:], str(self.scratch), self.env, str(res),
                                                               str(log)))
            p.start()
            p.join()
            if res.is_file():
                out = json.loads(res.read_text())
            else:  # killed (out of memory, a signal) before it could write its result
                out = {"rc": p.exitcode if p.exitcode else 1, "error": f"the stage process ended with exit code "
                       f"{p.exitcode} before writing its result (killed, e.g. out of memory)", "kind": "killed"}
        else:
            out = self._subprocess(stage.cmd, log)
        return out, log.read_text(errors="replace") if log.is_file() else ""

    def _subprocess(self, cmd: str, log: Path) -> dict:
        """A stage whose command is not ``python script.py``: a child process (its own peak RSS is the children's)."""
        import resource

        with open(log, "w") as f:
            rc = subprocess.run(["bash", "-c", cmd], cwd=self.scratch, env=self.env, stdout=f,
                                stderr=subprocess.STDOUT).returncode
        text = log.read_text(errors="replace")
        return {"rc": rc, "error": _error_paragraph(text) if rc else "", "kind": "" if not rc else "failed",
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def _error_paragraph(log: str) -> str:
    """The ``sentlab: error:`` paragraph of a stage's log, else its last non-empty line."""
    lines = [ln for ln in log.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith("sentlab: error:"):
            return ln[len("sentlab: error:"):].strip()
    return lines[-1].strip()[:600] if lines else "no output"


# --- assets and stand-ins -----------------------------------------------------------------------------
def classify_asset(message: str) -> tuple[str, str]:
    """(asset, fetch command) named by an :class:`AssetMissingError` message."""
    from .assets import data_fetch_command, hub_fetch_command

    m = re.search(r"NLTK resource '([^']+)'", message)
    if m:
        return f"NLTK {m.group(1)}", f"python -m nltk.downloader {m.group(1)}"
    m = re.search(r"Data asset '([^']+)'", message)
    if m:
        return m.group(1), data_fetch_command(m.group(1))
    m = re.search(r"(?:Model|tokenizer of) '([^']+)'", message)
    if m:
        return f"hub model {m.group(1)}", hub_fetch_command(m.group(1))
    m = re.search(r"`([^`]+)`", message)
    return "asset", m.group(1) if m else ""


def standin_for(asset: str, raw: dict, profile: str) -> tuple[Optional[dict], str]:
    """(profile-block edit, description) that lets the pipeline go on without ``asset``, or (None, "")."""
    from .config import resolve_profile

    if asset == "nli":
        return {"prepare": {"nli": "sick_standin"}}, "prepare.nli: sick_standin (the SICK stand-in)"
    if asset == "NLTK wordnet":
        merged = resolve_profile(raw, profile)
        edit: dict = {}
        for section in ("methods", "methods_from"):
            for mid, block in (merged.get(section) or {}).items():
                eda = (block or {}).get("eda")
                if isinstance(eda, str) and "sr" in eda.split("+"):
                    edit.setdefault(section, {})[mid] = {"eda": _without_sr(eda)}
        variants = {}
        for name, spec in ((merged.get("ablations") or {}).get("variants") or {}).items():
            eda = ((spec or {}).get("set") or {}).get("eda")
            if isinstance(eda, str) and "sr" in eda.split("+"):
                variants[name] = {"set": {"eda": _without_sr(eda)}}
        if variants:
            edit["ablations"] = {"variants": variants}
        return edit, "EDA `sr` (WordNet synonyms) replaced by `rd` where it was asked for"
    return None, ""


def _without_sr(eda: str) -> str:
    rest = [op for op in eda.split("+") if op != "sr"]
    return "+".join(rest) if rest else "rd"


def corpus_shortfall(real) -> Optional[tuple[str, str]]:
    """(asset, fetch) when the corpus here is smaller than the profile asks for: ``allow_smaller`` would
    otherwise let a paper run train on a head sample without a word."""
    from .assets import ASSETS, data_fetch_command, resolve_data

    try:
        r = resolve_data(real.prepare.corpus)
    except SentlabError:
        return None  # prepare's own row says it
    if r.path.name == Path(ASSETS[real.prepare.corpus].paths[0]).name:
        return None
    with open(r.path, "rb") as f:
        lines = sum(1 for _ in f)
    if lines >= real.prepare.size:
        return None
    return (f"{real.prepare.corpus} (only {r.path} here, {lines:,} lines; the profile asks for {real.prepare.size:,})",
            data_fetch_command(real.prepare.corpus))


def backbone_standin(backbone: str, scratch: Path) -> tuple[Optional[Path], str, Optional[tuple[str, str]]]:
    """(a scratch mirror that holds the backbone's stand-in, for the stage processes' SENTLAB_DATA_MIRROR, or None
    when the backbone is here; how the backbone is had; (asset, fetch) when it cannot be)."""
    from . import backbones
    from .assets import hub_fetch_command, mirror_root, resolve_model
    from .backbones.standin import standin_mirror

    try:
        return None, f"{backbone} ({resolve_model(backbone)})", None
    except SentlabError:
        pass
    if backbones.spec(backbone) is None:
        return None, f"{backbone}: not here", (f"hub model {backbone}", hub_fetch_command(backbone))
    dest = scratch / ".preflight" / "mirror"
    try:
        standin_mirror(backbone, dest, mirror_root())
    except SentlabError:
        return None, f"{backbone}: not here, no offline tokenizer", (f"hub model {backbone}",
                                                                     hub_fetch_command(backbone))
    return dest, (f"stand-in of {backbone} (weights not here): the original checkpoint's layout, random values, "
                  f"loaded from the mirror's models/{backbone}"), None


# --- projection ---------------------------------------------------------------------------------------
def _sts_counts(scratch: Path) -> dict:
    import pandas as pd

    f = scratch / "data" / "sts" / "sts.parquet"
    if not f.is_file():
        return {}
    t = pd.read_parquet(f, columns=["task", "split"])
    return {f"{a}/{b}": int(n) for (a, b), n in t.groupby(["task", "split"]).size().items()}


def project(rows: list[Row], real, sl: dict, scratch: Path) -> None:
    """Fill each row's projection for the full run of the real profile (``real``: its Params)."""
    from .train.loop import plan_steps
    from .train.run import method_params, resolve_train

    counts = _sts_counts(scratch)
    test = {k: v for k, v in counts.items() if not k.endswith("/dev") and not k.endswith("/train")}
    dev_full = real.train.dev_max_pairs or counts.get("STSBenchmark/dev", 0)
    mp = real.evaluate.max_pairs
    full_pairs = sum(min(v, mp) if mp else v for v in test.values())

    def eval_ratio(pairs: int) -> float:  # the full run's evaluated pairs over the slice's (at the row's max_pairs)
        return full_pairs / max(1, sum(min(v, pairs) for v in test.values())) if test else 1.0
    size_ratio = min(real.prepare.size, UPSTREAM_ROWS["train"]) / max(1, min(sl["size"], real.prepare.size))
    for row in rows:
        p = row.probe
        if row.status != "ok" or not p:
            continue
        plans = p.get("plans") or []
        if plans and p.get("sec_per_step"):
            slice_plan = plans[-1]
            try:  # collect, never stop: a row without a projection says why
                mparams = method_params(real, *train_target(row.cmd, real))
                cfg = resolve_train(real, mparams)
                corpus_full = _full_corpus(mparams, real, slice_plan, sl)
                _, total = plan_steps(corpus_full, cfg)
            except (SentlabError, ValueError, argparse.ArgumentError) as e:
                row.note = (row.note + "; " if row.note else "") + f"projection: {e}"
                continue
            batch_ratio = (cfg.batch_size * cfg.grad_accum) / (slice_plan["batch_size"] * slice_plan["grad_accum"])
            step_s = p["sec_per_step"] * batch_ratio
            evals = total // cfg.eval_every + 1
            dev_s = (p["enc_seconds"] / max(1, p["enc_sentences"])) * (p["enc_sentences"] / max(1, _evals(p, sl))) \
                * (dev_full / max(1, sl["dev_max_pairs"])) * evals
            row.full_steps, row.projected_s = total, total * step_s + dev_s
            peak, steady = p.get("peak_rss_mb"), p.get("rss_after_first_step_mb")
            if peak and steady:
                row.projected_peak_mb = peak + max(0.0, peak - steady) * (batch_ratio - 1)
            if p.get("cuda_peak_mb"):
                row.projected_cuda_mb = p["cuda_peak_mb"] * batch_ratio  # an upper bound: weights do not scale
        elif p.get("enc_sentences") and row.stage.startswith("evaluate"):
            fixed = max(0.0, row.seconds - p["enc_seconds"])
            row.projected_s = fixed + p["enc_seconds"] * eval_ratio(row.eval_pairs or sl["max_pairs"])
            row.projected_peak_mb = p.get("peak_rss_mb")
        elif row.stage in ("prepare", "annotate"):
            row.projected_s = row.seconds * size_ratio
            mem_ratio = size_ratio
            if row.stage == "annotate":  # annotation holds one shard at a time: memory follows the shard size
                shard = real.annotate.shard_size
                mem_ratio = min(real.prepare.size, shard) / max(1, min(sl["size"], real.prepare.size, shard))
            start = p.get("start_rss_mb") or 0.0
            if p.get("peak_rss_mb"):
                row.projected_peak_mb = start + (p["peak_rss_mb"] - start) * mem_ratio
        else:
            row.projected_s, row.projected_peak_mb = row.seconds, p.get("peak_rss_mb")


def _train_args(cmd: str) -> argparse.Namespace:
    """The arguments of a ``pipeline/train.py`` stage command, parsed as the stage parses them."""
    from .train.run import add_train_arguments

    argv = shlex.split(cmd)
    script = [i for i, a in enumerate(argv) if a.endswith("train.py")]
    if not script:
        raise ValueError(f"`{cmd}` is not a pipeline/train.py command")
    ap = argparse.ArgumentParser(exit_on_error=False)
    add_train_arguments(ap)
    return ap.parse_args(argv[script[0] + 1:])


def train_target(cmd: str, real) -> tuple[str, dict]:
    """(method id, overrides of its block) that a ``pipeline/train.py`` stage command trains, read from its
    arguments as the stage reads them — not from the stage name, which for a seed stage is ``<method>-<seed>``
    (``train_seed@simcse-43``) and for an ablation the variant."""
    from .train.run import ablation_spec, parse_overrides

    args = _train_args(cmd)
    if args.ablation:
        return ablation_spec(real, args.ablation)
    if not args.method:
        raise ValueError(f"no method in the stage command `{cmd}`")
    return args.method, parse_overrides(args.overrides)


def params_file_of(cmd: str) -> Optional[str]:
    """The method or ablation-variant params file (its stem) a train stage command trains with: ``paser`` for
    ``train@paser`` and every ``train_seed@paser-<seed>``, the variant for ``ablate@<variant>``; None otherwise."""
    try:
        args = _train_args(cmd)
    except (ValueError, argparse.ArgumentError):
        return None
    return args.ablation or args.method


def _evals(p: dict, sl: dict) -> int:
    """Dev evaluations in a slice run: one at the end (eval_every = max_steps)."""
    return 1


def _full_corpus(mparams, real, slice_plan: dict, sl: dict) -> int:
    """Sentences the full run's method trains on: its corpus at full size, capped by ``max_sentences``."""
    corpus = getattr(mparams, "corpus", "train")
    if corpus == "nli" or getattr(mparams, "nli", None) is not None and corpus != "train":
        n = UPSTREAM_ROWS["nli"]
    elif corpus == "train":
        n = min(real.prepare.size, UPSTREAM_ROWS["train"])
    else:  # a corpus prepare writes whole (e.g. the distinct STS sentences): as in the slice
        n = slice_plan["sentences"]
    cap = getattr(mparams, "max_sentences", None)
    return min(n, cap) if cap else n


# --- the table ----------------------------------------------------------------------------------------
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
    lines = [f"# Preflight: profile `{meta['profile']}`", "",
             (f"**Partial: {meta['partial']}.** " if meta.get("partial") else "") +
             f"{ok}/{len(rows)} stages ok. Backbone: {meta['backbone']}. Device: {meta['device']}. "
             f"Slice: {meta['slice']}. Scratch: `{meta['scratch']}`.", "",
             f"Projected full run on this device: **{_hms(meta['projected_total_s'])}** (sum of the stages, one "
             f"after another), peak RSS **{_fmt(meta['projected_peak_mb'], 0)} MB**"
             + (f", CUDA peak **{_fmt(meta['projected_cuda_mb'], 0)} MB**" if meta.get("projected_cuda_mb") else "")
             + ". Linear estimates from the slice.", "",
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


# --- the run ------------------------------------------------------------------------------------------
def preflight(workspace: Path, profile: Optional[str] = None, *, out: Optional[Path] = None,
              scratch: Optional[Path] = None, sl: Optional[dict] = None, keep_weights: bool = False,
              stages_filter: Optional[str] = None, quiet: bool = False) -> tuple[int, list[Row], dict]:
    """Run the preflight; returns (exit status, rows, meta). See the module docstring."""
    from .config import load_params, read_yaml, resolve_profile

    workspace = Path(workspace).resolve()
    sl = {**SLICE, **(sl or {})}
    profile = profile or read_yaml(workspace / "params.yaml").get("profile", "quick")
    scratch = Path(scratch or tempfile.mkdtemp(prefix=f"sentlab-preflight-{profile}-")).resolve()
    if scratch == workspace or workspace in scratch.parents and not str(scratch.relative_to(workspace)).startswith("."):
        raise SentlabError(f"The preflight's scratch folder {scratch} must not be the workspace or inside its "
                           f"tracked tree; pick a folder elsewhere (--scratch).")
    scratch.mkdir(parents=True, exist_ok=True)
    make_scratch(workspace, scratch)
    raw = read_yaml(scratch / "params.yaml")
    try:  # the profile as it would run (projection); invalid params are resolve_params' row, not a crash here
        real = load_params(scratch / "params.yaml", profile=profile)
    except SentlabError:
        real = None
    extra: dict = {}
    rows: list[Row] = []
    write_slice_params(scratch, profile, sl, check=real is not None)
    env = _scratch_env(scratch)
    backbone = real.model.backbone if real else str((resolve_profile(raw, profile).get("model") or {}).get("backbone"))
    standin, how, missing_backbone = backbone_standin(backbone, scratch)
    if standin is not None:
        env["SENTLAB_DATA_MIRROR"] = str(standin)
    stages = dvc_stages(scratch)
    if stages_filter:
        stages = _with_upstream(stages, stages_filter)
    stages = consumers_first(stages)
    runner = StageRunner(scratch, env)
    out_dir = out or scratch / "reports" / "preflight"
    status: dict[str, Row] = {}
    affected: set[str] = set()          # methods / variants whose params a stand-in changed
    standins: dict[str, tuple[str, str]] = {}
    consumers = _consumers(stages)
    whitening_pairs = whitening_min_pairs(resolve_profile(raw, profile))
    meta = {"profile": profile, "backbone": how, "device": _device(), "slice": sl, "scratch": str(scratch),
            "workspace": str(workspace)}
    for st in stages:
        row = Row(st.name, st.cmd, model=how)
        bad = [u for u in st.upstream if u in status and status[u].status not in ("ok",)
               and not status[u].note.startswith("continued")]
        if bad:
            row.status, row.error = "blocked", f"not run: {', '.join(bad)} did not succeed"
        elif st.name == WHITENING_STAGE and whitening_pairs > sl["max_pairs"]:
            _with_params(runner, scratch, profile, sl, _merge(extra, {"evaluate": {"max_pairs": whitening_pairs}}),
                         lambda: _run_one(runner, st, row), restore=extra)
            row.eval_pairs = whitening_pairs
            row.note = (f"run with {whitening_pairs} pairs per task (the other evaluations: {sl['max_pairs']}): "
                        f"its fit on the STS pool needs 1.5x the backbone's width in sentences")
        else:
            _run_one(runner, st, row)
            if row.status == "needs asset":
                edit, desc = standin_for(row.asset, raw, profile)
                if edit:
                    standins[row.asset] = (row.fetch, desc)
                    extra = _merge(extra, edit)
                    before = _method_files(scratch)
                    _apply_params(runner, scratch, profile, sl, extra)
                    after = _method_files(scratch)
                    affected |= {k for k in after if after[k] != before.get(k)}  # this stage's row says it already
                    again = Row(st.name, st.cmd, model=how)
                    _run_one(runner, st, again)
                    row.note = f"continued with a stand-in, {desc}: that run {again.status}" + (
                        f" ({again.error})" if again.error else "")
                    if again.status == "ok":
                        row.probe, row.sec_per_step, row.steps = again.probe, again.sec_per_step, again.steps
                        row.init = again.init
                    else:
                        row.note = f"stand-in ({desc}) {again.status}: {again.error}"
            elif row.status == "ok" and row.steps and params_file_of(st.cmd) in affected:
                asset = next(a for a in standins if a != "nli")  # the method-level stand-ins (WordNet)
                row.status, row.asset, row.fetch = "needs asset", asset, standins[asset][0]
                row.note = f"continued with a stand-in, {standins[asset][1]}: that run ok"
            if st.name == "prepare" and row.status == "ok" and real is not None:
                short = corpus_shortfall(real)
                if short:
                    row.status, (row.asset, row.fetch) = "needs asset", short
                    row.note = "continued with the corpus here (the full run would train on it without a word)"
        if missing_backbone and row.status == "needs asset" and row.asset == missing_backbone[0]:
            row.fetch = missing_backbone[1]
        status[st.name] = row
        rows.append(row)
        if real is not None:  # projected as it comes: a partial table (a long run stopped early) has its figures
            project([row], real, sl, scratch)
        if not quiet:
            print(f"preflight: {st.name}: {row.status} ({row.seconds:.1f}s)" + (f": {row.error[:200]}" if row.error
                  else ""), file=sys.stderr, flush=True)
        if not keep_weights:
            _prune_weights(scratch, st, consumers, status)
        _write(rows, {**meta, "partial": f"{len(rows)} of {len(stages)} stages so far"}, out_dir)
    meta["standin_mirror"] = str(standin) if standin else None
    return _finish(rows, meta, out_dir, quiet)


def _apply_params(runner: "StageRunner", scratch: Path, profile: str, sl: dict, extra: dict) -> None:
    """The scratch params' profile block = the slice + ``extra``, and resolve_params run on it (the files the
    stages read)."""
    params = Stage("resolve_params", "python pipeline/params.py", [], [], [])
    write_slice_params(scratch, profile, sl, extra)
    _run_one(runner, params, Row(params.name, params.cmd))


def _with_params(runner: "StageRunner", scratch: Path, profile: str, sl: dict, extra: dict, run, restore: dict) -> None:
    """``run()`` with the params of :func:`_apply_params` (``extra``), then those of ``restore`` again."""
    _apply_params(runner, scratch, profile, sl, extra)
    try:
        run()
    finally:
        _apply_params(runner, scratch, profile, sl, restore)


def _run_one(runner: StageRunner, st: Stage, row: Row) -> None:
    t = time.perf_counter()
    res, log = runner.run(st)
    row.seconds = time.perf_counter() - t
    row.init = _init_of(runner.scratch, st) if res.get("rc", 1) == 0 else ""
    row.probe = res
    if res.get("rc", 1) == 0:
        row.status = "ok"
    elif res.get("kind") == "asset":
        row.status = "needs asset"
        row.asset, row.fetch = classify_asset(res.get("error", ""))
        row.error = ""
        row.note = res.get("error", "")[:300]
    else:
        row.status = "failed"
        row.error = res.get("error") or _error_paragraph(log)
    row.steps = res.get("steps") or None
    row.sec_per_step = res.get("sec_per_step")
    plans = res.get("plans") or []
    if plans:
        row.batch = plans[-1]["batch_size"] * plans[-1]["grad_accum"]
    if res.get("enc_sentences"):
        row.sentences = res["enc_sentences"]
        row.sec_per_sentence = res["enc_seconds"] / res["enc_sentences"]
    row.peak_rss_mb, row.cuda_peak_mb = res.get("peak_rss_mb"), res.get("cuda_peak_mb")


def _init_of(scratch: Path, st: Stage) -> str:
    """``module=source`` of the ``init`` in the ``sentlab.json`` of the model a training stage wrote ("" otherwise)."""
    for out in st.outs:
        f = scratch / out / "sentlab.json"
        if out.startswith("models/") and f.is_file():
            init = json.loads(f.read_text()).get("init") or {}
            return ", ".join(f"{k}={v}" for k, v in init.items())
    return ""


def _method_files(scratch: Path) -> dict[str, Any]:
    """{method id or variant: the params it trains with} under the scratch params (which a stand-in edits)."""
    from .config import load_params, resolved_files

    files = resolved_files(load_params(scratch / "params.yaml"))
    return {Path(k).stem: v for k, v in files.items() if k.startswith(("methods/", "ablations/variants/"))}


def _merge(a: dict, b: dict) -> dict:
    from .config import deep_merge

    return deep_merge(a, b)


def _scratch_env(scratch: Path) -> dict:
    env = dict(os.environ)
    env.pop("SENTLAB_PARENT_RUN_ID", None)
    bindir = str(Path(sys.executable).parent)
    env.update(PATH=bindir + os.pathsep + env.get("PATH", ""), MLFLOW_TRACKING_URI=f"sqlite:///{scratch / 'mlflow.db'}",
               SENTLAB_LOG=env.get("SENTLAB_LOG", "WARNING"), TOKENIZERS_PARALLELISM="false")
    return env


def _device() -> str:
    import torch

    if torch.cuda.is_available():
        return f"CUDA {torch.cuda.get_device_name(0)}"
    return f"CPU ({os.cpu_count()} cores, torch {torch.__version__})"


def _with_upstream(stages: list[Stage], pattern: str) -> list[Stage]:
    """The stages matching ``pattern`` (a regex on the name) and every stage they depend on, in order."""
    by = {s.name: s for s in stages}
    want = {s.name for s in stages if re.search(pattern, s.name)}
    todo = list(want)
    while todo:
        for u in by[todo.pop()].upstream:
            if u not in want:
                want.add(u)
                todo.append(u)
    return [s for s in stages if s.name in want]


def consumers_first(stages: list[Stage]) -> list[Stage]:
    """DVC's order, except that the stages reading a model (its evaluation, a method trained from it) run as soon
    as it is trained, so that its weights can go (:func:`_prune_weights`). In DVC's order every training comes
    before every evaluation: a paper preflight would hold all 124 bert-base models at once (~60 GB)."""
    by_name = {s.name: s for s in stages}
    readers = _consumers(stages)
    out: list[Stage] = []
    done: set[str] = set()

    def emit(s: Stage) -> None:
        out.append(s)
        done.add(s.name)
        for model in s.outs:
            for c in map(by_name.get, readers.get(model, [])):
                if c.name not in done and all(u in done for u in c.upstream):
                    emit(c)

    for s in stages:
        if s.name not in done:
            emit(s)
    return out


def _consumers(stages: list[Stage]) -> dict[str, list[str]]:
    """``models/<x>`` out -> the stages that depend on exactly it, in ``stages``' order (its weights can go once
    they ran)."""
    out: dict[str, list[str]] = {}
    for s in stages:
        for d in s.deps:
            if d.startswith("models/") and d.count("/") == 1:
                out.setdefault(d, []).append(s.name)
    return out


def _prune_weights(scratch: Path, st: Stage, consumers: dict, done: dict) -> None:
    """Delete a trained model's weights in the scratch folder once every stage that reads them ran
    (a paper preflight trains ~70 bert-base models: 30 GB otherwise); its sentlab.json stays for the report."""
    for out_path, users in consumers.items():
        if users and set(users) <= set(done):
            for f in (scratch / out_path).glob("*.safetensors"):
                f.unlink()


def _write(rows: list[Row], meta: dict, out: Path) -> str:
    """Write preflight.md/.json (also after every stage: a long run shows where it is); returns the Markdown."""
    from .io import write_json, write_text

    meta["projected_total_s"] = sum(r.projected_s or 0 for r in rows)
    meta["projected_peak_mb"] = max([r.projected_peak_mb or 0 for r in rows] or [0])
    cuda = [r.projected_cuda_mb for r in rows if r.projected_cuda_mb]
    meta["projected_cuda_mb"] = max(cuda) if cuda else None
    meta["counts"] = {s: sum(r.status == s for r in rows) for s in ("ok", "failed", "needs asset", "blocked")}
    md = markdown(rows, meta)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "preflight.md", md)
    write_json(out / "preflight.json", {"meta": meta, "rows": [asdict(r) for r in rows]})
    return md


def _finish(rows: list[Row], meta: dict, out: Path, quiet: bool) -> tuple[int, list[Row], dict]:
    meta.pop("partial", None)
    md = _write(rows, meta, out)
    if not quiet:
        print(md)
        print(f"preflight: wrote {out / 'preflight.md'} and {out / 'preflight.json'}")
    rc = 0 if rows and all(r.status == "ok" for r in rows) else 1
    return rc, rows, meta


# --- CLI ----------------------------------------------------------------------------------------------
def cmd_preflight(args) -> int:
    sl = {k: getattr(args, k) for k in SLICE if getattr(args, k, None) is not None}
    rc, _, _ = preflight(Path(args.workspace), args.profile, out=Path(args.out) if args.out else None,
                         scratch=Path(args.scratch) if args.scratch else None, sl=sl, keep_weights=args.keep_weights,
                         stages_filter=args.stages)
    return rc


def register_cli(subparsers) -> None:
    p = subparsers.add_parser("preflight", help="run every stage of a profile on a tiny slice in a scratch copy; "
                                                "a table of ok / failed / needs asset with time and memory projections")
    p.add_argument("--profile", default=None, choices=["quick", "smoke", "paper"],
                   help="default: params.yaml's `profile:` line")
    p.add_argument("--workspace", default=".", help="the repository to check (default: here); never written")
    p.add_argument("--scratch", default=None, help="scratch folder (default: a new temporary folder)")
    p.add_argument("--out", default=None, help="folder for preflight.md/.json (default: <scratch>/reports/preflight)")
    p.add_argument("--stages", default=None, help="only stages whose name matches this regex (and their upstream)")
    p.add_argument("--keep-weights", action="store_true", help="keep the trained models' weights in the scratch folder")
    for k, v in SLICE.items():
        p.add_argument(f"--{k.replace('_', '-')}", dest=k, type=int, default=None, help=f"slice {k} (default {v})")
    p.set_defaults(func=cmd_preflight)
