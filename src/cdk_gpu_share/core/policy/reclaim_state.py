"""The reclaim planner's input: the state of a queue (settings, teams, running and pending jobs),
read and checked in full, and the documented definitions the planner and the simulator share
(a team's borrow cap, room, fit). The planner itself is :mod:`cdk_gpu_share.core.policy.reclaim`.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from cdk_gpu_share.core import validation as V
from cdk_gpu_share.core.configuration import hierarchy
from cdk_gpu_share.core.configuration.hierarchy import GroupSpec
from cdk_gpu_share.core.errors import ConfigError, Problem

__all__ = [
    "CHECKPOINT", "DEFAULT_MAX_CHECKPOINT_SECONDS", "FITS", "JOB_STATES", "JobSpec", "MAY_STOP", "MUST_WAIT",
    "PendingGroup", "REASONS", "RunningJobs", "SHARING_VALUES", "Settings", "State", "TOLERANCE", "TeamSpec",
    "VICTIM_ORDERS", "YOUNGEST", "borrow_cap", "fits", "free_of", "has_room", "parse_state", "pending_key",
    "reserved_idle_of", "within_cap", "within_guarantee",
]



#: Absolute tolerance of every comparison: "a <= b" means a <= b + TOLERANCE,
#: "a > b" means a > b + TOLERANCE.
TOLERANCE = 1e-9

#: The three sharing strategies. ``reserve`` lends and borrows nothing, ``lend``
#: lends its idle guarantee, ``lend_and_borrow`` also borrows (within its cap).
SHARING_VALUES = ("reserve", "lend", "lend_and_borrow")

#: Job states: ``running`` (Batch STARTING or RUNNING) and ``pending`` (RUNNABLE).
JOB_STATES = ("running", "pending")

#: Reasons of a preemption, in the output.
REASONS = ("borrow_limit", "reclaim", "in_team")

#: The victim orders of ``settings.victim_order``: ``youngest`` (default: lower
#: priority, then the most recent start, first) and ``checkpoint`` (the runs started
#: on borrowed capacity, then the least work lost since the last checkpoint, first).
VICTIM_ORDERS = ("youngest", "checkpoint")
YOUNGEST, CHECKPOINT = VICTIM_ORDERS

#: Default of ``settings.max_checkpoint_seconds``: the longest checkpoint interval the
#: checkpoint-aware order believes (an hour).
DEFAULT_MAX_CHECKPOINT_SECONDS = 3600

_LEND_AND_BORROW = "lend_and_borrow"
_RESERVE = "reserve"
_INF = math.inf
# Slack of the "cannot succeed" shortcut: only ever skips passes that fail by far more
# than the tolerance, so rounding in the incremental sums cannot change a decision.
_BOUND_SLACK = 1e-6


# ---------------------------------------------------------------------------
# The state


@dataclass(frozen=True, slots=True)
class Settings:
    """``settings`` of the state. Both default to 0."""

    reclaim_after_seconds: float = 0
    """A pending job may cause a preemption once it has waited this long."""
    min_runtime_seconds: float = 0
    """A running job younger than this is protected: never chosen."""
    victim_order: str = YOUNGEST
    """One of :data:`VICTIM_ORDERS`: the order in which running jobs are taken as victims."""
    max_checkpoint_seconds: float = DEFAULT_MAX_CHECKPOINT_SECONDS
    """The checkpoint order's cap M: an interval of 0, none or above M counts as M (:func:`lost_work`)."""


@dataclass(frozen=True, slots=True)
class TeamSpec:
    """One team. ``guarantee`` and ``borrow_limit`` map resource names to amounts
    (a missing resource is 0 in ``guarantee``; unbounded in ``borrow_limit``)."""

    name: str
    guarantee: dict
    sharing: str = _LEND_AND_BORROW
    """One of :data:`SHARING_VALUES`. Default ``lend_and_borrow``."""
    borrow_limit_percent: float = -1
    """Percent of the guarantee the team may borrow; -1 (default) is unlimited."""
    borrow_limit: dict | None = None
    """Absolute borrow cap per resource; None (default) is unlimited."""
    in_team_preemption: bool = False
    """Whether the team's pending jobs may stop its own lower-priority jobs."""
    checkpoint_seconds: float | None = None
    """Default checkpoint interval of the team's jobs, in seconds of running time (0 or
    None, the default: never; the simulator tells "not set" from 0)."""
    group: str | None = None
    """The team's group in the tree (:attr:`State.groups`); None (default): a root team."""


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job. ``since`` is the start time (running) or the enqueue time (pending)."""

    id: str
    team: str
    state: str
    demand: dict
    priority: int = 0
    since: float = 0
    terminating: bool = False
    borrowed: bool | None = None
    """Running jobs, checkpoint order: whether the current run started beyond the team's
    guarantee (None: derived from the state, :func:`borrowed_at_start`)."""
    checkpoint_seconds: float | None = None
    """Running jobs, checkpoint order: the job's checkpoint interval (None: its team's)."""
    last_checkpoint: float | None = None
    """Running jobs, checkpoint order: when the current run last saved its progress (None: unknown)."""


def pending_key(job: JobSpec) -> tuple:
    """Rule 2's order of pending jobs: priority descending, then since, then id."""
    return (-job.priority, job.since, job.id)


@dataclass(frozen=True, slots=True)
class PendingGroup:
    """Pending jobs of one team that share one demand, in rule 2's order.

    A caller that keeps its pending jobs this way (the simulator, one group per team
    and job size) passes them as :attr:`State.pending_groups`; rule 2 then passes over
    a group whose jobs must wait as a whole, without visiting each of them.
    """

    team: str
    demand: dict
    jobs: list
    """The pending :class:`JobSpec` objects, each of ``team`` with a demand equal to ``demand``."""
    keys: list
    """:func:`pending_key` of each job, in the same order, strictly ascending."""


class RunningJobs:
    """The running jobs of a queue, kept in the ``youngest`` victim order (lower priority, then
    the most recent ``since``, then id descending) as they start and end.

    A caller that plans again and again while a few jobs start and end between two plans (the
    simulator, at every tick) keeps its running jobs here and passes them as
    :attr:`State.running`: each plan then numbers them as they stand instead of filtering and
    sorting every one again. ``teams``: the team names in the order of the states' ``teams``.
    """

    __slots__ = ("t_index", "keys", "jobs", "team", "ids", "demands", "priorities")

    def __init__(self, teams: Iterable[str]):
        self.t_index = {name: i for i, name in enumerate(teams)}
        # (-priority, since, id) ascending: the reverse of the victim order, in natural comparisons.
        self.keys: list[tuple] = []
        self.jobs: list[JobSpec] = []  # in victim order
        self.team: list[int] = []  # each job's team, as its index in ``teams``, in victim order
        # Each job's id, demand and priority, in victim order: what a plan reads of every running
        # job, copied whole rather than read from each job.
        self.ids: list[str] = []
        self.demands: list[dict] = []
        self.priorities: list[int] = []

    def __len__(self) -> int:
        return len(self.jobs)

    def copy(self) -> RunningJobs:
        """An index of the same jobs, changed independently of this one."""
        other = RunningJobs.__new__(RunningJobs)
        other.t_index = self.t_index
        for name in ("keys", "jobs", "team", "ids", "demands", "priorities"):
            setattr(other, name, list(getattr(self, name)))
        return other

    def add(self, job: JobSpec) -> None:
        """A running, non-terminating job joins (its id not already here)."""
        key = (-job.priority, job.since, job.id)
        keys = self.keys
        i = bisect.bisect_left(keys, key)
        keys.insert(i, key)
        at = len(keys) - 1 - i
        self.jobs.insert(at, job)
        self.team.insert(at, self.t_index[job.team])
        self.ids.insert(at, job.id)
        self.demands.insert(at, job.demand)
        self.priorities.insert(at, job.priority)

    def remove(self, job: JobSpec) -> None:
        """A job added before leaves (it stopped or ended)."""
        key = (-job.priority, job.since, job.id)
        keys = self.keys
        i = bisect.bisect_left(keys, key)
        if i == len(keys) or keys[i] != key:
            raise KeyError(job.id)
        del keys[i]
        at = len(keys) - i
        del self.jobs[at]
        del self.team[at]
        del self.ids[at]
        del self.demands[at]
        del self.priorities[at]


@dataclass(frozen=True, slots=True)
class State:
    """A validated state (see :func:`parse_state`). ``capacity`` names the resources."""

    now: float
    capacity: dict
    settings: Settings
    teams: tuple
    """The :class:`TeamSpec` objects, never changed once in a State (a plan keeps what
    it reads of them for the next State with the same tuple)."""
    jobs: tuple
    pending_groups: tuple = ()
    """The pending jobs as :class:`PendingGroup` objects instead of in ``jobs`` (which
    then holds none): the same plan. Empty (default) in a parsed state."""
    groups: tuple = ()
    """The organisation's tree (:class:`cdk_gpu_share.core.configuration.hierarchy.GroupSpec` objects);
    empty (default): every team is a root, the flat rules."""
    running: RunningJobs | None = None
    """The running jobs as a :class:`RunningJobs` index instead of in ``jobs`` (which then holds
    none): the same plan. None (default) in a parsed state."""


# ---------------------------------------------------------------------------
# The documented definitions, shared by the planner and the simulator


def borrow_cap(team: TeamSpec, resource: str) -> float | None:
    """C(t) in ``resource``: None when unbounded.

    0 unless the team's sharing is ``lend_and_borrow``; otherwise the smaller of
    ``guarantee * borrow_limit_percent / 100`` (unbounded when the percent is -1) and
    ``borrow_limit[resource]`` (unbounded when absent).
    """
    if team.sharing != _LEND_AND_BORROW:
        return 0
    cap = None
    percent = team.borrow_limit_percent
    if percent != -1:
        cap = team.guarantee.get(resource, 0) * percent / 100
    limits = team.borrow_limit
    if limits is not None and resource in limits:
        limit = limits[resource]
        cap = limit if cap is None or limit < cap else cap
    return cap


def has_room(demand: Mapping, free: Mapping, reserved_idle: Mapping) -> bool:
    """Whether a job with ``demand`` has room: demand <= F - RI(T) in every resource it
    needs (demand > 0). The negation is the documented "lacks room"."""
    tol = TOLERANCE
    for r, d in demand.items():
        if d > tol and d > free.get(r, 0) - reserved_idle.get(r, 0) + tol:
            return False
    return True


def within_cap(demand: Mapping, team: TeamSpec, usage: Mapping) -> bool:
    """Whether the borrowing a job with ``demand`` would cause stays within C(team):
    in every resource it needs where U + demand > G, U + demand - G <= C(team)."""
    tol = TOLERANCE
    guarantee = team.guarantee
    for r, d in demand.items():
        if d > tol:
            over = usage.get(r, 0) + d - guarantee.get(r, 0)
            if over > tol:
                cap = borrow_cap(team, r)
                if cap is not None and over > cap + tol:
                    return False
    return True


def fits(demand: Mapping, team: TeamSpec, usage: Mapping, free: Mapping, reserved_idle: Mapping) -> bool:
    """Whether a pending job with ``demand`` of ``team`` fits.

    ``usage`` is U(team), ``free`` is F and ``reserved_idle`` is RI(team), each a
    mapping from resource to amount (missing keys are 0). In every resource the job
    needs (demand > 0): demand <= F - RI(team) (:func:`has_room`), and where
    U + demand > G, also U + demand - G <= C(team) (:func:`within_cap`).
    """
    return has_room(demand, free, reserved_idle) and within_cap(demand, team, usage)


def within_guarantee(demand: Mapping, team: TeamSpec, usage: Mapping) -> bool:
    """Whether U(team) + demand <= G(team) in every resource the job needs."""
    tol = TOLERANCE
    guarantee = team.guarantee
    for r, d in demand.items():
        if d > tol and usage.get(r, 0) + d > guarantee.get(r, 0) + tol:
            return False
    return True


def free_of(capacity: Mapping, usage_by_team: Mapping) -> dict:
    """F: capacity minus the summed usage of all teams (``usage_by_team``: name -> amounts)."""
    return {
        r: c - math.fsum(u.get(r, 0) for u in usage_by_team.values()) for r, c in capacity.items()
    }


def reserved_idle_of(team_name: str, teams: Iterable[TeamSpec], usage_by_team: Mapping) -> dict:
    """RI(team): the idle guarantee max(0, G - U) of every *other* ``reserve`` team, summed."""
    out: dict = {}
    for t in teams:
        if t.sharing != _RESERVE or t.name == team_name:
            continue
        usage = usage_by_team.get(t.name, {})
        for r, g in t.guarantee.items():
            idle = g - usage.get(r, 0)
            if idle > 0:
                out[r] = out.get(r, 0) + idle
    return out


# ---------------------------------------------------------------------------
# Validation


class _Missing:
    def __repr__(self) -> str:  # pragma: no cover - never shown
        return "<missing>"


_MISSING = _Missing()


# Numbers and kinds come from the validation toolkit: finite and at most 2**53 in
# size, without converting a huge int to float (math.isfinite(10**400) overflows).
_is_number = V.is_number
_number_problem = V.number_problem  # the toolkit's words for a refused number (type, NaN, infinity, size)
_SAFE = V.SAFE_NUMBER
_kind = V.json_kind


class _Checker:
    """Collects every problem of one state."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, field: str, value: Any, message: str, fix: str) -> None:
        self.problems.append(Problem(field=field, value=value, message=message, fix=fix))

    def missing(self, field: str, fix: str) -> None:
        self.add(field, None, "is missing", fix)

    def number(self, obj: Mapping, key: str, path: str, *, default: Any = _MISSING, minimum: float | None = None,
               fix: str) -> Any:
        value = obj.get(key, _MISSING)
        if value is _MISSING:
            if default is _MISSING:
                self.missing(path, fix)
            return default
        if not _is_number(value):
            self.add(path, value, _number_problem(value), fix)  # type: ignore[arg-type]
            return default if default is not _MISSING else None
        if minimum is not None and value < minimum:
            self.add(path, value, f"must not be below {minimum}", fix)
            return default if default is not _MISSING else None
        return value

    def boolean(self, obj: Mapping, key: str, path: str, default: bool) -> bool:
        value = obj.get(key, default)
        if type(value) is not bool:
            self.add(path, value, f"must be true or false, not {_kind(value)}", "write true or false")
            return default
        return value

    def amounts(self, value: Any, path: str, resources: Mapping | None, what: str) -> dict:
        """A mapping of resource name to non-negative number."""
        if not isinstance(value, Mapping):
            self.add(path, value, f"must be an object of resource amounts, not {_kind(value)}",
                     f'write {what} such as {{"gpu": 1}}')
            return {}
        out = {}
        for r, amount in value.items():
            where = f"{path}.{r}"
            if not isinstance(r, str):
                self.add(where, r, "resource names must be strings", 'write a name such as "gpu"')
                continue
            if not _is_number(amount):
                self.add(where, amount, _number_problem(amount),  # type: ignore[arg-type]
                         "write a non-negative number such as 1 or 0.5")
                continue
            if amount < 0:
                self.add(where, amount, "is a negative amount", "use 0 or more")
                continue
            if resources is not None and r not in resources:
                names = ", ".join(resources) or "none"
                self.add(where, amount, f"names resource {r!r}, which capacity does not name",
                         f"use a resource of capacity ({names}) or add {r!r} to capacity")
                continue
            out[r] = amount
        return out


def _one_of(values: Iterable[str], limit: int = 8) -> str:
    values = list(values)
    shown = ", ".join(repr(v) for v in values[:limit])
    if len(values) > limit:
        shown += f", ... ({len(values)} in all)"
    return shown or "none"


def parse_state(state: object) -> State:
    """Validate a JSON-like state and return it as a :class:`State`.

    Raises :class:`ConfigError` listing every problem, each naming the field (a
    dotted path such as ``teams[1].borrow_limit_percent``), the value and the fix.
    """
    check = _Checker()
    if not isinstance(state, Mapping):
        raise ConfigError(Problem("state", _kind(state), "must be a JSON object",
                                  "pass an object with now, capacity, teams and jobs"))
    now = check.number(state, "now", "now", fix="write the current time in seconds, such as 10000")

    raw_capacity = state.get("capacity", _MISSING)
    names = None  # unknown: do not report resources as unnamed by capacity
    if raw_capacity is _MISSING:
        check.missing("capacity", 'add the pool\'s capacity per resource, such as {"gpu": 16}')
        capacity = {}
    else:
        capacity = check.amounts(raw_capacity, "capacity", None, "the capacity")
        # Resource names for the "capacity does not name" check: also those whose amount
        # is itself invalid (already reported), so that one mistake gives one message.
        if isinstance(raw_capacity, Mapping):
            names = dict.fromkeys(k for k in raw_capacity if isinstance(k, str))

    raw_settings = state.get("settings", None)
    settings = Settings()
    if raw_settings is not None:
        if not isinstance(raw_settings, Mapping):
            check.add("settings", raw_settings, f"must be an object, not {_kind(raw_settings)}",
                      "write {\"reclaim_after_seconds\": 0, \"min_runtime_seconds\": 0} or leave it out")
        else:
            settings = Settings(
                reclaim_after_seconds=check.number(
                    raw_settings, "reclaim_after_seconds", "settings.reclaim_after_seconds",
                    default=0, minimum=0, fix="use a number of seconds, 0 or more"),
                min_runtime_seconds=check.number(
                    raw_settings, "min_runtime_seconds", "settings.min_runtime_seconds",
                    default=0, minimum=0, fix="use a number of seconds, 0 or more"),
                victim_order=_victim_order(raw_settings, check),
                max_checkpoint_seconds=_max_checkpoint_seconds(raw_settings, check),
            )

    groups = _parse_groups(state, names, check)
    teams, team_names = _parse_teams(state, capacity, names, check, groups)
    jobs = _parse_jobs(state, names, team_names, check)

    if check.problems:
        raise ConfigError(check.problems)
    return State(now=now, capacity=capacity, settings=settings, teams=tuple(teams), jobs=tuple(jobs),
                 groups=tuple(groups))


def _parse_groups(state: Mapping, names: dict | None, check: _Checker) -> list[GroupSpec]:
    """``groups``: the tree's groups (optional). Their shape is checked with the teams."""
    raw_groups = state.get("groups")
    if raw_groups is None:
        return []
    if not isinstance(raw_groups, (list, tuple)):
        check.add("groups", raw_groups, f"must be a list of group objects, not {_kind(raw_groups)}",
                  'write [{"name": "research"}] or leave it out')
        return []
    groups: list[GroupSpec] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(raw_groups):
        where = f"groups[{i}]"
        if not isinstance(raw, Mapping):
            check.add(where, raw, f"must be a group object, not {_kind(raw)}", 'write {"name": "research"}')
            continue
        name = raw.get("name", _MISSING)
        if not isinstance(name, str) or not name:
            check.add(f"{where}.name", None if name is _MISSING else name, "must be a non-empty string",
                      "give the group a name")
            continue
        if name in seen:
            check.add(f"{where}.name", name, f"is a duplicate group name (also groups[{seen[name]}].name)",
                      "give every group a unique name")
            continue
        seen[name] = i
        parent = raw.get("parent")
        if parent is not None and (not isinstance(parent, str) or not parent):
            check.add(f"{where}.parent", parent, "must be a group's name", "write the name of another group, or leave it out")
        guarantee = check.amounts(raw.get("guarantee", {}), f"{where}.guarantee", names, "the group's pool")
        limit = raw.get("borrow_limit")
        borrow_limit = None if limit is None else check.amounts(limit, f"{where}.borrow_limit", names,
                                                                "the group's borrow limit")
        # Kept with its other problems (the state is refused anyway), so its teams are not told it is unknown.
        groups.append(GroupSpec(name, parent if isinstance(parent, str) else None, guarantee, borrow_limit))
    return groups


def _victim_order(raw_settings: Mapping, check: _Checker) -> str:
    """``settings.victim_order``: one of :data:`VICTIM_ORDERS`, default ``youngest``."""
    order = raw_settings.get("victim_order", YOUNGEST)
    if type(order) is not str or order not in VICTIM_ORDERS:
        check.add("settings.victim_order", order, "is not a victim order",
                  "use youngest (the default) or checkpoint")
        return YOUNGEST
    return order


def _max_checkpoint_seconds(raw_settings: Mapping, check: _Checker) -> float:
    """``settings.max_checkpoint_seconds``: a number above 0, default
    :data:`DEFAULT_MAX_CHECKPOINT_SECONDS`."""
    fix = (f"give the longest checkpoint interval the victim order believes, in seconds above 0"
           f" (default {DEFAULT_MAX_CHECKPOINT_SECONDS}), or leave it out")
    value = check.number(raw_settings, "max_checkpoint_seconds", "settings.max_checkpoint_seconds",
                         default=DEFAULT_MAX_CHECKPOINT_SECONDS, fix=fix)
    if value <= 0:
        check.add("settings.max_checkpoint_seconds", value, "must be above 0", fix)
        return DEFAULT_MAX_CHECKPOINT_SECONDS
    return value


def _parse_teams(state: Mapping, capacity: dict, names: dict | None, check: _Checker,
                 groups: list[GroupSpec]) -> tuple[list[TeamSpec], set | None]:
    raw_teams = state.get("teams", _MISSING)
    if raw_teams is _MISSING:
        check.missing("teams", 'add a list of teams, such as [{"name": "alpha", "guarantee": {"gpu": 1}}]')
        return [], None
    if not isinstance(raw_teams, (list, tuple)):
        check.add("teams", raw_teams, f"must be a list of team objects, not {_kind(raw_teams)}",
                  'write [{"name": "alpha", "guarantee": {"gpu": 1}}]')
        return [], None
    teams: list[TeamSpec] = []
    seen: dict[str, int] = {}
    totals: dict[str, list] = {r: [] for r in capacity}
    members: list[tuple[str, str, object]] = []
    for i, raw in enumerate(raw_teams):
        where = f"teams[{i}]"
        if not isinstance(raw, Mapping):
            check.add(where, raw, f"must be a team object, not {_kind(raw)}",
                      'write {"name": "alpha", "guarantee": {"gpu": 1}}')
            continue
        ok = True
        name = raw.get("name", _MISSING)
        if name is _MISSING:
            check.missing(f"{where}.name", "give the team a name")
            ok = False
        elif not isinstance(name, str):
            check.add(f"{where}.name", name, f"must be a string, not {_kind(name)}", "write the team's name")
            ok = False
        elif name in seen:
            check.add(f"{where}.name", name, f"is a duplicate team name (also teams[{seen[name]}].name)",
                      "give every team a unique name")
            ok = False
        else:
            seen[name] = i
        raw_guarantee = raw.get("guarantee", _MISSING)
        if raw_guarantee is _MISSING:
            check.missing(f"{where}.guarantee", 'add the team\'s guarantee, such as {"gpu": 1} ({} for none)')
            guarantee = {}
            ok = False
        else:
            n = len(check.problems)
            guarantee = check.amounts(raw_guarantee, f"{where}.guarantee", names, "the guarantee")
            ok = ok and len(check.problems) == n
        for r, g in guarantee.items():
            if r in totals:
                totals[r].append(g)
        sharing = raw.get("sharing", _LEND_AND_BORROW)
        if sharing not in SHARING_VALUES or not isinstance(sharing, str):
            check.add(f"{where}.sharing", sharing, "is not a sharing strategy",
                      "use reserve, lend or lend_and_borrow")
            ok = False
        percent = raw.get("borrow_limit_percent", -1)
        ok = _borrow_limit_percent_ok(percent, where, check) and ok
        raw_limit = raw.get("borrow_limit", None)
        borrow_limit = None
        if raw_limit is not None:
            n = len(check.problems)
            borrow_limit = check.amounts(raw_limit, f"{where}.borrow_limit", names, "the borrow limit")
            ok = ok and len(check.problems) == n
        preempt = check.boolean(raw, "in_team_preemption", f"{where}.in_team_preemption", False)
        n = len(check.problems)
        checkpoint = check.number(raw, "checkpoint_seconds", f"{where}.checkpoint_seconds", default=None, minimum=0,
                                  fix="give the team's checkpoint interval in seconds, 0 (never) or more")
        ok = ok and len(check.problems) == n
        group = raw.get("group")
        if group is not None and (not isinstance(group, str) or not group):
            check.add(f"{where}.group", group, "must be a group's name", "write the name of a group, or leave it out")
            ok = False
        if ok:
            teams.append(TeamSpec(name=name, guarantee=guarantee, sharing=sharing,
                                  borrow_limit_percent=percent, borrow_limit=borrow_limit,
                                  in_team_preemption=preempt, checkpoint_seconds=checkpoint, group=group))
            members.append((where, name, group))
    pooled = False
    for g in groups:
        for r, amount in g.guarantee.items():
            if r in totals and amount > 0:
                totals[r].append(amount)
                pooled = True
    for r, values in totals.items():
        total = math.fsum(values)
        if total > capacity[r] + TOLERANCE:
            what = "the guarantees and the groups' pools" if pooled else "the guarantees"
            check.add(f"teams[*].guarantee.{r}", total,
                      f"{what} sum to more than capacity.{r} ({capacity[r]})",
                      f"lower {what} or raise capacity.{r}")
    if groups or any(group is not None for _, _, group in members):
        hierarchy.structure_problems([(f"groups[{i}]", g.name, g.parent) for i, g in enumerate(groups)],
                                     members, check.add)
    # Names of all teams, also those with other problems, so that their jobs are not
    # reported as jobs of an unknown team.
    return teams, set(seen)


def _borrow_limit_percent_ok(percent: object, where: str, check: _Checker) -> bool:
    """-1 (unlimited) or a percentage >= 0; any other value is a problem of ``where``."""
    fix = "use -1 for unlimited, or a percentage >= 0"
    if not _is_number(percent):
        check.add(f"{where}.borrow_limit_percent", percent, _number_problem(percent), fix)  # type: ignore[arg-type]
    elif percent < -1:  # type: ignore[operator]
        check.add(f"{where}.borrow_limit_percent", percent, "is below -1", fix)
    elif -1 < percent < 0:  # type: ignore[operator]
        check.add(f"{where}.borrow_limit_percent", percent,
                  "is negative but not -1 (the only negative value, meaning unlimited)", fix)
    else:
        return True
    return False


def _parse_jobs(state: Mapping, capacity: Mapping | None, team_names: set | None, check: _Checker) -> list[JobSpec]:
    raw_jobs = state.get("jobs", _MISSING)
    if raw_jobs is _MISSING:
        check.missing("jobs", "add the list of jobs ([] for none)")
        return []
    if not isinstance(raw_jobs, (list, tuple)):
        check.add("jobs", raw_jobs, f"must be a list of job objects, not {_kind(raw_jobs)}",
                  "write a list of jobs ([] for none)")
        return []
    jobs: list[JobSpec] = []
    seen: dict[str, int] = {}
    append = jobs.append
    fast_teams = team_names if team_names is not None else ()
    fast_resources = capacity if capacity is not None else ()
    for i, raw in enumerate(raw_jobs):
        # Fast path for a job without any problem (the common case; the Lambda plans
        # for thousands of jobs): the same checks as below, without building messages.
        if type(raw) is dict:
            get = raw.get
            job_id = get("id")
            team = get("team")
            job_state = get("state")
            demand = get("demand")
            priority = get("priority", 0)
            since = get("since")
            terminating = get("terminating", False)
            borrowed = get("borrowed", _MISSING)
            checkpoint = get("checkpoint_seconds", _MISSING)
            last = get("last_checkpoint", _MISSING)
            plain = borrowed is _MISSING and checkpoint is _MISSING and last is _MISSING
            # Numbers get the same bounds as the full checks' is_number (finite, at most
            # 2**53; NaN fails every comparison), inlined for speed: a job the full checks
            # refuse must never be accepted here.
            ts = type(since)
            if (
                type(job_id) is str and job_id not in seen
                and type(team) is str and team in fast_teams
                and (job_state == "running" or job_state == "pending")
                and type(priority) is int
                and (ts is int or ts is float) and -_SAFE <= since <= _SAFE  # type: ignore[operator]
                and (terminating is False or terminating is True)
                and type(demand) is dict
                and (plain or job_state == "pending")
            ):
                for r, a in demand.items():
                    ta = type(a)
                    if not ((ta is int or ta is float) and 0 <= a <= _SAFE and r in fast_resources):
                        break
                else:
                    seen[job_id] = i
                    append(JobSpec(job_id, team, job_state, demand, priority, since, terminating))  # type: ignore[arg-type]
                    continue
        job = _checked_job(raw, i, seen, capacity, team_names, check)
        if job is not None:
            append(job)
    return jobs


def _checked_job(raw: object, i: int, seen: dict[str, int], capacity: Mapping | None, team_names: set | None,
                 check: _Checker) -> JobSpec | None:
    """Job ``i`` checked field by field, each problem recorded; None when it has one.

    The slow path of :func:`_parse_jobs`, taken by a job the fast path did not accept.
    """
    where = f"jobs[{i}]"
    if not isinstance(raw, Mapping):
        check.add(where, raw, f"must be a job object, not {_kind(raw)}",
                  'write {"id": "j1", "team": "alpha", "state": "running", "demand": {"gpu": 1}, "since": 0}')
        return None
    get = raw.get
    n = len(check.problems)
    job_id = get("id", _MISSING)
    if type(job_id) is not str:
        if job_id is _MISSING:
            check.missing(f"{where}.id", "give the job its id")
        else:
            check.add(f"{where}.id", job_id, f"must be a string, not {_kind(job_id)}",
                      'write the job id as a string, such as "j1"')
    elif job_id in seen:
        check.add(f"{where}.id", job_id, f"is a duplicate job id (also jobs[{seen[job_id]}].id)",
                  "list every job once, with a unique id")
    else:
        seen[job_id] = i
    team = get("team", _MISSING)
    if type(team) is not str or (team_names is not None and team not in team_names):
        if team is _MISSING:
            check.missing(f"{where}.team", "name the job's team")
        elif not isinstance(team, str):
            check.add(f"{where}.team", team, f"must be a string, not {_kind(team)}", "write the team's name")
        else:
            check.add(f"{where}.team", team, "is not a team of this state",
                      f"use one of the teams ({_one_of(sorted(team_names))}) or add the team")  # type: ignore[arg-type]
    job_state = get("state", _MISSING)
    if job_state != "running" and job_state != "pending":
        if job_state is _MISSING:
            check.missing(f"{where}.state", "add state: running or pending")
        else:
            check.add(f"{where}.state", job_state, "is not a job state",
                      "use running (Batch STARTING or RUNNING) or pending (RUNNABLE)")
    raw_demand = get("demand", _MISSING)
    demand = None
    if raw_demand is _MISSING:
        check.missing(f"{where}.demand", 'add the job\'s demand, such as {"gpu": 1}')
    elif type(raw_demand) is dict and capacity is not None and all(
        _is_number(a) and a >= 0 and r in capacity for r, a in raw_demand.items()
    ):
        demand = raw_demand  # fast path: already valid
    else:
        demand = check.amounts(raw_demand, f"{where}.demand", capacity, "the demand")
    priority = get("priority", 0)
    if type(priority) is not int:
        if type(priority) is float and priority.is_integer():
            priority = int(priority)
        else:
            check.add(f"{where}.priority", priority, f"must be an integer, not {_kind(priority)}",
                      "write a whole number (higher is more important; negative allowed)")
    since = get("since", _MISSING)
    if not _is_number(since):
        if since is _MISSING:
            check.missing(f"{where}.since", "add the start time (running) or enqueue time (pending) in seconds")
        else:
            check.add(f"{where}.since", since, _number_problem(since),  # type: ignore[arg-type]
                      "write the start time (running) or enqueue time (pending) in seconds")
    terminating = get("terminating", False)
    if type(terminating) is not bool:
        check.add(f"{where}.terminating", terminating, f"must be true or false, not {_kind(terminating)}",
                  "write true or false")
    extra = _checkpoint_fields(raw, where, check) if job_state == "running" else (None, None, None)
    if len(check.problems) > n:
        return None
    return JobSpec(job_id, team, job_state, demand, priority, since, terminating, *extra)  # type: ignore[arg-type]


def _checkpoint_fields(raw: Mapping, where: str, check: _Checker) -> tuple:
    """A running job's ``borrowed``, ``checkpoint_seconds`` and ``last_checkpoint``, each
    None when absent (pending jobs ignore them)."""
    borrowed = raw.get("borrowed", None)
    if "borrowed" in raw and type(borrowed) is not bool:
        check.add(f"{where}.borrowed", borrowed, f"must be true or false, not {_kind(borrowed)}",
                  "write true when the job's current run started beyond its team's guarantee, else false,"
                  " or leave it out to derive it")
        borrowed = None
    checkpoint = None
    if "checkpoint_seconds" in raw:
        checkpoint = check.number(raw, "checkpoint_seconds", f"{where}.checkpoint_seconds", default=None, minimum=0,
                                  fix="give the job's checkpoint interval in seconds, 0 (never) or more,"
                                      " or leave it out for its team's")
    last = None
    if "last_checkpoint" in raw:
        last = check.number(raw, "last_checkpoint", f"{where}.last_checkpoint", default=None,
                            fix="write the time of the run's last checkpoint in seconds, or leave it out")
    return borrowed, checkpoint, last


FITS, MAY_STOP, MUST_WAIT = 0, 1, 2
"""What :meth:`PlanState.standing` makes of a pending job."""

_ID = attrgetter("id")
_SINCE = attrgetter("since")
_PRIORITY = attrgetter("priority")
