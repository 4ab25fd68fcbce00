"""The deployed wait alarms take a team's ``guarantee_wait_p99_minutes`` objective as their threshold:
the share monitor's guarantee-wait alarm (Batch quota management) and the fair-share dashboard's
lender-wait alarm; a team without the objective keeps the configured threshold. A team whose work
must never be stopped but that borrows gets a synth warning, as `validate` warns."""

from __future__ import annotations

import json
import re

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from cdk_gpu_share.constructs.dashboard import GpuShareDashboard
from cdk_gpu_share.core.configuration.parse import parse_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.records import metrics
from cdk_gpu_share.stacks.app import build_platform
from tests.helpers import new_app

CONFIG = {
    "platform": {"name": "demo"},
    "teams": [
        {"name": "red", "guarantee": {"g5.xlarge": 1, "ml.g5.xlarge": 1},
         "objectives": {"guarantee_wait_p99_minutes": 5, "wait_p95_minutes": 60}},
        {"name": "blue", "guarantee": {"g5.xlarge": 1, "ml.g5.xlarge": 1}, "objectives": {"wait_p95_minutes": 30}},
        {"name": "green", "guarantee": {"ml.g5.xlarge": 1}, "objectives": {"guarantee_wait_p99_minutes": 2.5}},
    ],
    "batch_quota": {"capacity": {"ml.g5.xlarge": 3}, "monitor": {"guarantee_wait_alarm_seconds": 600}},
    "fairshare": {"capacity": {"g5.xlarge": 2}},
}


@pytest.fixture(scope="module")
def platform():
    platform = build_platform(new_app(), parse_config(CONFIG), checks=False)
    return platform.platform, Template.from_stack(platform.platform)


def _thresholds(template: Template, metric: str) -> dict[str, float]:
    """Team -> threshold of the alarms on ``metric``."""
    out = {}
    for alarm in template.find_resources("AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        if props.get("MetricName") == metric:
            team = next(d["Value"] for d in props["Dimensions"] if d["Name"] == metrics.DIM_TEAM)
            out[team] = props["Threshold"]
    return out


def test_the_share_monitors_guarantee_wait_alarm_takes_the_objective(platform):
    _, template = platform
    assert _thresholds(template, metrics.GUARANTEE_WAIT_SECONDS) == {"red": 300, "blue": 600, "green": 150}


def test_the_share_monitors_dashboard_draws_each_teams_own_threshold(platform):
    _, template = platform
    bodies = [json.dumps(d["Properties"]["DashboardBody"])
              for d in template.find_resources("AWS::CloudWatch::Dashboard").values()]
    monitor = next(b for b in bodies if "red: waiting" in b)
    for team, seconds in (("red", 300), ("blue", 600), ("green", 150)):
        graph = monitor.split(f"{team}: waiting")[1].split(": preemptions")[0]  # the team's waiting graph
        assert f'\\"value\\":{seconds},' in graph and '\\"label\\":\\"alarm\\"' in graph


def test_the_fairshare_lender_wait_alarm_takes_the_objective(platform):
    stack, template = platform
    # green is not a fair-share team; blue has no guarantee-wait objective: the default threshold
    assert _thresholds(template, metrics.LENDER_WAIT_SECONDS) == {"red": 300, "blue": 900}
    assert stack.dashboard.team_thresholds["red"].to_seconds() == 300
    [red] = [a["Properties"] for k, a in template.find_resources("AWS::CloudWatch::Alarm").items()
             if k.startswith("DashboardLenderWaitAlarmred")]
    assert "more than 5 minutes" in red["AlarmDescription"]


def test_a_team_threshold_for_an_unknown_team_is_refused():
    stack = cdk.Stack(cdk.App(), "S")
    with pytest.raises(ConfigError, match=r"team_thresholds\['nobody'\]: is not one of the dashboard's teams"):
        GpuShareDashboard(stack, "D", queue_name="q", teams=["red"],
                          team_thresholds={"nobody": cdk.Duration.minutes(5)})


@pytest.mark.parametrize(("sharing", "warned"), [("lend_and_borrow", True), ("lend", False)])
def test_a_team_that_must_never_be_stopped_but_borrows_is_warned_at_synth(sharing, warned):
    from aws_cdk.assertions import Annotations, Match

    from cdk_gpu_share.core.configuration.parse import TeamConfig
    from cdk_gpu_share.stacks.team import NEVER_STOPPED_BORROWS, TeamStack

    team = TeamConfig(name="red", guarantee={"g5.xlarge": 1}, sharing=sharing,
                      objectives={"max_preempted_per_day": 0})
    stack = TeamStack(new_app(), "Red", team=team)
    found = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("must never be stopped"))
    assert len(found) == (1 if warned else 0)
    if warned:
        text = json.dumps(found[0].entry.data)
        assert "team red: objectives max_preempted_per_day: 0" in text and "lend_and_borrow" in text
        assert NEVER_STOPPED_BORROWS in text


def test_an_entitlement_changes_nothing_deployed(platform):
    """The alarms watch what the backends enforce, the guarantee: a team promised more (what
    simulate and advise judge its objectives against) gets the very same template."""
    promised = json.loads(json.dumps(CONFIG))
    promised["teams"][0]["objectives"]["entitlement"] = {"g5.xlarge": 2, "ml.g5.xlarge": 2}
    config = parse_config(promised)
    assert config.team("red").objectives.entitlement == {"g5.xlarge": 2, "ml.g5.xlarge": 2}
    again = build_platform(new_app(), config, checks=False).platform

    def deployed(template: Template) -> str:
        # The job archive files events under the config's fingerprint, which any edit changes.
        return re.sub(r"config=[0-9a-f]+/", "config=/", json.dumps(template.to_json(), sort_keys=True))

    assert deployed(Template.from_stack(again)) == deployed(platform[1])
    assert _thresholds(Template.from_stack(again), metrics.GUARANTEE_WAIT_SECONDS)["red"] == 300
