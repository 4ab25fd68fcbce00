"""FairshareQueue: a classic AWS Batch GPU fleet whose team guarantees are real.

Classic AWS Batch orders queued jobs by fair share but never stops a running job,
so a team that lent its idle GPUs waits for the borrowers' jobs to end. This
construct builds the fleet and a *reclaim Lambda* that stops borrowers' jobs when
a lender needs its guarantee back, then resubmits them.

What it creates
---------------
* A managed EC2 compute environment of the config's GPU instance types (ECS
  AL2023 NVIDIA AMI, the config's allocation strategy, ``maxvCpus`` = the vCPUs of
  the declared instances, ``minvCpus`` = ``min_instances`` of the smallest type), in
  the VPC passed in, the existing VPC of ``config.vpc`` (``fairshare.vpc`` in YAML: its
  subnets and security groups, imported by id without a lookup) or a new one (2 AZs,
  1 NAT gateway, flow logs; no lookups).
* A job queue (the ``Resource`` child) with a fair-share scheduling policy: one
  share identifier per team (:func:`~cdk_gpu_share.aws.batch_reader.share_identifier`:
  the team name's letters and digits) and

      weightFactor(team) = G_max / G(team)        (rounded to 4 decimals, within 0.0001..999.9999)

  where G is the team's guarantee in GPUs and G_max the largest guarantee. Batch
  gives *more* to a *lower* weight factor, in proportion to 1/weightFactor, so a
  team's share of the fleet is proportional to its guarantee (a team without
  guarantee gets 999.9999). Fair share is computed on vCPUs; the job definitions
  ask for vCPUs in proportion to GPUs, so the two agree.
* Per team (:meth:`add_team`, created in ``scope``, e.g. the team's stack): an
  ``AWS::Batch::ConsumableResource`` of guarantee + borrow cap GPUs (the fleet's
  GPUs when the cap is unbounded), and one job definition per GPU count that fits
  both the cap and an instance (1, 2, 4, 8), named ``<queue>-<share>-gpu<N>``,
  requiring N of that consumable resource, so that Batch itself never dispatches a
  team beyond its cap. Their retry strategy: a job stopped by the reclaimer EXITs
  (Batch never retries terminated jobs anyway; the reclaimer resubmits it), a job
  whose instance was lost (``Host EC2*``) is retried up to ``job_attempts``, other
  errors fail at once unless ``retry_on_error``.
* The reclaimer (unless ``reclaim.enabled`` is false): a Python Lambda with
  reserved concurrency 1, run every ``schedule_minutes`` and on every "Batch Job
  State Change" event that makes a job of the queue RUNNABLE, plus a rule that
  hands it each job that FAILED with the reclaimer's reason, to resubmit. Failures
  go to an SQS on-failure destination; alarms on the function's errors and on that
  queue. See :mod:`cdk_gpu_share.lambdas.reclaim.handler`.

Jobs must carry two tags
------------------------
``batch:TerminateJob`` authorizes only on ``job/*`` with ``aws:ResourceTag``
conditions: no resource type or condition key ties a job to its queue (Service
Authorization Reference for AWS Batch; ``TerminateJobs`` has no IAM action of its
own and needs ``batch:TerminateJob`` per job). To keep the reclaimer from stopping
jobs of other queues, :meth:`grant_submit` requires every submission to carry the
tags ``gpu-share:queue=<queue name>`` and ``gpu-share:team=<team name>``
(``aws:RequestTag``), and the reclaimer may terminate only jobs tagged with its
queue (``aws:ResourceTag``). Submit with, e.g.::

    batch.submit_job(jobName="train", jobQueue=queue, jobDefinition="gpu-share-fairshare-teama-gpu1",
                     shareIdentifier="teama", tags={"gpu-share:queue": queue, "gpu-share:team": "team-a"})

Example::

    fleet = FairshareQueue(self, "Fleet", config=FairshareConfig(capacity={"g5.xlarge": 3}))
    for team in teams:
        fleet.add_team(team)
    fleet.grant_submit("team-a", role)
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import aws_cdk as cdk
import jsii
from aws_cdk import aws_batch as batch
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct, IValidation

from cdk_gpu_share.aws import batch_reader as br
from cdk_gpu_share.constructs._checks import acknowledge_nag, acknowledge_role_dependency, raise_props_problems
from cdk_gpu_share.constructs._iam import add_statements, format_arn, read_once, stack_of
from cdk_gpu_share.constructs._lambda_code import package_code
from cdk_gpu_share.constructs._metrics import ReclaimerMetrics
from cdk_gpu_share.constructs._platform_part import TeamStackLike
from cdk_gpu_share.constructs.dashboard import GpuShareDashboard
from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.configuration.parse import (
    BATCH_NAME_PATTERN,
    FAIRSHARE,
    FairshareConfig,
    FairshareVpcConfig,
    GroupConfig,
    PlatformConfig,
    TeamConfig,
    check_backend,
    config_problems,
    fairshare_window_problems,
    team_in_window,
)
from cdk_gpu_share.core.configuration.windows import Window
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.policy import reclaim
from cdk_gpu_share.core.policy.fairshare import reclaim_settings
from cdk_gpu_share.core.scenario import group_entries

__all__ = ["FairshareQueue", "FairshareTeam", "weight_factors", "job_definition_sizes", "LAMBDA_ENV_LIMIT"]

def _ec2_type(instance_type: str) -> bool:
    """The instance types a FairshareQueue answers for; SageMaker types are a SharedGpuQuota's."""
    return not instance_type.startswith("ml.")


#: Lambda's limit on the total size of a function's environment variables.
LAMBDA_ENV_LIMIT = 4096
#: The requeue-stalled alarm fires when a stopped job has waited this long past its settle
#: time (the cycle finishes a requeue within a minute or two of its dependencies answering).
REQUEUE_STALLED_SECONDS = 600
MIN_WEIGHT = 0.0001
MAX_WEIGHT = 999.9999
#: Share of an instance's memory a job definition asks for (the rest is the OS and the ECS agent's).
MEMORY_FRACTION = 0.9
DEFAULT_IMAGE = "public.ecr.aws/amazonlinux/amazonlinux:2023"
SUBMIT_ACTIONS = ["batch:SubmitJob"]
READ_ACTIONS = ["batch:DescribeJobs", "batch:ListJobs"]
HANDLER = "cdk_gpu_share.lambdas.reclaim.handler.handler"
_WILDCARD_PREFIX = "Resource::arn:<AWS::Partition>:batch:<AWS::Region>:<AWS::AccountId>:"


def weight_factors(guarantees: dict[str, float]) -> dict[str, float]:
    """Fair-share weight factor per share identifier: ``G_max / G``, rounded, within Batch's range."""
    top = max(guarantees.values(), default=0)
    out = {}
    for sid, g in guarantees.items():
        w = MAX_WEIGHT if g <= 0 or top <= 0 else round(top / g, 4)
        out[sid] = min(MAX_WEIGHT, max(MIN_WEIGHT, w))
    return out


def job_definition_sizes(capacity: dict[str, int], cap_gpus: float) -> list[int]:
    """GPU counts of a team's job definitions: 1, 2, 4, 8... up to the largest instance and the cap."""
    largest = max((info.gpus for it in capacity if (info := instances.lookup(it)) is not None), default=0)
    sizes = []
    n = 1
    while n <= largest and n <= cap_gpus + reclaim.TOLERANCE:
        sizes.append(n)
        n *= 2
    if largest and largest not in sizes and largest <= cap_gpus + reclaim.TOLERANCE:
        sizes.append(largest)
    return sizes


@dataclass
class FairshareTeam:
    """What one team got from the queue."""

    team: TeamConfig
    share_identifier: str
    guarantee_gpus: float
    cap_gpus: float
    consumable_resource: batch.ConsumableResource
    job_definitions: dict[int, batch.CfnJobDefinition] = field(default_factory=dict)
    job_definition_names: dict[int, str] = field(default_factory=dict)

    def job_definition_name(self, gpus: int) -> str:
        """The name of the team's job definition for jobs of ``gpus`` GPUs."""
        name = self.job_definition_names.get(gpus)  # as given, without a jsii round trip
        return name if name is not None else str(self.job_definitions[gpus].job_definition_name)


def reclaim_code(*, zones: bool = False) -> lambda_.Code:
    """The reclaim Lambda's code: ``core``, the Batch reader and ``lambdas/reclaim``, locally bundled;
    with ``zones`` (a queue with time windows), the time zone database too, so that a runtime
    without one still reads the windows' zones."""
    return package_code("lambdas/reclaim", ("core", "lambdas/reclaim"), ("batch_reader.py",),
                        packages=("tzdata",) if zones else ())


@jsii.implements(cdk.IResolvable)
class _Lazy:
    """A value computed at synthesis, after every add_team() call."""

    def __init__(self, produce: Callable[[], Any]) -> None:
        self._produce = produce
        self.creation_stack: list[str] = []

    def resolve(self, context: cdk.IResolveContext) -> Any:
        return self._produce()

    def to_string(self) -> str:
        return cdk.Token.as_string(self)


def _props_problems(config: FairshareConfig, teams: Sequence[TeamConfig], platform_name: str, queue_name: str | None,
                    vpc: ec2.IVpc | None, windows: Sequence[Window] = ()) -> list[Problem]:
    """The section and every team at once, by the config file's rules, with the construct's own props."""
    named = queue_name is not None and isinstance(queue_name, str) and re.fullmatch(BATCH_NAME_PATTERN, queue_name)
    checked = dataclasses.replace(config, queue_name=queue_name) if named and isinstance(config, FairshareConfig) \
        else config
    problems = config_problems(list(teams), platform=platform_name, fairshare=checked, owned=_ec2_type,
                               windows=windows)
    if isinstance(config, FairshareConfig):
        problems += fairshare_window_problems(config, windows)
    if queue_name is not None and not named:
        problems.append(Problem("queue_name", queue_name, "is not a valid job queue name",
                                "use up to 128 letters, digits, hyphens and underscores (no tokens)"))
    given_vpc: Any = getattr(config, "vpc", None)
    if vpc is not None and given_vpc is not None:
        problems.append(Problem("vpc", given_vpc.vpc_id, "is given twice: as vpc and as config.vpc (fairshare.vpc)",
                                "pass one of them"))
    return problems


class FairshareQueue(Construct):
    """A classic AWS Batch fair-share GPU queue with a reclaimer (see the module docstring)."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: FairshareConfig,
        platform_name: str = "gpu-share",
        queue_name: str | None = None,
        vpc: ec2.IVpc | None = None,
        image: str = DEFAULT_IMAGE,
        retry_on_error: bool = False,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        teams: Sequence[TeamConfig] = (),
        windows: Sequence[Window] = (),
    ) -> None:
        """
        :param config: the fleet (``capacity`` per EC2 GPU type), fair-share and reclaim settings.
        :param platform_name: prefix of generated names. Default: ``gpu-share``.
        :param queue_name: the job queue's name. Default: ``config.queue_name``, else ``<platform_name>-fairshare``.
        :param vpc: where the instances run (its private subnets with egress). Not together with
            ``config.vpc``. Default: the VPC of ``config.vpc`` when set (its ``subnet_ids`` and
            ``security_group_ids``), else a new VPC with 2 AZs, public and private subnets, one NAT
            gateway and flow logs.
        :param image: container image of the teams' job definitions (jobs override the command).
            Default: Amazon Linux 2023 from ECR Public.
        :param retry_on_error: retry jobs that fail with an error of their own, up to
            ``config.job_attempts``. Default: False (only lost instances are retried).
        :param log_retention: retention of the reclaimer's logs. Default: one month.
        :param teams: teams added at once; more can follow with :meth:`add_team`. Default: none.
        :param windows: the platform's time windows (``PlatformConfig.windows``), which the teams'
            values in a window name. The reclaimer reads the values in force at each cycle's own
            clock. Default: none.
        """
        raise_props_problems(_props_problems(config, teams, platform_name, queue_name, vpc, windows), scope, id)
        name = queue_name or config.queue_name or f"{platform_name}-fairshare"
        super().__init__(scope, id)
        self.config = config
        self.image = image
        self.retry_on_error = retry_on_error
        self._teams: dict[str, FairshareTeam] = {}
        #: The organisation's tree its teams are checked with (set from a config; the Lambda applies it).
        self._groups: tuple[GroupConfig, ...] = ()
        #: The time windows (in the reclaimer's settings; each cycle reads the values in force).
        self.windows: tuple[Window, ...] = tuple(windows)
        self._requeue_statement: iam.PolicyStatement | None = None
        self._platform_name = platform_name
        self.queue_name = name
        #: Job definitions are named ``<prefix><share>-gpu<N>``.
        self.job_definition_prefix = f"{name[:96]}-"
        self.fleet_gpus = br.fleet_gpus(config.capacity)
        stack = stack_of(self)
        self.compute_environment = self._compute_environment(config, vpc)
        self.scheduling_policy, self.job_queue = self._queue(config, name)

        # --- the reclaimer
        self.reclaimer: lambda_.Function | None = None
        self.failure_queue: sqs.Queue | None = None
        self.alarms: list[cloudwatch.Alarm] = []
        if config.reclaim.enabled:
            self._reclaimer(stack, log_retention)

        self.node.add_validation(_FairshareValidation(self))
        for team in teams:
            self.add_team(team)

    def _compute_environment(self, config: FairshareConfig, vpc: ec2.IVpc | None) -> batch.ManagedEc2EcsComputeEnvironment:
        """The managed EC2 compute environment of the declared GPU types, in the network it is given or a new one."""
        subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        security_groups = None
        if config.vpc is not None:
            self.vpc, subnets, security_groups = self._existing_network(config.vpc)
        else:
            self.vpc = vpc or self._default_vpc()
        types = sorted(config.capacity, key=lambda t: (instances.get(t).vcpus, t))
        max_vcpus = sum(instances.get(t).vcpus * n for t, n in config.capacity.items())
        min_vcpus = min(max_vcpus, config.min_instances * instances.get(types[0]).vcpus)
        compute_environment = batch.ManagedEc2EcsComputeEnvironment(
            self,
            "ComputeEnvironment",
            vpc=self.vpc,
            vpc_subnets=subnets,
            security_groups=security_groups,
            instance_types=[ec2.InstanceType(t) for t in types],
            use_optimal_instance_classes=False,
            images=[batch.EcsMachineImage(image_type=batch.EcsMachineImageType.ECS_AL2023_NVIDIA)],
            allocation_strategy=getattr(batch.AllocationStrategy, config.allocation_strategy),
            spot=config.spot,
            minv_cpus=min_vcpus,
            maxv_cpus=max_vcpus,
            update_to_latest_image_version=True,
        )
        acknowledge_nag(
            compute_environment,
            "AwsSolutions-IAM4",
            "the ECS container instance role needs AmazonEC2ContainerServiceforEC2Role, the AWS managed policy"
            " the ECS agent's API calls require (Batch user guide, Amazon ECS instance role)",
            findings=["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonEC2ContainerServiceforEC2Role"],
        )
        return compute_environment

    def _queue(self, config: FairshareConfig, name: str) -> tuple[batch.CfnSchedulingPolicy, batch.CfnJobQueue]:
        """The fair-share scheduling policy (one share per team, weighted by guarantee) and the job queue."""
        scheduling_policy = batch.CfnSchedulingPolicy(
            self,
            "SchedulingPolicy",
            name=f"{name[:120]}-policy",
            fairshare_policy=batch.CfnSchedulingPolicy.FairsharePolicyProperty(
                share_decay_seconds=config.share_decay_seconds,
                compute_reservation=config.compute_reservation,
                share_distribution=cast(cdk.IResolvable, _Lazy(self._share_distribution)),
            ),
        )
        job_queue = batch.CfnJobQueue(
            self,
            "Resource",
            job_queue_name=name,
            priority=1,
            state="ENABLED",
            scheduling_policy_arn=scheduling_policy.attr_arn,
            compute_environment_order=[
                batch.CfnJobQueue.ComputeEnvironmentOrderProperty(
                    order=1, compute_environment=self.compute_environment.compute_environment_arn
                )
            ],
        )
        return scheduling_policy, job_queue

    # ------------------------------------------------------------------ factory

    @classmethod
    def from_config(cls, scope: Construct, id: str, *, config: PlatformConfig, **kwargs: Any) -> FairshareQueue:
        """The queue of ``config.fairshare``; teams are added with :meth:`add_team` (the app does,
        in each team's stack). Share-identifier collisions among the config's teams fail here."""
        if config.fairshare is None:
            raise ConfigError(Problem(FAIRSHARE, None, "the config has no fairshare section",
                                      "add fairshare: {capacity: {g5.xlarge: 3}}"), source=config.source)
        # The section's rules on the config's teams (a config built in Python skipped parse_config).
        problems = config_problems(config.teams_for(FAIRSHARE), platform=config.name, fairshare=config.fairshare,
                                   owned=_ec2_type, groups=config.groups, windows=config.windows)
        if problems:
            raise ConfigError(problems, source=config.source)
        kwargs.setdefault("platform_name", config.name)
        kwargs.setdefault("windows", config.windows)
        queue = cls(scope, id, config=config.fairshare, **kwargs)
        queue._groups = tuple(config.groups)
        return queue

    @classmethod
    def for_platform(cls, scope: Construct, config: PlatformConfig) -> FairshareQueue:
        """The queue of ``config.fairshare`` (construct id ``FairshareQueue``), as :meth:`from_config` builds it."""
        return cls.from_config(scope, "FairshareQueue", config=config)

    def add_team_to(self, team: TeamConfig, stack: TeamStackLike) -> None:
        """Give a fair-share ``team`` its job definitions and GPU quota in its stack, the right to submit
        into its share, and the outputs naming the queue, the share, the job definitions and the tags."""
        if not team.guarantee_for(self.config.capacity):
            return
        member = self.add_team(team, scope=cast(Construct, stack))
        self.grant_submit(team.name, stack.submit_role)
        stack.output("FairshareQueueName", self.job_queue_name, "classic Batch GPU queue")
        stack.output("ShareIdentifier", self.share_identifier(team.name), "fair-share identifier")
        stack.output("FairshareJobDefinitions", ",".join(member.job_definition_name(n) for n in sorted(member.job_definitions)),
                     "job definitions of the team (one per GPU count)")
        stack.output("FairshareJobTags", ",".join(f"{k}={v}" for k, v in self.job_tags(team.name).items()),
                     "tags every job must carry (submissions without them are denied)")
        stack.acknowledge_submit_wildcards(*self.submit_wildcard_findings(team.name))

    def add_monitoring(self, platform: Any) -> Any:
        """The GPU-sharing dashboard and alarms of the platform stack ``platform`` (construct id
        ``Dashboard``), when the reclaimer runs: it emits their metrics. None without a reclaimer."""
        if self.reclaimer is None:
            return None

        return GpuShareDashboard.from_platform(platform, "Dashboard", platform=platform)

    def _existing_network(self, net: FairshareVpcConfig) -> tuple[ec2.IVpc, ec2.SubnetSelection, list | None]:
        """The VPC, subnets and security groups of ``fairshare.vpc``, imported by id (no lookup, so
        synthesis needs no account). No security groups given: the compute environment makes one."""
        # Fn::GetAZs: the attributes need some AZ list, and nothing here reads the VPC's own subnet lists
        # (the compute environment takes the subnets below), so the region's zones are an honest stand-in.
        vpc = ec2.Vpc.from_vpc_attributes(self, "Vpc", vpc_id=net.vpc_id, availability_zones=cdk.Fn.get_azs())
        cdk.Annotations.of(vpc).acknowledge_warning(
            "@aws-cdk/aws-ec2:vpcAttributeIsListTokenavailabilityZones",
            "fairshare.vpc names its subnets by id; no construct reads the imported VPC's subnet lists")
        imported = []
        for i, sid in enumerate(net.subnet_ids):
            subnet = ec2.Subnet.from_subnet_id(self, f"Subnet{i}", sid)
            cdk.Annotations.of(subnet).acknowledge_warning(
                "@aws-cdk/aws-ec2:noSubnetRouteTableId",
                "the compute environment uses only the subnet's id; routing is the VPC owner's (fairshare.vpc)")
            imported.append(subnet)
        subnets = ec2.SubnetSelection(subnets=imported)
        groups = [ec2.SecurityGroup.from_security_group_id(self, f"SecurityGroup{i}", gid, mutable=False)
                  for i, gid in enumerate(net.security_group_ids)] or None
        return vpc, subnets, groups

    def _default_vpc(self) -> ec2.Vpc:
        vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=1,
            restrict_default_security_group=False,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                ec2.SubnetConfiguration(name="compute", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=20),
            ],
        )
        vpc.add_flow_log("FlowLog")
        return vpc

    # ------------------------------------------------------------------ teams

    @property
    def teams(self) -> dict[str, FairshareTeam]:
        """The teams added so far, by name."""
        return dict(self._teams)

    def add_team(self, team: TeamConfig, *, scope: Construct | None = None, image: str | None = None) -> FairshareTeam:
        """Give ``team`` its share, its consumable GPU resource and its job definitions.

        :param scope: where to create the team's resources (its stack). Default: this construct.
        :param image: container image of the team's job definitions. Default: the queue's ``image``.
        """
        teams = [*(t.team for t in self._teams.values()), team]
        if isinstance(team, TeamConfig) and team.name in self._teams:
            raise ConfigError(Problem("team.name", team.name, "is already on this queue", "add each team once"),
                              source=self.node.path)
        checked = dataclasses.replace(self.config, queue_name=self.queue_name)
        problems = config_problems(teams, platform=self._platform_name, fairshare=checked, owned=_ec2_type,
                                   groups=self._groups, windows=self.windows)
        if problems:
            raise ConfigError(problems, source=self.node.path)
        if not team.guarantee_for(self.config.capacity):
            problems.append(Problem(f"TeamConfig({team.name!r}).guarantee", sorted(team.guarantee),
                                    "names no instance type of this fair-share fleet",
                                    f"guarantee one of {', '.join(self.config.capacity)}"))
        sid = br.share_identifier(team.name)
        guarantee = float(br.team_settings(team, self.config.capacity)["guarantee"][br.RESOURCE])
        # With time windows, the most the team may hold in any window: Batch's consumable
        # resource is not switched, the reclaimer holds the team to the values in force.
        quantity = max(self._gpu_quota(team_in_window(team, name)) for name in (None, *(w.name for w in self.windows)))
        if not problems and quantity < 1:
            problems.append(Problem(f"TeamConfig({team.name!r}).guarantee", guarantee,
                                    "gives the team less than one GPU (guarantee plus borrow cap), so it could never run a job",
                                    "guarantee at least one GPU, or let the team borrow (sharing: lend_and_borrow)"))
        if problems:
            raise ConfigError(problems, source=self.node.path)

        where = scope or self
        prefix = "Fairshare" if scope is not None else f"Team-{team.name}-"
        tags = {br.TAG_QUEUE: self.queue_name, br.TAG_TEAM: team.name}
        resource = batch.ConsumableResource(
            where, f"{prefix}GpuQuota", total_quantity=quantity,
            # Named, so that grants in any stack (the reclaimer's) name it without a cross-stack reference.
            consumable_resource_name=self.consumable_resource_name(sid),
            resource_type=batch.ConsumableResourceType.REPLENISHABLE, tags=tags,
        )
        member = FairshareTeam(team=team, share_identifier=sid, guarantee_gpus=guarantee, cap_gpus=float(quantity),
                               consumable_resource=resource)
        for n in job_definition_sizes(dict(self.config.capacity), quantity):
            member.job_definitions[n] = self._job_definition(where, f"{prefix}JobDefinitionGpu{n}", sid, n,
                                                             resource, image or self.image, tags)
            member.job_definition_names[n] = self._job_definition_name(sid, n)
        self._teams[team.name] = member
        if self._requeue_statement is not None and self.reclaimer is not None:
            self._requeue_statement.add_resources(*self._job_definition_arns(member),
                                                  self.consumable_resource_arn(team.name))
            acknowledge_nag(
                self._reclaimer_role, "AwsSolutions-IAM5",
                "a requeue resubmits a stopped job with the job definition revision it ran (any revision of the"
                " team's job definitions)",
                findings=[f"{_WILDCARD_PREFIX}job-definition/{member.job_definition_name(n)}:*"
                          for n in sorted(member.job_definitions)],
            )
        return member

    def _gpu_quota(self, team: TeamConfig) -> int:
        """Whole GPUs ``team`` may hold: its guarantee plus its borrow cap, within the fleet."""
        settings = br.team_settings(team, self.config.capacity)
        spec = reclaim.TeamSpec(
            name=team.name,
            guarantee=settings["guarantee"],
            sharing=settings.get("sharing", "lend_and_borrow"),
            borrow_limit_percent=settings.get("borrow_limit_percent", -1),
            borrow_limit=settings.get("borrow_limit"),
        )
        guarantee = float(settings["guarantee"][br.RESOURCE])
        cap = reclaim.borrow_cap(spec, br.RESOURCE)
        total = self.fleet_gpus if cap is None else min(self.fleet_gpus, guarantee + cap)
        return int(math.floor(total + reclaim.TOLERANCE))

    def _job_definition_name(self, sid: str, gpus: int) -> str:
        return f"{self.job_definition_prefix}{sid}-gpu{gpus}"

    def _job_definition(self, scope: Construct, id: str, sid: str, gpus: int, resource: batch.ConsumableResource,
                        image: str, tags: dict) -> batch.CfnJobDefinition:
        # The smallest instance type with enough GPUs sets the job's share of vCPUs and memory.
        fitting = sorted((instances.get(t) for t in self.config.capacity if instances.get(t).gpus >= gpus),
                         key=lambda i: (i.gpus, i.vcpus))
        info = fitting[0]
        vcpus = max(1, info.vcpus * gpus // info.gpus)
        memory = int(info.memory_gib * 1024 * gpus / info.gpus * MEMORY_FRACTION) // 256 * 256
        evaluate = [
            batch.CfnJobDefinition.EvaluateOnExitProperty(
                action="EXIT", on_status_reason=f"{br.RECLAIM_REASON_PREFIX}*"),
            batch.CfnJobDefinition.EvaluateOnExitProperty(action="RETRY", on_status_reason="Host EC2*"),
        ]
        if not self.retry_on_error:
            evaluate.append(batch.CfnJobDefinition.EvaluateOnExitProperty(action="EXIT", on_reason="*"))
        return batch.CfnJobDefinition(
            scope,
            id,
            type="container",
            job_definition_name=self._job_definition_name(sid, gpus),
            platform_capabilities=["EC2"],
            propagate_tags=True,
            tags=tags,
            container_properties=batch.CfnJobDefinition.ContainerPropertiesProperty(
                image=image,
                command=["nvidia-smi"],
                resource_requirements=[
                    batch.CfnJobDefinition.ResourceRequirementProperty(type="VCPU", value=str(vcpus)),
                    batch.CfnJobDefinition.ResourceRequirementProperty(type="MEMORY", value=str(memory)),
                    batch.CfnJobDefinition.ResourceRequirementProperty(type="GPU", value=str(gpus)),
                ],
            ),
            consumable_resource_properties=batch.CfnJobDefinition.ConsumableResourcePropertiesProperty(
                consumable_resource_list=[
                    batch.CfnJobDefinition.ConsumableResourceRequirementProperty(
                        consumable_resource=resource.consumable_resource_arn, quantity=gpus)
                ]
            ),
            retry_strategy=batch.CfnJobDefinition.RetryStrategyProperty(
                attempts=self.config.job_attempts, evaluate_on_exit=evaluate),
        )

    def _team(self, team: str) -> FairshareTeam:
        try:
            return self._teams[team]
        except KeyError:
            raise ConfigError(
                Problem("team", team, "is not on this fair-share queue",
                        f"use one of {', '.join(self._teams) or '(none: call add_team first)'}"),
                source=self.node.path,
            ) from None

    def share_identifier(self, team: str) -> str:
        """The fair-share identifier ``team``'s jobs are submitted with."""
        return self._team(team).share_identifier

    def weight_factor(self, team: str) -> float:
        """``team``'s fair-share weight factor: largest guarantee / its guarantee (lower gets more)."""
        return weight_factors({t.share_identifier: t.guarantee_gpus for t in self._teams.values()})[
            self._team(team).share_identifier]

    def _share_distribution(self) -> list[dict]:
        weights = weight_factors({t.share_identifier: t.guarantee_gpus for t in self._teams.values()})
        return [{"shareIdentifier": sid, "weightFactor": w} for sid, w in sorted(weights.items())]

    # ------------------------------------------------------------------ attributes

    @property
    def job_queue_arn(self) -> str:
        """The ARN of the job queue."""
        return read_once(self, "_job_queue_arn", lambda: self.job_queue.attr_job_queue_arn)

    @property
    def job_queue_name(self) -> str:
        """The name of the job queue."""
        return self.queue_name

    def job_tags(self, team: str) -> dict[str, str]:
        """The tags every job of ``team`` must carry (see :meth:`grant_submit`)."""
        self._team(team)
        return {br.TAG_QUEUE: self.queue_name, br.TAG_TEAM: team}

    def reclaim_settings(self) -> dict:
        """The reclaim settings baked into the Lambda (:mod:`cdk_gpu_share.aws.batch_reader`)."""
        return {
            "queue": self.queue_name,
            "capacity": {br.RESOURCE: br._num(self.fleet_gpus)},
            "settings": reclaim_settings(self.config.reclaim),
            "dry_run": self.config.reclaim.dry_run,
            "teams": [br.team_settings(t.team, self.config.capacity) for t in self._teams.values()],
            **self._group_settings(),
            **br.window_settings(self.windows, [t.team for t in self._teams.values()], self.config.capacity),
        }

    def _group_settings(self) -> dict:
        """``{"groups": [...]}``: the tree above the queue's teams, which the Lambda's planner
        applies; ``{}`` without groups (the settings of a flat queue stay as they were)."""
        teams = [t.team for t in self._teams.values()]
        if not self._groups or not any(t.group for t in teams):
            return {}
        return {"groups": group_entries(self._groups, teams, self.config.capacity)}

    # ------------------------------------------------------------------ grants

    def _arn(self, resource: str, name: str) -> str:
        return format_arn(stack_of(self), service="batch", resource=resource, resource_name=name)

    def consumable_resource_name(self, share_identifier: str) -> str:
        """The name of a team's consumable GPU resource: ``<queue>-<share>-gpus``."""
        return f"{self.job_definition_prefix}{share_identifier}-gpus"[:128]

    def consumable_resource_arn(self, team: str) -> str:
        """The ARN of ``team``'s consumable GPU resource (its guarantee plus borrow cap)."""
        return self._arn("consumable-resource", self.consumable_resource_name(self._team(team).share_identifier))

    def _job_definition_arns(self, member: FairshareTeam) -> list[str]:
        """The team's job definitions, by name (latest revision) and by any revision."""
        arns = []
        for n in sorted(member.job_definitions):
            name = member.job_definition_name(n)
            arns += [self._arn("job-definition", name), self._arn("job-definition", f"{name}:*")]
        return arns

    def submit_statements(self, team: str) -> list[iam.PolicyStatement]:
        """The one place that builds a team's permissions on this queue (see :meth:`grant_submit`)."""
        return [iam.PolicyStatement(**props) for props in self._submit_statement_props(team)]

    def _submit_statement_props(self, team: str) -> list[dict[str, Any]]:
        # PolicyStatement props, so that grant_submit passes the first to Grant.add_to_principal
        # without creating it and reading it back (jsii round trips, per team).
        member = self._team(team)
        jobs = self._arn("job", "*")
        # The two tags every job carries, and the optional checkpoint interval; never the
        # reclaimer's own (requeued-from, requeue-attempt, borrowed).
        tag_keys = {"aws:TagKeys": list(br.SUBMIT_TAG_KEYS)}
        request_tags = {f"aws:RequestTag/{br.TAG_QUEUE}": self.queue_name, f"aws:RequestTag/{br.TAG_TEAM}": team}
        return [
            dict(
                sid="SubmitIntoOwnShare",
                actions=SUBMIT_ACTIONS,
                resources=[self.job_queue_arn, *self._job_definition_arns(member),
                           self.consumable_resource_arn(team), jobs],
                conditions={
                    "StringEquals": {"batch:ShareIdentifier": member.share_identifier, **request_tags},
                    "ForAllValues:StringEquals": tag_keys,
                },
            ),
            dict(
                sid="TagOwnJobsOnSubmit",
                actions=["batch:TagResource"],
                resources=[jobs],
                conditions={
                    "StringEquals": request_tags,
                    "ForAllValues:StringEquals": tag_keys,
                    "StringEqualsIfExists": {f"aws:ResourceTag/{br.TAG_TEAM}": team,
                                             f"aws:ResourceTag/{br.TAG_QUEUE}": self.queue_name},
                },
            ),
            dict(
                sid="StopOwnJobs",
                actions=["batch:CancelJob", "batch:TerminateJob"],
                resources=[jobs],
                conditions={"StringEquals": {f"aws:ResourceTag/{br.TAG_TEAM}": team,
                                             f"aws:ResourceTag/{br.TAG_QUEUE}": self.queue_name}},
            ),
            dict(sid="ReadJobs", actions=READ_ACTIONS, resources=["*"]),
        ]

    def grant_submit(self, team: str, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` submit into ``team``'s share only, with ``team``'s job definitions only.

        ``batch:SubmitJob`` authorizes on the job queue, the job definition, the job and the
        consumable resources the job involves (Service Authorization Reference for AWS Batch).
        The statement names this queue, the team's job definitions, the team's consumable
        resource and ``job/*`` (a new job's ARN is unknown before submission), so a job that
        overrides its consumable resources with another team's is denied. The job's
        ``batch:ShareIdentifier`` must be the team's (its identity for fair share and for the
        reclaimer), and it must carry exactly the tags ``gpu-share:queue`` and
        ``gpu-share:team`` with this queue's and team's names (``aws:RequestTag``,
        ``aws:TagKeys``; the reserved ``gpu-share:requeued-from`` is the reclaimer's alone).

        Tagging on creation also needs ``batch:TagResource`` on the new job. Batch has no
        condition key that tells tagging on creation from re-tagging an existing job, so the
        grant writes only the team's own two tags, and only on a job that carries no such tag
        yet or carries the team's own (``StringEqualsIfExists aws:ResourceTag``): another
        team's or another queue's tagged job cannot be re-tagged. The team may cancel and
        terminate its own tagged jobs. ``ListJobs`` and ``DescribeJobs`` support no
        resource-level permission and are granted on ``*``. Residual risk: a job of the
        account that carries no ``gpu-share`` tag (not one of this queue's: every submission
        here is tagged) can be tagged and then cancelled; see README, Security model.
        """
        first, *rest = self._submit_statement_props(team)
        # The first as a Grant (what this returns), from its props: no reading them back.
        grant = iam.Grant.add_to_principal(
            grantee=grantee, actions=first["actions"], resource_arns=first["resources"],
            conditions=first["conditions"],
        )
        add_statements(grantee, [iam.PolicyStatement(**props) for props in rest])
        return grant

    def submit_wildcard_findings(self, team: str) -> list[str]:
        """The granular cdk-nag IAM5 findings :meth:`grant_submit` causes besides ``Resource::*``."""
        member = self._team(team)
        return [f"{_WILDCARD_PREFIX}job/*"] + [
            f"{_WILDCARD_PREFIX}job-definition/{member.job_definition_name(n)}:*" for n in sorted(member.job_definitions)
        ]

    # ------------------------------------------------------------------ metrics

    @property
    def metrics(self) -> ReclaimerMetrics:
        """The reclaimer's metric factory for this queue (1-minute period), shared with the dashboard."""
        return ReclaimerMetrics(self.queue_name, period=cdk.Duration.minutes(1), check_team=self._team)

    def metric(self, name: str, team: str | None = None, **options: Any) -> cloudwatch.Metric:
        """A reclaimer metric (names in :mod:`cdk_gpu_share.core.records.metrics`), per team when ``team`` is given.

        :param options: passed to :class:`aws_cdk.aws_cloudwatch.Metric`. Default period: 1 minute;
            default statistic: the metric's own (Maximum for gauges, Sum for counts).
        """
        return self.metrics.metric(name, team, **options)

    def metric_usage(self, team: str, **options: Any) -> cloudwatch.Metric:
        """GPUs held by ``team``'s running jobs (Maximum)."""
        return self.metrics.metric_usage(team, **options)

    def metric_borrowed(self, team: str, **options: Any) -> cloudwatch.Metric:
        """GPUs ``team`` uses beyond its guarantee (Maximum)."""
        return self.metrics.metric_borrowed(team, **options)

    def metric_preemptions(self, team: str, **options: Any) -> cloudwatch.Metric:
        """Jobs of ``team`` stopped by the reclaimer (Sum)."""
        return self.metrics.metric_preemptions(team, **options)

    def metric_lender_wait(self, team: str, **options: Any) -> cloudwatch.Metric:
        """The longest a job of ``team`` within its guarantee has waited, in seconds (Maximum)."""
        return self.metrics.metric_lender_wait(team, **options)

    def metric_reclaim_errors(self, **options: Any) -> cloudwatch.Metric:
        """Failed reclaim cycles of this queue (Sum)."""
        return self.metrics.metric_reclaim_errors(**options)

    def metric_requeue_oldest_open(self, **options: Any) -> cloudwatch.Metric:
        """Seconds past its settle time of the oldest requeue the ledger holds open (Maximum)."""
        return self.metrics.metric_requeue_oldest_open(**options)

    # ------------------------------------------------------------------ the reclaimer

    def _reclaimer_statements(self) -> list[iam.PolicyStatement]:
        """The one place that builds the reclaimer's permissions.

        The reclaimer picks its victims from ``ListJobs`` of its own queue (never by tag), so
        the ``gpu-share:queue`` tag on ``TerminateJob`` is a second fence, not its authority.
        Requeue resubmits into this queue, into a configured team's share, with that team's
        job definitions and consumable resource (added by :meth:`add_team`), carrying the
        queue tag and no tag keys but the platform's five. The requeue ledger is read and
        written item by item, and queried only through its index of open records (no Scan,
        no DeleteItem, no Query of the table itself).
        """
        jobs = self._arn("job", "*")
        tag_keys = {"aws:TagKeys": list(br.REQUEUE_TAG_KEYS)}
        queue_tag = {f"aws:RequestTag/{br.TAG_QUEUE}": self.queue_name}
        self._requeue_statement = iam.PolicyStatement(
            sid="RequeueIntoTeamShares",
            actions=["batch:SubmitJob"],
            resources=[self.job_queue_arn, jobs],
            conditions={
                "StringEquals": {**queue_tag, "batch:ShareIdentifier": _Lazy(
                    lambda: sorted(t.share_identifier for t in self._teams.values()))},
                "ForAllValues:StringEquals": tag_keys,
            },
        )
        return [
            # Read: no resource-level permission exists for ListJobs/DescribeJobs.
            iam.PolicyStatement(sid="ReadJobs", actions=READ_ACTIONS, resources=["*"]),
            # Stop: TerminateJob(s) authorizes on job/* only.
            iam.PolicyStatement(sid="StopThisQueuesJobs", actions=["batch:TerminateJob"], resources=[jobs],
                                conditions={"StringEquals": {f"aws:ResourceTag/{br.TAG_QUEUE}": self.queue_name}}),
            self._requeue_statement,
            iam.PolicyStatement(
                sid="TagRequeuedJobs", actions=["batch:TagResource"], resources=[jobs],
                conditions={"StringEquals": queue_tag, "ForAllValues:StringEquals": tag_keys,
                            "StringEqualsIfExists": {f"aws:ResourceTag/{br.TAG_QUEUE}": self.queue_name}},
            ),
            # Requeue exactly once: claim, read and record in the ledger.
            iam.PolicyStatement(sid="RequeueLedger", actions=["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
                                resources=[self.requeue_table.table_arn]),
            # The cycle finds the open requeues it must finish.
            iam.PolicyStatement(sid="RequeueLedgerOpenRecords", actions=["dynamodb:Query"],
                                resources=[f"{self.requeue_table.table_arn}/index/{br.LEDGER_OPEN_INDEX}"]),
        ] + self._record_statements(jobs)

    def _record_statements(self, jobs: str) -> list[iam.PolicyStatement]:
        """With ``victim_order: checkpoint``, the reclaimer records whether each run started on
        borrowed capacity as a tag on the job: that one tag key, on this queue's jobs only."""
        if self.config.reclaim.victim_order != "checkpoint":
            return []
        return [iam.PolicyStatement(
            sid="RecordBorrowedRuns", actions=["batch:TagResource"], resources=[jobs],
            conditions={"StringEquals": {f"aws:ResourceTag/{br.TAG_QUEUE}": self.queue_name},
                        "ForAllValues:StringEquals": {"aws:TagKeys": [br.TAG_BORROWED]},
                        "StringLike": {f"aws:RequestTag/{br.TAG_BORROWED}": ["*:true", "*:false"]},
                        "Null": {"aws:TagKeys": "false"}},
        )]

    def _reclaimer(self, stack: cdk.Stack, retention: logs.RetentionDays) -> None:
        """The reclaim Lambda with its role, logs, failure queue, requeue ledger, triggers and alarms."""
        log_group = logs.LogGroup(self, "ReclaimerLogs", retention=retention)
        role = iam.Role(self, "ReclaimerRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description=f"Reclaim Lambda of Batch queue {self.queue_name}")
        log_group.grant_write(role)
        self.failure_queue = sqs.Queue(
            self, "ReclaimerFailures", encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True,
            retention_period=cdk.Duration.days(14),
        )
        acknowledge_nag(self.failure_queue, "AwsSolutions-SQS3",
                        "this queue is itself the on-failure destination (dead letters) of the reclaim Lambda")
        self.requeue_table = self._requeue_ledger()
        fn = self._reclaim_function(role, log_group)
        self._reclaim_triggers(fn)
        self._reclaim_alarms(fn)

    def _requeue_ledger(self) -> dynamodb.Table:
        # The requeue ledger: one item per job the reclaimer stopped, so that each is
        # resubmitted exactly once (SubmitJob has no client token; ListJobs lags), and a
        # sparse index of the records still open, which every cycle finishes (oldest first).
        # Items expire (TTL) after 30 days; the table holds nothing a redeploy needs.
        table = dynamodb.Table(
            self, "RequeueLedger",
            partition_key=dynamodb.Attribute(name="jobId", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute="expiresAt",
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True),
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        table.add_global_secondary_index(
            index_name=br.LEDGER_OPEN_INDEX,
            partition_key=dynamodb.Attribute(name="openQueue", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="settleAfter", type=dynamodb.AttributeType.NUMBER),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
        )
        return table

    def _reclaim_function(self, role: iam.Role, log_group: logs.LogGroup) -> lambda_.Function:
        """The reclaim Lambda: one at a time, retried twice, then its failure queue; its role's statements."""
        assert self.failure_queue is not None  # made before the function, which names it
        reclaim_cfg = self.config.reclaim
        settings = _Lazy(lambda: br.encode_settings(self.reclaim_settings()))
        fn = lambda_.Function(
            self,
            "Reclaimer",
            description=f"Takes lent GPUs back on Batch queue {self.queue_name} (cdk-gpu-share)",
            runtime=lambda_.Runtime.PYTHON_3_14,
            architecture=lambda_.Architecture.ARM_64,
            handler=HANDLER,
            code=reclaim_code(zones=bool(self.windows)),
            timeout=cdk.Duration.minutes(2),
            memory_size=512,
            role=role,
            log_group=log_group,
            reserved_concurrent_executions=1,
            environment={
                "GPU_SHARE_QUEUE": self.job_queue_arn,
                "GPU_SHARE_SETTINGS": cdk.Token.as_string(settings),
                "GPU_SHARE_DRY_RUN": "true" if reclaim_cfg.dry_run else "false",
                "GPU_SHARE_REQUEUE_TABLE": self.requeue_table.table_name,
                # The cycle puts a requeue that needs a person here too (a replayable event).
                "GPU_SHARE_FAILURE_QUEUE": self.failure_queue.queue_url,
            },
            on_failure=destinations.SqsDestination(self.failure_queue),
            retry_attempts=2,
            max_event_age=cdk.Duration.hours(1),
        )
        self.reclaimer = fn
        self._reclaimer_role = role  # fn.role is a jsii round trip: add_team acknowledges on it per team
        acknowledge_role_dependency(fn)
        add_statements(role, self._reclaimer_statements())
        acknowledge_nag(
            role,
            "AwsSolutions-IAM5",
            "ListJobs/DescribeJobs authorize only on '*'; TerminateJob authorizes only on job/* (limited to this"
            " queue's jobs by the aws:ResourceTag condition); a resubmitted job's ARN is unknown before"
            " submission",
            findings=[
                "Resource::*",
                f"{_WILDCARD_PREFIX}job/*",
            ],
        )

        return fn

    def _reclaim_triggers(self, fn: lambda_.Function) -> None:
        """A job becoming RUNNABLE, a job the reclaimer stopped (to resubmit it), and the schedule."""
        batch_event = {"source": ["aws.batch"], "detail_type": ["Batch Job State Change"]}
        runnable = events.Rule(
            self, "RunnableRule",
            description=f"Reclaim when a job of {self.queue_name} becomes RUNNABLE",
            event_pattern=events.EventPattern(**batch_event,
                                              detail={"jobQueue": [self.job_queue_arn], "status": ["RUNNABLE"]}),
        )
        stopped = events.Rule(
            self, "ReclaimedRule",
            description=f"Resubmit jobs of {self.queue_name} the reclaimer stopped",
            event_pattern=events.EventPattern(**batch_event, detail={
                "jobQueue": [self.job_queue_arn], "status": ["FAILED"],
                "statusReason": events.Match.prefix(br.RECLAIM_REASON_PREFIX),
            }),
        )
        schedule = events.Rule(
            self, "Schedule",
            description=f"Reclaim cycle of {self.queue_name}",
            schedule=events.Schedule.rate(cdk.Duration.minutes(self.config.reclaim.schedule_minutes)),
        )
        for rule in (runnable, stopped, schedule):
            rule.add_target(targets.LambdaFunction(fn))


    def _reclaim_alarms(self, fn: lambda_.Function) -> None:
        """Errors of the Lambda, a stopped job waiting too long for its resubmission, and the failure queue."""
        assert self.failure_queue is not None
        self.alarms.append(cloudwatch.Alarm(
            self, "ReclaimerErrorsAlarm",
            alarm_description=f"The reclaim Lambda of {self.queue_name} failed (see its logs and failure queue)",
            metric=fn.metric_errors(period=cdk.Duration.minutes(5), statistic="Sum"),
            threshold=1, evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        ))
        self.alarms.append(cloudwatch.Alarm(
            self, "RequeueStalledAlarm",
            alarm_description=f"A job the reclaimer of {self.queue_name} stopped has waited more than"
                              f" {REQUEUE_STALLED_SECONDS // 60} minutes for its resubmission: Batch or DynamoDB"
                              " has been failing (the cycle resubmits it once they answer; see the logs)",
            metric=self.metric_requeue_oldest_open(period=cdk.Duration.minutes(5)),
            threshold=REQUEUE_STALLED_SECONDS, evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        ))
        self.alarms.append(cloudwatch.Alarm(
            self, "ReclaimerFailuresAlarm",
            alarm_description=f"A job the reclaimer of {self.queue_name} stopped needs a person: Batch refused its"
                              " resubmission again and again for about two hours, or it cannot be resubmitted (array,"
                              " multi-node, EKS); or an event found DynamoDB unreachable (the cycle resubmits"
                              " that job anyway). Fix the cause, then send each message's requestPayload to the"
                              " reclaim Lambda",
            metric=self.failure_queue.metric_approximate_number_of_messages_visible(period=cdk.Duration.minutes(5)),
            threshold=1, evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        ))


@jsii.implements(IValidation)
class _FairshareValidation:
    """Deferred rules: at least one team; guarantees within capacity; settings fit Lambda's environment."""

    def __init__(self, queue: FairshareQueue) -> None:
        self.queue = queue

    def validate(self) -> list[str]:
        q = self.queue
        if not q._teams:
            return [f"fair-share queue {q.queue_name} has no team: call add_team() for at least one team"]
        errors = [str(p) for p in check_backend(FAIRSHARE, q.config, [t.team for t in q._teams.values()])]
        if q.reclaimer is not None:
            # The other variables: the queue's ARN, dry run, and the ledger table's name
            # (CloudFormation generates it: up to 255 characters).
            size = len(br.encode_settings(q.reclaim_settings())) + 200 + 256
            if size > LAMBDA_ENV_LIMIT:
                errors.append(
                    f"the reclaimer's settings for {len(q._teams)} teams take {size} bytes, above the"
                    f" {LAMBDA_ENV_LIMIT} bytes Lambda allows for environment variables: use shorter team names"
                    " or split the teams over two queues"
                )
        return errors
