"""Runtime code that talks to AWS through a boto3 client passed in by the caller.

Nothing here imports aws-cdk-lib, and nothing imports boto3 at module level: the
reclaim Lambda ships this package next to :mod:`cdk_gpu_share.core`, and the
``gpu-share`` CLI uses it with its own client.
"""
