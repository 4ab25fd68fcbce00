#!/usr/bin/env python3
"""What hostile archive objects cost an export now that the reader bounds them.

    .venv/bin/python benchmarks/hostile_archive.py

Each case is one object (or one listing) put into an in-memory S3 behind a real boto3 client
(tests/history_model.py) and read by the archive reader as ``trace export`` reads it: a gzip
bomb (a small gzip that decompresses to far more than an object may hold), 425 bytes of gzip of
nested ``[``, an object of 500,000 short bad lines, an object of 200,000 empty gzip members (and
one of more members than an object may hold), and a listing that returns empty truncated pages
for ever. Prints, per case, what was skipped and why, the requests made, the CPU seconds and
the growth of the process's peak memory. Figures in docs/performance.md.
"""

from __future__ import annotations

import gzip
import resource
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

BUCKET = "archive"
KEY = "events/2026/11/02/config=0123456789ab/object.gz"


def bomb(size: int) -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b"\0" * (1 << 20)
    return b"".join(z.compress(chunk) for _ in range(size >> 20)) + z.flush()


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(label: str, s3, note: str) -> None:
    from cdk_gpu_share.aws import history_reader

    stats = history_reader.ArchiveRead()
    before, cpu = peak_mib(), time.process_time()
    try:
        records = sum(1 for _ in history_reader.read_archive(s3.client, BUCKET, "events/", "2026-11-01", "2026-12-31",
                                                             stats=stats))
        outcome = f"{records} records; skipped: " + (", ".join(f"{n} {why}" for why, n in stats.skipped.items()) or "none")
    except ValueError as exc:
        outcome = f"refused: {exc}"
    print(f"{label} ({note}): {outcome}; {stats.requests} requests; {time.process_time() - cpu:.2f} s CPU;"
          f" peak memory +{peak_mib() - before:.0f} MiB")


def main() -> int:
    from tests.history_model import AWSResponse, S3Model, _Raw

    from cdk_gpu_share.aws import history_reader

    big = bomb(history_reader.MAX_OBJECT_BYTES * 2)
    s3 = S3Model()
    s3.buckets[BUCKET] = {KEY: big}
    measure("gzip bomb", s3, f"{len(big) // 1024} KiB, {2 * history_reader.MAX_OBJECT_BYTES >> 20} MiB decompressed")
    nested = gzip.compress(b"[" * 1_000_000)
    s3.buckets[BUCKET] = {KEY: nested}
    measure("nested brackets", s3, f"{len(nested)} bytes of gzip")
    lines = gzip.compress(b"x\n" * 600_000)
    s3.buckets[BUCKET] = {KEY: lines}
    measure("short bad lines", s3, f"600,000 lines, {len(lines) // 1024} KiB of gzip")
    for members in (200_000, history_reader.MAX_MEMBERS + 1):
        s3.buckets[BUCKET] = {KEY: gzip.compress(b"") * members}
        measure("empty gzip members", s3, f"{members:,} of them, {20 * members / 1e6:.0f} MB")

    def endless(request, bucket, query):
        body = ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                f"<Name>{bucket}</Name><KeyCount>0</KeyCount><IsTruncated>true</IsTruncated>"
                "<NextContinuationToken>again</NextContinuationToken></ListBucketResult>")
        return AWSResponse(request.url, 200, {"Content-Type": "application/xml"}, _Raw(body.encode()))

    s3._list = endless  # type: ignore[method-assign]
    measure("endless listing", s3, "empty truncated pages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
