"""``gpu-share kueue manifests CONFIG -o DIR``: the Kueue objects of a config as YAML files."""

from __future__ import annotations

import argparse
from pathlib import Path

from cdk_gpu_share.backends.kueue.manifests import KIND_ORDER, config_objects, to_yaml
from cdk_gpu_share.cli._files import replace_file
from cdk_gpu_share.cli._parser import add_config_argument
from cdk_gpu_share.core.configuration.parse import load_config
from cdk_gpu_share.core.errors import ConfigError, Problem

#: The file each kind is written to, numbered in the order the objects are applied.
FILES = {kind: f"{i:02d}-{kind.lower()}.yaml" for i, kind in enumerate(KIND_ORDER, 1)}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("kueue", help="the Kueue objects of a config (kueue manifests)",
                                   description="The Kueue objects of a config's kueue section, for a cluster "
                                               "managed from a GitOps repository rather than by the CDK.")
    sub = parser.add_subparsers(dest="kueue_command", metavar="{manifests}")
    sub.required = True
    p = sub.add_parser("manifests", help="write the config's Kueue objects (namespaces, ResourceFlavors, Cohort,"
                       " ClusterQueues, LocalQueues, WorkloadPriorityClasses) as YAML, one file per kind",
                       description="Write the Kueue objects of the config's kueue section (namespaces, "
                                   "ResourceFlavors, the Cohort, ClusterQueues, LocalQueues, WorkloadPriorityClasses) "
                                   "as YAML, one file per kind in the order they are applied, the same objects "
                                   "KueueQueues deploys. A file of a kind the config no longer has is removed.")
    add_config_argument(p, help="platform config (YAML) with a kueue section")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="directory to write into (created if missing); `-` prints one YAML stream")
    p.set_defaults(func=_manifests)


def _refusal(out: Path, message: str, fix: str) -> ConfigError:
    return ConfigError(Problem("--output", str(out), message, fix))


def write_manifests(objects: list[dict], out: Path) -> list[Path]:
    """Write ``objects`` into ``out``, one file per kind in the order they are applied; the paths written.

    A file of this layout for a kind that has no objects any more (an earlier run's priority
    classes) is removed, so that applying the directory applies exactly the config. Each file is
    written beside its name and renamed over it: a symbolic link of that name is replaced, never
    followed (it could point outside the directory). Raises ConfigError naming ``--output`` when
    the directory cannot be made or written, or holds a directory under a file's name; nothing is
    written then."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _refusal(out, f"cannot be created ({e.strerror or e})", "name a directory you can write to") from None
    taken = [name for name in FILES.values() if (out / name).is_dir() and not (out / name).is_symlink()]
    if taken:
        raise _refusal(out, f"holds a directory named {taken[0]}, where a manifest file goes",
                       "remove or rename that directory, or name another output directory")
    written = []
    try:
        for kind, name in FILES.items():
            of_kind = [o for o in objects if o["kind"] == kind]
            path = out / name
            if of_kind:
                replace_file(path, to_yaml(of_kind))
                written.append(path)
            elif path.is_symlink() or path.is_file():
                path.unlink()  # a link itself, not what it points to
    except OSError as e:
        raise _refusal(out, f"cannot be written ({e.strerror or e})", "name a directory you can write to") from None
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
