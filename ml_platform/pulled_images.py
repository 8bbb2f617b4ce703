"""Every image the platform pulls, for ``mlp images`` and the check of ``images.digests``.

Imports the image constants of the charts, training and the Triton releases; :mod:`ml_platform.config` imports it only
when ``images.digests`` is set.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["images_digests_may_pin", "platform_images"]


def platform_images(settings: Any) -> list[str]:
    """Every image the platform pulls with ``settings``, as pinned (tag, sometimes a digest)."""
    from ml_platform.k8s_charts.nvidia import NVIDIA_DEVICE_PLUGIN_IMAGE
    from ml_platform.training.images import (
        AWS_CLI_IMAGE,
        BUSYBOX_IMAGE,
        DATASET_TOOLS_IMAGE,
        HF_SEED_IMAGE,
        NEURON_TRAINING_BASE_IMAGE,
        TENSORBOARD_IMAGE,
    )
    from ml_platform.triton.releases import triton_image
    from ml_platform.versions import (
        NEURON_DEVICE_PLUGIN_IMAGE,
        VOLCANO_IMAGES,
        efa_device_plugin_image,
    )

    images: list[str] = []
    if settings.features.training_cluster:
        images += [
            NEURON_DEVICE_PLUGIN_IMAGE,
            efa_device_plugin_image(settings.env.region),
            *VOLCANO_IMAGES.values(),
            TENSORBOARD_IMAGE,
            # The dataset Job's steps (prepare, download, extract, hf-cache).
            BUSYBOX_IMAGE,
            AWS_CLI_IMAGE,
            DATASET_TOOLS_IMAGE,
            HF_SEED_IMAGE,
            # The base of the training image (`make image` builds FROM it by this digest).
            NEURON_TRAINING_BASE_IMAGE,
        ]
    if settings.features.triton_on_eks:
        images += [
            AWS_CLI_IMAGE,
            triton_image(settings.inference.triton_version),
            NVIDIA_DEVICE_PLUGIN_IMAGE,
        ]
    return list(dict.fromkeys(images))


def images_digests_may_pin(settings: Any) -> list[str]:
    """The images an ``images.digests`` entry may name with ``settings``: what the platform
    pulls with every feature on (the region's and the Triton release's images, the dataset
    Job's among them)."""
    features = dataclasses.replace(
        settings.features, training_cluster=True, triton_on_eks=True, inference=True
    )
    every = platform_images(dataclasses.replace(settings, features=features))
    return every
