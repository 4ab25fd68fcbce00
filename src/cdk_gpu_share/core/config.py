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
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdk_gpu_share.core import hierarchy, instances
from cdk_gpu_share.core import hyperpod_schema as hp
from cdk_gpu_share.core import validation as V
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.objectives import ENTITLEMENT_KEY, Objectives, never_stopped_conflict, read_objectives

if TYPE_CHECKING:
    from cdk_gpu_share.core.alerts_config import AlertsConfig
    from cdk_gpu_share.core.history_config import HistoryConfig
    from cdk_gpu_share.core.security_config import SecurityConfig
    from cdk_gpu_share.inference.config import InferenceConfig

# ---------------------------------------------------------------------------
# Limits of the services, in one place.

BATCH_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,128}$"
PLATFORM_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9-]{0,39}$"
# AWS APIs take 32-bit integers; larger values would also overflow float arithmetic.
MAX_INT = 2**31 - 1
MAX_NUMBER = 10_000_000  # the largest VCpu / MemoryInGiB a HyperPod compute quota takes
BATCH = "batch_quota"
HYPERPOD = "hyperpod"
FAIRSHARE = "fairshare"
#: The backends whose sections are fields of :class:`PlatformConfig` (a registered backend's
#: section is in ``PlatformConfig.other_backends``); every backend: :func:`cdk_gpu_share.core.backends.keys`.
_BUILTIN_SECTIONS = (BATCH, HYPERPOD, FAIRSHARE)


def __getattr__(name: str) -> Any:
    # BACKENDS: every backend's key, the registered ones included (read when asked, not at import).
    if name == "BACKENDS":
        from cdk_gpu_share.core import backends

        return backends.keys()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The longest checkpoint interval a team may declare: 7 days.
MAX_CHECKPOINT_SECONDS = 604800
#: ``fairshare.reclaim.max_checkpoint_seconds``: default (the reclaim planner's, an hour) and
#: the fix of a value out of its range, 1 to :data:`MAX_CHECKPOINT_SECONDS`.
DEFAULT_RECLAIM_MAX_CHECKPOINT_SECONDS = 3600
RECLAIM_MAX_CHECKPOINT_FIX = (f"give the longest checkpoint interval the checkpoint order believes, 1 to"
                              f" {MAX_CHECKPOINT_SECONDS} seconds (default {DEFAULT_RECLAIM_MAX_CHECKPOINT_SECONDS});"
                              " a job declaring none, 0 or more is ordered as if it saved that often")
#: The most requeues after preemption a team may ask Batch quota management for.
MAX_PREEMPTION_RETRIES = 1000
#: Batch's scheduling priorities run from 0 to 9999; a team's jobs may use 0..max_priority.
#: The same default for every team means no team outranks another unless the platform
#: team raises its cap.
DEFAULT_MAX_PRIORITY = 100
MAX_SCHEDULING_PRIORITY = 9999
DEFAULT_PRINCIPAL_TAG = "gpu-share:team"


class Sharing(str, Enum):
    """How a team shares its guarantee with the others."""

    RESERVE = "reserve"
    LEND = "lend"
    LEND_AND_BORROW = "lend_and_borrow"

    @property
    def lends(self) -> bool:
        """True when the team lends its idle guarantee (``lend``, ``lend_and_borrow``)."""
        return self is not Sharing.RESERVE

    @property
    def borrows(self) -> bool:
        """True when the team may borrow beyond its guarantee (``lend_and_borrow``)."""
        return self is Sharing.LEND_AND_BORROW

    @property
    def batch_strategy(self) -> str:
        """The ``ResourceSharingConfiguration.Strategy`` of an AWS Batch quota share."""
        return self.value.upper()

    @property
    def hyperpod_strategy(self) -> str:
        """The ``ResourceSharingConfig.Strategy`` of a HyperPod compute quota."""
        return {"reserve": "DontLend", "lend": "Lend", "lend_and_borrow": "LendAndBorrow"}[self.value]


@dataclass(frozen=True)
class Amount:
    """Capacity of one instance type: whole instances, or resources of it.

    ``instances`` alone is the common case (``ml.g5.xlarge: 1``). HyperPod also
    takes ``accelerators``, ``vcpu``, ``memory_gib`` and MIG partitions (``mig``:
    profile -> count).
    """

    instances: int | None = None
    accelerators: int | None = None
    vcpu: float | None = None
    memory_gib: float | None = None
    mig: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        # The Python API takes what the YAML takes: mig={"mig-3g.20gb": 8} (profile -> count).
        problems = _Problems()
        for name in ("instances", "accelerators"):
            value = getattr(self, name)
            if value is not None and V.read_int(value, f"Amount.{name}", problems.add, minimum=0,
                                                 fix=f"pass {name}=N, a whole number >= 0") is not None:
                object.__setattr__(self, name, int(value))
        for name in ("vcpu", "memory_gib"):
            value = getattr(self, name)
            if value is not None:
                V.read_number(value, f"Amount.{name}", problems.add, minimum=0, maximum=MAX_NUMBER,
                              fix=f"pass {name}=N, a number >= 0")
        mig = self.mig
        if isinstance(mig, Mapping):
            mig = tuple(sorted(mig.items(), key=lambda kv: str(kv[0])))
        if not isinstance(mig, (tuple, list)) or not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in mig):
            problems.add("Amount.mig", mig, "must map MIG profiles to counts", 'pass mig={"mig-3g.20gb": 4}')
            mig = ()
        for profile, count in mig:
            if not isinstance(profile, str):
                problems.add(f"Amount.mig[{profile!r}]", profile, "is not a MIG profile name", 'pass a name such as "mig-3g.20gb"')
            V.read_int(count, V.key("Amount.mig", profile), problems.add, minimum=0, fix="pass a whole number of partitions")
        object.__setattr__(self, "mig", tuple((p, int(c)) if V.is_number(c) and not isinstance(c, bool) else (p, c) for p, c in mig))
        problems.raise_if_any(label="invalid argument")

    @property
    def is_instances_only(self) -> bool:
        """True when the amount is a whole number of instances and nothing else."""
        return (
            self.instances is not None
            and self.accelerators is None
            and self.vcpu is None
            and self.memory_gib is None
            and not self.mig
        )

    def gpus(self, instance_type: str) -> float | None:
        """GPUs this amount stands for on ``instance_type`` (None when unknown)."""
        info = instances.lookup(instance_type)
        if self.accelerators is not None:
            return float(self.accelerators)
        if self.instances is not None and info is not None:
            return float(self.instances * info.gpus)
        return None

    def describe(self) -> str:
        """The amount in words, such as ``2 instances`` or ``4 accelerators, 96 vCPU``."""
        parts = []
        if self.instances is not None:
            parts.append(f"{self.instances} instance{'s' if self.instances != 1 else ''}")
        if self.accelerators is not None:
            parts.append(f"{self.accelerators} accelerators")
        if self.vcpu is not None:
            parts.append(f"{self.vcpu:g} vCPU")
        if self.memory_gib is not None:
            parts.append(f"{self.memory_gib:g} GiB")
        parts += [f"{count}x {profile}" for profile, count in self.mig]
        return ", ".join(parts) or "nothing"


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
    #: What the team's jobs need (:mod:`cdk_gpu_share.core.objectives`): read by ``simulate``,
    #: ``advise``, ``plan`` and the deployed wait alarms. A mapping is read as the YAML's.
    objectives: Objectives = field(default_factory=Objectives)
    #: The team's group in the organisation's tree (:class:`GroupConfig`); None: a root team.
    group: str | None = None

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
        if not problems.items:
            # The rules every team meets, from YAML or Python: the config parser's own.
            _team_fields(team_mapping(self), where, problems, guarantee_required=False)
            object.__setattr__(self, "assumed_by", tuple(self.assumed_by))
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


#: A group's name: a DNS-1123 label (it names a Kueue Cohort).
GROUP_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
GROUP_NAME_FIX = "use up to 63 lower-case letters, digits and hyphens, starting and ending with a letter or digit"


@dataclass(frozen=True)
class GroupConfig:
    """A group of the organisation's tree: a division that holds teams and other groups.

    ``guarantee`` is the group's own pool (whole instances per type, lent like a team's
    idle guarantee), on top of what its teams guarantee; ``borrow_limit`` the most its
    whole subtree may use beyond its quota Q (None, or a type left out: unlimited).
    ``parent`` is another group (None: a root). A team joins a group with
    ``TeamConfig(group=...)``. The tree's rules (:mod:`cdk_gpu_share.core.hierarchy`)
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
    #: Where every alarm goes (:class:`cdk_gpu_share.core.alerts_config.AlertsConfig`), or None.
    alerts: AlertsConfig | None = None
    #: Who may set the team identity tags (:class:`cdk_gpu_share.core.security_config.SecurityConfig`), or None.
    security: SecurityConfig | None = None
    #: The job archive (:class:`cdk_gpu_share.core.history_config.HistoryConfig`), or None: the
    #: defaults where it applies (:func:`cdk_gpu_share.core.history_config.archive_of`).
    history: HistoryConfig | None = None
    #: The sections of backends registered besides the built-in three, by key
    #: (:func:`cdk_gpu_share.core.backends.register`).
    other_backends: Mapping[str, Any] = field(default_factory=dict)
    #: The organisation's tree of quotas (:class:`GroupConfig`); empty: every team is a root.
    groups: tuple[GroupConfig, ...] = ()

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
        """The backends ``team`` takes part in: those whose capacity its guarantee names."""
        from cdk_gpu_share.core import backends

        return [b for b in backends.keys() if team in self.teams_for(b)]


# ---------------------------------------------------------------------------
# Parsing and validation.


# The helpers below are thin names over the validation toolkit
# (cdk_gpu_share.core.validation), which owns number parsing, quoting, field paths
# and the YAML loader for every input of the library. To add a field: add it to the
# section's *_KEYS set (and to core/config_schema.py, whose test checks both agree),
# read it with _int/_number/_bool/_str/_mapping under the path V.key(where, "field"),
# and record problems with problems.add(field, value, message, fix).

_Problems = V.Problems
_MISSING = object()


def _check_keys(raw: Mapping, allowed: set[str], where: str, problems: _Problems) -> None:
    V.unknown_keys(raw, allowed, where, problems.add)


def _mapping(value: Any, where: str, problems: _Problems, *, required: bool = False) -> Mapping | None:
    return V.read_mapping(None if value is _MISSING else value, where, problems.add, required=required)


def _int(
    value: Any,
    where: str,
    problems: _Problems,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    fix: str = "",
) -> int | None:
    return V.read_int(value, where, problems.add, minimum=minimum, maximum=MAX_INT if maximum is None else maximum, fix=fix)


def _number(value: Any, where: str, problems: _Problems) -> float | None:
    return V.read_number(value, where, problems.add, minimum=0, maximum=MAX_NUMBER, type_fix="write a number such as 96")


def _bool(value: Any, where: str, problems: _Problems) -> bool | None:
    if not isinstance(value, bool):
        problems.add(where, value, "must be true or false", "write true or false")
        return None
    return value


def _str(value: Any, where: str, problems: _Problems, pattern: str | None = None, fix: str = "") -> str | None:
    if not isinstance(value, str) or not value:
        problems.add(where, value, "must be a non-empty string", fix or "write a name")
        return None
    if pattern and not re.fullmatch(pattern, value):
        problems.add(where, value, f"does not match {pattern}", fix)
        return None
    return value


# The readers a backend's section parser uses (cdk_gpu_share.backends): each records the
# problem of a bad value and returns None (read_capacity drops the bad entries).
MISSING = _MISSING
read_mapping = _mapping
check_keys = _check_keys


def read_object(value: Any, where: str, keys: Iterable[str], problems: _Problems) -> Mapping | None:
    """``value`` as a mapping of the given ``keys`` (an unknown key is a problem, with the closest
    known one); None when it is absent or not a mapping."""
    data = _mapping(value, where, problems)
    if data is not None:
        _check_keys(data, set(keys), where, problems)
    return data


read_int = _int
read_bool = _bool
read_str = _str


_AMOUNT_KEYS = {"instances", "accelerators", "vcpu", "memory_gib", "mig"}


def _amount(value: Any, where: str, problems: _Problems) -> Amount | None:
    if value is None:
        # `ml.g5.xlarge:` with nothing after it: a team silently without this guarantee.
        problems.add(where, None, "is empty", "write a number of instances, such as 1, or remove the instance type")
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        n = _int(value, where, problems, minimum=0, fix="write a whole number of instances, such as 1")
        return None if n is None else Amount(instances=n)
    if isinstance(value, (str, bool)):
        problems.add(where, value, f"must be a whole number of instances or a mapping, not {V.kind(value)}",
                     "write a number such as 1, or {accelerators: 4}")
        return None
    raw = _mapping(value, where, problems)
    if raw is None:
        return None
    before = len(problems.items)
    _check_keys(raw, _AMOUNT_KEYS, where, problems)
    kwargs: dict[str, Any] = {}
    if "instances" in raw:
        kwargs["instances"] = _int(raw["instances"], f"{where}.instances", problems, minimum=0)
    if "accelerators" in raw:
        kwargs["accelerators"] = _int(raw["accelerators"], f"{where}.accelerators", problems, minimum=0)
    for key in ("vcpu", "memory_gib"):
        if key in raw:
            kwargs[key] = _number(raw[key], f"{where}.{key}", problems)
    if "mig" in raw:
        mig = _mapping(raw["mig"], f"{where}.mig", problems)
        pairs = []
        for profile, count in (mig or {}).items():
            if profile not in hp.HYPERPOD_MIG_PROFILES:
                close = difflib.get_close_matches(str(profile), sorted(hp.HYPERPOD_MIG_PROFILES), n=1)
                problems.add(
                    f"{where}.mig.{profile}",
                    profile,
                    "is not a MIG profile that HyperPod accepts",
                    f"did you mean '{close[0]}'?" if close else "use a profile such as mig-3g.40gb",
                )
                continue
            n = _int(count, f"{where}.mig.{profile}", problems, minimum=0)
            if n is not None:
                pairs.append((str(profile), n))
        kwargs["mig"] = tuple(sorted(pairs))
    if all(v in (None, ()) for v in kwargs.values()):
        if len(problems.items) == before:
            problems.add(where, dict(raw), "names no capacity", "give instances, accelerators, vcpu, memory_gib or mig")
        return None
    return Amount(**kwargs)


def _capacity(value: Any, where: str, problems: _Problems, *, ml: bool) -> dict[str, int]:
    raw = _mapping(value, where, problems, required=True)
    out: dict[str, int] = {}
    for instance_type, count in (raw or {}).items():
        it = str(instance_type)
        if ml and not it.startswith("ml."):
            problems.add(f"{where}.{it}", it, "is not a SageMaker instance type", f"write ml.{it}")
            continue
        if not ml and it.startswith("ml."):
            problems.add(f"{where}.{it}", it, "is a SageMaker type; this fleet runs EC2 instances", f"write {it[3:]}")
            continue
        n = _int(count, f"{where}.{it}", problems, minimum=1, fix="declare at least 1 instance, or remove the type")
        if n is not None:
            out[it] = n
    if raw is not None and not raw:
        problems.add(where, {}, "declares no instance type", "list at least one, such as ml.g5.xlarge: 3")
    return out


def _catalogued(capacity: dict[str, int], backend: str, problems: _Problems, *, sagemaker: bool) -> None:
    """Drop from ``capacity`` the types the instance catalog refuses (typo, no GPU), each reported."""
    for it in list(capacity):
        refusal = instances.instance_type_problem(it, sagemaker=sagemaker)
        if refusal is not None:
            problems.add(f"{backend}.capacity.{it}", it, *refusal)
            del capacity[it]


read_capacity = _capacity
drop_uncatalogued = _catalogued


def read_section(raw: Any, key: str, keys: Iterable[str], problems: _Problems, *,
                 sagemaker: bool) -> tuple[Mapping, dict[str, int]] | None:
    """Section ``key`` of the given ``keys`` and its capacity (:func:`read_fleet`), or None when absent."""
    data = read_object(raw, key, keys, problems)
    return None if data is None else (data, read_fleet(data, key, problems, sagemaker=sagemaker))


def read_fleet(section: Mapping, key: str, problems: _Problems, *, sagemaker: bool) -> dict[str, int]:
    """The ``capacity`` of section ``key``: instances per type, of the types the catalog knows
    (SageMaker ``ml.`` types, or EC2 types); each refusal recorded."""
    capacity = _capacity(section.get("capacity", _MISSING), f"{key}.capacity", problems, ml=sagemaker)
    _catalogued(capacity, key, problems, sagemaker=sagemaker)
    return capacity


_TEAM_KEYS = {
    "name",
    "guarantee",
    "sharing",
    "borrow_limit_percent",
    "borrow_limit",
    "in_team_preemption",
    "fair_share_weight",
    "checkpoint_seconds",
    "preemption_retries",
    "description",
    "objectives",
    "group",
    # authorization (_team_authorization)
    "max_priority",
    "assumed_by",
    "principal_tag",
}


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


#: (field, minimum, maximum, fix) of a team's bounded whole numbers, in YAML and in Python
#: (:class:`TeamConfig` gives its own fix, in Python's words).
TEAM_INT_RANGES: tuple[tuple[str, int, int, str], ...] = (
    ("borrow_limit_percent", -1, MAX_INT, "use -1 for unlimited, or a percentage >= 0"),
    ("fair_share_weight", 0, 100, "HyperPod fair-share weights run from 0 to 100"),
    ("checkpoint_seconds", 0, MAX_CHECKPOINT_SECONDS,
     f"give the seconds between two checkpoints of the team's jobs, 0 (never) to {MAX_CHECKPOINT_SECONDS} (7 days)"),
    ("preemption_retries", 0, MAX_PREEMPTION_RETRIES,
     f"give how many times a preempted job is queued again before it fails, 0 to {MAX_PREEMPTION_RETRIES}; leave it"
     " out to queue it again every time"),
)


def _team_fields(data: Mapping[str, Any], where: str, problems: _Problems, *, guarantee_required: bool) -> dict[str, Any]:
    """Every field of one team but its name, read and checked; a field that breaks a rule is
    reported and left out. The rules of a team, for the YAML parser and :class:`TeamConfig` alike."""
    guarantee: dict[str, Amount] = {}
    graw = _mapping(data.get("guarantee", _MISSING), f"{where}.guarantee", problems, required=guarantee_required)
    for it, amount in (graw or {}).items():
        a = _amount(amount, f"{where}.guarantee.{it}", problems)
        if a is not None:
            guarantee[str(it)] = a
    if graw is not None and not graw and guarantee_required:
        problems.add(f"{where}.guarantee", {}, "is empty", "guarantee at least one instance type, such as ml.g5.xlarge: 1")
    sharing = Sharing.LEND_AND_BORROW
    if "sharing" in data:
        try:
            sharing = Sharing(data["sharing"])
        except ValueError:
            problems.add(
                f"{where}.sharing",
                data["sharing"],
                "is not a sharing strategy",
                "use reserve, lend or lend_and_borrow",
            )
    ints: dict[str, int | None] = {}
    for key, lo, hi, fix in TEAM_INT_RANGES:
        ints[key] = None
        if data.get(key) is not None:
            ints[key] = _int(data[key], f"{where}.{key}", problems, minimum=lo, maximum=hi, fix=fix)
    percent = ints["borrow_limit_percent"]
    if percent is not None and not sharing.borrows:
        problems.add(
            f"{where}.borrow_limit_percent",
            percent,
            f"is set but sharing is {sharing.value}, which never borrows",
            "remove borrow_limit_percent, or set sharing: lend_and_borrow",
        )
        percent = None
    borrow_limit: dict[str, Amount] = {}
    braw = _mapping(data.get("borrow_limit"), f"{where}.borrow_limit", problems)
    for it, amount in (braw or {}).items():
        a = _amount(amount, f"{where}.borrow_limit.{it}", problems)
        if a is not None:
            borrow_limit[str(it)] = a
    if braw and not sharing.borrows:
        problems.add(
            f"{where}.borrow_limit",
            dict(braw),
            f"is set but sharing is {sharing.value}, which never borrows",
            "remove borrow_limit, or set sharing: lend_and_borrow",
        )
        borrow_limit = {}
    preempt = None  # unset: the service's default
    if data.get("in_team_preemption") is not None:
        preempt = _bool(data["in_team_preemption"], f"{where}.in_team_preemption", problems)
    description = data.get("description", "")
    if not isinstance(description, str):
        problems.add(f"{where}.description", description, "must be a string", "quote it")
        description = ""
    elif len(description) > 1024 or any(unicodedata.category(c).startswith("C") for c in description):
        # A HyperPod compute quota's Description takes up to 1024 printable characters.
        problems.add(
            f"{where}.description",
            description,
            "must be at most 1024 characters on one line, without control characters",
            "shorten it, and write it on one line (no `|` block)",
        )
        description = ""
    return {
        **_team_authorization(data, where, problems),
        "guarantee": guarantee,
        "sharing": sharing,
        "borrow_limit_percent": percent,
        "borrow_limit": borrow_limit,
        "in_team_preemption": preempt,
        "fair_share_weight": ints["fair_share_weight"],
        "checkpoint_seconds": ints["checkpoint_seconds"],
        "preemption_retries": ints["preemption_retries"],
        "description": description,
        "objectives": _entitled(read_objectives(data.get("objectives"), f"{where}.objectives", problems.add),
                                guarantee, f"{where}.objectives", problems),
        "group": _str(data["group"], f"{where}.group", problems, fix="write the name of a group of groups:")
        if data.get("group") is not None else None,
    }


def _entitled(objectives: Objectives | None, guarantee: Mapping[str, Amount], where: str,
              problems: _Problems) -> Objectives:
    """``objectives`` (None: refused, no objective) once its entitlement is a guarantee of the
    team's: whole instances of the very instance types the team is guaranteed. A refused
    entitlement is reported and left out (the guarantee is then the entitlement)."""
    if objectives is None:
        return Objectives()
    entitlement = objectives.entitlement
    if entitlement is None:
        return objectives
    where = f"{where}.{ENTITLEMENT_KEY}"
    types = ", ".join(guarantee) or "none"
    before = len(problems.items)
    for it, count in entitlement.items():
        if it not in guarantee:
            problems.add(V.key(where, it), count, "is not an instance type of the team's guarantee",
                         f"entitle the team to what it is guaranteed, in the same types ({types})")
        else:
            V.read_int(count, V.key(where, it), problems.add, minimum=0,
                       fix="write a whole number of instances, such as 2")
    missing = [it for it in guarantee if it not in entitlement]
    if missing and len(problems.items) == before:
        problems.add(where, dict(entitlement), f"lacks {', '.join(missing)}, guaranteed to the team",
                     f"give the instances of {', '.join(missing)} the team was promised too")
    if len(problems.items) > before:
        return Objectives._of(objectives.targets, None)
    return Objectives._of(objectives.targets, {it: int(n) for it, n in entitlement.items()})


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






# -- the organisation's tree of quotas (``groups:``). Its shape's rules are core/hierarchy.py's.

_GROUP_KEYS = {"name", "parent", "guarantee", "borrow_limit", "description"}


def _whole_instances(raw: Any, where: str, problems: _Problems) -> dict[str, Amount]:
    """A group's pool or borrow limit: whole instances per instance type."""
    out: dict[str, Amount] = {}
    for it, count in (_mapping(raw, where, problems) or {}).items():
        n = _int(count, f"{where}.{it}", problems, minimum=0,
                 fix="write a whole number of instances, such as 2 (a group's pool is whole instances)")
        if n is not None:
            out[str(it)] = Amount(instances=n)
    return out


def _group_fields(data: Mapping[str, Any], where: str, problems: _Problems) -> dict[str, Any]:
    """Every field of one group, read and checked (YAML and :class:`GroupConfig` alike)."""
    _check_keys(data, _GROUP_KEYS, where, problems)
    name = _str(data.get("name"), f"{where}.name", problems, GROUP_NAME_PATTERN, GROUP_NAME_FIX)
    parent = None
    if data.get("parent") is not None:
        parent = _str(data["parent"], f"{where}.parent", problems, fix="write the name of another group")
    description = data.get("description", "")
    if not isinstance(description, str) or len(description) > 1024:
        problems.add(f"{where}.description", description, "must be a string of at most 1024 characters",
                     "quote it and shorten it")
        description = ""
    return {
        "name": name,
        "parent": parent,
        "guarantee": _whole_instances(data.get("guarantee"), f"{where}.guarantee", problems),
        "borrow_limit": None if data.get("borrow_limit") is None
        else _whole_instances(data["borrow_limit"], f"{where}.borrow_limit", problems),
        "description": description,
    }


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
    divided by the type's GPUs: :func:`cdk_gpu_share.core.organisation.node_quotas` gives
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


# -- who may act as a team, and how far. Self-contained: new fields only.

#: An IAM role or user that may be named in a trust policy (no wildcards: IAM refuses them there).
ASSUMER_ARN_PATTERN = r"arn:aws[a-z-]*:iam::\d{12}:(role|user)/[A-Za-z0-9+=,.@_/-]{1,512}"
#: A tag key IAM accepts in aws:PrincipalTag/<key>.
TAG_KEY_PATTERN = r"[A-Za-z0-9 _.:/=+@-]{1,128}"


def _team_authorization(data: Mapping, where: str, problems: _Problems) -> dict[str, Any]:
    """``max_priority``, ``assumed_by`` and ``principal_tag`` of one team (defaults when absent).

    * ``max_priority`` (default 100, within 0..9999): the highest scheduling priority the
      team's jobs may carry (enforced by IAM on Batch service jobs, and by the reclaimer,
      which never ranks a job above its team's cap when it picks victims).
    * ``assumed_by`` (default: none): IAM role or user ARNs allowed to assume the team's
      SubmitRole, e.g. an IAM Identity Center permission-set role or a CI role.
    * ``principal_tag`` (default ``gpu-share:team``): when ``assumed_by`` is empty, principals
      of the platform's account may assume the role only if their principal tag of this key
      is the team's name. Whoever can set that tag can become the team: the tag guard
      (:mod:`cdk_gpu_share.core.guard`) keeps it with ``security.administrators``.
    """
    out: dict[str, Any] = {}
    if data.get("max_priority") is not None:
        value = _int(data["max_priority"], f"{where}.max_priority", problems, minimum=0,
                     maximum=MAX_SCHEDULING_PRIORITY,
                     fix=f"use a whole number from 0 to {MAX_SCHEDULING_PRIORITY} (default {DEFAULT_MAX_PRIORITY})")
        if value is not None:
            out["max_priority"] = value
    raw = data.get("assumed_by")
    if raw is not None:
        items = [raw] if isinstance(raw, str) else raw
        if not isinstance(items, list) or not items:
            problems.add(f"{where}.assumed_by", raw, "must be a non-empty list of IAM role or user ARNs",
                         "write e.g. [arn:aws:iam::111122223333:role/team-a-ci], or remove it to trust"
                         f" principals tagged {DEFAULT_PRINCIPAL_TAG}=<team>")
        else:
            arns = []
            for i, arn in enumerate(items):
                if not isinstance(arn, str) or not re.fullmatch(ASSUMER_ARN_PATTERN, arn):
                    problems.add(f"{where}.assumed_by[{i}]", arn, "is not an IAM role or user ARN",
                                 "write arn:aws:iam::ACCOUNT:role/NAME (no wildcards: trust policies refuse them)")
                elif arn not in arns:
                    arns.append(arn)
            out["assumed_by"] = tuple(arns)
    if data.get("principal_tag") is not None:
        tag = data["principal_tag"]
        if not isinstance(tag, str) or not re.fullmatch(TAG_KEY_PATTERN, tag) or tag.lower().startswith("aws:"):
            problems.add(f"{where}.principal_tag", tag, "is not a tag key IAM accepts",
                         f"use up to 128 letters, digits, spaces and _.:/=+-@, not starting with aws: (default"
                         f" {DEFAULT_PRINCIPAL_TAG})")
        elif raw is not None:
            problems.add(f"{where}.principal_tag", tag, "is set together with assumed_by, which replaces it",
                         "keep one: assumed_by (named principals) or principal_tag (tagged principals)")
        else:
            out["principal_tag"] = tag
    return out






#: EC2 resource IDs: the prefix, then 8 (older) or 17 hexadecimal digits.
VPC_ID_PATTERN = r"^vpc-(?:[0-9a-f]{8}|[0-9a-f]{17})$"
SUBNET_ID_PATTERN = r"^subnet-(?:[0-9a-f]{8}|[0-9a-f]{17})$"
SECURITY_GROUP_ID_PATTERN = r"^sg-(?:[0-9a-f]{8}|[0-9a-f]{17})$"






#: (field, pattern, example) of each id ``fairshare.vpc`` takes.
_VPC_IDS = (
    ("vpc_id", VPC_ID_PATTERN, "vpc-0123456789abcdef0"),
    ("subnet_ids", SUBNET_ID_PATTERN, "subnet-0123456789abcdef0"),
    ("security_group_ids", SECURITY_GROUP_ID_PATTERN, "sg-0123456789abcdef0"),
)


def vpc_problems(values: Mapping[str, Any], where: str, add: V.AddProblem) -> None:
    """The one rule for ``fairshare.vpc``, from YAML and Python alike: an id like ``vpc-...``, and
    non-empty lists of distinct ``subnet-...`` / ``sg-...`` ids (security groups may be absent)."""
    given = [entry for entry in _VPC_IDS if entry[0] != "security_group_ids" or "security_group_ids" in values]
    for name, pattern, example in given:
        path = V.key(where, name)
        value = values.get(name)
        if name == "vpc_id":
            if not isinstance(value, str) or not re.fullmatch(pattern, value):
                add(path, value, "is not a VPC id", f"write it as the console shows it, e.g. {example}")
            continue
        if not isinstance(value, (list, tuple)) or not value:
            fix = (f"list at least one, e.g. [{example}], or leave {name} out for a new egress-only group"
                   if name == "security_group_ids" else f"list the private subnets of the GPU instances, e.g. [{example}]")
            add(path, value, "is an empty list" if isinstance(value, (list, tuple)) else f"must be a list of ids, not {V.kind(value)}",
                fix)
            continue
        first: dict[str, int] = {}
        for i, entry in enumerate(value):
            if not isinstance(entry, str) or not re.fullmatch(pattern, entry):
                add(V.item(path, i), entry, f"is not an id like {example}", f"write it as the console shows it, e.g. {example}")
            elif entry in first:
                add(V.item(path, i), entry, f"repeats {V.item(path, first[entry])}", "list each id once")
            else:
                first[entry] = i




# Sections owned by other modules: name -> "module:function". The function
# takes (raw_section, teams, add_problem) and returns the parsed section;
# add_problem(field, value, message, fix) records a problem.
EXTRA_SECTIONS: dict[str, str] = {
    "inference": "cdk_gpu_share.inference.config:parse_inference",
    "alerts": "cdk_gpu_share.core.alerts_config:parse_alerts",
    "security": "cdk_gpu_share.core.security_config:parse_security",
    "history": "cdk_gpu_share.core.history_config:parse_history",
}





# Names derived from a team's name that every team has, whatever its backends.
# Each entry: (what, template, pattern, maximum length). Backend-specific names (quota
# share, HyperPod namespace, fair-share identifier, job definitions) are checked in
# _check_backend. Add a row here when a construct derives a new name from the team's.
STACK_NAME_PATTERN = r"[A-Za-z][A-Za-z0-9-]*"
TEAM_DERIVED_NAMES: tuple[tuple[str, str, str, int], ...] = (
    ("CloudFormation stack name", "{platform}-team-{team}", STACK_NAME_PATTERN, 128),
)
#: A DNS-1123 label: what Kubernetes takes as a namespace, the strictest name any backend derives
#: from a team's (Kueue's namespace and LocalQueue, HyperPod's ``hyperpod-ns-<team>``). Every
#: backend takes the same names, so a config moves from one backend to another unchanged.
DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
MAX_TEAM_NAME = 63


def _as_label(name: str) -> str:
    """The closest DNS-1123 label to ``name``: lower case, other characters as hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:MAX_TEAM_NAME].strip("-") or "team-a"


def team_name_problems(platform: str, team: str, where: str, add: V.AddProblem, *, stack: bool = True) -> None:
    """Refuse a team name that is not a DNS-1123 label, or (``stack``: the team gets its own stack)
    that a derived name (its stack name, ...) cannot hold."""
    if len(team) > MAX_TEAM_NAME or not re.fullmatch(DNS_LABEL, team):
        add(
            where,
            team,
            f"must be lower-case letters, digits and hyphens, starting and ending with a letter or digit, at most"
            f" {MAX_TEAM_NAME} characters (a DNS-1123 label: every backend names resources after the team, Kubernetes"
            " namespaces included)",
            f"write {_as_label(team)!r}",
        )
        return
    for what, template, pattern, limit in TEAM_DERIVED_NAMES if stack else ():
        derived = template.format(platform=platform, team=team)
        if len(derived) > limit or not re.fullmatch(pattern, derived):
            room = limit - len(template.format(platform=platform, team=""))
            add(
                where,
                team,
                f"makes the {what} {len(derived)} characters long; it takes at most {limit}",
                f"use at most {room} characters",
            )


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
    (:attr:`~cdk_gpu_share.core.backends.BackendSpec.rules`).

    ``refused``: team names already refused by :func:`team_name_problems` (reported once).
    """
    from cdk_gpu_share.core import backends

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
    from cdk_gpu_share.core import backends

    data = _mapping(raw, "config", problems, required=True)
    if data is None:
        return None
    _check_keys(data, _top_keys(), "", problems)
    name = _platform_name(data, problems)
    # Inference-only platforms have teams (for endpoint ownership) without guarantees.
    guarantee_required = any(data.get(k) is not None for k in backends.keys())
    teams, paths, refused = _read_teams(data, name, problems, owned=owned, guarantee_required=guarantee_required)
    groups = _read_groups(data, teams, paths, problems)

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

    extras = _extra_sections(data, teams, problems)
    builtin = {key: sections.pop(key) for key in _BUILTIN_SECTIONS}
    return PlatformConfig(name=name, teams=tuple(teams), **builtin, other_backends=sections,
                          inference=extras.get("inference"), source=source, alerts=extras.get("alerts"),
                          security=extras.get("security"), history=extras.get("history"), groups=tuple(groups))


def _top_keys() -> set[str]:
    from cdk_gpu_share.core import backends

    return {"platform", "teams", "groups", *backends.keys(), *EXTRA_SECTIONS}


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
    from cdk_gpu_share.core import backends

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


# ---------------------------------------------------------------------------
# A config built in Python meets the rules of a config file through the same code:
# the dataclasses are written back as the mapping a file holds and read by the parser.
# A value of the wrong type is passed through as it is, for the parser to name.


def amount_mapping(amount: Amount) -> object:
    """``amount`` as a config file writes it: a number of instances, or a mapping."""
    if not isinstance(amount, Amount):
        return amount
    if amount.is_instances_only:
        return amount.instances
    out: dict[str, Any] = {k: getattr(amount, k) for k in ("instances", "accelerators", "vcpu", "memory_gib")
                           if getattr(amount, k) is not None}
    if amount.mig:
        out["mig"] = dict(amount.mig)
    return out


def _amounts_mapping(amounts: object) -> object:
    if not isinstance(amounts, Mapping):
        return amounts
    return {it: amount_mapping(a) for it, a in amounts.items()}


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
    }
    out.update({k: v for k, v in optional.items() if v is not None})
    return out


def _plain(value: object) -> object:
    """Tuples as lists and mappings as dicts, as a config file holds them."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


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
    "alerts": "cdk_gpu_share.core.alerts_config:alerts_mapping",
    "history": "cdk_gpu_share.core.history_config:history_mapping",
}


def config_mapping(config: PlatformConfig) -> dict[str, object]:
    """``config`` as the mapping a config file holds (:func:`parse_config` reads it back)."""
    raw: dict[str, object] = {"platform": {"name": config.name}, "teams": _team_list(config.teams)}
    if config.groups:
        raw["groups"] = [group_mapping(g) if isinstance(g, GroupConfig) else g for g in config.groups]
    from cdk_gpu_share.core import backends

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


def _team_list(teams: object) -> object:
    if not isinstance(teams, (tuple, list)):
        return teams
    return [team_mapping(t) if isinstance(t, TeamConfig) else t for t in teams]


def check_config(config: PlatformConfig) -> list[Problem]:
    """Every problem :func:`parse_config` finds in ``config`` (one built in Python), by its rules."""
    problems = _Problems()
    if not isinstance(config, PlatformConfig):
        problems.add("config", config, f"must be a PlatformConfig, not {V.kind(config)}",
                     "pass PlatformConfig(...) or the result of load_config(path)")
        return problems.items
    _read_config(config_mapping(config), problems, source=config.source)
    return problems.items


def config_problems(
    teams: Sequence[TeamConfig] = (),
    *,
    platform: str = "gpu-share",
    batch_quota: BatchQuotaConfig | None = None,
    hyperpod: HyperPodConfig | None = None,
    fairshare: FairshareConfig | None = None,
    owned: Callable[[str], bool] = lambda instance_type: True,
    groups: Sequence[GroupConfig] = (),
) -> list[Problem]:
    """The problems of one construct's props: the teams and sections it is given, checked by the
    config parser's rules as if they were a platform config of their own (fields are the config's:
    ``teams[1] (team-b).guarantee``, ``batch_quota.capacity.ml.g5.xlarge``).

    Unlike a whole config, the teams may be none and no backend is required; a guarantee must name
    a declared instance type only where ``owned`` accepts the type (a construct owns the SageMaker
    types, another the EC2 types; types that belong to another construct are its business).
    ``groups``: the organisation's tree; the groups above the given teams are checked with them
    (without it, a team in a group is refused: deployed flat, it would lose its group's rules).
    """
    raw: dict[str, object] = {"platform": {"name": platform}, "teams": _team_list(list(teams))}
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
    # Its group is the platform's: the tree is checked, and applied, with the whole config.
    alone = dataclasses.replace(team, group=None) if isinstance(team.group, str) else team
    return config_problems([alone], owned=lambda instance_type: False)
