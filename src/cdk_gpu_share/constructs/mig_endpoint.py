"""The MIG endpoint construct moved to :mod:`cdk_gpu_share.inference.construct`; this module keeps
the old import path working (``from cdk_gpu_share.constructs.mig_endpoint import
MigInferenceEndpoint``)."""

from cdk_gpu_share.inference.construct import *  # noqa: F401,F403
from cdk_gpu_share.inference.construct import __all__ as __all__  # noqa: F401
