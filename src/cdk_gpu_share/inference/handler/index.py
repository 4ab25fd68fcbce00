"""Custom resource handler: MIG-partitioned SageMaker endpoints and their inference components.

CloudFormation has no property for ``ProductionVariant.AcceleratorPartitionLayouts`` nor
for ``ComputeResourceRequirements.AcceleratorPartitionType``, so the endpoint config, the
endpoint and the partitioned inference components are made here, behind the CDK
provider framework (``on_event`` starts an operation, ``is_complete`` polls until
SageMaker is done). Two kinds of resource, told apart by the ``Kind`` property.

Lifecycle rules (why the code looks the way it does)
----------------------------------------------------
* **Nothing is created in on_event of a Create.** When ``on_event`` of a Create raises,
  the provider framework answers with its ``CREATE_FAILED`` marker as physical id and
  later *ignores* the rollback Delete: whatever ``on_event`` had created would bill
  forever. So ``on_event`` only names the resource (deterministic name, the physical id)
  and ``is_complete`` (called at once by the framework) does the work; any failure is
  then reported with the real physical id and the rollback Delete reaches this handler.
* **Every name is deterministic** (``<base>-<hash>``; configs ``<endpoint>-<hash>``), so a
  Delete or a rollback finds what a failed or timed-out step left from the event's
  properties alone, without the physical id. Every resource is tagged with the stack
  id, the logical id and its generation (the hash), on create and on update.
* **One hour.** CloudFormation waits at most ``ServiceTimeout`` (<= 3,600 s) for an answer;
  the framework's ``totalTimeout`` (<= 1 h) ends the wait loop with "Operation timed
  out". The handler keeps its own budget (:data:`BUDGET_SECONDS`, less than both, the
  deadline travels in ``Data``) and fails first, naming the endpoint, its state and what
  was cleaned, so CloudFormation always learns the physical id.
* **Retries converge.** An endpoint or component of our name left ``Failed`` by an
  earlier attempt is deleted and recreated; a ``Failed`` one of this attempt is reported
  with its reason and deleted.
* **Deletes are idempotent.** SageMaker refuses to delete an endpoint or inference
  component that is already ``Deleting`` (a ``ValidationException``), which is what the
  rollback Delete after a reported failure, or a Delete sent twice, meets. Every delete
  therefore treats a resource already gone as deleted and one already ``Deleting`` as
  being deleted; the Delete then waits in ``is_complete`` until it is gone, within the
  same budget as any other step. An endpoint config is deleted at once, or is gone.
* **Ours** means named under the construct's prefix (``<base>-``): exactly what the
  handler role may touch. Anything else on our endpoint (a component added by hand) is
  never deleted; the endpoint it blocks is kept, tagged ``gpu-share:retained`` and
  reported in the log.

``Kind: Endpoint`` (physical id ``<base>-<hash of instance type and layout>``)
    Create: endpoint config then endpoint; complete when ``InService`` on that config.
    Update, layout or instance type changed: a new endpoint under a new name, created
    before CloudFormation deletes the old one (old and new run side by side: twice the
    instances for the length of the update). Update, anything else: a new config and
    ``UpdateEndpoint``; the old config is deleted once the endpoint runs the new one; a
    rolled-back update deletes the config it made. The rollback of a failed replacement
    deletes the new endpoint and its config. Delete: our components, the endpoint, its
    configs.

``Kind: InferenceComponent`` (physical id ``<base>-<model>-<hash of endpoint and partition>``)
    Create: ``CreateInferenceComponent`` (one partition per copy); complete when
    ``InService`` with the requested model, resources and copies. Update, endpoint or
    partition type changed: a new component (the old one is deleted by CloudFormation; a
    rolled-back replacement deletes the new one). Update, model or resources: a rolling
    ``UpdateInferenceComponent`` with a ``DeploymentConfig`` of one copy per batch (the
    construct reserves a free partition per model for it). Copies: set at create; after
    that Application Auto Scaling owns ``DesiredCopyCount`` when ``MaxCopyCount >
    MinCopyCount`` and the handler only moves it back inside a changed ``[min, max]``.

The Lambda runtime's boto3 may not know the partition fields. The asset ships the
SageMaker service model (``data/``, see ``_vendor.py``) and the function sets
``AWS_DATA_PATH`` to it; :func:`require_partition_support` refuses to run, with the
reason, when the loaded model still lacks them instead of creating an unpartitioned
endpoint.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import math
import os
import re
import time
from typing import Any

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

ENDPOINT = "Endpoint"
COMPONENT = "InferenceComponent"
DEFAULT_VARIANT = "AllTraffic"
#: The handler's own time budget per CloudFormation request. It must stay below the
#: provider framework's totalTimeout (55 min, see the construct) and CloudFormation's
#: ServiceTimeout (3,600 s), so that the handler, not a timeout, reports the failure.
BUDGET_SECONDS = 50 * 60
#: Copies a rolling update starts before it stops as many old ones. The construct reserves
#: this many free partitions per model (inference.config.ROLLING_UPDATE_BATCH_COPIES),
#: more above 20 copies (:func:`rolling_batch`).
ROLLING_BATCH_COPIES = 1
#: Endpoint states in which SageMaker is still working; a delete waits for them to end.
_BUSY = ("Creating", "Updating", "SystemUpdating", "RollingBack")
_GONE = re.compile(r"could not find|not found|does not exist", re.IGNORECASE)
_EXISTS = re.compile(r"already exist", re.IGNORECASE)
TAG_STACK = "gpu-share:stack-id"
TAG_LOGICAL = "gpu-share:logical-id"
TAG_GENERATION = "gpu-share:generation"
TAG_RETAINED = "gpu-share:retained"


class HandlerError(Exception):
    """A failure reported to CloudFormation with its reason."""


def _now() -> float:
    """Seconds since the epoch (a function, so the lifecycle tests can run a virtual clock)."""
    return time.time()


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
            " function's asset (regenerate it with python -m cdk_gpu_share.inference.handler._vendor)"
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


def _epoch(value: Any) -> float:
    if isinstance(value, dt.datetime):
        return value.timestamp()
    return float(value or 0)


def _tags(event: dict, name: str) -> list[dict]:
    """The properties' tags plus ownership: stack id, logical id, generation (the name's hash)."""
    tags = {t["Key"]: t["Value"] for t in event["ResourceProperties"].get("Tags") or []}
    tags[TAG_STACK] = event.get("StackId", "")[:256]
    tags[TAG_LOGICAL] = event.get("LogicalResourceId", "")[:256]
    tags[TAG_GENERATION] = name.rsplit("-", 1)[-1]
    return [{"Key": k, "Value": v} for k, v in tags.items() if v]


def _start(event: dict) -> dict:
    """``Data`` that on_event hands to is_complete: when this request must be done by."""
    del event
    return {"Deadline": str(int(_now() + BUDGET_SECONDS))}


def _deadline(event: dict) -> float:
    raw = (event.get("Data") or {}).get("Deadline")
    return float(raw) if raw else _now() + BUDGET_SECONDS


def _started(event: dict) -> float:
    return _deadline(event) - BUDGET_SECONDS


def _out_of_time(event: dict) -> bool:
    return _now() >= _deadline(event)


def _minutes() -> str:
    return f"{BUDGET_SECONDS // 60} minutes"


def _add_tags(sm: Any, arn: str | None, tags: list[dict]) -> None:
    if arn and tags:
        sm.add_tags(ResourceArn=arn, Tags=tags)


# --------------------------------------------------------------------------- endpoint names


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


def _endpoint_data(props: dict, name: str, arn: str | None = None) -> dict:
    data = {"EndpointName": name, "EndpointConfigName": config_name(props), "VariantName": props.get("VariantName") or DEFAULT_VARIANT}
    if arn:
        data["EndpointArn"] = arn
    return data


def _owned(name: str | None, base: str) -> bool:
    return name is not None and name.startswith(f"{base}-")


# --------------------------------------------------------------------------- SageMaker steps


def _describe_endpoint(sm: Any, name: str) -> dict | None:
    try:
        return sm.describe_endpoint(EndpointName=name)
    except _client_error() as exc:
        if _is_gone(exc):
            return None
        raise


def _describe_component(sm: Any, name: str) -> dict | None:
    try:
        return sm.describe_inference_component(InferenceComponentName=name)
    except _client_error() as exc:
        if _is_gone(exc):
            return None
        raise


def _create_config(sm: Any, event: dict, props: dict) -> str:
    name = config_name(props)
    try:
        sm.create_endpoint_config(EndpointConfigName=name, Tags=_tags(event, name), **_config_request(props))
        LOG.info("created endpoint config %s", name)
    except _client_error() as exc:
        if not _is_exists(exc):
            raise
        LOG.info("endpoint config %s exists already (retry)", name)
    return name


def _delete_config(sm: Any, name: str) -> bool:
    """Delete an endpoint config; ``True`` when something was deleted."""
    try:
        sm.delete_endpoint_config(EndpointConfigName=name)
        LOG.info("deleted endpoint config %s", name)
        return True
    except _client_error() as exc:
        if not _is_gone(exc):
            raise
        return False


def _delete(what: str, name: str, delete: Any, describe: Any, status_key: str) -> None:
    """Start deleting ``what`` ``name``; already gone or already ``Deleting`` counts as started.

    SageMaker answers a delete of a resource in ``Deleting`` with a ``ValidationException``;
    its wording is not relied on: after any ``ValidationException`` the resource is
    described, and only one that exists in another status re-raises the refusal.
    """
    try:
        delete()
        LOG.info("deleting %s %s", what, name)
        return
    except _client_error() as exc:
        if _is_gone(exc):
            LOG.info("%s %s is already gone", what, name)
            return
        if _code(exc)[0] != "ValidationException":
            raise
        described = describe()
        if described is None:
            LOG.info("%s %s is already gone", what, name)
            return
        if described.get(status_key) != "Deleting":
            raise
        LOG.info("%s %s is already being deleted", what, name)


def _delete_component(sm: Any, name: str) -> None:
    _delete(
        "inference component", name,
        lambda: sm.delete_inference_component(InferenceComponentName=name),
        lambda: _describe_component(sm, name), "InferenceComponentStatus",
    )


def _delete_endpoint(sm: Any, name: str) -> None:
    _delete(
        "endpoint", name,
        lambda: sm.delete_endpoint(EndpointName=name),
        lambda: _describe_endpoint(sm, name), "EndpointStatus",
    )


def _components_on(sm: Any, endpoint: str) -> list[dict]:
    found: list[dict] = []
    token = None
    while True:
        kwargs: dict[str, Any] = {"EndpointNameEquals": endpoint, "MaxResults": 100}
        if token:
            kwargs["NextToken"] = token
        page = sm.list_inference_components(**kwargs)
        found.extend(page.get("InferenceComponents", []))
        token = page.get("NextToken")
        if not token:
            return found


def _remove_endpoint(sm: Any, name: str, base: str, configs: list[str], event: dict) -> tuple[bool, list[str]]:
    """One step towards endpoint ``name`` and its ``configs`` being gone.

    Returns ``(done, foreign)``: ``foreign`` lists components on the endpoint that are not
    ours; while one is there, the endpoint cannot be deleted and is kept (``done`` is then
    ``True`` and nothing more is deleted).
    """
    components = _components_on(sm, name)
    ours = [c for c in components if _owned(c["InferenceComponentName"], base)]
    foreign = sorted(c["InferenceComponentName"] for c in components if not _owned(c["InferenceComponentName"], base))
    for c in ours:
        if c.get("InferenceComponentStatus") != "Deleting":
            _delete_component(sm, c["InferenceComponentName"])
    if ours:
        return False, foreign
    described = _describe_endpoint(sm, name)
    if described is not None and foreign:
        LOG.warning(
            "endpoint %s is kept: it serves inference components this stack did not create (%s); it bills until"
            " they and the endpoint are deleted by hand (aws sagemaker delete-inference-component, delete-endpoint,"
            " delete-endpoint-config %s)",
            name, ", ".join(foreign), " ".join(configs),
        )
        _add_tags(sm, described.get("EndpointArn"), [{"Key": TAG_RETAINED, "Value": f"serves {' '.join(foreign)}"[:256]}])
        return True, foreign
    if described is None:
        for cfg in configs:
            _delete_config(sm, cfg)
        return True, foreign
    status = described["EndpointStatus"]
    if status in _BUSY:
        LOG.info("endpoint %s is %s: deleting it once that ends", name, status)
    elif status != "Deleting":
        _delete_endpoint(sm, name)
    return False, foreign


def _endpoint_configs(name: str, *candidates: str | None) -> list[str]:
    """The configs that belong to endpoint ``name`` (named ``<name>-...``), never another's."""
    return sorted({c for c in candidates if c and c.startswith(f"{name}-")})


# --------------------------------------------------------------------------- endpoint


def endpoint_on_event(event: dict, sm: Any) -> dict:
    kind = event["RequestType"]
    props = event["ResourceProperties"]
    if kind == "Create":
        name = endpoint_name(props)
        return {"PhysicalResourceId": name, "Data": {**_endpoint_data(props, name), **_start(event)}}
    if kind == "Update":
        old = event["OldResourceProperties"]
        name = endpoint_name(props)
        if name != event["PhysicalResourceId"]:
            LOG.info("layout or instance type changed: new endpoint %s replaces %s", name, event["PhysicalResourceId"])
            return {"PhysicalResourceId": name, "Data": {**_endpoint_data(props, name), **_start(event)}}
        described = _describe_endpoint(sm, name)
        if described is None:
            raise HandlerError(f"endpoint {name} does not exist: it was deleted outside CloudFormation")
        data = {**_endpoint_data(props, name), **_start(event)}
        if endpoint_name(old) != name:
            # Old properties of another endpoint on our physical id: CloudFormation rolls
            # back a replacement that failed. The new endpoint (old's name) must go.
            LOG.info("rollback of the failed replacement %s: deleting it", endpoint_name(old))
            data["CleanupEndpoint"] = endpoint_name(old)
        cfg = config_name(props)
        if described.get("EndpointConfigName") != cfg:
            _create_config(sm, event, props)
            try:
                sm.update_endpoint(EndpointName=name, EndpointConfigName=cfg)
            except _client_error() as exc:
                _delete_config(sm, cfg)
                raise HandlerError(
                    f"UpdateEndpoint {name} to {cfg} failed: {_code(exc)[1]}; deleted endpoint config {cfg}"
                ) from None
            LOG.info("updating endpoint %s to %s", name, cfg)
        _add_tags(sm, described.get("EndpointArn"), _tags(event, name))
        return {"PhysicalResourceId": name, "Data": data}
    if kind == "Delete":
        name = event["PhysicalResourceId"]
        if not _owned(name, props["EndpointBaseName"]):
            # CloudFormation never learnt the physical id (a timed-out create): the name is
            # deterministic, so the endpoint the properties describe is the one to delete.
            name = endpoint_name(props)
        described = _describe_endpoint(sm, name)
        data = {**_start(event)}
        if described and described.get("EndpointConfigName"):
            # The config the endpoint really runs, for is_complete to delete once it is gone.
            data["EndpointConfigName"] = described["EndpointConfigName"]
        return {"PhysicalResourceId": event["PhysicalResourceId"], "Data": data}
    raise HandlerError(f"unknown request type {kind!r}")


def _create_endpoint_step(sm: Any, event: dict, props: dict, name: str) -> None:
    """CreateEndpointConfig + CreateEndpoint; a failed CreateEndpoint leaves no config."""
    cfg = _create_config(sm, event, props)
    try:
        sm.create_endpoint(EndpointName=name, EndpointConfigName=cfg, Tags=_tags(event, name))
    except _client_error() as exc:
        if _is_exists(exc):
            return
        cleaned = _delete_config(sm, cfg)
        raise HandlerError(
            f"CreateEndpoint {name} failed: {_code(exc)[1]}; {'deleted' if cleaned else 'no'} endpoint config {cfg}"
            f"{'' if cleaned else ' to delete'}, nothing of {name} is left"
        ) from None
    LOG.info("creating endpoint %s on %s", name, cfg)


def _endpoint_reached(sm: Any, event: dict, props: dict, name: str, creating: bool) -> dict | None:
    """One step of bringing endpoint ``name`` to ``InService`` on ``config_name(props)``.

    Returns the description once there, ``None`` while SageMaker works; raises on failure.
    """
    expected = config_name(props)
    described = _describe_endpoint(sm, name)
    if described is None:
        if not creating:
            raise HandlerError(f"endpoint {name} disappeared while it was being updated")
        if _out_of_time(event):
            raise HandlerError(f"endpoint {name} was not created within {_minutes()}; nothing of it is left")
        _create_endpoint_step(sm, event, props, name)
        return None
    status = described["EndpointStatus"]
    earlier = _epoch(described.get("CreationTime")) < _started(event)  # made before this request
    stale = _epoch(described.get("LastModifiedTime") or described.get("CreationTime")) < _started(event)
    if status == "Failed":
        if creating and earlier:
            # Left by an earlier attempt (a failed endpoint accepts only DeleteEndpoint):
            # delete it and create it again, instead of reporting its old failure.
            LOG.info("endpoint %s is Failed from an earlier attempt: deleting it to create it again", name)
            _delete_endpoint(sm, name)
            return None
        _delete_endpoint(sm, name)
        cleanup = "deleting it; the rollback deletes its endpoint config" if creating else "deleting it"
        raise HandlerError(f"endpoint {name} is Failed: {described.get('FailureReason', 'no reason given')}; {cleanup}")
    if status == "UpdateRollbackFailed":
        raise HandlerError(
            f"endpoint {name} is UpdateRollbackFailed: {described.get('FailureReason', 'no reason given')}; it needs"
            " attention in the SageMaker console before the stack can go on"
        )
    if status == "Deleting":
        if _out_of_time(event):
            raise HandlerError(f"endpoint {name} was still being deleted (an earlier attempt's) after {_minutes()}; retry")
        return None
    if status != "InService":
        if _out_of_time(event):
            what = (
                "the rollback deletes it and its endpoint config once SageMaker ends the create"
                if creating
                else "SageMaker rolls the update back; the rollback deletes the new endpoint config"
            )
            raise HandlerError(
                f"endpoint {name} is still {status} after {_minutes()} (CloudFormation waits at most an hour per"
                f" step): {what}"
            )
        return None
    if described.get("EndpointConfigName") == expected:
        return described
    if creating and earlier and described.get("EndpointConfigName", "").startswith(f"{name}-"):
        # An earlier attempt's endpoint on another of our configs: move it to this one.
        _create_config(sm, event, props)
        sm.update_endpoint(EndpointName=name, EndpointConfigName=expected)
        return None
    if not stale:
        deleted = _delete_config(sm, expected)
        raise HandlerError(
            f"endpoint {name} is InService on {described.get('EndpointConfigName')}, not {expected}: the update was"
            f" rolled back ({described.get('FailureReason', 'no reason given')})"
            f"{f'; deleted endpoint config {expected}' if deleted else ''}"
        )
    if _out_of_time(event):
        raise HandlerError(f"endpoint {name} did not start the update to {expected} within {_minutes()}")
    return None


def endpoint_is_complete(event: dict, sm: Any) -> dict:
    kind = event["RequestType"]
    props = event["ResourceProperties"]
    base = props["EndpointBaseName"]
    name = event["PhysicalResourceId"]
    data = event.get("Data") or {}
    if kind == "Delete":
        if not _owned(name, base):
            name = endpoint_name(props)
        configs = _endpoint_configs(name, data.get("EndpointConfigName"), config_name(props))
        done, _ = _remove_endpoint(sm, name, base, configs, event)
        if done:
            return {"IsComplete": True}
        if _out_of_time(event):
            described = _describe_endpoint(sm, name) or {}
            raise HandlerError(
                f"endpoint {name} is still {described.get('EndpointStatus', 'being deleted')} after {_minutes()}:"
                " SageMaker deletes an endpoint only once it has left Creating/Updating; retry the delete (it resumes)"
            )
        return {"IsComplete": False}
    old = event.get("OldResourceProperties") or {}
    stale = data.get("CleanupEndpoint")
    if stale:
        # The rollback of a failed replacement: ``old`` describes the new endpoint that
        # never became the physical id. Delete it and its config, or it bills forever.
        done, _ = _remove_endpoint(sm, stale, base, _endpoint_configs(stale, config_name(old)), event)
        if not done:
            if _out_of_time(event):
                raise HandlerError(f"endpoint {stale} (the failed replacement) is not deleted after {_minutes()}; retry")
            return {"IsComplete": False}
    creating = kind == "Create" or (endpoint_name(old) != name and not stale)
    reached = _endpoint_reached(sm, event, props, name, creating)
    if reached is None:
        return {"IsComplete": False}
    described = reached
    if kind == "Update" and endpoint_name(old) == name and config_name(old) != config_name(props):
        # The config the endpoint left (after an update, or after a rolled-back one).
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


def _runs(described: dict, props: dict) -> bool:
    """Whether a described component runs the requested model and resources."""
    want = _specification(props)
    have = described.get("Specification") or {}
    if have.get("ModelName") != want["ModelName"]:
        return False
    resources = have.get("ComputeResourceRequirements") or {}
    for key, value in want["ComputeResourceRequirements"].items():
        got = resources.get(key)
        if isinstance(value, float):
            if got is None or abs(float(got) - value) > 1e-9:
                return False
        elif got != value:
            return False
    return True


def _copies(props: dict) -> int:
    n = _int(props["CopyCount"])
    lo = _int(props.get("MinCopyCount", n))
    hi = _int(props.get("MaxCopyCount", n))
    return max(1, lo, min(n, hi))


def _bounds(props: dict) -> tuple[int, int]:
    n = _int(props["CopyCount"])
    return _int(props.get("MinCopyCount", n)), _int(props.get("MaxCopyCount", n))


def _autoscaled(props: dict) -> bool:
    lo, hi = _bounds(props)
    return hi > lo


def _wanted_copies(props: dict, current: int | None) -> int:
    """The copy count the stack asks for: fixed copies, or the autoscaler's inside [min, max]."""
    if not _autoscaled(props) or current is None:
        return _copies(props)
    lo, hi = _bounds(props)
    return min(max(current, lo), hi)


def _component_data(props: dict, name: str, arn: str | None = None) -> dict:
    data = {"InferenceComponentName": name, "EndpointName": props["EndpointName"]}
    if arn:
        data["InferenceComponentArn"] = arn
    return data


def rolling_batch(copies: int) -> int:
    """Copies per rolling batch: one, or 5 % of the copies (rounded up) above 20.

    The API reference puts ``MaximumBatchSize`` at 5-50 % of the copy count.
    """
    return max(ROLLING_BATCH_COPIES, math.ceil(copies * 5 / 100))


def _deployment_config(current: int, event: dict) -> dict | None:
    """The smallest batch SageMaker takes, both ways, so that an update needs few free partitions.

    With a single copy there is no batch of 5-50 % and SageMaker's default (that one copy)
    is the same size, so nothing is sent.
    """
    if current < 2:
        return None
    batch = {"Type": "COPY_COUNT", "Value": rolling_batch(current)}
    remaining = int(_deadline(event) - _now())
    return {
        "RollingUpdatePolicy": {
            "MaximumBatchSize": batch,
            "RollbackMaximumBatchSize": batch,
            "WaitIntervalInSeconds": 0,
            "MaximumExecutionTimeoutInSeconds": max(600, min(28800, remaining)),
        }
    }


def component_on_event(event: dict, sm: Any) -> dict:
    kind = event["RequestType"]
    props = event["ResourceProperties"]
    if kind == "Create":
        name = component_name(props)
        return {"PhysicalResourceId": name, "Data": {**_component_data(props, name), **_start(event)}}
    if kind == "Update":
        old = event["OldResourceProperties"]
        name = component_name(props)
        if name != event["PhysicalResourceId"]:
            LOG.info("endpoint or partition type changed: new component %s replaces %s", name, event["PhysicalResourceId"])
            return {"PhysicalResourceId": name, "Data": {**_component_data(props, name), **_start(event)}}
        data = {**_component_data(props, name), **_start(event)}
        if component_name(old) != name:
            # The rollback after a failed replacement: ``old`` describes the failed new
            # component (is_complete deletes it); this one still runs ``props``.
            LOG.info("inference component %s: rollback after a failed replacement, deleting %s", name, component_name(old))
            return {"PhysicalResourceId": name, "Data": {**data, "CleanupComponent": component_name(old)}}
        described = _describe_component(sm, name)
        if described is None:
            raise HandlerError(f"inference component {name} does not exist: it was deleted outside CloudFormation")
        runtime = described.get("RuntimeConfig") or {}
        current = runtime.get("DesiredCopyCount")
        copies = _wanted_copies(props, current)
        if not _runs(described, props):
            request: dict[str, Any] = {"InferenceComponentName": name, "Specification": _specification(props)}
            if copies != current:
                request["RuntimeConfig"] = {"CopyCount": copies}
            deployment = _deployment_config(_int(runtime.get("CurrentCopyCount") or copies), event)
            if deployment:
                request["DeploymentConfig"] = deployment
            sm.update_inference_component(**request)
            LOG.info("updating inference component %s (rolling)", name)
        elif copies != current:
            sm.update_inference_component_runtime_config(InferenceComponentName=name, DesiredRuntimeConfig={"CopyCount": copies})
            LOG.info("setting inference component %s to %d copies", name, copies)
        _add_tags(sm, described.get("InferenceComponentArn"), _tags(event, name))
        return {"PhysicalResourceId": name, "Data": data}
    if kind == "Delete":
        name = event["PhysicalResourceId"]
        if not _owned(name, props["ComponentBaseName"]):
            name = component_name(props)
        _delete_component(sm, name)
        return {"PhysicalResourceId": event["PhysicalResourceId"], "Data": _start(event)}
    raise HandlerError(f"unknown request type {kind!r}")


def _remove_component(sm: Any, name: str) -> bool:
    described = _describe_component(sm, name)
    if described is None:
        return True
    if described.get("InferenceComponentStatus") != "Deleting":
        _delete_component(sm, name)
    return False


def component_is_complete(event: dict, sm: Any) -> dict:
    kind = event["RequestType"]
    props = event["ResourceProperties"]
    name = event["PhysicalResourceId"]
    if kind == "Delete":
        if not _owned(name, props["ComponentBaseName"]):
            name = component_name(props)
        if _remove_component(sm, name):
            return {"IsComplete": True}
        if _out_of_time(event):
            raise HandlerError(f"inference component {name} is not deleted after {_minutes()}; retry the delete")
        return {"IsComplete": False}
    old = event.get("OldResourceProperties") or {}
    stale_name = (event.get("Data") or {}).get("CleanupComponent")
    if stale_name and _owned(stale_name, props["ComponentBaseName"]):
        if not _remove_component(sm, stale_name):
            if _out_of_time(event):
                raise HandlerError(f"inference component {stale_name} (the failed replacement) is not deleted after {_minutes()}")
            return {"IsComplete": False}
    creating = kind == "Create" or (component_name(old) != name and not stale_name)
    described = _describe_component(sm, name)
    if described is None:
        if not creating:
            raise HandlerError(f"inference component {name} disappeared while it was being updated")
        if _out_of_time(event):
            raise HandlerError(f"inference component {name} was not created within {_minutes()}; nothing of it is left")
        try:
            sm.create_inference_component(
                InferenceComponentName=name,
                EndpointName=props["EndpointName"],
                VariantName=props.get("VariantName") or DEFAULT_VARIANT,
                Specification=_specification(props),
                # CopyCount must be > 0 at creation.
                RuntimeConfig={"CopyCount": _copies(props)},
                Tags=_tags(event, name),
            )
            LOG.info("creating inference component %s on %s", name, props["EndpointName"])
        except _client_error() as exc:
            if not _is_exists(exc):
                raise HandlerError(f"CreateInferenceComponent {name} failed: {_code(exc)[1]}; nothing was created") from None
        return {"IsComplete": False}
    status = described.get("InferenceComponentStatus")
    earlier = _epoch(described.get("CreationTime")) < _started(event)  # made before this request
    stale = _epoch(described.get("LastModifiedTime") or described.get("CreationTime")) < _started(event)
    if status == "Failed":
        _delete_component(sm, name)
        if creating and earlier:
            LOG.info("inference component %s is Failed from an earlier attempt: deleting it to create it again", name)
            return {"IsComplete": False}
        raise HandlerError(
            f"inference component {name} failed: {described.get('FailureReason', 'no reason given')}; deleting it"
        )
    if status != "InService":
        if _out_of_time(event):
            raise HandlerError(
                f"inference component {name} is still {status} after {_minutes()} (CloudFormation waits at most an"
                " hour per step)"
            )
        return {"IsComplete": False}
    runtime = described.get("RuntimeConfig") or {}
    desired, current = runtime.get("DesiredCopyCount"), runtime.get("CurrentCopyCount")
    wanted = _wanted_copies(props, desired)
    if _runs(described, props) and desired == wanted and current == desired:
        return {"IsComplete": True, "Data": _component_data(props, name, described["InferenceComponentArn"])}
    if not _runs(described, props) and described.get("FailureReason") and not stale:
        raise HandlerError(
            f"inference component {name} is InService on model {(described.get('Specification') or {}).get('ModelName')},"
            f" not {props['ModelName']}: the rolling update was rolled back ({described['FailureReason']})"
        )
    if _out_of_time(event):
        raise HandlerError(
            f"inference component {name} does not run the requested state after {_minutes()}: model"
            f" {(described.get('Specification') or {}).get('ModelName')} (wanted {props['ModelName']}), copies"
            f" {current}/{desired} (wanted {wanted})"
        )
    return {"IsComplete": False}


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
