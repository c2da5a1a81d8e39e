"""EDA with protected phrase spans (sentlab.augment.eda), PaSeR's augmentation."""

from __future__ import annotations

import random

import pytest

from sentlab.augment.eda import EDA, STRATEGIES, segment
from sentlab.errors import SentlabError

SENT = "There are two options for you at the old station."
PHRASES = [(10, 21), (37, 48)]  # "two options", "old station"
FAKE_SYN = {"options": ["choices"], "station": ["depot"], "there": ["thither"], "old": ["aged"]}
STOP = frozenset({"there", "are", "for", "you", "at", "the"})


def _texts(spans, text):
    return [text[s:e] for s, e in spans]


def test_segment_cuts_at_span_boundaries():
    slots = segment("Work with a tool.", [(12, 16)])
    assert [s.text for s in slots] == ["Work", "with", "a", "tool", "."]
    assert [s.phrase for s in slots] == [None, None, None, 0, None]
    assert slots[3].ws == "" and slots[0].ws == " "
    slots = segment("a well-known tool", [(2, 6)])  # a span boundary inside a word cuts it
    assert [s.text for s in slots] == ["a", "well", "-known", "tool"] and slots[1].phrase == 0


def test_none_is_identity():
    out = EDA("none").augment(SENT, random.Random(0), PHRASES)
    assert out.text == SENT and out.spans == PHRASES


def test_random_deletion_keeps_phrases_and_relocates_them():
    assert _texts(PHRASES, SENT) == ["two options", "old station"]
    out = EDA("rd", alpha_rd=1.0).augment(SENT, random.Random(0), PHRASES)
    # every unprotected word is gone, the phrases stay, at their new spans
    assert _texts(out.spans, out.text) == ["two options", "old station"]
    assert out.text == "two options old station."  # punctuation is not a word: never deleted (#34 item 8)
    assert out.ops["rd"] == 6  # There, are, for, you, at, the
    assert out.edits == 6


def test_random_deletion_never_empties_a_sentence():
    for seed in range(20):
        out = EDA("rd", alpha_rd=1.0).augment("just three words", random.Random(seed))
        assert len(out.text.split()) == 1


def test_random_deletion_rate():
    words = " ".join(f"w{i}" for i in range(2000))
    out = EDA("rd", alpha_rd=0.1).augment(words, random.Random(0))
    assert 140 < 2000 - len(out.text.split()) < 260


def test_random_swap_moves_only_free_words():
    rng = random.Random(3)
    out = EDA("rs", alpha_rs=0.5).augment(SENT, rng, PHRASES)
    assert out.text != SENT
    assert sorted(out.text.replace(".", " .").split()) == sorted(SENT.replace(".", " .").split())
    assert _texts(out.spans, out.text) == ["two options", "old station"]
    # phrase slots do not move: same word index before and after
    assert out.text.split().index("two") == SENT.split().index("two")


def test_synonym_replacement_with_fake_source():
    eda = EDA("sr", alpha_sr=0.5, synonyms=lambda w: FAKE_SYN.get(w, []), stopwords=STOP)
    out = eda.augment(SENT, random.Random(0), PHRASES)
    # protected "options"/"station"/"old" stay; "There" is a stop word; nothing else has synonyms
    assert out.text == SENT and out.ops["sr"] == 0
    out = eda.augment(SENT, random.Random(0), [(10, 21)])  # only "two options" protected now
    assert "depot" in out.text and "aged" in out.text and "two options" in out.text
    assert out.ops["sr"] == 2
    assert _texts(out.spans, out.text) == ["two options"]


def test_synonym_replacement_respects_count_and_multiword():
    syn = {f"word{chr(97 + i)}": [f"syn {i}"] for i in range(20)}
    eda = EDA("sr", alpha_sr=0.25, synonyms=lambda w: syn.get(w, []), stopwords=frozenset())
    text = " ".join(f"word{chr(97 + i)}" for i in range(20))
    out = eda.augment(text, random.Random(1))
    assert out.ops["sr"] == 5 and out.text.count("syn ") == 5


def test_phrases_are_editable_when_not_passed_and_edits_sum_the_operations():
    eda = EDA("sr+rd", alpha_sr=1.0, alpha_rd=0.5, synonyms=lambda w: FAKE_SYN.get(w, []), stopwords=STOP)
    protected = eda.augment(SENT, random.Random(0), PHRASES)
    free = eda.augment(SENT, random.Random(0))  # PaSeR's s under eda_edit_phrases: no span protected
    assert protected.ops["sr"] == 0 and free.ops["sr"] == 3  # options, station, old (There is a stop word)
    assert free.edits == free.ops["sr"] + free.ops["rd"] and protected.edits == protected.ops["rd"]
    assert EDA("none").augment(SENT, random.Random(0), PHRASES).edits == 0


def test_combinations_apply_both():
    eda = EDA("sr+rd", alpha_sr=1.0, alpha_rd=1.0, synonyms=lambda w: FAKE_SYN.get(w, []), stopwords=STOP)
    out = eda.augment(SENT, random.Random(0), PHRASES)
    assert out.ops["sr"] == 0 and out.ops["rd"] == 6 and out.text == "two options old station."
    eda = EDA("sr+rs", synonyms=lambda w: FAKE_SYN.get(w, []), stopwords=STOP)
    out = eda.augment(SENT, random.Random(0), [(10, 21)])
    assert set(out.ops) == {"sr", "rs"} and _texts(out.spans, out.text) == ["two options"]


def test_seeded_determinism():
    eda = EDA("rs", alpha_rs=0.3)
    a = [eda.augment(SENT, random.Random(7), PHRASES).text for _ in range(2)]
    assert a[0] == a[1]


def test_missing_wordnet_names_the_download(monkeypatch, tmp_path):
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    with pytest.raises(SentlabError, match=r"python -m nltk\.downloader wordnet"):
        EDA("sr")
    with pytest.raises(SentlabError, match=r"nltk\.downloader wordnet"):
        EDA("sr+rd")
    EDA("rd")  # strategies without SR need nothing
    EDA("rs")


def test_unknown_strategy():
    assert "sr+rs" in STRATEGIES
    with pytest.raises(SentlabError, match="allowed"):
        EDA("shuffle")


def test_counts_words_only_and_never_moves_punctuation():
    """#34 item 8: n = α · #words counted the punctuation and the protected slots too (SR on this sentence
    replaced int(0.5 · 11) = 5 of its 4 free words, i.e. all of them); RS swapped commas, RD deleted them."""
    text = "alpha, bravo, charlie, delta: echo foxtrot golf hotel india juliet."
    phrase = [(text.index("echo"), text.index("."))]  # six protected words; 4 free words, 5 punctuation runs
    syn = {w: [w.upper()] for w in ("alpha", "bravo", "charlie", "delta")}
    out = EDA("sr", alpha_sr=0.5, synonyms=lambda w: syn.get(w, []), stopwords=frozenset()).augment(
        text, random.Random(0), phrase)
    assert out.ops["sr"] == 2 and sum(w.isupper() for w in out.text.replace(",", " ").split()) == 2
    for seed in range(20):
        rs = EDA("rs", alpha_rs=1.0).augment(text, random.Random(seed), phrase)
        assert [c for c in rs.text if not c.isalnum() and c != " "] == list(",,,:.")  # punctuation in place
        assert rs.ops["rs"] == 4  # α · 4 free words
    rd = EDA("rd", alpha_rd=1.0).augment(text, random.Random(0), phrase)
    assert rd.text == ", , , : echo foxtrot golf hotel india juliet." and rd.ops["rd"] == 4


def test_edit_phrases_names_the_operations_that_may_edit_a_phrase():
    """PaSeR's s under eda_edit_phrases: sr (the paper's reading): SR may replace a phrase word, RD never
    deletes one."""
    eda = EDA("sr+rd", alpha_sr=1.0, alpha_rd=1.0, synonyms=lambda w: FAKE_SYN.get(w, []), stopwords=STOP)
    out = eda.augment(SENT, random.Random(0), PHRASES, edit_phrases=("sr",))
    assert out.ops == {"sr": 3, "rd": 6} and out.spans == []
    assert out.text == "two choices aged depot."
    both = eda.augment(SENT, random.Random(0), PHRASES, edit_phrases=("sr", "rd"))
    assert both.ops["rd"] == 9 and both.text == "aged ."  # one word kept: a sentence is never wordless
