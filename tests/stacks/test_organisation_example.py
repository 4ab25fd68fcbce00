"""examples/organisation.yaml (two divisions, five teams, one division with a pool of its own)
synthesized on each of the four backends: Kueue keeps the tree as Cohorts, the fair-share
Lambda gets the tree in its settings, and HyperPod and Batch quota management deploy the
compilation (each group's pool split to its teams), with synth's warning saying so."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from aws_cdk.assertions import Template

from cdk_gpu_share.aws import batch_reader as br
from cdk_gpu_share.core.configuration.parse import parse_config
from cdk_gpu_share.core.policy.organisation import compile_flat
from cdk_gpu_share.stacks.app import build_platform
from tests.helpers import ROOT, new_app

EXAMPLE = ROOT / "examples" / "organisation.yaml"
TEAMS = ["research", "vision", "applied", "search", "ranking"]
SECTIONS: dict[str, dict[str, Any]] = {
    "hyperpod": {"cluster_arn": "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456",
                 "eks_cluster_arn": "arn:aws:eks:us-east-1:111122223333:cluster/hyperpod-eks",
                 "capacity": {"ml.p5.48xlarge": 8}},
    "batch_quota": {"capacity": {"ml.p5.48xlarge": 8}},
    "fairshare": {"capacity": {"p5.48xlarge": 8}},
}


def organisation(backend: str) -> dict[str, Any]:
    """The example with its kueue section swapped for ``backend``'s (SageMaker's ml. types there)."""
    raw = yaml.safe_load(EXAMPLE.read_text())
    if backend == "kueue":
        return raw
    raw = copy.deepcopy(raw)
    del raw["kueue"]
    raw[backend] = copy.deepcopy(SECTIONS[backend])
    if backend in ("hyperpod", "batch_quota"):
        for node in raw["teams"] + raw["groups"]:
            for key in ("guarantee", "borrow_limit"):
                if key in node:
                    node[key] = {f"ml.{it}": v for it, v in node[key].items()}
    return raw


@pytest.fixture(scope="module", params=["kueue", "fairshare", "hyperpod", "batch_quota"])
def built(request):
    config = parse_config(organisation(request.param))
    app = new_app()
    platform = build_platform(app, config, checks=False)
    templates = {s.node.id: Template.from_stack(s).to_json() for s in [platform.platform, *platform.teams.values()]}
    return request.param, config, platform, templates


def _resources(templates: dict[str, dict], type_: str) -> dict[str, dict]:
    return {f"{stack}/{k}": r for stack, t in templates.items() for k, r in t.get("Resources", {}).items()
            if r["Type"] == type_}


def _warnings(platform: Any) -> list[str]:
    return [str(m.data) for m in platform.platform.node.find_all() for m in m.node.metadata
            if m.type == "aws:cdk:warning"]


def test_every_team_gets_a_stack_on_every_backend(built):
    _, _, platform, _ = built
    assert sorted(platform.teams) == sorted(TEAMS)


def test_kueue_makes_a_cohort_per_division_and_puts_each_team_in_its_own(built):
    backend, _, _, templates = built
    if backend != "kueue":
        pytest.skip("kueue only")
    objects = [o for r in _resources(templates, "Custom::AWSCDK-EKS-KubernetesResource").values()
               for o in json.loads(r["Properties"]["Manifest"])]
    cohorts = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Cohort"}
    assert {n: c.get("parentName") for n, c in cohorts.items()} == {
        "organisation": None, "science": "organisation", "product": "organisation"}
    science = {r["name"]: r for r in cohorts["science"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert science["nvidia.com/gpu"] == {"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 8}
    root = {r["name"]: r for r in cohorts["organisation"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert root["nvidia.com/gpu"]["nominalQuota"] == 8  # 64 GPUs less 48 (teams) less 8 (science's pool)
    queues = {o["metadata"]["name"]: o["spec"]["cohortName"] for o in objects if o["kind"] == "ClusterQueue"}
    assert queues == {"research": "science", "vision": "science", "applied": "product", "search": "product",
                      "ranking": "product"}


def test_the_fair_share_lambda_gets_the_tree_in_its_settings(built):
    backend, config, platform, templates = built
    if backend != "fairshare":
        pytest.skip("fairshare only")
    [fn] = [r for r in _resources(templates, "AWS::Lambda::Function").values()
            if "GPU_SHARE_SETTINGS" in r["Properties"].get("Environment", {}).get("Variables", {})]
    settings = br.decode_settings(fn["Properties"]["Environment"]["Variables"]["GPU_SHARE_SETTINGS"])
    assert settings["groups"] == [
        {"name": "science", "guarantee": {"gpu": 8}, "borrow_limit": {"gpu": 8}},
        {"name": "product", "borrow_limit": {"gpu": 16}}]
    assert {t["name"]: t.get("group") for t in settings["teams"]} == {
        "research": "science", "vision": "science", "applied": "product", "search": "product", "ranking": "product"}
    assert settings == br.settings_from_config(config)  # what status and usage read
    assert not [w for w in _warnings(platform) if "organisation's tree" in w]


def test_hyperpod_deploys_the_compiled_guarantees_and_borrow_limits(built):
    backend, config, platform, templates = built
    if backend != "hyperpod":
        pytest.skip("hyperpod only")
    quotas = {r["Properties"]["Name"]: r["Properties"]["ComputeQuotaConfig"]
              for r in _resources(templates, "AWS::SageMaker::ComputeQuota").values()}
    counts = {name.removesuffix("-quota"): q["ComputeQuotaResources"][0]["Count"] for name, q in quotas.items()}
    # science's pool (one node) goes to research, the larger of its two teams.
    assert counts == {"research": 3, "vision": 1, "applied": 1, "search": 1, "ranking": 1}
    [warning] = [w for w in _warnings(platform) if "organisation's tree" in w]
    assert "hyperpod cannot enforce" in warning and "research" in warning and "gpu-share plan" in warning


def test_batch_deploys_the_compiled_shares_with_percentage_limits(built):
    backend, config, platform, templates = built
    if backend != "batch_quota":
        pytest.skip("batch_quota only")
    shares = {r["Properties"]["QuotaShareName"]: r["Properties"]
              for r in _resources(templates, "AWS::Batch::QuotaShare").values()}
    capacity = {n: s["CapacityLimits"][0]["MaxCapacity"] for n, s in shares.items()}
    assert sorted(capacity.values()) == [1, 1, 1, 1, 3]
    expected = {c.team: c.compiled_borrow_percent for c in compile_flat(config, "batch_quota").changes}
    assert expected["research"] == 67  # bound 5 less 3 compiled = 2 nodes: 67 % of 3 is 2.01, 66 % only 1.98
    limits = {n: s["ResourceSharingConfiguration"].get("BorrowLimit") for n, s in shares.items()}
    assert sorted(v for v in limits.values() if v is not None) == sorted(
        v for v in expected.values() if v is not None)
    [warning] = [w for w in _warnings(platform) if "organisation's tree" in w]
    assert "batch_quota cannot enforce" in warning
