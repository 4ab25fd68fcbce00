"""The reclaim planner: which running jobs to stop so that a team gets back what it lent.

This module implements the rules of ``docs/reclaim-planner.md`` and is the *only*
implementation of it: the reclaim Lambda, the ``gpu-share reclaim plan`` command and
the what-if simulator all call it. It is pure Python (standard library only).

Entry points
------------
* :func:`plan` -- validate a JSON-like state and return the plan (a JSON-like dict).
* :func:`parse_state` / :func:`plan_state` -- the same in two steps, so that a caller
  that builds :class:`State` objects itself (the simulator) skips JSON validation.
* :func:`borrow_cap`, :func:`fits`, :func:`within_guarantee`, :func:`free_of`,
  :func:`reserved_idle_of` and :data:`TOLERANCE` -- the planner's documented definitions, for
  callers (the simulator's dispatch) that must apply the same rules.

Definitions (per resource ``r``; all comparisons use an absolute tolerance of 1e-9)
----------------------------------------------------------------------------------
* ``U(t)`` usage of team ``t`` (its running, non-terminating jobs, as the plan stands),
  ``G(t)`` its guarantee, ``B(t) = max(0, U - G)`` what it borrows.
* ``C(t)`` the borrow cap (:func:`borrow_cap`), ``F`` the free capacity
  (:func:`free_of`), ``RI(t)`` the idle guarantee of the *other* ``reserve`` teams
  (:func:`reserved_idle_of`), never lent.
* A pending job fits (:func:`fits`) when, in every resource it needs, its demand is at
  most ``F - RI(T)`` and any borrowing it causes stays within ``C(T)``.

Implementation notes
--------------------
:func:`plan_state` is one :class:`PlanState` (the plan as it stands, changed only by
its ``take``, ``give_back`` and ``serve``) and one function per rule. Running jobs are
sorted once in victim order (:func:`victim_sort`: by default lower priority, then most
recent ``since``, then id descending; with ``victim_order: checkpoint`` the runs started
on borrowed capacity first, then the least lost work); each team keeps its unprotected jobs in that order, in one list and in
one list per resource the job uses. Usage, free capacity (from :func:`free_of`) and
the set of borrowing teams per resource are updated incrementally; reserved idle
capacity comes from :func:`reserved_idle_of`, cached until a reserve team's usage
changes.
A reclaim (2b, and the second phase of 2c) merges only the lists (V, r) of the teams V
that borrow in a resource r the beneficiary lacks: eligibility can only be lost during
one greedy pass, never gained, so a list that stops qualifying is dropped for the
pass. Two exact-or-conservative shortcuts skip passes that cannot succeed (taking
every candidate would not make room; in 2c, stopping every own candidate would leave
the job beyond its guarantee and still not fitting). Initial and reported usages are
exact sums (:func:`math.fsum`), so the plan does not depend on the order of the input
lists. ``benchmarks/planner.py`` measures it (10,000 running jobs: tens of ms).

Rule 2 visits every pending job, but most must wait, and a job that must wait changes
nothing: its standing (fits, may stop jobs, must wait) depends on U, its team and its
demand only, so it is asked once per (team, demand) until U next changes. A caller
that keeps its pending jobs as :class:`PendingGroup` objects (the simulator, which
plans every poll interval) lets rule 2 pass over a group that must wait as a whole:
a plan then costs in the running jobs and the groups, not in the length of the queue.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from cdk_gpu_share.core import validation as V
from cdk_gpu_share.core.configuration import hierarchy
from cdk_gpu_share.core.configuration.hierarchy import GroupSpec
from cdk_gpu_share.core.errors import ConfigError, Problem

__all__ = [
    "TOLERANCE",
    "SHARING_VALUES",
    "JOB_STATES",
    "REASONS",
    "VICTIM_ORDERS",
    "DEFAULT_MAX_CHECKPOINT_SECONDS",
    "Settings",
    "TeamSpec",
    "JobSpec",
    "State",
    "plan",
    "parse_state",
    "plan_state",
    "borrow_cap",
    "fits",
    "has_room",
    "within_cap",
    "within_guarantee",
    "free_of",
    "reserved_idle_of",
    "lost_work",
    "borrowed_at_start",
    "victim_sort",
    "PlanState",
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


# ---------------------------------------------------------------------------
# The planner


def plan(state: object) -> dict:
    """Validate ``state`` (the input of ``gpu-share reclaim plan``) and return the plan.

    Raises :class:`ConfigError` on invalid input. The same input always gives the
    same output, byte for byte under ``json.dumps``.
    """
    return plan_state(parse_state(state))


def _num(value: float) -> float | int:
    """A JSON number: integral floats become ints, -0.0 becomes 0."""
    if type(value) is float and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def plan_state(state: State, *, full: bool = True) -> dict:
    """Plan for an already valid :class:`State` (no validation).

    :param full: the whole plan. Default: True. False gives ``preemptions`` only,
        what the simulator reads (without the lists of served and waiting jobs and
        the ``teams`` report, each as long as the queue).

    The planner's documented rules, in order, each one function over one
    :class:`PlanState`: :func:`enforce_borrow_caps` (rule 1), :func:`serve_pending`
    (rule 2, with :func:`pending_order`, :func:`has_waited` and
    :func:`choose_victims`), then :func:`report`.
    """
    ps = PlanState(state)
    preemptions: list[dict] = []
    enforce_borrow_caps(ps, preemptions)
    served, waiting = serve_pending(ps, preemptions, waiting=full)
    if not full:
        return {"preemptions": preemptions}
    return {"preemptions": preemptions, "served": [p.id for p in served], "waiting": waiting,
            "teams": report(ps, served)}


FITS, MAY_STOP, MUST_WAIT = 0, 1, 2
"""What :meth:`PlanState.standing` makes of a pending job."""

_ID = attrgetter("id")
_SINCE = attrgetter("since")
_PRIORITY = attrgetter("priority")


def victim_sort(running: list, state: State) -> None:
    """Sort ``running`` (non-terminating running jobs) in the victim order of ``state``.

    ``youngest``: lower priority first, then the most recent ``since``, then id
    descending. ``checkpoint``: the jobs whose run started on borrowed capacity first,
    then the least lost work (:func:`lost_work`), then the most recent ``since``, then
    id descending; priority is not part of it. Stable sorts, last key first: one key of
    one type each lets CPython compare with its float, int and str fast paths.
    """
    running.sort(key=_ID, reverse=True)
    running.sort(key=_SINCE, reverse=True)
    if state.settings.victim_order != CHECKPOINT:
        running.sort(key=_PRIORITY)
        return
    now = state.now
    cap = state.settings.max_checkpoint_seconds
    team_checkpoint = {t.name: t.checkpoint_seconds for t in state.teams}
    running.sort(key=lambda job: lost_work(job, team_checkpoint.get(job.team), now, cap))
    derived: dict = {}
    if any(job.borrowed is None for job in running):
        derived = borrowed_at_start(running, state.teams)
    # Borrowed runs first: stopping a run that started within its team's guarantee
    # would make that team wait again for capacity it was promised.
    running.sort(key=lambda job: not (derived[job.id] if job.borrowed is None else job.borrowed))


def lost_work(job: JobSpec, team_checkpoint: float | None, now: float,
              cap: float = DEFAULT_MAX_CHECKPOINT_SECONDS) -> float:
    """W: the seconds of work a stop of running ``job`` at ``now`` throws away, as the
    checkpoint-aware order believes it.

    The job's age modulo its checkpoint interval c (its own, else ``team_checkpoint``;
    exact, :func:`math.fmod`), where an interval of 0 (never), none or above ``cap`` counts
    as ``cap``; then, when the job says when it last saved (``last_checkpoint``), the time
    since then if that is less. So W < ``cap`` always: declaring "never" or a week cannot
    make a run look more expensive to stop than one that saves every ``cap`` seconds, and a
    claimed checkpoint can only lower W.
    """
    age = max(0, now - job.since)
    interval = team_checkpoint if job.checkpoint_seconds is None else job.checkpoint_seconds
    if not interval or interval > cap:
        interval = cap
    w = math.fmod(age, interval)
    if job.last_checkpoint is not None:
        return min(w, max(0, now - max(job.since, job.last_checkpoint)))
    return w


def borrowed_at_start(running: Iterable[JobSpec], teams: Iterable[TeamSpec]) -> dict[str, bool]:
    """Job id -> whether its run started on borrowed capacity, derived from the state.

    A run borrowed when its demand and that of its team's running jobs started before
    it (smaller ``since``, then id) exceed the team's guarantee in some resource it
    needs: what its team held just before it started, if none of them has stopped
    since. ``running``: the running, non-terminating jobs. Callers that saw the start
    (the simulator) or recorded it (the reclaim Lambda) pass ``borrowed`` instead.
    """
    tol = TOLERANCE
    guarantee = {t.name: t.guarantee for t in teams}
    by_team: dict[str, list] = {}
    for job in running:
        by_team.setdefault(job.team, []).append(job)
    out: dict[str, bool] = {}
    for team, jobs in by_team.items():
        jobs.sort(key=lambda job: (job.since, job.id))
        g = guarantee.get(team, {})
        held: dict = {}
        for job in jobs:
            over = False
            for r, d in job.demand.items():
                if d:
                    total = held[r] = held.get(r, 0) + d
                    over = over or (d > tol and total > g.get(r, 0) + tol)
            out[job.id] = over
    return out


_last_team_table: list = [(None, None, None)]  # one (teams, resources, table), replaced whole


def _team_table(teams: tuple, resources: list) -> tuple:
    """What a plan reads of the teams and never changes: each name's index, G and C
    per team and resource, whether each team is ``reserve``, the reserve teams, and
    the indexes in name order of the teams with a borrow cap in some resource.

    Kept for the last ``teams`` tuple seen (a State's teams never change: frozen
    specs whose dicts nothing writes), so a caller that plans again and again with
    the same teams (the simulator, at every tick) builds it once. The entry is one
    tuple, read and replaced whole, so concurrent plans never mix two entries."""
    last_teams, last_resources, table = _last_team_table[0]
    if last_teams is teams and last_resources == resources:
        return table
    is_reserve = [t.sharing == _RESERVE for t in teams]
    caps = [{r: borrow_cap(t, r) for r in resources} for t in teams]
    table = (
        {t.name: i for i, t in enumerate(teams)},
        [{r: t.guarantee.get(r, 0) for r in resources} for t in teams],
        caps,
        is_reserve,
        [t for t, res in zip(teams, is_reserve) if res],
        [i for i in sorted(range(len(teams)), key=lambda i: teams[i].name)
         if any(c is not None for c in caps[i].values())],
    )
    _last_team_table[0] = (teams, list(resources), table)
    return table


def _index_running(nt: int, resources: list, r_team: list[int], r_demand: list[dict],
                   unprotected: list[bool] | None) -> tuple[list[dict], list[dict], list[list[int]]]:
    """The running jobs per team: the amounts per resource (kept for exact, fsum, sums); the
    unprotected jobs in victim order; per resource, those with demand in it (reclaim candidates)."""
    tol = TOLERANCE
    # (Loops, not nested comprehensions: on CPython 3.11 each comprehension runs
    # in a frame of its own, and a plan builds these for every team.)
    sums: list[dict] = []
    victims_in: list[dict] = []
    for _ in range(nt):
        team_sums: dict = {}
        team_lists: dict = {}
        for r in resources:
            team_sums[r] = []
            team_lists[r] = []
        sums.append(team_sums)
        victims_in.append(team_lists)
    victims_of: list[list[int]] = [[] for _ in range(nt)]
    for j in range(len(r_team)):
        ti = r_team[j]
        acc = sums[ti]
        free_to_take = unprotected is None or unprotected[j]
        if free_to_take:
            victims_of[ti].append(j)
            lists = victims_in[ti]
        for r, d in r_demand[j].items():
            if d:
                acc[r].append(d)
                if d > tol and free_to_take:
                    lists[r].append(j)
    return sums, victims_in, victims_of


def _usage(sums: list[dict], resources: list) -> list[dict]:
    """U per team: the exact (fsum) sum of its running amounts per resource."""
    U: list[dict] = []
    fsum = math.fsum
    for acc in sums:
        u = {}
        for r in resources:
            u[r] = fsum(acc[r])
        U.append(u)
    return U


class PlanState:
    """The plan as it stands: usage, free capacity, reserved idle capacity, the chosen
    victims, and the candidate lists, kept consistent by the planner's operations.

    Teams are numbered in input order (``ti``), running non-terminating jobs in victim
    order (``j``: lower numbers are taken first). The operations:

    * :meth:`take` a victim, :meth:`give_back` one (the only two changes of U);
    * :meth:`fits`, :meth:`within_guarantee`, :meth:`lacking` (the resources where a
      job lacks room), :meth:`exceeding` (the resources where a team's B exceeds C);
    * :meth:`reserved_idle` (RI, from :func:`reserved_idle_of`) and ``F`` (from
      :func:`free_of`, then moved by every take and give-back);
    * the candidate lists: :meth:`own_victims` (a team's unprotected jobs in victim
      order), :meth:`own_candidates` (those below a priority, with their summed
      demand) and :meth:`others_in_victim_order` (the other teams' jobs eligible for
      reclaim by a pending job, each checked when it is reached).

    Running jobs are numbered once in victim order; each team keeps its unprotected
    jobs in that order, in one list and one list per resource the job uses. The set of
    borrowing teams per resource and what each team could still give back
    (:meth:`avail_of`, for the "cannot succeed" shortcut) are kept up to date by
    take and give-back.
    """

    def __init__(self, state: State):
        tol = TOLERANCE
        self.now = now = state.now
        self.capacity = capacity = state.capacity
        self.resources = resources = list(capacity)
        self.settings = state.settings
        self.teams = teams = state.teams
        self.nt = nt = len(teams)
        (self.t_index, self.G, self.CAP, self.is_reserve, self._reserve_specs,
         self.capped) = _team_table(teams, resources)
        t_index, G, is_reserve = self.t_index, self.G, self.is_reserve

        # Running (non-terminating) jobs, as parallel lists indexed by a job number:
        # the job's place in victim order (victim_sort), so that comparing two numbers
        # compares the jobs.
        jobs = state.jobs
        running = [job for job in jobs if job.state == "running" and not job.terminating]
        self.pending = pending = [] if len(running) == len(jobs) else [
            job for job in jobs if job.state != "running" and not job.terminating]
        self.groups = state.pending_groups
        if pending and self.groups:
            raise ValueError("a State holds its pending jobs in jobs or in pending_groups, not in both")
        victim_sort(running, state)
        # Under the default order priority comes first, so a team's jobs below a
        # priority are a prefix of its list (own_candidates stops at the first other).
        self.priority_first = state.settings.victim_order != CHECKPOINT
        self.r_id = [job.id for job in running]
        self.r_team = r_team = [t_index[job.team] for job in running]
        self.r_demand = r_demand = [job.demand for job in running]
        self.r_prio = [job.priority for job in running]
        self.n_running = n_running = len(running)
        # Protected: age < min_runtime_seconds, with age = max(0, now - since).
        min_runtime = state.settings.min_runtime_seconds
        if min_runtime > tol:
            unprotected = [min_runtime <= (now - job.since if job.since < now else 0) + tol for job in running]
        else:
            unprotected = None
        self.sums, self.victims_in, self.victims_of = _index_running(nt, resources, r_team, r_demand, unprotected)

        # U per team (exact sums), F (free_of), the borrowing teams per resource.
        self.U = U = _usage(self.sums, resources)
        self.F = free_of(capacity, dict(enumerate(U)))
        self.borrowers = {r: {ti for ti in range(nt) if U[ti][r] - G[ti][r] > tol} for r in resources}
        # RI from reserved_idle_of over the reserve teams (the others add nothing),
        # cached per team (one entry, -1, for every team that is not reserve) until a
        # reserve team's usage changes.
        self._reserve_usage = {t.name: U[ti] for ti, t in enumerate(teams) if is_reserve[ti]}
        self._ri_cache: dict = {}
        # Bumped by every change of U (and so of F and RI).
        self.changes = 0
        # heads[ti][r]: victims_in[ti][r][:heads[ti][r]] are all chosen for good.
        self.heads = [dict.fromkeys(resources, 0) for _ in range(nt)]
        # Bumped whenever one of the team's jobs is taken or given back.
        self.version = [0] * nt
        # What each team's unchosen unprotected jobs could give back; computed for a
        # team when first needed (avail_of), then kept up to date by take/give_back.
        self.avail: list = [None] * nt
        # Whether each team's U moved since it was summed here (take, give_back or
        # serve), and whether no job is protected: then avail_of is U itself.
        self.moved = bytearray(nt)
        self.all_free = unprotected is None
        self.chosen = bytearray(n_running)
        self._own_cache: dict = {}
        # The organisation's tree (None: the flat rules, untouched).
        self.tree = _TreeView(state, self) if state.groups else None

    # -- the two changes of U ----------------------------------------------

    def _apply(self, ti: int, demand: dict, sign: int) -> None:
        """Add (sign 1) or remove (sign -1) a demand to team ti's usage."""
        tol = TOLERANCE
        u = self.U[ti]
        g = self.G[ti]
        F = self.F
        borrowers = self.borrowers
        for r, d in demand.items():
            if not d:
                continue
            d = sign * d
            nu = u[r] + d
            u[r] = nu
            F[r] -= d
            if nu - g[r] > tol:
                borrowers[r].add(ti)
            else:
                borrowers[r].discard(ti)
        if self.is_reserve[ti]:
            self._ri_cache.clear()
        if self.tree is not None:
            self.tree.apply(ti, demand, sign)
        self.moved[ti] = 1
        self.changes += 1

    def serve(self, ti: int, demand: dict) -> None:
        """A pending job of team ti is served: its demand joins U(ti)."""
        self._apply(ti, demand, 1)

    def take(self, j: int) -> None:
        """Choose running job j as a victim: it no longer counts in U."""
        self.chosen[j] = 1
        ti = self.r_team[j]
        self.version[ti] += 1
        demand = self.r_demand[j]
        self._apply(ti, demand, -1)
        a = self.avail[ti]
        if a is not None:
            for r, d in demand.items():
                if d:
                    a[r] -= d

    def give_back(self, j: int) -> None:
        """Put victim j back: it counts in U again."""
        self.chosen[j] = 0
        ti = self.r_team[j]
        self.version[ti] += 1
        demand = self.r_demand[j]
        self._apply(ti, demand, 1)
        a = self.avail[ti]
        if a is not None:
            for r, d in demand.items():
                if d:
                    a[r] += d

    # -- the planner's documented definitions, as the plan stands ---------------------

    def reserved_idle(self, ti: int) -> dict:
        """RI(ti) (:func:`reserved_idle_of`); missing resources are 0."""
        key = ti if self.is_reserve[ti] else -1
        ri = self._ri_cache.get(key)
        if ri is None:
            ri = self._ri_cache[key] = reserved_idle_of(self.teams[ti].name, self._reserve_specs,
                                                        self._reserve_usage)
        return ri

    def fits(self, ti: int, demand: dict) -> bool:
        ok = fits(demand, self.teams[ti], self.U[ti], self.F, self.reserved_idle(ti))
        return ok and (self.tree is None or self.tree.within_bounds(ti, demand))

    def entitled(self, ti: int, demand: dict) -> bool:
        """Whether the job may reclaim: within its team's guarantee (flat), or, with a tree,
        entitled at some node of its path (:meth:`_TreeView.entitled_at`)."""
        if self.tree is None:
            return self.within_guarantee(ti, demand)
        return self.tree.entitled_at(ti, demand) is not None

    def within_guarantee(self, ti: int, demand: dict) -> bool:
        return within_guarantee(demand, self.teams[ti], self.U[ti])

    def standing(self, ti: int, demand: dict) -> int:
        """Rule 2 for a pending job of team ti, as U stands, before its age is read:
        :data:`FITS` (2a), :data:`MAY_STOP` (it does not fit but is within its
        guarantee, or its team has in-team preemption: 2b or 2c once it has waited),
        or :data:`MUST_WAIT`. A function of U (see :attr:`changes`), the team and
        the demand only."""
        if self.fits(ti, demand):
            return FITS
        if self.teams[ti].in_team_preemption or self.entitled(ti, demand):
            return MAY_STOP
        return MUST_WAIT

    def lacking(self, ti: int, demand: dict) -> list:
        """Resources the job needs in which it lacks room: demand > F - RI(T)."""
        tol = TOLERANCE
        ri = self.reserved_idle(ti)
        F = self.F
        return [r for r, d in demand.items() if d > tol and d > F[r] - ri.get(r, 0) + tol]

    def exceeding(self, ti: int) -> list:
        """Resources in which team ti borrows more than its cap (B > C)."""
        tol = TOLERANCE
        u, g, caps = self.U[ti], self.G[ti], self.CAP[ti]
        return [r for r in self.resources if caps[r] is not None and u[r] - g[r] > caps[r] + tol]

    # -- candidate lists ---------------------------------------------------

    def own_victims(self, ti: int) -> list:
        """Team ti's unprotected running jobs, in victim order (chosen ones included)."""
        return self.victims_of[ti]

    def avail_of(self, ti: int) -> dict:
        """What team ti's unchosen unprotected jobs could give back, per resource."""
        a = self.avail[ti]
        if a is None and self.all_free and not self.moved[ti]:
            # Nothing of ti taken, given back or served, and no job protected: its
            # jobs could give back its whole usage, the same fsum of the same amounts.
            a = self.avail[ti] = dict(self.U[ti])
        if a is None:
            parts: dict = {r: [] for r in self.resources}
            chosen, r_demand = self.chosen, self.r_demand
            for j in self.victims_of[ti]:
                if not chosen[j]:
                    for r, d in r_demand[j].items():
                        if d:
                            parts[r].append(d)
            a = self.avail[ti] = {r: math.fsum(parts[r]) for r in self.resources}
        return a

    def own_candidates(self, ti: int, prio: int) -> tuple[list, dict]:
        """Team ti's unchosen unprotected jobs of priority below prio, in victim
        order, and the sum of their demand (cached until one of ti's jobs changes)."""
        key = (ti, prio)
        hit = self._own_cache.get(key)
        if hit is not None and hit[0] == self.version[ti]:
            return hit[1], hit[2]
        jobs = []
        parts: dict = {r: [] for r in self.resources}
        chosen, r_demand, r_prio = self.chosen, self.r_demand, self.r_prio
        priority_first = self.priority_first
        for j in self.victims_of[ti]:
            if r_prio[j] >= prio:
                if priority_first:
                    break
                continue
            if not chosen[j]:
                jobs.append(j)
                for r, d in r_demand[j].items():
                    if d:
                        parts[r].append(d)
        gain = {r: math.fsum(parts[r]) for r in self.resources}
        self._own_cache[key] = (self.version[ti], jobs, gain)
        return jobs, gain

    def others_in_victim_order(self, ti: int, demand: dict) -> Iterator[int]:
        """Other teams' unprotected running jobs in victim order, each yielded only if
        eligible for reclaim by the job (team ti, ``demand``) when it is reached."""
        if self.tree is not None:
            yield from self.tree.candidates(ti, demand)
            return
        tol = TOLERANCE
        lack = self.lacking(ti, demand)
        if not lack:
            return
        candidates = set()
        for r in lack:
            candidates |= self.borrowers[r]
        candidates.discard(ti)
        if not candidates:
            return
        U, G, F = self.U, self.G, self.F
        # Shortcut: even taking every candidate job cannot make room.
        ri = self.reserved_idle(ti)
        for r in lack:
            room = F[r] - ri.get(r, 0) + math.fsum(self.avail_of(v)[r] for v in candidates)
            if demand[r] > room + tol + _BOUND_SLACK:
                return
        # Merge, in victim order, the lists (V, r) of each candidate team V and each
        # resource r where p lacks room and V borrows. A job is eligible when it is
        # reached from a list whose (V, r) still qualifies; once a list no longer
        # does, it never will again in this pass (p's lack and V's borrowing only
        # shrink), and its jobs that are still eligible sit in another live list.
        chosen, heads, victims_in = self.chosen, self.heads, self.victims_in
        heap = []
        for v in candidates:
            uv, gv = U[v], G[v]
            hv, lv = heads[v], victims_in[v]
            for r in lack:
                if uv[r] - gv[r] > tol:
                    lst = lv[r]
                    pos = hv[r]
                    n = len(lst)
                    while pos < n and chosen[lst[pos]]:
                        pos += 1
                    hv[r] = pos
                    if pos < n:
                        heap.append((lst[pos], v, r, pos))
        heapq.heapify(heap)
        while heap:
            _, v, r, pos = heapq.heappop(heap)
            lst = victims_in[v][r]
            j = lst[pos]
            if not chosen[j]:
                ri_r = self.reserved_idle(ti).get(r, 0)
                if not (demand[r] > F[r] - ri_r + tol and U[v][r] - G[v][r] > tol):
                    continue  # drop the list (V, r) for this pass
                yield j
            pos += 1
            n = len(lst)
            while pos < n and chosen[lst[pos]]:
                pos += 1
            if pos < n:
                heapq.heappush(heap, (lst[pos], v, r, pos))


class _TreeView:
    """The organisation's tree as a plan stands (contract: the tree's semantics).

    For a group N: U(N) the usage of the teams below it (kept by :meth:`apply`), Q(N) its
    quota with every ``reserve`` team below counting only what it uses (its idle guarantee
    is no one's quota), B(N) its borrow limit. The planner asks it:

    * :meth:`within_bounds` -- admission: U(N) + demand <= Q(N) + B(N) at every group above;
    * :meth:`entitled_at` -- where the job is entitled: 0 within its team's guarantee, i at the
      i-th group of its path, the first with U(N) + demand <= Q(N), None nowhere (the fleet is
      no node); :meth:`height` -- that node's height in the tree (0 for a team);
    * :meth:`classes` -- rule 2's order: by that height, lowest first, then the rest;
    * :meth:`candidates` -- reclaim: jobs of teams outside the entitlement node's subtree,
      whose side below the common ancestor A all use more than their quota, the highest
      A first (outside the division before a sibling), then victim order;
    * :meth:`enforce_group_caps` -- rule 1 for groups.
    """

    def __init__(self, state: State, ps: PlanState):
        self.ps = ps
        tree = hierarchy.Tree.of_state(state)
        self.tree = tree
        resources = ps.resources
        self.paths = [tree.path(t.name) for t in ps.teams]
        self.Q = {g: {r: tree.quota(g).get(r, 0) for r in resources} for g in tree.groups}
        self.B = {g: {r: tree.borrow_limit(g, r) for r in resources} for g in tree.groups}
        self.UG = {g: dict.fromkeys(resources, 0.0) for g in tree.groups}
        for ti, path in enumerate(self.paths):
            for g in path:
                for r in resources:
                    self.UG[g][r] += ps.U[ti][r]
        self.reserve_below: dict[str, list[int]] = {g: [] for g in tree.groups}
        for ti in range(ps.nt):
            if ps.is_reserve[ti]:
                for g in self.paths[ti]:
                    self.reserve_below[g].append(ti)
        self.depth = {g: tree.depth(g) for g in tree.groups}

    def apply(self, ti: int, demand: dict, sign: int) -> None:
        for g in self.paths[ti]:
            ug = self.UG[g]
            for r, d in demand.items():
                if d:
                    ug[r] += sign * d

    def quota(self, g: str, r: str) -> float:
        """Q(N) as the plan stands: the reserve teams below count what they use, not their idle guarantee."""
        ps = self.ps
        q = self.Q[g][r]
        for ti in self.reserve_below[g]:
            idle = ps.G[ti][r] - ps.U[ti][r]
            if idle > 0:
                q -= idle
        return q

    def within_bounds(self, ti: int, demand: dict) -> bool:
        ps = self.ps
        quota = self.quota
        if ps.is_reserve[ti]:
            # A reserve team's own job counts in its groups' Q as it will use: the part of its idle
            # guarantee the job takes stops being idle, so a group's limit never keeps the team
            # off its own guarantee.
            lift = {r: min(d, max(0.0, ps.G[ti].get(r, 0) - ps.U[ti].get(r, 0))) for r, d in demand.items()}

            def quota(g: str, r: str) -> float:
                return self.quota(g, r) + lift.get(r, 0)
        return hierarchy.admits(self.paths[ti], demand, self.UG.__getitem__, quota, self._limit)

    def _limit(self, g: str, r: str) -> float | None:
        return self.B[g][r]

    def entitled_at(self, ti: int, demand: dict) -> int | None:
        ps = self.ps
        return hierarchy.entitled_at(self.paths[ti], demand, within_guarantee(demand, ps.teams[ti], ps.U[ti]),
                                     self.UG.__getitem__, self.quota)

    def height(self, ti: int, demand: dict) -> int | None:
        """The height in the tree of the node where the job is entitled (None: nowhere). Ranking
        by the steps up the job's own path instead would tie a job entitled at a deep group with
        one entitled at the common ancestor of a shallow branch, and each would take back the
        room freed for the other at every tick."""
        at = self.entitled_at(ti, demand)
        return None if at is None else 0 if at == 0 else self.tree.height(self.paths[ti][at - 1])

    def classes(self, items: list) -> list[list]:
        """``(ti, demand, x)`` items as lists of x per class: each height, lowest first, then the
        jobs entitled nowhere (all heights present, empty ones included)."""
        top = self.tree.top_height
        out: list[list] = [[] for _ in range(top + 2)]
        for ti, demand, x in items:
            h = self.height(ti, demand)
            out[top + 1 if h is None else h].append(x)
        return out

    def lacking(self, ti: int, demand: dict) -> list:
        """The resources where the job lacks room in the pool or at a group's bound."""
        lack = set(self.ps.lacking(ti, demand))
        for r, d in demand.items():
            if r not in lack and not self.within_bounds(ti, {r: d}):
                lack.add(r)
        return sorted(lack)

    def _over(self, node: str | int, r: str) -> bool:
        """Whether a node (a group's name, or a team's index) uses more than its quota in r."""
        ps = self.ps
        if isinstance(node, int):
            return ps.U[node][r] - ps.G[node][r] > TOLERANCE
        return self.UG[node][r] - self.quota(node, r) > TOLERANCE

    def candidates(self, ti: int, demand: dict) -> Iterator[int]:
        ps = self.ps
        h = self.entitled_at(ti, demand)
        if h is None:
            return
        lack = self.lacking(ti, demand)
        if not lack:
            return
        mine = self.paths[ti]
        inside = mine[h - 1] if h else None  # the entitlement group (None: the team alone)
        above = set(mine[h - 1:] if h else mine)  # the entitlement node's groups
        # Only a team whose side (itself and its groups below A) is above its quota in a resource
        # the job lacks can give, and taking jobs only lowers usage: the others are left out from
        # the start.
        teams: set[int] = set()
        for r in lack:
            teams |= ps.borrowers[r]
        teams.discard(ti)
        bands: dict[int, list] = {}  # the rank of the common ancestor A -> (victims, side) per team
        for v in teams:
            theirs = self.paths[v]
            if inside is not None and inside in theirs:
                continue  # inside the entitlement node's subtree
            k = next((i for i, g in enumerate(theirs) if g in above), len(theirs))
            side: tuple[str | int, ...] = (v, *theirs[:k])
            if not any(all(self._over(n, r) for n in side) for r in lack):
                continue  # and never will be in this pass: taking jobs only lowers usage
            rank = self.depth[theirs[k]] if k < len(theirs) else -1  # the fleet is highest
            bands.setdefault(rank, []).append(zip(ps.own_victims(v), itertools.repeat(side)))
        tol = TOLERANCE
        for rank in sorted(bands):
            # Each team's victims are in victim order (ascending index): merged, the band is too.
            for j, side in heapq.merge(*bands[rank]):
                if ps.chosen[j]:
                    continue
                lack = self.lacking(ti, demand)
                if not lack:
                    return  # taking jobs only makes room: the job lacks nothing any more
                job = ps.r_demand[j]
                if any(job.get(r, 0) > tol and all(self._over(n, r) for n in side) for r in lack):
                    yield j

    def enforce_group_caps(self, preemptions: list) -> None:
        """Rule 1 for groups: after the teams, each group above Q + B (name order) loses jobs
        of its subtree in victim order, then the ones not needed are put back."""
        ps = self.ps
        tol = TOLERANCE
        for g in sorted(self.tree.groups):
            def exceeding(g: str = g) -> list:
                limits = self.B[g]
                return [r for r in ps.resources if (b := limits[r]) is not None
                        and self.UG[g][r] > self.quota(g, r) + b + tol]

            if not exceeding():
                continue
            jobs = sorted(j for ti in range(ps.nt) if g in self.paths[ti] for j in ps.own_victims(ti)
                          if not ps.chosen[j])
            taken: list[int] = []
            for j in jobs:
                over = exceeding()
                if not over:
                    break
                if any(ps.r_demand[j].get(r, 0) > tol for r in over):
                    ps.take(j)
                    taken.append(j)
            if not exceeding():
                for k in range(len(taken) - 1, -1, -1):
                    j = taken[k]
                    ps.give_back(j)
                    if exceeding():
                        ps.take(j)
                    else:
                        del taken[k]
            for j in taken:
                preemptions.append({"job": ps.r_id[j], "team": ps.teams[ps.r_team[j]].name,
                                    "reason": "borrow_limit"})


# ---------------------------------------------------------------------------
# The rules, one function each


def enforce_borrow_caps(ps: PlanState, preemptions: list) -> None:
    """Rule 1: each team (name order) whose B exceeds C loses unprotected jobs, in
    victim order, with demand where B still exceeds C; then the ones not needed
    are put back, walking backwards (only if B <= C was reached)."""
    teams = ps.teams
    for ti in ps.capped:  # name order; a team without a cap never exceeds it
        if not ps.exceeding(ti):
            continue
        taken: list[int] = []
        for j in ps.own_victims(ti):
            exceeding = ps.exceeding(ti)
            if not exceeding:
                break
            demand = ps.r_demand[j]
            if any(demand.get(r, 0) > TOLERANCE for r in exceeding):
                ps.take(j)
                taken.append(j)
        if not ps.exceeding(ti):
            for k in range(len(taken) - 1, -1, -1):
                j = taken[k]
                ps.give_back(j)
                if ps.exceeding(ti):
                    ps.take(j)
                else:
                    del taken[k]
        name = teams[ti].name
        for j in taken:
            preemptions.append({"job": ps.r_id[j], "team": name, "reason": "borrow_limit"})
    if ps.tree is not None:
        ps.tree.enforce_group_caps(preemptions)


def group_order(ps: PlanState) -> tuple[list, list]:
    """:func:`pending_order` for :attr:`State.pending_groups`: the groups within their
    team's guarantee when rule 2 starts, and the rest (each group is one team and
    one demand, so it lies wholly in one of the two)."""
    first: list[PendingGroup] = []
    rest: list[PendingGroup] = []
    t_index = ps.t_index
    if ps.tree is not None:
        classes = ps.tree.classes([(t_index[g.team], g.demand, g) for g in ps.groups])
        return tuple(classes)  # type: ignore[return-value]
    for g in ps.groups:
        (first if ps.within_guarantee(t_index[g.team], g.demand) else rest).append(g)
    return first, rest


def merged(parts: tuple[list, list]) -> list:
    """The jobs of :func:`group_order`'s two parts, in rule 2's order (the (key, job) pairs
    compare by key alone: keys end in the job id, so no two are equal)."""
    return [p for part in parts for _, p in heapq.merge(*(zip(g.keys, g.jobs) for g in part))]


def pending_order(ps: PlanState) -> list:
    """Rule 2's order: the pending jobs within their team's guarantee when rule 2
    starts, then the rest; in each group priority descending, since, id
    (:func:`pending_key`). For the jobs of ``jobs``; :func:`group_order` and
    :func:`merged` give the same order for :attr:`State.pending_groups`."""
    first: list[JobSpec] = []
    rest: list[JobSpec] = []
    t_index = ps.t_index
    if ps.tree is not None:
        classes = ps.tree.classes([(t_index[p.team], p.demand, p) for p in ps.pending])
        return [p for part in classes for p in sorted(part, key=pending_key)]
    # Whether a job is within its guarantee depends on its team and demand only (U
    # does not change here), and pending jobs of a team often share one demand dict
    # (the simulator's do): one answer per (team, demand), keyed by the demand's
    # identity (each id is unique while ps.pending holds its dict).
    within: dict = {}
    for p in ps.pending:
        key = (p.team, id(p.demand))
        w = within.get(key)
        if w is None:
            w = within[key] = ps.within_guarantee(t_index[p.team], p.demand)
        (first if w else rest).append(p)
    first.sort(key=pending_key)
    rest.sort(key=pending_key)
    return first + rest


def has_waited(p: JobSpec, now: float, settings: Settings) -> bool:
    """Whether pending job p has waited: age = max(0, now - since) >= reclaim_after_seconds."""
    age = now - p.since
    if age < 0:
        age = 0
    return settings.reclaim_after_seconds <= age + TOLERANCE


def own_phase_hopeless(ps: PlanState, ti: int, demand: dict, gain: dict) -> bool:
    """Shortcut for rule 2c: True when p cannot fit even with every one of its own
    team's candidates stopped and, then still beyond its guarantee, may reclaim
    nothing from the others. (Own candidates only lower U(T) and raise F, and RI(T)
    does not depend on T's usage, so "all taken" is the best the phase can do.)"""
    if ps.tree is not None:
        return False  # entitled at a group after the own phase: reclaiming may still help
    tol = TOLERANCE
    needed = [(r, d) for r, d in demand.items() if d > tol]
    u, g, caps = ps.U[ti], ps.G[ti], ps.CAP[ti]
    if all(u[r] - gain[r] + d <= g[r] + tol for r, d in needed):
        return False  # within its guarantee then: reclaiming from others may help
    ri = ps.reserved_idle(ti)
    F = ps.F
    slack = tol + _BOUND_SLACK
    for r, d in needed:
        if d > F[r] - ri.get(r, 0) + gain[r] + slack:
            return True
        over = u[r] - gain[r] + d - g[r]
        if caps[r] is not None and over > caps[r] + slack:
            return True
    return False


def choose_victims(ps: PlanState, ti: int, p: JobSpec, own: bool) -> list[int] | None:
    """Rules 2b (own=False) and 2c (own=True): the victims for p, or None.

    Greedy: take candidates in order until p fits (none: give every one back);
    then walk them backwards and give back each one without which p still fits."""
    demand = p.demand
    taken: list[int] = []
    done = False
    if own:
        own_jobs, gain = ps.own_candidates(ti, p.priority)
        if own_phase_hopeless(ps, ti, demand, gain):
            return None
        for j in own_jobs:
            ps.take(j)
            taken.append(j)
            if ps.fits(ti, demand):
                done = True
                break
    if not done and ps.entitled(ti, demand):
        for j in ps.others_in_victim_order(ti, demand):
            ps.take(j)
            taken.append(j)
            if ps.fits(ti, demand):
                done = True
                break
    if not done:
        for j in reversed(taken):
            ps.give_back(j)
        return None
    for k in range(len(taken) - 1, -1, -1):
        j = taken[k]
        ps.give_back(j)
        if ps.fits(ti, demand):
            del taken[k]
        else:
            ps.take(j)
    return taken


def serve_pending(ps: PlanState, preemptions: list, *, waiting: bool) -> tuple[list, list | None]:
    """Rule 2: each pending job in :func:`pending_order` fits (2a), or, having
    waited, reclaims (2b) or stops its own team's lower-priority jobs (2c), or waits
    (:func:`serve_one`). Returns the served jobs and the ids of the waiting ones (None
    unless ``waiting``), each in that order.

    A job that must wait (:meth:`PlanState.standing`) changes nothing, and neither
    does the next job of its team and demand until U changes: the standing is asked
    once per (team, demand) until then, and groups of such jobs
    (:attr:`State.pending_groups`) are passed over as a whole (:func:`serve_groups`).
    """
    if ps.groups:
        parts = group_order(ps)
        served = serve_groups(ps, parts, preemptions)
        if not waiting:
            return served, None
        done = {id(p) for p in served}
        return served, [p.id for p in merged(parts) if id(p) not in done]
    served = []
    left: list[str] = []
    t_index = ps.t_index
    standing: dict = {}  # (team, id(demand)) -> ps.standing, as in pending_order
    seen = ps.changes
    for p in pending_order(ps):
        demand = p.demand
        if ps.changes != seen:
            standing.clear()
            seen = ps.changes
        key = (p.team, id(demand))
        st = standing.get(key)
        if st is None:
            st = standing[key] = ps.standing(t_index[p.team], demand)
        if st != MUST_WAIT and serve_one(ps, t_index[p.team], p, st, preemptions):
            served.append(p)
        else:
            left.append(p.id)
    return served, (left if waiting else None)


def serve_groups(ps: PlanState, parts: tuple[list, list], preemptions: list) -> list[JobSpec]:
    """:func:`serve_pending` over :attr:`State.pending_groups`, in :func:`group_order`'s
    two ``parts``.

    The groups' jobs are merged in rule 2's order (a heap of each group's next job).
    A group whose standing is MUST_WAIT leaves the heap ("parked"): its jobs reached
    while U stays the same all wait. When U changes, every parked group comes back
    at its first job after the last one reached, and standings are asked anew.
    Bringing groups back costs at most as much as visiting every job of the part:
    beyond that, a group that must wait stays in the heap and its jobs are passed
    one by one, as in the flat walk.
    """
    served: list[JobSpec] = []
    t_index = ps.t_index
    for part in parts:
        heap = [(g.keys[0], k, 0) for k, g in enumerate(part) if g.keys]
        heapq.heapify(heap)
        parked: list[int] = []
        standing: dict = {}  # group index -> ps.standing while U stays the same
        seen = ps.changes
        last = None
        budget = sum(len(g.keys) for g in part)  # groups that may still come back
        while True:
            if ps.changes != seen:
                standing.clear()
                seen = ps.changes
                budget -= len(parked)
                for k in parked:
                    keys = part[k].keys
                    pos = bisect.bisect_right(keys, last)
                    if pos < len(keys):
                        heapq.heappush(heap, (keys[pos], k, pos))
                parked.clear()
            if not heap:
                break
            last, k, pos = heapq.heappop(heap)
            g = part[k]
            st = standing.get(k)
            if st is None:
                st = standing[k] = ps.standing(t_index[g.team], g.demand)
            if st == MUST_WAIT and budget > 0:
                parked.append(k)
                continue
            p = g.jobs[pos]
            if st != MUST_WAIT and serve_one(ps, t_index[g.team], p, st, preemptions):
                served.append(p)
            pos += 1
            if pos < len(g.keys):
                heapq.heappush(heap, (g.keys[pos], k, pos))
    return served


def serve_one(ps: PlanState, ti: int, p: JobSpec, st: int, preemptions: list) -> bool:
    """Rule 2 for pending job p of team ti, whose standing (:meth:`PlanState.standing`)
    is FITS or MAY_STOP: whether it is served (2a; or, having waited, 2b, then 2c),
    with its victims added to ``preemptions``."""
    demand = p.demand
    if st == FITS:
        victims: list[int] | None = []
    else:
        if not has_waited(p, ps.now, ps.settings):
            return False
        victims = None
        if ps.entitled(ti, demand):
            victims = choose_victims(ps, ti, p, own=False)
        if victims is None and ps.teams[ti].in_team_preemption:
            victims = choose_victims(ps, ti, p, own=True)
        if victims is None:
            return False
    teams = ps.teams
    for j in victims:  # type: ignore[union-attr]  # None returned above
        vt = ps.r_team[j]
        preemptions.append({
            "job": ps.r_id[j],
            "team": teams[vt].name,
            "reason": "in_team" if vt == ti else "reclaim",
            "beneficiary": p.id,
        })
    ps.serve(ti, demand)
    return True


def report(ps: PlanState, served: list[JobSpec]) -> dict:
    """Usage, guarantee, borrowed and borrow cap after the plan, for every team (by
    name) and every resource. Exact sums: fsum is exact, so adding the negated
    victims gives the sum of the others."""
    tol = TOLERANCE
    resources, sums, G, CAP = ps.resources, ps.sums, ps.G, ps.CAP
    for j in range(ps.n_running):
        if ps.chosen[j]:
            acc = sums[ps.r_team[j]]
            for r, d in ps.r_demand[j].items():
                if d:
                    acc[r].append(-d)
    for p in served:
        acc = sums[ps.t_index[p.team]]
        for r, d in p.demand.items():
            if d:
                acc[r].append(d)
    out = {}
    teams = ps.teams
    for ti in sorted(range(ps.nt), key=lambda i: teams[i].name):
        usage = {r: math.fsum(sums[ti][r]) for r in resources}
        borrowed = {}
        for r in resources:
            b = usage[r] - G[ti][r]
            borrowed[r] = _num(b) if b > tol else 0
        out[teams[ti].name] = {
            "usage": {r: _num(usage[r]) for r in resources},
            "guarantee": {r: _num(G[ti][r]) for r in resources},
            "borrowed": borrowed,
            "borrow_cap": {r: (None if CAP[ti][r] is None else _num(CAP[ti][r])) for r in resources},
        }
    return out
