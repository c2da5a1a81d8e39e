"""The SLURM recipe (scripts/slurm/, docs/slurm.md) for real, on a one-node SLURM on 127.0.0.1 (issue #65 §3).

    python benchmarks/slurm_local.py --workdir /tmp/slurmrun [--reference /tmp/serial] [--json out.json]

Needs root, Debian's ``slurm-wlm`` and ``munge`` (``apt-get install -y slurm-wlm munge``); exits 2 naming what is
missing. It starts the local SLURM (``scripts/local_slurm.sh start``, unless one runs), clones this repository into
``--workdir`` on the smoke profile with one longer training (``--long``: ``methods.ptbert`` trains 100 steps, so
that a time limit can fall inside it; the same edit in the reference) and submits the three jobs of
``scripts/slurm/submit.sh`` with CPU tasks (``GPUS_PER_NODE=0``):

1. the CPU job (profile, sources, prepare, annotate);
2. the dependent GPU job (``--dependency=afterok``): Ray on the node, every chain through ``sentlab run --address
   --shared-fs --no-final``. Once the long training has made a few steps, its time limit is set (``scontrol update
   TimeLimit``) to end about two minutes later, so SLURM's ``--signal=B:TERM@120`` arrives during that training:
   the batch shell's trap stops the run (the training writes its resume checkpoint), and requeues the job; once the
   job is pending again its time limit is put back, and the second start resumes the training from its checkpoint;
3. the final job (restore from the run cache, report, export).

Checks (each True/False; exit 1 when one fails): the GPU job started after the CPU job ended; it was requeued once
by its trap; the training stopped at step K by SIGTERM and the second start resumed from step K
(``models/<m>/sentlab.json``: ``resumed_from_step``); no training or evaluation ran again in the final job; ``dvc
status`` clean; every metrics file (``reports/metrics/**.json``) equal to the serial reference's (``--reference``: a
workspace where ``dvc repro`` ran on the same params; without it, one is made and run here), the commit id and dirty
flag of the code (``fingerprint.sentlab_commit``, ``sentlab_dirty``) excepted when the two workspaces are at different
commits. The jobs' times are printed. ``--attach CPU,GPU,FINAL`` follows and checks a submission already made.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NEEDS = ("sbatch", "scontrol", "squeue", "slurmctld", "slurmd", "munged")
LONG = ("ptbert", "  ptbert: {}", "  ptbert: {epochs: 4, max_steps: 100, eval_every: 50}")
PROVENANCE_KEYS = {"sentlab_commit", "sentlab_dirty"}   # fingerprint: the code's commit, uncommitted changes


def missing_resources() -> list[str]:
    return [b for b in NEEDS if shutil.which(b) is None]


def sh(cmd: list[str], cwd=None, env=None, check=True) -> str:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if check and r.returncode:
        raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r.stdout


def workspace(dest: Path, env: dict) -> None:
    """A clone of this repository's HEAD on the smoke profile with the long training (``LONG``)."""
    if not dest.exists():
        sh(["git", "clone", "-q", str(REPO), str(dest)])
        (dest / ".venv").symlink_to((REPO / ".venv").resolve() if (REPO / ".venv").exists()
                                    else Path(sys.executable).parents[1])
    sh([sys.executable, "-m", "sentlab.cli", "profile", "smoke"], cwd=dest, env=env)
    params = (dest / "params.yaml").read_text()
    if LONG[2] not in params:
        assert LONG[1] + "\n" in params, f"{dest}/params.yaml has no line {LONG[1]!r} to lengthen"
        (dest / "params.yaml").write_text(params.replace(LONG[1] + "\n", LONG[2] + "\n"))


def env_for(ws: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ws / "src"), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env["PATH"] = f"{ws / '.venv' / 'bin'}{os.pathsep}{env['PATH']}"
    return env


def job(jid: str, env: dict) -> dict:
    out = sh(["scontrol", "show", "job", "-o", jid], env=env, check=False)
    return dict(re.findall(r"(\w+)=(\S*)", out))


def seconds(t: str) -> int:   # RunTime: [D-]HH:MM:SS
    d, _, hms = t.rpartition("-")
    h, m, s = (int(x) for x in hms.split(":"))
    return int(d or 0) * 86400 + h * 3600 + m * 60 + s


def metrics(ws: Path) -> dict:
    root = ws / "reports" / "metrics"
    return {p.relative_to(root).as_posix(): json.loads(p.read_text()) for p in sorted(root.rglob("*.json"))}


def strip(x, keys):
    if isinstance(x, dict):
        return {k: strip(v, keys) for k, v in x.items() if k not in keys}
    if isinstance(x, list):
        return [strip(v, keys) for v in x]
    return x


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, required=True, help="the SLURM run's workspace (a clone; made if absent)")
    ap.add_argument("--reference", type=Path, help="a serial run's workspace on the same params (made and run when "
                                                   "absent)")
    ap.add_argument("--json", type=Path, help="write the results here too")
    ap.add_argument("--keep-slurm", action="store_true", help="leave the local SLURM running afterwards")
    ap.add_argument("--attach", metavar="CPU,GPU,FINAL", help="the job ids of a submission of --workdir already made: "
                                                             "follow and check them instead of submitting")
    args = ap.parse_args()
    miss = missing_resources()
    if miss:
        print(f"slurm_local: needs SLURM and munge (missing: {', '.join(miss)}): apt-get install -y slurm-wlm munge, "
              f"as root", file=sys.stderr)
        return 2
    env = {**os.environ, "SLURM_CONF": os.environ.get("SLURM_CONF", "/tmp/sentlab-slurm/slurm.conf")}
    started = "already running" not in sh([str(REPO / "scripts/local_slurm.sh"), "start"], env=env)
    ws = args.workdir.resolve()
    wenv = {**env_for(ws), "SLURM_CONF": env["SLURM_CONF"]}
    workspace(ws, wenv)
    ref = (args.reference or ws.with_name(ws.name + "-serial")).resolve()
    if not ref.exists():   # an existing one is used as it is (it may still be running: compared at the end)
        workspace(ref, env_for(ref))
        t0 = time.time()
        sh(["nice", "-n", "10", sys.executable, "-m", "dvc", "repro"], cwd=ref, env=env_for(ref))
        print(f"serial reference: dvc repro in {ref}, {time.time() - t0:.0f} s", flush=True)
    import yaml

    assert yaml.safe_load((ref / "params.yaml").read_text()) == yaml.safe_load((ws / "params.yaml").read_text()), \
        f"the reference {ref} has other params than {ws}"

    sub = {**wenv, "PROFILE": "smoke", "GPUS_PER_NODE": "0", "CPUS_PER_NODE": str(os.cpu_count()),
           "CPU_JOB_CPUS": str(os.cpu_count()), "TIME": "60", "SIGNAL_S": "120", "RAY_PORT": "6391",
           "MLFLOW_PORT": "5091"}
    t_submit = time.time()
    cpu, gpu, final = args.attach.split(",") if args.attach else \
        sh(["nice", "-n", "10", "scripts/slurm/submit.sh"], cwd=ws, env=sub).split()
    print(f"submitted: cpu {cpu}, gpu {gpu} (afterok:{cpu}), final {final} (afterok:{gpu})", flush=True)
    log = ws / ".dvc/tmp/sentlab/logs" / f"train@{LONG[0]}.log"
    limited = restored = None
    while True:
        time.sleep(5)
        g, f = job(gpu, wenv), job(final, wenv)
        if g.get("JobState") == "RUNNING" and limited is None and log.is_file():
            steps = re.findall(rf"{LONG[0]}:\s+\d+%\|[^|]*\|\s*(\d+)/", log.read_text(errors="replace"))   # tqdm
            if steps and int(steps[-1]) >= 5:
                limit = seconds(g["RunTime"]) // 60 + 3   # ends in 2 to 3 minutes: SIGTERM (@120 s) in 0 to 1 minute
                sh(["scontrol", "update", f"JobId={gpu}", f"TimeLimit={limit}"], env=wenv)
                limited = {"at_step": int(steps[-1]), "run_s": seconds(g["RunTime"]), "time_limit_min": limit}
                print(f"gpu job at {g['RunTime']}, {LONG[0]} at step {steps[-1]}: TimeLimit={limit}", flush=True)
        if limited and restored is None and int(g.get("Restarts", 0)) >= 1:
            sh(["scontrol", "update", f"JobId={gpu}", "TimeLimit=60"], env=wenv)
            restored = time.time()
            print(f"gpu job requeued ({g.get('JobState')}): TimeLimit back to 60", flush=True)
        if f.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT") or \
                g.get("JobState") in ("FAILED", "CANCELLED", "TIMEOUT"):
            break
        if time.time() - t_submit > 3 * 3600:
            print("slurm_local: 3 hours without an end", file=sys.stderr)
            break
    jobs = {name: job(j, wenv) for name, j in (("cpu", cpu), ("gpu", gpu), ("final", final))}
    gpu_log = (ws / f"slurm-sentlab-gpu-{gpu}.log").read_text(errors="replace")
    prev = ws / ".dvc/tmp/sentlab/logs.previous" / f"train@{LONG[0]}.log"
    stopped = re.search(r"stopped by SIGTERM after step (\d+) of (\d+)", prev.read_text(errors="replace")
                        if prev.is_file() else "")
    info = json.loads((ws / "models" / LONG[0] / "sentlab.json").read_text()) \
        if (ws / "models" / LONG[0] / "sentlab.json").is_file() else {}
    final_log = (ws / ".dvc/tmp/sentlab/logs/final.log").read_text(errors="replace") \
        if (ws / ".dvc/tmp/sentlab/logs/final.log").is_file() else ""
    a, b = metrics(ref), metrics(ws)
    same_commit = sh(["git", "rev-parse", "HEAD"], cwd=ref) == sh(["git", "rev-parse", "HEAD"], cwd=ws)
    keys = set() if same_commit else PROVENANCE_KEYS
    differ = sorted(k for k in set(a) | set(b) if strip(a.get(k), keys) != strip(b.get(k), keys))
    checks = {
        "all_jobs_completed": all(j.get("JobState") == "COMPLETED" for j in jobs.values()),
        "gpu_after_cpu": jobs["gpu"].get("StartTime", "") >= jobs["cpu"].get("EndTime", "~"),
        "requeued_once_by_the_trap": int(jobs["gpu"].get("Restarts", 0)) == 1
        and "time limit near" in gpu_log and "requeued: the next start resumes" in gpu_log,
        "training_stopped_by_sigterm": bool(stopped),
        "resumed_from_that_step": bool(stopped) and info.get("resumed_from_step") == int(stopped.group(1)),
        "nothing_trained_again_in_final": not re.search(r"^Running stage '(train|evaluate)", final_log, re.M),
        "dvc_status_clean": all(v == ["always changed"] for v in json.loads(    # sources: always_changed
            sh([sys.executable, "-m", "dvc", "status", "--json"], cwd=ws, env=wenv) or "{}").values()),
        "metrics_equal_to_serial": bool(a) and not differ,
    }
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "workdir": str(ws), "reference": str(ref),
           "same_commit": same_commit, "ignored_keys": sorted(keys), "metrics_files": len(a), "differ": differ,
           "limit": limited, "stopped_at_step": stopped and int(stopped.group(1)),
           "resumed_from_step": info.get("resumed_from_step"),
           "jobs": {n: {k: j.get(k) for k in ("JobId", "JobState", "Restarts", "SubmitTime", "StartTime", "EndTime",
                                               "RunTime", "TimeLimit", "NumCPUs")} for n, j in jobs.items()},
           "checks": checks}
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    if started and not args.keep_slurm:
        sh([str(REPO / "scripts/local_slurm.sh"), "stop"], env=env)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
