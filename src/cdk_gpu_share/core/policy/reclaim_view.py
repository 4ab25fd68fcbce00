"""The reclaim planner's working state: the teams, their usage and the running jobs indexed for
one planning pass (:class:`PlanState`), the view of the organisation's tree over it, and the
order in which running jobs are stopped (:func:`victim_sort`). The rules that use it are
:mod:`cdk_gpu_share.core.policy.reclaim`.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Iterator

from cdk_gpu_share.core.configuration import hierarchy
from cdk_gpu_share.core.policy.reclaim_state import (
    _BOUND_SLACK,
    _ID,
    _PRIORITY,
    _RESERVE,
    _SINCE,
    CHECKPOINT,
    DEFAULT_MAX_CHECKPOINT_SECONDS,
    FITS,
    MAY_STOP,
    MUST_WAIT,
    TOLERANCE,
    JobSpec,
    State,
    TeamSpec,
    borrow_cap,
    fits,
    free_of,
    reserved_idle_of,
    within_guarantee,
)

__all__ = ["PlanState", "borrowed_at_start", "lost_work", "victim_sort"]




def victim_sort(running: list, state: State) -> None:
    """Sort ``running`` (non-terminating running jobs) in the victim order of ``state``.

    ``youngest``: lower priority first, then the most recent ``since``, then id
    descending. ``checkpoint``: the jobs whose run started on borrowed capacity first,
    then the least lost work (:func:`lost_work`), then the most recent ``since``, then
    id descending; priority is not part of it. Stable sorts, last key first: one key of
    one type each lets CPython compare with its float, int and str fast paths.
    """
    running.sort(key=_ID, reverse=True)
    running.sort(key=_SINCE, reverse=True)
    if state.settings.victim_order != CHECKPOINT:
        running.sort(key=_PRIORITY)
        return
    now = state.now
    cap = state.settings.max_checkpoint_seconds
    team_checkpoint = {t.name: t.checkpoint_seconds for t in state.teams}
    running.sort(key=lambda job: lost_work(job, team_checkpoint.get(job.team), now, cap))
    derived: dict = {}
    if any(job.borrowed is None for job in running):
        derived = borrowed_at_start(running, state.teams)
    # Borrowed runs first: stopping a run that started within its team's guarantee
    # would make that team wait again for capacity it was promised.
    running.sort(key=lambda job: not (derived[job.id] if job.borrowed is None else job.borrowed))


def lost_work(job: JobSpec, team_checkpoint: float | None, now: float,
              cap: float = DEFAULT_MAX_CHECKPOINT_SECONDS) -> float:
    """W: the seconds of work a stop of running ``job`` at ``now`` throws away, as the
    checkpoint-aware order believes it.

    The job's age modulo its checkpoint interval c (its own, else ``team_checkpoint``;
    exact, :func:`math.fmod`), where an interval of 0 (never), none or above ``cap`` counts
    as ``cap``; then, when the job says when it last saved (``last_checkpoint``), the time
    since then if that is less. So W < ``cap`` always: declaring "never" or a week cannot
    make a run look more expensive to stop than one that saves every ``cap`` seconds, and a
    claimed checkpoint can only lower W.
    """
    age = max(0, now - job.since)
    interval = team_checkpoint if job.checkpoint_seconds is None else job.checkpoint_seconds
    if not interval or interval > cap:
        interval = cap
    w = math.fmod(age, interval)
    if job.last_checkpoint is not None:
        return min(w, max(0, now - max(job.since, job.last_checkpoint)))
    return w


def borrowed_at_start(running: Iterable[JobSpec], teams: Iterable[TeamSpec]) -> dict[str, bool]:
    """Job id -> whether its run started on borrowed capacity, derived from the state.

    A run borrowed when its demand and that of its team's running jobs started before
    it (smaller ``since``, then id) exceed the team's guarantee in some resource it
    needs: what its team held just before it started, if none of them has stopped
    since. ``running``: the running, non-terminating jobs. Callers that saw the start
    (the simulator) or recorded it (the reclaim Lambda) pass ``borrowed`` instead.
    """
    tol = TOLERANCE
    guarantee = {t.name: t.guarantee for t in teams}
    by_team: dict[str, list] = {}
    for job in running:
        by_team.setdefault(job.team, []).append(job)
    out: dict[str, bool] = {}
    for team, jobs in by_team.items():
        jobs.sort(key=lambda job: (job.since, job.id))
        g = guarantee.get(team, {})
        held: dict = {}
        for job in jobs:
            over = False
            for r, d in job.demand.items():
                if d:
                    total = held[r] = held.get(r, 0) + d
                    over = over or (d > tol and total > g.get(r, 0) + tol)
            out[job.id] = over
    return out


_last_team_table: list = [(None, None, None)]  # one (teams, resources, table), replaced whole


def _team_table(teams: tuple, resources: list) -> tuple:
    """What a plan reads of the teams and never changes: each name's index, G and C
    per team and resource, whether each team is ``reserve``, the reserve teams, and
    the indexes in name order of the teams with a borrow cap in some resource.

    Kept for the last ``teams`` tuple seen (a State's teams never change: frozen
    specs whose dicts nothing writes), so a caller that plans again and again with
    the same teams (the simulator, at every tick) builds it once. The entry is one
    tuple, read and replaced whole, so concurrent plans never mix two entries."""
    last_teams, last_resources, table = _last_team_table[0]
    if last_teams is teams and last_resources == resources:
        return table
    is_reserve = [t.sharing == _RESERVE for t in teams]
    caps = [{r: borrow_cap(t, r) for r in resources} for t in teams]
    table = (
        {t.name: i for i, t in enumerate(teams)},
        [{r: t.guarantee.get(r, 0) for r in resources} for t in teams],
        caps,
        is_reserve,
        [t for t, res in zip(teams, is_reserve) if res],
        [i for i in sorted(range(len(teams)), key=lambda i: teams[i].name)
         if any(c is not None for c in caps[i].values())],
    )
    _last_team_table[0] = (teams, list(resources), table)
    return table


def _index_running(nt: int, resources: list, r_team: list[int], r_demand: list[dict],
                   unprotected: list[bool] | None) -> tuple[list[dict], list[dict], list[list[int]]]:
    """The running jobs per team: the amounts per resource (kept for exact, fsum, sums); the
    unprotected jobs in victim order; per resource, those with demand in it (reclaim candidates)."""
    tol = TOLERANCE
    # (Loops, not nested comprehensions: on CPython 3.11 each comprehension runs
    # in a frame of its own, and a plan builds these for every team.)
    sums: list[dict] = []
    victims_in: list[dict] = []
    for _ in range(nt):
        team_sums: dict = {}
        team_lists: dict = {}
        for r in resources:
            team_sums[r] = []
            team_lists[r] = []
        sums.append(team_sums)
        victims_in.append(team_lists)
    victims_of: list[list[int]] = [[] for _ in range(nt)]
    if unprotected is None and len(resources) == 1:
        # One resource, no job protected (the simulator's plans): the same lists, one lookup a job.
        (r,) = resources
        amounts = [team_sums[r] for team_sums in sums]
        lists_in = [team_lists[r] for team_lists in victims_in]
        for j, ti, demand in zip(range(len(r_team)), r_team, r_demand):
            victims_of[ti].append(j)
            d = demand.get(r)
            if d:
                amounts[ti].append(d)
                if d > tol:
                    lists_in[ti].append(j)
        return sums, victims_in, victims_of
    for j in range(len(r_team)):
        ti = r_team[j]
        acc = sums[ti]
        free_to_take = unprotected is None or unprotected[j]
        if free_to_take:
            victims_of[ti].append(j)
            lists = victims_in[ti]
        for r, d in r_demand[j].items():
            if d:
                acc[r].append(d)
                if d > tol and free_to_take:
                    lists[r].append(j)
    return sums, victims_in, victims_of


def _usage(sums: list[dict], resources: list) -> list[dict]:
    """U per team: the exact (fsum) sum of its running amounts per resource."""
    U: list[dict] = []
    fsum = math.fsum
    for acc in sums:
        u = {}
        for r in resources:
            u[r] = fsum(acc[r])
        U.append(u)
    return U


class PlanState:
    """The plan as it stands: usage, free capacity, reserved idle capacity, the chosen
    victims, and the candidate lists, kept consistent by the planner's operations.

    Teams are numbered in input order (``ti``), running non-terminating jobs in victim
    order (``j``: lower numbers are taken first). The operations:

    * :meth:`take` a victim, :meth:`give_back` one (the only two changes of U);
    * :meth:`fits`, :meth:`within_guarantee`, :meth:`lacking` (the resources where a
      job lacks room), :meth:`exceeding` (the resources where a team's B exceeds C);
    * :meth:`reserved_idle` (RI, from :func:`reserved_idle_of`) and ``F`` (from
      :func:`free_of`, then moved by every take and give-back);
    * the candidate lists: :meth:`own_victims` (a team's unprotected jobs in victim
      order), :meth:`own_candidates` (those below a priority, with their summed
      demand) and :meth:`others_in_victim_order` (the other teams' jobs eligible for
      reclaim by a pending job, each checked when it is reached).

    Running jobs are numbered once in victim order; each team keeps its unprotected
    jobs in that order, in one list and one list per resource the job uses. The set of
    borrowing teams per resource and what each team could still give back
    (:meth:`avail_of`, for the "cannot succeed" shortcut) are kept up to date by
    take and give-back.
    """

    def __init__(self, state: State):
        tol = TOLERANCE
        self.now = now = state.now
        self.capacity = capacity = state.capacity
        self.resources = resources = list(capacity)
        self.settings = state.settings
        self.teams = teams = state.teams
        self.nt = nt = len(teams)
        (self.t_index, self.G, self.CAP, self.is_reserve, self._reserve_specs,
         self.capped) = _team_table(teams, resources)
        t_index, G, is_reserve = self.t_index, self.G, self.is_reserve

        # Running (non-terminating) jobs, as parallel lists indexed by a job number:
        # the job's place in victim order (victim_sort), so that comparing two numbers
        # compares the jobs.
        jobs = state.jobs
        index = state.running
        self.priority_first = priority_first = state.settings.victim_order != CHECKPOINT
        if index is None:
            running = [job for job in jobs if job.state == "running" and not job.terminating]
            self.pending = pending = [] if len(running) == len(jobs) else [
                job for job in jobs if job.state != "running" and not job.terminating]
        else:
            if any(job.state == "running" for job in jobs):
                raise ValueError("a State holds its running jobs in jobs or in running, not in both")
            running = list(index.jobs)
            self.pending = pending = [job for job in jobs if not job.terminating]
        self.groups = state.pending_groups
        if pending and self.groups:
            raise ValueError("a State holds its pending jobs in jobs or in pending_groups, not in both")
        if index is not None and priority_first and index.t_index == t_index:
            # Already in victim order, numbered as these teams.
            r_team = list(index.team)
            self.r_id = list(index.ids)
            self.r_demand = r_demand = list(index.demands)
            self.r_prio = list(index.priorities)
        else:
            victim_sort(running, state)
            r_team = [t_index[job.team] for job in running]
            self.r_id = [job.id for job in running]
            self.r_demand = r_demand = [job.demand for job in running]
            self.r_prio = [job.priority for job in running]
        # Under the default order priority comes first, so a team's jobs below a
        # priority are a prefix of its list (own_candidates stops at the first other).
        self.r_team = r_team
        self.n_running = n_running = len(running)
        # Protected: age < min_runtime_seconds, with age = max(0, now - since).
        min_runtime = state.settings.min_runtime_seconds
        if min_runtime > tol:
            unprotected = [min_runtime <= (now - job.since if job.since < now else 0) + tol for job in running]
        else:
            unprotected = None
        self.sums, self.victims_in, self.victims_of = _index_running(nt, resources, r_team, r_demand, unprotected)

        # U per team (exact sums), F (free_of), the borrowing teams per resource.
        self.U = U = _usage(self.sums, resources)
        self.F = free_of(capacity, dict(enumerate(U)))
        self.borrowers = {r: {ti for ti in range(nt) if U[ti][r] - G[ti][r] > tol} for r in resources}
        # RI from reserved_idle_of over the reserve teams (the others add nothing),
        # cached per team (one entry, -1, for every team that is not reserve) until a
        # reserve team's usage changes.
        self._reserve_usage = {t.name: U[ti] for ti, t in enumerate(teams) if is_reserve[ti]}
        self._ri_cache: dict = {}
        # Bumped by every change of U (and so of F and RI).
        self.changes = 0
        # heads[ti][r]: victims_in[ti][r][:heads[ti][r]] are all chosen for good.
        self.heads = [dict.fromkeys(resources, 0) for _ in range(nt)]
        # Bumped whenever one of the team's jobs is taken or given back.
        self.version = [0] * nt
        # What each team's unchosen unprotected jobs could give back; computed for a
        # team when first needed (avail_of), then kept up to date by take/give_back.
        self.avail: list = [None] * nt
        # Whether each team's U moved since it was summed here (take, give_back or
        # serve), and whether no job is protected: then avail_of is U itself.
        self.moved = bytearray(nt)
        self.all_free = unprotected is None
        self.chosen = bytearray(n_running)
        self._own_cache: dict = {}
        # (team, id(demand)) -> the value of ``changes`` at which rule 2b found no victim for
        # a job of that team and demand (serve_one); the demand dicts live as long as the plan.
        self.no_reclaim: dict = {}
        # The organisation's tree (None: the flat rules, untouched).
        self.tree = _TreeView(state, self) if state.groups else None

    # -- the two changes of U ----------------------------------------------

    def _apply(self, ti: int, demand: dict, sign: int) -> None:
        """Add (sign 1) or remove (sign -1) a demand to team ti's usage."""
        tol = TOLERANCE
        u = self.U[ti]
        g = self.G[ti]
        F = self.F
        borrowers = self.borrowers
        for r, d in demand.items():
            if not d:
                continue
            d = sign * d
            nu = u[r] + d
            u[r] = nu
            F[r] -= d
            if nu - g[r] > tol:
                borrowers[r].add(ti)
            else:
                borrowers[r].discard(ti)
        if self.is_reserve[ti]:
            self._ri_cache.clear()
        if self.tree is not None:
            self.tree.apply(ti, demand, sign)
        self.moved[ti] = 1
        self.changes += 1

    def serve(self, ti: int, demand: dict) -> None:
        """A pending job of team ti is served: its demand joins U(ti)."""
        self._apply(ti, demand, 1)

    def take(self, j: int) -> None:
        """Choose running job j as a victim: it no longer counts in U."""
        self.chosen[j] = 1
        ti = self.r_team[j]
        self.version[ti] += 1
        demand = self.r_demand[j]
        self._apply(ti, demand, -1)
        a = self.avail[ti]
        if a is not None:
            for r, d in demand.items():
                if d:
                    a[r] -= d

    def give_back(self, j: int) -> None:
        """Put victim j back: it counts in U again."""
        self.chosen[j] = 0
        ti = self.r_team[j]
        self.version[ti] += 1
        demand = self.r_demand[j]
        self._apply(ti, demand, 1)
        a = self.avail[ti]
        if a is not None:
            for r, d in demand.items():
                if d:
                    a[r] += d

    # -- the planner's documented definitions, as the plan stands ---------------------

    def reserved_idle(self, ti: int) -> dict:
        """RI(ti) (:func:`reserved_idle_of`); missing resources are 0."""
        key = ti if self.is_reserve[ti] else -1
        ri = self._ri_cache.get(key)
        if ri is None:
            ri = self._ri_cache[key] = reserved_idle_of(self.teams[ti].name, self._reserve_specs,
                                                        self._reserve_usage)
        return ri

    def fits(self, ti: int, demand: dict) -> bool:
        ok = fits(demand, self.teams[ti], self.U[ti], self.F, self.reserved_idle(ti))
        return ok and (self.tree is None or self.tree.within_bounds(ti, demand))

    def entitled(self, ti: int, demand: dict) -> bool:
        """Whether the job may reclaim: within its team's guarantee (flat), or, with a tree,
        entitled at some node of its path (:meth:`_TreeView.entitled_at`)."""
        if self.tree is None:
            return self.within_guarantee(ti, demand)
        return self.tree.entitled_at(ti, demand) is not None

    def within_guarantee(self, ti: int, demand: dict) -> bool:
        return within_guarantee(demand, self.teams[ti], self.U[ti])

    def standing(self, ti: int, demand: dict) -> int:
        """Rule 2 for a pending job of team ti, as U stands, before its age is read:
        :data:`FITS` (2a), :data:`MAY_STOP` (it does not fit but is within its
        guarantee, or its team has in-team preemption: 2b or 2c once it has waited),
        or :data:`MUST_WAIT`. A function of U (see :attr:`changes`), the team and
        the demand only."""
        if self.fits(ti, demand):
            return FITS
        if self.teams[ti].in_team_preemption or self.entitled(ti, demand):
            return MAY_STOP
        return MUST_WAIT

    def lacking(self, ti: int, demand: dict) -> list:
        """Resources the job needs in which it lacks room: demand > F - RI(T)."""
        tol = TOLERANCE
        ri = self.reserved_idle(ti)
        F = self.F
        return [r for r, d in demand.items() if d > tol and d > F[r] - ri.get(r, 0) + tol]

    def exceeding(self, ti: int) -> list:
        """Resources in which team ti borrows more than its cap (B > C)."""
        tol = TOLERANCE
        u, g, caps = self.U[ti], self.G[ti], self.CAP[ti]
        return [r for r in self.resources if caps[r] is not None and u[r] - g[r] > caps[r] + tol]

    # -- candidate lists ---------------------------------------------------

    def own_victims(self, ti: int) -> list:
        """Team ti's unprotected running jobs, in victim order (chosen ones included)."""
        return self.victims_of[ti]

    def avail_of(self, ti: int) -> dict:
        """What team ti's unchosen unprotected jobs could give back, per resource."""
        a = self.avail[ti]
        if a is None and self.all_free and not self.moved[ti]:
            # Nothing of ti taken, given back or served, and no job protected: its
            # jobs could give back its whole usage, the same fsum of the same amounts.
            a = self.avail[ti] = dict(self.U[ti])
        if a is None:
            parts: dict = {r: [] for r in self.resources}
            chosen, r_demand = self.chosen, self.r_demand
            for j in self.victims_of[ti]:
                if not chosen[j]:
                    for r, d in r_demand[j].items():
                        if d:
                            parts[r].append(d)
            a = self.avail[ti] = {r: math.fsum(parts[r]) for r in self.resources}
        return a

    def own_candidates(self, ti: int, prio: int) -> tuple[list, dict]:
        """Team ti's unchosen unprotected jobs of priority below prio, in victim
        order, and the sum of their demand (cached until one of ti's jobs changes)."""
        key = (ti, prio)
        hit = self._own_cache.get(key)
        if hit is not None and hit[0] == self.version[ti]:
            return hit[1], hit[2]
        jobs = []
        parts: dict = {r: [] for r in self.resources}
        chosen, r_demand, r_prio = self.chosen, self.r_demand, self.r_prio
        priority_first = self.priority_first
        for j in self.victims_of[ti]:
            if r_prio[j] >= prio:
                if priority_first:
                    break
                continue
            if not chosen[j]:
                jobs.append(j)
                for r, d in r_demand[j].items():
                    if d:
                        parts[r].append(d)
        gain = {r: math.fsum(parts[r]) for r in self.resources}
        self._own_cache[key] = (self.version[ti], jobs, gain)
        return jobs, gain

    def others_in_victim_order(self, ti: int, demand: dict) -> Iterator[int]:
        """Other teams' unprotected running jobs in victim order, each yielded only if
        eligible for reclaim by the job (team ti, ``demand``) when it is reached."""
        if self.tree is not None:
            yield from self.tree.candidates(ti, demand)
            return
        tol = TOLERANCE
        lack = self.lacking(ti, demand)
        if not lack:
            return
        candidates = set()
        for r in lack:
            candidates |= self.borrowers[r]
        candidates.discard(ti)
        if not candidates:
            return
        U, G, F = self.U, self.G, self.F
        # Shortcut: even taking every candidate job cannot make room.
        ri = self.reserved_idle(ti)
        for r in lack:
            room = F[r] - ri.get(r, 0) + math.fsum(self.avail_of(v)[r] for v in candidates)
            if demand[r] > room + tol + _BOUND_SLACK:
                return
        # Merge, in victim order, the lists (V, r) of each candidate team V and each
        # resource r where p lacks room and V borrows. A job is eligible when it is
        # reached from a list whose (V, r) still qualifies; once a list no longer
        # does, it never will again in this pass (p's lack and V's borrowing only
        # shrink), and its jobs that are still eligible sit in another live list.
        chosen, heads, victims_in = self.chosen, self.heads, self.victims_in
        heap = []
        for v in candidates:
            uv, gv = U[v], G[v]
            hv, lv = heads[v], victims_in[v]
            for r in lack:
                if uv[r] - gv[r] > tol:
                    lst = lv[r]
                    pos = hv[r]
                    n = len(lst)
                    while pos < n and chosen[lst[pos]]:
                        pos += 1
                    hv[r] = pos
                    if pos < n:
                        heap.append((lst[pos], v, r, pos))
        heapq.heapify(heap)
        while heap:
            _, v, r, pos = heapq.heappop(heap)
            lst = victims_in[v][r]
            j = lst[pos]
            if not chosen[j]:
                ri_r = self.reserved_idle(ti).get(r, 0)
                if not (demand[r] > F[r] - ri_r + tol and U[v][r] - G[v][r] > tol):
                    continue  # drop the list (V, r) for this pass
                yield j
            pos += 1
            n = len(lst)
            while pos < n and chosen[lst[pos]]:
                pos += 1
            if pos < n:
                heapq.heappush(heap, (lst[pos], v, r, pos))


class _TreeView:
    """The organisation's tree as a plan stands (contract: the tree's semantics).

    For a group N: U(N) the usage of the teams below it (kept by :meth:`apply`), Q(N) its
    quota with every ``reserve`` team below counting only what it uses (its idle guarantee
    is no one's quota), B(N) its borrow limit. The planner asks it:

    * :meth:`within_bounds` -- admission: U(N) + demand <= Q(N) + B(N) at every group above;
    * :meth:`entitled_at` -- where the job is entitled: 0 within its team's guarantee, i at the
      i-th group of its path, the first with U(N) + demand <= Q(N), None nowhere (the fleet is
      no node); :meth:`height` -- that node's height in the tree (0 for a team);
    * :meth:`classes` -- rule 2's order: by that height, lowest first, then the rest;
    * :meth:`candidates` -- reclaim: jobs of teams outside the entitlement node's subtree,
      whose side below the common ancestor A all use more than their quota, the highest
      A first (outside the division before a sibling), then victim order;
    * :meth:`enforce_group_caps` -- rule 1 for groups.
    """

    def __init__(self, state: State, ps: PlanState):
        self.ps = ps
        tree = hierarchy.Tree.of_state(state)
        self.tree = tree
        resources = ps.resources
        self.paths = [tree.path(t.name) for t in ps.teams]
        self.Q = {g: {r: tree.quota(g).get(r, 0) for r in resources} for g in tree.groups}
        self.B = {g: {r: tree.borrow_limit(g, r) for r in resources} for g in tree.groups}
        self.UG = {g: dict.fromkeys(resources, 0.0) for g in tree.groups}
        for ti, path in enumerate(self.paths):
            for g in path:
                for r in resources:
                    self.UG[g][r] += ps.U[ti][r]
        self.reserve_below: dict[str, list[int]] = {g: [] for g in tree.groups}
        for ti in range(ps.nt):
            if ps.is_reserve[ti]:
                for g in self.paths[ti]:
                    self.reserve_below[g].append(ti)
        self.depth = {g: tree.depth(g) for g in tree.groups}

    def apply(self, ti: int, demand: dict, sign: int) -> None:
        for g in self.paths[ti]:
            ug = self.UG[g]
            for r, d in demand.items():
                if d:
                    ug[r] += sign * d

    def quota(self, g: str, r: str) -> float:
        """Q(N) as the plan stands: the reserve teams below count what they use, not their idle guarantee."""
        ps = self.ps
        q = self.Q[g][r]
        for ti in self.reserve_below[g]:
            idle = ps.G[ti][r] - ps.U[ti][r]
            if idle > 0:
                q -= idle
        return q

    def within_bounds(self, ti: int, demand: dict) -> bool:
        ps = self.ps
        quota = self.quota
        if ps.is_reserve[ti]:
            # A reserve team's own job counts in its groups' Q as it will use: the part of its idle
            # guarantee the job takes stops being idle, so a group's limit never keeps the team
            # off its own guarantee.
            lift = {r: min(d, max(0.0, ps.G[ti].get(r, 0) - ps.U[ti].get(r, 0))) for r, d in demand.items()}

            def quota(g: str, r: str) -> float:
                return self.quota(g, r) + lift.get(r, 0)
        return hierarchy.admits(self.paths[ti], demand, self.UG.__getitem__, quota, self._limit)

    def _limit(self, g: str, r: str) -> float | None:
        return self.B[g][r]

    def entitled_at(self, ti: int, demand: dict) -> int | None:
        ps = self.ps
        return hierarchy.entitled_at(self.paths[ti], demand, within_guarantee(demand, ps.teams[ti], ps.U[ti]),
                                     self.UG.__getitem__, self.quota)

    def height(self, ti: int, demand: dict) -> int | None:
        """The height in the tree of the node where the job is entitled (None: nowhere). Ranking
        by the steps up the job's own path instead would tie a job entitled at a deep group with
        one entitled at the common ancestor of a shallow branch, and each would take back the
        room freed for the other at every tick."""
        at = self.entitled_at(ti, demand)
        return None if at is None else 0 if at == 0 else self.tree.height(self.paths[ti][at - 1])

    def classes(self, items: list) -> list[list]:
        """``(ti, demand, x)`` items as lists of x per class: each height, lowest first, then the
        jobs entitled nowhere (all heights present, empty ones included)."""
        top = self.tree.top_height
        out: list[list] = [[] for _ in range(top + 2)]
        for ti, demand, x in items:
            h = self.height(ti, demand)
            out[top + 1 if h is None else h].append(x)
        return out

    def lacking(self, ti: int, demand: dict) -> list:
        """The resources where the job lacks room in the pool or at a group's bound."""
        lack = set(self.ps.lacking(ti, demand))
        for r, d in demand.items():
            if r not in lack and not self.within_bounds(ti, {r: d}):
                lack.add(r)
        return sorted(lack)

    def _over(self, node: str | int, r: str) -> bool:
        """Whether a node (a group's name, or a team's index) uses more than its quota in r."""
        ps = self.ps
        if isinstance(node, int):
            return ps.U[node][r] - ps.G[node][r] > TOLERANCE
        return self.UG[node][r] - self.quota(node, r) > TOLERANCE

    def candidates(self, ti: int, demand: dict) -> Iterator[int]:
        ps = self.ps
        h = self.entitled_at(ti, demand)
        if h is None:
            return
        lack = self.lacking(ti, demand)
        if not lack:
            return
        mine = self.paths[ti]
        inside = mine[h - 1] if h else None  # the entitlement group (None: the team alone)
        above = set(mine[h - 1:] if h else mine)  # the entitlement node's groups
        # Only a team whose side (itself and its groups below A) is above its quota in a resource
        # the job lacks can give, and taking jobs only lowers usage: the others are left out from
        # the start.
        teams: set[int] = set()
        for r in lack:
            teams |= ps.borrowers[r]
        teams.discard(ti)
        bands: dict[int, list] = {}  # the rank of the common ancestor A -> (victims, side) per team
        for v in teams:
            theirs = self.paths[v]
            if inside is not None and inside in theirs:
                continue  # inside the entitlement node's subtree
            k = next((i for i, g in enumerate(theirs) if g in above), len(theirs))
            side: tuple[str | int, ...] = (v, *theirs[:k])
            if not any(all(self._over(n, r) for n in side) for r in lack):
                continue  # and never will be in this pass: taking jobs only lowers usage
            rank = self.depth[theirs[k]] if k < len(theirs) else -1  # the fleet is highest
            bands.setdefault(rank, []).append(zip(ps.own_victims(v), itertools.repeat(side)))
        tol = TOLERANCE
        for rank in sorted(bands):
            # Each team's victims are in victim order (ascending index): merged, the band is too.
            for j, side in heapq.merge(*bands[rank]):
                if ps.chosen[j]:
                    continue
                lack = self.lacking(ti, demand)
                if not lack:
                    return  # taking jobs only makes room: the job lacks nothing any more
                job = ps.r_demand[j]
                if any(job.get(r, 0) > tol and all(self._over(n, r) for n in side) for r in lack):
                    yield j

    def enforce_group_caps(self, preemptions: list) -> None:
        """Rule 1 for groups: after the teams, each group above Q + B (name order) loses jobs
        of its subtree in victim order, then the ones not needed are put back."""
        ps = self.ps
        tol = TOLERANCE
        for g in sorted(self.tree.groups):
            def exceeding(g: str = g) -> list:
                limits = self.B[g]
                return [r for r in ps.resources if (b := limits[r]) is not None
                        and self.UG[g][r] > self.quota(g, r) + b + tol]

            if not exceeding():
                continue
            jobs = sorted(j for ti in range(ps.nt) if g in self.paths[ti] for j in ps.own_victims(ti)
                          if not ps.chosen[j])
            taken: list[int] = []
            for j in jobs:
                over = exceeding()
                if not over:
                    break
                if any(ps.r_demand[j].get(r, 0) > tol for r in over):
                    ps.take(j)
                    taken.append(j)
            if not exceeding():
                for k in range(len(taken) - 1, -1, -1):
                    j = taken[k]
                    ps.give_back(j)
                    if exceeding():
                        ps.take(j)
                    else:
                        del taken[k]
            for j in taken:
                preemptions.append({"job": ps.r_id[j], "team": ps.teams[ps.r_team[j]].name,
                                    "reason": "borrow_limit"})
