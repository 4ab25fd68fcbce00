#!/usr/bin/env python3
"""Submit a SageMaker training job into a team's quota share (SageMaker Python SDK v3).

    pip install 'cdk-gpu-share[sagemaker]'     # the SDK is an optional extra
    python examples/submit_training_job.py --team team-a --source-dir ./train \
        --image-uri 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-gpu-py311 \
        [--entry-script train.py] [--region us-east-1]

Required: --team, --source-dir and --image-uri. The region comes from --region or the
usual AWS configuration (AWS_REGION, ~/.aws/config); missing region or credentials end
with one line saying which, not a traceback.

The team's stack (`gpu-share-team-<team>`) outputs everything needed: the queue
name, the quota share name and the execution role. Assume the team's SubmitRole
first (its ARN is an output too): it may submit into this share and no other.
"""

from __future__ import annotations

import argparse
import sys


class SetupError(Exception):
    """A problem the user fixes outside this script (region, credentials, stack): one line."""


def stack_outputs(stack_name: str, region: str | None) -> dict[str, str]:
    """The outputs of the team's stack, or :class:`SetupError` naming what is missing."""
    import boto3
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
    )

    try:
        cfn = boto3.client("cloudformation", region_name=region)
        stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
    except NoRegionError:
        raise SetupError("no AWS region: pass --region us-east-1 (or set AWS_REGION)") from None
    except (NoCredentialsError, PartialCredentialsError):
        raise SetupError("no AWS credentials: run `aws configure` or `aws sso login`, or set AWS_PROFILE") from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") == "ValidationError" and "does not exist" in error.get("Message", ""):
            raise SetupError(f"stack {stack_name} does not exist in {cfn.meta.region_name}: deploy the platform "
                             "(cdk deploy --all) or check --team, --platform and --region") from None
        raise SetupError(f"cannot read stack {stack_name}: {error.get('Code')}: {error.get('Message')}") from None
    except BotoCoreError as exc:
        raise SetupError(f"cannot reach AWS: {exc}") from None
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="submit_training_job.py",
        usage="%(prog)s --team TEAM --source-dir DIR --image-uri IMAGE [options]",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--team", required=True, help="team name, as in platform.yaml")
    parser.add_argument("--platform", default="gpu-share", help="platform.name of the config (default: gpu-share)")
    parser.add_argument("--source-dir", required=True, help="folder with the training code")
    parser.add_argument("--entry-script", default="train.py", help="script to run (default: train.py)")
    parser.add_argument("--image-uri", required=True, help="training container image")
    parser.add_argument("--instance-type", default="ml.g5.xlarge", help="default: ml.g5.xlarge")
    parser.add_argument("--instance-count", type=int, default=1, help="default: 1")
    parser.add_argument("--priority", type=int, default=None, help="scheduling priority within the share")
    parser.add_argument("--region", default=None, help="AWS region (default: the SDK's)")
    args = parser.parse_args(argv)

    try:
        from sagemaker.train import ModelTrainer
        from sagemaker.train.aws_batch.training_queue import TrainingQueue
        from sagemaker.train.configs import Compute, SourceCode
    except ImportError:
        print(
            "the SageMaker Python SDK v3 is not installed: pip install 'cdk-gpu-share[sagemaker]'",
            file=sys.stderr,
        )
        return 2

    stack_name = f"{args.platform}-team-{args.team}"
    try:
        outputs = stack_outputs(stack_name, args.region)
    except SetupError as exc:
        print(f"submit_training_job.py: {exc}", file=sys.stderr)
        return 2
    missing = [k for k in ("TrainingQueueName", "QuotaShareName", "TrainingExecutionRoleArn") if k not in outputs]
    if missing:
        print(f"submit_training_job.py: stack {stack_name} has no output {', '.join(missing)}: is team "
              f"{args.team} on the batch_quota backend?", file=sys.stderr)
        return 2
    queue_name = outputs["TrainingQueueName"]
    quota_share = outputs["QuotaShareName"]

    trainer = ModelTrainer(
        training_image=args.image_uri,
        source_code=SourceCode(source_dir=args.source_dir, entry_script=args.entry_script),
        compute=Compute(instance_type=args.instance_type, instance_count=args.instance_count),
        role=outputs["TrainingExecutionRoleArn"],
        base_job_name=f"{args.team}-train",
    )
    queued = TrainingQueue(queue_name).submit(
        trainer,
        inputs=None,
        priority=args.priority,
        quota_share_name=quota_share,
    )
    print(f"submitted {queued.job_name} into {queue_name}/{quota_share}: {queued.job_arn}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
