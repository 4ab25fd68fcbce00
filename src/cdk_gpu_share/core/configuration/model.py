"""The platform config's model: the dataclasses a config file is read into, and back.

:class:`PlatformConfig` holds the teams (:class:`TeamConfig`), the organisation's tree
(:class:`GroupConfig`) and a section per backend; each checks what it is given in Python by the
rules of a config file (:mod:`cdk_gpu_share.core.configuration.fields`), and the ``*_mapping``
functions write a config back as the mapping a file holds. The whole file is read by
:mod:`cdk_gpu_share.core.configuration.parse`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cdk_gpu_share.core import validation as V
from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.configuration import hierarchy
from cdk_gpu_share.core.configuration.objectives import Objectives, read_objectives
from cdk_gpu_share.core.configuration.windows import Window, window_at
from cdk_gpu_share.core.errors import ConfigError

if TYPE_CHECKING:
    from cdk_gpu_share.core.configuration.alerts import AlertsConfig
    from cdk_gpu_share.core.configuration.archive import HistoryConfig
    from cdk_gpu_share.core.configuration.security import SecurityConfig
    from cdk_gpu_share.inference.config import InferenceConfig
from cdk_gpu_share.core.configuration.fields import (
    _AMOUNT_KEYS,
    _BUILTIN_SECTIONS,
    DEFAULT_MAX_PRIORITY,
    DEFAULT_PRINCIPAL_TAG,
    DEFAULT_RECLAIM_MAX_CHECKPOINT_SECONDS,
    MAX_CHECKPOINT_SECONDS,
    MAX_SCHEDULING_PRIORITY,
    RECLAIM_MAX_CHECKPOINT_FIX,
    TEAM_INT_RANGES,
    Amount,
    Sharing,
    _amounts_mapping,
    _group_fields,
    _plain,
    _Problems,
    _team_fields,
    vpc_problems,
)

__all__ = [
    "BatchQuotaConfig", "config_at", "EXTRA_MAPPINGS", "EXTRA_SECTIONS", "FairshareConfig", "FairshareVpcConfig",
    "group_mapping", "group_tree", "GroupConfig", "groups_above", "HyperPodConfig", "PlatformConfig",
    "PriorityClass", "ReclaimConfig", "section_mapping", "ShareMonitorConfig", "team_in_window", "team_mapping", "TeamConfig",
]


@dataclass(frozen=True)
class TeamConfig:
    """One team: its guarantee per instance type and how it shares it."""

    name: str
    guarantee: Mapping[str, Amount]
    sharing: Sharing = Sharing.LEND_AND_BORROW
    borrow_limit_percent: int | None = None
    borrow_limit: Mapping[str, Amount] = field(default_factory=dict)
    #: None: the service's default (HyperPod: ``LowerPriority``; Batch quota shares: disabled).
    in_team_preemption: bool | None = None
    fair_share_weight: int | None = None
    #: Seconds between two checkpoints of the team's jobs (None: not said, taken as never);
    #: what a reclaim throws away under ``fairshare.reclaim.victim_order: checkpoint``.
    checkpoint_seconds: int | None = None
    #: Batch quota management: how many times a preempted service job of the team is queued
    #: again before it fails (``preemptionRetriesBeforeTermination``). None: Batch's default,
    #: requeued every time.
    preemption_retries: int | None = None
    description: str = ""
    #: Highest scheduling priority the team may give a job (see :func:`_team_authorization`).
    max_priority: int = DEFAULT_MAX_PRIORITY
    #: IAM role/user ARNs that may assume the team's SubmitRole. Empty: principals of the
    #: platform's account whose principal tag ``principal_tag`` is the team's name.
    assumed_by: tuple[str, ...] = ()
    principal_tag: str = DEFAULT_PRINCIPAL_TAG
    #: What the team's jobs need (:mod:`cdk_gpu_share.core.configuration.objectives`): read by ``simulate``,
    #: ``advise``, ``plan`` and the deployed wait alarms. A mapping is read as the YAML's.
    objectives: Objectives = field(default_factory=Objectives)
    #: The team's group in the organisation's tree (:class:`GroupConfig`); None: a root team.
    group: str | None = None
    #: The team's values per window of the config's ``windows`` (:mod:`cdk_gpu_share.core.configuration.windows`):
    #: window name -> any of ``guarantee``, ``borrow_limit_percent``, ``borrow_limit``, as the YAML
    #: writes them; in force while that window is open.
    windows: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The Python API takes the YAML's shorthand (guarantee={"ml.g5.xlarge": 2},
        # sharing="lend") and refuses anything else with a ConfigError naming the field.
        where = f"TeamConfig({self.name!r})" if isinstance(self.name, str) else "TeamConfig"
        problems = _Problems()
        if not isinstance(self.name, str) or not self.name:
            problems.add(f"{where}.name", self.name, "must be a non-empty string", 'pass name="team-a"')
        object.__setattr__(self, "guarantee", _python_amounts(self.guarantee, f"{where}.guarantee", problems))
        object.__setattr__(self, "borrow_limit", _python_amounts(self.borrow_limit or {}, f"{where}.borrow_limit", problems))
        if not isinstance(self.sharing, Sharing):
            try:
                object.__setattr__(self, "sharing", Sharing(self.sharing))
            except (ValueError, TypeError):
                problems.add(f"{where}.sharing", self.sharing, "is not a sharing strategy",
                             'pass Sharing.LEND or one of "reserve", "lend", "lend_and_borrow"')
        if self.in_team_preemption is not None and not isinstance(self.in_team_preemption, bool):
            problems.add(f"{where}.in_team_preemption", self.in_team_preemption, "must be True, False or None",
                         "pass a bool, or None for the service's default")
        for name, lo, hi in (*((k, lo, hi) for k, lo, hi, _ in TEAM_INT_RANGES), ("max_priority", 0, MAX_SCHEDULING_PRIORITY)):
            value = getattr(self, name)
            if value is not None:
                V.read_int(value, f"{where}.{name}", problems.add, minimum=lo, maximum=hi)
        if not isinstance(self.description, str):
            problems.add(f"{where}.description", self.description, "must be a string", 'pass description="..."')
        if self.group is not None and not isinstance(self.group, str):
            problems.add(f"{where}.group", self.group, "must be a group's name or None",
                         'pass group="research", or None for a root team')
        if not isinstance(self.assumed_by, (tuple, list)):
            problems.add(f"{where}.assumed_by", self.assumed_by, "must be a tuple of IAM role or user ARNs",
                         'pass assumed_by=("arn:aws:iam::111122223333:role/team-a-ci",)')
        if not isinstance(self.principal_tag, str):
            problems.add(f"{where}.principal_tag", self.principal_tag, "must be a string",
                         f'pass principal_tag="{DEFAULT_PRINCIPAL_TAG}"')
        if not isinstance(self.objectives, Objectives):
            read = read_objectives(self.objectives, f"{where}.objectives", problems.add)
            object.__setattr__(self, "objectives", read if read is not None else Objectives())
        if not isinstance(self.windows, Mapping):
            problems.add(f"{where}.windows", self.windows, "must be a dict of window name to values",
                         'pass windows={"night": {"guarantee": {"ml.g5.xlarge": 1}}}')
        if not problems.items:
            # The rules every team meets, from YAML or Python: the config parser's own.
            read = _team_fields(team_mapping(self), where, problems, guarantee_required=False)
            object.__setattr__(self, "assumed_by", tuple(self.assumed_by))
            object.__setattr__(self, "windows", read["windows"])
        problems.raise_if_any(label="invalid argument")

    @classmethod
    def _read(cls, **fields: Any) -> TeamConfig:
        """A team of fields the config parser has read and checked (:func:`_team_fields`): built
        without checking them a second time."""
        team = cls.__new__(cls)
        for f in dataclasses.fields(cls):
            if f.name in fields:
                value = fields[f.name]
            else:
                value = f.default_factory() if callable(f.default_factory) else f.default
            object.__setattr__(team, f.name, value)
        return team

    def guarantee_for(self, capacity: Mapping[str, object]) -> dict[str, Amount]:
        """The part of the guarantee on instance types that ``capacity`` declares."""
        return {it: a for it, a in self.guarantee.items() if it in capacity}


def _python_amounts(value: Any, where: str, problems: V.Problems) -> dict[str, Amount]:
    """A guarantee or borrow limit given in Python: Amount, whole number or mapping per type."""
    if not isinstance(value, Mapping):
        problems.add(where, value, f"must be a dict of instance type to amount, not {V.kind(value)}",
                     'pass {"ml.g5.xlarge": 1} or {"ml.p5.48xlarge": Amount(accelerators=4)}')
        return {}
    out: dict[str, Amount] = {}
    for it, amount in value.items():
        path = f"{where}[{it!r}]"
        if not isinstance(it, str):
            problems.add(path, it, "is not an instance type name", 'use a string such as "ml.g5.xlarge"')
            continue
        if isinstance(amount, Amount):
            out[it] = amount
            continue
        try:
            if isinstance(amount, Mapping):
                unknown = set(amount) - _AMOUNT_KEYS
                if unknown:
                    problems.add(path, amount, f"names {', '.join(sorted(map(str, unknown)))}, not a field of Amount",
                                 f"use {', '.join(sorted(_AMOUNT_KEYS))}")
                    continue
                out[it] = Amount(**amount)
            elif isinstance(amount, (int, float)) and not isinstance(amount, bool):
                n = V.read_int(amount, path, problems.add, minimum=0, fix="pass a whole number of instances, or an Amount")
                if n is not None:
                    out[it] = Amount(instances=n)
            else:
                problems.add(path, amount, f"must be an Amount or a whole number of instances, not {V.kind(amount)}",
                             "pass 2 or Amount(instances=2)")
        except ConfigError as exc:
            for p in exc.problems:
                problems.add(p.field.replace("Amount", path, 1), p.value, p.message, p.fix)
    return out


@dataclass(frozen=True)
class GroupConfig:
    """A group of the organisation's tree: a division that holds teams and other groups.

    ``guarantee`` is the group's own pool (whole instances per type, lent like a team's
    idle guarantee), on top of what its teams guarantee; ``borrow_limit`` the most its
    whole subtree may use beyond its quota Q (None, or a type left out: unlimited).
    ``parent`` is another group (None: a root). A team joins a group with
    ``TeamConfig(group=...)``. The tree's rules (:mod:`cdk_gpu_share.core.configuration.hierarchy`)
    are checked with the whole config.
    """

    name: str
    parent: str | None = None
    guarantee: Mapping[str, Amount] = field(default_factory=dict)
    borrow_limit: Mapping[str, Amount] | None = None
    description: str = ""

    def __post_init__(self) -> None:
        where = f"GroupConfig({self.name!r})" if isinstance(self.name, str) else "GroupConfig"
        problems = _Problems()
        object.__setattr__(self, "guarantee", _python_amounts(self.guarantee or {}, f"{where}.guarantee", problems))
        if self.borrow_limit is not None:
            object.__setattr__(self, "borrow_limit",
                               _python_amounts(self.borrow_limit, f"{where}.borrow_limit", problems))
        if not problems.items:
            # The YAML's rules, through the parser's own reader of a group.
            _group_fields(group_mapping(self), where, problems)
        problems.raise_if_any(label="invalid argument")


@dataclass(frozen=True)
class ShareMonitorConfig:
    """The share monitor of a Batch quota-management queue (``batch_quota.monitor``)."""

    enabled: bool = True
    #: Minutes between two readings of the queue.
    schedule_minutes: int = 1
    #: A team's alarm fires when one of its jobs that would be within the team's guarantee
    #: waited this long (the lender's promise).
    guarantee_wait_alarm_seconds: int = 900


@dataclass(frozen=True)
class BatchQuotaConfig:
    """AWS Batch quota management for SageMaker Training jobs."""

    capacity: Mapping[str, int]
    queue_name: str | None = None
    service_environment_name: str | None = None
    priority: int = 1
    monitor: ShareMonitorConfig = field(default_factory=ShareMonitorConfig)


@dataclass(frozen=True)
class PriorityClass:
    """A HyperPod task priority class: ``name`` and ``weight`` (0 to 100; higher goes first)."""
    name: str
    weight: int


@dataclass(frozen=True)
class HyperPodConfig:
    """SageMaker HyperPod task governance on one EKS-orchestrated cluster."""

    cluster_arn: str
    capacity: Mapping[str, int]
    fair_share: bool = True
    idle_resource_sharing: bool = True
    priority_classes: tuple[PriorityClass, ...] = ()
    scheduler_config_name: str | None = None
    #: The EKS cluster that orchestrates the HyperPod cluster: each team's SubmitRole gets an
    #: EKS access entry scoped to its namespace there. None: no cluster access is granted.
    eks_cluster_arn: str | None = None


@dataclass(frozen=True)
class ReclaimConfig:
    """The reclaim Lambda of the classic fair-share queue."""

    enabled: bool = True
    schedule_minutes: int = 1
    dry_run: bool = False
    reclaim_after_seconds: int = 0
    min_runtime_seconds: int = 0
    #: Which running jobs a reclaim stops first: ``youngest`` (lower priority, then the most
    #: recent start) or ``checkpoint`` (runs started on borrowed capacity, then the least
    #: work lost since the last checkpoint).
    victim_order: str = "youngest"
    #: The checkpoint order's cap: a job that declares no interval, 0 or a longer one is ordered
    #: as if it saved its progress every this many seconds (1 to 604800; default 3600).
    max_checkpoint_seconds: int = DEFAULT_RECLAIM_MAX_CHECKPOINT_SECONDS

    def __post_init__(self) -> None:
        # The Python API gets the YAML's rule: a cap the planner would refuse in the Lambda is
        # refused here, when the app is built.
        problems = _Problems()
        value = V.read_int(self.max_checkpoint_seconds, "ReclaimConfig.max_checkpoint_seconds", problems.add,
                           minimum=1, maximum=MAX_CHECKPOINT_SECONDS, fix=RECLAIM_MAX_CHECKPOINT_FIX)
        problems.raise_if_any(label="invalid argument")
        object.__setattr__(self, "max_checkpoint_seconds", value)


@dataclass(frozen=True)
class FairshareVpcConfig:
    """An existing VPC for the fair-share fleet's instances (``fairshare.vpc``).

    With it the platform creates no VPC and no NAT gateway: the compute environment
    launches its instances in ``subnet_ids`` (which need a route to ECR, ECS, Batch and
    CloudWatch: a NAT gateway or interface endpoints of yours) with ``security_group_ids``,
    or with one new security group in ``vpc_id`` (egress only) when none are given.
    """

    vpc_id: str
    subnet_ids: tuple[str, ...]
    security_group_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # The Python API gets the YAML's rule (lists are taken as tuples; no groups: a new one).
        values: dict[str, Any] = {"vpc_id": self.vpc_id, "subnet_ids": self.subnet_ids}
        if self.security_group_ids is not None and self.security_group_ids != ():
            values["security_group_ids"] = self.security_group_ids
        problems = _Problems()
        vpc_problems(values, "FairshareVpcConfig", problems.add)
        problems.raise_if_any(label="invalid argument")
        object.__setattr__(self, "subnet_ids", tuple(self.subnet_ids))
        object.__setattr__(self, "security_group_ids", tuple(self.security_group_ids or ()))


@dataclass(frozen=True)
class FairshareConfig:
    """Classic AWS Batch on EC2 GPU instances with a fair-share scheduling policy."""

    capacity: Mapping[str, int]
    queue_name: str | None = None
    share_decay_seconds: int = 3600
    compute_reservation: int = 0
    #: BEST_FIT_PROGRESSIVE on demand; the config parser picks SPOT_PRICE_CAPACITY_OPTIMIZED for spot.
    allocation_strategy: str = "BEST_FIT_PROGRESSIVE"
    spot: bool = False
    min_instances: int = 0
    job_attempts: int = 5
    reclaim: ReclaimConfig = field(default_factory=ReclaimConfig)
    #: An existing VPC; None: the construct creates one (2 AZs, 1 NAT gateway, flow logs).
    vpc: FairshareVpcConfig | None = None


@dataclass(frozen=True)
class PlatformConfig:
    """The whole platform, validated."""

    name: str
    teams: tuple[TeamConfig, ...]
    batch_quota: BatchQuotaConfig | None = None
    hyperpod: HyperPodConfig | None = None
    fairshare: FairshareConfig | None = None
    inference: InferenceConfig | None = None
    source: str | None = None
    #: Where every alarm goes (:class:`cdk_gpu_share.core.configuration.alerts.AlertsConfig`), or None.
    alerts: AlertsConfig | None = None
    #: Who may set the team identity tags (:class:`cdk_gpu_share.core.configuration.security.SecurityConfig`), or None.
    security: SecurityConfig | None = None
    #: The job archive (:class:`cdk_gpu_share.core.configuration.archive.HistoryConfig`), or None: the
    #: defaults where it applies (:func:`cdk_gpu_share.core.configuration.archive.archive_of`).
    history: HistoryConfig | None = None
    #: The sections of backends registered besides the built-in three, by key
    #: (:func:`cdk_gpu_share.core.configuration.backends.register`).
    other_backends: Mapping[str, Any] = field(default_factory=dict)
    #: The organisation's tree of quotas (:class:`GroupConfig`); empty: every team is a root.
    groups: tuple[GroupConfig, ...] = ()
    #: Named weekly windows (:class:`cdk_gpu_share.core.configuration.windows.Window`) in which teams' values
    #: change (:attr:`TeamConfig.windows`); empty: the values never change.
    windows: tuple[Window, ...] = ()

    def team(self, name: str) -> TeamConfig:
        """The team named ``name`` (``KeyError`` when there is none)."""
        for team in self.teams:
            if team.name == name:
                return team
        raise KeyError(name)

    def backend(self, name: str) -> Any:
        """The section of backend ``name`` (``batch_quota``, ``hyperpod``, ``fairshare`` or a
        registered one), or None when the config has none."""
        if name in _BUILTIN_SECTIONS:
            return getattr(self, name)
        return self.other_backends.get(name)

    def teams_for(self, backend: str) -> list[TeamConfig]:
        """The teams whose guarantee names an instance type of ``backend``."""
        section = self.backend(backend)
        if section is None:
            return []
        return [t for t in self.teams if t.guarantee_for(section.capacity)]

    def backends_of(self, team: TeamConfig) -> list[str]:
        """The backends ``team`` takes part in: those whose capacity its guarantee names, in the order
        of the backends (the built-in sections, then the others as the parser reads them)."""
        return [b for b in (*_BUILTIN_SECTIONS, *self.other_backends) if team in self.teams_for(b)]


def group_mapping(group: GroupConfig) -> dict[str, object]:
    """``group`` as an entry of the config file's ``groups`` list."""
    out: dict[str, object] = {"name": group.name}
    optional = {
        "parent": group.parent,
        "guarantee": _amounts_mapping(group.guarantee) or None,
        "borrow_limit": _amounts_mapping(group.borrow_limit) if group.borrow_limit is not None else None,
        "description": group.description or None,
    }
    out.update({k: v for k, v in optional.items() if v is not None})
    return out


def groups_above(teams: Sequence[TeamConfig], groups: Sequence[GroupConfig]) -> list[GroupConfig]:
    """The groups above at least one of ``teams`` (a group's parents too), in declared order."""
    by_name = {g.name: g for g in groups}
    wanted: set[str] = set()
    for team in teams:
        node = team.group
        while node is not None and node not in wanted and node in by_name:
            wanted.add(node)
            node = by_name[node].parent
    return [g for g in groups if g.name in wanted]


def group_tree(config: PlatformConfig, backend: str | None = None) -> hierarchy.Tree:
    """The tree of ``config`` in whole instances per instance type (Q and B of each node).

    With ``backend``, only its teams and instance types: a team that takes no part keeps
    no quota there, and a group pool on another backend's types counts 0. Amounts other than
    whole instances (HyperPod's accelerators, vCPU, MIG) count as the GPUs they stand for
    divided by the type's GPUs: :func:`cdk_gpu_share.core.policy.organisation.node_quotas` gives
    the same tree in GPUs.
    """
    section = config.backend(backend) if backend is not None else None
    teams = config.teams if section is None else config.teams_for(backend or "")

    def wanted(it: str) -> bool:
        return section is None or it in section.capacity

    def instances_of(amounts: Mapping[str, Amount]) -> dict[str, float]:
        out: dict[str, float] = {}
        for it, a in amounts.items():
            if not wanted(it):
                continue
            info = instances.lookup(it)
            gpus = a.gpus(it)
            out[it] = float(a.instances or 0) if a.is_instances_only else (
                gpus / info.gpus if gpus is not None and info is not None and info.gpus else float(a.instances or 0))
        return out

    return hierarchy.Tree(
        [hierarchy.GroupSpec(g.name, g.parent, instances_of(g.guarantee),
                             None if g.borrow_limit is None else instances_of(g.borrow_limit))
         for g in config.groups],
        [(t.name, t.group) for t in teams],
        {t.name: instances_of(t.guarantee) for t in teams},
        reserve=[t.name for t in teams if t.sharing is Sharing.RESERVE],
    )


# Sections owned by other modules: name -> "module:function". The function
# takes (raw_section, teams, add_problem) and returns the parsed section;
# add_problem(field, value, message, fix) records a problem.
EXTRA_SECTIONS: dict[str, str] = {
    "inference": "cdk_gpu_share.inference.config:parse_inference",
    "alerts": "cdk_gpu_share.core.configuration.alerts:parse_alerts",
    "security": "cdk_gpu_share.core.configuration.security:parse_security",
    "history": "cdk_gpu_share.core.configuration.archive:parse_history",
}


def team_mapping(team: TeamConfig) -> dict[str, object]:
    """``team`` as an entry of the config file's ``teams`` list."""
    out: dict[str, object] = {
        "name": team.name,
        "guarantee": _amounts_mapping(team.guarantee),
        "sharing": team.sharing.value if isinstance(team.sharing, Sharing) else team.sharing,
    }
    optional = {
        "borrow_limit_percent": team.borrow_limit_percent,
        "borrow_limit": _amounts_mapping(team.borrow_limit) or None,
        "in_team_preemption": team.in_team_preemption,
        "fair_share_weight": team.fair_share_weight,
        "checkpoint_seconds": team.checkpoint_seconds,
        "preemption_retries": team.preemption_retries,
        "description": team.description or None,
        "max_priority": team.max_priority,
        "assumed_by": list(team.assumed_by) if isinstance(team.assumed_by, (tuple, list)) and team.assumed_by
        else (team.assumed_by or None),
        # The default tag is the file's default too: written only when it is another one.
        "principal_tag": None if team.principal_tag == DEFAULT_PRINCIPAL_TAG else team.principal_tag,
        "objectives": (team.objectives.to_mapping() or None) if isinstance(team.objectives, Objectives)
        else team.objectives,
        "group": team.group,
        "windows": {name: _window_values_mapping(values) for name, values in team.windows.items()}
        if isinstance(team.windows, Mapping) and team.windows else None,
    }
    out.update({k: v for k, v in optional.items() if v is not None})
    return out


def _window_values_mapping(values: object) -> object:
    """A team's values in one window as the config file writes them."""
    if not isinstance(values, Mapping):
        return values
    return {k: _amounts_mapping(v) if k in ("guarantee", "borrow_limit") else v for k, v in values.items()}


def team_in_window(team: TeamConfig, window: str | None) -> TeamConfig:
    """``team`` with the values it gives for ``window`` in force (None, or a window it gives no
    values for: the team itself). Its entitlement follows the guarantee unless its objectives
    give one."""
    values = team.windows.get(window) if window is not None else None
    if not values:
        return team
    fields = {f.name: getattr(team, f.name) for f in dataclasses.fields(team)}
    fields.update(values)
    return TeamConfig._read(**fields)


def config_at(config: PlatformConfig, t: Any) -> PlatformConfig:
    """``config`` with each team's values in force at instant ``t`` (an aware datetime; naive
    is UTC): the one reading of the windows for plan, the simulator and what switches quotas."""
    if not config.windows:
        return config
    open_now = window_at(config.windows, t)
    if open_now is None:
        return config
    return dataclasses.replace(config, teams=tuple(team_in_window(team, open_now.name) for team in config.teams))


def section_mapping(section: BatchQuotaConfig | HyperPodConfig | FairshareConfig) -> object:
    """A backend section (:class:`BatchQuotaConfig`, :class:`HyperPodConfig`, :class:`FairshareConfig`)
    as the config file writes it; fields left at None are left out."""
    if isinstance(section, HyperPodConfig):
        classes = section.priority_classes
        out: dict[str, Any] = {
            "cluster_arn": section.cluster_arn,
            "capacity": _plain(section.capacity),
            "fair_share": section.fair_share,
            "idle_resource_sharing": section.idle_resource_sharing,
            "priority_classes": [{"name": c.name, "weight": c.weight} if isinstance(c, PriorityClass) else c
                                 for c in classes] if isinstance(classes, (tuple, list)) else classes,
            "scheduler_config_name": section.scheduler_config_name,
            "eks_cluster_arn": section.eks_cluster_arn,
        }
    elif isinstance(section, (BatchQuotaConfig, FairshareConfig)):
        out = {f.name: getattr(section, f.name) for f in dataclasses.fields(section)}
        if isinstance(section, BatchQuotaConfig) and isinstance(section.monitor, ShareMonitorConfig):
            out["monitor"] = dataclasses.asdict(section.monitor)
        if isinstance(section, FairshareConfig):
            reclaim, vpc = section.reclaim, section.vpc
            out["reclaim"] = dataclasses.asdict(reclaim) if isinstance(reclaim, ReclaimConfig) else reclaim
            if isinstance(vpc, FairshareVpcConfig):
                out["vpc"] = {"vpc_id": vpc.vpc_id, "subnet_ids": list(vpc.subnet_ids)}
                if vpc.security_group_ids:
                    out["vpc"]["security_group_ids"] = list(vpc.security_group_ids)
        out = {k: _plain(v) for k, v in out.items()}
    else:
        return section
    return {k: v for k, v in out.items() if v is not None}


# Mappings of the sections owned by other modules: name -> "module:function".
EXTRA_MAPPINGS: dict[str, str] = {
    "inference": "cdk_gpu_share.inference.config:inference_mapping",
    "alerts": "cdk_gpu_share.core.configuration.alerts:alerts_mapping",
    "history": "cdk_gpu_share.core.configuration.archive:history_mapping",
}


def _team_list(teams: object) -> object:
    if not isinstance(teams, (tuple, list)):
        return teams
    return [team_mapping(t) if isinstance(t, TeamConfig) else t for t in teams]
