"""``gpu-share mig check`` and ``gpu-share mig layouts``.

    gpu-share mig check (--gpu GPU | --instance-type ML_TYPE) PROFILE [PROFILE ...]
    gpu-share mig layouts (--gpu GPU | --instance-type ML_TYPE) [--json]

``check`` exits 0 when the profiles fit one GPU and prints them as an endpoint's ``layout:``
line, ready to paste into the config, with their placement as a comment
(``layout: [mig-3g.40gb, mig-3g.40gb]  # placement: mig-3g.40gb@0 mig-3g.40gb@4``); it exits 1
with the reason when they do not fit, 2 on an unknown GPU, instance type or profile.
``layouts`` lists every maximal layout once, each as such a line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable

from cdk_gpu_share.core import mig
from cdk_gpu_share.core.errors import ConfigError


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
    sub = parser.add_subparsers(dest="mig_command", metavar="{check,layouts}")
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
