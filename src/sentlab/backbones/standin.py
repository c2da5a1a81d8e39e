"""``sentlab standin NAME --out DIR``: a hub-shaped stand-in of a paper backbone, random weights.

The folder has the hub layout: ``config.json`` (the hub's, kept in :mod:`sentlab.backbones`), the tokenizer files
(:func:`sentlab.backbones.build_tokenizer`: bert-base-uncased's rebuilt id for id; roberta-base's a stand-in BPE in
its files' format, :func:`sentlab.backbones.bpe.bpe_standin_files`, or ``--tokenizer-from`` a folder that has the
real one) and one weights file whose parameter names, shapes and dtypes are the original checkpoint's, filled with
random values. It is loaded through exactly the code a hub download takes (``from_pretrained`` of the folder, found by
:func:`sentlab.assets.resolve.resolve_model` in a mirror's ``models/<hub id>/``), so a defect in that path (a renamed
key, a head that does not load) shows on the stand-in before a GPU day is spent.

Where the key lists come from: no original file is here, so they are derived from transformers' own model
classes instantiated from the kept config, the classes the original files were written from:

- bert-base-uncased: ``BertForPreTraining`` (``bert.*`` with the pooler, ``cls.predictions.*``,
  ``cls.seq_relationship.*``), without the ``bert.embeddings.position_ids`` buffer (absent in the 2018 file)
  and without ``cls.predictions.decoder.bias`` (an alias transformers adds for ``cls.predictions.bias``; the
  original decoder had no bias of its own). ``layer_norm_names="gamma_beta"`` (the default, as the original
  file) names every LayerNorm's weight/bias ``gamma``/``beta``; ``"weight_bias"`` writes the renamed variant.
- roberta-base: ``RobertaForMaskedLM`` (``roberta.*``, ``lm_head.dense/layer_norm/decoder/bias``), without
  the ``lm_head.decoder.bias`` alias of ``lm_head.bias``; LayerNorms are ``weight``/``bias`` there.
- distilbert-base-uncased (DiffCSE's generator): ``DistilBertForMaskedLM`` (``distilbert.*``,
  ``vocab_transform``, ``vocab_layer_norm``, ``vocab_projector``, the projector's weight tied to the word
  embeddings); LayerNorms are ``weight``/``bias`` there.

The tied output matrix (``cls.predictions.decoder.weight`` / ``lm_head.decoder.weight``) is in the
``pytorch_model.bin`` variant as an alias of the word embeddings (``torch.save`` keeps the sharing, as the
original file does); ``model.safetensors`` cannot hold a shared tensor twice and, like the hub's converted
files, holds it once, under the word embeddings' name. Values: transformers' initialisation from
``seed`` with every LayerNorm spread around 1 / 0 (:func:`sentlab.backbones.spread_layer_norms`, as in a
trained model). ``sentlab_standin.json`` says what the folder is: never a result.

roberta-base's tokenizer: :mod:`sentlab.backbones.bpe` (what is the same as the real one and what differs).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Optional

from ..errors import SentlabError

# model_type -> (the class the original checkpoint was written from, keys dropped: aliases and absent buffers,
# the tied output matrix and the word embeddings it is tied to)
ORIGINAL = {"bert": ("BertForPreTraining", ("bert.embeddings.position_ids", "cls.predictions.decoder.bias"),
                     ("cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight")),
            "roberta": ("RobertaForMaskedLM", ("roberta.embeddings.position_ids", "lm_head.decoder.bias"),
                        ("lm_head.decoder.weight", "roberta.embeddings.word_embeddings.weight")),
            "distilbert": ("DistilBertForMaskedLM", ("distilbert.embeddings.position_ids",),
                           ("vocab_projector.weight", "distilbert.embeddings.word_embeddings.weight"))}
LAYER_NORM_NAMES = ("gamma_beta", "weight_bias")
FORMATS = ("safetensors", "bin")
MARKER = "sentlab_standin.json"


def original_key(name: str, layer_norm_names: str = "gamma_beta") -> str:
    """``name`` as the original file spells it: LayerNorm ``weight``/``bias`` -> ``gamma``/``beta`` for
    ``gamma_beta`` (only the modules named ``LayerNorm``, as in the TF-converted BERT file)."""
    if layer_norm_names not in LAYER_NORM_NAMES:
        raise SentlabError(f"layer_norm_names {layer_norm_names!r}; allowed: {', '.join(LAYER_NORM_NAMES)}")
    if layer_norm_names == "weight_bias":
        return name
    return re.sub(r"LayerNorm\.(weight|bias)$", lambda m: "LayerNorm." + {"weight": "gamma", "bias": "beta"}[m[1]],
                  name)


def standin_state(config, layer_norm_names: str = "gamma_beta", seed: int = 0) -> dict:
    """{original key: random tensor} of the checkpoint ``config`` describes (see the module docstring)."""
    import torch
    import transformers

    from . import spread_layer_norms

    if config.model_type not in ORIGINAL:
        raise SentlabError(f"No original checkpoint layout is known for model_type {config.model_type!r} "
                           f"(known: {', '.join(ORIGINAL)}).")
    cls_name, dropped, _ = ORIGINAL[config.model_type]
    # the values come from ``seed`` alone, and the caller's random state is left as it was: writing a stand-in
    # (the first time a process needs it, later ones find it on disk) must not change what is drawn after it
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = getattr(transformers, cls_name)(config)
        spread_layer_norms(model)
    state = {}
    for k, v in model.state_dict().items():
        if k not in dropped:
            state[original_key(k, layer_norm_names)] = v.detach().clone().contiguous()
    return state


def write_weights(state: dict, dest: Path, model_type: str, fmt: str = "safetensors") -> Path:
    """``model.safetensors`` or ``pytorch_model.bin`` (a plain tensor dict: ``torch.load(weights_only=True)``
    reads it) with ``state``; the tied output matrix once (safetensors) or as an alias (bin)."""
    import torch

    if fmt not in FORMATS:
        raise SentlabError(f"weights format {fmt!r}; allowed: {', '.join(FORMATS)}")
    tied, to = ORIGINAL[model_type][2]
    state = dict(state)
    if fmt == "bin":
        state[tied] = state[to]
        path = dest / "pytorch_model.bin"
        torch.save(state, path)
        return path
    from safetensors.torch import save_file

    state.pop(tied, None)
    path = dest / "model.safetensors"
    save_file(state, str(path), metadata={"format": "pt"})
    return path


def write_standin(hub_id: str, dest: str | Path, *, layer_norm_names: Optional[str] = None, fmt: str = "safetensors",
                  seed: int = 0, tokenizer_from: Optional[str | Path] = None, config: Optional[dict] = None) -> Path:
    """Write the stand-in of ``hub_id`` to ``dest`` (see the module docstring); returns ``dest``.

    ``layer_norm_names``: None = the original file's (BERT ``gamma_beta``, RoBERTa ``weight_bias``).
    ``config``: keys that replace the kept config's (tests write a scaled-down model with the same key names).
    ``tokenizer_from``: a folder whose tokenizer is saved into ``dest`` (e.g. the real roberta-base's); None: the
    kept recipe's (:func:`sentlab.backbones.build_tokenizer`; roberta-base's stand-in BPE, its two files too)."""
    from transformers import AutoConfig, AutoTokenizer

    from . import build_tokenizer, spec
    from .bpe import bpe_standin_files
    from ..runtime.io import atomic_path, write_json

    s = spec(hub_id)
    if s is None:
        from . import known

        raise SentlabError(f"No architecture config of {hub_id!r} is kept in sentlab.backbones (kept: "
                           f"{', '.join(known())}).")
    tok = AutoTokenizer.from_pretrained(str(tokenizer_from)) if tokenizer_from else build_tokenizer(hub_id)
    tok_standin = not tokenizer_from and bool((s.get("tokenizer") or {}).get("standin"))
    cfg_dict = {**s["config"], **(config or {})}
    model_type = cfg_dict["model_type"]
    names = layer_norm_names or ("gamma_beta" if model_type == "bert" else "weight_bias")
    cfg = AutoConfig.for_model(**cfg_dict)
    if len(tok) > cfg.vocab_size:
        raise SentlabError(f"The tokenizer has {len(tok)} tokens, the config's vocab_size is {cfg.vocab_size}.")
    state = standin_state(cfg, names, seed)
    dest = Path(dest)
    with atomic_path(dest, is_dir=True) as tmp:
        tmp = Path(tmp)
        (tmp / "config.json").write_text(json.dumps(cfg_dict, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if tok_standin:   # the hub folder's own files beside tokenizer.json
            bpe_standin_files(tmp, vocab_size=cfg.vocab_size, **s["tokenizer"].get("bpe", {}))
        tok.save_pretrained(tmp)
        weights = write_weights(state, tmp, model_type, fmt)
        write_json(tmp / MARKER, {"hub_id": hub_id, "seed": seed, "layer_norm_names": names,
                                  "weights": weights.name,
                                  "tokenizer": ("stand-in byte-level BPE (sentlab.backbones.standin."
                                                "bpe_standin_files): the original's format and special tokens, "
                                                "not its ids" if tok_standin else
                                                f"from {tokenizer_from}" if tokenizer_from else
                                                "the original's, rebuilt offline"),
                                  "what": "random weights in the original checkpoint's layout (sentlab standin); "
                                          "for the preflight and tests only, never a result"})
    return dest


def standin_mirror(hub_id: str, dest: str | Path, mirror: Optional[Path] = None, **kw) -> Path:
    """A data mirror at ``dest`` that answers ``hub_id`` with its stand-in: ``dest/models/<hub id>`` written by
    :func:`write_standin` (``kw``), every other entry of ``mirror`` (the real one, if any: STS/, SICK/, wiki/,
    models/<other ids>) linked in. With ``SENTLAB_DATA_MIRROR=dest`` the hub id goes through the resolver a
    mirror's model goes through (:func:`sentlab.assets.resolve.resolve_model`), and ``from_pretrained`` of the folder
    is the code a hub download takes. The preflight's way to load a backbone that is not here."""
    dest = Path(dest)
    (dest / "models").mkdir(parents=True, exist_ok=True)
    target = dest / "models" / hub_id
    if mirror is not None and Path(mirror).is_dir():
        mirror = Path(mirror)
        for entry in mirror.iterdir():
            if entry.name != "models" and not (dest / entry.name).exists():
                (dest / entry.name).symlink_to(entry.resolve())
        own = target.relative_to(dest / "models").parts
        for model in (mirror / "models").glob("*") if (mirror / "models").is_dir() else ():
            link = dest / "models" / model.name
            if model.name != own[0] and not link.exists():
                link.symlink_to(model.resolve())
    return write_standin(hub_id, target, **kw)
