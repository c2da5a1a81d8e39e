"""A new method is its module, its test and one profile line (docs/adding-a-method.md).

The fixture ``tests/fixtures/added_method/mean_simcse.py`` is put on ``sentlab.methods``' search
path, as a file in ``src/sentlab/methods/`` would be, and one line ``  mean_simcse: {}`` is added to
``methods`` in a copy of profiles/quick.yaml, from which ``sentlab profile quick`` writes params.yaml (training it:
its name in that profile's ``train.methods`` too). Nothing else is edited (no file of src/ or the pipeline names it):
``sentlab methods`` lists it, DVC has its train and evaluate stages, its training run is an MLflow run named after
the params its class names (``run_name_params``), and the report lists its model with its class's paper Avg
(``paper_avg``) beside.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
import yaml

from sentlab.methods.blocks import method_params
import sentlab.methods as M
from sentlab.config import load_params
from _support.sts_tables import three_score_table as _table
from _support.training import factory, fake_dev_eval, make_root

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "added_method"


@pytest.fixture
def added(monkeypatch):
    M.registered()  # the real methods first: they register once, in the real registry
    monkeypatch.setattr(M, "__path__", [*M.__path__, str(FIXTURE)])
    monkeypatch.setattr(M, "_REGISTRY", dict(M._REGISTRY))
    monkeypatch.setattr(M, "_LOADED", False)
    yield M.registered()["mean_simcse"]
    sys.modules.pop("sentlab.methods.mean_simcse", None)


PROFILE_LINE = "  mean_simcse: {}"


def with_line(tmp_path: Path, train: bool = False) -> Path:
    """A copy of profiles/ with the one line added to profiles/quick.yaml's ``methods`` (and, with ``train``, the
    method's name in its ``train.methods``), then params.yaml and models.yaml written from it by ``sentlab profile
    quick``; returns the params.yaml."""
    from sentlab.stages.profiles import set_profile

    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    quick = tmp_path / "profiles" / "quick.yaml"
    lines = quick.read_text().split("\n")
    lines.insert(lines.index("methods:") + 1, PROFILE_LINE)       # the one profile line
    if train:
        i = next(i for i, x in enumerate(lines) if x.startswith("  methods: ["))
        lines[i] = lines[i].replace("]", ", mean_simcse]", 1)
    quick.write_text("\n".join(lines))
    shutil.copy(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    set_profile(tmp_path / "params.yaml", "quick")
    return tmp_path / "params.yaml"


def test_adding_it_touches_only_its_module_its_test_and_a_profile_line(added, tmp_path):
    """The profile gains one line; no file of the package, the pipeline or the profiles names the method (the
    run-name params and the paper Avg are on its class: no tracking.KEY_PARAMS or paper_numbers entry)."""
    import difflib

    with_line(tmp_path)
    before = (REPO / "profiles" / "quick.yaml").read_text().splitlines()
    after = (tmp_path / "profiles" / "quick.yaml").read_text().splitlines()
    changed = [x for x in difflib.unified_diff(before, after, lineterm="", n=0)
               if x[:1] in "+-" and not x.startswith(("+++", "---"))]
    assert changed == ["+" + PROFILE_LINE]
    assert method_params(load_params(tmp_path / "params.yaml"), "mean_simcse").temperature == 0.05
    named = [p for d in ("src", "pipeline", "profiles") for p in (REPO / d).rglob("*")
             if p.is_file() and p.suffix in (".py", ".yaml", ".json") and "mean_simcse" in p.read_text()]
    named += [REPO / f for f in ("dvc.yaml", "params.yaml", "models.yaml", "Makefile")
              if "mean_simcse" in (REPO / f).read_text()]
    assert named == []


def test_sentlab_methods_and_params_pick_it_up(added, tmp_path, capsys):
    from sentlab.cli import main

    assert main(["methods"]) == 0
    assert "mean_simcse" in capsys.readouterr().out
    params = load_params(with_line(tmp_path))
    assert method_params(params, "mean_simcse").temperature == 0.05
    from sentlab.stages.stage_list import stage_list_for

    assert "mean_simcse" not in stage_list_for(params)["models"]   # no stage until train.methods lists it


def test_its_model_card_cites_what_its_class_carries(added):
    """hub/card.py names no method: the new class's ``paper`` and ``citation`` reach its card."""
    from sentlab.hub.card import model_card

    card = model_card("mean_simcse", {"method": "mean_simcse", "pooling": "mean"}, {"STS12": 50.0}, {}, None,
                      "quick", "bert-base-uncased", "train@mean_simcse")
    assert "Paper: Mean-pooled SimCSE (sentlab's example method)." in card
    assert "```bibtex\n@misc{sentlab2026meansimcse," in card
    assert "mean_simcse" not in (REPO / "src" / "sentlab" / "hub" / "card.py").read_text()


def test_dvc_has_its_train_and_evaluate_stages_once_the_profile_trains_it(added, tmp_path):
    from sentlab.cli import main

    params_file = with_line(tmp_path, train=True)
    assert "mean_simcse" in yaml.safe_load((tmp_path / "models.yaml").read_text())["models"]
    assert main(["stages", "--params", str(params_file)]) == 0     # its stage list: models.yaml
    dvc = str(Path(sys.executable).with_name("dvc"))
    subprocess.run([dvc, "init", "--no-scm", "-q"], cwd=tmp_path, check=True)
    out = subprocess.run([dvc, "stage", "list"], cwd=tmp_path, check=True, capture_output=True, text=True).stdout
    stages = {line.split()[0] for line in out.splitlines() if line.strip()}
    assert {"train@mean_simcse", "evaluate@mean_simcse"} <= stages


def test_it_trains_logs_to_mlflow_and_reaches_the_report(added, tmp_path, tok, monkeypatch):
    from sentlab.evaluate.sts.runner import evaluate_encoders
    from sentlab.report.build import build_report
    from sentlab.train.run import train_method

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    params = load_params(with_line(tmp_path)).model_copy(deep=True)
    params.train = params.train.model_copy(update=dict(batch_size=8, max_length=16, max_steps=2, eval_every=1,
                                                       device="cpu", methods=["mean_simcse"]))
    root = make_root(tmp_path / "root")
    info = train_method(params, "mean_simcse", root=root, dev_eval=fake_dev_eval(), encoder_factory=factory(tok),
                        tracking=True, progress=False)
    assert (info["status"], info["pooling"], info["steps"]) == ("trained", "mean", 2)
    runs = mlflow.search_runs(experiment_names=["sentlab"], filter_string="tags.method = 'mean_simcse'",
                              output_format="list")
    assert len(runs) == 1 and runs[0].data.params["method.temperature"] == "0.05"
    # its run name carries the params its class names (run_name_params), the train batch and rate, the seed
    assert runs[0].info.run_name == "mean_simcse temperature=0.05 bs=8 lr=3e-05 seed=42"

    from sentlab.assets.resolve import load_model
    from sentlab.nn.encoder import SentenceEncoder

    model, tk = load_model(str(root / "models" / "mean_simcse"))
    enc = SentenceEncoder(model, tk, pooling="mean", name="mean_simcse")
    metrics = dict(evaluate_encoders({"mean_simcse": enc}, _table(), params), model="mean_simcse", kind="trained")
    (root / "reports" / "metrics").mkdir(parents=True)
    (root / "reports" / "metrics" / "mean_simcse.json").write_text(json.dumps(metrics))
    build_report(root, backbone="tiny", profile="quick")
    index = (root / "reports" / "index.md").read_text()
    assert "Evaluated models (1): `mean_simcse`" in index
    # the one-protocol table's row: its class's paper Avg beside, the source its class names
    table = (root / "reports" / "tables" / "unsupervised_one_protocol.md").read_text()
    row = next(x for x in table.splitlines() if x.startswith("|") and "mean_simcse" in x)
    assert "76.25" in row and "the example's stand-in paper number" in row
