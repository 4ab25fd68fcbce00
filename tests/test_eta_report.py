"""The backtest's HTML report (`gpu-share eta --backtest --report`): what it says. That it loads
in a real headless Chromium, on a desk and at a phone's width: tests/test_eta_report_browser.py."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from cdk_gpu_share.cli import main
from cdk_gpu_share.cli.eta_report import MAX_PLOTTED, band_svg, render_eta_report
from tests.core.test_eta import random_rows


def write_backtest(tmp: Path) -> tuple[Path, Path]:
    """``eta --backtest --report --json`` on two teams sharing 4 GPUs, in ``tmp``: the page and the JSON."""
    scenario = {"capacity": {"gpu": 4}, "settings": {"reclaim_after_seconds": 0, "min_runtime_seconds": 0},
                "teams": [{"name": "a", "guarantee": {"gpu": 2}}, {"name": "b", "guarantee": {"gpu": 2}}]}
    (tmp / "s.json").write_text(json.dumps(scenario))
    rows = random_rows(random.Random(7), 30)
    (tmp / "jobs.csv").write_text("job_id,team,submit_time,duration_s,gpus,priority\n"
                                  + "".join(",".join(str(c) for c in r) + "\n" for r in rows))
    out = tmp / "eta.html"
    argv = ["eta", "--scenario", str(tmp / "s.json"), "--trace", str(tmp / "jobs.csv"), "--backtest",
            "--samples", "4", "--workers", "1", "--json", "--report", str(out)]
    doc = tmp / "eta.json"
    from contextlib import redirect_stdout
    from io import StringIO

    buf = StringIO()
    with redirect_stdout(buf):
        assert main(argv) == 0
    doc.write_text(buf.getvalue())
    return out, doc


@pytest.fixture(scope="module")
def backtested(tmp_path_factory):
    return write_backtest(tmp_path_factory.mktemp("eta"))


def job(i, team, actual, p10, p50, p90):
    return {"job_id": f"j{i}", "team": team, "submit": float(i), "wait_p10_s": float(p10), "wait_p50_s": float(p50),
            "wait_p90_s": float(p90), "actual_wait_s": float(actual)}


DOC = {
    "samples": 32, "seed": 1,
    "jobs": [job(1, "research", 600, 300, 500, 900), job(2, "research", 4000, 60, 120, 600),
             job(3, "prod", 30, 0, 20, 40)],
    "summary": {"sampled": 3, "coverage_p10_p90": 0.6667, "mdae_p50_s": 100.0, "median_actual_wait_s": 600.0,
                "no_history": 2, "baseline": {"coverage_p10_p90": 0.0, "mdae_p50_s": 900.0},
                "per_team": {"research": {"sampled": 2, "coverage_p10_p90": 0.5, "mdae_p50_s": 3880.0},
                             "prod": {"sampled": 1, "coverage_p10_p90": 1.0, "mdae_p50_s": 10.0}}},
}
BASE = {"research": {"sampled": 2, "coverage_p10_p90": 0.0, "mdae_p50_s": 1500.0},
        "prod": {"sampled": 1, "coverage_p10_p90": 0.0, "mdae_p50_s": 25.0}}


def test_each_team_and_overall_beside_the_baseline():
    page = render_eta_report(DOC, BASE)
    assert "<th>research</th><td>2</td><td>0.50</td><td>65 min</td><td>0.00</td><td>25 min</td>" in page
    assert "<th>prod</th><td>1</td><td>1.00</td><td>10 s</td><td>0.00</td><td>25 s</td>" in page
    assert "<th>overall</th><td>3</td><td>0.67</td><td>100 s</td><td>0.00</td><td>15 min</td>" in page
    assert "held the wait of <b>67%</b> of 3 waiting jobs" in page and "against 15 min for the baseline" in page
    assert "2 jobs left out: no finished job to learn from yet" in page


def test_one_plot_per_team_each_band_coloured_by_whether_it_held():
    page = render_eta_report(DOC, BASE)
    assert page.count("<svg") == 2 and "<script" not in page
    svg = band_svg("research", DOC["jobs"][:2])
    # j1 (600 s in 300-900) held, j2 (4000 s above 60-600) missed
    assert svg.count('<g stroke="#1a7f37">') == 1 and svg.count('<g stroke="#cf222e">') == 1
    assert "j2: waited 67 min; predicted 60 s to 10 min, most likely 2 min" in svg
    assert "band held the wait (1)" in svg and "band missed it (1)" in svg
    # log axes from 10 s to 10,000 s: the ticks a person reads
    assert all(f">{t}</text>" in svg for t in ("10 s", "1 min", "10 min", "1 h"))
    assert ">1 s</text>" not in svg and ">10 h</text>" not in svg


def test_a_zero_wait_is_drawn_at_the_bottom_not_refused():
    svg = band_svg("prod", [DOC["jobs"][2]])  # p10 = 0
    assert "nan" not in svg and ">1 s</text>" in svg


def test_a_big_team_is_drawn_thinned_and_says_so():
    many = [job(i, "a", 60 + i, 30, 60 + i, 200 + i) for i in range(MAX_PLOTTED * 3)]
    svg = band_svg("a", many)
    assert svg.count("<g stroke=") == MAX_PLOTTED
    assert "j0: waited" in svg and f"j{MAX_PLOTTED * 3 - 1}: waited" in svg  # the shortest and longest waits kept
    doc = {**DOC, "jobs": many}
    assert f"{MAX_PLOTTED * 3:,} jobs, {MAX_PLOTTED} of them drawn" in render_eta_report(doc, BASE)


def test_the_cli_report_is_one_self_contained_page_of_the_same_figures(backtested):
    page, doc_path = backtested
    text = page.read_text()
    doc = json.loads(doc_path.read_text())
    assert text.startswith("<!DOCTYPE html>") and "<script" not in text
    assert not re.search(r'(src|href)="', text)
    assert text.count("<svg") == len({j["team"] for j in doc["jobs"]}) == 2
    assert text.count("<g stroke=") == len(doc["jobs"])
    s = doc["summary"]
    assert f"<th>overall</th><td>{s['sampled']}</td><td>{s['coverage_p10_p90']:.2f}</td>" in text
    assert f"<td>{s['baseline']['coverage_p10_p90']:.2f}</td>" in text


def test_report_flag_refuses_a_bad_path_before_any_work(tmp_path, capsys):
    args = ["eta", "--scenario", str(tmp_path / "absent.json"), "--trace", str(tmp_path / "absent.csv"), "--backtest"]
    assert main([*args, "--report", str(tmp_path / "eta.txt")]) == 2
    err = capsys.readouterr().err
    assert "--report" in err and "absent" not in err  # refused before the inputs are read
    assert main([*args, "--report", str(tmp_path / "missing" / "eta.html")]) == 2
    assert "names a folder that does not exist" in capsys.readouterr().err
