"""One stage in its own process, observed by the probe.

A ``python script.py …`` stage runs in a process forked from a server that has already imported torch and
transformers (``runpy``, as ``python script.py`` would, with ``DVC_STAGE`` set as ``dvc repro`` sets it); the
probe (:mod:`sentlab.preflight.probe`) is registered as a :mod:`sentlab.runtime.timing` observer there. Anything else
runs as a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import traceback
from pathlib import Path

from ..errors import SentlabError
from .stages import Stage

PRELOAD = ["torch", "transformers", "numpy", "pandas", "pyarrow", "sentlab.config", "sentlab.train.run",
           "sentlab.evaluate.sts.runner", "sentlab.evaluate.sts.protocol", "sentlab.tracking", "mlflow"]


def _last_frame(e: BaseException) -> str:
    """``Type: message (file:line in function)`` of an unexpected exception: its innermost frame."""
    tb = traceback.extract_tb(e.__traceback__)
    where = f" ({Path(tb[-1].filename).name}:{tb[-1].lineno} in {tb[-1].name})" if tb else ""
    msg = " ".join(str(e).split())[:600]
    return f"{type(e).__name__}: {msg}{where}"


def error_paragraph(log: str) -> str:
    """The ``sentlab: error:`` paragraph of a stage's log, else its last non-empty line."""
    lines = [ln for ln in log.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith("sentlab: error:"):
            return ln[len("sentlab: error:"):].strip()
    return lines[-1].strip()[:600] if lines else "no output"


def _run_in_child(argv: list[str], scratch: str, env: dict, result_path: str, log_path: str) -> None:
    """Body of the stage process: run ``python script args`` in-process with the probe observing it."""
    os.chdir(scratch)
    os.environ.clear()
    os.environ.update(env)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    import runpy

    from ..runtime import timing
    from ..errors import AssetMissingError
    from .probe import Probe

    probe = Probe()
    timing.add_observer(probe)
    script, args = argv[0], argv[1:]
    sys.argv = [script, *args]
    sys.path.insert(0, str(Path(script).resolve().parent))
    rc, error, kind, caught = 0, "", "", None
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException as e:  # noqa: BLE001 - a crash is a row, not the end of the preflight
        rc, caught = 1, e
        traceback.print_exc()
    caught = caught or probe.error  # the exception that ended the `stage` phase (run_stage reported it)
    if caught is not None and rc:
        kind = "asset" if isinstance(caught, AssetMissingError) else type(caught).__name__
        error = str(caught) if isinstance(caught, SentlabError) else _last_frame(caught)
    sys.stdout.flush()
    sys.stderr.flush()
    Path(result_path).write_text(json.dumps({"rc": rc, "error": error, "kind": kind, **probe.result()}))


class StageRunner:
    """Runs stages in processes forked from one server that has imported the heavy modules once."""

    def __init__(self, scratch: Path, env: dict):
        import multiprocessing as mp

        self.scratch, self.env = scratch, env
        self.ctx = mp.get_context("forkserver")
        self.ctx.set_forkserver_preload(PRELOAD)
        self.logs = scratch / ".preflight" / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    def run(self, stage: Stage) -> tuple[dict, str]:
        """(result dict, log text) of one stage."""
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", stage.name)
        log, res = self.logs / f"{safe}.log", self.logs / f"{safe}.json"
        res.unlink(missing_ok=True)
        env = dict(self.env, DVC_STAGE=stage.name, DVC_ROOT=str(self.scratch))
        argv = shlex.split(stage.cmd)
        if len(argv) >= 2 and argv[0] in ("python", "python3") and argv[1].endswith(".py") and "&&" not in argv:
            p = self.ctx.Process(target=_run_in_child, args=(argv[1:], str(self.scratch), env, str(res), str(log)))
            p.start()
            p.join()
            if res.is_file():
                out = json.loads(res.read_text())
            else:  # killed (out of memory, a signal) before it could write its result
                out = {"rc": p.exitcode if p.exitcode else 1, "error": f"the stage process ended with exit code "
                       f"{p.exitcode} before writing its result (killed, e.g. out of memory)", "kind": "killed"}
        else:
            out = self._subprocess(stage.cmd, log, env)
        return out, log.read_text(errors="replace") if log.is_file() else ""

    def _subprocess(self, cmd: str, log: Path, env: dict) -> dict:
        """A stage whose command is not ``python script.py``: a child process (its peak RSS is the children's)."""
        import resource

        with open(log, "w") as f:
            rc = subprocess.run(["bash", "-c", cmd], cwd=self.scratch, env=env, stdout=f,
                                stderr=subprocess.STDOUT).returncode
        text = log.read_text(errors="replace")
        return {"rc": rc, "error": error_paragraph(text) if rc else "", "kind": "" if not rc else "failed",
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}
