"""Shared test scaffolding: a tiny random BERT, a word list, one-thread torch.

Imported by the test modules (``from tiny import ...``); the fixtures ``tok`` and
``one_thread`` are in conftest.py.
"""

from __future__ import annotations

import random

import torch
from transformers import BertConfig, BertModel

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu red green blue black white").split()


def tiny_bert(tok, seed: int = 0, initializer_range: float = 0.02, max_position_embeddings: int = 64) -> BertModel:
    """2 layers, 32 wide, with the MiniLM tokenizer's vocabulary.

    ``initializer_range=0.2`` for training tests: at BERT's 0.02 a random 32-wide model's [CLS]
    barely differs between sentences and SimCSE's loss sits at log N for many steps.
    """
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=max_position_embeddings,
                     initializer_range=initializer_range)
    return BertModel(cfg, add_pooling_layer=False)


def counting_encoder(model, tok, name: str, calls: list):
    """A mean-pooling SentenceEncoder over ``model`` that appends every list it encodes to ``calls``."""
    from sentlab.nn.encoder import SentenceEncoder

    class Counting(SentenceEncoder):
        def encode(self, sentences, *a, **kw):
            calls.append(list(sentences))
            return super().encode(sentences, *a, **kw)

    return Counting(model, tok, pooling="mean", name=name)


def sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10))) for _ in range(n)]


def glue_mirror(root, train: int = 48, dev: int = 16):
    """A data mirror with GLUE-layout SST-2 and STS-B (``train``/``dev`` rows each): the colour word decides the
    label / the score. Returns ``root``."""
    from pathlib import Path

    root = Path(root)
    for task, head in (("SST-2", "sentence\tlabel"), ("STS-B", "index\tgenre\tsentence1\tsentence2\tscore")):
        (root / "glue" / task).mkdir(parents=True)
        for split, n in (("train", train), ("dev", dev)):
            rows = []
            for i, s in enumerate(sentences(n, seed=len(split))):
                colour = "red" if i % 2 else "blue"
                rows.append(f"{colour} {s}\t{i % 2}" if task == "SST-2" else
                            f"{i}\tnews\t{colour} {s}\tred {s}\t{5.0 * (i % 2):.1f}")
            (root / "glue" / task / f"{split}.tsv").write_text("\n".join([head, *rows]) + "\n", encoding="utf-8")
    return root
