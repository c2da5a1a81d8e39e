"""The outputs of a stage whose model the active profile does not train, written without torch.

Most stages of a profile are such markers (the paper profile's ablation variants and seeds exist as
stage lines in every profile): ``models/<name>/sentlab.json`` with the reason and an empty curve for
a train stage, the metrics JSON with the reason, a placeholder figure and an empty cosines table for
its evaluate stage. Under ``dvc repro`` the entry points decide from the resolved params files
(``data/params``, written by ``resolve_params`` before any other stage, so current there) and write
the marker with the standard library (and pyarrow for the empty table): about 0.1 s instead of the
~2 s of importing torch, transformers and matplotlib, for each of the ~150 marker stages.
Outside DVC (``DVC_STAGE`` unset) :func:`fast_train_marker` declines and the full path decides.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from pathlib import Path
from typing import Optional, Sequence

from .io import atomic_path, write_json, write_text

NOT_RUN = "not run in this profile"
CURVE_COLUMNS = ("step", "stsb_dev", "alignment", "uniformity", "loss")
RESOLVED = Path("data/params")
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
        (tmp / "sentlab.json").write_text(json.dumps({"method": method_id, "name": name, "status": reason}, indent=2) + "\n",
                                          encoding="utf-8")
    write_curve(Path(curves_dir) / f"{name}.csv", [])


def _resolved(rel: str) -> Optional[dict]:
    f = RESOLVED / rel
    try:
        return json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def train_stage_runs(argv: Sequence[str]) -> Optional[bool]:
    """Whether ``pipeline/train.py argv`` trains, from the resolved params files: ``METHOD`` ->
    ``methods/<id>.json`` ``trained``; ``METHOD --seed S`` -> ``seeds/<id>-<S>.json`` ``trained``;
    ``--ablation V`` -> ``ablations/variants/<V>.json`` ``enabled``. None: another form of the
    command, or a file missing (the full path decides and explains)."""
    args = list(argv)
    if len(args) == 2 and args[0] == "--ablation":
        entry = _resolved(f"ablations/variants/{args[1]}.json")
        return None if entry is None else bool(entry.get("enabled"))
    if len(args) == 1 and not args[0].startswith("-"):
        entry = _resolved(f"methods/{args[0]}.json")
        return None if entry is None else bool(entry.get("trained"))
    if len(args) == 3 and args[1] == "--seed" and not args[0].startswith("-"):
        entry = _resolved(f"seeds/{args[0]}-{args[2]}.json")
        return None if entry is None else bool(entry.get("trained"))
    return None


def train_stage_name(argv: Sequence[str]) -> tuple[str, str]:
    """(output name, method id) of a train stage command :func:`train_stage_runs` understood."""
    if argv[0] == "--ablation":
        entry = _resolved(f"ablations/variants/{argv[1]}.json") or {}
        return argv[1], str(entry.get("method", "?"))
    if len(argv) == 3:
        return f"{argv[0]}-s{argv[2]}", argv[0]
    return argv[0], argv[0]


def fast_train_marker(argv: Sequence[str]) -> bool:
    """Under ``dvc repro``: write the train stage's marker when the active profile does not train it.
    Returns True when it did (the stage is done)."""
    if not os.environ.get("DVC_STAGE") or train_stage_runs(argv) is not False:
        return False
    name, method_id = train_stage_name(argv)
    write_marker(Path("models"), Path("reports/curves"), name, method_id, NOT_RUN)
    profile = (_resolved("train.json") or {}).get("profile", "?")
    print(f"{name}: {NOT_RUN} (profile {profile}); wrote models/{name}/sentlab.json and an empty curve.")
    return True


def write_empty_cosines(path: Path) -> None:
    """Empty per-pair cosines and bootstrap tables (:mod:`sentlab.evaluate.cosines`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .evaluate.cosines import BOOTSTRAP_SCHEMA, SCHEMA, bootstrap_path

    for schema, target in ((SCHEMA, path), (BOOTSTRAP_SCHEMA, bootstrap_path(path))):
        with atomic_path(target) as tmp:
            pq.write_table(pa.table({f.name: pa.array([], type=f.type) for f in schema}, schema=schema), tmp)


def write_placeholder_figure(path: Path) -> None:
    with atomic_path(path) as tmp:
        shutil.copyfile(PLACEHOLDER_PNG, tmp)


def eval_not_run(name: str, reason: str, backbone: str, profile: str, metrics_dir: Path = Path("reports/metrics"),
                 figures_dir: Path = Path("reports/figures"), cosines_dir: Path = Path("reports/cosines")) -> dict:
    """The evaluate stage's outputs for a model that was not trained: the metrics JSON with the
    reason, the placeholder figure, an empty cosines table."""
    metrics = {"model": name, "kind": "trained", "backbone": backbone, "profile": profile, "status": reason}
    write_json(Path(metrics_dir) / f"{name}.json", metrics)
    write_placeholder_figure(Path(figures_dir) / f"{name}_density.png")
    write_empty_cosines(Path(cosines_dir) / f"{name}.parquet")
    return metrics


def fast_eval_marker(argv: Sequence[str]) -> bool:
    """Under ``dvc repro``: ``pipeline/evaluate.py trained NAME`` of a model whose ``sentlab.json``
    says it was not trained writes :func:`eval_not_run` and returns True."""
    if not os.environ.get("DVC_STAGE") or len(argv) != 2 or argv[0] != "trained":
        return False
    try:
        info = json.loads((Path("models") / argv[1] / "sentlab.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    model = _resolved("model.json")
    if not isinstance(info, dict) or info.get("status") in (None, "trained") or model is None:
        return False
    eval_not_run(argv[1], str(info["status"]), str((model.get("value") or {}).get("backbone", "")),
                 str(model.get("profile", "")))
    print(f"{argv[1]}: {info['status']}; wrote its not-run metrics, figure and cosines.")
    return True
