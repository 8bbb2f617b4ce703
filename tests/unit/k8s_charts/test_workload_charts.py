"""The workload charts take explicit props (no Settings), so other apps can render them."""

from __future__ import annotations

import cdk8s

from ml_platform.k8s_charts.workloads_dataset import DatasetCopyChart
from ml_platform.k8s_charts.workloads_tensorboard import TensorBoardChart


def _zone(pod_spec: dict) -> list[str]:
    terms = pod_spec["affinity"]["nodeAffinity"]
    required = terms.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required:
        (term,) = required["nodeSelectorTerms"]
        return [v for e in term["matchExpressions"] for v in e["values"]]
    return [
        v
        for t in terms["preferredDuringSchedulingIgnoredDuringExecution"]
        for e in t["preference"]["matchExpressions"]
        for v in e["values"]
    ]


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
    assert "us-east-1f" in _zone(pod)
    env = {
        e["name"]: e.get("value")
        for c in pod["containers"] + pod.get("initContainers", [])
        for e in c.get("env", [])
    }
    assert env["AWS_REGION"] == "us-east-1"
    deployment = next(o for o in board.to_json() if o["kind"] == "Deployment")
    assert deployment["metadata"]["namespace"] == "research"
    assert "us-east-1f" in _zone(deployment["spec"]["template"]["spec"])
