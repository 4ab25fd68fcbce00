"""The Kubernetes objects of the ``kueue`` section: one pure function, used by ``gpu-share kueue
manifests`` (YAML for a GitOps repository) and by the ``KueueQueues`` construct alike.

Per team: a Namespace (labelled for Pod Security Admission), a ClusterQueue in the section's Cohort (admitting only that namespace),
a LocalQueue in the namespace, and a ValidatingAdmissionPolicy with its binding holding the
namespace's workloads to that queue (:mod:`cdk_gpu_share.backends.kueue.admission`). Per
instance type of the capacity: a ResourceFlavor selecting nodes by
``node.kubernetes.io/instance-type``, whose workloads tolerate the GPU nodes' taint
``nvidia.com/gpu``. The Cohort holds the capacity no team guarantees, which every team that
borrows may use. Every ClusterQueue has one resource group covering
``cpu``, ``memory``, ``nvidia.com/gpu`` and each MIG profile some team guarantees
(``nvidia.com/mig-3g.20gb``), with every flavor listing every covered resource (Kueue's rule).

With the organisation's tree (``groups``), each group is a Cohort of its own: its parent the
group's parent, or the section's Cohort for a root group (Kueue takes a borrowing limit only on
a Cohort with a parent); its ``nominalQuota`` the group's own pool; its ``borrowingLimit`` the
group's borrow limit (what its subtree may use beyond its quota). A team's ClusterQueue joins
its group's Cohort. The section's Cohort keeps what neither a team nor a group guarantees.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from cdk_gpu_share.backends.kueue import (
    API_VERSION,
    GPU,
    INSTANCE_TYPE_LABEL,
    KueueConfig,
    covered_resources,
    mig_resource,
)
from cdk_gpu_share.backends.kueue.admission import GPU_TAINT, POD_SECURITY_LABELS, admission_objects
from cdk_gpu_share.backends.kueue.quota_windows import window_objects
from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.configuration.model import team_in_window
from cdk_gpu_share.core.configuration.parse import Amount, GroupConfig, PlatformConfig, TeamConfig, groups_above
from cdk_gpu_share.core.configuration.windows import Window

MANAGED_BY = {"app.kubernetes.io/managed-by": "cdk-gpu-share"}
#: The order objects are applied in: what a later object names exists first.
KIND_ORDER = ("Namespace", "ResourceFlavor", "Cohort", "WorkloadPriorityClass", "ClusterQueue", "LocalQueue",
              "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
              # The quota window switcher's (with windows only), its Job last: it runs at once.
              "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "CronJob", "Job")


def _amount(it: str, a: Amount) -> dict[str, float]:
    """What ``a`` of instance type ``it`` holds, per covered resource."""
    info = instances.lookup(it)
    gpus_per, vcpus, mem = (info.gpus, info.vcpus, info.memory_gib) if info else (0, 0, 0)
    whole = a.instances or 0
    gpu = float(a.accelerators) if a.accelerators is not None else float(whole * gpus_per)
    share = (gpu / gpus_per) if (gpus_per and not whole) else float(whole)
    out = {
        "cpu": float(a.vcpu) if a.vcpu is not None else share * vcpus,
        "memory": float(a.memory_gib) if a.memory_gib is not None else share * mem,
        GPU: gpu,
    }
    for profile, count in a.mig:
        out[mig_resource(profile)] = float(count)
    return out


def _quantity(resource: str, value: float) -> int | str:
    """A Kubernetes quantity: whole numbers as integers, memory in GiB."""
    if resource == "memory":
        return f"{value:g}Gi"
    return int(value) if float(value).is_integer() else f"{value:g}"


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(MANAGED_BY)}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _team_flavor(team: TeamConfig, it: str, covered: list[str], section: KueueConfig) -> dict[str, Any]:
    a = team.guarantee_for(section.capacity).get(it)
    nominal = _amount(it, a) if a is not None else {}
    cap = team.borrow_limit.get(it)
    resources = []
    for r in covered:
        entry: dict[str, Any] = {"name": r, "nominalQuota": _quantity(r, nominal.get(r, 0.0))}
        if not team.sharing.borrows:
            entry["borrowingLimit"] = 0  # reserve and lend: no borrowing
        elif cap is not None:
            entry["borrowingLimit"] = _quantity(r, _amount(it, cap).get(r, 0.0))
        elif team.borrow_limit_percent is not None and team.borrow_limit_percent >= 0:
            limit = nominal.get(r, 0.0) * team.borrow_limit_percent / 100
            entry["borrowingLimit"] = _quantity(r, limit if r in ("cpu", "memory") else math.floor(limit))
        if not team.sharing.lends:
            entry["lendingLimit"] = 0  # reserve: the guarantee stays the team's
        resources.append(entry)
    return {"name": it, "resources": resources}


def cluster_queue(team: TeamConfig, section: KueueConfig, covered: list[str]) -> dict[str, Any]:
    p = section.preemption
    within = p.within_cluster_queue if team.in_team_preemption is None else (
        "LowerPriority" if team.in_team_preemption else "Never")
    borrow: dict[str, Any] = {"policy": p.borrow_within_cohort.policy}
    if p.borrow_within_cohort.max_priority_threshold is not None:
        borrow["maxPriorityThreshold"] = p.borrow_within_cohort.max_priority_threshold
    spec: dict[str, Any] = {
        "cohortName": team.group or section.cohort,
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.name}},
        "resourceGroups": [{"coveredResources": list(covered),
                            "flavors": [_team_flavor(team, it, covered, section) for it in section.capacity]}],
        "preemption": {"reclaimWithinCohort": p.reclaim_within_cohort, "borrowWithinCohort": borrow,
                       "withinClusterQueue": within},
    }
    if team.fair_share_weight is not None:
        spec["fairSharing"] = {"weight": team.fair_share_weight}
    meta = _meta(team.name)
    if team.description:
        meta["annotations"] = {"gpu-share/description": team.description}
    return {"apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": meta, "spec": spec}


def root_cohort(section: KueueConfig, teams: Sequence[TeamConfig], groups: Sequence[GroupConfig],
            covered: list[str]) -> dict[str, Any]:
    """The section's Cohort, holding the capacity that no team's guarantee and no group's pool
    takes (GPUs, CPUs, memory)."""
    flavors = []
    for it, count in section.capacity.items():
        total = _amount(it, Amount(instances=count))
        for group in groups:
            pool = group.guarantee.get(it)
            for r, v in (_amount(it, pool).items() if pool is not None else ()):
                total[r] -= v
        for team in teams:
            a = team.guarantee_for(section.capacity).get(it)
            if a is None:
                continue
            used = _amount(it, a)
            for r in ("cpu", "memory", GPU):
                total[r] -= used[r]
            total[GPU] -= math.ceil(instances.mig_slices(a.mig) / instances.MIG_COMPUTE_SLICES)
        flavors.append({"name": it, "resources": [
            {"name": r, "nominalQuota": _quantity(r, max(0.0, total.get(r, 0.0)) if r in total else 0.0)}
            for r in covered]})
    return {"apiVersion": API_VERSION, "kind": "Cohort", "metadata": _meta(section.cohort),
            "spec": {"resourceGroups": [{"coveredResources": list(covered), "flavors": flavors}]}}


def _group_cohort(group: GroupConfig, section: KueueConfig, covered: list[str]) -> dict[str, Any]:
    """A group's Cohort: its parent, its own pool as quota and its borrow limit, per flavor."""
    flavors = []
    for it in section.capacity:
        pool = group.guarantee.get(it)
        nominal = _amount(it, pool) if pool is not None else {}
        limit = None if group.borrow_limit is None else group.borrow_limit.get(it)
        resources = []
        for r in covered:
            entry: dict[str, Any] = {"name": r, "nominalQuota": _quantity(r, nominal.get(r, 0.0))}
            if limit is not None:
                entry["borrowingLimit"] = _quantity(r, _amount(it, limit).get(r, 0.0))
            resources.append(entry)
        flavors.append({"name": it, "resources": resources})
    meta = _meta(group.name)
    if group.description:
        meta["annotations"] = {"gpu-share/description": group.description}
    return {"apiVersion": API_VERSION, "kind": "Cohort", "metadata": meta,
            "spec": {"parentName": group.parent or section.cohort,
                     "resourceGroups": [{"coveredResources": list(covered), "flavors": flavors}]}}


def kueue_objects(section: KueueConfig, teams: Sequence[TeamConfig], groups: Sequence[GroupConfig] = (),
                  windows: Sequence[Window] = ()) -> list[dict[str, Any]]:
    """Every Kubernetes object of ``section`` for the teams whose guarantee names its capacity,
    in the order they are applied (:data:`KIND_ORDER`); with ``groups``, a Cohort per group
    above those teams; with ``windows``, the quota window switcher
    (:mod:`cdk_gpu_share.backends.kueue.quota_windows`)."""
    members = [t for t in teams if t.guarantee_for(section.capacity)]
    # A MIG profile guaranteed in some window only is covered all the time: a switch changes quotas, not resources.
    covered = covered_resources(section, [*members, *(team_in_window(t, w.name) for t in members for w in windows)])
    objects: list[dict[str, Any]] = []
    for team in members:
        meta = _meta(team.name)
        meta["labels"]["gpu-share/team"] = team.name
        meta["labels"].update(POD_SECURITY_LABELS)
        objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
    for it in section.capacity:
        # Workloads Kueue admits on the flavor tolerate the GPU nodes' taint; Pods outside Kueue may not.
        objects.append({"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": _meta(it),
                        "spec": {"nodeLabels": {INSTANCE_TYPE_LABEL: it},
                                 "tolerations": [{"key": GPU_TAINT, "operator": "Exists", "effect": "NoSchedule"}]}})
    cohorts = groups_above(members, groups)
    objects.append(root_cohort(section, members, cohorts, covered))
    objects += [_group_cohort(g, section, covered) for g in cohorts]
    for pc in section.priority_classes:
        wpc: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "WorkloadPriorityClass", "metadata": _meta(pc.name),
                               "value": pc.value}
        if pc.description:
            wpc["description"] = pc.description
        objects.append(wpc)
    objects += [cluster_queue(t, section, covered) for t in members]
    objects += [{"apiVersion": API_VERSION, "kind": "LocalQueue", "metadata": _meta(t.name, t.name),
                 "spec": {"clusterQueue": t.name}} for t in members]
    # Per team, the admission policy holding its namespace to its queue (policies first, then bindings).
    admission = [o for t in members for o in admission_objects(section, t, {"labels": dict(MANAGED_BY)})]
    objects += [o for o in admission if o["kind"] == "ValidatingAdmissionPolicy"]
    objects += [o for o in admission if o["kind"] == "ValidatingAdmissionPolicyBinding"]

    def quotas_at(window: str | None) -> list[dict[str, Any]]:
        at = [team_in_window(t, window) for t in members]
        return [cluster_queue(t, section, covered) for t in at] + [root_cohort(section, at, cohorts, covered)]

    applied = [o for o in objects if o["kind"] in ("ClusterQueue", "Cohort")]
    switcher = window_objects(section, windows, quotas_at, {"labels": dict(MANAGED_BY)}, applied)
    # In the order of the kinds: the switcher's namespace with the others, its policy with theirs.
    return sorted(objects + switcher, key=lambda o: KIND_ORDER.index(o["kind"]))


def config_objects(config: PlatformConfig) -> list[dict[str, Any]]:
    """The objects of ``config``'s ``kueue`` section (none when it has none)."""
    section = config.backend("kueue")
    return [] if section is None else kueue_objects(section, config.teams, config.groups, config.windows)


def to_yaml(objects: Sequence[dict[str, Any]]) -> str:
    """The objects as one multi-document YAML stream."""
    import yaml

    return "".join("---\n" + yaml.safe_dump(o, sort_keys=False) for o in objects)


__all__ = ["GPU", "KIND_ORDER", "cluster_queue", "config_objects", "covered_resources", "kueue_objects", "mig_resource",
           "root_cohort", "to_yaml"]

