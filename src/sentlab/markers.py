"""The outputs of a model the active profile does not train: ``models/<name>/sentlab.json`` with the
reason and an empty curve (a train stage's), the metrics JSON with the reason, a placeholder figure
and an empty cosines table (its evaluate stage's).

The pipeline has no such stages (dvc.yaml's loops read the profile's stage list, models.yaml; the report
says "not run in this profile" for the models outside them, :func:`sentlab.report.build.profile_metrics`);
these are written when ``pipeline/train.py`` / ``pipeline/evaluate.py`` are run by hand for such a model.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

from .io import atomic_path, write_json, write_text

NOT_RUN = "not run in this profile"
CURVE_COLUMNS = ("step", "stsb_dev", "alignment", "uniformity", "loss")
PLACEHOLDER_PNG = Path(__file__).with_name("static") / "not_run.png"


def write_curve(path: Path, rows: list[dict]) -> None:
    """The dev curve CSV (:data:`CURVE_COLUMNS`), written atomically; ``rows`` empty: the header only."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(CURVE_COLUMNS), lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({k: r.get(k, "") for k in CURVE_COLUMNS})
    write_text(path, buf.getvalue())


def write_marker(models_dir: Path, curves_dir: Path, name: str, method_id: str, reason: str) -> None:
    """``models/<name>/sentlab.json`` with a status and an empty curve file (header only)."""
    with atomic_path(Path(models_dir) / name, is_dir=True) as tmp:
        (tmp / "sentlab.json").write_text(
            json.dumps({"method": method_id, "name": name, "status": reason}, indent=2) + "\n", encoding="utf-8")
    write_curve(Path(curves_dir) / f"{name}.csv", [])


def write_empty_cosines(path: Path) -> None:
    """Empty per-pair cosines and bootstrap tables (:mod:`sentlab.evaluate.sts.cosines`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .evaluate.sts.cosines import BOOTSTRAP_SCHEMA, SCHEMA, bootstrap_path

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
    from .evaluate.sts.mteb_results import write_none

    metrics = {"model": name, "kind": "trained", "backbone": backbone, "profile": profile, "status": reason}
    write_json(Path(metrics_dir) / f"{name}.json", metrics)
    write_placeholder_figure(Path(figures_dir) / f"{name}_density.png")
    write_empty_cosines(Path(cosines_dir) / f"{name}.parquet")
    write_none(name, f"the model was not trained ({reason})", Path(mteb_dir))
    return metrics
