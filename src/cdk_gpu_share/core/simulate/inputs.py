"""The simulator's input: the scenario, the job trace, and the checks that reject a job
that could never start.

A scenario is the ``capacity``, ``settings`` and ``teams`` of a reclaim-plan input,
validated by the planner's own parser (:func:`cdk_gpu_share.core.policy.reclaim.parse_state`).
A job trace is a CSV file ``job_id,team,submit_time,duration_s,gpus[,priority][,checkpoint_seconds]``, after
any comment lines (``#``); every error names its line, column and a fix. Sizes are kept as exact
:class:`fractions.Fraction` values beside their floats, one object per distinct text,
which the engine's exact usage arithmetic relies on.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fractions import Fraction
from typing import IO, Any

from cdk_gpu_share.core import validation as V
from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.configuration import hierarchy
from cdk_gpu_share.core.configuration.objectives import ENTITLEMENT_KEY, Objectives, read_objectives
from cdk_gpu_share.core.configuration.windows import Window, read_windows, window_at
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.policy import reclaim
from cdk_gpu_share.core.validation import load_json, parse_decimal

__all__ = [
    "DEFAULT_POLL_SECONDS",
    "MODES",
    "OPTIONAL_COLUMNS",
    "RECLAIM",
    "REQUIRED_COLUMNS",
    "RESOURCE",
    "SHARE",
    "STATIC",
    "TOL",
    "Job",
    "Scenario",
    "check_jobs",
    "load_jobs",
    "load_scenario",
    "load_scenario_data",
    "parse_jobs",
    "parse_scenario",
    "trace_from_rows",
]

MODES = ("static", "share", "share+reclaim")
STATIC, SHARE, RECLAIM = MODES
RESOURCE = instances.GPU_RESOURCE
REQUIRED_COLUMNS = ("job_id", "team", "submit_time", "duration_s", "gpus")
OPTIONAL_COLUMNS = ("priority", "checkpoint_seconds")
DEFAULT_POLL_SECONDS = 60.0
TOL = reclaim.TOLERANCE


@dataclass(frozen=True)
class Scenario:
    """The ``capacity``, ``settings`` and ``teams`` of a reclaim-plan input.

    ``state`` is the planner's parsed :class:`~cdk_gpu_share.core.policy.reclaim.State`
    with ``now`` 0 and no jobs; ``capacity`` is its ``gpu`` capacity; ``objectives``
    the teams' objectives (:mod:`cdk_gpu_share.core.configuration.objectives`); ``entitlements`` the GPUs
    of the teams that were promised other than their guarantee (``objectives.entitlement``).
    """

    state: Any
    capacity: float
    source: str = "scenario"
    #: Each team's objectives (its ``objectives`` object), for the teams that carry any.
    objectives: Mapping[str, Objectives] = field(default_factory=dict)
    #: Each team's ``objectives.entitlement`` in GPUs, for the teams that give one.
    entitlements: Mapping[str, float] = field(default_factory=dict)
    #: The weekly time windows (:class:`cdk_gpu_share.core.configuration.windows.Window`); empty: none.
    windows: tuple[Window, ...] = ()
    #: The clock time of the trace's second 0 (an aware datetime), which a replay with windows
    #: needs; None: not known (``--origin``, else the trace's header).
    origin: datetime | None = None
    #: Per window name, the scenario with each team's values in that window
    #: (:func:`in_window`): every rule of a scenario holds in each.
    window_states: Mapping[str, Any] = field(default_factory=dict)

    @property
    def teams(self) -> tuple:
        return tuple(self.state.teams)

    @property
    def team_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.state.teams)

    def team(self, name: str) -> reclaim.TeamSpec:
        for t in self.state.teams:
            if t.name == name:
                return t
        raise KeyError(name)

    def guarantee(self, name: str) -> float:
        return float(self.team(name).guarantee.get(RESOURCE, 0) or 0)

    def state_at(self, when: datetime) -> Any:
        """The planner's state (no jobs) with each team's values in force at ``when``: those of
        the window open then, else the teams' own."""
        window = window_at(self.windows, when) if self.windows else None
        return self.state if window is None else self.window_states.get(window.name, self.state)

    def entitlement(self, name: str) -> float:
        """E: the GPUs the team was promised (its ``objectives.entitlement``, else its guarantee)."""
        given = self.entitlements.get(name)
        return self.guarantee(name) if given is None else given


@dataclass(frozen=True)
class Job:
    """One row of the job trace. ``position`` is its 0-based place in the trace,
    ``line`` its line in the CSV file (0 when built in code)."""

    id: str
    team: str
    submit_time: float
    duration_s: float
    gpus: float
    priority: int = 0
    position: int = 0
    line: int = 0
    gpus_exact: Fraction | None = None
    checkpoint_seconds: float | None = None
    """The job's checkpoint interval (the trace's optional column); None: not set."""

    @property
    def exact_gpus(self) -> Fraction:
        return self.gpus_exact if self.gpus_exact is not None else Fraction(self.gpus)

    def where(self) -> str:
        place = f"line {self.line}" if self.line else f"row {self.position + 1}"
        return f"{place} (job {self.id!r})"


def parse_scenario(obj: object, *, source: str = "scenario") -> Scenario:
    """Validate a scenario mapping (the planner's validation) and return a :class:`Scenario`."""
    if not isinstance(obj, Mapping):
        raise ConfigError(
            Problem(field="scenario", value=type(obj).__name__, message="must be a JSON object",
                    fix='give {"capacity": {...}, "settings": {...}, "teams": [...]}'),
            source=source,
        )
    for key in ("now", "jobs"):
        if key in obj:
            raise ConfigError(
                Problem(field=key, value=obj[key] if key == "now" else "[...]",
                        message="does not belong in a scenario",
                        fix="remove it: the simulator takes the time and the jobs from the trace"),
                source=source,
            )
    state_in = {k: v for k, v in obj.items() if k != "windows"}
    state_in["now"] = 0
    state_in["jobs"] = []
    problems: list[Problem] = []
    windows, team_windows = _read_scenario_windows(obj, problems)
    if isinstance(state_in.get("teams"), list):
        state_in["teams"] = [{k: v for k, v in t.items() if k != "windows"} if isinstance(t, Mapping) else t
                             for t in state_in["teams"]]
    try:
        state = reclaim.parse_state(state_in)
    except ConfigError as exc:
        problems += exc.problems
    window_states = _window_states(state_in, windows, team_windows, problems)
    objectives, entitlements = _team_objectives(obj.get("teams"), obj.get("capacity"), problems)
    if problems:
        raise ConfigError(problems, source=source) from None
    cap = state.capacity.get(RESOURCE)
    if cap is None:
        raise ConfigError(
            Problem(field="capacity", value=dict(state.capacity), message=f"has no {RESOURCE!r}",
                    fix=f'the simulator replays GPU jobs: add "{RESOURCE}": <pool size>'),
            source=source,
        )
    if not state.teams:
        raise ConfigError(
            Problem(field="teams", value=[], message="is empty", fix="declare at least one team"),
            source=source,
        )
    return Scenario(state=state, capacity=float(cap), source=source, objectives=objectives,
                    entitlements=entitlements, windows=windows, window_states=window_states)


#: What a scenario's team may change in a window.
_WINDOW_VALUES = ("guarantee", "borrow_limit_percent", "borrow_limit")


def _read_scenario_windows(obj: Mapping, problems: list[Problem]) -> tuple[tuple[Window, ...], dict[str, dict]]:
    """The scenario's ``windows`` and each team's values per window (``{"night": {"guarantee":
    {"gpu": 4}}}``), the keys checked; the values are checked with the planner's rules by
    :func:`_window_states`."""
    found = V.Problems()
    windows = read_windows(obj.get("windows"), found, datetime.now(timezone.utc).year)
    problems += found.items
    names = {w.name for w in windows}
    team_windows: dict[str, dict] = {}
    teams = obj.get("teams")
    for i, raw in enumerate(teams if isinstance(teams, list) else ()):
        if not isinstance(raw, Mapping) or raw.get("windows") is None:
            continue
        where = f"teams[{i}].windows"
        given = raw["windows"]
        if not isinstance(given, Mapping):
            problems.append(Problem(where, given, "must be an object of window name to values",
                                    'give {"night": {"guarantee": {"gpu": 4}}}'))
            continue
        for name, values in given.items():
            if name not in names:
                problems.append(Problem(f"{where}.{name}", name, "is not a window of windows",
                                        f"use one of {', '.join(sorted(names))}" if names
                                        else "declare it in windows, or remove it"))
            elif not isinstance(values, Mapping) or not values or set(values) - set(_WINDOW_VALUES):
                problems.append(Problem(f"{where}.{name}", values, "is not a window's values",
                                        f"give any of {', '.join(_WINDOW_VALUES)}"))
            else:
                team_windows.setdefault(name, {})[i] = dict(values)
    groups = obj.get("groups")
    for i, raw in enumerate(groups if isinstance(groups, list) else ()):
        if isinstance(raw, Mapping) and "windows" in raw:  # never ignored: a pool does not follow the clock
            problems.append(Problem(f"groups[{i}].windows", raw["windows"], "a group's pool is the same at every hour",
                                    "give the windows to the teams below it"))
    return windows, team_windows


def _window_states(state_in: Mapping, windows: tuple[Window, ...], team_windows: Mapping[str, Mapping[int, dict]],
                   problems: list[Problem]) -> dict[str, Any]:
    """Per window, the planner's state with the teams' values in it: every rule of the planner
    (the guarantees within the capacity, the shapes of the values) holds in each window, each
    problem said of its window."""
    out: dict[str, Any] = {}
    if problems:
        return out
    for window in windows:
        values = team_windows.get(window.name, {})
        teams = [({**t, **values[i]} if i in values else t) for i, t in enumerate(state_in["teams"])]
        try:
            out[window.name] = reclaim.parse_state({**state_in, "teams": teams})
        except ConfigError as exc:
            problems += [Problem(p.field, p.value, f"{p.message} in window {window.name}", p.fix) for p in exc.problems]
    return out


def _team_objectives(teams: object, capacity: object,
                     problems: list[Problem]) -> tuple[dict[str, Objectives], dict[str, float]]:
    """The ``objectives`` of each team object that carries any (the planner ignores the key)
    and the entitlements given there; their problems are added to ``problems``."""
    out: dict[str, Objectives] = {}
    entitlements: dict[str, float] = {}
    if not isinstance(teams, (list, tuple)):
        return out, entitlements
    for i, raw in enumerate(teams):
        if not isinstance(raw, Mapping) or raw.get("objectives") is None:
            continue
        where = f"teams[{i}].objectives"
        objectives = read_objectives(raw["objectives"], where, lambda *p: problems.append(Problem(*p)))
        if objectives is None or not isinstance(raw.get("name"), str):
            continue
        if objectives:
            out[raw["name"]] = objectives
        if objectives.entitlement is not None:
            gpus = _entitlement_gpus(objectives.entitlement, capacity, f"{where}.{ENTITLEMENT_KEY}", problems)
            if gpus is not None:
                entitlements[raw["name"]] = gpus
    return out, entitlements


def _entitlement_gpus(entitlement: Mapping[str, float], capacity: object, where: str,
                      problems: list[Problem]) -> float | None:
    """The GPUs of a scenario team's entitlement: the guarantee's shape (``{"gpu": N}``), at
    most the capacity."""
    if set(entitlement) != {RESOURCE}:
        problems.append(Problem(field=where, value=dict(entitlement), message="is not a guarantee of the same shape",
                                fix=f'give the GPUs the team was promised, as its guarantee does: {{"{RESOURCE}": 8}}'))
        return None
    gpus = float(entitlement[RESOURCE])
    cap = capacity.get(RESOURCE) if isinstance(capacity, Mapping) else None
    if isinstance(cap, (int, float)) and not isinstance(cap, bool) and gpus > float(cap) + TOL:
        problems.append(Problem(field=f"{where}.{RESOURCE}", value=entitlement[RESOURCE],
                                message=f"is above the capacity ({_num(float(cap))} GPUs)",
                                fix="promise at most the whole pool"))
        return None
    return gpus


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read and validate a scenario JSON file."""
    path = os.fspath(path)
    return parse_scenario(load_scenario_data(path), source=path)


def load_scenario_data(path: str | os.PathLike[str]) -> Any:
    """The JSON data of a scenario file, read (not yet validated: see :func:`parse_scenario`)."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise ConfigError(Problem(field="--scenario", value=path, message="does not exist",
                                  fix="pass the path of a scenario JSON file")) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(Problem(field="--scenario", value=path,
                                  message=f"cannot be read ({exc.__class__.__name__})",
                                  fix="pass a readable scenario JSON file")) from None
    return load_json(text, source=path, what='a JSON object such as {"capacity": {"gpu": 8}, "teams": [...]}')


def _row_error(source: str, where: str, column: str, value: Any, message: str, fix: str) -> ConfigError:
    return ConfigError(Problem(field=f"{where}, {column}", value=value, message=message, fix=fix), source=source,
                       label="invalid trace")


def _number(raw: str, *, source: str, where: str, column: str) -> Fraction:
    # The toolkit checks the text first: Fraction("1e999999999") would build a
    # billion-digit integer before any finiteness check.
    try:
        return parse_decimal(raw)
    except (ValueError, ZeroDivisionError) as exc:
        why = str(exc) if str(exc).startswith(("is ", "has ")) else "is not a finite number"
        raise _row_error(source, where, column, raw, why,
                         "write a plain decimal number (seconds or GPUs)") from None


def _rows(reader: Any, source: str) -> Iterator[list[str]]:
    """The CSV rows; a malformed row (an oversized cell, a NUL byte) is a ConfigError naming its line."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise ConfigError(Problem(field=f"line {reader.line_num}", value=None, message=f"is not a CSV row ({exc})",
                                      fix="write one job per line: job_id,team,submit_time,duration_s,gpus,priority"),
                              source=source) from None
        yield row


def _header_columns(reader: Any, source: str) -> dict[str, int]:
    """The index of each known column in the trace's header row, which must name every
    required column."""
    try:
        header = next(reader)
        # Comment lines before the header (``gpu-share trace export`` writes one: the origin).
        while header and header[0].lstrip().startswith("#"):
            header = next(reader)
    except StopIteration:
        raise ConfigError(Problem(field="line 1 (header)", value="", message="the file is empty",
                                  fix=f"start with the header {','.join(REQUIRED_COLUMNS)},priority"),
                          source=source) from None
    names = [h.strip() for h in header]
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise ConfigError(
            Problem(field="line 1 (header)", value=",".join(names),
                    message=f"missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}",
                    fix=f"the header must name {','.join(REQUIRED_COLUMNS)} (priority is optional)"),
            source=source,
        )
    return {c: names.index(c) for c in REQUIRED_COLUMNS + OPTIONAL_COLUMNS if c in names}


def _gpus(text: str, scenario: Scenario, *, source: str, where: str) -> Fraction:
    """A job's size: above 0, and no larger than the whole pool (such a job could never start)."""
    gpus = _number(text, source=source, where=where, column="gpus")
    if gpus <= 0:
        raise _row_error(source, where, "gpus", text, "must be above 0",
                         "give the GPUs the job holds (fractions allowed, e.g. 0.5)")
    if float(gpus) > scenario.capacity + TOL:
        raise _row_error(source, where, "gpus", text,
                         f"is larger than the whole pool ({_num(scenario.capacity)} GPUs), so the job could never start",
                         "split the job or enlarge capacity.gpu in the scenario")
    return gpus


def _priority(raw: str, *, source: str, where: str) -> int:
    """A job's priority: a whole number, higher is more important."""
    try:
        if len(raw) > 18:  # int() of a 5,001-digit text raises ValueError; bound it first
            raise ValueError(raw)
        return int(raw)
    except ValueError:
        raise _row_error(source, where, "priority", raw, "is not an integer",
                         "write a whole number; higher is more important") from None


def _checkpoint(raw: str, *, source: str, where: str) -> float:
    """A job's checkpoint interval: seconds of running time between two saves, 0 (never) or more."""
    interval = _number(raw, source=source, where=where, column="checkpoint_seconds")
    if interval < 0:
        raise _row_error(source, where, "checkpoint_seconds", raw, "is negative",
                         "give the seconds between the job's checkpoints, 0 for none, or leave the cell empty")
    return float(interval)


def parse_jobs(stream: IO[str] | Iterable[str], scenario: Scenario, *, source: str = "trace") -> list[Job]:
    """Read a job trace CSV (``job_id,team,submit_time,duration_s,gpus[,priority][,checkpoint_seconds]``).

    Raises :class:`ConfigError` naming the first bad row: a missing column, an unknown
    team, a number that is not a number, a negative time or duration, a non-positive
    or non-integer amount, a duplicate id, or a job larger than the whole pool.
    """
    reader = csv.reader(stream)
    col = _header_columns(reader, source)
    team_names = set(scenario.team_names)
    seen: dict[str, int] = {}
    sizes: dict[str, Fraction] = {}
    jobs: list[Job] = []
    for row in _rows(reader, source):
        if not row or all(not cell.strip() for cell in row):
            continue
        line = reader.line_num
        job_id = row[col["job_id"]].strip() if col["job_id"] < len(row) else ""
        where = f"line {line}" + (f" (job {job_id!r})" if job_id else "")

        def cell(name: str, row: list[str] = row, where: str = where) -> str:
            i = col[name]
            if i >= len(row) or row[i].strip() == "":
                raise _row_error(source, where, name, "", "is empty",
                                 f"give every row a value for {name}")
            return row[i].strip()

        job_id = cell("job_id")
        if job_id in seen:
            raise _row_error(source, where, "job_id", job_id, f"repeats the id of line {seen[job_id]}",
                             "give every job a unique id")
        team = cell("team")
        if team not in team_names:
            raise _row_error(source, where, "team", team, "is not a team of the scenario",
                             f"use one of {', '.join(sorted(team_names))}, or add the team to the scenario")
        submit = _number(cell("submit_time"), source=source, where=where, column="submit_time")
        if submit < 0:
            raise _row_error(source, where, "submit_time", cell("submit_time"), "is negative",
                             "times are seconds from the start of the trace (>= 0)")
        duration = _number(cell("duration_s"), source=source, where=where, column="duration_s")
        if duration < 0:
            raise _row_error(source, where, "duration_s", cell("duration_s"), "is negative",
                             "a duration is the job's running time in seconds (>= 0)")
        gpus_text = cell("gpus")
        gpus = sizes.get(gpus_text)  # one Fraction per distinct valid text (see the engine's exact units)
        if gpus is None:
            gpus = sizes[gpus_text] = _gpus(gpus_text, scenario, source=source, where=where)
        priority = 0
        if "priority" in col and col["priority"] < len(row) and row[col["priority"]].strip():
            priority = _priority(row[col["priority"]].strip(), source=source, where=where)
        checkpoint = None
        if "checkpoint_seconds" in col and col["checkpoint_seconds"] < len(row) and row[col["checkpoint_seconds"]].strip():
            checkpoint = _checkpoint(row[col["checkpoint_seconds"]].strip(), source=source, where=where)
        seen[job_id] = line
        jobs.append(Job(id=job_id, team=team, submit_time=float(submit), duration_s=float(duration),
                        gpus=float(gpus), priority=priority, position=len(jobs), line=line,
                        gpus_exact=gpus, checkpoint_seconds=checkpoint))
    return jobs


def load_jobs(path: str | os.PathLike[str], scenario: Scenario, *, option: str = "--trace",
              max_bytes: int | None = None) -> list[Job]:
    """Read a job trace CSV file (see :func:`parse_jobs`). A file that is missing, unreadable, not
    UTF-8 (a gzip file, say) or larger than ``max_bytes`` is a :class:`ConfigError` naming ``option``."""
    path = os.fspath(path)
    try:
        if max_bytes is not None and os.path.getsize(path) > max_bytes:
            raise ConfigError(Problem(field=option, value=path,
                                      message=f"holds {os.path.getsize(path):,} bytes, more than the "
                                              f"{max_bytes:,} a trace may hold here",
                                      fix="export fewer days (gpu-share trace export --from DAY --to DAY)"))
        with open(path, newline="", encoding="utf-8") as fh:
            return parse_jobs(fh, scenario, source=path)
    except FileNotFoundError:
        raise ConfigError(Problem(field=option, value=path, message="does not exist",
                                  fix="pass the path of a job trace CSV")) from None
    except UnicodeDecodeError:
        raise _not_text(path, option) from None
    except (IsADirectoryError, PermissionError) as exc:
        raise ConfigError(Problem(field=option, value=path, message=f"cannot be read ({exc.__class__.__name__})",
                                  fix="pass a readable job trace CSV")) from None


def _not_text(path: str, option: str) -> ConfigError:
    """The refusal of a trace that is not UTF-8 text: a gzip file is named as one."""
    try:
        with open(path, "rb") as fh:
            gzip = fh.read(2) == b"\x1f\x8b"
    except OSError:
        gzip = False
    if gzip:
        return ConfigError(Problem(field=option, value=path, message="is gzip-compressed, not a CSV file",
                                   fix=f"decompress it first (gunzip -k {path}) and pass the CSV"))
    return ConfigError(Problem(field=option, value=path, message="is not UTF-8 text",
                               fix="pass a job trace CSV in UTF-8"))


def check_jobs(scenario: Scenario, jobs: Sequence[Job], mode: str, *, source: str = "trace") -> None:
    """Reject a job that could never start in ``mode`` (naming its row).

    A job could never start when it does not fit even in an empty pool (larger than
    the pool, above its team's guarantee plus borrow cap, or needing capacity
    reserved by other teams) or, in ``static`` mode, when it is larger than its
    team's guarantee.
    """
    teams = {t.name: t for t in scenario.teams}
    tree = hierarchy.Tree.of_state(scenario.state) if scenario.state.groups else None
    reserve_g = {t.name: float(t.guarantee.get(RESOURCE, 0) or 0) if t.sharing == "reserve" else 0.0
                 for t in scenario.teams}
    total_reserve = sum(reserve_g.values())
    passed: set = set()  # (team, gpus) already checked: the checks read nothing else
    for job in jobs:
        if (job.team, job.gpus) in passed:
            continue
        spec = teams.get(job.team)
        if spec is None:
            raise _row_error(source, job.where(), "team", job.team, "is not a team of the scenario",
                             f"use one of {', '.join(sorted(teams))}, or add the team to the scenario")
        if job.gpus > scenario.capacity + TOL:
            raise _row_error(source, job.where(), "gpus", _num(job.gpus),
                             f"is larger than the whole pool ({_num(scenario.capacity)} GPUs), so the job could never start",
                             "split the job or enlarge capacity.gpu in the scenario")
        g = float(spec.guarantee.get(RESOURCE, 0) or 0)
        if mode == STATIC and job.gpus > g + TOL:
            raise _row_error(source, job.where(), "gpus", _num(job.gpus),
                             f"is larger than team {job.team!r}'s guarantee ({_num(g)} GPUs), so in static mode the job could never start",
                             "raise the team's guarantee, split the job, or simulate a sharing mode")
        if mode != STATIC:
            ri = total_reserve - reserve_g[job.team]
            if not reclaim.fits({RESOURCE: job.gpus}, spec, {RESOURCE: 0.0}, {RESOURCE: scenario.capacity},
                                {RESOURCE: ri}):
                cap = reclaim.borrow_cap(spec, RESOURCE)
                raise _row_error(
                    source, job.where(), "gpus", _num(job.gpus),
                    f"could never start: even in an empty pool team {job.team!r} may hold at most "
                    f"{_num(min(g + (math.inf if cap is None else cap), scenario.capacity - ri))} GPUs "
                    f"(guarantee {_num(g)}, borrow cap {'unbounded' if cap is None else _num(cap)}, "
                    f"{_num(ri)} GPUs reserved by other teams)",
                    "split the job, raise the team's guarantee or borrow limit, or change its sharing")
            if tree is not None:
                _check_group_room(tree, job, source)
        passed.add((job.team, job.gpus))


def _check_group_room(tree: hierarchy.Tree, job: Job, source: str) -> None:
    """Reject a job larger than the most its groups could ever let its team hold (even in an
    empty pool): the least Q(N) + B(N) over its path, the idle guarantees of ``reserve`` teams
    left out (they are no one's quota)."""
    room, group = tree.room(job.team, RESOURCE)
    if group is None or job.gpus <= room + TOL:
        return
    reserved = tree.reserved(group).get(RESOURCE, 0)
    if job.team in tree.reserve:
        reserved -= tree.quota(job.team).get(RESOURCE, 0)
    less = f", less {_num(reserved)} GPUs that reserve teams below it keep idle" if reserved > TOL else ""
    lend = ", or let its reserve teams lend" if reserved > TOL else ""
    raise _row_error(
        source, job.where(), "gpus", _num(job.gpus),
        f"could never start: group {group!r} above team {job.team!r} may hold at most {_num(room)} GPUs"
        f" (its quota plus its borrow limit{less})",
        f"split the job, or raise group {group!r}'s borrow limit or its teams' quotas{lend}")


def _num(x: float) -> float | int:
    """A JSON number: an int when the value is whole (4 rather than 4.0)."""
    if isinstance(x, Fraction):
        x = float(x)
    if isinstance(x, float) and math.isfinite(x) and x.is_integer() and abs(x) < 2**53:
        return int(x)
    return x


def trace_from_rows(rows: Iterable[Sequence[Any]], scenario: Scenario, *, header: Sequence[str] | None = None) -> list[Job]:
    """Build jobs from in-memory rows (tests, notebooks) through the CSV validation."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header or ("job_id", "team", "submit_time", "duration_s", "gpus", "priority"))
    for row in rows:
        writer.writerow(row)
    buf.seek(0)
    return parse_jobs(buf, scenario, source="rows")
