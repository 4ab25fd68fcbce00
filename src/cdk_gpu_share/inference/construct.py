"""MigInferenceEndpoint: several models on MIG partitions of shared GPUs (SageMaker Inference).

SageMaker can carve every GPU of an endpoint into MIG partitions and place one
inference component copy on each: small models stop paying for a whole A100 or H100.
The layout is chosen when the endpoint is created, applies to every GPU of every
instance and cannot change while the endpoint runs; isolation covers the GPU only.
This construct refuses at synth time what SageMaker would refuse mid-deploy (the
rules live in :mod:`cdk_gpu_share.inference.config`, shared with the config).

Example::

    endpoint = MigInferenceEndpoint(self, "SmallModels",
        instance_type="ml.p4d.24xlarge",
        layout="half",                      # or ["mig-3g.20gb", "mig-3g.20gb"]
        models=[
            InferenceModelConfig(name="summarizer", image=IMAGE, profile="mig-3g.20gb",
                                 memory_mb=16384, copies=Copies(initial=2, min=1, max=4)),
            InferenceModelConfig(name="classifier", image=IMAGE, profile="mig-3g.20gb",
                                 memory_mb=8192),
        ],
    )
    endpoint.grant_invoke(app_role)
    endpoint.metric_invocations("summarizer")

What is plain CloudFormation and what is not
--------------------------------------------
* Plain CloudFormation: the execution role and its policy, one
  ``AWS::SageMaker::Model`` per model, the Application Auto Scaling targets and
  target-tracking policies (``SageMakerInferenceComponentInvocationsPerCopy``), and the
  whole-GPU endpoint (``EndpointConfig``, ``Endpoint``, ``InferenceComponent``) for models
  that need whole GPUs.
* Custom resources (CDK provider framework, Python handler in
  ``cdk_gpu_share/inference/handler``): the partitioned endpoint config and endpoint
  (``ProductionVariant.AcceleratorPartitionLayouts`` has no CloudFormation property) and
  one inference component per partitioned model
  (``ComputeResourceRequirements.AcceleratorPartitionType`` has none either; cfn-lint
  rejects both if forced in). The handler ships the SageMaker service model it needs
  (``AWS_DATA_PATH``), since the Lambda runtime's boto3 may not know the partition fields.

Lifecycle and what it costs
---------------------------
* Every SageMaker resource the handler makes has a deterministic name under
  ``<endpoint_name>-`` and the tags ``gpu-share:stack-id``, ``gpu-share:logical-id`` and
  ``gpu-share:generation``, so a Delete or a rollback finds what a failed or timed-out step
  left. Each step gets 50 minutes (the handler's budget) inside the provider framework's
  55 and CloudFormation's ``ServiceTimeout`` of 3,600 s; a step that runs out fails with
  the endpoint's name, its state and what was cleaned, and the rollback deletes the rest.
* A changed layout or instance type **replaces** the endpoint, new before old (SageMaker
  rejects a layout change on a running endpoint): for the whole update both endpoints
  run, so it needs twice the instance quota of the type and bills both (about the create
  time of an endpoint plus the component moves, typically 15-40 minutes). Without the
  quota, ``CreateEndpoint`` fails with ``ResourceLimitExceeded`` and the update rolls back
  with nothing left behind.
* Other variant changes (instance count, role, VPC) make a new endpoint config and call
  ``UpdateEndpoint``; a rolled-back update deletes the config it made.
* A changed model or image is a rolling update of one copy per batch (5 % of the copies
  above 20; ``DeploymentConfig``, rollback too): synth refuses ``copies.max`` that leave no
  free partitions per model for a batch. A changed ``profile`` creates a new component before
  CloudFormation deletes the old one, so the layout needs free partitions of the new
  profile for its copies meanwhile.
* Copies are set at create; after that Application Auto Scaling owns
  ``DesiredCopyCount`` (a changed ``copies.initial`` does not reset it; a changed
  ``min``/``max`` only moves it back inside). Fixed copies (``min == max``) are set.
* Delete removes the construct's own components, the endpoint and its configs. A
  component added by hand is never deleted: its endpoint is then kept, tagged
  ``gpu-share:retained`` and named in the handler's log. Deletes are idempotent: a
  resource already ``Deleting`` (the rollback after a component the handler deleted as
  ``Failed``, a Delete sent twice) is waited for until it is gone, one already gone is
  done, so a rollback does not end ``ROLLBACK_FAILED`` on it.

Models that need whole GPUs
---------------------------
A model that gives ``gpus`` instead of ``profile`` runs on a *separate* endpoint
without a layout (``whole_gpu_instance_type``), not on a second variant of the
partitioned endpoint: its lifecycle then never depends on the layout (a layout change
replaces the partitioned endpoint only), it can use another instance type, and
everything about it is plain CloudFormation.

Isolation
---------
MIG isolates GPU compute and memory only; CPU, host memory, disk and network are
shared by every model on an instance. When models of different teams share the
partitioned endpoint the construct adds a warning annotation.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import custom_resources as cr
from constructs import Construct

from cdk_gpu_share.constructs._checks import (
    acknowledge_nag,
    acknowledge_role_dependency,
    nag_arn,
    raise_props_problems,
)
from cdk_gpu_share.constructs._iam import add_statements
from cdk_gpu_share.constructs._metrics import InferenceComponentMetrics
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.inference.config import (
    Copies,
    InferenceEndpointConfig,
    InferenceModelConfig,
    InferenceVpcConfig,
    WholeGpuConfig,
    endpoint_layout,
    endpoint_problems,
    model_profile,
    teams_sharing,
)

if TYPE_CHECKING:
    from cdk_gpu_share.constructs._metrics import InferenceComponentMetrics
    from cdk_gpu_share.core.configuration.parse import PlatformConfig

__all__ = [
    "MigInferenceEndpoint",
    "endpoints_from_config",
    "Copies",
    "InferenceModelConfig",
    "InferenceVpcConfig",
    "HANDLER_DIR",
    "SHARED_INSTANCE_WARNING",
]

HANDLER_DIR = Path(__file__).resolve().parent / "handler"
VARIANT = "AllTraffic"
#: The tag the handler puts on everything it creates; its IAM permissions rely on it.
ENDPOINT_TAG = "gpu-share:endpoint"
SHARED_INSTANCE_WARNING = "@cdk-gpu-share/mig:shared-instance"
#: Instance families with local NVMe storage: SageMaker refuses a KmsKeyId on them.
LOCAL_STORAGE_FAMILIES = {"p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "g4dn", "g5", "g6", "g6e", "p3dn"}
INVOKE_ACTIONS = [
    "sagemaker:InvokeEndpoint",
    "sagemaker:InvokeEndpointWithResponseStream",
    "sagemaker:InvokeEndpointAsync",
]
_ECR_IMAGE = re.compile(r"^(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/([^:@]+)")
_S3_URL = re.compile(r"^s3://([^/]+)/(.*)$")


#: CloudFormation waits at most this long for each request of a custom resource
#: (``ServiceTimeout``: 1 to 3,600 s).
SERVICE_TIMEOUT = cdk.Duration.seconds(3600)
#: The provider framework's wait loop (its ``totalTimeout`` is at most one hour). Shorter than
#: ``SERVICE_TIMEOUT`` so that the framework, never CloudFormation's timeout, answers and
#: CloudFormation learns the physical id; the handler's own budget (``BUDGET_SECONDS`` in
#: the handler, 50 min) is shorter still, so the handler fails first with a message that
#: names the endpoint, its state and what was cleaned.
PROVIDER_TOTAL_TIMEOUT = cdk.Duration.minutes(55)
PROVIDER_QUERY_INTERVAL = cdk.Duration.seconds(30)


def _hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:6]


def _family(instance_type: str) -> str:
    return instance_type.removeprefix("ml.").split(".")[0]


class _Provider(Construct):
    """One provider (and one handler role) per stack, shared by every MigInferenceEndpoint."""

    ID = "GpuShareMigEndpointProvider"

    @classmethod
    def of(cls, scope: Construct) -> _Provider:
        stack = cdk.Stack.of(scope)
        existing = stack.node.try_find_child(cls.ID)
        return cast(_Provider, existing) if existing is not None else cls(stack, cls.ID)

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        self.role = iam.Role(
            self,
            "HandlerRole",
            description="cdk-gpu-share: creates MIG-partitioned SageMaker endpoints and inference components",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        )
        code = lambda_.Code.from_asset(
            str(HANDLER_DIR), exclude=["__pycache__", "*.pyc", "_vendor.py", "__init__.py"]
        )
        common: dict[str, Any] = dict(
            runtime=lambda_.Runtime.PYTHON_3_14,
            code=code,
            role=self.role,
            memory_size=256,
            timeout=cdk.Duration.minutes(5),
            # botocore searches AWS_DATA_PATH first: the SageMaker model shipped in
            # the asset knows AcceleratorPartitionLayouts and AcceleratorPartitionType.
            environment={"AWS_DATA_PATH": "/var/task/data"},
            description="cdk-gpu-share MIG endpoint custom resource",
        )
        functions = []
        for fid, handler in (("OnEvent", "index.on_event"), ("IsComplete", "index.is_complete")):
            log_group = logs.LogGroup(
                self, f"{fid}Logs", retention=logs.RetentionDays.THREE_MONTHS, removal_policy=cdk.RemovalPolicy.DESTROY
            )
            functions.append(lambda_.Function(self, fid, handler=handler, log_group=log_group, **common))
            self.role.add_to_policy(
                iam.PolicyStatement(
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[log_group.log_group_arn],
                )
            )
        self.on_event, self.is_complete = functions
        self.role.add_to_policy(
            iam.PolicyStatement(
                # ListInferenceComponents supports no resource-level permission.
                actions=["sagemaker:ListInferenceComponents"],
                resources=["*"],
            )
        )
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.on_event,
            is_complete_handler=self.is_complete,
            query_interval=PROVIDER_QUERY_INTERVAL,
            # A p4d/p5 endpoint takes 10-30 minutes, longer when capacity is short; the
            # framework allows at most one hour and CloudFormation's ServiceTimeout too.
            total_timeout=PROVIDER_TOTAL_TIMEOUT,
        )
        self._acknowledge()

    def _acknowledge(self) -> None:
        stack = cdk.Stack.of(self)
        # aws-cdk-lib's DependsOn on each role that Role/RoleArn already names (cfn-lint W3005).
        # The framework's waiter is a plain CfnResource of a construct of its own, not an sfn.StateMachine.
        waiters = [c for c in self.provider.node.find_all() if isinstance(c.node.default_child, cdk.CfnResource)
                   and c.node.default_child.cfn_resource_type == "AWS::StepFunctions::StateMachine"]
        for owner in (self.on_event, self.is_complete, *self._framework_functions(), *waiters):
            acknowledge_role_dependency(owner)
        acknowledge_nag(
            self.role,
            "AwsSolutions-IAM5",
            "sagemaker:ListInferenceComponents supports no resource-level permission; the handler lists the"
            " components of its own endpoint before deleting it",
            findings=["Resource::*"],
        )
        acknowledge_nag(
            self.provider,
            "AwsSolutions-IAM4",
            "the CDK provider framework's functions use AWSLambdaBasicExecutionRole for their own logs",
            findings=["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"],
        )
        acknowledge_nag(
            self.provider,
            "AwsSolutions-IAM5",
            "the provider framework invokes the handler functions by ARN with any version qualifier (:*),"
            " as aws-cdk-lib's custom_resources.Provider generates it",
            findings=[
                f"Resource::<{stack.get_logical_id(cast(cdk.CfnElement, fn.node.default_child))}.Arn>:*"
                for fn in (self.on_event, self.is_complete, *self._framework_functions())
            ],
        )
        acknowledge_nag(
            self.provider,
            "AwsSolutions-L1",
            "the provider framework's Node.js functions use the runtime aws-cdk-lib pins for them",
        )
        acknowledge_nag(
            self.provider,
            "AwsSolutions-SF1",
            "the provider framework's waiter state machine only polls is_complete; the handler logs every"
            " SageMaker call to CloudWatch Logs",
        )
        acknowledge_nag(
            self.provider,
            "AwsSolutions-SF2",
            "the waiter state machine of the provider framework is internal plumbing; X-Ray adds nothing to"
            " its single retry loop",
        )

    def _framework_functions(self) -> list[lambda_.Function]:
        return [c for c in self.provider.node.find_all() if isinstance(c, lambda_.Function)]

    def allow(self, base: str, role: iam.IRole, models: Sequence[str] = ()) -> None:
        """Let the handler manage the endpoint, configs and components of the construct named ``base``.

        The one place that builds the handler's permissions for one endpoint. Names are
        ``<base>-*`` (the handler adds generation suffixes), and every resource the handler
        creates carries the tag ``gpu-share:endpoint=<base>``: creations must carry it
        (``aws:RequestTag``), and changes and deletions are refused on a resource tagged for
        another endpoint (``StringEqualsIfExists aws:ResourceTag``; a resource that does not
        exist yet, or any more, has no tags, and the handler must still see its not-found
        error). So another endpoint whose name merely starts with ``<base>-`` stays out of
        reach. ``CreateInferenceComponent`` authorizes no model resource; its
        ``sagemaker:ModelArn`` must be one of ``models`` (this construct's models, ``ArnEquals``). No
        permission on ``model/*`` at all: CloudFormation creates the models.
        """
        stack = cdk.Stack.of(self)

        def arns(*kinds: str) -> list[str]:
            return [stack.format_arn(service="sagemaker", resource=k, resource_name=f"{base}-*") for k in kinds]

        own = {"StringEquals": {f"aws:RequestTag/{ENDPOINT_TAG}": base}}
        mine = {"StringEqualsIfExists": {f"aws:ResourceTag/{ENDPOINT_TAG}": base}}
        # sagemaker:ModelArn is an ARN condition key: an ARN operator compares it.
        models_only = {"StringEquals": {f"aws:RequestTag/{ENDPOINT_TAG}": base},
                       "ArnEquals": {"sagemaker:ModelArn": list(models) or ["none"]}}
        # One statement per set of resource types an action authorizes (Service Authorization
        # Reference for SageMaker), so that no statement names a resource its actions ignore.
        grants: list[tuple[list[str], tuple[str, ...], dict | None]] = [
            (["sagemaker:CreateEndpointConfig"], ("endpoint-config",), own),
            (["sagemaker:CreateEndpoint"], ("endpoint", "endpoint-config"), own),
            (["sagemaker:AddTags"], ("endpoint", "endpoint-config", "inference-component"), own),
            (["sagemaker:CreateInferenceComponent"], ("endpoint", "inference-component"), models_only),
            (["sagemaker:UpdateEndpoint"], ("endpoint", "endpoint-config"), mine),
            (["sagemaker:DeleteEndpoint"], ("endpoint",), mine),
            (["sagemaker:DeleteEndpointConfig"], ("endpoint-config",), mine),
            (["sagemaker:UpdateInferenceComponent", "sagemaker:UpdateInferenceComponentRuntimeConfig",
              "sagemaker:DeleteInferenceComponent"], ("inference-component",), mine),
            (["sagemaker:DescribeEndpoint"], ("endpoint",), None),
            (["sagemaker:DescribeInferenceComponent"], ("inference-component",), None),
        ]
        for actions, kinds, conditions in grants:
            self.role.add_to_policy(iam.PolicyStatement(actions=actions, resources=arns(*kinds), conditions=conditions))
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
            )
        )
        acknowledge_nag(
            self.role,
            "AwsSolutions-IAM5",
            "SageMaker resource names end in a generation suffix (a new endpoint or component replaces the old"
            " one when the layout or partition type changes); the wildcard covers that suffix only, and the"
            " gpu-share:endpoint tag keeps other endpoints out",
            findings=[
                f"Resource::{nag_arn(stack, 'sagemaker', f'{kind}/{base}-*')}"
                for kind in ("endpoint", "endpoint-config", "inference-component")
            ],
        )

    @property
    def service_token(self) -> str:
        return self.provider.service_token


class MigInferenceEndpoint(Construct):
    """A SageMaker endpoint whose GPUs are split into MIG partitions, one model copy per partition.

    The partitioned endpoint is the ``Resource`` child (a custom resource). See the
    module docstring for what is plain CloudFormation and what is not.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        instance_type: str,
        layout: str | Sequence[str],
        models: Sequence[InferenceModelConfig],
        instance_count: int = 1,
        endpoint_name: str | None = None,
        whole_gpu_instance_type: str | None = None,
        whole_gpu_instance_count: int = 1,
        vpc_config: InferenceVpcConfig | None = None,
        kms_key: kms.IKey | None = None,
        role: iam.IRole | None = None,
    ) -> None:
        """
        :param instance_type: a SageMaker instance type with MIG-capable GPUs, such as ``ml.p4d.24xlarge``.
        :param layout: the partitions of every GPU: a preset (``half``, ``balanced``, ...; see
            ``gpu-share mig layouts``) or a list of MIG profiles. The order is kept: SageMaker compares
            layouts in order, and any change creates a new endpoint (old and new run side by side for the
            update: twice the instance quota and cost; see the module docstring).
        :param models: the models; each gives ``profile`` (one partition per copy) or ``gpus``
            (whole GPUs per copy, on the whole-GPU endpoint).
        :param instance_count: instances of the partitioned endpoint. Default: 1.
        :param endpoint_name: base name of the SageMaker resources (lower-case letters, digits,
            hyphens; at most 40 characters); the endpoint is named ``<endpoint_name>-<6 hex>``.
            Default: the construct id, lower-cased.
        :param whole_gpu_instance_type: instance type of the endpoint without partitions, for the
            models that give ``gpus``. Default: none (such models are refused).
        :param whole_gpu_instance_count: instances of that endpoint. Default: 1.
        :param vpc_config: subnets and security groups for the models. Default: no VPC.
        :param kms_key: the key that encrypts the model data in S3; the execution role may decrypt
            with it. (The ML storage volume cannot take a key: every MIG instance type has local NVMe
            storage, where SageMaker refuses ``KmsKeyId``.) Default: none.
        :param role: the execution role of the models and endpoints. Default: a role with the least
            it needs: pull the images, read the model data, write logs and metrics.
        """
        base = endpoint_name if endpoint_name is not None else re.sub(r"[^a-z0-9-]+", "-", id.lower()).strip("-")
        spec = InferenceEndpointConfig(
            name=base,
            instance_type=instance_type,
            instance_count=instance_count,
            layout=layout if isinstance(layout, str) else tuple(layout),
            models=tuple(models),
            whole_gpu=WholeGpuConfig(whole_gpu_instance_type, whole_gpu_instance_count) if whole_gpu_instance_type else None,
        )
        # The rules of an endpoint of the config's inference section, before any resource.
        raise_props_problems(endpoint_problems(spec, vpc=vpc_config), scope, id)
        super().__init__(scope, id)
        self.spec = spec
        self.base_name = base
        self.layout: list[str] = endpoint_layout(self.spec)
        self.vpc_config = vpc_config
        self.models = {m.name: m for m in models}
        stack = cdk.Stack.of(self)

        # ---- execution role
        self.role = role or iam.Role(
            self,
            "ExecutionRole",
            description=f"cdk-gpu-share: SageMaker execution role of endpoint {base}",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
        )
        if role is None:
            self._grant_execution(self.role, kms_key)

        # ---- one SageMaker model per model
        self.cfn_models: dict[str, sagemaker.CfnModel] = {}
        for m in models:
            self.cfn_models[m.name] = self._model(m)

        # ---- the partitioned endpoint (custom resource)
        self.endpoint = self._partitioned_endpoint(base, instance_type, instance_count, models, vpc_config)

        self._components(models, base, whole_gpu_instance_type, whole_gpu_instance_count, kms_key)

        self._warn_shared_instances(base, models)
        del stack

    # ------------------------------------------------------------------ building blocks

    def _components(self, models: Sequence[InferenceModelConfig], base: str, whole_gpu_instance_type: str | None,
                    whole_gpu_instance_count: int, kms_key: kms.IKey | None) -> None:
        """One inference component per partitioned model; the models that need whole GPUs on an
        endpoint of their own, in plain CloudFormation."""
        self.components: dict[str, Any] = {}
        self._component_names: dict[str, str] = {}
        self._component_endpoint: dict[str, str] = {}
        self.scalable_targets: dict[str, appscaling.CfnScalableTarget] = {}
        for m in models:
            if m.partitioned:
                self._partitioned_component(m, base)
        self.whole_gpu_endpoint: sagemaker.CfnEndpoint | None = None
        whole = [m for m in models if not m.partitioned]
        if whole:
            self._whole_gpu(whole, base, whole_gpu_instance_type, whole_gpu_instance_count, kms_key)

    def _partitioned_endpoint(self, base: str, instance_type: str, instance_count: int,
                              models: Sequence[InferenceModelConfig],
                              vpc_config: InferenceVpcConfig | None) -> cdk.CustomResource:
        """The endpoint whose GPUs are split (a custom resource: CloudFormation has no property for MIG)."""
        provider = _Provider.of(self)
        provider.allow(base, self.role, [self.cfn_models[m.name].ref for m in models if m.partitioned])
        self._provider = provider
        props: dict[str, Any] = {
            "Kind": "Endpoint",
            "EndpointBaseName": base,
            "InstanceType": instance_type,
            "InstanceCount": instance_count,
            "Layout": self.layout,
            "ExecutionRoleArn": self.role.role_arn,
            "VariantName": VARIANT,
            "Tags": [{"Key": ENDPOINT_TAG, "Value": base}],
        }
        if vpc_config is not None:
            props["VpcConfig"] = {
                "SecurityGroupIds": list(vpc_config.security_group_ids),
                "Subnets": list(vpc_config.subnet_ids),
            }
        endpoint = cdk.CustomResource(
            self,
            "Resource",
            service_token=provider.service_token,
            resource_type="Custom::GpuShareMigEndpoint",
            properties=props,
            service_timeout=SERVICE_TIMEOUT,
        )
        self._after_role_policy(endpoint)
        return endpoint

    def _warn_shared_instances(self, base: str, models: Sequence[InferenceModelConfig]) -> None:
        """MIG isolates GPU compute and memory only: teams that share an endpoint share its host."""
        teams = teams_sharing([m for m in models if m.partitioned])
        if teams:
            cdk.Annotations.of(self).add_warning_v2(
                SHARED_INSTANCE_WARNING,
                f"models of teams {', '.join(teams)} share the instances of endpoint {base}: MIG isolates GPU"
                " compute and memory only; CPU, host memory, disk and network stay shared. Give each team its"
                " own endpoint if that matters",
            )

    def _image_repositories(self, stack: cdk.Stack) -> list[str]:
        """The ECR repositories of the models' images (images elsewhere need no grant here)."""
        repos: list[str] = []
        for m in self.spec.models:
            match = _ECR_IMAGE.match(m.image)
            if match:
                account, region, repo = match.groups()
                repos.append(f"arn:{stack.partition}:ecr:{region}:{account}:repository/{repo}")
        return repos

    def _model_objects(self, stack: cdk.Stack) -> list[str]:
        """The S3 objects of the models' data (a prefix ending in ``/``: every object under it)."""
        objects = []
        for m in self.spec.models:
            if m.model_data_url:
                match = _S3_URL.match(m.model_data_url)
                if match:
                    bucket, key = match.groups()
                    objects.append(f"arn:{stack.partition}:s3:::{bucket}/{key}{'*' if key.endswith('/') else ''}")
        return objects

    def _grant_execution(self, role: iam.IRole, kms_key: kms.IKey | None) -> None:
        def add(statement: iam.PolicyStatement) -> None:
            add_statements(role, [statement])  # for a Role: one jsii round trip, not three

        stack = cdk.Stack.of(self)
        repos, objects = self._image_repositories(stack), self._model_objects(stack)
        if repos:
            add(
                iam.PolicyStatement(
                    actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                    resources=sorted(set(repos)),
                )
            )
        add(
            iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"])
        )
        if objects:
            add(iam.PolicyStatement(actions=["s3:GetObject"], resources=sorted(set(objects))))
        logs = [
            stack.format_arn(
                service="logs",
                resource="log-group",
                resource_name=f"/aws/sagemaker/{kind}/{self.spec.name}-*",
                arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
            )
            for kind in ("Endpoints", "InferenceComponents")
        ]
        add(
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=logs,
            )
        )
        add(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*", "AWS/SageMaker"]}},
            )
        )
        if self.vpc_config is not None:
            add(
                iam.PolicyStatement(
                    actions=[
                        "ec2:CreateNetworkInterface",
                        "ec2:CreateNetworkInterfacePermission",
                        "ec2:DeleteNetworkInterface",
                        "ec2:DeleteNetworkInterfacePermission",
                        "ec2:DescribeNetworkInterfaces",
                        "ec2:DescribeVpcs",
                        "ec2:DescribeDhcpOptions",
                        "ec2:DescribeSubnets",
                        "ec2:DescribeSecurityGroups",
                    ],
                    resources=["*"],
                )
            )
        if kms_key is not None:
            kms_key.grant_decrypt(role)
        findings = ["Resource::*"] + [
            f"Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws/sagemaker/{kind}/"
            f"{self.spec.name}-*"
            for kind in ("Endpoints", "InferenceComponents")
        ]
        findings += [f"Resource::{o.replace(f'arn:{stack.partition}', 'arn:<AWS::Partition>')}" for o in objects if o.endswith("*")]
        acknowledge_nag(
            role,
            "AwsSolutions-IAM5",
            "ecr:GetAuthorizationToken and cloudwatch:PutMetricData (limited to the SageMaker namespaces by"
            " condition) take no resource, nor do the ec2 network-interface actions SageMaker uses in a VPC;"
            " SageMaker names one log group per endpoint and component under the endpoint's prefix",
            findings=findings,
        )

    def _model(self, m: InferenceModelConfig) -> sagemaker.CfnModel:
        container: dict[str, Any] = {"image": m.image}
        if m.model_data_url:
            container["model_data_url"] = m.model_data_url
        if m.environment:
            container["environment"] = dict(m.environment)
        vpc = None
        if self.vpc_config is not None:
            vpc = sagemaker.CfnModel.VpcConfigProperty(
                security_group_ids=list(self.vpc_config.security_group_ids), subnets=list(self.vpc_config.subnet_ids)
            )
        # Every property of AWS::SageMaker::Model is create-only: the name carries a hash of
        # them so that a replacement gets a new name (and the handler's grant covers <base>-*).
        digest = _hash([container, m.network_isolation, self.vpc_config, cdk.Stack.of(self).resolve(self.role.role_arn)])
        model = sagemaker.CfnModel(
            self,
            f"Model-{m.name}",
            model_name=f"{self.spec.name}-{m.name}-{digest}",
            execution_role_arn=self.role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(**container),
            enable_network_isolation=m.network_isolation,
            vpc_config=vpc,
        )
        self._after_role_policy(model)
        if self.vpc_config is None:
            acknowledge_nag(
                model,
                "AwsSolutions-SM1",
                "no vpc_config was given: the model runs in SageMaker's managed network; pass vpc_config"
                " (inference.vpc in the config) to place it in your subnets",
            )
        if not m.network_isolation:
            acknowledge_nag(
                model,
                "AwsSolutions-SM3",
                f"model {m.name} sets network_isolation: false because its container needs the network"
                " (for example to download weights)",
            )
        return model

    def _after_role_policy(self, resource: Construct) -> None:
        """Create ``resource`` after the execution role's policy (SageMaker checks access at creation)."""
        policy = self.role.node.try_find_child("DefaultPolicy")
        if policy is not None:
            resource.node.add_dependency(policy)

    def _scaling(self, m: InferenceModelConfig, name: str, dependency: Construct | None) -> None:
        """Target tracking of invocations per copy, between ``copies.min`` and ``copies.max``.

        L1 resources without ``RoleARN``: Application Auto Scaling uses its service-linked
        role for SageMaker (the L2 ``ScalableTarget`` would add a role with no permissions).
        """
        if not m.copies.autoscaled:
            return
        target = appscaling.CfnScalableTarget(
            self,
            f"Scaling-{m.name}",
            service_namespace="sagemaker",
            resource_id=f"inference-component/{name}",
            scalable_dimension="sagemaker:inference-component:DesiredCopyCount",
            min_capacity=m.copies.min,
            max_capacity=m.copies.max,
        )
        if dependency is not None:  # the name is a literal: register after the component exists
            target.node.add_dependency(dependency)
        appscaling.CfnScalingPolicy(
            self,
            f"Scaling-{m.name}-InvocationsPerCopy",
            policy_name=f"{self.spec.name}-{m.name}-invocations-per-copy",
            policy_type="TargetTrackingScaling",
            scaling_target_id=target.ref,
            target_tracking_scaling_policy_configuration=appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
                target_value=m.invocations_per_copy,
                predefined_metric_specification=appscaling.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                    predefined_metric_type="SageMakerInferenceComponentInvocationsPerCopy"
                ),
            ),
        )
        self.scalable_targets[m.name] = target

    def _partitioned_component(self, m: InferenceModelConfig, base: str) -> None:
        props: dict[str, Any] = {
            "Kind": "InferenceComponent",
            "ComponentBaseName": f"{base}-{m.name}",
            "EndpointName": self.endpoint.get_att_string("EndpointName"),
            "VariantName": VARIANT,
            "ModelName": self.cfn_models[m.name].attr_model_name,
            "AcceleratorPartitionType": model_profile(self.spec, m),
            "NumberOfAcceleratorDevicesRequired": 1,
            "MinMemoryRequiredInMb": m.memory_mb,
            "CopyCount": m.copies.initial,
            "MinCopyCount": m.copies.min,
            "MaxCopyCount": m.copies.max,
            "Tags": [{"Key": ENDPOINT_TAG, "Value": base}] + ([{"Key": "gpu-share:team", "Value": m.team}] if m.team else []),
        }
        if m.cpus is not None:
            props["NumberOfCpuCoresRequired"] = m.cpus
        component = cdk.CustomResource(
            self,
            f"Component-{m.name}",
            service_token=self._provider.service_token,
            resource_type="Custom::GpuShareMigInferenceComponent",
            properties=props,
            service_timeout=SERVICE_TIMEOUT,
        )
        name = component.get_att_string("InferenceComponentName")
        self.components[m.name] = component
        self._component_names[m.name] = name
        self._component_endpoint[m.name] = "partitioned"
        self._scaling(m, name, None)  # the name is the component's attribute: an implicit dependency

    def _whole_gpu(
        self,
        models: list[InferenceModelConfig],
        base: str,
        instance_type: str | None,
        instance_count: int,
        kms_key: kms.IKey | None,
    ) -> None:
        assert instance_type is not None  # check_endpoint refused it otherwise
        vpc = None
        if self.vpc_config is not None:
            vpc = sagemaker.CfnEndpointConfig.VpcConfigProperty(
                security_group_ids=list(self.vpc_config.security_group_ids), subnets=list(self.vpc_config.subnet_ids)
            )
        local_storage = _family(instance_type) in LOCAL_STORAGE_FAMILIES
        config = sagemaker.CfnEndpointConfig(
            self,
            "WholeGpuEndpointConfig",
            # Inference components: a variant without ModelName, and the execution role.
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=VARIANT, instance_type=instance_type, initial_instance_count=instance_count
                )
            ],
            execution_role_arn=self.role.role_arn,
            vpc_config=vpc,
            kms_key_id=kms_key.key_arn if (kms_key is not None and not local_storage) else None,
        )
        self._after_role_policy(config)
        if kms_key is None or local_storage:
            acknowledge_nag(
                config,
                "AwsSolutions-SM2",
                f"{instance_type} has local NVMe instance storage, where SageMaker refuses a KmsKeyId (the volume"
                " is encrypted by the hardware)"
                if local_storage
                else "no kms_key was given for the ML storage volume; SageMaker encrypts it with an AWS managed key",
            )
        endpoint = sagemaker.CfnEndpoint(
            self, "WholeGpuEndpoint", endpoint_name=f"{base}-whole", endpoint_config_name=config.attr_endpoint_config_name
        )
        self.whole_gpu_endpoint = endpoint
        for m in models:
            resources = sagemaker.CfnInferenceComponent.InferenceComponentComputeResourceRequirementsProperty(
                number_of_accelerator_devices_required=m.gpus,
                min_memory_required_in_mb=m.memory_mb,
                number_of_cpu_cores_required=m.cpus,
            )
            # No property of AWS::SageMaker::InferenceComponent is create-only: a fixed name is safe.
            name = f"{base}-{m.name}"
            component = sagemaker.CfnInferenceComponent(
                self,
                f"Component-{m.name}",
                inference_component_name=name,
                endpoint_name=endpoint.attr_endpoint_name,
                variant_name=VARIANT,
                specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                    model_name=self.cfn_models[m.name].attr_model_name, compute_resource_requirements=resources
                ),
                runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(
                    copy_count=m.copies.initial
                ),
            )
            self.components[m.name] = component
            self._component_names[m.name] = name
            self._component_endpoint[m.name] = "whole"
            self._scaling(m, name, component)

    # ------------------------------------------------------------------ public API

    @property
    def endpoint_name(self) -> str:
        """The partitioned endpoint's name (a token: ``<endpoint_name>-<6 hex>``)."""
        return self.endpoint.get_att_string("EndpointName")

    @property
    def endpoint_arn(self) -> str:
        """The partitioned endpoint's ARN (a token)."""
        return self.endpoint.get_att_string("EndpointArn")

    @property
    def whole_gpu_endpoint_name(self) -> str | None:
        """The whole-GPU endpoint's name (a token), or None when no model needs whole GPUs."""
        return self.whole_gpu_endpoint.attr_endpoint_name if self.whole_gpu_endpoint is not None else None

    def endpoint_name_of(self, model: str) -> str:
        """The endpoint that serves ``model`` (partitioned or whole-GPU)."""
        self._require(model)
        if self._component_endpoint[model] == "whole":
            assert self.whole_gpu_endpoint is not None
            return self.whole_gpu_endpoint.attr_endpoint_name
        return self.endpoint_name

    def inference_component_name(self, model: str) -> str:
        """The name to pass as ``InferenceComponentName`` when invoking ``model``."""
        return self._component_names[self._require(model)]

    def _require(self, model: str) -> str:
        if model not in self.models:
            raise ConfigError(
                Problem("model", model, "is not a model of this endpoint", f"use one of {', '.join(self.models)}"),
                source=self.node.path,
            )
        return model

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` invoke every model of this construct (``InvokeEndpoint`` and streaming/async).

        Callers must name the model with ``InferenceComponentName`` (see
        :meth:`inference_component_name`); the permission is on the endpoint(s).
        """
        arns = [self.endpoint_arn]
        if self.whole_gpu_endpoint is not None:
            arns.append(self.whole_gpu_endpoint.ref)
        return iam.Grant.add_to_principal(grantee=grantee, actions=INVOKE_ACTIONS, resource_arns=arns)

    @property
    def metrics(self) -> InferenceComponentMetrics:
        """SageMaker's per-inference-component metric factory (1-minute period), shared with
        :class:`~cdk_gpu_share.constructs.dashboard.InferenceDashboard`."""
        return InferenceComponentMetrics(self.inference_component_name)

    def metric(self, model: str, metric_name: str, **props: Any) -> cloudwatch.Metric:
        """A CloudWatch metric of ``model``'s inference component (``AWS/SageMaker``)."""
        return self.metrics.metric(model, metric_name, **props)

    def metric_invocations(self, model: str, **props: Any) -> cloudwatch.Metric:
        """Requests sent to ``model``. Default: sum over 1 minute."""
        return self.metrics.metric_invocations(model, **props)

    def metric_invocations_per_copy(self, model: str, **props: Any) -> cloudwatch.Metric:
        """Requests per copy: what the autoscaling policy tracks. Default: sum over 1 minute."""
        return self.metrics.metric_invocations_per_copy(model, **props)

    def metric_model_latency(self, model: str, **props: Any) -> cloudwatch.Metric:
        """Time the model took to answer, in microseconds. Default: p90 over 1 minute."""
        return self.metrics.metric_model_latency(model, **props)

    def metric_invocation_4xx_errors(self, model: str, **props: Any) -> cloudwatch.Metric:
        """Requests of ``model`` answered with a 4xx. Default: sum over 1 minute."""
        return self.metrics.metric_invocation_4xx_errors(model, **props)

    def metric_invocation_5xx_errors(self, model: str, **props: Any) -> cloudwatch.Metric:
        """Requests of ``model`` answered with a 5xx. Default: sum over 1 minute."""
        return self.metrics.metric_invocation_5xx_errors(model, **props)

    def metric_model_errors(self, model: str, **props: Any) -> cloudwatch.Metric:
        """Requests the model container failed (``InvocationModelErrors``). Default: sum over 1 minute."""
        return self.metrics.metric_model_errors(model, **props)

    def metric_copies(self, model: str, **props: Any) -> cloudwatch.MathExpression:
        """Copies serving ``model`` (Invocations / InvocationsPerCopy; empty without requests)."""
        return self.metrics.metric_copies(model, **props)


def endpoints_from_config(scope: Construct, config: PlatformConfig) -> list[MigInferenceEndpoint]:
    """Build one :class:`MigInferenceEndpoint` per ``config.inference.endpoints`` entry in ``scope``.

    Adds stack outputs: each endpoint's name and each model's endpoint and
    inference component name (what a client needs to invoke it).
    """
    inference = config.inference
    if inference is None:
        return []
    kms_key = kms.Key.from_key_arn(scope, "InferenceModelDataKey", inference.kms_key_arn) if inference.kms_key_arn else None
    built: list[MigInferenceEndpoint] = []
    for e in inference.endpoints:
        endpoint = MigInferenceEndpoint(
            scope,
            f"MigEndpoint-{e.name}",
            endpoint_name=e.name,
            instance_type=e.instance_type,
            instance_count=e.instance_count,
            layout=e.layout,
            models=e.models,
            whole_gpu_instance_type=e.whole_gpu.instance_type if e.whole_gpu else None,
            whole_gpu_instance_count=e.whole_gpu.instance_count if e.whole_gpu else 1,
            vpc_config=inference.vpc,
            kms_key=kms_key,
        )
        ident = re.sub(r"[^A-Za-z0-9]", "", e.name.title())
        cdk.CfnOutput(scope, f"{ident}EndpointName", value=endpoint.endpoint_name, description=f"MIG endpoint {e.name}")
        for m in e.models:
            mid = re.sub(r"[^A-Za-z0-9]", "", m.name.title())
            cdk.CfnOutput(
                scope,
                f"{ident}{mid}InferenceComponent",
                value=endpoint.inference_component_name(m.name),
                description=f"InferenceComponentName of model {m.name} on endpoint {e.name}",
            )
        built.append(endpoint)
    return built
