"""A stage's process ends with the ``dvc repro`` that started it, and never runs beside a live writer of its outputs.

* **Lifeline.** DVC starts a stage's command through a shell and does not pass on a SIGTERM: a ``dvc repro`` that is
  stopped (``kill``, a CI timeout) leaves the stage running and frees DVC's lock, so a second ``dvc repro`` could
  start beside it. :func:`start_lifeline` watches the ``dvc`` process (the first ancestor that is not a shell; the
  kernel's ``PR_SET_PDEATHSIG`` would only see the shell) from a daemon thread: once it is gone, the stage is
  interrupted as by Ctrl-C (its temporary outputs are removed, exit 130; a stage started in the background, whose
  SIGINT is ignored, gets Python's handler back), and killed if it has not ended after :data:`GRACE_S` seconds.
  The Ray path has its own (:mod:`sentlab.parallel.guard`).
* **Writer lock.** While a stage runs, ``.dvc/tmp/sentlab/writers/<stage>.json`` names its process (host, pid, the
  pid's start time). A stage whose lock names a live process of this host refuses to start, and the ``sources``
  stage (the first of every ``dvc repro``, which sweeps temporary files) refuses while any stage's writer lives.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Optional

from ..errors import SentlabError
from ..tracking import process_alive, process_start_time

GRACE_S = 30.0        # after the interrupt, the stage is killed if still running
POLL_S = 1.0
SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox"}   # DVC's cmd runs in $SHELL
WRITERS = Path(".dvc/tmp/sentlab/writers")


def _stat(pid: int) -> Optional[list[str]]:
    """/proc/<pid>/stat's fields after the command name (field 3 on), with the name first; None when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = text[text.index("(") + 1: text.rindex(")")]
    return [name, *text[text.rindex(")") + 2:].split()]


def start_time(pid: int) -> str:
    """A process's start time in clock ticks since boot ('' when unknown): a reused pid is another process."""
    return process_start_time(pid)


def alive(pid: int, started: str = "") -> bool:
    """Whether process ``pid`` of this host runs (and, given ``started``, is the one that started then)."""
    return process_alive(pid, started)


def dvc_ancestor(pid: Optional[int] = None) -> Optional[int]:
    """The first ancestor of ``pid`` (default: this process) that is not a shell: the ``dvc repro`` that runs this
    stage; None where /proc cannot say."""
    st = _stat(pid or os.getpid())
    while st is not None:
        parent = int(st[2])
        if parent <= 1:
            return None
        st = _stat(parent)
        if st is not None and st[0] not in SHELLS:
            return parent
    return None


def start_lifeline(owner: Optional[int] = None) -> threading.Event:
    """Interrupt this process when ``owner`` (default :func:`dvc_ancestor`) ends; set the returned event to stop
    watching (the stage ended)."""
    stop = threading.Event()
    owner = owner or dvc_ancestor()
    if owner is None:
        return stop
    started = start_time(owner)
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # started as a non-interactive shell's `cmd &` (nohup … &, a batch script), the process ignores SIGINT, and
        # Python then raises no KeyboardInterrupt: the lifeline's interrupt would be lost and the stage run on
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def watch():
        while alive(owner, started):
            if stop.wait(POLL_S):
                return
        os.kill(os.getpid(), signal.SIGINT)    # KeyboardInterrupt: temporary outputs removed, exit 130
        if not stop.wait(GRACE_S):
            os.kill(os.getpid(), signal.SIGKILL)   # a stage stuck where Python cannot raise

    threading.Thread(target=watch, name="sentlab-lifeline", daemon=True).start()
    return stop


def _lock_path(stage: str, root: Path) -> Path:
    return root / WRITERS / f"{stage.replace('/', '_')}.json"


def live_writer(path: Path) -> Optional[dict]:
    """The writer a lock file names when it is a live process of this host, else None."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or info.get("host") != socket.gethostname():
        return None   # another host's lock cannot be checked here (a workspace is one machine's)
    pid = info.get("pid")
    return info if isinstance(pid, int) and pid != os.getpid() and alive(pid, info.get("started", "")) else None


def _busy(stage: str, info: dict) -> SentlabError:
    return SentlabError(f"stage `{stage}` is still running in this workspace (pid {info['pid']} on "
                        f"{info['host']}, since {time.strftime('%H:%M:%S', time.localtime(info.get('since', 0)))}), "
                        f"left by a `dvc repro` that was stopped: a second run would write the same outputs. Wait for "
                        f"it to end or stop it (`kill {info['pid']}`), then run again.")


def ancestors(pid: Optional[int] = None) -> set[int]:
    """The pids above ``pid`` (default: this process), from /proc."""
    out: set[int] = set()
    st = _stat(pid or os.getpid())
    while st is not None and int(st[2]) > 1 and int(st[2]) not in out:
        out.add(int(st[2]))
        st = _stat(int(st[2]))
    return out


def claim(stage: str, root: str | os.PathLike = ".") -> Optional[Path]:
    """Record this process as the writer of ``stage``'s outputs; refuse when a live process already is. None (no
    lock of its own) for a process the writer started: a rank of a training under torchrun."""
    from ..runtime.io import write_json

    path = _lock_path(stage, Path(root))
    other = live_writer(path)
    if other is not None and other["pid"] in ancestors():
        return None
    if other is not None:
        raise _busy(stage, other)
    write_json(path, {"stage": stage, "host": socket.gethostname(), "pid": os.getpid(),
                      "started": start_time(os.getpid()), "since": time.time()})
    return path


def release(path: Path) -> None:
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if info.get("pid") == os.getpid():
        path.unlink(missing_ok=True)


def check_no_live_writer(root: str | os.PathLike = ".") -> None:
    """Refuse while any stage of this workspace has a live writer (the ``sources`` stage, before it sweeps)."""
    folder = Path(root) / WRITERS
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        info = live_writer(path)
        if info is not None:
            raise _busy(str(info.get("stage", path.stem)), info)
