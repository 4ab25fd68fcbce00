"""The share monitor: per-team metrics of an AWS Batch quota-management queue.

AWS/Batch metrics carry only ``JobQueueName``; this function publishes, per team (quota
share), what a platform team needs to watch the lending it set up. Invoked:

* **on a schedule** (every ``monitor.schedule_minutes``): reads the queue with
  :func:`cdk_gpu_share.aws.quota_reader.read_quota_queue` (``ListQuotaShares``,
  ``GetJobQueueSnapshot``, ``ListServiceJobs`` of each share's waiting jobs, 1,000 a page) and
  emits per team: GPUs and instances in use, guarantee, borrowed, lent, idle guarantee,
  waiting jobs, the oldest wait and the oldest wait of a job that would be within the team's
  guarantee (its size from the listing's ``capacityUsage``, else, for the
  :data:`DESCRIBE_LIMIT` oldest, ``DescribeServiceJob``; :mod:`cdk_gpu_share.core.records.share_monitor`
  defines each figure), then its heartbeat
  (``ShareMonitorReadings``: a missing one is an alarm). The reading is bounded: at most
  :data:`MAX_PAGES` pages of waiting jobs a share, read a page a share in turn, and no page
  asked after :data:`READ_SECONDS` (the function's timeout is twice that), so a team that
  floods its share with waiting jobs cannot push the reading past the timeout. What was read
  is published; the shares not read to the end are counted (``ShareMonitorUnreadShares``)
  and named in the log;
* **on "Batch Service Job Preemption Started"**: ``DescribeServiceJob`` of the preempted job
  tells its queue and quota share; a job of this queue counts one preemption for its team,
  by cause (``cross_share``: lent capacity taken back; ``in_share``: a higher-priority job
  of its own share);
* **on "Batch Service Job Queue Blocked"** of this queue (the rule filters on it): one
  blocked event for the queue, and for the job's team when the event names its share.

Metrics go out in CloudWatch embedded metric format on standard output (no
``PutMetricData`` permission, nothing to batch). Throttling and 5xx are retried by the
client (botocore's standard mode, 3 attempts with backoff, 10 s a read). An entry of an answer with a
missing or bad field is logged and left out; a read that fails after its retries is logged
and counted (``ShareMonitorErrors``) without raising: the next run reads afresh, and a
retried invocation would only publish a stale minute twice.

Environment: ``GPU_SHARE_QUEUE`` (the queue's ARN), ``GPU_SHARE_MONITOR`` (JSON:
``queue`` name, ``capacity`` in instances per type, ``teams``: quota share -> team).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from cdk_gpu_share.aws import quota_reader
from cdk_gpu_share.core.records import metrics
from cdk_gpu_share.core.records import share_monitor as sm

#: The listings' page size: Batch returns up to 1,000 service jobs or quota shares a page.
PAGE_SIZE = 1000
#: Pages of waiting jobs a reading lists per quota share at most (its newest 5,000 jobs).
MAX_PAGES = 5
#: Waiting jobs without a size in their summary a reading describes at most (oldest first).
DESCRIBE_LIMIT = 10
#: Seconds after its start a reading asks for no more pages (the function's timeout is 120 s,
#: and one call takes at most 3 tries of 3 + 10 s).
READ_SECONDS = 45
PREEMPTION_STARTED = "Batch Service Job Preemption Started"
QUEUE_BLOCKED = "Batch Service Job Queue Blocked"

_client: Any = None
#: The clock (tests replace it).
_now: Callable[[], float] = time.time


def handler(event: Mapping, context: Any = None) -> dict:
    """Lambda entry point: an event of the queue, or a scheduled reading."""
    queue = os.environ["GPU_SHARE_QUEUE"]
    settings = json.loads(os.environ["GPU_SHARE_MONITOR"])
    kind = event.get("detail-type") if isinstance(event, Mapping) else None
    detail = event.get("detail") if isinstance(event, Mapping) else None
    if kind == PREEMPTION_STARTED:
        return on_preemption(_batch_client(), queue, settings, detail if isinstance(detail, Mapping) else {})
    if kind == QUEUE_BLOCKED:
        return on_blocked(queue, settings, detail if isinstance(detail, Mapping) else {})
    return read_and_publish(_batch_client(), queue, settings, now=_now())


def read_and_publish(client: Any, queue: str, settings: Mapping, *, now: float,
                     emit: Callable[[str], None] | None = None, clock: Callable[[], float] | None = None) -> dict:
    """Read the queue and publish each team's figures. Never raises for a failed read.

    :param clock: the clock of the reading's deadline (tests give the model's). Default: the
        module's clock."""
    name = settings.get("queue") or queue.rsplit("/", 1)[-1]
    detail = {"jobQueueName": name, "jobQueueArn": queue, "jobQueueType": quota_reader.QUOTA_QUEUE_TYPE}
    clock = clock or _now
    bounds = quota_reader.ListingBounds(max_pages=MAX_PAGES, deadline=clock() + READ_SECONDS, clock=clock)
    try:
        status = quota_reader.read_quota_queue(client, queue, detail=detail, now=now, page_size=PAGE_SIZE,
                                               bounds=bounds)
    except Exception as exc:  # noqa: BLE001 - logged and counted; the next run reads afresh
        log("read_failed", "ERROR", queue=name, error=f"{type(exc).__name__}: {exc}")
        _emit({metrics.DIM_QUEUE: name}, {metrics.MONITOR_ERRORS: (1, "Count")}, emit)
        return {"queue": name, "error": f"{type(exc).__name__}: {exc}"}
    teams = settings.get("teams") or {}
    sizes = _sizes_of_unsized(client, status, bounds)
    readings = []
    for share in status.shares:
        waiting = [j for j in share.waiting if j.created_at is not None]
        readings.append(sm.ShareReading(
            team=teams.get(share.name, share.name), guarantee=share.guarantee, usage=share.usage,
            waiting_created=[j.created_at for j in waiting if j.created_at is not None],
            waiting_need=[j.need if j.need is not None else sizes.get(j.job_id) for j in waiting]))
    figures = sm.share_figures(readings, settings.get("capacity") or {}, now)
    for f in figures:
        _emit({metrics.DIM_QUEUE: name, metrics.DIM_TEAM: f.team}, sm.figure_metrics(f), emit)
    _emit({metrics.DIM_QUEUE: name}, {metrics.MONITOR_ERRORS: (0, "Count"), metrics.MONITOR_HEARTBEAT: (1, "Count"),
                                      metrics.MONITOR_UNREAD: (len(status.unread), "Count")}, emit)
    if status.unread:
        log("waiting_jobs_unread", "WARNING", queue=name, teams=[teams.get(s, s) for s in status.unread],
            reason=f"more than {MAX_PAGES * PAGE_SIZE} waiting jobs in a share, or the reading reached its"
                   f" {READ_SECONDS} s deadline: their waiting figures are those of the jobs read")
    unknown = sorted({u for f in figures for u in f.unknown_types})
    if status.skipped or unknown or status.unassigned_waiting:
        log("answer_entries_skipped", "WARNING", queue=name, skipped=list(status.skipped[:20]),
            skipped_count=len(status.skipped), unknown_instance_types=unknown,
            jobs_of_no_listed_share=[j.job_id for j in status.unassigned_waiting][:20])
    summary: dict[str, Any] = {"queue": name, "teams": len(figures), "waiting": sum(f.waiting_jobs for f in figures),
               "skipped": len(status.skipped), "unread": len(status.unread), "totals": sm.totals(figures)}
    log("published", "INFO", **summary)
    return summary


def _sizes_of_unsized(client: Any, status: quota_reader.QuotaQueueStatus,
                      bounds: quota_reader.ListingBounds) -> dict[str, dict[str, float]]:
    """What the oldest waiting jobs whose summary gave no size ask for (``DescribeServiceJob``:
    their SageMaker request), at most :data:`DESCRIBE_LIMIT` of them and none after the
    reading's deadline; a job whose size stays unknown counts as the guarantee-wait figure says."""
    unsized = sorted((j for s in status.shares for j in s.waiting if j.need is None and j.created_at is not None),
                     key=lambda j: (j.created_at, j.job_id))
    sizes: dict[str, dict[str, float]] = {}
    for job in unsized[:DESCRIBE_LIMIT]:
        if bounds.clock() >= bounds.deadline:
            break
        try:
            need = quota_reader.service_job_need(client.describe_service_job(jobId=job.job_id))
        except Exception as exc:  # noqa: BLE001 - one size unknown: the job counts as of unknown size
            log("describe_failed", "WARNING", job=job.job_id, error=f"{type(exc).__name__}: {exc}")
            continue
        if need:
            sizes[job.job_id] = need
    return sizes


def on_preemption(client: Any, queue: str, settings: Mapping, detail: Mapping,
                  emit: Callable[[str], None] | None = None) -> dict:
    """Count a preemption for the preempted job's team, by cause, if the job is this queue's."""
    name = settings.get("queue") or queue.rsplit("/", 1)[-1]
    arn = detail.get("preemptedJobArn")
    if not isinstance(arn, str) or "/" not in arn:
        log("event_skipped", "WARNING", reason="no preemptedJobArn", detail=_short(detail))
        return {"counted": False}
    job_id = arn.rsplit("/", 1)[-1]
    try:
        job = client.describe_service_job(jobId=job_id)
    except Exception as exc:  # noqa: BLE001 - one event uncounted is logged, never a retry storm
        log("describe_failed", "ERROR", job=job_id, error=f"{type(exc).__name__}: {exc}")
        _emit({metrics.DIM_QUEUE: name}, {metrics.MONITOR_ERRORS: (1, "Count")}, emit)
        return {"counted": False}
    if job.get("jobQueue") not in (queue, name):
        return {"counted": False, "reason": "another queue's job"}
    share = job.get("quotaShareName")
    if not isinstance(share, str) or not share:
        log("event_skipped", "WARNING", reason="the job names no quota share", job=job_id)
        return {"counted": False}
    team = (settings.get("teams") or {}).get(share, share)
    cause = sm.preemption_cause(detail.get("statusReason"))
    _emit({metrics.DIM_QUEUE: name, metrics.DIM_TEAM: team, metrics.DIM_CAUSE: cause},
          {metrics.PREEMPTIONS: (1, "Count")}, emit)
    _emit({metrics.DIM_QUEUE: name, metrics.DIM_TEAM: team}, {metrics.PREEMPTIONS: (1, "Count")}, emit)
    log("preemption", job=job_id, team=team, cause=cause)
    return {"counted": True, "team": team, "cause": cause}


def on_blocked(queue: str, settings: Mapping, detail: Mapping, emit: Callable[[str], None] | None = None) -> dict:
    """Count a queue-blocked event (the rule delivers only this queue's)."""
    name = settings.get("queue") or queue.rsplit("/", 1)[-1]
    _emit({metrics.DIM_QUEUE: name}, {metrics.QUEUE_BLOCKED: (1, "Count")}, emit)
    share = detail.get("quotaShareName")
    team = (settings.get("teams") or {}).get(share, share) if isinstance(share, str) and share else None
    if team:
        _emit({metrics.DIM_QUEUE: name, metrics.DIM_TEAM: team}, {metrics.QUEUE_BLOCKED: (1, "Count")}, emit)
    log("queue_blocked", "WARNING", queue=name, team=team, job=detail.get("jobId"),
        reason=str(detail.get("statusReason", ""))[:500])
    return {"counted": True, "team": team}


# ---------------------------------------------------------------------------


def _batch_client() -> Any:
    global _client
    if _client is None:
        import boto3
        from botocore.config import Config

        # Short calls, so the reading's deadline bounds its duration (see READ_SECONDS).
        _client = boto3.client("batch", config=Config(retries={"total_max_attempts": 3, "mode": "standard"},
                                                      connect_timeout=3, read_timeout=10))
    return _client


def _emit(dimensions: dict[str, str], values: dict[str, tuple[float, str]],
          emit: Callable[[str], None] | None) -> None:
    (_print if emit is None else emit)(metrics.emf_line(dimensions, values, int(_now() * 1000)))


def _print(line: str) -> None:
    print(line)
    sys.stdout.flush()


def _short(value: Any) -> str:
    return json.dumps(value, default=str)[:500]


def log(event: str, level: str = "INFO", **fields: Any) -> None:
    """One JSON log line."""
    _print(json.dumps({"level": level, "event": event, **fields}, default=str, separators=(",", ":")))
