"""A live queue's waiting job: its band, from what the queue shows now and the jobs that finished.

``gpu-share status --job ID`` reads the queue (each backend its own way) and hands over the
running and waiting jobs as plain facts; this module turns them into a
:class:`~cdk_gpu_share.core.simulate.resume.QueueState` (which has no duration field: a live
queue does not know them either), turns a job trace (``gpu-share trace export``) into a
:class:`~cdk_gpu_share.core.eta.predictor.History`, calls :func:`predict`, and words the
answer. Pure: no AWS.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from cdk_gpu_share.core.configuration.windows import boundaries
from cdk_gpu_share.core.eta.predictor import DEFAULT_SAMPLES, FinishedJob, History, predict
from cdk_gpu_share.core.simulate.inputs import RECLAIM, Job, Scenario
from cdk_gpu_share.core.simulate.resume import PendingJob, QueueState, RunningJob
from cdk_gpu_share.core.text import seconds_words

__all__ = ["LiveJob", "history_of", "live_estimate", "live_state", "sentence"]

#: A live queue's times are epoch seconds: the clock time of their second 0, for time windows.
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _on_the_clock(scenario: Scenario) -> Scenario:
    """``scenario`` with its time windows (if any) read at the live queue's own times."""
    return replace(scenario, origin=_EPOCH) if scenario.windows else scenario


@dataclass(frozen=True)
class LiveJob:
    """A job of the live queue as its reader sees it: ``since`` is its start when it runs, its
    submission when it waits (epoch seconds). No duration: the queue does not know one."""

    id: str
    team: str
    gpus: float
    priority: int
    since: float
    running: bool


def live_state(now: float, jobs: Iterable[LiveJob], scenario: Scenario) -> tuple[QueueState, list[str]]:
    """The state of the queue at ``now`` and the ids of the jobs left out (of a team the scenario
    does not have). A running job borrowed when its team's running jobs, in start order, went past
    its guarantee (the one in force at ``now``) with it; the waiting jobs in the order the policy serves them."""
    in_force = scenario.state_at(_EPOCH + timedelta(seconds=now)).teams
    guarantee = {t.name: float(t.guarantee.get("gpu", 0) or 0) for t in in_force}
    known = [j for j in jobs if j.team in guarantee]
    left_out = sorted(j.id for j in jobs if j.team not in guarantee)
    used: dict[str, float] = {}
    running = []
    for j in sorted((j for j in known if j.running), key=lambda j: (j.since, j.id)):
        used[j.team] = used.get(j.team, 0.0) + j.gpus
        running.append(RunningJob(id=j.id, team=j.team, gpus=j.gpus, priority=j.priority, submit=j.since,
                                  start=j.since, borrowed=used[j.team] > guarantee[j.team] + 1e-9))
    pending = [PendingJob(id=j.id, team=j.team, gpus=j.gpus, priority=j.priority, submit=j.since,
                          since=_last_rise(scenario, j.team, j.since, now))
               for j in sorted((j for j in known if not j.running), key=lambda j: (-j.priority, j.since, j.id))]
    return QueueState(now=now, running=tuple(running), pending=tuple(pending)), left_out


def _last_rise(scenario: Scenario, team: str, submit: float, now: float) -> float | None:
    """The last instant in (``submit``, ``now``] at which ``team``'s guarantee rose at a time
    window's boundary (the planner counts a waiting job's ``reclaim_after_seconds`` from it); None: none."""
    if not scenario.windows or now <= submit:
        return None
    found = boundaries(scenario.windows, _EPOCH + timedelta(seconds=submit), _EPOCH + timedelta(seconds=now, microseconds=1))
    rise = None
    for (before, _), (at, _) in zip(found, found[1:]):
        if _guarantee(scenario, team, at) > _guarantee(scenario, team, before) + 1e-9:
            rise = (at - _EPOCH).total_seconds()
    return rise


def _guarantee(scenario: Scenario, team: str, when: datetime) -> float:
    spec = next(t for t in scenario.state_at(when).teams if t.name == team)
    return float(spec.guarantee.get("gpu", 0) or 0)


def history_of(jobs: Sequence[Job], *, origin: float | None, now: float) -> History:
    """The finished jobs of a job trace as a :class:`History` at ``now``. ``origin``: the epoch
    second the trace's times count from (an export's header says it); None: the trace is placed
    so that its last job ends at ``now``. Jobs that would not have ended by ``now`` are left out."""
    if origin is None:
        origin = now - max((j.submit_time + j.duration_s for j in jobs), default=0.0)
    finished = [FinishedJob(team=j.team, submit=origin + j.submit_time, duration_s=j.duration_s, gpus=j.gpus,
                            priority=j.priority, gpus_exact=j.gpus_exact)
                for j in jobs if origin + j.submit_time + j.duration_s <= now + 1e-9]
    return History(finished)


def live_estimate(scenario: Scenario, state: QueueState, job_id: str, history: History, *, poll_seconds: float,
                  samples: int = DEFAULT_SAMPLES, seed: int = 0, mode: str = RECLAIM) -> dict[str, Any]:
    """The band of the waiting job ``job_id`` as the status report's ``eta``: the start from now
    (``start_in_p10_s`` ...), the wait from its submission (``wait_p10_s`` ...) and what it rests
    on (``team_history``, ``history``); ``{"none": why}`` when no finished job is known."""
    band = predict(_on_the_clock(scenario), state, job_id, history, samples=samples, seed=seed, poll_seconds=poll_seconds,
                   mode=mode)
    if band is None:
        return {"none": "the history holds no finished job to learn durations from"}
    waited = state.now - next(p.submit for p in state.pending if p.id == job_id)
    quantiles = {"p10": band.wait_p10_s, "p50": band.wait_p50_s, "p90": band.wait_p90_s}
    return {**{f"start_in_{q}_s": round(max(0.0, w - waited), 3) for q, w in quantiles.items()},
            **{f"wait_{q}_s": round(w, 3) for q, w in quantiles.items()},
            "team_history": band.team_history, "history": band.history, "samples": samples}


def sentence(estimate: dict[str, Any], team: str) -> str:
    """The estimate in one sentence: "expected to start in 12 min to 40 min, most likely in 22 min; based
    on 1,240 finished jobs of team-a"; or why there is none."""
    if "none" in estimate:
        return f"no estimate of when it starts: {estimate['none']}"
    lo, mid, hi = (estimate[f"start_in_{q}_s"] for q in ("p10", "p50", "p90"))
    basis = (f"{estimate['team_history']:,} finished jobs of {team}" if estimate["team_history"]
             else f"{estimate['history']:,} finished jobs of every team ({team} has none yet)")
    if hi < 0.5:  # every replay starts it at once: the capacity it needs is taken back now
        return f"expected to start now, as soon as the scheduler acts; based on {basis}"
    if seconds_words(lo) == seconds_words(hi):
        band = f"in about {seconds_words(hi)}"
    else:
        band = f"within {seconds_words(hi)}" if lo <= 0 else f"in {seconds_words(lo)} to {seconds_words(hi)}"
    return f"expected to start {band}, most likely in {seconds_words(mid)}; based on {basis}"
