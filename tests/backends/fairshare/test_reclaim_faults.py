"""The reclaim Lambda under faults (stops, requeue exactly once, the ledger's reconciliation) and its describe cache.

Every call goes through real boto3 clients answered by :mod:`tests.batch_model` from
botocore's ``before-send`` event: botocore validates and serializes every request.
"""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from cdk_gpu_share.aws import batch_reader as br
from cdk_gpu_share.lambdas.reclaim import handler as h
from tests.batch_model import (
    QUEUE,
    QUEUE_NAME,
    BatchModel,
    Killed,
    add_fault,
    lambda_context,
    reclaim_lambda_model,
)

SETTINGS = {
    "queue": "gpu-share-fairshare",
    "capacity": {"gpu": 4},
    "settings": {"reclaim_after_seconds": 0, "min_runtime_seconds": 0},
    "teams": [
        {"name": "team-a", "share_identifier": "teama", "guarantee": {"gpu": 2}},
        {"name": "team-b", "share_identifier": "teamb", "guarantee": {"gpu": 2}},
    ],
}


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch):
    monkeypatch.setattr(br.time, "sleep", lambda s: None)


@pytest.fixture
def model(monkeypatch) -> BatchModel:
    return reclaim_lambda_model(monkeypatch, SETTINGS)


def logged(capsys) -> list[dict]:
    out = []
    for line in capsys.readouterr().out.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if "event" in record:
            out.append(record)
    return out


def borrowing(model: BatchModel) -> str:
    """team-b borrows 2 GPUs beyond its guarantee; team-a waits for its own: one victim."""
    for i in range(4):
        model.add_job("teamb", "RUNNING", started=model.clock() - 1000 + i)
    model.add_job("teama", "RUNNABLE")
    return max((j for j in model.jobs.values() if j["shareIdentifier"] == "teamb"),
               key=lambda j: j["startedAt"])["jobId"]


def record_stop(model: BatchModel, job_id: str) -> None:
    """The ``stopping`` record the cycle writes before it stops a job."""
    ledger = h.Ledger(model.dynamodb, "gpu-share-requeue", QUEUE_NAME)
    assert ledger.stopping(job_id, now=model.clock(), settle_after=model.clock() + 180)


def stopped_job(model: BatchModel, *, recorded: bool = True, **extra) -> dict:
    """A job stopped with the reclaimer's reason: by the reclaimer (its ``stopping`` record
    written first, as the cycle does), or, not ``recorded``, by someone else."""
    job = model.add_job("teamb", "RUNNING", priority=5, tags={"project": "llm"}, **extra)
    if recorded:
        record_stop(model, job["jobId"])
    model._stop(job["jobId"], "GpuShare reclaim: for job x of team team-a")
    model.tick(1)
    model.events.clear()
    return job


CYCLE = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}


def cycle(model: BatchModel) -> dict:
    """One scheduled invocation: a reclaim cycle and the ledger's reconciliation."""
    return h.handler(CYCLE, lambda_context(clock=model.clock))


def invoke(event: dict) -> dict | Exception:
    """An invocation as Lambda makes it: what it raised is its answer (and Lambda retries it)."""
    try:
        return h.handler(event, lambda_context())
    except Exception as exc:  # noqa: BLE001 - Lambda records any failure
        return exc


def failed_event(job: dict, *, tags: bool = True) -> dict:
    detail = json.loads(json.dumps(job))
    if not tags:
        detail.pop("tags", None)
    return {"source": "aws.batch", "detail-type": "Batch Job State Change", "time": "2027-01-15T08:00:00Z",
            "detail": detail}


# ---------------------------------------------------------------------------
# Network errors are retried


@pytest.mark.parametrize("fault", ["connect", "timeout_after"])
def test_network_errors_are_retried_by_the_handlers_loop(model, fault):
    borrowing(model)
    add_fault(model, "ListJobs", fault, fault)
    add_fault(model, "DescribeJobs", fault)
    result = h.handler({"detail": {}}, lambda_context())
    assert len(result["stopped"]) == 1
    assert result["calls"]["ListJobs"] == 5 and result["calls"]["DescribeJobs"] == 2


def test_network_errors_are_retryable_and_only_a_lost_answer_may_have_applied():
    from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

    for exc in (ReadTimeoutError(endpoint_url="u"), EndpointConnectionError(endpoint_url="u"),
                ConnectTimeoutError(endpoint_url="u")):
        assert br.is_retryable(exc)
    assert br.may_have_applied(ReadTimeoutError(endpoint_url="u"))
    assert not br.may_have_applied(EndpointConnectionError(endpoint_url="u"))
    assert not br.may_have_applied(ConnectTimeoutError(endpoint_url="u"))
    assert not br.is_retryable(ValueError("x"))


# ---------------------------------------------------------------------------
# A stop that may have been applied is re-read, never sent twice


@pytest.mark.parametrize("fault", ["error_after", "timeout_after"])
def test_a_stop_applied_but_answered_with_an_error_is_not_sent_again(model, capsys, fault):
    victim = borrowing(model)
    add_fault(model, "TerminateJobs", fault)
    result = h.handler({"detail": {}}, lambda_context())
    assert result["stopped"] == [victim]
    assert model.stops == {victim: 1}
    assert [op for op, _, _ in model.requests].count("TerminateJobs") == 1
    reread = [r for r in logged(capsys) if r["event"] == "terminate_reread"]
    assert reread and reread[0]["stopped_or_ended"] == [victim] and reread[0]["retry"] == []


def test_a_stop_not_applied_is_retried_for_the_jobs_still_running(model):
    victim = borrowing(model)
    add_fault(model, "TerminateJobs", "error")
    result = h.handler({"detail": {}}, lambda_context())
    assert result["stopped"] == [victim] and model.stops == {victim: 1}
    terminates = [p for op, p, _ in model.requests if op == "TerminateJobs"]
    assert [p["jobs"] for p in terminates] == [[victim], [victim]]


def test_a_job_stopped_last_cycle_and_still_running_is_not_stopped_again(model):
    model.stop_delay = (300, 300)  # the container takes minutes to stop
    victim = borrowing(model)
    first = h.handler({"detail": {}}, lambda_context())
    model.tick(60)
    second = h.handler({"detail": {}}, lambda_context())
    assert first["stopped"] == [victim] and second["stopped"] == []
    assert model.stops == {victim: 1}


# ---------------------------------------------------------------------------
# Requeue exactly once, as the job was


def test_a_stopped_job_is_resubmitted_from_describe_jobs_when_the_event_has_no_tags(model):
    job = stopped_job(model)
    result = h.handler(failed_event(job, tags=False), lambda_context())
    [sub] = model.submissions
    assert result == {"requeued": sub["jobId"], "from": job["jobId"]}
    assert sub["tags"]["gpu-share:team"] == "teamb" and sub["tags"]["gpu-share:queue"] == QUEUE_NAME
    assert sub["tags"]["gpu-share:requeued-from"] == job["jobId"]
    assert sub["shareIdentifier"] == "teamb" and sub["schedulingPriorityOverride"] == 5
    assert sub["jobDefinition"] == job["jobDefinition"]
    assert sub["containerOverrides"]["environment"] == [{"name": "LR", "value": "0.1"}]
    assert sub["parameters"] == {"epochs": "3"} and sub["retryStrategy"] == {"attempts": 2}
    assert sub["timeout"] == {"attemptDurationSeconds": 86_400} and sub["propagateTags"] is True
    assert sub["containerOverrides"]["command"] == job["container"]["command"]
    assert sub["jobName"] == job["jobName"] and sub["jobQueue"] == QUEUE


def test_a_submit_applied_but_answered_500_is_not_submitted_twice(model, capsys):
    job = stopped_job(model)
    add_fault(model, "SubmitJob", "error_after")
    result = h.handler(failed_event(job), lambda_context())
    assert len(model.submissions) == 1 and result["requeued"] == model.submissions[0]["jobId"]
    assert [r for r in logged(capsys) if r["event"] == "requeue_answer_lost"]
    assert model.table[job["jobId"]]["status"] == {"S": "submitted"}
    assert "openQueue" not in model.table[job["jobId"]]  # out of the cycle's index


def test_a_lost_submit_answer_while_the_listing_lags_is_finished_by_the_cycle_without_a_second_submit(model, capsys):
    model.listing_lag = (20, 20)
    job = stopped_job(model)
    add_fault(model, "SubmitJob", "timeout_after")
    first = h.handler(failed_event(job), lambda_context())
    assert first["deferred"] is True and len(model.submissions) == 1
    assert [r for r in logged(capsys) if r["event"] == "requeue_deferred" and r.get("outcome") == "unknown"]
    model.tick(30)  # a duplicate event, and a cycle: the listing has not settled for the ledger yet
    assert h.handler(failed_event(job), lambda_context())["deferred"] is True
    assert cycle(model)["requeues"]["requeued"] == []
    model.tick(h.LISTING_SETTLE_SECONDS)  # an unknown outcome never moves the claim's settle time earlier
    assert cycle(model)["requeues"]["found"] == []
    model.tick(h.DEFAULT_INVOCATION_SECONDS)  # the next cycles find the job the lost answer created
    assert cycle(model)["requeues"]["found"] == [job["jobId"]]
    assert len(model.submissions) == 1
    assert model.table[job["jobId"]]["newJob"] == {"S": model.submissions[0]["jobId"]}


def test_a_submit_throttled_to_the_end_is_submitted_by_the_next_cycle(model):
    job = stopped_job(model)
    add_fault(model, "SubmitJob", *["throttle"] * 6)
    assert h.handler(failed_event(job), lambda_context())["deferred"] is True
    assert model.submissions == []
    model.tick(1)
    assert cycle(model)["requeues"]["requeued"] == [job["jobId"]]
    assert len(model.submissions) == 1


def test_a_ledger_that_never_learns_the_new_job_is_mended_by_the_cycle(model):
    job = stopped_job(model)
    add_fault(model, "UpdateItem", None, *["error"] * 6)  # taken over from the stop; then the ledger never learns the new job
    assert h.handler(failed_event(job), lambda_context())["requeued"] == model.submissions[0]["jobId"]
    model.tick(h.DEFAULT_INVOCATION_SECONDS + h.LISTING_SETTLE_SECONDS + 1)
    assert cycle(model)["requeues"]["found"] == [job["jobId"]]
    assert len(model.submissions) == 1
    assert model.table[job["jobId"]]["status"] == {"S": "submitted"}


def test_a_forged_resubmission_does_not_stop_the_requeue(model):
    """A team's job with the same name and a requeued-from tag is not taken for the
    resubmission: only the ledger's attempt ids (unknown to teams) count."""
    job = stopped_job(model)
    model.add_job("teama", "RUNNABLE", name=job["jobName"], created=model.clock(),
                  tags={"gpu-share:requeued-from": job["jobId"], "gpu-share:requeue-attempt": "guess"})
    model.put_ledger_item({"jobId": {"S": job["jobId"]}, "status": {"S": "claimed"}, "attempt": {"S": "crashed"},
                           "attempts": {"SS": ["crashed"]}, "settleAfter": {"N": "0"},
                           "openQueue": {"S": QUEUE_NAME}})
    result = h.handler(failed_event(job), lambda_context())
    assert len(model.submissions) == 1 and result["requeued"] == model.submissions[0]["jobId"]


# ---------------------------------------------------------------------------
# Never twice: a call whose outcome is unknown is never followed by a path that
# assumes it did not happen.


def test_a_lost_submit_then_a_throttled_ledger_then_a_duplicate_event_submits_once(model):
    """SubmitJob applied but answered 500, not listed yet; the ledger's settle-time write
    is throttled (DynamoDB's own code); EventBridge's duplicate comes 5 s later."""
    model.listing_lag = (30, 30)
    job = stopped_job(model)
    add_fault(model, "SubmitJob", "error_after")
    add_fault(model, "UpdateItem", "throttle:ProvisionedThroughputExceededException")
    invoke(failed_event(job))
    model.tick(5)
    invoke(failed_event(job))
    assert len(model.submissions) == 1
    model.tick(h.LISTING_SETTLE_SECONDS)
    invoke(CYCLE)
    assert len(model.submissions) == 1


def test_a_batch_brownout_during_the_lookup_after_a_lost_submit_answer_submits_once(model):
    model.listing_lag = (30, 30)
    job = stopped_job(model)
    add_fault(model, "SubmitJob", "error_after")
    add_fault(model, "ListJobs", *["error"] * 6)  # find_requeued fails through all its retries
    invoke(failed_event(job))
    model.tick(5)
    invoke(failed_event(job))
    assert len(model.submissions) == 1
    model.tick(h.DEFAULT_INVOCATION_SECONDS + h.LISTING_SETTLE_SECONDS)
    invoke(CYCLE)
    assert len(model.submissions) == 1 and model.table[job["jobId"]]["status"] == {"S": "submitted"}


def test_an_unexpected_error_after_submit_was_applied_submits_once(model):
    model.listing_lag = (30, 30)
    job = stopped_job(model)
    add_fault(model, "SubmitJob", "raise_after")
    invoke(failed_event(job))
    model.tick(5)
    invoke(failed_event(job))
    model.tick(h.DEFAULT_INVOCATION_SECONDS + h.LISTING_SETTLE_SECONDS)
    invoke(CYCLE)
    assert len(model.submissions) == 1 and model.table[job["jobId"]]["status"] == {"S": "submitted"}


def test_a_take_over_looks_for_the_job_of_every_earlier_attempt(model):
    """Attempt a1 submitted (its job listed), a2 took over and crashed: the job of a1 is
    the resubmission, not a reason to submit again."""
    job = stopped_job(model)
    model.add_job("teamb", "RUNNABLE", name=job["jobName"], created=model.clock(),
                  tags={"gpu-share:requeued-from": job["jobId"], "gpu-share:requeue-attempt": "a1"})
    model.put_ledger_item({"jobId": {"S": job["jobId"]}, "status": {"S": "claimed"}, "attempt": {"S": "a2"},
                           "attempts": {"SS": ["a1", "a2"]}, "settleAfter": {"N": "0"},
                           "openQueue": {"S": QUEUE_NAME}})
    result = h.handler(failed_event(job), lambda_context())
    assert result["duplicate"] is True and model.submissions == []


def test_a_take_over_applied_but_answered_500_goes_on_with_its_own_write(model):
    job = stopped_job(model)
    model.put_ledger_item({"jobId": {"S": job["jobId"]}, "status": {"S": "claimed"}, "attempt": {"S": "crashed"},
                           "attempts": {"SS": ["crashed"]}, "settleAfter": {"N": "0"},
                           "openQueue": {"S": QUEUE_NAME}})
    add_fault(model, "UpdateItem", "error_after")  # the take-over
    result = h.handler(failed_event(job), lambda_context())
    assert len(model.submissions) == 1 and result["requeued"] == model.submissions[0]["jobId"]


@pytest.mark.parametrize("code", ["ProvisionedThroughputExceededException", "RequestLimitExceeded",
                                  "ThrottlingException"])
def test_dynamodb_throttling_is_retried_like_batch_throttling(model, code):
    job = stopped_job(model)
    add_fault(model, "GetItem", f"throttle:{code}", f"throttle:{code}")
    assert h.handler(failed_event(job), lambda_context())["requeued"] == model.submissions[0]["jobId"]
    assert [f for op, _, f in model.requests if op == "GetItem"] == [f"throttle:{code}"] * 2 + [None]


def test_a_job_a_team_stopped_with_the_reclaimers_reason_is_not_resubmitted(model, capsys):
    """A team stops its own job with a reason starting "GpuShare reclaim:". The ledger holds no
    record of it (the reclaimer records every job before it stops it): its FAILED event, every
    retry and duplicate of it, and the cycles after it resubmit nothing, and the log says why."""
    job = stopped_job(model, recorded=False)
    for _ in range(3):  # the event, EventBridge's duplicate, a replay
        assert h.handler(failed_event(job), lambda_context(clock=model.clock)) == {"requeued": None}
    for _ in range(3):
        model.tick(60)
        cycle(model)
    assert model.submissions == [] and job["jobId"] not in model.table
    skipped = [r for r in logged(capsys) if r["event"] == "requeue_skipped"]
    assert len(skipped) == 3 and all("holds no record" in r["reason"] for r in skipped)
    assert skipped[0]["status_reason"].startswith(br.RECLAIM_REASON_PREFIX)
    # The same stop by the reclaimer (its record written first) is resubmitted.
    mine = stopped_job(model)
    assert h.handler(failed_event(mine), lambda_context(clock=model.clock))["requeued"] == model.submissions[0]["jobId"]


# ---------------------------------------------------------------------------
# Nobody on call: once claimed, a requeue is finished by the scheduled cycle.


def test_a_lambda_killed_after_the_claim_is_finished_by_the_cycle_and_no_event_needs_a_redrive(model):
    """Killed right after the claim (its take-over of the stop record); Lambda retries at +60 s
    and +120 s after each failure (both within the claim's settle time), the last one meets a
    Batch brownout."""
    job = stopped_job(model)
    add_fault(model, "UpdateItem", "kill_after")
    with pytest.raises(Killed):
        h.handler(failed_event(job), lambda_context(clock=model.clock))
    model.tick(60)
    assert h.handler(failed_event(job), lambda_context(clock=model.clock))["deferred"] is True
    model.tick(120)
    add_fault(model, "DescribeJobs", *["error"] * 6)
    assert h.handler(failed_event(job), lambda_context(clock=model.clock))["deferred"] is True
    assert model.submissions == []
    for _ in range(3):  # the scheduled cycle, every minute
        model.tick(60)
        cycle(model)
    assert len(model.submissions) == 1 and model.table[job["jobId"]]["status"] == {"S": "submitted"}


def test_a_claim_whose_events_all_failed_later_is_finished_by_the_cycle(model):
    job = stopped_job(model)
    add_fault(model, "DescribeJobs", *["error"] * 6)  # a Batch brownout right after the claim
    assert h.handler(failed_event(job), lambda_context())["deferred"] is True
    model.tick(1)  # nothing was submitted, so the cycle need not wait for the listing
    assert cycle(model)["requeues"]["requeued"] == [job["jobId"]]
    assert len(model.submissions) == 1


def test_a_ledger_down_through_every_attempt_of_an_event_leaves_the_event_for_the_failure_queue(model, capsys):
    """What the cycle cannot finish: a job never claimed (the ledger unreachable for all of
    its event's attempts). The event raises each time, so Lambda keeps it in the failure queue."""
    job = stopped_job(model)
    model.outages.append(("dynamodb", model.clock(), model.clock() + 3600, "error"))
    for _ in range(3):
        with pytest.raises(ClientError, match="InternalServerError"):
            h.handler(failed_event(job), lambda_context())
        model.tick(60)
    assert model.submissions == []
    assert [r for r in logged(capsys) if r["event"] == "requeue_failed" and "failure queue" in r["outcome"]]


def test_a_job_is_stopped_only_once_its_requeue_is_recorded(model, capsys):
    victim = borrowing(model)
    model.outages.append(("dynamodb", model.clock(), model.clock() + 3600, "error"))
    with pytest.raises(h.ReclaimError, match="could not be stopped"):
        cycle(model)
    assert model.stops == {}  # not stopped: it could not have been brought back
    failed = [r for r in logged(capsys) if r["event"] == "cycle_done"][0]["not_stopped"]
    assert [n["job"] for n in failed] == [victim] and "requeue ledger did not answer" in failed[0]["error"]


def test_a_stopped_job_whose_event_never_comes_is_resubmitted_by_the_cycle(model):
    victim = borrowing(model)
    cycle(model)
    assert model.stops == {victim: 1} and model.table[victim]["status"] == {"S": "stopping"}
    model.tick(5)
    model.events.clear()  # its FAILED event is lost (or every attempt of it failed)
    for _ in range(4):
        model.tick(60)
        cycle(model)
    [sub] = model.requeued_from(victim)
    assert model.table[victim]["status"] == {"S": "submitted"} and model.table[victim]["newJob"]["S"] == sub["jobId"]


def test_a_stop_still_under_way_is_waited_for_and_one_never_applied_closes_its_record(model):
    model.stop_delay = (400, 400)  # Batch takes a while to stop a running job
    victim = borrowing(model)
    cycle(model)
    model.tick(h.DEFAULT_INVOCATION_SECONDS + h.LISTING_SETTLE_SECONDS + 1)
    cycle(model)  # still RUNNING, being stopped: its record waits
    assert model.table[victim]["status"] == {"S": "stopping"} and model.submissions == []
    model.tick(300)
    model.events.clear()
    for _ in range(2):
        model.tick(60)
        cycle(model)
    assert len(model.requeued_from(victim)) == 1
    other = model.add_job("teama", "RUNNING")  # a record whose stop was never applied
    model.put_ledger_item({"jobId": {"S": other["jobId"]}, "status": {"S": "stopping"},
                           "settleAfter": {"N": "0"}, "openQueue": {"S": QUEUE_NAME}})
    cycle(model)
    assert model.table[other["jobId"]]["status"] == {"S": "skipped"} and model.stops.get(other["jobId"]) is None


def test_a_record_of_a_stop_never_sent_whose_job_is_gone_is_closed_without_an_alarm(model):
    model.put_ledger_item({"jobId": {"S": "gone"}, "status": {"S": "stopping"}, "settleAfter": {"N": "0"},
                           "openQueue": {"S": QUEUE_NAME}})  # the Lambda died between the record and the stop
    assert cycle(model)["requeues"]["errors"] == []
    assert model.table["gone"]["status"] == {"S": "skipped"} and model.submissions == []


def test_an_event_killed_before_its_claim_on_every_attempt_is_finished_by_the_cycle(model):
    victim = borrowing(model)
    cycle(model)
    model.tick(5)
    [event] = model.events
    for delay in (60, 120, 0):  # Lambda's attempts, each killed: the event lands in the failure queue
        add_fault(model, "GetItem", "kill_before")
        with pytest.raises(Killed):
            h.handler(event, lambda_context(clock=model.clock))
        model.tick(delay)
    for _ in range(2):
        model.tick(60)
        cycle(model)
    assert len(model.requeued_from(victim)) == 1  # a redrive of the event would find it done
    assert h.handler(event, lambda_context())["duplicate"] is True


def test_a_refusal_that_passes_is_resubmitted_by_the_cycle_with_no_replay(model):
    job = stopped_job(model)
    model.refuse_submit = "Job queue gpu-share-fairshare is DISABLED"
    with pytest.raises(h.ReclaimError, match="refused the resubmission.*DISABLED.*again in 5 minutes"):
        h.handler(failed_event(job), lambda_context(clock=model.clock))
    assert model.table[job["jobId"]]["status"] == {"S": "claimed"}  # open: the cycle tries again
    assert h.handler(failed_event(job), lambda_context(clock=model.clock))["deferred"] is True  # Lambda's retry
    model.refuse_submit = None  # an operator enables the queue
    for _ in range(6):
        model.tick(60)
        cycle(model)
    [sub] = model.requeued_from(job["jobId"])
    assert model.table[job["jobId"]]["newJob"] == {"S": sub["jobId"]}


def test_a_refusal_that_lasts_goes_to_the_failure_queue_and_a_replay_of_it_finishes_it(model, monkeypatch):
    sent: list[dict] = []
    monkeypatch.setattr(h, "_failure_notifier", lambda: sent.append)
    job = stopped_job(model)
    model.refuse_submit = "JobDefinition is INACTIVE"
    invoke(failed_event(job))
    errors = []
    for _ in range(200):  # the cycle tries again, 5 minutes apart and doubling
        model.tick(60)
        result = invoke(CYCLE)
        if isinstance(result, h.ReclaimError):
            errors.append(str(result))
        if sent:
            break
    assert len(errors) == h.REFUSAL_LIMIT - 1 and "INACTIVE" in errors[-1]
    assert model.table[job["jobId"]]["status"] == {"S": "refused"} and model.submissions == []
    [message] = sent
    assert message["requestContext"]["approximateInvokeCount"] == h.REFUSAL_LIMIT
    assert "INACTIVE" in message["responsePayload"]["errorMessage"]
    model.tick(3600)
    assert not isinstance(invoke(CYCLE), Exception) and sent == [message]  # closed: the cycle leaves it
    model.refuse_submit = None  # the operator registers the job definition again, and replays the message
    replayed = h.handler(message["requestPayload"], lambda_context(clock=model.clock))
    [sub] = model.requeued_from(job["jobId"])
    assert replayed["requeued"] == sub["jobId"] and model.table[job["jobId"]]["status"] == {"S": "submitted"}


def test_a_job_that_cannot_be_resubmitted_goes_to_the_failure_queue_at_once(model, monkeypatch):
    sent: list[dict] = []
    monkeypatch.setattr(h, "_failure_notifier", lambda: sent.append)
    job = stopped_job(model, nodeProperties={"numNodes": 2})
    model.events.clear()  # its event is lost: the cycle meets the job
    model.put_ledger_item({"jobId": {"S": job["jobId"]}, "status": {"S": "stopping"}, "settleAfter": {"N": "0"},
                           "openQueue": {"S": QUEUE_NAME}})
    with pytest.raises(h.ReclaimError, match="multi-node"):
        cycle(model)
    assert model.table[job["jobId"]]["status"] == {"S": "refused"} and len(sent) == 1
    assert sent[0]["requestPayload"]["detail"]["jobId"] == job["jobId"]


def test_a_cycle_reports_how_long_the_oldest_requeue_has_been_open(model, capsys):
    job = stopped_job(model)
    model.outages.append(("batch", model.clock(), model.clock() + 400, "error"))
    h.handler(failed_event(job), lambda_context())  # claimed; Batch is down
    model.tick(300)
    with pytest.raises(ClientError, match="ServerException"):
        cycle(model)  # the cycle fails to read the queue, and cannot finish the requeue
    metric = [r for r in map(json.loads, capsys.readouterr().out.splitlines())
              if "RequeueOldestOpenSeconds" in r]
    assert metric[-1]["RequeueOldestOpenSeconds"] == pytest.approx(300, abs=1)
    model.tick(200)
    assert cycle(model)["requeues"]["requeued"] == [job["jobId"]]


def test_requeue_without_the_ledger_table_refuses_clearly(model, monkeypatch):
    monkeypatch.delenv(h.REQUEUE_TABLE_ENV)
    job = stopped_job(model)
    with pytest.raises(h.ReclaimError, match="GPU_SHARE_REQUEUE_TABLE"):
        h.handler(failed_event(job), lambda_context())
    assert model.submissions == []


def test_dry_run_still_resubmits_a_stopped_job(model, monkeypatch):
    monkeypatch.setenv("GPU_SHARE_DRY_RUN", "true")
    job = stopped_job(model)
    assert h.handler(failed_event(job), lambda_context())["requeued"] == model.submissions[0]["jobId"]


def test_an_event_for_a_job_describe_jobs_shows_ended_by_itself_submits_nothing(model):
    job = model.add_job("teamb", "RUNNING")
    record_stop(model, job["jobId"])  # about to be stopped, it ended by itself
    model.end(job["jobId"])
    event = failed_event(dict(job, status="FAILED", statusReason="GpuShare reclaim: for job x of team a"))
    assert h.handler(event, lambda_context()) == {"requeued": None}
    assert model.submissions == [] and model.table[job["jobId"]]["status"] == {"S": "skipped"}


# ---------------------------------------------------------------------------
# The describe cache


def test_a_warm_cycle_describes_only_new_jobs_and_takes_state_from_the_listing(model):
    cache = br.DescribeCache()
    jobs = [model.add_job("teamb", "RUNNABLE") for _ in range(150)]
    cold = br.read_queue(model.batch, QUEUE, SETTINGS, model.clock(), cache=cache)
    assert cold.calls["DescribeJobs"] == 2 and cold.described == 150 and len(cache) == 150
    model.start(jobs[0]["jobId"])
    model.add_job("teama", "RUNNABLE")
    warm = br.read_queue(model.batch, QUEUE, SETTINGS, model.clock(), cache=cache)
    assert warm.calls["DescribeJobs"] == 1 and warm.described == 1
    state = {j["id"]: j for j in warm.state["jobs"]}
    assert state[jobs[0]["jobId"]]["state"] == "running"  # from the listing, not the cached describe
    assert state[jobs[0]["jobId"]]["since"] == model.jobs[jobs[0]["jobId"]]["startedAt"] / 1000
    assert len(state) == 151


def test_the_cache_forgets_jobs_no_longer_listed(model):
    cache = br.DescribeCache()
    a = model.add_job("teamb", "RUNNING")
    b = model.add_job("teamb", "RUNNING")
    br.read_queue(model.batch, QUEUE, SETTINGS, model.clock(), cache=cache)
    model.end(a["jobId"])
    model.vanish(b["jobId"])
    snap = br.read_queue(model.batch, QUEUE, SETTINGS, model.clock(), cache=cache)
    assert snap.state["jobs"] == [] and len(cache) == 0


def test_the_cache_is_bounded_and_a_job_it_cannot_hold_is_described_each_cycle(model):
    cache = br.DescribeCache(max_jobs=100)
    for _ in range(150):
        model.add_job("teamb", "RUNNABLE")
    br.read_queue(model.batch, QUEUE, SETTINGS, model.clock(), cache=cache)
    assert len(cache) == 100
    again = br.read_queue(model.batch, QUEUE, SETTINGS, model.clock(), cache=cache)
    assert again.described == 50 and len(cache) == 100 and len(again.state["jobs"]) == 150


def test_the_cache_is_for_one_queue(model):
    cache = br.DescribeCache()
    model.add_job("teamb", "RUNNING")
    br.read_queue(model.batch, QUEUE, SETTINGS, model.clock(), cache=cache)
    other = br.read_queue(model.batch, QUEUE.replace("fairshare", "other"), SETTINGS, model.clock(), cache=cache)
    assert other.described == 0 and cache.queue.endswith("other")


def test_a_job_whose_stop_failed_is_described_again_next_cycle(model):
    victim = borrowing(model)
    add_fault(model, "TerminateJobs", *["error"] * 6, None)
    add_fault(model, "DescribeJobs", None, *["error"] * 6)  # the re-read fails too
    with pytest.raises(h.ReclaimError):
        h.handler({"detail": {}}, lambda_context())
    assert victim not in h._cache
    assert len(h._cache) == 4


def test_terminated_is_sticky_in_the_cache():
    cache = br.DescribeCache()
    detail = {"jobId": "j", "shareIdentifier": "s", "container": {}}
    cache.put(br.facts_of(detail))
    cache.mark_terminated(["j"])
    cache.put(br.facts_of(detail))
    assert cache.get("j").terminated is True
    with pytest.raises(ValueError, match="max_jobs"):
        br.DescribeCache(max_jobs=-1)


# ---------------------------------------------------------------------------
# What a resubmission carries, and what closes a record


def test_a_resubmission_carries_only_the_tags_the_reclaimers_policy_allows(model, capsys):
    job = stopped_job(model)  # tagged "project" by a principal outside the teams' grants
    h.handler(failed_event(job), lambda_context())
    [sub] = model.submissions
    assert set(sub["tags"]) == set(br.REQUEUE_TAG_KEYS) - {br.TAG_CHECKPOINT}  # within the policy's aws:TagKeys
    [dropped] = [r for r in logged(capsys) if r["event"] == "requeue_tags_dropped"]
    assert dropped["tags"] == ["project"] and dropped["job"] == job["jobId"]


def test_a_resubmission_keeps_the_teams_checkpoint_interval_but_not_the_stopped_runs_record(model, capsys):
    job = model.add_job("teamb", "RUNNING", tags={br.TAG_CHECKPOINT: "600", br.TAG_BORROWED: "1799999700000:true"})
    record_stop(model, job["jobId"])
    model._stop(job["jobId"], "GpuShare reclaim: for job x of team team-a")
    model.tick(1)
    model.events.clear()
    h.handler(failed_event(job), lambda_context())
    [sub] = model.submissions
    assert sub["tags"][br.TAG_CHECKPOINT] == "600" and br.TAG_BORROWED not in sub["tags"]
    assert set(sub["tags"]) == set(br.REQUEUE_TAG_KEYS)
    assert not [r for r in logged(capsys) if r["event"] == "requeue_tags_dropped"]


def test_a_stop_a_trailing_read_hid_is_resubmitted_when_its_failed_event_comes(model, capsys):
    model.stop_delay = (900, 900)  # Batch takes a while to stop the running job
    victim = borrowing(model)
    cycle(model)
    hidden = model.jobs[victim]
    hidden["isTerminated"], hidden["statusReason"] = False, None  # DescribeJobs trails the stop
    for _ in range(11):
        model.tick(60)
        cycle(model)
    assert model.table[victim]["status"] == {"S": "skipped"}  # no sign of the stop for 10 minutes
    assert model.submissions == []
    hidden["statusReason"] = "GpuShare reclaim: for job x of team team-a"
    model.tick(300)  # the stop ends the job: its FAILED event re-opens the record
    [event] = model.events
    result = h.handler(event, lambda_context(clock=model.clock))
    [sub] = model.requeued_from(victim)
    assert result["requeued"] == sub["jobId"] and model.table[victim]["status"] == {"S": "submitted"}
    assert any(r["event"] == "requeue_reopened" for r in logged(capsys))
    assert h.handler(event, lambda_context())["duplicate"] is True  # EventBridge's duplicate
    assert len(model.requeued_from(victim)) == 1


@pytest.mark.parametrize("shows", [{"isCancelled": True}, {"statusReason": "GpuShare reclaim: for job x of team a"}])
def test_a_stop_batch_shows_by_cancel_or_by_reason_is_waited_for(model, shows):
    job = model.add_job("teamb", "RUNNABLE", **shows)  # a job not yet started is cancelled, not terminated
    model.put_ledger_item({"jobId": {"S": job["jobId"]}, "status": {"S": "stopping"}, "settleAfter": {"N": "0"},
                           "openQueue": {"S": QUEUE_NAME}})
    cycle(model)
    assert model.table[job["jobId"]]["status"] == {"S": "stopping"}
    assert float(model.table[job["jobId"]]["settleAfter"]["N"]) > model.clock()


def test_an_event_for_a_job_describe_jobs_shows_running_waits_then_closes_its_record(model):
    job = model.add_job("teamb", "RUNNING")
    record_stop(model, job["jobId"])
    event = failed_event(dict(job, status="FAILED", statusReason="GpuShare reclaim: for job x of team a"))
    assert h.handler(event, lambda_context(clock=model.clock))["deferred"] is True  # the read may trail
    for _ in range(12):
        model.tick(60)
        cycle(model)
    assert model.table[job["jobId"]]["status"] == {"S": "skipped"} and model.submissions == []


def test_a_stop_record_is_settled_from_when_it_is_written_not_from_the_cycles_start(model):
    victim = borrowing(model)
    started = model.clock()
    model.clock.t += 40  # the cycle spent 40 s reading the queue before it recorded its stops
    h.run_cycle(model.batch, QUEUE, SETTINGS, now=started, clock=model.clock, time_left=lambda: 80.0,
                ledger=h.Ledger(model.dynamodb, "gpu-share-requeue", QUEUE_NAME))
    assert float(model.table[victim]["settleAfter"]["N"]) == pytest.approx(started + 40 + 80 + h.LISTING_SETTLE_SECONDS)


def test_the_cycle_leaves_a_record_the_index_shows_due_but_the_table_does_not(model):
    job = stopped_job(model)
    model.put_ledger_item({"jobId": {"S": job["jobId"]}, "status": {"S": "stopping"},
                           "settleAfter": {"N": str(model.clock() + 300)}, "openQueue": {"S": QUEUE_NAME}})
    ledger = h.Ledger(model.dynamodb, "gpu-share-requeue", QUEUE_NAME)
    monkey_due = [(job["jobId"], 0.0)]  # what a trailing index answers
    ledger.due = lambda now, limit=h.RECONCILE_LIMIT: monkey_due  # type: ignore[method-assign]
    assert h.reconcile(model.batch, ledger, clock=model.clock)["requeued"] == []
    assert model.submissions == [] and model.table[job["jobId"]]["status"] == {"S": "stopping"}


def test_a_look_for_an_earlier_attempts_job_that_cannot_finish_never_says_not_found(model):
    job = stopped_job(model)
    for _ in range(h.FIND_PAGE_LIMIT * br.DESCRIBE_BATCH + 1):  # that many jobs of the same name since
        model.add_job("teamb", "RUNNABLE", name=job["jobName"], created=model.clock())
    with pytest.raises(RuntimeError, match="did not finish"):
        h.find_requeued(model.batch, model.jobs[job["jobId"]], {"a1"})


# ---------------------------------------------------------------------------
# A record that keeps failing holds up no other


def poisoned(model: BatchModel, n: int) -> list[str]:
    """``n`` jobs the reclaimer stopped whose requeue cannot be finished: an earlier attempt
    claimed each and died, and more jobs share their name since than a look for that attempt's
    job may read (it raises, and says why: never "not found")."""
    jobs = []
    for _ in range(n):
        job = stopped_job(model, name="train-shared")
        model.put_ledger_item({"jobId": {"S": job["jobId"]}, "status": {"S": "claimed"}, "attempt": {"S": "died"},
                               "attempts": {"SS": ["died"]}, "settleAfter": {"N": str(model.clock() - 600)},
                               "since": {"N": str(model.clock() - 600)}, "openQueue": {"S": QUEUE_NAME}})
        jobs.append(job["jobId"])
    for _ in range(h.FIND_PAGE_LIMIT * br.DESCRIBE_BATCH + 1):  # ended jobs of the same name, since
        model.add_job("teamb", "SUCCEEDED", name="train-shared", created=model.clock())
    return jobs


def test_five_poisoned_records_do_not_stall_the_requeue_of_another(model, monkeypatch, capsys):
    """Five open records whose finishing raises (not a refusal), and, behind them in the index,
    a healthy one. The first cycle meets the five and pushes each back; the next cycle finishes
    the healthy one. The five are tried again 5, 10, 20, 40 and 60 minutes apart, then closed
    ``refused`` with a replayable event each in the on-failure queue; a replay, once the cause
    is gone, resubmits each exactly once."""
    sent: list[dict] = []
    monkeypatch.setattr(h, "_failure_notifier", lambda: sent.append)
    bad = poisoned(model, 5)
    healthy = stopped_job(model)  # its stop record's settle time is after theirs: sixth in the index
    model.tick(300)
    first = invoke(CYCLE)
    assert isinstance(first, h.ReclaimError) and "did not finish" in str(first)  # the alarm, as for a refusal
    failed = [r for r in logged(capsys) if r["event"] == "reconcile_failed"]
    assert sorted(r["job"] for r in failed) == sorted(bad) and {r["failures"] for r in failed} == {1}
    assert all(float(model.table[j]["settleAfter"]["N"]) >= model.clock() + 300 for j in bad)
    assert model.requeued_from(healthy["jobId"]) == []
    model.tick(60)
    assert cycle(model)["requeues"]["requeued"] == [healthy["jobId"]]  # the next cycle
    [sub] = model.requeued_from(healthy["jobId"])
    for _ in range(60):  # every 5 minutes for five hours
        model.tick(300)
        invoke(CYCLE)
    assert {model.table[j]["status"]["S"] for j in bad} == {"refused"}
    assert all(f"failed {h.FAILURE_LIMIT} tries" in model.table[j]["error"]["S"] for j in bad)
    assert {model.table[j]["failures"]["N"] for j in bad} == {str(h.FAILURE_LIMIT)}  # as the message says
    assert sorted(m["requestPayload"]["detail"]["jobId"] for m in sent) == sorted(bad)
    assert all(m["requestContext"]["approximateInvokeCount"] == h.FAILURE_LIMIT for m in sent)
    assert model.submissions == [sub]
    for jid in [j for j, job in model.jobs.items() if job["status"] == "SUCCEEDED"]:
        model.jobs[jid]["jobName"] = "another-name"  # the cause is gone
    for message in sent:  # an operator replays each message
        assert h.handler(message["requestPayload"], lambda_context(clock=model.clock))["requeued"]
    assert all(len(model.requeued_from(j)) == 1 for j in bad) and len(model.submissions) == 6
    assert {model.table[j]["status"]["S"] for j in bad} == {"submitted"}


def test_a_replay_that_still_fails_raises_so_the_event_stays_in_the_failure_queue(model, monkeypatch):
    sent: list[dict] = []
    monkeypatch.setattr(h, "_failure_notifier", lambda: sent.append)
    [bad] = poisoned(model, 1)
    for _ in range(40):
        model.tick(600)
        invoke(CYCLE)
    [message] = sent
    assert model.table[bad]["status"] == {"S": "refused"}
    with pytest.raises(RuntimeError, match="did not finish"):
        h.handler(message["requestPayload"], lambda_context(clock=model.clock))
    assert model.table[bad]["status"] == {"S": "refused"} and model.submissions == []


def test_a_look_for_an_earlier_attempts_job_is_bounded_in_time(model):
    """Pages of the look are asked while it has taken at most FIND_SECONDS: a slow listing ends
    the look (an error, never "not found") before the Lambda's time does."""
    job = stopped_job(model)
    for _ in range(500):  # five pages of jobs of the same name since
        model.add_job("teamb", "RUNNABLE", name=job["jobName"], created=model.clock())
    ticks = iter(range(0, 10_000, 20))  # each page takes 20 s
    before = len([r for r in model.requests if r[0] == "ListJobs"])
    with pytest.raises(RuntimeError, match=f"did not finish within {h.FIND_SECONDS} s"):
        h.find_requeued(model.batch, model.jobs[job["jobId"]], {"a1"}, clock=lambda: next(ticks))
    assert len([r for r in model.requests if r[0] == "ListJobs"]) - before == 2  # at 0 and 20 s; none at 40 s


def test_a_transient_failure_pushes_a_record_back_a_minute_uncounted(model):
    job = stopped_job(model)
    model.tick(300)
    add_fault(model, "DescribeJobs", *["error"] * 6)  # a Batch brownout through every retry
    errors = cycle(model)["requeues"]["errors"]
    assert [(e["job"], e["transient"], e["failures"]) for e in errors] == [(job["jobId"], True, None)]
    record = model.table[job["jobId"]]
    assert float(record["settleAfter"]["N"]) == pytest.approx(model.clock() + h.LISTING_SETTLE_SECONDS, abs=1)
    assert "failures" not in record
    model.tick(60)
    assert cycle(model)["requeues"]["requeued"] == [job["jobId"]]
