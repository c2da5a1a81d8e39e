"""How well PaSeR's decoder rebuilds masked phrases on held-out sentences (PaSeR Sec. 5.2, Table 7).

Two decodings of the same held-out phrases (no augmentation, the method's own
phrase choice and masking):

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

    report = method.reconstruction_report(held_out_sentences, {"rake": rake, "chunks": chunks},
                                          fit_sentences=train_sentences, fit_extras=train_extras)
    write_json("models/paser/reconstruction.json", report)
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Sequence

import torch


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
            memory = method.encode_views(views)
            # teacher forcing
            logits, labels = method.teacher_forcing(memory, targets)
            if logits is not None:
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
            gen = method.generate(memory, ks, max_new_tokens=method.max_len + max(ks + [1]) + 2)
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
    from ..io import write_json

    write_json(path, report)
