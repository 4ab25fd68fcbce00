"""Read the job archive back from S3 (``ListObjectsV2``, paged; ``GetObject``), for ``gpu-share trace export``.

Every object under the archive's prefix is considered, whatever its partition: an object whose
key has a ``YYYY/MM/DD`` partition outside the days asked for is skipped unread, any other is
read, gzip or not. The records go to :func:`cdk_gpu_share.core.history.reconstruct` with the
config hash their key names. The caller passes a boto3 ``s3`` client.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cdk_gpu_share.core import history

__all__ = ["MAX_OBJECT_BYTES", "MAX_OBJECTS", "ArchiveRead", "read_archive"]

#: Objects an export reads at most (a year of a busy platform is about 100,000).
MAX_OBJECTS = 1_000_000
#: Bytes an object may hold once decompressed (Firehose writes objects of at most 128 MiB).
MAX_OBJECT_BYTES = 256 * 1024 * 1024


@dataclass
class ArchiveRead:
    """What a read of the archive saw."""

    listed: int = 0
    read: int = 0
    records: int = 0
    #: Keys of objects whose text is not JSON records (reported, not read further).
    unreadable: list[str] = field(default_factory=list)
    requests: int = 0


def _text(body: bytes) -> str:
    if body[:2] == b"\x1f\x8b":  # gzip (Firehose's GZIP compression), possibly several members
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out = []
        size = 0
        data = body
        while data:
            chunk = d.decompress(data, MAX_OBJECT_BYTES + 1 - size)
            out.append(chunk)
            size += len(chunk)
            if size > MAX_OBJECT_BYTES:
                raise ValueError("larger than the archive's objects are")
            data = d.unconsumed_tail or d.unused_data
            if d.eof and d.unused_data:
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            elif d.eof:
                break
        body = b"".join(out)
    return body.decode("utf-8")


def read_archive(client: Any, bucket: str, prefix: str, first_day: str, last_day: str, *,
                 progress: Callable[[int, int], None] | None = None,
                 stats: ArchiveRead | None = None) -> Iterator[tuple[str | None, Any]]:
    """(config hash of the object's key, record) of every record under ``bucket``/``prefix`` in
    objects of the days ``first_day`` to ``last_day`` (``YYYY-MM-DD``, UTC; keys without a day are
    read too). ``progress(done, total)`` is called after each object."""
    stats = stats if stats is not None else ArchiveRead()
    keys: list[str] = []
    token = None
    while True:
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
            raise ValueError(f"more than {MAX_OBJECTS} objects under s3://{bucket}/{prefix}")
        token = page.get("NextContinuationToken") if page.get("IsTruncated") else None
        if not token:
            break
    for n, key in enumerate(keys, start=1):
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read(MAX_OBJECT_BYTES + 1)
        stats.requests += 1
        stats.read += 1
        config = history.config_of_key(key)
        try:
            if len(body) > MAX_OBJECT_BYTES:
                raise ValueError("too large")
            records = list(history.parse_records(_text(body)))
        except (ValueError, UnicodeDecodeError, zlib.error, gzip.BadGzipFile, EOFError):
            stats.unreadable.append(key)
            records = []
        for record in records:
            stats.records += 1
            yield config, record
        if progress is not None:
            progress(n, len(keys))
