"""Why is my job waiting? One waiting job explained in the terms of the sharing policy.

Used by ``gpu-share status --queue Q --job ID`` for Batch quota management and for the
fair-share queue alike: the caller reads the queue and hands over, per capacity unit the job
needs (an ``ml.`` instance type, or ``gpu``), each team's guarantee, usage and borrow cap.
Pure: no AWS, no CDK.

The reasons, each a code and a sentence (a job may have several):

* ``too_large``: it asks for more than its team may ever hold (guarantee plus borrow cap, or
  the capacity other teams do not reserve): it can never start as it is;
* ``capped``: its team is at or above its guarantee and borrowing it would take the team past
  its borrow cap;
* ``lent_out``: it is within its team's guarantee, but the capacity its team lent is in use by
  borrowing teams; the lent capacity is taken back (``reclaim_in``);
* ``no_idle``: it would borrow, within its cap, but no capacity is idle and nobody holds
  lent capacity of its team;
* ``behind``: K waiting jobs of its team go first (submitted earlier, or of higher priority).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cdk_gpu_share.core.text import plural

__all__ = ["TeamView", "Reason", "explain", "REASON_CODES"]

REASON_CODES = ("too_large", "capped", "lent_out", "no_idle", "behind")
_TOL = 1e-9


@dataclass(frozen=True)
class TeamView:
    """One team in one capacity unit: guarantee, usage, borrow cap (None: unbounded), and
    whether its idle guarantee is reserved (never lent)."""

    name: str
    guarantee: float
    usage: float
    cap: float | None = None
    reserve: bool = False


@dataclass(frozen=True)
class Reason:
    code: str
    text: str
    facts: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"code": self.code, "text": self.text, **self.facts}


def _n(x: float) -> str:
    return f"{x:g}"


def explain(team: str, need: Mapping[str, float], views: Mapping[str, Sequence[TeamView]],
            capacity: Mapping[str, float], *, ahead: int = 0, reclaim_in: str = "",
            unit_label: str = "") -> list[Reason]:
    """Why a job of ``team`` needing ``need`` (unit -> amount) waits. ``views``: per unit, every
    team's :class:`TeamView`; ``ahead``: waiting jobs of its team that go first; ``reclaim_in``:
    when lent capacity comes back, in words (``"within 2 minutes"``); ``unit_label``: the noun of
    the amounts (``"GPU"``: "2 GPUs"; default: the unit's name after the number)."""
    reasons: list[Reason] = []
    for unit, d in need.items():
        if d <= _TOL:
            continue
        teams = {v.name: v for v in views.get(unit, ())}
        me = teams.get(team, TeamView(team, 0.0, 0.0))
        others = [v for v in teams.values() if v.name != team]
        k = capacity.get(unit, 0.0)
        reserved = math.fsum(max(0.0, v.guarantee - v.usage) for v in others if v.reserve)
        free = k - math.fsum(v.usage for v in teams.values()) - reserved
        def amt(x: float, unit: str = unit) -> str:
            return plural(_n(x), unit_label) if unit_label else f"{_n(x)} {unit}"

        most = min(me.guarantee + (math.inf if me.cap is None else me.cap), k - math.fsum(
            v.guarantee for v in others if v.reserve))
        if d > most + _TOL:
            reasons.append(Reason("too_large", f"it asks for {amt(d)}, more than team {team} may ever hold"
                                  f" ({amt(most)}: its guarantee {_n(me.guarantee)} plus what it may borrow)",
                                  {"unit": unit, "need": d, "most": most}))
            continue
        within = me.usage + d <= me.guarantee + _TOL
        room = d <= free + _TOL
        over = me.usage + d - me.guarantee
        if not within and me.cap is not None and over > me.cap + _TOL:
            reasons.append(Reason("capped", f"team {team} uses {_n(me.usage)} of its guarantee {amt(me.guarantee)}"
                                  f" and may borrow at most {_n(me.cap)}: this job would borrow {_n(over)}",
                                  {"unit": unit, "usage": me.usage, "guarantee": me.guarantee, "cap": me.cap}))
        elif within and not room:
            borrowers = sorted(f"{v.name} ({_n(v.usage - v.guarantee)})" for v in others
                               if v.usage - v.guarantee > _TOL)
            lent = ", ".join(borrowers) or "nobody"
            reasons.append(Reason("lent_out", f"it is within team {team}'s guarantee ({_n(me.usage)} used of"
                                  f" {amt(me.guarantee)}), but the capacity it lent is in use by {lent};"
                                  f" it is taken back {reclaim_in or 'by the scheduler'}",
                                  {"unit": unit, "borrowers": borrowers}))
        elif not within and not room:
            reasons.append(Reason("no_idle", f"it would borrow {amt(over)} (team {team} is at"
                                  f" {_n(me.usage)} of its guarantee {_n(me.guarantee)}), within its cap, but"
                                  f" only {amt(max(0.0, free))} idle and free to borrow",
                                  {"unit": unit, "free": max(0.0, free)}))
    if ahead > 0:
        reasons.append(Reason("behind", f"{ahead} waiting job{'s' if ahead != 1 else ''} of team {team} go first",
                              {"ahead": ahead}))
    return reasons
