"""The MIG custom resource's whole lifecycle: the real handler, the provider framework's
sequence of events and CloudFormation's, against an in-memory SageMaker behind a real
boto3 client (tests/mig_lifecycle).

The invariant after every sequence: no endpoint, endpoint config or inference component
exists that the stack does not own (components added by hand are not the stack's to
judge), and the stack can be updated again (and then deleted, leaving nothing).
"""

from __future__ import annotations

import copy

import pytest

from cdk_gpu_share.inference.construct import PROVIDER_QUERY_INTERVAL, PROVIDER_TOTAL_TIMEOUT, SERVICE_TIMEOUT
from cdk_gpu_share.inference.handler import index as h
from tests.mig_lifecycle.cloudformation import STACK_ID, Stack
from tests.mig_lifecycle.sagemaker_model import Clock, SageMaker, arn

ROLE = "arn:aws:iam::111122223333:role/mig-inference-exec"
MIN = 60.0

ENDPOINT = {
    "Kind": "Endpoint",
    "EndpointBaseName": "small-models",
    "InstanceType": "ml.p4d.24xlarge",
    "InstanceCount": "1",
    "Layout": ["mig-3g.20gb", "mig-3g.20gb"],
    "ExecutionRoleArn": ROLE,
    "VariantName": "AllTraffic",
    "Tags": [{"Key": "gpu-share:endpoint", "Value": "small-models"}],
}


def component(model: str, *, image: str = "v1", initial: int = 2, lo: int = 1, hi: int = 7, profile: str = "mig-3g.20gb", team: str | None = None) -> dict:
    tags = [{"Key": "gpu-share:endpoint", "Value": "small-models"}]
    if team:
        tags.append({"Key": "gpu-share:team", "Value": team})
    return {
        "Kind": "InferenceComponent",
        "ComponentBaseName": f"small-models-{model}",
        "EndpointName": "${Endpoint.EndpointName}",
        "VariantName": "AllTraffic",
        "ModelName": f"small-models-{model}-{image}",
        "AcceleratorPartitionType": profile,
        "NumberOfAcceleratorDevicesRequired": "1",
        "MinMemoryRequiredInMb": "32768",
        "NumberOfCpuCoresRequired": "4",
        "CopyCount": str(initial),
        "MinCopyCount": str(lo),
        "MaxCopyCount": str(hi),
        "Tags": tags,
    }


def template(**changes) -> dict:
    t = {
        "Endpoint": copy.deepcopy(ENDPOINT),
        "ComponentQueryRewriter": component("query-rewriter", team="search"),
        "ComponentTicketTriage": component("ticket-triage", lo=2, team="support"),
    }
    for key, value in changes.items():
        t[key] = value
    return t


@pytest.fixture
def world(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(h, "_now", clock.now)
    sm = SageMaker(clock)
    stack = Stack(
        h,
        sm,
        query_interval=PROVIDER_QUERY_INTERVAL.to_seconds(),
        total_timeout=PROVIDER_TOTAL_TIMEOUT.to_seconds(),
        service_timeout=SERVICE_TIMEOUT.to_seconds(),
    )
    return stack, sm


# --------------------------------------------------------------------------- the invariant


def orphans(stack: Stack, sm: SageMaker) -> list[str]:
    """Every SageMaker resource the stack does not own, except hand-made ones and what was retained for them."""
    owned: set[str] = set()
    for r in stack.resources.values():
        owned.add(r.physical)
        if r.logical == "Endpoint" and r.physical in sm.endpoints:
            owned.add(sm.endpoints[r.physical].config)
    retained = {e.name for e in sm.endpoints.values() if h.TAG_RETAINED in e.tags}
    retained |= {sm.endpoints[e].config for e in retained}
    foreign = {c.name for c in sm.components.values() if c.by_hand}
    left = [f"endpoint {n}" for n in sm.endpoints if n not in owned | retained]
    left += [f"endpoint config {n}" for n in sm.configs if n not in owned | retained]
    left += [f"inference component {n}" for n in sm.components if n not in owned | foreign]
    return sorted(left)


def settle(sm: SageMaker, minutes: float = 90) -> None:
    """Let SageMaker finish whatever it was doing (a create nobody waits for still completes)."""
    sm.advance(minutes * MIN)


def assert_clean_and_updatable(stack: Stack, sm: SageMaker, base: dict | None = None) -> None:
    """The invariant: nothing unowned now, nor after SageMaker settles; an update and a delete still work."""
    assert orphans(stack, sm) == []
    settle(sm)
    assert orphans(stack, sm) == [], "something kept being created after CloudFormation stopped waiting"
    t = copy.deepcopy(base or template())
    if stack.status in ("ROLLBACK_COMPLETE", "NONE", "DELETE_COMPLETE"):
        assert stack.delete() == "DELETE_COMPLETE"
        assert stack.deploy(t) == "CREATE_COMPLETE", stack.reasons
    for props in t.values():
        props["Tags"] = props["Tags"] + [{"Key": "owner", "Value": "platform"}]
    assert stack.deploy(t) == "UPDATE_COMPLETE", stack.reasons
    assert orphans(stack, sm) == []
    assert stack.delete() == "DELETE_COMPLETE", stack.reasons
    foreign = {c.name for c in sm.components.values() if c.by_hand}
    left = sm.inventory()
    retained = {e.name for e in sm.endpoints.values() if h.TAG_RETAINED in e.tags}
    assert left["components"] <= foreign
    assert left["endpoints"] <= retained
    assert left["configs"] <= {sm.endpoints[e].config for e in retained}


def live_endpoint(stack: Stack, sm: SageMaker):
    return sm.endpoints[stack.resources["Endpoint"].physical]


def live_component(stack: Stack, sm: SageMaker, logical: str):
    return sm.components[stack.resources[logical].physical]


# --------------------------------------------------------------------------- timing (item 1)


def test_the_budgets_nest_inside_cloudformations_hour():
    assert SERVICE_TIMEOUT.to_seconds() <= 3600
    assert PROVIDER_TOTAL_TIMEOUT.to_seconds() <= 3600, "the provider framework allows at most one hour"
    assert h.BUDGET_SECONDS + 2 * PROVIDER_QUERY_INTERVAL.to_seconds() < PROVIDER_TOTAL_TIMEOUT.to_seconds()
    assert PROVIDER_TOTAL_TIMEOUT.to_seconds() + 2 * PROVIDER_QUERY_INTERVAL.to_seconds() < SERVICE_TIMEOUT.to_seconds()


# --------------------------------------------------------------------------- sequences


def test_create_update_delete(world):
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE", stack.reasons
    e = live_endpoint(stack, sm)
    assert e.status == "InService"
    assert e.tags[h.TAG_STACK] == STACK_ID and e.tags[h.TAG_LOGICAL] == "Endpoint"
    assert e.tags[h.TAG_GENERATION] == e.name.rsplit("-", 1)[1]
    for logical in ("ComponentQueryRewriter", "ComponentTicketTriage"):
        c = live_component(stack, sm, logical)
        assert (c.status, c.current, c.desired) == ("InService", 2, 2)
        assert c.tags[h.TAG_LOGICAL] == logical
    assert_clean_and_updatable(stack, sm)


def test_slow_create_fails_inside_the_hour_and_leaves_nothing(world):
    """Item 1: a capacity wait longer than the budget. CloudFormation must learn the name."""
    stack, sm = world
    sm.create_seconds = 75 * MIN
    assert stack.deploy(template()) == "ROLLBACK_COMPLETE"
    assert orphans(stack, sm) == []
    settle(sm)
    assert sm.inventory() == {"endpoints": set(), "configs": set(), "components": set()}
    reason = stack.reasons[0]
    name = h.endpoint_name(ENDPOINT)
    assert f"endpoint {name} is still Creating after 50 minutes" in reason
    assert "ServiceTimeout" not in " ".join(stack.reasons)
    # retry after the timeout, with capacity back: converges
    sm.create_seconds = 10 * MIN
    assert_clean_and_updatable(stack, sm)


def test_create_retry_after_a_timeout_adopts_or_recreates_what_is_left(world):
    """Retries after timeout: an endpoint of our name Failed from an earlier attempt is deleted and recreated."""
    stack, sm = world
    sm.fail_endpoints = ["Unable to provision requested ML compute capacity"]
    assert stack.deploy(template()) == "ROLLBACK_COMPLETE"
    assert "Unable to provision requested ML compute capacity" in stack.reasons[0]
    assert orphans(stack, sm) == []
    # A Failed endpoint of our name left behind by a handler that did not clean up:
    name = h.endpoint_name(ENDPOINT)
    sm.client.create_endpoint_config(EndpointConfigName=h.config_name(ENDPOINT), **h._config_request(ENDPOINT))
    sm.fail_endpoints = ["old failure from an earlier attempt"]
    sm.client.create_endpoint(EndpointName=name, EndpointConfigName=h.config_name(ENDPOINT))
    settle(sm, 20)
    assert sm.endpoints[name].status == "Failed"
    assert stack.delete() == "DELETE_COMPLETE"
    assert stack.deploy(template()) == "CREATE_COMPLETE", stack.reasons
    assert "old failure" not in " ".join(stack.reasons[1:])
    assert live_endpoint(stack, sm).status == "InService"
    assert_clean_and_updatable(stack, sm)


def test_resource_limit_exceeded_leaves_no_endpoint_config(world):
    """Item 3: CreateEndpoint refused after CreateEndpointConfig succeeded; then delete after failed create."""
    stack, sm = world
    sm.endpoint_quota["ml.p4d.24xlarge"] = 0
    assert stack.deploy(template()) == "ROLLBACK_COMPLETE"
    assert orphans(stack, sm) == []
    assert "ResourceLimitExceeded" in stack.reasons[0] or "service limit" in stack.reasons[0]
    assert f"deleted endpoint config {h.config_name(ENDPOINT)}" in stack.reasons[0]
    assert stack.delete() == "DELETE_COMPLETE"
    assert sm.inventory()["configs"] == set()
    sm.endpoint_quota["ml.p4d.24xlarge"] = 2
    assert_clean_and_updatable(stack, sm)


def test_layout_change_runs_both_endpoints_then_deletes_the_old(world):
    """The documented replacement cost: two endpoints (twice the instances) during the update."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    old = stack.resources["Endpoint"].physical
    new_layout = {**ENDPOINT, "Layout": ["mig-4g.20gb", "mig-3g.20gb"]}
    t = template(Endpoint=new_layout)
    assert stack.deploy(t) == "UPDATE_COMPLETE", stack.reasons
    assert sm.max_endpoints_seen == 2
    assert stack.resources["Endpoint"].physical == h.endpoint_name(new_layout) != old
    assert old not in sm.endpoints or old in sm.deleting
    settle(sm, 5)
    assert old not in sm.endpoints
    for logical in ("ComponentQueryRewriter", "ComponentTicketTriage"):
        assert live_component(stack, sm, logical).endpoint == h.endpoint_name(new_layout)
    assert_clean_and_updatable(stack, sm, t)


def test_failed_layout_replacement_is_cleaned_and_the_retry_converges(world):
    """Item 2: endpoint B goes Failed; the rollback deletes B and its config; the retry is not B's old failure."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    new_layout = {**ENDPOINT, "Layout": ["mig-4g.20gb", "mig-3g.20gb"]}
    b = h.endpoint_name(new_layout)
    sm.fail_endpoints = ["Unable to provision requested ML compute capacity"]
    assert stack.deploy(template(Endpoint=new_layout)) == "UPDATE_ROLLBACK_COMPLETE"
    assert f"endpoint {b} is Failed: Unable to provision" in stack.reasons[0]
    assert orphans(stack, sm) == []
    assert b not in sm.endpoints and not any(c.startswith(b) for c in sm.configs)
    # the same change again, capacity back: it succeeds
    assert stack.deploy(template(Endpoint=new_layout)) == "UPDATE_COMPLETE", stack.reasons[1:]
    assert live_endpoint(stack, sm).name == b
    assert_clean_and_updatable(stack, sm, template(Endpoint=new_layout))


def test_replacement_that_times_out_is_deleted_by_the_rollback(world):
    """Items 1 and 2: B still Creating at the budget; the rollback Update waits and deletes it."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    new_layout = {**ENDPOINT, "Layout": ["mig-4g.20gb", "mig-3g.20gb"]}
    sm.create_seconds = 70 * MIN
    assert stack.deploy(template(Endpoint=new_layout)) == "UPDATE_ROLLBACK_COMPLETE", stack.reasons
    assert orphans(stack, sm) == []
    assert f"endpoint {h.endpoint_name(new_layout)} is still Creating after 50 minutes" in stack.reasons[0]
    sm.create_seconds = 10 * MIN
    assert_clean_and_updatable(stack, sm)


def test_left_over_failed_replacement_is_recreated_not_reported(world):
    """Item 2, retries: B exists in Failed (an older handler left it); the layout change deletes and recreates it."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    new_layout = {**ENDPOINT, "Layout": ["mig-4g.20gb", "mig-3g.20gb"]}
    b = h.endpoint_name(new_layout)
    sm.client.create_endpoint_config(EndpointConfigName=h.config_name(new_layout), **h._config_request(new_layout))
    sm.fail_endpoints = ["B's old failure"]
    sm.client.create_endpoint(EndpointName=b, EndpointConfigName=h.config_name(new_layout))
    settle(sm, 20)
    assert stack.deploy(template(Endpoint=new_layout)) == "UPDATE_COMPLETE", stack.reasons
    assert live_endpoint(stack, sm).status == "InService"
    assert_clean_and_updatable(stack, sm, template(Endpoint=new_layout))


def test_rolled_back_instance_count_update_deletes_its_new_config(world):
    """Item 2: a non-replacing update SageMaker rolls back leaves no endpoint config behind."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    two = {**ENDPOINT, "InstanceCount": "2"}
    sm.fail_updates = ["Unable to provision requested ML compute capacity for 1 more instance"]
    assert stack.deploy(template(Endpoint=two)) == "UPDATE_ROLLBACK_COMPLETE"
    assert "rolled back" in stack.reasons[0]
    assert h.config_name(two) not in sm.configs
    assert orphans(stack, sm) == []
    assert_clean_and_updatable(stack, sm)


def test_update_rolled_back_by_a_later_failure_returns_to_the_old_config(world):
    """Item 2: the endpoint update succeeded, a component then failed; the rollback leaves one config."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    two = {**ENDPOINT, "InstanceCount": "2"}
    bad = component("query-rewriter", image="v2", team="search")
    bad["MinMemoryRequiredInMb"] = "not-a-number"
    assert stack.deploy(template(Endpoint=two, ComponentQueryRewriter=bad)) == "UPDATE_ROLLBACK_COMPLETE"
    assert live_endpoint(stack, sm).config == h.config_name(ENDPOINT)
    assert h.config_name(two) not in sm.configs
    assert_clean_and_updatable(stack, sm)


def test_failed_component_replacement_is_deleted_by_the_rollback(world):
    """Items 2 and 7: a profile change whose new component fails; the rollback deletes it."""
    stack, sm = world
    layout = {**ENDPOINT, "Layout": ["mig-4g.20gb", "mig-3g.20gb"]}
    base = template(Endpoint=layout)
    assert stack.deploy(base) == "CREATE_COMPLETE"
    # 9 copies of mig-4g.20gb wanted, 8 exist: the new component fails
    moved = component("query-rewriter", profile="mig-4g.20gb", initial=9, hi=9, team="search")
    assert stack.deploy(template(Endpoint=layout, ComponentQueryRewriter=moved)) == "UPDATE_ROLLBACK_COMPLETE"
    assert "not enough free mig-4g.20gb partitions" in stack.reasons[0]
    assert orphans(stack, sm) == []
    assert_clean_and_updatable(stack, sm, base)


def test_rolling_image_update_at_max_copies_fits(world):
    """Item 4: both models scaled to max (7 + 7 of 16); a new image rolls one copy at a time."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    for logical in ("ComponentQueryRewriter", "ComponentTicketTriage"):
        sm.autoscale(stack.resources[logical].physical, 7)
    t = template(
        ComponentQueryRewriter=component("query-rewriter", image="v2", team="search"),
        ComponentTicketTriage=component("ticket-triage", image="v2", lo=2, team="support"),
    )
    assert stack.deploy(t) == "UPDATE_COMPLETE", stack.reasons
    for logical, model in (("ComponentQueryRewriter", "query-rewriter"), ("ComponentTicketTriage", "ticket-triage")):
        c = live_component(stack, sm, logical)
        assert c.spec["ModelName"] == f"small-models-{model}-v2"
        assert c.current == c.desired == 7, "the autoscaler's copies survive the update"
    sent = [b for op, b in sm.calls if op == "UpdateInferenceComponent"]
    assert sent and all(
        b["DeploymentConfig"]["RollingUpdatePolicy"]["MaximumBatchSize"] == {"Type": "COPY_COUNT", "Value": 1}
        and b["DeploymentConfig"]["RollingUpdatePolicy"]["RollbackMaximumBatchSize"] == {"Type": "COPY_COUNT", "Value": 1}
        for b in sent
    )
    assert all("RuntimeConfig" not in b for b in sent)
    assert_clean_and_updatable(stack, sm, t)


def test_a_rolled_back_rolling_update_is_a_failure_not_done(world):
    """Item 5: InService again on the old model is not the requested state."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    # someone filled the free partitions by hand: the update has nowhere to roll
    sm.add_by_hand("someone-elses-model", stack.resources["Endpoint"].physical, "mig-3g.20gb", copies=12)
    settle(sm, 10)
    t = template(ComponentQueryRewriter=component("query-rewriter", image="v2", team="search"))
    assert stack.deploy(t) == "UPDATE_ROLLBACK_COMPLETE"
    assert "rolling update was rolled back" in stack.reasons[0]
    assert live_component(stack, sm, "ComponentQueryRewriter").spec["ModelName"] == "small-models-query-rewriter-v1"
    sm.components.pop("someone-elses-model")
    assert_clean_and_updatable(stack, sm)


def test_fixed_copy_change_completes_only_when_the_copies_run(world):
    """Item 5: a copy-count change is done when CurrentCopyCount reached it, not at the first InService."""
    stack, sm = world
    fixed = template(ComponentTicketTriage=component("ticket-triage", initial=2, lo=2, hi=2, team="support"))
    assert stack.deploy(fixed) == "CREATE_COMPLETE"
    three = template(ComponentTicketTriage=component("ticket-triage", initial=3, lo=3, hi=3, team="support"))
    sm.copy_seconds = 10 * MIN
    started = sm.clock.t
    assert stack.deploy(three) == "UPDATE_COMPLETE", stack.reasons
    c = live_component(stack, sm, "ComponentTicketTriage")
    assert c.current == c.desired == 3
    assert sm.clock.t - started >= 10 * MIN
    assert_clean_and_updatable(stack, sm, three)


def test_autoscaling_owns_the_copy_count_after_create(world):
    """Item 6: a changed copies.initial does not scale a loaded model in; a raised min does move it up."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    name = stack.resources["ComponentQueryRewriter"].physical
    sm.autoscale(name, 5)
    t = template(ComponentQueryRewriter=component("query-rewriter", initial=3, team="search"))
    assert stack.deploy(t) == "UPDATE_COMPLETE", stack.reasons
    assert sm.components[name].desired == 5
    assert not [b for op, b in sm.calls if op == "UpdateInferenceComponentRuntimeConfig"]
    raised = template(ComponentQueryRewriter=component("query-rewriter", initial=3, lo=6, team="search"))
    assert stack.deploy(raised) == "UPDATE_COMPLETE", stack.reasons
    assert sm.components[name].desired == 6
    assert_clean_and_updatable(stack, sm, raised)


def test_a_component_added_by_hand_does_not_make_delete_fail(world):
    """Item 7: Delete removes its own components, leaves the hand-made one, keeps and tags the endpoint."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    endpoint = stack.resources["Endpoint"].physical
    sm.add_by_hand("experiments-llm", endpoint, "mig-3g.20gb")
    settle(sm, 10)
    assert stack.delete() == "DELETE_COMPLETE", stack.reasons
    assert set(sm.components) == {"experiments-llm"}
    assert "experiments-llm" in sm.endpoints[endpoint].tags[h.TAG_RETAINED]
    assert not [b for op, b in sm.calls if op == "DeleteInferenceComponent" and b["InferenceComponentName"] == "experiments-llm"]
    assert orphans(stack, sm) == []


def test_tags_are_applied_on_update_too(world):
    """Item 7: a changed team tag reaches the running component and endpoint."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    t = template(ComponentQueryRewriter=component("query-rewriter", team="ranking"))
    t["Endpoint"]["Tags"] = t["Endpoint"]["Tags"] + [{"Key": "cost-center", "Value": "ml-42"}]
    assert stack.deploy(t) == "UPDATE_COMPLETE", stack.reasons
    assert live_component(stack, sm, "ComponentQueryRewriter").tags["gpu-share:team"] == "ranking"
    assert live_endpoint(stack, sm).tags["cost-center"] == "ml-42"
    assert_clean_and_updatable(stack, sm, t)


def test_delete_after_cloudformation_lost_the_physical_id(world):
    """Item 1: a Delete whose physical id is not ours (CloudFormation's own timeout) finds the endpoint by name."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    stack.resources["Endpoint"].physical = "mig-inference-Endpoint-TIMEDOUT"
    assert stack.delete() == "DELETE_COMPLETE", stack.reasons
    settle(sm, 10)
    assert sm.inventory() == {"endpoints": set(), "configs": set(), "components": set()}


def test_a_component_added_by_hand_during_a_layout_change_keeps_the_old_endpoint_only(world):
    """Item 7: the cleanup Delete of the old endpoint does not fail; the update completes on the new one."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    old = stack.resources["Endpoint"].physical
    sm.add_by_hand("experiments-llm", old, "mig-3g.20gb")
    settle(sm, 10)
    new_layout = {**ENDPOINT, "Layout": ["mig-4g.20gb", "mig-3g.20gb"]}
    assert stack.deploy(template(Endpoint=new_layout)) == "UPDATE_COMPLETE", stack.reasons
    assert not stack.reasons
    assert h.TAG_RETAINED in sm.endpoints[old].tags
    assert {c.name for c in sm.components.values() if c.endpoint == old} == {"experiments-llm"}
    assert orphans(stack, sm) == []
    assert_clean_and_updatable(stack, sm, template(Endpoint=new_layout))


def test_a_component_left_failed_by_an_earlier_attempt_is_recreated(world):
    """Retries converge for components too: a Failed component of our name is deleted and created again."""
    stack, sm = world
    assert stack.deploy(template(ComponentTicketTriage=component("ticket-triage", lo=2, team="support"))) == "CREATE_COMPLETE"
    endpoint = stack.resources["Endpoint"].physical
    extra = component("summarizer", team="search")
    extra["EndpointName"] = endpoint
    name = h.component_name(extra)
    sm.client.create_inference_component(
        InferenceComponentName=name, EndpointName=endpoint, VariantName="AllTraffic",
        Specification=h._specification(extra), RuntimeConfig={"CopyCount": 40},
    )
    settle(sm, 10)
    assert sm.components[name].status == "Failed"
    t = template(ComponentSummarizer=component("summarizer", hi=1, lo=1, initial=1, team="search"))
    t["ComponentQueryRewriter"] = component("query-rewriter", hi=5, team="search")  # 5 + 7 + 1 and 3 spare of 16
    assert stack.deploy(t) == "UPDATE_COMPLETE", stack.reasons
    assert live_component(stack, sm, "ComponentSummarizer").status == "InService"
    assert_clean_and_updatable(stack, sm, t)


def test_every_request_the_handler_sent_was_validated_by_the_vendored_model(world):
    """The client is botocore's with the asset's model: an invalid request never reaches the model."""
    import botocore.exceptions

    _, sm = world
    with pytest.raises(botocore.exceptions.ParamValidationError):
        sm.client.create_inference_component(InferenceComponentName="small-models-x", EndpointName="e", Specification={}, RuntimeConfig={"CopyCount": "two"})
    assert sm.calls == []


def test_first_deploy_whose_component_fails_rolls_back_to_nothing(world):
    """Delete after failed create: a component that cannot be placed; the rollback deletes it and the endpoint."""
    stack, sm = world
    greedy = component("query-rewriter", initial=17, lo=17, hi=17, team="search")
    assert stack.deploy(template(ComponentQueryRewriter=greedy)) == "ROLLBACK_COMPLETE"
    assert "not enough free mig-3g.20gb partitions for 17 copies" in " ".join(stack.reasons)
    assert orphans(stack, sm) == []
    settle(sm, 10)
    assert sm.inventory() == {"endpoints": set(), "configs": set(), "components": set()}
    assert_clean_and_updatable(stack, sm)


def test_slow_component_create_fails_inside_the_hour_and_the_retry_converges(world):
    """Retries after timeout: a component still Creating at the budget is deleted by the rollback."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    sm.component_seconds = 65 * MIN
    extra = component("summarizer", initial=1, lo=1, hi=1, team="search")
    t = template(ComponentSummarizer=extra, ComponentQueryRewriter=component("query-rewriter", hi=5, team="search"))
    assert stack.deploy(t) == "UPDATE_ROLLBACK_COMPLETE"
    assert "is still Creating after 50 minutes" in " ".join(stack.reasons)
    assert orphans(stack, sm) == []
    sm.component_seconds = 5 * MIN
    assert stack.deploy(t) == "UPDATE_COMPLETE", stack.reasons
    assert_clean_and_updatable(stack, sm, t)


# --------------------------------------------------------------------------- deletes are idempotent

HEALTH_CHECK = (
    "The primary container for production variant AllTraffic did not pass the ping health check. Please check"
    " CloudWatch logs for this endpoint."
)


def test_component_failed_on_create_is_deleted_and_the_rollback_waits_for_it(world):
    """Create -> a component goes Failed -> the handler deletes it and reports FAILED -> the rollback
    Delete arrives while that component is still Deleting: it waits, and the stack rolls back clean."""
    stack, sm = world
    sm.fail_components = [HEALTH_CHECK]
    failed = h.component_name({**component("query-rewriter"), "EndpointName": h.endpoint_name(ENDPOINT)})
    assert stack.deploy(template()) == "ROLLBACK_COMPLETE", stack.reasons
    assert stack.reasons == [f"ComponentQueryRewriter: inference component {failed} failed: {HEALTH_CHECK}; deleting it"]
    assert "Delete ComponentQueryRewriter SUCCESS" in stack.events
    deletes = [b for op, b in sm.calls if op == "DeleteInferenceComponent" and b["InferenceComponentName"] == failed]
    assert len(deletes) == 2, "the handler's own cleanup, then the rollback Delete's"
    refused = [m for op, b, m in sm.refused if op == "DeleteInferenceComponent"]
    assert refused == [f'Cannot delete inference component "{arn("inference-component", failed)}" while it is being deleted.'], (
        "the rollback Delete arrived while the failed component was still Deleting"
    )
    assert orphans(stack, sm) == []
    assert sm.inventory() == {"endpoints": set(), "configs": set(), "components": set()}
    assert_clean_and_updatable(stack, sm)


def test_delete_of_resources_already_gone_succeeds(world):
    """Everything was deleted outside CloudFormation: the stack's Delete finds nothing and is done."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    endpoint = stack.resources["Endpoint"].physical
    config = live_endpoint(stack, sm).config
    for logical in ("ComponentQueryRewriter", "ComponentTicketTriage"):
        sm.client.delete_inference_component(InferenceComponentName=stack.resources[logical].physical)
    settle(sm, 5)
    sm.client.delete_endpoint(EndpointName=endpoint)
    settle(sm, 5)
    sm.client.delete_endpoint_config(EndpointConfigName=config)
    assert sm.inventory() == {"endpoints": set(), "configs": set(), "components": set()}
    assert stack.delete() == "DELETE_COMPLETE", stack.reasons
    assert stack.reasons == []


def test_delete_of_components_already_deleting_waits_for_them(world):
    """Components someone started deleting: the stack's Delete waits until they are gone."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    names = [stack.resources[k].physical for k in ("ComponentQueryRewriter", "ComponentTicketTriage")]
    for name in names:
        sm.client.delete_inference_component(InferenceComponentName=name)
    assert stack.delete() == "DELETE_COMPLETE", stack.reasons
    assert sm.inventory() == {"endpoints": set(), "configs": set(), "components": set()}


def test_delete_of_an_endpoint_already_deleting_waits_for_it(world):
    """The endpoint is Deleting (started by hand) when the stack's Delete arrives: it waits, then deletes the config."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    endpoint = stack.resources["Endpoint"].physical
    for logical in ("ComponentQueryRewriter", "ComponentTicketTriage"):
        sm.client.delete_inference_component(InferenceComponentName=stack.resources[logical].physical)
        stack.resources.pop(logical)
    settle(sm, 5)
    sm.client.delete_endpoint(EndpointName=endpoint)
    assert sm._op_DescribeEndpoint({"EndpointName": endpoint})["EndpointStatus"] == "Deleting"
    started = sm.clock.t
    assert stack.delete() == "DELETE_COMPLETE", stack.reasons
    assert sm.clock.t - started >= sm.delete_seconds - stack.query_interval
    assert sm.inventory() == {"endpoints": set(), "configs": set(), "components": set()}


def test_a_delete_delivered_twice_while_the_first_waits_succeeds_twice(world):
    """The same Delete again while the component is Deleting, then the endpoint's: every answer is SUCCESS."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    names = {k: stack.resources[k].physical for k in ("ComponentQueryRewriter", "ComponentTicketTriage")}
    for logical, name in names.items():
        answers = stack.delete_delivered_twice(logical, after=stack.query_interval)
        assert [a.status for a in answers] == ["SUCCESS", "SUCCESS"], stack.reasons
        assert name not in sm.components, "SUCCESS only once the component is gone"
    endpoint = stack.resources["Endpoint"].physical
    answers = stack.delete_delivered_twice("Endpoint", after=stack.query_interval)
    assert [a.status for a in answers] == ["SUCCESS", "SUCCESS"], stack.reasons
    assert endpoint not in sm.endpoints
    assert sm.inventory() == {"endpoints": set(), "configs": set(), "components": set()}


def test_a_delete_sent_again_after_it_succeeded_succeeds(world):
    """A stack delete retried: each Delete arrives again once the first has removed everything."""
    stack, sm = world
    assert stack.deploy(template()) == "CREATE_COMPLETE"
    for logical in ("ComponentQueryRewriter", "ComponentTicketTriage", "Endpoint"):
        answers = stack.delete_delivered_twice(logical, after=20 * MIN)
        assert [a.status for a in answers] == ["SUCCESS", "SUCCESS"], stack.reasons
    assert stack.resources == {}
    assert sm.inventory() == {"endpoints": set(), "configs": set(), "components": set()}
