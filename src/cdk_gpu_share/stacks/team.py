"""TeamStack: what one team owns: its submit role, its shares, its outputs."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_gpu_share.core.config import TeamConfig
from cdk_gpu_share.constructs._checks import acknowledge_nag, nag_arn


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
        super().__init__(scope, id, description=f"cdk-gpu-share: team {team.name}", **kwargs)
        self.team = team
        cdk.Tags.of(self).add("gpu-share:team", team.name)
        self.submit_role = iam.Role(
            self,
            "SubmitRole",
            description=f"Assumed by members of team {team.name} to submit GPU jobs into its share",
            assumed_by=iam.AccountRootPrincipal(),
            max_session_duration=cdk.Duration.hours(4),
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
                    self.format_arn(
                        service="logs",
                        resource="log-group",
                        resource_name="/aws/sagemaker/TrainingJobs:*",
                        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                    )
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
        self.training_role.grant_pass_role(self.submit_role)
        self.output("TrainingExecutionRoleArn", self.training_role.role_arn, "Role the team's training jobs run as")
        return self.training_role

    def output(self, name: str, value: str, description: str) -> cdk.CfnOutput:
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
