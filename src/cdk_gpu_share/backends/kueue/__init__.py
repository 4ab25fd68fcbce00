"""Kueue on an Amazon EKS cluster of your own (``kueue``).

Each team is a Kubernetes namespace with one LocalQueue and one ClusterQueue in a shared
Cohort; each instance type of the section's ``capacity`` is a ResourceFlavor selecting
nodes by ``node.kubernetes.io/instance-type``. A team's guarantee is its ClusterQueue's
``nominalQuota``; ``reserve`` sets ``lendingLimit: 0``, ``lend`` sets ``borrowingLimit: 0``
and a borrow cap becomes ``borrowingLimit``. Kueue lends, borrows and preempts by itself,
so no reclaim planner runs. :func:`cdk_gpu_share.backends.kueue.manifests.kueue_objects`
makes the Kubernetes objects; ``gpu-share kueue manifests`` writes them as YAML and
:class:`~cdk_gpu_share.backends.kueue.construct.KueueQueues` applies them.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdk_gpu_share.core.catalog import instances, mig
from cdk_gpu_share.core.configuration import parse as C
from cdk_gpu_share.core.configuration import schema as S
from cdk_gpu_share.core.configuration.backends import Backend, SectionCheck
from cdk_gpu_share.core.configuration.parse import PlatformConfig, TeamConfig
from cdk_gpu_share.core.configuration.window_crons import boundary_schedules
from cdk_gpu_share.core.configuration.windows import Window
from cdk_gpu_share.core.errors import Problem
from cdk_gpu_share.core.validation import Problems

KEY = "kueue"
#: The Kueue release whose CRD schemas the objects are checked against, and its API version.
KUEUE_VERSION = "v0.19.2"
API_VERSION = "kueue.x-k8s.io/v1beta2"
#: The keys of the section, of its ``preemption``, of ``preemption.borrow_within_cohort`` and of a priority class.
SECTION_KEYS = frozenset({"eks_cluster_name", "kubectl_role_arn", "capacity", "cohort", "preemption",
                          "priority_classes", "adopt_namespaces", "allowed_runtime_classes", "controllers",
                          "device_classes", "windows_image"})
PREEMPTION_KEYS = frozenset({"reclaim_within_cohort", "borrow_within_cohort", "within_cluster_queue"})
BORROW_KEYS = frozenset({"policy", "max_priority_threshold"})
PRIORITY_CLASS_KEYS = frozenset({"name", "value", "description"})

#: Kueue's values of each preemption field; the first is Kueue's default.
RECLAIM_WITHIN_COHORT = ("Never", "LowerPriority", "Any")
BORROW_WITHIN_COHORT = ("Never", "LowerPriority")
WITHIN_CLUSTER_QUEUE = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")

#: An EKS cluster name (the CreateCluster API's pattern).
EKS_CLUSTER_NAME_PATTERN = r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$"
IAM_ROLE_ARN_PATTERN = r"^arn:aws[a-z-]*:iam::\d{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}$"
#: A DNS-1123 subdomain (Cohort, ClusterQueue, ResourceFlavor, WorkloadPriorityClass names), at most 253.
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
MAX_SUBDOMAIN = 253
#: A DNS-1123 label (a namespace, a LocalQueue), at most 63.
DNS_LABEL_PATTERN = f"^{C.DNS_LABEL}$"
MAX_LABEL = C.MAX_TEAM_NAME
#: A WorkloadPriorityClass value is an int32.
INT32 = (-(2**31), 2**31 - 1)
#: The oldest Kubernetes release serving the admission policies (admissionregistration.k8s.io/v1).
MIN_KUBERNETES = "1.30"
#: The label a ResourceFlavor selects nodes by.
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
#: The resource of a whole GPU, as NVIDIA's device plugin names it.
GPU = "nvidia.com/gpu"
#: What no admission policy can hold (an image's own ENV), in the one line ``plan`` and ``summary`` give.
GPU_NODE_SETTINGS = ("set on the GPU nodes, which this platform cannot enforce: the NVIDIA container toolkit's"
                     " accept-nvidia-visible-devices-envvar-when-unprivileged = false and the device plugin's"
                     " deviceListStrategy volume-mounts; without both, a container with no GPU request whose image"
                     " sets NVIDIA_VISIBLE_DEVICES=all may use every GPU of its node")


#: The identity a controller acts as: a service account (``system:serviceaccount:NAMESPACE:NAME``), or
#: the controller manager when it runs without a service account per controller.
CONTROLLER_MANAGER = "system:kube-controller-manager"
SERVICE_ACCOUNT_PATTERN = (rf"^system:serviceaccount:{C.DNS_LABEL}:[a-z0-9]([-a-z0-9]*[a-z0-9])?"
                           r"(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
CONTROLLER_IDENTITY_PATTERN = rf"{SERVICE_ACCOUNT_PATTERN}|^{CONTROLLER_MANAGER}$"


@dataclass(frozen=True)
class KueueControllers:
    """``kueue.controllers``: the identities (Kubernetes user names) each controller acts as. Only
    these count as controllers in a team's namespace: Kueue may release what it holds, and each
    operator may create, without the team's queue, the parts of a workload of its own kinds (its
    ``ownerReference``); every other identity is treated as a team member. An empty list: none."""

    #: Kueue itself: it alone starts a held workload (and gives it its flavor's node selectors).
    kueue: tuple[str, ...] = ("system:serviceaccount:kueue-system:kueue-controller-manager",)
    #: Kubernetes' job controller: the Pods of a Job.
    job: tuple[str, ...] = ("system:serviceaccount:kube-system:job-controller", CONTROLLER_MANAGER)
    #: The JobSet controller: the Jobs of a JobSet.
    jobset: tuple[str, ...] = ("system:serviceaccount:jobset-system:jobset-controller-manager",)
    #: KubeRay: the RayCluster and submitter Job of a RayJob, the Pods of a RayCluster.
    kuberay: tuple[str, ...] = ("system:serviceaccount:ray-system:kuberay-operator",)
    #: The Kubeflow training operator: the Pods of a PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob, JAXJob.
    training_operator: tuple[str, ...] = ("system:serviceaccount:kubeflow:training-operator",)


#: The keys of ``kueue.controllers``, in the order the docs give them.
CONTROLLER_KEYS = ("kueue", "job", "jobset", "kuberay", "training_operator")


@dataclass(frozen=True)
class BorrowWithinCohort:
    """``preemption.borrow_within_cohort``: may a borrowing team preempt in the cohort, and below which priority."""

    policy: str = "Never"
    max_priority_threshold: int | None = None


@dataclass(frozen=True)
class KueuePreemption:
    """The ClusterQueues' ``preemption``, with Kueue's names and defaults (all ``Never``)."""

    reclaim_within_cohort: str = "Never"
    borrow_within_cohort: BorrowWithinCohort = field(default_factory=BorrowWithinCohort)
    #: A team's ``in_team_preemption`` overrides it for that team.
    within_cluster_queue: str = "Never"


@dataclass(frozen=True)
class WorkloadPriorityClass:
    """A Kueue WorkloadPriorityClass: its name, its int32 value, and what it is for."""

    name: str
    value: int
    description: str = ""


@dataclass(frozen=True)
class KueueConfig:
    """The ``kueue`` section: the EKS cluster, its GPU nodes per instance type and the queueing policy."""

    eks_cluster_name: str
    capacity: Mapping[str, int]
    #: The IAM role the construct's kubectl provider assumes (mapped to cluster-admin on the cluster).
    kubectl_role_arn: str | None = None
    cohort: str = "gpu-share"
    preemption: KueuePreemption = field(default_factory=KueuePreemption)
    priority_classes: tuple[WorkloadPriorityClass, ...] = ()
    #: Teams whose namespace may already exist: it is adopted (labelled, kept). Any other team's
    #: namespace is created, and a deployment that finds it existing fails rather than giving the
    #: team edit rights in a namespace someone else made.
    adopt_namespaces: tuple[str, ...] = ()
    #: The RuntimeClasses a team's Pod may name in ``runtimeClassName``; any other is refused, since a
    #: runtime such as NVIDIA's can hand a container GPUs the device plugin did not give it.
    allowed_runtime_classes: tuple[str, ...] = ()
    #: The identities that count as Kueue and as each operator in a team's namespace (defaults: their
    #: installations' own service accounts); every other one is treated as a team member.
    controllers: KueueControllers = field(default_factory=KueueControllers)
    #: DRA DeviceClasses a team may claim devices of, each with the quota resource Kueue counts its
    #: devices as (``nvidia.com/gpu``, a MIG resource). Empty: every DRA claim is refused, since
    #: Kueue counts DRA devices only for the classes its own configuration maps.
    device_classes: Mapping[str, str] = field(default_factory=dict)
    #: The container image the quota window switcher runs in (with ``windows:``): any with Python
    #: 3.10 or later; the switcher needs its standard library only.
    windows_image: str = "public.ecr.aws/docker/library/python:3.12.8-slim-bookworm"


#: Descriptions of the section and its keys: the words an editor shows on hover (``gpu-share schema``).
DESCRIPTIONS: dict[str, dict[str, str]] = {
    "": {KEY: "Kueue on an Amazon EKS cluster: one ClusterQueue and LocalQueue per team in one Cohort."},
    KEY: {
        "eks_cluster_name": "Name of the EKS cluster that runs Kueue.",
        "kubectl_role_arn": "IAM role the KueueQueues construct uses to apply the objects (an access entry with"
        " cluster-admin on the cluster). Default: none; `gpu-share kueue manifests` needs none.",
        "capacity": "GPU nodes per EC2 instance type; each type is a ResourceFlavor"
        " (node.kubernetes.io/instance-type).",
        "cohort": "Name of the Cohort every team's ClusterQueue joins. Default: gpu-share.",
        "preemption": "The ClusterQueues' preemption policy, with Kueue's names and defaults.",
        "priority_classes": "WorkloadPriorityClasses: {name, value (int32), description?}.",
        "adopt_namespaces": "Teams whose namespace may already exist on the cluster: it is adopted (labelled)"
        " instead of failing the deployment. Default: none, so a team never gets edit rights in a namespace"
        " it did not get from this platform. Namespaces are kept by cdk destroy either way.",
        "allowed_runtime_classes": "RuntimeClasses a team's Pod may name in runtimeClassName (each team's admission"
        " policy refuses any other). Default: none, so Pods use the node's default runtime.",
        "controllers": "The identities that count as Kueue and as each operator in a team's namespace; every other"
        " (Argo CD, a CI runner, another team's service account) is treated as a team member. Default: each"
        " installation's own service account.",
        "windows_image": "Container image the quota window switcher runs in (with windows:): any image with"
        " Python 3.10 or later (its standard library is all the switcher needs), such as a mirror in your own"
        " registry, or the public one pinned by digest. Default:"
        " public.ecr.aws/docker/library/python:3.12.8-slim-bookworm.",
        "device_classes": "DRA DeviceClasses a team's workloads may claim devices of, each mapped to the quota"
        " resource Kueue counts them as (nvidia.com/gpu or a MIG resource a team guarantees); Kueue's own"
        " configuration must map them the same (resources.deviceClassMappings). Default: none, so every DRA claim"
        " is refused.",
    },
    "kueue_controllers": {
        "kueue": "Kueue's identities: only they may start a held workload. Default:"
        " [system:serviceaccount:kueue-system:kueue-controller-manager].",
        "job": "The job controller's identities: they may create a Job's Pods. Default:"
        " [system:serviceaccount:kube-system:job-controller, system:kube-controller-manager].",
        "jobset": "The JobSet controller's identities: they may create and start a JobSet's Jobs. Default:"
        " [system:serviceaccount:jobset-system:jobset-controller-manager].",
        "kuberay": "KubeRay's identities: they may create a RayJob's RayCluster and Job and a RayCluster's Pods."
        " Default: [system:serviceaccount:ray-system:kuberay-operator].",
        "training_operator": "The Kubeflow training operator's identities: they may create the Pods of a"
        " PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob or JAXJob. Default:"
        " [system:serviceaccount:kubeflow:training-operator].",
    },
    "kueue_preemption": {
        "reclaim_within_cohort": "Never | LowerPriority | Any: may a team take its lent quota back. Default: Never.",
        "borrow_within_cohort": "{policy: Never | LowerPriority, max_priority_threshold?}: may a borrowing team"
        " preempt in the cohort. Default: policy Never.",
        "within_cluster_queue": "Never | LowerPriority | LowerOrNewerEqualPriority: preemption inside a team"
        " that gives no in_team_preemption. Default: Never.",
    },
}


# -- the parser: every problem names the field, the value and the fix.


def _choice(value: Any, where: str, choices: tuple[str, ...], problems: Problems) -> str | None:
    if value not in choices:
        problems.add(where, value, "is not a value Kueue takes", f"use one of {', '.join(choices)} (Kueue's default: "
                     f"{choices[0]})")
        return None
    return str(value)


def _borrow_within_cohort(raw: Any, where: str, problems: Problems) -> BorrowWithinCohort:
    data = C.read_object(raw, where, BORROW_KEYS, problems)
    if data is None:
        return BorrowWithinCohort()
    policy = _choice(data.get("policy", "Never"), f"{where}.policy", BORROW_WITHIN_COHORT, problems) or "Never"
    threshold = None
    if data.get("max_priority_threshold") is not None:
        threshold = C.read_int(data["max_priority_threshold"], f"{where}.max_priority_threshold", problems,
                               minimum=INT32[0], maximum=INT32[1], fix="give a whole number (a priority, int32)")
    return BorrowWithinCohort(policy=policy, max_priority_threshold=threshold)


def _preemption(raw: Any, problems: Problems) -> KueuePreemption:
    where = f"{KEY}.preemption"
    data = C.read_object(raw, where, PREEMPTION_KEYS, problems)
    if data is None:
        return KueuePreemption()
    reclaim = _choice(data.get("reclaim_within_cohort", "Never"), f"{where}.reclaim_within_cohort",
                      RECLAIM_WITHIN_COHORT, problems) or "Never"
    within = _choice(data.get("within_cluster_queue", "Never"), f"{where}.within_cluster_queue",
                     WITHIN_CLUSTER_QUEUE, problems) or "Never"
    borrow = _borrow_within_cohort(data.get("borrow_within_cohort"), f"{where}.borrow_within_cohort", problems)
    return KueuePreemption(reclaim_within_cohort=reclaim, borrow_within_cohort=borrow, within_cluster_queue=within)


def _subdomain(value: Any, where: str, problems: Problems, what: str) -> str | None:
    name = C.read_str(value, where, problems)
    if name is None:
        return None
    if len(name) > MAX_SUBDOMAIN or not re.fullmatch(DNS_SUBDOMAIN_PATTERN, name):
        problems.add(where, name, f"is not a valid {what} name (a DNS-1123 subdomain)",
                     "use at most 253 lower-case letters, digits, '-' and '.', starting and ending with a letter"
                     " or digit")
        return None
    return name


def _priority_classes(raw: Any, problems: Problems) -> tuple[WorkloadPriorityClass, ...]:
    where = f"{KEY}.priority_classes"
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.add(where, raw, "must be a list", "write - {name: high, value: 1000}")
        return ()
    out: list[WorkloadPriorityClass] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        item_where = f"{where}[{i}]"
        item = C.read_object(entry, item_where, PRIORITY_CLASS_KEYS, problems)
        if item is None:
            if entry is None:
                problems.add(item_where, None, "is empty", "write {name: high, value: 1000}")
            continue
        name = _subdomain(item.get("name"), f"{item_where}.name", problems, "WorkloadPriorityClass")
        value = C.read_int(item.get("value"), f"{item_where}.value", problems, minimum=INT32[0], maximum=INT32[1],
                           fix="give a whole number (int32); a higher value is a higher priority")
        description = item.get("description", "")
        if not isinstance(description, str):
            problems.add(f"{item_where}.description", description, "must be a string", "write one line of text")
            description = ""
        if name is not None and name in seen:
            problems.add(f"{item_where}.name", name, "is a duplicate priority class", "give each class its own name")
            continue
        if name is not None and value is not None:
            seen.add(name)
            out.append(WorkloadPriorityClass(name, value, description))
    return tuple(out)


def _names(raw: Any, key: str, problems: Problems, what: str, example: str,
           read: Callable[[Any, str], str | None]) -> tuple[str, ...]:
    """The list ``kueue.<key>`` of names, each read by ``read`` (value, where), duplicates dropped."""
    where = f"{KEY}.{key}"
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.add(where, raw, f"must be a list of {what}", f"write {example}")
        return ()
    names: list[str] = []
    for i, value in enumerate(raw):
        name = read(value, f"{where}[{i}]")
        if name is not None and name not in names:
            names.append(name)
    return tuple(names)


def _identity(value: Any, where: str, problems: Problems) -> str | None:
    """A controller's identity: a service account, or the controller manager."""
    if not isinstance(value, str) or not re.fullmatch(CONTROLLER_IDENTITY_PATTERN, value):
        problems.add(where, value, "is not a controller's identity",
                     "write the service account the controller runs as, system:serviceaccount:NAMESPACE:NAME"
                     f" (or {CONTROLLER_MANAGER}); a person or another tool is no controller: give it the team's"
                     " rights instead")
        return None
    return value


def _controllers(raw: Any, problems: Problems) -> KueueControllers:
    """``kueue.controllers``: a key left out keeps its default; an empty list names none."""
    where = f"{KEY}.controllers"
    data = C.read_object(raw, where, CONTROLLER_KEYS, problems)
    if data is None:
        return KueueControllers()
    given: dict[str, tuple[str, ...]] = {}
    for key in CONTROLLER_KEYS:
        if key not in data:
            continue
        value = data[key]
        if not isinstance(value, list):
            problems.add(f"{where}.{key}", value, "must be a list of identities",
                         "write [system:serviceaccount:NAMESPACE:NAME], or [] for none")
            continue
        names: list[str] = []
        for i, item in enumerate(value):
            name = _identity(item, f"{where}.{key}[{i}]", problems)
            if name is not None and name not in names:
                names.append(name)
        given[key] = tuple(names)
    return KueueControllers(**given)


#: A DeviceClass name (a DNS-1123 subdomain) and a Kubernetes resource name (an optional DNS-subdomain
#: prefix and a slash, then a DNS label), as Kueue's deviceClassMappings take them.
RESOURCE_NAME_PATTERN = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


def _device_classes(raw: Any, problems: Problems) -> dict[str, str]:
    """``kueue.device_classes``: DeviceClass name to the quota resource Kueue counts it as."""
    where = f"{KEY}.device_classes"
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.add(where, raw, "must be a mapping of DeviceClass to quota resource",
                     "write {gpu.nvidia.com: nvidia.com/gpu}")
        return {}
    out: dict[str, str] = {}
    for name, resource in raw.items():
        item = f"{where}.{name}"
        if _subdomain(name, item, problems, "DeviceClass") is None:
            continue
        if not isinstance(resource, str) or not re.fullmatch(RESOURCE_NAME_PATTERN, resource):
            problems.add(item, resource, "is not a resource name", "write the quota resource Kueue counts the class's"
                         " devices as, such as nvidia.com/gpu")
            continue
        out[name] = resource
    return out


#: A container image reference: registry and repository, then a tag and/or a digest.
IMAGE_PATTERN = r"^[a-z0-9]([a-z0-9._\-/:]*[a-z0-9])?(:[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127})?(@sha256:[a-f0-9]{64})?$"


def _windows_image(raw: Any, problems: Problems) -> dict[str, str]:
    """``kueue.windows_image``, when given."""
    if raw is None:
        return {}
    image = C.read_str(raw, f"{KEY}.windows_image", problems, IMAGE_PATTERN,
                       "write an image reference, such as 123456789012.dkr.ecr.eu-west-1.amazonaws.com/python:3.12-slim"
                       " or python@sha256:<64 hex digits>")
    return {} if image is None else {"windows_image": image}


def parse(raw: Any, problems: Problems) -> KueueConfig | None:
    """The ``kueue`` section, or None when it is absent or not a mapping."""
    section = C.read_section(raw, KEY, SECTION_KEYS, problems, sagemaker=False)
    if section is None:
        return None
    data, capacity = section
    cluster = C.read_str(data.get("eks_cluster_name"), f"{KEY}.eks_cluster_name", problems, EKS_CLUSTER_NAME_PATTERN,
                         "write the EKS cluster's name: up to 100 letters, digits, '-' and '_', starting with a letter"
                         " or digit")
    role = None
    if data.get("kubectl_role_arn") is not None:
        role = C.read_str(data["kubectl_role_arn"], f"{KEY}.kubectl_role_arn", problems, IAM_ROLE_ARN_PATTERN,
                          "write arn:aws:iam::ACCOUNT:role/NAME (a role with cluster-admin access to the cluster)")
    cohort = "gpu-share"
    if data.get("cohort") is not None:
        cohort = _subdomain(data["cohort"], f"{KEY}.cohort", problems, "Cohort") or cohort
    return KueueConfig(eks_cluster_name=cluster or "", capacity=capacity, kubectl_role_arn=role, cohort=cohort,
                       preemption=_preemption(data.get("preemption"), problems),
                       priority_classes=_priority_classes(data.get("priority_classes"), problems),
                       adopt_namespaces=_names(data.get("adopt_namespaces"), "adopt_namespaces", problems,
                                               "team names", "[research, applied]",
                                               lambda v, where: C.read_str(v, where, problems)),
                       allowed_runtime_classes=_names(
                           data.get("allowed_runtime_classes"), "allowed_runtime_classes", problems, "RuntimeClass names",
                           "[gvisor] (or leave it out: none)",
                           lambda v, where: _subdomain(v, where, problems, "RuntimeClass")),
                       controllers=_controllers(data.get("controllers"), problems),
                       device_classes=_device_classes(data.get("device_classes"), problems),
                       **_windows_image(data.get("windows_image"), problems))


def allowed_priority_classes(section: KueueConfig, team: TeamConfig) -> list[str]:
    """The WorkloadPriorityClasses ``team`` may label its workloads with: those whose value is at
    most its ``max_priority`` (its namespace's admission policy refuses the others)."""
    return [pc.name for pc in section.priority_classes if pc.value <= team.max_priority]


# -- rules: what Kueue's webhook and CRD validation would refuse, checked before synth.


#: Namespaces Kubernetes, EKS or Kueue own: a team of that name would get edit rights in them.
RESERVED_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease", "kueue-system"})
RESERVED_PREFIX = "kube-"


def switcher_namespace(section: KueueConfig) -> str:
    """The namespace of the quota window switcher (with ``windows:``): the section's Cohort's
    name as a DNS label, then ``-windows``."""
    return section.cohort.replace(".", "-")[:55].rstrip("-") + "-windows"


def reserved_namespaces(c: SectionCheck) -> Iterator[Problem]:
    """A team's namespace is its own: not one the cluster or Kueue runs in (any ``kube-*`` either),
    nor the quota window switcher's."""
    for team in c.named:
        if team.name == switcher_namespace(c.section):
            yield Problem(f"{c.paths[team.name]}.name", team.name,
                          "is the namespace of the quota window switcher (the Cohort's name and -windows)",
                          "rename the team, or the section's cohort")
        if team.name in RESERVED_NAMESPACES or team.name.startswith(RESERVED_PREFIX):
            owner = "Kueue" if team.name == "kueue-system" else "Kubernetes"
            yield Problem(f"{c.paths[team.name]}.name", team.name,
                          f"is a namespace {owner} owns: on Kueue the team would get edit rights there, and its"
                          " workloads would share it with the cluster's own",
                          "rename the team (names starting with kube- and default, kueue-system are reserved)")


def cohort_not_a_group(c: SectionCheck) -> Iterator[Problem]:
    """Each group is a Cohort under the section's Cohort: a group cannot take the Cohort's name."""
    for i, group in enumerate(c.groups):
        if group.name == c.section.cohort:
            yield Problem(f"groups[{i}] ({group.name}).name", group.name,
                          "is the name of kueue.cohort, the Cohort above every root group",
                          "rename the group, or set kueue.cohort to another name")


def adopted_teams(c: SectionCheck) -> Iterator[Problem]:
    """A namespace to adopt is a Kueue team's."""
    teams = [t.name for t in c.members]
    for i, name in enumerate(c.section.adopt_namespaces):
        if name not in teams:
            close = difflib.get_close_matches(name, teams, n=1)
            yield Problem(f"{KEY}.adopt_namespaces[{i}]", name, "is not a team on kueue",
                          f"did you mean '{close[0]}'?" if close else f"name one of: {', '.join(teams) or 'no team'}")


def controllers_outside_teams(c: SectionCheck) -> Iterator[Problem]:
    """A controller's service account is not one of a team's namespace: the team may impersonate
    those (its edit rights), so it would pass for the controller."""
    # A team named like a reserved namespace (kube-system) is refused by its own rule already.
    teams = {t.name for t in c.members if t.name not in RESERVED_NAMESPACES and not t.name.startswith(RESERVED_PREFIX)}
    for key in CONTROLLER_KEYS:
        for i, name in enumerate(getattr(c.section.controllers, key)):
            namespace = name.split(":")[2] if name.startswith("system:serviceaccount:") else None
            if namespace in teams:
                yield Problem(f"{KEY}.controllers.{key}[{i}]", name,
                              f"is a service account of team {namespace}'s namespace, which the team may impersonate",
                              "run the controller in a namespace of its own and name its service account there")


# The resources the ClusterQueues cover: what the rules check and the manifests write.


def mig_resource(profile: str) -> str:
    """The extended resource NVIDIA's device plugin gives a MIG profile (mixed strategy)."""
    return f"nvidia.com/{profile}"


def covered_resources(section: KueueConfig, teams: Sequence[TeamConfig]) -> list[str]:
    """The resources every ClusterQueue covers: cpu, memory, GPUs and each guaranteed MIG profile."""
    profiles = sorted({p for t in teams for a in t.guarantee_for(section.capacity).values() for p, _ in a.mig})
    return ["cpu", "memory", GPU, *(mig_resource(p) for p in profiles)]


def device_class_resources(c: SectionCheck) -> Iterator[Problem]:
    """A DeviceClass counts as a resource the ClusterQueues cover: whole GPUs or a MIG profile some
    team guarantees (a resource they do not cover could never be admitted)."""
    covered = [r for r in covered_resources(c.section, c.members) if "/" in r]
    for name, resource in c.section.device_classes.items():
        if resource not in covered:
            yield Problem(f"{KEY}.device_classes.{name}", resource, "is not a GPU resource the ClusterQueues cover",
                          f"map the class to one of {', '.join(covered)}")


def reclaim_and_borrow(c: SectionCheck) -> Iterator[Problem]:
    """Kueue refuses ``reclaimWithinCohort: Never`` with a ``borrowWithinCohort.policy`` other than Never."""
    p = c.section.preemption
    if p.reclaim_within_cohort == "Never" and p.borrow_within_cohort.policy != "Never":
        yield Problem(f"{KEY}.preemption.borrow_within_cohort.policy", p.borrow_within_cohort.policy,
                      "is refused by Kueue while reclaim_within_cohort is Never",
                      "set reclaim_within_cohort to LowerPriority or Any, or borrow_within_cohort.policy to Never")


def threshold_needs_policy(c: SectionCheck) -> Iterator[Problem]:
    """``max_priority_threshold`` only bounds a ``LowerPriority`` borrow-within-cohort policy."""
    b = c.section.preemption.borrow_within_cohort
    if b.max_priority_threshold is not None and b.policy == "Never":
        yield Problem(f"{KEY}.preemption.borrow_within_cohort.max_priority_threshold", b.max_priority_threshold,
                      "has no effect while borrow_within_cohort.policy is Never",
                      "set policy: LowerPriority, or remove max_priority_threshold")


def mig_profiles(c: SectionCheck) -> Iterator[Problem]:
    """A MIG profile of a guarantee is one the instance type's GPU has."""
    for team in c.members:
        for it, amount in team.guarantee_for(c.section.capacity).items():
            info = instances.lookup(it)
            for profile, _ in amount.mig:
                try:
                    ok = info is not None and info.mig and mig.profile(info.gpu_model, profile) is not None
                except Exception:
                    ok = False
                if not ok:
                    yield Problem(f"{c.paths[team.name]}.guarantee.{it}.mig.{profile}", profile,
                                  f"is not a MIG profile of {it}",
                                  f"run `gpu-share mig layouts --instance-type {it}` for the profiles it has")


def borrow_limit_types(c: SectionCheck) -> Iterator[Problem]:
    """A borrow cap names an instance type of the capacity (a ResourceFlavor), or one the team
    guarantees on another backend."""
    for team in c.members:
        for it in team.borrow_limit:
            if it not in c.section.capacity and it not in team.guarantee and not it.startswith("ml."):
                yield Problem(f"{c.paths[team.name]}.borrow_limit.{it}", it,
                              "names an instance type the kueue capacity does not declare",
                              f"declare it in kueue.capacity or remove it; declared: {', '.join(c.section.capacity)}")


# -- what `gpu-share summary` shows of the synthesized resources.


def describe_resource(resource: Mapping[str, Any]) -> list[str]:
    """A Kueue object applied by a synthesized template, in one line (its kind and name)."""
    if resource["Type"] != "Custom::AWSCDK-EKS-KubernetesResource":
        return []
    manifest = resource.get("Properties", {}).get("Manifest")
    if not isinstance(manifest, str):
        return []
    try:
        objects = json.loads(manifest)
    except ValueError:
        return []
    if resource.get("DeletionPolicy") == "Retain":
        how = "adopted if it exists" if resource.get("Properties", {}).get("Overwrite") in (True, "true") else "created"
        return [f"Namespace {o.get('metadata', {}).get('name')}: {how}, kept by cdk destroy and when its team is"
                " removed" for o in objects if isinstance(o, dict) and o.get("kind") == "Namespace"]
    lines = [_describe_object(o) for o in objects if isinstance(o, dict) and (
        str(o.get("apiVersion", "")).startswith("kueue.x-k8s.io/")
        or o.get("kind") in ("ValidatingAdmissionPolicy", "CronJob", "ClusterRole"))]
    if any(isinstance(o, dict) and o.get("kind") == "ValidatingAdmissionPolicy" for o in objects):
        lines.append(f"GPU nodes: {GPU_NODE_SETTINGS}")  # once: every policy is in one manifest
    return lines


def _describe_object(obj: Mapping[str, Any]) -> str:
    """``ClusterQueue research: p5.48xlarge 16 GPUs (borrowing limit 8)``; other kinds by kind and name."""
    name = obj.get("metadata", {}).get("name")
    if obj.get("kind") == "ValidatingAdmissionPolicy":
        return f"ValidatingAdmissionPolicy {name}: Kubernetes {MIN_KUBERNETES} or later"
    if obj.get("kind") == "CronJob":  # the quota window switcher's: a window's opening or closing
        spec, annotations = obj.get("spec", {}), obj.get("metadata", {}).get("annotations", {})
        edge = "opens" if str(annotations.get("gpu-share/boundary", "")).startswith("open") else "closes"
        return (f"CronJob {obj.get('metadata', {}).get('namespace')}/{name}: window"
                f" {annotations.get('gpu-share/window')} {edge}, {spec.get('schedule')} {spec.get('timeZone')}")
    if obj.get("kind") == "ClusterRole":
        names = [n for rule in obj.get("rules", []) for n in rule.get("resourceNames", [])]
        return f"ClusterRole {name}: the quota window switcher may get and patch {', '.join(names)} only"
    if obj.get("kind") != "ClusterQueue":
        return f"{obj.get('kind')} {name}"
    parts = []
    for group in obj.get("spec", {}).get("resourceGroups", []):
        for flavor in group.get("flavors", []):
            gpu = {r["name"]: r for r in flavor.get("resources", [])}.get("nvidia.com/gpu")
            if gpu is None or (gpu.get("nominalQuota") in (0, "0") and gpu.get("borrowingLimit") in (0, "0")):
                continue
            limit = gpu.get("borrowingLimit", "unlimited")
            parts.append(f"{flavor['name']} {gpu.get('nominalQuota')} GPUs (borrowing limit {limit})")
    return f"ClusterQueue {name}: {', '.join(parts) or 'no whole GPUs'}"


def schema() -> dict[str, Any]:
    borrow = {"type": "object", "additionalProperties": False,
              "properties": {"policy": {"enum": list(BORROW_WITHIN_COHORT), "default": "Never",
                                        "description": "Never (default) or LowerPriority: whether a team that"
                                        " borrows may preempt lower-priority workloads of other teams in the cohort."},
                             "max_priority_threshold": {**S.schema_int(*INT32), "description":
                                                        "With LowerPriority: only workloads of at most this"
                                                        " priority may be preempted. Default: no bound."}}}
    priority_class = {"type": "object", "additionalProperties": False, "required": ["name", "value"],
                      "properties": {
                          "name": {"type": "string", "pattern": DNS_SUBDOMAIN_PATTERN, "maxLength": MAX_SUBDOMAIN,
                                   "description": "The WorkloadPriorityClass's name (a Kubernetes name)."},
                          "value": {**S.schema_int(*INT32),
                                    "description": "Its priority, a 32-bit integer: higher goes first."},
                          "description": {"type": "string", "description": "What the class is for."}}}
    return S.schema_object(KEY, {
        "eks_cluster_name": {"type": "string", "pattern": EKS_CLUSTER_NAME_PATTERN},
        "kubectl_role_arn": {"type": "string", "pattern": IAM_ROLE_ARN_PATTERN},
        "capacity": S.schema_capacity(r"^(?!ml\.)", DESCRIPTIONS[KEY]["capacity"]),
        "cohort": {"type": "string", "pattern": DNS_SUBDOMAIN_PATTERN, "maxLength": MAX_SUBDOMAIN, "default": "gpu-share"},
        "preemption": S.schema_object("kueue_preemption", {
            "reclaim_within_cohort": {"enum": list(RECLAIM_WITHIN_COHORT), "default": "Never"},
            "borrow_within_cohort": borrow,
            "within_cluster_queue": {"enum": list(WITHIN_CLUSTER_QUEUE), "default": "Never"},
        }),
        "priority_classes": {"type": "array", "items": priority_class},
        "adopt_namespaces": {"type": "array", "uniqueItems": True,
                             "items": {"type": "string", "pattern": DNS_LABEL_PATTERN, "maxLength": MAX_LABEL}},
        "allowed_runtime_classes": {"type": "array", "uniqueItems": True, "items": {
            "type": "string", "pattern": DNS_SUBDOMAIN_PATTERN, "maxLength": MAX_SUBDOMAIN}},
        "controllers": S.schema_object("kueue_controllers", {
            key: {"type": "array", "uniqueItems": True, "default": list(getattr(KueueControllers(), key)),
                  "items": {"type": "string", "pattern": CONTROLLER_IDENTITY_PATTERN}}
            for key in CONTROLLER_KEYS}),
        "device_classes": {"type": "object", "propertyNames": {"pattern": DNS_SUBDOMAIN_PATTERN, "maxLength": MAX_SUBDOMAIN},
                           "additionalProperties": {"type": "string", "pattern": RESOURCE_NAME_PATTERN}},
        "windows_image": {"type": "string", "pattern": IMAGE_PATTERN, "default": KueueConfig.windows_image},
    }, required=["eks_cluster_name", "capacity"])


def to_mapping(section: Any) -> Any:
    """The section as the config file writes it."""
    if not isinstance(section, KueueConfig):
        return section
    p = section.preemption
    borrow: dict[str, Any] = {"policy": p.borrow_within_cohort.policy}
    if p.borrow_within_cohort.max_priority_threshold is not None:
        borrow["max_priority_threshold"] = p.borrow_within_cohort.max_priority_threshold
    out: dict[str, Any] = {
        "eks_cluster_name": section.eks_cluster_name,
        "capacity": dict(section.capacity),
        "cohort": section.cohort,
        "preemption": {"reclaim_within_cohort": p.reclaim_within_cohort, "borrow_within_cohort": borrow,
                       "within_cluster_queue": p.within_cluster_queue},
        "priority_classes": [{"name": c.name, "value": c.value, **({"description": c.description} if c.description else {})}
                             for c in section.priority_classes],
    }
    if section.kubectl_role_arn is not None:
        out["kubectl_role_arn"] = section.kubectl_role_arn
    if section.adopt_namespaces:
        out["adopt_namespaces"] = list(section.adopt_namespaces)
    if section.allowed_runtime_classes:
        out["allowed_runtime_classes"] = list(section.allowed_runtime_classes)
    if section.controllers != KueueControllers():
        out["controllers"] = {key: list(getattr(section.controllers, key)) for key in CONTROLLER_KEYS}
    if section.device_classes:
        out["device_classes"] = dict(section.device_classes)
    if section.windows_image != KueueConfig.windows_image:
        out["windows_image"] = section.windows_image
    return out


def kueue_configuration(section: KueueConfig) -> dict[str, Any] | None:
    """What Kueue's own Configuration must hold for it to count the DRA devices of
    ``kueue.device_classes`` (None without any): this platform does not manage that configuration."""
    if not section.device_classes:
        return None
    by_resource: dict[str, list[str]] = {}
    for name, resource in section.device_classes.items():
        by_resource.setdefault(resource, []).append(name)
    return {"featureGates": {"DynamicResourceAllocation": True},
            "resources": {"deviceClassMappings": [{"name": r, "deviceClassNames": names}
                                                  for r, names in by_resource.items()]}}


class KueueSpec(Backend):
    """What every layer asks of the Kueue backend (see :class:`~cdk_gpu_share.core.configuration.backends.BackendSpec`)."""

    key = KEY
    strategy = "Kueue on Amazon EKS (ClusterQueues in one Cohort)"
    capacity_hint = f"{KEY} (EC2 types)"
    #: A ClusterQueue without borrowingLimit may borrow all the cohort has unused.
    default_borrow_percent = None
    section_keys = {KEY: SECTION_KEYS, "kueue_preemption": PREEMPTION_KEYS, "kueue_controllers": frozenset(CONTROLLER_KEYS)}
    descriptions = DESCRIPTIONS
    construct = "cdk_gpu_share.backends.kueue.construct:KueueQueues"
    rules = (reserved_namespaces, cohort_not_a_group, adopted_teams, controllers_outside_teams, device_class_resources,
             reclaim_and_borrow,
             threshold_needs_policy, mig_profiles, borrow_limit_types)
    resource_labels = (("Custom::AWSCDK-EKS-KubernetesResource", "Kubernetes manifests"),
                       ("AWS::EKS::AccessEntry", "EKS access entries"))
    describe_resource = staticmethod(describe_resource)
    parse = staticmethod(parse)
    schema = staticmethod(schema)
    to_mapping = staticmethod(to_mapping)

    def plan_extras(self, section: KueueConfig) -> dict[str, Any]:
        p = section.preemption
        reclaim = ("lenders wait for borrowed workloads to finish (reclaim_within_cohort: Never); the simulator"
                   " takes lent GPUs back at once, so it shows a lender's best case"
                   if p.reclaim_within_cohort == "Never" else
                   f"lenders preempt borrowed workloads ({p.reclaim_within_cohort}) as the simulator models")
        extras = {"kueue": f"cluster {section.eks_cluster_name}, cohort {section.cohort}; {reclaim}",
                  "gpu_nodes": GPU_NODE_SETTINGS}
        dra = kueue_configuration(section)
        extras["dra"] = ("every DRA resource claim refused (no kueue.device_classes)" if dra is None else
                         "DRA claims of the classes of kueue.device_classes only; set in Kueue's Configuration: "
                         + json.dumps(dra, separators=(",", ":")))
        return extras

    def plan_team_extras(self, section: KueueConfig, teams: Sequence[TeamConfig]) -> dict[str, Any]:
        """What each team's admission policy lets it label its workloads with."""
        by_team = {t.name: allowed_priority_classes(section, t) for t in teams}
        text = "; ".join(f"{name} {', '.join(classes) or 'no class'}" for name, classes in by_team.items())
        adopted = [t for t in by_team if t in section.adopt_namespaces]
        created = [t for t in by_team if t not in section.adopt_namespaces]
        parts = ([f"{', '.join(created)} created (a deployment that finds one existing fails)"] if created else []) + (
            [f"{', '.join(adopted)} adopted if they exist"] if adopted else [])
        return {"namespaces": f"{'; '.join(parts)}; all kept by cdk destroy and when a team is removed, with what"
                              " runs in them",
                "admission": {
            "minimum_kubernetes": MIN_KUBERNETES, "priority_classes": by_team,
            "text": f"each team's namespace admits only workloads on its own queue (ValidatingAdmissionPolicy,"
                    f" Kubernetes {MIN_KUBERNETES} or later); priority classes up to each team's max_priority:"
                    f" {text}"}}

    def window_deployment(self, section: KueueConfig, windows: Sequence[Window]) -> list[str]:
        """The quota window switcher's CronJobs, one line each."""
        namespace = switcher_namespace(section)
        return [f"CronJob {namespace}/{w.name}-{suffix}: {schedule} {w.timezone}, switches to the window in force"
                for w in windows for suffix, schedule in boundary_schedules(w)]

    def idle_costs(self, config: PlatformConfig, section: KueueConfig) -> list[dict[str, str]]:
        return [{"backend": KEY, "resource": "EKS cluster (not created here)",
                 "what": f"the cluster {section.eks_cluster_name} bills its control plane and nodes whether or not a"
                         " team uses its quota; this platform adds Kueue objects and a kubectl Lambda, which cost"
                         " nothing while idle"}]

    def in_team_preemption_text(self, team: TeamConfig) -> str:
        if team.in_team_preemption is None:
            return "the section's within_cluster_queue (Kueue default Never)"
        return "LowerPriority" if team.in_team_preemption else "Never"


SPEC = KueueSpec()

__all__ = ["API_VERSION", "CONTROLLER_KEYS", "CONTROLLER_MANAGER", "GPU_NODE_SETTINGS", "KEY", "KUEUE_VERSION",
           "SECTION_KEYS", "SPEC", "BorrowWithinCohort", "KueueConfig", "KueueControllers", "KueuePreemption", "KueueSpec",
           "MIN_KUBERNETES", "WorkloadPriorityClass", "allowed_priority_classes", "kueue_configuration", "parse", "schema",
           "switcher_namespace"]
