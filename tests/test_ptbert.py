"""PT-BERT: under ``attend_to: cls`` the pseudo tokens P get exactly zero gradient (issue 20), the
ablation variants in both readings, what sentlab.json records."""

from pathlib import Path

import pytest
import torch
import yaml

from sentlab.methods.base import Batch
from functools import partial

from _support.methods import tiny_method
from tiny import sentences

pytestmark = pytest.mark.usefixtures("one_thread")
REPO = Path(__file__).resolve().parents[1]


build = partial(tiny_method, "ptbert", queue_size=16, pseudo_len=6)


def pseudo_grad(m) -> torch.Tensor:
    m.train()
    m(Batch(sentences(8)))["loss"].backward()
    return m.pseudo.weight.grad


@pytest.mark.parametrize("extra", [{}, {"num_heads": 1, "attn_dropout": 0.0}])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_pseudo_tokens_get_exactly_zero_gradient_under_cls(tok, extra, precision):
    m = build(tok, attend_to="cls", **extra)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        g = pseudo_grad(m)
    assert g is not None and torch.count_nonzero(g) == 0  # one key: softmax ≡ 1, Z′ = V(y) whatever P holds
    assert torch.count_nonzero(m.attn.value.weight.grad) > 0  # the attention's values do learn


def test_pseudo_tokens_get_gradient_under_tokens(tok):
    g = pseudo_grad(build(tok, attend_to="tokens"))
    assert torch.count_nonzero(g) == g.numel()  # every pseudo token, every dimension


def test_sentlab_json_records_heads_and_key_attention(tok):
    info = build(tok, key_second_attention="online").export_info()
    assert info == {"method": "ptbert", "pooling": "cls", "pseudo_len": 6, "attend_to": "cls", "num_heads": 2,
                    "key_second_attention": "online"}
    assert build(tok, num_heads=1).export_info()["num_heads"] == 1


def test_ablations_run_m_and_queue_in_both_readings():
    variants = yaml.safe_load((REPO / "params.yaml").read_text())["ablations"]["variants"]
    names = list(variants)
    after = names[names.index("ptbert_tokens") + 1: names.index("ptbert_tokens") + 7]
    assert after == ["ptbert_tokens_m64", "ptbert_tokens_m90", "ptbert_tokens_m256", "ptbert_tokens_m360",
                     "ptbert_tokens_q192", "ptbert_tokens_q320"]
    for m in (64, 90, 256, 360):
        assert variants[f"ptbert_m{m}"]["set"] == {"pseudo_len": m}
        assert variants[f"ptbert_tokens_m{m}"] == {"method": "ptbert", "set": {"attend_to": "tokens", "pseudo_len": m}}
    for q in (192, 320):
        assert variants[f"ptbert_tokens_q{q}"] == {"method": "ptbert", "set": {"attend_to": "tokens", "queue_size": q}}


def test_key_init_random_starts_the_momentum_encoder_from_berts_init(tok):
    """The released BertForPolyMoCo's momentum encoder is not in the checkpoint: it starts from BERT's init."""
    copy, rand = build(tok), build(tok, key_init="random")
    for (n, p), (_, q) in zip(copy.encoder.named_parameters(), copy.key_encoder.named_parameters()):
        assert torch.equal(p, q), n  # default: MoCo's copy
    std = rand.encoder.config.initializer_range
    for n, p in rand.key_encoder.named_parameters():
        if "LayerNorm.weight" in n:
            assert torch.equal(p, torch.ones_like(p)), n
        elif n.endswith("bias"):
            assert torch.count_nonzero(p) == 0, n
        elif p.numel() >= 1000:
            assert abs(float(p.std()) - std) < 0.1 * std and abs(float(p.mean())) < 0.1 * std, n
    assert not torch.equal(rand.key_encoder.embeddings.word_embeddings.weight,
                           rand.encoder.embeddings.word_embeddings.weight)
    # the online side is untouched, and the draw is the seed's
    assert torch.equal(rand.encoder.embeddings.word_embeddings.weight, copy.encoder.embeddings.word_embeddings.weight)
    assert torch.equal(build(tok, key_init="random").key_encoder.encoder.layer[0].output.dense.weight,
                       rand.key_encoder.encoder.layer[0].output.dense.weight)


def test_paper_profile_runs_the_released_codes_settings():
    """Paper profile = Namco0816/PT-BERT's run: online key attention, 5 batches (320) queued, random key start,
    max length 64 (re-produce_result.sh's max_len);
    Table 5b's Q-192 / Q-320 rows = the code's queue_size 3 / 5 (256 / 384 candidates)."""
    from sentlab.config.profile_files import profile_values

    values = profile_values("paper", REPO / "profiles")
    p = values["methods"]["ptbert"]
    assert (p["key_second_attention"], p["queue_size"], p["key_init"], p["max_length"]) == ("online", 320, "random",
                                                                                            64)
    variants = values["ablations"]["variants"]
    assert variants["ptbert_q192"]["set"] == {"queue_size": 256}
    assert variants["ptbert_q320"]["set"] == {"queue_size": 384}
    assert variants["ptbert_tokens_q320"]["set"] == {"attend_to": "tokens", "queue_size": 384}
    quick = profile_values("quick", REPO / "profiles")["methods"]["ptbert"]
    assert quick.get("key_init", "copy") == "copy" and "queue_size" not in quick
