"""Alarms notify someone by default: every alarm of an inference stack has alarm and OK actions
on the stack's own KMS-encrypted, TLS-only topic that only CloudWatch alarms of the account
publish to, or on a given topic of the same region (Control Tower CT.CLOUDWATCH.PR.1 wants
actions on every alarm; CloudWatch alarms notify only topics of their region)."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from ml_platform._cdk_nag import AwsSolutionsChecks
from ml_platform.app import build_platform, new_app
from ml_platform.config import Settings, SettingsError
from ml_platform.constructs.alarm_topic import AlarmTopic, AlarmTopicProps
from tests.support import GRANTS_ONLY_FOR_AWS_RESOURCES, SynthesizedPlatform

ACCOUNT, REGION = "123456789012", "us-west-2"
FROM_OWN_ALARMS = {
    "StringEquals": {"aws:SourceAccount": ACCOUNT},
    "ArnLike": {"aws:SourceArn": f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:*"},
}


def _one(resources: dict) -> tuple[str, dict]:
    (found,) = resources.items()
    return found


def test_every_alarm_notifies_the_stacks_encrypted_topic(synth: SynthesizedPlatform) -> None:
    t = synth.template_json("Inference")
    resources = t["Resources"]
    template = synth.template("Inference")
    topic_id, topic = _one(template.find_resources("AWS::SNS::Topic"))
    key_id = topic["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]
    assert resources[key_id]["Type"] == "AWS::KMS::Key"
    assert resources[key_id]["Properties"]["EnableKeyRotation"] is True
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    assert len(alarms) == 4  # load failures, load wait, GPU memory, 5xx
    for name, alarm in alarms.items():
        props = alarm["Properties"]
        assert props["AlarmActions"] == [{"Ref": topic_id}], name
        assert props["OKActions"] == [{"Ref": topic_id}], name
        assert props.get("ActionsEnabled", True) is True, name
        # No alarm sits in INSUFFICIENT_DATA on a quiet endpoint: the load-wait metric exists
        # only while something loads, the others while instances or requests exist.
        assert props["TreatMissingData"] == "notBreaching", name
    gpu = next(
        a["Properties"]
        for a in alarms.values()
        if a["Properties"]["MetricName"] == "GPUMemoryUtilization"
    )
    assert (gpu["Threshold"], gpu["EvaluationPeriods"], gpu["Period"]) == (95, 3, 300)
    # Control Tower CT.CLOUDWATCH.PR.1 asks every alarm of the app for an action: the
    # endpoints' are the only alarms in any stack.
    elsewhere = [
        path.name
        for path in synth.template_paths()
        if "Inference" not in path.name and "AWS::CloudWatch::Alarm" in path.read_text()
    ]
    assert elsewhere == []
    assert t["Outputs"]["AlarmTopicArn"]["Value"] == {"Ref": topic_id}
    # No subscription unless alarm_emails names some (cdk.json names none).
    assert template.find_resources("AWS::SNS::Subscription") == {}

    # Topic policy: TLS only, and only CloudWatch alarms of this account and region publish.
    _, policy = _one(template.find_resources("AWS::SNS::TopicPolicy"))
    assert policy["Properties"]["Topics"] == [{"Ref": topic_id}]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    by_effect = {s["Effect"]: s for s in statements}
    assert len(statements) == 2
    assert by_effect["Deny"]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert by_effect["Deny"]["Principal"] == "*"
    assert by_effect["Allow"] == {
        "Sid": "CloudWatchAlarmsOfThisAccount",
        "Effect": "Allow",
        "Principal": {"Service": "cloudwatch.amazonaws.com"},
        "Action": "sns:Publish",
        "Resource": {"Ref": topic_id},
        "Condition": FROM_OWN_ALARMS,
    }
    # Key policy: CloudWatch may use the key, for this account's alarms only (SNS developer
    # guide, sns-key-management.html#compatibility-with-aws-services).
    (cloudwatch,) = [
        s
        for s in resources[key_id]["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert cloudwatch["Action"] == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert cloudwatch["Condition"] == FROM_OWN_ALARMS
    # Like every key of the platform: grants only for AWS resources (CT.KMS.PR.3).
    assert (
        GRANTS_ONLY_FOR_AWS_RESOURCES in resources[key_id]["Properties"]["KeyPolicy"]["Statement"]
    )


def test_cdk_nag_sns_rules_hold_without_acknowledgement(synth: SynthesizedPlatform) -> None:
    """AwsSolutions-SNS2 (encryption) and -SNS3 (TLS) pass on the topic: no violation, and
    none acknowledged anywhere in the app."""
    report = synth.nag_report()
    sns_findings = [
        v
        for plugin in report["pluginReports"]
        for v in plugin.get("violations", [])
        if v["ruleName"].startswith("AwsSolutions-SNS")
    ]
    assert sns_findings == []
    acknowledged = [
        rule
        for construct in synth.platform.app.node.find_all()
        for entry in construct.node.metadata
        if entry.type == "aws:cdk:acknowledged-rules"
        for rule in entry.data
        if "SNS" in rule
    ]
    assert acknowledged == []


def test_cdk_nag_does_check_topics(tmp_path) -> None:
    """The rules run: a plain topic beside an AlarmTopic fails AwsSolutions-SNS3 (TLS) and,
    since cdk-nag 3.0.2's AwsSolutions pack has no SNS2 rule any more, the NIST 800-53 R5
    pack's SNSEncryptedKMS (the same check: KMS encryption); the AlarmTopic fails neither."""
    from aws_cdk import aws_sns as sns
    from cdk_nag import NIST80053R5Checks

    app = new_app(outdir=str(tmp_path))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), NIST80053R5Checks(app))
    stack = cdk.Stack(app, "S", env=cdk.Environment(account=ACCOUNT, region=REGION))
    AlarmTopic(stack, "Alarms", props=AlarmTopicProps(emails=("ops@example.com",)))
    sns.Topic(stack, "Careless")
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    found = {
        (v["ruleName"], c["constructPath"])
        for p in report["pluginReports"]
        for v in p["violations"]
        for c in v["violatingConstructs"]
    }
    assert found == {
        ("AwsSolutions-SNS3", "S/Careless/Resource"),
        ("NIST.800.53.R5-SNSEncryptedKMS", "S/Careless/Resource"),
    }


def test_alarm_emails_subscribe_and_a_given_topic_replaces_the_stacks() -> None:
    emails = {"inference": {"alarm_emails": ["ops@example.com", "oncall+ml@example.org"]}}
    features = {"features": {"training_cluster": False, "triton_on_eks": False}}
    platform = build_platform(new_app(), Settings.from_context({**emails, **features}))
    t = Template.from_stack(platform.inference)
    subscriptions = t.find_resources("AWS::SNS::Subscription").values()
    assert sorted(s["Properties"]["Endpoint"] for s in subscriptions) == [
        "oncall+ml@example.org",
        "ops@example.com",
    ]
    assert {s["Properties"]["Protocol"] for s in subscriptions} == {"email"}

    given = f"arn:aws:sns:{REGION}:{ACCOUNT}:team-alarms"
    settings = Settings.from_context({"inference": {"alarm_topic_arn": given}, **features})
    platform = build_platform(new_app(), settings)
    t = Template.from_stack(platform.inference)
    assert t.find_resources("AWS::SNS::Topic") == {}
    assert platform.inference.alarm_topic is None
    for alarm in t.find_resources("AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == [given]
        assert alarm["Properties"]["OKActions"] == [given]


def test_a_topic_elsewhere_or_malformed_is_a_settings_error_naming_it() -> None:
    cases = {
        "arn:aws:sns:eu-west-1:123456789012:alarms": (
            "inference.alarm_topic_arn = 'arn:aws:sns:eu-west-1:123456789012:alarms': the topic "
            "is in 'eu-west-1', the alarms in env.region 'us-west-2': CloudWatch alarms notify "
            "only SNS topics of their own region; expected a topic in 'us-west-2'"
        ),
        "arn:aws-cn:sns:us-west-2:123456789012:alarms": (
            "inference.alarm_topic_arn = 'arn:aws-cn:sns:us-west-2:123456789012:alarms': "
            "partition 'aws-cn' is not env.region's ('aws'); expected "
            "arn:aws:sns:us-west-2:<account>:<name>"
        ),
        "arn:aws:sqs:us-west-2:123456789012:alarms": (
            "inference.alarm_topic_arn = 'arn:aws:sqs:us-west-2:123456789012:alarms': expected "
            "an SNS topic ARN (arn:aws:sns:<region>:<account>:<name>)"
        ),
    }
    for arn, message in cases.items():
        with pytest.raises(SettingsError) as error:
            Settings.from_context({"inference": {"alarm_topic_arn": arn}})
        assert error.value.problems == [message]
    # A bad email is a field problem; the cross-field rule (emails with a given topic) runs
    # once the section's fields are valid (pydantic's model validator), so it follows.
    topic = "arn:aws:sns:us-west-2:123456789012:alarms"
    with pytest.raises(SettingsError) as error:
        Settings.from_context(
            {"inference": {"alarm_topic_arn": topic, "alarm_emails": ["ops@x.com", "not one"]}}
        )
    assert error.value.problems == [
        "inference.alarm_emails[1] = 'not one': expected an email address such as "
        "'ops@example.com'",
    ]
    with pytest.raises(SettingsError) as error:
        Settings.from_context(
            {"inference": {"alarm_topic_arn": topic, "alarm_emails": ["ops@x.com"]}}
        )
    assert error.value.problems == [
        "inference.alarm_emails = ['ops@x.com'] with "
        "inference.alarm_topic_arn = 'arn:aws:sns:us-west-2:123456789012:alarms': the emails "
        "subscribe to the stack's own topic; with an existing topic, subscribe to it there (set "
        "one of the two)",
    ]
    with pytest.raises(ValueError, match=r"emails\[0\] = 'nope': expected an email address"):
        AlarmTopic(cdk.Stack(new_app(), "S"), "T", props=AlarmTopicProps(emails=("nope",)))


def test_the_props_object_holds_the_email_rule_and_the_construct_keeps_it() -> None:
    from ml_platform.constructs._props import shared_problems
    from ml_platform.props.alarm_topic import AlarmTopicPropsBase

    def problems(props: AlarmTopicProps) -> list[str]:
        return shared_problems(props, AlarmTopicPropsBase)

    expected = "expected an email address such as 'ops@example.com'"
    assert problems(AlarmTopicProps(emails=("ops@x.com", "nope", "x@"))) == [
        f"emails[1] = 'nope': {expected}",
        f"emails[2] = 'x@': {expected}",
    ]
    assert problems(AlarmTopicProps(emails=("ops@x.com",))) == []
    with pytest.raises(ValueError, match=rf"^S/T: emails\[0\] = 'nope': {expected}$"):
        AlarmTopic(cdk.Stack(new_app(), "S"), "T", props=AlarmTopicProps(emails=("nope",)))
    props = AlarmTopicProps(emails=("ops@x.com",))
    topic = AlarmTopic(cdk.Stack(new_app(), "S"), "T", props=props)
    assert topic.props is props
