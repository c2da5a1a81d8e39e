"""``sentlab plan --profile P``: what a profile costs on GPUs, before any GPU time is spent (issue #54 §4).

Per paper table and in total: trainings, optimiser steps, GPU-hours, disk. Every figure is marked **measured**
(a step time or an evaluation rate timed on a GPU: :data:`GPU_RUN` names the run and its card) or **estimated**
(and from what). The steps are exact: the profile's corpus sizes, batches, epochs and step caps through the
training loop's own :func:`sentlab.train.loop.plan_steps`. The seconds are measured step times x steps, plus
the dev evaluations at the measured encoding rate; a method without a measured step time takes the per-sentence
time of the method it is built like, times a stated factor (:data:`LIKE`), and is marked estimated.

Not counted: the resume-checkpoint writes (issue #54 §6), queueing, the CPU stages (sources, prepare, annotate:
listed apart, they hold no GPU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

from ..errors import SentlabError

MEASURED_AT = "fd5a861"   # the commit the GPU checklist ran at
GPU_RUN = ("the shared GPU checklist on one NVIDIA H100 80GB HBM3, 2026-11-26, at commit " + MEASURED_AT + " "
           "(benchmarks/RESULTS.md \"On a GPU\", benchmarks/preflight-paper-gpu.md: each method 5 steps at its paper "
           "batch on the hub-shaped bert-base stand-in)")
GPU_CARD = "H100 80GB"

# What each step time was measured with (issue #65 §5): bert-base-uncased's shape, max length 32, bf16 autocast, and
# (method: seconds per optimiser step, batch, its block's values) as the paper profile resolved them at MEASURED_AT,
# the schedule keys aside (MEASURED_WITH). Where the checklist ran otherwise, the block says what ran: paser's EDA
# was RD (SR needs WordNet, not on the device); paser_sup read the SICK stand-in's 123 triples (prepare.nli).
# A profile whose values differ counts that method's step time as estimated, naming the values (measurement_changes).
MEASURED_WITH = {"backbone": "bert-base-uncased", "max_length": 32, "precision": "bf16", "grad_accum": 1}
MEASURED_NLI = {"paser_sup": "sick_standin"}
MEASURED = {
    "simcse": (0.04, 64, {"temperature": 0.05}),
    "ct": (0.07, 64, {"export": "second", "negatives": 7, "pooling": "mean"}),
    "moco": (0.06, 64, {"key_dropout": True, "momentum": 0.885, "queue_size": 256, "temperature": 0.05}),
    "moco_srl": (0.08, 64, {"key_dropout": True, "momentum": 0.885, "queue_size": 256, "srl_min_args": 1,
        "temperature": 0.05}),
    "ptbert": (0.1, 64, {"attend_to": "cls", "attn_dropout": None, "key_dropout": True,
        "key_second_attention": "momentum", "momentum": 0.885, "num_heads": None, "pseudo_len": 128,
        "queue_size": 256, "temperature": 0.05}),
    "paser": (0.65, 64, {"chunk_k": 1, "chunk_union": "one_each", "corpus": "sts_unlabeled", "decoder_dropout": 0.1,
        "decoder_embeddings": "encoder", "decoder_ffn": None, "decoder_heads": 16, "decoder_layers": 6, "eda": "rd",
        "eda_alpha_rd": 0.1, "eda_alpha_rs": 0.1, "eda_alpha_sr": 0.5, "eda_edit_phrases": "sr",
        "eda_views": "independent", "gen_reduction": "sum", "gen_weight": 1.0, "grad_clip": "global", "head_lr": None,
        "lm_head": "pretrained", "m": 10.0, "mask_unit": "wordpiece", "memory_norm": False, "memory_order": "paper",
        "memory_type_embeddings": False, "mlm_prob": 0.15, "mlm_weight": 1.0, "n": 10.0, "phrases": "rake",
        "pooling": "cls", "project_masked": False, "recon_fit": 2000, "recon_heldout": 500,
        "recon_heldout_from": "other", "signal_abs_diff": True, "signal_abs_prod": True, "top_k": 5}),
    "paser_sup": (1.93, 64, {"alpha": 1.0, "chunk_k": 1, "chunk_union": "one_each", "corpus": "nli",
        "decoder_dropout": 0.1, "decoder_embeddings": "encoder", "decoder_ffn": None, "decoder_heads": 16,
        "decoder_init": "random", "decoder_layers": 6, "eda": "none", "eda_alpha_rd": 0.1, "eda_alpha_rs": 0.1,
        "eda_alpha_sr": 0.5, "eda_edit_phrases": "sr", "eda_views": "independent", "gen_reduction": "sum",
        "gen_weight": 1.0, "grad_clip": "global", "hard_negative_weight": 0.0, "head_lr": None, "lm_head": "paser",
        "m": 10.0, "mask_unit": "wordpiece", "memory_norm": False, "memory_order": "paper",
        "memory_type_embeddings": False, "mlm_prob": 0.15, "mlm_weight": 0.0, "mlp_head": True, "n": 10.0,
        "phrases": "rake", "pooling": "cls", "project_masked": False, "recon_fit": 2000, "recon_heldout": 500,
        "recon_heldout_from": "other", "signal_abs_diff": True, "signal_abs_prod": True, "temperature": 0.05,
        "top_k": 5}),
    "l2p": (0.36, 512, {"ascent_dropout": "fresh", "ascent_grad": "binary", "beta": 0.5, "continuous": False,
        "feature_mask": True, "feature_scope": "view", "layers": 2, "learn": True, "mlp_train": True,
        "noise_init": 0.1, "noise_max_norm": None, "noise_step": 0.1, "perturbation": "mask", "phi": 0.05, "steps": 4,
        "temperature": 0.05, "token_mask": True, "token_norm": "vector", "zero_grad": "keep"}),
}
# keys of a method's block that only count steps (exact, from the profile) or are compared resolved (MEASURED_WITH)
NOT_COMPARED = ("backbone", "batch_size", "max_length", "lr", "epochs", "max_steps", "eval_every", "max_sentences")
STEP_S = {m: (s, batch) for m, (s, batch, _) in MEASURED.items()}   # seconds per step at that batch
CHANGED = f": step time measured at {MEASURED_AT} with other values (measured -> this profile), so estimated: "

# A method without a measured step: (the measured method it is built like, factor on its per-sentence time, why).
LIKE = {
    "moco_reorder": ("moco", 1.0, "MoCo with another augmentation"),
    "moco_duplication": ("moco", 1.0, "MoCo with another augmentation"),
    "moco_deletion": ("moco", 1.0, "MoCo with another augmentation"),
    "simcse_crop": ("simcse", 1.0, "SimCSE with another augmentation"),
    "simcse_deletion": ("simcse", 1.0, "SimCSE with another augmentation"),
    "simcse_mlm": ("simcse", 1.5, "SimCSE plus a masked-LM pass and the vocabulary head"),
    "simcse_pp": ("simcse", 1.0, "SimCSE's passes, another loss"),
    "consert": ("simcse", 1.0, "two augmented views through one encoder"),
    "esimcse": ("simcse", 1.5, "SimCSE plus a momentum encoder's forward pass"),
    "diffcse": ("simcse", 2.0, "SimCSE plus a generator and a discriminator pass"),
    "rankcse": ("simcse", 2.0, "SimCSE plus two teachers' forward passes"),
    "simcse_sup": ("simcse", 1.5, "three sentences per example (two in SimCSE)"),
    "sg_opt": ("simcse", 1.5, "a trained and a frozen guide encoder"),
    "posbow_adv": ("simcse", 1.3, "SimCSE on roberta-base plus POS/BOW heads"),
    "prompt": ("l2p", 1.0, "the L2P-CSR family's passes"),
    "prompt_l2p": ("l2p", 1.0, "the L2P-CSR family's passes"),
}

# Corpus sizes of the full run (a sample here never counts): SimCSE's wiki1m (10^6 lines, SimCSE §4.1), its NLI
# triples (275,601, SimCSE §5.1), the distinct STS/SICK sentences prepare writes (29,482: its output line
# on the SentEval files), and ConSERT's corpus as its code builds it (89,192: both sides of every STS/SICK pair,
# repeats kept; tests/test_sts_data.py counts it on the SentEval files). An unknown corpus is an error, never 10^6.
CORPUS_ROWS = {"train": 1_000_000, "nli": 275_601, "sts_unlabeled": 29_482, "sts_all_sides": 89_192}

# The 7-task STS evaluation of a bert-base model on the H100 of GPU_RUN: 4.7 s for 31,099 pairs (fp32).
STS_EVAL_S, STS_PAIRS, STSB_DEV_PAIRS = 4.7, 31_099, 1_500
STAGE_START_S = 20.0   # estimated: a stage process's start (imports, model load), not timed on the GPU
TRANSFER_S = 300.0     # estimated: SentEval's 7 transfer tasks (logistic regression, 10-fold CV on 4 of them)
RETRIEVAL_S = 60.0     # estimated: QQP's ~540k questions and AskUbuntu encoded at the STS evaluation's rate
# GLUE training-set sizes (the GLUE benchmark's train splits) and steps: batch 32 x 128 tokens = SimCSE's 64 x 32
# x 2 views of tokens a step, so SimCSE's measured step time per step (estimated: same tokens, another head).
GLUE_TRAIN = {"WNLI": 635, "QNLI": 104_743, "QQP": 363_846, "SST-2": 67_349, "STS-B": 5_749, "MRPC": 3_668,
              "RTE": 2_490, "CoLA": 8_551, "MNLI": 392_702}
BYTES_PER_PARAM = 4    # fp32 safetensors
BACKBONE_PARAMS = {"bert-base-uncased": 109_482_240, "roberta-base": 124_645_632, "bert-large-uncased": 335_141_888,
                   "distilbert-base-uncased": 66_362_880}
CHECKPOINT_GB = 1.8    # a resume checkpoint of a bert-base training (issue #54: 1.3-1.8 GB), estimated
# the data files a profile downloads (GB, and where the figure comes from); GloVe only where its baseline runs
DATA_GB = {"wiki1m": (0.12, "SimCSE's wiki1m_for_simcse.txt"),
           "glove": (7.6, "GloVe 840B 300-d: its 2 GB zip and 5.6 GB unpacked, both on disk while it unpacks")}


@dataclass
class Cost:
    trainings: int = 0
    steps: int = 0                # training steps (GLUE's fine-tuning steps: ft_steps)
    measured_s: float = 0.0       # GPU seconds from measured step times / rates x exact counts
    estimated_s: float = 0.0      # GPU seconds from estimated inputs (``estimated`` says which)
    disk_gb: float = 0.0          # model folders (estimated: parameters x 4 bytes)
    ft_steps: int = 0
    estimated: set = field(default_factory=set)

    def add(self, other: "Cost") -> None:
        for k in ("trainings", "steps", "measured_s", "estimated_s", "disk_gb", "ft_steps"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.estimated |= other.estimated

    @property
    def gpu_s(self) -> float:
        return self.measured_s + self.estimated_s


def _per_sentence(method: str) -> tuple[float, Optional[str]]:
    """(seconds per training sentence on the GPU of GPU_RUN, None when measured else why estimated)."""
    if method in STEP_S:
        s, batch = STEP_S[method]
        return s / batch, None
    if method in LIKE:
        base, factor, why = LIKE[method]
        s, batch = STEP_S[base]
        return s / batch * factor, f"{method}: {base}'s step (measured at {MEASURED_AT}) x {factor} ({why})"
    s, batch = STEP_S["simcse"]
    return s / batch, f"{method}: SimCSE's step (measured at {MEASURED_AT}; no measurement of a method like it)"


def measurement_changes(method: str, params, mparams, cfg) -> list[str]:
    """The values of ``method``'s training that differ from what its step time was measured with (``MEASURED``):
    ``key measured -> now`` each; [] when it runs as measured (the batch is scaled, and said so, apart)."""
    from ..train.run import backbone_of

    if method not in MEASURED:
        return []
    precision = "bf16" if cfg.precision == "auto" else cfg.precision   # auto: bf16 on the plan's GPU (an H100)
    now = {"backbone": backbone_of(params, mparams), "max_length": cfg.max_length, "precision": precision,
           "grad_accum": cfg.grad_accum}
    out = [f"{k} {v!r} -> {now[k]!r}" for k, v in MEASURED_WITH.items() if now[k] != v]
    if method in MEASURED_NLI and params.prepare.nli != MEASURED_NLI[method]:
        out.append(f"prepare.nli {MEASURED_NLI[method]!r} -> {params.prepare.nli!r}")
    block = mparams.model_dump(mode="json")
    out += [f"{k} {v!r} -> {block[k]!r}" for k, v in MEASURED[method][2].items()
            if k not in NOT_COMPARED and k in block and block[k] != v]
    return out


def training_cost(params, spec) -> Cost:
    """One training of the stage list (``spec``: its :class:`~sentlab.config.models.ModelSpec`): its steps (exact),
    seconds (measured step time or estimated), disk."""
    from ..preflight.projection import model_params
    from ..methods import get_method
    from ..train.loop import plan_steps
    from ..train.run import backbone_of, resolve_train

    name, method = spec.name, spec.method
    mparams = model_params(params, spec)
    cfg = resolve_train(params, mparams)
    corpus = getattr(mparams, "corpus", None) or get_method(method).corpus
    if corpus not in CORPUS_ROWS:
        raise SentlabError(f"`sentlab plan` knows no size for the corpus `{corpus}` of {name} (known: "
                           f"{', '.join(CORPUS_ROWS)}); add its full-run row count to "
                           f"sentlab.campaign.plan.CORPUS_ROWS.")
    rows = CORPUS_ROWS[corpus]
    if corpus == "train":
        rows = min(params.prepare.size, rows)
    _, steps = plan_steps(mparams.train_sentences(rows), cfg)
    per_sentence, why = _per_sentence(method)
    measured_batch = STEP_S.get(method, (0, cfg.batch_size))[1]
    step_s = per_sentence * cfg.batch_size * cfg.grad_accum
    est = {why} if why else set()
    if why is None and measured_batch != cfg.batch_size * cfg.grad_accum:
        est.add(f"{method}: measured at batch {measured_batch}, scaled to {cfg.batch_size}")
    if why is None:   # one entry a change: render joins a method's (its variants' included) on one line
        est |= {f"{method}{CHANGED}{c}" for c in measurement_changes(method, params, mparams, cfg)}
    evals = steps // max(1, cfg.eval_every) + 1
    dev_s = evals * STS_EVAL_S * (cfg.dev_max_pairs or STSB_DEV_PAIRS) / STS_PAIRS
    backbone = backbone_of(params, mparams)
    n_params = BACKBONE_PARAMS.get(backbone)
    if n_params is None:
        est.add(f"disk of {backbone}: bert-base's size")
    disk = (n_params or BACKBONE_PARAMS["bert-base-uncased"]) * BYTES_PER_PARAM / 1e9
    train_s = steps * step_s
    return Cost(1, steps, measured_s=(0.0 if est - {f"disk of {backbone}: bert-base's size"} else train_s) + dev_s,
                estimated_s=STAGE_START_S + (train_s if est - {f"disk of {backbone}: bert-base's size"} else 0.0),
                disk_gb=disk, estimated=est)


def evaluation_cost(kind: str, params) -> Cost:
    """One evaluation stage: ``evaluate`` (the 7 STS tasks, measured rate), ``transfer``, ``glue``, ``retrieval``."""
    if kind == "evaluate":
        return Cost(measured_s=STS_EVAL_S, estimated_s=STAGE_START_S,
                    estimated={f"a stage's start (imports, model load): {STAGE_START_S:.0f} s, not timed on a GPU"})
    if kind == "transfer":
        return Cost(estimated_s=TRANSFER_S, estimated={"transfer: 5 min a model (not timed on a GPU)"})
    if kind == "retrieval":
        return Cost(estimated_s=RETRIEVAL_S, estimated={"retrieval: ~1 min a model (QQP's ~540k questions at the "
                                                        "STS evaluation's measured encoding rate)"})
    ft = params.glue.finetune
    steps = sum(math.ceil(min(GLUE_TRAIN.get(t, 0), ft.max_train or 10**9) / ft.batch_size) * ft.epochs
                for t in params.glue.tasks)
    if ft.max_steps:
        steps = min(steps, ft.max_steps * len(params.glue.tasks))
    steps *= len(params.glue.seeds)
    base = (f"SimCSE's step time (measured at {MEASURED_AT} in bf16 autocast) for the same tokens a step (32 x 128 "
            f"vs 64 x 32 x 2), the GLUE train splits' sizes")
    if ft.precision in ("auto", "bf16"):   # auto: bf16 on the GPUs the plan is for (bf16-capable)
        why = f"GLUE fine-tuning in bf16 autocast (glue.finetune.precision {ft.precision}): {base}"
    else:
        why = (f"GLUE fine-tuning in {ft.precision} (glue.finetune.precision): a lower bound, {base}; no "
               f"{ft.precision} GLUE step was timed on a GPU (benchmarks/gpu_checklist.py --parts glue times fp32 "
               f"against bf16); `glue.finetune.precision: auto` fine-tunes in bf16 on a GPU that has it")
    return Cost(ft_steps=steps, estimated_s=steps * STEP_S["simcse"][0] + STAGE_START_S, estimated={why})


def plan(params, jobs: int = 8) -> dict:
    """``{"tables": {id: (title, Cost)}, "total": Cost, "trainings": {name: Cost}, "disk": [...], ...}``; the disk
    with ``jobs`` chains running at once (:func:`disk`)."""
    from ..report.paper_tables import all_tables
    from .scope import table_scope
    from ..stages.stage_list import models_for, stage_list_for, suite_items, suite_stage

    lists = stage_list_for(params)
    models = models_for(params)
    per_model: dict[str, Cost] = {}
    for name, spec in models.items():
        c = training_cost(params, spec)
        c.add(evaluation_cost("evaluate", params))
        per_model[name] = c
    baselines = {f"base-{b}": evaluation_cost("evaluate", params) for b in lists["baselines"]}
    if "bert_flow" in lists["baselines"]:
        baselines["base-bert_flow"].estimated.add("BERT-flow's fit: counted as one evaluation (not timed on a GPU)")
    suites = {suite_stage(s, m): (s, m, evaluation_cost(s, params)) for s, m in suite_items(lists)}
    total = Cost()
    for c in (*per_model.values(), *baselines.values(), *(c for _, _, c in suites.values())):
        total.add(c)
    tables = {}
    for spec in all_tables(params.model.backbone):
        scope = table_scope(spec, lists)   # the same stages `sentlab run --table` runs
        cost = Cost()
        for c in (*(per_model[m] for m in scope.models), *(baselines[f"base-{b}"] for b in scope.baselines),
                  *(suites[k][2] for k in scope.suites)):
            cost.add(c)
        tables[spec.id] = (f"{spec.source}", cost)
    longest = max((per_model[n].gpu_s + _chain_before(n, models, per_model) for n in per_model), default=0.0)
    # the tasks a parallel run schedules: a model's chain (with the models that start from it), a baseline, a suite
    chains: dict[str, float] = {}
    for n, c in per_model.items():
        root = n
        while models[root].init_model in models:
            root = models[root].init_model
        chains[root] = chains.get(root, 0.0) + c.gpu_s
    tasks = [*chains.values(), *(c.gpu_s for c in baselines.values()), *(c.gpu_s for _, _, c in suites.values())]
    return {"tables": tables, "total": total, "trainings": per_model, "longest_chain_s": longest, "tasks": tasks,
            "models": len(models), "suites": len(suites), "baselines": len(baselines),
            "disk": disk(params, total.disk_gb, max(1, min(jobs, len(tasks))))}


def _gb(model: str) -> float:
    return BACKBONE_PARAMS.get(model, BACKBONE_PARAMS["bert-base-uncased"]) * BYTES_PER_PARAM / 1e9


def disk(params, models_gb: float, running: int) -> list[tuple[str, float, str]]:
    """(what, GB, where the figure comes from) of everything a run of the profile writes to disk, ``running``
    chains at once (issue #65 §6: the models alone, x2 for DVC's cache, left out exports/, the hub snapshots and the
    worktrees): ``models_gb`` (the trainings' fp32 weights) in models/, in DVC's cache and in exports/, each hub
    model the profile loads once, each running chain's worktree, the data files downloaded."""
    from ..stages.stage_list import models_for
    from ..preflight.projection import model_params

    hub = [params.model.backbone]
    for spec in models_for(params).values():
        hub += [h for h in model_params(params, spec).hub_models() if h not in hub]
    unknown = [h for h in hub if h not in BACKBONE_PARAMS]
    biggest = max(_gb(h) for h in hub)
    data = [k for k in DATA_GB if k == params.prepare.corpus or (k == "glove" and "glove" in params.evaluate.baselines)]
    return [("models/", models_gb, "the trained models' fp32 weights: parameters x 4 bytes"),
            ("DVC cache", models_gb, "a copy of models/ (cache.type reflink,copy: a copy without reflinks)"),
            ("exports/", models_gb, "the export stage's folders: a copy of each trained model (a copy-on-write "
                                    "clone only where the filesystem has them)"),
            ("hub snapshots", sum(_gb(h) for h in hub), ", ".join(hub) + ": the safetensors weights, parameters x 4 "
             "bytes" + (f" (bert-base's for {', '.join(unknown)})" if unknown else "")),
            (f"worktrees ({running} chains at once)", running * (biggest + CHECKPOINT_GB),
             f"sentlab run's git worktrees (.dvc/tmp/sentlab/worktrees), one a running chain: its model (the largest, "
             f"{biggest:.2f} GB) and its resume checkpoint (~{CHECKPOINT_GB} GB, estimated); the prepared data each "
             f"checks out is not counted"),
            *((f"data: {k}", DATA_GB[k][0], DATA_GB[k][1]) for k in data)]


def makespan(tasks: list[float], gpus: int) -> float:
    """Longest-first list scheduling of ``tasks`` (seconds) on ``gpus`` one-GPU workers: the wall time."""
    load = [0.0] * max(1, gpus)
    for t in sorted(tasks, reverse=True):
        load[load.index(min(load))] += t
    return max(load)


def _chain_before(name: str, models: dict, per_model: dict) -> float:
    start = models[name].init_model
    if start in per_model:
        return per_model[start].gpu_s + _chain_before(start, models, per_model)
    return 0.0


def _h(s: float) -> str:
    return f"{s / 3600:,.1f}"


def render(profile: str, p: dict, gpus=(1, 4, 8)) -> str:
    t = p["total"]
    lines = [f"# sentlab plan: profile `{profile}`", "",
             f"GPU-hours on one {GPU_CARD}. **measured**: step times and evaluation rates timed in {GPU_RUN}, times "
             f"exact counts (steps from the profile's corpus, batch, epochs; dev evaluations); **estimated**: the "
             f"inputs listed below the table. models GB: the trained models' fp32 weights (estimated: parameters x 4 "
             f"bytes); the disk a run fills is below.",
             "",
             "| table | trainings | training steps | GPU-h measured | GPU-h estimated | GPU-h total | models GB |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for tid, (title, c) in p["tables"].items():
        if c.gpu_s:
            lines.append(f"| {tid} ({title}) | {c.trainings} | {c.steps:,} | {_h(c.measured_s)} | "
                         f"{_h(c.estimated_s)} | {_h(c.gpu_s)} | {c.disk_gb:,.1f} |")
    lines.append(f"| **total** ({p['models']} trainings, {p['baselines']} baselines, {p['suites']} suite stages; a "
                 f"model in several tables counts once here) | **{t.trainings}** | **{t.steps:,}** | "
                 f"**{_h(t.measured_s)}** | **{_h(t.estimated_s)}** | **{_h(t.gpu_s)}** | **{t.disk_gb:,.1f}** |")
    tr = Cost()
    for c in p["trainings"].values():
        tr.add(c)
    lines += ["", f"Of the total, the trainings (with their STS evaluations): {_h(tr.gpu_s)} GPU-h "
                  f"({_h(tr.measured_s)} measured, {_h(tr.estimated_s)} estimated); GLUE fine-tuning: "
                  f"{t.ft_steps:,} steps (estimated).",
              "",
              "Wall time (each model's chain, with the models that start from it, and each baseline and suite "
              "stage one task of one GPU, longest first; the longest chain "
              f"{_h(p['longest_chain_s'])} h): " + ", ".join(
                  f"{n} GPU{'s' * (n > 1)} {_h(makespan(p['tasks'], n))} h" for n in gpus) + ". Whole-GPU "
              "figures: `runtime.gpus_per_task: auto` lets short chains share a GPU, a gain not measured yet (no "
              "throughput of shared GPUs in the GPU run), so not counted here.",
              "",
              "Not counted: checkpoint writes, the CPU stages (annotate: ~30 min on 1M sentences, "
              "benchmarks/preflight-paper-gpu.md).", ""]
    rows = p["disk"]
    lines += [f"Disk a run fills: **{sum(gb for _, gb, _ in rows):,.1f} GB**", "",
              "| on disk | GB | from |", "|---|---:|---|"] + [f"| {w} | {gb:,.1f} | {src} |" for w, gb, src in rows]
    lines += [""]
    if t.estimated:
        lines += ["Estimated inputs:", ""] + [f"- {e}" for e in estimated_lines(t.estimated)] + [""]
    return "\n".join(lines)


def estimated_lines(estimated: set) -> list[str]:
    """The estimated inputs, a method's changes since its measurement (:data:`CHANGED`) joined on one line."""
    changes: dict[str, list[str]] = {}
    out = []
    for e in sorted(estimated):
        method, sep, change = e.partition(CHANGED)
        if sep:
            changes.setdefault(method, []).append(change)
        else:
            out.append(e)
    out += [f"{m}{CHANGED}{'; '.join(c)}" for m, c in changes.items()]
    return sorted(out)
