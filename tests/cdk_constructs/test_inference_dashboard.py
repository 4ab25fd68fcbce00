"""InferenceDashboard: per model of every MIG endpoint, requests, latency, errors and copies, built
from the same metric factory as MigInferenceEndpoint.metric_*; cdk-nag and cfn-lint clean."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from cdk_gpu_share.constructs.dashboard import InferenceDashboard
from cdk_gpu_share.core.configuration.parse import load_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.stacks.app import build_platform
from tests.helpers import assert_cfn_lint_clean, assert_nag_clean, new_app, synth

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def inference():
    app = new_app()
    platform = build_platform(app, load_config(ROOT / "examples" / "inference.yaml"), checks=False)
    report = synth(app)
    stack = platform.platform
    return stack, Template.from_stack(stack), report


def _body(template: Template, index: int = 0) -> tuple[dict, list]:
    # The inference dashboards (the platform also has the share monitor's, of its quota queue).
    dashboards = [r for k, r in template.find_resources("AWS::CloudWatch::Dashboard").items() if "ShareMonitor" not in k]
    body = dashboards[index]["Properties"]["DashboardBody"]
    tokens: list = []
    if isinstance(body, dict):
        parts = body["Fn::Join"][1]
        tokens = [p for p in parts if not isinstance(p, str)]
        body = "".join(p if isinstance(p, str) else "TOKEN" for p in parts)
    return json.loads(body), tokens


def test_every_model_gets_requests_latency_errors_and_copies(inference):
    stack, t, report = inference
    dash = stack.inference_dashboard
    assert isinstance(dash, InferenceDashboard)
    body, _ = _body(t)
    titles = [w["properties"].get("title") for w in body["widgets"]]
    models = [(e.base_name, m) for e in stack.endpoints for m in e.models]
    assert models
    for base, model in models:
        for suffix in ("requests", "model latency (µs)", "errors", "copies"):
            assert f"{base} / {model}: {suffix}" in titles
    widgets = {w["properties"].get("title"): w for w in body["widgets"]}
    base, model = models[0]
    requests = widgets[f"{base} / {model}: requests"]["properties"]["metrics"]
    assert requests[0][:3] == ["AWS/SageMaker", "Invocations", "InferenceComponentName"]
    latency = widgets[f"{base} / {model}: model latency (µs)"]["properties"]["metrics"]
    assert [row[-1]["stat"] for row in latency] == ["p50", "p90"]
    errors = widgets[f"{base} / {model}: errors"]["properties"]["metrics"]
    assert [row[1] for row in errors] == ["Invocation4XXErrors", "Invocation5XXErrors", "InvocationModelErrors"]
    copies = widgets[f"{base} / {model}: copies"]["properties"]["metrics"]
    assert copies[0][0]["expression"] == "IF(perCopy > 0, invocations / perCopy, 0)"
    assert {row[1] for row in copies[1:]} == {"Invocations", "InvocationsPerCopy"}
    assert_nag_clean(report)
    assert_cfn_lint_clean(t)


def test_dashboard_and_endpoint_metrics_are_the_same_metric(inference):
    stack, _, _ = inference
    endpoint = stack.endpoints[0]
    model = next(iter(endpoint.models))
    a = endpoint.metric_invocations(model)
    b = endpoint.metrics.metric_invocations(model)
    assert (a.namespace, a.metric_name, a.dimensions, a.statistic) == (b.namespace, b.metric_name, b.dimensions,
                                                                       b.statistic)
    assert a.dimensions == {"InferenceComponentName": endpoint.inference_component_name(model)}
    with pytest.raises(ConfigError, match="is not a model of this endpoint"):
        endpoint.metrics.metric_invocations("nope")


def test_no_endpoints_is_an_error():
    app = new_app()
    stack = cdk.Stack(app, "S")
    with pytest.raises(ConfigError, match=r"endpoints: is empty"):
        InferenceDashboard(stack, "D", endpoints=[])


def test_the_default_platform_has_no_inference_dashboard():
    app = new_app()
    platform = build_platform(app, load_config(ROOT / "platform.yaml"), checks=False)
    assert platform.platform.inference_dashboard is None
