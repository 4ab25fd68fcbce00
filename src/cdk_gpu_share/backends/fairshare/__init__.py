"""Classic AWS Batch on EC2 GPU instances with fair share and the reclaim Lambda (``fairshare``).

One job queue with a fair-share scheduling policy; each team is a share identifier
weighted by its guarantee. Batch does not take lent capacity back by itself, so the
reclaim Lambda runs the reclaim planner every ``reclaim.schedule_minutes``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.configuration import parse as C
from cdk_gpu_share.core.configuration import schema as S
from cdk_gpu_share.core.configuration.backends import Backend, SectionCheck
from cdk_gpu_share.core.configuration.parse import FairshareConfig, FairshareVpcConfig, PlatformConfig, ReclaimConfig
from cdk_gpu_share.core.configuration.windows import Window
from cdk_gpu_share.core.errors import Problem
from cdk_gpu_share.core.policy import reclaim as reclaim_planner
from cdk_gpu_share.core.policy.fairshare import reclaim_settings, share_identifier, share_identifier_problems
from cdk_gpu_share.core.text import plural
from cdk_gpu_share.core.validation import Problems, key

KEY = C.FAIRSHARE
#: The keys of the ``fairshare`` section, of its ``reclaim`` and of its ``vpc``.
SECTION_KEYS = frozenset({"capacity", "queue_name", "share_decay_seconds", "compute_reservation", "allocation_strategy",
                          "spot", "min_instances", "job_attempts", "reclaim", "vpc"})
RECLAIM_KEYS = frozenset({"enabled", "schedule_minutes", "dry_run", "reclaim_after_seconds", "min_runtime_seconds",
                          "victim_order", "max_checkpoint_seconds"})
#: ``reclaim.victim_order``: the reclaim planner's victim orders.
VICTIM_ORDERS = reclaim_planner.VICTIM_ORDERS
VPC_KEYS = frozenset({"vpc_id", "subnet_ids", "security_group_ids"})
#: (key, minimum, maximum) of the bounded whole numbers, read by the parser and the schema alike.
INT_RANGES = (
    ("share_decay_seconds", 0, 604800),
    ("compute_reservation", 0, 99),
    ("min_instances", 0, 10000),
    ("job_attempts", 1, 10),
)
RECLAIM_INT_RANGES = (("schedule_minutes", 1, 1440), ("reclaim_after_seconds", 0, 86400), ("min_runtime_seconds", 0, 86400),
                      ("max_checkpoint_seconds", 1, C.MAX_CHECKPOINT_SECONDS))
ALLOCATION_STRATEGIES = ("BEST_FIT_PROGRESSIVE", "SPOT_CAPACITY_OPTIMIZED", "SPOT_PRICE_CAPACITY_OPTIMIZED")
#: A job definition name (<queue[:96]>-<share identifier>-gpu<N>) takes at most this many characters.
MAX_JOB_DEFINITION_NAME = 128


#: The fix of a bounded whole number whose own words say more than its range.
INT_FIXES = {"max_checkpoint_seconds": C.RECLAIM_MAX_CHECKPOINT_FIX}


def _take_ints(raw: Any, where: str, ranges: tuple[tuple[str, int, int], ...], problems: Problems,
               into: dict[str, Any]) -> None:
    """Copy the bounded whole numbers ``(key, minimum, maximum)`` that ``raw`` gives into ``into``."""
    for name, lo, hi in ranges:
        if name in raw:
            value = C.read_int(raw[name], f"{where}.{name}", problems, minimum=lo, maximum=hi,
                               fix=INT_FIXES.get(name, ""))
            if value is not None:
                into[name] = value


def _allocation(data: Any, problems: Problems, kwargs: dict[str, Any]) -> None:
    """``allocation_strategy`` and ``spot``: Spot gets a Spot strategy unless one is named."""
    if "allocation_strategy" in data:
        if data["allocation_strategy"] in ALLOCATION_STRATEGIES:
            kwargs["allocation_strategy"] = data["allocation_strategy"]
        else:
            problems.add(f"{KEY}.allocation_strategy", data["allocation_strategy"], "is not a Batch allocation strategy",
                         f"use one of {', '.join(ALLOCATION_STRATEGIES)}")
    if "spot" in data:
        spot = C.read_bool(data["spot"], f"{KEY}.spot", problems)
        if spot is not None:
            kwargs["spot"] = spot
    if kwargs.get("spot") and "allocation_strategy" not in data:
        # BEST_FIT_PROGRESSIVE, the on-demand default, is not a Spot strategy.
        kwargs["allocation_strategy"] = "SPOT_PRICE_CAPACITY_OPTIMIZED"
    if kwargs.get("spot") and kwargs.get("allocation_strategy") == "BEST_FIT_PROGRESSIVE":
        problems.add(f"{KEY}.allocation_strategy", "BEST_FIT_PROGRESSIVE", "is not a Spot allocation strategy",
                     "use SPOT_PRICE_CAPACITY_OPTIMIZED with spot: true")


def _reclaim(raw: Any, problems: Problems) -> ReclaimConfig | None:
    where = f"{KEY}.reclaim"
    reclaim = C.read_object(raw, where, RECLAIM_KEYS, problems)
    if reclaim is None:
        return None
    rk: dict[str, Any] = {}
    for name in ("enabled", "dry_run"):
        if name in reclaim:
            value = C.read_bool(reclaim[name], f"{where}.{name}", problems)
            if value is not None:
                rk[name] = value
    _take_ints(reclaim, where, RECLAIM_INT_RANGES, problems, rk)
    if "victim_order" in reclaim:
        if isinstance(reclaim["victim_order"], str) and reclaim["victim_order"] in VICTIM_ORDERS:
            rk["victim_order"] = reclaim["victim_order"]
        else:
            problems.add(f"{where}.victim_order", reclaim["victim_order"], "is not a victim order",
                         "use youngest (the default: lowest priority, then the most recent start) or checkpoint"
                         " (runs started on borrowed capacity, then the least work lost since the last checkpoint)")
    return ReclaimConfig(**rk)


def _vpc(raw: Any, problems: Problems) -> FairshareVpcConfig | None:
    where = f"{KEY}.vpc"
    data = C.read_object(raw, where, VPC_KEYS, problems)
    if data is None:
        return None
    for name in ("vpc_id", "subnet_ids"):
        if name not in data:
            problems.add(key(where, name), None, "is required with fairshare.vpc",
                         f"add {name}: " + ("vpc-0123456789abcdef0 (the VPC of the subnets)" if name == "vpc_id"
                                            else "[subnet-0123456789abcdef0] (private subnets with egress)"))
    if "vpc_id" not in data or "subnet_ids" not in data:
        return None
    values = {k: data[k] for k in VPC_KEYS if k in data and not (k == "security_group_ids" and data[k] is None)}
    before = len(problems)
    C.vpc_problems(values, where, problems.add)
    if len(problems) > before:
        return None
    return FairshareVpcConfig(vpc_id=values["vpc_id"], subnet_ids=tuple(values["subnet_ids"]),
                              security_group_ids=tuple(values.get("security_group_ids", ())))


#: Descriptions of the section and its keys: the words an editor shows on hover (``gpu-share schema``).
DESCRIPTIONS: dict[str, dict[str, str]] = {
    "": {KEY: "Classic AWS Batch on EC2 GPU instances with fair share and the reclaim Lambda."},
    KEY: {
        "capacity": "Instances per EC2 GPU instance type in the compute environment.",
        "queue_name": "Job queue name. Default: <platform>-fairshare.",
        "share_decay_seconds": "Fair-share decay window in seconds. Default: 3600.",
        "compute_reservation": "Percentage of capacity reserved for inactive share identifiers. Default: 0.",
        "allocation_strategy": "Batch allocation strategy. Default: BEST_FIT_PROGRESSIVE.",
        "spot": "Use Spot instances. Default: false.",
        "min_instances": "Instances kept running. Default: 0.",
        "job_attempts": "Attempts per job (a reclaimed job is resubmitted). Default: 5.",
        "reclaim": "The reclaim Lambda that takes lent GPUs back.",
        "vpc": "An existing VPC for the GPU instances: {vpc_id, subnet_ids, security_group_ids?}. Default: a new"
        " VPC (2 AZs, 1 NAT gateway, flow logs).",
    },
    "reclaim": {
        "enabled": "Run the reclaim Lambda. Default: true.",
        "schedule_minutes": "Minutes between reclaim cycles. Default: 1.",
        "dry_run": "Log what would be stopped, stop nothing. Default: false.",
        "reclaim_after_seconds": "How long a lender waits before its lent GPUs are taken back. Default: 0.",
        "min_runtime_seconds": "Jobs younger than this are never stopped. Default: 0.",
        "victim_order": "Which jobs a reclaim stops first: youngest (lowest priority, then the most recent start)"
        " or checkpoint (runs started on borrowed capacity, then the least work lost since the last checkpoint)."
        " Default: youngest.",
        "max_checkpoint_seconds": "With victim_order checkpoint: the longest checkpoint interval the order believes,"
        " in seconds (1 to 604800). A job that declares no interval, 0 or a longer one is ordered as if it saved"
        " its progress every this many seconds, so declaring no checkpoints never keeps a team's borrowed runs"
        " from being stopped. Default: 3600.",
    },
    "fairshare_vpc": {
        "vpc_id": "The VPC of the subnets (vpc-...).",
        "subnet_ids": "Subnets the GPU instances run in (subnet-...), with a route to ECR, ECS, Batch and"
        " CloudWatch (a NAT gateway or interface endpoints).",
        "security_group_ids": "Security groups of the instances (sg-...). Default: a new egress-only group in the VPC.",
    },
}


def parse(raw: Any, problems: Problems) -> FairshareConfig | None:
    """The ``fairshare`` section, or None when it is absent or not a mapping."""
    section = C.read_section(raw, KEY, SECTION_KEYS, problems, sagemaker=False)
    if section is None:
        return None
    data, capacity = section
    kwargs: dict[str, Any] = {}
    if data.get("queue_name") is not None:
        kwargs["queue_name"] = C.read_str(data["queue_name"], f"{KEY}.queue_name", problems, C.BATCH_NAME_PATTERN,
                                          "use up to 128 letters, digits, - and _")
    _take_ints(data, KEY, INT_RANGES, problems, kwargs)
    _allocation(data, problems, kwargs)
    reclaim = _reclaim(data.get("reclaim"), problems)
    if reclaim is not None:
        kwargs["reclaim"] = reclaim
    if data.get("vpc") is not None:
        vpc = _vpc(data["vpc"], problems)
        if vpc is not None:
            kwargs["vpc"] = vpc
    return FairshareConfig(capacity=capacity, **kwargs)


# -- rules: each names the field, the value and the fix.


def share_identifiers(c: SectionCheck) -> Iterator[Problem]:
    """Every team's share identifier (its letters and digits) is non-empty and its own."""
    yield from share_identifier_problems((t.name for t in c.named), paths=c.paths)


def job_definition_names(c: SectionCheck) -> Iterator[Problem]:
    """Job definitions are named <queue[:96]>-<share identifier>-gpu<N>, at most 128 characters."""
    queue = c.section.queue_name or f"{c.platform}-fairshare"
    # Every catalogued type has at least 1 GPU; one the catalogue lacks (a FairshareConfig
    # built in Python) counts as 8.
    total_gpus = sum(n * getattr(instances.lookup(it), "gpus", 8) for it, n in c.section.capacity.items())
    fixed = len(queue[:96]) + 1 + len("-gpu") + len(str(max(total_gpus, 1)))
    for team in c.named:
        sid = share_identifier(team.name)
        if sid and fixed + len(sid) > MAX_JOB_DEFINITION_NAME:
            yield Problem(f"{c.paths[team.name]}.name", team.name,
                          f"makes its job definition names {fixed + len(sid)} characters long (queue name, its letters"
                          f" and digits, -gpuN); Batch takes at most {MAX_JOB_DEFINITION_NAME}",
                          f"use at most {MAX_JOB_DEFINITION_NAME - fixed} letters and digits, or a shorter"
                          " fairshare.queue_name")


# -- what `gpu-share summary` shows of the synthesized resources.


def describe_resource(resource: Mapping[str, Any]) -> list[str]:
    """The fair-share policy's weights, or a team's GPU quota, of a synthesized template, in one line."""
    props = resource.get("Properties", {})
    if resource["Type"] == "AWS::Batch::SchedulingPolicy":
        shares = props.get("FairsharePolicy", {}).get("ShareDistribution", [])
        if not shares:
            return []
        text = ", ".join(f"{s['ShareIdentifier']} weight {s.get('WeightFactor', 1):g}" for s in shares)
        return [f"fair-share scheduling policy: {text} (a lower weight gets more)"]
    if resource["Type"] == "AWS::Batch::ConsumableResource":
        tags = props.get("Tags", {}) or {}
        team = tags.get("gpu-share:team") if isinstance(tags, dict) else None
        return [f"{team or 'a team'}: fair-share GPU quota, at most {plural(props.get('TotalQuantity'), 'GPU')} "
                "at once (guarantee plus borrow cap)"]
    return []


def schema() -> dict[str, Any]:
    ranges = {k: S.schema_int(lo, hi) for k, lo, hi in INT_RANGES}
    reclaim_ranges = {k: S.schema_int(lo, hi) for k, lo, hi in RECLAIM_INT_RANGES}
    return S.schema_object(KEY, {
        "capacity": S.schema_capacity(r"^(?!ml\.)", DESCRIPTIONS[KEY]["capacity"]),
        "queue_name": {"type": "string", "pattern": C.BATCH_NAME_PATTERN},
        **ranges,
        "allocation_strategy": {"enum": list(ALLOCATION_STRATEGIES), "default": "BEST_FIT_PROGRESSIVE"},
        "spot": {"type": "boolean", "default": False},
        "reclaim": S.schema_object("reclaim", {"enabled": {"type": "boolean", "default": True},
                                               "dry_run": {"type": "boolean", "default": False}, **reclaim_ranges,
                                               "victim_order": {"enum": list(VICTIM_ORDERS), "default": "youngest"}}),
        "vpc": S.schema_object("fairshare_vpc", {
            "vpc_id": {"type": "string", "pattern": C.VPC_ID_PATTERN},
            "subnet_ids": S.schema_ids(C.SUBNET_ID_PATTERN),
            "security_group_ids": S.schema_ids(C.SECURITY_GROUP_ID_PATTERN),
        }, required=["vpc_id", "subnet_ids"], description=DESCRIPTIONS[KEY]["vpc"]),
    }, required=["capacity"])


def network(section: FairshareConfig) -> str:
    """Where the fair-share fleet's instances run, in one line."""
    if section.vpc is None:
        return "a new VPC (2 AZs, 1 NAT gateway, flow logs); set fairshare.vpc to use yours"
    groups = (f"security groups {', '.join(section.vpc.security_group_ids)}" if section.vpc.security_group_ids
              else "a new egress-only security group")
    return (f"your VPC {section.vpc.vpc_id}: subnets {', '.join(section.vpc.subnet_ids)}, {groups};"
            " no VPC or NAT gateway is created")


#: What each victim order stops first, in the words of ``gpu-share plan`` and ``status``.
VICTIM_ORDER_TEXT = {
    "youngest": "the lowest priority, then the most recent start",
    "checkpoint": "runs started on borrowed GPUs, then the least work lost since the last checkpoint",
}


def reclaim_plan(reclaim: ReclaimConfig) -> dict[str, Any]:
    """The reclaim Lambda's settings and, in one line, what it does."""
    if not reclaim.enabled:
        text = "off: lent GPUs come back only as the borrowers' jobs end"
    else:
        text = (f"every {plural(reclaim.schedule_minutes, 'minute')}, once a lender waited "
                f"{reclaim.reclaim_after_seconds} s; stops first {VICTIM_ORDER_TEXT[reclaim.victim_order]}"
                f" (victim_order: {reclaim.victim_order})")
        if reclaim.victim_order == "checkpoint":
            text += (f"; believes checkpoint intervals up to {reclaim.max_checkpoint_seconds} s (a job declaring"
                     f" none, 0 or more counts as saving every {reclaim.max_checkpoint_seconds} s;"
                     " max_checkpoint_seconds)")
        if reclaim.min_runtime_seconds:
            text += f"; never a job younger than {reclaim.min_runtime_seconds} s"
        if reclaim.dry_run:
            text += "; dry run: logs the plan, stops nothing"
    return {"enabled": reclaim.enabled, "schedule_minutes": reclaim.schedule_minutes,
            "reclaim_after_seconds": reclaim.reclaim_after_seconds,
            "min_runtime_seconds": reclaim.min_runtime_seconds, "victim_order": reclaim.victim_order,
            "max_checkpoint_seconds": reclaim.max_checkpoint_seconds, "dry_run": reclaim.dry_run, "text": text}


def idle_costs(section: FairshareConfig) -> list[dict[str, str]]:
    """The NAT gateway of a new VPC, the compute environment's minimum and the reclaim Lambda."""
    out: list[dict[str, str]] = []
    # With fairshare.vpc the fleet uses the platform team's own network: nothing of ours idles there.
    if section.vpc is None:
        out.append({"backend": KEY, "resource": "NAT gateway",
                    "what": "1 NAT gateway in the VPC created for the fair-share fleet (billed per hour and per GB); "
                            "set fairshare.vpc (or FairshareQueue(vpc=...)) to use an existing VPC instead"})
    if section.min_instances > 0:
        it = sorted(section.capacity, key=lambda t: (getattr(instances.lookup(t), "gpus", 0), t))[0]
        info = instances.lookup(it)
        count = f"{section.min_instances} instance" + ("" if section.min_instances == 1 else "s")
        out.append({"backend": KEY, "resource": "compute environment minimum",
                    "what": f"min_instances {section.min_instances}: {count} of {it} "
                            f"({section.min_instances * (info.vcpus if info else 0)} min vCPUs) always running"})
    if section.reclaim.enabled:
        out.append({"backend": KEY, "resource": "reclaim Lambda",
                    "what": f"the reclaim Lambda runs every {section.reclaim.schedule_minutes} min"
                            " (Lambda and CloudWatch metrics; cents a month)"})
    return out


class FairshareSpec(Backend):
    """What every layer asks of the classic fair-share queue (see :class:`~cdk_gpu_share.core.configuration.backends.BackendSpec`)."""

    key = KEY
    strategy = "AWS Batch fair-share scheduling (EC2) with the reclaim Lambda"
    capacity_hint = f"{KEY} (EC2 types)"
    section_keys = {KEY: SECTION_KEYS, "reclaim": RECLAIM_KEYS, "fairshare_vpc": VPC_KEYS}
    descriptions = DESCRIPTIONS
    construct = "cdk_gpu_share.backends.fairshare.construct:FairshareQueue"
    status = "cdk_gpu_share.backends.fairshare.status"
    rules = (share_identifiers, job_definition_names)
    resource_labels = (("AWS::Batch::JobQueue", "job queues"), ("AWS::Batch::SchedulingPolicy", "scheduling policies"),
                       ("AWS::Batch::ComputeEnvironment", "compute environments"),
                       ("AWS::Batch::JobDefinition", "job definitions"),
                       ("AWS::Batch::ConsumableResource", "consumable resources"))
    describe_resource = staticmethod(describe_resource)
    parse = staticmethod(parse)
    schema = staticmethod(schema)
    to_mapping = staticmethod(C.section_mapping)

    def plan_extras(self, section: FairshareConfig) -> dict[str, Any]:
        return {"network": network(section), "reclaim": reclaim_plan(section.reclaim)}

    def idle_costs(self, config: PlatformConfig, section: FairshareConfig) -> list[dict[str, str]]:
        return idle_costs(section)

    def window_deployment(self, section: FairshareConfig, windows: Sequence[Window]) -> list[str]:
        """Nothing switched: the reclaim Lambda reads the values in force at each cycle."""
        return [f"the reclaim Lambda reads the values in force at each cycle (every"
                f" {plural(section.reclaim.schedule_minutes, 'minute')} and when a job starts waiting); nothing is switched"]

    def scenario_settings(self, section: FairshareConfig) -> dict[str, Any]:
        return reclaim_settings(section.reclaim)

    def poll_seconds(self, section: FairshareConfig) -> float | None:
        return float(section.reclaim.schedule_minutes * 60)


SPEC = FairshareSpec()

__all__ = ["KEY", "SECTION_KEYS", "SPEC", "VICTIM_ORDERS", "FairshareSpec", "idle_costs", "job_definition_names", "network", "parse",
           "schema", "share_identifiers"]
