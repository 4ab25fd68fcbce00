"""MigInferenceEndpoint: templates, synth-time refusals, cdk-nag, cfn-lint, snapshots."""

from __future__ import annotations

import json
import re
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Match

from cdk_gpu_share.core.configuration.parse import load_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.inference.config import Copies, InferenceModelConfig, InferenceVpcConfig
from cdk_gpu_share.inference.construct import (
    MigInferenceEndpoint,
)
from cdk_gpu_share.stacks.app import build_platform
from tests.helpers import ROOT, assert_cfn_lint_clean, assert_nag_clean, cfn_lint_findings, new_app, scrub, synth

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128"
ENDPOINT = "Custom::GpuShareMigEndpoint"
COMPONENT = "Custom::GpuShareMigInferenceComponent"


def model(name, profile=None, *, gpus=None, copies=None, memory_mb=8192, team=None, **kw):
    return InferenceModelConfig(
        name=name, image=IMAGE, profile=profile, gpus=gpus, copies=copies or Copies(1, 1, 1), memory_mb=memory_mb, team=team,
        **kw
    )


def without_annotations(report: dict) -> dict:
    """The policy-validation report without the construct-annotation plugin (warnings are asserted apart)."""
    return {"pluginReports": [p for p in report["pluginReports"] if p.get("pluginName") != "Construct Annotations"]}


# --------------------------------------------------------------------------- scenario: examples/inference.yaml


@pytest.fixture(scope="module")
def example():
    config = load_config(ROOT / "examples" / "inference.yaml")
    app = new_app()
    platform = build_platform(app, config, checks=False)
    report = synth(app)
    stack = platform.platform
    return {
        "app": app,
        "stack": stack,
        "report": report,
        "template": assertions.Template.from_stack(stack),
        "annotations": assertions.Annotations.from_stack(stack),
        "endpoints": stack.endpoints,
    }


def test_example_builds_one_endpoint_per_config_entry(example):
    assert [e.base_name for e in example["endpoints"]] == ["small-models"]


def test_example_endpoint_carries_the_layout_through_the_custom_resource(example):
    example["template"].has_resource_properties(
        ENDPOINT,
        {
            "Kind": "Endpoint",
            "EndpointBaseName": "small-models",
            "InstanceType": "ml.p4d.24xlarge",
            "InstanceCount": 1,
            "Layout": ["mig-3g.20gb", "mig-3g.20gb"],
            "ExecutionRoleArn": {"Fn::GetAtt": [Match.string_like_regexp("ExecutionRole"), "Arn"]},
            "ModelName": Match.absent(),
        },
    )


def test_example_components_each_occupy_one_partition(example):
    t = example["template"]
    t.resource_count_is(COMPONENT, 2)
    for name, copies in (("query-rewriter", 2), ("ticket-triage", 2)):
        t.has_resource_properties(
            COMPONENT,
            {
                "ComponentBaseName": f"small-models-{name}",
                "EndpointName": {"Fn::GetAtt": [Match.string_like_regexp("MigEndpointsmallmodels"), "EndpointName"]},
                "AcceleratorPartitionType": "mig-3g.20gb",
                "NumberOfAcceleratorDevicesRequired": 1,
                "CopyCount": copies,
                "MinMemoryRequiredInMb": 32768,
                "NumberOfCpuCoresRequired": 4,
            },
        )


def test_example_has_no_cloudformation_endpoint_and_no_partition_property_on_aws_types(example):
    t = example["template"]
    t.resource_count_is("AWS::SageMaker::EndpointConfig", 0)
    t.resource_count_is("AWS::SageMaker::Endpoint", 0)
    t.resource_count_is("AWS::SageMaker::InferenceComponent", 0)
    for logical, resource in t.to_json()["Resources"].items():
        if resource["Type"].startswith("AWS::"):
            assert "AcceleratorPartition" not in json.dumps(resource), logical


def test_example_models_are_plain_cloudformation_with_network_isolation(example):
    t = example["template"]
    t.resource_count_is("AWS::SageMaker::Model", 2)
    t.has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "ModelName": Match.string_like_regexp("^small-models-query-rewriter-[0-9a-f]{6}$"),
            "EnableNetworkIsolation": True,
            "PrimaryContainer": {
                "Image": IMAGE,
                "ModelDataUrl": "s3://mig-inference-models/query-rewriter/model.tar.gz",
                "Environment": {"OPTION_MAX_MODEL_LEN": "4096", "OPTION_GPU_MEMORY_UTILIZATION": "0.9"},
            },
        },
    )


def test_example_autoscales_copies_on_invocations_per_copy_within_min_max(example):
    t = example["template"]
    t.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 2)
    t.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "ServiceNamespace": "sagemaker",
            "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount",
            "MinCapacity": 1,
            "MaxCapacity": 7,
            "ResourceId": {
                "Fn::Join": ["", ["inference-component/", {"Fn::GetAtt": [Match.any_value(), "InferenceComponentName"]}]]
            },
            "RoleARN": Match.absent(),  # the service-linked role
        },
    )
    t.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": {
                "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerInferenceComponentInvocationsPerCopy"},
                "TargetValue": 20,
            },
        },
    )


def test_example_execution_role_is_least_privilege(example):
    t = example["template"]
    policies = t.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": Match.string_like_regexp("ExecutionRole")}]}})
    (policy,) = policies.values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    by_action = {json.dumps(s["Action"]): s for s in statements}
    pull = by_action[json.dumps(["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"])]
    assert "repository/djl-inference" in json.dumps(pull["Resource"])
    s3 = by_action[json.dumps("s3:GetObject")]
    assert sorted(json.dumps(r) for r in s3["Resource"]) == sorted(
        json.dumps({"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":s3:::mig-inference-models/{m}/model.tar.gz"]]})
        for m in ("query-rewriter", "ticket-triage")
    )
    assert "sagemaker:*" not in json.dumps(statements)


def test_example_handler_runs_with_the_vendored_service_model(example):
    t = example["template"]
    fns = t.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": Match.string_like_regexp("^index\\.")}}
    )
    assert {f["Properties"]["Handler"] for f in fns.values()} == {"index.on_event", "index.is_complete"}
    for f in fns.values():
        assert f["Properties"]["Runtime"] == "python3.14"
        assert f["Properties"]["Environment"]["Variables"]["AWS_DATA_PATH"] == "/var/task/data"
        key = f["Properties"]["Code"]["S3Key"]
    asset = Path(example["app"].outdir) / f"asset.{key.split('.')[0]}"
    files = sorted(str(p.relative_to(asset)) for p in asset.rglob("*") if p.is_file())
    assert files == ["data/sagemaker/2017-07-24/service-2.json", "index.py"]
    model = json.loads((asset / "data/sagemaker/2017-07-24/service-2.json").read_text())
    assert "AcceleratorPartitionLayouts" in model["shapes"]["ProductionVariant"]["members"]
    assert "AcceleratorPartitionType" in model["shapes"]["InferenceComponentComputeResourceRequirements"]["members"]


def test_the_asset_runs_on_its_own_like_in_lambda(example):
    """index.py imported from the asset alone, with AWS_DATA_PATH as the function sets it."""
    import os
    import subprocess
    import sys

    (asset,) = [p for p in Path(example["app"].outdir).glob("asset.*") if (p / "data" / "sagemaker").is_dir()]
    env = {
        **os.environ,
        "AWS_DATA_PATH": str(asset / "data"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
    }
    code = "import index; c = index.sagemaker_client(); print(c.meta.service_model.operation_names.__len__())"
    out = subprocess.run([sys.executable, "-c", code], cwd=asset, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "14"  # the vendored model's operations: AWS_DATA_PATH won


def test_example_handler_may_touch_only_its_own_endpoint(example):
    t = example["template"]
    policies = t.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": Match.string_like_regexp("HandlerRole")}]}})
    text = json.dumps(policies)
    for kind in ("endpoint", "endpoint-config", "inference-component"):
        assert f":{kind}/small-models-*" in text
    assert ":model/" not in text  # CloudFormation creates the models; the handler only names them
    assert '"aws:RequestTag/gpu-share:endpoint": "small-models"' in text
    assert '"aws:ResourceTag/gpu-share:endpoint": "small-models"' in text
    assert "sagemaker:ModelArn" in text and "iam:PassRole" in text
    # sagemaker:ModelArn is an ARN condition key: compared as an ARN, never as a string.
    [create] = [st for p in policies.values() for st in p["Properties"]["PolicyDocument"]["Statement"]
                if st["Action"] == "sagemaker:CreateInferenceComponent"]
    assert set(create["Condition"]) == {"StringEquals", "ArnEquals"}
    assert list(create["Condition"]["ArnEquals"]) == ["sagemaker:ModelArn"]


def test_example_handler_may_pass_the_execution_role_to_sagemaker_only(example):
    t = example["template"]
    policies = t.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": Match.string_like_regexp("HandlerRole")}]}})
    statements = [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]
    passes = [s for s in statements if s["Action"] == "iam:PassRole"]
    assert passes and all(
        s["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}} for s in passes
    )


def test_example_outputs_name_the_endpoint_and_each_component(example):
    outputs = example["template"].to_json()["Outputs"]
    assert "SmallModelsEndpointName" in outputs
    assert "SmallModelsQueryRewriterInferenceComponent" in outputs
    assert "SmallModelsTicketTriageInferenceComponent" in outputs


def test_example_warns_that_two_teams_share_an_instance(example):
    example["annotations"].has_warning(
        "/mig-inference-platform/MigEndpoint-small-models",
        Match.string_like_regexp("teams search, support share the instances.*isolates GPU compute and memory only"),
    )


def test_example_is_nag_clean_and_cfn_lint_clean(example):
    assert_nag_clean(without_annotations(example["report"]))
    assert_cfn_lint_clean(example["template"])


def test_example_gets_not_even_a_cfn_lint_warning(example):
    """The provider framework's functions and waiter depend on roles they already name (W3005):
    acknowledged on each of those resources, so a real finding would still show."""
    findings = cfn_lint_findings(example["template"].to_json(), "EWI")
    assert not findings, "\n".join(findings)


def test_example_snapshot(example, template_snapshot):
    assert scrub(example["template"].to_json()) == template_snapshot


# --------------------------------------------------------------------------- scenario: whole GPUs, VPC, KMS, two endpoints


@pytest.fixture(scope="module")
def mixed():
    app = new_app()
    stack = cdk.Stack(app, "Mixed")
    key = kms.Key(stack, "ModelKey", enable_key_rotation=True)
    vpc = InferenceVpcConfig(("subnet-0123456789abcdef0",), ("sg-0123456789abcdef0",))
    big = MigInferenceEndpoint(
        stack,
        "Llms",
        instance_type="ml.p5.48xlarge",
        instance_count=2,
        layout="balanced",
        models=[
            model("chat", "mig-3g.40gb", copies=Copies(2, 1, 15), cpus=8, team="team-a",
                  model_data_url="s3://models-bucket/chat/model.tar.gz"),
            model("embed", "1g.10gb", copies=Copies(4, 4, 4), team="team-a"),
            model("llama-70b", gpus=4, copies=Copies(1, 1, 2), memory_mb=262144, team="team-a"),
        ],
        whole_gpu_instance_type="ml.p5.48xlarge",
        vpc_config=vpc,
        kms_key=key,
    )
    small = MigInferenceEndpoint(
        stack, "Tiny", instance_type="ml.p4d.24xlarge", layout="max-instances", models=[model("ocr", "mig-1g.5gb")]
    )
    invoker = iam.Role(stack, "Invoker", assumed_by=iam.AccountRootPrincipal())
    big.grant_invoke(invoker)
    report = synth(app)
    return {
        "stack": stack,
        "big": big,
        "small": small,
        "report": report,
        "template": assertions.Template.from_stack(stack),
        "annotations": assertions.Annotations.from_stack(stack),
    }


def test_one_provider_serves_every_endpoint_of_a_stack(mixed):
    t = mixed["template"]
    t.resource_count_is(ENDPOINT, 2)
    handlers = t.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": Match.string_like_regexp("^index\\.")}})
    assert len(handlers) == 2
    t.resource_count_is("AWS::StepFunctions::StateMachine", 1)


def test_whole_gpu_models_get_a_separate_plain_cloudformation_endpoint(mixed):
    t = mixed["template"]
    t.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                {"VariantName": "AllTraffic", "InstanceType": "ml.p5.48xlarge", "InitialInstanceCount": 1, "ModelName": Match.absent()}
            ],
            "ExecutionRoleArn": {"Fn::GetAtt": [Match.string_like_regexp("LlmsExecutionRole"), "Arn"]},
            "VpcConfig": {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]},
            # ml.p5 has local NVMe storage: SageMaker refuses a KmsKeyId there
            "KmsKeyId": Match.absent(),
        },
    )
    t.has_resource_properties("AWS::SageMaker::Endpoint", {"EndpointName": "llms-whole"})
    t.has_resource_properties(
        "AWS::SageMaker::InferenceComponent",
        {
            "InferenceComponentName": "llms-llama-70b",
            "Specification": {
                "ComputeResourceRequirements": {"NumberOfAcceleratorDevicesRequired": 4, "MinMemoryRequiredInMb": 262144}
            },
            "RuntimeConfig": {"CopyCount": 1},
        },
    )
    t.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {"ResourceId": "inference-component/llms-llama-70b", "MinCapacity": 1, "MaxCapacity": 2},
    )
    t.resource_count_is(COMPONENT, 3)  # chat, embed, ocr


def test_balanced_layout_resolves_on_the_instance_gpu(mixed):
    mixed["template"].has_resource_properties(
        ENDPOINT,
        {"EndpointBaseName": "llms", "InstanceCount": 2, "Layout": ["mig-3g.40gb", "mig-2g.20gb", "mig-1g.10gb", "mig-1g.10gb"],
         "VpcConfig": {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]}},
    )
    mixed["template"].has_resource_properties(COMPONENT, {"ComponentBaseName": "llms-embed", "AcceleratorPartitionType": "mig-1g.10gb"})


def test_fixed_copies_get_no_autoscaling(mixed):
    targets = mixed["template"].find_resources("AWS::ApplicationAutoScaling::ScalableTarget")
    assert len(targets) == 2  # chat and llama-70b; embed (4..4) and ocr (1..1) are fixed


def test_models_run_in_the_vpc_and_the_role_may_decrypt_model_data(mixed):
    t = mixed["template"]
    models = t.find_resources("AWS::SageMaker::Model", {"Properties": {"ModelName": Match.string_like_regexp("^llms-")}})
    assert len(models) == 3
    for m in models.values():
        assert m["Properties"]["VpcConfig"]["Subnets"] == ["subnet-0123456789abcdef0"]
    key_policy = json.dumps(t.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": Match.string_like_regexp("LlmsExecutionRole")}]}}))
    assert "kms:Decrypt" in key_policy
    assert "ec2:CreateNetworkInterface" in key_policy


def test_grant_invoke_covers_both_endpoints_of_the_construct(mixed):
    policies = mixed["template"].find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": Match.string_like_regexp("Invoker")}]}})
    (policy,) = policies.values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == [
        "sagemaker:InvokeEndpoint",
        "sagemaker:InvokeEndpointAsync",
        "sagemaker:InvokeEndpointWithResponseStream",
    ]
    text = json.dumps(statement["Resource"])
    assert "EndpointArn" in text and "LlmsWholeGpuEndpoint" in text


def test_metrics_are_per_inference_component(mixed):
    big = mixed["big"]
    stack = mixed["stack"]
    m = big.metric_invocations("chat")
    assert (m.namespace, m.metric_name, m.statistic) == ("AWS/SageMaker", "Invocations", "Sum")
    assert stack.resolve(m.dimensions["InferenceComponentName"]) == {
        "Fn::GetAtt": [stack.get_logical_id(big.components["chat"].node.default_child), "InferenceComponentName"]
    }
    latency = big.metric_model_latency("llama-70b")
    assert (latency.metric_name, latency.statistic) == ("ModelLatency", "p90")
    assert latency.dimensions == {"InferenceComponentName": "llms-llama-70b"}
    assert big.metric_invocation_5xx_errors("embed").metric_name == "Invocation5XXErrors"
    assert big.metric_invocation_4xx_errors("embed").metric_name == "Invocation4XXErrors"
    assert big.metric_model_errors("embed").metric_name == "InvocationModelErrors"
    assert big.metric_invocations_per_copy("embed").metric_name == "InvocationsPerCopy"


def test_metric_of_an_unknown_model_names_the_models(mixed):
    with pytest.raises(ConfigError, match="model: is not a model of this endpoint.*chat, embed, llama-70b"):
        mixed["big"].metric_invocations("chatt")


def test_one_team_per_endpoint_gives_no_warning(mixed):
    warnings = mixed["annotations"].find_warning("*", Match.string_like_regexp("share the instances"))
    assert warnings == []


def test_mixed_is_nag_clean_and_cfn_lint_clean(mixed):
    assert_nag_clean(mixed["report"])
    assert_cfn_lint_clean(mixed["template"])


def test_mixed_snapshot(mixed, template_snapshot):
    assert scrub(mixed["template"].to_json()) == template_snapshot


# --------------------------------------------------------------------------- refusals (no synth)


def build(**kwargs):
    app = cdk.App()
    stack = cdk.Stack(app, "S")
    props = dict(instance_type="ml.p4d.24xlarge", layout="half", models=[model("a", "mig-3g.20gb")])
    props.update(kwargs)
    return MigInferenceEndpoint(stack, "E", **props)


def refusal(**kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        build(**kwargs)
    return str(info.value)


def test_refuses_a_layout_that_does_not_fit_the_gpu():
    text = refusal(layout=["mig-4g.20gb", "mig-4g.20gb"])
    assert "layout: does not fit one A100-40GB GPU: compute slices sum to 8 > 7" in text
    assert "gpu-share mig layouts --gpu A100-40GB" in text


def test_refuses_a_profile_that_is_not_in_the_layout():
    text = refusal(models=[model("a", "mig-3g.20gb"), model("b", "mig-1g.5gb")])
    assert "models[1] (b).profile: model b wants mig-1g.5gb, which layout mig-3g.20gb mig-3g.20gb does not have" in text


def test_refuses_more_copies_of_a_profile_than_partitions_exist():
    text = refusal(models=[model("a", "mig-3g.20gb", copies=Copies(1, 1, 8)), model("b", "mig-3g.20gb", copies=Copies(1, 1, 9))])
    assert "17 copies of mig-3g.20gb wanted (a max 8, b max 9) but only 16 exist: 2 per GPU x 8 GPUs x 1 instance" in text


def test_more_instances_make_room_for_more_copies():
    endpoint = build(instance_count=2, models=[model("a", "mig-3g.20gb", copies=Copies(1, 1, 30))])
    assert endpoint.layout == ["mig-3g.20gb", "mig-3g.20gb"]


def test_refuses_max_copies_that_leave_no_partition_for_a_rolling_update():
    """16 of 16 fit, but an image change then has no partition to start its new copy on."""
    text = refusal(models=[model("a", "mig-3g.20gb", copies=Copies(1, 1, 8)), model("b", "mig-3g.20gb", copies=Copies(1, 1, 8))])
    assert (
        "16 of the 16 mig-3g.20gb partitions are taken at max copies (a max 8, b max 8), leaving 0 for rolling"
        " updates; a model or image change starts 1 new copy of each model before stopping an old one and needs 2"
    ) in text
    assert "lower copies.max so that they sum to at most 14" in text
    build(models=[model("a", "mig-3g.20gb", copies=Copies(1, 1, 7)), model("b", "mig-3g.20gb", copies=Copies(1, 1, 7))])


def test_the_rolling_batch_is_the_one_the_handler_sends():
    from cdk_gpu_share.inference.config import ROLLING_UPDATE_BATCH_COPIES
    from cdk_gpu_share.inference.handler import index

    assert index.ROLLING_BATCH_COPIES == ROLLING_UPDATE_BATCH_COPIES
    from cdk_gpu_share.inference.config import rolling_update_batch

    for copies in (1, 2, 20, 21, 40, 41, 56):
        assert index.rolling_batch(copies) == rolling_update_batch(copies)
        assert copies < 2 or rolling_update_batch(copies) * 100 >= 5 * copies  # at least 5 % of the copies


def test_many_copies_reserve_five_percent_for_the_rolling_batch():
    """Above 20 copies one copy is less than the 5 % batch SageMaker accepts."""
    text = refusal(instance_count=4, models=[model("a", "mig-3g.20gb", copies=Copies(1, 1, 62))])
    assert "62 of the 64 mig-3g.20gb partitions are taken at max copies (a max 62), leaving 2" in text
    assert "starts new copies before stopping as many old ones (a 4) and needs 4" in text
    build(instance_count=4, models=[model("a", "mig-3g.20gb", copies=Copies(1, 1, 60))])


def test_refuses_a_multi_gpu_model_on_the_partitioned_variant():
    text = refusal(models=[model("a", "mig-3g.20gb"), model("big", gpus=2)])
    assert "models[1] (big).gpus: model big needs 2 whole GPUs per copy; a partitioned variant gives each copy one MIG" in text
    assert "whole_gpu" in text


def test_refuses_a_whole_gpu_model_larger_than_the_whole_gpu_instance():
    text = refusal(models=[model("a", "mig-3g.20gb"), model("big", gpus=16)], whole_gpu_instance_type="ml.p4d.24xlarge")
    assert "model big needs 16 GPUs per copy; ml.p4d.24xlarge has 8" in text


def test_refuses_an_instance_type_without_mig():
    text = refusal(instance_type="ml.g5.12xlarge")
    assert "instance_type: not a SageMaker instance type with MIG-capable GPUs (got 'ml.g5.12xlarge')" in text


def test_refuses_more_host_memory_than_the_instance_has():
    text = refusal(models=[model("a", "mig-3g.20gb", copies=Copies(1, 1, 16), memory_mb=100_000)])
    assert "memory_mb x copies.max sum to 1600000 MB, above the 1179648 MB of host memory" in text


def test_refuses_copies_out_of_order():
    text = refusal(models=[model("a", "mig-3g.20gb", copies=Copies(initial=5, min=1, max=2))])
    assert "models[0] (a).copies: needs 1 <= min <= initial <= max" in text


def test_lists_every_problem_at_once():
    with pytest.raises(ConfigError) as info:
        build(models=[model("a", "mig-1g.5gb"), model("b", gpus=2), model("a", "mig-3g.20gb")])
    fields = [p.field for p in info.value.problems]
    assert len(fields) == 3, fields


def test_an_existing_role_is_used_as_given():
    app = cdk.App()
    stack = cdk.Stack(app, "S")
    role = iam.Role.from_role_arn(stack, "R", "arn:aws:iam::111122223333:role/ml-exec")
    endpoint = MigInferenceEndpoint(
        stack, "E", instance_type="ml.p4d.24xlarge", layout="half", models=[model("a", "mig-3g.20gb")], role=role
    )
    t = assertions.Template.from_stack(stack)
    t.has_resource_properties(ENDPOINT, {"ExecutionRoleArn": "arn:aws:iam::111122223333:role/ml-exec"})
    assert not t.find_resources("AWS::IAM::Role", {"Properties": {"AssumeRolePolicyDocument": {"Statement": [{"Principal": {"Service": "sagemaker.amazonaws.com"}}]}}})
    assert endpoint.role is role


def test_a_changed_image_gives_the_model_a_new_name():
    def name(image):
        app = cdk.App()
        stack = cdk.Stack(app, "S")
        m = InferenceModelConfig(name="a", image=image, profile="mig-3g.20gb", memory_mb=1024)
        e = MigInferenceEndpoint(stack, "E", instance_type="ml.p4d.24xlarge", layout="half", models=[m])
        return e.cfn_models["a"].model_name

    assert name(IMAGE) == name(IMAGE)
    assert name(IMAGE) != name(IMAGE.replace("0.33.0", "0.34.0"))


def test_endpoint_name_defaults_to_the_construct_id():
    endpoint = build()
    assert endpoint.base_name == "e"


def test_every_wait_ends_inside_cloudformations_hour(example):
    """ServiceTimeout on each custom resource; the framework's waiter gives up before it."""
    t = example["template"]
    for kind in (ENDPOINT, COMPONENT):
        resources = t.find_resources(kind)
        assert resources and all(r["Properties"]["ServiceTimeout"] == "3600" for r in resources.values())
    (machine,) = t.find_resources("AWS::StepFunctions::StateMachine").values()
    definition = json.dumps(machine["Properties"]["DefinitionString"])
    interval = int(re.search(r'IntervalSeconds\\+":(\d+)', definition).group(1))
    attempts = int(re.search(r'MaxAttempts\\+":(\d+)', definition).group(1))
    waited = interval * (attempts + 1)
    assert (interval, attempts) == (30, 110)
    assert waited <= 3600 - 2 * interval, f"the waiter waits {waited} s"
