"""The construct of SageMaker HyperPod task governance (``hyperpod``).

:class:`HyperPodBackend` creates one ``AWS::SageMaker::ClusterSchedulerConfig`` and one
``AWS::SageMaker::ComputeQuota`` per team;
:class:`~cdk_gpu_share.constructs.shared_gpu_quota.SharedGpuQuota` is the facade a platform uses.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import aws_cdk as cdk
from constructs import Construct

from cdk_gpu_share.backends.hyperpod import _quota_config, _team_quota, quota_values
from cdk_gpu_share.constructs._checks import acknowledge_cfn_rule, raise_props_problems
from cdk_gpu_share.constructs._quota import TeamQuota, another_backends, raise_problems
from cdk_gpu_share.core.configuration.hyperpod_regions import IDLE_SHARING_SOURCE, region_problems
from cdk_gpu_share.core.configuration.parse import HyperPodConfig, TeamConfig, config_problems
from cdk_gpu_share.core.errors import ConfigError, Problem


class CfnComputeQuota(cdk.CfnResource):
    """A typed ``AWS::SageMaker::ComputeQuota`` (aws-cdk-lib 2.275 has no L1 for it).

    CDK's own CloudFormation rules do not know this type (finding F3006); that
    finding is acknowledged on this resource only, and cfn-lint, which knows the
    type, checks the template instead.
    """

    TYPE = "AWS::SageMaker::ComputeQuota"

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        name: str,
        cluster_arn: str,
        team_name: str,
        resources: list[dict[str, Any]],
        strategy: str,
        borrow_limit: int | None = None,
        absolute_borrow_limits: list[dict[str, Any]] | None = None,
        preempt_team_tasks: str | None = None,
        fair_share_weight: int | None = None,
        description: str | None = None,
    ) -> None:
        target: dict[str, Any] = {"TeamName": team_name}
        if fair_share_weight is not None:
            target["FairShareWeight"] = fair_share_weight
        quota_config = _quota_config(resources=resources, strategy=strategy, borrow_limit=borrow_limit,
                                     absolute_borrow_limits=absolute_borrow_limits,
                                     preempt_team_tasks=preempt_team_tasks)
        props: dict[str, Any] = {
            "Name": name,
            "ClusterArn": cluster_arn,
            "ComputeQuotaConfig": quota_config,
            "ComputeQuotaTarget": target,
            "ActivationState": "Enabled",
        }
        if description:
            props["Description"] = description
        super().__init__(scope, id, type=self.TYPE, properties=props)
        acknowledge_cfn_rule(
            self,
            "F3006",
            "AWS::SageMaker::ComputeQuota is a valid CloudFormation type that aws-cdk-lib 2.275's rules do not"
            " know yet; cfn-lint validates it against the provider schema",
        )

    @property
    def attr_compute_quota_arn(self) -> str:
        """The ARN of the compute quota (``Fn::GetAtt ComputeQuotaArn``)."""
        return self.get_att("ComputeQuotaArn").to_string()

    @property
    def attr_compute_quota_id(self) -> str:
        """The 12-character id of the compute quota (``Fn::GetAtt ComputeQuotaId``), which
        ``UpdateComputeQuota`` names."""
        return self.get_att("ComputeQuotaId").to_string()


class HyperPodBackend(Construct):
    """SageMaker HyperPod task governance on one EKS-orchestrated cluster.

    The cluster policy (``AWS::SageMaker::ClusterSchedulerConfig``: fair share,
    idle resource sharing, priority classes) is the ``Resource`` child;
    :meth:`add_team` adds one ``AWS::SageMaker::ComputeQuota`` per team.
    """

    def __init__(self, scope: Construct, id: str, *, config: HyperPodConfig, name: str | None = None) -> None:
        """
        :param config: cluster ARN, capacity per instance type, fair share, idle sharing, priority classes.
        :param name: the cluster policy's name. Default: ``config.scheduler_config_name``, else
            ``<stack name>-policy`` truncated to 63 characters.
        """
        checked = dataclasses.replace(config, scheduler_config_name=name) if name and isinstance(config, HyperPodConfig) else config
        raise_props_problems(config_problems(hyperpod=checked, owned=another_backends), scope, id)
        region = cdk.Stack.of(scope).region
        raise_props_problems(_region_problems(region), scope, id)
        super().__init__(scope, id)
        self.config = config
        self._teams: dict[str, TeamQuota] = {}
        scheduler: dict[str, Any] = {
            "FairShare": "Enabled" if config.fair_share else "Disabled",
            "IdleResourceSharing": "Enabled" if config.idle_resource_sharing else "Disabled",
        }
        if config.priority_classes:
            scheduler["PriorityClasses"] = [{"Name": p.name, "Weight": p.weight} for p in config.priority_classes]
        policy_name = name or config.scheduler_config_name or _resource_name(cdk.Stack.of(self).stack_name, "policy")
        self.scheduler_config = cdk.CfnResource(
            self,
            "Resource",
            type="AWS::SageMaker::ClusterSchedulerConfig",
            properties={"Name": policy_name, "ClusterArn": config.cluster_arn, "SchedulerConfig": scheduler},
        )
        if not cdk.Token.is_unresolved(region):  # a listed region: an unlisted one was refused above
            acknowledge_cfn_rule(
                self.scheduler_config,
                "F3006",
                "aws-cdk-lib 2.275's region table lists AWS::SageMaker::ClusterSchedulerConfig in fewer regions than"
                f" AWS documents HyperPod task governance in; this region is one it documents ({IDLE_SHARING_SOURCE})",
            )

    @property
    def teams(self) -> dict[str, TeamQuota]:
        """The teams added so far, by name: each one's compute quota."""
        return dict(self._teams)

    def add_team(self, team: TeamConfig, *, scope: Construct | None = None) -> TeamQuota:
        """Add the compute quota of ``team``.

        :param scope: where to create it (a team's stack). Default: this construct.
        """
        if isinstance(team, TeamConfig) and team.name in self._teams:
            raise ConfigError(
                Problem("team.name", team.name, "already has a compute quota on this cluster", "add each team once"),
                source=self.node.path,
            )
        teams = [*(q.team for q in self._teams.values()), team]
        raise_problems(config_problems(teams, hyperpod=self.config, owned=another_backends), self)
        return self._add(team, scope)

    def _add(self, team: TeamConfig, scope: Construct | None) -> TeamQuota:
        """Add the compute quota of a team whose checks passed."""
        if team.name in self._teams:
            raise ConfigError(
                Problem("team.name", team.name, "already has a compute quota on this cluster", "add each team once"),
                source=self.node.path,
            )
        if scope is not None:  # a team's stack may have a region of its own
            raise_problems(_region_problems(cdk.Stack.of(scope).region), scope)
        quota = CfnComputeQuota(
            scope or self,
            f"ComputeQuota-{team.name}" if scope is None else "ComputeQuota",
            name=f"{team.name}-quota",
            cluster_arn=self.config.cluster_arn,
            team_name=team.name,
            **_team_quota(team, self.config.capacity),
            fair_share_weight=team.fair_share_weight,
            description=team.description or None,
        )
        quota.add_resource_dependency(self.scheduler_config)  # one jsii round trip, not two (node, then add)
        result = TeamQuota(team=team, name=team.name, resource=quota, arn=quota.attr_compute_quota_arn)
        self._teams[team.name] = result
        return result


def _region_problems(region: str) -> list[Problem]:
    """The problems of a stack's region; none for an environment-agnostic stack (plan notes it)."""
    return [] if cdk.Token.is_unresolved(region) else region_problems(region)


def _resource_name(base: str, suffix: str) -> str:
    clean = "".join(c if c.isalnum() else "-" for c in base).strip("-") or "gpu-share"
    name = f"{clean[: 62 - len(suffix)]}-{suffix}"
    while "--" in name:
        name = name.replace("--", "-")
    return name




__all__ = ["CfnComputeQuota", "HyperPodBackend", "quota_values"]
