"""The admission policy per team namespace: its objects are valid admissionregistration v1, and
each of its rules, evaluated by a CEL evaluator from the generated objects, lets through what a
team may do and refuses what it may not (case tables from the shared workload builders)."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest
import yaml

from cdk_gpu_share.backends.kueue import allowed_priority_classes
from cdk_gpu_share.backends.kueue.admission import MANAGED_KINDS, policy_name
from cdk_gpu_share.backends.kueue.manifests import config_objects
from cdk_gpu_share.core.configuration.parse import load_config, parse_config
from cdk_gpu_share.core.plan import fleet_plan, format_plan
from tests.backends.kueue.admission_check import Decision, all_expressions, compiles, decide, schema_errors
from tests.backends.kueue.workloads import (
    ARGO_CD,
    CI_RUNNER,
    JOB_CONTROLLER,
    JOBSET,
    KINDS,
    KUBERAY,
    KUEUE,
    MEMBER,
    OTHER_TEAM,
    TRAINING_OPERATOR,
    annotated,
    claim_object,
    exactly,
    hostpath,
    own_account,
    relabelled,
    released,
    resized,
    with_claim,
    with_container,
    with_spec,
    workload,
)
from tests.helpers import ROOT

EXAMPLE = ROOT / "examples" / "kueue.yaml"
TEAM = "research"  # max_priority 100: training (100) and experimentation (10), not inference (1000)
OTHER = "applied"


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return config_objects(load_config(EXAMPLE))


def policy_of(objects: list[dict], team: str) -> tuple[dict, dict]:
    name = policy_name(team)
    (policy,) = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == name]
    (binding,) = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"
                  and o["metadata"]["name"] == name]
    return policy, binding


def run(objects: list[dict], obj: dict, user: str = MEMBER, old: dict | None = None, team: str = TEAM,
        subresource: str = "") -> Decision:
    policy, binding = policy_of(objects, team)
    decision = decide(policy, binding, obj, user=user, old=old, subresource=subresource)
    assert decision.errors == [], decision.errors  # each case meets the rule it is about, not an evaluation error
    return decision


def refused_by(decision: Decision, words: str) -> bool:
    return decision.matched and any(words in m for m in decision.refused)


NEEDS_QUEUE = "needs the label kueue.x-k8s.io/queue-name"
OWN_QUEUE = "may only use its own Kueue queue"
HELD = "must be held by Kueue when created"
ONLY_KUEUE = "only Kueue starts a workload"
LABEL_STAYS = "cannot be removed"
CLASS_CAP = "may use the priority classes up to its max_priority"
POD_PRIORITY = "may have a priority up to the team's max_priority"
TEMPLATE_CLASS = "not with priorityClassName in its pod templates"
RUNNING_SIZE = "keeps the size Kueue admitted"
DEVICES = "may not be privileged or set NVIDIA_VISIBLE_DEVICES"
NODE_NAME = "may not set spec.nodeName"
TOLERATION_ADDED = "may not gain a toleration of the GPU nodes' taint"
HOST_PID = "may not set hostPID"
HOST_NETWORK = "may not set hostNetwork"
SYS_ADMIN = "may not add the capability SYS_ADMIN"
HOST_PATH = "may not mount a hostPath volume"
RESIZE = "keeps the resources it was created with"
RUNTIME_CLASS = "may name only an allowed runtime class"
CDI = "may not carry a cdi.k8s.io/* annotation"
DRA_WORKLOAD = "may not claim devices through DRA"
DRA_OBJECTS = "may not hold DRA ResourceClaims or ResourceClaimTemplates"
DRA_TEMPLATES_ONLY = "claims DRA devices only through a ResourceClaimTemplate"
DRA_CLASSES = "may request only the device classes of kueue.device_classes"


# -- the objects.


def test_each_team_gets_a_policy_and_a_binding_valid_for_kubernetes_1_30(objects):
    admission = [o for o in objects if o["apiVersion"] == "admissionregistration.k8s.io/v1"]
    assert sorted(o["metadata"]["name"] for o in admission if o["kind"] == "ValidatingAdmissionPolicy") == [
        "gpu-share-queue.applied", "gpu-share-queue.inference", "gpu-share-queue.research"]
    assert [e for o in admission for e in schema_errors(o)] == []
    for team in ("research", "applied", "inference"):
        policy, binding = policy_of(objects, team)
        namespace = {"matchLabels": {"kubernetes.io/metadata.name": team}}
        assert policy["spec"]["failurePolicy"] == "Fail"
        assert policy["spec"]["matchConstraints"]["namespaceSelector"] == namespace
        assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"],
                                   "matchResources": {"namespaceSelector": namespace}}
    # Kubernetes 1.29 serves no admissionregistration v1 policies: the schema check knows none.
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate(admission[0], "1.29.0", strict=True)


def test_the_schema_check_refuses_what_the_api_server_refuses(objects):
    policy, binding = policy_of(objects, TEAM)
    bad_binding = copy.deepcopy(binding)
    bad_binding["spec"]["validationActions"] = ["Block"]
    unknown = copy.deepcopy(policy)
    unknown["spec"]["validations"][0]["severity"] = "high"
    bad_reason = copy.deepcopy(policy)
    bad_reason["spec"]["validations"][0]["reason"] = "Nope"
    for obj in (bad_binding, unknown, bad_reason):
        assert schema_errors(obj) != []


def test_the_policy_matches_every_managed_kind_on_create_and_update(objects):
    policy, _ = policy_of(objects, TEAM)
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    matched = {(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]}
    assert ("", "pods") in matched and {(k.group, k.resource) for k in MANAGED_KINDS} <= matched
    # Ephemeral containers come through their own subresource; the scheduler binds through pods/binding.
    assert ("", "pods/ephemeralcontainers") in matched and ("", "pods/binding") not in matched
    assert ("", "pods/resize") in matched
    assert all(rule["operations"] == ["CREATE", "UPDATE"] for rule in rules)


def test_every_expression_is_cel_the_evaluator_compiles(objects):
    policy, _ = policy_of(objects, TEAM)
    assert all(compiles(e) for e in all_expressions(policy))


def test_a_teams_allowed_classes_are_those_up_to_its_max_priority():
    config = load_config(EXAMPLE)
    section = config.backend("kueue")
    by_name = {t.name: t for t in config.teams}
    assert allowed_priority_classes(section, by_name["research"]) == ["training", "experimentation"]
    assert allowed_priority_classes(section, by_name["inference"]) == ["inference", "training", "experimentation"]
    plan = fleet_plan(config)["backends"]["kueue"]["admission"]
    assert plan["minimum_kubernetes"] == "1.30" and plan["priority_classes"]["applied"] == ["training", "experimentation"]
    assert "inference inference, training, experimentation" in format_plan(fleet_plan(config))
    assert ("  namespaces: research, applied created (a deployment that finds one existing fails); inference adopted"
            " if they exist; all kept by cdk destroy and when a team is removed, with what runs in them"
            ) in format_plan(fleet_plan(config)).splitlines()


def _reaching(container_change: dict, init: bool = False) -> dict:
    """A Pod on the team's queue with one more container (or an init container) changed so."""
    pod = workload("Pod", TEAM, gpus=0, queue=TEAM)
    container = {"name": "side", "image": "x:1", **container_change}
    pod["spec"].setdefault("initContainers" if init else "containers", []).append(container)
    return pod


# -- what a team member creates in its namespace.

ALLOWED_CREATES = [
    *[(f"{k} on its own queue, held by Kueue", workload(k, TEAM, queue=TEAM)) for k in KINDS],
    *[(f"{k} at an allowed priority class", workload(k, TEAM, queue=TEAM, priority_class="training")) for k in KINDS],
    ("a TFJob on its own queue, held by Kueue", workload("TFJob", TEAM, queue=TEAM)),
    ("a Pod that asks for no GPU, without a queue", workload("Pod", TEAM, gpus=0, held=False)),
    ("a Pod at the team's max priority", workload("Pod", TEAM, queue=TEAM, priority=100)),
    ("a Pod without GPUs tolerating another taint", workload("Pod", TEAM, gpus=0, held=False, tolerations=[
        {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}])),
    ("a Pod tolerating the GPU taint on its own queue", workload("Pod", TEAM, gpus=0, queue=TEAM, tolerations=[
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])),
]

REFUSED_CREATES = [
    *[(f"{k} without a queue", workload(k, TEAM), NEEDS_QUEUE) for k in KINDS],
    *[(f"{k} on another team's queue", workload(k, TEAM, queue=OTHER), OWN_QUEUE) for k in KINDS],
    *[(f"{k} not held by Kueue", workload(k, TEAM, queue=TEAM, held=False), HELD) for k in KINDS],
    *[(f"{k} above its max priority", workload(k, TEAM, queue=TEAM, priority_class="inference"), CLASS_CAP)
      for k in KINDS],
    *[(f"{k} with an unknown class", workload(k, TEAM, queue=TEAM, priority_class="urgent"), CLASS_CAP) for k in KINDS],
    *[(f"{k} with a PriorityClass in its templates", workload(k, TEAM, queue=TEAM, template_class="system-node-critical"),
       TEMPLATE_CLASS) for k in (*KINDS, "TFJob") if k != "Pod"],
    ("a TFJob on its own queue, not held", workload("TFJob", TEAM, queue=TEAM, held=False), HELD),
    ("a Pod asking for a MIG partition without a queue", workload("Pod", TEAM, gpus=0, mig="mig-1g.5gb", held=False),
     NEEDS_QUEUE),
    ("a Pod with GPUs in its limits only", workload("Pod", TEAM, limits_only=True, held=False), NEEDS_QUEUE),
    ("a Pod with a GPU in an init container", workload("Pod", TEAM, gpus=0, init_gpus=1, held=False), NEEDS_QUEUE),
    *[(f"a Pod asking for {r} without a queue", workload("Pod", TEAM, gpus=0, resource=r, held=False), NEEDS_QUEUE)
      for r in ("nvidia.com/gpu.shared", "amd.com/gpu", "aws.amazon.com/neuron")],
    ("a Pod without GPUs tolerating the GPU nodes' taint", workload("Pod", TEAM, gpus=0, held=False, tolerations=[
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]), NEEDS_QUEUE),
    ("a Pod without GPUs tolerating every taint", workload("Pod", TEAM, gpus=0, held=False, tolerations=[
        {"operator": "Exists"}]), NEEDS_QUEUE),
    ("a privileged Pod", _reaching({"securityContext": {"privileged": True}}), DEVICES),
    ("a Pod whose PriorityClass is above the cap", workload("Pod", TEAM, queue=TEAM, priority=2000000000), POD_PRIORITY),
    ("a Pod labelled with another queue even without GPUs", workload("Pod", TEAM, gpus=0, queue=OTHER), OWN_QUEUE),
    ("a Job whose pod template claims DRA devices", with_claim(workload("Job", TEAM, queue=TEAM)), DRA_WORKLOAD),
    ("a ResourceClaimTemplate", claim_object("ResourceClaimTemplate", TEAM, exactly("gpu.nvidia.com")), DRA_OBJECTS),
]


@pytest.mark.parametrize("what, obj", ALLOWED_CREATES, ids=[c[0] for c in ALLOWED_CREATES])
def test_a_member_may_create(objects, what, obj):
    decision = run(objects, obj)
    assert decision.matched and decision.allowed, decision.refused


@pytest.mark.parametrize("what, obj, words", REFUSED_CREATES, ids=[c[0] for c in REFUSED_CREATES])
def test_a_member_may_not_create(objects, what, obj, words):
    assert refused_by(run(objects, obj), words)


@pytest.mark.parametrize("change", [{"securityContext": {"privileged": True}},
                                    {"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}],
                         ids=["privileged", "NVIDIA_VISIBLE_DEVICES"])
@pytest.mark.parametrize("init", [False, True], ids=["container", "init container"])
def test_a_pod_may_not_reach_gpus_around_the_device_plugin(objects, change, init):
    # Even on its own queue: Kueue would count no GPU for it, and it would see every GPU of the node.
    assert refused_by(run(objects, _reaching(change, init)), DEVICES)
    inherited = _reaching(change, init)
    inherited["metadata"]["ownerReferences"] = workload("Pod", TEAM, owner="Job")["metadata"]["ownerReferences"]
    assert refused_by(run(objects, inherited, user=JOB_CONTROLLER), DEVICES)
    assert run(objects, _reaching({"securityContext": {"privileged": False}, "env": [
        {"name": "CUDA_VISIBLE_DEVICES", "value": "0"}]}, init)).allowed


def without_rule(objects: list[dict], words: str, team: str = TEAM) -> tuple[dict, dict]:
    """The team's policy with the one validation whose message holds ``words`` removed, and its binding."""
    policy, binding = policy_of(objects, team)
    without = copy.deepcopy(policy)
    without["spec"]["validations"] = [v for v in policy["spec"]["validations"] if words not in v["message"]]
    assert len(without["spec"]["validations"]) == len(policy["spec"]["validations"]) - 1
    return without, binding


# -- DRA: no device class is mapped to a quota (the example), so every claim is refused.


@pytest.mark.parametrize("kind", [*KINDS, "TFJob"])
def test_a_workload_may_not_claim_dra_devices_while_no_class_is_mapped(objects, kind):
    twin = workload(kind, TEAM, queue=TEAM)
    claiming = with_claim(twin)
    if kind in ("Pod", "Job"):  # Kubernetes' own kinds: valid objects (claims by template: 1.31 and later)
        assert kubernetes_errors(claiming, "1.34.0") == []
    assert refused_by(run(objects, claiming), DRA_WORKLOAD)
    assert run(objects, twin).allowed  # its twin without the claim
    without, binding = without_rule(objects, DRA_WORKLOAD)
    assert decide(without, binding, claiming, user=MEMBER).allowed  # the rule removed


def test_the_reviews_repro_a_job_with_a_resource_claim_is_refused_and_so_are_its_pods(objects):
    job = with_claim(workload("Job", TEAM, queue=TEAM), template=None, claim="a100")
    assert kubernetes_errors(job, "1.34.0") == []
    assert refused_by(run(objects, job), DRA_WORKLOAD)
    pod = with_claim(workload("Pod", TEAM, held=False, owner="Job"))
    assert refused_by(run(objects, pod, user=JOB_CONTROLLER), DRA_WORKLOAD)
    # A workload that claimed before the policy may still be started and relabelled.
    assert run(objects, released(job), old=job, user=KUEUE).allowed


@pytest.mark.parametrize("kind", ["ResourceClaim", "ResourceClaimTemplate"])
def test_a_team_namespace_may_not_hold_claims_while_no_class_is_mapped(objects, kind):
    claim = claim_object(kind, TEAM, exactly("gpu.nvidia.com"))
    assert kubernetes_errors(claim, "1.34.0") == []
    for user in (MEMBER, ARGO_CD, "system:serviceaccount:kube-system:resource-claim-controller"):
        assert refused_by(run(objects, claim, user=user), DRA_OBJECTS)
    # Its twin: one made before the policy may still change (its metadata; a claim's spec is immutable).
    assert run(objects, annotated(claim, note="x"), old=claim).allowed
    without, binding = without_rule(objects, DRA_OBJECTS)
    assert decide(without, binding, claim, user=MEMBER).allowed


# -- DRA with a device class mapped to the GPU quota.

MAPPED = "gpu.nvidia.com"


@pytest.fixture(scope="module")
def mapped() -> list[dict[str, Any]]:
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["kueue"]["device_classes"] = {MAPPED: "nvidia.com/gpu"}
    return config_objects(parse_config(raw))


#: (case, a claim object a team creates, the Kubernetes release whose schema it is valid for).
ALLOWED_CLAIMS = [
    ("a template of the mapped class", claim_object("ResourceClaimTemplate", TEAM, exactly(MAPPED, count=2)), "1.34.0"),
    ("a template of the mapped class by count", claim_object("ResourceClaimTemplate", TEAM, exactly(
        MAPPED, allocationMode="ExactCount", count=1)), "1.34.0"),
    ("a claim made from such a template", claim_object("ResourceClaim", TEAM, exactly(MAPPED)), "1.34.0"),
    ("a template of the older flat shape", claim_object("ResourceClaimTemplate", TEAM, {
        "name": "gpu", "deviceClassName": MAPPED}, api="v1beta1"), "1.32.0"),
]
REFUSED_CLAIMS = [
    ("a template of another class", claim_object("ResourceClaimTemplate", TEAM, exactly("gpu.example.com")), "1.34.0"),
    ("a template of the mapped class and another", claim_object(
        "ResourceClaimTemplate", TEAM, exactly(MAPPED), {**exactly("fpga.example.com"), "name": "fpga"}), "1.34.0"),
    ("every device of the class", claim_object("ResourceClaimTemplate", TEAM, exactly(MAPPED, allocationMode="All")),
     "1.34.0"),
    ("admin access to devices in use", claim_object("ResourceClaim", TEAM, exactly(MAPPED, adminAccess=True)), "1.34.0"),
    ("a first available of the mapped class", claim_object("ResourceClaimTemplate", TEAM, {
        "name": "gpu", "firstAvailable": [{"name": "a", "deviceClassName": MAPPED}]}), "1.34.0"),
    ("the older flat shape of another class", claim_object("ResourceClaim", TEAM, {
        "name": "gpu", "deviceClassName": "gpu.example.com"}, api="v1beta1"), "1.32.0"),
]


@pytest.mark.parametrize("what, claim, release", ALLOWED_CLAIMS, ids=[c[0] for c in ALLOWED_CLAIMS])
def test_a_claim_of_a_mapped_class_is_allowed(mapped, what, claim, release):
    assert kubernetes_errors(claim, release) == []
    assert run(mapped, claim).allowed


@pytest.mark.parametrize("what, claim, release", REFUSED_CLAIMS, ids=[c[0] for c in REFUSED_CLAIMS])
def test_a_claim_kueue_would_not_count_is_refused(mapped, what, claim, release):
    assert kubernetes_errors(claim, release) == []
    decision = run(mapped, claim)
    assert refused_by(decision, DRA_CLASSES) and any(f"({MAPPED})" in m for m in decision.refused)
    without, binding = without_rule(mapped, DRA_CLASSES)
    assert decide(without, binding, claim, user=MEMBER).allowed


@pytest.mark.parametrize("kind", [*KINDS, "TFJob"])
def test_a_workload_claims_through_a_template_once_a_class_is_mapped(mapped, kind):
    through_template = with_claim(workload(kind, TEAM, queue=TEAM))
    assert run(mapped, through_template).allowed
    named = with_claim(workload(kind, TEAM, queue=TEAM), template=None, claim="a100")
    if kind in ("Pod", "Job"):
        assert kubernetes_errors(named, "1.34.0") == []
    assert refused_by(run(mapped, named), DRA_TEMPLATES_ONLY)
    without, binding = without_rule(mapped, DRA_TEMPLATES_ONLY)
    assert decide(without, binding, named, user=MEMBER).allowed


def test_the_parts_of_a_claiming_workload_pass_once_a_class_is_mapped(mapped):
    # The job controller's Pod of the Job, and the claim the resource claim controller makes from the template.
    assert run(mapped, with_claim(workload("Pod", TEAM, held=False, owner="Job")), user=JOB_CONTROLLER).allowed
    claim = claim_object("ResourceClaim", TEAM, exactly(MAPPED))
    assert run(mapped, claim, user="system:serviceaccount:kube-system:resource-claim-controller").allowed
    # A Pod still needs the queue to claim: Kueue counts the template's devices of what it admits.
    assert refused_by(run(mapped, with_claim(workload("Pod", TEAM, gpus=0, held=False))), NEEDS_QUEUE)


def test_every_rule_of_the_mapped_policy_is_exercised(mapped):
    policy, _ = policy_of(mapped, TEAM)
    hit: set[str] = set()
    for _, claim, _ in REFUSED_CLAIMS:
        hit.update(run(mapped, claim).refused)
    hit.update(run(mapped, with_claim(workload("Job", TEAM, queue=TEAM), template=None, claim="a")).refused)
    dra = {v["message"] for v in policy["spec"]["validations"] if "DRA" in v["message"]}
    assert len(dra) == 2 and dra <= hit


def test_a_pod_with_a_dra_claim_counts_as_asking_for_accelerators(objects):
    pod = workload("Pod", TEAM, gpus=0, held=False)
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "a100"}]
    assert refused_by(run(objects, pod), NEEDS_QUEUE)


# -- what controllers create for a workload Kueue admitted, and a member passing for one.

#: (case, the part an operator makes, its operator's identity): each of the operators the section names.
INHERITED = [
    ("the Job controller's Pods of a Job", workload("Pod", TEAM, held=False, owner="Job"), JOB_CONTROLLER),
    ("KubeRay's Pods of a RayCluster", workload("Pod", TEAM, held=False, owner="RayCluster"), KUBERAY),
    ("KubeRay's RayCluster of a RayJob", workload("RayCluster", TEAM, held=False, owner="RayJob"), KUBERAY),
    ("KubeRay's submitter Job of a RayJob", workload("Job", TEAM, held=False, owner="RayJob"), KUBERAY),
    ("the JobSet controller's Jobs", workload("Job", TEAM, held=False, owner="JobSet"), JOBSET),
    ("the training operator's Pods of a PyTorchJob", workload("Pod", TEAM, held=False, owner="PyTorchJob"),
     TRAINING_OPERATOR),
    ("the training operator's Pods of a TFJob", workload("Pod", TEAM, held=False, owner="TFJob"), TRAINING_OPERATOR),
]
#: Every controller identity of the example (the section's defaults).
OPERATORS = (JOB_CONTROLLER, KUBERAY, JOBSET, TRAINING_OPERATOR, KUEUE)
#: Identities outside the team's namespace that are no controller of the section.
NOT_CONTROLLERS = (ARGO_CD, CI_RUNNER, OTHER_TEAM, "system:serviceaccount:kube-system:replicaset-controller",
                   "system:anonymous", "system:node:ip-10-0-0-1.ec2.internal", "system:kube-scheduler")


@pytest.mark.parametrize("what, obj, user", INHERITED, ids=[c[0] for c in INHERITED])
def test_a_controller_may_create_the_parts_of_an_admitted_workload(objects, what, obj, user):
    if obj["kind"] in ("Pod", "Job"):  # Kubernetes' own kinds: valid for 1.30
        assert kubernetes_errors(obj) == []
    assert run(objects, obj, user=user).allowed


@pytest.mark.parametrize("what, obj, user", INHERITED, ids=[c[0] for c in INHERITED])
def test_a_member_cannot_pass_for_a_controller_by_an_owner_reference(objects, what, obj, user):
    assert refused_by(run(objects, obj, user=MEMBER), NEEDS_QUEUE)
    # The team may impersonate its namespace's service accounts: they are the team, not a controller.
    assert refused_by(run(objects, obj, user=own_account(TEAM)), NEEDS_QUEUE)


@pytest.mark.parametrize("what, obj, user", INHERITED, ids=[c[0] for c in INHERITED])
@pytest.mark.parametrize("other", [*NOT_CONTROLLERS, *OPERATORS])
def test_only_the_operator_of_the_owners_kind_gets_the_pass(objects, what, obj, user, other):
    # Argo CD, a CI runner, another team's service account, Kueue, or the operator of another kind:
    # each is the team here, whatever owner reference it writes.
    if other != user:
        assert refused_by(run(objects, obj, user=other), NEEDS_QUEUE)


def test_the_controller_manager_counts_as_the_job_controller_only(objects):
    # A cluster whose controller manager runs without a service account per controller.
    manager = "system:kube-controller-manager"
    assert run(objects, workload("Pod", TEAM, held=False, owner="Job"), user=manager).allowed
    assert refused_by(run(objects, workload("Pod", TEAM, held=False, owner="RayCluster"), user=manager), NEEDS_QUEUE)


#: The review's repro: a GPU Pod with no queue label, no scheduling gate and the GPU nodes' toleration,
#: carrying an owner reference to a Job, created by an identity outside the team's namespace.
FORGED = workload("Pod", TEAM, held=False, owner="Job", tolerations=[
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])


@pytest.mark.parametrize("user", [ARGO_CD, CI_RUNNER, OTHER_TEAM])
def test_an_agent_outside_the_allow_list_is_a_team_member(objects, user):
    assert kubernetes_errors(FORGED) == []
    assert refused_by(run(objects, FORGED, user=user), NEEDS_QUEUE)
    # Its allowed twin: the job controller's Pod of the same Job.
    assert run(objects, FORGED, user=JOB_CONTROLLER).allowed
    # The allow-list removed (any service account outside the namespace passing for the operator of
    # the owner it names): nothing else would stop the forged Pod.
    policy, binding = policy_of(objects, TEAM)
    without = copy.deepcopy(policy)
    (operator,) = [v for v in without["spec"]["variables"] if v["name"] == "operator"]
    operator["expression"] = (f"request.userInfo.username.startsWith('system:serviceaccount:')"
                              f" && !request.userInfo.username.startsWith('system:serviceaccount:{TEAM}:')"
                              f" && has(object.metadata.ownerReferences)")
    assert decide(without, binding, FORGED, user=user).allowed
    # It may not start what Kueue holds either: remove a Pod's gate, unsuspend a Job or a JobSet.
    for kind in ("Pod", "Job", "JobSet", "PyTorchJob"):
        held = workload(kind, TEAM, queue=TEAM)
        assert refused_by(run(objects, released(held), old=held, user=user), ONLY_KUEUE), kind
        assert run(objects, released(held), old=held, user=KUEUE).allowed
    # Nor resize a running workload, remove its queue label, or give a running Pod the GPU toleration.
    running = released(workload("Job", TEAM, queue=TEAM))
    assert refused_by(run(objects, resized(running), old=running, user=user), RUNNING_SIZE)
    assert refused_by(run(objects, relabelled(running, queue=None), old=running, user=user), LABEL_STAYS)
    plain = workload("Pod", TEAM, gpus=0, held=False)
    tolerating = with_spec(plain, tolerations=[{"operator": "Exists"}])
    assert refused_by(run(objects, tolerating, old=plain, user=user), TOLERATION_ADDED)


def test_an_agent_creates_workloads_with_the_queue_label_as_a_member_does(objects):
    # How Argo CD and CI runners deploy safely: Jobs (JobSets...) with the team's queue, held by Kueue.
    for kind in KINDS:
        assert run(objects, workload(kind, TEAM, queue=TEAM), user=ARGO_CD).allowed, kind


def test_an_operator_releases_only_the_parts_of_its_own_kinds(objects):
    # The JobSet controller starts a JobSet's Jobs once Kueue admitted the JobSet; not a bare Job.
    child = workload("Job", TEAM, owner="JobSet")
    assert run(objects, released(child), old=child, user=JOBSET).allowed
    assert refused_by(run(objects, released(child), old=child, user=KUBERAY), ONLY_KUEUE)
    bare = workload("Job", TEAM, queue=TEAM)
    assert refused_by(run(objects, released(bare), old=bare, user=JOBSET), ONLY_KUEUE)
    assert refused_by(run(objects, released(bare), old=bare, user=JOB_CONTROLLER), ONLY_KUEUE)


def _with_controllers(**controllers: list[str]) -> list[dict]:
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["kueue"]["controllers"] = controllers
    return config_objects(parse_config(raw))


def test_the_allow_list_is_the_sections():
    # KubeRay installed by its Helm chart in the default namespace: name that account instead.
    helm = "system:serviceaccount:default:kuberay-operator"
    objects = _with_controllers(kuberay=[helm], training_operator=[])
    pods = workload("Pod", TEAM, held=False, owner="RayCluster")
    assert run(objects, pods, user=helm).allowed
    assert refused_by(run(objects, pods, user=KUBERAY), NEEDS_QUEUE)
    # An operator the section leaves empty has no pass; the others keep their defaults.
    assert refused_by(run(objects, workload("Pod", TEAM, held=False, owner="PyTorchJob"), user=TRAINING_OPERATOR),
                      NEEDS_QUEUE)
    assert run(objects, workload("Pod", TEAM, held=False, owner="Job"), user=JOB_CONTROLLER).allowed
    # Kueue's own identity, moved: only it releases.
    moved = "system:serviceaccount:queueing:kueue-controller-manager"
    objects = _with_controllers(kueue=[moved])
    held = workload("Job", TEAM, queue=TEAM)
    assert run(objects, released(held), old=held, user=moved).allowed
    assert refused_by(run(objects, released(held), old=held, user=KUEUE), ONLY_KUEUE)


@pytest.mark.parametrize("owner", ["ReplicaSet", "CronJob"])
def test_a_controller_of_a_kind_kueue_does_not_hold_gets_no_pass(objects, owner):
    # A Deployment's Pods, a CronJob's Jobs: the workload above them was not held, so they must be.
    kind = "Pod" if owner == "ReplicaSet" else "Job"
    user = "system:serviceaccount:kube-system:replicaset-controller"
    assert refused_by(run(objects, workload(kind, TEAM, held=False, owner=owner), user=user), NEEDS_QUEUE)
    assert run(objects, workload(kind, TEAM, queue=TEAM, owner=owner), user=user).allowed


# -- updates: only Kueue starts a workload; the labels stay.


@pytest.mark.parametrize("kind", KINDS)
def test_only_kueue_releases_a_held_workload(objects, kind):
    held = workload(kind, TEAM, queue=TEAM)
    assert refused_by(run(objects, released(held), old=held), ONLY_KUEUE)
    assert refused_by(run(objects, released(held), old=held, user=own_account(TEAM)), ONLY_KUEUE)
    assert run(objects, released(held), old=held, user=KUEUE).allowed
    # Suspending again, by anyone, is fine.
    assert run(objects, held, old=released(held)).allowed


@pytest.mark.parametrize("kind", KINDS)
def test_a_member_cannot_move_or_unlabel_a_workload(objects, kind):
    held = workload(kind, TEAM, queue=TEAM)
    assert refused_by(run(objects, relabelled(held, queue=OTHER), old=held), OWN_QUEUE)
    assert refused_by(run(objects, relabelled(held, queue=None), old=held), LABEL_STAYS)
    assert refused_by(run(objects, relabelled(held, priority_class="inference"), old=held), CLASS_CAP)
    assert run(objects, relabelled(held, priority_class="experimentation"), old=held).allowed


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "Pod"])
def test_a_running_workload_keeps_the_size_kueue_admitted(objects, kind):
    running = released(workload(kind, TEAM, queue=TEAM, gpus=1))
    assert refused_by(run(objects, resized(running), old=running), RUNNING_SIZE)
    assert refused_by(run(objects, resized(running), old=running, user=own_account(TEAM)), RUNNING_SIZE)
    # Suspended again in the same change, Kueue admits the new size (or not) before it runs.
    suspended = workload(kind, TEAM, queue=TEAM, gpus=8)
    assert run(objects, suspended, old=running).allowed
    assert run(objects, resized(workload(kind, TEAM, queue=TEAM, gpus=1)), old=workload(kind, TEAM, queue=TEAM)).allowed
    assert run(objects, resized(running), old=running, user=KUEUE).allowed
    annotated = copy.deepcopy(running)
    annotated["metadata"]["annotations"] = {"note": "metadata may change"}
    assert run(objects, annotated, old=running).allowed


def test_a_running_jobs_parallelism_is_fixed_too(objects):
    running = released(workload("Job", TEAM, queue=TEAM))
    wider = copy.deepcopy(running)
    wider["spec"]["parallelism"] = 100
    assert refused_by(run(objects, wider, old=running), RUNNING_SIZE)


def test_an_update_keeps_what_was_admitted_before_a_change_of_config(objects):
    # A workload labelled before the cap was lowered: Kueue may still update it (labels unchanged).
    old = workload("Job", TEAM, queue=TEAM, priority_class="inference")
    assert run(objects, released(old), old=old, user=KUEUE).allowed
    assert run(objects, relabelled(old, queue=TEAM), old=old).allowed


# -- scope.


def test_a_policy_binds_only_its_own_namespace_and_the_managed_kinds(objects):
    assert not run(objects, workload("Job", OTHER)).matched  # research's policy; applied's namespace
    assert refused_by(run(objects, workload("Job", OTHER), team=OTHER), NEEDS_QUEUE)
    assert run(objects, workload("Job", OTHER, queue=OTHER), team=OTHER).allowed
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": TEAM}}
    assert not run(objects, deployment).matched  # its Pods are checked one by one


def test_every_rule_of_the_policy_is_exercised_by_the_tables(objects):
    policy, _ = policy_of(objects, TEAM)
    hit: set[str] = set()
    cases = [(obj, MEMBER, None) for _, obj, _ in REFUSED_CREATES]
    held = workload("Job", TEAM, queue=TEAM)
    cases += [(released(held), MEMBER, held), (relabelled(held, queue=None), MEMBER, held),
              (resized(released(held)), MEMBER, released(held))]
    part = released(workload("Job", TEAM, owner="JobSet"))
    orphan = copy.deepcopy(part)
    del orphan["metadata"]["ownerReferences"]
    cases += [(_grown(part), MEMBER, part), (orphan, MEMBER, part)]
    for obj, user, old in cases:
        hit.update(run(objects, obj, user=user, old=old).refused)
    for _, obj, old, subresource, _ in ROUTES:
        hit.update(run(objects, obj, old=old, subresource=subresource).refused)
    assert {v["message"] for v in policy["spec"]["validations"]} == hit


# -- ways to a GPU node, or to its GPUs, around the scheduler and the device plugin.

#: A Pod the team may run without the queue: it asks for no GPU and does not tolerate the GPU nodes.
PLAIN = workload("Pod", TEAM, gpus=0, held=False)
#: A Pod Kueue admitted (on the team's queue, released), running on a node the scheduler bound it to.
RUNNING = with_spec(released(workload("Pod", TEAM, queue=TEAM, gpus=1)), nodeName="ip-10-0-0-1.ec2.internal")
GPU_NODE = "ip-10-0-0-9.ec2.internal"
TOLERATE_ALL = [{"operator": "Exists"}]
#: A running queued Pod with a sidecar (an init container restarted always) holding a GPU.
SIDECAR = with_container(RUNNING, "initContainers", restartPolicy="Always", resources={"limits": {"nvidia.com/gpu": 1}})


def resized_in_place(pod: dict, where: str = "containers") -> dict:
    """``pod`` with the last container of ``where`` given more CPU and memory (what pods/resize changes)."""
    out = copy.deepcopy(pod)
    container = out["spec"][where][-1]
    container["resources"] = {"requests": {"cpu": "96", "memory": "1000Gi"},
                              "limits": {**container["resources"].get("limits", {}), "cpu": "96", "memory": "1000Gi"}}
    return out


TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
REFUSED_PATHS = ("/dev", "/dev/", "/dev/nvidia0", "/dev/null", "/", "/run", "/var", "/var/run", "/run/containerd",
                 "/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock", "/run/crio/crio.sock",
                 "/var/run/docker.sock", "/run/cri-dockerd.sock", "//dev", "/./dev/nvidia0", "/var/./run",
                 # The node's processes, and through /proc/PID/root its whole filesystem.
                 "/proc", "/proc/", "/proc/1/root", "/proc/1/root/dev/nvidia0", "/proc/self/root/run/containerd",
                 "//proc", "/proc/../proc", "/opt/../proc/1/root", "/var/../dev", "/proc/1/..",
                 # The kubelet's folder: the device plugins' sockets, every Pod's volumes; and its parents.
                 "/var/lib", "/var/lib/", "/var/lib/kubelet", "/var/lib/kubelet/", "/var/lib/kubelet/device-plugins",
                 "/var/lib/kubelet/device-plugins/kubelet.sock", "/var/lib/kubelet/pods", "//var/lib/kubelet",
                 "/var/lib/./kubelet",
                 # Any other folder: the node follows a symbolic link the team wrote there (through shared
                 # storage, or its image's layers in the runtime's folder) to /dev/null, /dev or /proc.
                 "/mnt/fsx/team/link-to-dev-null", "/opt/dlami/nvme", "/var/lib/containerd", "/sys/fs/cgroup",
                 "/var/log", "/devices",
                 # A relative path, which the node resolves from its own working folder (/).
                 "dev/null", "proc/1/root")
#: Volumes that stay within the Pod: its allowed twins.
ALLOWED_VOLUMES = (("an emptyDir", {"emptyDir": {}}), ("a PersistentVolumeClaim", {"persistentVolumeClaim": {
    "claimName": "data"}}), ("a ConfigMap", {"configMap": {"name": "settings"}}))
#: Capabilities that reach the node around the container, in the spellings the runtime takes.
ESCAPING_CAPABILITIES = ("SYS_ADMIN", "CAP_SYS_ADMIN", "sys_admin", "ALL", "SYS_MODULE", "DAC_READ_SEARCH",
                         "cap_sys_rawio", "BPF")

#: (case, the Pod, the Pod before when an UPDATE, the subresource, the words of the one rule refusing it).
ROUTES = [
    ("nodeName on a Pod outside the queue", with_spec(PLAIN, nodeName=GPU_NODE), None, "", NODE_NAME),
    ("a toleration of every taint added on update", with_spec(PLAIN, tolerations=TOLERATE_ALL), PLAIN, "",
     TOLERATION_ADDED),
    ("the GPU nodes' toleration added on update", with_spec(PLAIN, tolerations=TOLERATE_GPU), PLAIN, "",
     TOLERATION_ADDED),
    ("the GPU nodes' toleration added to a running queued Pod", with_spec(RUNNING, tolerations=TOLERATE_ALL), RUNNING,
     "", TOLERATION_ADDED),
    ("hostPID", with_spec(PLAIN, hostPID=True), None, "", HOST_PID),
    ("hostNetwork", with_spec(PLAIN, hostNetwork=True), None, "", HOST_NETWORK),
    *[(f"capability {cap}", with_container(PLAIN, securityContext={"capabilities": {"add": [cap]}}), None, "", SYS_ADMIN)
      for cap in ESCAPING_CAPABILITIES],
    ("capability SYS_ADMIN in an init container",
     with_container(PLAIN, "initContainers", securityContext={"capabilities": {"add": ["SYS_ADMIN"]}}), None, "",
     SYS_ADMIN),
    *[(f"hostPath {path}", with_spec(PLAIN, volumes=hostpath(path)), None, "", HOST_PATH) for path in REFUSED_PATHS],
    ("runtimeClassName nvidia (none allowed)", with_spec(PLAIN, runtimeClassName="nvidia"), None, "", RUNTIME_CLASS),
    ("a CDI annotation", annotated(PLAIN, **{"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}), None, "", CDI),
    ("a CDI annotation added on update", annotated(RUNNING, **{"cdi.k8s.io/x": "nvidia.com/gpu=0"}), RUNNING, "", CDI),
    ("a privileged ephemeral container", with_container(RUNNING, "ephemeralContainers",
                                                        securityContext={"privileged": True}),
     RUNNING, "ephemeralcontainers", DEVICES),
    ("an ephemeral container setting NVIDIA_VISIBLE_DEVICES", with_container(
        RUNNING, "ephemeralContainers", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]),
     RUNNING, "ephemeralcontainers", DEVICES),
    ("an ephemeral container adding SYS_ADMIN", with_container(
        RUNNING, "ephemeralContainers", securityContext={"capabilities": {"add": ["SYS_ADMIN"]}}),
     RUNNING, "ephemeralcontainers", SYS_ADMIN),
    ("a running Pod resized in place", resized_in_place(RUNNING), RUNNING, "resize", RESIZE),
    ("a running Pod's sidecar resized in place", resized_in_place(SIDECAR, "initContainers"), SIDECAR, "resize",
     RESIZE),
]


@pytest.mark.parametrize("what, obj, old, subresource, words", ROUTES, ids=[c[0] for c in ROUTES])
def test_a_pod_may_not_reach_a_gpu_node_around_the_queue(objects, what, obj, old, subresource, words):
    assert kubernetes_errors(obj) == []
    decision = run(objects, obj, old=old, subresource=subresource)
    assert refused_by(decision, words), decision.refused
    # The case is refused by that rule alone: without it, the policy would let the Pod through.
    policy, binding = policy_of(objects, TEAM)
    without = copy.deepcopy(policy)
    without["spec"]["validations"] = [v for v in policy["spec"]["validations"] if words not in v["message"]]
    assert len(without["spec"]["validations"]) == len(policy["spec"]["validations"]) - 1
    assert decide(without, binding, obj, user=MEMBER, old=old, subresource=subresource).allowed


ALLOWED_PODS = [
    ("a Pod the scheduler bound (nodeName) relabelled", relabelled(RUNNING, priority_class="training"), RUNNING),
    ("a toleration of another taint added on update", with_spec(PLAIN, tolerations=[
        {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]), PLAIN),
    ("the GPU toleration added to its own held, queued Pod", with_spec(workload("Pod", TEAM, queue=TEAM),
                                                                       tolerations=TOLERATE_GPU),
     workload("Pod", TEAM, queue=TEAM)),
    ("a capability baseline allows", with_container(PLAIN, securityContext={"capabilities": {"add": ["NET_BIND_SERVICE"]}}),
     None),
    *[(f"{what} volume", with_spec(PLAIN, volumes=[{"name": "v", **volume}]), None) for what, volume in ALLOWED_VOLUMES],
    *[(f"capability {cap}", with_container(PLAIN, securityContext={"capabilities": {"add": [cap]}}), None)
      for cap in ("IPC_LOCK", "SYS_PTRACE", "NET_ADMIN")],
    ("another annotation", annotated(PLAIN, **{"example.com/cdi.k8s.io": "x", "note": "cdi.k8s.io/gpu"}), None),
    ("hostPID and hostNetwork false", with_spec(PLAIN, hostPID=False, hostNetwork=False), None),
    ("an ephemeral debugging container", with_container(RUNNING, "ephemeralContainers"), RUNNING),
    # Made before the policy: a later change that adds nothing is not refused for what the Pod had.
    ("a Pod that had hostPID before the policy, relabelled", relabelled(with_spec(RUNNING, hostPID=True),
                                                                         priority_class="training"),
     with_spec(RUNNING, hostPID=True)),
]


@pytest.mark.parametrize("what, obj, old", ALLOWED_PODS, ids=[c[0] for c in ALLOWED_PODS])
def test_a_pod_that_stays_within_the_queue_is_allowed(objects, what, obj, old):
    assert kubernetes_errors(obj) == []
    subresource = "ephemeralcontainers" if "ephemeralContainers" in obj["spec"] else ""
    assert run(objects, obj, old=old, subresource=subresource).allowed


def test_no_controller_may_create_a_pod_with_a_node_name_either(objects):
    # The scheduler binds Pods through pods/binding, and the DaemonSet controller places its Pods
    # by node affinity: nobody needs to create a Pod with nodeName in a team's namespace.
    pod = with_spec(workload("Pod", TEAM, held=False, owner="Job"), nodeName=GPU_NODE)
    assert run(objects, with_spec(pod, nodeName=""), user=JOB_CONTROLLER).allowed
    assert refused_by(run(objects, pod, user=JOB_CONTROLLER), NODE_NAME)
    assert refused_by(run(objects, pod, user="system:kube-controller-manager"), NODE_NAME)


def test_kueue_gives_the_gpu_toleration_when_it_admits_a_pod(objects):
    held = workload("Pod", TEAM, queue=TEAM, gpus=0)
    admitted = with_spec(released(held), tolerations=TOLERATE_GPU)
    assert run(objects, admitted, old=held, user=KUEUE).allowed
    # The same change by a member: it releases the Pod, and gives it the toleration, outside Kueue.
    decision = run(objects, admitted, old=held)
    assert refused_by(decision, ONLY_KUEUE) and refused_by(decision, TOLERATION_ADDED)


def test_an_allowed_runtime_class_passes_and_any_other_is_refused():
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["kueue"]["allowed_runtime_classes"] = ["gvisor"]
    objects = config_objects(parse_config(raw))
    assert run(objects, with_spec(PLAIN, runtimeClassName="gvisor")).allowed
    refused = run(objects, with_spec(PLAIN, runtimeClassName="nvidia"))
    assert refused_by(refused, RUNTIME_CLASS) and any("(gvisor)" in m for m in refused.refused)


def kubernetes_errors(obj: dict, release: str = "1.30.0") -> list[str]:
    """Where a test's Pod (or a Namespace) breaks Kubernetes' schema of its kind (1.30's unless
    ``release`` names a later one, for DRA's APIs): each case is an object the API server takes."""
    try:
        kubernetes_validate.validate(obj, release, strict=True)
    except kubernetes_validate.ValidationError as e:
        return [e.message]
    return []


# -- Pod Security Admission, beneath the policy.


def test_each_team_namespace_enforces_the_baseline_pod_security_standard(objects):
    namespaces = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Namespace"}
    assert sorted(namespaces) == ["applied", "inference", "research"]
    for name, ns in namespaces.items():
        assert kubernetes_errors(ns) == []  # a valid v1 Namespace of Kubernetes 1.30
        labels = ns["metadata"]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == "baseline", name
        assert labels["pod-security.kubernetes.io/warn"] == "restricted", name
        assert labels["gpu-share/team"] == name


@pytest.mark.parametrize("user", [MEMBER, ARGO_CD, KUEUE, JOB_CONTROLLER])
def test_no_one_resizes_a_running_pod_past_what_kueue_admitted(objects, user):
    # In place, through pods/resize (Kubernetes 1.33 and later): Kueue admitted the Pod's requests.
    job_pod = with_spec(released(workload("Pod", TEAM, held=False, owner="Job")), nodeName=GPU_NODE)
    for pod in (RUNNING, SIDECAR, job_pod):
        assert kubernetes_errors(resized_in_place(pod)) == []
        assert refused_by(run(objects, resized_in_place(pod), old=pod, user=user, subresource="resize"), RESIZE)
        # Its twin: the same request that keeps the resources (a resize to the same size).
        assert run(objects, pod, old=pod, user=user, subresource="resize").allowed


PART_SPEC = "keeps its spec: suspended and grown"
PART_OWNER = "keeps its owner reference"
GARBAGE_COLLECTOR = "system:serviceaccount:kube-system:generic-garbage-collector"


def _grown(part: dict) -> dict:
    """``part`` suspended and grown: a Job's parallelism, a RayCluster's workers, to 100."""
    out = copy.deepcopy(part)
    out["spec"]["suspend"] = True
    if out["kind"] == "Job":
        out["spec"]["parallelism"] = 100
    else:
        out["spec"]["workerGroupSpecs"][0]["replicas"] = 100
    return out


def _orphaned(part: dict) -> dict:
    out = copy.deepcopy(part)
    del out["metadata"]["ownerReferences"]
    return out


#: (case, a running part an operator made, that operator).
PARTS = [("a JobSet's Job", released(workload("Job", TEAM, owner="JobSet")), JOBSET),
         ("a RayJob's submitter Job", released(workload("Job", TEAM, owner="RayJob")), KUBERAY),
         ("a RayJob's RayCluster", released(workload("RayCluster", TEAM, owner="RayJob")), KUBERAY)]


@pytest.mark.parametrize("what, part, operator", PARTS, ids=[c[0] for c in PARTS])
@pytest.mark.parametrize("user", [MEMBER, ARGO_CD])
def test_a_part_cannot_be_grown_and_given_back_to_its_operator(objects, what, part, operator, user):
    # Suspended and grown by the team, its operator would start it again: past Kueue's admission.
    grown = _grown(part)
    if part["kind"] == "Job":
        assert kubernetes_errors(grown) == []
    assert refused_by(run(objects, grown, old=part, user=user), PART_SPEC)
    assert run(objects, released(grown), old=grown, user=operator).allowed  # what the operator would do next
    # Its twins: the operator's own change, and the team's change of metadata only.
    assert run(objects, grown, old=part, user=operator).allowed
    assert run(objects, annotated(part, note="x"), old=part, user=user).allowed
    without, binding = without_rule(objects, PART_SPEC)
    assert decide(without, binding, grown, user=user, old=part).allowed
    # Nor by first removing its owner reference (then the part is no part), grown, and given back.
    orphan = _orphaned(part)
    assert refused_by(run(objects, orphan, old=part, user=user), PART_OWNER)
    assert run(objects, orphan, old=part, user=GARBAGE_COLLECTOR).allowed  # its owner deleted, orphaning it
    without, binding = without_rule(objects, PART_OWNER)
    assert decide(without, binding, orphan, user=user, old=part).allowed


def test_a_jobs_pod_is_not_released_to_run_beside_its_replacement(objects):
    # The team takes a running Pod out of its Job's selector; the job controller would release it
    # (remove its owner reference) and make a replacement, the released Pod running on outside the quota.
    pod = with_spec(released(workload("Pod", TEAM, held=False, owner="Job")), nodeName=GPU_NODE)
    pod["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = "u-1"
    unlabelled = copy.deepcopy(pod)
    del unlabelled["metadata"]["labels"]["batch.kubernetes.io/controller-uid"]
    assert run(objects, unlabelled, old=pod).allowed  # labels are the team's to change
    assert refused_by(run(objects, _orphaned(unlabelled), old=unlabelled, user=JOB_CONTROLLER), PART_OWNER)
    assert run(objects, _orphaned(unlabelled), old=unlabelled, user=GARBAGE_COLLECTOR).allowed
    without, binding = without_rule(objects, PART_OWNER)
    assert decide(without, binding, _orphaned(unlabelled), user=JOB_CONTROLLER, old=unlabelled).allowed
