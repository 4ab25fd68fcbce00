"""WindowsStack: the quota window switcher of a platform whose teams' values follow the clock."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from constructs import Construct

from cdk_gpu_share._version import __version__
from cdk_gpu_share.constructs._iam import stack_env
from cdk_gpu_share.constructs.quota_windows import QuotaWindowSwitcher
from cdk_gpu_share.core.configuration.parse import PlatformConfig
from cdk_gpu_share.core.records.history import policy_hash

__all__ = ["TEAM_DEPLOYED", "WindowsStack", "has_switched_windows"]

#: The stack statuses after which CloudFormation may have written a share's base values back.
TEAM_DEPLOYED = ("UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE")


def has_switched_windows(platform: Any) -> bool:
    """Whether some backend construct of ``platform`` (a :class:`PlatformStack`) has a team with
    window values that a switcher must write (Batch quota shares, HyperPod compute quotas)."""
    return any(getattr(part, "has_windows", False) for part in platform.team_parts())


class WindowsStack(cdk.Stack):
    """The quota window switcher (:class:`~cdk_gpu_share.constructs.quota_windows.QuotaWindowSwitcher`)
    of the platform's Batch quota shares and HyperPod compute quotas.

    A stack of its own, deployed after the platform stack and after every team stack, because:

    * the shares and quotas it switches live in the team stacks, and a HyperPod compute quota's id
      exists only once its team stack is deployed (it is imported from there);
    * CloudFormation writes a share's or a quota's base values back whenever it updates it, so the
      run after the deploy (the switcher's custom resource) must come after the team stacks'
      updates: a deploy of the app deploys this stack last, and its custom resource runs again
      whenever the teams, the backends' sections, the windows or the library change;
    * a team stack deployed on its own (``cdk deploy <platform>-team-<team>``) does not deploy
      this stack, so an EventBridge rule also runs the switcher whenever the stack of a team with
      window values ends an update or a rollback (CloudFormation's "Stack Status Change" events).

    The schedules, the function and the alarm (routed as every alarm of the platform) are here too,
    so that a platform without windows has none of them.
    """

    def __init__(self, scope: Construct, id: str, *, config: PlatformConfig, platform: Any,
                 teams: Mapping[str, cdk.Stack], **kwargs: Any) -> None:
        """
        :param config: the validated platform config (with ``windows``).
        :param platform: its :class:`~cdk_gpu_share.stacks.platform.PlatformStack`.
        :param teams: its team stacks by team name, every one built.
        :param kwargs: passed to :class:`aws_cdk.Stack` (``env`` stays unset: environment-agnostic).
        """
        super().__init__(scope, id, description=f"cdk-gpu-share: time windows of platform {config.name}", **kwargs)
        cdk.Tags.of(self).add("gpu-share:platform", config.name)
        self.add_stack_dependency(platform)
        for stack in teams.values():
            self.add_stack_dependency(stack)
        self.switcher = QuotaWindowSwitcher(self, "QuotaWindows", windows=config.windows,
                                            deployed=f"{policy_hash(config)} {__version__}")
        for part in platform.team_parts():
            add = getattr(part, "add_windows_to", None)
            if add is not None:
                add(self.switcher)
        # The stacks of the teams the switcher writes (with groups, also a team that gives no
        # values of its own but whose compiled share of a pool changes with the window).
        switched = set(self.switcher.teams)
        windowed = [stack for name, stack in teams.items() if name in switched]
        self.team_deploys = self._after_team_deploys(windowed)
        if platform.alerts is not None:
            platform.alerts.route(self)

    def _after_team_deploys(self, stacks: list[cdk.Stack]) -> events.Rule:
        """A rule that runs the switcher when one of ``stacks`` ends an update or its rollback."""
        env = stack_env(self)
        ids = [{"prefix": f"arn:{env.partition}:cloudformation:{env.region}:{env.account}:stack/{s.stack_name}/"}
               for s in stacks]
        rule = events.Rule(
            self, "AfterTeamDeploys",
            description="Runs the quota window switcher after a team stack's update, which writes the base"
                        " values back into its quota share or compute quota (cdk-gpu-share)",
            event_pattern=events.EventPattern(
                source=["aws.cloudformation"], detail_type=["CloudFormation Stack Status Change"],
                detail={"stack-id": ids, "status-details": {"status": list(TEAM_DEPLOYED)}}))
        rule.add_target(targets.LambdaFunction(self.switcher.function, retry_attempts=2,
                                               max_event_age=cdk.Duration.hours(1)))
        return rule
