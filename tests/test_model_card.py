"""The model card (exports/<m>/README.md): Hugging Face front matter with model-index, and the parts
the issue asks for, rendered from the pipeline's records (seeds/CIs/fingerprint only when recorded)."""

from __future__ import annotations

import yaml

from sentlab.export.card import TASKS, model_card

METRICS = {"model": "posbow_adv", "STS12": 60.5, "STS13": 70.25, "STS14": 65.0, "STS15": 75.0, "STS16": 72.0,
           "STSBenchmark": 71.0, "SICKRelatedness": 66.0, "Avg": 68.54, "stsb_dev": 77.7,
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
    card = _card(seeds=[1, 2, 3], ci={"STS12": [59.0, 62.0], "Avg": {"lo": 67.0, "hi": 70.0}},
                 fingerprint={"torch": "2.13.0", "cpu": "x86_64"})
    assert "| 95% CI | [59.00, 62.00] | – |" in card and "[67.00, 70.00] |" in card
    assert "Seeds: `[1, 2, 3]`." in card
    assert "## Environment" in card and "torch: 2.13.0" in card
