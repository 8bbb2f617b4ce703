"""Triton and NVIDIA device-plugin charts, token-free, validated against Kubernetes 1.35."""

from __future__ import annotations

import shlex

import cdk8s
import kubernetes_validate
import pytest

from ml_platform.k8s_charts.nvidia import NVIDIA_DEVICE_PLUGIN_IMAGE, NvidiaDevicePluginChart
from ml_platform.k8s_charts.triton import TritonChart, TritonChartProps, models_to_load
from ml_platform.triton import ARCHIVE_MODELS, IMAGE_ARCHIVE
from ml_platform.triton.ensembles import TEXT_ONNX_ARCHIVE as TEXT_ARCHIVE
from tests.triton_eks.support import server_argv

PROPS = TritonChartProps(
    bucket_name="models-bucket",
    model_prefix="models/",
    archives=("model_tf_dali", "model_onnx_python@v0123abcd"),
    triton_version="25.09",
    region="us-west-2",
    replicas=1,
    max_replicas=3,
)


@pytest.fixture(scope="module")
def objects() -> dict[str, dict]:
    app = cdk8s.App()
    triton = TritonChart(app, "triton", props=PROPS)
    nvidia = NvidiaDevicePluginChart(app, "nvidia")
    return {o["kind"]: o for o in [*triton.to_json(), *nvidia.to_json()]}


def pod(objects: dict[str, dict]) -> dict:
    return objects["Deployment"]["spec"]["template"]["spec"]


def test_every_object_validates_against_kubernetes_1_35(objects: dict[str, dict]) -> None:
    assert set(objects) == {
        "Namespace", "ServiceAccount", "Deployment", "Service", "HorizontalPodAutoscaler",
        "PodDisruptionBudget", "DaemonSet", "NetworkPolicy",
    }
    for obj in objects.values():
        kubernetes_validate.validate(obj, "1.35.0", strict=True)


def test_init_containers_fetch_exactly_the_configured_archives(objects: dict[str, dict]) -> None:
    fetch, unpack = pod(objects)["initContainers"]
    script = fetch["command"][2]
    assert fetch["command"][:2] == ["sh", "-ec"]
    # The exact version by its key; the logical name through a listing of its versions.
    sources = [w for w in shlex.split(script) if w.startswith("s3://")]
    assert sources == [
        "s3://models-bucket/$key",
        "s3://models-bucket/models/model_onnx_python-v0123abcd.tar.gz",
    ]
    assert "--prefix models/model_tf_dali-v " in script
    # python3 -I -c <archive_safety.py> DEST ARCHIVE... (tests/platform/test_archive_safety.py
    # runs this command on real and malicious archives)
    assert unpack["command"][:3] == ["python3", "-I", "-c"]
    assert unpack["command"][4:] == [
        "/models", "/archives/model_tf_dali.tar.gz", "/archives/model_onnx_python.tar.gz"
    ]


FAKE_AWS = """#!/bin/sh
# Stand-in for the AWS CLI: prints LISTING for list-objects-v2, records cp's arguments.
case "$1 $2" in
  "s3api list-objects-v2") printf '%b' "$LISTING" ;;
  "s3 cp") echo "$4 $5" >> "$COPIED" ;;
  *) exit 2 ;;
esac
"""


@pytest.mark.parametrize(
    ("listing", "copied"),
    [
        # The newest LastModified wins, whatever the hash order; other logical names whose
        # name starts the same ('model_tf_dali-vision') and non-archives are ignored.
        (
            "2026-11-02T10:00:00+00:00\tmodels/model_tf_dali-vffffffff.tar.gz\n"
            "2026-11-03T09:00:00+00:00\tmodels/model_tf_dali-v00000000.tar.gz\n"
            "2026-11-04T09:00:00+00:00\tmodels/model_tf_dali-vision-v11111111.tar.gz\n"
            "2026-11-05T09:00:00+00:00\tmodels/model_tf_dali-v22222222.tar.gz.tmp\n",
            "s3://models-bucket/models/model_tf_dali-v00000000.tar.gz /archives/model_tf_dali.tar.gz",
        ),
        ("None\n", None),  # no version uploaded: the pod fails to start, naming the archive
    ],
)
def test_a_logical_name_fetches_its_newest_version(tmp_path, listing: str, copied) -> None:
    import os
    import subprocess

    from ml_platform.k8s_charts.triton import fetch_command

    (tmp_path / "aws").write_text(FAKE_AWS)
    (tmp_path / "aws").chmod(0o755)
    log = tmp_path / "copied"
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "LISTING": listing,
           "COPIED": str(log)}
    script = fetch_command("models-bucket", "models/", "model_tf_dali")
    result = subprocess.run(["sh", "-ec", script], env=env, capture_output=True, text=True)
    if copied is None:
        assert result.returncode != 0
        assert "no version of model_tf_dali under s3://models-bucket/models/" in result.stderr
        assert not log.exists()
    else:
        assert result.returncode == 0, result.stderr
        assert log.read_text().split("\n")[0] == copied


def test_one_archive_fetches_only_that_archive() -> None:
    app = cdk8s.App()
    props = TritonChartProps(**{**PROPS.__dict__, "archives": ("model_onnx_python@v0123abcd",)})
    chart = TritonChart(app, "t", props=props)
    deployment = next(o for o in chart.to_json() if o["kind"] == "Deployment")
    script = deployment["spec"]["template"]["spec"]["initContainers"][0]["command"][2]
    assert [w for w in shlex.split(script) if w.startswith("s3://")] == [
        "s3://models-bucket/models/model_onnx_python-v0123abcd.tar.gz"
    ]
    args = server_argv(deployment["spec"]["template"]["spec"]["containers"][0])
    assert not [a for a in args if a.startswith("--load-model")]


def test_triton_loads_the_repository_and_refuses_model_control(objects: dict[str, dict]) -> None:
    """Mode none: every unpacked model loads at start; load/unload requests are refused."""
    (server,) = pod(objects)["containers"]
    assert server["image"] == "nvcr.io/nvidia/tritonserver:25.09-py3"
    args = server_argv(server)
    assert "--model-control-mode=none" in args
    assert not [a for a in args if a.startswith("--load-model") or "explicit" in a]


def test_unneeded_apis_are_restricted_and_grpc_is_off(objects: dict[str, dict]) -> None:
    """Triton's secure-deployment guide: the model-repository, shared-memory, logging, trace
    and statistics APIs sit behind a header whose value is random per container start (no
    client can know it); gRPC is off. Health stays open for the probes."""
    (server,) = pod(objects)["containers"]
    first, second = server_argv(server), server_argv(server)
    (restricted,) = [a for a in first if a.startswith("--http-restricted-api=")]
    apis, key = restricted.removeprefix("--http-restricted-api=").split(":")
    assert apis.split(",") == ["model-repository", "shared-memory", "logging", "trace", "statistics"]
    name, value = key.split("=")
    assert name == "triton-admin-key" and len(value) == 64 and int(value, 16) >= 0
    assert value not in " ".join(server["command"])  # drawn at start, not in the manifest
    (again,) = [a for a in second if a.startswith("--http-restricted-api=")]
    assert again != restricted
    assert "--allow-grpc=false" in first
    assert not [a for a in first if a.startswith("--grpc-restricted-protocol")]
    allow = next(o for o in objects_list() if o["metadata"]["name"] == "allow-serving")
    assert [p["port"] for p in allow["spec"]["ingress"][0]["ports"]] == [8000]


def objects_list(**props) -> list[dict]:
    app = cdk8s.App()
    return TritonChart(app, "t", props=TritonChartProps(**{**PROPS.__dict__, **props})).to_json()


def test_grpc_when_asked_is_restricted_too() -> None:
    objs = objects_list(grpc=True)
    deployment = next(o for o in objs if o["kind"] == "Deployment")
    (server,) = deployment["spec"]["template"]["spec"]["containers"]
    args = server_argv(server)
    assert "--allow-grpc=false" not in args
    (grpc,) = [a for a in args if a.startswith("--grpc-restricted-protocol=")]
    (http,) = [a for a in args if a.startswith("--http-restricted-api=")]
    assert grpc.split("=", 1)[1] == http.split("=", 1)[1]  # same groups, same key
    assert {p["name"] for p in server["ports"]} == {"http", "grpc", "metrics"}
    service = next(o for o in objs if o["kind"] == "Service")
    assert sorted(p["port"] for p in service["spec"]["ports"]) == [8000, 8001, 8002]
    allow = next(o for o in objs if o["metadata"]["name"] == "allow-serving")
    assert [p["port"] for p in allow["spec"]["ingress"][0]["ports"]] == [8000, 8001]


def test_probes_ports_gpu_and_shared_memory(objects: dict[str, dict]) -> None:
    spec = pod(objects)
    (server,) = spec["containers"]
    assert {p["name"]: p["containerPort"] for p in server["ports"]} == {
        "http": 8000, "metrics": 8002,
    }
    assert server["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    assert server["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": "http"}
    assert server["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert {"cpu", "memory"} <= set(server["resources"]["requests"])
    shm = next(v for v in spec["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"]["medium"] == "Memory"
    assert {"name": "dshm", "mountPath": "/dev/shm"} in server["volumeMounts"]
    assert spec["serviceAccountName"] == "triton"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert spec["nodeSelector"] == {"ml-platform/node-role": "gpu"}


def test_service_hpa_and_pdb(objects: dict[str, dict]) -> None:
    service = objects["Service"]["spec"]
    assert service["type"] == "ClusterIP"
    assert sorted(p["port"] for p in service["ports"]) == [8000, 8002]
    hpa = objects["HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 3)
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "triton"}
    assert objects["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1


def test_nvidia_plugin_only_on_gpu_nodes(objects: dict[str, dict]) -> None:
    spec = objects["DaemonSet"]["spec"]["template"]["spec"]
    assert spec["containers"][0]["image"] == NVIDIA_DEVICE_PLUGIN_IMAGE
    assert ":" in NVIDIA_DEVICE_PLUGIN_IMAGE and not NVIDIA_DEVICE_PLUGIN_IMAGE.endswith(":latest")
    assert spec["nodeSelector"] == {"ml-platform/node-role": "gpu"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]


def test_models_to_load_rejects_unknown_and_clashing_archives() -> None:
    for unknown in ("other", "model_tf_dali.tar.gz"):  # file names are no references
        with pytest.raises(ValueError, match=rf"{unknown}.*expected references to archives"):
            models_to_load([unknown])
    with pytest.raises(ValueError, match="appear twice"):
        models_to_load(["model_onnx_python", "model_onnx_python@v0123abcd"])
