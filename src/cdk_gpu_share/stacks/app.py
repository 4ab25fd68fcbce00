"""Compose the platform app from one config: a platform stack and one stack per team."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import aws_cdk as cdk

from cdk_gpu_share.core.config import PlatformConfig, check_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.stacks.platform import PlatformStack
from cdk_gpu_share.stacks.team import TeamStack


@dataclass
class Platform:
    """What :func:`build_platform` added: the platform stack and each team's stack."""
    platform: PlatformStack
    teams: dict[str, TeamStack] = field(default_factory=dict)

    @property
    def stacks(self) -> list[cdk.Stack]:
        """Every stack of the platform, the platform stack first."""
        return [self.platform, *self.teams.values()]


def stack_name(config: PlatformConfig, team: str | None = None) -> str:
    return f"{config.name}-platform" if team is None else f"{config.name}-team-{team}"


_TEMPLATE_VALIDATOR: list[cdk.CloudFormationValidatePlugin] = []


def template_validator() -> cdk.CloudFormationValidatePlugin | None:
    """CDK's default CloudFormation rule engine, built now, for an app to register in place of CDK's own.

    An app calls this before it creates any construct and registers the result at the App
    (``cdk.Validations.of(app).add_plugins(...)``) once its stacks are built. CDK then uses it
    instead of the instance it would build at synth: the same default rules, report and
    failure on an unacknowledged error (``@aws-cdk/core:validateAgainstDefaultRules``).

    Why: building the engine (its rules compiled to WebAssembly) makes V8 run a hundred or more
    full garbage collections in jsii's Node process ("external memory pressure"), and each one
    marks the whole heap. At synth the heap also holds the L2 modules and the construct tree (31
    MB against 12 MB at 3 teams, 38 MB at 50), so building the engine first saved 0.5 to 1.5 s of
    CPU per synth at 3 and at 50 teams (``docs/performance.md``, "Synth").

    One engine per process, as CDK's own (an engine only reads the templates it is given). None
    when ``CDK_VALIDATION=false``, which turns CDK's default validation off. For an App made with
    ``builtin_cloud_formation_validation=False`` do not register it.
    """
    if os.environ.get("CDK_VALIDATION") == "false":
        return None
    if not _TEMPLATE_VALIDATOR:
        _TEMPLATE_VALIDATOR.append(cdk.CloudFormationValidatePlugin())
    return _TEMPLATE_VALIDATOR[0]


def build_platform(app: cdk.App, config: PlatformConfig, *, checks: bool = True) -> Platform:
    """Add the platform stack and one stack per team to ``app``.

    :param checks: add cdk-nag's AwsSolutions pack to the app's policy validation. Default: True.
    """
    # A PlatformConfig built in Python skipped parse_config: it meets the same rules here, with a
    # ConfigError, before anything is built.
    problems = check_config(config)
    if problems:
        raise ConfigError(problems, source=getattr(config, "source", None))
    if checks:
        from cdk_nag import AwsSolutionsChecks  # loading its jsii assembly costs ~0.4 s: only when used

        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    platform = PlatformStack(app, stack_name(config), config=config)
    result = Platform(platform=platform)
    for team in config.teams:
        stack = TeamStack(app, stack_name(config, team.name), team=team)
        stack.add_stack_dependency(platform)
        if platform.alerts is not None:
            platform.alerts.route(stack)
        result.teams[team.name] = stack
        wildcards: list[str] = []
        quota = platform.quota
        if quota is not None and any(b.config.capacity.keys() & team.guarantee.keys() for b in quota.backends):
            quota.add_team(team, scope=stack)
            if quota.batch is not None and team.name in quota.batch.teams:
                stack.add_training_role()
                quota.grant_submit(team.name, stack.submit_role)
                stack.output("TrainingQueueName", quota.job_queue_name, "Batch job queue for SageMaker Training")
                stack.output("QuotaShareName", quota.quota_share_name(team.name), "the team's quota share")
                stack.output(
                    "TrainingJobTags",
                    ",".join(f"{k}={v}" for k, v in quota.batch.service_job_tags(team.name).items()),
                    "tags every service job must carry (submissions without them are denied)",
                )
            if quota.hyperpod is not None and team.name in quota.hyperpod.teams:
                stack.add_hyperpod_access(
                    cluster_arn=quota.hyperpod.config.cluster_arn,
                    eks_cluster_arn=quota.hyperpod.config.eks_cluster_arn,
                    compute_quota_arn=quota.hyperpod.teams[team.name].arn,
                )
                stack.output("HyperPodNamespace", f"hyperpod-ns-{team.name}", "Kubernetes namespace of the team")
        fairshare = platform.fairshare
        if fairshare is not None and team in config.teams_for("fairshare"):
            member = fairshare.add_team(team, scope=stack)
            fairshare.grant_submit(team.name, stack.submit_role)
            wildcards += fairshare.submit_wildcard_findings(team.name)
            stack.output("FairshareQueueName", fairshare.job_queue_name, "classic Batch GPU queue")
            stack.output("ShareIdentifier", fairshare.share_identifier(team.name), "fair-share identifier")
            stack.output(
                "FairshareJobDefinitions",
                ",".join(member.job_definition_name(n) for n in sorted(member.job_definitions)),
                "job definitions of the team (one per GPU count)",
            )
            stack.output(
                "FairshareJobTags",
                ",".join(f"{k}={v}" for k, v in fairshare.job_tags(team.name).items()),
                "tags every job must carry (submissions without them are denied)",
            )
            stack.acknowledge_submit_wildcards(*wildcards)
    return result
