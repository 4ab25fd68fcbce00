"""What the advisor decides: a candidate configuration, the search space, and how two
candidates rank.

A :class:`Candidate` is the capacity and, per team (in the scenario's order), a
:class:`Choice`: its guarantee, its ``sharing`` and, with ``lend_and_borrow``, its
``borrow_limit_percent``. Everything else of the scenario stays as given. A
:class:`Space` knows the step, which teams may only reserve or lend, and the input
configuration the changes are counted against.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "PERCENTS",
    "SHARINGS",
    "Candidate",
    "Choice",
    "Space",
    "changed_fields",
    "choice_of",
    "number",
    "scenario_dict",
]

#: The sharing strategies, in the fixed order ties are broken by.
SHARINGS = ("reserve", "lend", "lend_and_borrow")
#: The borrow limits the advisor may give a ``lend_and_borrow`` team, the unlimited (-1) last:
#: neighbours on this ladder are one step more or less borrowing.
PERCENTS = (*range(0, 401, 25), -1)
_TOL = 1e-9


def number(x: float) -> int | float:
    """A JSON number: an int when whole (16 rather than 16.0)."""
    x = float(x)
    return int(x) if x.is_integer() else x


@dataclass(frozen=True, order=True)
class Choice:
    """One team's part of a candidate. ``percent`` is None unless ``sharing`` is ``lend_and_borrow``."""

    guarantee: float
    sharing: str
    percent: int | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"guarantee": {"gpu": number(self.guarantee)}, "sharing": self.sharing}
        if self.percent is not None:
            out["borrow_limit_percent"] = self.percent
        return out


@dataclass(frozen=True, order=True)
class Candidate:
    """A configuration: the capacity and each team's :class:`Choice`, in the scenario's team order."""

    capacity: float
    choices: tuple[Choice, ...]

    @property
    def total(self) -> float:
        return sum(c.guarantee for c in self.choices)

    def with_choice(self, i: int, choice: Choice) -> Candidate:
        return replace(self, choices=self.choices[:i] + (choice,) + self.choices[i + 1:])


def choice_of(team: Mapping[str, Any]) -> Choice:
    """A scenario team's current choice (a missing ``sharing`` is ``lend_and_borrow``; a missing
    ``borrow_limit_percent`` is -1, the planner's defaults)."""
    sharing = team.get("sharing", "lend_and_borrow")
    percent = team.get("borrow_limit_percent", -1) if sharing == "lend_and_borrow" else None
    return Choice(float(team.get("guarantee", {}).get("gpu", 0) or 0), sharing,
                  None if percent is None else int(percent))


def scenario_dict(base: Mapping[str, Any], candidate: Candidate) -> dict[str, Any]:
    """The scenario ``base`` with the candidate's capacity, guarantees, sharing and borrow limits."""
    out = copy.deepcopy(dict(base))
    out["capacity"] = {**out.get("capacity", {}), "gpu": number(candidate.capacity)}
    teams = []
    for team, choice in zip(out["teams"], candidate.choices):
        team = dict(team)
        team["guarantee"] = {**team.get("guarantee", {}), "gpu": number(choice.guarantee)}
        team["sharing"] = choice.sharing
        if choice.percent is None:
            team.pop("borrow_limit_percent", None)
        else:
            team["borrow_limit_percent"] = choice.percent
        teams.append(team)
    out["teams"] = teams
    return out


@dataclass(frozen=True)
class Space:
    """The search space: per team its name, whether it may only reserve or lend (its work must
    never be stopped), its largest job and its absolute borrow cap; the step; whether the
    capacity moves; the input configuration; the least guarantee the backend accepts."""

    names: tuple[str, ...]
    never_stopped: tuple[bool, ...]
    max_job: tuple[float, ...]
    borrow_caps: tuple[float, ...]
    step: float
    fleet: str
    input: Candidate
    #: The borrow limits a lending-and-borrowing team may get, least borrowing first.
    percents: tuple[int, ...] = PERCENTS
    #: The least guarantee of a team (GPUs, a multiple of the step): what the backend accepts.
    least: float = 0.0

    @property
    def n(self) -> int:
        return len(self.names)

    def sharings(self, i: int) -> tuple[str, ...]:
        return SHARINGS[:2] if self.never_stopped[i] else SHARINGS

    def runnable(self, c: Candidate) -> bool:
        """Whether every team's largest job could start in an empty pool (else simulate refuses it)."""
        if c.total > c.capacity + _TOL or c.capacity <= 0:
            return False
        if any(ch.guarantee < self.least - _TOL for ch in c.choices):
            return False  # the backend would refuse the guarantee
        reserved = [ch.guarantee if ch.sharing == "reserve" else 0.0 for ch in c.choices]
        all_reserved = sum(reserved)
        for i, ch in enumerate(c.choices):
            m = self.max_job[i]
            if m <= 0:
                continue
            if m > c.capacity - (all_reserved - reserved[i]) + _TOL:
                return False
            if ch.sharing == "lend_and_borrow":
                cap = math.inf if ch.percent == -1 else ch.guarantee * (ch.percent or 0) / 100
                cap = min(cap, self.borrow_caps[i])
                if m > ch.guarantee + cap + _TOL:
                    return False
            elif m > ch.guarantee + _TOL:
                return False
        return True

    def _rungs(self, percent: int) -> list[int]:
        """The borrow limits next to ``percent`` on the ladder (one less, one more borrowing)."""
        ladder = self.percents
        if percent in ladder:
            k = ladder.index(percent)
            return [ladder[r] for r in (k - 1, k + 1) if 0 <= r < len(ladder)]
        key = math.inf if percent == -1 else percent
        below = [p for p in ladder if (math.inf if p == -1 else p) < key]
        above = [p for p in ladder if (math.inf if p == -1 else p) > key]
        return below[-1:] + above[:1]

    def order(self, c: Candidate) -> tuple:
        """The fixed order of the last tie-break: capacity, then by team name each field."""
        by_name = sorted(zip(self.names, c.choices))
        return (c.capacity, tuple((name, ch.guarantee, SHARINGS.index(ch.sharing),
                                   -2 if ch.percent is None else ch.percent) for name, ch in by_name))

    def neighbours(self, c: Candidate, focus: Sequence[int], *, transfers: bool = True,
                   jumps: bool = True, limit: int | None = None) -> list[Candidate]:
        """The candidates one move from ``c``: a team's guarantee 1, 2, 4, ... steps up or down (or
        to the least; one step only without ``jumps``), another sharing, a borrow limit one rung up or down
        the ladder; and with ``transfers``, one step moved to or from a team of ``focus`` from or
        to another. Runnable ones only, no repeats, in a fixed order (the teams of ``focus``
        first), at most ``limit`` of them (None: all): generated one at a time, so a limit keeps
        many teams' moves (n*(n-1) transfers) from ever being built."""
        focused = set(focus)
        order = [i for i in range(self.n) if i in focused] + [i for i in range(self.n) if i not in focused]
        total = c.total
        seen: set[Candidate] = {c}
        kept: list[Candidate] = []
        for i in order:
            for cand in self._moves(c, total, i, transfers and i in focused, jumps):
                if limit is not None and len(kept) >= limit:
                    return kept
                if cand not in seen and self.runnable(cand):
                    seen.add(cand)
                    kept.append(cand)
        return kept

    def grid_count(self, capacity: float, step: float) -> int:
        """How many guarantee splits :meth:`grid` enumerates at ``capacity`` on multiples of
        ``step`` (every team at least the least guarantee, the sum at most the capacity): the
        number of ways to hand out the levels left once each team has its least, C(L + n, n)."""
        lowest = math.ceil(self.least / step - _TOL) * step
        levels = math.floor((capacity - self.n * lowest) / step + _TOL)
        return math.comb(levels + self.n, self.n) if levels >= 0 else 0

    def grid_sharing(self, i: int, guarantee: float) -> Choice:
        """Team ``i``'s choice on the grid: ``lend`` where its work must never be stopped, else
        ``lend_and_borrow`` with the most borrowing the ladder allows."""
        if self.never_stopped[i]:
            return Choice(guarantee, "lend")
        return Choice(guarantee, "lend_and_borrow", self.percents[-1])

    def grid(self, capacity: float, step: float) -> Iterator[Candidate]:
        """Every split of ``capacity`` into guarantees on multiples of ``step`` (a multiple of the
        space's step), each team's sharing from :meth:`grid_sharing`: runnable ones only, in a
        fixed order (the first team's guarantee slowest). Generated one at a time."""
        lowest = math.ceil(self.least / step - _TOL) * step
        top = math.floor((capacity - self.n * lowest) / step + _TOL)

        def splits(i: int, left: int) -> Iterator[tuple[int, ...]]:
            if i == self.n - 1:
                for k in range(left + 1):
                    yield (k,)
                return
            for k in range(left + 1):
                for rest in splits(i + 1, left - k):
                    yield (k, *rest)

        if top < 0:
            return
        for ks in splits(0, top):
            c = Candidate(capacity, tuple(self.grid_sharing(i, lowest + k * step) for i, k in enumerate(ks)))
            if self.runnable(c):
                yield c

    def _moves(self, c: Candidate, total: float, i: int, transfers: bool, jumps: bool) -> Iterator[Candidate]:
        """Team ``i``'s moves from ``c`` (whose guarantees sum to ``total``), see :meth:`neighbours`."""
        s = self.step
        ch = c.choices[i]
        k = 1  # one step, then two, four, ... up to the room there is, and down to the least
        while total + k * s <= c.capacity + _TOL and (jumps or k == 1):
            yield c.with_choice(i, replace(ch, guarantee=ch.guarantee + k * s))
            k *= 2
        k = 1
        while ch.guarantee - k * s >= self.least - _TOL and (jumps or k == 1):
            yield c.with_choice(i, replace(ch, guarantee=ch.guarantee - k * s))
            k *= 2
        if ch.guarantee > self.least + _TOL and jumps:
            yield c.with_choice(i, replace(ch, guarantee=self.least))
        if transfers:
            for j in range(self.n):
                if j == i:
                    continue
                other = c.choices[j]
                for k in ((1, 2, 4) if jumps else (1,)):  # a step, or a few at once, from one team to another
                    if other.guarantee - k * s >= self.least - _TOL:
                        moved = c.with_choice(i, replace(ch, guarantee=ch.guarantee + k * s))
                        yield moved.with_choice(j, replace(other, guarantee=other.guarantee - k * s))
                    if ch.guarantee - k * s >= self.least - _TOL:
                        moved = c.with_choice(i, replace(ch, guarantee=ch.guarantee - k * s))
                        yield moved.with_choice(j, replace(other, guarantee=other.guarantee + k * s))
        for sharing in self.sharings(i):
            if sharing != ch.sharing:
                percent = self.percents[-1] if sharing == "lend_and_borrow" else None
                yield c.with_choice(i, Choice(ch.guarantee, sharing, percent))
        if ch.sharing == "lend_and_borrow" and ch.percent is not None:
            for percent in self._rungs(ch.percent):
                yield c.with_choice(i, replace(ch, percent=percent))


def changed_fields(c: Candidate, was: Candidate, *, fleet: str) -> int:
    """How many fields differ from the input: the capacity (with ``--fleet size``), and per team
    its guarantee, its sharing and its borrow limit (None unless it lends and borrows)."""
    n = int(fleet == "size" and abs(c.capacity - was.capacity) > _TOL)
    for a, b in zip(c.choices, was.choices):
        n += int(abs(a.guarantee - b.guarantee) > _TOL) + int(a.sharing != b.sharing) + int(a.percent != b.percent)
    return n
