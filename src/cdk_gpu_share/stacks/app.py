"""Compose the platform app from one config: a platform stack and one stack per team."""

from __future__ import annotations

from dataclasses import dataclass, field

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from cdk_gpu_share.core.config import PlatformConfig
from cdk_gpu_share.stacks.platform import PlatformStack
from cdk_gpu_share.stacks.team import TeamStack


@dataclass
class Platform:
    platform: PlatformStack
    teams: dict[str, TeamStack] = field(default_factory=dict)

    @property
    def stacks(self) -> list[cdk.Stack]:
        return [self.platform, *self.teams.values()]


def stack_name(config: PlatformConfig, team: str | None = None) -> str:
    return f"{config.name}-platform" if team is None else f"{config.name}-team-{team}"


def build_platform(app: cdk.App, config: PlatformConfig, *, checks: bool = True) -> Platform:
    """Add the platform stack and one stack per team to ``app``.

    :param checks: add cdk-nag's AwsSolutions pack to the app's policy validation. Default: True.
    """
    if checks:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    platform = PlatformStack(app, stack_name(config), config=config)
    result = Platform(platform=platform)
    for team in config.teams:
        stack = TeamStack(app, stack_name(config, team.name), team=team)
        stack.add_stack_dependency(platform)
        result.teams[team.name] = stack
        granted = False
        wildcards: list[str] = []
        if platform.quota is not None:
            shares = platform.quota.add_team(team, scope=stack) if _reaches_quota(config, team) else []
            if platform.quota.batch is not None and team.name in platform.quota.batch.teams:
                platform.quota.grant_submit(team.name, stack.submit_role)
                granted = True
                stack.output("TrainingQueueName", platform.quota.job_queue_name, "Batch job queue for SageMaker Training")
                stack.output("QuotaShareName", platform.quota.quota_share_name(team.name), "the team's quota share")
            if platform.quota.hyperpod is not None and team.name in platform.quota.hyperpod.teams:
                stack.output("HyperPodNamespace", f"hyperpod-ns-{team.name}", "Kubernetes namespace of the team")
            del shares
        if platform.fairshare is not None and team in config.teams_for("fairshare"):
            member = platform.fairshare.add_team(team, scope=stack)
            platform.fairshare.grant_submit(team.name, stack.submit_role)
            granted = True
            wildcards += platform.fairshare.submit_wildcard_findings(team.name)
            stack.output("FairshareQueueName", platform.fairshare.job_queue_name, "classic Batch GPU queue")
            stack.output("ShareIdentifier", platform.fairshare.share_identifier(team.name), "fair-share identifier")
            stack.output(
                "FairshareJobDefinitions",
                ",".join(member.job_definition_name(n) for n in sorted(member.job_definitions)),
                "job definitions of the team (one per GPU count)",
            )
            stack.output(
                "FairshareJobTags",
                ",".join(f"{k}={v}" for k, v in platform.fairshare.job_tags(team.name).items()),
                "tags every job must carry (submissions without them are denied)",
            )
        if granted:
            stack.acknowledge_submit_wildcards(*wildcards)
    return result


def _reaches_quota(config: PlatformConfig, team) -> bool:
    return bool(config.teams_for("batch_quota") and team in config.teams_for("batch_quota")) or bool(
        config.hyperpod and team in config.teams_for("hyperpod")
    )
