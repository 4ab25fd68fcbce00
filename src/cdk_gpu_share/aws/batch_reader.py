"""Read an AWS Batch fair-share job queue into the reclaim planner's state.

Used by the reclaim Lambda (every cycle) and by ``gpu-share status``. The caller
passes a boto3 ``batch`` client; nothing here imports boto3 or aws-cdk-lib.

The fleet is one pool of GPUs (resource ``"gpu"``): Batch places a GPU job on any
instance of the queue's compute environments, so the planner's fungible pool is
the right model. Teams are told apart by their fair-share identifier.

API
---
* :func:`share_identifier` -- the fair-share identifier of a team name
  (``team-a`` -> ``teama``); :func:`share_identifier_problems` lists collisions.
* :func:`fleet_gpus`, :func:`team_settings`, :func:`settings_from_config` -- the
  *reclaim settings*, a JSON document baked into the Lambda at synth::

      {"queue": "gpu-share-fairshare", "capacity": {"gpu": 3},
       "settings": {"reclaim_after_seconds": 60, "min_runtime_seconds": 0},
       "dry_run": false,
       "teams": [{"name": "team-a", "share_identifier": "teama",
                  "guarantee": {"gpu": 1}, ...the planner's team fields...}]}

  With time windows (:func:`window_settings`) it also holds ``windows`` (the config's, as
  it writes them) and, on each team, ``windows``: window name -> the planner's
  ``guarantee``, ``borrow_limit_percent`` and ``borrow_limit`` while that window is open.
  :func:`in_force` picks, at an instant, the values in force and each team's last rise of
  its guarantee (from which ``reclaim_after_seconds`` counts).
  :func:`encode_settings` / :func:`decode_settings` pack it for an environment
  variable (zlib + base64 when long).
* :func:`read_queue` -- ``ListJobs`` (RUNNABLE, STARTING, RUNNING; paginated,
  1,000 a page) and ``DescribeJobs`` (100 a call) into a :class:`QueueSnapshot`
  whose ``state`` is the planner's input state (``reclaim.plan(snapshot.state)``).
  :func:`read_queue_state` returns only that state.
* :func:`call_with_retry` -- one Batch call, retried with exponential backoff on
  throttling and server errors.
"""

from __future__ import annotations

import base64
import json
import math
import random
import re
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.configuration.model import team_in_window
from cdk_gpu_share.core.configuration.parse import DEFAULT_MAX_PRIORITY
from cdk_gpu_share.core.configuration.parse import MAX_CHECKPOINT_SECONDS as MAX_TEAM_CHECKPOINT_SECONDS
from cdk_gpu_share.core.configuration.windows import Window, boundaries, window_at, window_mapping
from cdk_gpu_share.core.policy.fairshare import (  # noqa: F401
    SHARE_IDENTIFIER_MAX,
    gpus_of,
    reclaim_settings,
    share_identifier,
    share_identifier_problems,
)
from cdk_gpu_share.core.scenario import group_entries

__all__ = [
    "RESOURCE",
    "TAG_QUEUE",
    "TAG_TEAM",
    "TAG_REQUEUED_FROM",
    "TAG_REQUEUE_ATTEMPT",
    "TAG_CHECKPOINT",
    "TAG_BORROWED",
    "REQUEUE_TAG_KEYS",
    "SUBMIT_TAG_KEYS",
    "RECLAIM_REASON_PREFIX",
    "LEDGER_OPEN_INDEX",
    "LIST_PAGE_SIZE",
    "DESCRIBE_BATCH",
    "share_identifier",
    "share_identifier_problems",
    "fleet_gpus",
    "team_settings",
    "settings_from_config",
    "window_settings",
    "InForce",
    "in_force",
    "with_rises",
    "encode_settings",
    "decode_settings",
    "gpus_of",
    "JobFacts",
    "facts_of",
    "QueueSnapshot",
    "read_queue",
    "read_queue_state",
    "borrowed_record",
    "borrowed_tag",
    "Unrecorded",
    "checkpoint_of",
    "call_with_retry",
    "is_retryable",
    "may_have_applied",
    "DescribeCache",
    "minimum_calls",
]

#: The planner's one resource: GPUs of the fleet.
RESOURCE = instances.GPU_RESOURCE
#: Tags every job of the queue carries (required by ``FairshareQueue.grant_submit``).
TAG_QUEUE = "gpu-share:queue"
TAG_TEAM = "gpu-share:team"
#: Tag of a job the reclaimer resubmitted: the id of the job it stopped.
TAG_REQUEUED_FROM = "gpu-share:requeued-from"
#: Tag of a resubmitted job: the requeue attempt (a random id kept in the ledger) that made it.
TAG_REQUEUE_ATTEMPT = "gpu-share:requeue-attempt"
#: Tag a team may set on a job at submission: seconds between two of its checkpoints
#: (what a stop throws away under the checkpoint-aware victim order).
TAG_CHECKPOINT = "gpu-share:checkpoint-seconds"
#: Tag the reclaimer sets on a running job: ``<startedAt in ms>:true|false``, whether that
#: run started beyond its team's guarantee. The reclaimer's alone (no team may set it).
TAG_BORROWED = "gpu-share:borrowed"
#: The tag keys a team may set on its jobs: the two it must carry and its checkpoint interval.
SUBMIT_TAG_KEYS = (TAG_QUEUE, TAG_TEAM, TAG_CHECKPOINT)
#: The only tag keys a resubmission carries (the reclaimer's IAM allows no other: a job's
#: other tags, which only a principal outside the teams' grants can set, are not carried;
#: nor is TAG_BORROWED, which belongs to the run that was stopped).
REQUEUE_TAG_KEYS = (TAG_QUEUE, TAG_TEAM, TAG_CHECKPOINT, TAG_REQUEUED_FROM, TAG_REQUEUE_ATTEMPT)
#: The longest checkpoint interval a tag may give, in seconds (7 days): what a team may declare.
MAX_CHECKPOINT_SECONDS = MAX_TEAM_CHECKPOINT_SECONDS
#: Start of every reason the reclaimer writes on a job it stops. Letters and spaces
#: only, so that a job definition's ``evaluateOnExit.onStatusReason`` (letters,
#: digits, periods, colons, white space) and an EventBridge prefix filter match it.
RECLAIM_REASON_PREFIX = "GpuShare reclaim"
#: The requeue ledger's sparse index of open records (partition ``openQueue``, sort
#: ``settleAfter``): the construct declares it, the reclaimer queries it.
LEDGER_OPEN_INDEX = "open-by-settle-time"

#: ListJobs returns at most 1,000 jobs a page when filtered by status.
LIST_PAGE_SIZE = 1000
#: DescribeJobs takes at most 100 job ids.
DESCRIBE_BATCH = 100
#: Batch job statuses read, and the planner's job state each maps to.
STATUSES = (("RUNNABLE", "pending"), ("STARTING", "running"), ("RUNNING", "running"))
#: Fair-share identifiers: up to 255 alphanumeric characters (Batch API reference).
#: Name prefix of the stand-in team of a share identifier no configured team has.
UNKNOWN_SHARE_PREFIX = "share:"


# ---------------------------------------------------------------------------
# Share identifiers


# ---------------------------------------------------------------------------
# Reclaim settings (baked into the Lambda at synth)


def fleet_gpus(amounts: Mapping[str, Any]) -> float:
    """GPUs of ``{instance_type: count or Amount}`` on catalogued GPU instance types."""
    total = 0.0
    for it, amount in amounts.items():
        if hasattr(amount, "gpus"):
            g = amount.gpus(it)
            total += g or 0.0
        else:
            info = instances.lookup(it)
            total += float(amount) * (info.gpus if info else 0)
    return total


def _num(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def team_settings(team: Any, capacity: Mapping[str, int]) -> dict:
    """The planner's team entry (GPUs) for a :class:`~cdk_gpu_share.core.configuration.parse.TeamConfig`
    on a fleet of ``capacity``, plus its ``share_identifier``. Defaults are left out."""
    entry: dict[str, Any] = {
        "name": team.name,
        "share_identifier": share_identifier(team.name),
        "guarantee": {RESOURCE: _num(fleet_gpus(team.guarantee_for(capacity)))},
    }
    sharing = getattr(team.sharing, "value", team.sharing)
    if sharing != "lend_and_borrow":
        entry["sharing"] = sharing
    elif team.borrow_limit_percent is not None and team.borrow_limit_percent != -1:
        entry["borrow_limit_percent"] = team.borrow_limit_percent
    limits = {it: a for it, a in team.borrow_limit.items() if it in capacity}
    if limits and sharing == "lend_and_borrow":
        entry["borrow_limit"] = {RESOURCE: _num(fleet_gpus(limits))}
    if team.in_team_preemption:
        entry["in_team_preemption"] = True
    if getattr(team, "checkpoint_seconds", None) is not None:
        entry["checkpoint_seconds"] = team.checkpoint_seconds
    cap = getattr(team, "max_priority", DEFAULT_MAX_PRIORITY)
    if cap != DEFAULT_MAX_PRIORITY:
        entry["max_priority"] = cap
    if getattr(team, "group", None) is not None:
        entry["group"] = team.group
    return entry


def group_settings(config: Any, capacity: Mapping[str, int]) -> dict:
    """``{"groups": [...]}``: the organisation's tree above the fair-share teams, in GPUs (the
    planner's ``groups``), or ``{}`` without groups: the settings stay as they were."""
    if not getattr(config, "groups", ()):
        return {}

    return {"groups": group_entries(config.groups, config.teams_for("fairshare"), capacity)}


def settings_from_config(config: Any, *, queue: str | None = None) -> dict:
    """The reclaim settings of a :class:`~cdk_gpu_share.core.configuration.parse.PlatformConfig`'s fair-share queue."""
    section = config.fairshare
    if section is None:
        raise ValueError("the config has no fairshare section")
    reclaim = section.reclaim
    return {
        "queue": queue or section.queue_name or f"{config.name}-fairshare",
        "capacity": {RESOURCE: _num(fleet_gpus(section.capacity))},
        "settings": reclaim_settings(reclaim),
        "dry_run": reclaim.dry_run,
        "teams": [team_settings(t, section.capacity) for t in config.teams_for("fairshare")],
        **group_settings(config, section.capacity),
        **window_settings(config.windows, config.teams_for("fairshare"), section.capacity),
    }


# ---------------------------------------------------------------------------
# Time windows: the values in force at a cycle's own clock


#: The planner's team fields a window may change (``teams[].windows.NAME``, in GPUs).
WINDOW_FIELDS = ("guarantee", "borrow_limit_percent", "borrow_limit")
#: How far back a cycle looks for the boundary at which a team's guarantee last rose: the
#: windows repeat every week, and a day more covers a daylight-saving shift of the boundary.
RISE_LOOKBACK = timedelta(days=8)


def window_settings(windows: Iterable[Window], teams: Iterable[Any], capacity: Mapping[str, int]) -> dict:
    """``{"windows": [...], "teams": [...]}`` to merge into the reclaim settings: the windows as
    the config writes them, and each team's entry (:func:`team_settings`) with, under
    ``windows``, its :data:`WINDOW_FIELDS` in each window it gives values for, complete (worked
    out with the config's own reading of a window, ``team_in_window``). ``{}`` without windows:
    the settings stay as they were."""
    windows = tuple(windows)
    if not windows:
        return {}
    entries = []
    for team in teams:
        entry = team_settings(team, capacity)
        values = {}
        for window in windows:
            if window.name in (team.windows or {}):
                in_window = team_settings(team_in_window(team, window.name), capacity)
                values[window.name] = {k: in_window[k] for k in WINDOW_FIELDS if k in in_window}
        if values:
            entry["windows"] = values
        entries.append(entry)
    return {"windows": [window_mapping(w) for w in windows], "teams": entries}


_windows_read: dict[str, tuple[Window, ...]] = {}


def _windows_of(settings: Mapping) -> tuple[Window, ...]:
    """The settings' windows, read once per warm function (reading one checks its time zone)."""
    raw = settings.get("windows") or ()
    key = json.dumps(raw, sort_keys=True)
    if key not in _windows_read:
        _windows_read[key] = tuple(Window(**{**w, "days": tuple(w["days"])}) for w in raw)
    return _windows_read[key]


def _team_in(entry: Mapping, window: str | None) -> dict:
    """A settings team entry with its values in ``window`` (None: the base), without its windows."""
    out = {k: v for k, v in entry.items() if k != "windows"}
    values = (entry.get("windows") or {}).get(window) if window is not None else None
    if values:
        for key in WINDOW_FIELDS:
            out.pop(key, None)
        out.update(values)
    return out


@dataclass(frozen=True)
class InForce:
    """The reclaim settings at one instant.

    :ivar settings: the settings with each team's values in force (no ``windows`` left).
    :ivar window: the window open (None: the base, or no windows).
    :ivar rises: team -> the last instant (seconds since the epoch, within
        :data:`RISE_LOOKBACK`) at which its guarantee rose; a team whose guarantee did not
        rise is absent.
    """

    settings: dict
    window: str | None = None
    rises: dict = field(default_factory=dict)


def in_force(settings: Mapping, now: float) -> InForce:
    """The values in force at ``now`` (seconds since the epoch): the window open then
    (:func:`~cdk_gpu_share.core.configuration.windows.window_at`) and each team's values in it,
    and each team's last rise of its guarantee, at a boundary
    (:func:`~cdk_gpu_share.core.configuration.windows.boundaries`) where some resource of it went
    up. Settings without windows come back as they are."""
    windows = _windows_of(settings)
    if not windows:
        return InForce(settings=dict(settings))
    t = datetime.fromtimestamp(now, timezone.utc)
    open_now = window_at(windows, t)
    name = open_now.name if open_now is not None else None
    teams = settings.get("teams") or ()
    out = {k: v for k, v in settings.items() if k != "windows"}
    out["teams"] = [_team_in(entry, name) for entry in teams]
    rises: dict[str, float] = {}
    changes = boundaries(windows, t - RISE_LOOKBACK, t + timedelta(microseconds=1))
    for (_, before), (at, after) in zip(changes, changes[1:]):
        for entry in teams:
            old = _team_in(entry, before.name if before else None)["guarantee"]
            new = _team_in(entry, after.name if after else None)["guarantee"]
            if any(float(v) > float(old.get(r, 0)) + 1e-9 for r, v in new.items()):
                rises[entry["name"]] = at.timestamp()
    return InForce(settings=out, window=name, rises=rises)


def with_rises(state: Mapping, rises: Mapping[str, float]) -> dict:
    """The planner's ``state`` with each pending job of a team whose guarantee rose counted from
    the later of its submission and the rise (its ``since``): a lender whose guarantee rose
    reclaims ``reclaim_after_seconds`` after the rise, not after a submission made before it."""
    if not rises:
        return dict(state)
    jobs = []
    for job in state["jobs"]:
        rise = rises.get(job["team"])
        if rise is not None and job["state"] == "pending" and job["since"] < rise:
            job = {**job, "since": rise}
        jobs.append(job)
    return {**state, "jobs": jobs}


_PACKED = "z:"


def encode_settings(settings: Mapping, *, pack_above: int = 2048) -> str:
    """Compact JSON; zlib + base64 (prefixed ``z:``) when longer than ``pack_above`` characters."""
    text = json.dumps(settings, separators=(",", ":"), sort_keys=True)
    if len(text) <= pack_above:
        return text
    return _PACKED + base64.b64encode(zlib.compress(text.encode(), 9)).decode()


def decode_settings(text: str) -> dict:
    """The inverse of :func:`encode_settings`."""
    if text.startswith(_PACKED):
        text = zlib.decompress(base64.b64decode(text[len(_PACKED):])).decode()
    return json.loads(text)


# ---------------------------------------------------------------------------
# Calls with retry


_THROTTLE_CODES = {
    "Throttling", "ThrottlingException", "ThrottledException", "TooManyRequestsException",
    "RequestLimitExceeded", "SlowDown", "RequestThrottled", "RequestThrottledException",
    # DynamoDB's throttling (the requeue ledger): answered with HTTP 400, so only the code tells.
    "ProvisionedThroughputExceededException",
}


#: Network failures botocore raises (its own retries are off in the Lambda). A request that
#: could not connect was never received; one whose answer timed out or was cut may have been applied.
_NOT_SENT_ERRORS = ("EndpointConnectionError", "ConnectTimeoutError")
_LOST_ANSWER_ERRORS = ("ReadTimeoutError", "ConnectionClosedError")


def _error_names(error: Exception) -> set[str]:
    return {c.__name__ for c in type(error).__mro__}


def _status_and_code(error: Exception) -> tuple[int, str]:
    response = getattr(error, "response", None)
    if not isinstance(response, Mapping):
        return 0, ""
    code = response.get("Error", {}).get("Code", "") or ""
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0
    return status, code


def is_retryable(error: Exception) -> bool:
    """Throttling (any throttling code, or HTTP 429), server errors (HTTP 5xx,
    ``ServerException``) and network errors (connect and read timeouts, refused or
    closed connections)."""
    if _error_names(error) & set(_NOT_SENT_ERRORS + _LOST_ANSWER_ERRORS):
        return True
    status, code = _status_and_code(error)
    return code in _THROTTLE_CODES or code == "ServerException" or status == 429 or status >= 500


def may_have_applied(error: Exception) -> bool:
    """Whether a failed state-changing request may nevertheless have been applied.

    A server error (5xx) may come after the change was made, and a read timeout or a
    closed connection loses the answer of a request the service may have received.
    Throttling and a failed connection mean the request was not applied.
    """
    if _error_names(error) & set(_LOST_ANSWER_ERRORS):
        return True
    status, code = _status_and_code(error)
    if code in _THROTTLE_CODES or status == 429:
        return False
    return code == "ServerException" or status >= 500


def call_with_retry(
    client: Any,
    operation: str,
    *,
    max_attempts: int = 6,
    base_delay: float = 0.2,
    max_delay: float = 5.0,
    sleep: Callable[[float], None] | None = None,
    counter: dict | None = None,
    before_retry: Callable[[Exception, dict], dict | None] | None = None,
    **params: Any,
) -> dict:
    """``client.<operation>(**params)``, retried on throttling, server and network errors.

    Full-jitter exponential backoff (``base_delay * 2**attempt``, capped at
    ``max_delay``), at most ``max_attempts`` calls; other errors are raised at once.
    ``counter`` (operation -> calls) counts every request sent.

    ``before_retry(error, params)`` is required of a state-changing call: it runs
    when a failed request :func:`may_have_applied`, re-reads what the request
    changes, and returns the response to use (the change is done), or ``None`` to
    retry with ``params`` (which it may narrow, say to the jobs not yet stopped), or
    raises (the caller cannot tell, and must not retry blindly).
    """
    method = getattr(client, _snake(operation))
    sleep = sleep or time.sleep  # looked up at call time (tests replace it)
    attempt = 0
    while True:
        if counter is not None:
            counter[operation] = counter.get(operation, 0) + 1
        try:
            return method(**params)
        except Exception as exc:  # botocore ClientError or network error; anything else is not retryable
            attempt += 1
            if not is_retryable(exc):
                raise
            if before_retry is not None and may_have_applied(exc):
                done = before_retry(exc, params)
                if done is not None:
                    return done
            if attempt >= max_attempts:
                raise
            sleep(random.uniform(0, min(max_delay, base_delay * 2 ** attempt)))


def _snake(operation: str) -> str:
    out = []
    for i, c in enumerate(operation):
        if c.isupper() and i:
            out.append("_")
        out.append(c.lower())
    return "".join(out)


# ---------------------------------------------------------------------------
# Reading the queue


#: Jobs a :class:`DescribeCache` holds by default (a few hundred bytes each).
CACHE_MAX_JOBS = 50_000


@dataclass(frozen=True)
class JobFacts:
    """What never changes about a job once submitted, as ``DescribeJobs`` gave it.

    No status, no times but ``createdAt``: the state of a job always comes from the
    listing of the cycle. ``terminated`` is the one fact that is only ever set (a stop
    or a cancel, once requested, is never withdrawn).
    """

    job_id: str
    name: str
    share: str
    gpus: float
    priority: int
    definition: str
    created_at: float | None
    tags: tuple = ()
    terminated: bool = False


def facts_of(job: Mapping) -> JobFacts:
    """The :class:`JobFacts` of a ``DescribeJobs`` detail."""
    priority = job.get("schedulingPriority", 0)
    return JobFacts(
        job_id=job["jobId"],
        name=job.get("jobName", ""),
        share=job.get("shareIdentifier") or "",
        gpus=gpus_of(job),
        priority=int(priority) if isinstance(priority, (int, float)) else 0,
        definition=job.get("jobDefinition", ""),
        created_at=job.get("createdAt"),
        tags=tuple(sorted((job.get("tags") or {}).items())),
        terminated=bool(job.get("isTerminated") or job.get("isCancelled")),
    )


class DescribeCache:
    """The immutable facts of the jobs a warm Lambda has described, so that a cycle
    describes only the jobs it has not seen.

    Bounded (``max_jobs``; the oldest entries go first), for one queue (a read of
    another queue empties it), and pruned on every read to the jobs that read listed:
    a job that left RUNNABLE/STARTING/RUNNING is forgotten. Never a source of state:
    status and start time come from each cycle's listing.
    """

    def __init__(self, max_jobs: int = CACHE_MAX_JOBS) -> None:
        if max_jobs < 0:
            raise ValueError(f"max_jobs must be 0 or more, not {max_jobs!r}")
        self.max_jobs = max_jobs
        self.queue: str | None = None
        self._facts: dict[str, JobFacts] = {}

    def __len__(self) -> int:
        return len(self._facts)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._facts

    def get(self, job_id: str) -> JobFacts | None:
        return self._facts.get(job_id)

    def clear(self) -> None:
        self._facts.clear()
        self.queue = None

    def for_queue(self, queue: str) -> DescribeCache:
        if self.queue != queue:
            self._facts.clear()
            self.queue = queue
        return self

    def put(self, facts: JobFacts) -> None:
        old = self._facts.get(facts.job_id)
        if old is not None and old.terminated and not facts.terminated:
            facts = JobFacts(**{**facts.__dict__, "terminated": True})
        self._facts[facts.job_id] = facts

    def mark_terminated(self, job_ids: Iterable[str]) -> None:
        """Record that a stop was requested for these jobs (by this function)."""
        for jid in job_ids:
            old = self._facts.get(jid)
            if old is not None and not old.terminated:
                self._facts[jid] = JobFacts(**{**old.__dict__, "terminated": True})

    def tag(self, job_id: str, key: str, value: str) -> None:
        """Record that this function set tag ``key`` on the job (its next cycle reads it here)."""
        old = self._facts.get(job_id)
        if old is not None:
            tags = tuple(sorted({**dict(old.tags), key: value}.items()))
            self._facts[job_id] = JobFacts(**{**old.__dict__, "tags": tags})

    def forget(self, job_ids: Iterable[str]) -> None:
        """Drop these jobs (their next read describes them again)."""
        for jid in job_ids:
            self._facts.pop(jid, None)

    def keep_only(self, listed: Iterable[str]) -> None:
        """Forget the jobs not in ``listed``, then the oldest entries above ``max_jobs``."""
        keep = set(listed)
        self._facts = {jid: f for jid, f in self._facts.items() if jid in keep}
        extra = len(self._facts) - self.max_jobs
        if extra > 0:
            for jid in list(self._facts)[:extra]:
                del self._facts[jid]


@dataclass
class QueueSnapshot:
    """One read of the queue.

    :ivar state: the reclaim planner's input state (the documented JSON).
    :ivar jobs: job id -> the job's :class:`JobFacts`, for every job in ``state``.
    :ivar team_of_share: share identifier -> team name (configured teams).
    :ivar unknown_shares: share identifiers no configured team has (their jobs go to a
        stand-in team ``share:<id>`` with no guarantee, which lends and borrows).
    :ivar calls: API operation -> requests sent (retries included).
    :ivar described: jobs described by this read (the others came from the cache).
    :ivar unrecorded: with the checkpoint-aware victim order, the running jobs whose run
        carries no ``borrowed`` record yet: :class:`Unrecorded` (the cycle records them).
    :ivar bad_checkpoint_tags: (job id, value) of the jobs described by this read whose
        checkpoint tag is no interval (ignored: their team's default applies).
    """

    state: dict
    jobs: dict = field(default_factory=dict)
    team_of_share: dict = field(default_factory=dict)
    unknown_shares: list = field(default_factory=list)
    calls: dict = field(default_factory=dict)
    described: int = 0
    unrecorded: list = field(default_factory=list)
    bad_checkpoint_tags: list = field(default_factory=list)


@dataclass(frozen=True)
class Unrecorded:
    """A run the reclaimer has not recorded yet: its job, the job's ARN (TagResource takes
    it) and the run's ``startedAt`` in milliseconds (what tells one run from the next)."""

    job_id: str
    arn: str | None
    started_ms: int


def checkpoint_of(tags: Mapping[str, str]) -> tuple[int | float | None, str | None]:
    """A job's checkpoint interval from its :data:`TAG_CHECKPOINT`: ``(seconds, None)``;
    ``(None, None)`` without the tag; ``(None, value)`` when the value is no interval
    (a decimal number of seconds, 0 to :data:`MAX_CHECKPOINT_SECONDS`)."""
    raw = tags.get(TAG_CHECKPOINT)
    if raw is None:
        return None, None
    text = str(raw).strip()
    if not re.fullmatch(r"\d{1,7}(\.\d{1,6})?", text) or float(text) > MAX_CHECKPOINT_SECONDS:
        return None, str(raw)
    return _num(float(text)), None


def borrowed_record(tags: Mapping[str, str], started_ms: int) -> bool | None:
    """What :data:`TAG_BORROWED` says of the run started at ``started_ms`` (None: nothing,
    or a record of an earlier run of the job)."""
    started, _, value = str(tags.get(TAG_BORROWED, "")).partition(":")
    if started != str(started_ms) or value not in ("true", "false"):
        return None
    return value == "true"


def borrowed_tag(started_ms: int, borrowed: bool) -> str:
    """The value of :data:`TAG_BORROWED` for a run: ``<startedAt ms>:true|false``."""
    return f"{started_ms}:{'true' if borrowed else 'false'}"


def read_queue(
    client: Any,
    queue: str,
    settings: Mapping,
    now: float,
    *,
    sleep: Callable[[float], None] | None = None,
    cache: DescribeCache | None = None,
) -> QueueSnapshot:
    """Read ``queue`` (name or ARN) and build the planner's state.

    :param client: a boto3 ``batch`` client.
    :param settings: the reclaim settings (:func:`settings_from_config`); ``queue``
        there is ignored in favour of the argument.
    :param now: the time in seconds since the epoch (the state's ``now``).
    :param sleep: used between retries (tests pass a no-op).
    :param cache: the warm Lambda's :class:`DescribeCache`; only jobs it does not
        hold are described (all of them without one).

    ``ListJobs`` is called per status (RUNNABLE, STARTING, RUNNING) with 1,000 jobs
    a page; ``DescribeJobs`` in batches of 100 gives each new job's GPUs, share
    identifier and scheduling priority. A job's state is its listed status (the last
    one, if a job moved between the lists while they were read), or its described
    status when this read described it (fresher); a described job that
    ``DescribeJobs`` no longer returns, or that has left those statuses meanwhile, is
    dropped. A job being terminated or cancelled (``isTerminated``, ``isCancelled``
    in its summary or detail, or stopped by this function) is marked ``terminating``.
    Times: a running job's ``since`` is ``startedAt`` (``now`` while STARTING), a
    pending job's is ``createdAt``.
    """
    calls: dict = {}
    listed = _list_jobs(client, queue, sleep, calls)
    cache = cache.for_queue(queue) if cache is not None else None
    new = [jid for jid in listed if cache is None or jid not in cache]
    details = _describe_jobs(client, new, sleep, calls)

    teams = [dict(t) for t in settings.get("teams", ())]
    team_of_share = {t.get("share_identifier") or share_identifier(t["name"]): t["name"] for t in teams}
    # A team's priorities count no higher than its max_priority (IAM cannot cap SubmitJob's):
    # a job submitted at 9999 cannot shift reclaim onto other teams' jobs.
    priority_cap = {t["name"]: t.get("max_priority", DEFAULT_MAX_PRIORITY) for t in teams}
    jobs_out: list[dict] = []
    kept: dict[str, JobFacts] = {}
    unknown: dict[str, str] = {}
    checkpoint_order = (settings.get("settings") or {}).get("victim_order") == "checkpoint"
    unrecorded: list[Unrecorded] = []
    bad_tags: list[tuple[str, str]] = []
    for jid, summary in listed.items():
        seen = _job_facts(jid, summary, details.get(jid), cache)
        if seen is None:
            continue
        facts, job_state, started = seen
        team = team_of_share.get(facts.share)
        if team is None:
            team = unknown.setdefault(facts.share, UNKNOWN_SHARE_PREFIX + facts.share)
        job = _planner_job(jid, summary, facts, job_state, started, team, priority_cap, now)
        if checkpoint_order and job_state == "running":
            status = (details.get(jid) or summary).get("status")
            arn = summary.get("jobArn") or (details.get(jid) or {}).get("jobArn") or _job_arn(queue, jid)
            _checkpoint_inputs(job, arn, status, facts, started, jid in details, unrecorded, bad_tags)
        jobs_out.append(job)
        kept[jid] = facts
    if cache is not None:
        cache.keep_only(listed)

    for name in unknown.values():
        teams.append({"name": name, "guarantee": {RESOURCE: 0}})
    planner_teams = [{k: v for k, v in t.items() if k not in ("share_identifier", "max_priority", "windows")}
                     for t in teams]
    state = {
        "now": now,
        "capacity": dict(settings.get("capacity") or {RESOURCE: 0}),
        "settings": dict(settings.get("settings") or {}),
        "teams": planner_teams,
        "jobs": jobs_out,
    }
    if settings.get("groups"):
        state["groups"] = [dict(g) for g in settings["groups"]]
    return QueueSnapshot(
        state=state,
        jobs=kept,
        team_of_share=team_of_share,
        unknown_shares=sorted(unknown),
        calls=calls,
        described=len(new),
        unrecorded=unrecorded,
        bad_checkpoint_tags=bad_tags,
    )


def _job_arn(queue: str, job_id: str) -> str | None:
    """A job's ARN from its queue's (same partition, region and account), when the queue is an ARN."""
    if not queue.startswith("arn:") or ":job-queue/" not in queue:
        return None
    return queue.split(":job-queue/", 1)[0] + f":job/{job_id}"


def _checkpoint_inputs(job: dict, arn: str | None, status: Any, facts: JobFacts, started: Any, described: bool,
                       unrecorded: list[Unrecorded], bad_tags: list[tuple[str, str]]) -> None:
    """A running job's ``checkpoint_seconds`` (its tag, as first described) and ``borrowed`` (the
    reclaimer's record of this run), for the checkpoint-aware order; a RUNNING run without a
    record joins ``unrecorded`` (a STARTING one may still show its previous attempt's start)."""
    tags = dict(facts.tags)
    interval, bad = checkpoint_of(tags)
    if interval is not None:
        job["checkpoint_seconds"] = interval
    elif bad is not None and described:
        bad_tags.append((job["id"], bad))
    if not started or status != "RUNNING":
        return  # STARTING: no run to record yet (derived from the state meanwhile)
    recorded = borrowed_record(tags, int(started))
    if recorded is not None:
        job["borrowed"] = recorded
    elif not job["terminating"] and arn:
        unrecorded.append(Unrecorded(job["id"], arn, int(started)))


def _list_jobs(client: Any, queue: str, sleep: Callable[[float], None] | None, calls: dict) -> dict[str, Mapping]:
    """Job id -> its last summary over the listed statuses (dict order: first listed)."""
    listed: dict[str, Mapping] = {}
    for status, _ in STATUSES:
        token = None
        tokens_seen: set[str] = set()
        while True:
            params: dict[str, Any] = {"jobQueue": queue, "jobStatus": status, "maxResults": LIST_PAGE_SIZE}
            if token:
                params["nextToken"] = token
            page = call_with_retry(client, "ListJobs", sleep=sleep, counter=calls, **params)
            for summary in page.get("jobSummaryList", ()):
                listed[summary["jobId"]] = {**summary, "status": summary.get("status") or status}
            token = page.get("nextToken")
            if not token or token in tokens_seen:
                break  # a token seen before would read the same pages again
            tokens_seen.add(token)
    return listed


def _describe_jobs(client: Any, job_ids: list[str], sleep: Callable[[float], None] | None, calls: dict) -> dict[str, dict]:
    """Job id -> its DescribeJobs detail, in batches of :data:`DESCRIBE_BATCH`."""
    details: dict[str, dict] = {}
    for i in range(0, len(job_ids), DESCRIBE_BATCH):
        batch = job_ids[i:i + DESCRIBE_BATCH]
        response = call_with_retry(client, "DescribeJobs", sleep=sleep, counter=calls, jobs=batch)
        for job in response.get("jobs", ()):
            details[job["jobId"]] = job
    return details


def _job_facts(jid: str, summary: Mapping, detail: dict | None, cache: Any) -> tuple[JobFacts, str, Any] | None:
    """A listed job's facts, planner state and start time: from its detail when this read described
    it (fresher), else from the cache and its summary; None when it is gone or left the statuses."""
    state_of = dict(STATUSES)
    if detail is not None:
        facts = facts_of(detail)
        if cache is not None:
            cache.put(facts)
            facts = cache.get(jid) or facts
        job_state = state_of.get(detail.get("status", ""))
        started = detail.get("startedAt") or summary.get("startedAt")
    else:
        cached = cache.get(jid) if cache is not None else None
        if cached is None:
            return None  # finished (and aged out) between the listing and the describe
        facts = cached
        job_state = state_of.get(summary.get("status", ""))
        started = summary.get("startedAt")
    if job_state is None:
        return None  # left RUNNABLE/STARTING/RUNNING meanwhile
    return facts, job_state, started


def _planner_job(jid: str, summary: Mapping, facts: JobFacts, job_state: str, started: Any, team: str,
                 priority_cap: Mapping[str, int], now: float) -> dict:
    """The planner's job: a running job counts from ``startedAt``, a pending one from ``createdAt``."""
    if job_state == "running":
        since = started / 1000.0 if started else now
    else:
        created = facts.created_at or summary.get("createdAt")
        since = created / 1000.0 if created else now
    return {
        "id": jid,
        "team": team,
        "state": job_state,
        "demand": {RESOURCE: facts.gpus},
        "priority": min(facts.priority, priority_cap.get(team, DEFAULT_MAX_PRIORITY)),
        "since": since,
        "terminating": bool(facts.terminated or summary.get("isTerminated") or summary.get("isCancelled")),
    }


def read_queue_state(client: Any, queue: str, settings: Mapping, now: float, **kwargs: Any) -> dict:
    """The planner's input state of ``queue`` (see :func:`read_queue`)."""
    return read_queue(client, queue, settings, now, **kwargs).state


def minimum_calls(jobs_by_status: Mapping[str, int], victims: int, *, new_jobs: int | None = None) -> int:
    """The fewest requests one reclaim cycle can make: a ListJobs page per 1,000 jobs of
    each status (at least one), a DescribeJobs per 100 jobs not seen before (``new_jobs``;
    every job on a cold start) and a TerminateJobs per 50 victims."""
    pages = sum(max(1, math.ceil(jobs_by_status.get(s, 0) / LIST_PAGE_SIZE)) for s, _ in STATUSES)
    total = sum(jobs_by_status.get(s, 0) for s, _ in STATUSES)
    described = total if new_jobs is None else new_jobs
    return pages + math.ceil(described / DESCRIBE_BATCH) + math.ceil(victims / 50)
