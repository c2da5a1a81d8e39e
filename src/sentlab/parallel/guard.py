"""``python -m sentlab.parallel.guard -- CMD ...``: run CMD in its own process group and end that group when
the process that started the guard (a Ray worker) dies.

A Ray worker killed mid-stage (preempted, OOM-killed, ``kill -9``) would leave ``dvc repro`` and the stage's
training running as orphans beside the retried task, both writing the same worktree. The guard polls its
parent; when the parent is gone it stops the group (SIGTERM, then SIGKILL after a grace period), so the
retry starts from the last checkpoint alone. Its exit status is CMD's (128 + signal when CMD was killed).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

GRACE_S = 10.0


def _stop(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m sentlab.parallel.guard -- CMD ...", file=sys.stderr)
        return 2
    parent = os.getppid()
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
