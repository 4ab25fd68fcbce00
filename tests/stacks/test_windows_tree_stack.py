"""Time windows with an organisation's tree on Batch quota management and HyperPod: the quota
window switcher writes, in each window, the compilation of that window's tree."""

from __future__ import annotations

import json

import pytest
import yaml
from aws_cdk.assertions import Template

from cdk_gpu_share.backends.batch_quota import share_values
from cdk_gpu_share.backends.hyperpod import quota_values
from cdk_gpu_share.core.configuration.parse import parse_config, team_in_window
from cdk_gpu_share.core.policy.organisation import compile_flat
from cdk_gpu_share.lambdas.quota_switcher import handler as h
from cdk_gpu_share.stacks.app import build_platform
from tests.helpers import ROOT, new_app, synth

G5 = "ml.g5.12xlarge"
HANDLER = "cdk_gpu_share.lambdas.quota_switcher.handler.handler"


def grouped() -> dict:
    """The windows example with a group "ml" (a pool of one g5 instance) over research and
    applied, applied borrowing up to 100 % and no windows of its own, and one more g5 instance."""
    raw = yaml.safe_load((ROOT / "examples" / "windows.yaml").read_text())
    raw["groups"] = [{"name": "ml", "guarantee": {G5: 1}}]
    for team in raw["teams"]:
        if team["name"] in ("research", "applied"):
            team["group"] = "ml"
        if team["name"] == "applied":
            team.update(sharing="lend_and_borrow", borrow_limit_percent=100)
    raw["batch_quota"]["capacity"][G5] = 5
    return raw


@pytest.fixture(scope="module")
def synthesized():
    config = parse_config(grouped())
    app = new_app()
    platform = build_platform(app, config, checks=False)
    synth(app)
    return config, Template.from_stack(platform.windows).to_json()


@pytest.fixture(scope="module")
def switched(synthesized):
    config, template = synthesized
    (function,) = [r for r in template["Resources"].values()
                   if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Handler") == HANDLER]
    env = function["Properties"]["Environment"]["Variables"][h.SETTINGS_ENV]
    text = env if isinstance(env, str) else "".join(p if isinstance(p, str) else "<import>"
                                                    for p in env["Fn::Join"][1])
    settings = json.loads(text)
    return config, {(t["kind"], t["team"]): t for t in settings["targets"]}


def test_each_window_switches_the_shares_to_the_compilation_of_its_tree(switched):
    config, targets = switched
    compiled = compile_flat(config, "batch_quota").config
    for name in ("research", "nightly", "applied"):
        deployed = compiled.team(name)
        target = targets[("batch", name)]
        assert target["base"] == share_values(deployed, config.batch_quota.capacity)
        for window in ("night", "sunday"):
            assert target["windows"].get(window, target["base"]) == share_values(
                team_in_window(deployed, window), config.batch_quota.capacity), (name, window)
    # In the base research (2 of its own, 100 %) takes the pool: 3. At night its cap (50 % of 1)
    # lets it take none of it, and applied (no windows of its own) is switched to 2, its 100 % of
    # 1 now spent: borrow limit 0.
    assert targets[("batch", "research")]["base"]["capacityLimits"] == [{"capacityUnit": G5, "maxCapacity": 3}]
    applied = targets[("batch", "applied")]
    assert applied["base"] == {"capacityLimits": [{"capacityUnit": G5, "maxCapacity": 1}],
                               "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": 100}}
    assert applied["windows"]["night"] == {
        "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}],
        "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": 0}}


def test_each_window_switches_the_compute_quotas_to_the_compilation_of_its_tree(switched):
    config, targets = switched
    compiled = compile_flat(config, "hyperpod").config
    for name in ("research", "nightly"):
        deployed = compiled.team(name)
        target = targets[("hyperpod", name)]
        assert target["base"] == quota_values(deployed, config.hyperpod.capacity)
        for window in ("night", "sunday"):
            assert target["windows"].get(window, target["base"]) == quota_values(
                team_in_window(deployed, window), config.hyperpod.capacity), (name, window)


def test_a_team_switched_only_by_the_tree_has_its_stack_watched_after_deploys(synthesized):
    # applied gives no values of its own, but its compiled share changes at night: an update of
    # its stack alone writes its base back, and is followed by a run of the switcher.
    _, template = synthesized
    (rule,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::Events::Rule"]
    prefixes = rule["Properties"]["EventPattern"]["detail"]["stack-id"]
    stacks = sorted("".join(p if isinstance(p, str) else "" for p in prefix["prefix"]["Fn::Join"][1])
                    .split(":stack/")[1] for prefix in prefixes)
    assert stacks == ["windows-share-team-applied/", "windows-share-team-nightly/", "windows-share-team-research/"]
