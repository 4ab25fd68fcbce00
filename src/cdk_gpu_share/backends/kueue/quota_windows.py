"""The Kubernetes objects that switch the Kueue quotas with the config's time windows (pure:
objects only).

With ``windows:``, the ClusterQueues and the Cohort are applied with the base values and the
switcher (:mod:`cdk_gpu_share.backends.kueue.switcher`) puts them at the values of the window in
force. In the switcher's namespace (:func:`switcher_namespace`):

* a ConfigMap holding the switcher's settings (the windows, and per ClusterQueue and for the
  Cohort its quotas in the base and in each window, made by the same functions as the
  manifests), the switcher's code and the modules it imports, verbatim from this package, and
  the time-zone files of the windows' zones (so the job reads the zones as ``plan`` did, whatever
  the image holds);
* a ServiceAccount, bound to a ClusterRole that may only ``get`` and ``patch`` this platform's
  ClusterQueues and its Cohort, by name;
* one CronJob per boundary (a window's opening or closing), its ``schedule`` in the window's own
  ``timeZone``, and one more where a daylight-saving change skips the boundary's wall-clock
  time (Kubernetes' cron does not fire then; the window reads a skipped time at the offset
  before the change, so it opens later by the gap);
* a Job, named after what it applies, that runs the switcher once after a deploy that changed
  the quotas or the windows (applying the ClusterQueues writes the base values back).

And a ValidatingAdmissionPolicy (with its binding) that holds the switcher's patches to
``nominalQuota`` and ``borrowingLimit``: any other change of a ClusterQueue or a Cohort by its
service account is refused.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import importlib.resources
import json
import os
import zoneinfo
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from cdk_gpu_share.backends.kueue import API_VERSION, KueueConfig, switcher_namespace
from cdk_gpu_share.backends.kueue.admission import ADMISSION_API
from cdk_gpu_share.core.configuration.window_crons import boundary_schedules
from cdk_gpu_share.core.configuration.windows import Window, window_mapping

__all__ = [
    "CLUSTER_QUEUE_SPEC_FIELDS", "COHORT_SPEC_FIELDS", "IMAGE", "MODULE", "SERVICE_ACCOUNT", "QuotaObjects",
    "shipped_modules", "switcher_name", "switcher_namespace", "switcher_settings", "window_objects",
]

#: The image the switcher runs in by default: a pinned public Python (the standard library is all it needs).
IMAGE = KueueConfig.windows_image
#: The switcher's module, run with ``python -m``.
MODULE = "cdk_gpu_share.backends.kueue.switcher"
SERVICE_ACCOUNT = "quota-window-switcher"
CONFIG_MAP = "quota-window-switcher"
#: Where the ConfigMap is mounted in the switcher's container.
MOUNT = "/opt/gpu-share"
#: Tries of a Job's Pod (each a full switch) before the Job fails; how long one may run; how
#: late a boundary's run may still start.
BACKOFF_LIMIT = 3
DEADLINE_SECONDS = 600
STARTING_DEADLINE_SECONDS = 3600
#: The ClusterQueue's and the Cohort's spec fields (Kueue v0.19, ``kueue.x-k8s.io/v1beta2``)
#: other than ``resourceGroups``: the switcher's patches must leave them as they are.
CLUSTER_QUEUE_SPEC_FIELDS = ("admissionChecksStrategy", "admissionScope", "cohortName", "concurrentAdmissionPolicy",
                             "fairSharing", "flavorFungibility", "namespaceSelector", "preemption",
                             "queueingStrategy", "stopPolicy")
COHORT_SPEC_FIELDS = ("fairSharing", "parentName")
#: The switcher's Pods meet Pod Security's restricted profile, and its namespace enforces it.
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}
_METADATA_FIELDS = ("labels", "annotations", "finalizers", "ownerReferences")
_ROOT = Path(__file__).resolve().parents[3]  # the directory holding the cdk_gpu_share package


def switcher_name(section: KueueConfig) -> str:
    """The name of the switcher's cluster-wide objects (ClusterRole, its binding, the admission policy)."""
    return f"gpu-share-windows.{section.cohort}"


def _user(section: KueueConfig) -> str:
    return f"system:serviceaccount:{switcher_namespace(section)}:{SERVICE_ACCOUNT}"


# -- the values of each window, from the functions the manifests use --------------------


def _quotas(obj: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """flavor -> resource -> ``nominalQuota`` (and ``borrowingLimit`` when there is one)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for group in obj["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for r in flavor["resources"]:
                out.setdefault(flavor["name"], {})[r["name"]] = {
                    k: r[k] for k in ("nominalQuota", "borrowingLimit") if k in r}
    return out


#: The ClusterQueues and the root Cohort as deployed with the values in force in a window (None:
#: the base), in the same order whatever the window (made by the manifests' own functions).
QuotaObjects = Callable[[str | None], list[dict[str, Any]]]


def switcher_settings(windows: Sequence[Window], objects: QuotaObjects) -> dict[str, Any]:
    """What the switcher reads: Kueue's API version, the windows, and per ClusterQueue and for the
    Cohort its quotas in the base and in each window whose quotas differ from the base."""
    base = objects(None)
    by_window = {w.name: objects(w.name) for w in windows}
    targets = []
    for i, obj in enumerate(base):
        quotas = _quotas(obj)
        changed = {name: _quotas(objs[i]) for name, objs in by_window.items() if _quotas(objs[i]) != quotas}
        targets.append({"kind": obj["kind"], "name": obj["metadata"]["name"], "base": quotas, "windows": changed})
    return {"apiVersion": API_VERSION, "windows": [window_mapping(w) for w in windows], "targets": targets}


# -- the switcher's code and the zones, as the ConfigMap ships them -----------------------


def _imports(path: Path) -> list[str]:
    """The package's modules ``path`` imports (absolute ``cdk_gpu_share`` imports only)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cdk_gpu_share"):
            # ``from package import module`` imports a module; ``from module import name`` does not
            out += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.startswith("cdk_gpu_share")]
    return out


def shipped_modules() -> dict[str, str]:
    """The switcher and every module of the package it imports, transitively: path under the
    package's root -> source, verbatim. Each package on the way gets an empty ``__init__.py``
    (the package's own would import what the switcher does not need)."""
    files: dict[str, str] = {}
    todo = [MODULE]
    while todo:
        module = todo.pop()
        rel = module.replace(".", "/") + ".py"
        if rel in files:
            continue
        path = _ROOT / rel
        if not path.is_file():  # a package imported by name: its modules are what is imported
            continue
        files[rel] = path.read_text(encoding="utf-8")
        todo += _imports(path)
    packages = {"/".join(rel.split("/")[:i]) for rel in list(files) for i in range(1, rel.count("/") + 1)}
    for package in packages:
        files[f"{package}/__init__.py"] = ""
    return dict(sorted(files.items()))


def _zone_file(name: str) -> bytes:
    """The compiled tz file of zone ``name``, where :mod:`zoneinfo` finds it (the system's tz
    database, else the ``tzdata`` package)."""
    for root in zoneinfo.TZPATH:
        path = os.path.join(root, name)
        if os.path.isfile(path):
            return Path(path).read_bytes()
    return importlib.resources.files("tzdata.zoneinfo").joinpath(*name.split("/")).read_bytes()


def _config_map(section: KueueConfig, settings: dict[str, Any], windows: Sequence[Window],
                meta: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """The ConfigMap and the volume's items (ConfigMap keys cannot hold a ``/``)."""
    data = {"settings.json": json.dumps(settings, indent=1, sort_keys=True)}
    items = [{"key": "settings.json", "path": "settings.json"}]
    for rel, source in shipped_modules().items():
        key = rel.replace("/", ".")
        data[key] = source
        items.append({"key": key, "path": f"lib/{rel}"})
    binary = {}
    for i, zone in enumerate(sorted({w.timezone for w in windows})):
        binary[f"zone-{i}"] = base64.b64encode(_zone_file(zone)).decode()
        items.append({"key": f"zone-{i}", "path": f"zoneinfo/{zone}"})
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {**meta, "name": CONFIG_MAP, "namespace": switcher_namespace(section)},
           "data": data, "binaryData": binary}
    return obj, items


# -- the objects -----------------------------------------------------------------------


def _pod_template(items: list[dict[str, str]], image: str, meta: dict[str, Any]) -> dict[str, Any]:
    """The switcher's Pod: the restricted Pod Security profile, the ConfigMap read-only, no retry in
    place (a failed Pod is kept, the Job starts another)."""
    return {
        "metadata": {"labels": dict(meta.get("labels", {}))},
        "spec": {
            "serviceAccountName": SERVICE_ACCOUNT,
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "switcher",
                "image": image,
                "command": ["python3", "-m", MODULE, f"{MOUNT}/settings.json"],
                "env": [{"name": "PYTHONPATH", "value": f"{MOUNT}/lib"},
                        {"name": "PYTHONTZPATH", "value": f"{MOUNT}/zoneinfo"},
                        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
                "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}},
                "terminationMessagePolicy": "FallbackToLogsOnError",
                "volumeMounts": [{"name": "switcher", "mountPath": MOUNT, "readOnly": True}],
            }],
            "volumes": [{"name": "switcher", "configMap": {"name": CONFIG_MAP, "items": items}}],
        },
    }


def _job_spec(template: dict[str, Any]) -> dict[str, Any]:
    return {"backoffLimit": BACKOFF_LIMIT, "activeDeadlineSeconds": DEADLINE_SECONDS, "template": template}


def _spec_unchanged(field: str) -> str:
    return (f"has(object.spec.{field}) == has(oldObject.spec.{field})"
            f" && (!has(object.spec.{field}) || object.spec.{field} == oldObject.spec.{field})")


def _meta_unchanged(field: str) -> str:
    return (f"has(object.metadata.{field}) == has(oldObject.metadata.{field})"
            f" && (!has(object.metadata.{field}) || object.metadata.{field} == oldObject.metadata.{field})")


def _shape(obj: str) -> str:
    """Each resource group's flavors and resources in order, with each ``lendingLimit``: all a
    patch of the switcher keeps."""
    return (f"(has({obj}.spec.resourceGroups) ? {obj}.spec.resourceGroups.map(g, g.flavors.map(f,"
            " f.resources.map(r, f.name + '/' + r.name + '/' + (has(r.lendingLimit) ? string(r.lendingLimit) : '-'))))"
            " : [])")


def _covered(obj: str) -> str:
    return f"(has({obj}.spec.resourceGroups) ? {obj}.spec.resourceGroups.map(g, g.coveredResources) : [])"


def _policy(section: KueueConfig, names: dict[str, list[str]], meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The admission policy holding the switcher to ``nominalQuota`` and ``borrowingLimit`` of the
    named ClusterQueues and Cohort."""
    name = switcher_name(section)
    unchanged = {kind: " && ".join(f"({_spec_unchanged(f)})" for f in fields)
                 for kind, fields in (("ClusterQueue", CLUSTER_QUEUE_SPEC_FIELDS), ("Cohort", COHORT_SPEC_FIELDS))}
    fields_message = "the quota window switcher may change only nominalQuota and borrowingLimit"
    validations = [
        {"expression": f"object.kind == 'ClusterQueue' ? object.metadata.name in {names['ClusterQueue']!r}"
                       f" : object.metadata.name in {names['Cohort']!r}",
         "message": "the quota window switcher may change only this platform's ClusterQueues and Cohort",
         "reason": "Forbidden"},
        {"expression": " && ".join(f"({_meta_unchanged(f)})" for f in _METADATA_FIELDS),
         "message": f"{fields_message}: not the labels, annotations, finalizers or owners", "reason": "Forbidden"},
        {"expression": f"object.kind == 'ClusterQueue' ? ({unchanged['ClusterQueue']}) : ({unchanged['Cohort']})",
         "message": f"{fields_message}: the rest of the spec stays as deployed", "reason": "Forbidden"},
        {"expression": f"{_covered('object')} == {_covered('oldObject')} && {_shape('object')} == {_shape('oldObject')}",
         "message": f"{fields_message}: the resource groups, flavors, resources and lending limits stay as deployed",
         "reason": "Forbidden"},
    ]
    policy = {
        "apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy", "metadata": {**meta, "name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [API_VERSION.split("/")[0]], "apiVersions": ["*"],
                                                    "operations": ["UPDATE"],
                                                    "resources": ["clusterqueues", "cohorts"]}]},
            "matchConditions": [{"name": "switcher", "expression": f"request.userInfo.username == '{_user(section)}'"}],
            "validations": validations,
        },
    }
    binding = {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {**meta, "name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}}
    return [policy, binding]


def window_objects(section: KueueConfig, windows: Sequence[Window], objects_at: QuotaObjects,
                   meta: dict[str, Any], applied: Sequence[dict[str, Any]] = (), *,
                   first: date | None = None) -> list[dict[str, Any]]:
    """The switcher's objects (none without windows), in the order they are applied. ``applied``:
    the ClusterQueues and Cohorts deployed with them (applying one again writes its base values
    back, so the Job that runs the switcher after a deploy is named after them too)."""
    if not windows or not any(o["kind"] == "ClusterQueue" for o in applied):
        return []
    namespace = switcher_namespace(section)
    labels = {**meta.get("labels", {}), "app.kubernetes.io/name": "quota-window-switcher"}
    ns_meta = {"labels": labels, "namespace": namespace}
    settings = switcher_settings(windows, objects_at)
    names = {"ClusterQueue": [t["name"] for t in settings["targets"] if t["kind"] == "ClusterQueue"],
             "Cohort": [t["name"] for t in settings["targets"] if t["kind"] == "Cohort"]}
    config_map, items = _config_map(section, settings, windows, {"labels": labels})
    template = _pod_template(items, section.windows_image, {"labels": labels})
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": namespace, "labels": {**labels, **RESTRICTED}}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {**ns_meta, "name": SERVICE_ACCOUNT}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"labels": labels, "name": switcher_name(section)},
         "rules": [{"apiGroups": [API_VERSION.split("/")[0]], "resources": [plural],
                    "resourceNames": names[kind], "verbs": ["get", "patch"]}
                   for kind, plural in (("ClusterQueue", "clusterqueues"), ("Cohort", "cohorts"))]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"labels": labels, "name": switcher_name(section)},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": switcher_name(section)},
         "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}]},
        config_map,
    ]
    for window in windows:
        for suffix, schedule in boundary_schedules(window, first):
            objects.append({
                "apiVersion": "batch/v1", "kind": "CronJob",
                "metadata": {**ns_meta, "name": f"{window.name}-{suffix}",
                             "annotations": {"gpu-share/window": window.name, "gpu-share/boundary": suffix}},
                "spec": {"schedule": schedule, "timeZone": window.timezone, "concurrencyPolicy": "Forbid",
                         "startingDeadlineSeconds": STARTING_DEADLINE_SECONDS, "successfulJobsHistoryLimit": 1,
                         "failedJobsHistoryLimit": 3,
                         "jobTemplate": {"metadata": {"labels": labels}, "spec": _job_spec(template)}},
            })
    # Named after what it applies: a deploy that changes the quotas, the windows or the code runs it.
    digest = hashlib.sha256(json.dumps([settings, config_map["data"], template, list(applied)],
                                       sort_keys=True).encode()).hexdigest()
    objects.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": {**ns_meta, "name": f"apply-{digest[:12]}"},
                    "spec": _job_spec(template)})
    return objects + _policy(section, names, {"labels": labels})
