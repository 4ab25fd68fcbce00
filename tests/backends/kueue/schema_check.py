"""Kueue's CRD schemas (the vendored release, see crds/README.md) and a validator of objects against them."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRDS = Path(__file__).parent / "crds"
#: The CRD file of each kind the backend makes.
CRD_FILES = {
    "ClusterQueue": "kueue.x-k8s.io_clusterqueues.yaml",
    "Cohort": "kueue.x-k8s.io_cohorts.yaml",
    "LocalQueue": "kueue.x-k8s.io_localqueues.yaml",
    "ResourceFlavor": "kueue.x-k8s.io_resourceflavors.yaml",
    "WorkloadPriorityClass": "kueue.x-k8s.io_workloadpriorityclasses.yaml",
}


def _openapi_to_jsonschema(node: Any) -> Any:
    """The structural OpenAPI v3 schema of a CRD as JSON Schema: ``x-kubernetes-int-or-string``
    becomes ``anyOf`` integer/string (already spelled out by controller-gen), and
    ``additionalProperties: false`` is implied for objects that list their properties."""
    if isinstance(node, list):
        return [_openapi_to_jsonschema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _openapi_to_jsonschema(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False  # the API server prunes unknown fields; here they are an error
    return out


@functools.cache
def crd_schema(kind: str, version: str = "v1beta2") -> dict[str, Any]:
    """The JSON schema of ``kind`` at ``version`` in the vendored CRD (KeyError when not served)."""
    crd = yaml.safe_load((CRDS / CRD_FILES[kind]).read_text())
    for v in crd["spec"]["versions"]:
        if v["name"] == version and v["served"]:
            schema = _openapi_to_jsonschema(v["schema"]["openAPIV3Schema"])
            # metadata is the API server's ObjectMeta, not part of the CRD's schema.
            schema["properties"]["metadata"] = {"type": "object"}
            return schema
    raise KeyError(f"{kind} {version} is not served by the vendored CRD")


def served_versions(kind: str) -> list[str]:
    crd = yaml.safe_load((CRDS / CRD_FILES[kind]).read_text())
    return [v["name"] for v in crd["spec"]["versions"] if v["served"]]


def schema_errors(obj: dict[str, Any]) -> list[str]:
    """Where ``obj`` breaks its kind's CRD schema (a Namespace: only its name is checked; an
    admission policy or binding: Kubernetes' own schema)."""
    if obj["kind"] == "Namespace":
        return [] if obj["apiVersion"] == "v1" and obj["metadata"].get("name") else ["bad Namespace"]
    if obj["apiVersion"].startswith("admissionregistration.k8s.io/"):
        from tests.backends.kueue.admission_check import schema_errors as admission_errors

        return admission_errors(obj)
    if obj["apiVersion"] in KUBERNETES_KINDS:
        return kubernetes_errors(obj)
    group, version = obj["apiVersion"].split("/")
    assert group == "kueue.x-k8s.io"
    validator = jsonschema.Draft7Validator(crd_schema(obj["kind"], version))
    return [f"{obj['kind']} {obj['metadata']['name']}: {'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(obj)]


#: The API versions of Kubernetes' own kinds the quota window switcher uses, checked by Kubernetes' schema.
KUBERNETES_KINDS = ("v1", "batch/v1", "rbac.authorization.k8s.io/v1")


def kubernetes_errors(obj: dict[str, Any]) -> list[str]:
    """Where ``obj`` breaks the schema of the oldest Kubernetes release the platform supports
    (kubernetes-validate ships the schemas), unknown fields included."""
    import kubernetes_validate

    from tests.backends.kueue.admission_check import KUBERNETES_RELEASE

    try:
        kubernetes_validate.validate(obj, KUBERNETES_RELEASE, strict=True)
    except kubernetes_validate.ValidationError as e:
        return [f"{obj['kind']} {obj['metadata']['name']}: {'/'.join(map(str, e.path))}: {e.message}"]
    return []


def cel_errors(obj: dict[str, Any]) -> list[str]:
    """The CRDs' CEL rules (``x-kubernetes-validations``) the objects could break, in Python:
    the JSON schema above does not evaluate them."""
    errors = []
    spec = obj.get("spec", {})
    for group in spec.get("resourceGroups", []):
        if any(len(f["resources"]) != len(group["coveredResources"]) for f in group["flavors"]):
            errors.append("flavors must have the same number of resources as the coveredResources")
        for f in group["flavors"]:
            if [r["name"] for r in f["resources"]] != group["coveredResources"]:
                errors.append(f"flavor {f['name']}: resource names must match coveredResources in order (webhook)")
    preemption = spec.get("preemption", {})
    if preemption.get("reclaimWithinCohort") == "Never" and preemption.get("borrowWithinCohort", {}).get(
            "policy", "Never") != "Never":
        errors.append("reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
    if obj["kind"] == "ClusterQueue" and "cohortName" not in spec:
        if any("borrowingLimit" in r for g in spec.get("resourceGroups", []) for f in g["flavors"] for r in f["resources"]):
            errors.append("borrowingLimit must be nil when cohort is empty")
    return errors
