"""ARNs and policy statements for the same template with fewer jsii round trips.

Every call into aws-cdk-lib (a ``format_arn``, a property read, an ``add_to_principal_policy``)
is a round trip to jsii's Node process, paid per team. These helpers do the same work with
fewer of them:

* :func:`format_arn` builds an ARN in Python the way ``Arn.format`` does (it joins its parts
  into one string; the pseudo parameters stay tokens), from the stack's partition, region
  and account read once per stack.
* :func:`add_statements` adds statements to a role in one round trip each, not three.

Both write the same template (only the ``CDKMetadata`` resource of ``cdk synth``'s output, CDK's
construct analytics of which methods were called, may differ).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

_ENV = "_gpu_share_env"
_STACK = "_gpu_share_stack"


class StackEnv:
    """A stack's partition, region and account (tokens for an environment-agnostic stack)."""

    def __init__(self, stack: cdk.Stack) -> None:
        self.partition, self.region, self.account = stack.partition, stack.region, stack.account

    @functools.cached_property
    def unresolved(self) -> tuple[bool, bool, bool]:
        """Whether partition, region and account are tokens (read only when asked)."""
        return is_token_string(self.partition), is_token_string(self.region), is_token_string(self.account)


def is_token_string(value: str) -> bool:
    """``Token.is_unresolved(value)`` for a string, without a round trip.

    A string token is encoded as ``${Token[NAME.N]}`` (aws-cdk-lib's ``TokenString``), which is
    what ``Token.is_unresolved`` looks for in a string.
    """
    return "${Token[" in value


def read_once(construct: Construct, key: str, read: Callable[[], str]) -> str:
    """An attribute token of ``construct``, read once: each read is a jsii round trip for the same token."""
    value: str | None = construct.__dict__.get(key)
    if value is None:
        value = construct.__dict__[key] = read()
    return value


def stack_of(construct: Construct) -> cdk.Stack:
    """``Stack.of(construct)``, asked once per construct (a round trip); a stack is its own."""
    if isinstance(construct, cdk.Stack):
        return construct
    stack = construct.__dict__.get(_STACK)
    if stack is None:
        stack = construct.__dict__[_STACK] = cdk.Stack.of(construct)
    return stack


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

    For a :class:`aws_cdk.aws_iam.Role` (its own ``grant_principal``: not read back), each
    statement goes through ``Role.add_to_policy``: it calls ``add_to_principal_policy`` and
    returns a bool, one round trip. ``add_to_principal_policy`` itself returns a struct whose two
    fields jsii reads back one by one: three round trips per statement for the same policy.
    """
    if isinstance(grantee, iam.Role):
        for statement in statements:
            grantee.add_to_policy(statement)
        return
    principal = grantee.grant_principal
    for statement in statements:
        principal.add_to_principal_policy(statement)
