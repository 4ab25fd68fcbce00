"""The quota advisor: which policy meets what each team needs, at the least cost?

Documentation: ``docs/advisor.md``. The simulator answers "what would this policy do to
our teams?"; the advisor answers the inverse. From a scenario (or a platform config), a
job trace and each team's ``objectives``, it chooses each team's guarantee, ``sharing``
and ``borrow_limit_percent`` (and with ``fleet="size"`` the capacity) so that every
objective holds, ranked by least capacity, then least regret (the GPU-hours the teams
spent waiting or threw away), then fewest changes.

Entry points: :func:`study_of` (the scenario, trace and objectives, prepared once),
:func:`space_of` (what may change), :func:`advise` (the search, with an executor from
:mod:`~cdk_gpu_share.core.advise.executors`), :func:`advice_json` (the documented JSON)
and :func:`advised_scenario` (the scenario to write with ``-o``).

The package, one concern a module:

- :mod:`~cdk_gpu_share.core.advise.space`: a candidate, the search space, the changes;
- :mod:`~cdk_gpu_share.core.advise.evaluate`: one candidate simulated and judged;
- :mod:`~cdk_gpu_share.core.advise.search`: the search;
- :mod:`~cdk_gpu_share.core.advise.executors`: local processes and Ray.

May import: the simulator, the configuration, the policy and the base modules of
:mod:`cdk_gpu_share.core`; nothing of the core imports it but the commands.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, time, timedelta, timezone
from typing import Any

from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.advise.evaluate import Evaluation, Study, candidate_scenario
from cdk_gpu_share.core.advise.search import DEFAULT_BUDGET, DEFAULT_JOB_BUDGET, Advice, Executor, InProcess, Search
from cdk_gpu_share.core.advise.space import PERCENTS, Candidate, Space, choice_of, number
from cdk_gpu_share.core.advise.window_search import WindowAdvice, WindowSearch
from cdk_gpu_share.core.advise.windows import WindowedCandidate, allowed_windows, windowed_input
from cdk_gpu_share.core.configuration.windows import boundaries
from cdk_gpu_share.core.errors import ConfigError, Problem

__all__ = [
    "FLEETS",
    "NO_OBJECTIVES",
    "PERCENTS",
    "Advice",
    "Candidate",
    "Evaluation",
    "Space",
    "Study",
    "advice_json",
    "advise",
    "allowed_windows",
    "advised_scenario",
    "space_of",
    "study_of",
    "study_warnings",
]

FLEETS = ("fixed", "size")


def study_of(scenario: Mapping[str, Any], jobs: Sequence[sim.Job], *, poll: float,
             mode: str = sim.RECLAIM, source: str = "trace", origin: datetime | None = None) -> Study:
    """What every evaluation reads: ``scenario`` (JSON data, already valid), the parsed trace and
    each team's objectives (refused here, naming the field, when unknown or not positive).

    A scenario with time windows needs ``origin`` (the clock time of the trace's second 0;
    refused in one line naming ``--origin`` without it); the study's scenario then holds the
    windows without the values the advisor decides in them (``given`` is the input as it is)."""
    parsed = sim.parse_scenario(scenario, source="scenario")  # refuses bad objectives, naming them
    objectives = {name: o for name, o in parsed.objectives.items() if o}
    base, given = scenario, parsed
    if parsed.windows:
        if parsed.state.groups:
            raise ConfigError(Problem("windows", [w.name for w in parsed.windows],
                                      "time windows are not advised with groups yet",
                                      "remove `windows` or `groups` to advise on the other"), source=parsed.source)
        sim.simulate(parsed, (), mode, origin=origin)  # no jobs: refuses what simulate refuses (no origin)
        base, _ = windowed_input(scenario, parsed.entitlements, objectives)
        parsed = sim.parse_scenario(base, source="scenario")
    entitlements = {name: given.entitlement(name) for name in parsed.team_names}
    return Study(base=base, scenario=parsed, jobs=tuple(jobs), objectives=objectives, mode=mode, poll=poll,
                 days=sim.trace_days_of(jobs), slack=sim.objective_slack(parsed, poll), source=source,
                 entitlements=entitlements, origin=origin if parsed.windows else None, given=scenario)


def space_of(study: Study, *, step: float, fleet: str, percents: tuple[int, ...] = PERCENTS,
             least: float = 0.0) -> Space:
    """The search space of ``study``: guarantees (and with ``fleet="size"`` the capacity) on
    multiples of ``step``, each guarantee at least ``least`` GPUs (what the backend accepts,
    rounded up to the step). Refuses a step that is not a positive whole number and, with
    ``fleet="fixed"``, a capacity that is not a multiple of it."""
    if fleet not in FLEETS:
        raise ConfigError(Problem(field="--fleet", value=fleet, message="is not a fleet choice",
                                  fix="use fixed (keep the capacity) or size (choose it too)"))
    if isinstance(step, bool) or not isinstance(step, (int, float)) or not math.isfinite(step) \
            or step <= 0 or float(step) != int(step):
        raise ConfigError(Problem(field="--step", value=step, message="must be a positive whole number of GPUs",
                                  fix="give the GPUs that guarantees and capacity move by, such as 8"))
    base = study.base
    capacity = float(base["capacity"]["gpu"])
    if fleet == "fixed" and abs(capacity / step - round(capacity / step)) > 1e-9:
        raise ConfigError(Problem(field="--step", value=number(step),
                                  message=f"does not divide the capacity ({number(capacity)} GPUs)",
                                  fix="give a step that divides the capacity, or --fleet size"))
    names = study.names
    max_job = {n: 0.0 for n in names}
    for j in study.jobs:
        max_job[j.team] = max(max_job[j.team], j.gpus)
    caps = []
    for team in base["teams"]:
        limit = (team.get("borrow_limit") or {}).get("gpu")
        caps.append(math.inf if limit is None else float(limit))
    never = tuple(bool(study.objectives.get(n) and study.objectives[n].never_stopped) for n in names)
    was = Candidate(capacity, tuple(choice_of(t) for t in base["teams"]))
    if study.scenario.windows:  # the input's values in each window too
        was = WindowedCandidate(was.capacity, was.choices,
                                windowed_input(study.given, study.scenario.entitlements, study.objectives)[1])
    least = math.ceil(float(least) / step - 1e-9) * float(step) if least > 0 else 0.0
    return Space(names=names, never_stopped=never, max_job=tuple(max_job[n] for n in names), borrow_caps=tuple(caps),
                 step=float(step), fleet=fleet, input=was, percents=percents, least=least)


#: The warning of an advice on a study where no team has an objective.
NO_OBJECTIVES = ("no team has an objective: every configuration is feasible, so the advice only minimizes the "
                 "GPU-hours waited or thrown away; give teams objectives for advice that keeps their promises")


def study_warnings(study: Study) -> tuple[str, ...]:
    """What an advice on ``study`` should say whatever it finds: that no team has an objective."""
    return () if study.objectives else (NO_OBJECTIVES,)


def advise(study: Study, space: Space, executor: Executor | None = None, *,
           progress: Callable[[int, int, str], None] | None = None, budget: int = DEFAULT_BUDGET,
           job_budget: int = DEFAULT_JOB_BUDGET, windows: Sequence[str] | None = None) -> Advice:
    """Search ``space`` for the best configuration (see :mod:`~cdk_gpu_share.core.advise.search`),
    with each team's entitlement and the study's warnings. With time windows in the study, the
    values per window too (:mod:`~cdk_gpu_share.core.advise.window_search`), in ``windows`` (names;
    None: every window of the scenario)."""
    declared = [w.name for w in study.scenario.windows]
    if windows is not None or declared:
        allowed = allowed_windows(declared, windows)
    executor = executor or InProcess(study)
    if declared:
        advice: Advice = WindowSearch(study, space, executor, progress=progress, budget=budget, job_budget=job_budget,
                                      window_names=declared, allowed=allowed).run()
    else:
        advice = Search(study, space, executor, progress=progress, budget=budget, job_budget=job_budget).run()
    advice = replace(advice, entitlements=dict(study.entitlements),
                     warnings=(*study_warnings(study), *advice.warnings))
    if declared:
        assert study.origin is not None
        advice = replace(advice, declared=tuple(study.base["windows"]), origin=study.origin.isoformat(),  # type: ignore[call-arg]
                         timeline=_week(study))
    return advice


def _week(study: Study) -> tuple[dict[str, Any], ...]:
    """The instants of the week from the Monday (00:00 UTC) before the origin at which a window
    opens or the base comes back."""
    assert study.origin is not None
    at = study.origin.astimezone(timezone.utc)
    monday = datetime.combine((at - timedelta(days=at.weekday())).date(), time(0), tzinfo=timezone.utc)
    return tuple({"at": t.isoformat(), "window": w.name if w is not None else None}
                 for t, w in boundaries(study.scenario.windows, monday, monday + timedelta(days=7)))


def advised_scenario(study: Study, candidate: Candidate) -> dict[str, Any]:
    """The input scenario with the candidate's decisions, and the entitlement of each team whose
    guarantee it changes: what ``-o`` writes for ``--scenario`` (``simulate`` on it gives the
    advised figures)."""
    return candidate_scenario(study, candidate)


def _finite(x: float) -> float | None:
    """JSON has no infinity: an objective of target 0 that is not met has no finite ratio (null)."""
    return float(x) if math.isfinite(x) else None


def _window_values(candidate: Candidate, names: Sequence[str], i: int) -> dict[str, Any]:
    """Team ``i``'s values in each window of ``candidate`` (every window, its own where it gives none)."""
    if not isinstance(candidate, WindowedCandidate):
        return {}
    out = {}
    for name, row in zip(names, candidate.windowed):
        d = row[i].as_dict()
        d.pop("sharing")
        out[name] = d
    return out


def _windows_json(advice: Advice) -> dict[str, Any]:
    """What an advice with windows adds to the JSON: the origin, each window with the sum of the
    advised guarantees in it (its row), and the best static advice's figures beside."""
    if not isinstance(advice, WindowAdvice):
        return {}
    best = advice.best.candidate
    assert isinstance(best, WindowedCandidate)
    rows = []
    for spec, row in zip(advice.declared, best.windowed):
        rows.append({**spec, "advised": spec["name"] in advice.allowed,
                     "guarantees": {"gpu": number(math.fsum(ch.guarantee for ch in row))}})
    static = advice.static
    assert static is not None
    return {
        "origin": advice.origin,
        "windows": rows,
        "timeline": [dict(t) for t in advice.timeline],
        "base_guarantees": {"gpu": number(best.total)},
        "static": {"feasible": static.feasible, "regret_gpu_hours": float(static.regret_gpu_hours),
                   "worst_ratio": _finite(static.worst_ratio),
                   "teams": {name: {**ch.as_dict(), "objectives": dict(static.objectives.get(name, {}))}
                             for name, ch in zip(advice.space.names, static.candidate.choices)}},
    }


def advice_json(advice: Advice) -> dict[str, Any]:
    """The documented JSON object of an advice."""
    best, space = advice.best, advice.space
    names = [w["name"] for w in getattr(advice, "declared", ())]
    teams = {}
    for i, (name, ch, was) in enumerate(zip(space.names, best.candidate.choices, space.input.choices)):
        e = advice.entitlements.get(name, was.guarantee)
        teams[name] = {**ch.as_dict(), "entitlement": {"gpu": number(e)}, "was": was.as_dict(),
                       "objectives": dict(best.objectives.get(name, {}))}
        if names:
            teams[name]["windows"] = _window_values(best.candidate, names, i)
            teams[name]["was"]["windows"] = _window_values(space.input, names, i)
    return {
        "feasible": best.feasible,
        "fleet": space.fleet,
        "capacity": {"gpu": number(best.candidate.capacity)},
        "teams": teams,
        "regret_gpu_hours": float(best.regret_gpu_hours),
        "input": {"feasible": advice.input.feasible, "regret_gpu_hours": float(advice.input.regret_gpu_hours),
                  "worst_ratio": _finite(advice.input.worst_ratio)},
        "simulations": advice.simulations,
        "frontier": [{"capacity": {"gpu": number(e.candidate.capacity)}, "feasible": e.feasible,
                      "worst_ratio": _finite(e.worst_ratio), "regret_gpu_hours": float(e.regret_gpu_hours)}
                     for e in advice.frontier],
        "warnings": list(advice.warnings),
        **_windows_json(advice),
    }
