"""The dispatch index: which pending job starts next, in time proportional to the number
of distinct job sizes rather than the number of pending jobs.

Dispatch picks, among every team's pending jobs that fit, the first in the
documented dispatch order. Scanning every team at every dispatch step costs O(teams) per
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
  the documentation gives. A bit mask per group of heaps (``nonempty``) says which
  heaps have entries, so a step visits only the sizes that some team waits with.
  ``reserve`` teams (each with its own RI) are scanned one by one.

With a few teams (the engine's ``SCAN_TEAMS``), keeping the heaps costs more than it saves: every
fall of a team's U/G pushes its buckets anew. Such a pool keeps none, and :meth:`DispatchIndex.best`
walks each team's buckets up to the same thresholds instead (``scan``): the same candidates, in the
same order, so the same answer.

Each team keeps one heap of pending jobs per job size (``Team.buckets``), ordered by
(priority descending, submit time, trace position); the index holds the heads of
those heaps. The index also keeps, per team, whether the team makes a planner tick
needed (``ticky``): it reads the same thresholds and queues.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right, insort
from collections.abc import Callable
from typing import Any

from cdk_gpu_share.core.policy import reclaim
from cdk_gpu_share.core.simulate.inputs import RESOURCE, TOL
from cdk_gpu_share.core.simulate.state import Run, Team

__all__ = ["DispatchIndex"]


class DispatchIndex:
    """The pending jobs of every team, indexed by size for dispatch (see the module docstring).

    The engine tells the index when a team's usage changes (:meth:`usage_changed`) and
    when a job joins or leaves its queue (:meth:`push`, :meth:`remove`, :meth:`pop`);
    :meth:`best` answers which queue's head starts next.
    """

    def __init__(self, teams: list[Team], sizes: list[float], *, static: bool, reclaiming: bool,
                 compact_slack: int, lazy_ratio: bool, heads_indexed: bool = True, scan: bool = False):
        self.teams = teams
        # Whether :meth:`best` scans every team's queues (:meth:`_best_scan`) instead of reading
        # the heaps: with a few teams, cheaper than keeping the heaps up to date at every change.
        self.scan = scan
        # Whether the heads of the teams' queues are kept in heap0 and heap1 (neither a scan nor a
        # subclass that never reads them needs them).
        self.heads_indexed = heads_indexed and not scan
        self.static = static
        self.reclaiming = reclaiming
        self.compact_slack = compact_slack
        self.lazy_ratio = lazy_ratio
        self.npending = 0  # pending jobs of every team
        # Reserved idle capacity: RI from the planner's reserved_idle_of over the
        # reserve teams, cached until one of them changes its usage.
        self.reserve_specs = [t.spec for t in teams if t.reserve]
        self.reserve_teams = [t for t in teams if t.reserve]
        self.other_name = next((t.name for t in teams if not t.reserve), None)
        self.ri_cache: dict[str | None, float] = {}
        self.room_cache: dict[tuple[float, float], int] = {}  # (F, RI) -> iF: has_room is pure
        self.sizes = sizes
        self.kidx = {g: k for k, g in enumerate(sizes)}
        self.demands = [{RESOURCE: g} for g in sizes]
        self.heap0: list[list] = [[] for _ in sizes]
        self.heap1: list[list] = [[] for _ in sizes]
        # Bit k set when heap0[k] (nonempty[0]) or heap1[k] (nonempty[1]) has entries:
        # a dispatch step then visits only the sizes some team waits with, not all.
        self.nonempty = [0, 0]
        self.entries = 0  # entries in heap0 and heap1
        self.buckets_live = 0  # non-empty (team, size) buckets
        self.ticky = 0  # teams with ticky set
        self.ticky_teams: set[Team] = set()  # those teams
        for team in teams:
            self._refresh(team)

    def usage_changed(self, team: Team) -> None:
        """After a change of team's U: the cached RI (when the team is reserve) and the
        team's thresholds."""
        if team.reserve:
            self.ri_cache.clear()
        self._refresh(team)

    def ri(self, team: Team) -> float:
        """RI(team) (the planner's :func:`reclaim.reserved_idle_of`)."""
        return self.ri_of(team.name if team.reserve else None)

    def ri_of(self, reserve_name: str | None) -> float:
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
        return _last_true(len(demands), lambda k: pred(demands[k]))

    def _refresh(self, team: Team) -> None:
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
        if self.lazy_ratio and ratio > team.ratio and known[0] == team.wk and known[1] == team.ck:
            # Same thresholds: each bucket's entries are in the right heap. heap0's
            # keys do not hold U; heap1's hold the old U/G, below the new one, so
            # each entry is a lower bound of its bucket's key, and _best_in raises it
            # when it reaches the top. Half of the changes of U are starts, which
            # raise U: a borrowing team would otherwise push every bucket anew.
            # (Strictly above: a team without guarantee, U/G always infinite, bumps
            # its version at every change (below), so an old entry of a job that
            # comes back to the head of its queue never turns live again.)
            team.ratio = ratio
            if self.reclaiming:
                self._retick(team)
            return
        team.ver += 1
        team.wk, team.ck = known
        team.ratio = ratio
        if not team.reserve and self.heads_indexed:
            kidx = self.kidx
            for g in team.keys:
                self._index(team, kidx[g], team.buckets[g][0][0])
        if self.reclaiming:
            self._retick(team)

    def _index(self, team: Team, k: int, head: tuple) -> None:
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
        if self.entries > 2 * self.buckets_live + self.compact_slack:
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

    def _retick(self, team: Team) -> None:
        """Whether the team makes a planner tick needed: above its borrow cap, or with a
        pending job within its guarantee or of a team with in-team preemption. Kept in
        ``ticky`` (a count) and ``ticky_teams``, which the engine's tick filter reads.
        Only share+reclaim ticks, so only it calls this."""
        ticky = team.U - team.G > team.cap + TOL or bool(team.npending) and (
            team.in_team or self.kidx[team.keys[0]] <= team.wk)
        if ticky != team.ticky:
            self.ticky += 1 if ticky else -1
            team.ticky = ticky
            if ticky:
                self.ticky_teams.add(team)
            else:
                self.ticky_teams.discard(team)

    def _bucket_changed(self, team: Team, g: float, old_head: tuple | None) -> None:
        bucket = team.buckets[g]
        if bucket:
            head = bucket[0][0]
            if head != old_head and not team.reserve and self.heads_indexed:
                self._index(team, self.kidx[g], head)
        if self.reclaiming:
            self._retick(team)

    def push(self, r: Run) -> None:
        """r joins its team's queue of its size (it arrived, or it was stopped)."""
        team = r.t
        bucket = team.buckets.get(r.g)
        if bucket is None:
            bucket = team.buckets[r.g] = []
        old = bucket[0][0] if bucket else None
        if not bucket:
            insort(team.keys, r.g)
            self.buckets_live += 1
        heapq.heappush(bucket, (r.key, r))
        team.npending += 1
        self.npending += 1
        self._bucket_changed(team, r.g, old)

    def remove(self, r: Run) -> None:
        """r leaves its queue from any place in it (started for a planner's beneficiary)."""
        team = r.t
        bucket = team.buckets[r.g]
        old = bucket[0][0]
        bucket.remove((r.key, r))
        heapq.heapify(bucket)
        if not bucket:
            del team.keys[bisect_right(team.keys, r.g) - 1]
            self.buckets_live -= 1
        team.npending -= 1
        self.npending -= 1
        self._bucket_changed(team, r.g, old)

    def pop(self, team: Team, g: float) -> Run:
        """The head of team's queue of size g leaves it, to start."""
        bucket = team.buckets[g]
        _, r = heapq.heappop(bucket)
        if not bucket:
            del team.keys[bisect_right(team.keys, g) - 1]
            self.buckets_live -= 1
        team.npending -= 1
        self.npending -= 1
        self._bucket_changed(team, g, r.key)
        return r

    def best(self, free: float) -> tuple[Team, float] | None:
        """The next job to start, as (team, size), or None."""
        if self.scan:
            return self._best_scan(free)
        best_key = best = None
        if self.other_name is not None:
            below = (1 << (self._room(free, self.ri_of(None)) + 1)) - 1  # the sizes k <= iF
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

    def _room(self, free: float, ri: float) -> int:
        """iF: the largest index into sizes with room in the pool (:func:`reclaim.has_room`) for a
        team whose RI is ``ri`` (every team that is not ``reserve`` has the same, :meth:`ri_of`)."""
        i_f = self.room_cache.get((free, ri))
        if i_f is None:
            fr = {RESOURCE: free}
            rid = {RESOURCE: ri}
            i_f = self.room_cache[(free, ri)] = self._threshold(lambda d: reclaim.has_room(d, fr, rid))
        return i_f

    def _best_scan(self, free: float) -> tuple[Team, float] | None:
        """:meth:`best` by a walk of every team's queues, sizes ascending, up to the last that
        fits (iF and the team's ``ck``): the heads within the guarantee (k <= ``wk``) by head
        key, before the others by (U/G, head key), the same order the heaps give."""
        best0: tuple | None = None  # the least head key within a guarantee, and where
        at0: tuple[Team, float] | None = None
        best1: tuple | None = None  # the least (U/G, head key) beyond one, and where
        at1: tuple[Team, float] | None = None
        if self.other_name is not None:
            i_f = self._room(free, self.ri_of(None))
            kidx, static = self.kidx, self.static
            for team in self.teams:
                keys = team.keys
                if not keys or team.reserve:
                    continue
                last = team.ck if team.ck < i_f else i_f
                wk, buckets = team.wk, team.buckets
                for g in keys:
                    k = kidx[g]
                    if k > last:
                        break
                    head = buckets[g][0][0]
                    if k <= wk:
                        if best0 is None or head < best0:
                            best0, at0 = head, (team, g)
                    elif static or best0 is not None:
                        break  # beyond the guarantee: nothing here comes before best0
                    else:
                        key = (team.ratio, head)
                        if best1 is None or key < best1:
                            best1, at1 = key, (team, g)
        if not self.reserve_teams:
            return at0 if at0 is not None else at1
        if at0 is not None:
            best_key: Any = (0, 0.0, best0)
            best: Any = at0
        elif at1 is not None:
            best_key, best = (1, *best1), at1  # type: ignore[misc]  # set with at1
        else:
            best_key = best = None
        return self._best_reserve(free, best_key, best)[1]

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

    def _best_reserve(self, free: float, best_key: Any, best: Any) -> tuple[Any, Any]:
        """The reserve teams' candidates (each has its own RI), scanned one by one."""
        static = self.static
        for team in self.reserve_teams:
            if not team.npending:
                continue
            keys = team.keys
            i_fit = self._largest_fit(team, free, self.ri(team))
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

    def _largest_fit(self, team: Team, free: float, ri: float) -> int:
        """Index into team.keys of the largest size that fits (-1: none). fits() is
        monotone in the demand, so a binary search finds it."""
        keys = team.keys
        usage = {RESOURCE: team.U}
        fr = {RESOURCE: free}
        rid = {RESOURCE: ri}
        spec = team.spec
        return _last_true(len(keys), lambda i: reclaim.fits({RESOURCE: keys[i]}, spec, usage, fr, rid))

    def _largest_within(self, team: Team) -> int:
        """Index into team.keys of the largest size within the team's guarantee
        (U + g <= G), -1 when none; monotone in the size, so a binary search."""
        keys = team.keys
        usage = {RESOURCE: team.U}
        spec = team.spec
        return _last_true(len(keys), lambda i: reclaim.within_guarantee({RESOURCE: keys[i]}, spec, usage))


def _last_true(n: int, pred: Callable[[int], bool]) -> int:
    """The largest i in range(n) with pred(i), -1 when none, for a pred that holds up to
    some index and not after it: a binary search, so pred is asked about log2(n) indices."""
    lo, hi = 0, n - 1
    found = -1
    while lo <= hi:
        mid = (lo + hi) // 2
        if pred(mid):
            found = mid
            lo = mid + 1
        else:
            hi = mid - 1
    return found
