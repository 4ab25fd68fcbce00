"""The backtest's HTML report in a real headless Chromium, on a desk and at a phone's width, as the
advisor's report is tested (tests/browser.py: the browser, found and never installed; without one
this module is one skip line)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser import console_messages, require_browser, run_chromium
from tests.test_eta_report import write_backtest

CHROMIUM = require_browser()


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    return write_backtest(tmp_path_factory.mktemp("eta"))[0]


WRAPPER = """<!DOCTYPE html><html><head><title>pending</title></head><body>
<iframe id="r" src="{src}" style="width:{width}px;height:900px;border:0"></iframe>
<script>
document.getElementById("r").addEventListener("load", () => {{
  const d = document.getElementById("r").contentDocument;
  const svgs = [...d.querySelectorAll("svg")].map(s => Math.round(s.getBoundingClientRect().width));
  const bars = d.querySelectorAll("svg g line").length;
  const tables = d.querySelectorAll("table").length;
  const over = d.documentElement.scrollWidth - d.documentElement.clientWidth;
  document.title = `tables=${{tables}} svgs=${{svgs.length}} narrowest=${{Math.min(...svgs)}} ` +
                   `widest=${{Math.max(...svgs)}} bars=${{bars}} overflow=${{over}}`;
}});
</script></body></html>"""


def load(chromium: str, page: Path, tmp: Path, width: int) -> tuple[dict[str, int], list[str]]:
    """What the wrapper finds in ``page`` shown ``width`` pixels wide, and the console messages."""
    wrapper = tmp / f"wrapper-{width}.html"
    wrapper.write_text(WRAPPER.format(src=page.as_uri(), width=width))
    proc = run_chromium(CHROMIUM, tmp, "--allow-file-access-from-files", "--virtual-time-budget=10000",
                        "--dump-dom", wrapper.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    title = re.search(r"<title>(.*?)</title>", proc.stdout).group(1)
    assert title != "pending", proc.stdout[-2000:]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", title)}, console_messages(proc.stderr)


def test_the_report_loads_with_its_table_and_a_plot_per_team_on_a_desk(page, tmp_path):
    found, console = load(CHROMIUM, page, tmp_path, 1200)
    assert found["tables"] == 1 and found["svgs"] == 2
    assert found["narrowest"] >= 400  # each plot at its own width, side by side
    assert found["bars"] == 2 * page.read_text().count("<g stroke=")  # a band and its p50 tick per job
    assert found["overflow"] <= 0 and console == [], (found, console)


def test_the_report_fits_a_phones_width(page, tmp_path):
    found, console = load(CHROMIUM, page, tmp_path, 375)
    assert found["overflow"] <= 0, found  # nothing scrolls the page sideways
    assert 300 <= found["narrowest"] and found["widest"] <= 375  # the plots shrink to the screen
    assert found["svgs"] == 2 and console == []


def test_the_width_check_can_fail(tmp_path):
    """The overflow check above is not vacuous: a page wider than the phone is caught."""
    wide = tmp_path / "wide.html"
    wide.write_text('<!DOCTYPE html><html><body><svg width="900" height="10"></svg></body></html>')
    found, _ = load(CHROMIUM, wide, tmp_path, 375)
    assert found["overflow"] > 0
