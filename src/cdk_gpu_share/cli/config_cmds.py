"""`gpu-share validate`, `gpu-share plan` and `gpu-share summary`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cdk_gpu_share.core.config import BACKENDS, load_config
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.plan import fleet_plan, format_plan, summarize


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a platform config; list every problem")
    p.add_argument("config", help="platform config (YAML)")
    p.set_defaults(func=_validate)

    p = sub.add_parser("plan", help="each team's guarantee, strategy, borrow limit and most it could use")
    p.add_argument("config", help="platform config (YAML)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    p.set_defaults(func=_plan)

    p = sub.add_parser("schema", help="print the JSON Schema of platform.yaml (for editors and CI)")
    p.set_defaults(func=_schema)

    p = sub.add_parser("summary", help="summarize a synthesized cloud assembly (cdk.out)")
    p.add_argument("assembly", nargs="?", default="cdk.out", help="cdk.out folder (default: cdk.out)")
    p.set_defaults(func=_summary)


def _validate(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    print(summarize(config))
    return 0


def _schema(args: argparse.Namespace) -> int:
    from cdk_gpu_share.core.config_schema import schema_text

    print(schema_text(), end="")
    return 0


def _plan(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    plan = fleet_plan(config)
    if args.json:
        print(json.dumps(plan, indent=2))
    else:
        print(format_plan(plan))
    return 0


def _summary(args: argparse.Namespace) -> int:
    out = Path(args.assembly)
    manifest = out / "manifest.json"
    if not manifest.exists():
        why = "does not exist" if not out.exists() else "holds no manifest.json, so it is not a cloud assembly"
        raise ConfigError(Problem("ASSEMBLY", str(out), why, "run `make synth` first, or pass the cdk.out folder"),
                          label="no cloud assembly")
    data = json.loads(manifest.read_text())
    counts: dict[str, int] = {}
    stacks = []
    quotas: list[str] = []
    for name, art in sorted(data.get("artifacts", {}).items()):
        if art.get("type") != "aws:cloudformation:stack":
            continue
        template = json.loads((out / art["properties"]["templateFile"]).read_text())
        resources = template.get("Resources", {})
        stacks.append((name, len(resources)))
        for res in resources.values():
            counts[res["Type"]] = counts.get(res["Type"], 0) + 1
            quotas.extend(_describe_quota(res))
    print(f"{len(stacks)} stacks in {out}/:")
    for name, n in stacks:
        print(f"  {name:<40} {n:>3} resources")
    interesting = [
        ("AWS::Batch::ServiceEnvironment", "service environments"),
        ("AWS::Batch::JobQueue", "job queues"),
        ("AWS::Batch::SchedulingPolicy", "scheduling policies"),
        ("AWS::Batch::QuotaShare", "quota shares"),
        ("AWS::SageMaker::ClusterSchedulerConfig", "HyperPod cluster policies"),
        ("AWS::SageMaker::ComputeQuota", "HyperPod compute quotas"),
        ("AWS::Batch::ComputeEnvironment", "compute environments"),
        ("AWS::Batch::JobDefinition", "job definitions"),
        ("AWS::Batch::ConsumableResource", "consumable resources"),
        ("AWS::Lambda::Function", "Lambda functions"),
        ("Custom::GpuShareMigEndpoint", "MIG-partitioned endpoints"),
        ("Custom::GpuShareMigInferenceComponent", "inference components on MIG partitions"),
        ("AWS::SageMaker::Endpoint", "whole-GPU SageMaker endpoints"),
        ("AWS::SageMaker::InferenceComponent", "inference components"),
        ("AWS::CloudWatch::Dashboard", "dashboards"),
    ]
    shown = [f"{counts[t]} {label}" for t, label in interesting if counts.get(t)]
    if shown:
        print("  " + ", ".join(shown))
    if quotas:
        print("quotas and endpoints:")
        for line in quotas:
            print(f"  {line}")
    return 0


def _describe_quota(resource: dict) -> list[str]:
    """One line per team quota found in a template resource."""
    props = resource.get("Properties", {})
    if resource["Type"] == "AWS::Batch::QuotaShare":
        limits = ", ".join(f"{c['MaxCapacity']} {c['CapacityUnit']}" for c in props.get("CapacityLimits", []))
        sharing = props.get("ResourceSharingConfiguration", {})
        borrow = sharing.get("BorrowLimit")
        extra = "" if borrow is None else f", borrow limit {'unlimited' if borrow == -1 else f'{borrow}%'}"
        return [f"{props.get('QuotaShareName')}: batch quota share, {limits}, {sharing.get('Strategy')}{extra}"]
    if resource["Type"] == "Custom::GpuShareMigEndpoint":
        return [
            f"endpoint {props.get('EndpointBaseName')}: {props.get('InstanceCount')} x {props.get('InstanceType')},"
            f" every GPU split {' + '.join(props.get('Layout', []))}"
        ]
    if resource["Type"] == "AWS::SageMaker::ComputeQuota":
        cfg = props.get("ComputeQuotaConfig", {})
        parts = []
        for r in cfg.get("ComputeQuotaResources", []):
            amounts = [f"{r[k]} {k.lower()}" for k in ("Count", "Accelerators", "VCpu", "MemoryInGiB") if k in r]
            if "AcceleratorPartition" in r:
                amounts.append(f"{r['AcceleratorPartition']['Count']}x {r['AcceleratorPartition']['Type']}")
            parts.append(f"{r['InstanceType']} {' '.join(amounts)}")
        strategy = cfg.get("ResourceSharingConfig", {}).get("Strategy")
        return [f"{props.get('ComputeQuotaTarget', {}).get('TeamName')}: HyperPod compute quota, {'; '.join(parts)}, {strategy}"]
    return []


__all__ = ["register", "BACKENDS"]
