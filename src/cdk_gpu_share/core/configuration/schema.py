"""A JSON Schema of ``platform.yaml``, built from the validator's own model.

``gpu-share schema`` prints it; the shipped YAML files name it for editors
(``# yaml-language-server: $schema=...``), so a typo is underlined before anything
runs. The key sets, patterns, enums and ranges come from
:mod:`cdk_gpu_share.core.configuration.parse` and :mod:`cdk_gpu_share.inference.config`;
``tests/core/test_config_schema.py`` checks that every key the validator accepts has a
description here and that nothing here is unknown to the validator. The validator
stays the authority (cross-field rules such as guarantees within capacity are not
expressible in the schema).

To add a field: add it to the section's key set in config.py and its description to
:data:`DESCRIPTIONS` (the test fails until both agree).
"""

from __future__ import annotations

import json
from typing import Any

import cdk_gpu_share.inference.config as IC
from cdk_gpu_share.core.catalog import hyperpod_schema as hp
from cdk_gpu_share.core.catalog import mig
from cdk_gpu_share.core.configuration import alerts as AL
from cdk_gpu_share.core.configuration import archive as HI
from cdk_gpu_share.core.configuration import backends
from cdk_gpu_share.core.configuration import fields as F
from cdk_gpu_share.core.configuration import parse as C
from cdk_gpu_share.core.configuration import security as SEC
from cdk_gpu_share.core.configuration import windows as W
from cdk_gpu_share.core.configuration.objectives import ENTITLEMENT_KEY, MAX_TARGET, NEVER_STOPPED_KEYS, OBJECTIVE_KEYS

SCHEMA_ID = "https://github.com/cdk-gpu-share/cdk-gpu-share/platform.schema.json"

#: Descriptions per section and key: the words an editor shows on hover. Each backend's
#: are in its package (``BackendSpec.descriptions``); :func:`descriptions` has them all.
DESCRIPTIONS: dict[str, dict[str, str]] = {
    "": {
        "platform": "The platform: its name prefixes every stack and resource name.",
        "teams": "The ML teams sharing the fleet, each with its guarantee per instance type.",
        "groups": "The organisation's tree of quotas: divisions (groups) holding teams and other groups, each with"
        " an optional pool of its own and a borrow limit for its whole subtree. Without it every team is a root.",
        "inference": "MIG-partitioned SageMaker inference endpoints.",
        "alerts": "Where every alarm of the platform goes: emails (a new encrypted topic) or topic_arn (an existing one).",
        "security": "Who administers team identity: the principals the tag guard (`gpu-share guard`) still lets set"
        " the teams' principal tags.",
        "windows": "Named weekly time windows in which teams' guarantees and borrow limits change (each team gives"
        " its values under its own `windows`). Windows never overlap; outside them every team has its own values.",
        "history": "The job archive: every Batch job event of the platform's queues, kept in an encrypted S3 bucket"
        " for `gpu-share trace export` (on by default wherever the platform has a Batch queue).",
    },
    "window": {
        "name": "The window's name, which teams use under their own `windows`: lowercase letters, digits and hyphens.",
        "days": "The days the window opens on (mon, tue, wed, thu, fri, sat, sun).",
        "start": "When it opens, \"HH:MM\" (00:00 to 23:59) in its time zone.",
        "end": "When it closes, \"HH:MM\": at or before start, it closes the next day; equal to start, 24 hours later.",
        "timezone": "IANA time zone of start and end (Europe/Berlin); daylight saving as the zone says. Default: UTC.",
    },
    "team_window": {
        "guarantee": "The team's guarantee in the window: the same instance types as its own guarantee.",
        "borrow_limit_percent": "The team's borrow_limit_percent in the window.",
        "borrow_limit": "The team's borrow_limit in the window.",
    },
    "platform": {"name": "Prefix of stack and resource names: a letter, then up to 39 letters, digits and hyphens."},
    "team": {
        "name": "Unique team name: letters, digits and hyphens (it is part of the team's CloudFormation stack name;"
        " on HyperPod, lower case and at most 51 characters: the namespace hyperpod-ns-<name>).",
        "guarantee": "Capacity guaranteed per instance type: whole instances (ml.g5.xlarge: 1) or, on HyperPod,"
        " resources ({accelerators: 4}).",
        "sharing": "reserve (keep idle capacity), lend (lend it) or lend_and_borrow (also borrow). Default:"
        " lend_and_borrow.",
        "borrow_limit_percent": "Percentage of the guarantee the team may borrow on top; -1 is unlimited (Batch only).",
        "borrow_limit": "Absolute caps on borrowing per instance type (HyperPod, fair share).",
        "in_team_preemption": "Higher-priority jobs of the team may stop its lower-priority ones. Default: false.",
        "fair_share_weight": "HyperPod fair-share weight, 0 to 100.",
        "checkpoint_seconds": "Seconds between two checkpoints of the team's jobs (0: never), up to 604800. A job"
        " may say its own with the tag gpu-share:checkpoint-seconds. Read by the fair-share reclaimer's checkpoint"
        " order and by the simulator.",
        "preemption_retries": "Batch quota management: how many times a preempted job of the team is queued again"
        " before it fails (SubmitServiceJob's preemptionRetriesBeforeTermination), 0 to 1000. Default: every time.",
        "description": "One line of at most 1024 characters.",
        "max_priority": "Highest scheduling priority the team's jobs may carry, 0 to 9999. Default: 100. On"
        " kueue: the highest WorkloadPriorityClass value (and Pod priority) its namespace admits.",
        "assumed_by": "IAM role or user ARNs that may assume the team's SubmitRole. Default: principals of the"
        " account tagged principal_tag=<team>.",
        "principal_tag": "Principal tag key whose value must be the team's name to assume its SubmitRole (when"
        " assumed_by is not set). Default: gpu-share:team.",
        "group": "The team's group (a name from groups). Default: none, the team is a root of the tree.",
        "windows": "The team's values while a window of `windows` is open, by window name: any of guarantee (the"
        " same instance types as the team's), borrow_limit_percent and borrow_limit. A value left out is the team's own.",
        "objectives": "What the team's jobs need, each key optional: `gpu-share simulate` reports whether each"
        " holds, `gpu-share advise` looks for the cheapest quotas that meet them, and the deployed wait alarms take"
        " guarantee_wait_p99_minutes as their threshold.",
    },
    "group": {
        "name": "Unique group name, a DNS-1123 label (lower-case letters, digits and hyphens; at most 63). Not the"
        " name of a team.",
        "parent": "The group this one belongs to. Default: none, a root group.",
        "guarantee": "The group's own pool, whole instances per instance type, on top of its teams' guarantees;"
        " lent to others while idle. Default: none.",
        "borrow_limit": "The most the group's whole subtree may use beyond its quota (its pool plus its members'"
        " quotas), whole instances per instance type. Default: unlimited; a type left out is unlimited.",
        "description": "One line of at most 1024 characters.",
    },
    "objectives": {
        "wait_p50_minutes": "Median wait of the team's jobs (submit to final start), in minutes, at most this.",
        "wait_p95_minutes": "95th percentile of the wait of the team's jobs, in minutes, at most this.",
        "wait_p99_minutes": "99th percentile of the wait of the team's jobs, in minutes, at most this.",
        "guarantee_wait_p99_minutes": "99th percentile of the owed wait of the team's jobs (the time a job waits"
        " while what its team uses plus the job is within the team's entitlement), in minutes, at most this. The share"
        " monitor's and the fair-share reclaimer's wait alarms take it as their threshold (they measure against the"
        " deployed guarantee).",
        "no_worse_than_private": "true: for p50, p95 and p99, the jobs that fit the team's entitlement wait no longer"
        " than in a private cluster of exactly its entitlement, give or take the planner's period,"
        " reclaim_after_seconds and 60 s.",
        "entitlement": "What the team was promised, whole instances of the same instance types as its guarantee, at"
        " most the capacity. guarantee_wait_p99_minutes and no_worse_than_private are judged against it; "
        "`gpu-share advise` changes guarantees, never this. Default: the guarantee.",
        "max_preempted_per_day": "Stops of the team's jobs by reclaim per day of the trace, at most this. 0: its work"
        " must never be stopped (then sharing must not be lend_and_borrow).",
        "max_lost_gpu_hours_per_day": "GPU-hours of work thrown away by stopped jobs of the team per day of the"
        " trace, at most this. 0: its work must never be stopped.",
    },
    "amount": {
        "instances": "Whole instances.",
        "accelerators": "GPUs (HyperPod).",
        "vcpu": "vCPUs (HyperPod).",
        "memory_gib": "Memory in GiB (HyperPod).",
        "mig": "MIG partitions: profile -> count (HyperPod).",
    },
    "history": {
        "enabled": "Keep the job archive. Default: true wherever the platform has a Batch queue (batch_quota or"
        " fairshare); false builds none.",
        "retention_days": "Days the archive keeps each object before it expires, 1 to 3650. Default: 400.",
        "readers": "IAM role or user ARNs that may read the archive (and decrypt it); nobody else may. Default:"
        " none.",
    },
    "security": {
        "administrators": "ARN patterns (aws:PrincipalArn; * and ? wildcards) of the IAM roles or users that may set"
        " or remove a team's principal tag on users, roles and sessions under the tag guard. Include the role that"
        " deploys the team stacks (they tag their roles). Default: none (nobody may).",
    },
}

#: Keys the validator accepts, per section (the test compares these with DESCRIPTIONS).
VALIDATOR_KEYS: dict[str, set[str]] = {
    "": {"platform", "teams", "groups", "windows", *C.EXTRA_SECTIONS},
    "window": set(W.WINDOW_KEYS),
    "team_window": set(W.TEAM_WINDOW_KEYS),
    "platform": {"name"},
    "team": set(F._TEAM_KEYS),
    "group": set(F._GROUP_KEYS),
    "objectives": {*OBJECTIVE_KEYS, ENTITLEMENT_KEY},
    "amount": set(F._AMOUNT_KEYS),
    "security": set(SEC._KEYS),
    "history": set(HI._KEYS),
}


def validator_keys() -> dict[str, set[str]]:
    """:data:`VALIDATOR_KEYS` with every registered backend's keys: its top-level key, and the
    keys of each object its section holds (``fairshare``, ``reclaim``, ``fairshare_vpc``)."""
    out = {k: set(v) for k, v in VALIDATOR_KEYS.items()}
    for spec in backends.registered():
        out[""].add(spec.key)
        out.update({name: set(keys) for name, keys in spec.section_keys.items()})
    return out


def descriptions() -> dict[str, dict[str, str]]:
    """:data:`DESCRIPTIONS` with every registered backend's (``BackendSpec.descriptions``)."""
    out = {k: dict(v) for k, v in DESCRIPTIONS.items()}
    for spec in backends.registered():
        for section, texts in spec.descriptions.items():
            out.setdefault(section, {}).update(texts)
    return out


def schema_object(section: str, properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    texts = descriptions().get(section, {})
    for k, prop in properties.items():
        if "description" not in prop:  # a fragment may bring its own
            prop["description"] = texts[k]
    return {"type": "object", "additionalProperties": False, "properties": properties, **extra}


def schema_int(lo: int, hi: int = C.MAX_INT) -> dict[str, Any]:
    return {"type": "integer", "minimum": lo, "maximum": hi}


def schema_ids(pattern: str) -> dict[str, Any]:
    return {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string", "pattern": pattern}}


def schema_capacity(instance_pattern: str, description: str, enum: list[str] | None = None) -> dict[str, Any]:
    names: dict[str, Any] = {"pattern": instance_pattern} if enum is None else {"enum": enum}
    return {
        "type": "object",
        "minProperties": 1,
        "propertyNames": names,
        "additionalProperties": schema_int(1),
        "description": description,
    }


def platform_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a platform config."""
    amount_or_count = {
        "description": "Whole instances (shorthand: a number), or resources of the instance type.",
        "oneOf": [{**schema_int(0), "description": "Whole instances (shorthand for {instances: N})."}, {"$ref": "#/$defs/amount"}],
    }
    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "cdk-gpu-share platform config (platform.yaml)",
        "description": "Teams sharing a GPU fleet and the backends that enforce it. `gpu-share validate` checks"
        " everything, including rules across fields that this schema cannot express.",
        "$defs": {"amount": _amount_schema(), "amountOrCount": amount_or_count, "team": _team_schema(),
                  "group": _group_schema(), "window": _window_schema()},
        **schema_object(
            "",
            {
                "platform": schema_object("platform", {"name": {"type": "string", "pattern": C.PLATFORM_NAME_PATTERN,
                                                       "default": "gpu-share"}}),
                "teams": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/team"}},
                "groups": {"type": "array", "items": {"$ref": "#/$defs/group"}},
                "windows": {"type": "array", "items": {"$ref": "#/$defs/window"}},
                **{spec.key: spec.schema() for spec in backends.registered()},
                "inference": _inference_schema(),
                "alerts": _alerts_schema(),
                "security": _security_schema(),
                "history": _history_schema(),
            },
        ),
    }
    return schema




def _amount_schema() -> dict[str, Any]:
    """An amount of one instance type: whole instances, or its resources (HyperPod)."""
    return schema_object(
        "amount",
        {
            "instances": schema_int(0),
            "accelerators": schema_int(0),
            "vcpu": {"type": "number", "minimum": 0, "maximum": C.MAX_NUMBER},
            "memory_gib": {"type": "number", "minimum": 0, "maximum": C.MAX_NUMBER},
            "mig": {
                "type": "object",
                "propertyNames": {"enum": sorted(hp.HYPERPOD_MIG_PROFILES)},
                "additionalProperties": schema_int(0),
            },
        },
        minProperties=1,
    )


def _team_schema() -> dict[str, Any]:
    """One team: its name, guarantee, sharing, limits and who may act as it."""
    amounts = {"type": "object", "minProperties": 1, "additionalProperties": {"$ref": "#/$defs/amountOrCount"}}
    return schema_object(
        "team",
        {
            "name": {"type": "string", "pattern": f"^{C.DNS_LABEL}$", "minLength": 1, "maxLength": C.MAX_TEAM_NAME},
            "guarantee": dict(amounts),
            "sharing": {"enum": [s.value for s in C.Sharing], "default": C.Sharing.LEND_AND_BORROW.value},
            "borrow_limit_percent": {"type": "integer", "minimum": -1, "maximum": C.MAX_INT},
            "borrow_limit": dict(amounts),
            "in_team_preemption": {"type": "boolean"},
            "fair_share_weight": schema_int(0, 100),
            "checkpoint_seconds": schema_int(0, C.MAX_CHECKPOINT_SECONDS),
            "preemption_retries": schema_int(0, C.MAX_PREEMPTION_RETRIES),
            "description": {"type": "string", "maxLength": 1024},
            "max_priority": {**schema_int(0, C.MAX_SCHEDULING_PRIORITY), "default": C.DEFAULT_MAX_PRIORITY},
            "assumed_by": {"oneOf": [{"type": "string", "pattern": f"^{C.ASSUMER_ARN_PATTERN}$"},
                                     {"type": "array", "minItems": 1,
                                      "items": {"type": "string", "pattern": f"^{C.ASSUMER_ARN_PATTERN}$"}}]},
            "principal_tag": {"type": "string", "pattern": f"^{C.TAG_KEY_PATTERN}$", "default": C.DEFAULT_PRINCIPAL_TAG},
            "objectives": _objectives_schema(),
            "group": {"type": "string", "minLength": 1},
            "windows": {"type": "object", "additionalProperties": schema_object("team_window", {
                "guarantee": dict(amounts),
                "borrow_limit_percent": {"type": "integer", "minimum": -1, "maximum": C.MAX_INT},
                "borrow_limit": dict(amounts),
            }, minProperties=1)},
        },
        required=["name"],
    )


def _window_schema() -> dict[str, Any]:
    """One weekly window: its days, start and end in its time zone."""
    clock = {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"}
    return schema_object(
        "window",
        {
            "name": {"type": "string", "pattern": "^[a-z][a-z0-9-]{0,39}$"},
            "days": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": list(W.DAYS)}},
            "start": dict(clock),
            "end": dict(clock),
            "timezone": {"type": "string", "minLength": 1, "default": W.DEFAULT_TIMEZONE},
        },
        required=["name", "days", "start", "end"],
    )


def _group_schema() -> dict[str, Any]:
    """One group of the tree: its name, parent, pool and borrow limit (whole instances)."""
    counts = {"type": "object", "additionalProperties": schema_int(0)}
    return schema_object(
        "group",
        {
            "name": {"type": "string", "pattern": C.GROUP_NAME_PATTERN},
            "parent": {"type": "string", "minLength": 1},
            "guarantee": dict(counts),
            "borrow_limit": dict(counts),
            "description": {"type": "string", "maxLength": 1024},
        },
        required=["name"],
    )


def _objectives_schema() -> dict[str, Any]:
    """A team's objectives: positive targets (0 allowed where it means never stopped)."""
    def target(key: str) -> dict[str, Any]:
        if key == "no_worse_than_private":
            return {"type": "boolean"}
        bound = {"minimum": 0} if key in NEVER_STOPPED_KEYS else {"exclusiveMinimum": 0}
        return {"type": "number", **bound, "maximum": MAX_TARGET}

    whole = {"type": "object", "minProperties": 1, "additionalProperties": schema_int(0)}
    return schema_object("objectives", {**{key: target(key) for key in OBJECTIVE_KEYS}, ENTITLEMENT_KEY: whole},
                         description=descriptions()["team"]["objectives"])


def _inference_schema() -> dict[str, Any]:
    """The ``inference`` section: MIG-partitioned endpoints."""
    return {
        "type": "object",
        "description": DESCRIPTIONS[""]["inference"],
        "additionalProperties": False,
        "properties": {
            "endpoints": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "propertyNames": {"enum": sorted(IC._ENDPOINT_KEYS)},
                    "properties": {
                        "name": {"type": "string", "pattern": IC.NAME_PATTERN,
                                 "maxLength": IC.MAX_ENDPOINT_NAME_LENGTH},
                        "instance_type": {"enum": list(mig.INSTANCE_TYPES)},
                        "instance_count": schema_int(1),
                        "layout": {"oneOf": [{"enum": list(mig.PRESETS)},
                                             {"type": "array", "items": {"type": "string"}, "minItems": 1}]},
                        "models": {"type": "array", "minItems": 1,
                                   "items": {"type": "object",
                                             "propertyNames": {"enum": sorted(IC._MODEL_KEYS)}}},
                    },
                },
            },
            "vpc": {"type": "object", "propertyNames": {"enum": ["subnet_ids", "security_group_ids"]}},
            "kms_key_arn": {"type": "string"},
        },
    }


def _alerts_schema() -> dict[str, Any]:
    """The ``alerts`` section: where every alarm goes."""
    return {
        "type": "object",
        "description": DESCRIPTIONS[""]["alerts"],
        "additionalProperties": False,
        "properties": {
            "emails": {"oneOf": [{"type": "string", "format": "email"},
                                 {"type": "array", "maxItems": AL.MAX_EMAILS,
                                  "items": {"type": "string", "format": "email"}}]},
            "topic_arn": {"type": "string", "pattern": AL.TOPIC_ARN_PATTERN.pattern},
        },
    }


def _security_schema() -> dict[str, Any]:
    """The ``security`` section: who administers team identity."""
    return schema_object(
        "security",
        {
            "administrators": {"oneOf": [
                {"type": "string", "pattern": SEC.ADMINISTRATOR_ARN_PATTERN.pattern},
                {"type": "array", "minItems": 1, "maxItems": SEC.MAX_ADMINISTRATORS, "uniqueItems": True,
                 "items": {"type": "string", "pattern": SEC.ADMINISTRATOR_ARN_PATTERN.pattern}},
            ]},
        },
        required=["administrators"],
        description=DESCRIPTIONS[""]["security"],
    )


def _history_schema() -> dict[str, Any]:
    """The ``history`` section: the job archive."""
    return schema_object(
        "history",
        {
            "enabled": {"type": "boolean"},
            "retention_days": schema_int(1, HI.MAX_RETENTION_DAYS),
            "readers": {"oneOf": [
                {"type": "string", "pattern": HI.READER_ARN_PATTERN.pattern},
                {"type": "array", "maxItems": HI.MAX_READERS, "uniqueItems": True,
                 "items": {"type": "string", "pattern": HI.READER_ARN_PATTERN.pattern}},
            ]},
        },
        description=DESCRIPTIONS[""]["history"],
    )


def schema_text() -> str:
    return json.dumps(platform_schema(), indent=2) + "\n"
