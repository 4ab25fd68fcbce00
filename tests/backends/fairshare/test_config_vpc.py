"""``fairshare.vpc``: an existing VPC for the fair-share fleet, from YAML and from Python.

Table-driven like test_config_problems.py: each rule of ``_fairshare_vpc`` /
``_vpc_problems`` has a row whose exact problems (field, value, message, fix) fail
without it, including the id-length boundaries (8 and 17 hex digits).
"""

from __future__ import annotations

import pytest

from cdk_gpu_share.backends.fairshare import network as fairshare_network
from cdk_gpu_share.core.configuration.parse import FairshareConfig, FairshareVpcConfig, parse_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.plan import fleet_plan, format_plan, idle_costs

VPC = "vpc-0123456789abcdef0"
SUBNET_A = "subnet-0123456789abcdef0"
SUBNET_B = "subnet-0fedcba9876543210"
SG = "sg-0123456789abcdef0"
VPC_FIX = "write it as the console shows it, e.g. vpc-0123456789abcdef0"
SUBNET_FIX = "write it as the console shows it, e.g. subnet-0123456789abcdef0"
SG_FIX = "write it as the console shows it, e.g. sg-0123456789abcdef0"
SUBNETS_LIST_FIX = "list the private subnets of the GPU instances, e.g. [subnet-0123456789abcdef0]"
SG_LIST_FIX = "list at least one, e.g. [sg-0123456789abcdef0], or leave security_group_ids out for a new egress-only group"


def config(vpc, **fairshare) -> dict:
    return {
        "teams": [{"name": "team-a", "guarantee": {"g5.xlarge": 1}}],
        "fairshare": {"capacity": {"g5.xlarge": 2}, "vpc": vpc, **fairshare},
    }


def problems(raw) -> list[tuple]:
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    return [(p.field, p.value, p.message, p.fix) for p in err.value.problems]


# ---------------------------------------------------------------------------
# Accepted


@pytest.mark.parametrize(
    ("vpc", "expected"),
    [
        ({"vpc_id": VPC, "subnet_ids": [SUBNET_A]}, FairshareVpcConfig(VPC, (SUBNET_A,), ())),
        ({"vpc_id": VPC, "subnet_ids": [SUBNET_A, SUBNET_B], "security_group_ids": [SG]},
         FairshareVpcConfig(VPC, (SUBNET_A, SUBNET_B), (SG,))),
        # 8 hexadecimal digits: ids of older resources.
        ({"vpc_id": "vpc-0123abcd", "subnet_ids": ["subnet-0123abcd"], "security_group_ids": ["sg-0123abcd"]},
         FairshareVpcConfig("vpc-0123abcd", ("subnet-0123abcd",), ("sg-0123abcd",))),
        # null security groups: the same as leaving them out.
        ({"vpc_id": VPC, "subnet_ids": [SUBNET_A], "security_group_ids": None}, FairshareVpcConfig(VPC, (SUBNET_A,), ())),
    ],
)
def test_a_valid_vpc_is_parsed_into_tuples(vpc, expected):
    parsed = parse_config(config(vpc)).fairshare.vpc
    assert parsed == expected
    assert isinstance(parsed.subnet_ids, tuple) and isinstance(parsed.security_group_ids, tuple)


def test_without_vpc_or_with_null_the_fleet_gets_a_new_vpc():
    assert parse_config(config(None)).fairshare.vpc is None
    raw = config(None)
    del raw["fairshare"]["vpc"]
    assert parse_config(raw).fairshare.vpc is None
    assert FairshareConfig(capacity={"g5.xlarge": 1}).vpc is None


# ---------------------------------------------------------------------------
# Refused: every rule, exact problems


@pytest.mark.parametrize(
    ("vpc", "expected"),
    [
        pytest.param("vpc-1", [("fairshare.vpc", "vpc-1", "must be a mapping, not a string", "write key: value pairs")],
                     id="not-a-mapping"),
        pytest.param({}, [
            ("fairshare.vpc.vpc_id", None, "is required with fairshare.vpc",
             "add vpc_id: vpc-0123456789abcdef0 (the VPC of the subnets)"),
            ("fairshare.vpc.subnet_ids", None, "is required with fairshare.vpc",
             "add subnet_ids: [subnet-0123456789abcdef0] (private subnets with egress)"),
        ], id="both-required"),
        # One missing: only that is reported (the other key is not re-checked as bad).
        pytest.param({"subnet_ids": [SUBNET_A]}, [
            ("fairshare.vpc.vpc_id", None, "is required with fairshare.vpc",
             "add vpc_id: vpc-0123456789abcdef0 (the VPC of the subnets)"),
        ], id="vpc-id-required"),
        pytest.param({"vpc_id": VPC}, [
            ("fairshare.vpc.subnet_ids", None, "is required with fairshare.vpc",
             "add subnet_ids: [subnet-0123456789abcdef0] (private subnets with egress)"),
        ], id="subnets-required"),
        pytest.param({"vpc_id": VPC, "subnet_ids": [SUBNET_A], "subnet_id": SUBNET_A}, [
            ("fairshare.vpc.subnet_id", SUBNET_A, "unknown key", "did you mean 'subnet_ids'?"),
        ], id="unknown-key"),
        pytest.param({"vpc_id": 12345678, "subnet_ids": [SUBNET_A]}, [
            ("fairshare.vpc.vpc_id", 12345678, "is not a VPC id", VPC_FIX),
        ], id="vpc-id-not-a-string"),
        pytest.param({"vpc_id": "vpc-0123abc", "subnet_ids": [SUBNET_A]}, [
            ("fairshare.vpc.vpc_id", "vpc-0123abc", "is not a VPC id", VPC_FIX),
        ], id="vpc-id-7-digits"),
        pytest.param({"vpc_id": "vpc-0123abcde", "subnet_ids": [SUBNET_A]}, [
            ("fairshare.vpc.vpc_id", "vpc-0123abcde", "is not a VPC id", VPC_FIX),
        ], id="vpc-id-9-digits"),
        pytest.param({"vpc_id": "vpc-0123456789abcdef", "subnet_ids": [SUBNET_A]}, [
            ("fairshare.vpc.vpc_id", "vpc-0123456789abcdef", "is not a VPC id", VPC_FIX),
        ], id="vpc-id-16-digits"),
        pytest.param({"vpc_id": "vpc-0123456789abcdef01", "subnet_ids": [SUBNET_A]}, [
            ("fairshare.vpc.vpc_id", "vpc-0123456789abcdef01", "is not a VPC id", VPC_FIX),
        ], id="vpc-id-18-digits"),
        pytest.param({"vpc_id": "vpc-0123ABCD", "subnet_ids": [SUBNET_A]}, [
            ("fairshare.vpc.vpc_id", "vpc-0123ABCD", "is not a VPC id", VPC_FIX),
        ], id="vpc-id-upper-case"),
        pytest.param({"vpc_id": " " + VPC, "subnet_ids": [SUBNET_A]}, [
            ("fairshare.vpc.vpc_id", " " + VPC, "is not a VPC id", VPC_FIX),
        ], id="vpc-id-leading-space"),
        pytest.param({"vpc_id": VPC + "\n", "subnet_ids": [SUBNET_A]}, [
            ("fairshare.vpc.vpc_id", VPC + "\n", "is not a VPC id", VPC_FIX),
        ], id="vpc-id-trailing-newline"),
        pytest.param({"vpc_id": SUBNET_A, "subnet_ids": [SUBNET_A]}, [
            ("fairshare.vpc.vpc_id", SUBNET_A, "is not a VPC id", VPC_FIX),
        ], id="vpc-id-is-a-subnet"),
        pytest.param({"vpc_id": VPC, "subnet_ids": SUBNET_A}, [
            ("fairshare.vpc.subnet_ids", SUBNET_A, "must be a list of ids, not a string", SUBNETS_LIST_FIX),
        ], id="subnets-a-string"),
        pytest.param({"vpc_id": VPC, "subnet_ids": {"a": SUBNET_A}}, [
            ("fairshare.vpc.subnet_ids", {"a": SUBNET_A}, "must be a list of ids, not a mapping", SUBNETS_LIST_FIX),
        ], id="subnets-a-mapping"),
        pytest.param({"vpc_id": VPC, "subnet_ids": []}, [
            ("fairshare.vpc.subnet_ids", [], "is an empty list", SUBNETS_LIST_FIX),
        ], id="subnets-empty"),
        pytest.param({"vpc_id": VPC, "subnet_ids": None}, [
            ("fairshare.vpc.subnet_ids", None, "must be a list of ids, not null", SUBNETS_LIST_FIX),
        ], id="subnets-null"),
        pytest.param({"vpc_id": VPC, "subnet_ids": [SUBNET_A, "subnet-0123abc", 7, SG]}, [
            ("fairshare.vpc.subnet_ids[1]", "subnet-0123abc", "is not an id like subnet-0123456789abcdef0", SUBNET_FIX),
            ("fairshare.vpc.subnet_ids[2]", 7, "is not an id like subnet-0123456789abcdef0", SUBNET_FIX),
            ("fairshare.vpc.subnet_ids[3]", SG, "is not an id like subnet-0123456789abcdef0", SUBNET_FIX),
        ], id="subnets-bad-items-each-named"),
        pytest.param({"vpc_id": VPC, "subnet_ids": [SUBNET_A, SUBNET_B, SUBNET_A, SUBNET_B, SUBNET_A]}, [
            ("fairshare.vpc.subnet_ids[2]", SUBNET_A, "repeats fairshare.vpc.subnet_ids[0]", "list each id once"),
            ("fairshare.vpc.subnet_ids[3]", SUBNET_B, "repeats fairshare.vpc.subnet_ids[1]", "list each id once"),
            ("fairshare.vpc.subnet_ids[4]", SUBNET_A, "repeats fairshare.vpc.subnet_ids[0]", "list each id once"),
        ], id="subnets-duplicates-name-the-first"),
        pytest.param({"vpc_id": VPC, "subnet_ids": ["subnet-0123abcd", "subnet-0123abcde"]}, [
            ("fairshare.vpc.subnet_ids[1]", "subnet-0123abcde", "is not an id like subnet-0123456789abcdef0", SUBNET_FIX),
        ], id="subnet-9-digits"),
        pytest.param({"vpc_id": VPC, "subnet_ids": [SUBNET_A], "security_group_ids": []}, [
            ("fairshare.vpc.security_group_ids", [], "is an empty list", SG_LIST_FIX),
        ], id="groups-empty"),
        pytest.param({"vpc_id": VPC, "subnet_ids": [SUBNET_A], "security_group_ids": SG}, [
            ("fairshare.vpc.security_group_ids", SG, "must be a list of ids, not a string", SG_LIST_FIX),
        ], id="groups-a-string"),
        pytest.param({"vpc_id": VPC, "subnet_ids": [SUBNET_A], "security_group_ids": ["sg-0123abc", SG, SG, SUBNET_A]}, [
            ("fairshare.vpc.security_group_ids[0]", "sg-0123abc", "is not an id like sg-0123456789abcdef0", SG_FIX),
            ("fairshare.vpc.security_group_ids[2]", SG, "repeats fairshare.vpc.security_group_ids[1]", "list each id once"),
            ("fairshare.vpc.security_group_ids[3]", SUBNET_A, "is not an id like sg-0123456789abcdef0", SG_FIX),
        ], id="groups-bad-items"),
        pytest.param({"vpc_id": "vpc-x", "subnet_ids": [], "security_group_ids": ["sg-x"]}, [
            ("fairshare.vpc.vpc_id", "vpc-x", "is not a VPC id", VPC_FIX),
            ("fairshare.vpc.subnet_ids", [], "is an empty list", SUBNETS_LIST_FIX),
            ("fairshare.vpc.security_group_ids[0]", "sg-x", "is not an id like sg-0123456789abcdef0", SG_FIX),
        ], id="every-problem-at-once"),
    ],
)
def test_bad_vpc_is_refused_naming_field_value_and_fix(vpc, expected):
    assert problems(config(vpc)) == expected


def test_vpc_problems_come_with_the_rest_of_the_section():
    got = problems(config({"vpc_id": "vpc-x", "subnet_ids": [SUBNET_A]}, job_attempts=0))
    assert [p[0] for p in got] == ["fairshare.job_attempts", "fairshare.vpc.vpc_id"]


# ---------------------------------------------------------------------------
# The Python API gets the same rule


def test_python_vpc_takes_lists_as_tuples_and_none_as_no_groups():
    vpc = FairshareVpcConfig(vpc_id=VPC, subnet_ids=[SUBNET_A, SUBNET_B], security_group_ids=[SG])
    assert vpc.subnet_ids == (SUBNET_A, SUBNET_B) and vpc.security_group_ids == (SG,)
    assert FairshareVpcConfig(VPC, [SUBNET_A], None).security_group_ids == ()
    assert FairshareVpcConfig(VPC, (SUBNET_A,)).security_group_ids == ()


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (dict(vpc_id="vpc", subnet_ids=[SUBNET_A]),
         [("FairshareVpcConfig.vpc_id", "vpc", "is not a VPC id", VPC_FIX)]),
        (dict(vpc_id=VPC, subnet_ids=()),
         [("FairshareVpcConfig.subnet_ids", (), "is an empty list", SUBNETS_LIST_FIX)]),
        (dict(vpc_id=VPC, subnet_ids=[SUBNET_A], security_group_ids=[]),
         [("FairshareVpcConfig.security_group_ids", [], "is an empty list", SG_LIST_FIX)]),
        (dict(vpc_id=VPC, subnet_ids=[SUBNET_A, SUBNET_A]),
         [("FairshareVpcConfig.subnet_ids[1]", SUBNET_A, "repeats FairshareVpcConfig.subnet_ids[0]", "list each id once")]),
    ],
)
def test_python_vpc_is_refused_with_the_same_problems(kwargs, expected):
    with pytest.raises(ConfigError) as err:
        FairshareVpcConfig(**kwargs)
    assert [(p.field, p.value, p.message, p.fix) for p in err.value.problems] == expected
    assert str(err.value).startswith("invalid argument")


# ---------------------------------------------------------------------------
# plan: what it costs and where it runs


def test_plan_with_an_existing_vpc_lists_no_nat_gateway():
    own = parse_config(config({"vpc_id": VPC, "subnet_ids": [SUBNET_A, SUBNET_B]}))
    new = parse_config(config(None))
    assert [c["resource"] for c in idle_costs(own)] == ["reclaim Lambda", "job archive"]
    assert [c["resource"] for c in idle_costs(new)] == ["NAT gateway", "reclaim Lambda", "job archive"]
    text = format_plan(fleet_plan(own))
    assert "NAT gateway in the VPC" not in text
    assert (f"  network: your VPC {VPC}: subnets {SUBNET_A}, {SUBNET_B}, a new egress-only security group;"
            " no VPC or NAT gateway is created") in text.splitlines()
    assert "  network: a new VPC (2 AZs, 1 NAT gateway, flow logs); set fairshare.vpc to use yours" in format_plan(
        fleet_plan(new)).splitlines()


def test_plan_names_the_given_security_groups():
    fs = parse_config(config({"vpc_id": VPC, "subnet_ids": [SUBNET_A], "security_group_ids": [SG, "sg-0123abcd"]})).fairshare
    assert fairshare_network(fs) == (f"your VPC {VPC}: subnets {SUBNET_A}, security groups {SG}, sg-0123abcd;"
                                     " no VPC or NAT gateway is created")
    assert fleet_plan(parse_config(config(None)))["backends"]["fairshare"]["network"].startswith("a new VPC")


# ---------------------------------------------------------------------------
# The JSON Schema underlines the same mistakes


@pytest.mark.parametrize(
    ("vpc", "ok"),
    [
        ({"vpc_id": VPC, "subnet_ids": [SUBNET_A], "security_group_ids": [SG]}, True),
        ({"vpc_id": "vpc-0123abcd", "subnet_ids": ["subnet-0123abcd"]}, True),
        ({"subnet_ids": [SUBNET_A]}, False),
        ({"vpc_id": VPC}, False),
        ({"vpc_id": "vpc-0123abc", "subnet_ids": [SUBNET_A]}, False),
        ({"vpc_id": VPC, "subnet_ids": []}, False),
        ({"vpc_id": VPC, "subnet_ids": [SUBNET_A, SUBNET_A]}, False),
        ({"vpc_id": VPC, "subnet_ids": [SUBNET_A], "security_group_ids": [SUBNET_A]}, False),
        ({"vpc_id": VPC, "subnet_ids": [SUBNET_A], "subnet": 1}, False),
    ],
)
def test_schema_agrees_with_the_validator(vpc, ok):
    import jsonschema

    from cdk_gpu_share.core.configuration.schema import platform_schema

    errors = list(jsonschema.Draft202012Validator(platform_schema()).iter_errors(config(vpc)))
    assert (errors == []) is ok, errors
    if ok:
        parse_config(config(vpc))
    else:
        with pytest.raises(ConfigError):
            parse_config(config(vpc))
