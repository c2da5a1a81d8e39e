"""A training stopped by a scheduler writes its resume checkpoint first (issue #65 §3).

A scheduler ends a job with SIGTERM (SLURM at ``--time``, or ``--signal=TERM@<s>`` before it; Kubernetes and Ray
when they stop a worker; :mod:`sentlab.parallel.guard` when the task's worker dies). Without a handler the training
dies at once and loses everything since its last resume checkpoint (up to ``runtime.checkpoint_minutes``, 10 on
the paper profile, on every GPU). :func:`stop_on_signals` installs a handler for the training's duration that only
sets a flag; the loop (:func:`sentlab.train.loop.train_loop`) checks it after each optimiser step
(:func:`stop_requested`), writes the resume checkpoint of that step and raises :class:`Preempted`: the stage exits
with 128 + the signal's number and one paragraph, and the same stage run again resumes from that step with the
numbers of an uninterrupted run (the position in the data and every RNG state are in the checkpoint).

A second signal while the checkpoint is being written is ignored (the write is atomic either way); SIGKILL cannot
be caught: the scheduler's grace period (SLURM's ``KillWait``, the guard's ``GRACE_S``) must cover one step and
one checkpoint write.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

from ..errors import SentlabError

SIGNALS = (signal.SIGTERM,)   # SIGINT (Ctrl-C) keeps Python's KeyboardInterrupt: a person at the terminal

DIST_CHECK_EVERY = 10   # steps between the ranks' agreements under torchrun (a bert-base step: well under a second)

_received: list[int] = []


class Preempted(SentlabError):
    """The training stopped on a signal after writing its resume checkpoint (exit status 128 + the signal)."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.exit_code = 128 + signum


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Catch :data:`SIGNALS` for the block (the main thread only: elsewhere Python cannot install handlers, and the
    signals keep their previous behaviour); the previous handlers are restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()
    previous = {s: signal.signal(s, lambda signum, _frame: _received.append(signum)) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _received.clear()


def stop_requested(step: int, device=None) -> int | None:
    """The signal that asked this training to stop, checked after optimiser step ``step`` (None: none). A single
    process reads a Python flag (no device read). Under ``torchrun`` the ranks agree every
    :data:`DIST_CHECK_EVERY` steps, the same steps on every rank (saving the checkpoint is a collective: all ranks
    stop at the same step): one small all-reduce and read-back there, none per step."""
    from ..runtime import distributed as D

    got = _received[0] if _received else 0
    if D.is_dist():
        if step % DIST_CHECK_EVERY:
            return None
        import torch
        import torch.distributed as dist

        flag = torch.tensor([float(got)], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        got = int(flag.item())
    return got or None


def preempted(signum: int, step: int, total_steps: int, last) -> Preempted:
    name = signal.Signals(signum).name
    return Preempted(f"Training stopped by {name} after step {step} of {total_steps}: its resume checkpoint is {last} "
                     f"(step {step}). Run the same stage again (`dvc repro`, `sentlab run`, or the requeued job) "
                     f"and it continues from step {step} with the numbers of an uninterrupted run.", signum)
