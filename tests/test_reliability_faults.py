"""Issue #36: faults a new user meets (non-finite params, unreadable weights, tar escapes, the resume
key, the embedding cache's temp files, evaluate outside the profile)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sentlab.config import resolve_profile, validate
from sentlab.errors import SentlabError

REPO = Path(__file__).resolve().parents[1]


def raw() -> dict:
    return yaml.safe_load((REPO / "params.yaml").read_text())


# --- every float param is finite ----------------------------------------------------------------
@pytest.mark.parametrize("path, value", [
    (("evaluate", "hard_subset", "pos_min_score"), float("nan")),
    (("train", "lr"), float("inf")),
    (("train", "max_grad_norm"), float("nan")),
    (("methods", "simcse", "temperature"), float("inf")),
    (("methods", "paser", "m"), float("-inf")),
])
def test_nan_and_infinity_are_refused_naming_the_key(path, value):
    r = raw()
    node = r
    for k in path[:-1]:
        node = node.setdefault(k, {})
    node[path[-1]] = value
    with pytest.raises(SentlabError, match=r"`" + r"\.".join(path) + r"`.*finite"):
        validate(resolve_profile(r))


def test_yaml_nan_in_params_file_exits_2(tmp_path, capsys):
    from sentlab.cli import main

    text = (REPO / "params.yaml").read_text().replace("pos_min_score: 4.0", "pos_min_score: .nan")
    assert ".nan" in text
    (tmp_path / "params.yaml").write_text(text)
    assert main(["params", "--params", str(tmp_path / "params.yaml")]) == 2
    assert "evaluate.hard_subset.pos_min_score" in capsys.readouterr().err
