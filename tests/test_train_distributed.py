"""Two CPU processes under torchrun (Gloo): MoCo keys are gathered across ranks before the queue; DDP trains."""

import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import json, random, sys
    import torch
    import torch.distributed as dist
    from transformers import AutoTokenizer, BertConfig, BertModel
    from sentlab.assets import resolve_model
    from sentlab.config import TrainParams
    from sentlab.methods import get_method
    from sentlab.methods.base import Batch
    from sentlab.train import distributed as D
    from sentlab.train.data import Corpus
    from sentlab.train.loop import train_loop
    import numpy as np

    torch.set_num_threads(1)
    assert D.init("cpu") and D.world_size() == 2
    tok = AutoTokenizer.from_pretrained(resolve_model("sentence-transformers/all-MiniLM-L6-v2"))
    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=64, max_position_embeddings=64), add_pooling_layer=False)
    cfg = TrainParams(batch_size=4, max_length=16, lr=1e-3, eval_every=2, max_steps=3, device="cpu")
    cls = get_method("moco")
    m = cls(bert, tok, cls.Params(queue_size=16), cfg, seed=0)
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
    # a DDP training run through the loop
    ids = np.arange(40)
    corpus = Corpus(ids=ids, texts=[" ".join(random.Random(int(i)).sample(words, 5)) for i in ids])
    res = train_loop(m, corpus, cfg, seed=0, dev_eval=lambda enc: {"stsb_dev": 1.0}, ckpt_dir=sys.argv[1],
                     progress=False)
    out["steps"] = res.steps
    out["enc_sum"] = float(sum(p.double().sum() for p in m.encoder.parameters()))
    out["key_sum"] = float(sum(p.double().sum() for p in m.key_encoder.parameters()))
    print("RESULT " + json.dumps(out), flush=True)
    dist.destroy_process_group()
''')


@pytest.mark.slow
def test_torchrun_two_cpu_ranks(tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                           "29517", str(script), str(tmp_path / "ckpt")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line.split("RESULT ", 1)[1]) for line in proc.stdout.splitlines() if "RESULT " in line]
    assert len(results) == 2
    a, b = sorted(results, key=lambda x: x["rank"])
    # M = 16 candidates = global batch (2 ranks x 4) + 8 queued keys
    assert a["queue_rows"] == b["queue_rows"] == 8
    assert a["candidates"] == b["candidates"] == 8.0  # both ranks' keys, queue still empty
    assert a["queue_len"] == b["queue_len"] == 8  # both ranks enqueued the same 8 gathered keys
    assert a["queue_sum"] == pytest.approx(b["queue_sum"], abs=1e-5)
    assert a["steps"] == b["steps"] == 3
    # DDP keeps the replicas identical (gradients all-reduced), momentum copies too
    assert a["enc_sum"] == pytest.approx(b["enc_sum"], abs=1e-6)
    assert a["key_sum"] == pytest.approx(b["key_sum"], abs=1e-6)
