"""The ``nltk`` backend: perceptron POS tags, a regular-expression chunk grammar, frames read off the chunks.

Pipeline per sentence (works offline with ``NLTK_DATA`` pointing at the stopwords
and ``averaged_perceptron_tagger_eng``; no punkt):

1. tokens with character offsets: :class:`nltk.tokenize.TreebankWordTokenizer`
   ``span_tokenize`` (Penn-Treebank tokens, e.g. ``did`` + ``n't``, as the tagger
   was trained on), falling back to ``WordPunctTokenizer`` for the rare line the
   Treebank aligner cannot map back onto the text;
2. Penn tags from NLTK's averaged perceptron, batched over the whole batch of
   sentences (:class:`~sentlab.annotate.tagger.BatchPerceptronTagger`);
3. RAKE phrases (:class:`~sentlab.annotate.base.RakeExtractor`);
4. chunks from :data:`GRAMMAR` with :class:`nltk.RegexpParser` (a cascade: NP, then
   PP = preposition + NP, then VP = verb group, then SBAR = subordinator /
   wh-word + clause). The parser sees the Penn tags, except that subordinating
   conjunctions (:data:`SUBORDINATORS`, tagged ``IN``) are shown to it as ``SC`` so
   that "because the court ruled" becomes an SBAR and "in the court" a PP;
5. predicate-argument frames read off the chunks (:func:`frames_from_chunks`).
"""

from __future__ import annotations

from typing import Sequence

from ..assets.nltk_resources import stopwords_english
from .base import NEGATIONS, Backend, BackendOptions, RakeExtractor, clean, has_word, register_backend, span

GRAMMAR = r"""
NP:   {<PDT>?<DT|PRP\$|WP\$|\$>*<CD|JJ.*|NN.*|POS|\$>*<NN.*|CD>}
      {<PRP|EX>}
      {<DT>}
PP:   {<IN|TO><NP>}
VP:   {<RB.*>*<MD>?<RB.*>*<VB.*>(<RB.*>*<VB.*>)*<RP>?}
SBAR: {<SC|WDT|WP|WRB><NP|PP>*<VP><NP|PP|RB.*|JJ.*>*}
"""

SUBORDINATORS = frozenset(
    "because although though whether if unless while whereas since after before until once that so".split())
BE_FORMS = frozenset("be is are was were been being am 's 're 'm".split())
RELATIVES = frozenset({"WDT", "WP"})
CHUNK_BATCH = 100  # sentences per RegexpParser.parse call


@register_backend("nltk")
class NltkBackend(Backend):
    """NLTK perceptron tagger + RegexpParser chunks + chunk-based frames (see the module docstring)."""

    def __init__(self, options: BackendOptions):
        super().__init__(options)
        import nltk
        from nltk.tokenize import TreebankWordTokenizer, WordPunctTokenizer

        from ..assets.nltk_resources import require_nltk
        from .tagger import BatchPerceptronTagger

        require_nltk("averaged_perceptron_tagger_eng")
        self.tagger = BatchPerceptronTagger()
        self.rake = RakeExtractor(stopwords_english(), options.rake_max_words)
        self.chunker = nltk.RegexpParser(GRAMMAR)
        self._tb = TreebankWordTokenizer()
        self._wp = WordPunctTokenizer()

    def fingerprint(self) -> dict:
        import nltk

        fp = {**super().fingerprint(), "nltk": nltk.__version__, "grammar": GRAMMAR,
              "tagger": "averaged_perceptron_tagger_eng"}
        fp.pop("spacy_model")  # not used by this backend: changing it must not invalidate the shards
        return fp

    def tokenize(self, text: str) -> list[tuple[int, int]]:
        """Character spans of the Penn-Treebank tokens of ``text`` (control characters already blanked)."""
        try:
            return list(self._tb.span_tokenize(text))
        except (ValueError, IndexError):  # the Treebank aligner failed on an unusual line
            return list(self._wp.span_tokenize(text))

    def annotate(self, texts: Sequence[str]) -> list[dict | None]:
        work = []
        for t in texts:
            c = clean(t)
            if not has_word(c):
                work.append(None)
                continue
            spans = self.tokenize(c)
            work.append((spans, [t[a:b] for a, b in spans]))
        todo = [w for w in work if w is not None]
        tag_lists = self.tagger.tag_sents([[_for_tagger(tok) for tok in w[1]] for w in todo])
        chunk_tags = [[("SC" if t == "IN" and w.lower() in SUBORDINATORS else t) for w, t in zip(ws[1], ts)]
                      for ws, ts in zip(todo, tag_lists)]
        chunk_lists = self.chunk_sents(chunk_tags)
        out: list[dict | None] = []
        k = 0
        for text, w in zip(texts, work):
            if w is None:
                out.append(None)
                continue
            spans, tokens = w
            out.append(self._row(text, tokens, spans, tag_lists[k], chunk_tags[k], chunk_lists[k]))
            k += 1
        return out

    def chunk_sents(self, chunk_tags: list[list[str]]) -> list[list[tuple[str, int, int, str | None]]]:
        """Chunks of each sentence as (label, first token, end token, parent label).

        Sentences are parsed :data:`CHUNK_BATCH` at a time as one sequence, separated by a
        token tagged ``SEP`` that no rule of :data:`GRAMMAR` matches, so no chunk crosses a
        sentence boundary and the result equals one ``RegexpParser.parse`` per sentence
        (checked in the tests) at a fraction of the per-call cost.
        """
        out: list[list] = []
        for b in range(0, len(chunk_tags), CHUNK_BATCH):
            seq: list[str] = []
            offs: list[int] = []
            for tags in chunk_tags[b:b + CHUNK_BATCH]:
                offs.append(len(seq))
                seq.extend(tags)
                seq.append("SEP")
            per: list[list] = [[] for _ in offs]
            s = 0
            for lab, a, e, parent in _flatten(self.chunker.parse(list(enumerate(seq)))):
                while s + 1 < len(offs) and offs[s + 1] <= a:
                    s += 1
                per[s].append((lab, a - offs[s], e - offs[s], parent))
            out.extend(per)
        return out

    def _row(self, text, tokens, spans, tags, chunk_tags, chunks) -> dict:
        return {
            "tokens": tokens,
            "pos": tags,
            "rake": self.rake.extract(text, tokens, spans),
            "chunks": [{"label": lab, **span(text, spans[a][0], spans[b - 1][1])} for lab, a, b, _ in chunks],
            "frames": frames_from_chunks(text, tokens, spans, tags, chunk_tags, chunks),
        }


def _for_tagger(tok: str) -> str:
    # The Treebank tokenizer rewrites '"' as `` / '' (what the tagger was trained on); the token
    # column keeps the text's own characters, the tagger sees the PTB form.
    return "''" if tok == '"' else tok


def _flatten(tree) -> list[tuple[str, int, int, str | None]]:
    """Chunks of a RegexpParser tree as (label, first token, end token, parent label), pre-order."""
    out: list[tuple[str, int, int, str | None]] = []

    def walk(node, parent):
        first = node.leaves()[0][0]
        last = node.leaves()[-1][0]
        out.append((node.label(), first, last + 1, parent))
        for child in node:
            if not isinstance(child, tuple):
                walk(child, node.label())

    for child in tree:
        if not isinstance(child, tuple):
            walk(child, None)
    return out


def frames_from_chunks(text, tokens, spans, tags, chunk_tags, chunks) -> list[dict]:
    """Heuristic predicate-argument frames from NP/VP/PP/SBAR chunks (one per VP chunk).

    * predicate: the last verb of the VP chunk (``did not sign`` -> ``sign``);
    * ARGM-NEG: a negation (``not``, ``n't``, ``never``) inside the verb group;
    * ARG0: the nearest NP to the left (NPs inside PPs and whole SBAR clauses skipped; a relative pronoun
      ``who``/``which``/``that`` stands for the NP before it; across ``and``/``to``
      after another VP the subject of that VP is shared: "Mary wants to sign");
    * ARG1: the NP (or SBAR) right after the verb group (adverbs skipped);
    * passive (a form of *be* + VBN): the subject is ARG1 and the NP of a following
      ``by`` PP is ARG0.
    """
    n = len(tokens)
    np_of: list[tuple[int, int] | None] = [None] * n
    pp_of: list[tuple[int, int] | None] = [None] * n
    vp_of: list[int | None] = [None] * n
    sbar_at: dict[int, tuple[int, int]] = {}
    sbar_of: list[tuple[int, int] | None] = [None] * n
    vps: list[tuple[int, int]] = []
    for lab, a, b, parent in chunks:
        if lab == "NP" and parent != "PP":
            for i in range(a, b):
                np_of[i] = (a, b)
        elif lab == "PP" and parent != "PP":
            for i in range(a, b):
                pp_of[i] = (a, b)
        elif lab == "VP":
            for i in range(a, b):
                vp_of[i] = len(vps)
            vps.append((a, b))
        elif lab == "SBAR":
            sbar_at.setdefault(a, (a, b))
            for i in range(a, b):
                if sbar_of[i] is None:
                    sbar_of[i] = (a, b)

    def sp(a, b):
        return span(text, spans[a][0], spans[b - 1][1])

    low = [t.lower() for t in tokens]
    subjects: list[dict | None] = []
    frames = []
    for k, (a, b) in enumerate(vps):
        verbs = [i for i in range(a, b) if tags[i].startswith("VB")]
        if not verbs:
            subjects.append(None)
            continue
        pred = verbs[-1]
        neg = next((i for i in range(a, b) if low[i] in NEGATIONS), None)
        passive = tags[pred] == "VBN" and any(low[i] in BE_FORMS for i in range(a, pred))
        subj = _left_np(a, np_of, pp_of, vp_of, sbar_of, low, chunk_tags, subjects, sp)
        subjects.append(subj)
        obj = None
        j = b
        while j < n and tags[j].startswith("RB"):
            j += 1
        if j < n and np_of[j] is not None and np_of[j][0] == j:
            obj = sp(*np_of[j])
        elif j in sbar_at:
            obj = sp(*sbar_at[j])
        if passive:
            agent = None
            j = b
            while j < n and vp_of[j] is None:
                if pp_of[j] is not None and pp_of[j][0] == j and low[j] == "by" and j + 1 < pp_of[j][1]:
                    agent = sp(j + 1, pp_of[j][1])
                    break
                j += 1
            arg0, arg1 = agent, subj
        else:
            arg0, arg1 = subj, obj
        frames.append({"predicate": sp(pred, pred + 1), "arg0": arg0, "arg1": arg1,
                       "argm_neg": sp(neg, neg + 1) if neg is not None else None})
    return frames


def _left_np(a, np_of, pp_of, vp_of, sbar_of, low, chunk_tags, subjects, sp):
    """The subject of the VP starting at token ``a`` (see :func:`frames_from_chunks`)."""
    j = a - 1
    linked = False
    own = sbar_of[a]
    while j >= 0:
        if sbar_of[j] is not None and sbar_of[j] != own and sbar_of[j][1] <= a:
            # a whole clause (relative / subordinate) between the subject and its verb: skip it
            j = sbar_of[j][0] - 1
            continue
        if np_of[j] is not None:
            return sp(*np_of[j])
        if pp_of[j] is not None:
            j = pp_of[j][0] - 1
            continue
        if vp_of[j] is not None:
            return subjects[vp_of[j]] if linked else None
        tag = chunk_tags[j]
        if tag in RELATIVES or (tag == "SC" and low[j] == "that"):
            # "the contract that/which/who ..." : the antecedent NP before the pronoun.
            k = j - 1
            while k >= 0 and low[k] in {",", "--"}:
                k -= 1
            return sp(*np_of[k]) if k >= 0 and np_of[k] is not None else None
        if tag == "SC":
            return None
        if tag in ("CC", "TO"):
            linked = True
        elif tag not in (",", "RB", "RBR", "RBS"):
            linked = False
        j -= 1
    return None
