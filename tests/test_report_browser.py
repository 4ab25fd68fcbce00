"""The HTML report of `gpu-share simulate --compare --report`, in a real headless Chromium.

The test never installs a browser: it uses the one it finds ($CHROMIUM, else `chromium`,
`chromium-browser`, `google-chrome` or `google-chrome-stable` on the PATH) and otherwise skips
with one line saying how to get one. CI installs Chromium before the tests and sets
GPU_SHARE_REQUIRE_BROWSER=1, which turns that skip into a failure.

The report itself has no scripts. A test-only wrapper page loads it in an iframe and
writes what it finds (tables, images that decoded, their sizes) into its own title, which
`--dump-dom` prints; console messages come from Chromium's log (`--enable-logging=stderr`).
A screenshot of the report is kept at $GPU_SHARE_SCREENSHOT_DIR (default: pytest's tmp dir).
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from cdk_gpu_share.cli import main

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


#: The browsers the test looks for on the PATH, after $CHROMIUM.
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
NO_BROWSER = ("no Chromium for the report test: install Chromium or Google Chrome (Debian/Ubuntu: "
              "apt-get install chromium) or set CHROMIUM=/path/to/chromium")


def find_browser() -> str | None:
    """The browser to use: $CHROMIUM when set, else the first of BROWSERS on the PATH."""
    return os.environ.get("CHROMIUM") or next(filter(None, map(shutil.which, BROWSERS)), None)


def _chromium() -> str:
    found = find_browser()
    if found:
        return found
    if os.environ.get("GPU_SHARE_REQUIRE_BROWSER"):
        pytest.fail(NO_BROWSER)
    pytest.skip(NO_BROWSER)


@pytest.fixture
def no_browser(monkeypatch, tmp_path):
    """A machine without a browser, where running any program fails the test."""
    monkeypatch.delenv("CHROMIUM", raising=False)
    monkeypatch.delenv("GPU_SHARE_REQUIRE_BROWSER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))

    def forbidden(*args, **kwargs):
        raise AssertionError(f"the browser lookup ran a program: {args}")

    monkeypatch.setattr(subprocess, "run", forbidden)
    monkeypatch.setattr(subprocess, "Popen", forbidden)
    return tmp_path


def test_without_a_browser_the_test_skips_with_one_line_and_runs_nothing(no_browser):
    with pytest.raises(pytest.skip.Exception) as skipped:
        _chromium()
    assert str(skipped.value) == NO_BROWSER and "\n" not in NO_BROWSER
    assert "CHROMIUM=" in NO_BROWSER and "apt-get install chromium" in NO_BROWSER


def test_ci_fails_instead_of_skipping(no_browser, monkeypatch):
    monkeypatch.setenv("GPU_SHARE_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="no Chromium for the report test"):
        _chromium()


@pytest.mark.parametrize("name", BROWSERS)
def test_a_browser_on_the_path_is_found(no_browser, name):
    exe = no_browser / name
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert _chromium() == str(exe)


def test_chromium_variable_wins(no_browser, monkeypatch):
    (no_browser / "chromium").write_text("#!/bin/sh\n")
    (no_browser / "chromium").chmod(0o755)
    monkeypatch.setenv("CHROMIUM", "/opt/chrome/chrome")
    assert _chromium() == "/opt/chrome/chrome"


@pytest.fixture(scope="module")
def chromium():
    return _chromium()


def run_chromium(chromium: str, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    return subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
                           *args], capture_output=True, text=True, timeout=120)


def console_messages(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


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
    tmp = tmp_path_factory.mktemp("report")
    rows = ["job_id,team,submit_time,duration_s,gpus,priority"]
    rows += [f"b{i},team-b,{i * 10},2000,1,0" for i in range(3)]
    rows += [f"a{i},team-a,{300 + i * 400},500,1,1" for i in range(3)]
    rows += [f"c{i},team-c,{900 + i * 50},300,0.5,0" for i in range(4)]
    trace = tmp / "jobs.csv"
    trace.write_text("\n".join(rows) + "\n")
    out = tmp / "report.html"
    code = main(["simulate", "--config", str(ROOT / "platform.yaml"), "--backend", "fairshare", "--trace", str(trace),
                 "--compare", "--checkpoint-seconds", "120", "--report", str(out)])
    assert code == 0
    return out


def test_the_report_is_one_self_contained_page(report):
    text = report.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert "<script" not in text  # nothing to run, nothing to fail
    assert not re.search(r'(src|href)="(?!data:)', text)  # no external resource: readable offline, by mail
    # static, share, share+reclaim, with checkpoints, and with the checkpoint-aware victim order
    assert text.count("data:image/png;base64,") == 5
    assert text.count("<table>") == 4  # the pool and three teams
    assert "<li>victim order, lost work: " in text  # which order won, in the page too


def test_the_report_loads_in_chromium_without_console_errors(chromium, report, tmp_path):
    wrapper = tmp_path / "wrapper.html"
    wrapper.write_text(WRAPPER.format(src=report.as_uri()))
    proc = run_chromium(chromium, tmp_path, "--allow-file-access-from-files", "--virtual-time-budget=10000",
                        "--dump-dom", wrapper.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    title = re.search(r"<title>(.*?)</title>", proc.stdout).group(1)
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
