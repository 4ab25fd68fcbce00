"""Requeue exactly once: resubmit every job the reclaimer stopped, once, with nobody on call.

AWS Batch does not retry a job stopped by ``TerminateJob``, so the reclaimer resubmits
each job it stopped. ``SubmitJob`` has no client token and ``ListJobs`` trails a
submission by seconds, so neither Batch call can say whether a job was already
resubmitted. The requeue ledger (:class:`Ledger`, a DynamoDB table only the reclaimer
writes) can, and the whole protocol rests on four rules:

* **No stop without a record.** Before the cycle stops a job, it writes the job's record
  (``stopping``), and a job whose record cannot be written is not stopped. The ledger
  therefore knows every job the reclaimer stopped, whether or not its FAILED event
  ever arrives or succeeds; and a FAILED event of a job it holds no record of is not the
  reclaimer's, whatever reason the job was stopped with (a team may stop its own job with
  the reclaimer's reason): it is logged and left alone.
* **One holder at a time.** A requeue is done by an *attempt* (a random id). The ledger
  names the attempt that may submit; a conditional write takes the record over from the
  stop, or from an earlier attempt, and only the holder calls ``SubmitJob``. Every attempt
  id ever named is kept (``attempts``) and tags the job it submits.
* **Settle time.** Each record says when whatever its attempt may have submitted is
  surely listed (``settleAfter``): at a take-over, the end of the invocation's time plus
  :data:`LISTING_SETTLE_SECONDS`. Nobody takes a record over before then, and a take-over
  first looks in ``ListJobs`` for the job of *every* earlier attempt. The settle time is
  moved earlier only when ``SubmitJob`` surely did nothing (throttled, refused, no
  connection); a call whose outcome is unknown (a 5xx, a lost answer, any other
  exception) only ever moves it to "now + settle".
* **The cycle finishes what an event could not.** A requeue never depends on its event:
  the scheduled cycle (every minute) finds the open records whose settle time has passed
  (a sparse index, oldest first, :data:`RECONCILE_LIMIT` a cycle) and finishes each: a
  stop still under way is waited for, a stop that did not happen closes the record, and
  a stopped job is resubmitted (the job of an earlier attempt is found, or the job is
  submitted once). The FAILED event is the fast path; an event invocation raises only
  for a job that cannot be resubmitted, or while the ledger is unreachable (and the
  cycle finishes that job anyway).

A record is closed without a resubmission (``skipped``) only once ``DescribeJobs`` shows
the job ended by itself, or active with no sign of a stop for
:data:`STOP_VISIBLE_SECONDS`; a FAILED event of the reclaimer's re-opens a ``skipped``
record, so a read that trailed the stop cannot lose the job. A resubmission Batch refuses
(a client error: a disabled queue, an inactive job definition) is tried again by the
cycle, :func:`refusal_backoff` apart; after :data:`REFUSAL_LIMIT` refusals, or at once
for a job that cannot be resubmitted at all, the record says ``refused`` and the cycle
puts a replayable event in the on-failure queue, where a person finds it.

The reclaimer runs with reserved concurrency 1, so an event's invocation and a cycle
never overlap; the conditions above keep the ledger right even if they did.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from cdk_gpu_share.aws import batch_reader as br

#: Environment variable naming the requeue ledger (a DynamoDB table).
REQUEUE_TABLE_ENV = "GPU_SHARE_REQUEUE_TABLE"
#: Seconds a job just submitted may take to appear in ``ListJobs`` (it lags by seconds).
LISTING_SETTLE_SECONDS = 60
#: Longest a requeue attempt can run when the Lambda's context does not say (its timeout).
DEFAULT_INVOCATION_SECONDS = 120
#: How long the ledger keeps a record (DynamoDB TTL): longer than an event can wait in
#: the on-failure queue (14 days) before an operator replays it.
LEDGER_TTL_SECONDS = 30 * 86_400
#: The sparse index of open records (partition: the queue, sort: ``settleAfter``).
OPEN_INDEX = br.LEDGER_OPEN_INDEX
#: Open records a cycle finishes at most (each costs about eight calls).
RECONCILE_LIMIT = 5
#: A cycle starts no requeue with fewer seconds than this left before the Lambda's timeout.
RECONCILE_MARGIN_SECONDS = 30
#: How far before the stopped job's ``stoppedAt`` a resubmission is looked for (clock slack).
REQUEUE_LOOKBACK_MS = 60_000
#: Seconds a record waits while ``DescribeJobs`` shows its job active with no sign of the
#: stop (the read can trail the stop) before it is closed as ``skipped``.
STOP_VISIBLE_SECONDS = 600
#: Refusals of a resubmission before it needs a person (the on-failure queue).
REFUSAL_LIMIT = 6
#: ``ListJobs`` pages (100 jobs each) a look for an earlier attempt's job reads at most.
FIND_PAGE_LIMIT = 20
#: Seconds a look for an earlier attempt's job may go on asking for pages.
FIND_SECONDS = 30
#: Failures to finish a record (any error but a refusal) before it needs a person (the
#: on-failure queue), :func:`refusal_backoff` apart: a record that keeps failing never holds
#: the head of the open records, so the cycle always gets to the others.
FAILURE_LIMIT = REFUSAL_LIMIT
#: Environment variable naming the on-failure queue (its URL).
FAILURE_QUEUE_ENV = "GPU_SHARE_FAILURE_QUEUE"
TAG_REQUEUE_ATTEMPT = br.TAG_REQUEUE_ATTEMPT
#: Environment variable names Batch reserves (never copied into a resubmission).
_RESERVED_ENV_PREFIX = "AWS_BATCH"
#: Job statuses in which a stop still has something to stop.
_ACTIVE = {"SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING"}


class ReclaimError(RuntimeError):
    """A cycle or a requeue that could not finish; the log line before it says what was done."""


def log(event: str, level: str = "INFO", **fields: Any) -> None:
    """One structured log line (JSON)."""
    print(json.dumps({"level": level, "event": event, **fields}, default=str, separators=(",", ":")))
    sys.stdout.flush()


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def refusal_backoff(refusals: int) -> float:
    """Seconds before a refused resubmission is tried again: 5 minutes, doubling, at most an hour
    (the first five refusals span about two hours, time for a person to fix the cause)."""
    return float(min(300 * 2 ** max(refusals - 1, 0), 3600))


# ---------------------------------------------------------------------------
# The ledger


class Ledger:
    """The requeue ledger: one DynamoDB item per job the reclaimer stopped, keyed by its id.

    Item: ``jobId`` (key); ``status``: ``stopping`` (the cycle is stopping the job; no
    attempt yet), ``claimed`` (a requeue under way), ``submitted`` (done: ``newJob``),
    ``refused`` (Batch refused the resubmission :data:`REFUSAL_LIMIT` times, or the job
    cannot be resubmitted: ``error``; a replay of its event tries again) or ``skipped``
    (the job was not stopped by the reclaimer after all; a FAILED event of the
    reclaimer's re-opens it); ``since`` (when the record was opened), ``attempt`` (the
    holder), ``attempts`` (every attempt id ever named), ``settleAfter``, ``refusals``,
    ``openQueue`` (present while ``stopping`` or ``claimed``: the key of the sparse
    :data:`OPEN_INDEX`) and ``expiresAt`` (TTL, moved on by every write of an open
    record). Every write is conditional (on the attempt, or on ``stopping`` for a record
    with no attempt yet) and safe to repeat; a write whose answer was lost is recognised
    on retry by the item it left. Reads are consistent.
    """

    STOPPING = "stopping"
    CLAIMED = "claimed"
    SUBMITTED = "submitted"
    REFUSED = "refused"
    SKIPPED = "skipped"

    def __init__(self, client: Any, table: str, queue: str, *, sleep: Callable[[float], None] | None = None) -> None:
        self.client = client
        self.table = table
        self.queue = queue
        self.sleep = sleep

    def _call(self, operation: str, **params: Any) -> dict:
        return br.call_with_retry(self.client, operation, sleep=self.sleep, TableName=self.table, **params)

    def _conditional(self, operation: str, **params: Any) -> dict | None:
        """A conditional write: ``None`` when applied, else the item as it is (``{}``: none)."""
        try:
            self._call(operation, ReturnValuesOnConditionCheckFailure="ALL_OLD", **params)
        except Exception as exc:
            if _error_code(exc) != "ConditionalCheckFailedException":
                raise
            return getattr(exc, "response", {}).get("Item") or {}
        return None

    @staticmethod
    def record(item: Mapping | None) -> dict | None:
        """A DynamoDB item as plain values (``None`` for no item)."""
        if not item:
            return None
        out: dict[str, Any] = {}
        for key, value in item.items():
            if "S" in value:
                out[key] = value["S"]
            elif "N" in value:
                out[key] = float(value["N"])
            elif "SS" in value:
                out[key] = sorted(value["SS"])
        return out

    def get(self, job_id: str) -> dict | None:
        response = self._call("GetItem", Key={"jobId": {"S": job_id}}, ConsistentRead=True)
        return self.record(response.get("Item"))

    def stopping(self, job_id: str, *, now: float, settle_after: float) -> bool:
        """Record that the cycle is about to stop ``job_id`` (before it does). False when the
        ledger already holds a requeue of it (the job must not be stopped again)."""
        item = {
            "jobId": {"S": job_id}, "status": {"S": self.STOPPING}, "settleAfter": {"N": _n(settle_after)},
            "since": {"N": _n(now)}, "openQueue": {"S": self.queue}, "expiresAt": {"N": _expires(now)},
        }
        current = self._conditional(
            "PutItem", Item=item, ConditionExpression="attribute_not_exists(jobId) OR #status IN (:stopping, :skipped)",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={":stopping": {"S": self.STOPPING}, ":skipped": {"S": self.SKIPPED}})
        return current is None

    def reopen(self, job_id: str, attempt: str, *, now: float, settle_after: float) -> bool:
        """Make ``attempt`` the holder of a ``skipped`` record (a FAILED event of the
        reclaimer's shows the job was stopped after all). Nothing was submitted for a
        ``skipped`` record, so nothing needs looking for."""
        current = self._conditional(
            "UpdateItem", Key={"jobId": {"S": job_id}},
            UpdateExpression="SET attempt = :new, settleAfter = :settle, #status = :claimed, openQueue = :queue,"
                             " since = :now, expiresAt = :expires ADD attempts :added REMOVE #error",
            ConditionExpression="#status = :skipped",
            ExpressionAttributeNames={"#status": "status", "#error": "error"},
            ExpressionAttributeValues={
                ":new": {"S": attempt}, ":settle": {"N": _n(settle_after)}, ":claimed": {"S": self.CLAIMED},
                ":skipped": {"S": self.SKIPPED}, ":queue": {"S": self.queue}, ":now": {"N": _n(now)},
                ":expires": {"N": _expires(now)}, ":added": {"SS": [attempt]},
            },
        )
        return current is None or (current.get("attempt") or {}).get("S") == attempt

    def take_over(self, job_id: str, old_attempt: str, attempt: str, *, settle_after: float) -> bool:
        """Make ``attempt`` the holder in place of ``old_attempt`` (whose record is
        ``claimed`` past its settle time, or ``refused``)."""
        current = self._conditional(
            "UpdateItem", Key={"jobId": {"S": job_id}},
            UpdateExpression="SET attempt = :new, settleAfter = :settle, #status = :claimed, openQueue = :queue"
                             " ADD attempts :added",
            ConditionExpression="attempt = :old AND #status IN (:claimed, :refused)",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":new": {"S": attempt}, ":old": {"S": old_attempt}, ":settle": {"N": _n(settle_after)},
                ":claimed": {"S": self.CLAIMED}, ":refused": {"S": self.REFUSED}, ":queue": {"S": self.queue},
                ":added": {"SS": [attempt]},
            },
        )
        return current is None or (current.get("attempt") or {}).get("S") == attempt

    def take_over_stop(self, job_id: str, attempt: str, *, settle_after: float) -> bool:
        """Make ``attempt`` the first holder of a record no attempt has held: ``stopping`` (its
        job has stopped), or ``refused`` before any attempt (a replay of its event)."""
        current = self._conditional(
            "UpdateItem", Key={"jobId": {"S": job_id}},
            UpdateExpression="SET attempt = :new, settleAfter = :settle, #status = :claimed, openQueue = :queue"
                             " ADD attempts :added",
            ConditionExpression="#status IN (:stopping, :refused) AND attribute_not_exists(attempt)",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":new": {"S": attempt}, ":settle": {"N": _n(settle_after)}, ":claimed": {"S": self.CLAIMED},
                ":stopping": {"S": self.STOPPING}, ":refused": {"S": self.REFUSED}, ":queue": {"S": self.queue},
                ":added": {"SS": [attempt]},
            },
        )
        return current is None or (current.get("attempt") or {}).get("S") == attempt

    def _mine(self, job_id: str, attempt: str, expression: str, values: dict, names: dict | None = None) -> bool:
        """A write conditional on ``attempt`` holding the record ("": a ``stopping`` record, no holder)."""
        names = {"#status": "status", **(names or {})}
        if attempt:
            condition, mine = "attempt = :mine", {":mine": {"S": attempt}}
        else:
            condition, mine = "#status = :stopping AND attribute_not_exists(attempt)", {":stopping": {"S": self.STOPPING}}
        if "#status" not in expression and attempt:
            names.pop("#status")
        current = self._conditional(
            "UpdateItem", Key={"jobId": {"S": job_id}}, UpdateExpression=expression,
            ConditionExpression=condition, ExpressionAttributeValues={**mine, **values},
            **({"ExpressionAttributeNames": names} if names else {}))
        return current is None

    def settle_after(self, job_id: str, attempt: str, when: float) -> bool:
        """Our attempt submitted nothing that ``ListJobs`` will not show by ``when``."""
        return self._logged(job_id, attempt, "settle time", self._mine(
            job_id, attempt, "SET settleAfter = :settle, expiresAt = :expires",
            {":settle": {"N": _n(when)}, ":expires": {"N": _expires(when)}}))

    def refused_again(self, job_id: str, attempt: str, when: float, reason: str) -> bool:
        """Batch refused ``attempt``'s resubmission (it made nothing): count it, try again at ``when``."""
        return self._logged(job_id, attempt, "refusal", self._mine(
            job_id, attempt, "SET settleAfter = :settle, expiresAt = :expires, #error = :error ADD refusals :one",
            {":settle": {"N": _n(when)}, ":expires": {"N": _expires(when)}, ":error": {"S": reason[:1000]},
             ":one": {"N": "1"}}, {"#error": "error"}))

    def failed_again(self, job_id: str, attempt: str, when: float, reason: str, *, counted: bool = True) -> bool:
        """Finishing the record failed (an error, not a refusal): look again at ``when``, and
        count it unless the error was transient."""
        return self._logged(job_id, attempt, "failure", self._mine(
            job_id, attempt, "SET settleAfter = :settle, expiresAt = :expires, #error = :error"
                             + (" ADD failures :one" if counted else ""),
            {":settle": {"N": _n(when)}, ":expires": {"N": _expires(when)}, ":error": {"S": reason[:1000]},
             **({":one": {"N": "1"}} if counted else {})}, {"#error": "error"}))

    @staticmethod
    def _logged(job_id: str, attempt: str, what: str, applied: bool) -> bool:
        if not applied:  # harmless (the holder's write stands), but worth a line when tracing a job
            log("ledger_write_skipped", job=job_id, attempt=attempt, write=what,
                reason="another attempt holds the record now")
        return applied

    def submitted(self, job_id: str, attempt: str, new_job: str) -> bool:
        """The requeue is done: ``new_job`` is the resubmission (found or made by ``attempt``)."""
        return self._logged(job_id, attempt, "submitted", self._mine(
            job_id, attempt, "SET #status = :done, newJob = :new REMOVE openQueue",
            {":done": {"S": self.SUBMITTED}, ":new": {"S": new_job}}, {"#status": "status"}))

    def close(self, job_id: str, attempt: str, status: str, reason: str, *, failures: int | None = None) -> bool:
        """End the requeue without a resubmission (``refused`` or ``skipped``); ``failures``, when
        given, is the count of failed finishes the record ends with (the one that closed it too)."""
        counted = {":failures": {"N": str(failures)}} if failures is not None else {}
        return self._logged(job_id, attempt, status, self._mine(
            job_id, attempt, "SET #status = :status, #error = :error"
                             + (", failures = :failures" if counted else "") + " REMOVE openQueue",
            {":status": {"S": status}, ":error": {"S": reason[:1000]}, **counted},
            {"#status": "status", "#error": "error"}))

    def due(self, now: float, limit: int = RECONCILE_LIMIT) -> list[tuple[str, float]]:
        """Open records whose settle time has passed, oldest first: ``(jobId, settleAfter)``."""
        response = self._call(
            "Query", IndexName=OPEN_INDEX, Limit=limit, ScanIndexForward=True,
            KeyConditionExpression="openQueue = :queue AND settleAfter <= :now",
            ExpressionAttributeValues={":queue": {"S": self.queue}, ":now": {"N": _n(now)}})
        return [(i["jobId"]["S"], float(i["settleAfter"]["N"])) for i in response.get("Items", ())]


def _n(value: float) -> str:
    return repr(round(float(value), 3))


def _tries(n: int) -> str:
    return f"{n} try" if n == 1 else f"{n} tries"


def _expires(now: float) -> str:
    return str(int(now + LEDGER_TTL_SECONDS))


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    return (response or {}).get("Error", {}).get("Code", "") if isinstance(response, Mapping) else ""


# ---------------------------------------------------------------------------
# One requeue


class Requeue:
    """What every requeue needs: the clients, the ledger, the clock and the time left."""

    def __init__(self, client: Any, ledger: Ledger, *, clock: Callable[[], float] = time.time,
                 time_left: Callable[[], float] | None = None,
                 sleep: Callable[[float], None] | None = None,
                 notify: Callable[[Mapping], None] | None = None) -> None:
        self.client = client
        self.ledger = ledger
        self.clock = clock
        self.time_left = time_left
        self.sleep = sleep
        #: Puts a requeue that needs a person in the on-failure queue (the cycle's; an event's
        #: invocation raises instead, and Lambda puts the event there itself).
        self.notify = notify
        #: Whether this run has sent ``SubmitJob`` (until then, it has made nothing to look for).
        self.submitting = False
        #: Whether the last stopped job read is still being stopped by Batch.
        self._waiting = False
        #: The ledger's record of the requeue being driven.
        self._record: Mapping = {}
        #: The attempt holding that record as this run left it ("": a stop record nobody took over).
        self.holder = ""

    def settle_time(self) -> float:
        """When whatever an attempt started now may submit is surely listed."""
        budget = self.time_left() if self.time_left is not None else DEFAULT_INVOCATION_SECONDS
        return self.clock() + budget + LISTING_SETTLE_SECONDS

    def drive(self, job_id: str, record: Mapping, attempt: str) -> dict:
        """Bring ``job_id``'s requeue to an end from ``record`` (the ledger's), as ``attempt``.

        Returns ``{"requeued": new job or None, ...}``; ``deferred`` when the requeue is
        not over yet (another attempt may still submit, or the stop is under way: the
        cycle finishes it after its settle time). Raises :class:`ReclaimError` for a job
        that cannot be resubmitted (the record says ``refused``), and lets a dependency's
        error through (the record is untouched, or says when to look again).
        """
        self._record = record
        self.holder = record.get("attempt", "")
        status = record.get("status")
        if status == Ledger.SUBMITTED:
            log("requeue_skipped", job=job_id, reason="already resubmitted", new_job=record.get("newJob"))
            return {"requeued": record.get("newJob"), "from": job_id, "duplicate": True}
        if status == Ledger.SKIPPED:
            return {"requeued": None}
        holder = record.get("attempt", "")
        if holder != attempt and status == Ledger.CLAIMED and self.clock() < record.get("settleAfter", 0):
            log("requeue_deferred", job=job_id, attempt=holder, settle_after=record.get("settleAfter"),
                reason="another attempt holds it; the scheduled cycle finishes it after its settle time")
            return {"requeued": None, "from": job_id, "deferred": True}
        job = self._stopped_job(job_id, holder, status)
        if job is None:
            return {"requeued": None, "from": job_id, "deferred": True} if self._waiting else {"requeued": None}
        params = self._params(job, holder)
        if holder != attempt:
            earlier = {holder, *record.get("attempts", ())} - {""}
            found = find_requeued(self.client, job, earlier, sleep=self.sleep, clock=self.clock) if earlier else None
            if found is not None:
                self.ledger.submitted(job_id, holder, found)
                log("requeue_skipped", job=job_id, reason="an earlier attempt resubmitted it", new_job=found)
                return {"requeued": found, "from": job_id, "duplicate": True}
            taken = (self.ledger.take_over_stop(job_id, attempt, settle_after=self.settle_time())
                     if not holder else
                     self.ledger.take_over(job_id, holder, attempt, settle_after=self.settle_time()))
            if not taken:
                log("requeue_deferred", job=job_id, reason="another attempt took it over")
                return {"requeued": None, "from": job_id, "deferred": True}
            self.holder = attempt
        return self._submit(job, params, attempt)

    def _stopped_job(self, job_id: str, holder: str, status: str | None) -> dict | None:
        """The stopped job as ``DescribeJobs`` has it; ``None`` when there is nothing to
        resubmit now: a stop still under way, or not yet visible (``_waiting``: the record's
        settle time moves on), or a job Batch shows not stopped by the reclaimer (the record
        is closed ``skipped``, which a FAILED event of the reclaimer's re-opens)."""
        self._waiting = False
        response = br.call_with_retry(self.client, "DescribeJobs", sleep=self.sleep, jobs=[job_id])
        job = next((j for j in response.get("jobs", ()) if j.get("jobId") == job_id), None)
        if job is None and status == Ledger.STOPPING:
            # Batch keeps every job for days, and no FAILED event of it was claimed: a job about
            # to be stopped that vanished was not stopped by us (it ended, and was removed).
            self.ledger.close(job_id, holder, Ledger.SKIPPED, "Batch no longer has it")
            log("requeue_skipped", "WARNING", job=job_id, reason="DescribeJobs does not return a job about to be"
                " stopped; nothing to resubmit")
            return None
        if job is None:
            raise self._refused(job_id, holder, "DescribeJobs no longer returns it (Batch keeps ended jobs for"
                                                " days, not for ever), so there is nothing to resubmit it from",
                                permanent=True)
        if job.get("status") == "FAILED" and (job.get("statusReason") or "").startswith(br.RECLAIM_REASON_PREFIX):
            return job
        if job.get("status") in _ACTIVE and self._stop_may_be_under_way(job):
            self._waiting = True  # look again once the stop has had time to end the job, or to show
            self.ledger.settle_after(job_id, holder, self.clock() + LISTING_SETTLE_SECONDS)
            log("requeue_waiting", job=job_id, status=job.get("status"), reason="its stop is under way, or"
                " DescribeJobs does not show it yet")
            return None
        reason = (f"it active with no sign of a stop for {STOP_VISIBLE_SECONDS} s" if job.get("status") in _ACTIVE
                  else "it ended, not stopped by the reclaimer")
        self.ledger.close(job_id, holder, Ledger.SKIPPED, f"DescribeJobs shows {reason}")
        log("requeue_skipped", job=job_id, reason=f"DescribeJobs shows {reason} (a FAILED event of the"
            " reclaimer's re-opens the record)", status=job.get("status"), status_reason=job.get("statusReason"))
        return None

    def _stop_may_be_under_way(self, job: Mapping) -> bool:
        """Whether an active job may still be on its way to FAILED by our stop: Batch shows the
        stop (``isTerminated`` for a started job, ``isCancelled`` for one not yet started, or
        our reason), or the record is too young for a read that trails the stop to be trusted."""
        if job.get("isTerminated") or job.get("isCancelled"):
            return True
        if (job.get("statusReason") or "").startswith(br.RECLAIM_REASON_PREFIX):
            return True
        return self.clock() < float(self._record.get("since", 0)) + STOP_VISIBLE_SECONDS

    def _params(self, job: Mapping, holder: str) -> dict:
        try:
            params = submit_params(job)
        except ValueError as exc:
            raise self._refused(job["jobId"], holder, f"it cannot be resubmitted: {exc}", permanent=True,
                                job=job) from None
        # The attempt is added later; the borrowed record belongs to the stopped run.
        dropped = sorted(set(job.get("tags") or {}) - set(params["tags"]) - {TAG_REQUEUE_ATTEMPT, br.TAG_BORROWED})
        if dropped:
            log("requeue_tags_dropped", "WARNING", job=job["jobId"], tags=dropped,
                reason="a resubmission carries only the platform's tags (the reclaimer may set no other)")
        return params

    def _refused(self, job_id: str, attempt: str, reason: str, *, permanent: bool = False,
                 job: Mapping | None = None) -> ReclaimError:
        """Batch refused the resubmission, or the job cannot be resubmitted: returns the error to raise.

        A refusal that may pass (a disabled queue, a job definition being replaced) keeps the
        record open, to be tried again by the cycle :func:`refusal_backoff` later. After
        :data:`REFUSAL_LIMIT` refusals, or at once when ``permanent``, the record says
        ``refused`` and the cycle puts a replayable event in the on-failure queue."""
        refusals = int(self._record.get("refusals", 0)) + 1
        if not permanent and refusals < REFUSAL_LIMIT:
            wait = refusal_backoff(refusals)
            try:
                self.ledger.refused_again(job_id, attempt, self.clock() + wait, reason)
            except Exception as exc:  # the record's settle time stands: the cycle meets the refusal again
                log("ledger_write_failed", "WARNING", job=job_id, error=_error(exc))
            log("requeue_refused", "ERROR", job=job_id, error=reason, refusals=refusals, next_try_seconds=wait,
                fix="fix the cause (enable the queue, register the job definition, restore the share);"
                    " the cycle tries again by itself")
            return ReclaimError(f"job {job_id} was stopped by the reclaimer but {reason}; the cycle tries again in"
                                f" {int(wait // 60)} minutes ({_tries(REFUSAL_LIMIT - refusals)} left)")
        try:
            self.ledger.close(job_id, attempt, Ledger.REFUSED, reason)
        except Exception as exc:  # the record stays open: the cycle meets the same refusal again
            log("ledger_write_failed", "WARNING", job=job_id, error=_error(exc))
            return ReclaimError(f"job {job_id} was stopped by the reclaimer but {reason}")
        log("requeue_failed", "ERROR", job=job_id, error=reason, refusals=refusals,
            fix="fix the cause, then replay the message's requestPayload from the on-failure queue")
        if self.notify is not None:
            self.notify(failure_record(job_id, self.ledger.queue, reason, refusals, job))
        return ReclaimError(f"job {job_id} was stopped by the reclaimer but {reason}")

    def _submit(self, job: Mapping, params: dict, attempt: str) -> dict:
        job_id = job["jobId"]
        params = {**params, "tags": {**params["tags"], TAG_REQUEUE_ATTEMPT: attempt}}
        self.submitting = True
        outcome, value = submit_once(self.client, params, job, attempt, sleep=self.sleep)
        if outcome == "done":
            try:
                self.ledger.submitted(job_id, attempt, value)
            except Exception as exc:  # submitted: whoever comes next finds it by the attempt's tag
                log("ledger_write_failed", "WARNING", job=job_id, new_job=value, error=_error(exc),
                    reason="the resubmission is made; the cycle records it once its settle time has passed")
            log("requeued", job=job_id, new_job=value, job_name=params["jobName"],
                share=params.get("shareIdentifier"))
            return {"requeued": value, "from": job_id}
        if outcome == "refused":
            raise self._refused(job_id, attempt, f"Batch refused the resubmission: {_error(value)}", job=job)
        # Not applied: look again at once. Unknown: only once anything it made is listed, and
        # never before the claim's own bound (what this invocation may still have in flight).
        when = self.clock()
        if outcome == "unknown":
            when = max(when + LISTING_SETTLE_SECONDS, float(self._record.get("settleAfter", 0)))
        try:
            self.ledger.settle_after(job_id, attempt, when)
        except Exception as exc:  # the claim's settle time stands (later, and as safe)
            log("ledger_write_failed", "WARNING", job=job_id, error=_error(exc))
        log("requeue_deferred", "WARNING", job=job_id, outcome=outcome, error=_error(value),
            reason="the scheduled cycle looks for the job, or submits it, after its settle time")
        return {"requeued": None, "from": job_id, "deferred": True}


def failure_record(job_id: str, queue: str, reason: str, refusals: int, job: Mapping | None) -> dict:
    """A message for the on-failure queue, shaped as Lambda's own on-failure records: its
    ``requestPayload`` is a FAILED event that, sent to the reclaimer, tries the requeue again."""
    detail = {"jobId": job_id, "jobName": (job or {}).get("jobName", ""), "jobQueue": (job or {}).get("jobQueue", queue),
              "status": "FAILED", "statusReason": (job or {}).get("statusReason") or br.RECLAIM_REASON_PREFIX}
    return {
        "version": "1.0",
        "requestContext": {"condition": "RequeueRefused", "approximateInvokeCount": refusals},
        "requestPayload": {"source": "aws.batch", "detail-type": "Batch Job State Change", "detail": detail},
        "responsePayload": {"errorType": "ReclaimError", "errorMessage": reason},
    }


class _OutcomeUnknown(Exception):
    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def submit_once(client: Any, params: dict, job: Mapping, attempt: str, *,
                sleep: Callable[[float], None] | None = None) -> tuple[str, Any]:
    """``SubmitJob`` for ``attempt``, retried only while surely not applied.

    Returns ``("done", new job id)``; ``("refused", error)`` when Batch refused it
    (a client error: nothing was made); ``("not_applied", error)`` when every try was
    throttled or never connected; ``("unknown", error)`` when a try may have made the
    job and ``ListJobs`` does not show it (yet), or on any unexpected error.
    """
    def before_retry(exc: Exception, _params: dict) -> dict | None:
        try:
            found = find_requeued(client, job, {attempt}, sleep=sleep)
        except Exception as lookup:  # the listing is down too: the outcome stays unknown
            raise _OutcomeUnknown(exc) from lookup
        if found is None:
            raise _OutcomeUnknown(exc)
        log("requeue_answer_lost", "WARNING", job=job["jobId"], new_job=found, error=_error(exc))
        return {"jobId": found}

    try:
        response = br.call_with_retry(client, "SubmitJob", sleep=sleep, before_retry=before_retry, **params)
    except _OutcomeUnknown as exc:
        return "unknown", exc.cause
    except Exception as exc:
        if br.is_retryable(exc):  # retried to the end, and no try may have applied
            return "not_applied", exc
        if _error_code(exc) or type(exc).__name__ == "ParamValidationError":
            return "refused", exc
        return "unknown", exc
    return "done", response["jobId"]


# ---------------------------------------------------------------------------
# The two ways in: an event, and the cycle's reconciliation


def requeue(client: Any, detail: Mapping, *, queue: str, ledger: Ledger | None,
            clock: Callable[[], float] = time.time, time_left: Callable[[], float] | None = None,
            sleep: Callable[[float], None] | None = None) -> dict:
    """Resubmit the job of a FAILED event the reclaimer caused (``detail``: the event's job).

    Only a job the ledger holds a record of is the reclaimer's: the cycle writes a job's
    ``stopping`` record before it stops it, so a job stopped with the reclaimer's reason and no
    record was stopped by someone else (a team may give any reason) and is logged and left
    alone. Otherwise the requeue takes over the record (so that, from then on, the cycle can
    finish it without the event) and resubmits what ``DescribeJobs`` shows of the job (an
    event may carry no ``tags``). Raises while the ledger cannot be read (Lambda retries the
    event) and for a job that cannot be resubmitted; a dependency failing after that is
    logged and left to the cycle. Dry run does not apply: a job the reclaimer stopped is
    resubmitted all the same, or it would be lost.
    """
    job_id = detail.get("jobId")
    reason = detail.get("statusReason") or ""
    if not isinstance(job_id, str) or not job_id:
        log("requeue_skipped", "WARNING", reason="the event names no job", detail=detail)
        return {"requeued": None}
    if not reason.startswith(br.RECLAIM_REASON_PREFIX):
        log("requeue_skipped", job=job_id, reason="not stopped by the reclaimer", status_reason=reason)
        return {"requeued": None}
    if not _same_queue(detail.get("jobQueue", ""), queue):
        log("requeue_skipped", job=job_id, reason="job of another queue", job_queue=detail.get("jobQueue"))
        return {"requeued": None}
    if ledger is None:
        log("requeue_failed", "ERROR", job=job_id, step="configuration", error=f"{REQUEUE_TABLE_ENV} is not set")
        raise ReclaimError(f"job {job_id} cannot be resubmitted exactly once: {REQUEUE_TABLE_ENV} (the requeue"
                           " ledger table) is not set; deploy the FairshareQueue construct of this version")
    run = Requeue(client, ledger, clock=clock, time_left=time_left, sleep=sleep)
    attempt = uuid.uuid4().hex
    try:
        record = ledger.get(job_id)
        if record is None:
            log("requeue_skipped", "WARNING", job=job_id, status_reason=reason[:500],
                reason="not stopped by the reclaimer: the requeue ledger holds no record of it, and the reclaimer"
                       " records every job before it stops it (someone else stopped it with the reclaimer's reason)")
            return {"requeued": None}
        if record.get("status") == Ledger.SKIPPED:
            record = _reopen(ledger, job_id, attempt, clock(), run.settle_time(), record)
    except Exception as exc:
        log("requeue_failed", "ERROR", job=job_id, step="reading the requeue ledger", error=_error(exc),
            outcome="nothing claimed: Lambda retries the event, then keeps it in the failure queue")
        raise
    try:
        return run.drive(job_id, record, attempt)
    except ReclaimError:
        raise
    except Exception as exc:
        if record.get("status") == Ledger.REFUSED and run.holder != attempt:
            # A replay of a record the cycle closed: no cycle finishes it, so the event must fail
            # (Lambda keeps it in the on-failure queue for the next replay).
            log("requeue_failed", "ERROR", job=job_id, error=_error(exc), reason="the replay could not take the"
                " requeue over; its record stays refused: fix the cause and replay the message again")
            raise
        if not run.submitting and run.holder in (attempt, ""):
            try:  # nothing submitted: the cycle need not wait for a listing to settle
                ledger.settle_after(job_id, run.holder, clock())
            except Exception as write:  # the claim's settle time stands: later, and as safe
                log("ledger_write_failed", "WARNING", job=job_id, error=_error(write))
        log("requeue_deferred", "WARNING", job=job_id, error=_error(exc),
            reason="claimed in the ledger; the scheduled cycle finishes it after its settle time")
        return {"requeued": None, "from": job_id, "deferred": True}


def _reopen(ledger: Ledger, job_id: str, attempt: str, now: float, settle_after: float, record: dict) -> dict:
    """A FAILED event of the reclaimer's for a ``skipped`` record: the job was stopped after
    all (the read that closed the record trailed the stop), so the requeue starts again."""
    log("requeue_reopened", "WARNING", job=job_id, closed_because=record.get("error"),
        reason="a FAILED event of the reclaimer's shows the job was stopped after all")
    if ledger.reopen(job_id, attempt, now=now, settle_after=settle_after):
        return {**record, "status": Ledger.CLAIMED, "attempt": attempt, "since": now, "settleAfter": settle_after,
                "attempts": sorted({*record.get("attempts", ()), attempt})}
    return ledger.get(job_id) or {}  # another attempt re-opened it first: drive what it left


def reconcile(client: Any, ledger: Ledger, *, clock: Callable[[], float] = time.time,
              time_left: Callable[[], float] | None = None, sleep: Callable[[float], None] | None = None,
              limit: int = RECONCILE_LIMIT, notify: Callable[[Mapping], None] | None = None) -> dict:
    """The cycle's part of requeue: finish up to ``limit`` open records whose settle time
    has passed, oldest first. Never raises; returns what it did, the errors it logged
    and ``oldest_open_seconds`` (how long past its settle time the oldest open record is).
    ``notify`` puts a requeue that needs a person in the on-failure queue."""
    run = Requeue(client, ledger, clock=clock, time_left=time_left, sleep=sleep, notify=notify)
    out: dict[str, Any] = {"requeued": [], "found": [], "deferred": [], "errors": [], "oldest_open_seconds": 0.0}
    try:
        due = ledger.due(clock(), limit)
    except Exception as exc:
        log("reconcile_failed", "ERROR", step="reading the ledger", error=_error(exc))
        out["errors"].append({"step": "ledger", "error": _error(exc), "transient": br.is_retryable(exc)})
        return out
    if due:
        out["oldest_open_seconds"] = round(max(0.0, clock() - due[0][1]), 3)
    for job_id, _ in due:
        if time_left is not None and time_left() < RECONCILE_MARGIN_SECONDS:
            log("reconcile_deadline", "WARNING", reason="the Lambda's time is nearly up; the next cycle goes on")
            break
        try:
            record = ledger.get(job_id)
            if record is None or record.get("status") not in (Ledger.STOPPING, Ledger.CLAIMED):
                continue
            if record.get("settleAfter", 0) > clock():  # the index trails the table: not due after all
                continue
            result = run.drive(job_id, record, uuid.uuid4().hex)
        except ReclaimError as exc:  # a refusal: the record says when to try again, or is closed
            log("reconcile_failed", "ERROR", job=job_id, error=_error(exc), reason="needs a person: see the error")
            out["errors"].append({"job": job_id, "error": _error(exc), "transient": False})
            continue
        except Exception as exc:
            transient = br.is_retryable(exc)
            outcome = _failed(run, job_id, exc, clock, notify)
            log("reconcile_failed", "WARNING" if transient and not outcome["closed"] else "ERROR", job=job_id,
                error=_error(exc), **outcome)
            out["errors"].append({"job": job_id, "error": _error(exc), "transient": transient and not outcome["closed"],
                                  "failures": outcome["failures"]})
            continue
        key = "deferred" if result.get("deferred") else "found" if result.get("duplicate") else "requeued"
        if result.get("requeued") or result.get("deferred"):
            out[key].append(job_id)
    log("reconciled", **out)
    return out


def _failed(run: Requeue, job_id: str, exc: Exception, clock: Callable[[], float],
            notify: Callable[[Mapping], None] | None) -> dict:
    """Finishing ``job_id``'s record raised ``exc`` (not a refusal): the record is pushed back
    (never earlier than its settle time), so the cycles after this one meet the other records
    first (the index is in settle-time order). A transient error (throttling, a 5xx, no
    connection, each already retried) pushes it back a minute and is not counted: an outage
    ends. Any other is counted and pushes it back :func:`refusal_backoff` of its failures; after
    :data:`FAILURE_LIMIT` of them it is closed ``refused`` and a replayable event goes to the
    on-failure queue. Never raises."""
    ledger = run.ledger
    try:
        record = ledger.get(job_id)  # as the failed attempt left it (it may have taken it over)
    except Exception as read:  # the ledger is down too: the record is met again, as it is
        return {"failures": None, "closed": False, "reason": f"not counted: the ledger did not answer ({_error(read)})"}
    if record is None or record.get("status") not in (Ledger.STOPPING, Ledger.CLAIMED):
        return {"failures": None, "closed": False, "reason": "the record is no longer open"}
    holder = record.get("attempt", "")
    settle = float(record.get("settleAfter", 0))
    if br.is_retryable(exc):
        try:
            ledger.failed_again(job_id, holder, max(settle, clock() + LISTING_SETTLE_SECONDS), _error(exc),
                                counted=False)
        except Exception as write:  # the record stays as it is: the next cycle meets it again
            return {"failures": None, "closed": False, "reason": f"not pushed back: {_error(write)}"}
        return {"failures": None, "closed": False, "next_try_seconds": LISTING_SETTLE_SECONDS,
                "reason": "transient: pushed back a minute, behind the other records"}
    failures = int(record.get("failures", 0)) + 1
    reason = f"finishing the requeue failed {_tries(failures)}: {_error(exc)}"
    try:
        if failures < FAILURE_LIMIT:
            wait = refusal_backoff(failures)
            ledger.failed_again(job_id, holder, max(settle, clock() + wait), reason)
            return {"failures": failures, "closed": False, "next_try_seconds": wait,
                    "reason": f"pushed back: the cycle looks again in {int(wait // 60)} minutes and meets the other"
                              " records first"}
        if not ledger.close(job_id, holder, Ledger.REFUSED, reason, failures=failures):
            return {"failures": failures, "closed": False, "reason": "another attempt holds the record now"}
    except Exception as write:  # the record stays as it is: the next cycle meets it again
        return {"failures": failures, "closed": False, "reason": f"not pushed back: {_error(write)}"}
    if notify is not None:
        notify(failure_record(job_id, ledger.queue, reason, failures, None))
    return {"failures": failures, "closed": True,
            "reason": "needs a person: fix the cause, then replay the message's requestPayload from the on-failure queue"}


def record_stops(ledger: Ledger, victims: Sequence[Mapping], *, now: float, settle_after: float,
                 not_stopped: list[dict]) -> list[Mapping]:
    """Write each victim's ``stopping`` record before it is stopped; returns the victims that
    may be stopped. A victim whose record cannot be written is not stopped (named in
    ``not_stopped``, fatal: the cycle fails and its alarm fires), and neither is any after
    it once the ledger fails to answer: a job is never stopped without a way back."""
    allowed: list[Mapping] = []
    for k, v in enumerate(victims):
        try:
            recorded = ledger.stopping(v["job"], now=now, settle_after=settle_after)
        except Exception as exc:
            error = f"not stopped: the requeue ledger did not answer ({_error(exc)})"
            log("ledger_write_failed", "ERROR", jobs=[x["job"] for x in victims[k:]], error=_error(exc),
                reason="a job is stopped only once its requeue is recorded")
            not_stopped.extend({"job": x["job"], "error": error, "fatal": True} for x in victims[k:])
            break
        if recorded:
            allowed.append(v)
        else:
            log("stop_skipped", "WARNING", job=v["job"], reason="the requeue ledger already holds a requeue of it")
            not_stopped.append({"job": v["job"], "error": "not stopped: the requeue ledger already holds a requeue of it"})
    return allowed


def find_requeued(client: Any, job: Mapping, attempts: Collection[str], *,
                  sleep: Callable[[float], None] | None = None, clock: Callable[[], float] = time.monotonic,
                  max_seconds: float = FIND_SECONDS) -> str | None:
    """The id of the job any of ``attempts`` submitted for ``job`` (a ``DescribeJobs``
    detail), if ``ListJobs`` shows it.

    ``ListJobs`` filtered by the job's name (newest first, so the listing stops at
    the first job created before the stopped one stopped), then ``DescribeJobs`` of
    the candidates for the tags ``gpu-share:requeued-from`` and
    ``gpu-share:requeue-attempt``: attempt ids are known only to the ledger, so a job
    a team submitted with the same name and tags is not taken for the resubmission.

    The look is bounded, by :data:`FIND_PAGE_LIMIT` pages and by ``max_seconds`` of ``clock``
    (no page is asked after it); one that could not finish raises, never says "not found".
    """
    job_id = job["jobId"]
    name = job["jobName"]
    stopped_at = job.get("stoppedAt")
    since = stopped_at - REQUEUE_LOOKBACK_MS if stopped_at else job.get("createdAt") or 0
    candidates: list[str] = []
    token = None
    started = clock()
    for _ in range(FIND_PAGE_LIMIT):
        if token and clock() - started > max_seconds:
            raise RuntimeError(f"the look for the resubmission of {job_id} (jobs named {name!r}) did not finish"
                               f" within {max_seconds:g} s")
        params: dict[str, Any] = {"jobQueue": job["jobQueue"], "maxResults": br.DESCRIBE_BATCH,
                                  "filters": [{"name": "JOB_NAME", "values": [name]}]}
        if token:
            params["nextToken"] = token
        page = br.call_with_retry(client, "ListJobs", sleep=sleep, **params)
        older = False
        for s in page.get("jobSummaryList", ()):
            if (s.get("createdAt") or 0) < since:
                older = True
            elif s["jobId"] != job_id and s.get("jobName") == name and s["jobId"] not in candidates:
                candidates.append(s["jobId"])
        token = page.get("nextToken")
        if older or not token:
            break
    else:  # never "not found" from a look that did not finish: the caller must not submit
        raise RuntimeError(f"more than {FIND_PAGE_LIMIT * br.DESCRIBE_BATCH} jobs named {name!r} were created"
                           f" since {job_id} stopped; the look for its resubmission did not finish")
    for i in range(0, len(candidates), br.DESCRIBE_BATCH):
        response = br.call_with_retry(client, "DescribeJobs", sleep=sleep, jobs=candidates[i:i + br.DESCRIBE_BATCH])
        for found in response.get("jobs", ()):
            tags = found.get("tags") or {}
            if tags.get(br.TAG_REQUEUED_FROM) == job_id and tags.get(TAG_REQUEUE_ATTEMPT) in attempts:
                return found["jobId"]
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
    # The team's own tags (its checkpoint interval too); never the stopped run's borrowed record.
    tags = {k: v for k, v in (detail.get("tags") or {}).items() if k in br.SUBMIT_TAG_KEYS}
    tags.setdefault(br.TAG_QUEUE, detail["jobQueue"].rsplit("/", 1)[-1])
    tags[br.TAG_REQUEUED_FROM] = detail["jobId"]
    params["tags"] = tags
    return params
