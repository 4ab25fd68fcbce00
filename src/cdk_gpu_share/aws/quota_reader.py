"""Read the live state of an AWS Batch quota-management queue (SageMaker Training service jobs).

Read-only: ``DescribeJobQueues``, ``ListQuotaShares``, ``GetJobQueueSnapshot`` and
``ListServiceJobs``. The Batch client is passed in (``boto3.client("batch")``), so
callers choose the session and region, and tests drive the functions with botocore's
Stubber against the real service model.

* :func:`describe_queue` -- the queue's ``DescribeJobQueues`` entry, or
  :class:`QueueNotFound`.
* :func:`is_quota_queue` -- whether that entry is a quota-management queue
  (``jobQueueType`` ``SAGEMAKER_TRAINING``).
* :func:`read_quota_queue` -- each quota share's guarantee (``ListQuotaShares``), usage
  (``GetJobQueueSnapshot``) and waiting service jobs (``ListServiceJobs``, status
  ``RUNNABLE``), as a :class:`QuotaQueueStatus`.

Amounts are in the queue's capacity units: instances of each ``ml.`` instance type.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.errors import GpuShareError
from cdk_gpu_share.core.records import history

__all__ = [
    "QUOTA_QUEUE_TYPE",
    "WAITING_STATUSES",
    "ListingBounds",
    "QueueNotFound",
    "WaitingJob",
    "ShareStatus",
    "QuotaQueueStatus",
    "check_job_queue",
    "describe_queue",
    "is_quota_queue",
    "read_quota_queue",
    "service_job_need",
]

#: ``jobQueueType`` of a queue with quota management (service jobs).
QUOTA_QUEUE_TYPE = "SAGEMAKER_TRAINING"
#: Service-job statuses counted as waiting for capacity.
WAITING_STATUSES = ("RUNNABLE",)
_TOL = 1e-9


class QueueNotFound(GpuShareError):
    """``DescribeJobQueues`` knows no queue of that name or ARN (in this account and region)."""

    def __init__(self, queue: str, region: str | None = None) -> None:
        self.queue = queue
        where = f" in region {region}" if region else ""
        super().__init__(
            f"job queue {queue!r} not found{where}; check the name (`aws batch describe-job-queues`) "
            "or pass --region with the queue's region"
        )


@dataclass(frozen=True)
class WaitingJob:
    """A service job waiting for capacity (``RUNNABLE``)."""

    job_id: str
    name: str
    share: str | None
    created_at: float | None
    """Seconds since the epoch, or None when the API did not say."""
    need: dict[str, float] | None = None
    """Instances per type it asks for (its summary's ``capacityUsage``), or None when unknown."""

    def wait_seconds(self, now: float) -> float | None:
        return None if self.created_at is None else max(0.0, now - self.created_at)


@dataclass(frozen=True)
class ShareStatus:
    """One quota share: what it is guaranteed, what it uses, what it borrows, who waits."""

    name: str
    guarantee: dict[str, float]
    usage: dict[str, float]
    strategy: str | None = None
    """``RESERVE``, ``LEND`` or ``LEND_AND_BORROW`` (None when the share is not listed)."""
    borrow_limit_percent: int | None = None
    in_share_preemption: bool | None = None
    state: str | None = None
    waiting: tuple[WaitingJob, ...] = ()

    @property
    def units(self) -> list[str]:
        return sorted(set(self.guarantee) | set(self.usage))

    @property
    def borrowed(self) -> dict[str, float]:
        """max(0, usage - guarantee) per capacity unit."""
        out = {}
        for unit in self.units:
            b = self.usage.get(unit, 0.0) - self.guarantee.get(unit, 0.0)
            out[unit] = b if b > _TOL else 0.0
        return out

    def gpus(self, amounts: Mapping[str, float]) -> float | None:
        """The GPUs ``amounts`` (instances per type) stand for; None when a type is unknown."""
        total = 0.0
        for unit, n in amounts.items():
            info = instances.lookup(unit)
            if info is None:
                if n:
                    return None
                continue
            total += n * info.gpus
        return total

    def oldest_wait_seconds(self, now: float) -> float | None:
        waits = [w for w in (j.wait_seconds(now) for j in self.waiting) if w is not None]
        return max(waits) if waits else None


@dataclass(frozen=True)
class QuotaQueueStatus:
    """A quota-management queue as read at ``now``."""

    queue: str
    queue_arn: str
    now: float
    shares: tuple[ShareStatus, ...]
    total_usage: dict[str, float] = field(default_factory=dict)
    snapshot_at: float | None = None
    """When Batch last updated the utilization (seconds since the epoch)."""
    unassigned_waiting: tuple[WaitingJob, ...] = ()
    """Waiting jobs naming no quota share this queue lists (should not happen)."""
    skipped: tuple[str, ...] = ()
    """Entries of an answer left out because a field was missing or not a number, each said in words."""
    unread: tuple[str, ...] = ()
    """Quota shares whose waiting jobs a bounded reading did not read to the end."""

    def share(self, name: str) -> ShareStatus:
        for s in self.shares:
            if s.name == name:
                return s
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the ``--json`` output of ``gpu-share status``)."""
        shares = {}
        for s in self.shares:
            shares[s.name] = {
                "usage": {u: _num(s.usage.get(u, 0.0)) for u in s.units},
                "guarantee": {u: _num(s.guarantee.get(u, 0.0)) for u in s.units},
                "borrowed": {u: _num(v) for u, v in s.borrowed.items()},
                "usage_gpus": _num_or_none(s.gpus(s.usage)),
                "guarantee_gpus": _num_or_none(s.gpus(s.guarantee)),
                "borrowed_gpus": _num_or_none(s.gpus(s.borrowed)),
                "strategy": s.strategy,
                "borrow_limit_percent": s.borrow_limit_percent,
                "in_share_preemption": s.in_share_preemption,
                "state": s.state,
                "waiting_jobs": len(s.waiting),
                "oldest_wait_seconds": _num_or_none(s.oldest_wait_seconds(self.now)),
                "waiting": [
                    {"id": j.job_id, "name": j.name, "wait_seconds": _num_or_none(j.wait_seconds(self.now))}
                    for j in s.waiting
                ],
            }
        return {
            "queue": self.queue,
            "queue_arn": self.queue_arn,
            "queue_type": QUOTA_QUEUE_TYPE,
            "now": _num(self.now),
            "snapshot_at": _num_or_none(self.snapshot_at),
            "total_usage": {u: _num(v) for u, v in sorted(self.total_usage.items())},
            "teams": shares,
            "unassigned_waiting": [{"id": j.job_id, "name": j.name, "share": j.share} for j in self.unassigned_waiting],
        }


def _num(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 6)


def _num_or_none(value: float | None) -> float | int | None:
    return None if value is None else _num(value)


def _seconds(millis: Any) -> float | None:
    return None if millis is None else millis / 1000.0


# ---------------------------------------------------------------------------
# Reading


def describe_queue(client: Any, queue: str) -> dict[str, Any]:
    """The ``DescribeJobQueues`` entry of ``queue`` (a name or ARN); :class:`QueueNotFound` if none."""
    response = client.describe_job_queues(jobQueues=[queue])
    for detail in response.get("jobQueues", []):
        if queue in (detail.get("jobQueueName"), detail.get("jobQueueArn")):
            return detail
    raise QueueNotFound(queue, getattr(getattr(client, "meta", None), "region_name", None))


def check_job_queue(job_id: str, job: Mapping[str, Any], detail: Mapping[str, Any]) -> None:
    """Refuse, in one line naming it, a described job (``DescribeJobs``, ``DescribeServiceJob``)
    whose ``jobQueue`` is another queue than ``detail`` (the queue read): its reasons and expected
    start would be those of a job of this queue."""
    own = job.get("jobQueue")
    if not own or own in (detail.get("jobQueueArn"), detail.get("jobQueueName")):
        return
    other = str(own).rsplit("job-queue/", 1)[-1]
    name = detail.get("jobQueueName") or detail.get("jobQueueArn")
    raise GpuShareError(f"job {job_id!r} belongs to the job queue {other!r}, not {name!r}; pass --queue {other} "
                        "to explain it there")


def is_quota_queue(detail: Mapping[str, Any]) -> bool:
    """Whether a ``DescribeJobQueues`` entry is a quota-management (service job) queue."""
    return detail.get("jobQueueType") == QUOTA_QUEUE_TYPE


def _pages(page_size: int | None) -> dict[str, Any]:
    return {} if page_size is None else {"PaginationConfig": {"PageSize": page_size}}


def _list_shares(client: Any, queue: str, page_size: int | None = None) -> list[dict[str, Any]]:
    shares: list[dict[str, Any]] = []
    for page in client.get_paginator("list_quota_shares").paginate(jobQueue=queue, **_pages(page_size)):
        shares.extend(dict(s) for s in page.get("quotaShares", []) if isinstance(s, Mapping))
    return shares


def _quantity(value: Any) -> float | None:
    """A quantity of an answer as a float; None when it is missing or not a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _add_usage(into: dict[str, float], entries: Any, where: str, skipped: list[str]) -> None:
    for cu in entries if isinstance(entries, list) else ():
        unit = cu.get("capacityUnit") if isinstance(cu, Mapping) else None
        quantity = _quantity(cu.get("quantity", 0.0)) if isinstance(cu, Mapping) else None
        if not unit or quantity is None:
            skipped.append(f"{where}: a capacity usage without a unit or a number ({cu!r})")
            continue
        into[unit] = into.get(unit, 0.0) + quantity


def _usage_by_share(snapshot: Mapping[str, Any], skipped: list[str] | None = None) -> dict[str, dict[str, float]]:
    skipped = [] if skipped is None else skipped
    util = snapshot.get("queueUtilization", {}).get("quotaShareUtilization", {})
    out: dict[str, dict[str, float]] = {}
    for entry in util.get("topCapacityUtilization", []):
        name = entry.get("quotaShareName") if isinstance(entry, Mapping) else None
        if not name:
            skipped.append(f"GetJobQueueSnapshot: a quota share utilization without a name ({entry!r})")
            continue
        _add_usage(out.setdefault(name, {}), entry.get("capacityUsage", []), f"GetJobQueueSnapshot {name}", skipped)
    return out


def _summary_job(s: Any, skipped: list[str]) -> WaitingJob | None:
    """The waiting job of a ``ListServiceJobs`` summary; None for one left out (said in ``skipped``)."""
    if not isinstance(s, Mapping) or not s.get("jobId"):
        skipped.append(f"ListServiceJobs: a job summary without a jobId ({s!r})")
        return None
    if s.get("isTerminated"):
        return None  # a stop was requested: it will not take capacity
    created = s.get("createdAt")
    if created is not None and _quantity(created) is None:
        skipped.append(f"ListServiceJobs {s['jobId']}: createdAt is not a time ({created!r}); no wait counted")
        created = None
    need: dict[str, float] = {}
    if s.get("capacityUsage"):
        _add_usage(need, s["capacityUsage"], f"ListServiceJobs {s['jobId']}", skipped)
    return WaitingJob(job_id=s["jobId"], name=s.get("jobName", s["jobId"]), share=s.get("quotaShareName"),
                      created_at=_seconds(created), need=need or None)


def service_job_need(job: Mapping[str, Any]) -> dict[str, float]:
    """Instances per type a service job asks for, from its SageMaker request (a ``DescribeServiceJob``
    answer's ``serviceRequestPayload``: ``ResourceConfig``, or its ``InstanceGroups``); ``{}`` when
    it names none (:func:`cdk_gpu_share.core.records.history.request_instances`, the archive's rule too)."""
    return history.request_instances(job.get("serviceRequestPayload"))


def _waiting_jobs(client: Any, queue: str, page_size: int | None = None,
                  skipped: list[str] | None = None) -> list[WaitingJob]:
    skipped = [] if skipped is None else skipped
    jobs: list[WaitingJob] = []
    paginator = client.get_paginator("list_service_jobs")
    for status in WAITING_STATUSES:
        for page in paginator.paginate(jobQueue=queue, jobStatus=status, **_pages(page_size)):
            jobs.extend(j for j in (_summary_job(s, skipped) for s in page.get("jobSummaryList", [])) if j)
    return jobs


@dataclass(frozen=True)
class ListingBounds:
    """How much of the waiting jobs a bounded reading lists: each quota share's own listing
    (``QUOTA_SHARE_NAME``), ``max_pages`` pages a share at most, and no page asked once
    ``clock()`` has passed ``deadline``. The shares are read a page each in turn, so a share
    with many waiting jobs takes its turns and not the others'."""

    max_pages: int
    deadline: float
    clock: Any = time.monotonic


def _waiting_jobs_bounded(client: Any, queue: str, shares: list[str], bounds: ListingBounds, page_size: int | None,
                          skipped: list[str]) -> tuple[list[WaitingJob], tuple[str, ...]]:
    """The waiting jobs of each share, read within ``bounds``; and the shares not read to the end."""
    jobs: list[WaitingJob] = []
    tokens: dict[str, str | None] = {name: None for name in shares}  # share -> next page (None: the first)
    for _ in range(bounds.max_pages):
        for name in [n for n in shares if n in tokens]:
            if bounds.clock() >= bounds.deadline:
                return jobs, tuple(tokens)
            params: dict[str, Any] = {"jobQueue": queue, "jobStatus": WAITING_STATUSES[0],
                                      "filters": [{"name": "QUOTA_SHARE_NAME", "values": [name]}]}
            if page_size is not None:
                params["maxResults"] = page_size
            if tokens[name]:
                params["nextToken"] = tokens[name]
            page = client.list_service_jobs(**params)
            jobs.extend(j for j in (_summary_job(s, skipped) for s in page.get("jobSummaryList", [])) if j)
            if page.get("nextToken"):
                tokens[name] = page["nextToken"]
            else:
                del tokens[name]
        if not tokens:
            break
    return jobs, tuple(tokens)


def read_quota_queue(client: Any, queue: str, *, detail: Mapping[str, Any] | None = None,
                     now: float | None = None, page_size: int | None = None,
                     bounds: ListingBounds | None = None) -> QuotaQueueStatus:
    """Read each quota share's guarantee, usage and waiting jobs on ``queue``.

    :param client: a Batch client (``boto3.client("batch")``).
    :param queue: the queue's name or ARN.
    :param detail: its ``DescribeJobQueues`` entry when the caller already has it.
        Default: described here.
    :param now: the time waits are measured at (seconds since the epoch). Default: now.
    :param page_size: items per page of the listings (Batch: up to 1,000). Default: the API's.
    :param bounds: list the waiting jobs share by share within these bounds; the shares not
        read to the end are named in ``unread``. Default: one listing of the queue's waiting
        jobs, read to the end.

    An entry of an answer with a missing or non-numeric field is left out and said in
    ``skipped``; the rest of the answer is read.
    :raises QueueNotFound: when the queue does not exist.
    :raises GpuShareError: when the queue is not a quota-management queue.
    """
    if detail is None:
        detail = describe_queue(client, queue)
    if not is_quota_queue(detail):
        raise GpuShareError(
            f"job queue {queue!r} is a {detail.get('jobQueueType', 'classic')} queue, not a quota-management"
            f" ({QUOTA_QUEUE_TYPE}) queue; read it with the classic Batch reader"
        )
    now = time.time() if now is None else now
    skipped: list[str] = []
    listed = _list_shares(client, queue, page_size)
    snapshot = client.get_job_queue_snapshot(jobQueue=queue)
    usage = _usage_by_share(snapshot, skipped)
    names = [s["quotaShareName"] for s in listed if s.get("quotaShareName")]
    names += sorted(n for n in usage if n not in names)
    unread: tuple[str, ...] = ()
    if bounds is None:
        waiting = _waiting_jobs(client, queue, page_size, skipped)
    else:
        waiting, unread = _waiting_jobs_bounded(client, queue, sorted(names), bounds, page_size, skipped)
    by_share: dict[str, list[WaitingJob]] = {n: [] for n in names}
    unassigned = []
    for job in waiting:
        if job.share in by_share:
            by_share[job.share].append(job)
        else:
            unassigned.append(job)
    meta = {s["quotaShareName"]: s for s in listed if s.get("quotaShareName")}
    shares = []
    for name in sorted(names):
        m = meta.get(name, {})
        sharing = m.get("resourceSharingConfiguration") or {}
        preemption = m.get("preemptionConfiguration") or {}
        guarantee: dict[str, float] = {}
        for limit in m.get("capacityLimits", []):
            unit = limit.get("capacityUnit") if isinstance(limit, Mapping) else None
            amount = _quantity(limit.get("maxCapacity")) if isinstance(limit, Mapping) else None
            if not unit or amount is None:
                skipped.append(f"ListQuotaShares {name}: a capacity limit without a unit or a number ({limit!r})")
                continue
            guarantee[unit] = guarantee.get(unit, 0.0) + amount
        jobs = sorted(by_share[name], key=lambda j: (j.created_at is None, j.created_at or 0.0, j.job_id))
        shares.append(
            ShareStatus(
                name=name,
                guarantee=guarantee,
                usage=usage.get(name, {}),
                strategy=sharing.get("strategy"),
                borrow_limit_percent=sharing.get("borrowLimit"),
                in_share_preemption=(
                    None if "inSharePreemption" not in preemption else preemption["inSharePreemption"] == "ENABLED"
                ),
                state=m.get("state"),
                waiting=tuple(jobs),
            )
        )
    total: dict[str, float] = {}
    _add_usage(total, snapshot.get("queueUtilization", {}).get("totalCapacityUsage", []),
               "GetJobQueueSnapshot total", skipped)
    return QuotaQueueStatus(
        queue=detail.get("jobQueueName", queue),
        queue_arn=detail.get("jobQueueArn", ""),
        now=now,
        shares=tuple(shares),
        total_usage=total,
        snapshot_at=_seconds(snapshot.get("queueUtilization", {}).get("lastUpdatedAt")),
        unassigned_waiting=tuple(unassigned),
        skipped=tuple(skipped),
        unread=unread,
    )
