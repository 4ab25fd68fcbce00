"""The simulator replays the tree's rules (the reclaim planner's, one definition): admission at a
group, reclaim from outside the division before a sibling, jobs that can never start refused."""

from __future__ import annotations

import contextlib
from unittest import mock

import pytest

from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.simulate.engine import _Sim
from tests.builders import group, team


def scenario(research: dict, *, flat: bool = False):
    """8 GPUs; a and b (2 each) in research, c (2) at the root."""
    teams = [team("a", 2, group="research"), team("b", 2, group="research"), team("c", 2)]
    groups = [group("research", **research)]
    if flat:
        teams = [{k: v for k, v in t.items() if k != "group"} for t in teams]
        groups = []
    return sim.parse_scenario({"capacity": {"gpu": 8}, "teams": teams, "groups": groups})


def run(sc, rows, mode):
    jobs = sim.parse_jobs(["job_id,team,submit_time,duration_s,gpus", *rows], sc)
    with ends_in_time(jobs):
        return sim.simulate(sc, jobs, mode).to_dict()


@contextlib.contextmanager
def ends_in_time(jobs):
    """Fail a replay whose planner still ticks long after any end these jobs allow (the last
    arrival plus a hundred times their whole work), rather than let it run forever."""
    horizon = max(j.submit_time for j in jobs) + 100 * sum(j.duration_s for j in jobs) + 3600
    tick = _Sim._tick

    def bounded(self, t):
        if t > horizon:
            raise AssertionError(f"the replay still ticks at {t} s, past {horizon} s: it would never end")
        tick(self, t)

    with mock.patch.object(_Sim, "_tick", bounded):
        yield


def test_a_group_bound_holds_a_job_the_pool_has_room_for():
    rows = ["a1,a,0,1000,4", "a2,a,1,100,3"]
    tree = run(scenario({"limit": 0}), rows, "share")  # research may hold Q 4 + B 0
    flat = run(scenario({}, flat=True), rows, "share")
    assert tree["teams"]["a"]["wait_p99_s"] == 999 and flat["teams"]["a"]["wait_p99_s"] == 0


def test_reclaim_stops_outside_the_division_before_a_sibling():
    # b's job is within b's guarantee; a (a sibling) and c (outside research) both borrow 2.
    rows = ["c1,c,0,1000,4", "a1,a,1,1000,4", "b1,b,10,300,2"]
    tree = run(scenario({"gpu": 2, "limit": 1}), rows, "share+reclaim")
    assert tree["preemptions"] == 1 and tree["teams"]["c"]["preempted"] == 1 and tree["teams"]["a"]["preempted"] == 0
    # Flat, youngest first: a1, started later, is the one stopped.
    flat = run(scenario({}, flat=True), rows, "share+reclaim")
    assert flat["teams"]["a"]["preempted"] == 1 and flat["teams"]["c"]["preempted"] == 0


def test_a_job_no_group_could_hold_is_refused_naming_its_row():
    sc = scenario({"limit": 1})  # research: Q 4 + B 1
    with pytest.raises(ConfigError) as info:
        run(sc, ["j1,a,0,10,2", "j2,b,0,10,6"], "share")
    assert str(info.value.problems[0]) == (
        "line 3 (job 'j2'), gpus: could never start: group 'research' above team 'b' may hold at most 5 GPUs (its"
        " quota plus its borrow limit) (got 6); split the job, or raise group 'research''s borrow limit or its teams'"
        " quotas")


def test_without_groups_the_flat_index_dispatches():
    sc = scenario({}, flat=True)
    jobs = sim.parse_jobs(["job_id,team,submit_time,duration_s,gpus", "j,a,0,1,1"], sc)
    assert _Sim(sc, jobs, "share", 60.0, None, None).tree is None


def test_the_json_has_each_groups_figures_over_its_teams():
    rows = ["c1,c,0,1000,4", "a1,a,1,1000,4", "b1,b,10,300,2"]
    out = run(scenario({"gpu": 2, "limit": 1}), rows, "share+reclaim")
    research, a, b = out["groups"]["research"], out["teams"]["a"], out["teams"]["b"]
    assert research["jobs"] == a["jobs"] + b["jobs"] == 2
    assert research["gpu_seconds"] == a["gpu_seconds"] + b["gpu_seconds"]
    assert research["borrowed_gpu_seconds"] == a["borrowed_gpu_seconds"] + b["borrowed_gpu_seconds"]
    assert research["wait_p99_s"] == max(a["wait_p99_s"], b["wait_p99_s"])
    assert "groups" not in run(scenario({}, flat=True), rows, "share+reclaim")


def test_entitlement_ranks_by_the_nodes_height_so_a_reclaim_is_not_taken_back():
    # One GPU. Group top (no pool) holds team v and group sub; sub (pool 1) holds team b. v1 runs
    # entitled at top (height 2: one above sub); b1 is entitled at sub (height 1) and reclaims v1 at
    # the first tick. Counted in steps up each job's own path both would be 1, v1 (older) would
    # take the freed GPU back at every tick and the replay would never end.
    sc = sim.parse_scenario({"capacity": {"gpu": 1},
                             "groups": [group("top"), group("sub", 1, parent="top")],
                             "teams": [team("v", 0, group="top"), team("b", 0, group="sub")]})
    out = run(sc, ["v1,v,0,1000,1", "b1,b,10,100,1"], "share+reclaim")
    assert out["completed"] == 2 and out["preemptions"] == 1
    assert out["teams"]["b"]["wait_p99_s"] == 50  # starts at the tick at 60
    assert out["teams"]["v"]["wait_p99_s"] == 160  # back once b1 ends at 160


@pytest.mark.parametrize("mode", sim.MODES)
def test_a_group_limit_never_keeps_a_reserve_team_off_its_own_guarantee(mode):
    # Group d (no pool, borrow limit 0) holds only r, which reserves 4 GPUs. r's idle guarantee is
    # no one's quota, but r's own job counts in d's quota as it will use: it starts at once.
    sc = sim.parse_scenario({"capacity": {"gpu": 4}, "groups": [group("d", limit=0)],
                             "teams": [team("r", 4, sharing="reserve", group="d")]})
    out = run(sc, ["r1,r,0,10,4"], mode)
    assert out["completed"] == 1 and out["teams"]["r"]["wait_p99_s"] == 0
    assert out["teams"]["r"]["gpu_seconds"] == 40


RESERVE_BESIDE = {"capacity": {"gpu": 8}, "groups": [group("d", limit=0)],
                  "teams": [team("r", 4, sharing="reserve", group="d"), team("y", 0, group="d"), team("o", 0)]}


@pytest.mark.parametrize("mode", ["share", "share+reclaim"])
def test_a_job_that_fits_its_group_only_with_a_reserves_idle_guarantee_is_refused(mode):
    # d's quota counts r's 4 reserved GPUs only while r uses them: y can never hold more than
    # Q(d) + B(d) = 0 while r is idle, so y1 could never start.
    with pytest.raises(ConfigError) as info:
        run(sim.parse_scenario(RESERVE_BESIDE), ["y1,y,0,100,4", "o1,o,0,100,4"], mode)
    assert str(info.value.problems[0]) == (
        "line 2 (job 'y1'), gpus: could never start: group 'd' above team 'y' may hold at most 0 GPUs (its"
        " quota plus its borrow limit, less 4 GPUs that reserve teams below it keep idle) (got 4); split the"
        " job, or raise group 'd''s borrow limit or its teams' quotas, or let its reserve teams lend")


def test_the_cli_refuses_a_job_that_could_never_start_with_exit_2(tmp_path, capsys):
    import json

    from cdk_gpu_share.cli import main

    (tmp_path / "s.json").write_text(json.dumps(RESERVE_BESIDE))
    (tmp_path / "t.csv").write_text("job_id,team,submit_time,duration_s,gpus\ny1,y,0,100,4\no1,o,0,100,4\n")
    assert main(["simulate", "--scenario", str(tmp_path / "s.json"), "--trace", str(tmp_path / "t.csv"),
                 "--mode", "share", "--hierarchy", "tree", "--json"]) == 2
    err = capsys.readouterr().err
    assert "line 2 (job 'y1'), gpus: could never start" in err and "Traceback" not in err


def test_a_replay_never_ends_quietly_with_a_job_left_waiting():
    # Were a job that can never start let through, the replay would end with it waiting: the run
    # names it rather than report figures without it.
    sc = sim.parse_scenario(RESERVE_BESIDE)
    with mock.patch("cdk_gpu_share.core.simulate.engine.check_jobs"), pytest.raises(ConfigError) as info:
        run(sc, ["o1,o,0,100,4", "y1,y,0,100,4"], "share")
    assert str(info.value.problems[0]).startswith(
        "line 3 (job 'y1'), gpus: could never start: the replay ended with the job still waiting")


def test_a_replay_calls_the_planner_again_only_once_something_changed():
    # o borrows the second GPU for ten hours under a protection of ten hours; t0's job is entitled
    # at g (g's quota holds it) and waits for it. The planner finds no victim at the first tick,
    # and then nothing changes until the protection ends: one call then, not one a minute.
    sc = sim.parse_scenario({"capacity": {"gpu": 2}, "groups": [group("g")],
                             "teams": [team("t0", 0, group="g"), team("t1", 1, group="g"), team("o", 1)],
                             "settings": {"min_runtime_seconds": 36_000}})
    jobs = sim.parse_jobs(["job_id,team,submit_time,duration_s,gpus", "o1,o,0,40000,2", "a1,t0,10,100,1"], sc)
    skipped = sim.simulate(sc, jobs, "share+reclaim")
    every = sim.simulate(sc, jobs, "share+reclaim", skip_idle_ticks=False)
    assert skipped.planner_calls <= 3 < 500 < every.planner_calls
    assert skipped.to_dict()["teams"] == every.to_dict()["teams"]
    assert skipped.to_dict()["teams"]["t0"]["wait_p99_s"] == 36_000 - 10  # stopped o1 at 36,000
