"""A stand-in of roberta-base's byte-level BPE tokenizer files (``vocab.json`` + ``merges.txt``), built with the
``tokenizers`` library: used by :func:`sentlab.backbones.build_tokenizer` and so by ``sentlab standin roberta-base``
(:mod:`sentlab.backbones.standin`).

roberta-base's tokenizer files (:func:`bpe_standin_files`): its ``vocab.json`` + ``merges.txt`` ship with nothing
installed, and the stand-in's job is the code path, not the ids. So a byte-level BPE is learned with the
``tokenizers`` library on text the mirror has, and written in roberta-base's format and layout:

- the same: the two files' format (``vocab.json`` {token: id}; ``merges.txt``, a ``#version: 0.2`` line, then
  one ``a b`` merge per line, in merge order), loadable by ``RobertaTokenizer``/``RobertaTokenizerFast``; GPT-2's
  byte-level pre-tokenizer (the same split regex, the 256 byte symbols, ``Ġ`` for a space, so a word has a ``Ġ``
  prefix except at the start of the text); the special tokens ``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3,
  ``<mask>`` the last id 50,264, 50,265 entries in all (the config's ``vocab_size``); ``<s> X </s>`` and
  ``<s> A </s></s> B </s>``; no ``token_type_ids``; ``model_max_length`` 512.
- what differs: the merges and so every id past the specials and every segmentation. The real merges are
  GPT-2's 50,000, learned on WebText; these are 50,004 learned here (``min_frequency`` 1, deterministic: the
  same files on every build from the same text) on ~4.7 M characters: the first 11,913 lines of the wiki corpus
  (the mirror's head sample) and the sentences of STS12-16, STS-B and SICK-R. They fit that text closely (a word
  of it is mostly one piece), so other text splits into more pieces than under the real merges. The real ids
  follow fairseq's dictionary (frequency order; GPT-2's ``<|endoftext|>`` and three ``madeupword`` fillers
  among them); here: the specials, the 256 byte symbols, then each merge's result in the order learned.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import SentlabError

# roberta-base's special tokens at ids 0-3 of its vocab.json, and the one at its last id
BPE_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
BPE_MASK = "<mask>"


def bpe_training_text(wiki_lines: int) -> list[str]:
    """The text the stand-in BPE learns on: the first ``wiki_lines`` lines of the wiki corpus (the mirror's head
    sample holds exactly 11,913; a mirror with the whole file gives the same lines) and both sentences of every
    scored pair of STS12-16, STS-B and SICK-R, in :func:`sentlab.data.sts.parse_all`'s order."""
    from ..assets.resolve import data_present, resolve_data
    from ..data.sts import parse_all

    # the head sample (asset wiki1m_head) is by definition wiki1m's first 11,913 lines: either gives the same text
    wiki = resolve_data("wiki1m_head" if data_present("wiki1m_head") else "wiki1m").path
    with open(wiki, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line, _ in zip(f, range(wiki_lines))]
    if len(lines) < wiki_lines:
        raise SentlabError(f"The stand-in BPE of roberta-base learns on the first {wiki_lines:,} lines of the wiki "
                           f"corpus; {wiki} has {len(lines):,}. Point SENTLAB_DATA_MIRROR at a mirror whose "
                           f"wiki/wiki1m_head.txt is the 11,913-line head sample (or the whole wiki1m file).")
    table = parse_all(resolve_data("senteval_sts").root, resolve_data("sick").root)
    return lines + list(table.sentence1) + list(table.sentence2)


def bpe_standin_files(dest: str | Path, *, vocab_size: int = 50265, wiki_lines: int = 11913,
                      min_frequency: int = 1) -> tuple[Path, Path]:
    """Write ``vocab.json`` and ``merges.txt`` of the stand-in byte-level BPE (module docstring) into ``dest``;
    returns their paths. ``vocab_size`` entries: the four :data:`BPE_SPECIALS`, the 256 byte symbols, the merges,
    :data:`BPE_MASK` last. The same text gives the same files (the ``tokenizers`` trainer breaks ties by the pair,
    not by hash order)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - 1, min_frequency=min_frequency,
                                  special_tokens=list(BPE_SPECIALS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(bpe_training_text(wiki_lines), trainer)
    model = json.loads(tk.to_str())["model"]
    vocab = dict(sorted(model["vocab"].items(), key=lambda kv: kv[1]))
    if len(vocab) != vocab_size - 1 or list(vocab.values()) != list(range(vocab_size - 1)):
        raise SentlabError(f"The stand-in BPE learned {len(vocab):,} entries on its text, {vocab_size - 1:,} are "
                           f"needed before {BPE_MASK}: the text is too small for that many merges at min_frequency "
                           f"{min_frequency}. Lower `min_frequency` in the recipe "
                           f"(sentlab/backbones/roberta-base.json).")
    vocab[BPE_MASK] = vocab_size - 1
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (dest / "merges.txt").write_text("#version: 0.2\n" + "".join(m + "\n" for m in merges), encoding="utf-8")
    return dest / "vocab.json", dest / "merges.txt"
