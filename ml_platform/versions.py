"""Every external version the training cluster pins, in one place.

Add-on versions follow the Kubernetes minor version, so they are keyed by it; the cluster
refuses a Kubernetes version that has no entry here. Each pin names its source. Check a
pin before raising it, e.g. ``aws eks describe-addon-versions --addon-name coredns
--kubernetes-version 1.35``.
"""

from __future__ import annotations

__all__ = [
    "CHARTS_DIR",
    "DEFAULT_EKS_REGISTRY_ACCOUNT",
    "EFA_DEVICE_PLUGIN_REPOSITORY",
    "EFA_DEVICE_PLUGIN_TAG",
    "EKS_ADDON_VERSIONS",
    "EKS_REGISTRY_ACCOUNTS",
    "EKS_SUPPORT_TYPES",
    "KUBERNETES_SUPPORT",
    "KUBERNETES_VERSIONS",
    "NEURON_AMI_RELEASE_LATEST",
    "NEURON_DEVICE_PLUGIN_IMAGE",
    "NEURON_HELM_CHART",
    "NEURON_HELM_CHART_MANIFEST_DIGEST",
    "NEURON_HELM_CHART_SHA256",
    "NEURON_HELM_CHART_VERSION",
    "NEURON_HELM_OCI_REPOSITORY",
    "NEURON_HELM_REGISTRY",
    "NEURON_HELM_REPOSITORY",
    "NEURON_STACKS",
    "NEXT_KUBERNETES_VERSION_BLOCKER",
    "TRN1_NEURON_STACK",
    "VOLCANO_HELM_CHART",
    "VOLCANO_HELM_CHART_SHA256",
    "VOLCANO_HELM_CHART_VERSION",
    "VOLCANO_HELM_REPOSITORY",
    "VOLCANO_IMAGES",
    "VOLCANO_IMAGE_REGISTRY",
    "VOLCANO_NAMESPACE",
    "KubernetesSupport",
    "NeuronStack",
    "addon_version",
    "efa_device_plugin_image",
    "eks_registry",
    "neuron_chart_dir",
    "neuron_release_version",
    "volcano_chart_dir",
]

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ml_platform.regions import ecr_registry

# --- EKS managed add-ons, per Kubernetes minor version --------------------------------------
# The Kubernetes versions the platform supports: every one that Volcano VOLCANO_HELM_CHART_VERSION
# supports (1.34 and 1.35 for v1.15.1; not 1.36) and that has add-on pins here and a kubectl
# Lambda layer (ml_platform.constructs.eks_cluster.KUBECTL_LAYERS).
# The charts stay on cdk8s-plus-35: they use only stable APIs (v1, apps/v1, batch/v1,
# networking.k8s.io/v1, policy/v1, autoscaling/v2) whose schemas 1.34 shares, and the tests
# validate every applied object against both versions' schemas.
KUBERNETES_VERSIONS = ("1.34", "1.35")
# The cluster's upgrade policy: EXTENDED keeps a version past standard support at the
# extended-support rate; STANDARD lets EKS upgrade it then. EKS's default is EXTENDED
# (https://docs.aws.amazon.com/eks/latest/userguide/extended-support-control.html).
EKS_SUPPORT_TYPES = ("EXTENDED", "STANDARD")

# Version-independent within KUBERNETES_VERSIONS: one build serves 1.34 and 1.35.
# EKS user guide, "Amazon VPC CNI" add-on versions; known good on 1.34 and 1.35.
_VPC_CNI = "v1.21.1-eksbuild.1"
# EKS user guide, "EKS Pod Identity Agent" add-on versions.
_POD_IDENTITY_AGENT = "v1.3.10-eksbuild.2"
# The EKS node monitoring agent (node conditions for EKS node auto repair; it watches
# accelerated hardware, Neuron included): the build of agent release v1.7.0 (2026-08-04), the
# image tag its chart pins in the EKS registry (aws/eks-node-monitoring-agent, tag v1.7.0,
# charts/eks-node-monitoring-agent/values.yaml `nodeAgent.image.tag`), which EKS serves as the
# add-on version of the same name. One build for every Kubernetes version of the chart.
# https://docs.aws.amazon.com/eks/latest/userguide/node-health.html
_NODE_MONITORING_AGENT = "v1.7.0-eksbuild.1"
# None = not pinned: EKS installs its default version for the cluster's Kubernetes version. No
# public AWS page lists an add-on build of either (v1.9.0-eksbuild.1 and v5.3.1-eksbuild.1 were
# seen only in third-party configs), and a version EKS does not have fails the add-on and rolls
# the stack back. Pin one with the settings cluster.fsx_csi_driver_version /
# cluster.cloudwatch_observability_version after `mlp addons` (EKS DescribeAddonVersions) shows
# it exists.
_UNPINNED: dict[str, str | None] = {
    "aws-fsx-csi-driver": None,
    "amazon-cloudwatch-observability": None,
}

EKS_ADDON_VERSIONS: dict[str, dict[str, str | None]] = {
    "1.35": {
        "vpc-cni": _VPC_CNI,
        # EKS user guide, "Manage CoreDNS", CoreDNS versions table, row 1.35:
        # https://docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-coredns.md
        "coredns": "v1.14.3-eksbuild.3",
        # EKS user guide, "Manage kube-proxy", kube-proxy versions table, row 1.35:
        # https://docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-kube-proxy.md
        "kube-proxy": "v1.35.3-eksbuild.13",
        "eks-pod-identity-agent": _POD_IDENTITY_AGENT,
        "eks-node-monitoring-agent": _NODE_MONITORING_AGENT,
        **_UNPINNED,
    },
    "1.34": {
        "vpc-cni": _VPC_CNI,
        # EKS user guide, "Manage CoreDNS", CoreDNS versions table, row 1.34:
        # https://docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-coredns.md
        "coredns": "v1.13.2-eksbuild.11",
        # EKS user guide, "Manage kube-proxy", kube-proxy versions table, row 1.34:
        # https://docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-kube-proxy.md
        "kube-proxy": "v1.34.6-eksbuild.13",
        "eks-pod-identity-agent": _POD_IDENTITY_AGENT,
        "eks-node-monitoring-agent": _NODE_MONITORING_AGENT,
        **_UNPINNED,
    },
}


# --- Kubernetes versions: support dates ---------------------------------------------------
@dataclass(frozen=True)
class KubernetesSupport:
    """One EKS Kubernetes version: when its standard and extended support end, and what keeps
    the platform from the next one."""

    standard_support_end: str
    extended_support_end: str


# EKS user guide, "Understand the Kubernetes version lifecycle on EKS", release calendar
# (https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html), as of
# 2026-12-02: end of standard support; extended support lasts 12 months more (same page). 1.36 is available on EKS (since 2026-06-02) but not here: Volcano v1.15.1, the
# newest release (only 1.16 alphas exist), supports Kubernetes 1.34 and 1.35
# (volcano-sh/volcano README, Kubernetes compatibility matrix).
KUBERNETES_SUPPORT: dict[str, KubernetesSupport] = {
    "1.34": KubernetesSupport(standard_support_end="2026-12-02", extended_support_end="2027-12-02"),
    "1.35": KubernetesSupport(standard_support_end="2027-03-27", extended_support_end="2028-03-27"),
}
NEXT_KUBERNETES_VERSION_BLOCKER = (
    "1.36: Volcano v1.15.1 supports Kubernetes up to 1.35; no Volcano release supports 1.36 yet"
)


# --- Neuron: the training image's SDK and the node image's driver, in one row ----------------
@dataclass(frozen=True)
class NeuronStack:
    """The Neuron software of Trainium training, host and container, kept together: the
    training image's Neuron SDK release, the driver that release ships, and the EKS AL2023
    Neuron AMI release that carries that driver, as the node group's ``ReleaseVersion`` per
    Kubernetes version. A node replaced later then gets the same driver as its peers, under
    the same SDK.

    Attributes:
        sdk: Neuron SDK release of ``training_image``.
        training_image: The Neuron PyTorch training container (the image's base).
        driver: ``aws-neuronx-dkms`` of that SDK release (its release content page).
        ami_release: The amazon-eks-ami release (``vYYYYMMDD``) whose AL2023 Neuron AMI ships
            ``driver``.
        release_versions: Node group ``ReleaseVersion`` of that AMI release, by Kubernetes
            minor version (its CHANGELOG entry).
    """

    sdk: str
    training_image: str
    driver: str
    ami_release: str
    release_versions: Mapping[str, str]


# Trn2 runs the BERT job on this same stack. The sample is PyTorch/XLA code (torch_xla,
# xm.xla_device()), and XLA training ends at 2.29.x whatever the instance; TorchNeuron
# (native), the training backend Neuron supports on Trn2/Trn3 after it, would need a native
# training script, not this sample (docs/training.md, "Trn2"). 2.29.1 covers Trn2: its release content
# (src/helperscripts/n2-manifest.json at aws-neuron-sdk 6616e998) lists torch-neuronx
# 2.9.0.2.13.26312, neuronx-cc 2.24.8799.0 and aws-neuronx-dkms 2.27.4.0 for trn1, inf2, trn2
# and trn3 (libneuronxla 2.2.16408.0 lists only trn1 and inf2 there, though torch-neuronx
# needs it on Trn2 too: a gap only a Trn2 node can settle); the 2.29.0 release notes
# (release-notes/prev/2.29.0.rst) give torch-neuronx "Supports: Inf2, Trn1 / Trn1n, Trn2,
# Trn3"; and aws-neuron/deep-learning-containers README.md (HEAD 2be9ed1) lists this training
# image for "trn1,trn2,trn3,inf2". The pinned sample runs on trn2 since aws-neuron-samples
# dfa8b5a/d6e1754 (2024-12), ancestors of its pinned commit
# (ml_platform.training.images.NEURON_SAMPLES_COMMIT).
TRN1_NEURON_STACK = NeuronStack(
    # Trn1's end state: the last Neuron SDK that supports PyTorch/XLA training. Neuron's
    # statement (announce-no-support-pytorch-xla-training, 2026-05-20): "Starting with Neuron
    # Release 2.30.0, PyTorch/XLA is no longer supported for training workloads on Trainium";
    # PyTorch 2.9 was the last XLA-based version for training. torch-neuronx (XLA) is not
    # shipped from 2.32.0 (archive/frameworks/torch), and the native TorchNeuron backend covers
    # Trn2/Trn3 only (release-notes/components/torchneuron.html); pages under
    # https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/announcements/neuron2.x/
    # and .../en/latest/. So the stack is 2.29.1 (2026-05-01, the last 2.29 patch:
    # release-notes/prev/2.29.1.rst), not 2.30.0, which no longer supports XLA training.
    sdk="2.29.1",
    # aws-neuron/deep-learning-containers README.md (HEAD 2be9ed1, 2026-08-17): PyTorch 2.9.0
    # training, "Neuron 2.29.1", trn1, 3.12 (py312), this image. Its Dockerfile at tag 2.29.1
    # (pytorch/training/2.9.0/Dockerfile.neuronx) installs torch-neuronx 2.9.0.2.13.26312
    # (2.30.0's: 2.9.0.2.14.27725) on the same Python 3.12.11 and torch 2.9.0, so the sample's
    # cp312 lock holds.
    training_image=(
        "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.29.1-ubuntu24.04"
    ),
    # Neuron 2.29.1 release content (release-notes/releasecontent.rst renders
    # src/helperscripts/n2-manifest.json; at aws-neuron-sdk commit 6616e998, "Release notes for
    # patch release 2.29.1"): neuron_version 2.29.1, trn1: aws-neuronx-dkms 2.27.4.0,
    # torch-neuronx 2.9.0.2.13.26312 (2.29.0's driver too).
    driver="2.27.4.0",
    # awslabs/amazon-eks-ami CHANGELOG.md, "AMI Release v20260505": AL2023_x86_64_NEURON with
    # aws-neuronx-dkms 2.27.4.0-dkms for Kubernetes 1.35 and 1.34, the last release with that
    # driver (v20260409 to v20260505 carry it; v20260610 moved to 2.28.0.0, Neuron 2.30's);
    # release versions 1.35.4-20260505 and 1.34.7-20260505.
    ami_release="v20260505",
    release_versions={"1.35": "1.35.4-20260505", "1.34": "1.34.7-20260505"},
)

NEURON_STACKS: dict[str, NeuronStack] = {
    "trn1.32xlarge": TRN1_NEURON_STACK,
    "trn1n.32xlarge": TRN1_NEURON_STACK,
    # Trn2 trains the XLA-based sample, so the same 2.29.1 stack; see the rationale above
    # TRN1_NEURON_STACK.
    "trn2.48xlarge": TRN1_NEURON_STACK,
    "trn2u.48xlarge": TRN1_NEURON_STACK,
}
"""The :class:`NeuronStack` of each Trainium instance type
(:data:`~ml_platform.instances.TRAINIUM_INSTANCES`), one row per type."""

NEURON_AMI_RELEASE_LATEST = "latest"
"""Setting value ``trainium.ami_release_version`` that pins nothing: EKS picks its newest
AL2023 Neuron AMI at each node group create or update."""


def neuron_release_version(instance_type: str, kubernetes_version: str) -> str:
    """The node group ``ReleaseVersion`` validated with the training image's Neuron SDK.

    Raises:
        ValueError: naming the instance type or Kubernetes version without one.
    """
    stack = NEURON_STACKS.get(instance_type)
    if stack is None:
        raise ValueError(
            f"instance_type={instance_type!r}: Neuron stacks are pinned for {sorted(NEURON_STACKS)}"
        )
    release = stack.release_versions.get(kubernetes_version)
    if release is None:
        raise ValueError(
            f"kubernetes_version={kubernetes_version!r}: the Neuron AMI release "
            f"{stack.ami_release} is pinned for {sorted(stack.release_versions)}"
        )
    return release


# --- Images and charts applied by the platform ----------------------------------------------
# Neuron's Kubernetes components come from Neuron's own Helm chart, an OCI artifact on ECR
# Public (Neuron's install command: `helm upgrade --install neuron-helm-chart
# oci://public.ecr.aws/neuron/neuron-helm-chart`,
# https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/tutorials/k8s-neuron-problem-detector-and-recovery.html;
# sources:
# https://github.com/aws-neuron/neuron-helm-charts). Version 1.10.0 is the release whose
# `devicePlugin.image.tag` is 2.32.0.0: `helm show values ... --version 1.10.0` as a public
# record prints it (sirzzang/sirzzang.github.io@d7607fa7142df4ebce7b55b1b17cc9c5d542ca62:
# _posts/2026-09-11-Kubernetes-LLM-Serving-Optimization-08-02-02-Neuron-Device-Exposure.md).
NEURON_HELM_REGISTRY = "public.ecr.aws"
NEURON_HELM_CHART = "neuron-helm-chart"
NEURON_HELM_OCI_REPOSITORY = f"neuron/{NEURON_HELM_CHART}"
NEURON_HELM_REPOSITORY = f"oci://{NEURON_HELM_REGISTRY}/{NEURON_HELM_OCI_REPOSITORY}"
NEURON_HELM_CHART_VERSION = "1.10.0"
# Digest of the OCI manifest that tag 1.10.0 names, as `helm pull` printed it ("Pulled:
# public.ecr.aws/neuron/neuron-helm-chart:1.10.0 / Digest: sha256:ed5d8f73...", the same
# record as above). Helm prints the manifest's digest there, not the archive's
# (helm/helm@dc761caf007ed297dbdc8d36a7a9f62be5c97663:pkg/registry/client.go, Pull:
# `result.Manifest.Digest`); the manifest names the chart archive (its layer) by SHA-256, so
# `mlp charts fetch` checks manifest -> layer digest -> archive bytes.
NEURON_HELM_CHART_MANIFEST_DIGEST = (
    "sha256:ed5d8f73b7a05d3a1edf17b2bfaf277ea995ad1c65b115fa8ba2c7b4dc649346"
)
# SHA-256 of the chart archive itself (neuron-helm-chart-1.10.0.tgz): no public source found
# states it, so none is claimed here. `mlp charts fetch` records the archive digest it verified
# through the manifest (.charts/neuron-helm-chart-1.10.0.sha256) and requires that record on
# every later fetch; pin the recorded value here to require it everywhere.
NEURON_HELM_CHART_SHA256: str | None = None
# The chart's devicePlugin.image at 1.10.0 (`helm show values`, the record above). The values
# the platform gives the chart are in ml_platform/k8s_charts/neuron.py.
NEURON_DEVICE_PLUGIN_IMAGE = "public.ecr.aws/neuron/neuron-device-plugin:2.32.0.0"

# aws/eks-charts stable/aws-efa-k8s-device-plugin 0.5.30: appVersion (image tag).
EFA_DEVICE_PLUGIN_TAG = "v0.5.20"
EFA_DEVICE_PLUGIN_REPOSITORY = "eks/aws-efa-k8s-device-plugin"

# Volcano releases: v1.15.1 supports Kubernetes 1.34 and 1.35, not 1.36 (volcano-sh/volcano
# README, Kubernetes compatibility matrix).
VOLCANO_HELM_REPOSITORY = "https://volcano-sh.github.io/helm-charts"
VOLCANO_HELM_CHART = "volcano"
VOLCANO_HELM_CHART_VERSION = "1.15.1"
VOLCANO_NAMESPACE = "volcano-system"
CHARTS_DIR = ".charts"


def volcano_chart_dir(project: Path) -> Path:
    """Where ``mlp charts fetch`` unpacks the pinned Volcano chart for ``project`` (the folder
    of cdk.json), and where synthesis looks for it."""
    return project / CHARTS_DIR / f"{VOLCANO_HELM_CHART}-{VOLCANO_HELM_CHART_VERSION}"


def neuron_chart_dir(project: Path) -> Path:
    """Where ``mlp charts fetch`` unpacks Neuron's pinned chart for ``project`` (the folder of
    cdk.json), and where synthesis looks for it."""
    return project / CHARTS_DIR / f"{NEURON_HELM_CHART}-{NEURON_HELM_CHART_VERSION}"


# The images chart 1.15.1 runs with its default components (values.yaml `basic.*_image_name`
# and `image_tag_version` v1.15.1, registry docker.io), by the chart's value key of each
# one's tag (`basic.<key>_image_tag_version`):
# https://github.com/volcano-sh/volcano/blob/v1.15.1/installer/helm/chart/volcano/values.yaml
VOLCANO_IMAGE_REGISTRY = "docker.io"
VOLCANO_IMAGES: dict[str, str] = {
    "scheduler": "docker.io/volcanosh/vc-scheduler:v1.15.1",
    "controller": "docker.io/volcanosh/vc-controller-manager:v1.15.1",
    "admission": "docker.io/volcanosh/vc-webhook-manager:v1.15.1",
}
# SHA-256 of the chart archive volcano-1.15.1.tgz as served by VOLCANO_HELM_REPOSITORY: what a
# public deployment record lists for the file it fetched there (section 7 of
# https://github.com/csmVIc/kube-scheduling-perf/blob/b2fd509cabfd837e34fe9439d5855c32c531c710/CLUSTER_DEPLOYMENT_RECORD.md).
# `mlp charts fetch` also checks it against the `digest` the repository's index.yaml states.
VOLCANO_HELM_CHART_SHA256 = "a8135a7430fd48a57d791faac3bbea210106611a826b22ed089ae2dbaad1e7c3"

# --- Amazon EKS image registries ------------------------------------------------------------
# EKS user guide, "View Amazon container image registries for Amazon EKS add-ons"
# (https://docs.aws.amazon.com/eks/latest/userguide/add-ons-images.html): the account serving
# EKS images in each region; every standard commercial region not listed uses
# DEFAULT_EKS_REGISTRY_ACCOUNT. The page writes ap-east-2's host with "ap-east-1"; taken here
# as a typo: every other registry on it is in its own region (nodes pulling through the
# region's ECR VPC endpoints need that).
DEFAULT_EKS_REGISTRY_ACCOUNT = "602401143452"
EKS_REGISTRY_ACCOUNTS: dict[str, str] = {
    "af-south-1": "877085696533",
    "ap-east-1": "800184023465",
    "ap-east-2": "533267051163",
    "ap-south-2": "900889452093",
    "ap-southeast-3": "296578399912",
    "ap-southeast-4": "491585149902",
    "ap-southeast-5": "151610086707",
    "ap-southeast-6": "333609536671",
    "ap-southeast-7": "121268973566",
    "ca-west-1": "761377655185",
    "eu-central-2": "900612956339",
    "eu-south-1": "590381155156",
    "eu-south-2": "455263428931",
    "il-central-1": "066635153087",
    "me-central-1": "759879836304",
    "me-south-1": "558608220178",
    "mx-central-1": "730335286997",
    "cn-north-1": "918309763551",
    "cn-northwest-1": "961992271922",
    "us-gov-east-1": "151742754352",
    "us-gov-west-1": "013241004608",
}


def addon_version(addon_name: str, kubernetes_version: str) -> str | None:
    """The pinned version of an EKS add-on for a Kubernetes minor version (``None``: EKS's
    default version).

    Raises:
        ValueError: naming the Kubernetes version or add-on and what is pinned.
    """
    pins = EKS_ADDON_VERSIONS.get(kubernetes_version)
    if pins is None:
        raise ValueError(
            f"kubernetes_version={kubernetes_version!r}: add-on versions are pinned for "
            f"{sorted(EKS_ADDON_VERSIONS)}"
        )
    if addon_name not in pins:
        raise ValueError(f"addon_name={addon_name!r}: pinned add-ons are {sorted(pins)}")
    return pins[addon_name]


def eks_registry(region: str) -> str:
    """Host of the regional Amazon EKS image registry, e.g.
    ``602401143452.dkr.ecr.us-west-2.amazonaws.com``."""
    return ecr_registry(EKS_REGISTRY_ACCOUNTS.get(region, DEFAULT_EKS_REGISTRY_ACCOUNT), region)


def efa_device_plugin_image(region: str) -> str:
    """The pinned EFA device plugin image in ``region``'s EKS registry."""
    return f"{eks_registry(region)}/{EFA_DEVICE_PLUGIN_REPOSITORY}:{EFA_DEVICE_PLUGIN_TAG}"
