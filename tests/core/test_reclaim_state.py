"""The planner's definitions and its state object (docs/reclaim-planner.md).

* ``reserved_idle_of`` and ``free_of``, the contract's RI and F, table by table; the
  planner computes both through them (no second copy), so the reserve scenarios
  below fail if either rule changes.
* ``has_waited`` at the boundary of ``reclaim_after_seconds`` and of the tolerance.
* :class:`~cdk_gpu_share.core.policy.reclaim.PlanState`: after any sequence of takes and
  give-backs, every quantity it keeps incrementally (U, F, RI, the borrowing teams,
  what each team could still give back) equals the same quantity recomputed from
  scratch. Some of this bookkeeping only feeds conservative shortcuts (an overstated
  "could give back" costs time, never a decision), so plans alone cannot observe all
  of it; the state can.
* Scenarios where that bookkeeping decides a later choice: a team dropping back
  within its guarantee mid-plan, a victim put back and needed by the next job.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdk_gpu_share.core.policy import reclaim
from cdk_gpu_share.core.policy.reclaim import (
    JobSpec,
    PlanState,
    Settings,
    TeamSpec,
    free_of,
    has_waited,
    plan,
    reserved_idle_of,
)

# The scenario builders are the planner tests' own (one way of writing a state).
from tests.builders import NOW, examples, pend, run, state, states, team

TOL = reclaim.TOLERANCE
def chosen(out):
    return [(p["job"], p.get("beneficiary")) for p in out["preemptions"]]


# ---------------------------------------------------------------------------
# RI: reserved_idle_of

RES = TeamSpec("res", {"gpu": 4, "cpu": 32}, sharing="reserve")
RES2 = TeamSpec("res2", {"gpu": 2}, sharing="reserve")
LEND = TeamSpec("lend", {"gpu": 4}, sharing="lend")
BORROW = TeamSpec("borrow", {"gpu": 4})

RESERVED_IDLE = [
    # (case, team asking, teams, usage by team, RI)
    ("a reserve team's idle guarantee is reserved for the others", "borrow", [RES, BORROW],
     {"res": {"gpu": 1, "cpu": 8}}, {"gpu": 3, "cpu": 24}),
    ("not for itself", "res", [RES, BORROW], {"res": {"gpu": 1}}, {}),
    ("idle is never negative: a reserve team above its guarantee reserves nothing", "borrow", [RES, BORROW],
     {"res": {"gpu": 5, "cpu": 40}}, {}),
    ("per resource: fully used gpu, idle cpu", "borrow", [RES, BORROW], {"res": {"gpu": 4, "cpu": 2}}, {"cpu": 30}),
    ("a lend team's idle guarantee is lent, not reserved", "borrow", [LEND, BORROW], {}, {}),
    ("no usage given counts as 0: the whole guarantee is idle", "borrow", [RES], {}, {"gpu": 4, "cpu": 32}),
    ("two reserve teams add up", "borrow", [RES, RES2, BORROW], {"res": {"gpu": 1}}, {"gpu": 5, "cpu": 32}),
    ("a reserve team sees the other reserve team's idle only", "res2", [RES, RES2], {"res": {"gpu": 1}},
     {"gpu": 3, "cpu": 32}),
]


@pytest.mark.parametrize(("case", "name", "teams", "usage", "want"), RESERVED_IDLE, ids=[c[0] for c in RESERVED_IDLE])
def test_reserved_idle_of(case, name, teams, usage, want):
    assert reserved_idle_of(name, teams, usage) == pytest.approx(want)
    assert set(reserved_idle_of(name, teams, usage)) == set(want)


# ---------------------------------------------------------------------------
# F: free_of

FREE = [
    ("capacity minus every team's usage", {"gpu": 8, "cpu": 64}, {"a": {"gpu": 2}, "b": {"gpu": 1.5, "cpu": 8}},
     {"gpu": 4.5, "cpu": 56}),
    ("a resource nobody uses is all free", {"gpu": 8, "mem": 100}, {"a": {"gpu": 8}}, {"gpu": 0, "mem": 100}),
    ("no teams: the whole capacity", {"gpu": 3}, {}, {"gpu": 3}),
    ("over-committed capacity is negative, not clamped", {"gpu": 2}, {"a": {"gpu": 3}}, {"gpu": -1}),
]


@pytest.mark.parametrize(("case", "capacity", "usage", "want"), FREE, ids=[c[0] for c in FREE])
def test_free_of(case, capacity, usage, want):
    assert free_of(capacity, usage) == pytest.approx(want, abs=0)


def test_free_of_sums_exactly():
    # Ten teams of 0.1 GPU fill a 1-GPU pool exactly: a plain float sum would leave
    # 1.1e-16 free, fsum leaves nothing.
    assert free_of({"gpu": 1}, {f"t{i}": {"gpu": 0.1} for i in range(10)}) == {"gpu": 0.0}


# The planner gets RI and F from these two functions: these plans depend on them.

def test_reserve_idle_decides_the_plan():
    # res (reserve, 2 of 4 GPUs) is idle: b's second job would need res's idle guarantee.
    s = state(4, [team("res", 2, sharing="reserve"), team("b", 2)],
              [run("b1", "b"), run("b2", "b"), pend("b3", "b"), pend("r1", "res")])
    out = plan(s)
    assert out["served"] == ["r1"] and out["waiting"] == ["b3"]


def test_reserve_team_with_a_job_running_reserves_only_the_rest():
    s = state(4, [team("res", 2, sharing="reserve"), team("b", 1)],
              [run("r1", "res"), run("b1", "b"), pend("b2", "b"), pend("b3", "b")])
    out = plan(s)
    assert out["served"] == ["b2"] and out["waiting"] == ["b3"]


def test_a_state_with_pending_jobs_in_jobs_and_in_groups_is_refused():
    import dataclasses

    from tests.builders import grouped

    raw = state(2, [team("a", 1)], [run("r1", "a", terminating=True), pend("p1", "a"), pend("p2", "a", 2)])
    parsed = reclaim.parse_state(raw)
    as_groups = grouped(parsed)
    # The terminating job stays in jobs beside the groups: it is not pending.
    assert [j.id for j in as_groups.jobs] == ["r1"]
    assert reclaim.plan_state(as_groups) == plan(raw)
    both = dataclasses.replace(as_groups, jobs=parsed.jobs)
    with pytest.raises(ValueError, match=r"^a State holds its pending jobs in jobs or in pending_groups, not in both$"):
        PlanState(both)


def test_plan_state_starts_from_free_of():
    # 0.1 GPU jobs filling the pool exactly: one more 1e-9-small job still fits
    # (within the tolerance), a 1e-3 one does not.
    jobs = [run(f"r{i}", "a", 0.1) for i in range(10)]
    out = plan(state(1, [team("a", 1)], jobs + [pend("p1", "a", 1e-9), pend("p2", "a", 1e-3)]))
    assert out["served"] == ["p1"] and out["waiting"] == ["p2"]


# ---------------------------------------------------------------------------
# Waited: age >= reclaim_after_seconds, within the tolerance

WAITED = [
    # (case, reclaim_after_seconds, since, waited)
    ("exactly reclaim_after_seconds", 60, NOW - 60, True),
    ("half a second short", 60, NOW - 59.5, False),
    ("longer", 60, NOW - 61, True),
    ("0 s with reclaim_after 1e-9: equal within the tolerance", 1e-9, NOW, True),
    ("0 s with reclaim_after 3e-9: beyond the tolerance", 3e-9, NOW, False),
    ("a future since is age 0, not negative", 0, NOW + 50, True),
    ("a future since has not waited 1 s", 1, NOW + 50, False),
]


@pytest.mark.parametrize(("case", "after", "since", "waited"), WAITED, ids=[c[0] for c in WAITED])
def test_has_waited(case, after, since, waited):
    p = JobSpec("p", "a", "pending", {"gpu": 1}, since=since)
    assert has_waited(p, NOW, Settings(reclaim_after_seconds=after)) is waited


@pytest.mark.parametrize(("case", "after", "since", "waited"), WAITED, ids=[c[0] for c in WAITED])
def test_only_a_job_that_has_waited_reclaims(case, after, since, waited):
    s = state(2, [team("a", 1), team("b", 1)], [run("b1", "b"), run("b2", "b"), pend("a1", "a", since=since)],
              reclaim_after_seconds=after)
    out = plan(s)
    assert chosen(out) == ([("b2", "a1")] if waited else [])
    assert out["served" if waited else "waiting"] == ["a1"]


@pytest.mark.parametrize(("case", "after", "since", "waited"), WAITED, ids=[c[0] for c in WAITED])
def test_only_a_job_that_has_waited_stops_its_own_team(case, after, since, waited):
    s = state(2, [team("a", 2, in_team_preemption=True)],
              [run("a1", "a", priority=0), run("a2", "a", priority=0), pend("hi", "a", since=since, priority=5)],
              reclaim_after_seconds=after)
    out = plan(s)
    assert chosen(out) == ([("a2", "hi")] if waited else [])


# ---------------------------------------------------------------------------
# The state object's bookkeeping against a recomputation from scratch


def _check_bookkeeping(ps: PlanState) -> None:
    resources = ps.resources
    for ti, t in enumerate(ps.teams):
        for r in resources:
            want = math.fsum(ps.r_demand[j].get(r, 0) for j in range(ps.n_running)
                             if ps.r_team[j] == ti and not ps.chosen[j])
            assert ps.U[ti][r] == pytest.approx(want, abs=1e-9), (t.name, r, "U")
            borrows = ps.U[ti][r] - ps.G[ti][r] > TOL
            assert (ti in ps.borrowers[r]) is borrows, (t.name, r, "borrowers")
        if ps.avail[ti] is not None:
            for r in resources:
                want = math.fsum(ps.r_demand[j].get(r, 0) for j in ps.own_victims(ti) if not ps.chosen[j])
                assert ps.avail[ti][r] == pytest.approx(want, abs=1e-9), (t.name, r, "avail")
        usage = {x.name: ps.U[k] for k, x in enumerate(ps.teams)}
        ri = reserved_idle_of(t.name, ps.teams, usage)
        got = ps.reserved_idle(ti)
        for r in resources:
            assert got.get(r, 0) == pytest.approx(ri.get(r, 0), abs=1e-9), (t.name, r, "RI")
    want_f = free_of(ps.capacity, {x.name: ps.U[k] for k, x in enumerate(ps.teams)})
    for r in resources:
        assert ps.F[r] == pytest.approx(want_f[r], abs=1e-9), (r, "F")


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(states(), st.randoms(use_true_random=False))
def test_take_and_give_back_keep_every_quantity_consistent(raw, rnd: random.Random):
    ps = PlanState(reclaim.parse_state(raw))
    for ti in range(ps.nt):
        ps.avail_of(ti)  # from now on kept up to date by take and give_back
    candidates = [j for ti in range(ps.nt) for j in ps.own_victims(ti)]
    _check_bookkeeping(ps)
    for _ in range(3 * len(candidates)):
        j = rnd.choice(candidates)
        if ps.chosen[j]:
            ps.give_back(j)
        else:
            ps.take(j)
        _check_bookkeeping(ps)


def test_a_team_dropping_back_within_its_guarantee_stops_being_a_borrower():
    s = reclaim.parse_state(state(4, [team("a", 1), team("b", 3)], [run("a1", "a"), run("a2", "a"), pend("p", "b")]))
    ps = PlanState(s)
    a2 = ps.r_id.index("a2")
    assert ps.borrowers["gpu"] == {0}
    ps.take(a2)  # a is back at its guarantee
    assert ps.borrowers["gpu"] == set()
    ps.give_back(a2)
    assert ps.borrowers["gpu"] == {0}


def test_what_a_team_could_give_back_follows_take_and_give_back():
    s = reclaim.parse_state(state(4, [team("a", 1), team("b", 3)],
                                  [run("a1", "a"), run("a2", "a", 2), pend("p", "b")]))
    ps = PlanState(s)
    a1, a2 = ps.r_id.index("a1"), ps.r_id.index("a2")  # job numbers follow victim order
    assert ps.avail_of(0) == {"gpu": 3}
    ps.take(a2)
    assert ps.avail_of(0) == {"gpu": 1}
    ps.take(a1)
    assert ps.avail_of(0) == {"gpu": 0}
    ps.give_back(a2)
    assert ps.avail_of(0) == {"gpu": 2}


# What a team could give back, first asked after other steps of the plan: a fresh
# team without protected jobs gives back its U as summed (no second sum), every
# other case sums its unchosen unprotected jobs. Team a runs a1 (1 GPU, since 0)
# and a2 (2 GPUs, since NOW - 10); a serve adds 1 GPU of a pending job to U(a).
AVAIL_FIRST_ASKED = [
    # (case, min_runtime_seconds, steps before avail_of(a) is first asked, want)
    ("a fresh team: all its usage", 0, [], 3),
    ("after a pending job of the team is served: not the served job", 0, [("serve",)], 3),
    ("after one of its jobs is taken: not that job", 0, [("take", "a2")], 1),
    ("after a take and its give-back: every job again", 0, [("take", "a2"), ("give_back", "a2")], 3),
    ("with a2 protected (age 10 < 60): only a1", 60, [], 1),
    ("with a2 protected, after a serve", 60, [("serve",)], 1),
]


@pytest.mark.parametrize("case,min_runtime,steps,want", AVAIL_FIRST_ASKED, ids=[c[0] for c in AVAIL_FIRST_ASKED])
def test_what_a_team_could_give_back_when_first_asked(case, min_runtime, steps, want):
    s = reclaim.parse_state(state(6, [team("a", 1), team("b", 3)],
                                  [run("a1", "a"), run("a2", "a", 2, since=NOW - 10), pend("p", "b")],
                                  min_runtime_seconds=min_runtime))
    ps = PlanState(s)
    for step in steps:
        if step[0] == "serve":
            ps.serve(0, {"gpu": 1})
        else:
            getattr(ps, step[0])(ps.r_id.index(step[1]))
    assert ps.avail_of(0) == {"gpu": want}


def test_only_teams_with_a_borrow_cap_are_checked_for_rule_1_in_name_order():
    s = reclaim.parse_state(state(8, [
        team("c", 2, borrow_limit={"gpu": 1}), team("a", 2, borrow_limit_percent=50),
        team("d", 2), team("b", 2, sharing="lend")], []))
    # c: capped by its limit, a by its percent; d borrows unbounded (the default); b
    # lends only (cap 0).
    assert [s.teams[i].name for i in PlanState(s).capped] == ["a", "b", "c"]


# ---------------------------------------------------------------------------
# Scenarios where the bookkeeping decides a later choice

BOOKKEEPING_SCENARIOS = [
    # (case, state, preemptions as (victim, beneficiary), served, waiting)
    (
        # a and b both borrow 1; a's jobs come first in victim order. c1 takes a3 and
        # a drops back within its guarantee: for c2 only b borrows, so b3 goes, not a2.
        "a team dropping back within its guarantee is no longer reclaimed from",
        state(6, [team("a", 2), team("b", 2), team("c", 2)], [
            run("a1", "a", since=50), run("a2", "a", since=60), run("a3", "a", since=70),
            run("b1", "b", since=10), run("b2", "b", since=20), run("b3", "b", since=30),
            pend("c1", "c", since=1), pend("c2", "c", since=2),
        ]),
        [("a3", "c1"), ("b3", "c2")], ["c1", "c2"], [],
    ),
    (
        # a1 needs 2: v1 (1) then v2 (2) are taken, v1 is put back as not needed. b1
        # needs 2 more: what v could still give back (v1 + v3) must count v1 again.
        "a victim put back is there for the next job",
        state(4, [team("v", 0), team("a", 2), team("b", 2)], [
            run("v1", "v", 1, since=30), run("v2", "v", 2, since=20), run("v3", "v", 1, since=10),
            pend("a1", "a", 2, since=1), pend("b1", "b", 2, since=2),
        ]),
        [("v2", "a1"), ("v1", "b1"), ("v3", "b1")], ["a1", "b1"], [],
    ),
    (
        # In-team: hi stops a's own low-priority job and so gets back within its
        # guarantee; then it may reclaim from b, which still borrows.
        "stopping its own job brings a team back within its guarantee, then it reclaims",
        state(3, [team("a", 2, in_team_preemption=True), team("b", 1)], [
            run("a-low", "a", 1, priority=0, since=5), run("b1", "b", since=10), run("b2", "b", since=20),
            pend("hi", "a", 2, priority=5, since=1),
        ]),
        [("a-low", "hi"), ("b2", "hi")], ["hi"], [],
    ),
]


@pytest.mark.parametrize(("case", "s", "pre", "served", "waiting"), BOOKKEEPING_SCENARIOS,
                         ids=[c[0] for c in BOOKKEEPING_SCENARIOS])
def test_bookkeeping_scenarios(case, s, pre, served, waiting):
    out = plan(s)
    assert chosen(out) == pre
    assert out["served"] == served
    assert out["waiting"] == waiting


def test_a_teams_tuple_planned_again_with_other_resources_is_read_anew():
    # A plan keeps what it reads of a teams tuple for the next State with the same
    # tuple; another set of resources must not get the last one's G and C.
    teams = (reclaim.TeamSpec(name="a", guarantee={"gpu": 2, "mem": 4}, borrow_limit={"mem": 1}),
             reclaim.TeamSpec(name="b", guarantee={"gpu": 2}))
    settings = reclaim.Settings()
    one = PlanState(reclaim.State(now=0, capacity={"gpu": 4}, settings=settings, teams=teams, jobs=()))
    two = PlanState(reclaim.State(now=0, capacity={"gpu": 4, "mem": 8}, settings=settings, teams=teams, jobs=()))
    assert one.G == [{"gpu": 2}, {"gpu": 2}]
    assert two.G == [{"gpu": 2, "mem": 4}, {"gpu": 2, "mem": 0}]
    assert two.CAP[0] == {"gpu": None, "mem": 1}
    other = tuple(reclaim.TeamSpec(name=t.name, guarantee={"gpu": 1}) for t in teams)
    three = PlanState(reclaim.State(now=0, capacity={"gpu": 4}, settings=settings, teams=other, jobs=()))
    assert three.G == [{"gpu": 1}, {"gpu": 1}]
