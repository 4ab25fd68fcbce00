"""The simulator's event engine: replay a job trace, event by event.

Events are completions (a heap, as small as the running jobs) and arrivals (known up
front, one sorted list), completions first at equal times; in ``share+reclaim`` the
reclaim planner's ticks come every ``poll_seconds``. After each event, dispatch starts
the pending jobs that fit, in the contract's order, through the dispatch index.

Usage is summed exactly, so that thousands of starts and stops never drift past the
planner's tolerance: as integers in units of 1/D GPU, D the least common multiple of
the denominators of every job size and of the capacity (:class:`fractions.Fraction`
values, converted once). A float of usage is then ``n / D``, which Python rounds
correctly, so it is the same float as ``float(Fraction(n, D))``.
"""

from __future__ import annotations

import gc
import heapq
import math
import time
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from cdk_gpu_share.core import reclaim
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.simulate.accounting import SimResult, TeamResult, build_result
from cdk_gpu_share.core.simulate.inputs import (
    DEFAULT_POLL_SECONDS,
    MODES,
    RECLAIM,
    RESOURCE,
    STATIC,
    TOL,
    Job,
    Scenario,
    _row_error,
    check_jobs,
)

__all__ = ["check_mode", "simulate"]

_INF = math.inf
_COMPLETE, _ARRIVE = 0, 1  # event phases at equal times: completions, then arrivals


class _Run:
    """Mutable per-job state during a simulation."""

    __slots__ = ("job", "t", "g", "q", "key", "progress", "start", "run", "stops", "first_start",
                 "done", "entitled", "completion", "busy", "pending_spec", "running_spec", "arrived", "pkey", "grouped")

    def __init__(self, job: Job, t: _Team):
        self.job = job
        self.t = t
        self.g = job.gpus
        self.q = 0  # exact size in units of 1/D GPU (set by _Sim)
        self.key = (-job.priority, job.submit_time, job.position)
        self.progress = 0.0  # seconds of work saved (restart point)
        self.start = -1.0
        self.run = 0
        self.stops = 0
        self.first_start: float | None = None
        self.done = False
        self.entitled = False
        self.completion = 0.0
        self.busy = 0.0
        self.pending_spec: reclaim.JobSpec | None = None
        self.running_spec: reclaim.JobSpec | None = None
        self.arrived = False
        self.pkey: tuple | None = None  # reclaim.pending_key(pending_spec), in reclaim mode
        self.grouped = False  # in its PendingGroup (reclaim mode)


class _Team:
    __slots__ = ("spec", "name", "idx", "G", "cap", "reserve", "in_team", "Uq", "U", "buckets", "keys",
                 "npending", "last_t", "result", "ver", "wk", "ck", "ratio", "ticky", "thresholds")

    def __init__(self, spec: Any, idx: int, result: TeamResult):
        self.spec = spec
        self.name = spec.name
        self.idx = idx
        self.G = float(spec.guarantee.get(RESOURCE, 0) or 0)
        cap = reclaim.borrow_cap(spec, RESOURCE)
        self.cap = math.inf if cap is None else float(cap)
        self.reserve = spec.sharing == "reserve"
        self.in_team = bool(spec.in_team_preemption)
        self.Uq = 0  # exact usage, in units of 1/D GPU (see _Sim.scale)
        self.U = 0.0
        self.buckets: dict[float, list] = {}
        self.keys: list[float] = []  # sizes with a non-empty bucket, ascending
        self.npending = 0
        self.last_t = 0.0
        self.result = result
        # Dispatch index (see _Sim._refresh): bumped whenever U changes; the largest
        # index into _Sim.sizes within the team's guarantee (wk) and within its borrow
        # cap (ck) at this U; U/G; whether the team makes a planner tick needed.
        self.ver = 0
        self.wk = -1
        self.ck = -1
        self.ratio = math.inf
        self.ticky = False
        self.thresholds: dict[float, tuple[int, int]] = {}  # U -> (wk, ck): the rules are pure


class _Sim:
    """The event loop.

    Dispatch picks, among every team's pending jobs that fit, the first in the
    contract's order. Scanning every team at every dispatch step costs O(teams) per
    start (and the reserved idle capacity, summed over every team for every team,
    O(teams^2)); instead the candidates are indexed by job size, so a step costs
    O(distinct sizes + reserve teams), whatever the number of teams:

    - ``sizes`` are the trace's distinct job sizes, ascending. For a team that is not
      ``reserve``, RI(T) is the same (the idle guarantee of every reserve team), so
      whether a size has room (:func:`reclaim.has_room`) is one threshold ``iF`` on
      ``sizes`` for all of them. Whether a size is within a team's guarantee
      (:func:`reclaim.within_guarantee`) or its borrow cap (:func:`reclaim.within_cap`)
      depends on the team's U only: thresholds ``wk`` and ``ck``, recomputed when U
      changes. (The three are monotone in the size, so binary searches find them.)
    - ``heap0[k]`` holds, for every such team whose bucket of size k is within its
      guarantee and cap, the bucket's head key; ``heap1[k]`` the (U/G, head key) of
      the buckets beyond the guarantee but within the cap. An entry carries the team's
      ``ver`` and is stale once the head left or ``ver`` moved on: when the team's
      thresholds changed or its U/G fell, and then its buckets are indexed anew.
      Stale entries are dropped when they reach the top, and all heaps are compacted
      when stale entries outnumber live buckets. A rise of U/G that keeps the
      thresholds (a borrowing team starting a job) re-indexes nothing: heap1's
      entries of the team then hold a lower U/G than the team's, and each one is
      raised to the team's U/G when it reaches the top, before it is compared.
    - The best candidate is then the minimum over k <= iF of the heaps' tops:
      within-guarantee first (by head key), then (U/G, head key), exactly the order
      the contract gives. A bit mask per group of heaps (``nonempty``) says which
      heaps have entries, so a step visits only the sizes that some team waits with.
      ``reserve`` teams (each with its own RI) are scanned as before.
    """

    COMPACT_SLACK = 4096
    """Stale heap entries tolerated beyond twice the live buckets before a compaction."""
    ARRIVAL_SHORTCUT = True
    """No dispatch after an arrival that joins a non-empty queue (False: always, for tests)."""
    LAZY_RATIO = True
    """A rise of U/G that keeps a team's thresholds re-indexes nothing (False: every
    change of U re-indexes every bucket, for tests)."""

    def __init__(self, scenario: Scenario, jobs: Sequence[Job], mode: str, poll: float,
                 checkpoint: float | None, progress: Callable[[float], None] | None):
        self.scenario = scenario
        self.mode = mode
        self.static = mode == STATIC
        self.poll = poll
        self.ckpt = checkpoint
        self.progress_cb = progress
        # Exact usage in integers: units of 1/scale GPU (see the module docstring).
        # Jobs of one size often share one Fraction (the trace parser keeps one per
        # distinct text): each distinct object is asked for its value once, since
        # hashing a Fraction costs a microsecond and a trace can hold a million jobs.
        sizes_exact = [j.exact_gpus for j in jobs]  # kept alive: their ids stay unique
        exact_of = {id(q): q for q in sizes_exact}  # one entry per distinct object
        exact = set(exact_of.values())  # distinct exact sizes
        capq = Fraction(scenario.capacity)
        scale = capq.denominator
        for q in exact:
            scale = math.lcm(scale, q.denominator)
        self.scale = scale
        self.capq = int(capq * scale)
        self.cap = scenario.capacity
        self.results = {t.name: TeamResult(name=t.name, guarantee=float(t.guarantee.get(RESOURCE, 0) or 0))
                        for t in scenario.teams}
        self.teams = [_Team(spec, i, self.results[spec.name]) for i, spec in enumerate(scenario.teams)]
        self.by_name = {t.name: t for t in self.teams}
        self.runs = [_Run(j, self.by_name[j.team]) for j in jobs]
        units = {q: int(q * scale) for q in exact}
        units_of = {key: units[q] for key, q in exact_of.items()}
        for r, q in zip(self.runs, sizes_exact):
            r.q = units_of[id(q)]
        self.by_id = {r.job.id: r for r in self.runs}
        self.running: dict[int, _Run] = {}
        self.live: dict[int, _Run] = {}  # arrived and not completed, in arrival order
        # The planner's view (reclaim mode only): a spec per running job, and the
        # pending jobs as the planner's PendingGroups, one per team and size, each in
        # rule 2's order. Both are brought up to date at a tick, for the jobs that
        # changed state since the last one (touched): most jobs start as they arrive,
        # between two ticks, and never reach a group.
        self.reclaiming = mode == RECLAIM
        self.specs: dict[int, Any] = {}
        self.touched: dict[int, _Run] = {}
        self.groups: dict[tuple[int, float], reclaim.PendingGroup] = {}
        self.usedq = 0  # exact, in units of 1/scale GPU
        self.heap: list[tuple] = []
        self.busy = 0.0
        self.lost = 0.0
        self.preemptions = 0
        self.preemption_events: list[tuple[float, int]] = []  # (time, team index), for plots
        self.completed = 0
        self.last_completion: float | None = None
        self.series_log: list[tuple[float, int, float]] = []
        self.planner_calls = 0
        self.max_total = 0.0
        self.now = 0.0
        self.skip_idle_ticks = True
        self.npending = 0
        # Reserved idle capacity: RI from the planner's reserved_idle_of over the
        # reserve teams, cached until one of them changes its usage.
        self.reserve_specs = [t.spec for t in self.teams if t.reserve]
        self.reserve_teams = [t for t in self.teams if t.reserve]
        self.other_name = next((t.name for t in self.teams if not t.reserve), None)
        self.ri_cache: dict[str | None, float] = {}
        self.room_cache: dict[tuple[float, float], int] = {}  # (F, RI) -> iF: has_room is pure
        # The dispatch index.
        self.sizes: list[float] = sorted({r.g for r in self.runs})
        self.kidx = {g: k for k, g in enumerate(self.sizes)}
        self.demands = [{RESOURCE: g} for g in self.sizes]
        self.heap0: list[list] = [[] for _ in self.sizes]
        self.heap1: list[list] = [[] for _ in self.sizes]
        # Bit k set when heap0[k] (nonempty[0]) or heap1[k] (nonempty[1]) has entries:
        # a dispatch step then visits only the sizes some team waits with, not all.
        self.nonempty = [0, 0]
        self.entries = 0  # entries in heap0 and heap1
        self.buckets_live = 0  # non-empty (team, size) buckets
        self.ticky = 0  # teams with ticky set
        self.ticky_teams: set[_Team] = set()  # those teams
        for team in self.teams:
            self._refresh(team)

    # -- usage bookkeeping -------------------------------------------------

    def _set_usage(self, team: _Team, t: float, delta: int) -> None:
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
        if team.reserve:
            self.ri_cache.clear()
        self._refresh(team)

    def _ri(self, team: _Team) -> float:
        """RI(team) (the planner's :func:`reclaim.reserved_idle_of`)."""
        return self._ri_of(team.name if team.reserve else None)

    def _ri_of(self, reserve_name: str | None) -> float:
        """RI of the reserve team ``reserve_name``, or (None) of every other team: the
        same for all of them. Only the reserve teams are passed: the rule skips the
        others, so the sum is the same, in the same order."""
        ri = self.ri_cache.get(reserve_name)
        if ri is None:
            usage = {t.name: {RESOURCE: t.U} for t in self.reserve_teams}
            name = reserve_name if reserve_name is not None else self.other_name
            ri = self.ri_cache[reserve_name] = reclaim.reserved_idle_of(
                name, self.reserve_specs, usage).get(RESOURCE, 0.0)  # type: ignore[arg-type]
        return ri

    def _threshold(self, pred: Callable[[dict], bool]) -> int:
        """The largest index k into sizes with pred(size k) (-1: none); pred is monotone."""
        demands = self.demands
        lo, hi = 0, len(demands) - 1
        found = -1
        while lo <= hi:
            mid = (lo + hi) // 2
            if pred(demands[mid]):
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return found

    def _refresh(self, team: _Team) -> None:
        """After a change of team's U: its thresholds and ratio and, unless the
        team's index entries all still hold (see below), a new version and an index
        entry for each of its non-empty buckets."""
        known = team.thresholds.get(team.U)
        if known is None:
            spec = team.spec
            usage = {RESOURCE: team.U}
            known = team.thresholds[team.U] = (
                self._threshold(lambda d: reclaim.within_guarantee(d, spec, usage)),
                self._threshold(lambda d: reclaim.within_cap(d, spec, usage)),
            )
        ratio = team.U / team.G if team.G > TOL else math.inf
        if self.LAZY_RATIO and ratio > team.ratio and known[0] == team.wk and known[1] == team.ck:
            # Same thresholds: each bucket's entries are in the right heap. heap0's
            # keys do not hold U; heap1's hold the old U/G, below the new one, so
            # each entry is a lower bound of its bucket's key, and _best_in raises it
            # when it reaches the top. Half of the changes of U are starts, which
            # raise U: a borrowing team would otherwise push every bucket anew.
            # (Strictly above: a team without guarantee, U/G always infinite, bumps
            # its version at every change as before, so an old entry of a job that
            # comes back to the head of its queue never turns live again.)
            team.ratio = ratio
            if self.reclaiming:
                self._retick(team)
            return
        team.ver += 1
        team.wk, team.ck = known
        team.ratio = ratio
        if not team.reserve:
            kidx = self.kidx
            for g in team.keys:
                self._index(team, kidx[g], team.buckets[g][0][0])
        if self.reclaiming:
            self._retick(team)

    def _index(self, team: _Team, k: int, head: tuple) -> None:
        """Index the bucket (team, size k) whose head key is ``head``."""
        if k > team.ck:
            return
        if k <= team.wk:
            heapq.heappush(self.heap0[k], (head, team.idx, team.ver))
            self.nonempty[0] |= 1 << k
        elif not self.static:
            heapq.heappush(self.heap1[k], (team.ratio, head, team.idx, team.ver))
            self.nonempty[1] |= 1 << k
        else:
            return
        self.entries += 1
        if self.entries > 2 * self.buckets_live + self.COMPACT_SLACK:
            self._compact()

    def _live(self, k: int, head: tuple, ti: int, ver: int) -> bool:
        team = self.teams[ti]
        if ver != team.ver:
            return False
        bucket = team.buckets.get(self.sizes[k])
        return bool(bucket and bucket[0][0] == head)

    def _compact(self) -> None:
        live = self._live
        n = 0
        nonempty = self.nonempty
        nonempty[0] = nonempty[1] = 0
        for k in range(len(self.sizes)):
            h = [e for e in self.heap0[k] if live(k, *e)]
            heapq.heapify(h)
            self.heap0[k] = h
            h1 = [e for e in self.heap1[k] if live(k, *e[1:])]
            heapq.heapify(h1)
            self.heap1[k] = h1
            n += len(h) + len(h1)
            if h:
                nonempty[0] |= 1 << k
            if h1:
                nonempty[1] |= 1 << k
        self.entries = n

    def _retick(self, team: _Team) -> None:
        """Whether the team makes a planner tick needed (see _tick_needed). Only
        share+reclaim ticks, so only it calls this."""
        ticky = team.U - team.G > team.cap + TOL or bool(team.npending) and (
            team.in_team or self.kidx[team.keys[0]] <= team.wk)
        if ticky != team.ticky:
            self.ticky += 1 if ticky else -1
            team.ticky = ticky
            if ticky:
                self.ticky_teams.add(team)
            else:
                self.ticky_teams.discard(team)

    def _bucket_changed(self, team: _Team, g: float, old_head: tuple | None) -> None:
        bucket = team.buckets[g]
        if bucket:
            head = bucket[0][0]
            if head != old_head and not team.reserve:
                self._index(team, self.kidx[g], head)
        if self.reclaiming:
            self._retick(team)

    def _push_pending(self, r: _Run) -> None:
        team = r.t
        bucket = team.buckets.get(r.g)
        if bucket is None:
            bucket = team.buckets[r.g] = []
        old = bucket[0][0] if bucket else None
        if not bucket:
            insort(team.keys, r.g)
            self.buckets_live += 1
        heapq.heappush(bucket, (r.key, r))
        if self.reclaiming:
            self.touched[r.job.position] = r
        team.npending += 1
        self.npending += 1
        self.pending_log.append((self.now, team.idx, r.g))
        self._bucket_changed(team, r.g, old)

    def _remove_pending(self, r: _Run) -> None:
        team = r.t
        bucket = team.buckets[r.g]
        old = bucket[0][0]
        bucket.remove((r.key, r))
        heapq.heapify(bucket)
        if self.reclaiming:
            self.touched[r.job.position] = r
        self.pending_log.append((self.now, team.idx, -r.g))
        if not bucket:
            del team.keys[bisect_right(team.keys, r.g) - 1]
            self.buckets_live -= 1
        team.npending -= 1
        self.npending -= 1
        self._bucket_changed(team, r.g, old)

    def _pop_pending(self, team: _Team, g: float) -> _Run:
        bucket = team.buckets[g]
        _, r = heapq.heappop(bucket)
        if self.reclaiming:
            self.touched[r.job.position] = r
        self.pending_log.append((self.now, team.idx, -r.g))
        if not bucket:
            del team.keys[bisect_right(team.keys, g) - 1]
            self.buckets_live -= 1
        team.npending -= 1
        self.npending -= 1
        self._bucket_changed(team, g, r.key)
        return r

    # -- events --------------------------------------------------------------

    def _start(self, r: _Run, t: float) -> None:
        team = r.t
        r.start = t
        r.run += 1
        if r.first_start is None:
            r.first_start = t
        r.running_spec = None
        self.running[r.job.position] = r
        if self.reclaiming:
            self.touched[r.job.position] = r
        self._set_usage(team, t, r.q)
        heapq.heappush(self.heap, (t + (r.job.duration_s - r.progress), _COMPLETE, r.job.position, r.run, r))

    def _complete(self, r: _Run, t: float) -> None:
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
            if r.grouped or r.job.position in self.specs:
                self.touched[r.job.position] = r  # the planner's view still holds it
            else:
                self.touched.pop(r.job.position, None)  # nothing to bring up to date
            # Never asked for again (leaving the planner's view needs pkey only): a
            # million-job trace would otherwise keep two specs per job to its end.
            r.pending_spec = r.running_spec = None
        self.completed += 1
        self.last_completion = t if self.last_completion is None else max(self.last_completion, t)

    def _stop(self, r: _Run, t: float) -> None:
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
        if self.ckpt:
            saved = max(saved, math.floor(reached / self.ckpt) * self.ckpt)
            saved = min(saved, r.job.duration_s)
        self.lost += (reached - saved) * r.g
        r.progress = saved
        r.run += 1  # its completion event is now stale
        r.stops += 1
        team.result.preempted += 1
        self.preemptions += 1
        self.preemption_events.append((t, team.idx))
        if self.reclaiming:
            self.touched[r.job.position] = r
        self._push_pending(r)

    # -- dispatch ------------------------------------------------------------

    def _free(self) -> float:
        return (self.capq - self.usedq) / self.scale

    def _largest_fit(self, team: _Team, free: float, ri: float) -> int:
        """Index into team.keys of the largest size that fits (-1: none). fits() is
        monotone in the demand, so a binary search finds it."""
        keys = team.keys
        usage = {RESOURCE: team.U}
        fr = {RESOURCE: free}
        rid = {RESOURCE: ri}
        spec = team.spec
        lo, hi = 0, len(keys) - 1
        found = -1
        while lo <= hi:
            mid = (lo + hi) // 2
            if reclaim.fits({RESOURCE: keys[mid]}, spec, usage, fr, rid):
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return found

    def _largest_within(self, team: _Team) -> int:
        """Index into team.keys of the largest size within the team's guarantee
        (U + g <= G), -1 when none; monotone in the size, so a binary search."""
        keys = team.keys
        usage = {RESOURCE: team.U}
        spec = team.spec
        lo, hi = 0, len(keys) - 1
        found = -1
        while lo <= hi:
            mid = (lo + hi) // 2
            if reclaim.within_guarantee({RESOURCE: keys[mid]}, spec, usage):
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return found

    def _best_reserve(self, free: float, best_key: Any, best: Any) -> tuple[Any, Any]:
        """The reserve teams' candidates (each has its own RI), scanned one by one."""
        static = self.static
        for team in self.reserve_teams:
            if not team.npending:
                continue
            keys = team.keys
            i_fit = self._largest_fit(team, free, self._ri(team))
            if i_fit < 0:
                continue
            i_within = self._largest_within(team)
            top = min(i_fit, i_within)
            buckets = team.buckets
            for i in range(top + 1):
                cand = (0, 0.0, buckets[keys[i]][0][0])
                if best_key is None or cand < best_key:
                    best_key, best = cand, (team, keys[i])
            if static or i_fit <= i_within:
                continue
            ratio = team.ratio
            for i in range(max(0, i_within + 1), i_fit + 1):
                cand = (1, ratio, buckets[keys[i]][0][0])
                if best_key is None or cand < best_key:
                    best_key, best = cand, (team, keys[i])
        return best_key, best

    def _best(self) -> Any:
        """The next job to start, as (team, size), or None."""
        free = self._free()
        best_key = best = None
        if self.other_name is not None:
            ri = self._ri_of(None)
            i_f = self.room_cache.get((free, ri))
            if i_f is None:
                fr = {RESOURCE: free}
                rid = {RESOURCE: ri}
                i_f = self.room_cache[(free, ri)] = self._threshold(lambda d: reclaim.has_room(d, fr, rid))
            below = (1 << (i_f + 1)) - 1  # the sizes k <= iF
            nonempty = self.nonempty
            if nonempty[0] & below:
                best_key, best = self._best_in(0, below)
            if best is not None:
                best_key = (0, 0.0, best_key)
            elif nonempty[1] & below and not self.static:
                best_key, best = self._best_in(1, below)
                if best is not None:
                    best_key = (1, *best_key)
        if self.reserve_teams:
            best_key, best = self._best_reserve(free, best_key, best)
        return best

    def _best_in(self, group: int, below: int) -> tuple[Any, Any]:
        """The best bucket of one group of the index, as (its key, (team, size)),
        or (None, None): group 0 (within the team's guarantee) by head key, group 1
        (beyond it, within its cap) by (U/G, head key). A walk of the group's
        non-empty heaps for k <= iF (the bits of ``below``), k ascending.

        An entry that is not :meth:`_live` is dropped. A group-1 entry that holds an
        older, lower U/G than its team's (see _refresh) is raised to the team's U/G
        first."""
        teams, sizes = self.teams, self.sizes
        heaps = self.heap0 if group == 0 else self.heap1
        live = self._live
        pop, replace = heapq.heappop, heapq.heapreplace
        best_key = best = None
        dropped = 0
        todo = self.nonempty[group] & below
        while todo:
            low = todo & -todo
            todo ^= low
            k = low.bit_length() - 1
            h = heaps[k]
            g = sizes[k]
            while h:
                e = h[0]
                if group == 0:
                    head, ti, ver = e
                else:
                    ratio, head, ti, ver = e
                if live(k, head, ti, ver):
                    team = teams[ti]
                    if group == 0:
                        key = head
                    elif ratio != team.ratio:
                        replace(h, (team.ratio, head, ti, ver))
                        continue
                    else:
                        key = (ratio, head)
                    if best is None or key < best_key:
                        best_key, best = key, (team, g)
                    break
                pop(h)
                dropped += 1
            if not h:
                self.nonempty[group] ^= low
        self.entries -= dropped
        return best_key, best

    def _dispatch(self, t: float) -> None:
        while True:
            best = self._best()
            if best is None:
                return
            team, g = best
            self._start(self._pop_pending(team, g), t)

    # -- planner ticks -------------------------------------------------------

    def _tick_needed(self) -> bool:
        """Whether a tick may change anything: a team above its borrow cap, or a
        pending job within its team's guarantee or of a team with in-team preemption
        (kept per team in ``ticky`` as usage and queues change)."""
        return self.ticky > 0

    def _tick_useful(self, t: float) -> bool:
        """Whether the planner may choose a victim at ``t``; when not, the tick skips
        the call (the contract's rule, with time).

        Until the plan's first victim, the plan only serves pending jobs (rule 2a),
        which raises U: a job within its guarantee when it is reached was within it
        when the plan started. The first victim must then come from rule 1
        (a team above its borrow cap), rule 2b (a pending job within its team's
        guarantee that has waited) or rule 2c (a pending job that has waited, of a
        team with in-team preemption). None of them: no victim, the same as the call.
        Only teams in ``ticky_teams`` can have such a job; whether a job has waited
        is the planner's own :func:`reclaim.has_waited`."""
        settings = self.scenario.state.settings
        kidx = self.kidx
        has_waited = reclaim.has_waited
        for team in self.ticky_teams:
            if team.U - team.G > team.cap + TOL:
                return True
            wk = team.wk
            for g in team.keys:  # ascending
                if not team.in_team and kidx[g] > wk:
                    break  # beyond the guarantee from here on
                for _, r in team.buckets[g]:
                    if has_waited(self._pending_spec(r), t, settings):
                        return True
        return False

    def _pending_spec(self, r: _Run) -> reclaim.JobSpec:
        # One demand dict per size, shared by every job of that size: the planner's
        # memo of fits per (team, demand) then answers a team's many pending jobs once.
        if r.pending_spec is None:
            r.pending_spec = reclaim.JobSpec(
                id=r.job.id, team=r.job.team, state="pending", demand=self.demands[self.kidx[r.g]],
                priority=r.job.priority, since=r.job.submit_time, terminating=False)
            r.pkey = reclaim.pending_key(r.pending_spec)
        return r.pending_spec

    def _running_spec(self, r: _Run) -> reclaim.JobSpec:
        if r.running_spec is None:
            r.running_spec = reclaim.JobSpec(
                id=r.job.id, team=r.job.team, state="running", demand=self.demands[self.kidx[r.g]],
                priority=r.job.priority, since=r.start, terminating=False)
        return r.running_spec

    def _planner_state(self, t: float) -> reclaim.State:
        specs, running = self.specs, self.running
        for position, r in self.touched.items():
            if position in running:
                specs[position] = self._running_spec(r)
            else:
                specs.pop(position, None)
            pending = r.arrived and not r.done and position not in running
            if pending != r.grouped:
                (self._group_add if pending else self._group_remove)(r)
        self.touched.clear()
        base = self.scenario.state
        return reclaim.State(now=t, capacity=base.capacity, settings=base.settings, teams=base.teams,
                             jobs=tuple(specs.values()), pending_groups=tuple(self.groups.values()))

    def _group_add(self, r: _Run) -> None:
        """r joins its team's pending group of its size, at its place in rule 2's order."""
        spec = self._pending_spec(r)
        gkey = (r.t.idx, r.g)
        group = self.groups.get(gkey)
        if group is None:
            group = self.groups[gkey] = reclaim.PendingGroup(
                team=r.t.name, demand=spec.demand, jobs=[], keys=[])
        keys = group.keys
        i = bisect_left(keys, r.pkey)
        keys.insert(i, r.pkey)
        group.jobs.insert(i, spec)
        r.grouped = True

    def _group_remove(self, r: _Run) -> None:
        gkey = (r.t.idx, r.g)
        group = self.groups[gkey]
        jobs = group.jobs
        i = bisect_left(group.keys, r.pkey)
        del group.keys[i]
        del jobs[i]
        if not jobs:
            del self.groups[gkey]
        r.grouped = False

    def _tick(self, t: float) -> None:
        if self.skip_idle_ticks and not self._tick_useful(t):
            return  # no victim possible: the call would change nothing, nor would dispatch
        self.planner_calls += 1
        result = reclaim.plan_state(self._planner_state(t), full=False)
        preemptions = result.get("preemptions", ())
        beneficiaries: list[_Run] = []
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
        # contract says (its beneficiary is within its guarantee, so dispatched early).
        for b in beneficiaries:
            self._start_if_fits(b, t)
        self._dispatch(t)

    def _start_if_fits(self, r: _Run, t: float) -> bool:
        if r.done or r.job.position in self.running or not r.arrived:
            return False
        team = r.t
        if not reclaim.fits({RESOURCE: r.g}, team.spec, {RESOURCE: team.U}, {RESOURCE: self._free()},
                            {RESOURCE: self._ri(team)}):
            return False
        if self.mode == STATIC and not reclaim.within_guarantee({RESOURCE: r.g}, team.spec, {RESOURCE: team.U}):
            return False
        self._remove_pending(r)
        self._start(r, t)
        return True

    # -- main loop -----------------------------------------------------------

    def run(self) -> None:
        # Completions in a heap; arrivals, known up front, in one sorted list (submit
        # time, then trace position): the heap stays as small as the running jobs.
        heap = self.heap
        arrivals = sorted(self.runs, key=lambda r: r.job.submit_time)  # stable: trace order at ties
        ai, n_arrivals = 0, len(arrivals)
        total = len(self.runs)
        report_every = max(1, total // 200)
        last_k = 0
        reclaiming = self.mode == RECLAIM
        poll = self.poll
        self.pending_log: list[tuple[float, int, float]] = []  # for plots: SimResult.series_waiting
        while True:
            t_done = heap[0][0] if heap else _INF
            t_arrive = arrivals[ai].job.submit_time if ai < n_arrivals else _INF
            t_ev = t_done if t_done <= t_arrive else t_arrive  # completions first at equal times
            t_tick = _INF
            if reclaiming and (heap or ai < n_arrivals or self.running) and self.npending and (
                not self.skip_idle_ticks or self._tick_needed()
            ):
                k = max(last_k + 1, math.ceil(self.now / poll))
                t_tick = k * poll
            if t_tick < t_ev:
                last_k = k
                self.now = t_tick
                self._tick(t_tick)
                continue
            if t_ev == _INF:
                break
            if t_done <= t_arrive:
                t, phase, _, run, r = heapq.heappop(heap)
            else:
                r = arrivals[ai]
                ai += 1
                t, phase = t_arrive, _ARRIVE
            self.now = t
            if phase == _COMPLETE:
                if run != r.run or r.done:
                    continue  # stale: the job was stopped after this was scheduled
                self._complete(r, t)
                if self.progress_cb is not None and self.completed % report_every == 0:
                    self.progress_cb(self.completed / total)
            else:
                team = r.t
                r.arrived = True
                self.live[r.job.position] = r
                r.entitled = self.kidx[r.g] <= team.wk  # reclaim.within_guarantee, as wk holds it
                self._push_pending(r)
                if self.ARRIVAL_SHORTCUT and len(team.buckets[r.g]) > 1:
                    # Every event ends with a dispatch that found nothing to start, and
                    # an arrival changes nothing but its own bucket. A job that joins
                    # its team's queue of its size cannot start: the queue's head, of
                    # the same team and size, could not (whether a job may start
                    # depends on its team and size only; the order within the queue
                    # decides only which of them goes first).
                    continue
            self._dispatch(t)
        # close the borrowed-capacity integrals
        end = self.now
        for team in self.teams:
            if team.U > team.G:
                team.result.borrowed_gpu_seconds += (team.U - team.G) * (end - team.last_t)
            team.last_t = end


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

    Raises :class:`ConfigError` for an unknown mode, a non-positive period, or a job
    that could never start (see :func:`check_jobs`).
    """
    check_mode(mode)
    if not (isinstance(poll_seconds, (int, float)) and math.isfinite(poll_seconds) and poll_seconds > 0):
        raise ConfigError(Problem(field="--poll-seconds", value=poll_seconds, message="must be above 0",
                                  fix="give the planner's period in seconds, e.g. 60"))
    if checkpoint_seconds is not None and not (
        isinstance(checkpoint_seconds, (int, float)) and math.isfinite(checkpoint_seconds) and checkpoint_seconds > 0
    ):
        raise ConfigError(Problem(field="--checkpoint-seconds", value=checkpoint_seconds, message="must be above 0",
                                  fix="give the checkpoint period in seconds, or leave it out for no checkpoints"))
    ids: dict[str, Job] = {}
    for j in jobs:
        if j.id in ids:
            raise _row_error(source, j.where(), "job_id", j.id, "repeats the id of another job",
                             "give every job a unique id")
        ids[j.id] = j
    jobs = [j if j.position == i else _replace_position(j, i) for i, j in enumerate(jobs)]
    check_jobs(scenario, jobs, mode, source=source)

    started = time.perf_counter()
    # The run allocates a few objects per job that live until it ends (and no cyclic
    # garbage): the cyclic collector would only walk them again and again, which
    # grows with the trace (a fifth of the time at 800k jobs). Paused for the run,
    # as it was before afterwards.
    collecting = gc.isenabled()
    gc.disable()
    try:
        engine = _Sim(scenario, jobs, mode, float(poll_seconds),
                      float(checkpoint_seconds) if checkpoint_seconds else None, progress)
        engine.skip_idle_ticks = skip_idle_ticks
        engine.run()
        return build_result(engine, scenario, jobs, mode, time.perf_counter() - started)
    finally:
        if collecting:
            gc.enable()



def _replace_position(job: Job, position: int) -> Job:
    from dataclasses import replace

    return replace(job, position=position)

