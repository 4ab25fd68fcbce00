"""``gpu-share trace export``: the jobs a fair-share cluster ran, read back from the archive.

The cluster (tests/history_model.py) runs a known trace under a known config; its Batch events
go through the archive's format (Firehose objects in S3, behind a real boto3 client); the export
must give back the trace that ran, job for job, to the second.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from datetime import datetime, timezone

import pytest

from cdk_gpu_share.cli import main
from cdk_gpu_share.cli import trace_export_cmd as tx
from cdk_gpu_share.core import scenario as sc
from cdk_gpu_share.core import simulate as sim
from cdk_gpu_share.core.configuration.parse import load_config
from cdk_gpu_share.core.records import history
from cdk_gpu_share.core.records.trace import sample_jobs, trace_text
from tests.history_model import (
    QUOTA_CONFIG,
    FairshareCluster,
    S3Model,
    ServiceJobCluster,
    firehose_objects,
    redelivered,
)

BUCKET = "gpu-share-history-111122223333"
CONFIG = """\
platform: {name: gpu-share}
teams:
  - {name: team-a, guarantee: {g5.xlarge: 2}}
  - {name: team-b, guarantee: {g5.xlarge: 1}, checkpoint_seconds: 600}
  - {name: team-c, guarantee: {g5.xlarge: 1}}
fairshare:
  capacity: {g5.xlarge: 4}
"""
ORIGIN = datetime(2026, 11, 2, tzinfo=timezone.utc).timestamp()


def _config(tmp_path):
    path = tmp_path / "platform.yaml"
    path.write_text(CONFIG)
    return path, load_config(path)


def _trace(config, jobs=200, seed=3, backend="fairshare"):
    teams = [(t["name"], float(t["guarantee"]["gpu"])) for t in sc.scenario_from_config(config, backend)["teams"]]
    return sample_jobs(teams, jobs=jobs, seed=seed, capacity=4)


def _run_cluster(tmp_path, *, jobs=200, startup_s=0.0, page_size=1000, **fh):
    path, config = _config(tmp_path)
    rows = _trace(config, jobs)
    scenario = sim.parse_scenario(sc.scenario_from_config(config, "fairshare"))
    trace = sim.parse_jobs(io.StringIO(trace_text(rows)), scenario)
    cluster = FairshareCluster(ORIGIN, startup_s=startup_s)
    result = cluster.run(scenario, trace, poll_seconds=sc.poll_seconds_of(config, "fairshare") or 60)
    s3 = S3Model(page_size=page_size)
    s3.buckets[BUCKET] = {}
    for key, body in firehose_objects(cluster.events, config=history.policy_hash(config), **fh).items():
        s3.put(BUCKET, key, body)
    return path, config, rows, trace, result, s3


@pytest.fixture
def aws(monkeypatch):
    """Route the command's clients to the models given to ``use``."""
    clients = {}
    monkeypatch.setattr(tx, "make_client", lambda service, region: clients[service])
    monkeypatch.setattr(tx, "default_region", lambda: "us-east-1")
    return clients


def _export(path, tmp_path, *extra):
    out = tmp_path / "jobs.csv"
    code = main(["trace", "export", str(path), "--from", "2026-11-02", "--to", "2026-11-30", "--bucket", BUCKET,
                 "-o", str(out), *extra])
    return code, out


def _rows(text):
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    return list(csv.DictReader(lines))


def test_round_trip_gives_back_the_trace_that_ran(tmp_path, aws, capsys):
    path, config, rows, trace, result, s3 = _run_cluster(tmp_path, page_size=7)
    assert result.preemptions > 0, "the trace must make the cluster reclaim, or the chains go untested"
    aws["s3"] = s3.client
    code, out = _export(path, tmp_path)
    err = capsys.readouterr().err
    assert code == 0, err
    text = out.read_text()
    assert text.startswith("# gpu-share trace export: origin=2026-11-02T00:00:00Z source=archive configs=")
    exported = _rows(text)
    want = [dict(zip(history.EXPORT_COLUMNS[:6], r.as_row())) for r in rows]
    got = [{k: r[k] for k in history.EXPORT_COLUMNS[:6]} for r in exported]
    assert sorted(got, key=lambda r: r["job_id"]) == sorted(want, key=lambda r: r["job_id"])
    # The real figures are the cluster's own.
    outcome = {o.id: o for o in result.outcomes}
    for r in exported:
        o = outcome[r["job_id"]]
        assert float(r["wait_s"]) == pytest.approx(o.final_start - o.submit_time)
        assert int(r["preemptions"]) == o.stops
    assert sum(int(r["preemptions"]) for r in exported) == result.preemptions
    for team, res in result.teams.items():
        borrowed = sum(float(r["borrowed_gpu_s"]) for r in exported if r["team"] == team)
        assert borrowed == pytest.approx(res.borrowed_gpu_seconds, abs=0.01 * len(exported))
    assert f"exported {len(rows)} jobs" in err
    # Paged: the listing took more than one request.
    assert sum(1 for op, *_ in s3.requests if op == "ListObjectsV2") > 1
    # The simulator reads the export as it is (the header comment included).
    again = sim.load_jobs(out, sim.parse_scenario(sc.scenario_from_config(config, "fairshare")))
    assert len(again) == len(rows)


@pytest.mark.parametrize("compress, delimiter", [(True, True), (False, True), (True, False), (False, False)])
def test_objects_gzip_or_not_delimited_or_not(tmp_path, aws, capsys, compress, delimiter):
    path, _, rows, *_ , s3 = _run_cluster(tmp_path, jobs=30, compress=compress, delimiter=delimiter)
    aws["s3"] = s3.client
    code, out = _export(path, tmp_path)
    assert code == 0, capsys.readouterr().err
    assert len(_rows(out.read_text())) == len(rows)


def test_events_delivered_twice_count_once(tmp_path, aws, capsys):
    path, _, rows, *_, s3 = _run_cluster(tmp_path, jobs=30)
    for key, body in list(s3.buckets[BUCKET].items()):
        s3.put(BUCKET, key.replace("/gpu-share-history-", "/gpu-share-history-again-"), body)
    aws["s3"] = s3.client
    code, out = _export(path, tmp_path)
    err = capsys.readouterr().err
    assert code == 0 and "delivered twice" in err
    assert len(_rows(out.read_text())) == len(rows)


def test_service_jobs_delivered_twice_with_new_ids_and_late_come_back_equal(tmp_path, aws, capsys):
    """Service jobs preempted by Batch, their preempted runs named only in the preemption summary,
    a fifth of the events delivered again under a new id and some a day late: every job equal."""
    import dataclasses

    path = tmp_path / "quota.yaml"
    path.write_text(QUOTA_CONFIG)
    config = load_config(path)
    # A service job takes whole instances of one GPU.
    rows = [dataclasses.replace(r, gpus=str(max(1, int(float(r.gpus))))) for r in _trace(config, 200, backend="batch_quota")]
    scenario = sim.parse_scenario(sc.scenario_from_config(config, "batch_quota"))
    trace = sim.parse_jobs(io.StringIO(trace_text(rows)), scenario)
    cluster = ServiceJobCluster(ORIGIN)
    result = cluster.run(scenario, trace, poll_seconds=60)
    assert result.preemptions > 0, "the trace must make Batch preempt, or the summaries go untested"
    events, arrivals = redelivered(cluster.events)
    s3 = S3Model()
    s3.buckets[BUCKET] = firehose_objects(events, config=history.policy_hash(config), arrivals=arrivals)
    aws["s3"] = s3.client
    code, out = _export(path, tmp_path)
    err = capsys.readouterr().err
    assert code == 0, err
    exported = _rows(out.read_text())
    want = sorted((dict(zip(history.EXPORT_COLUMNS[:6], r.as_row())) for r in rows), key=lambda r: r["job_id"])
    got = sorted(({k: r[k] for k in history.EXPORT_COLUMNS[:6]} for r in exported), key=lambda r: r["job_id"])
    assert got == want
    outcome = {o.id: o for o in result.outcomes}
    assert {r["job_id"]: int(r["preemptions"]) for r in exported} == {i: o.stops for i, o in outcome.items()}
    assert all(float(r["wait_s"]) == pytest.approx(outcome[r["job_id"]].final_start - outcome[r["job_id"]].submit_time)
               for r in exported)
    assert f"{len(events) - len(cluster.events)} delivered twice" in err


def test_unknown_team_is_counted_not_guessed(tmp_path, aws, capsys):
    path, _, rows, *_, s3 = _run_cluster(tmp_path, jobs=30)
    smaller = tmp_path / "smaller.yaml"
    smaller.write_text(CONFIG.replace("  - {name: team-c, guarantee: {g5.xlarge: 1}}\n", ""))
    aws["s3"] = s3.client
    code, out = _export(smaller, tmp_path)
    err = capsys.readouterr().err
    n_c = sum(1 for r in rows if r.team == "team-c")
    assert code == 0
    assert f"not exported: {n_c} unknown team" in err and f"unknown teams: team-c ({n_c})" in err
    assert all(r["team"] != "team-c" for r in _rows(out.read_text()))


def test_refusals_are_one_line(tmp_path, aws, capsys, monkeypatch):
    path, _, _, *_, s3 = _run_cluster(tmp_path, jobs=10)
    aws["s3"] = s3.client
    # An empty range.
    code = main(["trace", "export", str(path), "--from", "2025-01-01", "--to", "2025-01-02", "--bucket", BUCKET])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "no job submitted from 2025-01-01 to 2025-01-02" in err
    # A bucket that is not the archive: nothing under the prefix, or objects that hold no event.
    s3.buckets["other"] = {"events/readme.txt": b"hello"}
    code = main(["trace", "export", str(path), "--from", "2026-11-02", "--to", "2026-11-03", "--bucket", "other"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "is not a job archive" in err
    s3.buckets["empty"] = {}
    code = main(["trace", "export", str(path), "--from", "2026-11-02", "--to", "2026-11-03", "--bucket", "empty"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "holds no object: it is not the platform's job archive" in err
    code = main(["trace", "export", str(path), "--from", "2026-11-02", "--to", "2026-11-03", "--bucket", "missing"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "NoSuchBucket" in err
    # --to before --from; a day that is not one.
    assert main(["trace", "export", str(path), "--from", "2026-11-03", "--to", "2026-11-02", "--bucket", BUCKET]) == 2
    assert "is before --from" in capsys.readouterr().err
    assert main(["trace", "export", str(path), "--from", "Nov 2", "--to", "2026-11-02", "--bucket", BUCKET]) == 2
    assert "write the day as YYYY-MM-DD" in capsys.readouterr().err
    # No region.
    monkeypatch.setattr(tx, "default_region", lambda: None)
    code = main(["trace", "export", str(path), "--from", "2026-11-02", "--to", "2026-11-03", "--bucket", BUCKET])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "no AWS region" in err and "--region" in err


def test_no_credentials_is_one_line(tmp_path, monkeypatch, capsys):
    path, _ = _config(tmp_path)
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code = main(["trace", "export", str(path), "--from", "2026-11-02", "--to", "2026-11-03", "--bucket", BUCKET,
                 "--region", "us-east-1"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "no AWS credentials" in err


# ---------------------------------------------------------------------------
# simulate --fidelity on the export


def _fidelity(path, out, capsys, *extra):
    code = main(["simulate", "--config", str(path), "--backend", "fairshare", "--trace", str(out), "--fidelity",
                 "--json", *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_fidelity_of_the_models_own_policy_is_exact(tmp_path, aws, capsys):
    path, _, rows, _, result, s3 = _run_cluster(tmp_path)
    aws["s3"] = s3.client
    code, out = _export(path, tmp_path)
    assert code == 0
    capsys.readouterr()
    report = _fidelity(path, out, capsys)
    assert set(report["fidelity"]) == {"team-a", "team-b", "team-c"}
    for team, metrics in report["fidelity"].items():
        for key, m in metrics.items():
            assert m["error"] == 0, (team, key, m)
    assert sum(m["preemptions"]["real"] for m in report["fidelity"].values()) == result.preemptions > 0
    assert any(m["borrowed_gpu_hours"]["real"] > 0 for m in report["fidelity"].values())
    # The table says the same.
    assert main(["simulate", "--config", str(path), "--backend", "fairshare", "--trace", str(out), "--fidelity"]) == 0
    table = capsys.readouterr().out
    assert "Fidelity: simulated against real, per team" in table and "borrowed GPU-hours" in table


def _uncontended(n_per_team=6):
    """Jobs within their team's guarantee, far apart: each starts the moment it is submitted."""
    from cdk_gpu_share.core.records.trace import TraceJob

    jobs = []
    for k, (team, gpus) in enumerate((("team-a", "2"), ("team-b", "1"), ("team-c", "1"))):
        for i in range(n_per_team):
            jobs.append(TraceJob(job_id=f"{team}-{i}", team=team, submit_time=str(10_000 * i + 100 * k),
                                 duration_s=str(600 + 60 * i), gpus=gpus, priority=0))
    return jobs


def test_a_start_up_delay_shows_as_the_simulators_known_wait_error(tmp_path, aws, capsys, monkeypatch):
    startup = 120
    monkeypatch.setattr(sys.modules[__name__], "_trace", lambda config, jobs=0, seed=0: _uncontended())
    path, _, rows, *_, s3 = _run_cluster(tmp_path, startup_s=startup)
    aws["s3"] = s3.client
    code, out = _export(path, tmp_path)
    assert code == 0
    capsys.readouterr()
    exported = _rows(out.read_text())
    assert [(r["job_id"], r["duration_s"]) for r in exported] == [(j.job_id, j.duration_s) for j in
                                                                   sorted(rows, key=lambda j: int(j.submit_time))]
    assert {r["wait_s"] for r in exported} == {str(startup)}
    report = _fidelity(path, out, capsys)
    for team, metrics in report["fidelity"].items():
        for key in ("wait_p50_s", "wait_p95_s", "wait_p99_s"):
            # The simulator starts a job when it fits; the cluster's container runs start-up seconds later.
            assert metrics[key] == {"real": startup, "simulated": 0, "error": -startup}, (team, key)
        assert metrics["preemptions"]["error"] == 0 and metrics["borrowed_gpu_hours"]["error"] == 0


def test_fidelity_refuses_another_config_a_changed_config_and_a_plain_trace(tmp_path, aws, capsys):
    path, *_, s3 = _run_cluster(tmp_path, jobs=20)
    aws["s3"] = s3.client
    code, out = _export(path, tmp_path)
    assert code == 0
    capsys.readouterr()
    other = tmp_path / "other.yaml"
    other.write_text(CONFIG.replace("checkpoint_seconds: 600", "checkpoint_seconds: 300"))
    assert main(["simulate", "--config", str(other), "--trace", str(out), "--fidelity"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "is not the config deployed over the period" in err
    text = out.read_text().splitlines()
    text[0] = text[0].replace("configs=", "configs=aaaaaaaaaaaa@2026-11-01T00:00:00Z..2026-11-01T23:00:00Z;")
    changed = tmp_path / "changed.csv"
    changed.write_text("\n".join(text) + "\n")
    assert main(["simulate", "--config", str(path), "--trace", str(changed), "--fidelity"]) == 2
    assert "spans more than one deployed config" in capsys.readouterr().err
    plain = tmp_path / "plain.csv"
    plain.write_text(trace_text(sample_jobs([("team-a", 2.0)], jobs=3)))
    assert main(["simulate", "--config", str(path), "--trace", str(plain), "--fidelity"]) == 2
    assert "has no columns wait_s, preemptions, borrowed_gpu_s" in capsys.readouterr().err
    assert main(["simulate", "--config", str(path), "--trace", str(out), "--fidelity", "--compare"]) == 2
    assert "does not go with --fidelity" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# --source batch and --source sagemaker


def test_the_batch_source_gives_back_the_trace_too_while_batch_keeps_the_jobs(tmp_path, monkeypatch, capsys):
    from tests.batch_model import BatchModel

    path, _, rows, _, result, _ = _run_cluster(tmp_path, jobs=120)
    model = BatchModel(page_limit=9)
    for jid, detail in json.loads(json.dumps(FairshareCluster.last.jobs)).items():
        model.jobs[jid] = detail
        model.visible_at[jid] = 0.0
    monkeypatch.setattr(tx, "make_client", lambda service, region: {"batch": model.batch}[service])
    monkeypatch.setattr(tx, "default_region", lambda: "us-east-1")
    out = tmp_path / "batch.csv"
    code = main(["trace", "export", str(path), "--from", "2026-11-02", "--to", "2026-11-30", "--source", "batch",
                 "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "warning: AWS Batch lists and describes a job only for a limited time" in err
    assert out.read_text().startswith("# gpu-share trace export: origin=2026-11-02T00:00:00Z source=batch\n")
    got = sorted(({k: r[k] for k in history.EXPORT_COLUMNS[:6]} for r in _rows(out.read_text())), key=lambda r: r["job_id"])
    want = sorted((dict(zip(history.EXPORT_COLUMNS[:6], r.as_row())) for r in rows), key=lambda r: r["job_id"])
    assert got == want
    assert sum(int(r["preemptions"]) for r in _rows(out.read_text())) == result.preemptions > 0
    # The listing: one created-at filter a call, paged; the describes: at most 100 ids a call.
    listings = [p for op, p, _ in model.requests if op == "ListJobs"]
    assert len(listings) > 1 and all(p["filters"][0]["name"] == "AFTER_CREATED_AT" for p in listings)


def test_the_sagemaker_source_takes_the_dispatch_time_and_says_so(tmp_path, monkeypatch, capsys):
    from tests.history_model import SageMakerModel

    config = tmp_path / "quota.yaml"
    config.write_text("platform: {name: gpu-share}\nteams:\n"
                      "  - {name: team-a, guarantee: {ml.g5.12xlarge: 1}}\n"
                      "  - {name: team-b, guarantee: {ml.g5.12xlarge: 1}}\n"
                      "batch_quota:\n  capacity: {ml.g5.12xlarge: 2}\n")
    model = SageMakerModel(page_size=2)
    t0 = ORIGIN
    model.add("a-1", created=t0 + 60, started=t0 + 120, ended=t0 + 720, instance_type="ml.g5.12xlarge", team="team-a")
    model.add("a-2", created=t0 + 3600, started=t0 + 3690, ended=t0 + 7290, instance_type="ml.g5.12xlarge", count=2,
              team="team-a")
    model.add("b-1", created=t0 + 100, started=t0 + 130, ended=t0 + 430, instance_type="ml.g5.12xlarge", team="team-b")
    model.add("x-1", created=t0 + 200, started=t0 + 230, ended=t0 + 330, instance_type="ml.g5.12xlarge", team="team-x")
    model.add("u-1", created=t0 + 300, started=t0 + 330, ended=t0 + 430, instance_type="ml.c5.xlarge", team="team-b")
    model.add("r-1", created=t0 + 400, started=t0 + 430, ended=None, instance_type="ml.g5.12xlarge", team="team-b",
              status="InProgress")
    model.add("old", created=t0 - 86_400, started=t0 - 86_000, ended=t0 - 80_000, instance_type="ml.g5.12xlarge",
              team="team-a")
    monkeypatch.setattr(tx, "make_client", lambda service, region: {"sagemaker": model.client}[service])
    monkeypatch.setattr(tx, "default_region", lambda: "us-east-1")
    out = tmp_path / "sm.csv"
    code = main(["trace", "export", str(config), "--from", "2026-11-02", "--to", "2026-11-02", "--source", "sagemaker",
                 "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "warning: SageMaker's CreationTime of a training job started from a quota share is when Batch dispatched" in err
    assert "not exported: 1 unfinished" in err and "not exported: 1 unknown team" in err
    assert "not exported: 1 unknown instance type" in err and "unknown instance types: ml.c5.xlarge (1)" in err
    rows = {r["job_id"]: r for r in _rows(out.read_text())}
    assert set(rows) == {"a-1", "a-2", "b-1"}
    assert (rows["a-1"]["submit_time"], rows["a-1"]["duration_s"], rows["a-1"]["gpus"], rows["a-1"]["wait_s"]) == (
        "60", "600", "4", "60")
    assert rows["a-2"]["gpus"] == "8"
    listings = [p for op, p in model.requests if op == "ListTrainingJobs"]
    assert len(listings) >= 3 and all("CreationTimeAfter" in p and "CreationTimeBefore" in p for p in listings)


def test_the_bucket_goes_with_the_archive_only(tmp_path, capsys):
    path, _ = _config(tmp_path)
    assert main(["trace", "export", str(path), "--from", "2026-11-02", "--to", "2026-11-03", "--source", "batch",
                 "--bucket", BUCKET]) == 2
    assert "does not go with --source batch" in capsys.readouterr().err


def test_the_batch_source_reads_service_jobs_with_their_request(tmp_path, monkeypatch, capsys):
    from tests.batch_model import Clock
    from tests.quota_model import QuotaQueueModel, ServiceJob

    config = tmp_path / "quota.yaml"
    config.write_text("platform: {name: gpu-share}\nteams:\n"
                      "  - {name: team-a, guarantee: {ml.g5.12xlarge: 1}}\n"
                      "  - {name: team-b, guarantee: {ml.g5.12xlarge: 1}}\n"
                      "batch_quota:\n  capacity: {ml.g5.12xlarge: 2}\n")
    model = QuotaQueueModel(shares={"team-a": {"ml.g5.12xlarge": 1}, "team-b": {"ml.g5.12xlarge": 1}},
                            clock=Clock(ORIGIN))
    model.jobs["s1"] = ServiceJob("s1", "team-a", {"ml.g5.12xlarge": 2}, created=ORIGIN + 10, status="SUCCEEDED",
                                  started=ORIGIN + 70, stopped=ORIGIN + 670, team="team-a")
    model.jobs["s2"] = ServiceJob("s2", "team-b", {"ml.g5.12xlarge": 1}, created=ORIGIN + 20, status="RUNNING",
                                  started=ORIGIN + 30)
    model.jobs["s0"] = ServiceJob("s0", "team-b", {"ml.g5.12xlarge": 1}, created=ORIGIN - 5000, status="SUCCEEDED",
                                  started=ORIGIN - 4000, stopped=ORIGIN - 3000)
    monkeypatch.setattr(tx, "make_client", lambda service, region: {"batch": model.batch}[service])
    monkeypatch.setattr(tx, "default_region", lambda: "us-east-1")
    out = tmp_path / "svc.csv"
    code = main(["trace", "export", str(config), "--from", "2026-11-02", "--to", "2026-11-02", "--source", "batch",
                 "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    [row] = _rows(out.read_text())
    assert (row["job_id"], row["team"], row["submit_time"], row["duration_s"], row["gpus"], row["wait_s"]) == (
        "s1", "team-a", "10", "600", "8", "60")
    assert "not exported: 1 unfinished" in err
    listings = [p for op, p in model.requests if op == "ListServiceJobs"]
    assert listings and all(p["filters"] == [{"name": "AFTER_CREATED_AT", "values": [str(int(ORIGIN * 1000) - 1)]}]
                            for p in listings)


def test_the_progress_bar_shows_on_a_terminal_only(monkeypatch):
    class Terminal(io.StringIO):
        def __init__(self, tty: bool) -> None:
            super().__init__()
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    for tty in (True, False):
        err = Terminal(tty)
        monkeypatch.setattr(sys, "stderr", err)
        bar = tx._Progress()
        for done in range(1, 41):
            bar(done, 40)
        bar.close()
        text = err.getvalue()
        assert ("reading the archive [" in text and "40/40 objects" in text) is tty
        assert text == "" or text.endswith("\r")


# ---------------------------------------------------------------------------
# Broken or hostile objects: each is skipped and counted, never a traceback


def _bomb(size: int) -> bytes:
    """A small gzip that decompresses to ``size`` zero bytes."""
    import zlib

    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b"\0" * (1 << 20)
    parts = [z.compress(chunk) for _ in range(size >> 20)]
    return b"".join(parts) + z.flush()


def test_hostile_objects_are_skipped_and_counted_and_every_good_record_read(tmp_path, aws, capsys):
    import gzip

    from cdk_gpu_share.aws import history_reader

    path, config, rows, *_, s3 = _run_cluster(tmp_path, jobs=30)
    bucket = s3.buckets[BUCKET]
    good = {key: gzip.decompress(body) for key, body in bucket.items()}
    # One bad line in the middle of every object: that line only is lost.
    for key, text in good.items():
        lines = text.splitlines(keepends=True)
        bucket[key] = gzip.compress(b"".join([*lines[:1], b"not json {\n", *lines[1:]]))
    day = f"events/2026/11/02/config={history.policy_hash(config)}/"
    bucket[day + "nested.gz"] = gzip.compress(b"[" * 100_000)  # a RecursionError once
    bucket[day + "bomb.gz"] = _bomb(history_reader.MAX_OBJECT_BYTES + (1 << 20))
    bucket[day + "truncated.gz"] = gzip.compress(next(iter(good.values())))[:-20]
    bucket[day + "mixed"] = b'{"a": 1}\n\xff\xfe not utf-8\n' + b"x" * (history.MAX_LINE_BYTES + 1) + b"\n"
    aws["s3"] = s3.client
    out = tmp_path / "jobs.csv"
    code = main(["trace", "export", str(path), "--from", "2026-11-02", "--to", "2026-11-30", "--bucket", BUCKET,
                 "-o", str(out), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert len(_rows(out.read_text())) == len(rows)
    summary = json.loads(captured.out)
    skipped = {why: v["count"] for why, v in summary["skipped"].items()}
    assert skipped == {"lines not JSON objects": len(good), "lines nested deeper than 64": 1, "objects larger than 128 MiB": 1,
                       "objects whose compression is broken": 1, "lines not UTF-8": 1, "lines longer than 1 MiB": 1}
    assert summary["skipped"]["objects larger than 128 MiB"]["first"] == day + "bomb.gz"
    assert summary["exported"] == len(rows) and summary["output"] == str(out)
    assert f"skipped: {len(good)} lines not JSON objects (first in " in captured.err
    assert "skipped: 1 objects larger than 128 MiB (first in " + day + "bomb.gz)" in captured.err
    assert f"{len(good) + 5} objects or lines skipped" in captured.err.splitlines()[0]


def test_a_listing_that_never_ends_stops_after_its_request_bound(tmp_path, aws, capsys):
    from cdk_gpu_share.aws import history_reader
    from tests.history_model import AWSResponse, _Raw

    path, *_ = _config(tmp_path)
    s3 = S3Model()
    s3.buckets[BUCKET] = {}

    def endless(request, bucket, query):
        body = (f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                f"<Name>{bucket}</Name><Prefix>events/</Prefix><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys>"
                "<IsTruncated>true</IsTruncated><NextContinuationToken>again</NextContinuationToken></ListBucketResult>")
        return AWSResponse(request.url, 200, {"Content-Type": "application/xml"}, _Raw(body.encode()))

    s3._list = endless
    aws["s3"] = s3.client
    code = main(["trace", "export", str(path), "--from", "2026-11-02", "--to", "2026-11-03", "--bucket", BUCKET])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "did not end after 2,000 requests" in err
    assert sum(1 for op, *_ in s3.requests if op == "ListObjectsV2") == history_reader.MAX_LIST_PAGES


def test_too_many_lines_in_one_object_stop_at_the_bound(monkeypatch):
    monkeypatch.setattr(history, "MAX_LINES", 3)
    got = list(history.parse_lines(b'{"a":1}\n\n{"a":2}\n   \n{"a":3}\n{"a":4}\n{"a":5}\n'))
    assert got == [({"a": 1}, None), ({"a": 2}, None), ({"a": 3}, None), (None, "lines past 3 in one object")]


def test_the_output_is_checked_before_any_aws_call_and_a_link_is_replaced_not_followed(tmp_path, aws, capsys):
    path, _, rows, *_, s3 = _run_cluster(tmp_path, jobs=10)
    aws["s3"] = s3.client
    base = ["trace", "export", str(path), "--from", "2026-11-02", "--to", "2026-11-30", "--bucket", BUCKET]
    (tmp_path / "folder").mkdir()
    for output, message in ((tmp_path / "folder", "is a folder"), (path, f"is the input {path}"),
                            (tmp_path / "missing" / "jobs.csv", "names a folder that does not exist")):
        assert main([*base, "-o", str(output)]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and f"-o: {message}" in err, err
    assert s3.requests == [], "refused before the first AWS request"
    assert path.read_text() == CONFIG
    assert main([*base, "--json"]) == 2
    assert "--json: prints the summary on standard output" in capsys.readouterr().err
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "jobs.csv"
    link.symlink_to(victim)
    assert main([*base, "-o", str(link)]) == 0
    capsys.readouterr()
    assert victim.read_text() == "keep me" and not link.is_symlink()
    assert len(_rows(link.read_text())) == len(rows)


def test_an_object_of_several_gzip_members_past_one_decompression_step_is_read_whole():
    import gzip

    from cdk_gpu_share.aws import history_reader

    raw = b'{"version":"0","id":"x"}\n' * 900_000  # 22 MB: more than one 16 MiB step
    half = len(raw) // 2
    assert history_reader._inflate(gzip.compress(raw[:half]) + gzip.compress(raw[half:])) == raw
    with pytest.raises(EOFError):
        history_reader._inflate(gzip.compress(raw)[:-100])


def test_an_object_that_expires_between_the_listing_and_the_read_is_skipped(tmp_path, aws, capsys):
    path, config, rows, *_, s3 = _run_cluster(tmp_path, jobs=10)
    gone = f"events/2026/11/02/config={history.policy_hash(config)}/expired.gz"
    s3.put(BUCKET, gone, b"")
    answer = s3._on_send

    def expire(request, event_name, **kw):
        if event_name.endswith("GetObject") and request.url.endswith("expired.gz"):
            return s3._error(request, 404, "NoSuchKey", "The specified key does not exist.")
        return answer(request, event_name, **kw)

    s3.client.meta.events.unregister("before-send.s3", answer)
    s3.client.meta.events.register("before-send.s3", expire)
    aws["s3"] = s3.client
    code, out = _export(path, tmp_path)
    err = capsys.readouterr().err
    assert code == 0, err
    assert len(_rows(out.read_text())) == len(rows)
    assert f"skipped: 1 objects gone before they were read (first in {gone})" in err


# ---------------------------------------------------------------------------
# Bounds of one object's decompression and of the whole read


def test_200_000_empty_gzip_members_are_read_with_work_linear_in_the_object():
    import gzip
    import time

    from cdk_gpu_share.aws import history_reader

    record = b'{"version":"0","id":"x"}\n'
    body = gzip.compress(b"") * 100_000 + gzip.compress(record) + gzip.compress(b"") * 100_000  # 4 MB
    stats = history_reader.ArchiveRead()
    started = time.perf_counter()
    assert history_reader._inflate(body, stats=stats) == record
    print(f"200,001 gzip members, {len(body):,} bytes: read in {time.perf_counter() - started:.2f} s")
    assert stats.members == 200_001
    # The bytes handed to zlib (all it may copy) are a few times the object, not members x object.
    assert stats.inflated_input <= 4 * len(body), stats.inflated_input


def test_a_large_member_after_small_ones_is_fed_in_growing_steps():
    import gzip
    import os

    from cdk_gpu_share.aws import history_reader

    raw = os.urandom(3 << 20)  # incompressible: a 3 MiB member
    body = gzip.compress(b"a") * 1000 + gzip.compress(raw) + gzip.compress(b"b")
    stats = history_reader.ArchiveRead()
    assert history_reader._inflate(body, stats=stats) == b"a" * 1000 + raw + b"b"
    assert stats.members == 1002 and stats.inflated_input <= 4 * len(body)


def test_an_object_of_too_many_members_or_too_slow_is_cut(monkeypatch):
    import gzip

    from cdk_gpu_share.aws import history_reader

    monkeypatch.setattr(history_reader, "MAX_MEMBERS", 10)
    assert history_reader._inflate(gzip.compress(b"x") * 10) == b"x" * 10
    with pytest.raises(history_reader._Cut, match="objects of more than 10 gzip members"):
        history_reader._inflate(gzip.compress(b"x") * 11)
    ticks = iter(range(1000))
    monkeypatch.setattr(history_reader, "_clock", lambda: float(next(ticks)))  # one second a step
    monkeypatch.setattr(history_reader, "MAX_OBJECT_SECONDS", 5.0)
    assert history_reader._inflate(gzip.compress(b"x") * 4) == b"x" * 4
    with pytest.raises(history_reader._Cut, match="objects not decompressed within 5 s"):
        history_reader._inflate(gzip.compress(b"x") * 6)


def _hostile_export(tmp_path, aws, capsys, extra):
    """An export of the archive of a short run plus ``extra`` objects (their days sort after the
    run's): its rows, the run's rows, its JSON summary and its standard error."""
    path, config, rows, *_, s3 = _run_cluster(tmp_path, jobs=10)
    day = f"events/2026/11/29/config={history.policy_hash(config)}/"
    for name, body in extra.items():
        s3.put(BUCKET, day + name, body)
    aws["s3"] = s3.client
    code, out = _export(path, tmp_path, "--json")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return _rows(out.read_text()), rows, json.loads(captured.out), captured.err, day, s3


def test_a_hostile_archive_is_cut_at_each_bound_and_the_cut_is_one_line(tmp_path, aws, capsys, monkeypatch):
    import gzip

    from cdk_gpu_share.aws import history_reader

    monkeypatch.setattr(history_reader, "MAX_MEMBERS", 100)
    many = gzip.compress(b"") * 101
    exported, rows, summary, err, day, _ = _hostile_export(tmp_path, aws, capsys, {"many.gz": many})
    assert len(exported) == len(rows)
    assert summary["skipped"] == {"objects of more than 100 gzip members": {"count": 1, "first": day + "many.gz"}}
    assert f"skipped: 1 objects of more than 100 gzip members (first in {day}many.gz)" in err


def test_the_read_stops_at_its_bound_of_objects_and_counts_the_rest(tmp_path, aws, capsys, monkeypatch):
    from cdk_gpu_share.aws import history_reader

    path, config, rows, *_, s3 = _run_cluster(tmp_path, jobs=10)
    run = len(s3.buckets[BUCKET])
    monkeypatch.setattr(history_reader, "MAX_READ_OBJECTS", run + 2)
    extra = {f"extra-{i}": b"" for i in range(5)}
    exported, rows, summary, err, day, s3 = _hostile_export(tmp_path, aws, capsys, extra)
    assert len(exported) == len(rows) and summary["read"] == run + 2
    why = f"objects past the read's bound of {run + 2:,} objects"
    assert summary["skipped"] == {why: {"count": 3, "first": day + "extra-2"}}
    assert sum(1 for op, *_ in s3.requests if op == "GetObject") == run + 2, "nothing is fetched past the bound"
    assert f"skipped: 3 {why} (first in {day}extra-2)" in err


def test_the_read_stops_at_its_bound_of_bytes_and_counts_the_rest(tmp_path, aws, capsys, monkeypatch):
    import gzip

    from cdk_gpu_share.aws import history_reader

    path, config, rows, *_, s3 = _run_cluster(tmp_path, jobs=10)
    run = sum(len(gzip.decompress(body)) for body in s3.buckets[BUCKET].values())
    monkeypatch.setattr(history_reader, "MAX_READ_BYTES", run + 1500)
    # 1,000 bytes fit; the next object (a small gzip of 1,000 bytes) would cross the bound.
    extra = {"a-plain": b" " * 1000, "b.gz": gzip.compress(b" " * 1000), "c-plain": b" "}
    exported, rows, summary, err, day, _ = _hostile_export(tmp_path, aws, capsys, extra)
    assert len(exported) == len(rows)
    why = f"objects past the read's bound of {run + 1500:,} bytes"
    assert summary["skipped"] == {why: {"count": 2, "first": day + "b.gz"}}
    assert f"skipped: 2 {why} (first in {day}b.gz)" in err
