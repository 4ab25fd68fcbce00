"""The organisation's tree compiled onto a flat backend, and what the compilation changed.

AWS HyperPod task governance and Batch quota management know teams, not trees: a compute
quota or a quota share per team. :func:`compile_flat` turns a config with ``groups`` into the
flat config such a backend deploys (the one rule, for the constructs, ``plan`` and
``simulate --hierarchy compiled`` alike):

* each group's pool is split among its children (groups and teams) in proportion to their
  quota Q, recursively, in whole units rounded down (instances, or accelerators on a HyperPod
  type where a team counts accelerators), the remainder one unit at a time to the largest Q,
  then by name; no team takes more than its own borrow cap lets it use (its guarantee plus its
  cap, the backend's default cap where it gives none) and no group more than its borrow limit:
  what one cannot take goes to the others, what none can take stays unassigned
  (:func:`cdk_gpu_share.core.configuration.hierarchy.split_pools_capped`);
* each borrowing team's borrow room is the least of what its own cap leaves and, over the groups
  above it, Q(N) + B(N) less the team's compiled guarantee: an absolute amount (HyperPod, in
  accelerators unless it makes whole instances), or the least whole percentage of the compiled
  guarantee that gives that many instances (Batch, which rounds down; 0 when the compiled
  guarantee is 0).

The fair-share queue applies the tree itself (its reclaim planner) and Kueue has Cohorts, so
neither compiles anything away: :func:`compilation` says which backend does what.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.configuration import hierarchy
from cdk_gpu_share.core.configuration.parse import (
    Amount,
    PlatformConfig,
    Sharing,
    TeamConfig,
    group_tree,
    team_in_window,
)
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.policy.borrowing import borrow_cap

__all__ = ["ABSOLUTE", "PERCENT", "HIERARCHY_MODES", "TeamChange", "Compiled", "compilation", "compile_flat",
           "as_replayed", "check_hierarchy", "least_percent", "reading", "reading_text"]

ABSOLUTE, PERCENT = "absolute", "percent"
#: How each AWS backend without a tree takes the borrow limit: an absolute amount (HyperPod's
#: ``BorrowLimit`` of a compute quota, an amount) or a percentage of the guarantee (a Batch quota
#: share's ``borrowLimit``).
_FLAT_BACKENDS: Mapping[str, str] = {"hyperpod": ABSOLUTE, "batch_quota": PERCENT}


#: ``simulate --hierarchy``: the tree's own rules, or the flat configuration a backend deploys.
HIERARCHY_MODES = ("tree", "compiled")


def as_replayed(config: PlatformConfig, backend: str, hierarchy_mode: str | None) -> PlatformConfig:
    """The config ``simulate`` replays on ``backend``: with ``hierarchy_mode`` ``compiled`` the flat
    compilation (:func:`compile_flat`), with ``tree`` the tree itself; None: what the backend
    enforces (compiled on HyperPod and Batch, the tree elsewhere). Without groups: ``config``."""
    check_hierarchy(hierarchy_mode, bool(config.groups), config.source or config.name)
    if not config.groups:
        return config
    mode = reading(config, backend, hierarchy_mode)
    return compile_flat(config, backend).config if mode == "compiled" else config


def check_hierarchy(hierarchy_mode: str | None, has_groups: bool, source: str) -> None:
    """Refuse ``--hierarchy`` naming no mode, or given for an input without groups (where there is
    no tree to read one way or the other), in one line naming the flag."""
    if hierarchy_mode is None:
        return
    if hierarchy_mode not in HIERARCHY_MODES:
        raise ConfigError(Problem("--hierarchy", hierarchy_mode, "is not a hierarchy mode",
                                  f"use one of {', '.join(HIERARCHY_MODES)}"))
    if not has_groups:
        raise ConfigError(Problem("--hierarchy", hierarchy_mode, f"needs groups, and {source} declares none",
                                  "drop --hierarchy (a flat platform has one reading), or add groups to the input"))


def reading(config: PlatformConfig, backend: str, hierarchy_mode: str | None) -> str:
    """How ``simulate`` and ``advise`` read ``config``'s tree on ``backend``: ``hierarchy_mode`` when
    given, else what the backend enforces: ``compiled`` on HyperPod and Batch, ``tree`` elsewhere."""
    return hierarchy_mode or ("compiled" if compilation(backend) == "approximate" else "tree")


def reading_text(backend: str, mode: str) -> str:
    """The reading in words, after "the tree" in the commands' headers: ``compiled, as batch_quota
    deploys it (--hierarchy compiled)`` or ``by its own rules, as kueue applies them (--hierarchy tree)``."""
    if mode == "compiled":
        return f"compiled, as {backend} deploys it (--hierarchy compiled)"
    return "by its own rules" + (f", as {backend} applies them" if compilation(backend) == "exact" else "") \
        + " (--hierarchy tree)"


def compilation(backend: str) -> str:
    """``approximate`` for a backend that deploys a flat compilation of the tree (HyperPod,
    Batch quota management), ``exact`` for one that applies the tree (the others)."""
    return "approximate" if backend in _FLAT_BACKENDS else "exact"


@dataclass(frozen=True)
class TeamChange:
    """What the compilation changed for one team on one instance type (amounts in instances,
    a part of an instance where the team counts accelerators)."""

    team: str
    instance_type: str
    guarantee: float
    """The team's own guarantee in the tree."""
    compiled_guarantee: float
    """Its guarantee with its share of the pools above it."""
    bound: float | None
    """The least Q(N) + B(N) over the groups above it (None: unbounded)."""
    compiled_borrow_limit: float | None
    """The most it may borrow as deployed, None: unlimited."""
    compiled_borrow_percent: int | None = None
    """The percentage deployed (Batch), None: not a percentage backend or unlimited."""
    own_cap: float | None = None
    """The most its own borrow cap lets it use in all (guarantee plus cap), None: unbounded."""
    unit: str = "instances"
    """What the deployed guarantee counts: ``instances``, or ``accelerators``."""


@dataclass(frozen=True)
class Compiled:
    """A flat config (no groups), what changed per team and instance type, and per instance
    type the instances of the pools that no team could take under its own cap."""

    config: PlatformConfig
    changes: tuple[TeamChange, ...]
    unassigned: Mapping[str, float] = dataclasses.field(default_factory=dict)
    #: Per time window (by name) that some team gives values for, the compilation of the tree with
    #: the teams' values in that window; the fields above are the base's (outside every window).
    windows: Mapping[str, Compiled] = dataclasses.field(default_factory=dict)


#: The team fields a window may change, and so what a compiled team gives per window.
_WINDOW_FIELDS = ("guarantee", "borrow_limit", "borrow_limit_percent")


def compile_flat(config: PlatformConfig, backend: str) -> Compiled:
    """The flat config ``backend`` deploys for ``config``'s tree; ``config`` itself when it has no
    groups or the backend applies the tree (:func:`compilation`).

    With time windows the tree is compiled once for the base and once per window, each from the
    teams' values in force then (the groups' pools are the same at every hour): each compiled
    team's values in a window are the window's compilation (where they differ from the base's),
    so what a window deploys is the compilation of that window's tree."""
    section = config.backend(backend)
    if not config.groups or backend not in _FLAT_BACKENDS or section is None:
        return Compiled(config, ())
    base = _compile_once(dataclasses.replace(config, teams=tuple(_no_windows(t) for t in config.teams), windows=()),
                         backend)
    named = [w.name for w in config.windows if any(w.name in t.windows for t in config.teams)]
    if not named:
        return dataclasses.replace(base, config=dataclasses.replace(base.config, windows=config.windows))
    inside = {name: _compile_once(dataclasses.replace(
        config, teams=tuple(_no_windows(team_in_window(t, name)) for t in config.teams), windows=()), backend)
        for name in named}
    teams = []
    for team in base.config.teams:
        values: dict[str, dict[str, Any]] = {}
        for name, compiled in inside.items():
            there = compiled.config.team(team.name)
            changed = {k: getattr(there, k) for k in _WINDOW_FIELDS if getattr(there, k) != getattr(team, k)}
            if changed:
                values[name] = changed
        teams.append(_with_windows(team, values))
    flat = dataclasses.replace(base.config, teams=tuple(teams), windows=config.windows)
    return dataclasses.replace(base, config=flat, windows=inside)


def _no_windows(team: TeamConfig) -> TeamConfig:
    return _with_windows(team, {}) if team.windows else team


def _with_windows(team: TeamConfig, windows: Mapping[str, Mapping[str, Any]]) -> TeamConfig:
    """``team`` with ``windows`` as its values per window (fields already read: not read again)."""
    return TeamConfig._read(**{**{f.name: getattr(team, f.name) for f in dataclasses.fields(TeamConfig)},
                               "windows": windows})


def _compile_once(config: PlatformConfig, backend: str) -> Compiled:
    """:func:`compile_flat` of a config whose teams' values are those of one instant (no windows)."""
    section = config.backend(backend)
    how = _FLAT_BACKENDS[backend]
    assert section is not None
    tree = group_tree(config, backend)
    teams = {t.name: t for t in config.teams_for(backend)}
    changes: list[TeamChange] = []
    guarantees = {name: dict(t.guarantee) for name, t in teams.items()}
    limits = {name: dict(t.borrow_limit) for name, t in teams.items()}
    percents: dict[str, int | None] = {name: t.borrow_limit_percent for name, t in teams.items()}
    chosen: dict[str, int] = {}
    unassigned: dict[str, float] = {}
    for it in section.capacity:
        members = {n: t for n, t in teams.items() if it in t.guarantee}
        per = _gpus_per_instance(it)
        # The split counts accelerators when a team on the type does (HyperPod), else instances.
        unit = 1 / per if how == ABSOLUTE and per and any(t.guarantee[it].accelerators is not None
                                                         for t in members.values()) else 1.0
        totals = {n: _own_total(t, it, tree.quota(n).get(it, 0), backend, unit) for n, t in members.items()}
        room = {n: 0.0 for n in tree.team_group}  # a team without the type takes no pool of it
        for n, t in members.items():
            room[n] = _pool_room(t, it, unit, totals[n], math.floor(tree.quota(n).get(it, 0) / unit + 1e-9))
        split, left = hierarchy.split_pools_capped(tree, it, unit, room)
        if left:
            unassigned[it] = left * unit
        for name, team in members.items():
            own = tree.quota(name).get(it, 0)
            compiled = split[name]
            share = compiled - math.floor(own / unit + 1e-9)
            if share > 0:
                guarantees[name][it] = _plus(team.guarantee[it], share, unit, per)
            bound = tree.least_bound(name, it)
            change = TeamChange(name, it, own, compiled * unit, None if math.isinf(bound) else bound, None,
                                own_cap=None if math.isinf(totals[name]) else totals[name] * unit,
                                unit="accelerators" if guarantees[name][it].accelerators is not None else "instances")
            if team.sharing.borrows and tree.path(name):
                tree_room = math.floor(bound / unit + 1e-9) - compiled if not math.isinf(bound) else math.inf
                room_b = max(0, min(totals[name] - compiled, tree_room))
                if how == ABSOLUTE and per:
                    # HyperPod borrows accelerators: the limit counts them, whole instances where it can.
                    acc = _absolute_room(team, it, own, compiled * unit, bound, per)
                    limits[name][it] = _plus(Amount(accelerators=0) if change.unit == "accelerators" else
                                             Amount(instances=0), acc, 1 / per, per)
                    change = dataclasses.replace(change, compiled_borrow_limit=acc / per)
                elif how == PERCENT and not math.isinf(room_b):
                    p = least_percent(compiled, int(room_b))
                    chosen[name] = p if name not in chosen else min(chosen[name], p)
                    change = dataclasses.replace(change, compiled_borrow_limit=float(room_b), compiled_borrow_percent=p)
            if share or change.compiled_borrow_limit is not None:
                changes.append(change)
    # A quota share has one percentage for all its types: the least of theirs, and what it allows on each.
    percents.update(chosen)
    changes = [dataclasses.replace(c, compiled_borrow_percent=chosen[c.team],
                                   compiled_borrow_limit=float(chosen[c.team] * round(c.compiled_guarantee) // 100))
               if c.team in chosen and c.compiled_borrow_percent is not None else c for c in changes]
    flat = tuple(
        TeamConfig._read(**{**{f.name: getattr(t, f.name) for f in dataclasses.fields(TeamConfig)},
                            "guarantee": guarantees.get(t.name, t.guarantee),
                            "borrow_limit": limits.get(t.name, t.borrow_limit),
                            "borrow_limit_percent": percents.get(t.name, t.borrow_limit_percent)
                            if t.sharing is Sharing.LEND_AND_BORROW else t.borrow_limit_percent, "group": None})
        for t in config.teams)
    return Compiled(dataclasses.replace(config, teams=flat, groups=()), tuple(changes), unassigned)


def least_percent(guarantee: int, instances: int) -> int:
    """The least whole percentage p of ``guarantee`` instances with floor(p * guarantee / 100) =
    ``instances`` (a Batch quota share's borrow limit); where none gives it exactly, the largest
    that stays below it; 0 when the guarantee is 0."""
    if guarantee <= 0:
        return 0
    p = -(-100 * instances // guarantee)
    return p if p * guarantee // 100 == instances else p - 1


def _gpus_per_instance(instance_type: str) -> int:
    info = instances.lookup(instance_type)
    return info.gpus if info is not None else 0


def _own_total(team: TeamConfig, instance_type: str, guarantee: float, backend: str, unit: float) -> float:
    """The most the team's own cap lets it use on the type, in whole units: its guarantee plus its
    borrow cap (the backend's default percentage where it gives none); ``math.inf``: no cap."""
    cap = borrow_cap(team, instance_type, guarantee, backend)
    if cap is None:
        return math.inf
    return float(math.floor((guarantee + cap) / unit + 1e-9))


def _absolute_room(team: TeamConfig, instance_type: str, own: float, compiled: float, bound: float, per: int) -> int:
    """The accelerators a HyperPod team may borrow beyond its compiled guarantee: the least of what
    its own cap leaves (its own guarantee plus cap, less the compiled guarantee) and the least
    Q + B over its groups less the compiled guarantee."""
    held = round(compiled * per)
    room = _own_total(team, instance_type, own, "hyperpod", 1 / per) - held
    if not math.isinf(bound):
        room = min(room, math.floor(bound * per + 1e-9) - held)
    return int(max(0, room))


def _pool_room(team: TeamConfig, instance_type: str, unit: float, total: float, own_units: int) -> float:
    """The most units of the pools above it the team may take: what its own cap leaves beyond its
    guarantee; none for a guarantee that is neither whole instances nor accelerators (MIG
    partitions, vCPU or memory), which no share of a pool extends in the same unit."""
    amount = team.guarantee[instance_type]
    if not amount.is_instances_only and amount.accelerators is None:
        return 0.0
    return max(0.0, total - own_units)


def _plus(amount: Amount, units: int, unit: float, per_instance: int) -> Amount:
    """``amount`` with ``units`` more units of ``unit`` (an instance, or one of its accelerators):
    accelerators where it counts them, whole instances where the units make whole instances, and
    otherwise the whole guarantee in accelerators (never a count of both, which reads two ways)."""
    if unit == 1:
        return dataclasses.replace(amount, instances=(amount.instances or 0) + units)
    if amount.accelerators is not None:
        return dataclasses.replace(amount, accelerators=amount.accelerators + units)
    if units % per_instance == 0:
        return dataclasses.replace(amount, instances=(amount.instances or 0) + units // per_instance)
    return Amount(accelerators=(amount.instances or 0) * per_instance + units)
