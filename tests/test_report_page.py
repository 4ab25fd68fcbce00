"""The report page without a browser (one self-contained file), and how the browser tests find
their browser: never by installing one (tests/browser.py)."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.browser import BROWSERS, NO_BROWSER, require_browser, write_report


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return write_report(tmp_path_factory.mktemp("report"))


def test_the_report_is_one_self_contained_page(report):
    text = report.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert "<script" not in text  # nothing to run, nothing to fail
    assert not re.search(r'(src|href)="(?!data:)', text)  # no external resource: readable offline, by mail
    # static, share, share+reclaim, with checkpoints, and with the checkpoint-aware victim order
    assert text.count("data:image/png;base64,") == 5
    assert text.count("<table>") == 4  # the pool and three teams
    assert "<li>victim order, lost work: " in text  # which order won, in the page too


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
        require_browser()
    assert str(skipped.value) == NO_BROWSER and skipped.value.allow_module_level  # one line for the module and "\n" not in NO_BROWSER
    assert "CHROMIUM=" in NO_BROWSER and "apt-get install chromium" in NO_BROWSER


def test_ci_fails_instead_of_skipping(no_browser, monkeypatch):
    monkeypatch.setenv("GPU_SHARE_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="no Chromium for the report test"):
        require_browser()


@pytest.mark.parametrize("name", BROWSERS)
def test_a_browser_on_the_path_is_found(no_browser, name):
    exe = no_browser / name
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert require_browser() == str(exe)


def test_chromium_variable_wins(no_browser, monkeypatch):
    (no_browser / "chromium").write_text("#!/bin/sh\n")
    (no_browser / "chromium").chmod(0o755)
    monkeypatch.setenv("CHROMIUM", "/opt/chrome/chrome")
    assert require_browser() == "/opt/chrome/chrome"
