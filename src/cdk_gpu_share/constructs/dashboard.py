"""GpuShareDashboard: what the GPU sharing does, per team, and alarms when it goes wrong.

The reclaim Lambda of a classic fair-share queue emits one set of metrics per team
and per reclaim cycle (:mod:`cdk_gpu_share.core.records.metrics`, embedded metric format).
This construct reads those metrics only:

* a CloudWatch dashboard: per team, GPUs used against the guarantee and GPUs borrowed;
  for all teams, borrowed GPUs, pending jobs, preemptions, reclaims and how long
  lenders waited for capacity within their guarantee; the reclaimer's health
  (errors, cycle time, Lambda errors and throttles);
* one alarm per team, when a pending job of the team has waited longer than
  ``lender_wait_threshold`` for capacity within its guarantee (the reclaimer should
  have given it back within one poll interval plus ``reclaim_after_seconds``);
* one alarm on reclaimer errors (the cycle's ``ReclaimErrors`` plus the Lambda's own
  ``Errors`` when the function is given);
* optionally, an SNS action on every alarm: a topic you pass, or an encrypted topic
  created here for ``alarm_emails``.

Example::

    dashboard = GpuShareDashboard(self, "Dashboard",
        queue_name=queue.job_queue_name,
        teams=["team-a", "team-b"],
        reclaim_function=queue.reclaimer,
        lender_wait_threshold=Duration.minutes(15),
        alarm_emails=["gpu-oncall@example.com"],
    )
    dashboard.metric_usage("team-a")

or, inside a :class:`~cdk_gpu_share.stacks.platform.PlatformStack`,
``GpuShareDashboard.from_platform(self, "Dashboard", platform=self)``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

import aws_cdk as cdk
import jsii
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from constructs import Construct

from cdk_gpu_share.constructs._metrics import ReclaimerMetrics
from cdk_gpu_share.core.configuration.objectives import guarantee_wait_alarm_seconds
from cdk_gpu_share.core.configuration.parse import FAIRSHARE
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.records import metrics as m

if TYPE_CHECKING:
    from cdk_gpu_share.core.configuration.parse import PlatformConfig
    from cdk_gpu_share.inference.construct import MigInferenceEndpoint


class PlatformLike(Protocol):
    """What :meth:`GpuShareDashboard.from_platform` reads of a platform stack
    (:class:`~cdk_gpu_share.stacks.platform.PlatformStack`)."""

    config: PlatformConfig

    @property
    def fairshare(self) -> Any: ...

__all__ = ["GpuShareDashboard", "InferenceDashboard", "DEFAULT_LENDER_WAIT_THRESHOLD", "DEFAULT_PERIOD"]

#: Default of ``lender_wait_threshold``: a reclaim poll (1 minute by default) plus a wide margin.
DEFAULT_LENDER_WAIT_THRESHOLD = cdk.Duration.minutes(15)
#: Default period of the graphs and alarms.
DEFAULT_PERIOD = cdk.Duration.minutes(5)
#: A margin above what the reclaimer itself allows (poll interval + reclaim_after_seconds)
#: before ``from_platform``'s default threshold calls a wait abnormal.
_MARGIN_SECONDS = 300
_DASHBOARD_NAME = re.compile(r"^[A-Za-z0-9_-]{1,255}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_MAX_TEAMS = 100  # keeps the dashboard well below CloudWatch's 500 widgets / 2,500 metrics

_USAGE_COLOR = "#1f77b4"
_GUARANTEE_COLOR = "#7f7f7f"
_BORROWED_COLOR = "#ff7f0e"


def _problem(field: str, value: Any, message: str, fix: str, path: str) -> ConfigError:
    return ConfigError(Problem(field=field, value=value, message=message, fix=fix), source=path)


class GpuShareDashboard(Construct):
    """A CloudWatch dashboard and alarms for one shared GPU queue.

    The dashboard is the ``Resource`` child. Alarms: :attr:`lender_wait_alarms`
    (team name -> alarm) and :attr:`reclaimer_error_alarm`; all of them in
    :attr:`alarms`.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        queue_name: str,
        teams: Sequence[str],
        reclaim_function: lambda_.IFunction | None = None,
        dashboard_name: str | None = None,
        lender_wait_threshold: cdk.Duration | None = None,
        period: cdk.Duration | None = None,
        reclaimer_error_threshold: int = 1,
        watch_function_errors: bool = True,
        related_alarms: Sequence[cw.Alarm] = (),
        alarm_topic: sns.ITopic | None = None,
        alarm_emails: Sequence[str] = (),
        team_thresholds: Mapping[str, cdk.Duration] | None = None,
    ) -> None:
        """
        :param queue_name: the job queue whose reclaimer emits the metrics (the ``Queue``
            dimension). A token (a name CloudFormation generates) is fine.
        :param teams: the teams to show and alarm on (the ``Team`` dimension), in display order.
        :param reclaim_function: the reclaim Lambda. Default: none; when given, its ``Errors``
            count towards the reclaimer-error alarm and its errors, throttles and duration
            are graphed.
        :param dashboard_name: Default: generated by CloudFormation (dashboard names are
            global to the account, so a fixed name can clash between regions).
        :param lender_wait_threshold: a team's alarm fires when one of its jobs has waited
            longer than this for capacity within its guarantee. Default: 15 minutes (a
            reclaim poll plus a wide margin); raise it above your ``reclaim_after_seconds``
            plus the poll interval.
        :param period: period of the graphs and the alarms (a whole number of minutes).
            Default: 5 minutes.
        :param reclaimer_error_threshold: errors per period that raise the reclaimer-error
            alarm. Default: 1.
        :param watch_function_errors: count ``reclaim_function``'s own ``Errors`` (crashes,
            timeouts) in the reclaimer-error alarm. Default: True. Set it to False when
            another alarm already watches them (:meth:`from_platform` does: FairshareQueue
            alarms on its reclaimer's errors).
        :param related_alarms: more alarms to show in the dashboard's alarm widget and to
            notify ``alarm_topic`` of (for example ``FairshareQueue.alarms``). Default: none.
        :param alarm_topic: SNS topic every alarm notifies (ALARM and OK). Default: a new
            encrypted topic when ``alarm_emails`` is given, else no action.
        :param alarm_emails: e-mail addresses subscribed to the alarm topic. Default: none.
        :param team_thresholds: per team, its alarm's threshold in place of ``lender_wait_threshold``
            (:meth:`from_platform`: each team's ``guarantee_wait_p99_minutes`` objective). Default: none.
        """
        super().__init__(scope, id)
        path = self.node.path
        self.queue_name = queue_name
        self.teams: tuple[str, ...] = self._check_teams(teams, path)
        self.reclaim_function = reclaim_function
        self.watch_function_errors = bool(watch_function_errors)
        self.related_alarms: tuple[cw.Alarm, ...] = tuple(related_alarms)
        self.period = self._check_period(period or DEFAULT_PERIOD, path)
        self.lender_wait_threshold = self._check_lender_wait_threshold(lender_wait_threshold, path)
        self.team_thresholds = self._check_team_thresholds(team_thresholds or {}, path)
        self.reclaimer_error_threshold = self._check_error_threshold(reclaimer_error_threshold, path)
        self._check_dashboard_name(dashboard_name, path)
        emails = self._check_emails(alarm_emails, path)
        self.alarm_topic: sns.ITopic | None = alarm_topic
        if self.alarm_topic is None and emails:
            self.alarm_topic = self._new_topic()
        self._subscribe(emails, path)

        self.lender_wait_alarms: dict[str, cw.Alarm] = {}
        for team in self.teams:
            self.lender_wait_alarms[team] = self._lender_wait_alarm(team)
        self.reclaimer_error_alarm = self._error_alarm()
        if self.alarm_topic is not None:
            action = cw_actions.SnsAction(self.alarm_topic)
            for alarm in self.all_alarms:
                alarm.add_alarm_action(action)
                alarm.add_ok_action(action)

        self.dashboard = cw.Dashboard(
            self,
            "Resource",
            dashboard_name=dashboard_name,
            default_interval=cdk.Duration.hours(6),
            widgets=self._widgets(),
        )

    @staticmethod
    def _check_lender_wait_threshold(threshold: cdk.Duration | None, path: str) -> cdk.Duration:
        threshold = threshold or DEFAULT_LENDER_WAIT_THRESHOLD
        if not isinstance(threshold, cdk.Duration) or threshold.to_seconds() < 60:
            raise _problem(
                "lender_wait_threshold",
                threshold.to_human_string() if isinstance(threshold, cdk.Duration) else threshold,
                "must be a Duration of at least 1 minute",
                "use for example Duration.minutes(15): above the reclaim poll interval plus reclaim_after_seconds",
                path,
            )
        return threshold

    def _check_team_thresholds(self, thresholds: Mapping[str, cdk.Duration], path: str) -> dict[str, cdk.Duration]:
        for team, threshold in thresholds.items():
            if team not in self.teams:
                raise _problem(f"team_thresholds[{team!r}]", team, "is not one of the dashboard's teams",
                               f"use one of {', '.join(self.teams)}", path)
            if not isinstance(threshold, cdk.Duration) or threshold.to_seconds() <= 0:
                raise _problem(f"team_thresholds[{team!r}]", threshold, "must be a Duration above 0",
                               "use for example Duration.minutes(10)", path)
        return dict(thresholds)

    @staticmethod
    def _check_error_threshold(n: int, path: str) -> int:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise _problem("reclaimer_error_threshold", n, "must be a whole number of at least 1",
                           "use 1 to be told of every failed reclaim cycle", path)
        return n

    @staticmethod
    def _check_dashboard_name(dashboard_name: str | None, path: str) -> None:
        if dashboard_name is not None and not cdk.Token.is_unresolved(dashboard_name):
            if not _DASHBOARD_NAME.match(dashboard_name):
                raise _problem(
                    "dashboard_name",
                    dashboard_name,
                    "is not a valid CloudWatch dashboard name",
                    "use up to 255 letters, digits, - and _ (or leave it unset to let CloudFormation name it)",
                    path,
                )

    @staticmethod
    def _check_emails(alarm_emails: Sequence[str], path: str) -> list[str]:
        emails = list(alarm_emails)
        for i, email in enumerate(emails):
            if not isinstance(email, str) or not _EMAIL.match(email):
                raise _problem(
                    f"alarm_emails[{i}]", email, "is not an e-mail address", "write an address such as oncall@example.com", path
                )
        return emails

    def _subscribe(self, emails: list[str], path: str) -> None:
        """Subscribe ``emails`` to the alarm topic, which must be one this dashboard made."""
        for email in emails:
            if not isinstance(self.alarm_topic, sns.Topic):
                raise _problem(
                    "alarm_emails",
                    emails,
                    "cannot be subscribed to an imported alarm_topic",
                    "subscribe the addresses to that topic where it is defined, or drop alarm_topic",
                    path,
                )
            self.alarm_topic.add_subscription(subs.EmailSubscription(email))

    # ------------------------------------------------------------------
    # From a platform stack

    @classmethod
    def from_platform(cls, scope: Construct, id: str, *, platform: PlatformLike, **overrides: Any) -> GpuShareDashboard:
        """The dashboard of a :class:`~cdk_gpu_share.stacks.platform.PlatformStack`'s fair-share queue.

        Reads ``platform.fairshare`` (its ``job_queue_name``, ``reclaimer`` and ``alarms``,
        which the dashboard shows and notifies too) and
        ``platform.config`` (the fair-share teams, the reclaim poll interval and
        ``reclaim_after_seconds``, and each team's ``guarantee_wait_p99_minutes`` objective, which
        is that team's alarm threshold). The default ``lender_wait_threshold`` is the larger of
        15 minutes and what the reclaimer itself allows (``reclaim_after_seconds`` + two
        poll intervals) plus 5 minutes; an explicit threshold at or below what the
        reclaimer allows is rejected, since the alarm would fire on normal operation.

        :param overrides: any other constructor prop (``alarm_topic``, ``alarm_emails``,
            ``dashboard_name``, ``period``, ``lender_wait_threshold``...).
        """
        config = platform.config
        queue = getattr(platform, "fairshare", None)
        if queue is None or config.fairshare is None:
            raise ConfigError(
                Problem(
                    "platform.fairshare",
                    None,
                    "has no fair-share queue, whose reclaimer emits the dashboard's metrics",
                    "add a fairshare section to the platform config",
                ),
                source=scope.node.path,
            )
        reclaimer = getattr(queue, "reclaimer", None)
        if reclaimer is None and "reclaim_function" not in overrides:
            raise ConfigError(
                Problem(
                    "fairshare.reclaim.enabled",
                    False,
                    "turns the reclaimer off, and with it every metric the dashboard shows",
                    "set fairshare.reclaim.enabled: true (dry_run: true keeps the metrics and stops nothing)",
                ),
                source=config.source or scope.node.path,
            )
        teams = [t.name for t in config.teams_for(FAIRSHARE)]
        reclaim = config.fairshare.reclaim
        allowed = reclaim.reclaim_after_seconds + reclaim.schedule_minutes * 60
        threshold = overrides.pop("lender_wait_threshold", None)
        if threshold is None:
            minutes = max(
                DEFAULT_LENDER_WAIT_THRESHOLD.to_minutes(),
                math.ceil((reclaim.reclaim_after_seconds + 2 * reclaim.schedule_minutes * 60 + _MARGIN_SECONDS) / 60),
            )
            threshold = cdk.Duration.minutes(minutes)
        elif isinstance(threshold, cdk.Duration) and threshold.to_seconds() <= allowed:
            raise ConfigError(
                Problem(
                    "lender_wait_threshold",
                    threshold.to_human_string(),
                    f"is not above what the reclaimer allows ({allowed} s: reclaim_after_seconds "
                    f"{reclaim.reclaim_after_seconds} + one {reclaim.schedule_minutes}-minute poll), so the alarm "
                    "would fire in normal operation",
                    f"use at least Duration.seconds({allowed + _MARGIN_SECONDS})",
                ),
                source=f"{scope.node.path}/{id}",
            )
        # A team's objective says how long its lent capacity may take to come back: its alarm's threshold.
        objectives = {t.name: cdk.Duration.seconds(guarantee_wait_alarm_seconds(t.objectives, 0))
                      for t in config.teams_for(FAIRSHARE) if "guarantee_wait_p99_minutes" in t.objectives.targets}
        overrides.setdefault("team_thresholds", objectives)
        period = overrides.pop("period", None)
        if period is None:
            period = cdk.Duration.minutes(max(DEFAULT_PERIOD.to_minutes(), reclaim.schedule_minutes))
        related = list(getattr(queue, "alarms", ()) or ())
        overrides.setdefault("related_alarms", related)
        # FairshareQueue already alarms on its reclaimer's own errors: do not page twice.
        overrides.setdefault("watch_function_errors", not related)
        return cls(
            scope,
            id,
            queue_name=queue.job_queue_name,
            teams=teams,
            reclaim_function=overrides.pop("reclaim_function", reclaimer),
            lender_wait_threshold=threshold,
            period=period,
            **overrides,
        )

    # ------------------------------------------------------------------
    # Metrics

    @property
    def metrics(self) -> ReclaimerMetrics:
        """The reclaimer's metric factory (the construct's period, labelled per team), as FairshareQueue's."""
        return ReclaimerMetrics(self.queue_name, period=self.period, check_team=self._check_team, labels=True)

    def metric(self, metric_name: str, team: str | None = None, **options: Any) -> cw.Metric:
        """A metric of the reclaimer for this queue (and ``team`` when given).

        :param options: passed to :class:`aws_cdk.aws_cloudwatch.Metric` (``statistic``,
            ``period``, ``label``, ``color``...). Default period: the construct's ``period``.
        """
        return self.metrics.metric(metric_name, team, **options)

    def metric_usage(self, team: str, **options: Any) -> cw.Metric:
        """GPUs held by ``team``'s running jobs. Default statistic: Maximum."""
        return self.metrics.metric_usage(team, **options)

    def metric_guarantee(self, team: str, **options: Any) -> cw.Metric:
        """GPUs guaranteed to ``team``. Default statistic: Maximum."""
        return self.metrics.metric_guarantee(team, **options)

    def metric_borrowed(self, team: str, **options: Any) -> cw.Metric:
        """GPUs ``team`` uses beyond its guarantee (lent by others). Default statistic: Maximum."""
        return self.metrics.metric_borrowed(team, **options)

    def metric_pending_jobs(self, team: str, **options: Any) -> cw.Metric:
        """Jobs of ``team`` waiting in the queue (RUNNABLE). Default statistic: Maximum."""
        return self.metrics.metric_pending_jobs(team, **options)

    def metric_preemptions(self, team: str, **options: Any) -> cw.Metric:
        """Jobs of ``team`` stopped by the reclaimer. Default statistic: Sum."""
        return self.metrics.metric_preemptions(team, **options)

    def metric_reclaims(self, team: str, **options: Any) -> cw.Metric:
        """Jobs of ``team`` that got lent capacity back by a reclaim. Default statistic: Sum."""
        return self.metrics.metric_reclaims(team, **options)

    def metric_lender_wait(self, team: str, **options: Any) -> cw.Metric:
        """The longest a job of ``team`` within its guarantee has waited (seconds). Default: Maximum."""
        return self.metrics.metric_lender_wait(team, **options)

    def metric_reclaim_errors(self, **options: Any) -> cw.Metric:
        """Reclaim cycles of this queue that failed. Default statistic: Sum."""
        return self.metrics.metric_reclaim_errors(**options)

    def metric_cycle_duration(self, **options: Any) -> cw.Metric:
        """Duration of a reclaim cycle (milliseconds). Default statistic: Maximum."""
        return self.metrics.metric_cycle_duration(**options)

    # ------------------------------------------------------------------
    # Alarms

    @property
    def alarms(self) -> list[cw.Alarm]:
        """The alarms this construct creates: the teams' wait alarms, then the error alarm."""
        return [*self.lender_wait_alarms.values(), self.reclaimer_error_alarm]

    @property
    def all_alarms(self) -> list[cw.Alarm]:
        """:attr:`alarms` and ``related_alarms``: the alarm widget's list."""
        return [*self.alarms, *self.related_alarms]

    def add_alarm_action(self, *actions: cw.IAlarmAction) -> None:
        """Add ``actions`` to the ALARM state of every alarm of :attr:`all_alarms`."""
        for alarm in self.all_alarms:
            alarm.add_alarm_action(*actions)

    def _lender_wait_alarm(self, team: str) -> cw.Alarm:
        own = self.team_thresholds.get(team)
        seconds, words = self._threshold() if own is None else (own.to_seconds(), own.to_human_string())
        return cw.Alarm(
            self,
            f"LenderWaitAlarm-{team}",
            metric=self.metric_lender_wait(team, label=None),
            threshold=seconds,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=(
                f"Team {team} has waited more than {words} for GPU capacity "
                "within its guarantee. The reclaimer should have stopped borrowed jobs by now: check its errors "
                "and logs, its dry_run setting, and `gpu-share status --queue QUEUE`."
            ),
        )

    def _threshold(self) -> tuple[float, str]:
        """``lender_wait_threshold`` in seconds and in words, read once (each read is a jsii round trip)."""
        if "_threshold_cache" not in self.__dict__:
            t = self.lender_wait_threshold
            self.__dict__["_threshold_cache"] = (t.to_seconds(), t.to_human_string())
        return self.__dict__["_threshold_cache"]

    def _error_alarm(self) -> cw.Alarm:
        cycle_errors = self.metric_reclaim_errors(label=None)
        if self.reclaim_function is not None and self.watch_function_errors:
            metric: cw.IMetric = cw.MathExpression(
                expression="FILL(cycleErrors, 0) + FILL(lambdaErrors, 0)",
                using_metrics={
                    "cycleErrors": cycle_errors,
                    "lambdaErrors": self.reclaim_function.metric_errors(period=self.period, statistic="Sum"),
                },
                label="reclaimer errors",
                period=self.period,
            )
        else:
            metric = cycle_errors
        return cw.Alarm(
            self,
            "ReclaimerErrorAlarm",
            metric=metric,
            threshold=self.reclaimer_error_threshold,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=(
                "The GPU reclaimer failed: lent capacity may not be given back. Check the reclaim "
                "Lambda's logs and its IAM permissions on the job queue."
            ),
        )

    # ------------------------------------------------------------------
    # Layout

    def _header(self) -> list[cw.IWidget]:
        """What the dashboard shows and how to read it, beside the state of every alarm."""
        minutes = self.lender_wait_threshold.to_human_string()
        return [
            cw.TextWidget(
                markdown=(
                    f"# GPU sharing on queue {self.queue_name}\n"
                    "Per team: GPUs used against the guarantee, and GPUs borrowed from idle guarantees of "
                    "other teams. A lender's job waiting for its own guarantee gets it back by preemption "
                    f"of borrowed jobs; the team's alarm fires when that takes longer than {minutes}.\n\n"
                    "Live view: `gpu-share status --queue QUEUE --config platform.yaml`"
                ),
                width=12,
                height=5,
            ),
            cw.AlarmStatusWidget(alarms=self.all_alarms, title="Alarms", width=12, height=5),
        ]

    def _widgets(self) -> list[list[cw.IWidget]]:
        rows: list[list[cw.IWidget]] = [self._header()]
        # The graphs whose number grows with the teams are rendered here in Python (_GraphGrid),
        # byte for byte as GraphWidgets of Metrics would be: those cost a jsii round trip per
        # metric (eight per team) and are rendered again in Node at each resolution of the body.
        seconds = int(self.period.to_seconds())
        region = cdk.Aws.REGION
        factory = self.metrics

        def line(name: str, team: str | None = None, color: str | None = None) -> list[Any]:
            return factory.graph_line(name, team, period_seconds=seconds, color=color)

        def each_team(name: str) -> list[list[Any]]:
            return [line(name, team) for team in self.teams]

        def graph(title: str, lines: list[list[Any]], y_label: str, *, stacked: bool = False,
                  annotation: dict[str, Any] | None = None) -> dict[str, Any]:
            # GraphWidget's keys in its order; the ones it leaves undefined are left out.
            props: dict[str, Any] = {"view": "timeSeries", "title": title, "region": region}
            if stacked:
                props["stacked"] = True
            props["metrics"] = lines
            if annotation is not None:
                props["annotations"] = {"horizontal": [annotation]}
            props["yAxis"] = {"left": {"label": y_label, "min": 0, "showUnits": False}}
            return props

        per_team = [
            graph(f"{team}: GPUs used vs guarantee", [line(m.USAGE, team, _USAGE_COLOR),
                                                      line(m.GUARANTEE, team, _GUARANTEE_COLOR),
                                                      line(m.BORROWED, team, _BORROWED_COLOR)], "GPUs")
            for team in self.teams
        ]
        threshold = self.lender_wait_threshold.to_seconds()
        summary = [
            graph("GPUs borrowed, per team", each_team(m.BORROWED), "GPUs", stacked=True),
            graph("Longest wait within guarantee (s)", each_team(m.LENDER_WAIT_SECONDS), "seconds",
                  annotation={"value": threshold, "color": "#d62728", "label": "alarm", "yAxis": "left"}),
            graph("Pending jobs, per team", each_team(m.PENDING), "jobs"),
        ]
        rows.append([_grid([*_rows_of_three(per_team), summary])])
        health: list[cw.IMetric] = [self.metric_reclaim_errors()]
        if self.reclaim_function is not None:
            health += [
                self.reclaim_function.metric_errors(period=self.period, statistic="Sum", label="Lambda errors"),
                self.reclaim_function.metric_throttles(period=self.period, statistic="Sum", label="Lambda throttles"),
            ]
        rows.append(
            [
                _grid([[
                    graph("Preemptions (jobs stopped), per team", each_team(m.PREEMPTIONS), "jobs"),
                    graph("Reclaims (capacity given back), per team", each_team(m.RECLAIMS), "jobs"),
                ]]),
                cw.GraphWidget(
                    title="Reclaimer health",
                    left=health,
                    right=[self.metric_cycle_duration()],
                    left_y_axis=cw.YAxisProps(min=0, label="count", show_units=False),
                    right_y_axis=cw.YAxisProps(min=0, label="ms", show_units=False),
                    width=8,
                    height=6,
                ),
            ]
        )
        return rows

    # ------------------------------------------------------------------
    # Checks and helpers

    def _check_team(self, team: str) -> None:
        if team not in self.teams:
            raise _problem(
                "team",
                team,
                "is not a team of this dashboard",
                f"use one of {', '.join(self.teams)}",
                self.node.path,
            )

    @staticmethod
    def _check_teams(teams: Sequence[str], path: str) -> tuple[str, ...]:
        if isinstance(teams, str) or not isinstance(teams, Sequence):
            raise _problem("teams", teams, "must be a list of team names", 'write teams=["team-a", "team-b"]', path)
        out: list[str] = []
        for i, team in enumerate(teams):
            if not isinstance(team, str) or not team or "/" in team:
                raise _problem(
                    f"teams[{i}]", team, "is not a team name", "use the team's name from the platform config", path
                )
            if team in out:
                raise _problem(f"teams[{i}]", team, "is listed twice", "list each team once", path)
            out.append(team)
        if not out:
            raise _problem("teams", list(teams), "is empty", "list the teams that share the queue", path)
        if len(out) > _MAX_TEAMS:
            raise _problem(
                "teams", len(out), f"lists more than {_MAX_TEAMS} teams", "build one dashboard per group of teams", path
            )
        return tuple(out)

    @staticmethod
    def _check_period(period: cdk.Duration, path: str) -> cdk.Duration:
        seconds = period.to_seconds() if isinstance(period, cdk.Duration) else None
        if seconds is None or seconds < 60 or seconds % 60:
            raise _problem(
                "period",
                period.to_human_string() if isinstance(period, cdk.Duration) else period,
                "must be a whole number of minutes",
                "use for example Duration.minutes(5)",
                path,
            )
        return period

    def _new_topic(self) -> sns.Topic:
        key = kms.Key(
            self,
            "AlarmTopicKey",
            description="Encrypts the GPU-sharing alarm topic",
            enable_key_rotation=True,
        )
        # CloudWatch alarms publish to an encrypted topic only if the key lets them.
        key.grant(iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*")
        return sns.Topic(
            self,
            "AlarmTopic",
            display_name="GPU sharing alarms",
            master_key=key,
            enforce_ssl=True,
        )


def _grid(rows: list[list[dict[str, Any]]]) -> cw.IWidget:
    # In a Column, which asks the grid's size once and keeps it in Node: a widget written in
    # Python answers each question about it by a jsii callback, and layouts ask often.
    return cast(cw.IWidget, cw.Column(cast(cw.IWidget, _GraphGrid(rows))))


def _rows_of_three(graphs: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [graphs[i : i + 3] for i in range(0, len(graphs), 3)]


@jsii.implements(cw.IWidget)
class _GraphGrid:
    """Rows of 8x6 metric graphs (three per row), given as the ``properties`` aws-cdk-lib's
    ``GraphWidget`` would render, placed where the dashboard's layout puts this widget.

    One widget for many graphs: each widget is asked its size, position and JSON by jsii
    callbacks, so the grid costs the same few for 3 graphs or 150.
    """

    WIDTH, HEIGHT = 8, 6

    def __init__(self, rows: list[list[dict[str, Any]]]) -> None:
        self._rows = rows
        self._x = self._y = 0

    @property
    def width(self) -> int:
        return self.WIDTH * max(len(r) for r in self._rows)

    @property
    def height(self) -> int:
        return self.HEIGHT * len(self._rows)

    @property
    def warnings(self) -> None:
        return None

    @property
    def warnings_v2(self) -> None:
        return None

    def position(self, x: int, y: int) -> None:
        self._x, self._y = x, y

    def to_json(self) -> list[Any]:
        return [
            {"type": "metric", "width": self.WIDTH, "height": self.HEIGHT, "x": self._x + self.WIDTH * i,
             "y": self._y + self.HEIGHT * r, "properties": props}
            for r, row in enumerate(self._rows)
            for i, props in enumerate(row)
        ]


class InferenceDashboard(Construct):
    """A CloudWatch dashboard of inference endpoints: per model (inference component), its
    requests, latency, errors and the copies serving it.

    Metrics come from each endpoint's factory
    (:attr:`~cdk_gpu_share.inference.construct.MigInferenceEndpoint.metrics`), the same
    one its ``metric_*`` methods use. The dashboard is the ``Resource`` child.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        endpoints: Sequence[MigInferenceEndpoint],
        dashboard_name: str | None = None,
        period: cdk.Duration | None = None,
    ) -> None:
        """
        :param endpoints: :class:`~cdk_gpu_share.inference.construct.MigInferenceEndpoint` s to show.
        :param dashboard_name: name of the dashboard. Default: generated by CloudFormation.
        :param period: period of the graphs. Default: 5 minutes.
        """
        super().__init__(scope, id)
        path = self.node.path
        self.endpoints = tuple(endpoints)
        if not self.endpoints:
            raise _problem("endpoints", [], "is empty", "pass at least one MigInferenceEndpoint", path)
        models = sum(len(e.models) for e in self.endpoints)
        if models > _MAX_TEAMS:
            raise _problem("endpoints", f"{models} models", f"show more than {_MAX_TEAMS} models",
                           "split them over several InferenceDashboards", path)
        if dashboard_name is not None and not cdk.Token.is_unresolved(dashboard_name) \
                and not _DASHBOARD_NAME.match(dashboard_name):
            raise _problem("dashboard_name", dashboard_name, "is not a valid CloudWatch dashboard name",
                           "use up to 255 letters, digits, - and _ (or leave it unset)", path)
        self.period = period or cdk.Duration.minutes(5)
        self.dashboard = cw.Dashboard(self, "Resource", dashboard_name=dashboard_name,
                                      default_interval=cdk.Duration.hours(6), widgets=self._widgets())

    def _widgets(self) -> list[list[cw.IWidget]]:
        p = self.period
        rows: list[list[cw.IWidget]] = [[cw.TextWidget(
            markdown=("# Inference endpoints\nPer model (inference component): requests, model latency "
                      "(p50 and p90), errors, and the copies serving it (Invocations / InvocationsPerCopy, "
                      "empty while a model gets no requests: SageMaker publishes no copy-count metric)."),
            width=24, height=3)]]
        for endpoint in self.endpoints:
            for model in endpoint.models:
                f = endpoint.metrics
                title = f"{getattr(endpoint, 'base_name', endpoint.node.id)} / {model}"
                rows.append([
                    cw.GraphWidget(title=f"{title}: requests", width=6, height=6,
                                   left=[f.metric_invocations(model, period=p, label="requests")],
                                   left_y_axis=cw.YAxisProps(min=0, show_units=False)),
                    cw.GraphWidget(title=f"{title}: model latency (µs)", width=6, height=6,
                                   left=[f.metric_model_latency(model, period=p, statistic="p50", label="p50"),
                                         f.metric_model_latency(model, period=p, label="p90")],
                                   left_y_axis=cw.YAxisProps(min=0, show_units=False)),
                    cw.GraphWidget(title=f"{title}: errors", width=6, height=6, stacked=True,
                                   left=[f.metric_invocation_4xx_errors(model, period=p, label="4xx"),
                                         f.metric_invocation_5xx_errors(model, period=p, label="5xx"),
                                         f.metric_model_errors(model, period=p, label="model errors")],
                                   left_y_axis=cw.YAxisProps(min=0, show_units=False)),
                    cw.GraphWidget(title=f"{title}: copies", width=6, height=6,
                                   left=[f.metric_copies(model, period=p, label="copies")],
                                   left_y_axis=cw.YAxisProps(min=0, show_units=False)),
                ])
        return rows
