"""alerts in the platform config: validation, and every alarm of the platform routed to one topic."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from aws_cdk.assertions import Match, Template

from cdk_gpu_share.constructs.alerts import AlarmRouting
from cdk_gpu_share.core.configuration.parse import parse_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.stacks.app import build_platform
from tests.helpers import assert_cfn_lint_clean, assert_nag_clean, new_app, synth

ROOT = Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((ROOT / "platform.yaml").read_text())
TOPIC = "arn:aws:sns:us-east-1:111122223333:gpu-alarms"


def config_with(alerts):
    raw = copy.deepcopy(BASE)
    raw["alerts"] = alerts
    return parse_config(raw, source="platform.yaml")


def test_alerts_parse():
    c = config_with({"emails": ["a@example.com", "b@example.com"]})
    assert c.alerts.emails == ("a@example.com", "b@example.com") and c.alerts.topic_arn is None
    c = config_with({"topic_arn": TOPIC})
    assert c.alerts.topic_arn == TOPIC and c.alerts.emails == ()
    assert parse_config(copy.deepcopy(BASE)).alerts is None


@pytest.mark.parametrize("alerts, field, message, fix", [
    ({"emails": ["oncall"]}, "alerts.emails[0]", "is not an e-mail address", "oncall@example.com"),
    ({"emails": ["a@example.com", "A@example.com"]}, "alerts.emails[1]", "is listed twice", "once"),
    ({"emails": "a@example.com b@example.com"}, "alerts.emails[0]", "is not an e-mail address", ""),
    ({"emails": {"a": 1}}, "alerts.emails", "must be a list", "emails: ["),
    ({"topic_arn": "gpu-alarms"}, "alerts.topic_arn", "is not an SNS topic ARN", "arn:aws:sns:"),
    ({"topic_arn": TOPIC, "emails": ["a@example.com"]}, "alerts.emails", "cannot be subscribed to an existing topic",
     "drop topic_arn"),
    ({"email": ["a@example.com"]}, "alerts.email", "is not a field of alerts", "use emails or topic_arn"),
    ({}, "alerts", "names no destination", "emails"),
    (["a@example.com"], "alerts", "must be a mapping", "alerts: {emails"),
])
def test_bad_alerts_name_field_value_and_fix(alerts, field, message, fix):
    with pytest.raises(ConfigError) as err:
        config_with(alerts)
    problems = [p for p in err.value.problems if p.field == field]
    assert problems, err.value
    assert message in problems[0].message and fix in problems[0].fix


def _alarms(t: Template) -> dict:
    return t.find_resources("AWS::CloudWatch::Alarm")


def test_every_alarm_of_the_default_platform_notifies_the_new_topic():
    app = new_app()
    platform = build_platform(app, config_with({"emails": ["gpu-oncall@example.com"]}), checks=False)
    report = synth(app)
    t = Template.from_stack(platform.platform)
    t.resource_count_is("AWS::SNS::Topic", 1)
    t.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})
    t.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "gpu-oncall@example.com"})
    # SSL only: the topic policy denies aws:SecureTransport false.
    t.has_resource_properties("AWS::SNS::TopicPolicy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})])}})
    (topic_id,) = t.find_resources("AWS::SNS::Topic")
    alarms = _alarms(t)
    # the dashboard's three wait alarms and its error alarm, and the fair-share queue's own alarms
    assert len(alarms) >= 4 + len(platform.platform.fairshare.alarms)
    for name, alarm in alarms.items():
        props = alarm["Properties"]
        assert props["AlarmActions"] == [{"Ref": topic_id}], name
        assert props["OKActions"] == [{"Ref": topic_id}], name
    assert len(platform.platform.alerts.routed) == len(alarms)
    assert_nag_clean(report)
    assert_cfn_lint_clean(t)


def test_an_imported_topic_gets_every_alarm_and_no_new_topic():
    app = new_app()
    platform = build_platform(app, config_with({"topic_arn": TOPIC}), checks=False)
    synth(app)
    t = Template.from_stack(platform.platform)
    t.resource_count_is("AWS::SNS::Topic", 0)
    t.resource_count_is("AWS::SNS::Subscription", 0)
    for alarm in _alarms(t).values():
        assert alarm["Properties"]["AlarmActions"] == [TOPIC]


def test_without_alerts_no_topic_is_created():
    app = new_app()
    platform = build_platform(app, parse_config(copy.deepcopy(BASE)), checks=False)
    synth(app)
    t = Template.from_stack(platform.platform)
    t.resource_count_is("AWS::SNS::Topic", 0)
    assert platform.platform.alerts is None


def test_routing_is_idempotent_and_the_construct_validates():
    import aws_cdk as cdk
    from aws_cdk import aws_cloudwatch as cw

    app = new_app()
    stack = cdk.Stack(app, "S")
    routing = AlarmRouting(stack, "Alerts", emails=["a@example.com"])
    routing.route(stack)
    routing.route(stack)  # twice: each alarm still gets one action
    metric = cw.Metric(namespace="X", metric_name="Y")
    cw.Alarm(stack, "A", metric=metric, threshold=1, evaluation_periods=1)
    synth(app)
    (alarm,) = _alarms(Template.from_stack(stack)).values()
    assert len(alarm["Properties"]["AlarmActions"]) == 1
    with pytest.raises(ConfigError, match=r"alerts.emails\[0\]: is not an e-mail address"):
        AlarmRouting(stack, "Bad", emails=["nope"])
