"""``gpu-share mig check``, ``gpu-share mig layouts`` and ``gpu-share mig fit``.

    gpu-share mig check (--gpu GPU | --instance-type ML_TYPE) PROFILE [PROFILE ...]
    gpu-share mig layouts (--gpu GPU | --instance-type ML_TYPE) [--json]
    gpu-share mig fit MODELS.yaml [--gpu GPU | --instance-type ML_TYPE ...] [--json] [-o OUT] [--isolate-teams]

``check`` exits 0 when the profiles fit one GPU and prints them as an endpoint's ``layout:``
line, ready to paste into the config, with their placement as a comment
(``layout: [mig-3g.40gb, mig-3g.40gb]  # placement: mig-3g.40gb@0 mig-3g.40gb@4``); it exits 1
with the reason when they do not fit, 2 on an unknown GPU, instance type or profile.
``layouts`` lists every maximal layout once, each as such a line. ``fit`` sizes each model's
partition and prices the cheapest endpoints that hold every copy (:mod:`cdk_gpu_share.inference.fit`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

import cdk_gpu_share.inference.fit as F
from cdk_gpu_share.cli._files import check_output, write_output
from cdk_gpu_share.cli._progress import ProgressBar
from cdk_gpu_share.core import validation as V
from cdk_gpu_share.core.catalog import instances, mig
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.text import format_table
from cdk_gpu_share.inference.config import check_endpoint, parse_inference


def _add_target(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--gpu", metavar="GPU", help=f"GPU model: {', '.join(mig.GPUS)}")
    group.add_argument(
        "--instance-type",
        metavar="ML_TYPE",
        help=f"SageMaker instance type: {', '.join(mig.INSTANCE_TYPES)}",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "mig",
        help="check MIG partition layouts and list the ones that fit",
        description="MIG partition layouts for SageMaker Inference: check that profiles "
        "fit one GPU, or list every maximal layout.",
    )
    sub = parser.add_subparsers(dest="mig_command", metavar="{check,layouts,fit}")
    sub.required = True

    chk = sub.add_parser(
        "check",
        help="do these profiles fit together on one GPU?",
        description="Exit 0 and print the profiles as an endpoint's layout: line (with their placement) "
        "when they fit one GPU; exit 1 with the reason when they do not; exit 2 on an unknown GPU, "
        "instance type or profile.",
    )
    _add_target(chk)
    chk.add_argument("profiles", nargs="+", metavar="PROFILE", help="e.g. mig-3g.40gb")
    chk.set_defaults(func=run_check)

    lay = sub.add_parser(
        "layouts",
        help="list every maximal layout (no further profile fits)",
        description="List every maximal MIG layout of a GPU, each once.",
    )
    _add_target(lay)
    lay.add_argument("--json", action="store_true", help="print one JSON array")
    lay.set_defaults(func=run_layouts)

    fit = sub.add_parser(
        "fit",
        help="size each model's partition and price the cheapest endpoints that hold them all",
        description="Print, per model and GPU, the smallest MIG profile that holds one copy (memory: weights,"
        " KV cache, overhead, headroom; compute: slices for the throughput it must serve), then the cheapest"
        " variants (instance type, layout, instance count) that hold every copy, beside the price of whole"
        " GPUs. Exit 2 on a bad models file or a model MIG cannot serve.",
    )
    fit.add_argument("models", metavar="MODELS.yaml", help="the models: name, copies, memory_gib or what estimates it")
    group = fit.add_mutually_exclusive_group()
    group.add_argument("--gpu", metavar="GPU", help=f"only instance types with this GPU: {', '.join(mig.GPUS)}")
    group.add_argument("--instance-type", metavar="ML_TYPE", nargs="+", default=[],
                       help=f"only these instance types: {', '.join(mig.INSTANCE_TYPES)}")
    fit.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    fit.add_argument("-o", "--output", metavar="OUT",
                     help="write the plan as a platform config's inference: section (models need image and memory_mb)")
    fit.add_argument("--isolate-teams", action="store_true",
                     help="never put models of different teams on one variant (one variant per team at least)")
    fit.add_argument("--prices", choices=PRICE_SOURCES, default="catalog",
                     help="catalog: the dated on-demand prices shipped with the package (us-east-1); aws: read the"
                          " current ones from the AWS Price List API (pricing:GetProducts) for --region. The models"
                          " file's prices: win either way")
    fit.add_argument("--region", metavar="R",
                     help="with --prices aws, the region of the endpoints (default: AWS_REGION, else"
                          " AWS_DEFAULT_REGION, else your AWS configuration's, else us-east-1)")
    fit.set_defaults(func=run_fit)


#: Where ``mig fit`` takes the prices it does not find in the models file.
PRICE_SOURCES = ("catalog", "aws")
#: The region priced when ``--prices aws`` finds none: the catalog's.
DEFAULT_PRICE_REGION = "us-east-1"


def make_pricing_client(endpoint: str) -> Any:
    """The Price List API client ``mig fit --prices aws`` reads with (tests replace this function)."""
    import boto3

    return boto3.client("pricing", region_name=endpoint)


def _aws_prices(args: argparse.Namespace, types: Sequence[str]) -> tuple[dict[str, float], str]:
    """The Price List's on-demand prices of ``types`` for the endpoints' region, and that region;
    a credential, network or permission failure is one line."""
    from cdk_gpu_share.aws import price_reader
    from cdk_gpu_share.cli._aws import aws_error
    from cdk_gpu_share.cli._region import resolve_region

    what = "SageMaker's on-demand prices"
    service = "the AWS Price List API"
    try:
        region = resolve_region(args.region) or DEFAULT_PRICE_REGION
        endpoint = price_reader.pricing_endpoint(region)
        bar = ProgressBar(sys.stderr, "reading prices")
        try:
            prices = price_reader.read_prices(make_pricing_client(endpoint), types, region,
                                              progress=lambda done, total: bar.show(done / total, f"{done}/{total} types"))
        finally:
            bar.close()
    except Exception as exc:  # noqa: BLE001 - botocore errors become one line
        err = aws_error(exc, what, args.region, price_reader.ACTIONS, what=what, service=service)
        if err is None:
            raise
        raise err from None
    return prices, region


def _argument_errors(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """MIG errors raised on command-line values are argument errors, not configuration errors."""

    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except mig.MigError as exc:
            raise ConfigError(exc.problems, label="invalid argument") from None

    return run


@_argument_errors
def run_check(args: argparse.Namespace) -> int:
    gpu = mig.resolve_gpu(gpu=args.gpu, instance_type=args.instance_type)
    result = mig.check(gpu, args.profiles)
    if result.fits:
        assert result.placement is not None
        print(layout_line([name for name, _ in result.placement], f"placement: {mig.format_placement(result.placement)}"))
        return 0
    print(f"does not fit one {gpu} GPU: {result.reason}")
    return 1


@_argument_errors
def run_layouts(args: argparse.Namespace) -> int:
    gpu = mig.resolve_gpu(gpu=args.gpu, instance_type=args.instance_type)
    found = mig.layouts(gpu)
    if args.json:
        json.dump([layout.to_dict() for layout in found], sys.stdout)
        sys.stdout.write("\n")
        return 0
    where = f"{args.instance_type} ({gpu})" if args.instance_type else gpu
    print(
        f"{len(found)} maximal MIG layouts on {where}: "
        f"{mig.COMPUTE_SLICES} compute and {mig.MEMORY_SLICES} memory slices per GPU"
    )
    for layout in found:
        items = [mig.profile(gpu, name) for name in layout.profiles]
        compute = sum(p.compute_slices for p in items)
        memory = sum(p.memory_slices for p in items)
        print("  " + layout_line(
            layout.profiles, f"{layout}, compute {compute}/{mig.COMPUTE_SLICES}, memory {memory}/{mig.MEMORY_SLICES}"
        ))
    return 0


def layout_line(profiles: Iterable[str], comment: str) -> str:
    """``layout: [...]  # comment``: a line of an endpoint in the config, as ``layout:`` reads it."""
    return f"layout: {mig.format_layout(profiles)}  # {comment}"


# --------------------------------------------------------------------------- mig fit


def _targets(args: argparse.Namespace) -> tuple[str | None, list[str]]:
    """``--gpu`` and ``--instance-type`` checked against the MIG catalog (exit 2 on a typo)."""
    gpu = mig.resolve_gpu(gpu=args.gpu) if args.gpu else None
    types = [t.strip().lower() for t in args.instance_type]
    for t in types:
        mig.resolve_gpu(instance_type=t)
    return gpu, types


def _gib(x: float | None) -> str:
    return "measured" if x is None else f"{x:.1f}"


def _usd(x: float) -> str:
    return f"${x:,.2f}/h"


def _price(x: float | None) -> str:
    return "unpriced" if x is None else _usd(x)


def _cost(plan: F.Plan, x: float) -> str:
    """A cost in the plan's unit: the hourly price, or GPUs when the plan is unpriced."""
    return _usd(x) if plan.priced else f"{x:g} GPUs"


def _memory_lines(models: Sequence[F.ModelSpec], gpus: Sequence[str]) -> list[str]:
    rows = []
    for m in models:
        mem = F.memory(m)
        rows.append([m.name, _gib(mem.weights_gib), _gib(mem.kv_cache_gib), _gib(mem.overhead_gib),
                     f"{mem.headroom_gib:.1f}", f"{mem.total_gib:.1f}", str(F.compute_slices(m)), F.set_by(m),
                     *[F.smallest_profile(m, g) or "-" for g in gpus]])
    headers = ["model", "weights", "KV cache", "overhead", "headroom", "total GiB", "slices", "set by", *gpus]
    return ["Each copy needs (GiB; headroom up to gpu_memory_utilization; - : more than a whole GPU):",
            *format_table(headers, rows, indent="  ")]


def _plan_lines(plan: F.Plan, models: Sequence[F.ModelSpec], whole: float, whole_types: Mapping[str, int]) -> list[str]:
    by_name = {m.name: m for m in models}
    head = (f"Cheapest plan: {_usd(plan.cost)}" if plan.priced
            else f"Fewest GPUs (unpriced): {plan.gpus} GPUs"
            + ("" if plan.hourly_usd is None else f", {_usd(plan.hourly_usd)}"))
    out = [f"{head}, {plan.instances} instance(s) in {len(plan.variants)} variant(s)"
           + ("" if plan.exact else f" (not proven optimal: at most {plan.gap:.0%} above the lower bound"
                                     f" {_cost(plan, plan.lower_bound)})")]
    for i, v in enumerate(plan.variants, 1):
        out.append(f"  variant {i}: {v.instance_count} x {v.candidate.instance_type} ({v.candidate.gpu}),"
                   f" layout: {mig.format_layout(v.layout)}, {_price(v.hourly_usd)}")
        for name, profile in v.profiles:
            m = by_name[name]
            out.append(f"    {name}: {m.copies.max} copies on {profile}, +{F.demand(m) - m.copies.max} for rolling updates"
                       + (f" (team {m.team})" if m.team else ""))
    saving = whole - plan.cost
    on = ", ".join(f"{n} x {t}" for t, n in whole_types.items())
    out.append(f"Whole GPUs (each copy on its own GPU, {on}): {_cost(plan, whole)}; MIG saves {_cost(plan, saving)}"
               + (f" ({saving / whole:.0%})" if whole > 0 else ""))
    return out


def _shared_teams(plan: F.Plan, models: Sequence[F.ModelSpec]) -> list[int]:
    teams = {m.name: m.team for m in models}
    return [i for i, v in enumerate(plan.variants, 1) if len({teams[n] for n, _ in v.profiles} - {None}) > 1]


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _plan_json(plan: F.Plan, models: Sequence[F.ModelSpec], gpus: Sequence[str], whole: float) -> dict[str, Any]:
    return {
        "models": {m.name: {"memory": F.memory(m).to_dict(), "compute_slices": F.compute_slices(m),
                            "set_by": F.set_by(m), "profile": {g: F.smallest_profile(m, g) for g in gpus}}
                   for m in models},
        "variants": [{"instance_type": v.candidate.instance_type, "instance_count": v.instance_count,
                      "layout": list(v.layout), "hourly_usd": _round(v.hourly_usd), "gpus": v.gpus,
                      "copies": {n: [p] * by.copies.max for n, p in v.profiles
                                 for by in [next(m for m in models if m.name == n)]}}
                     for v in plan.variants],
        "priced": plan.priced,
        "hourly_usd": _round(plan.hourly_usd),
        "gpus": plan.gpus,
        ("whole_gpu_hourly_usd" if plan.priced else "whole_gpus"): round(whole, 4),
    }


def inference_section(plan: F.Plan, models: Sequence[F.ModelSpec]) -> dict[str, Any]:
    """The plan as a platform config's ``inference:`` section: one endpoint per variant."""
    by_name = {m.name: m for m in models}
    missing = [Problem(f"models[{i}]", m.name, "has no " + " or ".join(k for k in ("image", "memory_mb") if k not in m.serving),
                       "give image (the container) and memory_mb (host memory per copy) to write the inference: section")
               for i, m in enumerate(models) if not {"image", "memory_mb"} <= set(m.serving)]
    if missing:
        raise ConfigError(missing, label="cannot write -o")
    endpoints = []
    for i, v in enumerate(plan.variants, 1):
        entries = []
        for name, profile in v.profiles:
            m = by_name[name]
            entry: dict[str, Any] = {"name": name, **({"team": m.team} if m.team else {}), "profile": profile}
            c = m.copies
            entry["copies"] = c.max if c.min == c.max == c.initial else {"initial": c.initial, "min": c.min, "max": c.max}
            entry.update(m.serving)
            entries.append(entry)
        endpoints.append({"name": f"mig-fit-{i}", "instance_type": v.candidate.instance_type,
                          "instance_count": v.instance_count, "layout": list(v.layout), "models": entries})
    section = {"endpoints": endpoints}
    problems = V.Problems()
    teams = sorted({m.team for m in models if m.team})
    parsed = parse_inference(section, teams, problems.add)
    for e in parsed.endpoints if parsed else ():
        problems.items.extend(check_endpoint(e))
    problems.raise_if_any(label="the plan does not validate")
    return {"inference": section}


@_argument_errors
def run_fit(args: argparse.Namespace) -> int:
    if args.output:
        check_output(args.output, "-o", [args.models])  # before the search, and never over the models file
    gpu, types = _targets(args)
    source = str(args.models)
    data = F.parse_models(V.load_yaml(V.read_text(args.models, field="MODELS.yaml", what="a models file"), source=source),
                          source=source)
    read_from: str | None = None
    catalog: Mapping[str, float] = instances.ON_DEMAND_USD_PER_HOUR
    if args.prices == "aws":
        wanted = [t for t in (types or mig.INSTANCE_TYPES) if gpu is None or mig.INSTANCE_TYPES[t].gpu == gpu]
        catalog, read_from = _aws_prices(args, [t for t in wanted if t not in data.prices])
    elif args.region:
        raise ConfigError(Problem("--region", args.region, "prices only what --prices aws reads",
                                  "add --prices aws, or drop --region (the catalog's prices are us-east-1's)"),
                          label="invalid argument")
    choice = F.choose(data.models, *F.candidates(data.prices, gpu=gpu, instance_types=types, catalog=catalog))
    cands = list(choice.candidates)
    F.check_fits(data.models, cands)
    bar = ProgressBar(sys.stderr, "planning")
    try:
        plan = F.plan(data.models, cands, isolate_teams=args.isolate_teams, progress=lambda done: bar.show(done))
    finally:
        bar.close()
    if plan is None:  # every model fits some candidate, so a plan exists; kept for the type checker
        raise ConfigError(Problem("models", None, "no plan holds every model", "allow more instance types"))
    whole, whole_types = F.whole_gpu_cost(data.models, F.plan_types(plan, cands), isolate_teams=args.isolate_teams)
    # Another listed type may pack whole GPUs for less: said beside the saving, never inside it.
    cheapest, cheapest_types = F.whole_gpu_cost(data.models, cands, isolate_teams=args.isolate_teams)
    other = (cheapest, cheapest_types) if cheapest < whole - 1e-9 and set(cheapest_types) - set(whole_types) else None
    gpus = list(dict.fromkeys(c.gpu for c in cands))
    if args.output:
        text = yaml.safe_dump(inference_section(plan, data.models), sort_keys=False)
        cost = f"{_usd(plan.cost)} on-demand" if plan.priced else f"{plan.gpus} GPUs, unpriced"
        write_output(args.output, f"# gpu-share mig fit {Path(source).name}: {cost}\n{text}", "-o")
    if args.json:
        json.dump(_plan_json(plan, data.models, gpus, whole), sys.stdout)
        sys.stdout.write("\n")
        return 0
    lines = _memory_lines(data.models, gpus)
    lines += ["", *_plan_lines(plan, data.models, whole, whole_types)]
    if other is not None:
        on = ", ".join(f"{n} x {t}" for t, n in other[1].items())
        lines.append(f"Whole GPUs on a type the plan does not use ({on}) would cost {_cost(plan, other[0])}: "
                     f"the plan still saves {_cost(plan, other[0] - plan.cost)} against them")
    shared = _shared_teams(plan, data.models)
    if shared:
        lines.append(f"Variant(s) {', '.join(map(str, shared))} put models of different teams on one instance: "
                     f"{F.ISOLATION_NOTE} (--isolate-teams keeps teams apart)")
    lines.append(_prices_line(data.prices, choice, cands, read_from))
    if args.output:
        lines.append(f"Wrote the inference: section to {args.output}")
    print("\n".join(lines))
    return 0


def _prices_line(given: Mapping[str, float], choice: F.Choice, cands: Sequence[F.Candidate],
                 read_from: str | None = None) -> str:
    """Where the prices come from, and the types without one (left out, or the reason the plan counts GPUs)."""
    priced = "the file's prices" if given else "catalog prices"
    if read_from is None:
        line = f"Prices: {priced} where given, else {instances.PRICE_SOURCE}, as of {instances.PRICES_AS_OF}"
    else:
        today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
        line = (f"Prices: the file's prices where given, else the AWS Price List API, on-demand real-time inference"
                f" in {read_from}, read {today}")
    fix = "add them under prices:" + ("" if read_from else " or read them with --prices aws")
    if choice.left_out:
        return line + f"; not priced, left out: {', '.join(choice.left_out)} ({fix})"
    if not choice.priced:
        unpriced = [c.instance_type for c in cands if c.hourly_usd is None]
        return (line + f"; no price for {', '.join(unpriced)}: the plan has the fewest GPUs instead of the"
                f" lowest price ({fix})")
    return line
