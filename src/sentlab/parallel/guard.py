"""``python -m sentlab.parallel.guard -- CMD ...``: run CMD in its own process group and end that group when
the process that started the guard (a Ray worker) dies.

A Ray worker killed mid-stage (preempted, OOM-killed, ``kill -9``) would leave ``dvc repro`` and the stage's
training running as orphans beside the retried task, both writing the same worktree. The guard polls its
parent; when the parent is gone, or the guard itself receives SIGTERM/SIGINT (the task cancelled: a scheduler's
time limit), it stops the group: SIGTERM, on which a training writes its resume checkpoint after its current step
(:mod:`sentlab.train.preempt`), then SIGKILL for what is left after :data:`GRACE_S`. It waits for every process of
the group, not only CMD (``dvc`` dies at once; its training is still saving): the guard is their subreaper (Linux),
so they stay its children when ``dvc`` is gone. The retry starts from the last checkpoint alone. Its exit status is
CMD's (128 + signal when CMD was killed).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

GRACE_S = 60.0   # one training step and one resume checkpoint (a bert-base one: <= 8.4 s, docs/training.md)


def _subreaper() -> None:
    """Orphans of CMD's group (a training whose ``dvc`` died) become this process's children, not init's."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)   # PR_SET_CHILD_SUBREAPER (Linux >= 3.4)
    except (OSError, AttributeError):
        pass   # elsewhere: the group's orphans are waited for by their process group alone


def _group_alive(pgid: int) -> bool:
    while True:   # reap what has exited (ours as subreaper), then ask whether any of the group is left
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to CMD's group, then wait for all of it (SIGKILL after :data:`GRACE_S`)."""
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if proc.poll() is not None and not _group_alive(proc.pid):
                return
            time.sleep(0.1)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m sentlab.parallel.guard -- CMD ...", file=sys.stderr)
        return 2
    parent = os.getppid()
    _subreaper()
    proc = subprocess.Popen(argv, start_new_session=True)

    def forward(signum, _frame):
        _stop(proc)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while True:
        try:
            rc = proc.wait(timeout=0.5)
            return rc if rc >= 0 else 128 - rc
        except subprocess.TimeoutExpired:
            pass
        if os.getppid() != parent:   # the worker died: we were re-parented
            _stop(proc)
            return 128 + signal.SIGKILL


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
