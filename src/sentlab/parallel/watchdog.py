"""``python -m sentlab.parallel.watchdog PID -- CMD ...``: run CMD for as long as process PID lives.

The parallel runner starts its MLflow tracking server through this (:mod:`sentlab.parallel.tracking_server`). The
watchdog leads a new process group holding CMD and everything CMD starts (``mlflow server`` runs uvicorn in a
child of its own); when PID is gone, however it ended (SIGKILL included, which no handler of PID's sees), the
watchdog ends the whole group: no server is left running after its coordinator. It exits with CMD's status when
CMD ends first.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

POLL_S = 1.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        print("usage: python -m sentlab.parallel.watchdog PID -- CMD [ARG ...]", file=sys.stderr)
        return 2
    parent, cmd = int(argv[0]), argv[2:]
    child = subprocess.Popen(cmd)   # same process group as this watchdog (the group's leader)
    while True:
        rc = child.poll()
        if rc is not None:
            return rc
        if not _alive(parent) or os.getppid() == 1:
            os.killpg(os.getpgrp(), signal.SIGTERM)   # the server and its workers (and this process)
            deadline = time.time() + 20
            while child.poll() is None and time.time() < deadline:
                time.sleep(0.2)
            os.killpg(os.getpgrp(), signal.SIGKILL)
        time.sleep(POLL_S)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))   # killpg's SIGTERM reaches this process too
    sys.exit(main(sys.argv[1:]))
