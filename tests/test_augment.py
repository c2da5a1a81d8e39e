"""Discrete augmentations of MoCo-BERT's key branch (sentlab.augment)."""

import random
from collections import Counter

import pytest

from sentlab.augment import delete, duplicate, make_augmenter, reorder, srl_rebuild

SENT = "the quick brown fox jumps over the lazy dog today"  # 10 words


def span(text, sentence):
    start = sentence.index(text)
    return {"text": text, "start": start, "end": start + len(text)}


def test_reorder_is_a_permutation_and_seeded():
    out = reorder(SENT, random.Random(1))
    assert Counter(out.split()) == Counter(SENT.split())
    assert out != SENT
    assert out == reorder(SENT, random.Random(1))
    assert reorder("alone", random.Random(0)) == "alone"


def test_duplicate_repeats_ten_percent_in_place():
    out = duplicate(SENT, random.Random(3), rate=0.1).split()
    words = SENT.split()
    assert len(out) == len(words) + 1
    # removing one adjacent repeat gives back the sentence
    dup = [i for i in range(len(out) - 1) if out[i] == out[i + 1]]
    assert dup and any(out[:i] + out[i + 1:] == words for i in dup)
    assert len(duplicate(" ".join(["w"] * 30), random.Random(0), rate=0.1).split()) == 33
    assert duplicate(SENT, random.Random(0), rate=0.0) == SENT


def test_delete_drops_ten_percent_keeps_order_and_one_word():
    words = SENT.split()
    out = delete(SENT, random.Random(5), rate=0.1).split()
    assert len(out) == len(words) - 1
    it = iter(words)
    assert all(w in it for w in out)  # a subsequence: order kept
    assert delete("one two", random.Random(0), rate=1.0) in ("one", "two")
    assert delete("single", random.Random(0), rate=0.5) == "single"
    assert len(delete(" ".join(str(i) for i in range(40)), random.Random(0), rate=0.1).split()) == 36


def test_srl_two_predicates_and_none():
    s = "The committee did not approve the plan because the members rejected its cost ."
    frames = [
        {"predicate": span("approve", s), "arg0": span("The committee", s), "arg1": span("the plan", s),
         "argm_neg": span("not", s)},
        {"predicate": span("rejected", s), "arg0": span("the members", s), "arg1": span("its cost", s),
         "argm_neg": None},
    ]
    assert srl_rebuild(s, frames) == "The committee approve not the plan the members rejected its cost"
    assert srl_rebuild(s, []) == s
    assert srl_rebuild(s, None) == s
    only_pred = [{"predicate": span("rejected", s), "arg0": None, "arg1": None, "argm_neg": None}]
    assert srl_rebuild(s, only_pred) == "rejected"


def test_make_augmenter_dispatch():
    rng = random.Random(0)
    assert make_augmenter("none")(SENT, rng) == SENT
    assert make_augmenter("srl")(SENT, rng, None) == SENT
    assert make_augmenter("crop", 0.5)(SENT, random.Random(0)) in SENT   # a contiguous run (issue #40: SimCSE + crop)
    with pytest.raises(ValueError):
        make_augmenter("cropping")


def test_augmenters_pickle_for_dataloader_workers():
    """On the GPU preflight (its stage processes start DataLoader workers with ``forkserver``) MoCo and PT-BERT
    failed with "Can't pickle local object 'make_augmenter.<locals>.<lambda>'": every augmenter is a plain
    object that survives pickling and augments as before."""
    import pickle

    for kind in ("none", "reorder", "duplication", "deletion", "crop", "srl"):
        f = make_augmenter(kind, 0.3)
        g = pickle.loads(pickle.dumps(f))
        assert g(SENT, random.Random(3), None) == f(SENT, random.Random(3), None), kind
    assert make_augmenter("deletion", 0.3)(SENT, random.Random(3)) == delete(SENT, random.Random(3), 0.3)
    assert make_augmenter("reorder")(SENT, random.Random(5)) == reorder(SENT, random.Random(5))
