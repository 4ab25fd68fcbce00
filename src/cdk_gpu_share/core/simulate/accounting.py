"""The simulator's metrics: what a run measured and how it is reported.

:class:`SimResult` is the outcome of a run; :meth:`SimResult.to_dict` is the JSON that
``gpu-share simulate --json`` prints (waits as nearest-rank percentiles, GPU-seconds as
floats, counts as integers). The engine keeps the running totals as events happen
(busy, lost and borrowed GPU-seconds, preemptions, the usage and pending logs); when
the run ends, what is measured per job is added here (:func:`_tally_jobs`: waits,
owed waits, outcomes; :func:`_window`). :func:`demand_excess` gives the fluid lower
bounds the benchmark prints beside the simulated waits.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from cdk_gpu_share.core.simulate.figures import TeamResult, nearest_rank
from cdk_gpu_share.core.simulate.inputs import TOL, Job, Scenario, _num
from cdk_gpu_share.core.simulate.state import Run

__all__ = [
    "JobOutcome",
    "SimResult",
    "TeamResult",
    "demand_excess",
    "nearest_rank",
    "result_json",
]


@dataclass
class JobOutcome:
    """What happened to one job: its final start, completion, number of stops."""

    id: str
    team: str
    submit_time: float
    final_start: float
    completion: float
    stops: int
    #: Seconds it was pending while its team owed it room (its owed wait).
    owed_s: float
    busy_gpu_seconds: float


@dataclass
class SimResult:
    """The outcome of :func:`simulate`. :meth:`to_dict` is the JSON of ``gpu-share simulate --json``.

    ``series_t`` and ``series_usage`` are a step function of each team's GPU usage
    (``series_usage[i][k]`` is team ``team_names[k]`` from ``series_t[i]`` on), for plots;
    :attr:`series_waiting` is the same for the GPUs of each team's pending jobs (waiting for a
    first start, or again after a preemption). Neither is part of :meth:`to_dict`.
    """

    mode: str
    capacity: float
    team_names: tuple[str, ...]
    guarantees: tuple[float, ...]
    jobs: int
    completed: int
    window: tuple[float, float]
    busy_gpu_seconds: float
    preemptions: int
    lost_gpu_seconds: float
    wait_gpu_seconds: float
    sim_seconds: float
    teams: dict[str, TeamResult]
    outcomes: list[JobOutcome]
    series_log: list = field(default_factory=list, repr=False)
    planner_calls: int = 0
    max_total_usage: float = 0.0
    #: (time, index in team_names) of every preemption, in time order (for plots).
    preemption_events: list[tuple[float, int]] = field(default_factory=list)
    #: (time, team index, GPUs) each time a job enters (+) or leaves (-) its team's pending set.
    pending_log: list = field(default_factory=list, repr=False)
    #: The planner's victim order (``settings.victim_order``); in :meth:`to_dict` unless the default.
    victim_order: str = "youngest"
    #: Per team with objectives, each objective's ``{"target", "value", "met"}``, once
    #: :func:`~cdk_gpu_share.core.simulate.evaluate_run` has judged the run; in :meth:`to_dict`
    #: as the team's ``objectives``.
    objectives: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: The organisation's tree: each group's teams (every team below it); in :meth:`to_dict` as
    #: ``groups``, each with its teams' figures together. Empty without groups.
    group_members: dict[str, list[str]] = field(default_factory=dict)
    _series: tuple | None = field(default=None, init=False, repr=False, compare=False)
    _waiting: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def _build_series(self) -> tuple:
        # The log holds one (time, team index, usage after) per change; the series has
        # one snapshot of every team per distinct time, after that time's last change.
        if self._series is None:
            times: list[float] = []
            snaps: list[tuple[float, ...]] = []
            current = [0.0] * len(self.team_names)
            for t, k, u in self.series_log:
                current[k] = u
                if times and times[-1] == t:
                    snaps[-1] = tuple(current)
                else:
                    times.append(t)
                    snaps.append(tuple(current))
            self._series = (times, snaps)
        return self._series

    @property
    def series_waiting(self) -> tuple[list[float], list[tuple[float, ...]]]:
        """(times, GPUs pending per team from each time on): the simulator's own pending set,
        one snapshot per distinct time after that time's last change (a job that arrives and
        starts at once never shows). Summed exactly (floats are exact fractions), so a team
        with nothing pending is 0.0, never a rounding residue."""
        if self._waiting is None:
            times: list[float] = []
            snaps: list[tuple[float, ...]] = []
            level = [Fraction(0)] * len(self.team_names)
            for t, k, g in self.pending_log:
                level[k] += Fraction(g)
                snap = tuple(float(x) for x in level)
                if times and times[-1] == t:
                    snaps[-1] = snap
                else:
                    times.append(t)
                    snaps.append(snap)
            self._waiting = (times, snaps)
        return self._waiting

    @property
    def series_t(self) -> list[float]:
        """The times of :attr:`series_usage`: one per distinct time the usage changed."""
        return self._build_series()[0]

    @property
    def series_usage(self) -> list[tuple[float, ...]]:
        """Each team's GPUs in use from the matching :attr:`series_t` on (order of ``team_names``)."""
        return self._build_series()[1]

    @property
    def utilization(self) -> float:
        """Busy GPU-seconds over capacity GPU-seconds in the window (work later lost counts as busy)."""
        span = self.window[1] - self.window[0]
        if span <= 0 or self.capacity <= 0:
            return 0.0
        return self.busy_gpu_seconds / (self.capacity * span)

    @property
    def wait_gpu_hours(self) -> float:
        """The sum over all jobs of the wait to their final start times their GPUs, in GPU-hours."""
        return self.wait_gpu_seconds / 3600.0

    def to_dict(self) -> dict[str, Any]:
        """The result as ``gpu-share simulate --json`` prints it."""
        return {
            "mode": self.mode,
            "jobs": self.jobs,
            "completed": self.completed,
            "window_s": [_num(self.window[0]), _num(self.window[1])],
            "utilization": float(self.utilization),
            "preemptions": self.preemptions,
            # floats as the documented example shows them (12345.0, 812.5), also when whole
            "lost_gpu_seconds": float(self.lost_gpu_seconds),
            "wait_gpu_hours": float(self.wait_gpu_hours),
            "sim_seconds": float(round(self.sim_seconds, 3)),
            "teams": {name: {**self.teams[name].to_dict(),
                             **({"objectives": self.objectives[name]} if name in self.objectives else {})}
                      for name in self.team_names},
            **({} if self.victim_order == "youngest" else {"victim_order": self.victim_order}),
            **({"groups": {g: self.group_result(g).to_dict() for g in self.group_members}}
               if self.group_members else {}),
        }

    def group_result(self, group: str) -> TeamResult:
        """A group's figures: its teams' counts and GPU-seconds summed, percentiles over their jobs."""
        parts = [self.teams[t] for t in self.group_members[group]]
        out = TeamResult(name=group, guarantee=math.fsum(p.guarantee for p in parts))
        for p in parts:
            out.jobs += p.jobs
            out.waits += p.waits
            out.reclaim_waits += p.reclaim_waits
            out.preempted += p.preempted
        out.gpu_seconds = math.fsum(p.gpu_seconds for p in parts)
        out.borrowed_gpu_seconds = math.fsum(p.borrowed_gpu_seconds for p in parts)
        out.lost_gpu_seconds = math.fsum(p.lost_gpu_seconds for p in parts)
        return out


def _tally_jobs(runs: Sequence[Run]) -> tuple[list[JobOutcome], float]:
    """Count each job and its wait into its team's result (its owed wait too, when it was
    owed at all); return the completed jobs' outcomes, in trace order, and the sum of their
    waits times their GPUs."""
    outcomes: list[JobOutcome] = []
    wait_gs = 0.0
    for r in runs:
        res = r.t.result
        res.jobs += 1
        if not r.done:
            continue
        wait = r.start - r.job.submit_time
        res.waits.append(wait)
        wait_gs += wait * r.g
        if r.g <= (res.guarantee if res.entitlement is None else res.entitlement) + TOL:
            res.fit_waits.append(wait)
        if r.owed > 0:
            res.reclaim_waits.append(r.owed)
        outcomes.append(JobOutcome(id=r.job.id, team=r.job.team, submit_time=r.job.submit_time,
                                   final_start=r.start, completion=r.completion, stops=r.stops,
                                   owed_s=r.owed, busy_gpu_seconds=r.busy))
    return outcomes, wait_gs


def _window(jobs: Sequence[Job], last_completion: float | None) -> tuple[float, float]:
    """From the first submit time to the last completion: the span utilization is measured over."""
    if not jobs:
        return (0.0, 0.0)
    first = min(j.submit_time for j in jobs)
    last = last_completion if last_completion is not None else first
    return (first, max(first, last))


def demand_excess(scenario: Scenario, jobs: Sequence[Job]) -> dict[str, Any]:
    """GPU-hours of demand above capacity, in the fluid model (every job runs from its
    submit time for its duration, no queueing):

    - ``shared``: the excess of the total demand over the whole pool, integrated;
    - ``partitioned``: per team, the excess of its demand over its guarantee, integrated
      (``partitioned_by_team``), and their sum (``partitioned``).

    Lower bounds of the wait GPU-hours a perfectly shared pool and strict partitions
    would need to absorb that demand.
    """
    names = scenario.team_names
    idx = {n: i for i, n in enumerate(names)}
    g = [scenario.guarantee(n) for n in names]
    events: list[tuple[float, int, float]] = []
    for j in jobs:
        if j.duration_s <= 0:
            continue
        events.append((j.submit_time, idx[j.team], j.gpus))
        events.append((j.submit_time + j.duration_s, idx[j.team], -j.gpus))
    events.sort(key=lambda e: e[0])
    demand = [Fraction(0)] * len(names)
    exact: dict = {}
    shared = 0.0
    per_team = [0.0] * len(names)
    last_t = events[0][0] if events else 0.0
    i = 0
    while i < len(events):
        t = events[i][0]
        dt = t - last_t
        if dt > 0:
            d = [float(x) for x in demand]
            shared += max(0.0, sum(d) - scenario.capacity) * dt
            for k in range(len(names)):
                per_team[k] += max(0.0, d[k] - g[k]) * dt
        while i < len(events) and events[i][0] == t:
            _, k, amount = events[i]
            q = exact.get(amount)
            if q is None:
                q = exact[amount] = Fraction(amount)
            demand[k] += q
            i += 1
        last_t = t
    return {
        "shared_gpu_hours": shared / 3600.0,
        "partitioned_gpu_hours": sum(per_team) / 3600.0,
        "partitioned_by_team_gpu_hours": {n: per_team[k] / 3600.0 for k, n in enumerate(names)},
    }


def result_json(result: SimResult) -> str:
    """The documented JSON object as text."""
    return json.dumps(result.to_dict())

