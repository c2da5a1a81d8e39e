"""Per-stage times of a fresh `dvc repro`, written into benchmarks/RESULTS.md's stage-time table.

    python benchmarks/stage_times.py [--profile quick] [--workdir DIR] [--readme README.md] [--no-readme]
                                     [--no-second-run] [--keep]
    python benchmarks/stage_times.py --from-log WORKDIR   # the table again from a kept run

Copies the working tree (tracked and untracked-but-not-ignored files, as a fresh clone of it
would hold; no data/, models/, reports/, dvc.lock, DVC cache or MLflow store) into a scratch
folder, switches it to ``--profile`` (``sentlab profile``), runs ``dvc repro`` there streaming its
output, and timestamps every ``Running stage '…'`` line: a stage's time runs from its line to the
next one (or to the end), so it includes DVC's hashing and lock update for that stage. Then a
second ``dvc repro`` with nothing changed is timed (target <= 10 s) unless ``--no-second-run``.

Stages are grouped: a ``foreach`` stage's instances (``train@simcse`` …) form ``train@*`` when
they trained/evaluated something, and every stage whose model the profile does not train (its
``models/<name>/sentlab.json`` or ``reports/metrics/<name>.json`` says "not run …") goes to
``markers``. Peak memory is the largest resident set of any process the run started
(``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``). The table replaces the README's section
between ``<!-- stage-times:begin -->`` and ``<!-- stage-times:end -->`` (appended at the end
when the markers are missing); ``--no-readme`` only prints it.

Run it on an otherwise idle machine. The quick profile trains with bf16 autocast, so its time depends on whether
the CPU has native bf16 (AVX-512 BF16 or AMX), which the table states; the measured runs, with and without, are
in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- stage-times:begin -->", "<!-- stage-times:end -->"
# a stage that runs, or that DVC's run cache restores (a fresh copy has no run cache, a re-run may)
RUNNING = re.compile(r"Running stage '([^']+)'|Stage '([^']+)' is cached")
MARKERS = "markers (not run in this profile)"
STARTUP = "dvc start-up"
WRAPUP = "dvc wrap-up"
RUN_JSON = "run.json"  # in --workdir: what the log does not hold (peak memory, the second run, exit code)


def copy_worktree(src: Path, dest: Path) -> None:
    """The files a fresh clone of the working tree holds (tracked + untracked not ignored), a new git repo,
    and no dvc.lock (a first run)."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=src, check=True,
                         capture_output=True).stdout.decode()
    for f in filter(None, out.split("\0")):
        if (src / f).is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / f, dest / f)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    (dest / "dvc.lock").unlink(missing_ok=True)


def run_streaming(cmd: list[str], cwd: Path, env: dict, log_path: Path) -> tuple[int, float, list[tuple[str, float]]]:
    """Run ``cmd`` echoing its output and saving it, timestamped, to ``log_path``; returns (exit code, wall
    seconds, the stage starts :func:`log_starts` reads from that log)."""
    t0 = time.perf_counter()
    with open(log_path, "w") as log, subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                                      stderr=subprocess.STDOUT, text=True, bufsize=1) as proc:
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            log.write(f"[{time.perf_counter() - t0:9.1f}] {line}")
        rc = proc.wait()
    return rc, time.perf_counter() - t0, log_starts(log_path)[1]


def stage_durations(starts: list[tuple[str, float]], total: float) -> list[tuple[str, float]]:
    """Each stage's time: from its start to the next stage's start (the last one: to the end); DVC's own
    start-up before the first stage is a row of its own."""
    ends = [t for _, t in starts[1:]] + [total]
    head = [(STARTUP, starts[0][1] if starts else total)]
    return head + [(name, end - t) for (name, t), end in zip(starts, ends)]


def output_name(stage: str) -> str:
    """The model / metrics name a foreach stage writes: the stage's key (``train@simcse-s43`` -> ``simcse-s43``);
    in logs of the earlier layout ``train_seed@simcse-43`` -> ``simcse-s43``."""
    kind, key = stage.split("@", 1)
    if kind in ("train_seed", "evaluate_seed"):
        method, _, seed = key.rpartition("-")
        if method and seed.isdigit():
            from sentlab.config.models import seed_name

            return seed_name(method, int(seed))
    return key


def log_starts(log_path: Path) -> tuple[float, list[tuple[str, float]]]:
    """(time of the last line, [(stage, seconds since start at its "Running stage" line)] + [(WRAPUP, time of
    the last "Updating lock file" line)]) from a ``repro.log`` written by :func:`run_streaming` (``[  t] line``)."""
    starts: list[tuple[str, float]] = []
    last_lock, end = None, 0.0
    for line in log_path.read_text(errors="replace").splitlines():
        m = re.match(r"\[\s*([0-9.]+)\] (.*)", line)
        if not m:
            continue
        now, text = float(m.group(1)), m.group(2)
        end = now
        r = RUNNING.search(text)
        if r:
            starts.append((r.group(1) or r.group(2), now))
        elif "lock file" in text:
            last_lock = now
    if starts and last_lock is not None and last_lock > starts[-1][1]:
        starts.append((WRAPUP, last_lock))  # the last stage ends at its lock update; DVC's wrap-up after
    return end, starts


def is_marker(stage: str, root: Path) -> bool:
    """Whether a stage only wrote a "not run in this profile" marker (its status file says so)."""
    if "@" not in stage:
        return False
    key = output_name(stage)
    for f in (root / "models" / key / "sentlab.json", root / "reports" / "metrics" / f"{key}.json"):
        if f.is_file():
            try:
                status = str(json.loads(f.read_text()).get("status", ""))
            except ValueError:
                continue
            if status and status not in ("trained", "evaluated"):
                return True
    return False


def group_of(stage: str, root: Path) -> str:
    if is_marker(stage, root):
        return MARKERS
    return stage.split("@", 1)[0] + "@*" if "@" in stage else stage


def group_table(durations: list[tuple[str, float]], root: Path) -> "OrderedDict[str, list[float]]":
    groups: OrderedDict[str, list[float]] = OrderedDict()
    for name, secs in durations:
        groups.setdefault(group_of(name, root), []).append(secs)
    return groups


def render(groups, total: float, peak_kb: int, profile: str, second: float | None, rc: int,
           slowest: Optional[list[tuple[str, float]]] = None, bf16: Optional[bool] = None) -> str:
    """The README section: one row per stage group, then the total. ``bf16``: whether the run's CPU had native
    bf16 (None: not recorded, a run before it was)."""
    when = _dt.date.today().isoformat()
    cpu = os.cpu_count()
    native = "" if bf16 is None else (", native bf16" if bf16 else ", no native bf16 (emulated)")
    lines = [BEGIN,
             f"Per-stage times of `dvc repro` on the `{profile}` profile in a fresh copy of the repository "
             f"({cpu} CPU cores, {platform.machine()}{native}, {when}; regenerate with "
             f"`python benchmarks/stage_times.py --profile {profile}`). "
             "A stage's time includes DVC's hashing and lock update for it.",
             "",
             "| stage group | stages | time (s) | share |",
             "|---|---:|---:|---:|"]
    for g, secs in sorted(groups.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"| `{g}` | {len(secs)} | {sum(secs):.0f} | {100 * sum(secs) / total:.0f} % |")
    n = sum(len(s) for g, s in groups.items() if g not in (STARTUP, WRAPUP))
    status = "" if rc == 0 else f" (dvc repro FAILED, exit {rc})"
    lines.append(f"| **total**{status} | {n} | **{total:.0f}** ({total / 60:.1f} min) | 100 % |")
    lines.append("")
    if slowest:
        top = sorted((d for d in slowest if d[0] not in (STARTUP, WRAPUP)), key=lambda d: -d[1])[:8]
        lines.append("Slowest stages: " + ", ".join(f"`{n}` {t:.0f} s" for n, t in top) + ".")
        lines.append("")
    lines.append(f"Peak memory (largest process): {peak_kb / 1024 ** 2:.2f} GB."
                 + (f" A second `dvc repro` with nothing changed: {second:.1f} s." if second is not None else ""))
    lines.append(END)
    return "\n".join(lines)


def update_readme(readme: Path, section: str) -> None:
    """Replace the marked section (or append it under a heading); written atomically."""
    text = readme.read_text()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## Stage times\n\n" + section + "\n"
    tmp = readme.with_name(readme.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, readme)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--workdir", type=Path, default=None, help="scratch folder (default: a new temporary one)")
    ap.add_argument("--readme", type=Path, default=REPO / "benchmarks" / "RESULTS.md")
    ap.add_argument("--no-readme", action="store_true", help="print the table only")
    ap.add_argument("--no-second-run", action="store_true", help="skip the nothing-changed `dvc repro`")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--from-log", type=Path, default=None, metavar="WORKDIR",
                    help="no run: render the table again from a kept --workdir (its repro.log, run.json and repo/)")
    args = ap.parse_args()
    if args.from_log:
        return rerender(args)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="sentlab-stage-times-"))
    repo = work / "repo"
    if repo.exists():
        sys.exit(f"{repo} exists: pass an empty --workdir (the run must start from a fresh copy)")
    repo.mkdir(parents=True)
    copy_worktree(REPO, repo)
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join([str(repo / "src"), *filter(None, [env.get("PYTHONPATH")])])  # the copy's code
    env["PYTHONUNBUFFERED"] = "1"  # DVC's "Running stage" lines must arrive when printed, not at exit
    env.setdefault("MLFLOW_TRACKING_URI", f"sqlite:///{work / 'mlflow.db'}")
    subprocess.run([sys.executable, "-m", "sentlab.cli", "profile", args.profile], cwd=repo, env=env, check=True)
    rc, total, starts = run_streaming([sys.executable, "-m", "dvc", "repro"], repo, env, work / "repro.log")
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    second = None
    if rc == 0 and not args.no_second_run:
        _, second, again = run_streaming([sys.executable, "-m", "dvc", "repro"], repo, env, work / "repro2.log")
        if again:
            print(f"warning: the second dvc repro ran {len(again)} stage(s): {[s for s, _ in again][:5]}")
    from sentlab.train.loop import cpu_has_native_bf16   # what sentlab.runtime.device refuses emulated bf16 on

    bf16 = cpu_has_native_bf16()
    (work / RUN_JSON).write_text(json.dumps({"rc": rc, "total_s": total, "peak_kb": peak_kb, "second_s": second,
                                             "native_bf16": bf16}))
    durations = stage_durations(starts, total)
    section = render(group_table(durations, repo), total, peak_kb, args.profile, second, rc, slowest=durations,
                     bf16=bf16)
    print(section)
    if not args.no_readme and rc == 0:
        update_readme(args.readme, section)
        print(f"updated {args.readme}")
    if not args.keep and args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"scratch copy kept in {work} (log: {work / 'repro.log'})")
    sys.exit(rc)


def rerender(args) -> None:
    """The table of a kept run (``--workdir ... --keep``), e.g. after a change to the grouping: the stage times
    from its ``repro.log``, the peak memory and the second run's time from its ``run.json``."""
    work = args.from_log
    try:
        run = json.loads((work / RUN_JSON).read_text())
    except (OSError, ValueError) as e:
        sys.exit(f"{work / RUN_JSON} is missing or unreadable ({e}): it is written at the end of a run with --workdir "
                 f"and --keep; re-render only such a run.")
    total, starts = log_starts(work / "repro.log")
    durations = stage_durations(starts, total)
    section = render(group_table(durations, work / "repo"), total, run["peak_kb"], args.profile, run["second_s"],
                     run["rc"], slowest=durations, bf16=run.get("native_bf16"))
    print(section)
    if not args.no_readme and run["rc"] == 0:
        update_readme(args.readme, section)
        print(f"updated {args.readme}")


if __name__ == "__main__":
    main()
