"""spacy backend: the missing-model error, and frames/chunks from hand-built dependency parses."""

from __future__ import annotations

import pytest

spacy = pytest.importorskip("spacy", reason="needs the spacy package")

from spacy.tokens import Doc  # noqa: E402

from sentlab.annotate import BackendOptions, get_backend  # noqa: E402
from sentlab.annotate.spacy_backend import annotate_doc, frames_from_doc  # noqa: E402
from sentlab.errors import SentlabError  # noqa: E402


def _doc(words, pos, tags, deps, heads):
    nlp = spacy.blank("en")
    return Doc(nlp.vocab, words=words, spaces=[True] * (len(words) - 2) + [False, False] if words[-1] == "." else None,
               pos=pos, tags=tags, deps=deps, heads=heads)


def _texts(frames):
    return [{k: (v["text"] if v else None) for k, v in f.items()} for f in frames]


@pytest.fixture
def rake():
    from sentlab.annotate.base import RakeExtractor, stopwords_english

    try:
        return RakeExtractor(stopwords_english(), 4)
    except SentlabError:
        pytest.skip("needs NLTK resource stopwords (set NLTK_DATA)")


def test_missing_pipeline_error_names_the_install_command():
    try:
        spacy.load("en_core_web_sm")
        pytest.skip("en_core_web_sm is installed here; the missing-model path cannot be exercised")
    except OSError:
        pass
    with pytest.raises(SentlabError, match=r"python -m spacy download en_core_web_sm"):
        get_backend("spacy", BackendOptions(spacy_model="en_core_web_sm"))


def test_negated_frame_from_dependency_parse(rake):
    doc = _doc(["Mary", "did", "not", "sign", "the", "contract", "."],
               ["PROPN", "AUX", "PART", "VERB", "DET", "NOUN", "PUNCT"],
               ["NNP", "VBD", "RB", "VB", "DT", "NN", "."],
               ["nsubj", "aux", "neg", "ROOT", "det", "dobj", "punct"], [3, 3, 3, 3, 5, 3, 3])
    assert doc.text == "Mary did not sign the contract."
    row = annotate_doc(doc, doc.text, rake)
    assert row["pos"] == ["NNP", "VBD", "RB", "VB", "DT", "NN", "."]
    assert _texts(row["frames"]) == [{"predicate": "sign", "arg0": "Mary", "arg1": "the contract", "argm_neg": "not"}]
    assert row["frames"][0]["argm_neg"] == {"text": "not", "start": 9, "end": 12}
    assert [(c["label"], c["text"]) for c in row["chunks"]] == [
        ("NP", "Mary"), ("VP", "did not sign"), ("NP", "the contract")]


def test_two_predicates_shared_subject_and_passive():
    doc = _doc(["John", "bought", "a", "car", "and", "Mary", "sold", "the", "house", "."],
               ["PROPN", "VERB", "DET", "NOUN", "CCONJ", "PROPN", "VERB", "DET", "NOUN", "PUNCT"],
               ["NNP", "VBD", "DT", "NN", "CC", "NNP", "VBD", "DT", "NN", "."],
               ["nsubj", "ROOT", "det", "dobj", "cc", "nsubj", "conj", "det", "dobj", "punct"],
               [1, 1, 3, 1, 1, 6, 1, 8, 6, 1])
    assert _texts(frames_from_doc(doc, doc.text)) == [
        {"predicate": "bought", "arg0": "John", "arg1": "a car", "argm_neg": None},
        {"predicate": "sold", "arg0": "Mary", "arg1": "the house", "argm_neg": None}]
    shared = _doc(["Mary", "sang", "and", "danced", "."], ["PROPN", "VERB", "CCONJ", "VERB", "PUNCT"],
                  ["NNP", "VBD", "CC", "VBD", "."], ["nsubj", "ROOT", "cc", "conj", "punct"], [1, 1, 1, 1, 1])
    assert [f["arg0"] for f in _texts(frames_from_doc(shared, shared.text))] == ["Mary", "Mary"]
    passive = _doc(["The", "contract", "was", "signed", "by", "Mary", "."],
                   ["DET", "NOUN", "AUX", "VERB", "ADP", "PROPN", "PUNCT"], ["DT", "NN", "VBD", "VBN", "IN", "NNP", "."],
                   ["det", "nsubjpass", "auxpass", "ROOT", "agent", "pobj", "punct"], [1, 3, 3, 3, 3, 4, 3])
    assert _texts(frames_from_doc(passive, passive.text)) == [
        {"predicate": "signed", "arg0": "Mary", "arg1": "The contract", "argm_neg": None}]


def test_spacy_backend_through_the_runner(monkeypatch, tmp_path, rake):
    """SpacyBackend.annotate + the shard runner, with a stand-in pipeline returning hand-built parses."""
    import sentlab.annotate.runner as runner
    import sentlab.annotate.spacy_backend as sb
    from sentlab.annotate import annotate_corpus, read_annotations

    doc = _doc(["Mary", "did", "not", "sign", "the", "contract", "."],
               ["PROPN", "AUX", "PART", "VERB", "DET", "NOUN", "PUNCT"], ["NNP", "VBD", "RB", "VB", "DT", "NN", "."],
               ["nsubj", "aux", "neg", "ROOT", "det", "dobj", "punct"], [3, 3, 3, 3, 5, 3, 3])

    class FakePipeline:
        meta = {"lang": "en", "name": "handmade", "version": "0.0"}
        pipe_names = ["tagger", "parser"]

        def pipe(self, texts, batch_size):
            for t in texts:
                assert t == doc.text
                yield doc

    monkeypatch.setattr(sb, "load_pipeline", lambda model: FakePipeline())
    monkeypatch.setattr(runner, "_BACKEND", None)
    monkeypatch.setattr(runner, "_BACKEND_KEY", None)  # both restored after the test
    stats = annotate_corpus([0, 1, 2], [doc.text, "", "..."], tmp_path / "sp", backend="spacy", progress=False)
    assert stats.skipped == 2 and stats.with_frames == 1 and stats.backend == "spacy"
    rows = read_annotations(tmp_path / "sp").to_pylist()
    assert _texts(rows[0]["frames"]) == [{"predicate": "sign", "arg0": "Mary", "arg1": "the contract", "argm_neg": "not"}]
    assert rows[1]["tokens"] == [] and rows[2]["frames"] == []
