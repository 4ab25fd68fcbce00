"""Read the jobs back for ``gpu-share trace export``: the job archive from S3 (``ListObjectsV2``, paged;
``GetObject``), or what AWS Batch or SageMaker still list (:func:`read_batch`, :func:`read_sagemaker`).

Every object under the archive's prefix is considered (the key layout: docs/history.md, "Object
keys"): an object whose key has a ``YYYY/MM/DD`` part outside the days asked for is skipped
unread, any other is read, gzip or not. The records go to :func:`cdk_gpu_share.core.records.history.reconstruct` with the
config hash their key names. The caller passes a boto3 ``s3`` client.

The archive is untrusted input: each object, and the whole read, is bounded (the ``MAX_``
constants below; docs/history.md, "Broken or hostile objects"), and what a bound cuts is
skipped and counted by reason in :class:`ArchiveRead`, never raised.
"""

from __future__ import annotations

import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from cdk_gpu_share.core.records import history

__all__ = ["MAX_JOBS", "MAX_LIST_PAGES", "MAX_MEMBERS", "MAX_OBJECT_BYTES", "MAX_OBJECT_SECONDS", "MAX_OBJECTS",
           "MAX_READ_BYTES", "MAX_READ_OBJECTS", "ArchiveRead", "read_archive", "read_batch", "read_sagemaker"]

#: Objects a listing may hold (a year of a busy platform is about 100,000); more is refused.
MAX_OBJECTS = 1_000_000
#: Listing requests an export makes at most: ``ListObjectsV2`` returns up to 1,000 keys a page,
#: so :data:`MAX_OBJECTS` takes 1,000 full pages; a listing that pages on past this (empty
#: truncated pages, say) is refused.
MAX_LIST_PAGES = 2_000
#: Bytes an object may hold, compressed or decompressed: twice the platform's 64 MiB buffer, and
#: Firehose's largest buffer. A larger object is skipped whole (a gzip bomb stops here).
MAX_OBJECT_BYTES = 128 * 1024 * 1024
#: gzip members an object may hold: at most one a record, and an object is read for at most
#: :data:`cdk_gpu_share.core.records.history.MAX_LINES` records. An object of more is skipped whole.
MAX_MEMBERS = 500_000
#: Seconds the decompression of one object may take: 128 MiB decompress in well under a second
#: on an idle machine, so only a hostile object, or a machine far too busy, reaches it.
MAX_OBJECT_SECONDS = 30.0
#: Objects one read decompresses and parses at most: about two years of the archive's objects at
#: Firehose's five-minute buffer. The objects past it are skipped, and counted.
MAX_READ_OBJECTS = 200_000
#: Bytes one read decompresses and parses at most (the larger of each object's stored and
#: decompressed size, added up): past it an export would take many minutes and as much memory.
#: The object that would cross it, and every one after, is skipped and counted.
MAX_READ_BYTES = 8 * 1024 * 1024 * 1024

#: The input handed to zlib at a time: the first step of a member, and the most. zlib copies the
#: input it did not use (past a member's end, or past the output allowed) into ``unused_data``
#: or ``unconsumed_tail``, so the input given at a time is bounded and grows with the member:
#: the bytes handed to zlib (and so copied) stay within a few times the object's size.
_FIRST_STEP = 64
_MAX_STEP = 1 << 20
#: The output asked of zlib at a time: the peak memory stays near the bytes kept, not twice them.
_OUTPUT_STEP = 16 << 20

#: The clock of :data:`MAX_OBJECT_SECONDS` (tests replace it).
_clock: Callable[[], float] = time.monotonic


@dataclass
class ArchiveRead:
    """What a read of the archive saw."""

    listed: int = 0
    read: int = 0
    records: int = 0
    #: why -> objects or lines skipped (``lines not JSON``, ``objects larger than 128 MiB``, ...).
    skipped: Counter[str] = field(default_factory=Counter)
    #: why -> the key of the first object where it happened.
    first_skipped: dict[str, str] = field(default_factory=dict)
    requests: int = 0
    #: Bytes read so far, as :data:`MAX_READ_BYTES` counts them (skipped objects' too).
    bytes: int = 0
    #: The decompression's work: bytes handed to zlib, bytes it gave back, gzip members.
    inflated_input: int = 0
    inflated_output: int = 0
    members: int = 0

    def skip(self, why: str, key: str, count: int = 1) -> None:
        self.skipped[why] += count
        self.first_skipped.setdefault(why, key)


class _Cut(Exception):
    """An object a bound stops: ``why`` is the reason it is counted under."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _too_large() -> str:
    return f"objects larger than {_size(MAX_OBJECT_BYTES)}"


def _too_many_members() -> str:
    return f"objects of more than {MAX_MEMBERS:,} gzip members"


def _too_slow() -> str:
    return f"objects not decompressed within {MAX_OBJECT_SECONDS:g} s"


def _past_objects() -> str:
    return f"objects past the read's bound of {MAX_READ_OBJECTS:,} objects"


def _past_bytes() -> str:
    return f"objects past the read's bound of {_size(MAX_READ_BYTES)}"


def _size(n: int) -> str:
    """``8 GiB``, ``128 MiB``, ``1,500 bytes``: a bound as the summary names it."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= scale and n % scale == 0:
            return f"{n // scale:,} {unit}"
    return f"{n:,} bytes"


def _inflate(body: bytes, limit: int | None = None, stats: ArchiveRead | None = None) -> bytes:
    """The decompressed bytes of a gzip body of one member or several, in time linear in the
    body: each member is fed from its own offset in growing steps (no copy of the rest of the
    body per member). Raises :class:`_Cut` past ``limit`` bytes (default :data:`MAX_OBJECT_BYTES`:
    the reason says the object is too large), past :data:`MAX_MEMBERS` members or after
    :data:`MAX_OBJECT_SECONDS`; ``zlib.error``/``EOFError`` when the body is broken. The work
    done is added to ``stats``."""
    limit = MAX_OBJECT_BYTES if limit is None else limit
    deadline = _clock() + MAX_OBJECT_SECONDS
    view, pos, out = memoryview(body), 0, bytearray()
    members = fed = 0
    try:
        while pos < len(body):
            members += 1
            if members > MAX_MEMBERS:
                raise _Cut(_too_many_members())
            d, step = zlib.decompressobj(16 + zlib.MAX_WBITS), _FIRST_STEP
            while not d.eof:
                if _clock() > deadline:
                    raise _Cut(_too_slow())
                chunk = view[pos:pos + step]
                piece = d.decompress(chunk, min(_OUTPUT_STEP, limit + 1 - len(out)))
                fed += len(chunk)
                out += piece
                if len(out) > limit:
                    raise _Cut(_too_large())
                if not chunk and not piece and not d.eof:
                    raise EOFError("the compressed stream ends early")
                # What zlib did not use of this chunk stays in the body, where the next call reads it.
                pos += len(chunk) - len(d.unconsumed_tail) - len(d.unused_data)
                step = min(step * 2, _MAX_STEP)
    finally:
        if stats is not None:
            stats.inflated_input += fed
            stats.inflated_output += len(out)
            stats.members += members
    return bytes(out)


def _object_data(key: str, body: bytes, stats: ArchiveRead, limit: int) -> bytes | None:
    """The bytes of one object, decompressed when it is gzip, or None when it cannot be read (the
    reason counted in ``stats``). ``limit`` is :data:`MAX_OBJECT_BYTES`, or less when the read has
    less left of :data:`MAX_READ_BYTES`: an object past that is the read's cut, raised as
    :class:`_Cut` for the caller to count with the objects after it."""
    own = limit >= MAX_OBJECT_BYTES  # past the limit: the object is too large, not the read too long
    data: bytes | None = body
    before = stats.inflated_output
    try:
        if len(body) > limit:
            raise _Cut(_too_large())
        if body[:2] == b"\x1f\x8b":  # gzip (Firehose's GZIP compression), possibly several members
            data = _inflate(body, limit, stats)
    except (zlib.error, EOFError):
        stats.skip("objects whose compression is broken", key)
        return None
    except _Cut as cut:
        if cut.why == _too_large() and not own:
            raise _Cut(_past_bytes()) from None
        stats.skip(cut.why, key)
        return None
    finally:  # the work done counts, whether the object is read or skipped
        stats.bytes += max(len(body), stats.inflated_output - before)
    return data


def read_archive(client: Any, bucket: str, prefix: str, first_day: str, last_day: str, *,
                 progress: Callable[[int, int], None] | None = None,
                 stats: ArchiveRead | None = None) -> Iterator[tuple[str | None, Any]]:
    """(config hash of the object's key, record) of every record under ``bucket``/``prefix`` in
    objects of the days ``first_day`` to ``last_day`` (``YYYY-MM-DD``, UTC; keys without a day are
    read too). ``progress(done, total)`` is called after each object. A listing past
    :data:`MAX_LIST_PAGES` pages or :data:`MAX_OBJECTS` objects is a ``ValueError``; a bad object
    or line is skipped and counted in ``stats``."""
    stats = stats if stats is not None else ArchiveRead()
    keys: list[str] = []
    token = None
    for _ in range(MAX_LIST_PAGES):
        params: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        if token:
            params["ContinuationToken"] = token
        page = client.list_objects_v2(**params)
        stats.requests += 1
        for obj in page.get("Contents", []):
            key = obj.get("Key", "")
            stats.listed += 1
            day = history.day_of_key(key)
            if day is None or first_day <= day <= last_day:
                keys.append(key)
        if stats.listed > MAX_OBJECTS:
            raise ValueError(f"more than {MAX_OBJECTS:,} objects under s3://{bucket}/{prefix}")
        token = page.get("NextContinuationToken") if page.get("IsTruncated") else None
        if not token:
            break
    else:
        raise ValueError(f"the listing of s3://{bucket}/{prefix} did not end after {MAX_LIST_PAGES:,} requests "
                         f"({stats.listed:,} objects listed); S3 lists 1,000 keys a request, so this is not a"
                         " listing S3 would give: check --bucket, --prefix and the endpoint")
    for n, key in enumerate(keys, start=1):
        left = MAX_READ_BYTES - stats.bytes
        if stats.read >= MAX_READ_OBJECTS or left <= 0:
            stats.skip(_past_objects() if left > 0 else _past_bytes(), key, len(keys) - n + 1)
            break
        stats.requests += 1
        try:
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read(MAX_OBJECT_BYTES + 1)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "NoSuchKey":
                raise
            # Expired (the archive's lifecycle) or deleted between the listing and the read.
            stats.skip("objects gone before they were read", key)
            continue
        try:
            data = _object_data(key, body, stats, min(MAX_OBJECT_BYTES, left))
        except _Cut as cut:  # the read's bytes are spent: this object and every one after are skipped
            stats.skip(cut.why, key, len(keys) - n + 1)
            break
        stats.read += 1
        config = history.config_of_key(key)
        for record, why in history.parse_lines(data or b""):
            if why is not None:
                stats.skip(why, key)
            else:
                stats.records += 1
                yield config, record
        if progress is not None:
            progress(n, len(keys))


# ---------------------------------------------------------------------------
# What AWS Batch and SageMaker still keep (--source batch | sagemaker)

#: Jobs a listing reads at most.
MAX_JOBS = 1_000_000
#: DescribeJobs takes at most 100 job ids a request.
DESCRIBE_BATCH = 100


def _listed(pages: Callable[[str | None], dict[str, Any]], key: str, end_ms: int, stats: ArchiveRead) -> list[str]:
    """The ids of the jobs of a created-at-filtered listing created before ``end_ms``, every page."""
    ids: list[str] = []
    token: str | None = None
    while True:
        page = pages(token)
        stats.requests += 1
        for summary in page.get(key, []):
            stats.listed += 1
            created = summary.get("createdAt")
            if summary.get("jobId") and (not isinstance(created, int) or created < end_ms):
                ids.append(summary["jobId"])
        if stats.listed > MAX_JOBS:
            raise ValueError(f"more than {MAX_JOBS} jobs listed")
        token = page.get("nextToken")
        if not token:
            return ids


def _pager(call: Callable[..., dict[str, Any]], queue: str, filters: list[dict[str, Any]],
           size: int) -> Callable[[str | None], dict[str, Any]]:
    """One page of a Batch listing of ``queue``, after ``token``."""
    def page(token: str | None) -> dict[str, Any]:
        return call(jobQueue=queue, filters=filters, maxResults=size, **({"nextToken": token} if token else {}))

    return page


def read_batch(client: Any, job_queues: list[str], service_queues: list[str], start_ms: int, end_ms: int, *,
               progress: Callable[[int, int], None] | None = None,
               stats: ArchiveRead | None = None) -> Iterator[tuple[str | None, Any]]:
    """The jobs AWS Batch still lists, created from ``start_ms`` to ``end_ms``, as the archive's
    records: ``ListJobs`` / ``ListServiceJobs`` with the ``AFTER_CREATED_AT`` filter (one filter a
    call; newest first), paged, then ``DescribeJobs`` (100 a call) / ``DescribeServiceJob``."""
    stats = stats if stats is not None else ArchiveRead()
    after = [{"name": "AFTER_CREATED_AT", "values": [str(start_ms - 1)]}]
    for queue in job_queues:
        ids = _listed(_pager(client.list_jobs, queue, after, 1000), "jobSummaryList", end_ms, stats)
        for k in range(0, len(ids), DESCRIBE_BATCH):
            answer = client.describe_jobs(jobs=ids[k:k + DESCRIBE_BATCH])
            stats.requests += 1
            for job in answer.get("jobs", []):
                stats.read += 1
                yield None, history.event_of(job, history.JOB_TYPE)
            if progress is not None:
                progress(min(k + DESCRIBE_BATCH, len(ids)), len(ids))
    for queue in service_queues:
        ids = _listed(_pager(client.list_service_jobs, queue, after, 100), "jobSummaryList", end_ms, stats)
        for n, jid in enumerate(ids, start=1):
            job = client.describe_service_job(jobId=jid)
            stats.requests += 1
            stats.read += 1
            yield None, history.service_job_details(job)
            yield None, history.event_of(job, history.SERVICE_JOB_TYPE)
            if progress is not None:
                progress(n, len(ids))


_SAGEMAKER_STATUS = {"Completed": "SUCCEEDED", "Failed": "FAILED", "Stopped": "FAILED"}


def _ms_of(value: Any) -> int | None:
    return int(value.timestamp() * 1000) if hasattr(value, "timestamp") else None


def read_sagemaker(client: Any, start_ms: int, end_ms: int, *, progress: Callable[[int, int], None] | None = None,
                   stats: ArchiveRead | None = None) -> Iterator[tuple[str | None, Any]]:
    """SageMaker's training jobs created from ``start_ms`` to ``end_ms`` (``ListTrainingJobs`` with
    its creation-time filters, paged; ``DescribeTrainingJob``; the team from ``ListTags``'s
    ``gpu-share:team``), as the archive's records. Their ``CreationTime`` stands in for the
    submission: for a job started from a quota share it is when Batch dispatched it."""
    from datetime import datetime, timezone

    stats = stats if stats is not None else ArchiveRead()
    names: list[str] = []
    token = None
    while True:
        page = client.list_training_jobs(
            CreationTimeAfter=datetime.fromtimestamp(start_ms / 1000, timezone.utc),
            CreationTimeBefore=datetime.fromtimestamp(end_ms / 1000, timezone.utc),
            MaxResults=100, **({"NextToken": token} if token else {}))
        stats.requests += 1
        for summary in page.get("TrainingJobSummaries", []):
            stats.listed += 1
            names.append(summary["TrainingJobName"])
        if stats.listed > MAX_JOBS:
            raise ValueError(f"more than {MAX_JOBS} training jobs listed")
        token = page.get("NextToken")
        if not token:
            break
    for n, name in enumerate(names, start=1):
        job = client.describe_training_job(TrainingJobName=name)
        tags = client.list_tags(ResourceArn=job["TrainingJobArn"]).get("Tags", [])
        stats.requests += 2
        stats.read += 1
        team = next((t.get("Value") for t in tags if t.get("Key") == history.TAG_TEAM), None)
        created = _ms_of(job.get("CreationTime"))
        status = _SAGEMAKER_STATUS.get(str(job.get("TrainingJobStatus")), "RUNNING")
        detail: dict[str, Any] = {"jobId": name, "jobQueue": "", "status": status, "createdAt": created}
        for key, field_name in (("startedAt", "TrainingStartTime"), ("stoppedAt", "TrainingEndTime")):
            if _ms_of(job.get(field_name)) is not None:
                detail[key] = _ms_of(job.get(field_name))
        yield None, history.details_record(
            job_id=name, queue="", team=team, created_ms=created, priority=None,
            instances=history.request_instances({"ResourceConfig": job.get("ResourceConfig") or {}}),
            time=history.event_of(detail, history.SERVICE_JOB_TYPE)["time"])
        yield None, history.event_of(detail, history.SERVICE_JOB_TYPE)
        if progress is not None:
            progress(n, len(names))
