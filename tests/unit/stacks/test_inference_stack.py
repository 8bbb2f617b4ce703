"""InferenceStack and TritonMultiModelEndpoint: fine-grained template assertions."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template

from ml_platform.app import new_app
from ml_platform.constructs.sagemaker_mme import (
    TritonMultiModelEndpoint,
    TritonMultiModelEndpointProps,
)
from ml_platform.instances import SAGEMAKER_MME_GPU_INSTANCES
from ml_platform.sagemaker_images import triton_image_uri
from tests.support import SynthesizedPlatform

ARCHIVES = ["model_tf_dali", "model_trt_python@v0123abcd"]


def endpoint_in(region: str, **props) -> tuple[TritonMultiModelEndpoint, cdk.Stack]:
    stack = cdk.Stack(new_app(), "S", env=cdk.Environment(account="123456789012", region=region))
    bucket = s3.Bucket.from_bucket_name(stack, "B", "models-bucket")
    values = TritonMultiModelEndpointProps(**{"name": "ep", "archives": ARCHIVES, **props})
    return TritonMultiModelEndpoint(stack, "Ep", bucket=bucket, props=values), stack


def test_model_is_multi_model_over_the_prefix(synth: SynthesizedPlatform) -> None:
    t = synth.template("Inference")
    t.resource_count_is("AWS::SageMaker::Model", 1)
    t.has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "PrimaryContainer": {
                "Image": "763104351884.dkr.ecr.us-west-2.amazonaws.com/sagemaker-tritonserver:25.09-py3",
                "Mode": "MultiModel",
                "ModelDataUrl": {
                    "Fn::Join": ["", Match.array_with([Match.string_like_regexp("/models/$")])]
                },
            }
        },
    )


@pytest.mark.parametrize(
    ("region", "uri"),
    [
        (
            "us-east-1",
            "763104351884.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:25.09-py3",
        ),
        (
            "af-south-1",
            "626614931356.dkr.ecr.af-south-1.amazonaws.com/sagemaker-tritonserver:25.09-py3",
        ),
        # 25.09 is not published in China (the SDK's sagemaker-tritonserver.json); it is in
        # ap-east-2 under an account of its own, which the old single-release table refused.
        (
            "ap-east-2",
            "975050140332.dkr.ecr.ap-east-2.amazonaws.com/sagemaker-tritonserver:25.09-py3",
        ),
    ],
)
def test_image_uri_per_region(region: str, uri: str) -> None:
    assert triton_image_uri(region) == uri
    endpoint, stack = endpoint_in(region)
    assert endpoint.image_uri == uri
    Template.from_stack(stack).has_resource_properties(
        "AWS::SageMaker::Model", {"PrimaryContainer": Match.object_like({"Image": uri})}
    )


def test_ecr_pull_is_scoped_to_the_triton_repository_of_the_region() -> None:
    _, stack = endpoint_in("af-south-1")
    Template.from_stack(stack).has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Action": Match.array_with(["ecr:BatchGetImage"]),
                                "Resource": {
                                    "Fn::Join": [
                                        "",
                                        [
                                            "arn:",
                                            {"Ref": "AWS::Partition"},
                                            ":ecr:af-south-1:626614931356:repository/sagemaker-tritonserver",
                                        ],
                                    ]
                                },
                            }
                        )
                    ]
                )
            }
        },
    )


def test_execution_role_reads_only_the_model_prefix(synth: SynthesizedPlatform) -> None:
    policies = synth.template("Inference").find_resources("AWS::IAM::Policy")
    (policy,) = [p for p in policies.values() if "ExecutionRole" in str(p["Properties"]["Roles"])]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    s3_statements = [s for s in statements if str(s["Action"]).startswith("s3:")]
    assert {s["Action"] for s in s3_statements} == {"s3:GetObject", "s3:ListBucket"}
    get = next(s for s in s3_statements if s["Action"] == "s3:GetObject")
    assert get["Resource"]["Fn::Join"][1][-1] == "/models/*"
    listing = next(s for s in s3_statements if s["Action"] == "s3:ListBucket")
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["models/*"]}}
    assert not any(
        s["Action"] == "s3:*" or (s["Resource"] == "*" and "s3" in str(s)) for s in statements
    )


def _logs_statement(template: Template) -> dict:
    (policy,) = [
        p
        for p in template.find_resources("AWS::IAM::Policy").values()
        if "ExecutionRole" in str(p["Properties"]["Roles"])
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    (logs,) = [s for s in statements if "logs:PutLogEvents" in s["Action"]]
    return logs


def test_execution_role_writes_to_its_own_log_group(synth: SynthesizedPlatform) -> None:
    """The exact ARNs: the endpoint's log group (with ':*', as CloudWatch Logs evaluates
    log-group actions) and its streams; not 'log-group' without a name."""
    logs = _logs_statement(synth.template("Inference"))
    # cdk.json enables partition literals: 'aws' for us-west-2.
    group = (
        "arn:aws:logs:us-west-2:123456789012:log-group:/aws/sagemaker/Endpoints/triton-ensembles"
    )
    assert logs["Resource"] == [f"{group}:*", f"{group}:log-stream:*"]
    # Without partition literals, the partition comes from the stack.
    _, stack = endpoint_in("eu-west-1")
    prefix = ["arn:", {"Ref": "AWS::Partition"}]
    group = ":logs:eu-west-1:123456789012:log-group:/aws/sagemaker/Endpoints/ep"
    assert _logs_statement(Template.from_stack(stack))["Resource"] == [
        {"Fn::Join": ["", [*prefix, f"{group}:*"]]},
        {"Fn::Join": ["", [*prefix, f"{group}:log-stream:*"]]},
    ]
    assert set(logs["Action"]) == {
        "logs:CreateLogGroup",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "logs:DescribeLogStreams",
    }


def test_endpoint_config_and_endpoint(synth: SynthesizedPlatform) -> None:
    t = synth.template("Inference")
    t.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                Match.object_like(
                    {
                        "VariantName": "AllTraffic",
                        "InstanceType": "ml.g4dn.4xlarge",
                        "InitialInstanceCount": 1,
                        "InitialVariantWeight": 1,
                    }
                )
            ]
        },
    )
    t.has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {"EndpointName": "triton-ensembles", "RetainAllVariantProperties": True},
    )


def test_scaling_target_and_policy(synth: SynthesizedPlatform) -> None:
    t = synth.template("Inference")
    t.has_resource(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "Properties": Match.object_like(
                {
                    "ServiceNamespace": "sagemaker",
                    "ResourceId": "endpoint/triton-ensembles/variant/AllTraffic",
                    "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
                    "MinCapacity": 1,
                    "MaxCapacity": 2,
                }
            ),
            "DependsOn": Match.array_with([Match.string_like_regexp("^TritonEnsembles")]),
        },
    )
    # The target-tracking policy is the ScalingPolicy custom resource's (test_endpoint_scaling.py).
    t.resource_count_is("AWS::ApplicationAutoScaling::ScalingPolicy", 0)


@pytest.mark.parametrize(
    ("namespace", "metric"),
    [
        ("AWS/SageMaker", "ModelLoadingWaitTime"),
        ("/aws/sagemaker/Endpoints", "GPUMemoryUtilization"),
        ("AWS/SageMaker", "Invocation5XXErrors"),
    ],
)
def test_alarms_on_multi_model_metrics(
    synth: SynthesizedPlatform, namespace: str, metric: str
) -> None:
    synth.template("Inference").has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": namespace,
            "MetricName": metric,
            "Dimensions": Match.array_with(
                [
                    {"Name": "EndpointName", "Value": "triton-ensembles"},
                    {"Name": "VariantName", "Value": "AllTraffic"},
                ]
            ),
        },
    )


def test_grant_invoke_uses_the_target_model_condition() -> None:
    endpoint, stack = endpoint_in("us-west-2")
    role = iam.Role(stack, "Client", assumed_by=iam.AccountRootPrincipal())
    endpoint.grant_invoke(role, target_models=["model_trt_python"])
    endpoint.grant_invoke(iam.Role(stack, "All", assumed_by=iam.AccountRootPrincipal()))
    endpoint.grant_invoke(
        iam.Role(stack, "Team", assumed_by=iam.AccountRootPrincipal()), ["team_a_*"]
    )
    t = Template.from_stack(stack)
    t.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": [{"Ref": Match.string_like_regexp("^Client")}],
            "PolicyDocument": {
                "Statement": [
                    {
                        "Action": "sagemaker:InvokeEndpoint",
                        "Effect": "Allow",
                        "Resource": {"Ref": Match.string_like_regexp("^Ep")},
                        "Condition": {
                            "StringLike": {"sagemaker:TargetModel": ["model_trt_python-v*.tar.gz"]}
                        },
                    }
                ]
            },
        },
    )
    # Default: the endpoint's archives, every version of a logical name or the exact one.
    everything = ["model_tf_dali-v*.tar.gz", "model_trt_python-v0123abcd.tar.gz"]
    for role_id, patterns in (("^All", everything), ("^Team", ["team_a_*-v*.tar.gz"])):
        condition = {"StringLike": {"sagemaker:TargetModel": patterns}}
        t.has_resource_properties(
            "AWS::IAM::Policy",
            {
                "Roles": [{"Ref": Match.string_like_regexp(role_id)}],
                "PolicyDocument": {"Statement": [Match.object_like({"Condition": condition})]},
            },
        )


def test_grant_invoke_rejects_file_names_and_bad_patterns() -> None:
    endpoint, stack = endpoint_in("us-west-2")
    role = iam.Role(stack, "Client", assumed_by=iam.AccountRootPrincipal())
    with pytest.raises(ValueError) as info:
        endpoint.grant_invoke(role, ["model_trt_python.tar.gz", "Bad*", "x@v1"])
    message = str(info.value)
    for bad in ("'model_trt_python.tar.gz' is not an archive reference", "'Bad*'", "'x@v1'"):
        assert bad in message


def _policy_chars(template: dict, stack: cdk.Stack, role: iam.Role) -> int:
    """Characters of the role's synthesized policy document, without whitespace (as IAM
    counts them), the endpoint's Ref standing in for its ARN."""
    import json

    role_id = stack.get_logical_id(role.node.default_child)
    (policy,) = [
        p
        for p in template["Resources"].values()
        if p["Type"] == "AWS::IAM::Policy" and p["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    return len(json.dumps(policy["Properties"]["PolicyDocument"], separators=(",", ":")))


def test_grant_invoke_stays_within_iam_policy_limits() -> None:
    from ml_platform.constructs.sagemaker_mme._grants import GRANT_POLICY_BUDGET

    many = [f"ensemble_{i:04d}" for i in range(1000)]
    endpoint, stack = endpoint_in("us-west-2", archives=many)
    some = iam.Role(stack, "Some", assumed_by=iam.AccountRootPrincipal())
    endpoint.grant_invoke(some, many[:200])
    # 1,000 (the endpoint's default) would be about 25,000 characters: refused, naming the
    # limit and the way out.
    with pytest.raises(ValueError) as info:
        endpoint.grant_invoke(iam.Role(stack, "All", assumed_by=iam.AccountRootPrincipal()))
    message = str(info.value)
    assert "1000 target models make a" in message and "6,144 characters" in message
    assert "'team_a_*'" in message
    # A pattern covers them all in a few characters.
    pattern = iam.Role(stack, "Pattern", assumed_by=iam.AccountRootPrincipal())
    endpoint.grant_invoke(pattern, ["ensemble_*"])
    # 200 logical names fit: measured below IAM's 6,144-character managed-policy limit.
    template = Template.from_stack(stack).to_json()
    assert 5_000 < _policy_chars(template, stack, some) <= GRANT_POLICY_BUDGET < 6_144
    assert _policy_chars(template, stack, pattern) < 300


def test_construct_reports_every_bad_prop_at_once() -> None:
    """Every field's problem at once; the cross-field rules, once the fields are valid (as in
    the settings), all at once too."""
    with pytest.raises(ValueError) as info:
        endpoint_in("us-west-2", name="bad_name", instance_type="ml.p4d.24xlarge")
    assert str(info.value) == (
        "S/Ep: name = 'bad_name': expected letters, digits and '-', at most 63; "
        "instance_type = 'ml.p4d.24xlarge': multi-model endpoints on GPU support "
        f"{sorted(SAGEMAKER_MME_GPU_INSTANCES)}"
    )
    with pytest.raises(ValueError) as info:
        endpoint_in(
            "us-west-2",
            min_instances=3,
            max_instances=2,
            archives=["/abs.tar.gz", "model_a", "model_a"],
        )
    assert str(info.value) == (
        "S/Ep: min_instances = 3, initial_instances = 1, max_instances = 2: expected 1 <= min "
        "<= initial <= max <= 100; archives[0] = '/abs.tar.gz': '/abs.tar.gz' is not an archive "
        "reference: expected NAME or NAME@vXXXXXXXX (NAME of lower-case letters, digits, '_' "
        "and '-'; the version 'v' and 8 hex digits); archives = ['/abs.tar.gz', 'model_a', "
        "'model_a']: ['model_a'] given more than once"
    )


def test_one_endpoint_per_configured_endpoint(tmp_path) -> None:
    from tests.support import synthesize

    two = synthesize(
        tmp_path,
        {
            "features": {"training_cluster": False, "triton_on_eks": False},
            "inference": {
                "endpoints": [
                    {"name": "images", "archives": ["model_tf_dali"]},
                    {
                        "name": "text",
                        "archives": ["model_trt_python"],
                        "instance_type": "ml.g5.xlarge",
                    },
                ]
            },
        },
        nag=False,
    )
    t = two.template("Inference")
    t.resource_count_is("AWS::SageMaker::Endpoint", 2)
    t.resource_count_is("AWS::SageMaker::Model", 2)
    t.has_resource_properties("AWS::SageMaker::Endpoint", {"EndpointName": "images"})
    t.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {"ProductionVariants": [Match.object_like({"InstanceType": "ml.g5.xlarge"})]},
    )


def _inference_stack(upload_dir: str | None):
    from ml_platform.config import InferenceSettings
    from ml_platform.stacks.inference import InferenceStack

    app = new_app()
    return InferenceStack(
        app,
        "Inference",
        settings=InferenceSettings(upload_dir=upload_dir),
        bucket_arn_export="Storage-ModelBucketArn",
        model_prefix="models/",
        env=cdk.Environment(account="123456789012", region="us-west-2"),
    )


def test_upload_dir_adds_a_deploy_time_upload_before_the_endpoint(tmp_path) -> None:
    from ml_platform_cli.archives import version_archive
    from tests.helpers.cli import ENSEMBLE, MODEL, write_tar

    version_archive(
        write_tar(
            tmp_path / "model_small.tar.gz",
            {"ensemble/config.pbtxt": ENSEMBLE, "encoder/config.pbtxt": MODEL},
        )
    )
    stack = _inference_stack(str(tmp_path))
    t = Template.from_stack(stack)
    t.has_resource_properties(
        "Custom::CDKBucketDeployment",
        {"DestinationBucketKeyPrefix": "models/", "Prune": False},
    )
    (custom,) = [c for c in stack.upload.node.children if c.node.id.startswith("CustomResource-")]
    upload_id = stack.get_logical_id(custom.node.default_child)
    t.has_resource("AWS::SageMaker::Endpoint", {"DependsOn": Match.array_with([upload_id])})


def test_upload_dir_with_a_broken_ensemble_fails_synthesis(tmp_path) -> None:
    """The settings check every archive (once per synth; the stack does not check again)."""
    from ml_platform.config import Settings, SettingsError
    from tests.helpers.cli import ENSEMBLE, MODEL, write_tar

    write_tar(
        tmp_path / "model_broken.tar.gz",
        {"ensemble/config.pbtxt": ENSEMBLE, "encoder/config.pbtxt": MODEL.replace('"y"', '"z"')},
    )
    with pytest.raises(SettingsError) as info:
        Settings.from_context({"inference": {"upload_dir": str(tmp_path)}})
    message = str(info.value)
    assert "model_broken.tar.gz" in message
    assert "encoder" in message and "'y'" in message


def test_upload_dir_must_exist(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"inference.upload_dir='.*missing': not a directory"):
        _inference_stack(str(tmp_path / "missing"))


def test_no_upload_without_upload_dir() -> None:
    stack = _inference_stack(None)
    assert stack.upload is None
    Template.from_stack(stack).resource_count_is("Custom::CDKBucketDeployment", 0)


def test_endpoint_ids_follow_the_settings_rule() -> None:
    """The stack names each endpoint's construct (and its output) with
    stack_outputs.endpoint_construct_id, the rule the settings check clashes with."""
    from ml_platform.config import EndpointSettings, InferenceSettings
    from ml_platform.stack_outputs import endpoint_construct_id
    from ml_platform.stacks.inference import InferenceStack

    names = ("x--y", "tritonEnsembles", "a-b9")
    stack = InferenceStack(
        new_app(),
        "Inference",
        settings=InferenceSettings(endpoints=tuple(EndpointSettings(name=n) for n in names)),
        bucket_arn_export="Storage-ModelBucketArn",
        model_prefix="models/",
        env=cdk.Environment(account="123456789012", region="us-west-2"),
    )
    assert [stack.endpoints[n].node.id for n in names] == ["XY", "TritonEnsembles", "AB9"]
    assert [endpoint_construct_id(n) for n in names] == ["XY", "TritonEnsembles", "AB9"]
    outputs = Template.from_stack(stack).find_outputs("*")
    assert {"XYName", "TritonEnsemblesName", "AB9Name"} <= set(outputs)
    # No id of the stack's own beyond those the settings guard against (INFERENCE_FIXED_IDS).
    from ml_platform.stack_outputs import INFERENCE_FIXED_IDS

    own = {c.node.id for c in stack.node.children} - {endpoint_construct_id(n) for n in names}
    own -= {f"{endpoint_construct_id(n)}Name" for n in names}
    singletons = ("Custom::", "EndpointScaling", "EndpointLogs", "BootstrapVersion", "Check")
    assert {i for i in own if not i.startswith(singletons)} <= set(INFERENCE_FIXED_IDS)
