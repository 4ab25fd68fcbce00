"""Quotas that follow the clock: named weekly windows, and which one is open at an instant.

A window (``windows:`` in the config) opens on some days of the week at ``start`` and closes at
``end`` in its time zone: on ``[start, end)``, the next day when ``end <= start`` (``end ==
start``: 24 hours). A wall-clock time that the zone skips or repeats at a daylight-saving change
is read at its first occurrence (Python's ``fold=0``: a skipped 02:30 is read with the offset
before the change). Windows never overlap: at most one is open at any instant, and a team's
values in force are those it gives for that window, field by field, else its own.

This module knows time only (no teams, no instance types): :func:`window_at` is the one answer
to "which window is open at t" for the config's reader, ``plan``, the simulator and whatever
switches quotas at run time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cdk_gpu_share.core import validation as V
from cdk_gpu_share.core.errors import ConfigError, Problem

__all__ = [
    "DAYS", "DEFAULT_TIMEZONE", "TEAM_WINDOW_KEYS", "WINDOW_KEYS", "Window", "boundaries", "overlap_problems",
    "read_origin", "read_windows", "window_at", "window_mapping", "window_problems",
]

#: The days a window may open on, Monday first (Python's ``weekday()`` order).
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DEFAULT_TIMEZONE = "UTC"
#: The keys of one window of ``windows:``.
WINDOW_KEYS = frozenset({"name", "days", "start", "end", "timezone"})
#: What a team may change in a window (``teams[].windows.NAME``).
TEAM_WINDOW_KEYS = frozenset({"guarantee", "borrow_limit_percent", "borrow_limit"})

_TIME = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])$")
_NAME = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
#: Overlaps are looked for over two whole years from January 1st of the year given: every
#: daylight-saving change of every zone falls in it.
_OVERLAP_DAYS = 2 * 366 + 7


@dataclass(frozen=True)
class Window:
    """One weekly window: the ``days`` it opens on, ``start`` and ``end`` (``"HH:MM"``) in
    ``timezone`` (an IANA name)."""

    name: str
    days: tuple[str, ...]
    start: str
    end: str
    timezone: str = DEFAULT_TIMEZONE

    def __post_init__(self) -> None:
        # The Python API meets the YAML's rules, through the same reader.
        problems = V.Problems()
        where = f"Window({self.name!r})"
        _window_fields(window_mapping(self), where, problems)
        problems.raise_if_any(label="invalid argument")
        object.__setattr__(self, "days", tuple(self.days))

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def openings(self, first: date, days: int) -> list[tuple[datetime, datetime]]:
        """The ``[open, close)`` intervals (UTC) of the openings on the local dates from ``first``,
        ``days`` of them."""
        zone, start, end = self.zone, _clock(self.start), _clock(self.end)
        wanted = {DAYS.index(d) for d in self.days}
        out = []
        for i in range(days):
            day = first + timedelta(days=i)
            if day.weekday() not in wanted:
                continue
            close_day = day + timedelta(days=1) if end <= start else day
            out.append((_utc(day, start, zone), _utc(close_day, end, zone)))
        return out

    def is_open(self, t: datetime) -> bool:
        """Whether the window is open at ``t`` (an aware datetime)."""
        local = t.astimezone(self.zone).date()
        return any(a <= t < b for a, b in self.openings(local - timedelta(days=1), 2))


def _clock(text: str) -> time:
    hours, minutes = text.split(":")
    return time(int(hours), int(minutes))


def _utc(day: date, clock: time, zone: ZoneInfo) -> datetime:
    # fold=0: a repeated wall-clock time is its first occurrence; a skipped one takes the offset
    # in force before the change.
    return datetime.combine(day, clock, tzinfo=zone).replace(fold=0).astimezone(timezone.utc)


def window_at(windows: Sequence[Window], t: datetime) -> Window | None:
    """The window open at ``t`` (an aware datetime; naive is read as UTC), or None: the base."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    for window in windows:
        if window.is_open(t):
            return window
    return None


def boundaries(windows: Sequence[Window], start: datetime, end: datetime) -> list[tuple[datetime, Window | None]]:
    """Each instant in ``[start, end)`` at which the open window changes, with the window open
    from then on (None: the base), in time order. The first entry is ``start`` itself."""
    if start.tzinfo is None:
        start = start.replace(tzinfo=timezone.utc)
    if end.tzinfo is None:
        end = end.replace(tzinfo=timezone.utc)
    instants = {start}
    first = (start - timedelta(days=2)).date()
    span = (end - start).days + 4
    for window in windows:
        for a, b in window.openings(first, span):
            instants.update(x for x in (a, b) if start <= x < end)
    out: list[tuple[datetime, Window | None]] = []
    for t in sorted(instants):
        now = window_at(windows, t)
        if not out or (out[-1][1] is None) != (now is None) or (now is not None and out[-1][1] is not None
                                                                  and out[-1][1].name != now.name):
            out.append((t, now))
    return out


def overlap_problems(windows: Sequence[Window], year: int, add: V.AddProblem) -> None:
    """Two windows open at the same instant, over two whole years from January 1st of ``year``
    (every daylight-saving change of every zone included): one problem per pair."""
    first = date(year, 1, 1)
    spans = sorted((a, b, i) for i, w in enumerate(windows) for a, b in w.openings(first, _OVERLAP_DAYS))
    reported: set[tuple[int, int]] = set()
    latest: dict[int, datetime] = {}  # each window's latest close so far
    for a, _b, i in spans:
        for j, close in latest.items():
            pair = (min(i, j), max(i, j))
            if j != i and close > a and pair not in reported:
                reported.add(pair)
                first_w, second_w = windows[pair[0]], windows[pair[1]]
                add(f"windows[{pair[1]}] ({second_w.name})", second_w.name,
                    f"is open at the same time as windows[{pair[0]}] ({first_w.name}), at {a:%Y-%m-%d %H:%M} UTC",
                    "make the windows disjoint: a team's values come from one window at a time")
        latest[i] = max(latest.get(i, _b), _b)


def read_origin(text: str, field: str = "--origin") -> datetime:
    """The clock time of a trace's second 0, given as ISO-8601 (without an offset: UTC); a
    :class:`~cdk_gpu_share.core.errors.ConfigError` naming ``field`` otherwise."""
    try:
        origin = datetime.fromisoformat(text.strip())
    except (ValueError, AttributeError):
        raise ConfigError(Problem(field, text, "is not an ISO-8601 time",
                                  "give the clock time of the trace's second 0, such as 2026-01-05T00:00:00Z")) from None
    return origin if origin.tzinfo is not None else origin.replace(tzinfo=timezone.utc)


def window_problems(raw: object, where: str, add: V.AddProblem) -> None:
    """The problems of one window as a config file writes it (see :func:`read_windows`)."""
    problems = V.Problems()
    _window_fields(raw, where, problems)
    for p in problems.items:
        add(p.field, p.value, p.message, p.fix)


def _window_fields(raw: object, where: str, problems: V.Problems) -> Window | None:
    data = V.read_mapping(raw, where, problems.add, required=True)
    if data is None:
        return None
    V.unknown_keys(data, set(WINDOW_KEYS), where, problems.add)
    before = len(problems.items)
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        problems.add(f"{where}.name", name, "is not a window name",
                     "name it with up to 40 lowercase letters, digits and hyphens, starting with a letter (night)")
    days = data.get("days")
    if not isinstance(days, (list, tuple)) or not days:
        problems.add(f"{where}.days", days, "must be a non-empty list of days",
                     f"list the days the window opens on, from {', '.join(DAYS)}")
    else:
        for k, day in enumerate(days):
            if day not in DAYS:
                problems.add(f"{where}.days[{k}]", day, "is not a day", f"use one of {', '.join(DAYS)}")
        if len(set(map(str, days))) != len(days):
            problems.add(f"{where}.days", list(days), "names a day twice", "list each day once")
    for key in ("start", "end"):
        value = data.get(key)
        if not isinstance(value, str) or not _TIME.match(value):
            problems.add(f"{where}.{key}", value, "is not a time of day",
                         'write it as "HH:MM", 00:00 to 23:59, in quotes (start: "20:00")')
    zone = data.get("timezone", DEFAULT_TIMEZONE)
    if not _known_zone(zone):
        problems.add(f"{where}.timezone", zone, "is not an IANA time zone",
                     "use a name such as Europe/Berlin, America/New_York or UTC")
    if len(problems.items) > before:
        return None
    window = Window.__new__(Window)
    for key, value in (("name", name), ("days", tuple(days)), ("start", data["start"]), ("end", data["end"]),  # type: ignore[arg-type]
                       ("timezone", zone)):
        object.__setattr__(window, key, value)
    return window


def _known_zone(zone: object) -> bool:
    if not isinstance(zone, str) or not zone or zone.startswith(("/", ".")) or ".." in zone:
        return False
    if zone in available_timezones():
        return True
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def read_windows(raw: object, problems: V.Problems, year: int) -> tuple[Window, ...]:
    """The ``windows:`` list of a config: each window read, names unique, no two open at once
    (looked for over ``year`` and the next)."""
    if raw is None:
        return ()
    if not isinstance(raw, (list, tuple)):
        problems.add("windows", raw, f"must be a list of windows, not {V.kind(raw)}",
                     'write windows: [{name: night, days: [mon], start: "20:00", end: "08:00"}] or leave it out')
        return ()
    out: list[Window] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(raw):
        if isinstance(entry, Window):
            entry = window_mapping(entry)
        name = entry.get("name") if isinstance(entry, Mapping) else None
        where = V.item("windows", i, name) if isinstance(name, str) else V.item("windows", i)
        window = _window_fields(entry, where, problems)
        if window is None:
            continue
        if window.name in seen:
            problems.add(f"{where}.name", window.name, f"duplicates the name of windows[{seen[window.name]}]",
                         "give every window a unique name")
            continue
        seen[window.name] = i
        out.append(window)
    if len(out) == len(raw):
        overlap_problems(out, year, problems.add)
    return tuple(out)


def window_mapping(window: Window) -> dict[str, Any]:
    """``window`` as an entry of the config file's ``windows`` list."""
    out: dict[str, Any] = {"name": window.name,
                           "days": list(window.days) if isinstance(window.days, Iterable) and not isinstance(
                               window.days, str) else window.days,
                           "start": window.start, "end": window.end}
    if window.timezone != DEFAULT_TIMEZONE:
        out["timezone"] = window.timezone
    return out
