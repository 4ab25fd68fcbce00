"""AWS Batch quota management for SageMaker Training jobs (``batch_quota``).

One job queue on a SageMaker Training service environment; each team is a quota share
whose capacity limits are its guarantee in whole instances, with the Batch borrow
percentage and preemption of borrowed capacity done by the service.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from cdk_gpu_share.core.configuration import parse as C
from cdk_gpu_share.core.configuration import schema as S
from cdk_gpu_share.core.configuration.backends import Backend, SectionCheck
from cdk_gpu_share.core.configuration.parse import BatchQuotaConfig, TeamConfig
from cdk_gpu_share.core.errors import Problem
from cdk_gpu_share.core.plan import amount_text
from cdk_gpu_share.core.text import plural
from cdk_gpu_share.core.validation import Problems

KEY = C.BATCH
#: The keys of the ``batch_quota`` section.
SECTION_KEYS = frozenset({"capacity", "queue_name", "service_environment_name", "priority", "monitor"})
#: The keys of ``batch_quota.monitor``, and the bounds of its whole numbers.
MONITOR_KEYS = frozenset({"enabled", "schedule_minutes", "guarantee_wait_alarm_seconds"})
MONITOR_INT_RANGES = (("schedule_minutes", 1, 60), ("guarantee_wait_alarm_seconds", 60, 86400))
#: A job queue holds at most this many quota shares, each at most this many capacity limits.
MAX_QUOTA_SHARES_PER_QUEUE = 20
MAX_CAPACITY_LIMITS_PER_SHARE = 5
DEFAULT_PRIORITY = 1
#: A quota share's capacity limit is at least one instance: the least guarantee of a team.
LEAST_GUARANTEE_INSTANCES = 1


#: Descriptions of the section and its keys: the words an editor shows on hover (``gpu-share schema``).
DESCRIPTIONS: dict[str, dict[str, str]] = {
    "": {KEY: "AWS Batch quota management for SageMaker Training jobs."},
    KEY: {
        "capacity": "Instances per SageMaker instance type (ml.*) in the service environment.",
        "queue_name": "Job queue name. Default: <platform>-training.",
        "service_environment_name": "Service environment name. Default: derived from the platform name.",
        "priority": "Job queue priority, 0 to 1000. Default: 1.",
        "monitor": "The share monitor: per-team metrics, dashboard and alarms of the queue.",
    },
    "batch_quota_monitor": {
        "enabled": "Deploy the share monitor. Default: true.",
        "schedule_minutes": "Minutes between two readings of the queue, 1 to 60. Default: 1.",
        "guarantee_wait_alarm_seconds": "A team's alarm fires when one of its jobs that would be within the"
        " team's guarantee (what it uses plus what the job asks for is at most the guarantee) waited this long,"
        " 60 to 86400. Default: 900.",
    },
}


def parse(raw: Any, problems: Problems) -> BatchQuotaConfig | None:
    """The ``batch_quota`` section, or None when it is absent or not a mapping."""
    section = C.read_section(raw, KEY, SECTION_KEYS, problems, sagemaker=True)
    if section is None:
        return None
    data, capacity = section
    names = {}
    for key in ("queue_name", "service_environment_name"):
        if data.get(key) is not None:
            names[key] = C.read_str(data[key], f"{KEY}.{key}", problems, C.BATCH_NAME_PATTERN,
                                    "use up to 128 letters, digits, hyphens and underscores")
    priority = DEFAULT_PRIORITY
    if "priority" in data:
        value = C.read_int(data["priority"], f"{KEY}.priority", problems, minimum=0, maximum=1000)
        priority = DEFAULT_PRIORITY if value is None else value
    extra: dict[str, Any] = dict(names)
    monitor = _monitor(data.get("monitor"), problems) if data.get("monitor") is not None else None
    if monitor is not None:
        extra["monitor"] = monitor
    return BatchQuotaConfig(capacity=capacity, priority=priority, **extra)


def _monitor(raw: Any, problems: Problems) -> C.ShareMonitorConfig | None:
    where = f"{KEY}.monitor"
    data = C.read_object(raw, where, MONITOR_KEYS, problems)
    if data is None:
        return None
    kwargs: dict[str, Any] = {}
    if "enabled" in data:
        enabled = C.read_bool(data["enabled"], f"{where}.enabled", problems)
        if enabled is not None:
            kwargs["enabled"] = enabled
    for name, lo, hi in MONITOR_INT_RANGES:
        if name in data:
            value = C.read_int(data[name], f"{where}.{name}", problems, minimum=lo, maximum=hi)
            if value is not None:
                kwargs[name] = value
    return C.ShareMonitorConfig(**kwargs)


# -- rules: each names the field, the value and the fix.


def quota_share_count(c: SectionCheck) -> Iterator[Problem]:
    """A job queue takes at most 20 quota shares: one per team."""
    if len(c.members) > MAX_QUOTA_SHARES_PER_QUEUE:
        yield Problem(KEY, f"{len(c.members)} teams", f"a job queue holds at most {MAX_QUOTA_SHARES_PER_QUEUE} quota shares",
                      "split the teams over two platforms or merge small teams")


def _capacity_limit_count(where: str, guarantee: dict[str, C.Amount]) -> Iterator[Problem]:
    if len(guarantee) > MAX_CAPACITY_LIMITS_PER_SHARE:
        yield Problem(f"{where}.guarantee", sorted(guarantee),
                      f"a quota share takes 1 to {MAX_CAPACITY_LIMITS_PER_SHARE} capacity limits, this names"
                      f" {len(guarantee)} instance types of batch_quota",
                      f"keep at most {MAX_CAPACITY_LIMITS_PER_SHARE} instance types")


def _whole_instances(where: str, guarantee: dict[str, C.Amount]) -> Iterator[Problem]:
    for it, a in guarantee.items():
        if not a.is_instances_only:
            yield Problem(f"{where}.guarantee.{it}", a.describe(), "Batch quota shares count whole instances",
                          f"write {it}: N (a number of instances)")
        elif (a.instances or 0) < LEAST_GUARANTEE_INSTANCES:
            yield Problem(f"{where}.guarantee.{it}", a.instances,
                          f"a quota share's capacity limit must be at least {LEAST_GUARANTEE_INSTANCES} instance",
                          f"guarantee at least {LEAST_GUARANTEE_INSTANCES}, or remove the instance type")


def _percent_borrow_limit_only(c: SectionCheck, team: TeamConfig, where: str) -> Iterator[Problem]:
    for it in team.borrow_limit:
        if it in c.section.capacity:
            yield Problem(f"{where}.borrow_limit.{it}", team.borrow_limit[it].describe(),
                          "Batch quota shares take only a percentage borrow limit",
                          "use borrow_limit_percent for batch_quota instance types")


def quota_shares(c: SectionCheck) -> Iterator[Problem]:
    """Each team's quota share: 1 to 5 capacity limits of whole instances and a percent borrow limit (its
    name is the team's, a DNS-1123 label, which a quota share name always holds)."""
    for team in c.members:
        where = c.paths[team.name]
        guarantee = team.guarantee_for(c.section.capacity)
        yield from _capacity_limit_count(where, guarantee)
        yield from _whole_instances(where, guarantee)
        yield from _percent_borrow_limit_only(c, team, where)


# -- what `gpu-share summary` shows of the synthesized resources.


#: CloudFormation's spelling of a sharing strategy, as the config spells it.
_SHARING = {s.batch_strategy: s.value for s in C.Sharing}


def describe_resource(resource: Mapping[str, Any]) -> list[str]:
    """A quota share of a synthesized template, in one line: its limits, sharing and borrow limit,
    and the instances that limit lets the team borrow (Batch rounds down), worded as ``plan``."""
    if resource["Type"] != "AWS::Batch::QuotaShare":
        return []
    props = resource.get("Properties", {})
    capacity = props.get("CapacityLimits", [])
    limits = ", ".join(f"{plural(c['MaxCapacity'], 'instance')} of {c['CapacityUnit']}" for c in capacity)
    sharing = props.get("ResourceSharingConfiguration", {})
    borrow = sharing.get("BorrowLimit")
    strategy = _SHARING.get(sharing.get("Strategy"), sharing.get("Strategy"))
    extra = ""
    if borrow is not None:
        extra = f", borrow limit {'unlimited' if borrow == -1 else f'{borrow}% of the guarantee'}"
        if borrow != -1 and sharing.get("Strategy") == C.Sharing.LEND_AND_BORROW.batch_strategy:
            extra += ": may borrow " + "; ".join(
                f"{amount_text(borrow * c['MaxCapacity'] // 100, c['CapacityUnit'])} of {c['CapacityUnit']}"
                for c in capacity if isinstance(c.get("MaxCapacity"), int))
    return [f"{props.get('QuotaShareName')}: Batch quota share, {limits}, {strategy}{extra}"]


def deployed_guarantee(resource: Mapping[str, Any]) -> dict[str, float]:
    """A quota share's capacity limits: instances per type."""
    if resource["Type"] != "AWS::Batch::QuotaShare":
        return {}
    out: dict[str, float] = {}
    for c in resource.get("Properties", {}).get("CapacityLimits", []):
        if isinstance(c.get("MaxCapacity"), int):
            out[c["CapacityUnit"]] = out.get(c["CapacityUnit"], 0.0) + c["MaxCapacity"]
    return out


def schema() -> dict[str, Any]:
    return S.schema_object(KEY, {
        "capacity": S.schema_capacity(r"^ml\.", DESCRIPTIONS[KEY]["capacity"]),
        "queue_name": {"type": "string", "pattern": C.BATCH_NAME_PATTERN},
        "service_environment_name": {"type": "string", "pattern": C.BATCH_NAME_PATTERN},
        "priority": {**S.schema_int(0, 1000), "default": DEFAULT_PRIORITY},
        "monitor": S.schema_object("batch_quota_monitor", {
            "enabled": {"type": "boolean", "default": True},
            **{k: {**S.schema_int(lo, hi), "default": getattr(C.ShareMonitorConfig(), k)}
               for k, lo, hi in MONITOR_INT_RANGES},
        }, description=DESCRIPTIONS[KEY]["monitor"]),
    }, required=["capacity"])


class BatchQuotaSpec(Backend):
    """What every layer asks of AWS Batch quota management (see :class:`~cdk_gpu_share.core.configuration.backends.BackendSpec`)."""

    key = KEY
    strategy = "AWS Batch quota management (SageMaker Training)"
    capacity_hint = KEY
    # A quota share's capacity limits and borrow limit count instances of each capacity unit.
    borrows_whole_instances = True
    least_guarantee_instances = LEAST_GUARANTEE_INSTANCES
    service_jobs = True
    section_keys = {KEY: SECTION_KEYS, "batch_quota_monitor": MONITOR_KEYS}
    descriptions = DESCRIPTIONS
    construct = "cdk_gpu_share.constructs.shared_gpu_quota:SharedGpuQuota"
    status = "cdk_gpu_share.backends.batch_quota.status"
    rules = (quota_share_count, quota_shares)
    resource_labels = (("AWS::Batch::ServiceEnvironment", "service environments"), ("AWS::Batch::JobQueue", "job queues"),
                       ("AWS::Batch::QuotaShare", "quota shares"))
    describe_resource = staticmethod(describe_resource)
    deployed_guarantee = staticmethod(deployed_guarantee)
    parse = staticmethod(parse)
    schema = staticmethod(schema)
    to_mapping = staticmethod(C.section_mapping)

    def idle_costs(self, config: C.PlatformConfig, section: BatchQuotaConfig) -> list[dict[str, str]]:
        return monitor_costs(section, len(config.teams_for(KEY)))


def monitor_costs(section: BatchQuotaConfig, teams: int) -> list[dict[str, str]]:
    """The share monitor's Lambda runs and, above all, its custom metrics (billed per metric and month)."""
    monitor = section.monitor if isinstance(section.monitor, C.ShareMonitorConfig) else C.ShareMonitorConfig()
    if not monitor.enabled:
        return []
    return [{"backend": KEY, "resource": "share monitor",
             "what": f"the share monitor Lambda runs every {plural(monitor.schedule_minutes, 'minute')} and publishes"
                     f" about {METRICS_PER_TEAM * teams + METRICS_PER_QUEUE} custom CloudWatch metrics for {plural(teams, 'team')}"
                     " (metrics are billed per metric and month; set batch_quota.monitor.enabled: false to go"
                     " without)"}]


#: Custom metrics per team: 9 gauges, preemptions in total and for two causes, blocked events.
METRICS_PER_TEAM = 13
#: Custom metrics per queue: blocked events, failed readings, readings (the heartbeat), unread shares.
METRICS_PER_QUEUE = 4


SPEC = BatchQuotaSpec()


def share_values(team: TeamConfig, capacity: Mapping[str, Any]) -> dict[str, Any]:
    """``team``'s quota share as ``UpdateQuotaShare`` writes it (``capacityLimits``,
    ``resourceSharingConfiguration``): what the template deploys, and what the quota window
    switcher writes for the team's values in a window."""
    sharing: dict[str, Any] = {"strategy": team.sharing.batch_strategy}
    if team.sharing.borrows:
        sharing["borrowLimit"] = team.borrow_limit_percent if team.borrow_limit_percent is not None else -1
    return {"capacityLimits": [{"capacityUnit": it, "maxCapacity": a.instances or 0}
                               for it, a in sorted(team.guarantee_for(capacity).items())],
            "resourceSharingConfiguration": sharing}


__all__ = ["KEY", "SECTION_KEYS", "SPEC", "BatchQuotaSpec", "parse", "quota_share_count", "quota_shares", "schema",
           "share_values"]
