"""``gpu-share status [--queue NAME] [--config CONFIG] [--json] [--region R]``: a live, read-only view.

Reads a running AWS Batch job queue and prints, per team, the capacity it uses, its
guarantee, what it borrows and the jobs waiting. The backend whose kind of queue it is reads
it (:func:`readers`): a **quota-management** queue (``jobQueueType`` ``SAGEMAKER_TRAINING``)
its quota shares, guarantees included (:mod:`cdk_gpu_share.backends.batch_quota.status`;
``--config`` optional, it names the teams expected on the queue); a **classic** fair-share
queue its jobs, with the guarantees of the config (``--config``) and the reclaim planner's
view of the next cycle, which is only printed (:mod:`cdk_gpu_share.backends.fairshare.status`).

With a config that declares time windows, the report adds the window in force and whether each
team's deployed values are that window's (:mod:`cdk_gpu_share.cli.status_windows`).

A table by default; ``--json`` prints one JSON object for scripts. AWS errors (no
credentials, no region, queue not found, access denied, network) exit 2 with one line
naming the queue and the fix.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from cdk_gpu_share.cli import _aws
from cdk_gpu_share.cli._aws import queues_of
from cdk_gpu_share.cli._parser import add_config_argument
from cdk_gpu_share.cli._progress import ProgressBar
from cdk_gpu_share.cli._region import resolve_region
from cdk_gpu_share.core.errors import ConfigError, GpuShareError, Problem
from cdk_gpu_share.core.text import format_table


def readers() -> list[Any]:
    """The status reader of each backend that has one (``BackendSpec.status``), in the order of the backends.

    A reader is a module with ``KIND`` (the report's kind), ``ACTIONS`` (the IAM actions reading
    the queue needs), ``reads(detail)`` (whether a ``DescribeJobQueues`` entry is its kind of
    queue), ``report(client, queue, detail, config, *, now, sleep)`` and ``format(report)``.
    """
    from cdk_gpu_share.core.configuration import backends

    return [importlib.import_module(spec.status) for spec in backends.registered() if spec.status]


#: Days of the job archive read for an expected start (``--history s3://BUCKET``).
ARCHIVE_DAYS = 14
#: Bytes a history file (``--history JOBS.csv``) may hold: about a million finished jobs, far more
#: than the weeks an expected start learns from.
MAX_HISTORY_BYTES = 64 * 1024 * 1024


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "status",
        help="each team's live usage, guarantee, borrowed capacity and waiting jobs on a Batch queue",
        description=(
            "Read a running AWS Batch job queue (read-only) and print each team's usage, guarantee, "
            "borrowed capacity and waiting jobs. A classic fair-share queue needs --config (the "
            "guarantees); a quota-management queue reads them from its quota shares. Without --queue, "
            "the queue of the config when it declares one. With a config that declares time windows, "
            "also the window in force and whether each team's deployed values are its."
        ),
    )
    parser.add_argument("--queue", metavar="NAME",
                        help="job queue name or ARN (default: the config's queue, when it has one)")
    add_config_argument(parser, required=False, help="platform config (YAML); required for a classic queue")
    parser.add_argument("--job", metavar="ID", help="explain why this waiting job waits, in the terms of the policy, "
                        "and when it is expected to start (with --history)")
    parser.add_argument("--history", metavar="JOBS.csv",
                        help="with --job: the finished jobs the expected start is learnt from: a gpu-share trace "
                             f"export, or s3://BUCKET[/PREFIX], the job archive (its last {ARCHIVE_DAYS} days)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--region", metavar="R", help="AWS region of the queue and of the job archive of "
                        "--history s3://BUCKET (default: the queue ARN's, else "
                        "AWS_REGION, else AWS_DEFAULT_REGION, else your AWS configuration's)")
    parser.set_defaults(func=run_status)


# ---------------------------------------------------------------------------
# AWS client and errors


#: The clock and the pause between retries (tests replace them).
_now: Callable[[], float] = time.time
_sleep: Callable[[float], None] = time.sleep


def make_client(region: str | None) -> Any:
    """The Batch client ``status`` uses (tests replace this function)."""
    import boto3

    return boto3.client("batch", region_name=region)


def make_sagemaker_client(region: str | None) -> Any:
    """The SageMaker client that reads HyperPod compute quotas for the time windows (tests replace it)."""
    import boto3

    return boto3.client("sagemaker", region_name=region)


def region_of_arn(queue: str) -> str | None:
    """The region of a job queue ARN (``arn:aws:batch:REGION:ACCOUNT:job-queue/NAME``), else None."""
    parts = queue.split(":")
    if len(parts) >= 6 and parts[0] == "arn" and parts[2] == "batch" and parts[3]:
        return parts[3]
    return None


def _region_of(client: Any, region: str | None) -> str | None:
    return region or getattr(getattr(client, "meta", None), "region_name", None)


def aws_error(exc: Exception, queue: str, region: str | None, actions: tuple[str, ...] | None = None, *,
              what: str | None = None, service: str = "AWS Batch") -> GpuShareError | None:
    """The one line of an AWS error (:func:`cdk_gpu_share.cli._aws.aws_error`); ``actions`` by default
    those of the first backend's reader (before the queue's kind is known)."""
    actions = readers()[0].ACTIONS if actions is None else actions
    return _aws.aws_error(exc, queue, region, actions, what=what, service=service)


# ---------------------------------------------------------------------------
# The command


def run_status(args: argparse.Namespace) -> int:
    config = None
    history = getattr(args, "history", None)
    if history and not getattr(args, "job", None):
        raise ConfigError(Problem("--history", history, "needs --job",
                                  "add --job ID: the history is used to estimate one waiting job's start"))
    if history and not history.startswith("s3://") and not os.path.isfile(history):
        raise ConfigError(Problem("--history", history, "is not a readable file",
                                  "pass a job trace CSV, as gpu-share trace export writes"))
    if args.config:
        from cdk_gpu_share.core.configuration.parse import load_config

        config = load_config(args.config)  # ConfigError: exit 2 before any AWS call
    if not args.queue and not getattr(args, "job", None) and config is not None and config.windows \
            and not queues_of(config):
        return _windows_only(args, config)  # no Batch queue (HyperPod, Kueue): the windows alone
    queue = args.queue or _only_queue(config)
    region = args.region or region_of_arn(queue)
    client = None
    actions: tuple[str, ...] | None = None
    try:
        region = resolve_region(region)  # None: boto3 raises NoRegionError, one line below
        client = make_client(region)
        from cdk_gpu_share.aws import quota_reader

        detail = quota_reader.describe_queue(client, queue)
        reader = next(r for r in readers() if r.reads(detail))
        actions = reader.ACTIONS
        if getattr(args, "job", None):
            now = _now()
            live = getattr(reader, "explain_live", None)
            missing = None if live is None else _no_estimate(config, reader.KEY, history)
            if live is None or missing:  # the queue is read for the reasons only
                report = reader.explain(client, queue, detail, config, args.job, now=now, sleep=_sleep)
                jobs = []
            else:
                report, jobs = live(client, queue, detail, config, args.job, now=now, sleep=_sleep)
            if live is not None and report["state"] in ("waiting", "runnable"):  # a classic job, a service job
                report["eta"] = missing or _estimate(report, jobs, config, reader.KEY, str(history), now,
                                                     _region_of(client, region))
        else:
            now = _now()
            report = reader.report(client, queue, detail, config, now=now, sleep=_sleep)
            if config is not None and config.windows:
                report["windows"] = _windows(config, now, client, region)
    except GpuShareError:
        raise
    except Exception as exc:  # botocore errors become one line; anything else is a bug
        err = aws_error(exc, queue, _region_of(client, region), actions)
        if err is None:
            raise
        raise err from None
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=False))
    elif getattr(args, "job", None):
        print(format_explanation(report))
    else:
        print(format_report(report))
    return 0


def _windows_only(args: argparse.Namespace, config: Any) -> int:
    """``status`` of a config with windows and no Batch queue: the window in force and the check of
    each backend's deployed values, and nothing else to read."""
    from cdk_gpu_share.cli.status_windows import format_windows, windows_report

    hyperpod = config.backend("hyperpod")
    try:  # the cluster's region, unless --region says otherwise
        region = resolve_region(args.region or (hyperpod.cluster_arn.split(":")[3] if hyperpod is not None else None))
    except Exception:  # noqa: BLE001 - a profile that is not there: the backends' reads say so, one line each
        region = None
    clients = {"batch": lambda: make_client(region), "sagemaker": lambda: make_sagemaker_client(region)}
    report = {"windows": windows_report(config, _now(), lambda service: clients[service]())}
    print(json.dumps(report, indent=2) if args.json else "\n".join(format_windows(report["windows"])))
    return 0


def _windows(config: Any, now: float, batch: Any, region: str | None) -> dict[str, Any]:
    """The window in force and whether each team's deployed values are its
    (:mod:`cdk_gpu_share.cli.status_windows`)."""
    from cdk_gpu_share.cli.status_windows import windows_report

    clients = {"batch": lambda: batch, "sagemaker": lambda: make_sagemaker_client(_region_of(batch, region))}
    return windows_report(config, now, lambda service: clients[service]())


def _only_queue(config: Any) -> str:
    """The one Batch queue of ``config``, for a ``status`` without ``--queue``."""

    queues = sorted(queues_of(config)) if config is not None else []
    if len(queues) == 1:
        return queues[0]
    if not queues:
        fix = ("pass --queue NAME (the job queue to read)" if config is None
               else "pass --queue NAME: the config declares no Batch queue (batch_quota or fairshare)")
        raise ConfigError(Problem("--queue", None, "is missing", fix))
    raise ConfigError(Problem("--queue", None, f"is missing and the config has {len(queues)} queues",
                              f"pass one of them: {' or '.join(f'--queue {q}' for q in queues)}"))


def _archive_history(url: str, config: Any, backend: str, now: float, region: str | None) -> Any:
    """The jobs the job archive ``url`` (``s3://BUCKET[/PREFIX]``) saw end in its last
    :data:`ARCHIVE_DAYS` days, rebuilt as ``gpu-share trace export`` rebuilds them, read in
    ``region``: the queue's, as ``--region`` (or :func:`~cdk_gpu_share.cli._region.resolve_region`)
    chose it, since the platform stack deploys both."""
    from cdk_gpu_share.aws import history_reader
    from cdk_gpu_share.cli import trace_export_cmd as tx
    from cdk_gpu_share.core.eta import FinishedJob, History
    from cdk_gpu_share.core.records import history

    bucket, _, prefix = url[len("s3://"):].partition("/")
    if not bucket:
        raise ConfigError(Problem("--history", url, "names no bucket", "give s3://BUCKET, the platform stack's "
                                  "JobHistoryBucketName output"))
    prefix = prefix or tx.DEFAULT_PREFIX
    end = datetime.fromtimestamp(now, timezone.utc)
    first = end - timedelta(days=ARCHIVE_DAYS)
    what = f"the job archive s3://{bucket}/{prefix}"
    stats = history_reader.ArchiveRead()
    bar = ProgressBar(sys.stderr, "reading the job archive")
    try:
        records = history_reader.read_archive(
            tx.make_client("s3", region), bucket, prefix, f"{first:%Y-%m-%d}", f"{end:%Y-%m-%d}", stats=stats,
            progress=lambda done, total: bar.show(done / total if total else 1.0, f"{done}/{total} objects"))
        lookup = history.lookup_from_config(config, backend, queues_of(config))
        export = history.reconstruct(records, lookup, start_ms=int(first.timestamp() * 1000), end_ms=int(now * 1000))
    except ValueError as exc:
        raise GpuShareError(f"cannot read {what}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - botocore errors become one line
        raise tx._aws_error(exc, what, region, tx.ACTIONS["archive"], tx.SERVICES["archive"]) from None
    finally:
        bar.close()
    if stats.skipped:  # the estimate rests on fewer jobs than the archive holds: one line says why
        print(f"warning: {what}: skipped " + ", ".join(f"{n:,} {why}" for why, n in sorted(stats.skipped.items()))
              + " (gpu-share trace export --json names the first object of each)", file=sys.stderr)
    return History([FinishedJob(team=j.team, submit=j.submit_ms / 1000.0, duration_s=j.duration_ms / 1000.0,
                                gpus=float(j.gpus), priority=j.priority, gpus_exact=j.gpus)
                    for j in export.jobs if (j.runs[-1][1] if j.runs else j.submit_ms) <= now * 1000])


def format_explanation(report: dict[str, Any]) -> str:
    """Why one job waits, as sentences; then, for a waiting job, when it is expected to start."""
    from cdk_gpu_share.core.eta.live import sentence

    head = f"Job {report['job']} of team {report.get('team') or '?'} on {report['queue']}: {report['state']}"
    if not report.get("reasons"):
        lines = [head + (f" ({report['note']})" if report.get("note") else "")]
    else:
        lines = [head + ", because:", *(f"  - {r['text']}" for r in report["reasons"])]
    if "eta" in report:
        text = sentence(report["eta"], report.get("team") or "?")
        lines.append(text[:1].upper() + text[1:])
    return "\n".join(lines)


def _no_estimate(config: Any, backend: str, history_path: str | None) -> dict[str, Any] | None:
    """Why no start can be estimated (the ``eta`` of the report), or None when it can."""
    if config is None or config.backend(backend) is None:
        return {"none": f"the policy to replay is not known; pass --config with the {backend} section that "
                        "deployed this queue"}
    if history_path is None:
        return {"none": "no history of finished jobs to learn durations from; pass --history JOBS.csv "
                        "(gpu-share trace export writes one from the job archive)"}
    return None


def _estimate(report: dict[str, Any], jobs: list[Any], config: Any, backend: str, history_path: str,
              now: float, region: str | None) -> dict[str, Any]:
    """The expected start of the waiting job of ``report`` (:func:`cdk_gpu_share.core.eta.live.live_estimate`),
    replaying the policy of ``backend`` in ``config`` with the finished jobs of ``history_path``."""
    from cdk_gpu_share.core import eta
    from cdk_gpu_share.core import scenario as sc
    from cdk_gpu_share.core import simulate as sim
    from cdk_gpu_share.core.records import history as archive

    scenario = sim.parse_scenario(sc.scenario_from_config(config, backend), source=f"{config.source} ({backend})")
    poll = sc.poll_seconds_of(config, backend) or sim.DEFAULT_POLL_SECONDS
    if history_path.startswith("s3://"):
        finished = _archive_history(history_path, config, backend, now, region)
    else:
        # The reader of every job trace (eta --trace, simulate --trace): one line for a file that is
        # not a UTF-8 CSV (a gzip export, say), or too large.
        trace = sim.load_jobs(history_path, scenario, option="--history", max_bytes=MAX_HISTORY_BYTES)
        with open(history_path, newline="", encoding="utf-8") as fh:
            first = fh.readline()
        try:
            origin = archive.origin_seconds(archive.read_header(first))
        except ValueError as exc:
            raise ConfigError(Problem("--history", history_path, str(exc),
                                      "pass the file gpu-share trace export wrote, with its header as written")) from None
        finished = eta.history_of(trace, origin=origin, now=now)
    state, left_out = eta.live_state(now, jobs, scenario)
    if state.pending_job(report["job"]) is None:
        return {"none": "its size or its team is not known to the config (no instance type it knows in the "
                        "request, or a team it does not declare), so it cannot be replayed"}
    estimate = eta.live_estimate(scenario, state, report["job"], finished, poll_seconds=poll)
    if left_out:
        estimate["left_out"] = left_out  # jobs of teams the config does not have: not replayed
    return estimate


# ---------------------------------------------------------------------------
# Rendering


def fmt_num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(int(value)) if isinstance(value, (int, float)) else str(value)


def fmt_duration(seconds: float | None) -> str:
    """``3725`` -> ``1h 2m``; None -> ``-``."""
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {(s % 3600) // 60:02d}m"
    return f"{s // 86400}d {(s % 86400) // 3600:02d}h"


def table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    return format_table(headers, rows, right=right, rule=False)


def stamp(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def format_report(report: dict[str, Any]) -> str:
    """The readable table of a report, by the reader of its kind, then the time windows' lines."""
    text = next(r for r in readers() if r.KIND == report.get("kind")).format(report)
    if report.get("windows"):
        from cdk_gpu_share.cli.status_windows import format_windows

        text += "\n" + "\n".join(format_windows(report["windows"]))
    return text


__all__ = ["aws_error", "fmt_duration", "fmt_num", "format_report", "make_client", "readers", "register", "run_status",
           "stamp", "table"]
