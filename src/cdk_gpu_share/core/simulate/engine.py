"""The simulator's event engine: replay a job trace, event by event.

Events are completions (a heap, as small as the running jobs) and arrivals (known up
front, one sorted list), completions first at equal times (in the order the jobs last
started, then trace order: which job ends first decides who is offered its room); in ``share+reclaim`` the
reclaim planner's ticks come every ``poll_seconds``. After each event, dispatch starts
the pending jobs that fit, in the documented dispatch order, through the dispatch index.

Usage is summed exactly, so that thousands of starts and stops never drift past the
planner's tolerance: as integers in units of 1/D GPU, D the least common multiple of
the denominators of every job size and of the capacity (:class:`fractions.Fraction`
values, converted once). A float of usage is then ``n / D``, which Python rounds
correctly, so it is the same float as ``float(Fraction(n, D))``.

One addition to the documented planner tick: when the plan stops a team's own jobs (reason
``in_team``) for a job, that job is started first (if it fits), then dispatch runs.
Otherwise a job beyond its team's guarantee would see its room handed back to the
lower-priority victims (within-guarantee jobs dispatch first) and the planner would
stop them again at every tick, forever. Room made by ``reclaim`` goes to dispatch
unchanged.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from typing import Any

from cdk_gpu_share.core.configuration.windows import boundaries
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.policy import reclaim
from cdk_gpu_share.core.simulate import collector
from cdk_gpu_share.core.simulate.accounting import SimResult, TeamResult, _tally_jobs, _window
from cdk_gpu_share.core.simulate.dispatch import DispatchIndex, _last_true
from cdk_gpu_share.core.simulate.inputs import (
    DEFAULT_POLL_SECONDS,
    MODES,
    RECLAIM,
    RESOURCE,
    STATIC,
    TOL,
    Job,
    Scenario,
    _num,
    _row_error,
    check_jobs,
)
from cdk_gpu_share.core.simulate.owed import OwedClock
from cdk_gpu_share.core.simulate.planner_view import PlannerView
from cdk_gpu_share.core.simulate.state import Run, Team
from cdk_gpu_share.core.simulate.tree_dispatch import TreeDispatchIndex, TreeUsage
from cdk_gpu_share.core.simulate.watch import Watch

# With a tree, whether each team's owed threshold is the largest of its own level and its groups'
# (each group's found once for all the teams below it: TreeUsage.owed_level); False asks every size
# of the team's whole path again at each change, only to check that the levels change no figure.
OWED_BY_NODE = True
# Whether the ticks that would find what the last call found are passed over at once rather than
# visited one by one (False only to check that passing them over changes no figure).
SKIP_QUIET_TICKS = True
# With a tree, whether the ticks of a state in which no tick could call the planner, whenever it
# came, are passed over without a visit (PlannerView.tick_possible, once per state) rather than
# each visited and found useless by PlannerView.tick_useful (False only to check that passing them
# over changes no figure).
PASS_HOPELESS_TICKS = True

__all__ = ["check_mode", "simulate", "with_victim_order"]

_INF = math.inf


def _exact_units(jobs: Sequence[Job], capacity: float, later: Collection[Fraction] = ()) -> tuple[int, int, list[int]]:
    """(D, the capacity in units of 1/D GPU, each job's size in those units): D is the
    least common multiple of the denominators of every job size, of the ``later`` sizes (jobs
    made during the run) and of the capacity.

    Jobs of one size often share one Fraction (the trace parser keeps one per distinct
    text): each distinct object is asked for its value once, since hashing a Fraction
    costs a microsecond and a trace can hold a million jobs.
    """
    sizes_exact = [j.exact_gpus for j in jobs]  # kept alive: their ids stay unique
    exact_of = {id(q): q for q in sizes_exact}  # one entry per distinct object
    exact = set(exact_of.values())  # distinct exact sizes
    capq = Fraction(capacity)
    scale = capq.denominator
    for q in (*exact, *later):
        scale = math.lcm(scale, q.denominator)
    units = {q: int(q * scale) for q in exact}
    units_of = {key: units[q] for key, q in exact_of.items()}
    return scale, int(capq * scale), [units_of[id(q)] for q in sizes_exact]


class _Sim:
    """The event loop: arrivals, completions, stops and planner ticks, each followed by
    dispatch through the :class:`~cdk_gpu_share.core.simulate.dispatch.DispatchIndex`.

    The class-level switches below turn the index's shortcuts off; a run gives the same
    result either way (the tests compare both).
    """

    COMPACT_SLACK = 4096
    """Stale heap entries tolerated beyond twice the live buckets before a compaction."""
    ARRIVAL_SHORTCUT = True
    """No dispatch after an arrival that joins a non-empty queue (False: always, for tests)."""
    LAZY_RATIO = True
    """A rise of U/G that keeps a team's thresholds re-indexes nothing (False: every
    change of U re-indexes every bucket, for tests)."""
    SCAN_TEAMS = 8
    """A flat pool of at most this many teams finds the next job to start by scanning each
    team's queues rather than keeping the index's heaps (0: always the heaps, for tests)."""

    def __init__(self, scenario: Scenario, jobs: Sequence[Job], mode: str, poll: float,
                 checkpoint: float | None, progress: Callable[[float], None] | None):
        self.scenario = scenario
        self.mode = mode
        self.poll = poll
        self.ckpt = checkpoint
        self.progress_cb = progress
        self.watch: Watch | None = None  # limits that end the run early (the advisor's); None: none
        # Exact usage in integers: units of 1/scale GPU (see the module docstring).
        later = self._later_sizes()
        self.scale, self.capq, units = _exact_units(jobs, scenario.capacity, [q for _, q in later])
        self.results = {t.name: TeamResult(name=t.name, guarantee=float(t.guarantee.get(RESOURCE, 0) or 0),
                                           entitlement=scenario.entitlements.get(t.name))
                        for t in scenario.teams}
        self.teams = [Team(spec, i, self.results[spec.name]) for i, spec in enumerate(scenario.teams)]
        for team in self.teams:
            e = scenario.entitlements.get(team.name)
            if e is not None and abs(e - team.G) > TOL:  # else its jobs are entitled as they are within G
                team.entitled_spec = replace(team.spec, guarantee={**team.spec.guarantee, RESOURCE: e})
        by_name = {t.name: t for t in self.teams}
        self.runs = [Run(j, by_name[j.team]) for j in jobs]
        for r, q in zip(self.runs, units):
            r.q = q
            r.interval = _interval(r, checkpoint)
        self.by_id = {r.job.id: r for r in self.runs}
        self.running: dict[int, Run] = {}
        self.live: dict[int, Run] = {}  # arrived and not completed, in arrival order
        self.reclaiming = mode == RECLAIM  # the planner's view is kept in this mode only
        self.usedq = 0  # exact, in units of 1/scale GPU
        self.heap: list[tuple] = []
        self.busy = 0.0
        self.lost = 0.0
        self.preemptions = 0
        self.preemption_events: list[tuple[float, int]] = []  # (time, team index), for plots
        self.completed = 0
        self.last_completion: float | None = None
        self.series_log: list[tuple[float, int, float]] = []
        self.pending_log: list[tuple[float, int, float]] = []  # for plots: SimResult.series_waiting
        self.planner_calls = 0
        self.max_total = 0.0
        self.now = 0.0
        self.skip_idle_ticks = True
        # (view version, the tick that found no victim, until when: None until asked): ticks without a victim
        self.quiet: tuple[int, float, float | None] | None = None
        index_args: dict[str, Any] = dict(static=mode == STATIC, reclaiming=self.reclaiming, compact_slack=self.COMPACT_SLACK,
                          lazy_ratio=self.LAZY_RATIO)
        sizes = sorted({r.g for r in self.runs} | {g for g, _ in later})
        # The organisation's tree (None: the flat rules, through the flat index alone).
        self.tree = TreeUsage(scenario.state, self.teams) if scenario.state.groups else None
        self.index = (DispatchIndex(self.teams, sizes, scan=len(self.teams) <= self.SCAN_TEAMS, **index_args)
                      if self.tree is None
                      else TreeDispatchIndex(self.teams, sizes, self.tree, **index_args))
        self.view = PlannerView(scenario, self.index, self.running, self.tree)
        self.view.free = self._free
        self.owed = self._owed_clock()
        # A team's usage moves its own owed threshold only (flat): updated at once. With a tree it
        # moves those of every team under the same root: marked, and recomputed once per dispatch.
        self._owed_changed = self.owed.update if self.tree is None else self.owed.changed
        #: The time windows' boundaries ahead (None: the scenario has none).
        self.clock: _Clock | None = None

    def _later_sizes(self) -> Collection[tuple[float, Fraction]]:
        """The sizes (GPUs, exact) of the jobs a subclass makes during the run rather than gives up
        front (:mod:`~cdk_gpu_share.core.simulate.resume`): none here, every job is given."""
        return ()

    def _owed_clock(self) -> OwedClock:
        """The owed-wait clocks (:mod:`~cdk_gpu_share.core.simulate.owed`): per team, the largest
        job size owed in the current state, and the teams one team's usage can change that for."""
        sizes, teams, tree = self.index.sizes, self.teams, self.tree
        n = len(sizes)
        demands = [{RESOURCE: g} for g in sizes]
        known: dict[tuple[int, float, int], int] = {}

        def promised(ti: int) -> int:
            # U(T) + gpus <= E(T): the guarantee's rule with the entitlement in its place.
            team = teams[ti]
            if team.entitled_spec is None:
                return team.wk  # the dispatch index keeps it: reclaim.within_guarantee at U
            key = (ti, team.U, id(team.entitled_spec))  # a time window may change the spec
            k = known.get(key)
            if k is None:
                spec, usage = team.entitled_spec, {RESOURCE: team.U}
                k = known[key] = _last_true(n, lambda k: reclaim.within_guarantee(demands[k], spec, usage))
            return k

        if tree is None:
            return OwedClock(len(teams), n, promised, [(t.idx,) for t in teams])
        if not OWED_BY_NODE:
            return OwedClock(len(teams), n, lambda ti: _last_true(n, lambda k: tree.owed(teams[ti], sizes[k])),
                             [tree.sharing(t.idx) for t in teams])
        tree.sizes = sizes
        paths, level, found, stale = tree.paths, tree.owed_level, tree.owed_levels, tree.owed_stale

        def threshold(ti: int) -> int:
            # Owed at one node of its path: the largest of the team's own level and its groups'.
            k = promised(ti)
            for g in paths[ti]:
                at = found.get(g)
                if at is None or g in stale:
                    at = level(g)
                if at > k:
                    k = at
            return k

        # A team's usage moves its own level and those of its groups: the teams below a group
        # whose level moved are added when the clocks settle.
        return OwedClock(len(teams), n, threshold, [(t.idx,) for t in teams], tree.owed_moved)

    # -- usage bookkeeping -------------------------------------------------

    def _set_usage(self, team: Team, t: float, delta: int) -> None:
        """Change team's usage by ``delta`` units at ``t``: close the borrowed stretch up
        to ``t``, log the new usage, and let the index recompute the team's place."""
        if team.U > team.G:
            team.result.borrowed_gpu_seconds += (team.U - team.G) * (t - team.last_t)
        team.last_t = t
        team.Uq += delta
        team.U = team.Uq / self.scale
        self.usedq += delta
        self.series_log.append((t, team.idx, team.U))
        total = self.usedq / self.scale
        if total > self.max_total:
            self.max_total = total
        self.index.usage_changed(team)
        self._owed_changed(team.idx, t)

    # A job joins or leaves the pending set in the index, in the planner's view and in
    # the pending log (SimResult.series_waiting) at once, through these three.

    def _push_pending(self, r: Run) -> None:
        self.index.push(r)
        r.owed_mark = self.owed.reading(r.t.idx, self.index.kidx[r.g], self.now)
        if self.reclaiming:
            self.view.touch(r)
        self.pending_log.append((self.now, r.t.idx, r.g))

    def _remove_pending(self, r: Run) -> None:
        self.index.remove(r)
        self._owed_until_now(r)
        if self.reclaiming:
            self.view.touch(r)
        self.pending_log.append((self.now, r.t.idx, -r.g))

    def _pop_pending(self, team: Team, g: float) -> Run:
        r = self.index.pop(team, g)
        self._owed_until_now(r)
        if self.reclaiming:
            self.view.touch(r)
        self.pending_log.append((self.now, team.idx, -r.g))
        return r

    def _owed_until_now(self, r: Run) -> None:
        """r leaves the queue now: the time it was owed since it joined adds to its owed wait."""
        r.owed += self.owed.reading(r.t.idx, self.index.kidx[r.g], self.now) - r.owed_mark

    # -- events --------------------------------------------------------------

    def _start(self, r: Run, t: float) -> None:
        """r starts at ``t``; its completion is due once its remaining work is done."""
        team = r.t
        r.start = t
        # Before its GPUs join U(T): a run that starts beyond the guarantee borrowed.
        r.borrowed = (team.Uq + r.q) / self.scale > team.G + reclaim.TOLERANCE
        r.run += 1
        if self.watch is not None:
            self.watch.started(r, t, r.first_start is None)
        if r.first_start is None:
            r.first_start = t
        r.running_spec = None
        self.running[r.job.position] = r
        if self.reclaiming:
            self.view.touch(r)
        self._set_usage(team, t, r.q)
        # Completions at one instant in the order the jobs last started, then trace order.
        heapq.heappush(self.heap, (t + (r.duration - r.progress), t, r.job.position, r.run, r))

    def _complete(self, r: Run, t: float) -> None:
        """r completes at ``t``: its GPUs are free, its run counts as busy time."""
        team = r.t
        del self.running[r.job.position]
        self._set_usage(team, t, -r.q)
        ran = (t - r.start) * r.g
        self.busy += ran
        r.busy += ran
        team.result.gpu_seconds += ran
        r.done = True
        r.completion = t
        del self.live[r.job.position]
        if self.reclaiming:
            self.view.completed(r)
        self.completed += 1
        self.last_completion = t if self.last_completion is None else max(self.last_completion, t)

    def _stop(self, r: Run, t: float) -> None:
        """The planner stops r at ``t``: the work since its last checkpoint is lost and it
        goes back to its queue."""
        team = r.t
        del self.running[r.job.position]
        self._set_usage(team, t, -r.q)
        elapsed = t - r.start
        ran = elapsed * r.g
        self.busy += ran
        r.busy += ran
        team.result.gpu_seconds += ran
        reached = r.progress + elapsed
        saved = r.progress
        interval = r.interval
        if interval:
            saved = max(saved, math.floor(reached / interval) * interval)
            saved = min(saved, r.duration)
        lost = (reached - saved) * r.g
        self.lost += lost
        team.result.lost_gpu_seconds += lost
        if self.watch is not None:
            self.watch.stopped(r, t, lost)
        r.progress = saved
        r.run += 1  # its completion event is now stale
        r.stops += 1
        team.result.preempted += 1
        self.preemptions += 1
        self.preemption_events.append((t, team.idx))
        if self.reclaiming:
            self.view.touch(r)
        self._push_pending(r)

    # -- dispatch ------------------------------------------------------------

    def _free(self) -> float:
        """Idle GPUs of the pool, from the exact sums."""
        return (self.capq - self.usedq) / self.scale

    def _dispatch(self, t: float) -> None:
        """Start, one at a time, the job the index puts first, until none fits."""
        while True:
            best = self.index.best(self._free())
            if best is None:
                self.view.settled = self.view.version
                if self.owed.dirty:
                    self.owed.settle(t)
                return
            team, g = best
            self._start(self._pop_pending(team, g), t)

    # -- planner ticks -------------------------------------------------------

    def _tick_needed(self) -> bool:
        """Whether a tick may change anything: a team above its borrow cap, or a
        pending job within its team's guarantee or of a team with in-team preemption
        (kept per team in ``ticky`` as usage and queues change). With a tree, any pending job
        may be entitled at a group: every tick is visited, and :meth:`PlannerView.tick_useful`
        decides."""
        if self.tree is not None:  # or a job entitled at a group, or a group above its bound
            return self.index.npending > 0 or self.index.ticky > 0
        return self.index.ticky > 0

    def _tick(self, t: float, *, forced: bool = False) -> None:
        """A planner tick at ``t``: stop the jobs the plan chooses, then dispatch. ``forced``: the
        tick after a time window's boundary, called even when the engine's shortcuts see
        nothing to do."""
        if self.skip_idle_ticks and not forced:
            if self._as_last_call(t):
                return  # as the last tick: no victim
            if not self.view.tick_useful(t):
                self._quiet(t)
                return  # no victim possible: the call would change nothing, nor would dispatch
        self.planner_calls += 1
        result = reclaim.plan_state(self.view.state(t), full=False)
        preemptions = result.get("preemptions", ())
        if not preemptions:
            self._quiet(t)
        beneficiaries: list[Run] = []
        for p in preemptions:
            r = self.by_id[p["job"]]
            if r.job.position in self.running:
                self._stop(r, t)
            if p.get("reason") == "in_team":
                b = self.by_id.get(p.get("beneficiary"))
                if b is not None and b not in beneficiaries:
                    beneficiaries.append(b)
        # Room made by stopping a team's own jobs (reason in_team) goes to the job it
        # was made for, then dispatch runs. Without this, dispatch would hand it back
        # to the victims whenever the beneficiary is beyond its team's guarantee
        # (within-guarantee jobs dispatch first) and the planner would stop them again
        # at the next tick, forever. Room made by reclaim goes to dispatch as the
        # documented rule says (its beneficiary is within its guarantee, so dispatched early).
        for b in beneficiaries:
            self._start_if_fits(b, t)
        self._dispatch(t)

    # -- time windows ------------------------------------------------------

    def _switch(self, state: Any) -> None:
        """A time window's boundary at ``self.now``: each team whose values change gets the new
        ones at once (its thresholds, its place in the index, its owed clock, the planner's view);
        a team whose guarantee rose has its pending jobs wait, for ``reclaim_after_seconds``,
        from now. Then dispatch, and in ``share+reclaim`` one tick at this instant after its
        completions and arrivals."""
        t = self.now
        changed = False
        for team, spec in zip(self.teams, state.teams):
            if spec == team.spec:
                continue
            changed = True
            if team.U > team.G:  # the borrowed stretch so far, against the old guarantee
                team.result.borrowed_gpu_seconds += (team.U - team.G) * (t - team.last_t)
            team.last_t = t
            old_g = team.G
            team.spec = spec
            team.G = float(spec.guarantee.get(RESOURCE, 0) or 0)
            cap = reclaim.borrow_cap(spec, RESOURCE)
            team.cap = math.inf if cap is None else float(cap)
            e = self.scenario.entitlements.get(team.name)
            team.entitled_spec = (replace(spec, guarantee={**spec.guarantee, RESOURCE: e})
                                  if e is not None and abs(e - team.G) > TOL else None)
            team.thresholds = {}
            team.wk = team.ck = -2  # no threshold holds: the index files every bucket again
            if team.G > old_g + TOL and self.reclaiming:
                for r in self.live.values():
                    if r.t is team and r.job.position not in self.running:
                        if r.grouped:
                            self.view._group_remove(r)
                        r.since = t
                        r.pending_spec = None
                        self.view.touch(r)
        if not changed:
            return
        self.index.reserve_specs = [t_.spec for t_ in self.teams if t_.reserve]
        self.index.ri_cache.clear()
        if self.tree is not None:
            self.tree.switch(state)
        for team in self.teams:
            self.index.usage_changed(team)
            self.owed.update(team.idx, t)
        self.view.base = state
        self.view.version += 1
        self.quiet = None
        self._dispatch(t)
        if self.reclaiming and self.clock is not None:
            self.clock.boundary_tick = t

    def _as_last_call(self, t: float) -> bool:
        """Whether a call at ``t`` would find what the last tick found, no victim: no job started,
        stopped, arrived or completed since, and no rule that reads the time changed its answer
        for any job in between (:meth:`_quiet`)."""
        quiet = self.quiet
        if quiet is None or quiet[0] != self.view.version:
            return False
        if quiet[2] is None:  # asked once, at the first tick that finds nothing changed
            quiet = self.quiet = (quiet[0], quiet[1], self._next_change(quiet[1]))
        return t < quiet[2]  # type: ignore[operator]  # set just above

    def _quiet(self, t: float) -> None:
        """The tick at ``t`` found no victim: with a tree (where a waiting job entitled at a group
        may find none for long), later ticks skip the planner until a job changes state or the
        time changes a rule's answer (:meth:`_next_change`, found when a later tick first asks:
        most ticks are followed by a job's change first). Without a tree the engine's own test
        (:meth:`_tick_needed`, :meth:`PlannerView.tick_useful`) is cheaper: a flat replay's waiting
        jobs come to have waited one after another, so a tick rarely finds what the last found."""
        if self.skip_idle_ticks and self.tree is not None:
            self.quiet = (self.view.version, t, None)

    def _next_change(self, t: float) -> float:
        """After a call at ``t`` that chose no victim: the first time a call could answer
        otherwise with the same jobs, when a pending job has waited ``reclaim_after_seconds``
        or a running job's ``min_runtime_seconds`` protection ends (``t``: at once, in the
        checkpoint-aware victim order, which reads the time too)."""
        settings = self.scenario.state.settings
        if settings.victim_order != "youngest":
            return t
        due = _INF
        wait, protect = settings.reclaim_after_seconds, settings.min_runtime_seconds
        if wait > 0:
            for position, r in self.live.items():  # since: its submit, or a later rise of its guarantee
                if position not in self.running and t < r.since + wait - reclaim.TOLERANCE < due:
                    due = r.since + wait - reclaim.TOLERANCE
        if protect > 0:
            for r in self.running.values():
                if t < r.start + protect - reclaim.TOLERANCE < due:
                    due = r.start + protect - reclaim.TOLERANCE
        return due

    def _start_if_fits(self, r: Run, t: float) -> bool:
        """Start r, pending, at ``t`` if it fits now (the planner's rules); whether it started."""
        if r.done or r.job.position in self.running or not r.arrived:
            return False
        team = r.t
        if not reclaim.fits({RESOURCE: r.g}, team.spec, {RESOURCE: team.U}, {RESOURCE: self._free()},
                            {RESOURCE: self.index.ri(team)}):
            return False
        if self.mode == STATIC and not reclaim.within_guarantee({RESOURCE: r.g}, team.spec, {RESOURCE: team.U}):
            return False
        if self.tree is not None and not self.tree.admits(team, r.g):
            return False
        self._remove_pending(r)
        self._start(r, t)
        return True

    # -- main loop -----------------------------------------------------------

    def run(self) -> None:
        """Process every event in time order: planner ticks before the events they
        precede, completions before arrivals at equal times, each followed by dispatch."""
        # Completions in a heap of (time, start, trace position, run number, job); arrivals in
        # submit order (submit time, then trace position), their times ending with inf: the
        # heap stays as small as the running jobs.
        heap = self.heap
        arrivals, arrival_times = self._arrivals()
        ai = 0
        total = len(self.runs)
        report_every = max(1, total // 200)
        last_k = 0  # the last tick ran at last_k * poll
        watch = self.watch
        clock = self.clock
        idle_from: float | None = None  # since when jobs wait with nothing running or to arrive
        while True:
            t_done = heap[0][0] if heap else _INF
            t_arrive = arrival_times[ai]  # inf: none left
            t_ev = t_done if t_done <= t_arrive else t_arrive  # completions first at equal times
            horizon = t_ev
            if clock is not None:
                # With nothing left to run or arrive, waiting jobs may still start at a boundary: the
                # boundaries of a week are visited (the windows repeat weekly), then the run ends.
                if t_ev < _INF or not self.index.npending:
                    idle_from = None
                elif idle_from is None:
                    idle_from = self.now
                horizon = t_ev if idle_from is None else idle_from + _Clock.IDLE_HORIZON
            if clock is not None and horizon < _INF:
                if clock.boundary_tick is not None and clock.boundary_tick < horizon:
                    # The tick that follows a boundary, after its instant's completions and arrivals.
                    self.now = clock.boundary_tick
                    clock.boundary_tick = None
                    self._tick(self.now, forced=True)
                    continue
                if clock.next_at <= horizon and (not self.reclaiming or idle_from is not None
                                                 or (k_next := self._next_tick(last_k, clock.next_at)) is None
                                                 or clock.next_at <= k_next * self.poll):
                    self.now = clock.next_at
                    self._switch(clock.advance())
                    continue
            if self.reclaiming and (heap or t_arrive < _INF or self.running):
                k = self._next_tick(last_k, t_ev)
                if k is not None and k * self.poll < t_ev:
                    last_k = k
                    self.now = k * self.poll
                    if watch is not None and watch.next_due < self.now:
                        watch.advance(self.now)
                    self._tick(self.now)
                    if clock is not None and clock.boundary_tick == self.now:
                        clock.boundary_tick = None  # this tick was the boundary's
                    continue
            if t_ev == _INF:
                break
            if watch is not None and watch.next_due < t_ev:
                watch.advance(t_ev)
            if t_done <= t_arrive:
                t, _, _, run, r = heapq.heappop(heap)
                self.now = t
                if run != r.run or r.done:
                    continue  # stale: the job was stopped after this was scheduled
                self._complete(r, t)
                if self.progress_cb is not None and self.completed % report_every == 0:
                    self.progress_cb(self.completed / total)
            else:
                r = arrivals[ai]
                ai += 1
                t = self.now = t_arrive
                if not self._arrive(r):
                    continue
            self._dispatch(t)
        self._close_borrowing(self.now)

    def _arrivals(self) -> tuple[Sequence[Run], Sequence[float]]:
        """The jobs that arrive during the run, in arrival order, and their arrival times followed
        by inf (the run reads the time of the next arrival, and of one past the last, before it
        takes that arrival): every job, at its submit time (stable sort: trace order at equal
        times). A run resumed from a state (:mod:`~cdk_gpu_share.core.simulate.resume`) draws its
        arrivals as it reaches them."""
        arrivals = sorted(self.runs, key=lambda r: r.job.submit_time)
        return arrivals, [*(r.job.submit_time for r in arrivals), _INF]

    def _next_tick(self, last_k: int, before: float = _INF) -> int | None:
        """The number k of the next planner tick (at k * poll, after the last one and not
        before now), or None while no tick can change anything. The ticks that would each find
        what the last call found (:meth:`_as_last_call`) are passed over at once; with a tree, so
        are those of a state in which no tick could call the planner (asked only when the tick
        comes ``before`` the caller's next event: the state may change first)."""
        if not self.index.npending or (self.skip_idle_ticks and not self._tick_needed()):
            return None
        k = max(last_k + 1, math.ceil(self.now / self.poll))
        quiet = self.quiet
        if SKIP_QUIET_TICKS and quiet is not None and quiet[0] == self.view.version:
            if quiet[2] is None:  # as _as_last_call finds it: nothing changed since the call
                quiet = self.quiet = (quiet[0], quiet[1], self._next_change(quiet[1]))
            until = quiet[2]
            assert until is not None
            if k * self.poll < until:
                if until == _INF:
                    return None  # until a job changes state
                k = max(k, math.ceil(until / self.poll))
                while k * self.poll < until:  # whatever the division rounded
                    k += 1
        if (PASS_HOPELESS_TICKS and self.skip_idle_ticks and self.tree is not None and k * self.poll < before
                and not self.index.ticky and not self.view.tick_possible()):
            return None  # until a job changes state: every tick would skip the call
        return k

    def _arrive(self, r: Run) -> bool:
        """r arrives and joins its team's queue; whether a dispatch may start anything."""
        team = r.t
        r.arrived = True
        self.live[r.job.position] = r
        self._push_pending(r)
        if self.watch is not None:
            self.watch.arrived(r)
        # Every event ends with a dispatch that found nothing to start, and an arrival
        # changes nothing but its own bucket. A job that joins its team's queue of its
        # size cannot start: the queue's head, of the same team and size, could not
        # (whether a job may start depends on its team and size only; the order within
        # the queue decides only which of them goes first).
        return not (self.ARRIVAL_SHORTCUT and len(team.buckets[r.g]) > 1)

    def release(self) -> None:
        """Drop the references by which the run's objects refer to one another (the engine and
        its parts; a team and the runs queued in it), so that they are freed as soon as the
        engine is, without the cyclic collector: a replay that is done with its engine calls it.
        The engine is unusable afterwards."""
        for team in self.teams:
            team.buckets = {}
        self.__dict__.clear()

    def result(self, jobs: Sequence[Job], elapsed: float) -> SimResult:
        """The :class:`SimResult` of the finished run of ``jobs`` (``elapsed``: its wall time)."""
        outcomes, wait_gs = _tally_jobs(self.runs)
        return SimResult(
            mode=self.mode,
            capacity=self.scenario.capacity,
            team_names=self.scenario.team_names,
            guarantees=tuple(t.G for t in self.teams),
            jobs=len(jobs),
            completed=self.completed,
            window=_window(jobs, self.last_completion),
            busy_gpu_seconds=self.busy,
            preemptions=self.preemptions,
            lost_gpu_seconds=self.lost,
            wait_gpu_seconds=wait_gs,
            sim_seconds=elapsed,
            teams=self.results,
            outcomes=outcomes,
            series_log=self.series_log,
            planner_calls=self.planner_calls,
            max_total_usage=self.max_total,
            preemption_events=self.preemption_events,
            pending_log=self.pending_log,
            group_members={} if self.tree is None else {g: [t.name for t in below]
                                                         for g, below in self.tree.below.items()},
        )

    def _close_borrowing(self, end: float) -> None:
        """Add each borrowing team's last stretch, up to ``end``, to its borrowed GPU-seconds."""
        for team in self.teams:
            if team.U > team.G:
                team.result.borrowed_gpu_seconds += (team.U - team.G) * (end - team.last_t)
            team.last_t = end


class _Clock:
    """The boundaries of a scenario's time windows in trace seconds, found a week at a time:
    ``next_at`` the next one and :meth:`advance` the planner's state from then on."""

    WEEK = 7 * 86400.0
    IDLE_HORIZON = WEEK + 86400.0
    """How long jobs that nothing runs beside wait for a boundary that lets them start: a week
    and a day holds every boundary of the week, whatever daylight saving moved."""

    def __init__(self, scenario: Scenario, origin: datetime, start: float = 0.0):
        self.scenario = scenario
        self.origin = origin
        self.start = start  # the boundaries after this (trace seconds): the values at it are in force
        self.ahead: list[tuple[float, Any]] = []
        self.searched = start  # boundaries before this (trace seconds) are in ``ahead`` or past
        self.boundary_tick: float | None = None  # share+reclaim: the tick a boundary asks for
        self._fill()

    def _fill(self) -> None:
        for _ in range(2):  # windows that never change hands (open all week) have no boundary
            if self.ahead:
                return
            start = self.origin + timedelta(seconds=self.searched)
            found = boundaries(self.scenario.windows, start - timedelta(seconds=1), start + timedelta(seconds=self.WEEK))
            self.ahead = [(t, self.scenario.state_at(at)) for at, _ in found[1:]
                          if (t := (at - self.origin).total_seconds()) >= self.searched and t > self.start]
            self.searched += self.WEEK
        if not self.ahead:
            self.ahead = [(_INF, None)]

    @property
    def next_at(self) -> float:
        return self.ahead[0][0]

    def advance(self) -> Any:
        _, state = self.ahead.pop(0)
        self._fill()
        return state


def _interval(r: Run, checkpoint: float | None) -> float:
    """A job's checkpoint interval: the trace's, else its team's, else ``checkpoint``
    (``--checkpoint-seconds``), else 0 (never)."""
    if r.job.checkpoint_seconds is not None:
        return r.job.checkpoint_seconds
    if r.t.spec.checkpoint_seconds is not None:
        return float(r.t.spec.checkpoint_seconds)
    return checkpoint or 0.0


def check_mode(mode: str) -> None:
    """Raise :class:`ConfigError` unless ``mode`` is one of :data:`MODES`."""
    if mode not in MODES:
        raise ConfigError(Problem(field="--mode", value=mode, message="is not a simulation mode",
                                  fix=f"use one of {', '.join(MODES)}"))


def simulate(
    scenario: Scenario,
    jobs: Sequence[Job],
    mode: str,
    *,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
    checkpoint_seconds: float | None = None,
    progress: Callable[[float], None] | None = None,
    skip_idle_ticks: bool = True,
    source: str = "trace",
    victim_order: str | None = None,
    watch: Watch | None = None,
    origin: datetime | None = None,
) -> SimResult:
    """Replay ``jobs`` against ``scenario`` in ``mode`` (one of :data:`MODES`).

    ``poll_seconds``: the planner's period in ``share+reclaim`` (default 60).
    ``checkpoint_seconds``: a stopped job restarts from its last multiple of this many
    seconds of its own running time (default ``None``: from zero).
    ``progress``: called now and then with the fraction of jobs completed.
    ``skip_idle_ticks``: skip the planner calls whose result cannot change (the
    simulator's rule; default). ``False`` calls the planner at every tick while a job
    is pending: the same result, slower (for tests).
    ``source``: the trace's name in error messages.
    ``victim_order``: the planner's ``settings.victim_order`` (``youngest`` or
    ``checkpoint``); default ``None``: the scenario's (``youngest`` unless it says).
    ``watch``: limits that end the run early (:class:`~cdk_gpu_share.core.simulate.watch.Watch`):
    the call raises :class:`~cdk_gpu_share.core.simulate.watch.Broken` as soon as one
    cannot hold any more. Default None: the run goes to its end.
    ``origin``: the clock time of the trace's second 0 (an aware datetime; default the
    scenario's), which a scenario with time windows needs: each team's values are those in
    force at each instant.

    A job's checkpoint interval is the trace's ``checkpoint_seconds``, else its team's in
    the scenario, else ``checkpoint_seconds``, else none. Each running job is handed to
    the planner with that interval and with whether its run started beyond its team's
    guarantee (``borrowed``, decided at the start).

    Raises :class:`ConfigError` for an unknown mode or victim order, a non-positive
    period, or a job that could never start (see :func:`check_jobs`).
    """
    check_mode(mode)
    _check_periods(poll_seconds, checkpoint_seconds)
    scenario = with_victim_order(scenario, victim_order)
    jobs = _numbered(jobs, source)
    check_jobs(scenario, jobs, mode, source=source)
    scenario, clock = _clocked(scenario, origin if origin is not None else scenario.origin)

    started = time.perf_counter()
    # The run allocates a few objects per job that live until it ends (and no cyclic
    # garbage): the cyclic collector would only walk them again and again, which
    # grows with the trace (a fifth of the time at 800k jobs).
    with collector.paused(collect=False):
        engine = _Sim(scenario, jobs, mode, float(poll_seconds),
                      float(checkpoint_seconds) if checkpoint_seconds else None, progress)
        engine.skip_idle_ticks = skip_idle_ticks
        engine.clock = clock
        if watch is not None:
            watch.begin(engine.running)
            engine.watch = watch
        engine.run()
        _check_all_completed(engine, source)
        result = engine.result(jobs, time.perf_counter() - started)
        result.victim_order = scenario.state.settings.victim_order
        return result


def _clocked(scenario: Scenario, origin: datetime | None, start: float = 0.0) -> tuple[Scenario, _Clock | None]:
    """``scenario`` with each team's values in force at trace second ``start`` and the clock of
    its time windows' boundaries after ``start`` (None: it has no windows). The clock reads the
    base and the windows from the scenario as given; ``origin`` maps trace seconds to the clock
    (refused in one line naming ``--origin`` when the scenario has windows and it is None)."""
    clock_origin = _windows_origin(scenario, origin)
    if clock_origin is None:
        return scenario, None
    in_force = scenario.state_at(clock_origin + timedelta(seconds=start))
    return replace(scenario, state=in_force), _Clock(scenario, clock_origin, start)


def _windows_origin(scenario: Scenario, origin: datetime | None) -> datetime | None:
    """The origin a scenario with time windows is replayed from (None: it has none); refused in
    one line when it is missing."""
    if not scenario.windows:
        return None
    if origin is None:
        raise ConfigError(Problem("--origin", None, "is needed: the scenario has time windows and the trace no origin",
                                  "give the clock time of the trace's second 0, --origin 2026-01-05T00:00:00Z"),
                          source=scenario.source)
    return origin if origin.tzinfo is not None else origin.replace(tzinfo=timezone.utc)


def _check_all_completed(engine: _Sim, source: str) -> None:
    """A replay never ends quietly with a job left waiting: every job :func:`check_jobs` accepts
    fits an empty pool, so one still waiting once nothing runs is named, as a job that could never
    start, rather than left out of the figures."""
    if engine.completed == len(engine.runs):
        return
    stuck = next(r for r in engine.runs if not r.done)
    raise _row_error(source, stuck.job.where(), "gpus", _num(stuck.g),
                     "could never start: the replay ended with the job still waiting and nothing running",
                     "split the job, or raise its team's guarantee or its groups' quotas")


def with_victim_order(scenario: Scenario, victim_order: str | None) -> Scenario:
    """``scenario`` with the planner's ``settings.victim_order`` set (None: unchanged)."""
    if victim_order is None or victim_order == scenario.state.settings.victim_order:
        return scenario
    if victim_order not in reclaim.VICTIM_ORDERS:
        raise ConfigError(Problem(field="--victim-order", value=victim_order, message="is not a victim order",
                                  fix=f"use one of {', '.join(reclaim.VICTIM_ORDERS)}"))

    settings = replace(scenario.state.settings, victim_order=victim_order)
    return replace(scenario, state=replace(scenario.state, settings=settings))


def _check_periods(poll_seconds: float, checkpoint_seconds: float | None) -> None:
    """Reject a planner period or a checkpoint period that is not a number above 0."""
    if not (isinstance(poll_seconds, (int, float)) and math.isfinite(poll_seconds) and poll_seconds > 0):
        raise ConfigError(Problem(field="--poll-seconds", value=poll_seconds, message="must be above 0",
                                  fix="give the planner's period in seconds, e.g. 60"))
    if checkpoint_seconds is not None and not (
        isinstance(checkpoint_seconds, (int, float)) and math.isfinite(checkpoint_seconds) and checkpoint_seconds > 0
    ):
        raise ConfigError(Problem(field="--checkpoint-seconds", value=checkpoint_seconds, message="must be above 0",
                                  fix="give the checkpoint period in seconds, or leave it out for no checkpoints"))


def _numbered(jobs: Sequence[Job], source: str) -> list[Job]:
    """The jobs with unique ids (else a ConfigError naming the repeat), each ``position``
    its place in the sequence: the engine orders ties and indexes its state by it."""
    ids: dict[str, Job] = {}
    for j in jobs:
        if j.id in ids:
            raise _row_error(source, j.where(), "job_id", j.id, "repeats the id of another job",
                             "give every job a unique id")
        ids[j.id] = j
    return [j if j.position == i else _replace_position(j, i) for i, j in enumerate(jobs)]


def _replace_position(job: Job, position: int) -> Job:

    return replace(job, position=position)

