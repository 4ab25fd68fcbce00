"""What parse_config hands from one rule to the next, pinned end to end (issue 13).

Each test here failed to notice a mutant of ``core/config.py``: a value parsed but not
kept (``hyperpod.eks_cluster_arn``, ``alerts``), or passed on wrong (the platform name
that derived names are built from, a team's field path once an entry before it was
dropped, the suggested team name), a guarantee of whole instances counted wrong beside
another team's resources, and the rules the Python API reaches directly
(``check_backend`` with a TeamConfig or FairshareConfig built in Python). Every
refusal asserts its field path, value, message and fix.
"""

from __future__ import annotations

import pytest

from cdk_gpu_share.core import config as cfg
from cdk_gpu_share.core.alerts_config import AlertsConfig
from cdk_gpu_share.core.config import check_backend, parse_config
from cdk_gpu_share.core.errors import ConfigError

ARN = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456"
EKS = "arn:aws:eks:us-east-1:111122223333:cluster/ml-platform"


def batch(**top) -> dict:
    return {
        "teams": [{"name": "team-a", "guarantee": {"ml.g5.xlarge": 1}}],
        "batch_quota": {"capacity": {"ml.g5.xlarge": 3}},
        **top,
    }


def hyperpod(**section) -> dict:
    return {
        "teams": [{"name": "research", "guarantee": {"ml.p5.48xlarge": 1}}],
        "hyperpod": {"cluster_arn": ARN, "capacity": {"ml.p5.48xlarge": 2}, **section},
    }


def problems(raw) -> list[tuple]:
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    return [(p.field, p.value, p.message, p.fix) for p in info.value.problems]


# -- hyperpod.eks_cluster_arn: kept when valid, refused with the fix when not


@pytest.mark.parametrize(
    "value, expected",
    [
        (EKS, EKS),
        ("arn:aws-us-gov:eks:us-gov-west-1:111122223333:cluster/a_b-9", "arn:aws-us-gov:eks:us-gov-west-1:111122223333:cluster/a_b-9"),
        (None, None),
    ],
)
def test_an_eks_cluster_arn_reaches_the_hyperpod_section(value, expected):
    assert parse_config(hyperpod(eks_cluster_arn=value)).hyperpod.eks_cluster_arn == expected
    assert parse_config(hyperpod()).hyperpod.eks_cluster_arn is None


EKS_FIX = (
    "write arn:aws:eks:REGION:ACCOUNT:cluster/NAME (the Orchestrator.Eks.ClusterArn of `aws sagemaker"
    " describe-cluster`)"
)


@pytest.mark.parametrize(
    "value",
    [
        "arn:aws:eks:us-east-1:1111:cluster/ml",  # short account
        ARN,  # the HyperPod cluster's ARN, not its EKS cluster's
        "arn:aws:eks:us-east-1:111122223333:cluster/-ml",
        42,
    ],
)
def test_a_bad_eks_cluster_arn_names_field_value_and_fix(value):
    assert problems(hyperpod(eks_cluster_arn=value)) == [
        ("hyperpod.eks_cluster_arn", value, "is not an EKS cluster ARN", EKS_FIX)
    ]


# -- alerts: the section parsed by its own module, kept on the config


def test_alerts_reach_the_config_without_an_inference_section():
    config = parse_config(batch(alerts={"emails": ["oncall@example.com"]}))
    assert config.alerts == AlertsConfig(emails=("oncall@example.com",))
    assert config.inference is None
    assert parse_config(batch()).alerts is None


def test_alerts_are_parsed_after_a_section_this_version_cannot_parse(monkeypatch):
    # A missing parser for one extra section must not skip the sections after it.
    monkeypatch.setitem(cfg.EXTRA_SECTIONS, "inference", "cdk_gpu_share.core.no_such_module:parse")
    assert list(cfg.EXTRA_SECTIONS) == ["inference", "alerts"]
    assert problems(batch(inference={"endpoints": []}, alerts={"emails": ["not-an-address"]})) == [
        ("inference", "...", "is not supported by this version of cdk-gpu-share", "remove the section"),
        ("alerts.emails[0]", "not-an-address", "is not an e-mail address", "write an address such as oncall@example.com"),
    ]


# -- the platform name reaches the names derived from a team's


def test_the_stack_name_limit_counts_the_platform_name():
    # <platform>-team-<team> takes at most 128 characters: with platform "p", 121 for the team.
    raw = batch(platform={"name": "p"})
    raw["teams"][0]["name"] = "a" * 121
    assert parse_config(raw).team("a" * 121)
    raw["teams"][0]["name"] = "a" * 122
    assert problems(raw) == [
        (
            f"teams[0] ({'a' * 40}...(122 characters)).name",
            "a" * 122,
            "makes the CloudFormation stack name 129 characters long; it takes at most 128",
            "use at most 121 characters",
        )
    ]


def test_the_job_definition_name_limit_counts_the_platform_name():
    # Default queue p-fairshare: p-fairshare-<111 letters>-gpu2 is 128 characters.
    raw = {
        "platform": {"name": "p"},
        "teams": [{"name": "a" * 111, "guarantee": {"g5.xlarge": 1}}],
        "fairshare": {"capacity": {"g5.xlarge": 2}},
    }
    assert parse_config(raw).team("a" * 111)
    raw["teams"][0]["name"] = "a" * 112
    assert problems(raw) == [
        (
            f"teams[0] ({'a' * 40}...(112 characters)).name",
            "a" * 112,
            "makes its job definition names 129 characters long (queue name, its letters and digits, -gpuN);"
            " Batch takes at most 128",
            "use at most 111 letters and digits, or a shorter fairshare.queue_name",
        )
    ]


# -- a team's field path keeps its index when an entry before it is dropped


@pytest.mark.parametrize(
    "dropped, first_problem",
    [
        (None, ("teams[1]", None, "is empty", "give the team a name and a guarantee, or remove the entry")),
        (
            {"name": "team-a", "guarantee": {"ml.g5.xlarge": 1}},
            ("teams[1] (team-a).name", "team-a", "duplicates the name of teams[0]", "give every team a unique name"),
        ),
    ],
)
def test_backend_rules_name_the_team_by_its_index_in_the_file(dropped, first_problem):
    raw = batch()
    raw["teams"] += [dropped, {"name": "team-b", "guarantee": {"ml.g5.xlarge": 1}, "borrow_limit": {"ml.g5.xlarge": 1}}]
    assert problems(raw) == [
        first_problem,
        (
            "teams[2] (team-b).borrow_limit.ml.g5.xlarge",
            "1 instance",
            "Batch quota shares take only a percentage borrow limit",
            "use borrow_limit_percent for batch_quota instance types",
        ),
    ]


# -- the quota share name rule: the YAML path refuses such names earlier (stack name), but
# the Python API (check_backend, SharedGpuQuota.add_team) takes a TeamConfig directly.


@pytest.mark.parametrize(
    "name, field",
    [
        ("team.a", "teams[0] (team.a).name"),
        ("team a", "teams[0] (team a).name"),
        ("a" * 129, f"teams[0] ({'a' * 40}...(129 characters)).name"),
    ],
)
def test_check_backend_refuses_a_team_name_no_quota_share_can_hold(name, field):
    section = parse_config(batch()).batch_quota
    team = cfg.TeamConfig(name=name, guarantee={"ml.g5.xlarge": 1})
    got = [(p.field, p.value, p.message, p.fix) for p in check_backend("batch_quota", section, [team])]
    assert got == [(field, name, "is not a valid quota share name", "use up to 128 letters, digits, hyphens and underscores")]


@pytest.mark.parametrize("name", ["team_a", "a" * 128, "A-9_z"])
def test_check_backend_accepts_every_quota_share_name(name):
    section = parse_config(batch()).batch_quota
    assert check_backend("batch_quota", section, [cfg.TeamConfig(name=name, guarantee={"ml.g5.xlarge": 1})]) == []


# -- the fix of a team name the stack name cannot hold: the name with each run of other
# characters made a hyphen, hyphens trimmed at the ends, team-a when nothing is left


@pytest.mark.parametrize(
    "name, suggestion",
    [
        ("team a", "team-a"),
        ("Team_A", "Team-A"),  # both cases of letters kept
        ("X_team.", "X-team"),  # only hyphens are trimmed
        ("__a__b__", "a-b"),
        ("___", "team-a"),
    ],
)
def test_a_team_name_the_stack_name_cannot_hold_gets_a_suggestion(name, suggestion):
    raw = batch()
    raw["teams"][0]["name"] = name
    assert problems(raw) == [
        (
            f"teams[0] ({name}).name",
            name,
            "may hold only letters, digits and hyphens (it becomes part of the CloudFormation stack name)",
            f"write {suggestion!r}",
        )
    ]


# -- a guarantee of whole instances holds every resource of them: 1 ml.p5.48xlarge is
# 8 GPUs, 192 vCPU, 2048 GiB and 56 MIG slices, added to another team's resources


@pytest.mark.parametrize(
    "amount, total, dim, limit",
    [
        ({"accelerators": 9}, 17, "accelerators", 16),
        ({"vcpu": 193}, 385, "vcpu", 384),
        ({"memory_gib": 2049}, 4097, "memory_gib", 4096),
        ({"mig": {"mig-1g.10gb": 57}}, 113, "mig slices", 112),
    ],
)
def test_whole_instances_count_all_their_resources_beside_another_teams(amount, total, dim, limit):
    raw = hyperpod()
    raw["teams"].append({"name": "applied", "guarantee": {"ml.p5.48xlarge": amount}})
    assert problems(raw) == [
        (
            "hyperpod.capacity.ml.p5.48xlarge",
            2,
            f"the teams' guarantees sum to {total} {dim} of ml.p5.48xlarge, above the {limit} the capacity declares",
            "raise hyperpod.capacity.ml.p5.48xlarge or lower the teams' guarantees",
        )
    ]
    amount = {k: (v - 1 if isinstance(v, int) else {"mig-1g.10gb": 56}) for k, v in amount.items()}
    raw["teams"][1]["guarantee"]["ml.p5.48xlarge"] = amount  # one less: exactly the capacity
    parse_config(raw)


def test_a_fairshare_type_the_catalogue_lacks_counts_as_8_gpus_in_job_definition_names():
    # Only the Python API can build such a section. 12 of them: 96 GPUs, so the names end
    # in -gpu96; the default queue is gpu-share-fairshare: 19 + 1 + 4 + 2 leaves 102.
    section = cfg.FairshareConfig(capacity={"x9.huge": 12})
    team = cfg.TeamConfig(name="a" * 102, guarantee={"x9.huge": 1})
    assert check_backend("fairshare", section, [team]) == []
    team = cfg.TeamConfig(name="a" * 103, guarantee={"x9.huge": 1})
    got = [(p.field, p.value, p.message, p.fix) for p in check_backend("fairshare", section, [team])]
    assert got == [
        (
            f"teams[0] ({'a' * 40}...(103 characters)).name",
            "a" * 103,
            "makes its job definition names 129 characters long (queue name, its letters and digits, -gpuN);"
            " Batch takes at most 128",
            "use at most 102 letters and digits, or a shorter fairshare.queue_name",
        )
    ]
