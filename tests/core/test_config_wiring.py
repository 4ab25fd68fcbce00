"""Values of the config carried end to end: each reaches what it configures, under its own name.

A value parsed but not kept (``hyperpod.eks_cluster_arn``, ``alerts``), or passed on
wrong (the platform name that derived names are built from, a team's field path once an
entry before it was dropped, the suggested team name); a guarantee of whole instances
counted wrong beside another team's resources; and what the Python API gets alone:
``check_backend`` with a TeamConfig or FairshareConfig built in Python, and the
validation of ``Amount`` and ``TeamConfig`` themselves (the YAML path checks an amount
before it builds one; Python callers rely on ``__post_init__``). Every refusal asserts
its field path, value, message and fix.
"""

from __future__ import annotations

import pytest

from cdk_gpu_share.core import validation as V
from cdk_gpu_share.core.configuration import parse as cfg
from cdk_gpu_share.core.configuration.alerts import AlertsConfig
from cdk_gpu_share.core.configuration.parse import Amount, Sharing, TeamConfig, check_backend, parse_config
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
    assert list(cfg.EXTRA_SECTIONS)[:3] == ["inference", "alerts", "security"]
    assert problems(batch(inference={"endpoints": []}, alerts={"emails": ["not-an-address"]})) == [
        ("inference", "...", "is not supported by this version of cdk-gpu-share", "remove the section"),
        ("alerts.emails[0]", "not-an-address", "is not an e-mail address", "write an address such as oncall@example.com"),
    ]


# -- the platform name reaches the names derived from a team's


def test_a_team_name_takes_at_most_63_characters_whatever_the_platform_name():
    # <platform>-team-<team> then fits the 128 characters of a stack name with any platform name.
    raw = batch(platform={"name": "p" * 40})
    raw["teams"][0]["name"] = "a" * 63
    assert parse_config(raw).team("a" * 63)
    raw["teams"][0]["name"] = "a" * 64
    ((field, value, message, fix),) = problems(raw)
    assert field == f"teams[0] ({'a' * 40}...(64 characters)).name" and "at most 63 characters" in message


def test_the_job_definition_name_limit_counts_the_platform_name():
    # Default queue <platform>-fairshare: with a 40-character platform name, <51>-fairshare-<team>-gpu2 is
    # 128 characters with a 60-character team.
    raw = {
        "platform": {"name": "p" * 40},
        "teams": [{"name": "a" * 60, "guarantee": {"g5.xlarge": 1}}],
        "fairshare": {"capacity": {"g5.xlarge": 2}, "queue_name": "q" * 62},
    }
    assert parse_config(raw).team("a" * 60)
    raw["teams"][0]["name"] = "a" * 61
    assert problems(raw) == [
        (
            f"teams[0] ({'a' * 40}...(61 characters)).name",
            "a" * 61,
            "makes its job definition names 129 characters long (queue name, its letters and digits, -gpuN);"
            " Batch takes at most 128",
            "use at most 60 letters and digits, or a shorter fairshare.queue_name",
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


# -- the Python API (check_backend, SharedGpuQuota.add_team) takes a TeamConfig directly: its
# name meets the rule the YAML path applies, on every backend.


@pytest.mark.parametrize(
    "name, field",
    [
        ("team.a", "teams[0] (team.a).name"),
        ("team_a", "teams[0] (team_a).name"),
        ("A-9", "teams[0] (A-9).name"),
        ("a" * 64, f"teams[0] ({'a' * 40}...(64 characters)).name"),
    ],
)
@pytest.mark.parametrize("backend", ["batch_quota", "fairshare"])
def test_check_backend_refuses_a_team_name_that_is_not_a_dns_label(backend, name, field):
    section = parse_config(batch() if backend == "batch_quota" else FAIRSHARE_ONLY).backend(backend)
    it = next(iter(section.capacity))
    team = cfg.TeamConfig(name=name, guarantee={it: 1})
    ((got_field, value, message, fix),) = [(p.field, p.value, p.message, p.fix)
                                           for p in check_backend(backend, section, [team])]
    assert (got_field, value) == (field, name) and "DNS-1123 label" in message and fix.startswith("write '")


@pytest.mark.parametrize("name", ["team-a", "a" * 63, "a-9-z", "0"])
def test_check_backend_accepts_every_dns_label(name):
    section = parse_config(batch()).batch_quota
    assert check_backend("batch_quota", section, [cfg.TeamConfig(name=name, guarantee={"ml.g5.xlarge": 1})]) == []


FAIRSHARE_ONLY = {"platform": {"name": "gpu-share"}, "teams": [{"name": "team-a", "guarantee": {"g5.xlarge": 1}}],
                  "fairshare": {"capacity": {"g5.xlarge": 2}}}


# -- the fix of a team name the stack name cannot hold: the name with each run of other
# characters made a hyphen, hyphens trimmed at the ends, team-a when nothing is left


@pytest.mark.parametrize(
    "name, suggestion",
    [
        ("team a", "team-a"),
        ("Team_A", "team-a"),  # the lower-case name: one rule on every backend
        ("TeamD", "teamd"),
        ("X_team.", "x-team"),  # only hyphens are trimmed
        ("__a__b__", "a-b"),
        ("___", "team-a"),
        ("-a-", "a"),
        ("a" * 64, "a" * 63),
    ],
)
def test_a_team_name_that_is_not_a_dns_label_gets_its_lower_case_label(name, suggestion):
    raw = batch()
    raw["teams"][0]["name"] = name
    assert problems(raw) == [
        (
            f"{V.item('teams', 0, name)}.name",
            name,
            "must be lower-case letters, digits and hyphens, starting and ending with a letter or digit, at most 63"
            " characters (a DNS-1123 label: every backend names resources after the team, Kubernetes namespaces"
            " included)",
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
    # in -gpu96; with a 63-character queue name, 63 + 1 + 4 + 2 leaves 58.
    section = cfg.FairshareConfig(capacity={"x9.huge": 12}, queue_name="q" * 63)
    team = cfg.TeamConfig(name="a" * 58, guarantee={"x9.huge": 1})
    assert check_backend("fairshare", section, [team]) == []
    team = cfg.TeamConfig(name="a" * 59, guarantee={"x9.huge": 1})
    got = [(p.field, p.value, p.message, p.fix) for p in check_backend("fairshare", section, [team])]
    assert got == [
        (
            f"teams[0] ({'a' * 59}).name",
            "a" * 59,
            "makes its job definition names 129 characters long (queue name, its letters and digits, -gpuN);"
            " Batch takes at most 128",
            "use at most 58 letters and digits, or a shorter fairshare.queue_name",
        )
    ]


# -- Amount built in Python: whole floats and a MIG mapping taken, everything else refused

MIG_FIX = 'pass mig={"mig-3g.20gb": 4}'
MIG_MSG = "must map MIG profiles to counts"


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"instances": 2.0}, Amount(instances=2)),
        ({"accelerators": 3.0, "vcpu": 2.5, "memory_gib": 10_000_000}, Amount(accelerators=3, vcpu=2.5, memory_gib=10_000_000)),
        ({"instances": 0, "accelerators": 0, "vcpu": 0, "memory_gib": 0}, Amount(instances=0, accelerators=0, vcpu=0, memory_gib=0)),
        # a mapping is sorted by profile name (not by count, not as given)
        ({"mig": {"mig-3g.40gb": 1, "mig-1g.10gb": 2}}, Amount(mig=(("mig-1g.10gb", 2), ("mig-3g.40gb", 1)))),
        ({"mig": [("mig-3g.40gb", 2.0)]}, Amount(mig=(("mig-3g.40gb", 2),))),
        ({"mig": [["mig-1g.10gb", 0]]}, Amount(mig=(("mig-1g.10gb", 0),))),
    ],
)
def test_an_amount_takes_whole_floats_and_a_mig_mapping(kwargs, expected):
    amount = Amount(**kwargs)
    assert amount == expected
    for name in ("instances", "accelerators"):
        value = getattr(amount, name)
        assert value is None or type(value) is int, (name, value)  # 2.0 is stored as 2
    assert all(type(count) is int for _, count in amount.mig)
    assert type(amount.mig) is tuple


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"instances": -1}, [("Amount.instances", -1, "must be at least 0", "pass instances=N, a whole number >= 0")]),
        ({"accelerators": -2},
         [("Amount.accelerators", -2, "must be at least 0", "pass accelerators=N, a whole number >= 0")]),
        ({"instances": "x"},
         [("Amount.instances", "x", "must be a whole number, not a string", "pass instances=N, a whole number >= 0")]),
        ({"accelerators": 1.5},
         [("Amount.accelerators", 1.5, "must be a whole number", "pass accelerators=N, a whole number >= 0")]),
        ({"vcpu": -1}, [("Amount.vcpu", -1, "must be at least 0", "pass vcpu=N, a number >= 0")]),
        ({"memory_gib": -0.5}, [("Amount.memory_gib", -0.5, "must be at least 0", "pass memory_gib=N, a number >= 0")]),
        ({"memory_gib": 10_000_001},
         [("Amount.memory_gib", 10_000_001, "must be at most 10,000,000", "pass memory_gib=N, a number >= 0")]),
        ({"vcpu": "x"}, [("Amount.vcpu", "x", "must be a number, not a string", "pass vcpu=N, a number >= 0")]),
        ({"mig": 5}, [("Amount.mig", 5, MIG_MSG, MIG_FIX)]),
        ({"mig": "mig-1g.10gb"}, [("Amount.mig", "mig-1g.10gb", MIG_MSG, MIG_FIX)]),
        ({"mig": [("mig-1g.10gb", 1, 2)]}, [("Amount.mig", [("mig-1g.10gb", 1, 2)], MIG_MSG, MIG_FIX)]),
        # a two-character string is not a (profile, count) pair
        ({"mig": ["ab"]}, [("Amount.mig", ["ab"], MIG_MSG, MIG_FIX)]),
        ({"mig": {"mig-1g.10gb": -1}},
         [("Amount.mig.mig-1g.10gb", -1, "must be at least 0", "pass a whole number of partitions")]),
        # a count that is no number is reported, never converted
        ({"mig": {"mig-1g.10gb": "x"}},
         [("Amount.mig.mig-1g.10gb", "x", "must be a whole number, not a string", "pass a whole number of partitions")]),
        ({"mig": {"mig-1g.10gb": True}},
         [("Amount.mig.mig-1g.10gb", True, "must be a whole number, not a boolean", "pass a whole number of partitions")]),
        # profile names of mixed types still sort (by their text), and each bad one is named
        ({"mig": {"mig-1g.10gb": 1, 3: 1}},
         [("Amount.mig[3]", 3, "is not a MIG profile name", 'pass a name such as "mig-3g.20gb"')]),
        ({"instances": -1, "vcpu": -1, "mig": 5},
         [("Amount.instances", -1, "must be at least 0", "pass instances=N, a whole number >= 0"),
          ("Amount.vcpu", -1, "must be at least 0", "pass vcpu=N, a number >= 0"),
          ("Amount.mig", 5, MIG_MSG, MIG_FIX)]),
    ],
)
def test_a_bad_amount_names_field_value_and_fix(kwargs, expected):
    with pytest.raises(ConfigError) as info:
        Amount(**kwargs)
    assert [(p.field, p.value, p.message, p.fix) for p in info.value.problems] == expected
    assert str(info.value).startswith("invalid argument: ")


# -- TeamConfig built in Python: the YAML's shorthand taken, everything else refused

G = {"ml.g5.xlarge": 1}
AMOUNTS_FIX = 'pass {"ml.g5.xlarge": 1} or {"ml.p5.48xlarge": Amount(accelerators=4)}'
SHARING_FIX = 'pass Sharing.LEND or one of "reserve", "lend", "lend_and_borrow"'
T = "TeamConfig('t')"


def test_the_shorthand_of_the_yaml_is_accepted():
    team = TeamConfig(
        name="t",
        guarantee={"ml.g5.xlarge": 2, "ml.p5.48xlarge": {"accelerators": 4}, "ml.p4d.24xlarge": Amount(vcpu=2)},
        sharing="lend_and_borrow",
        borrow_limit={"ml.g5.xlarge": 1.0},
    )
    assert team.guarantee == {
        "ml.g5.xlarge": Amount(instances=2),
        "ml.p5.48xlarge": Amount(accelerators=4),
        "ml.p4d.24xlarge": Amount(vcpu=2),
    }
    assert team.borrow_limit == {"ml.g5.xlarge": Amount(instances=1)}
    assert type(team.borrow_limit["ml.g5.xlarge"].instances) is int
    assert team.sharing is Sharing.LEND_AND_BORROW
    assert TeamConfig(name="t", guarantee=G, sharing="lend").sharing is Sharing.LEND
    defaults = TeamConfig(name="t", guarantee=G, borrow_limit=None, in_team_preemption=False, borrow_limit_percent=-1,
                          fair_share_weight=0, max_priority=0)
    assert (defaults.borrow_limit, defaults.sharing, defaults.in_team_preemption) == ({}, Sharing.LEND_AND_BORROW, False)
    assert (defaults.borrow_limit_percent, defaults.fair_share_weight, defaults.max_priority) == (-1, 0, 0)
    top = TeamConfig(name="t", guarantee=G, borrow_limit_percent=2**31 - 1, fair_share_weight=100, max_priority=9999)
    assert (top.borrow_limit_percent, top.fair_share_weight, top.max_priority) == (2**31 - 1, 100, 9999)


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"name": ""}, [("TeamConfig('').name", "", "must be a non-empty string", 'pass name="team-a"')]),
        ({"name": 5}, [("TeamConfig.name", 5, "must be a non-empty string", 'pass name="team-a"')]),
        ({"guarantee": [("ml.g5.xlarge", 1)]},
         [(f"{T}.guarantee", [("ml.g5.xlarge", 1)], "must be a dict of instance type to amount, not a list", AMOUNTS_FIX)]),
        ({"borrow_limit": 5},
         [(f"{T}.borrow_limit", 5, "must be a dict of instance type to amount, not a number", AMOUNTS_FIX)]),
        ({"guarantee": {1: 1, "ml.g5.xlarge": 1}},
         [(f"{T}.guarantee[1]", 1, "is not an instance type name", 'use a string such as "ml.g5.xlarge"')]),
        # every entry is checked, after a bad one and after an Amount
        ({"guarantee": {1: 1, "a": Amount(instances=1), "b": {"x": 1}, "c": -1}},
         [(f"{T}.guarantee[1]", 1, "is not an instance type name", 'use a string such as "ml.g5.xlarge"'),
          (f"{T}.guarantee['b']", {"x": 1}, "names x, not a field of Amount", "use accelerators, instances, memory_gib, mig, vcpu"),
          (f"{T}.guarantee['c']", -1, "must be at least 0", "pass a whole number of instances, or an Amount")]),
        ({"guarantee": {"ml.g5.xlarge": {"gpus": 1, "cpus": 2}}},
         [(f"{T}.guarantee['ml.g5.xlarge']", {"gpus": 1, "cpus": 2}, "names cpus, gpus, not a field of Amount",
           "use accelerators, instances, memory_gib, mig, vcpu")]),
        # the Amount's own problem, under the team's field path
        ({"guarantee": {"ml.g5.xlarge": {"instances": -1}}},
         [(f"{T}.guarantee['ml.g5.xlarge'].instances", -1, "must be at least 0", "pass instances=N, a whole number >= 0")]),
        # only the leading "Amount" of the Amount's field path is replaced, not a profile of that name
        ({"guarantee": {"ml.p5.48xlarge": {"mig": {"Amount": -1}}}},
         [(f"{T}.guarantee['ml.p5.48xlarge'].mig.Amount", -1, "must be at least 0", "pass a whole number of partitions")]),
        ({"borrow_limit": {"ml.g5.xlarge": {"mig": 5}}},
         [(f"{T}.borrow_limit['ml.g5.xlarge'].mig", 5, "must map MIG profiles to counts", 'pass mig={"mig-3g.20gb": 4}')]),
        ({"guarantee": {"ml.g5.xlarge": -1}},
         [(f"{T}.guarantee['ml.g5.xlarge']", -1, "must be at least 0", "pass a whole number of instances, or an Amount")]),
        ({"guarantee": {"ml.g5.xlarge": 1.5}},
         [(f"{T}.guarantee['ml.g5.xlarge']", 1.5, "must be a whole number", "pass a whole number of instances, or an Amount")]),
        ({"guarantee": {"ml.g5.xlarge": True}},
         [(f"{T}.guarantee['ml.g5.xlarge']", True, "must be an Amount or a whole number of instances, not a boolean",
           "pass 2 or Amount(instances=2)")]),
        ({"guarantee": {"ml.g5.xlarge": "2"}},
         [(f"{T}.guarantee['ml.g5.xlarge']", "2", "must be an Amount or a whole number of instances, not a string",
           "pass 2 or Amount(instances=2)")]),
        ({"sharing": "borrow"}, [(f"{T}.sharing", "borrow", "is not a sharing strategy", SHARING_FIX)]),
        ({"sharing": None}, [(f"{T}.sharing", None, "is not a sharing strategy", SHARING_FIX)]),
        ({"sharing": ["lend"]}, [(f"{T}.sharing", ["lend"], "is not a sharing strategy", SHARING_FIX)]),
        ({"in_team_preemption": "yes"},
         [(f"{T}.in_team_preemption", "yes", "must be True, False or None", "pass a bool, or None for the service's default")]),
        ({"in_team_preemption": 1},
         [(f"{T}.in_team_preemption", 1, "must be True, False or None", "pass a bool, or None for the service's default")]),
        ({"borrow_limit_percent": -2}, [(f"{T}.borrow_limit_percent", -2, "must be at least -1", "use a value >= -1")]),
        ({"borrow_limit_percent": 2**31},
         [(f"{T}.borrow_limit_percent", 2**31, "must be at most 2,147,483,647", "use a value <= 2147483647")]),
        ({"fair_share_weight": -1}, [(f"{T}.fair_share_weight", -1, "must be at least 0", "use a value >= 0")]),
        ({"fair_share_weight": 101}, [(f"{T}.fair_share_weight", 101, "must be at most 100", "use a value <= 100")]),
        ({"max_priority": -1}, [(f"{T}.max_priority", -1, "must be at least 0", "use a value >= 0")]),
        ({"max_priority": 10000}, [(f"{T}.max_priority", 10000, "must be at most 9,999", "use a value <= 9999")]),
        ({"description": 5}, [(f"{T}.description", 5, "must be a string", 'pass description="..."')]),
        ({"sharing": "x", "description": None, "fair_share_weight": 101},
         [(f"{T}.sharing", "x", "is not a sharing strategy", SHARING_FIX),
          (f"{T}.fair_share_weight", 101, "must be at most 100", "use a value <= 100"),
          (f"{T}.description", None, "must be a string", 'pass description="..."')]),
    ],
)
def test_a_bad_team_argument_names_field_value_and_fix(kwargs, expected):
    with pytest.raises(ConfigError) as info:
        TeamConfig(**{"name": "t", "guarantee": G, **kwargs})
    assert [(p.field, p.value, p.message, p.fix) for p in info.value.problems] == expected
    assert str(info.value).startswith("invalid argument")


# -- a guarantee entry in YAML that is empty, text or a boolean: refused, never read as 0 or 1


@pytest.mark.parametrize(
    "amount, message, fix",
    [
        (None, "is empty", "write a number of instances, such as 1, or remove the instance type"),
        ("2", "must be a whole number of instances or a mapping, not a string",
         "write a number such as 1, or {accelerators: 4}"),
        (True, "must be a whole number of instances or a mapping, not a boolean",
         "write a number such as 1, or {accelerators: 4}"),
    ],
)
def test_a_guarantee_entry_that_is_no_amount_names_field_value_and_fix(amount, message, fix):
    raw = batch()
    raw["teams"][0]["guarantee"] = {"ml.g5.xlarge": amount}
    assert problems(raw) == [("teams[0] (team-a).guarantee.ml.g5.xlarge", amount, message, fix)]


# -- a guaranteed type no capacity declares: the did-you-mean comes in the first answer


@pytest.mark.parametrize("typed, message, fix", [
    ("ml.g5.xlargee", "is not a GPU instance type this library knows", "did you mean 'ml.g5.xlarge'?"),
    ("ml.g5.2xlarg", "is not a GPU instance type this library knows",
     "did you mean 'ml.g5.2xlarge'? Then add it to the capacity of batch_quota, hyperpod (ml. types), fairshare (EC2"
     " types) or kueue (EC2 types)"),
    ("ml.p5.48xlarge", "names an instance type that no backend declares in its capacity",
     "add it to the capacity of batch_quota, hyperpod (ml. types), fairshare (EC2 types) or kueue (EC2 types)"),
    ("ml.trn1.2xlarge", "has AWS Trainium or Inferentia accelerators, not GPUs; this library shares NVIDIA GPUs",
     "use a GPU instance type such as ml.g5.xlarge or ml.p5.48xlarge"),
])
def test_an_undeclared_guarantee_gets_the_whole_fix_at_once(typed, message, fix):
    raw = batch()
    raw["teams"][0]["guarantee"] = {typed: 1}
    assert problems(raw) == [(f"teams[0] (team-a).guarantee.{typed}", typed, message, fix)]
