"""Acknowledgements of CDK policy-validation findings (cdk-nag 3, CloudFormation rules), and the
refusal of a construct's props (:func:`raise_props_problems`).

Every acknowledgement is made next to the resource it is about, with a reason a
reviewer can check. cdk-nag 3 plugs into CDK policy validation, so findings are
acknowledged with ``Validations.of(scope).acknowledge``; the 2.x ``NagSuppressions``
idiom does not work with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import aws_cdk as cdk
from constructs import IConstruct

from cdk_gpu_share.constructs._iam import stack_env
from cdk_gpu_share.core.errors import ConfigError, Problem

NAG_PACK = "AwsSolutions"
CFN_VALIDATE = "CloudFormation-Validate"
MIN_REASON_LENGTH = 20
_VALIDATIONS = "_gpu_share_validations"


def acknowledge_nag(scope: IConstruct, rule: str, reason: str, *, findings: Iterable[str] = ()) -> None:
    """Acknowledge cdk-nag ``rule`` (``AwsSolutions-IAM5``) on ``scope`` and its children.

    ``findings`` narrows a granular rule to the listed findings
    (``Action::batch:DescribeJobs``); without it the whole rule is acknowledged.
    """
    if len(reason) < MIN_REASON_LENGTH:
        raise ValueError(f"acknowledgement of {rule} needs a real reason (got {reason!r})")
    ids = [f"{rule}[{f}]" for f in findings] or [rule]
    # One acknowledge for all the ids, on one Validations per scope: each is a jsii round trip.
    _validations(scope).acknowledge(*(cdk.Acknowledgment(id=f"{NAG_PACK}::{rid}", reason=reason) for rid in ids))


def _validations(scope: IConstruct) -> cdk.Validations:
    """``Validations.of(scope)``, made once per scope (it only holds the scope)."""
    cached = getattr(scope, "__dict__", {}).get(_VALIDATIONS)
    if cached is None:
        cached = cdk.Validations.of(scope)
        if hasattr(scope, "__dict__"):
            scope.__dict__[_VALIDATIONS] = cached
    return cached


def acknowledge_cfn_rule(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge a CloudFormation default-rule finding (``F3006``) on ``scope``."""
    if len(reason) < MIN_REASON_LENGTH:
        raise ValueError(f"acknowledgement of {rule} needs a real reason (got {reason!r})")
    _validations(scope).acknowledge(cdk.Acknowledgment(id=f"{CFN_VALIDATE}::{rule}", reason=reason))


def acknowledge_role_dependency(function: IConstruct) -> None:
    """Tell cfn-lint that ``function``'s ``DependsOn`` its role is aws-cdk-lib's, not ours.

    aws-cdk-lib makes a Lambda function depend on its role although ``Role`` is already a
    ``GetAtt`` of it: cfn-lint's W3005, a warning about redundancy, not an error. The
    acknowledgement is the resource's ``cfn-lint`` metadata, on that resource only.
    """
    resource = function.node.default_child
    if not isinstance(resource, cdk.CfnResource):
        raise TypeError(f"{function.node.path} has no CloudFormation resource to acknowledge W3005 on")
    resource.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})


def nag_arn(stack: cdk.Stack, service: str, resource: str) -> str:
    """An ARN of ``stack`` as cdk-nag spells it in a granular finding id.

    cdk-nag writes pseudo parameters as ``<AWS::Region>``; an environment-bound
    stack has literal values instead.
    """

    env = stack_env(stack)  # read once per stack, not per finding
    partition_token, region_token, account_token = env.unresolved
    partition = "<AWS::Partition>" if partition_token else env.partition
    region = "<AWS::Region>" if region_token else env.region
    account = "<AWS::AccountId>" if account_token else env.account
    return f"arn:{partition}:{service}:{region}:{account}:{resource}"


def raise_props_problems(problems: Sequence[Problem], scope: IConstruct, id: str) -> None:
    """Raise one ConfigError listing ``problems`` of a construct's props, before the construct
    exists: its source is the path the construct would have had."""
    if not problems:
        return
    try:
        parent = scope.node.path
    except Exception:  # not a construct: the id alone
        parent = ""
    raise ConfigError(list(problems), source=f"{parent}/{id}" if parent else id)
