"""The admission policy that holds each team to its own queue on Kueue (pure: objects only).

With Kueue's defaults a Job or Pod without ``kueue.x-k8s.io/queue-name`` is not managed by
Kueue at all, and any ``kueue.x-k8s.io/priority-class`` is taken as written. Per team namespace
a ``ValidatingAdmissionPolicy`` and its binding (``admissionregistration.k8s.io/v1``, served
from Kubernetes 1.30) refuse, in that namespace:

* a workload of a kind Kueue manages (:data:`MANAGED_KINDS`), or a Pod that requests an extended
  resource (a GPU, a MIG partition, any ``vendor/name`` resource) or a DRA claim, or that
  tolerates the GPU nodes' taint ``nvidia.com/gpu`` (or every taint), created without
  the team's queue in ``kueue.x-k8s.io/queue-name``, or not held by Kueue when created (suspended, or a Pod with Kueue's scheduling gate): a
  workload Kueue does not hold runs outside the quota;
* another team's queue on any of them, and removing the queue label later;
* releasing a held workload (``suspend: false``, dropping the gate) by anyone but Kueue (or the
  operator of its owner: the JobSet controller starts a JobSet's Jobs): only Kueue may start what
  it admitted; and changing the spec of a running workload (its
  replicas, parallelism or pod templates) without suspending it again, and resizing a Pod's
  containers in place (``pods/resize``); changing the spec of a part an operator made (a JobSet's
  Job) by anyone but its operator or Kueue, or removing its owner reference (the garbage collector
  only);
* a Pod that reaches a node, or its GPUs, around the scheduler or the device plugin
  (:func:`_device_routes`): ``spec.nodeName``, privileged or ``NVIDIA_VISIBLE_DEVICES``,
  ``hostPID``, ``hostNetwork``, a capability of :data:`HOST_CAPABILITIES`, any ``hostPath`` volume,
  a ``runtimeClassName`` the section does not allow, a
  ``cdi.k8s.io/*`` annotation; on CREATE, and on UPDATE when the Pod did not have it before
  (ephemeral containers included); and a running Pod gaining a toleration of the GPU nodes;
* DRA claims (:func:`_dra_validations`): ``resourceClaims`` in a Pod or pod template, and
  ResourceClaims and ResourceClaimTemplates, while ``kueue.device_classes`` maps no DeviceClass to
  a quota (Kueue counts no DRA device then); once it does, a claim other than through a template
  of a mapped class, asked for exactly and by count;
* a ``kueue.x-k8s.io/priority-class`` above the team's ``max_priority``, a Pod whose resolved
  priority is above it, and a ``priorityClassName`` in a workload's pod templates (Kueue would
  take the workload's priority from it).

Objects an operator creates for a workload of a managed kind (a JobSet's Jobs, a Job's Pods, a
RayJob's RayCluster) inherit that workload's admission, as Kueue treats them, when the request
comes from that kind's operator by the identities ``kueue.controllers`` names (the job controller
for a Job's Pods, and so on). Every other identity is treated as a team member: a service account
of another namespace (Argo CD's, a CI runner's, another team's) gets no pass for an
``ownerReference`` it writes, and may not release a held workload.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cdk_gpu_share.backends.kueue import CONTROLLER_KEYS, MIN_KUBERNETES, KueueConfig, allowed_priority_classes
from cdk_gpu_share.core.configuration.parse import TeamConfig

#: The labels Kueue reads a workload's queue and priority class from.
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
#: The scheduling gate Kueue's webhook puts on a Pod it manages until it admits it.
ADMISSION_GATE = "kueue.x-k8s.io/admission"
ADMISSION_API = "admissionregistration.k8s.io/v1"
#: The label the API server puts on every namespace: the binding selects the team's by it.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
#: Pod Security Admission on each team's namespace: the baseline standard enforced (no privileged,
#: hostPID, hostNetwork, hostPath, added capabilities beyond the default set), the restricted one
#: warned. Not restricted enforced: it needs every container to run as non-root with all
#: capabilities dropped, which common training images and their pod templates do not do. The team
#: cannot change these labels (its edit rights read the Namespace object, they do not write it).
POD_SECURITY_LABELS = {"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/warn": "restricted"}


@dataclass(frozen=True)
class ManagedKind:
    """A kind of workload Kueue manages: its API group, kind and resource (plural), and the
    controller (a key of ``kueue.controllers``) that makes its parts (a Job's Pods)."""

    group: str
    kind: str
    resource: str
    operator: str


#: The workload kinds the policy holds to the queue (Kueue's integrations of them must be enabled).
MANAGED_KINDS = (
    ManagedKind("batch", "Job", "jobs", "job"),
    ManagedKind("jobset.x-k8s.io", "JobSet", "jobsets", "jobset"),
    ManagedKind("ray.io", "RayJob", "rayjobs", "kuberay"),
    ManagedKind("ray.io", "RayCluster", "rayclusters", "kuberay"),
    ManagedKind("kubeflow.org", "PyTorchJob", "pytorchjobs", "training_operator"),
    ManagedKind("kubeflow.org", "TFJob", "tfjobs", "training_operator"),
    ManagedKind("kubeflow.org", "MPIJob", "mpijobs", "training_operator"),
    ManagedKind("kubeflow.org", "XGBoostJob", "xgboostjobs", "training_operator"),
    ManagedKind("kubeflow.org", "PaddleJob", "paddlejobs", "training_operator"),
    ManagedKind("kubeflow.org", "JAXJob", "jaxjobs", "training_operator"),
)


#: Where each Kubeflow job kind keeps its replicas' pod templates (a map of replica type to spec).
KUBEFLOW_REPLICA_SPECS = ("pytorchReplicaSpecs", "tfReplicaSpecs", "mpiReplicaSpecs", "xgbReplicaSpecs",
                          "paddleReplicaSpecs", "jaxReplicaSpecs")


def policy_name(team: str) -> str:
    """The policy's and the binding's name for ``team`` (a DNS-1123 subdomain)."""
    return f"gpu-share-queue.{team}"


def _present(obj: str) -> str:
    """``oldObject`` is null but on UPDATE (the policy matches CREATE and UPDATE only); asked so,
    not by comparing an object with null, which not every CEL implementation allows."""
    return "request.operation == 'UPDATE'" if obj == "oldObject" else "true"


def _label(obj: str, key: str) -> str:
    """The value of label ``key`` of ``obj`` (``object`` or ``oldObject``), '' when absent."""
    return (f"{_present(obj)} && has({obj}.metadata.labels) && '{key}' in {obj}.metadata.labels"
            f" ? {obj}.metadata.labels['{key}'] : ''")


def _held(obj: str) -> str:
    """Is ``obj`` held by Kueue: a Pod with Kueue's scheduling gate, a workload suspended."""
    return (f"{_present(obj)} && ({obj}.kind == 'Pod'"
            f" ? has({obj}.spec.schedulingGates) && {obj}.spec.schedulingGates.exists(g, g.name == '{ADMISSION_GATE}')"
            f" : {obj}.apiVersion.startsWith('kubeflow.org/')"
            f" ? has({obj}.spec.runPolicy) && has({obj}.spec.runPolicy.suspend) && {obj}.spec.runPolicy.suspend == true"
            f" : has({obj}.spec.suspend) && {obj}.spec.suspend == true)")


def _names_class(spec: str) -> str:
    """Does the pod spec at ``spec`` name a Kubernetes PriorityClass?"""
    return f"(has({spec}.priorityClassName) && {spec}.priorityClassName != '')"


def _any_pod_spec(obj: str, test: Callable[[str], str], pod: bool = True) -> str:
    """Does a pod spec of ``obj`` pass ``test`` (CEL over a spec's path): a Pod's own (when ``pod``),
    or any pod template of a workload of a managed kind? Other kinds have none."""
    def ray(spec: str) -> str:
        return (f"(has({spec}.headGroupSpec) && {test(f'{spec}.headGroupSpec.template.spec')})"
                f" || (has({spec}.workerGroupSpecs) && {spec}.workerGroupSpecs.exists(g, {test('g.template.spec')}))")

    kubeflow = " || ".join(f"(has({obj}.spec.{f}) && {obj}.spec.{f}.exists(t, {test(f'{obj}.spec.{f}[t].template.spec')}))"
                           for f in KUBEFLOW_REPLICA_SPECS)
    return (f"{_present(obj)} && ({obj}.kind == 'Pod' ? {test(f'{obj}.spec') if pod else 'false'}"
            f" : {obj}.kind == 'Job' ? {test(f'{obj}.spec.template.spec')}"
            f" : {obj}.kind == 'JobSet' ? has({obj}.spec.replicatedJobs) && {obj}.spec.replicatedJobs.exists(r,"
            f" {test('r.template.spec.template.spec')})"
            f" : {obj}.kind == 'RayCluster' ? {ray(f'{obj}.spec')}"
            f" : {obj}.kind == 'RayJob' ? (has({obj}.spec.rayClusterSpec) && ({ray(f'{obj}.spec.rayClusterSpec')}))"
            f" || (has({obj}.spec.submitterPodTemplate) && {test(f'{obj}.spec.submitterPodTemplate.spec')})"
            f" : {obj}.apiVersion.startsWith('kubeflow.org/') ? {kubeflow} : false)")


#: Does a workload's pod template name a PriorityClass (Kueue takes the workload's priority from it)?
TEMPLATE_PRIORITY_CLASS = _any_pod_spec("object", _names_class, pod=False)


def _asks_extended(containers: str) -> str:
    """Does a container of the list ``containers`` request or limit an extended resource? Those
    are named with a domain (``nvidia.com/gpu``, ``nvidia.com/mig-1g.5gb``, a time-sliced
    ``nvidia.com/gpu.shared``, ``amd.com/gpu``, ``aws.amazon.com/neuron``); Kubernetes' own
    (cpu, memory, ephemeral-storage, hugepages-*) are not."""
    return (f"{containers}.exists(c, has(c.resources) && ((has(c.resources.requests)"
            " && c.resources.requests.exists(k, k.contains('/'))) || (has(c.resources.limits)"
            " && c.resources.limits.exists(k, k.contains('/')))))")


#: Does a Pod ask for an accelerator: an extended resource (GPUs, MIG partitions...) or a DRA claim?
ACCELERATORS = (
    "object.kind == 'Pod' && ((has(object.spec.resourceClaims) && size(object.spec.resourceClaims) > 0)"
    f" || {_asks_extended('object.spec.containers')}"
    f" || (has(object.spec.initContainers) && {_asks_extended('object.spec.initContainers')}))"
)


#: The taint GPU nodes carry by convention (NVIDIA's resource name): a Pod tolerating it, or every
#: taint, can land on a GPU node and take its CPUs and memory from the workloads Kueue admitted.
GPU_TAINT = "nvidia.com/gpu"


def _tolerates_gpu_nodes(obj: str) -> str:
    """Does the Pod ``obj`` tolerate the GPU nodes' taint, or every taint?"""
    return (f"{obj}.kind == 'Pod' && has({obj}.spec.tolerations) && {obj}.spec.tolerations.exists(t,"
            f" (has(t.key) && t.key == '{GPU_TAINT}') || ((!has(t.key) || t.key == '') && has(t.operator)"
            " && t.operator == 'Exists'))")


TOLERATES_GPU_NODES = _tolerates_gpu_nodes("object")
#: The container lists of a pod spec; ephemeral containers are added to a running Pod (``kubectl debug``).
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def _any_container(spec: str, test: str) -> str:
    """Does a container (``c``) of any list of the pod spec at ``spec`` pass ``test``?"""
    return " || ".join(f"(has({spec}.{f}) && {spec}.{f}.exists(c, {test}))" for f in CONTAINER_LISTS)


#: The annotation prefix of Container Device Interface requests, which a runtime with CDI enabled
#: turns into devices in the container, whatever the Pod requested.
CDI_ANNOTATION_PREFIX = "cdi.k8s.io/"
#: The capabilities that reach the node around the container (``CAP_`` and case as the runtime takes them):
#: ``SYS_ADMIN`` mounts the node's devices; ``SYS_MODULE`` loads kernel code; ``DAC_READ_SEARCH``
#: opens the node's files by handle (``open_by_handle_at``), outside the container's root;
#: ``SYS_RAWIO`` reaches I/O ports and raw memory; ``BPF`` loads programs that write other processes'
#: memory; ``ALL`` holds them all.
HOST_CAPABILITIES = ("SYS_ADMIN", "SYS_MODULE", "DAC_READ_SEARCH", "SYS_RAWIO", "BPF")
ESCAPING_CAPABILITY = rf"(?i)^(cap_)?({'|'.join(c.lower() for c in HOST_CAPABILITIES)}|all)$"


@dataclass(frozen=True)
class DeviceRoute:
    """A way for a Pod to reach a node's GPUs, or its node, around the device plugin and so around
    the quota (Kueue counts only the GPUs a Pod requests): ``test`` is CEL over the Pod ``obj``
    (``object`` or ``oldObject``); ``what`` and ``fix`` make its message."""

    test: Callable[[str], str]
    what: str
    fix: str


def _device_routes(section: KueueConfig) -> tuple[DeviceRoute, ...]:
    allowed = list(section.allowed_runtime_classes)
    allowed_text = ", ".join(allowed) or "none"
    return (
        DeviceRoute(lambda o: f"has({o}.spec.nodeName) && {o}.spec.nodeName != ''",
                    "may not set spec.nodeName: it skips the scheduler, and with it the GPU nodes' taint",
                    "leave spec.nodeName unset and let the scheduler place the Pod (on a GPU node through Kueue's queue only)"),
        DeviceRoute(lambda o: _any_container(
            f"{o}.spec", "(has(c.securityContext) && has(c.securityContext.privileged)"
            " && c.securityContext.privileged == true) || (has(c.env) && c.env.exists(e, e.name == 'NVIDIA_VISIBLE_DEVICES'))"),
            "may not be privileged or set NVIDIA_VISIBLE_DEVICES: it would reach GPUs outside the quota",
            "request nvidia.com/gpu and let the device plugin give them"),
        DeviceRoute(lambda o: f"has({o}.spec.hostPID) && {o}.spec.hostPID == true",
                    "may not set hostPID: it would see and signal the node's processes, other teams' GPU jobs among them",
                    "remove hostPID"),
        DeviceRoute(lambda o: f"has({o}.spec.hostNetwork) && {o}.spec.hostNetwork == true",
                    "may not set hostNetwork: it would reach the node's own services",
                    "remove hostNetwork"),
        DeviceRoute(lambda o: _any_container(
            f"{o}.spec", f"has(c.securityContext) && has(c.securityContext.capabilities)"
            " && has(c.securityContext.capabilities.add)"
            f" && c.securityContext.capabilities.add.exists(a, a.matches('{ESCAPING_CAPABILITY}'))"),
            f"may not add the capability {', '.join(HOST_CAPABILITIES)} (or ALL): each reaches the node around the"
            " container, its devices and other teams' GPU processes among it",
            "remove it from securityContext.capabilities.add"),
        # Every hostPath, not a list of dangerous ones: the runtime follows symbolic links in the path
        # on the node, and a team can write one where it can write (its image's layers under the
        # runtime's folder, shared storage the node mounts), pointing at /dev/null (which claims a GPU
        # under the device plugin's volume-mounts list), /dev, /proc or the runtime's socket.
        DeviceRoute(lambda o: f"has({o}.spec.volumes) && {o}.spec.volumes.exists(v, has(v.hostPath))",
                    "may not mount a hostPath volume: the node follows symbolic links in its path, so any folder"
                    " the team can write to reaches the node's devices (/dev, /dev/null as a GPU), its processes"
                    " (/proc) or the container runtime's socket",
                    "use an emptyDir (the node's local disks as ephemeral storage), a PersistentVolumeClaim or"
                    " another kind of volume, and request nvidia.com/gpu for the GPUs the Pod needs"),
        DeviceRoute(lambda o: f"has({o}.spec.runtimeClassName) && !({o}.spec.runtimeClassName in {allowed!r})",
                    "may name only an allowed runtime class in runtimeClassName: a runtime such as NVIDIA's can hand a"
                    " container GPUs it did not request",
                    f"use one of kueue.allowed_runtime_classes ({allowed_text}), or leave runtimeClassName unset"),
        DeviceRoute(lambda o: f"has({o}.metadata.annotations) && {o}.metadata.annotations.exists(k,"
                    f" k.startsWith('{CDI_ANNOTATION_PREFIX}'))",
                    f"may not carry a {CDI_ANNOTATION_PREFIX}* annotation: the runtime would add the devices it names",
                    "remove the annotation, and request nvidia.com/gpu for the GPUs the Pod needs"),
    )


def _newly(test: Callable[[str], str]) -> str:
    """Does the request give a Pod ``test``: on CREATE when the Pod has it, on UPDATE when the Pod
    before did not (what Kubernetes lets change, and Pods made before the policy keep what they had)?"""
    return f"object.kind == 'Pod' && ({test('object')}) && !(request.operation == 'UPDATE' && ({test('oldObject')}))"


def _owned_by(kinds: list[ManagedKind] | tuple[ManagedKind, ...], obj: str = "object") -> str:
    """Is the controller of ``obj`` (its ``ownerReference`` with ``controller: true``) of one of ``kinds``?"""
    test = " || ".join(f"(r.kind == '{k.kind}' && r.apiVersion.startsWith('{k.group}/'))" for k in kinds)
    return (f"{_present(obj)} && has({obj}.metadata.ownerReferences) && {obj}.metadata.ownerReferences.exists(r,"
            f" has(r.controller) && r.controller == true && ({test}))")


#: The garbage collector: it removes an owner reference when its owner is deleted with its
#: dependents orphaned, and needs no other pass.
GARBAGE_COLLECTOR = ("system:serviceaccount:kube-system:generic-garbage-collector", "system:kube-controller-manager")


def _operator(section: KueueConfig) -> str:
    """Does the request come from the controller that makes the parts of the object's owner: the
    job controller for a Job's Pods, the JobSet controller for a JobSet's Jobs, KubeRay for a
    RayJob's or RayCluster's, the training operator for a PyTorchJob's? Each identity passes only
    for its own kinds, so an owner reference alone, or another controller, is not enough."""
    parts = []
    for key in CONTROLLER_KEYS:
        names = list(getattr(section.controllers, key))
        kinds = [k for k in MANAGED_KINDS if k.operator == key]
        if names and kinds:
            parts.append(f"(request.userInfo.username in {names!r} && ({_owned_by(kinds)}))")
    return " || ".join(parts) or "false"


#: The container lists whose resources a Pod's in-place resize changes (init containers: sidecars).
RESIZABLE_LISTS = ("containers", "initContainers")


def _same_resources() -> str:
    """Does every container of the Pod keep the resources it had before the update? An in-place
    resize (``pods/resize``, Kubernetes 1.33 and later) changes only these."""
    def same(f: str) -> str:
        return (f"(!has(object.spec.{f}) || object.spec.{f}.all(c, has(oldObject.spec.{f})"
                f" && oldObject.spec.{f}.exists(o, o.name == c.name"
                " && (has(c.resources) ? has(o.resources) && o.resources == c.resources : !has(o.resources)))))")

    return " && ".join(same(f) for f in RESIZABLE_LISTS)


def _variables(section: KueueConfig) -> list[dict[str, str]]:
    return [
        {"name": "queue", "expression": _label("object", QUEUE_LABEL)},
        {"name": "oldQueue", "expression": _label("oldObject", QUEUE_LABEL)},
        {"name": "priorityClass", "expression": _label("object", PRIORITY_LABEL)},
        {"name": "oldPriorityClass", "expression": _label("oldObject", PRIORITY_LABEL)},
        # Kueue (it alone releases what it holds) and the operator of the object's owner, by the
        # identities the section names: any other identity, a service account of another
        # namespace included (Argo CD's, a CI runner's, another team's), is treated as the team.
        {"name": "kueue", "expression": f"request.userInfo.username in {list(section.controllers.kueue)!r}"},
        {"name": "operator", "expression": _operator(section)},
        {"name": "controller", "expression": "variables.kueue || variables.operator"},
        # An object an operator creates for a workload Kueue admitted (a Job's Pods) inherits its admission.
        {"name": "inherited", "expression": "variables.operator"},
        # A part an operator made for a workload of a managed kind (a JobSet's Job, a RayJob's
        # RayCluster), before or after the request: Kueue holds the workload above it, not the part.
        {"name": "part", "expression": f"({_owned_by(MANAGED_KINDS)}) || ({_owned_by(MANAGED_KINDS, 'oldObject')})"},
        {"name": "claim", "expression": f"object.apiVersion.startsWith('{DRA_GROUP}/')"},
        {"name": "needsQueue", "expression": "!variables.claim && (object.kind != 'Pod'"
                                             f" || ({ACCELERATORS}) || ({TOLERATES_GPU_NODES}))"},
        {"name": "held", "expression": _held("object")},
        {"name": "wasHeld", "expression": _held("oldObject")},
    ]


#: The API group of Dynamic Resource Allocation, and the claim kinds a team could create.
DRA_GROUP = "resource.k8s.io"
DRA_RESOURCES = ("resourceclaims", "resourceclaimtemplates")


def _claims(spec: str) -> str:
    """Does the pod spec at ``spec`` claim DRA devices?"""
    return f"(has({spec}.resourceClaims) && size({spec}.resourceClaims) > 0)"


def _claims_outside_templates(spec: str) -> str:
    """Does the pod spec at ``spec`` claim devices other than through a ResourceClaimTemplate (a
    ResourceClaim named, or a claim of an older API's shape)? Kueue counts a template's devices only."""
    return (f"(has({spec}.resourceClaims) && {spec}.resourceClaims.exists(c, !has(c.resourceClaimTemplateName)"
            " || has(c.resourceClaimName)))")


def _counted_request(classes: list[str]) -> str:
    """Is the DRA device request ``q`` one Kueue counts against a quota: one of ``classes``, asked
    for exactly (``exactly``, or the older flat shape; not ``firstAvailable``), by count (not
    ``allocationMode: All``), and without ``adminAccess`` (which reaches devices other claims hold)?"""
    def plain(r: str) -> str:
        return (f"has({r}.deviceClassName) && {r}.deviceClassName in {classes!r}"
                f" && (!has({r}.allocationMode) || {r}.allocationMode == 'ExactCount')"
                f" && (!has({r}.adminAccess) || {r}.adminAccess == false)")

    return f"!has(q.firstAvailable) && (has(q.exactly) ? ({plain('q.exactly')}) : ({plain('q')}))"


def _claim_requests(classes: list[str]) -> str:
    """Does every request of a ResourceClaim (or of a ResourceClaimTemplate's claim) pass :func:`_counted_request`?"""
    def each(spec: str) -> str:
        return (f"!has({spec}.devices) || !has({spec}.devices.requests)"
                f" || {spec}.devices.requests.all(q, {_counted_request(classes)})")

    return f"object.kind == 'ResourceClaimTemplate' ? ({each('object.spec.spec')}) : ({each('object.spec')})"


def _dra_validations(section: KueueConfig, name: str) -> list[dict[str, str]]:
    """DRA claims in the team's namespace: all refused until ``kueue.device_classes`` maps a class to a
    quota resource (Kueue counts no DRA device otherwise); then only through a ResourceClaimTemplate,
    of a mapped class. On CREATE, and on UPDATE when the object did not claim before."""
    classes = list(section.device_classes)
    fix = f"request {GPU_TAINT} instead, or map the DeviceClass to a quota resource in kueue.device_classes"
    if not classes:
        return [
            {"expression": f"!({_any_pod_spec('object', _claims)})"
                           f" || (request.operation == 'UPDATE' && ({_any_pod_spec('oldObject', _claims)}))",
             "message": f"a workload in namespace {name} may not claim devices through DRA (resourceClaims in a Pod or"
                        f" pod template): no device class is mapped to a quota, so Kueue would count none; {fix}",
             "reason": "Forbidden"},
            {"expression": "!variables.claim || request.operation != 'CREATE'",
             "message": f"namespace {name} may not hold DRA ResourceClaims or ResourceClaimTemplates: no device class"
                        f" is mapped to a quota, so Kueue would count none of their devices; {fix}",
             "reason": "Forbidden"},
        ]
    return [
        {"expression": f"!({_any_pod_spec('object', _claims_outside_templates)}) || (request.operation == 'UPDATE'"
                       f" && ({_any_pod_spec('oldObject', _claims_outside_templates)}))",
         "message": f"a workload in namespace {name} claims DRA devices only through a ResourceClaimTemplate"
                    " (resourceClaimTemplateName in resourceClaims): Kueue counts a template's devices against the"
                    " quota, not a ResourceClaim's",
         "reason": "Forbidden"},
        {"expression": f"!variables.claim || request.operation != 'CREATE' || ({_claim_requests(classes)})",
         "message": f"a DRA ResourceClaim or ResourceClaimTemplate in namespace {name} may request only the device"
                    f" classes of kueue.device_classes ({', '.join(classes)}), each exactly (no firstAvailable), by"
                    " count (allocationMode ExactCount) and without adminAccess: Kueue counts only those against the"
                    " team's quota",
         "reason": "Forbidden"},
    ]


def _validations(section: KueueConfig, team: TeamConfig) -> list[dict[str, str]]:
    name = team.name
    allowed = allowed_priority_classes(section, team)
    allowed_text = ", ".join(allowed) or "none"
    created = "request.operation != 'CREATE' || variables.inherited || !variables.needsQueue"
    return [
        {"expression": f"{created} || variables.queue != ''",
         "message": f"a workload in namespace {name} (a Job, JobSet, RayJob, RayCluster, PyTorchJob, or a Pod that"
                    f" requests GPUs or tolerates the GPU nodes' taint {GPU_TAINT}) needs the label {QUEUE_LABEL}:"
                    f" {name}, so that Kueue admits it within the team's quota",
         "reason": "Forbidden"},
        {"expression": f"variables.queue == '' || variables.queue == '{name}'"
                       " || (request.operation == 'UPDATE' && variables.queue == variables.oldQueue)",
         "message": f"namespace {name} may only use its own Kueue queue: set {QUEUE_LABEL}: {name}",
         "reason": "Forbidden"},
        {"expression": "request.operation != 'UPDATE' || variables.oldQueue == '' || variables.queue != ''"
                       " || variables.controller",
         "message": f"the label {QUEUE_LABEL} cannot be removed from a workload in namespace {name}",
         "reason": "Forbidden"},
        {"expression": f"{created} || variables.held",
         "message": f"a workload in namespace {name} must be held by Kueue when created (a suspended Job, JobSet,"
                    " RayJob, RayCluster or Kubeflow job; a Pod with Kueue's scheduling gate"
                    f" {ADMISSION_GATE}): enable Kueue's integration for this kind",
         "reason": "Forbidden"},
        {"expression": "request.operation != 'UPDATE' || !variables.wasHeld || variables.held || variables.controller",
         "message": f"only Kueue starts a workload in namespace {name}: it stays suspended (or gated) until Kueue"
                    " admits it",
         "reason": "Forbidden"},
        {"expression": "request.operation != 'UPDATE' || object.kind == 'Pod' || variables.controller"
                       " || variables.wasHeld || variables.held || object.spec == oldObject.spec",
         "message": f"a running workload in namespace {name} keeps the size Kueue admitted: suspend it to change its"
                    " spec (replicas, parallelism, pod templates), and Kueue admits it again",
         "reason": "Forbidden"},
        {"expression": f"object.kind != 'Pod' || request.operation != 'UPDATE' || ({_same_resources()})",
         "message": f"a Pod in namespace {name} keeps the resources it was created with: resizing it in place"
                    " (pods/resize) would take more than Kueue admitted; change its workload's pod template, which"
                    " Kueue admits again",
         "reason": "Forbidden"},
        {"expression": "request.operation != 'UPDATE' || object.kind == 'Pod' || !variables.part || variables.controller"
                       " || object.spec == oldObject.spec",
         "message": f"a part an operator made for a workload in namespace {name} (a JobSet's Job, a RayJob's"
                    " RayCluster) keeps its spec: suspended and grown, its operator would start it past what Kueue"
                    " admitted for the workload; change the workload above it",
         "reason": "Forbidden"},
        {"expression": f"request.operation != 'UPDATE' || !({_owned_by(MANAGED_KINDS, 'oldObject')})"
                       f" || ({_owned_by(MANAGED_KINDS)}) || variables.controller"
                       f" || request.userInfo.username in {list(GARBAGE_COLLECTOR)!r}",
         "message": f"a part an operator made for a workload in namespace {name} keeps its owner reference: without"
                    " it, the part could be changed and then given back to its operator to start",
         "reason": "Forbidden"},
        {"expression": f"variables.priorityClass == '' || variables.priorityClass in {allowed!r}"
                       " || (request.operation == 'UPDATE' && variables.priorityClass == variables.oldPriorityClass)",
         "message": f"team {name} may use the priority classes up to its max_priority {team.max_priority}:"
                    f" {allowed_text} (label {PRIORITY_LABEL})",
         "reason": "Forbidden"},
        {"expression": "object.kind != 'Pod' || request.operation != 'CREATE' || !has(object.spec.priority)"
                       f" || object.spec.priority <= {team.max_priority}",
         "message": f"a Pod in namespace {name} may have a priority up to the team's max_priority {team.max_priority}:"
                    " name a lower PriorityClass",
         "reason": "Forbidden"},
        {"expression": f"request.operation != 'UPDATE' || variables.controller || !({TOLERATES_GPU_NODES})"
                       f" || ({_tolerates_gpu_nodes('oldObject')}) || (variables.held && variables.queue != '')",
         "message": f"a running Pod in namespace {name} may not gain a toleration of the GPU nodes' taint {GPU_TAINT}"
                    f" (or of every taint): create it with the label {QUEUE_LABEL}: {name}, and Kueue gives the"
                    " toleration when it admits it",
         "reason": "Forbidden"},
        *({"expression": f"!({_newly(route.test)})",
           "message": f"a Pod in namespace {name} {route.what}; {route.fix}",
           "reason": "Forbidden"} for route in _device_routes(section)),
        *_dra_validations(section, name),
        {"expression": f"!({TEMPLATE_PRIORITY_CLASS})",
         "message": f"a workload in namespace {name} gives its priority with the label {PRIORITY_LABEL}"
                    f" ({allowed_text}), not with priorityClassName in its pod templates",
         "reason": "Forbidden"},
    ]


def _match(team: str) -> dict[str, Any]:
    return {"matchLabels": {NAMESPACE_NAME_LABEL: team}}


def admission_objects(section: KueueConfig, team: TeamConfig, meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its binding of ``team`` (``meta``: the labels every object carries)."""
    name = policy_name(team.name)
    groups: dict[str, list[str]] = {}
    for k in MANAGED_KINDS:
        groups.setdefault(k.group, []).append(k.resource)
    # Ephemeral containers are added, and containers resized, through their own subresources; the
    # binding one is the scheduler's.
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
              "resources": ["pods", "pods/ephemeralcontainers", "pods/resize"]}]
    rules += [{"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": resources}
              for group, resources in groups.items()]
    rules.append({"apiGroups": [DRA_GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                  "resources": list(DRA_RESOURCES)})
    policy = {
        "apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy",
        "metadata": {**meta, "name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"namespaceSelector": _match(team.name), "resourceRules": rules},
            "variables": _variables(section),
            "validations": _validations(section, team),
        },
    }
    binding = {
        "apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {**meta, "name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": _match(team.name)}},
    }
    return [policy, binding]


__all__ = ["ADMISSION_API", "ADMISSION_GATE", "CDI_ANNOTATION_PREFIX", "DRA_GROUP", "DRA_RESOURCES", "GARBAGE_COLLECTOR", "GPU_TAINT",
           "HOST_CAPABILITIES", "MANAGED_KINDS", "MIN_KUBERNETES", "POD_SECURITY_LABELS", "PRIORITY_LABEL", "QUEUE_LABEL",
           "DeviceRoute", "ManagedKind", "admission_objects", "policy_name"]
