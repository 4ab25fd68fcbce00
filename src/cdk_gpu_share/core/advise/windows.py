"""Advice that follows the clock: each team's guarantee and borrow limit per time window.

A :class:`WindowedCandidate` is a :class:`~cdk_gpu_share.core.advise.space.Candidate` (the
capacity and each team's own values, "the base") with, per window of the scenario, each team's
:class:`~cdk_gpu_share.core.advise.space.Choice` while it is open: its guarantee and, when it
lends and borrows, its borrow limit (sharing never changes with the clock, so a window's choice
has the base's sharing). A window whose choices equal the base's gives the teams no values.

This module knows the candidates only: how the input's values read as one
(:func:`windowed_input`), which windows a team's scenario entry then carries
(:func:`team_windows`), the moves of the windowed search (:func:`window_moves`) and the
changes counted against the input. The search itself is
:mod:`~cdk_gpu_share.core.advise.window_search`.

A team's entitlement is the same at every hour in an advice with windows: its
``objectives.entitlement``, else its guarantee in the input, which then may not change with
the windows (refused, naming the field and the fix, by :func:`windowed_input`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cdk_gpu_share.core.advise.space import Candidate, Choice, Space, choice_of, number
from cdk_gpu_share.core.errors import ConfigError, Problem

__all__ = [
    "DECIDED",
    "WindowedCandidate",
    "allowed_windows",
    "guarantees_of",
    "lifted",
    "team_windows",
    "window_changes",
    "window_moves",
    "window_order",
    "windowed_input",
]

_TOL = 1e-9
#: What the advisor decides in a window (a team's ``borrow_limit``, in GPUs, stays as given).
DECIDED = ("guarantee", "borrow_limit_percent")


@dataclass(frozen=True, order=True)
class WindowedCandidate(Candidate):
    """A candidate with, per window (in the scenario's order), each team's choice while it is open."""

    windowed: tuple[tuple[Choice, ...], ...] = ()

    def in_window(self, k: int) -> Candidate:
        """The configuration while window ``k`` is open, as a static candidate."""
        return Candidate(self.capacity, self.windowed[k])

    def with_window_choice(self, k: int, i: int, choice: Choice) -> WindowedCandidate:
        row = self.windowed[k]
        row = row[:i] + (choice,) + row[i + 1:]
        return replace(self, windowed=self.windowed[:k] + (row,) + self.windowed[k + 1:])


def lifted(candidate: Candidate, windows: int) -> WindowedCandidate:
    """``candidate`` with every one of ``windows`` windows holding the base's values (no values of its own)."""
    if isinstance(candidate, WindowedCandidate):
        return candidate
    return WindowedCandidate(candidate.capacity, candidate.choices, tuple(candidate.choices for _ in range(windows)))


def guarantees_of(candidate: Candidate, i: int) -> tuple[float, ...]:
    """Team ``i``'s guarantees: its own, then in each window."""
    own = candidate.choices[i].guarantee
    if not isinstance(candidate, WindowedCandidate):
        return (own,)
    return (own, *(row[i].guarantee for row in candidate.windowed))


def windowed_input(data: Mapping[str, Any], entitlements_given: Mapping[str, float],
                   objectives: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[tuple[Choice, ...], ...]]:
    """(the scenario the search varies, the input's choices per window) of a scenario with windows.

    The first is ``data`` with the values the advisor decides in a window taken out of the teams'
    windows (a ``borrow_limit`` in GPUs stays); the second each team's values in force in each
    window, as choices. A team with objectives whose guarantee changes with the windows and that
    gives no ``objectives.entitlement`` is refused: what it is owed must be the same at every
    hour of an advice that moves its guarantees."""
    names = [w["name"] for w in data.get("windows") or ()]
    base = copy.deepcopy(dict(data))
    rows: list[list[Choice]] = [[] for _ in names]
    problems = []
    for i, team in enumerate(base["teams"]):
        own = choice_of(team)
        given = team.get("windows") or {}
        for k, name in enumerate(names):
            values = given.get(name) or {}
            g = float((values.get("guarantee") or {}).get("gpu", own.guarantee))
            percent = own.percent if own.percent is None else int(values.get("borrow_limit_percent", own.percent))
            rows[k].append(Choice(g, own.sharing, percent))
        moves = any(abs(row[i].guarantee - own.guarantee) > _TOL for row in rows)
        if moves and objectives.get(team["name"]) and team["name"] not in entitlements_given:
            problems.append(Problem(
                field=f"teams[{i}].objectives.entitlement", value=None,
                message=f"is needed to advise with windows: team {team['name']}'s guarantee changes with the windows, "
                        "so what it is owed would change with any advice",
                fix="give the team objectives.entitlement, what it is owed at every hour (such as its own guarantee)"))
        kept = {name: {k: v for k, v in values.items() if k not in DECIDED}
                for name, values in given.items() if isinstance(values, Mapping)}
        kept = {name: values for name, values in kept.items() if values}
        if kept:
            team["windows"] = kept
        else:
            team.pop("windows", None)
    if problems:
        raise ConfigError(problems)
    return base, tuple(tuple(row) for row in rows)


def allowed_windows(declared: Sequence[str], wanted: Sequence[str] | None) -> tuple[int, ...]:
    """The indices (in ``declared``) of the windows the advice may give values in: ``wanted``
    (``--windows``), else every declared one. Refuses a name that is not declared."""
    if wanted is None:
        return tuple(range(len(declared)))
    out = []
    for name in wanted:
        if name not in declared:
            known = ", ".join(declared) if declared else "none: the input declares no windows"
            raise ConfigError(Problem(field="--windows", value=name, message="is not a window of the input",
                                      fix=f"name windows the input declares under windows: ({known})"))
        if declared.index(name) not in out:
            out.append(declared.index(name))
    return tuple(sorted(out))


def team_windows(candidate: Candidate, names: Sequence[str], i: int) -> dict[str, dict[str, Any]]:
    """Team ``i``'s values per window name in ``candidate`` (in a scenario's GPUs): only where they
    differ from its own."""
    if not isinstance(candidate, WindowedCandidate):
        return {}
    own = candidate.choices[i]
    out: dict[str, dict[str, Any]] = {}
    for name, row in zip(names, candidate.windowed):
        ch = row[i]
        values: dict[str, Any] = {}
        if abs(ch.guarantee - own.guarantee) > _TOL:
            values["guarantee"] = {"gpu": number(ch.guarantee)}
        if ch.percent != own.percent and ch.percent is not None:
            values["borrow_limit_percent"] = ch.percent
        if values:
            out[name] = values
    return out


def window_changes(c: Candidate, was: Candidate) -> int:
    """How many window values differ from the input's: per window and team, its guarantee and
    its borrow limit (a plain candidate holds its own values in every window)."""
    if not isinstance(was, WindowedCandidate):
        return 0
    c = lifted(c, len(was.windowed))
    assert isinstance(c, WindowedCandidate)
    n = 0
    for row, old in zip(c.windowed, was.windowed):
        for a, b in zip(row, old):
            n += int(abs(a.guarantee - b.guarantee) > _TOL) + int(a.percent != b.percent)
    return n


def window_order(c: Candidate, names: Sequence[str], teams: Sequence[str], windows: int) -> tuple:
    """The last tie-break's part of the windows: by window name, then team name, each value."""
    c = lifted(c, windows)
    assert isinstance(c, WindowedCandidate)
    return tuple((wn, tuple((tn, ch.guarantee, -2 if ch.percent is None else ch.percent)
                            for tn, ch in sorted(zip(teams, row))))
                 for wn, row in sorted(zip(names, c.windowed)))


def _runnable(space: Space, c: WindowedCandidate) -> bool:
    """Every job fits the teams' own values (the replay checks them), and each window's guarantees
    are each at least the backend's least and within the capacity. A job too large for its team
    in a window waits for the window to close, as the replay has it."""
    return space.runnable(c) and all(
        math.fsum(ch.guarantee for ch in row) <= c.capacity + _TOL and all(ch.guarantee >= space.least - _TOL for ch in row)
        for row in c.windowed)


def window_moves(space: Space, c: WindowedCandidate, slots: Sequence[int | None], focus: Sequence[int],
                 limit: int | None = None) -> list[WindowedCandidate]:
    """The candidates one move from ``c`` in one of ``slots`` (a window's index, or None: the
    teams' own values, which the windows not in ``slots`` hold too): a team's guarantee a step up
    or down, 1, 2 or 4 steps moved between two teams, a borrow limit one rung up or down. The
    teams of ``focus`` first; runnable ones only (in every window), no repeats, in a fixed order,
    at most ``limit``."""
    focused = set(focus)
    order = [i for i in range(space.n) if i in focused] + [i for i in range(space.n) if i not in focused]
    follow = [k for k in range(len(c.windowed)) if k not in slots]
    seen: set[Candidate] = {c}
    kept: list[WindowedCandidate] = []
    for slot in slots:
        for i in order:
            for cand in _slot_moves(space, c, slot, i):
                if slot is None and follow:
                    rows = list(cand.windowed)
                    for k in follow:
                        rows[k] = cand.choices
                    cand = replace(cand, windowed=tuple(rows))
                if limit is not None and len(kept) >= limit:
                    return kept
                if cand not in seen and _runnable(space, cand):
                    seen.add(cand)
                    kept.append(cand)
    return kept


def _slot_moves(space: Space, c: WindowedCandidate, slot: int | None, i: int) -> Iterator[WindowedCandidate]:
    """Team ``i``'s moves in ``slot`` (see :func:`window_moves`)."""
    row = c.choices if slot is None else c.windowed[slot]

    def put(changes: Mapping[int, Choice]) -> WindowedCandidate:
        out = c
        for j, ch in changes.items():
            out = out.with_choice(j, ch) if slot is None else out.with_window_choice(slot, j, ch)  # type: ignore[assignment]
        assert isinstance(out, WindowedCandidate)
        return out

    s, total, ch = space.step, math.fsum(x.guarantee for x in row), row[i]
    if total + s <= c.capacity + _TOL:
        yield put({i: replace(ch, guarantee=ch.guarantee + s)})
    if ch.guarantee - s >= space.least - _TOL:
        yield put({i: replace(ch, guarantee=ch.guarantee - s)})
    for j in range(space.n):
        if j == i:
            continue
        other = row[j]
        for k in (1, 2, 4):
            if other.guarantee - k * s >= space.least - _TOL:
                yield put({i: replace(ch, guarantee=ch.guarantee + k * s),
                           j: replace(other, guarantee=other.guarantee - k * s)})
    if ch.sharing == "lend_and_borrow" and ch.percent is not None:
        for percent in space._rungs(ch.percent):
            yield put({i: replace(ch, percent=percent)})
