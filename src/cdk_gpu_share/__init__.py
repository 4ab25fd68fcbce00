"""cdk-gpu-share: AWS CDK constructs for a GPU fleet shared by many ML teams.

The constructs are imported lazily, so that the pure-Python core
(:mod:`cdk_gpu_share.core`) and the ``gpu-share`` CLI can be used, and shipped
inside Lambda functions, without loading aws-cdk-lib. Type checkers see every
name with its type (the imports under ``TYPE_CHECKING``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cdk_gpu_share._version import __version__ as __version__

if TYPE_CHECKING:
    from cdk_gpu_share.backends.batch_quota.construct import ShareMonitor
    from cdk_gpu_share.backends.fairshare.construct import FairshareQueue
    from cdk_gpu_share.backends.kueue import BorrowWithinCohort, KueueConfig, KueuePreemption, WorkloadPriorityClass
    from cdk_gpu_share.backends.kueue.construct import KueueQueues
    from cdk_gpu_share.constructs.dashboard import GpuShareDashboard, InferenceDashboard
    from cdk_gpu_share.constructs.job_history import JobHistory
    from cdk_gpu_share.constructs.quota_windows import QuotaWindowSwitcher
    from cdk_gpu_share.constructs.shared_gpu_quota import (
        BatchQuotaBackend,
        CfnComputeQuota,
        HyperPodBackend,
        SharedGpuQuota,
    )
    from cdk_gpu_share.core.configuration.archive import HistoryConfig
    from cdk_gpu_share.core.configuration.parse import (
        Amount,
        BatchQuotaConfig,
        FairshareConfig,
        FairshareVpcConfig,
        GroupConfig,
        HyperPodConfig,
        PlatformConfig,
        PriorityClass,
        ReclaimConfig,
        ShareMonitorConfig,
        Sharing,
        TeamConfig,
        load_config,
    )
    from cdk_gpu_share.core.errors import ConfigError
    from cdk_gpu_share.inference.config import Copies, InferenceModelConfig, InferenceVpcConfig
    from cdk_gpu_share.inference.construct import MigInferenceEndpoint
    from cdk_gpu_share.stacks.app import build_platform
    from cdk_gpu_share.stacks.platform import PlatformStack
    from cdk_gpu_share.stacks.team import TeamStack
    from cdk_gpu_share.stacks.windows import WindowsStack

_LAZY = {
    "SharedGpuQuota": "cdk_gpu_share.constructs.shared_gpu_quota",
    "BatchQuotaBackend": "cdk_gpu_share.constructs.shared_gpu_quota",
    "CfnComputeQuota": "cdk_gpu_share.constructs.shared_gpu_quota",
    "HyperPodBackend": "cdk_gpu_share.constructs.shared_gpu_quota",
    "FairshareQueue": "cdk_gpu_share.backends.fairshare.construct",
    "ShareMonitor": "cdk_gpu_share.backends.batch_quota.construct",
    "QuotaWindowSwitcher": "cdk_gpu_share.constructs.quota_windows",
    "KueueQueues": "cdk_gpu_share.backends.kueue.construct",
    "KueueConfig": "cdk_gpu_share.backends.kueue",
    "KueuePreemption": "cdk_gpu_share.backends.kueue",
    "BorrowWithinCohort": "cdk_gpu_share.backends.kueue",
    "WorkloadPriorityClass": "cdk_gpu_share.backends.kueue",
    "MigInferenceEndpoint": "cdk_gpu_share.inference.construct",
    "GpuShareDashboard": "cdk_gpu_share.constructs.dashboard",
    "InferenceDashboard": "cdk_gpu_share.constructs.dashboard",
    "JobHistory": "cdk_gpu_share.constructs.job_history",
    "HistoryConfig": "cdk_gpu_share.core.configuration.archive",
    "PlatformStack": "cdk_gpu_share.stacks.platform",
    "TeamStack": "cdk_gpu_share.stacks.team",
    "WindowsStack": "cdk_gpu_share.stacks.windows",
    "build_platform": "cdk_gpu_share.stacks.app",
    "PlatformConfig": "cdk_gpu_share.core.configuration.parse",
    "TeamConfig": "cdk_gpu_share.core.configuration.parse",
    "load_config": "cdk_gpu_share.core.configuration.parse",
    "ConfigError": "cdk_gpu_share.core.errors",
    "Amount": "cdk_gpu_share.core.configuration.parse",
    "Sharing": "cdk_gpu_share.core.configuration.parse",
    "BatchQuotaConfig": "cdk_gpu_share.core.configuration.parse",
    "HyperPodConfig": "cdk_gpu_share.core.configuration.parse",
    "FairshareConfig": "cdk_gpu_share.core.configuration.parse",
    "FairshareVpcConfig": "cdk_gpu_share.core.configuration.parse",
    "GroupConfig": "cdk_gpu_share.core.configuration.parse",
    "PriorityClass": "cdk_gpu_share.core.configuration.parse",
    "ReclaimConfig": "cdk_gpu_share.core.configuration.parse",
    "ShareMonitorConfig": "cdk_gpu_share.core.configuration.parse",
    "InferenceModelConfig": "cdk_gpu_share.inference.config",
    "Copies": "cdk_gpu_share.inference.config",
    "InferenceVpcConfig": "cdk_gpu_share.inference.config",
}

__all__ = [
    "Amount",
    "BatchQuotaBackend",
    "BatchQuotaConfig",
    "BorrowWithinCohort",
    "CfnComputeQuota",
    "ConfigError",
    "Copies",
    "FairshareConfig",
    "FairshareQueue",
    "FairshareVpcConfig",
    "GpuShareDashboard",
    "GroupConfig",
    "HistoryConfig",
    "HyperPodBackend",
    "HyperPodConfig",
    "InferenceDashboard",
    "InferenceModelConfig",
    "InferenceVpcConfig",
    "JobHistory",
    "KueueConfig",
    "KueuePreemption",
    "KueueQueues",
    "MigInferenceEndpoint",
    "PlatformConfig",
    "PlatformStack",
    "PriorityClass",
    "QuotaWindowSwitcher",
    "ReclaimConfig",
    "ShareMonitor",
    "ShareMonitorConfig",
    "SharedGpuQuota",
    "Sharing",
    "TeamConfig",
    "TeamStack",
    "WindowsStack",
    "WorkloadPriorityClass",
    "build_platform",
    "load_config",
]

if not TYPE_CHECKING:  # at run time only: type checkers read the imports above

    def __getattr__(name: str) -> Any:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'cdk_gpu_share' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
