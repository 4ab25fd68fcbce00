"""More plan scenarios of the reclaim planner (docs/reclaim-planner.md).

Table-driven, in the style of tests/core/test_reclaim_planner.py (Kueue's preemption tests):
each row is a state and the whole plan it must give, the preemptions as
(victim, team, reason, beneficiary). They pin behaviour that the random property tests
reach only rarely: the order in which jobs are considered across teams, candidates
remembered from one pending job to the next, ties at the tolerance.
"""

from __future__ import annotations

import pytest

from cdk_gpu_share.core.policy.reclaim import (
    TOLERANCE,
    TeamSpec,
    fits,
    has_room,
    parse_state,
    plan,
    plan_state,
    within_cap,
    within_guarantee,
)
from tests.builders import NOW, grouped, pend, run, shared_demands, state, team

TOL = TOLERANCE


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
        state(3, [team("a", 3, in_team_preemption=True)], [
            run("a1", "a"), run("a2", "a"), run("a3", "a"),
            pend("p1", "a", priority=10, since=1), pend("p2", "a", priority=10, since=2),
            pend("p3", "a", priority=10, since=3),
        ]),
        [("a3", "a", "in_team", "p1"), ("a2", "a", "in_team", "p2"), ("a1", "a", "in_team", "p3")],
        ["p1", "p2", "p3"], [],
    ),
    # -- Tolerance: a job needs a resource only where its demand is above TOLERANCE.
    (
        # b's job runs on r's reserved GPUs (allowed in a state read from the queue):
        # F - RI is -1 GPU for b. p asks for TOL GPUs, which it does not need: it fits.
        "a demand of exactly the tolerance needs no room",
        state({"gpu": 2, "cpu": 4}, [team("r", guarantee={"gpu": 2}, sharing="reserve"),
                                     team("b", guarantee={"cpu": 4})], [
            run("b1", "b", demand={"gpu": 1}), pend("p", "b", demand={"gpu": TOL, "cpu": 1}),
        ]),
        [], ["p"], [],
    ),
    (
        # a is beyond its GPU guarantee (0); p needs only cpu, within a's guarantee, so
        # p may reclaim b's cpu.
        "a demand of exactly the tolerance does not count against the guarantee",
        state({"gpu": 2, "cpu": 2}, [team("a", guarantee={"cpu": 1}), team("b", guarantee={"cpu": 1})], [
            run("a1", "a", demand={"gpu": 1}), run("b1", "b", demand={"cpu": 2}),
            pend("p", "a", demand={"gpu": TOL, "cpu": 1}),
        ]),
        [("b1", "b", "reclaim", "p")], ["p"], [],
    ),
    (
        # a borrows TOL/2 GPU beyond a cap of 0 (within the tolerance, so rule 1 leaves
        # it); p's TOL GPUs are not needed, so they cannot break the cap.
        "a demand of exactly the tolerance is not checked against the cap",
        state({"gpu": 2, "cpu": 2}, [team("a", guarantee={"gpu": 1, "cpu": 1}, borrow_limit={"gpu": 0}),
                                     team("b", guarantee={"gpu": 1, "cpu": 1})], [
            run("a1", "a", demand={"gpu": 1 + TOL / 2}), pend("p", "a", demand={"gpu": TOL, "cpu": 1}),
        ]),
        [], ["p"], [],
    ),
    (
        "borrowing exactly the tolerance beyond the cap fits",
        state(4, [team("a", 0, borrow_limit={"gpu": 1}), team("b", 4)], [pend("p", "a", 1 + TOL)]),
        [], ["p"], [],
    ),
    (
        # p lacks cpu (b borrows it) and not GPU (it asks for TOL GPUs, with F - RI at -1
        # GPU): only the cpu decides whether reclaiming can succeed.
        "a demand of exactly the tolerance is no resource the job lacks",
        state({"gpu": 2, "cpu": 2}, [team("r", guarantee={"gpu": 2}, sharing="reserve"),
                                     team("a", guarantee={"cpu": 1}), team("b", guarantee={"cpu": 1})], [
            run("b0", "b", demand={"gpu": 1}, since=NOW), run("b1", "b", demand={"cpu": 2}),
            pend("p", "a", demand={"gpu": TOL, "cpu": 1}),
        ], min_runtime_seconds=60),
        [("b1", "b", "reclaim", "p")], ["p"], [],
    ),
    # -- In-team preemption (rule 2c) and its "cannot succeed" shortcut.
    (
        # With a_lo stopped, F is exactly p's demand and a borrows 1 without a cap: p fits.
        "an in-team pass that frees exactly enough succeeds",
        state(3, [team("a", 1, in_team_preemption=True), team("b", 2)], [
            run("a_lo", "a", 1), run("b1", "b", 1), pend("p", "a", 2, priority=5),
        ]),
        [("a_lo", "a", "in_team", "p")], ["p"], [],
    ),
    (
        # a's protected GPU job keeps it over its GPU cap of 0; p asks for TOL GPUs,
        # which it does not need, and its cpu fits once a_lo is stopped.
        "a resource the job does not need does not make the in-team pass hopeless",
        state({"gpu": 2, "cpu": 1}, [team("a", guarantee={"cpu": 1}, borrow_limit={"gpu": 0},
                                          in_team_preemption=True)], [
            run("a_big", "a", demand={"gpu": 1}, since=NOW), run("a_lo", "a", demand={"cpu": 1}),
            pend("p", "a", demand={"gpu": TOL, "cpu": 1}, priority=5),
        ], min_runtime_seconds=60),
        [("a_lo", "a", "in_team", "p")], ["p"], [],
    ),
    (
        # p1 cannot fit even with a_lo stopped and waits; p2, same team and priority,
        # gets the same candidates and fits with a_lo stopped.
        "a job that cannot fit leaves the candidates to the next job of its priority",
        state(3, [team("a", 2, in_team_preemption=True), team("b", 1)], [
            run("a_lo", "a", 1), run("b1", "b", 1),
            pend("p1", "a", 4, priority=5, since=0), pend("p2", "a", 2, priority=5, since=1),
        ]),
        [("a_lo", "a", "in_team", "p2")], ["p2"], ["p1"],
    ),
    # -- Reclaim (rule 2b): eligibility is checked when each job is reached.
    (
        # a1 needs 2, none is free. v borrows 1 with two unprotected jobs, w borrows 1
        # with protected ones: enough could be given back in all (no shortcut), but once
        # v2 goes v no longer borrows, v1 is not eligible, and v2 is put back.
        "a reclaim that fails part way chooses nothing",
        state(4, [team("a", 2), team("v", 1), team("w", 1)], [
            run("v1", "v", since=1), run("v2", "v", since=2),
            run("w1", "w", since=NOW), run("w2", "w", since=NOW),
            pend("a1", "a", 2),
        ], min_runtime_seconds=60),
        [], [], ["a1"],
    ),
    (
        # b3 then c3 (b no longer borrows once b3 is gone, so b2, next in victim order,
        # is passed over).
        "a team that stops borrowing part way is passed over for the next team",
        state(6, [team("a", 2), team("b", 2), team("c", 2)], [
            run("b1", "b", since=30), run("b2", "b", since=31), run("b3", "b", since=32),
            run("c1", "c", since=10), run("c2", "c", since=11), run("c3", "c", since=12),
            pend("a1", "a", 2),
        ]),
        [("b3", "b", "reclaim", "a1"), ("c3", "c", "reclaim", "a1")], ["a1"], [],
    ),
    (
        # p lacks gpu and cpu; v borrows gpu only, w cpu only. Once y is gone p has room
        # in gpu, so v's x (gpu and cpu) is no longer eligible: w1 frees the cpu.
        "a job is eligible only through a resource the job still lacks",
        state({"gpu": 2, "cpu": 2}, [team("p", guarantee={"gpu": 1, "cpu": 1}),
                                     team("v", guarantee={"cpu": 1}), team("w")], [
            run("y", "v", demand={"gpu": 1}, priority=0),
            run("x", "v", demand={"gpu": 1, "cpu": 1}, priority=1),
            run("w1", "w", demand={"cpu": 1}, priority=2),
            pend("p1", "p", demand={"gpu": 1, "cpu": 1}),
        ]),
        [("y", "v", "reclaim", "p1"), ("w1", "w", "reclaim", "p1")], ["p1"], [],
    ),
    (
        # v's unprotected jobs go to a2 and c1; v still borrows (protected jobs), but has
        # nothing left to give: c2 reclaims w's job, last in victim order.
        "a team whose candidates are all chosen is passed over",
        state(6, [team("a", 2), team("c", 2), team("v", 1), team("w", 0)], [
            run("v1", "v"), run("v2", "v"), run("v3", "v", since=NOW), run("v4", "v", since=NOW),
            run("w1", "w", priority=1),
            pend("a1", "a", since=1), pend("a2", "a", since=2), pend("c1", "c", since=3), pend("c2", "c", since=4),
        ], min_runtime_seconds=60),
        [("v2", "v", "reclaim", "a2"), ("v1", "v", "reclaim", "c1"), ("w1", "w", "reclaim", "c2")],
        ["a1", "a2", "c1", "c2"], [],
    ),
    (
        # Age 0.75 s, reclaim_after_seconds 0.5: p has waited.
        "a job has waited once its age reaches reclaim_after_seconds, below a second too",
        state(2, [team("a", 1), team("b", 1)], [run("b1", "b"), run("b2", "b"), pend("a1", "a", since=NOW - 0.75)],
              reclaim_after_seconds=0.5),
        [("b2", "b", "reclaim", "a1")], ["a1"], [],
    ),
    # -- Exactly at the tolerance: "a <= b" holds when a == b + TOL.
    (
        # p asks for 1 + TOL of a's guarantee of 1: within it. Once b2 goes, 1 GPU is
        # free: room for 1 + TOL.
        "a job exactly the tolerance beyond its guarantee and the free capacity fits",
        state(2, [team("a", 1), team("b", 1)], [run("b1", "b"), run("b2", "b", since=5), pend("p", "a", 1 + TOL)]),
        [("b2", "b", "reclaim", "p")], ["p"], [],
    ),
    (
        # a borrows 2*TOL - TOL = TOL beyond a cap of 0: not over it, and it borrows nothing.
        "a team borrowing exactly the tolerance beyond its cap keeps its jobs",
        state(1, [team("a", TOL, borrow_limit={"gpu": 0}), team("b", 0.5)], [run("x", "a", 2 * TOL)]),
        [], [], [],
    ),
    (
        # x (priority -1) uses TOL GPUs: not a GPU job, so rule 1 passes it over and
        # takes y and z, which bring a within its cap of 0.
        "rule 1 passes over a job using exactly the tolerance",
        state(4, [team("a", 1, borrow_limit={"gpu": 0}), team("b", 3)], [
            run("x", "a", TOL, priority=-1), run("y", "a", 1, priority=0), run("z", "a", 1 + TOL / 2, priority=1),
        ]),
        [("y", "a", "borrow_limit", None), ("z", "a", "borrow_limit", None)], [], [],
    ),
    (
        # now 0, b1 started TOL s ago (since -TOL) and min_runtime_seconds is 2 * TOL:
        # age + TOL == min_runtime, so b1 is no longer protected.
        "a job exactly the tolerance younger than min_runtime_seconds is not protected",
        state(2, [team("a", 1), team("b", 1)], [run("b0", "b", since=-1), run("b1", "b", since=-TOL), pend("a1", "a")],
              now=0, min_runtime_seconds=2 * TOL),
        [("b1", "b", "reclaim", "a1")], ["a1"], [],
    ),
    (
        # x1 must wait (no room, no guarantee); py then stops y's 3-GPU job for its 2
        # GPUs, which leaves 1 GPU free: x2, of x1's team and demand but after py in
        # the order, fits. (With pending groups, x's group leaves the walk at x1 and
        # comes back after py's plan changed U, at x2.)
        "a job that had to wait does not hold back a later one of its team and demand",
        state(4, [team("x", 0), team("y", 4, in_team_preemption=True)], [
            run("y_big", "y", 3, since=90), run("y_small", "y", 1, since=10),
            pend("x1", "x", priority=5, since=0), pend("py", "y", 2, priority=5, since=10),
            pend("x2", "x", priority=5, since=50),
        ]),
        [("y_big", "y", "in_team", "py")], ["py", "x2"], ["x1"],
    ),
    (
        # Same team, same demand, three free GPUs: whether the next one fits is asked
        # again after each one is served (once per (team, demand) until U changes).
        "jobs of one team and demand fill the free capacity one by one",
        state(3, [team("b", 0)], [pend(f"b{i}", "b", since=i) for i in range(1, 5)]),
        [], ["b1", "b2", "b3"], ["b4"],
    ),
    (
        # One team, two demands, one free GPU: the 2-GPU job must wait, the 1-GPU job
        # after it fits (what is asked once is per team *and* demand).
        "a team's smaller job fits while its larger one waits",
        state(1, [team("b", 0)], [pend("big", "b", 2, priority=1), pend("small", "b", 1)]),
        [], ["small"], ["big"],
    ),
    (
        # x1 must wait and is x's last job; py's plan then changes U: x's group has
        # nothing left to come back with.
        "a job that had to wait was the last of its team and demand",
        state(4, [team("x", 0), team("y", 4, in_team_preemption=True)], [
            run("y_big", "y", 3, since=90), run("y_small", "y", 1, since=10),
            pend("x1", "x", priority=5, since=0), pend("py", "y", 2, priority=5, since=10),
        ]),
        [("y_big", "y", "in_team", "py")], ["py"], ["x1"],
    ),
    (
        # b1's since is in the future: age 0, protected by a min_runtime_seconds of 0.5.
        "a job started in the future is protected while min_runtime_seconds is above 0",
        state(2, [team("a", 1), team("b", 1)], [run("b0", "b", since=0), run("b1", "b", since=NOW + 10), pend("a1", "a")],
              min_runtime_seconds=0.5),
        [("b0", "b", "reclaim", "a1")], ["a1"], [],
    ),
]


@pytest.mark.parametrize(("case", "s", "pre", "served", "waiting"), SCENARIOS, ids=[c[0] for c in SCENARIOS])
def test_scenarios(case, s, pre, served, waiting):
    out = plan(s)
    assert preemptions(out) == pre
    assert out["served"] == served
    assert out["waiting"] == waiting
    # The same plan with equal demands in one dict, and with pending groups.
    parsed = parse_state(s)
    assert plan_state(shared_demands(parsed)) == out
    assert plan_state(grouped(parsed)) == out


# ---------------------------------------------------------------------------
# The contract's definitions as the simulator calls them: mappings in which a missing
# resource is 0 (usage, free, reserved idle, guarantee) or unbounded (borrow_limit).

A = TeamSpec("a", {"gpu": 2})
NO_GUARANTEE = TeamSpec("n", {}, borrow_limit={"gpu": 1})
CAPPED = TeamSpec("c", {"gpu": 2}, borrow_limit={"gpu": 1})

DEFINITIONS = [
    # (case, function, arguments, result)
    ("has_room: missing free is 0", has_room, ({"gpu": 1}, {}, {}), False),
    ("has_room: missing reserved idle is 0", has_room, ({"gpu": 1}, {"gpu": 1}, {}), True),
    ("has_room: reserved idle is not room", has_room, ({"gpu": 1}, {"gpu": 1.5}, {"gpu": 1}), False),
    ("has_room: a resource not needed needs no room", has_room, ({"gpu": 0, "cpu": 1}, {"cpu": 1}, {}), True),
    ("within_cap: missing usage is 0", within_cap, ({"gpu": 2}, NO_GUARANTEE, {}), False),
    ("within_cap: missing usage is 0, within the cap", within_cap, ({"gpu": 1}, NO_GUARANTEE, {}), True),
    ("within_cap: missing guarantee is 0", within_cap, ({"gpu": 1 + 2 * TOL}, NO_GUARANTEE, {"gpu": 0}), False),
    ("within_cap: borrowing up to the cap", within_cap, ({"gpu": 1}, CAPPED, {"gpu": 2}), True),
    ("within_cap: borrowing beyond the cap", within_cap, ({"gpu": 1.5}, CAPPED, {"gpu": 2}), False),
    ("within_cap: unbounded cap", within_cap, ({"gpu": 100}, A, {}), True),
    ("within_guarantee: missing usage is 0", within_guarantee, ({"gpu": 2}, A, {}), True),
    ("within_guarantee: missing guarantee is 0", within_guarantee, ({"gpu": 1}, NO_GUARANTEE, {}), False),
    ("within_guarantee: missing usage is 0, beyond", within_guarantee, ({"gpu": 2 + 2 * TOL}, A, {}), False),
    ("fits: room and cap", fits, ({"gpu": 1}, CAPPED, {"gpu": 2}, {"gpu": 1}, {}), True),
    ("fits: room but not the cap", fits, ({"gpu": 2}, CAPPED, {"gpu": 2}, {"gpu": 2}, {}), False),
    ("fits: the cap but not room", fits, ({"gpu": 1}, CAPPED, {"gpu": 2}, {"gpu": 0.5}, {}), False),
]


@pytest.mark.parametrize(("case", "function", "args", "want"), DEFINITIONS, ids=[c[0] for c in DEFINITIONS])
def test_definitions_with_missing_keys(case, function, args, want):
    assert function(*args) is want


def test_borrowing_exactly_the_tolerance_is_reported_as_nothing():
    out = plan(state(1, [team("a", TOL), team("b", 0.5)], [run("x", "a", 2 * TOL)]))
    assert out["teams"]["a"]["borrowed"] == {"gpu": 0}


def test_integral_amounts_are_reported_as_integers_below_2_to_the_53():
    # 0.5 + 0.5 and 200.0 are whole numbers: JSON integers. 2**53 and above are left as
    # written (a float), as is a fraction.
    big = float(2**53)
    s = state({"gpu": 300.0, "cpu": big}, [team("a", guarantee={"gpu": 200.0, "cpu": big})], [
        run("x", "a", demand={"gpu": 0.5}), run("y", "a", demand={"gpu": 0.5, "cpu": 0.25}),
    ])
    report = plan(s)["teams"]["a"]
    assert report["usage"] == {"gpu": 1, "cpu": 0.25} and type(report["usage"]["gpu"]) is int
    assert type(report["guarantee"]["gpu"]) is int and report["guarantee"]["gpu"] == 200
    assert type(report["guarantee"]["cpu"]) is float and report["guarantee"]["cpu"] == big
