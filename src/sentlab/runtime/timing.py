"""Timed phases that code declares and tools observe (mteb's ``TimingStack`` idea).

Code says what it is doing; it never knows who measures it::

    with timed("encode", sentences=len(texts), device=self.device.type):
        ...
    with timed("plan", sentences=n) as phase:
        steps = ...
        phase.record(total_steps=steps)     # facts learnt inside the phase

A tool registers an :class:`Observer` (``with observing(obs): ...`` or :func:`add_observer`) and is told
when each phase starts and ends: its name, its ``info`` (the keyword arguments and what was recorded),
its wall seconds, and the exception that ended it, if any. With no observer registered, :func:`timed`
returns one shared do-nothing context: a declared phase costs a function call and a truthiness test.

Phases declared in sentlab (the names an observer can rely on; tests/test_preflight.py checks each):

* ``stage`` — a pipeline stage's ``main`` (:func:`sentlab.stages.entry.run_stage`); ends with the
  stage's exception when it fails;
* ``corpus`` — a training's corpus loaded (``name``: train, nli, sts_unlabeled …; recorded: ``sentences``
  it trains on);
* ``plan`` — the training loop's step plan (``sentences``, ``batch_size``, ``grad_accum``; recorded:
  ``steps_per_epoch``, ``total_steps``);
* ``step`` — one optimiser step of the training loop (its micro-batches, backward, the optimiser);
  ``step``, ``device``;
* ``encode`` — one encoding pass of :class:`~sentlab.nn.encoder.SentenceEncoder` (``sentences``, ``device``).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator, Optional

PHASES = ("stage", "corpus", "plan", "step", "encode")


class Observer:
    """Told about every phase while registered; override what you need (the defaults do nothing)."""

    def started(self, phase: "Phase") -> None:
        """``phase`` begins (``phase.info`` holds the declared keywords)."""

    def ended(self, phase: "Phase") -> None:
        """``phase`` ended: ``phase.seconds``, ``phase.info`` (with what was recorded), ``phase.error``."""


class Phase:
    """One observed phase: ``name``, ``info``, ``seconds`` (at its end) and ``error`` (the exception, if any)."""

    __slots__ = ("name", "info", "start", "seconds", "error")

    def __init__(self, name: str, info: dict):
        self.name, self.info = name, info
        self.start, self.seconds, self.error = 0.0, None, None

    def record(self, **info: Any) -> None:
        """Add facts learnt inside the phase to its ``info``."""
        self.info.update(info)

    def __enter__(self) -> "Phase":
        for obs in list(_observers):
            obs.started(self)
        self.start = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.seconds = time.perf_counter() - self.start
        self.error = exc
        for obs in list(_observers):
            obs.ended(self)
        return False


class _Unobserved:
    """What :func:`timed` returns while nobody observes: enters, records and exits doing nothing."""

    __slots__ = ()

    def record(self, **info: Any) -> None:
        pass

    def __enter__(self) -> "_Unobserved":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        return False


_UNOBSERVED = _Unobserved()
_observers: list[Observer] = []


def timed(name: str, /, **info: Any):
    """A context for phase ``name``: a :class:`Phase` told to the observers, or a no-op when there are none."""
    return Phase(name, info) if _observers else _UNOBSERVED


def add_observer(obs: Observer) -> None:
    _observers.append(obs)


def remove_observer(obs: Observer) -> None:
    if obs in _observers:
        _observers.remove(obs)


@contextmanager
def observing(obs: Optional[Observer] = None) -> Iterator[Observer]:
    """Register ``obs`` (default: a :class:`Recorder`) for the block; yields it."""
    obs = obs if obs is not None else Recorder()
    add_observer(obs)
    try:
        yield obs
    finally:
        remove_observer(obs)


class Recorder(Observer):
    """Keeps every ended phase (``phases``) in order: the simplest observer, for tests and tools."""

    def __init__(self):
        self.phases: list[Phase] = []

    def ended(self, phase: Phase) -> None:
        self.phases.append(phase)

    def named(self, name: str) -> list[Phase]:
        return [p for p in self.phases if p.name == name]
