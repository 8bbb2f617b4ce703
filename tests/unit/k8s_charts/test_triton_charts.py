"""Triton and NVIDIA device-plugin charts, token-free, validated against Kubernetes 1.35."""

from __future__ import annotations

import shlex

import cdk8s
import kubernetes_validate
import pytest

from ml_platform.k8s_charts.nvidia import NVIDIA_DEVICE_PLUGIN_IMAGE, NvidiaDevicePluginChart
from ml_platform.k8s_charts.triton import TritonChart, TritonChartProps, models_to_load
from tests.helpers.triton_eks_support import server_argv

PROPS = TritonChartProps(
    bucket_name="models-bucket",
    model_prefix="models/",
    archives=("model_tf_dali", "model_onnx_python@v0123abcd"),
    triton_version="25.09",
    region="us-west-2",
    replicas=1,
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
        "Namespace",
        "ServiceAccount",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "DaemonSet",
        "NetworkPolicy",
    }
    for obj in objects.values():
        kubernetes_validate.validate(obj, "1.35.0", strict=True)


def test_init_containers_fetch_exactly_the_configured_archives(objects: dict[str, dict]) -> None:
    fetch, unpack = pod(objects)["initContainers"]
    script = fetch["command"][2]
    assert fetch["command"][:2] == ["sh", "-ec"]
    # The exact version by its key; the logical name through a listing of its versions.
    keys = [w for w in shlex.split(script) if w.startswith("key=")]
    assert keys[1] == "key=models/model_onnx_python-v0123abcd.tar.gz"
    assert "--prefix models/model_tf_dali-v " in script
    # Size and recorded SHA-256 are read first, the download is pinned to that object and
    # verified (tests/e2e/k8s_charts/test_archive_fetch.py runs the script against moto).
    assert script.count("aws s3api head-object") == 2
    assert script.count("--if-match") == 2 and script.count("sha256sum -c") == 2
    # python3 -I -c <archive_safety.py> DEST ARCHIVE... (tests/unit/triton/test_archive_safety.py
    # runs this command on real and malicious archives)
    assert unpack["command"][:3] == ["python3", "-I", "-c"]
    assert unpack["command"][4:] == [
        "/models",
        "/archives/model_tf_dali.tar.gz",
        "/archives/model_onnx_python.tar.gz",
    ]


def test_one_archive_fetches_only_that_archive() -> None:
    app = cdk8s.App()
    props = TritonChartProps(**{**PROPS.__dict__, "archives": ("model_onnx_python@v0123abcd",)})
    chart = TritonChart(app, "t", props=props)
    deployment = next(o for o in chart.to_json() if o["kind"] == "Deployment")
    script = deployment["spec"]["template"]["spec"]["initContainers"][0]["command"][2]
    assert [w for w in shlex.split(script) if w.startswith("key=")] == [
        "key=models/model_onnx_python-v0123abcd.tar.gz"
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
    assert apis.split(",") == [
        "model-repository",
        "shared-memory",
        "logging",
        "trace",
        "statistics",
    ]
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
        "http": 8000,
        "metrics": 8002,
    }
    assert server["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    assert server["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": "http"}
    assert server["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert {"cpu", "memory"} <= set(server["resources"]["requests"])
    shm = next(v for v in spec["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"]["medium"] == "Memory"
    assert {"name": "dshm", "mountPath": "/dev/shm"} in server["volumeMounts"]
    assert spec["serviceAccountName"] == "triton"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]
    assert spec["nodeSelector"] == {"ml-platform/node-role": "gpu"}


def test_service_pdb_and_no_autoscaler(objects: dict[str, dict]) -> None:
    """Fixed replicas (docs/serving-eks.md "Sizing, not autoscaling": no metrics-server, no node
    autoscaler), replaced one at a time: a surge pod would find no free GPU."""
    service = objects["Service"]["spec"]
    assert service["type"] == "ClusterIP"
    assert sorted(p["port"] for p in service["ports"]) == [8000, 8002]
    assert "HorizontalPodAutoscaler" not in objects
    spec = objects["Deployment"]["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
    }
    assert objects["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1


def test_no_api_token_and_bounded_scratch_volumes(objects: dict[str, dict]) -> None:
    """Nothing in the pod calls the Kubernetes API; Pod Identity brings its own token. Every
    emptyDir has a sizeLimit: two archives of at most 4 GiB, unpacked at most 16 GiB each."""
    assert objects["ServiceAccount"]["automountServiceAccountToken"] is False
    spec = pod(objects)
    assert spec["automountServiceAccountToken"] is False
    limits = {v["name"]: v["emptyDir"].get("sizeLimit") for v in spec["volumes"]}
    assert limits == {"archives": "8Gi", "models": "32Gi", "tmp": "256Mi", "dshm": "2Gi"}


def test_nvidia_plugin_only_on_gpu_nodes(objects: dict[str, dict]) -> None:
    spec = objects["DaemonSet"]["spec"]["template"]["spec"]
    assert spec["containers"][0]["image"] == NVIDIA_DEVICE_PLUGIN_IMAGE
    assert ":" in NVIDIA_DEVICE_PLUGIN_IMAGE and not NVIDIA_DEVICE_PLUGIN_IMAGE.endswith(":latest")
    assert spec["nodeSelector"] == {"ml-platform/node-role": "gpu"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]


def test_models_to_load_rejects_unknown_and_clashing_archives() -> None:
    for unknown in ("other", "model_tf_dali.tar.gz"):  # file names are no references
        with pytest.raises(ValueError, match=rf"{unknown}.*expected references to archives"):
            models_to_load([unknown])
    with pytest.raises(ValueError, match="appear twice"):
        models_to_load(["model_onnx_python", "model_onnx_python@v0123abcd"])


def test_the_autoscaling_maxima_are_gone_with_a_reason() -> None:
    from ml_platform.config import Settings, SettingsError

    with pytest.raises(SettingsError) as error:
        Settings.from_context(
            {
                "triton_on_eks": {
                    "max_replicas": 4,
                    "max_gpu_nodes": 4,
                    "replicas": 2,
                    "gpu_nodes": 1,
                }
            }
        )
    text = str(error.value)
    assert (
        "triton_on_eks.max_replicas: removed: Triton on EKS runs a fixed number of replicas" in text
    )
    assert "triton_on_eks.max_gpu_nodes: removed: the GPU node group is sized by" in text
    assert (
        "triton_on_eks.replicas = 2: expected 1 to gpu_nodes (1): each replica takes a "
        "whole single-GPU node"
    ) in text


def test_the_chart_takes_keywords_and_props_alike() -> None:
    """Keywords like the other charts; ``props=`` (deprecated) gives the same manifest, and
    the two together are refused."""
    app = cdk8s.App()
    by_keywords = TritonChart(
        app,
        "k",
        bucket_name="models-bucket",
        model_prefix="models/",
        archives=["model_tf_dali", "model_onnx_python@v0123abcd"],
        triton_version="25.09",
        region="us-west-2",
        replicas=1,
    )
    assert by_keywords.props == PROPS
    assert by_keywords.to_json() == TritonChart(app, "p", props=PROPS).to_json()
    with pytest.raises(TypeError, match=r"props= or keywords, not both \(got \['replicas'\]\)"):
        TritonChart(app, "both", props=PROPS, replicas=2)  # type: ignore[call-overload]  # the refused mix


def test_a_surge_keeps_the_old_pod_serving_until_the_new_one_is_ready() -> None:
    """max_surge 1 (a spare GPU node): Kubernetes starts the new pod first and stops none
    before it is ready (maxUnavailable 0), so one replica rolls out without an outage; both
    values pass the Deployment schema of Kubernetes 1.35."""
    surged = objects_list(max_surge=1)
    (deployment,) = [o for o in surged if o["kind"] == "Deployment"]
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    kubernetes_validate.validate(deployment, "1.35", strict=True)
