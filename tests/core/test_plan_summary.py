"""`gpu-share plan`, `validate --json` and `summary`: every backend, amounts with units, one spelling
per strategy, and what costs money while idle."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from cdk_gpu_share.cli import main
from cdk_gpu_share.core.configuration import backends
from cdk_gpu_share.core.configuration.parse import load_config, parse_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.plan import amount_text, borrow_cap, fleet_plan, format_plan, idle_costs

ROOT = Path(__file__).resolve().parents[2]
BARE_FRACTION = re.compile(r"(?<![\w.])0\.\d+(?![\w.]| GPU)")  # a fraction with no unit after it


def test_plan_covers_every_backend_with_units():
    text = format_plan(fleet_plan(load_config(ROOT / "examples" / "hyperpod.yaml")))
    assert "hyperpod: SageMaker HyperPod task governance" in text
    assert "8x mig-1g.5gb, 8x mig-3g.20gb (16 MIG partitions, 4.57 GPUs)" in text
    assert "1 instance (8 GPUs)" in text  # research may borrow half its 2 instances
    assert "guaranteed 4.57 GPUs, unguaranteed 3.43 GPUs" in text  # never 0.571429 of an instance
    assert not BARE_FRACTION.search(text), BARE_FRACTION.search(text)


def test_plan_shows_inference_endpoints_and_their_partitions():
    plan = fleet_plan(load_config(ROOT / "examples" / "inference.yaml"))
    (e,) = plan["inference"]
    assert e["gpus"] == 8 and e["mig_partitions"] == 16
    text = format_plan(plan)
    assert ("inference endpoint small-models: 1 instance of ml.p4d.24xlarge (8 GPUs), every GPU split "
            "mig-3g.20gb + mig-3g.20gb = 16 MIG partitions") in text
    assert re.search(r"query-rewriter\s+search\s+mig-3g.20gb\s+1..7 \(starts 2\)", text)
    assert "billed every hour, whether or not a model gets requests" in text


def test_idle_costs_name_the_nat_gateway_min_instances_and_endpoints():
    raw = yaml.safe_load((ROOT / "platform.yaml").read_text())
    costs = [c["what"] for c in idle_costs(parse_config(raw))]
    assert any("NAT gateway" in c for c in costs)
    assert not any("always running" in c for c in costs)  # min_instances 0
    raw2 = copy.deepcopy(raw)
    raw2["fairshare"]["min_instances"] = 2
    raw2["alerts"] = {"emails": ["a@example.com"]}
    costs = [c["what"] for c in idle_costs(parse_config(raw2))]
    assert any("min_instances 2: 2 instances of g5.xlarge (8 min vCPUs) always running" in c for c in costs)
    assert any("KMS key" in c for c in costs)
    hp = [c["what"] for c in idle_costs(load_config(ROOT / "examples" / "hyperpod.yaml"))]
    assert len(hp) == 1 and "bills its instances" in hp[0]


@pytest.mark.parametrize("instances, itype, text", [
    (3, "g5.xlarge", "3 instances (3 GPUs)"),
    (1, "ml.p5.48xlarge", "1 instance (8 GPUs)"),
    (0.5, "ml.p5.48xlarge", "4 GPUs"),
    (4 / 7 / 8 * 8, "ml.p4d.24xlarge", "4.57 GPUs"),
    (0, "g5.xlarge", "nothing"),
    (None, "g5.xlarge", "unlimited"),
])
def test_amount_text(instances, itype, text):
    assert amount_text(instances, itype) == text


def test_plan_json_keeps_instances_and_adds_gpus(capsys):
    assert main(["plan", "--json", str(ROOT / "examples" / "hyperpod.yaml")]) == 0
    plan = json.loads(capsys.readouterr().out)
    rows = {r["team"]: r for r in plan["backends"]["hyperpod"]["teams"]}
    assert rows["research"]["borrow_cap"] == 1 and rows["research"]["borrow_cap_gpus"] == 8
    assert rows["inference"]["guarantee_gpus"] == pytest.approx(32 / 7)
    assert plan["backends"]["hyperpod"]["strategy"] == "SageMaker HyperPod task governance"
    assert plan["idle_costs"]


def test_validate_json_valid_and_invalid(tmp_path, capsys):
    assert main(["validate", "--json", str(ROOT / "platform.yaml")]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["valid"] is True and d["teams"] == ["team-a", "team-b", "team-c"]
    assert set(d["backends"]) == {"batch_quota", "fairshare"}
    assert d["backends"]["fairshare"]["capacity"] == {"g5.xlarge": {"instances": 3, "gpus": 3}}
    bad = tmp_path / "bad.yaml"
    bad.write_text("teams: []\nbatch_quota: {capacity: {ml.g5.xlarge: x}}\n")
    assert main(["validate", "--json", str(bad)]) == 2
    out = capsys.readouterr()
    d = json.loads(out.out)
    assert d["valid"] is False
    fields = {p["field"]: p for p in d["problems"]}
    assert fields["batch_quota.capacity.ml.g5.xlarge"]["value"] == "x"
    assert fields["teams"]["fix"]
    assert main(["validate", "--json", str(tmp_path / "missing.yaml")]) == 2
    assert json.loads(capsys.readouterr().out)["problems"][0]["message"] == "file not found"


def _assembly(tmp_path, resources):
    (tmp_path / "manifest.json").write_text(json.dumps({"artifacts": {"s": {
        "type": "aws:cloudformation:stack", "properties": {"templateFile": "s.template.json"}}}}))
    (tmp_path / "s.template.json").write_text(json.dumps({"Resources": resources}))
    return tmp_path


def test_summary_spells_strategies_as_the_config_and_lists_idle_costs(tmp_path, capsys):
    out = _assembly(tmp_path, {
        "Q": {"Type": "AWS::Batch::QuotaShare", "Properties": {
            "QuotaShareName": "team-a", "CapacityLimits": [{"MaxCapacity": 2, "CapacityUnit": "ml.g5.xlarge"}],
            "ResourceSharingConfiguration": {"Strategy": "LEND_AND_BORROW", "BorrowLimit": 50}}},
        "H": {"Type": "AWS::SageMaker::ComputeQuota", "Properties": {
            "ComputeQuotaTarget": {"TeamName": "research"},
            "ComputeQuotaConfig": {"ComputeQuotaResources": [
                {"InstanceType": "ml.p4d.24xlarge", "AcceleratorPartition": {"Type": "mig-3g.20gb", "Count": 4}},
                {"InstanceType": "ml.p5.48xlarge", "Count": 1, "MemoryInGiB": 64}],
                "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 50}}}},
        "N": {"Type": "AWS::EC2::NatGateway", "Properties": {}},
        "C": {"Type": "AWS::Batch::ComputeEnvironment", "Properties": {
            "ComputeResources": {"MinvCpus": 8, "InstanceTypes": ["g5.xlarge"]}}},
        "E": {"Type": "Custom::GpuShareMigEndpoint", "Properties": {
            "EndpointBaseName": "small", "InstanceCount": 1, "InstanceType": "ml.p4d.24xlarge",
            "Layout": ["mig-3g.20gb", "mig-3g.20gb"]}},
        "I": {"Type": "Custom::GpuShareMigInferenceComponent", "Properties": {
            "ComponentBaseName": "small-q", "AcceleratorPartitionType": "mig-3g.20gb", "CopyCount": 3,
            "MinCopyCount": 1, "MaxCopyCount": 8}},
    })
    assert main(["summary", str(out)]) == 0
    text = capsys.readouterr().out
    assert "team-a: Batch quota share, 2 instances of ml.g5.xlarge, lend_and_borrow, borrow limit 50% of the guarantee" in text
    assert ("research: HyperPod compute quota, ml.p4d.24xlarge: 4 MIG partitions mig-3g.20gb; "
            "ml.p5.48xlarge: 1 instance, 64 GiB, lend_and_borrow") in text
    assert "LendAndBorrow" not in text and "LEND_AND_BORROW" not in text
    assert ("endpoint small: 1 instance of ml.p4d.24xlarge, every GPU split mig-3g.20gb + mig-3g.20gb "
            "(2 MIG partitions per GPU, 16 MIG partitions on 8 GPUs)") in text
    assert "model small-q: 3 copies on mig-3g.20gb MIG partitions (one each), autoscaled 1..8" in text
    idle = text.split("costs money while idle:")[1]
    assert "a NAT gateway" in idle and "8 min vCPUs of g5.xlarge" in idle and "endpoint small" in idle


def test_plan_says_how_the_fair_share_reclaimer_picks_its_victims():
    plan = fleet_plan(load_config(ROOT / "platform.yaml"))
    fs = plan["backends"]["fairshare"]
    assert fs["reclaim"]["victim_order"] == "checkpoint"
    assert {r["team"]: r["checkpoint_seconds"] for r in fs["teams"]} == {"team-a": None, "team-b": 600, "team-c": None}
    text = format_plan(plan)
    assert fs["reclaim"]["max_checkpoint_seconds"] == 3600
    assert ("  reclaim: every 1 minute, once a lender waited 60 s; stops first runs started on borrowed GPUs, then the"
            " least work lost since the last checkpoint (victim_order: checkpoint); believes checkpoint intervals up"
            " to 3600 s (a job declaring none, 0 or more counts as saving every 3600 s; max_checkpoint_seconds)"
            ) in text.splitlines()
    assert ("  checkpoints: team-b every 600 s; team-a, team-c not declared (never, unless a job tags"
            " gpu-share:checkpoint-seconds; ordered as every 3600 s)") in text.splitlines()
    # Batch quota management picks its own victims: no reclaim or checkpoint line there.
    quota = text.split("\nfairshare:")[0]
    assert "reclaim:" not in quota and "checkpoints:" not in quota


def test_plan_shows_the_checkpoint_cap_and_what_it_makes_of_each_declaration():
    raw = yaml.safe_load((ROOT / "platform.yaml").read_text())
    raw["fairshare"]["reclaim"]["max_checkpoint_seconds"] = 900
    fair = [t for t in raw["teams"] if t["name"] in ("team-a", "team-b")]
    fair[0]["checkpoint_seconds"], fair[1]["checkpoint_seconds"] = 0, 7200
    plan = fleet_plan(parse_config(raw))
    assert plan["backends"]["fairshare"]["reclaim"]["max_checkpoint_seconds"] == 900
    lines = format_plan(plan).splitlines()
    assert any(line.endswith("believes checkpoint intervals up to 900 s (a job declaring none, 0 or more counts as"
                             " saving every 900 s; max_checkpoint_seconds)") for line in lines)
    assert ("  checkpoints: team-a never (ordered as every 900 s); team-b every 7200 s (ordered as every 900 s);"
            " team-c not declared (never, unless a job tags gpu-share:checkpoint-seconds; ordered as every 900 s)"
            ) in lines


def test_plan_of_the_default_order_and_a_disabled_reclaimer():
    raw = yaml.safe_load((ROOT / "platform.yaml").read_text())
    raw["fairshare"]["reclaim"] = {"min_runtime_seconds": 300, "dry_run": True}
    for team in raw["teams"]:
        team.pop("checkpoint_seconds", None)
    text = format_plan(fleet_plan(parse_config(raw)))
    assert ("  reclaim: every 1 minute, once a lender waited 0 s; stops first the lowest priority, then the most recent"
            " start (victim_order: youngest); never a job younger than 300 s; dry run: logs the plan, stops nothing"
            ) in text.splitlines()
    assert "checkpoints:" not in text  # nobody declares one and nothing reads them
    raw["fairshare"]["reclaim"] = {"enabled": False}
    assert "  reclaim: off: lent GPUs come back only as the borrowers' jobs end" in format_plan(
        fleet_plan(parse_config(raw))).splitlines()


def test_plan_says_how_often_preempted_jobs_are_queued_again_on_batch_quota():
    raw = yaml.safe_load((ROOT / "platform.yaml").read_text())
    raw["teams"][0]["preemption_retries"] = 3
    raw["teams"][1]["preemption_retries"] = 0
    plan = fleet_plan(parse_config(raw))
    assert [r["preemption_retries"] for r in plan["backends"]["batch_quota"]["teams"]] == [3, 0, None]
    lines = format_plan(plan).splitlines()
    assert ("  preemption retries: team-a 3 (then the job fails); team-b 0 (fails on its first preemption);"
            " team-c every time (Batch's default)") in lines
    assert sum("preemption retries:" in line for line in lines) == 1  # Batch quota management only


def test_every_backends_plan_extras_are_lines_of_the_text_plan():
    # A backend's extras (BackendSpec.plan_extras) show in the text too, not only in --json.
    text = format_plan(fleet_plan(load_config(ROOT / "examples" / "kueue.yaml")))
    assert ("  kueue: cluster gpu-eks, cohort gpu-share; lenders preempt borrowed workloads (Any) as the simulator"
            " models") in text.splitlines()


# Batch quota management: the borrow limit's documented range, and what Batch can schedule.

def _batch_quota(percents: dict[str, int]) -> dict:
    return {"platform": {"name": "bq"},
            "teams": [{"name": name, "guarantee": {"ml.g5.xlarge": 1, "ml.g5.12xlarge": 1}, "borrow_limit_percent": pct}
                      for name, pct in percents.items()],
            "batch_quota": {"capacity": {"ml.g5.xlarge": max(4, len(percents)), "ml.g5.12xlarge": max(4, len(percents))}}}


@pytest.mark.parametrize("percent, value, message", [
    (-2, -2, "must be at least -1"),
    (2**31, 2**31, "must be at most 2,147,483,647"),
    (1.5, 1.5, "must be a whole number"),
])
def test_a_batch_borrow_limit_outside_the_documented_range_is_refused(percent, value, message):
    with pytest.raises(ConfigError) as info:
        parse_config(_batch_quota({"a": percent, "b": 0}))
    (p,) = info.value.problems
    assert (p.field, p.value, p.message, p.fix) == (
        "teams[0] (a).borrow_limit_percent", value, message, "use -1 for unlimited, or a percentage >= 0")


def test_batch_borrow_limits_batch_documents_as_valid_validate():
    """Batch gives borrowLimit as an Integer, minimum -1, no maximum (its own example is 200)."""
    config = parse_config(_batch_quota({"a": -1, "b": 0, "c": 150, "d": 200, "e": 1_000_000, "f": 2**31 - 1}))
    assert [t.borrow_limit_percent for t in config.teams] == [-1, 0, 150, 200, 1_000_000, 2**31 - 1]


def test_plan_rounds_a_batch_borrow_cap_down_to_whole_instances():
    plan = fleet_plan(parse_config(_batch_quota({"a": 150, "b": 50, "c": 1_000_000, "d": 200})))
    rows = {(r["team"], r["instance_type"]): r for r in plan["backends"]["batch_quota"]["teams"]}
    # 150 % of 1 instance: Batch schedules 1 more instance, never 1.5
    assert rows["a", "ml.g5.xlarge"]["borrow_cap"] == 1 and rows["a", "ml.g5.xlarge"]["max_usage"] == 2
    assert rows["a", "ml.g5.12xlarge"]["borrow_cap_gpus"] == 4  # one whole g5.12xlarge, not 6 GPUs
    assert rows["b", "ml.g5.xlarge"]["borrow_cap"] == 0 and rows["b", "ml.g5.xlarge"]["max_usage"] == 1
    assert rows["c", "ml.g5.xlarge"]["borrow_cap"] == 10_000 and rows["c", "ml.g5.xlarge"]["max_usage"] == 4  # the pool
    assert rows["d", "ml.g5.xlarge"]["borrow_cap"] == 2
    text = format_plan(plan)
    line = next(x for x in text.splitlines() if x.split()[:2] == ["a", "ml.g5.12xlarge"])
    assert "1 instance (4 GPUs)" in line and "2 instances (8 GPUs)" in line
    assert "1.5" not in text and "0.5" not in text
    b_line = next(x for x in text.splitlines() if x.split()[:2] == ["b", "ml.g5.xlarge"])
    assert "nothing" in b_line


def test_hyperpod_borrow_caps_stay_fractional():
    """HyperPod borrows accelerators, not instances: half of one p5 is 4 GPUs it can use."""
    config = load_config(ROOT / "examples" / "hyperpod.yaml")
    assert backends.spec("hyperpod").borrows_whole_instances is False
    assert borrow_cap(config.team("research"), "ml.p5.48xlarge", 1.0, "hyperpod") == 0.5


def test_the_archive_cost_counts_service_jobs_of_the_backends_whose_registry_entry_says_so(monkeypatch):
    """Which backends run service jobs is a fact of their registry entry, not of the section's name."""
    from cdk_gpu_share.core.plan import archive_costs

    fairshare_only = parse_config({"platform": {"name": "gpu-share"},
                                   "teams": [{"name": "team-a", "guarantee": {"g5.xlarge": 1}}],
                                   "fairshare": {"capacity": {"g5.xlarge": 1}}})
    without = archive_costs(fairshare_only)[0]["what"]
    monkeypatch.setattr(backends.spec("fairshare"), "service_jobs", True)
    with_details = archive_costs(fairshare_only)[0]["what"]
    cost = re.compile(r"about \$([\d.]+) a month in all")
    assert float(cost.search(with_details).group(1)) > float(cost.search(without).group(1))


# A tree compiled onto HyperPod or Batch: plan shows what is deployed, and summary reads the same back.

def _compiled_tree(backend: str) -> dict:
    """research (pool 2, bound 7) over team-a (2, its own cap 50 % on Batch, 200 % on HyperPod) and
    team-b (1); team-c (3) a root team: one instance of the pool is left to team-b on Batch."""
    it = "ml.g5.xlarge"
    section = {"capacity": {it: 10}}
    if backend == "hyperpod":
        section["cluster_arn"] = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456"
    return {"platform": {"name": "tree"}, backend: section,
            "groups": [{"name": "research", "guarantee": {it: 2}, "borrow_limit": {it: 2}}],
            "teams": [{"name": "team-a", "group": "research", "guarantee": {it: 2},
                       "borrow_limit_percent": 50 if backend == "batch_quota" else 200},
                      {"name": "team-b", "group": "research", "guarantee": {it: 1}},
                      {"name": "team-c", "guarantee": {it: 3}}]}


@pytest.mark.parametrize("backend", ["batch_quota", "hyperpod"])
def test_plan_and_summary_print_the_same_deployed_shares(backend, capsys):
    from cdk_gpu_share.stacks.app import build_platform
    from tests.helpers import new_app

    config = parse_config(_compiled_tree(backend))
    plan = fleet_plan(config)
    data = plan["backends"][backend]
    fleet = data["totals"]["ml.g5.xlarge"]
    assert fleet["guaranteed"] == sum(r["guarantee"] for r in data["teams"])
    assert fleet["tree_guaranteed"] == 8  # 2 + 1 + 3 and the pool of 2
    app = new_app()
    build_platform(app, config, checks=False)
    assembly = app.synth().directory
    assert main(["summary", assembly]) == 0
    summary = capsys.readouterr().out
    deployed = re.search(rf"{backend} ml.g5.xlarge: guaranteed (.+) in all", summary).group(1)
    text = format_plan(plan)
    assert f"guaranteed {deployed} as deployed (the tree's quota 8 instances (8 GPUs)" in text
    assert deployed == amount_text(fleet["guaranteed"], "ml.g5.xlarge")
    # Each team: the share summary reads back is the plan's row, and so is what it may borrow.
    for row in data["teams"]:
        line = next(x for x in summary.splitlines() if x.strip().startswith(f"{row['team']}: "))
        assert _may_borrow(line) == amount_text(row["borrow_cap"], "ml.g5.xlarge"), (line, row["borrow_cap"])


def _may_borrow(line: str) -> str:
    """What a summary line says the team may borrow (``unlimited`` when it says nothing)."""
    found = re.search(r"may borrow (.+?) of ml\.g5\.xlarge", line)
    return "unlimited" if found is None else found.group(1)
