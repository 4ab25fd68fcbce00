"""The fair-share queue's construct, by the module path the library has always exported it under.

It lives in :mod:`cdk_gpu_share.backends.fairshare.construct`, with the rest of the backend.
"""

from cdk_gpu_share.backends.fairshare.construct import (
    LAMBDA_ENV_LIMIT,
    FairshareQueue,
    FairshareTeam,
    job_definition_sizes,
    weight_factors,
)

__all__ = ["LAMBDA_ENV_LIMIT", "FairshareQueue", "FairshareTeam", "job_definition_sizes", "weight_factors"]
