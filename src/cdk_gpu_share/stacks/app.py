"""Compose the platform app from one config: a platform stack and one stack per team."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import aws_cdk as cdk

from cdk_gpu_share.core.configuration.parse import PlatformConfig, check_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.stacks.platform import PlatformStack
from cdk_gpu_share.stacks.team import TeamStack
from cdk_gpu_share.stacks.windows import WindowsStack, has_switched_windows


@dataclass
class Platform:
    """What :func:`build_platform` added: the platform stack and each team's stack."""
    platform: PlatformStack
    teams: dict[str, TeamStack] = field(default_factory=dict)
    #: The quota window switcher's stack, when teams' values on Batch or HyperPod follow the clock.
    windows: cdk.Stack | None = None

    @property
    def stacks(self) -> list[cdk.Stack]:
        """Every stack of the platform, the platform stack first (the windows' stack last)."""
        return [self.platform, *self.teams.values(), *([self.windows] if self.windows is not None else [])]


def stack_name(config: PlatformConfig, team: str | None = None) -> str:
    return f"{config.name}-platform" if team is None else f"{config.name}-team-{team}"


def windows_stack_name(config: PlatformConfig) -> str:
    """The name of the stack of the quota window switcher."""
    return f"{config.name}-windows"


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
        for part in platform.team_parts():
            part.add_team_to(team, stack)
    if config.windows and has_switched_windows(platform):
        result.windows = WindowsStack(app, windows_stack_name(config), config=config, platform=platform,
                                      teams=result.teams)
    return result
