"""Stage `export`: every trained model as a shareable folder -> exports/<model>/.

For each ``models/<m>`` that trained (``sentlab.json`` status ``trained``): the sentence-transformers
folder (a copy of ``models/<m>``, cloned copy-on-write where the filesystem can: never a hard link, which
made the two share their weights) plus
``README.md``, its model card (:mod:`sentlab.hub.card`: method and paper, the seven STS results of
``reports/metrics/<m>.json``, the params in force, the environment fingerprint when recorded, the
command that reproduces it, the citation). ``exports/index.md`` lists what was exported and what not.
The card lives here, not in ``models/<m>``: DVC forbids a stage writing into another stage's output.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Optional

from sentlab.errors import SentlabError
from sentlab.hub.card import model_card
from sentlab.runtime.io import atomic_path, independent_copy
from sentlab.stages.entry import run_stage
from sentlab.stages.stage_list import profile_models
from sentlab.config.models import load_models, split_seed, train_stage
from sentlab.config.stage_params import stage_params

log = logging.getLogger("export")
MODELS, METRICS, OUT = Path("models"), Path("reports/metrics"), Path("exports")


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SentlabError(f"{path} is missing: the stage that writes it has not run. Run `dvc repro export`, "
                           f"which runs it first.") from None
    except ValueError as e:
        raise SentlabError(f"{path} is not valid JSON ({e}); re-run the stage that writes it.") from None


def _copy_tree(src: Path, dest: Path) -> None:
    """``dest`` as a copy of ``src`` whose files are their own (:func:`sentlab.runtime.io.independent_copy`)."""
    shutil.copytree(src, dest, copy_function=independent_copy)


def seed_metrics(name: str, ours: Optional[dict[str, bool]] = None) -> dict:
    """``{"<name>-s<seed>": metrics}`` of the model's other seeds that were evaluated (the card's seed rows);
    ``ours`` (:func:`~sentlab.config.profile_models`): only the seeds the active profile trains."""
    out = {}
    for f in sorted(METRICS.glob(f"{name}-s*.json")):
        if split_seed(f.stem)[0] == name and (ours is None or ours.get(f.stem)):
            m = _read(f)
            if m.get("status") == "evaluated":
                out[f.stem] = m
    return out


def export_one(params, folder: Path, dest: Path) -> None:
    from sentlab.methods import registered
    from sentlab.methods.blocks import method_params
    from sentlab.train.run import UNKEYED_TRAIN_KEYS

    info = _read(folder / "sentlab.json")
    name = folder.name
    metrics = _read(METRICS / f"{name}.json")
    seeds = seed_metrics(name, profile_models(params))
    if seeds:
        metrics = dict(metrics, seed_rows=seeds)
    method_id = info["method"]
    in_force = metrics.get("method") or method_params(params, method_id).model_dump(mode="json")
    train = params.train.model_dump(mode="json", exclude=set(UNKEYED_TRAIN_KEYS))
    cls = registered().get(method_id)
    _copy_tree(folder, dest)
    card = model_card(name, info, metrics, in_force, train, params.profile, params.model.backbone,
                      train_stage(name), summary=getattr(cls, "summary", "") if cls else "")
    (dest / "README.md").write_text(card, encoding="utf-8")


def main() -> None:
    from sentlab.provenance.failures import failed_stages, missing_reason

    params = stage_params("export")
    ours = profile_models(params)
    done, skipped = [], []
    # a failed stage (dvc repro --keep-going, sentlab run) leaves its model out, named with its log (#54 §5)
    failures = failed_stages()
    entries = load_models() if failures and Path("models.yaml").is_file() else {}
    with atomic_path(OUT, is_dir=True) as tmp:
        present = MODELS.iterdir() if MODELS.is_dir() else ()   # no model at all: a failed first stage
        for folder in sorted(p for p in present if (p / "sentlab.json").is_file()):
            if not ours.get(folder.name):   # another profile's model left in the workspace: no stage of this one
                continue
            info = _read(folder / "sentlab.json")
            if info.get("status") != "trained":
                skipped.append((folder.name, info.get("status", "not trained")))
                continue
            why = None if (METRICS / f"{folder.name}.json").is_file() else missing_reason(folder.name, failures,
                                                                                           entries)
            if why:
                skipped.append((folder.name, why))
                continue
            if not (folder / "modules.json").is_file():
                raise SentlabError(f"{folder} has no modules.json: it was trained before models became "
                                   f"sentence-transformers folders. Re-run its train stage "
                                   f"(`dvc repro -f {train_stage(folder.name)}`).")
            export_one(params, folder, tmp / folder.name)
            done.append(folder.name)
        for name in sorted(n for n, active in ours.items() if active and not (MODELS / n / "sentlab.json").is_file()):
            why = missing_reason(name, failures, entries)
            if why:
                skipped.append((name, why))
        lines = ["# Exported models\n", "| model | folder |", "|---|---|"]
        lines += [f"| {n} | [exports/{n}]({n}/README.md) |" for n in done]
        if skipped:
            lines += ["", "Not exported (not trained in this profile, or a stage failed):", ""]
            lines += [f"- {n}: {why}" for n, why in skipped]
        (tmp / "index.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"export: {len(done)} models -> exports/ ({len(skipped)} not trained)")


if __name__ == "__main__":
    sys.exit(run_stage(main))
