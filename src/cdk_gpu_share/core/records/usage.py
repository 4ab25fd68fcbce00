"""GPU-hour accounting per team and day, from the per-minute metrics the platform publishes.

``gpu-share usage`` reads back, for each team of a queue, the gauges the share monitor (Batch
quota management) or the reclaimer (fair share) publish every minute, and sums them per UTC
day. Pure: the caller reads CloudWatch and hands over per team and metric a mapping from each
minute (epoch seconds) to its value.

Per team and minute, with U its GPUs in use and G its guarantee:

* **borrowed** max(0, U - G) and **idle guarantee** max(0, G - U), or, where the metrics give
  them (``BorrowedGpus``, ``IdleGuaranteeGpus``: the share monitor counts them per instance
  type, so a team that borrows one type while another idles has both), those; **within
  guarantee** U - borrowed;
* **lent**: the share monitor's ``LentGpus`` where published; otherwise (the fair-share queue)
  the same rule, here: borrowing is served first from capacity no team is guaranteed, then from
  the teams' idle guarantees in proportion to them;
* each figure times one minute, in GPU-hours. A minute without both U and G for a team is not
  counted (``minutes`` says how many were).

So, per team and day, within + idle = guarantee x hours; and over the teams, borrowed = lent +
unguaranteed capacity used (reported as the pool's row).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from cdk_gpu_share.core.records import metrics
from cdk_gpu_share.core.records.share_monitor import lent_split

__all__ = ["TeamDay", "daily", "POOL"]

#: The name of the row of unguaranteed capacity used by borrowers.
POOL = "(unguaranteed)"
_MINUTE_HOURS = 1 / 60


@dataclass
class TeamDay:
    """One team's GPU-hours on one UTC day."""

    day: str
    team: str
    within_gpu_hours: float = 0.0
    borrowed_gpu_hours: float = 0.0
    lent_gpu_hours: float = 0.0
    idle_gpu_hours: float = 0.0
    guarantee_gpu_hours: float = 0.0
    preemptions: float = 0.0
    minutes: int = 0

    def to_json(self) -> dict:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def _day(t: int) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d")


def _given(s: Mapping[str, Mapping[int, float]], name: str, t: int, otherwise: float) -> float:
    value = s.get(name, {}).get(t)
    return otherwise if value is None else value


def daily(series: Mapping[str, Mapping[str, Mapping[int, float]]], *, capacity_gpus: float | None = None
          ) -> list[TeamDay]:
    """Per day and team (sorted), from ``series``: team -> metric name -> minute -> value, with
    ``UsageGpus``, ``GuaranteeGpus``, optionally ``LentGpus`` and ``Preemptions`` (counts per
    minute). ``capacity_gpus``: the pool, to attribute lending where ``LentGpus`` is absent;
    without it, lending is attributed as if no capacity were unguaranteed. The pool's row
    (:data:`POOL`) carries the unguaranteed capacity borrowers used, as ``borrowed_gpu_hours``."""
    rows: dict[tuple[str, str], TeamDay] = {}

    def row(day: str, team: str) -> TeamDay:
        return rows.setdefault((day, team), TeamDay(day, team))

    minutes = sorted({t for s in series.values() for t in s.get(metrics.USAGE, {})})
    for t in minutes:
        day = _day(t)
        now: dict[str, tuple[float, float]] = {}
        for team, s in series.items():
            u, g = s.get(metrics.USAGE, {}).get(t), s.get(metrics.GUARANTEE, {}).get(t)
            if u is not None and g is not None:
                now[team] = (u, g)
        borrowed = {team: _given(series[team], metrics.BORROWED, t, max(0.0, u - g)) for team, (u, g) in now.items()}
        idle = {team: _given(series[team], metrics.IDLE_GUARANTEE, t, max(0.0, g - u)) for team, (u, g) in now.items()}
        total_b = math.fsum(borrowed.values())
        guaranteed = math.fsum(g for _, g in now.values())
        pool = (capacity_gpus if capacity_gpus is not None else guaranteed) - guaranteed
        from_pool, computed = lent_split(total_b, pool, idle)
        published = {team: series[team].get(metrics.LENT, {}).get(t) for team in now}
        if now and all(v is not None for v in published.values()):
            # The share monitor attributed lending per instance type: the rest came from the pool.
            from_pool = max(0.0, total_b - math.fsum(v for v in published.values() if v is not None))
        for team, (u, g) in now.items():
            r = row(day, team)
            r.minutes += 1
            r.within_gpu_hours += (u - borrowed[team]) * _MINUTE_HOURS
            r.borrowed_gpu_hours += borrowed[team] * _MINUTE_HOURS
            r.idle_gpu_hours += idle[team] * _MINUTE_HOURS
            r.guarantee_gpu_hours += g * _MINUTE_HOURS
            mine = published[team]
            r.lent_gpu_hours += (computed.get(team, 0.0) if mine is None else mine) * _MINUTE_HOURS
        if now:
            row(day, POOL).borrowed_gpu_hours += from_pool * _MINUTE_HOURS
    for team, s in series.items():
        for t, n in s.get(metrics.PREEMPTIONS, {}).items():
            row(_day(t), team).preemptions += n
    return [rows[k] for k in sorted(rows, key=lambda k: (k[0], k[1] == POOL, k[1]))]
