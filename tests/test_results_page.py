"""The report stage's results page (``reports/index.html``) and raw per-seed CSV (``reports/seeds.csv``), issue #55:
the page's structure parsed with ``html.parser`` on a synthetic pipeline tree, the page in a real headless
Chromium (sorting by a header click, the screenshot script), the CSV's rows."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from _support.report_tree import _sts

from sentlab.report.build import build_report
from sentlab.report.paper_tables import STS7, all_tables

BACKBONE = "sentence-transformers/all-MiniLM-L6-v2"
PAPER_BB = "bert-base-uncased"
ROOT = Path(__file__).resolve().parents[1]
CURVE_HEADER = "step,stsb_dev,alignment,uniformity,loss\n"




def _fp(device: str) -> dict:
    return {"git_commit": "abc1234", "torch": "2.5.1", "transformers": "4.46.0", "device": device,
            "precision": "fp32", "data_sha256": {"sts": "00"}}


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """Baselines, simcse with two more seeds (s43 with a sentlab.json, s44 without), ptbert, posbow_adv, a model
    not run in the profile, an unreadable metrics file; curves for simcse's three seeds and ptbert."""
    md, mo, cu = tmp_path / "reports/metrics", tmp_path / "models", tmp_path / "reports/curves"
    for d in (md, mo, cu, tmp_path / "data"):
        d.mkdir(parents=True)
    (tmp_path / "data/prepare_stats.json").write_text(json.dumps({"language_warnings": {}}))

    def write(name, base, backbone=BACKBONE, device="cpu", **extra):
        (md / f"{name}.json").write_text(json.dumps({"model": name, "status": "evaluated", "kind": "trained",
                                                     "backbone": backbone, "profile": "quick", **_sts(base),
                                                     "fingerprint": _fp(device), **extra}))
    write("base-cls", 20.0, kind="baseline")
    write("base-mean", 40.0, kind="baseline")
    write("simcse", 70.0, method={"id": "simcse", "max_length": None})
    write("simcse-s43", 71.5, method_id="simcse", method={"id": "simcse", "max_length": None})
    write("simcse-s44", 73.5, device="cuda", method={"id": "simcse", "max_length": None})
    write("ptbert", 72.0, method={"id": "ptbert", "pseudo_len": 128, "queue_size": 256, "attend_to": "cls"})
    write("posbow_adv", 71.0)
    (md / "ptbert_m64.json").write_text(json.dumps({"model": "ptbert_m64", "status": "not run in this profile"}))
    (md / "moco.json").write_text("{ truncated")
    for name, seed in (("simcse", 42), ("simcse-s43", 43), ("ptbert", 42)):
        (mo / name).mkdir()
        (mo / name / "sentlab.json").write_text(json.dumps({"method": name.split("-")[0], "status": "trained",
                                                            "seed": seed, "run_key": f"k-{name}"}))
    (cu / "simcse.csv").write_text(CURVE_HEADER + "4,60.0,0.30,-2.0,1.5\n8,62.0,0.25,-2.2,1.2\n")
    (cu / "simcse-s43.csv").write_text(CURVE_HEADER + "4,59.0,0.31,-1.9,1.6\n8,61.0,0.26,-2.1,1.3\n"
                                                      "12,63.0,0.24,-2.3,1.1\n")
    (cu / "simcse-s44.csv").write_text(CURVE_HEADER + "4,61.0,0.29,-2.0,1.4\n")
    (cu / "ptbert.csv").write_text(CURVE_HEADER + "4,61.0,0.28,-2.1,1.4\n8,63.0,0.22,-2.4,1.1\n12,64.0,0.21,-2.5,1.0\n")
    return tmp_path


class Page(HTMLParser):
    """Tables (id, class, header texts, rows of (text, data-v) cells), SVGs (their section, title, series labels
    and polyline point counts), links, scripts, style sheets; the section (``<section id>``) each element is in."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables, self.svgs, self.links, self.scripts, self.external = {}, [], [], [], []
        self._t = self._row = self._cell = self._svg = None
        self._section = None
        self._in_script = False
        self._in_title = False
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            assert a["id"] not in self.ids, f"duplicate id {a['id']}"
            self.ids.add(a["id"])
        if tag in ("script", "img", "link", "iframe") and (a.get("src") or tag == "link"):
            self.external.append((tag, a))
        if tag == "section":
            self._section = a.get("id")
        elif tag == "table":
            self._t = {"id": a.get("id"), "class": a.get("class", ""), "head": [], "rows": [], "section": self._section}
            self.tables[a.get("id") or f"anon{len(self.tables)}"] = self._t
        elif tag == "tr" and self._t is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = {"tag": tag, "text": "", "v": a.get("data-v"), "links": []}
        elif tag == "br" and self._cell is not None:
            self._cell["text"] += " "
        elif tag == "a":
            self.links.append(a.get("href", ""))
            if self._cell is not None:
                self._cell["links"].append(a.get("href", ""))
        elif tag == "svg":
            self._svg = {"section": self._section, "title": "", "series": {}}
            self.svgs.append(self._svg)
        elif tag == "title" and self._svg is not None:
            self._in_title = True
        elif tag == "g" and self._svg is not None and "data-label" in a:
            self._svg["series"][a["data-label"]] = 0
            self._label = a["data-label"]
        elif tag == "polyline" and self._svg is not None:
            self._svg["series"][self._label] = len(a["points"].split())
        elif tag == "circle" and self._svg is not None and self._svg["series"].get(self._label) == 0:
            self._svg["series"][self._label] = -1   # a one-point series: a dot
        elif tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append(self._cell)
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row and all(c["tag"] == "th" for c in self._row) and not self._t["head"]:
                self._t["head"] = [c["text"].strip() for c in self._row]
            elif self._row and all(c["tag"] == "th" for c in self._row):   # a section row inside the body
                self._t.setdefault("sections", []).append((len(self._t["rows"]), self._row[0]["text"].strip()))
            else:
                self._t["rows"].append(self._row)
            self._row = None
        elif tag == "table":
            self._t = None
        elif tag == "svg":
            self._svg = None
        elif tag == "title":
            self._in_title = False
        elif tag == "section":
            self._section = None
        elif tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell["text"] += data
        if self._in_title and self._svg is not None:
            self._svg["title"] += data
        if self._in_script:
            self.scripts[-1] += data


def parse(path: Path) -> Page:
    p = Page()
    p.feed(path.read_text())
    p.close()
    return p


def _col(table: dict, header: str) -> int:
    return table["head"].index(header)


def test_page_has_every_section_from_the_tables_data(tree, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    rep = build_report(tree, BACKBONE, "quick")
    page = tree / "reports/index.html"
    assert "reports/index.html" in rep.files and "reports/seeds.csv" in rep.files
    p = parse(page)
    # static: no external script, style sheet, image or frame; no network address but the (absent) MLflow links
    assert p.external == [] and not [u for u in p.links if u.startswith(("http:", "https:", "//"))]
    assert len(p.scripts) == 1 and "sortable" in p.scripts[0] and "addEventListener" in p.scripts[0]
    # the ranking: sortable, ptbert (75.00) > simcse (mean of 73, 74.5, 76.5) > posbow_adv (74.00), then the rest
    rk = p.tables["t-unsupervised_one_protocol"]
    assert "sortable" in rk["class"].split()
    assert rk["head"][:2] == ["#", "Row"] and "STS Avg." in rk["head"] and "MLflow" in rk["head"]
    avg = _col(rk, "STS Avg.")
    first = [(r[1]["text"], r[0]["text"], r[avg]["v"]) for r in rk["rows"][:4]]
    assert first[:3] == [("ptbert", "1", "75"), ("simcse", "2", f"{(73 + 74.5 + 76.5) / 3:.6g}"),
                         ("posbow_adv", "3", "74")]
    assert first[3][1] == "" and first[3][2] == ""           # unranked: no reproduced Avg
    # the paper's number beside the reproduced one
    ptb = rk["rows"][0][avg]["text"]
    assert "75.00" in ptb and "77.74" in ptb   # PT-BERT Table 3's Avg
    # every paper table, with the paper's values in its cells
    for spec in all_tables(BACKBONE):
        assert f"t-{spec.id}" in p.tables, spec.id
        assert len(p.tables[f"t-{spec.id}"]["rows"]) == len(spec.rows), spec.id
    # a table's sections (as in the Markdown) head their rows: PT-BERT Table 5's two readings of the attention
    spec5 = next(s for s in all_tables(BACKBONE) if s.id == "ptbert_table5")
    starts = [i for i, r in enumerate(spec5.rows) if r.section and (i == 0 or spec5.rows[i - 1].section != r.section)]
    assert p.tables["t-ptbert_table5"]["sections"] == [(i, spec5.rows[i].section) for i in starts]
    assert len(starts) >= 2
    # curves: three charts per trained model, one series per seed with its points (one point: a dot)
    simcse = [s for s in p.svgs if s["section"] == "m-simcse"]
    assert [s["title"] for s in simcse] == ["STS-B dev Spearman", "alignment vs uniformity (dev)", "training loss"]
    assert all(s["series"] == {"simcse": 2, "simcse-s43": 3, "simcse-s44": -1} for s in simcse)
    assert [s["series"] for s in p.svgs if s["section"] == "m-ptbert"] == [{"ptbert": 3}] * 3
    assert not [s for s in p.svgs if s["section"] in ("m-simcse-s43", "m-base-cls")]   # seeds inside their model
    # each model's seeds under its curves: their scores
    seeds = next(t for t in p.tables.values() if t["section"] == "m-simcse")
    assert [r[0]["text"] for r in seeds["rows"]] == ["simcse", "simcse-s43", "simcse-s44"]
    assert [r[_col(seeds, "Avg")]["text"] for r in seeds["rows"]] == ["73.00", "74.50", "76.50"]
    assert [r[_col(seeds, "best step")]["text"] for r in seeds["rows"]] == ["8", "12", "4"]
    # the environment: shared values once, a differing one per model
    env = {r[0]["text"]: r[1]["text"] for r in p.tables["environment"]["rows"]}
    assert env["torch"] == "2.5.1" and env["git_commit"] == "abc1234" and "data_sha256" not in env
    assert env["device"].startswith("differs") and "simcse-s44 cuda" in env["device"]
    # the protocol-sensitivity table, sortable
    assert "sortable" in p.tables["t-protocol_sensitivity"]["class"]


def test_paper_cells_show_reproduced_paper_and_diff(tree, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for f in (tree / "reports/metrics").glob("*.json"):
        try:
            m = json.loads(f.read_text())
        except ValueError:
            continue
        if "backbone" in m:
            f.write_text(json.dumps({**m, "backbone": PAPER_BB}))
    build_report(tree, PAPER_BB, "quick")
    t3 = parse(tree / "reports/index.html").tables["t-ptbert_table3"]
    row = next(r for r in t3["rows"] if r[0]["text"] == "PT-BERTbase")
    cell = row[_col(t3, "STS12")]
    assert cell["v"] == "72" and re.sub(r"\s+", " ", cell["text"]).strip() == "72.00 71.20 (+0.80)"


def test_mlflow_links(tree, monkeypatch):
    from sentlab.report import html_page

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert html_page.mlflow_links(tree, ["simcse"], tree / "models") == {}   # no store: no lookup, no links
    rep = build_report(tree, BACKBONE, "quick")
    metrics = {n: json.loads((tree / f"reports/metrics/{n}.json").read_text()) for n in ("simcse", "ptbert")}
    text = html_page.render(rep, metrics, {"ptbert": "http://127.0.0.1:5000/#/experiments/1/runs/abc"})
    (tree / "p.html").write_text(text)
    rk = parse(tree / "p.html").tables["t-unsupervised_one_protocol"]
    ml = _col(rk, "MLflow")
    assert rk["rows"][0][1]["text"] == "ptbert" and rk["rows"][0][ml]["links"] == [
        "http://127.0.0.1:5000/#/experiments/1/runs/abc"]
    assert all(r[ml]["links"] == [] for r in rk["rows"][1:])


def test_seeds_csv_rows(tree):
    build_report(tree, BACKBONE, "quick")
    rows = list(csv.DictReader(io.StringIO((tree / "reports/seeds.csv").read_text())))
    assert list(rows[0]) == ["model", "run", "method", "seed", "task", "score"]
    tasks = [*STS7, "Avg", "STSBenchmark-dev"]
    runs = [("base-cls", "base-cls", "baseline", ""), ("base-mean", "base-mean", "baseline", ""),
            ("posbow_adv", "posbow_adv", "", ""), ("ptbert", "ptbert", "ptbert", "42"),
            ("simcse", "simcse", "simcse", "42"), ("simcse", "simcse-s43", "simcse", "43"),
            ("simcse", "simcse-s44", "simcse", "44")]
    assert [(r["model"], r["run"], r["method"], r["seed"], r["task"]) for r in rows] == [
        (*run, t) for run in runs for t in tasks]
    got = {(r["run"], r["task"]): float(r["score"]) for r in rows}
    assert got[("simcse-s43", "STS12")] == 71.5 and got[("simcse-s43", "SICKRelatedness")] == 77.5
    assert got[("simcse-s44", "Avg")] == 76.5 and got[("ptbert", "STSBenchmark-dev")] == 82.0
    assert not [r for r in rows if r["run"] in ("moco", "ptbert_m64")]   # unreadable / not run: no scores
    import pandas as pd

    df = pd.read_csv(tree / "reports/seeds.csv")
    assert df[df.task == "Avg"].groupby("model").score.mean()["simcse"] == pytest.approx((73 + 74.5 + 76.5) / 3)


def test_dvc_report_stage_outputs_the_page_and_csv():
    import yaml

    outs = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["report"]["outs"]
    assert "reports/index.html" in outs and "reports/seeds.csv" in outs


CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (Debian: apt-get install -y "
                                                              "chromium): the page's headless-browser checks skip")


def _browser_dom(page: Path, extra_js: str = "") -> str:
    if extra_js:
        text = page.read_text().replace("</body>", f"<script>{extra_js}</script></body>")
        page = page.with_name("probe.html")
        page.write_text(text)
    res = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          f"--user-data-dir={page.parent / 'chromium-profile'}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


@needs_chromium
def test_page_in_headless_chromium_sorts_by_header_click(tree, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    build_report(tree, BACKBONE, "quick")
    page = tree / "reports/index.html"
    # the browser's DOM: every table and chart the parser saw, and the script ran without breaking the page
    click = """var t=document.getElementById('t-unsupervised_one_protocol');
var th=Array.from(t.tHead.rows[0].cells).find(function(c){return c.textContent==='STS Avg.'});
th.click();document.body.setAttribute('data-order',
 Array.from(t.tBodies[0].rows).slice(0,3).map(function(r){return r.cells[1].textContent}).join(','));
th.click();document.body.setAttribute('data-order2',
 Array.from(t.tBodies[0].rows).slice(0,3).map(function(r){return r.cells[1].textContent}).join(','));
document.body.setAttribute('data-th',th.className);"""
    dom = _browser_dom(page, click)
    # ascending first (rows without a number last), then descending
    assert 'data-order="posbow_adv,simcse,ptbert"' in dom and 'data-order2="ptbert,simcse,posbow_adv"' in dom
    assert 'data-th="desc"' in dom
    assert dom.count("<svg") == parse(page).__dict__["svgs"].__len__() and dom.count("<svg") >= 6
    for spec in all_tables(BACKBONE):
        assert f'id="t-{spec.id}"' in dom


@needs_chromium
def test_screenshot_script(tree, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    build_report(tree, BACKBONE, "quick")
    out = tree / "shot.png"
    res = subprocess.run([sys.executable, str(ROOT / "scripts/screenshot_report.py"), "--html",
                          str(tree / "reports/index.html"), "--out", str(out), "--size", "1400,2400"],
                         capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr
    from PIL import Image

    with Image.open(out) as im:
        assert im.size == (1400, 2400)
        # not a blank page: many distinct colours (text, tables, the warning bar)
        assert len(im.convert("RGB").getcolors(maxcolors=1 << 20) or []) > 50


def test_screenshot_script_names_the_missing_browser(tmp_path):
    (tmp_path / "index.html").write_text("<html></html>")
    res = subprocess.run([sys.executable, str(ROOT / "scripts/screenshot_report.py"), "--html",
                          str(tmp_path / "index.html"), "--out", str(tmp_path / "x.png"), "--browser",
                          "no-such-chromium"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "no-such-chromium" in res.stderr and "apt-get install -y chromium" in res.stderr


def test_mlflow_links_from_a_store(tree, tmp_path, monkeypatch):
    """A SQLite store holding simcse's training run (tagged with the run_key its sentlab.json records): the page
    links that run; ptbert (no run in the store) gets no link."""
    from sentlab import tracking
    from sentlab.report import html_page

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("SENTLAB_REPORT_MLFLOW", "1")
    monkeypatch.setenv(html_page.UI_ENV, "http://ui.example:5000")
    with tracking.run("simcse seed=42", params={"seed": 42}, tags={"stage": "train", "sentlab.model": "simcse",
                                                                    "sentlab.run_key": "k-simcse"}):
        pass
    run_id = tracking.find_training_run("simcse", "k-simcse")
    assert run_id
    links = html_page.mlflow_links(tree, ["simcse", "ptbert"], tree / "models")
    assert links == {"simcse": f"http://ui.example:5000/#/experiments/{tracking.experiment_id()}/runs/{run_id}"}
    build_report(tree, BACKBONE, "quick")
    p = parse(tree / "reports/index.html")
    rk = p.tables["t-unsupervised_one_protocol"]
    ml = _col(rk, "MLflow")
    assert {r[1]["text"]: r[ml]["links"] for r in rk["rows"][:3]} == {
        "ptbert": [], "simcse": [links["simcse"]], "posbow_adv": []}


def test_tick_labels_have_the_decimals_their_axis_needs_and_a_ci_gets_its_own_line():
    """On the quick run's real page CT's two dev points (86.117, 86.120) gave five ticks all reading "86.1", and a
    single seed's CI bracket made every ranking cell too wide for the page."""
    from sentlab.report.svg import _fmt_tick, _ticks

    lo, hi = 86.117, 86.120
    labels = [_fmt_tick(t, hi - lo) for t in _ticks(lo, hi)]
    assert len(set(labels)) == 5 and labels[0] == "86.1170"
    assert [_fmt_tick(t, 40.0) for t in _ticks(20.0, 60.0)] == ["20", "30", "40", "50", "60"]
