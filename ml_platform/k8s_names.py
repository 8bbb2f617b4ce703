"""Kubernetes names and resource keys shared by the cluster charts, the training jobs, the
instance table and the tests.

A data module below all of them: :mod:`ml_platform.instances` and :mod:`ml_platform.training`
read these strings without importing the chart package, which imports them in turn."""

__all__ = [
    "EFA_RESOURCE",
    "FSX_CLAIM",
    "FSX_MOUNT_PATH",
    "GPU_RESOURCE",
    "GPU_TAINT_KEY",
    "INSTANCE_TYPE_LABEL",
    "NAMESPACE_POD_SECURITY",
    "NEURONCORE_RESOURCE",
    "NEURON_RESOURCE",
    "NEURON_TAINT_KEY",
    "NODE_GROUP_LABEL",
    "NODE_ROLE_LABEL",
    "PSA_LABEL_PREFIX",
    "PSA_VERSION",
    "SYSTEM_NAMESPACE_POD_SECURITY",
    "TRAINING_HELPERS",
    "pod_security_labels",
]

FSX_CLAIM = "fsx-claim"  # the ReadWriteMany claim the training pods mount at /data
FSX_MOUNT_PATH = "/data"

NEURON_RESOURCE = (
    "aws.amazon.com/neuron"  # Trainium chips; `neurondevice` was removed in Neuron 2.22
)
NEURONCORE_RESOURCE = "aws.amazon.com/neuroncore"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
GPU_RESOURCE = "nvidia.com/gpu"

NEURON_TAINT_KEY = "aws.amazon.com/neuron"  # NoSchedule taint on the Trainium nodes
GPU_TAINT_KEY = "nvidia.com/gpu"  # NoSchedule taint on the Triton GPU nodes
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
NODE_ROLE_LABEL = "ml-platform/node-role"  # values: system, trainium, gpu
# On the training-helper nodes (besides node-role=system): the system-role nodes in the FSx AZ.
NODE_GROUP_LABEL = "ml-platform/node-group"
TRAINING_HELPERS = "training-helpers"  # its value there

# Pod Security Admission: namespace labels that make the API server enforce one Pod Security
# Standards level (privileged, baseline, restricted) on every pod of the namespace.
# https://kubernetes.io/docs/concepts/security/pod-security-admission/
# https://kubernetes.io/docs/concepts/security/pod-security-standards/
PSA_LABEL_PREFIX = "pod-security.kubernetes.io/"
PSA_VERSION = "v1.34"
"""The Standards' version the labels pin: the oldest Kubernetes minor the platform supports
(:data:`ml_platform.versions.KUBERNETES_VERSIONS`), so a control-plane upgrade never tightens
a level under running workloads unannounced."""
NAMESPACE_POD_SECURITY = {"triton": "restricted", "training": "baseline"}
"""Level enforced per kind of namespace: Triton's pods run as non-root with every restricted
control; the training pods need root (the Neuron runtime and the sample's scripts) and the
``net.ipv4.ip_local_reserved_ports`` sysctl, which baseline allows."""

SYSTEM_NAMESPACE_POD_SECURITY = {"volcano-system": "baseline", "amazon-cloudwatch": "privileged"}
"""Level enforced on the system namespaces the platform creates for their owners (their pods
come from Volcano's Helm chart and the CloudWatch observability add-on):

- ``volcano-system``: the chart's scheduler, controllers and admission (volcano-sh/volcano
  v1.15.1 ``installer/helm/chart/volcano/templates/``) mount only config maps, secrets and
  emptyDirs, with no host network, host ports or privileged containers: baseline. Its node
  agent, which needs more, is off by default and not enabled here.
- ``amazon-cloudwatch``: the add-on's CloudWatch agent and Fluent Bit DaemonSets read the
  node's logs and metrics through hostPath volumes, which baseline forbids: privileged, stated
  by label instead of left unlabeled, with warnings and audit at baseline."""


def pod_security_labels(enforce: str, watch: str = "restricted") -> dict[str, str]:
    """Labels enforcing ``enforce`` and warning and auditing at ``watch`` (default
    ``restricted``, so what keeps a baseline namespace from restricted shows in ``kubectl``
    warnings and the audit log)."""
    labels = {}
    for mode, level in (("enforce", enforce), ("warn", watch), ("audit", watch)):
        labels[f"{PSA_LABEL_PREFIX}{mode}"] = level
        labels[f"{PSA_LABEL_PREFIX}{mode}-version"] = PSA_VERSION
    return labels
