"""An in-memory AWS Batch quota-management queue behind a real boto3 client.

Answers ``ListQuotaShares``, ``GetJobQueueSnapshot``, ``ListServiceJobs`` (filtered by
status, and by quota share newest first as Batch sorts a filtered listing; paged by
``maxResults``/``nextToken``; each page may take ``list_seconds`` of the clock),
``DescribeServiceJob``, ``DescribeQuotaShare`` and ``UpdateQuotaShare`` at botocore's
``before-send``, so botocore validates and serializes every request and parses every answer
as it would AWS's. Faults per request: throttling (429), server errors (500) before the
change or after it ("error_after": the change is made, the answer lost), and
"partial" answers whose entries lose a field (a quota share's ``maxCapacity``, a
summary's ``jobId``, a usage's ``quantity``).

:class:`ComputeQuotaModel` is HyperPod's compute quotas behind a real SageMaker client
(``ListComputeQuotas`` of a cluster, ``DescribeComputeQuota``, ``UpdateComputeQuota`` at the
``TargetVersion`` read, a "conflict" fault being another writer's update just before).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timezone
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
    stopped: float | None = None
    team: str | None = None  # its gpu-share:team tag


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
    #: share -> its strategy (default LEND_AND_BORROW)
    strategies: dict[str, str] = field(default_factory=dict)
    #: Seconds of the clock each ListServiceJobs page takes (a slow or flooded listing).
    list_seconds: float = 0.0
    #: Whether a job summary says what the job asks for (``capacityUsage``); without it, only
    #: ``DescribeServiceJob``'s request does.
    summary_sizes: bool = True
    #: share -> its borrow limit (default -1: no limit)
    borrow_limits: dict[str, int] = field(default_factory=dict)
    #: The queue's instances per type: an update that makes the shares' guarantees add up to
    #: more is recorded in ``overcommitted`` (Batch takes it; a switch must never do it).
    capacity: dict[str, float] = field(default_factory=dict)
    overcommitted: list[dict[str, float]] = field(default_factory=list)

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
        if fault == "error_after":
            return _response(request, 500, {"__type": "ServerException", "message": "internal error"})
        if fault == "partial":
            body = _partial(op, body)
        return _response(request, status, body)

    def _DescribeJobQueues(self, p: dict):
        """The quota-management queue of the model."""
        found = [{"jobQueueName": QUEUE_NAME, "jobQueueArn": QUEUE, "state": "ENABLED", "status": "VALID",
                  "priority": 1, "jobQueueType": "SAGEMAKER_TRAINING", "serviceEnvironmentOrder": []}
                 for q in p.get("jobQueues") or [QUEUE] if q in (QUEUE, QUEUE_NAME)]
        return 200, {"jobQueues": found}

    def _ListQuotaShares(self, p: dict):
        shares = [{"quotaShareName": name, "quotaShareArn": f"{QUEUE}/quota-share/{name}", "jobQueueArn": QUEUE,
                   "capacityLimits": [{"capacityUnit": u, "maxCapacity": int(n)} for u, n in g.items()],
                   "resourceSharingConfiguration": {"strategy": self.strategies.get(name, "LEND_AND_BORROW"),
                                                    "borrowLimit": -1},
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
        self.clock.t += self.list_seconds
        jobs = [j for j in self.jobs.values() if j.queue in (QUEUE, p.get("jobQueue"))
                and j.status == p.get("jobStatus", j.status)]
        shares = [f["values"][0] for f in p.get("filters", ()) if f["name"] == "QUOTA_SHARE_NAME"]
        after = [int(f["values"][0]) for f in p.get("filters", ()) if f["name"] == "AFTER_CREATED_AT"]
        if shares:
            jobs = sorted((j for j in jobs if j.share == shares[0]), key=lambda j: -j.created)
        elif after:  # a filter lists every status, newest first
            jobs = sorted((j for j in self.jobs.values() if j.queue in (QUEUE, p.get("jobQueue"))
                           and j.created * 1000 > after[0]), key=lambda j: -j.created)
        summaries = [{"jobId": j.job_id, "jobName": f"train-{j.job_id}", "jobArn": _arn(j.job_id),
                      "serviceJobType": "SAGEMAKER_TRAINING", "quotaShareName": j.share, "status": j.status,
                      "createdAt": int(j.created * 1000)} for j in jobs]
        if self.summary_sizes:
            for summary, j in zip(summaries, jobs):
                summary["capacityUsage"] = [{"capacityUnit": u, "quantity": n} for u, n in j.instances.items()]
        return self._page(summaries, "jobSummaryList", p)

    def _DescribeServiceJob(self, p: dict):
        j = self.jobs.get(p["jobId"])
        if j is None:
            return 400, {"__type": "ClientException", "message": f"Job {p['jobId']} not found"}
        return 200, {"jobId": j.job_id, "jobName": f"train-{j.job_id}", "jobArn": _arn(j.job_id), "jobQueue": j.queue,
                     "serviceJobType": "SAGEMAKER_TRAINING", "quotaShareName": j.share, "status": j.status,
                     "startedAt": int((j.started or j.created) * 1000), "createdAt": int(j.created * 1000),
                     "schedulingPriority": j.priority,
                     **({"stoppedAt": int(j.stopped * 1000)} if j.stopped is not None else {}),
                     **({"tags": {"gpu-share:team": j.team}} if j.team else {}),
                     "serviceRequestPayload": json.dumps({"ResourceConfig": {"InstanceGroups": [
                         {"InstanceType": t, "InstanceCount": int(n)} for t, n in j.instances.items()]}})}

    def share_arn(self, name: str) -> str:
        return f"{QUEUE}/quota-share/{name}"

    def _share_of(self, arn: str) -> str | None:
        name = arn.rsplit("/quota-share/", 1)[-1]
        return name if arn == self.share_arn(name) and name in self.shares else None

    def _DescribeQuotaShare(self, p: dict):
        name = self._share_of(p["quotaShareArn"])
        if name is None:
            return 400, {"__type": "ClientException", "message": f"Quota share {p['quotaShareArn']} not found"}
        return 200, {"quotaShareName": name, "quotaShareArn": self.share_arn(name), "jobQueueArn": QUEUE,
                     "capacityLimits": [{"capacityUnit": u, "maxCapacity": int(n)} for u, n in self.shares[name].items()],
                     "resourceSharingConfiguration": {"strategy": self.strategies.get(name, "LEND_AND_BORROW"),
                                                      "borrowLimit": self.borrow_limits.get(name, -1)},
                     "preemptionConfiguration": {"inSharePreemption": "DISABLED"}, "state": "ENABLED",
                     "status": "VALID"}

    def _UpdateQuotaShare(self, p: dict):
        name = self._share_of(p["quotaShareArn"])
        if name is None:
            return 400, {"__type": "ClientException", "message": f"Quota share {p['quotaShareArn']} not found"}
        if "capacityLimits" in p:
            self.shares[name] = {c["capacityUnit"]: float(c["maxCapacity"]) for c in p["capacityLimits"]}
        sharing = p.get("resourceSharingConfiguration")
        if sharing:
            self.strategies[name] = sharing["strategy"]
            self.borrow_limits[name] = sharing.get("borrowLimit", -1)
        total: dict[str, float] = {}
        for g in self.shares.values():
            for u, n in g.items():
                total[u] = total.get(u, 0.0) + n
        if any(n > self.capacity.get(u, float("inf")) for u, n in total.items()):
            self.overcommitted.append(total)
        return 200, {"quotaShareName": name, "quotaShareArn": self.share_arn(name)}

    @staticmethod
    def _page(items: list, key: str, p: dict):
        size = int(p.get("maxResults") or 100)
        start = int(p.get("nextToken") or 0)
        body: dict[str, Any] = {key: items[start:start + size]}
        if start + size < len(items):
            body["nextToken"] = str(start + size)
        return 200, body


def monitor_client():
    """A Batch client configured as the share monitor's (botocore retries throttling and 5xx, 3 attempts)."""
    import botocore.session
    from botocore.config import Config

    return botocore.session.get_session().create_client(
        "batch", region_name=REGION, aws_access_key_id="test", aws_secret_access_key="test",
        config=Config(retries={"total_max_attempts": 3, "mode": "standard"}))


@dataclass
class ComputeQuotaModel:
    """HyperPod compute quotas (id -> ``ComputeQuotaConfig`` as the API writes it), each with
    its version, behind a real SageMaker client.

    ``UpdateComputeQuota`` replaces the configuration when its ``TargetVersion`` is the
    quota's version (then the version goes up by one), else answers ``ConflictException``.
    Faults per request (``script``): "throttle", "error" (500, not applied), "error_after"
    (applied, the answer lost) and "conflict" (another writer updates the quota just before)."""

    quotas: dict[str, dict[str, Any]]
    #: The cluster's instances per type: an update that makes the quotas add up to more is
    #: recorded in ``overcommitted``.
    capacity: dict[str, float] = field(default_factory=dict)
    script: dict[str, list[str]] = field(default_factory=dict)
    requests: list[tuple[str, dict]] = field(default_factory=list)
    overcommitted: list[dict[str, float]] = field(default_factory=list)
    #: id -> the team its quota is for (default ``team-<id>``); all on cluster :attr:`cluster_arn`.
    teams: dict[str, str] = field(default_factory=dict)
    cluster_arn: str = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/gpu-share"

    def __post_init__(self) -> None:
        import botocore.session
        from botocore.config import Config

        self.versions = {qid: 1 for qid in self.quotas}
        self.client = botocore.session.get_session().create_client(
            "sagemaker", region_name=REGION, aws_access_key_id="test", aws_secret_access_key="test",
            config=Config(retries={"total_max_attempts": 3, "mode": "standard"}))
        self.client.meta.events.register("before-send.sagemaker", self._on_send)

    def counts(self, qid: str) -> dict[str, float]:
        """The quota's instances per type."""
        return {r["InstanceType"]: r.get("Count", 0) for r in self.quotas[qid].get("ComputeQuotaResources", ())}

    def _on_send(self, request, event_name: str, **_: Any):
        op = event_name.split(".")[-1]
        params = json.loads(request.body or b"{}")
        self.requests.append((op, params))
        fault = self.script[op].pop(0) if self.script.get(op) else None
        if fault == "throttle":
            return _json_response(request, 400, {"__type": "ThrottlingException", "message": "Rate exceeded"})
        if fault == "error":
            return _json_response(request, 500, {"__type": "InternalFailure", "message": "internal error"})
        if fault == "conflict":
            self.versions[params["ComputeQuotaId"]] += 1
        status, body = getattr(self, "_" + op)(params)
        if fault == "error_after":
            return _json_response(request, 500, {"__type": "InternalFailure", "message": "internal error"})
        return _json_response(request, status, body)

    def _described(self, qid: str) -> dict:
        return {"ComputeQuotaArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:compute-quota/{qid}",
                "ComputeQuotaId": qid, "Name": f"quota-{qid}", "ComputeQuotaVersion": self.versions[qid],
                "Status": "Updated", "ClusterArn": self.cluster_arn,
                "ComputeQuotaConfig": json.loads(json.dumps(self.quotas[qid])),
                "ComputeQuotaTarget": {"TeamName": self.teams.get(qid, f"team-{qid}")}, "ActivationState": "Enabled",
                "CreationTime": 1_800_000_000}

    def _DescribeComputeQuota(self, p: dict):
        qid = p["ComputeQuotaId"]
        if qid not in self.quotas:
            return 400, {"__type": "ResourceNotFound", "Message": f"Compute quota {qid} not found"}
        return 200, self._described(qid)

    def _ListComputeQuotas(self, p: dict):
        found = [self._described(qid) for qid in self.quotas if p.get("ClusterArn") in (None, self.cluster_arn)]
        return 200, {"ComputeQuotaSummaries": found}

    def _UpdateComputeQuota(self, p: dict):
        qid = p["ComputeQuotaId"]
        if qid not in self.quotas:
            return 400, {"__type": "ResourceNotFound", "Message": f"Compute quota {qid} not found"}
        if p["TargetVersion"] != self.versions[qid]:
            return 400, {"__type": "ConflictException",
                         "Message": f"TargetVersion {p['TargetVersion']} is not the version {self.versions[qid]}"}
        if "ComputeQuotaConfig" in p:
            self.quotas[qid] = p["ComputeQuotaConfig"]
        self.versions[qid] += 1
        total: dict[str, float] = {}
        for q in self.quotas:
            for t, n in self.counts(q).items():
                total[t] = total.get(t, 0) + n
        if any(n > self.capacity.get(t, float("inf")) for t, n in total.items()):
            self.overcommitted.append(total)
        return 200, {"ComputeQuotaArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:compute-quota/{qid}",
                     "ComputeQuotaVersion": self.versions[qid]}


def _json_response(request, status: int, body: dict) -> AWSResponse:
    """An answer in SageMaker's protocol (awsJson1_1)."""
    return AWSResponse(request.url, status, {"Content-Type": "application/x-amz-json-1.1"},
                       _Raw(json.dumps(body).encode()))


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


class CloudWatchModel:
    """CloudWatch ``GetMetricData`` over the embedded-metric-format lines a Lambda printed.

    The request is read where botocore builds it (``before-parameter-build``) and answered at
    ``before-send`` in CBOR (the protocol botocore speaks to CloudWatch), so botocore validates
    and serializes the request and parses the answer as it would AWS's. Pages hold at most
    ``page_points`` values, so paging is exercised.
    """

    def __init__(self, page_points: int = 1000) -> None:
        import botocore.session
        from botocore.config import Config

        self.points: dict[tuple[str, frozenset], list[tuple[int, float]]] = {}
        self.page_points = page_points
        self.requests: list[dict] = []
        self.client = botocore.session.get_session().create_client(
            "cloudwatch", region_name=REGION, aws_access_key_id="test", aws_secret_access_key="test",
            config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))
        self.client.meta.events.register("before-parameter-build.cloudwatch.GetMetricData", self._params)
        self.client.meta.events.register("before-send.cloudwatch", self._on_send)

    def ingest(self, line: str) -> None:
        record = json.loads(line)
        directive = record.get("_aws")
        if not directive:
            return
        for block in directive["CloudWatchMetrics"]:
            for dims in block["Dimensions"]:
                key_dims = frozenset((d, record[d]) for d in dims)
                for m in block["Metrics"]:
                    self.points.setdefault((m["Name"], key_dims), []).append(
                        (directive["Timestamp"] // 1000, float(record[m["Name"]])))

    def _params(self, params: dict, **_: Any) -> None:
        self.requests.append(json.loads(json.dumps(params, default=lambda d: d.timestamp())))

    def _on_send(self, request, **_: Any):
        import botocore.serialize as S

        p = self.requests[-1]
        start, end = p["StartTime"], p["EndTime"]
        offset = int(p.get("NextToken") or 0)
        results, budget = [], self.page_points
        for q in p["MetricDataQueries"]:
            stat = q["MetricStat"]
            metric = stat["Metric"]
            dims = frozenset((d["Name"], d["Value"]) for d in metric.get("Dimensions", []))
            buckets: dict[int, list[float]] = {}
            for t, v in self.points.get((metric["MetricName"], dims), []):
                if start <= t < end:
                    buckets.setdefault(t - t % stat["Period"], []).append(v)
            series = sorted(buckets.items())
            rows = [(t, (sum(vs) if stat["Stat"] == "Sum" else sum(vs) / len(vs))) for t, vs in series]
            skip = min(offset, len(rows))
            offset -= skip
            take = rows[skip:skip + budget]
            budget -= len(take)
            results.append({"Id": q["Id"], "Label": metric["MetricName"], "StatusCode": "Complete",
                            "Timestamps": [datetime.fromtimestamp(t, timezone.utc) for t, _ in take],
                            "Values": [v for _, v in take]})
        total = sum(len(x["Values"]) for x in results)
        body: dict[str, Any] = {"MetricDataResults": results}
        if total == self.page_points:
            body["NextToken"] = str(int(p.get("NextToken") or 0) + total)
        model = self.client.meta.service_model
        if getattr(model, "resolved_protocol", model.protocol) == "smithy-rpc-v2-cbor":
            raw = bytearray()
            S.RpcV2CBORSerializer()._serialize_data_item(raw, body, model.operation_model("GetMetricData").output_shape)
            return AWSResponse(request.url, 200, {"smithy-protocol": "rpc-v2-cbor",
                                                  "Content-Type": "application/cbor"}, _Raw(bytes(raw)))
        # awsJson1_0: timestamps as epoch seconds
        for r in results:
            r["Timestamps"] = [t.timestamp() for t in r["Timestamps"]]
        return AWSResponse(request.url, 200, {"Content-Type": "application/x-amz-json-1.0"},
                           _Raw(json.dumps(body).encode()))


@dataclass
class AlarmModel:
    """CloudWatch's evaluation of a metric alarm, in whole periods (enough to tell whether an
    alarm can fire): at a time, the last ``evaluation_periods`` complete periods are read
    (statistic Sum); a missing period is breaching or not as ``treat_missing`` says; the alarm
    is in ALARM when at least ``datapoints_to_alarm`` of them breach."""

    period: int
    evaluation_periods: int
    datapoints_to_alarm: int
    threshold: float
    comparison: str
    treat_missing: str
    #: timestamp (seconds) -> value of each point published
    points: list[tuple[float, float]] = field(default_factory=list)

    @classmethod
    def of(cls, props: dict) -> AlarmModel:
        """The model of a synthesized ``AWS::CloudWatch::Alarm``'s properties."""
        return cls(period=props["Period"], evaluation_periods=props["EvaluationPeriods"],
                   datapoints_to_alarm=props.get("DatapointsToAlarm", props["EvaluationPeriods"]),
                   threshold=props["Threshold"], comparison=props["ComparisonOperator"],
                   treat_missing=props.get("TreatMissingData", "missing"))

    def _breaches(self, value: float | None) -> bool:
        if value is None:
            return self.treat_missing == "breaching"
        return {"LessThanThreshold": value < self.threshold,
                "GreaterThanOrEqualToThreshold": value >= self.threshold,
                "GreaterThanThreshold": value > self.threshold}[self.comparison]

    def state(self, now: float) -> str:
        end = now - now % self.period  # the last complete period ends here
        breaching = 0
        for k in range(1, self.evaluation_periods + 1):
            start = end - k * self.period
            values = [v for t, v in self.points if start <= t < start + self.period]
            breaching += self._breaches(sum(values) if values else None)
        return "ALARM" if breaching >= self.datapoints_to_alarm else "OK"
