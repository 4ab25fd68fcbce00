"""The reclaim planner: which running jobs to stop so that a team gets back what it lent.

This module implements the rules of ``docs/reclaim-planner.md`` and is the *only*
implementation of it: the reclaim Lambda, the ``gpu-share reclaim plan`` command and
the what-if simulator all call it. It is pure Python (standard library only).

Entry points
------------
* :func:`plan` -- validate a JSON-like state and return the plan (a JSON-like dict).
* :func:`parse_state` / :func:`plan_state` -- the same in two steps, so that a caller
  that builds :class:`State` objects itself (the simulator) skips JSON validation.
* :func:`borrow_cap`, :func:`fits`, :func:`within_guarantee`, :func:`free_of`,
  :func:`reserved_idle_of` and :data:`TOLERANCE` -- the planner's documented definitions, for
  callers (the simulator's dispatch) that must apply the same rules.

Definitions (per resource ``r``; all comparisons use an absolute tolerance of 1e-9)
----------------------------------------------------------------------------------
* ``U(t)`` usage of team ``t`` (its running, non-terminating jobs, as the plan stands),
  ``G(t)`` its guarantee, ``B(t) = max(0, U - G)`` what it borrows.
* ``C(t)`` the borrow cap (:func:`borrow_cap`), ``F`` the free capacity
  (:func:`free_of`), ``RI(t)`` the idle guarantee of the *other* ``reserve`` teams
  (:func:`reserved_idle_of`), never lent.
* A pending job fits (:func:`fits`) when, in every resource it needs, its demand is at
  most ``F - RI(T)`` and any borrowing it causes stays within ``C(T)``.

Implementation notes
--------------------
:func:`plan_state` is one :class:`PlanState` (the plan as it stands, changed only by
its ``take``, ``give_back`` and ``serve``) and one function per rule. Running jobs are
sorted once in victim order (:func:`victim_sort`: by default lower priority, then most
recent ``since``, then id descending; with ``victim_order: checkpoint`` the runs started
on borrowed capacity first, then the least lost work); each team keeps its unprotected jobs in that order, in one list and in
one list per resource the job uses. Usage, free capacity (from :func:`free_of`) and
the set of borrowing teams per resource are updated incrementally; reserved idle
capacity comes from :func:`reserved_idle_of`, cached until a reserve team's usage
changes.
A reclaim (2b, and the second phase of 2c) merges only the lists (V, r) of the teams V
that borrow in a resource r the beneficiary lacks: eligibility can only be lost during
one greedy pass, never gained, so a list that stops qualifying is dropped for the
pass. Two exact-or-conservative shortcuts skip passes that cannot succeed (taking
every candidate would not make room; in 2c, stopping every own candidate would leave
the job beyond its guarantee and still not fitting). Initial and reported usages are
exact sums (:func:`math.fsum`), so the plan does not depend on the order of the input
lists. ``benchmarks/planner.py`` measures it (10,000 running jobs: tens of ms).

Rule 2 visits every pending job, but most must wait, and a job that must wait changes
nothing: its standing (fits, may stop jobs, must wait) depends on U, its team and its
demand only, so it is asked once per (team, demand) until U next changes. A caller
that keeps its pending jobs as :class:`PendingGroup` objects (the simulator, which
plans every poll interval) lets rule 2 pass over a group that must wait as a whole:
a plan then costs in the running jobs and the groups, not in the length of the queue.
"""

from __future__ import annotations

import bisect
import heapq
import math

from cdk_gpu_share.core.policy.reclaim_state import (
    _BOUND_SLACK,
    DEFAULT_MAX_CHECKPOINT_SECONDS,
    FITS,
    JOB_STATES,
    MUST_WAIT,
    REASONS,
    SHARING_VALUES,
    TOLERANCE,
    VICTIM_ORDERS,
    JobSpec,
    PendingGroup,
    RunningJobs,
    Settings,
    State,
    TeamSpec,
    borrow_cap,
    fits,
    free_of,
    has_room,
    parse_state,
    pending_key,
    reserved_idle_of,
    within_cap,
    within_guarantee,
)
from cdk_gpu_share.core.policy.reclaim_view import (
    PlanState,
    borrowed_at_start,
    lost_work,
    victim_sort,
)

__all__ = [
    "TOLERANCE",
    "SHARING_VALUES",
    "JOB_STATES",
    "REASONS",
    "VICTIM_ORDERS",
    "DEFAULT_MAX_CHECKPOINT_SECONDS",
    "Settings",
    "TeamSpec",
    "JobSpec",
    "State",
    "plan",
    "parse_state",
    "plan_state",
    "borrow_cap",
    "fits",
    "has_room",
    "within_cap",
    "within_guarantee",
    "free_of",
    "reserved_idle_of",
    "lost_work",
    "borrowed_at_start",
    "victim_sort",
    "PlanState",
    "PendingGroup",
    "RunningJobs",
    "has_waited",
    "pending_key",
]

# Whether serve_one remembers that rule 2b found no victim for a (team, demand) until U changes;
# False only to check that remembering changes no plan.
REMEMBER_NO_RECLAIM = True


# ---------------------------------------------------------------------------
# The planner


def plan(state: object) -> dict:
    """Validate ``state`` (the input of ``gpu-share reclaim plan``) and return the plan.

    Raises :class:`ConfigError` on invalid input. The same input always gives the
    same output, byte for byte under ``json.dumps``.
    """
    return plan_state(parse_state(state))


def _num(value: float) -> float | int:
    """A JSON number: integral floats become ints, -0.0 becomes 0."""
    if type(value) is float and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def plan_state(state: State, *, full: bool = True) -> dict:
    """Plan for an already valid :class:`State` (no validation).

    :param full: the whole plan. Default: True. False gives ``preemptions`` only,
        what the simulator reads (without the lists of served and waiting jobs and
        the ``teams`` report, each as long as the queue).

    The planner's documented rules, in order, each one function over one
    :class:`PlanState`: :func:`enforce_borrow_caps` (rule 1), :func:`serve_pending`
    (rule 2, with :func:`pending_order`, :func:`has_waited` and
    :func:`choose_victims`), then :func:`report`.
    """
    ps = PlanState(state)
    preemptions: list[dict] = []
    enforce_borrow_caps(ps, preemptions)
    served, waiting = serve_pending(ps, preemptions, waiting=full)
    if not full:
        return {"preemptions": preemptions}
    return {"preemptions": preemptions, "served": [p.id for p in served], "waiting": waiting,
            "teams": report(ps, served)}


# ---------------------------------------------------------------------------
# The rules, one function each


def enforce_borrow_caps(ps: PlanState, preemptions: list) -> None:
    """Rule 1: each team (name order) whose B exceeds C loses unprotected jobs, in
    victim order, with demand where B still exceeds C; then the ones not needed
    are put back, walking backwards (only if B <= C was reached)."""
    teams = ps.teams
    for ti in ps.capped:  # name order; a team without a cap never exceeds it
        if not ps.exceeding(ti):
            continue
        taken: list[int] = []
        for j in ps.own_victims(ti):
            exceeding = ps.exceeding(ti)
            if not exceeding:
                break
            demand = ps.r_demand[j]
            if any(demand.get(r, 0) > TOLERANCE for r in exceeding):
                ps.take(j)
                taken.append(j)
        if not ps.exceeding(ti):
            for k in range(len(taken) - 1, -1, -1):
                j = taken[k]
                ps.give_back(j)
                if ps.exceeding(ti):
                    ps.take(j)
                else:
                    del taken[k]
        name = teams[ti].name
        for j in taken:
            preemptions.append({"job": ps.r_id[j], "team": name, "reason": "borrow_limit"})
    if ps.tree is not None:
        ps.tree.enforce_group_caps(preemptions)


def group_order(ps: PlanState) -> tuple[list, list]:
    """:func:`pending_order` for :attr:`State.pending_groups`: the groups within their
    team's guarantee when rule 2 starts, and the rest (each group is one team and
    one demand, so it lies wholly in one of the two)."""
    first: list[PendingGroup] = []
    rest: list[PendingGroup] = []
    t_index = ps.t_index
    if ps.tree is not None:
        classes = ps.tree.classes([(t_index[g.team], g.demand, g) for g in ps.groups])
        return tuple(classes)  # type: ignore[return-value]
    for g in ps.groups:
        (first if ps.within_guarantee(t_index[g.team], g.demand) else rest).append(g)
    return first, rest


def merged(parts: tuple[list, list]) -> list:
    """The jobs of :func:`group_order`'s two parts, in rule 2's order (the (key, job) pairs
    compare by key alone: keys end in the job id, so no two are equal)."""
    return [p for part in parts for _, p in heapq.merge(*(zip(g.keys, g.jobs) for g in part))]


def pending_order(ps: PlanState) -> list:
    """Rule 2's order: the pending jobs within their team's guarantee when rule 2
    starts, then the rest; in each group priority descending, since, id
    (:func:`pending_key`). For the jobs of ``jobs``; :func:`group_order` and
    :func:`merged` give the same order for :attr:`State.pending_groups`."""
    first: list[JobSpec] = []
    rest: list[JobSpec] = []
    t_index = ps.t_index
    if ps.tree is not None:
        classes = ps.tree.classes([(t_index[p.team], p.demand, p) for p in ps.pending])
        return [p for part in classes for p in sorted(part, key=pending_key)]
    # Whether a job is within its guarantee depends on its team and demand only (U
    # does not change here), and pending jobs of a team often share one demand dict
    # (the simulator's do): one answer per (team, demand), keyed by the demand's
    # identity (each id is unique while ps.pending holds its dict).
    within: dict = {}
    for p in ps.pending:
        key = (p.team, id(p.demand))
        w = within.get(key)
        if w is None:
            w = within[key] = ps.within_guarantee(t_index[p.team], p.demand)
        (first if w else rest).append(p)
    first.sort(key=pending_key)
    rest.sort(key=pending_key)
    return first + rest


def has_waited(p: JobSpec, now: float, settings: Settings) -> bool:
    """Whether pending job p has waited: age = max(0, now - since) >= reclaim_after_seconds."""
    age = now - p.since
    if age < 0:
        age = 0
    return settings.reclaim_after_seconds <= age + TOLERANCE


def own_phase_hopeless(ps: PlanState, ti: int, demand: dict, gain: dict) -> bool:
    """Shortcut for rule 2c: True when p cannot fit even with every one of its own
    team's candidates stopped and, then still beyond its guarantee, may reclaim
    nothing from the others. (Own candidates only lower U(T) and raise F, and RI(T)
    does not depend on T's usage, so "all taken" is the best the phase can do.)"""
    if ps.tree is not None:
        return False  # entitled at a group after the own phase: reclaiming may still help
    tol = TOLERANCE
    needed = [(r, d) for r, d in demand.items() if d > tol]
    u, g, caps = ps.U[ti], ps.G[ti], ps.CAP[ti]
    if all(u[r] - gain[r] + d <= g[r] + tol for r, d in needed):
        return False  # within its guarantee then: reclaiming from others may help
    ri = ps.reserved_idle(ti)
    F = ps.F
    slack = tol + _BOUND_SLACK
    for r, d in needed:
        if d > F[r] - ri.get(r, 0) + gain[r] + slack:
            return True
        over = u[r] - gain[r] + d - g[r]
        if caps[r] is not None and over > caps[r] + slack:
            return True
    return False


def choose_victims(ps: PlanState, ti: int, p: JobSpec, own: bool) -> list[int] | None:
    """Rules 2b (own=False) and 2c (own=True): the victims for p, or None.

    Greedy: take candidates in order until p fits (none: give every one back);
    then walk them backwards and give back each one without which p still fits."""
    demand = p.demand
    taken: list[int] = []
    done = False
    if own:
        own_jobs, gain = ps.own_candidates(ti, p.priority)
        if own_phase_hopeless(ps, ti, demand, gain):
            return None
        for j in own_jobs:
            ps.take(j)
            taken.append(j)
            if ps.fits(ti, demand):
                done = True
                break
    if not done and ps.entitled(ti, demand):
        for j in ps.others_in_victim_order(ti, demand):
            ps.take(j)
            taken.append(j)
            if ps.fits(ti, demand):
                done = True
                break
    if not done:
        for j in reversed(taken):
            ps.give_back(j)
        return None
    for k in range(len(taken) - 1, -1, -1):
        j = taken[k]
        ps.give_back(j)
        if ps.fits(ti, demand):
            del taken[k]
        else:
            ps.take(j)
    return taken


def serve_pending(ps: PlanState, preemptions: list, *, waiting: bool) -> tuple[list, list | None]:
    """Rule 2: each pending job in :func:`pending_order` fits (2a), or, having
    waited, reclaims (2b) or stops its own team's lower-priority jobs (2c), or waits
    (:func:`serve_one`). Returns the served jobs and the ids of the waiting ones (None
    unless ``waiting``), each in that order.

    A job that must wait (:meth:`PlanState.standing`) changes nothing, and neither
    does the next job of its team and demand until U changes: the standing is asked
    once per (team, demand) until then, and groups of such jobs
    (:attr:`State.pending_groups`) are passed over as a whole (:func:`serve_groups`).
    """
    if ps.groups:
        parts = group_order(ps)
        served = serve_groups(ps, parts, preemptions)
        if not waiting:
            return served, None
        done = {id(p) for p in served}
        return served, [p.id for p in merged(parts) if id(p) not in done]
    served = []
    left: list[str] = []
    t_index = ps.t_index
    standing: dict = {}  # (team, id(demand)) -> ps.standing, as in pending_order
    seen = ps.changes
    for p in pending_order(ps):
        demand = p.demand
        if ps.changes != seen:
            standing.clear()
            seen = ps.changes
        key = (p.team, id(demand))
        st = standing.get(key)
        if st is None:
            st = standing[key] = ps.standing(t_index[p.team], demand)
        if st != MUST_WAIT and serve_one(ps, t_index[p.team], p, st, preemptions):
            served.append(p)
        else:
            left.append(p.id)
    return served, (left if waiting else None)


def serve_groups(ps: PlanState, parts: tuple[list, list], preemptions: list) -> list[JobSpec]:
    """:func:`serve_pending` over :attr:`State.pending_groups`, in :func:`group_order`'s
    two ``parts``.

    The groups' jobs are merged in rule 2's order (a heap of each group's next job).
    A group whose standing is MUST_WAIT leaves the heap ("parked"): its jobs reached
    while U stays the same all wait. When U changes, every parked group comes back
    at its first job after the last one reached, and standings are asked anew.
    Bringing groups back costs at most as much as visiting every job of the part:
    beyond that, a group that must wait stays in the heap and its jobs are passed
    one by one, as in the flat walk.
    """
    served: list[JobSpec] = []
    t_index = ps.t_index
    for part in parts:
        heap = [(g.keys[0], k, 0) for k, g in enumerate(part) if g.keys]
        heapq.heapify(heap)
        parked: list[int] = []
        standing: dict = {}  # group index -> ps.standing while U stays the same
        seen = ps.changes
        last = None
        budget = sum(len(g.keys) for g in part)  # groups that may still come back
        while True:
            if ps.changes != seen:
                standing.clear()
                seen = ps.changes
                budget -= len(parked)
                for k in parked:
                    keys = part[k].keys
                    pos = bisect.bisect_right(keys, last)
                    if pos < len(keys):
                        heapq.heappush(heap, (keys[pos], k, pos))
                parked.clear()
            if not heap:
                break
            last, k, pos = heapq.heappop(heap)
            g = part[k]
            st = standing.get(k)
            if st is None:
                st = standing[k] = ps.standing(t_index[g.team], g.demand)
            if st == MUST_WAIT and budget > 0:
                parked.append(k)
                continue
            p = g.jobs[pos]
            if st != MUST_WAIT and serve_one(ps, t_index[g.team], p, st, preemptions):
                served.append(p)
            pos += 1
            if pos < len(g.keys):
                heapq.heappush(heap, (g.keys[pos], k, pos))
    return served


def serve_one(ps: PlanState, ti: int, p: JobSpec, st: int, preemptions: list) -> bool:
    """Rule 2 for pending job p of team ti, whose standing (:meth:`PlanState.standing`)
    is FITS or MAY_STOP: whether it is served (2a; or, having waited, 2b, then 2c),
    with its victims added to ``preemptions``."""
    demand = p.demand
    if st == FITS:
        victims: list[int] | None = []
    else:
        if not has_waited(p, ps.now, ps.settings):
            return False
        victims = None
        key = (ti, id(demand))
        before = ps.changes
        if ps.no_reclaim.get(key) != before:
            if ps.entitled(ti, demand):
                victims = choose_victims(ps, ti, p, own=False)
            if victims is None and ps.changes == before and REMEMBER_NO_RECLAIM:
                # No victim and nothing taken on the way: rule 2b reads only U (ps.changes),
                # the team and the demand, so it finds none for the next job of this team and
                # demand either until U changes.
                ps.no_reclaim[key] = before
        if victims is None and ps.teams[ti].in_team_preemption:
            victims = choose_victims(ps, ti, p, own=True)
        if victims is None:
            return False
    teams = ps.teams
    for j in victims:  # type: ignore[union-attr]  # None returned above
        vt = ps.r_team[j]
        preemptions.append({
            "job": ps.r_id[j],
            "team": teams[vt].name,
            "reason": "in_team" if vt == ti else "reclaim",
            "beneficiary": p.id,
        })
    ps.serve(ti, demand)
    return True


def report(ps: PlanState, served: list[JobSpec]) -> dict:
    """Usage, guarantee, borrowed and borrow cap after the plan, for every team (by
    name) and every resource. Exact sums: fsum is exact, so adding the negated
    victims gives the sum of the others."""
    tol = TOLERANCE
    resources, sums, G, CAP = ps.resources, ps.sums, ps.G, ps.CAP
    for j in range(ps.n_running):
        if ps.chosen[j]:
            acc = sums[ps.r_team[j]]
            for r, d in ps.r_demand[j].items():
                if d:
                    acc[r].append(-d)
    for p in served:
        acc = sums[ps.t_index[p.team]]
        for r, d in p.demand.items():
            if d:
                acc[r].append(d)
    out = {}
    teams = ps.teams
    for ti in sorted(range(ps.nt), key=lambda i: teams[i].name):
        usage = {r: math.fsum(sums[ti][r]) for r in resources}
        borrowed = {}
        for r in resources:
            b = usage[r] - G[ti][r]
            borrowed[r] = _num(b) if b > tol else 0
        out[teams[ti].name] = {
            "usage": {r: _num(usage[r]) for r in resources},
            "guarantee": {r: _num(G[ti][r]) for r in resources},
            "borrowed": borrowed,
            "borrow_cap": {r: (None if CAP[ti][r] is None else _num(CAP[ti][r])) for r in resources},
        }
    return out
