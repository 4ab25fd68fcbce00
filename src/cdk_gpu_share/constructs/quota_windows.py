"""The deployment of time windows on Batch quota management and HyperPod: the quota window
switcher (:mod:`cdk_gpu_share.lambdas.quota_switcher`), a schedule per boundary, a run after
each deploy, and the alarm when a window is not applied.

:class:`QuotaWindowSwitcher` is given the platform's windows and, per team, its quota share or
compute quota with the values of the base and of each window (as the update API takes them);
it deploys:

* the switcher function, whose role may read and update those shares and quotas only, by ARN;
* one EventBridge Scheduler schedule per boundary (a window's opening or closing), a cron in
  the window's own time zone, so daylight saving is the zone's (and one more where the zone's
  clocks jump over a boundary's time, which the scheduler would skip); the function works the window
  out at its own clock, so a boundary delivered late or twice does no harm;
* a custom resource that runs the function when a deploy changes a share, a quota or a window
  (CloudFormation writes the base values back when it updates a share or a quota);
* alarms ("quota window not applied") on the function's errors, on a boundary the scheduler
  could not deliver and on a run Lambda dropped before it started, routed as every alarm of the
  platform.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timezone
from typing import Any, cast

import aws_cdk as cdk
import jsii
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from aws_cdk import custom_resources as cr
from constructs import Construct

from cdk_gpu_share.constructs._checks import acknowledge_nag, acknowledge_role_dependency
from cdk_gpu_share.constructs._lambda_code import package_code
from cdk_gpu_share.core.configuration.window_crons import skipped_at
from cdk_gpu_share.core.configuration.windows import DAYS, Window, window_mapping

__all__ = ["QuotaWindowSwitcher", "boundary_crons"]

SWITCHER_HANDLER = "cdk_gpu_share.lambdas.quota_switcher.handler.handler"
#: The environment variable of the function's settings (the handler's ``SETTINGS_ENV``).
SETTINGS_ENV = "GPU_SHARE_SWITCHER"
#: How late a boundary may still be delivered, and how often retried (the function reads its
#: own clock, so a late one applies the window then in force).
MAX_EVENT_AGE_SECONDS = 3600
SCHEDULE_RETRIES = 3


def boundary_crons(window: Window, first: date | None = None) -> dict[str, str]:
    """The EventBridge Scheduler cron expressions of ``window``'s opening and closing, in its
    own time zone: ``{"open": ..., "close": ...}``. A window that ends at or before its start
    closes the next day. EventBridge Scheduler skips a cron time that falls in a daylight-saving
    gap, so where one in the two years from ``first`` (default: today) skips a boundary's
    wall-clock time there is one more at the time the boundary falls to on that day
    (``open-dst``, ``close-dst``): the switcher, reading its own clock, then finds the window
    that is in force."""
    first = first or datetime.now(timezone.utc).date()
    start_h, start_m = (int(x) for x in window.start.split(":"))
    end_h, end_m = (int(x) for x in window.end.split(":"))
    days = [DAYS.index(d) for d in window.days]
    next_day = (end_h, end_m) <= (start_h, start_m)
    close_days = [(d + 1) % 7 for d in days] if next_day else days

    def cron(minute: int, hour: int, on: list[int]) -> str:
        names = ",".join(DAYS[d].upper() for d in sorted(set(on)))
        return f"cron({minute} {hour} ? * {names} *)"

    out = {}
    for edge, (h, m), on in (("open", (start_h, start_m), days), ("close", (end_h, end_m), close_days)):
        out[edge] = cron(m, h, on)
        moved = skipped_at(window, f"{h:02d}:{m:02d}", on, first)
        if moved is not None:
            mh, mm = (int(x) for x in moved.split(":"))
            out[f"{edge}-dst"] = cron(mm, mh, on)
    return out


class QuotaWindowSwitcher(Construct):
    """Switches Batch quota shares and HyperPod compute quotas with the platform's windows.

    Add each team's share or quota with :meth:`add_quota_share` or :meth:`add_compute_quota`.
    """

    def __init__(self, scope: Construct, id: str, *, windows: Sequence[Window], deployed: str | None = None) -> None:
        """
        :param windows: the platform's windows (``PlatformConfig.windows``).
        :param deployed: a fingerprint of what the deploy writes into the shares and quotas (the
            teams and the backends' sections): when it changes, the run after the deploy runs
            again, even if no value of the switcher's changed (a share updated for another
            property is written back to the base all the same). Default: the values only.
        """
        super().__init__(scope, id)
        self.windows = tuple(windows)
        self._deployed = deployed
        self._targets: list[dict[str, Any]] = []
        self.log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_MONTH)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                             description="Switches the platform's quota shares and compute quotas at each time"
                                         " window's boundary (cdk-gpu-share)")
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            self, "Function",
            description="Puts each team's quota share or compute quota at the values of the window in force"
                        " (cdk-gpu-share)",
            runtime=lambda_.Runtime.PYTHON_3_14,
            architecture=lambda_.Architecture.ARM_64,
            handler=SWITCHER_HANDLER,
            # The time zones come with the code: a runtime without a zone database still reads them.
            code=package_code("lambdas/quota_switcher", ("core", "lambdas/quota_switcher"), (),
                              packages=("tzdata",)),
            # Each share read and written up to 4 times (backoff 2, 4, 8 s), each call 3 tries of 3 + 10 s.
            timeout=cdk.Duration.minutes(5),
            memory_size=256,
            role=self.role,
            log_group=self.log_group,
            environment={SETTINGS_ENV: cdk.Lazy.string(_Produce(self._settings))},
        )
        self._schedules()
        self._after_deploy()
        #: A switch that could not be applied after its retries: the shares are not those of the
        #: window in force until the next run succeeds.
        self.alarm = self._not_applied(
            "NotAppliedAlarm", "the quota window switcher failed (see its log line switch_failed for the teams"
            " and the error); their quota shares or compute quotas are not those of the window in force",
            self.function.metric_errors(period=cdk.Duration.minutes(5), statistic="Sum"))
        self.undelivered_alarm = self._not_applied(
            "NotDeliveredAlarm", "a boundary's schedule could not invoke the quota window switcher (its message"
            " is in the dead-letter queue); the shares and quotas keep the values of its last run until the next one",
            self.undelivered.metric_approximate_number_of_messages_visible(
                period=cdk.Duration.minutes(5), statistic="Maximum"))
        # The scheduler hands a boundary to Lambda's own queue of asynchronous events: an event
        # dropped there (throttled past its age) never runs, so neither alarm above sees it.
        self.dropped_alarm = self._not_applied(
            "DroppedAlarm", "Lambda dropped a run of the quota window switcher before it started (throttled past"
            " the event's age); the shares and quotas keep the values of its last run until the next one",
            cloudwatch.Metric(namespace="AWS/Lambda", metric_name="AsyncEventsDropped",
                              dimensions_map={"FunctionName": self.function.function_name},
                              period=cdk.Duration.minutes(5), statistic="Sum"))

    def _not_applied(self, id: str, why: str, metric: cloudwatch.IMetric) -> cloudwatch.Alarm:
        """A "quota window not applied" alarm: ``metric`` at 1 or more in a period of 5 minutes."""
        return cloudwatch.Alarm(
            self, id, alarm_description=f"Quota window not applied: {why}", metric=metric, threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)

    # -- the targets ----------------------------------------------------------------

    def add_quota_share(self, team: str, share_arn: str, values: Mapping[str | None, Mapping[str, Any]],
                        resource: cdk.CfnResource | None = None) -> None:
        """``team``'s Batch quota share: ``values`` maps None (the base) and each window's name to
        the ``UpdateQuotaShare`` fields (``capacityLimits``, ``resourceSharingConfiguration``)."""
        self._add("batch", team, share_arn, values, resource)
        self.role.add_to_principal_policy(iam.PolicyStatement(
            actions=["batch:DescribeQuotaShare", "batch:UpdateQuotaShare"], resources=[share_arn]))

    def add_compute_quota(self, team: str, quota_id: str, quota_arn: str,
                          values: Mapping[str | None, Mapping[str, Any]],
                          resource: cdk.CfnResource | None = None) -> None:
        """``team``'s HyperPod compute quota: ``values`` maps None (the base) and each window's
        name to the ``UpdateComputeQuota`` field ``ComputeQuotaConfig``."""
        self._add("hyperpod", team, quota_id, values, resource)
        self.role.add_to_principal_policy(iam.PolicyStatement(
            actions=["sagemaker:DescribeComputeQuota", "sagemaker:UpdateComputeQuota"], resources=[quota_arn]))

    def _add(self, kind: str, team: str, id: str, values: Mapping[str | None, Mapping[str, Any]],
             resource: cdk.CfnResource | None) -> None:
        self._targets.append({"kind": kind, "team": team, "id": id, "base": dict(values[None]),
                              "windows": {w: dict(v) for w, v in values.items() if w is not None}})
        if resource is not None:
            # Run after CloudFormation has written the share's base values.
            self.after_deploy.node.add_dependency(resource)

    @property
    def teams(self) -> list[str]:
        """The teams whose share or quota this switcher writes, in the order added, each once."""
        return list(dict.fromkeys(t["team"] for t in self._targets))

    def _settings(self) -> str:
        settings = {"windows": [window_mapping(w) for w in self.windows], "targets": self._targets}
        return cdk.Stack.of(self).to_json_string(settings)

    # -- what runs it -----------------------------------------------------------------

    def _schedules(self) -> None:
        self.scheduler_role = iam.Role(self, "SchedulerRole", assumed_by=iam.ServicePrincipal("scheduler.amazonaws.com"),
                                       description="Invokes the quota window switcher at each boundary (cdk-gpu-share)")
        self.function.grant_invoke(self.scheduler_role)
        # A boundary the scheduler could not deliver (retries spent) goes here, and raises the
        # "not applied" alarm: the function's errors never see a run that did not happen.
        self.undelivered = sqs.Queue(self, "Undelivered", encryption=sqs.QueueEncryption.SQS_MANAGED,
                                     enforce_ssl=True, retention_period=cdk.Duration.days(14))
        acknowledge_nag(self.undelivered, "AwsSolutions-SQS3",
                        "this queue is itself the dead-letter queue of the quota window schedules")
        self.undelivered.grant_send_messages(self.scheduler_role)
        self.schedules: list[scheduler.CfnSchedule] = []
        for window in self.windows:
            for edge, expression in boundary_crons(window).items():
                self.schedules.append(scheduler.CfnSchedule(
                    self, f"{edge.capitalize()}-{window.name}",
                    description=f"The {'opening' if edge.startswith('open') else 'closing'} of the time window"
                                f" {window.name} ({window.start} to {window.end}, {window.timezone})",
                    schedule_expression=expression,
                    schedule_expression_timezone=window.timezone,
                    flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
                    target=scheduler.CfnSchedule.TargetProperty(
                        arn=self.function.function_arn, role_arn=self.scheduler_role.role_arn,
                        input=json.dumps({"boundary": edge.removesuffix("-dst"), "window": window.name}),
                        dead_letter_config=scheduler.CfnSchedule.DeadLetterConfigProperty(
                            arn=self.undelivered.queue_arn),
                        retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
                            maximum_event_age_in_seconds=MAX_EVENT_AGE_SECONDS,
                            maximum_retry_attempts=SCHEDULE_RETRIES)),
                ))

    def _after_deploy(self) -> None:
        provider = cr.Provider(self, "Provider", on_event_handler=self.function,
                               log_retention=None, log_group=logs.LogGroup(
                                   self, "ProviderLogs", retention=logs.RetentionDays.ONE_MONTH))
        self._acknowledge(provider)
        # Keyed on the settings: a deploy that changes a share, a quota or a window runs it again.
        self.after_deploy = cdk.CustomResource(
            self, "AfterDeploy", service_token=provider.service_token,
            resource_type="Custom::GpuShareQuotaWindow",
            properties={"Settings": cdk.Lazy.string(_Produce(self._settings)),
                        **({"Deployed": self._deployed} if self._deployed is not None else {})})


    def _acknowledge(self, provider: cr.Provider) -> None:
        """What cdk-nag and cfn-lint say of the parts aws-cdk-lib generates, and why it stands."""
        function_arn = f"Resource::<{cdk.Stack.of(self).get_logical_id(cast(cdk.CfnElement, self.function.node.default_child))}.Arn>:*"
        acknowledge_nag(self.scheduler_role, "AwsSolutions-IAM5",
                        "the schedules invoke the switcher function by ARN with any version qualifier (:*), as"
                        " aws-cdk-lib's grant_invoke writes it; nothing else", findings=[function_arn])
        framework = [c for c in provider.node.find_all() if isinstance(c, lambda_.Function)]
        acknowledge_nag(provider, "AwsSolutions-IAM4",
                        "the CDK provider framework's function uses AWSLambdaBasicExecutionRole for its own logs",
                        findings=["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"])
        acknowledge_nag(provider, "AwsSolutions-IAM5",
                        "the provider framework invokes the switcher function by ARN with any version qualifier (:*),"
                        " as aws-cdk-lib's custom_resources.Provider generates it",
                        findings=[function_arn, *(
                            f"Resource::<{cdk.Stack.of(self).get_logical_id(cast(cdk.CfnElement, fn.node.default_child))}.Arn>:*"
                            for fn in framework)])
        acknowledge_nag(provider, "AwsSolutions-L1",
                        "the provider framework's Node.js function uses the runtime aws-cdk-lib pins for it")
        for owner in (self.function, *framework):
            acknowledge_role_dependency(owner)


@jsii.implements(cdk.IStableStringProducer)
class _Produce:
    def __init__(self, produce: Any) -> None:
        self._produce = produce

    def produce(self) -> str:
        return str(self._produce())
