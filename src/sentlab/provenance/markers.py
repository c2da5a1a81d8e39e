"""The outputs of a model the active profile does not train, a train stage's: ``models/<name>/sentlab.json``
with the reason and an empty curve (the evaluate stage's, the metrics JSON with the reason, a placeholder figure
and empty cosines and MTEB tables, are :mod:`sentlab.evaluate.sts.not_run`'s).

The pipeline has no such stages (dvc.yaml's loops read the profile's stage list, models.yaml; the report
says "not run in this profile" for the models outside them, :func:`sentlab.report.build.profile_metrics`);
these are written when ``pipeline/train.py`` / ``pipeline/evaluate.py`` are run by hand for such a model.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from ..runtime.io import atomic_path, write_text

NOT_RUN = "not run in this profile"
CURVE_COLUMNS = ("step", "stsb_dev", "alignment", "uniformity", "loss")


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
