"""Checkpoints: the resumable training state and the exported (best) model.

Resume checkpoint (``checkpoints/<name>/<params hash>/last/``, outside DVC's
outputs, written atomically as one folder):

* ``state.pt`` — tensors only, loaded with ``torch.load(weights_only=True)``:
  the method's ``state_dict()`` (weights, momentum copies, queue buffers), the
  optimiser and scheduler state, torch's CPU (and CUDA) RNG states;
* ``state.json`` — the step, best dev score/step, curve rows so far,
  Python's and NumPy's RNG states.

Exported model (``models/<name>/``): the encoder's ``save_pretrained``
(safetensors) + tokenizer + sentence-transformers module files (so
``SentenceTransformer(path)`` pools the same way) + ``sentlab.json``.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from ..io import atomic_path, write_text

from ..markers import CURVE_COLUMNS, write_curve, write_marker  # noqa: F401 - re-exported (train loop, run)


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
    from . import distributed as D

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
    from . import distributed as D

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
    meta = json.loads((folder / "state.json").read_text(encoding="utf-8"))
    tensors = torch.load(folder / "state.pt", map_location="cpu", weights_only=True)
    method.load_state_dict(tensors["method"])
    optimizer.load_state_dict(tensors["optimizer"])
    scheduler.load_state_dict(tensors["scheduler"])
    rng_t = tensors.get("rng_ranks") or [tensors["rng"]]
    rng_j = meta.get("rng_ranks") or [meta["rng"]]
    if rank < len(rng_t):
        set_rng_state_tensors(rng_t[rank])
        set_rng_state_json(rng_j[rank])
    return meta


# --- curves ------------------------------------------------------------------
# --- exported model ------------------------------------------------------------
ST_POOLING = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens"}


def _sentence_transformers_files(folder: Path, pooling: str, hidden: int, max_length: int) -> bool:
    """modules.json + 1_Pooling so ``SentenceTransformer(folder)`` pools as ``pooling`` (cls/mean only)."""
    if pooling not in ST_POOLING:
        return False
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    (folder / "modules.json").write_text(json.dumps(modules, indent=2), encoding="utf-8")
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_length, "do_lower_case": False}, indent=2), encoding="utf-8")
    pool_cfg = {"word_embedding_dimension": hidden, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
                "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
                "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": False, "include_prompt": True}
    pool_cfg[ST_POOLING[pooling]] = True
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pool_cfg, indent=2), encoding="utf-8")
    return True


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
        enc = method.sentence_encoder()
        st = _sentence_transformers_files(tmp, info.get("pooling", "cls"), method.encoder.config.hidden_size,
                                          enc.effective_max_length)
        (tmp / "sentlab.json").write_text(json.dumps(dict(info, sentence_transformers=st), indent=2) + "\n",
                                          encoding="utf-8")


def publish(src: Path, dest: Path, updates: dict) -> None:
    """Copy an exported folder to ``dest`` atomically, updating its ``sentlab.json``."""
    with atomic_path(dest, is_dir=True) as tmp:
        shutil.copytree(src, tmp, dirs_exist_ok=True)
        info = json.loads((tmp / "sentlab.json").read_text(encoding="utf-8"))
        info.update(updates)
        (tmp / "sentlab.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")


__all__ = ["save_resume", "load_resume", "write_curve", "export_model", "publish", "write_marker", "CURVE_COLUMNS"]
