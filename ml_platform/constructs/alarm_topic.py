"""The :class:`AlarmTopic` construct: an encrypted SNS topic that CloudWatch alarms notify."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from ml_platform.constructs._kms import restrict_grants
from ml_platform.constructs._props import check_props
from ml_platform.props.alarm_topic import AlarmTopicPropsBase

__all__ = ["CLOUDWATCH_KEY_ACTIONS", "AlarmTopic", "AlarmTopicProps"]

#: What CloudWatch needs on the key of an encrypted topic it publishes to (SNS developer guide,
#: "Enable compatibility between event sources from AWS services and encrypted topics":
#: https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services).
CLOUDWATCH_KEY_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey*")


@dataclass(frozen=True, kw_only=True)
class AlarmTopicProps(AlarmTopicPropsBase):
    """The props of :class:`AlarmTopic`: the checked ones of :class:`AlarmTopicPropsBase`
    (``emails``) and what only the construct takes."""

    removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    """Of the key (the topic holds no data and is always deleted). Default RETAIN."""


class AlarmTopic(Construct):
    """An SNS topic for the CloudWatch alarms of its stack's account and region.

    Encrypted with a key of its own (rotation on) that CloudWatch may use only for this
    account's alarms in this region; its policy lets only those alarms publish
    (``cloudwatch.amazonaws.com`` with ``aws:SourceAccount`` and ``aws:SourceArn``, the
    confused-deputy conditions) and refuses every request not made over TLS (cdk-nag
    AwsSolutions-SNS2 and -SNS3 hold). Identity policies of the account can still grant
    ``sns:Publish`` on it (a topic policy does not override them).

    Args:
        props: The topic's props (:class:`AlarmTopicProps`). Default: no subscriptions, key
            retained.

    Attributes:
        topic: The ``sns.Topic`` (id ``Resource``). key: Its KMS key.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        props: AlarmTopicProps = AlarmTopicProps(),
    ) -> None:
        super().__init__(scope, construct_id)
        #: The props, as checked.
        self.props = props
        check_props(self, props, AlarmTopicPropsBase)
        stack = Stack.of(self)
        alarms = stack.format_arn(
            service="cloudwatch",
            resource="alarm",
            resource_name="*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        from_own_alarms = {
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnLike": {"aws:SourceArn": alarms},
        }
        self.key = restrict_grants(
            kms.Key(
                self,
                "Key",
                description=f"Encryption of the CloudWatch alarm topic {self.node.path}",
                enable_key_rotation=True,
                removal_policy=props.removal_policy,
            )
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsOfThisAccount",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=list(CLOUDWATCH_KEY_ACTIONS),
                resources=["*"],
                conditions=from_own_alarms,
            )
        )
        self.topic = sns.Topic(
            self,
            "Resource",
            display_name="ml-platform alarms",
            master_key=self.key,
            enforce_ssl=True,
        )
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsOfThisAccount",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions=from_own_alarms,
            )
        )
        for email in props.emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))

    @property
    def topic_arn(self) -> str:
        return self.topic.topic_arn
