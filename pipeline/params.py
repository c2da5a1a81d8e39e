"""Stage `resolve_params`: the active profile's values, one file per params key -> data/params/.

Every other stage depends on the files of the keys it reads, so DVC re-runs a stage only when
the values *in force* for it change (not when another profile's block is edited).
"""

from __future__ import annotations

import sys

from sentlab.config import RESOLVED_DIR, load_params, write_resolved
from sentlab.pipeline_util import run_stage


def main() -> None:
    params = load_params()
    n = write_resolved(params)
    print(f"resolve_params: profile {params.profile}: {n} files in {RESOLVED_DIR}/")


if __name__ == "__main__":
    sys.exit(run_stage(main))
