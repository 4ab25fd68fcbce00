"""An in-memory AWS Batch job queue (and the requeue ledger's DynamoDB table) behind real
boto3 clients.

The model answers from botocore's ``before-send`` event, so botocore still validates
every request against the service model and serializes it (rest-json for Batch, json
for DynamoDB), and parses every answer as it would AWS's. Faults are injected per
request: throttling, server errors before or after the change is applied, lost answers
(read timeouts after the change), refused connections. The model also lags the listing
behind submissions, repeats pages, ends and removes jobs, and emits the "Batch Job State
Change" FAILED events of the jobs it stops.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import botocore.session
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

REGION = "us-east-1"
ACCOUNT = "111122223333"
QUEUE_NAME = "gpu-share-fairshare"
QUEUE = f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/{QUEUE_NAME}"
ACTIVE = ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING")

#: Fault kinds. "applied": the change is made, the answer is lost.
NOT_APPLIED = ("throttle", "error", "connect", "connect_timeout")
APPLIED = ("error_after", "timeout_after")
MUTATING = {"TerminateJobs", "TerminateJob", "SubmitJob", "PutItem", "UpdateItem"}
#: The requests of a requeue (a cycle's reconciliation included), where the Lambda may be killed.
REQUEUE_OPS = {"SubmitJob", "PutItem", "UpdateItem", "GetItem", "Query"}
#: DynamoDB answers throttling with HTTP 400 and one of these codes.
DYNAMODB_THROTTLING = ("ProvisionedThroughputExceededException", "RequestLimitExceeded", "ThrottlingException")


class Killed(BaseException):
    """The Lambda's process died (a timeout, out of memory): no handler code runs after it."""


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any):
        yield self._body


def _response(request, status: int, body: dict, headers: dict | None = None) -> AWSResponse:
    data = json.dumps(body).encode()
    return AWSResponse(request.url, status, {"Content-Type": "application/json", **(headers or {})}, _Raw(data))


_SESSION = None


def new_client(service: str):
    """A client configured as the Lambda's (botocore makes one attempt; retries are the handler's)."""
    from botocore.config import Config

    global _SESSION
    if _SESSION is None:
        _SESSION = botocore.session.get_session()  # one loader: the service models are read once
    return _SESSION.create_client(
        service, region_name=REGION, aws_access_key_id="test", aws_secret_access_key="test",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))


@dataclass
class Clock:
    t: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        """A backoff that lets simulated time pass (outages end while a call retries)."""
        self.t += seconds


@dataclass
class Faults:
    """Seeded random faults: each request of an operation draws one, at these rates."""

    rng: random.Random
    throttle: float = 0.0
    error: float = 0.0
    error_after: float = 0.0
    timeout_after: float = 0.0
    connect: float = 0.0
    repeat_page: float = 0.0
    #: per request of a requeue: the Lambda dies before / after it, or raises after it
    kill: float = 0.0
    raise_after: float = 0.0
    #: scripted faults, operation -> kinds for its next requests (None: answer normally)
    script: dict = field(default_factory=dict)

    def draw(self, op: str) -> str | None:
        queued = self.script.get(op)
        if queued:
            return queued.pop(0)
        r = self.rng.random()
        for kind in ("throttle", "error", "connect"):
            rate = getattr(self, kind)
            if r < rate:
                return kind
            r -= rate
        if op in REQUEUE_OPS:
            for kind, rate in (("kill_before", self.kill / 2), ("kill_after", self.kill / 2),
                               ("raise_after", self.raise_after)):
                if r < rate:
                    return kind
                r -= rate
        if op in MUTATING:
            for kind in ("error_after", "timeout_after"):
                rate = getattr(self, kind)
                if r < rate:
                    return kind
                r -= rate
        else:
            if r < self.error_after + self.timeout_after:  # a read that timed out changes nothing
                return "timeout_after"
        return None


class BatchModel:
    """A job queue, its jobs, a listing that lags, stops that take effect later, events."""

    def __init__(self, *, clock: Clock | None = None, faults: Faults | None = None, seed: int = 0,
                 page_limit: int = 1000, listing_lag: tuple[float, float] = (0.0, 0.0),
                 stop_delay: tuple[float, float] = (0.0, 0.0), summary_terminated: bool = False,
                 end_rate: float = 0.0, capacity: float = 0.0) -> None:
        self.clock = clock or Clock()
        self.rng = random.Random(seed)
        self.faults = faults or Faults(random.Random(seed))
        self.page_limit = page_limit
        self.listing_lag = listing_lag
        self.stop_delay = stop_delay
        self.summary_terminated = summary_terminated
        self.end_rate = end_rate      # per request: a running job ends by itself (jobs ending mid-cycle)
        self.capacity = capacity      # GPUs the scheduler starts RUNNABLE jobs on at each tick (0: never)
        self.described_responses: list[dict] = []
        self.originals: dict[str, dict] = {}  # job -> its detail when created (immutable facts)
        self.jobs: dict[str, dict] = {}
        self.visible_at: dict[str, float] = {}
        self.fail_at: dict[str, float] = {}
        self.vanished: set[str] = set()
        self.ended_by_itself: set[str] = set()
        self.stops: dict[str, int] = {}      # job -> stops applied by TerminateJob(s)
        self.stops_log: list[tuple[float, str, str]] = []
        self.submissions: list[dict] = []    # SubmitJob parameters applied, with "jobId"
        self.tagged: list[tuple[str, dict]] = []  # TagResource requests applied: (job id, tags)
        self.events: list[dict] = []         # FAILED events not yet delivered
        self.requests: list[tuple[str, dict, str | None]] = []
        self.listed_responses: list[dict] = []  # every ListJobs summary answered (with the request status)
        #: (service, start, end, fault): every request to the service fails so in [start, end)
        self.outages: list[tuple[str, float, float, str]] = []
        #: When set, a request sent after it kills the Lambda (its timeout).
        self.deadline: float | None = None
        #: When set, SubmitJob is refused with this message (a client error: nothing is made).
        self.refuse_submit: str | None = None
        self._ids = 0
        new_ledger_table()
        self.batch = new_client("batch")
        self.dynamodb = new_client("dynamodb")
        self.batch.meta.events.register("before-send.batch", self._on_send)
        self.dynamodb.meta.events.register("before-send.dynamodb", self._on_send)

    # ------------------------------------------------------------------ jobs

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def add_job(self, share: str, status: str = "RUNNING", gpus: float = 1, *, job_id: str | None = None,
                name: str | None = None, priority: int = 0, started: float | None = None,
                created: float | None = None, tags: dict | None = None, **extra: Any) -> dict:
        self._ids += 1
        jid = job_id or f"job{self._ids:05d}"
        created_ms = int((created if created is not None else self.clock() - 600) * 1000)
        detail = {
            "jobArn": f"arn:aws:batch:{REGION}:{ACCOUNT}:job/{jid}",
            "jobId": jid, "jobName": name or f"train-{jid}", "jobQueue": QUEUE,
            "jobDefinition": f"arn:aws:batch:{REGION}:{ACCOUNT}:job-definition/{QUEUE_NAME}-{share}-gpu{int(gpus)}:1",
            "status": status, "shareIdentifier": share, "schedulingPriority": priority,
            "createdAt": created_ms, "dependsOn": [],
            "container": {"command": ["python", "train.py", jid],
                          "environment": [{"name": "LR", "value": "0.1"}, {"name": "AWS_BATCH_JOB_ID", "value": jid}],
                          "resourceRequirements": [{"type": "GPU", "value": str(gpus)}]},
            "parameters": {"epochs": "3"},
            "retryStrategy": {"attempts": 2},
            "timeout": {"attemptDurationSeconds": 86_400},
            "propagateTags": True,
            "tags": {"gpu-share:queue": QUEUE_NAME, "gpu-share:team": share, **(tags or {})},
            "isTerminated": False, "isCancelled": False,
        }
        if status in ("STARTING", "RUNNING"):
            detail["startedAt"] = int((started if started is not None else self.clock() - 300) * 1000)
            if status == "STARTING":
                detail.pop("startedAt")
        detail.update(extra)
        self.jobs[jid] = detail
        self.visible_at[jid] = 0.0
        self.originals[jid] = json.loads(json.dumps(detail))
        return detail

    def start(self, jid: str) -> None:
        job = self.jobs[jid]
        if job["status"] == "RUNNABLE":
            job["status"] = "RUNNING"
            job["startedAt"] = self.now_ms()

    def end(self, jid: str, status: str = "SUCCEEDED") -> None:
        """A job ends by itself."""
        job = self.jobs.get(jid)
        if job is not None and job["status"] in ACTIVE:
            job["status"] = status
            job["statusReason"] = "Essential container in task exited"
            job["stoppedAt"] = self.now_ms()
            self.ended_by_itself.add(jid)

    def vanish(self, jid: str) -> None:
        """A job gone from both the listing and DescribeJobs (aged out)."""
        self.jobs.pop(jid, None)
        self.vanished.add(jid)

    def gpus(self, job: dict) -> float:
        return sum(float(r["value"]) for r in job["container"]["resourceRequirements"] if r["type"] == "GPU")

    def schedule(self) -> None:
        """Start RUNNABLE jobs, oldest first, on the GPUs running jobs leave free."""
        used = sum(self.gpus(j) for j in self.jobs.values() if j["status"] in ("STARTING", "RUNNING"))
        for job in sorted((j for j in self.jobs.values() if j["status"] == "RUNNABLE"), key=lambda j: j["createdAt"]):
            if used + self.gpus(job) <= self.capacity:
                used += self.gpus(job)
                self.start(job["jobId"])

    def tick(self, seconds: float) -> None:
        """Time passes: stopped jobs reach FAILED (and their events are emitted); jobs start."""
        self.clock.t += seconds
        for jid, at in sorted(self.fail_at.items(), key=lambda kv: kv[1]):
            if at <= self.clock():
                del self.fail_at[jid]
                job = self.jobs.get(jid)
                if job is not None and job["status"] in ACTIVE:
                    job["status"] = "FAILED"
                    job["stoppedAt"] = self.now_ms()
                    self._emit_failed(job)
        if self.capacity:
            self.schedule()

    def _emit_failed(self, job: dict) -> None:
        detail = {k: v for k, v in json.loads(json.dumps(job)).items()}
        self.events.append({
            "version": "0", "id": f"ev-{job['jobId']}", "detail-type": "Batch Job State Change",
            "source": "aws.batch", "account": ACCOUNT, "region": REGION,
            "time": "2027-01-15T08:00:00Z", "resources": [job["jobArn"]], "detail": detail,
        })

    def requeued_from(self, jid: str) -> list[dict]:
        return [s for s in self.submissions if s.get("tags", {}).get("gpu-share:requeued-from") == jid]

    # ------------------------------------------------------------------ transport

    def _on_send(self, request, event_name: str, **_: Any):
        service, op = event_name.split(".")[-2:]
        params = json.loads(request.body or b"{}")
        if op == "TagResource":  # rest-json: the ARN is in the path, /v1/tags/{resourceArn}
            params["resourceArn"] = unquote(request.url.split("/v1/tags/", 1)[1])
        if self.deadline is not None and self.clock() > self.deadline:
            raise Killed(f"the Lambda timed out before {op}")
        fault = self._outage(service) or self.faults.draw(op)
        self.requests.append((op, params, fault))
        if self.end_rate and self.rng.random() < self.end_rate:
            running = [jid for jid, j in self.jobs.items() if j["status"] == "RUNNING"]
            if running:
                self.end(self.rng.choice(sorted(running)))
        if fault == "kill_before":
            raise Killed(f"the Lambda died before {op}")
        if fault and fault.startswith("throttle"):  # "throttle", or "throttle:<code>" (scripted)
            code = fault.partition(":")[2] or (
                self.rng.choice(DYNAMODB_THROTTLING) if service == "dynamodb" else "TooManyRequestsException")
            status = 400 if service == "dynamodb" else 429
            return _response(request, status, {"__type": code, "message": "Rate exceeded"}, {"x-amzn-ErrorType": code})
        if fault == "error":
            return self._server_error(request, op)
        if fault == "connect":
            raise (EndpointConnectionError if self.rng.random() < 0.5 else ConnectTimeoutError)(
                endpoint_url=request.url)
        if service == "dynamodb":
            response = self._dynamodb(request)
        else:
            try:
                status, body = getattr(self, "_" + op)(params)
            except _ClientError as exc:
                status, body = exc.status, {"__type": exc.code, "message": exc.message}
                return _response(request, status, body, {"x-amzn-ErrorType": exc.code})
            response = _response(request, status, body)
        if response.status_code >= 400:
            return response
        if fault == "error_after":
            return self._server_error(request, op)
        if fault == "timeout_after":
            raise ReadTimeoutError(endpoint_url=request.url)
        if fault == "kill_after":
            raise Killed(f"the Lambda died after {op} was applied")
        if fault == "raise_after":
            raise RuntimeError(f"an unexpected error after {op} was applied")
        return response

    def _outage(self, service: str) -> str | None:
        """The fault of a request during an outage of ``service`` (None: no outage now)."""
        for name, start, end, kind in self.outages:
            if name == service and start <= self.clock() < end:
                return kind
        return None

    @staticmethod
    def _server_error(request, op: str) -> AWSResponse:
        code = "InternalServerError" if op in ("PutItem", "UpdateItem", "GetItem", "Query") else "ServerException"
        return _response(request, 500, {"__type": code, "message": "internal error"}, {"x-amzn-ErrorType": code})

    # ------------------------------------------------------------------ Batch

    def _summary(self, job: dict, status: str | None = None) -> dict:
        keys = ("jobArn", "jobId", "jobName", "createdAt", "status", "statusReason", "startedAt", "stoppedAt",
                "shareIdentifier", "jobDefinition")
        out = {k: job[k] for k in keys if k in job}
        if self.summary_terminated:
            out["isTerminated"] = job["isTerminated"]
        return out

    def _ListJobs(self, p: dict):
        filters = p.get("filters") or []
        visible = [j for jid, j in self.jobs.items() if self.visible_at.get(jid, 0) <= self.clock()
                   and (j["jobQueue"] in (p["jobQueue"], QUEUE_NAME)
                        or j["jobQueue"].rsplit("/", 1)[-1] == p["jobQueue"])]
        if filters and filters[0]["name"] in ("AFTER_CREATED_AT", "BEFORE_CREATED_AT"):
            # One filter a call, every status, newest first (Batch's ListJobs).
            at = int(filters[0]["values"][0])
            after = filters[0]["name"] == "AFTER_CREATED_AT"
            items = sorted((j for j in visible if (j["createdAt"] > at if after else j["createdAt"] < at)),
                           key=lambda j: -j["createdAt"])
        elif filters:
            name = filters[0]["values"][0]
            items = sorted((j for j in visible if j["jobName"] == name), key=lambda j: -j["createdAt"])
        else:
            status = p.get("jobStatus", "RUNNING")
            items = sorted((j for j in visible if j["status"] == status), key=lambda j: (j["createdAt"], j["jobId"]))
        limit = min(p.get("maxResults") or 100, self.page_limit)
        offset = int(p["nextToken"].split(":", 1)[1]) if p.get("nextToken") else 0
        start = offset
        if offset and self.faults.rng.random() < self.faults.repeat_page:
            start = max(0, offset - limit)  # the previous page again (progress still made)
        page = items[start:offset + limit] if start != offset else items[offset:offset + limit]
        body: dict[str, Any] = {"jobSummaryList": [self._summary(j) for j in page]}
        for j in page:
            self.listed_responses.append({"jobId": j["jobId"], "status": j["status"], "at": self.clock(),
                                          "by_name": bool(filters)})
        if offset + limit < len(items):
            body["nextToken"] = f"o:{offset + limit}"
        return 200, body

    def _DescribeJobQueues(self, p: dict):
        """The classic queue of the model (a fair-share queue, not a quota-management one)."""
        asked = p.get("jobQueues") or [QUEUE]
        found = [{"jobQueueName": QUEUE_NAME, "jobQueueArn": QUEUE, "state": "ENABLED", "status": "VALID",
                  "priority": 1, "computeEnvironmentOrder": [], "jobQueueType": "ECS"}
                 for q in asked if q in (QUEUE, QUEUE_NAME)]
        return 200, {"jobQueues": found}

    def _DescribeJobs(self, p: dict):
        for j in p["jobs"]:
            if j in self.jobs:
                self.described_responses.append({"jobId": j, "status": self.jobs[j]["status"]})
        return 200, {"jobs": [json.loads(json.dumps(self.jobs[j])) for j in p["jobs"] if j in self.jobs]}

    def _stop(self, jid: str, reason: str) -> str | None:
        job = self.jobs.get(jid)
        if job is None:
            return "ClientException"
        if job["status"] not in ACTIVE:
            return None  # ended meanwhile: nothing to do, reported successful
        self.stops[jid] = self.stops.get(jid, 0) + 1
        self.stops_log.append((self.clock(), jid, reason))
        # Batch terminates a started job and cancels one not yet started (TerminateJob's documentation).
        job["isCancelled" if job["status"] in ("SUBMITTED", "PENDING", "RUNNABLE") else "isTerminated"] = True
        job["statusReason"] = reason
        if job["status"] in ("SUBMITTED", "PENDING", "RUNNABLE"):
            self.fail_at[jid] = self.clock()
        else:
            self.fail_at[jid] = self.clock() + self.rng.uniform(*self.stop_delay)
        return None

    def _TerminateJobs(self, p: dict):
        ok, errors = [], []
        for jid in p["jobs"]:
            code = self._stop(jid, p["reason"])
            if code:
                errors.append({"job": jid, "code": code, "message": f"Job {jid} not found"})
            else:
                ok.append(jid)
        return 200, {"successful": ok, "errors": errors}

    def _TerminateJob(self, p: dict):
        if self._stop(p["jobId"], p["reason"]):
            raise _ClientError(400, "ClientException", f"Job {p['jobId']} not found")
        return 200, {}

    def _TagResource(self, p: dict):
        job = next((j for j in self.jobs.values() if j["jobArn"] == p["resourceArn"]), None)
        if job is None:
            raise _ClientError(400, "ClientException", f"Resource {p['resourceArn']} not found")
        job["tags"] = {**job.get("tags", {}), **p["tags"]}
        self.tagged.append((p["resourceArn"].rsplit("/", 1)[1], dict(p["tags"])))
        return 200, {}

    def _SubmitJob(self, p: dict):
        if self.refuse_submit:
            raise _ClientError(400, "ClientException", self.refuse_submit)
        self._ids += 1
        jid = f"new{self._ids:05d}"
        overrides = p.get("containerOverrides") or {}
        detail = {
            "jobArn": f"arn:aws:batch:{REGION}:{ACCOUNT}:job/{jid}",
            "jobId": jid, "jobName": p["jobName"], "jobQueue": p["jobQueue"], "jobDefinition": p["jobDefinition"],
            "status": "RUNNABLE", "shareIdentifier": p.get("shareIdentifier", ""),
            "schedulingPriority": p.get("schedulingPriorityOverride", 0), "createdAt": self.now_ms(),
            "dependsOn": [],
            "container": {"command": overrides.get("command", []),
                          "environment": list(overrides.get("environment", []))
                          + [{"name": "AWS_BATCH_JOB_ID", "value": jid}],
                          "resourceRequirements": overrides.get("resourceRequirements", [])},
            "parameters": p.get("parameters", {}),
            "tags": dict(p.get("tags") or {}),
            "isTerminated": False, "isCancelled": False,
        }
        for key in ("retryStrategy", "timeout", "propagateTags"):
            if key in p:
                detail[key] = p[key]
        self.jobs[jid] = detail
        self.visible_at[jid] = self.clock() + self.rng.uniform(*self.listing_lag)
        self.submissions.append({**p, "jobId": jid})
        self.originals[jid] = json.loads(json.dumps(detail))
        return 200, {"jobName": p["jobName"], "jobId": jid, "jobArn": detail["jobArn"]}

    # ------------------------------------------------------------------ DynamoDB (the ledger)

    def _dynamodb(self, request) -> AWSResponse:
        """Answered by moto's DynamoDB: its own conditions, update expressions and validation."""
        status, headers, body = _MOTO.process_request(request)
        return AWSResponse(request.url, status, dict(headers), _Raw(body if isinstance(body, bytes) else body.encode()))

    @property
    def table(self) -> dict[str, dict]:
        """The ledger's items by job id (read without faults)."""
        items = _admin().scan(TableName=LEDGER_TABLE, ConsistentRead=True)["Items"]
        return {i["jobId"]["S"]: i for i in items}

    def put_ledger_item(self, item: dict) -> None:
        _admin().put_item(TableName=LEDGER_TABLE, Item=item)


#: The ledger table as the FairshareQueue construct declares it (a test compares the two).
LEDGER_TABLE = "gpu-share-requeue"
LEDGER_KEYS = {"jobId": "S", "openQueue": "S", "settleAfter": "N"}
LEDGER_INDEX = {"IndexName": "open-by-settle-time",
                "KeySchema": [{"AttributeName": "openQueue", "KeyType": "HASH"},
                              {"AttributeName": "settleAfter", "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"}}

_MOTO = None
_ADMIN = None


def _admin():
    """A fault-free DynamoDB client answered by moto (for setting up and reading the table)."""
    global _MOTO, _ADMIN
    if _ADMIN is None:
        from moto.core.botocore_stubber import BotocoreStubber

        _MOTO = BotocoreStubber()
        _MOTO.enabled = True
        _ADMIN = new_client("dynamodb")
        _ADMIN.meta.events.register_first("before-send.dynamodb", _MOTO)
    return _ADMIN


def new_ledger_table() -> None:
    """A fresh, empty ledger table in moto's DynamoDB."""
    admin = _admin()
    try:
        admin.delete_table(TableName=LEDGER_TABLE)
    except admin.exceptions.ResourceNotFoundException:
        pass
    admin.create_table(
        TableName=LEDGER_TABLE, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": t} for k, t in LEDGER_KEYS.items()],
        KeySchema=[{"AttributeName": "jobId", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[LEDGER_INDEX])


class _ClientError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def add_fault(model: BatchModel, op: str, *kinds: str | None) -> None:
    """Script the next requests of ``op``: each a fault kind, or None (answered normally)."""
    model.faults.script.setdefault(op, []).extend(kinds)


def lambda_context(seconds: float = 120.0, clock: Callable[[], float] | None = None) -> Any:
    """Lambda's context: ``seconds`` left, counted down by ``clock`` when given."""
    deadline = clock() + seconds if clock is not None else None

    class Context:
        def get_remaining_time_in_millis(self) -> int:
            left = seconds if deadline is None or clock is None else deadline - clock()
            return int(max(0.0, left) * 1000)
    return Context()


def quiet(fn: Callable, *args: Any, **kwargs: Any):
    return fn(*args, **kwargs)


def reclaim_lambda_model(monkeypatch: Any, settings: dict) -> BatchModel:
    """A model the reclaim Lambda's handler talks to, with ``settings`` in its environment and a
    cold cache: what a test of the handler starts from."""
    from cdk_gpu_share.aws import batch_reader as br
    from cdk_gpu_share.lambdas.reclaim import handler as h

    m = BatchModel(clock=Clock())
    monkeypatch.setenv("GPU_SHARE_QUEUE", QUEUE)
    monkeypatch.setenv("GPU_SHARE_SETTINGS", br.encode_settings(settings))
    monkeypatch.setenv(h.REQUEUE_TABLE_ENV, "gpu-share-requeue")
    monkeypatch.delenv("GPU_SHARE_DRY_RUN", raising=False)
    monkeypatch.setattr(h, "_client", m.batch)
    monkeypatch.setattr(h, "_dynamodb", m.dynamodb)
    monkeypatch.setattr(h, "_now", m.clock)
    monkeypatch.setattr(h, "_last_cycle_started", 0.0)
    monkeypatch.setattr(h, "_cache", br.DescribeCache())
    return m
