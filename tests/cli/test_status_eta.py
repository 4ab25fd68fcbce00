"""`gpu-share status --job ID --history JOBS.csv`: when a waiting job is expected to start, after
the reasons it waits. The classic (fair-share) queue is the reclaim Lambda's model
(tests/batch_model.py), a real boto3 client answered at ``before-send``."""

from __future__ import annotations

import json

import pytest
import yaml

from cdk_gpu_share.cli import main, status_cmd
from cdk_gpu_share.core import eta
from cdk_gpu_share.core import simulate as sim
from tests.batch_model import QUEUE_NAME, BatchModel, Clock

G5 = "g5.xlarge"
CONFIG = {
    "platform": {"name": "gpu-share"},
    "teams": [{"name": "team-a", "guarantee": {G5: 2}}, {"name": "team-b", "guarantee": {G5: 2}}],
    "fairshare": {"capacity": {G5: 4}, "queue_name": QUEUE_NAME, "reclaim": {"reclaim_after_seconds": 60}},
}


@pytest.fixture
def queue(monkeypatch, tmp_path):
    """team-b borrows: it runs 4 one-GPU jobs on 4 GPUs (two started 900 s ago, two 100 s ago);
    team-a's w0 (one GPU, within its guarantee) waits 30 s. And the config file."""
    m = BatchModel(clock=Clock())
    for i, age in enumerate((900, 900, 100, 100)):
        m.add_job("teamb", "RUNNING", gpus=1, job_id=f"r{i}", started=m.clock() - age)
    m.add_job("teama", "RUNNABLE", gpus=1, job_id="w0", created=m.clock() - 30)
    monkeypatch.setattr(status_cmd, "make_client", lambda region: m.batch)
    monkeypatch.setattr(status_cmd, "_now", m.clock)
    monkeypatch.setattr(status_cmd, "_sleep", lambda s: None)
    (tmp_path / "platform.yaml").write_text(yaml.safe_dump(CONFIG))
    return m, ["status", "--config", str(tmp_path / "platform.yaml"), "--region", "us-east-1"]


def history(tmp_path, rows, origin=None):
    """A job trace of finished jobs (``origin``: an export's header with that UTC origin)."""
    path = tmp_path / "jobs.csv"
    head = f"# gpu-share trace export: origin={origin} source=archive\n" if origin else ""
    path.write_text(head + "job_id,team,submit_time,duration_s,gpus,priority\n"
                    + "".join(f"h{i},{team},{submit},{duration},1,0\n" for i, (team, submit, duration) in enumerate(rows)))
    return str(path)


# team-b's jobs all lasted 1,000 s: its two older jobs end in 100 s, the next two in 900 s.
RUNS_1000 = [("team-b", i * 2000.0, 1000.0) for i in range(40)] + [("team-a", i * 2000.0, 500.0) for i in range(5)]


def test_the_band_follows_the_reasons_and_counts_the_teams_history(queue, tmp_path, capsys):
    _, argv = queue
    code = main([*argv, "--job", "w0", "--history", history(tmp_path, RUNS_1000)])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("Job w0 of team team-a") and lines[0].endswith("because:")
    assert lines[1].startswith("  - it is within team team-a's guarantee")  # the reasons first
    # Every duration is 1,000 s: the two oldest of team-b's jobs end in 100 s; the reclaimer
    # would stop a borrowed job sooner (w0 waited 30 s of 60, a cycle every 5 min) or not.
    assert lines[-1].startswith("Expected to start ") and lines[-1].endswith("based on 5 finished jobs of team-a")


def test_the_json_carries_the_band_from_now_and_from_the_submission(queue, tmp_path, capsys):
    _, argv = queue
    assert main([*argv, "--job", "w0", "--history", history(tmp_path, RUNS_1000), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    band = report["eta"]
    assert band["team_history"] == 5 and band["history"] == 45
    assert 0 <= band["start_in_p10_s"] <= band["start_in_p50_s"] <= band["start_in_p90_s"] <= 100
    assert band["wait_p50_s"] == pytest.approx(band["start_in_p50_s"] + 30)  # submitted 30 s ago
    assert report["reasons"][0]["code"] == "lent_out"


def test_without_a_history_it_says_why_there_is_no_estimate(queue, capsys):
    _, argv = queue
    assert main([*argv, "--job", "w0"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == ("No estimate of when it starts: no history of finished jobs to learn durations from; pass "
                    "--history JOBS.csv (gpu-share trace export writes one from the job archive)")


def test_a_running_job_says_so_without_a_band(queue, tmp_path, capsys):
    _, argv = queue
    assert main([*argv, "--job", "r0", "--history", history(tmp_path, RUNS_1000), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["state"] == "running" and "eta" not in report


@pytest.mark.parametrize("extra,message", [
    (["--history", "missing.csv"], "--history: is not a readable file (got 'missing.csv')"),
    (["--history", "jobs.csv", "--job", "w0"], "line 2 (job 'x'), team: is not a team of the scenario (got 'team-z')"),
])
def test_bad_history_is_one_line(queue, tmp_path, capsys, monkeypatch, extra, message):
    _, argv = queue
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs.csv").write_text("job_id,team,submit_time,duration_s,gpus\nx,team-z,0,10,1\n")
    job = [] if "--job" in extra else ["--job", "w0"]
    assert main([*argv, *job, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


def _gzip_of_history(path):
    import gzip

    return gzip.compress(path.read_bytes())


@pytest.mark.parametrize("content,message", [
    (lambda p: p.read_bytes().replace(b"origin=2026-11-02T00:00:00Z", b"origin=yesterday"),
     "--history: its header's origin 'yesterday' is not a UTC time such as 2026-11-02T00:00:00Z"),
    (lambda p: p.read_bytes().replace(b"team-a", b"team-\xe9"), "--history: is not UTF-8 text"),
    (_gzip_of_history, "--history: is gzip-compressed, not a CSV file"),
])
def test_a_history_that_is_not_an_exports_csv_is_one_line(queue, tmp_path, capsys, content, message):
    _, argv = queue
    path = tmp_path / "jobs.csv"
    history(tmp_path, RUNS_1000, origin="2026-11-02T00:00:00Z")
    path.write_bytes(content(path))
    assert main([*argv, "--job", "w0", "--history", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err, err


def test_a_history_larger_than_its_bound_is_one_line(queue, tmp_path, capsys, monkeypatch):
    _, argv = queue
    path = history(tmp_path, RUNS_1000)
    monkeypatch.setattr(status_cmd, "MAX_HISTORY_BYTES", 100)
    assert main([*argv, "--job", "w0", "--history", path]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "more than the 100 a trace may hold here" in err, err
    assert "gpu-share trace export --from DAY --to DAY" in err


def test_a_job_of_another_queue_is_one_line_naming_that_queue(queue, tmp_path, capsys):
    m, argv = queue
    m.add_job("teama", "RUNNABLE", gpus=1, job_id="x0", jobQueue="arn:aws:batch:us-east-1:111122223333:job-queue/other")
    assert main([*argv, "--job", "x0", "--history", history(tmp_path, RUNS_1000)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "job 'x0' belongs to the job queue 'other'" in err, err


def test_history_without_job_is_refused(queue, tmp_path, capsys):
    _, argv = queue
    assert main([*argv, "--history", history(tmp_path, RUNS_1000)]) == 2
    assert "--history" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# The pure parts


def test_the_state_has_no_durations_and_marks_the_borrowers():
    scenario = sim.parse_scenario({"capacity": {"gpu": 4}, "teams": [{"name": "a", "guarantee": {"gpu": 2}},
                                                                     {"name": "b", "guarantee": {"gpu": 2}}]})
    jobs = [eta.LiveJob("r1", "b", 2, 0, 100.0, True), eta.LiveJob("r2", "b", 1, 0, 200.0, True),
            eta.LiveJob("w1", "a", 1, 0, 300.0, False), eta.LiveJob("w2", "a", 1, 5, 310.0, False),
            eta.LiveJob("x", "z", 1, 0, 1.0, False)]
    state, left_out = eta.live_state(400.0, jobs, scenario)
    assert [(r.id, r.borrowed) for r in state.running] == [("r1", False), ("r2", True)]
    assert [p.id for p in state.pending] == ["w2", "w1"]  # the higher priority first
    assert left_out == ["x"]
    assert not any("duration" in f for f in type(state.running[0]).__dataclass_fields__)


def test_a_trace_without_origin_ends_now_and_an_export_counts_from_its_origin():
    scenario = sim.parse_scenario({"capacity": {"gpu": 1}, "teams": [{"name": "a", "guarantee": {"gpu": 1}}]})
    jobs = [sim.Job(id="h0", team="a", submit_time=0.0, duration_s=50.0, gpus=1),
            sim.Job(id="h1", team="a", submit_time=100.0, duration_s=50.0, gpus=1)]
    assert [j.submit for j in eta.history_of(jobs, origin=None, now=1000.0).jobs] == [850.0, 950.0]
    # from an origin at 900: h1 would end at 1,050, after now: not finished, left out
    assert [j.submit for j in eta.history_of(jobs, origin=900.0, now=1000.0).jobs] == [900.0]
    del scenario


def test_the_sentence_reads_as_people_talk():
    est = {"start_in_p10_s": 720.0, "start_in_p50_s": 1320.0, "start_in_p90_s": 2400.0, "team_history": 1240,
           "history": 3000}
    assert eta.sentence(est, "team-a") == ("expected to start in 12 min to 40 min, most likely in 22 min; "
                                           "based on 1,240 finished jobs of team-a")
    soon = {**est, "start_in_p10_s": 0.0, "team_history": 0}
    assert eta.sentence(soon, "team-a").startswith("expected to start within 40 min, most likely in 22 min; "
                                                   "based on 3,000 finished jobs of every team (team-a has none")


def test_a_finished_job_says_so_and_an_unknown_id_is_one_line(queue, tmp_path, capsys):
    m, argv = queue
    m.add_job("teama", "SUCCEEDED", gpus=1, job_id="done1")
    assert main([*argv, "--job", "done1", "--history", history(tmp_path, RUNS_1000)]) == 0
    assert capsys.readouterr().out.strip() == "Job done1 of team ? on gpu-share-fairshare: succeeded (it has ended)"
    assert main([*argv, "--job", "nope", "--history", history(tmp_path, RUNS_1000)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("job 'nope' is not a job AWS Batch knows (queue gpu-share-fairshare); check the id: "
                        "gpu-share status lists the waiting jobs") and len(err.splitlines()) == 1


def test_a_band_of_one_point_reads_as_about():
    est = {"start_in_p10_s": 60.0, "start_in_p50_s": 60.0, "start_in_p90_s": 60.0, "team_history": 5, "history": 45}
    assert eta.sentence(est, "team-a").startswith("expected to start in about 60 s, most likely in 60 s;")


# ---------------------------------------------------------------------------
# A quota-management queue (tests/quota_model.py)

ML = "ml.g5.xlarge"
QUOTA_CONFIG = {
    "platform": {"name": "gpu-share"},
    "teams": [{"name": "team-a", "guarantee": {ML: 2}}, {"name": "team-b", "guarantee": {ML: 2}}],
    "batch_quota": {"capacity": {ML: 4}, "queue_name": "gpu-share-training"},
}


@pytest.fixture
def quota_queue(monkeypatch, tmp_path):
    """team-b runs 4 one-instance jobs on 4 instances (two started 900 s ago, two 100 s ago);
    team-a's job waits 30 s."""
    from tests.quota_model import QuotaQueueModel

    m = QuotaQueueModel(shares={"team-a": {ML: 2}, "team-b": {ML: 2}}, clock=Clock())
    for age in (900, 900, 100, 100):
        m.clock.t -= age
        m.start(m.submit("team-b", {ML: 1}).job_id)
        m.clock.t += age
    m.clock.t -= 30
    waiting = m.submit("team-a", {ML: 1}).job_id
    m.clock.t += 30
    monkeypatch.setattr(status_cmd, "make_client", lambda region: m.batch)
    monkeypatch.setattr(status_cmd, "_now", m.clock)
    (tmp_path / "platform.yaml").write_text(yaml.safe_dump(QUOTA_CONFIG))
    return m, waiting, ["status", "--config", str(tmp_path / "platform.yaml"), "--region", "us-east-1"]


def test_a_quota_queue_gives_the_band_after_the_reasons(quota_queue, tmp_path, capsys):
    m, waiting, argv = quota_queue
    code = main([*argv, "--job", waiting, "--history", history(tmp_path, RUNS_1000)])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].endswith("runnable, because:") and "lent" in lines[1]
    # no reclaimer on a quota queue's replay beyond Batch's preemption: team-b's oldest jobs
    # (1,000 s each) end in 100 s at the latest
    assert lines[-1].startswith("Expected to start") and lines[-1].endswith("based on 5 finished jobs of team-a")
    assert main([*argv, "--job", waiting, "--history", history(tmp_path, RUNS_1000), "--json"]) == 0
    band = json.loads(capsys.readouterr().out)["eta"]
    assert band["start_in_p90_s"] <= 100 and band["team_history"] == 5
    described = {p["jobId"] for op, p in m.requests if op == "DescribeServiceJob"}
    assert len(described) == 5  # each job of the queue once: four running, one waiting


def test_a_quota_queue_without_config_says_what_to_pass(quota_queue, tmp_path, capsys):
    _, waiting, argv = quota_queue
    argv = [a for a in argv if not a.endswith("platform.yaml") and a != "--config"]
    assert main([*argv, "--queue", "gpu-share-training", "--job", waiting]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "No estimate of when it starts: the policy to replay is not known; pass --config with the batch_quota "
        "section that deployed this queue")


def test_a_finished_service_job_says_so(quota_queue, tmp_path, capsys):
    m, _, argv = quota_queue
    done = m.submit("team-a", {ML: 1}).job_id
    m.finish(done)
    assert main([*argv, "--job", done, "--history", history(tmp_path, RUNS_1000), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["state"] == "succeeded" and "eta" not in report


def test_a_start_now_is_said_so():
    est = {"start_in_p10_s": 0.0, "start_in_p50_s": 0.0, "start_in_p90_s": 0.0, "team_history": 5, "history": 45}
    assert eta.sentence(est, "team-a") == ("expected to start now, as soon as the scheduler acts; "
                                           "based on 5 finished jobs of team-a")


def test_a_quota_job_waits_for_the_running_jobs_it_reads(monkeypatch, tmp_path, capsys):
    """team-a runs its guarantee (2 instances, started 900 s ago), team-b its own (100 s ago): team-a's
    waiting job would borrow nothing idle, so it starts when team-a's jobs end. Every job lasted
    1,000 s: in 100 s, in every replay. A state without the running jobs would start it at once."""
    from tests.quota_model import QuotaQueueModel

    m = QuotaQueueModel(shares={"team-a": {ML: 2}, "team-b": {ML: 2}}, clock=Clock())
    for team, age in (("team-a", 900), ("team-a", 900), ("team-b", 100), ("team-b", 100)):
        m.clock.t -= age
        m.start(m.submit(team, {ML: 1}).job_id)
        m.clock.t += age
    waiting = m.submit("team-a", {ML: 1}).job_id
    monkeypatch.setattr(status_cmd, "make_client", lambda region: m.batch)
    monkeypatch.setattr(status_cmd, "_now", m.clock)
    (tmp_path / "platform.yaml").write_text(yaml.safe_dump(QUOTA_CONFIG))
    rows = [(team, i * 3000.0, 1000.0) for i in range(10) for team in ("team-a", "team-b")]
    argv = ["status", "--config", str(tmp_path / "platform.yaml"), "--region", "us-east-1", "--job", waiting,
            "--history", history(tmp_path, rows), "--json"]
    assert main(argv) == 0
    band = json.loads(capsys.readouterr().out)["eta"]
    assert (band["start_in_p10_s"], band["start_in_p90_s"]) == (100.0, 100.0), band


def test_a_service_job_of_unknown_size_gets_no_estimate_not_a_traceback(monkeypatch, tmp_path, capsys):
    from tests.quota_model import QuotaQueueModel

    m = QuotaQueueModel(shares={"team-a": {ML: 2}, "team-b": {ML: 2}}, clock=Clock())
    waiting = m.submit("team-a", {"ml.unknown.type": 1}).job_id
    monkeypatch.setattr(status_cmd, "make_client", lambda region: m.batch)
    monkeypatch.setattr(status_cmd, "_now", m.clock)
    (tmp_path / "platform.yaml").write_text(yaml.safe_dump(QUOTA_CONFIG))
    argv = ["status", "--config", str(tmp_path / "platform.yaml"), "--region", "us-east-1", "--job", waiting,
            "--history", history(tmp_path, RUNS_1000)]
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith(
        "No estimate of when it starts: its size or its team is not known to the config")


# ---------------------------------------------------------------------------
# The job archive as the history (tests/history_model.py: the archive of a fair-share queue's run)


def test_the_job_archive_is_the_history(queue, monkeypatch, capsys):
    from cdk_gpu_share.cli import trace_export_cmd as tx
    from cdk_gpu_share.core import scenario as sc
    from cdk_gpu_share.core.configuration.parse import parse_config
    from cdk_gpu_share.core.records import history as archive
    from tests.history_model import FairshareCluster, S3Model, firehose_objects

    m, argv = queue
    config = parse_config(CONFIG)
    scenario = sim.parse_scenario(sc.scenario_from_config(config, "fairshare"))
    # five days ago, 12 jobs of team-a and 20 of team-b, 1,000 s each, one at a time per team
    import io

    rows = "".join(f"p{i},{team},{i * 1500},1000,1\n" for i, team in enumerate(["team-a"] * 12 + ["team-b"] * 20))
    past = sim.parse_jobs(io.StringIO("job_id,team,submit_time,duration_s,gpus\n" + rows), scenario)
    cluster = FairshareCluster(m.clock() - 5 * 86400)
    cluster.run(scenario, past, poll_seconds=60)
    s3 = S3Model()
    s3.buckets["archive-bucket"] = firehose_objects(cluster.events, config=archive.policy_hash(config))
    monkeypatch.setattr(tx, "make_client", lambda service, region: {"s3": s3.client}[service])
    monkeypatch.setattr(tx, "default_region", lambda: "us-east-1")
    assert main([*argv, "--job", "w0", "--history", "s3://archive-bucket", "--json"]) == 0
    captured = capsys.readouterr()
    band = json.loads(captured.out)["eta"]
    assert (band["team_history"], band["history"]) == (12, 32)
    assert {op for op, bucket, _ in s3.requests} == {"ListObjectsV2", "GetObject"}
    assert "warning" not in captured.err
    # Cut at the read's bound of objects: the estimate rests on fewer jobs, and one line says why.
    from cdk_gpu_share.aws import history_reader

    monkeypatch.setattr(history_reader, "MAX_READ_OBJECTS", 1)
    assert main([*argv, "--job", "w0", "--history", "s3://archive-bucket", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["eta"].get("history", 0) < 32
    [line] = [x for x in captured.err.splitlines() if x.startswith("warning")]
    listed = len(s3.buckets["archive-bucket"])
    assert line == (f"warning: the job archive s3://archive-bucket/events/: skipped {listed - 1:,} objects past the "
                    "read's bound of 1 objects (gpu-share trace export --json names the first object of each)")


def test_the_job_archive_is_read_in_the_region_given_by_region(queue, monkeypatch, capsys):
    from cdk_gpu_share.cli import trace_export_cmd as tx
    from tests.history_model import S3Model

    _, argv = queue
    argv = [*argv[:-1], "eu-west-1"]  # --region eu-west-1
    asked = []
    s3 = S3Model()
    s3.buckets["archive-bucket"] = {}
    monkeypatch.setattr(tx, "make_client", lambda service, region: asked.append(region) or s3.client)
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    assert main([*argv, "--job", "w0", "--history", "s3://archive-bucket"]) == 0, capsys.readouterr().err
    assert asked == ["eu-west-1"]


def test_an_archive_that_is_not_there_is_one_line(queue, monkeypatch, capsys):
    from cdk_gpu_share.cli import trace_export_cmd as tx
    from tests.history_model import S3Model

    _, argv = queue
    s3 = S3Model()
    monkeypatch.setattr(tx, "make_client", lambda service, region: {"s3": s3.client}[service])
    monkeypatch.setattr(tx, "default_region", lambda: "us-east-1")
    assert main([*argv, "--job", "w0", "--history", "s3://no-such-bucket"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "s3://no-such-bucket/events/" in err, err
