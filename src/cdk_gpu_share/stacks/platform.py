"""PlatformStack: the resources every team shares."""

from __future__ import annotations

import importlib
from typing import Any

import aws_cdk as cdk
from constructs import Construct

from cdk_gpu_share.constructs._platform_part import PlatformPart
from cdk_gpu_share.constructs.alerts import AlarmRouting
from cdk_gpu_share.constructs.job_history import JobHistory
from cdk_gpu_share.constructs.shared_gpu_quota import SharedGpuQuota
from cdk_gpu_share.core.configuration import backends
from cdk_gpu_share.core.configuration.archive import archive_of
from cdk_gpu_share.core.configuration.parse import PlatformConfig, check_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.records.history import policy_hash


def _optional(module: str, name: str) -> Any:
    """A construct class shipped by a later part of the library, or None when absent."""
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return None
        raise


class PlatformStack(cdk.Stack):
    """The shared fleet: queues, scheduling policies, cluster policy, reclaimer, endpoints.

    Team-owned parts (quota shares, compute quotas, job definitions, roles) live
    in each :class:`~cdk_gpu_share.stacks.team.TeamStack`.
    """

    def __init__(self, scope: Construct, id: str, *, config: PlatformConfig, **kwargs: Any) -> None:
        """
        :param config: the validated platform config.
        :param kwargs: passed to :class:`aws_cdk.Stack` (``env`` stays unset: environment-agnostic).
        """
        problems = check_config(config)
        if problems:
            raise ConfigError(problems, source=getattr(config, "source", None))
        super().__init__(scope, id, description=f"cdk-gpu-share: shared GPU platform {config.name}", **kwargs)
        self.config = config
        cdk.Tags.of(self).add("gpu-share:platform", config.name)
        # Every alarm of the stack (and of the team stacks, see build_platform) notifies the
        # topic of the config's alerts section; the routing is an aspect, so order does not matter.
        self.alerts = None
        if config.alerts is not None:
            self.alerts = AlarmRouting.from_config(self, "Alerts", alerts=config.alerts)
            self.alerts.route(self)
        # Each backend's construct, built once even when two backends name the same one.
        self.parts: dict[str, PlatformPart] = {}
        built: dict[str, PlatformPart] = {}
        for spec in backends.registered():
            if config.backend(spec.key) is None:
                continue
            if spec.construct not in built:
                module, name = spec.construct.split(":")
                built[spec.construct] = getattr(importlib.import_module(module), name).for_platform(self, config)
            self.parts[spec.key] = built[spec.construct]
        self.endpoints: list[Any] = []
        if config.inference is not None:
            build = _optional("cdk_gpu_share.inference.construct", "endpoints_from_config")
            if build is not None:
                self.endpoints = list(build(self, config))
        # Requests, latency, errors and copies per model of every inference endpoint.
        self.inference_dashboard = None
        if self.endpoints:
            inference_dash = _optional("cdk_gpu_share.constructs.dashboard", "InferenceDashboard")
            if inference_dash is not None:
                self.inference_dashboard = inference_dash(self, "InferenceDashboard", endpoints=self.endpoints)
        self.history = self._history(config)
        # Each backend's own dashboard and alarms, where it has them (the fair-share reclaimer's).
        self.dashboard = None
        for part in self.team_parts():
            add_monitoring = getattr(part, "add_monitoring", None)
            if add_monitoring is not None:
                self.dashboard = add_monitoring(self) or self.dashboard

    def _history(self, config: PlatformConfig) -> Any:
        """The job archive of the platform's Batch queues (``history:``, on by default), or None."""

        settings = archive_of(config)
        if settings is None:
            return None

        quota = self.quota
        batch = getattr(quota, "batch", None) if quota is not None else None
        fairshare = self.fairshare
        archive = JobHistory(self, "JobHistory", config=settings,
                             job_queues=[fairshare.job_queue_arn] if fairshare is not None else [],
                             service_queues=[batch.job_queue_arn] if batch is not None else [],
                             policy_hash=policy_hash(config))
        cdk.CfnOutput(self, "JobHistoryBucketName", value=archive.bucket.bucket_name,
                      description="The job archive's bucket: gpu-share trace export --bucket")
        return archive

    @property
    def quota(self) -> SharedGpuQuota | None:
        """The construct of the ``batch_quota`` and ``hyperpod`` sections, or None."""
        part = self.parts.get("batch_quota") or self.parts.get("hyperpod")
        return part if isinstance(part, SharedGpuQuota) else None

    @property
    def fairshare(self) -> Any:
        """The :class:`~cdk_gpu_share.backends.fairshare.construct.FairshareQueue` of the ``fairshare`` section, or None."""
        return self.parts.get("fairshare")

    def team_parts(self) -> list[PlatformPart]:
        """Each backend's construct once, in the order of the backends: what a team stack is added to."""
        return list({id(part): part for part in self.parts.values()}.values())
