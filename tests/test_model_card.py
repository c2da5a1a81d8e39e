"""The model card (exports/<m>/README.md): Hugging Face front matter with model-index, and the parts
the issue asks for, rendered from the pipeline's records (seeds/CIs/fingerprint only when recorded)."""

from __future__ import annotations

import yaml

from sentlab.hub.card import TASKS, model_card

METRICS = {"model": "posbow_adv", "STS12": 60.5, "STS13": 70.25, "STS14": 65.0, "STS15": 75.0, "STS16": 72.0,
           "STSBenchmark": 71.0, "SICKRelatedness": 66.0, "Avg": 68.54, "STSBenchmark-dev": 77.7,
           "extra_rows": {"posbow_adv_pos": {"STS12": 30.0, "Avg": 31.0}}}
INFO = {"method": "posbow_adv", "pooling": "cls", "channels": {"bow": [0, 192], "pos": [192, 384]},
        "run_key": "abc123", "best_stsb_dev": 77.7, "best_step": 40}


def _card(**extra):
    return model_card("posbow_adv", dict(INFO), {**METRICS, **extra}, {"adv_lambda": 0.1}, {"lr": 3e-5},
                      "quick", "sentence-transformers/all-MiniLM-L6-v2", "train@posbow_adv", summary="SimCSE + POS/BOW")


def test_front_matter_is_hugging_face_model_index():
    card = _card()
    assert card.startswith("---\n")
    meta = yaml.safe_load(card.split("---\n")[1])
    assert meta["library_name"] == "sentence-transformers" and meta["base_model"].endswith("all-MiniLM-L6-v2")
    results = meta["model-index"][0]["results"]
    assert [r["dataset"]["name"] for r in results] == list(TASKS)
    assert results[1]["metrics"][0] == {"type": "spearman_cosine", "value": 70.25,
                                        "name": "Spearman correlation of cosine similarity (x100)"}


def test_metadata_is_huggingface_hubs_model_card_data():
    """The front matter is huggingface_hub's ModelCardData: the library reads the seven results back."""
    from huggingface_hub import ModelCard

    data = ModelCard(_card()).data
    assert data.model_name == "posbow_adv" and data.base_model.endswith("all-MiniLM-L6-v2")
    assert [(r.dataset_name, r.metric_type, r.metric_value, r.dataset_split) for r in data.eval_results] == [
        (t, "spearman_cosine", METRICS[t], "test") for t in TASKS]


def test_every_method_class_carries_its_paper_and_the_card_reads_it():
    from sentlab.methods import registered

    for mid, cls in registered().items():
        assert cls.paper, mid
        card = model_card(mid, dict(INFO, method=mid), dict(METRICS), {}, None, "quick", "bert-base-uncased",
                          f"train@{mid}")
        assert f"Paper: {cls.paper}." in card
        assert (f"```bibtex\n{cls.citation}\n```" in card) if cls.citation else "no published BibTeX" in card
    assert "Tan, Haochen" in registered()["moco_srl"].citation and registered()["l2p"].citation is None
    assert registered()["simcse_sup"].citation == registered()["simcse"].citation


def test_card_body_names_method_results_params_command_and_citation():
    card = _card()
    assert "| posbow_adv | 60.50 | 70.25 | 65.00 | 75.00 | 72.00 | 71.00 | 66.00 | 68.54 |" in card
    assert "| posbow_adv_pos | 30.00 | – |" in card
    assert "adv_lambda: 0.1" in card and "run_key: abc123" in card
    assert "dvc repro train@posbow_adv && dvc repro export" in card
    assert 'channel="pos"' in card and "trust_remote_code=True" in card and "pip install sentlab" in card
    assert "@inproceedings{gao2021simcse" in card          # built on SimCSE: its BibTeX
    assert "## Environment" not in card and "Seeds" not in card and "95% CI" not in card


def test_seeds_ci_and_fingerprint_are_rendered_when_recorded():
    """The keys the pipeline writes: the evaluate stage's `ci95`, `STSBenchmark-dev`; the export stage's
    `seed_rows` (reports/metrics/<m>-s<seed>.json of the other seeds)."""
    s43 = {**{k: METRICS[k] + 1.0 for k in TASKS}, "Avg": 69.54}
    s44 = {**{k: METRICS[k] + 2.0 for k in TASKS}, "Avg": 70.54}
    card = _card(ci95={"STS12": [59.0, 62.0], "Avg": [67.0, 70.0]}, seed_rows={"posbow_adv-s43": s43,
                                                                              "posbow_adv-s44": s44},
                 fingerprint={"torch": "2.13.0", "cpu": "x86_64"})
    assert "| 95% CI | [59.00, 62.00] | – |" in card and "[67.00, 70.00] |" in card
    assert "| posbow_adv-s43 | 61.50 | 71.25 |" in card
    # mean ± sample std over the 3 seeds: STS12 60.5/61.5/62.5 -> 61.50 ± 1.00; Avg 68.54/69.54/70.54
    assert "| mean ± std (3 seeds) | 61.50 ± 1.00 | 71.25 ± 1.00 |" in card and "69.54 ± 1.00 |" in card
    assert "`posbow_adv-s43`, `posbow_adv-s44`" in card and "STS-B dev: 77.70." in card
    assert "## Environment" in card and "torch: 2.13.0" in card


def test_export_stage_passes_the_evaluated_seeds_of_a_model(tmp_path, monkeypatch):
    """pipeline/export.py: the card of `simcse` gets simcse-s43's row (evaluated), not a not-run seed's marker
    nor another model whose name starts alike."""
    import importlib.util
    import json
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("export_stage", Path(__file__).parents[1] / "pipeline" / "export.py")
    export = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(export)
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    for name, status in (("simcse", "evaluated"), ("simcse-s43", "evaluated"),
                         ("simcse-s44", "not run in this profile"), ("simcse-sup", "evaluated"),
                         ("simcse-s43-x", "evaluated")):
        (metrics / f"{name}.json").write_text(json.dumps({"status": status, "Avg": 1.0}))
    monkeypatch.setattr(export, "METRICS", metrics)
    assert list(export.seed_metrics("simcse")) == ["simcse-s43"]
    # a seed the active profile does not train (another profile's file left in reports/metrics) is not a row
    assert export.seed_metrics("simcse", {"simcse-s43": False, "simcse-s44": True}) == {}
    assert export.seed_metrics("simcse-s43") == {}
