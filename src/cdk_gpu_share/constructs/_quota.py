"""What the quota constructs of Batch quota management and HyperPod share: a team's quota, and
the checks they make the same way."""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from constructs import Construct

from cdk_gpu_share.core.configuration.parse import TeamConfig
from cdk_gpu_share.core.errors import ConfigError, Problem


def raise_problems(problems: list[Problem], construct: Construct) -> None:
    """Raise one :class:`ConfigError` naming ``construct`` when there are ``problems``."""
    # The construct's path is read only when there is a problem (a jsii round trip).
    if problems:
        raise ConfigError(problems, source=construct.node.path)


def sagemaker_type(instance_type: str) -> bool:
    """The instance types a SharedGpuQuota answers for; EC2 types are a FairshareQueue's."""
    return instance_type.startswith("ml.")


def another_backends(instance_type: str) -> bool:
    """A backend answers for its own capacity only: a guarantee elsewhere is the other backend's."""
    return False


@dataclass(frozen=True)
class TeamQuota:
    """What one team got from a backend: its share or compute quota."""

    team: TeamConfig
    name: str
    resource: cdk.CfnResource
    arn: str


__all__ = ["TeamQuota", "another_backends", "raise_problems", "sagemaker_type"]
