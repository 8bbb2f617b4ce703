"""Settings: defaults, parsing and the one error that lists every problem."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ml_platform.config import Settings, SettingsError, settings_from_cdk_json
from tests.support import CDK_JSON, ROOT, cdk_json_context

AZ_KEY = "availability-zones:account=123456789012:region=us-west-2"
SEEDED = {AZ_KEY: ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"]}


def problems(values: dict) -> list[str]:
    with pytest.raises(SettingsError) as info:
        Settings.from_context(values, known_azs=SEEDED)
    return info.value.problems


def test_defaults_are_valid_and_documented_values() -> None:
    s = Settings.from_context(None, known_azs=SEEDED)
    assert s.env.region == "us-west-2"
    assert s.network.trainium_az in s.network.availability_zones
    assert s.trainium.instance_type == "trn1.32xlarge"
    assert (s.trainium.min_nodes, s.trainium.nodes, s.trainium.max_nodes) == (2, 2, 2)
    assert s.storage.fsx_storage_gib == 1200
    assert s.storage.removal_policy == "retain"
    assert s.cluster.kubernetes_version == "1.35"
    assert s.inference.endpoints[0].instance_type == "ml.g4dn.4xlarge"
    assert s.inference.endpoints[0].archives == ("model_tf_dali", "model_trt_python_t4")
    assert s.triton_on_eks.archives == ("model_tf_dali", "model_onnx_python")


def test_cdk_json_settings_parse(settings: Settings) -> None:
    assert settings == settings_from_cdk_json(str(CDK_JSON))
    assert settings.availability_zones_context_key in cdk_json_context()


def test_all_problems_are_reported_at_once() -> None:
    found = problems(
        {"storage": {"fsx_storage_gib": -5}, "trainium": {"instance_type": "p4d.24xlarge"}}
    )
    assert len(found) == 2
    assert any("storage.fsx_storage_gib = -5" in p and "1200" in p for p in found)
    assert any(
        "trainium.instance_type = 'p4d.24xlarge'" in p and "trn1.32xlarge" in p for p in found
    )


def test_type_errors_and_value_errors_are_reported_together() -> None:
    found = problems({"trainium": {"nodes": "two"}, "storage": {"fsx_throughput_per_tib": 300}})
    assert "trainium.nodes = 'two': expected an integer" in found
    assert any(p.startswith("storage.fsx_throughput_per_tib = 300") for p in found)


def test_a_bad_section_hides_no_problem_of_the_others() -> None:
    # Each section is validated on its own, and a rule that spans sections runs when the
    # sections it reads are valid: a bad Trainium count hides neither the alarm topic in
    # another region (inference with env) nor the cluster Triton on EKS needs (features).
    topic = "arn:aws:sns:us-east-1:123456789012:alarms"
    in_region = (
        f"inference.alarm_topic_arn = {topic!r}: the topic is in 'us-east-1', the alarms in "
        "env.region 'us-west-2': CloudWatch alarms notify only SNS topics of their own region; "
        "expected a topic in 'us-west-2'"
    )
    needs_cluster = (
        "features.triton_on_eks = true needs features.training_cluster = true (Triton on EKS "
        "runs on the training cluster)"
    )
    inference = {"alarm_topic_arn": topic}
    features = {"training_cluster": False}
    assert problems(
        {"trainium": {"nodes": "two"}, "inference": inference, "features": features}
    ) == ["trainium.nodes = 'two': expected an integer", in_region, needs_cluster]
    # A rule that reads the bad section does not run: the default region standing in for
    # env would report the topic against 'us-west-2'.
    assert problems({"env": {"region": 5}, "inference": inference, "features": features}) == [
        "env.region = 5: expected a string",
        needs_cluster,
    ]


def test_an_unknown_key_hides_no_cross_field_rule_of_its_section() -> None:
    # An unknown key sets no field: the endpoint's and the section's rules still run after it.
    endpoint = {"min_instances": 3, "max_instances": 2, "bogus": 1}
    assert problems({"inference": {"endpoints": [endpoint]}}) == [
        "inference.endpoints[0].bogus: unknown setting; known: ['name', 'instance_type', "
        "'initial_instances', 'min_instances', 'max_instances', 'invocations_per_instance', "
        "'archives']",
        "inference.endpoints[0].min_instances = 3, inference.endpoints[0].initial_instances = 1, "
        "inference.endpoints[0].max_instances = 2: expected 1 <= min <= initial <= max <= 100",
    ]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"bogus": 1}, "bogus: unknown setting"),
        ({"storage": {"fsx_size": 1}}, "storage.fsx_size: unknown setting"),
        ({"env": {"account": "12"}}, "env.account = '12'"),
        ({"env": {"region": "mars"}}, "env.region = 'mars'"),
        ({"network": {"cidr": "10.0.0.0/8"}}, "network.cidr = '10.0.0.0/8'"),
        ({"network": {"availability_zones": ["us-west-2a"]}}, "expected at least two distinct AZ"),
        ({"network": {"trainium_az": "us-west-2c"}}, "network.trainium_az = 'us-west-2c'"),
        ({"network": {"nat_gateways": 0}}, "network.nat_gateways = 0"),
        ({"network": {"flow_log_retention_days": 2}}, "network.flow_log_retention_days = 2"),
        ({"storage": {"removal_policy": "snapshot"}}, "storage.removal_policy = 'snapshot'"),
        ({"storage": {"fsx_storage_gib": 2000}}, "storage.fsx_storage_gib = 2000"),
        ({"storage": {"model_prefix": "/models"}}, "storage.model_prefix = '/models'"),
        ({"storage": {"ecr_max_images": 0}}, "storage.ecr_max_images = 0"),
        ({"cluster": {"kubernetes_version": "1.29"}}, "cluster.kubernetes_version = '1.29'"),
        ({"cluster": {"endpoint_access": "public"}}, "cluster.endpoint_access = 'public'"),
        (
            {"cluster": {"public_access_cidrs": ["10.0.0.0/33"]}},
            "cluster.public_access_cidrs[0] = '10.0.0.0/33': not a CIDR",
        ),
        ({"cluster": {"admin_role_arn": "admin"}}, "cluster.admin_role_arn = 'admin'"),
        ({"cluster": {"system_nodes": 0}}, "cluster.system_nodes = 0"),
        (
            {"cluster": {"helper_nodes": 0}},
            "cluster.helper_nodes = 0: expected 1 to 3 (the dataset Job and TensorBoard must "
            "run in network.trainium_az, where FSx is, and the system nodes may have no node "
            "there, so 0 would leave them Pending)",
        ),
        ({"cluster": {"helper_nodes": 4}}, "cluster.helper_nodes = 4: expected 1 to 3"),
        (
            {"trainium": {"nodes": 3}},
            "trainium.min_nodes = 2, trainium.nodes = 3, trainium.max_nodes = 2",
        ),
        ({"trainium": {"root_volume_gib": 10}}, "trainium.root_volume_gib = 10"),
        ({"training": {"queue": "Bad_Queue"}}, "training.queue = 'Bad_Queue'"),
        ({"training": {"image_repository": "UPPER"}}, "training.image_repository = 'UPPER'"),
        ({"inference": {"triton_version": "22.01"}}, "inference.triton_version = '22.01'"),
        (
            {"inference": {"endpoints": [{"instance_type": "ml.p4d.24xlarge"}]}},
            "inference.endpoints[0].instance_type = 'ml.p4d.24xlarge'",
        ),
        (
            {"inference": {"endpoints": [{"min_instances": 3, "max_instances": 2}]}},
            "inference.endpoints[0].min_instances = 3, inference.endpoints[0].initial_instances = 1, "
            "inference.endpoints[0].max_instances = 2",
        ),
        (
            {"inference": {"endpoints": [{"archives": ["../x.tar.gz"]}]}},
            "inference.endpoints[0].archives[0] = '../x.tar.gz': '../x.tar.gz' is not an archive "
            "reference: expected NAME or NAME@vXXXXXXXX",
        ),
        (
            {"inference": {"endpoints": [{"name": "a"}, {"name": "a"}]}},
            "names must be unique",
        ),
        (
            {"triton_on_eks": {"gpu_instance_type": "p5.48xlarge"}},
            "gpu_instance_type = 'p5.48xlarge'",
        ),
        ({"features": {"training_cluster": False}}, "features.triton_on_eks = true needs"),
        (
            {"triton_on_eks": {"archives": ["custom.tar.gz"]}},
            "triton_on_eks.archives[0] = 'custom.tar.gz': Triton on EKS loads",
        ),
        ({"features": {"inference": "yes"}}, "features.inference = 'yes': expected true or false"),
    ],
)
def test_each_rule_names_setting_value_and_allowed(values: dict, expected: str) -> None:
    assert any(expected in p for p in problems(values)), problems(values)


def test_unseeded_availability_zones_are_an_error_not_a_lookup() -> None:
    with pytest.raises(SettingsError, match="mlp azs"):
        Settings.from_context({"env": {"account": "210987654321"}}, known_azs=SEEDED)
    with pytest.raises(SettingsError, match="'us-west-2e' is not among the AZs"):
        Settings.from_context(
            {
                "network": {
                    "availability_zones": ["us-west-2a", "us-west-2e"],
                    "trainium_az": "us-west-2a",
                }
            },
            known_azs=SEEDED,
        )


def test_broken_cdk_json_stops_synthesis_with_one_message(tmp_path) -> None:
    """What `cdk synth` runs (app.py with the CLI's context) fails before building anything."""
    context = cdk_json_context()
    context["ml-platform"]["storage"]["fsx_storage_gib"] = -1200
    # trn1.2xlarge exists but has no EFA: not a Trainium node type of the platform
    context["ml-platform"]["trainium"]["instance_type"] = "trn1.2xlarge"
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps(context), "CDK_OUTDIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(ROOT / "app.py")], env=env, capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 1
    assert "Invalid 'ml-platform' settings (2 problems)" in result.stderr
    assert "storage.fsx_storage_gib = -1200" in result.stderr
    assert "trainium.instance_type = 'trn1.2xlarge'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.glob("*.template.json"))


def test_a_bad_endpoint_hides_none_of_the_inference_sections_rules() -> None:
    """An endpoint's rules run with the inference section's own (not as a nested section's,
    whose failure would stop pydantic before the section's rules)."""
    with pytest.raises(SettingsError) as info:
        Settings.from_context(
            {
                "inference": {
                    "inference_ami_version": "al2-ami-sagemaker-inference-gpu-2-1",
                    "endpoints": [{"min_instances": 3, "initial_instances": 1}],
                }
            }
        )
    assert [p.split(":")[0] for p in info.value.problems] == [
        "inference.triton_version = '25.09', "
        "inference.inference_ami_version = 'al2-ami-sagemaker-inference-gpu-2-1'",
        "inference.endpoints[0].min_instances = 3, inference.endpoints[0].initial_instances = 1, "
        "inference.endpoints[0].max_instances = 2",
    ]
