"""Config rules at their edges: the behaviours mutation testing found unchecked (issue 13).

Every test goes through the public entry points (``parse_config`` on a mapping,
``load_config`` on a file) and asserts the problem a user would read: its field path,
the value and the message and fix, so the tests survive a reshuffle of the private
validation helpers. Tables keep one behaviour per row.
"""

from __future__ import annotations

import copy

import pytest

from cdk_gpu_share.core import config as cfg
from cdk_gpu_share.core.config import Sharing, load_config, parse_config
from cdk_gpu_share.core.errors import ConfigError, Problem

ARN = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456"


def batch(**teams_and_capacity) -> dict:
    return {
        "teams": [{"name": "team-a", "guarantee": {"ml.g5.xlarge": 1}}],
        "batch_quota": {"capacity": {"ml.g5.xlarge": 3}},
    }


def hyperpod(guarantee: dict | None = None, capacity: dict | None = None, **team) -> dict:
    return {
        "teams": [{"name": "research", "guarantee": guarantee or {"ml.p5.48xlarge": 1}, **team}],
        "hyperpod": {"cluster_arn": ARN, "capacity": capacity or {"ml.p5.48xlarge": 1}},
    }


def fairshare(**section) -> dict:
    return {
        "teams": [{"name": "team-a", "guarantee": {"g5.xlarge": 1}}],
        "fairshare": {"capacity": {"g5.xlarge": 2}, **section},
    }


def problems_of(raw) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    return info.value.problems


def only_problem(raw) -> Problem:
    problems = problems_of(raw)
    assert len(problems) == 1, [str(p) for p in problems]
    return problems[0]


def assert_problem(raw, field: str, value, message: str, fix: str) -> None:
    """``raw`` has exactly one problem, and it reads exactly so."""
    p = only_problem(raw)
    assert (p.field, p.value, p.message, p.fix) == (field, value, message, fix), str(p)


# --- item 1: MIG slices of a guarantee that lists several profiles ---------------------


MIG_CAPACITY_FIELD = "hyperpod.capacity.ml.p5.48xlarge"


@pytest.mark.parametrize(
    "mig, total",
    [
        ({"mig-3g.40gb": 10, "mig-1g.10gb": 27}, 57),  # 30 + 27: one over the 56 slices of 8 GPUs
        ({"mig-1g.10gb": 27, "mig-3g.40gb": 10}, 57),  # order does not matter
        ({"mig-2g.20gb": 10, "mig-3g.40gb": 9, "mig-1g.10gb": 10}, 57),  # three profiles: 20 + 27 + 10
    ],
)
def test_mig_slices_of_every_profile_count_towards_the_capacity(mig, total):
    raw = hyperpod({"ml.p5.48xlarge": {"mig": mig}})
    assert_problem(
        raw,
        MIG_CAPACITY_FIELD,
        1,
        f"the teams' guarantees sum to {total} mig slices of ml.p5.48xlarge, above the 56 the capacity declares",
        f"raise {MIG_CAPACITY_FIELD} or lower the teams' guarantees",
    )


@pytest.mark.parametrize(
    "mig",
    [
        {"mig-3g.40gb": 10, "mig-1g.10gb": 26},  # exactly 56 slices: the whole capacity
        {"mig-7g.80gb": 8},
        {"mig-4g.40gb": 8, "mig-3g.40gb": 8},
    ],
)
def test_mig_slices_exactly_at_the_capacity_are_accepted(mig):
    config = parse_config(hyperpod({"ml.p5.48xlarge": {"mig": mig}}))
    assert dict(config.team("research").guarantee["ml.p5.48xlarge"].mig) == mig


def test_mig_slices_of_two_teams_add_up():
    raw = hyperpod({"ml.p5.48xlarge": {"mig": {"mig-3g.40gb": 8, "mig-1g.10gb": 4}}})
    raw["teams"].append({"name": "applied", "guarantee": {"ml.p5.48xlarge": {"mig": {"mig-2g.20gb": 15}}}})
    p = only_problem(raw)
    assert p.message.startswith("the teams' guarantees sum to 58 mig slices of ml.p5.48xlarge")


# --- item 2: Spot and the allocation strategy ----------------------------------------------


def test_spot_with_best_fit_progressive_is_refused():
    assert_problem(
        fairshare(spot=True, allocation_strategy="BEST_FIT_PROGRESSIVE"),
        "fairshare.allocation_strategy",
        "BEST_FIT_PROGRESSIVE",
        "is not a Spot allocation strategy",
        "use SPOT_PRICE_CAPACITY_OPTIMIZED with spot: true",
    )


@pytest.mark.parametrize("strategy", ["SPOT_CAPACITY_OPTIMIZED", "SPOT_PRICE_CAPACITY_OPTIMIZED"])
def test_spot_with_a_spot_strategy_is_accepted(strategy):
    section = parse_config(fairshare(spot=True, allocation_strategy=strategy)).fairshare
    assert (section.spot, section.allocation_strategy) == (True, strategy)


def test_spot_without_a_strategy_defaults_to_a_spot_strategy():
    # Batch refuses BEST_FIT_PROGRESSIVE for Spot; the default must not produce it.
    section = parse_config(fairshare(spot=True)).fairshare
    assert (section.spot, section.allocation_strategy) == (True, "SPOT_PRICE_CAPACITY_OPTIMIZED")


@pytest.mark.parametrize(
    "section, strategy",
    [
        ({}, "BEST_FIT_PROGRESSIVE"),
        ({"spot": False}, "BEST_FIT_PROGRESSIVE"),
        ({"spot": False, "allocation_strategy": "BEST_FIT_PROGRESSIVE"}, "BEST_FIT_PROGRESSIVE"),
        ({"allocation_strategy": "SPOT_CAPACITY_OPTIMIZED"}, "SPOT_CAPACITY_OPTIMIZED"),
    ],
)
def test_on_demand_keeps_its_strategy(section, strategy):
    parsed = parse_config(fairshare(**section)).fairshare
    assert (parsed.spot, parsed.allocation_strategy) == (False, strategy)


def test_spot_must_be_a_boolean():
    assert_problem(fairshare(spot="yes"), "fairshare.spot", "yes", "must be true or false", "write true or false")


# --- item 3: both SageMaker backends in one config -----------------------------------------


def both() -> dict:
    return {
        "teams": [
            {"name": "team-a", "guarantee": {"ml.g5.xlarge": 1, "ml.p5.48xlarge": 1}},
            {"name": "team-b", "guarantee": {"ml.g5.xlarge": 2}},
        ],
        "batch_quota": {"capacity": {"ml.g5.xlarge": 3}},
        "hyperpod": {"cluster_arn": ARN, "capacity": {"ml.p5.48xlarge": 2}},
    }


def test_batch_quota_and_hyperpod_on_different_types_are_valid():
    config = parse_config(both())
    assert [t.name for t in config.teams_for("batch_quota")] == ["team-a", "team-b"]
    assert [t.name for t in config.teams_for("hyperpod")] == ["team-a"]
    assert config.backends_of(config.team("team-a")) == ["batch_quota", "hyperpod"]
    assert config.backends_of(config.team("team-b")) == ["batch_quota"]
    assert config.batch_quota.capacity == {"ml.g5.xlarge": 3}
    assert config.hyperpod.capacity == {"ml.p5.48xlarge": 2}


def test_a_type_declared_by_both_sagemaker_backends_is_refused():
    raw = both()
    raw["hyperpod"]["capacity"]["ml.g5.xlarge"] = 3
    problems = problems_of(raw)
    declared_twice = [p for p in problems if p.field == "hyperpod.capacity.ml.g5.xlarge"]
    assert [(p.value, p.message, p.fix) for p in declared_twice] == [
        (
            "ml.g5.xlarge",
            "is declared by batch_quota too; a guarantee must map to one fleet",
            "declare each instance type in one backend only",
        )
    ]


# --- item 4: quota limits exactly at the boundary -------------------------------------------


G5 = ["ml.g5.xlarge", "ml.g5.2xlarge", "ml.g5.4xlarge", "ml.g5.8xlarge", "ml.g5.12xlarge", "ml.g5.16xlarge"]


def batch_with_types(n: int) -> dict:
    return {
        "teams": [{"name": "team-a", "guarantee": {t: 1 for t in G5[:n]}}],
        "batch_quota": {"capacity": {t: 1 for t in G5[:n]}},
    }


def test_a_quota_share_with_exactly_5_capacity_limits_is_valid():
    assert len(parse_config(batch_with_types(5)).team("team-a").guarantee) == 5


def test_a_quota_share_with_6_capacity_limits_is_refused():
    assert_problem(
        batch_with_types(6),
        "teams (team-a).guarantee",
        sorted(G5),
        "a quota share takes 1 to 5 capacity limits, this names 6 instance types of batch_quota",
        "keep at most 5 instance types",
    )


def batch_with_teams(n: int) -> dict:
    return {
        "teams": [{"name": f"t{i}", "guarantee": {"ml.g5.xlarge": 1}} for i in range(n)],
        "batch_quota": {"capacity": {"ml.g5.xlarge": n}},
    }


def test_a_queue_with_exactly_20_quota_shares_is_valid():
    assert len(parse_config(batch_with_teams(20)).teams_for("batch_quota")) == 20


def test_a_queue_with_21_quota_shares_is_refused():
    assert_problem(
        batch_with_teams(21),
        "batch_quota",
        "21 teams",
        "a job queue holds at most 20 quota shares",
        "split the teams over two platforms or merge small teams",
    )


def guarantee_at(capacity: dict, guarantee: dict) -> dict:
    return {
        "teams": [{"name": "team-a", "guarantee": guarantee}],
        "batch_quota": {"capacity": capacity},
    }


def test_guarantees_exactly_at_the_capacity_are_valid():
    raw = guarantee_at({"ml.g5.xlarge": 3}, {"ml.g5.xlarge": 3})
    assert parse_config(raw).team("team-a").guarantee["ml.g5.xlarge"].instances == 3


def test_guarantees_one_above_the_capacity_are_refused():
    assert_problem(
        guarantee_at({"ml.g5.xlarge": 3}, {"ml.g5.xlarge": 4}),
        "batch_quota.capacity.ml.g5.xlarge",
        3,
        "the teams' guarantees sum to 4 instances of ml.g5.xlarge, above the 3 the capacity declares",
        "raise batch_quota.capacity.ml.g5.xlarge or lower the teams' guarantees",
    )


# HyperPod resources: each dimension against the instance type's catalogue numbers
# (ml.p5.48xlarge: 8 GPUs, 192 vCPU, 2048 GiB) times the declared count.
@pytest.mark.parametrize(
    "amount, dim, total, limit",
    [
        ({"accelerators": 9}, "accelerators", "9", "8"),
        ({"vcpu": 192.5}, "vcpu", "192.5", "192"),
        ({"memory_gib": 2049}, "memory_gib", "2049", "2048"),
        ({"instances": 2}, "instances", "2", "1"),
    ],
)
def test_hyperpod_resources_one_above_the_capacity_are_refused(amount, dim, total, limit):
    assert_problem(
        hyperpod({"ml.p5.48xlarge": amount}),
        MIG_CAPACITY_FIELD,
        1,
        f"the teams' guarantees sum to {total} {dim} of ml.p5.48xlarge, above the {limit} the capacity declares",
        f"raise {MIG_CAPACITY_FIELD} or lower the teams' guarantees",
    )


@pytest.mark.parametrize(
    "amount",
    [{"accelerators": 8}, {"vcpu": 192}, {"memory_gib": 2048}, {"instances": 1},
     {"accelerators": 8, "vcpu": 192, "memory_gib": 2048}],
)
def test_hyperpod_resources_exactly_at_the_capacity_are_valid(amount):
    parse_config(hyperpod({"ml.p5.48xlarge": amount}))


def test_hyperpod_resources_of_two_teams_add_up_per_dimension():
    raw = hyperpod({"ml.p5.48xlarge": {"accelerators": 4, "vcpu": 100, "memory_gib": 1000}})
    raw["teams"].append(
        {"name": "applied", "guarantee": {"ml.p5.48xlarge": {"accelerators": 4, "vcpu": 93, "memory_gib": 1049}}}
    )
    messages = sorted(p.message for p in problems_of(raw))
    assert messages == [
        "the teams' guarantees sum to 193 vcpu of ml.p5.48xlarge, above the 192 the capacity declares",
        "the teams' guarantees sum to 2049 memory_gib of ml.p5.48xlarge, above the 2048 the capacity declares",
    ]


def hyperpod_entries(types: int, mig_profiles: int) -> dict:
    """A HyperPod guarantee of ``types`` instance types, the first with ``mig_profiles`` MIG profiles."""
    names = sorted(cfg.hp.HYPERPOD_INSTANCE_TYPES)
    chosen = ["ml.p5.48xlarge"] + [t for t in names if t != "ml.p5.48xlarge"][: types - 1]
    mig = dict(list({"mig-1g.10gb": 1, "mig-2g.20gb": 1, "mig-3g.40gb": 1, "mig-4g.40gb": 1}.items())[:mig_profiles])
    guarantee = {t: 1 for t in chosen}
    if mig_profiles:
        guarantee["ml.p5.48xlarge"] = {"mig": mig}
    return {
        "teams": [{"name": "research", "guarantee": guarantee}],
        "hyperpod": {"cluster_arn": ARN, "capacity": {t: 1 for t in chosen}},
    }


@pytest.mark.parametrize(
    "types, mig_profiles",
    [(15, 0), (15, 1), (14, 2), (13, 3), (12, 4)],  # exactly 15 resource entries
)
def test_a_compute_quota_with_exactly_15_resource_entries_is_valid(types, mig_profiles):
    parse_config(hyperpod_entries(types, mig_profiles))


@pytest.mark.parametrize("types, mig_profiles", [(16, 0), (16, 1), (15, 2), (14, 3), (13, 4)])  # 16 entries
def test_a_compute_quota_with_16_resource_entries_is_refused(types, mig_profiles):
    raw = hyperpod_entries(types, mig_profiles)
    p = only_problem(raw)
    assert (p.field, p.message, p.fix) == (
        "teams (research).guarantee",
        "a compute quota takes at most 15 resource entries",
        "guarantee fewer instance types",
    )
    assert p.value == sorted(raw["teams"][0]["guarantee"])


@pytest.mark.parametrize("pct, valid", [(0, True), (500, True), (-1, False), (501, False)])
def test_hyperpod_borrow_limit_percent_bounds(pct, valid):
    raw = hyperpod(borrow_limit_percent=pct)
    if valid:
        assert parse_config(raw).team("research").borrow_limit_percent == pct
        return
    assert_problem(
        raw,
        "teams (research).borrow_limit_percent",
        pct,
        "HyperPod borrow limits run from 0 to 500 percent (no -1)",
        "give a percentage, or leave it out for the service default of 50",
    )


# --- item 5: numbers where numbers are expected ------------------------------------------


WHOLE = "must be a whole number"


@pytest.mark.parametrize(
    "value",
    ["1", 1.5, True, None, [1], {"a": 1}, float("nan"), float("inf")],
    ids=["string", "fraction", "bool", "null", "list", "mapping", "nan", "inf"],
)
def test_a_whole_number_setting_refuses_non_numbers_and_fractions(value):
    p = only_problem(fairshare(job_attempts=value))
    assert (p.field, p.message, p.fix) == ("fairshare.job_attempts", WHOLE, "write an integer such as 1")
    assert p.value is value or p.value == value


@pytest.mark.parametrize("value, expected", [(3.0, 3), (1, 1), (10, 10), (10.0, 10)])
def test_a_whole_number_setting_takes_integral_floats(value, expected):
    attempts = parse_config(fairshare(job_attempts=value)).fairshare.job_attempts
    assert attempts == expected and type(attempts) is int


@pytest.mark.parametrize(
    "value, message, fix",
    [
        (0, "must be at least 1", "use a value >= 1"),
        (11, "must be at most 10", "use a value <= 10"),
        (0.0, "must be at least 1", "use a value >= 1"),
    ],
)
def test_a_whole_number_setting_refuses_values_outside_its_range(value, message, fix):
    assert_problem(fairshare(job_attempts=value), "fairshare.job_attempts", value, message, fix)


@pytest.mark.parametrize(
    "value, message, fix",
    [
        (-1, "must be at least 0", "write a whole number of instances, such as 1"),
        (2**31, f"is too large (at most {2**31 - 1})", "write a whole number of instances, such as 1"),
        (0.5, WHOLE, "write a whole number of instances, such as 1"),
    ],
)
def test_a_guarantee_count_has_bounds_and_names_the_fix(value, message, fix):
    raw = batch()
    raw["teams"][0]["guarantee"]["ml.g5.xlarge"] = value
    p = problems_of(raw)[0]
    assert (p.field, p.value, p.message, p.fix) == ("teams[0] (team-a).guarantee.ml.g5.xlarge", value, message, fix)


def test_the_largest_32_bit_count_is_not_too_large():
    raw = batch()
    raw["teams"][0]["guarantee"]["ml.g5.xlarge"] = 2**31 - 1
    raw["batch_quota"]["capacity"]["ml.g5.xlarge"] = 2**31 - 1
    assert parse_config(raw).batch_quota.capacity == {"ml.g5.xlarge": 2**31 - 1}


NUMBER = ("must be a number", "write a number such as 96")


@pytest.mark.parametrize(
    "value, message, fix",
    [
        ("96", *NUMBER),
        (True, *NUMBER),
        (None, *NUMBER),
        ([96], *NUMBER),
        (float("nan"), *NUMBER),
        (float("inf"), *NUMBER),
        (-0.5, "must not be negative", "use 0 or more"),
        (-1, "must not be negative", "use 0 or more"),
        (10_000_001, "is too large (at most 10,000,000)", "use a value <= 10000000"),
        (10_000_000.5, "is too large (at most 10,000,000)", "use a value <= 10000000"),
    ],
    ids=["string", "bool", "null", "list", "nan", "inf", "negative-fraction", "negative", "too-large", "too-large-float"],
)
def test_a_resource_number_refuses_non_numbers_and_out_of_range(value, message, fix):
    raw = hyperpod({"ml.p5.48xlarge": {"vcpu": value}})
    p = problems_of(raw)[0]
    assert p.field == "teams[0] (research).guarantee.ml.p5.48xlarge.vcpu"
    assert (p.message, p.fix) == (message, fix)
    assert p.value is value or p.value == value


@pytest.mark.parametrize("key", ["vcpu", "memory_gib"])
@pytest.mark.parametrize("value, parsed", [(0, 0.0), (96, 96.0), (0.5, 0.5), (10_000_000, 10_000_000.0)])
def test_a_resource_number_takes_fractions_and_keeps_them(key, value, parsed):
    raw = hyperpod({"ml.p5.48xlarge": {key: value}}, capacity={"ml.p5.48xlarge": 60000})
    got = getattr(parse_config(raw).team("research").guarantee["ml.p5.48xlarge"], key)
    assert got == parsed and type(got) is float


@pytest.mark.parametrize("key", ["instances", "accelerators"])
@pytest.mark.parametrize("value", [1.5, "2", True])
def test_whole_resource_counts_refuse_fractions_and_strings(key, value):
    raw = hyperpod({"ml.p5.48xlarge": {key: value}})
    p = problems_of(raw)[0]
    assert (p.field, p.message, p.fix) == (
        f"teams[0] (research).guarantee.ml.p5.48xlarge.{key}",
        WHOLE,
        "write an integer such as 1",
    )


def test_a_yaml_file_with_a_fraction_of_an_instance_names_the_line_and_value(tmp_path):
    path = tmp_path / "platform.yaml"
    path.write_text(
        "teams:\n  - name: team-a\n    guarantee: {ml.g5.xlarge: 1.5}\nbatch_quota:\n  capacity: {ml.g5.xlarge: 3}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.source == str(path)
    assert str(info.value) == (
        f"invalid configuration in {path}: teams[0] (team-a).guarantee.ml.g5.xlarge: must be a whole number"
        " (got 1.5); write a whole number of instances, such as 1"
    )
