"""The advisor's HTML report in a real headless Chromium, on a desk and at a phone's width, as the
simulate report is tested (tests/browser.py: the browser, found and never installed; without one
this module is one skip line; tests/test_report_browser.py: the same wrapper technique)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser import console_messages, require_browser, run_chromium
from tests.test_advise_report import write_advice

CHROMIUM = require_browser()


@pytest.fixture(scope="module")
def chromium():
    return CHROMIUM


@pytest.fixture(scope="module")
def advised(tmp_path_factory):
    return write_advice(tmp_path_factory.mktemp("advice"))


# ---------------------------------------------------------------------------
# In Chromium


WRAPPER = """<!DOCTYPE html><html><head><title>pending</title></head><body>
<iframe id="r" src="{src}" style="width:{width}px;height:900px;border:0"></iframe>
<script>
document.getElementById("r").addEventListener("load", () => {{
  const d = document.getElementById("r").contentDocument;
  const imgs = [...d.images].filter(i => i.complete && i.naturalWidth > 300).length;
  const svg = d.querySelector("svg");
  const svgWidth = svg ? Math.round(svg.getBoundingClientRect().width) : 0;
  const tables = d.querySelectorAll("table").length;
  const over = d.documentElement.scrollWidth - d.documentElement.clientWidth;
  document.title = `tables=${{tables}} decoded=${{imgs}} svg=${{svgWidth}} overflow=${{over}}`;
}});
</script></body></html>"""


def load(chromium: str, page: Path, tmp: Path, width: int) -> tuple[dict[str, int], list[str]]:
    """What the wrapper finds in ``page`` shown ``width`` pixels wide, and the console messages."""
    wrapper = tmp / f"wrapper-{width}.html"
    wrapper.write_text(WRAPPER.format(src=page.as_uri(), width=width))
    proc = run_chromium(chromium, tmp, "--allow-file-access-from-files", "--virtual-time-budget=10000",
                        "--dump-dom", wrapper.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    title = re.search(r"<title>(.*?)</title>", proc.stdout).group(1)
    assert title != "pending", proc.stdout[-2000:]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", title)}, console_messages(proc.stderr)


def test_the_report_loads_in_chromium_with_its_tables_plot_and_images(chromium, advised, tmp_path):
    found, console = load(chromium, advised[0], tmp_path, 1200)
    assert found["tables"] == 6 and found["decoded"] == advised[0].read_text().count("<figcaption>")
    assert found["svg"] >= 400  # the frontier, drawn at its own width on a desk
    assert found["overflow"] <= 0
    assert console == [], console


def test_the_report_fits_a_phones_width(chromium, advised, tmp_path):
    found, console = load(chromium, advised[0], tmp_path, 375)
    assert found["overflow"] <= 0, found  # nothing scrolls the page sideways: wide tables scroll in their box
    assert 300 <= found["svg"] <= 375  # the plot shrinks to the screen
    assert found["tables"] == 6 and console == []


def test_the_width_check_can_fail(chromium, tmp_path):
    """The overflow check above is not vacuous: a page wider than the phone is caught."""
    page = tmp_path / "wide.html"
    page.write_text('<!DOCTYPE html><html><body><table style="width:900px"><tr><td>x</td></tr></table></body></html>')
    found, _ = load(chromium, page, tmp_path, 375)
    assert found["overflow"] > 0


@pytest.fixture(scope="module")
def windowed(tmp_path_factory) -> Path:
    """``advise --report`` on a scenario with two time windows."""
    import json

    from cdk_gpu_share.cli import main
    from tests.cli.test_advise_cli import write_trace
    from tests.core.test_advise_windows import clock_rows, clock_scenario

    tmp = tmp_path_factory.mktemp("windowed")
    (tmp / "scenario.json").write_text(json.dumps(clock_scenario()))
    trace = write_trace(tmp / "jobs.csv", clock_rows(), header=("job_id", "team", "submit_time", "duration_s", "gpus"))
    out = tmp / "advice.html"
    assert main(["advise", "--scenario", str(tmp / "scenario.json"), "--trace", trace, "--workers", "1",
                 "--origin", "2026-01-05T00:00:00Z", "--report", str(out)]) in (0, 1)
    return out


def test_the_windowed_report_shows_its_windows_and_fits_a_phones_width(chromium, windowed, tmp_path):
    plain = windowed.read_text()
    found, console = load(chromium, windowed, tmp_path, 375)
    # the windows' three tables (guarantees per window, borrow limits, the week) besides the others
    assert found["tables"] == plain.count("<table>") and "<caption>Guarantees per window</caption>" in plain
    assert found["overflow"] <= 0, found
    assert console == [], console
