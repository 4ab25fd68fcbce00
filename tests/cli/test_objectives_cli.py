"""Team objectives through the platform config: parsed and written back, warned about, listed by
``plan``, and judged by ``simulate`` (a column, the JSON, and ``--compare``'s marks)."""

from __future__ import annotations

import json

import pytest
import yaml

from cdk_gpu_share.cli import main
from cdk_gpu_share.core import scenario as sc
from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.configuration.objectives import Objectives
from cdk_gpu_share.core.configuration.parse import TeamConfig, config_mapping, load_config, parse_config
from cdk_gpu_share.core.errors import ConfigError

# Two teams of one g5.xlarge GPU each on a fair-share queue of two: team-b borrows team-a's GPU
# from 0; team-a's job at 3570 gets it back at the reclaimer's next one-minute tick (3600).
CONFIG = {
    "platform": {"name": "gpu-share"},
    "teams": [
        {"name": "team-a", "guarantee": {"g5.xlarge": 1}, "sharing": "lend",
         "objectives": {"guarantee_wait_p99_minutes": 0.5, "no_worse_than_private": True}},
        {"name": "team-b", "guarantee": {"g5.xlarge": 1}, "sharing": "lend_and_borrow",
         "objectives": {"max_preempted_per_day": 1, "wait_p95_minutes": 62}},
    ],
    "fairshare": {"capacity": {"g5.xlarge": 2}, "reclaim": {"schedule_minutes": 1, "reclaim_after_seconds": 0}},
}
TRACE = ("job_id,team,submit_time,duration_s,gpus\n"
         "b1,team-b,0,10000,1\nb2,team-b,0,10000,1\na1,team-a,3570,100,1\n")


@pytest.fixture
def files(tmp_path):
    def write(config=CONFIG, trace=TRACE):
        cfg, jobs = tmp_path / "platform.yaml", tmp_path / "jobs.csv"
        cfg.write_text(yaml.safe_dump(config, sort_keys=False))
        jobs.write_text(trace)
        return str(cfg), str(jobs)
    return write


def test_a_teams_objectives_are_read_and_written_back():
    config = parse_config(CONFIG)
    assert config.team("team-a").objectives == Objectives({"guarantee_wait_p99_minutes": 0.5,
                                                           "no_worse_than_private": True})
    assert not parse_config({**CONFIG, "teams": [{"name": "t", "guarantee": {"g5.xlarge": 1}}]}).teams[0].objectives
    again = parse_config(config_mapping(config))
    assert [t.objectives for t in again.teams] == [t.objectives for t in config.teams]


def test_the_python_team_takes_the_yaml_spelling():
    team = TeamConfig(name="a", guarantee={"g5.xlarge": 1}, objectives={"wait_p95_minutes": 30})
    assert team.objectives == Objectives({"wait_p95_minutes": 30})
    assert TeamConfig(name="a", guarantee={"g5.xlarge": 1}, objectives=team.objectives).objectives is team.objectives


def test_the_scenario_of_a_config_carries_the_objectives():
    scenario = sim.parse_scenario(sc.scenario_from_config(parse_config(CONFIG), "fairshare"))
    assert scenario.objectives["team-b"] == Objectives({"wait_p95_minutes": 62, "max_preempted_per_day": 1})


def test_an_unknown_objective_exits_2_naming_the_field(files, capsys):
    bad = json.loads(json.dumps(CONFIG))
    bad["teams"][0]["objectives"] = {"gaurantee_wait_p99_minutes": 5}
    path, _ = files(bad)
    assert main(["validate", path]) == 2
    err = capsys.readouterr().err
    assert "teams[0] (team-a).objectives.gaurantee_wait_p99_minutes: unknown key" in err
    assert "did you mean 'guarantee_wait_p99_minutes'?" in err and "Traceback" not in err


@pytest.mark.parametrize("key", ["max_preempted_per_day", "max_lost_gpu_hours_per_day"])
@pytest.mark.parametrize("command", [["validate"], ["validate", "--json"], ["plan"]])
def test_never_stopped_with_lend_and_borrow_is_a_warning_naming_the_conflict(files, capsys, key, command):
    config = json.loads(json.dumps(CONFIG))
    config["teams"][1]["objectives"] = {key: 0}
    path, _ = files(config)
    assert main([*command[:1], path, *command[1:]]) == 0
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "objectives" in x)
    assert line.startswith("warning: teams[1] (team-b): ")
    assert f"{key}: 0" in line and "lend_and_borrow" in line and "set sharing: lend or reserve" in line
    config["teams"][1]["sharing"] = "lend"
    path, _ = files(config)
    assert main([*command[:1], path, *command[1:]]) == 0
    assert "objectives" not in capsys.readouterr().err


def test_plan_lists_each_teams_objectives(files, capsys):
    path, _ = files()
    assert main(["plan", path]) == 0
    out = capsys.readouterr().out
    assert ("  objectives: team-a guarantee wait p99 <= 0.5 min, no worse than a private cluster of its entitlement;"
            " team-b wait p95 <= 62 min, at most 1 stops a day") in out
    assert main(["plan", path, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["backends"]["fairshare"]["teams"]
    assert rows[1]["objectives"] == {"wait_p95_minutes": 62, "max_preempted_per_day": 1}


def test_simulate_judges_each_objective_in_its_json(files, capsys):
    path, trace = files()
    assert main(["simulate", "--config", path, "--trace", trace, "--mode", "share+reclaim", "--json"]) == 0
    teams = json.loads(capsys.readouterr().out)["teams"]
    assert teams["team-a"]["objectives"] == {
        "guarantee_wait_p99_minutes": {"target": 0.5, "value": 0.5, "met": True},
        # shared, a1 waits 30 s; alone on its GPU, none; the slack is 60 + 0 + 60 s
        "no_worse_than_private": {"target": True, "value": -90.0, "met": True},
    }
    assert teams["team-b"]["objectives"]["max_preempted_per_day"] == {"target": 1, "value": 1.0, "met": True}
    assert teams["team-b"]["lost_gpu_seconds"] == 3600.0


def test_simulate_prints_the_verdicts_as_a_column(files, capsys):
    path, trace = files()
    assert main(["simulate", "--config", path, "--trace", trace, "--mode", "share"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("team "))
    assert header.rstrip().endswith("objectives")
    row = next(line for line in out.splitlines() if line.startswith("team-a "))
    # without reclaim team-a waits for team-b's job to end: 6430 s
    assert "guarantee wait p99 107.167/0.5 min MISSED, vs private +6,310 s MISSED" in row


def test_without_objectives_simulate_prints_and_writes_what_it_did(files, capsys):
    config = json.loads(json.dumps(CONFIG))
    for team in config["teams"]:
        del team["objectives"]
    path, trace = files(config)
    assert main(["simulate", "--config", path, "--trace", trace, "--mode", "share", "--json"]) == 0
    assert all("objectives" not in t for t in json.loads(capsys.readouterr().out)["teams"].values())
    assert main(["simulate", "--config", path, "--trace", trace, "--mode", "share"]) == 0
    assert "objectives" not in capsys.readouterr().out


def test_compare_marks_per_mode_the_teams_whose_objectives_all_hold(files, capsys):
    path, trace = files()
    assert main(["simulate", "--config", path, "--trace", trace, "--compare", "--json"]) == 0
    comparison = json.loads(capsys.readouterr().out)["comparison"]
    # static: team-b runs one job at a time (b2 waits 10000 s); share: team-a waits for its GPU
    # (no reclaim) while team-b is never stopped; share+reclaim: b2 is stopped once and waits
    # 3700 s in all (61.7 min), and team-a gets its GPU back in 30 s.
    assert comparison["objectives_hold"] == {"static": ["team-a"], "share": ["team-b"],
                                             "share+reclaim": ["team-a", "team-b"]}
    assert comparison["teams"]["team-a"]["objectives_met"]["values"] == {"static": 2, "share": 0, "share+reclaim": 2}
    assert main(["simulate", "--config", path, "--trace", trace, "--compare"]) == 0
    out = capsys.readouterr().out
    assert "note: objectives, share+reclaim: all hold for team-a, team-b" in out
    assert "note: objectives, share: all hold for team-b" in out
    assert "objectives met" in out and "2 of 2" in out


def test_load_config_reads_objectives_from_a_file(files):
    path, _ = files()
    assert load_config(path).team("team-b").objectives.targets["wait_p95_minutes"] == 62


# ---------------------------------------------------------------------------
# Entitlement: team-a is guaranteed nothing but was promised one GPU. team-b holds both GPUs from
# 0 to 10000; the planner (which knows the guarantees only) lets team-a's job at 3570 wait.

PROMISED = json.loads(json.dumps(CONFIG))
PROMISED["teams"][0]["guarantee"] = {"g5.xlarge": 0}
PROMISED["teams"][0]["sharing"] = "lend_and_borrow"
PROMISED["teams"][0]["objectives"] = {"guarantee_wait_p99_minutes": 0.5, "entitlement": {"g5.xlarge": 1}}


def test_the_config_entitlement_is_read_written_back_and_given_to_the_scenario_in_gpus():
    config = parse_config(PROMISED)
    assert config.team("team-a").objectives == Objectives({"guarantee_wait_p99_minutes": 0.5},
                                                          entitlement={"g5.xlarge": 1})
    assert parse_config(config_mapping(config)).team("team-a").objectives == config.team("team-a").objectives
    data = sc.scenario_from_config(config, "fairshare")
    assert data["teams"][0]["objectives"] == {"guarantee_wait_p99_minutes": 0.5, "entitlement": {"gpu": 1}}
    assert sim.parse_scenario(data).entitlement("team-a") == 1


def test_the_python_team_meets_the_entitlement_rules_of_the_yaml():
    team = TeamConfig(name="a", guarantee={"g5.xlarge": 1},
                      objectives=Objectives({"wait_p95_minutes": 30}, entitlement={"g5.xlarge": 2}))
    assert team.objectives.entitlement == {"g5.xlarge": 2}
    with pytest.raises(ConfigError) as exc:
        TeamConfig(name="a", guarantee={"g5.xlarge": 1}, objectives={"entitlement": {"g5.2xlarge": 1}})
    assert str(exc.value).startswith("invalid argument")
    assert "TeamConfig('a').objectives.entitlement.g5.2xlarge: is not an instance type of the team's guarantee" \
        in str(exc.value)


def test_plan_prints_the_entitlement_beside_the_guarantee_when_they_differ(files, capsys):
    path, _ = files(PROMISED)
    assert main(["plan", path]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("  team-")}
    assert "entitled to 1 instance (1 GPU)" in rows["team-a"], rows
    assert "entitled" not in rows["team-b"]
    assert main(["plan", path, "--json"]) == 0
    plan_rows = json.loads(capsys.readouterr().out)["backends"]["fairshare"]["teams"]
    assert plan_rows[0]["entitlement"] == 1 and "entitlement" not in plan_rows[1]
    assert plan_rows[0]["objectives"] == {"guarantee_wait_p99_minutes": 0.5}
    same = json.loads(json.dumps(CONFIG))
    same["teams"][0]["objectives"]["entitlement"] = {"g5.xlarge": 1}  # what it is guaranteed: nothing to say
    path, _ = files(same)
    assert main(["plan", path]) == 0
    assert "entitled" not in capsys.readouterr().out


def test_simulate_judges_the_promise_against_the_entitlement(files, capsys):
    path, trace = files(PROMISED)
    assert main(["simulate", "--config", path, "--trace", trace, "--mode", "share+reclaim", "--json"]) == 0
    a = json.loads(capsys.readouterr().out)["teams"]["team-a"]
    # Its job waited for team-b's jobs to end (10000 - 3570 s): the promise of 30 s is missed.
    assert a["reclaim_wait_p99_s"] == 6430
    assert a["objectives"]["guarantee_wait_p99_minutes"] == {"target": 0.5, "value": 6430 / 60, "met": False}
    assert main(["simulate", "--config", path, "--trace", trace, "--compare"]) == 0
    out = capsys.readouterr().out
    assert "team team-a: guarantee 0 GPUs, entitled to 1 GPU" in out and "team team-b: guarantee 1 GPU\n" in out
