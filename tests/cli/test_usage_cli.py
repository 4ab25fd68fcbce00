"""``gpu-share usage``: every bad range and every missing piece of AWS configuration is one line
naming the option and the fix (exit 2, no request sent), and a range without a single reading
says so instead of claiming the identities hold.

CloudWatch is the in-memory model of ``tests/quota_model.py`` behind a real botocore client;
the AWS configuration cases build the real boto3 client from an empty configuration.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
import yaml

from cdk_gpu_share.cli import main, usage_cmd
from cdk_gpu_share.core.records import metrics
from tests.quota_model import QUEUE_NAME, CloudWatchModel

#: The clock of every case: 2027-01-20 12:00 UTC. Minute data goes back to 2027-01-05 12:00,
#: so the oldest whole day is 2027-01-06.
NOW = datetime(2027, 1, 20, 12, 0, tzinfo=timezone.utc).timestamp()
G5 = "ml.g5.12xlarge"


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump({
        "platform": {"name": "gpu-share"},
        "teams": [{"name": "team-a", "guarantee": {G5: 1}}, {"name": "team-b", "guarantee": {G5: 1}}],
        "batch_quota": {"capacity": {G5: 2}, "queue_name": QUEUE_NAME}}))
    return str(path)


@pytest.fixture
def cw(monkeypatch):
    model = CloudWatchModel()
    monkeypatch.setattr(usage_cmd, "make_client", lambda region: model.client)
    monkeypatch.setattr(usage_cmd, "_now", lambda: NOW)
    return model


def publish(cw: CloudWatchModel, day: str, minutes: int = 60) -> None:
    """Both teams' readings, every minute of the first ``minutes`` of ``day``: team-a uses its 4 GPUs."""
    start = int(datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=timezone.utc).timestamp())
    for team, used in (("team-a", 4.0), ("team-b", 0.0)):
        dims = frozenset({(metrics.DIM_QUEUE, QUEUE_NAME), (metrics.DIM_TEAM, team)})
        for name, value in ((metrics.USAGE, used), (metrics.GUARANTEE, 4.0)):
            cw.points.setdefault((name, dims), []).extend((start + 60 * m, value) for m in range(minutes))


def refused(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


@pytest.mark.parametrize("first,last,option,why,fix", [
    ("2027-01-18", "9999-12-31", "--to", "is after today (2027-01-20, UTC)", "give a last day up to 2027-01-20"),
    ("2027-01-18", "2027-01-21", "--to", "is after today (2027-01-20, UTC)", "give a last day up to 2027-01-20"),
    ("2027-02-01", "2027-02-02", "--from", "is after today (2027-01-20, UTC)", "give a first day up to 2027-01-20"),
    ("2027-01-21", "2027-01-21", "--from", "is after today", "give a first day up to 2027-01-20"),
    ("2026-12-01", "2026-12-02", "--from", "is older than CloudWatch keeps one-minute data (15 days)",
     "give --from 2027-01-06 or later (and --to up to 2027-01-20)"),
    ("2027-01-05", "2027-01-20", "--from", "is older than CloudWatch keeps one-minute data (15 days)",
     "give --from 2027-01-06 or later"),
    ("0001-01-01", "9999-12-31", "--to", "is after today", "give a last day up to 2027-01-20"),
    ("2027-01-19", "2027-01-18", "--to", "is before --from 2027-01-19", "give a last day on or after the first"),
    ("2027/01/19", "2027-01-20", "--from", "is not a day", "write the day as YYYY-MM-DD, such as 2026-12-01"),
    ("2027-01-19", "2027-02-30", "--to", "is not a day", "write the day as YYYY-MM-DD, such as 2026-12-01"),
])
def test_a_range_cloudwatch_cannot_answer_is_refused_naming_the_option(config, cw, capsys, first, last, option, why,
                                                                       fix):
    err = refused(capsys, ["usage", config, "--from", first, "--to", last])
    value = last if option == "--to" else first
    assert f"{option}: {why}" in err and f"(got '{value}')" in err and fix in err, err
    assert cw.requests == []  # nothing sent: no EndTime before StartTime, no query of expired data


def test_the_oldest_whole_day_and_today_are_read(config, cw, capsys):
    publish(cw, "2027-01-06")
    publish(cw, "2027-01-20")
    assert main(["usage", config, "--from", "2027-01-06", "--to", "2027-01-20", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["queues"][QUEUE_NAME]
    assert {r["day"] for r in report["days"]} == {"2027-01-06", "2027-01-20"}
    [request] = cw.requests
    assert request["StartTime"] < request["EndTime"] <= NOW + 60
    assert report["check"]["within_plus_idle_is_guarantee"] is True


def test_a_range_without_data_says_so_instead_of_claiming_the_checks_hold(config, cw, capsys):
    publish(cw, "2027-01-20")  # data on another day only
    assert main(["usage", config, "--from", "2027-01-10", "--to", "2027-01-12"]) == 0
    out = capsys.readouterr().out
    assert f"Queue {QUEUE_NAME}, 2027-01-10 to 2027-01-12 (UTC): no data: CloudWatch holds no reading" in out
    assert "check:" not in out and "yes" not in out
    assert main(["usage", config, "--from", "2027-01-10", "--to", "2027-01-12", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["queues"][QUEUE_NAME]
    assert report["days"] == [] and report["check"] is None
    assert main(["usage", config, "--from", "2027-01-10", "--to", "2027-01-12", "--csv"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip().splitlines() == ["queue,day,team,within guarantee,borrowed,lent,idle guarantee,"
                                                 "preemptions,minutes"]
    assert f"no data for queue {QUEUE_NAME} from 2027-01-10 to 2027-01-12" in captured.err
    # With data, the identities are checked and said to hold.
    assert main(["usage", config, "--from", "2027-01-20", "--to", "2027-01-20"]) == 0
    assert "check: within + idle = guarantee x hours for every team: yes" in capsys.readouterr().out


@pytest.fixture
def empty_aws_config(tmp_path, monkeypatch):
    """No region, no credentials, no profile: the real boto3 client is built from nothing."""
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setattr(usage_cmd, "_now", lambda: NOW)


def test_no_region_is_one_line_naming_the_option(config, empty_aws_config, capsys):
    err = refused(capsys, ["usage", config, "--from", "2027-01-19", "--to", "2027-01-20"])
    assert err == (f"gpu-share usage: no AWS region to read the metrics of queue '{QUEUE_NAME}'; pass --region"
                   " (such as --region us-east-1) or set AWS_REGION or AWS_DEFAULT_REGION")


def test_an_unknown_profile_is_one_line_naming_it_and_the_fix(config, empty_aws_config, monkeypatch, capsys):
    monkeypatch.setenv("AWS_PROFILE", "nope")
    err = refused(capsys, ["usage", config, "--from", "2027-01-19", "--to", "2027-01-20", "--region", "us-east-1"])
    assert "the AWS profile 'nope' (AWS_PROFILE) is not in your AWS configuration" in err
    assert "set AWS_PROFILE to a configured profile" in err


def test_no_credentials_is_one_line(config, empty_aws_config, capsys):
    err = refused(capsys, ["usage", config, "--from", "2027-01-19", "--to", "2027-01-20", "--region", "us-east-1"])
    assert "no AWS credentials to read the metrics of queue" in err and "aws configure" in err


@pytest.mark.parametrize("argv", [
    ["usage", "{config}", "--from", "2027-01-19", "--to", "2027-01-20"],
    ["status", "--queue", QUEUE_NAME],
    ["trace", "export", "{config}", "--from", "2027-01-19", "--to", "2027-01-20", "--bucket", "archive"],
], ids=["usage", "status", "trace export"])
def test_every_aws_reading_command_refuses_an_unknown_profile_in_one_line(config, empty_aws_config, monkeypatch,
                                                                          capsys, argv):
    monkeypatch.setenv("AWS_PROFILE", "nope")
    err = refused(capsys, [config if a == "{config}" else a for a in argv])
    assert "the AWS profile 'nope' (AWS_PROFILE) is not in your AWS configuration" in err, err
