"""``gpu-share kueue manifests CONFIG -o DIR``: the Kueue objects of a config as YAML files."""

from __future__ import annotations

import argparse
from pathlib import Path

from cdk_gpu_share.backends.kueue.manifests import KIND_ORDER, config_objects, to_yaml
from cdk_gpu_share.cli._parser import add_config_argument
from cdk_gpu_share.core.config import load_config
from cdk_gpu_share.core.errors import ConfigError, Problem

#: The file each kind is written to, numbered in the order the objects are applied.
FILES = {kind: f"{i:02d}-{kind.lower()}.yaml" for i, kind in enumerate(KIND_ORDER, 1)}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("kueue", help="the Kueue objects of a config (kueue manifests)")
    sub = parser.add_subparsers(dest="kueue_command", metavar="{manifests}")
    sub.required = True
    p = sub.add_parser("manifests", help="write the config's Kueue objects (namespaces, ResourceFlavors, Cohort,"
                       " ClusterQueues, LocalQueues, WorkloadPriorityClasses) as YAML, one file per kind")
    add_config_argument(p, help="platform config (YAML) with a kueue section")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="directory to write into (created if missing); `-` prints one YAML stream")
    p.set_defaults(func=_manifests)


def write_manifests(objects: list[dict], out: Path) -> list[Path]:
    """Write ``objects`` into ``out``, one file per kind in the order they are applied; the paths written.

    A file of this layout for a kind that has no objects any more (an earlier run's priority
    classes) is removed, so that applying the directory applies exactly the config."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for kind, name in FILES.items():
        of_kind = [o for o in objects if o["kind"] == kind]
        path = out / name
        if of_kind:
            path.write_text(to_yaml(of_kind))
            written.append(path)
        elif path.is_file():
            path.unlink()
    return written


def _manifests(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    objects = config_objects(config)
    if not objects:
        raise ConfigError(Problem("kueue", None, "is not in the config", "add a kueue section (see examples/kueue.yaml)"),
                          source=args.config)
    if args.output == "-":
        print(to_yaml(objects), end="")
        return 0
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise ConfigError(Problem("--output", args.output, "is a file, not a directory", "name a directory"),
                          source=args.config)
    written = write_manifests(objects, out)
    print(f"wrote {len(objects)} objects to {len(written)} files in {out}")
    return 0


__all__ = ["FILES", "register", "write_manifests"]
