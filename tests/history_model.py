"""The job archive behind real boto3 clients, and a fair-share cluster that fills it.

* :class:`S3Model`: buckets of objects answered at botocore's ``before-send`` (``ListObjectsV2``
  paged by ``MaxKeys`` and continuation tokens, ``GetObject``), so botocore still builds and
  signs every request and parses every answer as it would Amazon S3's.
* :func:`firehose_objects`: events as Amazon Data Firehose writes them for the archive: grouped
  into objects by arrival buffer, one JSON object a line (or back to back, without the
  delimiter processor), gzip or not, under ``events/YYYY/MM/DD/config=<hash>/``.
* :class:`FairshareCluster`: the fair-share queue over a known trace: the simulator's engine
  decides (it calls the reclaim planner the reclaimer calls), and every start, stop and end is
  told as AWS Batch and the reclaimer tell it: ``Batch Job State Change`` events, a stopped
  job FAILED with the reclaimer's reason and resubmitted as a new job tagged
  ``gpu-share:requeued-from``. ``startup_s`` adds a start-up delay: a run holds its GPUs that
  long before its container runs (``startedAt``), as an instance launch or an image pull does.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

import botocore.session
from botocore.awsrequest import AWSResponse
from botocore.config import Config

REGION = "us-east-1"
ACCOUNT = "111122223333"
#: The teams of the round trips as service jobs of a quota-management queue (one GPU an instance).
QUOTA_CONFIG = """\
platform: {name: gpu-share}
teams:
  - {name: team-a, guarantee: {ml.g5.xlarge: 2}}
  - {name: team-b, guarantee: {ml.g5.xlarge: 1}, checkpoint_seconds: 600}
  - {name: team-c, guarantee: {ml.g5.xlarge: 1}}
batch_quota:
  capacity: {ml.g5.xlarge: 4}
"""


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._io = io.BytesIO(body)

    def stream(self, **_: Any):
        yield self._io.getvalue()

    def read(self, amt: int | None = None, **_: Any) -> bytes:
        return self._io.read() if amt is None else self._io.read(amt)


def new_client(service: str, **config: Any) -> Any:
    session = botocore.session.get_session()
    return session.create_client(service, region_name=REGION, aws_access_key_id="test",
                                 aws_secret_access_key="test",
                                 config=Config(retries={"total_max_attempts": 1, "mode": "standard"}, **config))


class S3Model:
    """Buckets of objects; ``requests`` records (operation, bucket, params)."""

    def __init__(self, page_size: int = 1000) -> None:
        self.buckets: dict[str, dict[str, bytes]] = {}
        self.page_size = page_size
        self.requests: list[tuple[str, str, dict]] = []
        self.client = new_client("s3", s3={"addressing_style": "path"})
        self.client.meta.events.register("before-send.s3", self._on_send)

    def put(self, bucket: str, key: str, body: bytes) -> None:
        self.buckets.setdefault(bucket, {})[key] = body

    def _on_send(self, request: Any, event_name: str, **_: Any) -> AWSResponse:
        op = event_name.split(".")[-1]
        url = urlsplit(request.url)
        path = unquote(url.path).lstrip("/")
        bucket, _, key = path.partition("/")
        query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        self.requests.append((op, bucket, query))
        if bucket not in self.buckets:
            return self._error(request, 404, "NoSuchBucket", "The specified bucket does not exist")
        if op == "ListObjectsV2":
            return self._list(request, bucket, query)
        if op == "GetObject":
            body = self.buckets[bucket].get(key)
            if body is None:
                return self._error(request, 404, "NoSuchKey", "The specified key does not exist.")
            return AWSResponse(request.url, 200, {"Content-Length": str(len(body)),
                                                  "Content-Type": "application/octet-stream"}, _Raw(body))
        return self._error(request, 400, "NotImplemented", op)

    def _list(self, request: Any, bucket: str, query: dict) -> AWSResponse:
        prefix = query.get("prefix", "")
        keys = sorted(k for k in self.buckets[bucket] if k.startswith(prefix))
        start = int(query.get("continuation-token", "0") or 0)
        size = min(self.page_size, int(query.get("max-keys", self.page_size)))
        page = keys[start:start + size]
        more = start + size < len(keys)
        contents = "".join(
            f"<Contents><Key>{escape(k)}</Key><LastModified>2026-11-01T00:00:00.000Z</LastModified>"
            f"<ETag>&quot;x&quot;</ETag><Size>{len(self.buckets[bucket][k])}</Size>"
            f"<StorageClass>STANDARD</StorageClass></Contents>" for k in page)
        body = (f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                f"<Name>{bucket}</Name><Prefix>{escape(prefix)}</Prefix><KeyCount>{len(page)}</KeyCount>"
                f"<MaxKeys>{size}</MaxKeys><IsTruncated>{'true' if more else 'false'}</IsTruncated>{contents}"
                + (f"<NextContinuationToken>{start + size}</NextContinuationToken>" if more else "")
                + "</ListBucketResult>")
        return AWSResponse(request.url, 200, {"Content-Type": "application/xml"}, _Raw(body.encode()))

    @staticmethod
    def _error(request: Any, status: int, code: str, message: str) -> AWSResponse:
        body = f"<Error><Code>{code}</Code><Message>{message}</Message></Error>"
        return AWSResponse(request.url, status, {"Content-Type": "application/xml"}, _Raw(body.encode()))


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds(iso: str) -> float:
    return datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def firehose_objects(events: Sequence[dict], *, config: str = "0123456789ab", buffer_s: int = 300,
                     compress: bool = True, delimiter: bool = True, stream: str = "gpu-share-history",
                     arrivals: Sequence[float] | None = None) -> dict[str, bytes]:
    """key -> body: the events in Firehose's buffers of ``buffer_s`` seconds, by arrival time
    (``arrivals``, one per event; default: each event's own time)."""
    groups: dict[int, list[dict]] = {}
    for n, e in enumerate(events):
        t = arrivals[n] if arrivals is not None else _seconds(e["time"])
        groups.setdefault(int(t) // buffer_s, []).append(e)
    out: dict[str, bytes] = {}
    for n, (slot, batch) in enumerate(sorted(groups.items())):
        when = datetime.fromtimestamp(slot * buffer_s, timezone.utc)
        key = (f"events/{when:%Y/%m/%d}/config={config}/{stream}-1-{when:%Y-%m-%d-%H-%M-%S}-{n:08d}"
               + (".gz" if compress else ""))
        text = "".join(json.dumps(e, separators=(",", ":")) + ("\n" if delimiter else "") for e in batch)
        out[key] = gzip.compress(text.encode()) if compress else text.encode()
    return out


class FairshareCluster:
    """A fair-share queue run over a trace: every Batch event of its jobs (module docstring)."""

    QUEUE = f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/gpu-share-fairshare"
    #: The last cluster run (tests read its jobs back through other sources).
    last: FairshareCluster | None = None

    def __init__(self, origin: float, *, startup_s: float = 0.0) -> None:
        self.origin = origin
        self.startup_s = startup_s
        self.events: list[dict] = []
        #: job id -> its last state (what DescribeJobs answers once the run is over)
        self.jobs: dict[str, dict] = {}
        self._n = 0

    def run(self, scenario: Any, jobs: Sequence[Any], *, poll_seconds: float = 60.0) -> Any:
        """Run the trace (share+reclaim) and record the events; returns the engine's result."""
        from cdk_gpu_share.core import simulate as sim

        log: list[tuple[float, str, int]] = []

        class Logged(sim._Sim):
            def _start(self, r: Any, t: float) -> None:
                log.append((t, "start", r.job.position))
                super()._start(r, t)

            def _stop(self, r: Any, t: float) -> None:
                log.append((t, "stop", r.job.position))
                super()._stop(r, t)

            def _complete(self, r: Any, t: float) -> None:
                log.append((t, "end", r.job.position))
                super()._complete(r, t)

        # The cluster's jobs hold their GPUs for the start-up too.
        held = [sim.Job(**{**j.__dict__, "duration_s": j.duration_s + self.startup_s}) for j in jobs]
        FairshareCluster.last = self
        engine = Logged(scenario, held, sim.RECLAIM, poll_seconds, None, None)
        engine.run()
        self._events(jobs, log)
        return engine.result(held, 0.0)

    def _event(self, t: float, job: dict) -> None:
        self._n += 1
        self.events.append({"version": "0", "id": f"ev-{self._n:08d}", "detail-type": "Batch Job State Change",
                            "source": "aws.batch", "account": ACCOUNT, "time": _iso(t), "region": REGION,
                            "resources": [job["jobArn"]], "detail": json.loads(json.dumps(job))})

    def _new_job(self, job: Any, jid: str, created: float, requeued_from: str | None) -> dict:
        tags = {"gpu-share:queue": "gpu-share-fairshare", "gpu-share:team": job.team}
        if requeued_from:
            tags["gpu-share:requeued-from"] = requeued_from
        share = "".join(c for c in job.team if c.isalnum())
        detail = {"jobArn": f"arn:aws:batch:{REGION}:{ACCOUNT}:job/{jid}", "jobId": jid, "jobName": f"train-{job.id}",
                  "jobQueue": self.QUEUE, "status": "RUNNABLE", "shareIdentifier": share,
                  "schedulingPriority": job.priority, "createdAt": int(round(created * 1000)),
                  "jobDefinition": f"arn:aws:batch:{REGION}:{ACCOUNT}:job-definition/gpu-share-{share}:1",
                  "container": {"resourceRequirements": [{"type": "GPU", "value": f"{job.gpus:g}"}]},
                  "attempts": [], "tags": tags}
        self.jobs[jid] = detail
        return detail

    def _events(self, jobs: Sequence[Any], log: Iterable[tuple[float, str, int]]) -> None:
        current: dict[int, dict] = {}
        for pos, job in enumerate(jobs):
            b = current[pos] = self._new_job(job, job.id, self.origin + job.submit_time, None)
            self._event(self.origin + job.submit_time, b)  # RUNNABLE (no event for SUBMITTED)
        requeues: dict[int, int] = {}
        placed: dict[int, float] = {}
        for t, kind, pos in sorted(log, key=lambda e: (e[0], {"end": 0, "stop": 1, "start": 2}[e[1]])):
            job, b = jobs[pos], current[pos]
            at = self.origin + t
            if kind == "start":
                # Placed now; its container runs (RUNNING, startedAt) once the start-up is over.
                b["status"] = "STARTING"
                placed[pos] = at
                self._event(at, b)
            else:
                running_at = placed.pop(pos) + self.startup_s
                if at >= running_at:
                    b["status"], b["startedAt"] = "RUNNING", int(round(running_at * 1000))
                    self._event(running_at, b)
                b["stoppedAt"] = int(round(at * 1000))
                stopped = kind == "stop"
                b["status"] = "FAILED" if stopped else "SUCCEEDED"
                b["statusReason"] = "GpuShare reclaim: lent capacity taken back" if stopped else "Essential container in task exited"
                # A run stopped during its start-up never ran: its attempt has no start.
                b["attempts"] = [{"startedAt": b["startedAt"], "stoppedAt": b["stoppedAt"],
                                  "statusReason": b["statusReason"]}] if "startedAt" in b else []
                self._event(at, b)
                if stopped:
                    requeues[pos] = requeues.get(pos, 0) + 1
                    nb = current[pos] = self._new_job(job, f"{job.id}-r{requeues[pos]}", at, b["jobId"])
                    self._event(at, nb)


class ServiceJobCluster(FairshareCluster):
    """The cluster's decisions told as service jobs of a quota-management queue (module docstring)."""

    QUEUE = f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/gpu-share-training"
    INSTANCE_TYPE = "ml.g5.xlarge"  # one GPU: a job of n GPUs asks for n instances

    def _record(self, t: float, kind: str, detail: dict) -> None:
        self._n += 1
        arn = f"arn:aws:batch:{REGION}:{ACCOUNT}:service-job/{detail.get('jobId') or detail['preemptedJobArn']}"
        self.events.append({"version": "0", "id": f"ev-{self._n:08d}", "detail-type": kind, "source": "aws.batch",
                            "account": ACCOUNT, "time": _iso(t), "region": REGION, "resources": [arn],
                            "detail": json.loads(json.dumps(detail))})

    def _events(self, jobs: Sequence[Any], log: Iterable[tuple[float, str, int]]) -> None:
        from cdk_gpu_share.core.records import history

        state: dict[int, dict] = {}
        preempted: dict[int, list[dict]] = {}
        for pos, job in enumerate(jobs):
            at = self.origin + job.submit_time
            share = "".join(c for c in job.team if c.isalnum())
            b = state[pos] = {
                "jobArn": f"arn:aws:batch:{REGION}:{ACCOUNT}:service-job/{job.id}", "jobId": job.id,
                "jobName": f"train-{job.id}", "jobQueue": self.QUEUE, "status": "RUNNABLE",
                "serviceJobType": "SAGEMAKER_TRAINING", "shareIdentifier": share,
                "schedulingPriority": job.priority, "createdAt": int(round(at * 1000))}
            self.jobs[job.id] = b
            self._record(at, history.SERVICE_JOB_TYPE, b)
            self.events.append(history.details_record(
                job_id=job.id, queue=self.QUEUE, team=job.team, instances={self.INSTANCE_TYPE: int(job.gpus)},
                created_ms=b["createdAt"], priority=job.priority, time=_iso(at), account=ACCOUNT, region=REGION))
        for t, kind, pos in sorted(log, key=lambda e: (e[0], {"end": 0, "stop": 1, "start": 2}[e[1]])):
            b, at = state[pos], self.origin + t
            if kind == "start":
                b["status"], b["startedAt"] = "RUNNING", int(round(at * 1000))
                b.pop("stoppedAt", None)
                self._record(at, history.SERVICE_JOB_TYPE, b)
            elif kind == "stop":
                arn = b["jobArn"]
                self._record(at, history.PREEMPTION_TYPES[0], {
                    "preemptedJobArn": arn, "status": "RUNNING",
                    "statusReason": "PREEMPTION_IN_PROGRESS: Cross-share preemption triggered"})
                preempted.setdefault(pos, []).append({"startedAt": b["startedAt"], "stoppedAt": int(round(at * 1000)),
                                                      "statusReason": "Preempted"})
                summary = {"preemptedAttemptCount": len(preempted[pos]), "recentPreemptedAttempts": preempted[pos]}
                b["status"], b["preemptionSummary"] = "RUNNABLE", summary
                b.pop("startedAt")
                self._record(at, history.SERVICE_JOB_TYPE, b)
                self._record(at, history.PREEMPTION_TYPES[1], {"preemptedJobArn": arn, "preemptionSummary": summary})
            else:
                b["status"], b["stoppedAt"] = "SUCCEEDED", int(round(at * 1000))
                b["attempts"] = [{"startedAt": b["startedAt"], "stoppedAt": b["stoppedAt"], "statusReason": "Completed"}]
                self._record(at, history.SERVICE_JOB_TYPE, b)


def redelivered(events: Sequence[dict], *, again_every: int = 5, late_every: int = 11, late_s: float = 86_400.0
                ) -> tuple[list[dict], list[float]]:
    """(events, arrival times): every ``again_every``-th event delivered twice, the copy under a new
    ``id`` ten minutes later; every ``late_every``-th event arriving ``late_s`` after its time."""
    out: list[dict] = []
    arrivals: list[float] = []
    for n, e in enumerate(events):
        t = _seconds(e["time"])
        out.append(e)
        arrivals.append(t + (late_s if n % late_every == late_every - 1 else 0.0))
        if n % again_every == again_every - 1:
            out.append({**e, "id": f"again-{e['id']}"})
            arrivals.append(t + 600.0)
    return out, arrivals


class SageMakerModel:
    """SageMaker's training jobs: ``ListTrainingJobs`` (creation-time filters, paged by ``MaxResults``
    and ``NextToken``, newest first), ``DescribeTrainingJob`` and ``ListTags``."""

    def __init__(self, page_size: int = 100) -> None:
        self.jobs: dict[str, dict] = {}
        self.tags: dict[str, list[dict]] = {}
        self.page_size = page_size
        self.requests: list[tuple[str, dict]] = []
        self.client = new_client("sagemaker")
        self.client.meta.events.register("before-send.sagemaker", self._on_send)

    def add(self, name: str, *, created: float, started: float | None, ended: float | None, instance_type: str,
            count: int = 1, status: str = "Completed", team: str | None = None) -> None:
        arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{name}"
        job = {"TrainingJobName": name, "TrainingJobArn": arn, "TrainingJobStatus": status, "CreationTime": created,
               "ResourceConfig": {"InstanceType": instance_type, "InstanceCount": count, "VolumeSizeInGB": 50},
               "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "image"},
               "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/training", "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
               "SecondaryStatus": "Completed", "OutputDataConfig": {"S3OutputPath": "s3://out/"}}
        if started is not None:
            job["TrainingStartTime"] = started
        if ended is not None:
            job["TrainingEndTime"] = ended
        self.jobs[name] = job
        self.tags[arn] = [{"Key": "gpu-share:team", "Value": team}] if team else []

    def _on_send(self, request: Any, event_name: str, **_: Any) -> AWSResponse:
        op = event_name.split(".")[-1]
        p = json.loads(request.body or b"{}")
        self.requests.append((op, p))
        if op == "ListTrainingJobs":
            after, before = p.get("CreationTimeAfter"), p.get("CreationTimeBefore")
            items = sorted((j for j in self.jobs.values()
                            if (after is None or j["CreationTime"] > after) and (before is None or j["CreationTime"] < before)),
                           key=lambda j: -j["CreationTime"])
            start = int(p.get("NextToken") or 0)
            size = min(int(p.get("MaxResults") or 10), self.page_size)
            body: dict[str, Any] = {"TrainingJobSummaries": [
                {k: j[k] for k in ("TrainingJobName", "TrainingJobArn", "CreationTime", "TrainingJobStatus")}
                for j in items[start:start + size]]}
            if start + size < len(items):
                body["NextToken"] = str(start + size)
            return self._ok(request, body)
        if op == "DescribeTrainingJob":
            job = self.jobs.get(p["TrainingJobName"])
            if job is None:
                return AWSResponse(request.url, 400, {}, _Raw(json.dumps(
                    {"__type": "ValidationException", "message": "Requested resource not found."}).encode()))
            return self._ok(request, job)
        if op == "ListTags":
            return self._ok(request, {"Tags": self.tags.get(p["ResourceArn"], [])})
        return AWSResponse(request.url, 400, {}, _Raw(b'{"__type": "ValidationException", "message": "not modelled"}'))

    @staticmethod
    def _ok(request: Any, body: dict) -> AWSResponse:
        return AWSResponse(request.url, 200, {"Content-Type": "application/x-amz-json-1.1"}, _Raw(json.dumps(body).encode()))
