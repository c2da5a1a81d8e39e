"""What every pipeline entry point shares: logging set-up and user-facing errors."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Callable

from ..errors import SentlabError
from ..runtime.timing import timed


def run_stage(main: Callable[[], object]) -> int:
    """Run a stage's ``main``; a :class:`SentlabError` becomes one paragraph on stderr and exit 2."""
    logging.basicConfig(level=os.environ.get("SENTLAB_LOG", "INFO"), format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "urllib3", "filelock", "huggingface_hub", "alembic", "mlflow"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from ..provenance.lock import warn_outside_lock

    warn_outside_lock(logging.getLogger("sentlab.lock"))   # installed versions other than the lock's (#68)

    from ..config.stage_params import forget_reads

    forget_reads()   # only what this stage reads is compared at its end

    def observed():  # the `stage` phase (sentlab.runtime.timing): a tool observing it sees the stage's exception
        with timed("stage", script=sys.argv[0] if sys.argv else ""):
            rc = main()
        if not rc:   # a params.yaml edit while it ran: fail rather than let DVC label the outputs with it
            from ..config.stage_params import check_unchanged

            check_unchanged()
        return rc

    stage = os.environ.get("DVC_STAGE")   # set by DVC for the stage it runs: its failure is recorded (#54 §5)
    if not stage:
        return report_errors(observed)
    from ..provenance import failures
    from . import writers

    failures.clear_failure(stage)
    said: list[str] = []
    lock = None
    stop = writers.start_lifeline()   # the stage ends with the `dvc repro` that started it

    def guarded():   # never beside a live writer of the same outputs (a stage a stopped `dvc repro` left)
        nonlocal lock
        if Path(".dvc").is_dir():
            lock = writers.claim(stage)
        return observed()

    try:
        rc = report_errors(guarded, on_error=said.append)
        if rc not in (0, 130):   # 130: interrupted, not a failure of the stage
            failures.record_failure(stage, rc, said[0] if said else f"{stage} exited with status {rc}")
    except BaseException as e:
        if not (isinstance(e, SystemExit) and not e.code):
            import traceback

            failures.record_failure(stage, 1, traceback.format_exc())
        raise
    finally:
        stop.set()
        if lock is not None:
            writers.release(lock)
    return rc


def report_errors(fn: Callable[[], object], on_error: Callable[[str], object] | None = None) -> int:
    """Call ``fn``; its int result (or 0) is the exit status. User errors and Ctrl-C become one
    paragraph on stderr, no traceback (exit 2 / 130); ``on_error`` gets a user error's paragraph."""
    try:
        return int(fn() or 0)
    except SentlabError as e:
        print(f"sentlab: error: {e}", file=sys.stderr)
        if on_error is not None:
            on_error(f"sentlab: error: {e}")
        return e.exit_code
    except KeyboardInterrupt:
        print("sentlab: interrupted; outputs are renamed into place only when complete, "
              "so nothing half-written remains.", file=sys.stderr)
        return 130


def dvc_repro_running(root: str | os.PathLike) -> bool:
    """Whether a DVC command holds the workspace's lock (``.dvc/tmp/lock``, which ``dvc repro`` holds for its whole
    run): tried without waiting, released at once when free."""
    import zc.lockfile

    lock = Path(root) / ".dvc" / "tmp" / "lock"
    if not lock.parent.is_dir():
        return False
    try:
        held = zc.lockfile.LockFile(str(lock))
    except zc.lockfile.LockError:
        return True
    held.close()
    return False


COORDINATOR_LOCK = "coordinator.lock"   # in .dvc/tmp/sentlab (sentlab.parallel.STATE_DIR), held by `sentlab run`


def coordinator_running(root: str | os.PathLike) -> dict | None:
    """Whether a pipeline run holds ``root``'s coordinator lock (``sentlab.parallel.workspace_lock.exclusive_run``:
    ``sentlab run`` for its whole run, its shared and final ``dvc repro`` and the phase between them; ``sentlab
    repro``, what ``make repro`` runs, from its profile check to its report): what the lock file says of its holder
    (``pid``, 0 when unknown; ``what``), else None."""
    import fcntl
    import json

    state = Path(root) / ".dvc" / "tmp" / "sentlab"
    if not (state / COORDINATOR_LOCK).is_file():
        return None
    with open(state / COORDINATOR_LOCK, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            for path in (state / COORDINATOR_LOCK, state / "run.json"):   # run.json: a coordinator of before
                try:
                    info = json.loads(path.read_text() or "{}")
                    if isinstance(info, dict) and info.get("pid"):
                        return {"pid": int(info["pid"]), "what": str(info.get("what", "sentlab run"))}
                except (OSError, ValueError, TypeError):
                    continue
            return {"pid": 0, "what": "sentlab run"}
        fcntl.flock(fh, fcntl.LOCK_UN)
    return None
