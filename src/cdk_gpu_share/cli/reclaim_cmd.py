"""``gpu-share reclaim plan [FILE]``: run the reclaim planner on a JSON state.

FILE (or standard input when FILE is absent or ``-``) holds the state described in
docs/reclaim-planner.md; the plan is written to standard output as JSON. Invalid
input (not JSON, an unreadable file, a bad field) exits 2 with a one-line message.
"""

from __future__ import annotations

import argparse
import json
import sys

from cdk_gpu_share.core.errors import ConfigError, GpuShareError
from cdk_gpu_share.core.validation import load_json

STDIN = "-"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "reclaim",
        help="plan which running jobs to stop so teams get back the capacity they lent",
        description="Plan which running jobs to stop so that teams get back the capacity they lent.",
    )
    sub = parser.add_subparsers(dest="reclaim_command", metavar="SUBCOMMAND")
    sub.required = True
    plan_parser = sub.add_parser(
        "plan",
        help="print the reclaim plan for a cluster state (JSON in, JSON out)",
        description=(
            "Read a cluster state (JSON: now, capacity, settings, teams, jobs) from FILE or "
            "standard input and print the plan (preemptions, served, waiting, teams) as JSON."
        ),
    )
    plan_parser.add_argument(
        "file", metavar="FILE", nargs="?", default=STDIN,
        help="JSON state file; standard input when absent or '-'",
    )
    plan_parser.add_argument(
        "--compact", action="store_true", help="print the plan on one line instead of indented",
    )
    plan_parser.set_defaults(func=run_plan)


def _read(path: str) -> tuple[str, str]:
    """The text of the state and a name for it in messages."""
    if path == STDIN:
        try:
            return sys.stdin.read(), "standard input"
        except UnicodeDecodeError as exc:
            raise GpuShareError(f"standard input is not UTF-8 text ({exc.reason}); pass a JSON state") from None
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read(), path
    except UnicodeDecodeError as exc:
        raise GpuShareError(f"{path} is not UTF-8 text ({exc.reason}); pass a JSON state file") from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise GpuShareError(f"cannot read {path}: {reason}; pass a readable JSON state file or '-' for stdin") from None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def load_state(path: str) -> tuple[object, str]:
    """Parse the JSON state at ``path`` ('-' for standard input), through the validation toolkit:
    line and column on a syntax error; numbers with too many digits are refused by field."""
    text, source = _read(path)
    state = load_json(text, source=source, what="a JSON object with now, capacity, teams and jobs",
                      label="invalid reclaim state")
    return state, source


def run_plan(args: argparse.Namespace) -> int:
    from cdk_gpu_share.core.policy import reclaim

    state, source = load_state(args.file)
    try:
        result = reclaim.plan(state)
    except ConfigError as exc:
        problems = "; ".join(_one_line(str(p)) for p in exc.problems)
        count = len(exc.problems)
        head = "invalid reclaim state" + (f" in {source}" if source else "")
        if count > 1:
            head += f" ({count} problems)"
        raise GpuShareError(f"{head}: {problems}") from None
    if args.compact:
        text = json.dumps(result, separators=(",", ":"))
    else:
        text = json.dumps(result, indent=2)
    sys.stdout.write(text + "\n")
    return 0
