"""How ``sentlab run`` stops (issue #65 §3): on SIGTERM (a scheduler's time limit: SLURM's ``--signal``, the
trapped batch shell of ``scripts/slurm/gpu.sbatch``) or Ctrl-C it cancels its chains and waits for them, so that every
training writes its resume checkpoint (:mod:`sentlab.train.preempt`) before the coordinator exits.
"""

from __future__ import annotations

import signal
import sys
import time


def say(msg: str) -> None:
    """A line of ``sentlab run``'s log (stderr)."""
    print(f"[sentlab run {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def on_sigterm() -> None:
    """A SIGTERM (a scheduler ending the job) unwinds like Ctrl-C: the chains are stopped (their trainings write a
    resume checkpoint), the tracking server stops, the parent run is KILLED. Installed again after ``ray.init``,
    whose fatal-signal handler in the driver would otherwise log a stack and abort the process on SIGTERM, in the
    middle of stopping the chains (seen under SLURM: issue #65 §3)."""
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))


def stop_chains(ray, running: dict, not_started: int = 0) -> None:
    """Cancel the submitted chains (``running``: Ray ref -> chain) and wait for them: a running one's ``dvc`` gets
    SIGTERM through its guard (:func:`.worktree.run_stoppable`), its training writes a resume checkpoint after its
    current step (:mod:`sentlab.train.preempt`) and the next run resumes it in the same worktree (kept: it did not
    finish). Chains not submitted yet (``not_started``) have nothing to stop."""
    from .guard import GRACE_S

    refs = list(running)
    say(f"stopping: {len(refs)} chain(s) cancelled, their trainings write a resume checkpoint (waiting up to "
        f"{GRACE_S + 30:.0f} s): " + ", ".join(c.id for c in running.values())
        + (f"; {not_started} not started" if not_started else ""))
    for r in refs:
        ray.cancel(r, force=False)
    if refs:
        ray.wait(refs, num_returns=len(refs), timeout=GRACE_S + 30)
