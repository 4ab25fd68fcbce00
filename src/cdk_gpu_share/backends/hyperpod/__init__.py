"""SageMaker HyperPod task governance on one EKS-orchestrated cluster (``hyperpod``).

Each team is a compute quota (a Kubernetes namespace ``hyperpod-ns-<team>``) with its
guarantee in instances, accelerators, vCPU, memory or MIG partitions; the service lends,
borrows and preempts by itself, so no reclaim planner runs.
"""

from __future__ import annotations

import difflib
import importlib
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from cdk_gpu_share.core.catalog import hyperpod_schema as hp
from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.configuration import hyperpod_regions
from cdk_gpu_share.core.configuration import parse as C
from cdk_gpu_share.core.configuration import schema as S
from cdk_gpu_share.core.configuration.backends import Backend, SectionCheck
from cdk_gpu_share.core.configuration.parse import HyperPodConfig, PlatformConfig, PriorityClass, TeamConfig
from cdk_gpu_share.core.errors import Problem
from cdk_gpu_share.core.plan import amount_text
from cdk_gpu_share.core.policy.borrowing import instance_equivalent
from cdk_gpu_share.core.text import plural
from cdk_gpu_share.core.validation import Problems

KEY = C.HYPERPOD
#: The keys of the ``hyperpod`` section.
SECTION_KEYS = frozenset({"cluster_arn", "capacity", "fair_share", "idle_resource_sharing", "priority_classes",
                          "scheduler_config_name", "eks_cluster_arn"})
#: A compute quota without BorrowLimit gets the service default of 50 percent of its guarantee.
DEFAULT_BORROW_PERCENT = 50
#: The largest BorrowLimit a compute quota takes, in percent.
MAX_BORROW_PERCENT = 500
EKS_CLUSTER_ARN_PATTERN = r"arn:aws[a-z-]*:eks:[a-z0-9-]+:\d{12}:cluster/[A-Za-z0-9][A-Za-z0-9_-]{0,99}"


def _cluster_arn(value: Any, problems: Problems) -> str:
    if not isinstance(value, str) or not re.fullmatch(hp.CLUSTER_ARN_PATTERN, value):
        problems.add(f"{KEY}.cluster_arn", value, "is not a HyperPod cluster ARN",
                     "write arn:aws:sagemaker:REGION:ACCOUNT:cluster/ID with a 12-digit account and a 12-character"
                     " lower-case cluster id")
        return ""
    return value


def _capacity(value: Any, problems: Problems) -> dict[str, int]:
    """The declared instance types HyperPod accepts, each refusal with the closest one it does."""
    capacity = C.read_capacity(value, f"{KEY}.capacity", problems, ml=True)
    for it in list(capacity):
        if it not in hp.HYPERPOD_INSTANCE_TYPES:
            close = difflib.get_close_matches(it, sorted(hp.HYPERPOD_INSTANCE_TYPES), n=1)
            problems.add(f"{KEY}.capacity.{it}", it, "is not an instance type HyperPod accepts",
                         f"did you mean '{close[0]}'?" if close else "use a HyperPod instance type such as ml.p5.48xlarge")
            del capacity[it]
    C.drop_uncatalogued(capacity, KEY, problems, sagemaker=True)
    return capacity


def _priority_class(entry: Any, where: str, seen: set[str], problems: Problems) -> PriorityClass | None:
    item = C.read_object(entry, where, ("name", "weight"), problems)
    if item is None:
        return None
    name = C.read_str(item.get("name"), f"{where}.name", problems, hp.PRIORITY_CLASS_NAME_PATTERN,
                      "use lower-case letters, digits and hyphens, starting and ending with a letter or digit")
    weight = C.read_int(item.get("weight"), f"{where}.weight", problems, minimum=0, maximum=100)
    if name and name in seen:
        problems.add(f"{where}.name", name, "is a duplicate priority class", "give each class its own name")
    if name:
        seen.add(name)
    return PriorityClass(name, weight) if name and weight is not None else None


def _priority_classes(raw: Any, problems: Problems) -> tuple[PriorityClass, ...]:
    where = f"{KEY}.priority_classes"
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        problems.add(where, raw, "must be a list", "write - {name: x, weight: 50}")
        raw = []
    if len(raw) > hp.MAX_PRIORITY_CLASSES:
        problems.add(where, f"{len(raw)} classes", f"HyperPod allows at most {hp.MAX_PRIORITY_CLASSES} priority classes",
                     "merge classes with similar weights")
    seen: set[str] = set()
    classes = (_priority_class(entry, f"{where}[{i}]", seen, problems) for i, entry in enumerate(raw))
    return tuple(c for c in classes if c is not None)


def _eks_cluster_arn(value: Any, problems: Problems) -> str | None:
    """``hyperpod.eks_cluster_arn``: optional; teams get namespace access on this cluster."""
    if value is None:
        return None
    if not isinstance(value, str) or not re.fullmatch(EKS_CLUSTER_ARN_PATTERN, value):
        problems.add(f"{KEY}.eks_cluster_arn", value, "is not an EKS cluster ARN",
                     "write arn:aws:eks:REGION:ACCOUNT:cluster/NAME (the Orchestrator.Eks.ClusterArn of"
                     " `aws sagemaker describe-cluster`)")
        return None
    return value


#: Descriptions of the section and its keys: the words an editor shows on hover (``gpu-share schema``).
DESCRIPTIONS: dict[str, dict[str, str]] = {
    "": {KEY: "SageMaker HyperPod task governance on one EKS-orchestrated cluster."},
    KEY: {
        "cluster_arn": "ARN of the HyperPod cluster (arn:aws:sagemaker:REGION:ACCOUNT:cluster/ID).",
        "capacity": "Instances per HyperPod instance type in the cluster.",
        "fair_share": "Fair-share scheduling across teams. Default: true.",
        "idle_resource_sharing": "Teams may lend idle compute. Default: true.",
        "priority_classes": "Up to 10 task priority classes: {name, weight 0..100}.",
        "scheduler_config_name": "Name of the cluster scheduler config. Default: derived from the platform name.",
        "eks_cluster_arn": "ARN of the cluster's EKS cluster: each team gets an access entry scoped to its namespace."
        " Default: none (no access entries).",
    },
}


def parse(raw: Any, problems: Problems) -> HyperPodConfig | None:
    """The ``hyperpod`` section, or None when it is absent or not a mapping."""
    data = C.read_object(raw, KEY, SECTION_KEYS, problems)
    if data is None:
        return None
    arn = _cluster_arn(data.get("cluster_arn"), problems)
    capacity = _capacity(data.get("capacity", C.MISSING), problems)
    flags = {}
    for key in ("fair_share", "idle_resource_sharing"):
        if key in data:
            value = C.read_bool(data[key], f"{KEY}.{key}", problems)
            if value is not None:
                flags[key] = value
    classes = _priority_classes(data.get("priority_classes"), problems)
    scheduler_name = None
    if data.get("scheduler_config_name") is not None:
        scheduler_name = C.read_str(data["scheduler_config_name"], f"{KEY}.scheduler_config_name", problems,
                                    hp.RESOURCE_NAME_PATTERN, "use up to 63 letters, digits and hyphens")
    eks_arn = _eks_cluster_arn(data.get("eks_cluster_arn"), problems)
    return HyperPodConfig(eks_cluster_arn=eks_arn, cluster_arn=arn, capacity=capacity, priority_classes=classes,
                          scheduler_config_name=scheduler_name, **flags)


# -- rules: each names the field, the value and the fix.


def _mig_fits_gpu(profile: str, gpu_model: str) -> bool:
    mig = importlib.import_module("cdk_gpu_share.core.catalog.mig")
    try:
        mig.profile(gpu_model, profile)
    except Exception:
        return False
    return True


def _namespace_name(team: TeamConfig, where: str) -> Iterator[Problem]:
    # The name is a DNS-1123 label already (one rule for every backend); the prefix shortens it.
    if len(team.name) > hp.MAX_TEAM_NAME_LENGTH:
        yield Problem(f"{where}.name", team.name,
                      "is too long for HyperPod, where a team becomes the Kubernetes namespace hyperpod-ns-<name> (at most"
                      " 63 characters)",
                      f"use at most {hp.MAX_TEAM_NAME_LENGTH} characters")


def _resource_entries(where: str, guarantee: Mapping[str, C.Amount]) -> Iterator[Problem]:
    entries = sum(1 + (len(a.mig) - 1 if len(a.mig) > 1 else 0) for a in guarantee.values())
    if entries > hp.MAX_COMPUTE_QUOTA_RESOURCES:
        yield Problem(f"{where}.guarantee", sorted(guarantee),
                      f"a compute quota takes at most {hp.MAX_COMPUTE_QUOTA_RESOURCES} resource entries",
                      "guarantee fewer instance types")


def _borrow_percent(team: TeamConfig, where: str) -> Iterator[Problem]:
    pct = team.borrow_limit_percent
    if pct is not None and not (0 <= pct <= MAX_BORROW_PERCENT):
        yield Problem(f"{where}.borrow_limit_percent", pct,
                      f"HyperPod borrow limits run from 0 to {MAX_BORROW_PERCENT} percent (no -1)",
                      f"give a percentage, or leave it out for the service default of {DEFAULT_BORROW_PERCENT}")


def _borrow_limit_types(c: SectionCheck, team: TeamConfig, where: str) -> Iterator[Problem]:
    for it in team.borrow_limit:
        if it not in c.section.capacity and it.startswith("ml."):
            yield Problem(f"{where}.borrow_limit.{it}", it, "names an instance type the hyperpod capacity does not declare",
                          f"declare it in hyperpod.capacity or remove it; declared: {', '.join(c.section.capacity)}")


def _mig_profiles(c: SectionCheck, team: TeamConfig, where: str, guarantee: Mapping[str, C.Amount]) -> Iterator[Problem]:
    limits = {it: a for it, a in team.borrow_limit.items() if it in c.section.capacity}
    for part, amounts in (("guarantee", guarantee), ("borrow_limit", limits)):
        for it, a in amounts.items():
            info = instances.lookup(it)
            for profile, _ in a.mig:
                if info is None or not _mig_fits_gpu(profile, info.gpu_model):
                    yield Problem(f"{where}.{part}.{it}.mig.{profile}", profile,
                                  f"is not a MIG profile of {it}" + (f" ({info.gpu_model})" if info else " (no MIG support known)"),
                                  "run `gpu-share mig layouts --instance-type " + it + "` for the profiles it has")


def compute_quotas(c: SectionCheck) -> Iterator[Problem]:
    """Each team's compute quota: a namespace name, at most 10 resource entries, a borrow limit
    HyperPod takes, and MIG profiles of the declared instance types."""
    for team in c.members:
        where = c.paths[team.name]
        guarantee = team.guarantee_for(c.section.capacity)
        if team.name not in c.refused:
            yield from _namespace_name(team, where)
        yield from _resource_entries(where, guarantee)
        yield from _borrow_percent(team, where)
        yield from _borrow_limit_types(c, team, where)
        yield from _mig_profiles(c, team, where, guarantee)


# -- what `gpu-share summary` shows of the synthesized resources.


#: CloudFormation's spelling of a sharing strategy, as the config spells it.
_SHARING = {s.hyperpod_strategy: s.value for s in C.Sharing}
#: Units of a compute quota resource.
_UNITS = {"Count": "instance", "Accelerators": "accelerator", "VCpu": "vCPU", "MemoryInGiB": "GiB"}


def describe_resource(resource: Mapping[str, Any]) -> list[str]:
    """A compute quota of a synthesized template, in one line: its resources, sharing and borrow
    limit, and what that lets the team borrow, worded as ``plan``."""
    if resource["Type"] != "AWS::SageMaker::ComputeQuota":
        return []
    cfg = resource.get("Properties", {}).get("ComputeQuotaConfig", {})
    parts = []
    for r in cfg.get("ComputeQuotaResources", []):
        amounts = [plural(r[k], unit) for k, unit in _UNITS.items() if k in r]
        if "AcceleratorPartition" in r:
            part = r["AcceleratorPartition"]
            amounts.append(f"{plural(part['Count'], 'MIG partition')} {part['Type']}")
        parts.append(f"{r['InstanceType']}: {', '.join(amounts)}")
    sharing = cfg.get("ResourceSharingConfig", {})
    strategy = _SHARING.get(sharing.get("Strategy"), sharing.get("Strategy"))
    borrow = sharing.get("BorrowLimit")
    extra = f", borrow limit {borrow}% of the guarantee" if borrow is not None else ""
    if sharing.get("Strategy") == C.Sharing.LEND_AND_BORROW.hyperpod_strategy:
        may = _may_borrow(cfg)
        if may:
            extra += ": may borrow " + "; ".join(may)
    team = resource.get("Properties", {}).get("ComputeQuotaTarget", {}).get("TeamName")
    return [f"{team}: HyperPod compute quota, {'; '.join(parts)}, {strategy}{extra}"]


def _amounts(entries: Sequence[Mapping[str, Any]]) -> dict[str, C.Amount]:
    """Compute quota resources (or absolute borrow limits) as an amount per instance type."""
    fields: dict[str, dict[str, Any]] = {}
    keys = {"Count": "instances", "Accelerators": "accelerators", "VCpu": "vcpu", "MemoryInGiB": "memory_gib"}
    for r in entries:
        it = r.get("InstanceType")
        if not isinstance(it, str):
            continue
        f = fields.setdefault(it, {"mig": {}})
        f.update({keys[k]: r[k] for k in keys if k in r})
        if "AcceleratorPartition" in r:
            f["mig"][r["AcceleratorPartition"]["Type"]] = r["AcceleratorPartition"]["Count"]
    return {it: C.Amount(**f) for it, f in fields.items()}


def _may_borrow(cfg: Mapping[str, Any]) -> list[str]:
    """What a compute quota lets its team borrow per instance type: the least of its percentage
    of the guarantee and its absolute limit (``plan``'s reading and wording)."""

    sharing = cfg.get("ResourceSharingConfig", {})
    percent = sharing.get("BorrowLimit", DEFAULT_BORROW_PERCENT)
    absolute = _amounts(sharing.get("AbsoluteBorrowLimits", []))
    out = []
    for it, amount in _amounts(cfg.get("ComputeQuotaResources", [])).items():
        caps = [instance_equivalent(it, amount) * percent / 100]
        if it in absolute:
            caps.append(instance_equivalent(it, absolute[it]))
        out.append(f"{amount_text(min(caps), it)} of {it}")
    return out


def deployed_guarantee(resource: Mapping[str, Any]) -> dict[str, float]:
    """A compute quota's guarantee: instances per type, as ``plan`` counts a part of an instance."""
    if resource["Type"] != "AWS::SageMaker::ComputeQuota":
        return {}

    cfg = resource.get("Properties", {}).get("ComputeQuotaConfig", {})
    return {it: instance_equivalent(it, a) for it, a in _amounts(cfg.get("ComputeQuotaResources", [])).items()}


def schema() -> dict[str, Any]:
    priority_class = {"type": "object", "additionalProperties": False, "required": ["name", "weight"],
                      "properties": {"name": {"type": "string", "pattern": hp.PRIORITY_CLASS_NAME_PATTERN},
                                     "weight": S.schema_int(0, 100)}}
    return S.schema_object(KEY, {
        "cluster_arn": {"type": "string", "pattern": hp.CLUSTER_ARN_PATTERN},
        "capacity": S.schema_capacity("", DESCRIPTIONS[KEY]["capacity"], enum=sorted(hp.HYPERPOD_INSTANCE_TYPES)),
        "fair_share": {"type": "boolean", "default": True},
        "idle_resource_sharing": {"type": "boolean", "default": True},
        "priority_classes": {"type": "array", "maxItems": hp.MAX_PRIORITY_CLASSES, "items": priority_class},
        "scheduler_config_name": {"type": "string", "pattern": hp.RESOURCE_NAME_PATTERN},
        "eks_cluster_arn": {"type": "string", "pattern": f"^{EKS_CLUSTER_ARN_PATTERN}$"},
    }, required=["cluster_arn", "capacity"])


def _arn_region(arn: str) -> str | None:
    """The region an ARN names (``arn:aws:sagemaker:REGION:...``), or None."""
    parts = arn.split(":")
    return (parts[3] or None) if len(parts) > 3 else None


class HyperPodSpec(Backend):
    """What every layer asks of HyperPod task governance (see :class:`~cdk_gpu_share.core.configuration.backends.BackendSpec`)."""

    key = KEY
    strategy = "SageMaker HyperPod task governance"
    capacity_hint = f"{KEY} (ml. types)"
    default_borrow_percent = DEFAULT_BORROW_PERCENT
    section_keys = {KEY: SECTION_KEYS}
    descriptions = DESCRIPTIONS
    construct = "cdk_gpu_share.constructs.shared_gpu_quota:SharedGpuQuota"
    rules = (compute_quotas,)
    resource_labels = (("AWS::SageMaker::ClusterSchedulerConfig", "HyperPod cluster policies"),
                       ("AWS::SageMaker::ComputeQuota", "HyperPod compute quotas"))
    describe_resource = staticmethod(describe_resource)
    deployed_guarantee = staticmethod(deployed_guarantee)
    parse = staticmethod(parse)
    schema = staticmethod(schema)
    to_mapping = staticmethod(C.section_mapping)

    def idle_costs(self, config: PlatformConfig, section: HyperPodConfig) -> list[dict[str, str]]:
        return [{"backend": KEY, "resource": "HyperPod cluster (not created here)",
                 "what": f"the cluster {section.cluster_arn.rsplit('/', 1)[-1]} bills its instances whether "
                         "or not a team uses its quota; this platform adds only policies, which cost nothing"}]

    def plan_team_extras(self, section: HyperPodConfig, teams: Sequence[TeamConfig]) -> dict[str, Any]:
        note = hyperpod_regions.region_note(_arn_region(section.cluster_arn), teams)
        return {} if note is None else {"regions": note}

    def in_team_preemption_text(self, team: TeamConfig) -> str:
        if team.in_team_preemption is None:
            return "LowerPriority (HyperPod default)"
        return "LowerPriority" if team.in_team_preemption else "Never"


SPEC = HyperPodSpec()


# -- a team's compute quota as the template deploys it and the switcher writes it


def _quota_config(*, resources: list[dict[str, Any]], strategy: str, borrow_limit: int | None,
                  absolute_borrow_limits: list[dict[str, Any]] | None, preempt_team_tasks: str | None) -> dict[str, Any]:
    """A compute quota's ``ComputeQuotaConfig``, as CloudFormation and ``UpdateComputeQuota`` take it."""
    sharing: dict[str, Any] = {"Strategy": strategy}
    if borrow_limit is not None:
        sharing["BorrowLimit"] = borrow_limit
    if absolute_borrow_limits:
        sharing["AbsoluteBorrowLimits"] = absolute_borrow_limits
    quota_config: dict[str, Any] = {"ComputeQuotaResources": resources, "ResourceSharingConfig": sharing}
    if preempt_team_tasks is not None:  # omitted: HyperPod's default, LowerPriority
        quota_config["PreemptTeamTasks"] = preempt_team_tasks
    return quota_config


def _team_quota(team: TeamConfig, capacity: Mapping[str, Any]) -> dict[str, Any]:
    """What ``team``'s values make of its compute quota's configuration (see :func:`_quota_config`)."""
    absolute = _quota_resources({it: a for it, a in team.borrow_limit.items() if it in capacity})
    return {"resources": _quota_resources(team.guarantee_for(capacity)),
            "strategy": team.sharing.hyperpod_strategy,
            "borrow_limit": team.borrow_limit_percent if team.sharing.borrows else None,
            "absolute_borrow_limits": absolute if team.sharing.borrows else None,
            "preempt_team_tasks": None if team.in_team_preemption is None
            else ("LowerPriority" if team.in_team_preemption else "Never")}


def quota_values(team: TeamConfig, capacity: Mapping[str, Any]) -> dict[str, Any]:
    """``team``'s compute quota as ``UpdateComputeQuota`` writes it (``ComputeQuotaConfig``): what
    the template deploys, and what the quota window switcher writes for the team's values in a
    window."""
    return {"ComputeQuotaConfig": _quota_config(**_team_quota(team, capacity))}


def _quota_resources(amounts: dict) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for it, a in sorted(amounts.items()):
        base: dict[str, Any] = {"InstanceType": it}
        if a.instances is not None:
            base["Count"] = a.instances
        if a.accelerators is not None:
            base["Accelerators"] = a.accelerators
        if a.vcpu is not None:
            base["VCpu"] = a.vcpu
        if a.memory_gib is not None:
            base["MemoryInGiB"] = a.memory_gib
        if not a.mig:
            out.append(base)
            continue
        # One entry per MIG profile: the schema takes one AcceleratorPartition per entry.
        for i, (profile, count) in enumerate(a.mig):
            entry = dict(base) if i == 0 else {"InstanceType": it}
            entry["AcceleratorPartition"] = {"Type": profile, "Count": count}
            out.append(entry)
    return out


__all__ = ["DEFAULT_BORROW_PERCENT", "KEY", "SECTION_KEYS", "SPEC", "HyperPodSpec", "compute_quotas", "parse", "quota_values", "schema"]
