"""The ``history`` section of the platform config: the job archive the platform keeps.

    history:
      enabled: true                 # default: on wherever the platform has a Batch queue
      retention_days: 400           # objects expire after this many days (default 400)
      readers:                      # the only principals that may read the archive
        - arn:aws:iam::111122223333:role/platform-analyst

The archive (docs/history.md) is built when the config has a Batch queue (``batch_quota`` or
``fairshare``) and ``enabled`` is not false: without the section, with the defaults. Nobody but
the roles named in ``readers`` may read it, and only the archive's delivery stream writes it.

Registered in :data:`cdk_gpu_share.core.configuration.parse.EXTRA_SECTIONS`; problems are recorded with
the config's ``add_problem(field, value, message, fix)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cdk_gpu_share.core import validation as V

__all__ = ["DEFAULT_RETENTION_DAYS", "HistoryConfig", "archive_of", "history_mapping", "parse_history"]

#: The default retention: a year and a season, so last year's same month is still there.
DEFAULT_RETENTION_DAYS = 400
#: Ten years: beyond that, S3 Glacier and a lifecycle transition are the better place.
MAX_RETENTION_DAYS = 3650
MAX_READERS = 20
#: An IAM role or user ARN (no wildcard: a reader is named, in the bucket policy and the key policy).
READER_ARN_PATTERN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[A-Za-z0-9+=,.@_/-]{1,512}$")
_KEYS = ("enabled", "retention_days", "readers")
_EXAMPLE = "arn:aws:iam::111122223333:role/platform-analyst"
#: The backends whose jobs go through Batch's events (the archive applies to them).
ARCHIVED_BACKENDS = ("batch_quota", "fairshare")

AddProblem = Callable[[str, object, str, str], None]


@dataclass(frozen=True)
class HistoryConfig:
    """The job archive: on or off, how long it keeps objects, who reads it."""

    enabled: bool = True
    retention_days: int = DEFAULT_RETENTION_DAYS
    readers: tuple[str, ...] = ()


def history_mapping(history: HistoryConfig) -> object:
    """``history`` as the config file writes it (:func:`parse_history` reads it back)."""
    if not isinstance(history, HistoryConfig):
        return history
    out: dict[str, Any] = {}
    if history.enabled is not True:
        out["enabled"] = history.enabled
    if history.retention_days != DEFAULT_RETENTION_DAYS:
        out["retention_days"] = history.retention_days
    if history.readers:
        out["readers"] = list(history.readers) if isinstance(history.readers, (tuple, list)) else history.readers
    return out


def parse_history(raw: Any, teams: Sequence[Any], add_problem: AddProblem) -> HistoryConfig | None:
    """Parse ``history``; record every problem with ``add_problem``. None when unusable."""
    count = [0]

    def add(field: str, value: object, message: str, fix: str) -> None:
        count[0] += 1
        add_problem(field, value, message, fix)

    if not isinstance(raw, Mapping):
        add("history", raw, "must be a mapping", f"write history: {{readers: [{_EXAMPLE}]}}")
        return None
    V.unknown_keys(raw, _KEYS, "history", add)  # with the closest field as the fix
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        add("history.enabled", enabled, "must be true or false", "write enabled: false to go without the archive")
    days = raw.get("retention_days", DEFAULT_RETENTION_DAYS)
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_RETENTION_DAYS:
        add("history.retention_days", days, f"must be a whole number of days from 1 to {MAX_RETENTION_DAYS}",
            f"write retention_days: {DEFAULT_RETENTION_DAYS} (the default keeps a year and a season)")
    items = raw.get("readers", [])
    if isinstance(items, str):
        items = [items]  # one reader written without a list
    readers: list[str] = []
    if not isinstance(items, list):
        add("history.readers", items, "must be a list of IAM role or user ARNs", f"write readers: [{_EXAMPLE}]")
        items = []
    if len(items) > MAX_READERS:
        add("history.readers", f"{len(items)} ARNs", f"lists more than {MAX_READERS} readers",
            "give the archive to one analysis role that people assume")
    for i, arn in enumerate(items):
        field = f"history.readers[{i}]"
        if isinstance(arn, str) and ":sts::" in arn:
            add(field, arn, "is a session ARN, which changes at every session",
                "name the role: arn:aws:iam::ACCOUNT:role/NAME")
        elif not isinstance(arn, str) or not READER_ARN_PATTERN.match(arn):
            add(field, arn, "is not an IAM role or user ARN (wildcards are not allowed)",
                f"write arn:aws:iam::ACCOUNT:role/NAME, such as {_EXAMPLE}")
        elif arn in readers:
            add(field, arn, "is listed twice", "list each reader once")
        else:
            readers.append(arn)
    if count[0]:
        return None
    return HistoryConfig(enabled=enabled, retention_days=days, readers=tuple(readers))


def archive_of(config: Any) -> HistoryConfig | None:
    """The archive ``config``'s platform keeps, or None: it applies when the config has a Batch
    queue and ``history.enabled`` is not false (no section: the defaults)."""
    if not any(config.backend(b) is not None for b in ARCHIVED_BACKENDS):
        return None
    history = getattr(config, "history", None) or HistoryConfig()
    return history if history.enabled else None


# ---------------------------------------------------------------------------
# What the archive costs (us-east-1 list prices; docs/history.md shows the same table).

#: Records per job: RUNNABLE, STARTING, RUNNING and the end, plus a service job's details record.
RECORDS_PER_JOB = 5
#: Firehose bills ingestion in 5 KB steps per record; a Batch event is 1 to 4 KB.
FIREHOSE_RECORD_KB = 5
FIREHOSE_PER_GB = 0.029
#: A gzip-compressed event line in S3 (about 2.5 KB raw, 8:1).
STORED_KB_PER_RECORD = 0.3
S3_PER_GB_MONTH = 0.023
S3_PER_1000_PUTS = 0.005
#: Firehose writes an object every 5 minutes (its buffer), so about 288 a day.
OBJECTS_PER_DAY = 288
KMS_KEY_PER_MONTH = 1.0
#: The details function runs on a service job's RUNNABLE and RUNNING events: two short calls.
LAMBDA_CALLS_PER_SERVICE_JOB = 2
LAMBDA_PER_MILLION = 0.20
LAMBDA_GB_SECONDS_PER_CALL = 0.2 * 0.125  # 200 ms at 128 MB
LAMBDA_PER_GB_SECOND = 0.0000133334  # arm64
LOGS_PER_GB = 0.50
LOG_KB_PER_CALL = 0.25
DAYS_PER_MONTH = 30.4


def monthly_cost(jobs_per_day: float, *, retention_days: int = DEFAULT_RETENTION_DAYS,
                 service_jobs: bool = True) -> dict[str, float]:
    """What the archive costs a month, by item, in USD, once it holds ``retention_days`` of jobs
    (the teams do not matter: every job costs the same)."""
    records = jobs_per_day * RECORDS_PER_JOB * DAYS_PER_MONTH
    stored_gb = records * STORED_KB_PER_RECORD / 1024 / 1024 * min(retention_days, 3650) / DAYS_PER_MONTH
    calls = jobs_per_day * LAMBDA_CALLS_PER_SERVICE_JOB * DAYS_PER_MONTH if service_jobs else 0.0
    return {
        "KMS key": KMS_KEY_PER_MONTH,
        "Firehose ingestion": records * FIREHOSE_RECORD_KB / 1024 / 1024 * FIREHOSE_PER_GB,
        "S3 storage": stored_gb * S3_PER_GB_MONTH,
        "S3 requests": OBJECTS_PER_DAY * DAYS_PER_MONTH / 1000 * S3_PER_1000_PUTS,
        "details function": calls / 1e6 * LAMBDA_PER_MILLION + calls * LAMBDA_GB_SECONDS_PER_CALL * LAMBDA_PER_GB_SECOND,
        "details logs": calls * LOG_KB_PER_CALL / 1024 / 1024 * LOGS_PER_GB,
    }
