"""The micro-batches of a training run: item ``t`` of the run (:class:`MicroBatches`, a function of the seed and
``t`` only), built and prepared (the method's ``prepare``: tokenisation, augmentation) by a DataLoader's
``collate_fn`` (:class:`PrepareBatch`), in ``runtime.loader_workers`` worker processes ahead of the step on a GPU
(:func:`micro_batch_loader`; :func:`sentlab.train.loop.train_loop` reads it).
"""

from __future__ import annotations

import multiprocessing as mp

import numpy as np
import torch

from .data import Corpus, epoch_order


def loader_workers(setting, device: torch.device) -> int:
    """``runtime.loader_workers``: ``auto`` = 0 on CPU (the cores are busy training), 4 on a GPU."""
    return (4 if device.type == "cuda" else 0) if setting == "auto" else int(setting)


class MicroBatches(torch.utils.data.Dataset):
    """Item ``t`` = this rank's rows of micro-batch ``t`` (``step · grad_accum + a``) of the run: a function
    of the seed and ``t`` only, so any worker can build any item and a resumed run starts at its step."""

    def __init__(self, n: int, batch_size: int, grad_accum: int, steps_per_epoch: int, seed: int, rank: int,
                 world: int):
        self.n, self.batch_size, self.grad_accum, self.steps_per_epoch = n, batch_size, grad_accum, steps_per_epoch
        self.seed, self.rank, self.local = seed, rank, batch_size // world
        self._orders: dict[int, np.ndarray] = {}

    def rows(self, t: int) -> list[int]:
        step, a = divmod(t, self.grad_accum)
        epoch, pos = divmod(step, self.steps_per_epoch)
        if epoch not in self._orders:
            self._orders.clear()
            self._orders[epoch] = epoch_order(self.n, self.seed, epoch)
        start = (pos * self.grad_accum + a) * self.batch_size + self.rank * self.local
        return self._orders[epoch][start: start + self.local].tolist()

    def epoch(self, t: int) -> int:
        """The pass over the corpus micro-batch ``t`` belongs to."""
        return t // self.grad_accum // self.steps_per_epoch

    def __getitem__(self, t: int) -> tuple[int, list[int]]:
        return t, self.rows(t)


class PrepareBatch:
    """The DataLoader's ``collate_fn``: rows -> :class:`~sentlab.methods.base.Batch` -> ``method.prepare``."""

    def __init__(self, method, corpus: Corpus, seed: int, epoch_of=None):
        self.method, self.corpus, self.seed, self.epoch_of = method, corpus, seed, epoch_of

    def __call__(self, item: tuple[int, list[int]]):
        t, rows = item
        batch = self.corpus.batch(rows)
        batch.draw, batch.seed = t, self.seed
        if self.epoch_of is not None:
            batch.epoch = self.epoch_of(t)
        return self.method.prepare(batch)


def micro_batch_loader(method, corpus: Corpus, train_cfg, *, seed: int, steps_per_epoch: int, start: int, end: int,
                       rank: int, world: int, device: torch.device):
    """Micro-batches ``start..end-1``, prepared (in worker processes when ``runtime.loader_workers`` > 0)."""
    workers = loader_workers(train_cfg.loader_workers, device)
    # forked where the platform can: spawn/forkserver (a parent's choice, Python 3.14's default) pickle the method
    context = mp.get_context("fork") if workers and "fork" in mp.get_all_start_methods() else None
    data = MicroBatches(len(corpus), train_cfg.batch_size, train_cfg.grad_accum, steps_per_epoch, seed, rank, world)
    return torch.utils.data.DataLoader(
        data, batch_size=None, sampler=range(start, end), collate_fn=PrepareBatch(method, corpus, seed, data.epoch),
        num_workers=workers, pin_memory=device.type == "cuda", persistent_workers=False,
        multiprocessing_context=context, prefetch_factor=4 if workers else None,
        # its base seed is not drawn from (and does not move) torch's RNG
        generator=torch.Generator().manual_seed(seed))
