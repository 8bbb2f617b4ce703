"""Archives only the publisher can write: the model bucket's policy, statement by statement,
and what it does to each request (evaluated with tests/s3_policy.py: moto ignores these
conditions and its CloudFormation does not apply bucket policies at all)."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match, Template

from ml_platform.app import new_app
from ml_platform.config import Settings, SettingsError
from ml_platform.constructs.storage import (
    BUCKET_CONFIGURATION_ACTIONS,
    ModelArtifactBucket,
    ModelArtifactBucketProps,
)
from tests.s3_policy import denied
from tests.support import SynthesizedPlatform

ADMIN = "arn:aws:iam::123456789012:role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_Admin_0123"
UPLOAD = "arn:aws:iam::123456789012:role/MlPlatform-Inference-ArchiveUpload-us-west-2"
OTHER = "arn:aws:iam::123456789012:role/SomeAppWithS3FullAccess"
# The bootstrap's CloudFormation execution role (DefaultStackSynthesizer, qualifier hnb659fds).
DEPLOY = "arn:aws:iam::123456789012:role/cdk-hnb659fds-cfn-exec-role-123456789012-us-west-2"
OPS = "arn:aws:iam::123456789012:role/PlatformAdmins"
BUCKET_ARN = "arn:aws:s3:::model-bucket"


def resolve(value, resources: dict):
    """Template JSON -> plain values: Fn::Join, Ref AWS::Partition/AccountId, the bucket's
    and roles' Fn::GetAtt Arn."""
    if isinstance(value, list):
        return [resolve(v, resources) for v in value]
    if not isinstance(value, dict):
        return value
    if "Fn::Sub" in value:
        return (
            value["Fn::Sub"]
            .replace("${AWS::Partition}", "aws")
            .replace("${AWS::AccountId}", "123456789012")
            .replace("${AWS::Region}", "us-west-2")
        )
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(resolve(p, resources) for p in parts)
    if value.get("Ref") == "AWS::Partition":
        return "aws"
    if value.get("Ref") == "AWS::AccountId":
        return "123456789012"
    if "Fn::GetAtt" in value:
        target, _ = value["Fn::GetAtt"]
        kind = resources[target]["Type"]
        return (
            BUCKET_ARN if kind == "AWS::S3::Bucket" else f"arn:aws:iam::123456789012:role/{target}"
        )
    return {k: resolve(v, resources) for k, v in value.items()}


def bucket_policy(template: dict) -> dict:
    resources = template["Resources"]
    (policy,) = [
        r
        for r in resources.values()
        if r["Type"] == "AWS::S3::BucketPolicy"
        and resources[r["Properties"]["Bucket"]["Ref"]]["Properties"].get("VersioningConfiguration")
        and "AccessLogs" not in r["Properties"]["Bucket"]["Ref"]
    ]
    return resolve(policy["Properties"]["PolicyDocument"], resources)


def archive_statements(template: dict) -> dict[str, dict]:
    return {
        s["Sid"]: s
        for s in bucket_policy(template)["Statement"]
        if s.get("Sid", "").startswith(("Archives", "Configuration"))
    }


def stack_with(**props) -> tuple[cdk.Stack, dict]:
    stack = cdk.Stack(
        new_app(), "S", env=cdk.Environment(account="123456789012", region="us-west-2")
    )
    ModelArtifactBucket(stack, "Models", props=ModelArtifactBucketProps(**props))
    return stack, Template.from_stack(stack).to_json()


def test_exact_statements() -> None:
    _, template = stack_with(
        publishers=[ADMIN], unconditional_publishers=[UPLOAD], administrators=[OPS]
    )
    archives = f"{BUCKET_ARN}/models/*"
    assert archive_statements(template) == {
        "ArchivesOnlyFromPublishers": {
            "Sid": "ArchivesOnlyFromPublishers",
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "NotAction": [
                "s3:GetObject",
                "s3:GetObjectVersion",
                "s3:GetObjectAttributes",
                "s3:GetObjectVersionAttributes",
                "s3:GetObjectTagging",
                "s3:GetObjectVersionTagging",
            ],
            "Resource": archives,
            "Condition": {"ArnNotLike": {"aws:PrincipalArn": [ADMIN, UPLOAD]}},
        },
        "ConfigurationOnlyByAdministrators": {
            "Sid": "ConfigurationOnlyByAdministrators",
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Action": list(BUCKET_CONFIGURATION_ACTIONS),
            "Resource": BUCKET_ARN,
            "Condition": {"ArnNotLike": {"aws:PrincipalArn": [OPS, DEPLOY]}},
        },
        "ArchivesNeverOverwritten": {
            "Sid": "ArchivesNeverOverwritten",
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Action": "s3:PutObject",
            "Resource": archives,
            "Condition": {
                "Null": {"s3:if-none-match": "true"},
                "Bool": {"s3:ObjectCreationOperation": "true"},
                "ArnNotLike": {"aws:PrincipalArn": [UPLOAD]},
            },
        },
    }


# (who, operation, action, If-None-Match sent, s3:ObjectCreationOperation) -> refused by
# S3 operations and their IAM actions: PutObject, CreateMultipartUpload, UploadPart and
# CompleteMultipartUpload are all s3:PutObject; the creation flag is false for the two that
# take no conditional header (S3 user guide, conditional-writes-enforce).
CASES = [
    ("admin", "PutObject (mlp models upload)", "s3:PutObject", True, True, []),
    ("admin", "CreateMultipartUpload", "s3:PutObject", False, False, []),
    ("admin", "UploadPart", "s3:PutObject", False, False, []),
    ("admin", "CompleteMultipartUpload with If-None-Match", "s3:PutObject", True, True, []),
    (
        "admin",
        "PutObject without If-None-Match",
        "s3:PutObject",
        False,
        True,
        ["ArchivesNeverOverwritten"],
    ),
    (
        "admin",
        "CompleteMultipartUpload without If-None-Match",
        "s3:PutObject",
        False,
        True,
        ["ArchivesNeverOverwritten"],
    ),
    ("admin", "DeleteObjectVersion (mlp models retire)", "s3:DeleteObjectVersion", False, None, []),
    ("upload", "PutObject from aws s3 sync", "s3:PutObject", False, True, []),
    (
        "other",
        "PutObject with If-None-Match",
        "s3:PutObject",
        True,
        True,
        ["ArchivesOnlyFromPublishers"],
    ),
    ("other", "UploadPart", "s3:PutObject", False, False, ["ArchivesOnlyFromPublishers"]),
    ("other", "DeleteObject", "s3:DeleteObject", False, None, ["ArchivesOnlyFromPublishers"]),
    (
        "other",
        "DeleteObjectVersion",
        "s3:DeleteObjectVersion",
        False,
        None,
        ["ArchivesOnlyFromPublishers"],
    ),
    # Everything but reads is the publishers' (finding 3 of issue 34): replication from a
    # bucket the caller controls, tags, ACLs, restores, aborted uploads.
    *(
        ("other", action, f"s3:{action}", False, None, ["ArchivesOnlyFromPublishers"])
        for action in (
            "ReplicateObject",
            "ReplicateDelete",
            "ReplicateTags",
            "PutObjectTagging",
            "DeleteObjectTagging",
            "PutObjectAcl",
            "RestoreObject",
            "AbortMultipartUpload",
            "PutObjectRetention",
        )
    ),
    ("other", "GetObject (endpoint, Triton pods)", "s3:GetObject", False, None, []),
    ("other", "GetObjectVersion", "s3:GetObjectVersion", False, None, []),
    ("other", "GetObjectAttributes", "s3:GetObjectAttributes", False, None, []),
    ("service", "GetObject by a service principal", "s3:GetObject", False, None, []),
    ("admin", "ReplicateObject by a publisher", "s3:ReplicateObject", False, None, []),
    (
        "service",
        "PutObject by a service principal",
        "s3:PutObject",
        True,
        True,
        ["ArchivesOnlyFromPublishers"],
    ),
]
WHO = {"admin": ADMIN, "upload": UPLOAD, "other": OTHER, "service": None}


@pytest.mark.parametrize(
    ("who", "operation", "action", "header", "creation", "refused"),
    CASES,
    ids=[f"{c[0]}: {c[1]}" for c in CASES],
)
def test_who_may_write_what(who, operation, action, header, creation, refused) -> None:
    _, template = stack_with(publishers=[ADMIN], unconditional_publishers=[UPLOAD])
    context = {"aws:SecureTransport": "true"}
    if WHO[who]:
        context["aws:PrincipalArn"] = WHO[who]
    if header:
        context["s3:if-none-match"] = "*"
    if creation is not None:
        context["s3:ObjectCreationOperation"] = str(creation).lower()
    policy = bucket_policy(template)
    assert denied(policy, action, f"{BUCKET_ARN}/models/m-v0123abcd.tar.gz", context) == refused
    # Outside the prefix the archive statements do not apply.
    assert denied(policy, action, f"{BUCKET_ARN}/notes/readme.txt", context) == []


def test_no_publishers_means_nobody_writes_and_a_warning() -> None:
    stack, template = stack_with()
    statement = archive_statements(template)["ArchivesOnlyFromPublishers"]
    assert "Condition" not in statement
    assert denied(
        bucket_policy(template),
        "s3:PutObject",
        f"{BUCKET_ARN}/models/x",
        {"aws:PrincipalArn": ADMIN, "s3:if-none-match": "*", "s3:ObjectCreationOperation": "true"},
    ) == ["ArchivesOnlyFromPublishers"]
    Annotations.from_stack(stack).has_warning(
        "/S/Models",
        "No archive publishers named (storage.archive_publishers, or "
        "cluster.admin_role_arn from `mlp azs`): the bucket policy lets no principal write or "
        "delete under models/, so `mlp models upload` is refused. [ack: ml-platform:no-archive-publishers]",
    )


def test_destroy_keeps_the_empty_on_delete_handler_able_to_delete() -> None:
    _, template = stack_with(publishers=[ADMIN], removal_policy=cdk.RemovalPolicy.DESTROY)
    statement = archive_statements(template)["ArchivesOnlyFromPublishers"]
    (provider_role,) = [
        k
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::IAM::Role" and "AutoDeleteObjects" in k
    ]
    assert statement["Condition"]["ArnNotLike"]["aws:PrincipalArn"] == [
        ADMIN,
        f"arn:aws:iam::123456789012:role/{provider_role}",
    ]


def test_the_app_names_the_admin_role_and_the_upload_role(tmp_path: Path) -> None:
    """Defaults: cluster.admin_role_arn, plus the deploy-time upload's role with upload_dir."""
    from tests.support import synthesize
    from tests.unit.stacks.test_upload_dir import _archive

    folder = tmp_path / "archives"
    folder.mkdir()
    _archive(folder, "model_small-v0123abcd.tar.gz")
    synth = synthesize(
        tmp_path / "out",
        {
            "features": {"training_cluster": False, "triton_on_eks": False},
            "cluster": {"admin_role_arn": ADMIN},
            "inference": {"upload_dir": str(folder)},
        },
        nag=False,
    )
    statements = archive_statements(synth.template_json("Storage"))
    assert statements["ArchivesOnlyFromPublishers"]["Condition"] == {
        "ArnNotLike": {"aws:PrincipalArn": [ADMIN, UPLOAD]}
    }
    assert statements["ArchivesNeverOverwritten"]["Condition"]["ArnNotLike"] == {
        "aws:PrincipalArn": [UPLOAD]
    }
    # The cluster admin role administers the bucket too (the upload role does not).
    assert statements["ConfigurationOnlyByAdministrators"]["Condition"] == {
        "ArnNotLike": {"aws:PrincipalArn": [ADMIN, DEPLOY]}
    }
    # The role the bucket names is the role the upload runs as.
    inference = synth.template_json("Inference")
    names = [
        r["Properties"].get("RoleName")
        for r in inference["Resources"].values()
        if r["Type"] == "AWS::IAM::Role"
    ]
    assert UPLOAD.rsplit("/", 1)[1] in names


def test_default_app_protects_the_prefix(synth: SynthesizedPlatform) -> None:
    statements = archive_statements(synth.template_json("Storage"))
    assert set(statements) == {
        "ArchivesOnlyFromPublishers",
        "ArchivesNeverOverwritten",
        "ConfigurationOnlyByAdministrators",
    }
    # cdk.json names no admin role: only the deploys change the configuration.
    assert statements["ConfigurationOnlyByAdministrators"]["Condition"] == {
        "ArnNotLike": {"aws:PrincipalArn": [DEPLOY]}
    }


def test_publishers_setting() -> None:
    settings = Settings.from_context(
        {"storage": {"archive_publishers": [OTHER]}, "cluster": {"admin_role_arn": ADMIN}}
    )
    assert settings.archive_publishers == (OTHER,)
    assert Settings.from_context({"cluster": {"admin_role_arn": ADMIN}}).archive_publishers == (
        ADMIN,
    )
    assert Settings.from_context({}).archive_publishers == ()
    with pytest.raises(
        SettingsError,
        match=r"storage.archive_publishers\[0\] = 'me': expected an IAM role or user ARN",
    ):
        Settings.from_context({"storage": {"archive_publishers": ["me"]}})
    assert json.dumps(settings.archive_publishers)


# Bucket-configuration writes: (who, action) -> refused; evaluated per request on the bucket ARN.
CONFIG_CASES = [
    *(
        (who, action, ["ConfigurationOnlyByAdministrators"])
        for who in ("other", "admin", "service")
        for action in (
            "s3:PutLifecycleConfiguration",
            "s3:PutReplicationConfiguration",
            "s3:PutBucketVersioning",
            "s3:PutBucketPolicy",
            "s3:DeleteBucket",
        )
    ),
    *(
        (who, action, [])
        for who in ("ops", "deploy")
        for action in (
            "s3:PutLifecycleConfiguration",
            "s3:PutReplicationConfiguration",
            "s3:PutBucketVersioning",
            "s3:PutBucketPolicy",
            "s3:DeleteBucket",
        )
    ),
    # Reading configuration and listing stay with IAM.
    ("other", "s3:GetLifecycleConfiguration", []),
    ("other", "s3:ListBucket", []),
]
WHO_CONFIG = {"other": OTHER, "admin": ADMIN, "service": None, "ops": OPS, "deploy": DEPLOY}


@pytest.mark.parametrize(
    ("who", "action", "refused"), CONFIG_CASES, ids=[f"{c[0]}: {c[1]}" for c in CONFIG_CASES]
)
def test_who_may_change_the_bucket_configuration(who, action, refused) -> None:
    """Publishers write archives, not the configuration: ADMIN here is a publisher only."""
    _, template = stack_with(
        publishers=[ADMIN], unconditional_publishers=[UPLOAD], administrators=[OPS]
    )
    context = {"aws:SecureTransport": "true"}
    if WHO_CONFIG[who]:
        context["aws:PrincipalArn"] = WHO_CONFIG[who]
    assert denied(bucket_policy(template), action, BUCKET_ARN, context) == refused


def test_destroy_lets_the_empty_on_delete_handler_replace_the_policy() -> None:
    """aws-cdk's handler puts a deny-writes policy before emptying the bucket."""
    _, template = stack_with(removal_policy=cdk.RemovalPolicy.DESTROY)
    statement = archive_statements(template)["ConfigurationOnlyByAdministrators"]
    (provider_role,) = [
        k
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::IAM::Role" and "AutoDeleteObjects" in k
    ]
    role = f"arn:aws:iam::123456789012:role/{provider_role}"
    assert statement["Condition"]["ArnNotLike"]["aws:PrincipalArn"] == [DEPLOY, role]
    context = {"aws:PrincipalArn": role}
    assert denied(bucket_policy(template), "s3:PutBucketPolicy", BUCKET_ARN, context) == []


def test_another_synthesizer_without_administrators_warns_and_leaves_the_configuration() -> None:
    stack = cdk.Stack(
        new_app(),
        "S",
        env=cdk.Environment(account="123456789012", region="us-west-2"),
        synthesizer=cdk.CliCredentialsStackSynthesizer(),
    )
    ModelArtifactBucket(stack, "Models", props=ModelArtifactBucketProps(publishers=(ADMIN,)))
    template = Template.from_stack(stack).to_json()
    assert "ConfigurationOnlyByAdministrators" not in archive_statements(template)
    Annotations.from_stack(stack).has_warning(
        "/S/Models", Match.string_like_regexp("No bucket administrators")
    )
