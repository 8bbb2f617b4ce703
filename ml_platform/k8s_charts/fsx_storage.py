"""The training namespace and its shared ``/data`` volume: FSx for Lustre, statically
provisioned.

The file system is made by CDK (StorageStack), so the chart only points a PersistentVolume at
it (driver ``fsx.csi.aws.com``) and binds the ReadWriteMany claim ``fsx-claim`` to that volume
by name. The inputs may be CDK tokens (file system id, DNS and mount name): they stay tokens in
the chart and resolve in the cluster's manifest resource.
"""

from __future__ import annotations

__all__ = [
    "TrainingStorageChart",
]

import cdk8s
from cdk8s_plus_35 import k8s
from constructs import Construct

from ml_platform.k8s_names import FSX_CLAIM, NAMESPACE_POD_SECURITY, pod_security_labels

FSX_CSI_DRIVER = "fsx.csi.aws.com"
_PART_OF = {"app.kubernetes.io/part-of": "ml-platform"}


class TrainingStorageChart(cdk8s.Chart):
    """Namespace ``namespace``, PersistentVolume ``<namespace>-fsx`` and the claim
    ``fsx-claim`` in ``namespace``.

    The volume keeps the data when released (``Retain``) and uses no storage class (``""``) so
    no provisioner ever acts on the claim.

    Args:
        namespace: The training namespace (created here). Required.
        file_system_id: FSx for Lustre file system id (``fs-...``); may be a token. Required.
        dns_name: The file system's DNS name; may be a token. Required.
        mount_name: The file system's Lustre mount name; may be a token. Required.
        storage_gib: The file system's capacity in GiB. Required.
        claim_name: Name of the claim. Default ``fsx-claim``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        namespace: str,
        file_system_id: str,
        dns_name: str,
        mount_name: str,
        storage_gib: int,
        claim_name: str = FSX_CLAIM,
    ) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        if storage_gib < 1:
            raise ValueError(f"{self.node.path}: storage_gib={storage_gib}: expected at least 1")
        capacity = {"storage": k8s.Quantity.from_string(f"{storage_gib}Gi")}
        self.volume_name = f"{namespace}-fsx"
        self.training_namespace = k8s.KubeNamespace(
            self,
            "Namespace",
            metadata=k8s.ObjectMeta(
                name=namespace,
                labels={
                    **_PART_OF,
                    **pod_security_labels(NAMESPACE_POD_SECURITY["training"]),
                },
            ),
        )
        self.volume = k8s.KubePersistentVolume(
            self,
            "Volume",
            metadata=k8s.ObjectMeta(name=self.volume_name, labels=_PART_OF),
            spec=k8s.PersistentVolumeSpec(
                capacity=capacity,
                volume_mode="Filesystem",
                access_modes=["ReadWriteMany"],
                persistent_volume_reclaim_policy="Retain",
                storage_class_name="",
                # flock: the Hugging Face and Neuron compile caches lock files on /data.
                mount_options=["flock"],
                csi=k8s.CsiPersistentVolumeSource(
                    driver=FSX_CSI_DRIVER,
                    volume_handle=file_system_id,
                    volume_attributes={"dnsname": dns_name, "mountname": mount_name},
                ),
            ),
        )
        self.claim = k8s.KubePersistentVolumeClaim(
            self,
            "Claim",
            metadata=k8s.ObjectMeta(name=claim_name, namespace=namespace, labels=_PART_OF),
            spec=k8s.PersistentVolumeClaimSpec(
                access_modes=["ReadWriteMany"],
                storage_class_name="",
                volume_name=self.volume_name,
                resources=k8s.VolumeResourceRequirements(requests=capacity),
            ),
        )
