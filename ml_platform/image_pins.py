"""Container image references as the cluster pulls them: a digest beside each tag, and the
registry mirror that replaces a public registry.

A tag can be moved to other content at any time; a digest names the content itself. The
pins stay where they are (``ml_platform/versions.py``, ``ml_platform/training/images.py``,
``ml_platform/k8s_charts/``); this module turns a pinned ``registry/repository:tag`` into
``<mirror>/repository:tag@sha256:...`` with:

- :data:`PUBLIC_DIGESTS`: digests a public source states, each cited;
- the ``images.digests`` setting, which ``mlp images resolve`` writes from the registries
  themselves (it wins over :data:`PUBLIC_DIGESTS`);
- the ``images.mirrors`` setting: a registry the user owns (for example an ECR pull-through
  cache) in place of a public one, so pulls do not meet anonymous rate limits.

With both a tag and a digest, the container runtime pulls by the digest; the tag stays for
people reading the manifest.
https://kubernetes.io/docs/concepts/containers/images/#image-names
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_POLICY",
    "DIGEST",
    "DOCKER_HUB_WARNING",
    "MIRRORABLE_REGISTRIES",
    "PUBLIC_DIGESTS",
    "TAG_ONLY_WARNING",
    "ImagePolicy",
    "ImageReference",
    "docker_hub_direct",
    "docker_hub_warning",
    "warn_docker_hub",
    "warn_tag_only",
]

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ml_platform.limits import shown

# The public registries whose images the platform pulls, which a mirror may replace.
MIRRORABLE_REGISTRIES = ("docker.io", "public.ecr.aws", "nvcr.io", "quay.io")

# name[:tag][@sha256:digest], with an explicit registry host (every pin here names one).
_REFERENCE = re.compile(
    r"(?P<registry>[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?)"
    r"/(?P<repository>[a-z0-9]+([._/-][a-z0-9]+)*)"
    r"(:(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(@(?P<digest>sha256:[0-9a-f]{64}))?"
)
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# A mirror: a registry host and optional path prefix, without scheme, tag or trailing slash.
MIRROR = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*")

# Digests stated by a public source. Volcano v1.15.1's three images as a public deployment
# record lists them running (linux/amd64, the system nodes' architecture):
# https://github.com/csmVIc/kube-scheduling-perf/blob/b2fd509cabfd837e34fe9439d5855c32c531c710/CLUSTER_DEPLOYMENT_RECORD.md
# (section 11). The Neuron device plugin 2.32.0.0 as a public record shows it running from
# Neuron's chart 1.10.0 on an EKS node (`kubectl describe pod`, "Image ID"):
# https://github.com/sirzzang/sirzzang.github.io/blob/d7607fa7142df4ebce7b55b1b17cc9c5d542ca62/_posts/2026-09-11-Kubernetes-LLM-Serving-Optimization-08-02-02-Neuron-Device-Exposure.md
# `mlp images resolve` checks them against their registries and records what each answers; no
# other pinned image has a digest stated in a public source found.
PUBLIC_DIGESTS: dict[str, str] = {
    "public.ecr.aws/neuron/neuron-device-plugin:2.32.0.0": (
        "sha256:64d7473b547bec24d3683adeba5d98a17be1929b263e99695607c7e31270faf8"
    ),
    "docker.io/volcanosh/vc-scheduler:v1.15.1": (
        "sha256:e79dc85279b5fd2c5e431571b4683f819ff0dfeacdf230fca49e6ce1f4509ae1"
    ),
    "docker.io/volcanosh/vc-controller-manager:v1.15.1": (
        "sha256:555245dd5c73524dee627ad0c2e308c9dd95af234df791d11e6bcdfa2f33a4ef"
    ),
    "docker.io/volcanosh/vc-webhook-manager:v1.15.1": (
        "sha256:569e3671b6d9619c175062e6d3e82bfe3bb4bc3628b36347406ccc07f10fe12c"
    ),
}


@dataclass(frozen=True)
class ImageReference:
    """A parsed ``registry/repository[:tag][@digest]``."""

    registry: str
    repository: str
    tag: str | None
    digest: str | None

    @classmethod
    def parse(cls, text: str) -> ImageReference:
        """Raises ValueError naming ``text`` when it is not a reference with a registry host."""
        match = _REFERENCE.fullmatch(text)
        if not match or ("." not in match["registry"] and ":" not in match["registry"]):
            raise ValueError(
                f"{shown(text)}: expected an image reference 'registry/repository:tag' with the "
                "registry host, e.g. 'docker.io/tensorflow/tensorflow:2.20.0'"
            )
        return cls(match["registry"], match["repository"], match["tag"], match["digest"])

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.repository}"

    @property
    def tagged(self) -> str:
        """``registry/repository:tag`` (the key of digests), without any digest."""
        return f"{self.name}:{self.tag}" if self.tag else self.name

    def __str__(self) -> str:
        text = self.tagged
        return f"{text}@{self.digest}" if self.digest else text


def reference_problem(key: str, text: str) -> str | None:
    """A settings problem when ``text`` is not an image reference with a registry and a tag."""
    try:
        ref = ImageReference.parse(text)
    except ValueError as error:
        return f"{key} = {error}"
    if ref.tag is None or ref.digest is not None:
        return (
            f"{key} = {shown(text)}: expected 'registry/repository:tag' (a tag, no digest), "
            "e.g. 'docker.io/tensorflow/tensorflow:2.20.0'"
        )
    return None


@dataclass(frozen=True)
class ImagePolicy:
    """How pinned references become the references the cluster pulls.

    Args:
        digests: ``registry/repository:tag`` -> ``sha256:...``; wins over
            :data:`PUBLIC_DIGESTS`. Default none.
        mirrors: public registry host (one of :data:`MIRRORABLE_REGISTRIES`) -> the registry
            and path prefix that serves its repositories instead. Default none.
    """

    digests: Mapping[str, str] = None  # type: ignore[assignment]
    mirrors: Mapping[str, str] = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "digests", dict(self.digests or {}))
        object.__setattr__(self, "mirrors", dict(self.mirrors or {}))

    def problems(self, prefix: str) -> list[str]:
        """What is wrong with these mirrors and digests, each named ``prefix`` + ``mirrors.<registry>``
        (``digests.<image>``)."""
        out = []
        for registry, mirror in self.mirrors.items():
            if registry not in MIRRORABLE_REGISTRIES:
                out.append(
                    f"{prefix}mirrors.{registry}: unknown registry; expected one of "
                    f"{list(MIRRORABLE_REGISTRIES)}"
                )
            if len(mirror) > 255 or not MIRROR.fullmatch(mirror):
                out.append(
                    f"{prefix}mirrors.{registry} = {shown(mirror)}: expected a registry host and optional "
                    "path prefix without scheme or trailing '/', e.g. "
                    "'123456789012.dkr.ecr.us-west-2.amazonaws.com/docker-hub'"
                )
            elif mirror.split("/")[0] == registry:
                out.append(
                    f"{prefix}mirrors.{registry} = {shown(mirror)}: a mirror must be another registry"
                )
        for image, digest in self.digests.items():
            problem = reference_problem(f"{prefix}digests.{image}", image)
            if problem:
                out.append(problem)
            if not DIGEST.fullmatch(digest):
                out.append(
                    f"{prefix}digests.{image} = {shown(digest)}: expected 'sha256:' and 64 "
                    "lower-case hex digits (run `mlp images resolve`)"
                )
        return out

    def digest(self, image: str) -> str | None:
        """The digest known for ``image`` (its own, the settings', or a public one)."""
        ref = ImageReference.parse(image)
        return ref.digest or self.digests.get(ref.tagged) or PUBLIC_DIGESTS.get(ref.tagged)

    def registry(self, registry: str) -> str:
        """Where images of ``registry`` are pulled from (its mirror, or itself)."""
        return self.mirrors.get(registry, registry)

    def resolve(self, image: str) -> str:
        """``image`` as pulled: mirrored registry, tag kept, digest added when known."""
        ref = ImageReference.parse(image)
        digest = self.digest(image)
        pulled = f"{self.registry(ref.registry)}/{ref.repository}"
        if ref.tag:
            pulled += f":{ref.tag}"
        return f"{pulled}@{digest}" if digest else pulled

    def tag_only(self, images: Iterable[str]) -> list[str]:
        """The images among ``images`` that no digest pins, sorted and without duplicates."""
        return sorted({i for i in images if self.digest(i) is None})


DEFAULT_POLICY = ImagePolicy()

# Warning id of images that no digest pins; acknowledge with
# ``Annotations.of(construct).acknowledge_warning(TAG_ONLY_WARNING)`` once reviewed.
TAG_ONLY_WARNING = "ml-platform:imagePinnedByTagOnly"


def warn_tag_only(scope: object, images: Iterable[str], policy: ImagePolicy) -> list[str]:
    """Add one synth warning to ``scope`` (a construct) naming every image of ``images`` that
    ``policy`` pins by tag only; return those images."""
    from aws_cdk import Annotations

    loose = policy.tag_only(images)
    if loose:
        Annotations.of(scope).add_warning_v2(  # type: ignore[arg-type]
            TAG_ONLY_WARNING,
            f"{scope.node.path}: images pinned by tag only (a tag can be moved to other "  # type: ignore[attr-defined]
            f"content): {loose}. Give their digests in the image policy (`mlp images resolve` "
            "asks the registries and records them).",
        )
    return loose


DOCKER_HUB = "docker.io"
DOCKER_HUB_WARNING = "ml-platform:dockerHubDirect"
"""Warning id of Docker Hub images pulled directly: anonymous pulls are limited to 10 an hour
per IPv4 address (https://docs.docker.com/docker-hub/usage/), and every node pulls through the
NAT gateway's one address."""


def docker_hub_direct(images: Iterable[str], policy: ImagePolicy) -> list[str]:
    """The images among ``images`` that ``policy`` pulls from Docker Hub itself (no mirror)."""
    if DOCKER_HUB in policy.mirrors:
        return []
    return sorted({i for i in images if ImageReference.parse(i).registry == DOCKER_HUB})


def docker_hub_warning(images: Iterable[str]) -> str:
    """The text of :data:`DOCKER_HUB_WARNING` for ``images``."""
    return (
        f"Docker Hub images pulled directly: {sorted(images)}. Docker Hub allows 10 anonymous "
        "pulls an hour per IPv4 address and every node pulls through the NAT gateway's one "
        "address, so new nodes or a Volcano rollout can stall in ImagePullBackOff (and roll the "
        "cluster stack back). Copy them into this account's ECR with `mlp images mirror` "
        "(it records images.mirrors)."
    )


def warn_docker_hub(scope: object, images: Iterable[str], policy: ImagePolicy) -> list[str]:
    """Add :data:`DOCKER_HUB_WARNING` to ``scope`` (a construct) when ``policy`` pulls any of
    ``images`` from Docker Hub directly; return those images."""
    from aws_cdk import Annotations

    direct = docker_hub_direct(images, policy)
    if direct:
        Annotations.of(scope).add_warning_v2(  # type: ignore[arg-type]
            DOCKER_HUB_WARNING,
            f"{scope.node.path}: {docker_hub_warning(direct)}",  # type: ignore[attr-defined]
        )
    return direct
