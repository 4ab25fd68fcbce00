"""Config validation: one test per rule; every message names the field and the value."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cdk_gpu_share.core.catalog import hyperpod_schema as hp
from cdk_gpu_share.core.configuration.parse import Sharing, load_config, parse_config
from cdk_gpu_share.core.errors import ConfigError
from tests.builders import SIX_MISTAKES

ROOT = Path(__file__).resolve().parents[2]

BATCH = {
    "platform": {"name": "gpu-share"},
    "teams": [
        {"name": "team-a", "guarantee": {"ml.g5.xlarge": 1}, "sharing": "lend_and_borrow"},
        {"name": "team-b", "guarantee": {"ml.g5.xlarge": 1}, "sharing": "lend_and_borrow"},
    ],
    "batch_quota": {"capacity": {"ml.g5.xlarge": 3}},
}

HYPERPOD = {
    "teams": [
        {"name": "research", "guarantee": {"ml.p5.48xlarge": 2}, "fair_share_weight": 50},
    ],
    "hyperpod": {
        "cluster_arn": "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456",
        "capacity": {"ml.p5.48xlarge": 4},
    },
}


def problems_of(raw: dict) -> list:
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    return info.value.problems


def one_problem(raw: dict, field_pattern: str):
    problems = problems_of(raw)
    matching = [p for p in problems if re.search(field_pattern, p.field)]
    assert matching, f"no problem on {field_pattern}: {[str(p) for p in problems]}"
    return matching[0]


def edit(base: dict, fn) -> dict:
    raw = copy.deepcopy(base)
    fn(raw)
    return raw


# --- valid configs -----------------------------------------------------------


def test_default_platform_is_valid_and_is_the_aws_example():
    config = load_config(ROOT / "platform.yaml")
    batch = config.teams_for("batch_quota")
    assert [t.name for t in batch] == ["team-a", "team-b", "team-c"]
    assert all(t.guarantee["ml.g5.xlarge"].instances == 1 for t in batch)
    assert all(t.sharing is Sharing.LEND_AND_BORROW for t in batch)
    assert config.batch_quota.capacity == {"ml.g5.xlarge": 3}


def test_hyperpod_example_is_valid():
    config = load_config(ROOT / "examples" / "hyperpod.yaml")
    assert [t.name for t in config.teams_for("hyperpod")] == ["research", "applied", "inference"]
    assert config.hyperpod.priority_classes[0].name == "inference"


def test_defaults_of_a_minimal_team():
    config = parse_config(BATCH)
    team = config.team("team-a")
    assert team.borrow_limit_percent is None
    assert team.in_team_preemption is None  # the service's default (HyperPod: LowerPriority)
    assert team.borrow_limit == {}
    assert (team.max_priority, team.assumed_by, team.principal_tag) == (100, (), "gpu-share:team")


# --- team names --------------------------------------------------------------


def test_duplicate_team_names_are_refused():
    raw = edit(BATCH, lambda r: r["teams"][1].update(name="team-a"))
    p = one_problem(raw, r"^teams\[1\] \(team-a\)\.name$")
    assert p.value == "team-a" and "duplicates" in p.message and "teams[0]" in p.message


def test_hyperpod_team_name_must_be_a_namespace():
    raw = edit(HYPERPOD, lambda r: r["teams"][0].update(name="Research-Team"))
    p = one_problem(raw, r"teams\[\d+\] \(Research-Team\)\.name")
    assert p.value == "Research-Team" and "Kubernetes namespace" in p.message


def test_hyperpod_team_name_longer_than_a_namespace_allows_is_refused():
    name = "a" * 52
    raw = edit(HYPERPOD, lambda r: r["teams"][0].update(name=name))
    p = one_problem(raw, rf"teams\[\d+\] \({name}\)\.name")
    assert p.value == name


@pytest.mark.parametrize("section", ["BATCH", "HYPERPOD"])
def test_a_team_name_meets_the_same_rule_on_every_backend(section):
    # TeamD used to be a valid quota share but not a HyperPod or Kueue name: a config could not move.
    raw = edit(globals()[section], lambda r: r["teams"][0].update(name="TeamD"))
    p = one_problem(raw, r"teams\[\d+\] \(TeamD\)\.name")
    assert "DNS-1123 label" in p.message and p.fix == "write 'teamd'"


# --- capacity ----------------------------------------------------------------


def test_guarantees_above_capacity_are_refused():
    raw = edit(BATCH, lambda r: r["teams"][0]["guarantee"].update({"ml.g5.xlarge": 3}))
    p = one_problem(raw, r"batch_quota\.capacity\.ml\.g5\.xlarge")
    assert p.value == 3 and "sum to 4 instances" in p.message and "above the 3" in p.message


def test_hyperpod_accelerator_guarantees_above_capacity_are_refused():
    raw = edit(HYPERPOD, lambda r: r["teams"][0].update(guarantee={"ml.p5.48xlarge": {"accelerators": 40}}))
    p = one_problem(raw, r"hyperpod\.capacity\.ml\.p5\.48xlarge")
    assert "40 accelerators" in p.message and "32" in p.message


def test_guarantee_on_undeclared_instance_type_is_refused():
    raw = edit(BATCH, lambda r: r["teams"][0]["guarantee"].update({"ml.p5.48xlarge": 1}))
    p = one_problem(raw, r"guarantee\.ml\.p5\.48xlarge")
    assert p.value == "ml.p5.48xlarge" and "no backend declares" in p.message


def test_more_than_20_quota_shares_per_queue_are_refused():
    def many(r):
        r["teams"] = [{"name": f"t{i}", "guarantee": {"ml.g5.xlarge": 1}} for i in range(21)]
        r["batch_quota"]["capacity"] = {"ml.g5.xlarge": 21}

    p = one_problem(edit(BATCH, many), r"^batch_quota$")
    assert p.value == "21 teams" and "at most 20 quota shares" in p.message


def test_more_than_5_capacity_limits_per_share_are_refused():
    types = ["ml.g5.xlarge", "ml.g5.2xlarge", "ml.g5.4xlarge", "ml.g5.8xlarge", "ml.g5.12xlarge", "ml.g5.16xlarge"]

    def six(r):
        r["batch_quota"]["capacity"] = {t: 2 for t in types}
        r["teams"][0]["guarantee"] = {t: 1 for t in types}

    p = one_problem(edit(BATCH, six), r"teams\[\d+\] \(team-a\)\.guarantee$")
    assert "1 to 5 capacity limits" in p.message and "names 6" in p.message


def test_batch_guarantee_of_zero_instances_is_refused():
    raw = edit(BATCH, lambda r: r["teams"][0]["guarantee"].update({"ml.g5.xlarge": 0}))
    p = one_problem(raw, r"teams\[\d+\] \(team-a\)\.guarantee\.ml\.g5\.xlarge")
    assert p.value == 0 and "at least 1 instance" in p.message


def test_batch_guarantee_in_accelerators_is_refused():
    raw = edit(BATCH, lambda r: r["teams"][0]["guarantee"].update({"ml.g5.xlarge": {"accelerators": 1}}))
    p = one_problem(raw, r"teams\[\d+\] \(team-a\)\.guarantee\.ml\.g5\.xlarge")
    assert "whole instances" in p.message


# --- borrowing ---------------------------------------------------------------


@pytest.mark.parametrize("sharing", ["reserve", "lend"])
def test_borrow_limit_percent_needs_a_strategy_that_borrows(sharing):
    raw = edit(BATCH, lambda r: r["teams"][0].update(sharing=sharing, borrow_limit_percent=50))
    p = one_problem(raw, r"teams\[0\] \(team-a\)\.borrow_limit_percent")
    assert p.value == 50 and sharing in p.message and "lend_and_borrow" in p.fix


def test_absolute_borrow_limit_needs_a_strategy_that_borrows():
    def fn(r):
        r["teams"][0].update(sharing="lend", borrow_limit={"ml.p5.48xlarge": {"accelerators": 8}})

    p = one_problem(edit(HYPERPOD, fn), r"teams\[0\] \(research\)\.borrow_limit$")
    assert "never borrows" in p.message


def test_batch_borrow_limit_below_minus_one_is_refused():
    raw = edit(BATCH, lambda r: r["teams"][0].update(borrow_limit_percent=-2))
    p = one_problem(raw, r"borrow_limit_percent")
    assert p.value == -2 and "-1 for unlimited" in p.fix


def test_batch_borrow_limit_minus_one_and_positive_are_accepted():
    raw = edit(BATCH, lambda r: (r["teams"][0].update(borrow_limit_percent=-1), r["teams"][1].update(borrow_limit_percent=200)))
    config = parse_config(raw)
    assert config.team("team-a").borrow_limit_percent == -1
    assert config.team("team-b").borrow_limit_percent == 200


def test_hyperpod_borrow_limit_has_no_unlimited_value():
    raw = edit(HYPERPOD, lambda r: r["teams"][0].update(borrow_limit_percent=-1))
    p = one_problem(raw, r"teams\[\d+\] \(research\)\.borrow_limit_percent")
    assert p.value == -1 and "0 to 500" in p.message


def test_batch_share_refuses_absolute_borrow_limits():
    raw = edit(BATCH, lambda r: r["teams"][0].update(borrow_limit={"ml.g5.xlarge": 1}))
    p = one_problem(raw, r"teams\[\d+\] \(team-a\)\.borrow_limit\.ml\.g5\.xlarge")
    assert "percentage" in p.message


def test_unknown_sharing_strategy_is_refused():
    raw = edit(BATCH, lambda r: r["teams"][0].update(sharing="borrow"))
    p = one_problem(raw, r"\.sharing$")
    assert p.value == "borrow" and "lend_and_borrow" in p.fix


# --- HyperPod ------------------------------------------------------------------


@pytest.mark.parametrize("weight", [-1, 101])
def test_fair_share_weight_out_of_range_is_refused(weight):
    raw = edit(HYPERPOD, lambda r: r["teams"][0].update(fair_share_weight=weight))
    p = one_problem(raw, r"fair_share_weight")
    assert p.value == weight and "0 to 100" in p.fix


def test_more_than_10_priority_classes_are_refused():
    classes = [{"name": f"p{i}", "weight": i} for i in range(11)]
    raw = edit(HYPERPOD, lambda r: r["hyperpod"].update(priority_classes=classes))
    p = one_problem(raw, r"hyperpod\.priority_classes$")
    assert p.value == "11 classes" and "at most 10" in p.message


def test_priority_class_name_must_be_valid():
    raw = edit(HYPERPOD, lambda r: r["hyperpod"].update(priority_classes=[{"name": "High_Priority", "weight": 90}]))
    p = one_problem(raw, r"priority_classes\[0\]\.name")
    assert p.value == "High_Priority"


def test_priority_class_weight_above_100_is_refused():
    raw = edit(HYPERPOD, lambda r: r["hyperpod"].update(priority_classes=[{"name": "high", "weight": 150}]))
    p = one_problem(raw, r"priority_classes\[0\]\.weight")
    assert p.value == 150


def test_duplicate_priority_class_is_refused():
    classes = [{"name": "high", "weight": 90}, {"name": "high", "weight": 10}]
    raw = edit(HYPERPOD, lambda r: r["hyperpod"].update(priority_classes=classes))
    p = one_problem(raw, r"priority_classes\[1\]\.name")
    assert "duplicate" in p.message


def test_hyperpod_instance_type_must_be_accepted_by_the_service():
    raw = edit(HYPERPOD, lambda r: r["hyperpod"].update(capacity={"ml.p5.48xlarge": 4, "ml.p3.2xlarge": 1}))
    p = one_problem(raw, r"hyperpod\.capacity\.ml\.p3\.2xlarge")
    assert p.value == "ml.p3.2xlarge" and "HyperPod accepts" in p.message


def test_mig_profile_unknown_to_hyperpod_is_refused():
    raw = edit(HYPERPOD, lambda r: r["teams"][0].update(guarantee={"ml.p5.48xlarge": {"mig": {"mig-3g.40gb+me": 1}}}))
    p = one_problem(raw, r"mig\.mig-3g\.40gb\+me")
    assert "HyperPod accepts" in p.message


def test_mig_profile_of_another_gpu_is_refused():
    raw = edit(HYPERPOD, lambda r: r["teams"][0].update(guarantee={"ml.p5.48xlarge": {"mig": {"mig-3g.20gb": 2}}}))
    p = one_problem(raw, r"guarantee\.ml\.p5\.48xlarge\.mig\.mig-3g\.20gb")
    assert "H100" in p.message and "gpu-share mig layouts" in p.fix


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:sagemaker:us-east-1:1111:cluster/abcdef123456",
        "arn:aws:sagemaker:us-east-1:111122223333:cluster/ABCDEF123456",
        "arn:aws:eks:us-east-1:111122223333:cluster/abcdef123456",
        None,
    ],
)
def test_cluster_arn_must_have_the_right_form(arn):
    raw = edit(HYPERPOD, lambda r: r["hyperpod"].update(cluster_arn=arn))
    p = one_problem(raw, r"hyperpod\.cluster_arn")
    assert p.value == arn and "12-digit account" in p.fix


# --- structure -----------------------------------------------------------------


def test_unknown_key_suggests_the_closest():
    raw = edit(BATCH, lambda r: r["teams"][0].update(borow_limit_percent=10))
    p = one_problem(raw, r"borow_limit_percent")
    assert "borrow_limit_percent" in p.fix


def test_a_config_without_backend_is_refused():
    raw = {"teams": [{"name": "a", "guarantee": {"ml.g5.xlarge": 1}}]}
    problems = problems_of(raw)
    assert any("declares no backend" in p.message for p in problems)


def test_every_problem_is_reported_at_once():
    def many(r):
        r["teams"][0].update(sharing="reserve", borrow_limit_percent=10)
        r["teams"][1].update(name="team-a")
        r["batch_quota"]["capacity"]["ml.g5.xlarge"] = 0

    problems = problems_of(edit(BATCH, many))
    fields = {p.field for p in problems}
    assert len(problems) >= 3, [str(p) for p in problems]
    assert "teams[1] (team-a).name" in fields
    assert any(f.endswith("borrow_limit_percent") for f in fields)
    assert "batch_quota.capacity.ml.g5.xlarge" in fields


def test_message_names_field_value_and_fix():
    raw = edit(BATCH, lambda r: r["teams"][0].update(borrow_limit_percent=-5))
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    text = str(info.value)
    assert "teams[0] (team-a).borrow_limit_percent" in text and "-5" in text and "use -1" in text


def test_invalid_yaml_names_the_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("teams:\n  - name: a\n   guarantee: {}\n")
    with pytest.raises(ConfigError, match=r"line 3"):
        load_config(bad)


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "nope.yaml")


def test_schema_copy_matches_the_installed_cfn_lint_schema():
    import cfnlint

    base = Path(cfnlint.__file__).parent / "data" / "schemas"
    index = json.loads((base / "providers" / "us-east-1.json").read_text())
    schema = json.loads((base / "resources" / f"{index['AWS::SageMaker::ComputeQuota']}.json").read_text())
    d = schema["definitions"]
    assert set(d["ComputeQuotaResourceConfig"]["properties"]["InstanceType"]["enum"]) == hp.HYPERPOD_INSTANCE_TYPES
    assert set(d["AcceleratorPartitionConfig"]["properties"]["Type"]["enum"]) == hp.HYPERPOD_MIG_PROFILES
    assert d["ComputeQuotaTarget"]["properties"]["TeamName"]["pattern"] == hp.TEAM_NAME_PATTERN


# --- the CLI -------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cdk_gpu_share.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_validate_reports_six_mistakes_and_exits_2(tmp_path):
    path = tmp_path / "six.yaml"
    path.write_text(SIX_MISTAKES)
    result = run_cli("validate", str(path))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip().startswith("- ")]
    text = result.stderr
    for needle in ("borrow_limit_percent", "teams[1] (team-a).name", "batch_quota.capacity.ml.g5.xlarge", "-3", "300", "cluster_arn"):
        assert needle in text, needle
    assert len(lines) >= 6, text


def test_cli_validate_valid_config_prints_one_line():
    result = run_cli("validate", str(ROOT / "platform.yaml"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1
    assert "valid" in result.stdout and "3 teams" in result.stdout


def test_cli_plan_shows_guarantee_strategy_borrow_and_most_usable():
    result = run_cli("plan", str(ROOT / "platform.yaml"))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "batch_quota:" in out and "fairshare:" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("team-a") and "ml.g5.xlarge" in line)
    assert "lend_and_borrow" in row and "unlimited" in row and row.rstrip().endswith("3 instances (3 GPUs)")
    assert ("fleet ml.g5.xlarge: capacity 3 instances (3 GPUs), guaranteed 3 instances (3 GPUs),"
            " unguaranteed nothing") in out


def test_cli_plan_json_caps_borrowing_by_percent():
    result = run_cli("plan", "--json", str(ROOT / "examples" / "hyperpod.yaml"))
    plan = json.loads(result.stdout)
    rows = {r["team"]: r for r in plan["backends"]["hyperpod"]["teams"]}
    assert rows["research"]["borrow_cap"] == 1  # 50% of 2 instances, under the 8-GPU absolute cap
    assert rows["research"]["max_usage"] == 3
    assert rows["applied"]["max_usage"] == 1  # lend: never above its guarantee
    assert rows["inference"]["borrow_cap"] == 0


def test_cli_validate_missing_file_exits_2_without_traceback(tmp_path):
    result = run_cli("validate", str(tmp_path / "missing.yaml"))
    assert result.returncode == 2
    assert "file not found" in result.stderr and "Traceback" not in result.stderr


def test_yaml_round_trip_of_platform_yaml_keeps_three_teams():
    raw = yaml.safe_load((ROOT / "platform.yaml").read_text())
    assert len(parse_config(raw).teams) == 3


def test_fair_share_identifiers_must_not_collide():
    raw = {
        "teams": [
            {"name": "team-a", "guarantee": {"g5.xlarge": 1}},
            {"name": "teama", "guarantee": {"g5.xlarge": 1}},
        ],
        "fairshare": {"capacity": {"g5.xlarge": 2}},
    }
    p = one_problem(raw, r"teams\[1\] \(teama\)\.name")
    assert "'teama'" in p.message and "team-a" in p.message and "rename" in p.fix


# --- regressions found by fuzzing parse_config ---------------------------------


@pytest.mark.parametrize(
    "path",
    [
        ("teams", 0, "guarantee", "ml.g5.xlarge"),
        ("teams", 0, "borrow_limit_percent"),
        ("batch_quota", "capacity", "ml.g5.xlarge"),
    ],
)
def test_huge_numbers_are_config_errors_not_overflows(path):
    raw = copy.deepcopy(BATCH)
    node = raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = 10**400
    p = one_problem(raw, re.escape(path[-1]))
    assert "too large" in p.message and p.value == 10**400


def test_huge_vcpu_is_a_config_error_not_an_overflow():
    raw = edit(HYPERPOD, lambda r: r["teams"][0].update(guarantee={"ml.p5.48xlarge": {"vcpu": 10**400}}))
    assert "too large" in one_problem(raw, r"guarantee\.ml\.p5\.48xlarge\.vcpu").message


def test_non_string_top_level_keys_are_reported_not_sorted_into_a_crash():
    problems = problems_of({1: 2, "x": 3})
    assert any(p.field == "1" and p.message == "unknown key" for p in problems)
    assert any(p.message == "declares no backend" for p in problems)


@pytest.mark.parametrize(
    "where, value",
    [
        (lambda r: r["teams"][0], "team-a\n"),
        (lambda r: r["platform"], "gpu-share\n"),
    ],
)
def test_a_trailing_newline_does_not_slip_past_a_name_pattern(where, value):
    raw = copy.deepcopy(BATCH)
    where(raw)["name"] = value
    assert any(p.value == value for p in problems_of(raw))


def test_a_trailing_newline_does_not_slip_past_the_hyperpod_patterns():
    raw = copy.deepcopy(HYPERPOD)
    raw["teams"][0]["name"] = "research\n"
    raw["hyperpod"]["cluster_arn"] += "\n"
    raw["hyperpod"]["priority_classes"] = [{"name": "training\n", "weight": 1}]
    fields = {p.field for p in problems_of(raw)}
    assert "hyperpod.cluster_arn" in fields and "hyperpod.priority_classes[0].name" in fields
    assert any(f.endswith(".name") and f.startswith("teams") for f in fields)


def test_batch_queue_priority_zero_is_kept():
    raw = edit(BATCH, lambda r: r["batch_quota"].update(priority=0))
    assert parse_config(raw).batch_quota.priority == 0


def test_multi_line_description_is_refused():
    raw = edit(HYPERPOD, lambda r: r["teams"][0].update(description="line one\nline two"))
    assert "control characters" in one_problem(raw, r"\.description").message


def test_borrow_limit_mig_profile_of_another_gpu_is_refused():
    raw = edit(
        HYPERPOD,
        lambda r: r["teams"][0].update(borrow_limit={"ml.p5.48xlarge": {"mig": {"mig-3g.20gb": 1}}}),
    )
    p = one_problem(raw, r"borrow_limit\.ml\.p5\.48xlarge\.mig\.mig-3g\.20gb")
    assert p.value == "mig-3g.20gb"


def test_non_utf8_file_is_a_config_error(tmp_path):
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00")
    result = run_cli("validate", str(path))
    assert result.returncode == 2 and "UTF-8" in result.stderr and "Traceback" not in result.stderr


def test_plan_uses_the_hyperpod_default_borrow_limit_of_50_percent():
    from cdk_gpu_share.core.plan import fleet_plan

    raw = edit(HYPERPOD, lambda r: r["teams"][0].pop("fair_share_weight"))
    (row,) = fleet_plan(parse_config(raw))["backends"]["hyperpod"]["teams"]
    assert row["borrow_cap"] == 1 and row["max_usage"] == 3  # the service default, not unlimited


def test_bad_capacity_count_is_reported_once_not_on_every_team():
    raw = edit(BATCH, lambda r: r["batch_quota"].update(capacity={"ml.g5.xlarge": "3"}))
    problems = problems_of(raw)
    assert [p.field for p in problems] == ["batch_quota.capacity.ml.g5.xlarge"], [str(p) for p in problems]


def test_priority_classes_that_are_not_a_list_are_refused():
    raw = edit(HYPERPOD, lambda r: r["hyperpod"].update(priority_classes=0))
    p = one_problem(raw, r"hyperpod\.priority_classes$")
    assert p.value == 0 and "must be a list" in p.message
