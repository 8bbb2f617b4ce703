"""Guards and operations of the endpoint: image regions, AMI, isolation, alarms."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Match, Template

from ml_platform.app import new_app
from ml_platform.config import Settings, SettingsError
from ml_platform.constructs.sagemaker_mme import (
    MODEL_LOAD_GPU_LIMIT_WARNING,
    TritonMultiModelEndpoint,
    TritonMultiModelEndpointProps,
)
from ml_platform.constructs.sagemaker_mme.metrics import LOAD_FAILURE_NAMESPACE
from ml_platform.sagemaker_images import (
    TRITON_REGISTRIES,
    triton_image_uri,
    triton_region_problem,
)
from tests.support import SynthesizedPlatform

TOPIC = "arn:aws:sns:us-west-2:123456789012:ml-alarms"


def _endpoint(
    region: str = "us-west-2", topic: bool = False, **props
) -> tuple[TritonMultiModelEndpoint, cdk.Stack]:
    stack = cdk.Stack(new_app(), "S", env=cdk.Environment(account="123456789012", region=region))
    bucket = s3.Bucket.from_bucket_name(stack, "B", "models-bucket")
    alarm_topic = sns.Topic.from_topic_arn(stack, "Topic", TOPIC) if topic else None
    values = {"name": "ep", "archives": ["model_tf_dali"], **props}
    props_ = TritonMultiModelEndpointProps(**values)
    endpoint = TritonMultiModelEndpoint(
        stack, "Ep", bucket=bucket, props=props_, alarm_topic=alarm_topic
    )
    return endpoint, stack


def test_a_region_without_the_image_is_refused_listing_where_it_is() -> None:
    # Per release, from the SDK's sagemaker-tritonserver.json (tests/unit/test_sagemaker_images.py
    # holds the table equal to it): ap-south-2 (Hyderabad) has 25.09 but not 24.09; the China
    # regions have 24.09 but not 25.09. No silent use of another region's account.
    assert triton_region_problem("us-west-2") is None
    assert triton_region_problem("ap-south-2", "25.09") is None
    assert triton_region_problem("cn-north-1", "24.09") is None
    message = triton_region_problem("ap-south-2", "24.09")
    assert message.startswith("SageMaker publishes no Triton 24.09 image in 'ap-south-2'")
    assert (
        "'us-west-2'" in message
        and "'eu-west-1'" in message
        and len(TRITON_REGISTRIES["24.09"]) == 26
    )
    with pytest.raises(ValueError, match=r"no Triton 25\.09 image in 'cn-north-1'"):
        triton_image_uri("cn-north-1")
    with pytest.raises(
        ValueError, match=r"triton_version = '25.09': SageMaker publishes no Triton"
    ):
        _endpoint("cn-north-1")
    _endpoint("ap-south-2")  # refused before: the table was 24.09's for every release
    # A given image is the caller's choice.
    _endpoint("cn-north-1", image_uri="111122223333.dkr.ecr.cn-north-1.amazonaws.com.cn/triton:1")
    # In settings: one SettingsError naming env.region.
    with pytest.raises(
        SettingsError, match=r"env.region = 'ap-south-2' with inference.triton_version"
    ):
        Settings.from_context(
            {
                "env": {"region": "ap-south-2"},
                "inference": {"triton_version": "24.09"},
                "network": {
                    "availability_zones": ["ap-south-2a", "ap-south-2b"],
                    "trainium_az": "ap-south-2a",
                },
            }
        )


def test_endpoint_config_pins_the_inference_ami(synth: SynthesizedPlatform) -> None:
    synth.template("Inference").has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                Match.object_like({"InferenceAmiVersion": "al2023-ami-sagemaker-inference-gpu-4-1"})
            ]
        },
    )
    with pytest.raises(
        ValueError, match=r"inference_ami_version = 'al2-ami-gpu-9': expected one of"
    ):
        _endpoint(inference_ami_version="al2-ami-gpu-9")
    with pytest.raises(SettingsError, match=r"inference.inference_ami_version = 'x': expected"):
        Settings.from_context({"inference": {"inference_ami_version": "x"}})


def test_the_model_runs_network_isolated(synth: SynthesizedPlatform) -> None:
    synth.template("Inference").has_resource_properties(
        "AWS::SageMaker::Model", {"EnableNetworkIsolation": True}
    )


def test_a_failed_model_load_raises_an_alarm_that_notifies_the_topic() -> None:
    endpoint, stack = _endpoint(topic=True)
    t = Template.from_stack(stack)
    ((_filter_id, metric_filter),) = t.find_resources("AWS::Logs::MetricFilter").items()
    group_id = stack.get_logical_id(endpoint.log_group.node.default_child)
    assert metric_filter["Properties"] == {
        "LogGroupName": {"Ref": group_id},
        "FilterPattern": '"failed to load"',
        "MetricTransformations": [
            {
                "MetricNamespace": LOAD_FAILURE_NAMESPACE,
                "MetricName": "ep-ModelLoadFailures",
                "MetricValue": "1",
                "DefaultValue": 0,
            }
        ],
    }
    # The stack owns the log group (test_endpoint_logs.py): the filter follows the group by
    # reference, not the endpoint.
    assert "DependsOn" not in metric_filter
    t.has_resource_properties(
        "AWS::Logs::LogGroup", {"LogGroupName": "/aws/sagemaker/Endpoints/ep"}
    )
    t.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": LOAD_FAILURE_NAMESPACE,
            "MetricName": "ep-ModelLoadFailures",
            "Threshold": 1,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        },
    )
    alarms = t.find_resources("AWS::CloudWatch::Alarm").values()
    assert len(alarms) == 4
    for alarm in alarms:
        assert alarm["Properties"]["AlarmActions"] == [TOPIC]
        assert alarm["Properties"]["OKActions"] == [TOPIC]
    # Without a topic, no actions.
    _, plain = _endpoint()
    for alarm in Template.from_stack(plain).find_resources("AWS::CloudWatch::Alarm").values():
        assert "AlarmActions" not in alarm["Properties"]


def test_the_alarm_topic_setting_reaches_every_endpoint() -> None:
    from ml_platform.config import EndpointSettings, InferenceSettings
    from ml_platform.stacks.inference import InferenceStack

    settings = InferenceSettings(
        alarm_topic_arn=TOPIC,
        endpoints=(EndpointSettings(name="a"), EndpointSettings(name="b")),
    )
    stack = InferenceStack(
        new_app(),
        "Inference",
        settings=settings,
        bucket_arn_export="Storage-ModelBucketArn",
        model_prefix="models/",
        env=cdk.Environment(account="123456789012", region="us-west-2"),
    )
    alarms = Template.from_stack(stack).find_resources("AWS::CloudWatch::Alarm").values()
    assert len(alarms) == 8 and all(a["Properties"]["AlarmActions"] == [TOPIC] for a in alarms)
    with pytest.raises(
        SettingsError, match=r"inference.alarm_topic_arn = 'topic': expected an SNS"
    ):
        Settings.from_context({"inference": {"alarm_topic_arn": "topic"}})


def _warnings(stack: cdk.Stack) -> list[str]:
    return [
        str(entry.data)
        for construct in stack.node.find_all()
        for entry in construct.node.metadata
        if entry.type == "aws:cdk:warning"
    ]


def test_an_unpatched_release_synthesizes_with_a_warning_naming_the_cves() -> None:
    _, patched = _endpoint()
    assert [w for w in _warnings(patched) if "CVE" in w] == []
    _, old = _endpoint(triton_version="24.09")
    (warning,) = [w for w in _warnings(old) if "CVE" in w]
    for cve in ("CVE-2025-23319", "CVE-2025-23320", "CVE-2025-23334"):
        assert cve in warning
    assert warning.startswith("Triton 24.09 predates NVIDIA's August 2025 security bulletin")
    assert "[ack: ml-platform:triton-unpatched-release]" in warning
    # Acknowledged (the risk accepted for the TensorFlow backend), it is gone.
    app = new_app()
    stack = cdk.Stack(app, "S", env=cdk.Environment(account="123456789012", region="us-west-2"))
    endpoint = TritonMultiModelEndpoint(
        stack,
        "Ep",
        bucket=s3.Bucket.from_bucket_name(stack, "B", "models-bucket"),
        props=TritonMultiModelEndpointProps(
            name="ep", archives=["model_tf_dali"], triton_version="24.09"
        ),
    )
    cdk.Annotations.of(endpoint).acknowledge_warning(
        "ml-platform:triton-unpatched-release", "TensorFlow backend needed until migrated"
    )
    assert [w for w in _warnings(stack) if "CVE" in w] == []


def test_the_ami_must_run_the_release_cuda() -> None:
    with pytest.raises(
        ValueError,
        match=(
            r"triton_version = '25\.09', inference_ami_version = "
            r"'al2-ami-sagemaker-inference-gpu-2-1': Triton 25.09 is built on "
            r"CUDA 13, which needs NVIDIA driver 575 or later; al2-ami-sagemaker-inference-gpu-2-1 "
            r"has driver 535"
        ),
    ):
        _endpoint(inference_ami_version="al2-ami-sagemaker-inference-gpu-2-1")
    _endpoint(inference_ami_version="al2-ami-sagemaker-inference-gpu-2-1", triton_version="24.09")
    _endpoint(inference_ami_version="al2-ami-sagemaker-inference-gpu-2")  # forward compatibility


def test_no_load_cap_by_default_and_a_cap_is_an_opt_in_with_its_cost_said(
    synth: SynthesizedPlatform,
) -> None:
    """No SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT by default: a load refused by the cap answers
    400 and SageMaker evicts only on 507 (tests/e2e/triton/test_local_server.py shows both
    answers on the real front end). A cap is an opt-in, with an acknowledgeable warning."""
    (model,) = synth.template("Inference").find_resources("AWS::SageMaker::Model").values()
    assert (
        "SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT"
        not in model["Properties"]["PrimaryContainer"]["Environment"]
    )
    assert [w for w in _warnings(synth.platform.inference) if "model_load_gpu" in w] == []
    _, stack = _endpoint(model_load_gpu_limit_percent=65)
    model = Template.from_stack(stack).find_resources("AWS::SageMaker::Model")
    (props,) = [m["Properties"]["PrimaryContainer"] for m in model.values()]
    assert props["Environment"]["SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT"] == "0.65"
    (warning,) = [w for w in _warnings(stack) if "model_load_gpu" in w]
    assert warning.startswith("model_load_gpu_limit_percent=65 caps model loads at 65%")
    assert "answers 400, not 507, so SageMaker evicts no idle model" in warning
    assert f"[ack: {MODEL_LOAD_GPU_LIMIT_WARNING}]" in warning
    for bad, allowed in (
        (0, r"expected 1 to 100 \(100, the default: no cap\)"),
        (101, r"expected 1 to 100 \(100, the default: no cap\)"),
        (True, "expected an integer"),
        (80.5, "expected an integer"),
        ("80", "expected an integer"),
    ):
        with pytest.raises(
            ValueError, match=rf"^S/Ep: model_load_gpu_limit_percent = {bad!r}: {allowed}$"
        ):
            _endpoint(model_load_gpu_limit_percent=bad)
    with pytest.raises(SettingsError, match=r"inference.model_load_gpu_limit_percent = 101"):
        Settings.from_context({"inference": {"model_load_gpu_limit_percent": 101}})


def test_the_release_must_support_the_gpu() -> None:
    """The construct refuses a V100 with a release from 25.03, by the rule the settings use
    (sagemaker_images.compute_capability_problem)."""
    with pytest.raises(
        ValueError,
        match=(
            r"instance_type = 'ml.p3.2xlarge': its GPU has compute capability 7.0, below the 7.5 "
            r"that Triton 25.09 supports"
        ),
    ):
        _endpoint(instance_type="ml.p3.2xlarge")
    _endpoint(instance_type="ml.p3.2xlarge", triton_version="24.09")
    # A given image is the caller's choice, as for the region.
    _endpoint(
        instance_type="ml.p3.2xlarge",
        image_uri="111122223333.dkr.ecr.us-west-2.amazonaws.com/triton:1",
    )
    with pytest.raises(ValueError) as error:
        _endpoint(archives=["model_tf_dali", "model_tf_dali", "Bad"])
    assert "archives[2] = 'Bad': 'Bad' is not an archive reference" in str(error.value)
    assert (
        "archives = ['model_tf_dali', 'model_tf_dali', 'Bad']: ['model_tf_dali'] given more "
        "than once"
    ) in str(error.value)


def test_instance_counts_follow_the_settings_rule() -> None:
    """limits.endpoint_counts_ok: the same 1 <= min <= initial <= max <= 100 as the settings."""
    with pytest.raises(
        ValueError,
        match=r"min_instances = 1, initial_instances = 1, max_instances = 101: expected 1 <= min "
        r"<= initial <= max <= 100",
    ):
        _endpoint(max_instances=101)
    with pytest.raises(ValueError, match=r"min_instances = 2, initial_instances = 1"):
        _endpoint(min_instances=2, initial_instances=1, max_instances=2)
    _endpoint(min_instances=1, initial_instances=100, max_instances=100)


def test_an_endpoint_that_may_run_on_one_instance_warns() -> None:
    """min_instances 1 (the default): one instance, one AZ, no redundancy; said at synth with
    an acknowledgeable warning. From 2 instances SageMaker spreads them over AZs: no warning."""
    from ml_platform.constructs.sagemaker_mme import SINGLE_INSTANCE_WARNING

    single, stack = _endpoint()
    (warning,) = [w for w in _warnings(stack) if SINGLE_INSTANCE_WARNING in w]
    assert warning.startswith("min_instances=1: one instance is one Availability Zone")
    assert f"[ack: {SINGLE_INSTANCE_WARNING}]" in warning
    _, redundant = _endpoint(min_instances=2, initial_instances=2, max_instances=3)
    assert [w for w in _warnings(redundant) if SINGLE_INSTANCE_WARNING in w] == []
    cdk.Annotations.of(single).acknowledge_warning(SINGLE_INSTANCE_WARNING, "dev endpoint")
    assert [w for w in _warnings(stack) if SINGLE_INSTANCE_WARNING in w] == []


def test_an_endpoint_without_a_topic_warns_that_its_alarms_reach_no_one() -> None:
    from ml_platform.constructs.sagemaker_mme import NO_ALARM_TOPIC_WARNING

    _, bare = _endpoint()
    (warning,) = [w for w in _warnings(bare) if NO_ALARM_TOPIC_WARNING in w]
    assert warning.startswith("alarm_topic=None: the endpoint's alarms have no action")
    _, notified = _endpoint(topic=True)
    assert [w for w in _warnings(notified) if NO_ALARM_TOPIC_WARNING in w] == []
    alarms = Template.from_stack(notified).find_resources("AWS::CloudWatch::Alarm").values()
    assert [a["Properties"]["AlarmActions"] for a in alarms] == [[TOPIC]] * 4
