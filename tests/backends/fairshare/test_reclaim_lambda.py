"""The reclaim Lambda and the Batch queue reader against botocore's Stubber.

Every request and response is validated against the real Batch service model. The
"old runtime" client is built from the same model with ``TerminateJobs`` removed,
which is what an older botocore looks like.
"""

from __future__ import annotations

import gzip
import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import botocore
import botocore.session
import pytest
from botocore.stub import ANY, Stubber

from cdk_gpu_share.aws import batch_reader as br
from cdk_gpu_share.core.configuration.parse import parse_config
from cdk_gpu_share.core.records import metrics
from cdk_gpu_share.lambdas.reclaim import handler as h
from tests.builders import BATCH_NOW as NOW
from tests.builders import QUEUE, SETTINGS, expect_listing, job, new_client


@pytest.fixture(scope="module")
def old_model_path(tmp_path_factory) -> Path:
    """botocore's Batch model minus TerminateJobs (an older runtime)."""
    src = Path(botocore.__file__).parent / "data" / "batch" / "2016-08-10"
    root = tmp_path_factory.mktemp("oldbotocore")
    dst = root / "batch" / "2016-08-10"
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if not f.name.startswith("service-2"):
            shutil.copy(f, dst / f.name)
    raw = src / "service-2.json.gz"
    model = json.loads(gzip.decompress(raw.read_bytes())) if raw.exists() else json.loads((src / "service-2.json").read_text())
    del model["operations"]["TerminateJobs"]
    (dst / "service-2.json").write_text(json.dumps(model))
    return root


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch):
    monkeypatch.setattr(br.time, "sleep", lambda s: None)


class Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        self.lines.append(line)

    def records(self) -> list[dict]:
        return [json.loads(x) for x in self.lines]


def logged(capsys) -> list[dict]:
    out = capsys.readouterr().out
    return [json.loads(x) for x in out.splitlines() if x.startswith("{")]


# ---------------------------------------------------------------------------
# Share identifiers and settings


def test_share_identifier_keeps_letters_and_digits():
    assert br.share_identifier("team-a") == "teama"
    assert br.share_identifier("ML_ops.2") == "MLops2"


def test_colliding_share_identifiers_name_both_teams():
    problems = br.share_identifier_problems(["team-a", "teama", "---"])
    text = "\n".join(str(p) for p in problems)
    assert "'team-a'" in text and "'teama'" in text and "fair-share identifier 'teama'" in text
    assert "---" in text and "empty fair-share identifier" in text


def test_settings_from_the_default_config_count_gpus():
    config = parse_config({
        "teams": [
            {"name": "team-a", "guarantee": {"g5.xlarge": 1}, "in_team_preemption": True},
            {"name": "team-b", "guarantee": {"g5.12xlarge": 1}, "sharing": "reserve"},
            {"name": "team-c", "guarantee": {"g5.xlarge": 1}, "borrow_limit_percent": 200},
        ],
        "fairshare": {"capacity": {"g5.xlarge": 2, "g5.12xlarge": 1}, "reclaim": {"reclaim_after_seconds": 60}},
    })
    settings = br.settings_from_config(config)
    assert settings["capacity"] == {"gpu": 6}
    assert settings["queue"] == "gpu-share-fairshare"
    assert settings["settings"] == {"reclaim_after_seconds": 60, "min_runtime_seconds": 0}
    teams = {t["name"]: t for t in settings["teams"]}
    assert teams["team-a"] == {"name": "team-a", "share_identifier": "teama", "guarantee": {"gpu": 1},
                               "in_team_preemption": True}
    assert teams["team-b"]["guarantee"] == {"gpu": 4} and teams["team-b"]["sharing"] == "reserve"
    assert teams["team-c"]["borrow_limit_percent"] == 200


def test_long_settings_are_packed_and_round_trip():
    many = dict(SETTINGS, teams=[{"name": f"team-{i}", "share_identifier": f"team{i}", "guarantee": {"gpu": 1}}
                                 for i in range(100)])
    text = br.encode_settings(many)
    assert text.startswith("z:") and len(text) < 4096
    assert br.decode_settings(text) == many
    assert br.decode_settings(br.encode_settings(SETTINGS)) == SETTINGS


# ---------------------------------------------------------------------------
# Reading the queue


def test_reader_paginates_and_builds_the_contract_state():
    client = new_client()
    jobs = [job(f"p{i}", "teama", "RUNNABLE", created=NOW - 10 * i, priority=i % 3) for i in range(3)]
    jobs += [job("s1", "teamb", "STARTING", 2)]
    jobs += [job(f"r{i}", "teamc", "RUNNING", started=NOW - 60) for i in range(2)]
    with Stubber(client) as stub:
        expect_listing(stub, jobs, page=2)
        snap = br.read_queue(client, QUEUE, SETTINGS, NOW)
        stub.assert_no_pending_responses()
    assert snap.calls == {"ListJobs": 4, "DescribeJobs": 1}
    state = snap.state
    assert state["capacity"] == {"gpu": 3} and state["now"] == NOW
    assert [t["name"] for t in state["teams"]] == ["team-a", "team-b", "team-c"]
    assert all("share_identifier" not in t for t in state["teams"])
    by_id = {j["id"]: j for j in state["jobs"]}
    assert by_id["p1"] == {"id": "p1", "team": "team-a", "state": "pending", "demand": {"gpu": 1.0},
                           "priority": 1, "since": NOW - 10, "terminating": False}
    assert by_id["s1"]["state"] == "running" and by_id["s1"]["demand"] == {"gpu": 2.0}
    assert by_id["r0"]["since"] == NOW - 60
    from cdk_gpu_share.core.policy import reclaim

    reclaim.parse_state(state)  # valid input for the planner


def test_120_jobs_make_two_describe_calls():
    client = new_client()
    jobs = [job(f"r{i:03}", "teama", "RUNNING") for i in range(120)]
    with Stubber(client) as stub:
        expect_listing(stub, jobs)
        snap = br.read_queue(client, QUEUE, dict(SETTINGS, capacity={"gpu": 200}), NOW)
        stub.assert_no_pending_responses()
    assert snap.calls["DescribeJobs"] == 2
    assert len(snap.state["jobs"]) == 120


def test_a_job_gone_between_listing_and_describe_is_dropped():
    client = new_client()
    jobs = [job("r1", "teama", "RUNNING"), job("r2", "teamb", "RUNNING")]
    with Stubber(client) as stub:
        expect_listing(stub, jobs, describe=False)
        done = dict(jobs[1], status="SUCCEEDED")
        stub.add_response("describe_jobs", {"jobs": [jobs[0], done]}, {"jobs": ["r1", "r2"]})
        state = br.read_queue_state(client, QUEUE, SETTINGS, NOW)
    assert [j["id"] for j in state["jobs"]] == ["r1"]


def test_terminated_jobs_count_as_terminating():
    client = new_client()
    jobs = [job("r1", "teama", "RUNNING", terminated=True)]
    with Stubber(client) as stub:
        expect_listing(stub, jobs)
        state = br.read_queue_state(client, QUEUE, SETTINGS, NOW)
    assert state["jobs"][0]["terminating"] is True


def test_an_unknown_share_becomes_a_team_without_guarantee():
    client = new_client()
    with Stubber(client) as stub:
        expect_listing(stub, [job("x1", "ghost", "RUNNING")])
        snap = br.read_queue(client, QUEUE, SETTINGS, NOW)
    assert snap.unknown_shares == ["ghost"]
    assert snap.state["teams"][-1] == {"name": "share:ghost", "guarantee": {"gpu": 0}}
    assert snap.state["jobs"][0]["team"] == "share:ghost"


def test_throttling_and_server_errors_are_retried_with_backoff():
    client = new_client()
    waits: list[float] = []
    jobs = [job("r1", "teama", "RUNNING")]
    with Stubber(client) as stub:
        stub.add_client_error("list_jobs", "ThrottlingException", "Rate exceeded", 400)
        stub.add_client_error("list_jobs", "ClientException", "Too Many Requests.", 429)
        expect_listing(stub, jobs, describe=False)
        stub.add_client_error("describe_jobs", "ServerException", "internal", 500)
        stub.add_response("describe_jobs", {"jobs": jobs}, {"jobs": ["r1"]})
        snap = br.read_queue(client, QUEUE, SETTINGS, NOW, sleep=waits.append)
        stub.assert_no_pending_responses()
    assert len(waits) == 3 and all(0 <= w <= 5 for w in waits)
    assert snap.calls == {"ListJobs": 5, "DescribeJobs": 2}


def test_a_client_error_is_not_retried():
    client = new_client()
    with Stubber(client) as stub:
        stub.add_client_error("list_jobs", "ClientException", "queue not found", 400)
        with pytest.raises(botocore.exceptions.ClientError):
            br.read_queue(client, QUEUE, SETTINGS, NOW, sleep=lambda s: pytest.fail("no retry"))


def test_retries_stop_after_max_attempts():
    client = new_client()
    with Stubber(client) as stub:
        for _ in range(3):
            stub.add_client_error("list_jobs", "ThrottlingException", "Rate exceeded", 400)
        with pytest.raises(botocore.exceptions.ClientError):
            br.call_with_retry(client, "ListJobs", max_attempts=3, sleep=lambda s: None, jobQueue=QUEUE)
        stub.assert_no_pending_responses()


# ---------------------------------------------------------------------------
# The cycle


def borrowing_queue(n_victims: int) -> tuple[dict, list[dict]]:
    """team-b runs n+2 one-GPU jobs on a fleet of n+2 GPUs; team-a (guarantee n) wants n back."""
    settings = dict(SETTINGS, capacity={"gpu": n_victims + 2}, teams=[
        {"name": "team-a", "share_identifier": "teama", "guarantee": {"gpu": n_victims}},
        {"name": "team-b", "share_identifier": "teamb", "guarantee": {"gpu": 2}},
    ])
    jobs = [job("want", "teama", "RUNNABLE", n_victims, created=NOW - 30)]
    jobs += [job(f"b{i:03}", "teamb", "RUNNING", started=NOW - 1000 + i) for i in range(n_victims + 2)]
    return settings, jobs


def test_70_victims_make_two_terminate_jobs_calls_naming_the_beneficiary():
    client = new_client()
    settings, jobs = borrowing_queue(70)
    out = Lines()
    with Stubber(client) as stub:
        expect_listing(stub, jobs)
        first = {"jobs": ANY, "reason": "GpuShare reclaim: for job want of team team-a"}
        stub.add_response("terminate_jobs", {"successful": [f"b{i:03}" for i in range(71, 21, -1)], "errors": []}, first)
        stub.add_response("terminate_jobs", {"successful": [f"b{i:03}" for i in range(21, 1, -1)], "errors": []}, first)
        result = h.run_cycle(client, QUEUE, settings, now=NOW, emit=out)
        stub.assert_no_pending_responses()
    assert len(result["stopped"]) == 70 and result["not_stopped"] == []
    assert result["calls"] == {"ListJobs": 3, "DescribeJobs": 1, "TerminateJobs": 2}
    # Victim order: most recent start first, so the two oldest jobs keep running.
    assert set(result["stopped"]) == {f"b{i:03}" for i in range(2, 72)}


def test_calls_equal_the_minimum():
    client = new_client()
    settings, jobs = borrowing_queue(70)
    with Stubber(client) as stub:
        expect_listing(stub, jobs)
        for _ in range(2):
            stub.add_response("terminate_jobs", {"successful": [], "errors": []})
        result = h.run_cycle(client, QUEUE, settings, now=NOW, emit=Lines())
    counts = {"RUNNABLE": 1, "RUNNING": 72}
    assert sum(result["calls"].values()) == br.minimum_calls(counts, 70) == 3 + 1 + 2


def test_partial_terminate_failure_is_logged_and_the_rest_proceeds(capsys):
    client = new_client()
    settings, jobs = borrowing_queue(60)
    with Stubber(client) as stub:
        expect_listing(stub, jobs)
        stub.add_response("terminate_jobs", {"successful": [], "errors": [
            {"job": "b061", "code": "ClientException", "message": "job in terminal state"}]})
        stub.add_response("terminate_jobs", {"successful": [], "errors": []})
        result = h.run_cycle(client, QUEUE, settings, now=NOW, emit=Lines())
        stub.assert_no_pending_responses()
    assert result["not_stopped"] == [{"job": "b061", "error": "ClientException: job in terminal state"}]
    assert len(result["stopped"]) == 59
    events = [r["event"] for r in logged(capsys)]
    assert "terminate_partial" in events and events[-1] == "cycle_done"


def test_a_job_denied_in_a_bulk_terminate_raises_after_the_rest():
    client = new_client()
    settings, jobs = borrowing_queue(2)
    with Stubber(client) as stub:
        expect_listing(stub, jobs)
        stub.add_response("terminate_jobs", {"successful": ["b003"], "errors": [
            {"job": "b002", "code": "AccessDeniedException", "message": "not authorized to perform batch:TerminateJob"}]})
        with pytest.raises(h.ReclaimError, match="1 of 2 victims could not be stopped: b002: AccessDenied"):
            h.run_cycle(client, QUEUE, settings, now=NOW, emit=Lines())


def test_a_failed_terminate_call_raises_after_the_rest_with_a_log_of_what_was_stopped(capsys):
    client = new_client()
    settings, jobs = borrowing_queue(60)
    with Stubber(client) as stub:
        expect_listing(stub, jobs)
        stub.add_client_error("terminate_jobs", "AccessDeniedException", "not authorized", 403)
        stub.add_response("terminate_jobs", {"successful": [], "errors": []})
        with pytest.raises(h.ReclaimError, match="50 of 60 victims could not be stopped"):
            h.run_cycle(client, QUEUE, settings, now=NOW, emit=Lines())
        stub.assert_no_pending_responses()
    done = [r for r in logged(capsys) if r["event"] == "cycle_done"][0]
    assert len(done["stopped"]) == 10 and len(done["not_stopped"]) == 50


def test_an_exception_while_reading_logs_what_was_and_was_not_stopped(capsys):
    client = new_client()
    with Stubber(client) as stub:
        stub.add_client_error("list_jobs", "ClientException", "bad queue", 400)
        out = Lines()
        with pytest.raises(botocore.exceptions.ClientError):
            h.run_cycle(client, QUEUE, SETTINGS, now=NOW, emit=out)
    failed = [r for r in logged(capsys) if r["event"] == "cycle_failed"][0]
    assert failed["stopped"] == [] and failed["not_stopped"] == [] and "bad queue" in failed["error"]
    errors = [r for r in out.records() if metrics.CYCLE_ERRORS in r]
    assert errors[0][metrics.CYCLE_ERRORS] == 1


def test_an_exception_mid_terminate_logs_the_jobs_already_stopped(capsys, monkeypatch):
    client = new_client()
    settings, jobs = borrowing_queue(60)
    real_log = h.log

    def log(event, *args, **fields):
        if event == "terminate_partial":
            raise RuntimeError("boom")
        real_log(event, *args, **fields)

    monkeypatch.setattr(h, "log", log)
    with Stubber(client) as stub:
        expect_listing(stub, jobs)
        stub.add_response("terminate_jobs", {"successful": [], "errors": [
            {"job": "b061", "code": "ClientException", "message": "job in terminal state"}]})
        with pytest.raises(RuntimeError, match="boom"):
            h.run_cycle(client, QUEUE, settings, now=NOW, emit=Lines())
        stub.assert_no_pending_responses()
    failed = [r for r in logged(capsys) if r["event"] == "cycle_failed"][0]
    assert len(failed["stopped"]) == 49 and "b061" not in failed["stopped"]
    errors = {n["job"]: n["error"] for n in failed["not_stopped"]}
    assert errors.pop("b061") == "ClientException: job in terminal state"
    assert len(errors) == 10 and set(errors.values()) == {"not attempted"}


def test_dry_run_logs_the_plan_and_stops_nothing(capsys):
    client = new_client()
    settings, jobs = borrowing_queue(3)
    with Stubber(client) as stub:
        expect_listing(stub, jobs)
        result = h.run_cycle(client, QUEUE, settings, now=NOW, dry_run=True, emit=Lines())
        stub.assert_no_pending_responses()  # no TerminateJobs was stubbed, none was sent
    assert result["stopped"] == [] and len(result["planned"]) == 3
    plan = [r for r in logged(capsys) if r["event"] == "plan"][0]
    assert plan["dry_run"] is True and len(plan["preemptions"]) == 3


def test_old_botocore_falls_back_to_terminate_job(old_model_path, capsys):
    client = new_client(old_model_path)
    assert "TerminateJobs" not in client.meta.service_model.operation_names
    settings, jobs = borrowing_queue(2)
    with Stubber(client) as stub:
        expect_listing(stub, jobs)
        stub.add_response("terminate_job", {}, {"jobId": "b003", "reason": "GpuShare reclaim: for job want of team team-a"})
        stub.add_client_error("terminate_job", "ClientException", "Job b002 not found", 400)
        result = h.run_cycle(client, QUEUE, settings, now=NOW, emit=Lines())
        stub.assert_no_pending_responses()
    assert result["stopped"] == ["b003"]
    assert result["not_stopped"] == [{"job": "b002", "error": ANY}]
    assert result["calls"]["TerminateJob"] == 2
    assert "terminate_fallback" in [r["event"] for r in logged(capsys)]


def test_fallback_retries_throttled_terminate_job(old_model_path):
    client = new_client(old_model_path)
    with Stubber(client) as stub:
        stub.add_client_error("terminate_job", "ClientException", "Too Many Requests.", 429)
        stub.add_response("terminate_job", {})
        stopped, not_stopped = h.terminate(client, [{"job": "j1", "team": "b", "reason": "borrow_limit"}],
                                           sleep=lambda s: None)
    assert stopped == ["j1"] and not_stopped == []


def test_borrow_limit_reason_names_the_team():
    assert h.reason_for([{"job": "j", "team": "team-b", "reason": "borrow_limit"}]) == \
        "GpuShare reclaim: team team-b above its borrow limit"


def test_a_long_reason_is_cut_with_a_count():
    victims = [{"job": f"v{i}", "team": "b", "reason": "reclaim", "beneficiary": f"{i:036}", "beneficiary_team": "team-a"}
               for i in range(50)]
    reason = h.reason_for(victims)
    assert len(reason) <= h.MAX_REASON and reason.endswith("more") and reason.startswith(br.RECLAIM_REASON_PREFIX)


def test_metrics_per_team_in_embedded_metric_format():
    client = new_client()
    settings, jobs = borrowing_queue(2)
    out = Lines()
    with Stubber(client) as stub:
        expect_listing(stub, jobs)
        stub.add_response("terminate_jobs", {"successful": ["b003", "b002"], "errors": []})
        h.run_cycle(client, QUEUE, settings, now=NOW, emit=out)
    records = out.records()
    teams = {r[metrics.DIM_TEAM]: r for r in records if metrics.DIM_TEAM in r}
    a, b = teams["team-a"], teams["team-b"]
    directive = a["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == metrics.NAMESPACE
    assert directive["Dimensions"] == [[metrics.DIM_QUEUE, metrics.DIM_TEAM]]
    assert {m["Name"] for m in directive["Metrics"]} == {
        metrics.USAGE, metrics.GUARANTEE, metrics.BORROWED, metrics.PENDING,
        metrics.PREEMPTIONS, metrics.RECLAIMS, metrics.LENDER_WAIT_SECONDS}
    assert a[metrics.DIM_QUEUE] == "gpu-share-fairshare"
    assert (a[metrics.USAGE], a[metrics.GUARANTEE], a[metrics.PENDING], a[metrics.RECLAIMS]) == (0, 2, 1, 1)
    assert a[metrics.LENDER_WAIT_SECONDS] == 30
    assert (b[metrics.USAGE], b[metrics.BORROWED], b[metrics.PREEMPTIONS]) == (4, 2, 2)
    queue_line = [r for r in records if metrics.CYCLE_DURATION_MS in r][0]
    assert queue_line[metrics.CYCLE_ERRORS] == 0


def test_the_lender_wait_counts_only_jobs_within_their_teams_guarantee():
    """team-a uses 1 of its 2 guaranteed GPUs: its 4-GPU job, older, can never be within it and
    does not count; its 1-GPU job does (U + demand <= G, the planner's rule)."""
    from types import SimpleNamespace

    state = {"teams": [{"name": "team-a", "guarantee": {br.RESOURCE: 2}}], "jobs": [
        {"id": "r", "team": "team-a", "state": "running", "terminating": False, "demand": {br.RESOURCE: 1},
         "since": NOW - 900},
        {"id": "big", "team": "team-a", "state": "pending", "terminating": False, "demand": {br.RESOURCE: 4},
         "since": NOW - 3600},
        {"id": "small", "team": "team-a", "state": "pending", "terminating": False, "demand": {br.RESOURCE: 1},
         "since": NOW - 120}]}
    out = Lines()
    h._emit_team_metrics("q", SimpleNamespace(state=state), {"preemptions": []}, [], NOW, emit=out)
    [a] = [r for r in out.records() if r.get(metrics.DIM_TEAM) == "team-a"]
    assert (a[metrics.PENDING], a[metrics.LENDER_WAIT_SECONDS]) == (2, 120)


# ---------------------------------------------------------------------------
# Requeue of stopped jobs


def stopped_detail(**extra) -> dict:
    detail = job("b002", "teamb", "FAILED")
    detail.update({
        "statusReason": "GpuShare reclaim: for job want of team team-a",
        "isTerminated": True,
        "stoppedAt": int(NOW * 1000),
        "schedulingPriority": 5,
        "parameters": {"epochs": "10"},
        "retryStrategy": {"attempts": 3, "evaluateOnExit": [{"onStatusReason": "GpuShare reclaim*", "action": "EXIT"}]},
        "timeout": {"attemptDurationSeconds": 3600},
        "propagateTags": True,
        "tags": {"gpu-share:queue": "gpu-share-fairshare", "gpu-share:team": "team-b", "aws:batch:x": "y"},
    })
    detail["container"] = {
        "command": ["python", "train.py"],
        "environment": [{"name": "LR", "value": "0.1"}, {"name": "AWS_BATCH_JOB_ID", "value": "b002"}],
        "resourceRequirements": [{"type": "GPU", "value": "1"}],
    }
    detail.update(extra)
    return detail


def test_a_job_that_failed_for_another_reason_is_not_resubmitted():
    client = new_client()
    with Stubber(client):  # no call at all: the event alone says so
        assert h.requeue(client, stopped_detail(statusReason="Essential container exited"), queue=QUEUE,
                         ledger=None) == {"requeued": None}
        assert h.requeue(client, stopped_detail(jobQueue=QUEUE + "x"), queue=QUEUE, ledger=None) == {
            "requeued": None}


def test_an_array_child_cannot_be_resubmitted_and_raises(capsys):
    from tests.batch_model import BatchModel, Clock

    model = BatchModel(clock=Clock())
    child = model.add_job("teamb", "FAILED", arrayProperties={"index": 3},
                          statusReason="GpuShare reclaim: for job x of team team-a")
    ledger = h.Ledger(model.dynamodb, "gpu-share-requeue", "gpu-share-fairshare")
    ledger.stopping(child["jobId"], now=model.clock(), settle_after=model.clock() + 180)  # as the cycle does
    with pytest.raises(h.ReclaimError, match="child of an array job"):
        h.requeue(model.batch, child, queue=QUEUE, ledger=ledger, clock=model.clock)
    assert [r for r in logged(capsys) if r["event"] == "requeue_failed"]
    assert model.table[child["jobId"]]["status"] == {"S": "refused"} and model.submissions == []


# ---------------------------------------------------------------------------
# The entry point


@pytest.fixture
def lambda_env(monkeypatch):
    monkeypatch.setenv("GPU_SHARE_QUEUE", QUEUE)
    monkeypatch.setenv("GPU_SHARE_SETTINGS", br.encode_settings(SETTINGS))
    monkeypatch.delenv("GPU_SHARE_DRY_RUN", raising=False)
    client = new_client()
    monkeypatch.setattr(h, "_client", client)
    monkeypatch.setattr(h, "_last_cycle_started", 0.0)
    monkeypatch.setattr(h, "_now", lambda: NOW)
    monkeypatch.setattr(h, "_cache", br.DescribeCache())
    return client


def scheduled_event() -> dict:
    return {"source": "aws.events", "detail-type": "Scheduled Event", "time": "2027-01-15T08:00:00Z", "detail": {}}


def test_handler_runs_a_cycle_on_schedule(lambda_env):
    with Stubber(lambda_env) as stub:
        expect_listing(stub, [job("r1", "teama", "RUNNING")])
        result = h.handler(scheduled_event())
        stub.assert_no_pending_responses()
    assert result["stopped"] == [] and result["calls"]["ListJobs"] == 3


def test_handler_dry_run_from_environment(lambda_env, monkeypatch):
    monkeypatch.setenv("GPU_SHARE_DRY_RUN", "true")
    settings, jobs = borrowing_queue(1)
    monkeypatch.setenv("GPU_SHARE_SETTINGS", br.encode_settings(settings))
    with Stubber(lambda_env) as stub:
        expect_listing(stub, jobs)
        result = h.handler(scheduled_event())
    assert result["dry_run"] is True and result["planned"] and result["stopped"] == []


def test_handler_skips_a_runnable_event_an_earlier_cycle_already_saw(lambda_env, monkeypatch):
    monkeypatch.setattr(h, "_last_cycle_started", 1_900_000_000.0)
    event = {"source": "aws.batch", "detail-type": "Batch Job State Change", "time": "2027-01-15T08:00:00Z",
             "detail": {"jobId": "p1", "status": "RUNNABLE", "jobQueue": QUEUE}}
    with Stubber(lambda_env):
        assert h.handler(event) == {"skipped": True}


def test_handler_runs_a_cycle_for_a_runnable_event_newer_than_the_last_cycle(lambda_env, monkeypatch):
    event_time = 1_900_000_000.0
    monkeypatch.setattr(h, "_last_cycle_started", event_time + 1)  # within the margin: may not have seen it
    event = {"source": "aws.batch", "detail-type": "Batch Job State Change",
             "time": datetime.fromtimestamp(event_time, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
             "detail": {"jobId": "p1", "status": "RUNNABLE", "jobQueue": QUEUE}}
    with Stubber(lambda_env) as stub:
        expect_listing(stub, [job("p1", "teama", "RUNNABLE")])
        assert "skipped" not in h.handler(event)
        stub.assert_no_pending_responses()
    assert h._last_cycle_started == NOW


def test_a_resubmission_keeps_the_queue_tag_the_reclaimer_may_submit_with():
    params = h.submit_params(stopped_detail(tags={}))
    assert params["tags"] == {"gpu-share:queue": "gpu-share-fairshare", "gpu-share:requeued-from": "b002"}


def test_gpus_of_counts_container_and_ecs_task_jobs():
    assert br.gpus_of({"container": {"resourceRequirements": [{"type": "GPU", "value": "2"}]}}) == 2
    assert br.gpus_of({"ecsProperties": {"taskProperties": [{"containers": [
        {"resourceRequirements": [{"type": "GPU", "value": "1"}]},
        {"resourceRequirements": [{"type": "MEMORY", "value": "100"}, {"type": "GPU", "value": "3"}]},
    ]}]}}) == 4
    assert br.gpus_of({"eksProperties": {}}) == 0


def test_gpus_of_counts_every_node_of_a_multi_node_job():
    """A multi-node job has no ``container``: its GPUs are per node range, times the nodes."""
    detail = {"nodeProperties": {"numNodes": 5, "mainNode": 0, "nodeRangeProperties": [
        {"targetNodes": "0", "container": {"resourceRequirements": [{"type": "GPU", "value": "1"}]}},
        {"targetNodes": "1:", "container": {"resourceRequirements": [
            {"type": "VCPU", "value": "8"}, {"type": "GPU", "value": "4"}]}},
    ]}}
    assert br.gpus_of(detail) == 1 + 4 * 4
    assert br.gpus_of({"nodeProperties": {"numNodes": 4, "nodeRangeProperties": [
        {"targetNodes": ":1", "container": {"resourceRequirements": [{"type": "GPU", "value": "2"}]}},
        {"targetNodes": "2:3", "ecsProperties": {"taskProperties": [{"containers": [
            {"resourceRequirements": [{"type": "GPU", "value": "1"}]},
            {"resourceRequirements": [{"type": "GPU", "value": "1"}]}]}]}},
    ]}}) == 2 * 2 + 2 * 2


def test_a_running_multi_node_job_holds_its_gpus_in_the_state():
    client = new_client()
    mnp = job("m1", "teamb", "RUNNING")
    del mnp["container"]
    mnp["nodeProperties"] = {"numNodes": 2, "mainNode": 0, "nodeRangeProperties": [
        {"targetNodes": "0:1", "container": {"resourceRequirements": [{"type": "GPU", "value": "1"}]}}]}
    with Stubber(client) as stub:
        expect_listing(stub, [mnp])
        state = br.read_queue_state(client, QUEUE, SETTINGS, NOW)
    assert state["jobs"][0]["demand"] == {"gpu": 2.0}


def test_a_cycle_near_the_lambda_timeout_stops_cleanly_and_logs_what_it_did_not_attempt(capsys):
    client = new_client()
    settings, jobs = borrowing_queue(70)
    seconds_left = iter([100.0, 5.0])
    with Stubber(client) as stub:
        expect_listing(stub, jobs)
        stub.add_response("terminate_jobs", {"successful": [f"b{i:03}" for i in range(71, 21, -1)], "errors": []})
        result = h.run_cycle(client, QUEUE, settings, now=NOW, emit=Lines(), time_left=lambda: next(seconds_left))
        stub.assert_no_pending_responses()
    assert len(result["stopped"]) == 50
    assert len(result["not_stopped"]) == 20
    assert all(n["error"] == "not attempted: the Lambda's time ran out" for n in result["not_stopped"])
    assert '"deadline"' in capsys.readouterr().out
