"""Checkpoints: the resumable training state and the exported (best) model.

Resume checkpoint (``checkpoints/<name>/<params hash>/last/``, outside DVC's
outputs, written atomically as one folder):

* ``state.pt`` — tensors only, loaded with ``torch.load(weights_only=True)``:
  the method's ``state_dict()`` (weights, momentum copies, queue buffers), the
  optimiser and scheduler state, torch's CPU (and CUDA) RNG states;
* ``state.json`` — the step, best dev score/step, curve rows so far,
  Python's and NumPy's RNG states.

Exported model (``models/<name>/``): the encoder's ``save_pretrained``
(safetensors) + tokenizer + ``sentlab.json`` (+ ``head/``: a test-time head, supervised SimCSE's MLP);
the published copy also gets the
sentence-transformers files (:mod:`sentlab.export.st`), so ``SentenceTransformer(path)``
gives sentlab's embeddings for every pooling, template and channel.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from ..runtime.io import atomic_path

from ..provenance.markers import CURVE_COLUMNS, write_curve, write_marker  # noqa: F401 - re-exported (train loop, run)


# --- RNG ---------------------------------------------------------------------
def rng_state_json() -> dict:
    py = random.getstate()
    np_state = np.random.get_state()
    return {"python": [py[0], list(py[1]), py[2]],
            "numpy": [np_state[0], np_state[1].tolist(), int(np_state[2]), int(np_state[3]), float(np_state[4])]}


def set_rng_state_json(state: dict) -> None:
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    n = state["numpy"]
    np.random.set_state((n[0], np.asarray(n[1], dtype=np.uint32), n[2], n[3], n[4]))


def rng_state_tensors() -> dict[str, Any]:
    out: dict[str, Any] = {"torch_cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["torch_cuda"] = torch.cuda.get_rng_state_all()
    return out


def set_rng_state_tensors(state: dict) -> None:
    torch.set_rng_state(state["torch_cpu"])
    if "torch_cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["torch_cuda"])


# --- resume checkpoint ---------------------------------------------------------
def _all_ranks(obj):
    """``[obj of rank 0, obj of rank 1, …]`` on rank 0 (a collective: every rank calls it);
    ``[obj]`` in a single process."""
    from ..runtime import distributed as D

    if not D.is_dist():
        return [obj]
    import torch.distributed as dist

    out = [None] * D.world_size() if D.is_main() else None
    dist.gather_object(obj, out, dst=0)
    return out


def save_resume(folder: Path, method, optimizer, scheduler, meta: dict) -> None:
    """Write the whole resumable state to ``folder`` atomically (a temp folder renamed over it).

    Called by every rank: the RNG states of all ranks are gathered and saved (rank r resumes with
    its own), rank 0 writes."""
    from ..runtime import distributed as D

    rng_tensors = _all_ranks(rng_state_tensors())
    rng_json = _all_ranks(rng_state_json())
    if not D.is_main():
        return
    with atomic_path(folder, is_dir=True) as tmp:
        torch.save({"method": method.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "rng": rng_tensors[0],
                    "rng_ranks": rng_tensors}, tmp / "state.pt")
        meta = dict(meta, rng=rng_json[0], rng_ranks=rng_json)
        (tmp / "state.json").write_text(json.dumps(meta), encoding="utf-8")


def load_resume(folder: Path, method, optimizer, scheduler, rank: int = 0) -> Optional[dict]:
    """Restore the state saved by :func:`save_resume` (the RNG of ``rank``); returns its metadata
    (None if no checkpoint). A rank the checkpoint has no RNG state for (a run resumed on more
    ranks) keeps the RNG it was seeded with."""
    if not (folder / "state.json").is_file() or not (folder / "state.pt").is_file():
        return None
    from ..errors import SentlabError
    from ..assets.weights import load_tensors

    fix = (f"It cannot be resumed: delete the checkpoint folder {folder.parent} (`rm -r {folder.parent}`) and run "
           f"again, which trains this run from step 0.")
    try:
        meta = json.loads((folder / "state.json").read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise SentlabError(f"The resume state {folder / 'state.json'} is not valid JSON ({e}). {fix}") from None
    tensors = load_tensors(folder / "state.pt", fix)
    method.load_state_dict(tensors["method"])
    optimizer.load_state_dict(tensors["optimizer"])
    scheduler.load_state_dict(tensors["scheduler"])
    rng_t = tensors.get("rng_ranks") or [tensors["rng"]]
    rng_j = meta.get("rng_ranks") or [meta["rng"]]
    if rank < len(rng_t):
        set_rng_state_tensors(rng_t[rank])
        set_rng_state_json(rng_j[rank])
    return meta


# --- exported model ------------------------------------------------------------
def _max_length(folder: Path) -> int:
    """The token limit sentlab's encoder uses for the model in ``folder`` (no ``max_length`` given):
    the smaller of the model's positions and the tokenizer's ``model_max_length``."""
    from transformers import AutoConfig, AutoTokenizer

    cfg_max = getattr(AutoConfig.from_pretrained(folder), "max_position_embeddings", 512)
    tok_max = AutoTokenizer.from_pretrained(folder).model_max_length or cfg_max
    return int(min(cfg_max, tok_max))


def sentence_transformers_files(folder: Path, info: dict) -> None:
    """Make ``folder`` (weights + tokenizer) a sentence-transformers model that pools as ``info``
    (``pooling``, ``template``, ``channels`` of ``sentlab.json``): :mod:`sentlab.export.st`, written
    with sentence-transformers' own ``save``."""
    from ..export.st import write_sentence_transformers

    write_sentence_transformers(folder, info, _max_length(folder))


def export_model(folder: Path, method, info: dict) -> None:
    """Save the inference encoder + tokenizer + ``sentlab.json`` (``info``) to ``folder`` atomically."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no "Writing model shards" bar inside the training bar
    try:
        _export(folder, method, info)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def _export(folder: Path, method, info: dict) -> None:
    with atomic_path(folder, is_dir=True) as tmp:
        method.encoder.save_pretrained(tmp, safe_serialization=True)
        method.tokenizer.save_pretrained(tmp)
        if info.get("head"):   # the test-time head (supervised SimCSE's MLP), sentence-transformers' Dense format
            from ..nn.encoder_head import write_head

            write_head(method.inference_head(), tmp / info["head"])
        (tmp / "sentlab.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")


def publish(src: Path, dest: Path, updates: dict) -> None:
    """Copy an exported folder to ``dest`` atomically, updating its ``sentlab.json``; the copy is a
    sentence-transformers model (:func:`sentence_transformers_files`) pooling as sentlab's encoder does."""
    with atomic_path(dest, is_dir=True) as tmp:
        shutil.copytree(src, tmp, dirs_exist_ok=True)
        info = json.loads((tmp / "sentlab.json").read_text(encoding="utf-8"))
        info.update(updates)
        sentence_transformers_files(tmp, info)
        info["sentence_transformers"] = True
        (tmp / "sentlab.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")


__all__ = ["save_resume", "load_resume", "write_curve", "export_model", "publish", "sentence_transformers_files",
           "write_marker", "CURVE_COLUMNS"]
