"""The advisor's HTML report (`gpu-share advise --report`): what it says, and that it loads in a
real headless Chromium, on a desk and at a phone's width, as the simulate report is tested
(tests/browser.py: the same browser lookup; tests/test_report_browser.py: the same wrapper technique)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from cdk_gpu_share.cli import main
from cdk_gpu_share.cli.advise_report import frontier_svg, render_advice_report
from tests.browser import NO_BROWSER, console_messages, find_browser, run_chromium
from tests.cli.test_advise_cli import write_trace
from tests.core.test_advise import bursty_trace, scenario


@pytest.fixture(scope="module")
def chromium():
    """The browser, for the tests that load the page; the page's content is checked without one."""
    found = find_browser()
    if found:
        return found
    if os.environ.get("GPU_SHARE_REQUIRE_BROWSER"):
        pytest.fail(NO_BROWSER)
    pytest.skip(NO_BROWSER)


@pytest.fixture(scope="module")
def advised(tmp_path_factory):
    """``advise --fleet size --report`` on two bursty teams: the page and the advice's JSON."""
    tmp = tmp_path_factory.mktemp("advice")
    data = scenario(4, {"a": {"wait_p95_minutes": 20}, "b": {"wait_p95_minutes": 40, "no_worse_than_private": True}})
    (tmp / "scenario.json").write_text(json.dumps(data))
    trace = write_trace(tmp / "jobs.csv", bursty_trace(1, ("a", "b")))
    out = tmp / "advice.html"
    args = ["advise", "--scenario", str(tmp / "scenario.json"), "--trace", trace, "--fleet", "size", "--workers", "1"]
    assert main([*args, "--report", str(out)]) == 0
    return out, tmp


# ---------------------------------------------------------------------------
# What the page says


ADVICE = {
    "feasible": False, "fleet": "size", "capacity": {"gpu": 16},
    "teams": {
        "research": {"guarantee": {"gpu": 8}, "sharing": "lend_and_borrow", "borrow_limit_percent": 50,
                     "was": {"guarantee": {"gpu": 4}, "sharing": "lend_and_borrow", "borrow_limit_percent": -1},
                     "objectives": {"wait_p95_minutes": {"target": 60, "value": 75.5, "met": False},
                                    "max_preempted_per_day": {"target": 0, "value": 0.0, "met": True}}},
        "prod": {"guarantee": {"gpu": 8}, "sharing": "lend",
                 "was": {"guarantee": {"gpu": 12}, "sharing": "reserve"},
                 "objectives": {"no_worse_than_private": {"target": True, "value": -120.0, "met": True}}},
    },
    "regret_gpu_hours": 812.5,
    "input": {"feasible": False, "regret_gpu_hours": 1022.0, "worst_ratio": None},
    "simulations": 412,
    "frontier": [{"capacity": {"gpu": 16}, "feasible": False, "worst_ratio": 1.26, "regret_gpu_hours": 812.5},
                 {"capacity": {"gpu": 8}, "feasible": False, "worst_ratio": None, "regret_gpu_hours": 2990.1}],
}


def test_each_team_before_and_after_and_each_objective_with_its_verdict():
    page = render_advice_report(ADVICE)
    assert "<td>4 \u2192 8</td>" in page and "<td>unlimited \u2192 50 % of the guarantee</td>" in page
    assert "<td>12 \u2192 8</td><td>reserve (keeps its idle GPUs) \u2192 lend</td><td>none</td>" in page
    assert ("<th>research</th><td>wait_p95_minutes</td><td>60 min</td><td>75.5 min</td>"
            '<td class="missed">NO</td>') in page
    assert '<td>max_preempted_per_day</td><td>0/day</td><td>0/day</td><td class="met">yes</td>' in page
    assert '<td>no_worse_than_private</td><td>private + slack</td><td>-120 s</td><td class="met">yes</td>' in page
    assert "No configuration found meets every objective" in page and "<b>812.5</b>" in page
    assert "worst ratio never met" in page and "412 simulations" in page


def test_the_frontier_is_a_plot_and_a_table_in_capacity_order():
    page = render_advice_report(ADVICE)
    assert page.count("<svg") == 1 and "<script" not in page
    rows = re.findall(r"<tr><th>(\d+)( \(advised\))?</th><td>(yes|no)</td><td>([^<]*)</td>", page)
    assert [(r[0], r[1], r[3]) for r in rows] == [("8", "", "never met (a zero target missed)"),
                                                  ("16", " (advised)", "1.26")]
    svg = frontier_svg(ADVICE["frontier"], 16)
    assert svg.count("<circle") == 2 and svg.count('fill="#fff" stroke="#0969da"') == 2  # both hollow: infeasible
    assert "8 GPUs: worst ratio never" in svg and ">advised</text>" in svg


def test_a_fixed_fleet_has_no_frontier_and_the_simulate_report_is_part_of_the_page():
    fixed = {**ADVICE, "fleet": "fixed", "frontier": [], "feasible": True}
    simulated = ('<!DOCTYPE html><html><head><style>x</style></head><body><h1>What would each policy do?</h1>'
                 "<h2>Pool</h2><table><tr><td>1</td></tr></table></body></html>")
    page = render_advice_report(fixed, simulated)
    assert "<svg" not in page and "The frontier" not in page
    assert "Every objective holds with <b>16 GPUs</b>" in page
    # its body, one heading level down, its tables in scrolling boxes; one page, one head
    assert "<h2>What would each policy do?</h2><h3>Pool</h3>" in page and page.count("<head>") == 1
    assert '<div class="scroll"><table><tr><td>1</td></tr></table></div>' in page


def test_the_cli_report_is_one_self_contained_page(advised):
    out, _ = advised
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<script" not in text
    assert not re.search(r'(src|href)="(?!data:)', text)
    assert text.count("<svg") == 1  # the frontier (--fleet size)
    # the advice's tables (teams, objectives, frontier) and the simulate report's (pool, two teams)
    assert text.count("<table>") == 6
    # a usage plot per mode the advised configuration runs in (static cannot run a team guaranteed 0)
    assert text.count("data:image/png;base64,") == text.count("<figcaption>") >= 2


def test_report_flag_refuses_a_bad_path_before_any_work(advised, capsys):
    _, tmp = advised
    args = ["advise", "--scenario", str(tmp / "scenario.json"), "--trace", str(tmp / "jobs.csv"), "--workers", "1"]
    assert main([*args, "--report", str(tmp / "advice.txt")]) == 2
    assert "--report" in capsys.readouterr().err
    assert main([*args, "--report", str(tmp / "missing" / "advice.html")]) == 2
    assert "names a folder that does not exist" in capsys.readouterr().err


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
