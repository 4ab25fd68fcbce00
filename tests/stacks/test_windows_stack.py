"""Time windows deployed on Batch quota management and HyperPod (examples/windows.yaml): the
windows' stack with the quota window switcher, after the platform and every team stack; the
same config without windows synthesizes as before."""

from __future__ import annotations

import copy
import json
import re
from datetime import datetime, timezone

import pytest
import yaml
from aws_cdk.assertions import Template

from cdk_gpu_share import __version__
from cdk_gpu_share.core.configuration.parse import load_config, parse_config
from cdk_gpu_share.core.records.history import policy_hash
from cdk_gpu_share.lambdas.quota_switcher import handler as h
from cdk_gpu_share.stacks.app import build_platform
from tests.batch_model import Clock
from tests.helpers import ROOT, assert_nag_clean, cfn_lint_findings, new_app, synth
from tests.quota_model import QUEUE, AlarmModel, ComputeQuotaModel, QuotaQueueModel

EXAMPLE = ROOT / "examples" / "windows.yaml"
G5, P5 = "ml.g5.12xlarge", "ml.p5.48xlarge"
HANDLER = "cdk_gpu_share.lambdas.quota_switcher.handler.handler"


def _build(raw: dict | None = None):
    app = new_app()
    config = load_config(EXAMPLE) if raw is None else parse_config(raw)
    platform = build_platform(app, config, checks=False)
    return platform, synth(app)


def _without_windows() -> dict:
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw.pop("windows")
    for team in raw["teams"]:
        team.pop("windows", None)
    return raw


@pytest.fixture(scope="module")
def windowed():
    return _build()


@pytest.fixture(scope="module")
def template(windowed):
    platform, _ = windowed
    return Template.from_stack(platform.windows).to_json()


def _of_type(template: dict, kind: str) -> dict[str, dict]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def _switcher(template: dict) -> dict:
    (function,) = [r for r in _of_type(template, "AWS::Lambda::Function").values()
                   if r["Properties"].get("Handler") == HANDLER]
    return function


def _text(value, imports) -> str:
    """A template string value with each ``Fn::ImportValue`` replaced by ``imports(name)`` (and
    each ``Ref`` by ``<name>``)."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return f"<{value['Ref']}>"
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_text(p, imports) for p in parts)
    if "Fn::ImportValue" in value:
        return imports(value["Fn::ImportValue"])
    raise AssertionError(f"unexpected intrinsic {value}")


def _settings(template: dict, imports=lambda name: f"<{name}>") -> dict:
    env = _switcher(template)["Properties"]["Environment"]["Variables"][h.SETTINGS_ENV]
    return json.loads(_text(env, imports))


def test_the_windows_stack_comes_after_the_platform_and_every_team(windowed):
    platform, _ = windowed
    assert [s.stack_name for s in platform.stacks] == [
        "windows-share-platform", "windows-share-team-research", "windows-share-team-nightly",
        "windows-share-team-applied", "windows-share-windows"]
    assert set(platform.windows.dependencies) == {platform.platform, *platform.teams.values()}


def test_one_schedule_per_boundary_in_the_windows_own_time_zone(template):
    schedules = _of_type(template, "AWS::Scheduler::Schedule")
    got = sorted((s["Properties"]["ScheduleExpressionTimezone"], s["Properties"]["ScheduleExpression"],
                  json.loads(s["Properties"]["Target"]["Input"])["boundary"]) for s in schedules.values())
    assert got == [("America/New_York", "cron(0 18 ? * SUN *)", "close"),
                   ("America/New_York", "cron(0 9 ? * SUN *)", "open"),
                   ("Europe/Berlin", "cron(0 20 ? * MON,TUE,WED,THU,FRI *)", "open"),
                   ("Europe/Berlin", "cron(0 8 ? * TUE,WED,THU,FRI,SAT *)", "close")]
    function = next(k for k, r in _of_type(template, "AWS::Lambda::Function").items()
                    if r["Properties"].get("Handler") == HANDLER)
    assert all(s["Properties"]["Target"]["Arn"] == {"Fn::GetAtt": [function, "Arn"]} for s in schedules.values())


def test_the_switchers_settings_hold_the_windows_and_each_windowed_teams_values_in_api_units(template):
    settings = _settings(template)
    assert [w["name"] for w in settings["windows"]] == ["night", "sunday"]
    assert settings["windows"][0] == {"name": "night", "days": ["mon", "tue", "wed", "thu", "fri"],
                                      "start": "20:00", "end": "08:00", "timezone": "Europe/Berlin"}
    targets = {(t["kind"], t["team"]): t for t in settings["targets"]}
    # The team without windows is never switched: its share is the template's at every hour.
    assert sorted(targets) == [("batch", "nightly"), ("batch", "research"),
                               ("hyperpod", "nightly"), ("hyperpod", "research")]
    queue = "<windows-share-platform:ExportsOutputFnGetAttSharedGpuQuotaBatch68C5366DJobQueueArn6CCB72B3>"
    research = targets[("batch", "research")]
    assert research["id"] == f"{queue}/quota-share/research"
    assert research["base"] == {"capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}],
                                "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": 100}}
    assert research["windows"]["night"] == {
        "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 1}],
        "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": 50}}
    assert research["windows"]["sunday"] == research["base"]  # only its HyperPod quota changes on Sundays
    nightly = targets[("batch", "nightly")]
    assert nightly["windows"] == {"night": {"capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}],
                                            "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW",
                                                                             "borrowLimit": 0}}}
    quota = targets[("hyperpod", "research")]
    assert quota["id"] == "<windows-share-team-research:ExportsOutputFnGetAttComputeQuotaComputeQuotaId17EFDD14>"
    assert quota["base"] == {"ComputeQuotaConfig": {
        "ComputeQuotaResources": [{"InstanceType": P5, "Count": 2}],
        "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 100}}}
    assert quota["windows"]["sunday"]["ComputeQuotaConfig"]["ComputeQuotaResources"] == [
        {"InstanceType": P5, "Count": 3}]
    assert quota["windows"]["night"]["ComputeQuotaConfig"] == {
        "ComputeQuotaResources": [{"InstanceType": P5, "Count": 1}],
        "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 50}}


def test_a_compute_quotas_id_is_the_one_its_team_stack_deploys(windowed):
    platform, _ = windowed
    team = Template.from_stack(platform.teams["research"]).to_json()
    (quota,) = _of_type(team, "AWS::SageMaker::ComputeQuota")
    export = team["Outputs"]["ExportsOutputFnGetAttComputeQuotaComputeQuotaId17EFDD14"]
    assert export["Value"] == {"Fn::GetAtt": [quota, "ComputeQuotaId"]}
    assert export["Export"]["Name"] == "windows-share-team-research:ExportsOutputFnGetAttComputeQuotaComputeQuotaId17EFDD14"


def test_the_run_after_each_deploy_follows_every_share_and_quota_and_reruns_when_they_change(windowed, template):
    platform, _ = windowed
    (run,) = _of_type(template, "Custom::GpuShareQuotaWindow").values()
    config = load_config(EXAMPLE)
    assert run["Properties"]["Deployed"] == f"{policy_hash(config)} {__version__}"
    assert json.loads(_text(run["Properties"]["Settings"], lambda n: f"<{n}>")) == _settings(template)
    # A change the switcher's values do not show (a share's in-team preemption) still makes
    # CloudFormation update the share, with the base: the run after the deploy runs again.
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["teams"][0]["in_team_preemption"] = True
    assert policy_hash(parse_config(raw)) != policy_hash(config)
    # The team stacks (the shares and quotas) deploy before this stack.
    assert set(platform.teams.values()) <= set(platform.windows.dependencies)


def test_the_not_applied_alarm_notifies_the_platforms_alarm_topic(windowed, template):
    platform, _ = windowed
    # The function's errors, the boundaries the scheduler could not deliver, the runs Lambda dropped.
    alarms = _of_type(template, "AWS::CloudWatch::Alarm").values()
    assert len(alarms) == 3
    topic = platform.platform.get_logical_id(platform.platform.alerts.topic.node.default_child)
    exports = {o["Export"]["Name"]: o["Value"] for o in
               Template.from_stack(platform.platform).to_json()["Outputs"].values() if "Export" in o}
    for alarm in alarms:
        props = alarm["Properties"]
        assert props["AlarmDescription"].startswith("Quota window not applied")
        (action,) = props["AlarmActions"]
        assert props["OKActions"] == [action]
        assert exports[action["Fn::ImportValue"]] == {"Ref": topic}


def test_the_windowed_platform_is_nag_and_cfn_lint_clean(windowed):
    platform, report = windowed
    assert_nag_clean(report)
    for stack in platform.stacks:
        findings = cfn_lint_findings(Template.from_stack(stack).to_json(), "EWI")
        assert not findings, f"{stack.stack_name}:\n" + "\n".join(findings)


def test_without_windows_the_same_config_deploys_the_same_templates_and_no_switcher(windowed):
    platform, _ = windowed
    plain, _ = _build(_without_windows())
    assert plain.windows is None
    assert [s.stack_name for s in plain.stacks] == [s.stack_name for s in platform.stacks][:-1]
    for before, after in zip(plain.stacks, platform.stacks, strict=False):
        base = Template.from_stack(before).to_json()
        windowed_template = copy.deepcopy(Template.from_stack(after).to_json())
        # The windowed platform differs only by what its windows' stack imports.
        outputs = windowed_template.get("Outputs", {})
        added = sorted(set(outputs) - set(base.get("Outputs", {})))
        assert all(k.startswith("ExportsOutput") for k in added), added
        for k in added:
            outputs.pop(k)
        # The job archive names the policy its jobs ran under: windows are part of it.
        assert _policy_named(windowed_template) == _policy_named(base), before.stack_name
        assert not _of_type(base, "AWS::Scheduler::Schedule")


def _policy_named(template: dict) -> str:
    return re.sub(r"config=[0-9a-f]{12}/", "config=<policy>/", json.dumps(template, sort_keys=True))


def _concrete(template: dict) -> tuple[dict, dict[str, str]]:
    """The switcher's settings with the queue's ARN and the compute quotas' ids made concrete."""
    ids = {"research": "researchqt01", "nightly": "nightlyqt001"}

    def imports(name: str) -> str:
        if "JobQueueArn" in name:
            return QUEUE
        return ids[name.split(":")[0].removeprefix("windows-share-team-")]

    return _settings(template, imports), ids


def test_the_synthesized_switcher_puts_both_backends_at_the_window_of_its_own_clock(template, monkeypatch):
    settings, ids = _concrete(template)
    monkeypatch.setenv(h.SETTINGS_ENV, json.dumps(settings))
    # Wednesday 3 March 2027, 21:00 in Berlin (UTC+1): the night is open.
    clock = Clock(datetime(2027, 3, 3, 20, tzinfo=timezone.utc).timestamp())
    batch = QuotaQueueModel(shares={"research": {G5: 2}, "nightly": {G5: 1}, "applied": {G5: 1}}, clock=clock,
                            capacity={G5: 4}, borrow_limits={"research": 100, "nightly": 200, "applied": 0})
    hyperpod = ComputeQuotaModel(quotas={ids[t]: copy.deepcopy(settings_target(settings, "hyperpod", t)["base"]
                                                               ["ComputeQuotaConfig"]) for t in ids},
                                 capacity={P5: 4})
    monkeypatch.setattr(h, "_client", lambda kind: batch.batch if kind == "batch" else hyperpod.client)
    monkeypatch.setattr(h, "_now", clock)
    monkeypatch.setattr(h, "_sleep", lambda s: None)
    assert h.handler({"RequestType": "Create"})["Data"] == {"Window": "night"}
    assert batch.shares == {"research": {G5: 1}, "nightly": {G5: 2}, "applied": {G5: 1}}
    assert batch.borrow_limits == {"research": 50, "nightly": 0, "applied": 0}
    assert {t: hyperpod.counts(q) for t, q in ids.items()} == {"research": {P5: 1}, "nightly": {P5: 3}}
    assert batch.overcommitted == hyperpod.overcommitted == []
    # Sunday 7 March, 12:00 in New York (UTC-5): research's HyperPod quota rises, Batch is the base.
    clock.t = datetime(2027, 3, 7, 17, tzinfo=timezone.utc).timestamp()
    assert h.handler({"detail-type": "Scheduled Event"})["window"] == "sunday"
    assert batch.shares == {"research": {G5: 2}, "nightly": {G5: 1}, "applied": {G5: 1}}
    assert {t: hyperpod.counts(q) for t, q in ids.items()} == {"research": {P5: 3}, "nightly": {P5: 1}}
    assert batch.overcommitted == hyperpod.overcommitted == []


def settings_target(settings: dict, kind: str, team: str) -> dict:
    return next(t for t in settings["targets"] if t["kind"] == kind and t["team"] == team)


def test_a_switch_that_cannot_be_applied_raises_the_synthesized_alarm(template, monkeypatch):
    settings, ids = _concrete(template)
    monkeypatch.setenv(h.SETTINGS_ENV, json.dumps(settings))
    at = datetime(2027, 3, 3, 20, tzinfo=timezone.utc).timestamp()
    clock = Clock(at)
    batch = QuotaQueueModel(shares={"research": {G5: 2}, "nightly": {G5: 1}}, clock=clock, capacity={G5: 4})
    batch.script["UpdateQuotaShare"] = ["error"] * 100
    hyperpod = ComputeQuotaModel(quotas={q: settings_target(settings, "hyperpod", t)["base"]["ComputeQuotaConfig"]
                                         for t, q in ids.items()}, capacity={P5: 4})
    monkeypatch.setattr(h, "_client", lambda kind: batch.batch if kind == "batch" else hyperpod.client)
    monkeypatch.setattr(h, "_now", clock)
    monkeypatch.setattr(h, "_sleep", lambda s: None)
    (alarm,) = [a for a in _of_type(template, "AWS::CloudWatch::Alarm").values()
                if a["Properties"].get("MetricName") == "Errors"]
    errors = AlarmModel.of(alarm["Properties"])
    assert errors.state(at + 600) == "OK"
    with pytest.raises(h.SwitchFailed, match="research"):
        h.handler({"detail-type": "Scheduled Event"})
    errors.points.append((at, 1.0))  # the invocation's error, as Lambda counts it
    assert errors.state(at + 300) == "ALARM"


def test_summary_lists_the_schedules_of_the_windows(windowed, capsys):
    from cdk_gpu_share.cli import main

    platform, _ = windowed
    assert main(["summary", platform.platform.node.root.outdir]) == 0
    out = capsys.readouterr().out
    assert "5 stacks" in out
    block = out.split("time windows (each boundary runs the quota window switcher, in the window's time zone):\n")[1]
    assert block.splitlines()[:4] == [
        "  windows-share-windows: night closes cron(0 8 ? * TUE,WED,THU,FRI,SAT *) Europe/Berlin",
        "  windows-share-windows: night opens cron(0 20 ? * MON,TUE,WED,THU,FRI *) Europe/Berlin",
        "  windows-share-windows: sunday closes cron(0 18 ? * SUN *) America/New_York",
        "  windows-share-windows: sunday opens cron(0 9 ? * SUN *) America/New_York"]


def test_a_team_stack_deployed_alone_runs_the_switcher_after_its_update(template):
    (rule,) = _of_type(template, "AWS::Events::Rule").values()
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["source"] == ["aws.cloudformation"]
    assert pattern["detail-type"] == ["CloudFormation Stack Status Change"]
    assert pattern["detail"]["status-details"] == {"status": ["UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE"]}
    prefixes = [_text(p["prefix"], lambda n: f"<{n}>") for p in pattern["detail"]["stack-id"]]
    # Only the stacks of teams with window values: the applied team's share never changes.
    assert [p.split(":stack/")[1] for p in prefixes] == ["windows-share-team-research/", "windows-share-team-nightly/"]
    function = next(k for k, r in _of_type(template, "AWS::Lambda::Function").items()
                    if r["Properties"].get("Handler") == HANDLER)
    (target,) = rule["Properties"]["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [function, "Arn"]}
    assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 2}


def test_a_team_that_drops_its_windows_keeps_exporting_its_compute_quota_id(windowed):
    # CloudFormation refuses to remove an export that another stack still imports, and the team's
    # stack deploys before the windows' stack stops importing it.
    platform, _ = windowed
    before = Template.from_stack(platform.teams["nightly"]).to_json()["Outputs"]
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["teams"][1].pop("windows")
    dropped, _ = _build(raw)
    after = Template.from_stack(dropped.teams["nightly"]).to_json()["Outputs"]
    name = "ExportsOutputFnGetAttComputeQuotaComputeQuotaId17EFDD14"
    assert after[name] == before[name]
    settings = _settings(Template.from_stack(dropped.windows).to_json())
    assert sorted((t["kind"], t["team"]) for t in settings["targets"]) == [("batch", "research"),
                                                                           ("hyperpod", "research")]
