"""`gpu-share advise` with time windows: --origin (or the trace's header), --windows, -o writing
each team's values per window (comments kept) that `gpu-share simulate` reproduces, the tables,
the report's row per window, and bad input refused in one line."""

from __future__ import annotations

import json
import textwrap

import yaml

from tests.cli.test_advise_cli import run, simulate_json, write_trace
from tests.core.test_advise_windows import clock_rows, clock_scenario

HEADER = "# gpu-share trace export: origin=2026-01-05T00:00:00Z source=test\n"


def files(tmp_path, header: str = "") -> tuple[str, str]:
    (tmp_path / "scenario.json").write_text(json.dumps(clock_scenario()))
    trace = tmp_path / "jobs.csv"
    write_trace(trace, clock_rows(), header=("job_id", "team", "submit_time", "duration_s", "gpus"))
    trace.write_text(header + trace.read_text())
    return str(tmp_path / "scenario.json"), str(trace)


def test_the_written_scenario_with_windows_reproduces_the_advice(capsys, tmp_path):
    scenario, trace = files(tmp_path, HEADER)  # the origin from the trace's header
    out_path = str(tmp_path / "advised.json")
    code, out, err = run(capsys, ["advise", "--scenario", scenario, "--trace", trace, "--workers", "1", "--json",
                                  "-o", out_path])
    doc = json.loads(out)
    assert code == (0 if doc["feasible"] else 1), err
    assert doc["origin"] == "2026-01-05T00:00:00+00:00"
    assert {"windows", "timeline", "static", "base_guarantees"} <= set(doc)
    written = json.loads(open(out_path).read())
    assert written["windows"] == clock_scenario()["windows"]
    result = simulate_json(capsys, ["--scenario", out_path, "--trace", trace])
    assert result["wait_gpu_hours"] + result["lost_gpu_seconds"] / 3600 == doc["regret_gpu_hours"]
    for name, team in result["teams"].items():
        assert team.get("objectives") == (doc["teams"][name]["objectives"] or None)


def test_windows_without_an_origin_exit_2_in_one_line_naming_origin(capsys, tmp_path):
    scenario, trace = files(tmp_path)
    code, out, err = run(capsys, ["advise", "--scenario", scenario, "--trace", trace, "--workers", "1"])
    assert code == 2 and err.count("\n") == 1 and "--origin: is needed" in err, err
    code, out, err = run(capsys, ["advise", "--scenario", scenario, "--trace", trace, "--origin", "soon"])
    assert code == 2 and "--origin: is not an ISO-8601 time (got 'soon')" in err and "Traceback" not in err


def test_an_unknown_window_exits_2_in_one_line(capsys, tmp_path):
    scenario, trace = files(tmp_path)
    code, out, err = run(capsys, ["advise", "--scenario", scenario, "--trace", trace, "--origin",
                                  "2026-01-05T00:00:00Z", "--windows", "night,lunch"])
    assert code == 2 and err.count("\n") == 1 and "--windows: is not a window of the input (got 'lunch')" in err, err


def test_the_tables_have_a_row_per_window_and_team(capsys, tmp_path):
    scenario, trace = files(tmp_path)
    code, out, err = run(capsys, ["advise", "--scenario", scenario, "--trace", trace, "--workers", "1",
                                  "--origin", "2026-01-05T00:00:00Z", "--windows", "night"])
    assert code in (0, 1), err
    assert "the advice gives values in night" in out and "the best advice without window values" in out
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["base"], ["night"], ["weekend"])]
    assert [(r[0], r[-4]) for r in rows] == [(w, t) for w in ("base", "night", "weekend") for t in "abc"]
    assert "the week (UTC): Mon 00:00 night, Mon 08:00 base" in out


CONFIG = textwrap.dedent("""\
    # a platform whose teams follow the clock
    platform:
      name: clock

    windows:
      - name: night   # the nightly training block
        days: [mon, tue, wed, thu, fri, sat, sun]
        start: "20:00"
        end: "08:00"

    teams:
      - name: a        # trains at night
        guarantee: {g5.xlarge: 3}
        objectives: {wait_p95_minutes: 45}
      - name: b
        guarantee:
          g5.xlarge: 3   # three in the day
        objectives: {wait_p95_minutes: 45}
        windows:
          night:   # b's night
            borrow_limit_percent: 100
      - name: c
        guarantee: {g5.xlarge: 2}

    fairshare:
      capacity:
        g5.xlarge: 8   # eight GPUs
      reclaim:
        schedule_minutes: 1
        reclaim_after_seconds: 60
    """)


def test_the_written_config_carries_the_windows_keeps_its_comments_and_simulate_agrees(capsys, tmp_path):
    (tmp_path / "platform.yaml").write_text(CONFIG)
    trace = write_trace(tmp_path / "jobs.csv", clock_rows(), header=("job_id", "team", "submit_time", "duration_s",
                                                                     "gpus"))
    out_path = tmp_path / "advised.yaml"
    code, out, err = run(capsys, ["advise", str(tmp_path / "platform.yaml"), "--trace", trace, "--workers", "1",
                                  "--origin", "2026-01-05T00:00:00Z", "--json", "-o", str(out_path)])
    doc = json.loads(out)
    assert code == (0 if doc["feasible"] else 1), err
    text = out_path.read_text()
    for comment in ("# a platform whose teams follow the clock", "# the nightly training block", "# trains at night",
                    "# eight GPUs"):
        assert comment in text
    written = yaml.safe_load(text)
    assert written["windows"] == yaml.safe_load(CONFIG)["windows"]
    for team in written["teams"]:  # each window's guarantee in whole instances, as the advice says
        advised = doc["teams"][team["name"]]
        night = (team.get("windows") or {}).get("night", {})
        assert night.get("guarantee", team["guarantee"])["g5.xlarge"] == advised["windows"]["night"]["guarantee"]["gpu"]
    result = simulate_json(capsys, ["--config", str(out_path), "--trace", trace, "--origin", "2026-01-05T00:00:00Z"])
    assert result["wait_gpu_hours"] + result["lost_gpu_seconds"] / 3600 == doc["regret_gpu_hours"]
    for name, team in result["teams"].items():
        assert team.get("objectives") == (doc["teams"][name]["objectives"] or None)


def test_the_report_adds_a_row_per_window_and_the_week(capsys, tmp_path):
    scenario, trace = files(tmp_path, HEADER)
    report = tmp_path / "advice.html"
    code, out, err = run(capsys, ["advise", "--scenario", scenario, "--trace", trace, "--workers", "1",
                                  "--report", str(report)])
    assert code in (0, 1), err
    page = report.read_text()
    assert "<h2>Time windows</h2>" in page and "<caption>Guarantees per window</caption>" in page
    table = page.split("<caption>Guarantees per window</caption>", 1)[1].split("</table>", 1)[0]
    assert [cell.split("<", 1)[0] for cell in table.split("<tr><th>")[2:]] == ["base", "night", "weekend"]
    assert "<caption>The week from the Monday before the trace&#x27;s second 0</caption>" in page
