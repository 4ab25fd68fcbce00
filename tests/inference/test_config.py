"""The ``inference`` section of the platform config (inference/config.py)."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

from cdk_gpu_share.core.configuration.parse import load_config, parse_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.inference.config import (
    Copies,
    InferenceConfig,
    InferenceEndpointConfig,
    InferenceModelConfig,
    WholeGpuConfig,
    check_endpoint,
    endpoint_layout,
    model_profile,
    teams_sharing,
)
from tests.helpers import ROOT

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128"
BASE = {
    "platform": {"name": "demo"},
    "teams": [
        {"name": "team-a", "guarantee": {"ml.g5.xlarge": 1}},
        {"name": "team-b", "guarantee": {"ml.g5.xlarge": 1}},
    ],
    "batch_quota": {"capacity": {"ml.g5.xlarge": 2}},
}
MODEL = {
    "name": "summarizer",
    "image": IMAGE,
    "profile": "mig-3g.20gb",
    "copies": {"initial": 2, "min": 1, "max": 4},
    "memory_mb": 16384,
}


def config_with(inference):
    return {**copy.deepcopy(BASE), "inference": inference}


def endpoint(**overrides):
    e = {"name": "small", "instance_type": "ml.p4d.24xlarge", "layout": "half", "models": [dict(MODEL)]}
    e.update(overrides)
    return e


def problems(inference) -> list:
    with pytest.raises(ConfigError) as info:
        parse_config(config_with(inference))
    return info.value.problems


def fields(inference) -> list[str]:
    return [p.field for p in problems(inference)]


def one(inference):
    (p,) = problems(inference)
    return p


# --------------------------------------------------------------------------- valid input


def test_a_full_section_parses_into_typed_config():
    raw = {
        "kms_key_arn": "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab",
        "vpc": {"subnet_ids": ["subnet-0123456789abcdef0"], "security_group_ids": ["sg-0123456789abcdef0"]},
        "endpoints": [
            endpoint(
                instance_count=2,
                whole_gpu={"instance_type": "ml.p4d.24xlarge"},
                models=[
                    {**MODEL, "environment": {"MAX_LEN": 4096, "DTYPE": "fp16"}, "team": "team-a", "cpus": 2,
                     "model_data_url": "s3://bucket/summarizer/model.tar.gz", "invocations_per_copy": 25},
                    {"name": "classifier", "image": IMAGE, "profile": "3g.20gb", "copies": 3, "memory_mb": 4096,
                     "network_isolation": False},
                    {"name": "big", "image": IMAGE, "gpus": 2, "memory_mb": 65536},
                ],
            )
        ],
    }
    config = parse_config(config_with(raw))
    inference = config.inference
    assert isinstance(inference, InferenceConfig)
    assert inference.kms_key_arn.endswith("1234567890ab")
    assert inference.vpc.subnet_ids == ("subnet-0123456789abcdef0",)
    e = inference.endpoint("small")
    assert (e.instance_type, e.instance_count, e.layout) == ("ml.p4d.24xlarge", 2, "half")
    assert e.whole_gpu == WholeGpuConfig("ml.p4d.24xlarge", 1)
    summarizer, classifier, big = e.models
    assert summarizer.environment == {"MAX_LEN": "4096", "DTYPE": "fp16"}
    assert summarizer.copies == Copies(initial=2, min=1, max=4) and summarizer.copies.autoscaled
    assert summarizer.invocations_per_copy == 25 and summarizer.team == "team-a" and summarizer.cpus == 2
    assert classifier.copies == Copies(3, 3, 3) and not classifier.copies.autoscaled
    assert classifier.network_isolation is False and summarizer.network_isolation is True
    assert big.gpus == 2 and not big.partitioned
    assert endpoint_layout(e) == ["mig-3g.20gb", "mig-3g.20gb"]
    assert model_profile(e, classifier) == "mig-3g.20gb"


def test_the_example_file_is_valid():
    config = load_config(ROOT / "examples" / "inference.yaml")
    (e,) = config.inference.endpoints
    assert e.instance_type == "ml.p4d.24xlarge"
    assert [m.profile for m in e.models] == ["mig-3g.20gb", "mig-3g.20gb"]
    assert teams_sharing(e.models) == ["search", "support"]


def test_copies_default_to_one_and_partial_copies_are_completed():
    config = parse_config(config_with({"endpoints": [endpoint(models=[
        {k: v for k, v in MODEL.items() if k != "copies"},
        {**MODEL, "name": "m2", "copies": {"max": 3}},
        {**MODEL, "name": "m3", "copies": {"initial": 2}},
    ])]}))
    a, b, c = config.inference.endpoints[0].models
    assert a.copies == Copies(1, 1, 1)
    assert b.copies == Copies(1, 1, 3)
    assert c.copies == Copies(2, 2, 2)


# --------------------------------------------------------------------------- the MIG rules, through the config


def test_layout_that_does_not_fit_names_the_gpu_and_the_numbers():
    p = one({"endpoints": [endpoint(layout=["mig-4g.20gb", "mig-4g.20gb"])]})
    assert p.field == "inference.endpoints[0] (small).layout"
    assert "does not fit one A100-40GB GPU: compute slices sum to 8 > 7" in p.message


def test_profile_not_in_the_layout_names_the_model_and_the_layout():
    p = one({"endpoints": [endpoint(models=[{**MODEL, "profile": "mig-1g.5gb"}])]})
    assert p.field == "inference.endpoints[0] (small).models[0] (summarizer).profile"
    assert p.message == "model summarizer wants mig-1g.5gb, which layout mig-3g.20gb mig-3g.20gb does not have"


def test_profile_of_another_gpu_is_refused_with_the_equivalent():
    p = one({"endpoints": [endpoint(models=[{**MODEL, "profile": "mig-3g.40gb"}])]})
    assert p.field.endswith("models[0] (summarizer).profile")
    assert "on A100-40GB use mig-3g.20gb" in p.fix


def test_too_many_copies_of_a_profile_names_every_model_and_the_partitions():
    p = one({"endpoints": [endpoint(models=[
        {**MODEL, "copies": {"max": 10}},
        {**MODEL, "name": "other", "copies": {"max": 7}},
    ])]})
    assert p.message == (
        "17 copies of mig-3g.20gb wanted (summarizer max 10, other max 7) but only 16 exist:"
        " 2 per GPU x 8 GPUs x 1 instance"
    )


def test_max_copies_that_leave_no_partition_for_a_rolling_update_are_refused():
    p = one({"endpoints": [endpoint(models=[{**MODEL, "copies": {"max": 16}}])]})
    assert p.field == "inference.endpoints[0] (small).models"
    assert p.message.startswith("16 of the 16 mig-3g.20gb partitions are taken at max copies (summarizer max 16)")
    assert p.fix.startswith("lower copies.max so that they sum to at most 15")


def test_multi_gpu_model_on_the_partitioned_variant_is_refused():
    p = one({"endpoints": [endpoint(models=[dict(MODEL), {"name": "big", "image": IMAGE, "gpus": 2, "memory_mb": 1024}])]})
    assert p.field.endswith("models[1] (big).gpus")
    assert p.message.startswith("model big needs 2 whole GPUs per copy; a partitioned variant gives each copy one MIG")
    assert "whole_gpu" in p.fix


def test_whole_gpu_capacity_is_checked():
    p = one({"endpoints": [endpoint(
        whole_gpu={"instance_type": "ml.p4d.24xlarge", "instance_count": 1},
        models=[dict(MODEL), {"name": "big", "image": IMAGE, "gpus": 4, "memory_mb": 1024, "copies": {"max": 3}}],
    )]})
    assert p.message.startswith("the whole-GPU models want 12 GPUs (big 4 x max 3) but 1 instance of ml.p4d.24xlarge have 8")


def test_whole_gpu_without_whole_gpu_models_is_refused():
    p = one({"endpoints": [endpoint(whole_gpu={"instance_type": "ml.p4d.24xlarge"})]})
    assert p.field.endswith("whole_gpu") and "no model gives gpus" in p.message


def test_profile_and_gpus_together_are_refused():
    p = one({"endpoints": [endpoint(models=[{**MODEL, "gpus": 1}])]})
    assert p.message == "is set together with profile"


def test_host_cpu_is_shared_and_checked():
    p = one({"endpoints": [endpoint(models=[{**MODEL, "cpus": 8, "copies": {"max": 15}}])]})
    assert "cpus x copies.max sum to 120, above the 96 vCPUs" in p.message


def test_non_mig_instance_type_is_refused():
    p = one({"endpoints": [endpoint(instance_type="ml.g5.48xlarge")]})
    assert p.field == "inference.endpoints[0] (small).instance_type"
    assert "MIG" in p.message


# --------------------------------------------------------------------------- shape errors, all collected


def test_every_problem_is_reported_at_once():
    raw = {
        "endpoint": [],
        "endpoints": [
            endpoint(models=[
                {"name": "a", "image": "not an image", "profile": "mig-3g.20gb", "memory_mb": 64, "team": "team-z",
                 "environment": {"FLAG": True}, "copies": {"initial": 0}, "model_data_url": "https://x"},
                {"name": "b", "image": IMAGE, "memory_mb": 1024, "colour": "red"},
            ]),
            endpoint(name="Bad_Name", layout=None),
        ],
        "vpc": {"subnet_ids": "subnet-1"},
        "kms_key_arn": "alias/my-key",
    }
    got = fields(raw)
    for expected in (
        "inference.endpoint",
        "inference.endpoints[0] (small).models[0] (a).image",
        "inference.endpoints[0] (small).models[0] (a).memory_mb",
        "inference.endpoints[0] (small).models[0] (a).team",
        "inference.endpoints[0] (small).models[0] (a).environment.FLAG",
        "inference.endpoints[0] (small).models[0] (a).copies.initial",
        "inference.endpoints[0] (small).models[0] (a).model_data_url",
        "inference.endpoints[0] (small).models[1] (b).colour",
        "inference.endpoints[1].name",
        "inference.vpc.subnet_ids",
        "inference.vpc.security_group_ids",
        "inference.kms_key_arn",
    ):
        assert expected in got, (expected, got)
    assert any(f.endswith(".layout") for f in got)


def test_layout_problems_are_reported_with_the_model_problems():
    got = fields({"endpoints": [endpoint(layout=["mig-4g.20gb", "mig-4g.20gb"], models=[{**MODEL, "memory_mb": 1}])]})
    assert got == [
        "inference.endpoints[0] (small).models[0] (summarizer).memory_mb",
        "inference.endpoints[0] (small).layout",
    ]


def test_unknown_key_suggests_the_closest():
    p = one({"endpoints": [endpoint(models=[{**MODEL, "memory": 1}])]})
    assert p.field.endswith("models[0] (summarizer).memory") and p.fix == "did you mean 'memory_mb'?"


def test_unknown_team_lists_the_teams():
    p = one({"endpoints": [endpoint(models=[{**MODEL, "team": "team-c"}])]})
    assert p.message == "is not a team of this config" and "team-a, team-b" in p.fix


def test_boolean_environment_value_asks_for_quotes():
    p = one({"endpoints": [endpoint(models=[{**MODEL, "environment": {"TRUST": True}}])]})
    assert p.fix == 'quote it: "true"'


def test_a_model_without_profile_or_gpus_is_told_the_layout_profiles():
    m = {k: v for k, v in MODEL.items() if k != "profile"}
    p = one({"endpoints": [endpoint(models=[m])]})
    assert p.field.endswith("(summarizer).profile") and "mig-3g.20gb" in p.fix


def test_duplicate_endpoint_and_model_names_are_refused():
    got = problems({"endpoints": [endpoint(models=[dict(MODEL), dict(MODEL)]), endpoint()]})
    messages = [p.message for p in got]
    assert "duplicates the name of models[0]" in messages
    assert "duplicates the name of inference.endpoints[0]" in messages


def test_long_names_are_refused_before_sagemaker_does():
    got = problems({"endpoints": [endpoint(name="e" * 41)]})
    assert any("at most 40" in p.message for p in got)
    got = problems({"endpoints": [endpoint(name="e" * 40, models=[{**MODEL, "name": "m" * 15}])]})
    assert any("above the 55 an inference component name leaves" in p.message for p in got)


def test_the_section_must_be_a_mapping_with_endpoints():
    assert fields([]) == ["inference"]
    assert fields({"endpoints": []}) == ["inference.endpoints"]


# --------------------------------------------------------------------------- the core API


def test_check_endpoint_is_the_one_rule_set_used_by_the_construct():
    e = InferenceEndpointConfig(
        name="small",
        instance_type="ml.p5.48xlarge",
        layout=("mig-3g.40gb", "mig-3g.40gb"),
        models=(InferenceModelConfig(name="m", image=IMAGE, profile="mig-3g.40gb", memory_mb=1024),),
    )
    assert check_endpoint(e) == []
    bad = InferenceEndpointConfig(
        name="small", instance_type="ml.p5.48xlarge", layout="half",
        models=(InferenceModelConfig(name="m", image=IMAGE, profile="mig-1g.10gb", memory_mb=1024),),
    )
    (p,) = check_endpoint(bad, where="x")
    assert p.field == "x.models[0] (m).profile"


def test_teams_sharing_lists_teams_only_when_more_than_one():
    a = InferenceModelConfig(name="a", image=IMAGE, profile="p", memory_mb=1, team="t1")
    b = InferenceModelConfig(name="b", image=IMAGE, profile="p", memory_mb=1, team="t2")
    c = InferenceModelConfig(name="c", image=IMAGE, profile="p", memory_mb=1)
    assert teams_sharing([a, c]) == []
    assert teams_sharing([a, b, c]) == ["t1", "t2"]


def test_core_module_imports_no_cdk_or_boto3():
    code = (
        "import sys, cdk_gpu_share.inference.config; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'boto3', 'botocore', 'constructs')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_old_module_paths_still_import_the_same_names():
    """``cdk_gpu_share.core.inference_config`` and ``cdk_gpu_share.constructs.mig_endpoint`` (the
    paths before MIG inference became one package) re-export the package's names."""
    import cdk_gpu_share
    from cdk_gpu_share.constructs import mig_endpoint as old_construct
    from cdk_gpu_share.core import inference_config as old_config
    from cdk_gpu_share.inference import config, construct

    assert old_config.__all__ == config.__all__
    assert all(getattr(old_config, name) is getattr(config, name) for name in config.__all__)
    assert old_construct.MigInferenceEndpoint is construct.MigInferenceEndpoint is cdk_gpu_share.MigInferenceEndpoint
    assert cdk_gpu_share.InferenceModelConfig is config.InferenceModelConfig
