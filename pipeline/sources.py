"""Stage `sources`: the sha256 of every source file the active profile reads -> data/sources/.

``always_changed`` in dvc.yaml: DVC cannot see files outside the repository, so this stage looks at
them at every ``dvc repro``; the stages that read a source depend on its file here, so they re-run
exactly when a source's bytes change. See :mod:`sentlab.sources`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sentlab.config import load_params
from sentlab.io import write_json
from sentlab.pipeline_util import run_stage
from sentlab.sources import data_sources, model_sources

OUT = Path("data/sources")


def main() -> None:
    params = load_params()
    data = data_sources(params.prepare.corpus, params.prepare.nli)
    model = model_sources(params.model.backbone)
    write_json(OUT / "data.json", data)
    write_json(OUT / "model.json", model)
    print(f"sources: {sum(len(v) for v in data.values())} data files, {len(model['files'])} backbone files hashed")


if __name__ == "__main__":
    sys.exit(run_stage(main))
