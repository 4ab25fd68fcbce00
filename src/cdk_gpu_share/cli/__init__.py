"""The ``gpu-share`` command line.

Each subcommand lives in its own module of this package and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a callable
taking the parsed arguments and returning the exit code. Exit codes: 0 success,
1 a negative answer (for example ``mig check`` on profiles that do not fit),
2 bad input (a one-line message on standard error, never a traceback).

Every parser is a :class:`~cdk_gpu_share.cli._parser.Parser`: a mistyped option or
subcommand gets a suggestion, and a command that reads a platform config takes it as a
positional argument or as ``--config`` (:func:`~cdk_gpu_share.cli._parser.add_config_argument`).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import sys
from collections.abc import Sequence

import cdk_gpu_share
from cdk_gpu_share.cli._parser import Parser
from cdk_gpu_share.core.errors import GpuShareError

#: The distribution that installs the ``gpu-share`` command.
DISTRIBUTION = "cdk-gpu-share"

# Modules that register subcommands, in the order they appear in --help.
SUBCOMMAND_MODULES = [
    "cdk_gpu_share.cli.init_cmd",  # init
    "cdk_gpu_share.cli.config_cmds",  # validate, plan, summary
    "cdk_gpu_share.cli.reclaim_cmd",  # reclaim plan
    "cdk_gpu_share.inference.cli",  # mig check, mig layouts
    "cdk_gpu_share.cli.simulate_cmd",  # simulate, trace convert
    "cdk_gpu_share.cli.advise_cmd",  # advise
    "cdk_gpu_share.cli.eta_cmd",  # eta
    "cdk_gpu_share.cli.status_cmd",  # status
    "cdk_gpu_share.cli.usage_cmd",  # usage
    "cdk_gpu_share.backends.kueue.cli",  # kueue manifests
]


def package_version() -> str:
    """The installed version of cdk-gpu-share; the package's own ``__version__`` when it runs
    from a source tree that was not installed."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return cdk_gpu_share.__version__


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="gpu-share",
        description="Validate, plan, simulate and explain a shared GPU platform.",
    )
    parser.add_argument("--version", action="version", version=f"gpu-share {package_version()}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # not written yet
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except GpuShareError as exc:
        print(f"gpu-share {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
