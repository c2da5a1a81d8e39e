"""The campaign's dress rehearsal (issue #54 §8): ``make repro`` of paper-lite against a local upstream, offline.

``python benchmarks/rehearsal.py --workdir DIR [--keep] [--targets STAGE ...] [--base paper]``

1. A local upstream on 127.0.0.1 (``tests/upstream.py``) serving synthetic files in the real formats and layout
   (``tests/synthetic_upstream.py``: SimCSE's wiki1m of exactly 1,000,000 lines, its NLI csv, the SentEval tar with
   STS12-16/STS-B/SICK and the seven transfer tasks at their release record counts, GLUE's five zips, QQP's tsv,
   AskUbuntu's two files, GloVe's zip, NLTK's index and packages).
2. A scratch copy of the repository in ``DIR/repo`` (:func:`sentlab.preflight.scratch.make_scratch`: what a fresh
   clone holds, no dvc.lock) with the user profile ``profiles/rehearsal.yaml``.
3. ``make repro PROFILE=rehearsal`` there (``make -o <venv>/.installed``: the venv running this script is used
   as it is; the env target would otherwise ``pip install -e`` the scratch copy into it), with
   ``SENTLAB_UPSTREAM`` pointing at the server and no ``SENTLAB_DATA_MIRROR``: every data file comes through the
   real download code (:mod:`sentlab.assets.download`), into the scratch folder's own caches. ``--targets``: ``dvc
   repro`` of those stages (and what they need) in place of the whole pipeline, then the report.
4. The table of stages (stage, status, seconds) from the run's log, ``sentlab status``, and the report's first
   lines, into ``DIR/rehearsal.md``.

Every difference from paper-lite (``profiles/rehearsal.yaml`` is ``extends: paper-lite`` plus exactly these):

- the preflight's slice (:func:`sentlab.preflight.slice_edits`, its default :data:`sentlab.preflight.SLICE`):
  ``prepare.size`` 1,200 sentences drawn from the 1,000,000 lines (the download refuses any other line count for
  wiki1m, so the corpus is whole and no ``prepare.accept_size`` is needed), 3 training steps with one dev
  evaluation, batch 8, 40 STS-B dev pairs, 40 pairs per evaluation task, one process, each method line's own caps
  (its ``slice_caps``), GLUE at one seed and as many steps, the BERT-flow fit's steps, and ``runtime.device:
  cpu`` (paper-lite states ``cuda``: the stand-ins train on the CPU, said so in the profile file; without it every
  stage would stop, as a GPU profile does where torch sees no GPU: :mod:`sentlab.runtime.device`);
- the synthetic data's sizes: 60 pairs per STS/SICK file, 200 rows per GLUE split, 400 QQP rows, 20 AskUbuntu
  queries, 2,000 NLI triples, GloVe vectors for 5,000 words.

Not as paper-lite runs them:

- **backbones**: tiny hub-shaped stand-ins (``sentlab standin``: the real architecture, key names and tokenizer
  files; roberta-base's stand-in BPE; hidden 32, 2 layers, 2 heads) of every hub model paper-lite loads
  (bert-base-uncased, roberta-base, distilbert-base-uncased; paper-lite names no bert-large), put into the scratch
  Hugging Face cache (``HF_HUB_CACHE``) in the hub's cache layout, found by ``snapshot_download`` there: NOT served
  as the hub over HTTP (``HF_ENDPOINT`` points at the local server all the same, so no call leaves the machine);
- **NLTK**: its packages are put into the scratch ``NLTK_DATA`` from the server's files, not through NLTK's
  downloader: NLTK 3.10's SSRF filter refuses every loopback address (``nltk.pathsec.validate_network_url``).
  The tagger and treebank packages are ``/work/shared/nltk_data``'s zips; ``stopwords`` and PaSeR's WordNet
  (WordNet 3.0's database format over the synthetic vocabulary: ``synthetic_upstream.wordnet_zip``) are generated.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "benchmarks"), str(REPO / "src")]

import synthetic_upstream as su  # noqa: E402
import upstream  # noqa: E402
from stage_times import run_streaming, stage_durations  # noqa: E402

RUNNING = re.compile(r"Running stage '([^']+)'")
FAILED = re.compile(r"failed to run: |failed to reproduce '")   # dvc repro --keep-going / without it


def stage_table(log_path: Path, total: float) -> list[tuple[str, str, float]]:
    """(stage, ok | failed, seconds) of every stage the run's log shows running; a stage failed when dvc's
    failure line follows its "Running stage" line."""
    from stage_times import log_starts

    _, starts = log_starts(log_path)
    failed, current = set(), None
    for line in log_path.read_text(errors="replace").splitlines():
        m = RUNNING.search(line)
        if m:
            current = m.group(1)
        elif current and FAILED.search(line):
            failed.add(current)
    return [(name, "failed" if name in failed else "ok", s) for name, s in stage_durations(starts, total)]


def render(rows, total: float, head: list[str], status: str, rc: int, cmd: str) -> str:
    out = [f"Command: `{cmd}`; exit {rc}; total {total:.0f} s ({total / 60:.1f} min).", "",
           "| stage | status | seconds |", "|---|---|---|"]
    out += [f"| {n} | {st} | {s:.1f} |" for n, st, s in rows]
    out += ["", "The report's first lines:", "", "```", *head, "```", "", "`sentlab status`:", "", "```",
            status.rstrip(), "```"]
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", required=True, type=Path)
    ap.add_argument("--keep", action="store_true", help="keep DIR/repo after the run (default: removed)")
    ap.add_argument("--targets", nargs="*", default=None, help="dvc repro these stages only, then the report")
    ap.add_argument("--base", default="paper-lite", help="the profile profiles/rehearsal.yaml extends (paper: its "
                                                         "seeds and ablations too; with --targets, a part of it)")
    args = ap.parse_args()
    work = args.workdir.resolve()
    scratch = work / "repo"
    if scratch.exists():
        shutil.rmtree(scratch)
    work.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    with upstream.serve() as up:
        t0 = time.perf_counter()
        info = su.populate(up)
        env = su.prepare_workdir(REPO, scratch, up, base=args.base)
        env["PYTHONPATH"] = str(scratch / "src")
        setup = time.perf_counter() - t0
        if args.targets is None:
            venv = Path(py).parent.parent   # this venv, never re-installed: `-o` keeps make's env target off it
            cmd = ["make", "-o", f"{venv}/.installed", "repro", f"PROFILE={su.PROFILE}", f"VENV={venv}",
                   f"SHARED={scratch / '.no-shared'}"]
        else:
            subprocess.run([py, "-m", "sentlab.cli", "profile", su.PROFILE], cwd=scratch, env=env, check=True)
            cmd = [py, "-m", "dvc", "repro", "--keep-going", *args.targets]
        rc, total, _ = run_streaming(cmd, scratch, env, work / "repro.log")
        if args.targets is not None:
            subprocess.run([py, "pipeline/report.py"], cwd=scratch, env=env)
        status = subprocess.run([py, "-m", "sentlab.cli", "status"], cwd=scratch, env=env, capture_output=True,
                                text=True)
        downloads = sorted({p for p, _ in up.requests})
    rows = stage_table(work / "repro.log", total)
    index = scratch / "reports" / "index.md"
    head = index.read_text().splitlines()[:8] if index.is_file() else ["(no reports/index.md)"]
    md = render(rows, total, head, status.stdout + status.stderr, rc, " ".join(cmd))
    md += (f"\nSet-up (synthetic upstream, scratch copy, stand-ins): {setup:.0f} s. wiki1m served: "
           f"{info['wiki1m_lines']:,} lines, sha256 {info['wiki1m_sha256']}. Paths requested from the upstream: "
           f"{len(downloads)}.\n")
    (work / "rehearsal.md").write_text(md)
    print(md)
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
