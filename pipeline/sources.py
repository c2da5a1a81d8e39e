"""Stage `sources`: the sha256 of every source file the profile reads and of the code each kind of
stage executes -> data/sources/ (``data.json``, ``model.json``, ``transfer.json``, ``glue.json``,
``retrieval.json``, ``code/<kind>.json``, ``code/train/<method>.json``).

``always_changed`` in dvc.yaml: DVC cannot see files outside the repository, so this stage looks at
them at every ``dvc repro``; the stages that read a source depend on its file here, so they re-run
exactly when a source's bytes change (:mod:`sentlab.stages.sources`). The code files hash the sentlab modules
each entry point can import, comments and docstrings left out (:mod:`sentlab.provenance.code`). It runs
first, so it is also where a stale stage list (models.yaml) stops the run
(:func:`sentlab.stages.stage_list.check_stage_list`), and where a machine that cannot run the profile as it asks
stops it before any stage works (:func:`sentlab.config.stage_params.check_machine`: a ``runtime.device: cuda``
profile where torch sees no GPU, bf16 where it would be emulated).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sentlab.runtime.io import sweep_temporaries, write_json
from sentlab.stages.entry import run_stage
from sentlab.stages.writers import check_no_live_writer
from sentlab.provenance.code import stage_code_files
from sentlab.stages.sources import (data_sources, glue_sources, model_sources, parse_sources, retrieval_sources,
                             transfer_sources)
from sentlab.methods.blocks import check_blocks
from sentlab.stages.stage_list import check_stage_list
from sentlab.config.stage_params import stage_params
from sentlab.tracking.budget import probe
from sentlab.tracking.runs import sweep_orphans

OUT = Path("data/sources")


def main() -> None:
    """Hash the sources; when they (or the prepare settings) differ from the previous run's, parse them as
    prepare will, so a bad file fails here (one paragraph naming it, exit 2) while prepare's outputs are
    still in place: DVC removes a stage's outputs before running it. The outputs here persist (dvc.yaml),
    so the previous hashes are there to compare with and stay when this stage fails."""
    params = stage_params("sources")
    check_no_live_writer()   # a stage a stopped `dvc repro` left running: its temporary files are not swept
    probe(max_age_s=600)   # the first stage of every `dvc repro`: the pipeline run's one wait on a tracking server
    check_blocks(params)   # every method line and ablation against its method's Params, before any stage does work
    check_stage_list(params)
    data = {"files": data_sources(params.prepare.corpus, params.prepare.nli),
            "checked_with": {"seed": params.seed, "prepare": params.prepare.model_dump(mode="json")}}
    previous = OUT / "data.json"
    if not previous.is_file() or json.loads(previous.read_text(encoding="utf-8")) != data:
        parse_sources(params)
    model = model_sources(params.model.backbone)
    write_json(OUT / "data.json", data)
    write_json(OUT / "model.json", model)
    before = OUT / "transfer.json"
    previous = json.loads(before.read_text(encoding="utf-8")) if before.is_file() else None
    write_json(OUT / "transfer.json", transfer_sources(params.transfer.tasks, params.transfer.models, previous))
    write_json(OUT / "glue.json", glue_sources(params.glue.tasks, params.glue.models))
    write_json(OUT / "retrieval.json", retrieval_sources(params.retrieval.tasks, params.retrieval.models))
    code = stage_code_files()
    for rel, content in code.items():
        write_json(OUT / rel, content)
    for old in sorted((OUT / "code").rglob("*.json")):   # a removed method's, or the layout before one per method
        if old.relative_to(OUT).as_posix() not in code:
            old.unlink()
    n = sum(len(v) for v in data["files"].values())
    print(f"sources: {n} data files, {len(model['files'])} backbone files hashed")
    for left in sweep_temporaries():   # killed writers' temporaries: no writer of this workspace runs now (DVC's lock)
        print(f"sources: removed {left}, left by an interrupted write")
    closed = sweep_orphans()   # MLflow runs left RUNNING by a killed stage (its process is gone), at every dvc repro
    if closed:
        print(f"sources: {closed} MLflow run(s) left RUNNING by a process that is gone marked KILLED")


if __name__ == "__main__":
    sys.exit(run_stage(main))
