"""The MIG endpoint custom-resource handler against botocore's Stubber: the exact requests.

Every request is validated against a real SageMaker service model: the one vendored
into the Lambda asset (what the function runs with) and the installed botocore's. The
lifecycle (sequences of CloudFormation events, failures, rollbacks) is in
tests/inference/test_handler_lifecycle.py.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import json
import os
from pathlib import Path

import botocore.session
import pytest
from botocore.stub import ANY, Stubber

from cdk_gpu_share.inference.handler import _vendor
from cdk_gpu_share.inference.handler import index as h

DATA = Path(h.__file__).resolve().parent / "data"
ROLE = "arn:aws:iam::111122223333:role/gpu-share-mig-exec"
NOW = dt.datetime(2026, 11, 30, tzinfo=dt.timezone.utc)


@functools.cache
def _client(data_path: str | None):
    session = botocore.session.get_session()
    if data_path:
        session.set_config_variable("data_path", data_path)
    return session.create_client(
        "sagemaker", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test"
    )


@pytest.fixture(params=["vendored", "installed"])
def sm(request):
    client = _client(str(DATA) if request.param == "vendored" else None)
    with Stubber(client) as stubber:
        client.stubber = stubber
        yield client
        stubber.assert_no_pending_responses()


ENDPOINT_PROPS = {
    "Kind": "Endpoint",
    "EndpointBaseName": "small-models",
    "InstanceType": "ml.p4d.24xlarge",
    "InstanceCount": "1",  # CloudFormation passes numbers as strings
    "Layout": ["mig-3g.20gb", "mig-3g.20gb"],
    "ExecutionRoleArn": ROLE,
    "VariantName": "AllTraffic",
    "Tags": [{"Key": "gpu-share:platform", "Value": "demo"}],
}
COMPONENT_PROPS = {
    "Kind": "InferenceComponent",
    "ComponentBaseName": "small-models-summarizer",
    "EndpointName": "small-models-abc123",
    "VariantName": "AllTraffic",
    "ModelName": "Model-summarizer-XYZ",
    "AcceleratorPartitionType": "mig-3g.20gb",
    "NumberOfAcceleratorDevicesRequired": "1",
    "MinMemoryRequiredInMb": "16384",
    "NumberOfCpuCoresRequired": "4",
    "CopyCount": "2",
    "MinCopyCount": "1",
    "MaxCopyCount": "4",
}


def event(request_type, props, *, old=None, physical=None):
    e = {
        "RequestType": request_type,
        "ResourceType": "Custom::GpuShareMigEndpoint",
        "LogicalResourceId": "Endpoint",
        "StackId": "arn:aws:cloudformation:us-east-1:111122223333:stack/demo/1",
        "RequestId": "req-1",
        "ResourceProperties": copy.deepcopy(props),
    }
    if old is not None:
        e["OldResourceProperties"] = copy.deepcopy(old)
    if physical is not None:
        e["PhysicalResourceId"] = physical
    return e


def endpoint_arn(name):
    return f"arn:aws:sagemaker:us-east-1:111122223333:endpoint/{name}"


def ic_arn(name):
    return f"arn:aws:sagemaker:us-east-1:111122223333:inference-component/{name}"


def describe_endpoint(name, status, config, reason=None):
    out = {
        "EndpointName": name,
        "EndpointArn": endpoint_arn(name),
        "EndpointConfigName": config,
        "EndpointStatus": status,
        "CreationTime": NOW,
        "LastModifiedTime": NOW,
    }
    if reason:
        out["FailureReason"] = reason
    return out


def not_found(stubber, method, message, expected=None):
    stubber.add_client_error(
        method, service_error_code="ValidationException", service_message=message, http_status_code=400,
        expected_params=expected,
    )


# --------------------------------------------------------------------------- endpoint


def with_data(e, result):
    """The provider framework hands on_event's result (physical id, Data) to is_complete."""
    return {**e, **result}


def test_create_on_event_names_the_endpoint_and_calls_nothing(sm):
    """Nothing is created in on_event: a failed Create there would get the framework's marker."""
    result = h.handle_on_event(event("Create", ENDPOINT_PROPS), sm)
    name = h.endpoint_name(ENDPOINT_PROPS)
    assert result["PhysicalResourceId"] == name
    assert name.startswith("small-models-") and len(name) == len("small-models-") + 6
    assert result["Data"]["EndpointConfigName"] == h.config_name(ENDPOINT_PROPS)
    assert float(result["Data"]["Deadline"]) > 0


def _ownership(name):
    return [
        {"Key": "gpu-share:platform", "Value": "demo"},
        {"Key": h.TAG_STACK, "Value": "arn:aws:cloudformation:us-east-1:111122223333:stack/demo/1"},
        {"Key": h.TAG_LOGICAL, "Value": "Endpoint"},
        {"Key": h.TAG_GENERATION, "Value": name.rsplit("-", 1)[1]},
    ]


def test_create_sends_the_layout_without_model_name_and_ownership_tags(sm):
    name = h.endpoint_name(ENDPOINT_PROPS)
    cfg = h.config_name(ENDPOINT_PROPS)
    e = with_data(event("Create", ENDPOINT_PROPS), h.handle_on_event(event("Create", ENDPOINT_PROPS), sm))
    not_found(sm.stubber, "describe_endpoint", f'Could not find endpoint "{endpoint_arn(name)}".', {"EndpointName": name})
    sm.stubber.add_response(
        "create_endpoint_config",
        {"EndpointConfigArn": f"arn:aws:sagemaker:us-east-1:111122223333:endpoint-config/{cfg}"},
        {
            "EndpointConfigName": cfg,
            "ProductionVariants": [
                {
                    "VariantName": "AllTraffic",
                    "InstanceType": "ml.p4d.24xlarge",
                    "InitialInstanceCount": 1,
                    "AcceleratorPartitionLayouts": [{"AcceleratorPartitionTypes": ["mig-3g.20gb", "mig-3g.20gb"]}],
                }
            ],
            "ExecutionRoleArn": ROLE,
            "Tags": _ownership(cfg),
        },
    )
    sm.stubber.add_response(
        "create_endpoint", {"EndpointArn": endpoint_arn(name)}, {"EndpointName": name, "EndpointConfigName": cfg, "Tags": _ownership(name)}
    )
    assert h.handle_is_complete(e, sm) == {"IsComplete": False}
    sm.stubber.add_response("describe_endpoint", describe_endpoint(name, "Creating", cfg))
    assert h.handle_is_complete(e, sm) == {"IsComplete": False}
    sm.stubber.add_response("describe_endpoint", describe_endpoint(name, "InService", cfg))
    done = h.handle_is_complete(e, sm)
    assert done["IsComplete"] is True
    assert done["Data"]["EndpointArn"] == endpoint_arn(name)


def test_create_endpoint_with_vpc_config(sm):
    props = {**ENDPOINT_PROPS, "VpcConfig": {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]}}
    e = with_data(event("Create", props), h.handle_on_event(event("Create", props), sm))
    not_found(sm.stubber, "describe_endpoint", "Could not find endpoint")
    sm.stubber.add_response(
        "create_endpoint_config",
        {"EndpointConfigArn": "arn:aws:sagemaker:us-east-1:111122223333:endpoint-config/x"},
        {
            "EndpointConfigName": h.config_name(props),
            "ProductionVariants": ANY,
            "ExecutionRoleArn": ROLE,
            "VpcConfig": {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]},
            "Tags": ANY,
        },
    )
    sm.stubber.add_response("create_endpoint", {"EndpointArn": endpoint_arn("x")}, None)
    h.handle_is_complete(e, sm)


def test_a_refused_create_endpoint_deletes_its_config_and_says_so(sm):
    cfg = h.config_name(ENDPOINT_PROPS)
    e = with_data(event("Create", ENDPOINT_PROPS), h.handle_on_event(event("Create", ENDPOINT_PROPS), sm))
    not_found(sm.stubber, "describe_endpoint", "Could not find endpoint")
    sm.stubber.add_response("create_endpoint_config", {"EndpointConfigArn": "arn:aws:sagemaker:us-east-1:111122223333:endpoint-config/x"})
    sm.stubber.add_client_error(
        "create_endpoint", "ResourceLimitExceeded", "The account-level service limit 'ml.p4d.24xlarge for endpoint usage' is 0 Instances", 400
    )
    sm.stubber.add_response("delete_endpoint_config", {}, {"EndpointConfigName": cfg})
    with pytest.raises(h.HandlerError, match=f"service limit.*deleted endpoint config {cfg}"):
        h.handle_is_complete(e, sm)


def test_endpoint_failure_reports_the_reason_and_deletes_it(sm):
    name = h.endpoint_name(ENDPOINT_PROPS)
    e = with_data(event("Create", ENDPOINT_PROPS), h.handle_on_event(event("Create", ENDPOINT_PROPS), sm))
    failed = describe_endpoint(name, "Failed", h.config_name(ENDPOINT_PROPS), "insufficient capacity for ml.p4d.24xlarge")
    failed["CreationTime"] = failed["LastModifiedTime"] = dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=5)
    sm.stubber.add_response("describe_endpoint", failed)
    sm.stubber.add_response("delete_endpoint", {}, {"EndpointName": name})
    with pytest.raises(h.HandlerError, match="insufficient capacity for ml.p4d.24xlarge; deleting it"):
        h.handle_is_complete(e, sm)


def test_layout_change_names_a_new_endpoint_never_updates_in_place(sm):
    old_name = h.endpoint_name(ENDPOINT_PROPS)
    new = {**ENDPOINT_PROPS, "Layout": ["mig-4g.20gb", "mig-3g.20gb"]}
    # no call at all in on_event: is_complete creates the new endpoint
    result = h.handle_on_event(event("Update", new, old=ENDPOINT_PROPS, physical=old_name), sm)
    assert result["PhysicalResourceId"] == h.endpoint_name(new) != old_name
    assert "CleanupEndpoint" not in result["Data"]


def test_layout_order_counts_as_a_change():
    reordered = {**ENDPOINT_PROPS, "Layout": ["mig-3g.20gb", "mig-2g.10gb", "mig-1g.5gb", "mig-1g.5gb"]}
    other = {**ENDPOINT_PROPS, "Layout": ["mig-2g.10gb", "mig-3g.20gb", "mig-1g.5gb", "mig-1g.5gb"]}
    assert h.endpoint_name(reordered) != h.endpoint_name(other)


def test_instance_count_change_uses_a_new_config_update_endpoint_and_tags(sm):
    name = h.endpoint_name(ENDPOINT_PROPS)
    new = {**ENDPOINT_PROPS, "InstanceCount": "2"}
    assert h.endpoint_name(new) == name
    old_cfg, new_cfg = h.config_name(ENDPOINT_PROPS), h.config_name(new)
    sm.stubber.add_response("describe_endpoint", describe_endpoint(name, "InService", old_cfg), {"EndpointName": name})
    sm.stubber.add_response(
        "create_endpoint_config",
        {"EndpointConfigArn": "arn:aws:sagemaker:us-east-1:111122223333:endpoint-config/x"},
        {"EndpointConfigName": new_cfg, "ProductionVariants": ANY, "ExecutionRoleArn": ROLE, "Tags": ANY},
    )
    sm.stubber.add_response("update_endpoint", {"EndpointArn": endpoint_arn(name)}, {"EndpointName": name, "EndpointConfigName": new_cfg})
    sm.stubber.add_response("add_tags", {"Tags": []}, {"ResourceArn": endpoint_arn(name), "Tags": _ownership(name)})
    e = event("Update", new, old=ENDPOINT_PROPS, physical=name)
    e = with_data(e, h.handle_on_event(e, sm))
    sm.stubber.add_response("describe_endpoint", describe_endpoint(name, "Updating", old_cfg))
    sm.stubber.add_response("describe_endpoint", describe_endpoint(name, "InService", new_cfg))
    sm.stubber.add_response("delete_endpoint_config", {}, {"EndpointConfigName": old_cfg})
    assert h.handle_is_complete(e, sm)["IsComplete"] is False
    assert h.handle_is_complete(e, sm)["IsComplete"] is True


def test_update_rollback_failed_fails_at_once(sm):
    name = h.endpoint_name(ENDPOINT_PROPS)
    new = {**ENDPOINT_PROPS, "InstanceCount": "2"}
    sm.stubber.add_response(
        "describe_endpoint", describe_endpoint(name, "UpdateRollbackFailed", h.config_name(new), "rollback failed")
    )
    with pytest.raises(h.HandlerError, match="UpdateRollbackFailed: rollback failed"):
        h.handle_is_complete(event("Update", new, old=ENDPOINT_PROPS, physical=name), sm)


def test_delete_removes_own_components_then_endpoint_then_config(sm):
    name = h.endpoint_name(ENDPOINT_PROPS)
    cfg = h.config_name(ENDPOINT_PROPS)

    def ic(n, status="InService"):
        return {
            "InferenceComponentName": n, "InferenceComponentArn": ic_arn(n), "EndpointName": name,
            "EndpointArn": endpoint_arn(name), "VariantName": "AllTraffic", "CreationTime": NOW,
            "LastModifiedTime": NOW, "InferenceComponentStatus": status,
        }

    listing = {"EndpointNameEquals": name, "MaxResults": 100}
    sm.stubber.add_response("describe_endpoint", describe_endpoint(name, "InService", cfg), {"EndpointName": name})
    e = event("Delete", ENDPOINT_PROPS, physical=name)
    result = h.handle_on_event(e, sm)
    assert result["PhysicalResourceId"] == name and result["Data"]["EndpointConfigName"] == cfg
    e = with_data(e, result)
    sm.stubber.add_response("list_inference_components", {"InferenceComponents": [ic("small-models-summarizer-aaaaaa")]}, listing)
    sm.stubber.add_response("delete_inference_component", {}, {"InferenceComponentName": "small-models-summarizer-aaaaaa"})
    assert h.handle_is_complete(e, sm) == {"IsComplete": False}
    sm.stubber.add_response("list_inference_components", {"InferenceComponents": []}, listing)
    sm.stubber.add_response("describe_endpoint", describe_endpoint(name, "InService", cfg))
    sm.stubber.add_response("delete_endpoint", {}, {"EndpointName": name})
    assert h.handle_is_complete(e, sm) == {"IsComplete": False}
    sm.stubber.add_response("list_inference_components", {"InferenceComponents": []}, listing)
    not_found(sm.stubber, "describe_endpoint", f'Could not find endpoint "{endpoint_arn(name)}".')
    sm.stubber.add_response("delete_endpoint_config", {}, {"EndpointConfigName": cfg})
    assert h.handle_is_complete(e, sm) == {"IsComplete": True}


def test_delete_of_a_replaced_endpoint_never_deletes_the_live_config(sm):
    """The cleanup Delete of the old generation may carry the new generation's properties."""
    old_name = h.endpoint_name(ENDPOINT_PROPS)
    old_cfg = h.config_name(ENDPOINT_PROPS)
    new = {**ENDPOINT_PROPS, "Layout": ["mig-4g.20gb", "mig-3g.20gb"]}
    assert not h.config_name(new).startswith(old_name)
    e = event("Delete", new, physical=old_name)
    sm.stubber.add_response("describe_endpoint", describe_endpoint(old_name, "InService", old_cfg), {"EndpointName": old_name})
    e = with_data(e, h.handle_on_event(e, sm))
    sm.stubber.add_response("list_inference_components", {"InferenceComponents": []})
    not_found(sm.stubber, "describe_endpoint", "Could not find endpoint")
    sm.stubber.add_response("delete_endpoint_config", {}, {"EndpointConfigName": old_cfg})
    assert h.handle_is_complete(e, sm) == {"IsComplete": True}


def test_delete_waits_for_a_busy_endpoint_before_deleting_it(sm):
    name = h.endpoint_name(ENDPOINT_PROPS)
    e = event("Delete", ENDPOINT_PROPS, physical=name)
    sm.stubber.add_response("list_inference_components", {"InferenceComponents": []})
    sm.stubber.add_response("describe_endpoint", describe_endpoint(name, "Creating", h.config_name(ENDPOINT_PROPS)))
    assert h.handle_is_complete(e, sm) == {"IsComplete": False}  # no delete_endpoint call while Creating
    sm.stubber.add_response("list_inference_components", {"InferenceComponents": []})
    sm.stubber.add_response("describe_endpoint", describe_endpoint(name, "Failed", h.config_name(ENDPOINT_PROPS), "boom"))
    sm.stubber.add_response("delete_endpoint", {}, {"EndpointName": name})
    assert h.handle_is_complete(e, sm) == {"IsComplete": False}


def test_delete_reraises_other_errors(sm):
    name = h.endpoint_name(ENDPOINT_PROPS)
    sm.stubber.add_client_error("describe_endpoint", "AccessDeniedException", "not authorized", 400)
    with pytest.raises(Exception, match="not authorized"):
        h.handle_on_event(event("Delete", ENDPOINT_PROPS, physical=name), sm)


# --------------------------------------------------------------------------- components

SPEC = {
    "ModelName": "Model-summarizer-XYZ",
    "ComputeResourceRequirements": {
        "AcceleratorPartitionType": "mig-3g.20gb",
        "NumberOfAcceleratorDevicesRequired": 1.0,
        "MinMemoryRequiredInMb": 16384,
        "NumberOfCpuCoresRequired": 4.0,
    },
}


def describe_ic(name, status, reason=None, *, spec=SPEC, desired=2, current=2):
    out = {
        "InferenceComponentName": name,
        "InferenceComponentArn": ic_arn(name),
        "EndpointName": "small-models-abc123",
        "EndpointArn": endpoint_arn("small-models-abc123"),
        "CreationTime": NOW,
        "LastModifiedTime": NOW,
        "InferenceComponentStatus": status,
        "Specification": spec,
        "RuntimeConfig": {"DesiredCopyCount": desired, "CurrentCopyCount": current},
    }
    if reason:
        out["FailureReason"] = reason
    return out


def test_create_component_on_a_partition(sm):
    name = h.component_name(COMPONENT_PROPS)
    e = event("Create", COMPONENT_PROPS)
    e = with_data(e, h.handle_on_event(e, sm))
    assert e["PhysicalResourceId"] == name
    not_found(sm.stubber, "describe_inference_component", "Could not find inference component")
    sm.stubber.add_response(
        "create_inference_component",
        {"InferenceComponentArn": ic_arn(name)},
        {
            "InferenceComponentName": name,
            "EndpointName": "small-models-abc123",
            "VariantName": "AllTraffic",
            "Specification": SPEC,
            "RuntimeConfig": {"CopyCount": 2},
            "Tags": ANY,
        },
    )
    assert h.handle_is_complete(e, sm) == {"IsComplete": False}
    sm.stubber.add_response("describe_inference_component", describe_ic(name, "Creating", current=0))
    assert h.handle_is_complete(e, sm) == {"IsComplete": False}
    sm.stubber.add_response("describe_inference_component", describe_ic(name, "InService"))
    done = h.handle_is_complete(e, sm)
    assert done["IsComplete"] is True and done["Data"]["InferenceComponentArn"] == ic_arn(name)


def test_component_in_service_on_another_model_is_not_done(sm):
    name = h.component_name(COMPONENT_PROPS)
    e = event("Create", COMPONENT_PROPS, physical=name)
    sm.stubber.add_response("describe_inference_component", describe_ic(name, "InService", spec={**SPEC, "ModelName": "other"}))
    assert h.handle_is_complete(e, sm) == {"IsComplete": False}
    sm.stubber.add_response("describe_inference_component", describe_ic(name, "InService", current=1))
    assert h.handle_is_complete(e, sm) == {"IsComplete": False}


def test_copy_count_change_of_fixed_copies_updates_the_runtime_config(sm):
    fixed = {**COMPONENT_PROPS, "CopyCount": "2", "MinCopyCount": "2", "MaxCopyCount": "2"}
    name = h.component_name(fixed)
    new = {**fixed, "CopyCount": "3", "MinCopyCount": "3", "MaxCopyCount": "3"}
    sm.stubber.add_response("describe_inference_component", describe_ic(name, "InService"))
    sm.stubber.add_response(
        "update_inference_component_runtime_config",
        {"InferenceComponentArn": ic_arn(name)},
        {"InferenceComponentName": name, "DesiredRuntimeConfig": {"CopyCount": 3}},
    )
    sm.stubber.add_response("add_tags", {"Tags": []})
    result = h.handle_on_event(event("Update", new, old=fixed, physical=name), sm)
    assert result["PhysicalResourceId"] == name


def test_copy_count_is_clamped_to_min_and_max():
    assert h._copies({**COMPONENT_PROPS, "CopyCount": "9"}) == 4
    assert h._copies({**COMPONENT_PROPS, "CopyCount": "1", "MinCopyCount": "2"}) == 2
    assert h._wanted_copies(COMPONENT_PROPS, 3) == 3  # autoscaled: the autoscaler's count stands
    assert h._wanted_copies(COMPONENT_PROPS, 9) == 4


def test_model_change_is_a_rolling_update_of_one_copy_per_batch(sm):
    name = h.component_name(COMPONENT_PROPS)
    new = {**COMPONENT_PROPS, "ModelName": "Model-summarizer-NEW", "CopyCount": "3"}
    sm.stubber.add_response("describe_inference_component", describe_ic(name, "InService"))
    sm.stubber.add_response(
        "update_inference_component",
        {"InferenceComponentArn": ic_arn(name)},
        {
            "InferenceComponentName": name,
            "Specification": {**SPEC, "ModelName": "Model-summarizer-NEW"},
            "DeploymentConfig": {
                "RollingUpdatePolicy": {
                    "MaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1},
                    "RollbackMaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1},
                    "WaitIntervalInSeconds": 0,
                    "MaximumExecutionTimeoutInSeconds": ANY,
                }
            },
        },
    )
    sm.stubber.add_response("add_tags", {"Tags": []})
    assert h.handle_on_event(event("Update", new, old=COMPONENT_PROPS, physical=name), sm)["PhysicalResourceId"] == name


def test_partition_type_change_names_a_new_component(sm):
    old_name = h.component_name(COMPONENT_PROPS)
    new = {**COMPONENT_PROPS, "AcceleratorPartitionType": "mig-4g.20gb"}
    assert h.handle_on_event(event("Update", new, old=COMPONENT_PROPS, physical=old_name), sm)["PhysicalResourceId"] == h.component_name(new) != old_name


def test_rollback_after_a_failed_replacement_deletes_the_new_component(sm):
    name = h.component_name(COMPONENT_PROPS)
    failed = {**COMPONENT_PROPS, "AcceleratorPartitionType": "mig-4g.20gb", "CopyCount": "3"}
    e = event("Update", COMPONENT_PROPS, old=failed, physical=name)
    result = h.handle_on_event(e, sm)  # no request: the live component already runs COMPONENT_PROPS
    assert result["Data"]["CleanupComponent"] == h.component_name(failed)
    e = with_data(e, result)
    sm.stubber.add_response("describe_inference_component", describe_ic(h.component_name(failed), "Failed", "no partition"))
    sm.stubber.add_response("delete_inference_component", {}, {"InferenceComponentName": h.component_name(failed)})
    assert h.handle_is_complete(e, sm) == {"IsComplete": False}


def test_component_delete_and_already_deleted(sm):
    name = h.component_name(COMPONENT_PROPS)
    e = event("Delete", COMPONENT_PROPS, physical=name)
    sm.stubber.add_response("delete_inference_component", {}, {"InferenceComponentName": name})
    h.handle_on_event(e, sm)
    sm.stubber.add_response("describe_inference_component", describe_ic(name, "Deleting"))
    assert h.handle_is_complete(e, sm) == {"IsComplete": False}
    not_found(sm.stubber, "describe_inference_component", f"Could not find inference component {name}")
    assert h.handle_is_complete(e, sm) == {"IsComplete": True}
    not_found(sm.stubber, "delete_inference_component", f"Could not find inference component {name}")
    h.handle_on_event(e, sm)
    not_found(sm.stubber, "describe_inference_component", f"Could not find inference component {name}")
    assert h.handle_is_complete(e, sm) == {"IsComplete": True}


def test_component_delete_of_one_already_deleting_waits_until_it_is_gone(sm):
    """A rollback or repeated Delete meets the component Deleting: SageMaker refuses, the Delete waits."""
    name = h.component_name(COMPONENT_PROPS)
    e = event("Delete", COMPONENT_PROPS, physical=name)
    not_found(sm.stubber, "delete_inference_component", f'Cannot delete inference component "{ic_arn(name)}" while it is being'
              " deleted.", {"InferenceComponentName": name})
    sm.stubber.add_response("describe_inference_component", describe_ic(name, "Deleting"), {"InferenceComponentName": name})
    e = with_data(e, h.handle_on_event(e, sm))
    sm.stubber.add_response("describe_inference_component", describe_ic(name, "Deleting"))
    assert h.handle_is_complete(e, sm) == {"IsComplete": False}
    not_found(sm.stubber, "describe_inference_component", f"Could not find inference component {name}")
    assert h.handle_is_complete(e, sm) == {"IsComplete": True}


def test_endpoint_delete_refused_as_already_deleting_waits_until_it_is_gone(sm):
    """The endpoint was InService when described and Deleting when the delete arrived."""
    name = h.endpoint_name(ENDPOINT_PROPS)
    cfg = h.config_name(ENDPOINT_PROPS)
    e = with_data(event("Delete", ENDPOINT_PROPS, physical=name), {"Data": {"EndpointConfigName": cfg}})
    sm.stubber.add_response("list_inference_components", {"InferenceComponents": []})
    sm.stubber.add_response("describe_endpoint", describe_endpoint(name, "InService", cfg))
    not_found(sm.stubber, "delete_endpoint", f'Cannot delete endpoint "{endpoint_arn(name)}" while it is being deleted.',
              {"EndpointName": name})
    sm.stubber.add_response("describe_endpoint", describe_endpoint(name, "Deleting", cfg))
    assert h.handle_is_complete(e, sm) == {"IsComplete": False}
    sm.stubber.add_response("list_inference_components", {"InferenceComponents": []})
    sm.stubber.add_response("describe_endpoint", describe_endpoint(name, "Deleting", cfg))
    assert h.handle_is_complete(e, sm) == {"IsComplete": False}  # no second delete_endpoint
    sm.stubber.add_response("list_inference_components", {"InferenceComponents": []})
    not_found(sm.stubber, "describe_endpoint", f'Could not find endpoint "{endpoint_arn(name)}".')
    sm.stubber.add_response("delete_endpoint_config", {}, {"EndpointConfigName": cfg})
    assert h.handle_is_complete(e, sm) == {"IsComplete": True}


def test_a_failed_endpoint_already_deleting_is_still_reported_failed(sm):
    name = h.endpoint_name(ENDPOINT_PROPS)
    cfg = h.config_name(ENDPOINT_PROPS)
    e = with_data(event("Create", ENDPOINT_PROPS), h.handle_on_event(event("Create", ENDPOINT_PROPS), sm))
    sm.stubber.add_response("describe_endpoint", {**describe_endpoint(name, "Failed", cfg, "no capacity"),
                                                  "CreationTime": dt.datetime.now(dt.timezone.utc)})
    not_found(sm.stubber, "delete_endpoint", f'Cannot delete endpoint "{endpoint_arn(name)}" while it is being deleted.')
    sm.stubber.add_response("describe_endpoint", describe_endpoint(name, "Deleting", cfg))
    with pytest.raises(h.HandlerError, match=f"endpoint {name} is Failed: no capacity; deleting it"):
        h.handle_is_complete(e, sm)


def test_a_delete_refused_for_another_reason_is_reported(sm):
    """Only gone or already Deleting counts as deleted: a refusal of a resource in another status is raised."""
    name = h.component_name(COMPONENT_PROPS)
    not_found(sm.stubber, "delete_inference_component", "Inference component is in Updating status")
    sm.stubber.add_response("describe_inference_component", describe_ic(name, "Updating"))
    with pytest.raises(Exception, match="Updating status"):
        h.handle_on_event(event("Delete", COMPONENT_PROPS, physical=name), sm)


def test_unknown_kind_is_refused(sm):
    with pytest.raises(h.HandlerError, match="unknown resource Kind"):
        h.handle_on_event(event("Create", {"Kind": "Bucket"}), sm)


# --------------------------------------------------------------------------- runtime botocore


def _old_model_dir(tmp_path: Path) -> Path:
    """A SageMaker model as a botocore from before MIG partitions ships it."""
    api_version, model = _vendor.trimmed_model()
    del model["shapes"]["ProductionVariant"]["members"]["AcceleratorPartitionLayouts"]
    del model["shapes"]["InferenceComponentComputeResourceRequirements"]["members"]["AcceleratorPartitionType"]
    path = tmp_path / "old" / "sagemaker" / api_version / "service-2.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(model))
    return tmp_path / "old"


def test_an_old_runtime_model_is_refused_with_the_reason(tmp_path):
    client = _client(str(_old_model_dir(tmp_path)))
    with pytest.raises(h.HandlerError, match="lacks ProductionVariant.AcceleratorPartitionLayouts.*AWS_DATA_PATH"):
        h.require_partition_support(client)
    # and that is why: such a client cannot even send the layout
    with Stubber(client) as stubber:
        stubber.add_response("create_endpoint_config", {"EndpointConfigArn": "arn:aws:sagemaker:us-east-1:111122223333:endpoint-config/x"})
        with pytest.raises(Exception, match="AcceleratorPartitionLayouts"):
            client.create_endpoint_config(
                EndpointConfigName="x",
                ProductionVariants=[
                    {"VariantName": "v", "InstanceType": "ml.p4d.24xlarge", "InitialInstanceCount": 1,
                     "AcceleratorPartitionLayouts": [{"AcceleratorPartitionTypes": ["mig-3g.20gb"]}]}
                ],
            )


def test_the_vendored_model_overrides_an_old_runtime_model(tmp_path, monkeypatch):
    """AWS_DATA_PATH, as the function sets it, wins over a model that lacks the fields."""
    old = _old_model_dir(tmp_path)

    def client():
        session = botocore.session.get_session()  # reads AWS_DATA_PATH like boto3 in Lambda
        return session.create_client("sagemaker", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t")

    monkeypatch.setenv("AWS_DATA_PATH", str(old))
    with pytest.raises(h.HandlerError):
        h.require_partition_support(client())
    monkeypatch.setenv("AWS_DATA_PATH", f"{DATA}{os.pathsep}{old}")
    h.require_partition_support(client())  # does not raise


def test_the_vendored_model_matches_the_installed_botocore():
    api_version, fresh = _vendor.trimmed_model()
    path = _vendor.model_path(api_version)
    assert path.exists(), f"missing {path}: run python -m cdk_gpu_share.inference.handler._vendor"
    vendored = json.loads(path.read_text())
    for shape in ("ProductionVariant", "AcceleratorPartitionLayout", "InferenceComponentComputeResourceRequirements"):
        assert vendored["shapes"][shape] == json.loads(json.dumps(fresh["shapes"][shape])), (
            f"{shape} differs from botocore's: run python -m cdk_gpu_share.inference.handler._vendor"
        )
    assert set(vendored["operations"]) == set(_vendor.OPERATIONS)
    assert path.stat().st_size < 200_000
