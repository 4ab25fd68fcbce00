"""The job archive's details step: what a service job's state-change events leave out.

AWS Batch's ``Batch Service Job State Change`` events carry neither the job's tags nor its
``serviceRequestPayload``, so the archive could not tell a service job's team or its GPUs.
This function runs on those events of the platform's quota-management queue while the job
waits or starts (``RUNNABLE``, ``RUNNING``: the rule filters), reads the job once with
``DescribeServiceJob`` and writes one record into the archive's delivery stream
(:func:`cdk_gpu_share.core.records.history.details_record`): its team (the ``gpu-share:team`` tag, else
its quota share), its instances per type from the SageMaker request, its ``createdAt`` and
priority. The record's id is the job's, so the same job described twice (a preempted job waits
again; EventBridge may deliver twice) counts once in an export.

If the describe or the write fails, the invocation raises: Lambda retries an asynchronous
invocation twice (about one and two minutes later), then drops it. A job whose every attempt
failed has no details record; ``gpu-share trace export`` reports it as ``no details record``
and leaves it out (its events are still in the archive).

Environment: ``GPU_SHARE_HISTORY_STREAM`` (the delivery stream's name).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from cdk_gpu_share.core.records import history

STREAM_ENV = "GPU_SHARE_HISTORY_STREAM"

_clients: dict[str, Any] = {}


def _client(service: str) -> Any:
    if service not in _clients:
        import boto3
        from botocore.config import Config

        _clients[service] = boto3.client(service, config=Config(retries={"mode": "standard", "max_attempts": 5}))
    return _clients[service]


def record_of(job: Mapping[str, Any], event: Mapping[str, Any]) -> dict[str, Any]:
    """The details record of a ``DescribeServiceJob`` answer (:func:`cdk_gpu_share.core.records.history.service_job_details`)."""
    return history.service_job_details(job, time=str(event.get("time") or ""), account=str(event.get("account") or ""),
                                       region=str(event.get("region") or ""))


def handler(event: Mapping[str, Any], context: Any = None, *, batch: Any = None, firehose: Any = None) -> dict:
    detail = event.get("detail") if isinstance(event.get("detail"), Mapping) else {}
    job_id = detail.get("jobId") if isinstance(detail, Mapping) else None
    if not isinstance(job_id, str) or not job_id:
        print(json.dumps({"level": "WARNING", "event": "skipped", "reason": "no jobId"}))
        return {"written": False}
    batch = batch or _client("batch")
    firehose = firehose or _client("firehose")
    job = batch.describe_service_job(jobId=job_id)
    record = record_of(job, event)
    firehose.put_record(DeliveryStreamName=os.environ[STREAM_ENV],
                        Record={"Data": json.dumps(record, separators=(",", ":")).encode()})
    print(json.dumps({"level": "INFO", "event": "details", "job": job_id, "team": record["detail"].get("team")}))
    return {"written": True, "team": record["detail"].get("team")}
