"""Every image the cluster pulls goes through the image policy: digests beside tags, the
registry mirror, IfNotPresent; synthesis warns about each image still pinned by tag only;
the settings refuse malformed mirrors and digests."""

from __future__ import annotations

import json
from typing import Any

import cdk8s
import pytest

from ml_platform.config import CONTEXT_KEY, Settings, SettingsError, deep_merge
from ml_platform.image_pins import (
    DOCKER_HUB_WARNING,
    PUBLIC_DIGESTS,
    TAG_ONLY_WARNING,
    ImagePolicy,
    ImageReference,
    docker_hub_direct,
)
from ml_platform.k8s_charts.triton import TritonChart, TritonChartProps
from ml_platform.k8s_charts.volcano import volcano_helm_values
from ml_platform.k8s_charts.workloads import (
    DATASET_FILE,
    TENSORBOARD_FILE,
    build_workload_manifests,
    image_warnings,
)
from ml_platform.stacks.training_cluster import ClusterChartValues, cluster_charts
from ml_platform.versions import NEURON_DEVICE_PLUGIN_IMAGE, efa_device_plugin_image
from tests.support import SynthesizedPlatform, cdk_json_context

ECR = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
MIRRORS = {
    "docker.io": f"{ECR}/docker-hub",
    "public.ecr.aws": f"{ECR}/ecr-public",
    "nvcr.io": f"{ECR}/nvidia",
}


def _d(n: int) -> str:
    return "sha256:" + f"{n:x}" * 64


def _with_images(images: dict[str, Any]) -> Settings:
    """cdk.json's settings with ``images`` set."""
    return Settings.from_context(deep_merge(cdk_json_context()[CONTEXT_KEY], {"images": images}))


def _containers(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for obj in objects:
        spec = obj.get("spec", {}).get("template", {}).get("spec", {})
        out += spec.get("initContainers", []) + spec.get("containers", [])
    return out


def test_policy_adds_digest_and_mirror_and_keeps_the_tag() -> None:
    tensorboard = "docker.io/tensorflow/tensorflow:2.20.0"
    policy = ImagePolicy(digests={tensorboard: _d(1)}, mirrors=MIRRORS)
    assert policy.resolve(tensorboard) == f"{ECR}/docker-hub/tensorflow/tensorflow:2.20.0@{_d(1)}"
    # Unknown digest: the mirror only; an image of a registry with no mirror: unchanged.
    assert policy.resolve("quay.io/coreos/etcd:v3.5.33") == "quay.io/coreos/etcd:v3.5.33"
    # No setting: the digest a public source states (PUBLIC_DIGESTS), behind the mirror.
    assert policy.resolve(NEURON_DEVICE_PLUGIN_IMAGE) == (
        f"{ECR}/ecr-public/neuron/neuron-device-plugin:2.32.0.0@sha256:"
        "64d7473b547bec24d3683adeba5d98a17be1929b263e99695607c7e31270faf8"
    )
    # A digest in the pin itself is kept (and wins).
    pinned = f"nvcr.io/nvidia/k8s-device-plugin:v0.20.0@{_d(2)}"
    assert (
        ImagePolicy(digests={"nvcr.io/nvidia/k8s-device-plugin:v0.20.0": _d(3)}).resolve(pinned)
        == pinned
    )
    assert ImagePolicy().tag_only([tensorboard, pinned, *PUBLIC_DIGESTS]) == [tensorboard]
    for text in ("tensorflow/tensorflow:2.20.0", "docker.io/Tensorflow:1", "docker.io/a:b c"):
        with pytest.raises(ValueError, match="expected an image reference"):
            ImageReference.parse(text)


def test_cluster_charts_pull_through_the_policy(settings: Settings) -> None:
    neuron_digest, efa_digest = _d(4), _d(5)
    efa = efa_device_plugin_image(settings.env.region)
    custom = _with_images(
        {
            "mirrors": MIRRORS,
            "digests": {NEURON_DEVICE_PLUGIN_IMAGE: neuron_digest, efa: efa_digest},
        }
    )
    charts = cluster_charts(
        cdk8s.App(),
        custom,
        file_system_id="fs-0123456789abcdef0",
        file_system_dns_name="fs.example",
        file_system_mount_name="abcd",
    )
    (efa_container,) = _containers(list(charts["EfaPlugin"].to_json()))
    # The Neuron plugin is a Helm release: its image as Neuron's chart writes it,
    # "<repository>:<tag>" (templates/_helpers.tpl, neuron-device-plugin.fullimage).
    neuron = ClusterChartValues.from_settings(custom).neuron_helm_values()["devicePlugin"]
    assert f"{neuron['image']['repository']}:{neuron['image']['tag']}" == (
        f"{ECR}/ecr-public/neuron/neuron-device-plugin:2.32.0.0@{neuron_digest}"
    )
    # ECR images (the EKS registry) have no mirror setting: digest only.
    assert efa_container["image"] == f"{efa}@{efa_digest}"
    assert {neuron["image"]["pullPolicy"], efa_container["imagePullPolicy"]} == {"IfNotPresent"}


def test_volcano_values_take_the_mirror_and_digests() -> None:
    scheduler = "docker.io/volcanosh/vc-scheduler:v1.15.1"
    values = volcano_helm_values(images=ImagePolicy(digests={scheduler: _d(6)}, mirrors=MIRRORS))
    basic = values["basic"]
    assert basic["image_registry"] == f"{ECR}/docker-hub"
    assert basic["scheduler_image_tag_version"] == f"v1.15.1@{_d(6)}"
    public = PUBLIC_DIGESTS["docker.io/volcanosh/vc-controller-manager:v1.15.1"]
    assert basic["controller_image_tag_version"] == f"v1.15.1@{public}"
    assert basic["image_pull_policy"] == "IfNotPresent"


def test_triton_chart_pulls_through_the_policy() -> None:
    props = dict(
        bucket_name="b",
        model_prefix="models/",
        archives=("model_tf_dali",),
        triton_version="24.09",
        region="us-west-2",
    )
    triton = "nvcr.io/nvidia/tritonserver:24.09-py3"
    policy = ImagePolicy(digests={triton: _d(7)}, mirrors=MIRRORS)
    chart = TritonChart(cdk8s.App(), "t", props=TritonChartProps(**props, images=policy))
    images = {c["name"]: c["image"] for c in _containers(list(chart.to_json()))}
    assert (
        images["tritonserver"]
        == images["unpack-archives"]
        == (f"{ECR}/nvidia/nvidia/tritonserver:24.09-py3@{_d(7)}")
    )
    assert images["fetch-archives"] == f"{ECR}/ecr-public/aws-cli/aws-cli:2.36.49"


def test_tensorboard_manifest_pulls_through_the_policy(settings: Settings) -> None:
    tensorboard = "docker.io/tensorflow/tensorflow:2.20.0"
    custom = _with_images({"mirrors": MIRRORS, "digests": {tensorboard: _d(8)}})
    (container,) = _containers(build_workload_manifests(custom)[TENSORBOARD_FILE])
    assert container["image"] == f"{ECR}/docker-hub/tensorflow/tensorflow:2.20.0@{_d(8)}"
    assert container["imagePullPolicy"] == "IfNotPresent"


def test_dataset_job_pulls_every_step_through_the_policy() -> None:
    """Issue 34, finding 7: the dataset Job's prepare, download and extract images stayed on
    the public registries by tag whatever images.mirrors and images.digests said. Issue 32:
    the hf-cache step ran the multi-GB training image; it now pulls a slim Python image
    through the same policy."""
    steps = {
        "prepare": ("public.ecr.aws/docker/library/busybox:1.37.0", "ecr-public", _d(4)),
        "download": ("public.ecr.aws/aws-cli/aws-cli:2.36.49", "ecr-public", _d(5)),
        "extract": ("docker.io/tensorflow/tensorflow:2.20.0", "docker-hub", _d(6)),
        "hf-cache": ("public.ecr.aws/docker/library/python:3.12.14-slim", "ecr-public", _d(9)),
    }
    custom = _with_images(
        {"mirrors": MIRRORS, "digests": {image: d for image, _, d in steps.values()}}
    )
    images = {
        c["name"]: c["image"] for c in _containers(build_workload_manifests(custom)[DATASET_FILE])
    }
    for step, (image, mirror, digest) in steps.items():
        assert images[step] == f"{ECR}/{mirror}/{image.split('/', 1)[1]}@{digest}", step
    assert custom.training_image_uri not in images.values()


def test_the_workloads_warn_about_tag_only_and_docker_hub_images(settings: Settings) -> None:
    warnings = image_warnings(settings)
    assert any(
        "pinned by tag only" in w and "public.ecr.aws/docker/library/busybox:1.37.0" in w
        for w in warnings
    )
    (hub,) = [w for w in warnings if "Docker Hub images pulled directly" in w]
    assert "docker.io/tensorflow/tensorflow:2.20.0" in hub and "mlp images mirror" in hub
    mirrored = _with_images({"mirrors": {"docker.io": f"{ECR}/docker-hub"}})
    assert not [w for w in image_warnings(mirrored) if "Docker Hub" in w]


def test_synthesis_warns_while_docker_hub_images_are_pulled_directly(
    synth: SynthesizedPlatform,
) -> None:
    metadata = json.loads(
        (synth.outdir / f"{synth.stack_name('TrainingCluster')}.metadata.json").read_text()
    )
    found = [
        e["data"]
        for entries in metadata.values()
        for e in entries
        if e["type"] == "aws:cdk:warning" and DOCKER_HUB_WARNING in e["data"]
    ]
    (warning,) = found
    for image in ("docker.io/volcanosh/vc-scheduler:v1.15.1", "docker.io/tensorflow/tensorflow"):
        assert image in warning
    policy = ImagePolicy(mirrors={"docker.io": f"{ECR}/docker-hub"})
    assert docker_hub_direct(["docker.io/volcanosh/vc-scheduler:v1.15.1"], policy) == []


def _warnings(synth: SynthesizedPlatform, stack: str) -> dict[str, list[str]]:
    metadata = json.loads((synth.outdir / f"{synth.stack_name(stack)}.metadata.json").read_text())
    return {
        path: [
            e["data"]
            for e in entries
            if e["type"] == "aws:cdk:warning" and TAG_ONLY_WARNING in e["data"]
        ]
        for path, entries in metadata.items()
        if any(e["type"] == "aws:cdk:warning" and TAG_ONLY_WARNING in e["data"] for e in entries)
    }


def test_synthesis_warns_about_each_image_pinned_by_tag_only(synth: SynthesizedPlatform) -> None:
    warned = _warnings(synth, "TrainingCluster")
    by_construct = {path.rsplit("/", 1)[-1]: messages for path, messages in warned.items()}
    # The Neuron plugin's digest is public (PUBLIC_DIGESTS): no warning for it.
    assert "chart-Neuron" not in by_construct
    assert not any(NEURON_DEVICE_PLUGIN_IMAGE in m for ms in warned.values() for m in ms)
    efa, triton = (by_construct[k] for k in ("EfaPlugin", "Triton"))
    assert "eks/aws-efa-k8s-device-plugin:v0.5.20" in efa[0]
    for image in (
        "nvcr.io/nvidia/tritonserver:25.09-py3",
        "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
        "public.ecr.aws/aws-cli/aws-cli:2.36.49",
    ):
        assert image in triton[0]
    # Volcano's three images have public digests: no warning on its chart.
    assert not any("volcano" in path.lower() for path in warned)
    assert "mlp images resolve" in efa[0]


@pytest.mark.parametrize(
    ("images", "problem"),
    [
        ({"mirrors": {"ghcr.io": f"{ECR}/gh"}}, "images.mirrors.ghcr.io: unknown registry"),
        (
            {"mirrors": {"docker.io": "https://mirror.example/"}},
            "images.mirrors.docker.io = 'https://mirror.example/': expected a registry host",
        ),
        ({"mirrors": {"docker.io": "docker.io/library"}}, "a mirror must be another registry"),
        (
            {"mirrors": ["docker.io"]},
            "images.mirrors = ['docker.io']: expected an object of strings",
        ),
        ({"digests": {"tensorflow/tensorflow:2.20.0": _d(1)}}, "expected an image reference"),
        (
            {"digests": {"docker.io/tensorflow/tensorflow": _d(1)}},
            "expected 'registry/repository:tag'",
        ),
        (
            {"digests": {"docker.io/tensorflow/tensorflow:2.20.0": "sha256:abc"}},
            "expected 'sha256:' and 64 lower-case hex digits",
        ),
        ({"digests": {"docker.io/tensorflow/tensorflow:2.20.0": 5}}, "= 5: expected a string"),
    ],
)
def test_image_settings_are_checked(images: dict[str, Any], problem: str) -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_context({"images": images})
    assert any(problem in p for p in info.value.problems), info.value.problems
