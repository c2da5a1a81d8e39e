"""The method-agnostic training loop: curves, best checkpoint export, resume equivalence, the DVC stage entry."""

import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from safetensors.torch import load_file

from pathlib import Path

from sentlab.config import TrainParams
from sentlab.errors import SentlabError
from sentlab.evaluate.sts.diagnostics import make_dev_evaluator
from sentlab.train.run import stage_main, train_method
from tiny import sentences, tiny_bert
from _support.training import Interrupt, factory, fake_dev_eval, make_root, params, read_curve

pytestmark = pytest.mark.usefixtures("one_thread")
REPO = Path(__file__).resolve().parents[1]

def test_simcse_end_to_end_exports_loadable_best_model(tmp_path, tok, monkeypatch):
    root = make_root(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    info = train_method(params(), "simcse", root=root, dev_eval=fake_dev_eval(), encoder_factory=factory(tok),
                        tracking=True, progress=False)
    out = root / "models" / "simcse"
    meta = json.loads((out / "sentlab.json").read_text())
    assert {k: meta[k] for k in info} == info  # what train_method returns is what sentlab.json records
    assert meta["status"] == "trained" and meta["pooling"] == "cls" and meta["steps"] == 6
    curve = read_curve(root / "reports" / "curves" / "simcse.csv")
    assert [int(r["step"]) for r in curve] == [2, 4, 6]
    assert list(curve[0]) == ["step", "stsb_dev", "alignment", "uniformity", "loss"]
    best = max(curve, key=lambda r: float(r["stsb_dev"]))
    assert meta["best_step"] == int(best["step"]) and meta["best_stsb_dev"] == pytest.approx(float(best["stsb_dev"]))
    assert not (root / "checkpoints" / "simcse").exists() or not any((root / "checkpoints" / "simcse").iterdir())
    # the export is the best checkpoint: its dev score reproduces from the loaded weights
    from sentlab.nn.encoder import SentenceEncoder
    from transformers import AutoModel, AutoTokenizer
    model = AutoModel.from_pretrained(out)
    enc = SentenceEncoder(model, AutoTokenizer.from_pretrained(out), pooling="cls")
    assert fake_dev_eval()(enc)["stsb_dev"] == pytest.approx(meta["best_stsb_dev"], abs=1e-4)
    # sentence-transformers loads it with [CLS] pooling
    from sentence_transformers import SentenceTransformer
    st = SentenceTransformer(str(out), device="cpu")
    ref = enc.encode(["alpha bravo charlie", "delta echo"])
    np.testing.assert_allclose(st.encode(["alpha bravo charlie", "delta echo"]), ref, atol=1e-5)
    # MLflow step curves
    import mlflow
    client = mlflow.tracking.MlflowClient()
    run = client.search_runs([client.get_experiment_by_name("sentlab").experiment_id])[0]
    hist = client.get_metric_history(run.info.run_id, "stsb_dev")
    assert sorted(m.step for m in hist) == [2, 4, 6]
    assert {"alignment", "uniformity", "loss"} <= set(run.data.metrics)


@pytest.mark.parametrize("method_id,checkpoint_every,resume_step", [("moco_deletion", None, 3), ("ptbert", 2, 4)])
def test_resume_equals_uninterrupted(tmp_path, tok, method_id, checkpoint_every, resume_step):
    # evals at 3, 6 and 7; checkpoints at the evals (None) or every 2 steps; killed after step 5
    p = params(max_steps=7, eval_every=3, checkpoint_every=checkpoint_every)
    a = make_root(tmp_path / "a")
    train_method(p, method_id, root=a, dev_eval=fake_dev_eval(), encoder_factory=factory(tok), tracking=False,
                 progress=False)

    b = make_root(tmp_path / "b")

    def kill_at_5(step, record):
        if step == 5:
            raise Interrupt

    with pytest.raises(Interrupt):
        train_method(p, method_id, root=b, dev_eval=fake_dev_eval(), encoder_factory=factory(tok), tracking=False,
                     callbacks=[kill_at_5], progress=False)
    ckpts = list((b / "checkpoints" / method_id).glob("*/last/state.json"))
    assert len(ckpts) == 1 and json.loads(ckpts[0].read_text())["step"] == resume_step
    # evaluated at step 3, then killed: no curve without its model
    assert not (b / "reports" / "curves" / f"{method_id}.csv").exists() and not (b / "models" / method_id).exists()
    info = train_method(p, method_id, root=b, dev_eval=fake_dev_eval(), encoder_factory=factory(tok), tracking=False,
                        progress=False)
    assert info["resumed_from_step"] == resume_step
    wa = load_file(a / "models" / method_id / "model.safetensors")
    wb = load_file(b / "models" / method_id / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    curve = f"reports/curves/{method_id}.csv"
    assert read_curve(a / curve) == read_curve(b / curve)
    ja = json.loads((a / "models" / method_id / "sentlab.json").read_text())
    jb = json.loads((b / "models" / method_id / "sentlab.json").read_text())
    assert ja["best_stsb_dev"] == jb["best_stsb_dev"] and ja["best_step"] == jb["best_step"]


def test_grad_accum_and_bf16_autocast_on_cpu(tmp_path, tok):
    """bf16 autocast on whatever CPU runs the test (emulated where it has no AVX-512 BF16 / AMX: asked for with
    runtime.emulated_precision, so the training does not stop: sentlab.runtime.device)."""
    root = make_root(tmp_path)
    p = params(grad_accum=2, batch_size=4, precision="bf16", max_steps=2, eval_every=2)
    p = p.model_copy(update={"runtime": p.runtime.model_copy(update={"emulated_precision": "allow"})})
    info = train_method(p, "ct", overrides={"negatives": 3}, root=root, dev_eval=fake_dev_eval(),
                        encoder_factory=factory(tok), tracking=False, progress=False)
    assert info["steps"] == 2 and info["status"] == "trained" and info["exported_copy"] == "second"


@pytest.mark.parametrize("flags, native", [("fpu avx512f avx512_bf16 sse", True), ("fpu amx_bf16 amx_tile", True),
                                           ("fpu avx512f avx512bw", False), (None, False)])
def test_precision_never_depends_on_the_cpu(tmp_path, monkeypatch, flags, native):
    """Issue #35 (was issue 15's `auto` = bf16 on CPUs with AVX-512 BF16/AMX): the CPU's bf16 support is still
    detected (benchmarks, messages) but `auto` is fp32 on every CPU and bf16 on CUDA (on a GPU with bf16: the
    GPU's capability decides, tests/test_device.py); an explicit value is kept."""
    from sentlab.runtime import device
    from sentlab.train import loop

    monkeypatch.setattr(device, "gpu_bf16", lambda: True)

    info = tmp_path / "cpuinfo"
    if flags is not None:
        info.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    assert loop.cpu_has_native_bf16(info) is native
    monkeypatch.setattr(loop, "cpu_has_native_bf16", lambda: native)
    assert loop.resolve_precision("auto", torch.device("cpu")) == "fp32"
    assert loop.resolve_precision("bf16", torch.device("cpu")) == "bf16"
    assert loop.resolve_precision("fp32", torch.device("cpu")) == "fp32"
    assert loop.resolve_precision("auto", torch.device("cuda")) == "bf16"


def test_cpu_training_uses_eager_attention_and_fused_adamw(tmp_path, tok, monkeypatch):
    """Issue 15: on CPU `train.attention: auto` switches the backbone (and MoCo's key copy) to eager attention
    (PyTorch's CPU SDPA backward is slow at sentence lengths) and AdamW is the fused kernel; the choice is in
    sentlab.json; an explicit `sdpa` is kept; CUDA stays on sdpa."""
    from sentlab.train import loop

    assert loop.resolve_attention("auto", torch.device("cpu")) == "eager"
    assert loop.resolve_attention("auto", torch.device("cuda")) == "sdpa"
    assert loop.resolve_attention("sdpa", torch.device("cpu")) == "sdpa"
    seen = {}
    real_make = loop.make_optimizer

    def spy(method, cfg, device):
        opt = real_make(method, cfg, device)
        seen["fused"] = opt.defaults.get("fused")
        seen["attn"] = {m.config._attn_implementation for m in method.modules()
                        if hasattr(m, "set_attn_implementation")}
        return opt

    monkeypatch.setattr(loop, "make_optimizer", spy)
    for setting, expected in (("auto", "eager"), ("sdpa", "sdpa")):
        root = make_root(tmp_path / setting)
        info = train_method(params(max_steps=2, eval_every=2, attention=setting), "moco", root=root,
                            dev_eval=fake_dev_eval(), encoder_factory=factory(tok), tracking=False, progress=False)
        assert info["attention"] == expected
        assert seen["attn"] == {expected}  # the query encoder and the momentum key encoder
        assert seen["fused"] is True


def test_corpus_too_small_is_a_clear_error(tmp_path, tok):
    from sentlab.errors import SentlabError
    root = make_root(tmp_path, n=6)
    with pytest.raises(SentlabError, match="batch_size"):
        train_method(params(), "simcse", root=root, dev_eval=fake_dev_eval(), encoder_factory=factory(tok),
                     tracking=False, progress=False)


def test_train_method_names_the_dev_check_it_was_not_given(tmp_path):
    """train/ imports no evaluator (docs/architecture.md): the STS-B dev check is passed in, and a call without it
    fails before anything is loaded or written."""
    with pytest.raises(TypeError, match="dev_eval or make_dev_eval"):
        train_method(params(), "simcse", root=tmp_path, tracking=False, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_sentlab_train_and_the_train_stage_pass_the_evaluate_dev_check(monkeypatch):
    """`sentlab train` (sentlab.cli) and pipeline/train.py hand sentlab.evaluate's STS-B dev check to the
    training code, which cannot import it."""
    from sentlab import cli
    from sentlab.train import run as R

    seen = []
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(R, "run_from_args", lambda args, p, make_dev_eval: seen.append(make_dev_eval) or 0)
    assert cli.main(["train", "simcse"]) == 0 and seen == [make_dev_evaluator]
    assert "stage_main(sys.argv[1:], make_dev_eval=make_dev_evaluator)" in (REPO / "pipeline/train.py").read_text()


def test_the_stage_of_a_model_the_profile_does_not_train_does_not_exist(tmp_path, monkeypatch, capsys):
    """pipeline/train.py reads what its dvc.yaml stage declares: a model with no stage (not in models.yaml) is one
    paragraph naming the fix, exit 2, and nothing written."""
    from conftest import stage_workspace

    from sentlab.stages.entry import report_errors

    monkeypatch.chdir(stage_workspace(tmp_path))
    monkeypatch.delenv("DVC_STAGE", raising=False)
    argv = ["consert", "--method", "consert", "--seed", "42"]
    assert report_errors(lambda: stage_main(argv, make_dev_eval=make_dev_evaluator)) == 2
    assert "no stage `train@consert`" in capsys.readouterr().err and not (tmp_path / "models").exists()


def test_corpus_joins_annotation_frames_on_id(tmp_path):
    from sentlab.train.data import load_corpus
    root = make_root(tmp_path, n=4)  # ids 100..103
    span = pa.struct([("text", pa.string()), ("start", pa.int32()), ("end", pa.int32())])
    frame = pa.struct([("predicate", span), ("arg0", span), ("arg1", span), ("argm_neg", span)])
    ann = tmp_path / "data" / "annotations" / "train"
    ann.mkdir(parents=True)
    f = {"predicate": {"text": "sat", "start": 4, "end": 7}, "arg0": {"text": "cat", "start": 0, "end": 3},
         "arg1": None, "argm_neg": None}
    table = pa.table({"id": pa.array([103, 101, 100, 102], pa.int64()), "text": ["d", "b", "a", "c"],
                      "frames": pa.array([[f], [], [], [f, f]], pa.list_(frame))})
    pq.write_table(table, ann / "part-00000.parquet")
    corpus = load_corpus(root / "data" / "corpus" / "train.parquet", ["frames"], ann)
    assert [len(x) for x in corpus.extras["frames"]] == [0, 0, 2, 1]  # ids 100, 101, 102, 103
    assert corpus.batch([3]).extras["frames"][0][0]["arg0"]["text"] == "cat"
    from sentlab.errors import SentlabError
    pq.write_table(table.slice(0, 2), ann / "part-00000.parquet")
    with pytest.raises(SentlabError, match="no rows for 2 corpus id"):
        load_corpus(root / "data" / "corpus" / "train.parquet", ["frames"], ann)


# --- one optimiser contract (issue 20) ---------------------------------------------------------
def test_clipping_covers_every_param_group(tmp_path, tok):
    """A second group (a PaSeR-like decoder at its own lr) is clipped too, on its own: the encoder's
    step is not shrunk by the decoder's huge gradient (one global norm would scale it by 1/2e4)."""
    from torch import nn
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    from sentlab.methods.base import adamw
    from sentlab.methods.simcse import SimCSE
    from sentlab.train.data import Corpus
    from sentlab.train.loop import train_loop

    class TwoGroups(SimCSE):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.decoder = nn.Linear(4, 1)

        def configure_optimizers(self, *, weight_decay=0.0, fused=False):
            dec = {id(p) for p in self.decoder.parameters()}
            return adamw([{"params": [p for p in self.trainable_parameters() if id(p) not in dec]},
                          {"params": list(self.decoder.parameters()), "lr": 1e-3}], lr=self.params.lr)

        def forward(self, batch):
            return {"loss": super().forward(batch)["loss"] + 1e4 * self.decoder.weight.sum()}

    cfg = TrainParams(batch_size=8, max_length=16, lr=1e-3, eval_every=1, max_steps=1, device="cpu")
    torch.manual_seed(0)
    m = TwoGroups(tiny_bert(tok, 0, initializer_range=0.2), tok, SimCSE.Params().resolved(cfg))
    seen = {}

    def hook(opt, args, kwargs):
        seen["groups"] = len(opt.param_groups)
        seen["decoder"] = float(m.decoder.weight.grad.norm())
        grads = [p.grad.norm() for p in opt.param_groups[0]["params"] if p.grad is not None]
        seen["encoder"] = float(torch.linalg.vector_norm(torch.stack(grads)))

    handle = register_optimizer_step_pre_hook(hook)
    try:
        train_loop(m, Corpus(ids=np.arange(16), texts=sentences(16)), cfg, seed=0,
                   dev_eval=lambda enc: {"stsb_dev": 0.0}, ckpt_dir=tmp_path, progress=False, max_grad_norm=1.0)
    finally:
        handle.remove()
    assert seen["groups"] == 2
    assert 0.99 < seen["decoder"] <= 1.0 + 1e-4  # unclipped: the decoder's gradient alone is 2e4
    assert 0.05 < seen["encoder"] <= 1.0 + 1e-4


def test_method_epochs_batch_size_lr_reach_the_train_config(tmp_path, tok):
    from sentlab.methods import get_method
    from sentlab.methods.base import TRAIN_OVERRIDES
    from sentlab.train.run import resolve_train

    assert {"epochs", "batch_size", "lr", "eval_every", "max_steps", "max_length"} <= set(TRAIN_OVERRIDES)
    p = params(max_steps=None, eval_every=100)
    for mid in ("simcse", "ct", "moco", "ptbert", "paser", "l2p", "posbow_adv"):  # every method accepts them
        mp = get_method(mid).Params(epochs=5, batch_size=16, lr=1e-5)
        cfg = resolve_train(p, mp)
        assert (cfg.epochs, cfg.batch_size, cfg.lr) == (5, 16, 1e-5)
    none = resolve_train(p, get_method("simcse").Params())
    assert (none.epochs, none.batch_size, none.lr) == (1, 8, 3e-3)

    root = make_root(tmp_path)  # 48 sentences: batch 4 x 2 epochs = 24 steps
    lrs = []
    info = train_method(p, "simcse", overrides={"epochs": 2, "batch_size": 4, "lr": 1e-4}, root=root,
                        dev_eval=fake_dev_eval(), encoder_factory=factory(tok), tracking=False, progress=False,
                        callbacks=[lambda step, rec: lrs.append(rec["lr"])])
    assert info["steps"] == 24 and len(lrs) == 24
    assert lrs[0] == pytest.approx(1e-4 * 23 / 24)  # linear decay from the method's lr


def test_paper_profile_trains_paser_five_epochs():
    from pathlib import Path

    from sentlab.config import load_params
    from sentlab.train.run import method_params, resolve_train

    path = Path(__file__).resolve().parents[1] / "params.yaml"
    paper, quick = load_params(path, "paper"), load_params(path, "quick")
    cfg = resolve_train(paper, method_params(paper, "paser"))
    assert (cfg.epochs, cfg.max_steps, cfg.batch_size, cfg.lr) == (5, None, 64, 3e-5)  # the paper: 5 epochs
    assert resolve_train(paper, method_params(paper, "simcse")).epochs == paper.train.epochs == 1
    assert resolve_train(quick, method_params(quick, "paser")).epochs == 1


def test_quick_step_budgets_follow_encoder_passes_with_two_dev_points():
    """params.yaml's quick budgets (README "Stage times"): the two-view methods share one step budget,
    L2P-CSR (5 encoder passes a step against 2) gets the same number of encoder passes, every run has two
    dev evaluations (the curve: one midway, one at its last step), and the quick-only PaSeR dev interval
    does not leak into the paper profile (docs/evaluation.md#the-sts-protocol: its train.eval_every)."""
    from pathlib import Path

    from sentlab.config import load_params
    from sentlab.train.run import method_params, resolve_train

    path = Path(__file__).resolve().parents[1] / "params.yaml"
    quick, paper = load_params(path, "quick"), load_params(path, "paper")
    cfg = {m: resolve_train(quick, method_params(quick, m)) for m in quick.train.methods if m in quick.methods}
    two_view = {cfg[m].max_steps for m in ("simcse", "moco", "moco_srl", "ptbert", "posbow_adv")}
    assert two_view == {quick.train.max_steps}
    assert cfg["l2p"].max_steps * 5 == quick.train.max_steps * 2
    for m, c in cfg.items():
        assert c.max_steps % c.eval_every == 0 and c.max_steps // c.eval_every == 2, m
    assert resolve_train(paper, method_params(paper, "paser")).eval_every == paper.train.eval_every == 125
    # prompt L2P-CSR's quick lr (1e-4: its 20 steps level off; benchmarks/RESULTS.md "prompt_l2p's round-off
    # spread") is quick's alone: the paper profile trains it at the paper's 3e-5, like every method there
    assert cfg["prompt_l2p"].lr == 1e-4 and quick.train.lr == 3e-5
    # and its ascent step is the released code's β 0.1 (RESULTS: fp32 against bf16 0.26 -> 0.08), as the paper profile's
    assert method_params(quick, "prompt_l2p").beta == method_params(paper, "prompt_l2p").beta == 0.1
    assert resolve_train(paper, method_params(paper, "prompt_l2p")).lr == 3e-5


def test_run_key_includes_the_code_fingerprint(monkeypatch):
    import sentlab.provenance.code as prov
    from sentlab.train.run import method_params, run_key

    p = params()
    mp = method_params(p, "simcse")
    key = run_key(p, "simcse", mp, "corpus-fp")
    assert run_key(p, "simcse", mp, "corpus-fp") == key
    monkeypatch.setattr(prov, "training_code_fingerprint", lambda method: "0123456789abcdef")
    assert run_key(p, "simcse", mp, "corpus-fp") != key  # a code change never resumes a pre-fix checkpoint
    # the resolved train block counts: a method's own lr is a different run
    assert run_key(p, "simcse", method_params(p, "simcse", {"lr": 1e-4}), "corpus-fp") != \
        run_key(p, "simcse", mp, "corpus-fp")


def test_train_nproc_relaunches_the_stage_under_torchrun(tmp_path, monkeypatch):
    """runtime.nproc: 2 re-runs the same stage command through PyTorch's launcher (an argument list,
    no shell); under torchrun (WORLD_SIZE set) the stage trains itself."""
    import subprocess
    import sys

    from conftest import stage_workspace

    from sentlab.train import run as R

    monkeypatch.chdir(stage_workspace(tmp_path, lambda r: r["runtime"].update(nproc=2)))
    monkeypatch.delenv("DVC_STAGE", raising=False)
    seen = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, check: seen.append(cmd) or subprocess.CompletedProcess(cmd, 7))
    argv = ["simcse", "--method", "simcse", "--seed", "42"]
    monkeypatch.setattr(sys, "argv", ["pipeline/train.py", *argv])
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert R.stage_main(argv, make_dev_eval=make_dev_evaluator) == 7
    assert seen == [[sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                     "pipeline/train.py", *argv]]
    monkeypatch.setenv("WORLD_SIZE", "2")
    trained = []
    monkeypatch.setattr(R, "train_method", lambda params, method, **kw: trained.append((method, params.seed, kw))
                        or {"best_stsb_dev": 1.0, "best_step": 1})
    assert R.stage_main(argv, make_dev_eval=make_dev_evaluator) == 0 and len(seen) == 1
    assert trained[0][:2] == ("simcse", 42) and trained[0][2]["name"] == "simcse"
    assert trained[0][2]["make_dev_eval"] is make_dev_evaluator


def test_batch_size_is_the_global_batch():
    from sentlab.config import TrainParams
    from sentlab.train.loop import plan_steps

    cfg = TrainParams(batch_size=8, max_steps=None, epochs=1)
    assert plan_steps(80, cfg, world=1) == plan_steps(80, cfg, world=2) == (10, 10)
    with pytest.raises(SentlabError, match="global batch.*3 ranks"):
        plan_steps(80, cfg, world=3)


def _rng_states():
    return random.getstate(), np.random.get_state()[1].tolist(), torch.get_rng_state()


def test_seed_everything_is_transformers_set_seed_with_the_old_states():
    """``seed_everything`` = ``transformers.set_seed`` (+ numpy's 32-bit wrap): every generator ends in the state
    sentlab's own seeding gave (random.seed, np.random.seed(seed % 2**32), torch.manual_seed)."""
    from sentlab.train.loop import seed_everything

    def old(seed):
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)

    for seed in (0, 42, 43, 1111, 2**31 + 7, 2**32 - 1, 2**32 + 5, -3):
        old(seed)
        want = _rng_states()
        random.seed(1), np.random.seed(1), torch.manual_seed(1)      # anything else in between
        seed_everything(seed)
        got = _rng_states()
        assert got[0] == want[0] and got[1] == want[1] and torch.equal(got[2], want[2]), seed
        assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == (
            old(seed) or (random.random(), float(np.random.rand()), float(torch.rand(1)))), seed


def test_linear_schedule_gives_the_old_lr_at_every_step():
    """``transformers.get_linear_schedule_with_warmup`` (no warm-up) = sentlab's own linear decay, bit for bit,
    at every step of runs of several lengths, for every param group (the encoder's lr and a head's)."""
    from sentlab.train.loop import linear_schedule

    def old(total):
        return lambda step: max(0.0, (total - step) / max(1, total))

    for total in (1, 2, 3, 7, 125, 1953):
        runs = []
        for make in (lambda o: torch.optim.lr_scheduler.LambdaLR(o, old(total)), lambda o: linear_schedule(o, total)):
            opt = torch.optim.AdamW([{"params": [torch.nn.Parameter(torch.zeros(1))], "lr": 3e-5},
                                     {"params": [torch.nn.Parameter(torch.zeros(1))], "lr": 1e-3}])
            sched, lrs = make(opt), []
            for _ in range(total + 2):
                lrs.append(sched.get_last_lr() + [g["lr"] for g in opt.param_groups])
                opt.step()
                sched.step()
            runs.append(lrs)
        assert runs[0] == runs[1], total


def test_resume_checkpoints_at_most_every_checkpoint_minutes(tmp_path, tok, monkeypatch):
    """runtime.checkpoint_minutes (issue #54 §6): a checkpoint step writes the resume state only once the minutes
    have passed since the last one (a fake clock: 4 minutes a step here), one state per run, removed at the end."""
    import sentlab.train.loop as L
    from sentlab.train import checkpoint

    clock = iter(range(0, 10_000, 240))   # each perf_counter call: 4 more minutes
    monkeypatch.setattr(L.time, "perf_counter", lambda: float(next(clock)))
    written = []
    save = checkpoint.save_resume
    monkeypatch.setattr(L, "save_resume", lambda folder, *a, **k: (written.append(a[-1]["step"]),
                                                                  save(folder, *a, **k)))
    p = params(max_steps=7, eval_every=1, checkpoint_minutes=10)
    root = make_root(tmp_path)
    train_method(p, "moco_deletion", root=root, dev_eval=fake_dev_eval(), encoder_factory=factory(tok),
                 tracking=False, progress=False)
    assert written and len(written) < 6 and all(b - a >= 2 for a, b in zip(written, written[1:]))
    assert not list((root / "checkpoints" / "moco_deletion").iterdir())   # removed when the run finished
    written.clear()
    train_method(params(max_steps=7, eval_every=1), "moco_deletion", root=make_root(tmp_path / "b"),
                 dev_eval=fake_dev_eval(), encoder_factory=factory(tok), tracking=False, progress=False)
    assert written == [1, 2, 3, 4, 5]   # 0 minutes: every checkpoint step (48 sentences / 8: 6 steps, none at 6)
    from sentlab.config import load_params

    assert load_params(REPO / "params.yaml", profile="paper").train.checkpoint_minutes == 10
