"""The composed platform: a platform stack and one stack per team, from one config."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from cdk_gpu_share.core.configuration.parse import load_config
from cdk_gpu_share.stacks.app import build_platform, stack_name
from tests.helpers import (
    FEATURE_FLAGS,
    ROOT,
    assert_cfn_lint_clean,
    assert_nag_clean,
    cfn_lint_findings,
    new_app,
    scrub,
    synth,
)


def _build(config_path):
    app = new_app()
    # new_app() already carries the cdk-nag plugin; build_platform must not add a second one.
    platform = build_platform(app, load_config(config_path), checks=False)
    report = synth(app)
    return platform, report


@pytest.fixture(scope="module")
def default_platform():
    return _build(ROOT / "platform.yaml")


@pytest.fixture(scope="module")
def hyperpod_platform():
    return _build(ROOT / "examples" / "hyperpod.yaml")


def test_default_platform_has_a_platform_stack_and_one_stack_per_team(default_platform):
    platform, _ = default_platform
    assert [s.stack_name for s in platform.stacks] == [
        "gpu-share-platform",
        "gpu-share-team-team-a",
        "gpu-share-team-team-b",
        "gpu-share-team-team-c",
    ]


def test_stacks_are_environment_agnostic(default_platform):
    platform, _ = default_platform
    for stack in platform.stacks:
        assert cdk.Token.is_unresolved(stack.account) and cdk.Token.is_unresolved(stack.region)


def test_platform_stack_holds_the_shared_quota_resources(default_platform):
    platform, _ = default_platform
    t = Template.from_stack(platform.platform)
    t.resource_count_is("AWS::Batch::ServiceEnvironment", 1)
    t.has_resource_properties("AWS::Batch::SchedulingPolicy", {"QuotaSharePolicy": {"IdleResourceAssignmentStrategy": "FIFO"}})
    t.has_resource_properties("AWS::Batch::JobQueue", {"JobQueueName": "gpu-share-training", "JobQueueType": "SAGEMAKER_TRAINING"})
    t.resource_count_is("AWS::Batch::QuotaShare", 0)


def test_quota_shares_total_three_across_team_stacks(default_platform):
    platform, _ = default_platform
    counts = [len(Template.from_stack(s).find_resources("AWS::Batch::QuotaShare")) for s in platform.teams.values()]
    assert counts == [1, 1, 1]


def test_team_stack_holds_its_share_submit_role_and_outputs(default_platform):
    platform, _ = default_platform
    t = Template.from_stack(platform.teams["team-b"])
    t.has_resource_properties(
        "AWS::Batch::QuotaShare",
        {
            "QuotaShareName": "team-b",
            "CapacityLimits": [{"CapacityUnit": "ml.g5.xlarge", "MaxCapacity": 1}],
            "ResourceSharingConfiguration": {"Strategy": "LEND_AND_BORROW", "BorrowLimit": -1},
            "JobQueue": {"Fn::ImportValue": Match.string_like_regexp("gpu-share-platform:.*JobQueueArn")},
        },
    )
    outputs = t.find_outputs("*")
    assert outputs["TrainingQueueName"]["Value"] == "gpu-share-training"
    assert outputs["QuotaShareName"]["Value"] == "team-b"
    assert "SubmitRoleArn" in outputs


def test_team_submit_role_may_submit_only_into_its_own_share(default_platform):
    platform, _ = default_platform
    t = Template.from_stack(platform.teams["team-a"])
    share_id = t.find_resources("AWS::Batch::QuotaShare").popitem()[0]
    policies = t.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": Match.string_like_regexp("SubmitRole")}]}})
    statements = [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]
    submit = [s for s in statements if s["Action"] == "batch:SubmitServiceJob"]
    assert len(submit) == 1
    assert {"Fn::GetAtt": [share_id, "QuotaShareArn"]} in submit[0]["Resource"]


def test_team_stacks_depend_on_the_platform_stack(default_platform):
    platform, _ = default_platform
    for stack in platform.teams.values():
        assert platform.platform in stack.dependencies


def test_default_platform_is_nag_clean(default_platform):
    assert_nag_clean(default_platform[1])


def test_default_platform_templates_are_cfn_lint_clean(default_platform):
    platform, _ = default_platform
    for stack in platform.stacks:
        assert_cfn_lint_clean(Template.from_stack(stack))


def test_hyperpod_platform_puts_compute_quotas_in_team_stacks(hyperpod_platform):
    platform, _ = hyperpod_platform
    p = Template.from_stack(platform.platform)
    p.resource_count_is("AWS::SageMaker::ClusterSchedulerConfig", 1)
    p.resource_count_is("AWS::SageMaker::ComputeQuota", 0)
    t = Template.from_stack(platform.teams["research"])
    t.has_resource_properties("AWS::SageMaker::ComputeQuota", {"ComputeQuotaTarget": {"TeamName": "research", "FairShareWeight": 60}})
    assert t.find_outputs("HyperPodNamespace")["HyperPodNamespace"]["Value"] == "hyperpod-ns-research"


def test_hyperpod_platform_is_nag_and_cfn_lint_clean(hyperpod_platform):
    platform, report = hyperpod_platform
    assert_nag_clean(report)
    for stack in platform.stacks:
        assert_cfn_lint_clean(Template.from_stack(stack))


@pytest.mark.parametrize("which", ["default", "hyperpod"])
def test_cfn_lint_finds_not_even_a_warning(which, default_platform, hyperpod_platform):
    """Errors fail every synth test; warnings are acknowledged on the resource they are about (the
    Lambda functions' W3005, aws-cdk-lib's DependsOn on a role already named by GetAtt) or fixed."""
    platform, _ = default_platform if which == "default" else hyperpod_platform
    for stack in platform.stacks:
        findings = cfn_lint_findings(Template.from_stack(stack).to_json(), "EWI")
        assert not findings, f"{stack.stack_name}:\n" + "\n".join(findings)


@pytest.mark.slow
def test_synth_of_hyperpod_uses_no_deprecated_cdk_api(tmp_path):
    """jsii refuses every deprecated API under JSII_DEPRECATED=fail (by default it prints a warning
    at each synth): app.py on the HyperPod example must synthesize all the same."""
    env = dict(os.environ, JSII_DEPRECATED="fail", CDK_OUTDIR=str(tmp_path / "out"),
               CDK_CONTEXT_JSON=json.dumps({**FEATURE_FLAGS, "config": str(ROOT / "examples" / "hyperpod.yaml")}))
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "deprecated" not in result.stderr
    assert (tmp_path / "out" / "hyperpod-share-platform.template.json").exists()


@pytest.mark.parametrize("which", ["default", "hyperpod"])
def test_platform_snapshots(which, default_platform, hyperpod_platform, template_snapshot):
    platform, _ = default_platform if which == "default" else hyperpod_platform
    templates = {s.stack_name: scrub(Template.from_stack(s).to_json()) for s in platform.stacks}
    assert templates == template_snapshot


def test_app_py_with_a_bad_config_exits_2_naming_the_problem(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("teams:\n  - name: a\n    guarantee: {ml.g5.xlarge: 5}\nbatch_quota: {capacity: {ml.g5.xlarge: 1}}\n")
    env = dict(os.environ, CDK_CONTEXT_JSON=json.dumps({"config": str(bad)}), CDK_OUTDIR=str(tmp_path / "out"))
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert "batch_quota.capacity.ml.g5.xlarge" in result.stderr and "Traceback" not in result.stderr


def test_summary_of_the_synthesized_default_platform(default_platform, capsys):
    from cdk_gpu_share.cli import main

    platform, _ = default_platform
    assert main(["summary", platform.platform.node.root.outdir]) == 0
    out = capsys.readouterr().out
    assert "4 stacks" in out
    assert "1 service environment," in out and "3 quota shares" in out
    assert "team-a: Batch quota share, 1 instance of ml.g5.xlarge, lend_and_borrow, borrow limit unlimited" in out
    assert "team-a: fair-share GPU quota, at most 3 GPUs at once" in out  # every backend, with units
    idle = out.split("costs money while idle:")[1]
    assert "a NAT gateway" in idle
    assert "1 customer-managed KMS key (billed monthly)" in idle  # the job archive's
    archive = out.split("job archive (history.enabled: false goes without it):")[1].split("share monitor (")[0]
    assert re.search(r"gpu-share-platform: bucket JobHistoryBucket\w+ \(KMS-encrypted, objects expire after 400 days\)",
                     archive)
    assert "delivery stream, GZIP, one event a line, prefix events/!{timestamp:yyyy/MM/dd}/config=" in archive
    assert "rule Batch Job State Change, Batch Service Job State Change of 2 queues" in archive
    monitor = out.split("share monitor (batch_quota.monitor.enabled: false goes without it):")[1]
    assert monitor.split("\n")[1].startswith("  gpu-share-platform: a function reads the queue's quota shares every"
                                              " 1 minute and publishes each team's use")
    kept = out.split("kept by cdk destroy (delete by hand when no longer wanted):")[1].split("costs money")[0]
    assert re.search(r"gpu-share-platform: \d+ log groups, 1 KMS key, 2 S3 buckets", kept)


def test_summary_without_an_assembly_exits_2(tmp_path, capsys):
    from cdk_gpu_share.cli import main

    assert main(["summary", str(tmp_path)]) == 2
    assert "run `cdk synth` first (`make synth` in a clone of the repository)" in capsys.readouterr().err


def test_training_role_only_for_teams_that_submit_sagemaker_training(default_platform, hyperpod_platform):
    batch_team = Template.from_stack(default_platform[0].teams["team-a"])
    batch_team.has_resource_properties(
        "AWS::IAM::Role",
        {"AssumeRolePolicyDocument": {"Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]}},
    )
    assert "TrainingExecutionRoleArn" in batch_team.find_outputs("*")
    hyperpod_team = Template.from_stack(hyperpod_platform[0].teams["research"])
    hyperpod_team.resource_count_is("AWS::IAM::Role", 1)
    assert "TrainingExecutionRoleArn" not in hyperpod_team.find_outputs("*")


def test_template_validator_is_one_engine_per_process_and_off_with_cdk_validation_false(monkeypatch):
    from cdk_gpu_share.stacks.app import template_validator

    first = template_validator()
    assert isinstance(first, cdk.CloudFormationValidatePlugin)
    assert template_validator() is first  # built once, as CDK's own instance
    monkeypatch.setenv("CDK_VALIDATION", "false")
    assert template_validator() is None  # CDK would validate nothing either


def test_registered_template_validator_replaces_cdks_own_and_still_fails_an_unknown_type():
    from cdk_gpu_share.stacks.app import template_validator

    app = new_app()
    stack = cdk.Stack(app, "S")
    cdk.CfnResource(stack, "Unknown", type="AWS::SageMaker::ComputeQuota", properties={"Name": "q"})
    cdk.Validations.of(app).add_plugins(template_validator())
    with pytest.raises(RuntimeError) as exc:
        app.synth()
    report = json.loads(Path(re.search(r"found in: (\S+validation-report\.json)", str(exc.value)).group(1)).read_text())
    cfn = [r for r in report["pluginReports"] if r["pluginName"] == "CloudFormation Validate"]
    # One report: the registered engine ran in place of CDK's default, not beside it.
    assert len(cfn) == 1
    assert [v["ruleName"] for v in cfn[0]["violations"]] == ["F3006"]


def test_app_py_validates_with_the_early_engine_in_one_report(tmp_path):
    # The hyperpod example's compute quotas are unknown to CDK's rules (F3006, acknowledged):
    # the report shows them suppressed, once per team, from one CloudFormation Validate plugin.
    env = dict(os.environ, CDK_OUTDIR=str(tmp_path / "out"), CDK_CONTEXT_JSON=json.dumps(
        {**{k: v for k, v in FEATURE_FLAGS.items() if k.startswith("@")},
         "config": str(ROOT / "examples" / "hyperpod.yaml"), "nag": "false"}))
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "out" / "validation-report.json").read_text())
    cfn = [r for r in report["pluginReports"] if r["pluginName"] == "CloudFormation Validate"]
    assert len(cfn) == 1 and cfn[0]["violations"] == []
    suppressed = sorted(v["violatingConstructs"][0]["constructPath"] for v in cfn[0]["suppressedViolations"])
    config = load_config(ROOT / "examples" / "hyperpod.yaml")
    assert suppressed == sorted(f"{stack_name(config, t.name)}/ComputeQuota" for t in config.teams)
