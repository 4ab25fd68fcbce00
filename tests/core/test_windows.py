"""Time windows: the config's rules, and which values are in force at an instant."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from cdk_gpu_share.core.configuration.parse import (
    Amount,
    PlatformConfig,
    TeamConfig,
    check_config,
    config_at,
    config_mapping,
    deploy_problems,
    parse_config,
)
from cdk_gpu_share.core.configuration.windows import Window, boundaries, window_at
from cdk_gpu_share.core.errors import ConfigError

UTC = timezone.utc


def base(**changes: object) -> dict:
    raw: dict = {
        "platform": {"name": "gpu-share"},
        "windows": [{"name": "night", "days": ["mon", "tue", "wed", "thu", "fri"], "start": "20:00",
                     "end": "08:00", "timezone": "Europe/Berlin"}],
        "teams": [
            {"name": "research", "guarantee": {"ml.g5.xlarge": 2}, "borrow_limit_percent": 100,
             "windows": {"night": {"guarantee": {"ml.g5.xlarge": 1}}}},
            {"name": "nightly", "guarantee": {"ml.g5.xlarge": 1},
             "windows": {"night": {"guarantee": {"ml.g5.xlarge": 2}, "borrow_limit_percent": 50}}},
        ],
        "batch_quota": {"capacity": {"ml.g5.xlarge": 3}},
    }
    raw.update(changes)
    return raw


def problems_of(raw: dict) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        parse_config(raw)
    return [str(p) for p in exc.value.problems]


def only_problem(raw: dict) -> str:
    found = problems_of(raw)
    assert len(found) == 1, found
    assert "\n" not in found[0]
    return found[0]


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


# -- reading -----------------------------------------------------------------------------------


def test_a_config_with_windows_reads_back_the_same() -> None:
    config = parse_config(base())
    assert config.windows == (Window("night", ("mon", "tue", "wed", "thu", "fri"), "20:00", "08:00", "Europe/Berlin"),)
    assert config.team("nightly").windows == {"night": {"guarantee": {"ml.g5.xlarge": Amount(instances=2)},
                                                        "borrow_limit_percent": 50}}
    assert parse_config(config_mapping(config)) == config


def test_the_python_path_meets_the_same_rules() -> None:
    team = TeamConfig("nightly", {"ml.g5.xlarge": 1}, windows={"night": {"guarantee": {"ml.g5.xlarge": 2}}})
    assert team.windows == {"night": {"guarantee": {"ml.g5.xlarge": Amount(instances=2)}}}
    with pytest.raises(ConfigError, match=r"windows\.night\.guarantee\.ml\.g5\.xlarge"):
        TeamConfig("nightly", {"ml.g5.xlarge": 1}, windows={"night": {"guarantee": {"ml.g5.xlarge": -1}}})
    with pytest.raises(ConfigError, match=r"start: is not a time of day"):
        Window("night", ("mon",), "25:00", "08:00")
    # A team that names a window the platform does not declare is refused where the stacks check.
    config = PlatformConfig(name="gpu-share", teams=(team,), batch_quota=parse_config(base()).batch_quota)
    assert [p.field for p in check_config(config)] == ["teams[0] (nightly).windows.night"]


# -- refusals: one line each, naming the field and the fix ----------------------------------------


@pytest.mark.parametrize(("window", "expected"), [
    ({"days": ["monday"]}, "windows[0] (night).days[0]: is not a day (got 'monday'); use one of mon, tue"),
    ({"start": "8:00"}, "windows[0] (night).start: is not a time of day"),
    ({"end": "24:00"}, "windows[0] (night).end: is not a time of day"),
    ({"timezone": "Europe/Paris2"}, "windows[0] (night).timezone: is not an IANA time zone"),
    ({"days": []}, "windows[0] (night).days: must be a non-empty list of days"),
    ({"colour": "red"}, "windows[0] (night)"),
])
def test_a_bad_window_is_one_line(window: dict, expected: str) -> None:
    raw = base()
    raw["windows"][0].update(window)
    assert only_problem(raw).startswith(expected)


def test_two_windows_open_at_once_are_refused() -> None:
    raw = base()
    raw["windows"].append({"name": "morning", "days": ["tue"], "start": "07:00", "end": "09:00",
                           "timezone": "Europe/Berlin"})
    line = only_problem(raw)
    assert line.startswith("windows[1] (morning): is open at the same time as windows[0] (night)")
    assert "make the windows disjoint" in line


def test_windows_that_touch_do_not_overlap() -> None:
    raw = base()
    raw["windows"].append({"name": "day", "days": ["tue"], "start": "08:00", "end": "20:00",
                           "timezone": "Europe/Berlin"})
    assert len(parse_config(raw).windows) == 2


def test_an_overlap_that_only_daylight_saving_makes_is_found() -> None:
    # New York and Berlin change clocks on different Sundays: for a few weeks a year their
    # offsets differ by 5 hours rather than 6, and these two windows meet only then.
    raw = base()
    raw["windows"] = [
        {"name": "berlin", "days": ["mon"], "start": "14:00", "end": "15:00", "timezone": "Europe/Berlin"},
        {"name": "newyork", "days": ["mon"], "start": "09:00", "end": "09:30", "timezone": "America/New_York"},
    ]
    for team in raw["teams"]:
        team.pop("windows")
    line = only_problem(raw)
    assert line.startswith("windows[1] (newyork): is open at the same time as windows[0] (berlin)")


def test_a_team_naming_an_unknown_window_is_refused() -> None:
    raw = base()
    raw["teams"][0]["windows"] = {"nigth": {"borrow_limit_percent": 0}}
    raw["teams"][1].pop("windows")
    assert only_problem(raw) == ("teams[0] (research).windows.nigth: is not a window of windows: (got 'nigth'); "
                                 "use one of night")


def test_a_window_value_the_base_would_refuse_is_refused_in_the_window() -> None:
    raw = base()
    raw["teams"][0]["windows"]["night"]["guarantee"] = {"ml.g5.xlarge": 1.5}
    # (the window refused, the team's own 2 instances would then break the night's sum too)
    assert problems_of(raw)[0].startswith("teams[0] (research).windows.night.guarantee.ml.g5.xlarge: must be a whole")
    raw = base()
    raw["teams"][0]["windows"]["night"]["guarantee"] = {"ml.p4d.24xlarge": 1}
    assert "names other instance types than the team's guarantee" in problems_of(raw)[0]
    raw = base()
    raw["teams"][0]["sharing"] = "lend"
    raw["teams"][0].pop("borrow_limit_percent")
    raw["teams"][0]["windows"]["night"]["borrow_limit_percent"] = 50
    assert only_problem(raw).startswith(
        "teams[0] (research).windows.night.borrow_limit_percent: is set but sharing is lend, which never borrows")


def test_guarantees_above_the_capacity_in_a_window_are_refused() -> None:
    raw = base()
    raw["teams"][1]["windows"]["night"]["guarantee"] = {"ml.g5.xlarge": 3}
    raw["teams"][0]["windows"]["night"]["guarantee"] = {"ml.g5.xlarge": 1}
    line = only_problem(raw)
    assert line.startswith("batch_quota.capacity.ml.g5.xlarge: the teams' guarantees sum to 4 instances")
    assert "in window night" in line


def test_a_backend_minimum_holds_in_a_window() -> None:
    raw = base()
    raw["teams"][0]["windows"]["night"]["guarantee"] = {"ml.g5.xlarge": 0}
    line = only_problem(raw)
    assert line.startswith("teams[0] (research).windows.night.guarantee")
    assert "in window night" in line


def test_batch_quota_and_hyperpod_deploy_windows() -> None:
    assert deploy_problems(parse_config(base())) == []
    hyperpod = base(hyperpod={"cluster_arn": "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456",
                              "capacity": {"ml.g5.xlarge": 3}})
    hyperpod.pop("batch_quota")
    assert deploy_problems(parse_config(hyperpod)) == []


def test_windows_with_groups_are_deployed_on_batch_quota() -> None:
    raw = base(groups=[{"name": "ml"}])
    for team in raw["teams"]:
        team["group"] = "ml"
    assert deploy_problems(parse_config(raw)) == []


# -- the values in force -------------------------------------------------------------------------


def test_values_in_force_follow_the_window_in_its_zone() -> None:
    config = parse_config(base())
    # Monday 2026-01-05, Berlin is UTC+1: the night opens at 19:00 UTC and closes Tuesday 07:00 UTC.
    assert config_at(config, at("2026-01-05T18:59:59+00:00")).team("nightly").guarantee == {
        "ml.g5.xlarge": Amount(instances=1)}
    night = config_at(config, at("2026-01-05T19:00:00+00:00"))
    assert night.team("nightly").guarantee == {"ml.g5.xlarge": Amount(instances=2)}
    assert night.team("nightly").borrow_limit_percent == 50
    assert night.team("research").guarantee == {"ml.g5.xlarge": Amount(instances=1)}
    assert night.team("research").borrow_limit_percent == 100  # not given for the window: its own
    assert config_at(config, at("2026-01-06T06:59:59+00:00")).team("nightly").guarantee["ml.g5.xlarge"].instances == 2
    assert config_at(config, at("2026-01-06T07:00:00+00:00")).team("nightly").guarantee["ml.g5.xlarge"].instances == 1
    # Friday's night closes on Saturday morning; Saturday opens none.
    assert window_at(config.windows, at("2026-01-10T06:00:00+00:00")) is not None
    assert window_at(config.windows, at("2026-01-10T20:00:00+00:00")) is None


def test_a_window_follows_daylight_saving_in_its_zone() -> None:
    windows = parse_config(base()).windows
    # Europe/Berlin goes to summer time on Sunday 2026-03-29 and back on Sunday 2026-10-25.
    assert window_at(windows, at("2026-03-27T19:00:00+00:00")) is not None      # Fri 20:00 CET
    assert window_at(windows, at("2026-03-28T06:59:00+00:00")) is not None      # Sat 07:59 CET
    assert window_at(windows, at("2026-03-30T18:00:00+00:00")) is not None      # Mon 20:00 CEST
    assert window_at(windows, at("2026-03-30T17:59:00+00:00")) is None
    assert window_at(windows, at("2026-10-26T19:00:00+00:00")) is not None      # Mon 20:00 CET
    assert window_at(windows, at("2026-10-26T18:30:00+00:00")) is None


def test_a_skipped_or_repeated_wall_clock_time_is_read_at_its_first_occurrence() -> None:
    window = Window("early", ("sun",), "02:30", "02:30", "Europe/Berlin")  # 24 hours from 02:30
    # 2026-10-25 repeats 02:30: the first is 00:30 UTC (CEST); the window opens then.
    assert window.is_open(at("2026-10-25T00:30:00+00:00"))
    assert not window.is_open(at("2026-10-25T00:29:00+00:00"))
    # 2026-03-29 skips 02:30: read with the offset before the change, 01:30 UTC.
    assert window.is_open(at("2026-03-29T01:30:00+00:00"))
    assert not window.is_open(at("2026-03-29T01:29:00+00:00"))
    # It closes on Monday at 02:30 local (CEST): 00:30 UTC, 23 hours later.
    assert window.is_open(at("2026-03-30T00:29:00+00:00"))
    assert not window.is_open(at("2026-03-30T00:30:00+00:00"))


def test_boundaries_of_a_week() -> None:
    windows = parse_config(base()).windows
    week = boundaries(windows, at("2026-01-05T00:00:00+00:00"), at("2026-01-12T00:00:00+00:00"))
    assert week[0] == (at("2026-01-05T00:00:00+00:00"), None)
    assert [(t.isoformat(), w.name if w else None) for t, w in week[1:3]] == [
        ("2026-01-05T19:00:00+00:00", "night"), ("2026-01-06T07:00:00+00:00", None)]
    assert len(week) == 1 + 2 * 5


# -- the commands --------------------------------------------------------------------------------


def test_validate_accepts_windows_with_groups_on_batch_quota(tmp_path, capsys) -> None:
    import yaml

    from cdk_gpu_share.cli import main

    raw = base(groups=[{"name": "ml"}])
    for team in raw["teams"]:
        team["group"] = "ml"
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(raw))
    code = main(["validate", str(path)])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert main(["plan", str(path)]) == 0


def test_validate_accepts_windows_on_batch_quota(tmp_path, capsys) -> None:
    import yaml

    from cdk_gpu_share.cli import main

    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(base()))
    assert main(["validate", str(path)]) == 0
    assert "valid: platform gpu-share" in capsys.readouterr().out


def test_plan_shows_the_week_and_each_windows_values_and_sums() -> None:
    from cdk_gpu_share.core.plan import fleet_plan, format_plan

    plan = fleet_plan(parse_config(base()), now=at("2026-07-08T12:00:00+00:00"))  # a summer Wednesday
    week = plan["windows"]
    assert week["week_from"] == "2026-07-06T00:00:00+00:00"
    # Berlin is UTC+2 in July: the night opens at 18:00 UTC and closes at 06:00 UTC.
    assert week["timeline"][:3] == [{"at": "2026-07-06T00:00:00+00:00", "window": None},
                                    {"at": "2026-07-06T18:00:00+00:00", "window": "night"},
                                    {"at": "2026-07-07T06:00:00+00:00", "window": None}]
    night = week["windows"][0]["backends"]["batch_quota"]
    assert [(r["team"], r["guarantee"]) for r in night["teams"]] == [("research", 1.0), ("nightly", 2.0)]
    assert night["guaranteed"] == {"ml.g5.xlarge": {"instances": 3.0, "capacity": 3}}
    assert [(r["team"], r["guarantee"]) for r in week["base"]["backends"]["batch_quota"]["teams"]] == [
        ("research", 2.0), ("nightly", 1.0)]
    assert week["not_deployed_on"] == []  # Batch quota management deploys them
    text = format_plan(plan)
    assert "  Mon 18:00  night" in text
    assert "  window night: mon, tue, wed, thu, fri 20:00-08:00 Europe/Berlin:" in text
    assert "deployed: not yet" not in text


def test_a_config_s_windows_go_into_its_scenario_in_gpus() -> None:
    from cdk_gpu_share.core.scenario import scenario_from_config
    from cdk_gpu_share.core.simulate import parse_scenario

    data = scenario_from_config(parse_config(base()), "batch_quota")
    assert data["windows"] == [{"name": "night", "days": ["mon", "tue", "wed", "thu", "fri"], "start": "20:00",
                                "end": "08:00", "timezone": "Europe/Berlin"}]
    assert [t.get("windows") for t in data["teams"]] == [
        {"night": {"guarantee": {"gpu": 1}}}, {"night": {"guarantee": {"gpu": 2}, "borrow_limit_percent": 50}}]
    scenario = parse_scenario(data)
    assert scenario.guarantee("nightly") == 2 - 1
    night = scenario.state_at(at("2026-01-05T19:00:00+00:00"))
    assert {t.name: t.guarantee["gpu"] for t in night.teams} == {"research": 1, "nightly": 2}
    assert scenario.state_at(at("2026-01-05T18:59:00+00:00")) is scenario.state


def test_a_scenario_s_windows_meet_the_planner_s_rules_in_each_window() -> None:
    from cdk_gpu_share.core.scenario import scenario_from_config
    from cdk_gpu_share.core.simulate import parse_scenario

    data = scenario_from_config(parse_config(base()), "batch_quota")
    data["teams"][1]["windows"]["night"]["guarantee"] = {"gpu": 3}
    with pytest.raises(ConfigError) as exc:
        parse_scenario(data)
    assert len(exc.value.problems) == 1 and str(exc.value.problems[0]).endswith(
        exc.value.problems[0].fix) and "in window night" in str(exc.value.problems[0])
    data = scenario_from_config(parse_config(base()), "batch_quota")
    data["teams"][0]["windows"] = {"day": {"guarantee": {"gpu": 1}}}
    with pytest.raises(ConfigError) as exc:
        parse_scenario(data)
    assert [str(p) for p in exc.value.problems] == [
        "teams[0].windows.day: is not a window of windows (got 'day'); use one of night"]


# -- replays: the values in force at each instant ------------------------------------------------

MONDAY = datetime(2026, 1, 5, tzinfo=UTC)


def swap_scenario(reclaim_after: int = 0) -> dict:
    """Two teams of a 2-GPU pool that swap the pool from 01:00 to 02:00 UTC on Mondays."""
    return {
        "capacity": {"gpu": 2},
        "settings": {"reclaim_after_seconds": reclaim_after, "min_runtime_seconds": 0},
        "windows": [{"name": "swap", "days": ["mon"], "start": "01:00", "end": "02:00"}],
        "teams": [
            {"name": "a", "guarantee": {"gpu": 2}, "borrow_limit_percent": -1,
             "windows": {"swap": {"guarantee": {"gpu": 0}}}},
            {"name": "b", "guarantee": {"gpu": 0}, "borrow_limit_percent": -1,
             "windows": {"swap": {"guarantee": {"gpu": 2}}}},
        ],
    }


def swap_jobs() -> list:
    from cdk_gpu_share.core.simulate import Job

    return [Job("a1", "a", 0.0, 7200.0, 2.0), Job("b1", "b", 1800.0, 600.0, 2.0)]


def outcomes(result) -> dict:
    return {o.id: (o.final_start, o.completion, o.stops) for o in result.outcomes}


def test_a_lower_guarantee_makes_running_jobs_victims_and_a_higher_one_reclaims_at_once() -> None:
    from cdk_gpu_share.core.simulate import parse_scenario, simulate

    result = simulate(parse_scenario(swap_scenario()), swap_jobs(), "share+reclaim", origin=MONDAY)
    # At 01:00 (3600 s) a's guarantee drops to 0: its running a1 borrows, and b (now 2) reclaims at
    # the boundary's own tick. b1 runs 3600-4200; a1, restarted from zero, starts again at 4200 on
    # the idle pool (a borrows) and runs its 7200 s to 11400.
    assert outcomes(result) == {"a1": (4200.0, 11400.0, 1), "b1": (3600.0, 4200.0, 0)}


def test_reclaim_after_counts_from_the_rise_when_the_job_waited_before_it() -> None:
    from cdk_gpu_share.core.simulate import parse_scenario, simulate

    result = simulate(parse_scenario(swap_scenario(reclaim_after=600)), swap_jobs(), "share+reclaim", origin=MONDAY)
    # b1 was submitted at 1800 but b is owed room only from 3600: it may reclaim at 4200, not 2400.
    assert outcomes(result) == {"a1": (4800.0, 4800.0 + 7200.0, 1), "b1": (4200.0, 4800.0, 0)}
    # Its owed wait is read against the guarantee in force: owed from the rise only, 600 s of 2400.
    assert {o.id: o.owed_s for o in result.outcomes}["b1"] == 600.0


def test_without_the_window_nothing_is_reclaimed_and_the_origin_decides_where_the_window_falls() -> None:
    from cdk_gpu_share.core.simulate import parse_scenario, simulate

    plain = swap_scenario()
    plain.pop("windows")
    for team in plain["teams"]:
        team.pop("windows")
    assert outcomes(simulate(parse_scenario(plain), swap_jobs(), "share+reclaim")) == {
        "a1": (0.0, 7200.0, 0), "b1": (7200.0, 7800.0, 0)}
    # From Monday 02:00 the window is a week away: the same as without it.
    later = simulate(parse_scenario(swap_scenario()), swap_jobs(), "share+reclaim",
                     origin=datetime(2026, 1, 5, 2, tzinfo=UTC))
    assert outcomes(later) == {"a1": (0.0, 7200.0, 0), "b1": (7200.0, 7800.0, 0)}


def test_a_replay_with_windows_needs_an_origin() -> None:
    from cdk_gpu_share.core.simulate import parse_scenario, simulate

    with pytest.raises(ConfigError) as exc:
        simulate(parse_scenario(swap_scenario()), swap_jobs(), "share")
    assert [p.field for p in exc.value.problems] == ["--origin"]


def _swap_files(tmp_path, header: str = "") -> tuple[str, str]:
    import json

    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps(swap_scenario()))
    trace = tmp_path / "jobs.csv"
    trace.write_text(header + "job_id,team,submit_time,duration_s,gpus\na1,a,0,7200,2\nb1,b,1800,600,2\n")
    return str(scenario), str(trace)


def test_simulate_reads_the_origin_from_the_trace_header_or_origin(tmp_path, capsys) -> None:
    import json

    from cdk_gpu_share.cli import main

    scenario, trace = _swap_files(tmp_path, "# gpu-share trace export: origin=2026-01-05T00:00:00Z source=test\n")
    assert main(["simulate", "--scenario", scenario, "--trace", trace, "--mode", "share+reclaim", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["preemptions"] == 1
    # --origin comes first: from Monday 02:00 the window is a week away, and nothing is reclaimed.
    assert main(["simulate", "--scenario", scenario, "--trace", trace, "--mode", "share+reclaim", "--json",
                 "--origin", "2026-01-05T03:00:00+01:00"]) == 0
    assert json.loads(capsys.readouterr().out)["preemptions"] == 0


def test_simulate_without_an_origin_is_one_line_naming_origin(tmp_path, capsys) -> None:
    from cdk_gpu_share.cli import main

    scenario, trace = _swap_files(tmp_path)
    assert main(["simulate", "--scenario", scenario, "--trace", trace, "--mode", "share"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--origin: is needed" in err
    assert main(["simulate", "--scenario", scenario, "--trace", trace, "--mode", "share", "--origin", "soon"]) == 2
    assert "--origin: is not an ISO-8601 time (got 'soon')" in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["share", "share+reclaim"])
def test_windows_that_change_nothing_replay_as_without_them(mode: str) -> None:
    from cdk_gpu_share.core.simulate import parse_scenario, simulate

    same = swap_scenario()
    same["teams"][0]["windows"] = {"swap": {"guarantee": {"gpu": 2}}}
    same["teams"][1]["windows"] = {"swap": {"guarantee": {"gpu": 0}}}
    plain = swap_scenario()
    plain.pop("windows")
    for team in plain["teams"]:
        team.pop("windows")
    jobs = swap_jobs()
    with_windows = simulate(parse_scenario(same), jobs, mode, origin=MONDAY).to_dict()
    without = simulate(parse_scenario(plain), jobs, mode).to_dict()
    for doc in (with_windows, without):
        doc.pop("sim_seconds", None)
        doc.pop("simulation_seconds", None)
    assert with_windows == without
