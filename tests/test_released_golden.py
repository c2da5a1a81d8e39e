"""sentlab's methods against the authors' released code, by golden values (issue #53 §2).

CI cannot fetch the authors' repositories, so ``benchmarks/released/<case>.py --released DIR --write-golden``
recorded the released code's loss and a few gradient norms on the harness's fixed batch and backbone in
``tests/fixtures/released_golden/<case>.json`` (each file names its repository, commit, setting and the command
that regenerates it). Here sentlab's side of every case (the same module's ``sentlab_outputs``) must give the
same numbers: loss within 1e-5, each named gradient norm within 1e-4 relative. A change that breaks a method's
equivalence with the code behind its paper's number fails here. The comparison itself:
benchmarks/RESULTS.md, "sentlab against the released code".
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "benchmarks" / "released"
GOLDEN = sorted((REPO / "tests" / "fixtures" / "released_golden").glob("*.json"))


def _case(name: str):
    spec = importlib.util.spec_from_file_location(f"released_case_{name}", CASES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    import sys

    sys.path.insert(0, str(CASES))   # the case imports _harness beside it
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(CASES))
    return mod


def test_every_case_module_has_its_golden_values():
    cases = {p.stem for p in CASES.glob("*.py") if not p.name.startswith("_") and p.stem != "run_all"}
    assert cases == {p.stem for p in GOLDEN}


@pytest.mark.parametrize("golden", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_sentlab_equals_the_released_code_on_the_golden_batch(golden, one_thread):
    rec = json.loads(golden.read_text())
    case = _case(rec["case"])
    case.set_determinism()
    ours = case.sentlab_outputs()
    assert abs(ours.loss - rec["loss"]) <= 1e-5, (
        f"{rec['case']}: loss {ours.loss:.8f}, the released code ({rec['repository']}@{rec['commit'][:7]}, "
        f"{rec['setting']}) {rec['loss']:.8f}")
    for k, v in rec.get("extra", {}).items():
        assert abs(ours.extra[k] - v) <= 1e-5, (k, ours.extra[k], v)
    norms = ours.norms(rec["grad_norms"])
    for name, want in rec["grad_norms"].items():
        assert math.isclose(norms[name], want, rel_tol=1e-4), (name, norms[name], want)
