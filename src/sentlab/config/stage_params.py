"""What a stage reads of params.yaml: exactly the keys its dvc.yaml entry declares.

A stage's script calls :func:`stage_params`. It asks DVC for the params the stage declares
(``dvc.api.params_show(stages=..., deps=True)``, the stage named by ``DVC_STAGE``, which ``dvc repro``
sets) and validates them; the result is a :class:`Declared` view of :class:`~sentlab.config.Params`
whose undeclared sections and keys raise :class:`UndeclaredParam` when read. An edit DVC does not see
cannot reach a stage, and a stage that reads a key it does not declare fails loudly (naming the key to
add) instead of running on a value DVC never compared.

One exception is params.yaml ``runtime`` (threads, device, checkpoint interval, loader workers,
heap, processes): how a training runs, never what it computes, so no stage declares it, every stage may read it
(``params.runtime``), and editing it re-runs nothing (:data:`sentlab.config.RUNTIME_TRAIN_KEYS`). The other is
params.yaml ``profile`` (:data:`RECORDS`), the profile's name: a label each stage records with its outputs and MLflow
runs, never a value it computes with, so widening a profile (one that ``extends:`` it) or renaming its file re-runs
only the stages whose values changed.

Before a stage gets its params, :func:`check_machine` checks that this machine runs what they ask (a GPU the
profile states, bf16 not emulated): a stage that cannot run here stops before any work.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from . import Params, validate

from .yaml_files import read_yaml
from ..errors import SentlabError

DICT_SECTIONS = ("methods", "methods_from", "ablations")
RECORDS = ("profile",)   # params.yaml keys every stage reads as labels and none declares (the module docstring)


class UndeclaredParam(SentlabError):
    """A stage read a params key its dvc.yaml entry does not declare."""


def declared_params(stage: str, root: str | os.PathLike = ".") -> dict:
    """``{section: value}`` of the params.yaml keys ``stage`` declares, as DVC resolves them."""
    import dvc.api

    if not (Path(root) / ".dvc").is_dir() or not (Path(root) / "dvc.yaml").is_file():
        raise SentlabError(f"{Path(root).resolve()} is not a sentlab DVC project (no .dvc/ or dvc.yaml): a stage "
                           f"script runs in the repository root (`dvc repro`), where dvc.yaml declares what it reads.")
    from dvc.stage.exceptions import StageNotFound

    try:
        return dvc.api.params_show(stages=[stage], deps=True, repo=str(root))
    except StageNotFound as e:
        raise SentlabError(f"dvc.yaml has no stage `{stage}` in this profile ({type(e).__name__}: {e}). The stages "
                           f"are the models of models.yaml: add the method to params.yaml `train.methods` and run "
                           f"`sentlab stages`, or train it outside the pipeline with `sentlab train`.") from None
    except Exception as e:  # noqa: BLE001 - DVC's own error types: say what DVC said, never "no stage"
        params = Path(root) / "params.yaml"
        if params.is_file():
            read_yaml(params)   # a params.yaml that does not parse (a duplicate key) is named with its line
        raise SentlabError(f"DVC could not resolve the params of stage `{stage}` ({type(e).__name__}: {e}). Check "
                           f"that dvc.yaml, params.yaml and models.yaml parse (`dvc stage list` names what DVC "
                           f"cannot read), fix it and run again.") from None


def _key_paths(tree: dict, prefix: tuple = ()) -> set[tuple]:
    """Every (section, key, ...) path down to the leaves DVC returned, and each prefix of them."""
    out: set[tuple] = set()
    for k, v in tree.items():
        out.add(prefix + (k,))
        if isinstance(v, dict) and prefix == () and k not in DICT_SECTIONS:
            out |= _key_paths(v, (k,))
    return out


class SectionView:
    """A params section of which only ``keys`` may be read."""

    def __init__(self, model, section: str, keys: set[str], stage: str):
        self.__dict__.update(_model=model, _section=section, _keys=set(keys), _stage=stage)

    def __getattr__(self, key: str):
        if key in type(self._model).model_fields and key not in self._keys:
            raise UndeclaredParam(f"stage `{self._stage}` reads `{self._section}.{key}`, which its dvc.yaml entry does "
                                  f"not declare: add `{self._section}.{key}` to the stage's params in dvc.yaml.")
        return getattr(self._model, key)

    def model_dump(self, **kw) -> dict:
        return {k: v for k, v in self._model.model_dump(**kw).items() if k in self._keys}

    def model_copy(self, update: Optional[dict] = None, **kw) -> "SectionView":
        return SectionView(self._model.model_copy(update=update, **kw), self._section, self._keys | set(update or {}),
                           self._stage)


class Declared:
    """:class:`~sentlab.config.Params` as one stage may read it (see the module docstring)."""

    def __init__(self, params: Params, paths: set[tuple], stage: str, extra_keys: Optional[dict] = None):
        self.__dict__.update(_params=params, _paths=paths, _stage=stage, _extra=extra_keys or {})

    def __getattr__(self, name: str):
        p = self._params
        if name not in type(p).model_fields or name == "runtime":
            return getattr(p, name)  # methods: method_block, trained_ids; `runtime`: every stage reads it
        if name in DICT_SECTIONS or (name,) in self._paths:
            keys = {path[1] for path in self._paths if len(path) == 2 and path[0] == name}
            if keys:
                return SectionView(getattr(p, name), name, keys | set(self._extra.get(name, ())), self._stage)
            return getattr(p, name)
        raise UndeclaredParam(f"stage `{self._stage}` reads `{name}`, which its dvc.yaml entry does not declare: add "
                              f"`{name}` (or the keys of it that the stage reads) to the stage's params in dvc.yaml.")

    def model_copy(self, update: Optional[dict] = None, **kw) -> "Declared":
        paths = self._paths | {(k,) for k in (update or {})}
        return Declared(self._params.model_copy(update=update, **kw), paths, self._stage, self._extra)


def stage_name(default: Optional[str] = None) -> str:
    """The stage this process runs: ``DVC_STAGE`` (set by ``dvc repro``), else ``default`` (a script run by
    hand names the stage it stands for)."""
    name = os.environ.get("DVC_STAGE") or default
    if not name:
        raise SentlabError("This is a DVC stage's script: run it with `dvc repro` (or name its stage).")
    return name


# What this process's stage read (stage -> (root, the declared values)): compared with params.yaml when the stage
# ends (:func:`check_unchanged`, called by sentlab.stages.entry.run_stage).
_READ: dict[str, tuple[Path, dict]] = {}


def stage_params(stage: Optional[str] = None, root: str | os.PathLike = ".") -> Declared:
    """The params ``stage`` declares (default: :func:`stage_name`), validated, plus ``runtime`` and :data:`RECORDS`."""
    import copy

    stage = stage_name(stage)
    raw = declared_params(stage, root)
    _READ[stage] = (Path(root), copy.deepcopy(raw))
    doc = read_yaml(Path(root) / "params.yaml")
    raw["runtime"] = doc.get("runtime") or {}
    raw.update({k: doc.get(k, Params.model_fields[k].default) for k in RECORDS})
    params = declared_view(raw, stage)
    check_machine(params, stage)
    return params


def check_machine(params: Declared, stage: str) -> list[str]:
    """Whether this machine can run ``stage`` as the profile asks, before it does any work
    (:func:`sentlab.runtime.device.check_profile`): a stage that declares ``train.precision`` (the trainings;
    ``sources``,
    which checks the whole profile at the start of every ``dvc repro``) checks the training's device
    (``runtime.device``: ``cuda`` where torch sees no CUDA GPU stops) and precision (bf16 where it would be emulated
    stops unless ``runtime.emulated_precision: allow``); one that declares ``evaluate.device`` (the encodings) the
    same for ``runtime.device`` and ``evaluate.device`` / ``evaluate.precision`` (and ``glue.finetune.precision``
    where it declares it: the GLUE stages, ``sources``). Returns what ``allow`` let run
    emulated (logged). ``sources`` checks nothing in a job of the CPU stages only
    (:data:`sentlab.runtime.device.CPU_STAGES_ENV`)."""
    import logging

    from ..runtime.device import check_profile, cpu_stages_only

    paths = params._paths
    trains, encodes = ("train", "precision") in paths, ("evaluate", "device") in paths
    if not (trains or encodes) or (stage == "sources" and cpu_stages_only()):
        return []
    runtime = params.runtime
    fine_tunes = encodes and ("glue", "finetune") in paths
    records = check_profile(
        device=runtime.device, train_precision=params.train.precision if trains else None,
        evaluate_device=params.evaluate.device if encodes else None,
        evaluate_precision=params.evaluate.precision if ("evaluate", "precision") in paths else None,
        glue_precision=params.glue.finetune.precision if fine_tunes else None,
        allow=runtime.emulated_precision)
    for line in records:
        logging.getLogger(__name__).warning("%s: %s", stage, line)
    return records


def declared_view(raw: dict, stage: str) -> Declared:
    """Validate the declared ``raw`` params and wrap them; the train block also carries the runtime keys."""
    from . import RUNTIME_TRAIN_KEYS

    params = validate(raw, source=f"params.yaml (the keys stage `{stage}` declares)")
    paths = _key_paths({k: v for k, v in raw.items() if k != "runtime"})
    return Declared(params, paths, stage, extra_keys={"train": RUNTIME_TRAIN_KEYS})


def runtime_params(root: str | os.PathLike = ".") -> Any:
    """params.yaml ``runtime``, validated (the keys no stage declares)."""
    return validate({"runtime": read_yaml(Path(root) / "params.yaml").get("runtime") or {}}).runtime


def training_threads(root: str | os.PathLike = ".") -> Optional[int]:
    """params.yaml ``train.num_threads``, validated: the threads each training stage of the profile runs on."""
    train = read_yaml(Path(root) / "params.yaml").get("train") or {}
    return validate({"train": {"num_threads": train.get("num_threads")}}).train.num_threads


def forget_reads() -> None:
    """Start a stage afresh: :func:`check_unchanged` compares only what is read after this."""
    _READ.clear()


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict) and tree:
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: tree}


def params_changed(stage: str, root: str | os.PathLike, before: dict) -> dict[str, tuple[Any, Any]]:
    """``{key: (read, now)}`` of the keys ``stage`` declares whose value in params.yaml differs from ``before``."""
    old, new = _flat(before), _flat(declared_params(stage, root))
    return {k: (old.get(k), new.get(k)) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)}


def check_unchanged() -> None:
    """Fail when a params key a stage of this process declares changed in params.yaml while it ran.

    DVC hashes a stage's params after its command ends and the stage reads them at its start: an edit in between
    would label the outputs, in dvc.lock and DVC's run cache, with values they were not made with. The stage's
    outputs (all but ``persist`` ones) are removed first, so nothing made with the old values is left to commit."""
    for stage, (root, before) in list(_READ.items()):
        changed = params_changed(stage, root, before)
        if not changed:
            continue
        removed = remove_outputs(stage, root)
        what = "; ".join(f"`{k}` {old!r} -> {new!r}" for k, (old, new) in changed.items())
        raise SentlabError(f"params.yaml changed while stage `{stage}` ran: {what} (read at its start -> in the file "
                           f"now). Its outputs were made with the values read at the start, which DVC would have "
                           f"recorded as the new ones, so the stage fails"
                           f"{' and its outputs were removed (' + ', '.join(removed) + ')' if removed else ''}. "
                           f"Re-run it with the values now in params.yaml: `dvc repro {stage}` (edit params.yaml "
                           f"only while no stage that declares the key runs).")


def remove_outputs(stage: str, root: str | os.PathLike = ".") -> list[str]:
    """Remove the outputs (outs, metrics, plots) ``stage`` declares in dvc.yaml, except ``persist`` ones (DVC keeps
    those across runs); returns their paths as dvc.yaml names them."""
    import shutil

    from dvc.repo import Repo

    removed = []
    with Repo(str(root)) as repo:
        for st in repo.stage.collect(stage):
            for out in st.outs:
                path = Path(root) / str(out.def_path)
                if out.persist or not (path.exists() or path.is_symlink()):
                    continue
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)   # ranks of one training may race here
                else:
                    path.unlink(missing_ok=True)
                removed.append(str(out.def_path))
    return removed
