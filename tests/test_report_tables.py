"""Report stage: every paper table rendered from fixture metrics (missing cells, a failed method,
a model not run in the profile), the figures' series, the index linking only existing files."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from sentlab.report import paper_numbers as P
from sentlab.report.build import FIG3, FIG4, INDEX, build_report
from sentlab.report.paper_tables import OTHER_SETTINGS, STS7, all_tables

from _support.report_tree import BACKBONE, PAPER_BB, PASER, PTBERT, SICK_WARN, _metrics, make_tree

@pytest.fixture()
def tree(tmp_path):
    return make_tree(tmp_path)


@pytest.fixture()
def paper_tree(tmp_path):
    """The same tree with every model on the papers' backbone (bert-base-uncased): rows with a Δ."""
    return make_tree(tmp_path, PAPER_BB)


def _csv(path: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def test_every_table_has_reproduced_paper_and_diff(paper_tree):
    tree = paper_tree
    rep = build_report(tree, PAPER_BB, "quick")
    t3 = _csv(tree / "reports/tables/ptbert_table3.csv")
    cell = next(r for r in t3 if r["model"] == "ptbert" and r["column"] == "STS12")
    assert float(cell["reproduced"]) == 72.0 and float(cell["paper"]) == 71.20
    assert float(cell["diff"]) == pytest.approx(0.8)
    assert cell["backbone"] == PAPER_BB and cell["profile"] == "quick"
    md = (tree / "reports/tables/ptbert_table3.md").read_text()
    assert "72.00 / 71.20 (+0.80)" in md and "`quick`" in md and PAPER_BB in md
    # SICK-R: a prepare data warning is spelled out in the header; no cell carries a mark
    assert "| 78.00 / 71.94 (+6.06) |" in md and f"Data warning (SICK-R): {SICK_WARN}." in md
    assert all("‡" not in f.read_text() for f in (tree / "reports/tables").iterdir())
    # every table file exists in md + csv; main tables also in LaTeX (booktabs)
    for spec in all_tables(PAPER_BB):
        assert (tree / f"reports/tables/{spec.id}.md").is_file() and (tree / f"reports/tables/{spec.id}.csv").is_file()
        assert (tree / f"reports/tables/{spec.id}.tex").is_file() == spec.main
    tex = (tree / "reports/tables/ptbert_table3.tex").read_text()
    assert r"\toprule" in tex and r"\bottomrule" in tex and "72.00 / 71.20 (+0.80)" in tex
    assert set(rep.tables) >= {"ptbert_table1", "ptbert_table2", "ptbert_table3", "ptbert_table4", "ptbert_table5",
                               "paser_table1", "paser_table4", "paser_table5", "paser_table8", "paser_table9",
                               "paser_table10", "paser_fig4", "l2p_table1", "l2p_table3", "posbow_table1",
                               "paser_table2"}


def test_rows_without_numbers_say_why(tree):
    build_report(tree, BACKBONE, "quick")
    def note(table, model):
        rows = [r for r in _csv(tree / f"reports/tables/{table}.csv") if r["model"] == model]
        assert rows, (table, model)
        assert all(not r["reproduced"] for r in rows)
        return rows[0]["status"]
    assert "not run in this profile" in note("ptbert_table5", "ptbert_m64")
    assert "unreadable metrics file" in note("ptbert_table3", "moco")
    assert "trained but its evaluate stage did not run or failed" in note("l2p_table1", "l2p")
    assert "train stage of ct did not run or failed" in note("ptbert_table3", "ct")
    assert ("metrics/simcse_len64.json and models/simcse_len64/sentlab.json missing"
            in note("ptbert_table2", "simcse_len64"))
    # paper-only rows (systems sentlab does not implement) keep the paper's number and say so
    t3 = _csv(tree / "reports/tables/ptbert_table3.csv")
    clear = [r for r in t3 if r["row"] == "CLEAR"]
    assert clear[0]["paper"] == "49.0" and "not implemented in sentlab" in clear[0]["status"]
    md = (tree / "reports/tables/ptbert_table3.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith("| MoCo |"))
    assert "– / 68.35" in line and "unreadable metrics file" in line


def test_extra_rows_hard_subset_density_and_examples(tree):
    build_report(tree, BACKBONE, "quick")
    pb = _csv(tree / "reports/tables/posbow_table1.csv")
    bow = next(r for r in pb if r["model"] == "posbow_adv/posbow_adv_bow" and r["column"] == "STS12")
    assert float(bow["reproduced"]) == 69.0 and float(bow["paper"]) == 69.16
    t5 = _csv(tree / "reports/tables/ptbert_table5.csv")
    hard = next(r for r in t5 if r["section"].startswith("(c)") and r["model"] == "ptbert" and r["column"] == "Avg")
    assert float(hard["reproduced"]) == pytest.approx(52 + 7.2) and float(hard["paper"]) == 74.44
    t10 = _csv(tree / "reports/tables/paser_table10.csv")
    c = next(r for r in t10 if r["model"] == "simcse" and r["column"] == "4-5 mean")
    assert float(c["reproduced"]) == pytest.approx(0.9) and float(c["paper"]) == 0.87
    t7 = (tree / "reports/tables/paser_table7.md").read_text()
    assert "models/paser/reconstruction.json missing" in t7 and "options options" in t7


def test_figures_draw_the_expected_series(tree):
    rep = build_report(tree, BACKBONE, "quick")
    fig3 = rep.figures["fig3"]
    assert fig3.path == tree / FIG3 and fig3.path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert fig3.drawn["alignment (STS-B dev)"] == ["ptbert", "simcse"]
    assert fig3.drawn["uniformity (STS-B dev)"] == ["ptbert", "simcse"]
    assert fig3.series["ptbert"]["step"] == [4, 8, 12]
    assert fig3.series["ptbert"]["alignment"] == [0.28, 0.22, 0.21]
    assert fig3.series["simcse"]["uniformity"] == [-2.0, -2.2]
    assert "not run in this profile" in fig3.missing["ptbert_m64"]
    fig4 = rep.figures["fig4"]
    assert fig4.series["reproduced"] == {"decoder_layers": [2], "Avg": [pytest.approx(63.0)]}
    assert fig4.path == tree / FIG4 and fig4.path.is_file()
    assert "paser" in " ".join(fig4.missing.values())


def test_index_links_only_existing_files(tree):
    import re

    build_report(tree, BACKBONE, "quick")
    index = (tree / INDEX).read_text()
    links = re.findall(r"\]\(([^)]+)\)", index)
    assert len(links) > 30
    for link in links:
        assert (tree / "reports" / link).is_file(), link
    assert "tables/ptbert_table3.md" in links and "figures/ptbert_fig3_alignment_uniformity.png" in links
    assert "`ptbert_m64`" not in index and "Not run in this profile: " in index   # counted, not listed one by one
    # remove a table, rebuild only the index: its link disappears
    from sentlab.report.build import write_index
    from sentlab.report.paper_tables import load_metrics

    rep = build_report(tree, BACKBONE, "quick")
    (tree / "reports/tables/l2p_table3.csv").unlink()
    write_index(rep, load_metrics(tree / "reports/metrics"))
    assert "tables/l2p_table3.csv" not in (tree / INDEX).read_text()
    assert "tables/l2p_table3.md" in (tree / INDEX).read_text()


def test_every_table_model_is_trained_with_what_its_row_expects_in_the_paper_profile():
    """The one registry is params.yaml: every variant a table names is an ``ablations.variants`` entry,
    and in the paper profile each settings-checked row's own model (its first candidate) is trained with
    the settings the row expects (the method block + the variant's ``set``, validated)."""
    from _support.ablations import load, trained_settings, variants
    from sentlab.report.paper_tables import mismatch, models_in_tables

    params = load(Path(__file__).resolve().parents[1] / "params.yaml", "paper")
    registry = variants(params)
    methods = set(params.methods) | set(params.methods_from)  # paser_sup (PaSeR Table 2) is a methods_from line
    named = {m for m in models_in_tables(all_tables(BACKBONE)) if not m.startswith("base-")}
    assert named - methods <= set(registry), named - methods - set(registry)
    assert set(registry) <= named, set(registry) - named            # and every variant has its table row
    checked = 0
    for spec in all_tables(BACKBONE):
        for row in spec.rows:
            if row.expects:
                own = row.models[0]
                assert mismatch(row.expects, trained_settings(params, own)) is None, (spec.id, row.label, own)
                checked += 1
    assert checked >= 60
    assert registry["ptbert_tokens_m64"] == ("ptbert", {"attend_to": "tokens", "pseudo_len": 64})
    assert trained_settings(params, "paser")["decoder_layers"] == 6 and trained_settings(params, "base-cls") is None


def _row(tree, table, label):
    rows = [r for r in _csv(tree / f"reports/tables/{table}.csv") if r["row"] == label]
    assert rows, (table, label)
    return rows[0]


def test_rows_are_filled_by_what_the_model_was_trained_with(tree):
    """The quick PaSeR (eda=rd, 2 decoder layers) fills "+ RD" and "2 decoder layers", never "+ SR" or
    "6 decoder layers"; a variant whose recorded settings fit none of its rows is listed as trained."""
    md = tree / "reports/metrics"
    quick = {**PASER, "eda": "rd", "decoder_layers": 2}
    (md / "paser.json").write_text(json.dumps(_metrics("paser", 62.0, method=quick)))
    (md / "paser_aug_rs.json").write_text(json.dumps(_metrics("paser_aug_rs", 55.0, method=PASER)))  # really SR
    (md / "paser_dec2.json").unlink()
    build_report(tree, BACKBONE, "quick")
    rd = _row(tree, "paser_table4", "+ RD")
    assert rd["model"] == "paser" and rd["reproduced"]
    assert rd["expects"] == "eda=rd, memory_norm=False, head_lr=null, epochs=5"  # the row's setting + the recipe
    assert "eda=rd" in rd["trained_with"] and "decoder_layers=2" in rd["trained_with"]
    sr = _row(tree, "paser_table4", "+ SR")
    assert not sr["reproduced"] and "paser: trained with eda=rd, this row expects eda=sr" in sr["status"]
    rs = _row(tree, "paser_table4", "+ RS")
    assert not rs["reproduced"] and "trained with eda=sr, this row expects eda=rs" in rs["status"]
    other = _row(tree, "paser_table4", "paser_aug_rs (as trained)")
    assert other["section"] == OTHER_SETTINGS and other["reproduced"] and "eda=sr" in other["trained_with"]
    assert _row(tree, "paser_fig4", "2 decoder layers")["model"] == "paser"
    six = _row(tree, "paser_fig4", "6 decoder layers")
    assert not six["reproduced"] and "decoder_layers=2, this row expects decoder_layers=6" in six["status"]
    t1 = _row(tree, "paser_table1", "PaSeR-BERTbase")         # the main table: filled, labelled as trained
    assert t1["reproduced"] and "eda=rd" in t1["trained_with"]
    line = next(x for x in (tree / "reports/tables/paser_table4.md").read_text().splitlines()
                if x.startswith("| + RD |"))
    assert "trained with eda=rd" in line and "decoder_layers=2" in line and "row expects eda=rd" in line


def test_the_quick_paser_fills_no_paper_ablation_row(tree):
    """#34 item 9: the quick paser (memory LayerNorm, its own head lr, a step budget) has m = n = 10 but must not
    fill Table 8's "m = 10, n = 10": every PaSeR ablation row checks the paper's recipe too."""
    quick = {**PASER, "eda": "rd", "decoder_layers": 2, "memory_norm": True, "head_lr": 1e-3, "epochs": None}
    (tree / "reports/metrics/paser.json").write_text(json.dumps(_metrics("paser", 62.0, method=quick)))
    build_report(tree, BACKBONE, "quick")
    m10 = _row(tree, "paser_table8", "m = 10, n = 10")
    assert not m10["reproduced"] and "memory_norm=True" in m10["status"] and "head_lr" in m10["status"]
    assert not _row(tree, "paser_table4", "+ RD")["reproduced"]
    assert _row(tree, "paser_table1", "PaSeR-BERTbase")["reproduced"]  # the main table: as trained
    assert not [r for r in _csv(tree / "reports/tables/paser_table4.csv") if "paser_aug_sr " in r["row"]]


def test_metrics_without_a_method_block_fill_no_settings_checked_row(tree):
    (tree / "reports/metrics/paser.json").write_text(json.dumps(_metrics("paser", 62.0)))
    build_report(tree, BACKBONE, "quick")
    assert "record no method settings" in _row(tree, "paser_table4", "+ SR")["status"]
    assert _row(tree, "paser_table1", "PaSeR-BERTbase")["reproduced"]     # no settings asked: filled


def test_ptbert_rows_in_both_readings_and_the_mteb_row(tree):
    md = tree / "reports/metrics"
    tokens = {**PTBERT, "attend_to": "tokens"}
    (md / "ptbert_tokens.json").write_text(json.dumps(_metrics("ptbert_tokens", 73.0, method=tokens)))
    build_report(tree, BACKBONE, "quick")
    t5 = _csv(tree / "reports/tables/ptbert_table5.csv")
    sections = [r["section"] for r in t5]
    assert "(a) pseudo sequence length m, attend_to: cls (P receives no gradient)" in sections
    assert "(a') pseudo sequence length m, attend_to: tokens (docs/methods.md#pt-bert reading)" in sections
    cls128 = next(r for r in t5 if r["section"].startswith("(a)") and r["row"] == "L-128 (ours)")
    tok128 = next(r for r in t5 if r["section"].startswith("(a')") and r["row"] == "L-128 (ours)")
    assert (cls128["model"], tok128["model"]) == ("ptbert", "ptbert_tokens")
    assert "P receives no gradient" in cls128["note"]
    tok64 = next(r for r in t5 if r["section"].startswith("(a')") and r["row"] == "L-64")
    assert tok64["model"] == "ptbert_tokens_m64" and "ptbert_tokens_m64.json" in tok64["status"]
    q = {r["model"] for r in t5 if r["section"].startswith("(b')")}
    assert q == {"ptbert_tokens_q192", "ptbert_tokens", "ptbert_tokens_q320"}
    q320 = next(r for r in t5 if r["section"].startswith("(b)") and r["row"] == "Q-320")
    assert "320 is the released code's queue_size=4" in q320["note"]  # issue #34
    assert not any("released code's queue_size" in r["note"] for r in t5 if r["row"] != "Q-320")
    assert _row(tree, "ptbert_table3", "PT-BERT, Y = all token states")["model"] == "ptbert_tokens"
    # MTEB's SICK-R (all 9,927 pairs) is not put beside the 4,927-pair test split
    t3 = _csv(tree / "reports/tables/ptbert_table3.csv")
    mteb = {r["column"]: r for r in t3 if r["row"] == "all-MiniLM-L6-v2 mean vs MTEB"}
    assert float(mteb["STS12"]["paper"]) == 72.369 and mteb["SICKRelatedness"]["paper"] == ""
    assert "9,927" in mteb["SICKRelatedness"]["note"]
    labels = [r["row"] for r in _csv(tree / "reports/tables/l2p_table3.csv")]
    assert "beta = 0.1 (released code)" in labels
    beta = _row(tree, "l2p_table3", "beta = 0.1 (released code)")
    assert beta["model"] == "l2p_beta_0p1" and beta["expects"] == "beta=0.1"


def test_table7_shows_reconstruction_scores_and_verdict(tmp_path):
    from sentlab.report.examples import render

    ex = {"sentence": "Work with a tool.", "masked": "Work with a _.", "masked_phrases": ["tool"],
          "generated": ["knife"], "exact": [False]}
    rec = {"sentences": 500, "phrases": 1900, "phrase_source": "rake", "top_k": 5,
           "heldout_corpus": "sts_unlabeled (held out of training)",
           "greedy": {"phrase_exact": 0.056, "sentence_exact": 0.01, "token_accuracy": 0.052},
           "teacher_forced": {"token_accuracy": 0.079},
           "baseline": {"fit_on": "2000 training-corpus sentences",
                        "most_frequent_phrase": {"phrase": "man", "phrase_exact": 0.01, "sentence_exact": 0.0,
                                                 "token_accuracy": 0.005},
                        "positional_mode": {"phrase": "man", "phrase_exact": 0.01, "sentence_exact": 0.0,
                                            "token_accuracy": 0.008},
                        "bigram_teacher_forced": {"token_accuracy": 0.053}},
           "beats_baseline": {"greedy_token_accuracy": True, "greedy_phrase_exact": True,
                              "teacher_forced_token_accuracy": False},
           "examples": [ex], "mismatches": [ex]}
    (tmp_path / "reconstruction.json").write_text(json.dumps(rec))
    md, csv_text, ok = render(tmp_path, "minilm", "quick")
    assert ok and "| PaSeR greedy | 5.6% | 1.0% | 5.2% |" in md
    assert "| baseline: positional mode | 1.0% | 0.0% | 0.8% |" in md
    assert "Held-out sentences: sts_unlabeled (held out of training)" in md
    assert "greedy token accuracy yes" in md and "beats the bigram **no**" in md
    assert "reproduced,Work with a tool.,Work with a _.,tool,knife,False" in csv_text


def test_no_delta_between_backbones_and_roberta_rows(tmp_path):
    """Issue #34: a reproduced number and a paper number of different backbones are never subtracted (nor tested
    against a reference row of another backbone); the RoBERTa-base rows (L2P-CSR Table 1's group, the POS/BOW table)
    take the paper profile's *_roberta models and print their Δ; "+Prompt" says what differs and prints no Δ."""
    tree = make_tree(tmp_path)
    md = tree / "reports/metrics"
    bert, rob = "bert-base-uncased", "roberta-base"
    for name, base, bb in (("simcse", 70.0, bert), ("simcse_roberta", 71.0, rob), ("l2p_roberta", 72.0, rob),
                           ("posbow_adv", 73.0, rob), ("prompt", 74.0, bert)):
        (md / f"{name}.json").write_text(json.dumps({**_metrics(name, base, method={"id": name.split("_r")[0]}),
                                                     "backbone": bb, "profile": "paper"}))
    build_report(tree, bert, "paper")

    def cell(table, row, model, col="STS12", section=None):
        return next(r for r in _csv(tree / f"reports/tables/{table}.csv") if r["row"] == row and r["model"] == model
                    and r["column"] == col and (section is None or r["section"] == section))

    sim = cell("l2p_table1", "+SimCSE", "simcse", section="")
    assert float(sim["diff"]) == pytest.approx(70.0 - 68.40)                       # BERT on BERT: Δ
    rob_sim = cell("l2p_table1", "+SimCSE", "simcse_roberta", section="RoBERTa-base group")
    assert float(rob_sim["diff"]) == pytest.approx(71.0 - 70.16)
    rob_lines = [x for x in (tree / "reports/tables/l2p_table1.md").read_text().splitlines()
                 if x.startswith("|") and "_roberta`" in x]
    assert len(rob_lines) == 2 and not any("stale" in x for x in rob_lines)  # its own backbone is not stale
    assert float(cell("l2p_table1", "+Ours (L2P-CSR)", "l2p_roberta")["diff"]) == pytest.approx(72.0 - 71.69)
    prompt = cell("l2p_table1", "+Prompt", "prompt", section="")   # PromptBERT's recipe (#53 §3.1): a Δ
    assert float(prompt["diff"]) == pytest.approx(74.0 - 71.56) and "template denoising" in prompt["note"]
    pb = cell("posbow_table1", "SimCSE", "simcse_roberta")
    assert float(pb["diff"]) == pytest.approx(71.0 - 70.16)
    assert float(cell("posbow_table1", "Our sentence (full embedding)", "posbow_adv")["diff"]) == pytest.approx(
        73.0 - 70.39)
    # without simcse_roberta the POS/BOW SimCSE row falls back to the BERT simcse: no Δ against RoBERTa numbers,
    # and the RoBERTa rows get no significance test against it
    (md / "simcse_roberta.json").unlink()
    build_report(tree, bert, "paper")
    fallback = cell("posbow_table1", "SimCSE", "simcse")
    assert fallback["diff"] == "" and float(fallback["paper"]) == 70.16
    assert cell("posbow_table1", "Our sentence (full embedding)", "posbow_adv")["reference"] == ""
    md_lines = (tree / "reports/tables/posbow_table1.md").read_text().splitlines()
    line = next(x for x in md_lines if x.startswith("| SimCSE"))
    assert "70.00 / 70.16 |" in line and "(-0.16)" not in line and "no Δ: trained on bert-base-uncased" in line
    # the quick profile's MiniLM stands in for BERT-base: Δ against BERT-base numbers, none against RoBERTa's
    quick = make_tree(tmp_path / "q")
    build_report(quick, BACKBONE, "quick")
    t = _csv(quick / "reports/tables/posbow_table1.csv")
    assert next(r for r in t if r["model"] == "posbow_adv" and r["column"] == "STS12")["diff"] == ""


def test_paser_table2_has_supervised_simcse_and_paser(tree):
    """Issue #34: paser_sup trains, so PaSeR Table 2 (supervised STS) is a table: simcse_sup beside paser_sup."""
    md = tree / "reports/metrics"
    (md / "simcse_sup.json").write_text(json.dumps(_metrics("simcse_sup", 76.0, method={"id": "simcse_sup",
                                                                                          "test_mlp": True})))
    build_report(tree, BACKBONE, "quick")
    t2 = _csv(tree / "reports/tables/paser_table2.csv")
    sim = next(r for r in t2 if r["model"] == "simcse_sup" and r["column"] == "Avg")
    assert float(sim["paper"]) == 81.57 and float(sim["reproduced"]) == pytest.approx(79.0)
    assert sim["trained_with"] == "test_mlp=True"   # issue #53 §3.4: the row says how it was tested
    pas = next(r for r in t2 if r["model"] == "paser_sup" and r["column"] == "Avg")
    assert float(pas["paper"]) == 82.61 and pas["reproduced"] == ""
    assert next(r for r in t2 if r["model"] == "paser_sup" and r["column"] == "STS12")["paper"] == "78.4"
    assert (tree / "reports/tables/paser_table2.tex").is_file()


def test_tables_name_their_variants_literally():
    """Each variant id of params.yaml ``ablations.variants`` is written out in its paper's table module (no
    name built from a setting), and the table modules read no other ablation list."""
    import sentlab.report.paper_tables as T
    from _support.ablations import load, variants

    sources = "".join(Path(m.__file__).read_text() for m in (T.ptbert, T.paser, T.l2p, T.posbow, T.followups))
    registry = variants(load(Path(__file__).resolve().parents[1] / "params.yaml", "paper"))
    assert [v for v in registry if f'"{v}"' not in sources] == []
    assert "ABLATIONS" not in sources


def test_unsupervised_table_ranks_every_unsupervised_method_by_its_seed_mean(paper_tree):
    """Issue #41's table: one row per registered unsupervised method (no supervised one), ranked by the
    reproduced Avg — the mean over the seeds where several ran — with the paper's Avg and Δ (same backbone
    family only), the transfer Avg where it ran, and the rows without numbers after, each saying why."""
    tree = paper_tree
    from sentlab.methods import registered
    from sentlab.report.paper_tables import unsupervised

    md_dir = tree / "reports/metrics"
    (md_dir / "simcse-s43.json").write_text(json.dumps(_metrics("simcse-s43", 80.0, method={"id": "simcse"},
                                                                backbone=PAPER_BB)))
    (md_dir / "transfer").mkdir()
    (md_dir / "transfer/ptbert.json").write_text(json.dumps({"status": "evaluated", "TransferAvg": 85.5}))
    build_report(tree, PAPER_BB, "quick")
    rows = _csv(tree / "reports/tables/unsupervised_one_protocol.csv")
    order = list(dict.fromkeys(r["row"] for r in rows))
    unsup = sorted(k for k, c in registered().items() if c.corpus != "nli")
    assert sorted(order) == unsup and "simcse_sup" not in order and "paser_sup" not in order
    # simcse: Avg 73 (seed 42) and 83 (seed 43) -> mean 78 > ptbert 75 > posbow_adv 74; then the rest in id order
    assert order[:3] == ["simcse", "ptbert", "posbow_adv"]
    assert order[3:] == [k for k in unsup if k not in order[:3]]
    cell = {(r["row"], r["column"]): r for r in rows}
    assert float(cell["simcse", "Avg"]["reproduced"]) == pytest.approx(78.0)
    assert float(cell["ptbert", "Avg"]["diff"]) == pytest.approx(75.0 - P.PTBERT_TABLE3["ptbert"][1]["Avg"])
    assert cell["posbow_adv", "Avg"]["diff"] == ""                       # RoBERTa-base paper number: no Δ
    assert float(cell["ptbert", "TransferAvg"]["reproduced"]) == 85.5 and cell["simcse", "TransferAvg"]["paper"] == ""
    md = (tree / "reports/tables/unsupervised_one_protocol.md").read_text()
    assert "| STS Avg. | Transfer Avg. |" in md and "± " in md                # seed mean ± std on simcse's row
    assert "unreadable metrics file" in md                              # moco's row says why it has no numbers
    assert [s.id for s in all_tables(PAPER_BB)].count("unsupervised_one_protocol") == 1
    assert unsupervised.table().rank_by == "Avg"


def test_simcse_mlm_shows_no_delta_against_paser_table1(paper_tree):
    """Issue #53 §3.8: PaSeR Table 1's SimCSE + MLM (58.57) cannot come from SimCSE's --do_mlm λ = 0.1 recipe that
    simcse_mlm trains (SimCSE Table D.2: −0.5 on STS-B dev), so neither PaSeR Table 1 nor the one-protocol table
    subtracts it; both print the paper's number and say why, citing Table D.2. simcse beside it keeps its Δ."""
    tree = paper_tree
    md_dir = tree / "reports/metrics"
    (md_dir / "simcse_mlm.json").write_text(json.dumps(_metrics("simcse_mlm", 65.0, method={"id": "simcse_mlm"},
                                                                backbone=PAPER_BB)))
    build_report(tree, PAPER_BB, "quick")
    t1 = {(r["row"], r["column"]): r for r in _csv(tree / "reports/tables/paser_table1.csv")}
    mlm = t1["SimCSE-BERTbase + MLM", "Avg"]
    assert mlm["model"] == "simcse_mlm" and float(mlm["reproduced"]) == pytest.approx(68.0)
    assert float(mlm["paper"]) == 58.57 and mlm["diff"] == ""
    assert all(t1["SimCSE-BERTbase + MLM", c]["diff"] == "" for c in STS7)
    assert "Table D.2" in mlm["note"] and "no Δ" in mlm["note"]
    assert float(t1["SimCSE-BERTbase", "Avg"]["diff"]) == pytest.approx(73.0 - 76.25)
    line = next(x for x in (tree / "reports/tables/paser_table1.md").read_text().splitlines()
                if x.startswith("| SimCSE-BERTbase + MLM"))
    assert "68.00 / 58.57 |" in line and "(+9.43)" not in line and "Table D.2" in line
    one = {(r["row"], r["column"]): r for r in _csv(tree / "reports/tables/unsupervised_one_protocol.csv")}
    assert float(one["simcse_mlm", "Avg"]["paper"]) == 58.57 and one["simcse_mlm", "Avg"]["diff"] == ""
    assert "Table D.2" in one["simcse_mlm", "Avg"]["note"]
    assert float(one["simcse", "Avg"]["diff"]) == pytest.approx(73.0 - 76.25)


def test_rows_on_another_backbone_show_the_paper_number_beside_without_delta_or_dagger(tree):
    """Issue #55: the quick profile's MiniLM rows put the papers' BERT-base numbers beside, labelled, with no Δ (and
    so no †); only the MTEB row, whose reference is MiniLM's own, keeps its Δ."""
    md_dir = tree / "reports/metrics"
    for seed, base in ((43, 90.0), (44, 91.0)):          # 3 seeds far above the paper: a † on the paper's backbone
        (md_dir / f"ptbert-s{seed}.json").write_text(json.dumps(_metrics(f"ptbert-s{seed}", base, method=PTBERT)))
    build_report(tree, BACKBONE, "quick")
    t3 = _csv(tree / "reports/tables/ptbert_table3.csv")
    cell = next(r for r in t3 if r["model"] == "ptbert" and r["column"] == "STS12")
    assert float(cell["paper"]) == 71.20 and cell["diff"] == ""
    assert cell["paper_outside"] == "False"
    md = (tree / "reports/tables/ptbert_table3.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith("| PT-BERTbase"))
    assert " / 71.20 |" in line and "†" not in line and "(+" not in line
    assert f"no Δ: trained on {BACKBONE}, the paper's numbers are bert-base-uncased's" in line
    mteb = next(r for r in t3 if r["row"] == "all-MiniLM-L6-v2 mean vs MTEB" and r["column"] == "STS12")
    assert float(mteb["diff"]) == pytest.approx(40.0 - P.MTEB_MINILM_MEAN["STS12"], abs=1e-6)   # base-mean: 40


def test_glove_row_shows_no_delta_and_says_whose_averaging_61_32_is():
    """PaSeR Table 1's GloVe 61.32 is SBERT's Table 1 row (via Kim et al. 2021): sentence-transformers' averaging
    (stop words dropped, punctuation stripped), not SentEval's bow.py that base-glove computes (issue #53 §3.9)."""
    from sentlab.report.paper_tables.paser import table1_rows

    row = next(r for r in table1_rows() if r.label == "GloVe embeddings")
    assert row.paper["Avg"] == 61.32 and row.delta is False
    assert "SBERT" in row.note and "stop words" in row.note and "bow.py" in row.note
