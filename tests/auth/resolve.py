"""Synthesize a config's app and resolve every IAM document in it into concrete JSON.

The templates are environment-agnostic: ``AWS::AccountId``, ``AWS::Region`` and
``AWS::Partition`` are fixed here (:data:`ACCOUNT`, :data:`REGION`, :data:`PARTITION`),
and every ``Ref``, ``Fn::GetAtt``, ``Fn::Join``, ``Fn::Sub``, ``Fn::Select``,
``Fn::Split`` and ``Fn::ImportValue`` (across the app's stacks) is evaluated. Physical
names CloudFormation would generate are derived from the stack and logical ID, the
way it does (``<stack>-<logicalId>``), so two resources never share a name; names the
MIG custom resources compute are computed by the handler's own functions.

An intrinsic or attribute this module does not know raises :class:`Unresolved`: the
suite fails rather than evaluate a policy it could not read.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aws_cdk as cdk

from cdk_gpu_share.core.configuration.parse import load_config
from cdk_gpu_share.inference.handler import index as mig_handler
from cdk_gpu_share.stacks.app import build_platform

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "111122223333"
REGION = "us-east-1"
PARTITION = "aws"
FLAGS = {k: v for k, v in json.loads((ROOT / "cdk.json").read_text())["context"].items() if k.startswith("@aws-cdk")}

#: AWS managed policies the templates attach, as AWS publishes them.
MANAGED = {
    f"arn:{PARTITION}:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole": {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": ["logs:CreateLogGroup", "logs:CreateLogStream",
                                                     "logs:PutLogEvents"], "Resource": "*"}],
    },
    # The ECS agent's policy (version 7 as AWS publishes it).
    f"arn:{PARTITION}:iam::aws:policy/service-role/AmazonEC2ContainerServiceforEC2Role": {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": [
                "ec2:DescribeTags", "ecs:CreateCluster", "ecs:DeregisterContainerInstance", "ecs:DiscoverPollEndpoint",
                "ecs:Poll", "ecs:RegisterContainerInstance", "ecs:StartTelemetrySession",
                "ecs:UpdateContainerInstancesState", "ecs:Submit*", "ecr:GetAuthorizationToken",
                "ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage",
                "logs:CreateLogStream", "logs:PutLogEvents"], "Resource": "*"},
            {"Effect": "Allow", "Action": "ecs:TagResource", "Resource": "*", "Condition": {
                "StringEquals": {"ecs:CreateAction": ["CreateCluster", "RegisterContainerInstance"]}}},
        ],
    },
}


class Unresolved(Exception):
    pass


@dataclass
class Principal:
    """One IAM role of the app with its resolved documents."""

    stack: str
    logical_id: str
    path: str
    arn: str
    trust: dict
    policies: list[dict] = field(default_factory=list)  # {"name", "policy"}
    managed: list[str] = field(default_factory=list)


@dataclass
class App:
    config_path: str
    templates: dict[str, dict]
    principals: dict[str, Principal]  # by "<stack>/<logical id>"
    resolver: Resolver

    def role(self, stack: str, prefix: str) -> Principal:
        """The role of ``stack`` whose logical ID is ``prefix`` plus CDK's hash."""
        return self.principals[f"{stack}/{self.resolver.logical_id(stack, prefix, 'AWS::IAM::Role')}"]

    def attr(self, stack: str, prefix: str, attr: str | None = None) -> str:
        """The resolved Ref (or attribute) of the resource ``prefix<hash>`` of ``stack``."""
        lid = self.resolver.logical_id(stack, prefix)
        return self.resolver.resolve(stack, {"Ref": lid} if attr is None else {"Fn::GetAtt": [lid, attr]})

    def resources(self, kind: str) -> list[tuple[str, str, dict]]:
        """(stack, logical id, resource) of every resource of type ``kind``."""
        return [(s, lid, r) for s, t in self.templates.items() for lid, r in t["Resources"].items() if r["Type"] == kind]


class Resolver:
    def __init__(self, templates: dict[str, dict]) -> None:
        self.templates = templates
        self._exports: dict[str, tuple[str, Any]] | None = None

    # -- lookup
    def logical_id(self, stack: str, prefix: str, kind: str | None = None) -> str:
        """The one logical ID of ``stack`` that is ``prefix`` plus CDK's 8-character hash."""
        found = [lid for lid, r in self.templates[stack]["Resources"].items()
                 if re.fullmatch(re.escape(prefix) + r"(?:[0-9A-F]{8})?", lid) and (kind is None or r["Type"] == kind)]
        if len(found) != 1:
            raise Unresolved(f"{stack}: {len(found)} resources named {prefix}<hash>: {found}")
        return found[0]

    def _resource(self, stack: str, lid: str) -> dict:
        try:
            return self.templates[stack]["Resources"][lid]
        except KeyError:
            raise Unresolved(f"{stack}: no resource {lid}") from None

    def exports(self) -> dict[str, tuple[str, Any]]:
        if self._exports is None:
            self._exports = {}
            for stack, t in self.templates.items():
                for out in t.get("Outputs", {}).values():
                    if "Export" in out:
                        self._exports[self.resolve(stack, out["Export"]["Name"])] = (stack, out["Value"])
        return self._exports

    # -- evaluation
    def resolve(self, stack: str, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(stack, v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (key, arg), = value.items()
            if key == "Ref":
                return self.ref(stack, arg)
            if key == "Fn::GetAtt":
                lid, attr = arg if isinstance(arg, list) else arg.split(".", 1)
                return self.get_att(stack, lid, attr)
            if key == "Fn::Join":
                sep, parts = arg
                return sep.join(str(self.resolve(stack, p)) for p in parts)
            if key == "Fn::Select":
                index, items = arg
                return self.resolve(stack, items)[int(self.resolve(stack, index))]
            if key == "Fn::Split":
                sep, text = arg
                return str(self.resolve(stack, text)).split(sep)
            if key == "Fn::Sub":
                text, variables = (arg, {}) if isinstance(arg, str) else arg
                return self._sub(stack, text, variables)
            if key == "Fn::ImportValue":
                name = self.resolve(stack, arg)
                try:
                    source, val = self.exports()[name]
                except KeyError:
                    raise Unresolved(f"{stack}: import of {name}, which no stack exports") from None
                return self.resolve(source, val)
            if key.startswith("Fn::"):
                raise Unresolved(f"{stack}: intrinsic {key} not supported")
        return {k: self.resolve(stack, v) for k, v in value.items()}

    def _sub(self, stack: str, text: str, variables: dict) -> str:
        def one(m: re.Match) -> str:
            name = m.group(1)
            if name in variables:
                return str(self.resolve(stack, variables[name]))
            if "." in name and not name.startswith("AWS::"):
                lid, attr = name.split(".", 1)
                return str(self.get_att(stack, lid, attr))
            return str(self.ref(stack, name))

        return re.sub(r"\$\{([^}!]+)\}", one, text)

    def ref(self, stack: str, name: str) -> Any:
        pseudo = {"AWS::AccountId": ACCOUNT, "AWS::Region": REGION, "AWS::Partition": PARTITION,
                  "AWS::URLSuffix": "amazonaws.com", "AWS::StackName": stack, "AWS::NoValue": None}
        if name in pseudo:
            return pseudo[name]
        r = self._resource(stack, name)
        props = r.get("Properties", {})
        kind = r["Type"]
        if kind == "AWS::IAM::Role":
            return self._name(stack, name, props.get("RoleName"), 64)
        if kind == "AWS::Batch::JobQueue":
            return self.get_att(stack, name, "JobQueueArn")
        if kind == "AWS::Batch::JobDefinition":
            return self._arn("batch", f"job-definition/{self.resolve(stack, props['JobDefinitionName'])}:1")
        if kind == "AWS::Batch::ComputeEnvironment":
            return self._arn("batch", f"compute-environment/{self._name(stack, name, None, 128)}")
        if kind == "AWS::StepFunctions::StateMachine":
            return self._arn("states", f"stateMachine:{self._name(stack, name, props.get('StateMachineName'), 80)}")
        if kind == "AWS::SageMaker::Model":
            return self._arn("sagemaker", f"model/{self.get_att(stack, name, 'ModelName')}")
        if kind == "AWS::Lambda::Function":
            return self._name(stack, name, props.get("FunctionName"), 64)
        if kind == "AWS::DynamoDB::Table":
            return self._name(stack, name, props.get("TableName"), 255)
        if kind == "AWS::Logs::LogGroup":
            return self._name(stack, name, props.get("LogGroupName"), 512)
        if kind == "AWS::Batch::ConsumableResource":
            return self.get_att(stack, name, "ConsumableResourceArn")
        if kind == "AWS::SageMaker::ComputeQuota":
            return self.get_att(stack, name, "ComputeQuotaArn")
        if kind == "AWS::S3::Bucket":  # CloudFormation's generated names are lower case
            return self._name(stack, name, props.get("BucketName"), 63).lower()
        if kind == "AWS::KMS::Key":  # a key id
            digest = hashlib.sha256(f"{stack}/{name}".encode()).hexdigest()
            return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
        if kind == "AWS::KinesisFirehose::DeliveryStream":
            return self._name(stack, name, props.get("DeliveryStreamName"), 64)
        if kind == "AWS::Logs::LogStream":
            return self._name(stack, name, props.get("LogStreamName"), 512)
        raise Unresolved(f"{stack}: Ref of {kind} ({name}) not supported")

    def get_att(self, stack: str, lid: str, attr: str) -> Any:
        r = self._resource(stack, lid)
        props = r.get("Properties", {})
        kind = r["Type"]
        key = (kind, attr)
        if key == ("AWS::IAM::Role", "Arn"):
            path = props.get("Path", "/")
            return f"arn:{PARTITION}:iam::{ACCOUNT}:role{path}{self.ref(stack, lid)}"
        if key == ("AWS::Batch::JobQueue", "JobQueueArn"):
            return self._arn("batch", f"job-queue/{self._name(stack, lid, props.get('JobQueueName'), 128)}")
        if key == ("AWS::Batch::QuotaShare", "QuotaShareArn"):
            queue = self.resolve(stack, props["JobQueue"])
            return f"{queue}/quota-share/{self.resolve(stack, props['QuotaShareName'])}"
        if key == ("AWS::Batch::ConsumableResource", "ConsumableResourceArn"):
            name = self._name(stack, lid, props.get("ConsumableResourceName"), 128)
            return self._arn("batch", f"consumable-resource/{name}")
        if key == ("AWS::Lambda::Function", "Arn"):
            return self._arn("lambda", f"function:{self.ref(stack, lid)}")
        if key == ("AWS::Logs::LogGroup", "Arn"):
            return self._arn("logs", f"log-group:{self.ref(stack, lid)}:*")
        if key == ("AWS::DynamoDB::Table", "Arn"):
            return self._arn("dynamodb", f"table/{self._name(stack, lid, props.get('TableName'), 255)}")
        if key == ("AWS::SQS::Queue", "Arn"):
            return self._arn("sqs", self._name(stack, lid, props.get("QueueName"), 80))
        if key == ("AWS::S3::Bucket", "Arn"):
            return f"arn:{PARTITION}:s3:::{self.ref(stack, lid)}"
        if key == ("AWS::KMS::Key", "Arn"):
            return self._arn("kms", f"key/{self.ref(stack, lid)}")
        if key == ("AWS::KinesisFirehose::DeliveryStream", "Arn"):
            return self._arn("firehose", f"deliverystream/{self.ref(stack, lid)}")
        if key == ("AWS::SageMaker::Model", "ModelName"):
            return self.resolve(stack, props["ModelName"])
        if key == ("AWS::SageMaker::ComputeQuota", "ComputeQuotaArn"):
            return self._arn("sagemaker", f"compute-quota/{self.get_att(stack, lid, 'ComputeQuotaId')}")
        if key == ("AWS::SageMaker::ComputeQuota", "ComputeQuotaId"):
            return hashlib.sha256(f"{stack}/{lid}".encode()).hexdigest()[:12]
        if key == ("Custom::GpuShareMigEndpoint", "EndpointName"):
            return mig_handler.endpoint_name(self.resolve(stack, props))
        if key == ("Custom::GpuShareMigInferenceComponent", "InferenceComponentName"):
            return mig_handler.component_name(self.resolve(stack, props))
        raise Unresolved(f"{stack}: Fn::GetAtt {kind}.{attr} ({lid}) not supported")

    @staticmethod
    def _name(stack: str, lid: str, given: Any, limit: int) -> str:
        return given if isinstance(given, str) else f"{stack}-{lid}"[:limit]

    @staticmethod
    def _arn(service: str, resource: str) -> str:
        return f"arn:{PARTITION}:{service}:{REGION}:{ACCOUNT}:{resource}"


def synthesize(config_path: str) -> dict[str, dict]:
    """The templates of the app ``app.py`` builds from ``config_path`` (cdk-nag is asserted elsewhere)."""
    app = cdk.App(context=FLAGS, outdir=tempfile.mkdtemp(prefix="cdk-auth-"))
    build_platform(app, load_config(ROOT / config_path), checks=False)
    assembly = app.synth()
    return {s.stack_name: s.template for s in assembly.stacks}


def load_app(config_path: str) -> App:
    templates = synthesize(config_path)
    resolver = Resolver(templates)
    principals: dict[str, Principal] = {}
    by_role: dict[tuple[str, str], Principal] = {}
    for stack, t in templates.items():
        for lid, r in t["Resources"].items():
            if r["Type"] != "AWS::IAM::Role":
                continue
            props = r["Properties"]
            path = f"{stack}/{lid}"
            p = Principal(
                stack=stack, logical_id=lid, path=path,
                arn=resolver.get_att(stack, lid, "Arn"),
                trust=resolver.resolve(stack, props["AssumeRolePolicyDocument"]),
                managed=[resolver.resolve(stack, m) for m in props.get("ManagedPolicyArns", [])],
            )
            for inline in props.get("Policies", []):
                p.policies.append({"name": inline["PolicyName"], "policy": resolver.resolve(stack, inline["PolicyDocument"])})
            principals[path] = p
            by_role[(stack, lid)] = p
    for stack, t in templates.items():
        for lid, r in t["Resources"].items():
            if r["Type"] != "AWS::IAM::Policy":
                continue
            props = r["Properties"]
            document = resolver.resolve(stack, props["PolicyDocument"])
            for role in props.get("Roles", []):
                if not (isinstance(role, dict) and "Ref" in role):
                    raise Unresolved(f"{stack}/{lid}: role {role} is not a Ref of this stack")
                by_role[(stack, role["Ref"])].policies.append({"name": f"{stack}/{lid}", "policy": document})
    for p in principals.values():
        for arn in p.managed:
            if arn not in MANAGED:
                raise Unresolved(f"{p.path}: managed policy {arn} has no copy in tests/auth/resolve.py")
            p.policies.append({"name": arn.rsplit("/", 1)[-1], "policy": MANAGED[arn], "aws_managed": True})
    return App(config_path=config_path, templates=templates, principals=principals, resolver=resolver)
