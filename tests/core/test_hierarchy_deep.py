"""Deep and wide trees: at most 16 levels of groups, refused beyond in one line by every reader
(config, scenario, the reclaim planner's state, so the fair-share Lambda); within the limit,
and with ten thousand groups, every command walks the tree in loops, never a recursion."""

from __future__ import annotations

import pytest

from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.configuration.parse import parse_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.plan import fleet_plan, format_plan
from cdk_gpu_share.core.policy import reclaim
from cdk_gpu_share.core.scenario import scenario_from_config
from tests.builders import group, organisation, pend, run, state, team

TOO_DEEP = ("groups[16].parent: puts group 'g16' at level 17 of groups; a tree holds at most 16 levels of"
            " groups (teams not counted) (got 'g15'); give 'g16' a parent higher up, or merge levels: no team"
            " may have more than 16 groups above it")


def chain(levels: int) -> list[dict]:
    """Groups g0 (a root) to g{levels-1}, each below the one before."""
    return [group(f"g{i}", parent=f"g{i - 1}" if i else None) for i in range(levels)]


def chain_teams(levels: int) -> list[dict]:
    """One team of one GPU in every group of :func:`chain` (t0 in g0 ... the deepest last)."""
    return [team(f"t{i}", 1, group=f"g{i}") for i in range(levels)]


def one_problem(info: pytest.ExceptionInfo) -> str:
    problems = info.value.problems
    assert len(problems) == 1, problems
    return str(problems[0])


def test_seventeen_levels_are_refused_in_one_line_by_the_config():
    groups = [{"name": g["name"], **({"parent": g["parent"]} if "parent" in g else {})} for g in chain(17)]
    with pytest.raises(ConfigError) as info:
        parse_config(organisation(groups, [("t", 1, "g16")], capacity=8))
    assert one_problem(info).replace("groups[16] (g16)", "groups[16]") == TOO_DEEP
    # Sixteen are a tree like any other.
    parse_config(organisation(groups[:16], [("t", 1, "g15")], capacity=8))


def test_seventeen_levels_are_refused_in_one_line_by_a_scenario_and_the_planners_state():
    with pytest.raises(ConfigError) as info:
        sim.parse_scenario({"capacity": {"gpu": 17}, "groups": chain(17), "teams": chain_teams(17)})
    assert one_problem(info) == TOO_DEEP
    with pytest.raises(ConfigError) as info:
        reclaim.plan({**state(17, chain_teams(17), []), "groups": chain(17)})
    assert one_problem(info) == TOO_DEEP


def test_a_chain_of_thousands_of_groups_is_refused_in_one_line():
    # Listed deepest first, the worst order for a walk up each group's parents.
    groups = chain(5000)[::-1]
    with pytest.raises(ConfigError) as info:
        sim.parse_scenario({"capacity": {"gpu": 1}, "groups": groups, "teams": [team("t", 1, group="g4999")]})
    assert one_problem(info).startswith("groups[0].parent: puts group 'g4999' at level 5000 of groups; a tree"
                                        " holds at most 16 levels")


def test_sixteen_levels_plan_simulate_and_reclaim():
    levels = 16
    # The config: a team in every group of the chain, each the only team of its level.
    config = parse_config(organisation([{"name": g["name"], **({"parent": g["parent"]} if "parent" in g else {})}
                                        for g in chain(levels)], [(f"t{i}", 1, f"g{i}") for i in range(levels)],
                                       capacity=levels))
    text = format_plan(fleet_plan(config))
    assert "g15" in text and "t15" in text
    # The replay: the deepest team borrows the whole pool, then every other team asks for its own.
    scenario = sim.parse_scenario(scenario_from_config(config))
    rows = ["job_id,team,submit_time,duration_s,gpus", f"big,t{levels - 1},0,3600,{levels}"]
    rows += [f"own{i},t{i},60,600,1" for i in range(levels - 1)]
    out = sim.simulate(scenario, sim.parse_jobs(rows, scenario), "share+reclaim").to_dict()
    assert out["completed"] == levels and out["preemptions"] >= 1
    # The planner: the deepest team's borrowed job is stopped for the root team's own.
    s = state(levels, chain_teams(levels), [run("big", f"t{levels - 1}", levels), pend("own", "t0", 1)])
    s["groups"] = chain(levels)
    assert [p["job"] for p in reclaim.plan(s)["preemptions"]] == ["big"]


def wide(n_groups: int, fanout: int = 10) -> tuple[list[dict], list[dict]]:
    """``n_groups`` groups, each with ``fanout`` children (four levels for 10,000), and one team of
    one GPU in every group without child groups."""
    groups = [group(f"g{i}", parent=f"g{(i - 1) // fanout}" if i else None) for i in range(n_groups)]
    parents = {(i - 1) // fanout for i in range(1, n_groups)}
    teams = [team(f"t{i}", 1, group=f"g{i}") for i in range(n_groups) if i not in parents]
    return groups, teams


def test_ten_thousand_groups_are_planned_in_a_loop():
    groups, teams = wide(10_000)
    # Every other team borrows one GPU beyond its guarantee; ten of the others want their own back.
    jobs = []
    for i, t in enumerate(teams):
        if i % 2 == 0:
            jobs += [run(f"{t['name']}-a", t["name"], 1), run(f"{t['name']}-b", t["name"], 1, since=5)]
        elif i < 20:
            jobs.append(pend(f"{t['name']}-own", t["name"], 1))
    s = state(len(teams), teams, jobs)
    s["groups"] = groups
    out = reclaim.plan(s)
    assert len(out["preemptions"]) == 10 and all(p["job"].endswith("-b") for p in out["preemptions"])


def test_ten_thousand_groups_are_replayed_in_a_loop():
    groups, teams = wide(10_000)
    scenario = sim.parse_scenario({"capacity": {"gpu": len(teams)}, "groups": groups, "teams": teams})
    rows = ["job_id,team,submit_time,duration_s,gpus", "big,t9999,0,600,8"]
    rows += [f"j{i},{teams[i]['name']},{i},100,1" for i in range(0, 200, 7)]
    out = sim.simulate(scenario, sim.parse_jobs(rows, scenario), "share+reclaim").to_dict()
    assert out["completed"] == len(rows) - 1
