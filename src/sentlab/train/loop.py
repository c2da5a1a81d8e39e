"""The method-agnostic training loop.

:func:`train_loop` drives any :class:`~sentlab.methods.base.Method`:

* AdamW (fused on CUDA) with linear decay to 0 and no warm-up (docs/methods.md#shared-conventions);
* one optimiser step = ``train.grad_accum`` micro-batches of ``train.batch_size``
  sentences, the **global** batch: under ``torchrun`` each of W ranks takes
  ``batch_size / W`` of them (in-batch negatives are gathered across ranks, so the
  contrastive batch is still ``batch_size``); the loss of each micro-batch is
  divided by ``grad_accum``; gradient clipping at
  ``max_grad_norm`` (HF Trainer's default 1.0, which SimCSE/PT-BERT used) of each
  parameter group's norm on its own (the encoder group alone, as before a method had
  extra groups; PaSeR's decoder, POS/BOW's heads and discriminators each clipped too,
  so a head's large gradient cannot shrink the encoder's step), or of one global norm
  over every parameter when the method's ``grad_clip`` says ``global`` (HF Trainer's
  way, the PaSeR code's: :func:`clip_gradients`);
* data: the corpus in a seeded shuffled order per epoch
  (:func:`~sentlab.train.data.epoch_order`), the last incomplete batch of an
  epoch dropped (every step sees full batches, MoCo's candidate count stays M);
  the position in the data is a function of the step, so resume needs only the step;
  a DataLoader's ``collate_fn`` builds each micro-batch and runs the method's
  ``prepare`` (tokenisation, augmentation) on the CPU, in ``runtime.loader_workers``
  worker processes ahead of the step on a GPU (:mod:`sentlab.train.batches`);
* a dev evaluation every ``train.eval_every`` steps and at the last step:
  ``dev_eval(method.sentence_encoder())`` → ``{"stsb_dev", "alignment",
  "uniformity"}``, logged with the mean training loss since the previous
  evaluation (MLflow step curves; :class:`TrainResult` ``curve``, which the caller
  writes to ``reports/curves/<name>.csv`` only beside a published model); the best
  dev score's model is exported to ``<ckpt_dir>/best``;
* no host synchronisation per micro-batch: losses and a method's logged parts are
  summed on the device and read (all-reduced once) at each dev evaluation, where the
  non-finite-loss check runs too;
* a resume checkpoint (``<ckpt_dir>/last``, one per run, overwritten) at every dev evaluation (or every
  ``runtime.checkpoint_every`` steps), at most every ``runtime.checkpoint_minutes`` of training: an
  interrupted run started again with the
  same ``ckpt_dir`` continues from it and, on CPU, ends with the same numbers
  as an uninterrupted run; every rank saves (its RNG state is gathered) and
  resumes with its own RNG state; a SIGTERM (a scheduler's time limit) writes one after the step it arrives in,
  then the run stops with exit status 143 (:mod:`sentlab.train.preempt`);
* precision: chosen by the profile (``train.precision``), never by detecting the CPU: the same profile gives
  the same numbers on a CPU with native bf16 (AVX-512 BF16/AMX) and on one without (issue #35,
  ``benchmarks/precision_isa.py``). ``auto`` = fp32 on every CPU; on CUDA bf16 autocast where the GPU has it,
  else fp16 autocast with a gradient scaler (``torch.amp.GradScaler``: the loss scaled, the gradients unscaled
  before clipping, the step skipped on inf/NaN; its state in the resume checkpoint); ``fp32``/``bf16``/``fp16``
  force it (the train stage refuses an emulated one first: :mod:`sentlab.runtime.device`). Logits and losses stay fp32
  under autocast (docs/methods.md); evaluation is fp32 whatever training used;
* dropout: ``train.dropout_kernel`` ``auto`` = on CPU the same inverted dropout with a mask from fewer random
  numbers (:mod:`sentlab.train.dropout`), PyTorch's elsewhere; ``train.compile``/``pad_buckets``: :mod:`.compiled`;
* several processes under ``torchrun`` (``runtime.nproc``): DDP, rank r takes rows
  ``[r·B/W, (r+1)·B/W)`` of each global micro-batch; only rank 0 evaluates, logs and writes.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch
from transformers import get_linear_schedule_with_warmup, set_seed

from ..runtime.device import check_device, cpu_flags, cpu_native
from ..runtime.device import resolve_precision as resolve_device_precision
from ..nn.encoder import autocast
from ..errors import SentlabError
from ..runtime.io import recover_replaced
from ..runtime.timing import timed
from ..runtime import distributed as D
from .checkpoint import export_model, load_resume, save_resume
from .compiled import check_step_options, step_forward
from .batches import micro_batch_loader
from .data import Corpus
from .dropout import dropout_kernel, resolve_kernel
from .preempt import preempted, stop_on_signals, stop_requested

DevEval = Callable[[Any], dict]


# MLflow's training-loss curve: every 10th step's loss, logged when the loop reads it (every step on the CPU, in one
# burst at each evaluation on a GPU, where the step never waits for a read-back)
LOSS_LOG_EVERY = 10

@dataclass
class TrainResult:
    steps: int
    best_score: float
    best_step: Optional[int]
    curve: list[dict]
    best_dir: Path
    resumed_from: Optional[int] = None
    sentences_per_s: float = 0.0
    losses: list[float] = field(default_factory=list)


def resolve_device(device: str) -> torch.device:
    """``runtime.device``: ``auto`` = CUDA when torch sees a GPU, else the CPU; ``cuda`` where torch sees none stops
    with the paragraph of :func:`sentlab.runtime.device.check_device` (torch's CUDA build, the driver, the install
    line)."""
    if check_device(device) == "cuda":
        return torch.device("cuda", D.local_rank())
    return torch.device("cpu")


def cpu_has_native_bf16(cpuinfo: Optional[Path] = None) -> bool:
    """Whether this CPU computes bf16 natively (AVX-512 BF16 or AMX-BF16 in /proc/cpuinfo's flags); elsewhere
    (other OSes, older CPUs) bf16 autocast is emulated, ~30x slower a step than fp32 (:mod:`sentlab.runtime.device`
    refuses
    it unless asked for). Precision is never chosen from it (:func:`resolve_precision`)."""
    return cpu_native("bf16", cpu_flags(cpuinfo))


def resolve_precision(precision: str, device: torch.device) -> str:
    """``auto``: fp32 on every CPU — never by the CPU's instruction set (numbers must not depend on which CPU ran
    it); on CUDA bf16 where the GPU computes it natively, else fp16 with a gradient scaler
    (:func:`sentlab.runtime.device.resolve_precision`). An explicit value is kept."""
    return resolve_device_precision(precision, device.type)


def seed_everything(seed: int) -> None:
    """``transformers.set_seed``: ``random``, numpy and torch (CPU and every accelerator) from ``seed``.

    numpy takes 32-bit seeds only: it gets ``seed mod 2**32``; a seed outside [0, 2**32) seeds ``random``
    and torch with the seed itself, as sentlab always did (``tests/test_train_loop.py`` compares the states)."""
    set_seed(seed % 2**32)
    if not 0 <= seed < 2**32:
        random.seed(seed)
        torch.manual_seed(seed)


def linear_schedule(optimizer, total_steps: int, warmup_steps: int = 0):
    """lr multiplier 1 at step 0, linearly to 0 at ``total_steps``, no warm-up: HF's linear schedule
    (docs/methods.md#shared-conventions); with ``warmup_steps`` (a method's :meth:`~sentlab.methods.base.Method.
    warmup_steps`, e.g. ConSERT's 10 %) it rises linearly from 0 over those steps first."""
    return get_linear_schedule_with_warmup(optimizer, num_warmup_steps=warmup_steps, num_training_steps=total_steps)


def plan_steps(n_sentences: int, train_cfg, world: int = 1) -> tuple[int, int]:
    """(steps per epoch, total steps) for a corpus of ``n_sentences``."""
    if train_cfg.batch_size % world:
        raise SentlabError(f"train.batch_size ({train_cfg.batch_size}) is the global batch and must divide evenly over "
                           f"the {world} ranks (runtime.nproc); choose a multiple of {world}.")
    per_step = train_cfg.batch_size * train_cfg.grad_accum
    steps_per_epoch = n_sentences // per_step
    if steps_per_epoch == 0:
        raise SentlabError(
            f"The training corpus has {n_sentences} sentences, fewer than one optimiser step needs "
            f"(train.batch_size {train_cfg.batch_size} x train.grad_accum {train_cfg.grad_accum} = {per_step}). "
            f"Lower train.batch_size or use a larger corpus (prepare.size).")
    total = steps_per_epoch * train_cfg.epochs
    if train_cfg.max_steps:
        total = min(total, train_cfg.max_steps)
    return steps_per_epoch, total


def make_optimizer(method, train_cfg, device: torch.device) -> torch.optim.Optimizer:
    """The method's optimiser (:meth:`~sentlab.methods.base.Method.configure_optimizers`): fused AdamW on CUDA and
    on CPU (the same update in one kernel; ``benchmarks/train_speed.py --compare-attention`` times both)."""
    return method.configure_optimizers(weight_decay=train_cfg.weight_decay, fused=device.type in ("cuda", "cpu"))


def resolve_attention(setting: str, device: torch.device) -> str:
    """``train.attention``: ``auto`` = ``eager`` on CPU (PyTorch's fused CPU attention has a slower backward at
    sentence lengths; ``benchmarks/train_speed.py --compare-attention``), ``sdpa`` elsewhere; an explicit value
    is kept."""
    if setting == "auto":
        return "eager" if device.type == "cpu" else "sdpa"
    return setting


def loss_scaler(precision: str, device: torch.device) -> Optional[torch.amp.GradScaler]:
    """fp16 autocast's gradient scaler (``torch.amp.GradScaler`` of the device: fp16 gradients underflow without
    it); None for fp32 and bf16, whose range needs none."""
    return torch.amp.GradScaler(device.type) if precision == "fp16" else None


def clip_gradients(optimizer: torch.optim.Optimizer, max_norm: float, mode: str = "per_group") -> None:
    """Clip at ``max_norm`` each parameter group's gradient norm on its own (``per_group``) or one norm over
    every group's parameters together (``global``: ``torch.nn.utils.clip_grad_norm_`` of all, as HF Trainer)."""
    if mode not in ("per_group", "global"):
        raise SentlabError(f"grad_clip {mode!r}; allowed: per_group, global")
    groups = [g["params"] for g in optimizer.param_groups]
    for params in ([p for g in groups for p in g],) if mode == "global" else groups:
        torch.nn.utils.clip_grad_norm_(params, max_norm)


def checkpoint_due(elapsed_s: float, gap_s: float, device: torch.device) -> bool:
    """Whether this checkpoint step writes a resume checkpoint: ``gap_s`` seconds (runtime.checkpoint_minutes) have
    passed since the last one (or the start). Rank 0's clock decides for every rank (saving is a collective)."""
    if gap_s <= 0:
        return True
    due = elapsed_s >= gap_s
    if D.is_dist():
        flag = torch.tensor([float(due and D.is_main())], device=device)
        due = bool(D.all_reduce_sum_(flag).item() > 0)
    return due


def train_loop(method, corpus: Corpus, train_cfg, *, seed: int, dev_eval: DevEval, ckpt_dir: Path,
               export_info: Optional[dict] = None,
               log_metrics: Optional[Callable[[dict, int], None]] = None,
               callbacks: Sequence[Callable[[int, dict], None]] = (), device: Optional[torch.device] = None,
               max_grad_norm: Optional[float] = 1.0, progress: bool = True, desc: str = "train",
               read_every_step: Optional[bool] = None) -> TrainResult:
    """Train ``method`` on ``corpus``; see the module docstring. Returns the best dev score/step and the curve.

    ``callbacks`` are called as ``cb(step, record)`` after every optimiser step
    (after any evaluation/checkpoint of that step); an exception raised there
    interrupts the run like a killed process (tests use it). ``read_every_step``
    (default: on CPU only) reads the step's loss back at once, for the progress
    bar and ``record["loss"]``; off, losses are read at evaluation/checkpoint steps only.
    """
    from tqdm.auto import tqdm

    ckpt_dir = Path(ckpt_dir)
    device = device or resolve_device(train_cfg.device)
    precision = resolve_precision(train_cfg.precision, device)
    kernel = resolve_kernel(train_cfg.dropout_kernel, device, train_cfg.compile)
    check_step_options(method, train_cfg)   # train.pad_buckets / train.compile (sentlab.train.compiled)
    world, rank = D.world_size(), D.rank()
    method.to(device)
    method.train()
    with timed("plan", sentences=len(corpus), batch_size=train_cfg.batch_size,
               grad_accum=train_cfg.grad_accum) as phase:
        steps_per_epoch, total_steps = plan_steps(len(corpus), train_cfg, world)
        phase.record(steps_per_epoch=steps_per_epoch, total_steps=total_steps)
    optimizer = make_optimizer(method, train_cfg, device)
    scheduler = linear_schedule(optimizer, total_steps, method.warmup_steps(total_steps))
    scaler = loss_scaler(precision, device)   # fp16 only: the loss scaled, the gradients unscaled before clipping
    model = method
    if D.is_dist():
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(method, device_ids=[device.index] if device.type == "cuda" else None, broadcast_buffers=False,
                    find_unused_parameters=getattr(method, "ddp_find_unused_parameters", False))
    forward = step_forward(model, train_cfg.compile, device)   # the model itself, or torch.compile of it

    seed_everything(seed + rank)
    step, best_score, best_step, curve, resumed_from = 0, -math.inf, None, [], None
    last = recover_replaced(ckpt_dir / "last")   # killed between atomic_path's two renames: the previous one
    recover_replaced(ckpt_dir / "best")
    meta = load_resume(last, method, optimizer, scheduler, rank=rank)  # each rank restores its own RNG state
    if meta is not None:
        if meta.get("total_steps") != total_steps:
            raise SentlabError(f"The resume checkpoint {ckpt_dir / 'last'} was planned for "
                               f"{meta.get('total_steps')} steps, "
                               f"this run for {total_steps}; delete {ckpt_dir} to start afresh.")
        step, best_score, best_step, curve = meta["step"], meta["best_score"], meta["best_step"], meta["curve"]
        if scaler is not None and meta.get("scaler"):
            scaler.load_state_dict(meta["scaler"])
        best_score = -math.inf if best_score is None else best_score
        resumed_from = step
        if log_metrics is not None and rank == 0:
            for row in curve:
                log_metrics({k: v for k, v in row.items() if k != "step"}, row["step"])

    ckpt_every = train_cfg.checkpoint_every or train_cfg.eval_every
    ckpt_gap_s = 60.0 * (train_cfg.checkpoint_minutes or 0.0)   # at most one resume checkpoint per gap (#54 §6)
    last_ckpt_t = time.perf_counter()
    grad_accum = train_cfg.grad_accum
    if read_every_step is None:
        read_every_step = device.type == "cpu"  # reading is free on the CPU: per-step numbers for the bar and callbacks
    loader = micro_batch_loader(method, corpus, train_cfg, seed=seed, steps_per_epoch=steps_per_epoch,
                                start=step * grad_accum, end=total_steps * grad_accum, rank=rank, world=world,
                                device=device)
    batches = iter(loader)

    window_losses: list[float] = list(meta.get("window_losses", [])) if meta else []
    window_extras: dict[str, list[float]] = {}
    all_losses: list[float] = []
    pending: list[torch.Tensor] = []              # step losses (and parts) not yet read from the device
    pending_extras: list[dict[str, torch.Tensor]] = []

    def read_pending() -> None:
        """One device->host read (and one all-reduce) for the steps since the last read."""
        if not pending:
            return
        losses = torch.stack(pending)
        D.all_reduce_sum_(losses)
        values = (losses / world).tolist()
        first = step - len(values) + 1
        for i, (v, ex) in enumerate(zip(values, pending_extras)):
            if not math.isfinite(v):
                raise SentlabError(f"The training loss became {v} at step {first + i}; lower train.lr or use "
                                   f"train.precision: fp32.")
            window_losses.append(v)
            all_losses.append(v)
            if log_metrics is not None and rank == 0 and (first + i) % LOSS_LOG_EVERY == 0:
                log_metrics({"train_loss": v}, first + i)   # the curve between dev evaluations (MLflow)
            for k, t in ex.items():
                window_extras.setdefault(k, []).append(float(t))
        pending.clear()
        pending_extras.clear()

    n_sent, t0 = 0, time.perf_counter()
    bar = tqdm(total=total_steps, initial=step, desc=desc, unit="step", disable=not (progress and rank == 0),
               dynamic_ncols=True)
    signals = contextlib.ExitStack()
    signals.enter_context(stop_on_signals())   # SIGTERM: a resume checkpoint after this step, then exit (preempt.py)
    try:
        while step < total_steps:
            with timed("step", step=step + 1, device=device.type):  # sentlab.runtime.timing: observed by tools
                step_loss = torch.zeros((), device=device)
                extras: dict[str, torch.Tensor] = {}
                for a in range(grad_accum):
                    batch = next(batches)
                    sync = contextlib.nullcontext() if (a == grad_accum - 1 or model is method) else model.no_sync()
                    with sync:
                        with autocast(device, precision), dropout_kernel(kernel):
                            out = forward(batch)
                        loss = out["loss"].float() / grad_accum
                        (loss if scaler is None else scaler.scale(loss)).backward()
                    step_loss += loss.detach()
                    for k, v in out.items():
                        if k != "loss":
                            extras[k] = torch.as_tensor(v).detach().float()
                    n_sent += len(batch) * world
                if scaler is not None:
                    scaler.unscale_(optimizer)   # clipping sees the true gradients
                if max_grad_norm:  # per group by default: a head's large gradient does not shrink the encoder's step
                    clip_gradients(optimizer, max_grad_norm, getattr(method, "grad_clip", "per_group"))
                if scaler is None:
                    optimizer.step()
                else:   # skips the step when a gradient is inf/NaN, then adapts the scale
                    scaler.step(optimizer)
                    scaler.update()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                method.after_optimizer_step()
            step += 1
            pending.append(step_loss)
            pending_extras.append(extras)
            if read_every_step:
                read_pending()
            elapsed = time.perf_counter() - t0
            bar.update(1)
            bar.set_postfix(loss=f"{window_losses[-1]:.4f}" if window_losses and not pending else "…",
                            sent_s=f"{n_sent / max(elapsed, 1e-9):.1f}")
            record: dict[str, Any] = {"step": step, "lr": scheduler.get_last_lr()[0]}
            if not pending:
                record.update({k: v[-1] for k, v in window_extras.items()}, loss=window_losses[-1])

            if step % train_cfg.eval_every == 0 or step == total_steps:
                read_pending()
                if rank == 0:
                    scores = dev_eval(method.sentence_encoder())
                    row = {"step": step, "stsb_dev": float(scores["stsb_dev"]),
                           "alignment": float(scores.get("alignment", float("nan"))),
                           "uniformity": float(scores.get("uniformity", float("nan"))),
                           "loss": float(np.mean(window_losses))}
                    curve.append(row)
                    record.update(row)
                    if log_metrics is not None:  # + the method's loss parts (loss_gen, gen_token_acc …), window means
                        parts = {k: float(np.nanmean(v)) for k, v in window_extras.items()
                                 if any(math.isfinite(x) for x in v)}
                        log_metrics({k: v for k, v in row.items() if k != "step"}
                                    | {"lr": record["lr"], "train": parts}, step)
                    if best_step is None or row["stsb_dev"] > best_score:  # (a NaN score never beats a number)
                        best_score, best_step = row["stsb_dev"], step
                        export_model(ckpt_dir / "best", method, dict(export_info or method.export_info(),
                                                                     best_stsb_dev=best_score, best_step=best_step))
                    bar.write(f"step {step}: stsb_dev {row['stsb_dev']:.2f} (best {best_score:.2f} @ {best_step}) "
                              f"align {row['alignment']:.3f} unif {row['uniformity']:.3f} loss {row['loss']:.4f}")
                window_losses, window_extras = [], {}
                D.barrier()
            if (step % ckpt_every == 0 and step < total_steps   # a collective: every rank saves, rank 0 writes
                    and checkpoint_due(time.perf_counter() - last_ckpt_t, ckpt_gap_s, device)):
                last_ckpt_t = time.perf_counter()
                read_pending()
                save_resume(ckpt_dir / "last", method, optimizer, scheduler,
                            {"step": step, "total_steps": total_steps, "best_score": best_score if best_step else None,
                             "best_step": best_step, "curve": curve, "window_losses": window_losses,
                             "scaler": scaler.state_dict() if scaler is not None else None})
                D.barrier()
            for cb in callbacks:
                cb(step, record)
            if step < total_steps and (signum := stop_requested(step, device)):   # a scheduler's SIGTERM
                read_pending()
                save_resume(ckpt_dir / "last", method, optimizer, scheduler,
                            {"step": step, "total_steps": total_steps, "best_score": best_score if best_step else None,
                             "best_step": best_step, "curve": curve, "window_losses": window_losses})
                D.barrier()
                raise preempted(signum, step, total_steps, ckpt_dir / "last")
    finally:
        signals.close()
        bar.close()
        del batches  # stops the loader's workers
    elapsed = time.perf_counter() - t0
    return TrainResult(steps=step, best_score=best_score, best_step=best_step, curve=curve, best_dir=ckpt_dir / "best",
                       resumed_from=resumed_from, sentences_per_s=n_sent / max(elapsed, 1e-9), losses=all_losses)
