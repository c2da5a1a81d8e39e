"""Stage `resolve_params`: the active profile's values, one file per params key -> data/params/,
and the code each kind of stage executes -> data/params/code/<kind>.json.

Every other stage depends on the files of the keys it reads and on its kind's code file, so DVC
re-runs a stage only when the values *in force* for it, or the code it runs, change (not when
another profile's block, or a module it never imports, is edited).

It runs before every other stage, so it is also where stale ``stage_lines`` (dvc.yaml's stage lists,
which DVC read before this stage ran) stop the run: see :func:`sentlab.config.check_stage_lines`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from sentlab.config import (RESOLVED_DIR, check_stage_lines, load_all_profiles, load_params, read_yaml, shadowed_edits,
                            write_resolved)
from sentlab.errors import SentlabError
from sentlab.pipeline_util import run_stage
from sentlab.provenance import stage_code_files


def refuse_shadowed_edits(params_path: str = "params.yaml", lock_path: str = "dvc.lock") -> None:
    """An edit of a section key that the active profile overrides would not take effect (``dvc exp run
    -S methods.paser.decoder_layers=4`` on the paper profile would still train 6 layers while ``dvc exp
    show`` records 4): refuse it, naming the profile key to edit instead. The previous values are
    this stage's params in ``dvc.lock``."""
    lock = Path(lock_path)
    if not lock.is_file():
        return
    previous = (((yaml.safe_load(lock.read_text(encoding="utf-8")) or {}).get("stages") or {})
                .get("resolve_params", {}).get("params", {}).get(params_path))
    if not previous:
        return
    raw = read_yaml(params_path)
    profile = raw.get("profile", "quick")
    keys = shadowed_edits(raw, previous, profile)
    if keys:
        raise SentlabError(
            f"params.yaml: {', '.join(f'`{k}`' for k in keys)} changed since the last run, but the active profile "
            f"`{profile}` sets {'it' if len(keys) == 1 else 'them'} in `profiles.{profile}`, so the edit would not "
            f"take effect. Edit the profile's key instead, e.g. `dvc exp run -S profiles.{profile}.{keys[0]}=VALUE`, "
            f"or switch the profile (`make repro PROFILE=...`); revert the edit of the section to run as before.")


def main() -> None:
    refuse_shadowed_edits()
    load_all_profiles()
    params = load_params()
    check_stage_lines(read_yaml("params.yaml"), params)
    n = write_resolved(params, extra=stage_code_files())
    print(f"resolve_params: profile {params.profile}: {n} files in {RESOLVED_DIR}/")


if __name__ == "__main__":
    sys.exit(run_stage(main))
