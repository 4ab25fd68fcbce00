"""The fair-share fleet in an existing VPC (``fairshare.vpc``): no VPC, no NAT gateway of ours.

The VPC, subnets and security groups are imported by id (``Vpc.from_vpc_attributes``,
``Subnet.from_subnet_id``), so synthesis needs no account and no lookup.
"""

from __future__ import annotations

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Annotations, Match, Template

from cdk_gpu_share.backends.fairshare.construct import FairshareQueue
from cdk_gpu_share.core.configuration.parse import FairshareConfig, FairshareVpcConfig, TeamConfig, parse_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.stacks.app import build_platform
from tests.helpers import ROOT, assert_cfn_lint_clean, assert_nag_clean, new_app, synth

VPC = "vpc-0123456789abcdef0"
SUBNETS = ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"]
GROUPS = ["sg-0123456789abcdef0", "sg-0123abcd"]
NETWORK_TYPES = ["AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::NatGateway", "AWS::EC2::EIP",
                 "AWS::EC2::InternetGateway", "AWS::EC2::RouteTable", "AWS::EC2::FlowLog"]


def _platform(vpc: dict) -> dict:
    raw = yaml.safe_load((ROOT / "platform.yaml").read_text())
    raw["fairshare"]["vpc"] = vpc
    app = new_app()
    build_platform(app, parse_config(raw), checks=False)
    report = synth(app)
    stack = next(s for s in app.node.children if isinstance(s, cdk.Stack) and s.stack_name == "gpu-share-platform")
    return {"app": app, "report": report, "stack": stack, "template": Template.from_stack(stack)}


@pytest.fixture(scope="module")
def with_groups():
    return _platform({"vpc_id": VPC, "subnet_ids": SUBNETS, "security_group_ids": GROUPS})


@pytest.fixture(scope="module")
def without_groups():
    return _platform({"vpc_id": VPC, "subnet_ids": SUBNETS})


def test_compute_environment_runs_in_the_given_subnets_and_security_groups(with_groups):
    t = with_groups["template"]
    t.resource_count_is("AWS::Batch::ComputeEnvironment", 1)
    t.has_resource_properties("AWS::Batch::ComputeEnvironment", {
        "ComputeResources": Match.object_like({"Subnets": SUBNETS, "SecurityGroupIds": GROUPS, "Type": "EC2"}),
    })
    for kind in [*NETWORK_TYPES, "AWS::EC2::SecurityGroup"]:
        t.resource_count_is(kind, 0)


def test_without_security_groups_one_egress_only_group_is_made_in_that_vpc(without_groups):
    t = without_groups["template"]
    groups = t.find_resources("AWS::EC2::SecurityGroup")
    assert len(groups) == 1
    (logical, group), = groups.items()
    assert group["Properties"]["VpcId"] == VPC
    assert "SecurityGroupIngress" not in group["Properties"]
    assert [e["CidrIp"] for e in group["Properties"]["SecurityGroupEgress"]] == ["0.0.0.0/0"]
    t.has_resource_properties("AWS::Batch::ComputeEnvironment", {
        "ComputeResources": Match.object_like({
            "Subnets": SUBNETS, "SecurityGroupIds": [{"Fn::GetAtt": [logical, "GroupId"]}]}),
    })
    for kind in NETWORK_TYPES:
        t.resource_count_is(kind, 0)


@pytest.mark.parametrize("case", ["with_groups", "without_groups"])
def test_existing_vpc_is_nag_and_cfn_lint_clean_and_warns_nothing(case, request):
    built = request.getfixturevalue(case)
    assert_nag_clean(built["report"])
    assert_cfn_lint_clean(built["template"])
    # The imported VPC and subnets would warn (list-token AZs, no route table): acknowledged with
    # reasons, because nothing reads them; any other warning fails here.
    assert Annotations.from_stack(built["stack"]).find_warning("*", Match.any_value()) == []


def test_summary_lists_no_nat_gateway_with_an_existing_vpc(with_groups, capsys):
    from cdk_gpu_share.cli import main

    assert main(["summary", with_groups["app"].outdir]) == 0
    idle = capsys.readouterr().out.split("costs money while idle:")[1]
    assert "NAT gateway" not in idle


def test_vpc_in_python_and_in_config_at_once_is_refused():
    app = new_app()
    stack = cdk.Stack(app, "Fleet")
    other = ec2.Vpc(stack, "Other", max_azs=1, nat_gateways=0)
    config = FairshareConfig(capacity={"g5.xlarge": 1}, vpc=FairshareVpcConfig(VPC, SUBNETS))
    with pytest.raises(ConfigError) as err:
        FairshareQueue(stack, "Fleet", config=config, vpc=other)
    (p,) = err.value.problems
    assert (p.field, p.value, p.message, p.fix) == (
        "vpc", VPC, "is given twice: as vpc and as config.vpc (fairshare.vpc)", "pass one of them")


def test_python_config_vpc_places_a_standalone_fleet():
    app = new_app()
    stack = cdk.Stack(app, "Fleet")
    config = FairshareConfig(capacity={"g5.xlarge": 1},
                             vpc=FairshareVpcConfig(VPC, SUBNETS[:1], security_group_ids=GROUPS[:1]))
    fleet = FairshareQueue(stack, "Fleet", config=config,
                           teams=[TeamConfig(name="team-a", guarantee={"g5.xlarge": 1})])
    assert fleet.vpc.vpc_id == VPC
    t = Template.from_stack(stack)
    t.has_resource_properties("AWS::Batch::ComputeEnvironment", {
        "ComputeResources": Match.object_like({"Subnets": SUBNETS[:1], "SecurityGroupIds": GROUPS[:1]}),
    })
    t.resource_count_is("AWS::EC2::VPC", 0)
