"""Config rules at their edges: the boundary values, the empty and the duplicate, each as a user reads it.

Every test goes through the public entry points (``parse_config`` on a mapping,
``load_config`` on a file) and asserts the problem a user would read: its field path,
the value and the message and fix, so the tests survive a reshuffle of the private
validation helpers. Tables keep one behaviour per row.
"""

from __future__ import annotations

import pytest

from cdk_gpu_share.core.catalog import hyperpod_schema as hp
from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.configuration import parse as cfg
from cdk_gpu_share.core.configuration.parse import Sharing, load_config, parse_config
from cdk_gpu_share.core.errors import ConfigError, Problem

ARN = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456"


def batch() -> dict:
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
        "teams[0] (team-a).guarantee",
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
    names = sorted(t for t in hp.HYPERPOD_INSTANCE_TYPES if instances.lookup(t) is not None)
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
        "teams[0] (research).guarantee",
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
        "teams[0] (research).borrow_limit_percent",
        pct,
        "HyperPod borrow limits run from 0 to 500 percent (no -1)",
        "give a percentage, or leave it out for the service default of 50",
    )


# --- item 5: numbers where numbers are expected ------------------------------------------


WHOLE = "must be a whole number"


@pytest.mark.parametrize(
    "value, message",
    [
        ("1", f"{WHOLE}, not a string"),
        (1.5, WHOLE),
        (True, f"{WHOLE}, not a boolean"),
        (None, f"{WHOLE}, not null"),
        ([1], f"{WHOLE}, not a list"),
        ({"a": 1}, f"{WHOLE}, not a mapping"),
        (float("nan"), "must be a number, not NaN"),
        (float("inf"), "must be a finite number, not infinity"),
    ],
    ids=["string", "fraction", "bool", "null", "list", "mapping", "nan", "inf"],
)
def test_a_whole_number_setting_refuses_non_numbers_and_fractions(value, message):
    p = only_problem(fairshare(job_attempts=value))
    assert (p.field, p.message, p.fix) == ("fairshare.job_attempts", message, "write a whole number such as 1")
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
        (2**31, "must be at most 2,147,483,647", "write a whole number of instances, such as 1"),
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


NUMBER = "write a number such as 96"


@pytest.mark.parametrize(
    "value, message, fix",
    [
        ("96", "must be a number, not a string", NUMBER),
        (True, "must be a number, not a boolean", NUMBER),
        (None, "must be a number, not null", NUMBER),
        ([96], "must be a number, not a list", NUMBER),
        (float("nan"), "must be a number, not NaN", NUMBER),
        (float("inf"), "must be a finite number, not infinity", NUMBER),
        # Out of range: the bound crossed, not the type fix (and 10,000,000, not 1e+07).
        (-0.5, "must be at least 0", "use a value >= 0"),
        (-1, "must be at least 0", "use a value >= 0"),
        (10_000_001, "must be at most 10,000,000", "use a value <= 10000000"),
        (10_000_000.5, "must be at most 10,000,000", "use a value <= 10000000"),
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
@pytest.mark.parametrize("value, message", [(1.5, WHOLE), ("2", f"{WHOLE}, not a string"), (True, f"{WHOLE}, not a boolean")])
def test_whole_resource_counts_refuse_fractions_and_strings(key, value, message):
    raw = hyperpod({"ml.p5.48xlarge": {key: value}})
    p = problems_of(raw)[0]
    assert (p.field, p.message, p.fix) == (
        f"teams[0] (research).guarantee.ml.p5.48xlarge.{key}",
        message,
        "write a whole number such as 1",
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


# --- what a valid config becomes ------------------------------------------------------------


def full_config() -> dict:
    return {
        "platform": {"name": "ml-platform"},
        "teams": [
            {
                "name": "research",
                "description": "Research, 2 GPUs",
                "guarantee": {
                    "ml.p5.48xlarge": {"accelerators": 4, "vcpu": 96.5, "memory_gib": 1024, "mig": {"mig-3g.40gb": 2}},
                    "ml.g5.xlarge": 1,
                    "g5.xlarge": 2,
                },
                "sharing": "lend_and_borrow",
                "borrow_limit_percent": 50,
                "borrow_limit": {"ml.p5.48xlarge": {"accelerators": 8}},
                "in_team_preemption": True,
                "fair_share_weight": 70,
            },
            {"name": "applied", "guarantee": {"ml.g5.xlarge": 1, "g5.xlarge": 1}, "sharing": "reserve"},
            {"name": "serving", "guarantee": {"ml.g5.2xlarge": 1}, "sharing": "lend", "in_team_preemption": False},
        ],
        "batch_quota": {
            "capacity": {"ml.g5.xlarge": 2, "ml.g5.2xlarge": 1},
            "queue_name": "training_queue-1",
            "service_environment_name": "env-1",
            "priority": 1000,
        },
        "hyperpod": {
            "cluster_arn": ARN,
            "capacity": {"ml.p5.48xlarge": 1},
            "fair_share": False,
            "idle_resource_sharing": False,
            "priority_classes": [{"name": "inference", "weight": 100}, {"name": "training", "weight": 0}],
            "scheduler_config_name": "sched-1",
        },
        "fairshare": {
            "capacity": {"g5.xlarge": 3},
            "queue_name": "fs_queue",
            "share_decay_seconds": 604800,
            "compute_reservation": 99,
            "allocation_strategy": "SPOT_CAPACITY_OPTIMIZED",
            "spot": True,
            "min_instances": 10000,
            "job_attempts": 1,
            "reclaim": {
                "enabled": False,
                "schedule_minutes": 1440,
                "dry_run": True,
                "reclaim_after_seconds": 86400,
                "min_runtime_seconds": 0,
            },
        },
    }


def test_every_setting_of_a_full_config_is_kept():
    config = parse_config(full_config(), source="full.yaml")
    assert (config.name, config.source, config.inference) == ("ml-platform", "full.yaml", None)
    research = config.team("research")
    assert research.description == "Research, 2 GPUs"
    assert research.guarantee["ml.p5.48xlarge"] == cfg.Amount(
        accelerators=4, vcpu=96.5, memory_gib=1024.0, mig=(("mig-3g.40gb", 2),)
    )
    assert research.guarantee["ml.g5.xlarge"] == cfg.Amount(instances=1)
    assert (research.sharing, research.borrow_limit_percent, research.in_team_preemption) == (
        Sharing.LEND_AND_BORROW, 50, True
    )
    assert research.borrow_limit == {"ml.p5.48xlarge": cfg.Amount(accelerators=8)}
    assert research.fair_share_weight == 70
    applied, serving = config.team("applied"), config.team("serving")
    assert (applied.sharing, applied.in_team_preemption, applied.fair_share_weight, applied.description) == (
        Sharing.RESERVE, None, None, ""  # in_team_preemption unset: the service default
    )
    assert (serving.sharing, serving.in_team_preemption) == (Sharing.LEND, False)

    assert config.batch_quota == cfg.BatchQuotaConfig(
        capacity={"ml.g5.xlarge": 2, "ml.g5.2xlarge": 1},
        queue_name="training_queue-1",
        service_environment_name="env-1",
        priority=1000,
    )
    assert config.hyperpod == cfg.HyperPodConfig(
        cluster_arn=ARN,
        capacity={"ml.p5.48xlarge": 1},
        fair_share=False,
        idle_resource_sharing=False,
        priority_classes=(cfg.PriorityClass("inference", 100), cfg.PriorityClass("training", 0)),
        scheduler_config_name="sched-1",
    )
    assert config.fairshare == cfg.FairshareConfig(
        capacity={"g5.xlarge": 3},
        queue_name="fs_queue",
        share_decay_seconds=604800,
        compute_reservation=99,
        allocation_strategy="SPOT_CAPACITY_OPTIMIZED",
        spot=True,
        min_instances=10000,
        job_attempts=1,
        reclaim=cfg.ReclaimConfig(
            enabled=False, schedule_minutes=1440, dry_run=True, reclaim_after_seconds=86400, min_runtime_seconds=0
        ),
    )
    assert [t.name for t in config.teams_for("batch_quota")] == ["research", "applied", "serving"]
    assert [t.name for t in config.teams_for("hyperpod")] == ["research"]
    assert [t.name for t in config.teams_for("fairshare")] == ["research", "applied"]
    assert config.backends_of(research) == ["batch_quota", "hyperpod", "fairshare"]
    assert config.backends_of(serving) == ["batch_quota"]


def test_defaults_of_a_minimal_config():
    config = parse_config(
        {
            "teams": [{"name": "a", "guarantee": {"ml.g5.xlarge": 1, "g5.xlarge": 1}}],
            "batch_quota": {"capacity": {"ml.g5.xlarge": 1}},
            "hyperpod": {"cluster_arn": ARN, "capacity": {"ml.p5.48xlarge": 1}},
            "fairshare": {"capacity": {"g5.xlarge": 1}, "reclaim": {}},
        }
    )
    assert config.name == "gpu-share" and config.source is None
    team = config.team("a")
    assert (team.sharing, team.borrow_limit_percent, team.borrow_limit, team.in_team_preemption) == (
        Sharing.LEND_AND_BORROW, None, {}, None
    )
    assert (team.fair_share_weight, team.description) == (None, "")
    assert config.batch_quota == cfg.BatchQuotaConfig(capacity={"ml.g5.xlarge": 1})
    assert config.batch_quota.priority == 1 and config.batch_quota.queue_name is None
    hp_ = config.hyperpod
    assert (hp_.fair_share, hp_.idle_resource_sharing, hp_.priority_classes, hp_.scheduler_config_name) == (
        True, True, (), None
    )
    assert config.teams_for("hyperpod") == []
    assert config.fairshare == cfg.FairshareConfig(capacity={"g5.xlarge": 1})
    assert config.fairshare.reclaim == cfg.ReclaimConfig(
        enabled=True, schedule_minutes=1, dry_run=False, reclaim_after_seconds=0, min_runtime_seconds=0
    )
    assert (config.fairshare.share_decay_seconds, config.fairshare.job_attempts) == (3600, 5)


def test_null_optional_settings_mean_their_defaults():
    raw = full_config()
    research = raw["teams"][0]
    research.update(borrow_limit_percent=None, borrow_limit=None, fair_share_weight=None)
    raw["platform"] = None
    raw["batch_quota"].update(queue_name=None, service_environment_name=None)
    raw["hyperpod"].update(priority_classes=None, scheduler_config_name=None)
    raw["fairshare"].update(queue_name=None, reclaim=None)
    config = parse_config(raw)
    team = config.team("research")
    assert (team.borrow_limit_percent, team.borrow_limit, team.fair_share_weight) == (None, {}, None)
    assert config.name == "gpu-share"
    assert (config.batch_quota.queue_name, config.batch_quota.service_environment_name) == (None, None)
    assert (config.hyperpod.priority_classes, config.hyperpod.scheduler_config_name) == ((), None)
    assert (config.fairshare.queue_name, config.fairshare.reclaim) == (None, cfg.ReclaimConfig())


def test_an_unknown_team_is_a_key_error_naming_it():
    with pytest.raises(KeyError, match="nobody"):
        parse_config(full_config()).team("nobody")


def test_a_platform_name_keeps_its_default_when_invalid_but_other_problems_are_listed():
    raw = full_config()
    raw["platform"] = {"name": "9lives"}
    (p,) = problems_of(raw)
    assert (p.field, p.value) == ("platform.name", "9lives")


@pytest.mark.parametrize(
    "sharing, lends, borrows, batch, hyperpod_",
    [
        ("reserve", False, False, "RESERVE", "DontLend"),
        ("lend", True, False, "LEND", "Lend"),
        ("lend_and_borrow", True, True, "LEND_AND_BORROW", "LendAndBorrow"),
    ],
)
def test_sharing_strategies_map_to_each_service(sharing, lends, borrows, batch, hyperpod_):
    s = Sharing(sharing)
    assert (s.lends, s.borrows, s.batch_strategy, s.hyperpod_strategy) == (lends, borrows, batch, hyperpod_)


@pytest.mark.parametrize(
    "amount, instances_only, gpus, text",
    [
        (cfg.Amount(instances=2), True, 16.0, "2 instances"),
        (cfg.Amount(instances=1), True, 8.0, "1 instance"),
        (cfg.Amount(instances=0), True, 0.0, "0 instances"),
        (cfg.Amount(accelerators=3), False, 3.0, "3 accelerators"),
        (cfg.Amount(instances=1, accelerators=3), False, 3.0, "1 instance, 3 accelerators"),
        (cfg.Amount(vcpu=96.5, memory_gib=1024.0), False, None, "96.5 vCPU, 1024 GiB"),
        (cfg.Amount(instances=1, vcpu=2.0), False, 8.0, "1 instance, 2 vCPU"),
        (cfg.Amount(instances=1, memory_gib=2.0), False, 8.0, "1 instance, 2 GiB"),
        (cfg.Amount(instances=1, mig=(("mig-1g.10gb", 3), ("mig-3g.40gb", 2))), False, 8.0,
         "1 instance, 3x mig-1g.10gb, 2x mig-3g.40gb"),
        (cfg.Amount(), False, None, "nothing"),
    ],
)
def test_an_amount_describes_itself_and_its_gpus(amount, instances_only, gpus, text):
    assert amount.is_instances_only is instances_only
    assert amount.gpus("ml.p5.48xlarge") == gpus
    assert amount.describe() == text


def test_gpus_of_whole_instances_of_an_unknown_type_are_unknown():
    assert cfg.Amount(instances=2).gpus("ml.c5.xlarge") is None
    assert cfg.Amount(accelerators=2).gpus("ml.c5.xlarge") == 2.0
    assert cfg.Amount(instances=2).gpus("g5.12xlarge") == 8.0


def test_check_backend_reports_the_problems_of_teams_on_one_section():
    config = parse_config(batch())
    team = cfg.TeamConfig(name="team a", guarantee={"ml.g5.xlarge": cfg.Amount(instances=5)})
    problems = cfg.check_backend("batch_quota", config.batch_quota, [team])
    assert [(p.field, p.message) for p in problems] == [
        ("teams[0] (team a).name", problems[0].message),
        (
            "batch_quota.capacity.ml.g5.xlarge",
            "the teams' guarantees sum to 5 instances of ml.g5.xlarge, above the 3 the capacity declares",
        ),
    ]
    assert "DNS-1123 label" in problems[0].message and problems[0].fix == "write 'team-a'"
    assert cfg.check_backend("batch_quota", config.batch_quota, list(config.teams)) == []


def test_teams_without_guarantees_are_allowed_on_an_inference_only_platform():
    raw = {
        "teams": [{"name": "search"}],
        "inference": {
            "endpoints": [
                {
                    "name": "small",
                    "instance_type": "ml.p4d.24xlarge",
                    "layout": "half",
                    "models": [
                        {
                            "name": "m",
                            "team": "search",
                            "image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128",
                            "model_data_url": "s3://bucket/m.tar.gz",
                            "profile": "mig-3g.20gb",
                            "memory_mb": 1024,
                        }
                    ],
                }
            ]
        },
    }
    config = parse_config(raw)
    assert config.team("search").guarantee == {}
    assert config.inference is not None
    assert (config.batch_quota, config.hyperpod, config.fairshare) == (None, None, None)


def test_an_inference_example_platform_parses_its_inference_section():
    config = load_config(cfg.Path(__file__).resolve().parents[2] / "examples" / "inference.yaml")
    assert config.inference is not None and config.name == "mig-inference"


def test_a_duplicate_team_is_reported_once_and_left_out():
    raw = batch()
    raw["teams"].append({"name": "team-a", "guarantee": {"ml.g5.xlarge": 5}})
    (p,) = problems_of(raw)  # the duplicate's guarantee of 5 is not summed into the capacity
    assert (p.field, p.value, p.message, p.fix) == (
        "teams[1] (team-a).name", "team-a", "duplicates the name of teams[0]", "give every team a unique name"
    )


def test_a_team_without_a_name_is_left_out_of_the_backend_rules():
    raw = batch()
    raw["teams"].append({"guarantee": {"ml.g5.xlarge": 5}})
    (p,) = problems_of(raw)
    assert p.field == "teams[1].name"


# --- reading files ----------------------------------------------------------------------------


def test_a_directory_is_not_a_readable_config(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    (p,) = info.value.problems
    assert (p.field, p.value, p.message, p.fix) == (
        "config", str(tmp_path), "cannot be read: is a directory",
        "pass the path of a platform config (`gpu-share init` writes one: platform.yaml)",
    )
    assert info.value.source is None


def test_a_missing_file_names_the_path(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(str(tmp_path / "nope.yaml"))
    (p,) = info.value.problems
    assert (p.field, p.value, p.message, p.fix) == (
        "config", str(tmp_path / "nope.yaml"), "file not found",
        "pass the path of a platform config (`gpu-share init` writes one: platform.yaml)",
    )


def test_a_non_utf8_file_names_the_byte(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"teams: caf\xe9\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    (p,) = info.value.problems
    assert (p.field, p.value, p.message, p.fix) == (
        "config", str(path), "is not UTF-8 text (byte 10)", "save the file as UTF-8"
    )


@pytest.mark.parametrize(
    "text, field, message",
    [
        (
            "teams: [a\n",
            "line 2, column 1",
            "is not valid YAML: expected ',' or ']', but got '<stream end>'"
            " (while parsing a flow sequence at line 1, column 8)",
        ),
        ("a: b: c\n", "line 1, column 5", "is not valid YAML: mapping values are not allowed here"),
        ("teams:\n\t- a\n", "line 2, column 1", "is not valid YAML: found character '\\t' that cannot start any token"),
    ],
)
def test_invalid_yaml_names_the_file_line_and_column(tmp_path, text, field, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    (p,) = info.value.problems
    assert (p.field, p.value, p.message, p.fix) == (field, None, message, "fix the indentation or quoting there")
    # The file is named once, as the error's source: "invalid configuration in <path>: line 2, ..."
    assert info.value.source == str(path)
    assert str(info.value).startswith(f"invalid configuration in {path}: {field}: {message}")


def test_a_yaml_file_is_validated_with_its_path_as_source(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("teams:\n  - name: team-a\n    guarantee: {ml.g5.xlarge: 1}\nbatch_quota:\n  capacity: {ml.g5.xlarge: 3}\n")
    config = load_config(path)
    assert config.source == str(path) and config.batch_quota.capacity == {"ml.g5.xlarge": 3}


def test_a_sum_within_the_rounding_tolerance_of_the_capacity_is_accepted():
    # Sums of fractional vCPU are floats: 1e-9 over the capacity is rounding, not a breach.
    parse_config(hyperpod({"ml.p5.48xlarge": {"vcpu": 192.000000001}}))
    p = only_problem(hyperpod({"ml.p5.48xlarge": {"vcpu": 192.00001}}))
    assert p.message == (
        "the teams' guarantees sum to 192 vcpu of ml.p5.48xlarge, above the 192 the capacity declares"
    )


@pytest.mark.parametrize("instance_type", ["ml.c5.2xlarge", "ml.m5.xlarge", "ml.t3.medium"])
def test_a_hyperpod_type_without_a_gpu_is_refused(instance_type):
    # HyperPod's schema takes CPU types; a GPU quota on one would plan 0 GPUs.
    p = only_problem(hyperpod({instance_type: {"instances": 1}}, capacity={instance_type: 1}))
    assert (p.field, p.value, p.message) == (f"hyperpod.capacity.{instance_type}", instance_type, "has no GPU")
    assert p.fix == "use a GPU instance type such as ml.g5.xlarge or ml.p5.48xlarge"


def test_every_capacity_entry_is_checked_after_a_wrong_prefix():
    raw = batch()
    raw["batch_quota"]["capacity"] = {"g5.xlarge": 1, "ml.g5.xlarge": 0, "ml.g5.2xlarge": 1}
    assert [(p.field, p.message) for p in problems_of(raw)] == [
        ("batch_quota.capacity.g5.xlarge", "is not a SageMaker instance type"),
        ("batch_quota.capacity.ml.g5.xlarge", "must be at least 1"),
    ]
    raw = fairshare()
    raw["fairshare"]["capacity"] = {"ml.g5.xlarge": 1, "g5.xlarge": 0}
    assert [(p.field, p.message) for p in problems_of(raw)] == [
        ("fairshare.capacity.ml.g5.xlarge", "is a SageMaker type; this fleet runs EC2 instances"),
        ("fairshare.capacity.g5.xlarge", "must be at least 1"),
    ]


def test_a_team_without_the_type_does_not_stop_the_sum_of_the_others():
    raw = {
        "teams": [
            {"name": "a", "guarantee": {"ml.g5.xlarge": 1}},
            {"name": "b", "guarantee": {"ml.g5.xlarge": 1, "ml.g5.2xlarge": 2}},
        ],
        "batch_quota": {"capacity": {"ml.g5.xlarge": 2, "ml.g5.2xlarge": 1}},
    }
    p = only_problem(raw)
    assert (p.field, p.message) == (
        "batch_quota.capacity.ml.g5.2xlarge",
        "the teams' guarantees sum to 2 instances of ml.g5.2xlarge, above the 1 the capacity declares",
    )


def test_accelerators_of_two_teams_add_up():
    raw = hyperpod({"ml.p5.48xlarge": {"accelerators": 5}})
    raw["teams"].append({"name": "applied", "guarantee": {"ml.p5.48xlarge": {"accelerators": 4}}})
    assert only_problem(raw).message == (
        "the teams' guarantees sum to 9 accelerators of ml.p5.48xlarge, above the 8 the capacity declares"
    )


def test_a_dimension_a_team_leaves_out_counts_as_zero():
    raw = hyperpod({"ml.p5.48xlarge": {"accelerators": 8, "vcpu": 192, "memory_gib": 2048}})
    raw["teams"].append({"name": "applied", "guarantee": {"ml.p5.48xlarge": {"mig": {"mig-1g.10gb": 0}}}})
    raw["teams"].append({"name": "serving", "guarantee": {"ml.p5.48xlarge": {"instances": 0}}})
    config = parse_config(raw)
    assert config.team("serving").guarantee["ml.p5.48xlarge"] == cfg.Amount(instances=0)


def test_a_yaml_error_without_a_position_names_the_file_and_the_first_line_of_the_error(tmp_path):
    path = tmp_path / "bell.yaml"
    path.write_text("teams: a\x07b\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    (p,) = info.value.problems
    assert (p.field, p.value, p.message, p.fix) == (
        "line 1",
        None,
        "holds the character #x0007, which YAML does not allow",
        "save the file as plain UTF-8 text",
    )
    assert info.value.source == str(path)


def test_a_hyperpod_team_name_of_exactly_51_characters_is_valid():
    name = "a" * 51  # the namespace hyperpod-ns-<name> then has the Kubernetes maximum of 63
    assert parse_config(hyperpod(name=name)).team(name).name == name


def test_a_hyperpod_borrow_limit_on_an_undeclared_type_lists_every_declared_type():
    raw = hyperpod(
        {"ml.p5.48xlarge": 1}, capacity={"ml.p5.48xlarge": 1, "ml.p4d.24xlarge": 1},
        borrow_limit={"ml.p5e.48xlarge": 1},
    )
    assert_problem(
        raw,
        "teams[0] (research).borrow_limit.ml.p5e.48xlarge",
        "ml.p5e.48xlarge",
        "names an instance type the hyperpod capacity does not declare",
        "declare it in hyperpod.capacity or remove it; declared: ml.p5.48xlarge, ml.p4d.24xlarge",
    )


def test_a_section_whose_parser_is_missing_is_reported(monkeypatch):
    monkeypatch.setitem(cfg.EXTRA_SECTIONS, "inference", "cdk_gpu_share.core.no_such_module:parse")
    raw = batch()
    raw["inference"] = {"endpoints": []}
    assert_problem(raw, "inference", "...", "is not supported by this version of cdk-gpu-share", "remove the section")
    raw["inference"] = None  # an empty section is not parsed at all
    parse_config(raw)


@pytest.mark.parametrize(
    "amount, field, message",
    [
        ({"instances": "x"}, "teams[0] (research).guarantee.ml.p5.48xlarge.instances", f"{WHOLE}, not a string"),
        ({"mig": {}}, "teams[0] (research).guarantee.ml.p5.48xlarge", "names no capacity"),
        ({"mig": {"nope": 1}}, "teams[0] (research).guarantee.ml.p5.48xlarge.mig.nope",
         "is not a MIG profile that HyperPod accepts"),
    ],
)
def test_an_amount_with_a_bad_part_is_reported_once(amount, field, message):
    p = only_problem(hyperpod({"ml.p5.48xlarge": amount}))
    assert (p.field, p.message) == (field, message)


def test_mig_profiles_of_an_amount_are_kept_in_name_order():
    raw = hyperpod({"ml.p5.48xlarge": {"mig": {"mig-3g.40gb": 1, "mig-1g.10gb": 2, "mig-2g.20gb": 0}}})
    assert parse_config(raw).team("research").guarantee["ml.p5.48xlarge"].mig == (
        ("mig-1g.10gb", 2), ("mig-2g.20gb", 0), ("mig-3g.40gb", 1)
    )


def test_a_description_of_exactly_1024_characters_is_kept():
    text = "é" * 1024
    assert parse_config(hyperpod(description=text)).team("research").description == text


def test_every_mig_profile_is_checked_after_an_unknown_one():
    raw = hyperpod({"ml.p5.48xlarge": {"mig": {"zzz": 1, "mig-3g.40gb": -1}}})
    where = "teams[0] (research).guarantee.ml.p5.48xlarge.mig"
    assert [(p.field, p.message) for p in problems_of(raw)] == [
        (f"{where}.zzz", "is not a MIG profile that HyperPod accepts"),
        (f"{where}.mig-3g.40gb", "must be at least 0"),
    ]


@pytest.mark.parametrize(
    "classes, expected",
    [
        (0, [("hyperpod.priority_classes", 0, "must be a list", "write - {name: x, weight: 50}")]),
        (
            ["x", {"name": "a", "weight": 101}],
            [
                ("hyperpod.priority_classes[0]", "x", "must be a mapping, not a string", "write key: value pairs"),
                ("hyperpod.priority_classes[1].weight", 101, "must be at most 100", "use a value <= 100"),
            ],
        ),
        ([{"name": "a", "weight": -1}],
         [("hyperpod.priority_classes[0].weight", -1, "must be at least 0", "use a value >= 0")]),
    ],
)
def test_priority_class_problems(classes, expected):
    raw = hyperpod()
    raw["hyperpod"]["priority_classes"] = classes
    assert [(p.field, p.value, p.message, p.fix) for p in problems_of(raw)] == expected


def test_exactly_10_priority_classes_are_valid():
    raw = hyperpod()
    raw["hyperpod"]["priority_classes"] = [{"name": f"c{i}", "weight": i * 10} for i in range(10)]
    classes = parse_config(raw).hyperpod.priority_classes
    assert [(c.name, c.weight) for c in classes] == [(f"c{i}", i * 10) for i in range(10)]


@pytest.mark.parametrize("edge", ["low", "high"])
def test_fairshare_settings_at_both_ends_of_their_range_are_kept(edge):
    values = {
        "share_decay_seconds": (0, 604800),
        "compute_reservation": (0, 99),
        "min_instances": (0, 10000),
        "job_attempts": (1, 10),
    }
    reclaim = {
        "schedule_minutes": (1, 1440),
        "reclaim_after_seconds": (0, 86400),
        "min_runtime_seconds": (0, 86400),
    }
    i = 0 if edge == "low" else 1
    raw = fairshare(**{k: v[i] for k, v in values.items()}, reclaim={k: v[i] for k, v in reclaim.items()})
    section = parse_config(raw).fairshare
    assert {k: getattr(section, k) for k in values} == {k: v[i] for k, v in values.items()}
    assert {k: getattr(section.reclaim, k) for k in reclaim} == {k: v[i] for k, v in reclaim.items()}


@pytest.mark.parametrize("priority", [0, 1000])
def test_batch_queue_priority_at_both_ends_is_kept(priority):
    raw = batch()
    raw["batch_quota"]["priority"] = priority
    assert parse_config(raw).batch_quota.priority == priority


def test_the_source_is_named_when_the_config_is_not_a_mapping():
    with pytest.raises(ConfigError) as info:
        parse_config(["teams"], source="platform.yaml")
    assert info.value.source == "platform.yaml"
    assert str(info.value).startswith("invalid configuration in platform.yaml: config: must be a mapping, not a list")


def test_teams_after_a_duplicate_are_still_checked():
    raw = batch()
    raw["teams"] += [{"name": "team-a", "guarantee": {"ml.g5.xlarge": 1}}, {"name": "team-c", "guarantee": {"ml.g5.xlarge": 3}}]
    assert [(p.field, p.message) for p in problems_of(raw)] == [
        ("teams[1] (team-a).name", "duplicates the name of teams[0]"),
        (
            "batch_quota.capacity.ml.g5.xlarge",
            "the teams' guarantees sum to 4 instances of ml.g5.xlarge, above the 3 the capacity declares",
        ),
    ]


def test_problems_of_the_inference_section_are_reported_with_the_others():
    raw = batch()
    raw["teams"][0]["name"] = "team a"
    raw["inference"] = {"endpoints": []}
    assert [p.field for p in problems_of(raw)] == ["teams[0] (team a).name", "inference.endpoints"]


def test_teams_after_a_nameless_one_are_still_checked():
    raw = batch()
    raw["teams"].insert(0, {"guarantee": {"ml.g5.xlarge": 1}})
    raw["teams"][1]["guarantee"]["ml.g5.xlarge"] = 4
    assert [p.field for p in problems_of(raw)] == ["teams[0].name", "batch_quota.capacity.ml.g5.xlarge"]


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("schedule_minutes", 1441, "must be at most 1,440"),
        ("reclaim_after_seconds", 86401, "must be at most 86,400"),
        ("min_runtime_seconds", 86401, "must be at most 86,400"),
        ("reclaim_after_seconds", -1, "must be at least 0"),
    ],
)
def test_reclaim_settings_beyond_their_range_are_refused(key, value, message):
    p = only_problem(fairshare(reclaim={key: value}))
    assert (p.field, p.value, p.message) == (f"fairshare.reclaim.{key}", value, message)
