"""Who may act as a team (config), HyperPod namespace access, in-team preemption defaults."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from cdk_gpu_share.core.configuration.parse import (
    DEFAULT_MAX_PRIORITY,
    DEFAULT_PRINCIPAL_TAG,
    TeamConfig,
    parse_config,
)
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.plan import fleet_plan, format_plan
from tests.auth.resolve import ROOT, load_app
from tests.auth.test_authorization import EVALUATOR, NODE

BASE = {"platform": {"name": "p"}, "fairshare": {"capacity": {"g5.xlarge": 2}},
        "teams": [{"name": "team-a", "guarantee": {"g5.xlarge": 1}}, {"name": "team-b", "guarantee": {"g5.xlarge": 1}}]}


def _with(**fields):
    raw = json.loads(json.dumps(BASE))
    raw["teams"][0].update(fields)
    return raw


def _problem(raw):
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    [p] = info.value.problems
    return p


def test_dataclass_defaults_are_the_documented_ones():
    team = TeamConfig(name="t", guarantee={})
    assert team.max_priority == DEFAULT_MAX_PRIORITY == 100
    assert team.principal_tag == DEFAULT_PRINCIPAL_TAG and team.assumed_by == ()
    assert team.in_team_preemption is None


@pytest.mark.parametrize("value, message", [(10000, "at most 9,999"), (-1, "at least 0"), ("high", "whole number")])
def test_bad_max_priority_names_field_value_and_fix(value, message):
    p = _problem(_with(max_priority=value))
    assert p.field == "teams[0] (team-a).max_priority" and p.value == value
    assert message in p.message and "0 to 9999" in p.fix


@pytest.mark.parametrize("value", ["arn:aws:iam::111122223333:role/*", "arn:aws:iam::1:role/x", "team-a"])
def test_bad_assumed_by_names_the_entry(value):
    p = _problem(_with(assumed_by=[value]))
    assert p.field == "teams[0] (team-a).assumed_by[0]" and p.value == value and "no wildcards" in p.fix


def test_empty_assumed_by_and_both_ways_at_once_are_refused():
    assert "non-empty list" in _problem(_with(assumed_by=[])).message
    p = _problem(_with(assumed_by=["arn:aws:iam::111122223333:role/ci"], principal_tag="team"))
    assert p.field.endswith(".principal_tag") and "assumed_by" in p.message


def test_bad_eks_cluster_arn():
    raw = yaml.safe_load((ROOT / "examples" / "hyperpod.yaml").read_text())
    raw["hyperpod"]["eks_cluster_arn"] = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456"
    p = _problem(raw)
    assert p.field == "hyperpod.eks_cluster_arn" and "describe-cluster" in p.fix


def _assume(trust: dict, caller: str, context: dict) -> str:
    job = {"requests": [{
        "id": "x", "principal_arn": caller, "action": "sts:AssumeRole", "resources": ["arn:aws:iam::111122223333:role/r"],
        "context": context, "resource_policy": trust,
        "policies": [{"name": "caller", "policy": {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}}]}]}
    out = subprocess.run([str(NODE), str(EVALUATOR)], input=json.dumps(job), capture_output=True, text=True, cwd=ROOT,
                         check=True)
    return json.loads(out.stdout)["results"][0]["decision"]


def test_assumed_by_trusts_exactly_the_named_roles(tmp_path):
    ci = "arn:aws:iam::111122223333:role/team-a-ci"
    sso = "arn:aws:iam::444455556666:role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_TeamA_0123456789abcdef"
    raw = _with(assumed_by=[ci, sso])
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(raw))
    app = load_app(str(path))
    role = app.role("p-team-team-a", "SubmitRole")
    assert _assume(role.trust, ci, {}) == "Allowed"
    assert _assume(role.trust, sso, {}) == "Allowed"
    assert _assume(role.trust, "arn:aws:iam::111122223333:role/someone", {"aws:PrincipalTag/gpu-share:team": "team-a"}) \
        != "Allowed"
    other = app.role("p-team-team-b", "SubmitRole")  # the default: tagged principals of the account
    assert _assume(other.trust, ci, {"aws:PrincipalTag/gpu-share:team": "team-b"}) == "Allowed"
    assert _assume(other.trust, ci, {}) != "Allowed"


@pytest.fixture(scope="module")
def hyperpod():
    return load_app("examples/hyperpod.yaml")


def test_each_hyperpod_team_gets_an_access_entry_to_its_namespace_only(hyperpod):
    entries = {}
    for stack, _lid, r in hyperpod.resources("AWS::EKS::AccessEntry"):
        props = hyperpod.resolver.resolve(stack, r["Properties"])
        entries[stack.rsplit("-team-", 1)[1]] = props
    assert sorted(entries) == ["applied", "inference", "research"]
    for team, props in entries.items():
        assert props["ClusterName"] == "hyperpod-eks" and props["Type"] == "STANDARD"
        assert props["PrincipalArn"] == hyperpod.role(f"hyperpod-share-team-{team}", "SubmitRole").arn
        [policy] = props["AccessPolicies"]
        assert policy["PolicyArn"] == "arn:aws:eks::aws:cluster-access-policy/AmazonEKSEditPolicy"
        assert policy["AccessScope"] == {"Type": "namespace", "Namespaces": [f"hyperpod-ns-{team}"]}


def test_preempt_team_tasks_is_omitted_when_unset(hyperpod):
    quotas = {stack.rsplit("-team-", 1)[1]: r["Properties"]["ComputeQuotaConfig"]
              for stack, _, r in hyperpod.resources("AWS::SageMaker::ComputeQuota")}
    assert quotas["research"]["PreemptTeamTasks"] == "LowerPriority"  # in_team_preemption: true
    assert "PreemptTeamTasks" not in quotas["applied"] and "PreemptTeamTasks" not in quotas["inference"]


def test_plan_says_which_in_team_preemption_applies():
    raw = yaml.safe_load((ROOT / "examples" / "hyperpod.yaml").read_text())
    raw["teams"][1]["in_team_preemption"] = False
    text = format_plan(fleet_plan(parse_config(raw)))
    assert ("in-team preemption: research LowerPriority, applied Never, inference LowerPriority (HyperPod default)"
            in text)
