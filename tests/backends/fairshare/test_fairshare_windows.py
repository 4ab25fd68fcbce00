"""A fair-share queue with time windows: the windows and each team's values in them are in the
reclaim Lambda's settings, each team's GPU quota holds the most it may hold in any window, the
Lambda's code carries the time zones; the same queue without windows synthesizes as it did."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Template

from cdk_gpu_share.aws import batch_reader as br
from cdk_gpu_share.backends.fairshare.construct import FairshareQueue
from cdk_gpu_share.core.configuration.parse import check_config, parse_config
from cdk_gpu_share.core.configuration.windows import Window
from cdk_gpu_share.core.errors import ConfigError
from tests.helpers import new_app

CONFIG = """
platform: {name: gpu-share}
windows:
  - {name: night, days: [mon, tue, wed, thu, fri], start: "20:00", end: "08:00", timezone: Europe/Berlin}
teams:
  - name: research
    guarantee: {g5.xlarge: 2}
    borrow_limit_percent: 50
    windows: {night: {guarantee: {g5.xlarge: 1}}}
  - name: nightly
    guarantee: {g5.xlarge: 1}
    borrow_limit_percent: 0
    windows: {night: {guarantee: {g5.xlarge: 2}}}
fairshare:
  capacity: {g5.xlarge: 4}
"""


def config_of(windows: bool = True):
    raw = yaml.safe_load(CONFIG)
    if not windows:
        del raw["windows"]
        for team in raw["teams"]:
            del team["windows"]
    return parse_config(raw)


def synth(windows: bool = True) -> tuple[dict, Path]:
    app = new_app()
    stack = cdk.Stack(app, "Fleet")
    config = config_of(windows)
    queue = FairshareQueue.from_config(stack, "Fleet", config=config)
    for team in config.teams:
        queue.add_team(team)
    assembly = app.synth()
    return assembly.get_stack_by_name("Fleet").template, Path(assembly.directory)


@pytest.fixture(scope="module")
def windowed() -> tuple[dict, Path]:
    return synth()


@pytest.fixture(scope="module")
def plain() -> tuple[dict, Path]:
    return synth(windows=False)


def reclaimer(template: dict) -> dict:
    functions = Template.from_json(template).find_resources("AWS::Lambda::Function")
    [fn] = [f for f in functions.values() if "GPU_SHARE_SETTINGS" in f["Properties"].get("Environment", {}).get(
        "Variables", {})]
    return fn


def settings_of(template: dict) -> dict:
    return br.decode_settings(reclaimer(template)["Properties"]["Environment"]["Variables"]["GPU_SHARE_SETTINGS"])


def quotas(template: dict) -> dict:
    found = Template.from_json(template).find_resources("AWS::Batch::ConsumableResource")
    return {r["Properties"]["ConsumableResourceName"].rsplit("-", 2)[-2]: r["Properties"]["TotalQuantity"]
            for r in found.values()}


def test_a_config_with_windows_on_fair_share_validates_for_deployment():
    assert check_config(config_of()) == []


def test_the_reclaimers_settings_hold_the_windows_and_each_teams_values_in_them(windowed):
    settings = settings_of(windowed[0])
    assert settings["windows"] == [{"name": "night", "days": ["mon", "tue", "wed", "thu", "fri"], "start": "20:00",
                                    "end": "08:00", "timezone": "Europe/Berlin"}]
    teams = {t["name"]: t for t in settings["teams"]}
    # Complete values in the window: the borrow limit research gives for the base holds there too.
    assert teams["research"]["windows"] == {"night": {"guarantee": {"gpu": 1}, "borrow_limit_percent": 50}}
    assert teams["nightly"]["windows"] == {"night": {"guarantee": {"gpu": 2}, "borrow_limit_percent": 0}}
    assert (teams["research"]["guarantee"], teams["nightly"]["guarantee"]) == ({"gpu": 2}, {"gpu": 1})
    # What the settings say is what the config's own reading says.
    assert settings == {**br.settings_from_config(config_of()), "queue": settings["queue"]}


def test_each_teams_gpu_quota_is_the_most_it_may_hold_in_any_window(windowed, plain):
    # nightly: 1 GPU in the base, 2 at night (no borrowing): Batch must let it run 2.
    assert quotas(windowed[0]) == {"research": 3, "nightly": 2}
    assert quotas(plain[0]) == {"research": 3, "nightly": 1}


def test_the_reclaimers_code_carries_the_time_zones_only_with_windows(windowed, plain):
    def bundled(built: tuple[dict, Path]) -> Path:
        key = reclaimer(built[0])["Properties"]["Code"]["S3Key"]
        return built[1] / f"asset.{key.removesuffix('.zip')}"

    assert (bundled(windowed) / "tzdata" / "zoneinfo" / "Europe" / "Berlin").is_file()
    assert (bundled(windowed) / "cdk_gpu_share" / "core" / "configuration" / "windows.py").is_file()
    assert not (bundled(plain) / "tzdata").exists()


def test_without_windows_the_settings_are_as_before(plain):
    settings = settings_of(plain[0])
    assert "windows" not in settings and all("windows" not in t for t in settings["teams"])
    assert settings == {**br.settings_from_config(config_of(windows=False)), "queue": settings["queue"]}


def test_a_team_naming_a_window_the_queue_was_not_given_is_refused():
    app = new_app()
    stack = cdk.Stack(app, "Fleet")
    config = config_of()
    queue = FairshareQueue(stack, "Fleet", config=config.fairshare)
    with pytest.raises(ConfigError, match=r"windows\.night: is not a window"):
        queue.add_team(config.teams[0])
    other = FairshareQueue(stack, "Other", config=config.fairshare, queue_name="other",
                           windows=[Window("night", ("mon",), "20:00", "08:00")])
    assert other.add_team(config.teams[0]).cap_gpus == 3


def test_the_platform_app_deploys_a_config_with_windows_on_fair_share():
    """The whole app: each team's stack takes a team with windows (the windows are the platform's,
    checked with the whole config), and the platform stack's reclaimer carries them."""
    from cdk_gpu_share.stacks.app import build_platform

    app = new_app()
    built = build_platform(app, config_of(), checks=False)
    assembly = app.synth()
    names = [s.stack_name for s in built.stacks]
    assert names == ["gpu-share-platform", "gpu-share-team-research", "gpu-share-team-nightly"]
    settings = settings_of(assembly.get_stack_by_name("gpu-share-platform").template)
    assert [w["name"] for w in settings["windows"]] == ["night"]


def test_windows_with_the_reclaimer_disabled_are_refused_in_one_line(tmp_path, capsys):
    """Without the reclaim Lambda nothing would hold the teams to a window's values."""
    from cdk_gpu_share.cli import main

    raw = yaml.safe_load(CONFIG)
    raw["fairshare"]["reclaim"] = {"enabled": False}
    assert [str(p) for p in check_config(parse_config(raw))] == [
        "fairshare.reclaim.enabled: is false, but on fair share the reclaim Lambda is what holds the teams to each"
        " window's values (got False); enable the reclaimer (reclaim.enabled: true), or remove `windows` (and the"
        " teams' windows)"]
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["validate", str(path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    app = new_app()
    with pytest.raises(ConfigError, match=r"fairshare\.reclaim\.enabled: is false"):
        FairshareQueue.from_config(cdk.Stack(app, "Fleet"), "Fleet", config=parse_config(raw))
    del raw["windows"]
    for team in raw["teams"]:
        del team["windows"]
    assert check_config(parse_config(raw)) == []


def test_plan_says_how_fair_share_follows_the_windows():
    from cdk_gpu_share.core.plan import fleet_plan

    plan = fleet_plan(config_of(), now=datetime(2026, 1, 6, 12, tzinfo=timezone.utc))
    assert plan["windows"]["deployment"] == {"fairshare": [
        "the reclaim Lambda reads the values in force at each cycle (every 1 minute and when a job starts waiting);"
        " nothing is switched"]}
    assert plan["windows"]["not_deployed_on"] == []
