"""The owed wait: how long each pending job waited while its team owed it room.

A pending job is *owed* while it fits in its team's unused entitlement, U(T) + gpus <= E(T)
(with a tree: while it is entitled at some node of its path, every team's E in place of its G),
judged once the events of an instant are dispatched. Its owed wait is the total time it was
owed; ``reclaim_wait_p99_s`` is the 99th percentile of the positive ones. A job waiting while
its team already uses its entitlement (stopped because the team ran higher-priority jobs
beyond its guarantee, say) is owed nothing then: the promise was kept.

Asking every pending job after every event would cost in pending jobs per event. Whether a
job is owed depends only on its team's state and its size, and is monotone in the size: per
team, the owed sizes are a prefix of the trace's distinct sizes, up to a threshold index.
So :class:`OwedClock` keeps, per team and size k, a clock C_k(t): the time up to t during
which size k was owed. A job reads its size's clock when it joins the queue and again when it
leaves; the difference is the time it was owed meanwhile. The clocks are kept as one Fenwick
tree per team over the threshold's history (the time spent at each threshold), so a read
costs log(sizes) and a change of threshold one update.

A threshold changes only when usage does, and between an instant's first and last change no
time passes, so only the threshold left at the end of an instant counts: the engine either
updates a team's threshold at each change of its usage (:meth:`OwedClock.update`, flat), or,
where one change can move the thresholds of many teams (a tree), marks them
(:meth:`OwedClock.changed`) and has them recomputed once after each dispatch
(:meth:`OwedClock.settle`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

__all__ = ["OwedClock"]


class OwedClock:
    """Per team and job size, the time that size was owed (see the module docstring).

    ``teams``: the number of teams (indices 0..teams-1); ``sizes``: how many distinct job sizes
    (indices 0..sizes-1, ascending); ``threshold(ti)``: the largest size index owed to team ``ti``
    in the current state (-1: none); ``affected[ti]``: the teams whose threshold may change when
    team ``ti``'s usage does (itself, and with a tree the teams that share a group with it);
    ``moved()``, when given: more teams whose threshold may have changed, asked at :meth:`settle`
    (with a tree: the teams below a group whose own level moved).
    """

    def __init__(self, teams: int, sizes: int, threshold: Callable[[int], int],
                 affected: Sequence[Sequence[int]], moved: Callable[[], Iterable[int]] | None = None):
        self.n = sizes
        self.threshold = threshold
        self.affected = affected
        self.moved = moved
        self.level = [threshold(ti) for ti in range(teams)]
        self.since = [0.0] * teams
        # Per team, a Fenwick tree over reversed size indices: position n-1-j holds the time
        # spent at threshold j, so the prefix sum up to n-1-k is the time size k was owed.
        self.spent = [[0.0] * (sizes + 1) for _ in range(teams)]
        self.dirty: set[int] = set()

    def update(self, ti: int, t: float) -> None:
        """At ``t``, team ``ti``'s usage changed: its threshold now, closing the stretch at the old one."""
        level = self.threshold(ti)
        old = self.level[ti]
        if level != old:
            self._close(ti, old, t)
            self.level[ti] = level

    def changed(self, ti: int, t: float) -> None:
        """Team ``ti``'s usage changed: the thresholds it may move are recomputed at :meth:`settle`."""
        self.dirty.update(self.affected[ti])

    def settle(self, t: float) -> None:
        """At ``t``: recompute the marked teams' thresholds."""
        if self.moved is not None:
            self.dirty.update(self.moved())
        for ti in self.dirty:
            self.update(ti, t)
        self.dirty.clear()

    def reading(self, ti: int, k: int, t: float) -> float:
        """C_k(t) of team ``ti``: the time up to ``t`` during which size index ``k`` was owed."""
        total = 0.0
        tree = self.spent[ti]
        i = self.n - k  # 1-based position of n-1-k
        while i > 0:
            total += tree[i]
            i -= i & -i
        if k <= self.level[ti] and t > self.since[ti]:
            total += t - self.since[ti]
        return total

    def _close(self, ti: int, level: int, t: float) -> None:
        """The stretch since the team's last change, spent at ``level``, ends at ``t``."""
        since = self.since[ti]
        if t <= since:
            return
        self.since[ti] = t
        if level < 0:
            return
        tree = self.spent[ti]
        i = self.n - level  # 1-based position of n-1-level
        dt = t - since
        while i <= self.n:
            tree[i] += dt
            i += i & -i

