"""An organisation's tree of quotas: groups of teams, and groups of groups.

This module is the one definition of the tree, used by the config parser, the reclaim
planner (and so the Lambda and the simulator) and every backend's compilation. It is
pure Python and knows nothing of instance types: amounts are mappings of a resource name
(``gpu`` in a scenario, an instance type in a config) to a number.

* :func:`structure_problems` -- the refusals of a tree's shape (cycle, unknown parent or
  group, a name shared by a group and a team, a group with no team below it, more than
  :data:`MAX_LEVELS` levels of groups), one line each, for the config and the scenario alike,
  in time linear in the groups and teams.
* :class:`Tree` -- a valid tree: each node's parent, path and children; :meth:`Tree.quota`
  is Q(N), the node's own pool plus its children's Q; :meth:`Tree.bound` is Q(N) + B(N),
  B the group's borrow limit (None: unlimited).
* :func:`split_pools` -- the compilation of a tree onto a flat backend: each group's pool
  split among its children in proportion to their Q, in whole units rounded down, the
  remainder one by one to the largest Q (then by name), recursively down to the teams, none
  above what it may take (:func:`split_pools_capped`).

Vocabulary: a *node* is a group or a team (a team is a leaf); a team's *path* is its
groups from the lowest to a root group. A tree without groups is exactly the flat
platform of before: every team is a root and no rule below adds anything.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_LEVELS",
    "GroupSpec",
    "Tree",
    "admits",
    "entitled_at",
    "structure_problems",
    "split_pools",
    "split_pools_capped",
]

TOLERANCE = 1e-9

#: The most levels of groups a tree may have (teams not counted): Kueue's cohort trees and the
#: organisations the product is made for are a handful of levels deep; the limit keeps every
#: walk of the tree, and the planner's work per job, bounded.
MAX_LEVELS = 16

AddProblem = Callable[[str, object, str, str], None]


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """One group: its parent group (None: a root), its own pool and its borrow limit.

    ``guarantee`` and ``borrow_limit`` map a resource to an amount; a resource missing from
    ``borrow_limit`` (or a ``borrow_limit`` of None) is unlimited.
    """

    name: str
    parent: str | None = None
    guarantee: Mapping = field(default_factory=dict)
    borrow_limit: Mapping | None = None


def _closest(name: object, names: Iterable[str]) -> str:
    if not names:
        return "declare it under groups, or remove it"
    close = difflib.get_close_matches(str(name), sorted(names), n=1)
    return f"did you mean {close[0]!r}?" if close else "use one of " + (", ".join(sorted(names)) or "none")


def structure_problems(
    groups: Sequence[tuple[str, str, object]],
    teams: Sequence[tuple[str, str, object]],
    add: AddProblem,
) -> None:
    """Report every problem of the tree's shape through ``add(field, value, message, fix)``.

    ``groups``: ``(where, name, parent)`` per group, ``where`` its field path (such as
    ``groups[1] (nlp)``); ``parent`` None for a root. ``teams``: ``(where, name, group)``
    per team, ``group`` None for a root team. Names are assumed valid and unique within
    their own list (each caller checks that with its other fields).
    """
    group_names = {name for _, name, _ in groups}
    team_names = {name for _, name, _ in teams}
    parents: dict[str, str] = {}
    unknown = False  # a misspelt name leaves a group empty: one mistake, one line
    reported: set[str] = set()
    for where, name, parent in groups:
        if name in team_names:
            add(f"{where}.name", name, "is also the name of a team; a group and a team cannot share a name",
                "rename the group or the team")
            reported.add(name)
        if parent is None:
            continue
        if parent not in group_names:
            add(f"{where}.parent", parent, "is not a group", _closest(parent, group_names))
            unknown = True
        else:
            parents[name] = str(parent)
    for where, _, group in teams:
        if group is not None and group not in group_names:
            add(f"{where}.group", group, "is not a group", _closest(group, group_names))
            unknown = True
    levels, cycles = _levels([name for _, name, _ in groups], parents)
    where_of = {name: where for where, name, _ in groups}
    order = {name: i for i, (_, name, _) in enumerate(groups)}
    # A cycle is reported once, on its first group in list order (a name also a team's aside).
    for cycle in cycles:
        first = min((n for n in cycle if n not in reported), key=order.__getitem__, default=None)
        if first is None:
            continue
        reported.update(cycle)
        at = cycle.index(first)
        seen = cycle[at:] + cycle[:at]
        add(f"{where_of[first]}.parent", parents[first], "makes a cycle: " + " -> ".join([*seen, first]),
            "give one group of the cycle no parent, or a parent outside it")
    # Too deep: one line for the tree, on the first group (list order) below the limit.
    deep = next((name for _, name, _ in groups if levels.get(name, 0) > MAX_LEVELS), None)
    if deep is not None:
        add(f"{where_of[deep]}.parent", parents[deep],
            f"puts group {deep!r} at level {levels[deep]} of groups; a tree holds at most {MAX_LEVELS} levels"
            " of groups (teams not counted)",
            f"give {deep!r} a parent higher up, or merge levels: no team may have more than {MAX_LEVELS}"
            " groups above it")
    populated: set[str] = set()
    for _, _, group in teams:
        node = group if group in group_names else None
        while node is not None and node not in populated:
            populated.add(str(node))
            node = parents.get(str(node))
    for where, name, _ in groups if not unknown else ():
        if name not in populated and name not in reported:
            add(where, name, "has no team below it",
                f"put a team in it (group: {name} on the team) or in a group below it, or remove it")


def _levels(names: Sequence[str], parents: Mapping[str, str]) -> tuple[dict[str, int], list[list[str]]]:
    """Each group's level (1 for a root group, one more per group above it) where its parents
    lead to a root, and the cycles (each a list of groups, each followed by its parent).

    One walk per group, stopped at the first group already known: linear in the groups, for a
    tree of any depth and whatever the order of the list."""
    level: dict[str, int] = {}
    doomed: set[str] = set()  # in a cycle, or below one
    cycles: list[list[str]] = []
    for name in names:
        chain: list[str] = []
        on_chain: dict[str, int] = {}
        node: str | None = name
        while node is not None and node not in level and node not in doomed and node not in on_chain:
            on_chain[node] = len(chain)
            chain.append(node)
            node = parents.get(node)
        if node is None or node in level:
            base = 0 if node is None else level[node]
            for n in reversed(chain):
                base += 1
                level[n] = base
            continue
        if node in on_chain:
            cycles.append(chain[on_chain[node]:])
        doomed.update(chain)
    return level, cycles


class Tree:
    """A valid tree (checked by :func:`structure_problems`) of groups and teams.

    ``teams``: the team name and its group (None: a root team) of every team, in the
    caller's order; ``guarantees``: each team's own guarantee; ``reserve``: the teams
    whose idle guarantee is never lent (their Q counts only what they use, see
    :meth:`quota`).
    """

    def __init__(self, groups: Sequence[GroupSpec], teams: Iterable[tuple[str, str | None]],
                 guarantees: Mapping[str, Mapping], reserve: Iterable[str] = ()):
        self.groups: dict[str, GroupSpec] = {g.name: g for g in groups}
        self.team_group: dict[str, str | None] = dict(teams)
        self.guarantees = guarantees
        self.reserve = frozenset(reserve)
        self.children: dict[str, list[str]] = {name: [] for name in self.groups}
        for g in self.groups.values():
            if g.parent is not None:
                self.children[g.parent].append(g.name)
        for team, group in self.team_group.items():
            if group is not None:
                self.children[group].append(team)
        for kids in self.children.values():
            kids.sort()
        # The groups top-down (each after its parent), found breadth-first: every walk below is
        # a loop over this list or its reverse, never a recursion, whatever the tree's depth.
        top_down = sorted(g for g, spec in self.groups.items() if spec.parent is None)
        for name in top_down:  # grows while it is read
            top_down.extend(c for c in self.children[name] if c in self.groups)
        self._top_down = top_down
        self._group_paths: dict[str, tuple[str, ...]] = {}
        for name in top_down:
            parent = self.groups[name].parent
            self._group_paths[name] = (name,) if parent is None else (name, *self._group_paths[parent])
        self._paths: dict[str, tuple[str, ...]] = {
            team: () if group is None else self._group_paths[group] for team, group in self.team_group.items()}
        # Bottom-up, each group after its children: its height, its static Q (every team's whole
        # guarantee) and the guarantees of the reserve teams below it.
        self._height: dict[str, int] = {}
        self._static: dict[str, dict] = {}
        self._reserved: dict[str, dict] = {}
        for name in reversed(top_down):
            height = 0
            total = dict(self.groups[name].guarantee)
            reserved: dict = {}
            for child in self.children[name]:
                if child in self.groups:
                    height = max(height, self._height[child])
                    _add(total, self._static[child])
                    _add(reserved, self._reserved[child])
                else:
                    _add(total, self.guarantees.get(child, {}))
                    if child in self.reserve:
                        _add(reserved, self.guarantees.get(child, {}))
            self._height[name] = height + 1
            self._static[name] = total
            self._reserved[name] = reserved
        #: The greatest height of a node (0: no groups).
        self.top_height = max(self._height.values(), default=0)

    @classmethod
    def of_state(cls, state: Any) -> Tree:
        """The tree of a reclaim planner's state (its ``groups`` and its teams' ``group``)."""
        return cls(state.groups, [(t.name, t.group) for t in state.teams],
                   {t.name: t.guarantee for t in state.teams},
                   reserve=[t.name for t in state.teams if t.sharing == "reserve"])

    def __bool__(self) -> bool:
        return bool(self.groups)

    def path(self, team: str) -> tuple[str, ...]:
        """The groups above ``team``, from its own group up to a root group (empty: a root team)."""
        return self._paths[team]

    def path_of_group(self, group: str) -> tuple[str, ...]:
        """``group`` and the groups above it, up to its root."""
        return self._group_paths[group]

    def depth(self, group: str) -> int:
        """How many groups are above ``group`` (0: a root group)."""
        return len(self._group_paths[group]) - 1

    def height(self, node: str) -> int:
        """The node's height: 0 for a team, and for a group one more than the greatest height of
        its children (Kueue's borrowing level). Entitlement is ranked by it."""
        return self._height.get(node, 0)

    def is_group(self, name: str) -> bool:
        return name in self.groups

    def quota(self, name: str) -> Mapping:
        """Q(N) as promised: N's own guarantee (a team's, or a group's pool) plus its children's Q.

        Every team counts its whole guarantee here (what a compilation splits). The planner's
        live Q counts a ``reserve`` team's idle guarantee as no one else's quota:
        Q(N) less the idle guarantee of the ``reserve`` teams below N (:meth:`reserved`).
        """
        if name in self.team_group:
            return self.guarantees.get(name, {})
        return self._static[name]

    def reserved(self, group: str) -> Mapping:
        """The guarantees of the ``reserve`` teams below ``group``, summed."""
        return self._reserved[group]

    def borrow_limit(self, group: str, resource: str) -> float | None:
        """B(N) of a group in ``resource``: None when unlimited."""
        limits = self.groups[group].borrow_limit
        if limits is None or resource not in limits:
            return None
        return limits[resource]

    def bound(self, group: str, resource: str) -> float:
        """Q(N) + B(N) of a group in ``resource`` as promised (``math.inf`` when B is unlimited)."""
        limit = self.borrow_limit(group, resource)
        return math.inf if limit is None else self._static[group].get(resource, 0) + limit

    def least_bound(self, team: str, resource: str) -> float:
        """The least Q(N) + B(N) over the groups of ``team``'s path (``math.inf``: no bound)."""
        return min((self.bound(g, resource) for g in self._paths[team]), default=math.inf)

    def room(self, team: str, resource: str) -> tuple[float, str | None]:
        """The most one job of ``team`` may hold at its groups in an empty pool, and the group
        that sets it (None: no group bounds it): the least Q(N) + B(N) over the team's path, each
        group's Q without the idle guarantees of the ``reserve`` teams below it (no one's quota),
        ``team``'s own excepted when it is one (its job counts as it will use)."""
        own = self.guarantees.get(team, {}).get(resource, 0) if team in self.reserve else 0
        least, where = math.inf, None
        for g in self._paths[team]:
            limit = self.borrow_limit(g, resource)
            if limit is None:
                continue
            room = self._static[g].get(resource, 0) - self._reserved[g].get(resource, 0) + own + limit
            if room < least:
                least, where = room, g
        return least, where

    def depth_first(self) -> list[tuple[int, str]]:
        """Every node as ``(depth, name)``, roots first in name order, each followed by its
        children (groups and teams in name order): the order ``plan`` draws the tree in."""
        roots = sorted([g for g, s in self.groups.items() if s.parent is None]
                       + [t for t, g in self.team_group.items() if g is None])
        out: list[tuple[int, str]] = []
        stack = [(0, name) for name in reversed(roots)]
        while stack:
            depth, name = stack.pop()
            out.append((depth, name))
            stack.extend((depth + 1, child) for child in reversed(self.children.get(name, ())))
        return out

    def lowest_common(self, a: tuple[str, ...], b: tuple[str, ...]) -> str | None:
        """The lowest group on both paths (each lowest first), None when they share none: the fleet."""
        on_b = set(b)
        for g in a:
            if g in on_b:
                return g
        return None


def admits(path: Iterable[str], demand: Mapping, usage: Callable[[str], Mapping],
           quota: Callable[[str, str], float], limit: Callable[[str, str], float | None]) -> bool:
    """Admission at the groups: U(N) + demand <= Q(N) + B(N) at every group N of ``path``, in every
    resource the job needs (B None: unlimited). ``usage(N)``, ``quota(N, r)`` and ``limit(N, r)``
    are the plan's (or the replay's) U, live Q and B. The planner and the simulator both ask this."""
    for g in path:
        u = usage(g)
        for r, d in demand.items():
            if d > TOLERANCE:
                b = limit(g, r)
                if b is not None and u.get(r, 0) + d > quota(g, r) + b + TOLERANCE:
                    return False
    return True


def entitled_at(path: Sequence[str], demand: Mapping, within_team: bool, usage: Callable[[str], Mapping],
                quota: Callable[[str, str], float]) -> int | None:
    """Where a job is entitled, as a place on its team's path: 0 when ``within_team`` (within its
    team's guarantee, or its entitlement), else i for the i-th group of its ``path`` (lowest first),
    the first with U(N) + demand <= Q(N) in every resource it needs; None: nowhere (the fleet
    entitles nobody). The rank of the entitlement is that node's :meth:`Tree.height`, not i."""
    if within_team:
        return 0
    for i, g in enumerate(path, 1):
        u = usage(g)
        if all(d <= TOLERANCE or u.get(r, 0) + d <= quota(g, r) + TOLERANCE for r, d in demand.items()):
            return i
    return None


def split_pools(tree: Tree, resource: str, unit: float = 1, room: Mapping[str, float] | None = None) -> dict[str, int]:
    """Each team's compiled guarantee in ``resource``, in whole units of ``unit``
    (:func:`split_pools_capped` without what is left unassigned)."""
    return split_pools_capped(tree, resource, unit, room)[0]


def split_pools_capped(tree: Tree, resource: str, unit: float = 1,
                       room: Mapping[str, float] | None = None) -> tuple[dict[str, int], int]:
    """Each team's compiled guarantee in ``resource``, in whole units of ``unit``, and the units
    of the pools that no team could take.

    A team keeps its own guarantee (whole units: ``guarantee / unit``, rounded down) and
    receives a share of every pool above it: each group's pool is split among its children
    (groups and teams) in proportion to their Q, in whole units rounded down, the remainder
    given one unit at a time to the children with the largest Q (then by name); a child
    group passes what it received, with its own pool, down the same way. A group whose
    children all have Q 0 splits its pool evenly by the same rule.

    ``room``: the most units a team may receive on top of its own guarantee (absent: no
    bound). A child never gets more than it can take (a group: what its teams can take beyond
    the pools inside it, and never more than its borrow limit B, so that no team's share is
    above Q + B of a group of its path): what it cannot take goes to the other children by the
    same rule, and what none can take is left unassigned.
    """
    room = room or {}
    own = {t: _units(tree.quota(t).get(resource, 0), unit) for t in tree.team_group}
    pools = {g: _units(spec.guarantee.get(resource, 0), unit) for g, spec in tree.groups.items()}
    order = _top_down(tree)
    # What each node can take from above: a team its room; a group its teams' rooms less the
    # pools inside it, which its teams take first. Bottom-up, one pass.
    takes: dict[str, float] = {t: max(0.0, float(room.get(t, math.inf))) for t in tree.team_group}
    for g in reversed(order):
        takes[g] = max(0.0, math.fsum(takes[k] for k in tree.children[g]) - pools[g]) \
            if all(not math.isinf(takes[k]) for k in tree.children[g]) else math.inf
        limit = tree.borrow_limit(g, resource)  # its subtree may never use more than Q + B
        if limit is not None:
            takes[g] = min(takes[g], _units(limit, unit))
    received = {g: 0 for g in tree.groups}
    unassigned = 0
    for g in order:
        kids = tree.children[g]
        weights = [tree.quota(k).get(resource, 0) for k in kids]
        shares, left = _fill(kids, weights, [takes[k] for k in kids], received[g] + pools[g])
        unassigned += left
        for kid, share in zip(kids, shares, strict=True):
            if kid in tree.team_group:
                own[kid] += share
            else:
                received[kid] = share
    return own, unassigned


def _top_down(tree: Tree) -> list[str]:
    """Every group, each before its children (roots in name order): an iterative walk."""
    order: list[str] = []
    stack = sorted((g for g, s in tree.groups.items() if s.parent is None), reverse=True)
    while stack:
        g = stack.pop()
        order.append(g)
        stack.extend(reversed([k for k in tree.children[g] if k in tree.groups]))
    return order


def _fill(kids: Sequence[str], weights: Sequence[float], limit: Sequence[float], units: int) -> tuple[list[int], int]:
    """``units`` split among ``kids`` in proportion to ``weights`` (rounded down, the remainder
    one by one to the largest weight, then name), none above its ``limit``: what a limit refuses
    is split again among the others by the same rule; what none can take is returned."""
    shares = [0] * len(kids)
    active = [i for i in range(len(kids)) if limit[i] > 0]
    rest = units
    while rest > 0 and active:
        w = [weights[i] for i in active]
        total = math.fsum(w)
        if total <= 0:
            w, total = [1.0] * len(active), float(len(active))
        offer = [int(math.floor(rest * x / total + 1e-9)) for x in w]
        extra = rest - sum(offer)
        for j in sorted(range(len(active)), key=lambda j: (-w[j], kids[active[j]]))[:extra]:
            offer[j] += 1
        rest = 0
        for j, i in enumerate(active):
            take = int(min(offer[j], limit[i] - shares[i]))
            shares[i] += take
            rest += offer[j] - take
        active = [i for i in active if shares[i] < limit[i]]
    return shares, rest


def _add(total: dict, amounts: Mapping) -> None:
    for r, amount in amounts.items():
        total[r] = total.get(r, 0) + amount


def _units(amount: float, unit: float) -> int:
    return int(math.floor(amount / unit + 1e-9))
