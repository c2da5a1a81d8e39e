"""One pipeline run per workspace: ``.dvc/tmp/sentlab/coordinator.lock`` (an ``flock``, released by the OS when its
process dies, however it dies).

Held for its whole run by ``sentlab run`` (the Ray coordinator: a second one would delete its logs and reuse its
worktrees) and by ``sentlab repro`` (``make repro``: from the profile check, through the writing of params.yaml,
to the end of ``dvc repro`` and the report built after a failure), so a second ``make repro`` with another profile
cannot rewrite params.yaml in the seconds between the first one's profile check and ``dvc repro`` taking DVC's
lock (issue #64). ``sentlab profile`` looks at it too (:func:`sentlab.stages.entry.coordinator_running`). The lock
file names its holder (pid, what it runs), so a refusal names it. Re-entrant within a process: ``sentlab repro
--jobs N`` holds it and calls the coordinator, which takes it again.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Iterator

from ..errors import SentlabError
from ..stages.entry import COORDINATOR_LOCK

def holder(state: Path) -> dict:
    """What the lock file says of its holder (pid, what), falling back on run.json's pid (a coordinator of a
    version that did not write it); {} when nothing says."""
    for path, keys in ((state / COORDINATOR_LOCK, ("pid", "what")), (state / "run.json", ("pid",))):
        try:
            info = json.loads(path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            continue
        if isinstance(info, dict) and info.get("pid"):
            return {k: info[k] for k in keys if k in info}
    return {}


@contextlib.contextmanager
def exclusive_run(state: Path, what: str = "sentlab run", why: str = "a second one would delete its logs, reuse "
                  "its worktrees and start a second MLflow server on the same store") -> Iterator[None]:
    """Hold ``<state>/coordinator.lock`` for the ``with`` block; a second holder (another process) stops with one
    paragraph naming the first and ``why`` it may not run beside it. ``what``: how this holder is named to others."""
    import fcntl

    path = (Path(state) / COORDINATOR_LOCK).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+", encoding="utf-8")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        other = holder(path.parent)
        raise SentlabError(f"Another pipeline run (`{other.get('what', 'sentlab run')}`, pid "
                           f"{other.get('pid') or 'unknown'}) is running in this workspace ({path.parent.parent.parent}"
                           f"): {why}. Wait for it to finish (`sentlab status`), or run in a clone of the "
                           f"repository.") from None
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"pid": os.getpid(), "what": what}))
        fh.flush()
        yield
    finally:
        fh.close()
