"""posbow_adv on a byte-level BPE tokenizer (issue #53 §4): roberta-base's stand-in (sentlab.backbones.standin).

The method's labels, as docs/methods.md states them: the POS target counts a word when its *first* piece is in the
encoder's window; the bag holds *every* piece the window holds (a word cut by the window: its seen pieces); a stop
word leaves the bag where it starts a word (``Ġthe`` and the text-initial ``The``), never as a word's continuation
(``as`` of ``Ġkat|as``). The expected values come from tokenizing each word on its own (a word of letters is one
pre-token of GPT-2's byte-level split), not from the offsets the method reads.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from sentlab.config import TrainParams
from sentlab.data.tags import POS_TAGS
from sentlab.methods.base import Batch
from sentlab.methods.posbow_adv import PosBowAdv

pytestmark = pytest.mark.usefixtures("one_thread")
CUT = "xylophonists"   # five pieces under the stand-in: Ġx yl oph on ists


@pytest.fixture(scope="module")
def bpe():
    from conftest import MIRROR

    if not (MIRROR / "STS").is_dir():
        pytest.skip(f"needs the data mirror at {MIRROR} (the stand-in BPE learns on its text)")
    import os

    from sentlab.backbones import build_tokenizer

    old = os.environ.get("SENTLAB_DATA_MIRROR")
    os.environ["SENTLAB_DATA_MIRROR"] = str(MIRROR)
    try:
        return build_tokenizer("roberta-base")
    finally:
        if old is None:
            os.environ.pop("SENTLAB_DATA_MIRROR")
        else:
            os.environ["SENTLAB_DATA_MIRROR"] = old


def word_pieces(tok, words):
    """Each word's pieces, tokenized on its own: the first word as the text's start, the others after a space."""
    return [tok.tokenize(w if i == 0 else " " + w) for i, w in enumerate(words)]


def make(tok, tmp_path, texts, max_length=32, **kw):
    """posbow_adv on a tiny random RoBERTa with the stand-in BPE (its 50,265 ids)."""
    from transformers import RobertaConfig, RobertaModel

    path = tmp_path / "train.parquet"
    pq.write_table(pa.table({"id": list(range(len(texts))), "text": texts}), path)
    torch.manual_seed(0)
    cfg = RobertaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=max_length + 2, pad_token_id=1,
                        type_vocab_size=1)
    params = PosBowAdv.Params(bow_vocab_from=str(path), **kw)
    return PosBowAdv(RobertaModel(cfg, add_pooling_layer=False), tok,
                     params.resolved(TrainParams(max_length=max_length, lr=1e-3)), seed=0)


def test_the_standin_splits_the_test_words_as_assumed(bpe):
    assert bpe.tokenize(" " + CUT) == ["Ġx", "yl", "oph", "on", "ists"]
    assert bpe.tokenize(" katas") == ["Ġkat", "as"] and bpe.tokenize("The cat") == ["The", "Ġcat"]


@pytest.mark.parametrize("max_length", [8, 31, 32, 33, 34, 36, 40])
def test_pos_target_counts_a_word_whose_first_piece_is_in_the_window(bpe, tmp_path, max_length):
    """words_seen = the words whose first piece lies among the window's max_length - 2 pieces (<s> … </s>), also
    when the window cuts a word; the POS histogram is over those words' tags."""
    words = ["Cats"] + ["cat"] * 28 + [CUT] + ["dogs"] * 10
    tags = ["NNS"] + ["NN"] * 28 + ["NNS"] + ["VBZ"] * 10
    pieces = word_pieces(bpe, words)
    first, n = [], 0
    for p in pieces:
        first.append(n)
        n += len(p)
    want = sum(f < max_length - 2 for f in first)
    m = make(bpe, tmp_path, [" ".join(words), "the cat sat"], max_length=max_length, bow_vocab_size=3,
             bow_exclude_stopwords=False)
    text = " ".join(words)
    assert m.words_seen([text], [words]) == [want]
    target = m.prepare(Batch([text], extras={"tokens": [words], "pos": [tags]})).features["pos"][0]
    idx = {t: i for i, t in enumerate(POS_TAGS)}
    seen = tags[:want]
    for tag in ("NN", "NNS", "VBZ"):
        assert float(target[idx[tag]]) == pytest.approx(seen.count(tag) / want), tag


def test_bow_bag_holds_every_piece_of_the_window_and_no_special_token(bpe, tmp_path):
    """The bag of a sentence the window cuts inside a word: every piece of the whole words before the cut and the
    cut word's seen pieces (Ġx yl oph), nothing after it, never <s>/</s>/<pad>."""
    words = ["A", "cat", "saw", CUT, "and", "zebras"]
    pieces = word_pieces(bpe, words)
    corpus = [" ".join(words), "Two xylophonists", "Big zebras and"]   # the vocabulary: the windows' 12 pieces
    m = make(bpe, tmp_path, corpus, max_length=2 + 6, bow_vocab_size=12, bow_exclude_stopwords=False)
    assert {"on", "ists", "Ġzebras", "Ġand"} <= set(bpe.convert_ids_to_tokens(m.bow_vocab.tolist()))
    window = [p for w in pieces for p in w][:6]
    assert window == ["A", "Ġcat", "Ġsaw", "Ġx", "yl", "oph"]
    enc = m.tokenize([" ".join(words)])
    bag = m.bow_targets(enc["input_ids"], enc["attention_mask"])[0]
    got = set(bpe.convert_ids_to_tokens([int(m.bow_vocab[i]) for i in torch.nonzero(bag).flatten()]))
    assert got == set(window)
    assert not set(m.bow_vocab.tolist()) & set(bpe.all_special_ids)


def test_stop_words_leave_the_bag_where_they_start_a_word_never_as_a_continuation(bpe, tmp_path):
    """Ġthe / Ġas / the text-initial The / 's leave the bag; the continuation piece `as` (Ġkat|as), whose text is a
    stop word, stays, as WordPiece's ##-pieces do; punctuation leaves."""
    texts = ["The katas were long.", "The katas as taught.", "Two katas as well.", "The dog's katas are old."]
    m = make(bpe, tmp_path, texts, bow_vocab_size=8)
    vocab = set(bpe.convert_ids_to_tokens(m.bow_vocab.tolist()))
    assert vocab == {"Ġkat", "as", "Ġlong", "Ġtaught", "Two", "Ġwell", "Ġdog", "Ġold"}   # not The, Ġas, 's, Ġare, .


def test_one_training_step_on_bpe_ids(bpe, tmp_path):
    """prepare + forward + backward on the stand-in's ids: no token_type_ids, every loss finite, the heads and the
    encoder get a gradient."""
    texts = ["The cat sat on the mat.", "Dogs bark loudly at night.", "A small bird sings.", "Green ideas sleep."]
    tags = [["DT", "NN", "VBD", "IN", "DT", "NN", "."], ["NNS", "VBP", "RB", "IN", "NN", "."],
            ["DT", "JJ", "NN", "VBZ", "."], ["JJ", "NNS", "VBP", "."]]
    tokens = [t.replace(".", " .").split() for t in texts]
    m = make(bpe, tmp_path, texts, bow_vocab_size=8, head_init="random")
    m.train()
    batch = m.prepare(Batch(texts, list(range(4)), {"tokens": tokens, "pos": tags}))
    assert set(batch.features["enc"]) == {"input_ids", "attention_mask"}
    out = m(batch)
    assert all(torch.isfinite(out[k]) for k in ("loss", "loss_con", "loss_bow", "loss_pos", "loss_adv"))
    out["loss"].backward()
    assert m.encoder.embeddings.word_embeddings.weight.grad.abs().sum() > 0
    assert m.classifiers["pos"].weight.grad.abs().sum() > 0
