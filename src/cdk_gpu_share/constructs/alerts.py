"""AlarmRouting: every alarm of the platform notifies one SNS topic (the config's ``alerts``).

    routing = AlarmRouting(stack, "Alerts", emails=["gpu-oncall@example.com"])
    routing.route(stack)          # every CloudWatch alarm under stack, now and added later

The topic is the ``Resource`` child: new (encrypted with a customer-managed key that
CloudWatch may use, SSL-only, e-mail subscriptions) or imported from ``topic_arn``.
Routing is an aspect, so alarms that constructs add after this one (per-team stacks,
endpoints) are routed too, each once, on ALARM and on OK.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from constructs import Construct, IConstruct

from cdk_gpu_share.core.configuration.alerts import AlertsConfig, parse_alerts
from cdk_gpu_share.core.errors import ConfigError, Problem


@jsii.implements(cdk.IAspect)
class _RouteAlarms:
    def __init__(self, routing: AlarmRouting) -> None:
        self.routing = routing

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, cw.Alarm):
            self.routing._route_alarm(node)


class AlarmRouting(Construct):
    """One SNS topic that every routed alarm notifies.

    :attr:`topic` is the topic; :attr:`routed` the alarms routed so far (after synthesis: all).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        emails: Sequence[str] = (),
        topic_arn: str | None = None,
        display_name: str = "GPU sharing alarms",
    ) -> None:
        """
        :param emails: addresses subscribed to a new topic. Default: none.
        :param topic_arn: an existing topic to notify instead of a new one (subscribe people where it
            is defined). Default: a new topic.
        :param display_name: the new topic's display name (the e-mail sender name). Default:
            "GPU sharing alarms".
        """
        super().__init__(scope, id)
        problems: list[Problem] = []
        raw: dict[str, Any] = {}
        if emails:
            raw["emails"] = list(emails)
        if topic_arn is not None:
            raw["topic_arn"] = topic_arn
        config = parse_alerts(raw, (), lambda f, v, m, fix: problems.append(Problem(f, v, m, fix)))
        if problems or config is None:
            raise ConfigError(problems, source=self.node.path)
        self.config: AlertsConfig = config
        self.routed: list[cw.Alarm] = []
        self._seen: set[str] = set()
        if config.topic_arn is not None:
            self.topic: sns.ITopic = sns.Topic.from_topic_arn(self, "Resource", config.topic_arn)
            self.key: kms.Key | None = None
        else:
            self.key = kms.Key(self, "TopicKey", description="Encrypts the GPU-sharing alarm topic",
                               enable_key_rotation=True)
            # CloudWatch alarms publish to an encrypted topic only if the key lets them.
            self.key.grant(iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*")
            topic = sns.Topic(self, "Resource", display_name=display_name, master_key=self.key, enforce_ssl=True)
            for email in config.emails:
                topic.add_subscription(subs.EmailSubscription(email))
            self.topic = topic
        self._action = cw_actions.SnsAction(self.topic)

    @classmethod
    def from_config(cls, scope: Construct, id: str, *, alerts: AlertsConfig) -> AlarmRouting:
        """The routing of a validated config's ``alerts`` section."""
        return cls(scope, id, emails=alerts.emails, topic_arn=alerts.topic_arn)

    def route(self, scope: IConstruct) -> None:
        """Route every :class:`aws_cdk.aws_cloudwatch.Alarm` under ``scope`` to the topic (at synthesis)."""
        cdk.Aspects.of(scope).add(_RouteAlarms(self))

    def _route_alarm(self, alarm: cw.Alarm) -> None:
        path = alarm.node.path
        if path in self._seen:
            return
        self._seen.add(path)
        alarm.add_alarm_action(self._action)
        alarm.add_ok_action(self._action)
        self.routed.append(alarm)
