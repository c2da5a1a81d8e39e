"""Shared fixtures. Real resources come from ../shared (the mirror beside the checkout)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENTLAB_SHARED", REPO.parent / "shared"))
MIRROR = Path(os.environ.get("SENTLAB_DATA_MIRROR", SHARED / "data"))
NLTK_DATA = Path(os.environ.get("NLTK_DATA", SHARED / "nltk_data"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if NLTK_DATA.is_dir():
    os.environ.setdefault("NLTK_DATA", str(NLTK_DATA))


@pytest.fixture
def mirror() -> Path:
    if not (MIRROR / "STS").is_dir():
        pytest.skip(f"needs the data mirror (STS/, SICK/, wiki/) at {MIRROR} (set SENTLAB_DATA_MIRROR)")
    return MIRROR


@pytest.fixture
def tiny_bert():
    """A tiny random BERT with the MiniLM tokenizer: (model, tokenizer)."""
    import torch
    from transformers import BertConfig, BertModel

    from sentlab.assets import load_model

    _, tok = load_model("sentence-transformers/all-MiniLM-L6-v2")
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128)
    return BertModel(cfg, add_pooling_layer=False), tok
