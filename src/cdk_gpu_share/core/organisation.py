"""The organisation's tree compiled onto a flat backend, and what the compilation changed.

AWS HyperPod task governance and Batch quota management know teams, not trees: a compute
quota or a quota share per team. :func:`compile_flat` turns a config with ``groups`` into the
flat config such a backend deploys (the one rule, for the constructs, ``plan`` and
``simulate --hierarchy compiled`` alike):

* each group's pool is split among its children (groups and teams) in proportion to their
  quota Q, recursively, in whole instances rounded down, the remainder one instance at a time
  to the largest Q, then by name (:func:`cdk_gpu_share.core.hierarchy.split_pools`);
* each borrowing team's borrow limit is the least, over the groups above it, of Q(N) + B(N)
  less the team's compiled guarantee (and never more than its own limit): an absolute number
  of instances (HyperPod), or that as a whole percentage of the compiled guarantee, rounded
  down, 0 when the compiled guarantee is 0 (Batch).

The fair-share queue applies the tree itself (its reclaim planner) and Kueue has Cohorts, so
neither compiles anything away: :func:`compilation` says which backend does what.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

from cdk_gpu_share.core import hierarchy
from cdk_gpu_share.core.config import Amount, PlatformConfig, Sharing, TeamConfig, group_tree
from cdk_gpu_share.core.errors import ConfigError, Problem

__all__ = ["ABSOLUTE", "PERCENT", "HIERARCHY_MODES", "TeamChange", "Compiled", "compilation", "compile_flat",
           "as_replayed"]

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
    if hierarchy_mode is not None and hierarchy_mode not in HIERARCHY_MODES:
        raise ConfigError(Problem("--hierarchy", hierarchy_mode, "is not a hierarchy mode",
                                  f"use one of {', '.join(HIERARCHY_MODES)}"))
    if not config.groups:
        return config
    mode = hierarchy_mode or ("compiled" if compilation(backend) == "approximate" else "tree")
    return compile_flat(config, backend).config if mode == "compiled" else config


def compilation(backend: str) -> str:
    """``approximate`` for a backend that deploys a flat compilation of the tree (HyperPod,
    Batch quota management), ``exact`` for one that applies the tree (the others)."""
    return "approximate" if backend in _FLAT_BACKENDS else "exact"


@dataclass(frozen=True)
class TeamChange:
    """What the compilation changed for one team on one instance type (whole instances)."""

    team: str
    instance_type: str
    guarantee: float
    """The team's own guarantee in the tree."""
    compiled_guarantee: int
    """Its guarantee with its share of the pools above it."""
    bound: float | None
    """The least Q(N) + B(N) over the groups above it (None: unbounded)."""
    compiled_borrow_limit: int | None
    """The absolute borrow limit deployed (instances), None: unlimited."""
    compiled_borrow_percent: int | None = None
    """The percentage deployed (Batch), None: not a percentage backend or unlimited."""


@dataclass(frozen=True)
class Compiled:
    """A flat config (no groups) and what changed per team and instance type."""

    config: PlatformConfig
    changes: tuple[TeamChange, ...]


def compile_flat(config: PlatformConfig, backend: str) -> Compiled:
    """The flat config ``backend`` deploys for ``config``'s tree; ``config`` itself when it has no
    groups or the backend applies the tree (:func:`compilation`)."""
    section = config.backend(backend)
    how = _FLAT_BACKENDS.get(backend)
    if not config.groups or how is None or section is None:
        return Compiled(config, ())
    tree = group_tree(config, backend)
    teams = {t.name: t for t in config.teams}
    changes: list[TeamChange] = []
    guarantees: dict[str, dict[str, Amount]] = {name: dict(t.guarantee) for name, t in teams.items()}
    limits: dict[str, dict[str, Amount]] = {name: dict(t.borrow_limit) for name, t in teams.items()}
    percents: dict[str, int | None] = {name: t.borrow_limit_percent for name, t in teams.items()}
    for it in section.capacity:
        split = hierarchy.split_pools(tree, it)
        for name, compiled in split.items():
            team = teams[name]
            own = tree.quota(name).get(it, 0)
            share = compiled - math.floor(own + 1e-9)
            if share > 0 or it in team.guarantee:
                guarantees[name][it] = _plus(team.guarantee.get(it), share)
            bound = tree.least_bound(name, it)
            change = TeamChange(name, it, own, compiled, None if math.isinf(bound) else bound, None)
            if team.sharing.borrows and not math.isinf(bound):
                room = max(0, math.floor(bound - compiled + 1e-9))
                own_limit = team.borrow_limit.get(it)
                if own_limit is not None and own_limit.instances is not None:
                    room = min(room, own_limit.instances)
                if how == ABSOLUTE:
                    limits[name][it] = Amount(instances=room)
                    change = dataclasses.replace(change, compiled_borrow_limit=room)
                else:
                    percent = 0 if compiled == 0 else math.floor(100 * room / compiled + 1e-9)
                    current = percents[name]
                    percents[name] = percent if current is None or current == -1 else min(current, percent)
                    change = dataclasses.replace(change, compiled_borrow_limit=room,
                                                 compiled_borrow_percent=percents[name])
            if change.compiled_guarantee != own or change.compiled_borrow_limit is not None:
                changes.append(change)
    flat = tuple(
        TeamConfig._read(**{**{f.name: getattr(t, f.name) for f in dataclasses.fields(TeamConfig)},
                            "guarantee": guarantees[t.name], "borrow_limit": limits[t.name],
                            "borrow_limit_percent": percents[t.name] if t.sharing is Sharing.LEND_AND_BORROW
                            else t.borrow_limit_percent, "group": None})
        for t in config.teams)
    return Compiled(dataclasses.replace(config, teams=flat, groups=()), tuple(changes))


def _plus(amount: Amount | None, instances: int) -> Amount:
    """``amount`` with ``instances`` more whole instances."""
    if amount is None:
        return Amount(instances=instances)
    if instances == 0:
        return amount
    return dataclasses.replace(amount, instances=(amount.instances or 0) + instances)
