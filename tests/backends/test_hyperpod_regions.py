"""HyperPod task-governance regions: synth refuses a HyperPod stack in a region AWS does not list
(one line with the region, the list and its source), synthesizes in every listed one although
aws-cdk-lib's region table leaves some out, cannot check an environment-agnostic stack, and
``gpu-share plan`` says so."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Template

from cdk_gpu_share import SharedGpuQuota
from cdk_gpu_share.cli import main
from cdk_gpu_share.core.configuration.hyperpod_regions import IDLE_SHARING_REGIONS, IDLE_SHARING_SOURCE, region_problems
from cdk_gpu_share.core.configuration.parse import Amount, HyperPodConfig, Sharing, TeamConfig, load_config
from cdk_gpu_share.core.errors import ConfigError
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
    ("ca-central-1", Sharing.LEND, True),           # task governance does not exist there, whatever the sharing
    ("eu-west-3", Sharing.RESERVE, True),
    ("us-east-1", Sharing.LEND_AND_BORROW, False),
    ("eu-south-2", Sharing.LEND_AND_BORROW, False),  # Spain
    ("ap-southeast-3", Sharing.LEND, False),  # Jakarta
    (ENV_AGNOSTIC, Sharing.LEND_AND_BORROW, False),  # unresolved: plan notes it instead
])
def test_a_hyperpod_stack_is_refused_only_in_a_known_unlisted_region(region, sharing, refused):
    if not refused:
        _build(region, sharing)
        return
    with pytest.raises(ConfigError) as err:
        _build(region, sharing)
    [p] = err.value.problems
    assert p.field == "env.region" and p.value == region
    assert "is not a region where AWS offers HyperPod task governance" in p.message
    assert "us-east-1, us-east-2" in p.message and "sa-east-1" in p.message and IDLE_SHARING_SOURCE in p.message
    assert "region of the HyperPod cluster" in p.fix and "env=cdk.Environment(region=...)" in p.fix
    assert len(str(err.value).splitlines()) == 1 and region in str(err.value)


# Regions AWS documents task governance in that aws-cdk-lib 2.275's own region table leaves out:
# without the acknowledgement their synth fails on F3006 (CloudFormation Validate).
@pytest.mark.parametrize("region, sharing", [("us-west-2", Sharing.LEND_AND_BORROW),
                                              ("ap-southeast-3", Sharing.LEND_AND_BORROW),
                                              ("eu-west-1", Sharing.LEND), (ENV_AGNOSTIC, Sharing.LEND_AND_BORROW)])
def test_a_hyperpod_stack_in_a_listed_or_unresolved_region_synthesizes(region, sharing):
    stack = _build(region, sharing)
    stack.node.root.synth()  # the app's synth runs CDK's default rules: an unacknowledged F3006 fails it
    t = Template.from_stack(stack)
    [quota] = t.find_resources("AWS::SageMaker::ComputeQuota").values()
    assert quota["Properties"]["ComputeQuotaConfig"]["ResourceSharingConfig"]["Strategy"] == sharing.hyperpod_strategy


def test_a_team_stack_in_an_unlisted_region_is_refused_too():
    app = new_app()
    platform = cdk.Stack(app, "Platform", env=cdk.Environment(account="111122223333", region="us-east-1"))
    team = cdk.Stack(app, "Team", env=cdk.Environment(account="111122223333", region="eu-west-3"))
    quota = SharedGpuQuota(platform, "Quota", hyperpod=HyperPodConfig(cluster_arn=CLUSTER, capacity={"ml.p5.48xlarge": 2}))
    with pytest.raises(ConfigError) as err:
        quota.add_team(TeamConfig(name="research", guarantee={"ml.p5.48xlarge": Amount(instances=1)},
                                  sharing=Sharing.RESERVE), scope=team)
    assert [(p.field, p.value) for p in err.value.problems] == [("env.region", "eu-west-3")]


_USER_APP = """
import sys
import aws_cdk as cdk
from cdk_gpu_share import SharedGpuQuota
from cdk_gpu_share.core.configuration.parse import Amount, HyperPodConfig, Sharing, TeamConfig
from cdk_gpu_share.core.errors import ConfigError

app = cdk.App(context={"@aws-cdk/core:validateAgainstDefaultRules": True})
stack = cdk.Stack(app, "HyperPod", env=cdk.Environment(account="111122223333", region=sys.argv[1]))
try:
    SharedGpuQuota(stack, "Quota", teams=[TeamConfig(name="research", guarantee={"ml.p5.48xlarge": Amount(instances=1)},
                                                     sharing=Sharing.LEND)],
                   hyperpod=HyperPodConfig(cluster_arn=%r, capacity={"ml.p5.48xlarge": 2}))
except ConfigError as exc:
    print(exc, file=sys.stderr)
    sys.exit(2)
app.synth()
"""


@pytest.mark.parametrize("region, code", [("ca-central-1", 2), ("us-west-2", 0)])
def test_an_app_in_an_unlisted_region_refuses_in_one_line_and_a_listed_one_synthesizes(tmp_path, region, code):
    # The same catch as app.py: a refusal is a ConfigError, raised before synth; CDK's own F3006
    # would be a RuntimeError at synth, with a traceback.
    script = tmp_path / "app.py"
    script.write_text(_USER_APP % CLUSTER)
    env = dict(os.environ, CDK_OUTDIR=str(tmp_path / "out"))
    result = subprocess.run([sys.executable, str(script), region], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == code, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    if code:
        [line] = result.stderr.strip().splitlines()
        assert line.startswith("invalid configuration in HyperPod/Quota") and "env.region" in line and "(got 'ca-central-1')" in line
        assert "env=cdk.Environment(region=...)" in line


def test_the_list_is_the_fifteen_regions_aws_names():
    assert len(IDLE_SHARING_REGIONS) == 15
    assert IDLE_SHARING_REGIONS["sa-east-1"] == "South America (São Paulo)"
    assert IDLE_SHARING_REGIONS["eu-north-1"] == "Europe (Stockholm)"
    assert "docs.aws.amazon.com" in IDLE_SHARING_SOURCE
    assert [p.value for p in region_problems("me-south-1")] == ["me-south-1"]
    assert region_problems("us-west-2") == []


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
