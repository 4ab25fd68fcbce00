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
    batch_quota:                      # AWS Batch quota management (SageMaker Training)
      capacity: {ml.g5.xlarge: 3}
    hyperpod:                         # SageMaker HyperPod task governance
      cluster_arn: arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdefghijkl
      capacity: {ml.p5.48xlarge: 4}
      priority_classes: [{name: training, weight: 50}]
    fairshare:                        # classic AWS Batch on EC2 GPU instances
      capacity: {g5.xlarge: 3}

A team takes part in a backend when its guarantee names an instance type that
the backend's ``capacity`` declares.
"""

from __future__ import annotations

import difflib
import importlib
import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable

from cdk_gpu_share.core import hyperpod_schema as hp
from cdk_gpu_share.core import instances
from cdk_gpu_share.core.errors import ConfigError, Problem

# ---------------------------------------------------------------------------
# Limits of the services, in one place.

MAX_QUOTA_SHARES_PER_QUEUE = 20
MAX_CAPACITY_LIMITS_PER_SHARE = 5
BATCH_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,128}$"
PLATFORM_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9-]{0,39}$"
HYPERPOD_MAX_BORROW_PERCENT = 500
# AWS APIs take 32-bit integers; larger values would also overflow float arithmetic.
MAX_INT = 2**31 - 1
MAX_NUMBER = 10_000_000  # the largest VCpu / MemoryInGiB a HyperPod compute quota takes
BATCH = "batch_quota"
HYPERPOD = "hyperpod"
FAIRSHARE = "fairshare"
BACKENDS = (BATCH, HYPERPOD, FAIRSHARE)


class Sharing(str, Enum):
    """How a team shares its guarantee with the others."""

    RESERVE = "reserve"
    LEND = "lend"
    LEND_AND_BORROW = "lend_and_borrow"

    @property
    def lends(self) -> bool:
        return self is not Sharing.RESERVE

    @property
    def borrows(self) -> bool:
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

    @property
    def is_instances_only(self) -> bool:
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
    in_team_preemption: bool = False
    fair_share_weight: int | None = None
    description: str = ""

    def guarantee_for(self, capacity: Mapping[str, Any]) -> dict[str, Amount]:
        """The part of the guarantee on instance types that ``capacity`` declares."""
        return {it: a for it, a in self.guarantee.items() if it in capacity}


@dataclass(frozen=True)
class BatchQuotaConfig:
    """AWS Batch quota management for SageMaker Training jobs."""

    capacity: Mapping[str, int]
    queue_name: str | None = None
    service_environment_name: str | None = None
    priority: int = 1


@dataclass(frozen=True)
class PriorityClass:
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


@dataclass(frozen=True)
class ReclaimConfig:
    """The reclaim Lambda of the classic fair-share queue."""

    enabled: bool = True
    schedule_minutes: int = 1
    dry_run: bool = False
    reclaim_after_seconds: int = 0
    min_runtime_seconds: int = 0


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


@dataclass(frozen=True)
class PlatformConfig:
    """The whole platform, validated."""

    name: str
    teams: tuple[TeamConfig, ...]
    batch_quota: BatchQuotaConfig | None = None
    hyperpod: HyperPodConfig | None = None
    fairshare: FairshareConfig | None = None
    inference: Any = None
    source: str | None = None

    def team(self, name: str) -> TeamConfig:
        for team in self.teams:
            if team.name == name:
                return team
        raise KeyError(name)

    def backend(self, name: str) -> Any:
        return getattr(self, name)

    def teams_for(self, backend: str) -> list[TeamConfig]:
        """The teams whose guarantee names an instance type of ``backend``."""
        section = self.backend(backend)
        if section is None:
            return []
        return [t for t in self.teams if t.guarantee_for(section.capacity)]

    def backends_of(self, team: TeamConfig) -> list[str]:
        return [b for b in BACKENDS if team in self.teams_for(b)]


# ---------------------------------------------------------------------------
# Parsing and validation.


class _Problems:
    def __init__(self) -> None:
        self.items: list[Problem] = []

    def add(self, field_: str, value: object, message: str, fix: str = "") -> None:
        self.items.append(Problem(field=field_, value=value, message=message, fix=fix))


_MISSING = object()


def _check_keys(raw: Mapping, allowed: set[str], where: str, problems: _Problems) -> None:
    for key in raw:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
            fix = f"did you mean '{close[0]}'?" if close else f"allowed keys: {', '.join(sorted(allowed))}"
            problems.add(f"{where}.{key}" if where else str(key), raw[key], "unknown key", fix)


def _mapping(value: Any, where: str, problems: _Problems, *, required: bool = False) -> Mapping | None:
    if value is _MISSING or value is None:
        if required:
            problems.add(where, None, "is required", "add it (see platform.yaml for an example)")
        return None
    if not isinstance(value, Mapping):
        problems.add(where, value, f"must be a mapping, not {type(value).__name__}", "write key: value pairs")
        return None
    return value


def _int(
    value: Any,
    where: str,
    problems: _Problems,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    fix: str = "",
) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            problems.add(where, value, "must be a whole number", fix or "write an integer such as 1")
            return None
    if minimum is not None and value < minimum:
        problems.add(where, value, f"must be at least {minimum}", fix or f"use a value >= {minimum}")
        return None
    if maximum is None and value > MAX_INT:
        problems.add(where, value, f"is too large (at most {MAX_INT})", fix or f"use a value <= {MAX_INT}")
        return None
    if maximum is not None and value > maximum:
        problems.add(where, value, f"must be at most {maximum}", fix or f"use a value <= {maximum}")
        return None
    return value


def _number(value: Any, where: str, problems: _Problems) -> float | None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, float) and not math.isfinite(value))  # isfinite overflows on huge ints
    ):
        problems.add(where, value, "must be a number", "write a number such as 96")
        return None
    if value < 0:
        problems.add(where, value, "must not be negative", "use 0 or more")
        return None
    if value > MAX_NUMBER:
        problems.add(where, value, f"is too large (at most {MAX_NUMBER:,})", f"use a value <= {MAX_NUMBER}")
        return None
    return float(value)


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


_AMOUNT_KEYS = {"instances", "accelerators", "vcpu", "memory_gib", "mig"}


def _amount(value: Any, where: str, problems: _Problems) -> Amount | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        n = _int(value, where, problems, minimum=0, fix="write a whole number of instances, such as 1")
        return None if n is None else Amount(instances=n)
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


_TEAM_KEYS = {
    "name",
    "guarantee",
    "sharing",
    "borrow_limit_percent",
    "borrow_limit",
    "in_team_preemption",
    "fair_share_weight",
    "description",
}


def _team(raw: Any, index: int, problems: _Problems, *, guarantee_required: bool = True) -> TeamConfig | None:
    where = f"teams[{index}]"
    data = _mapping(raw, where, problems)
    if data is None:
        return None
    _check_keys(data, _TEAM_KEYS, where, problems)
    name = _str(data.get("name"), f"{where}.name", problems, fix="give the team a name such as team-a")
    if name:
        where = f"teams[{index}] ({name})"
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
    percent = None
    if data.get("borrow_limit_percent") is not None:
        percent = _int(
            data["borrow_limit_percent"],
            f"{where}.borrow_limit_percent",
            problems,
            minimum=-1,
            fix="use -1 for unlimited, or a percentage >= 0",
        )
        if percent is not None and not sharing.borrows:
            problems.add(
                f"{where}.borrow_limit_percent",
                percent,
                f"is set but sharing is {sharing.value}, which never borrows",
                "remove borrow_limit_percent, or set sharing: lend_and_borrow",
            )
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
    preempt = False
    if "in_team_preemption" in data:
        preempt = bool(_bool(data["in_team_preemption"], f"{where}.in_team_preemption", problems))
    weight = None
    if data.get("fair_share_weight") is not None:
        weight = _int(
            data["fair_share_weight"],
            f"{where}.fair_share_weight",
            problems,
            minimum=0,
            maximum=100,
            fix="HyperPod fair-share weights run from 0 to 100",
        )
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
    if name is None:
        return None
    return TeamConfig(
        name=name,
        guarantee=guarantee,
        sharing=sharing,
        borrow_limit_percent=percent,
        borrow_limit=borrow_limit,
        in_team_preemption=preempt,
        fair_share_weight=weight,
        description=description,
    )


def _batch(raw: Any, problems: _Problems) -> BatchQuotaConfig | None:
    data = _mapping(raw, BATCH, problems)
    if data is None:
        return None
    _check_keys(data, {"capacity", "queue_name", "service_environment_name", "priority"}, BATCH, problems)
    capacity = _capacity(data.get("capacity", _MISSING), f"{BATCH}.capacity", problems, ml=True)
    names = {}
    for key in ("queue_name", "service_environment_name"):
        if data.get(key) is not None:
            names[key] = _str(
                data[key],
                f"{BATCH}.{key}",
                problems,
                BATCH_NAME_PATTERN,
                "use up to 128 letters, digits, hyphens and underscores",
            )
    priority = 1
    if "priority" in data:
        value = _int(data["priority"], f"{BATCH}.priority", problems, minimum=0, maximum=1000)
        priority = 1 if value is None else value
    return BatchQuotaConfig(capacity=capacity, priority=priority, **names)


def _hyperpod(raw: Any, problems: _Problems) -> HyperPodConfig | None:
    data = _mapping(raw, HYPERPOD, problems)
    if data is None:
        return None
    _check_keys(
        data,
        {"cluster_arn", "capacity", "fair_share", "idle_resource_sharing", "priority_classes", "scheduler_config_name"},
        HYPERPOD,
        problems,
    )
    arn = data.get("cluster_arn")
    if not isinstance(arn, str) or not re.fullmatch(hp.CLUSTER_ARN_PATTERN, arn):
        problems.add(
            f"{HYPERPOD}.cluster_arn",
            arn,
            "is not a HyperPod cluster ARN",
            "write arn:aws:sagemaker:REGION:ACCOUNT:cluster/ID with a 12-digit account and a 12-character"
            " lower-case cluster id",
        )
        arn = ""
    capacity = _capacity(data.get("capacity", _MISSING), f"{HYPERPOD}.capacity", problems, ml=True)
    for it in list(capacity):
        if it not in hp.HYPERPOD_INSTANCE_TYPES:
            close = difflib.get_close_matches(it, sorted(hp.HYPERPOD_INSTANCE_TYPES), n=1)
            problems.add(
                f"{HYPERPOD}.capacity.{it}",
                it,
                "is not an instance type HyperPod accepts",
                f"did you mean '{close[0]}'?" if close else "use a HyperPod instance type such as ml.p5.48xlarge",
            )
            del capacity[it]
    flags = {}
    for key in ("fair_share", "idle_resource_sharing"):
        if key in data:
            value = _bool(data[key], f"{HYPERPOD}.{key}", problems)
            if value is not None:
                flags[key] = value
    classes: list[PriorityClass] = []
    raw_classes = data.get("priority_classes")
    if raw_classes is None:
        raw_classes = []
    if not isinstance(raw_classes, list):
        problems.add(f"{HYPERPOD}.priority_classes", raw_classes, "must be a list", "write - {name: x, weight: 50}")
        raw_classes = []
    if len(raw_classes) > hp.MAX_PRIORITY_CLASSES:
        problems.add(
            f"{HYPERPOD}.priority_classes",
            f"{len(raw_classes)} classes",
            f"HyperPod allows at most {hp.MAX_PRIORITY_CLASSES} priority classes",
            "merge classes with similar weights",
        )
    seen: set[str] = set()
    for i, entry in enumerate(raw_classes):
        where = f"{HYPERPOD}.priority_classes[{i}]"
        item = _mapping(entry, where, problems)
        if item is None:
            continue
        _check_keys(item, {"name", "weight"}, where, problems)
        name = _str(
            item.get("name"),
            f"{where}.name",
            problems,
            hp.PRIORITY_CLASS_NAME_PATTERN,
            "use lower-case letters, digits and hyphens, starting and ending with a letter or digit",
        )
        weight = _int(item.get("weight"), f"{where}.weight", problems, minimum=0, maximum=100)
        if name and name in seen:
            problems.add(f"{where}.name", name, "is a duplicate priority class", "give each class its own name")
        if name:
            seen.add(name)
        if name and weight is not None:
            classes.append(PriorityClass(name, weight))
    scheduler_name = None
    if data.get("scheduler_config_name") is not None:
        scheduler_name = _str(
            data["scheduler_config_name"],
            f"{HYPERPOD}.scheduler_config_name",
            problems,
            hp.RESOURCE_NAME_PATTERN,
            "use up to 63 letters, digits and hyphens",
        )
    return HyperPodConfig(
        cluster_arn=arn,
        capacity=capacity,
        priority_classes=tuple(classes),
        scheduler_config_name=scheduler_name,
        **flags,
    )


_FAIRSHARE_KEYS = {
    "capacity",
    "queue_name",
    "share_decay_seconds",
    "compute_reservation",
    "allocation_strategy",
    "spot",
    "min_instances",
    "job_attempts",
    "reclaim",
}
ALLOCATION_STRATEGIES = ("BEST_FIT_PROGRESSIVE", "SPOT_CAPACITY_OPTIMIZED", "SPOT_PRICE_CAPACITY_OPTIMIZED")


def _take_ints(
    raw: Mapping, where: str, specs: tuple[tuple[str, int, int], ...], problems: _Problems, into: dict[str, Any]
) -> None:
    """Copy the bounded whole numbers ``(key, minimum, maximum)`` that ``raw`` gives into ``into``."""
    for key, lo, hi in specs:
        if key in raw:
            value = _int(raw[key], f"{where}.{key}", problems, minimum=lo, maximum=hi)
            if value is not None:
                into[key] = value


def _fairshare(raw: Any, problems: _Problems) -> FairshareConfig | None:
    data = _mapping(raw, FAIRSHARE, problems)
    if data is None:
        return None
    _check_keys(data, _FAIRSHARE_KEYS, FAIRSHARE, problems)
    capacity = _capacity(data.get("capacity", _MISSING), f"{FAIRSHARE}.capacity", problems, ml=False)
    for it in list(capacity):
        if instances.lookup(it) is None:
            close = difflib.get_close_matches(it, instances.known_types(), n=1)
            problems.add(
                f"{FAIRSHARE}.capacity.{it}",
                it,
                "is not a GPU instance type this library knows",
                f"did you mean '{close[0]}'?" if close else f"use one of {', '.join(instances.known_types())}",
            )
            del capacity[it]
    kwargs: dict[str, Any] = {}
    if data.get("queue_name") is not None:
        kwargs["queue_name"] = _str(
            data["queue_name"], f"{FAIRSHARE}.queue_name", problems, BATCH_NAME_PATTERN, "use up to 128 letters, digits, - and _"
        )
    _take_ints(
        data,
        FAIRSHARE,
        (("share_decay_seconds", 0, 604800), ("compute_reservation", 0, 99), ("min_instances", 0, 10000), ("job_attempts", 1, 10)),
        problems,
        kwargs,
    )
    if "allocation_strategy" in data:
        if data["allocation_strategy"] in ALLOCATION_STRATEGIES:
            kwargs["allocation_strategy"] = data["allocation_strategy"]
        else:
            problems.add(
                f"{FAIRSHARE}.allocation_strategy",
                data["allocation_strategy"],
                "is not a Batch allocation strategy",
                f"use one of {', '.join(ALLOCATION_STRATEGIES)}",
            )
    if "spot" in data:
        spot = _bool(data["spot"], f"{FAIRSHARE}.spot", problems)
        if spot is not None:
            kwargs["spot"] = spot
    if kwargs.get("spot") and "allocation_strategy" not in data:
        # BEST_FIT_PROGRESSIVE, the on-demand default, is not a Spot strategy.
        kwargs["allocation_strategy"] = "SPOT_PRICE_CAPACITY_OPTIMIZED"
    if kwargs.get("spot") and kwargs.get("allocation_strategy") == "BEST_FIT_PROGRESSIVE":
        problems.add(
            f"{FAIRSHARE}.allocation_strategy",
            "BEST_FIT_PROGRESSIVE",
            "is not a Spot allocation strategy",
            "use SPOT_PRICE_CAPACITY_OPTIMIZED with spot: true",
        )
    reclaim = _mapping(data.get("reclaim"), f"{FAIRSHARE}.reclaim", problems)
    if reclaim is not None:
        where = f"{FAIRSHARE}.reclaim"
        _check_keys(
            reclaim,
            {"enabled", "schedule_minutes", "dry_run", "reclaim_after_seconds", "min_runtime_seconds"},
            where,
            problems,
        )
        rk: dict[str, Any] = {}
        for key in ("enabled", "dry_run"):
            if key in reclaim:
                value = _bool(reclaim[key], f"{where}.{key}", problems)
                if value is not None:
                    rk[key] = value
        _take_ints(
            reclaim,
            where,
            (("schedule_minutes", 1, 1440), ("reclaim_after_seconds", 0, 86400), ("min_runtime_seconds", 0, 86400)),
            problems,
            rk,
        )
        kwargs["reclaim"] = ReclaimConfig(**rk)
    return FairshareConfig(capacity=capacity, **kwargs)


# Sections owned by other modules: name -> "module:function". The function
# takes (raw_section, teams, add_problem) and returns the parsed section;
# add_problem(field, value, message, fix) records a problem.
EXTRA_SECTIONS: dict[str, str] = {
    "inference": "cdk_gpu_share.core.inference_config:parse_inference",
}

_TOP_KEYS = {"platform", "teams", BATCH, HYPERPOD, FAIRSHARE, *EXTRA_SECTIONS}


def _slice_units(amount: Amount) -> int:
    total = 0
    for profile, count in amount.mig:
        total += int(profile.split("-")[1].split("g")[0]) * count
    return total


def _check_backend(
    backend: str,
    section: Any,
    teams: list[TeamConfig],
    problems: _Problems,
) -> None:
    """Rules that need both the teams and one backend section."""
    members = [t for t in teams if t.guarantee_for(section.capacity)]
    # Sum of guarantees per instance type within the declared capacity.
    for it, count in section.capacity.items():
        info = instances.lookup(it)
        totals = {"instances": 0.0, "accelerators": 0.0, "vcpu": 0.0, "memory_gib": 0.0, "mig slices": 0.0}
        for team in members:
            a = team.guarantee.get(it)
            if a is None:
                continue
            totals["instances"] += a.instances or 0
            totals["accelerators"] += a.accelerators or 0
            totals["vcpu"] += a.vcpu or 0
            totals["memory_gib"] += a.memory_gib or 0
            totals["mig slices"] += _slice_units(a)
        limits = {"instances": count}
        if info is not None:
            limits.update(
                accelerators=count * info.gpus,
                vcpu=count * info.vcpus,
                memory_gib=count * info.memory_gib,
            )
            limits["mig slices"] = count * info.gpus * 7
        for dim, total in totals.items():
            if dim in limits and total > limits[dim] + 1e-9:
                problems.add(
                    f"{backend}.capacity.{it}",
                    count,
                    f"the teams' guarantees sum to {total:g} {dim} of {it}, above the {limits[dim]:g} the capacity"
                    " declares",
                    f"raise {backend}.capacity.{it} or lower the teams' guarantees",
                )
    if backend == BATCH:
        if len(members) > MAX_QUOTA_SHARES_PER_QUEUE:
            problems.add(
                f"{BATCH}",
                f"{len(members)} teams",
                f"a job queue holds at most {MAX_QUOTA_SHARES_PER_QUEUE} quota shares",
                "split the teams over two platforms or merge small teams",
            )
        for team in members:
            g = team.guarantee_for(section.capacity)
            where = f"teams ({team.name})"
            if len(g) > MAX_CAPACITY_LIMITS_PER_SHARE:
                problems.add(
                    f"{where}.guarantee",
                    sorted(g),
                    f"a quota share takes 1 to {MAX_CAPACITY_LIMITS_PER_SHARE} capacity limits, this names {len(g)}"
                    " instance types of batch_quota",
                    f"keep at most {MAX_CAPACITY_LIMITS_PER_SHARE} instance types",
                )
            for it, a in g.items():
                if not a.is_instances_only:
                    problems.add(
                        f"{where}.guarantee.{it}",
                        a.describe(),
                        "Batch quota shares count whole instances",
                        f"write {it}: N (a number of instances)",
                    )
                elif (a.instances or 0) < 1:
                    problems.add(
                        f"{where}.guarantee.{it}",
                        a.instances,
                        "a quota share's capacity limit must be at least 1 instance",
                        "guarantee at least 1, or remove the instance type",
                    )
            if not re.fullmatch(BATCH_NAME_PATTERN, team.name):
                problems.add(
                    f"{where}.name",
                    team.name,
                    "is not a valid quota share name",
                    "use up to 128 letters, digits, hyphens and underscores",
                )
            for it in team.borrow_limit:
                if it in section.capacity:
                    problems.add(
                        f"{where}.borrow_limit.{it}",
                        team.borrow_limit[it].describe(),
                        "Batch quota shares take only a percentage borrow limit",
                        "use borrow_limit_percent for batch_quota instance types",
                    )
    if backend == FAIRSHARE:
        from cdk_gpu_share.core.fairshare import share_identifier_problems

        for problem in share_identifier_problems(t.name for t in members):
            problems.items.append(problem)
    if backend == HYPERPOD:
        for team in members:
            where = f"teams ({team.name})"
            if not re.fullmatch(hp.TEAM_NAME_PATTERN, team.name) or len(team.name) > hp.MAX_TEAM_NAME_LENGTH:
                problems.add(
                    f"{where}.name",
                    team.name,
                    "is not valid on HyperPod, where a team becomes the Kubernetes namespace hyperpod-ns-<name>",
                    f"use at most {hp.MAX_TEAM_NAME_LENGTH} lower-case letters, digits and hyphens, starting and"
                    " ending with a letter or digit",
                )
            g = team.guarantee_for(section.capacity)
            entries = sum(1 + (len(a.mig) - 1 if len(a.mig) > 1 else 0) for a in g.values())
            if entries > hp.MAX_COMPUTE_QUOTA_RESOURCES:
                problems.add(
                    f"{where}.guarantee",
                    sorted(g),
                    f"a compute quota takes at most {hp.MAX_COMPUTE_QUOTA_RESOURCES} resource entries",
                    "guarantee fewer instance types",
                )
            pct = team.borrow_limit_percent
            if pct is not None and not (0 <= pct <= HYPERPOD_MAX_BORROW_PERCENT):
                problems.add(
                    f"{where}.borrow_limit_percent",
                    pct,
                    f"HyperPod borrow limits run from 0 to {HYPERPOD_MAX_BORROW_PERCENT} percent (no -1)",
                    "give a percentage, or leave it out for the service default of 50",
                )
            for it in team.borrow_limit:
                if it not in section.capacity and it.startswith("ml."):
                    problems.add(
                        f"{where}.borrow_limit.{it}",
                        it,
                        "names an instance type the hyperpod capacity does not declare",
                        f"declare it in hyperpod.capacity or remove it; declared: {', '.join(section.capacity)}",
                    )
            limits = {it: a for it, a in team.borrow_limit.items() if it in section.capacity}
            for part, amounts in (("guarantee", g), ("borrow_limit", limits)):
                for it, a in amounts.items():
                    info = instances.lookup(it)
                    for profile, _ in a.mig:
                        if info is None or not _mig_fits_gpu(profile, info.gpu_model):
                            problems.add(
                                f"{where}.{part}.{it}.mig.{profile}",
                                profile,
                                f"is not a MIG profile of {it}"
                                + (f" ({info.gpu_model})" if info else " (no MIG support known)"),
                                "run `gpu-share mig layouts --instance-type " + it + "` for the profiles it has",
                            )


def check_backend(backend: str, section: Any, teams: list[TeamConfig]) -> list[Problem]:
    """The problems of ``teams`` on one backend section (used by the constructs)."""
    problems = _Problems()
    _check_backend(backend, section, teams, problems)
    return problems.items


def _mig_fits_gpu(profile: str, gpu_model: str) -> bool:
    try:
        mig = importlib.import_module("cdk_gpu_share.core.mig")
    except ModuleNotFoundError:  # pragma: no cover - the MIG catalog ships with the package
        return True
    try:
        mig.profile(gpu_model, profile)
    except Exception:
        return False
    return True


def parse_config(raw: Any, *, source: str | None = None) -> PlatformConfig:
    """Validate a platform config mapping; raise ConfigError listing every problem."""
    problems = _Problems()
    data = _mapping(raw, "config", problems, required=True)
    if data is None:
        raise ConfigError(problems.items, source=source)
    _check_keys(data, _TOP_KEYS, "", problems)

    name = "gpu-share"
    platform = _mapping(data.get("platform"), "platform", problems)
    if platform is not None:
        _check_keys(platform, {"name"}, "platform", problems)
        if "name" in platform:
            name = (
                _str(
                    platform["name"],
                    "platform.name",
                    problems,
                    PLATFORM_NAME_PATTERN,
                    "start with a letter; use up to 40 letters, digits and hyphens",
                )
                or name
            )

    teams: list[TeamConfig] = []
    raw_teams = data.get("teams")
    if not isinstance(raw_teams, list) or not raw_teams:
        problems.add("teams", raw_teams, "must be a non-empty list", "list at least one team with a name and a guarantee")
        raw_teams = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(raw_teams):
        # Inference-only platforms have teams (for endpoint ownership) without guarantees.
        team = _team(entry, i, problems, guarantee_required=any(data.get(k) is not None for k in BACKENDS))
        if team is None:
            continue
        if team.name in seen:
            problems.add(
                f"teams[{i}].name",
                team.name,
                f"duplicates the name of teams[{seen[team.name]}]",
                "give every team a unique name",
            )
            continue
        seen[team.name] = i
        teams.append(team)

    batch = _batch(data.get(BATCH), problems)
    hyperpod = _hyperpod(data.get(HYPERPOD), problems)
    fairshare = _fairshare(data.get(FAIRSHARE), problems)
    sections = {BATCH: batch, HYPERPOD: hyperpod, FAIRSHARE: fairshare}
    if not any(sections.values()) and "inference" not in data:
        problems.add(
            "config",
            sorted(str(k) for k in data),
            "declares no backend",
            f"add one of {', '.join(BACKENDS)} (see platform.yaml)",
        )

    # An ml. type declared by both SageMaker backends would be counted twice.
    if batch and hyperpod:
        for it in set(batch.capacity) & set(hyperpod.capacity):
            problems.add(
                f"{HYPERPOD}.capacity.{it}",
                it,
                "is declared by batch_quota too; a guarantee must map to one fleet",
                "declare each instance type in one backend only",
            )

    declared = {it for s in sections.values() if s is not None for it in s.capacity}
    # Types declared with a bad count are reported there; don't report every team's guarantee too.
    for key in BACKENDS:
        section_raw = data.get(key)
        if isinstance(section_raw, Mapping) and isinstance(section_raw.get("capacity"), Mapping):
            declared |= {str(k) for k in section_raw["capacity"]}
    for team in teams:
        for it in team.guarantee:
            if it not in declared:
                problems.add(
                    f"teams ({team.name}).guarantee.{it}",
                    it,
                    "names an instance type that no backend declares in its capacity",
                    "add it to the capacity of batch_quota, hyperpod (ml. types) or fairshare (EC2 types)",
                )
    for backend, section in sections.items():
        if section is not None:
            _check_backend(backend, section, teams, problems)

    inference = None
    for key, target in EXTRA_SECTIONS.items():
        if data.get(key) is None:
            continue
        module_name, func_name = target.split(":")
        try:
            parser: Callable[..., Any] = getattr(importlib.import_module(module_name), func_name)
        except ModuleNotFoundError:
            problems.add(key, "...", "is not supported by this version of cdk-gpu-share", "remove the section")
            continue
        inference = parser(data[key], teams, problems.add)

    if problems.items:
        raise ConfigError(problems.items, source=source)
    return PlatformConfig(
        name=name,
        teams=tuple(teams),
        batch_quota=batch,
        hyperpod=hyperpod,
        fairshare=fairshare,
        inference=inference,
        source=source,
    )


def load_config(path: str | Path) -> PlatformConfig:
    """Read and validate a platform config file (YAML or JSON)."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            Problem("config", str(p), "file not found", "pass the path of a platform config, such as platform.yaml"),
        ) from None
    except OSError as exc:
        raise ConfigError(Problem("config", str(p), f"cannot be read: {exc.strerror}", "check the path")) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            Problem("config", str(p), f"is not UTF-8 text (byte {exc.start})", "save the file as UTF-8 YAML"),
        ) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "the file"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(
            Problem(f"{p.name} {where}", "YAML", f"is not valid YAML: {problem}", "fix the indentation or quoting there"),
            source=str(p),
        ) from None
    return parse_config(raw, source=str(p))
