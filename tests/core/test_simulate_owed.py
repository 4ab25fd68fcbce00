"""The owed wait (``reclaim_wait_p99_s``, "wait for own guarantee"): the time a job is pending
while it fits in its team's unused entitlement, U(T) + gpus <= E(T), judged once the events of
an instant are dispatched; per team the p99 of the positive ones. Hand-worked traces."""

from __future__ import annotations

import bisect

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.simulate.accounting import nearest_rank

TEAMS = [{"name": "a", "guarantee": {"gpu": 2}}, {"name": "b", "guarantee": {"gpu": 2}},
         {"name": "c", "guarantee": {"gpu": 0}}]


def run(rows, mode, teams=TEAMS, groups=None, capacity=4, **kw):
    scenario = sim.parse_scenario({
        "capacity": {"gpu": capacity},
        "settings": {"reclaim_after_seconds": 0, "min_runtime_seconds": 0},
        "teams": teams, **({"groups": groups} if groups else {})})
    result = sim.simulate(scenario, sim.trace_from_rows(rows, scenario), mode, poll_seconds=60, **kw)
    return result, {o.id: o for o in result.outcomes}, result.to_dict()["teams"]


# L (b, 1 GPU) waits 25 s for c's job to end, within b's guarantee. Then b starts H, 2 GPUs at
# priority 5, beyond its guarantee on a's idle GPUs. At 50 a wants its 2 GPUs back: the tick at
# 60 stops b's lowest-priority job, L, and A1 starts (owed 10 s). L then waits until H ends at
# 540 while b holds its whole guarantee with H: nothing is owed to it then.
STOPPED_OVER_GUARANTEE = [
    ("C1", "c", 0, 30, 4, 0),
    ("L", "b", 5, 1000, 1, 0),
    ("H", "b", 40, 500, 2, 5),
    ("A1", "a", 50, 1000, 2, 0),
]


def test_a_job_stopped_while_its_team_uses_its_guarantee_is_owed_nothing_then():
    result, job, teams = run(STOPPED_OVER_GUARANTEE, "share+reclaim")
    assert (job["L"].stops, job["L"].final_start) == (1, 540)  # stopped at 60 for A1
    assert job["A1"].final_start == 60
    assert job["L"].owed_s == 25  # 5..30; not 60..540, when b used its guarantee with H
    assert job["A1"].owed_s == 10  # 50..60
    assert job["H"].owed_s == job["C1"].owed_s == 0
    assert teams["b"]["reclaim_wait_p99_s"] == 25
    assert teams["b"]["wait_p99_s"] == 535  # the wait itself still counts all of it
    assert teams["a"]["reclaim_wait_p99_s"] == 10
    assert teams["c"]["reclaim_wait_p99_s"] == 0  # no job owed: 0


# A1 (a, 1 GPU) runs while c borrows the other 3 GPUs. A2 (a, 2 GPUs) arrives at 10: with A1
# running it does not fit a's guarantee of 2. From 200, A1 done, it does, but c holds the room.
OWED_AFTER_ITS_OWN_JOB_ENDS = [
    ("A1", "a", 0, 200, 1, 5),
    ("C1", "c", 0, 1000, 3, 0),
    ("A2", "a", 10, 100, 2, 0),
]


@pytest.mark.parametrize("mode, start, owed", [
    ("share", 1000, 800),  # until c's job ends
    ("share+reclaim", 240, 40),  # until the first tick after 200 stops c's job
])
def test_a_job_is_owed_exactly_while_its_teams_unused_guarantee_fits_it(mode, start, owed):
    result, job, teams = run(OWED_AFTER_ITS_OWN_JOB_ENDS, mode)
    assert job["A2"].final_start == start
    assert job["A2"].owed_s == owed
    assert teams["a"]["reclaim_wait_p99_s"] == owed
    assert teams["a"]["wait_p99_s"] == start - 10


def test_the_entitlement_counts_in_place_of_the_guarantee():
    # a was promised 3 GPUs, deployed with 2: A2 fits 1 + 2 <= 3 from its arrival.
    promised = [{**TEAMS[0], "objectives": {"entitlement": {"gpu": 3}, "wait_p99_minutes": 600}}, *TEAMS[1:]]
    _, job, teams = run(OWED_AFTER_ITS_OWN_JOB_ENDS, "share", teams=promised)
    assert job["A2"].owed_s == 990
    assert teams["a"]["reclaim_wait_p99_s"] == 990


# With a tree: a (guarantee 1) sits in group g, whose own pool is 1, so Q(g) = 2. A2 is beyond a's
# own guarantee, but once A1 is done it fits g's quota: entitled at g, so owed.
TREE_TEAMS = [{"name": "a", "guarantee": {"gpu": 1}, "group": "g"}, {"name": "c", "guarantee": {"gpu": 0}}]
GROUPS = [{"name": "g", "guarantee": {"gpu": 1}}]


def test_with_a_tree_a_job_entitled_at_its_group_is_owed():
    result, job, teams = run(OWED_AFTER_ITS_OWN_JOB_ENDS, "share", teams=TREE_TEAMS, groups=GROUPS)
    assert job["A2"].final_start == 1000
    assert job["A2"].owed_s == 800
    assert teams["a"]["reclaim_wait_p99_s"] == 800
    assert result.to_dict()["groups"]["g"]["reclaim_wait_p99_s"] == 800


def test_with_a_tree_the_entitlement_counts_in_the_groups_quota_too():
    # a promised 2: Q(g) counts 1 + 2 = 3, and A2 fits 1 + 2 <= 3 from its arrival.
    promised = [{**TREE_TEAMS[0], "objectives": {"entitlement": {"gpu": 2}, "wait_p99_minutes": 600}},
                TREE_TEAMS[1]]
    _, job, teams = run(OWED_AFTER_ITS_OWN_JOB_ENDS, "share", teams=promised, groups=GROUPS)
    assert job["A2"].owed_s == 990


def test_a_job_that_starts_at_its_arrival_instant_is_owed_nothing():
    # B1 ends at 100 and B2 arrives then: the instant is judged once dispatched, B2 running.
    _, job, teams = run([("B1", "b", 0, 100, 2, 0), ("B2", "b", 100, 10, 2, 0)], "share")
    assert job["B2"].final_start == 100 and job["B2"].owed_s == 0
    assert teams["b"]["reclaim_wait_p99_s"] == 0


# ---------------------------------------------------------------------------
# Against a direct reading of the definition, on random traces without stops (share)


def owed_by_definition(result, jobs):
    """Each job's owed wait from the usage series: the team's usage after each instant, over the
    job's wait [submit, final start), summed where U + gpus <= G."""
    times, usage = result.series_t, result.series_usage
    names = list(result.team_names)
    size = {j.id: j.gpus for j in jobs}
    out = {}
    for o in result.outcomes:
        k, g = names.index(o.team), size[o.id]
        guarantee = result.guarantees[k]
        cuts = [o.submit_time, *(t for t in times if o.submit_time < t < o.final_start), o.final_start]
        owed = 0.0
        for a, b in zip(cuts, cuts[1:]):
            i = bisect.bisect_right(times, a) - 1
            if (usage[i][k] if i >= 0 else 0.0) + g <= guarantee + 1e-9:
                owed += b - a
        out[o.id] = owed
    return out


@st.composite
def traces(draw):
    n = draw(st.integers(1, 25))
    rows, t = [], 0
    for i in range(n):
        t += draw(st.sampled_from((0, 0, 5, 30, 90)))
        rows.append((f"j{i}", draw(st.sampled_from("abc")), t, draw(st.sampled_from((10, 60, 300))),
                     draw(st.sampled_from((0.5, 1, 2))), draw(st.integers(0, 2))))
    return rows


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_the_owed_wait_is_the_time_the_definition_counts(rows):
    result, job, teams = run(rows, "share")
    scenario = sim.parse_scenario({"capacity": {"gpu": 4}, "teams": TEAMS})
    want = owed_by_definition(result, sim.trace_from_rows(rows, scenario))
    assert {i: o.owed_s for i, o in job.items()} == pytest.approx(want, abs=1e-6)
    for name in ("a", "b", "c"):
        positive = [w for i, w in want.items() if job[i].team == name and w > 0]
        assert teams[name]["reclaim_wait_p99_s"] == pytest.approx(nearest_rank(positive, 99))
