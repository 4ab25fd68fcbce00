"""The reclaim Lambda: take lent GPUs back on a classic AWS Batch fair-share queue.

One *cycle* (on a schedule, and on every "Batch Job State Change" event that makes
a job of the queue RUNNABLE):

1. read the queue (:func:`cdk_gpu_share.aws.batch_reader.read_queue`: ListJobs per
   status, paginated; DescribeJobs 100 at a time), with each team's values in force at the
   cycle's own clock when the settings have time windows
   (:func:`cdk_gpu_share.aws.batch_reader.in_force`: the window open then; a pending job of a
   team whose guarantee rose counts its wait from the later of its submission and the rise);
2. plan with :func:`cdk_gpu_share.core.policy.reclaim.plan`, the one implementation of the
   reclaim planner's rules;
3. stop the victims with ``TerminateJobs`` (50 a call), whose reason starts with
   ``GpuShare reclaim`` and names the beneficiary jobs and teams -- or, when the
   runtime's botocore has no ``TerminateJobs``, with one ``TerminateJob`` per victim
   (deliberate fallback, tested);
4. log the plan as one JSON line and emit per-team metrics in CloudWatch embedded
   metric format (EMF), written as JSON on standard output with the standard library:
   the handler ships without third-party packages (no Docker, no pip at synth), and
   EMF is the same format aws-lambda-powertools' ``Metrics`` writes.

**Requeue.** AWS Batch does not retry a job stopped by ``TerminateJob`` ("jobs that
are canceled or terminated aren't retried", AWS Batch user guide, *Automated job
retries*), whatever its retry strategy says. So the same function also receives the
"Batch Job State Change" event of each job that FAILED with a ``GpuShare reclaim``
reason, and resubmits it (same name, queue, job definition revision, share
identifier, scheduling priority, parameters, container overrides, retry strategy,
timeout and tags, plus ``gpu-share:requeued-from``), exactly once, through the requeue
ledger; every scheduled cycle also finishes the requeues the ledger holds open. How, and
what that rests on: :mod:`cdk_gpu_share.lambdas.reclaim.requeue`. A job that ends on its
own before the stop takes effect (SUCCEEDED, or failed for another reason) is not
resubmitted. Requeue ignores dry run (resubmitting stops nothing, and skipping it would
lose the job).

Faults: throttling, 5xx and network errors (timeouts, refused or closed connections)
are retried with backoff; a stop that may have been applied (a 5xx or a lost answer)
is re-read with ``DescribeJobs`` and retried only for jobs neither stopping nor ended;
a job that finished between the listing and the stop is no error (``TerminateJobs``
reports it successful; a per-job ``TerminateJob`` error is logged); a partial
``TerminateJobs`` failure is logged and the rest proceeds; any exception is raised only
after a log line that lists what was and was not stopped.

Warm cycles: the immutable facts of every job described (GPUs, share, priority,
definition, tags at submission) stay in a bounded module-level cache
(:class:`~cdk_gpu_share.aws.batch_reader.DescribeCache`), so a cycle describes only
new jobs; status and times always come from the cycle's listing.

Environment: ``GPU_SHARE_QUEUE`` (the queue's ARN), ``GPU_SHARE_SETTINGS`` (the reclaim
settings, :func:`cdk_gpu_share.aws.batch_reader.encode_settings`), ``GPU_SHARE_REQUEUE_TABLE``
(the requeue ledger, with its index of open records), optional
``GPU_SHARE_DRY_RUN`` (``true``: log the plan, stop nothing; overrides the settings).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cdk_gpu_share.aws import batch_reader as br
from cdk_gpu_share.core.policy import reclaim
from cdk_gpu_share.core.records import metrics
from cdk_gpu_share.lambdas.reclaim.requeue import (  # noqa: F401 - the requeue's names, importable from here
    DEFAULT_INVOCATION_SECONDS,
    FAILURE_LIMIT,
    FAILURE_QUEUE_ENV,
    FIND_PAGE_LIMIT,
    FIND_SECONDS,
    LEDGER_TTL_SECONDS,
    LISTING_SETTLE_SECONDS,
    RECONCILE_LIMIT,
    REFUSAL_LIMIT,
    REQUEUE_TABLE_ENV,
    TAG_REQUEUE_ATTEMPT,
    Ledger,
    ReclaimError,
    find_requeued,
    log,
    reconcile,
    record_stops,
    requeue,
    submit_params,
)

#: TerminateJobs takes at most 50 jobs.
TERMINATE_BATCH = 50
#: Stop starting calls when fewer seconds than this are left before the Lambda times out.
DEADLINE_MARGIN_SECONDS = 15
#: At most this many runs are recorded per cycle (one TagResource each, one attempt): the rest
#: are recorded by the next cycles, and the requeues the cycle finishes never wait for them.
RECORD_LIMIT = 100
#: Recording stops when fewer seconds than this are left: the requeues go first.
RECORD_RESERVE_SECONDS = 45
#: Longest reason written on a stopped job; longer lists of beneficiaries are cut with "+N more".
MAX_REASON = 1024
#: A RUNNABLE event is skipped when a cycle started at least this long after it (event
#: times have whole seconds, and ListJobs may trail the event by a moment).
EVENT_MARGIN_SECONDS = 2.0
#: Job statuses in which a stop still has something to stop.
_ACTIVE = {"SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING"}

_client: Any = None
_dynamodb: Any = None
_sqs: Any = None
_last_cycle_started: float = 0.0
#: Immutable facts of the jobs this (warm) function has described: a cycle describes only new jobs.
_cache = br.DescribeCache()
#: The clock (tests replace it with a simulated one).
_now: Callable[[], float] = time.time


# ---------------------------------------------------------------------------
# Entry point


def handler(event: Mapping, context: Any = None) -> dict:
    """Lambda entry point: a requeue for a FAILED reclaim event, a cycle otherwise.

    A cycle also finishes the requeues its ledger holds open (:func:`reconcile`), after
    its stops, whether or not the stops succeeded."""
    global _last_cycle_started
    queue = os.environ["GPU_SHARE_QUEUE"]
    settings = br.decode_settings(os.environ["GPU_SHARE_SETTINGS"])
    dry = os.environ.get("GPU_SHARE_DRY_RUN")
    dry_run = settings.get("dry_run", False) if dry is None else dry.strip().lower() in ("1", "true", "yes")
    client = _batch_client()
    detail = event.get("detail") if isinstance(event, Mapping) else None
    time_left = (lambda: context.get_remaining_time_in_millis() / 1000) if context is not None else None
    queue_name = settings.get("queue") or queue.rsplit("/", 1)[-1]
    table = os.environ.get(REQUEUE_TABLE_ENV)
    ledger = Ledger(_dynamodb_client(), table, queue_name) if table else None
    if isinstance(detail, Mapping) and detail.get("status") == "FAILED":
        return requeue(client, detail, queue=queue, ledger=ledger, clock=_now, time_left=time_left)
    if isinstance(detail, Mapping) and detail.get("status") == "RUNNABLE":
        happened = _event_time(event)
        if happened is not None and happened + EVENT_MARGIN_SECONDS <= _last_cycle_started:
            log("cycle_skipped", reason="a cycle that started after this event already ran",
                job=detail.get("jobId"))
            return {"skipped": True}
    started = _now()
    try:
        result = run_cycle(client, queue, settings, now=started, dry_run=dry_run, time_left=time_left, cache=_cache,
                           ledger=ledger, clock=_now)
    finally:
        requeues = _reconcile(client, ledger, queue_name, time_left, notify=_failure_notifier())
    _last_cycle_started = started
    result["requeues"] = requeues
    lasting = [e for e in requeues.get("errors", ()) if not e["transient"]]
    if lasting:
        raise ReclaimError(f"{len(lasting)} requeues could not be finished: "
                           + "; ".join(f"{e.get('job', 'ledger')}: {e['error']}" for e in lasting[:5]))
    return result


def _reconcile(client: Any, ledger: Ledger | None, queue_name: str, time_left: Callable[[], float] | None,
               emit: Callable[[str], None] | None = None, notify: Callable[[Mapping], None] | None = None) -> dict:
    """The cycle's part of requeue (see :func:`reconcile`) and its metric: how long past its
    settle time the oldest open requeue is (0 when none is)."""
    if ledger is None:
        return {}
    out = reconcile(client, ledger, clock=_now, time_left=time_left, notify=notify)
    _emf({metrics.DIM_QUEUE: queue_name},
         {metrics.REQUEUE_OLDEST_OPEN_SECONDS: (out["oldest_open_seconds"], "Seconds")}, emit)
    return out


def _new_client(service: str) -> Any:
    import boto3
    from botocore.config import Config

    # Retries are ours (batch_reader.call_with_retry: throttling, 5xx and network errors,
    # and a re-read before retrying a change that may have been applied), so botocore
    # makes one attempt.
    return boto3.client(service, config=Config(retries={"total_max_attempts": 1, "mode": "standard"},
                                               connect_timeout=5, read_timeout=30))


def _batch_client() -> Any:
    global _client
    if _client is None:
        _client = _new_client("batch")
    return _client


def _dynamodb_client() -> Any:
    global _dynamodb
    if _dynamodb is None:
        _dynamodb = _new_client("dynamodb")
    return _dynamodb


def _sqs_client() -> Any:
    global _sqs
    if _sqs is None:
        _sqs = _new_client("sqs")
    return _sqs


def _failure_notifier() -> Callable[[Mapping], None] | None:
    """Sends a requeue that needs a person to the on-failure queue (``None``: no queue configured).
    A send that fails is logged; the cycle raises for that requeue all the same (its alarm)."""
    url = os.environ.get(FAILURE_QUEUE_ENV)
    if not url:
        return None

    def notify(record: Mapping) -> None:
        try:
            br.call_with_retry(_sqs_client(), "SendMessage", QueueUrl=url, MessageBody=json.dumps(record))
        except Exception as exc:  # noqa: BLE001 - the error is raised by the cycle anyway
            log("failure_queue_send_failed", "ERROR", error=f"{type(exc).__name__}: {exc}", message=record)
    return notify


def _event_time(event: Mapping) -> float | None:
    text = event.get("time")
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


# ---------------------------------------------------------------------------
# The cycle


def run_cycle(
    client: Any,
    queue: str,
    settings: Mapping,
    *,
    now: float,
    dry_run: bool = False,
    sleep: Callable[[float], None] | None = None,
    emit: Callable[[str], None] | None = None,
    time_left: Callable[[], float] | None = None,
    cache: br.DescribeCache | None = None,
    ledger: Ledger | None = None,
    clock: Callable[[], float] | None = None,
) -> dict:
    """Read, plan, stop, report. Returns a summary (also logged).

    ``ledger`` (the requeue ledger): each victim's record is written before it is stopped,
    and a victim whose record cannot be written is not stopped (see
    :func:`~cdk_gpu_share.lambdas.reclaim.requeue.record_stops`).

    ``cache`` (the warm function's :class:`~cdk_gpu_share.aws.batch_reader.DescribeCache`)
    spares describing jobs an earlier cycle described; the jobs this cycle stops are
    marked terminating in it, and those whose stop is in doubt are dropped from it (the
    next cycle describes them again).

    ``time_left`` (seconds left before the Lambda's timeout) stops the cycle cleanly
    before the timeout would kill it mid-way: the victims not attempted are logged,
    and the next cycle plans again from the queue as it then is.
    """
    t0 = time.monotonic()
    queue_name = settings.get("queue") or queue.rsplit("/", 1)[-1]
    stopped: list[str] = []
    not_stopped: list[dict] = []
    victims: list[dict] = []
    calls: dict = {}
    snapshot = None
    plan = None
    try:
        # Time windows: the values in force at this cycle's own clock, nothing switched.
        force = br.in_force(settings, now)
        snapshot = br.read_queue(client, queue, force.settings, now, sleep=sleep, cache=cache)
        calls = snapshot.calls
        if snapshot.unknown_shares:
            log("unknown_shares", "WARNING", shares=snapshot.unknown_shares,
                fix="give every share identifier a team in the platform config")
        for jid, value in snapshot.bad_checkpoint_tags:
            log("checkpoint_tag_ignored", "WARNING", job=jid, value=value,
                fix=f"tag {br.TAG_CHECKPOINT} with the seconds between two checkpoints (0 to "
                    f"{br.MAX_CHECKPOINT_SECONDS}); the team's default applies meanwhile")
        new_runs = _borrowed_at_start(snapshot)
        plan = reclaim.plan(br.with_rises(snapshot.state, force.rises))
        victims = plan["preemptions"]
        windowed = {"window": force.window or "base"} if settings.get("windows") else {}
        log("plan", queue=queue_name, dry_run=dry_run, jobs=len(snapshot.state["jobs"]),
            preemptions=victims, served=len(plan["served"]), waiting=len(plan["waiting"]), **windowed)
        if victims and not dry_run:
            team_of = {j["id"]: j["team"] for j in snapshot.state["jobs"]}
            to_stop = _recorded(ledger, victims, now, clock, time_left, not_stopped)
            # The lists fill as calls return, so a failure mid-way still logs what was stopped.
            terminate(client, to_stop, sleep=sleep, counter=calls, beneficiary_team=team_of,
                      stopped=stopped, not_stopped=not_stopped, time_left=time_left)
        # A job being stopped needs no record (its run ends); in a dry run nothing is stopped.
        planned = set() if dry_run else {v["job"] for v in victims}
        record_runs(client, [(u, b) for u, b in new_runs if u.job_id not in planned], counter=calls,
                    cache=cache, time_left=time_left)
    except Exception as exc:
        _note_stops(cache, stopped, not_stopped, victims)
        done = set(stopped) | {n["job"] for n in not_stopped}
        log("cycle_failed", "ERROR", queue=queue_name, error=f"{type(exc).__name__}: {exc}",
            stopped=stopped, not_stopped=not_stopped + [{"job": v["job"], "error": "not attempted"}
                                                        for v in victims if v["job"] not in done])
        _emit_queue_metrics(queue_name, errors=1, ms=(time.monotonic() - t0) * 1000, emit=emit)
        raise
    _note_stops(cache, stopped, not_stopped, victims)
    failed_calls = [n for n in not_stopped if n.get("fatal")]
    summary: dict[str, Any] = {
        "queue": queue_name,
        "dry_run": dry_run,
        "planned": [v["job"] for v in victims],
        "stopped": stopped,
        "not_stopped": not_stopped,
        "calls": calls,
    }
    log("cycle_done", **summary)
    _emit_team_metrics(queue_name, snapshot, plan, stopped, now, emit=emit)
    _emit_queue_metrics(queue_name, errors=1 if failed_calls else 0, ms=(time.monotonic() - t0) * 1000, emit=emit)
    if failed_calls:
        raise ReclaimError(f"{len(failed_calls)} of {len(victims)} victims could not be stopped: "
                           + "; ".join(f"{n['job']}: {n['error']}" for n in failed_calls[:5]))
    return summary


def _borrowed_at_start(snapshot: br.QueueSnapshot) -> list[tuple[br.Unrecorded, bool]]:
    """Whether each run the reclaimer sees for the first time started on borrowed capacity,
    from the state of this cycle (the reclaim planner's documented rule: its team's running jobs
    started before it, and it, above the guarantee), written into the state's job so the
    plan uses it, and returned for :func:`record_runs`. Empty unless the victim order is
    ``checkpoint``."""
    if not snapshot.unrecorded:
        return []
    state = snapshot.state
    guarantee = {t["name"]: t.get("guarantee") or {} for t in state["teams"]}
    teams = [reclaim.TeamSpec(name, g) for name, g in guarantee.items()]
    running = [j for j in state["jobs"] if j["state"] == "running" and not j["terminating"]]
    derived = reclaim.borrowed_at_start(
        [reclaim.JobSpec(j["id"], j["team"], "running", j["demand"], since=j["since"]) for j in running], teams)
    by_id = {j["id"]: j for j in running}
    # What each team's runs already recorded as within the guarantee hold: a new run is recorded
    # within it only while they and it fit. (A listing that trails can show a run after a later
    # one; derived alone, both could be "within" and hold more than the guarantee together.)
    within: dict[str, dict[str, float]] = {}
    for j in running:
        if j.get("borrowed") is False:
            held = within.setdefault(j["team"], {})
            for r, d in j["demand"].items():
                held[r] = held.get(r, 0) + d
    out = []
    for u in sorted((u for u in snapshot.unrecorded if u.job_id in derived),
                    key=lambda u: (by_id[u.job_id]["since"], u.job_id)):
        job = by_id[u.job_id]
        borrowed = derived[u.job_id]
        if not borrowed:
            held = within.setdefault(job["team"], {})
            g = guarantee.get(job["team"], {})
            if any(d > reclaim.TOLERANCE and held.get(r, 0) + d > g.get(r, 0) + reclaim.TOLERANCE
                   for r, d in job["demand"].items()):
                borrowed = True
            else:
                for r, d in job["demand"].items():
                    held[r] = held.get(r, 0) + d
        job["borrowed"] = borrowed
        out.append((u, borrowed))
    return out


def record_runs(client: Any, runs: Sequence[tuple[br.Unrecorded, bool]], *, counter: dict | None = None,
                cache: br.DescribeCache | None = None, time_left: Callable[[], float] | None = None,
                limit: int | None = None) -> list[str]:
    """Tag each new run with whether it started on borrowed capacity (:data:`~cdk_gpu_share.aws.batch_reader.TAG_BORROWED`),
    so the record outlives this function (a cold start reads it back with DescribeJobs).
    Returns the jobs recorded.

    On the job rather than in the requeue ledger: a cycle reads it with the facts it
    already describes (no extra read, and nothing to expire), and it goes with the job
    (a resubmission, a new run, does not carry it). A record that cannot be written is
    logged, never fatal: the run is derived again, from the state, next cycle. Runs of the
    same cycle's victims are not recorded (they are stopping).

    Bounded, so that recording never holds up what matters more: at most ``limit`` (default
    :data:`RECORD_LIMIT`) runs a
    cycle, one attempt each, none once fewer than :data:`RECORD_RESERVE_SECONDS` are left
    (the requeues come next), and none after the first failure (throttling: the next cycle
    goes on).
    """
    limit = RECORD_LIMIT if limit is None else limit
    recorded: list[str] = []
    failed: list[dict] = []
    later = 0
    for i, (run, borrowed) in enumerate(runs):
        if i >= limit or (time_left is not None and time_left() < RECORD_RESERVE_SECONDS):
            later = len(runs) - i
            break
        value = br.borrowed_tag(run.started_ms, borrowed)
        try:
            br.call_with_retry(client, "TagResource", max_attempts=1, counter=counter,
                               resourceArn=run.arn, tags={br.TAG_BORROWED: value})
        except Exception as exc:  # noqa: BLE001 - a record is an optimisation of the next cycle, never fatal
            failed.append({"job": run.job_id, "error": f"{type(exc).__name__}: {exc}"})
            later = len(runs) - i - 1
            break
        recorded.append(run.job_id)
        if cache is not None:
            cache.tag(run.job_id, br.TAG_BORROWED, value)
    if recorded or failed or later:
        done = set(recorded)
        log("runs_recorded", recorded=len(recorded), borrowed=sum(1 for u, b in runs if b and u.job_id in done),
            failed=failed, left_for_next_cycles=later)
    return recorded


def _recorded(ledger: Ledger | None, victims: Sequence[Mapping], now: float, clock: Callable[[], float] | None,
              time_left: Callable[[], float] | None, not_stopped: list[dict]) -> Sequence[Mapping]:
    """The victims whose requeue record is written: no stop without its record (all of them without a ledger)."""
    if ledger is None:
        return victims
    at = clock() if clock is not None else now  # the stops follow the records, not the cycle's start
    budget = time_left() if time_left is not None else DEFAULT_INVOCATION_SECONDS
    return record_stops(ledger, victims, now=at, settle_after=at + budget + LISTING_SETTLE_SECONDS, not_stopped=not_stopped)


def _note_stops(cache: br.DescribeCache | None, stopped: Sequence[str], not_stopped: Sequence[Mapping],
                victims: Sequence[Mapping]) -> None:
    """Stopped jobs are terminating from now on; a job whose stop failed may have been
    stopped all the same (a lost answer), so its facts are read afresh next cycle."""
    if cache is None:
        return
    cache.mark_terminated(stopped)
    attempted = set(stopped)
    cache.forget(n["job"] for n in not_stopped if n["job"] not in attempted)


def reason_for(victims: Sequence[Mapping]) -> str:
    """The reason written on a group of victims: ``GpuShare reclaim`` and who gets the GPUs.

    Names each beneficiary job with its team (``for job J of team T``) and each team
    stopped for exceeding its borrow cap; cut at :data:`MAX_REASON` characters with
    ``+N more`` (the log line of the cycle has the exact victim -> beneficiary map).
    """
    parts: list[str] = []
    for v in victims:
        if v.get("reason") == "borrow_limit":
            part = f"team {v['team']} above its borrow limit"
        else:
            part = f"for job {v['beneficiary']} of team {v['beneficiary_team']}"
        if part not in parts:
            parts.append(part)
    text = br.RECLAIM_REASON_PREFIX + ": "
    for i, part in enumerate(parts):
        rest = len(parts) - i
        more = f" +{rest} more" if rest > 1 else ""
        if len(text) + len(part) + len(more) + 2 > MAX_REASON:
            return text.rstrip(", ") + f" +{rest} more"
        text += part + (", " if i < len(parts) - 1 else "")
    return text


def terminate(
    client: Any,
    victims: Sequence[Mapping],
    *,
    sleep: Callable[[float], None] | None = None,
    counter: dict | None = None,
    beneficiary_team: Mapping[str, str] | None = None,
    stopped: list[str] | None = None,
    not_stopped: list[dict] | None = None,
    time_left: Callable[[], float] | None = None,
) -> tuple[list[str], list[dict]]:
    """Stop ``victims`` (the plan's preemptions). Returns (stopped ids, not stopped).

    ``stopped`` / ``not_stopped``, when given, are filled in place as each call returns
    (and returned), so that a caller sees the progress made before an exception.

    Uses ``TerminateJobs`` (50 a call) when the client's service model has it, else one
    ``TerminateJob`` per victim. Each entry of *not stopped* is ``{"job", "error"}``,
    with ``"fatal": True`` when a whole call failed after its retries or a job was
    denied (say, a job without the ``gpu-share:queue`` tag); the cycle then raises
    once every other victim was tried. Other per-job errors (a job already gone) are
    logged, not fatal.
    """
    named: list[dict[str, Any]] = [dict(v) for v in victims]
    for v in named:
        if v.get("beneficiary") is not None and "beneficiary_team" not in v:
            v["beneficiary_team"] = (beneficiary_team or {}).get(v["beneficiary"], "?")
    stopper = _Stopper(client, sleep, counter if counter is not None else {}, time_left,
                       stopped if stopped is not None else [], not_stopped if not_stopped is not None else [])
    if "TerminateJobs" in client.meta.service_model.operation_names:
        stopper.in_batches(named)
    else:
        log("terminate_fallback", reason="this botocore has no TerminateJobs; one TerminateJob per victim",
            victims=len(named))
        stopper.one_by_one(named)
    return stopper.stopped, stopper.not_stopped


@dataclass
class _Stopper:
    """One :func:`terminate` call: the client, its retries and clock, and what it stopped so far."""

    client: Any
    sleep: Callable[[float], None] | None
    counter: dict
    time_left: Callable[[], float] | None
    stopped: list[str]
    not_stopped: list[dict]

    def out_of_time(self, rest: Sequence[Mapping]) -> bool:
        """Near the deadline the rest is not attempted: the next cycle plans again."""
        if self.time_left is None or self.time_left() >= DEADLINE_MARGIN_SECONDS:
            return False
        log("deadline", "WARNING", reason="the Lambda's time is nearly up; the next cycle plans again",
            not_attempted=[v["job"] for v in rest])
        self.not_stopped.extend({"job": v["job"], "error": "not attempted: the Lambda's time ran out"} for v in rest)
        return True

    def reread(self, ids_key: str) -> Callable[[Exception, dict], dict | None]:
        """Before retrying a stop that may have been applied: describe its jobs and
        retry only those neither being stopped nor ended (a job stopped twice would be
        stopped with a second reason, and counted twice)."""
        def before_retry(exc: Exception, params: dict) -> dict | None:
            ids = params[ids_key] if ids_key == "jobs" else [params[ids_key]]
            response = br.call_with_retry(self.client, "DescribeJobs", sleep=self.sleep, counter=self.counter, jobs=ids)
            found = {j["jobId"]: j for j in response.get("jobs", ())}
            left = [j for j in ids if j in found and not (found[j].get("isTerminated") or found[j].get("isCancelled"))
                    and found[j].get("status") in _ACTIVE]
            log("terminate_reread", "WARNING", error=f"{type(exc).__name__}: {exc}", jobs=ids,
                stopped_or_ended=[j for j in ids if j not in left], retry=left)
            if not left:
                return {"successful": [], "errors": []}
            if ids_key == "jobs":
                params["jobs"] = left
            return None
        return before_retry

    def in_batches(self, victims: list[dict[str, Any]]) -> None:
        """``TerminateJobs``, 50 jobs a call; a call failed after its retries makes its jobs fatal."""
        for i in range(0, len(victims), TERMINATE_BATCH):
            if self.out_of_time(victims[i:]):
                break
            chunk = victims[i:i + TERMINATE_BATCH]
            ids = [v["job"] for v in chunk]
            try:
                response = br.call_with_retry(self.client, "TerminateJobs", sleep=self.sleep, counter=self.counter,
                                              before_retry=self.reread("jobs"), jobs=ids, reason=reason_for(chunk))
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                log("terminate_failed", "ERROR", jobs=ids, error=error)
                self.not_stopped += [{"job": j, "error": error, "fatal": True} for j in ids]
                continue
            errors = {e.get("job"): e for e in response.get("errors") or ()}
            for j in ids:
                if j in errors:
                    e = errors[j]
                    entry = {"job": j, "error": f"{e.get('code', '')}: {e.get('message', '')}".strip()}
                    if _denied_text(entry["error"]):
                        entry["fatal"] = True  # e.g. a job without the queue tag: operators must know
                    self.not_stopped.append(entry)
                else:
                    self.stopped.append(j)
            if errors:
                log("terminate_partial", "WARNING", errors=list(errors.values()), stopped=len(ids) - len(errors))

    def one_by_one(self, victims: list[dict[str, Any]]) -> None:
        """``TerminateJob`` per victim (a botocore without ``TerminateJobs``)."""
        for k, v in enumerate(victims):
            if self.out_of_time(victims[k:]):
                break
            try:
                br.call_with_retry(self.client, "TerminateJob", sleep=self.sleep, counter=self.counter,
                                   before_retry=self.reread("jobId"), jobId=v["job"], reason=reason_for([v]))
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                retryable = br.is_retryable(exc)
                log("terminate_job_failed", "ERROR" if retryable else "WARNING", job=v["job"], error=error)
                entry = {"job": v["job"], "error": error}
                if retryable or _denied(exc):
                    entry["fatal"] = True
                self.not_stopped.append(entry)
                continue
            self.stopped.append(v["job"])


def _denied_text(text: str) -> bool:
    lowered = text.lower()
    return "accessdenied" in lowered or "not authorized" in lowered or "unauthorized" in lowered


def _denied(exc: Exception) -> bool:
    response = getattr(exc, "response", None) or {}
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0
    return status in (401, 403) or "AccessDenied" in response.get("Error", {}).get("Code", "")


# ---------------------------------------------------------------------------
# Metrics (CloudWatch embedded metric format)


def _emf(dimensions: Mapping[str, str], values: Mapping[str, tuple[float, str]],
         emit: Callable[[str], None] | None, **properties: Any) -> None:
    (emit or _print)(metrics.emf_line(dict(dimensions), dict(values), int(time.time() * 1000), **properties))


def _print(line: str) -> None:
    print(line)
    sys.stdout.flush()


def _emit_queue_metrics(queue: str, *, errors: int, ms: float, emit: Callable[[str], None] | None = None) -> None:
    _emf({metrics.DIM_QUEUE: queue},
         {metrics.CYCLE_ERRORS: (errors, "Count"), metrics.CYCLE_DURATION_MS: (round(ms, 3), "Milliseconds")}, emit)


def _emit_team_metrics(queue: str, snapshot: br.QueueSnapshot, plan: Mapping[str, Any], stopped: Sequence[str],
                       now: float, emit: Callable[[str], None] | None = None) -> None:
    state = snapshot.state
    teams = {t["name"]: t for t in state["teams"]}
    usage = {name: 0.0 for name in teams}
    pending = {name: 0 for name in teams}
    for job in state["jobs"]:
        if job["terminating"]:
            continue
        if job["state"] == "running":
            usage[job["team"]] += job["demand"].get(br.RESOURCE, 0)
        else:
            pending[job["team"]] += 1
    # The longest wait of a pending job within its team's guarantee (current usage).
    wait = {name: 0.0 for name in teams}
    specs = {name: reclaim.TeamSpec(name=name, guarantee=t["guarantee"]) for name, t in teams.items()}
    for job in state["jobs"]:
        if job["state"] != "pending" or job["terminating"]:
            continue
        team = job["team"]
        if reclaim.within_guarantee(job["demand"], specs[team], {br.RESOURCE: usage[team]}):
            wait[team] = max(wait[team], max(0.0, now - job["since"]))
    stopped_set = set(stopped)
    preempted = {name: 0 for name in teams}
    reclaimed: dict[str, set] = {name: set() for name in teams}
    team_of_job = {j["id"]: j["team"] for j in state["jobs"]}
    for v in plan["preemptions"]:
        if v["job"] in stopped_set:
            preempted[v["team"]] += 1
            if v.get("beneficiary"):
                reclaimed[team_of_job.get(v["beneficiary"], v["team"])].add(v["beneficiary"])
    for name in sorted(teams):
        g = teams[name]["guarantee"].get(br.RESOURCE, 0)
        _emf({metrics.DIM_QUEUE: queue, metrics.DIM_TEAM: name}, {
            metrics.USAGE: (usage[name], "Count"),
            metrics.GUARANTEE: (g, "Count"),
            metrics.BORROWED: (max(0.0, usage[name] - g), "Count"),
            metrics.PENDING: (pending[name], "Count"),
            metrics.PREEMPTIONS: (preempted[name], "Count"),
            metrics.RECLAIMS: (len(reclaimed[name]), "Count"),
            metrics.LENDER_WAIT_SECONDS: (round(wait[name], 3), "Seconds"),
        }, emit)
