"""NetworkPolicies: default deny in the namespaces we own, with only the flows they need.

The VPC CNI enforces them once its network policy agent is on (``enableNetworkPolicy`` in
the add-on configuration, :data:`ml_platform.constructs.addons.ADDON_CONFIGURATION`).
https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy.html

- training namespace: pods talk to each other (torchrun's c10d rendezvous on the first pod,
  the workers' collective setup, TensorBoard reading the same FSx), resolve names through
  CoreDNS, and reach HTTPS endpoints (the dataset job downloads from S3; training scripts may
  fetch from model hubs). Nothing outside the namespace may connect in. EFA traffic (SRD)
  bypasses the IP stack these policies filter.
- triton namespace (:func:`triton_policies`): Triton's HTTP and gRPC ports only from
  namespaces labelled :data:`TRITON_CLIENT_LABEL`, its metrics port only from the CloudWatch
  agent's namespace; egress DNS, HTTPS (the archives from S3) and the EKS Pod Identity agent.
"""

from __future__ import annotations

from collections.abc import Sequence

import cdk8s
from cdk8s_plus_35 import k8s
from constructs import Construct

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

_port = lambda number, protocol="TCP": k8s.NetworkPolicyPort(
    port=k8s.IntOrString.from_number(number), protocol=protocol
)


def _namespace(name: str) -> k8s.LabelSelector:
    return k8s.LabelSelector(match_labels={NAMESPACE_NAME_LABEL: name})


def _policy(scope: Construct, construct_id: str, namespace: str, name: str, spec: k8s.NetworkPolicySpec):
    return k8s.KubeNetworkPolicy(
        scope, construct_id, metadata=k8s.ObjectMeta(name=name, namespace=namespace), spec=spec
    )


def default_deny_and_dns(scope: Construct, namespace: str) -> list[k8s.KubeNetworkPolicy]:
    """Deny all ingress and egress of every pod in ``namespace``; allow DNS to CoreDNS."""
    return [
        _policy(
            scope, "DefaultDeny", namespace, "default-deny",
            k8s.NetworkPolicySpec(pod_selector=k8s.LabelSelector(), policy_types=["Ingress", "Egress"]),
        ),
        _policy(
            scope, "AllowDns", namespace, "allow-dns",
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


def _https_egress(scope: Construct, namespace: str, pods: k8s.LabelSelector) -> k8s.KubeNetworkPolicy:
    return _policy(
        scope, "AllowHttpsEgress", namespace, "allow-https-egress",
        k8s.NetworkPolicySpec(
            pod_selector=pods,
            policy_types=["Egress"],
            egress=[
                k8s.NetworkPolicyEgressRule(
                    to=[k8s.NetworkPolicyPeer(ip_block=k8s.IpBlock(cidr="0.0.0.0/0", except_=[LINK_LOCAL]))],
                    ports=[_port(443)],
                )
            ],
        ),
    )


class TrainingNetworkPolicyChart(cdk8s.Chart):
    """Default deny in the training namespace; pods of the namespace talk to each other,
    to CoreDNS and to HTTPS endpoints outside the cluster's link-local range."""

    def __init__(self, scope: Construct, construct_id: str, *, namespace: str) -> None:
        super().__init__(scope, construct_id)
        everyone = k8s.LabelSelector()
        self.policies = [
            *default_deny_and_dns(self, namespace),
            _policy(
                self, "AllowWithinNamespace", namespace, "allow-within-namespace",
                k8s.NetworkPolicySpec(
                    pod_selector=everyone,
                    policy_types=["Ingress", "Egress"],
                    ingress=[k8s.NetworkPolicyIngressRule(from_=[k8s.NetworkPolicyPeer(pod_selector=everyone)])],
                    egress=[k8s.NetworkPolicyEgressRule(to=[k8s.NetworkPolicyPeer(pod_selector=everyone)])],
                ),
            ),
            _https_egress(self, namespace, everyone),
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
            scope, "AllowServing", namespace, "allow-serving",
            k8s.NetworkPolicySpec(
                pod_selector=triton,
                policy_types=["Ingress"],
                ingress=[
                    k8s.NetworkPolicyIngressRule(
                        from_=[k8s.NetworkPolicyPeer(namespace_selector=clients)],
                        ports=[_port(p) for p in serving_ports],
                    ),
                    k8s.NetworkPolicyIngressRule(
                        from_=[k8s.NetworkPolicyPeer(namespace_selector=_namespace(METRICS_SCRAPER_NAMESPACE))],
                        ports=[_port(metrics_port)],
                    ),
                ],
            ),
        ),
        _https_egress(scope, namespace, triton),
        _policy(
            scope, "AllowPodIdentity", namespace, "allow-pod-identity-agent",
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
