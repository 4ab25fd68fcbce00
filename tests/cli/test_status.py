"""`gpu-share status`: both kinds of queue, read through botocore's Stubber on the real Batch model."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber

from cdk_gpu_share.aws import quota_reader
from cdk_gpu_share.cli import main, status_cmd
from tests.helpers import ROOT

NOW = 1_800_000_000.0  # seconds since the epoch
MS = 1000
REGION = "us-east-1"
ACCOUNT = "111122223333"
QUOTA_QUEUE = "gpu-share-training"
CLASSIC_QUEUE = "gpu-share-fairshare"
CONFIG = str(ROOT / "platform.yaml")


def _arn(kind: str, name: str) -> str:
    return f"arn:aws:batch:{REGION}:{ACCOUNT}:{kind}/{name}"


@pytest.fixture
def client():
    return boto3.client(
        "batch", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )


@pytest.fixture
def stub(client, monkeypatch):
    """A Stubber on a real Batch client, which `gpu-share status` then uses."""
    monkeypatch.setattr(status_cmd, "make_client", lambda region: client)
    monkeypatch.setattr(status_cmd, "_now", lambda: NOW)
    monkeypatch.setattr(status_cmd, "_sleep", lambda s: None)
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def _queue_detail(name: str, queue_type: str, *, policy: bool = True) -> dict:
    detail = {
        "jobQueueName": name,
        "jobQueueArn": _arn("job-queue", name),
        "state": "ENABLED",
        "status": "VALID",
        "priority": 1,
        "computeEnvironmentOrder": [],
        "jobQueueType": queue_type,
    }
    if policy:
        detail["schedulingPolicyArn"] = _arn("scheduling-policy", f"{name}-policy")
    return detail


def _describe(stub, name: str, queue_type: str, **kw) -> None:
    stub.add_response(
        "describe_job_queues", {"jobQueues": [_queue_detail(name, queue_type, **kw)]}, {"jobQueues": [name]}
    )


# ---------------------------------------------------------------------------
# Quota-management queue


def _share(name: str, limit: int, strategy: str = "LEND_AND_BORROW", borrow: int | None = -1, preempt: str = "DISABLED"):
    sharing = {"strategy": strategy}
    if borrow is not None:
        sharing["borrowLimit"] = borrow
    return {
        "quotaShareName": name,
        "quotaShareArn": _arn("quota-share", f"{QUOTA_QUEUE}/{name}"),
        "jobQueueArn": _arn("job-queue", QUOTA_QUEUE),
        "capacityLimits": [{"maxCapacity": limit, "capacityUnit": "ml.g5.xlarge"}],
        "resourceSharingConfiguration": sharing,
        "preemptionConfiguration": {"inSharePreemption": preempt},
        "state": "ENABLED",
        "status": "VALID",
    }


def _service_job(jid: str, share: str | None, created: float, **extra) -> dict:
    job = {"jobId": jid, "jobName": f"train-{jid}", "serviceJobType": "SAGEMAKER_TRAINING", "status": "RUNNABLE",
           "createdAt": int(created * MS), "jobArn": _arn("service-job", jid)}
    if share:
        job["quotaShareName"] = share
    job.update(extra)
    return job


def _stub_quota_queue(stub, *, waiting_pages=None, usage=None) -> None:
    """team-a uses 2 (guarantee 1), team-b 0 (guarantee 1, waiting 2 jobs), team-c 1 (reserve)."""
    _describe(stub, QUOTA_QUEUE, "SAGEMAKER_TRAINING")
    stub.add_response(
        "list_quota_shares",
        {"quotaShares": [_share("team-a", 1, preempt="ENABLED"), _share("team-b", 1, "LEND", None)], "nextToken": "t1"},
        {"jobQueue": QUOTA_QUEUE},
    )
    stub.add_response(
        "list_quota_shares",
        {"quotaShares": [_share("team-c", 1, "RESERVE", None)]},
        {"jobQueue": QUOTA_QUEUE, "nextToken": "t1"},
    )
    if usage is None:
        usage = [
            {"quotaShareName": "team-a", "capacityUsage": [{"capacityUnit": "ml.g5.xlarge", "quantity": 2.0}]},
            {"quotaShareName": "team-c", "capacityUsage": [{"capacityUnit": "ml.g5.xlarge", "quantity": 1.0}]},
        ]
    stub.add_response(
        "get_job_queue_snapshot",
        {
            "frontOfQueue": {"jobs": [{"jobArn": _arn("service-job", "b1"), "earliestTimeAtPosition": int(NOW * MS)}]},
            "queueUtilization": {
                "totalCapacityUsage": [{"capacityUnit": "ml.g5.xlarge", "quantity": 3.0}],
                "quotaShareUtilization": {"topCapacityUtilization": usage},
                "lastUpdatedAt": int((NOW - 30) * MS),
            },
        },
        {"jobQueue": QUOTA_QUEUE},
    )
    if waiting_pages is None:
        waiting_pages = [
            [_service_job("b1", "team-b", NOW - 600)],
            [_service_job("b2", "team-b", NOW - 90), _service_job("a9", "team-a", NOW - 5, isTerminated=True)],
        ]
    for i, page in enumerate(waiting_pages):
        params = {"jobQueue": QUOTA_QUEUE, "jobStatus": "RUNNABLE"}
        response = {"jobSummaryList": page}
        if i:
            params["nextToken"] = f"w{i}"
        if i + 1 < len(waiting_pages):
            response["nextToken"] = f"w{i + 1}"
        stub.add_response("list_service_jobs", response, params)


def test_quota_reader_reads_usage_guarantee_and_waiting_jobs_per_share(client):
    with Stubber(client) as stub:
        _stub_quota_queue(stub)
        status = quota_reader.read_quota_queue(client, QUOTA_QUEUE, now=NOW)
        stub.assert_no_pending_responses()
    assert [s.name for s in status.shares] == ["team-a", "team-b", "team-c"]
    a, b, c = status.shares
    assert (a.usage, a.guarantee, a.borrowed) == ({"ml.g5.xlarge": 2.0}, {"ml.g5.xlarge": 1.0}, {"ml.g5.xlarge": 1.0})
    assert (b.usage, b.borrowed) == ({}, {"ml.g5.xlarge": 0.0})
    assert [j.job_id for j in b.waiting] == ["b1", "b2"]  # oldest first
    assert b.oldest_wait_seconds(NOW) == 600
    assert a.waiting == ()  # its only RUNNABLE job is being terminated
    assert (a.strategy, a.borrow_limit_percent, a.in_share_preemption) == ("LEND_AND_BORROW", -1, True)
    assert (c.strategy, c.borrow_limit_percent) == ("RESERVE", None)
    assert a.gpus(a.usage) == 2.0  # ml.g5.xlarge has one GPU
    assert status.total_usage == {"ml.g5.xlarge": 3.0}
    assert status.snapshot_at == NOW - 30


def test_status_json_for_a_quota_queue(stub, capsys):
    _stub_quota_queue(stub)
    assert main(["status", "--queue", QUOTA_QUEUE, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kind"] == "quota" and report["queue_type"] == "SAGEMAKER_TRAINING"
    assert report["teams"]["team-a"]["usage"] == {"ml.g5.xlarge": 2}
    assert report["teams"]["team-a"]["borrowed"] == {"ml.g5.xlarge": 1}
    assert report["teams"]["team-a"]["borrowed_gpus"] == 1
    assert report["teams"]["team-b"]["waiting_jobs"] == 2
    assert report["teams"]["team-b"]["oldest_wait_seconds"] == 600
    assert [w["id"] for w in report["teams"]["team-b"]["waiting"]] == ["b1", "b2"]
    assert report["teams"]["team-c"]["strategy"] == "RESERVE"
    assert report["notes"] == []


def test_status_table_for_a_quota_queue(stub, capsys):
    _stub_quota_queue(stub)
    assert main(["status", "--queue", QUOTA_QUEUE]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"Queue {QUOTA_QUEUE} (quota management")
    header = out[1].split()
    assert header[:2] == ["TEAM", "INSTANCE"]
    rows = {line.split()[0]: line.split() for line in out[2:5]}
    assert rows["team-a"][1:5] == ["ml.g5.xlarge", "2", "1", "1"]
    assert rows["team-b"][1:5] == ["ml.g5.xlarge", "0", "1", "0"]
    assert rows["team-b"][-3:] == ["2", "10m", "00s"]
    assert "in-team preemption" in " ".join(rows["team-a"])
    assert out[5].startswith("In use on the queue: 3 x ml.g5.xlarge")


def test_status_names_shares_and_teams_that_do_not_match_the_config(stub, capsys, tmp_path):
    cfg = tmp_path / "platform.yaml"
    cfg.write_text(
        "teams:\n"
        "  - {name: team-a, guarantee: {ml.g5.xlarge: 1}}\n"
        "  - {name: team-z, guarantee: {ml.g5.xlarge: 1}}\n"
        "batch_quota: {capacity: {ml.g5.xlarge: 3}}\n"
    )
    _stub_quota_queue(stub, waiting_pages=[[_service_job("x1", None, NOW - 1)]])
    assert main(["status", "--queue", QUOTA_QUEUE, "--config", str(cfg), "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("without a quota share on this queue: team-z" in n for n in notes)
    assert any("quota shares not in" in n and "team-b, team-c" in n for n in notes)
    assert any("1 waiting job(s) name no listed quota share" in n for n in notes)


def test_a_share_seen_only_in_the_snapshot_is_still_shown(client):
    usage = [{"quotaShareName": "old-team", "capacityUsage": [{"capacityUnit": "ml.g5.xlarge", "quantity": 1.0}]}]
    with Stubber(client) as stub:
        _stub_quota_queue(stub, usage=usage, waiting_pages=[[]])
        status = quota_reader.read_quota_queue(client, QUOTA_QUEUE, now=NOW)
    old = status.share("old-team")
    assert old.usage == {"ml.g5.xlarge": 1.0} and old.guarantee == {} and old.borrowed == {"ml.g5.xlarge": 1.0}


# ---------------------------------------------------------------------------
# Errors: exit 2, one line naming the queue and the fix


def _one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def test_unknown_queue_exits_2(stub, capsys):
    stub.add_response("describe_job_queues", {"jobQueues": []}, {"jobQueues": ["nope"]})
    assert main(["status", "--queue", "nope"]) == 2
    line = _one_line_error(capsys)
    assert "job queue 'nope' not found in region us-east-1" in line and "--region" in line


def test_access_denied_exits_2_naming_the_permissions(stub, capsys):
    _describe(stub, QUOTA_QUEUE, "SAGEMAKER_TRAINING")
    stub.add_client_error(
        "list_quota_shares", "AccessDeniedException", "User is not authorized to perform: batch:ListQuotaShares",
        http_status_code=403, expected_params={"jobQueue": QUOTA_QUEUE},
    )
    assert main(["status", "--queue", QUOTA_QUEUE]) == 2
    line = _one_line_error(capsys)
    assert f"access denied reading job queue '{QUOTA_QUEUE}'" in line
    assert "ListQuotaShares" in line and "batch:GetJobQueueSnapshot" in line


def test_client_exception_exits_2_with_the_service_message(stub, capsys):
    stub.add_client_error(
        "describe_job_queues", "ClientException", "jobQueues contains an invalid ARN", http_status_code=400,
        expected_params={"jobQueues": ["arn:bad"]},
    )
    assert main(["status", "--queue", "arn:bad"]) == 2
    line = _one_line_error(capsys)
    assert "AWS Batch rejected DescribeJobQueues for job queue 'arn:bad'" in line
    assert "invalid ARN" in line and "check the queue name" in line


@pytest.fixture
def no_aws_config(monkeypatch, tmp_path):
    for var in (
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
        "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_no_credentials_exits_2(no_aws_config, capsys):
    assert main(["status", "--queue", QUOTA_QUEUE, "--region", "eu-west-1"]) == 2
    line = _one_line_error(capsys)
    assert f"no AWS credentials to read job queue '{QUOTA_QUEUE}' in region eu-west-1" in line
    assert "aws configure" in line


def test_no_region_exits_2(no_aws_config, capsys):
    assert main(["status", "--queue", QUOTA_QUEUE]) == 2
    line = _one_line_error(capsys)
    assert "no AWS region" in line and "--region" in line


def test_a_bad_config_exits_2_before_any_aws_call(stub, capsys, tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("teams: []\n")
    assert main(["status", "--queue", QUOTA_QUEUE, "--config", str(cfg)]) == 2
    assert "teams" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# Classic fair-share queue (platform.yaml: team-a/b/c, 1 GPU each of 3; reclaim after 60 s)


def _job(jid: str, share: str, status: str, *, gpus: int = 1, started: float | None = None,
         created: float | None = None, terminated: bool = False) -> dict:
    job = {
        "jobName": f"job-{jid}",
        "jobId": jid,
        "jobArn": _arn("job", jid),
        "jobQueue": _arn("job-queue", CLASSIC_QUEUE),
        "status": status,
        "shareIdentifier": share,
        "schedulingPriority": 0,
        "createdAt": int((created if created is not None else NOW - 3600) * MS),
        "startedAt": int(started * MS) if started is not None else 0,
        "jobDefinition": _arn("job-definition", "train:1"),
        "container": {"resourceRequirements": [{"type": "GPU", "value": str(gpus)}, {"type": "VCPU", "value": "4"}]},
    }
    if terminated:
        job["isTerminated"] = True
    return job


CLASSIC_JOBS = {
    "RUNNABLE": [
        _job("a1", "teama", "RUNNABLE", created=NOW - 120),  # within team-a's guarantee, waited > 60 s
        _job("c2", "teamc", "RUNNABLE", created=NOW - 30),  # team-c would borrow: waits
    ],
    "STARTING": [],
    "RUNNING": [
        _job("b1", "teamb", "RUNNING", started=NOW - 1000),
        _job("b2", "teamb", "RUNNING", started=NOW - 500),  # borrowed: the most recent, stopped first
        _job("c1", "teamc", "RUNNING", started=NOW - 2000),
        _job("x1", "teamb", "RUNNING", started=NOW - 10, terminated=True),
    ],
}


def _stub_classic_queue(stub, *, running_pages: int = 2, policy: bool = True) -> None:
    _describe(stub, CLASSIC_QUEUE, "ECS", policy=policy)
    listed = []
    for status in ("RUNNABLE", "STARTING", "RUNNING"):
        jobs = CLASSIC_JOBS[status]
        pages = [jobs[: len(jobs) // 2], jobs[len(jobs) // 2 :]] if status == "RUNNING" and running_pages == 2 else [jobs]
        for i, page in enumerate(pages):
            params = {"jobQueue": CLASSIC_QUEUE, "jobStatus": status, "maxResults": 1000}
            response = {"jobSummaryList": [{"jobId": j["jobId"], "jobName": j["jobName"]} for j in page]}
            if i:
                params["nextToken"] = f"{status}-{i}"
            if i + 1 < len(pages):
                response["nextToken"] = f"{status}-{i + 1}"
            stub.add_response("list_jobs", response, params)
            listed += page
    stub.add_response("describe_jobs", {"jobs": listed}, {"jobs": [j["jobId"] for j in listed]})


def test_status_json_for_a_classic_queue_uses_the_reader_and_the_planner(stub, capsys):
    _stub_classic_queue(stub)
    assert main(["status", "--queue", CLASSIC_QUEUE, "--config", CONFIG, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kind"] == "classic" and report["capacity"] == {"gpu": 3}
    teams = report["teams"]
    assert list(teams) == ["team-a", "team-b", "team-c"]
    # Now: team-b holds 2 GPUs (1 borrowed); the terminating job x1 holds nothing.
    assert teams["team-b"]["usage"] == {"gpu": 2} and teams["team-b"]["borrowed"] == {"gpu": 1}
    assert teams["team-b"]["running_jobs"] == 2 and teams["team-b"]["terminating_jobs"] == 1
    assert teams["team-a"]["usage"] == {"gpu": 0} and teams["team-a"]["guarantee"] == {"gpu": 1}
    assert teams["team-a"]["borrow_cap"] == {"gpu": None}
    assert teams["team-a"]["waiting_jobs"] == 1 and teams["team-a"]["lender_wait_seconds"] == 120
    assert teams["team-c"]["oldest_wait_seconds"] == 30 and teams["team-c"]["lender_wait_seconds"] is None
    # Next cycle: the reclaimer would stop b2 for a1; c2 keeps waiting.
    assert report["next_cycle"]["preemptions"] == [
        {"job": "b2", "team": "team-b", "reason": "reclaim", "beneficiary": "a1"}
    ]
    assert teams["team-b"]["next_cycle"] == {"stop": ["b2"], "serve": []}
    assert teams["team-a"]["next_cycle"] == {"stop": [], "serve": ["a1"]}
    assert report["next_cycle"]["waiting"] == ["c2"]
    assert report["api_calls"] == {"ListJobs": 4, "DescribeJobs": 1}
    # platform.yaml's reclaimer uses the checkpoint-aware order; status records nothing.
    assert report["victim_order"] == "checkpoint" and report["settings"]["victim_order"] == "checkpoint"
    assert report["notes"] == ["3 running job(s) carry no gpu-share:borrowed record yet (the next cycle records them);"
                               " whether they borrowed is derived from the queue as it is now"]


def test_status_table_for_a_classic_queue(stub, capsys):
    _stub_classic_queue(stub, running_pages=1)
    assert main(["status", "--queue", CLASSIC_QUEUE, "--config", CONFIG]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"Queue {CLASSIC_QUEUE} (fair share, 3 GPUs in the config)")
    assert out[1].split()[:6] == ["TEAM", "USED", "GUARANTEE", "BORROWED", "BORROW", "CAP"]
    rows = {line.split()[0]: line for line in out[2:5]}
    assert rows["team-b"].split()[1:7] == ["2", "1", "1", "unlimited", "2", "0"]
    assert rows["team-b"].rstrip().endswith("stop 1")
    assert rows["team-a"].rstrip().endswith("serve 1")
    assert "2m 00s" in rows["team-a"]
    assert ("Reclaim stops first runs started on borrowed GPUs, then the least work lost since the last checkpoint"
            " (victim_order: checkpoint).") in out


def test_classic_queue_without_config_exits_2(stub, capsys):
    _describe(stub, CLASSIC_QUEUE, "ECS")
    assert main(["status", "--queue", CLASSIC_QUEUE]) == 2
    line = _one_line_error(capsys)
    assert f"job queue '{CLASSIC_QUEUE}' is a classic fair-share queue" in line and "--config" in line


def test_classic_queue_with_a_config_without_fairshare_exits_2(stub, capsys, tmp_path):
    cfg = tmp_path / "quota-only.yaml"
    cfg.write_text("teams:\n  - {name: team-a, guarantee: {ml.g5.xlarge: 1}}\nbatch_quota: {capacity: {ml.g5.xlarge: 1}}\n")
    _describe(stub, CLASSIC_QUEUE, "ECS")
    assert main(["status", "--queue", CLASSIC_QUEUE, "--config", str(cfg)]) == 2
    assert "has no fairshare section" in _one_line_error(capsys)


def test_classic_notes_unknown_shares_and_a_missing_policy(stub, capsys, monkeypatch):
    monkeypatch.setitem(CLASSIC_JOBS, "STARTING", [_job("z1", "ghost", "STARTING")])
    _stub_classic_queue(stub, running_pages=1, policy=False)
    assert main(["status", "--queue", CLASSIC_QUEUE, "--config", CONFIG, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "share:ghost" in report["teams"]
    assert any("no fair-share scheduling policy" in n for n in report["notes"])
    assert any("'ghost'" in n for n in report["notes"])


def test_classic_access_denied_names_the_classic_permissions(stub, capsys):
    _describe(stub, CLASSIC_QUEUE, "ECS")
    stub.add_client_error(
        "list_jobs", "AccessDeniedException", "not authorized", http_status_code=403,
        expected_params={"jobQueue": CLASSIC_QUEUE, "jobStatus": "RUNNABLE", "maxResults": 1000},
    )
    assert main(["status", "--queue", CLASSIC_QUEUE, "--config", CONFIG]) == 2
    line = _one_line_error(capsys)
    assert "access denied" in line and "batch:ListJobs" in line and "batch:DescribeJobs" in line


def test_fmt_duration():
    assert [status_cmd.fmt_duration(s) for s in (None, 5, 125, 3725, 90000)] == ["-", "5s", "2m 05s", "1h 02m", "1d 01h"]


def test_the_region_of_a_queue_arn_is_used_without_region(monkeypatch, client, capsys):
    regions = []

    def make(region):
        regions.append(region)
        return client

    monkeypatch.setattr(status_cmd, "make_client", make)
    monkeypatch.setattr(status_cmd, "_now", lambda: NOW)
    arn = "arn:aws:batch:eu-west-1:111122223333:job-queue/q"
    with Stubber(client) as stub:
        stub.add_response("describe_job_queues", {"jobQueues": []}, {"jobQueues": [arn]})
        assert main(["status", "--queue", arn]) == 2
    assert regions == ["eu-west-1"]
    with Stubber(client) as stub:
        stub.add_response("describe_job_queues", {"jobQueues": []}, {"jobQueues": [arn]})
        assert main(["status", "--queue", arn, "--region", "us-west-2"]) == 2
    assert regions[-1] == "us-west-2"


def _client_error(code: str, message: str = "boom", op: str = "ListJobs"):
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": message}}, op)


@pytest.mark.parametrize(
    "exc, expected",
    [
        (lambda: _client_error("ExpiredTokenException"), "credentials expired while reading job queue 'q'"),
        (lambda: _client_error("UnrecognizedClientException"), "rejected the credentials used to read job queue 'q'"),
        (lambda: _client_error("ThrottlingException"), "throttled the reads of job queue 'q' in region r (ListJobs); retry"),
        (lambda: _client_error("SomethingNew", "odd\nthing"), "AWS error SomethingNew in ListJobs reading job queue 'q' in region r: odd thing"),
        (lambda: __import__("botocore.exceptions").exceptions.EndpointConnectionError(endpoint_url="https://batch.r.amazonaws.com"),
         "cannot reach AWS Batch in region r to read job queue 'q'"),
    ],
)
def test_aws_errors_become_one_line(exc, expected):
    err = status_cmd.aws_error(exc(), "q", "r")
    assert expected in str(err) and "\n" not in str(err)


def test_other_exceptions_are_not_aws_errors():
    assert status_cmd.aws_error(ValueError("bug"), "q", "r") is None


# ---------------------------------------------------------------------------
# --job: why is my job waiting?


def test_why_a_classic_job_waits_within_its_guarantee(stub, capsys):
    _stub_classic_queue(stub)
    assert main(["status", "--queue", CLASSIC_QUEUE, "--config", CONFIG, "--job", "a1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["team"] == "team-a" and report["state"] == "waiting"
    [reason] = report["reasons"]
    assert reason["code"] == "lent_out" and reason["borrowers"] == ["team-b (1)"]
    # reclaim_after 60 s already waited (120 s): the next cycle, every 60 s.
    assert "by the reclaimer within about 60 s" in reason["text"]


def test_why_a_classic_job_that_would_borrow_waits(stub, capsys):
    _stub_classic_queue(stub)
    assert main(["status", "--queue", CLASSIC_QUEUE, "--config", CONFIG, "--job", "c2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"Job c2 of team team-c on {CLASSIC_QUEUE}: waiting, because:"
    assert lines[1] == ("  - it would borrow 1 GPU (team team-c is at 1 of its guarantee 1), within its cap, but only"
                        " 0 GPUs idle and free to borrow")


def test_a_running_classic_job_is_not_waiting(stub, capsys):
    _stub_classic_queue(stub)
    assert main(["status", "--queue", CLASSIC_QUEUE, "--config", CONFIG, "--job", "b1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["reasons"] == [] and report["note"] == "it is not waiting for capacity in this queue"


def _describe_service_job(stub, jid: str, share: str, created: float, status: str = "RUNNABLE", count: int = 1):
    payload = json.dumps({"ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": count}})
    stub.add_response("describe_service_job", {
        "jobId": jid, "jobName": f"train-{jid}", "jobQueue": _arn("job-queue", QUOTA_QUEUE), "status": status,
        "serviceJobType": "SAGEMAKER_TRAINING", "quotaShareName": share, "startedAt": int(created * MS),
        "createdAt": int(created * MS), "serviceRequestPayload": payload}, {"jobId": jid})


def test_why_a_quota_job_waits_lent_out_and_behind(stub, capsys):
    _stub_quota_queue(stub)
    _describe_service_job(stub, "b2", "team-b", NOW - 90)
    assert main(["status", "--queue", QUOTA_QUEUE, "--config", CONFIG, "--job", "b2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["need"] == {"ml.g5.xlarge": 1}
    assert [r["code"] for r in report["reasons"]] == ["lent_out", "behind"]
    assert report["reasons"][0]["borrowers"] == ["team-a (1)"]
    assert "Batch's cross-share preemption" in report["reasons"][0]["text"]
    assert report["reasons"][1]["ahead"] == 1


def test_why_a_quota_job_asking_too_much_waits(stub, capsys):
    _stub_quota_queue(stub)
    _describe_service_job(stub, "b1", "team-b", NOW - 600, count=2)
    assert main(["status", "--queue", QUOTA_QUEUE, "--config", CONFIG, "--job", "b1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # team-b lends (borrows nothing): 2 instances on a guarantee of 1 can never start.
    assert [r["code"] for r in report["reasons"]] == ["too_large"]


def test_without_queue_the_one_queue_of_the_config_is_read(no_aws_config, monkeypatch, tmp_path, capsys):
    from botocore.exceptions import NoCredentialsError

    cfg = tmp_path / "platform.yaml"
    cfg.write_text("platform: {name: gpu-share}\nteams:\n  - {name: team-a, guarantee: {ml.g5.xlarge: 1}}\n"
                   "batch_quota: {capacity: {ml.g5.xlarge: 1}}\n")

    def make(region):
        raise NoCredentialsError()

    monkeypatch.setattr(status_cmd, "make_client", make)
    assert main(["status", "--config", str(cfg), "--region", "us-east-1"]) == 2
    assert f"no AWS credentials to read job queue '{QUOTA_QUEUE}' in region us-east-1" in _one_line_error(capsys)


def test_without_queue_a_config_of_two_queues_names_both(capsys):
    assert main(["status", "--config", CONFIG]) == 2
    assert _one_line_error(capsys).endswith(
        f"--queue: is missing and the config has 2 queues; pass one of them: --queue {CLASSIC_QUEUE} or"
        f" --queue {QUOTA_QUEUE}")
    assert main(["status"]) == 2
    assert _one_line_error(capsys).endswith("--queue: is missing; pass --queue NAME (the job queue to read)")
