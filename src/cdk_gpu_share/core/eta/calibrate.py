"""A team's bands calibrated on its own earlier outcomes (conformal calibration, online).

The replays capture how long the known jobs may run, not what nobody knows yet (what other
teams will submit, a lender taking its GPUs back): their band is often too narrow for one team
and too wide for another. Each team's band is therefore widened or narrowed by the errors of
its earlier predictions whose outcome was already known when the new prediction is made (the
job had started, for good, before it): that is the past, so the rule that a prediction reads
nothing after its moment still holds.

The error of a past band is measured on a log scale of the wait (``log(1 + wait / 60 s)``: a
miss by a minute counts for a short wait as a miss by an hour for a long one): the least move
of the band's ends that would have held the actual wait, positive when it fell outside the
band, negative when inside. The new band's ends move out by the :data:`LEVEL` quantile of
those errors (conformalised quantile regression: the band then holds about that share of the
waits), or in when the quantile is negative; p50 stays, and the ends never pass it, so an error
is measured as the ends move: a wait equal to p50 is held by any band. A team with fewer than
:data:`MIN_KNOWN` known outcomes keeps the replays' band.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["LEVEL", "MIN_KNOWN", "WINDOW", "Outcome", "calibrate", "score", "widen"]

#: The share of waits a calibrated band aims to hold.
LEVEL = 0.8
#: Known outcomes a team needs before its band is calibrated.
MIN_KNOWN = 20
#: The most recent known outcomes a calibration uses (older ones may describe another load).
WINDOW = 200
#: The wait scale of the log (seconds): waits much shorter than this count as about equal.
_SCALE_S = 60.0


def _log(wait: float) -> float:
    return math.log1p(max(0.0, wait) / _SCALE_S)


def _unlog(x: float) -> float:
    return max(0.0, math.expm1(x) * _SCALE_S)


def score(p10: float, p50: float, p90: float, actual: float) -> float:
    """The least move of the band's ends (as :func:`widen` moves them) that holds ``actual``,
    on the log scale: positive when the wait fell outside [p10, p90], negative when inside.

    The ends never move past p50, so only the end on the wait's side of p50 can lose it: a wait
    above p50 is held while the high end stays above it, whatever the low end does. A wait equal
    to p50 is held by every move (minus infinity): a team whose replays often foresee the wait to
    the second would otherwise count those exact answers as errors just inside the band and keep
    its other bands as wide as before.
    """
    a = _log(actual)
    if actual > p50:
        return a - _log(p90)
    if actual < p50:
        return _log(p10) - a
    return -math.inf


def widen(p10: float, p50: float, p90: float, by: float) -> tuple[float, float, float]:
    """The band with both ends moved out by ``by`` on the log scale (in when negative, never past p50)."""
    low = min(_unlog(_log(p10) - by), p50)
    high = max(_unlog(_log(p90) + by), p50)
    return round(low, 3), p50, round(high, 3)


@dataclass(frozen=True)
class Outcome:
    """One prediction of a backtest, in the order they were made: the job's team, the moment of
    the prediction, the band (None: none was made), when the outcome became known (the job's
    final start) and the wait it got."""

    team: str
    at: float
    band: tuple[float, float, float] | None
    known_at: float
    actual: float


def _quantile(scores: Sequence[float]) -> float:
    """The conformal quantile: the ceil((n + 1) * LEVEL)-th smallest of n scores (the largest when past n)."""
    n = len(scores)
    k = min(n, math.ceil((n + 1) * LEVEL))
    return scores[k - 1]


def calibrate(outcomes: Sequence[Outcome]) -> list[tuple[float, float, float] | None]:
    """Each prediction's band calibrated on the errors of its team's predictions whose outcome
    was known strictly before it was made (at most the :data:`WINDOW` latest; none when fewer
    than :data:`MIN_KNOWN`). The answer depends on the outcomes alone, not on their order."""
    known: dict[str, list[tuple[float, float]]] = {}  # team -> (known at, score), sorted
    for o in outcomes:
        if o.band is not None:
            insort(known.setdefault(o.team, []), (o.known_at, score(*o.band, o.actual)))
    out: list[tuple[float, float, float] | None] = []
    for o in outcomes:
        if o.band is None:
            out.append(None)
            continue
        past = known.get(o.team, [])
        n = bisect_left(past, (o.at, -math.inf))  # known strictly before the prediction
        if n < MIN_KNOWN:
            out.append(o.band)
            continue
        recent = sorted(s for _, s in past[max(0, n - WINDOW):n])
        out.append(widen(*o.band, by=_quantile(recent)))
    return out
