"""``sentlab standin NAME --out DIR``: a hub-shaped stand-in of a paper backbone (:mod:`sentlab.backbones.standin`)."""

from __future__ import annotations

import json

from ..backbones.standin import FORMATS, LAYER_NORM_NAMES, MARKER, write_standin


def cmd_standin(args) -> int:
    dest = write_standin(args.name, args.out, layer_norm_names=args.layer_norm_names, fmt=args.format,
                         seed=args.seed, tokenizer_from=args.tokenizer_from)
    info = json.loads((dest / MARKER).read_text())
    print(f"standin: wrote {dest} ({info['weights']}, LayerNorms {info['layer_norm_names']})")
    return 0


def register_cli(subparsers) -> None:
    p = subparsers.add_parser("standin", help="write a hub-shaped stand-in of a paper backbone (the original "
                                              "checkpoint's key names, shapes, dtypes; random values)")
    p.add_argument("name", help="hub id with a kept config: bert-base-uncased, roberta-base")
    p.add_argument("--out", required=True, help="folder to write (e.g. <mirror>/models/<hub id>)")
    p.add_argument("--layer-norm-names", choices=LAYER_NORM_NAMES, default=None,
                   help="LayerNorm parameter names (default: the original file's: BERT gamma_beta, "
                        "RoBERTa weight_bias)")
    p.add_argument("--format", choices=FORMATS, default="safetensors", help="model.safetensors or pytorch_model.bin")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tokenizer-from", default=None,
                   help="a folder with the tokenizer files (default: the offline recipe; roberta-base's is a "
                        "stand-in BPE in its files' format, not its ids)")
    p.set_defaults(func=cmd_standin)
