"""Annotation stage: POS tags, RAKE phrases, chunk phrases and predicate-argument frames, cached as Parquet.

Computed once per corpus (``data/corpus/train.parquet`` -> ``data/annotations/train/``,
``data/corpus/sts_unlabeled.parquet`` -> ``data/annotations/sts_unlabeled/``) and
read by the training methods with :func:`read_annotations`: MoCo+SRL uses
``frames``, PaSeR ``rake`` and ``chunks``, the POS/BOW method ``pos``.

Schema (one row per input sentence, in input order; all offsets are character
offsets into ``text``, ``end`` exclusive, so ``text[start:end]`` is the span)::

    id        int64
    text      string                      the sentence as given
    tokens    list<string>                Penn-Treebank-style tokens (text[start:end] of each)
    pos       list<string>                Penn tags, aligned with tokens
    rake      list<struct{text string, score float64, start int32, end int32}>
                                          RAKE phrases ranked best first (degree/frequency score)
    chunks    list<struct{label string, text string, start int32, end int32}>
                                          label in NP | VP | PP | SBAR; nested chunks included
                                          (a PP's NP, an SBAR's NP/VP), ordered by start
    frames    list<struct{predicate: span, arg0: span, arg1: span, argm_neg: span}>
                                          span = struct{text string, start int32, end int32};
                                          arg0 / arg1 / argm_neg are null when absent

A sentence with no word character (empty, whitespace, punctuation or control
characters only) is *skipped*: it keeps its row (so ids stay aligned with the
corpus) with empty lists, and is counted in the ``sentlab.skipped`` metadata and
in ``data/annotate_stats.json``. Control characters are blanked (same length)
before tokenisation, so offsets still index the original text.

Parquet key-value metadata of every shard/file: ``sentlab.backend``,
``sentlab.params_hash`` (backend fingerprint + options + code + schema version),
``sentlab.input_hash``, ``sentlab.rows``, ``sentlab.skipped``,
``sentlab.with_frames``, ``sentlab.schema_version``.

Backends (same schema): ``nltk`` (:mod:`.nltk_backend`: perceptron tagger,
RegexpParser chunk grammar, frames read off the chunks) and ``spacy``
(:mod:`.spacy_backend`: an installed English pipeline, frames from the dependency
parse). Frames are heuristic predicate-argument structures, not a neural SRL
model; see ``docs/annotation.md``. Another backend plugs in through
:class:`Backend` + :func:`register_backend`.

Example::

    from sentlab.annotate import annotate_corpus, read_annotations
    annotate_corpus([0, 1], ["Mary did not sign the contract.", "It rained."], "out/", jobs=1)
    read_annotations("out/", columns=["frames"]).column("frames")[0].as_py()[0]["arg0"]
    # {'text': 'Mary', 'start': 0, 'end': 4}
"""

from .base import Backend, BackendOptions, register_backend
from .corpus import (AnnotateStats, annotate_corpus, annotate_file, backend_names, get_backend, input_hash,
                     params_hash, read_annotations)
from .source import iter_shards, read_texts
from .schema import ANNOTATION_COLUMNS, CHUNK_LABELS, SCHEMA

__all__ = [
    "ANNOTATION_COLUMNS", "CHUNK_LABELS", "SCHEMA", "AnnotateStats", "Backend", "BackendOptions", "annotate_corpus",
    "annotate_file", "iter_shards",
    "backend_names", "get_backend", "input_hash", "params_hash", "read_annotations", "read_texts", "register_backend",
    "options_from_params",
]


def options_from_params(p) -> BackendOptions:
    """:class:`BackendOptions` from the ``annotate`` params section (:class:`sentlab.config.AnnotateParams`)."""
    return BackendOptions(rake_max_words=p.rake_max_words, spacy_model=p.spacy_model)
