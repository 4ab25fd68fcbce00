"""The ``alerts`` section of the platform config: where every alarm of the platform goes.

    alerts:
      emails: [gpu-oncall@example.com]     # a new encrypted, SSL-only SNS topic with these subscriptions
      topic_arn: arn:aws:sns:us-east-1:111122223333:gpu-alarms   # or an existing topic

Give ``emails`` (the platform creates the topic and subscribes them) or ``topic_arn``
(an existing topic; subscribe people where it is defined), not both: CloudFormation
cannot subscribe addresses to a topic another stack owns without taking it over.
Every alarm the platform creates notifies the topic on ALARM and on OK
(:class:`cdk_gpu_share.constructs.alerts.AlarmRouting`).

Registered in :data:`cdk_gpu_share.core.configuration.parse.EXTRA_SECTIONS`; problems are recorded with
the config's ``add_problem(field, value, message, fix)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

EMAIL_PATTERN = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
TOPIC_ARN_PATTERN = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$")
MAX_EMAILS = 20  # beyond that, a mailing list is the better subscription
_KEYS = ("emails", "topic_arn")

AddProblem = Callable[[str, object, str, str], None]


@dataclass(frozen=True)
class AlertsConfig:
    """Where the platform's alarms go: subscribed ``emails`` on a new topic, or ``topic_arn``."""

    emails: tuple[str, ...] = ()
    topic_arn: str | None = None


def alerts_mapping(alerts: AlertsConfig) -> object:
    """``alerts`` as the config file writes it (:func:`parse_alerts` reads it back)."""
    if not isinstance(alerts, AlertsConfig):
        return alerts
    out: dict[str, Any] = {}
    if alerts.emails:
        out["emails"] = list(alerts.emails) if isinstance(alerts.emails, (tuple, list)) else alerts.emails
    if alerts.topic_arn is not None:
        out["topic_arn"] = alerts.topic_arn
    return out


def parse_alerts(raw: object, teams: Sequence[object], add_problem: AddProblem) -> AlertsConfig | None:
    """Parse ``alerts``; record every problem with ``add_problem``. None when unusable."""
    if not isinstance(raw, Mapping):
        add_problem("alerts", raw, "must be a mapping", "write alerts: {emails: [oncall@example.com]}")
        return None
    before = _Counter(add_problem)
    for key in raw:
        if key not in _KEYS:
            before.add(f"alerts.{key}", key, "is not a field of alerts", "use emails or topic_arn")
    emails: list[str] = []
    raw_emails = raw.get("emails", [])
    if isinstance(raw_emails, str):
        raw_emails = [raw_emails]  # one address written without a list
    if not isinstance(raw_emails, list):
        before.add("alerts.emails", raw_emails, "must be a list of e-mail addresses",
                   "write emails: [oncall@example.com]")
        raw_emails = []
    seen: set[str] = set()
    for i, email in enumerate(raw_emails):
        if not isinstance(email, str) or not EMAIL_PATTERN.match(email):
            before.add(f"alerts.emails[{i}]", email, "is not an e-mail address", "write an address such as oncall@example.com")
        elif email.lower() in seen:
            before.add(f"alerts.emails[{i}]", email, "is listed twice", "list each address once")
        else:
            seen.add(email.lower())
            emails.append(email)
    if len(raw_emails) > MAX_EMAILS:
        before.add("alerts.emails", f"{len(raw_emails)} addresses", f"lists more than {MAX_EMAILS} addresses",
                   "subscribe a mailing list, or pass topic_arn of a topic you manage")
    topic_arn = raw.get("topic_arn")
    if topic_arn is not None and (not isinstance(topic_arn, str) or not TOPIC_ARN_PATTERN.match(topic_arn)):
        before.add("alerts.topic_arn", topic_arn, "is not an SNS topic ARN",
                   "write arn:aws:sns:<region>:<account id>:<topic name>")
        topic_arn = None
    if raw.get("topic_arn") is not None and raw_emails:
        before.add("alerts.emails", list(raw_emails), "cannot be subscribed to an existing topic (topic_arn)",
                   "subscribe the addresses where that topic is defined, or drop topic_arn to get a new topic")
    if raw.get("topic_arn") is None and not raw_emails and not before.count:
        before.add("alerts", dict(raw), "names no destination", "give emails: [...] or topic_arn: arn:aws:sns:...")
    if before.count:
        return None
    return AlertsConfig(emails=tuple(emails), topic_arn=topic_arn)


class _Counter:
    def __init__(self, add_problem: AddProblem) -> None:
        self._add = add_problem
        self.count = 0

    def add(self, field: str, value: object, message: str, fix: str) -> None:
        self.count += 1
        self._add(field, value, message, fix)
