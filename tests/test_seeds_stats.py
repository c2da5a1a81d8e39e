"""Seeds as a pipeline axis, the statistics of the tables, and the report's profile filter."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from sentlab.config import load_params, validate
from sentlab.errors import SentlabError
from sentlab.evaluate.sts import stats as S
from sentlab.evaluate.sts.cosines import SCHEMA, confidence_intervals, read_cosines, write_cosines
from sentlab.evaluate.sts.stats import _average_ranks


# --- statistics ------------------------------------------------------------------------------------

def test_counted_ranks_equal_scipy_average_ranks():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 7, size=(5, 40))           # many ties
    np.testing.assert_array_equal(_average_ranks(codes, 7), sps.rankdata(codes, axis=1))


def test_spearman_and_its_ci_are_seeded_and_scipys():
    rng = np.random.default_rng(1)
    gold = np.round(rng.uniform(0, 5, 400), 1)
    cos = gold + rng.normal(0, 1.5, 400)
    ci = S.spearman_ci(cos, gold, seed=3)
    assert ci.value == pytest.approx(sps.spearmanr(cos, gold).statistic * 100, abs=1e-9)
    assert ci.low < ci.value < ci.high and len(ci.distribution) == S.N_RESAMPLES
    again = S.spearman_ci(cos, gold, seed=3)
    assert (again.low, again.high) == (ci.low, ci.high)
    assert (S.spearman_ci(cos, gold, seed=4).low, S.spearman_ci(cos, gold, seed=4).high) != (ci.low, ci.high)


def _models(rng, n, sigma_a, sigma_b):
    gold = np.round(rng.uniform(0, 5, n), 1)
    return gold + rng.normal(0, sigma_a, n), gold + rng.normal(0, sigma_b, n), gold


def test_a_planted_difference_is_significant():
    rng = np.random.default_rng(2)
    tasks = {f"t{i}": _models(rng, 400, 2.0, 1.2) for i in range(3)}     # B is truly better on every task
    res = S.paired_difference(tasks, seed=0)
    assert res["Avg"].diff < 0 and res["Avg"].significant and res["Avg"].high < 0
    assert all(res[t].significant for t in tasks)
    assert res["Avg"].diff == pytest.approx(np.mean([res[t].diff for t in tasks]))


def test_identical_models_come_out_significant_about_5_percent_of_the_time():
    rng = np.random.default_rng(3)
    perm, boot = [], []
    for i in range(200):
        a, b, g = _models(rng, 150, 1.5, 1.5)
        perm.append(S.paired_difference({"t": (a, b, g)}, seed=i, n_resamples=200)["Avg"].p)
        ia, ib = S.spearman_ci(a, g, seed=i, n_resamples=400), S.spearman_ci(b, g, seed=i, n_resamples=400)
        boot.append(S.difference_from_bootstrap(ia.distribution, ib.distribution, ia.value - ib.value).p)
    # the permutation test and the tables' shared-resample bootstrap
    for p in (perm, boot):
        rate = float(np.mean(np.asarray(p) < S.ALPHA))
        assert 0.015 <= rate <= 0.10, rate              # nominal 5 %; 200 repetitions: sd ≈ 1.5 points


def test_shared_resamples_give_the_paired_bootstrap():
    rng = np.random.default_rng(5)
    a, b, g = _models(rng, 300, 2.0, 1.0)
    ia, ib = S.spearman_ci(a, g, seed=7), S.spearman_ci(b, g, seed=7)
    d = S.difference_from_bootstrap(ia.distribution, ib.distribution, ia.value - ib.value)
    direct = S.paired_difference({"t": (a, b, g)}, seed=7, permutation=False)["t"]
    assert d.significant and d.high < 0
    assert d.diff == pytest.approx(direct.diff) and abs(d.low - direct.low) < 1.5 and abs(d.high - direct.high) < 1.5


def test_seed_tests_and_summaries():
    d = S.seed_difference([76.0, 76.4, 75.8], [74.1, 74.5, 73.9])
    assert d.significant and d.diff == pytest.approx(1.9)
    assert not S.seed_difference([76.0, 74.4, 75.8], [75.1, 76.5, 74.9]).significant
    s = S.seed_summary([75.0, 76.0, 77.0])
    assert (s.mean, s.std, s.n) == (76.0, 1.0, 3)
    half = sps.t.ppf(0.975, 2) * 1.0 * np.sqrt(1 + 1 / 3)
    assert (s.low, s.high) == pytest.approx((76 - half, 76 + half))
    assert s.text() == "76.00 ± 1.00 (3)"
    with pytest.raises(ValueError, match="at least 2 seeds"):
        S.seed_difference([1.0], [2.0, 3.0])


def _cosine_frame(rng, tasks=("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"),
                  sigma=1.5, n=120):
    rows = []
    for t in tasks:
        a, _, g = _models(np.random.default_rng(abs(hash(t)) % 1000), n, sigma, sigma)
        a = g + rng.normal(0, sigma, n)
        rows.append(pd.DataFrame({"task": t, "subset": "x", "pair": np.arange(n, dtype=np.int32), "cos": a, "gold": g,
                                  "cluster": np.arange(n, dtype=np.int32) // 3}))
    return pd.concat(rows, ignore_index=True)


def test_cosines_round_trip_and_task_cis(tmp_path):
    frame = _cosine_frame(np.random.default_rng(4))
    write_cosines(tmp_path / "m.parquet", frame)
    back = read_cosines(tmp_path / "m.parquet")
    pd.testing.assert_frame_equal(back, frame, check_dtype=False)
    ci = confidence_intervals(back, ["STS12", "STS13", "STS99"], seed=0)
    assert set(ci) == {"STS12", "STS13"}                 # Avg only when every task asked for has pairs
    ci7 = confidence_intervals(back, ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark",
                                      "SICKRelatedness"], seed=0)
    assert ci7["Avg"][0] < ci7["Avg"][1] and ci7["STS12"] == ci["STS12"]
    write_cosines(tmp_path / "empty.parquet", frame.iloc[:0])
    assert read_cosines(tmp_path / "empty.parquet") is None and [f.name for f in SCHEMA] == list(frame.columns)


# --- seeds in params --------------------------------------------------------------------------------

def _raw():
    import yaml

    return yaml.safe_load(open("params.yaml"))


def test_adding_a_seed_adds_only_its_own_stage_entry():
    from sentlab.stages.stage_list import stage_list_for

    raw = _raw()
    before = stage_list_for(validate(raw))["models"]
    raw["seeds"]["per_method"]["simcse"] = 4
    after = stage_list_for(validate(raw))["models"]
    assert sorted(set(after) - set(before)) == ["simcse-s45"] and all(after[k] == before[k] for k in before)
    assert before["simcse-s43"] == {"method": "simcse", "seed": 43, "line": "methods.simcse",
                                    "own": "methods.simcse", "variant": None, "init": "data/sources/model.json",
                                    "teachers": [], "reads": ["data/sources/model.json"] * 2}


def test_quick_trains_three_seeds_of_simcse_and_ptbert_paper_five_of_every_method():
    quick = load_params()
    assert quick.seeds.extra_seeds("simcse") == [43, 44] == quick.seeds.extra_seeds("ptbert")
    assert quick.seeds.extra_seeds("moco") == []
    paper = load_params(profile="paper")
    assert all(len(paper.seeds.extra_seeds(m)) == 4 for m in paper.methods)


@pytest.mark.parametrize("seeds,msg", [
    ({"pool": [43, 43]}, "repeats a seed"),
    ({"pool": [43], "count": 3}, "add seeds to seeds.pool"),
    ({"pool": [42, 43]}, "contains `seed`"),
    ({"per_method": {"paser_sup": 2}}, "paser_sup trains 2 seeds, paser 1"),   # its seed 43 starts from paser-s43
    ({"per_method": {"nope": 2}}, "no method line"),
])
def test_bad_seed_params_are_refused(seeds, msg):
    raw = _raw()
    raw["seeds"] = {**raw["seeds"], **seeds}
    with pytest.raises(SentlabError, match=msg):
        validate(raw)


def test_a_profile_cannot_change_the_seed_pool():
    from sentlab.config.profile_files import check_overrides

    with pytest.raises(SentlabError, match="seeds.pool"):
        check_overrides(_raw(), {"seeds": {"pool": [7, 8]}}, "profiles/smoke.yaml")


def test_dvc_yaml_declares_a_seed_stage_per_extra_seed_of_the_profile():
    import yaml

    dvc = yaml.safe_load(open("dvc.yaml"))
    st = dvc["stages"]["train"]
    assert st["foreach"] == "${models}"   # models.yaml: every seed a model entry <m>-s<seed>
    assert st["do"]["cmd"] == "python pipeline/train.py ${key} --method ${item.method} --seed ${item.seed}"
    assert "seed" not in st["do"]["params"]   # not the global seed: its own, in its command
    assert dvc["stages"]["evaluate"]["foreach"] == "${models}"
    assert dvc["stages"]["evaluate"]["do"]["outs"][1] == "reports/cosines/${key}.parquet"


def test_the_report_reads_only_the_profiles_models(tmp_path):
    """Another profile's outputs left in the workspace (no stage of this profile writes them) are not
    reported as current: a method the profile does not train says "not run in this profile"."""
    from sentlab.report.build import build_report
    from sentlab.stages.stage_list import profile_models

    _evaluated(tmp_path, "simcse", 2.0, 1, {"id": "simcse"})
    _evaluated(tmp_path, "moco_reorder", 0.5, 2, {"id": "moco_reorder"})   # an earlier paper run's, stale here
    (tmp_path / "reports/curves").mkdir(parents=True)
    for n in ("simcse", "moco_reorder"):
        (tmp_path / f"reports/curves/{n}.csv").write_text("step,stsb_dev,alignment,uniformity,loss\n20,80,,,\n")
    quick = profile_models(validate(_raw()))
    assert quick["simcse"] and not quick["moco_reorder"] and quick["simcse-s43"] and not quick["moco-s43"]
    rep = build_report(tmp_path, "b", "quick", quick)
    md = (tmp_path / "reports/tables/ptbert_table3.md").read_text()
    assert "moco_reorder: not run in this profile" in md
    assert "moco_reorder" not in rep.figures["dev"].series and "simcse" in rep.figures["dev"].series
    assert rep.unused_models == [] and "moco-s43" not in (tmp_path / "reports/index.md").read_text()
    build_report(tmp_path, "b", "quick")                             # without the profile: every file counts
    assert "moco_reorder: not run in this profile" not in (tmp_path / "reports/tables/ptbert_table3.md").read_text()


# --- the report's tables -----------------------------------------------------------------------------

SEVEN = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness")


def _evaluated(root, name, sigma, seed, method):
    """metrics JSON + cosines of a model whose cosines are gold + N(0, sigma) (same pairs for all)."""
    rng = np.random.default_rng(seed)
    frames = []
    for i, t in enumerate((*SEVEN, "STSBenchmark-dev", "SICK-all")):
        gold = np.round(np.random.default_rng(100 + i).uniform(0, 5, 150), 1)
        frames.append(pd.DataFrame({"task": t, "subset": "s", "pair": np.arange(150, dtype=np.int32),
                                    "cos": gold + rng.normal(0, sigma, 150), "gold": gold,
                                    "cluster": np.arange(150, dtype=np.int32) // 3}))
    frame = pd.concat(frames, ignore_index=True)
    write_cosines(root / "reports/cosines" / f"{name}.parquet", frame)
    vals = {t: float(S.spearman_vec(*[frame[frame.task == t][c].to_numpy() for c in ("cos", "gold")]))
            for t in (*SEVEN, "STSBenchmark-dev")}
    vals["Avg"] = float(np.mean([vals[t] for t in SEVEN]))
    per = {t: {"mean": vals[t] - 1.0, "wmean": vals[t] - 0.5, "pairs": 150} for t in SEVEN[:5]}
    m = {"model": name, "status": "evaluated", "kind": "trained", "backbone": "b", "profile": "quick", **vals,
         "per_task": per, "method": method, "ci95": confidence_intervals(frame, SEVEN, seed=0),
         "fingerprint": {"sentlab_commit": "abc", "torch": "2.13.0", "device": "cpu", "data_sha256": {}}}
    (root / "reports/metrics").mkdir(parents=True, exist_ok=True)
    (root / "reports/metrics" / f"{name}.json").write_text(json.dumps(m))
    return vals


def test_tables_show_seeds_cis_and_significance_marks(tmp_path):
    import csv
    import io

    from sentlab.report.build import build_report

    simcse = {"id": "simcse"}
    ptbert = {"id": "ptbert", "pseudo_len": 128, "queue_size": 256, "attend_to": "cls"}
    sims = [_evaluated(tmp_path, n, 2.0, s, simcse) for n, s in (("simcse", 1), ("simcse-s43", 2), ("simcse-s44", 3))]
    for n, s in (("ptbert", 4), ("ptbert-s43", 5), ("ptbert-s44", 6)):
        _evaluated(tmp_path, n, 0.6, s, ptbert)          # planted: far better than SimCSE on every seed
    _evaluated(tmp_path, "moco_srl", 2.0, 7, {"id": "moco_srl"})
    (tmp_path / "reports/curves").mkdir(parents=True)
    (tmp_path / "reports/curves/simcse.csv").write_text("step,stsb_dev,alignment,uniformity,loss\n"
                                                         "20,80,,,\n40,82,,,\n60,81,,,\n")
    rep = build_report(tmp_path, "b", "quick")
    md = (tmp_path / "reports/tables/ptbert_table3.md").read_text()
    row = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| ")}
    sim_row = next(v for k, v in row.items() if "SimCSE" in k)
    mean12 = np.mean([s["STS12"] for s in sims])
    std12 = np.std([s["STS12"] for s in sims], ddof=1)
    assert f"{mean12:.2f} ± {std12:.2f} (3)" in sim_row and "*" not in sim_row.split("|")[2]
    ptb_row = next(v for k, v in row.items() if k.startswith("PT-BERT") and "all token" not in k)
    assert "(3)*" in ptb_row.split("|")[9]          # Welch over 3 vs 3 seeds, Holm over the table: Avg. significant
    moco_row = next(v for k, v in row.items() if "SRL" in k)
    lo, hi = json.loads((tmp_path / "reports/metrics/moco_srl.json").read_text())["ci95"]["STS12"]
    assert f"[{lo:.1f}, {hi:.1f}] (1)" in moco_row.split("|")[2]          # single seed: value [CI] (n = 1)
    assert "Welch's t-test over seeds" in md and "reference method `simcse`" in md
    recs = [r for r in csv.DictReader(io.StringIO((tmp_path / "reports/tables/ptbert_table3.csv").read_text()))
            if r["model"] == "ptbert" and r["column"] == "STS12"]
    assert recs[0]["seeds"] == "3" and float(recs[0]["p_vs_reference"]) < 0.05
    assert recs[0]["paper_outside"] in ("True", "False") and recs[0]["reference"] == "simcse"
    assert rep.seed_groups == {"simcse": ["simcse", "simcse-s43", "simcse-s44"],
                               "ptbert": ["ptbert", "ptbert-s43", "ptbert-s44"]}
    prot = (tmp_path / "reports/tables/protocol_sensitivity.md").read_text()
    sim_prot = next(line for line in prot.splitlines() if line.startswith("| simcse |")).split("|")
    assert float(sim_prot[2]) == pytest.approx(np.mean([sims[0][t] for t in SEVEN[:5]]), abs=0.01)
    assert float(sim_prot[3]) == pytest.approx(float(sim_prot[2]) - 1.0, abs=0.01)     # SentEval mean
    assert sim_prot[12].strip() == "82.00" and sim_prot[14].strip() == "81.00"          # dev best vs last
    assert "protocol_sensitivity" in (tmp_path / "reports/index.md").read_text()
    assert "sentlab_commit `abc`" in (tmp_path / "reports/index.md").read_text()
