"""One candidate, simulated and judged by the teams' objectives.

:class:`Study` is what every evaluation reads and never changes: the input scenario, the
trace (parsed once per run, shipped once per worker), each team's objectives and the
figures they are measured with. :func:`evaluate` simulates a candidate and measures
each objective through :mod:`cdk_gpu_share.core.configuration.objectives` (the one definition that
``simulate`` reports too). Given limits (a worst ratio the candidate must not exceed, a
regret it must stay under), the simulation stops as soon as the candidate cannot meet
them (:class:`~cdk_gpu_share.core.simulate.watch.Watch`): such an :class:`Evaluation`
is *incomplete* and only says "worse than the limits".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.advise.space import Candidate, number, scenario_dict
from cdk_gpu_share.core.advise.windows import guarantees_of, team_windows
from cdk_gpu_share.core.configuration import objectives as obj
from cdk_gpu_share.core.errors import ConfigError

__all__ = ["Evaluation", "Limits", "PrivateRef", "Study", "candidate_scenario", "evaluate", "judge", "meets_alone", "private_ref",
           "run_task", "wait_limits"]

_TOL = 1e-9
_QUANTILES = (50, 95, 99)


@dataclass(frozen=True)
class Study:
    """The input scenario (JSON data), the parsed trace, each team's objectives (by name), the
    simulated mode, the planner's period, D (the trace's submit span in days) and the slack of
    ``no_worse_than_private`` (poll + reclaim_after + 60 s)."""

    base: Mapping[str, Any]
    scenario: sim.Scenario
    jobs: tuple[sim.Job, ...]
    objectives: Mapping[str, obj.Objectives]
    mode: str
    poll: float
    days: float
    slack: float
    source: str = "trace"
    #: Each team's entitlement E in GPUs (by name): its ``objectives.entitlement``, else its
    #: guarantee in the input. Fixed for the whole search: candidates change guarantees only.
    entitlements: Mapping[str, float] = field(default_factory=dict)
    #: The clock time of the trace's second 0, which a scenario with time windows is replayed from.
    origin: datetime | None = None
    #: The input scenario as given (JSON data): ``base`` unless it has time windows, whose values
    #: the advisor decides are taken out of ``base``.
    given: Mapping[str, Any] = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t["name"] for t in self.base["teams"])

    @cached_property
    def by_team(self) -> Mapping[str, tuple[sim.Job, ...]]:
        """Each team's jobs in trace order, grouped once: a team alone never scans the others'."""
        grouped: dict[str, list[sim.Job]] = {}
        for j in self.jobs:
            grouped.setdefault(j.team, []).append(j)
        return {name: tuple(jobs) for name, jobs in grouped.items()}

    def team_jobs(self, team: str) -> tuple[sim.Job, ...]:
        return self.by_team.get(team, ())


def candidate_scenario(study: Study, candidate: Candidate) -> dict[str, Any]:
    """The scenario (JSON data) of ``candidate``: the input's with the candidate's decisions, and
    ``objectives.entitlement`` on each team whose guarantee now differs from its entitlement, so
    that the team is judged against what it was promised, here and by ``simulate`` on ``-o``."""
    out = scenario_dict(study.base, candidate)
    names = [w["name"] for w in out.get("windows") or ()]
    for i, team in enumerate(out["teams"]):
        values = team_windows(candidate, names, i)
        if values:  # the decided values in each window, beside what the input gives there (a borrow_limit)
            given = team.get("windows") or {}
            team["windows"] = {name: {**given.get(name, {}), **values.get(name, {})}
                               for name in names if name in given or name in values}
        e = study.entitlements.get(team["name"])
        objectives = team.get("objectives") or {}
        if e is None or all(abs(g - e) <= _TOL for g in guarantees_of(candidate, i)) \
                or obj.ENTITLEMENT_KEY in objectives:
            continue
        team["objectives"] = {**objectives, obj.ENTITLEMENT_KEY: {"gpu": number(e)}}
    return out


@dataclass(frozen=True)
class PrivateRef:
    """A team alone in a private cluster of exactly ``guarantee`` GPUs (its entitlement,
    ``static``): the wait
    percentiles of its jobs that fit it (``{"p50", "p95", "p99"}``, seconds), as
    :func:`~cdk_gpu_share.core.simulate.private_fit_waits` measures them."""

    team: str
    guarantee: float
    waits: Mapping[str, float]


@dataclass(frozen=True)
class Limits:
    """What a candidate must not exceed to be of use: its worst objective ratio and its regret
    (GPU-hours). ``math.inf``: no limit (the simulation runs to its end)."""

    worst_ratio: float = math.inf
    regret_gpu_hours: float = math.inf

    def covers(self, other: Limits) -> bool:
        """Whether a candidate beyond ``self`` is beyond ``other`` too (other's limits are tighter)."""
        return other.worst_ratio <= self.worst_ratio and other.regret_gpu_hours <= self.regret_gpu_hours


@dataclass(frozen=True)
class Evaluation:
    """A candidate's figures. Incomplete (``complete`` False): the simulation stopped when the
    candidate went beyond ``limits`` (``reason`` says which); its figures are then unknown."""

    candidate: Candidate
    complete: bool
    feasible: bool = False
    worst_ratio: float = math.inf
    excess: float = math.inf
    regret_gpu_hours: float = math.inf
    objectives: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)
    limits: Limits = Limits()
    reason: str = ""


def private_ref(study: Study, team: str, guarantee: float) -> PrivateRef:
    """The private-cluster reference of ``team`` at ``guarantee`` (one simulation)."""
    return PrivateRef(team, guarantee, dict(sim.private_fit_waits(study.scenario, study.team_jobs(team), team,
                                                                    guarantee)))


def meets_alone(study: Study, team: str, guarantee: float) -> bool:
    """Whether ``team``, alone and ``static`` in a cluster of ``guarantee`` GPUs, runs all its jobs
    and meets all its objectives (one simulation): the test of private sizing."""
    mine = study.team_jobs(team)
    if any(j.gpus > guarantee + _TOL for j in mine):
        return False
    objectives = study.objectives.get(team)
    if not mine or not objectives:
        return True
    alone = {"capacity": {"gpu": guarantee}, "settings": study.base.get("settings", {}),
             "teams": [{"name": team, "guarantee": {"gpu": guarantee}, "sharing": "reserve",
                        "objectives": dict(objectives.targets)}]}
    scenario = sim.parse_scenario(alone, source=f"{team} alone")
    result = sim.simulate(scenario, mine, sim.STATIC, poll_seconds=study.poll, source=study.source)
    own = {team: result.teams[team].fit_wait_percentiles()}
    found = sim.evaluate_run(scenario, mine, result, poll_seconds=study.poll, private_waits=own)
    return all(e["met"] for e in found.get(team, {}).values())


def wait_limits(study: Study, candidate: Candidate, bound: float,
                private: Mapping[str, PrivateRef]) -> tuple[list[sim.WaitLimit], dict[str, int], dict[str, float]]:
    """The watch's limits of a candidate whose worst ratio must stay at or below ``bound``:
    per objective, the figure beyond which its ratio exceeds ``bound``."""
    waits: list[sim.WaitLimit] = []
    preempted: dict[str, int] = {}
    lost: dict[str, float] = {}
    counts: dict[str, list[float]] = {}
    for j in study.jobs:
        counts.setdefault(j.team, []).append(j.gpus)
    for name in study.names:
        objectives = study.objectives.get(name)
        if objectives is None:
            continue
        targets = objectives.targets
        sizes = counts.get(name, [])
        n = len(sizes)
        for q in _QUANTILES:
            target = targets.get(f"wait_p{q}_minutes")
            if target is not None and n:
                waits.append(sim.WaitLimit(name, 60.0 * target * bound, n - _rank(q, n), label=f"{name}: wait p{q}"))
        if targets.get("no_worse_than_private") and name in private:
            ref = private[name]
            fitting = sum(1 for g in sizes if g <= ref.guarantee + _TOL)  # the jobs that fit its entitlement
            if fitting:
                for q in _QUANTILES:
                    limit = float(ref.waits[f"p{q}"]) + study.slack + 3600.0 * (bound - 1.0)
                    waits.append(sim.WaitLimit(name, limit, fitting - _rank(q, fitting), max_gpus=ref.guarantee,
                                               label=f"{name}: no worse than private p{q}"))
        target = targets.get("max_preempted_per_day")
        if target is not None:
            preempted[name] = math.floor(target * study.days * bound + _TOL) if math.isfinite(bound) else 1 << 62
        target = targets.get("max_lost_gpu_hours_per_day")
        if target is not None and math.isfinite(bound):
            lost[name] = target * study.days * 3600.0 * bound
    return waits, preempted, lost


def _rank(q: int, n: int) -> int:
    """The nearest rank of percentile ``q`` of ``n`` values (1-based)."""
    return max(1, -(-q * n // 100))


def evaluate(study: Study, candidate: Candidate, private: Mapping[str, PrivateRef],
             limits: Limits = Limits()) -> Evaluation:
    """Simulate ``candidate`` and judge it; stop early once it is beyond ``limits``."""
    try:  # a candidate the simulator refuses (a pool below a promise) is of no use, not a crash
        scenario = sim.parse_scenario(candidate_scenario(study, candidate), source="candidate")
        sim.check_jobs(scenario, study.jobs, study.mode, source=study.source)
    except ConfigError as exc:
        return Evaluation(candidate, complete=False, limits=limits, reason=f"cannot run: {exc}")
    watch = None
    if math.isfinite(limits.worst_ratio) or math.isfinite(limits.regret_gpu_hours):
        waits, preempted, lost = (wait_limits(study, candidate, limits.worst_ratio, private)
                                  if math.isfinite(limits.worst_ratio) else ([], {}, {}))
        watch = sim.Watch(waits=waits, preempted=preempted, lost=lost,
                          regret_seconds=limits.regret_gpu_hours * 3600.0)
    try:
        result = sim.simulate(scenario, study.jobs, study.mode, poll_seconds=study.poll, source=study.source,
                              watch=watch, origin=study.origin)
    except sim.Broken as exc:
        return Evaluation(candidate, complete=False, limits=limits, reason=exc.reason)
    except ConfigError as exc:  # a job left waiting for good (too large for its team in every window)
        return Evaluation(candidate, complete=False, limits=limits, reason=f"cannot run: {exc}")
    return judge(study, candidate, scenario, result, private, limits)


def judge(study: Study, candidate: Candidate, scenario: sim.Scenario, result: sim.SimResult,
          private: Mapping[str, PrivateRef], limits: Limits = Limits()) -> Evaluation:
    """The objectives of a finished simulation of ``candidate`` (``scenario``)."""
    found = team_objectives(study, scenario, result, private)
    worst = obj.worst_ratio(found) if found else 0.0
    ratios = [_excess(k, e) for ev in found.values() for k, e in ev.items()]
    feasible = all(e["met"] for ev in found.values() for e in ev.values())
    regret = result.wait_gpu_hours + result.lost_gpu_seconds / 3600.0
    return Evaluation(candidate, complete=True, feasible=feasible, worst_ratio=worst,
                      excess=math.fsum(ratios), regret_gpu_hours=regret, objectives=found, limits=limits)


def _excess(key: str, e: Mapping[str, Any]) -> float:
    """How far beyond its target an unmet objective is (0 when met): the search's guide on a
    plateau of the worst ratio."""
    if e["met"]:
        return 0.0
    r = obj.ratio(key, e)
    return r - 1.0 if math.isfinite(r) else 1e12


def team_objectives(study: Study, scenario: sim.Scenario, result: sim.SimResult,
                    private: Mapping[str, PrivateRef]) -> dict[str, dict[str, dict[str, Any]]]:
    """Each team's objectives measured on ``result`` (teams without objectives left out)."""
    waits = {name: ref.waits for name, ref in private.items()}
    return sim.evaluate_run(scenario, study.jobs, result, poll_seconds=study.poll, private_waits=waits)


def run_task(study: Study, task: tuple) -> Any:
    """One unit of work of the search, as an executor runs it: ``("evaluate", candidate, private,
    limits)`` gives an :class:`Evaluation`, ``("private", team, guarantee)`` a :class:`PrivateRef`,
    ``("alone", team, guarantee)`` whether :func:`meets_alone`."""
    kind = task[0]
    if kind == "evaluate":
        return evaluate(study, *task[1:])
    if kind == "private":
        return private_ref(study, *task[1:])
    if kind == "alone":
        return meets_alone(study, *task[1:])
    raise ValueError(f"unknown task {kind!r}")
