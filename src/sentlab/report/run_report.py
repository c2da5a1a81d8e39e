"""``sentlab report --from-run``: the report of a parallel run (``sentlab run --jobs N``) from what it has finished,
while it runs or after it was killed, before its final ``dvc repro`` (issue #65 §5).

It reads the workspace's report inputs (``reports/metrics``, ``reports/cosines``, ``reports/curves``, the models'
``sentlab.json``, ``data/prepare_stats.json``, ``models.yaml``) and lays over them what each finished stage of the
run kept (:mod:`sentlab.provenance.run_results`: ``.dvc/tmp/sentlab/results/<stage>/``); the outputs the workspace
still holds of a stage the run has not finished (queued, running, failed, skipped: an earlier run's, other params)
are left out, so its rows say ``not finished: <stage> running, log …`` instead of showing old numbers. The report
is built into a folder of its own (default ``.dvc/tmp/sentlab/report/``, replaced as one folder): the workspace's
``reports/``, which DVC owns, is never written; its index opens with what the report was built from.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Optional

from ..errors import SentlabError
from ..runtime.io import atomic_path
from ..provenance.failures import STATE_DIR, failed_stages
from ..provenance.run_results import MODEL_FILES, REPORT_INPUTS, kept_results, report_files, stage_outs

DEFAULT_OUT = Path(STATE_DIR) / "report"
UNFINISHED = ("queued", "running")


def _states(root: Path) -> dict[str, dict]:
    out = {}
    for f in sorted((root / STATE_DIR / "stages").glob("*.json")):
        try:
            out[f.stem] = json.loads(f.read_text())
        except ValueError:   # a killed writer's
            out[f.stem] = {"status": "unknown"}
    return out


def _copy_inputs(root: Path, dest: Path) -> None:
    """The workspace's report inputs into ``dest`` (the same relative paths)."""
    files = [f for d in REPORT_INPUTS for f in report_files(root, d)]
    files += [f"models/{m.name}/{f}" for m in sorted((root / "models").glob("*")) if m.is_dir() for f in MODEL_FILES
              if (m / f).is_file()]
    files += [f for f in ("data/prepare_stats.json", "models.yaml") if (root / f).is_file()]
    for f in files:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / f, dest / f)


def build_run_report(root: str | Path = ".", out: Optional[str | Path] = None, backbone: str = "",
                     profile: str = "", models: Optional[dict[str, bool]] = None):
    """Build the report of the workspace ``root``'s last ``sentlab run`` from what it finished into ``out``
    (default :data:`DEFAULT_OUT` under ``root``); returns (the :class:`~.build.Report`, the index's path,
    ``{"finished": [...], "unfinished": {stage: status}}``)."""
    from .build import INDEX, build_report

    root = Path(root).resolve()
    out = Path(out) if out is not None else root / DEFAULT_OUT
    state = root / STATE_DIR
    try:
        run = json.loads((state / "run.json").read_text())
    except (OSError, ValueError):
        raise SentlabError(f"No `sentlab run` here ({state / 'run.json'} is missing or unreadable): "
                           f"`sentlab report --from-run` builds the report of a parallel run from the stages it "
                           f"finished. Run `sentlab report` for the workspace's own outputs.") from None
    states, kept = _states(root), kept_results(root)
    unfinished = {s: st.get("status", "unknown") for s, st in states.items()
                  if s not in kept and st.get("status") not in ("restored", "done")}
    not_here = sorted(s for s, st in states.items() if s not in kept and st.get("status") == "done")   # --remote
    failures = failed_stages(root)
    failures.update({s: {"status": st.get("status", "unknown"), "log": st.get("log")} for s, st in states.items()
                     if (s in unfinished or s in not_here) and st.get("status") not in ("failed", "skipped")})
    ended = run.get("ended")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    banner = (f"**A partial report of `sentlab run` {run.get('run_id', '?')}** "
              f"({'ended, exit ' + str(run.get('rc')) if ended else 'still running or killed'}), built {when} "
              f"outside DVC from the {len(kept)} stages it had finished (`sentlab report --from-run`); "
              f"{len(unfinished)} not finished: " + (", ".join(f"`{s}` ({st})" for s, st in sorted(unfinished.items()))
                                                     or "none") + "."
              + (f" Finished on other nodes, not here until the final `dvc repro`: {', '.join(not_here)}."
                 if not_here else "")
              + " The workspace's reports/ is DVC's, written by the run's final `dvc repro`.")
    with atomic_path(out, is_dir=True) as tmp:
        _copy_inputs(root, tmp)
        for s in [*unfinished, *not_here]:   # the workspace's outputs of a stage this run did not finish here: older
            for f in stage_outs(root / "dvc.lock", s):
                target = tmp / f
                if target.is_dir():
                    shutil.rmtree(target)
                else:
                    target.unlink(missing_ok=True)
        for s, folder in kept.items():
            for f in json.loads((folder / "kept.json").read_text())["files"]:
                (tmp / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(folder / f, tmp / f)
        rep = build_report(tmp, backbone, profile, models, failures=failures, banner=banner)
    rep.root = out
    return rep, out / INDEX, {"finished": sorted(kept), "unfinished": unfinished}
