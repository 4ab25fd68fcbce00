"""The construct of the Kueue backend (``kueue``).

:class:`KueueQueues` applies the objects of
:func:`cdk_gpu_share.backends.kueue.manifests.kueue_objects` (the same ones
``gpu-share kueue manifests`` writes) to an existing EKS cluster that runs Kueue, with
``aws_eks.KubernetesManifest`` through the cluster's kubectl role, and gives each team's
SubmitRole an EKS access entry scoped to the team's namespace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import aws_cdk as cdk
from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_gpu_share.backends.kueue import KEY, KueueConfig, parse, to_mapping
from cdk_gpu_share.backends.kueue.manifests import KIND_ORDER, kueue_objects
from cdk_gpu_share.constructs._checks import acknowledge_nag, raise_props_problems
from cdk_gpu_share.constructs._iam import add_statements, format_arn, stack_env
from cdk_gpu_share.constructs._platform_part import TeamStackLike
from cdk_gpu_share.core.configuration.parse import GroupConfig, PlatformConfig, TeamConfig, check_backend
from cdk_gpu_share.core.configuration.windows import Window
from cdk_gpu_share.core.errors import Problem
from cdk_gpu_share.core.validation import Problems

#: The AWS managed policies aws-cdk-lib's kubectl provider attaches to its functions, as cdk-nag names them.
_KUBECTL_MANAGED_POLICIES = (
    "arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
    "arn:<AWS::Partition>:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
    '{"Fn::If":["HandlerHasEcrPublic195AF58A",{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},'
    '":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},{"Ref":"AWS::NoValue"}]}',
)
#: The label of a team's namespace (the quota window switcher's has none).
TEAM_LABEL = "gpu-share/team"
#: The EKS access policy a team's SubmitRole gets on its own namespace.
TEAM_ACCESS_POLICY = "AmazonEKSEditPolicy"


def _problems(config: Any, teams: Sequence[TeamConfig], role: str | None,
              groups: Sequence[GroupConfig]) -> list[Problem]:
    if not isinstance(config, KueueConfig):
        return [Problem("config", config, "must be a KueueConfig", "pass config=KueueConfig(...) or the kueue section"
                        " of load_config(path)")]
    # The section's own fields by the config file's parser, then the rules across teams and section.
    section = Problems()
    parse(to_mapping(config), section)
    if section.items:
        return section.items
    problems = check_backend(KEY, config, list(teams), groups)  # type: ignore[arg-type]
    if role is None:
        problems.append(Problem(f"{KEY}.kubectl_role_arn", None, "is required to apply the objects to the cluster",
                                "add kueue.kubectl_role_arn: arn:aws:iam::ACCOUNT:role/NAME, a role with cluster-admin"
                                " access to the cluster, or write the objects with `gpu-share kueue manifests`"))
    return problems


class KueueQueues(Construct):
    """Kueue's queues for the teams on an existing EKS cluster: ResourceFlavors, a Cohort, one
    ClusterQueue and LocalQueue per team in its own namespace, and the WorkloadPriorityClasses.

    Kueue must be installed on the cluster (its CRDs served at ``kueue.x-k8s.io/v1beta2``), and
    the cluster must run Kubernetes 1.30 or later: each team's namespace gets a
    ValidatingAdmissionPolicy (``admissionregistration.k8s.io/v1``) holding it to its queue.
    The objects are applied kind by kind, namespaces first, one ``KubernetesManifest`` each
    (one per namespace). A team's namespace is created, or adopted if the config lists it in
    ``adopt_namespaces``, and kept when the team is removed or the stack destroyed (the
    ``KeptNamespaces`` output names them).

    With ``windows``, the quota window switcher
    (:mod:`cdk_gpu_share.backends.kueue.quota_windows`): a CronJob per boundary in the window's
    time zone, a Job after each deploy that changes the quotas (applying the ClusterQueues
    writes the base values back), its ServiceAccount allowed to get and patch the platform's
    ClusterQueues and Cohort by name only, and its admission policy.
    """

    def __init__(self, scope: Construct, id: str, *, config: KueueConfig, teams: Sequence[TeamConfig] = (),
                 kubectl_role_arn: str | None = None, groups: Sequence[GroupConfig] = (),
                 windows: Sequence[Window] = ()) -> None:
        """
        :param config: the cluster, its capacity per instance type, the cohort, preemption, priority classes.
        :param teams: the teams; those whose guarantee names an instance type of ``config.capacity`` get queues.
        :param groups: the organisation's tree above the teams: a Cohort per group. Default: none.
        :param kubectl_role_arn: the role the kubectl provider assumes. Default: ``config.kubectl_role_arn``.
        :param windows: the platform's time windows (``PlatformConfig.windows``), in which the teams'
            own ``windows`` values apply: the quota window switcher's CronJobs. Default: none.
        """
        role = kubectl_role_arn or getattr(config, "kubectl_role_arn", None)
        raise_props_problems(_problems(config, teams, role, groups), scope, id)
        super().__init__(scope, id)
        self.config = config
        self.teams = [t for t in teams if t.guarantee_for(config.capacity)]
        self.cluster = eks.Cluster.from_cluster_attributes(self, "Cluster", cluster_name=config.eks_cluster_name,
                                                           kubectl_role_arn=role)
        self.groups = tuple(groups)
        self.windows = tuple(windows)
        self.objects = kueue_objects(config, self.teams, self.groups, self.windows)
        namespaces = [o for o in self.objects if o["kind"] == "Namespace"]
        self.namespaces = self._namespaces([o for o in namespaces if TEAM_LABEL in o["metadata"]["labels"]])
        previous: list[Construct] = list(self.namespaces.values())
        # The quota window switcher's namespace is the platform's own: applied (adopted if it
        # exists) and removed with the stack.
        previous += [eks.KubernetesManifest(self, f"Namespace-{o['metadata']['name']}", cluster=self.cluster,
                                            manifest=[o], overwrite=True)
                     for o in namespaces if TEAM_LABEL not in o["metadata"]["labels"]]
        self.manifests: dict[str, eks.KubernetesManifest] = {}
        for kind in KIND_ORDER:
            objects = [o for o in self.objects if o["kind"] == kind]
            if kind == "Namespace" or not objects:
                continue
            manifest = eks.KubernetesManifest(self, kind, cluster=self.cluster, manifest=objects)
            for p in previous:
                manifest.node.add_dependency(p)
            self.manifests[kind] = manifest
            previous = [manifest]
        if self.namespaces:
            cdk.CfnOutput(self, "KeptNamespaces", value=", ".join(self.namespaces),
                          description="Kubernetes namespaces of the Kueue teams that cdk destroy and removing a team"
                                      " keep, with what runs in them (kubectl delete namespace NAME to remove one)")
        self._acknowledge_kubectl_provider()

    def _namespaces(self, objects: list[dict[str, Any]]) -> dict[str, eks.KubernetesManifest]:
        """One manifest per team namespace, never deleted, adopted only when the config says so.

        A namespace is created (``kubectl create``): one that exists fails the deployment, so a
        team never gets edit rights in a namespace someone else made (an operator's, say). A team
        of ``adopt_namespaces`` has its namespace applied (``overwrite``): an existing one is
        adopted. No pruning, and the custom resource is retained, so neither removing a team nor
        ``cdk destroy`` deletes a namespace and everything in it."""
        out = {}
        for obj in objects:
            name = obj["metadata"]["name"]
            manifest = eks.KubernetesManifest(self, f"Namespace-{name}", cluster=self.cluster, manifest=[obj],
                                              overwrite=name in self.config.adopt_namespaces, prune=False)
            cast(cdk.CustomResource, manifest.node.default_child).apply_removal_policy(cdk.RemovalPolicy.RETAIN)
            out[name] = manifest
        return out

    def _acknowledge_kubectl_provider(self) -> None:
        """The kubectl provider CDK adds for the imported cluster (a nested stack of Lambda functions)."""
        stack = cdk.Stack.of(self)
        for child in stack.node.children:
            if not child.node.id.endswith("KubectlProvider"):
                continue
            acknowledge_nag(child, "AwsSolutions-IAM4",
                            "the kubectl provider's Lambda functions, made by aws-cdk-lib's EKS module, use the AWS"
                            " managed execution and image-pull policies it attaches; they are not configurable",
                            findings=[f"Policy::{p}" for p in _KUBECTL_MANAGED_POLICIES])
            acknowledge_nag(child, "AwsSolutions-IAM5",
                            "aws-cdk-lib's provider framework invokes the kubectl handler by ARN with any version"
                            " qualifier (:*), as the EKS module generates it",
                            findings=["Resource::<Handler886CB40B.Arn>:*"])
            acknowledge_nag(child, "AwsSolutions-L1",
                            "the kubectl handler's Python runtime is the one aws-cdk-lib's EKS module pins for its"
                            " kubectl layer")

    @classmethod
    def for_platform(cls, scope: Construct, config: PlatformConfig) -> KueueQueues:
        """The queues of ``config``'s ``kueue`` section (construct id ``KueueQueues``)."""
        return cls(scope, "KueueQueues", config=config.backend(KEY), teams=config.teams, groups=config.groups,
                   windows=config.windows)

    def add_team_to(self, team: TeamConfig, stack: TeamStackLike) -> None:
        """Give ``team``'s SubmitRole an EKS access entry with ``AmazonEKSEditPolicy`` scoped to its
        namespace, the right to describe the cluster (for a kubeconfig), and outputs naming its
        namespace and LocalQueue."""
        if team.name not in {t.name for t in self.teams}:
            return
        scope = cast(Construct, stack)
        env = stack_env(cdk.Stack.of(scope))
        eks.CfnAccessEntry(
            scope,
            "KueueAccessEntry",
            cluster_name=self.config.eks_cluster_name,
            principal_arn=stack.submit_role.role_arn,
            type="STANDARD",
            access_policies=[eks.CfnAccessEntry.AccessPolicyProperty(
                policy_arn=f"arn:{env.partition}:eks::aws:cluster-access-policy/{TEAM_ACCESS_POLICY}",
                access_scope=eks.CfnAccessEntry.AccessScopeProperty(type="namespace", namespaces=[team.name]),
            )],
        )
        cluster_arn = format_arn(cdk.Stack.of(scope), service="eks", resource="cluster",
                                 resource_name=self.config.eks_cluster_name)
        add_statements(stack.submit_role, [iam.PolicyStatement(sid="ReadKueueEksCluster", actions=["eks:DescribeCluster"],
                                                               resources=[cluster_arn])])
        stack.output("KueueNamespace", team.name, "Kubernetes namespace of the team on the Kueue cluster")
        stack.output("KueueLocalQueue", team.name, "Kueue LocalQueue to label jobs with (kueue.x-k8s.io/queue-name)")


__all__ = ["TEAM_ACCESS_POLICY", "KueueQueues"]
