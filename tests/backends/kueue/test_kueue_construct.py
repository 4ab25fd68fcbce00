"""The KueueQueues construct: the objects it applies, the kubectl role of the imported cluster,
each team's access entry scoped to its namespace, cdk-nag, cfn-lint and the IAM the teams get."""

from __future__ import annotations

import json
import subprocess

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Match, Template

from cdk_gpu_share.backends.kueue.construct import KueueQueues
from cdk_gpu_share.backends.kueue.manifests import config_objects
from cdk_gpu_share.core.configuration.parse import load_config, parse_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.stacks.app import build_platform
from tests.auth.resolve import ROOT, load_app
from tests.auth.test_authorization import EVALUATOR, NODE
from tests.helpers import assert_cfn_lint_clean, assert_nag_clean, new_app, synth

EXAMPLE = ROOT / "examples" / "kueue.yaml"
ROLE = "arn:aws:iam::111122223333:role/gpu-eks-kubectl"
MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"


@pytest.fixture(scope="module")
def built():
    app = new_app()
    platform = build_platform(app, load_config(EXAMPLE))
    report = synth(app)
    return platform, report, app.outdir


def _manifests(template: Template) -> dict[str, list[dict]]:
    """The objects the KubernetesManifests apply, by kind (the namespaces' manifests together)."""
    out: dict[str, list[dict]] = {}
    for r in template.find_resources(MANIFEST).values():
        objects = json.loads(r["Properties"]["Manifest"])
        out.setdefault(objects[0]["kind"], []).extend(objects)
    return out


def _strip_prune_labels(objects: list[dict]) -> list[dict]:
    for o in objects:
        labels = o["metadata"].get("labels", {})
        for k in [k for k in labels if k.startswith("aws.cdk.eks/prune-")]:
            del labels[k]
    return objects


def test_the_platform_stack_applies_the_same_objects_as_the_manifests_command(built):
    platform, _, _ = built
    template = Template.from_stack(platform.platform)
    template.resource_count_is(MANIFEST, 3 + 7)  # a manifest per namespace, then one per kind
    by_kind = _manifests(template)
    assert list(by_kind) == ["Namespace", "ResourceFlavor", "Cohort", "WorkloadPriorityClass", "ClusterQueue", "LocalQueue",
                             "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    assert [o["metadata"]["name"] for o in by_kind["ValidatingAdmissionPolicyBinding"]] == [
        "gpu-share-queue.research", "gpu-share-queue.applied", "gpu-share-queue.inference"]
    applied = _strip_prune_labels([o for objects in by_kind.values() for o in objects])
    assert applied == config_objects(load_config(EXAMPLE))


def test_the_manifests_go_through_the_kubectl_role_to_the_named_cluster_in_order(built):
    platform, _, _ = built
    template = Template.from_stack(platform.platform)
    template.all_resources_properties(MANIFEST, {"ClusterName": "gpu-eks", "RoleArn": ROLE})
    resources = template.find_resources(MANIFEST)
    by_kind = {json.loads(r["Properties"]["Manifest"])[0]["kind"]: (lid, r) for lid, r in resources.items()}
    namespaces = sorted(lid for lid, r in resources.items()
                        if json.loads(r["Properties"]["Manifest"])[0]["kind"] == "Namespace")
    assert len(namespaces) == 3 and all("DependsOn" not in resources[lid] for lid in namespaces)
    assert by_kind["ResourceFlavor"][1]["DependsOn"] == namespaces
    assert by_kind["ClusterQueue"][1]["DependsOn"] == [by_kind["WorkloadPriorityClass"][0]]
    assert by_kind["LocalQueue"][1]["DependsOn"] == [by_kind["ClusterQueue"][0]]
    assert by_kind["ValidatingAdmissionPolicy"][1]["DependsOn"] == [by_kind["LocalQueue"][0]]
    assert by_kind["ValidatingAdmissionPolicyBinding"][1]["DependsOn"] == [by_kind["ValidatingAdmissionPolicy"][0]]
    # The imported cluster creates no cluster, no node group and no IAM role of its own in the platform stack.
    for absent in ("AWS::EKS::Cluster", "AWS::EKS::Nodegroup", "AWS::IAM::Role", "Custom::AWSCDK-EKS-Cluster"):
        template.resource_count_is(absent, 0)


def test_a_namespace_is_created_or_adopted_as_configured_and_never_deleted(built):
    """Removing a team or destroying the stack deletes no namespace: each namespace's manifest is
    never pruned and retained by CloudFormation; the stack's output names what cdk destroy keeps.
    A namespace is created (an existing one fails the deployment: no team gets edit rights in a
    namespace someone else made) unless the config adopts it (examples/kueue.yaml: inference)."""
    platform, _, _ = built
    template = Template.from_stack(platform.platform)
    resources = template.find_resources(MANIFEST)
    kept = {}
    for lid, r in resources.items():
        objects = json.loads(r["Properties"]["Manifest"])
        if objects[0]["kind"] != "Namespace":
            assert r["DeletionPolicy"] == "Delete" and "Namespace" not in {o["kind"] for o in objects}
            continue
        [ns] = objects
        assert r["DeletionPolicy"] == r["UpdateReplacePolicy"] == "Retain"
        # kubectl apply adopts an existing namespace; kubectl create refuses one.
        adopted = ns["metadata"]["name"] == "inference"
        assert r["Properties"].get("Overwrite", False) is adopted
        assert "PruneLabel" not in r["Properties"]
        assert not any(k.startswith("aws.cdk.eks/prune-") for k in ns["metadata"]["labels"])
        kept[ns["metadata"]["name"]] = lid
    assert sorted(kept) == ["applied", "inference", "research"]
    [output] = [o for k, o in template.to_json()["Outputs"].items() if k.startswith("KueueQueuesKeptNamespaces")]
    assert output["Value"] == "research, applied, inference" and "cdk destroy" in output["Description"]


def test_each_team_gets_an_access_entry_scoped_to_its_namespace(built):
    platform, _, _ = built
    assert sorted(platform.teams) == ["applied", "inference", "research"]
    for name, stack in platform.teams.items():
        t = Template.from_stack(stack)
        t.resource_count_is("AWS::EKS::AccessEntry", 1)
        t.has_resource_properties("AWS::EKS::AccessEntry", {
            "ClusterName": "gpu-eks",
            "Type": "STANDARD",
            "AccessPolicies": [{
                "PolicyArn": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                                ":eks::aws:cluster-access-policy/AmazonEKSEditPolicy"]]},
                "AccessScope": {"Type": "namespace", "Namespaces": [name]},
            }],
            "KubernetesGroups": Match.absent(),
        })
        outputs = t.to_json()["Outputs"]
        assert outputs["KueueNamespace"]["Value"] == name and outputs["KueueLocalQueue"]["Value"] == name


def test_cdk_nag_and_cfn_lint_are_clean(built):
    platform, report, _ = built
    assert_nag_clean(report)
    for stack in (platform.platform, *platform.teams.values()):
        assert_cfn_lint_clean(Template.from_stack(stack))
    acknowledged = {v["ruleName"].split("[")[0] for r in report["pluginReports"] for v in r.get("suppressedViolations", [])}
    assert {"AwsSolutions-IAM4", "AwsSolutions-IAM5", "AwsSolutions-L1"} <= acknowledged


def test_summary_lists_the_applied_objects(built, capsys):
    from cdk_gpu_share.cli import main

    assert main(["summary", built[2]]) == 0
    out = capsys.readouterr().out
    assert "10 Kubernetes manifests, 3 EKS access entries" in out
    assert "Namespace research: created, kept by cdk destroy and when its team is removed" in out
    assert "Namespace inference: adopted if it exists, kept by cdk destroy and when its team is removed" in out
    assert "ValidatingAdmissionPolicy gpu-share-queue.research: Kubernetes 1.30 or later" in out
    assert "ClusterQueue research: p5.48xlarge 16 GPUs (borrowing limit 8)" in out
    assert "ClusterQueue applied: p5.48xlarge 8 GPUs (borrowing limit 0)" in out
    assert "Cohort gpu-share" in out and "LocalQueue inference" in out
    # What no admission policy can enforce, once for the platform (not once per team).
    settings = [line for line in out.splitlines() if "GPU nodes:" in line]
    assert len(settings) == 1
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged = false" in settings[0]
    assert "deviceListStrategy volume-mounts" in settings[0] and "cannot enforce" in settings[0]


def test_without_a_kubectl_role_the_construct_is_refused_naming_the_field():
    raw = yaml.safe_load(EXAMPLE.read_text())
    del raw["kueue"]["kubectl_role_arn"]
    config = parse_config(raw)
    with pytest.raises(ConfigError) as err:
        KueueQueues.for_platform(cdk.Stack(cdk.App(), "S"), config)
    [p] = err.value.problems
    assert p.field == "kueue.kubectl_role_arn" and "gpu-share kueue manifests" in p.fix


def test_the_construct_checks_its_props_by_the_config_rules():
    config = load_config(EXAMPLE)
    stack = cdk.Stack(cdk.App(), "S")
    too_many = [t for t in config.teams] + [parse_config({
        "platform": {"name": "x"}, "kueue": {"eks_cluster_name": "c", "capacity": {"p5.48xlarge": 8}},
        "teams": [{"name": "extra", "guarantee": {"p5.48xlarge": 4}}]}).teams[0]]
    with pytest.raises(ConfigError) as err:
        KueueQueues(stack, "Q", config=config.backend("kueue"), teams=too_many)
    assert ("kueue.capacity.p5.48xlarge", 4) in {(p.field, p.value) for p in err.value.problems}
    assert not stack.node.try_find_child("Q")


def test_a_section_built_in_python_meets_the_parsers_rules():
    from cdk_gpu_share.backends.kueue import KueueConfig, KueuePreemption

    stack = cdk.Stack(cdk.App(), "S")
    config = KueueConfig(eks_cluster_name="gpu-eks", capacity={"p5.48xlarge": 2}, kubectl_role_arn=ROLE,
                         preemption=KueuePreemption(reclaim_within_cohort="Sometimes"))
    with pytest.raises(ConfigError) as err:
        KueueQueues(stack, "Q", config=config)
    assert [(p.field, p.value) for p in err.value.problems] == [("kueue.preemption.reclaim_within_cohort", "Sometimes")]


def test_a_kubectl_role_given_to_the_construct_wins():
    config = load_config(EXAMPLE)
    stack = cdk.Stack(cdk.App(), "S")
    KueueQueues(stack, "Q", config=config.backend("kueue"), teams=config.teams,
                kubectl_role_arn="arn:aws:iam::111122223333:role/other")
    Template.from_stack(stack).all_resources_properties(MANIFEST, {"RoleArn": "arn:aws:iam::111122223333:role/other"})


# -- the IAM a team's SubmitRole gets, decided by the policy evaluator.


@pytest.fixture(scope="module")
def app():
    return load_app("examples/kueue.yaml")


def _decide(policies: list[dict], caller: str, action: str, resource: str) -> str:
    job = {"requests": [{"id": "x", "principal_arn": caller, "action": action, "resources": [resource],
                         "context": {}, "policies": policies}]}
    out = subprocess.run([str(NODE), str(EVALUATOR)], input=json.dumps(job), capture_output=True, text=True, cwd=ROOT,
                         check=True)
    return json.loads(out.stdout)["results"][0]["decision"]


def test_a_team_may_describe_its_cluster_and_nothing_else(app):
    role = app.role("kueue-share-team-research", "SubmitRole")
    cluster = "arn:aws:eks:us-east-1:111122223333:cluster/gpu-eks"
    assert _decide(role.policies, role.arn, "eks:DescribeCluster", cluster) == "Allowed"
    assert _decide(role.policies, role.arn, "eks:DescribeCluster",
                   "arn:aws:eks:us-east-1:111122223333:cluster/other") != "Allowed"
    assert _decide(role.policies, role.arn, "eks:UpdateClusterConfig", cluster) != "Allowed"
    assert _decide(role.policies, role.arn, "eks:CreateAccessEntry", cluster) != "Allowed"


def test_each_access_entry_names_its_own_teams_role_and_namespace(app):
    entries = {}
    for stack, _lid, r in app.resources("AWS::EKS::AccessEntry"):
        entries[stack.rsplit("-team-", 1)[1]] = app.resolver.resolve(stack, r["Properties"])
    assert sorted(entries) == ["applied", "inference", "research"]
    for team, props in entries.items():
        assert props["PrincipalArn"] == app.role(f"kueue-share-team-{team}", "SubmitRole").arn
        [policy] = props["AccessPolicies"]
        assert policy["AccessScope"] == {"Type": "namespace", "Namespaces": [team]}
