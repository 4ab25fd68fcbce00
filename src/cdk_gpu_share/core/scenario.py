"""The simulator's scenario, built from the platform config (``gpu-share simulate --config``).

One pure function, :func:`scenario_from_config`, maps a validated
:class:`~cdk_gpu_share.core.configuration.parse.PlatformConfig` and one of its backends to the
``capacity``, ``settings`` and ``teams`` of a reclaim-plan input
(``docs/simulator.md``), so nobody hand-writes a scenario JSON.

The simulator's pool is fungible GPUs. Amounts are therefore counted in GPUs:

- whole instances: instances x the type's GPUs (from :mod:`cdk_gpu_share.core.catalog.instances`);
- ``accelerators``: that many GPUs;
- MIG partitions: the fraction of a GPU each profile is, in compute slices of seven
  (``mig-3g.40gb`` is 3/7 of a GPU);
- a guarantee of ``vcpu``/``memory_gib`` only: the GPUs of the share of an instance
  it stands for (the larger of the two fractions).

A team's GPUs are summed over the backend's instance types; placement across types is
not modelled (the simulator's pool is one pool). Per backend, the defaults the
service applies are applied here too: a HyperPod compute quota without
``borrow_limit_percent`` borrows at most 50 % of its guarantee; Batch and the
fair-share queue default to unlimited. The fair-share queue's reclaim settings
(``reclaim_after_seconds``, ``min_runtime_seconds``) become the scenario's settings
and its ``schedule_minutes`` the planner's period (:func:`poll_seconds_of`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from cdk_gpu_share.core.catalog import instances, mig
from cdk_gpu_share.core.catalog.instances import GPU_RESOURCE as RESOURCE
from cdk_gpu_share.core.configuration import backends, hierarchy
from cdk_gpu_share.core.configuration.objectives import ENTITLEMENT_KEY
from cdk_gpu_share.core.configuration.parse import (
    HYPERPOD,
    Amount,
    GroupConfig,
    PlatformConfig,
    TeamConfig,
    groups_above,
    team_in_window,
)
from cdk_gpu_share.core.configuration.windows import window_mapping
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.policy import reclaim


def mig_fraction(profile: str) -> Fraction:
    """The fraction of one GPU a MIG profile is: ``mig-3g.40gb`` -> 3/7."""
    return Fraction(instances.mig_compute_slices(profile), instances.MIG_COMPUTE_SLICES)


def amount_gpus(instance_type: str, amount: Amount | int) -> Fraction:
    """GPUs an amount of ``instance_type`` stands for (see the module docstring).

    An integer is a number of whole instances (a backend's ``capacity``).
    """
    info = instances.lookup(instance_type)
    per_instance = info.gpus if info is not None else 0
    if not isinstance(amount, Amount):
        return Fraction(int(amount) * per_instance)
    if amount.accelerators is not None:
        return Fraction(amount.accelerators)
    total = Fraction(0)
    if amount.instances is not None:
        total += amount.instances * per_instance
    for profile, count in amount.mig:
        total += mig_fraction(profile) * count
    if amount.instances is None and not amount.mig and info is not None:
        shares = [Fraction(0)]
        if amount.vcpu is not None:
            shares.append(Fraction(amount.vcpu) / info.vcpus)
        if amount.memory_gib is not None:
            shares.append(Fraction(amount.memory_gib) / info.memory_gib)
        total += max(shares) * per_instance
    return total


def _one_of(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def _number(x: Fraction) -> int | float:
    return int(x) if x.denominator == 1 else float(x)


def simulated_backends(config: PlatformConfig) -> list[str]:
    """The backends of ``config`` with at least one team: what ``--backend`` may name."""
    return [b for b in backends.keys() if config.backend(b) is not None and config.teams_for(b)]


def choose_backend(config: PlatformConfig, backend: str | None) -> str:
    """``backend``, checked against the config; or the config's only backend when None."""
    present = simulated_backends(config)
    if backend is None:
        if len(present) == 1:
            return present[0]
        if not present:
            raise ConfigError(Problem("--config", config.source or config.name,
                                      "declares no backend with teams, so there is nothing to simulate",
                                      f"add {_one_of(backends.keys())} with a capacity the teams guarantee"))
        raise ConfigError(Problem("--backend", None,
                                  f"is needed: the config declares {len(present)} backends ({', '.join(present)})",
                                  f"add --backend {present[0]} (or one of {', '.join(present)})"))
    if backend not in backends.keys():
        raise ConfigError(Problem("--backend", backend, "is not a backend",
                                  f"use one of {', '.join(backends.keys())}"))
    if backend not in present:
        raise ConfigError(Problem("--backend", backend,
                                  "is not declared by the config (or no team guarantees its capacity)",
                                  f"use one of {', '.join(present)}" if present else "add that section to the config"))
    return backend


def _team_entry(team: TeamConfig, capacity: Mapping[str, int], backend: str) -> dict[str, Any]:
    guarantee = sum((amount_gpus(it, a) for it, a in team.guarantee_for(capacity).items()), Fraction(0))
    entry: dict[str, Any] = {
        "name": team.name,
        "guarantee": {RESOURCE: _number(guarantee)},
        "sharing": team.sharing.value,
        "in_team_preemption": bool(team.in_team_preemption),
    }
    if team.checkpoint_seconds is not None:
        entry["checkpoint_seconds"] = team.checkpoint_seconds
    objectives: dict[str, Any] = dict(team.objectives.targets)
    entitlement = {it: n for it, n in (team.objectives.entitlement or {}).items() if it in capacity}
    if entitlement:  # whole instances of the backend's types, as GPUs
        gpus = sum((amount_gpus(it, int(n)) for it, n in entitlement.items()), Fraction(0))
        objectives[ENTITLEMENT_KEY] = {RESOURCE: _number(gpus)}
    if objectives:
        entry["objectives"] = objectives
    if team.group is not None:
        entry["group"] = team.group
    if team.sharing.borrows:
        percent = team.borrow_limit_percent
        if percent is None:
            default = backends.spec(backend).default_borrow_percent
            percent = -1 if default is None else default
        entry["borrow_limit_percent"] = percent
        limits = {it: a for it, a in team.borrow_limit.items() if it in capacity}
        if limits:
            entry["borrow_limit"] = {RESOURCE: _number(sum((amount_gpus(it, a) for it, a in limits.items()),
                                                           Fraction(0)))}
    return entry


def partitioned_types(config: PlatformConfig, backend: str) -> tuple[str, ...]:
    """The instance types of ``backend``'s capacity whose GPUs a job may take a part of: MIG
    partitions of a MIG-capable GPU, which of the backends only HyperPod's quotas hand out. On any
    other fleet a job takes whole GPUs."""
    section = config.backend(backend)
    if backend != HYPERPOD or section is None:
        return ()
    return tuple(t for t in section.capacity
                 if (info := instances.lookup(t)) is not None and info.gpu_model in mig.GPUS)


def scenario_from_config(config: PlatformConfig, backend: str | None = None) -> dict[str, Any]:
    """The scenario (``capacity``, ``settings``, ``teams``) of ``backend`` in ``config``.

    ``backend`` may be left out when the config has exactly one. Raises
    :class:`ConfigError` naming ``--backend`` when it is missing or not in the config.
    A config's time windows go with it: ``windows``, and on each team the values it has in
    each window, in GPUs (the fields that differ from its own).
    The result is plain JSON data: :func:`cdk_gpu_share.core.simulate.parse_scenario`
    validates it as it validates a scenario file.
    """
    backend = choose_backend(config, backend)
    section = config.backend(backend)
    assert section is not None  # choose_backend picks a section the config has
    capacity = sum((amount_gpus(it, n) for it, n in section.capacity.items()), Fraction(0))
    settings = backends.spec(backend).scenario_settings(section)
    teams = config.teams_for(backend)
    scenario: dict[str, Any] = {
        "capacity": {RESOURCE: _number(capacity)},
        "settings": settings,
        "teams": [_team_entry(t, section.capacity, backend) for t in teams],
    }
    if config.groups:
        scenario["groups"] = group_entries(config.groups, teams, section.capacity)
    if config.windows:
        scenario["windows"] = [window_mapping(w) for w in config.windows]
        for team, entry in zip(teams, scenario["teams"]):
            values = {}
            for name in team.windows:
                inside = _team_entry(team_in_window(team, name), section.capacity, backend)
                changed = {k: inside.get(k) for k in ("guarantee", "borrow_limit_percent", "borrow_limit")
                           if inside.get(k) != entry.get(k)}
                if changed:
                    values[name] = {k: v for k, v in changed.items() if v is not None}
            if values:
                entry["windows"] = values
    return scenario


def group_entries(groups: Sequence[GroupConfig], teams: Sequence[TeamConfig], capacity: Mapping[str, int]) -> list[dict]:
    """The groups above the backend's ``teams``, in GPUs: pools and limits on its instance types
    (the planner's ``groups``, for a scenario and the fair-share Lambda's settings alike)."""
    out = []
    for group in groups_above(teams, groups):
        entry: dict[str, Any] = {"name": group.name}
        if group.parent is not None:
            entry["parent"] = group.parent
        pool = sum((amount_gpus(it, a) for it, a in group.guarantee.items() if it in capacity), Fraction(0))
        if pool:
            entry["guarantee"] = {RESOURCE: _number(pool)}
        limits = {it: a for it, a in (group.borrow_limit or {}).items() if it in capacity}
        if limits:
            entry["borrow_limit"] = {RESOURCE: _number(sum((amount_gpus(it, a) for it, a in limits.items()),
                                                           Fraction(0)))}
        out.append(entry)
    return out


def node_quotas(scenario_state: Any) -> dict[str, dict[str, Any]]:
    """Each node's Q(N) and B(N) of a parsed scenario or planner state (``state.groups``):
    ``{name: {"quota": {resource: Q}, "borrow_limit": {resource: B or None}}}`` for every
    group and team, B None when unlimited (a team's B is its own borrow cap, rule 1).

    With a config: ``node_quotas(parse_scenario(scenario_from_config(config, backend)).state)``
    gives the tree in GPUs; :func:`cdk_gpu_share.core.configuration.parse.group_tree` the same in instances.
    """
    tree = hierarchy.Tree.of_state(scenario_state)
    out: dict[str, dict[str, Any]] = {}
    for team in scenario_state.teams:
        out[team.name] = {"quota": dict(team.guarantee),
                          "borrow_limit": {r: reclaim.borrow_cap(team, r) for r in scenario_state.capacity}}
    for name in tree.groups:
        out[name] = {"quota": dict(tree.quota(name)),
                     "borrow_limit": {r: tree.borrow_limit(name, r) for r in scenario_state.capacity}}
    return out


def poll_seconds_of(config: PlatformConfig, backend: str) -> float | None:
    """The planner's period the deployed backend uses (fair share: its reclaim schedule), or None."""
    section = config.backend(backend)
    return None if section is None else backends.spec(backend).poll_seconds(section)


def describe_source(config: PlatformConfig, backend: str) -> str:
    """How the scenario was built, for the report's header: ``platform.yaml (fairshare, 3 GPUs)``."""
    scenario = scenario_from_config(config, backend)
    gpus = scenario["capacity"][RESOURCE]
    return f"{config.source or config.name} ({backend}, {gpus:g} GPUs)"
