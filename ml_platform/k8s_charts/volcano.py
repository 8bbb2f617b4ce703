"""Volcano, the gang scheduler the training jobs are submitted to, and the jobs' queue.

Volcano itself comes from its pinned Helm chart (its CRDs are too large to inline in a
CloudFormation template); :func:`volcano_helm_values` places its components. The Queue is a
cdk8s object applied after the chart, once the CRD exists.
"""

from __future__ import annotations

__all__ = [
    "VolcanoQueueChart",
    "volcano_helm_values",
]

from collections.abc import Mapping
from typing import Any

import cdk8s
from constructs import Construct

from ml_platform.image_pins import DEFAULT_POLICY, ImagePolicy
from ml_platform.k8s_names import NODE_ROLE_LABEL
from ml_platform.versions import VOLCANO_IMAGE_REGISTRY, VOLCANO_IMAGES

QUEUE_API_VERSION = "scheduling.volcano.sh/v1beta1"
_K8S_NAME_MAX = 253


def volcano_helm_values(
    node_selector: Mapping[str, str] | None = None, images: ImagePolicy = DEFAULT_POLICY
) -> dict[str, Any]:
    """Helm values for the volcano chart: admission, controllers and scheduler on the given
    nodes (``custom.default_ns``; default: the system node group), their images from
    ``images``' mirror of Docker Hub, each pinned by digest where one is known
    (``basic.<component>_image_tag_version`` = ``<tag>@sha256:...``), pulled only when
    absent from the node (the chart's default is ``Always``: a Docker Hub request on every
    pod start, which anonymous rate limits refuse)."""
    selector = dict(node_selector) if node_selector is not None else {NODE_ROLE_LABEL: "system"}
    basic: dict[str, Any] = {
        "image_registry": images.registry(VOLCANO_IMAGE_REGISTRY),
        "image_pull_policy": "IfNotPresent",
    }
    for component, image in VOLCANO_IMAGES.items():
        tag = image.rsplit(":", 1)[1]
        digest = images.digest(image)
        basic[f"{component}_image_tag_version"] = f"{tag}@{digest}" if digest else tag
    return {"basic": basic, "custom": {"default_ns": selector}}


class VolcanoQueueChart(cdk8s.Chart):
    """One cluster-scoped Volcano ``Queue``.

    No ``capability`` is set: a cpu capability blocks pods that request CPU.

    Args:
        queue: Queue name. Required.
        weight: Share of the cluster among queues, 1 to 65535. Default 1.
        reclaimable: Whether other queues may reclaim resources it over-uses. Default true.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        queue: str,
        weight: int = 1,
        reclaimable: bool = True,
    ) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        errors = []
        if not queue or len(queue) > _K8S_NAME_MAX:
            errors.append(f"queue={queue!r}: expected a Kubernetes object name")
        if not 1 <= weight <= 65535:
            errors.append(f"weight={weight}: expected 1 to 65535")
        if errors:
            raise ValueError(f"{self.node.path}: " + "; ".join(errors))
        self.queue = cdk8s.ApiObject(
            self,
            "Queue",
            api_version=QUEUE_API_VERSION,
            kind="Queue",
            metadata=cdk8s.ApiObjectMetadata(
                name=queue, labels={"app.kubernetes.io/part-of": "ml-platform"}
            ),
        )
        self.queue.add_json_patch(
            cdk8s.JsonPatch.add("/spec", {"weight": weight, "reclaimable": reclaimable})
        )
