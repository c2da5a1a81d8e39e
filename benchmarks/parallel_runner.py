"""The parallel runner (sentlab.parallel): measured and projected.

``--measure PROFILE`` (smoke or quick): the profile's pipeline from scratch in two temporary copies of the
repository, serial (``dvc repro``) and ``sentlab run --jobs 2 --gpus 2`` (two fake GPUs on a CPU machine),
wall-clock each and the ratio. Both copies train on ``--threads`` threads (``train.num_threads``, default 1: one
thread per job on two cores; a CPU training's last bits depend on its thread count, so the two runs must share it).
Then the checks (exit 1 if one fails; too long for CI's 20 minutes, so they are here and not in ``make test``):
every metrics file byte-identical (STS, transfer, GLUE); ``dvc status`` of the parallel copy clean; its final
``dvc repro`` ran only ``sources``, ``report`` and ``export`` (every parallel stage restored from the run cache,
none run twice); each task saw one GPU through CUDA_VISIBLE_DEVICES and both were used; ``sentlab status`` says
every stage is up to date.

``--project`` (default): the paper profile's projected makespan on 1, 4, 8 and 16 GPUs. Stage durations are the
preflight's per-stage projections (benchmarks/preflight-paper-cpu.md, then
benchmarks/preflight-paper-cpu-new-methods.md for the methods added since, its rows scaled to the first's load by
an anchor stage both ran; or ``--preflight``, repeated), each training's smoothed as the median over the seeds of
its method line (the same work; the 2-core projections vary with the load they were measured under); the stages
come from the paper profile's stage list (models.yaml: a chain per model, paser_sup's after paser's). Chains are
placed on the GPUs in submission order (Ray's FIFO) and longest first (LPT); the lower bound is max(critical path,
total / GPUs). Times are in the preflight's units (2-core CPU hours): the ratios carry over to GPUs, the hours
scale with ``--scale`` (GPU s per CPU s).

    PYTHONPATH=src python benchmarks/parallel_runner.py --project
    PYTHONPATH=src python benchmarks/parallel_runner.py --measure smoke
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the paper profile's preflight reports: every stage at 29251ea, then the methods added since (#40, #41)
PREFLIGHTS = [str(REPO / "benchmarks/preflight-paper-cpu.md"),
              str(REPO / "benchmarks/preflight-paper-cpu-new-methods.md")]
ROW = re.compile(r"^\|\s*([\w@.\-]+)\s*\|")


def hours(text: str) -> float | None:
    m = re.fullmatch(r"\s*(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?\s*", text or "")
    if not m or not any(m.groups()):
        return None
    h, mi, s = (int(x or 0) for x in m.groups())
    return h + mi / 60 + s / 3600


def new_name(old: str) -> str:
    """The preflight's stage names (dvc.yaml before d437bf5) as the stage list names them now."""
    kind, _, item = old.partition("@")
    if kind in ("train_seed", "evaluate_seed"):
        m, s = item.rsplit("-", 1)
        return f"{kind.split('_')[0]}@{m}-s{s}"
    return {"ablate": f"train@{item}", "evaluate_ablation": f"evaluate@{item}", "train_from": f"train@{item}",
            "evaluate_from": f"evaluate@{item}", "resolve_params": "sources"}.get(kind, old)


def preflight_hours(path: Path) -> dict[str, float | None]:
    """stage -> projected hours of a preflight report's table (its ``projected`` column, wherever it is)."""
    out: dict[str, float | None] = {}
    col = None
    for ln in path.read_text().splitlines():
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        if cells and cells[0] == "stage" and "projected" in cells:
            col = cells.index("projected")
        elif col is not None and len(cells) > col and ROW.match(ln):
            out[new_name(cells[0])] = hours(cells[col])
    return out


# per kind of stage, the stage both reports project that gives the scale between their loads (train@simcse: the
# same method in both; evaluate@ct: the one evaluate stage both ran)
ANCHORS = {"train": "train@simcse", "evaluate": "evaluate@ct", "evaluate_baseline": "evaluate@ct"}


def merged_estimates(paths: list[str]) -> dict[str, float | None]:
    """The first report's estimates, replaced by each later (newer) report's where it has a row, scaled per kind of
    stage by the ratio of an anchor stage both project (:data:`ANCHORS`; others: the median of the anchors): the
    reports were measured under other loads of the same 2 cores (train@simcse: 135.7 h at 29251ea, 782.4 h in the
    new methods' run, which shared the cores with a quick run)."""
    est = preflight_hours(Path(paths[0]))
    for path in paths[1:]:
        more = preflight_hours(Path(path))
        scales = {k: est[a] / more[a] for k, a in ANCHORS.items() if est.get(a) and more.get(a)}
        other = statistics.median(scales.values()) if scales else 1.0
        print(f"{Path(path).name}: its projections x " + ", ".join(f"{scales[k]:.3f} ({k}, by {ANCHORS[k]})"
                                                                    for k in scales) + f", x{other:.3f} otherwise")
        for stage, h in more.items():
            if h is not None:
                est[stage] = h * scales.get(stage.split("@")[0], other)
    return est


def paper_chains(est: dict[str, float | None]) -> tuple[dict, dict, float, float]:
    """(chain -> hours, chain -> the chain it waits for, shared hours, final hours) of the paper profile."""
    from sentlab.config.profile_files import profile_values
    from sentlab.config import validate
    from sentlab.stages.stage_list import stage_list_for

    lists = stage_list_for(validate(profile_values("paper", REPO / "profiles")))
    models = lists["models"]

    def line(m: str) -> str:
        return models[m]["own"] if m in models else m

    by_line: dict[tuple, list[float]] = {}
    for m in models:
        for kind in ("train", "evaluate"):
            v = est.get(f"{kind}@{m}")
            if v is not None:
                by_line.setdefault((kind, line(m)), []).append(v)
    every = {k: statistics.median([v for (kk, _), vs in by_line.items() if kk == k for v in vs])
             for k in ("train", "evaluate")}
    chains, needs = {}, {}
    guessed = sorted({line(m) for m in models for k in ("train", "evaluate") if (k, line(m)) not in by_line})
    if guessed:   # a method line the preflight report has no row for (newer than it): the median stage stands in
        print(f"no preflight estimate for {len(guessed)} method lines (the median train/evaluate stage stands in): "
              f"{', '.join(guessed)}")
    for m, e in models.items():
        chains[m] = sum(statistics.median(by_line.get((k, line(m)), [every[k]])) for k in ("train", "evaluate"))
        if e["init"].startswith("models/"):
            needs[m] = e["init"].split("/", 1)[1]
    for b in lists["baselines"]:
        chains[f"base-{b}"] = est.get(f"evaluate_baseline@{b}") or every["evaluate"]
    shared = sum(est.get(s) or 0 for s in ("sources", "prepare", "annotate"))
    final = sum(est.get(s) or 0 for s in ("report", "export"))
    return chains, needs, shared, final


def makespan(chains: dict, needs: dict, gpus: int, order: list[str]) -> float:
    """List scheduling: each chain, in ``order``, on the GPU free first, not before the chain it needs ends."""
    free = [0.0] * gpus
    heapq.heapify(free)
    end: dict[str, float] = {}
    todo = list(order)
    while todo:
        c = next(c for c in todo if needs.get(c) is None or needs[c] in end)
        todo.remove(c)
        start = max(heapq.heappop(free), end.get(needs.get(c), 0.0))
        end[c] = start + chains[c]
        heapq.heappush(free, end[c])
    return max(end.values())


def project(args) -> None:
    est = merged_estimates(args.preflight or PREFLIGHTS)
    chains, needs, shared, final = paper_chains(est)
    total = sum(chains.values())
    crit = max(chains[c] + (chains[needs[c]] if c in needs else 0) for c in chains)
    fifo = list(chains)
    lpt = sorted(chains, key=lambda c: -(chains[c] + sum(chains[d] for d, u in needs.items() if u == c)))
    serial = shared + total + final
    names = ", ".join(Path(p).name for p in args.preflight or PREFLIGHTS)
    print(f"paper profile: {len(chains)} chains ({sum(1 for c in chains if not c.startswith('base-'))} models), "
          f"stage estimates from {names} (median over a method line's seeds), x{args.scale} to GPU time\n")
    print("| GPUs | makespan, submission order | makespan, longest first | lower bound | speed-up (LPT) |")
    print("|---:|---:|---:|---:|---:|")
    for g in (1, 4, 8, 16):
        a = shared + makespan(chains, needs, g, fifo) + final
        b = shared + makespan(chains, needs, g, lpt) + final
        lb = shared + max(crit, total / g) + final
        print(f"| {g} | {a * args.scale:,.0f} h | {b * args.scale:,.0f} h | {lb * args.scale:,.0f} h | "
              f"{serial / b:.2f}x |")
    print(f"\ncritical path: shared stages {shared * args.scale:.1f} h + longest chain {crit * args.scale:,.0f} h + "
          f"report/export {final * args.scale:.1f} h; one after another: {serial * args.scale:,.0f} h")


def _copy(dest: Path) -> None:
    """A fresh clone's files (sentlab.preflight.scratch.make_scratch), committed with a fixed author and date."""
    from sentlab.preflight.scratch import make_scratch

    make_scratch(REPO, dest)
    fixed = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
             "GIT_COMMITTER_EMAIL": "b@b", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
             "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
    for cmd in (["add", "-A"], ["commit", "-qm", "b"]):
        subprocess.run(["git", *cmd], cwd=dest, env=fixed, check=True, capture_output=True)


def set_training_threads(params: Path, threads: int) -> None:
    """``train.num_threads: threads`` in a params.yaml that ``sentlab profile`` wrote (its comments kept)."""
    text = params.read_text()
    new, n = re.subn(r"^(  num_threads:)\s*\S+", rf"\g<1> {threads}", text, count=1, flags=re.M)
    if n != 1:
        sys.exit(f"{params}: no `train.num_threads` line to set")
    params.write_text(new)


def measure(args) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-parallel-"))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("SENTLAB_PARENT_RUN_ID", None)

    def env_of(repo: Path) -> dict:   # each copy logs to its own MLflow store
        return {**env, "MLFLOW_TRACKING_URI": f"sqlite:///{repo / 'mlflow.db'}"}

    out = {}
    runs = (("serial", ["-m", "dvc", "repro"]), ("jobs2", ["-m", "sentlab.cli", "run", "--jobs", "2", "--gpus", "2"]))
    for name, _ in runs:   # both copies before either runs: the same files, so the same commit id in the metrics
        repo = tmp / name
        repo.mkdir()
        _copy(repo)
        e = env_of(repo)
        subprocess.run([sys.executable, "-m", "sentlab.cli", "profile", args.measure], cwd=repo, env=e, check=True)
        set_training_threads(repo / "params.yaml", args.threads)
        subprocess.run(["git", "commit", "-qam", "profile"], cwd=repo, check=False, capture_output=True,
                       env={**e, **{k: "2026-01-01T00:00:00Z" for k in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE")},
                            **{k: "b" for k in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME")},
                            **{k: "b@b" for k in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL")}})
    for name, cmd in runs:
        repo = tmp / name
        e = env_of(repo)
        t0 = time.time()
        r = subprocess.run([sys.executable, *cmd], cwd=repo, env=e, capture_output=True, text=True)
        out[name] = time.time() - t0
        if r.returncode:
            sys.exit(f"{name} failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
        metrics = repo / "reports/metrics"   # the STS files and the suites' (transfer/, glue/, retrieval/)
        out[name + "_metrics"] = {p.relative_to(metrics).as_posix(): p.read_bytes() for p in metrics.rglob("*.json")}
    a, b = out["serial_metrics"], out["jobs2_metrics"]
    checks = {"metrics_bytes_identical": a == b, **parallel_checks(tmp / "jobs2", env_of(tmp / "jobs2"))}
    print(json.dumps({"profile": args.measure, "cores": os.cpu_count(), "train_threads": args.threads,
                      "serial_s": round(out["serial"], 1),
                      "jobs2_s": round(out["jobs2"], 1), "ratio": round(out["serial"] / out["jobs2"], 2),
                      "metrics_files": len(a), "checks": checks,
                      "differing_files": sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)),
                      "scratch": str(tmp)}, indent=1))
    failed = [k for k, ok in checks.items() if not ok]
    if failed:
        sys.exit(f"--measure {args.measure}: failed checks {failed}")


def parallel_checks(repo: Path, env: dict) -> dict[str, bool]:
    """What a parallel run promises beyond equal metrics (the module docstring), each check True or False."""
    from sentlab.parallel.graph import changed_stages, stage_names

    state = repo / ".dvc/tmp/sentlab"
    final = (state / "logs/final.log").read_text()
    ran = sorted(ln for ln in final.splitlines() if ln.startswith("Running stage"))
    tasks = [json.loads(p.read_text()) for p in (state / "stages").glob("*@*.json")]
    status = subprocess.run([sys.executable, "-m", "sentlab.cli", "status"], cwd=repo, env=env, capture_output=True,
                            text=True)
    return {"dvc_status_clean": not changed_stages(repo),
            "final_repro_ran_only_sources_report_export":
                ran == sorted(f"Running stage '{s}':" for s in ("sources", "report", "export")),
            "every_parallel_stage_restored": bool(tasks) and all(t["status"] == "restored" for t in tasks),
            "one_gpu_per_task_both_used": {t["cuda_visible_devices"] for t in tasks} == {"0", "1"},
            "sentlab_status_all_up_to_date": status.returncode == 0
            and f"{len(stage_names(repo))} up to date" in status.stdout}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measure", choices=["smoke", "quick"])
    ap.add_argument("--project", action="store_true")
    ap.add_argument("--threads", type=int, default=1, help="train.num_threads of both measured runs")
    ap.add_argument("--preflight", action="append",
                    help="a preflight.md (repeat: a later one's rows replace the earlier's, scaled by ANCHORS); "
                         "default: benchmarks/preflight-paper-cpu.md, then "
                         "benchmarks/preflight-paper-cpu-new-methods.md")
    ap.add_argument("--scale", type=float, default=1.0, help="GPU seconds per projected CPU second")
    args = ap.parse_args()
    if args.measure:
        measure(args)
    if args.project or not args.measure:
        project(args)


if __name__ == "__main__":
    main()
