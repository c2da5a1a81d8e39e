"""Screenshots of the MLflow UI as a researcher meets it, taken in a real headless browser.

    python scripts/mlflow_screenshots.py [--store mlflow.db] [--out docs/img]

Starts ``mlflow server`` on the store, opens the link ``make mlflow-ui`` prints
(:func:`sentlab.tracking.ui_link`: the experiment's shared runs view, with MLflow 3's sidebar set to
"Model training") in headless Chromium and checks what the README promises: it lands on the runs table
(not the GenAI "Traces" overview), and the training runs carry the seven STS test results and Avg as
columns (``test.STS12`` … ``test.Avg``, logged on the training run by the evaluate stage). Writes
``runs_table.png`` and ``stsb_dev_compare.png`` (two training runs' ``stsb_dev`` curves, two methods when
the store has two) to ``--out``; exits non-zero, naming the check, when one fails. A store written
before the runs view existed gets the experiment's tags first.

Needs Chromium and its driver (Debian: ``apt-get install chromium chromium-driver``) and
``pip install selenium``; a store with finished training runs (``make repro``, or the smoke profile).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

from sentlab.data.sts import TASKS

TEST_COLUMNS = [f"test.{k}" for k in (*TASKS, "Avg")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(store: Path, port: int) -> subprocess.Popen:
    """``mlflow server`` on ``store`` (as the README's ``mlflow ui`` opens it), ready when /health answers."""
    mlflow = Path(sys.executable).with_name("mlflow")
    proc = subprocess.Popen([str(mlflow), "server", "--backend-store-uri", f"sqlite:///{store.resolve()}",
                             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(120):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            return proc
        except OSError:
            time.sleep(1)
    proc.terminate()
    raise SystemExit(f"mlflow server on {store} did not answer on port {port} within 120 s")


def training_runs(store: Path) -> tuple[str, list]:
    """The sentlab experiment id and its finished training runs with a dev curve, newest first."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{store.resolve()}")
    exp = client.get_experiment_by_name("sentlab")
    if exp is None:
        raise SystemExit(f"{store} has no `sentlab` experiment: run the pipeline first")
    runs = client.search_runs([exp.experiment_id], "tags.stage = 'train' and attributes.status = 'FINISHED'",
                              order_by=["attributes.start_time DESC"], max_results=50)
    runs = [r for r in runs if len(client.get_metric_history(r.info.run_id, "stsb_dev")) >= 2]
    return exp.experiment_id, runs


def browser(width: int = 1700, height: int = 1000):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              f"--window-size={width},{height}"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


def wait_for_text(driver, texts: list[str], timeout: float = 60) -> str:
    """Wait until the page shows every one of ``texts``; returns the page text."""
    end = time.time() + timeout
    body = ""
    while time.time() < end:
        body = driver.find_element("tag name", "body").text
        if all(t in body for t in texts):
            return body
        time.sleep(1)
    missing = [t for t in texts if t not in body]
    raise SystemExit(f"the page {driver.current_url} never showed {missing}")


def close_assistant(driver) -> None:
    """Close MLflow's assistant side panel (it covers a third of the page in a screenshot) when it is open."""
    for button in driver.find_elements("css selector", "button[aria-label='Close']"):
        try:
            button.click()
            time.sleep(1)
        except Exception:  # noqa: BLE001 - not clickable (another dialog's): leave it
            pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, default=Path("mlflow.db"))
    ap.add_argument("--out", type=Path, default=Path("docs/img"))
    args = ap.parse_args(argv)
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{args.store.resolve()}"
    from sentlab.tracking import runs_view_path, ui_link

    ui_link()  # a store written before the runs view existed gets its experiment tags
    exp_id, runs = training_runs(args.store)
    with_tests = [r for r in runs if all(c in r.data.metrics for c in TEST_COLUMNS)]
    if len(runs) < 2 or not with_tests:
        raise SystemExit(f"need two finished training runs with a dev curve, one of them evaluated (test.* "
                         f"metrics), in {args.store}; found {len(runs)} runs, {len(with_tests)} evaluated")
    # two methods' curves when there are two (the newest evaluated run, then the newest of another method)
    first = with_tests[0]
    others = [r for r in with_tests + runs if r is not first]
    other = next((r for r in others if r.data.tags.get("method") != first.data.tags.get("method")), others[0])
    pair = [first, other]
    port = free_port()
    server = start_server(args.store, port)
    args.out.mkdir(parents=True, exist_ok=True)
    driver = browser(2200, 1000)
    base = f"http://127.0.0.1:{port}"
    try:
        # 1. the link `make mlflow-ui` prints (sentlab.tracking.ui_link): the runs table, not GenAI traces, with
        # the training runs ranked by test.Avg and the seven STS results + Avg as columns
        driver.get(base + runs_view_path(exp_id))
        time.sleep(5)
        landed = driver.current_url
        if "traces" in landed.lower() or "overview" in landed.lower() or "/runs" not in landed:
            raise SystemExit(f"the experiment opened on {landed}, not its runs table")
        body = wait_for_text(driver, [with_tests[0].info.run_name[:12], "test.Avg"])
        shown = [c for c in TEST_COLUMNS if c in body]
        print(f"runs table: opened on {landed}; test columns shown: {shown}")
        if len(shown) < len(TEST_COLUMNS) - 1:  # the last may be cut at the window's edge
            raise SystemExit(f"the runs table shows {shown}, not the seven STS results and Avg")
        close_assistant(driver)
        driver.save_screenshot(str(args.out / "runs_table.png"))
        # 2. two training runs' stsb_dev curves side by side
        ids = json.dumps([r.info.run_id for r in pair])
        url = (f"{base}/#/metric?runs={urllib.parse.quote(ids)}&metric=%22stsb_dev%22"
               f"&experiments={urllib.parse.quote(json.dumps([exp_id]))}&plot_metric_keys=%5B%22stsb_dev%22%5D"
               f"&x_axis=step&show_point=true&workflowType=machine_learning")
        driver.get(url)
        wait_for_text(driver, ["stsb_dev"])
        time.sleep(4)  # the plot draws after the data arrive
        close_assistant(driver)
        driver.save_screenshot(str(args.out / "stsb_dev_compare.png"))
        print(f"compared: {[r.info.run_name for r in pair]}")
    finally:
        driver.quit()
        server.terminate()
        server.wait(timeout=30)
    print(f"wrote {args.out / 'runs_table.png'} and {args.out / 'stsb_dev_compare.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
