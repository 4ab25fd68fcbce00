"""The job archive: every Batch job event of the platform's queues, kept in S3 (``history:``).

An EventBridge rule sends AWS Batch's ``Batch Job State Change`` and ``Batch Service Job State
Change`` events of the platform's queues, and Batch quota management's preemption events, to
an Amazon Data Firehose delivery stream, which writes them, one JSON object a line
(``AppendDelimiterToRecord``) and gzip-compressed, to an S3 bucket, under the keys
docs/history.md describes ("Object keys"; :data:`ARCHIVE_PREFIX`, the UTC day, the config's
policy hash). A Lambda adds one details record per service job
(:mod:`cdk_gpu_share.lambdas.history_details`). Design and costs: docs/history.md.

* **Encryption**: a customer-managed KMS key (rotated yearly), with an S3 bucket key. The key is
  a second gate besides the bucket policy: reading an object needs ``kms:Decrypt``, which the key
  policy denies to every principal but the readers and the delivery stream's role, and every
  decrypt is in CloudTrail. It costs $1 a month; the bucket key keeps its requests to a few a day.
* **Who writes, who reads**: the bucket policy denies ``s3:PutObject`` to every principal but
  the delivery stream's role, and ``s3:GetObject`` to every principal but that role and the
  config's ``readers`` (an explicit deny: no identity policy, however broad, overrides it).
* **Lifecycle**: objects expire after ``retention_days``; incomplete uploads after a day.
  Public access blocked, TLS only, server access logs to a second bucket (S3-managed
  encryption, the only one access-log delivery supports) that keeps them as long.
* **Config changes**: the policy hash of the config deployed (teams and backends) is in the
  delivery stream's prefix, so every object says under which config its events happened.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
import jsii
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesisfirehose as firehose
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk.interfaces import aws_events as events_ref
from constructs import Construct

from cdk_gpu_share.constructs._checks import acknowledge_nag, acknowledge_role_dependency
from cdk_gpu_share.constructs._lambda_code import package_code
from cdk_gpu_share.core.configuration.archive import HistoryConfig
from cdk_gpu_share.core.records import history

__all__ = ["ARCHIVE_PREFIX", "DETAILS_HANDLER", "JobHistory"]

#: Where the events go in the bucket; the export's default ``--prefix``.
ARCHIVE_PREFIX = "events/"
DETAILS_HANDLER = "cdk_gpu_share.lambdas.history_details.handler.handler"
#: Firehose buffers up to this long (or 64 MiB) before writing an object: about 288 objects a day.
BUFFER = cdk.Duration.minutes(5)


@jsii.implements(events.IRuleTarget)
class _FirehoseTarget:
    """A rule target that delivers the event as it is to a delivery stream, with ``role``."""

    def __init__(self, stream: firehose.CfnDeliveryStream, role: iam.IRole) -> None:
        self.stream = stream
        self.role = role

    def bind(self, rule: events_ref.IRuleRef, id: str | None = None) -> events.RuleTargetConfig:
        return events.RuleTargetConfig(arn=self.stream.attr_arn, role=self.role)


class JobHistory(Construct):
    """The archive of ``job_queues`` (ARNs of classic Batch queues) and ``service_queues`` (ARNs
    of quota-management queues), kept ``config.retention_days``, read by ``config.readers``.

    :param policy_hash: the hash of the config deployed (:func:`cdk_gpu_share.core.records.history.policy_hash`).
    """

    def __init__(self, scope: Construct, id: str, *, config: HistoryConfig, job_queues: Sequence[str],
                 service_queues: Sequence[str], policy_hash: str) -> None:
        super().__init__(scope, id)
        self.config = config
        retention = cdk.Duration.days(config.retention_days)
        self.key = kms.Key(self, "Key", enable_key_rotation=True, removal_policy=cdk.RemovalPolicy.RETAIN,
                           description="Encrypts the job archive of the GPU platform (cdk-gpu-share)")
        self.access_logs = s3.Bucket(
            self, "AccessLogs", encryption=s3.BucketEncryption.S3_MANAGED, enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            lifecycle_rules=[s3.LifecycleRule(expiration=retention)], removal_policy=cdk.RemovalPolicy.RETAIN)
        acknowledge_nag(self.access_logs, "AwsSolutions-S1",
                        "this bucket receives the job archive's server access logs; logging it too would log the"
                        " log deliveries themselves")
        self.bucket = s3.Bucket(
            self, "Bucket", encryption=s3.BucketEncryption.KMS, encryption_key=self.key, bucket_key_enabled=True,
            enforce_ssl=True, block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_logs, server_access_logs_prefix="archive/",
            lifecycle_rules=[s3.LifecycleRule(expiration=retention,
                                              abort_incomplete_multipart_upload_after=cdk.Duration.days(1))],
            removal_policy=cdk.RemovalPolicy.RETAIN)
        self.delivery_role = iam.Role(self, "DeliveryRole", assumed_by=iam.ServicePrincipal("firehose.amazonaws.com"),
                                      description="Writes the job archive (cdk-gpu-share)")
        self.delivery_logs = logs.LogGroup(self, "DeliveryLogs", retention=logs.RetentionDays.ONE_MONTH)
        delivery_errors = logs.LogStream(self, "DeliveryErrors", log_group=self.delivery_logs)
        policy = self._delivery_policy(delivery_errors)
        stream = firehose.CfnDeliveryStream(
            self, "Stream", delivery_stream_type="DirectPut",
            delivery_stream_encryption_configuration_input=firehose.CfnDeliveryStream.DeliveryStreamEncryptionConfigurationInputProperty(
                key_type="AWS_OWNED_CMK"),
            extended_s3_destination_configuration=firehose.CfnDeliveryStream.ExtendedS3DestinationConfigurationProperty(
                bucket_arn=self.bucket.bucket_arn, role_arn=self.delivery_role.role_arn,
                prefix=f"{ARCHIVE_PREFIX}!{{timestamp:yyyy/MM/dd}}/{history.CONFIG_SEGMENT}{policy_hash}/",
                error_output_prefix="errors/!{firehose:error-output-type}/!{timestamp:yyyy/MM/dd}/",
                buffering_hints=firehose.CfnDeliveryStream.BufferingHintsProperty(
                    interval_in_seconds=int(BUFFER.to_seconds()), size_in_m_bs=64),
                compression_format="GZIP",
                encryption_configuration=firehose.CfnDeliveryStream.EncryptionConfigurationProperty(
                    kms_encryption_config=firehose.CfnDeliveryStream.KMSEncryptionConfigProperty(
                        awskms_key_arn=self.key.key_arn)),
                cloud_watch_logging_options=firehose.CfnDeliveryStream.CloudWatchLoggingOptionsProperty(
                    enabled=True, log_group_name=self.delivery_logs.log_group_name,
                    log_stream_name=delivery_errors.log_stream_name),
                # One JSON object a line: Firehose writes EventBridge's records back to back otherwise.
                processing_configuration=firehose.CfnDeliveryStream.ProcessingConfigurationProperty(
                    enabled=True, processors=[firehose.CfnDeliveryStream.ProcessorProperty(
                        type="AppendDelimiterToRecord",
                        parameters=[firehose.CfnDeliveryStream.ProcessorParameterProperty(
                            parameter_name="Delimiter", parameter_value="\\n")])]),
            ))
        stream.node.add_dependency(policy)  # Firehose checks its role's rights when the stream is created
        self.stream = stream
        # EventBridge's role to put records (the L2 target would import the stream, adding an unused mapping).
        self.events_role = iam.Role(self, "EventsRole", assumed_by=iam.ServicePrincipal("events.amazonaws.com"),
                                    description="Puts the platform's job events into the job archive (cdk-gpu-share)")
        self.grant_put_records(self.events_role)
        self._restrict(config.readers)
        queues = [*job_queues, *service_queues]
        self.rule = events.Rule(
            self, "Events", description="Every job event of the platform's queues, to the job archive",
            event_pattern=events.EventPattern(
                source=["aws.batch"], detail_type=[history.JOB_TYPE, history.SERVICE_JOB_TYPE],
                detail={"jobQueue": queues}),
            targets=[_FirehoseTarget(self.stream, self.events_role)])
        self.preemption_rule = None
        if service_queues:
            # Preemption events name the preempted job, not its queue: the export keeps those of its jobs.
            self.preemption_rule = events.Rule(
                self, "Preemptions", description="Batch's preemption events of service jobs, to the job archive",
                event_pattern=events.EventPattern(source=["aws.batch"], detail_type=list(history.PREEMPTION_TYPES)),
                targets=[_FirehoseTarget(self.stream, self.events_role)])
            self._details(service_queues)

    def grant_put_records(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` put records into the archive's delivery stream (and nothing else)."""
        return iam.Grant.add_to_principal(grantee=grantee, actions=["firehose:PutRecord", "firehose:PutRecordBatch"],
                                          resource_arns=[self.stream.attr_arn])

    def _delivery_policy(self, log_stream: logs.LogStream) -> iam.Policy:
        """The rights Amazon Data Firehose documents for an S3 destination, on this bucket and key only."""
        region = cdk.Stack.of(self).region
        policy = iam.Policy(self, "DeliveryPolicy", roles=[self.delivery_role], statements=[
            iam.PolicyStatement(sid="FindTheArchive", actions=[
                "s3:GetBucketLocation", "s3:ListBucket", "s3:ListBucketMultipartUploads"],
                resources=[self.bucket.bucket_arn]),
            iam.PolicyStatement(sid="WriteTheArchive", actions=[
                "s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"],
                resources=[self.bucket.arn_for_objects("*")]),
            iam.PolicyStatement(sid="EncryptTheArchive", actions=["kms:GenerateDataKey", "kms:Decrypt"],
                                resources=[self.key.key_arn],
                                conditions={"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"}}),
            iam.PolicyStatement(sid="LogDeliveryErrors", actions=["logs:PutLogEvents"],
                                resources=[cdk.Stack.of(self).format_arn(
                                    service="logs", resource="log-group",
                                    resource_name=f"{self.delivery_logs.log_group_name}:log-stream:{log_stream.log_stream_name}",
                                    arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)]),
        ])
        acknowledge_nag(policy, "AwsSolutions-IAM5",
                        "Firehose names its objects itself (date prefix, stream name, time, a random part): the"
                        " role may write any object of this one bucket, and nothing else",
                        findings=[f"Resource::<{cdk.Stack.of(self).get_logical_id(self._bucket_resource())}.Arn>/*"])
        return policy

    def _bucket_resource(self) -> s3.CfnBucket:
        resource = self.bucket.node.default_child
        assert isinstance(resource, s3.CfnBucket)
        return resource

    def _restrict(self, readers: Sequence[str]) -> None:
        """Only the delivery stream's role writes; only it and ``readers`` read (module docstring)."""
        writer = self.delivery_role.role_arn
        objects = self.bucket.arn_for_objects("*")
        self.bucket.add_to_resource_policy(iam.PolicyStatement(
            sid="OnlyTheDeliveryStreamWrites", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=["s3:PutObject"], resources=[objects],
            conditions={"ArnNotEquals": {"aws:PrincipalArn": [writer]}}))
        self.bucket.add_to_resource_policy(iam.PolicyStatement(
            sid="OnlyTheReadersRead", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=["s3:GetObject", "s3:GetObjectVersion"], resources=[objects],
            conditions={"ArnNotEquals": {"aws:PrincipalArn": [writer, *readers]}}))
        # The key is the second gate: even a principal whose identity policy allows kms:* (the key
        # policy lets IAM decide for the account) may not decrypt the archive.
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="OnlyTheReadersDecrypt", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=["kms:Decrypt"], resources=["*"],
            conditions={"ArnNotEquals": {"aws:PrincipalArn": [writer, *readers]}}))
        for arn in readers:
            reader = iam.ArnPrincipal(arn)
            self.bucket.grant_read(reader)
            self.key.grant_decrypt(reader)

    def _details(self, service_queues: Sequence[str]) -> None:
        """The details step of service jobs (:mod:`cdk_gpu_share.lambdas.history_details`)."""
        log_group = logs.LogGroup(self, "DetailsLogs", retention=logs.RetentionDays.ONE_MONTH)
        role = iam.Role(self, "DetailsRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description="Writes a details record per service job to the job archive (cdk-gpu-share)")
        log_group.grant_write(role)
        role.add_to_principal_policy(iam.PolicyStatement(
            sid="DescribeServiceJobs", actions=["batch:DescribeServiceJob"], resources=["*"]))
        self.grant_put_records(role)
        acknowledge_nag(role, "AwsSolutions-IAM5",
                        "Batch's DescribeServiceJob authorizes only on '*' (Service Authorization Reference for"
                        " AWS Batch); the function writes only to the archive's delivery stream",
                        findings=["Resource::*"])
        self.details_function = lambda_.Function(
            self, "Details",
            description="Writes each service job's team and instances to the job archive (cdk-gpu-share)",
            runtime=lambda_.Runtime.PYTHON_3_14, architecture=lambda_.Architecture.ARM_64,
            handler=DETAILS_HANDLER,
            code=package_code("lambdas/history_details", ("core", "lambdas/history_details"), ()),
            timeout=cdk.Duration.seconds(30), memory_size=128, role=role, log_group=log_group,
            environment={"GPU_SHARE_HISTORY_STREAM": self.stream.ref})
        acknowledge_role_dependency(self.details_function)
        events.Rule(
            self, "ServiceJobs", description="Service jobs of the platform's quota queues, once waiting or running",
            event_pattern=events.EventPattern(
                source=["aws.batch"], detail_type=[history.SERVICE_JOB_TYPE],
                detail={"jobQueue": list(service_queues), "status": ["RUNNABLE", "RUNNING"]}),
            targets=[targets.LambdaFunction(self.details_function, retry_attempts=2)])
