"""Every supported Kubernetes version (1.34 and 1.35, the ones Volcano 1.15.1 supports):
settings accept exactly those, and a 1.34 platform gets the 1.34 cluster, kubectl layer and
add-on pins, lints clean and applies only objects valid for Kubernetes 1.34."""

from __future__ import annotations

import importlib
import json
import re
from typing import Any

import aws_cdk as cdk
import kubernetes_validate
import pytest
import yaml
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template
from cfnlint.api import ManualArgs, lint_by_config

from ml_platform.app import new_app
from ml_platform.config import Settings, SettingsError
from ml_platform.constructs import eks_cluster
from ml_platform.k8s_charts.workloads import build_workload_manifests
from ml_platform.versions import EKS_ADDON_VERSIONS, KUBERNETES_VERSIONS
from tests.helpers.manifests import manifests_by_id
from tests.support import ROOT, SynthesizedPlatform, normalized, synthesize

# Kubernetes 1.34 add-on builds, EKS user guide tables ("Manage kube-proxy", "Manage CoreDNS").
KUBE_PROXY_134 = "v1.34.6-eksbuild.13"
COREDNS_134 = "v1.13.2-eksbuild.11"
CRD_GROUPS = ("scheduling.volcano.sh/", "batch.volcano.sh/")  # Volcano's, not Kubernetes'


@pytest.fixture(scope="session")
def k8s134(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedPlatform:
    """The app on Kubernetes 1.34 with cdk-nag on; the SageMaker endpoints (no Kubernetes in
    them) are left out to keep the synthesis short."""
    return synthesize(
        tmp_path_factory.mktemp("cdk.out.k8s134"),
        {"cluster": {"kubernetes_version": "1.34"}, "features": {"inference": False}},
    )


def _resources(synth: SynthesizedPlatform, kind: str) -> dict[str, dict[str, Any]]:
    resources = synth.template_json("TrainingCluster")["Resources"]
    return {k: r for k, r in resources.items() if r["Type"] == kind}


def test_settings_accept_the_supported_versions_only() -> None:
    assert KUBERNETES_VERSIONS == ("1.34", "1.35")
    for version in KUBERNETES_VERSIONS:
        settings = Settings.from_context({"cluster": {"kubernetes_version": version}})
        assert settings.cluster.kubernetes_version == version
    for version in ("1.36", "1.33", "1.34.0", "v1.34"):
        with pytest.raises(SettingsError) as info:
            Settings.from_context({"cluster": {"kubernetes_version": version}})
        assert info.value.problems == [
            f"cluster.kubernetes_version = {version!r}: expected one of ['1.34', '1.35']"
        ]


def test_each_version_has_its_own_kube_proxy_and_coredns() -> None:
    assert set(EKS_ADDON_VERSIONS) == set(KUBERNETES_VERSIONS)
    for version, pins in EKS_ADDON_VERSIONS.items():
        assert pins["kube-proxy"].startswith(f"v{version}.")  # follows the Kubernetes minor
    assert EKS_ADDON_VERSIONS["1.34"]["coredns"] != EKS_ADDON_VERSIONS["1.35"]["coredns"]
    assert EKS_ADDON_VERSIONS["1.34"].keys() == EKS_ADDON_VERSIONS["1.35"].keys()


def test_synthesis_passes_cdk_nag(k8s134: SynthesizedPlatform) -> None:
    assert k8s134.validation_error is None
    assert all(not plugin.get("violations") for plugin in k8s134.nag_report()["pluginReports"])


def test_cluster_kubectl_layer_and_addons_are_1_34(k8s134: SynthesizedPlatform) -> None:
    (cluster,) = _resources(k8s134, "AWS::EKS::Cluster").values()
    assert cluster["Properties"]["Version"] == "1.34"
    layers = [
        r["Properties"]["Description"]
        for r in _resources(k8s134, "AWS::Lambda::LayerVersion").values()
        if "kubectl" in r["Properties"].get("Description", "")
    ]
    assert len(layers) == 1 and layers[0].startswith("/opt/kubectl/kubectl 1.34.")
    addons = {
        r["Properties"]["AddonName"]: r["Properties"].get("AddonVersion")
        for r in _resources(k8s134, "AWS::EKS::Addon").values()
    }
    assert addons["kube-proxy"] == KUBE_PROXY_134
    assert addons["coredns"] == COREDNS_134
    assert addons == {name: EKS_ADDON_VERSIONS["1.34"][name] for name in addons}


def test_cfn_lint_finds_nothing(k8s134: SynthesizedPlatform, synth: SynthesizedPlatform) -> None:
    """Only the TrainingCluster template and the Trainium node group's AMI release depend on
    the Kubernetes version: the other stacks equal the default synthesis's (linted in
    tests/app), so only those two are linted here."""
    others = ("Network", "Storage", "GpuNodes")
    for short in others:
        assert normalized(k8s134.template_json(short)) == normalized(synth.template_json(short))
    trainium = normalized(k8s134.template_json("TrainiumNodes"))
    (group,) = [r for r in trainium["Resources"].values() if r["Type"] == "AWS::EKS::Nodegroup"]
    assert group["Properties"]["ReleaseVersion"] == "1.34.7-20260505"  # the 1.34 Neuron AMI
    group["Properties"]["ReleaseVersion"] = "1.35.4-20260505"
    assert trainium == normalized(synth.template_json("TrainiumNodes"))
    assert len(k8s134.template_paths()) == len(others) + 2
    paths = [
        str(k8s134.outdir / f"{k8s134.stack_name(short)}.template.json")
        for short in ("TrainingCluster", "TrainiumNodes")
    ]
    ignored = (yaml.safe_load((ROOT / ".cfnlintrc.yaml").read_text()) or {}).get("ignore_checks")
    config = ManualArgs(templates=paths, regions=["us-west-2"], ignore_checks=ignored or [])
    findings = [f"{m.rule.id} {m.message} ({m.path_string})" for m in lint_by_config(config)]
    assert findings == []


def test_every_manifest_validates_against_kubernetes_1_34(k8s134: SynthesizedPlatform) -> None:
    objects = [
        o
        for p in k8s134.template_paths()
        for objs in manifests_by_id(json.loads(p.read_text())).values()
        for o in objs
    ]
    objects += [
        o for objs in build_workload_manifests(k8s134.platform.settings).values() for o in objs
    ]
    checked = 0
    for obj in objects:
        if obj["apiVersion"].startswith(CRD_GROUPS):
            continue  # tests/unit/{k8s_charts,training} check these against Volcano's CRDs
        kubernetes_validate.validate(obj, "1.34.0", strict=True)
        checked += 1
    # Storage 3, the Neuron plugin's 2 ValidatingAdmissionPolicies and bindings 4 (the plugin
    # itself is a Helm release: its values' pod pieces are validated in
    # tests/unit/k8s_charts/test_cluster_charts.py), EFA plugin 1, training NetworkPolicies 5,
    # system namespaces 5 (2 namespaces, 3 allow-all policies), Triton device plugin 1 and
    # Triton 10 (no HorizontalPodAutoscaler), workloads 4 (dataset ConfigMap and Job,
    # TensorBoard Deployment and Service), the training-namespace admission policy and its
    # binding 2.
    assert checked == 35


def test_only_the_kubectl_layer_of_the_chosen_version_is_imported(monkeypatch) -> None:
    imported: list[str] = []
    real_import = importlib.import_module

    def recording_import(name: str, *args):
        # importlib is one module: aws-cdk's lazy imports (aws_kms...) pass through here too,
        # depending on what this worker imported before. Only the layer modules count.
        if re.fullmatch(r"aws_cdk\.lambda_layer_kubectl_v\d+", name):
            imported.append(name)
        return real_import(name, *args)

    monkeypatch.setattr(eks_cluster.importlib, "import_module", recording_import)
    env = cdk.Environment(account="123456789012", region="us-west-2")
    stack = cdk.Stack(new_app(), "S", env=env)
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"])
    eks_cluster.TrainingEksCluster(
        stack,
        "Cluster",
        vpc=vpc,
        props=eks_cluster.TrainingEksClusterProps(kubernetes_version="1.35"),
    )
    assert imported == ["aws_cdk.lambda_layer_kubectl_v35"]
    layers = Template.from_stack(stack).find_resources("AWS::Lambda::LayerVersion")
    kubectl = [r for r in layers.values() if "kubectl" in r["Properties"].get("Description", "")]
    assert len(kubectl) == 1
    assert kubectl[0]["Properties"]["Description"].startswith("/opt/kubectl/kubectl 1.35.")


# --- support dates and the Neuron stack table ------------------------------------------------


def test_every_supported_version_has_its_support_dates_and_the_default_lasts_longest() -> None:
    from datetime import date

    from ml_platform.limits import DEFAULT_KUBERNETES_VERSION
    from ml_platform.versions import KUBERNETES_SUPPORT, NEXT_KUBERNETES_VERSION_BLOCKER

    assert set(KUBERNETES_SUPPORT) == set(KUBERNETES_VERSIONS)
    ends = {v: date.fromisoformat(s.standard_support_end) for v, s in KUBERNETES_SUPPORT.items()}
    # EKS user guide release calendar: 1.34 leaves standard support on 2026-12-02.
    assert ends["1.34"] == date(2026, 12, 2)
    assert DEFAULT_KUBERNETES_VERSION == max(ends, key=ends.__getitem__) == "1.35"
    for support in KUBERNETES_SUPPORT.values():
        # extended support lasts 12 months after standard support (same page)
        standard = date.fromisoformat(support.standard_support_end)
        assert support.extended_support_end == standard.replace(year=standard.year + 1).isoformat()
    assert NEXT_KUBERNETES_VERSION_BLOCKER.startswith("1.36: Volcano v1.15.1")


def test_each_trainium_type_has_one_neuron_stack_whose_parts_agree() -> None:
    from ml_platform.instances import TRAINIUM_INSTANCES
    from ml_platform.training.images import NEURON_TRAINING_BASE_IMAGE
    from ml_platform.versions import NEURON_STACKS, neuron_release_version

    assert set(NEURON_STACKS) == set(TRAINIUM_INSTANCES)
    for instance_type, stack in NEURON_STACKS.items():
        # the image's tag names its SDK (the DLC naming: ...-sdk<version>-<os>)
        assert f"-sdk{stack.sdk}-" in stack.training_image
        assert set(stack.release_versions) == set(KUBERNETES_VERSIONS)
        for version, release in stack.release_versions.items():
            # amazon-eks-ami release versions: <kubernetes patch>-<date of the AMI release>
            assert release.startswith(f"{version}.")
            assert release.endswith("-" + stack.ami_release.removeprefix("v"))
            assert neuron_release_version(instance_type, version) == release
    # The image the build starts from is the table's.
    assert NEURON_TRAINING_BASE_IMAGE == NEURON_STACKS["trn1.32xlarge"].training_image
    with pytest.raises(ValueError, match=r"kubernetes_version='1.36'"):
        neuron_release_version("trn1.32xlarge", "1.36")
