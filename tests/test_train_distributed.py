"""Two CPU processes under torchrun (Gloo): MoCo keys are gathered across ranks before the queue; DDP trains."""

import json
import re
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import json, random, sys
    import torch
    import torch.distributed as dist
    from transformers import AutoTokenizer, BertConfig, BertModel
    from sentlab.assets.resolve import resolve_model
    from sentlab.config import TrainParams
    from sentlab.methods import get_method
    from sentlab.methods.base import Batch
    from sentlab.runtime import distributed as D
    from sentlab.train.data import Corpus
    from sentlab.train.loop import train_loop
    import numpy as np

    torch.set_num_threads(1)
    assert D.init("cpu") and D.world_size() == 2
    tok = AutoTokenizer.from_pretrained(resolve_model("sentence-transformers/all-MiniLM-L6-v2"))
    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=64, max_position_embeddings=64), add_pooling_layer=False)
    cfg = TrainParams(batch_size=8, max_length=16, lr=1e-3, eval_every=2, max_steps=3, device="cpu")  # global batch
    cls = get_method("moco")
    m = cls(bert, tok, cls.Params(queue_size=16).resolved(cfg), seed=0)
    r = D.rank()
    out = {"rank": r, "queue_rows": int(m.queue.shape[0])}
    words = "alpha bravo charlie delta echo foxtrot golf hotel".split()
    sents = [" ".join(random.Random(100 * r + i).sample(words, 4)) for i in range(4)]
    with torch.no_grad():
        res = m(Batch(sents))
    gathered = m.queue[: int(m.queue_len)]
    out["candidates"] = res["candidates"]
    out["queue_len"] = int(m.queue_len)
    out["queue_sum"] = float(gathered.sum())
    # SimCSE's in-batch negatives come from every rank; this rank's rows keep their gradient
    from sentlab.methods._common import in_batch_info_nce, info_nce
    g = torch.Generator().manual_seed(7)
    z = [torch.randn(4, 8, generator=g) for _ in range(4)]  # rank 0: z[0], z[1]; rank 1: z[2], z[3]
    z1, z2 = z[2 * r].clone().requires_grad_(), z[2 * r + 1].clone().requires_grad_()
    loss = in_batch_info_nce(z1, z2, 0.05)
    loss.backward()
    ref1, ref2 = torch.cat([z[0], z[2]]).requires_grad_(), torch.cat([z[1], z[3]]).requires_grad_()
    ref = info_nce(ref1, ref2, 0.05)
    ref.backward()
    out["simcse_loss"], out["simcse_ref"] = float(loss), float(ref)
    out["grad_matches"] = bool(torch.allclose(z1.grad, ref1.grad[4 * r: 4 * r + 4], atol=1e-6))
    # a DDP training run through the loop
    ids = np.arange(40)
    corpus = Corpus(ids=ids, texts=[" ".join(random.Random(int(i)).sample(words, 5)) for i in ids])
    res = train_loop(m, corpus, cfg, seed=0, dev_eval=lambda enc: {"stsb_dev": 1.0}, ckpt_dir=sys.argv[1],
                     progress=False)
    out["steps"] = res.steps
    out["enc_sum"] = float(sum(p.double().sum() for p in m.encoder.parameters()))
    out["key_sum"] = float(sum(p.double().sum() for p in m.key_encoder.parameters()))
    with open(f"{sys.argv[1]}.rank{r}.json", "w") as f:  # one file per rank: stdout lines of two ranks interleave
        json.dump(out, f)
    dist.destroy_process_group()
''')


@pytest.mark.slow
def test_torchrun_two_cpu_ranks(tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
                           str(script), str(tmp_path / "ckpt")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    a, b = (json.loads((tmp_path / f"ckpt.rank{r}.json").read_text()) for r in (0, 1))
    # M = 16 candidates = global batch (train.batch_size 8 = 2 ranks x 4) + 8 queued keys
    assert a["queue_rows"] == b["queue_rows"] == 8
    assert a["candidates"] == b["candidates"] == 8.0  # both ranks' keys, queue still empty
    assert a["queue_len"] == b["queue_len"] == 8  # both ranks enqueued the same 8 gathered keys
    assert a["queue_sum"] == pytest.approx(b["queue_sum"], abs=1e-5)
    assert a["steps"] == b["steps"] == 3
    # SimCSE: the loss over the global batch of 8 on both ranks, each rank's gradient its own rows'
    assert (a["simcse_loss"] == pytest.approx(a["simcse_ref"], abs=1e-5)
            and a["simcse_ref"] == pytest.approx(b["simcse_loss"], abs=1e-5))
    assert a["grad_matches"] and b["grad_matches"]
    # DDP keeps the replicas identical (gradients all-reduced), momentum copies too
    assert a["enc_sum"] == pytest.approx(b["enc_sum"], abs=1e-6)
    assert a["key_sum"] == pytest.approx(b["key_sum"], abs=1e-6)


RESUME_SCRIPT = textwrap.dedent('''
    import json, random, sys
    import numpy as np
    import torch
    import torch.distributed as dist
    from transformers import AutoTokenizer, BertConfig, BertModel
    from sentlab.assets.resolve import resolve_model
    from sentlab.config import TrainParams
    from sentlab.methods.simcse import SimCSE
    from sentlab.runtime import distributed as D
    from sentlab.train.data import Corpus
    from sentlab.train.loop import train_loop

    torch.set_num_threads(1)
    assert D.init("cpu") and D.world_size() == 2
    tok = AutoTokenizer.from_pretrained(resolve_model("sentence-transformers/all-MiniLM-L6-v2"))
    cfg = TrainParams(batch_size=4, max_length=16, lr=1e-3, eval_every=2, max_steps=5, device="cpu")
    words = "alpha bravo charlie delta echo foxtrot golf hotel".split()
    ids = np.arange(40)
    corpus = Corpus(ids=ids, texts=[" ".join(random.Random(int(i)).sample(words, 5)) for i in ids])

    def make():
        torch.manual_seed(0)
        bert = BertModel(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                                    num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                                    initializer_range=0.2), add_pooling_layer=False)
        return SimCSE(bert, tok, SimCSE.Params().resolved(cfg), seed=0)

    class Interrupt(Exception):
        pass

    def kill_at_3(step, record):
        if step == 3:
            raise Interrupt

    def run(ckpt, callbacks=()):
        m = make()
        res = train_loop(m, corpus, cfg, seed=0, dev_eval=lambda enc: {"stsb_dev": 1.0}, ckpt_dir=ckpt,
                         callbacks=callbacks, progress=False)
        return res, m

    out = {"rank": D.rank()}
    res, m = run(sys.argv[1] + "/a")
    out["a"] = [float(sum(p.double().sum() for p in m.encoder.parameters())), float(torch.rand(()))]
    try:
        run(sys.argv[1] + "/b", [kill_at_3])
    except Interrupt:
        pass
    res, m = run(sys.argv[1] + "/b")
    out["resumed_from"] = res.resumed_from
    out["b"] = [float(sum(p.double().sum() for p in m.encoder.parameters())), float(torch.rand(()))]
    print("RESULT " + json.dumps(out), flush=True)
    dist.destroy_process_group()
''')


@pytest.mark.slow
def test_torchrun_resume_restores_every_ranks_rng(tmp_path):
    """Each rank saves and resumes its own RNG state: the resumed 2-rank run (dropout differs per rank)
    ends bit-identical to the uninterrupted one, weights and every rank's RNG stream."""
    script = tmp_path / "resume.py"
    script.write_text(RESUME_SCRIPT)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
                           str(script), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the two ranks' lines may interleave on one line: a flat object each
    results = sorted((json.loads(m) for m in re.findall(r"RESULT (\{[^{}]*\})", proc.stdout)), key=lambda x: x["rank"])
    assert [r["rank"] for r in results] == [0, 1]
    for r in results:
        assert r["resumed_from"] == 2
        assert r["b"] == r["a"]  # same weights, same RNG position on this rank
    assert results[0]["a"][1] != results[1]["a"][1]  # the ranks' streams differ (seed + rank)
    state = json.loads((tmp_path / "b" / "last" / "state.json").read_text())
    assert len(state["rng_ranks"]) == 2 and state["rng_ranks"][0] != state["rng_ranks"][1]
