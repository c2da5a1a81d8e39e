"""PaSeR (sentlab.methods.paser): masking, signal, gradients, inference, learning, reconstruction, supervised
variant."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import nltk_with

from sentlab.config import TrainParams
from sentlab.errors import SentlabError
from sentlab.methods import get_method
from sentlab.methods._paser_reconstruction import reconstruction_report
from sentlab.methods._paser_decoder import DecodingSignal, choose_phrases, save_heads
from sentlab.methods.base import Batch


def _span(text, phrase, score=1.0):
    s = text.index(phrase)
    return {"text": phrase, "score": score, "start": s, "end": s + len(phrase)}


SENTS = [
    "Do I need a transit visa for a stop in London?",
    "There are two options for you.",
    "At least 89 dead in china earthquakes.",
    "A man is playing a large flute.",
]
RAKE = [
    [_span(SENTS[0], "transit visa", 4.0), _span(SENTS[0], "London", 1.0), _span(SENTS[0], "stop", 1.0)],
    [_span(SENTS[1], "two options", 4.0)],
    [_span(SENTS[2], "china earthquakes", 4.0), _span(SENTS[2], "least", 1.0)],
    [_span(SENTS[3], "large flute", 4.0), _span(SENTS[3], "man", 1.0), _span(SENTS[3], "playing", 1.0)],
]
CHUNKS = [
    [{"label": "NP", **{k: v for k, v in _span(SENTS[0], "a transit visa").items() if k != "score"}},
     {"label": "VP", **{k: v for k, v in _span(SENTS[0], "need").items() if k != "score"}},
     {"label": "PP", **{k: v for k, v in _span(SENTS[0], "for a stop").items() if k != "score"}}],
    [], [], [],
]
EXTRAS = {"rake": RAKE, "chunks": CHUNKS}


@pytest.fixture(autouse=True)
def _one_thread():
    """The shared CPU is contended: one intra-op thread is ~10x faster here than the default."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _make(tiny_bert, method="paser", **kw):
    enc, tok = tiny_bert
    cls = get_method(method)
    params = cls.Params(**{"eda": "none", "decoder_heads": 2, "decoder_layers": 2, "top_k": 2, **kw})
    return cls(enc, tok, params.resolved(TrainParams(max_length=32)), seed=1)


def test_registered_with_contract():
    for mid in ("paser", "paser_sup"):
        cls = get_method(mid)
        assert "rake" in cls.corpus_columns and "chunks" in cls.corpus_columns
    assert get_method("paser_sup").init_from == "paser"
    assert get_method("paser_sup").Params().corpus == "nli"


def test_masking_replaces_exactly_the_phrase_spans(tiny_bert):
    m = _make(tiny_bert)
    tok = m.tokenizer
    views = m.prepare_views(SENTS, EXTRAS, list(range(4)), augment=False)
    for i, s in enumerate(SENTS):
        chosen = [(p["start"], p["end"]) for p in RAKE[i][:2]]
        enc = tok(s, return_offsets_mapping=True)
        inside = [any(a < e and st < b for st, e in chosen) and b > a for a, b in enc["offset_mapping"]]
        got = views.masked[i].input_ids
        assert len(got) == len(enc["input_ids"])
        for j, (orig, new) in enumerate(zip(enc["input_ids"], got)):
            assert (new == tok.mask_token_id) == inside[j]
            if not inside[j]:
                assert new == orig
        # the target is exactly those phrases, in rank order, each closed by [SEP]
        target = m.targets(views)[i]
        expected = " [SEP] ".join(p["text"].lower() for p in RAKE[i][:2]) + " [SEP]"
        assert tok.decode(target) == expected
        assert target[-1] == tok.sep_token_id
    assert tok.convert_ids_to_tokens(views.masked[1].input_ids) == [
        "[CLS]", "there", "are", "[MASK]", "[MASK]", "for", "you", ".", "[SEP]"]


def test_chunk_phrases_and_truncation(tiny_bert):
    rng = __import__("random").Random(0)
    assert choose_phrases(SENTS[0], RAKE[0], CHUNKS[0], "np", 5, rng) == [(CHUNKS[0][0]["start"], CHUNKS[0][0]["end"])]
    verb_group = [(CHUNKS[0][1]["start"], CHUNKS[0][1]["end"])]  # the chunkers' "VP" label
    assert choose_phrases(SENTS[0], RAKE[0], CHUNKS[0], "verb_group", 5, rng) == verb_group
    both = choose_phrases(SENTS[0], RAKE[0], CHUNKS[0], "np_verb_group", 5, rng)
    assert both == sorted([(c["start"], c["end"]) for c in CHUNKS[0][:2]])  # sentence order, no PP
    assert choose_phrases(SENTS[0], RAKE[0], CHUNKS[0], "rake", 1, rng) == [(RAKE[0][0]["start"], RAKE[0][0]["end"])]
    # a span whose text does not match the sentence is refused
    assert choose_phrases("other text here", RAKE[0], None, "rake", 3, rng) == []
    # a phrase cut by truncation is neither masked nor a target
    m = _make(tiny_bert, max_length=8, top_k=3)
    v = m.prepare_views(SENTS[:1], {k: v[:1] for k, v in EXTRAS.items()}, [0], augment=False).masked[0]
    assert len(v.input_ids) == 8
    assert [m.tokenizer.decode(p) for p in v.phrase_token_ids] == ["transit visa"]


def test_eda_keeps_masked_phrase_alignment(tiny_bert):
    m = _make(tiny_bert, eda="rd", eda_alpha_rd=0.9)
    views = m.prepare_views(SENTS, EXTRAS, list(range(4)), augment=True)
    assert views.t_texts != SENTS  # words were deleted …
    for i in range(4):  # … but the masked word pieces are still exactly the phrases
        assert [m.tokenizer.decode(p) for p in views.masked[i].phrase_token_ids] == \
               [p["text"].lower() for p in RAKE[i][:2]]
        assert all(t == m.tokenizer.mask_token_id for pos in views.masked[i].masked_positions
                   for t in (views.masked[i].input_ids[j] for j in pos))


CLAUSE = "She left the city because it rained."
CLAUSE_CHUNKS = [{"label": lab, **{k: v for k, v in _span(CLAUSE, t).items() if k != "score"}}
                 for lab, t in (("NP", "She"), ("VP", "left"), ("NP", "the city"), ("SBAR", "because it rained"))]


def test_chunk_sources_include_sbar_and_draw_chunk_k_at_random():
    import random

    sbar = (CLAUSE.index("because"), len(CLAUSE) - 1)
    assert choose_phrases(CLAUSE, None, CLAUSE_CHUNKS, "sbar", 1, random.Random(0)) == [sbar]
    drawn = [choose_phrases(CLAUSE, None, CLAUSE_CHUNKS, "np_verb_group_sbar", 1, random.Random(seed))
             for seed in range(40)]
    assert all(len(d) == 1 for d in drawn)  # "a random sub-tree": one chunk, any of NP / verb group / SBAR
    labels = {c["label"] for c in CLAUSE_CHUNKS for d in drawn if (c["start"], c["end"]) == d[0]}
    assert labels == {"NP", "VP", "SBAR"}
    assert choose_phrases(CLAUSE, None, CLAUSE_CHUNKS, "np_verb_group_sbar", 1, random.Random(3)) == drawn[3]  # seeded
    # the chunkers' VP is a verb group and named so: the parse-tree name is refused
    with pytest.raises(ValueError, match="allowed: rake, np, verb_group, sbar"):
        choose_phrases(CLAUSE, None, CLAUSE_CHUNKS, "vp", 1, random.Random(0))
    with pytest.raises(ValueError, match="verb_group"):
        get_method("paser").Params(phrases="vp")


def test_chunk_k_is_separate_from_rake_top_k(tiny_bert):
    assert get_method("paser").Params().chunk_k == 1
    extras = {"rake": RAKE[:1], "chunks": CHUNKS[:1]}  # 2 NP/VP chunks (one each), 3 RAKE phrases
    for kw, count, want in (({"phrases": "np_verb_group", "top_k": 5, "chunk_union": "pooled"}, 1, 1),
                            ({"phrases": "np_verb_group", "chunk_k": 2, "chunk_union": "pooled"}, 2, 2),
                            ({"phrases": "np_verb_group"}, 2, 2),  # one NP and one VP (Table 5's NP+VP)
                            ({"phrases": "np_verb_group", "chunk_k": 2}, 4, 2),
                            ({"phrases": "rake", "top_k": 3, "chunk_k": 1}, 3, 3)):
        m = _make(tiny_bert, **kw)
        assert m.phrase_count == count
        assert len(m.prepare_views(SENTS[:1], extras, [0], augment=False).masked[0].phrase_token_ids) == want


def test_np_vp_masks_one_np_and_one_vp():
    """#34 item 9: Table 5's NP+VP row masks an NP and a VP (chunk_union: one_each, the default); pooled, one
    chunk of either label is drawn."""
    import random

    assert get_method("paser").Params().chunk_union == "one_each"
    np_, vp = (CLAUSE.index("the city"), CLAUSE.index("the city") + 8), (CLAUSE.index("left"), CLAUSE.index("left") + 4)
    for seed in range(10):
        each = choose_phrases(CLAUSE, None, CLAUSE_CHUNKS, "np_verb_group", 1, random.Random(seed), one_each=True)
        assert len(each) == 2 and vp in each and each == sorted(each)
        labels = {c["label"] for c in CLAUSE_CHUNKS if (c["start"], c["end"]) in each}
        assert labels == {"NP", "VP"}
        assert len(choose_phrases(CLAUSE, None, CLAUSE_CHUNKS, "np_verb_group", 1, random.Random(seed))) == 1
    assert any(np_ in choose_phrases(CLAUSE, None, CLAUSE_CHUNKS, "np_verb_group", 1, random.Random(s), one_each=True)
               for s in range(10))


def test_nltk_chunks_give_sbar_and_verb_group_phrases(tiny_bert):
    from sentlab.annotate import BackendOptions, get_backend

    nltk_with("averaged_perceptron_tagger_eng", "stopwords")
    be = get_backend("nltk", BackendOptions())
    (row,) = be.annotate([CLAUSE])
    extras = {"rake": [row["rake"]], "chunks": [row["chunks"]]}

    def masked(phrases: str) -> set[str]:  # the phrase masked in 20 rows (each row its own seeded draw)
        m = _make(tiny_bert, phrases=phrases)
        return {m.tokenizer.decode(p) for i in range(20)
                for p in m.prepare_views([CLAUSE], extras, [i], augment=False).masked[0].phrase_token_ids}

    assert masked("sbar") == {"because it rained"}
    assert masked("verb_group") == {"left", "rained"}  # verb groups: "left", not "left the city"


def test_mask_unit_phrase_puts_one_mask_per_phrase(tiny_bert):
    assert get_method("paser").Params().mask_unit == "wordpiece"  # Table 7: one blank per token
    word = _make(tiny_bert).prepare_views(SENTS, EXTRAS, list(range(4)), augment=False)
    m = _make(tiny_bert, mask_unit="phrase")
    phrase = m.prepare_views(SENTS, EXTRAS, list(range(4)), augment=False)
    tok = m.tokenizer
    assert tok.convert_ids_to_tokens(phrase.masked[1].input_ids) == [
        "[CLS]", "there", "are", "[MASK]", "for", "you", ".", "[SEP]"]
    assert phrase.masked[1].masked_positions == [[3]]
    for w, p in zip(word.masked, phrase.masked):
        assert p.phrase_token_ids == w.phrase_token_ids  # the targets are the same
        assert p.input_ids.count(tok.mask_token_id) == len(p.phrase_token_ids)
        assert len(p.input_ids) == len(w.input_ids) - sum(len(t) - 1 for t in w.phrase_token_ids)
        assert all(p.input_ids[pos[0]] == tok.mask_token_id for pos in p.masked_positions)
    assert m.targets(phrase) == _make(tiny_bert).targets(word)


ALL_PHRASE = "Stocks fell sharply"
FAKE_SYN = {"stocks": ["shares"], "fell": ["dropped"], "sharply": ["steeply"], "options": ["choices"],
            "you": ["thou"]}


def _fake_sr(m):
    from sentlab.augment.eda import EDA

    m.eda = EDA("sr", alpha_sr=0.5, synonyms=lambda w: FAKE_SYN.get(w, []), stopwords=frozenset())
    return m


def test_eda_edit_phrases_edits_s_but_not_the_target(tiny_bert):
    sents = [ALL_PHRASE, SENTS[1]]  # every word of the first is inside its phrase
    extras = {"rake": [[_span(ALL_PHRASE, ALL_PHRASE, 9.0)], RAKE[1]], "chunks": [[], []]}
    assert get_method("paser").Params().eda_edit_phrases == "sr"  # the paper's reading
    on = _fake_sr(_make(tiny_bert, eda="rd", eda_edit_phrases="all"))
    on.train()
    v = on.prepare_views(sents, extras, [0, 1])
    assert v.s_texts[0] != ALL_PHRASE and sum(w in v.s_texts[0] for w in ("shares", "dropped", "steeply")) == 1
    assert "choices" in v.s_texts[1] and "thou" in v.s_texts[1]  # a phrase word and a free word of s
    assert v.t_texts == [ALL_PHRASE, SENTS[1].replace("you", "thou")]  # s̃: phrases protected
    assert (v.edits_s, v.edits_masked) == ([1, 2], [0, 1])
    assert [on.tokenizer.decode(t) for t in on.targets(v)] == ["stocks fell sharply [SEP]", "two options [SEP]"]
    out = on(Batch(sents, [0, 1], extras))  # the same draws (micro-batch 0)
    assert float(out["eda_edits_s"]) == 1.5 and float(out["eda_edits_masked"]) == 0.5
    off = _fake_sr(_make(tiny_bert, eda="rd", eda_edit_phrases="none"))
    v = off.prepare_views(sents, extras, [0, 1])
    assert v.s_texts == [ALL_PHRASE, SENTS[1].replace("you", "thou")]  # no phrase word changes
    assert (v.edits_s, v.edits_masked) == ([0, 1], [0, 1])
    assert [off.tokenizer.decode(t) for t in off.targets(v)] == ["stocks fell sharply [SEP]", "two options [SEP]"]
    with pytest.raises(SentlabError, match="eda_views: independent"):
        _make(tiny_bert, eda="rd", eda_views="shared", eda_edit_phrases="all")
    _make(tiny_bert, eda="rd", eda_views="shared")  # sr: RD never edits a phrase, the views can share it
    _make(tiny_bert, eda="rd", eda_views="shared", eda_edit_phrases="none")


def test_eda_edit_phrases_sr_lets_synonyms_not_deletions_touch_the_phrase(tiny_bert):
    """#34 item 8: with phrase editing on for every operation, RD deleted the target phrase's words from s
    (here all of them: alpha_rd = 1). The paper's reading (sr): SR may replace a phrase word, RD never deletes
    one."""
    from sentlab.augment.eda import EDA

    sents = [ALL_PHRASE + " today", SENTS[1]]
    extras = {"rake": [[_span(sents[0], ALL_PHRASE, 9.0)], RAKE[1]], "chunks": [[], []]}
    m = _make(tiny_bert, eda="rd")  # sr+rd with the fake synonyms (no WordNet needed)
    m.eda = EDA("sr+rd", alpha_sr=1.0, alpha_rd=1.0, synonyms=lambda w: FAKE_SYN.get(w, []), stopwords=frozenset())
    assert m.phrase_ops == ("sr",)
    v = m.prepare_views(sents, extras, [0, 1])
    assert v.s_texts[0] == "shares dropped steeply"  # the phrase (synonyms), "today" deleted
    assert v.s_texts[1] == "two choices ."  # "There are", "for you" deleted
    m = _make(tiny_bert, eda="rd", eda_edit_phrases="all")
    m.eda = EDA("sr+rd", synonyms=lambda w: FAKE_SYN.get(w, []), stopwords=frozenset())
    assert m.phrase_ops == ("sr", "rd")


def test_signal_shape_and_scaling():
    torch.manual_seed(0)
    e_s, e_t = torch.randn(3, 8), torch.randn(3, 8)
    mem = DecodingSignal(8, m=10.0, n=10.0)(e_s, e_t)
    assert mem.shape == (3, 4, 8)
    torch.testing.assert_close(mem[:, 0], e_s)
    torch.testing.assert_close(mem[:, 1], e_t)
    torch.testing.assert_close(mem[:, 2], 10 * (e_s - e_t).abs())
    torch.testing.assert_close(mem[:, 3], 10 * (e_s * e_t).abs())
    code = DecodingSignal(8, m=0.1, n=1.0, abs_diff=False, abs_prod=False, order="code")(e_s, e_t)
    torch.testing.assert_close(code[:, 0], e_s * e_t)
    torch.testing.assert_close(code[:, 1], 0.1 * (e_s - e_t))
    proj = DecodingSignal(8, 1.0, 1.0, project_masked=True)
    torch.testing.assert_close(proj(e_s, e_t)[:, 1], proj.proj(e_t))


def test_signal_abs_flags_are_separate(tiny_bert):
    torch.manual_seed(0)
    e_s, e_t = torch.randn(3, 8), torch.randn(3, 8)
    diff, prod = e_s - e_t, e_s * e_t
    assert (diff < 0).any() and (prod < 0).any()  # both signs occur, so |.| changes the memory
    for abs_diff in (True, False):
        for abs_prod in (True, False):
            mem = DecodingSignal(8, m=2.0, n=3.0, abs_diff=abs_diff, abs_prod=abs_prod)(e_s, e_t)
            torch.testing.assert_close(mem[:, 2], 2 * (diff.abs() if abs_diff else diff))
            torch.testing.assert_close(mem[:, 3], 3 * (prod.abs() if abs_prod else prod))
    assert get_method("paser").Params().signal_abs_diff and get_method("paser").Params().signal_abs_prod  # Eq. 2
    m = _make(tiny_bert, signal_abs_diff=False)
    assert (m.signal.abs_diff, m.signal.abs_prod) == (False, True)


def test_signal_norm_normalises_each_memory_vector_and_cancels_m_n():
    torch.manual_seed(0)
    e_s, e_t = 3 * torch.randn(5, 16), torch.randn(5, 16)
    a = DecodingSignal(16, m=10.0, n=10.0, norm=True)
    mem = a(e_s, e_t)
    assert mem.shape == (5, 4, 16)
    torch.testing.assert_close(mem.mean(-1), torch.zeros(5, 4), atol=1e-5, rtol=0)
    torch.testing.assert_close(mem.var(-1, unbiased=False), torch.ones(5, 4), atol=1e-3, rtol=0)
    b = DecodingSignal(16, m=0.1, n=1.0, norm=True)
    torch.testing.assert_close(b(e_s, e_t), mem, atol=2e-3, rtol=0)  # LayerNorm is scale-invariant: m, n cancel
    assert not torch.allclose(DecodingSignal(16, m=0.1, n=1.0)(e_s, e_t), DecodingSignal(16, 10.0, 10.0)(e_s, e_t))


def test_memory_norm_with_other_scales_warns(tiny_bert, caplog):
    with caplog.at_level("WARNING", logger="sentlab.methods.paser"):
        _make(tiny_bert, memory_norm=True)
        assert "change nothing" not in caplog.text
        _make(tiny_bert, memory_norm=True, m=0.1, n=1.0)
    assert "m = 0.1 and n = 1.0 change nothing" in caplog.text


@pytest.mark.parametrize("impl", ["torch", "bart"])
def test_decoder_and_encoder_receive_gradients(tiny_bert, impl):
    m = _make(tiny_bert, mlm_weight=0.0, decoder_impl=impl)
    m.train()
    out = m(Batch(SENTS, list(range(4)), EXTRAS))
    assert "loss_mlm" not in out
    out["loss"].backward()
    dec = [p.grad for p in m.decoder.parameters()]
    assert all(g is not None for g in dec) and sum(g.abs().sum() for g in dec) > 0
    assert m.lm_head.dense.weight.grad.abs().sum() > 0
    # the encoder's transformer layers are reached only through E_s / E_s̃, i.e. through the signal
    last = m.encoder.encoder.layer[-1].output.dense.weight.grad
    assert last is not None and last.abs().sum() > 0


def test_teacher_forcing_shifts_the_target_right(tiny_bert, monkeypatch):
    m = _make(tiny_bert)
    cls, pad = m.tokenizer.cls_token_id, m.tokenizer.pad_token_id
    memory = torch.randn(3, 4, 32)
    seen = {}

    def spy(mem, dec_in, dec_att):
        seen.update(mem=mem, dec_in=dec_in, dec_att=dec_att)
        return torch.zeros(*dec_in.shape, 7)

    monkeypatch.setattr(m, "decoder_logits", spy)
    _, labels = m.teacher_forcing(memory, m.decoder_batch([[5, 6, 7], [], [8, 9]]))  # an empty target drops its row
    assert seen["dec_in"].tolist() == [[cls, 5, 6], [cls, 8, pad]]  # [CLS] + target[:-1]
    assert seen["dec_att"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert labels.tolist() == [[5, 6, 7], [8, 9, -100]]  # labels = target
    torch.testing.assert_close(seen["mem"], memory[[0, 2]])


def test_greedy_decoding_applies_the_vocabulary_head_at_the_last_position_only(tiny_bert, monkeypatch):
    """Issue 15: a greedy step needs the last position's logits; the head over the vocabulary runs on B rows,
    not B x T (the reconstruction check took 90 s of the quick PaSeR stage), with the same logits."""
    from sentlab.methods._paser_reconstruction import greedy_decode

    m = _make(tiny_bert)
    m.eval()
    torch.manual_seed(0)
    memory = torch.randn(3, 4, 32)
    cls = m.tokenizer.cls_token_id
    ids = torch.tensor([[cls, 5, 6], [cls, 8, 0], [cls, 0, 0]])
    att = (ids != 0).long()
    last = att.sum(1) - 1
    with torch.no_grad():
        full = m.decoder_logits(memory, ids, att)
        at_last = m.decoder_logits(memory, ids, att, positions=last)
    torch.testing.assert_close(at_last, full[torch.arange(3), last])
    rows = []
    real_head = m.lm_head.forward
    monkeypatch.setattr(m.lm_head, "forward", lambda h, w: rows.append(tuple(h.shape)) or real_head(h, w))
    out = greedy_decode(m, memory, [1, 1, 2], max_new_tokens=4)
    assert len(out) == 3 and all(1 <= len(s) <= 4 for s in out)
    assert rows and all(r == (3, 32) for r in rows)  # one position per row at every step


@pytest.mark.parametrize("impl", ["torch", "bart"])
def test_decoder_is_causal_and_ignores_padding(tiny_bert, impl):
    m = _make(tiny_bert, decoder_impl=impl)
    m.eval()
    torch.manual_seed(0)
    memory = torch.randn(1, 4, 32)
    ids = m.tokenizer.convert_tokens_to_ids(["two", "options", "for", "you"])
    with torch.no_grad():
        a, _ = m.teacher_forcing(memory, m.decoder_batch([ids]))
        other = ids[:2] + [m.tokenizer.convert_tokens_to_ids("train")] + ids[3:]
        b, _ = m.teacher_forcing(memory, m.decoder_batch([other]))
        # changing target[2] changes decoder input 3: logits 0..2 stay, logit 3 moves
        torch.testing.assert_close(a[0, :3], b[0, :3])
        assert (a[0, 3] - b[0, 3]).abs().max() > 1e-3
        padded, _ = m.teacher_forcing(memory.expand(2, 4, 32), m.decoder_batch([ids[:2], ids]))  # row 0 padded
        torch.testing.assert_close(padded[0, :2], a[0, :2], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("impl", ["torch", "bart"])
def test_decoder_inputs_are_the_encoders_embeddings_or_its_word_embeddings(tiny_bert, impl):
    """decoder_embeddings: encoder feeds the encoder's whole embedding module (the code); word feeds its word
    embeddings, to which PyTorch's decoder adds its own positions and LayerNorm and BART's decoder nothing (it adds
    its positions and LayerNorm inside BartDecoder)."""
    ids = torch.tensor([[101, 2048, 7047, 102]])
    whole = _make(tiny_bert, decoder_impl=impl).eval()
    with torch.no_grad():
        torch.testing.assert_close(whole.decoder.embed(whole.encoder, ids), whole.encoder.embeddings(input_ids=ids))
        words = _make(tiny_bert, decoder_impl=impl, decoder_embeddings="word").eval()
        raw = words.encoder.get_input_embeddings()(ids)
        got = words.decoder.embed(words.encoder, ids)
        if impl == "bart":
            torch.testing.assert_close(got, raw)
        else:
            dec = words.decoder
            torch.testing.assert_close(got, dec.emb_norm(raw + dec.positions(torch.arange(4).unsqueeze(0))))
            assert not torch.allclose(got, raw)


def test_the_bart_decoder_is_the_codes_bart_decoder_over_the_encoders_embeddings(tiny_bert, tmp_path):
    """decoder_impl: bart builds transformers' BartDecoder with the code's BartConfig (cl_init: decoder_layers,
    decoder_attention_heads, decoder_ffn_dim = d_model = the encoder's width, GELU, no attention or activation
    dropout), without a token embedding of its own (the encoder's embedding module feeds it), seeded, and its
    weights go through paser_heads.safetensors like PyTorch's decoder."""
    from transformers.models.bart.modeling_bart import BartDecoder

    from sentlab.methods._paser_decoder import load_heads

    assert get_method("paser").Params().decoder_impl == "bart"  # the default (benchmarks/RESULTS.md: not worse)
    m = _make(tiny_bert, decoder_impl="bart", decoder_layers=6, decoder_heads=16)
    cfg = m.decoder.bart.config
    assert isinstance(m.decoder.bart, BartDecoder) and len(m.decoder.bart.layers) == 6
    assert (cfg.d_model, cfg.decoder_attention_heads, cfg.decoder_ffn_dim, cfg.activation_function) == (32, 16, 32,
                                                                                                       "gelu")
    assert (cfg.dropout, cfg.attention_dropout, cfg.activation_dropout) == (0.1, 0.0, 0.0)
    vocab = m.encoder.get_input_embeddings().weight.size(0)
    assert m.decoder.bart.embed_tokens is None and all(p.size(0) != vocab for p in m.decoder.parameters())
    again = _make(tiny_bert, decoder_impl="bart", decoder_layers=6, decoder_heads=16)
    assert all(torch.equal(v, again.decoder.state_dict()[k]) for k, v in m.decoder.state_dict().items())
    other = get_method("paser")(m.encoder, m.tokenizer, m.params, seed=2)
    assert not torch.equal(other.decoder.bart.layers[0].fc1.weight, m.decoder.bart.layers[0].fc1.weight)
    save_heads(m, tmp_path)
    load_heads(other, tmp_path)
    assert all(torch.equal(v, other.decoder.state_dict()[k]) for k, v in m.decoder.state_dict().items())
    torch_decoder = _make(tiny_bert, decoder_impl="torch", decoder_layers=6, decoder_heads=16)
    with pytest.raises(SentlabError, match="decoder_impl"):
        load_heads(torch_decoder, tmp_path)


def test_gen_reduction_mean_and_sum_pin_values(tiny_bert, monkeypatch):
    import math

    assert get_method("paser").Params().gen_reduction == "mean"
    # the target tokens of targets [1, 2, 3] and [0] (row 1's two padding positions are never scored)
    logits = torch.zeros(4, 4)  # uniform: -log p = log 4
    logits[3] = torch.tensor([math.log(3), 0.0, 0.0, 0.0])  # p(label 0) = 3 / 6: -log p = log 2
    labels = torch.tensor([1, 2, 3, 0])
    got = {}
    for red in ("mean", "sum"):
        m = _make(tiny_bert, gen_reduction=red)
        dec = m.decoder_batch([[1, 2, 3], [0]])
        assert dec["target_index"].tolist() == [0, 1, 2, 3] and dec["target_row"].tolist() == [0, 0, 0, 1]
        assert dec["target_labels"].tolist() == labels.tolist()
        monkeypatch.setattr(m, "target_logits", lambda mem, t: (logits, labels))
        got[red] = float(m.generative_loss(torch.zeros(2, 4, 32), dec)[0])
    assert got["mean"] == pytest.approx(7 / 4 * math.log(2), rel=1e-6)  # (3 log 4 + log 2) / 4 tokens
    assert got["sum"] == pytest.approx(7 / 2 * math.log(2), rel=1e-6)  # (3 log 4 + log 2) / 2 sentences


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_generative_loss_scores_the_target_tokens_only_with_the_full_grid_values(tiny_bert, monkeypatch, reduction):
    """Issue 15: the vocabulary head and the cross-entropy run on the N target tokens, not on the B x T grid
    with its padding (a third of a quick PaSeR step): same loss, accuracy and gradients as the full grid."""
    m = _make(tiny_bert, gen_reduction=reduction)
    m.eval()  # no dropout draw: the two computations see the same network
    torch.manual_seed(0)
    memory = torch.randn(3, 4, 32, requires_grad=True)
    dec = m.decoder_batch([[5, 6, 7, 8, 9], [], [10, 11], [12]])  # 3 decoder rows, 8 target tokens of 15 cells
    rows = []
    real_head = m.lm_head.forward
    monkeypatch.setattr(m.lm_head, "forward", lambda h, w: rows.append(tuple(h.shape)) or real_head(h, w))
    loss, acc = m.generative_loss(memory.repeat(2, 1, 1)[:4], dec)
    assert rows == [(8, 32)]
    loss.backward()
    got_grad = [p.grad.clone() for p in (memory, m.lm_head.dense.weight)]
    m.zero_grad()
    memory.grad = None
    # the full grid, as Eq. 3 reads: cross-entropy over (B, T) with the padding ignored
    logits, labels = m.teacher_forcing(memory.repeat(2, 1, 1)[:4], dec)
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100, reduction="none")
    valid = labels != -100
    want = nll.sum() / valid.sum() if reduction == "mean" else nll.sum(1).mean()
    want_acc = ((logits.argmax(-1) == labels) & valid).sum() / valid.sum()
    torch.testing.assert_close(loss, want)
    torch.testing.assert_close(acc, want_acc.float())
    want.backward()
    for g, p in zip(got_grad, (memory, m.lm_head.dense.weight)):
        torch.testing.assert_close(g, p.grad, rtol=1e-5, atol=1e-7)


def test_lm_head_and_losses_are_fp32_under_bf16_autocast(tiny_bert):
    m = _make(tiny_bert)
    m.eval()
    torch.manual_seed(0)
    h = torch.randn(5, 32)
    w = m.encoder.get_input_embeddings().weight
    want = m.lm_head(h, w)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = m.lm_head(h, w)
        logits, _ = m.teacher_forcing(torch.randn(1, 4, 32), m.decoder_batch([[5, 6, 7]]))
        loss, _ = m.generative_loss(torch.randn(1, 4, 32), m.decoder_batch([[5, 6, 7]]))
        enc = m.tokenize(SENTS, max_length=32)
        torch.manual_seed(1)
        mlm = m.mlm_loss(enc["input_ids"], enc["attention_mask"])
    assert got.dtype == logits.dtype == loss.dtype == mlm.dtype == torch.float32
    torch.testing.assert_close(got, want, atol=0, rtol=0)


def test_mlm_mask_is_15_80_10_10_and_never_masks_special_tokens(tok):
    from sentlab.methods._paser_decoder import mlm_mask

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 20000, (200, 500), generator=g)
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    special[::3, 250:] = True
    inputs, labels = mlm_mask(ids, special, tok, 0.15, generator=g)
    chosen = labels != -100
    assert not chosen[special].any() and torch.equal(inputs[special], ids[special])
    assert torch.equal(labels[chosen], ids[chosen]) and torch.equal(inputs[~chosen], ids[~chosen])
    assert abs(chosen.sum().item() / (~special).sum().item() - 0.15) < 0.005  # ~66k tokens: 5 sd = 0.007
    n = chosen.sum().item()
    masked = (inputs == tok.mask_token_id) & chosen
    kept = (inputs == ids) & chosen
    rand = chosen & ~masked & ~kept
    for part, share in ((masked, 0.8), (rand, 0.1), (kept, 0.1)):  # ~10k targets: sd <= 0.004
        assert abs(part.sum().item() / n - share) < 0.015


def test_mlm_loss_marks_special_and_padding_tokens(tiny_bert, monkeypatch):
    import sentlab.methods.paser as paser_mod

    m = _make(tiny_bert)
    seen = {}
    real = paser_mod.mlm_mask

    def spy(input_ids, special, tokenizer, prob):
        seen.update(ids=input_ids, special=special, prob=prob)
        return real(input_ids, special, tokenizer, prob)

    monkeypatch.setattr(paser_mod, "mlm_mask", spy)
    enc = m.tokenize(SENTS[:2], max_length=32)
    m.mlm_loss(enc["input_ids"], enc["attention_mask"])
    ids = seen["ids"]
    tok = m.tokenizer
    want = (ids == tok.cls_token_id) | (ids == tok.sep_token_id) | (enc["attention_mask"] == 0)
    assert torch.equal(seen["special"], want) and seen["prob"] == 0.15
    assert want[1].sum() > 2  # the shorter sentence is padded: padding counts as special


def test_pooling_picks_the_right_hidden_states(tiny_bert):
    m = _make(tiny_bert)
    m.eval()
    enc = m.tokenize(SENTS[:2], max_length=32)
    mask = enc["attention_mask"]
    assert (mask == 0).any()  # padded batch
    with torch.no_grad():
        hs = m.encoder(**enc, output_hidden_states=True).hidden_states  # embeddings, layer 1, layer 2
        w = mask.unsqueeze(-1).float()

        def mean(x):
            return (x * w).sum(1) / w.sum(1)

        want = {"cls": hs[2][:, 0], "mean": mean(hs[2]), "top2_mean": (mean(hs[2]) + mean(hs[1])) / 2,
                "first_last": (mean(hs[0]) + mean(hs[2])) / 2}
        for pooling, expected in want.items():
            m.params.pooling = pooling
            torch.testing.assert_close(m.embed(enc["input_ids"], mask), expected)
            one = m.tokenize(SENTS[1:2], max_length=32)  # padding invariance: alone = in the padded batch
            torch.testing.assert_close(m.embed(one["input_ids"], one["attention_mask"])[0], expected[1],
                                       atol=1e-5, rtol=1e-5)
    vals = list(want.values())
    assert all(not torch.allclose(a, b) for i, a in enumerate(vals) for b in vals[i + 1:])


def test_inference_uses_no_decoder(tiny_bert):
    m = _make(tiny_bert)
    m.eval()
    enc = m.sentence_encoder()
    assert enc.pooling == "cls" and m.export_info()["pooling"] == "cls"
    got = enc.encode(SENTS, batch_size=2)
    with torch.no_grad():
        t = m.tokenizer(SENTS, padding=True, return_tensors="pt")
        want = m.encoder(**t).last_hidden_state[:, 0].numpy()
    np.testing.assert_allclose(got, want, atol=1e-5)
    with torch.no_grad():  # scrambling every training-only module changes nothing at inference
        for mod in (m.decoder, m.lm_head, m.signal):
            for p in mod.parameters():
                p.add_(torch.randn_like(p))
    np.testing.assert_allclose(m.sentence_encoder().encode(SENTS), want, atol=1e-5)


def test_top2_mean_pooling(tiny_bert):
    m = _make(tiny_bert, pooling="top2_mean")
    m.eval()
    got = m.sentence_encoder().encode(SENTS[:2])
    with torch.no_grad():
        t = m.tokenizer(SENTS[:2], padding=True, return_tensors="pt")
        hs = m.encoder(**t, output_hidden_states=True).hidden_states
        mask = t["attention_mask"].unsqueeze(-1).float()
        want = (((hs[-1] * mask).sum(1) + (hs[-2] * mask).sum(1)) / mask.sum(1) / 2).numpy()
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_new_modules_train_at_head_lr(tiny_bert):
    m = _make(tiny_bert, head_lr=1e-3, lr=3e-5)
    opt = m.configure_optimizers()
    by_lr = {g["lr"]: {id(p) for p in g["params"]} for g in opt.param_groups}
    assert set(by_lr) == {3e-5, 1e-3}
    assert {id(p) for p in m.encoder.parameters()} <= by_lr[3e-5]          # shared word embeddings included
    assert {id(p) for p in m.decoder.parameters() if p.requires_grad} <= by_lr[1e-3]
    assert not by_lr[3e-5] & by_lr[1e-3]
    one = _make(tiny_bert, lr=3e-5).configure_optimizers()
    assert {g["lr"] for g in one.param_groups} == {3e-5}                   # head_lr None: the paper's one rate


def _train(m, steps, lr):
    opt = torch.optim.AdamW(m.trainable_parameters(), lr=lr)
    batch = Batch(SENTS, list(range(4)), EXTRAS)
    m.train()
    hist = []
    for _ in range(steps):
        out = m(batch)
        opt.zero_grad()
        out["loss"].backward()
        opt.step()
        hist.append({k: float(v.detach()) for k, v in out.items()})
    return hist


def test_loss_falls(tiny_bert):
    torch.manual_seed(0)
    hist = _train(_make(tiny_bert), 40, 3e-3)  # full loss: MLM + generative
    for key in ("loss", "loss_gen", "loss_mlm"):
        first, last = np.mean([h[key] for h in hist[:5]]), np.mean([h[key] for h in hist[-5:]])
        assert last < 0.6 * first, (key, first, last)


FIT_SENTS = ["The cat sat on the warm mat.", "Stocks fell sharply on Monday."]
FIT_EXTRAS = {"rake": [[_span(FIT_SENTS[0], "warm mat", 4.0), _span(FIT_SENTS[0], "cat sat", 4.0)],
                       [_span(FIT_SENTS[1], "Stocks fell sharply", 9.0)]], "chunks": [[], []]}


def test_decoder_beats_frequency_baseline(tiny_bert):
    torch.manual_seed(0)
    m = _make(tiny_bert, mlm_weight=0.0, m=1.0, n=1.0, decoder_dropout=0.0)
    hist = _train(m, 100, 3e-3)
    assert hist[-1]["loss_gen"] < 0.2 * hist[0]["loss_gen"]
    rep = reconstruction_report(m, SENTS, EXTRAS, FIT_SENTS, FIT_EXTRAS, n_examples=2)
    assert rep["phrases"] == 7 and len(rep["examples"]) == 2
    assert set(rep["examples"][0]) == {"sentence", "masked", "masked_phrases", "generated", "exact"}
    assert rep["examples"][1]["masked"] == "There are _ _ for you."
    assert rep["baseline"]["most_frequent_phrase"]["phrase"] in ("warm mat", "cat sat", "stocks fell sharply")
    assert rep["teacher_forced"]["token_accuracy"] > rep["baseline"]["bigram_teacher_forced"]["token_accuracy"]
    assert rep["greedy"]["token_accuracy"] > rep["baseline"]["positional_mode"]["token_accuracy"]
    assert all(rep["beats_baseline"].values())
    assert m.training  # restored


def test_missing_extras_and_head_and_wordnet_errors(tiny_bert, monkeypatch, tmp_path):
    m = _make(tiny_bert)
    with pytest.raises(SentlabError, match="rake"):
        m(Batch(SENTS, list(range(4)), {}))
    with pytest.raises(SentlabError, match="no MLM head"):
        _make(tiny_bert, lm_head="pretrained")
    with pytest.raises(SentlabError, match="decoder_heads"):
        _make(tiny_bert, decoder_heads=5)
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    with pytest.raises(SentlabError, match=r"nltk\.downloader wordnet"):
        _make(tiny_bert, eda="sr")


@pytest.mark.parametrize("names,fmt", [("gamma_beta", "safetensors"), ("weight_bias", "safetensors"),
                                       ("gamma_beta", "bin")])
def test_pretrained_head_is_loaded_from_a_hub_shaped_checkpoint(tmp_path, names, fmt):
    """#34 defect 1: the original bert-base-uncased file names the head's LayerNorm gamma/beta; a lookup of
    ``…LayerNorm.weight`` by key name missed it and PaSeR trained a fresh head. Loaded through transformers,
    the head is the file's, in every layout; init says so."""
    from safetensors.torch import load_file

    from sentlab.assets.resolve import load_model
    from sentlab.backbones.standin import write_standin

    folder = write_standin("bert-base-uncased", tmp_path / "bbu", layer_norm_names=names, fmt=fmt, config={
        "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 37})
    sd = (torch.load(folder / "pytorch_model.bin", weights_only=True) if fmt == "bin"
          else load_file(str(folder / "model.safetensors")))
    ln = "gamma" if names == "gamma_beta" else "weight"
    enc, tok = load_model(str(folder))
    m = _make((enc, tok), lm_head="pretrained")
    assert m.lm_head_source == "pretrained"
    assert torch.equal(m.lm_head.norm.weight, sd[f"cls.predictions.transform.LayerNorm.{ln}"])
    assert torch.equal(m.lm_head.dense.weight, sd["cls.predictions.transform.dense.weight"])
    assert torch.equal(m.lm_head.bias, sd["cls.predictions.bias"])
    assert m.init_sources() == {"encoder": "checkpoint", "decoder": "random", "lm_head": "checkpoint"}


def test_seeded_views_are_reproducible(tiny_bert):
    a = _make(tiny_bert, eda="rs", eda_alpha_rs=0.5).prepare_views(SENTS, EXTRAS, [0, 1, 2, 3])
    b = _make(tiny_bert, eda="rs", eda_alpha_rs=0.5).prepare_views(SENTS, EXTRAS, [0, 1, 2, 3])
    assert a.s_texts == b.s_texts and a.t_texts == b.t_texts


def test_prepare_draws_from_seed_and_micro_batch_only(tiny_bert):
    """prepare (DataLoader workers) touches no global RNG; its EDA draws are a function of (seed, Batch.draw, row)."""
    import random

    m = _make(tiny_bert, eda="rd", eda_alpha_rd=0.5)
    m.train()

    def views(draw):
        return m.prepare(Batch(SENTS, list(range(4)), EXTRAS, draw=draw, seed=1)).features["views"]

    torch.manual_seed(0)
    random.seed(0)
    states = torch.get_rng_state(), random.getstate()
    a, b, other = views(3), views(3), views(4)
    assert torch.equal(torch.get_rng_state(), states[0]) and random.getstate() == states[1]
    assert a.s_texts == b.s_texts and a.t_texts == b.t_texts  # a resumed run redraws micro-batch 3 alike
    assert (a.s_texts, a.t_texts) != (other.s_texts, other.t_texts)
    f = m.prepare(Batch(SENTS, list(range(4)), EXTRAS, draw=3)).features
    assert all(t.device.type == "cpu" for k in ("s", "s_masked", "target") for t in f[k].values())
    torch.testing.assert_close(f["target"]["labels"][0, :3], torch.tensor(m.targets(a)[0][:3]))


def test_export_artifacts_writes_heads_and_heldout_check(tiny_bert, tmp_path):
    import json

    m = _make(tiny_bert, recon_heldout=500, recon_fit=20)
    train = m.split_heldout(_corpus(40))
    m.train()
    m(train.batch(list(range(8))))
    m.export_artifacts(tmp_path, tmp_path)
    rep = json.loads((tmp_path / "reconstruction.json").read_text())
    assert rep["heldout_corpus"] == "sts_unlabeled (held out of training)" and rep["sentences"] == 4
    assert rep["baseline"]["fit_on"] == "20 training-corpus sentences" and m.training
    assert (tmp_path / "paser_heads.safetensors").is_file()
    off = _make(tiny_bert, recon_heldout=0)
    off.export_artifacts(tmp_path / "off", tmp_path)
    assert sorted(p.name for p in (tmp_path / "off").iterdir()) == ["paser_heads.safetensors"]


NLI = [("A man is playing a large flute.", "A man plays music.", "Nobody is playing an instrument."),
       ("There are two options for you.", "You have a choice.", "You have no choice at all."),
       ("At least 89 dead in china earthquakes.", "People died in China.", "Nobody was hurt in China.")]


def test_nli_loader_roundtrip(tmp_path):
    from sentlab.data.nli import load_nli, read_nli
    from sentlab.errors import DataFormatError

    src = tmp_path / "nli_for_simcse.csv"
    src.write_text("sent0,sent1,hard_neg\n" + "".join(f'"{a}","{b}","{c}"\n' for a, b, c in NLI)
                   + '"only anchor",,\n', encoding="utf-8")
    table = load_nli(tmp_path / "corpus" / "nli.parquet", source=src)
    assert table.column_names == ["id", "text", "positive", "hard_negative"] and table.num_rows == 3
    back = read_nli(tmp_path / "corpus" / "nli.parquet")
    assert back.column("positive").to_pylist()[1] == "You have a choice."
    bad = tmp_path / "bad.csv"
    bad.write_text("premise,hypothesis\nx,y\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="sent0"):
        load_nli(tmp_path / "x.parquet", source=bad)


def test_paser_sup_contrastive_plus_generative(tiny_bert, tmp_path):
    anchors = [a for a, _, _ in NLI]
    rake = [RAKE[3], RAKE[1], RAKE[2]]
    extras = {"rake": rake, "chunks": [[], [], []], "positive": [b for _, b, _ in NLI],
              "hard_negative": [c for _, _, c in NLI]}
    m = _make(tiny_bert, "paser_sup", alpha=0.5, lm_head="fresh")
    m.train()
    out = m(Batch(anchors, [0, 1, 2], extras))
    assert torch.isclose(out["loss"], out["loss_con"] + 0.5 * out["loss_gen"])
    assert (float(out["eda_edits_s"]), float(out["eda_edits_masked"])) == (0.0, 0.0)  # logged as paser's; eda: none
    out["loss"].backward()
    assert m.mlp.dense.weight.grad.abs().sum() > 0 and m.decoder.bart.layers[0].fc1.weight.grad is not None
    # the contrastive term is SimCSE-sup: a perfect anchor=positive embedding drives it to ~0
    h = torch.eye(9)[[0, 1, 2, 0, 1, 2, 3, 4, 5]] * 5
    m.mlp = None
    assert float(m.contrastive_loss(h, 3)) < 1e-3
    with pytest.raises(SentlabError, match="positive"):
        m(Batch(anchors, [0, 1, 2], {"rake": rake, "chunks": [[], [], []]}))


@pytest.mark.parametrize("output", ["tied", "copy"])
def test_heads_roundtrip_for_paser_sup(tiny_bert, tmp_path, output):
    enc, tok = tiny_bert
    m = _make(tiny_bert, lm_head_output=output)
    if output == "copy":
        with torch.no_grad():
            m.lm_head.decoder.weight.add_(1.0)   # trained apart from the word embeddings
    path = save_heads(m, tmp_path)
    assert path.name == "paser_heads.safetensors"
    enc.config._name_or_path = str(tmp_path)
    sup = _make((enc, tok), "paser_sup", decoder_init="paser", lm_head_output=output)
    if output == "copy":
        assert torch.equal(sup.lm_head.decoder.weight, m.lm_head.decoder.weight)
        fresh = _make((enc, tok), "paser_sup", lm_head="fresh", lm_head_output="copy")
        assert torch.equal(fresh.lm_head.decoder.weight, enc.get_input_embeddings().weight)
    for mod in ("decoder", "lm_head"):
        for (k, a), b in zip(getattr(m, mod).state_dict().items(), getattr(sup, mod).state_dict().values()):
            torch.testing.assert_close(a, b)
    assert sup.init_sources() == {"encoder": "given", "decoder": "paser", "lm_head": "paser", "mlp": "random"}
    enc.config._name_or_path = str(tmp_path / "nothing")
    with pytest.raises(SentlabError, match="paser_heads"):
        _make((enc, tok), "paser_sup", decoder_init="paser")


def _corpus(n=40):
    from sentlab.train.data import Corpus

    return Corpus(ids=np.arange(100, 100 + n), texts=[f"{SENTS[i % 4]} {i}" for i in range(n)],
                  extras={"rake": [RAKE[i % 4] for i in range(n)], "chunks": [CHUNKS[i % 4] for i in range(n)]},
                  fingerprint="f")


def test_split_heldout_keeps_rows_out_of_training(tiny_bert):
    m = _make(tiny_bert, recon_heldout=500, recon_fit=20)
    train = m.split_heldout(_corpus(40))
    held, fit = m.recon_sets
    assert len(held) == 4 and len(train) == 36  # capped at a tenth of the corpus
    assert not set(held.ids.tolist()) & set(train.ids.tolist())
    assert set(fit.ids.tolist()) <= set(train.ids.tolist()) and len(fit) == 20
    assert held.extras["rake"][0] == RAKE[(int(held.ids[0]) - 100) % 4]  # extras stay aligned with their rows
    again = _make(tiny_bert, recon_heldout=500, recon_fit=20)
    again.split_heldout(_corpus(40))
    assert again.recon_sets.heldout.ids.tolist() == held.ids.tolist()  # seeded: a resumed run splits alike
    dup = _corpus(40)
    dup.texts[int(np.setdiff1d(np.arange(40), held.ids - 100)[0])] = held.texts[0]  # a copy of a held-out sentence
    assert len(_make(tiny_bert, recon_heldout=500).split_heldout(dup)) == 35  # … is not trained on either
    other = _make(tiny_bert, recon_heldout_from="other")
    assert len(other.split_heldout(_corpus(40))) == 40 and other.recon_sets is None


def test_train_method_honours_own_steps_and_writes_heldout_check(tok, tmp_path, monkeypatch):
    """train_method: methods.paser.max_steps overrides train.max_steps; the check runs on held-out corpus rows;
    MLflow gets the loss parts (train.loss_gen …) at each dev evaluation."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from sentlab.config import Params
    from sentlab.train.run import train_method
    from tiny import tiny_bert as make_bert

    c = _corpus(40)
    (tmp_path / "data" / "corpus").mkdir(parents=True)
    (tmp_path / "data" / "annotations" / "sts_unlabeled").mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array(c.ids, pa.int64()), "text": c.texts}),
                   tmp_path / "data" / "corpus" / "sts_unlabeled.parquet")
    pq.write_table(pa.table({"id": pa.array(c.ids, pa.int64()), "text": c.texts, "rake": c.extras["rake"],
                             "chunks": c.extras["chunks"]}),
                   tmp_path / "data" / "annotations" / "sts_unlabeled" / "part-00000.parquet")
    params = Params(train=TrainParams(batch_size=8, max_steps=40, eval_every=2, lr=1e-3, max_length=32),
                    methods={"paser": {"eda": "none", "decoder_heads": 2, "decoder_layers": 1, "top_k": 2,
                                       "max_steps": 3, "recon_heldout": 4, "recon_fit": 8, "memory_norm": True}})
    seen = []

    def dev_eval(enc):
        return {"stsb_dev": 0.0, "alignment": 0.0, "uniformity": 0.0}

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    info = train_method(params, "paser", root=tmp_path, dev_eval=dev_eval, tracking=True, progress=False,
                        encoder_factory=lambda: (make_bert(tok, 0), tok), callbacks=[lambda s, r: seen.append(s)])
    assert info["steps"] == 3 and seen == [1, 2, 3]
    rep = json.loads((tmp_path / "models" / "paser" / "reconstruction.json").read_text())
    assert rep["heldout_corpus"] == "sts_unlabeled (held out of training)" and rep["sentences"] == 4
    assert rep["baseline"]["fit_on"] == "8 training-corpus sentences"
    import mlflow

    client = mlflow.tracking.MlflowClient()
    run = client.search_runs([client.get_experiment_by_name("sentlab").experiment_id])[0]
    assert run.data.params["method.max_steps"] == "3" and run.data.params["method.memory_norm"] == "True"
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "train.loss_gen")) == [2, 3]
    assert {"train.loss_mlm", "train.gen_token_acc", "train.eda_edits_s", "train.eda_edits_masked"} <= \
        set(run.data.metrics)


def test_grad_clip_global_is_one_norm_over_every_group():
    """#34 item 9: the PaSeR code clips one global norm (HF Trainer); the loop clipped each group on its own.
    grad_clip is a param: global (the code, the default and the paper profile) or per_group (quick)."""
    from sentlab.config import load_params
    from sentlab.train.loop import clip_gradients
    from sentlab.train.run import method_params

    def grads(mode):
        a, b = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))
        a.grad, b.grad = torch.tensor([3.0, 4.0]), torch.tensor([0.0, 0.5])  # norms 5 and 0.5
        clip_gradients(torch.optim.SGD([{"params": [a]}, {"params": [b]}], lr=1.0), 1.0, mode)
        return a.grad, b.grad

    a, b = grads("per_group")
    torch.testing.assert_close(a, torch.tensor([0.6, 0.8]))
    torch.testing.assert_close(b, torch.tensor([0.0, 0.5]))  # under the norm on its own: untouched
    a, b = grads("global")
    scale = 1.0 / (25.25 ** 0.5)
    torch.testing.assert_close(a, torch.tensor([3.0, 4.0]) * scale)
    torch.testing.assert_close(b, torch.tensor([0.0, 0.5]) * scale)
    with pytest.raises(SentlabError, match="per_group, global"):
        grads("both")
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    assert get_method("paser").Params().grad_clip == "global"
    assert method_params(load_params(repo / "params.yaml", profile="quick"), "paser").grad_clip == "per_group"
    assert method_params(load_params(repo / "params.yaml", profile="paper"), "paser").grad_clip == "global"


def test_paper_profile_paser_states_its_choices_and_trains_on_every_sts_sentence(tiny_bert):
    """#34 item 9, as #53 settles it: the paper profile runs the released code's L_generative (the mean over the
    batch's target tokens; Eq. 3's per-sentence sum is gen_reduction: sum); no 500 STS sentences held out of
    training there (the reconstruction check reads the other corpus); the MLM head pretrained."""
    from pathlib import Path

    from sentlab.config import load_params
    from sentlab.train.run import method_params

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml", profile="paper")
    for mid in ("paser", "paser_sup"):
        p = method_params(params, mid)
        assert (p.gen_reduction, p.recon_heldout_from) == ("mean", "other"), mid
    p = method_params(params, "paser")
    assert (p.lm_head, p.chunk_union, p.eda_edit_phrases) == ("pretrained", "one_each", "sr")
    enc, tok = tiny_bert
    m = get_method("paser")(enc, tok, p.model_copy(update={"eda": "none", "decoder_heads": 2, "decoder_layers": 1,
                                                           "lm_head": "fresh"}).resolved(TrainParams()), seed=1)
    corpus = _corpus(6000)
    assert len(m.split_heldout(corpus)) == 6000 and m.recon_sets is None
    quick = method_params(load_params(Path(__file__).resolve().parents[1] / "params.yaml", profile="quick"), "paser")
    assert len(_make(tiny_bert, recon_heldout=quick.recon_heldout).split_heldout(corpus)) == 5500  # quick: 500 out


def test_the_reconstruction_check_imports_no_method_module():
    """No import cycle: methods.paser imports the check (sentlab.methods._paser_reconstruction), which imports no
    method module (beside it in methods/, only the package itself is loaded): it asks the method for its inputs
    (``check_inputs``) and decoding step (``next_token_logits``)."""
    import subprocess
    import sys
    from pathlib import Path

    import sentlab

    code = ("import sys, sentlab.methods._paser_reconstruction; "
            "print(sorted(m for m in sys.modules if m.startswith('sentlab.methods')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(Path(sentlab.__file__).parents[1]), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "['sentlab.methods', 'sentlab.methods._paser_reconstruction']"


def test_lm_head_output_copy_is_the_heads_own_matrix_from_the_checkpoint(tmp_path):
    """The released code's lm_head is never tied to the word embeddings (transformers ties nothing in BertForCL):
    its output matrix starts as the checkpoint's and trains apart (chengzhipanpan/PaSeR@877ac00, train.py)."""
    from sentlab.assets.resolve import load_model
    from sentlab.backbones.standin import write_standin

    folder = write_standin("bert-base-uncased", tmp_path / "bbu", config={
        "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 37})
    enc, tok = load_model(str(folder))
    words = enc.get_input_embeddings().weight
    tied = _make((enc, tok), lm_head="pretrained")
    assert tied.lm_head.decoder is None   # the default: the word embeddings
    m = _make((enc, tok), lm_head="pretrained", lm_head_output="copy")
    assert m.lm_head.decoder.weight is not words and torch.equal(m.lm_head.decoder.weight, words)
    out = m(Batch(SENTS, list(range(4)), EXTRAS))
    out["loss"].backward()
    assert m.lm_head.decoder.weight.grad.abs().sum() > 0
    # the head's gradient stays with the head: the word embeddings get the encoder's and decoder inputs' only
    h = torch.randn(3, 32)
    with torch.no_grad():
        words.add_(1.0)
    assert torch.equal(m.lm_head(h, words), m.lm_head(h, words - 1.0))
    assert not torch.equal(tied.lm_head(h, words), tied.lm_head(h, words - 1.0))


def test_lm_head_output_copy_of_a_fresh_head_starts_as_the_word_embeddings(tiny_bert):
    m = _make(tiny_bert, lm_head="fresh", lm_head_output="copy")
    words = m.encoder.get_input_embeddings().weight
    assert m.lm_head.decoder.weight is not words and torch.equal(m.lm_head.decoder.weight, words)


def test_gen_skip_long_drops_the_target_of_a_sentence_at_max_length(tiny_bert):
    """The code's collator keeps a sentence's decoder target only when both its views are under 32 tokens."""
    long = "The large flute is " + " ".join(["very"] * 40) + " long."   # its phrase survives truncation
    sents, extras = [SENTS[3], long], {"rake": [RAKE[3], [_span(long, "large flute")]], "chunks": [[], []]}
    for skip, rows in ((False, [0, 1]), (True, [0])):
        m = _make(tiny_bert, gen_skip_long=skip)
        m.train()
        batch = m.prepare(Batch(sents, [0, 1], extras))
        assert batch.features["target"]["rows"].tolist() == rows
    m = _make(tiny_bert, gen_skip_long=True)
    m.eval()   # the reconstruction check keeps every target
    assert m.prepare(Batch(sents, [0, 1], extras)).features["target"]["rows"].tolist() == [0, 1]


def test_paper_profile_is_the_released_codes_setting():
    """profiles/paper.yaml's paser line = chengzhipanpan/PaSeR's cl_forward (benchmarks/released/paser.py agrees with
    it there): signed signal over P·E_s̃ in the code's order, L_gen's mean over tokens, the head's own matrix, the
    collator's long-sentence rule; paser_sup reads paser's head, so it has the same matrix."""
    from pathlib import Path

    from sentlab.config.profile_files import profile_values

    values = profile_values("paper", Path(__file__).resolve().parents[1] / "profiles")
    p = values["methods"]["paser"]
    want = {"signal_abs_diff": False, "signal_abs_prod": False, "project_masked": True, "memory_order": "code",
            "gen_reduction": "mean", "lm_head": "pretrained", "lm_head_output": "copy", "gen_skip_long": True,
            "decoder_layers": 6, "memory_norm": False}
    assert {k: p.get(k) for k in want} == want
    sup = values["methods_from"]["paser_sup"]
    assert sup.get("lm_head_output") == "copy" and sup.get("gen_reduction") == "mean"


def test_project_masked_is_initialised_as_the_codes_projection():
    """The code's ``projection`` is made in cl_init before ``init_weights``: BERT's N(0, 0.02), zero bias (not
    nn.Linear's Kaiming-uniform weights and uniform bias)."""
    torch.manual_seed(0)
    sig = DecodingSignal(384, 10.0, 10.0, project_masked=True)
    assert torch.count_nonzero(sig.proj.bias) == 0
    assert abs(float(sig.proj.weight.std()) - 0.02) < 0.001 and float(sig.proj.weight.abs().max()) > 0.06
