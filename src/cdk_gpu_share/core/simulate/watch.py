"""Limits a run may break, watched as it goes: a run stops as soon as one is broken.

The quota advisor simulates many candidate policies and needs, of most of them, only
"this one cannot win": a team's wait percentile already above its limit, a team
already preempted too often, the teams' waits already costlier than the best policy
found. A :class:`Watch` holds such limits; :func:`~cdk_gpu_share.core.simulate.simulate`
given one raises :class:`Broken` at the first event after which a limit cannot hold
any more. Without a watch (``gpu-share simulate``) the engine runs exactly as before:
every hook is behind one ``is None`` test.

What a watch can know mid-run, and why it is certain:

- a job's wait is its final start minus its submit time, so once a job is still
  waiting at a time later than ``submit + T`` (pending at an event after that
  instant, or stopped after it, since it restarts later still) its wait is above
  ``T`` for good; a percentile of ``n`` waits (nearest rank ``r``) is above ``T``
  once ``n - r + 1`` of them are;
- preemptions and lost work only grow;
- a job's wait GPU-seconds are at least the GPU-seconds it has spent pending so far (its
  wait also counts any run a stop threw away), and lost work only grows: the GPU-seconds
  of the pending jobs integrated over time, plus the lost work, is a lower bound of the
  run's final "regret".
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cdk_gpu_share.core.simulate.state import Run

__all__ = ["Broken", "Watch", "WaitLimit"]


class Broken(Exception):
    """A limit of the :class:`Watch` can no longer hold; ``reason`` names it."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class WaitLimit:
    """At most ``allowed`` of ``team``'s jobs of at most ``max_gpus`` GPUs may wait longer than
    ``seconds`` (a wait percentile of those jobs stays at or below ``seconds``)."""

    team: str
    seconds: float
    allowed: int
    max_gpus: float = math.inf
    label: str = ""


@dataclass
class Watch:
    """The limits of one run (see the module docstring). Each is optional.

    ``waits``: :class:`WaitLimit` objects; ``preempted``: per team, the most preemptions
    of its jobs; ``lost``: per team, the most GPU-seconds its jobs may throw away;
    ``regret_seconds``: the most wait GPU-seconds plus lost GPU-seconds of all jobs.
    """

    waits: Sequence[WaitLimit] = ()
    preempted: dict[str, int] = field(default_factory=dict)
    lost: dict[str, float] = field(default_factory=dict)
    regret_seconds: float = math.inf
    # -- run state (set by the engine through the hooks) --
    _deadlines: list = field(default_factory=list, init=False, repr=False)
    _late: list = field(default_factory=list, init=False, repr=False)
    _marked: set = field(default_factory=set, init=False, repr=False)
    _running: dict = field(default_factory=dict, init=False, repr=False)
    _by_team: dict = field(default_factory=dict, init=False, repr=False)
    _count: dict = field(default_factory=dict, init=False, repr=False)
    _lost: dict = field(default_factory=dict, init=False, repr=False)
    _regret: float = field(default=0.0, init=False, repr=False)
    _pending: float = field(default=0.0, init=False, repr=False)
    _since: float = field(default=0.0, init=False, repr=False)
    next_due: float = field(default=math.inf, init=False, repr=False)

    def begin(self, running: dict) -> None:
        """Reset the run state (a watch serves one run at a time); ``running`` is the
        engine's running jobs by trace position, read when a job falls due."""
        self._deadlines = []
        self._marked = set()
        self._running = running
        self._late = [0] * len(self.waits)
        self._by_team = {}
        for k, w in enumerate(self.waits):
            self._by_team.setdefault(w.team, []).append(k)
            if w.allowed < 0:
                raise Broken(f"{w.label or w.team}: no job may wait")
        self._count = {}
        self._lost = {}
        self._regret = 0.0
        self._pending = 0.0
        self._since = 0.0
        self.next_due = math.inf

    # -- hooks the engine calls -------------------------------------------

    def _waiting(self, t: float, delta: float) -> None:
        """The pending GPUs change by ``delta`` at ``t``: their GPU-seconds so far join the regret."""
        self._regret += self._pending * (t - self._since)
        self._since = t
        self._pending += delta
        if self._regret > self.regret_seconds:
            raise Broken("regret")

    def arrived(self, r: Run) -> None:
        """r joins its queue: its waits become due at ``submit + seconds`` of each limit."""
        self._waiting(r.job.submit_time, r.g)
        for k in self._by_team.get(r.job.team, ()):
            w = self.waits[k]
            if r.g <= w.max_gpus + 1e-9:
                due = r.job.submit_time + w.seconds
                heapq.heappush(self._deadlines, (due, r.job.position, k, r))
                if due < self.next_due:
                    self.next_due = due

    def advance(self, t: float) -> None:
        """Before the events at ``t``: every job still waiting past its due time is late."""
        heap = self._deadlines
        while heap and heap[0][0] < t:
            _, position, k, r = heapq.heappop(heap)
            if r.done or position in self._running:
                continue  # started in time (a later stop past due counts in stopped())
            self._late_job(k, position)
        self.next_due = heap[0][0] if heap else math.inf

    def started(self, r: Run, t: float, first: bool) -> None:
        """r starts at ``t``: it no longer waits."""
        self._waiting(t, -r.g)

    def stopped(self, r: Run, t: float, lost: float) -> None:
        """r was stopped at ``t`` throwing ``lost`` GPU-seconds away: it counts against its
        team's preemptions and lost work, and it is late for every limit already due."""
        team = r.job.team
        n = self._count.get(team, 0) + 1
        self._count[team] = n
        limit = self.preempted.get(team)
        if limit is not None and n > limit:
            raise Broken(f"{team}: preemptions")
        gone = self._lost.get(team, 0.0) + lost
        self._lost[team] = gone
        cap = self.lost.get(team)
        if cap is not None and gone > cap:
            raise Broken(f"{team}: lost work")
        self._regret += lost
        self._waiting(t, r.g)  # waits again (and checks the regret)
        for k in self._by_team.get(team, ()):
            w = self.waits[k]
            if r.g <= w.max_gpus + 1e-9:
                # Stopped before its due time, its entry of arrived() is still in the heap;
                # after it, that entry was popped while it ran: it restarts late.
                if t > r.job.submit_time + w.seconds:
                    self._late_job(k, r.job.position)

    def _late_job(self, k: int, position: int) -> None:
        if (position, k) in self._marked:
            return
        self._marked.add((position, k))
        self._late[k] += 1
        w = self.waits[k]
        if self._late[k] > w.allowed:
            raise Broken(w.label or f"{w.team}: waits")
