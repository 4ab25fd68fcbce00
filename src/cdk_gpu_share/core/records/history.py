"""The job archive's records, and the jobs they describe: the rules of ``gpu-share trace export``.

The platform's job archive (``history:`` in the config) keeps every Batch job and service-job
state-change event of the platform's queues, and the preemption events, as EventBridge
delivered them. Its key layout, what each part of a key means and who can write to it are
described once, in docs/history.md ("The archive"); :func:`day_of_key` and
:func:`config_of_key` read the two parts of a key the export uses. A service job's
state-change events carry neither its tags nor its request, so the platform writes one more
record per service job, :data:`DETAILS_TYPE`, with its team, instance type and count.

EventBridge delivers at least once, and a duplicate may come with a new event ``id``: as the
AWS Batch user guide says, duplicates are recognised by the job, the event's time and the
job's status (:func:`delivery_key`), for every kind of event.

This module is pure: the caller reads the objects and hands over their text. From the events
it rebuilds each job the way the simulator sees one (:func:`reconstruct`):

* a job is the chain of Batch jobs the reclaimer requeued (``gpu-share:requeued-from``),
  under the id of the first; its ``submit_time`` is that first job's ``createdAt`` (Batch
  sends no event for a submission; every later event carries ``createdAt``);
* its runs are the attempts of every job of the chain (``startedAt`` to ``stoppedAt``), from
  ``attempts`` and from a service job's ``preemptionSummary.recentPreemptedAttempts`` (one
  run per start time, whichever lists it); a run the reclaimer stopped, or Batch preempted,
  is a preemption;
* ``duration_s`` is the work the job needed: its last run plus what its earlier runs saved at
  their checkpoints (the simulator's own rule: progress is saved every ``checkpoint_seconds``
  of running time; none, the job restarted from zero);
* ``wait_s`` is from the submission to the last start (the simulator's wait); ``gpus`` come
  from the job's ``GPU`` requirements (classic Batch) or its instance type and count through
  the instance catalog (service jobs); ``borrowed_gpu_s`` is the job's part of its team's
  GPU-seconds above the guarantee (at each instant, the team's excess shared among its
  running jobs by their GPUs), over the exported jobs.

A job whose team or instance type the config does not know is counted and reported, never
guessed; a job that had not ended by the last event read is counted as unfinished.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fractions import Fraction
from itertools import accumulate
from typing import IO, Any

from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.configuration import backends
from cdk_gpu_share.core.configuration.parse import config_mapping
from cdk_gpu_share.core.policy.fairshare import gpus_of, share_identifier
from cdk_gpu_share.core.scenario import scenario_from_config

__all__ = [
    "ARCHIVE_SOURCE",
    "CONFIG_SEGMENT",
    "DETAILS_TYPE",
    "EXPORT_COLUMNS",
    "JOB_TYPE",
    "MAX_DEPTH",
    "MAX_LINE_BYTES",
    "MAX_LINES",
    "ORIGIN_FORMAT",
    "PREEMPTION_TYPES",
    "SERVICE_JOB_TYPE",
    "ArchivedJob",
    "Export",
    "Lookup",
    "config_hash",
    "config_of_key",
    "day_of_key",
    "delivery_key",
    "details_record",
    "event_of",
    "service_job_details",
    "is_archive_event",
    "lookup_from_config",
    "origin_seconds",
    "parse_lines",
    "parse_records",
    "policy_hash",
    "request_instances",
    "read_header",
    "reconstruct",
    "write_export",
]

JOB_TYPE = "Batch Job State Change"
SERVICE_JOB_TYPE = "Batch Service Job State Change"
#: Batch quota management's preemption events (a service job's run stopped for another share).
PREEMPTION_TYPES = ("Batch Service Job Preemption Started", "Batch Service Job Preemption Completed")
#: The record the platform writes once per service job: what its state-change events leave out.
DETAILS_TYPE = "GpuShare Service Job Details"
#: The ``source`` of the records the platform writes itself.
ARCHIVE_SOURCE = "gpu-share.history"
#: The segment of an object key that names the deployed config (``config=<hash>/``).
CONFIG_SEGMENT = "config="
TERMINAL = ("SUCCEEDED", "FAILED")
#: A classic Batch job stopped by the reclaimer says so in its ``statusReason``.
RECLAIM_REASON_PREFIX = "GpuShare reclaim"
TAG_TEAM = "gpu-share:team"
TAG_REQUEUED_FROM = "gpu-share:requeued-from"
TAG_CHECKPOINT = "gpu-share:checkpoint-seconds"
#: Columns of an export: the simulator's trace, then the real figures it ignores.
EXPORT_COLUMNS = ("job_id", "team", "submit_time", "duration_s", "gpus", "priority", "checkpoint_seconds",
                  "wait_s", "preemptions", "borrowed_gpu_s")
_HEADER_MARK = "# gpu-share trace export:"


def config_hash(mapping: Mapping[str, Any]) -> str:
    """A short, stable hash of a config as its mapping (:func:`cdk_gpu_share.core.configuration.parse.config_mapping`):
    the platform stack writes it into the archive's keys, and ``--fidelity`` compares it."""
    text = json.dumps(mapping, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def policy_hash(config: Any) -> str:
    """The :func:`config_hash` of what decides the jobs' fate in a config: its teams and its
    backends' sections (not its alerts, inference or archive settings)."""

    mapping = config_mapping(config)
    return config_hash({k: v for k, v in mapping.items() if k == "teams" or k in backends.keys()})


def request_instances(payload: Any) -> dict[str, float]:
    """Instances per type a service job's SageMaker request asks for (``ResourceConfig``, its
    ``InstanceGroups`` or the type and count itself), from ``serviceRequestPayload``."""
    if isinstance(payload, str):
        try:
            payload = json.loads(payload or "{}")
        except ValueError:
            return {}
    config = (payload.get("ResourceConfig") or {}) if isinstance(payload, Mapping) else {}
    need: dict[str, float] = {}
    groups = config.get("InstanceGroups") or [config] if isinstance(config, Mapping) else []
    for g in groups if isinstance(groups, list) else ():
        if isinstance(g, Mapping) and isinstance(g.get("InstanceType"), str):
            count = g.get("InstanceCount", 1)
            n = float(count) if isinstance(count, (int, float)) and not isinstance(count, bool) else 1.0
            need[g["InstanceType"]] = need.get(g["InstanceType"], 0.0) + n
    return need


def config_of_key(key: str) -> str | None:
    """The config hash an object key names (``.../config=<hash>/...``), or None."""
    for part in key.split("/"):
        if part.startswith(CONFIG_SEGMENT) and len(part) > len(CONFIG_SEGMENT):
            return part[len(CONFIG_SEGMENT):]
    return None


def day_of_key(key: str) -> str | None:
    """The UTC day (``YYYY-MM-DD``) of an object key's ``YYYY/MM/DD`` partition, or None."""
    parts = key.split("/")
    for i in range(len(parts) - 2):
        y, m, d = parts[i:i + 3]
        if len(y) == 4 and len(m) == 2 and len(d) == 2 and (y + m + d).isdigit():
            return f"{y}-{m}-{d}"
    return None


#: Bytes a line of an archive object may hold (one record; Firehose takes records of at most
#: 1,000 KiB, and EventBridge events are at most 256 KB). A longer line is skipped.
MAX_LINE_BYTES = 1024 * 1024
#: Lines an object may hold (Firehose's 64 MiB buffer holds about 65,000 events of 1 KB); the
#: rest of a longer object is skipped.
MAX_LINES = 500_000
#: How deep a record's JSON may nest (Batch's events nest fewer than 10 levels); a deeper line
#: is skipped before it is parsed.
MAX_DEPTH = 64
_LINE = re.compile(rb"[^\n]+")
#: Where one record ends and the next begins in records written back to back (Firehose without a
#: delimiter): ``}{"version":`` cannot occur inside a JSON string, its quote would end the string.
_NEXT_RECORD = re.compile(rb'(?<=\})(?=\{"version":)')
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_DECODER = json.JSONDecoder()


def _too_deep(text: str) -> bool:
    """True when the JSON text nests deeper than :data:`MAX_DEPTH` (brackets outside strings)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > MAX_DEPTH


def _values(text: str) -> list[Any]:
    """The JSON values of one line, one or back to back (``ValueError`` if any is not JSON)."""
    out: list[Any] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in " \t\r":
            i += 1
        if i >= n:
            return out
        value, i = _DECODER.raw_decode(text, i)
        out.append(value)


def parse_lines(data: bytes) -> Iterator[tuple[Any, str | None]]:
    """(record, None) for each JSON value of an archive object's bytes, one a line or back to back
    (Firehose without a delimiter); (None, why) for each line skipped: longer than
    :data:`MAX_LINE_BYTES`, not UTF-8, nested deeper than :data:`MAX_DEPTH`, not JSON objects, or past
    :data:`MAX_LINES`. A bad line costs that line only."""
    lines = 0
    for match in _LINE.finditer(data):
        line = match.group()
        for piece in (line,) if len(line) <= MAX_LINE_BYTES else _NEXT_RECORD.split(line):
            if not piece.strip():
                continue
            lines += 1
            if lines > MAX_LINES:
                yield None, f"lines past {MAX_LINES:,} in one object"
                return
            if len(piece) > MAX_LINE_BYTES:
                yield None, f"lines longer than {MAX_LINE_BYTES // 1024 // 1024} MiB"
                continue
            try:
                text = piece.decode("utf-8")
            except UnicodeDecodeError:
                yield None, "lines not UTF-8"
                continue
            if _too_deep(text):
                yield None, f"lines nested deeper than {MAX_DEPTH}"
                continue
            if text.lstrip()[:1] != "{":  # every record is an object: no parse needed to refuse it
                yield None, "lines not JSON objects"
                continue
            try:
                values = _values(text)
            except (ValueError, RecursionError):
                yield None, "lines not JSON objects"
                continue
            for value in values:
                yield value, None


def parse_records(text: str) -> Iterator[Any]:
    """Each JSON value of an object's text (:func:`parse_lines`); a line that cannot be read is a
    ``ValueError`` naming why."""
    for record, why in parse_lines(text.encode("utf-8")):
        if why is not None:
            raise ValueError(why)
        yield record


def is_archive_event(record: Any) -> bool:
    """True for a record the archive keeps (a Batch job event or the platform's details record)."""
    return (isinstance(record, Mapping) and isinstance(record.get("detail"), Mapping)
            and record.get("detail-type") in (JOB_TYPE, SERVICE_JOB_TYPE, DETAILS_TYPE, *PREEMPTION_TYPES))


def details_record(*, job_id: str, queue: str, team: str | None, instances: Mapping[str, float] | None,
                   created_ms: int | None, priority: int | None, time: str, account: str = "",
                   region: str = "") -> dict[str, Any]:
    """The platform's details record of a service job (what ``DescribeServiceJob`` told): its
    team, its instances per type (:func:`request_instances`), its submission and priority."""
    detail: dict[str, Any] = {"jobId": job_id, "jobQueue": queue}
    for key, value in (("team", team), ("instances", dict(instances) if instances else None),
                       ("createdAt", created_ms), ("schedulingPriority", priority)):
        if value is not None:
            detail[key] = value
    return {"version": "0", "id": f"details-{job_id}", "detail-type": DETAILS_TYPE, "source": ARCHIVE_SOURCE,
            "account": account, "time": time, "region": region, "resources": [], "detail": detail}


def _iso_ms(ms: Any) -> str:
    value = _ms(ms)
    return "" if value is None else datetime.fromtimestamp(value / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_of(job: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """A job as Batch described it (``DescribeJobs``, ``DescribeServiceJob``), as the archive would
    hold its last state-change event: the ``Batch Source`` of ``trace export``."""
    when = job.get("stoppedAt") or job.get("startedAt") or job.get("createdAt")
    return {"version": "0", "id": f"described-{job.get('jobId')}-{job.get('status')}", "detail-type": kind,
            "source": "aws.batch", "time": _iso_ms(when), "resources": [], "detail": dict(job)}


def service_job_details(job: Mapping[str, Any], *, time: str = "", account: str = "", region: str = "") -> dict[str, Any]:
    """The details record of a ``DescribeServiceJob`` answer: its team (the ``gpu-share:team``
    tag, else its quota share), its instances from its SageMaker request, its submission and
    priority. One rule for the archive's details function and the Batch source of the export."""
    tags = job.get("tags")
    team = (tags.get(TAG_TEAM) if isinstance(tags, Mapping) else None) or job.get("quotaShareName") \
        or job.get("shareIdentifier")
    prio = job.get("schedulingPriority")
    created = job.get("createdAt")
    asked = request_instances(job.get("serviceRequestPayload"))
    return details_record(
        job_id=str(job.get("jobId") or ""), queue=str(job.get("jobQueue") or ""), team=str(team) if team else None,
        instances={it: int(n) if float(n).is_integer() else n for it, n in asked.items()},
        created_ms=created if isinstance(created, int) else None, priority=prio if isinstance(prio, int) else None,
        time=time or _iso_ms(created), account=account, region=region)


@dataclass(frozen=True)
class Lookup:
    """What the config says about the jobs: its teams, by name and by Batch share identifier,
    each team's guarantee in GPUs and checkpoint interval, and the queues of the platform."""

    teams: frozenset[str]
    team_of_share: Mapping[str, str] = field(default_factory=dict)
    guarantee: Mapping[str, float] = field(default_factory=dict)
    checkpoint: Mapping[str, float] = field(default_factory=dict)
    #: Queue names (not ARNs) whose jobs are exported; empty: every queue.
    queues: frozenset[str] = frozenset()


@dataclass
class ArchivedJob:
    """One job of the export: the simulator's row and the real figures."""

    job_id: str
    team: str
    submit_ms: int
    duration_ms: int
    gpus: Fraction
    priority: int
    checkpoint_seconds: float | None
    final_start_ms: int
    preemptions: int
    runs: list[tuple[int, int]]
    borrowed_gpu_s: float = 0.0


@dataclass
class Export:
    """The jobs rebuilt from the archive, and what was not exported and why."""

    jobs: list[ArchivedJob] = field(default_factory=list)
    #: reason -> jobs not exported (``unknown team``, ``unknown instance type``, ``unfinished``, ...).
    skipped: Counter[str] = field(default_factory=Counter)
    #: unknown team names / instance types -> jobs.
    unknown_teams: Counter[str] = field(default_factory=Counter)
    unknown_types: Counter[str] = field(default_factory=Counter)
    #: config hash -> (first, last) event time in ms seen under it.
    configs: dict[str, tuple[int, int]] = field(default_factory=dict)
    events: int = 0
    duplicates: int = 0


@dataclass
class _Track:
    """Every event of one Batch job id, merged."""

    job_id: str
    service: bool = False
    queue: str = ""
    created_ms: int | None = None
    tags: dict[str, str] = field(default_factory=dict)
    share: str = ""
    priority: int = 0
    gpus: float | None = None
    status: str = ""
    status_time: int = -1
    reason: str = ""
    started_ms: int | None = None
    stopped_ms: int | None = None
    #: start time (ms) -> (start, stop, status reason) of each attempt seen
    attempts: dict[int, tuple[int, int, str]] = field(default_factory=dict)
    preemptions: int = 0  # Batch's Preemption Started events of the job
    preempted_count: int = 0  # the largest preemptionSummary.preemptedAttemptCount seen
    details: dict[str, Any] = field(default_factory=dict)


#: The latest time in ms an archived time may name (9999-12-31); a larger number is no time.
_MAX_MS = 253_402_300_799_999


def _ms(value: Any) -> int | None:
    """A time in ms, or None for what is not one (not a number, negative, past year 9999)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return int(value) if 0 <= value <= _MAX_MS else None


def _event_ms(event: Mapping[str, Any]) -> int:
    text = str(event.get("time") or "")
    try:
        return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp() * 1000)
    except ValueError:
        return -1


_STATUS_RANK = {"SUBMITTED": 0, "PENDING": 1, "RUNNABLE": 2, "SCHEDULED": 3, "STARTING": 4, "RUNNING": 5,
                "SUCCEEDED": 6, "FAILED": 6}


def _merge(track: _Track, event: Mapping[str, Any], detail: Mapping[str, Any]) -> None:
    """Fold one state-change event into its job's track (events may come late, twice, or out of order)."""
    track.queue = str(detail.get("jobQueue") or track.queue)
    created = _ms(detail.get("createdAt"))
    if created is not None:
        track.created_ms = created if track.created_ms is None else min(track.created_ms, created)
    tags = detail.get("tags")
    if isinstance(tags, Mapping):
        track.tags.update({str(k): str(v) for k, v in tags.items()})
    track.share = str(detail.get("shareIdentifier") or detail.get("quotaShareName") or track.share)
    prio = detail.get("schedulingPriority")
    if isinstance(prio, int) and not isinstance(prio, bool):
        track.priority = prio
    if not track.service:
        g = _gpus(detail)
        if g > 0:
            track.gpus = g
    status = str(detail.get("status") or "")
    at = _event_ms(event)
    # The latest status wins; at equal times, the later state (a job never goes back from
    # SUCCEEDED; a preempted service job goes back to RUNNABLE with a later event time).
    key = (at, _STATUS_RANK.get(status, -1))
    if key >= (track.status_time, _STATUS_RANK.get(track.status, -1)):
        track.status, track.status_time = status, at
        track.reason = str(detail.get("statusReason") or "")
        track.started_ms = _ms(detail.get("startedAt")) if status in ("RUNNING", *TERMINAL) else track.started_ms
        track.stopped_ms = _ms(detail.get("stoppedAt")) if status in TERMINAL else None
    _add_attempts(track, detail.get("attempts"))
    _merge_preempted(track, detail)


def _merge_preempted(track: _Track, detail: Mapping[str, Any]) -> None:
    """A service job's preempted runs and their count, from its ``preemptionSummary`` (state-change
    and Preemption Completed events, ``DescribeServiceJob``)."""
    summary = detail.get("preemptionSummary")
    if not isinstance(summary, Mapping):
        return
    _add_attempts(track, summary.get("recentPreemptedAttempts"))
    count = summary.get("preemptedAttemptCount")
    if isinstance(count, int) and not isinstance(count, bool):
        track.preempted_count = max(track.preempted_count, count)


def _add_attempts(track: _Track, attempts: Any) -> None:
    """Fold a list of attempts into the track's runs: one run per start time, whichever event or
    list names it (``attempts`` and ``recentPreemptedAttempts`` may name the same run)."""
    if not isinstance(attempts, list):
        return
    for a in attempts:
        if not isinstance(a, Mapping):
            continue
        container = a.get("container")
        container = container if isinstance(container, Mapping) else {}
        start = _ms(a.get("startedAt") if "startedAt" in a else container.get("startedAt"))
        stop = _ms(a.get("stoppedAt") if "stoppedAt" in a else container.get("stoppedAt"))
        if start is not None and stop is not None:
            track.attempts.setdefault(start, (start, stop, str(a.get("statusReason") or "")))


#: The most GPUs one job may ask for (a job asking for more is no job the platform can run).
MAX_JOB_GPUS = 100_000


def _gpus(detail: Mapping[str, Any]) -> float:
    """A classic job's GPUs (:func:`gpus_of`), or 0 when its requirements are not what Batch sends
    (an archived event may be anything a writer to the stream put there)."""
    try:
        g = gpus_of(detail)
    except (AttributeError, TypeError, ValueError, OverflowError):
        return 0.0
    return g if math.isfinite(g) and 0 < g <= MAX_JOB_GPUS else 0.0


def _count(n: Any) -> Fraction | None:
    """An instance count of a details record, or None when it is not a positive number within reason."""
    if isinstance(n, bool) or not isinstance(n, (int, float)) or not (0 < n <= MAX_JOB_GPUS):
        return None
    return Fraction(str(n))


def _runs(track: _Track) -> list[tuple[int, int, str]]:
    """The job's runs (start, stop, reason), in time order: its attempts, and its last run."""
    runs = dict(track.attempts)
    if track.status in TERMINAL and track.started_ms is not None and track.stopped_ms is not None:
        runs[track.started_ms] = (track.started_ms, track.stopped_ms, track.reason)
    # A start after the stop is no run (a job stopped while starting keeps no start of its own).
    return [runs[k] for k in sorted(runs) if runs[k][1] >= runs[k][0]]


def _saved(runs: Sequence[tuple[int, int]], interval_ms: int) -> int:
    """Progress (ms) saved after the stopped runs, the simulator's rule: each run resumes from the
    last checkpoint; with no interval, from zero."""
    saved = 0
    for start, stop in runs:
        reached = saved + (stop - start)
        if interval_ms > 0:
            saved = max(saved, (reached // interval_ms) * interval_ms)
    return saved


def _job_id(detail: Mapping[str, Any]) -> str:
    """The Batch job id of an event's detail (a preemption event names its job by ARN only)."""
    return str(detail.get("jobId") or str(detail.get("preemptedJobArn") or "").rsplit("/", 1)[-1])


def delivery_key(record: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """What makes an archived event one event, whatever its ``id``: its kind, its job, its time and
    the job's status (the AWS Batch user guide's rule for duplicates of its event stream). The
    platform's details record is one per job whatever its time."""
    kind = str(record.get("detail-type") or "")
    detail = record.get("detail")
    detail = detail if isinstance(detail, Mapping) else {}
    if kind == DETAILS_TYPE:
        return kind, _job_id(detail), "", ""
    return kind, _job_id(detail), str(record.get("time") or ""), str(detail.get("status") or "")


def reconstruct(records: Iterable[tuple[str | None, Any]], lookup: Lookup, *, start_ms: int, end_ms: int) -> Export:
    """The jobs submitted in ``[start_ms, end_ms)`` that ended, from the archive's records.

    ``records``: (the config hash of the object it came from, or None; the record). Records the
    archive does not keep are ignored; an event delivered twice (:func:`delivery_key`) counts once.
    """
    out = Export()
    tracks: dict[str, _Track] = {}
    seen: set[tuple[str, str, str, str]] = set()
    for config, record in records:
        if not is_archive_event(record):
            continue
        key = delivery_key(record)
        if key in seen:
            out.duplicates += 1
            continue
        seen.add(key)
        out.events += 1
        at = _event_ms(record)
        if config is not None and at >= 0:
            first, last = out.configs.get(config, (at, at))
            out.configs[config] = (min(first, at), max(last, at))
        detail = record["detail"]
        jid = key[1]
        if not jid:
            continue
        kind = record["detail-type"]
        track = tracks.setdefault(jid, _Track(jid))
        if kind == DETAILS_TYPE:
            track.service = True
            track.details.update(detail)
            if _ms(detail.get("createdAt")) is not None and track.created_ms is None:
                track.created_ms = _ms(detail.get("createdAt"))
        elif kind in PREEMPTION_TYPES:
            track.service = True
            if kind == PREEMPTION_TYPES[0]:  # Started: one per preemption (Completed follows it)
                track.preemptions += 1
            _merge_preempted(track, detail)
        else:
            track.service = track.service or kind == SERVICE_JOB_TYPE
            _merge(track, record, detail)
    successor = {t.tags[TAG_REQUEUED_FROM]: t.job_id for t in tracks.values() if t.tags.get(TAG_REQUEUED_FROM)}
    for root in tracks.values():
        if root.tags.get(TAG_REQUEUED_FROM) and root.tags[TAG_REQUEUED_FROM] in tracks:
            continue  # part of another job's chain
        chain = [root]
        while chain[-1].job_id in successor and len(chain) <= len(tracks):
            chain.append(tracks[successor[chain[-1].job_id]])
        _add_job(out, chain, lookup, start_ms, end_ms)
    out.jobs.sort(key=lambda j: (j.submit_ms, j.job_id))
    _attribute_borrowing(out.jobs, lookup)
    return out


def _queue_name(arn: str) -> str:
    return arn.rsplit("/", 1)[-1]


def _add_job(out: Export, chain: list[_Track], lookup: Lookup, start_ms: int, end_ms: int) -> None:
    root, last = chain[0], chain[-1]
    if root.created_ms is None or not (start_ms <= root.created_ms < end_ms):
        return
    if lookup.queues and _queue_name(root.queue or last.queue) not in lookup.queues and root.queue:
        out.skipped["another queue"] += 1
        return
    details = next((t.details for t in chain if t.details), {})
    team = str(details.get("team") or root.tags.get(TAG_TEAM) or lookup.team_of_share.get(root.share, root.share))
    if last.status not in TERMINAL:
        out.skipped["unfinished"] += 1
        return
    if root.service and not details:
        # The details step failed (or its record was lost): the events alone say neither the
        # team nor the GPUs of a service job.
        out.skipped["no details record"] += 1
        return
    if team not in lookup.teams:
        out.skipped["unknown team"] += 1
        out.unknown_teams[team or "(none)"] += 1
        return
    if root.service:
        asked = details.get("instances")
        asked = asked if isinstance(asked, Mapping) and asked else {}
        unknown = [it for it in asked if instances.lookup(str(it)) is None]
        if not asked or unknown:
            out.skipped["unknown instance type" if unknown else "no instance type"] += 1
            for it in unknown:
                out.unknown_types[str(it)] += 1
            return
        gpus = sum((Fraction(instances.get(str(it)).gpus) * count
                    for it, n in asked.items() if (count := _count(n)) is not None), Fraction(0))
        if gpus <= 0:
            out.skipped["no instance type"] += 1
            return
        prio = details.get("schedulingPriority", root.priority)
        priority = prio if isinstance(prio, int) else root.priority
    else:
        if not last.gpus:
            out.skipped["no GPU requirement"] += 1
            return
        gpus = Fraction(str(last.gpus))
        priority = root.priority
    runs = [run for t in chain for run in _runs(t)]
    if not runs or last.status == "FAILED" and last.reason.startswith(RECLAIM_REASON_PREFIX):
        out.skipped["never ran" if not runs else "unfinished"] += 1
        return
    tagged = root.tags.get(TAG_CHECKPOINT)
    checkpoint = _seconds_or_none(tagged)
    interval = checkpoint if checkpoint is not None else lookup.checkpoint.get(team, 0.0)
    earlier = [(s, e) for s, e, _ in runs[:-1]]
    final_start, final_stop = runs[-1][0], runs[-1][1]
    duration = _saved(earlier, int(round(interval * 1000))) + (final_stop - final_start)
    # The reclaimer's stops are the links of the chain; Batch's own preemptions of a service
    # job are its runs before the last (or its preemption events or summary's count, if more).
    preemptions = len(chain) - 1
    if root.service:
        preemptions = max(len(runs) - 1, root.preemptions, root.preempted_count)
    out.jobs.append(ArchivedJob(job_id=root.job_id, team=team, submit_ms=root.created_ms, duration_ms=duration,
                                gpus=gpus, priority=priority, checkpoint_seconds=checkpoint,
                                final_start_ms=final_start, preemptions=preemptions,
                                runs=[(s, e) for s, e, _ in runs]))


def _seconds_or_none(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and 0 <= value <= _MAX_MS / 1000 else None


def _attribute_borrowing(jobs: list[ArchivedJob], lookup: Lookup) -> None:
    """Each job's share of its team's GPU-seconds above the guarantee (the simulator's
    ``borrowed_gpu_seconds`` is the team's integral of max(0, U - G))."""
    by_team: dict[str, list[tuple[int, int, Fraction, int]]] = {}
    for i, job in enumerate(jobs):
        for start, stop in job.runs:
            by_team.setdefault(job.team, []).append((start, +1, job.gpus, i))
            by_team[job.team].append((stop, -1, job.gpus, i))
    for team, changes in by_team.items():
        g = Fraction(str(lookup.guarantee.get(team, 0.0)))
        changes.sort(key=lambda c: (c[0], c[1]))
        running: dict[int, Fraction] = {}
        last = None
        for at, sign, gpus, i in changes:
            if last is not None and at > last and running:
                u = sum(running.values(), Fraction(0))
                if u > g:
                    for k, size in running.items():
                        jobs[k].borrowed_gpu_s += float((u - g) * size / u) * (at - last) / 1000
            last = at
            if sign > 0:
                running[i] = running.get(i, Fraction(0)) + gpus
            else:
                running[i] = running.get(i, Fraction(0)) - gpus
                if running[i] <= 0:
                    del running[i]


def _seconds_text(ms: int) -> str:
    """Milliseconds as exact decimal seconds (``12``, ``12.5``, ``0.001``)."""
    whole, frac = divmod(ms, 1000)
    return str(whole) if frac == 0 else f"{whole}.{frac:03d}".rstrip("0")


def _gpus_text(gpus: Fraction) -> str:
    if gpus.denominator == 1:
        return str(gpus.numerator)
    return format(float(gpus), ".6f").rstrip("0").rstrip(".")


def _origin_text(origin_ms: int) -> str:
    return datetime.fromtimestamp(origin_ms / 1000, timezone.utc).strftime(ORIGIN_FORMAT)


def write_export(export: Export, out: IO[str], *, origin_ms: int, source: str) -> None:
    """The export as the simulator's CSV: a header comment (origin in UTC, source, configs),
    the columns :data:`EXPORT_COLUMNS`, one job a row, times in seconds from ``origin_ms``."""
    configs = ";".join(f"{h}@{_origin_text(a)}..{_origin_text(b)}" for h, (a, b) in
                       sorted(export.configs.items(), key=lambda kv: kv[1]))
    out.write(f"{_HEADER_MARK} origin={_origin_text(origin_ms)} source={source}"
              + (f" configs={configs}" if configs else "") + "\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(EXPORT_COLUMNS)
    for j in export.jobs:
        writer.writerow([
            j.job_id, j.team, _seconds_text(j.submit_ms - origin_ms), _seconds_text(j.duration_ms),
            _gpus_text(j.gpus), j.priority, "" if j.checkpoint_seconds is None else f"{j.checkpoint_seconds:g}",
            _seconds_text(j.final_start_ms - j.submit_ms), j.preemptions, f"{j.borrowed_gpu_s:.3f}".rstrip("0").rstrip("."),
        ])


def read_header(first_line: str) -> dict[str, Any] | None:
    """The header comment of an export: ``{"origin": ..., "source": ..., "configs": [(hash, first, last)]}``,
    or None when the line is not one."""
    if not first_line.startswith(_HEADER_MARK):
        return None
    fields = dict(part.split("=", 1) for part in first_line[len(_HEADER_MARK):].split() if "=" in part)
    configs = []
    for entry in filter(None, fields.get("configs", "").split(";")):
        name, _, span = entry.partition("@")
        first, _, last = span.partition("..")
        configs.append((name, first, last))
    return {"origin": fields.get("origin"), "source": fields.get("source"), "configs": configs}


#: How an export's header writes its origin (a UTC time to the second).
ORIGIN_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def origin_seconds(header: Mapping[str, Any] | None) -> float | None:
    """The origin of an export's header (:func:`read_header`) in seconds since the epoch; None when
    there is no header or it names no origin. An origin that is not a UTC time as the export
    writes it (``2026-11-02T00:00:00Z``) is a ``ValueError`` naming it."""
    text = (header or {}).get("origin")
    if not text:
        return None
    try:
        return datetime.strptime(str(text), ORIGIN_FORMAT).replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        raise ValueError(f"its header's origin {text!r} is not a UTC time such as 2026-11-02T00:00:00Z") from None


def lookup_from_config(config: Any, backend: str, queues: Iterable[str] = ()) -> Lookup:
    """The :class:`Lookup` of ``backend`` in a validated config: every team of the config (a job
    of a team on another backend is still a known team), share identifiers, and the backend's
    guarantees in GPUs and checkpoint intervals as the simulator's scenario has them."""

    scenario = scenario_from_config(config, backend)
    teams = scenario["teams"]
    return Lookup(
        teams=frozenset(t["name"] for t in teams),
        team_of_share={share_identifier(t.name): t.name for t in config.teams},
        guarantee={t["name"]: float(t["guarantee"].get(instances.GPU_RESOURCE, 0)) for t in teams},
        checkpoint={t["name"]: float(t["checkpoint_seconds"]) for t in teams if t.get("checkpoint_seconds")},
        queues=frozenset(queues),
    )
