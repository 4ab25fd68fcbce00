"""The team admission policies, checked as Kubernetes would: the objects against the
admissionregistration v1 schema of the oldest release serving it (kubernetes-validate ships the
schemas), and the policy's own CEL (variables, then validations) evaluated by a CEL evaluator
(cel-python) on admission requests, after the matching the API server does."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import celpy
import kubernetes_validate

from cdk_gpu_share.backends.kueue.admission import MIN_KUBERNETES

#: The release the objects must be valid for (the oldest that serves admissionregistration v1 policies).
KUBERNETES_RELEASE = f"{MIN_KUBERNETES}.0"
#: Values the API server's validation allows where the OpenAPI schema only says "string".
VALIDATION_ACTIONS = {"Deny", "Warn", "Audit"}
FAILURE_POLICIES = {"Fail", "Ignore"}
REASONS = {"Unauthorized", "Forbidden", "Invalid", "RequestEntityTooLarge"}
#: The resource (plural) of each kind the tests submit, and its API group.
RESOURCES = {"Pod": ("", "pods"), "Job": ("batch", "jobs"), "JobSet": ("jobset.x-k8s.io", "jobsets"),
             "RayJob": ("ray.io", "rayjobs"), "RayCluster": ("ray.io", "rayclusters"),
             "PyTorchJob": ("kubeflow.org", "pytorchjobs"), "TFJob": ("kubeflow.org", "tfjobs"), "Deployment": ("apps", "deployments"),
             "ConfigMap": ("", "configmaps"), "ResourceClaim": ("resource.k8s.io", "resourceclaims"),
             "ResourceClaimTemplate": ("resource.k8s.io", "resourceclaimtemplates")}

_ENV = celpy.Environment()


def schema_errors(obj: dict[str, Any]) -> list[str]:
    """Where a policy or binding breaks the admissionregistration v1 schema or the API server's enums."""
    try:
        kubernetes_validate.validate(obj, KUBERNETES_RELEASE, strict=True)
    except kubernetes_validate.ValidationError as e:
        return [f"{obj['kind']} {obj['metadata']['name']}: {e.message}"]
    spec = obj["spec"]
    errors = []
    if obj["kind"] == "ValidatingAdmissionPolicyBinding" and not set(spec["validationActions"]) <= VALIDATION_ACTIONS:
        errors.append(f"validationActions {spec['validationActions']}")
    if obj["kind"] == "ValidatingAdmissionPolicy":
        if spec.get("failurePolicy") not in FAILURE_POLICIES:
            errors.append(f"failurePolicy {spec.get('failurePolicy')}")
        errors += [f"reason {v['reason']}" for v in spec["validations"] if v.get("reason", "Invalid") not in REASONS]
    return errors


@dataclass
class Decision:
    """What the API server decides: allowed, or the messages of the failed validations; ``errors``
    are expressions that could not be evaluated (the policy's failurePolicy Fail refuses then)."""

    matched: bool
    refused: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.refused and not self.errors


def _selects(selector: Mapping[str, Any], namespace: str) -> bool:
    labels = {"kubernetes.io/metadata.name": namespace}
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _matches(policy: dict[str, Any], binding: dict[str, Any], obj: dict[str, Any], operation: str,
             subresource: str = "") -> bool:
    group, resource = RESOURCES[obj["kind"]]
    if subresource:
        resource = f"{resource}/{subresource}"
    namespace = obj["metadata"]["namespace"]
    constraints = policy["spec"]["matchConstraints"]
    if not _selects(constraints.get("namespaceSelector", {}), namespace):
        return False
    if not _selects(binding["spec"].get("matchResources", {}).get("namespaceSelector", {}), namespace):
        return False
    return any(group in r["apiGroups"] and resource in r["resources"] and operation in r["operations"]
               for r in constraints["resourceRules"])


@functools.cache
def _program(expression: str) -> Any:
    return _ENV.program(_ENV.compile(expression))


def _evaluate(expression: str, activation: dict[str, Any]) -> Any:
    result = _program(expression).evaluate(activation)
    if isinstance(result, celpy.CELEvalError):
        raise result
    return result


def decide(policy: dict[str, Any], binding: dict[str, Any], obj: dict[str, Any], *, user: str,
           old: dict[str, Any] | None = None, subresource: str = "") -> Decision:
    """The decision of ``policy`` bound by ``binding`` on ``user`` creating ``obj`` (updating ``old``
    into it when ``old`` is given, through ``subresource`` when given: ``ephemeralcontainers``)."""
    operation = "UPDATE" if old is not None else "CREATE"
    if not _matches(policy, binding, obj, operation, subresource):
        return Decision(matched=False)
    activation: dict[str, Any] = {
        "object": celpy.json_to_cel(obj),
        "oldObject": celpy.json_to_cel(old),
        "request": celpy.json_to_cel({"operation": operation, "userInfo": {"username": user},
                                      "namespace": obj["metadata"]["namespace"]}),
    }
    decision = Decision(matched=True)
    variables: dict[str, Any] = {}
    for v in policy["spec"].get("variables", []):
        try:
            variables[v["name"]] = _evaluate(v["expression"], {**activation, "variables": _as_map(variables)})
        except Exception as e:  # an error in a variable is an error of every validation that reads it
            decision.errors.append(f"variable {v['name']}: {e}")
            return decision
    activation["variables"] = _as_map(variables)
    for v in policy["spec"]["validations"]:
        try:
            if not bool(_evaluate(v["expression"], activation)):
                decision.refused.append(v["message"])
        except Exception as e:
            decision.errors.append(f"{v['expression'][:60]}...: {e}")
    return decision


def _as_map(values: dict[str, Any]) -> Any:
    return celpy.celtypes.MapType({celpy.celtypes.StringType(k): v for k, v in values.items()})


def all_expressions(policy: dict[str, Any]) -> list[str]:
    return [v["expression"] for v in policy["spec"].get("variables", []) + policy["spec"]["validations"]]


def compiles(expression: str) -> bool:
    _program(expression)
    return True
