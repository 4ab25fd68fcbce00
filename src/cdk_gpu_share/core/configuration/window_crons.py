"""The Kubernetes cron lines of a window's boundaries, read in the window's own time zone (a
CronJob's ``timeZone``): when the Kueue backend's quota window switcher runs (pure: times only)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta, timezone

from cdk_gpu_share.core.configuration.windows import DAYS, Window

__all__ = ["boundary_schedules", "skipped_at"]


def _cron(minute: int, hour: int, days: Sequence[int]) -> str:
    """A Kubernetes cron line (day of week 0 is Sunday) from Monday-first day indexes."""
    return f"{minute} {hour} * * {','.join(str((d + 1) % 7) for d in sorted(set(days)))}"


def skipped_at(window: Window, clock: str, days: Sequence[int], first: date) -> str | None:
    """When ``clock`` on some of ``days`` falls in a daylight-saving gap of the window's zone in the
    two years from ``first``: the wall-clock time (HH:MM) the boundary then falls at, else None."""
    zone = window.zone
    hour, minute = (int(x) for x in clock.split(":"))
    for i in range(2 * 366):
        day = first + timedelta(days=i)
        if day.weekday() not in days:
            continue
        local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
        back = local.astimezone(timezone.utc).astimezone(zone)
        if (back.hour, back.minute) != (hour, minute):
            return f"{back.hour:02d}:{back.minute:02d}"
    return None


def boundary_schedules(window: Window, first: date | None = None) -> list[tuple[str, str]]:
    """``window``'s CronJobs: (name suffix, cron line in its zone). ``open`` and ``close``; a window
    that ends at or before its start closes the next day. Where a daylight-saving change in the
    two years from ``first`` (default: today) skips a boundary's wall-clock time, one more at the
    time the boundary falls to on that day (``open-dst``, ``close-dst``)."""
    first = first or datetime.now(timezone.utc).date()
    start_h, start_m = (int(x) for x in window.start.split(":"))
    end_h, end_m = (int(x) for x in window.end.split(":"))
    days = [DAYS.index(d) for d in window.days]
    close_days = [(d + 1) % 7 for d in days] if (end_h, end_m) <= (start_h, start_m) else days
    out = []
    for suffix, clock, on in (("open", window.start, days), ("close", window.end, close_days)):
        h, m = (int(x) for x in clock.split(":"))
        out.append((suffix, _cron(m, h, on)))
        moved = skipped_at(window, clock, on, first)
        if moved is not None:
            mh, mm = (int(x) for x in moved.split(":"))
            out.append((f"{suffix}-dst", _cron(mm, mh, on)))
    return out
