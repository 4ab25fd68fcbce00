"""A run against the teams' objectives: the private-cluster reference and each objective's verdict.

:func:`private_fit_waits` is the reference ``no_worse_than_private`` compares with: the
team alone in a private cluster of exactly its entitlement (``static``), its jobs that fit
that entitlement. :func:`evaluate_run` gives every team's objectives in a finished run
(:func:`cdk_gpu_share.core.configuration.objectives.evaluate`, the one definition ``simulate`` and
``advise`` share).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from cdk_gpu_share.core.configuration import objectives as obj
from cdk_gpu_share.core.simulate.accounting import SimResult
from cdk_gpu_share.core.simulate.engine import simulate
from cdk_gpu_share.core.simulate.inputs import DEFAULT_POLL_SECONDS, RESOURCE, STATIC, TOL, Job, Scenario

__all__ = ["evaluate_run", "objective_slack", "private_fit_waits", "trace_days_of"]


def private_fit_waits(scenario: Scenario, jobs: Sequence[Job], team: str, guarantee: float | None = None) -> dict[str, float]:
    """``{"p50", "p95", "p99"}``: the wait percentiles (seconds, nearest rank) of ``team``'s
    jobs that fit its entitlement (gpus <= E), replayed alone in a private cluster of exactly
    E GPUs (``static``). ``guarantee``: that size (default: the team's entitlement in
    ``scenario``, its guarantee unless it was promised another). With no such job (E = 0
    among them) every percentile is 0."""
    g = scenario.entitlement(team) if guarantee is None else float(guarantee)
    mine = [j for j in jobs if j.team == team and j.gpus <= g + TOL]
    if not mine:
        return {q: 0 for q in obj.PERCENTILES}
    spec = replace(scenario.team(team), guarantee={RESOURCE: g})
    state = replace(scenario.state, capacity={RESOURCE: g}, teams=(spec,))
    alone = Scenario(state=state, capacity=g, source=scenario.source)
    result = simulate(alone, mine, STATIC, source=f"{team}'s jobs")
    return result.teams[team].fit_wait_percentiles()


def objective_slack(scenario: Scenario, poll_seconds: float = DEFAULT_POLL_SECONDS) -> float:
    """The allowance of ``no_worse_than_private``: how long a shared team may wait for its
    lent capacity to come back (the planner's period + ``reclaim_after_seconds``) + 60 s."""
    return float(poll_seconds) + float(scenario.state.settings.reclaim_after_seconds) + 60.0


def trace_days_of(jobs: Sequence[Job]) -> float:
    """D of a trace (:func:`cdk_gpu_share.core.configuration.objectives.trace_days`): its submit span in days, at least 1."""
    if not jobs:
        return 1.0
    submits = [j.submit_time for j in jobs]
    return obj.trace_days(min(submits), max(submits))


def evaluate_run(
    scenario: Scenario,
    jobs: Sequence[Job],
    result: SimResult,
    *,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
    objectives: Mapping[str, obj.Objectives] | None = None,
    private_waits: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """``{team: {KEY: {"target", "value", "met"}}}`` for every team with objectives in the run
    ``result`` of ``jobs`` on ``scenario``.

    ``objectives``: per team (default: the scenario's). ``private_waits``: per team, its
    :func:`private_fit_waits` when already known (a search reuses them); the others are
    simulated here for the teams whose objectives need them.
    """
    objectives = scenario.objectives if objectives is None else objectives
    days = trace_days_of(jobs)
    slack = objective_slack(scenario, poll_seconds)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name in scenario.team_names:
        targets = objectives.get(name)
        if not targets:
            continue
        private = None
        if targets.needs_private:
            private = (private_waits or {}).get(name)
            if private is None:
                private = private_fit_waits(scenario, jobs, name)
        out[name] = obj.evaluate(targets, result.teams[name].figures(), days, private, slack)
    result.objectives = out
    return out
