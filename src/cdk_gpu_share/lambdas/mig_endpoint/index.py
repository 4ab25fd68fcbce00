"""Custom resource handler: MIG-partitioned SageMaker endpoints and their inference components.

CloudFormation has no property for ``ProductionVariant.AcceleratorPartitionLayouts`` nor
for ``ComputeResourceRequirements.AcceleratorPartitionType``, so the endpoint config, the
endpoint and the partitioned inference components are made here, behind the CDK
provider framework (``on_event`` starts an operation, ``is_complete`` polls until
SageMaker is done). Two kinds of resource, told apart by the ``Kind`` property:

``Kind: Endpoint``
    Physical id: the endpoint name, ``<base>-<hash of instance type and layout>``.
    * Create: ``CreateEndpointConfig`` (one variant, no ``ModelName``, the layout, the
      execution role) then ``CreateEndpoint``; complete when ``InService``.
    * Update, layout or instance type changed: SageMaker refuses to change the layout
      of a running endpoint (``UpdateEndpoint`` rejects it), so a *new* endpoint is
      created under a new name; CloudFormation then moves the inference components
      (their ``EndpointName`` changed) and deletes the old endpoint. Nothing is edited
      in place.
    * Update, anything else (instance count, role, VPC): a new endpoint config (configs
      are immutable) and ``UpdateEndpoint``; complete when ``InService`` on the new
      config (a rollback to the old one is reported as a failure); the old config is
      then deleted.
    * Delete: inference components still on the endpoint, the endpoint, then its
      endpoint configs; anything already gone is skipped. Only configs named after the
      deleted endpoint (``<physical id>-...``) are deleted: the properties of a cleanup
      Delete may be another generation's, whose config is live.

``Kind: InferenceComponent``
    Physical id: the component name, ``<base>-<hash of endpoint and partition type>``.
    * Create: ``CreateInferenceComponent`` with ``AcceleratorPartitionType`` and
      ``NumberOfAcceleratorDevicesRequired=1``; complete when ``InService``.
    * Update, endpoint or partition type changed: a new component (SageMaker rejects a
      change of ``AcceleratorPartitionType``); CloudFormation deletes the old one.
    * Update, copy count only: ``UpdateInferenceComponentRuntimeConfig``.
    * Update whose old properties name another component (the rollback after a failed
      replacement): nothing to do, the physical component still runs the properties.
    * Update, model or host resources: ``UpdateInferenceComponent`` (rolling).
    * Delete: ``DeleteInferenceComponent``; complete when gone; already gone is fine.

The Lambda runtime's boto3 may not know the partition fields. The asset ships the
SageMaker service model (``data/``, see ``_vendor.py``) and the function sets
``AWS_DATA_PATH`` to it; :func:`require_partition_support` refuses to run, with the
reason, when the loaded model still lacks them instead of creating an unpartitioned
endpoint.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from typing import Any

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

ENDPOINT = "Endpoint"
COMPONENT = "InferenceComponent"
DEFAULT_VARIANT = "AllTraffic"
#: Endpoint states in which SageMaker is still working; a delete waits for them to end.
_BUSY = ("Creating", "Updating", "SystemUpdating", "RollingBack")
#: Endpoint states that end a create or update: waiting longer cannot help.
_FAILED = ("Failed", "UpdateRollbackFailed")
_GONE = re.compile(r"could not find|not found|does not exist", re.IGNORECASE)
_EXISTS = re.compile(r"already exist", re.IGNORECASE)


class HandlerError(Exception):
    """A failure reported to CloudFormation with its reason."""


# --------------------------------------------------------------------------- client


def require_partition_support(client: Any) -> None:
    """Raise unless ``client``'s SageMaker model knows both partition fields."""
    model = client.meta.service_model
    variant = model.shape_for("ProductionVariant").members
    resources = model.shape_for("InferenceComponentComputeResourceRequirements").members
    missing = [
        name
        for name, members in (
            ("ProductionVariant.AcceleratorPartitionLayouts", variant),
            ("InferenceComponentComputeResourceRequirements.AcceleratorPartitionType", resources),
        )
        if name.split(".")[1] not in members
    ]
    if missing:
        import botocore

        raise HandlerError(
            f"the SageMaker service model loaded by botocore {botocore.__version__} lacks {', '.join(missing)};"
            f" AWS_DATA_PATH={os.environ.get('AWS_DATA_PATH')!r} must point at the data/ directory shipped in this"
            " function's asset (regenerate it with python -m cdk_gpu_share.lambdas.mig_endpoint._vendor)"
        )


def sagemaker_client() -> Any:
    import boto3

    client = boto3.client("sagemaker")
    require_partition_support(client)
    return client


# --------------------------------------------------------------------------- helpers


def _code(exc: Exception) -> tuple[str, str]:
    response = getattr(exc, "response", None) or {}
    err = response.get("Error", {})
    return err.get("Code", ""), err.get("Message", str(exc))


def _is_gone(exc: Exception) -> bool:
    code, message = _code(exc)
    return code in ("ValidationException", "ResourceNotFound", "ResourceNotFoundException") and bool(_GONE.search(message))


def _is_exists(exc: Exception) -> bool:
    code, message = _code(exc)
    return code in ("ValidationException", "ResourceInUse") and bool(_EXISTS.search(message))


def _client_error() -> type[Exception]:
    from botocore.exceptions import ClientError

    return ClientError


def _hash(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:6]


def _int(value: Any) -> int:
    return int(float(value))


def _tags(props: dict) -> list[dict]:
    return [{"Key": t["Key"], "Value": t["Value"]} for t in props.get("Tags") or []]


# --------------------------------------------------------------------------- endpoint


def endpoint_name(props: dict) -> str:
    """``<base>-<6 hex>``: changes exactly when the endpoint must be replaced."""
    return f"{props['EndpointBaseName']}-{_hash(props['InstanceType'], list(props['Layout']))}"


def _variant(props: dict) -> dict:
    return {
        "VariantName": props.get("VariantName") or DEFAULT_VARIANT,
        "InstanceType": props["InstanceType"],
        "InitialInstanceCount": _int(props.get("InstanceCount", 1)),
        # One layout, applied to every GPU of every instance. The order of the
        # profiles is kept as declared: SageMaker compares layouts in order.
        "AcceleratorPartitionLayouts": [{"AcceleratorPartitionTypes": list(props["Layout"])}],
    }


def _config_request(props: dict) -> dict:
    request: dict[str, Any] = {
        # Inference components need a variant without ModelName, and the role.
        "ProductionVariants": [_variant(props)],
        "ExecutionRoleArn": props["ExecutionRoleArn"],
    }
    if props.get("VpcConfig"):
        request["VpcConfig"] = {
            "SecurityGroupIds": list(props["VpcConfig"]["SecurityGroupIds"]),
            "Subnets": list(props["VpcConfig"]["Subnets"]),
        }
    return request


def config_name(props: dict) -> str:
    """``<endpoint name>-<6 hex of the config>``: a new config for every change."""
    return f"{endpoint_name(props)}-{_hash(_config_request(props))}"


def _create_config(sm: Any, props: dict) -> str:
    name = config_name(props)
    request = _config_request(props)
    try:
        sm.create_endpoint_config(EndpointConfigName=name, Tags=_tags(props), **request)
        LOG.info("created endpoint config %s", name)
    except _client_error() as exc:
        if not _is_exists(exc):
            raise
        LOG.info("endpoint config %s exists already (retry)", name)
    return name


def _endpoint_data(props: dict, name: str, arn: str | None = None) -> dict:
    data = {"EndpointName": name, "EndpointConfigName": config_name(props), "VariantName": props.get("VariantName") or DEFAULT_VARIANT}
    if arn:
        data["EndpointArn"] = arn
    return data


def _create_endpoint(sm: Any, props: dict) -> dict:
    name = endpoint_name(props)
    cfg = _create_config(sm, props)
    arn = None
    try:
        arn = sm.create_endpoint(EndpointName=name, EndpointConfigName=cfg, Tags=_tags(props))["EndpointArn"]
        LOG.info("creating endpoint %s on %s", name, cfg)
    except _client_error() as exc:
        if not _is_exists(exc):
            raise
        LOG.info("endpoint %s exists already (retry)", name)
    return {"PhysicalResourceId": name, "Data": _endpoint_data(props, name, arn)}


def _delete_components_on(sm: Any, endpoint: str) -> int:
    """Delete every inference component on ``endpoint``; the number still present."""
    remaining = 0
    token = None
    while True:
        kwargs: dict[str, Any] = {"EndpointNameEquals": endpoint, "MaxResults": 100}
        if token:
            kwargs["NextToken"] = token
        page = sm.list_inference_components(**kwargs)
        for ic in page.get("InferenceComponents", []):
            remaining += 1
            if ic.get("InferenceComponentStatus") == "Deleting":
                continue
            _delete_component(sm, ic["InferenceComponentName"])
        token = page.get("NextToken")
        if not token:
            return remaining


def _delete_component(sm: Any, name: str) -> None:
    try:
        sm.delete_inference_component(InferenceComponentName=name)
        LOG.info("deleting inference component %s", name)
    except _client_error() as exc:
        if not _is_gone(exc):
            raise
        LOG.info("inference component %s is already gone", name)


def _delete_config(sm: Any, name: str) -> None:
    try:
        sm.delete_endpoint_config(EndpointConfigName=name)
        LOG.info("deleted endpoint config %s", name)
    except _client_error() as exc:
        if not _is_gone(exc):
            raise
        LOG.info("endpoint config %s is already gone", name)


def _describe_endpoint(sm: Any, name: str) -> dict | None:
    try:
        return sm.describe_endpoint(EndpointName=name)
    except _client_error() as exc:
        if _is_gone(exc):
            return None
        raise


def endpoint_on_event(event: dict, sm: Any) -> dict:
    kind = event["RequestType"]
    props = event["ResourceProperties"]
    if kind == "Create":
        return _create_endpoint(sm, props)
    if kind == "Update":
        old = event["OldResourceProperties"]
        name = endpoint_name(props)
        if name != event["PhysicalResourceId"]:
            LOG.info("layout or instance type changed: new endpoint %s replaces %s", name, event["PhysicalResourceId"])
            return _create_endpoint(sm, props)
        cfg = config_name(props)
        if cfg != config_name(old):
            described = _describe_endpoint(sm, name)
            if described is None:
                raise HandlerError(f"endpoint {name} does not exist: it was deleted outside CloudFormation")
            if described.get("EndpointConfigName") == cfg:
                LOG.info("endpoint %s already runs %s", name, cfg)
            else:
                _create_config(sm, props)
                sm.update_endpoint(EndpointName=name, EndpointConfigName=cfg)
                LOG.info("updating endpoint %s to %s", name, cfg)
        return {"PhysicalResourceId": name, "Data": _endpoint_data(props, name)}
    if kind == "Delete":
        name = event["PhysicalResourceId"]
        _delete_components_on(sm, name)
        described = _describe_endpoint(sm, name)
        # The config the endpoint really runs, for is_complete to delete once the endpoint
        # is gone (the provider framework hands on_event's Data to is_complete).
        data = {"EndpointConfigName": described["EndpointConfigName"]} if described and described.get("EndpointConfigName") else {}
        return {"PhysicalResourceId": name, "Data": data}
    raise HandlerError(f"unknown request type {kind!r}")


def _configs_of(name: str, props: dict, event: dict) -> list[str]:
    """The endpoint configs that belong to endpoint ``name``: never another endpoint's.

    ``ResourceProperties`` of a Delete need not describe ``name`` (the cleanup of a
    replacement or of a rolled-back update may carry the other generation's properties,
    whose config is live), so only configs named ``<name>-...`` are deleted.
    """
    candidates = {(event.get("Data") or {}).get("EndpointConfigName")}
    try:
        candidates.add(config_name(props))
    except (KeyError, TypeError):
        pass
    return sorted(c for c in candidates if c and c.startswith(f"{name}-"))


def endpoint_is_complete(event: dict, sm: Any) -> dict:
    kind = event["RequestType"]
    props = event["ResourceProperties"]
    name = event["PhysicalResourceId"]
    if kind == "Delete":
        if _delete_components_on(sm, name):
            return {"IsComplete": False}
        described = _describe_endpoint(sm, name)
        if described is None:
            for cfg in _configs_of(name, props, event):
                _delete_config(sm, cfg)
            return {"IsComplete": True}
        status = described["EndpointStatus"]
        if status in _BUSY:
            LOG.info("endpoint %s is %s: deleting it once that ends", name, status)
        elif status != "Deleting":
            sm.delete_endpoint(EndpointName=name)
            LOG.info("deleting endpoint %s", name)
        return {"IsComplete": False}
    described = _describe_endpoint(sm, name)
    if described is None:
        raise HandlerError(f"endpoint {name} disappeared while it was being {'created' if kind == 'Create' else 'updated'}")
    status = described["EndpointStatus"]
    expected = config_name(props)
    if status in _FAILED:
        raise HandlerError(f"endpoint {name} is {status}: {described.get('FailureReason', 'no reason given')}")
    if status != "InService":
        return {"IsComplete": False}
    if described.get("EndpointConfigName") != expected:
        raise HandlerError(
            f"endpoint {name} is InService on {described.get('EndpointConfigName')}, not {expected}: the update was"
            f" rolled back ({described.get('FailureReason', 'no reason given')})"
        )
    if kind == "Update":
        old = event["OldResourceProperties"]
        if endpoint_name(old) == name and config_name(old) != expected:
            _delete_config(sm, config_name(old))
    return {"IsComplete": True, "Data": _endpoint_data(props, name, described["EndpointArn"])}


# --------------------------------------------------------------------------- components


def component_name(props: dict) -> str:
    """``<base>-<6 hex>``: changes exactly when the component must be replaced."""
    return f"{props['ComponentBaseName']}-{_hash(props['EndpointName'], props.get('AcceleratorPartitionType') or '')}"


def _specification(props: dict) -> dict:
    resources: dict[str, Any] = {
        "MinMemoryRequiredInMb": _int(props["MinMemoryRequiredInMb"]),
        "NumberOfAcceleratorDevicesRequired": float(props.get("NumberOfAcceleratorDevicesRequired", 1)),
    }
    if props.get("AcceleratorPartitionType"):
        # Each copy occupies one partition of this profile; devices must then be 1.
        resources["AcceleratorPartitionType"] = props["AcceleratorPartitionType"]
        resources["NumberOfAcceleratorDevicesRequired"] = 1.0
    if props.get("NumberOfCpuCoresRequired") not in (None, ""):
        resources["NumberOfCpuCoresRequired"] = float(props["NumberOfCpuCoresRequired"])
    return {"ModelName": props["ModelName"], "ComputeResourceRequirements": resources}


def _copies(props: dict) -> int:
    n = _int(props["CopyCount"])
    lo = _int(props.get("MinCopyCount", n))
    hi = _int(props.get("MaxCopyCount", n))
    return max(1, lo, min(n, hi))


def _component_data(props: dict, name: str, arn: str | None = None) -> dict:
    data = {"InferenceComponentName": name, "EndpointName": props["EndpointName"]}
    if arn:
        data["InferenceComponentArn"] = arn
    return data


def _create_component(sm: Any, props: dict) -> dict:
    name = component_name(props)
    arn = None
    try:
        arn = sm.create_inference_component(
            InferenceComponentName=name,
            EndpointName=props["EndpointName"],
            VariantName=props.get("VariantName") or DEFAULT_VARIANT,
            Specification=_specification(props),
            # CopyCount must be > 0 at creation.
            RuntimeConfig={"CopyCount": _copies(props)},
            Tags=_tags(props),
        )["InferenceComponentArn"]
        LOG.info("creating inference component %s on %s", name, props["EndpointName"])
    except _client_error() as exc:
        if not _is_exists(exc):
            raise
        LOG.info("inference component %s exists already (retry)", name)
    return {"PhysicalResourceId": name, "Data": _component_data(props, name, arn)}


def component_on_event(event: dict, sm: Any) -> dict:
    kind = event["RequestType"]
    props = event["ResourceProperties"]
    if kind == "Create":
        return _create_component(sm, props)
    if kind == "Update":
        old = event["OldResourceProperties"]
        name = component_name(props)
        if name != event["PhysicalResourceId"]:
            LOG.info("endpoint or partition type changed: new component %s replaces %s", name, event["PhysicalResourceId"])
            return _create_component(sm, props)
        if component_name(old) != name:
            # CloudFormation rolls back to this component after a replacement failed:
            # ``old`` describes the failed new component, not this one, which still
            # runs ``props``. Updating it would redeploy a live component for nothing.
            LOG.info("inference component %s: rollback after a failed replacement, nothing to change", name)
            return {"PhysicalResourceId": name, "Data": _component_data(props, name)}
        spec_changed = _specification(props) != _specification(old)
        copies_changed = _copies(props) != _copies(old)
        if spec_changed:
            request: dict[str, Any] = {"InferenceComponentName": name, "Specification": _specification(props)}
            if copies_changed:
                request["RuntimeConfig"] = {"CopyCount": _copies(props)}
            sm.update_inference_component(**request)
            LOG.info("updating inference component %s", name)
        elif copies_changed:
            sm.update_inference_component_runtime_config(
                InferenceComponentName=name, DesiredRuntimeConfig={"CopyCount": _copies(props)}
            )
            LOG.info("setting inference component %s to %d copies", name, _copies(props))
        return {"PhysicalResourceId": name, "Data": _component_data(props, name)}
    if kind == "Delete":
        _delete_component(sm, event["PhysicalResourceId"])
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    raise HandlerError(f"unknown request type {kind!r}")


def component_is_complete(event: dict, sm: Any) -> dict:
    kind = event["RequestType"]
    name = event["PhysicalResourceId"]
    try:
        described = sm.describe_inference_component(InferenceComponentName=name)
    except _client_error() as exc:
        if not _is_gone(exc):
            raise
        if kind == "Delete":
            return {"IsComplete": True}
        raise HandlerError(f"inference component {name} disappeared while it was being {kind.lower()}d") from None
    status = described.get("InferenceComponentStatus")
    if kind == "Delete":
        if status not in ("Deleting",):
            _delete_component(sm, name)
        return {"IsComplete": False}
    if status == "Failed":
        raise HandlerError(f"inference component {name} failed: {described.get('FailureReason', 'no reason given')}")
    if status != "InService":
        return {"IsComplete": False}
    return {
        "IsComplete": True,
        "Data": _component_data(event["ResourceProperties"], name, described["InferenceComponentArn"]),
    }


# --------------------------------------------------------------------------- entry points

_ON_EVENT = {ENDPOINT: endpoint_on_event, COMPONENT: component_on_event}
_IS_COMPLETE = {ENDPOINT: endpoint_is_complete, COMPONENT: component_is_complete}


def _dispatch(table: dict, event: dict, sm: Any) -> dict:
    kind = event["ResourceProperties"].get("Kind")
    if kind not in table:
        raise HandlerError(f"unknown resource Kind {kind!r}: expected {ENDPOINT} or {COMPONENT}")
    return table[kind](event, sm)


def handle_on_event(event: dict, sm: Any) -> dict:
    return _dispatch(_ON_EVENT, event, sm)


def handle_is_complete(event: dict, sm: Any) -> dict:
    return _dispatch(_IS_COMPLETE, event, sm)


def on_event(event: dict, context: Any = None) -> dict:  # pragma: no cover - Lambda entry point
    LOG.info("on_event %s", json.dumps({k: v for k, v in event.items() if k != "ResponseURL"}, default=str))
    return handle_on_event(event, sagemaker_client())


def is_complete(event: dict, context: Any = None) -> dict:  # pragma: no cover - Lambda entry point
    return handle_is_complete(event, sagemaker_client())
