"""NetworkPolicies: default deny in the namespaces we own, with only the flows they need.

The VPC CNI enforces them once its network policy agent is on (``enableNetworkPolicy`` in
the add-on configuration, :data:`ml_platform.constructs.addons.ADDON_CONFIGURATION`), in
strict mode: a new pod starts default-deny until its policies are in place
(https://github.com/aws/aws-network-policy-agent/pull/209), and users of strict mode report
that a pod no policy selects stays so; the system namespaces get
:class:`SystemNetworkPolicyChart` so that their pods do not depend on it.
https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy.html
https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html

- training namespace (:class:`TrainingNetworkPolicyChart`): the TorchX workers talk to each
  other (torchrun's c10d rendezvous on the first pod, the Neuron runtime's collective setup);
  the workers and the dataset job reach HTTPS on public addresses only (the dataset from S3,
  model hubs, PyPI for the hf-cache step); TensorBoard only resolves names. Nothing outside
  the namespace may connect in.
  EFA traffic (SRD) and the Lustre client (in the node's kernel) bypass the pod IP stack these
  policies filter.
- triton namespace (:func:`triton_policies`): Triton's HTTP and gRPC ports only from
  namespaces labelled :data:`TRITON_CLIENT_LABEL`, its metrics port only from the CloudWatch
  agent's namespace; egress DNS, HTTPS on public addresses (the archives from S3, through the
  gateway endpoint) and the EKS Pod Identity agent. A NetworkPolicy selects pods, not
  containers: Triton's main container shares the init container's allowance (docs/security.md,
  "Hardening defaults and residual risks").

"HTTPS on public addresses" excludes every private, shared (100.64/10) and link-local block,
so no pod reaches the Kubernetes API, the kubelets, other nodes or IMDS over it.
"""

from __future__ import annotations

__all__ = [
    "TRITON_CLIENT_LABEL",
    "SystemNetworkPolicyChart",
    "TrainingNetworkPolicyChart",
]

from collections.abc import Sequence

import cdk8s
from cdk8s_plus_35 import k8s
from constructs import Construct

from ml_platform.k8s_names import SYSTEM_NAMESPACE_POD_SECURITY, pod_security_labels
from ml_platform.versions import VOLCANO_NAMESPACE

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by Kubernetes on every namespace
TRITON_CLIENT_LABEL = "ml-platform/triton-client"
"""Label (value ``"true"``) of the namespaces whose pods may call Triton's HTTP/gRPC ports."""
METRICS_SCRAPER_NAMESPACE = "amazon-cloudwatch"  # the CloudWatch observability add-on's agent
DNS_NAMESPACE, DNS_LABELS = "kube-system", {"k8s-app": "kube-dns"}  # CoreDNS on EKS
# EKS Pod Identity agent: link-local address on every node, port 80.
# https://docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html
POD_IDENTITY_AGENT = "169.254.170.23/32"
POD_IDENTITY_PORT = 80
LINK_LOCAL = "169.254.0.0/16"  # IMDS among it: HTTPS egress never includes it
NOT_PUBLIC = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", LINK_LOCAL)
"""RFC 1918 private, RFC 6598 shared and link-local blocks: the VPC (whatever its CIDR may be
among them), the cluster's service range (172.20.0.0/16 on EKS) and IMDS. HTTPS egress goes
only to addresses outside them (S3 through the gateway endpoint, the internet through NAT)."""
TORCHX_WORKERS = {"app.kubernetes.io/managed-by": "torchx.pytorch.org"}
"""Label TorchX puts on every pod of the jobs it renders (ml_platform/training/render.py)."""
DATASET_PODS = {"app.kubernetes.io/component": "dataset"}  # k8s_charts/workloads_dataset.py
SYSTEM_NAMESPACES = ("kube-system", VOLCANO_NAMESPACE, METRICS_SCRAPER_NAMESPACE)
"""Namespaces of the cluster's own components (CoreDNS, the device plugins, the FSx CSI
driver, Volcano, the CloudWatch agent): under strict enforcement a pod that no policy selects
gets no traffic, so each gets :class:`SystemNetworkPolicyChart`'s allow-all policy, which is
what standard mode gave them."""


def _port(number: int, protocol: str = "TCP") -> k8s.NetworkPolicyPort:
    return k8s.NetworkPolicyPort(port=k8s.IntOrString.from_number(number), protocol=protocol)


def _namespace(name: str) -> k8s.LabelSelector:
    return k8s.LabelSelector(match_labels={NAMESPACE_NAME_LABEL: name})


def _policy(
    scope: Construct, construct_id: str, namespace: str, name: str, spec: k8s.NetworkPolicySpec
) -> k8s.KubeNetworkPolicy:
    return k8s.KubeNetworkPolicy(
        scope, construct_id, metadata=k8s.ObjectMeta(name=name, namespace=namespace), spec=spec
    )


def default_deny_and_dns(scope: Construct, namespace: str) -> list[k8s.KubeNetworkPolicy]:
    """Deny all ingress and egress of every pod in ``namespace``; allow DNS to CoreDNS."""
    return [
        _policy(
            scope,
            "DefaultDeny",
            namespace,
            "default-deny",
            k8s.NetworkPolicySpec(
                pod_selector=k8s.LabelSelector(), policy_types=["Ingress", "Egress"]
            ),
        ),
        _policy(
            scope,
            "AllowDns",
            namespace,
            "allow-dns",
            k8s.NetworkPolicySpec(
                pod_selector=k8s.LabelSelector(),
                policy_types=["Egress"],
                egress=[
                    k8s.NetworkPolicyEgressRule(
                        to=[
                            k8s.NetworkPolicyPeer(
                                namespace_selector=_namespace(DNS_NAMESPACE),
                                pod_selector=k8s.LabelSelector(match_labels=DNS_LABELS),
                            )
                        ],
                        ports=[_port(53, "UDP"), _port(53, "TCP")],
                    )
                ],
            ),
        ),
    ]


def _https_egress(
    scope: Construct,
    namespace: str,
    pods: k8s.LabelSelector,
    construct_id: str = "AllowHttpsEgress",
    name: str = "allow-https-egress",
) -> k8s.KubeNetworkPolicy:
    """HTTPS from ``pods`` to public addresses only (:data:`NOT_PUBLIC` excluded)."""
    return _policy(
        scope,
        construct_id,
        namespace,
        name,
        k8s.NetworkPolicySpec(
            pod_selector=pods,
            policy_types=["Egress"],
            egress=[
                k8s.NetworkPolicyEgressRule(
                    to=[
                        k8s.NetworkPolicyPeer(
                            ip_block=k8s.IpBlock(cidr="0.0.0.0/0", except_=list(NOT_PUBLIC))
                        )
                    ],
                    ports=[_port(443)],
                )
            ],
        ),
    )


class TrainingNetworkPolicyChart(cdk8s.Chart):
    """Default deny in the training namespace; the TorchX workers talk to each other; workers
    and the dataset job reach CoreDNS and HTTPS on public addresses; the rest (TensorBoard)
    only CoreDNS."""

    def __init__(self, scope: Construct, construct_id: str, *, namespace: str) -> None:
        super().__init__(scope, construct_id)
        workers = k8s.LabelSelector(match_labels=TORCHX_WORKERS)
        self.policies = [
            *default_deny_and_dns(self, namespace),
            _policy(
                self,
                "AllowBetweenWorkers",
                namespace,
                "allow-between-workers",
                k8s.NetworkPolicySpec(
                    pod_selector=workers,
                    policy_types=["Ingress", "Egress"],
                    ingress=[
                        k8s.NetworkPolicyIngressRule(
                            from_=[k8s.NetworkPolicyPeer(pod_selector=workers)]
                        )
                    ],
                    egress=[
                        k8s.NetworkPolicyEgressRule(
                            to=[k8s.NetworkPolicyPeer(pod_selector=workers)]
                        )
                    ],
                ),
            ),
            _https_egress(self, namespace, workers, "AllowHttpsWorkers", "allow-https-workers"),
            _https_egress(
                self,
                namespace,
                k8s.LabelSelector(match_labels=DATASET_PODS),
                "AllowHttpsDataset",
                "allow-https-dataset",
            ),
        ]


class SystemNetworkPolicyChart(cdk8s.Chart):
    """One allow-all NetworkPolicy (ingress and egress, every pod) per system namespace, so
    strict enforcement leaves the cluster's own components as standard mode did; and the
    namespaces that do not exist before the policy must (``create_namespaces``: Volcano's,
    which its Helm chart would otherwise create, and the CloudWatch add-on's), so their pods
    never start without one.

    Args:
        namespaces: Default :data:`SYSTEM_NAMESPACES`.
        create_namespaces: Namespaces this chart creates. Default ``volcano-system`` and
            ``amazon-cloudwatch``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        namespaces: Sequence[str] = SYSTEM_NAMESPACES,
        create_namespaces: Sequence[str] = (VOLCANO_NAMESPACE, METRICS_SCRAPER_NAMESPACE),
    ) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        self.namespaces = [
            k8s.KubeNamespace(
                self,
                f"Namespace-{name}",
                metadata=k8s.ObjectMeta(name=name, labels=_system_pod_security(name)),
            )
            for name in create_namespaces
        ]
        everyone = k8s.LabelSelector()
        self.policies = [
            _policy(
                self,
                f"AllowAll-{name}",
                name,
                "allow-all",
                k8s.NetworkPolicySpec(
                    pod_selector=everyone,
                    policy_types=["Ingress", "Egress"],
                    ingress=[k8s.NetworkPolicyIngressRule()],
                    egress=[k8s.NetworkPolicyEgressRule()],
                ),
            )
            for name in namespaces
        ]


def triton_policies(
    scope: Construct,
    *,
    namespace: str,
    pod_labels: dict[str, str],
    serving_ports: Sequence[int],
    metrics_port: int,
) -> list[k8s.KubeNetworkPolicy]:
    """Default deny in Triton's namespace plus the flows Triton needs (see module doc)."""
    triton = k8s.LabelSelector(match_labels=pod_labels)
    clients = k8s.LabelSelector(match_labels={TRITON_CLIENT_LABEL: "true"})
    return [
        *default_deny_and_dns(scope, namespace),
        _policy(
            scope,
            "AllowServing",
            namespace,
            "allow-serving",
            k8s.NetworkPolicySpec(
                pod_selector=triton,
                policy_types=["Ingress"],
                ingress=[
                    k8s.NetworkPolicyIngressRule(
                        from_=[k8s.NetworkPolicyPeer(namespace_selector=clients)],
                        ports=[_port(p) for p in serving_ports],
                    ),
                    k8s.NetworkPolicyIngressRule(
                        from_=[
                            k8s.NetworkPolicyPeer(
                                namespace_selector=_namespace(METRICS_SCRAPER_NAMESPACE)
                            )
                        ],
                        ports=[_port(metrics_port)],
                    ),
                ],
            ),
        ),
        _https_egress(scope, namespace, triton),
        _policy(
            scope,
            "AllowPodIdentity",
            namespace,
            "allow-pod-identity-agent",
            k8s.NetworkPolicySpec(
                pod_selector=triton,
                policy_types=["Egress"],
                egress=[
                    k8s.NetworkPolicyEgressRule(
                        to=[k8s.NetworkPolicyPeer(ip_block=k8s.IpBlock(cidr=POD_IDENTITY_AGENT))],
                        ports=[_port(POD_IDENTITY_PORT)],
                    )
                ],
            ),
        ),
    ]


def _system_pod_security(namespace: str) -> dict[str, str] | None:
    """Pod Security labels of a system namespace this chart creates
    (:data:`~ml_platform.k8s_names.SYSTEM_NAMESPACE_POD_SECURITY`); none for others."""
    level = SYSTEM_NAMESPACE_POD_SECURITY.get(namespace)
    if level is None:
        return None
    return pod_security_labels(level, "baseline" if level == "privileged" else "restricted")
