"""How well PaSeR's decoder rebuilds masked phrases on held-out sentences (PaSeR Sec. 5.2, Table 7).

Around a PaSeR training run (the method's ``split_heldout`` / ``export_artifacts`` hooks delegate here):
:func:`heldout_split` keeps seeded rows of the training corpus out of training, and after it
:func:`export_reconstruction` writes ``reconstruction.json`` next to the exported model with the final
encoder and decoder (one consistent pair, not the best dev checkpoint).

Two decodings of the same held-out phrases (no augmentation, the method's own
phrase choice and masking; random chunk choices are those of micro-batch 0):

* **greedy**: autoregressive from ``[CLS]``, stopping after as many ``[SEP]``
  as phrases were masked (the masked input shows how many); the output is cut
  at the ``[SEP]`` s into phrases and compared with the masked ones:
  ``phrase_exact`` (a phrase's word pieces all equal), ``sentence_exact``
  (every phrase of the sentence exact), ``token_accuracy`` (position-wise
  equal word pieces / target word pieces of the phrases);
* **teacher-forced**: one pass with the gold prefix; ``token_accuracy`` =
  argmax equals the gold word piece, over phrase word pieces (``[SEP]``
  positions excluded; ``token_accuracy_with_sep`` includes them).

Frequency baselines computed the same way, fitted on ``fit`` sentences (the
training corpus, a sample of it; never the held-out sentences, on which a
bigram table would be an oracle):

* ``most_frequent_phrase``: always predict the corpus's most frequent phrase;
* ``positional_mode``: always predict, at phrase position j, the most frequent
  word piece at position j, with the modal phrase length;
* ``bigram`` (teacher-forced): predict the most frequent successor of the
  gold previous token (the baseline that sees the same prefix as teacher forcing).

Example::

    report = reconstruction_report(method, held_out_sentences, {"rake": rake, "chunks": chunks},
                                   fit_sentences=train_sentences, fit_extras=train_extras)
    write_reconstruction("models/paser/reconstruction.json", report)
"""

from __future__ import annotations

import logging
import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, NamedTuple, Optional, Sequence

import numpy as np
import torch

log = logging.getLogger(__name__)
EXTRA_COLUMNS = ["rake", "chunks"]


# --- the held-out rows ---------------------------------------------------------------
class ReconstructionSets(NamedTuple):
    """Rows of the training corpus kept out of training, and training rows the baselines are fitted on: each a
    ``sentlab.train.data.Corpus`` (not imported: methods/ is below train/; what is used is ``texts``, ``extras``
    and ``subset``)."""

    heldout: Any
    fit: Any


def heldout_split(corpus, params, seed: int):
    """``(corpus to train on, ReconstructionSets or None)``: ``params.recon_heldout`` seeded random rows of
    the training corpus (at most a tenth), and every row with the same text, are kept out of training for
    the check; the baselines' ``params.recon_fit`` rows are drawn from the rest. None (all rows trained
    on) when the check is off or reads the other corpus (``recon_heldout_from: other``). A function of
    the seed and the corpus only, so a resumed run splits alike."""
    if params.recon_heldout == 0 or params.recon_heldout_from != "corpus":
        return corpus, None
    n = len(corpus)
    k = min(params.recon_heldout, n // 10)
    if k == 0:
        return corpus, None
    rng = np.random.default_rng([seed, 0x9A5E])
    held = np.sort(rng.choice(n, k, replace=False))
    held_texts = {corpus.texts[i] for i in held}  # a duplicate of a held-out sentence is not trained on either
    keep = np.array([i for i in np.setdiff1d(np.arange(n), held) if corpus.texts[i] not in held_texts], dtype=int)
    fit = np.sort(rng.choice(keep, min(params.recon_fit, len(keep)), replace=False))
    log.info("PaSeR: %d of %d %s sentences held out of training for the reconstruction check", k, n, params.corpus)
    return corpus.subset(keep), ReconstructionSets(corpus.subset(held), corpus.subset(fit))


def _split_phrases(ids: Sequence[int], sep: int, k: int) -> list[list[int]]:
    out, cur = [], []
    for t in ids:
        if t == sep:
            out.append(cur)
            cur = []
            if len(out) == k:
                break
        else:
            cur.append(t)
    if len(out) < k and cur:
        out.append(cur)
    return out + [[] for _ in range(k - len(out))]


def _token_matches(pred: Sequence[int], gold: Sequence[int]) -> int:
    return sum(1 for a, b in zip(pred, gold) if a == b)


class _Scores:
    def __init__(self):
        self.phrases = self.phrase_exact = self.sentences = self.sentence_exact = 0
        self.tokens = self.token_hits = 0

    def add(self, preds: Sequence[Sequence[int]], golds: Sequence[Sequence[int]]) -> None:
        if not golds:
            return
        self.sentences += 1
        exact = [list(p) == list(g) for p, g in zip(preds, golds)]
        self.sentence_exact += all(exact)
        self.phrases += len(golds)
        self.phrase_exact += sum(exact)
        self.tokens += sum(len(g) for g in golds)
        self.token_hits += sum(_token_matches(p, g) for p, g in zip(preds, golds))

    def result(self) -> dict:
        return {"phrase_exact": self.phrase_exact / max(self.phrases, 1),
                "sentence_exact": self.sentence_exact / max(self.sentences, 1),
                "token_accuracy": self.token_hits / max(self.tokens, 1)}


def _batches(n: int, size: int):
    for s in range(0, n, size):
        yield range(s, min(n, s + size))


def _sub(extras: dict, idx) -> dict:
    return {k: [v[i] for i in idx] for k, v in extras.items()}


class FrequencyBaseline:
    """Predictions that ignore the sentence: fitted on the target phrases of a corpus."""

    def __init__(self, phrases: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], start: int):
        phrases = [tuple(p) for p in phrases if p]
        self.mode_phrase = list(Counter(phrases).most_common(1)[0][0]) if phrases else []
        length = Counter(len(p) for p in phrases).most_common(1)[0][0] if phrases else 0
        by_pos: dict[int, Counter] = defaultdict(Counter)
        for p in phrases:
            for j, t in enumerate(p):
                by_pos[j][t] += 1
        self.positional = [by_pos[j].most_common(1)[0][0] for j in range(length)]
        succ: dict[int, Counter] = defaultdict(Counter)
        uni: Counter = Counter()
        for t in targets:
            prev = start
            for tok in t:
                succ[prev][tok] += 1
                uni[tok] += 1
                prev = tok
        self.unigram = uni.most_common(1)[0][0] if uni else start
        self.bigram = {p: c.most_common(1)[0][0] for p, c in succ.items()}

    def next_token(self, prev: int) -> int:
        return self.bigram.get(prev, self.unigram)


def _views_targets(method, sentences, extras, batch_size):
    for idx in _batches(len(sentences), batch_size):
        views = method.prepare_views([sentences[i] for i in idx], _sub(extras, idx), list(idx), augment=False)
        yield idx, views, method.targets(views)


@torch.no_grad()
def greedy_decode(method, memory: torch.Tensor, n_phrases: Sequence[int], max_new_tokens: int = 40) -> list[list[int]]:
    """Greedy decoding from [CLS] until as many [SEP] as phrases were masked (or ``max_new_tokens``)."""
    tok = method.tokenizer
    seqs = [[tok.cls_token_id] for _ in range(memory.size(0))]
    done = [k == 0 for k in n_phrases]
    for _ in range(max_new_tokens):
        if all(done):
            break
        nxt = method.next_token_logits(memory, seqs).argmax(-1).tolist()
        for i, t in enumerate(nxt):
            if done[i]:
                continue
            seqs[i].append(int(t))
            if seqs[i][1:].count(tok.sep_token_id) >= n_phrases[i]:
                done[i] = True
    return [s[1:] for s in seqs]


def _fit_baseline(method, sentences, extras, batch_size) -> FrequencyBaseline:
    phrases, targets = [], []
    for _, views, tg in _views_targets(method, sentences, extras, batch_size):
        for v in views.masked:
            phrases += v.phrase_token_ids
        targets += [t for t in tg if t]
    return FrequencyBaseline(phrases, targets, method.tokenizer.cls_token_id)


def _masked_text(text: str, spans) -> str:
    out, last = [], 0
    for s, e in sorted(spans):
        out += [text[last:s], " ".join("_" for _ in text[s:e].split())]
        last = e
    return "".join(out + [text[last:]])


@torch.no_grad()
def reconstruction_report(method, sentences: Sequence[str], extras: dict, fit_sentences: Sequence[str],
                          fit_extras: dict, n_examples: int = 8, batch_size: int = 32) -> dict:
    """Greedy and teacher-forced reconstruction scores of ``method`` (a PaSeR) on ``sentences`` + baselines.

    ``extras`` holds the annotation columns (``rake`` / ``chunks``) aligned with ``sentences``;
    ``fit_sentences`` / ``fit_extras`` (training-corpus sentences) fit the frequency baselines.
    Returns a JSON-ready dict (see the module docstring); ``examples`` are in the shape of PaSeR's
    Table 7 (sentence, masked version, masked phrases, generated phrases), ``mismatches`` the first
    examples where the decoder differs from the original.
    """
    from tqdm.auto import tqdm

    tok = method.tokenizer
    sep = tok.sep_token_id
    was_training = method.training
    method.eval()
    try:
        base = _fit_baseline(method, list(fit_sentences), fit_extras, batch_size)
        fit_on = f"{len(fit_sentences)} training-corpus sentences"
        greedy, b_phrase, b_pos = _Scores(), _Scores(), _Scores()
        tf_hits = tf_total = tf_hits_sep = tf_total_sep = bg_hits = 0
        examples, mismatches = [], []
        n_sent = len(sentences)
        for idx, views, targets in tqdm(_views_targets(method, list(sentences), extras, batch_size),
                                        total=(n_sent + batch_size - 1) // batch_size, desc="reconstruction",
                                        disable=n_sent < 2000):
            inputs = method.check_inputs([sentences[i] for i in idx], views)
            memory = method.decoding_signal(inputs)
            # teacher forcing
            if inputs["target"] is not None:
                logits, labels = method.teacher_forcing(memory, inputs["target"])
                pred = logits.argmax(-1)
                valid = labels != -100
                phrase_tok = valid & (labels != sep)
                tf_hits += int((pred[phrase_tok] == labels[phrase_tok]).sum())
                tf_total += int(phrase_tok.sum())
                tf_hits_sep += int((pred[valid] == labels[valid]).sum())
                tf_total_sep += int(valid.sum())
                for t in targets:
                    prev = tok.cls_token_id
                    for g in t:
                        if g != sep:
                            bg_hits += int(base.next_token(prev) == g)
                        prev = g
            # greedy
            ks = [len(v.phrase_token_ids) for v in views.masked]
            gen = greedy_decode(method, memory, ks, max_new_tokens=method.params.max_length + max(ks + [1]) + 2)
            for j, i in enumerate(idx):
                gold = views.masked[j].phrase_token_ids
                if not gold:
                    continue
                got = _split_phrases(gen[j], sep, len(gold))
                greedy.add(got, gold)
                b_phrase.add([base.mode_phrase] * len(gold), gold)
                b_pos.add([base.positional] * len(gold), gold)
                ex = {"sentence": sentences[i], "masked": _masked_text(views.t_texts[j], views.spans[j]),
                      "masked_phrases": [tok.decode(g) for g in gold], "generated": [tok.decode(g) for g in got],
                      "exact": [list(a) == list(b) for a, b in zip(got, gold)]}
                if len(examples) < n_examples:
                    examples.append(ex)
                if not all(ex["exact"]) and len(mismatches) < n_examples:
                    mismatches.append(ex)
    finally:
        method.train(was_training)
    g = greedy.result()
    return {
        "method": method.id,
        "sentences": greedy.sentences,
        "phrases": greedy.phrases,
        "phrase_source": method.params.phrases,
        "top_k": method.params.top_k,
        "greedy": g,
        "teacher_forced": {"token_accuracy": tf_hits / max(tf_total, 1),
                           "token_accuracy_with_sep": tf_hits_sep / max(tf_total_sep, 1)},
        "baseline": {
            "fit_on": fit_on,
            "most_frequent_phrase": {"phrase": tok.decode(base.mode_phrase), **b_phrase.result()},
            "positional_mode": {"phrase": tok.decode(base.positional), **b_pos.result()},
            "bigram_teacher_forced": {"token_accuracy": bg_hits / max(tf_total, 1)},
        },
        "beats_baseline": {
            "greedy_token_accuracy": g["token_accuracy"] > max(b_phrase.result()["token_accuracy"],
                                                               b_pos.result()["token_accuracy"]),
            "greedy_phrase_exact": g["phrase_exact"] > max(b_phrase.result()["phrase_exact"],
                                                           b_pos.result()["phrase_exact"]),
            "teacher_forced_token_accuracy": tf_hits / max(tf_total, 1) > bg_hits / max(tf_total, 1),
        },
        "examples": examples,
        "mismatches": mismatches,
    }


def write_reconstruction(path, report: dict) -> None:
    """Write the report atomically (e.g. ``models/paser/reconstruction.json``)."""
    from ..runtime.io import write_json

    write_json(path, report)


def export_reconstruction(method, folder, data_root, sets: Optional[ReconstructionSets]) -> None:
    """``folder/reconstruction.json``: :func:`reconstruction_report` of the trained ``method`` (a PaSeR).

    Held-out sentences (``recon_heldout_from``): ``sets`` (rows of the training corpus kept out of
    training by :func:`heldout_split`), or a seeded sample of the corpus this run did not train on,
    read from ``data_root/data/annotations`` (the Wikipedia sample when training on the STS sentences,
    and the reverse). The baselines are fitted on training sentences. Nothing when
    ``recon_heldout`` is 0.
    """
    from ..annotate import read_annotations

    if method.params.recon_heldout == 0:
        return
    root = Path(data_root) / "data" / "annotations"
    trained_on = method.corpus_name()
    other = "train" if trained_on != "train" else "sts_unlabeled"

    def sample(corpus: str, n: int):
        table = read_annotations(str(root / corpus), columns=EXTRA_COLUMNS)
        rows = random.Random(method.seed).sample(range(table.num_rows), min(n, table.num_rows))
        t = table.take(sorted(rows)).to_pydict()
        return t["text"], {c: t[c] for c in EXTRA_COLUMNS}

    if sets is not None:
        (held, held_x), (fit, fit_x) = ((c.texts, {k: c.extras[k] for k in EXTRA_COLUMNS}) for c in sets)
        other = f"{trained_on} (held out of training)"
    else:
        held, held_x = sample(other, method.params.recon_heldout)
        fit, fit_x = sample(trained_on, method.params.recon_fit)
    rep = reconstruction_report(method, held, held_x, fit, fit_x)
    rep["heldout_corpus"], rep["fit_corpus"] = other, trained_on
    write_reconstruction(Path(folder) / "reconstruction.json", rep)
