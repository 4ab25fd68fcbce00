"""constructs/_iam.py: the same ARNs and policy statements as aws-cdk-lib's own calls, with
fewer jsii round trips (the snapshots prove the templates the same)."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_iam as iam

from cdk_gpu_share.constructs._checks import nag_arn
from cdk_gpu_share.constructs._iam import add_statements, format_arn, is_token_string, stack_env, stack_of

# The project's flag: a region-bound stack has a literal partition.
PARTITION_LITERALS = {"@aws-cdk/core:enablePartitionLiterals": True}
ENVS = [None, cdk.Environment(account="111122223333", region="eu-west-1"), cdk.Environment(region="cn-north-1")]


@pytest.mark.parametrize("env", ENVS, ids=["agnostic", "bound", "china-region"])
@pytest.mark.parametrize(
    "name, sep, arn_format",
    [("job/*", "/", cdk.ArnFormat.SLASH_RESOURCE_NAME), ("/aws/x:*", ":", cdk.ArnFormat.COLON_RESOURCE_NAME),
     (None, "/", None)],
)
def test_format_arn_resolves_as_stack_format_arn(env, name, sep, arn_format):
    stack = cdk.Stack(cdk.App(context=PARTITION_LITERALS), "S", env=env)
    kwargs = {} if arn_format is None else {"arn_format": arn_format}
    ours = format_arn(stack, service="batch", resource="job-queue", resource_name=name, sep=sep)
    theirs = stack.format_arn(service="batch", resource="job-queue", resource_name=name, **kwargs)
    assert stack.resolve(ours) == stack.resolve(theirs)
    if env is not None and env.account:
        assert ours == "arn:aws:batch:eu-west-1:111122223333:job-queue" + ("" if name is None else f"{sep}{name}")


def test_stack_env_is_read_once_per_stack():
    app = cdk.App(context=PARTITION_LITERALS)
    a, b = cdk.Stack(app, "A"), cdk.Stack(app, "B", env=cdk.Environment(account="111122223333", region="us-east-1"))
    assert stack_env(a) is stack_env(a)
    assert stack_env(b).account == "111122223333" and stack_env(b).unresolved == (False, False, False)
    assert stack_env(a).unresolved == (True, True, True)
    assert nag_arn(a, "batch", "job/*") == "arn:<AWS::Partition>:batch:<AWS::Region>:<AWS::AccountId>:job/*"
    assert nag_arn(b, "batch", "job/*") == "arn:aws:batch:us-east-1:111122223333:job/*"


def _statements(n: int) -> list[iam.PolicyStatement]:
    return [iam.PolicyStatement(sid=f"S{i}", actions=[f"s3:Get{i}"], resources=["*"]) for i in range(n)]


@pytest.mark.parametrize("grantee_kind", ["role", "user"])
def test_add_statements_adds_each_in_order_like_add_to_principal_policy(grantee_kind):
    app = cdk.App()
    stack = cdk.Stack(app, "S")

    def grantee(id_: str) -> iam.IGrantable:
        if grantee_kind == "role":
            return iam.Role(stack, id_, assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        return iam.User(stack, id_)

    ours, theirs = grantee("Ours"), grantee("Theirs")
    add_statements(ours, _statements(2))
    add_statements(ours, _statements(3)[2:])
    for statement in _statements(3):
        theirs.grant_principal.add_to_principal_policy(statement)
    policies = assertions.Template.from_stack(stack).find_resources("AWS::IAM::Policy")
    docs = {k[:4]: v["Properties"]["PolicyDocument"] for k, v in policies.items()}
    assert docs["Ours"] == docs["Thei"]
    assert [s["Sid"] for s in docs["Ours"]["Statement"]] == ["S0", "S1", "S2"]


# Built inside the test: a token's text carries a counter, which differs between xdist workers.
VALUES = {
    "partition": lambda: cdk.Aws.PARTITION,
    "account": lambda: cdk.Aws.ACCOUNT_ID,
    "get-att": lambda: cdk.Fn.get_att("Queue", "Arn").to_string(),
    "arn-with-token": lambda: f"arn:{cdk.Aws.PARTITION}:s3:::b",
    "literal": lambda: "aws",
    "empty": lambda: "",
    "token-like": lambda: "${Token",
    "literal-arn": lambda: "arn:aws:s3:::b",
}


@pytest.mark.parametrize("kind", list(VALUES))
def test_is_token_string_agrees_with_token_is_unresolved(kind):
    value = VALUES[kind]()
    assert is_token_string(value) == cdk.Token.is_unresolved(value)


def test_stack_of_is_stack_of_asked_once():
    app = cdk.App()
    stack = cdk.Stack(app, "S")
    inner = cdk.Stack(app, "T")
    from constructs import Construct

    child = Construct(Construct(inner, "A"), "B")
    assert stack_of(stack) is stack
    assert stack_of(child) is inner and stack_of(child) is cdk.Stack.of(child)
