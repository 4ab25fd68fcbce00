"""What the platform stacks ask of a backend's construct (the class a ``BackendSpec.construct`` names).

The platform stack builds each backend's construct once with :meth:`PlatformPart.for_platform`
(two backends may name the same construct: Batch quota management and HyperPod share
:class:`~cdk_gpu_share.constructs.shared_gpu_quota.SharedGpuQuota`), and every team stack
asks each construct for the team's part with :meth:`PlatformPart.add_team_to`. The team stack
is seen through :class:`TeamStackLike`, so that no construct imports the stacks.
"""

from __future__ import annotations

from typing import Any, Protocol

from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_gpu_share.core.configuration.parse import PlatformConfig, TeamConfig


class TeamStackLike(Protocol):
    """The parts of a team stack a backend's construct uses (:class:`cdk_gpu_share.stacks.team.TeamStack`)."""

    submit_role: iam.Role

    def output(self, name: str, value: str, description: str) -> Any: ...

    def add_training_role(self) -> iam.Role: ...

    def add_hyperpod_access(self, *, cluster_arn: str, eks_cluster_arn: str | None, compute_quota_arn: str) -> None: ...

    def acknowledge_submit_wildcards(self, *findings: str) -> None: ...


class PlatformPart(Protocol):
    """A backend's construct, as the platform stack and the team stacks use it."""

    @classmethod
    def for_platform(cls, scope: Construct, config: PlatformConfig) -> PlatformPart:
        """The construct of ``config``'s section(s), in the platform stack ``scope``."""
        ...

    def add_team_to(self, team: TeamConfig, stack: TeamStackLike) -> None:
        """Give ``team`` its part in its own stack (shares, roles, grants, outputs), if it takes part."""
        ...

    # Optional: ``add_monitoring(platform_stack)`` adds the backend's dashboard and alarms to the
    # platform stack once every part is built, and returns the dashboard (or None).


__all__ = ["PlatformPart", "TeamStackLike"]
