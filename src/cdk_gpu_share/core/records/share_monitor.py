"""What the share monitor publishes about each quota share of a Batch quota-management queue.

AWS publishes nothing per quota share (AWS/Batch metrics carry only ``JobQueueName``). The
share monitor reads the queue every minute and turns what it reads into per-team figures;
this module is that arithmetic, pure (no boto3, no CDK), so the Lambda, ``gpu-share
status`` and the tests share one definition of each figure.

Per capacity unit (an ``ml.`` instance type) and team T, with U its usage and G its
guarantee, both in instances:

* **borrowed** B(T) = max(0, U - G);
* **idle guarantee** I(T) = max(0, G - U);
* the **pool**: capacity not guaranteed to anyone (capacity - sum of G); borrowing is
  served from it first (``pool_used`` = min(sum of B, pool));
* **lent** L(T): the rest of the borrowing, sum of B - pool_used, attributed to the teams
  with idle guarantee in proportion to it (Batch assigns idle capacity FIFO and does not
  say whose was used; the proportion is the platform's accounting rule).

So sum of B = sum of L + pool_used, to the last GPU. Figures are converted to GPUs with the
instance catalogue; an instance type the catalogue lacks counts 0 GPUs and is reported.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.policy import reclaim
from cdk_gpu_share.core.records import metrics

__all__ = [
    "CROSS_SHARE",
    "IN_SHARE",
    "UNKNOWN_CAUSE",
    "ShareReading",
    "ShareFigures",
    "share_figures",
    "preemption_cause",
    "figure_metrics",
    "lent_split",
    "HealthAlarms",
    "health_alarms",
    "SILENCE_MINUTES",
]

#: Causes of a preemption, from the event's ``statusReason``.
CROSS_SHARE, IN_SHARE, UNKNOWN_CAUSE = "cross_share", "in_share", "unknown"
_TOL = 1e-9


@dataclass(frozen=True)
class ShareReading:
    """One quota share as read: guarantee and usage in instances per type, the creation times
    (seconds since the epoch) of its waiting jobs and, in the same order, what each asks for in
    instances per type (``None``, or missing at the end: unknown)."""

    team: str
    guarantee: Mapping[str, float]
    usage: Mapping[str, float]
    waiting_created: Sequence[float] = ()
    waiting_need: Sequence[Mapping[str, float] | None] = ()

    def within_guarantee(self, k: int) -> bool:
        """Whether the ``k``-th waiting job would be within the team's guarantee now: the
        planner's rule (:func:`cdk_gpu_share.core.policy.reclaim.within_guarantee`, U + demand <= G in
        every type it asks for). A job of unknown size counts as within while the team uses less
        than its guarantee in some type: the alarm it feeds is the lender's promise, better loud
        than silent."""
        need = self.waiting_need[k] if k < len(self.waiting_need) else None
        if need is None:
            return any(g - self.usage.get(u, 0.0) > reclaim.TOLERANCE for u, g in self.guarantee.items())
        return reclaim.within_guarantee(need, reclaim.TeamSpec(self.team, dict(self.guarantee)), self.usage)


@dataclass(frozen=True)
class ShareFigures:
    """The figures published for one team (GPUs unless named otherwise)."""

    team: str
    guarantee_gpus: float
    used_gpus: float
    used_instances: float
    borrowed_gpus: float
    lent_gpus: float
    idle_guarantee_gpus: float
    waiting_jobs: int
    oldest_wait_seconds: float
    #: The longest wait of a job of this team that would be within the team's guarantee now
    #: (the lender's promise); 0 when none is (the team is at or above its guarantee, or each
    #: waiting job is too large for what is left of it), or nothing waits.
    guarantee_wait_seconds: float
    unknown_types: tuple[str, ...] = field(default=())


def _gpus(instance_type: str) -> float | None:
    info = instances.lookup(instance_type)
    return None if info is None else float(info.gpus)


def lent_split(borrowed: float, pool: float, idle: Mapping[str, float]) -> tuple[float, dict[str, float]]:
    """The accounting rule in one capacity unit: of ``borrowed`` (all teams' borrowing), the part
    served by the ``pool`` (capacity no team is guaranteed) and what each team with ``idle``
    guarantee lent, in proportion to it. Returns (from the pool, team -> lent); they add up to
    ``borrowed`` whenever anything is idle."""
    from_pool = min(borrowed, max(0.0, pool))
    from_lenders = borrowed - from_pool
    total_idle = math.fsum(idle.values())
    if from_lenders <= _TOL or total_idle <= _TOL:
        return from_pool, {}
    return from_pool, {team: from_lenders * i / total_idle for team, i in idle.items() if i > 0}


def _lent_by_unit(readings: Sequence[ShareReading], capacity: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """team -> unit -> instances lent, by :func:`lent_split`."""
    lent: dict[str, dict[str, float]] = {r.team: {} for r in readings}
    units = set(capacity) | {u for r in readings for u in (*r.guarantee, *r.usage)}
    for unit in sorted(units):
        borrowed = math.fsum(max(0.0, r.usage.get(unit, 0.0) - r.guarantee.get(unit, 0.0)) for r in readings)
        idle = {r.team: max(0.0, r.guarantee.get(unit, 0.0) - r.usage.get(unit, 0.0)) for r in readings}
        pool = capacity.get(unit, 0.0) - math.fsum(r.guarantee.get(unit, 0.0) for r in readings)
        for team, n in lent_split(borrowed, pool, idle)[1].items():
            lent[team][unit] = n
    return lent


def share_figures(readings: Sequence[ShareReading], capacity: Mapping[str, float], now: float) -> list[ShareFigures]:
    """The figures of every share, in the order given. ``capacity``: instances per type of the queue."""
    lent = _lent_by_unit(readings, capacity)
    out = []
    for r in readings:
        unknown = sorted(u for u in (*r.guarantee, *r.usage) if _gpus(u) is None)

        def gpus(amounts: Mapping[str, float]) -> float:
            return math.fsum(n * (_gpus(u) or 0.0) for u, n in amounts.items())

        units = set(r.guarantee) | set(r.usage)
        borrowed = {u: max(0.0, r.usage.get(u, 0.0) - r.guarantee.get(u, 0.0)) for u in units}
        idle = {u: max(0.0, r.guarantee.get(u, 0.0) - r.usage.get(u, 0.0)) for u in units}
        waits = [max(0.0, now - c) for c in r.waiting_created]
        oldest = max(waits, default=0.0)
        owed = max((w for k, w in enumerate(waits) if r.within_guarantee(k)), default=0.0)
        out.append(ShareFigures(
            team=r.team,
            guarantee_gpus=gpus(r.guarantee),
            used_gpus=gpus(r.usage),
            used_instances=math.fsum(r.usage.values()),
            borrowed_gpus=gpus(borrowed),
            lent_gpus=gpus(lent[r.team]),
            idle_guarantee_gpus=gpus(idle),
            waiting_jobs=len(r.waiting_created),
            oldest_wait_seconds=oldest,
            guarantee_wait_seconds=owed,
            unknown_types=tuple(dict.fromkeys(unknown)),
        ))
    return out


#: The monitor's promise: an alarm when it could not read the queue for this many minutes.
SILENCE_MINUTES = 15
#: Errors (out of the runs in the window) that make the errors alarm fire, at most.
_ERRORS_TO_ALARM = 3


@dataclass(frozen=True)
class HealthAlarms:
    """The shape of the monitor's two health alarms at a schedule, both on 1-minute periods.

    * **silence**: the heartbeat (one per published reading) is missing, treated as breaching,
      in all of the last ``window_minutes`` minutes;
    * **errors**: the function's own ``Errors`` were at least 1 in ``errors_to_alarm`` of the
      last ``window_minutes`` minutes (missing: not breaching, no run).
    """

    schedule_minutes: int
    window_minutes: int
    errors_to_alarm: int

    @property
    def period_seconds(self) -> int:
        return 60


def health_alarms(schedule_minutes: int) -> HealthAlarms:
    """The health alarms of a monitor that reads every ``schedule_minutes``.

    One-minute periods, so a period never holds two readings or none by the way the schedule
    falls on the period boundaries. The window is :data:`SILENCE_MINUTES`, or one schedule and a
    minute when the schedule is longer (a monitor that reads every hour cannot tell a silent
    quarter of an hour from a healthy one): a healthy monitor, whose readings come at most a
    schedule and a minute apart (a reading is late by at most its duration), always has a
    heartbeat in the window, and a silent one has none in it. The errors alarm asks for as many
    erroring minutes as there are surely runs in the window (a run may start up to a minute
    late, so runs are at most ``schedule + 1`` minutes apart), at most three.
    """
    window = max(SILENCE_MINUTES, schedule_minutes + 1)
    return HealthAlarms(schedule_minutes, window, max(1, min(_ERRORS_TO_ALARM, window // (schedule_minutes + 1))))


def preemption_cause(status_reason: object) -> str:
    """``cross_share`` (lent capacity taken back), ``in_share`` (a higher-priority job of the same
    share) or ``unknown``, from a preemption event's ``statusReason``."""
    text = str(status_reason or "").lower()
    if "cross-share" in text or "cross share" in text:
        return CROSS_SHARE
    if "in-share" in text or "in share" in text:
        return IN_SHARE
    return UNKNOWN_CAUSE


def figure_metrics(f: ShareFigures) -> dict[str, tuple[float, str]]:
    """The metrics of one team's figures: name -> (value, CloudWatch unit)."""
    return {
        metrics.USAGE: (f.used_gpus, "Count"),
        metrics.USED_INSTANCES: (f.used_instances, "Count"),
        metrics.GUARANTEE: (f.guarantee_gpus, "Count"),
        metrics.BORROWED: (f.borrowed_gpus, "Count"),
        metrics.LENT: (f.lent_gpus, "Count"),
        metrics.IDLE_GUARANTEE: (f.idle_guarantee_gpus, "Count"),
        metrics.PENDING: (float(f.waiting_jobs), "Count"),
        metrics.OLDEST_WAIT_SECONDS: (f.oldest_wait_seconds, "Seconds"),
        metrics.GUARANTEE_WAIT_SECONDS: (f.guarantee_wait_seconds, "Seconds"),
    }


def totals(figures: Iterable[ShareFigures]) -> dict[str, float]:
    """Sums over the teams of the GPU figures (what reconciles: borrowed = lent + pool used)."""
    figures = list(figures)
    return {
        "used_gpus": math.fsum(f.used_gpus for f in figures),
        "borrowed_gpus": math.fsum(f.borrowed_gpus for f in figures),
        "lent_gpus": math.fsum(f.lent_gpus for f in figures),
    }
