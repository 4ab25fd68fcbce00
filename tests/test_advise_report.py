"""The advisor's HTML report (`gpu-share advise --report`): what it says. That it loads in a real
headless Chromium, on a desk and at a phone's width: tests/test_advise_report_browser.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cdk_gpu_share.cli import main
from cdk_gpu_share.cli.advise_report import frontier_svg, render_advice_report
from tests.cli.test_advise_cli import write_trace
from tests.core.test_advise import bursty_trace, scenario


def write_advice(tmp: Path) -> tuple[Path, Path]:
    """``advise --fleet size --report`` on two bursty teams, in ``tmp``: the page, and ``tmp``."""
    data = scenario(4, {"a": {"wait_p95_minutes": 20}, "b": {"wait_p95_minutes": 40, "no_worse_than_private": True}})
    (tmp / "scenario.json").write_text(json.dumps(data))
    trace = write_trace(tmp / "jobs.csv", bursty_trace(1, ("a", "b")))
    out = tmp / "advice.html"
    args = ["advise", "--scenario", str(tmp / "scenario.json"), "--trace", trace, "--fleet", "size", "--workers", "1"]
    assert main([*args, "--report", str(out)]) == 0
    return out, tmp


@pytest.fixture(scope="module")
def advised(tmp_path_factory):
    """The page and the folder of the advice's inputs."""
    return write_advice(tmp_path_factory.mktemp("advice"))


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


def test_the_entitlement_shows_beside_the_guarantee_once_some_team_is_owed_other():
    assert "entitled to" not in render_advice_report(ADVICE)  # no entitlement in the advice: nothing to show
    same = json.loads(json.dumps(ADVICE))
    for t in same["teams"].values():
        t["entitlement"] = t["was"]["guarantee"]
    page = render_advice_report(same)
    assert "<th>entitled to (GPUs)</th>" in page
    assert "<th>research</th><td>4 \u2192 8</td><td>4</td>" in page and "<th>prod</th><td>12 \u2192 8</td><td>12</td>" \
        in page


def test_a_warning_of_the_advice_opens_the_page():
    warned = {**ADVICE, "warnings": ["no team has an objective: every configuration is feasible"]}
    page = render_advice_report(warned)
    assert '<p class="verdict no">Warning: no team has an objective: every configuration is feasible.</p>' in page
    assert page.index("Warning:") < page.index("<h2>What changes</h2>")
    assert "Warning:" not in render_advice_report(ADVICE)
