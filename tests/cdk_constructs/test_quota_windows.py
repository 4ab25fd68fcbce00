"""constructs/quota_windows.py: the switcher's schedules (one per boundary, in the window's zone),
its role (only the platform's own shares and quotas), the run after a deploy, the alarm; and the
settings it synthesizes, run through the switcher against the in-memory Batch model."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from cdk_gpu_share.constructs._lambda_code import PackageBundler
from cdk_gpu_share.constructs.quota_windows import QuotaWindowSwitcher, boundary_crons
from cdk_gpu_share.core.windows import Window
from cdk_gpu_share.lambdas.quota_switcher import handler as h
from tests.batch_model import Clock
from tests.quota_model import QuotaQueueModel

ENV = cdk.Environment(account="111122223333", region="us-east-1")
NIGHT = Window("night", ("mon", "tue", "wed", "thu", "fri"), "20:00", "08:00", "Europe/Berlin")
WEEKEND = Window("weekend", ("sat",), "00:00", "00:00", "America/New_York")
P4D = "ml.p4d.24xlarge"


def _share(n: int, borrow: int) -> dict:
    return {"capacityLimits": [{"capacityUnit": P4D, "maxCapacity": n}],
            "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": borrow}}


def _quota(n: int) -> dict:
    return {"ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": P4D, "Count": n}],
                                   "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 50}}}


QUEUE = "arn:aws:batch:us-east-1:111122223333:job-queue/gpu-share-training"
SHARES = {"training": f"{QUEUE}/quota-share/training", "research": f"{QUEUE}/quota-share/research"}
VALUES = {"training": {None: _share(2, 50), "night": _share(6, 100)},
          "research": {None: _share(6, 100), "night": _share(2, 0)}}
QUOTA_ARN = "arn:aws:sagemaker:us-east-1:111122223333:compute-quota/trainquota01"


@pytest.fixture(scope="module")
def synth():
    stack = cdk.Stack(cdk.App(), "Platform", env=ENV)
    switcher = QuotaWindowSwitcher(stack, "QuotaWindows", windows=[NIGHT, WEEKEND])
    for team, arn in SHARES.items():
        switcher.add_quota_share(team, arn, VALUES[team])
    switcher.add_compute_quota("training", "trainquota01", QUOTA_ARN, {None: _quota(2), "night": _quota(6)})
    return stack, assertions.Template.from_stack(stack)


def test_boundary_crons_open_on_the_windows_days_and_close_the_next_day_when_it_ends_before_it_starts():
    assert boundary_crons(NIGHT) == {"open": "cron(0 20 ? * MON,TUE,WED,THU,FRI *)",
                                     "close": "cron(0 8 ? * TUE,WED,THU,FRI,SAT *)"}
    assert boundary_crons(WEEKEND) == {"open": "cron(0 0 ? * SAT *)", "close": "cron(0 0 ? * SUN *)"}
    lunch = Window("lunch", ("sun", "mon"), "12:30", "13:15")
    assert boundary_crons(lunch) == {"open": "cron(30 12 ? * MON,SUN *)", "close": "cron(15 13 ? * MON,SUN *)"}


def test_one_schedule_per_boundary_in_the_windows_time_zone_invokes_the_switcher(synth):
    _, template = synth
    schedules = template.find_resources("AWS::Scheduler::Schedule")
    got = sorted((s["Properties"]["ScheduleExpression"], s["Properties"]["ScheduleExpressionTimezone"],
                  json.loads(s["Properties"]["Target"]["Input"])["boundary"]) for s in schedules.values())
    assert got == [("cron(0 0 ? * SAT *)", "America/New_York", "open"),
                   ("cron(0 0 ? * SUN *)", "America/New_York", "close"),
                   ("cron(0 20 ? * MON,TUE,WED,THU,FRI *)", "Europe/Berlin", "open"),
                   ("cron(0 8 ? * TUE,WED,THU,FRI,SAT *)", "Europe/Berlin", "close")]
    for s in schedules.values():
        target = s["Properties"]["Target"]
        assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 3}
        assert s["Properties"]["FlexibleTimeWindow"] == {"Mode": "OFF"}


def test_the_switchers_role_reads_and_updates_only_the_platforms_shares_and_quotas(synth):
    stack, template = synth
    function = next(iter(template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": "cdk_gpu_share.lambdas.quota_switcher.handler.handler"}}
    ).values()))
    role = function["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = [s for p in template.find_resources("AWS::IAM::Policy").values()
                  if {"Ref": role} in p["Properties"]["Roles"] for s in p["Properties"]["PolicyDocument"]["Statement"]]
    quota_actions = {}
    for s in statements:
        actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        if any(a.startswith(("batch:", "sagemaker:")) for a in actions):
            resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
            for a in actions:
                quota_actions.setdefault(a, set()).update(resources)
    assert quota_actions == {"batch:DescribeQuotaShare": set(SHARES.values()),
                             "batch:UpdateQuotaShare": set(SHARES.values()),
                             "sagemaker:DescribeComputeQuota": {QUOTA_ARN},
                             "sagemaker:UpdateComputeQuota": {QUOTA_ARN}}


def test_a_deploy_runs_the_switcher_and_its_failures_raise_the_alarm(synth):
    _, template = synth
    runs = template.find_resources("Custom::GpuShareQuotaWindow")
    assert len(runs) == 1
    alarm = next(iter(template.find_resources("AWS::CloudWatch::Alarm").values()))["Properties"]
    assert alarm["MetricName"] == "Errors" and alarm["Namespace"] == "AWS/Lambda"
    assert alarm["Threshold"] == 1 and alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["AlarmDescription"].startswith("Quota window not applied")


def test_the_synthesized_settings_switch_the_shares_at_the_switchers_clock(synth, monkeypatch):
    stack, template = synth
    function = next(iter(template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": "cdk_gpu_share.lambdas.quota_switcher.handler.handler"}}
    ).values()))
    settings = json.loads(function["Properties"]["Environment"]["Variables"][h.SETTINGS_ENV])
    settings["targets"] = [t for t in settings["targets"] if t["kind"] == "batch"]
    clock = Clock(datetime(2027, 3, 3, 22, 30, tzinfo=timezone.utc).timestamp())  # Wednesday 23:30 in Berlin
    model = QuotaQueueModel(shares={"training": {P4D: 2}, "research": {P4D: 6}}, clock=clock, capacity={P4D: 8})
    monkeypatch.setenv(h.SETTINGS_ENV, json.dumps(settings))
    monkeypatch.setattr(h, "_client", lambda kind: model.batch)
    monkeypatch.setattr(h, "_now", clock)
    assert h.handler({"RequestType": "Create"})["Data"] == {"Window": "night"}
    assert model.shares == {"training": {P4D: 6}, "research": {P4D: 2}}
    assert model.overcommitted == []


def test_the_lambda_code_carries_the_time_zones(tmp_path: Path):
    PackageBundler(("core", "lambdas/quota_switcher"), (), ("tzdata",)).try_bundle(str(tmp_path))
    assert (tmp_path / "tzdata" / "zoneinfo" / "Europe" / "Berlin").is_file()
    assert (tmp_path / "cdk_gpu_share" / "lambdas" / "quota_switcher" / "handler.py").is_file()
    assert (tmp_path / "cdk_gpu_share" / "core" / "windows.py").is_file()
