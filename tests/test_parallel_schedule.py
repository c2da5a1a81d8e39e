"""Scheduling that fits GPUs (issue #54 §7), without Ray: each chain's GPU share from the plan's step times
(``runtime.gpus_per_task: auto``), longest chains first, a chain's worktree removed as it finishes, ``runtime.nproc``
checked against the GPUs a task holds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from sentlab.errors import SentlabError
from sentlab.parallel import ray_run as runner, schedule
from sentlab.parallel.graph import Chain, Plan, plan
from sentlab.parallel.gpus import slot_resources
from sentlab.parallel.schedule import StageCost, chain_gpus, check_nproc, share_of_step, submission_order
from sentlab.config.sections import RuntimeParams

ROOT = Path(__file__).parents[1]
SHARED = ["sources", "prepare", "annotate"]


def _graph(models: dict[str, str | None], baselines=("cls",)):
    names = list(SHARED) + [f"train@{m}" for m in models] + [f"evaluate@{m}" for m in models]
    names += [f"evaluate_baseline@{b}" for b in baselines] + ["report", "export"]
    edges = [("sources", "prepare"), ("prepare", "annotate")]
    for m, frm in models.items():
        edges += [("annotate", f"train@{m}"), (f"train@{m}", f"evaluate@{m}"), (f"evaluate@{m}", "report")]
        if frm:
            edges.append((f"train@{frm}", f"train@{m}"))
    edges += [("prepare", f"evaluate_baseline@{b}") for b in baselines]
    edges += [(f"evaluate_baseline@{b}", "report") for b in baselines]
    return names, edges


@pytest.fixture(scope="module")
def paper_costs():
    from sentlab.config import load_params

    return schedule.stage_costs(load_params(ROOT / "params.yaml", profile="paper"))


def test_the_share_of_a_step():
    # the H100 step times of sentlab.campaign.plan.STEP_S at their batch: SimCSE 0.04 s, PT-BERT 0.10 s, L2P 0.36 s
    # (batch
    # 512), PaSeR 0.65 s, PaSeR-sup 1.93 s; the rule: quarters of a GPU, a whole one from a 0.4 s step
    assert [share_of_step(t) for t in (0.04, 0.10, 0.11, 0.2, 0.25, 0.36, 0.65, 1.93)] == \
        [0.25, 0.25, 0.5, 0.5, 0.75, 1.0, 1.0, 1.0]


def test_auto_shares_on_the_paper_profiles_chains(paper_costs):
    c = paper_costs
    # by hand from STEP_S / LIKE and the paper profile's batches: simcse 0.04 s (64), ptbert 0.10 s (64), moco_srl
    # 0.08 s, diffcse 2 x 0.04 = 0.08 s, rankcse 2 x 0.04/64 x 128 = 0.16 s, prompt 0.36/512 x 256 = 0.18 s,
    # simcse_sup 1.5 x 0.04/64 x 512 = 0.48 s, l2p 0.36 s (512), paser 0.65 s, paser_sup 1.93 s
    want = {"simcse": 0.25, "ptbert": 0.25, "moco_srl": 0.25, "diffcse": 0.25, "rankcse": 0.5, "prompt": 0.5,
            "simcse_sup": 1.0, "l2p": 1.0, "paser": 1.0, "paser_sup": 1.0}
    assert {m: c[f"train@{m}"].share for m in want} == want
    assert c["evaluate@simcse"].share == c["evaluate_baseline@cls"].share == c["transfer@simcse"].share == 0.25
    assert c["train@paser_sup"].training and not c["evaluate@paser"].training
    names, edges = _graph({"simcse": None, "paser": None, "paser_sup": "paser", "l2p": None})
    edges.append(("train@simcse", "transfer@simcse"))
    names[-2:-2] = ["transfer@simcse"]
    chains = {ch.id: ch for ch in plan(names, edges, set(names)).chains}
    got = {cid: chain_gpus(ch, "auto", 1, c) for cid, ch in chains.items()}
    assert got == {"simcse": 0.25, "paser": 1.0, "paser_sup": 1.0, "l2p": 1.0, "evaluate_baseline-cls": 0.25}
    # a number keeps today's behaviour: every chain that number
    assert {chain_gpus(ch, 0.5, 1, c) for ch in chains.values()} == {0.5}
    # DDP: a chain that trains asks for one GPU per rank; an evaluation-only chain keeps its share
    assert chain_gpus(chains["simcse"], "auto", 2, c) == 2.0
    assert chain_gpus(chains["evaluate_baseline-cls"], "auto", 2, c) == 0.25
    # a stage the plan does not know takes a whole GPU
    assert chain_gpus(Chain("x", ["train@unknown"]), "auto", 1, c) == 1.0


def test_longest_chains_first_on_the_paper_profile(paper_costs):
    names, edges = _graph({"simcse": None, "paser": None, "paser_sup": "paser", "l2p": None, "diffcse": None})
    p = plan(names, edges, set(names))
    assert [ch.id for ch in p.chains] == ["simcse", "paser", "paser_sup", "l2p", "diffcse", "evaluate_baseline-cls"]
    secs = {ch.id: schedule.chain_seconds(ch, paper_costs) for ch in p.chains}
    # paser (0.65 s/step) with paser_sup waiting for it (1.93 s/step) is the longest path; diffcse (2 x SimCSE's
    # step) next; l2p (few steps at batch 512) last of the trainings; a baseline's evaluation shortest
    assert [ch.id for ch in submission_order(p.chains, secs)] == \
        ["paser", "paser_sup", "diffcse", "simcse", "l2p", "evaluate_baseline-cls"]


def test_the_order_keeps_a_chain_after_the_one_it_needs():
    chains = [Chain("a", ["train@a"]), Chain("b", ["train@b"], needs=["a"]), Chain("c", ["train@c"])]
    # b waits for a: a's priority includes b's 100 s, so a (1 s) goes before c (50 s), and b after a
    assert [c.id for c in submission_order(chains, {"a": 1.0, "b": 100.0, "c": 50.0})] == ["a", "b", "c"]
    assert [c.id for c in submission_order(chains, {"a": 1.0, "b": 10.0, "c": 50.0})] == ["c", "a", "b"]
    # no costs: DVC's order
    assert [c.id for c in submission_order(chains, {})] == ["a", "b", "c"]


class FakeRay:
    """Ray's calls fan_out makes; a task's result is what ``results`` says, returned in submission order."""

    def __init__(self, results: dict[str, str], events: list):
        self.results, self.events, self.submitted, self.placed = results, events, [], {}

    def put(self, x):
        return x

    def remote(self, fn):
        ray = self

        class Fn:
            def options(self, **kw):
                class Call:
                    def remote(self, spec, *deps):
                        ray.submitted.append((spec["id"], kw["num_gpus"]))
                        ray.placed[spec["id"]] = (kw.get("resources") or {}, spec.get("gpu_slots"))
                        return spec["id"]
                return Call()
        return Fn()

    def wait(self, pending, num_returns=1, timeout=None):   # the runner waits at most 1 s (a SIGTERM is seen)
        return pending[:1], pending[1:]

    def get(self, ref):
        self.events.append(("finished", ref))
        status = self.results[ref]
        return {"chain": ref, "status": status, "stages": {}, "host": "h", "failed": f"train@{ref}", "log": "x"}


def _fan_out(tmp_path, monkeypatch, keep: bool, gpus_per_task="auto", chains=None, costs=None, resources=None):
    events: list = []
    monkeypatch.setattr(runner, "make_worktree", lambda root, dest, cache=None: Path(dest).mkdir(parents=True))
    monkeypatch.setattr(runner, "remove_worktree", lambda root, dest: events.append(("removed", Path(dest).name)))
    monkeypatch.setattr(runner, "cache_dir", lambda root: str(tmp_path / "cache"))
    chains = chains or [Chain("short", ["train@short"]), Chain("long", ["train@long"]), Chain("mid", ["train@mid"])]
    costs = costs or {"train@short": StageCost(10.0, 0.25, True), "train@long": StageCost(1000.0, 1.0, True),
                      "train@mid": StageCost(100.0, 0.5, True)}
    ray = FakeRay({c.id: "failed" if c.id == "mid" else "done" for c in chains}, events)
    rt = SimpleNamespace(gpus_per_task=gpus_per_task, cpus_per_task=1.0, task_retries=0, nproc=1)
    state = tmp_path / "state"
    (state / "logs").mkdir(parents=True)
    # a local Ray of 2 GPUs: runner.start_ray declares a slot per GPU (sentlab.parallel.gpus)
    resources = resources or {"GPU": 2.0, "CPU": 4.0, **slot_resources(2)}
    res = runner.fan_out(ray, tmp_path, Plan([], chains, [], [], []), rt, state, resources,
                         False, "r", costs=costs, keep_worktrees=keep)
    return ray, events, res


def test_fan_out_submits_longest_first_with_each_chains_share_and_removes_a_worktree_as_its_chain_ends(
        tmp_path, monkeypatch):
    ray, events, res = _fan_out(tmp_path, monkeypatch, keep=False)
    assert [s[0] for s in ray.submitted] == ["long", "mid", "short"]
    # each share on the GPU with the most room left: the whole GPU 0 for long, then GPU 1 shared
    assert ray.placed == {"long": ({"sentlab_gpu_0": 1.0}, [0]), "mid": ({"sentlab_gpu_1": 0.5}, [1]),
                          "short": ({"sentlab_gpu_1": 0.25}, [1])}
    # each finished chain's copy goes before the next chain's result is read; the failed one's stays
    assert events == [("finished", "long"), ("removed", "long"), ("finished", "mid"), ("finished", "short"),
                      ("removed", "short")]
    assert {k: v["status"] for k, v in res.items()} == {"long": "done", "mid": "failed", "short": "done"}


def test_keep_worktrees_keeps_them_and_a_number_keeps_todays_share(tmp_path, monkeypatch):
    ray, events, _ = _fan_out(tmp_path, monkeypatch, keep=True, gpus_per_task=1.0)
    assert [s[0] for s in ray.submitted] == ["long", "mid", "short"]
    # a whole GPU each: short waits for a free GPU and gets the one long gave back
    assert ray.placed == {"long": ({"sentlab_gpu_0": 1.0}, [0]), "mid": ({"sentlab_gpu_1": 1.0}, [1]),
                          "short": ({"sentlab_gpu_0": 1.0}, [0])}
    assert events[0] == ("finished", "long") and [e for e in events if e[0] == "removed"] == []


def test_four_quarter_shares_go_to_four_gpus_first(tmp_path, monkeypatch):
    """Issue #65 §4: Ray alone puts four 0.25-GPU tasks on GPU 0 of four; the coordinator spreads them, then doubles
    up from GPU 0 again."""
    chains = [Chain(f"m{i}", [f"train@m{i}"]) for i in range(6)]
    costs = {f"train@m{i}": StageCost(100.0 - i, 0.25, True) for i in range(6)}
    ray, _, _ = _fan_out(tmp_path, monkeypatch, keep=True, chains=chains, costs=costs,
                         resources={"GPU": 4.0, "CPU": 8.0, **slot_resources(4)})
    assert {c: placed[1] for c, placed in ray.placed.items()} == {"m0": [0], "m1": [1], "m2": [2], "m3": [3],
                                                                  "m4": [0], "m5": [1]}
    assert all(n == 0 for _, n in ray.submitted)   # no GPU of Ray's (it would choose GPU 0 for each)


def test_at_most_the_tasks_the_cpus_hold_are_placed_at_once(tmp_path, monkeypatch):
    """runtime.cpus_per_task caps how many chains run at once (CPU / cpus_per_task): the third chain is placed
    when the first ends, against the GPUs' room then (GPU 0 free again: the lowest of the empty ones)."""
    chains = [Chain(f"m{i}", [f"train@m{i}"]) for i in range(3)]
    costs = {f"train@m{i}": StageCost(100.0 - i, 0.25, True) for i in range(3)}
    ray, _, _ = _fan_out(tmp_path, monkeypatch, keep=True, chains=chains, costs=costs,
                         resources={"GPU": 4.0, "CPU": 2.0, **slot_resources(4)})
    assert {c: placed[1] for c, placed in ray.placed.items()} == {"m0": [0], "m1": [1], "m2": [0]}


def test_a_cluster_without_slots(tmp_path, monkeypatch):
    """Nodes started without sentlab's slots: whole GPUs through Ray's own GPU resource; a fraction is refused,
    naming the `ray start` flag (Ray would pack every fraction onto GPU 0)."""
    ray, _, _ = _fan_out(tmp_path / "whole", monkeypatch, keep=True, gpus_per_task=1.0,
                         resources={"GPU": 2.0, "CPU": 4.0})
    assert ray.submitted == [("long", 1.0), ("mid", 1.0), ("short", 1.0)] and ray.placed["long"] == ({}, None)
    with pytest.raises(SentlabError, match=r"sentlab_gpu_0.*ray start|ray start.*sentlab_gpu_0"):
        _fan_out(tmp_path / "frac", monkeypatch, keep=True, resources={"GPU": 2.0, "CPU": 4.0})


def test_runtime_gpus_per_task_accepts_auto_or_a_number():
    assert RuntimeParams(gpus_per_task="auto").gpus_per_task == "auto"
    assert RuntimeParams(gpus_per_task=0.25).gpus_per_task == 0.25
    with pytest.raises(ValueError):
        RuntimeParams(gpus_per_task="half")


def test_nproc_against_the_gpus_a_task_holds():
    for nproc, g in ((2, 1.0), (2, 0.5), (4, 2.0)):
        with pytest.raises(SentlabError) as e:
            check_nproc(RuntimeParams(nproc=nproc, gpus_per_task=g))
        assert "runtime.nproc" in str(e.value) and "runtime.gpus_per_task" in str(e.value)
    for nproc, g in ((1, 0.25), (2, 2.0), (2, 4.0), (4, "auto")):
        check_nproc(RuntimeParams(nproc=nproc, gpus_per_task=g))
    check_nproc(RuntimeParams(nproc=2, gpus_per_task=1.0, device="cpu"))   # CPU ranks: no GPU to hold


def test_sentlab_run_exits_2_when_nproc_exceeds_the_tasks_gpus(tmp_path):
    (tmp_path / "params.yaml").write_text("runtime: {nproc: 2, gpus_per_task: 0.5}\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, "-m", "sentlab.cli", "run", "--jobs", "2"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "runtime.nproc: 2" in out.stderr and "runtime.gpus_per_task: 0.5" in out.stderr
    assert "Traceback" not in out.stderr
