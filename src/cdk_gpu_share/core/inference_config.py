"""The ``inference:`` section moved to :mod:`cdk_gpu_share.inference.config`; this module keeps
the old import path working (``from cdk_gpu_share.core.inference_config import Copies``)."""

from cdk_gpu_share.inference.config import *  # noqa: F401,F403
from cdk_gpu_share.inference.config import __all__ as __all__  # noqa: F401
