"""SharedGpuQuota: team GPU quotas with lending, borrowing and preemption.

One team model (:class:`~cdk_gpu_share.core.configuration.parse.TeamConfig`), two backends, each in its
package: :class:`~cdk_gpu_share.backends.batch_quota.construct.BatchQuotaBackend` (AWS Batch
quota management for SageMaker Training) and
:class:`~cdk_gpu_share.backends.hyperpod.construct.HyperPodBackend` (SageMaker HyperPod task
governance). This facade gives each team its share on every backend its guarantee names.

Example::

    quota = SharedGpuQuota(self, "Quota",
        batch_quota=BatchQuotaConfig(capacity={"ml.g5.xlarge": 3}),
        teams=[TeamConfig(name="team-a", guarantee={"ml.g5.xlarge": Amount(instances=1)})],
    )
    quota.grant_submit("team-a", role)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import aws_cdk as cdk
from aws_cdk import aws_batch as batch
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_gpu_share.backends.batch_quota.construct import (
    READ_ACTIONS,
    SUBMIT_ACTIONS,
    TAG_TEAM,
    BatchQuotaBackend,
    batch_config,
    share_values,
)
from cdk_gpu_share.backends.hyperpod.construct import CfnComputeQuota, HyperPodBackend, quota_values
from cdk_gpu_share.constructs._checks import raise_props_problems
from cdk_gpu_share.constructs._iam import format_arn, stack_of
from cdk_gpu_share.constructs._platform_part import TeamStackLike
from cdk_gpu_share.constructs._quota import TeamQuota, raise_problems, sagemaker_type
from cdk_gpu_share.core.configuration.model import team_in_window
from cdk_gpu_share.core.configuration.parse import (
    BatchQuotaConfig,
    GroupConfig,
    HyperPodConfig,
    PlatformConfig,
    TeamConfig,
    config_problems,
)
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.policy.organisation import compile_flat

if TYPE_CHECKING:  # its module loads the Scheduler and custom-resource modules: only with windows
    from cdk_gpu_share.constructs.quota_windows import QuotaWindowSwitcher

#: The id of synth's warning that a backend deploys the tree's flat approximation.
COMPILED_TREE = "gpu-share:compiledTree"


class SharedGpuQuota(Construct):
    """Team GPU quotas on Batch quota management and/or HyperPod task governance.

    A facade over :class:`BatchQuotaBackend` and :class:`HyperPodBackend`: give
    it the teams and the backends, and each team gets its quota share or compute
    quota on every backend its guarantee names.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        teams: Sequence[TeamConfig] = (),
        batch_quota: BatchQuotaConfig | None = None,
        hyperpod: HyperPodConfig | None = None,
        queue_name: str | None = None,
    ) -> None:
        """
        :param teams: teams added at once; more can follow with :meth:`add_team`. Default: none.
        :param batch_quota: the Batch quota-management fleet. Default: no Batch backend.
        :param hyperpod: the HyperPod cluster. Default: no HyperPod backend.
        :param queue_name: the Batch job queue's name. Default: ``batch_quota.queue_name``, else generated.
        """
        if batch_quota is None and hyperpod is None:
            problems = [
                Problem(
                    "batch_quota/hyperpod",
                    None,
                    "SharedGpuQuota needs a backend",
                    "pass batch_quota=BatchQuotaConfig(...) or hyperpod=HyperPodConfig(...)",
                )
            ]
        else:
            # Every team and both sections at once, by the config file's rules, before any resource.
            problems = config_problems(list(teams), batch_quota=batch_config(batch_quota, queue_name, None),
                                       hyperpod=hyperpod, owned=sagemaker_type)
        raise_props_problems(problems, scope, id)
        super().__init__(scope, id)
        self._teams: list[TeamConfig] = []
        #: The organisation's tree, and each backend's compiled teams by name (set from a config).
        self._groups: tuple[GroupConfig, ...] = ()
        self._compiled: dict[str, dict[str, TeamConfig]] = {}
        #: The teams that give values for some time window, by name (set from a config).
        self._windowed: dict[str, TeamConfig] = {}
        self.batch = BatchQuotaBackend(self, "Batch", config=batch_quota, queue_name=queue_name) if batch_quota else None
        self.hyperpod = HyperPodBackend(self, "HyperPod", config=hyperpod) if hyperpod else None
        for team in teams:
            self._add(team, None)

    @classmethod
    def for_platform(cls, scope: Construct, config: PlatformConfig) -> SharedGpuQuota:
        """The quota of ``config``'s ``batch_quota`` and ``hyperpod`` sections (construct id ``SharedGpuQuota``);
        the Batch job queue is named ``batch_quota.queue_name``, else ``<platform>-training``."""
        batch_quota = config.batch_quota
        quota = cls(scope, "SharedGpuQuota", batch_quota=batch_quota, hyperpod=config.hyperpod,
                    queue_name=(batch_quota.queue_name or f"{config.name}-training") if batch_quota else None)
        quota._compile(config)
        return quota

    def _compile(self, config: PlatformConfig) -> None:
        """Take ``config``'s tree: neither backend knows groups, so each team gets the compilation's
        share (:func:`cdk_gpu_share.core.policy.organisation.compile_flat`), and synth says what changed."""
        if not config.groups:
            return
        self._groups = tuple(config.groups)
        for key, backend in (("batch_quota", self.batch), ("hyperpod", self.hyperpod)):
            if backend is None:
                continue
            compiled = compile_flat(config, key)
            self._compiled[key] = {t.name: t for t in compiled.config.teams}
            changed = sorted({c.team for c in compiled.changes
                              if c.compiled_guarantee != c.guarantee or c.compiled_borrow_limit is not None})
            cdk.Annotations.of(backend).add_warning_v2(
                COMPILED_TREE,
                f"{key} cannot enforce the organisation's tree: it deploys an approximation (each group's pool"
                f" split to its teams within their own borrow caps, each team's borrow limit from its own cap"
                f" and its groups' bounds), which changes"
                f" {', '.join(changed) or 'no team'}; `gpu-share plan` lists the compiled guarantee and borrow"
                f" limit of each team beside the tree's")

    def add_team_to(self, team: TeamConfig, stack: TeamStackLike) -> None:
        """Give ``team`` its quota share and compute quota in its stack, with what it needs to use them:
        on Batch a training role, the right to submit into its share and the outputs naming the queue,
        the share and the tags; on HyperPod access to its namespace and the output naming it."""
        if not any(b.config.capacity.keys() & team.guarantee.keys() for b in self.backends):
            return
        if team.windows or self._switched_by_tree(team.name):
            # The template deploys the team's own values (the base); the quota window switcher
            # (add_windows_to) writes each window's, checked with the whole config already.
            self._windowed[team.name] = team
            team = dataclasses.replace(team, windows={})
        self.add_team(team, scope=cast(Construct, stack))
        if self.batch is not None and team.name in self.batch.teams:
            stack.add_training_role()
            self.grant_submit(team.name, stack.submit_role)
            stack.output("TrainingQueueName", self.job_queue_name, "Batch job queue for SageMaker Training")
            stack.output("QuotaShareName", self.quota_share_name(team.name), "the team's quota share")
            stack.output("TrainingJobTags", ",".join(f"{k}={v}" for k, v in self.batch.service_job_tags(team.name).items()),
                         "tags every service job must carry (submissions without them are denied)")
            if team.preemption_retries is not None:
                stack.output("PreemptionRetriesBeforeTermination", str(team.preemption_retries),
                             "SubmitServiceJob preemptionConfiguration.preemptionRetriesBeforeTermination of the"
                             " team's jobs: requeues after a preemption before a job fails")
        if self.hyperpod is not None and team.name in self.hyperpod.teams:
            stack.add_hyperpod_access(cluster_arn=self.hyperpod.config.cluster_arn,
                                      eks_cluster_arn=self.hyperpod.config.eks_cluster_arn,
                                      compute_quota_arn=self.hyperpod.teams[team.name].arn)
            stack.output("HyperPodNamespace", f"hyperpod-ns-{team.name}", "Kubernetes namespace of the team")

    def _switched_by_tree(self, name: str) -> bool:
        """Whether a compiled tree gives the team other values in some window than in the base,
        though it gives none of its own: its share of a pool follows its siblings' guarantees."""
        return any(name in teams and bool(teams[name].windows) for teams in self._compiled.values())

    @property
    def has_windows(self) -> bool:
        """Whether some team added from a config gives values for a time window here."""
        return bool(self._windowed)

    def add_windows_to(self, switcher: QuotaWindowSwitcher) -> None:
        """Give ``switcher`` each windowed team's quota share and compute quota, with its values in
        the base and in each window it gives values for, as the update APIs take them (with groups,
        the tree's compilation in the base and in each window, which may switch a team that gives
        no values of its own).

        Call it once every team stack is built. The Batch share's ARN is the queue's
        (``<queue ARN>/quota-share/<name>``); a compute quota's id is known once its team's stack
        is deployed, so ``switcher`` must be in a stack deployed after the team stacks.
        """
        for name, team in self._windowed.items():
            # With groups, what each window deploys is the compilation of that window's tree.
            if self.batch is not None and name in self.batch.teams:
                capacity = self.batch.config.capacity
                deployed = self._compiled.get("batch_quota", {}).get(name, team)
                values: dict[str | None, dict] = {None: share_values(deployed, capacity)}
                values.update({w: share_values(team_in_window(deployed, w), capacity) for w in deployed.windows})
                switcher.add_quota_share(name, f"{self.batch.job_queue_arn}/quota-share/{self.batch.quota_share_name(name)}",
                                         values, self.batch.teams[name].resource)
            if self.hyperpod is not None and name in self.hyperpod.teams:
                capacity = self.hyperpod.config.capacity
                deployed = self._compiled.get("hyperpod", {}).get(name, team)
                values = {None: quota_values(deployed, capacity)}
                values.update({w: quota_values(team_in_window(deployed, w), capacity) for w in deployed.windows})
                quota = cast(CfnComputeQuota, self.hyperpod.teams[name].resource)
                quota_id = quota.attr_compute_quota_id
                quota_arn = format_arn(stack_of(switcher), service="sagemaker", resource="compute-quota",
                                       resource_name=quota_id)
                switcher.add_compute_quota(name, quota_id, quota_arn, values, quota)
        if self.hyperpod is not None:
            # Every team stack exports its compute quota's id while the platform has windows, not
            # only the windowed teams': a team that drops its windows is no longer imported, and
            # CloudFormation refuses to remove an export that the windows' stack (deployed after
            # the team's) still imports.
            for team_quota in self.hyperpod.teams.values():
                resource = cast(CfnComputeQuota, team_quota.resource)
                if stack_of(resource) is not stack_of(self):
                    stack_of(resource).export_value(resource.attr_compute_quota_id)

    @property
    def backends(self) -> list[BatchQuotaBackend | HyperPodBackend]:
        """The backends this construct has (Batch first)."""
        return [b for b in (self.batch, self.hyperpod) if b is not None]

    def add_team(self, team: TeamConfig, *, scope: Construct | None = None) -> list[TeamQuota]:
        """Give ``team`` its share on every backend whose capacity its guarantee names.

        The team is checked together with the teams added before (their guarantees must fit the
        capacity together), by the config file's rules.
        """
        if isinstance(team, TeamConfig) and any(t.name == team.name for t in self._teams):
            raise ConfigError(
                Problem("team.name", team.name, "already has a quota share or compute quota here", "add each team once"),
                source=self.node.path,
            )
        batch_quota = self.batch.config if self.batch is not None else None
        hyperpod = self.hyperpod.config if self.hyperpod is not None else None
        raise_problems(config_problems([*self._teams, team], batch_quota=batch_quota, hyperpod=hyperpod,
                                        owned=sagemaker_type, groups=self._groups), self)
        return self._add(team, scope)

    def _add(self, team: TeamConfig, scope: Construct | None) -> list[TeamQuota]:
        added = []
        for backend in self.backends:
            if team.guarantee_for(backend.config.capacity):
                key = "batch_quota" if backend is self.batch else "hyperpod"
                added.append(backend._add(self._compiled.get(key, {}).get(team.name, team), scope))
        if not added:
            declared = sorted({it for b in self.backends for it in b.config.capacity})
            raise ConfigError(
                Problem(
                    f"TeamConfig({team.name!r}).guarantee",
                    sorted(team.guarantee),
                    "names no instance type of this SharedGpuQuota's backends",
                    f"guarantee one of {', '.join(declared)}",
                ),
                source=self.node.path,
            )
        self._teams.append(team)
        return added

    @property
    def job_queue(self) -> batch.CfnJobQueue:
        """The Batch job queue of the ``batch_quota`` backend."""
        return self._require_batch().job_queue

    @property
    def job_queue_arn(self) -> str:
        """The ARN of the Batch job queue."""
        return self._require_batch().job_queue_arn

    @property
    def job_queue_name(self) -> str:
        """The name of the Batch job queue (pass it to ``TrainingQueue``)."""
        return self._require_batch().job_queue_name

    def quota_share_name(self, team: str) -> str:
        """The name of ``team``'s quota share (pass it as ``quota_share_name`` when submitting)."""
        return self._require_batch().quota_share_name(team)

    def grant_submit(self, team: str, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` submit service jobs into ``team``'s quota share and no other."""
        return self._require_batch().grant_submit(team, grantee)

    def _require_batch(self) -> BatchQuotaBackend:
        if self.batch is None:
            raise ConfigError(
                Problem("batch_quota", None, "this SharedGpuQuota has no Batch backend", "pass batch_quota=..."),
                source=self.node.path,
            )
        return self.batch


__all__ = ["COMPILED_TREE", "READ_ACTIONS", "SUBMIT_ACTIONS", "TAG_TEAM", "BatchQuotaBackend", "CfnComputeQuota", "HyperPodBackend",
           "SharedGpuQuota", "TeamQuota"]
