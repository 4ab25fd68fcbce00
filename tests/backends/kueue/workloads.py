"""Builders of the workloads a team submits to Kueue (Job, Pod, JobSet, RayJob, RayCluster,
PyTorchJob), as the API server sees them after Kueue's webhooks, and of who submits them."""

from __future__ import annotations

import copy
from typing import Any

from cdk_gpu_share.backends.kueue.admission import ADMISSION_GATE, PRIORITY_LABEL, QUEUE_LABEL

#: A team member (its SubmitRole through the EKS access entry), a service account of the team's
#: namespace it may impersonate, and controllers outside it.
MEMBER = "arn:aws:sts::111122223333:assumed-role/SubmitRole/alice"
JOB_CONTROLLER = "system:serviceaccount:kube-system:job-controller"
KUEUE = "system:serviceaccount:kueue-system:kueue-controller-manager"
KUBERAY = "system:serviceaccount:ray-system:kuberay-operator"
JOBSET = "system:serviceaccount:jobset-system:jobset-controller-manager"
TRAINING_OPERATOR = "system:serviceaccount:kubeflow:training-operator"
#: Identities outside the team's namespace that are no controller: a GitOps agent, a shared CI
#: runner, another team's service account. Each is treated as a team member.
ARGO_CD = "system:serviceaccount:argocd:argocd-application-controller"
CI_RUNNER = "system:serviceaccount:ci:gitlab-runner"
OTHER_TEAM = "system:serviceaccount:applied:default"


def own_account(team: str) -> str:
    return f"system:serviceaccount:{team}:default"


#: The kinds Kueue manages that the tables submit.
KINDS = ("Job", "Pod", "JobSet", "RayJob", "RayCluster", "PyTorchJob")
API_VERSIONS = {"Job": "batch/v1", "Pod": "v1", "JobSet": "jobset.x-k8s.io/v1alpha2", "RayJob": "ray.io/v1",
                "RayCluster": "ray.io/v1", "PyTorchJob": "kubeflow.org/v1", "TFJob": "kubeflow.org/v1",
                "Deployment": "apps/v1"}


def pod_spec(gpus: int = 0, mig: str | None = None, priority_class: str | None = None,
             limits_only: bool = False, init_gpus: int = 0, resource: str | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"cpu": "1", "memory": "4Gi"}
    if gpus:
        resources["nvidia.com/gpu"] = gpus
    if mig:
        resources[f"nvidia.com/{mig}"] = 1
    if resource:
        resources[resource] = 1
    container = {"name": "main", "image": "train:1",
                 "resources": {"limits": resources} if limits_only else {"requests": resources}}
    spec: dict[str, Any] = {"containers": [container], "restartPolicy": "Never"}
    if init_gpus:
        spec["initContainers"] = [{"name": "warm", "image": "warm:1",
                                   "resources": {"limits": {"nvidia.com/gpu": init_gpus}}}]
    if priority_class:
        spec["priorityClassName"] = priority_class
    return spec


def _template(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {}, "spec": spec}


def workload(kind: str, namespace: str, *, queue: str | None = None, priority_class: str | None = None,
             gpus: int = 1, mig: str | None = None, held: bool = True, template_class: str | None = None,
             owner: str | None = None, priority: int | None = None, limits_only: bool = False,
             init_gpus: int = 0, resource: str | None = None,
             tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A ``kind`` in ``namespace`` labelled with ``queue`` and ``priority_class`` (none when None);
    ``held``: suspended, or a Pod with Kueue's admission gate (what Kueue's webhook sets on a
    workload it manages); ``template_class``: a PriorityClass named in its pod templates;
    ``owner``: the kind of its controller (``Job``, ``JobSet``, ``RayJob``, ``ReplicaSet``)."""
    labels: dict[str, str] = {}
    if queue is not None:
        labels[QUEUE_LABEL] = queue
    if priority_class is not None:
        labels[PRIORITY_LABEL] = priority_class
    meta: dict[str, Any] = {"name": f"{kind.lower()}-1", "namespace": namespace, "labels": labels}
    if owner is not None:
        group = {"Job": "batch/v1", "ReplicaSet": "apps/v1", "CronJob": "batch/v1"}.get(owner, API_VERSIONS.get(owner))
        meta["ownerReferences"] = [{"apiVersion": group, "kind": owner, "name": "parent", "uid": "u-1",
                                    "controller": True, "blockOwnerDeletion": True}]
    spec = pod_spec(gpus, mig, template_class, limits_only, init_gpus, resource)
    obj: dict[str, Any] = {"apiVersion": API_VERSIONS[kind], "kind": kind, "metadata": meta}
    if kind == "Pod":
        if tolerations is not None:
            spec["tolerations"] = tolerations
        if held:
            spec["schedulingGates"] = [{"name": ADMISSION_GATE}]
        if priority is not None:
            spec["priority"] = priority
        obj["spec"] = spec
    elif kind == "Job":
        obj["spec"] = {"suspend": held, "template": _template(spec)}
    elif kind == "JobSet":
        obj["spec"] = {"suspend": held, "replicatedJobs": [
            {"name": "workers", "replicas": 2, "template": {"spec": {"template": _template(spec)}}}]}
    elif kind == "RayCluster":
        obj["spec"] = _ray_cluster(spec, held)
    elif kind == "RayJob":
        obj["spec"] = {"suspend": held, "entrypoint": "python train.py",
                       "rayClusterSpec": _ray_cluster(spec, None)}
    elif kind in ("PyTorchJob", "TFJob"):
        replicas = "pytorchReplicaSpecs" if kind == "PyTorchJob" else "tfReplicaSpecs"
        obj["spec"] = {"runPolicy": {"suspend": held}, replicas: {
            "Master": {"replicas": 1, "template": _template(pod_spec())},
            "Worker": {"replicas": 2, "template": _template(spec)}}}
    else:
        raise ValueError(kind)
    return obj


def _ray_cluster(worker: dict[str, Any], held: bool | None) -> dict[str, Any]:
    out: dict[str, Any] = {"headGroupSpec": {"template": _template(pod_spec())},
                           "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "template": _template(worker)}]}
    if held is not None:
        out["suspend"] = held
    return out


def released(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` started: no longer suspended, or its Pod's admission gate removed."""
    out = copy.deepcopy(obj)
    if out["kind"] == "Pod":
        out["spec"]["schedulingGates"] = []
    elif out["kind"] in ("PyTorchJob", "TFJob"):
        out["spec"]["runPolicy"]["suspend"] = False
    else:
        out["spec"]["suspend"] = False
    return out


def resized(obj: dict[str, Any], gpus: int = 8) -> dict[str, Any]:
    """``obj`` asking for ``gpus`` GPUs in each container that asked for some (its spec changed)."""
    out = copy.deepcopy(obj)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "nvidia.com/gpu" in node:
                node["nvidia.com/gpu"] = gpus
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(out["spec"])
    return out


def with_spec(obj: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """``obj`` (a Pod) with pod-spec ``fields`` set: ``nodeName``, ``hostPID``, ``volumes``..."""
    out = copy.deepcopy(obj)
    out["spec"].update(copy.deepcopy(fields))
    return out


def with_container(obj: dict[str, Any], where: str = "containers", **fields: Any) -> dict[str, Any]:
    """``obj`` (a Pod) with one more container in the list ``where`` (``containers``,
    ``initContainers``, ``ephemeralContainers``) holding ``fields`` (``securityContext``, ``env``)."""
    out = copy.deepcopy(obj)
    out["spec"].setdefault(where, []).append({"name": f"extra-{len(out['spec'].get(where, []))}", "image": "x:1",
                                               **copy.deepcopy(fields)})
    return out


def annotated(obj: dict[str, Any], **annotations: str) -> dict[str, Any]:
    """``obj`` with ``annotations`` added (keys as given: pass a dict with ``**{"a/b": "v"}``)."""
    out = copy.deepcopy(obj)
    out["metadata"].setdefault("annotations", {}).update(annotations)
    return out


def hostpath(path: str) -> list[dict[str, Any]]:
    """A pod's ``volumes`` holding one hostPath volume of ``path``."""
    return [{"name": "host", "hostPath": {"path": path}}]


def pod_specs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod spec of ``obj``: a Pod's own, or each pod template of a workload."""
    spec = obj["spec"]
    if obj["kind"] == "Pod":
        return [spec]
    if obj["kind"] == "Job":
        return [spec["template"]["spec"]]
    if obj["kind"] == "JobSet":
        return [r["template"]["spec"]["template"]["spec"] for r in spec["replicatedJobs"]]
    if obj["kind"] in ("RayCluster", "RayJob"):
        cluster = spec if obj["kind"] == "RayCluster" else spec["rayClusterSpec"]
        return [cluster["headGroupSpec"]["template"]["spec"], *(g["template"]["spec"] for g in cluster["workerGroupSpecs"])]
    replicas = next(v for k, v in spec.items() if k.endswith("ReplicaSpecs"))
    return [r["template"]["spec"] for r in replicas.values()]


def with_claim(obj: dict[str, Any], template: str | None = "gpu", claim: str | None = None) -> dict[str, Any]:
    """``obj`` whose last pod spec claims a DRA device: through the ResourceClaimTemplate ``template``,
    or the ResourceClaim ``claim`` (the shape of Kubernetes 1.31 and later); its first container uses it."""
    out = copy.deepcopy(obj)
    spec = pod_specs(out)[-1]
    source = {"resourceClaimTemplateName": template} if claim is None else {"resourceClaimName": claim}
    spec["resourceClaims"] = [{"name": "gpu", **source}]
    spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return out


def claim_object(kind: str, namespace: str, *requests: dict[str, Any], api: str = "v1") -> dict[str, Any]:
    """A ResourceClaim or ResourceClaimTemplate of ``requests`` (``resource.k8s.io/<api>``)."""
    devices = {"devices": {"requests": list(requests)}}
    return {"apiVersion": f"resource.k8s.io/{api}", "kind": kind,
            "metadata": {"name": "gpu", "namespace": namespace},
            "spec": devices if kind == "ResourceClaim" else {"spec": devices}}


def exactly(device_class: str, **fields: Any) -> dict[str, Any]:
    """A device request of ``resource.k8s.io/v1``: ``device_class``, exactly (``count``, ``allocationMode``...)."""
    return {"name": "gpu", "exactly": {"deviceClassName": device_class, **fields}}


def relabelled(obj: dict[str, Any], **labels: str | None) -> dict[str, Any]:
    """``obj`` with labels set (``queue``, ``priority_class``), or removed when None."""
    out = copy.deepcopy(obj)
    keys = {"queue": QUEUE_LABEL, "priority_class": PRIORITY_LABEL}
    for name, value in labels.items():
        if value is None:
            out["metadata"]["labels"].pop(keys[name], None)
        else:
            out["metadata"]["labels"][keys[name]] = value
    return out


__all__ = ["ARGO_CD", "CI_RUNNER", "JOBSET", "JOB_CONTROLLER", "KINDS", "KUBERAY", "KUEUE", "MEMBER", "OTHER_TEAM",
           "TRAINING_OPERATOR", "annotated", "claim_object", "exactly", "pod_specs", "with_claim", "hostpath", "own_account", "pod_spec",
           "relabelled", "released", "resized", "with_container", "with_spec", "workload"]
