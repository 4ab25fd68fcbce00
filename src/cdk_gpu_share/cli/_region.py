"""The AWS region a command reads from, chosen as the AWS SDKs and the AWS CLI choose it.

``--region`` first, then the ``AWS_REGION`` variable, then ``AWS_DEFAULT_REGION``, then the
region of the profile in the AWS configuration file. boto3 by itself reads only
``AWS_DEFAULT_REGION`` and the file, so a user who exported ``AWS_REGION`` (as the other SDKs
and ``cdk deploy`` honour it) would be told there is no region: every command that builds a
boto3 client takes its region from :func:`resolve_region`.
"""

from __future__ import annotations

import os

from cdk_gpu_share.core.errors import GpuShareError

__all__ = ["REGION_VARIABLES", "no_region", "resolve_region"]

#: The environment variables naming a region, in the order they are read.
REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")


def resolve_region(explicit: str | None = None) -> str | None:
    """``explicit`` (``--region``), else the first variable of :data:`REGION_VARIABLES` that is
    set, else the AWS configuration's region; None when there is none.

    An ``AWS_PROFILE`` that names no profile raises botocore's ``ProfileNotFound`` (the callers
    turn it into one line)."""
    if explicit:
        return explicit
    for variable in REGION_VARIABLES:
        value = os.environ.get(variable, "").strip()
        if value:
            return value
    import boto3

    return boto3.session.Session().region_name


def no_region(what: str) -> GpuShareError:
    """The one line for a command that found no region to read ``what`` in."""
    return GpuShareError(f"no AWS region to read {what}; pass --region (such as --region us-east-1) or set "
                         f"{' or '.join(REGION_VARIABLES)}")
