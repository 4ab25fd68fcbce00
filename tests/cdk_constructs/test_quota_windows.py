"""constructs/quota_windows.py: the switcher's schedules (one per boundary, in the window's zone),
its role (only the platform's own shares and quotas), the run after a deploy, the alarm; and the
settings it synthesizes, run through the switcher against the in-memory Batch model."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from cdk_gpu_share.constructs._lambda_code import PackageBundler
from cdk_gpu_share.constructs.quota_windows import SWITCHER_HANDLER, QuotaWindowSwitcher, boundary_crons
from cdk_gpu_share.core.configuration.windows import Window, window_at
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


def test_a_boundary_that_daylight_saving_skips_has_a_schedule_where_it_falls_that_day():
    # EventBridge Scheduler skips a cron time that the zone's clocks jump over: on the last Sunday
    # of March Berlin has no 02:30, so "open" would not run and the window would stay closed until
    # its end. One more schedule at the wall-clock time the opening falls to then (03:30) runs the
    # switcher, which finds the window open at its own clock.
    early = Window("early", ("sun",), "02:30", "06:00", "Europe/Berlin")
    crons = boundary_crons(early, first=datetime(2026, 1, 1).date())
    assert crons == {"open": "cron(30 2 ? * SUN *)", "open-dst": "cron(30 3 ? * SUN *)",
                     "close": "cron(0 6 ? * SUN *)"}
    moved = datetime(2026, 3, 29, 3, 30, tzinfo=ZoneInfo("Europe/Berlin"))
    assert window_at([early], moved) == early
    # A window whose boundaries no zone change touches has one schedule per boundary.
    assert set(boundary_crons(NIGHT)) == {"open", "close"}
    # Synthesized: both schedules of the opening say so (summary lists them as openings).
    stack = cdk.Stack(cdk.App(), "Early", env=ENV)
    switcher = QuotaWindowSwitcher(stack, "QuotaWindows", windows=[early])
    switcher.add_quota_share("training", SHARES["training"], {None: _share(2, 50), "early": _share(6, 100)})
    schedules = assertions.Template.from_stack(stack).find_resources("AWS::Scheduler::Schedule")
    inputs = sorted((json.loads(s["Properties"]["Target"]["Input"])["boundary"], s["Properties"]["ScheduleExpression"])
                    for s in schedules.values())
    assert ("open", "cron(30 3 ? * SUN *)") in inputs  # Berlin jumps over 02:30 every March
    assert {b for b, _ in inputs} == {"open", "close"}


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
    alarm = next(a["Properties"] for a in template.find_resources("AWS::CloudWatch::Alarm").values()
                 if a["Properties"].get("MetricName") == "Errors")
    assert alarm["Namespace"] == "AWS/Lambda"
    assert alarm["Threshold"] == 1 and alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["AlarmDescription"].startswith("Quota window not applied")


def test_a_run_lambda_drops_before_it_starts_raises_the_not_applied_alarm_too(synth):
    # The scheduler's invocation is asynchronous: an event Lambda drops from its own queue
    # (throttled past its age) is a window not applied that no error and no dead letter shows.
    _, template = synth
    (function,) = template.find_resources("AWS::Lambda::Function",
                                          {"Properties": {"Handler": SWITCHER_HANDLER}})
    (alarm,) = [a["Properties"] for a in template.find_resources("AWS::CloudWatch::Alarm").values()
                if a["Properties"].get("MetricName") == "AsyncEventsDropped"]
    assert alarm["Namespace"] == "AWS/Lambda"
    assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function}}]
    assert alarm["Threshold"] == 1 and alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["AlarmDescription"].startswith("Quota window not applied")


def test_a_boundary_the_scheduler_cannot_deliver_raises_the_not_applied_alarm_too(synth):
    # A boundary whose invocation never reaches the function (its retries spent, an hour gone) is
    # a window not applied that the function's errors never see: it goes to a dead-letter queue,
    # and a message there raises the alarm.
    _, template = synth
    (queue,) = template.find_resources("AWS::SQS::Queue")
    for s in template.find_resources("AWS::Scheduler::Schedule").values():
        assert s["Properties"]["Target"]["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [queue, "Arn"]}}
    (alarm,) = [a["Properties"] for a in template.find_resources("AWS::CloudWatch::Alarm").values()
                if a["Properties"].get("Namespace") == "AWS/SQS"]
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}]
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
    assert (tmp_path / "cdk_gpu_share" / "core" / "configuration" / "windows.py").is_file()


def _concrete(value):
    """A template value with CDK's intrinsics (the log group's ARN) made a concrete ARN."""
    if isinstance(value, list):
        return [_concrete(v) for v in value]
    if isinstance(value, dict):
        if any(k.startswith("Fn::") or k == "Ref" for k in value):
            return "arn:aws:logs:us-east-1:111122223333:log-group:quota-window-switcher:*"
        return {k: _concrete(v) for k, v in value.items()}
    return value


def test_the_policy_evaluator_lets_the_switcher_switch_only_the_platforms_shares_and_quotas(synth):
    import subprocess

    from tests.auth.test_authorization import EVALUATOR, NODE, ROOT

    _, template = synth
    function = next(iter(template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": "cdk_gpu_share.lambdas.quota_switcher.handler.handler"}}
    ).values()))
    role = function["Properties"]["Role"]["Fn::GetAtt"][0]
    policies = [{"name": lid, "policy": _concrete(p["Properties"]["PolicyDocument"])}
                for lid, p in template.find_resources("AWS::IAM::Policy").items() if {"Ref": role} in p["Properties"]["Roles"]]
    principal = "arn:aws:iam::111122223333:role/quota-window-switcher"
    other_queue = "arn:aws:batch:us-east-1:111122223333:job-queue/another-platform"
    cases = [
        ("batch:UpdateQuotaShare", SHARES["training"], "Allowed"),
        ("batch:DescribeQuotaShare", SHARES["research"], "Allowed"),
        ("sagemaker:UpdateComputeQuota", QUOTA_ARN, "Allowed"),
        ("sagemaker:DescribeComputeQuota", QUOTA_ARN, "Allowed"),
        ("batch:UpdateQuotaShare", f"{other_queue}/quota-share/training", "Denied"),
        ("batch:UpdateQuotaShare", f"{QUEUE}/quota-share/intruder", "Denied"),
        ("sagemaker:UpdateComputeQuota", "arn:aws:sagemaker:us-east-1:111122223333:compute-quota/otherquota01",
         "Denied"),
        ("batch:CreateQuotaShare", QUEUE, "Denied"),
        ("sagemaker:DeleteComputeQuota", QUOTA_ARN, "Denied"),
        ("batch:UpdateJobQueue", QUEUE, "Denied"),
    ]
    job = {"requests": [{"id": f"{a} {r}", "principal_arn": principal, "action": a, "resources": [r],
                         "context": {"aws:PrincipalArn": principal}, "documented_keys": [], "scps": [],
                         "policies": policies} for a, r, _ in cases],
           "lint": [{"principal": "switcher", "name": p["name"], "policy": p["policy"]} for p in policies]}
    proc = subprocess.run([str(NODE), str(EVALUATOR)], input=json.dumps(job), capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    got = [("Allowed" if r["decision"] == "Allowed" else "Denied" if r["decision"].endswith("Denied")
            else r["decision"]) for r in out["results"]]
    assert got == [expect for _, _, expect in cases], out["results"]
    assert out["lint"]["problems"] == []


def test_a_teams_share_values_are_what_the_template_deploys_and_what_the_switcher_writes_in_a_window():
    from cdk_gpu_share import SharedGpuQuota
    from cdk_gpu_share.backends.batch_quota.construct import share_values
    from cdk_gpu_share.core.configuration.model import team_in_window
    from cdk_gpu_share.core.configuration.parse import BatchQuotaConfig, TeamConfig

    capacity = {P4D: 8}
    team = TeamConfig("training", guarantee={P4D: 2}, borrow_limit_percent=50,
                      windows={"night": {"guarantee": {P4D: 6}, "borrow_limit_percent": 100}})
    stack = cdk.Stack(cdk.App(), "Platform", env=ENV)
    # The construct deploys the base (and refuses windows until a stack deploys the switcher).
    base_team = TeamConfig("training", guarantee={P4D: 2}, borrow_limit_percent=50)
    SharedGpuQuota(stack, "Quota", teams=[base_team], batch_quota=BatchQuotaConfig(capacity=capacity))
    share = next(iter(assertions.Template.from_stack(stack).find_resources("AWS::Batch::QuotaShare").values()))
    deployed = share["Properties"]
    base = share_values(team, capacity)
    assert [{"CapacityUnit": c["capacityUnit"], "MaxCapacity": c["maxCapacity"]} for c in base["capacityLimits"]] \
        == deployed["CapacityLimits"]
    assert {k[0].upper() + k[1:]: v for k, v in base["resourceSharingConfiguration"].items()} \
        == deployed["ResourceSharingConfiguration"]
    assert share_values(team_in_window(team, "night"), capacity) == {
        "capacityLimits": [{"capacityUnit": P4D, "maxCapacity": 6}],
        "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": 100}}


def test_a_teams_compute_quota_values_are_what_the_template_deploys_and_what_the_switcher_writes_in_a_window():
    from cdk_gpu_share import SharedGpuQuota
    from cdk_gpu_share.backends.hyperpod.construct import quota_values
    from cdk_gpu_share.core.configuration.model import team_in_window
    from cdk_gpu_share.core.configuration.parse import HyperPodConfig, TeamConfig

    capacity = {P4D: 8}
    hyperpod = HyperPodConfig(cluster_arn="arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456",
                              capacity=capacity)
    team = TeamConfig("training", guarantee={P4D: 2}, borrow_limit_percent=50,
                      windows={"night": {"guarantee": {P4D: 6}, "borrow_limit_percent": 100}})
    stack = cdk.Stack(cdk.App(), "Platform", env=ENV)
    base_team = TeamConfig("training", guarantee={P4D: 2}, borrow_limit_percent=50)
    SharedGpuQuota(stack, "Quota", teams=[base_team], hyperpod=hyperpod)
    quota = next(iter(assertions.Template.from_stack(stack).find_resources("AWS::SageMaker::ComputeQuota").values()))
    assert quota_values(team, capacity)["ComputeQuotaConfig"] == quota["Properties"]["ComputeQuotaConfig"]
    night = quota_values(team_in_window(team, "night"), capacity)["ComputeQuotaConfig"]
    assert night["ComputeQuotaResources"] == [{"InstanceType": P4D, "Count": 6}]
    assert night["ResourceSharingConfig"]["BorrowLimit"] == 100
