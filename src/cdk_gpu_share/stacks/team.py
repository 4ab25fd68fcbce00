"""TeamStack: what one team owns: its submit role, its shares, its outputs."""

from __future__ import annotations

import functools
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_gpu_share.constructs._checks import acknowledge_nag, nag_arn, raise_props_problems
from cdk_gpu_share.constructs._iam import add_statements, format_arn, stack_env
from cdk_gpu_share.core.configuration.objectives import never_stopped_conflict
from cdk_gpu_share.core.configuration.parse import TeamConfig, team_problems

#: Services the SubmitRole may pass the training role to: SageMaker runs the job, and Batch
#: hands it over (SubmitServiceJob carries the role in its payload).
PASSED_TO_SERVICES = ["sagemaker.amazonaws.com", "batch.amazonaws.com"]


def submit_role_principal(team: TeamConfig) -> iam.IPrincipal:
    """Who may assume ``team``'s SubmitRole: the one place that builds its trust policy.

    ``assumed_by`` names exact roles or users (e.g. an IAM Identity Center permission-set
    role, a CI role); otherwise principals of this account whose principal tag
    ``principal_tag`` (default ``gpu-share:team``) is the team's name. Never the whole account.
    That tag is then the team's identity: the tag guard (:mod:`cdk_gpu_share.core.policy.guard`,
    attached as an SCP) lets only ``security.administrators`` set it.
    """
    if team.assumed_by:
        principals = [iam.ArnPrincipal(arn) for arn in team.assumed_by]
        return principals[0] if len(principals) == 1 else iam.CompositePrincipal(*principals)
    return _account_root().with_conditions(
        {"StringEquals": {f"aws:PrincipalTag/{team.principal_tag}": team.name}}
    )


@functools.cache
def _account_root() -> iam.AccountRootPrincipal:
    # One for every team: it names the account of whichever stack it is used in.
    return iam.AccountRootPrincipal()


@functools.cache
def _max_session_duration() -> cdk.Duration:
    return cdk.Duration.hours(4)


#: The synth warning of a team whose work must never be stopped but that borrows.
NEVER_STOPPED_BORROWS = "@cdk-gpu-share/objectives:never-stopped-borrows"


class TeamStack(cdk.Stack):
    """One team's stack.

    Holds the role the team's members (or its CI) assume to submit work, the
    execution role its SageMaker training jobs run as, and the team's quota
    shares and job definitions, which the platform's constructs create here with
    ``add_team(team, scope=team_stack)``. Outputs name the queue and the share,
    which is all a team needs to submit.
    """

    def __init__(self, scope: Construct, id: str, *, team: TeamConfig, **kwargs: Any) -> None:
        """
        :param team: the team.
        :param kwargs: passed to :class:`aws_cdk.Stack` (``env`` stays unset: environment-agnostic).
        """
        raise_props_problems(team_problems(team), scope, id)
        super().__init__(scope, id, description=f"cdk-gpu-share: team {team.name}", **kwargs)
        self.team = team
        cdk.Tags.of(self).add("gpu-share:team", team.name)
        conflict = never_stopped_conflict(team.objectives, team.sharing.value)
        if conflict is not None:
            # Valid, as in `gpu-share validate`, but probably not what was meant: said at synth too.
            cdk.Annotations.of(self).add_warning_v2(NEVER_STOPPED_BORROWS, f"team {team.name}: {conflict}")
        self.submit_role = iam.Role(
            self,
            "SubmitRole",
            description=f"Assumed by members of team {team.name} to submit GPU jobs into its share",
            assumed_by=submit_role_principal(team),
            max_session_duration=_max_session_duration(),
        )
        self.output("SubmitRoleArn", self.submit_role.role_arn, "Role to assume to submit jobs")
        self.training_role: iam.Role | None = None

    def add_training_role(self) -> iam.Role:
        """The role the team's SageMaker training jobs run as, which its SubmitRole may pass.

        Created only for teams on Batch quota management: SageMaker Training needs it.
        """
        if self.training_role is not None:
            return self.training_role
        self.training_role = iam.Role(
            self,
            "TrainingExecutionRole",
            description=f"Run as by team {self.team.name}'s SageMaker training jobs",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
        )
        self.training_role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[
                    format_arn(self, service="logs", resource="log-group",
                               resource_name="/aws/sagemaker/TrainingJobs:*", sep=":")  # COLON_RESOURCE_NAME
                ],
            )
        )
        self.training_role.add_to_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}},
            )
        )
        acknowledge_nag(
            self.training_role,
            "AwsSolutions-IAM5",
            "SageMaker writes one log stream per training job under /aws/sagemaker/TrainingJobs, and"
            " PutMetricData takes no resource (it is limited to the SageMaker namespaces by condition)",
            findings=[
                "Resource::*",
                f"Resource::{nag_arn(self, 'logs', 'log-group:/aws/sagemaker/TrainingJobs:*')}",
            ],
        )
        # Batch passes the role on to SageMaker Training (the SubmitServiceJob payload names it).
        training_role_arn = self.training_role.role_arn
        add_statements(self.submit_role, [
            iam.PolicyStatement(
                sid="PassOwnTrainingRole",
                actions=["iam:PassRole"],
                resources=[training_role_arn],
                conditions={"StringEquals": {"iam:PassedToService": PASSED_TO_SERVICES}},
            )
        ])
        self.output("TrainingExecutionRoleArn", training_role_arn, "Role the team's training jobs run as")
        return self.training_role

    def add_hyperpod_access(self, *, cluster_arn: str, eks_cluster_arn: str | None, compute_quota_arn: str) -> None:
        """Let the SubmitRole run tasks in the team's namespace ``hyperpod-ns-<team>`` and nowhere else.

        HyperPod task governance runs a team's tasks in its namespace on the cluster's EKS
        control plane. The role gets an EKS access entry with ``AmazonEKSEditPolicy`` scoped
        to that namespace (EKS access policies, namespace scope), and IAM to read its cluster
        (``eks:DescribeCluster`` for a kubeconfig, ``sagemaker:DescribeCluster``) and its own
        compute quota. Without ``eks_cluster_arn`` no access entry is made (warning).
        """
        namespace = f"hyperpod-ns-{self.team.name}"
        reads = [
            iam.PolicyStatement(sid="ReadHyperPodCluster", actions=["sagemaker:DescribeCluster"], resources=[cluster_arn]),
            iam.PolicyStatement(sid="ReadOwnComputeQuota", actions=["sagemaker:DescribeComputeQuota"],
                                resources=[compute_quota_arn]),
        ]
        if eks_cluster_arn is not None:
            reads.append(iam.PolicyStatement(sid="ReadEksCluster", actions=["eks:DescribeCluster"],
                                             resources=[eks_cluster_arn]))
            from aws_cdk import aws_eks as eks  # only here: importing it costs ~0.1 s of every synth

            eks.CfnAccessEntry(
                self,
                "HyperPodAccessEntry",
                cluster_name=eks_cluster_arn.rsplit("/", 1)[-1],
                principal_arn=self.submit_role.role_arn,
                type="STANDARD",
                access_policies=[
                    eks.CfnAccessEntry.AccessPolicyProperty(
                        policy_arn=f"arn:{stack_env(self).partition}:eks::aws:cluster-access-policy/AmazonEKSEditPolicy",
                        access_scope=eks.CfnAccessEntry.AccessScopeProperty(type="namespace", namespaces=[namespace]),
                    )
                ],
            )
        else:
            cdk.Annotations.of(self).add_warning_v2(
                "@cdk-gpu-share/auth:no-eks-access",
                f"team {self.team.name} gets no access to the HyperPod cluster's EKS API: set hyperpod.eks_cluster_arn"
                f" so that its SubmitRole gets an access entry scoped to namespace {namespace}",
            )
        add_statements(self.submit_role, reads)

    def output(self, name: str, value: str, description: str) -> cdk.CfnOutput:
        """Add a stack output ``name``; its description starts with the team's name."""
        return cdk.CfnOutput(self, name, value=value, description=f"{self.team.name}: {description}")

    def acknowledge_submit_wildcards(self, *findings: str) -> None:
        """Acknowledge the wildcards a submit grant needs (read actions authorize only on ``*``).

        :param findings: further granular IAM5 findings, e.g. ``Resource::<arn>/*``.
        """
        acknowledge_nag(
            self.submit_role,
            "AwsSolutions-IAM5",
            "Batch's List/Describe actions authorize only on '*', and a new job's ARN (service-job/*, job/*)"
            " is unknown before submission (Service Authorization Reference for AWS Batch); submission is"
            " limited to the team's own share",
            findings=["Resource::*", *findings],
        )
