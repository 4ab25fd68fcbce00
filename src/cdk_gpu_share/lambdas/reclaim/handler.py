"""The reclaim Lambda: take lent GPUs back on a classic AWS Batch fair-share queue.

One *cycle* (on a schedule, and on every "Batch Job State Change" event that makes
a job of the queue RUNNABLE):

1. read the queue (:func:`cdk_gpu_share.aws.batch_reader.read_queue`: ListJobs per
   status, paginated; DescribeJobs 100 at a time);
2. plan with :func:`cdk_gpu_share.core.reclaim.plan`, the one implementation of the
   reclaim contract;
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
timeout and tags, plus ``gpu-share:requeued-from``). A job the reclaimer stopped is
therefore never lost; a job that ends on its own before the stop takes effect
(SUCCEEDED, or failed for another reason) is not resubmitted. Requeue is idempotent
(an event delivered twice, or retried by Lambda, finds the job tagged
``gpu-share:requeued-from`` and submits nothing) and ignores dry run (resubmitting
stops nothing, and skipping it would lose the job). A job that cannot be
resubmitted (array child, multi-node, EKS) raises, so the event, which holds the
whole job, lands in the on-failure destination and raises the alarm.

Faults: throttling and 5xx are retried with backoff; a job that finished between
the listing and the stop is no error (``TerminateJobs`` reports it successful; a
per-job ``TerminateJob`` error is logged); a partial ``TerminateJobs`` failure is
logged and the rest proceeds; any exception is raised only after a log line that
lists what was and was not stopped.

Environment: ``GPU_SHARE_QUEUE`` (the queue's ARN), ``GPU_SHARE_SETTINGS`` (the reclaim
settings, :func:`cdk_gpu_share.aws.batch_reader.encode_settings`), optional
``GPU_SHARE_DRY_RUN`` (``true``: log the plan, stop nothing; overrides the settings).
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from cdk_gpu_share.aws import batch_reader as br
from cdk_gpu_share.core import metrics, reclaim

#: TerminateJobs takes at most 50 jobs.
TERMINATE_BATCH = 50
#: Stop starting calls when fewer seconds than this are left before the Lambda times out.
DEADLINE_MARGIN_SECONDS = 15
#: Longest reason written on a stopped job; longer lists of beneficiaries are cut with "+N more".
MAX_REASON = 1024
#: A RUNNABLE event is skipped when a cycle started at least this long after it (event
#: times have whole seconds, and ListJobs may trail the event by a moment).
EVENT_MARGIN_SECONDS = 2.0
#: Environment variable names Batch reserves (never copied into a resubmission).
_RESERVED_ENV_PREFIX = "AWS_BATCH"

_client: Any = None
_last_cycle_started: float = 0.0


class ReclaimError(RuntimeError):
    """A cycle or a requeue that could not finish; the log line before it says what was done."""


# ---------------------------------------------------------------------------
# Entry point


def handler(event: Mapping, context: Any = None) -> dict:
    """Lambda entry point: a requeue for a FAILED reclaim event, a cycle otherwise."""
    global _last_cycle_started
    queue = os.environ["GPU_SHARE_QUEUE"]
    settings = br.decode_settings(os.environ["GPU_SHARE_SETTINGS"])
    dry = os.environ.get("GPU_SHARE_DRY_RUN")
    dry_run = settings.get("dry_run", False) if dry is None else dry.strip().lower() in ("1", "true", "yes")
    client = _batch_client()
    detail = event.get("detail") if isinstance(event, Mapping) else None
    if isinstance(detail, Mapping) and detail.get("status") == "FAILED":
        return requeue(client, detail, queue=queue, dry_run=dry_run)
    if isinstance(detail, Mapping) and detail.get("status") == "RUNNABLE":
        happened = _event_time(event)
        if happened is not None and happened + EVENT_MARGIN_SECONDS <= _last_cycle_started:
            log("cycle_skipped", reason="a cycle that started after this event already ran",
                job=detail.get("jobId"))
            return {"skipped": True}
    started = time.time()
    time_left = (lambda: context.get_remaining_time_in_millis() / 1000) if context is not None else None
    result = run_cycle(client, queue, settings, now=started, dry_run=dry_run, time_left=time_left)
    _last_cycle_started = started
    return result


def _batch_client() -> Any:
    global _client
    if _client is None:
        import boto3
        from botocore.config import Config

        # Retries are ours (batch_reader.call_with_retry), so botocore makes one attempt.
        _client = boto3.client("batch", config=Config(retries={"total_max_attempts": 1, "mode": "standard"},
                                                       connect_timeout=5, read_timeout=30))
    return _client


def _event_time(event: Mapping) -> float | None:
    text = event.get("time")
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def log(event: str, level: str = "INFO", **fields: Any) -> None:
    """One structured log line (JSON)."""
    print(json.dumps({"level": level, "event": event, **fields}, default=str, separators=(",", ":")))
    sys.stdout.flush()


# ---------------------------------------------------------------------------
# The cycle


def run_cycle(
    client: Any,
    queue: str,
    settings: Mapping,
    *,
    now: float,
    dry_run: bool = False,
    sleep: Callable[[float], None] = time.sleep,
    emit: Callable[[str], None] | None = None,
    time_left: Callable[[], float] | None = None,
) -> dict:
    """Read, plan, stop, report. Returns a summary (also logged).

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
        snapshot = br.read_queue(client, queue, settings, now, sleep=sleep)
        calls = snapshot.calls
        if snapshot.unknown_shares:
            log("unknown_shares", "WARNING", shares=snapshot.unknown_shares,
                fix="give every share identifier a team in the platform config")
        plan = reclaim.plan(snapshot.state)
        victims = plan["preemptions"]
        log("plan", queue=queue_name, dry_run=dry_run, jobs=len(snapshot.state["jobs"]),
            preemptions=victims, served=len(plan["served"]), waiting=len(plan["waiting"]))
        if victims and not dry_run:
            team_of = {j["id"]: j["team"] for j in snapshot.state["jobs"]}
            # The lists fill as calls return, so a failure mid-way still logs what was stopped.
            terminate(client, victims, sleep=sleep, counter=calls, beneficiary_team=team_of,
                      stopped=stopped, not_stopped=not_stopped, time_left=time_left)
    except Exception as exc:
        done = set(stopped) | {n["job"] for n in not_stopped}
        log("cycle_failed", "ERROR", queue=queue_name, error=f"{type(exc).__name__}: {exc}",
            stopped=stopped, not_stopped=not_stopped + [{"job": v["job"], "error": "not attempted"}
                                                        for v in victims if v["job"] not in done])
        _emit_queue_metrics(queue_name, errors=1, ms=(time.monotonic() - t0) * 1000, emit=emit)
        raise
    failed_calls = [n for n in not_stopped if n.get("fatal")]
    summary = {
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
    sleep: Callable[[float], None] = time.sleep,
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
    counter = counter if counter is not None else {}
    victims = [dict(v) for v in victims]
    for v in victims:
        if v.get("beneficiary") is not None and "beneficiary_team" not in v:
            v["beneficiary_team"] = (beneficiary_team or {}).get(v["beneficiary"], "?")
    stopped = stopped if stopped is not None else []
    not_stopped = not_stopped if not_stopped is not None else []

    def out_of_time(rest: Sequence[Mapping]) -> bool:
        if time_left is None or time_left() >= DEADLINE_MARGIN_SECONDS:
            return False
        log("deadline", "WARNING", reason="the Lambda's time is nearly up; the next cycle plans again",
            not_attempted=[v["job"] for v in rest])
        not_stopped.extend({"job": v["job"], "error": "not attempted: the Lambda's time ran out"} for v in rest)
        return True

    if "TerminateJobs" in client.meta.service_model.operation_names:
        for i in range(0, len(victims), TERMINATE_BATCH):
            if out_of_time(victims[i:]):
                break
            chunk = victims[i:i + TERMINATE_BATCH]
            ids = [v["job"] for v in chunk]
            try:
                response = br.call_with_retry(client, "TerminateJobs", sleep=sleep, counter=counter,
                                              jobs=ids, reason=reason_for(chunk))
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                log("terminate_failed", "ERROR", jobs=ids, error=error)
                not_stopped += [{"job": j, "error": error, "fatal": True} for j in ids]
                continue
            errors = {e.get("job"): e for e in response.get("errors") or ()}
            for j in ids:
                if j in errors:
                    e = errors[j]
                    entry = {"job": j, "error": f"{e.get('code', '')}: {e.get('message', '')}".strip()}
                    if _denied_text(entry["error"]):
                        entry["fatal"] = True  # e.g. a job without the queue tag: operators must know
                    not_stopped.append(entry)
                else:
                    stopped.append(j)
            if errors:
                log("terminate_partial", "WARNING", errors=list(errors.values()), stopped=len(ids) - len(errors))
    else:
        log("terminate_fallback", reason="this botocore has no TerminateJobs; one TerminateJob per victim",
            victims=len(victims))
        for k, v in enumerate(victims):
            if out_of_time(victims[k:]):
                break
            try:
                br.call_with_retry(client, "TerminateJob", sleep=sleep, counter=counter,
                                   jobId=v["job"], reason=reason_for([v]))
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                retryable = br.is_retryable(exc)
                log("terminate_job_failed", "ERROR" if retryable else "WARNING", job=v["job"], error=error)
                entry = {"job": v["job"], "error": error}
                if retryable or _denied(exc):
                    entry["fatal"] = True
                not_stopped.append(entry)
                continue
            stopped.append(v["job"])
    return stopped, not_stopped


def _denied_text(text: str) -> bool:
    lowered = text.lower()
    return "accessdenied" in lowered or "not authorized" in lowered or "unauthorized" in lowered


def _denied(exc: Exception) -> bool:
    response = getattr(exc, "response", None) or {}
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0
    return status in (401, 403) or "AccessDenied" in response.get("Error", {}).get("Code", "")


# ---------------------------------------------------------------------------
# Requeue


def requeue(client: Any, detail: Mapping, *, queue: str, dry_run: bool = False,
            sleep: Callable[[float], None] = time.sleep) -> dict:
    """Resubmit a job the reclaimer stopped (``detail``: the event's job detail).

    Idempotent: EventBridge delivers an event at least once and Lambda retries a
    failed invocation, so a job this queue already holds with the tag
    ``gpu-share:requeued-from=<job id>`` (:func:`find_requeued`) means the job was
    resubmitted and nothing is submitted again. Dry run does not apply: a job the
    reclaimer stopped (before dry run was switched on) is resubmitted all the same,
    or it would be lost.
    """
    job_id = detail.get("jobId")
    reason = detail.get("statusReason") or ""
    if not reason.startswith(br.RECLAIM_REASON_PREFIX):
        log("requeue_skipped", job=job_id, reason="not stopped by the reclaimer", status_reason=reason)
        return {"requeued": None}
    if not _same_queue(detail.get("jobQueue", ""), queue):
        log("requeue_skipped", job=job_id, reason="job of another queue", job_queue=detail.get("jobQueue"))
        return {"requeued": None}
    try:
        params = submit_params(detail)
    except ValueError as exc:
        log("requeue_failed", "ERROR", job=job_id, error=str(exc), detail=detail)
        raise ReclaimError(f"job {job_id} was stopped by the reclaimer but cannot be resubmitted: {exc}") from None
    try:
        existing = find_requeued(client, detail, sleep=sleep)
    except Exception as exc:
        log("requeue_failed", "ERROR", job=job_id, error=f"{type(exc).__name__}: {exc}", submit=params,
            step="looking for an earlier resubmission")
        raise
    if existing is not None:
        log("requeue_skipped", job=job_id, reason="already resubmitted", new_job=existing)
        return {"requeued": existing, "from": job_id, "duplicate": True}
    try:
        response = br.call_with_retry(client, "SubmitJob", sleep=sleep, **params)
    except Exception as exc:
        log("requeue_failed", "ERROR", job=job_id, error=f"{type(exc).__name__}: {exc}", submit=params)
        raise
    new_id = response.get("jobId")
    log("requeued", job=job_id, new_job=new_id, job_name=params["jobName"], share=params.get("shareIdentifier"),
        dry_run=dry_run)
    return {"requeued": new_id, "from": job_id}


#: How far before the stopped job's ``stoppedAt`` a resubmission is looked for (clock slack).
REQUEUE_LOOKBACK_MS = 60_000


def find_requeued(client: Any, detail: Mapping, *, sleep: Callable[[float], None] = time.sleep) -> str | None:
    """The id of a job of the queue resubmitted from ``detail``'s job, if there is one.

    ``ListJobs`` filtered by the job's name (newest first, so the listing stops at
    the first job created before the stopped one stopped), then ``DescribeJobs`` of
    the candidates for the tag ``gpu-share:requeued-from``.
    """
    job_id = detail["jobId"]
    name = detail["jobName"]
    stopped_at = detail.get("stoppedAt")
    since = stopped_at - REQUEUE_LOOKBACK_MS if stopped_at else detail.get("createdAt") or 0
    candidates: list[str] = []
    token = None
    while True:
        params: dict[str, Any] = {"jobQueue": detail["jobQueue"], "maxResults": br.DESCRIBE_BATCH,
                                  "filters": [{"name": "JOB_NAME", "values": [name]}]}
        if token:
            params["nextToken"] = token
        page = br.call_with_retry(client, "ListJobs", sleep=sleep, **params)
        older = False
        for s in page.get("jobSummaryList", ()):
            if (s.get("createdAt") or 0) < since:
                older = True
            elif s["jobId"] != job_id and s.get("jobName") == name:
                candidates.append(s["jobId"])
        token = page.get("nextToken")
        if older or not token:
            break
    for i in range(0, len(candidates), br.DESCRIBE_BATCH):
        response = br.call_with_retry(client, "DescribeJobs", sleep=sleep, jobs=candidates[i:i + br.DESCRIBE_BATCH])
        for job in response.get("jobs", ()):
            if (job.get("tags") or {}).get(br.TAG_REQUEUED_FROM) == job_id:
                return job["jobId"]
    return None


def _same_queue(a: str, b: str) -> bool:
    return a == b or a.rsplit("/", 1)[-1] == b.rsplit("/", 1)[-1]


def submit_params(detail: Mapping) -> dict:
    """``SubmitJob`` parameters that recreate the job of ``detail`` (a ``DescribeJobs`` detail)."""
    if detail.get("arrayProperties", {}).get("index") is not None:
        raise ValueError("it is a child of an array job; resubmit the array job")
    if detail.get("arrayProperties", {}).get("size"):
        raise ValueError("it is an array job")
    if detail.get("nodeProperties") or detail.get("eksProperties"):
        raise ValueError("multi-node and EKS jobs are not resubmitted")
    params: dict[str, Any] = {
        "jobName": detail["jobName"],
        "jobQueue": detail["jobQueue"],
        "jobDefinition": detail["jobDefinition"],
    }
    if detail.get("shareIdentifier"):
        params["shareIdentifier"] = detail["shareIdentifier"]
    if detail.get("schedulingPriority") is not None:
        params["schedulingPriorityOverride"] = detail["schedulingPriority"]
    if detail.get("parameters"):
        params["parameters"] = dict(detail["parameters"])
    container = detail.get("container") or {}
    overrides: dict[str, Any] = {}
    if container.get("command"):
        overrides["command"] = list(container["command"])
    env = [e for e in container.get("environment") or () if not str(e.get("name", "")).startswith(_RESERVED_ENV_PREFIX)]
    if env:
        overrides["environment"] = env
    if container.get("resourceRequirements"):
        overrides["resourceRequirements"] = list(container["resourceRequirements"])
    if overrides:
        params["containerOverrides"] = overrides
    if detail.get("ecsProperties") and not container:
        raise ValueError("ECS task-properties jobs are not resubmitted")
    if detail.get("retryStrategy"):
        params["retryStrategy"] = detail["retryStrategy"]
    if detail.get("timeout"):
        params["timeout"] = detail["timeout"]
    if detail.get("propagateTags") is not None:
        params["propagateTags"] = bool(detail["propagateTags"])
    consumable = detail.get("consumableResourceProperties")
    if consumable:
        params["consumableResourcePropertiesOverride"] = consumable
    tags = {k: v for k, v in (detail.get("tags") or {}).items() if not k.startswith("aws:")}
    tags.setdefault(br.TAG_QUEUE, detail["jobQueue"].rsplit("/", 1)[-1])
    tags[br.TAG_REQUEUED_FROM] = detail["jobId"]
    params["tags"] = tags
    return params


# ---------------------------------------------------------------------------
# Metrics (CloudWatch embedded metric format)


def _emf(dimensions: Mapping[str, str], values: Mapping[str, tuple[float, str]], emit, **properties: Any) -> None:
    record: dict[str, Any] = {
        "_aws": {
            "Timestamp": int(time.time() * 1000),
            "CloudWatchMetrics": [{
                "Namespace": metrics.NAMESPACE,
                "Dimensions": [list(dimensions)],
                "Metrics": [{"Name": name, "Unit": unit} for name, (_, unit) in values.items()],
            }],
        },
        **dimensions,
        **{name: value for name, (value, _) in values.items()},
        **properties,
    }
    (emit or _print)(json.dumps(record, separators=(",", ":")))


def _print(line: str) -> None:
    print(line)
    sys.stdout.flush()


def _emit_queue_metrics(queue: str, *, errors: int, ms: float, emit=None) -> None:
    _emf({metrics.DIM_QUEUE: queue},
         {metrics.CYCLE_ERRORS: (errors, "Count"), metrics.CYCLE_DURATION_MS: (round(ms, 3), "Milliseconds")}, emit)


def _emit_team_metrics(queue: str, snapshot, plan, stopped: Sequence[str], now: float, emit=None) -> None:
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
