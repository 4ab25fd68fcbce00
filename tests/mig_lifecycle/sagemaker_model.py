"""An in-memory model of the SageMaker endpoint API behind a real boto3 client.

The client is botocore's, with the SageMaker model vendored into the Lambda asset, so
botocore validates and serializes every request exactly as the function does; a
``before-send`` hook answers from this model instead of the network.

What is modelled (and what is an assumption, marked *model*):

* Endpoints: ``Creating`` for ``create_seconds`` then ``InService`` (or ``Failed`` when
  ``fail_endpoints`` says so); ``UpdateEndpoint`` -> ``Updating`` -> ``InService`` on the new
  config, or back on the old one with a ``FailureReason`` (``fail_updates``);
  ``DeleteEndpoint`` refused while ``Creating``/``Updating`` (*model*, the existing
  handler's behaviour); refused while inference components remain (*model*: the SageMaker
  guide says to delete them first); a ``Failed`` endpoint accepts only ``DeleteEndpoint``.
* Deletes take time: an endpoint is ``Deleting`` for ``delete_seconds``, a component for
  ``component_delete_seconds``, then gone (describe: ValidationException ``Could not find
  ...``). A second delete of a resource still ``Deleting`` is refused with a
  ValidationException (the wording is *model*). An endpoint config goes at once.
* ``ResourceLimitExceeded`` when more endpoints of an instance type would run than
  ``endpoint_quota`` allows (GPU endpoint quotas are often 0).
* Inference components occupy one partition of their profile per copy on the endpoint
  (layout count x 8 GPUs x instances). A create or copy increase with too few free
  partitions fails (*model*). A rolling ``UpdateInferenceComponent`` needs
  ``MaximumBatchSize`` free partitions, or every copy at once without a
  ``DeploymentConfig`` (*model* of the default), and rolls back otherwise.
  ``UpdateInferenceComponentRuntimeConfig`` sets ``DesiredCopyCount`` at once and
  ``CurrentCopyCount`` follows after ``copy_seconds``, the status staying ``InService``.
  ``fail_components`` makes the next creates fail as a container that never passes its
  health check does (``Creating`` then ``Failed`` with the reason).
* IAM: mutating calls on names outside ``allowed_prefix`` fail with AccessDenied, as the
  handler role's ``<base>-*`` resources do.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import botocore.session
from botocore.awsrequest import AWSResponse

from cdk_gpu_share.inference.handler import index as h

DATA = Path(h.__file__).resolve().parent / "data"
REGION = "us-east-1"
ACCOUNT = "111122223333"
GPUS = {"ml.p4d.24xlarge": 8, "ml.p4de.24xlarge": 8, "ml.p5.48xlarge": 8}


class Clock:
    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.t = start

    def now(self) -> float:
        return self.t


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any):
        yield self.body


class ApiError(Exception):
    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def arn(kind: str, name: str) -> str:
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:{kind}/{name}"


@dataclass
class Endpoint:
    name: str
    config: str
    status: str
    created: float
    modified: float
    ready_at: float
    tags: dict = field(default_factory=dict)
    failure: str | None = None
    pending_config: str | None = None
    fail: str | None = None


@dataclass
class Component:
    name: str
    endpoint: str
    spec: dict
    status: str
    desired: int
    current: int
    created: float
    modified: float
    ready_at: float
    tags: dict = field(default_factory=dict)
    failure: str | None = None
    pending_spec: dict | None = None
    by_hand: bool = False
    fail: str | None = None


class SageMaker:
    """The model. ``client`` is a real botocore SageMaker client answered by it."""

    def __init__(self, clock: Clock, *, allowed_prefix: str = "small-models-") -> None:
        self.clock = clock
        self.allowed_prefix = allowed_prefix
        self.configs: dict[str, dict] = {}
        self.endpoints: dict[str, Endpoint] = {}
        self.components: dict[str, Component] = {}
        self.deleting: dict[str, float] = {}  # endpoint name -> gone at
        self.deleting_components: dict[str, float] = {}
        self.create_seconds = 600.0
        self.update_seconds = 480.0
        self.delete_seconds = 120.0
        self.component_seconds = 300.0
        self.component_delete_seconds = 150.0
        self.copy_seconds = 120.0
        self.endpoint_quota: dict[str, int] = {}
        self.fail_endpoints: list[str] = []  # reasons, one per endpoint create that fails
        self.fail_updates: list[str] = []  # reasons, one per UpdateEndpoint that rolls back
        self.fail_components: list[str] = []  # reasons, one per component create that fails
        self.calls: list[tuple[str, dict]] = []
        self.refused: list[tuple[str, dict, str]] = []  # (operation, request, error message)
        self.max_endpoints_seen = 0
        self.client = self._client()

    # ------------------------------------------------------------------ wiring

    def _client(self):
        session = botocore.session.get_session()
        session.set_config_variable("data_path", str(DATA))
        from botocore.config import Config

        client = session.create_client(
            "sagemaker",
            region_name=REGION,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(retries={"max_attempts": 1, "mode": "standard"}),
        )
        client.meta.events.register("before-send.sagemaker", self._answer)
        return client

    def _answer(self, request, **_: Any) -> AWSResponse:
        op = request.headers["X-Amz-Target"].decode().split(".", 1)[1] if isinstance(
            request.headers["X-Amz-Target"], bytes
        ) else request.headers["X-Amz-Target"].split(".", 1)[1]
        body = json.loads(request.body or b"{}")
        self.calls.append((op, body))
        try:
            out = getattr(self, f"_op_{op}")(body)
            status, payload = 200, out or {}
        except ApiError as exc:
            status, payload = exc.status, {"__type": exc.code, "message": exc.message}
            self.refused.append((op, body, exc.message))
        return AWSResponse(request.url, status, {"Content-Type": "application/x-amz-json-1.1"}, _Raw(json.dumps(payload).encode()))

    # ------------------------------------------------------------------ time

    def advance(self, seconds: float) -> None:
        self.clock.t += seconds
        self.tick()

    def tick(self) -> None:
        now = self.clock.t
        for name, gone_at in list(self.deleting.items()):
            if now >= gone_at:
                del self.deleting[name]
                self.endpoints.pop(name, None)
        for name, gone_at in list(self.deleting_components.items()):
            if now >= gone_at:
                del self.deleting_components[name]
                self.components.pop(name, None)
        for e in self.endpoints.values():
            if e.status == "Creating" and now >= e.ready_at:
                if e.fail:
                    e.status, e.failure = "Failed", e.fail
                else:
                    e.status = "InService"
                e.modified = now
            elif e.status == "Updating" and now >= e.ready_at:
                if e.fail:
                    e.status, e.failure, e.pending_config = "InService", e.fail, None
                else:
                    e.status, e.config, e.pending_config, e.failure = "InService", e.pending_config, None, None
                e.fail = None
                e.modified = now
        for c in self.components.values():
            if c.status in ("Creating", "Updating") and now >= c.ready_at:
                self._finish_component(c)
            elif c.status == "InService" and c.current != c.desired and now >= c.ready_at:
                free = self.free_partitions(c.endpoint, self.profile(c.spec))
                c.current = min(c.desired, c.current + max(0, free)) if c.desired > c.current else c.desired
                c.modified = now

    def _finish_component(self, c: Component) -> None:
        now = self.clock.t
        profile = self.profile(c.spec if c.pending_spec is None else c.pending_spec)
        if c.status == "Creating":
            free = self.free_partitions(c.endpoint, profile, excluding=c.name)
            if c.fail:
                c.status, c.failure = "Failed", c.fail
            elif free < c.desired:
                c.status = "Failed"
                c.failure = f"not enough free {profile} partitions for {c.desired} copies ({free} free)"  # model
            else:
                c.status, c.current = "InService", c.desired
        else:  # Updating: the rolling update was checked when it started
            c.spec, c.pending_spec, c.status, c.failure = c.pending_spec, None, "InService", None
            c.current = c.desired
        c.modified = now

    # ------------------------------------------------------------------ capacity

    @staticmethod
    def profile(spec: dict) -> str:
        return spec["ComputeResourceRequirements"].get("AcceleratorPartitionType", "")

    def partitions(self, endpoint: str, profile: str) -> int:
        e = self.endpoints[endpoint]
        variant = self.configs[e.config]["ProductionVariants"][0]
        layout = variant["AcceleratorPartitionLayouts"][0]["AcceleratorPartitionTypes"]
        return Counter(layout)[profile] * GPUS[variant["InstanceType"]] * variant["InitialInstanceCount"]

    def free_partitions(self, endpoint: str, profile: str, *, excluding: str | None = None) -> int:
        used = sum(
            max(c.current, c.desired if c.status == "Creating" and c.name != excluding else c.current)
            for c in self.components.values()
            if c.endpoint == endpoint and self.profile(c.spec) == profile and c.name != excluding
        )
        return self.partitions(endpoint, profile) - used

    # ------------------------------------------------------------------ checks

    def _iam(self, name: str) -> None:
        if not name.startswith(self.allowed_prefix):
            raise ApiError(
                "AccessDeniedException",
                f"User: arn:aws:sts::{ACCOUNT}:assumed-role/HandlerRole/fn is not authorized to perform this action on"
                f" resource {name} because no identity-based policy allows it",
            )

    @staticmethod
    def _validation(message: str) -> ApiError:
        return ApiError("ValidationException", message)

    # ------------------------------------------------------------------ endpoint configs

    def _op_CreateEndpointConfig(self, b: dict) -> dict:
        name = b["EndpointConfigName"]
        self._iam(name)
        if name in self.configs:
            raise self._validation(f'Cannot create already existing endpoint configuration "{arn("endpoint-config", name)}".')
        self.configs[name] = {**copy.deepcopy(b), "Tags": {t["Key"]: t["Value"] for t in b.get("Tags", [])}}
        return {"EndpointConfigArn": arn("endpoint-config", name)}

    def _op_DeleteEndpointConfig(self, b: dict) -> dict:
        name = b["EndpointConfigName"]
        self._iam(name)
        if name not in self.configs:
            raise self._validation(f'Could not find endpoint configuration "{arn("endpoint-config", name)}".')
        del self.configs[name]
        return {}

    def _op_DescribeEndpointConfig(self, b: dict) -> dict:
        name = b["EndpointConfigName"]
        if name not in self.configs:
            raise self._validation(f'Could not find endpoint configuration "{arn("endpoint-config", name)}".')
        c = self.configs[name]
        return {"EndpointConfigName": name, "EndpointConfigArn": arn("endpoint-config", name),
                "ProductionVariants": c["ProductionVariants"], "CreationTime": self.clock.t}

    # ------------------------------------------------------------------ endpoints

    def _running(self, instance_type: str) -> int:
        return sum(
            1
            for e in self.endpoints.values()
            if e.status != "Failed" and self.configs.get(e.config, {}).get("ProductionVariants", [{}])[0].get("InstanceType") == instance_type
        )

    def _op_CreateEndpoint(self, b: dict) -> dict:
        name, cfg = b["EndpointName"], b["EndpointConfigName"]
        self._iam(name)
        if name in self.endpoints:
            raise self._validation(f'Cannot create already existing endpoint "{arn("endpoint", name)}".')
        if cfg not in self.configs:
            raise self._validation(f"Could not find endpoint configuration {cfg}.")
        itype = self.configs[cfg]["ProductionVariants"][0]["InstanceType"]
        quota = self.endpoint_quota.get(itype)
        if quota is not None and self._running(itype) + 1 > quota:
            raise ApiError(
                "ResourceLimitExceeded",
                f"The account-level service limit 'ml.p4d.24xlarge for endpoint usage' is {quota} Instances, with"
                f" current utilization of {self._running(itype)} Instances and a request delta of 1 Instances.",
            )
        now = self.clock.t
        self.endpoints[name] = Endpoint(
            name, cfg, "Creating", now, now, now + self.create_seconds,
            tags={t["Key"]: t["Value"] for t in b.get("Tags", [])},
            fail=self.fail_endpoints.pop(0) if self.fail_endpoints else None,
        )
        self.max_endpoints_seen = max(self.max_endpoints_seen, len(self.endpoints))
        return {"EndpointArn": arn("endpoint", name)}

    def _endpoint(self, name: str) -> Endpoint:
        if name not in self.endpoints:
            raise self._validation(f'Could not find endpoint "{arn("endpoint", name)}".')
        return self.endpoints[name]

    def _op_DescribeEndpoint(self, b: dict) -> dict:
        e = self._endpoint(b["EndpointName"])
        out = {
            "EndpointName": e.name, "EndpointArn": arn("endpoint", e.name), "EndpointConfigName": e.config,
            "EndpointStatus": "Deleting" if e.name in self.deleting else e.status,
            "CreationTime": e.created, "LastModifiedTime": e.modified,
        }
        if e.failure:
            out["FailureReason"] = e.failure
        return out

    def _op_UpdateEndpoint(self, b: dict) -> dict:
        name, cfg = b["EndpointName"], b["EndpointConfigName"]
        self._iam(name)
        e = self._endpoint(name)
        if e.status != "InService" or name in self.deleting:
            raise self._validation(f"Cannot update in-progress endpoint \"{arn('endpoint', name)}\".")
        if cfg not in self.configs:
            raise self._validation(f"Could not find endpoint configuration {cfg}.")
        old = self.configs[e.config]["ProductionVariants"][0]["AcceleratorPartitionLayouts"]
        new = self.configs[cfg]["ProductionVariants"][0]["AcceleratorPartitionLayouts"]
        if old != new:
            raise self._validation("AcceleratorPartitionLayouts cannot be updated on an existing endpoint")  # model
        now = self.clock.t
        e.status, e.pending_config, e.modified, e.ready_at = "Updating", cfg, now, now + self.update_seconds
        e.fail = self.fail_updates.pop(0) if self.fail_updates else None
        return {"EndpointArn": arn("endpoint", name)}

    def _op_DeleteEndpoint(self, b: dict) -> dict:
        name = b["EndpointName"]
        self._iam(name)
        e = self._endpoint(name)
        if name in self.deleting:
            raise self._validation(f"Cannot delete endpoint \"{arn('endpoint', name)}\" while it is being deleted.")
        if e.status in ("Creating", "Updating"):
            raise self._validation(f"Cannot delete endpoint \"{arn('endpoint', name)}\" in {e.status} status.")  # model
        if any(c.endpoint == name for c in self.components.values()):
            raise self._validation(f"Endpoint \"{name}\" has inference components; delete them first.")  # model
        self.deleting[name] = self.clock.t + self.delete_seconds
        return {}

    # ------------------------------------------------------------------ components

    def _component(self, name: str) -> Component:
        if name not in self.components:
            raise self._validation(f"Could not find inference component \"{arn('inference-component', name)}\".")
        return self.components[name]

    def _op_CreateInferenceComponent(self, b: dict, *, by_hand: bool = False) -> dict:
        name = b["InferenceComponentName"]
        if not by_hand:
            self._iam(name)
        if name in self.components:
            raise self._validation(f"Cannot create already existing inference component \"{arn('inference-component', name)}\".")
        e = self._endpoint(b["EndpointName"])
        if e.status != "InService" or e.name in self.deleting:
            raise self._validation(f"Endpoint {e.name} is not InService")  # model
        now = self.clock.t
        n = b["RuntimeConfig"]["CopyCount"]
        self.components[name] = Component(
            name, e.name, copy.deepcopy(b["Specification"]), "Creating", n, 0, now, now, now + self.component_seconds,
            tags={t["Key"]: t["Value"] for t in b.get("Tags", [])}, by_hand=by_hand,
            fail=self.fail_components.pop(0) if self.fail_components and not by_hand else None,
        )
        return {"InferenceComponentArn": arn("inference-component", name)}

    def add_by_hand(self, name: str, endpoint: str, profile: str, copies: int = 1) -> None:
        """A component someone created outside the stack (with their own permissions)."""
        self._op_CreateInferenceComponent(
            {
                "InferenceComponentName": name, "EndpointName": endpoint, "VariantName": "AllTraffic",
                "Specification": {"ModelName": "hand-made", "ComputeResourceRequirements": {
                    "AcceleratorPartitionType": profile, "NumberOfAcceleratorDevicesRequired": 1.0, "MinMemoryRequiredInMb": 1024}},
                "RuntimeConfig": {"CopyCount": copies},
            },
            by_hand=True,
        )

    def _op_DescribeInferenceComponent(self, b: dict) -> dict:
        c = self._component(b["InferenceComponentName"])
        out = {
            "InferenceComponentName": c.name, "InferenceComponentArn": arn("inference-component", c.name),
            "EndpointName": c.endpoint, "EndpointArn": arn("endpoint", c.endpoint), "VariantName": "AllTraffic",
            "Specification": c.spec, "RuntimeConfig": {"DesiredCopyCount": c.desired, "CurrentCopyCount": c.current},
            "CreationTime": c.created, "LastModifiedTime": c.modified,
            "InferenceComponentStatus": "Deleting" if c.name in self.deleting_components else c.status,
        }
        if c.failure:
            out["FailureReason"] = c.failure
        return out

    def _op_UpdateInferenceComponent(self, b: dict) -> dict:
        name = b["InferenceComponentName"]
        self._iam(name)
        c = self._component(name)
        if c.status != "InService" or name in self.deleting_components:
            raise self._validation(f"Cannot update inference component {name} in {c.status} status")  # model
        now = self.clock.t
        c.modified = now
        if "RuntimeConfig" in b:
            c.desired = b["RuntimeConfig"]["CopyCount"]
        if "Specification" not in b:
            return {"InferenceComponentArn": arn("inference-component", name)}
        policy = (b.get("DeploymentConfig") or {}).get("RollingUpdatePolicy")
        batch = policy["MaximumBatchSize"]["Value"] if policy else c.current
        free = self.free_partitions(c.endpoint, self.profile(b["Specification"]))
        if free < batch:
            # Rolled back at once: the new fleet found no partition (model).
            c.failure = f"rolling update failed: {batch} new copies need {batch} free partitions, {free} free; rolled back"
            return {"InferenceComponentArn": arn("inference-component", name)}
        c.status, c.pending_spec, c.ready_at, c.failure = "Updating", copy.deepcopy(b["Specification"]), now + self.component_seconds, None
        return {"InferenceComponentArn": arn("inference-component", name)}

    def _op_UpdateInferenceComponentRuntimeConfig(self, b: dict) -> dict:
        name = b["InferenceComponentName"]
        self._iam(name)
        c = self._component(name)
        c.desired = b["DesiredRuntimeConfig"]["CopyCount"]
        if c.desired < c.current:
            c.current = c.desired
        c.modified, c.ready_at = self.clock.t, self.clock.t + self.copy_seconds
        return {"InferenceComponentArn": arn("inference-component", name)}

    def autoscale(self, name: str, copies: int) -> None:
        """Application Auto Scaling sets DesiredCopyCount (its own call, not the handler's)."""
        c = self.components[name]
        c.desired = c.current = copies

    def _op_DeleteInferenceComponent(self, b: dict) -> dict:
        name = b["InferenceComponentName"]
        self._iam(name)
        self._component(name)
        if name in self.deleting_components:
            raise self._validation(
                f"Cannot delete inference component \"{arn('inference-component', name)}\" while it is being deleted."
            )  # model: the wording
        self.deleting_components[name] = self.clock.t + self.component_delete_seconds
        return {}

    def _op_ListInferenceComponents(self, b: dict) -> dict:
        found = [c for c in self.components.values() if c.endpoint == b.get("EndpointNameEquals", c.endpoint)]
        return {
            "InferenceComponents": [
                {
                    "InferenceComponentName": c.name, "InferenceComponentArn": arn("inference-component", c.name),
                    "EndpointName": c.endpoint, "EndpointArn": arn("endpoint", c.endpoint), "VariantName": "AllTraffic",
                    "CreationTime": c.created, "LastModifiedTime": c.modified,
                    "InferenceComponentStatus": "Deleting" if c.name in self.deleting_components else c.status,
                }
                for c in found
            ]
        }

    def _op_AddTags(self, b: dict) -> dict:
        kind, name = b["ResourceArn"].split(":", 5)[5].split("/", 1)
        self._iam(name)
        target = {"endpoint": self.endpoints, "inference-component": self.components}[kind]
        if name not in target:
            raise self._validation(f"Could not find resource {b['ResourceArn']}")
        target[name].tags.update({t["Key"]: t["Value"] for t in b["Tags"]})
        return {"Tags": b["Tags"]}

    # ------------------------------------------------------------------ inventory

    def inventory(self) -> dict[str, set[str]]:
        return {
            "endpoints": set(self.endpoints),
            "configs": set(self.configs),
            "components": set(self.components),
        }
