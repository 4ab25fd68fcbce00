"""The platform config: one YAML file that describes the teams and the backends.

:func:`load_config` reads a file, :func:`parse_config` a mapping. Both validate
everything before any construct is built and raise one :class:`ConfigError`
that lists *every* problem, each naming the field, the bad value and the fix.

Schema (see ``platform.yaml`` and ``examples/`` for complete files)::

    platform:
      name: gpu-share                 # prefix of stack and resource names
    teams:
      - name: team-a                  # unique; a Kubernetes namespace on HyperPod
        guarantee:                    # capacity per instance type
          ml.g5.xlarge: 1             # whole instances (Batch quota shares, HyperPod)
          ml.p5.48xlarge: {accelerators: 4, vcpu: 96, memory_gib: 1024}  # HyperPod
          ml.p4d.24xlarge: {mig: {mig-3g.20gb: 4}}                     # HyperPod
          g5.xlarge: 1                # EC2 types: the classic Batch fair-share fleet
        sharing: lend_and_borrow      # reserve | lend | lend_and_borrow
        borrow_limit_percent: -1      # % of the guarantee it may borrow; -1 unlimited (Batch)
        borrow_limit:                 # absolute caps per instance type (HyperPod, fair share)
          ml.p5.48xlarge: {accelerators: 8}
        in_team_preemption: false     # higher-priority jobs of the team stop its lower ones
        fair_share_weight: 50         # HyperPod, 0..100
        checkpoint_seconds: 600       # its jobs save progress every 600 s (fair share's checkpoint order)
        objectives:                   # what its jobs need: simulate and advise check them, alarms use them
          wait_p95_minutes: 60
          guarantee_wait_p99_minutes: 10
          entitlement: {ml.g5.xlarge: 1}  # what it was promised (default: its guarantee)
        group: research               # its group in the organisation's tree (optional: a root team)
    groups:                           # the tree: each group's pool and its subtree's borrow limit
      - {name: research, guarantee: {ml.g5.xlarge: 1}, borrow_limit: {ml.g5.xlarge: 2}}
    batch_quota:                      # AWS Batch quota management (SageMaker Training)
      capacity: {ml.g5.xlarge: 3}
    hyperpod:                         # SageMaker HyperPod task governance
      cluster_arn: arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdefghijkl
      capacity: {ml.p5.48xlarge: 4}
      priority_classes: [{name: training, weight: 50}]
    fairshare:                        # classic AWS Batch on EC2 GPU instances
      capacity: {g5.xlarge: 3}
      vpc:                            # optional: your VPC (default: a new one with 1 NAT gateway)
        vpc_id: vpc-0123456789abcdef0
        subnet_ids: [subnet-0123456789abcdef0, subnet-0fedcba9876543210]
        security_group_ids: [sg-0123456789abcdef0]   # optional: default a new egress-only group
    security:                         # who may set the team identity tag (the tag guard)
      administrators: [arn:aws:iam::111122223333:role/platform-admin]

A team takes part in a backend when its guarantee names an instance type that
the backend's ``capacity`` declares.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cdk_gpu_share.core import validation as V
from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.configuration import backends, hierarchy
from cdk_gpu_share.core.configuration import fields as config_fields
from cdk_gpu_share.core.configuration import model as config_model

# The fields and the model are read from here too (``from cdk_gpu_share.core.configuration.parse import TeamConfig``):
# this module is where a platform config is loaded, and what it is made of.
from cdk_gpu_share.core.configuration.fields import *  # noqa: F403
from cdk_gpu_share.core.configuration.fields import (
    _BUILTIN_SECTIONS,
    _TEAM_KEYS,
    BATCH,
    FAIRSHARE,
    HYPERPOD,
    PLATFORM_NAME_PATTERN,
    Amount,
    _check_keys,
    _group_fields,
    _mapping,
    _Problems,
    _str,
    _team_fields,
    team_name_problems,
)
from cdk_gpu_share.core.configuration.model import *  # noqa: F403
from cdk_gpu_share.core.configuration.model import (
    EXTRA_MAPPINGS,
    EXTRA_SECTIONS,
    BatchQuotaConfig,
    FairshareConfig,
    GroupConfig,
    HyperPodConfig,
    PlatformConfig,
    ReclaimConfig,
    TeamConfig,
    _team_list,
    group_mapping,
    groups_above,
    section_mapping,
    team_in_window,
)
from cdk_gpu_share.core.configuration.objectives import ENTITLEMENT_KEY, never_stopped_conflict
from cdk_gpu_share.core.configuration.windows import Window, read_windows, window_mapping
from cdk_gpu_share.core.errors import ConfigError, Problem

__all__ = [*config_fields.__all__, *config_model.__all__,
    "check_backend", "check_config", "config_mapping", "config_problems", "deploy_problems",
    "fairshare_window_problems",
    "WINDOWED_BACKENDS", "load_config", "objective_warnings",
    "parse_config", "team_problems",
]


def __getattr__(name: str) -> Any:
    # BACKENDS: every backend's key, the registered ones included (read when asked, not at import).
    if name == "BACKENDS":
        return backends.keys()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _team(raw: Any, index: int, problems: _Problems, *, guarantee_required: bool = True) -> TeamConfig | None:
    where = V.item("teams", index)
    if raw is None:  # `- ` with nothing after it: not a team silently dropped
        problems.add(where, None, "is empty", "give the team a name and a guarantee, or remove the entry")
        return None
    data = _mapping(raw, where, problems)
    if data is None:
        return None
    _check_keys(data, _TEAM_KEYS, where, problems)
    name = _str(data.get("name"), f"{where}.name", problems, fix="give the team a name such as team-a")
    if name:
        where = V.item("teams", index, name)
    fields = _team_fields(data, where, problems, guarantee_required=guarantee_required)
    if name is None:
        return None
    return TeamConfig._read(name=name, **fields)


def _entitlements_fit(backend: str, section: Any, members: list[TeamConfig], paths: Mapping[str, str],
                      problems: _Problems) -> None:
    """No team of the backend is promised more instances of a type than its capacity declares."""
    for team in members:
        for it, n in (team.objectives.entitlement or {}).items():
            count = section.capacity.get(it)
            if count is not None and n > count:
                problems.add(V.key(f"{paths[team.name]}.objectives.{ENTITLEMENT_KEY}", it), n,
                             f"is above the capacity ({count} instances in {backend}.capacity)",
                             f"promise at most {count}, or raise {backend}.capacity.{it}")


def _read_groups(data: Mapping, teams: list[TeamConfig], paths: Mapping[str, str],
                 problems: _Problems) -> list[GroupConfig]:
    """The ``groups`` list, and the tree's shape checked with the teams' ``group``."""
    raw = data.get("groups")
    if raw is None:
        raw = []  # a team's group must still name a group: none is declared
    if not isinstance(raw, list):
        problems.add("groups", raw, f"must be a list of groups, not {V.kind(raw)}",
                     "write groups: [{name: research}] or leave it out")
        return []
    groups: list[GroupConfig] = []
    shape: list[tuple[str, str, object]] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(raw):
        where = V.item("groups", i)
        item = _mapping(entry, where, problems, required=True)
        if item is None:
            continue
        if isinstance(item.get("name"), str):
            where = V.item("groups", i, item["name"])
        fields = _group_fields(item, where, problems)
        name = fields["name"]
        if name is None:
            continue
        if name in seen:
            problems.add(f"{where}.name", name, f"duplicates the name of groups[{seen[name]}]",
                         "give every group a unique name")
            continue
        seen[name] = i
        groups.append(GroupConfig.__new__(GroupConfig))
        for key, value in fields.items():
            object.__setattr__(groups[-1], key, value)
        shape.append((where, name, fields["parent"]))
    members = [(paths.get(t.name, t.name), t.name, t.group) for t in teams]
    hierarchy.structure_problems(shape, members, problems.add)
    return groups


def _team_paths(teams: list[TeamConfig], paths: Mapping[str, str] | None) -> dict[str, str]:
    """The field path of each team (``teams[1] (team-b)``), by name."""
    out = {t.name: V.item("teams", i, t.name) for i, t in enumerate(teams)}
    out.update(paths or {})
    return out


def _check_backend(
    backend: str,
    section: Any,
    teams: list[TeamConfig],
    problems: _Problems,
    paths: Mapping[str, str] | None = None,
    refused: frozenset[str] = frozenset(),
    platform: str = "gpu-share",
    groups: Sequence[GroupConfig] = (),
) -> None:
    """Rules that need both the teams and one backend section: the guarantees (and the groups'
    pools) fit the capacity, then the backend's own rules
    (:attr:`~cdk_gpu_share.core.configuration.backends.BackendSpec.rules`).

    ``refused``: team names already refused by :func:`team_name_problems` (reported once).
    """
    members = [t for t in teams if t.guarantee_for(section.capacity)]
    for it, count in section.capacity.items():
        _guarantees_fit(backend, it, count, members, problems, [g.guarantee.get(it) for g in groups])
    _entitlements_fit(backend, section, members, _team_paths(teams, paths), problems)
    check = backends.SectionCheck(backend, section, teams, members, _team_paths(teams, paths), platform, refused,
                                  tuple(groups))
    for rule in backends.spec(backend).rules:
        problems.items.extend(rule(check))


#: The resource kinds a guarantee may name, as the capacity check sums them.
_KINDS = ("instances", "accelerators", "vcpu", "memory_gib", "mig slices")


def _capacity_limits(it: str, count: int) -> dict[str, float]:
    """What ``count`` instances of ``it`` hold, per kind (instances only for a type the catalog lacks)."""
    info = instances.lookup(it)
    if info is None:
        return {"instances": count}
    return {"instances": count, "accelerators": count * info.gpus, "vcpu": count * info.vcpus,
            "memory_gib": count * info.memory_gib, "mig slices": count * info.gpus * instances.MIG_COMPUTE_SLICES}


def _guarantees_fit(backend: str, it: str, count: int, members: list[TeamConfig], problems: _Problems,
                    pools: Sequence[Amount | None] = ()) -> None:
    """The teams' guarantees of ``it`` and the groups' ``pools`` of it sum, per resource kind some
    team names, to at most the capacity."""
    info = instances.lookup(it)
    totals = dict.fromkeys(_KINDS, 0.0)
    given = {"instances"}  # the kinds some team guarantees explicitly: the ones to check
    pooled = [a for a in pools if a is not None and a.instances]
    for a in [team.guarantee.get(it) for team in members] + pooled:
        if a is None:
            continue
        given.update(k for k in ("accelerators", "vcpu", "memory_gib") if getattr(a, k) is not None)
        if a.mig:
            given.add("mig slices")
        # Per resource kind: a guarantee of whole instances holds every resource of
        # them, so 1 instance (8 GPUs) + 9 accelerators is 17 of 16 GPUs on 2 p5s.
        whole = a.instances or 0
        totals["instances"] += whole
        # A type without catalogue numbers has a limit in instances only, so its other
        # resource kinds are not summed.
        if info is not None:
            totals["accelerators"] += a.accelerators if a.accelerators is not None else whole * info.gpus
            totals["vcpu"] += a.vcpu if a.vcpu is not None else whole * info.vcpus
            totals["memory_gib"] += a.memory_gib if a.memory_gib is not None else whole * info.memory_gib
            totals["mig slices"] += (instances.mig_slices(a.mig) if a.mig
                                     else whole * info.gpus * instances.MIG_COMPUTE_SLICES)
    limits = _capacity_limits(it, count)
    pools_too = " and the groups' pools" if pooled else ""
    for dim, total in totals.items():
        if dim in given and dim in limits and total > limits[dim] + 1e-9:
            problems.add(
                f"{backend}.capacity.{it}",
                count,
                f"the teams' guarantees{pools_too} sum to {total:g} {dim} of {it}, above the {limits[dim]:g} the"
                " capacity declares",
                f"raise {backend}.capacity.{it} or lower the teams' guarantees{pools_too}",
            )


def check_backend(
    backend: str, section: BatchQuotaConfig | HyperPodConfig | FairshareConfig, teams: list[TeamConfig],
    groups: Sequence[GroupConfig] = (),
) -> list[Problem]:
    """The problems of ``teams`` on one backend section (used by the constructs): their names, then
    the section's rules; with ``groups``, the tree's shape with the teams' ``group`` and the
    rules that name a group."""
    problems = _Problems()
    paths = _team_paths(list(teams), None)
    refused = set()
    for team in teams:
        before = len(problems)
        team_name_problems("", team.name, f"{paths[team.name]}.name", problems.add, stack=False)
        if len(problems) > before:
            refused.add(team.name)
    if groups:
        hierarchy.structure_problems([(f"groups[{i}] ({g.name})", g.name, g.parent) for i, g in enumerate(groups)],
                                     [(paths[t.name], t.name, t.group) for t in teams], problems.add)
    _check_backend(backend, section, list(teams), problems, paths, frozenset(refused), groups=groups)
    return problems.items


def parse_config(raw: object, *, source: str | None = None) -> PlatformConfig:
    """Validate a platform config mapping; raise ConfigError listing every problem."""
    problems = _Problems()
    config = _read_config(raw, problems, source=source)
    if problems.items or config is None:
        raise ConfigError(problems.items, source=source)
    return config


def _read_config(
    raw: Any, problems: _Problems, *, source: str | None = None, owned: Callable[[str], bool] | None = None
) -> PlatformConfig | None:
    """The config of ``raw``, or None; every problem recorded in ``problems``.

    ``owned``: ``raw`` is part of a platform (one construct's props, see :func:`config_problems`):
    teams may be none, no backend is required, only the guarantees on instance types ``owned``
    accepts must name a type the sections declare, and team names are not checked against the
    stack names of a whole platform's app. None: a whole platform.
    """
    data = _mapping(raw, "config", problems, required=True)
    if data is None:
        return None
    _check_keys(data, _top_keys(), "", problems)
    name = _platform_name(data, problems)
    # Inference-only platforms have teams (for endpoint ownership) without guarantees.
    guarantee_required = any(data.get(k) is not None for k in backends.keys())
    teams, paths, refused = _read_teams(data, name, problems, owned=owned, guarantee_required=guarantee_required)
    groups = _read_groups(data, teams, paths, problems)
    windows = read_windows(data.get("windows"), problems, datetime.now(timezone.utc).year)
    _team_windows_declared(data, teams, paths, windows, problems)

    sections = {spec.key: spec.parse(data.get(spec.key), problems) for spec in backends.registered()}
    if not any(sections.values()) and "inference" not in data and owned is None:
        problems.add("config", sorted(str(k) for k in data), "declares no backend",
                     f"add one of {', '.join(sections)} (`gpu-share init --backend NAME` writes one)")
    _one_fleet_per_type(sections, problems)
    _guarantees_declared(data, sections, teams, paths, problems, owned)
    _pools_declared(sections, groups, problems)
    for backend, section in sections.items():
        if section is not None:
            _check_backend(backend, section, teams, problems, paths, frozenset(refused), name, groups)
            for window in windows:
                _check_window(backend, section, window.name, teams, problems, paths, frozenset(refused), name, groups)

    extras = _extra_sections(data, teams, problems)
    builtin = {key: sections.pop(key) for key in _BUILTIN_SECTIONS}
    return PlatformConfig(name=name, teams=tuple(teams), **builtin, other_backends=sections,
                          inference=extras.get("inference"), source=source, alerts=extras.get("alerts"),
                          security=extras.get("security"), history=extras.get("history"), groups=tuple(groups),
                          windows=windows)


def _top_keys() -> set[str]:
    return {"platform", "teams", "groups", "windows", *backends.keys(), *EXTRA_SECTIONS}


def _team_windows_declared(data: Mapping, teams: list[TeamConfig], paths: Mapping[str, str],
                           windows: Sequence[Window], problems: _Problems) -> None:
    """Every window a team gives values for is a window of ``windows:``."""
    names = [w.name for w in windows]
    raw = data.get("windows")
    declared = set(names) | ({str(w.get("name")) for w in raw if isinstance(w, Mapping)}
                             if isinstance(raw, list) else set())
    for team in teams:
        for window in team.windows:
            if window not in declared:
                problems.add(f"{paths[team.name]}.windows.{window}", window, "is not a window of windows:",
                             f"use one of {', '.join(names)}" if names else
                             "declare it under windows: (name, days, start, end, timezone), or remove it")


def _check_window(backend: str, section: Any, window: str, teams: list[TeamConfig], problems: _Problems,
                  paths: Mapping[str, str], refused: frozenset[str], platform: str,
                  groups: Sequence[GroupConfig]) -> None:
    """The backend's rules (capacity sums, its minimums) on the teams' values in ``window``: each
    problem the base does not have already, said of the window."""
    if not any(window in t.windows for t in teams):
        return
    base, inside = _Problems(), _Problems()
    _check_backend(backend, section, teams, base, paths, refused, platform, groups)
    _check_backend(backend, section, [team_in_window(t, window) for t in teams], inside, paths, refused, platform,
                   groups)
    known = {(p.field, p.message) for p in base.items}
    for p in inside.items:
        if (p.field, p.message) in known:
            continue
        field = p.field
        for team in teams:
            prefix = f"{paths[team.name]}."
            if window in team.windows and field.startswith(prefix):
                field = f"{prefix}windows.{window}.{field[len(prefix):]}"
                break
        problems.add(field, p.value, f"{p.message} in window {window}", p.fix)


def _platform_name(data: Mapping, problems: _Problems) -> str:
    name = "gpu-share"
    platform = _mapping(data.get("platform"), "platform", problems)
    if platform is not None:
        _check_keys(platform, {"name"}, "platform", problems)
        if "name" in platform:
            name = _str(platform["name"], "platform.name", problems, PLATFORM_NAME_PATTERN,
                        "start with a letter; use up to 40 letters, digits and hyphens") or name
    return name


def _read_teams(
    data: Mapping, platform: str, problems: _Problems, *, owned: Callable[[str], bool] | None, guarantee_required: bool
) -> tuple[list[TeamConfig], dict[str, str], set[str]]:
    """The teams, the field path of each by name, and the names refused for the stacks' names."""
    teams: list[TeamConfig] = []
    raw_teams = data.get("teams")
    if not isinstance(raw_teams, list) or (not raw_teams and owned is None):
        problems.add("teams", raw_teams, "must be a non-empty list", "list at least one team with a name and a guarantee")
        raw_teams = []
    seen: dict[str, int] = {}
    paths: dict[str, str] = {}
    refused: set[str] = set()
    for i, entry in enumerate(raw_teams):
        team = _team(entry, i, problems, guarantee_required=guarantee_required)
        if team is None:
            continue
        if team.name in seen:
            problems.add(f"{V.item('teams', i, team.name)}.name", team.name,
                         f"duplicates the name of teams[{seen[team.name]}]", "give every team a unique name")
            continue
        seen[team.name] = i
        paths[team.name] = V.item("teams", i, team.name)
        before = len(problems)
        # A whole platform (owned is None) also gives every team a stack named after it.
        team_name_problems(platform, team.name, f"{paths[team.name]}.name", problems.add, stack=owned is None)
        if len(problems) > before:
            refused.add(team.name)
        teams.append(team)
    return teams, paths, refused


def _one_fleet_per_type(sections: Mapping[str, Any], problems: _Problems) -> None:
    """An instance type declared by two backends would be counted twice: the later one is refused."""
    first: dict[str, str] = {}
    for key, section in sections.items():
        for it in section.capacity if section is not None else ():
            if it in first:
                problems.add(f"{key}.capacity.{it}", it, f"is declared by {first[it]} too; a guarantee must map to one"
                             " fleet", "declare each instance type in one backend only")
            else:
                first[it] = key


def _guarantees_declared(
    data: Mapping, sections: Mapping[str, Any], teams: list[TeamConfig], paths: Mapping[str, str], problems: _Problems,
    owned: Callable[[str], bool] | None,
) -> None:
    """Every instance type a team guarantees is declared by some backend's capacity."""
    declared = {it for s in sections.values() if s is not None for it in s.capacity}
    # Types declared with a bad count are reported there; don't report every team's guarantee too.
    for key in sections:
        section_raw = data.get(key)
        if isinstance(section_raw, Mapping) and isinstance(section_raw.get("capacity"), Mapping):
            declared |= {str(k) for k in section_raw["capacity"]}
    hints = [backends.spec(key).capacity_hint or key for key in sections]
    where = ", ".join(hints[:-1]) + " or " + hints[-1] if len(hints) > 1 else hints[0]
    for team in teams:
        for it in team.guarantee:
            if it not in declared and (owned is None or owned(it)):
                message, fix = _undeclared_type(it, declared, where)
                problems.add(V.key(f"{paths[team.name]}.guarantee", it), it, message, fix)


def _undeclared_type(instance_type: str, declared: set[str], where: str) -> tuple[str, str]:
    """Why a guaranteed type that no capacity declares is refused, and the fix, in one answer: a
    catalogued type gets the sections to add it to; a name the catalog does not know gets the
    closest declared or catalogued name (adding the typo to a capacity would only be refused
    next), and that name's capacity when it is not declared yet."""
    add = f"add it to the capacity of {where}"
    sagemaker = instance_type.startswith("ml.")
    unknown = instances.instance_type_problem(instance_type, sagemaker=sagemaker)
    if unknown is None:
        return "names an instance type that no backend declares in its capacity", add
    kinds = instances.sagemaker_types() if sagemaker else instances.known_types()
    close = difflib.get_close_matches(instance_type, sorted(declared) + kinds, n=1)
    if not close or instances.not_a_gpu_family(instance_type) or instances.lookup(instance_type.removeprefix("ml.")):
        return unknown  # not a GPU type (Trainium, a CPU family), or the wrong prefix: said by the catalog
    if close[0] in declared:
        return unknown[0], f"did you mean '{close[0]}'?"
    return unknown[0], f"did you mean '{close[0]}'? Then {add}"


def _pools_declared(sections: Mapping[str, Any], groups: list[GroupConfig], problems: _Problems) -> None:
    """Every instance type a group's pool or borrow limit names is declared by some backend."""
    declared = {it for s in sections.values() if s is not None for it in s.capacity}
    for i, group in enumerate(groups):
        for what, amounts in (("guarantee", group.guarantee), ("borrow_limit", group.borrow_limit or {})):
            for it in amounts:
                if it not in declared:
                    problems.add(V.key(f"{V.item('groups', i, group.name)}.{what}", it), it,
                                 "names an instance type that no backend declares in its capacity",
                                 "use a type of a backend's capacity, or add it there")


def _extra_sections(data: Mapping, teams: list[TeamConfig], problems: _Problems) -> dict[str, Any]:
    """The sections other modules own (:data:`EXTRA_SECTIONS`), each read by its own parser."""
    extras: dict[str, Any] = {}
    for key, target in EXTRA_SECTIONS.items():
        if data.get(key) is None:
            continue
        module_name, func_name = target.split(":")
        try:
            parser: Callable[..., Any] = getattr(importlib.import_module(module_name), func_name)
        except ModuleNotFoundError:
            problems.add(key, "...", "is not supported by this version of cdk-gpu-share", "remove the section")
            continue
        extras[key] = parser(data[key], teams, problems.add)
    return extras


def load_config(path: str | Path) -> PlatformConfig:
    """Read and validate a platform config file (YAML or JSON).

    The file is read through the validation toolkit: oversized files, duplicate keys,
    deep nesting, alias bombs and syntax errors are refused with line and column.
    """
    source = str(path)
    text = V.read_text(path)
    raw = V.load_yaml(text, source=source)
    return parse_config(raw, source=source)


def config_mapping(config: PlatformConfig) -> dict[str, object]:
    """``config`` as the mapping a config file holds (:func:`parse_config` reads it back)."""
    raw: dict[str, object] = {"platform": {"name": config.name}, "teams": _team_list(config.teams)}
    if config.groups:
        raw["groups"] = [group_mapping(g) if isinstance(g, GroupConfig) else g for g in config.groups]
    if config.windows:
        raw["windows"] = [window_mapping(w) if isinstance(w, Window) else w for w in config.windows]
    for spec in backends.registered():
        section = config.backend(spec.key)
        if section is not None:
            raw[spec.key] = spec.to_mapping(section)
    for key, target in EXTRA_MAPPINGS.items():
        section = getattr(config, key)
        if section is not None:
            module_name, func_name = target.split(":")
            raw[key] = getattr(importlib.import_module(module_name), func_name)(section)
    return raw


def check_config(config: PlatformConfig) -> list[Problem]:
    """Every problem :func:`parse_config` finds in ``config`` (one built in Python), by its rules,
    then what cannot be deployed (:func:`deploy_problems`): what the stacks check."""
    problems = _Problems()
    if not isinstance(config, PlatformConfig):
        problems.add("config", config, f"must be a PlatformConfig, not {V.kind(config)}",
                     "pass PlatformConfig(...) or the result of load_config(path)")
        return problems.items
    _read_config(config_mapping(config), problems, source=config.source)
    return problems.items or deploy_problems(config)


#: The backends that enforce time windows when deployed: on any other, a config with windows is
#: refused by ``validate`` and at synth, never deployed as if it had none. The fair-share reclaim
#: Lambda reads the windows itself; Batch quota shares and HyperPod compute quotas are switched by
#: the quota window switcher, Kueue's ClusterQueues by its CronJobs.
WINDOWED_BACKENDS: frozenset[str] = frozenset({"fairshare", "kueue", BATCH, HYPERPOD})


def deploy_problems(config: PlatformConfig) -> list[Problem]:
    """What a valid ``config`` asks that no deployment would do: windows on a backend that does
    not enforce them yet (``simulate``, ``plan`` and ``advise`` read them all the same)."""
    if not config.windows:
        return []
    fix = "remove `windows` (and the teams' windows) to deploy; simulate and plan read them as they are"
    problems = []
    for key in backends.keys():
        if config.backend(key) is None:
            continue
        if key not in WINDOWED_BACKENDS:
            problems.append(Problem("windows", key, f"time windows are not deployed on {key} yet", fix))
    if config.fairshare is not None:
        problems += fairshare_window_problems(config.fairshare, config.windows)
    return problems


def fairshare_window_problems(section: FairshareConfig, windows: Sequence[Window]) -> list[Problem]:
    """Windows on a fair-share queue whose reclaimer is disabled: nothing would hold the teams to a
    window's values (the reclaim Lambda is what reads them)."""
    if not windows or not isinstance(section.reclaim, ReclaimConfig) or section.reclaim.enabled:
        return []
    return [Problem(f"{FAIRSHARE}.reclaim.enabled", False,
                    "is false, but on fair share the reclaim Lambda is what holds the teams to each window's values",
                    "enable the reclaimer (reclaim.enabled: true), or remove `windows` (and the teams' windows)")]


def config_problems(
    teams: Sequence[TeamConfig] = (),
    *,
    platform: str = "gpu-share",
    batch_quota: BatchQuotaConfig | None = None,
    hyperpod: HyperPodConfig | None = None,
    fairshare: FairshareConfig | None = None,
    owned: Callable[[str], bool] = lambda instance_type: True,
    groups: Sequence[GroupConfig] = (),
    windows: Sequence[Window] = (),
) -> list[Problem]:
    """The problems of one construct's props: the teams and sections it is given, checked by the
    config parser's rules as if they were a platform config of their own (fields are the config's:
    ``teams[1] (team-b).guarantee``, ``batch_quota.capacity.ml.g5.xlarge``).

    Unlike a whole config, the teams may be none and no backend is required; a guarantee must name
    a declared instance type only where ``owned`` accepts the type (a construct owns the SageMaker
    types, another the EC2 types; types that belong to another construct are its business).
    ``groups``: the organisation's tree; the groups above the given teams are checked with them
    (without it, a team in a group is refused: deployed flat, it would lose its group's rules).
    ``windows``: the platform's time windows, which the teams' values in a window name.
    """
    raw: dict[str, object] = {"platform": {"name": platform}, "teams": _team_list(list(teams))}
    if windows:
        raw["windows"] = [window_mapping(w) for w in windows]
    if groups:
        raw["groups"] = [group_mapping(g) for g in groups_above(teams, groups)]
    for key, section in ((BATCH, batch_quota), (HYPERPOD, hyperpod), (FAIRSHARE, fairshare)):
        if section is not None:
            raw[key] = section_mapping(section)
    problems = _Problems()
    _read_config(raw, problems, owned=owned)
    return problems.items


def objective_warnings(config: PlatformConfig) -> list[str]:
    """One ``warning:`` line per team whose objectives its sharing cannot meet (work that must
    never be stopped, on a team that borrows): valid, but probably not what was meant."""
    out = []
    for i, team in enumerate(config.teams):
        why = never_stopped_conflict(team.objectives, team.sharing.value)
        if why is not None:
            out.append(f"warning: {V.item('teams', i, team.name)}: {why}")
    return out


def team_problems(team: TeamConfig) -> list[Problem]:
    """The problems of one team on its own (a team's stack): the rules every team meets."""
    if not isinstance(team, TeamConfig):
        return [Problem("team", team, f"must be a TeamConfig, not {V.kind(team)}",
                        'pass TeamConfig(name="team-a", guarantee={"ml.g5.xlarge": 1})')]
    # Its group and its windows are the platform's: the tree and the windows are checked, and
    # applied, with the whole config.
    alone = dataclasses.replace(team, group=None) if isinstance(team.group, str) else team
    alone = dataclasses.replace(alone, windows={}) if isinstance(team.windows, Mapping) and team.windows else alone
    return config_problems([alone], owned=lambda instance_type: False)
