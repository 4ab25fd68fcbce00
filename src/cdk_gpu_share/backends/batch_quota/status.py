"""``gpu-share status`` of a quota-management queue (``jobQueueType`` ``SAGEMAKER_TRAINING``).

Each quota share's guarantee (``ListQuotaShares``), usage (``GetJobQueueSnapshot``) and
waiting service jobs (``ListServiceJobs``), read with :mod:`cdk_gpu_share.aws.quota_reader`.
A config is optional: it names the teams expected on the queue.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cdk_gpu_share.aws import quota_reader
from cdk_gpu_share.backends.batch_quota import KEY
from cdk_gpu_share.cli.status_cmd import fmt_duration, fmt_num, stamp, table

#: The report's kind, and the IAM actions reading the queue needs (named in access-denied messages).
KIND = "quota"
ACTIONS = ("batch:DescribeJobQueues", "batch:ListQuotaShares", "batch:GetJobQueueSnapshot", "batch:ListServiceJobs",
           "batch:DescribeServiceJob")


def reads(detail: Mapping[str, Any]) -> bool:
    """Whether the queue ``DescribeJobQueues`` returned is a quota-management queue."""
    return quota_reader.is_quota_queue(detail)


def report(client: Any, queue: str, detail: dict[str, Any], config: Any, *, now: float,
           sleep: Callable[[float], None]) -> dict[str, Any]:
    """The JSON report of the queue (``sleep`` is unused: the reader does not retry)."""
    return quota_report(quota_reader.read_quota_queue(client, queue, detail=detail, now=now), config)


def quota_report(status: Any, config: Any = None) -> dict[str, Any]:
    """The JSON report of a quota-management queue (``status``: a QuotaQueueStatus)."""
    report = status.to_json()
    report["kind"] = "quota"
    notes: list[str] = []
    if config is not None:
        expected = [t.name for t in config.teams_for(KEY)]
        listed = [s.name for s in status.shares]
        missing = [t for t in expected if t not in listed]
        extra = [s for s in listed if s not in expected]
        if missing:
            notes.append(
                f"teams in {config.source or 'the config'} without a quota share on this queue: {', '.join(missing)} "
                "(not deployed yet, or another queue)"
            )
        if extra:
            notes.append(f"quota shares not in {config.source or 'the config'}: {', '.join(extra)}")
    if status.unassigned_waiting:
        notes.append(f"{len(status.unassigned_waiting)} waiting job(s) name no listed quota share")
    report["notes"] = notes
    return report


def explain(client: Any, queue: str, detail: dict[str, Any], config: Any, job_id: str, *, now: float,
            sleep: Callable[[float], None]) -> dict[str, Any]:
    """Why service job ``job_id`` waits: its share and every share of the queue as they are now."""
    return _explain(client, queue, detail, config, job_id, quota_reader.read_quota_queue(
        client, queue, detail=detail, now=now))


def explain_live(client: Any, queue: str, detail: dict[str, Any], config: Any, job_id: str, *, now: float,
                 sleep: Callable[[float], None]) -> tuple[dict[str, Any], list[Any]]:
    """:func:`explain`, and for a waiting job the queue's running and waiting service jobs as the wait
    predictor takes them (:class:`~cdk_gpu_share.core.eta.live.LiveJob`): each described once
    (``DescribeServiceJob``: its share, request, priority and start), its instances in GPUs."""
    status = quota_reader.read_quota_queue(client, queue, detail=detail, now=now)
    out = _explain(client, queue, detail, config, job_id, status)
    if out["state"] != "runnable":
        return out, []
    ids = [j.job_id for s in status.shares for j in s.waiting]
    paginator = client.get_paginator("list_service_jobs")
    for page in paginator.paginate(jobQueue=queue, jobStatus="RUNNING"):
        ids += [s["jobId"] for s in page.get("jobSummaryList", []) if s.get("jobId") and not s.get("isTerminated")]
    return out, [j for j in (_live_job(client.describe_service_job(jobId=i), now) for i in dict.fromkeys(ids)) if j]


def _live_job(job: Mapping[str, Any], now: float) -> Any:
    """A described service job as the predictor takes it; None when its size is unknown (no
    instance type in its request, or one the catalog does not know)."""
    from cdk_gpu_share.core.catalog import instances
    from cdk_gpu_share.core.eta.live import LiveJob

    need = quota_reader.service_job_need(job)
    gpus = 0.0
    for unit, n in need.items():
        info = instances.lookup(unit)
        if info is None:
            return None
        gpus += n * info.gpus
    if not need:
        return None
    running = job.get("status") == "RUNNING"
    since = job.get("startedAt") if running else job.get("createdAt")
    return LiveJob(id=str(job["jobId"]), team=str(job.get("quotaShareName") or "?"),
                   gpus=gpus,
                   priority=int(job.get("schedulingPriority") or 0),
                   since=since / 1000.0 if since else now, running=running)


def _explain(client: Any, queue: str, detail: dict[str, Any], config: Any, job_id: str, status: Any) -> dict[str, Any]:
    from cdk_gpu_share.core.policy import reclaim
    from cdk_gpu_share.core.records import waiting

    job = client.describe_service_job(jobId=job_id)
    quota_reader.check_job_queue(job_id, job, detail)
    share = job.get("quotaShareName")
    out: dict[str, Any] = {"kind": KIND, "queue": status.queue, "job": job_id, "team": share,
                           "state": str(job.get("status", "?")).lower(), "reasons": []}
    if job.get("status") != "RUNNABLE":
        out["note"] = "it is not waiting for capacity"
        return out
    need = quota_reader.service_job_need(job)
    section = getattr(config, "batch_quota", None) if config is not None else None
    capacity = dict(section.capacity) if section is not None else {}
    views: dict[str, list] = {}
    for s in status.shares:
        # The planner's borrow cap of the share (its strategy and percent, per capacity unit).
        spec = reclaim.TeamSpec(s.name, dict(s.guarantee), sharing=(s.strategy or "LEND_AND_BORROW").lower(),
                                borrow_limit_percent=-1 if s.borrow_limit_percent is None else s.borrow_limit_percent)
        for unit in set(s.units) | set(need):
            views.setdefault(unit, []).append(waiting.TeamView(
                s.name, s.guarantee.get(unit, 0.0), s.usage.get(unit, 0.0), reclaim.borrow_cap(spec, unit),
                reserve=spec.sharing == "reserve"))
    for unit, vs in views.items():
        capacity.setdefault(unit, max(sum(v.guarantee for v in vs), sum(v.usage for v in vs)))
    created = job.get("createdAt")
    mine = status.share(share).waiting if share in {s.name for s in status.shares} else ()
    ahead = sum(1 for j in mine if j.job_id != job_id and created is not None and j.created_at is not None
                and j.created_at < created / 1000.0)
    reasons = waiting.explain(share or "?", need, views, capacity, ahead=ahead,
                              reclaim_in="by Batch's cross-share preemption of the borrowers' jobs")
    out["need"] = need
    out["reasons"] = [r.to_json() for r in reasons]
    if not need:
        out["note"] = "its request names no instance type (serviceRequestPayload), so only its place is known"
    return out


def format(report: dict[str, Any]) -> str:
    """The readable table of a report."""
    return _format_quota(report)


def _format_quota(report: dict[str, Any]) -> str:
    lines = [f"Queue {report['queue']} (quota management, SageMaker Training service jobs), read {stamp(report['now'])}"]
    headers = ["TEAM", "INSTANCE TYPE", "USED", "GUARANTEE", "BORROWED", "SHARING", "WAITING", "OLDEST WAIT"]
    rows = []
    for name, share in report["teams"].items():
        units = list(share["guarantee"]) or ["-"]
        for i, unit in enumerate(units):
            first = i == 0
            rows.append(
                [
                    name if first else "",
                    unit,
                    fmt_num(share["usage"].get(unit, 0)),
                    fmt_num(share["guarantee"].get(unit, 0)),
                    fmt_num(share["borrowed"].get(unit, 0)),
                    _sharing(share) if first else "",
                    str(share["waiting_jobs"]) if first else "",
                    fmt_duration(share["oldest_wait_seconds"]) if first else "",
                ]
            )
    if rows:
        lines += table(headers, rows, right={2, 3, 4, 6, 7})
    else:
        lines.append("no quota share on this queue")
    if report.get("total_usage"):
        used = ", ".join(f"{fmt_num(v)} x {u}" for u, v in report["total_usage"].items())
        lines.append(f"In use on the queue: {used} (instances; utilization as of {stamp(report.get('snapshot_at'))})")
    lines += [f"note: {n}" for n in report.get("notes", [])]
    return "\n".join(lines)


def _sharing(share: dict[str, Any]) -> str:
    strategy = (share.get("strategy") or "-").lower()
    limit = share.get("borrow_limit_percent")
    if strategy == "lend_and_borrow" and limit is not None and limit >= 0:
        strategy += f" (cap {limit}%)"
    if share.get("in_share_preemption"):
        strategy += ", in-team preemption"
    return strategy


__all__ = ["ACTIONS", "KIND", "format", "quota_report", "reads", "report"]
