"""The workload charts take explicit props (no Settings), so other apps can render them."""

from __future__ import annotations

import cdk8s

from ml_platform.k8s_charts.workloads_dataset import DatasetCopyChart
from ml_platform.k8s_charts.workloads_tensorboard import TensorBoardChart


def _zone(pod_spec: dict) -> list[str]:
    """The AZs a pod is REQUIRED to run in (issue 32: a preference let the scheduler put a
    helper pod in another AZ than FSx's); no preferred term is left."""
    terms = pod_spec["affinity"]["nodeAffinity"]
    assert set(terms) == {"requiredDuringSchedulingIgnoredDuringExecution"}
    (term,) = terms["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (expression,) = term["matchExpressions"]
    assert expression["key"] == "topology.kubernetes.io/zone"
    assert expression["operator"] == "In"
    return list(expression["values"])


def test_charts_render_from_plain_props() -> None:
    app = cdk8s.App()
    dataset = DatasetCopyChart(
        app, "Dataset", namespace="research", trainium_az="us-east-1f", region="us-east-1"
    )
    board = TensorBoardChart(app, "Board", namespace="research", trainium_az="us-east-1f")
    tools, job = dataset.to_json()
    assert tools["kind"] == "ConfigMap" and tools["metadata"]["namespace"] == "research"
    assert job["metadata"]["namespace"] == "research"
    pod = job["spec"]["template"]["spec"]
    assert _zone(pod) == ["us-east-1f"]
    assert pod["nodeSelector"] == {"ml-platform/node-role": "system"}
    env = {
        e["name"]: e.get("value")
        for c in pod["containers"] + pod.get("initContainers", [])
        for e in c.get("env", [])
    }
    assert env["AWS_REGION"] == "us-east-1"
    deployment = next(o for o in board.to_json() if o["kind"] == "Deployment")
    assert deployment["metadata"]["namespace"] == "research"
    board_pod = deployment["spec"]["template"]["spec"]
    assert _zone(board_pod) == ["us-east-1f"]
    assert board_pod["nodeSelector"] == {"ml-platform/node-role": "system"}
