"""Screenshot ``reports/index.html`` in headless Chromium (the results page, issue #55).

    python scripts/screenshot_report.py [--html reports/index.html] [--out docs/img/report.png]
                                        [--size 1400,2400] [--browser chromium]

Runs ``chromium --headless --screenshot=OUT --window-size=W,H file://HTML`` (Debian: ``apt-get install -y
chromium``); the page needs no server and no network, so the file URL is all the browser gets. Exit 0 with the
PNG written, 2 when no browser is found (the message names it), else the browser's exit status.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_browser(name: str | None = None) -> str | None:
    for b in ((name,) if name else BROWSERS):
        path = shutil.which(b)
        if path:
            return path
    return None


def screenshot(html: Path, out: Path, size: str = "1400,2400", browser: str | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess:
    exe = find_browser(browser)
    if exe is None:
        raise FileNotFoundError(f"no {browser or ' / '.join(BROWSERS)} on PATH: install it (Debian: "
                                "`apt-get install -y chromium`)")
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:   # a fresh profile: no state from (or into) the user's
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={profile}",
               "--no-first-run", f"--screenshot={out}", f"--window-size={size}",
               Path(html).resolve().as_uri()]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--html", default="reports/index.html")
    p.add_argument("--out", default="docs/img/report.png")
    p.add_argument("--size", default="1400,2400", help="window width,height in pixels")
    p.add_argument("--browser", default=None, help=f"executable (default: the first of {', '.join(BROWSERS)})")
    a = p.parse_args(argv)
    if not Path(a.html).is_file():
        print(f"{a.html} does not exist: run the report stage (`dvc repro report`) first", file=sys.stderr)
        return 1
    try:
        res = screenshot(Path(a.html), Path(a.out), a.size, a.browser)
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    if res.returncode != 0 or not Path(a.out).is_file():
        print(res.stderr[-2000:], file=sys.stderr)
        return res.returncode or 1
    print(f"{a.out}: screenshot of {a.html} ({Path(a.out).stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
