"""Reading the Kubernetes objects a synthesized template applies to the cluster."""

from __future__ import annotations

import json
from typing import Any

import cdk8s

from ml_platform.config import Settings
from ml_platform.stacks.training_cluster import cluster_charts

KUBERNETES_RESOURCE = "Custom::AWSCDK-EKS-KubernetesResource"
HELM_CHART = "Custom::AWSCDK-EKS-HelmChart"
PRUNE_LABEL_PREFIX = "aws.cdk.eks/prune-"

# Placeholders of the token-free chart copies.
FILE_SYSTEM_ID = "fs-0123456789abcdef0"
FILE_SYSTEM_DNS = f"{FILE_SYSTEM_ID}.fsx.us-west-2.amazonaws.com"
FILE_SYSTEM_MOUNT = "abcdefgh"


def _token(part: Any) -> str:
    """A JSON-safe stand-in for a CloudFormation expression inside a manifest string."""
    if isinstance(part, dict) and "Fn::ImportValue" in part:
        return f"<import:{part['Fn::ImportValue']}>"
    return "<token>"


def manifest_objects(resource: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects of one ``Custom::AWSCDK-EKS-KubernetesResource``; tokens inside a
    ``Fn::Join`` become ``<import:EXPORT>`` (or ``<token>``) strings."""
    manifest = resource["Properties"]["Manifest"]
    if isinstance(manifest, dict):
        delimiter, parts = manifest["Fn::Join"]
        manifest = delimiter.join(p if isinstance(p, str) else _token(p) for p in parts)
    return json.loads(manifest)


def manifests_by_id(template: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {
        logical_id: manifest_objects(r)
        for logical_id, r in template["Resources"].items()
        if r["Type"] == KUBERNETES_RESOURCE
    }


def all_objects(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for objects in manifests_by_id(template).values() for o in objects]


def key(obj: dict[str, Any]) -> tuple[str, str, str | None, str]:
    meta = obj["metadata"]
    return obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"]


def without_prune_labels(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without the labels aws-cdk adds for pruning (and an emptied labels map)."""
    out = json.loads(json.dumps(obj))
    labels = out["metadata"].get("labels", {})
    for name in [n for n in labels if n.startswith(PRUNE_LABEL_PREFIX)]:
        del labels[name]
    if "labels" in out["metadata"] and not labels:
        del out["metadata"]["labels"]
    return out


def token_free_charts(settings: Settings) -> dict[str, list[dict[str, Any]]]:
    """The objects of every cluster chart, built with placeholders instead of tokens."""
    charts = cluster_charts(
        cdk8s.App(),
        settings,
        file_system_id=FILE_SYSTEM_ID,
        file_system_dns_name=FILE_SYSTEM_DNS,
        file_system_mount_name=FILE_SYSTEM_MOUNT,
    )
    return {name: chart.to_json() for name, chart in charts.items()}
