"""What each chain of a parallel run asks of Ray, and in which order it is submitted (issue #54 §7).

* **GPU share** (``runtime.gpus_per_task``). A number: every chain asks for that many GPUs (as before).
  ``auto``: a chain's share comes from the plan's measured step times (:mod:`sentlab.campaign.plan`, the H100 run of
  :data:`sentlab.campaign.plan.GPU_RUN`): a training stage whose planned step (its method's measured seconds per
  sentence x
  the profile's batch x grad_accum) takes ``t`` seconds asks for ``min(1, ceil(t / FULL_STEP_S x 4) / 4)`` of a GPU
  -- a quarter for a step of up to 0.1 s (SimCSE 0.04 s, CT, MoCo, PT-BERT 0.10 s at batch 64: several such
  trainings share one GPU), a half up to 0.2 s, three quarters up to 0.3 s, a whole GPU above (L2P 0.36 s at
  batch 512, PaSeR 0.65 s, PaSeR-sup 1.93 s). An evaluation stage (STS, a baseline, a suite: encoding, or GLUE's
  fine-tuning at SimCSE's step time) asks for :data:`QUANTUM`. A chain asks for the largest share of its
  stages; with ``runtime.nproc`` > 1 a chain with a training asks for ``nproc`` GPUs (one per DDP rank).
  FULL_STEP_S is a rule of thumb (a bert-base step under ~0.1 s on an H100 is bound by kernel launches and the
  host, so four overlap), not a measured co-location throughput.
* **Order.** Ray starts queued tasks roughly in submission order, so the chains are submitted longest first:
  a chain's priority is its planned GPU seconds (:func:`sentlab.campaign.plan.training_cost`,
  :func:`sentlab.campaign.plan.evaluation_cost`) plus the longest path of chains that wait for it (paser_sup after
  paser), ties in DVC's order; a chain never goes before one it needs.
* **nproc.** :func:`check_nproc`: DDP ranks need a GPU each (one paragraph, exit 2 otherwise).

A profile the plan cannot cost (a test pipeline, an unknown stage) keeps DVC's order and a whole GPU per chain
under ``auto``; the runner says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import SentlabError

FULL_STEP_S = 0.4    # a planned step of this many seconds (H100) or more takes a whole GPU
QUANTUM = 0.25       # the smallest share; the shares are multiples of it
AUTO = "auto"


def share_of_step(step_s: float) -> float:
    """The GPU share of a training whose planned step takes ``step_s`` seconds on the plan's GPU."""
    quarters = math.ceil(round(step_s / FULL_STEP_S / QUANTUM, 6))
    return min(1.0, max(QUANTUM, quarters * QUANTUM))


@dataclass
class StageCost:
    seconds: float            # planned GPU seconds (sentlab.campaign.plan)
    share: float              # the GPU share under `auto` (nproc 1)
    training: bool = False


def stage_costs(params) -> dict[str, StageCost]:
    """Every GPU stage of ``params``' stage list -> its planned seconds and ``auto`` share."""
    from ..methods import get_method  # noqa: F401 - registers the methods plan.training_cost looks up
    from ..campaign.plan import _per_sentence, evaluation_cost, training_cost
    from ..preflight.projection import model_params
    from ..stages.stage_list import models_for, stage_list_for, suite_items, suite_stage
    from ..train.run import resolve_train

    lists = stage_list_for(params)
    out: dict[str, StageCost] = {}
    ev = evaluation_cost("evaluate", params).gpu_s
    for spec in models_for(params).values():
        cfg = resolve_train(params, model_params(params, spec))
        step_s = _per_sentence(spec.method)[0] * cfg.batch_size * cfg.grad_accum
        out[spec.train_stage] = StageCost(training_cost(params, spec).gpu_s, share_of_step(step_s), True)
        out[spec.evaluate_stage] = StageCost(ev, QUANTUM)
    for b in lists["baselines"]:
        out[f"evaluate_baseline@{b}"] = StageCost(ev, QUANTUM)
    for suite, m in suite_items(lists):
        out[suite_stage(suite, m)] = StageCost(evaluation_cost(suite, params).gpu_s, QUANTUM)
    return out


def costs_for(root: str | Path) -> tuple[Optional[dict[str, StageCost]], str]:
    """:func:`stage_costs` of the workspace's params.yaml, or (None, why) when the plan cannot cost it."""
    from ..methods.blocks import load_checked

    try:
        return stage_costs(load_checked(Path(root) / "params.yaml")), ""
    except Exception as e:  # noqa: BLE001 - a pipeline sentlab.campaign.plan does not know: DVC order, whole GPUs
        return None, f"{type(e).__name__}: {str(e)[:300]}"


def chain_gpus(chain, gpus_per_task, nproc: int, costs: Optional[dict[str, StageCost]]) -> float:
    """The GPUs ``chain`` asks for: ``gpus_per_task`` when a number; under ``auto`` the largest share of its
    stages (``nproc`` when it trains with ``nproc`` > 1; 1 when a stage has no cost)."""
    if gpus_per_task != AUTO:
        return float(gpus_per_task)
    shares = []
    for s in chain.stages:
        c = (costs or {}).get(s)
        if c is None:
            shares.append(1.0)
        elif c.training and nproc > 1:
            shares.append(float(nproc))
        else:
            shares.append(c.share)
    return max(shares, default=1.0)


def chain_seconds(chain, costs: Optional[dict[str, StageCost]]) -> float:
    return sum(c.seconds for s in chain.stages if (c := (costs or {}).get(s)))


def submission_order(chains: list, seconds: dict[str, float]) -> list:
    """``chains`` longest first: priority = own planned seconds + the longest path of chains waiting for it;
    ties keep the given (DVC) order; a chain never before one in its ``needs``."""
    below: dict[str, list[str]] = {}
    for c in chains:
        for n in c.needs:
            below.setdefault(n, []).append(c.id)
    memo: dict[str, float] = {}

    def prio(cid: str) -> float:
        if cid not in memo:
            memo[cid] = seconds.get(cid, 0.0) + max((prio(b) for b in below.get(cid, ())), default=0.0)
        return memo[cid]

    rank = {c.id: i for i, c in enumerate(chains)}
    todo = sorted(chains, key=lambda c: (-prio(c.id), rank[c.id]))
    ids = {c.id for c in chains}
    out, placed = [], set()
    while todo:
        c = next(c for c in todo if all(n in placed or n not in ids for n in c.needs))
        out.append(c)
        placed.add(c.id)
        todo.remove(c)
    return out


def check_nproc(rt) -> None:
    """``runtime.nproc`` DDP ranks need one GPU each, all in the task that runs the training: a number
    ``runtime.gpus_per_task`` below 1 (a shared GPU) or below ``nproc`` cannot hold them. ``auto`` gives a chain
    that trains ``nproc`` GPUs; ``runtime.device: cpu`` runs the ranks on CPUs and is not checked."""
    nproc, g = int(rt.nproc), rt.gpus_per_task
    if nproc <= 1 or g == AUTO or rt.device == "cpu":
        return
    if g < 1 or nproc > g:
        what = (f"a fraction of one GPU ({g:g})" if g < 1 else f"{g:g} GPU{'s' * (g != 1)}")
        raise SentlabError(
            f"params.yaml `runtime.nproc: {nproc}` starts {nproc} DDP ranks, one GPU each, inside one training, but "
            f"`runtime.gpus_per_task: {g:g}` gives each Ray task (one chain, its training included) {what}: the ranks "
            f"would share or lack GPUs. Set `runtime.gpus_per_task: {nproc}` (or `auto`: a training chain then asks "
            f"for {nproc} GPUs), or `runtime.nproc: {max(1, int(g))}`.")
