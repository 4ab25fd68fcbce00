"""Acknowledgements of CDK policy-validation findings (cdk-nag 3, CloudFormation rules).

Every acknowledgement is made next to the resource it is about, with a reason a
reviewer can check. cdk-nag 3 plugs into CDK policy validation, so findings are
acknowledged with ``Validations.of(scope).acknowledge``; the 2.x ``NagSuppressions``
idiom does not work with it.
"""

from __future__ import annotations

from typing import Iterable

import aws_cdk as cdk
from constructs import IConstruct

NAG_PACK = "AwsSolutions"
CFN_VALIDATE = "CloudFormation-Validate"
MIN_REASON_LENGTH = 20


def acknowledge_nag(scope: IConstruct, rule: str, reason: str, *, findings: Iterable[str] = ()) -> None:
    """Acknowledge cdk-nag ``rule`` (``AwsSolutions-IAM5``) on ``scope`` and its children.

    ``findings`` narrows a granular rule to the listed findings
    (``Action::batch:DescribeJobs``); without it the whole rule is acknowledged.
    """
    if len(reason) < MIN_REASON_LENGTH:
        raise ValueError(f"acknowledgement of {rule} needs a real reason (got {reason!r})")
    ids = [f"{rule}[{f}]" for f in findings] or [rule]
    # One Validations.of and one acknowledge for all the ids: each is a jsii round trip.
    cdk.Validations.of(scope).acknowledge(*(cdk.Acknowledgment(id=f"{NAG_PACK}::{rid}", reason=reason) for rid in ids))


def acknowledge_cfn_rule(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge a CloudFormation default-rule finding (``F3006``) on ``scope``."""
    if len(reason) < MIN_REASON_LENGTH:
        raise ValueError(f"acknowledgement of {rule} needs a real reason (got {reason!r})")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"{CFN_VALIDATE}::{rule}", reason=reason))


def nag_arn(stack: cdk.Stack, service: str, resource: str) -> str:
    """An ARN of ``stack`` as cdk-nag spells it in a granular finding id.

    cdk-nag writes pseudo parameters as ``<AWS::Region>``; an environment-bound
    stack has literal values instead.
    """

    def part(value: str, pseudo: str) -> str:
        return f"<{pseudo}>" if cdk.Token.is_unresolved(value) else value

    return (
        f"arn:{part(stack.partition, 'AWS::Partition')}:{service}:{part(stack.region, 'AWS::Region')}:"
        f"{part(stack.account, 'AWS::AccountId')}:{resource}"
    )
