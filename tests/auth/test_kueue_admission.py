"""Kueue on EKS, end to end from the synthesized example: each team's SubmitRole reaches only its
own namespace (its access entry), and there the admission policy the platform stack applies
decides what the team may submit: its own queue allowed; another team's queue, no queue, a
priority class above its max_priority refused. The policies are read from the template (the
Manifest property of the KubernetesManifest resources), as the cluster receives them, and their
CEL evaluated by a CEL evaluator."""

from __future__ import annotations

import json

import pytest

from tests.auth.resolve import load_app
from tests.backends.kueue.admission_check import decide
from tests.backends.kueue.workloads import KINDS, workload

TEAMS = ("research", "applied", "inference")
#: The example's classes: inference 1000, training 100, experimentation 10; inference's max_priority is 1000.
ABOVE_CAP = {"research": "inference", "applied": "inference"}


@pytest.fixture(scope="module")
def app():
    return load_app("examples/kueue.yaml")


@pytest.fixture(scope="module")
def cluster(app):
    """What the platform stack applies to the cluster: every object of every KubernetesManifest."""
    objects = []
    for stack, _lid, r in app.resources("Custom::AWSCDK-EKS-KubernetesResource"):
        objects += json.loads(app.resolver.resolve(stack, r["Properties"]["Manifest"]))
    return objects


@pytest.fixture(scope="module")
def namespace_of(app):
    """The one namespace each team's SubmitRole may act in, from its access entry."""
    out = {}
    for stack, _lid, r in app.resources("AWS::EKS::AccessEntry"):
        props = app.resolver.resolve(stack, r["Properties"])
        team = stack.rsplit("-team-", 1)[1]
        assert props["PrincipalArn"] == app.role(f"kueue-share-team-{team}", "SubmitRole").arn
        [policy] = props["AccessPolicies"]
        assert policy["PolicyArn"].endswith(":cluster-access-policy/AmazonEKSEditPolicy")
        assert policy["AccessScope"]["Type"] == "namespace"
        [out[team]] = policy["AccessScope"]["Namespaces"]
    return out


def _submit(cluster, app, team: str, namespace: str, obj: dict):
    """``team``'s member submitting ``obj``: every policy bound to ``namespace`` decides."""
    member = app.role(f"kueue-share-team-{team}", "SubmitRole").arn.replace(":iam::", ":sts::").replace(
        ":role/", ":assumed-role/") + "/member"
    policies = {o["metadata"]["name"]: o for o in cluster if o["kind"] == "ValidatingAdmissionPolicy"}
    decisions = []
    for binding in (o for o in cluster if o["kind"] == "ValidatingAdmissionPolicyBinding"):
        decision = decide(policies[binding["spec"]["policyName"]], binding, obj, user=member)
        if decision.matched:
            decisions.append(decision)
    assert len(decisions) == 1, f"{namespace}: {len(decisions)} policies bound"
    assert decisions[0].errors == []
    return decisions[0]


def test_each_team_acts_in_its_own_namespace_only(namespace_of):
    assert namespace_of == {t: t for t in TEAMS}


@pytest.mark.parametrize("team", TEAMS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_team_submits_on_its_own_queue_and_nowhere_else(app, cluster, namespace_of, team, kind):
    ns = namespace_of[team]
    other = next(t for t in TEAMS if t != team)
    assert _submit(cluster, app, team, ns, workload(kind, ns, queue=team)).allowed
    assert _submit(cluster, app, team, ns, workload(kind, ns, queue=team, priority_class="training")).allowed
    assert not _submit(cluster, app, team, ns, workload(kind, ns, queue=other)).allowed
    assert not _submit(cluster, app, team, ns, workload(kind, ns)).allowed
    if team in ABOVE_CAP:
        assert not _submit(cluster, app, team, ns, workload(kind, ns, queue=team,
                                                             priority_class=ABOVE_CAP[team])).allowed
    else:  # inference's max_priority 1000 admits the inference class
        assert _submit(cluster, app, team, ns, workload(kind, ns, queue=team, priority_class="inference")).allowed


def test_the_stack_labels_each_team_namespace_for_pod_security(cluster):
    """What the cluster receives: each team's namespace enforces the baseline Pod Security Standard
    and warns of the restricted one, beneath the admission policy."""
    namespaces = {o["metadata"]["name"]: o["metadata"]["labels"] for o in cluster if o["kind"] == "Namespace"}
    assert set(namespaces) == set(TEAMS)
    for labels in namespaces.values():
        assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
        assert labels["pod-security.kubernetes.io/warn"] == "restricted"
