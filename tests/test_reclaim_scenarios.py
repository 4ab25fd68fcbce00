"""More plan scenarios of the reclaim planner (shared/contracts/reclaim-plan.md).

Table-driven, in the style of tests/test_reclaim_planner.py (Kueue's preemption tests):
each row is a state and the whole plan it must give, the preemptions as
(victim, team, reason, beneficiary). They pin behaviour that the random property tests
reach only rarely: the order in which jobs are considered across teams, candidates
remembered from one pending job to the next, ties at the tolerance.
"""

from __future__ import annotations

import pytest

from cdk_gpu_share.core.reclaim import plan
from tests.test_reclaim_planner import pend, run, state, team


def preemptions(out):
    return [(p["job"], p["team"], p["reason"], p.get("beneficiary")) for p in out["preemptions"]]


# (case, state, preemptions as (victim, team, reason, beneficiary), served, waiting)
SCENARIOS = [
    (
        # pa (team a) cannot fit even with a's own jobs stopped and waits; pb (team b)
        # then stops b's own job. Each team's candidates are its own, whatever was
        # looked up for the team before.
        "in-team candidates are the job's own team's",
        state(4, [team("a", 2, in_team_preemption=True), team("b", 2, in_team_preemption=True)], [
            run("a1", "a"), run("a2", "a"), run("b1", "b", 2),
            pend("pa", "a", 3, priority=10, since=0), pend("pb", "b", 2, priority=10, since=1),
        ]),
        [("b1", "b", "in_team", "pb")], ["pb"], ["pa"],
    ),
    (
        # Two jobs of the same team and priority each stop one of its own jobs: the
        # second sees the first one's victim as gone.
        "in-team candidates of a later job leave out earlier victims",
        state(2, [team("a", 2, in_team_preemption=True)], [
            run("a1", "a"), run("a2", "a"),
            pend("p1", "a", priority=10, since=1), pend("p2", "a", priority=10, since=2),
        ]),
        [("a2", "a", "in_team", "p1"), ("a1", "a", "in_team", "p2")], ["p1", "p2"], [],
    ),
]


@pytest.mark.parametrize(("case", "s", "pre", "served", "waiting"), SCENARIOS, ids=[c[0] for c in SCENARIOS])
def test_scenarios(case, s, pre, served, waiting):
    out = plan(s)
    assert preemptions(out) == pre
    assert out["served"] == served
    assert out["waiting"] == waiting
