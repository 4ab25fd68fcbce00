"""``gpu-share usage CONFIG --from DAY --to DAY [--queue Q] [--csv | --json]``: GPU-hours per team and day.

Reads back from CloudWatch the per-minute metrics the platform publishes (the share monitor's
for Batch quota management, the reclaimer's for the fair-share queue) and prints, per team and
UTC day: GPU-hours used within the guarantee, borrowed, lent, the idle guarantee, and
preemptions (:mod:`cdk_gpu_share.core.records.usage` defines each). What a platform team sends as
chargeback. The totals reconcile: within + idle = guarantee x hours for each team; over the
teams, borrowed = lent + unguaranteed capacity used (the ``(unguaranteed)`` row).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from cdk_gpu_share.cli._aws import aws_error, queues_of
from cdk_gpu_share.cli._parser import add_config_argument, parse_day
from cdk_gpu_share.cli._region import resolve_region
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.text import format_table

#: Tests replace these.
_now: Callable[[], float] = lambda: datetime.now(timezone.utc).timestamp()  # noqa: E731

#: CloudWatch keeps one-minute data points this long (then only 5-minute and hourly ones): the
#: oldest minute ``usage`` can read back.
MINUTE_RETENTION = timedelta(days=15)
#: What the report says of a queue without a single reading in the range.
NO_DATA = "no data"


def make_client(region: str | None) -> Any:
    """The CloudWatch client ``usage`` reads with (tests replace this function)."""
    import boto3

    return boto3.client("cloudwatch", region_name=region)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "usage",
        help="GPU-hours per team and day: used within the guarantee, borrowed, lent, idle, preemptions",
        description=("Read back the per-minute metrics of the platform's queues (CloudWatch GetMetricData) and print, "
                     "per team and UTC day, GPU-hours used within the guarantee, borrowed, lent and left idle, and "
                     "preemptions: a chargeback report. Minute data is kept 15 days by CloudWatch."),
    )
    add_config_argument(p, metavar="PLATFORM.yaml", help="the platform config (its queues and teams)")
    p.add_argument("--from", dest="start", required=True, metavar="DAY",
                   help="first day, YYYY-MM-DD (UTC), at most 15 days ago (CloudWatch keeps minute data 15 days)")
    p.add_argument("--to", dest="end", required=True, metavar="DAY",
                   help="last day, YYYY-MM-DD (UTC), included, up to today")
    p.add_argument("--queue", metavar="NAME", help="one queue of the config (default: each of them)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--csv", action="store_true", help="print CSV, one row per team and day")
    out.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--region", metavar="R", help="AWS region of the metrics (default: AWS_REGION, else "
                   "AWS_DEFAULT_REGION, else your AWS configuration's)")
    p.set_defaults(func=run_usage)


def _days(first: str, last: str, now: float) -> tuple[datetime, datetime]:
    """``--from`` and ``--to`` as UTC midnights, refused (naming the option and the fix) unless
    they make a range CloudWatch still holds minute data for: not after today, the first day
    not older than :data:`MINUTE_RETENTION`."""
    start, end = parse_day("--from", first), parse_day("--to", last)
    today = datetime.fromtimestamp(now, timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    # The first whole day CloudWatch still holds every minute of.
    oldest = (datetime.fromtimestamp(now, timezone.utc) - MINUTE_RETENTION).replace(
        hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    day = "%Y-%m-%d"
    if end < start:
        raise ConfigError(Problem("--to", last, f"is before --from {first}", "give a last day on or after the first"))
    if start > today:
        raise ConfigError(Problem("--from", first, f"is after today ({today:{day}}, UTC): there is no data yet",
                                  f"give a first day up to {today:{day}}"))
    if end > today:
        raise ConfigError(Problem("--to", last, f"is after today ({today:{day}}, UTC): there is no data yet",
                                  f"give a last day up to {today:{day}}"))
    if start < oldest:
        raise ConfigError(Problem(
            "--from", first, f"is older than CloudWatch keeps one-minute data ({MINUTE_RETENTION.days} days)",
            f"give --from {oldest:{day}} or later (and --to up to {today:{day}})"))
    return start, end


def run_usage(args: argparse.Namespace) -> int:
    from cdk_gpu_share.aws import metrics_reader
    from cdk_gpu_share.core.configuration.parse import load_config
    from cdk_gpu_share.core.records import usage

    config = load_config(args.config)
    start, last = _days(args.start, args.end, _now())
    queues = queues_of(config)
    if args.queue is not None:
        if args.queue not in queues:
            raise ConfigError(Problem("--queue", args.queue, "is not a queue of the config",
                                      f"use one of {', '.join(queues) or '(none)'}"))
        queues = {args.queue: queues[args.queue]}
    if not queues:
        raise ConfigError(Problem("config", config.source or config.name, "declares no Batch queue",
                                  "add batch_quota or fairshare to the config"))
    end = min((last + timedelta(days=1)).timestamp(), _now() + 60)  # up to the current minute, included
    report: dict[str, Any] = {"from": args.start, "to": args.end, "queues": {}}
    client = None
    region = args.region
    for queue, (teams, capacity) in queues.items():
        try:
            # Made here, so that a missing region or an unknown profile is one line too.
            if client is None:
                region = resolve_region(args.region)  # None: boto3 raises NoRegionError, one line below
                client = make_client(region)
            series, calls = metrics_reader.read_series(client, queue, teams, start.timestamp(), end)
        except Exception as exc:  # noqa: BLE001 - botocore errors become one line
            err = aws_error(exc, queue, region, ("cloudwatch:GetMetricData",), what=f"the metrics of queue {queue!r}",
                            service="Amazon CloudWatch")
            if err is None:
                raise
            raise err from None
        rows = usage.daily(series, capacity_gpus=capacity)
        # A range without a single reading proves nothing: it says so instead of the identities.
        report["queues"][queue] = {"days": [r.to_json() for r in rows], "requests": calls,
                                   "check": _check(rows) if rows else None}
    print(_render(report, csv_out=args.csv, json_out=args.json))
    if args.csv:
        for queue, q in report["queues"].items():
            if q["check"] is None:
                print(f"gpu-share usage: {NO_DATA} for queue {queue} from {args.start} to {args.end}", file=sys.stderr)
    return 0


def _check(rows: list[Any]) -> dict[str, Any]:
    """The two identities, over the whole period (GPU-hours)."""
    from cdk_gpu_share.core.records.usage import POOL

    teams = [r for r in rows if r.team != POOL]
    off = max((abs(r.within_gpu_hours + r.idle_gpu_hours - r.guarantee_gpu_hours) for r in teams), default=0.0)
    borrowed = math.fsum(r.borrowed_gpu_hours for r in teams)
    lent = math.fsum(r.lent_gpu_hours for r in teams)
    pool = math.fsum(r.borrowed_gpu_hours for r in rows if r.team == POOL)
    return {"within_plus_idle_is_guarantee": off < 1e-6, "borrowed_gpu_hours": round(borrowed, 6),
            "lent_gpu_hours": round(lent, 6), "unguaranteed_gpu_hours": round(pool, 6),
            "borrowed_is_lent_plus_unguaranteed": abs(borrowed - lent - pool) < 1e-6}


HEADERS = ["day", "team", "within guarantee", "borrowed", "lent", "idle guarantee", "preemptions", "minutes"]


def _cells(r: dict[str, Any]) -> list[str]:
    return [r["day"], r["team"], f"{r['within_gpu_hours']:.2f}", f"{r['borrowed_gpu_hours']:.2f}",
            f"{r['lent_gpu_hours']:.2f}", f"{r['idle_gpu_hours']:.2f}", f"{r['preemptions']:g}", str(r["minutes"])]


def _render(report: dict[str, Any], *, csv_out: bool, json_out: bool) -> str:
    if json_out:
        return json.dumps(report, indent=2)
    if csv_out:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["queue", *HEADERS])
        for queue, q in report["queues"].items():
            for r in q["days"]:
                w.writerow([queue, *_cells(r)])
        return buf.getvalue().rstrip("\n")
    lines: list[str] = []
    for queue, q in report["queues"].items():
        c = q["check"]
        if c is None:
            lines += [f"Queue {queue}, {report['from']} to {report['to']} (UTC): {NO_DATA}: CloudWatch holds no reading"
                      " of the platform's metrics for it in this range (is the queue deployed, and in --region?)", ""]
            continue
        lines += [f"Queue {queue}, {report['from']} to {report['to']} (UTC), GPU-hours:"]
        lines += format_table(HEADERS, [_cells(r) for r in q["days"]], right={2, 3, 4, 5, 6, 7}, indent="  ")
        lines.append(f"  check: within + idle = guarantee x hours for every team: "
                     f"{'yes' if c['within_plus_idle_is_guarantee'] else 'NO'}; borrowed {c['borrowed_gpu_hours']:.2f}"
                     f" = lent {c['lent_gpu_hours']:.2f} + unguaranteed {c['unguaranteed_gpu_hours']:.2f}: "
                     f"{'yes' if c['borrowed_is_lent_plus_unguaranteed'] else 'NO'}")
        lines.append("")
    return "\n".join(lines).rstrip("\n")


__all__ = ["make_client", "queues_of", "register", "run_usage"]  # queues_of: from cli._aws
