"""Stage `sources`: the sha256 of every source file the active profile reads -> data/sources/.

``always_changed`` in dvc.yaml: DVC cannot see files outside the repository, so this stage looks at
them at every ``dvc repro``; the stages that read a source depend on its file here, so they re-run
exactly when a source's bytes change. See :mod:`sentlab.sources`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sentlab.config import load_params
from sentlab.io import write_json
from sentlab.pipeline_util import run_stage
from sentlab.sources import data_sources, model_sources, parse_sources

OUT = Path("data/sources")


def main() -> None:
    """Hash the sources; when they (or the prepare settings) differ from the previous run's, parse them as
    prepare will, so a bad file fails here (one paragraph naming it, exit 2) while prepare's outputs are
    still in place: DVC removes a stage's outputs before running it. The outputs here persist (dvc.yaml),
    so the previous hashes are there to compare with and stay when this stage fails."""
    params = load_params()
    data = {"files": data_sources(params.prepare.corpus, params.prepare.nli),
            "checked_with": {"seed": params.seed, "prepare": params.prepare.model_dump(mode="json")}}
    previous = OUT / "data.json"
    if not previous.is_file() or json.loads(previous.read_text(encoding="utf-8")) != data:
        parse_sources(params)
    model = model_sources(params.model.backbone)
    write_json(OUT / "data.json", data)
    write_json(OUT / "model.json", model)
    n = sum(len(v) for v in data["files"].values())
    print(f"sources: {n} data files, {len(model['files'])} backbone files hashed")


if __name__ == "__main__":
    sys.exit(run_stage(main))
