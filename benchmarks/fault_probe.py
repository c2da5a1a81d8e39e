"""Fault injection on the smoke profile (issue #36): what a failed or interrupted run leaves, and the way back.

    python benchmarks/fault_probe.py [--workdir DIR] [--keep] [--json OUT.json]

Copies the working tree and the data mirror into a scratch folder (``SENTLAB_DATA_MIRROR`` is the copy, so
the probe may edit it), runs the smoke profile's ``dvc repro`` once, then injects one fault after another:
kills (SIGKILL of the whole process group) during annotate, train, evaluate and export, a corrupt resume
state and model, bad params, a bad and a changed source file, a comment in the training code, a no-op
params change, two ``dvc repro`` at once. Each row: the command, its exit status, the message (sentlab's
one paragraph or DVC's error, shortened), what changed on disk under data/, models/, reports/,
exports/, checkpoints/ and .sentlab_cache/ (files added / removed / changed, by folder), what ran, and the MLflow
runs of every stage by status afterwards. A closing line counts what the whole probe left: runs still RUNNING,
temporary files (``*.tmp``, ``.*.old``) anywhere in the copy, rows whose output held a traceback. Issue #64's rows
(:func:`round4_rows`) close the probe; ``--only-round4`` runs the first smoke run and those rows alone.
The table is printed as Markdown (and written as JSON with ``--json``). The smoke run takes a few minutes
on 2 cores; the whole probe about 15-25 minutes. Nothing outside the scratch folder is touched.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WATCHED = ("data", "models", "reports", "exports", "checkpoints", ".sentlab_cache")
STORE = "sqlite:///{}/mlflow.db"   # the copy's MLflow store


def copy_worktree(dest: Path) -> None:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                         capture_output=True).stdout.decode()
    for f in filter(None, out.split("\0")):
        if (REPO / f).is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, dest / f)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    (dest / "dvc.lock").unlink(missing_ok=True)


def snapshot(root: Path) -> dict[str, tuple]:
    out = {}
    for top in WATCHED:
        for p in (root / top).rglob("*") if (root / top).exists() else ():
            if p.is_file():
                st = p.stat()
                out[p.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def _group(path: str) -> str:
    parts = path.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def disk_change(before: dict, after: dict) -> str:
    """``+N -M ~K`` by folder (two levels), the folders with most changes first."""
    kinds = {"+": [p for p in after if p not in before], "-": [p for p in before if p not in after],
             "~": [p for p in after if p in before and after[p] != before[p]]}
    if not any(kinds.values()):
        return "nothing"
    by: dict[str, Counter] = {}
    for k, paths in kinds.items():
        for p in paths:
            by.setdefault(_group(p), Counter())[k] += 1
    items = sorted(by.items(), key=lambda kv: -sum(kv[1].values()))
    text = ", ".join(f"{g} " + " ".join(f"{k}{c[k]}" for k in "+-~" if c[k]) for g, c in items[:6])
    return text + (f", … {len(items) - 6} more folders" if len(items) > 6 else "")


def message(out: str) -> str:
    """sentlab's one paragraph, else DVC's ERROR line, else the last line (shortened)."""
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    for pat in ("sentlab: error:", "ERROR:", "Traceback"):
        hit = [ln for ln in lines if pat in ln]
        if hit:
            m = hit[-1] if pat != "Traceback" else lines[-1]
            return m[:260] + ("…" if len(m) > 260 else "")
    return (lines[-1][:160] if lines else "")


def ran(out: str) -> list[str]:
    return re.findall(r"Running stage '([^']+)'", out)


class Probe:
    def __init__(self, work: Path, mirror: Path):
        self.work, self.mirror, self.rows = work, mirror, []
        bindir = str(Path(sys.executable).parent)
        self.env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""),
                        PYTHONPATH=str(work / "src"), SENTLAB_DATA_MIRROR=str(mirror), HF_HUB_OFFLINE="1",
                        SENTLAB_LOG="WARNING", MLFLOW_TRACKING_URI=STORE.format(work))
        self.env.pop("SENTLAB_PARENT_RUN_ID", None)

    def sh(self, argv: list[str], timeout: float = 1800) -> tuple[int, str]:
        p = subprocess.run(argv, cwd=self.work, env=self.env, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr

    def dvc(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "dvc", *args]

    def row(self, fault: str, argv: list[str], note: str = "", kill_when=None, timeout: float = 1800) -> tuple:
        """Run ``argv`` (killing its process group once ``kill_when()`` is true), record one row."""
        before = snapshot(self.work)
        t0 = time.time()
        if kill_when is None:
            rc, out = self.sh(argv, timeout)
        else:
            p = subprocess.Popen(argv, cwd=self.work, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, start_new_session=True)
            while p.poll() is None and not kill_when() and time.time() - t0 < timeout:
                time.sleep(0.2)
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            out = p.communicate()[0]
            rc = p.returncode
        cmd = " ".join(a if a != sys.executable else "python" for a in argv).replace("python -m dvc", "dvc")
        stages = ran(out)
        msg = "(killed: SIGKILL)" if rc == -signal.SIGKILL else message(out) if rc else ""
        r = {"fault": fault, "command": cmd, "exit": rc, "message": msg,
             "ran": ", ".join(stages) if len(stages) <= 6 else f"{len(stages)} stages ({stages[0]} … {stages[-1]})",
             "disk": disk_change(before, snapshot(self.work)), "note": note, "seconds": round(time.time() - t0, 1),
             "traceback": "Traceback (most recent call last)" in out, "mlflow": self.mlflow_states("")}
        self.rows.append(r)
        print(f"[{r['seconds']:7.1f}s] {fault}: exit {rc}; ran: {r['ran'] or '-'}; disk: {r['disk']}", flush=True)
        return rc, out

    def status(self, fault: str) -> str:
        rc, out = self.row(fault, self.dvc("status"))
        stale = [ln.rstrip(":") for ln in out.splitlines()
                 if ln and not ln.startswith((" ", "\t")) and ln.endswith(":")]
        self.rows[-1]["note"] = ("up to date" if "up to date" in out else "stale: " + (", ".join(stale[:8]) +
                                 (f" … ({len(stale)})" if len(stale) > 8 else "")))
        return out

    def edit(self, path: Path, old: str, new: str) -> str:
        text = path.read_text(encoding="utf-8")
        assert old in text, (path, old)
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
        return text

    def mlflow_states(self, where: str = "tags.stage = 'train'") -> str:
        """The probe's own store (its SQLite file), whatever MLFLOW_TRACKING_URI a row points its stages at."""
        code = (f"import mlflow,collections;c=mlflow.MlflowClient({STORE!r}.format({str(self.work)!r}));"
                "e=c.get_experiment_by_name('sentlab');"
                "print(dict(collections.Counter(r.info.status for r in c.search_runs([e.experiment_id],"
                f"{where!r}))) if e else {{}})")
        return (self.sh([sys.executable, "-c", code], timeout=600)[1].strip().splitlines() or ["?"])[-1]

    def summary(self) -> dict:
        """What the whole probe left: MLflow runs by status (every stage), temporary files (``*.tmp``) anywhere in the
        copy outside .git/.dvc, and the rows whose output held a Python traceback."""
        temps = sorted(p.relative_to(self.work).as_posix() for pattern in ("*.tmp", ".*.old")
                       for p in self.work.rglob(pattern) if p.relative_to(self.work).parts[0] not in (".git", ".dvc"))
        return {"mlflow_runs": self.mlflow_states(""), "temp_files": temps,
                "tracebacks": [r["fault"] for r in self.rows if r["traceback"]]}


def script_running(work: Path, script: str, min_age: float = 1.0, also=None):
    """True once a process runs ``script`` (a stage's entry point, e.g. ``pipeline/annotate.py``) in ``work`` for
    ``min_age`` seconds (its imports done, its outputs removed by DVC), and ``also()`` holds when given: a kill fires
    on the event it targets, however loaded the machine is, never at a fixed second."""
    seen: dict[int, float] = {}

    def check() -> bool:
        now = time.time()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmd = (proc / "cmdline").read_bytes().split(b"\0")
                cwd = os.readlink(proc / "cwd")
            except OSError:
                continue
            if cwd == str(work) and any(c.decode(errors="replace").endswith(script) for c in cmd):
                seen.setdefault(int(proc.name), now)
        return any(now - t >= min_age for t in seen.values()) and (also is None or also())
    return check


def checkpoint_written(work: Path, name: str):
    """True once a resume checkpoint of ``name`` newer than now is written."""
    t0 = time.time()
    return lambda: any(f.stat().st_mtime > t0 for f in (work / "checkpoints" / name).glob("*/last/state.json"))


def sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def run_probe(work: Path, only_round4: bool = False, reuse: bool = False) -> list[dict]:
    mirror = work.parent / "mirror"
    if not reuse:   # reuse: a copy an earlier probe made (its first run cut short by the row's time limit)
        shutil.copytree(os.environ.get("SENTLAB_DATA_MIRROR", REPO.parent / "shared" / "data"), mirror)
        copy_worktree(work)
    P = Probe(work, mirror)
    if not reuse:
        P.sh([sys.executable, "-m", "sentlab.cli", "profile", "smoke"])
        # a resume checkpoint at every dev evaluation (the profile's 10 minutes apart: none in a smoke training, so
        # the train kills below would wait for a checkpoint that never comes)
        P.edit(work / "params.yaml", "  checkpoint_minutes: 10 ", "  checkpoint_minutes: 0 ")
    rc, out = P.row("none (first run)" if not reuse else "none (the first run, completed)", P.dvc("repro"),
                    timeout=3600)
    if rc:
        print(out[-4000:])
        raise SystemExit("the smoke run failed: no faults injected")
    if only_round4:
        round4_rows(P, work)
        return P.rows, P.summary()
    P.row("none (no-op re-run)", P.dvc("repro"))

    # two runs at once: the second is refused by DVC's lock
    bg = subprocess.Popen(P.dvc("repro", "-f", "-s", "annotate"), cwd=work, env=P.env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, start_new_session=True)
    holds = script_running(work, "pipeline/annotate.py", min_age=0.0)   # the first holds DVC's lock once it runs
    t0 = time.time()
    while not holds() and bg.poll() is None and time.time() - t0 < 600:
        time.sleep(0.2)
    P.row("a second `dvc repro` while one runs", P.dvc("repro"))
    bg.wait()

    # kills: annotate, train (then resume), evaluate, export
    P.row("SIGKILL during annotate", P.dvc("repro", "-f", "-s", "annotate"),
          kill_when=script_running(work, "pipeline/annotate.py"))
    P.row("re-run after the annotate kill", P.dvc("repro"))
    weights = work / "models/simcse/model.safetensors"
    uninterrupted = sha(weights)
    P.row("SIGKILL during train (after its first checkpoint)", P.dvc("repro", "-f", "-s", "train@simcse"),
          kill_when=checkpoint_written(work, "simcse"))
    P.rows[-1]["note"] = "MLflow train runs: " + P.mlflow_states()
    P.row("resume: the stage again", P.dvc("repro", "-f", "-s", "train@simcse"))
    info = json.loads((work / "models/simcse/sentlab.json").read_text())
    P.rows[-1]["note"] = (f"resumed_from_step={info.get('resumed_from_step')}; weights identical to the uninterrupted "
                          f"run: {sha(weights) == uninterrupted}; MLflow train runs: {P.mlflow_states()}")
    P.row("SIGKILL during train, again", P.dvc("repro", "-f", "-s", "train@simcse"),
          kill_when=checkpoint_written(work, "simcse"))
    state = next((work / "checkpoints" / "simcse").glob("*/last/state.pt"))
    state.write_bytes(state.read_bytes()[:1000])
    P.row("corrupt resume state.pt (truncated)", P.dvc("repro", "-f", "-s", "train@simcse"))
    shutil.rmtree(state.parent.parent)
    P.row("after `rm -r` of the named checkpoint folder", P.dvc("repro", "-f", "-s", "train@simcse"))
    P.rows[-1]["note"] = (f"weights identical to the uninterrupted run: {sha(weights) == uninterrupted}; "
                          f"MLflow train runs: {P.mlflow_states()}")
    P.row("re-run after the train faults", P.dvc("repro"))
    P.row("SIGKILL during evaluate", P.dvc("repro", "-f", "-s", "evaluate@simcse"),
          kill_when=script_running(work, "pipeline/evaluate.py", min_age=2.0))
    P.row("re-run after the evaluate kill", P.dvc("repro"))
    P.row("SIGKILL during export", P.dvc("repro", "-f", "-s", "export"),   # while it writes its staged folder
          kill_when=script_running(work, "pipeline/export.py", min_age=0.0,
                                   also=lambda: any(work.glob(".exports.*.tmp"))))
    P.row("re-run after the export kill", P.dvc("repro"))

    # a corrupt trained model; a failed stage; `dvc checkout`
    w = work / "models/simcse/model.safetensors"
    w.chmod(0o644)
    w.write_bytes(w.read_bytes()[:500])
    P.row("corrupt models/simcse/model.safetensors", P.dvc("repro", "-s", "evaluate@simcse"))
    if P.row("`dvc checkout` after the failed stage", P.dvc("checkout"))[0]:
        P.row("`dvc checkout --force`", P.dvc("checkout", "--force"))
    P.status("state after the checkout")

    # bad params
    params = work / "params.yaml"
    for old, new, what in (("  lr: 3.0e-5", "  lr: .inf", "train.lr: .inf"),
                           ("pos_min_score: 4.0", "pos_min_score: .nan", "hard_subset.pos_min_score: .nan"),
                           ("  weight_decay: 0.0", "  weight_decay: -1.0", "train.weight_decay: -1.0")):
        text = P.edit(params, old, new)
        P.row(f"bad params ({what})", P.dvc("repro"))
        params.write_text(text, encoding="utf-8")
    P.row("params restored", P.dvc("repro"))

    # sources: a bad line, then 200 changed gold scores
    dev = mirror / "STS/STSBenchmark/sts-dev.csv"
    orig = dev.read_text(encoding="utf-8")
    dev.write_text(orig + "a line with no tabs and no score\n", encoding="utf-8")
    P.row("bad line in the mirror's sts-dev.csv", P.dvc("repro"))
    dev.write_text(orig, encoding="utf-8")
    test = mirror / "STS/STSBenchmark/sts-test.csv"
    orig_test = test.read_text(encoding="utf-8")
    lines = orig_test.splitlines(keepends=True)
    for i in range(200):
        cols = lines[i].split("\t")
        cols[4] = f"{(float(cols[4]) + 1.0) % 5.0:.3f}"   # genre, file, year, id, SCORE, s1, s2
        lines[i] = "\t".join(cols)
    test.write_text("".join(lines), encoding="utf-8")
    P.status("200 STS-B test gold scores changed in the mirror")
    P.row("… `dvc repro prepare`", P.dvc("repro", "prepare"))
    P.status("… then `dvc status`")
    test.write_text(orig_test, encoding="utf-8")
    P.row("mirror restored: `dvc repro prepare`", P.dvc("repro", "prepare"))
    P.status("… then `dvc status`")

    # code and params that do not change the numbers
    loop = work / "src/sentlab/train/loop.py"
    text = P.edit(loop, "\ndef train_loop(", "\n# a comment\ndef train_loop(")
    P.row("a comment in src/sentlab/train/loop.py", P.dvc("repro", "sources"))
    P.status("… then `dvc status`")
    loop.write_text(text, encoding="utf-8")
    P.row("comment removed", P.dvc("repro", "sources"))
    text = P.edit(params, "  jobs: 2\n", "  jobs: 1\n")
    P.row("annotate.jobs 2 -> 1", P.dvc("repro"))
    params.write_text(text, encoding="utf-8")
    P.row("annotate.jobs back to 2", P.dvc("repro"))
    round4_rows(P, work)
    return P.rows, P.summary()


def _hung_server():
    """A TCP server on 127.0.0.1 that accepts and never answers (a hung tracking server); (uri, accepted, stop)."""
    import socket
    import threading

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.settimeout(0.2)
    accepted, held, stop = [0], [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
                accepted[0] += 1
            except socket.timeout:
                continue
        for c in held:
            c.close()
        sock.close()
    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{sock.getsockname()[1]}", accepted, stop


def round4_rows(P: Probe, work: Path) -> None:
    """Issue #64's faults: a params edit while a stage runs, a SIGTERM to `dvc repro`, a hung tracking server, a
    cache that cannot be written, an export cut between its renames, `sentlab push .`."""
    params = work / "params.yaml"
    text = params.read_text(encoding="utf-8")
    lr = re.search(r"\n  lr: (\S+)", text).group(1)

    before, t0 = snapshot(work), time.time()
    p = subprocess.Popen(P.dvc("repro", "-f", "-s", "train@simcse"), cwd=work, env=P.env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    started = script_running(work, "pipeline/train.py", min_age=8.0)   # its params read
    while p.poll() is None and not started() and time.time() - t0 < 600:
        time.sleep(0.2)
    params.write_text(text.replace(f"\n  lr: {lr}", "\n  lr: 5.0e-5", 1), encoding="utf-8")
    out = p.communicate(timeout=1800)[0]
    import yaml

    lock = yaml.safe_load((work / "dvc.lock").read_text(encoding="utf-8")) if (work / "dvc.lock").is_file() else {}
    locked = (((lock.get("stages") or {}).get("train@simcse") or {}).get("params") or {}).get("params.yaml", {})
    P.rows.append({"fault": f"params.yaml `train.lr` {lr} -> 5.0e-5 while train@simcse runs",
                   "command": "dvc repro -f -s train@simcse", "exit": p.returncode,
                   "message": message(out) if p.returncode else "", "ran": ", ".join(ran(out)),
                   "disk": disk_change(before, snapshot(work)), "seconds": round(time.time() - t0, 1),
                   "note": f"models/simcse exists: {(work / 'models/simcse').exists()}; dvc.lock's train@simcse "
                           f"train.lr: {locked.get('train.lr')}", "traceback": "Traceback" in out,
                   "mlflow": P.mlflow_states("")})
    params.write_text(text, encoding="utf-8")
    P.row("params restored: `dvc repro`", P.dvc("repro"))

    # SIGTERM to `dvc repro` (not its group): the stage must end with it
    p = subprocess.Popen(P.dvc("repro", "-f", "-s", "train@simcse"), cwd=work, env=P.env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    running = script_running(work, "pipeline/train.py", min_age=5.0)
    t0 = time.time()
    while p.poll() is None and not running() and time.time() - t0 < 600:
        time.sleep(0.2)
    p.terminate()
    p.wait(timeout=60)
    time.sleep(10)
    left = script_running(work, "pipeline/train.py", min_age=0.0)()
    P.rows.append({"fault": "SIGTERM to `dvc repro` during train@simcse", "command": "kill -TERM <dvc pid>",
                   "exit": p.returncode, "message": "", "ran": "train@simcse", "disk": "", "seconds": 0,
                   "note": f"the stage still runs 10 s later: {left}", "traceback": False,
                   "mlflow": P.mlflow_states("")})
    P.row("re-run after the SIGTERM", P.dvc("repro"))

    # a hung tracking server: one bounded probe per pipeline run
    uri, accepted, stop = _hung_server()
    saved = P.env.get("MLFLOW_TRACKING_URI")
    P.env["MLFLOW_TRACKING_URI"] = uri
    try:
        P.row("hung tracking server (accepts, never answers): `sentlab mlflow wrap -- dvc repro -f` of simcse",
              [sys.executable, "-m", "sentlab.cli", "mlflow", "wrap", "--", sys.executable, "-m", "dvc", "repro", "-f",
               "-s", "train@simcse", "evaluate@simcse"])
        P.rows[-1]["note"] = f"connections the server accepted: {accepted[0]}"
    finally:
        stop.set()
        P.env["MLFLOW_TRACKING_URI"] = saved
    P.row("tracking store back: `dvc repro`", P.dvc("repro"))

    # the embedding cache cannot be written (a file where its folder should be)
    cache = work / ".sentlab_cache" / "embeddings"
    shutil.rmtree(cache, ignore_errors=True)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("not a folder")
    rc, out = P.row("embedding cache not writable", P.dvc("repro", "-f", "-s", "evaluate@simcse"))
    P.rows[-1]["note"] = f"warned: {'could not store an entry' in out}"
    cache.unlink()

    # an export cut between its renames: exports/ moved aside, the new one complete but not renamed in
    (work / "exports").rename(work / ".exports.old")
    shutil.copytree(work / ".exports.old", work / ".exports.9999.tmp")
    P.row("export cut between its renames (.exports.old + .exports.*.tmp, no exports/)", P.dvc("repro"))
    P.rows[-1]["note"] = (f"exports/ back: {(work / 'exports' / 'index.md').is_file()}; .exports.old left: "
                          f"{(work / '.exports.old').exists()}")

    # `sentlab push .` in the workspace
    P.row("`sentlab push .` (the workspace)", [sys.executable, "-m", "sentlab.cli", "push", ".", "--repo-id",
                                                "my-lab/x", "--dry-run"])
    P.status("state after the round-4 faults")


def table(rows: list[dict]) -> str:
    out = ["| fault | command | exit | message | ran | on disk | MLflow runs after (all stages) | note |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r["fault"], f"`{r['command']}`", str(r["exit"]), r["message"], r["ran"], r["disk"],
                 r["mlflow"].strip("{}").replace("'", ""), r["note"]]
        out.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, help="scratch folder (default: a new temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    ap.add_argument("--only-round4", action="store_true", help="the first smoke run and issue #64's rows only")
    ap.add_argument("--reuse", action="store_true", help="--workdir holds an earlier probe's copy: complete its "
                                                         "first run there instead of copying again")
    args = ap.parse_args(argv)
    base = args.workdir or Path(tempfile.mkdtemp(prefix="sentlab-faults-"))
    work = base / "repo"
    work.mkdir(parents=True, exist_ok=args.reuse)
    try:
        rows, summary = run_probe(work, args.only_round4, args.reuse)
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(base, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=2) + "\n", encoding="utf-8")
    print(table(rows))
    print(f"\nAfterwards: MLflow runs by status (all stages) {summary['mlflow_runs']}; "
          f"{len(summary['temp_files'])} temporary file(s) left {summary['temp_files'][:10]}; "
          f"{len(summary['tracebacks'])} row(s) with a traceback {summary['tracebacks']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
