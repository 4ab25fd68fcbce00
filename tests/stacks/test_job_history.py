"""The job archive of the platform stack (``history:``): bucket, key, delivery stream, rules, details step."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
import yaml
from aws_cdk.assertions import Match, Template

from cdk_gpu_share.core.configuration.archive import DEFAULT_RETENTION_DAYS, archive_of, monthly_cost
from cdk_gpu_share.core.configuration.parse import parse_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.records import history
from cdk_gpu_share.lambdas.history_details import handler as details
from tests.helpers import ROOT, assert_cfn_lint_clean, assert_nag_clean, new_app, synth

READER = "arn:aws:iam::111122223333:role/platform-analyst"


def _raw(**history: Any) -> dict:
    raw = yaml.safe_load((ROOT / "platform.yaml").read_text())
    if history:
        raw["history"] = history
    return raw


def _platform(raw: dict) -> tuple[Template, dict, Any]:
    from cdk_gpu_share.stacks.app import build_platform

    app = new_app()
    config = parse_config(raw)
    build_platform(app, config)
    report = synth(app)
    stack = next(s for s in app.node.children if getattr(s, "stack_name", "").endswith("-platform"))
    return Template.from_stack(stack), report, config


@pytest.fixture(scope="module")
def archived():
    return _platform(_raw(readers=[READER], retention_days=90))


def _one(template: Template, kind: str) -> tuple[str, dict]:
    [(name, res)] = [(k, v) for k, v in template.find_resources(kind).items() if k.startswith("JobHistory")]
    return name, res["Properties"]


def test_the_archive_is_nag_and_cfn_lint_clean(archived):
    template, report, _ = archived
    assert_nag_clean(report)
    assert_cfn_lint_clean(template)


def test_the_bucket_is_encrypted_private_tls_only_logged_and_expires(archived):
    template, _, _ = archived
    buckets = {k: v["Properties"] for k, v in template.find_resources("AWS::S3::Bucket").items()}
    archive = next(p for k, p in buckets.items() if k.startswith("JobHistoryBucket"))
    logs_name = next(k for k in buckets if k.startswith("JobHistoryAccessLogs"))
    [rule] = archive["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms" and rule["BucketKeyEnabled"] is True
    assert archive["PublicAccessBlockConfiguration"] == {"BlockPublicAcls": True, "BlockPublicPolicy": True,
                                                          "IgnorePublicAcls": True, "RestrictPublicBuckets": True}
    assert archive["LoggingConfiguration"]["DestinationBucketName"] == {"Ref": logs_name}
    assert [r["ExpirationInDays"] for r in archive["LifecycleConfiguration"]["Rules"]] == [90]
    assert [r["ExpirationInDays"] for r in buckets[logs_name]["LifecycleConfiguration"]["Rules"]] == [90]
    _, key = _one(template, "AWS::KMS::Key")
    assert key["EnableKeyRotation"] is True


def test_only_the_delivery_role_writes_and_only_the_readers_read(archived):
    template, _, _ = archived
    policies = [p["Properties"] for k, p in template.find_resources("AWS::S3::BucketPolicy").items()
                if k.startswith("JobHistoryBucketPolicy")]
    statements = {s.get("Sid", s["Effect"] + str(s["Action"])): s for s in policies[0]["PolicyDocument"]["Statement"]}
    role = {"Fn::GetAtt": [next(k for k in template.find_resources("AWS::IAM::Role") if k.startswith(
        "JobHistoryDeliveryRole")), "Arn"]}
    write = statements["OnlyTheDeliveryStreamWrites"]
    assert write["Effect"] == "Deny" and write["Principal"] == {"AWS": "*"} and write["Action"] == "s3:PutObject"
    assert write["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": [role]}}
    read = statements["OnlyTheReadersRead"]
    assert read["Effect"] == "Deny" and read["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": [role, READER]}}
    tls = [s for s in statements.values() if s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"]
    assert tls and tls[0]["Effect"] == "Deny"
    # The reader may also decrypt: the key policy names it.
    _, key = _one(template, "AWS::KMS::Key")
    assert any(s.get("Principal") == {"AWS": READER} and "kms:Decrypt" in s["Action"]
               for s in key["KeyPolicy"]["Statement"])
    [deny] = [s for s in key["KeyPolicy"]["Statement"] if s.get("Sid") == "OnlyTheReadersDecrypt"]
    assert deny["Effect"] == "Deny" and deny["Action"] == "kms:Decrypt"
    assert deny["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": [role, READER]}}


def test_the_stream_writes_gzip_json_lines_under_the_day_and_the_config(archived):
    template, _, config = archived
    _, stream = _one(template, "AWS::KinesisFirehose::DeliveryStream")
    dest = stream["ExtendedS3DestinationConfiguration"]
    assert stream["DeliveryStreamType"] == "DirectPut"
    assert stream["DeliveryStreamEncryptionConfigurationInput"] == {"KeyType": "AWS_OWNED_CMK"}
    assert dest["CompressionFormat"] == "GZIP"
    assert dest["Prefix"] == f"events/!{{timestamp:yyyy/MM/dd}}/config={history.policy_hash(config)}/"
    assert dest["ProcessingConfiguration"] == {"Enabled": True, "Processors": [{
        "Type": "AppendDelimiterToRecord", "Parameters": [{"ParameterName": "Delimiter", "ParameterValue": "\\n"}]}]}
    assert "KMSEncryptionConfig" in dest["EncryptionConfiguration"]
    # A key written by this prefix names its day and its config.
    key = dest["Prefix"].replace("!{timestamp:yyyy/MM/dd}", "2026/11/02") + "gpu-share-1-2026-11-02-00-05-00-abc.gz"
    assert history.day_of_key(key) == "2026-11-02" and history.config_of_key(key) == history.policy_hash(config)


def test_the_rules_send_both_queues_events_and_the_preemptions(archived):
    template, _, _ = archived
    rules = {k: v["Properties"] for k, v in template.find_resources("AWS::Events::Rule").items() if k.startswith("JobHistory")}
    stream_name, _ = _one(template, "AWS::KinesisFirehose::DeliveryStream")
    events = next(p for k, p in rules.items() if k.startswith("JobHistoryEvents"))
    assert events["EventPattern"]["detail-type"] == [history.JOB_TYPE, history.SERVICE_JOB_TYPE]
    assert len(events["EventPattern"]["detail"]["jobQueue"]) == 2  # the fair-share and the quota queue
    assert events["Targets"][0]["Arn"] == {"Fn::GetAtt": [stream_name, "Arn"]}
    assert "InputTransformer" not in events["Targets"][0]  # the event as delivered
    preemptions = next(p for k, p in rules.items() if k.startswith("JobHistoryPreemptions"))
    assert preemptions["EventPattern"]["detail-type"] == list(history.PREEMPTION_TYPES)
    service = next(p for k, p in rules.items() if k.startswith("JobHistoryServiceJobs"))
    assert service["EventPattern"]["detail"]["status"] == ["RUNNABLE", "RUNNING"]
    template.has_output("JobHistoryBucketName", {"Value": {"Ref": Match.string_like_regexp("JobHistoryBucket")}})


def test_the_delivery_role_may_write_this_bucket_and_nothing_else(archived):
    template, _, _ = archived
    policy = next(p["Properties"] for k, p in template.find_resources("AWS::IAM::Policy").items()
                  if k.startswith("JobHistoryDeliveryPolicy"))
    actions = sorted(a for s in policy["PolicyDocument"]["Statement"] for a in
                     ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))
    assert actions == ["kms:Decrypt", "kms:GenerateDataKey", "logs:PutLogEvents", "s3:AbortMultipartUpload",
                       "s3:GetBucketLocation", "s3:GetObject", "s3:ListBucket", "s3:ListBucketMultipartUploads",
                       "s3:PutObject"]
    assert "s3:DeleteObject" not in json.dumps(policy)


def test_the_archive_is_on_by_default_where_a_batch_queue_is():
    from cdk_gpu_share.core.configuration.parse import load_config

    assert archive_of(parse_config(_raw())).retention_days == DEFAULT_RETENTION_DAYS
    assert archive_of(parse_config(_raw(enabled=False))) is None
    assert archive_of(load_config(ROOT / "examples" / "hyperpod.yaml")) is None  # no Batch queue


def test_a_disabled_archive_builds_nothing():
    template, _, _ = _platform(_raw(enabled=False))
    assert not template.find_resources("AWS::KinesisFirehose::DeliveryStream")
    assert not template.find_resources("AWS::S3::Bucket")
    assert "JobHistoryBucketName" not in template.to_json().get("Outputs", {})


@pytest.mark.parametrize("history_raw, field, message", [
    ({"retention_days": 0}, "history.retention_days", "must be a whole number of days from 1 to 3650"),
    ({"readers": ["arn:aws:iam::111122223333:role/*"]}, "history.readers[0]", "is not an IAM role or user ARN"),
    ({"readers": ["arn:aws:sts::111122223333:assumed-role/a/b"]}, "history.readers[0]", "is a session ARN"),
    ({"readers": [READER, READER]}, "history.readers[1]", "is listed twice"),
    ({"enabled": "yes"}, "history.enabled", "must be true or false"),
    ({"keep": 1}, "history.keep", "unknown key"),
    ({"retention_day": 30}, "history.retention_day", "did you mean 'retention_days'?"),
])
def test_bad_history_settings_name_the_field(history_raw, field, message):
    with pytest.raises(ConfigError) as err:
        parse_config(_raw(**history_raw))
    text = str(err.value)
    assert field in text and message in text


def test_a_config_written_back_reads_the_same_history():
    from cdk_gpu_share.core.configuration.parse import config_mapping

    config = parse_config(_raw(readers=[READER], retention_days=30, enabled=True))
    again = parse_config(copy.deepcopy(config_mapping(config)))
    assert again.history == config.history


def test_the_policy_hash_follows_the_teams_not_the_archive_settings():
    a = parse_config(_raw())
    b = parse_config(_raw(readers=[READER]))
    raw = _raw()
    raw["teams"][0]["checkpoint_seconds"] = 300
    c = parse_config(raw)
    assert history.policy_hash(a) == history.policy_hash(b) != history.policy_hash(c)


def test_the_cost_quoted_for_ten_thousand_jobs_a_day_is_about_two_dollars():
    cost = monthly_cost(10_000)
    assert 1.5 < sum(cost.values()) < 2.5 and cost["KMS key"] == 1.0
    doc = (ROOT / "docs" / "history.md").read_text()
    assert f"${sum(cost.values()):.2f}" in doc


# ---------------------------------------------------------------------------
# The details step: DescribeServiceJob in, one record into the stream, through real boto3 clients.


def _models(job: dict | None):
    from tests.history_model import new_client

    batch, fh = new_client("batch"), new_client("firehose")
    put: list[dict] = []

    def on_batch(request, **_):
        from botocore.awsrequest import AWSResponse

        from tests.history_model import _Raw

        if job is None:
            body = {"__type": "ClientException", "message": "job not found"}
            return AWSResponse(request.url, 400, {"x-amzn-ErrorType": "ClientException"}, _Raw(json.dumps(body).encode()))
        return AWSResponse(request.url, 200, {}, _Raw(json.dumps(job).encode()))

    def on_firehose(request, **_):
        from botocore.awsrequest import AWSResponse

        from tests.history_model import _Raw

        put.append(json.loads(request.body))
        return AWSResponse(request.url, 200, {}, _Raw(b'{"RecordId": "r1", "Encrypted": false}'))

    batch.meta.events.register("before-send.batch", on_batch)
    fh.meta.events.register("before-send.firehose", on_firehose)
    return batch, fh, put


def test_the_details_step_writes_team_and_instances_once_per_job(monkeypatch):
    monkeypatch.setenv(details.STREAM_ENV, "archive-stream")
    job = {"jobArn": "arn:aws:batch:us-east-1:111122223333:service-job/j1", "jobId": "j1", "jobName": "train",
           "jobQueue": "arn:aws:batch:us-east-1:111122223333:job-queue/gpu-share-training", "status": "RUNNABLE",
           "createdAt": 1_793_577_600_000, "serviceJobType": "SAGEMAKER_TRAINING", "schedulingPriority": 5,
           "quotaShareName": "team-a", "tags": {"gpu-share:team": "team-a"},
           "serviceRequestPayload": json.dumps({"ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 2}})}
    batch, fh, put = _models(job)
    event = {"id": "e1", "time": "2026-11-02T00:00:05Z", "account": "111122223333", "region": "us-east-1",
             "detail-type": history.SERVICE_JOB_TYPE, "detail": {"jobId": "j1", "status": "RUNNABLE"}}
    out = details.handler(event, batch=batch, firehose=fh)
    assert out == {"written": True, "team": "team-a"}
    [req] = put
    assert req["DeliveryStreamName"] == "archive-stream"
    record = json.loads(base64.b64decode(req["Record"]["Data"]))
    assert record["detail-type"] == history.DETAILS_TYPE and record["id"] == "details-j1"
    assert record["detail"] == {"jobId": "j1", "jobQueue": job["jobQueue"], "team": "team-a",
                                "instances": {"ml.g5.12xlarge": 2}, "createdAt": job["createdAt"],
                                "schedulingPriority": 5}


def test_a_failed_describe_raises_so_lambda_retries(monkeypatch):
    from botocore.exceptions import ClientError

    monkeypatch.setenv(details.STREAM_ENV, "archive-stream")
    batch, fh, put = _models(None)
    with pytest.raises(ClientError):
        details.handler({"detail": {"jobId": "gone"}}, batch=batch, firehose=fh)
    assert put == []
