"""L2P-CSR Table 4's GLUE fine-tuning: loaders on GLUE-layout fixtures and the mirror's SST-2 / STS-B copies,
the metrics, a seeded fine-tuning of a tiny BERT, the table's rows."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sentlab.errors import AssetMissingError, SentlabError
from sentlab.evaluate.suites import glue as G
from tiny import sentences, tiny_bert
from conftest import mirror_with


def _glue(root):
    (root / "glue" / "QNLI").mkdir(parents=True)
    (root / "glue" / "STS-B").mkdir(parents=True)
    for split in ("train", "dev"):
        (root / "glue" / "QNLI" / f"{split}.tsv").write_text(
            "index\tquestion\tsentence\tlabel\n0\tWho?\tHe did \"it\".\tentailment\n1\tWhen?\tNever.\tnot_entailment\n",
            encoding="utf-8")
        (root / "glue" / "STS-B" / f"{split}.tsv").write_text(
            "index\tgenre\tsentence1\tsentence2\tscore\n0\tnews\ta b\ta c\t3.2\n1\tnews\tx\ty\t0.5\n", encoding="utf-8")


def test_loaders_on_glue_layout(tmp_path):
    _glue(tmp_path)
    q = G.load_glue("QNLI", tmp_path)
    assert q["train"].a == ["Who?", "When?"] and q["train"].b == ['He did "it".', "Never."]
    assert q["dev"].y.tolist() == [0, 1]
    s = G.load_glue("STS-B", tmp_path)
    assert s["dev"].y.tolist() == [3.2, 0.5]
    with pytest.raises(SentlabError, match="Unknown GLUE task"):
        G.load_glue("MNLI", tmp_path)
    (tmp_path / "glue" / "QNLI" / "dev.tsv").write_text("a\tb\n1\t2\n", encoding="utf-8")
    with pytest.raises(SentlabError, match="not GLUE's QNLI"):
        G.load_glue("QNLI", tmp_path)


def test_sst2_and_stsb_from_the_mirror_others_need_data(monkeypatch, tmp_path):
    mirror_with(monkeypatch, "SST/binary/sentiment-train", "SST/binary/sentiment-dev",
                "STS/STSBenchmark/sts-train.csv", "STS/STSBenchmark/sts-dev.csv")
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    sst = G.load_glue("SST-2")
    assert (len(sst["train"].y), len(sst["dev"].y)) == (67349, 872) and sst["train"].b is None
    sts = G.load_glue("STS-B")
    assert (len(sts["train"].y), len(sts["dev"].y)) == (5749, 1500)
    with pytest.raises(AssetMissingError):
        G.load_glue("WNLI")


def test_metrics_pinned():
    y = np.array([1, 0, 1, 1])
    assert G.glue_metrics("QQP", y, np.array([1, 0, 0, 1])) == {"score": 75.0, "accuracy": 75.0, "f1": 80.0}
    r = G.glue_metrics("STS-B", np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.0, 2.0, 1.0, 3.0]))
    assert r["score"] == r["spearman"] == 80.0 and r["pearson"] == 80.0


def test_finetune_is_seeded_and_learns_a_separable_task(tok):
    rng = np.random.RandomState(0)
    a = [("red " if i % 2 else "blue ") + s for i, s in enumerate(sentences(96))]
    y = np.array([i % 2 for i in range(96)])
    split = G.GlueSplit(a, None, y)
    cfg = G.GlueConfig(lr=3e-3, batch_size=16, epochs=6, max_length=16)
    r1 = G.finetune(tiny_bert(tok, 0, initializer_range=0.2), tok, "SST-2", {"train": split, "dev": split}, cfg,
                    seed=1, progress=False)
    r2 = G.finetune(tiny_bert(tok, 0, initializer_range=0.2), tok, "SST-2", {"train": split, "dev": split}, cfg,
                    seed=1, progress=False)
    assert r1 == r2 and r1["steps"] == 36 and r1["train_examples"] == 96
    assert r1["score"] >= 95.0          # the colour word decides the label (chance: 50)
    sliced = G.finetune(tiny_bert(tok, 0), tok, "STS-B",
                        {"train": G.GlueSplit(a, a, rng.rand(96) * 5), "dev": G.GlueSplit(a[:8], a[:8], y[:8] * 5.0)},
                        G.GlueConfig(max_train=20, max_steps=3, batch_size=8), progress=False)
    assert (sliced["steps"], sliced["train_examples"], sliced["config"]["max_steps"]) == (3, 20, 3)


@pytest.mark.parametrize("precision, dtype", [("fp32", "torch.float32"), ("bf16", "torch.bfloat16")])
def test_finetune_runs_its_forward_passes_in_the_stated_precision(tok, precision, dtype):
    """#65 §5: `glue.finetune.precision` bf16 runs the fine-tuning's forward passes (training and dev) under bf16
    autocast, the loss in fp32; fp32 none; the result records it."""
    model = tiny_bert(tok, 0)
    seen = []
    model.encoder.layer[0].attention.self.query.register_forward_hook(lambda m, i, o: seen.append(str(o.dtype)))
    a = sentences(8)
    r = G.finetune(model, tok, "SST-2", {"train": G.GlueSplit(a, None, np.array([0, 1] * 4)),
                                        "dev": G.GlueSplit(a[:4], None, np.array([0, 1, 0, 1]))},
                   G.GlueConfig(batch_size=4, max_steps=2, precision=precision), progress=False)
    assert seen == [dtype] * 3    # two training steps, one dev batch
    assert r["config"]["precision"] == precision and r["steps"] == 2


def test_table4_rows_fill_from_results_or_say_what_to_run(tmp_path):
    from sentlab.report import paper_numbers as P
    from sentlab.report.paper_tables import l2p, load_metrics, render_rows

    d = tmp_path / "metrics"
    (d / "glue").mkdir(parents=True)
    (d / "base-cls.json").write_text(json.dumps({"model": "base-cls", "status": "evaluated",
                                                 "backbone": "bert-base-uncased"}))
    (d / "l2p.json").write_text(json.dumps({"model": "l2p", "status": "evaluated"}))
    (d / "glue" / "l2p.json").write_text(json.dumps({"SST-2": 91.5, "STS-B": 88.25, "WNLI": None}))
    spec = next(t for t in l2p.tables() if t.id == "l2p_table4")
    rows = {r.spec.label: r for r in render_rows(spec, load_metrics(d), tmp_path / "models")}
    ours, base = rows["+Ours (L2P-CSR)"], rows["BERT-base"]
    assert ours.values["SST-2"] == 91.5 and ours.values["WNLI"] is None and ours.spec.paper == P.L2P_TABLE4["+Ours"]
    assert "sentlab glue --model bert-base-uncased --json reports/metrics/glue/base-cls.json" in base.status


def test_glue_zip_download_unpacks_into_the_cache(tmp_path, monkeypatch):
    """GLUE ships one zip per task (WNLI.zip: WNLI/train.tsv, WNLI/dev.tsv): the download (from the local upstream
    of tests/upstream.py, at GLUE's own path) unpacks it under the cache's glue/, where load_glue finds it; a member
    that would land outside is refused."""
    import urllib.parse

    from upstream import serve, zip_of

    from sentlab.assets import resolve as assets

    tsv = "index\tsentence1\tsentence2\tlabel\n0\tA b.\tA.\t1\n1\tC d.\tE.\t0\n"
    for k in ("SENTLAB_OFFLINE", "HF_HUB_OFFLINE", "SENTLAB_DATA_MIRROR"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path / "cache"))
    path = lambda name: urllib.parse.urlsplit(assets.ASSETS[name].url).path   # noqa: E731
    with serve() as up:
        monkeypatch.setenv("SENTLAB_UPSTREAM", up.url)
        up.files[path("glue_wnli")] = zip_of({f"WNLI/{split}.tsv": tsv.encode() for split in ("train", "dev")})
        wnli = G.load_glue("WNLI")
        assert wnli["dev"].y.tolist() == [1, 0] and (tmp_path / "cache/glue/WNLI/train.tsv").is_file()
        assert "unzip -o" in assets.data_fetch_command("glue_wnli")
        up.files[path("glue_qnli")] = zip_of({"../evil.tsv": b"x"})
        with pytest.raises(SentlabError, match="outside"):
            assets._download(assets.ASSETS["glue_qnli"])
