"""The HTML report of `gpu-share simulate --compare --report`, in a real headless Chromium.

The test never installs a browser: it uses the one it finds ($CHROMIUM, else `chromium`,
`chromium-browser`, `google-chrome` or `google-chrome-stable` on the PATH) and otherwise the
module is one skip line saying how to get one (tests/browser.py). CI installs Chromium before
the tests and sets GPU_SHARE_REQUIRE_BROWSER=1, which turns that skip into a failure. The page
itself, without a browser: tests/test_report_page.py.

The report itself has no scripts. A test-only wrapper page loads it in an iframe and
writes what it finds (tables, images that decoded, their sizes) into its own title, which
`--dump-dom` prints; console messages come from Chromium's log (`--enable-logging=stderr`).
A screenshot of the report is kept at $GPU_SHARE_SCREENSHOT_DIR (default: pytest's tmp dir).
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
from pathlib import Path

import pytest

from tests.browser import console_messages, require_browser, run_chromium, write_report

#: Found at import: without a browser the whole module is one skip line (a failure in CI).
CHROMIUM = require_browser()


@pytest.fixture(scope="module")
def chromium():
    return CHROMIUM


WRAPPER = """<!DOCTYPE html><html><head><title>pending</title></head><body>
<iframe id="r" src="{src}" style="width:1200px;height:900px"></iframe>
<script>
document.getElementById("r").addEventListener("load", () => {{
  const d = document.getElementById("r").contentDocument;
  const imgs = [...d.images];
  const ok = imgs.filter(i => i.complete && i.naturalWidth > 300 && i.naturalHeight > 200).length;
  const tables = d.querySelectorAll("table").length;
  const best = d.querySelectorAll("td.best").length;
  const ext = [...d.querySelectorAll("[src],link[href]")].filter(e => !/^data:/.test(e.getAttribute("src") || e.getAttribute("href") || "")).length;
  document.title = `tables=${{tables}} images=${{imgs.length}} decoded=${{ok}} best=${{best}} external=${{ext}}`;
}});
</script></body></html>"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return write_report(tmp_path_factory.mktemp("report"))


def _loaded(chromium: str, report: Path, tmp_path: Path) -> tuple[str, subprocess.CompletedProcess]:
    """What the wrapper page found in ``report`` (its title), and Chromium's run."""
    wrapper = tmp_path / "wrapper.html"
    wrapper.write_text(WRAPPER.format(src=report.as_uri()))
    proc = run_chromium(chromium, tmp_path, "--allow-file-access-from-files", "--virtual-time-budget=10000",
                        "--dump-dom", wrapper.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    return re.search(r"<title>(.*?)</title>", proc.stdout).group(1), proc


def test_the_report_loads_in_chromium_without_console_errors(chromium, report, tmp_path):
    title, proc = _loaded(chromium, report, tmp_path)
    assert title.startswith("tables=4 images=5 decoded=5"), title
    assert "external=0" in title
    assert int(re.search(r"best=(\d+)", title).group(1)) > 0
    # The wrapper's own script runs; the report must add no console message of its own.
    assert console_messages(proc.stderr) == [], console_messages(proc.stderr)


def test_console_errors_are_detected(chromium, tmp_path):
    """The console check above can fail: a page that logs an error is caught."""
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><body><script>console.error("report-broken")</script></body></html>')
    proc = run_chromium(chromium, tmp_path, "--dump-dom", page.as_uri())
    assert any("report-broken" in m for m in console_messages(proc.stderr))


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_a_screenshot_shows_the_tables_and_plots(chromium, report, tmp_path):
    where = Path(os.environ.get("GPU_SHARE_SCREENSHOT_DIR", tmp_path))
    where.mkdir(parents=True, exist_ok=True)
    shot = where / "report.png"
    proc = run_chromium(chromium, tmp_path, "--hide-scrollbars", "--window-size=1200,4200",
                        f"--screenshot={shot}", report.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _png_size(shot) == (1200, 4200)
    # Not a blank page: the PNG of a page of tables and plots compresses far worse than white.
    assert shot.stat().st_size > 100_000
    assert console_messages(proc.stderr) == []


def test_the_report_with_the_compilation_gap_loads_in_chromium(chromium, tmp_path):
    """A config with groups: the gap's table and chart render beside the modes' (static cannot
    run this trace: two usage plots and the gap's chart)."""
    import json

    from cdk_gpu_share.cli import main
    from tests.cli.test_simulate_gap import TRACE, organisation

    config, trace, report = tmp_path / "org.json", tmp_path / "jobs.csv", tmp_path / "report.html"
    config.write_text(json.dumps(organisation()))
    trace.write_text(TRACE)
    assert main(["simulate", "--config", str(config), "--trace", str(trace), "--report", str(report)]) == 0
    title, proc = _loaded(chromium, report, tmp_path)
    assert title.startswith("tables=5 images=3 decoded=3"), title  # the pool, three teams, the gap
    assert console_messages(proc.stderr) == [], console_messages(proc.stderr)
