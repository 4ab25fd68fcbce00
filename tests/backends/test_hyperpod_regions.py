"""HyperPod idle-compute sharing regions: synth refuses a borrowing quota in a region AWS does not
list (with the list and its source), accepts lending and reserving anywhere, cannot check an
environment-agnostic stack, and ``gpu-share plan`` says so."""

from __future__ import annotations

import copy
from pathlib import Path

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Template

from cdk_gpu_share import SharedGpuQuota
from cdk_gpu_share.cli import main
from cdk_gpu_share.core.config import Amount, HyperPodConfig, Sharing, TeamConfig, load_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.hyperpod_regions import IDLE_SHARING_REGIONS, IDLE_SHARING_SOURCE, borrowing_problems
from cdk_gpu_share.core.plan import fleet_plan, format_plan
from tests.helpers import ROOT, new_app

CLUSTER = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456"
ENV_AGNOSTIC = None


def _build(region: str | None, sharing: Sharing) -> cdk.Stack:
    app = new_app()
    env = None if region is None else cdk.Environment(account="111122223333", region=region)
    stack = cdk.Stack(app, "HyperPod", env=env)
    SharedGpuQuota(stack, "Quota",
                   teams=[TeamConfig(name="research", guarantee={"ml.p5.48xlarge": Amount(instances=1)}, sharing=sharing)],
                   hyperpod=HyperPodConfig(cluster_arn=CLUSTER, capacity={"ml.p5.48xlarge": 2}))
    return stack


@pytest.mark.parametrize("region, sharing, refused", [
    ("eu-west-3", Sharing.LEND_AND_BORROW, True),   # Paris: not listed
    ("ap-northeast-2", Sharing.LEND_AND_BORROW, True),  # Seoul: not listed
    ("eu-west-3", Sharing.LEND, False),             # lending alone never takes idle compute
    ("eu-west-3", Sharing.RESERVE, False),
    ("us-east-1", Sharing.LEND_AND_BORROW, False),
    ("eu-south-2", Sharing.LEND_AND_BORROW, False),  # Spain
    ("ap-southeast-3", Sharing.LEND_AND_BORROW, False),  # Jakarta
    (ENV_AGNOSTIC, Sharing.LEND_AND_BORROW, False),  # unresolved: plan notes it instead
])
def test_a_borrowing_quota_is_refused_only_in_a_known_unlisted_region(region, sharing, refused):
    if not refused:
        _build(region, sharing)
        return
    with pytest.raises(ConfigError) as err:
        _build(region, sharing)
    [p] = err.value.problems
    assert p.field == "team.sharing" and p.value == "lend_and_borrow"
    assert f"the stack's region {region} is not one of them" in p.message
    assert "us-east-1, us-east-2" in p.message and "sa-east-1" in p.message and IDLE_SHARING_SOURCE in p.message
    assert "sharing: lend or reserve" in p.fix and "listed region" in p.fix


@pytest.mark.parametrize("region", ["us-west-2", "ap-southeast-3", ENV_AGNOSTIC])
def test_a_borrowing_quota_in_a_listed_or_unresolved_region_synthesizes(region):
    t = Template.from_stack(_build(region, Sharing.LEND_AND_BORROW))
    [quota] = t.find_resources("AWS::SageMaker::ComputeQuota").values()
    assert quota["Properties"]["ComputeQuotaConfig"]["ResourceSharingConfig"]["Strategy"] == "LendAndBorrow"


def test_the_list_is_the_fifteen_regions_aws_names():
    assert len(IDLE_SHARING_REGIONS) == 15
    assert IDLE_SHARING_REGIONS["sa-east-1"] == "South America (São Paulo)"
    assert IDLE_SHARING_REGIONS["eu-north-1"] == "Europe (Stockholm)"
    assert "docs.aws.amazon.com" in IDLE_SHARING_SOURCE
    teams = [TeamConfig(name=n, guarantee={}, sharing=s) for n, s in (("a", Sharing.LEND_AND_BORROW),
                                                                       ("b", Sharing.LEND), ("c", Sharing.LEND_AND_BORROW))]
    assert [p.field for p in borrowing_problems("me-south-1", teams, "teams")] == ["teams.a.sharing", "teams.c.sharing"]
    assert borrowing_problems("us-west-2", teams) == []


def _config(tmp_path: Path, arn_region: str = "us-east-1") -> str:
    raw = yaml.safe_load((ROOT / "examples" / "hyperpod.yaml").read_text())
    raw = copy.deepcopy(raw)
    raw["hyperpod"]["cluster_arn"] = raw["hyperpod"]["cluster_arn"].replace(":us-east-1:", f":{arn_region}:")
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def test_plan_notes_that_an_unresolved_region_is_not_checked_at_synth(tmp_path, capsys):
    config = load_config(_config(tmp_path))
    borrowers = [t.name for t in config.teams_for("hyperpod") if t.sharing.borrows]
    assert borrowers
    text = format_plan(fleet_plan(config))
    [line] = [x for x in text.splitlines() if x.startswith("  regions: ")]
    assert line.startswith(f"  regions: {', '.join(borrowers)} borrow idle compute")
    assert "eu-south-2" in line and IDLE_SHARING_SOURCE in line and "environment-agnostic stack" in line
    assert "is not listed" not in line
    assert main(["plan", _config(tmp_path, "eu-west-3")]) == 0
    out = capsys.readouterr().out
    assert "The cluster's ARN names eu-west-3, which is not listed" in out


def test_plan_has_no_region_note_when_no_hyperpod_team_borrows(tmp_path):
    raw = yaml.safe_load((ROOT / "examples" / "hyperpod.yaml").read_text())
    for t in raw["teams"]:
        t["sharing"] = "lend"
        t.pop("borrow_limit_percent", None)
        t.pop("borrow_limit", None)
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert "regions:" not in format_plan(fleet_plan(load_config(path)))
