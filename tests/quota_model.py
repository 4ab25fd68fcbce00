"""An in-memory AWS Batch quota-management queue behind a real boto3 client.

Answers ``ListQuotaShares``, ``GetJobQueueSnapshot``, ``ListServiceJobs`` (filtered by
status, paged by ``maxResults``/``nextToken``) and ``DescribeServiceJob`` at botocore's
``before-send``, so botocore validates and serializes every request and parses every answer
as it would AWS's. Faults per request: throttling (429), server errors (500), and
"partial" answers whose entries lose a field (a quota share's ``maxCapacity``, a
summary's ``jobId``, a usage's ``quantity``).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse

from tests.batch_model import ACCOUNT, REGION, _Raw

QUEUE_NAME = "gpu-share-training"
QUEUE = f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/{QUEUE_NAME}"


@dataclass
class ServiceJob:
    job_id: str
    share: str
    instances: dict[str, float]
    created: float
    status: str = "RUNNABLE"
    started: float | None = None
    priority: int = 0
    queue: str = QUEUE


@dataclass
class QuotaQueueModel:
    """Quota shares (team -> guarantee per instance type) and their service jobs."""

    shares: dict[str, dict[str, float]]
    clock: Any
    seed: int = 0
    jobs: dict[str, ServiceJob] = field(default_factory=dict)
    #: op -> fault kinds for its next requests ("throttle", "error", "partial")
    script: dict[str, list[str]] = field(default_factory=dict)
    requests: list[tuple[str, dict]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.batch = monitor_client()
        self.batch.meta.events.register("before-send.batch", self._on_send)
        self._ids = 0

    # -- the queue ---------------------------------------------------------

    def submit(self, share: str, instances: dict[str, float], *, job_id: str | None = None, priority: int = 0,
               queue: str = QUEUE) -> ServiceJob:
        self._ids += 1
        job = ServiceJob(job_id or f"sj{self._ids:04d}", share, instances, self.clock(), priority=priority,
                         queue=queue)
        self.jobs[job.job_id] = job
        return job

    def start(self, job_id: str) -> None:
        job = self.jobs[job_id]
        job.status, job.started = "RUNNING", self.clock()

    def finish(self, job_id: str) -> None:
        self.jobs[job_id].status = "SUCCEEDED"

    def preempt(self, job_id: str) -> None:
        """Batch stops the job and queues it again (it keeps its creation time)."""
        job = self.jobs[job_id]
        job.status, job.started = "RUNNABLE", None

    def usage(self, share: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for j in self.jobs.values():
            if j.share == share and j.status == "RUNNING" and j.queue == QUEUE:
                for u, n in j.instances.items():
                    out[u] = out.get(u, 0.0) + n
        return out

    def waiting(self, share: str) -> list[ServiceJob]:
        return [j for j in self.jobs.values() if j.share == share and j.status == "RUNNABLE" and j.queue == QUEUE]

    # -- the API -------------------------------------------------------------

    def _on_send(self, request, event_name: str, **_: Any):
        op = event_name.split(".")[-1]
        params = json.loads(request.body or b"{}")
        self.requests.append((op, params))
        fault = (self.script.get(op) or [None]).pop(0) if self.script.get(op) else None
        if fault == "throttle":
            return _response(request, 429, {"__type": "TooManyRequestsException", "message": "Rate exceeded"})
        if fault == "error":
            return _response(request, 500, {"__type": "ServerException", "message": "internal error"})
        status, body = getattr(self, "_" + op)(params)
        if fault == "partial":
            body = _partial(op, body)
        return _response(request, status, body)

    def _ListQuotaShares(self, p: dict):
        shares = [{"quotaShareName": name, "quotaShareArn": f"{QUEUE}/quota-share/{name}", "jobQueueArn": QUEUE,
                   "capacityLimits": [{"capacityUnit": u, "maxCapacity": int(n)} for u, n in g.items()],
                   "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": -1},
                   "preemptionConfiguration": {"inSharePreemption": "DISABLED"}, "state": "ENABLED",
                   "status": "VALID"} for name, g in self.shares.items()]
        return self._page(shares, "quotaShares", p)

    def _GetJobQueueSnapshot(self, p: dict):
        util = [{"quotaShareName": name, "capacityUsage": [{"capacityUnit": u, "quantity": n}
                                                           for u, n in self.usage(name).items()]}
                for name in self.shares if self.usage(name)]
        total: dict[str, float] = {}
        for name in self.shares:
            for u, n in self.usage(name).items():
                total[u] = total.get(u, 0.0) + n
        return 200, {"queueUtilization": {
            "totalCapacityUsage": [{"capacityUnit": u, "quantity": n} for u, n in total.items()],
            "quotaShareUtilization": {"topCapacityUtilization": util},
            "lastUpdatedAt": int(self.clock() * 1000)}}

    def _ListServiceJobs(self, p: dict):
        jobs = [j for j in self.jobs.values() if j.queue == QUEUE and j.status == p.get("jobStatus", j.status)]
        summaries = [{"jobId": j.job_id, "jobName": f"train-{j.job_id}", "jobArn": _arn(j.job_id),
                      "serviceJobType": "SAGEMAKER_TRAINING", "quotaShareName": j.share, "status": j.status,
                      "createdAt": int(j.created * 1000)} for j in jobs]
        return self._page(summaries, "jobSummaryList", p)

    def _DescribeServiceJob(self, p: dict):
        j = self.jobs.get(p["jobId"])
        if j is None:
            return 400, {"__type": "ClientException", "message": f"Job {p['jobId']} not found"}
        return 200, {"jobId": j.job_id, "jobName": f"train-{j.job_id}", "jobArn": _arn(j.job_id), "jobQueue": j.queue,
                     "serviceJobType": "SAGEMAKER_TRAINING", "quotaShareName": j.share, "status": j.status,
                     "startedAt": int((j.started or j.created) * 1000), "createdAt": int(j.created * 1000),
                     "schedulingPriority": j.priority}

    @staticmethod
    def _page(items: list, key: str, p: dict):
        size = int(p.get("maxResults") or 100)
        start = int(p.get("nextToken") or 0)
        body: dict[str, Any] = {key: items[start:start + size]}
        if start + size < len(items):
            body["nextToken"] = str(start + size)
        return 200, body


def monitor_client():
    """A Batch client configured as the share monitor's (botocore retries throttling and 5xx, 5 attempts)."""
    import botocore.session
    from botocore.config import Config

    return botocore.session.get_session().create_client(
        "batch", region_name=REGION, aws_access_key_id="test", aws_secret_access_key="test",
        config=Config(retries={"total_max_attempts": 5, "mode": "standard"}))


def _arn(job_id: str) -> str:
    return f"arn:aws:batch:{REGION}:{ACCOUNT}:service-job/{job_id}"


def _partial(op: str, body: dict) -> dict:
    """The answer with one field missing in its first entry (an incomplete answer)."""
    body = json.loads(json.dumps(body))
    if op == "ListQuotaShares" and body["quotaShares"]:
        del body["quotaShares"][0]["capacityLimits"][0]["maxCapacity"]
    elif op == "ListServiceJobs" and body["jobSummaryList"]:
        del body["jobSummaryList"][0]["jobId"]
    elif op == "GetJobQueueSnapshot":
        util = body["queueUtilization"]["quotaShareUtilization"]["topCapacityUtilization"]
        if util:
            del util[0]["quotaShareName"]
    return body


def _response(request, status: int, body: dict) -> AWSResponse:
    headers = {"Content-Type": "application/json"}
    if status >= 400:
        headers["x-amzn-ErrorType"] = body["__type"]
    return AWSResponse(request.url, status, headers, _Raw(json.dumps(body).encode()))
