"""The value fields of :class:`~ml_platform.constructs.alarm_topic.AlarmTopic`: its email
addresses, whose type (:data:`EmailAddress`) the ``inference.alarm_emails`` setting shares."""

from dataclasses import dataclass
from typing import Annotated

from ml_platform import limits
from ml_platform._settings_parse import Matches, Section, setting

__all__ = ["AlarmTopicPropsBase", "EmailAddress"]

EmailAddress = Annotated[str, Matches(limits.EMAIL_ADDRESS)]
"""An address an alarm topic mails (aws-cdk's ``EmailSubscription`` takes any string:
aws-cdk-lib 2.275.0, ``aws-sns-subscriptions/lib/email.js``)."""


@dataclass(frozen=True, kw_only=True)
class AlarmTopicPropsBase(Section):
    """The checked value props of :class:`~ml_platform.constructs.alarm_topic.AlarmTopic`."""

    emails: tuple[EmailAddress, ...] = setting((), uniqueItems=True)
    """Addresses to subscribe (protocol `email`; each confirms from the mail AWS sends).
    Default none."""
