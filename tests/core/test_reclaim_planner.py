"""Hand-written scenarios of the reclaim planner, one behaviour per test.

Each test names the rule of the planner (docs/reclaim-planner.md) it pins down.
"""

from __future__ import annotations

import json

import pytest

from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.policy import reclaim
from cdk_gpu_share.core.policy.reclaim import (
    JobSpec,
    Settings,
    State,
    TeamSpec,
    borrow_cap,
    fits,
    plan,
)
from tests.builders import DELETE, NOW, pend, run, set_path, state, team, valid_state, victims

# ---------------------------------------------------------------------------
# The AWS example


def test_aws_example_three_teams_one_gpu_each_exactly_one_reclaim():
    # Three teams each guaranteed 1 GPU of a 3-GPU pool; alpha borrows the other two,
    # then beta needs its GPU back: exactly one of alpha's jobs is stopped.
    s = state(3, [team("alpha", 1), team("beta", 1), team("gamma", 1)], [
        run("a1", "alpha", since=10), run("a2", "alpha", since=20), run("a3", "alpha", since=30),
        pend("b1", "beta", since=900),
    ])
    out = plan(s)
    assert out["preemptions"] == [{"job": "a3", "team": "alpha", "reason": "reclaim", "beneficiary": "b1"}]
    assert out["served"] == ["b1"]
    assert out["waiting"] == []
    assert out["teams"]["alpha"]["usage"] == {"gpu": 2}
    assert out["teams"]["alpha"]["borrowed"] == {"gpu": 1}
    assert out["teams"]["beta"]["usage"] == {"gpu": 1}


# ---------------------------------------------------------------------------
# 2a: fits, served without preemption


def test_pending_job_that_fits_in_idle_capacity_is_served_without_preemption():
    s = state(4, [team("a", 2), team("b", 2)], [run("a1", "a", 2), pend("a2", "a", 2)])
    out = plan(s)
    assert out["served"] == ["a2"] and out["preemptions"] == []
    assert out["teams"]["a"]["borrowed"] == {"gpu": 2}


def test_served_pending_job_counts_in_usage_for_the_next_one():
    # Cap 1 GPU of borrowing: the first job borrows it, the second must wait.
    s = state(4, [team("a", 1, borrow_limit={"gpu": 1}), team("b", 3)], [
        pend("a1", "a", 1, since=1), pend("a2", "a", 1, since=2), pend("a3", "a", 1, since=3),
    ])
    out = plan(s)
    assert out["served"] == ["a1", "a2"]
    assert out["waiting"] == ["a3"]


def test_pending_job_with_no_demand_is_always_served():
    s = state(1, [team("a", 0, sharing="reserve")], [pend("z", "a", demand={"gpu": 0})])
    assert plan(s)["served"] == ["z"]


def test_pending_job_larger_than_the_pool_waits_without_preemption():
    s = state(2, [team("a", 1), team("b", 1)], [run("b1", "b", 1), run("b2", "b", 1), pend("a1", "a", 3)])
    out = plan(s)
    assert out["waiting"] == ["a1"] and out["preemptions"] == []


# ---------------------------------------------------------------------------
# Rule 1: borrow caps, and protected jobs (rows: name, state, the expected plan; see plan_outcome)


def test_team_over_its_percent_cap_loses_lowest_priority_jobs():
    # G=2, 50% => C=1; usage 4 => B=2: one 1-GPU job must go, the lowest priority one.
    s = state(8, [team("a", 2, borrow_limit_percent=50), team("b", 6)], [
        run("hi", "a", 1, priority=5), run("lo", "a", 1, priority=-1),
        run("mid1", "a", 1, priority=1), run("mid2", "a", 1, priority=1),
    ])
    out = plan(s)
    assert out["preemptions"] == [{"job": "lo", "team": "a", "reason": "borrow_limit"}]
    assert out["teams"]["a"]["borrowed"] == {"gpu": 1}


def test_borrow_limit_victims_have_no_beneficiary_key():
    s = state(4, [team("a", 1, borrow_limit={"gpu": 0}), team("b", 3)], [run("a1", "a"), run("a2", "a", since=5)])
    (pre,) = plan(s)["preemptions"]
    assert "beneficiary" not in pre and pre["reason"] == "borrow_limit"


def borrow_limit(*jobs, team="a"):
    """The preemptions of ``jobs`` of ``team`` for its borrow cap (rule 1), in that order."""
    return [{"job": j, "team": team, "reason": "borrow_limit"} for j in jobs]


BORROW_CAP_CASES = [
    (
        # B=3, C=1. Victim order x1 (1 GPU), then x2 (3 GPUs): after x2 the cap holds;
        # walking back, x2 is still needed but x1 is put back.
        "the borrow cap's put-back returns jobs not needed after a bigger one",
        state(6, [team("a", 2, borrow_limit={"gpu": 1}), team("b", 4)], [
            run("x1", "a", 1, priority=0), run("x2", "a", 3, priority=1), run("x3", "a", 1, priority=2)]),
        {"victims": ["x2"]},
    ),
    (
        # B=3, C=0; the 3-GPU job is protected, so the cap cannot be reached: the
        # unprotected jobs are all chosen, in victim order, and none is put back.
        "a borrow cap out of reach because of protected jobs keeps every chosen job",
        state(8, [team("a", 1, sharing="lend"), team("b", 7)], [
            run("big", "a", 3, since=NOW - 5), run("s1", "a", 1, since=0), run("s2", "a", 1, since=1),
            run("g", "a", 0.5, since=2, priority=9)], min_runtime_seconds=60),
        {"preemptions": borrow_limit("s2", "s1", "g")},
    ),
    (
        # a may not borrow gpu; a protected 2-GPU job keeps it over the cap, so every
        # chosen job stays chosen -- but the cpu-only job is never chosen.
        "the borrow cap skips jobs without demand in the exceeding resource",
        state({"gpu": 4, "cpu": 8}, [
            team("a", guarantee={"gpu": 1, "cpu": 4}, borrow_limit={"gpu": 0}),
            team("b", guarantee={"gpu": 3, "cpu": 4}),
        ], [
            run("cpu_only", "a", demand={"cpu": 2}, priority=-5),
            run("g1", "a", demand={"gpu": 1, "cpu": 1}, priority=0, since=1),
            run("g2", "a", demand={"gpu": 1}, priority=0, since=2),
            run("big", "a", demand={"gpu": 2}, since=NOW - 1),
        ], min_runtime_seconds=60),
        {"victims": ["g2", "g1"]},
    ),
    (
        "borrow caps are applied to the teams in name order",
        state(8, [team("b", 1, sharing="reserve"), team("a", 1, sharing="lend"), team("c", 6)], [
            run("b1", "b"), run("b2", "b", since=1), run("a1", "a"), run("a2", "a", since=1)]),
        {"victims": ["a2", "b2"]},
    ),
    (
        "reserve and lend teams may not borrow at all",
        state(8, [team("r", 1, sharing="reserve"), team("l", 1, sharing="lend"), team("o", 6)], [
            pend("r1", "r", 2), pend("l1", "l", 2), pend("o1", "o", 0.5)]),
        {"waiting": ["l1", "r1"], "served": ["o1"]},
    ),
]

PROTECTED_CASES = [
    (
        # b's most recent job would be the victim, but it started 10 s ago (< 60 s).
        "a protected running job is never chosen for reclaim",
        state(2, [team("a", 1), team("b", 1)], [
            run("old", "b", since=0), run("new", "b", since=NOW - 10), pend("a1", "a", since=0)], min_runtime_seconds=60),
        {"victims": ["old"]},
    ),
    (
        "a job exactly min_runtime_seconds old is no longer protected",
        state(2, [team("a", 1), team("b", 1)], [
            run("old", "b", since=0), run("new", "b", since=NOW - 60), pend("a1", "a")], min_runtime_seconds=60),
        {"victims": ["new"]},
    ),
    (
        "a pending job waits when every candidate is protected",
        state(2, [team("a", 1), team("b", 1)], [
            run("b1", "b", since=NOW - 1), run("b2", "b", since=NOW - 2), pend("a1", "a")], min_runtime_seconds=60),
        {"preemptions": [], "waiting": ["a1"]},
    ),
    (
        # a's two pending jobs are both within its guarantee when rule 2 starts and come
        # first by priority; the second borrows b's GPU. b's job then finds no victim: the
        # served job is not a running job and is protected.
        "a job served earlier in the plan is not a victim later",
        state(2, [team("a", 1), team("b", 1)], [
            pend("a1", "a", priority=5, since=1), pend("a2", "a", priority=5, since=2), pend("b1", "b", priority=0)]),
        {"served": ["a1", "a2"], "waiting": ["b1"], "preemptions": []},
    ),
]


@pytest.mark.parametrize("name,s,expected", BORROW_CAP_CASES + PROTECTED_CASES,
                         ids=[c[0] for c in BORROW_CAP_CASES + PROTECTED_CASES])
def test_borrow_cap_and_protected_job_cases(name, s, expected):
    assert plan_outcome(plan(s), expected) == expected


# ---------------------------------------------------------------------------
# Rule 2: the order of the pending jobs, and rule 2b: when a pending job reclaims
# (rows: name, state, the expected plan by the keys it checks; see plan_outcome)

ORDER_CASES = [
    (
        "jobs within their guarantee come before higher-priority jobs beyond it",
        state(2, [team("a", 1), team("b", 0)], [pend("b1", "b", 2, priority=10), pend("a1", "a", 1)]),
        {"served": ["a1"], "waiting": ["b1"]},
    ),
    (
        "within each group: priority, then since, then id",
        state(10, [team("a", 10)], [
            pend("z", "a", 1, priority=0, since=5), pend("y", "a", 1, priority=0, since=5),
            pend("x", "a", 1, priority=0, since=9), pend("w", "a", 1, priority=3, since=50)]),
        {"served": ["w", "y", "z", "x"]},
    ),
    (
        # a2 is within a's guarantee at the start; once a1 is served it no longer is, but
        # it stays in the first group, ahead of the higher-priority c1.
        "groups are decided once, when rule 2 starts",
        state(4, [team("a", 2), team("c", 0), team("d", 2)], [
            pend("a1", "a", 1, since=1), pend("a2", "a", 1, since=2), pend("c1", "c", 1, priority=9)]),
        {"served": ["a1", "a2", "c1"]},
    ),
    (
        # group 1: a_ok, b_ok (by priority: a_ok 0, b_ok -1); group 2: a_big (2), b_big (1).
        "served and waiting follow the order of consideration",
        state(2, [team("a", 1), team("b", 1, sharing="lend")], [
            pend("b_big", "b", 2, priority=1), pend("a_ok", "a", 1), pend("b_ok", "b", 1, priority=-1),
            pend("a_big", "a", 3, priority=2)]),
        {"served": ["a_ok", "b_ok"], "waiting": ["a_big", "b_big"]},
    ),
]

WHEN_TO_RECLAIM_CASES = [
    (
        "a job that has not waited reclaim_after_seconds causes no preemption",
        state(2, [team("a", 1), team("b", 1)], [run("b1", "b"), run("b2", "b"), pend("a1", "a", since=NOW - 10)],
              reclaim_after_seconds=60),
        {"preemptions": [], "waiting": ["a1"]},
    ),
    (
        "a job that waited exactly reclaim_after_seconds reclaims",
        state(2, [team("a", 1), team("b", 1)], [run("b1", "b"), run("b2", "b"), pend("a1", "a", since=NOW - 60)],
              reclaim_after_seconds=60),
        {"preemptions": [{"job": "b2", "team": "b", "reason": "reclaim", "beneficiary": "a1"}]},
    ),
    (
        "a pending job beyond its guarantee does not reclaim",
        state(3, [team("a", 1), team("b", 2)], [run("b1", "b", 3), pend("a1", "a", 2)]),
        {"preemptions": [], "waiting": ["a1"]},
    ),
]


def plan_outcome(out, expected):
    """The parts of plan ``out`` that ``expected`` names ("preemptions" exactly, "victims" as the
    ids stopped in order, "served", "waiting"), to compare with it."""
    got = {"preemptions": out["preemptions"], "victims": victims(out), "served": out["served"], "waiting": out["waiting"]}
    return {key: got[key] for key in expected}


@pytest.mark.parametrize("name,s,expected", ORDER_CASES + WHEN_TO_RECLAIM_CASES,
                         ids=[c[0] for c in ORDER_CASES + WHEN_TO_RECLAIM_CASES])
def test_order_and_when_to_reclaim_cases(name, s, expected):
    assert plan_outcome(plan(s), expected) == expected


# Rule 2b and the victim order (rule 3), as a table: (case, state, the preemptions as
# (victim, beneficiary) in the order chosen, the waiting jobs, usage of some teams after).
RECLAIM_SCENARIOS = [
    (
        # c runs within its guarantee with the lowest-priority job of all; b borrows.
        "only teams that borrow are reclaimed from",
        state(4, [team("a", 1), team("b", 1), team("c", 2)], [
            run("c1", "c", 2, priority=-9), run("b1", "b", 1), run("b2", "b", 1, since=5), pend("a1", "a"),
        ]),
        [("b2", "a1")], [], {},
    ),
    (
        # capacity 3, b uses 3 (borrows 2): the first in victim order is b_lo.
        "victim order: lower priority first",
        state(3, [team("a", 1), team("b", 1)], [
            run("b_hi", "b", priority=2, since=50), run("b_lo", "b", priority=1, since=10),
            run("b_mid", "b", priority=1, since=5, demand={"gpu": 1}), pend("a1", "a"),
        ]),
        [("b_lo", "a1")], [], {},
    ),
    (
        "victim order: most recent since first at equal priority",
        state(3, [team("a", 1), team("b", 1)], [
            run("b1", "b", since=10), run("b2", "b", since=30), run("b3", "b", since=20), pend("a1", "a"),
        ]),
        [("b2", "a1")], [], {},
    ),
    (
        # Code-point order: "B9" < "b10" < "b9"; descending picks "b9".
        "victim order: id descending at equal priority and since",
        state(3, [team("a", 1), team("b", 1)], [run("b10", "b"), run("b9", "b"), run("B9", "b"), pend("a1", "a")]),
        [("b9", "a1")], [], {},
    ),
    (
        "victim order merges all lending teams",
        state(5, [team("a", 1), team("b", 1), team("c", 1)], [
            run("b1", "b", priority=1, since=0), run("b2", "b", priority=1, since=1),
            run("c1", "c", priority=0, since=0), run("c2", "c", priority=1, since=5),
            run("c3", "c", priority=1, since=0),
            pend("a1", "a"),
        ]),
        [("c1", "a1")], [], {},
    ),
    (
        # a needs 2 GPUs; b's victims in order: v1 (1 GPU), then v2 (2 GPUs). With v2
        # chosen, v1 is not needed and goes back.
        "put-back returns small victims made unnecessary by a larger one",
        state(3, [team("a", 2), team("b", 1)], [
            run("v1", "b", 1, priority=0), run("v2", "b", 2, priority=1), pend("a1", "a", 2),
        ]),
        [("v2", "a1")], [], {"b": 1},
    ),
    (
        "several victims when one is not enough",
        state(4, [team("a", 2), team("b", 2)], [
            run("b1", "b", since=1), run("b2", "b", since=2), run("b3", "b", since=3), run("b4", "b", since=4),
            pend("a1", "a", 2),
        ]),
        [("b4", "a1"), ("b3", "a1")], [], {},
    ),
    (
        # b borrows only 1 GPU; a needs 2: after b3 goes, b is within its guarantee and
        # its other jobs are not eligible; nothing else can help, so nothing is chosen.
        "no more taking from a team once it no longer borrows",
        state(4, [team("a", 2), team("b", 2)], [
            run("b1", "b", since=1), run("b2", "b", since=2), run("b3", "b", since=3), pend("a1", "a", 2),
            run("a0", "a", 0.5, since=0),
        ]),
        [], ["a1"], {"b": 3},
    ),
    (
        # p lacks gpu and cpu. v borrows gpu only, w borrows cpu only. v_cpu (first in
        # victim order) uses only cpu, where v does not borrow: not eligible. w1 frees
        # cpu, v_gpu frees gpu.
        "eligibility needs a resource the victim's team borrows and p lacks",
        state({"gpu": 3, "cpu": 3}, [team("p", guarantee={"gpu": 1, "cpu": 1}),
                                    team("v", guarantee={"gpu": 1, "cpu": 1}),
                                    team("w", guarantee={"gpu": 1, "cpu": 1})], [
            run("v_cpu", "v", demand={"cpu": 1}, priority=0),
            run("v_gpu", "v", demand={"gpu": 1}, priority=1, since=10),
            run("v_gpu2", "v", demand={"gpu": 1}, priority=2),
            run("w1", "w", demand={"cpu": 1}, priority=1, since=20),
            run("w2", "w", demand={"cpu": 1}, priority=2),
            run("w_gpu", "w", demand={"gpu": 1}, priority=2),
            pend("p1", "p", demand={"gpu": 1, "cpu": 1}),
        ]),
        [("w1", "p1"), ("v_gpu", "p1")], [], {},
    ),
    (
        # b borrows cpu; a lacks only gpu, which c borrows.
        "a team borrowing a resource the job does not lack is not reclaimed from",
        state({"gpu": 2, "cpu": 4}, [
            team("a", guarantee={"gpu": 1, "cpu": 1}), team("b", guarantee={"gpu": 0, "cpu": 2}),
            team("c", guarantee={"gpu": 1, "cpu": 1}),
        ], [
            run("b1", "b", demand={"gpu": 0, "cpu": 3}, priority=-5),
            run("c1", "c", demand={"gpu": 1}), run("c2", "c", demand={"gpu": 1}, since=5),
            pend("a1", "a", demand={"gpu": 1, "cpu": 1}),
        ]),
        [("c2", "a1")], [], {},
    ),
    (
        # a needs 2 GPUs, 0.5 are free. b borrows 1.5 but only b3 (0.5) is unprotected:
        # taking it is not enough, so it is not chosen either.
        "a failed reclaim chooses nothing",
        state(4, [team("a", 2), team("b", 1), team("c", 1)], [
            run("b1", "b", since=NOW - 1), run("b2", "b", since=NOW - 1), run("b3", "b", 0.5, since=0),
            run("c1", "c"), pend("a1", "a", 2),
        ], min_runtime_seconds=60),
        [], ["a1"], {"b": 2.5},
    ),
    (
        "two pending jobs each get their own victims",
        state(3, [team("a", 2), team("b", 1)], [
            run("b1", "b", since=1), run("b2", "b", since=2), run("b3", "b", since=3),
            pend("a1", "a", since=1), pend("a2", "a", since=2),
        ]),
        [("b3", "a1"), ("b2", "a2")], [], {"a": 2, "b": 1},
    ),
]


@pytest.mark.parametrize(("case", "s", "pre", "waiting", "usage"), RECLAIM_SCENARIOS,
                         ids=[c[0] for c in RECLAIM_SCENARIOS])
def test_reclaim_scenarios(case, s, pre, waiting, usage):
    out = plan(s)
    assert [(p["job"], p["beneficiary"]) for p in out["preemptions"]] == pre
    assert all(p["reason"] == "reclaim" for p in out["preemptions"])
    assert out["waiting"] == waiting
    for name, gpu in usage.items():
        assert out["teams"][name]["usage"]["gpu"] == gpu


# ---------------------------------------------------------------------------
# Rule 2c: in-team preemption, and reserve teams (idle guarantee never lent)
#
# One row per case: (name, state, expected), as the tables of rule 2 (see plan_outcome).


def in_team(job, beneficiary):
    """The preemption of a team's own lower-priority ``job`` for its ``beneficiary``."""
    return {"job": job, "team": "a", "reason": "in_team", "beneficiary": beneficiary}


IN_TEAM_CASES = [
    (
        "in-team preemption stops a lower-priority job of the same team",
        state(2, [team("a", 2, sharing="lend", in_team_preemption=True)], [
            run("lo", "a", 2, priority=0), pend("hi", "a", 2, priority=5)]),
        {"preemptions": [in_team("lo", "hi")], "served": ["hi"]},
    ),
    (
        "in-team preemption never stops equal-priority jobs",
        state(2, [team("a", 2, in_team_preemption=True)], [run("same", "a", 2, priority=5), pend("p", "a", 2, priority=5)]),
        {"preemptions": [], "waiting": ["p"]},
    ),
    (
        "without in-team preemption the high-priority job waits",
        state(2, [team("a", 2)], [run("lo", "a", 2, priority=0), pend("hi", "a", 2, priority=5)]),
        {"preemptions": [], "waiting": ["hi"]},
    ),
    (
        "in-team preemption waits for reclaim_after_seconds",
        state(2, [team("a", 2, in_team_preemption=True)], [
            run("lo", "a", 2, priority=0), pend("hi", "a", 2, priority=5, since=NOW - 5)], reclaim_after_seconds=30),
        {"preemptions": []},
    ),
    (
        # a (G=2) runs lo (1 GPU); hi (2 GPUs) is beyond a's guarantee, so no reclaim in
        # 2b. In 2c, stopping lo brings hi within the guarantee, then b's job is reclaimed.
        "in-team preemption gets back under the guarantee and reclaims in one step",
        state(4, [team("a", 2, in_team_preemption=True), team("b", 2)], [
            run("lo", "a", 1, priority=0), run("b1", "b", since=1), run("b2", "b", since=2), run("b3", "b", since=3),
            pend("hi", "a", 2, priority=5)]),
        {"preemptions": [in_team("lo", "hi"), {"job": "b3", "team": "b", "reason": "reclaim", "beneficiary": "hi"}]},
    ),
    (
        # a (G=1) runs lo (0.5); hi needs 2: even without lo it is beyond a's guarantee,
        # so b's borrowed GPU is not taken and nothing is chosen.
        "in-team does not reclaim from others while beyond the guarantee",
        state(3, [team("a", 1, in_team_preemption=True), team("b", 2)], [
            run("lo", "a", 0.5, priority=0), run("b1", "b", 1), run("b2", "b", 1), run("b3", "b", 0.5, since=3),
            pend("hi", "a", 2, priority=5)]),
        {"preemptions": [], "waiting": ["hi"]},
    ),
    (
        "in-team puts back its own jobs made unnecessary",
        state(3, [team("a", 3, in_team_preemption=True)], [
            run("lo1", "a", 1, priority=0), run("lo2", "a", 2, priority=1), pend("hi", "a", 2, priority=5)]),
        {"victims": ["lo2"]},
    ),
    (
        # a borrows 1 GPU, its cap. hi (1 GPU) would borrow 2; stopping a's low-priority
        # job brings it back to 1, within the cap, though still beyond the guarantee.
        "in-team preemption can bring a job back within the borrow cap",
        state(6, [team("a", 2, borrow_limit={"gpu": 1}, in_team_preemption=True), team("o", 4)], [
            run("lo", "a", 1, priority=0), run("mid", "a", 2, priority=9), pend("hi", "a", 1, priority=5)]),
        {"preemptions": [in_team("lo", "hi")]},
    ),
    (
        # a is within its guarantee but b's running jobs are protected: 2b fails; 2c
        # stops a's own lower-priority job.
        "in-team is tried after a failed reclaim",
        state(3, [team("a", 2, in_team_preemption=True), team("b", 1)], [
            run("b1", "b", since=NOW - 1), run("b2", "b", since=NOW - 1), run("lo", "a", 1, priority=-1),
            pend("hi", "a", 1, priority=3)], min_runtime_seconds=30),
        {"preemptions": [in_team("lo", "hi")]},
    ),
]

RESERVE_CASES = [
    (
        "a reserve team's idle guarantee is not lent",
        state(4, [team("r", 2, sharing="reserve"), team("a", 2)], [run("a1", "a", 2), pend("a2", "a", 1)]),
        {"waiting": ["a2"], "served": []},
    ),
    (
        "a reserve team uses its own idle guarantee",
        state(4, [team("r", 2, sharing="reserve"), team("a", 2)], [run("a1", "a", 2), pend("r1", "r", 2)]),
        {"served": ["r1"]},
    ),
    (
        # The pool's only free GPU is r's idle guarantee; a lacks room; b borrows 1 and is
        # reclaimed, never r's idle GPU handed out.
        "a reserve team's idle guarantee is not reclaimed for a lender either",
        state(4, [team("r", 1, sharing="reserve"), team("a", 1), team("b", 2)], [
            run("b1", "b"), run("b2", "b"), run("b3", "b", since=5), pend("a1", "a")]),
        {"victims": ["b3"]},
    ),
    (
        "a lend team lends its idle guarantee",
        state(4, [team("l", 2, sharing="lend"), team("a", 2)], [run("a1", "a", 2), pend("a2", "a", 2)]),
        {"served": ["a2"]},
    ),
]


@pytest.mark.parametrize("name,s,expected", IN_TEAM_CASES + RESERVE_CASES,
                         ids=[c[0] for c in IN_TEAM_CASES + RESERVE_CASES])
def test_in_team_and_reserve_cases(name, s, expected):
    assert plan_outcome(plan(s), expected) == expected


# ---------------------------------------------------------------------------
# Terminating jobs


def test_terminating_running_job_holds_no_capacity():
    s = state(2, [team("a", 1), team("b", 1)], [
        run("b1", "b"), run("b2", "b", terminating=True), pend("a1", "a"),
    ])
    out = plan(s)
    assert out["preemptions"] == [] and out["served"] == ["a1"]
    assert out["teams"]["b"]["usage"] == {"gpu": 1}


def test_terminating_jobs_appear_in_no_output_list():
    s = state(2, [team("a", 1), team("b", 1)], [
        run("b1", "b"), run("b2", "b"), run("b3", "b", terminating=True, priority=-9),
        pend("a1", "a"), pend("gone", "a", terminating=True, priority=99),
    ])
    out = plan(s)
    text = json.dumps(out)
    assert "b3" not in text and "gone" not in text


# ---------------------------------------------------------------------------
# Tolerance


def test_fractions_that_sum_inexactly_still_fit():
    # 0.1 + 0.2 is not exactly 0.3 in binary floating point.
    s = state(0.3, [team("a", 0.3)], [run("x", "a", 0.1), pend("y", "a", 0.2)])
    assert plan(s)["served"] == ["y"]


def test_excess_within_tolerance_fits_beyond_does_not():
    ok = state(1, [team("a", 1)], [pend("p", "a", 1 + 5e-10)])
    assert plan(ok)["served"] == ["p"]
    too_big = state(1, [team("a", 1)], [pend("p", "a", 1 + 5e-9)])
    assert plan(too_big)["waiting"] == ["p"]


def test_a_job_whose_demand_is_within_tolerance_of_zero_is_not_a_reclaim_candidate():
    # "The job itself has demand in such a resource": demand > 0, within the tolerance.
    # Taking the 1e-9 job would give p the last 1e-9 it lacks; it is not eligible, so
    # reclaiming b1 alone cannot make room and nothing is taken.
    s = state(2, [team("a", 2), team("b", 0, sharing="lend_and_borrow")], [
        run("b1", "b", 1.5), run("tiny", "b", 1e-9), pend("p", "a", 2 + 5e-10),
    ])
    out = plan(s)
    assert out["preemptions"] == []
    assert out["waiting"] == ["p"]
    # A job with more than the tolerance is taken.
    s["jobs"][1]["demand"] = {"gpu": 3e-9}
    out = plan(s)
    assert sorted(p["job"] for p in out["preemptions"]) == ["b1", "tiny"]
    assert out["served"] == ["p"]


def test_borrowing_within_tolerance_of_the_cap_is_not_over_it():
    s = state(2, [team("a", 1, borrow_limit={"gpu": 0.3}), team("b", 1)], [
        run("x", "a", 1.1), run("y", "a", 0.2),
    ])
    assert plan(s)["preemptions"] == []


# ---------------------------------------------------------------------------
# Output format


def test_output_reports_every_team_and_resource_with_null_for_unbounded_caps():
    s = state({"gpu": 8, "cpu": 64}, [
        team("z", guarantee={"gpu": 4}, borrow_limit_percent=50),
        team("m", guarantee={"gpu": 2, "cpu": 10}, borrow_limit={"cpu": 4}),
        team("r", guarantee={"gpu": 1}, sharing="reserve"),
    ], [run("z1", "z", demand={"gpu": 5})])
    out = plan(s)
    assert list(out) == ["preemptions", "served", "waiting", "teams"]
    assert list(out["teams"]) == ["m", "r", "z"]
    assert out["teams"]["z"] == {
        "usage": {"gpu": 5, "cpu": 0},
        "guarantee": {"gpu": 4, "cpu": 0},
        "borrowed": {"gpu": 1, "cpu": 0},
        "borrow_cap": {"gpu": 2, "cpu": 0},
    }
    assert out["teams"]["m"]["borrow_cap"] == {"gpu": None, "cpu": 4}
    assert out["teams"]["r"]["borrow_cap"] == {"gpu": 0, "cpu": 0}
    assert '"borrow_cap": {"gpu": null, "cpu": 4}' in json.dumps(out)


def test_preemption_entries_have_keys_in_contract_order():
    s = state(2, [team("a", 1), team("b", 1)], [run("b1", "b"), run("b2", "b"), pend("a1", "a")])
    (pre,) = plan(s)["preemptions"]
    assert list(pre) == ["job", "team", "reason", "beneficiary"]


def test_contract_input_example_gives_a_plan():
    s = {
        "now": 10000, "capacity": {"gpu": 16},
        "settings": {"reclaim_after_seconds": 0, "min_runtime_seconds": 0},
        "teams": [{"name": "alpha", "guarantee": {"gpu": 8}, "sharing": "lend_and_borrow",
                   "borrow_limit_percent": -1, "borrow_limit": {"gpu": 4}, "in_team_preemption": False}],
        "jobs": [{"id": "j1", "team": "alpha", "state": "running", "demand": {"gpu": 4},
                  "priority": 0, "since": 100, "terminating": False}],
    }
    assert plan(s) == {
        "preemptions": [], "served": [], "waiting": [],
        "teams": {"alpha": {"usage": {"gpu": 4}, "guarantee": {"gpu": 8}, "borrowed": {"gpu": 0},
                            "borrow_cap": {"gpu": 4}}},
    }


def test_optional_fields_take_their_defaults():
    s = {"now": 0, "capacity": {"gpu": 2}, "teams": [{"name": "a", "guarantee": {"gpu": 1}}],
         "jobs": [{"id": "j", "team": "a", "state": "pending", "demand": {"gpu": 2}, "since": 0}]}
    out = plan(s)
    assert out["served"] == ["j"]  # lend_and_borrow, unlimited: borrows the free GPU
    assert out["teams"]["a"]["borrow_cap"] == {"gpu": None}


def test_future_since_counts_as_age_zero():
    s = state(2, [team("a", 1), team("b", 1)], [run("b1", "b"), run("b2", "b"), pend("a1", "a", since=NOW + 500)],
              reclaim_after_seconds=0)
    assert victims(plan(s)) == ["b2"]


def test_same_input_same_bytes():
    s = state(3, [team("alpha", 1), team("beta", 1), team("gamma", 1)], [
        run("a1", "alpha", since=10), run("a2", "alpha", since=20), run("a3", "alpha", since=30),
        pend("b1", "beta", since=900),
    ])
    assert json.dumps(plan(s)) == json.dumps(plan(json.loads(json.dumps(s))))


# ---------------------------------------------------------------------------
# Public helpers shared with the simulator


def _t(**kw):
    return TeamSpec(name="t", guarantee={"gpu": 4}, **kw)


def test_borrow_cap_percent_and_absolute_take_the_smaller():
    assert borrow_cap(_t(borrow_limit_percent=50), "gpu") == 2
    assert borrow_cap(_t(borrow_limit_percent=50, borrow_limit={"gpu": 1}), "gpu") == 1
    assert borrow_cap(_t(borrow_limit_percent=200, borrow_limit={"gpu": 3}), "gpu") == 3


def test_borrow_cap_unbounded_is_none_and_non_borrowers_are_zero():
    assert borrow_cap(_t(), "gpu") is None
    assert borrow_cap(_t(borrow_limit={"cpu": 1}), "gpu") is None
    assert borrow_cap(_t(sharing="lend"), "gpu") == 0
    assert borrow_cap(_t(sharing="reserve", borrow_limit_percent=100), "gpu") == 0


def test_fits_checks_room_after_reserved_idle_and_the_cap():
    t = _t(borrow_limit={"gpu": 1})
    assert fits({"gpu": 2}, t, {"gpu": 3}, {"gpu": 2}, {})  # borrows 1 = cap
    assert not fits({"gpu": 2}, t, {"gpu": 4}, {"gpu": 2}, {})  # would borrow 2 > 1
    assert not fits({"gpu": 2}, t, {"gpu": 0}, {"gpu": 2}, {"gpu": 1})  # reserved idle
    assert fits({"gpu": 0, "cpu": 5}, _t(), {}, {"gpu": 0}, {}) is False  # cpu has no room
    assert fits({"gpu": 0}, t, {}, {}, {})  # needs nothing
    assert reclaim.TOLERANCE == 1e-9


def test_plan_state_accepts_dataclasses_built_directly():
    st = State(
        now=100, capacity={"gpu": 2}, settings=Settings(),
        teams=(TeamSpec("a", {"gpu": 1}), TeamSpec("b", {"gpu": 1})),
        jobs=(JobSpec("b1", "b", "running", {"gpu": 1}, 0, 0), JobSpec("b2", "b", "running", {"gpu": 1}, 0, 5),
              JobSpec("a1", "a", "pending", {"gpu": 1}, 0, 50)),
    )
    assert [p["job"] for p in reclaim.plan_state(st)["preemptions"]] == ["b2"]


# ---------------------------------------------------------------------------
# Invalid input: every case of the contract names the field


INVALID = [
    ("missing now", set_path(["now"], DELETE), "now"),
    ("mistyped now", set_path(["now"], "soon"), "now"),
    ("missing capacity", set_path(["capacity"], DELETE), "capacity"),
    ("mistyped capacity", set_path(["capacity"], [4]), "capacity"),
    ("missing teams", set_path(["teams"], DELETE), "teams"),
    ("missing jobs", set_path(["jobs"], DELETE), "jobs"),
    ("mistyped jobs", set_path(["jobs"], {"j1": {}}), "jobs"),
    ("missing team name", set_path(["teams", 0, "name"], DELETE), "teams[0].name"),
    ("missing guarantee", set_path(["teams", 0, "guarantee"], DELETE), "teams[0].guarantee"),
    ("mistyped guarantee amount", set_path(["teams", 0, "guarantee", "gpu"], "two"), "teams[0].guarantee.gpu"),
    ("boolean amount", set_path(["teams", 0, "guarantee", "gpu"], True), "teams[0].guarantee.gpu"),
    ("mistyped in_team_preemption", set_path(["teams", 1, "in_team_preemption"], "yes"), "teams[1].in_team_preemption"),
    ("mistyped borrow_limit_percent", set_path(["teams", 1, "borrow_limit_percent"], "50%"), "teams[1].borrow_limit_percent"),
    ("missing job id", set_path(["jobs", 0, "id"], DELETE), "jobs[0].id"),
    ("numeric job id", set_path(["jobs", 0, "id"], 7), "jobs[0].id"),
    ("missing demand", set_path(["jobs", 0, "demand"], DELETE), "jobs[0].demand"),
    ("missing since", set_path(["jobs", 1, "since"], DELETE), "jobs[1].since"),
    ("mistyped since", set_path(["jobs", 1, "since"], "yesterday"), "jobs[1].since"),
    ("fractional priority", set_path(["jobs", 1, "priority"], 1.5), "jobs[1].priority"),
    ("mistyped terminating", set_path(["jobs", 1, "terminating"], "no"), "jobs[1].terminating"),
    ("mistyped settings", set_path(["settings"], 5), "settings"),
    ("mistyped reclaim_after_seconds", set_path(["settings"], {"reclaim_after_seconds": "1m"}),
     "settings.reclaim_after_seconds"),
    ("negative capacity", set_path(["capacity", "gpu"], -1), "capacity.gpu"),
    ("negative guarantee", set_path(["teams", 0, "guarantee", "gpu"], -1), "teams[0].guarantee.gpu"),
    ("negative borrow_limit", set_path(["teams", 0, "borrow_limit"], {"gpu": -2}), "teams[0].borrow_limit.gpu"),
    ("negative demand", set_path(["jobs", 0, "demand"], {"gpu": -0.5}), "jobs[0].demand.gpu"),
    ("non-finite demand", set_path(["jobs", 0, "demand"], {"gpu": float("nan")}), "jobs[0].demand.gpu"),
    ("unknown resource in guarantee", set_path(["teams", 0, "guarantee", "tpu"], 1), "teams[0].guarantee.tpu"),
    ("unknown resource in borrow_limit", set_path(["teams", 0, "borrow_limit"], {"tpu": 1}), "teams[0].borrow_limit.tpu"),
    ("unknown resource in demand", set_path(["jobs", 1, "demand"], {"tpu": 1}), "jobs[1].demand.tpu"),
    ("guarantees above capacity", set_path(["capacity", "gpu"], 3), "teams[*].guarantee.gpu"),
    ("duplicate team name", set_path(["teams", 1, "name"], "a"), "teams[1].name"),
    ("duplicate job id", set_path(["jobs", 1, "id"], "j1"), "jobs[1].id"),
    ("job of unknown team", set_path(["jobs", 1, "team"], "zeta"), "jobs[1].team"),
    ("bad state", set_path(["jobs", 1, "state"], "RUNNABLE"), "jobs[1].state"),
    ("bad sharing", set_path(["teams", 0, "sharing"], "share"), "teams[0].sharing"),
    ("borrow_limit_percent below -1", set_path(["teams", 0, "borrow_limit_percent"], -2), "teams[0].borrow_limit_percent"),
    ("state not an object", lambda s: [s], "state"),
]


@pytest.mark.parametrize(("case", "mutate", "field"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_input_raises_config_error_naming_the_field(case, mutate, field):
    s = mutate(valid_state())
    with pytest.raises(ConfigError) as info:
        plan(s)
    fields = [p.field for p in info.value.problems]
    assert field in fields, (case, fields)
    problem = info.value.problems[fields.index(field)]
    assert problem.fix, "every problem says how to fix it"
    assert field in str(info.value)


def test_every_problem_is_reported_at_once():
    s = valid_state()
    s["teams"][0]["sharing"] = "share"
    s["jobs"][1]["state"] = "queued"
    with pytest.raises(ConfigError) as info:
        plan(s)
    assert {p.field for p in info.value.problems} == {"teams[0].sharing", "jobs[1].state"}


def test_borrow_limit_percent_of_minus_one_and_zero_arevalid_state():
    for pct in (-1, 0, 250.5):
        s = valid_state()
        s["teams"][0]["borrow_limit_percent"] = pct
        plan(s)


def test_negative_percent_other_than_minus_one_is_rejected():
    s = valid_state()
    s["teams"][0]["borrow_limit_percent"] = -0.5
    with pytest.raises(ConfigError, match="use -1 for unlimited"):
        plan(s)


def test_integral_float_priority_is_accepted():
    s = valid_state()
    s["jobs"][0]["priority"] = 2.0
    plan(s)
