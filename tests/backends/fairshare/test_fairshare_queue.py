"""FairshareQueue and the reclaim Lambda's wiring: templates, IAM, nag, cfn-lint, packaging.

Two apps, each synthesized once per module: the default platform (platform.yaml) and a
stand-alone stack with a mixed fleet, unequal guarantees, borrow limits and dry run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Match, Template

from cdk_gpu_share.aws import batch_reader as br
from cdk_gpu_share.backends.fairshare.construct import FairshareQueue, job_definition_sizes, weight_factors
from cdk_gpu_share.core.configuration.parse import (
    Amount,
    FairshareConfig,
    PlatformConfig,
    ReclaimConfig,
    Sharing,
    TeamConfig,
    load_config,
)
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.stacks.app import build_platform
from tests.batch_model import LEDGER_INDEX, LEDGER_KEYS
from tests.helpers import ROOT, assert_cfn_lint_clean, assert_nag_clean, new_app, scrub, synth


def team(name: str, guarantee: dict, **kw) -> TeamConfig:
    return TeamConfig(name=name, guarantee={k: Amount(instances=v) for k, v in guarantee.items()}, **kw)


# ---------------------------------------------------------------------------
# Module-scoped apps


@pytest.fixture(scope="module")
def platform():
    app = new_app()
    config = load_config(ROOT / "platform.yaml")
    built = build_platform(app, config, checks=False)
    report = synth(app)
    assembly = app.synth()
    templates = {s.stack_name: assembly.get_stack_by_name(s.stack_name).template for s in built.stacks}
    return {"app": app, "built": built, "report": report, "templates": templates, "assembly": assembly}


@pytest.fixture(scope="module")
def platform_template(platform) -> Template:
    return Template.from_json(platform["templates"]["gpu-share-platform"])


@pytest.fixture(scope="module")
def standalone():
    app = new_app()
    stack = cdk.Stack(app, "Fleet")
    config = FairshareConfig(
        capacity={"g5.xlarge": 2, "g5.12xlarge": 1},
        queue_name="ml-gpu",
        allocation_strategy="BEST_FIT_PROGRESSIVE",
        min_instances=1,
        job_attempts=3,
        share_decay_seconds=7200,
        compute_reservation=10,
        reclaim=ReclaimConfig(dry_run=True, schedule_minutes=5, reclaim_after_seconds=120, min_runtime_seconds=300),
    )
    fleet = FairshareQueue(stack, "Fleet", config=config, retry_on_error=True)
    fleet.add_team(team("big", {"g5.12xlarge": 1}))  # 4 GPUs
    fleet.add_team(team("small", {"g5.xlarge": 1}, borrow_limit_percent=100))  # 1 GPU, may borrow 1
    fleet.add_team(team("keep", {"g5.xlarge": 1}, sharing=Sharing.RESERVE))
    role = iam.Role(stack, "Submitter", assumed_by=iam.AccountRootPrincipal())
    fleet.grant_submit("small", role)
    from cdk_gpu_share.constructs._checks import acknowledge_nag

    acknowledge_nag(role, "AwsSolutions-IAM5", "test role: List/Describe on '*' and new jobs' ARNs",
                    findings=["Resource::*", *fleet.submit_wildcard_findings("small")])
    report = synth(app)
    template = app.synth().get_stack_by_name("Fleet").template
    return {"fleet": fleet, "report": report, "template": template, "app": app}


@pytest.fixture(scope="module")
def fleet_template(standalone) -> Template:
    return Template.from_json(standalone["template"])


def resources(template: dict, type_: str) -> dict:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def statements(template: dict) -> list[dict]:
    out = []
    for policy in resources(template, "AWS::IAM::Policy").values():
        out += policy["Properties"]["PolicyDocument"]["Statement"]
    return out


def as_list(x):
    return x if isinstance(x, list) else [x]


# ---------------------------------------------------------------------------
# Quality gates


def test_default_platform_is_nag_clean(platform):
    assert_nag_clean(platform["report"])


@pytest.mark.parametrize("stack", ["gpu-share-platform", "gpu-share-team-team-a"])
def test_default_platform_is_cfn_lint_clean(platform, stack):
    assert_cfn_lint_clean(platform["templates"][stack])


def test_standalone_queue_is_nag_and_cfn_lint_clean(standalone):
    assert_nag_clean(standalone["report"])
    assert_cfn_lint_clean(standalone["template"])


def _own(template: dict, prefix: str) -> dict:
    """This construct's resources only (other constructs of the stacks have their own snapshots)."""
    return {k: v for k, v in template["Resources"].items() if k.startswith(prefix)}


def test_platform_snapshot(platform, template_snapshot):
    assert scrub(_own(platform["templates"]["gpu-share-platform"], "FairshareQueue")) == template_snapshot


def test_team_snapshot(platform, template_snapshot):
    assert scrub(_own(platform["templates"]["gpu-share-team-team-a"], "Fairshare")) == template_snapshot


def test_standalone_snapshot(standalone, template_snapshot):
    assert scrub(standalone["template"]["Resources"]) == template_snapshot


# ---------------------------------------------------------------------------
# The fleet


def test_compute_environment_is_the_declared_gpu_fleet(fleet_template):
    fleet_template.has_resource_properties("AWS::Batch::ComputeEnvironment", {
        "Type": "managed",
        "ComputeResources": Match.object_like({
            "InstanceTypes": ["g5.xlarge", "g5.12xlarge"],
            "MaxvCpus": 2 * 4 + 48,
            "MinvCpus": 4,
            "AllocationStrategy": "BEST_FIT_PROGRESSIVE",
            "Ec2Configuration": [{"ImageType": "ECS_AL2023_NVIDIA"}],
        }),
    })


def test_default_platform_fleet_is_three_g5_xlarge(platform_template):
    platform_template.has_resource_properties("AWS::Batch::ComputeEnvironment", {
        "ComputeResources": Match.object_like({"InstanceTypes": ["g5.xlarge"], "MaxvCpus": 12, "MinvCpus": 0}),
    })
    platform_template.resource_count_is("AWS::EC2::VPC", 1)
    platform_template.resource_count_is("AWS::EC2::FlowLog", 1)


def test_queue_is_the_resource_child_with_fair_share(standalone, fleet_template):
    fleet = standalone["fleet"]
    assert fleet.node.find_child("Resource") is fleet.job_queue
    fleet_template.has_resource_properties("AWS::Batch::JobQueue", {
        "JobQueueName": "ml-gpu",
        "SchedulingPolicyArn": {"Fn::GetAtt": [Match.string_like_regexp("FleetSchedulingPolicy"), "Arn"]},
    })


def test_weights_follow_guarantees_lower_weight_more_share(fleet_template):
    fleet_template.has_resource_properties("AWS::Batch::SchedulingPolicy", {
        "FairsharePolicy": {
            "ShareDecaySeconds": 7200,
            "ComputeReservation": 10,
            "ShareDistribution": [
                {"ShareIdentifier": "big", "WeightFactor": 1},
                {"ShareIdentifier": "keep", "WeightFactor": 4},
                {"ShareIdentifier": "small", "WeightFactor": 4},
            ],
        },
    })


def test_weight_factor_formula_and_range():
    assert weight_factors({"a": 8, "b": 2, "c": 3}) == {"a": 1.0, "b": 4.0, "c": 2.6667}
    assert weight_factors({"a": 1, "z": 0}) == {"a": 1.0, "z": 999.9999}
    assert weight_factors({"a": 1e7, "b": 1}) == {"a": 1.0, "b": 999.9999}


def test_job_definition_sizes_fit_instances_and_caps():
    assert job_definition_sizes({"g5.xlarge": 3}, 3) == [1]
    assert job_definition_sizes({"g5.xlarge": 2, "g5.12xlarge": 1}, 6) == [1, 2, 4]
    assert job_definition_sizes({"p5.48xlarge": 1}, 3) == [1, 2]


# ---------------------------------------------------------------------------
# Teams


def test_each_team_gets_a_consumable_resource_of_guarantee_plus_cap(fleet_template):
    totals = sorted(r["Properties"]["TotalQuantity"]
                    for r in resources(fleet_template.to_json(), "AWS::Batch::ConsumableResource").values())
    # big: 4 + unlimited (fleet 6) -> 6; small: 1 + 100% of 1 -> 2; keep (reserve): 1 + 0 -> 1
    assert totals == [1, 2, 6]


def test_job_definitions_require_gpus_and_the_team_quota(fleet_template):
    fleet_template.has_resource_properties("AWS::Batch::JobDefinition", {
        "JobDefinitionName": "ml-gpu-big-gpu4",
        "Type": "container",
        "PlatformCapabilities": ["EC2"],
        "PropagateTags": True,
        "ContainerProperties": Match.object_like({
            "ResourceRequirements": [
                {"Type": "VCPU", "Value": "48"},
                {"Type": "MEMORY", "Value": str(int(192 * 1024 * 0.9) // 256 * 256)},
                {"Type": "GPU", "Value": "4"},
            ],
        }),
        "ConsumableResourceProperties": {"ConsumableResourceList": [
            {"ConsumableResource": {"Ref": Match.string_like_regexp("FleetTeambigGpuQuota")}, "Quantity": 4}]},
        "Tags": {"gpu-share:queue": "ml-gpu", "gpu-share:team": "big"},
    })
    names = sorted(r["Properties"]["JobDefinitionName"]
                   for r in resources(fleet_template.to_json(), "AWS::Batch::JobDefinition").values())
    assert names == ["ml-gpu-big-gpu1", "ml-gpu-big-gpu2", "ml-gpu-big-gpu4", "ml-gpu-keep-gpu1",
                     "ml-gpu-small-gpu1", "ml-gpu-small-gpu2"]


def test_retry_strategy_exits_on_reclaim_and_retries_lost_hosts(platform):
    template = Template.from_json(platform["templates"]["gpu-share-team-team-a"])
    template.has_resource_properties("AWS::Batch::JobDefinition", {
        "RetryStrategy": {"Attempts": 5, "EvaluateOnExit": [
            {"Action": "EXIT", "OnStatusReason": br.RECLAIM_REASON_PREFIX + "*"},
            {"Action": "RETRY", "OnStatusReason": "Host EC2*"},
            {"Action": "EXIT", "OnReason": "*"},
        ]},
    })


def test_retry_on_error_drops_the_final_exit(fleet_template):
    for r in resources(fleet_template.to_json(), "AWS::Batch::JobDefinition").values():
        evaluate = r["Properties"]["RetryStrategy"]["EvaluateOnExit"]
        assert r["Properties"]["RetryStrategy"]["Attempts"] == 3
        assert [e["Action"] for e in evaluate] == ["EXIT", "RETRY"]


def test_team_resources_live_in_the_team_stack(platform):
    team_a = platform["templates"]["gpu-share-team-team-a"]
    assert len(resources(team_a, "AWS::Batch::ConsumableResource")) == 1
    assert len(resources(team_a, "AWS::Batch::JobDefinition")) == 1
    assert not resources(platform["templates"]["gpu-share-platform"], "AWS::Batch::JobDefinition")
    outputs = team_a["Outputs"]
    assert outputs["ShareIdentifier"]["Value"] == "teama"
    assert outputs["FairshareJobDefinitions"]["Value"] == "gpu-share-fairshare-teama-gpu1"
    assert outputs["FairshareJobTags"]["Value"] == "gpu-share:queue=gpu-share-fairshare,gpu-share:team=team-a"


def test_grant_submit_limits_share_job_definitions_and_tags(platform):
    stmts = statements(platform["templates"]["gpu-share-team-team-a"])
    submit = [s for s in stmts if s["Action"] == "batch:SubmitJob"]
    assert len(submit) == 1
    s = submit[0]
    assert s["Condition"] == {
        "StringEquals": {
            "batch:ShareIdentifier": "teama",
            "aws:RequestTag/gpu-share:queue": "gpu-share-fairshare",
            "aws:RequestTag/gpu-share:team": "team-a",
        },
        "ForAllValues:StringEquals": {"aws:TagKeys": ["gpu-share:queue", "gpu-share:team", "gpu-share:checkpoint-seconds"]},
    }
    text = json.dumps(s["Resource"])
    assert "job-definition/gpu-share-fairshare-teama-gpu1:*" in text and ":job/*" in text
    assert "consumable-resource/gpu-share-fairshare-teama-gpus" in text and "teamb" not in text
    assert "FairshareQueue" in text  # the queue's ARN, imported from the platform stack
    cancel = [x for x in stmts if "batch:TerminateJob" in as_list(x["Action"])][0]
    assert cancel["Condition"]["StringEquals"]["aws:ResourceTag/gpu-share:team"] == "team-a"
    assert not any(a.endswith("*") for x in stmts for a in as_list(x["Action"]))


def test_grant_submit_of_an_unknown_team_names_the_teams(standalone):
    with pytest.raises(ConfigError, match=r"team: is not on this fair-share queue.*big, small, keep"):
        standalone["fleet"].grant_submit("nobody", iam.AnyPrincipal())


# ---------------------------------------------------------------------------
# The reclaimer


def test_reclaimer_has_reserved_concurrency_one_and_its_settings(standalone, fleet_template):
    fns = resources(standalone["template"], "AWS::Lambda::Function")
    assert len(fns) == 1
    props = next(iter(fns.values()))["Properties"]
    assert props["ReservedConcurrentExecutions"] == 1
    assert props["Handler"] == "cdk_gpu_share.lambdas.reclaim.handler.handler"
    assert props["Runtime"].startswith("python3.")
    env = props["Environment"]["Variables"]
    assert env["GPU_SHARE_DRY_RUN"] == "true"
    settings = br.decode_settings(env["GPU_SHARE_SETTINGS"])
    assert settings["queue"] == "ml-gpu" and settings["capacity"] == {"gpu": 6}
    assert settings["settings"] == {"reclaim_after_seconds": 120, "min_runtime_seconds": 300}
    assert {t["name"]: t for t in settings["teams"]}["small"] == {
        "name": "small", "share_identifier": "small", "guarantee": {"gpu": 1}, "borrow_limit_percent": 100}
    queue_id = next(iter(resources(standalone["template"], "AWS::Batch::JobQueue")))
    assert env["GPU_SHARE_QUEUE"] == {"Fn::GetAtt": [queue_id, "JobQueueArn"]}


def test_reclaimer_runs_on_runnable_events_on_failed_reclaims_and_on_a_schedule(fleet_template):
    rules = resources(fleet_template.to_json(), "AWS::Events::Rule")
    assert len(rules) == 3
    patterns = [r["Properties"].get("EventPattern") for r in rules.values()]
    runnable = [p for p in patterns if p and p["detail"]["status"] == ["RUNNABLE"]][0]
    assert runnable["detail-type"] == ["Batch Job State Change"] and runnable["source"] == ["aws.batch"]
    failed = [p for p in patterns if p and p["detail"]["status"] == ["FAILED"]][0]
    assert failed["detail"]["statusReason"] == [{"prefix": br.RECLAIM_REASON_PREFIX}]
    assert failed["detail-type"] == ["Batch Job State Change"] and failed["source"] == ["aws.batch"]
    # Batch's event names the queue by ARN in detail.jobQueue: only this queue's events match.
    queue_id = next(iter(resources(fleet_template.to_json(), "AWS::Batch::JobQueue")))
    for pattern in (runnable, failed):
        assert pattern["detail"]["jobQueue"] == [{"Fn::GetAtt": [queue_id, "JobQueueArn"]}]
    fn_id = next(iter(resources(fleet_template.to_json(), "AWS::Lambda::Function")))
    for rule in rules.values():
        assert [t["Arn"] for t in rule["Properties"]["Targets"]] == [{"Fn::GetAtt": [fn_id, "Arn"]}]
    assert [r["Properties"]["ScheduleExpression"] for r in rules.values() if "ScheduleExpression" in r["Properties"]] \
        == ["rate(5 minutes)"]


def test_reclaimer_failures_go_to_a_queue_with_alarms(fleet_template):
    fleet_template.has_resource_properties("AWS::Lambda::EventInvokeConfig", {
        "DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": [Match.any_value(), "Arn"]}}},
        "MaximumRetryAttempts": 2,
    })
    fleet_template.resource_count_is("AWS::CloudWatch::Alarm", 3)
    fleet_template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": "Errors", "Namespace": "AWS/Lambda", "Threshold": 1})
    # A requeue the cycle has not finished 10 minutes past its settle time: a dependency is down.
    fleet_template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": "RequeueOldestOpenSeconds", "Namespace": "GpuShare", "Statistic": "Maximum",
        "Threshold": 600, "ComparisonOperator": "GreaterThanThreshold", "Period": 300,
        "TreatMissingData": "notBreaching"})
    fleet_template.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 30})


def test_reclaimer_iam_is_least_privilege(standalone):
    role_policies = [p for k, p in resources(standalone["template"], "AWS::IAM::Policy").items() if "Reclaimer" in k]
    stmts = role_policies[0]["Properties"]["PolicyDocument"]["Statement"]
    by_action = {}
    for s in stmts:
        for a in as_list(s["Action"]):
            by_action[a] = s
    assert by_action["batch:ListJobs"]["Resource"] == "*" and by_action["batch:DescribeJobs"]["Resource"] == "*"
    terminate = by_action["batch:TerminateJob"]
    assert terminate["Condition"] == {"StringEquals": {"aws:ResourceTag/gpu-share:queue": "ml-gpu"}}
    assert json.dumps(terminate["Resource"]).endswith(':job/*"]]}')
    requeue = by_action["batch:SubmitJob"]["Condition"]
    assert requeue["StringEquals"]["aws:RequestTag/gpu-share:queue"] == "ml-gpu"
    assert requeue["ForAllValues:StringEquals"]["aws:TagKeys"] == [
        "gpu-share:queue", "gpu-share:team", "gpu-share:checkpoint-seconds", "gpu-share:requeued-from",
        "gpu-share:requeue-attempt"]
    # The default victim order records nothing: no statement may write the borrowed tag.
    assert "RecordBorrowedRuns" not in {s.get("Sid") for s in stmts}
    assert "gpu-share:borrowed" not in json.dumps(stmts)
    assert "batch:TerminateJobs" not in by_action  # no such IAM action: TerminateJobs needs TerminateJob
    assert not any(a.endswith("*") for a in by_action)
    assert set(by_action) <= {"batch:ListJobs", "batch:DescribeJobs", "batch:TerminateJob", "batch:SubmitJob",
                              "batch:TagResource", "logs:CreateLogStream", "logs:PutLogEvents",
                              "sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl",
                              "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"}
    table_id = next(iter(resources(standalone["template"], "AWS::DynamoDB::Table")))
    ledger = by_action["dynamodb:PutItem"]
    assert ledger["Resource"] == {"Fn::GetAtt": [table_id, "Arn"]} and "Condition" not in ledger
    assert sorted(ledger["Action"]) == ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"]
    query = by_action["dynamodb:Query"]  # the index of open records only, not the table
    assert query["Action"] == "dynamodb:Query"
    assert query["Resource"] == {"Fn::Join": ["", [{"Fn::GetAtt": [table_id, "Arn"]}, "/index/open-by-settle-time"]]}


def test_requeue_ledger_is_one_small_table_with_ttl_named_to_the_reclaimer(standalone):
    tables = resources(standalone["template"], "AWS::DynamoDB::Table")
    assert len(tables) == 1
    table_id, table = next(iter(tables.items()))
    props = table["Properties"]
    assert props["KeySchema"] == [{"AttributeName": "jobId", "KeyType": "HASH"}]
    # The table the fault suite runs against (moto's DynamoDB) is this one.
    assert {a["AttributeName"]: a["AttributeType"] for a in props["AttributeDefinitions"]} == LEDGER_KEYS
    assert props["GlobalSecondaryIndexes"] == [LEDGER_INDEX]
    assert props["BillingMode"] == "PAY_PER_REQUEST" and "ProvisionedThroughput" not in props
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["DeletionPolicy"] == "Delete"
    fn = next(iter(resources(standalone["template"], "AWS::Lambda::Function").values()))
    assert fn["Properties"]["Environment"]["Variables"]["GPU_SHARE_REQUEUE_TABLE"] == {"Ref": table_id}


def test_the_reclaimer_may_put_a_requeue_that_needs_a_person_in_its_failure_queue_only(standalone):
    template = standalone["template"]
    [queue_id] = resources(template, "AWS::SQS::Queue")
    fn = next(iter(resources(template, "AWS::Lambda::Function").values()))
    assert fn["Properties"]["Environment"]["Variables"]["GPU_SHARE_FAILURE_QUEUE"] == {"Ref": queue_id}
    stmts = [s for k, p in resources(template, "AWS::IAM::Policy").items() if "Reclaimer" in k
             for s in p["Properties"]["PolicyDocument"]["Statement"]]
    send = [s for s in stmts if "sqs:SendMessage" in as_list(s["Action"])]
    assert [s["Resource"] for s in send] == [{"Fn::GetAtt": [queue_id, "Arn"]}]


def test_disabled_reclaim_creates_no_lambda():
    app = new_app()
    stack = cdk.Stack(app, "NoReclaim")
    fleet = FairshareQueue(stack, "Fleet", config=FairshareConfig(capacity={"g5.xlarge": 1},
                                                                  reclaim=ReclaimConfig(enabled=False)),
                           teams=[team("a", {"g5.xlarge": 1})])
    assert fleet.reclaimer is None
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::Lambda::Function", 0)
    template.resource_count_is("AWS::Events::Rule", 0)
    template.resource_count_is("AWS::DynamoDB::Table", 0)


# ---------------------------------------------------------------------------
# Errors


def test_colliding_share_identifiers_fail_naming_both_teams():
    # parse_config refuses this config too; a PlatformConfig built in code reaches the construct.
    config = PlatformConfig(
        name="p",
        teams=(team("team-a", {"g5.xlarge": 1}), team("teama", {"g5.xlarge": 1})),
        fairshare=FairshareConfig(capacity={"g5.xlarge": 2}),
    )
    with pytest.raises(ConfigError) as err:
        FairshareQueue.from_config(cdk.Stack(cdk.App(), "S"), "Fleet", config=config)
    assert "'teama'" in str(err.value) and "'team-a'" in str(err.value) and "rename" in str(err.value)


def test_add_team_refuses_a_colliding_identifier():
    fleet = FairshareQueue(cdk.Stack(cdk.App(), "S"), "Fleet", config=FairshareConfig(capacity={"g5.xlarge": 2}))
    fleet.add_team(team("ml-ops", {"g5.xlarge": 1}))
    # Both are DNS-1123 labels (the team-name rule), yet Batch sees one identifier.
    with pytest.raises(ConfigError, match="fair-share identifier 'mlops', as team 'ml-ops' does"):
        fleet.add_team(team("mlops", {"g5.xlarge": 1}))


def test_an_unknown_instance_type_is_refused():
    with pytest.raises(ConfigError, match=r"fairshare.capacity.g5.huge: is not a GPU instance type"):
        FairshareQueue(cdk.Stack(cdk.App(), "S"), "Fleet", config=FairshareConfig(capacity={"g5.huge": 2}))


def test_a_team_that_could_never_run_a_job_is_refused():
    fleet = FairshareQueue(cdk.Stack(cdk.App(), "S"), "Fleet", config=FairshareConfig(capacity={"g5.xlarge": 2}))
    with pytest.raises(ConfigError, match="less than one GPU"):
        fleet.add_team(team("idle", {"g5.xlarge": 0}, sharing=Sharing.RESERVE))


def test_a_queue_without_teams_fails_validation():
    app = cdk.App()
    stack = cdk.Stack(app, "S")
    FairshareQueue(stack, "Fleet", config=FairshareConfig(capacity={"g5.xlarge": 1}))
    with pytest.raises(Exception, match="has no team: call add_team"):
        app.synth()


def test_guarantees_above_the_fleet_are_refused_when_the_team_is_added():
    app = cdk.App()
    stack = cdk.Stack(app, "S")
    fleet = FairshareQueue(stack, "Fleet", config=FairshareConfig(capacity={"g5.xlarge": 1}))
    fleet.add_team(team("a", {"g5.xlarge": 1}))
    with pytest.raises(ConfigError) as info:
        fleet.add_team(team("b", {"g5.xlarge": 1}))
    assert [(p.field, p.message) for p in info.value.problems] == [
        ("fairshare.capacity.g5.xlarge",
         "the teams' guarantees sum to 2 instances of g5.xlarge, above the 1 the capacity declares"),
    ]
    assert list(fleet.teams) == ["a"]
    with pytest.raises(ConfigError, match="guarantees sum to 2 instances of g5.xlarge, above the 1"):
        FairshareQueue(stack, "Fleet2", config=FairshareConfig(capacity={"g5.xlarge": 1}),
                       teams=[team("a", {"g5.xlarge": 1}), team("b", {"g5.xlarge": 1})])


def test_settings_too_large_for_lambda_fail_validation():
    app = cdk.App()
    stack = cdk.Stack(app, "S")
    fleet = FairshareQueue(stack, "Fleet", config=FairshareConfig(capacity={"g5.xlarge": 400}))
    import random

    rng = random.Random(1)
    for _ in range(400):
        name = "t" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(40))
        fleet.add_team(team(name, {"g5.xlarge": 1}))
    with pytest.raises(Exception, match="above the 4096 bytes Lambda allows"):
        app.synth()


# ---------------------------------------------------------------------------
# Packaging (no Docker)


def _asset_of(platform, handler: str) -> Path:
    """The platform's one Lambda asset that holds ``lambdas/<handler>``."""
    outdir = Path(platform["assembly"].directory)
    dirs = [d for d in outdir.glob("asset.*") if (d / "cdk_gpu_share" / "lambdas" / handler).is_dir()]
    assert len(dirs) == 1
    return dirs[0]


@pytest.fixture(scope="module")
def asset_dir(platform) -> Path:
    return _asset_of(platform, "reclaim")


@pytest.mark.parametrize("handler,aws_files", [("reclaim", ["__init__.py", "batch_reader.py"]),
                                               ("share_monitor", ["__init__.py", "quota_reader.py"]),
                                               ("history_details", ["__init__.py"])])
def test_bundle_holds_only_what_the_handler_needs(platform, handler, aws_files):
    asset_dir = _asset_of(platform, handler)
    top = sorted(p.name for p in (asset_dir / "cdk_gpu_share").iterdir())
    assert top == ["__init__.py", "_version.py", "aws", "core", "lambdas"]
    assert sorted(p.name for p in (asset_dir / "cdk_gpu_share" / "lambdas").iterdir()) == ["__init__.py", handler]
    assert sorted(p.name for p in (asset_dir / "cdk_gpu_share" / "aws").iterdir()) == aws_files
    assert not list(asset_dir.rglob("__pycache__")) and not list(asset_dir.rglob("*.pyc"))


@pytest.mark.parametrize("handler,probe,value", [
    ("reclaim", "import cdk_gpu_share.lambdas.reclaim.handler as h, cdk_gpu_share.core.policy.reclaim as r;"
                "mod = r; print(h.TERMINATE_BATCH)", "50"),
    ("share_monitor", "import cdk_gpu_share.lambdas.share_monitor.handler as h; mod = h; print(h.PAGE_SIZE)", "1000"),
    ("history_details", "import cdk_gpu_share.lambdas.history_details.handler as h; mod = h; print(h.STREAM_ENV)",
     "GPU_SHARE_HISTORY_STREAM"),
])
def test_bundled_handler_imports_without_cdk(platform, handler, probe, value):
    asset_dir = _asset_of(platform, handler)
    code = (
        f"import sys; sys.path[:0] = [{str(asset_dir)!r}];" + probe + ";"
        f"assert mod.__file__.startswith({str(asset_dir)!r}), mod.__file__;"
        "assert 'aws_cdk' not in sys.modules and 'boto3' not in sys.modules"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == value


def test_the_wheel_ships_the_reclaimer_packages():
    from setuptools import find_packages

    packages = find_packages(str(ROOT / "src"))
    assert {"cdk_gpu_share.aws", "cdk_gpu_share.lambdas.reclaim", "cdk_gpu_share.core"} <= set(packages)


def test_the_lambda_settings_equal_what_the_cli_derives_from_the_config(platform):
    """`gpu-share status` reads the queue with batch_reader.settings_from_config: same settings."""
    fleet = platform["built"].platform.fairshare
    config = load_config(ROOT / "platform.yaml")
    assert fleet.reclaim_settings() == br.settings_from_config(config)


# ---------------------------------------------------------------------------
# The checkpoint-aware victim order (platform.yaml sets it)


def _reclaimer_statements(template: dict) -> list[dict]:
    policies = [p for k, p in resources(template, "AWS::IAM::Policy").items() if "Reclaimer" in k]
    return policies[0]["Properties"]["PolicyDocument"]["Statement"]


def test_checkpoint_order_reaches_the_reclaimers_settings(platform):
    [fn] = [r for r in resources(platform["templates"]["gpu-share-platform"], "AWS::Lambda::Function").values()
            if "GPU_SHARE_SETTINGS" in r["Properties"].get("Environment", {}).get("Variables", {})]
    settings = br.decode_settings(fn["Properties"]["Environment"]["Variables"]["GPU_SHARE_SETTINGS"])
    assert settings["settings"]["victim_order"] == "checkpoint"
    assert {t["name"]: t.get("checkpoint_seconds") for t in settings["teams"]} == {
        "team-a": None, "team-b": 600, "team-c": None}


def test_checkpoint_order_lets_the_reclaimer_write_the_borrowed_tag_and_nothing_else(platform):
    stmts = _reclaimer_statements(platform["templates"]["gpu-share-platform"])
    [record] = [s for s in stmts if s.get("Sid") == "RecordBorrowedRuns"]
    assert record["Action"] == "batch:TagResource"
    assert record["Condition"] == {
        "StringEquals": {"aws:ResourceTag/gpu-share:queue": "gpu-share-fairshare"},
        "ForAllValues:StringEquals": {"aws:TagKeys": ["gpu-share:borrowed"]},
        "StringLike": {"aws:RequestTag/gpu-share:borrowed": ["*:true", "*:false"]},
        "Null": {"aws:TagKeys": "false"},
    }
    assert json.dumps(record["Resource"]).endswith(':job/*"]]}')
    # No other statement names the borrowed tag: a resubmission cannot carry it.
    assert sum("gpu-share:borrowed" in json.dumps(s) for s in stmts) == 1


def test_teams_may_tag_their_checkpoint_interval_but_not_the_borrowed_record(platform):
    team_b = platform["templates"]["gpu-share-team-team-b"]
    stmts = [s for p in resources(team_b, "AWS::IAM::Policy").values()
             for s in p["Properties"]["PolicyDocument"]["Statement"]]
    keyed = [s for s in stmts if "aws:TagKeys" in json.dumps(s.get("Condition", {}))
             and "gpu-share:queue" in json.dumps(s.get("Condition", {}))]
    assert len(keyed) == 2  # SubmitJob and TagResource on creation
    for s in keyed:
        assert s["Condition"]["ForAllValues:StringEquals"]["aws:TagKeys"] == [
            "gpu-share:queue", "gpu-share:team", "gpu-share:checkpoint-seconds"]
    assert "gpu-share:borrowed" not in json.dumps(stmts)


def _reclaimer_settings(stack: cdk.Stack) -> dict:
    template = Template.from_stack(stack).to_json()
    [fn] = [r for r in resources(template, "AWS::Lambda::Function").values()
            if "GPU_SHARE_SETTINGS" in r["Properties"].get("Environment", {}).get("Variables", {})]
    return br.decode_settings(fn["Properties"]["Environment"]["Variables"]["GPU_SHARE_SETTINGS"])


def _checkpoint_fleet(**reclaim) -> cdk.Stack:
    stack = cdk.Stack(new_app(), "S")
    fleet = FairshareQueue(stack, "Q", config=FairshareConfig(
        capacity={"g5.xlarge": 1}, reclaim=ReclaimConfig(victim_order="checkpoint", **reclaim)))
    fleet.add_team(team("ml", {"g5.xlarge": 1}))
    return stack


def test_the_checkpoint_cap_reaches_the_reclaimers_settings_when_it_is_not_the_default():
    assert _reclaimer_settings(_checkpoint_fleet(max_checkpoint_seconds=900))["settings"]["max_checkpoint_seconds"] == 900
    # The default is the planner's own (3600): the settings, and the template, stay as they were.
    assert "max_checkpoint_seconds" not in _reclaimer_settings(_checkpoint_fleet())["settings"]


@pytest.mark.parametrize("value", [0, -1, 604801, 1.5, "1h", None])
def test_a_bad_checkpoint_cap_is_refused_from_python_as_from_yaml(value):
    with pytest.raises(ConfigError) as info:
        ReclaimConfig(victim_order="checkpoint", max_checkpoint_seconds=value)
    (problem,) = info.value.problems
    assert problem.field == "ReclaimConfig.max_checkpoint_seconds" and problem.value == value
    assert "1 to 604800 seconds" in problem.fix


@pytest.mark.parametrize("value", ["oldest", 1, None])
def test_a_bad_victim_order_is_refused_from_python_as_from_yaml(value):
    with pytest.raises(ConfigError) as info:
        FairshareQueue(cdk.Stack(new_app(), "S"), "Q",
                       config=FairshareConfig(capacity={"g5.xlarge": 1}, reclaim=ReclaimConfig(victim_order=value)))
    (problem,) = info.value.problems
    assert problem.field.endswith("reclaim.victim_order") and problem.message == "is not a victim order"
    assert "youngest" in problem.fix and "checkpoint" in problem.fix
