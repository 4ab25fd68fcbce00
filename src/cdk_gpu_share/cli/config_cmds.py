"""`gpu-share validate`, `gpu-share plan`, `gpu-share guard` and `gpu-share summary`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cdk_gpu_share.cli._files import replace_file
from cdk_gpu_share.cli._parser import add_config_argument
from cdk_gpu_share.core.configuration import backends
from cdk_gpu_share.core.configuration.parse import PlatformConfig, deploy_problems, load_config, objective_warnings
from cdk_gpu_share.core.errors import ConfigError, GpuShareError, Problem
from cdk_gpu_share.core.plan import fleet_plan, format_plan, summarize
from cdk_gpu_share.core.text import plural


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a platform config; list every problem",
                       description="Check a platform config as synth would, before anything is built: every problem "
                                   "at once, each naming the field, the value and the fix (exit 2). A valid config "
                                   "gets a summary of its teams and backends, and warnings for what is valid but "
                                   "probably not meant.")
    add_config_argument(p, help="platform config (YAML)")
    p.add_argument("--json", action="store_true",
                   help='one JSON object: {"valid": true, ...} or {"valid": false, "problems": [...]} (exit 2)')
    p.set_defaults(func=_validate)

    p = sub.add_parser("plan", help="each team's guarantee, strategy, borrow limit and most it could use",
                       description="Print, per backend, each team's guarantee, sharing, borrow cap and the most it "
                                   "could use, in instances and GPUs, then what the platform bills while no job runs "
                                   "and the next steps (such as who may submit for each team).")
    add_config_argument(p, help="platform config (YAML)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    p.set_defaults(func=_plan)

    p = sub.add_parser(
        "guard", help="print the tag guard for a config: the SCP that protects job tags and team identity tags",
        description="Print the tag guard of a config: a service control policy that lets only "
                    "security.administrators set the tags a team's identity and its jobs carry, so that a team "
                    "without assumed_by cannot be impersonated by tagging oneself. Attach it to the account or "
                    "its OU (aws organizations create-policy, then attach-policy). It is printed without "
                    "whitespace and checked against the 5,120 characters of one SCP; when it is longer, -o DIR "
                    "writes it as several SCPs.")
    add_config_argument(p, help="platform config (YAML)")
    p.add_argument("--partition", default="aws", help="AWS partition of the Batch ARNs (default: aws)")
    p.add_argument("-o", "--output-dir", metavar="DIR",
                   help="write the guard as SCP files in this existing folder (gpu-share-guard.json, or"
                        " gpu-share-guard-1.json, -2 ... when it is longer than one SCP may be) instead of printing it")
    p.set_defaults(func=_guard)

    p = sub.add_parser("schema", help="print the JSON Schema of platform.yaml (for editors and CI)",
                       description="Print the JSON Schema of platform.yaml: an editor with a YAML language server "
                                   "completes and checks the config with it (gpu-share schema > platform.schema.json, "
                                   "then a first line # yaml-language-server: $schema=./platform.schema.json).")
    p.set_defaults(func=_schema)

    p = sub.add_parser("summary", help="summarize a synthesized cloud assembly (cdk.out)",
                       description="Summarize a synthesized cloud assembly: its stacks, each team's quota (and "
                                   "what it may borrow), the guarantees added up per backend and instance type "
                                   "(plan's fleet line), the platform's parts (the job archive and the share monitor included) and what "
                                   "costs money while nothing runs.")
    p.add_argument("assembly", nargs="?", default="cdk.out", help="cdk.out folder (default: cdk.out)")
    p.set_defaults(func=_summary)


def _deployable(path: str) -> PlatformConfig:
    """The config at ``path``, refused as a whole when something in it cannot be deployed."""
    config = load_config(path)
    problems = deploy_problems(config)
    if problems:
        raise ConfigError(problems, source=path)
    return config


def _validate(args: argparse.Namespace) -> int:
    if not args.json:
        print(summarize(config := _deployable(args.config)))
        _warn(config)
        return 0
    try:
        config = _deployable(args.config)
        _warn(config)
    except ConfigError as exc:
        print(json.dumps({
            "valid": False,
            "source": exc.source or args.config,
            "problems": [{"field": p.field, "value": _jsonable(p.value), "message": p.message, "fix": p.fix}
                         for p in exc.problems],
        }, indent=2))
        return 2
    plan = fleet_plan(config)
    print(json.dumps({
        "valid": True,
        "source": args.config,
        "platform": config.name,
        "teams": [t.name for t in config.teams],
        "backends": {b: {"strategy": d["strategy"], "teams": sorted({r["team"] for r in d["teams"]}),
                         "capacity": {it: {"instances": t["capacity"], "gpus": t["capacity_gpus"]}
                                      for it, t in d["totals"].items()}}
                     for b, d in plan["backends"].items()},
        "inference_endpoints": [e["endpoint"] for e in plan["inference"]],
        "alerts": None if config.alerts is None else {"emails": list(config.alerts.emails),
                                                      "topic_arn": config.alerts.topic_arn},
        "idle_costs": plan["idle_costs"],
    }, indent=2))
    return 0


def _jsonable(value: object) -> object:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


def _schema(args: argparse.Namespace) -> int:
    from cdk_gpu_share.core.configuration.schema import schema_text

    print(schema_text(), end="")
    return 0


def _plan(args: argparse.Namespace) -> int:
    from cdk_gpu_share.core.policy.guard import identity_warnings

    config = load_config(args.config)
    plan = fleet_plan(config)
    if args.json:
        print(json.dumps(plan, indent=2))
    else:
        print(format_plan(plan))
    for line in identity_warnings(config, args.config):
        print(line, file=sys.stderr)
    _warn(config)
    return 0


def _warn(config: PlatformConfig) -> None:
    """The config's warnings on standard error: valid, but probably not what was meant."""
    for line in objective_warnings(config):
        print(line, file=sys.stderr)


def _guard(args: argparse.Namespace) -> int:
    from cdk_gpu_share.core.policy.guard import (
        SCP_MAX_CHARACTERS,
        compact,
        guard_policy,
        identity_tag_keys,
        split_guard,
    )

    config = load_config(args.config)
    policy = guard_policy(config, args.partition)
    parts = split_guard(policy)  # ConfigError: a statement alone too long, or too many SCPs
    if args.output_dir is not None:
        _write_guard(parts, args.output_dir)
    elif len(parts) > 1:
        raise GpuShareError(
            f"the guard is {len(compact(policy)):,} characters, above the {SCP_MAX_CHARACTERS:,} AWS Organizations"
            f" allows in one SCP; pass -o DIR to write it as {len(parts)} SCPs of at most {SCP_MAX_CHARACTERS:,}"
            f" characters ({', '.join(p.name for p in parts)}) and attach them together, or write fewer, wider"
            " security.administrators patterns (a common path such as arn:aws:iam::111122223333:role/admins/*)")
    else:
        # Compact: the API and the CLI count whitespace against the limit, only the console strips it.
        print(parts[0].text)
    if config.security is None:
        keys = ", ".join(identity_tag_keys(config))
        print(f"note: {args.config} names no security.administrators, so this guard lets nobody set {keys} on a"
              " principal or session, not even the role that deploys the team stacks (they tag their roles with"
              " it); name your administrators and that role in security.administrators", file=sys.stderr)
    return 0


def _write_guard(parts: list, folder: str) -> None:
    """Write each SCP of the guard as ``<name>.json`` in ``folder`` (:func:`replace_file`: a link of
    that name is replaced, never followed) and say what to attach."""
    from cdk_gpu_share.core.policy.guard import GUARD_NAME

    where = Path(folder)
    if not where.is_dir():
        raise GpuShareError(f"-o {folder}: is not a folder; create it first (mkdir -p {folder}) or name another")
    paths = [where / f"{part.name}.json" for part in parts]
    taken = [p for p in paths if p.is_dir() and not p.is_symlink()]
    if taken:
        raise GpuShareError(f"-o {folder}: holds a folder named {taken[0].name}, where an SCP file goes; remove or"
                            " rename it, or name another folder")
    for part, path in zip(parts, paths):
        try:
            replace_file(path, part.text + "\n")
        except OSError as exc:
            raise GpuShareError(f"-o {folder}: cannot write {path} ({exc.strerror or exc}); name a folder you can"
                                " write") from None
        print(f"wrote {path}: SCP {part.name}, {len(part.text):,} characters,"
              f" {plural(len(part.document['Statement']), 'statement')}")
    if len(parts) > 1:
        print(f"attach all {len(parts)} to the same root, OU or account: together they deny what the guard denies")
    for path in sorted(p for p in where.glob(f"{GUARD_NAME}*.json") if p not in paths):
        print(f"note: {path} is not part of this guard (left from an earlier run?); do not attach it", file=sys.stderr)


def _summary(args: argparse.Namespace) -> int:
    out = Path(args.assembly)
    manifest = out / "manifest.json"
    if not manifest.exists():
        why = "does not exist" if not out.exists() else "holds no manifest.json, so it is not a cloud assembly"
        fix = "run `cdk synth` first (`make synth` in a clone of the repository), or pass the cdk.out folder"
        raise ConfigError(Problem("ASSEMBLY", str(out), why, fix), label="no cloud assembly")
    data = json.loads(manifest.read_text())
    counts: dict[str, int] = {}
    stacks = []
    quotas: list[str] = []
    guaranteed: dict[str, dict[str, float]] = {}
    for name, art in sorted(data.get("artifacts", {}).items()):
        if art.get("type") != "aws:cloudformation:stack":
            continue
        template = json.loads((out / art["properties"]["templateFile"]).read_text())
        resources = template.get("Resources", {})
        stacks.append((name, len(resources)))
        for res in resources.values():
            counts[res["Type"]] = counts.get(res["Type"], 0) + 1
            quotas.extend(_describe(res))
            _add_guarantees(guaranteed, res)
    print(f"{len(stacks)} stacks in {out}/:")
    for name, n in stacks:
        print(f"  {name:<40} {n:>3} resources")
    interesting = _resource_labels()
    shown = [f"{counts[t]} {_singular(label) if counts[t] == 1 else label}" for t, label in interesting if counts.get(t)]
    if shown:
        print("  " + ", ".join(shown))
    if quotas:
        print("quotas, shares and endpoints:")
        for line in quotas:
            print(f"  {line}")
        for line in _guaranteed_lines(guaranteed):
            print(f"  {line}")
    templates = _templates(out, data)
    archive = _archive_lines(templates)
    if archive:
        print("job archive (history.enabled: false goes without it):")
        for line in archive:
            print(f"  {line}")
    monitors = _monitor_lines(templates)
    if monitors:
        print("share monitor (batch_quota.monitor.enabled: false goes without it):")
        for line in monitors:
            print(f"  {line}")
    schedules = _schedule_lines(templates)
    if schedules:
        print("time windows (each boundary runs the quota window switcher, in the window's time zone):")
        for line in schedules:
            print(f"  {line}")
    kept = _retained_lines(templates)
    if kept:
        print("kept by cdk destroy (delete by hand when no longer wanted):")
        for line in kept:
            print(f"  {line}")
    idle = _idle_costs(out, data)
    print("costs money while idle:" if idle else "costs money while idle: nothing found in the templates")
    for line in idle:
        print(f"  - {line}")
    return 0


#: What the summary counts besides each backend's own types (``BackendSpec.resource_labels``).
_PLATFORM_LABELS = (
    ("AWS::Lambda::Function", "Lambda functions"),
    ("Custom::GpuShareMigEndpoint", "MIG-partitioned endpoints"),
    ("Custom::GpuShareMigInferenceComponent", "inference components on MIG partitions"),
    ("AWS::SageMaker::Endpoint", "whole-GPU SageMaker endpoints"),
    ("AWS::SageMaker::InferenceComponent", "inference components"),
    ("AWS::CloudWatch::Dashboard", "dashboards"),
)


def _resource_labels() -> list[tuple[str, str]]:
    """The types the summary counts: each backend's, in the order of the backends, then the platform's."""
    labels = [label for spec in backends.registered() for label in spec.resource_labels] + list(_PLATFORM_LABELS)
    return list(dict(labels).items())


def _singular(label: str) -> str:
    """'compute environments' -> 'compute environment'; 'inference components on MIG partitions' likewise."""
    head, sep, tail = label.partition(" on ")
    if head.endswith("ies"):
        head = head[:-3] + "y"
    elif head.endswith("s") and not head.endswith("ss"):
        head = head[:-1]
    return head + sep + tail


def _templates(out: Path, data: dict) -> list[tuple[str, dict]]:
    found = []
    for name, art in sorted(data.get("artifacts", {}).items()):
        if art.get("type") == "aws:cloudformation:stack":
            found.append((name, json.loads((out / art["properties"]["templateFile"]).read_text())))
    return found


def _archive_lines(templates: list[tuple[str, dict]]) -> list[str]:
    """The job archive of each stack that has one: its bucket, delivery stream and rules."""
    lines = []
    for name, template in templates:
        resources = template.get("Resources", {})
        streams = {k for k, r in resources.items() if r["Type"] == "AWS::KinesisFirehose::DeliveryStream"}
        for res in resources.values():
            props = res.get("Properties", {})
            if res["Type"] == "AWS::KinesisFirehose::DeliveryStream":
                dest = props.get("ExtendedS3DestinationConfiguration", {})
                bucket = dest.get("BucketARN", {})
                logical = bucket.get("Fn::GetAtt", ["?"])[0] if isinstance(bucket, dict) else str(bucket)
                rules = dest.get("ProcessingConfiguration", {}).get("Processors", [])
                expiry = [r.get("ExpirationInDays") for r in resources.get(logical, {}).get("Properties", {})
                          .get("LifecycleConfiguration", {}).get("Rules", []) if r.get("ExpirationInDays")]
                lines.append(f"{name}: bucket {logical} ({'KMS-encrypted, ' if dest.get('EncryptionConfiguration') else ''}"
                             f"objects expire after {expiry[0] if expiry else '?'} days)")
                lines.append(f"{name}: delivery stream, {dest.get('CompressionFormat', 'UNCOMPRESSED')}"
                             f"{', one event a line' if any(p.get('Type') == 'AppendDelimiterToRecord' for p in rules) else ''},"
                             f" prefix {dest.get('Prefix')}")
            elif res["Type"] == "AWS::Events::Rule":
                pattern = props.get("EventPattern", {})
                kinds = pattern.get("detail-type", [])
                targets = [(t.get("Arn") or {}).get("Fn::GetAtt", [None])[0] for t in props.get("Targets", [])
                           if isinstance(t.get("Arn"), dict)]
                if any(str(t).startswith("Batch") for t in kinds) and streams & set(targets):
                    queues = pattern.get("detail", {}).get("jobQueue")
                    lines.append(f"{name}: rule {', '.join(kinds)}"
                                 + (f" of {plural(len(queues), 'queue')}" if isinstance(queues, list) else ""))
    return lines


#: The description of the share monitor's function (backends/batch_quota/construct.py).
MONITOR_FUNCTION = "Publishes per-team metrics of a Batch quota-management queue (cdk-gpu-share)"


def _monitor_lines(templates: list[tuple[str, dict]]) -> list[str]:
    """The share monitor of each stack that has one: how often it reads the queue, what it publishes."""
    lines = []
    for name, template in templates:
        resources = template.get("Resources", {})
        functions = {k for k, r in resources.items() if r["Type"] == "AWS::Lambda::Function"
                     and r.get("Properties", {}).get("Description") == MONITOR_FUNCTION}
        for res in resources.values():
            props = res.get("Properties", {})
            targets = {(t.get("Arn") or {}).get("Fn::GetAtt", [None])[0] for t in props.get("Targets", [])
                       if isinstance(t.get("Arn"), dict)}
            if res["Type"] == "AWS::Events::Rule" and props.get("ScheduleExpression") and functions & targets:
                every = str(props["ScheduleExpression"]).removeprefix("rate(").removesuffix(")")
                lines.append(f"{name}: a function reads the queue's quota shares every {every} and publishes each"
                             " team's use, borrowing, waits and preemptions as custom CloudWatch metrics (billed"
                             " per metric and month), with a dashboard and alarms")
    return lines


def _schedule_lines(templates: list[tuple[str, dict]]) -> list[str]:
    """Each EventBridge Scheduler schedule of a window boundary: the window, its edge, the cron
    and the time zone it is read in."""
    lines = []
    for name, template in templates:
        for res in template.get("Resources", {}).values():
            if res["Type"] != "AWS::Scheduler::Schedule":
                continue
            props = res.get("Properties", {})
            try:
                target = json.loads(props.get("Target", {}).get("Input") or "{}")
            except (TypeError, ValueError):
                target = {}
            if not isinstance(target, dict) or "window" not in target:
                continue
            edge = "opens" if target.get("boundary") == "open" else "closes"
            lines.append(f"{name}: {target['window']} {edge} {props.get('ScheduleExpression')}"
                         f" {props.get('ScheduleExpressionTimezone', 'UTC')}")
    return sorted(lines)


#: The resource types ``summary`` names when a stack keeps them on ``cdk destroy``.
_KEPT_LABELS = {"AWS::S3::Bucket": "S3 bucket", "AWS::KMS::Key": "KMS key", "AWS::Logs::LogGroup": "log group",
                "AWS::Logs::LogStream": "log stream", "AWS::DynamoDB::Table": "DynamoDB table"}


def _retained_lines(templates: list[tuple[str, dict]]) -> list[str]:
    """Per stack, the resources ``cdk destroy`` leaves behind (``DeletionPolicy: Retain``), counted by type."""
    lines = []
    for name, template in templates:
        counts: dict[str, int] = {}
        for res in template.get("Resources", {}).values():
            if res.get("DeletionPolicy") in ("Retain", "RetainExceptOnCreate"):
                label = _KEPT_LABELS.get(res["Type"], res["Type"])
                counts[label] = counts.get(label, 0) + 1
        if counts:
            lines.append(f"{name}: " + ", ".join(plural(n, label) for label, n in counts.items()))
    return lines


def _idle_costs(out: Path, data: dict) -> list[str]:
    """What the synthesized templates bill while no job runs."""
    lines = []
    for name, template in _templates(out, data):
        resources = list(template.get("Resources", {}).values())
        for res in resources:
            props = res.get("Properties", {})
            kind = res["Type"]
            if kind == "AWS::EC2::NatGateway":
                lines.append(f"{name}: a NAT gateway (billed per hour and per GB processed)")
            elif kind == "AWS::Batch::ComputeEnvironment":
                compute = props.get("ComputeResources", {})
                minv = compute.get("MinvCpus", 0)
                if isinstance(minv, int) and minv > 0:
                    types = ", ".join(compute.get("InstanceTypes", []))
                    lines.append(f"{name}: a compute environment keeps {minv} min vCPUs of {types} running")
            elif kind == "Custom::GpuShareMigEndpoint":
                lines.append(f"{name}: endpoint {props.get('EndpointBaseName')}: "
                             f"{plural(props.get('InstanceCount'), 'instance')} of {props.get('InstanceType')}, always on")
            elif kind == "AWS::SageMaker::EndpointConfig":
                for v in props.get("ProductionVariants", []):
                    if "InitialInstanceCount" in v:
                        lines.append(f"{name}: endpoint variant {v.get('VariantName')}: "
                                     f"{plural(v['InitialInstanceCount'], 'instance')} of {v.get('InstanceType')}, always on")
        keys = sum(1 for r in resources if r["Type"] == "AWS::KMS::Key")
        if keys:
            lines.append(f"{name}: {plural(keys, 'customer-managed KMS key')} (billed monthly)")
    return lines


def _add_guarantees(guaranteed: dict[str, dict[str, float]], resource: dict) -> None:
    """Add what ``resource`` guarantees a team to its backend's sums, per instance type."""
    for spec in backends.registered():
        for it, n in spec.deployed_guarantee(resource).items():
            per = guaranteed.setdefault(spec.key, {})
            per[it] = per.get(it, 0.0) + n


def _guaranteed_lines(guaranteed: dict[str, dict[str, float]]) -> list[str]:
    """Per backend and instance type, the deployed guarantees added up: ``plan``'s fleet line."""
    from cdk_gpu_share.core.plan import amount_text

    return [f"{key} {it}: guaranteed {amount_text(n, it)} in all" for key, per in guaranteed.items()
            for it, n in sorted(per.items())]


def _describe(resource: dict) -> list[str]:
    """One line per team quota, share or endpoint found in a template resource, amounts with units."""
    lines = [line for spec in backends.registered() for line in spec.describe_resource(resource)]
    return lines + _describe_endpoint(resource)


def _describe_endpoint(resource: dict) -> list[str]:
    """A MIG-partitioned endpoint or one of its inference components, in one line."""
    props = resource.get("Properties", {})
    kind = resource["Type"]
    if kind == "Custom::GpuShareMigEndpoint":
        from cdk_gpu_share.core.catalog import instances

        layout = props.get("Layout", [])
        info = instances.lookup(str(props.get("InstanceType")))
        count = props.get("InstanceCount")
        total = ""
        if info is not None and isinstance(count, int):
            total = f", {plural(count * info.gpus * len(layout), 'MIG partition')} on {plural(count * info.gpus, 'GPU')}"
        return [
            f"endpoint {props.get('EndpointBaseName')}: {plural(count, 'instance')} of"
            f" {props.get('InstanceType')}, every GPU split {' + '.join(layout)}"
            f" ({plural(len(layout), 'MIG partition')} per GPU{total})"
        ]
    if kind == "Custom::GpuShareMigInferenceComponent":
        copies = props.get("CopyCount")
        low, high = props.get("MinCopyCount"), props.get("MaxCopyCount")
        scale = f", autoscaled {low}..{high}" if low is not None and high is not None and low != high else ""
        return [f"model {props.get('ComponentBaseName')}: {plural(copies, 'copy')} on "
                f"{props.get('AcceleratorPartitionType')} MIG partitions (one each){scale}"]
    return []


__all__ = ["register"]
