"""GpuShareDashboard: widgets and metrics per team, alarms and thresholds, cdk-nag, cfn-lint, snapshot."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Match, Template

from cdk_gpu_share.constructs.dashboard import GpuShareDashboard
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.records import metrics as m
from tests.helpers import assert_cfn_lint_clean, assert_nag_clean, new_app, scrub, synth

TEAMS = ["team-a", "team-b", "team-c"]
QUEUE = "gpu-share-fairshare"


@pytest.fixture(scope="module")
def built():
    """One App, three stacks: every option, the minimum, and a topic passed in."""
    app = new_app()
    full = cdk.Stack(app, "Full")
    fn = lambda_.Function.from_function_name(full, "Reclaimer", "gpu-share-reclaimer")
    full_dash = GpuShareDashboard(
        full, "Dashboard", queue_name=QUEUE, teams=TEAMS, reclaim_function=fn,
        alarm_emails=["gpu-oncall@example.com"], dashboard_name="gpu-sharing",
    )
    minimal = cdk.Stack(app, "Minimal")
    min_dash = GpuShareDashboard(
        minimal, "Dashboard", queue_name="q", teams=["solo"],
        lender_wait_threshold=cdk.Duration.minutes(30), period=cdk.Duration.minutes(1),
    )
    given = cdk.Stack(app, "GivenTopic")
    topic = sns.Topic.from_topic_arn(given, "Topic", "arn:aws:sns:us-east-1:111122223333:oncall")
    GpuShareDashboard(given, "Dashboard", queue_name="q", teams=["x", "y"], alarm_topic=topic)
    report = synth(app)
    return {
        "report": report,
        "full": Template.from_stack(full),
        "minimal": Template.from_stack(minimal),
        "given": Template.from_stack(given),
        "full_dash": full_dash,
        "min_dash": min_dash,
    }


def _body(template: Template) -> dict:
    """The dashboard body as JSON (tokens such as the region replaced by their reference)."""
    # The fair-share dashboard (a platform with batch_quota also has the share monitor's).
    (res,) = [r for k, r in template.find_resources("AWS::CloudWatch::Dashboard").items() if "ShareMonitor" not in k]
    body = res["Properties"]["DashboardBody"]
    if isinstance(body, dict):
        parts = body["Fn::Join"][1]
        body = "".join(p if isinstance(p, str) else "TOKEN" for p in parts)
    return json.loads(body)


def _widgets(template: Template) -> dict[str, dict]:
    return {w["properties"].get("title", w["type"]): w for w in _body(template)["widgets"]}


def _metric_rows(widget: dict) -> list[list]:
    return widget["properties"]["metrics"]


def _alarms(template: Template) -> dict[str, dict]:
    return {k: v["Properties"] for k, v in template.find_resources("AWS::CloudWatch::Alarm").items()}


# ---------------------------------------------------------------------------
# Dashboard


def test_one_usage_graph_per_team_with_usage_guarantee_and_borrowed(built):
    widgets = _widgets(built["full"])
    for team in TEAMS:
        rows = _metric_rows(widgets[f"{team}: GPUs used vs guarantee"])
        names = [r[1] for r in rows]
        assert names == [m.USAGE, m.GUARANTEE, m.BORROWED]
        for row in rows:
            assert row[0] == m.NAMESPACE
            assert row[2:6] == [m.DIM_QUEUE, QUEUE, m.DIM_TEAM, team]
            assert row[6]["stat"] == "Maximum"


def test_team_graphs_cover_borrowed_waits_pending_preemptions_and_reclaims(built):
    widgets = _widgets(built["full"])
    expected = {
        "GPUs borrowed, per team": (m.BORROWED, "Maximum"),
        "Longest wait within guarantee (s)": (m.LENDER_WAIT_SECONDS, "Maximum"),
        "Pending jobs, per team": (m.PENDING, "Maximum"),
        "Preemptions (jobs stopped), per team": (m.PREEMPTIONS, "Sum"),
        "Reclaims (capacity given back), per team": (m.RECLAIMS, "Sum"),
    }
    for title, (metric, stat) in expected.items():
        rows = _metric_rows(widgets[title])
        assert [(r[1], r[5], r[6]["stat"]) for r in rows] == [(metric, t, stat) for t in TEAMS], title
    assert widgets["GPUs borrowed, per team"]["properties"]["stacked"] is True


def test_wait_graph_marks_the_alarm_threshold(built):
    wait = _widgets(built["full"])["Longest wait within guarantee (s)"]["properties"]
    assert wait["annotations"]["horizontal"][0]["value"] == 900
    minimal = _widgets(built["minimal"])["Longest wait within guarantee (s)"]["properties"]
    assert minimal["annotations"]["horizontal"][0]["value"] == 1800


def test_reclaimer_health_graph(built):
    rows = _metric_rows(_widgets(built["full"])["Reclaimer health"])
    flat = [[c for c in r if not isinstance(c, dict)] for r in rows]
    assert [m.NAMESPACE, m.CYCLE_ERRORS, m.DIM_QUEUE, QUEUE] in flat
    lambda_rows = [r[:3] for r in flat if r[0] == "AWS/Lambda"]  # the function name is a token
    assert lambda_rows == [["AWS/Lambda", "Errors", "FunctionName"], ["AWS/Lambda", "Throttles", "FunctionName"]]
    assert [m.NAMESPACE, m.CYCLE_DURATION_MS, m.DIM_QUEUE, QUEUE] in flat
    # Without a function, only the reclaimer's own metrics.
    rows = _metric_rows(_widgets(built["minimal"])["Reclaimer health"])
    assert {r[0] for r in rows} == {m.NAMESPACE}


def test_alarm_status_widget_lists_every_alarm(built):
    widget = _widgets(built["full"])["Alarms"]
    assert widget["type"] == "alarm" and len(widget["properties"]["alarms"]) == len(TEAMS) + 1


def test_graph_period_follows_the_period_prop(built):
    usage = _metric_rows(_widgets(built["full"])["team-a: GPUs used vs guarantee"])[0][6]
    assert usage.get("period", 300) == 300  # CloudWatch's default: left out
    usage = _metric_rows(_widgets(built["minimal"])["solo: GPUs used vs guarantee"])[0][6]
    assert usage["period"] == 60


def test_dashboard_name_is_set_only_when_given(built):
    built["full"].has_resource_properties("AWS::CloudWatch::Dashboard", {"DashboardName": "gpu-sharing"})
    built["minimal"].has_resource_properties("AWS::CloudWatch::Dashboard", {"DashboardName": Match.absent()})


def test_dashboard_is_the_resource_child(built):
    assert built["full_dash"].node.default_child is built["full_dash"].dashboard


# ---------------------------------------------------------------------------
# Alarms


def test_one_wait_alarm_per_team_at_the_threshold(built):
    alarms = _alarms(built["full"])
    waits = [a for a in alarms.values() if a.get("MetricName") == m.LENDER_WAIT_SECONDS]
    assert sorted(a["Dimensions"][1]["Value"] for a in waits) == TEAMS
    for a in waits:
        assert a["Namespace"] == m.NAMESPACE
        assert a["Dimensions"][0] == {"Name": m.DIM_QUEUE, "Value": QUEUE}
        assert a["Threshold"] == 900
        assert a["ComparisonOperator"] == "GreaterThanThreshold"
        assert (a["Statistic"], a["Period"], a["EvaluationPeriods"]) == ("Maximum", 300, 1)
        assert a["TreatMissingData"] == "notBreaching"
        assert "within its guarantee" in a["AlarmDescription"]
    (solo,) = [a for a in _alarms(built["minimal"]).values() if a.get("MetricName") == m.LENDER_WAIT_SECONDS]
    assert (solo["Threshold"], solo["Period"]) == (1800, 60)


def test_error_alarm_adds_lambda_errors_to_cycle_errors(built):
    (err,) = [a for a in _alarms(built["full"]).values() if "Metrics" in a]
    expr = [q for q in err["Metrics"] if "Expression" in q]
    assert expr[0]["Expression"] == "FILL(cycleErrors, 0) + FILL(lambdaErrors, 0)"
    stats = {q["Id"]: q["MetricStat"] for q in err["Metrics"] if "MetricStat" in q}
    assert stats["cycleErrors"]["Metric"]["MetricName"] == m.CYCLE_ERRORS
    assert stats["lambdaErrors"]["Metric"]["Namespace"] == "AWS/Lambda"
    assert {s["Stat"] for s in stats.values()} == {"Sum"}
    assert err["Threshold"] == 1 and err["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_error_alarm_without_a_function_watches_cycle_errors(built):
    alarms = _alarms(built["minimal"])
    (err,) = [a for a in alarms.values() if a.get("MetricName") == m.CYCLE_ERRORS]
    assert err["Statistic"] == "Sum" and err["Dimensions"] == [{"Name": m.DIM_QUEUE, "Value": "q"}]


def test_no_topic_no_actions(built):
    t = built["minimal"]
    t.resource_count_is("AWS::SNS::Topic", 0)
    for a in _alarms(t).values():
        assert "AlarmActions" not in a and "OKActions" not in a


def test_emails_get_an_encrypted_ssl_only_topic_that_every_alarm_notifies(built):
    t = built["full"]
    t.resource_count_is("AWS::SNS::Topic", 1)
    (topic_id,) = t.find_resources("AWS::SNS::Topic")
    t.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})
    t.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    t.has_resource_properties("AWS::KMS::Key", {"KeyPolicy": {"Statement": Match.array_with([
        Match.object_like({"Principal": {"Service": "cloudwatch.amazonaws.com"},
                           "Action": ["kms:Decrypt", "kms:GenerateDataKey*"]}),
    ])}})
    t.has_resource_properties("AWS::SNS::TopicPolicy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}),
    ])}})
    t.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "gpu-oncall@example.com"})
    for a in _alarms(t).values():
        assert a["AlarmActions"] == [{"Ref": topic_id}] and a["OKActions"] == [{"Ref": topic_id}]


def test_a_given_topic_is_used_and_no_topic_is_created(built):
    t = built["given"]
    t.resource_count_is("AWS::SNS::Topic", 0)
    t.resource_count_is("AWS::KMS::Key", 0)
    alarms = _alarms(t)
    assert len(alarms) == 3
    for a in alarms.values():
        assert a["AlarmActions"] == ["arn:aws:sns:us-east-1:111122223333:oncall"]


# ---------------------------------------------------------------------------
# Metrics helpers


def test_metric_helpers_name_the_queue_and_the_team(built):
    dash = built["full_dash"]
    for method, name, stat in [
        (dash.metric_usage, m.USAGE, "Maximum"),
        (dash.metric_guarantee, m.GUARANTEE, "Maximum"),
        (dash.metric_borrowed, m.BORROWED, "Maximum"),
        (dash.metric_pending_jobs, m.PENDING, "Maximum"),
        (dash.metric_preemptions, m.PREEMPTIONS, "Sum"),
        (dash.metric_reclaims, m.RECLAIMS, "Sum"),
        (dash.metric_lender_wait, m.LENDER_WAIT_SECONDS, "Maximum"),
    ]:
        metric = method("team-b")
        assert (metric.namespace, metric.metric_name, metric.statistic) == (m.NAMESPACE, name, stat)
        assert metric.dimensions == {m.DIM_QUEUE: QUEUE, m.DIM_TEAM: "team-b"}
        assert metric.period.to_seconds() == 300
    assert dash.metric_usage("team-a", statistic="Average", period=cdk.Duration.minutes(1)).statistic == "Average"
    assert dash.metric_reclaim_errors().dimensions == {m.DIM_QUEUE: QUEUE}
    assert dash.metric_cycle_duration().metric_name == m.CYCLE_DURATION_MS


def test_metric_for_an_unknown_team_names_the_teams(built):
    with pytest.raises(ConfigError, match=r"team: is not a team of this dashboard \(got 'team-z'\); use one of team-a"):
        built["full_dash"].metric_usage("team-z")


# ---------------------------------------------------------------------------
# Gates


def test_nag_clean(built):
    assert_nag_clean(built["report"])


@pytest.mark.parametrize("name", ["full", "minimal", "given"])
def test_cfn_lint_clean(built, name):
    assert_cfn_lint_clean(built[name])


def test_snapshot(built, template_snapshot):
    assert scrub(built["full"].to_json()) == template_snapshot


# ---------------------------------------------------------------------------
# Bad props: raised at once, naming the prop, the value and the fix


def _new(**props):
    stack = cdk.Stack(cdk.App(), "S")
    kwargs = {"queue_name": "q", "teams": ["a"], **props}
    return GpuShareDashboard(stack, "D", **kwargs)


@pytest.mark.parametrize(
    "props, message",
    [
        ({"teams": []}, r"teams: is empty"),
        ({"teams": "team-a"}, r"teams: must be a list of team names"),
        ({"teams": ["a", "a"]}, r"teams\[1\]: is listed twice \(got 'a'\); list each team once"),
        ({"teams": ["a/b"]}, r"teams\[0\]: is not a team name"),
        ({"lender_wait_threshold": cdk.Duration.seconds(30)}, r"lender_wait_threshold: must be a Duration of at least 1 minute \(got '30 seconds'\)"),
        ({"period": cdk.Duration.seconds(90)}, r"period: must be a whole number of minutes \(got '1 minute 30 seconds'\)"),
        ({"reclaimer_error_threshold": 0}, r"reclaimer_error_threshold: must be a whole number of at least 1 \(got 0\)"),
        ({"dashboard_name": "gpu sharing!"}, r"dashboard_name: is not a valid CloudWatch dashboard name \(got 'gpu sharing!'\)"),
        ({"alarm_emails": ["oncall"]}, r"alarm_emails\[0\]: is not an e-mail address \(got 'oncall'\)"),
    ],
)
def test_bad_props_raise_config_error(props, message):
    with pytest.raises(ConfigError, match=message):
        _new(**props)


def test_emails_cannot_be_subscribed_to_an_imported_topic():
    stack = cdk.Stack(cdk.App(), "S")
    topic = sns.Topic.from_topic_arn(stack, "T", "arn:aws:sns:us-east-1:111122223333:t")
    with pytest.raises(ConfigError, match=r"alarm_emails: cannot be subscribed to an imported alarm_topic"):
        GpuShareDashboard(stack, "D", queue_name="q", teams=["a"], alarm_topic=topic, alarm_emails=["a@example.com"])


# ---------------------------------------------------------------------------
# In the platform stack (from_platform), by default


from cdk_gpu_share.core.configuration.parse import load_config, parse_config  # noqa: E402
from cdk_gpu_share.stacks.app import build_platform  # noqa: E402
from cdk_gpu_share.stacks.platform import PlatformStack  # noqa: E402
from tests.helpers import ROOT  # noqa: E402


def _fairshare_config(**reclaim) -> dict:
    return {
        "platform": {"name": "demo"},
        "teams": [
            {"name": "red", "guarantee": {"g5.xlarge": 1}},
            {"name": "blue", "guarantee": {"g5.xlarge": 1}},
            {"name": "quota-only", "guarantee": {"ml.g5.xlarge": 1}},
        ],
        "batch_quota": {"capacity": {"ml.g5.xlarge": 1}},
        "fairshare": {"capacity": {"g5.xlarge": 2}, "reclaim": reclaim},
    }


@pytest.fixture(scope="module")
def default_platform():
    """platform.yaml, composed as `make synth` does, with every gate on."""
    app = new_app()
    platform = build_platform(app, load_config(ROOT / "platform.yaml"), checks=False)
    report = synth(app)
    return platform, Template.from_stack(platform.platform), report


def test_the_platform_stack_has_the_dashboard_by_default(default_platform):
    platform, t, report = default_platform
    dash = platform.platform.dashboard
    assert isinstance(dash, GpuShareDashboard)
    assert dash.queue_name == "gpu-share-fairshare" == platform.platform.fairshare.job_queue_name
    assert dash.teams == ("team-a", "team-b", "team-c")
    t.resource_count_is("AWS::CloudWatch::Dashboard", 2)  # and the share monitor's, of the quota queue
    titles = set(_widgets(t))
    assert {f"{team}: GPUs used vs guarantee" for team in dash.teams} <= titles
    assert_nag_clean(report)


def test_platform_dashboard_uses_the_queue_name_the_reclaimer_emits(default_platform):
    platform, t, _ = default_platform
    assert platform.platform.fairshare.reclaim_settings()["queue"] == platform.platform.dashboard.queue_name
    rows = _metric_rows(_widgets(t)["team-a: GPUs used vs guarantee"])
    assert rows[0][2:4] == [m.DIM_QUEUE, "gpu-share-fairshare"]


def test_platform_threshold_covers_the_reclaimer_poll_and_delay(default_platform):
    platform, t, _ = default_platform
    # platform.yaml: 1-minute poll, reclaim after 60 s: 60 + 2 x 60 + 300 s < 15 minutes.
    dash = platform.platform.dashboard
    assert dash.lender_wait_threshold.to_seconds() == 900
    assert dash.period.to_seconds() == 300
    waits = [a for a in _alarms(t).values() if a.get("MetricName") == m.LENDER_WAIT_SECONDS]
    assert len(waits) == 3 and {a["Threshold"] for a in waits} == {900}


def test_platform_dashboard_shows_the_queue_alarms_and_does_not_page_twice(default_platform):
    platform, t, _ = default_platform
    dash = platform.platform.dashboard
    queue_alarms = platform.platform.fairshare.alarms
    assert queue_alarms and dash.related_alarms == tuple(queue_alarms)
    widget = _widgets(t)["Alarms"]
    assert len(widget["properties"]["alarms"]) == 3 + 1 + len(queue_alarms)
    # FairshareQueue alarms on the Lambda's errors: the dashboard's error alarm watches ReclaimErrors only.
    (err,) = [a for a in _alarms(t).values() if a.get("MetricName") == m.CYCLE_ERRORS]
    assert err["Dimensions"] == [{"Name": m.DIM_QUEUE, "Value": "gpu-share-fairshare"}]
    # ... while the health graph still shows the Lambda's errors and throttles.
    rows = _metric_rows(_widgets(t)["Reclaimer health"])
    assert [r[1] for r in rows if r[0] == "AWS/Lambda"] == ["Errors", "Throttles"]


def test_platform_stack_passes_cfn_lint_with_the_dashboard(default_platform):
    _, t, _ = default_platform
    assert_cfn_lint_clean(t)


def _platform(raw: dict) -> PlatformStack:
    return PlatformStack(cdk.App(), "P", config=parse_config(raw))


def test_from_platform_raises_the_default_threshold_above_a_slow_reclaimer():
    stack = _platform(_fairshare_config(schedule_minutes=10, reclaim_after_seconds=1200))
    dash = stack.dashboard
    # 1200 + 2 x 600 + 300 s = 45 minutes; the period follows the 10-minute poll.
    assert dash.lender_wait_threshold.to_minutes() == 45
    assert dash.period.to_minutes() == 10
    assert dash.teams == ("red", "blue")  # only the fair-share teams


def test_from_platform_rejects_a_threshold_the_reclaimer_always_exceeds():
    stack = _platform(_fairshare_config(schedule_minutes=5, reclaim_after_seconds=600))
    with pytest.raises(ConfigError, match=r"lender_wait_threshold: is not above what the reclaimer allows \(900 s"):
        GpuShareDashboard.from_platform(stack, "Again", platform=stack, lender_wait_threshold=cdk.Duration.minutes(15))
    ok = GpuShareDashboard.from_platform(stack, "Ok", platform=stack, lender_wait_threshold=cdk.Duration.minutes(20))
    assert ok.lender_wait_threshold.to_minutes() == 20


def test_no_dashboard_without_a_reclaimer_and_a_clear_error_when_asked_for():
    stack = _platform(_fairshare_config(enabled=False))
    assert stack.fairshare is not None and stack.dashboard is None
    with pytest.raises(ConfigError, match=r"fairshare.reclaim.enabled: turns the reclaimer off"):
        GpuShareDashboard.from_platform(stack, "Dash", platform=stack)


def test_no_dashboard_without_a_fairshare_queue():
    raw = _fairshare_config()
    del raw["fairshare"]
    raw["teams"] = [raw["teams"][2]]
    stack = _platform(raw)
    assert stack.dashboard is None
    with pytest.raises(ConfigError, match=r"platform.fairshare: has no fair-share queue"):
        GpuShareDashboard.from_platform(stack, "Dash", platform=stack)


@pytest.mark.parametrize("minutes", [1, 5, 10])
@pytest.mark.parametrize("labels", [True, False])
def test_graph_lines_render_as_graph_widgets_of_the_factory_metrics(minutes, labels):
    """The per-team graphs are rendered in Python (a Metric costs a jsii round trip); each line is
    what aws-cdk-lib's GraphWidget renders for the factory's own Metric."""
    from aws_cdk import aws_cloudwatch as cw

    from cdk_gpu_share.constructs._metrics import LABELS, ReclaimerMetrics

    stack = cdk.Stack(cdk.App(), "S")
    period = cdk.Duration.minutes(minutes)
    factory = ReclaimerMetrics(QUEUE, period=period, labels=labels)
    for name in LABELS:
        team = None if name in (m.CYCLE_ERRORS, m.CYCLE_DURATION_MS) else "team-a"
        for color in (None, "#1f77b4"):
            options = {} if color is None else {"color": color}
            metric = factory.metric(name, team, **options) if not labels else \
                factory._labelled(name, team, options)
            widget = cw.GraphWidget(left=[metric])
            (rendered,) = stack.resolve(widget.to_json())[0]["properties"]["metrics"]
            ours = factory.graph_line(name, team, period_seconds=minutes * 60, color=color)
            # Compared as JSON text: the key order is part of the template's bytes.
            assert json.dumps(stack.resolve(ours)) == json.dumps(rendered)
