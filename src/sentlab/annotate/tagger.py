"""A batched re-implementation of NLTK's averaged-perceptron POS tagger (inference only).

NLTK's :class:`nltk.tag.perceptron.PerceptronTagger` tags one token at a time in
pure Python: for every token it builds 14 feature strings and adds up their
weight dictionaries label by label. :class:`BatchPerceptronTagger` loads the SAME
trained model (``averaged_perceptron_tagger_eng``) and computes the SAME greedy
decision, but

* the 10 features that do not depend on the previous tags are scored for a whole
  batch of sentences at once (one gather + sum in numpy);
* the 3 features that depend only on the two previous tags are a precomputed
  ``[prev, prev2, label]`` table;
* decoding walks position by position over all sentences of the batch together,
  so the per-token Python work is a dictionary look-up and the per-position work is
  vectorised.

Weights are stored as integers (the averaged weights carry three decimals), so the
sums are exact and do not depend on the summation order; ties are broken as NLTK
does (the alphabetically largest label wins). ``tests/test_annotate.py`` checks
that the tags equal ``PerceptronTagger().tag`` token for token.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

_START = ["-START-", "-START2-"]
_END = ["-END-", "-END2-"]
_SCALE = 1000  # the averaged weights are rounded to 3 decimals by NLTK's trainer


def _normalize(word: str) -> str:
    """NLTK's ``PerceptronTagger.normalize``."""
    if "-" in word and word[0] != "-":
        return "!HYPHEN"
    if word.isdigit() and len(word) == 4:
        return "!YEAR"
    if word and word[0].isdigit():
        return "!DIGITS"
    return word.lower()


class BatchPerceptronTagger:
    """Batch inference with NLTK's English averaged perceptron (Penn Treebank tags).

    Example::

        tagger = BatchPerceptronTagger()          # needs NLTK resource averaged_perceptron_tagger_eng
        tagger.tag_sents([["Mary", "did", "not", "sign", "."]])
        # [['NNP', 'VBD', 'RB', 'VB', '.']]
    """

    def __init__(self, nltk_tagger=None):
        if nltk_tagger is None:
            from nltk.tag.perceptron import PerceptronTagger

            nltk_tagger = PerceptronTagger()
        weights: dict[str, dict[str, float]] = nltk_tagger.model.weights
        # Labels sorted in DESCENDING order: np.argmax returns the first maximum, which is
        # then the alphabetically largest label, as in NLTK's max(classes, key=(score, label)).
        self.labels: list[str] = sorted(nltk_tagger.classes, reverse=True)
        self.tagdict: dict[str, str] = dict(nltk_tagger.tagdict)
        lab_index = {lab: i for i, lab in enumerate(self.labels)}
        n_lab = len(self.labels)

        static, dynamic = {}, {}
        for feat, wdict in weights.items():
            row = np.zeros(n_lab, dtype=np.int64)
            for lab, w in wdict.items():
                row[lab_index[lab]] = int(round(w * _SCALE))
            if feat.startswith("i-1 tag+i word "):
                dynamic[feat] = row
            else:
                static[feat] = row
        # Static feature table; row 0 is all zeros (unknown feature).
        self._feat_id: dict[str, int] = {f: i + 1 for i, f in enumerate(static)}
        self._W = np.zeros((len(static) + 1, n_lab), dtype=np.int64)
        if static:
            self._W[1:] = np.stack(list(static.values()))
        # "i-1 tag+i word" features: a matrix and an index by feature string.
        self._dyn_id: dict[str, int] = {f: i for i, f in enumerate(dynamic)}
        self._Wd = np.stack(list(dynamic.values())) if dynamic else np.zeros((1, n_lab), dtype=np.int64)
        # Previous-tag table: T[prev, prev2] = w("i-1 tag prev") + w("i-2 tag prev2") + w("i tag+i-2 tag prev prev2").
        self._tags = list(self.labels) + _START
        self._tag_index = {t: i for i, t in enumerate(self._tags)}
        n_t = len(self._tags)
        zero = np.zeros(n_lab, dtype=np.int64)
        p1 = np.stack([static.get(f"i-1 tag {t}", zero) for t in self._tags])
        p2 = np.stack([static.get(f"i-2 tag {t}", zero) for t in self._tags])
        self._T = p1[:, None, :] + p2[None, :, :]
        for a, ta in enumerate(self._tags):
            for b, tb in enumerate(self._tags):
                row = static.get(f"i tag+i-2 tag {ta} {tb}")
                if row is not None:
                    self._T[a, b] += row
        self._tagdict_idx = {w: lab_index[t] for w, t in self.tagdict.items() if t in lab_index}
        self._n_t = n_t
        self._dyn_prefix = [f"i-1 tag+i word {t} " for t in self._tags]

    def tag_sents(self, sentences: Sequence[Sequence[str]]) -> list[list[str]]:
        """Penn Treebank tags for each sentence (a list of tokens); same output as NLTK's ``tag``."""
        lengths = [len(s) for s in sentences]
        out_idx: list[list[int]] = [[-1] * L for L in lengths]
        # 1) tag-dictionary hits, and the static features of every other token.
        pend_s: list[int] = []      # sentence of each pending token
        pend_i: list[int] = []      # its position
        pend_w: list[str] = []      # its normalised word (for the "i-1 tag+i word" feature)
        feat_rows: list[list[int]] = []
        td = self._tagdict_idx
        get = self._feat_id.get
        bias = get("bias", 0)
        for s, toks in enumerate(sentences):
            ctx = None
            row = out_idx[s]
            for i, w in enumerate(toks):
                hit = td.get(w)
                if hit is not None:
                    row[i] = hit
                    continue
                if ctx is None:
                    ctx = _START + [_normalize(t) for t in toks] + _END
                j = i + 2
                c0, cm1, cp1 = ctx[j], ctx[j - 1], ctx[j + 1]
                pend_s.append(s)
                pend_i.append(i)
                pend_w.append(c0)
                feat_rows.append([
                    bias,
                    get("i suffix " + w[-3:], 0),
                    get("i pref1 " + (w[0] if w else ""), 0),
                    get("i word " + c0, 0),
                    get("i-1 word " + cm1, 0),
                    get("i-1 suffix " + cm1[-3:], 0),
                    get("i-2 word " + ctx[j - 2], 0),
                    get("i+1 word " + cp1, 0),
                    get("i+1 suffix " + cp1[-3:], 0),
                    get("i+2 word " + ctx[j + 2], 0),
                ])
        labels = self.labels
        if not pend_s:
            return [[labels[k] for k in row] for row in out_idx]
        static_scores = self._W[np.asarray(feat_rows, dtype=np.int64)].sum(axis=1)  # (P, labels)
        # 2) greedy decoding, position by position across all sentences.
        by_pos: dict[int, list[int]] = {}
        for p, i in enumerate(pend_i):
            by_pos.setdefault(i, []).append(p)
        start1, start2 = self._tag_index["-START-"], self._tag_index["-START2-"]
        dyn_get, dyn_prefix, Wd, T = self._dyn_id.get, self._dyn_prefix, self._Wd, self._T
        for i in sorted(by_pos):
            ps = by_pos[i]
            prev, prev2, dk, di = [], [], [], []
            for k, p in enumerate(ps):
                row = out_idx[pend_s[p]]
                a = row[i - 1] if i >= 1 else start1
                prev.append(a)
                prev2.append(row[i - 2] if i >= 2 else (start1 if i == 1 else start2))
                d = dyn_get(dyn_prefix[a] + pend_w[p])
                if d is not None:
                    dk.append(k)
                    di.append(d)
            scores = static_scores[ps] + T[prev, prev2]
            if dk:
                scores[dk] += Wd[di]
            best = scores.argmax(axis=1).tolist()
            for k, p in enumerate(ps):
                out_idx[pend_s[p]][i] = best[k]
        return [[labels[k] for k in row] for row in out_idx]
