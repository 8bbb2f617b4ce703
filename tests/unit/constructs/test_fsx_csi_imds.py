"""The FSx CSI driver under IMDS hop limit 1 (the finding next to
ml_platform.constructs.eks_cluster.IMDS_HOP_LIMIT): its pods are not on the host network, so
IMDS does not answer them. The node plugin then takes the instance ID from the Node object
and mounts from the volume's attributes; the controller gets no region and cannot call FSx,
which static provisioning never needs. These tests pin what that conclusion rests on."""

from __future__ import annotations

from ml_platform.constructs.addons import FSX_CSI_SERVICE_ACCOUNT
from ml_platform.constructs.eks_cluster import IMDS_HOP_LIMIT
from ml_platform.k8s_charts.fsx_storage import FSX_CSI_DRIVER
from tests.helpers.manifests import all_objects
from tests.support import SynthesizedPlatform


def _objects(synth: SynthesizedPlatform) -> list[dict]:
    """Every Kubernetes object any stack of the app applies."""
    names = [p.name.removesuffix(".template.json") for p in synth.template_paths()]
    stacks = [name.split("-", 1)[1] for name in names]
    return [o for stack in stacks for o in all_objects(synth.template_json(stack))]


def test_fsx_volumes_are_static_so_the_controller_never_calls_fsx(
    synth: SynthesizedPlatform,
) -> None:
    objects = _objects(synth)
    # No dynamic provisioning (it would need the controller's region): no FSx StorageClass.
    assert [
        o["metadata"]["name"]
        for o in objects
        if o["kind"] == "StorageClass" and o.get("provisioner") == FSX_CSI_DRIVER
    ] == []
    volumes = [
        o
        for o in objects
        if o["kind"] == "PersistentVolume"
        and o["spec"].get("csi", {}).get("driver") == FSX_CSI_DRIVER
    ]
    assert len(volumes) == 1
    # The node plugin mounts <dnsname>@tcp:/<mountname> from these attributes, no AWS call.
    assert set(volumes[0]["spec"]["csi"]["volumeAttributes"]) == {"dnsname", "mountname"}
    assert volumes[0]["spec"]["storageClassName"] == ""


def test_fsx_csi_driver_runs_on_pod_identity_under_hop_limit_1(synth: SynthesizedPlatform) -> None:
    assert IMDS_HOP_LIMIT == 1
    resources = synth.template_json("TrainingCluster")["Resources"]
    (addon,) = [
        r
        for r in resources.values()
        if r["Type"] == "AWS::EKS::Addon" and r["Properties"]["AddonName"] == "aws-fsx-csi-driver"
    ]
    # No configuration values: nothing sets controller.region (AWS_REGION), see the finding.
    assert "ConfigurationValues" not in addon["Properties"]
    namespace, account = FSX_CSI_SERVICE_ACCOUNT
    (association,) = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::EKS::PodIdentityAssociation"
        and r["Properties"]["ServiceAccount"] == account
    ]
    assert association["Namespace"] == namespace == "kube-system"
    assert account == "fsx-csi-controller-sa"  # the chart's controller service account
