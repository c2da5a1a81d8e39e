"""benchmarks/stage_times.py's grouping: which stages were "not run" markers, from what they wrote."""

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("stage_times", REPO / "benchmarks" / "stage_times.py")
stage_times = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stage_times)


def test_seed_stages_are_grouped_by_the_model_they_wrote(tmp_path):
    """A seed stage's key is `<method>-<seed>` but its outputs are `<method>-s<seed>`: a not-run seed is a
    marker, a trained one stays in `train_seed@*` (the first table counted 104 seed markers as trainings)."""
    assert stage_times.output_name("train@simcse-s43") == "simcse-s43"
    assert stage_times.output_name("train_seed@simcse-43") == "simcse-s43"   # a log of the earlier layout
    assert stage_times.output_name("evaluate_seed@moco_srl-46") == "moco_srl-s46"
    assert stage_times.output_name("ablate@ptbert_m64") == "ptbert_m64"
    for name, status in (("simcse-s43", "trained"), ("ct-s43", "not run in this profile")):
        (tmp_path / "models" / name).mkdir(parents=True)
        (tmp_path / "models" / name / "sentlab.json").write_text(json.dumps({"status": status}))
    (tmp_path / "reports" / "metrics").mkdir(parents=True)
    (tmp_path / "reports" / "metrics" / "ct-s43.json").write_text(json.dumps({"status": "not run in this profile"}))
    durations = [("train_seed@simcse-43", 90.0), ("train_seed@ct-43", 0.8), ("evaluate_seed@ct-43", 3.0)]
    groups = stage_times.group_table(durations, tmp_path)
    assert dict(groups) == {"train_seed@*": [90.0], stage_times.MARKERS: [0.8, 3.0]}


def test_a_kept_log_renders_the_same_stage_times(tmp_path):
    (tmp_path / "repro.log").write_text(
        "[      2.0] Running stage 'prepare':\n[      5.0] Updating lock file 'dvc.lock'\n"
        "[      5.5] Running stage 'train@simcse':\n[     95.5] Updating lock file 'dvc.lock'\n[     96.0] done\n")
    end, starts = stage_times.log_starts(tmp_path / "repro.log")
    assert end == 96.0 and starts == [("prepare", 2.0), ("train@simcse", 5.5), (stage_times.WRAPUP, 95.5)]
    durations = stage_times.stage_durations(starts, end)
    assert durations == [(stage_times.STARTUP, 2.0), ("prepare", 3.5), ("train@simcse", 90.0),
                         (stage_times.WRAPUP, 0.5)]


def test_rerender_needs_the_runs_own_figures(tmp_path, capsys):
    """--from-log takes peak memory and the second run's time from the run's run.json, never from another
    run's README section: without it, a clear error."""
    import argparse
    import platform

    import pytest

    (tmp_path / "repro.log").write_text("[      2.0] Running stage 'prepare':\n[      5.0] done\n")
    args = argparse.Namespace(from_log=tmp_path, profile="quick", readme=tmp_path / "README.md", no_readme=True)
    with pytest.raises(SystemExit, match="run.json is missing"):
        stage_times.rerender(args)
    (tmp_path / "run.json").write_text('{"rc": 0, "total_s": 5.0, "peak_kb": 2097152, "second_s": 7.5}')
    stage_times.rerender(args)
    out = capsys.readouterr().out
    assert "Peak memory (largest process): 2.00 GB. A second `dvc repro` with nothing changed: 7.5 s." in out
    assert "| `prepare` | 1 | 3 | 60 % |" in out
    assert "bf16" not in out   # a run.json of before the CPU's bf16 was recorded: no claim either way
    (tmp_path / "run.json").write_text('{"rc": 0, "total_s": 5.0, "peak_kb": 2097152, "second_s": 7.5, '
                                       '"native_bf16": false}')
    stage_times.rerender(args)
    assert f"{platform.machine()}, no native bf16 (emulated)," in capsys.readouterr().out
