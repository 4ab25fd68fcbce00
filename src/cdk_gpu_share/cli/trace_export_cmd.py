"""``gpu-share trace export CONFIG --from DAY --to DAY [--source archive|batch|sagemaker] [-o JOBS.csv]``.

Writes the jobs the platform's teams really ran as the simulator's job trace, from the job
archive, or from what AWS Batch or SageMaker still list (:mod:`cdk_gpu_share.core.records.history`
rebuilds the jobs; :mod:`cdk_gpu_share.aws.history_reader` reads AWS). Times are seconds from
``--from`` at 00:00 UTC, which the header comment states.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timedelta
from typing import Any

from cdk_gpu_share.cli._aws import aws_error, queues_of
from cdk_gpu_share.cli._files import check_output, write_output
from cdk_gpu_share.cli._parser import add_config_argument, parse_day
from cdk_gpu_share.cli._progress import ProgressBar
from cdk_gpu_share.cli._region import no_region, resolve_region
from cdk_gpu_share.core.errors import ConfigError, GpuShareError, Problem

__all__ = ["ACTIONS", "SOURCES", "TAIL_DAYS", "add_parser", "make_client", "queues_by_kind", "run_export",
           "summary_json"]

#: Where the jobs are read from, in order of fidelity.
SOURCES = ("archive", "batch", "sagemaker")
#: What each source cannot tell (standard error, with the export's summary).
SOURCE_WARNINGS = {
    "batch": "AWS Batch lists and describes a job only for a limited time after it ends: older jobs are missing",
    "sagemaker": "SageMaker's CreationTime of a training job started from a quota share is when Batch dispatched"
                 " it, not when the team submitted it: submit times are dispatch times, so waits before dispatch are"
                 " not counted, and preemptions are not known",
}
#: The IAM actions each source needs (named when access is denied).
ACTIONS = {
    "archive": ("s3:ListBucket", "s3:GetObject", "kms:Decrypt"),
    "batch": ("batch:ListJobs", "batch:DescribeJobs", "batch:ListServiceJobs", "batch:DescribeServiceJob"),
    "sagemaker": ("sagemaker:ListTrainingJobs", "sagemaker:DescribeTrainingJob", "sagemaker:ListTags"),
}
SERVICES = {"archive": "Amazon S3", "batch": "AWS Batch", "sagemaker": "Amazon SageMaker"}
#: Days after ``--to`` whose records are read too: a job submitted by ``--to`` that ends later is
#: still exported when it ended within them (a job running longer is counted as unfinished).
TAIL_DAYS = 14
#: Object keys the archive writes under.
DEFAULT_PREFIX = "events/"


def make_client(service: str, region: str | None) -> Any:
    """The boto3 client ``trace export`` reads with (tests replace this function)."""
    import boto3

    return boto3.client(service, region_name=region)


def default_region() -> str | None:
    """The region without ``--region`` (:func:`~cdk_gpu_share.cli._region.resolve_region`; tests replace this
    function)."""
    return resolve_region()


def add_parser(tsub: argparse._SubParsersAction) -> None:
    e = tsub.add_parser(
        "export",
        help="write the jobs your teams really ran (from the platform's job archive) as a job trace",
        description=(
            "Write the jobs submitted between --from and --to (UTC days, both included) as the simulator's "
            "job trace, with each job's real wait, preemptions and borrowed GPU-seconds as extra columns. "
            "Times are seconds from --from at 00:00 UTC (the header comment says so). A job of a team or an "
            "instance type the config does not know is counted and reported, not exported."
        ),
    )
    add_config_argument(e, metavar="CONFIG", help="the platform config the jobs ran under")
    e.add_argument("--from", dest="start", required=True, metavar="DAY", help="first UTC day, YYYY-MM-DD")
    e.add_argument("--to", dest="end", required=True, metavar="DAY", help="last UTC day, YYYY-MM-DD (included)")
    e.add_argument("--source", default="archive", choices=SOURCES,
                   help="where to read the jobs, in order of fidelity: archive (the platform's job archive in S3; "
                        "default), batch (what AWS Batch still lists: ListJobs / ListServiceJobs), sagemaker "
                        "(SageMaker's training jobs: dispatch time stands in for the submit time)")
    e.add_argument("--backend", metavar="BACKEND",
                   help="the backend whose teams and guarantees apply (default: the config's only backend)")
    e.add_argument("--bucket", metavar="BUCKET",
                   help="with --source archive: the archive's S3 bucket (the platform stack's JobHistoryBucketName "
                        "output)")
    e.add_argument("--prefix", default=DEFAULT_PREFIX, metavar="PREFIX",
                   help=f"the archive's key prefix (default: {DEFAULT_PREFIX})")
    e.add_argument("--region", metavar="R", help="AWS region of the archive (default: AWS_REGION, else "
                   "AWS_DEFAULT_REGION, else your AWS configuration's)")
    e.add_argument("-o", "--output", metavar="JOBS.csv", help="write the CSV here (default: standard output)")
    e.add_argument("--json", action="store_true",
                   help="print the summary (jobs exported, not exported and why, objects and lines skipped and why) "
                        "as one JSON object on standard output; needs -o for the CSV")
    e.set_defaults(func=run_export)


class _Progress(ProgressBar):
    """The objects (or pages) read, on a terminal, from the first one, for 20 or more."""

    def __init__(self) -> None:
        super().__init__(sys.stderr, "reading the archive", delay=0)

    def __call__(self, done: int, total: int) -> None:
        if total >= 20:
            self.show(done / total, f"{done}/{total} objects")


def _aws_error(exc: Exception, what: str, region: str | None, actions: tuple[str, ...],
               service: str = "Amazon S3") -> GpuShareError:
    err = aws_error(exc, what, region, actions, what=what, service=service)
    if err is None:
        raise exc
    return err


def run_export(args: argparse.Namespace) -> int:
    from cdk_gpu_share.aws import history_reader
    from cdk_gpu_share.core import scenario as sc
    from cdk_gpu_share.core.configuration.parse import load_config
    from cdk_gpu_share.core.records import history

    output = args.output if args.output and args.output != "-" else None
    if args.json and output is None:
        raise ConfigError(Problem("--json", None, "prints the summary on standard output, where the CSV would go",
                                  "add -o JOBS.csv"))
    if output is not None:
        check_output(output, "-o", [args.config])
    config = load_config(args.config)
    start, last = parse_day("--from", args.start), parse_day("--to", args.end)
    if last < start:
        raise ConfigError(Problem("--to", args.end, f"is before --from {args.start}",
                                  "give a last day on or after the first"))
    backend = sc.choose_backend(config, args.backend)
    lookup = history.lookup_from_config(config, backend, queues_of(config))
    bucket = args.bucket
    if args.source == "archive" and not bucket:
        raise ConfigError(Problem("--bucket", None, "is missing",
                                  "pass the archive's bucket: the platform stack's JobHistoryBucketName output"))
    if args.source != "archive" and bucket:
        raise ConfigError(Problem("--bucket", bucket, f"does not go with --source {args.source}",
                                  "drop --bucket, or read the archive (--source archive)"))
    what = {"archive": f"the job archive s3://{bucket}/{args.prefix}",
            "batch": f"the jobs of {', '.join(sorted(lookup.queues)) or 'the platform'} in AWS Batch",
            "sagemaker": "SageMaker's training jobs"}[args.source]
    actions, service = ACTIONS[args.source], SERVICES[args.source]
    try:
        region = args.region or default_region()
    except Exception as exc:  # noqa: BLE001 - an unknown AWS_PROFILE becomes one line
        raise _aws_error(exc, what, None, actions, service) from None
    if not region:
        raise no_region(what)
    end = last + timedelta(days=1)
    start_ms, end_ms = int(start.timestamp() * 1000), int(end.timestamp() * 1000)
    stats = history_reader.ArchiveRead()
    progress = _Progress()
    try:
        records = _records(args.source, config, region, bucket, args.prefix, args.start, last, start_ms, end_ms,
                           progress, stats)
        export = history.reconstruct(records, lookup, start_ms=start_ms, end_ms=end_ms)
    except ValueError as exc:
        raise GpuShareError(f"cannot read {what}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - botocore errors become one line
        raise _aws_error(exc, what, region, actions, service) from None
    finally:
        progress.close()
    if args.source != "archive":
        if not export.jobs:
            raise GpuShareError(f"no job submitted from {args.start} to {args.end} ended in {what}"
                                f"{_skipped_note(export)}; pick days the platform ran jobs"
                                + (" (Batch keeps ended jobs only for a while: read the archive)"
                                   if args.source == "batch" else ""))
        print(f"warning: {SOURCE_WARNINGS[args.source]}", file=sys.stderr)
    elif stats.listed == 0:
        raise GpuShareError(f"{what} holds no object: it is not the platform's job archive (check --bucket, "
                            "--prefix and --region)")
    if stats.read and export.events == 0 and stats.skipped:
        why, key = next(iter(stats.first_skipped.items()))
        raise GpuShareError(f"{what} is not a job archive: its objects hold no Batch job event ({key}: {why}; "
                            "check --bucket and --prefix)")
    if not export.jobs:
        raise GpuShareError(f"no job submitted from {args.start} to {args.end} ended in {what}"
                            f"{_skipped_note(export)}; pick days the platform ran jobs")
    text = _csv(export, int(start.timestamp() * 1000), args.source)
    if output is not None:
        write_output(output, text, "-o")
    else:
        sys.stdout.write(text)
    print(_summary(export, stats, output), file=sys.stderr)
    if args.json:
        print(json.dumps(summary_json(export, stats, output), sort_keys=True))
    return 0


def _records(source: str, config: Any, region: str, bucket: str | None, prefix: str, first_day: str, last: datetime,
             start_ms: int, end_ms: int, progress: _Progress, stats: Any) -> Any:
    """The records of ``source`` (lazily: the reads happen as the reconstruction consumes them)."""
    from cdk_gpu_share.aws import history_reader

    if source == "archive":
        return history_reader.read_archive(make_client("s3", region), str(bucket), prefix, first_day,
                                           (last + timedelta(days=TAIL_DAYS)).strftime("%Y-%m-%d"),
                                           progress=progress, stats=stats)
    if source == "batch":
        job_queues, service_queues = queues_by_kind(config)
        # A requeued job is created when its first run was stopped: list past the last day too.
        return history_reader.read_batch(make_client("batch", region), job_queues, service_queues, start_ms,
                                         end_ms + TAIL_DAYS * 86_400_000, progress=progress, stats=stats)
    return history_reader.read_sagemaker(make_client("sagemaker", region), start_ms, end_ms, progress=progress,
                                         stats=stats)


def queues_by_kind(config: Any) -> tuple[list[str], list[str]]:
    """(classic job queues, quota-management service queues) of the config, by name."""
    from cdk_gpu_share.aws import batch_reader as br

    jobs = [br.settings_from_config(config)["queue"]] if config.fairshare is not None else []
    service = [config.batch_quota.queue_name or f"{config.name}-training"] if config.batch_quota is not None else []
    return jobs, service


def _csv(export: Any, origin_ms: int, source: str) -> str:
    import io

    from cdk_gpu_share.core.records import history

    buf = io.StringIO()
    history.write_export(export, buf, origin_ms=origin_ms, source=source)
    return buf.getvalue()


def _skipped_note(export: Any) -> str:
    if not export.skipped:
        return ""
    return " (" + ", ".join(f"{n} {why}" for why, n in sorted(export.skipped.items())) + ")"


def _summary(export: Any, stats: Any, output: str | None) -> str:
    """What was exported and what was not, and why (standard error)."""
    lines = [f"exported {len(export.jobs)} jobs from {stats.read} {'archive objects' if export.configs else 'jobs read'}"
             f" ({export.events} events"
             + (f", {export.duplicates} delivered twice" if export.duplicates else "")
             + (f", {sum(stats.skipped.values())} objects or lines skipped" if stats.skipped else "") + ")"
             + (f" to {output}" if output and output != "-" else "")]
    for why, n in sorted(export.skipped.items()):
        lines.append(f"  not exported: {n} {why}")
    if export.unknown_teams:
        lines.append("  unknown teams: " + ", ".join(f"{t} ({n})" for t, n in sorted(export.unknown_teams.items())))
    if export.unknown_types:
        lines.append("  unknown instance types: "
                     + ", ".join(f"{t} ({n})" for t, n in sorted(export.unknown_types.items())))
    for why, n in sorted(stats.skipped.items()):
        lines.append(f"  skipped: {n} {why} (first in {stats.first_skipped[why]})")
    if len(export.configs) > 1:
        lines.append(f"  the config changed during the period ({len(export.configs)} configs): replay each period "
                     "under its own config")
    return "\n".join(lines)


def summary_json(export: Any, stats: Any, output: str | None) -> dict[str, Any]:
    """The summary of ``--json``: the same figures as the summary lines."""
    return {
        "exported": len(export.jobs), "output": output, "read": stats.read, "events": export.events,
        "delivered_twice": export.duplicates, "not_exported": dict(sorted(export.skipped.items())),
        "unknown_teams": dict(sorted(export.unknown_teams.items())),
        "unknown_instance_types": dict(sorted(export.unknown_types.items())),
        "skipped": {why: {"count": n, "first": stats.first_skipped[why]} for why, n in sorted(stats.skipped.items())},
        "configs": sorted(export.configs),
    }
