"""The running jobs kept in victim order between plans (``State.running``, a ``RunningJobs``
index the simulator updates as jobs start and end) give the plan of the same jobs handed over
in ``jobs`` and sorted anew; and a replay that keeps them so gives every figure of one that
hands the planner a new tuple at every tick."""

from __future__ import annotations

import dataclasses
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.policy import reclaim
from cdk_gpu_share.core.simulate import planner_view
from tests.builders import examples, grouped, states
from tests.core.test_simulate_tree import ends_in_time
from tests.core.test_simulate_tree_shortcuts import HEADER, busy_trees, figures


def _indexed(parsed: reclaim.State, order: random.Random, churn: int) -> reclaim.State:
    """``parsed`` with its running jobs in a RunningJobs index, added in a shuffled order and
    ``churn`` times one of them removed and added again (as a job stopped and restarted)."""
    running = [j for j in parsed.jobs if j.state == "running" and not j.terminating]
    index = reclaim.RunningJobs(t.name for t in parsed.teams)
    for job in order.sample(running, len(running)):
        index.add(job)
    for _ in range(churn if running else 0):
        job = order.choice(running)
        index.remove(job)
        index.add(job)
    rest = tuple(j for j in parsed.jobs if j.state != "running" and not j.terminating)
    return dataclasses.replace(parsed, jobs=rest, running=index)


@settings(max_examples=examples(400), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(states(max_jobs=40, max_teams=5, contended=True), states(max_jobs=30, checkpoint=True)),
       st.integers(0, 2**32 - 1), st.integers(0, 6))
def test_the_running_index_gives_the_plan_of_the_jobs_sorted_anew(state, seed, churn):
    parsed = reclaim.parse_state(state)
    order = random.Random(seed)
    for shaped in (parsed, grouped(parsed)):
        # Terminating running jobs are not the index's: the plan leaves them out either way.
        plain = dataclasses.replace(shaped, jobs=tuple(j for j in shaped.jobs if not (j.state == "running" and j.terminating)))
        assert reclaim.plan_state(_indexed(plain, order, churn)) == reclaim.plan_state(plain)


def test_the_index_keeps_the_victim_order_through_ties_of_start_and_priority():
    jobs = [reclaim.JobSpec(id=f"j{i}", team="a" if i % 2 else "b", state="running", demand={"gpu": 1},
                            priority=i % 3, since=float(i % 4)) for i in range(24)]
    index = reclaim.RunningJobs(["a", "b"])
    for job in random.Random(7).sample(jobs, len(jobs)):
        index.add(job)
    for job in jobs[::5]:
        index.remove(job)
    kept = [j for j in jobs if j not in jobs[::5]]
    state = reclaim.State(now=10.0, capacity={"gpu": 24}, settings=reclaim.Settings(), teams=(), jobs=())
    reclaim.victim_sort(kept, state)
    assert [j.id for j in index.jobs] == [j.id for j in kept]
    assert index.team == [0 if j.team == "a" else 1 for j in kept]
    # What a plan reads of each job, kept beside it.
    assert (index.ids, index.demands, index.priorities) == ([j.id for j in kept], [j.demand for j in kept],
                                                            [j.priority for j in kept])
    # A copy is changed apart from the index it was taken from.
    other = index.copy()
    other.remove(kept[0])
    assert [j.id for j in index.jobs] == [j.id for j in kept] and len(other) == len(kept) - 1
    assert other.ids == index.ids[1:] and other.priorities == index.priorities[1:]


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_trees())
def test_a_replay_with_the_running_index_is_the_one_that_sorts_at_every_tick(case):
    raw, rows = case
    scenario = sim.parse_scenario(raw)
    try:
        jobs = sim.parse_jobs([HEADER, *rows], scenario)
        with ends_in_time(jobs):
            kept = sim.simulate(scenario, jobs, "share+reclaim")
            planner_view.KEEP_RUNNING_INDEX = False
            try:
                sorted_anew = sim.simulate(scenario, jobs, "share+reclaim")
            finally:
                planner_view.KEEP_RUNNING_INDEX = True
    except ConfigError:
        return  # a job that could never start: the input's problem
    assert figures(kept) == figures(sorted_anew)
