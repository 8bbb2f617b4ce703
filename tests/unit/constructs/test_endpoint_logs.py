"""The stack owns each endpoint's log group (retention, KMS, created before the endpoint), and
Triton's per-request verbose logging is off unless a setting turns it on."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from ml_platform.app import new_app
from ml_platform.config import Settings, SettingsError
from ml_platform.constructs.sagemaker_mme import (
    TritonMultiModelEndpoint,
    TritonMultiModelEndpointProps,
)
from ml_platform.constructs.sagemaker_mme.endpoint import (
    ADDITIONAL_ARGS_ENV,
    DALI_RELEASE_AFTER_UNLOAD,
    LOG_INFO_ENV,
    LOG_VERBOSE_ENV,
    MODEL_LOAD_GPU_LIMIT_ENV,
)
from tests.support import GRANTS_ONLY_FOR_AWS_RESOURCES, SynthesizedPlatform

GROUP = "/aws/sagemaker/Endpoints/triton-ensembles"


def one(template: Template, kind: str) -> tuple[str, dict]:
    (found,) = template.find_resources(kind).items()
    return found


def test_log_group_is_the_stacks_with_retention_and_its_own_key(synth: SynthesizedPlatform) -> None:
    t = synth.template("Inference")
    resources = t.to_json()["Resources"]
    groups = {
        k: v
        for k, v in t.find_resources("AWS::Logs::LogGroup").items()
        if v["Properties"].get("LogGroupName") == GROUP
    }
    ((group_id, group),) = groups.items()
    # storage.removal_policy "retain": kept on deletion, removed when its first create fails.
    assert group["DeletionPolicy"] == "RetainExceptOnCreate"
    assert group["Properties"]["RetentionInDays"] == 365
    key_id = group["Properties"]["KmsKeyId"]["Fn::GetAtt"][0]
    key = resources[key_id]
    assert key["Type"] == "AWS::KMS::Key"
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "RetainExceptOnCreate"
    assert GRANTS_ONLY_FOR_AWS_RESOURCES in key["Properties"]["KeyPolicy"]["Statement"]
    (logs_statement,) = [
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Principal", {}).get("Service") == "logs.us-west-2.amazonaws.com"
    ]
    # One key per stack, for endpoint log groups' encryption context only (CloudWatch Logs
    # guide, encrypt-log-data-kms).
    assert key_id.startswith("EndpointLogsKey")
    assert logs_statement["Condition"] == {
        "ArnLike": {
            "kms:EncryptionContext:aws:logs:arn": "arn:aws:logs:us-west-2:123456789012:log-group:/aws/sagemaker/Endpoints/*"
        }
    }
    # Created before the endpoint (SageMaker would create it without retention otherwise),
    # and the metric filter reads the stack's group, so it follows the group, not the endpoint.
    endpoint_id, endpoint = one(t, "AWS::SageMaker::Endpoint")
    assert group_id in endpoint["DependsOn"]
    _, metric_filter = one(t, "AWS::Logs::MetricFilter")
    assert metric_filter["Properties"]["LogGroupName"] == {"Ref": group_id}
    assert endpoint_id not in metric_filter.get("DependsOn", [])


def test_verbose_logging_is_off_by_default(synth: SynthesizedPlatform) -> None:
    _, model = one(synth.template("Inference"), "AWS::SageMaker::Model")
    # The whole environment: verbose and INFO lines off (ERROR lines, failed loads among them,
    # stay), DALI gives its GPU memory back on unload, and no load cap (so a full GPU answers
    # 507 and SageMaker evicts: tests/e2e/triton/test_local_server.py).
    assert model["Properties"]["PrimaryContainer"]["Environment"] == {
        LOG_VERBOSE_ENV: "0",
        LOG_INFO_ENV: "false",
        ADDITIONAL_ARGS_ENV: "--backend-config=dali,release_after_unload=true",
    }
    assert DALI_RELEASE_AFTER_UNLOAD == "--backend-config=dali,release_after_unload=true"


def test_destroy_removal_policy_deletes_the_log_group_and_its_key() -> None:
    """With storage.removal_policy "destroy", `cdk destroy` takes the group and its key, so a
    later deploy can create the group of the same name again."""
    from ml_platform.app import build_platform

    settings = Settings.from_context(
        {
            "storage": {"removal_policy": "destroy"},
            "features": {"training_cluster": False, "triton_on_eks": False},
        }
    )
    platform = build_platform(new_app(), settings)
    t = Template.from_stack(platform.inference)
    (group,) = [
        g
        for g in t.find_resources("AWS::Logs::LogGroup").values()
        if g["Properties"].get("LogGroupName") == GROUP
    ]
    keys = t.find_resources("AWS::KMS::Key")
    assert sorted(k.rstrip("0123456789ABCDEF") for k in keys) == [
        "AlarmTopicKey",
        "EndpointLogsKey",
    ]
    for resource in (group, *keys.values()):
        assert resource["DeletionPolicy"] == "Delete", resource


def endpoint_template(**props) -> Template:
    stack = cdk.Stack(
        new_app(), "S", env=cdk.Environment(account="123456789012", region="us-east-1")
    )
    bucket = s3.Bucket.from_bucket_name(stack, "B", "models-bucket")
    values = TritonMultiModelEndpointProps(name="ep", archives=["model_tf_dali"], **props)
    TritonMultiModelEndpoint(stack, "Ep", bucket=bucket, props=values)
    return Template.from_stack(stack)


def test_verbose_level_and_retention_are_props() -> None:
    t = endpoint_template(triton_log_verbose=2, log_retention=cdk.aws_logs.RetentionDays.ONE_MONTH)
    _, model = one(t, "AWS::SageMaker::Model")
    env = model["Properties"]["PrimaryContainer"]["Environment"]
    # Verbose logging asked for: INFO lines stay on (the container's default).
    assert env == {LOG_VERBOSE_ENV: "2", ADDITIONAL_ARGS_ENV: DALI_RELEASE_AFTER_UNLOAD}
    assert LOG_INFO_ENV not in env and MODEL_LOAD_GPU_LIMIT_ENV not in env
    t.has_resource_properties(
        "AWS::Logs::LogGroup",
        {"LogGroupName": "/aws/sagemaker/Endpoints/ep", "RetentionInDays": 30},
    )


@pytest.mark.parametrize("level", [-1, True, "1"])
def test_bad_verbose_level_is_refused(level: object) -> None:
    allowed = r"expected a level >= 0 \(0 is off\)" if level == -1 else "expected an integer"
    with pytest.raises(ValueError, match=rf"^S/Ep: triton_log_verbose = {level!r}: {allowed}$"):
        endpoint_template(triton_log_verbose=level)


def test_settings_reach_the_endpoint_and_bad_values_are_named() -> None:
    with pytest.raises(SettingsError) as error:
        Settings.from_context({"inference": {"log_retention_days": 10, "triton_log_verbose": -2}})
    text = str(error.value)
    assert "inference.log_retention_days = 10: expected one of [1, 3, 5" in text
    assert "inference.triton_log_verbose = -2: expected a level >= 0" in text
