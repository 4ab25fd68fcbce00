"""Dispatch with an organisation's tree of groups (a scenario's ``groups``).

The tree adds two rules to dispatch (the same as the reclaim planner's, from
:mod:`cdk_gpu_share.core.configuration.hierarchy`): a job starts only if every group above its team stays
within Q + B with it, and pending jobs are ranked by the height of their entitlement (0 within
the team's guarantee, else the height of the lowest group of its path whose quota holds it: 1
for a group of teams, one more than its highest child for a group of groups), lowest first,
then the jobs entitled nowhere by their team's U/G as without a tree; within one class
priority, then submit time, then trace position. :class:`TreeDispatchIndex` keeps the flat index's queues and answers
:meth:`best` by visiting each team's queue heads: it costs in teams x sizes per start, where the
flat index costs in sizes.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from typing import Any

from cdk_gpu_share.core.configuration import hierarchy
from cdk_gpu_share.core.policy import reclaim
from cdk_gpu_share.core.simulate.dispatch import DispatchIndex, _last_true
from cdk_gpu_share.core.simulate.inputs import RESOURCE, TOL
from cdk_gpu_share.core.simulate.state import Team

__all__ = ["ABOVE_KEPT", "FLAT_HEAPS_UNUSED", "QUOTAS_KEPT", "LEVELS_AT_GROUPS",
           "LEVELS_BY_BISECT", "LEVELS_REMEMBERED", "OWED_AS_ENTITLED", "TreeDispatchIndex", "TreeUsage"]

# Whether dispatch reads each group's admission and entitlement levels, kept per state of the usage
# below it, rather than asking the rules of every size it visits (False only to check that the
# levels change no figure).
LEVELS_AT_GROUPS = True

# Whether a group's level (the largest size with U(N) + size within a bound) is read off the
# sorted sizes by bisection and checked at its edge, rather than found by asking the test of
# log2(sizes) sizes (False only to check that the bisection changes no figure).
LEVELS_BY_BISECT = True

# Whether a level, once found for a usage and a bound, is remembered for the replay (the sizes do
# not change, and the usage of a group takes few values) rather than found again (False only to
# check that remembering changes no figure).
LEVELS_REMEMBERED = True

# Whether a group with no team promised other than its guarantee and no ``reserve`` team below it
# (its promised quota is then its quota) takes its owed level from its entitled level, found once
# for dispatch and the owed clocks alike (False only to check that sharing it changes no figure).
OWED_AS_ENTITLED = True

# Whether the teams above their guarantee and whether each group is above its bound are kept as
# usage changes, for the check of each tick, rather than found again at every check (False only
# to check that keeping them changes no figure).
ABOVE_KEPT = True

# Whether the quota of a group with no ``reserve`` team below it (which usage does not move) is
# kept until a time window's boundary rather than read again at every test (False only to check
# that keeping it changes no figure).
QUOTAS_KEPT = True

# Whether the tree's index leaves the flat index's heaps of queue heads empty: its :meth:`best`
# visits the waiting teams' queues and never reads them (False only to check that keeping them
# changes no figure).
FLAT_HEAPS_UNUSED = True


_usage_of = operator.attrgetter("U")  # a team's usage U(T)


def _level(sizes: list[float], u: float, bound: float) -> int:
    """The largest index k into the ascending ``sizes`` with sizes[k] <= TOLERANCE or
    u + sizes[k] <= bound + TOLERANCE (-1: none): the test of :func:`hierarchy.entitled_at` and
    :func:`hierarchy.admits` at one group. The bisection's guess, sizes[k] <= bound + tol - u,
    may differ from the test by a rounding at the edge; the test, monotone in the size, is then
    asked at the edge until it agrees, so the answer is the test's own."""
    tol = hierarchy.TOLERANCE

    def holds(k: int) -> bool:
        return sizes[k] <= tol or u + sizes[k] <= bound + tol
    if not LEVELS_BY_BISECT:
        return _last_true(len(sizes), holds)
    k = bisect.bisect_right(sizes, max(tol, bound + tol - u)) - 1
    while k + 1 < len(sizes) and holds(k + 1):
        k += 1
    while k >= 0 and not holds(k):
        k -= 1
    return k


class TreeUsage:
    """The tree's live figures over the replay's teams: each group's usage U(N), its quota Q(N)
    (a ``reserve`` team below counting what it uses) and its limit B(N), in GPUs."""

    def __init__(self, state: Any, teams: list[Team]):
        self.tree = hierarchy.Tree.of_state(state)
        self.teams = teams
        self.paths = [self.tree.path(t.name) for t in teams]
        self.below: dict[str, list[Team]] = {g: [] for g in self.tree.groups}
        for t, path in zip(teams, self.paths, strict=True):
            for g in path:
                self.below[g].append(t)
        self.reserve_below = {g: [t for t in below if t.reserve] for g, below in self.below.items()}
        self.below_idx = {g: tuple(t.idx for t in below) for g, below in self.below.items()}
        self._usage: dict[str, dict] = {}  # a group's U, summed again once a team below it changed
        self.promised: dict[int, float] = {}
        self.promised_below: dict[str, list[Team]] = {}
        self._promise()
        # The teams whose entitlement tests read a team's usage: those under the same root group
        # (one tuple per root, shared by its teams).
        roots = [p[-1] if p else None for p in self.paths]
        under: dict[str, list[int]] = {}
        for t, root in zip(teams, roots, strict=True):
            if root is not None:
                under.setdefault(root, []).append(t.idx)
        shared = {root: tuple(idx) for root, idx in under.items()}
        self._sharing = [shared[root] if root is not None else (t.idx,) for t, root in zip(teams, roots, strict=True)]
        # Owed levels per group (:meth:`owed_level`): the job sizes, each group's level as last
        # found, the groups whose level may have moved since, and the teams below a moved level.
        self._sizes: list[float] = []
        self._levels: dict[tuple[float, float], int] = {}  # (usage, bound) -> level, for these sizes
        self.owed_levels: dict[str, int] = {}
        # Per group, the largest size index admitted at its bound (the groups with a limit) and
        # entitled at its quota, as usage stands: found again once a team below it changed.
        self._admit_level: dict[str, int] = {}
        self._entitled_level: dict[str, int] = {}
        self.limited_paths: list[tuple[str, ...]] = []
        self._limits()
        self.owed_stale: set[str] = set()
        self._owed_spread: set[int] = set()
        # The teams (indices) using more than their guarantee, and per group with a borrow limit
        # whether it is above its bound, as usage stands (the latter found again once a team below
        # it changed).
        self.borrowing: set[int] = set()
        self._above: dict[str, bool] = {}
        self._fixed_quota: dict[str, float] = {}  # Q(N) of the groups with no reserve team below

    @property
    def sizes(self) -> list[float]:
        """The replay's distinct job sizes, ascending: the levels are indices into them."""
        return self._sizes

    @sizes.setter
    def sizes(self, sizes: list[float]) -> None:
        self._sizes = sizes
        self._levels = {}

    def _level(self, u: float, bound: float) -> int:
        """:func:`_level` of :attr:`sizes`, remembered per (usage, bound)."""
        if not LEVELS_REMEMBERED:
            return _level(self._sizes, u, bound)
        key = (u, bound)
        k = self._levels.get(key)
        if k is None:
            k = self._levels[key] = _level(self._sizes, u, bound)
        return k

    def _promise(self) -> None:
        """Each team's entitlement E, for the teams promised other than their guarantee."""
        self.promised = {t.idx: float(t.entitled_spec.guarantee.get(RESOURCE, 0) or 0)
                         for t in self.teams if t.entitled_spec is not None}
        # The teams below each group promised other than their guarantee, in the order of ``below``.
        self.promised_below = {g: [t for t in below if t.idx in self.promised] for g, below in self.below.items()}
        # The groups whose promised quota is their quota (:meth:`promised_quota` adds nothing).
        self.plain = {g for g in self.below if not self.promised_below[g] and not self.reserve_below[g]}

    def _limits(self) -> None:
        """Each group's borrow limit in GPUs, and each team's groups that have one, lowest first."""
        self._limit = {g: self.tree.borrow_limit(g, RESOURCE) for g in self.below}
        self.limited_paths = [tuple(g for g in path if self._limit[g] is not None) for path in self.paths]

    def switch(self, state: Any) -> None:
        """A time window's boundary: the teams' specs are ``state``'s now. The groups and their
        pools stay (they do not follow the clock); each group's Q is summed again from its teams'
        guarantees in force, and the entitlements with it."""
        self.tree = hierarchy.Tree.of_state(state)
        self._promise()
        self.owed_stale.update(self.below)  # every group's Q may have moved, and its owed level
        self._admit_level.clear()
        self._entitled_level.clear()
        self._above.clear()
        self._fixed_quota.clear()
        self._limits()

    def changed(self, team: Team) -> None:
        """Team's usage changed: its groups' sums are stale, and so may be their owed levels."""
        for g in self.paths[team.idx]:
            self._usage.pop(g, None)
            self._admit_level.pop(g, None)
            self._entitled_level.pop(g, None)
            self._above.pop(g, None)
        self.owed_stale.update(self.paths[team.idx])
        if team.U - team.G > reclaim.TOLERANCE:  # a time window changes G before it calls this
            self.borrowing.add(team.idx)
        else:
            self.borrowing.discard(team.idx)

    def any_borrowing(self) -> bool:
        """Whether some team uses more than its guarantee."""
        if ABOVE_KEPT:
            return bool(self.borrowing)
        return any(v.U - v.G > reclaim.TOLERANCE for v in self.teams)

    def above_bound(self, group: str) -> bool:
        """Whether ``group``, one with a borrow limit, uses more than its quota plus its limit (rule
        1 for groups), kept until a team below it changes."""
        above = self._above.get(group) if ABOVE_KEPT else None
        if above is None:
            limit = self.limit(group, RESOURCE)
            above = self._above[group] = (limit is not None and
                                          self.usage(group)[RESOURCE] > self.quota(group, RESOURCE) + limit + TOL)
        return above

    def usage(self, group: str) -> dict:
        u = self._usage.get(group)
        if u is None:
            u = self._usage[group] = {RESOURCE: math.fsum(map(_usage_of, self.below[group]))}
        return u

    def quota(self, group: str, resource: str) -> float:
        fixed = resource == RESOURCE and QUOTAS_KEPT
        if fixed:
            q = self._fixed_quota.get(group)
            if q is not None:
                return q
        q = self.tree.quota(group).get(resource, 0)
        reserve = self.reserve_below[group]
        for t in reserve:
            if t.G > t.U:
                q -= t.G - t.U
        if fixed and not reserve:
            self._fixed_quota[group] = q
        return q

    def promised_quota(self, group: str, resource: str) -> float:
        """Q(N) with every team's entitlement E in place of its guarantee G (a ``reserve`` team
        still counting only what it uses of it): the quota an owed job is judged against."""
        q = self.quota(group, resource)
        promised = self.promised
        for t in self.promised_below[group]:  # the others add nothing
            e = promised[t.idx]
            q += min(e, t.U) - min(t.G, t.U) if t.reserve else e - t.G
        return q

    def owed(self, team: Team, gpus: float) -> bool:
        """Whether a pending job of ``gpus`` is owed: entitled at some node of its path, every
        team's E in place of its G (at the team and in every group's Q)."""
        demand = {RESOURCE: gpus}
        within = reclaim.within_guarantee(demand, team.entitled_spec or team.spec, {RESOURCE: team.U})
        return hierarchy.entitled_at(self.paths[team.idx], demand, within, self.usage,
                                     self.promised_quota) is not None

    def owed_level(self, group: str) -> int:
        """The largest index k into :attr:`sizes` of a job that is owed at ``group``: U(N) + size
        <= Q(N) with every team's E in place of its G (:meth:`owed`'s test at that one node; -1:
        none). A job is owed when it is at one node of its path, so a team's owed threshold is the
        largest of its own (U(T) + size <= E(T)) and those of the groups above it: each group's
        level is found once for all its teams, again only once a team below it changed
        (:meth:`changed`), and the teams below a level that moved are kept for
        :meth:`owed_moved`."""
        level = self.owed_levels.get(group)
        if level is None or group in self.owed_stale:
            self.owed_stale.discard(group)
            if OWED_AS_ENTITLED and group in self.plain:
                new = self.entitled_level(group)  # the same test of the same figures
            else:
                u = self.usage(group)[RESOURCE]
                new = self._level(u, self.promised_quota(group, RESOURCE))  # entitled_at's test at one group
            if new != level:
                if level is not None:
                    self._owed_spread.update(self.below_idx[group])
                self.owed_levels[group] = level = new
        return level

    def admit_level(self, group: str) -> int:
        """The largest index k into :attr:`sizes` of a job :func:`hierarchy.admits` at ``group``,
        a group with a borrow limit, for a team that is not ``reserve``: U(N) + size <= Q(N) + B(N)
        (-1: none). Monotone in the size, so a binary search, kept until a team below changes."""
        k = self._admit_level.get(group)
        if k is None:
            u = self.usage(group)[RESOURCE]
            limit = self.limit(group, RESOURCE)
            assert limit is not None
            k = self._admit_level[group] = self._level(u, self.quota(group, RESOURCE) + limit)
        return k

    def entitled_level(self, group: str) -> int:
        """The largest index k into :attr:`sizes` of a job entitled at ``group`` (the test of
        :func:`hierarchy.entitled_at` there): U(N) + size <= Q(N) (-1: none), kept until a team
        below changes."""
        k = self._entitled_level.get(group)
        if k is None:
            u = self.usage(group)[RESOURCE]
            k = self._entitled_level[group] = self._level(u, self.quota(group, RESOURCE))
        return k

    def admitted(self, team: Team) -> int:
        """The largest index into :attr:`sizes` of a job of ``team`` (not ``reserve``) that every
        group of its path admits (:meth:`admits`): the least of its limited groups' levels."""
        k = len(self.sizes) - 1
        for g in self.limited_paths[team.idx]:
            at = self.admit_level(g)
            if at < k:
                k = at
        return k

    def height_at(self, team: Team, k: int) -> int | None:
        """:meth:`height` of a job of ``sizes[k]`` from the groups' levels: 0 within the team's
        guarantee (the dispatch index's ``wk``), else the height of the first group of its path
        whose level holds it, None when none does."""
        if k <= team.wk:
            return 0
        for g in self.paths[team.idx]:
            if k <= self.entitled_level(g):
                return self.tree.height(g)
        return None

    def owed_moved(self) -> set[int]:
        """The teams (indices) below a group whose owed level moved since the last call (every
        group a team's usage change made stale is looked at again first)."""
        for g in list(self.owed_stale):
            self.owed_level(g)
        moved = self._owed_spread
        if not moved:
            return moved  # empty: kept
        self._owed_spread = set()
        return moved

    def sharing(self, ti: int) -> tuple[int, ...]:
        """The teams (indices) whose owed jobs a change of team ``ti``'s usage may change."""
        return self._sharing[ti]

    def limit(self, group: str, resource: str) -> float | None:
        if resource == RESOURCE:
            return self._limit[group]
        return self.tree.borrow_limit(group, resource)

    def admits(self, team: Team, gpus: float) -> bool:
        quota = self.quota
        if team.reserve and team.G > team.U:
            # A reserve team's own job counts in its groups' Q as it will use: the part of its idle
            # guarantee the job takes stops being idle, so a group's limit never keeps the team
            # off its own guarantee.
            lift = min(gpus, team.G - team.U)

            def quota(group: str, resource: str) -> float:
                return self.quota(group, resource) + lift
        return hierarchy.admits(self.paths[team.idx], {RESOURCE: gpus}, self.usage, quota, self.limit)

    def may_reclaim(self, team: Team, gpus: float, free: float, ri: float) -> bool:
        """Whether the reclaim planner's search may find a victim for a pending job of ``gpus`` of
        ``team`` as usage stands (``free``: the pool's idle GPUs, ``ri``: RI of the team): the job is
        entitled at a node of its path and lacks room, in the pool or at a group's bound, and some
        other team outside that node's subtree uses more than its guarantee, with every group of its
        side below their lowest common group above its quota. False: the planner's candidates for
        the job (``_TreeView.candidates``, the same tests at the plan's start) are none."""
        demand = {RESOURCE: gpus}
        path = self.paths[team.idx]
        within = reclaim.within_guarantee(demand, team.spec, {RESOURCE: team.U})
        at = hierarchy.entitled_at(path, demand, within, self.usage, self.quota)
        if at is None:
            return False
        if reclaim.has_room(demand, {RESOURCE: free}, {RESOURCE: ri}) and self.admits(team, gpus):
            return False  # it lacks nothing: no one is stopped for it
        inside = path[at - 1] if at else None  # the node where it is entitled (None: its team)
        above = set(path[at - 1:] if at else path)
        tol = reclaim.TOLERANCE
        for v in self.teams:
            if v is team or not v.U - v.G > tol:
                continue
            theirs = self.paths[v.idx]
            if inside is not None and inside in theirs:
                continue  # inside the entitlement node's subtree
            side = itertools.takewhile(lambda g: g not in above, theirs)
            if all(self.usage(g)[RESOURCE] - self.quota(g, RESOURCE) > tol for g in side):
                return True
        return False

    def height(self, team: Team, gpus: float) -> int | None:
        """The height of the node where a job of ``gpus`` is entitled (0: within its team's
        guarantee; None: nowhere), for dispatch's order."""
        demand = {RESOURCE: gpus}
        within = reclaim.within_guarantee(demand, team.spec, {RESOURCE: team.U})
        path = self.paths[team.idx]
        at = hierarchy.entitled_at(path, demand, within, self.usage, self.quota)
        return None if at is None else 0 if at == 0 else self.tree.height(path[at - 1])


class TreeDispatchIndex(DispatchIndex):
    """:class:`DispatchIndex` whose :meth:`best` applies the tree's admission and order."""

    def __init__(self, teams: list[Team], sizes: list[float], tree: TreeUsage, **kw: Any):
        self.tree = tree
        tree.sizes = sizes
        self.waiting: dict[int, Team] = {}  # the teams with a pending job, by index
        super().__init__(teams, sizes, heads_indexed=not FLAT_HEAPS_UNUSED, **kw)

    def usage_changed(self, team: Team) -> None:
        self.tree.changed(team)
        super().usage_changed(team)

    def _bucket_changed(self, team: Team, g: float, old_head: tuple | None) -> None:
        if team.keys:
            self.waiting[team.idx] = team
        else:
            self.waiting.pop(team.idx, None)
        super()._bucket_changed(team, g, old_head)

    def _index(self, team: Team, k: int, head: tuple) -> None:
        if not FLAT_HEAPS_UNUSED:
            super()._index(team, k, head)

    def best(self, free: float) -> tuple[Team, float] | None:
        if not LEVELS_AT_GROUPS:
            return self._best_asked(free)
        best_key: tuple | None = None
        best = None
        tree, kidx, static = self.tree, self.kidx, self.static
        # iF of every team that is not reserve: RI is the same for all of them
        room = -1
        if self.other_name is not None:
            room = self._room(free, self.ri_of(None))
        for team in self.waiting.values():
            # fits (reclaim.fits): room in the pool up to iF, within the team's borrow cap up to ck
            last = self._room(free, self.ri(team)) if team.reserve else room
            if team.ck < last:
                last = team.ck
            if kidx[team.keys[0]] > last:
                continue  # not even its smallest job fits
            if not team.reserve:
                last = min(last, tree.admitted(team))
            wk = team.wk
            for g in team.keys:  # ascending: once one does not fit, no larger one does
                k = kidx[g]
                if k > last or team.reserve and not tree.admits(team, g):
                    break
                height = 0 if k <= wk else tree.height_at(team, k)
                if static and height != 0:
                    break
                head = team.buckets[g][0][0]
                if height is None:
                    key: tuple = (1, 0, team.U / team.G if team.G > 0 else math.inf, head)
                else:
                    key = (0, height, 0.0, head)
                if best_key is None or key < best_key:
                    best_key, best = key, (team, g)
        return best

    def _best_asked(self, free: float) -> tuple[Team, float] | None:
        """:meth:`best` asking the rules of every size it visits (for tests)."""
        best_key: tuple | None = None
        best = None
        fr = {RESOURCE: free}
        for team in self.waiting.values():
            ri = {RESOURCE: self.ri(team)}
            usage = {RESOURCE: team.U}
            for g in team.keys:  # ascending: once one does not fit, no larger one does
                demand = {RESOURCE: g}
                if not reclaim.fits(demand, team.spec, usage, fr, ri) or not self.tree.admits(team, g):
                    break
                height = self.tree.height(team, g)
                if self.static and height != 0:
                    break
                head = team.buckets[g][0][0]
                if height is None:
                    key: tuple = (1, 0, team.U / team.G if team.G > 0 else math.inf, head)
                else:
                    key = (0, height, 0.0, head)
                if best_key is None or key < best_key:
                    best_key, best = key, (team, g)
        return best
