"""The browser of the report tests, found and never installed.

The tests use the browser ``$CHROMIUM`` names, else the first of :data:`BROWSERS` on the PATH.
Without one, :func:`require_browser` skips the calling test module with one line saying how to
get one; with ``GPU_SHARE_REQUIRE_BROWSER=1`` (CI, which installs Chromium first) it fails instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cdk_gpu_share.cli import main

__all__ = ["BROWSERS", "FLAGS", "NO_BROWSER", "console_messages", "find_browser", "require_browser", "run_chromium",
           "write_report"]

ROOT = Path(__file__).resolve().parents[1]

#: The browsers looked for on the PATH, after $CHROMIUM.
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
NO_BROWSER = ("no Chromium for the report test: install Chromium or Google Chrome (Debian/Ubuntu: "
              "apt-get install chromium) or set CHROMIUM=/path/to/chromium")


FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def find_browser() -> str | None:
    """The browser to use: $CHROMIUM when set, else the first of BROWSERS on the PATH."""
    return os.environ.get("CHROMIUM") or next(filter(None, map(shutil.which, BROWSERS)), None)


def require_browser() -> str:
    """The browser; called at a test module's top, so that a machine without one gets one skip
    line for the whole module (a failure under GPU_SHARE_REQUIRE_BROWSER)."""
    found = find_browser()
    if found:
        return found
    if os.environ.get("GPU_SHARE_REQUIRE_BROWSER"):
        pytest.fail(NO_BROWSER, pytrace=False)
    pytest.skip(NO_BROWSER, allow_module_level=True)


def write_report(tmp: Path) -> Path:
    """The report of `gpu-share simulate --compare --report` on a small trace of the default config."""
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


def run_chromium(chromium: str, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    return subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
                           *args], capture_output=True, text=True, timeout=120)


def console_messages(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]
