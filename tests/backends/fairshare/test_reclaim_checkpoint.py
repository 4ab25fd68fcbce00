"""The reclaim Lambda with ``victim_order: checkpoint``: checkpoint intervals from the jobs'
tags, and the record of each run (``gpu-share:borrowed``), kept on the job across cold starts.

Batch and DynamoDB are the in-memory model of ``tests/batch_model.py`` behind real boto3
clients (botocore validates every request, TagResource's path-borne ARN included).
"""

from __future__ import annotations

import json

import pytest

from cdk_gpu_share.aws import batch_reader as br
from cdk_gpu_share.lambdas.reclaim import handler as h
from tests.batch_model import QUEUE, BatchModel, lambda_context, reclaim_lambda_model

SETTINGS = {
    "queue": "gpu-share-fairshare",
    "capacity": {"gpu": 4},
    "settings": {"reclaim_after_seconds": 0, "min_runtime_seconds": 0, "victim_order": "checkpoint"},
    "teams": [
        {"name": "team-a", "share_identifier": "teama", "guarantee": {"gpu": 2}},
        {"name": "team-b", "share_identifier": "teamb", "guarantee": {"gpu": 2}, "checkpoint_seconds": 600},
    ],
}
CYCLE = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch):
    monkeypatch.setattr(br.time, "sleep", lambda s: None)


def _model(monkeypatch, settings: dict) -> BatchModel:
    return reclaim_lambda_model(monkeypatch, settings)


@pytest.fixture
def model(monkeypatch) -> BatchModel:
    return _model(monkeypatch, SETTINGS)


def cycle(model: BatchModel) -> dict:
    model.tagged.clear()
    return h.handler(CYCLE, lambda_context(clock=model.clock))


def logged(capsys) -> list[dict]:
    out = []
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if "event" in record:
                out.append(record)
    return out


def team_b(model: BatchModel, ages=(1000, 999, 700, 400), tags=None) -> list[str]:
    """team-b runs one-GPU jobs started ``ages`` seconds ago: the first two within its guarantee
    of 2, the others beyond it. With its 600 s interval: W = age mod 600."""
    tags = tags or {}
    return [model.add_job("teamb", "RUNNING", started=model.clock() - age, job_id=f"b{i + 1}",
                          tags=tags.get(f"b{i + 1}"))["jobId"] for i, age in enumerate(ages)]


def records(model: BatchModel) -> dict[str, str]:
    return {jid: tags[br.TAG_BORROWED] for jid, tags in model.tagged}


def started(model: BatchModel, jid: str) -> int:
    return model.jobs[jid]["startedAt"]


# ---------------------------------------------------------------------------


def test_the_borrowed_run_with_the_least_lost_work_is_stopped_and_new_runs_are_recorded(model):
    team_b(model)
    model.add_job("teama", "RUNNABLE", job_id="a1")
    result = cycle(model)
    assert result["stopped"] == ["b3"]  # borrowed, W 100 (youngest-first would stop b4, W 400)
    # Every other run recorded once, with its start: b1, b2 within the guarantee, b4 beyond it.
    assert records(model) == {"b1": f"{started(model, 'b1')}:false", "b2": f"{started(model, 'b2')}:false",
                              "b4": f"{started(model, 'b4')}:true"}
    assert result["calls"]["TagResource"] == 3


def test_a_jobs_own_interval_tag_comes_before_its_teams(model):
    team_b(model, tags={"b4": {br.TAG_CHECKPOINT: "350"}})  # W 400 mod 350 = 50
    model.add_job("teama", "RUNNABLE", job_id="a1")
    assert cycle(model)["stopped"] == ["b4"]


@pytest.mark.parametrize("tag", ["0", "604800"])
def test_a_tag_of_never_or_a_week_counts_as_the_configured_cap(monkeypatch, tag):
    # b3 (age 700) tags 0 (never) or a week; b4 (age 400) has its team's 600 s: W 400. With a
    # cap of 900 s b3 counts as saving every 900 s (W 700) and b4 goes; with a cap of 650 s,
    # b3's W is 700 mod 650 = 50 and b3 goes (taken at its word, it would never go first).
    for cap, want in ((900, "b4"), (650, "b3")):
        settings = {**SETTINGS, "settings": {**SETTINGS["settings"], "max_checkpoint_seconds": cap}}
        model = _model(monkeypatch, settings)
        team_b(model, tags={"b3": {br.TAG_CHECKPOINT: tag}})
        model.add_job("teama", "RUNNABLE", job_id="a1")
        assert cycle(model)["stopped"] == [want], cap


def test_the_record_survives_a_cold_start_where_the_state_would_say_otherwise(model, monkeypatch):
    team_b(model)
    assert cycle(model)["stopped"] == []  # nobody waits: the four runs are recorded
    assert set(records(model)) == {"b1", "b2", "b3", "b4"}
    model.end("b1")  # from the state alone b3 would now look within team-b's guarantee
    model.tick(10)
    monkeypatch.setattr(h, "_cache", br.DescribeCache())  # a cold start: every job described again
    model.add_job("teama", "RUNNABLE", gpus=2, job_id="a1")
    result = cycle(model)
    assert result["stopped"] == ["b3"]  # recorded borrowed, W 110; derived, b4 would go
    assert model.tagged == []  # nothing new to record


def test_a_warm_cycle_describes_and_records_nothing_again(model):
    team_b(model)
    cycle(model)
    model.tick(60)
    result = cycle(model)
    assert "DescribeJobs" not in result["calls"] and "TagResource" not in result["calls"]


def test_a_new_run_of_the_same_job_is_recorded_again(model):
    team_b(model, tags={"b3": {br.TAG_BORROWED: "1700000000000:false"}})  # a record of an earlier run
    cycle(model)
    assert records(model)["b3"] == f"{started(model, 'b3')}:true"


def test_a_starting_job_is_not_recorded_until_it_runs(model):
    team_b(model)
    model.add_job("teamb", "STARTING", job_id="b5")
    cycle(model)
    assert "b5" not in records(model)
    model.jobs["b5"].update(status="RUNNING", startedAt=model.now_ms())
    model.tick(60)
    cycle(model)
    assert records(model) == {"b5": f"{started(model, 'b5')}:true"}


def test_a_record_that_cannot_be_written_is_logged_and_written_next_cycle(model, capsys):
    team_b(model)
    model.faults.script["TagResource"] = ["error"] * 40  # the first cycle's every attempt fails
    model.add_job("teama", "RUNNABLE", job_id="a1")
    result = cycle(model)
    assert result["stopped"] == ["b3"] and result["not_stopped"] == []  # the stop is not held up
    [line] = [r for r in logged(capsys) if r["event"] == "runs_recorded"]
    # One attempt, and none after the first failure: recording never holds up the requeues.
    assert line["recorded"] == 0 and [f["job"] for f in line["failed"]] == ["b1"]
    assert line["left_for_next_cycles"] == 2
    assert [op for op, _, _ in model.requests].count("TagResource") == 1
    model.faults.script["TagResource"] = []
    model.tick(60)
    cycle(model)
    assert set(records(model)) == {"b1", "b2", "b4"}


def test_a_bad_interval_tag_is_ignored_with_one_warning(model, capsys):
    team_b(model, tags={"b4": {br.TAG_CHECKPOINT: "ten minutes"}})
    model.add_job("teama", "RUNNABLE", job_id="a1")
    assert cycle(model)["stopped"] == ["b3"]  # b4 keeps the team's 600 s: W 400
    [warning] = [r for r in logged(capsys) if r["event"] == "checkpoint_tag_ignored"]
    assert warning["job"] == "b4" and warning["value"] == "ten minutes" and "gpu-share:checkpoint-seconds" in warning["fix"]
    model.tick(60)
    cycle(model)
    assert not [r for r in logged(capsys) if r["event"] == "checkpoint_tag_ignored"]  # once, when described


@pytest.mark.parametrize("value,want", [("600", 600), ("0", 0), ("90.5", 90.5), (" 30 ", 30)])
def test_interval_tags_read_as_seconds(value, want):
    assert br.checkpoint_of({br.TAG_CHECKPOINT: value}) == (want, None)


@pytest.mark.parametrize("value", ["-5", "1e3", "nan", "", "604801", "10m"])
def test_interval_tags_that_are_no_interval_are_named(value):
    assert br.checkpoint_of({br.TAG_CHECKPOINT: value}) == (None, value)


def test_the_default_order_reads_and_records_nothing(monkeypatch):
    settings = json.loads(json.dumps(SETTINGS))
    del settings["settings"]["victim_order"]
    model = _model(monkeypatch, settings)
    team_b(model, tags={"b4": {br.TAG_CHECKPOINT: "350"}})
    model.add_job("teama", "RUNNABLE", job_id="a1")
    result = cycle(model)
    assert result["stopped"] == ["b4"]  # youngest first
    assert model.tagged == [] and "TagResource" not in result["calls"]
    snapshot = br.read_queue(model.batch, QUEUE, settings, model.clock())
    assert not any({"borrowed", "checkpoint_seconds"} & set(j) for j in snapshot.state["jobs"])


def test_recording_is_bounded_per_cycle_and_leaves_the_rest_to_the_next(model, capsys, monkeypatch):
    monkeypatch.setattr(h, "RECORD_LIMIT", 3)
    team_b(model, ages=(1000, 999, 700, 400, 300, 200))
    result = cycle(model)
    assert result["calls"]["TagResource"] == 3
    [line] = [r for r in logged(capsys) if r["event"] == "runs_recorded"]
    assert line["recorded"] == 3 and line["left_for_next_cycles"] == 3
    model.tick(60)
    cycle(model)
    assert len(records(model)) == 3  # the other three, next cycle


def test_nothing_is_recorded_when_the_invocation_is_short_of_time(model):
    team_b(model)
    h.handler(CYCLE, lambda_context(seconds=h.RECORD_RESERVE_SECONDS - 1, clock=model.clock))
    assert [op for op, _, _ in model.requests].count("TagResource") == 0


def test_a_trailing_listing_cannot_record_more_than_the_guarantee_as_within_it(model):
    # b1 (since 0) is recorded within team-b's guarantee of 2; the listing shows b3 (since 20)
    # before b2 (since 10). From the state b3 is within (b1 + b3 = 2) and is recorded so; when
    # b2 shows, b1 + b2 = 2 would call it within too: three runs "within" a guarantee of 2.
    now = model.clock()
    b1 = model.add_job("teamb", "RUNNING", started=now - 100, job_id="b1")
    model.add_job("teamb", "RUNNING", started=now - 80, job_id="b3")
    b2 = model.add_job("teamb", "RUNNING", started=now - 90, job_id="b2")
    model.visible_at["b2"] = now + 30  # the listing trails
    del b1, b2
    cycle(model)
    assert records(model) == {"b1": f"{started(model, 'b1')}:false", "b3": f"{started(model, 'b3')}:false"}
    model.tick(60)
    cycle(model)
    assert records(model) == {"b2": f"{started(model, 'b2')}:true"}


def test_a_starting_retry_showing_its_previous_start_is_not_recorded(model):
    team_b(model, ages=(1000, 999))
    job = model.add_job("teamb", "RUNNING", started=model.clock() - 500, job_id="b5")
    job["status"] = "STARTING"  # a retry attempt, still showing the first attempt's startedAt
    cycle(model)
    assert "b5" not in records(model)


def test_a_dry_run_records_its_planned_victims_too(monkeypatch):
    settings = json.loads(json.dumps(SETTINGS))
    settings["dry_run"] = True
    model = _model(monkeypatch, settings)
    team_b(model)
    model.add_job("teama", "RUNNABLE", job_id="a1")
    result = cycle(model)
    assert result["planned"] == ["b3"] and result["stopped"] == []
    assert set(records(model)) == {"b1", "b2", "b3", "b4"}
