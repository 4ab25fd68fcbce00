"""ARNs and policy statements for the same template with fewer jsii round trips.

Every call into aws-cdk-lib (a ``format_arn``, a property read, an ``add_to_principal_policy``)
is a round trip to jsii's Node process, paid per team. These helpers do the same work with
fewer of them:

* :func:`format_arn` builds an ARN in Python the way ``Arn.format`` does (it joins its parts
  into one string; the pseudo parameters stay tokens), from the stack's partition, region
  and account read once per stack.
* :func:`add_statements` adds statements to a role without reading its ``grant_principal``
  back for each one.

Neither changes what CDK sees: the same constructs get the same method calls (CDK's construct
analytics records those in the ``CDKMetadata`` resource of ``cdk synth``'s templates).
"""

from __future__ import annotations

import functools
from typing import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam

_ENV = "_gpu_share_env"


class StackEnv:
    """A stack's partition, region and account (tokens for an environment-agnostic stack)."""

    def __init__(self, stack: cdk.Stack) -> None:
        self.partition, self.region, self.account = stack.partition, stack.region, stack.account

    @functools.cached_property
    def unresolved(self) -> tuple[bool, bool, bool]:
        """Whether partition, region and account are tokens (read only when asked)."""
        return tuple(cdk.Token.is_unresolved(v) for v in (self.partition, self.region, self.account))


def stack_env(stack: cdk.Stack) -> StackEnv:
    """``stack``'s partition, region and account, read once per stack (they never change)."""
    env = stack.__dict__.get(_ENV)
    if env is None:
        env = stack.__dict__[_ENV] = StackEnv(stack)
    return env


def format_arn(stack: cdk.Stack, *, service: str, resource: str, resource_name: str | None = None,
               sep: str = "/") -> str:
    """``stack.format_arn(service=..., resource=..., resource_name=...)`` without a round trip.

    ``Arn.format`` joins ``arn:<partition>:<service>:<region>:<account>:<resource>`` and, when
    given, ``<sep><resource_name>`` into one string; so does this, with the same tokens.

    :param sep: ``/`` (``ArnFormat.SLASH_RESOURCE_NAME``, the default) or ``:``
        (``ArnFormat.COLON_RESOURCE_NAME``).
    """
    env = stack_env(stack)
    arn = f"arn:{env.partition}:{service}:{env.region}:{env.account}:{resource}"
    return arn if resource_name is None else f"{arn}{sep}{resource_name}"


def add_statements(grantee: iam.IGrantable, statements: Sequence[iam.PolicyStatement]) -> None:
    """Add ``statements``, in order, to ``grantee``'s principal policy.

    A :class:`aws_cdk.aws_iam.Role` is its own ``grant_principal``: for one, the property is not
    read back (a round trip per statement). Each statement still goes through its own
    ``add_to_principal_policy``, not one ``Policy.add_statements``: CDK's construct analytics
    (the ``CDKMetadata`` resource ``cdk synth`` adds) records every such call, so batching
    them would change the synthesized template.
    """
    principal = grantee if isinstance(grantee, iam.Role) else grantee.grant_principal
    for statement in statements:
        principal.add_to_principal_policy(statement)
