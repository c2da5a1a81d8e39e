"""The evaluate stage's outputs for a model the active profile does not train (its train stage's are
:mod:`sentlab.provenance.markers`'): the metrics JSON with the reason, a placeholder figure, empty per-pair cosines and
bootstrap tables, an MTEB results folder saying why it is empty. Written when ``pipeline/evaluate.py`` is run by
hand for such a model (dvc.yaml's loops evaluate only the models the profile trains).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ...runtime.io import atomic_path, write_json
from .mteb_results import write_none

PLACEHOLDER_PNG = Path(__file__).resolve().parents[2] / "static" / "not_run.png"


def write_empty_cosines(path: Path) -> None:
    """Empty per-pair cosines and bootstrap tables (:mod:`sentlab.evaluate.sts.cosines`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .cosines import BOOTSTRAP_SCHEMA, SCHEMA, bootstrap_path

    for schema, target in ((SCHEMA, path), (BOOTSTRAP_SCHEMA, bootstrap_path(path))):
        with atomic_path(target) as tmp:
            pq.write_table(pa.table({f.name: pa.array([], type=f.type) for f in schema}, schema=schema), tmp)


def write_placeholder_figure(path: Path) -> None:
    with atomic_path(path) as tmp:
        shutil.copyfile(PLACEHOLDER_PNG, tmp)


def eval_not_run(name: str, reason: str, backbone: str, profile: str, metrics_dir: Path = Path("reports/metrics"),
                 figures_dir: Path = Path("reports/figures"), cosines_dir: Path = Path("reports/cosines"),
                 mteb_dir: Path = Path("reports/mteb")) -> dict:
    """The evaluate stage's outputs for a model that was not trained: the metrics JSON with the
    reason, the placeholder figure, an empty cosines table, an MTEB results folder saying why it is empty."""
    metrics = {"model": name, "kind": "trained", "backbone": backbone, "profile": profile, "status": reason}
    write_json(Path(metrics_dir) / f"{name}.json", metrics)
    write_placeholder_figure(Path(figures_dir) / f"{name}_density.png")
    write_empty_cosines(Path(cosines_dir) / f"{name}.parquet")
    write_none(name, f"the model was not trained ({reason})", Path(mteb_dir))
    return metrics
