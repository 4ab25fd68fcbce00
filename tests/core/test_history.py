"""The archive's records -> the jobs the simulator replays (core/records/history.py), case by case."""

from __future__ import annotations

import io
import json

import pytest

from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.records import history

T0 = 1_793_577_600_000  # 2026-11-02T00:00:00Z in ms
QUEUE = "arn:aws:batch:us-east-1:111122223333:job-queue/gpu-share-training"
LOOKUP = history.Lookup(teams=frozenset({"team-a", "team-b"}), guarantee={"team-a": 4.0, "team-b": 4.0})


def _iso(ms):
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def service_event(jid, status, at_s, *, created_s=0, started_s=None, stopped_s=None, attempts=(), eid=None):
    detail = {"jobArn": f"arn:aws:batch:us-east-1:111122223333:service-job/{jid}", "jobId": jid,
              "jobName": jid, "jobQueue": QUEUE, "status": status, "serviceJobType": "SAGEMAKER_TRAINING",
              "createdAt": T0 + created_s * 1000}
    if started_s is not None:
        detail["startedAt"] = T0 + started_s * 1000
    if stopped_s is not None:
        detail["stoppedAt"] = T0 + stopped_s * 1000
    if attempts:
        detail["attempts"] = [{"startedAt": T0 + a * 1000, "stoppedAt": T0 + b * 1000} for a, b in attempts]
    return {"version": "0", "id": eid or f"{jid}-{status}-{at_s}", "detail-type": history.SERVICE_JOB_TYPE,
            "source": "aws.batch", "time": _iso(T0 + at_s * 1000), "detail": detail}


def details(jid, team="team-a", it="ml.g5.12xlarge", count=1, priority=3):
    return history.details_record(job_id=jid, queue=QUEUE, team=team, instances={it: count},
                                  created_ms=T0, priority=priority, time=_iso(T0 + 5000))


def _export(records, lookup=LOOKUP):
    return history.reconstruct([("abc", r) for r in records], lookup, start_ms=T0, end_ms=T0 + 86_400_000)


def test_a_service_job_takes_team_and_gpus_from_its_details_record():
    out = _export([
        details("j1", count=2),
        service_event("j1", "RUNNING", 60, started_s=60),
        service_event("j1", "SUCCEEDED", 660, started_s=60, stopped_s=660, attempts=[(60, 660)]),
    ])
    [job] = out.jobs
    assert (job.team, job.gpus, job.priority, job.submit_ms, job.duration_ms) == ("team-a", 8, 3, T0, 600_000)
    assert job.final_start_ms - job.submit_ms == 60_000 and job.preemptions == 0
    assert job.borrowed_gpu_s == pytest.approx(4 * 600)  # 8 GPUs on a guarantee of 4, for 600 s


def test_a_preempted_service_job_counts_its_runs_and_restarts_from_zero():
    out = _export([
        details("j1"),
        service_event("j1", "RUNNING", 10, started_s=10),
        service_event("j1", "RUNNABLE", 100, started_s=10),
        service_event("j1", "RUNNING", 200, started_s=200),
        service_event("j1", "SUCCEEDED", 500, started_s=200, stopped_s=500, attempts=[(10, 100), (200, 500)]),
    ])
    [job] = out.jobs
    assert job.preemptions == 1 and job.duration_ms == 300_000 and job.final_start_ms == T0 + 200_000


def test_checkpoints_keep_the_saved_work():
    lookup = history.Lookup(teams=frozenset({"team-a"}), checkpoint={"team-a": 60.0})
    out = _export([
        details("j1"),
        service_event("j1", "SUCCEEDED", 500, started_s=200, stopped_s=500, attempts=[(10, 100), (200, 500)]),
    ], lookup)
    assert out.jobs[0].duration_ms == (60 + 300) * 1000  # 90 s ran, 60 s saved


@pytest.mark.parametrize("record, reason, counter", [
    (details("j1", team="team-z"), "unknown team", ("unknown_teams", "team-z")),
    (details("j1", it="ml.c5.xlarge"), "unknown instance type", ("unknown_types", "ml.c5.xlarge")),
    (None, "no details record", None),
])
def test_what_is_not_known_is_counted_not_guessed(record, reason, counter):
    events = [service_event("j1", "SUCCEEDED", 500, started_s=200, stopped_s=500)]
    out = _export(([record] if record else []) + events)
    assert out.jobs == [] and out.skipped == {reason: 1}
    if counter:
        assert getattr(out, counter[0]) == {counter[1]: 1}


def test_unfinished_and_out_of_range_jobs_are_not_exported():
    out = _export([details("j1"), service_event("j1", "RUNNING", 60, started_s=60),
                   details("j2"), service_event("j2", "SUCCEEDED", 9, created_s=-5, started_s=1, stopped_s=9)])
    assert out.jobs == [] and out.skipped == {"unfinished": 1}


def test_events_out_of_order_and_twice():
    ev = [details("j1"), service_event("j1", "SUCCEEDED", 500, started_s=200, stopped_s=500),
          service_event("j1", "RUNNING", 200, started_s=200)]
    out = _export(ev + ev)
    assert len(out.jobs) == 1 and out.duplicates == 3 and out.jobs[0].duration_ms == 300_000


def test_records_one_a_line_or_back_to_back():
    assert list(history.parse_records('{"a":1}\n{"a":2}\n')) == [{"a": 1}, {"a": 2}]
    assert list(history.parse_records('{"a":1}{"a":2}')) == [{"a": 1}, {"a": 2}]
    with pytest.raises(ValueError):
        list(history.parse_records("not json"))


def test_keys_name_their_day_and_config():
    key = "events/2026/11/02/config=0123456789ab/gpu-share-history-1-2026-11-02-00-00-00-x.gz"
    assert history.day_of_key(key) == "2026-11-02" and history.config_of_key(key) == "0123456789ab"
    assert history.day_of_key("events/other/file") is None and history.config_of_key("events/x") is None


def test_the_simulator_reads_a_header_comment():
    scenario = sim.parse_scenario({"capacity": {"gpu": 4}, "teams": [{"name": "a", "guarantee": {"gpu": 4}}]})
    text = "# gpu-share trace export: origin=2026-11-02T00:00:00Z source=archive\njob_id,team,submit_time,duration_s,gpus\nj,a,0,5,1\n"
    [job] = sim.parse_jobs(io.StringIO(text), scenario)
    assert job.line == 3 and job.duration_s == 5
    header = history.read_header(text.splitlines()[0])
    assert header == {"origin": "2026-11-02T00:00:00Z", "source": "archive", "configs": []}


def test_preemption_events_count_when_the_runs_do_not_say():
    preempted = {"version": "0", "id": "p1", "detail-type": history.PREEMPTION_TYPES[0], "source": "aws.batch",
                 "time": _iso(T0 + 100_000), "detail": {"preemptedJobArn": f"{QUEUE.split(':job-queue')[0]}:service-job/j1"}}
    out = _export([details("j1"), preempted,
                   service_event("j1", "SUCCEEDED", 500, started_s=200, stopped_s=500)])
    assert out.jobs[0].preemptions == 1


def test_instances_of_a_request():
    assert history.request_instances('{"ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 2}}') == {
        "ml.g5.xlarge": 2}
    assert history.request_instances({"ResourceConfig": {"InstanceGroups": [
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}, {"InstanceType": "ml.p5.48xlarge"}]}}) == {
        "ml.p5.48xlarge": 2}
    assert history.request_instances("not json") == {} and history.request_instances(None) == {}


def _preemption(kind, jid, at_s, eid, **detail):
    arn = f"{QUEUE.split(':job-queue')[0]}:service-job/{jid}"
    return {"version": "0", "id": eid, "detail-type": kind, "source": "aws.batch", "time": _iso(T0 + at_s * 1000),
            "detail": {"preemptedJobArn": arn, **detail}}


def test_a_duplicate_with_a_new_id_counts_once_for_every_kind_of_event():
    """Batch's guide: a duplicate is the same job, time and status, whatever its event id."""
    started = [_preemption(history.PREEMPTION_TYPES[0], "j1", 100, eid, status="RUNNING") for eid in ("p1", "p2")]
    completed = [_preemption(history.PREEMPTION_TYPES[1], "j1", 101, eid) for eid in ("c1", "c2")]
    succeeded = [service_event("j1", "SUCCEEDED", 500, started_s=200, stopped_s=500, eid=eid) for eid in ("s1", "s2")]
    out = _export([details("j1"), *started, *completed, *succeeded, {**details("j1"), "id": "again"}])
    assert out.jobs[0].preemptions == 1 and out.duplicates == 4 and out.events == 4
    # The same status at another time is another event.
    again = _export([details("j1"), *started[:1], _preemption(history.PREEMPTION_TYPES[0], "j1", 150, "p3",
                                                                status="RUNNING"), *succeeded[:1]])
    assert again.jobs[0].preemptions == 2 and again.duplicates == 0


def test_preempted_runs_named_only_in_the_preemption_summary_count_once():
    summary = {"preemptedAttemptCount": 2, "recentPreemptedAttempts": [
        {"startedAt": T0 + 10_000, "stoppedAt": T0 + 100_000, "statusReason": "Preempted"},
        {"startedAt": T0 + 150_000, "stoppedAt": T0 + 190_000, "statusReason": "Preempted"}]}
    last = service_event("j1", "SUCCEEDED", 500, started_s=200, stopped_s=500, attempts=[(200, 500)])
    last["detail"]["preemptionSummary"] = summary
    lookup = history.Lookup(teams=frozenset({"team-a"}), checkpoint={"team-a": 30.0})
    out = _export([details("j1"), last], lookup)
    [job] = out.jobs
    assert job.preemptions == 2 and job.runs == [(T0 + 10_000, T0 + 100_000), (T0 + 150_000, T0 + 190_000),
                                                 (T0 + 200_000, T0 + 500_000)]
    assert job.duration_ms == (90 + 30 + 300) * 1000  # 90 s saved, then 40 s more: 120 s saved at 30 s steps
    # The completed event's summary and the attempts name one run twice: counted once.
    both = service_event("j1", "SUCCEEDED", 500, started_s=200, stopped_s=500, attempts=[(10, 100), (200, 500)])
    done = _preemption(history.PREEMPTION_TYPES[1], "j1", 101, "c1", preemptionSummary={
        "preemptedAttemptCount": 1, "recentPreemptedAttempts": [{"startedAt": T0 + 10_000, "stoppedAt": T0 + 100_000}]})
    [job] = _export([details("j1"), done, both], lookup).jobs
    assert job.preemptions == 1 and len(job.runs) == 2


def test_records_back_to_back_past_the_line_bound_are_each_read():
    record = {"version": "0", "id": "x", "detail": {"reason": "a}{b", "pad": "p" * 10_000}}
    text = json.dumps(record, separators=(",", ":")).encode()
    data = text * (history.MAX_LINE_BYTES // len(text) + 5)
    got = list(history.parse_lines(data))
    assert len(got) == len(data) // len(text) and all(why is None and r == record for r, why in got)


def test_a_line_is_refused_for_its_depth_before_it_is_parsed():
    deep = '{"a":' * (history.MAX_DEPTH + 1) + "1" + "}" * (history.MAX_DEPTH + 1)
    # 62 objects, a list, and empty lists in it: 64 deep, with more brackets than MAX_DEPTH.
    ok = '{"a":' * (history.MAX_DEPTH - 2) + "[" + "[]," * 100 + "1]" + "}" * (history.MAX_DEPTH - 2)
    brackets_in_strings = json.dumps({"s": "[" * 1000})
    got = list(history.parse_lines(f"{deep}\n{ok}\n{brackets_in_strings}\n".encode()))
    assert [why for _, why in got] == [f"lines nested deeper than {history.MAX_DEPTH}", None, None]


HOSTILE = [None, True, -1, 10**30, 1e308, float("nan"), float("inf"), "x", "", [], {}, [{"type": "GPU"}], {"a": [1]},
           "1e400", 2**70]


@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_any_field_of_any_record_may_hold_anything(value):
    """A writer to the stream may put any JSON: a field of the wrong type costs that event's
    figures, never the export (no exception, and a CSV still written)."""
    base = [
        details("j1", count=2),
        service_event("j1", "RUNNING", 60, started_s=60),
        service_event("j1", "SUCCEEDED", 660, started_s=60, stopped_s=660, attempts=[(10, 50)]),
        {"version": "0", "id": "c", "detail-type": history.JOB_TYPE, "source": "aws.batch", "time": _iso(T0 + 9_000),
         "detail": {"jobId": "c1", "jobQueue": QUEUE, "status": "SUCCEEDED", "createdAt": T0, "startedAt": T0 + 1000,
                    "stoppedAt": T0 + 9000, "tags": {"gpu-share:team": "team-a", "gpu-share:checkpoint-seconds": "60"},
                    "container": {"resourceRequirements": [{"type": "GPU", "value": "1"}]},
                    "attempts": [{"container": {"startedAt": T0 + 1000, "stoppedAt": T0 + 9000}}],
                    "preemptionSummary": {"preemptedAttemptCount": 1, "recentPreemptedAttempts": []}}},
    ]
    paths = []

    def walk(node, trail):
        if isinstance(node, dict):
            for k, v in node.items():
                paths.append((*trail, k))
                walk(v, (*trail, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                paths.append((*trail, i))
                walk(v, (*trail, i))

    for n, record in enumerate(base):
        walk(record, (n,))
    for trail in paths:
        records = json.loads(json.dumps(base))
        node = records
        for step in trail[:-1]:
            node = node[step]
        node[trail[-1]] = value
        out = _export(records)
        history.write_export(out, io.StringIO(), origin_ms=T0, source="archive")
