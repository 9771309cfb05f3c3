"""Render the demo release's HTML report in headless Chromium and save the screenshot shown in docs/report.md.

    python bench/report_screenshot.py [--out docs/report-demo.png] [--height 1800]

Needs Debian's `chromium` package (apt-get install -y chromium)."""
from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

import duckdb

from anon_sql.cli.demo import demo_policy, run_demo
from anon_sql.report.build import render_report
from anon_sql.publish.report import build_report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "report-demo.png"))
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=1800)
    args = ap.parse_args()
    browser = shutil.which("chromium")
    if browser is None:
        raise SystemExit("no chromium on PATH: apt-get install -y chromium")
    con = duckdb.connect()
    run_demo(con, echo=lambda message: None)
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(render_report(build_report(con, demo_policy().name), "html"), encoding="utf-8")
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={tmp}/profile", f"--screenshot={args.out}",
                        f"--window-size={args.width},{args.height}", page.as_uri()],
                       check=True, capture_output=True, timeout=180)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
