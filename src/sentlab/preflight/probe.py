"""The probe: an observer of the phases a stage declares (:mod:`sentlab.runtime.timing`), in the stage's process.

It patches nothing. It measures the ``step`` phases of the training loop (seconds per optimiser step, the
resident size after the first), keeps each ``plan`` (the slice's batch and step count), the ``corpus`` a
training loads, the ``encode`` phases (sentences and seconds, nested passes counted once), and the
exception that ended the ``stage`` phase; at the end, the peak RSS (``getrusage``) and CUDA peak.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path
from typing import Optional

from ..runtime.timing import Observer, Phase


def current_rss_mb() -> Optional[float]:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _cuda_sync(phase: Phase) -> None:
    """Wait for the queued CUDA work of a phase on a CUDA device, so that its seconds are its own."""
    if phase.info.get("device") == "cuda":
        import torch

        torch.cuda.synchronize()


class Probe(Observer):
    """Registered in a stage's process (``sentlab.runtime.timing.add_observer``); :meth:`result` is its record."""

    def __init__(self):
        self.step_seconds: list[float] = []
        self.rss_after_first_step: Optional[float] = None
        self.enc_sentences = 0
        self.enc_seconds = 0.0
        self._enc_depth = 0
        self.plans: list[dict] = []
        self.corpora: list[dict] = []
        self.error: Optional[BaseException] = None
        self.start_rss_mb = current_rss_mb()

    def started(self, phase: Phase) -> None:
        if phase.name in ("step", "encode"):
            _cuda_sync(phase)
        if phase.name == "encode":
            self._enc_depth += 1

    def ended(self, phase: Phase) -> None:
        if phase.name in ("step", "encode"):
            _cuda_sync(phase)
        if phase.name == "step" and phase.error is None:
            # remeasured from the phase's start: the CUDA work queued in it has finished now
            self.step_seconds.append(time.perf_counter() - phase.start)
            if self.rss_after_first_step is None:
                self.rss_after_first_step = current_rss_mb()
        elif phase.name == "encode":
            self._enc_depth -= 1
            if self._enc_depth == 0:
                self.enc_sentences += int(phase.info.get("sentences", 0))
                self.enc_seconds += time.perf_counter() - phase.start
        elif phase.name == "plan" and phase.error is None:
            self.plans.append({k: phase.info.get(k) for k in ("sentences", "batch_size", "grad_accum",
                                                               "steps_per_epoch", "total_steps")})
        elif phase.name == "corpus" and phase.error is None:
            self.corpora.append(dict(phase.info))
        elif phase.name == "stage" and phase.error is not None and not isinstance(phase.error, SystemExit):
            self.error = phase.error

    def result(self) -> dict:
        times = self.step_seconds
        out = {"steps": len(times), "sec_per_step": (sorted(times)[len(times) // 2] if times else None),
               "enc_sentences": self.enc_sentences, "enc_seconds": self.enc_seconds, "plans": self.plans,
               "corpora": self.corpora, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               "rss_after_first_step_mb": self.rss_after_first_step, "start_rss_mb": self.start_rss_mb,
               "cuda_peak_mb": None}
        try:
            import torch

            if torch.cuda.is_available() and torch.cuda.is_initialized():
                out["cuda_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
        except Exception:  # noqa: BLE001 - no CUDA: nothing to read
            pass
        return out
