"""Every replay of a tree ends, with every job it accepted completed: on random small trees of up
to three levels of groups, every sharing and every mode, a job is either refused as input (one
that could never start) or run to its end, and the planner never ticks for ever."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.policy import reclaim
from tests.builders import examples, group, team
from tests.core.test_simulate_tree import ends_in_time

GROUPS = ("g0", "g1", "g2")


@st.composite
def trees(draw):
    """A scenario with 1 to 3 groups (each a root or below an earlier one) and 2 to 4 teams."""
    n_groups = draw(st.integers(1, len(GROUPS)))
    groups = []
    for i in range(n_groups):
        parent = draw(st.sampled_from([None, *GROUPS[:i]]))
        pool = draw(st.sampled_from([None, 1, 1, 2]))
        limit = draw(st.sampled_from([None, 0, 1, 3]))
        groups.append(group(GROUPS[i], pool, parent=parent, limit=limit))
    teams = []
    for i in range(draw(st.integers(2, 4))):
        sharing = draw(st.sampled_from(["lend_and_borrow", "lend_and_borrow", "reserve", "lend"]))
        extra = {"sharing": sharing}
        home = draw(st.sampled_from([None, *GROUPS[:n_groups]]))
        if home is not None:
            extra["group"] = home
        teams.append(team(f"t{i}", draw(st.sampled_from([0, 0, 1, 2])), **extra))
    # Every group holds a team: the leftover ones go below the last group of each chain.
    used = {t.get("group") for t in teams}
    for g in groups:
        if g["name"] not in used and not any(o.get("parent") == g["name"] for o in groups):
            teams.append(team(f"x{g['name']}", 1, group=g["name"]))
    pools = sum(g.get("guarantee", {}).get("gpu", 0) for g in groups)
    capacity = sum(t["guarantee"]["gpu"] for t in teams) + pools + draw(st.sampled_from([0, 0, 1]))
    return {"capacity": {"gpu": max(capacity, 1)}, "groups": groups, "teams": teams}


@st.composite
def cases(draw):
    scenario = draw(trees())
    names = [t["name"] for t in scenario["teams"]]
    rows = []
    for i in range(draw(st.integers(1, 7))):
        rows.append(f"j{i},{draw(st.sampled_from(names))},{draw(st.integers(0, 300))},"
                    f"{draw(st.integers(1, 900))},{draw(st.integers(1, 2))},{draw(st.integers(0, 2))}")
    return scenario, rows


# Two replays that once never ended: a job stopped for one entitled at a deeper group took the
# room back at every tick; a job that fitted its group only with a reserve team's idle guarantee
# waited for ever.
TAKEN_BACK = ({"capacity": {"gpu": 1}, "groups": [group("g0"), group("g1", 1, parent="g0")],
               "teams": [team("t0", 0, group="g0"), team("t1", 0, group="g1")]},
              ["j0,t0,0,1000,1,0", "j1,t1,10,100,1,0"])
RESERVED = ({"capacity": {"gpu": 3}, "groups": [group("g0", limit=0)],
             "teams": [team("t0", 2, sharing="reserve", group="g0"), team("t1", 0, group="g0")]},
            ["j0,t1,0,10,1,0"])


@example(TAKEN_BACK, "share+reclaim")
@example(RESERVED, "share")
@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.sampled_from(sim.MODES))
def test_every_replay_of_a_tree_ends_with_every_job_completed(case, mode):
    raw, rows = case
    scenario = sim.parse_scenario(raw)
    while rows:
        try:
            jobs = sim.parse_jobs(["job_id,team,submit_time,duration_s,gpus,priority", *rows], scenario)
            with ends_in_time(jobs):
                out = sim.simulate(scenario, jobs, mode).to_dict()
        except ConfigError as exc:
            # A job refused as one that could never start: the others are replayed without it.
            problem = str(exc.problems[0])
            assert "could never start" in problem, problem
            refused = re.search(r"\(job '(j\d+)'\)", problem)
            assert refused is not None, problem
            rows = [row for row in rows if not row.startswith(refused.group(1) + ",")]
            continue
        assert out["completed"] == out["jobs"] == len(rows)
        return


# t1 borrows the second GPU until 1000; t0 asks for its own at 10. Its job has waited at 130, and
# with a protection of 300 s t1's job may be stopped from 300 on: ticks without a victim before
# then must not keep the planner away after.
LENT = ({"capacity": {"gpu": 2}, "groups": [group("g0")], "teams": [team("t0", 1, group="g0"), team("t1", 1)]},
        ["j0,t1,0,1000,2,0", "j1,t0,10,100,1,0"])


@example(LENT, 120, 0, "youngest")
@example(LENT, 0, 300, "youngest")
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.sampled_from([0, 120]), st.sampled_from([0, 300]), st.sampled_from(["youngest", "checkpoint"]))
def test_the_ticks_a_tree_replay_skips_change_nothing(case, reclaim_after, min_runtime, victim_order):
    # The planner is called only at a tick where it could choose a victim (a team or a group above
    # its bound, a job entitled at a node that has waited), and not again while nothing changed
    # since a tick that found none: every figure is the one of a replay that calls it at every tick.
    raw, rows = case
    settings = {"reclaim_after_seconds": reclaim_after, "min_runtime_seconds": min_runtime,
                "victim_order": victim_order}
    scenario = sim.parse_scenario({**raw, "settings": settings})
    try:
        jobs = sim.parse_jobs(["job_id,team,submit_time,duration_s,gpus,priority", *rows], scenario)
        with ends_in_time(jobs):
            skipped = sim.simulate(scenario, jobs, "share+reclaim")
            every = sim.simulate(scenario, jobs, "share+reclaim", skip_idle_ticks=False)
    except ConfigError:
        return  # a job that could never start: the first test's part
    assert skipped.planner_calls <= every.planner_calls
    figures = [{k: v for k, v in r.to_dict().items() if k != "sim_seconds"} for r in (skipped, every)]
    assert figures[0] == figures[1]


@st.composite
def crowds(draw):
    """A tree and up to 12 jobs arriving close together: many jobs of one team and size wait in
    one plan, some of them entitled while others borrow."""
    scenario = draw(trees())
    names = [t["name"] for t in scenario["teams"] if t["guarantee"]["gpu"] or t.get("sharing") != "lend"] or ["x"]
    rows = []
    for i in range(draw(st.integers(3, 12))):
        rows.append(f"j{i},{draw(st.sampled_from(names))},{draw(st.integers(0, 200))},"
                    f"{draw(st.integers(60, 900))},{draw(st.sampled_from([1, 1, 2]))},{draw(st.integers(0, 1))}")
    return scenario, rows


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crowds(), st.sampled_from([0, 120]), st.sampled_from(["youngest", "checkpoint"]))
def test_remembering_where_reclaim_found_no_victim_changes_no_figure(case, reclaim_after, victim_order):
    # Within one plan, a (team, demand) whose reclaim found no victim is not searched again until
    # usage changes: every figure is the one of a replay whose planner searches for every job.
    raw, rows = case
    scenario = sim.parse_scenario({**raw, "settings": {"reclaim_after_seconds": reclaim_after,
                                                       "victim_order": victim_order}})
    try:
        jobs = sim.parse_jobs(["job_id,team,submit_time,duration_s,gpus,priority", *rows], scenario)
        with ends_in_time(jobs):
            remembered = sim.simulate(scenario, jobs, "share+reclaim", skip_idle_ticks=False)
            reclaim.REMEMBER_NO_RECLAIM = False
            try:
                searched = sim.simulate(scenario, jobs, "share+reclaim", skip_idle_ticks=False)
            finally:
                reclaim.REMEMBER_NO_RECLAIM = True
    except ConfigError:
        return
    figures = [{k: v for k, v in r.to_dict().items() if k != "sim_seconds"} for r in (remembered, searched)]
    assert figures[0] == figures[1]

