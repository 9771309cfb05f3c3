"""The demo release's HTML report rendered by a real headless Chromium: a screenshot whose top shows the verdict
banner in its colour, and a DOM that holds the verdict, the summary cards and every chart.

Skipped (with the reason) only when no Chromium is installed; .ci/run installs Debian's `chromium` package."""
from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import duckdb
import pytest

from anon_sql.cli.demo import demo_policy, run_demo
from anon_sql.report.build import render_report
from anon_sql.publish.report import build_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install -y chromium)")
WIDTH, HEIGHT = 1280, 1600
PASS_GREEN = (0x22, 0x88, 0x33)


def chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=True)


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA PNG (Chromium's screenshots) into rows of pixel bytes — enough to look at colours."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, bpp, rows


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    con = duckdb.connect()
    run_demo(con, echo=lambda message: None)
    report = build_report(con, demo_policy().name)
    page = tmp / "report.html"
    page.write_text(render_report(report, "html"), encoding="utf-8")
    return tmp, page, report


def test_chromium_screenshot_shows_the_verdict_banner(demo_page):
    tmp, page, report = demo_page
    shot = tmp / "report.png"
    chromium(tmp, f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}", page.as_uri())
    width, bpp, rows = png_pixels(shot.read_bytes())
    assert (width, len(rows)) == (WIDTH, HEIGHT)
    assert report["verdict"]["status"] == "pass"

    def green_in(ys: range) -> int:
        return sum(1 for y in ys for x in range(0, width * bpp, bpp * 4)
                   if all(abs(rows[y][x + i] - PASS_GREEN[i]) <= 6 for i in range(3)))
    assert green_in(range(0, 300, 4)) > 200               # the banner is near the top, in the pass colour
    colours = {rows[y][x:x + 3] for y in range(0, HEIGHT, 8) for x in range(0, width * bpp, bpp * 8)}
    assert len(colours) > 30                                 # text, cards and bars drawn, not a blank page


def test_chromium_dom_holds_verdict_cards_and_charts(demo_page):
    tmp, page, report = demo_page
    dom = chromium(tmp, "--dump-dom", page.as_uri()).stdout
    assert "id=\"verdict\"" in dom and "PASS" in dom and "verdict pass" in dom
    assert dom.index("verdict pass") < dom.index("Classes and risk") < dom.index("Original vs released")
    for metric in ("k", "prosecutor_risk_max", "ncp", "kl_divergence"):
        assert f'data-metric="{metric}"' in dom
    for q in report["quasi"]:
        assert f'data-qi="{q}"' in dom
    assert dom.count("<svg") >= 3 + 2 * len(report["quasi"])
    assert "Equivalence classes by size" in dom and "(suppressed)" in dom
