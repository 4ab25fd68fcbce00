"""The reclaim Lambda under faults (issue 9 items 14-18) and its describe cache (issue 10 part 3).

Every call goes through real boto3 clients answered by :mod:`tests.batch_model` from
botocore's ``before-send`` event: botocore validates and serializes every request.
"""

from __future__ import annotations

import json

import pytest

from cdk_gpu_share.aws import batch_reader as br
from cdk_gpu_share.lambdas.reclaim import handler as h
from tests.batch_model import QUEUE, BatchModel, Clock, add_fault, lambda_context

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
    m = BatchModel(clock=Clock())
    monkeypatch.setenv("GPU_SHARE_QUEUE", QUEUE)
    monkeypatch.setenv("GPU_SHARE_SETTINGS", br.encode_settings(SETTINGS))
    monkeypatch.setenv(h.REQUEUE_TABLE_ENV, "gpu-share-requeue")
    monkeypatch.delenv("GPU_SHARE_DRY_RUN", raising=False)
    monkeypatch.setattr(h, "_client", m.batch)
    monkeypatch.setattr(h, "_dynamodb", m.dynamodb)
    monkeypatch.setattr(h, "_now", m.clock)
    monkeypatch.setattr(h, "_last_cycle_started", 0.0)
    monkeypatch.setattr(h, "_cache", br.DescribeCache())
    return m


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


def stopped_job(model: BatchModel, **extra) -> dict:
    job = model.add_job("teamb", "RUNNING", priority=5, tags={"project": "llm"}, **extra)
    model._stop(job["jobId"], "GpuShare reclaim: for job x of team team-a")
    model.tick(1)
    model.events.clear()
    return job


def failed_event(job: dict, *, tags: bool = True) -> dict:
    detail = json.loads(json.dumps(job))
    if not tags:
        detail.pop("tags", None)
    return {"source": "aws.batch", "detail-type": "Batch Job State Change", "time": "2027-01-15T08:00:00Z",
            "detail": detail}


# ---------------------------------------------------------------------------
# Item 18: network errors are retried


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
# Item 15: a stop that may have been applied is re-read, never sent twice


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
# Items 14, 16, 17: requeue exactly once, as the job was


def test_a_stopped_job_is_resubmitted_from_describe_jobs_when_the_event_has_no_tags(model):
    job = stopped_job(model)
    result = h.handler(failed_event(job, tags=False), lambda_context())
    [sub] = model.submissions
    assert result == {"requeued": sub["jobId"], "from": job["jobId"]}
    assert sub["tags"]["gpu-share:team"] == "teamb" and sub["tags"]["project"] == "llm"
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


def test_a_lost_submit_answer_while_the_listing_lags_waits_for_the_listing_then_submits_nothing(model, capsys):
    model.listing_lag = (20, 20)
    job = stopped_job(model)
    add_fault(model, "SubmitJob", "timeout_after")
    with pytest.raises(h.ReclaimError, match="may have been applied"):
        h.handler(failed_event(job), lambda_context())
    assert [r for r in logged(capsys) if r["event"] == "requeue_failed" and "unknown" in r.get("outcome", "")]
    model.tick(30)  # Lambda's first retry: the listing has not settled for the ledger yet
    with pytest.raises(h.ReclaimError, match="not known yet"):
        h.handler(failed_event(job), lambda_context())
    model.tick(120)  # the second retry finds the job the lost answer created
    result = h.handler(failed_event(job), lambda_context())
    assert len(model.submissions) == 1 and result["requeued"] == model.submissions[0]["jobId"]
    assert result["duplicate"] is True


def test_a_submit_refused_before_it_was_applied_is_retried_by_the_next_invocation(model):
    job = stopped_job(model)
    add_fault(model, "SubmitJob", *["throttle"] * 6)
    with pytest.raises(Exception):
        h.handler(failed_event(job), lambda_context())
    assert model.submissions == []
    result = h.handler(failed_event(job), lambda_context())
    assert len(model.submissions) == 1 and result["requeued"] == model.submissions[0]["jobId"]


def test_a_duplicate_event_while_the_listing_lags_submits_nothing(model):
    model.listing_lag = (3_600, 3_600)  # ListJobs would not show the resubmission for an hour
    job = stopped_job(model)
    first = h.handler(failed_event(job), lambda_context())
    second = h.handler(failed_event(job), lambda_context())
    assert len(model.submissions) == 1
    assert second == {"requeued": first["requeued"], "from": job["jobId"], "duplicate": True}


def test_a_crash_between_submit_and_ledger_update_is_resolved_by_the_attempt_tag(model):
    job = stopped_job(model)
    add_fault(model, "UpdateItem", *["error"] * 6)  # the ledger never learns the new job
    with pytest.raises(Exception):
        h.handler(failed_event(job), lambda_context())
    assert len(model.submissions) == 1
    model.tick(h.DEFAULT_INVOCATION_SECONDS + h.LISTING_SETTLE_SECONDS + 1)
    result = h.handler(failed_event(job), lambda_context())
    assert len(model.submissions) == 1 and result["requeued"] == model.submissions[0]["jobId"]


def test_a_forged_resubmission_does_not_stop_the_requeue(model):
    """A team's job with the same name and a requeued-from tag is not taken for the
    resubmission: only the ledger's attempt id (unknown to teams) counts."""
    job = stopped_job(model)
    model.add_job("teama", "RUNNABLE", name=job["jobName"], created=model.clock(),
                  tags={"gpu-share:requeued-from": job["jobId"], "gpu-share:requeue-attempt": "guess"})
    model.table[job["jobId"]] = {"jobId": {"S": job["jobId"]}, "status": {"S": "claimed"},
                                 "attempt": {"S": "crashed"}, "settleAfter": {"N": "0"}}
    result = h.handler(failed_event(job), lambda_context())
    assert len(model.submissions) == 1 and result["requeued"] == model.submissions[0]["jobId"]


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


def test_an_event_for_a_job_describe_jobs_shows_otherwise_submits_nothing(model):
    job = model.add_job("teamb", "RUNNING")
    event = failed_event(dict(job, status="FAILED", statusReason="GpuShare reclaim: for job x of team a"))
    assert h.handler(event, lambda_context()) == {"requeued": None}
    assert model.submissions == []


# ---------------------------------------------------------------------------
# Issue 10 part 3: the describe cache


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
