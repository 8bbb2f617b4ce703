"""EKS managed add-ons at pinned versions, with Pod Identity for those that call AWS.

Pod Identity associations are created before their add-on, so the add-on's pods start with
credentials. Service-account roles trust ``pods.eks.amazonaws.com`` only.
"""

from __future__ import annotations

__all__ = [
    "ADDON_FLOATS_WARNING",
    "NETWORK_POLICY_MODES",
    "PlatformAddons",
    "PlatformAddonsProps",
    "PodIdentityAddon",
    "PodIdentityAddonProps",
]

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import Annotations
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct, IDependable

from ml_platform import limits
from ml_platform.constructs._nag import acknowledge, aws_managed_policy, managed_policy_finding
from ml_platform.constructs._props import check_props
from ml_platform.limits import shown
from ml_platform.props.addons import PlatformAddonsPropsBase
from ml_platform.versions import EKS_ADDON_VERSIONS

# The VPC CNI enforces NetworkPolicies only with its network policy agent switched on, and in
# strict mode only gates every new pod (default deny until its policies are programmed, and
# for a pod no policy selects); standard mode lets a new pod talk freely until then. The mode
# is the aws-node container's NETWORK_POLICY_ENFORCING_MODE, set through the add-on's `env`.
# https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html
# https://github.com/aws/aws-network-policy-agent/pull/209 (strict mode)
NETWORK_POLICY_MODES = limits.NETWORK_POLICY_MODES


def vpc_cni_configuration(
    network_policy_mode: str = limits.DEFAULT_NETWORK_POLICY_MODE,
) -> dict[str, object]:
    """Configuration values of the vpc-cni add-on: network policies on, in ``network_policy_mode``."""
    return {
        "enableNetworkPolicy": "true",
        "env": {"NETWORK_POLICY_ENFORCING_MODE": network_policy_mode},
    }


ADDON_CONFIGURATION: dict[str, dict[str, object]] = {
    "vpc-cni": vpc_cni_configuration(),
    # The training dashboard reads Container Insights' enhanced-observability metrics,
    # Neuron and EFA included (namespace ContainerInsights). The add-on's chart already
    # defaults to enhanced_container_insights and the agent to accelerated_compute_metrics,
    # runs neuron-monitor on Neuron nodes and tolerates every taint (root tolerations
    # `operator: Exists`, so the aws.amazon.com/neuron taint too):
    # aws-observability/helm-charts, charts/amazon-cloudwatch-observability/values.yaml;
    # amazon-cloudwatch-agent, translator/.../awscontainerinsight/utils.go. Set here anyway,
    # because the configuration replaces the defaults as a whole and newer add-on versions
    # also offer an OTel mode with other metric names:
    # https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/install-CloudWatch-Observability-EKS-addon.html
    # https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/eks-observability-addon-configure.html
    "amazon-cloudwatch-observability": {
        "agent": {
            "config": {
                "logs": {
                    "metrics_collected": {
                        "kubernetes": {
                            "enhanced_container_insights": True,
                            "accelerated_compute_metrics": True,
                        }
                    }
                }
            }
        }
    },
}
FSX_CSI_SERVICE_ACCOUNT = ("kube-system", "fsx-csi-controller-sa")
VPC_CNI_SERVICE_ACCOUNT = ("kube-system", "aws-node")
"""The VPC CNI's service account: its Pod Identity role carries ``AmazonEKS_CNI_Policy``
instead of the node roles (https://docs.aws.amazon.com/eks/latest/userguide/cni-iam-role.html;
add-ons that call AWS get their role through Pod Identity:
https://docs.aws.amazon.com/eks/latest/userguide/add-ons-iam.html)."""
VPC_CNI_POLICY = "AmazonEKS_CNI_Policy"
CLOUDWATCH_SERVICE_ACCOUNT = ("amazon-cloudwatch", "cloudwatch-agent")
NODE_MONITORING_AGENT = "eks-node-monitoring-agent"
"""The EKS node monitoring agent: node conditions (accelerated hardware, Neuron included;
kernel, networking, storage, container runtime) that EKS node auto repair acts on
(https://docs.aws.amazon.com/eks/latest/userguide/node-health.html). Its chart tolerates every
taint and runs on the host network (aws/eks-node-monitoring-agent v1.7.0,
charts/eks-node-monitoring-agent: values.yaml ``nodeAgent.tolerations``,
templates/daemonset.yaml ``hostNetwork``), so it reaches the Trainium and GPU nodes and no
NetworkPolicy applies to it."""
PLATFORM_ADDONS = (
    "vpc-cni",
    "kube-proxy",
    "eks-pod-identity-agent",
    "coredns",
    "aws-fsx-csi-driver",
    "amazon-cloudwatch-observability",
    NODE_MONITORING_AGENT,
)
"""Every add-on :class:`PlatformAddons` installs (each pinned per Kubernetes version in
:data:`~ml_platform.versions.EKS_ADDON_VERSIONS`)."""
POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"
# Warning id of an add-on installed at EKS's default version (no pin): acknowledge it with
# ``Annotations.of(addons).acknowledge_warning(ADDON_FLOATS_WARNING)`` once reviewed.
ADDON_FLOATS_WARNING = "ml-platform:addonVersionFloats"


def pod_identity_principal(
    cluster_arn: str, namespace: str, service_account: str
) -> iam.IPrincipal:
    """EKS Pod Identity as a role's principal, limited to one cluster, namespace and service
    account through the session tags Pod Identity sets (with ``sts:TagSession``), so no
    other association in the account can take the role.

    The cluster is named by its ARN (tag ``eks-cluster-arn``), not by ``eks-cluster-name``:
    a name is unique only per region, so a cluster of the same name in another region of the
    account could otherwise take the role.
    https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html
    https://docs.aws.amazon.com/eks/latest/userguide/pod-id-abac.html (the session tags)
    """
    return iam.SessionTagsPrincipal(
        iam.ServicePrincipal(
            POD_IDENTITY_PRINCIPAL,
            conditions={
                "StringEquals": {
                    "aws:RequestTag/eks-cluster-arn": cluster_arn,
                    "aws:RequestTag/kubernetes-namespace": namespace,
                    "aws:RequestTag/kubernetes-service-account": service_account,
                }
            },
        )
    )


def pod_identity_role(
    scope: Construct,
    role_id: str,
    association_id: str,
    *,
    cluster: eks.ICluster,
    namespace: str,
    service_account: str,
    purpose: str,
    managed_policies: Sequence[str] = (),
) -> tuple[iam.Role, eks.CfnPodIdentityAssociation]:
    """A role only ``namespace/service_account`` of ``cluster`` may take through EKS Pod
    Identity (:func:`pod_identity_principal`), and its association."""
    role = iam.Role(
        scope,
        role_id,
        assumed_by=pod_identity_principal(cluster.cluster_arn, namespace, service_account),
        description=f"EKS Pod Identity role of {namespace}/{service_account} ({purpose})",
        managed_policies=[aws_managed_policy(p) for p in managed_policies],
    )
    association = eks.CfnPodIdentityAssociation(
        scope,
        association_id,
        cluster_name=cluster.cluster_name,
        namespace=namespace,
        service_account=service_account,
        role_arn=role.role_arn,
    )
    return role, association


@dataclass(frozen=True, kw_only=True)
class PodIdentityAddonProps:
    """The value props of :class:`PodIdentityAddon` (EKS checks the names at deploy time)."""

    addon_name: str
    """Add-on name. Required."""
    addon_version: str | None
    """Add-on version. Required: a version, or ``None`` for EKS's default version of the
    cluster's Kubernetes version."""
    namespace: str
    """Namespace of the add-on's service account. Required."""
    service_account: str
    """Name of that service account. Required."""
    managed_policies: tuple[str, ...] = ()
    """AWS managed policy names for the role. Default none."""


class PodIdentityAddon(Construct):
    """An EKS add-on whose service account gets an IAM role through EKS Pod Identity.

    Args:
        cluster: The cluster. Required.
        props: The add-on and its service account (:class:`PodIdentityAddonProps`). Required.
        statements: Inline policy statements for the role. Default none.

    Attributes:
        role: The service account's role.
        association: The ``CfnPodIdentityAssociation``.
        addon: The ``eks_v2.Addon`` (created after the association).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        props: PodIdentityAddonProps,
        statements: Sequence[iam.PolicyStatement] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        #: The value props.
        self.props = props
        self.role, self.association = pod_identity_role(
            self,
            "Role",
            "PodIdentity",
            cluster=cluster,
            namespace=props.namespace,
            service_account=props.service_account,
            purpose=props.addon_name,
            managed_policies=props.managed_policies,
        )
        for statement in statements:
            self.role.add_to_principal_policy(statement)
        self.addon = eks.Addon(
            self,
            "Resource",
            cluster=cluster,
            addon_name=props.addon_name,
            addon_version=props.addon_version,
            configuration_values=ADDON_CONFIGURATION.get(props.addon_name),
        )
        # The association, and the role's policy, exist before the add-on's pods first call AWS.
        self.addon.node.add_dependency(self.association, self.role)


@dataclass(frozen=True, kw_only=True)
class PlatformAddonsProps(PlatformAddonsPropsBase):
    """The value props of :class:`PlatformAddons`: ``network_policy_mode`` (shared with the
    settings' ``cluster`` section, :class:`~ml_platform.props.addons.PlatformAddonsPropsBase`)
    and the construct's own below."""

    kubernetes_version: str
    """Selects the pins (:data:`~ml_platform.versions.EKS_ADDON_VERSIONS`; an add-on pinned to
    ``None`` gets EKS's default version). Required."""
    addon_versions: Mapping[str, str] | None = None
    """Versions that replace the pins, by add-on name. Default none."""

    def pins(self) -> dict[str, str | None]:
        """The pinned version of every add-on for ``kubernetes_version`` (``None``: EKS's
        default); empty when that version has no pins."""
        pinned = EKS_ADDON_VERSIONS.get(self.kubernetes_version, {})
        return {name: pinned[name] for name in PLATFORM_ADDONS if name in pinned}

    def construct_problems(self) -> list[str]:
        """The problems of the construct's own props, each naming the prop."""
        pinned = EKS_ADDON_VERSIONS.get(self.kubernetes_version)
        if pinned is None:
            return [
                f"kubernetes_version = {shown(self.kubernetes_version)}: add-on versions are "
                f"pinned for {sorted(EKS_ADDON_VERSIONS)}"
            ]
        out = [
            f"kubernetes_version = {shown(self.kubernetes_version)}: no pin of {name!r}"
            for name in PLATFORM_ADDONS
            if name not in pinned
        ]
        unknown = sorted(set(self.addon_versions or {}) - set(PLATFORM_ADDONS))
        if unknown:
            out.append(
                f"addon_versions = {shown(dict(self.addon_versions or {}))}: unknown add-ons "
                f"{unknown}; expected among {sorted(PLATFORM_ADDONS)}"
            )
        return out


class PlatformAddons(Construct):
    """The cluster's managed add-ons, each at the version pinned for the Kubernetes version.

    - ``vpc-cni``, ``kube-proxy`` and ``eks-pod-identity-agent`` first: nodes need them to
      become ready (``node_dependents`` wait for them).
    - ``vpc-cni`` (service account ``kube-system/aws-node``) gets ``AmazonEKS_CNI_Policy`` on
      a Pod Identity role of its own (:data:`VPC_CNI_SERVICE_ACCOUNT`), created before the
      add-on; node roles do not carry it.
    - ``coredns``, ``aws-fsx-csi-driver`` and ``amazon-cloudwatch-observability`` after
      ``nodes_ready``: their Deployments need somewhere to run.
    - The FSx CSI controller's role may only describe file systems: the platform's file
      system is made by CDK and provisioned statically, so the driver never creates, resizes
      or deletes one. For dynamic provisioning add statements to ``fsx_csi_driver.role``.
    - The CloudWatch agent's role has ``CloudWatchAgentServerPolicy`` (Container Insights,
      including Neuron and EFA metrics).
    - ``eks-node-monitoring-agent`` (:data:`NODE_MONITORING_AGENT`) reports node health that
      the node groups' auto repair acts on.

    Args:
        cluster: The cluster. Required.
        props: The Kubernetes version, version overrides and NetworkPolicy mode
            (:class:`PlatformAddonsProps`). Required.
        nodes_ready: What the node-dependent add-ons wait for (e.g. the system node group).
            Default nothing.

    Attributes:
        addons: Every ``eks_v2.Addon`` by name.
        vpc_cni_role: The VPC CNI's Pod Identity role.
        fsx_csi_driver: The :class:`PodIdentityAddon` of the FSx CSI driver.
        cloudwatch: The :class:`PodIdentityAddon` of CloudWatch observability.
    """

    NETWORKING = PLATFORM_ADDONS[:3]

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        props: PlatformAddonsProps,
        nodes_ready: Sequence[IDependable] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        #: The value props, as checked.
        self.props = props
        check_props(self, props, PlatformAddonsPropsBase, *props.construct_problems())
        configuration: dict[str, dict[str, object]] = {
            **ADDON_CONFIGURATION,
            "vpc-cni": vpc_cni_configuration(props.network_policy_mode),
        }
        self.versions: dict[str, str | None] = {**props.pins(), **(props.addon_versions or {})}
        pins = self.versions
        self._warn_floating(props.kubernetes_version)
        self.addons: dict[str, eks.Addon] = {}
        self._networking_addons(cluster, pins, configuration)
        self._later_addons(cluster, pins)
        agent = self.addons["eks-pod-identity-agent"]
        if nodes_ready:
            for late in (self.addons["coredns"], self.fsx_csi_driver.addon, self.cloudwatch.addon):
                late.node.add_dependency(*nodes_ready)
        for with_identity in (self.fsx_csi_driver.addon, self.cloudwatch.addon):
            with_identity.node.add_dependency(agent)

    def _warn_floating(self, kubernetes_version: str) -> None:
        """Warn about the add-ons without a pinned version."""
        floating = sorted(name for name, version in self.versions.items() if version is None)
        if floating:
            # EKS picks its default build for the Kubernetes version when none is given, and
            # that default moves as EKS publishes builds: the same template can install
            # different code on two deploys.
            # https://docs.aws.amazon.com/eks/latest/userguide/creating-an-add-on.html
            Annotations.of(self).add_warning_v2(
                ADDON_FLOATS_WARNING,
                f"{self.node.path}: add-ons {floating} have no pinned version: EKS installs its "
                f"default build for Kubernetes {kubernetes_version}, which changes when EKS "
                "publishes a new one. Pin each in addon_versions once `mlp addons` (EKS "
                "DescribeAddonVersions) shows the build exists.",
            )

    def _networking_addons(
        self,
        cluster: eks.ICluster,
        pins: Mapping[str, str | None],
        configuration: Mapping[str, Mapping[str, object]],
    ) -> None:
        """vpc-cni (with its Pod Identity role), kube-proxy and the Pod Identity agent."""
        for name in self.NETWORKING:
            self.addons[name] = eks.Addon(
                self,
                _construct_id(name),
                cluster=cluster,
                addon_name=name,
                addon_version=pins[name],
                configuration_values=configuration.get(name),
            )
        # The add-on keeps its construct id (a new logical ID would create a second add-on of
        # the same name); its role and association are siblings it waits for.
        namespace, account = VPC_CNI_SERVICE_ACCOUNT
        self.vpc_cni_role, self.vpc_cni_association = pod_identity_role(
            self,
            "VpcCniRole",
            "VpcCniPodIdentity",
            cluster=cluster,
            namespace=namespace,
            service_account=account,
            purpose="vpc-cni",
            managed_policies=[VPC_CNI_POLICY],
        )
        self.addons["vpc-cni"].node.add_dependency(
            self.vpc_cni_role, self.vpc_cni_association, self.addons["eks-pod-identity-agent"]
        )
        acknowledge(
            self.vpc_cni_role,
            managed_policy_finding(VPC_CNI_POLICY),
            "The EKS user guide names this AWS-maintained policy for the VPC CNI and recommends "
            "a role of its own; it manages the ENIs and addresses of pods.",
        )

    def _later_addons(self, cluster: eks.ICluster, pins: Mapping[str, str | None]) -> None:
        """CoreDNS, and the FSx CSI driver and CloudWatch with their Pod Identity roles."""
        self.addons["coredns"] = eks.Addon(
            self, "Coredns", cluster=cluster, addon_name="coredns", addon_version=pins["coredns"]
        )

        namespace, account = FSX_CSI_SERVICE_ACCOUNT
        self.fsx_csi_driver = PodIdentityAddon(
            self,
            "FsxCsiDriver",
            cluster=cluster,
            props=PodIdentityAddonProps(
                addon_name="aws-fsx-csi-driver",
                addon_version=pins["aws-fsx-csi-driver"],
                namespace=namespace,
                service_account=account,
            ),
            # Static provisioning only: the driver looks file systems up, never makes one.
            statements=[iam.PolicyStatement(actions=["fsx:DescribeFileSystems"], resources=["*"])],
        )
        namespace, account = CLOUDWATCH_SERVICE_ACCOUNT
        self.cloudwatch = PodIdentityAddon(
            self,
            "CloudWatch",
            cluster=cluster,
            props=PodIdentityAddonProps(
                addon_name="amazon-cloudwatch-observability",
                addon_version=pins["amazon-cloudwatch-observability"],
                namespace=namespace,
                service_account=account,
                managed_policies=("CloudWatchAgentServerPolicy",),
            ),
        )
        acknowledge(
            self.fsx_csi_driver.role,
            "AwsSolutions-IAM5[Resource::*]",
            "The only action is the read-only fsx:DescribeFileSystems, which the driver uses to "
            "look a volume's file system up by id.",
        )
        acknowledge(
            self.cloudwatch.role,
            managed_policy_finding("CloudWatchAgentServerPolicy"),
            "The EKS add-on documentation names this AWS-maintained policy for the CloudWatch "
            "agent; it lets the agent publish metrics and logs.",
        )
        self.addons["aws-fsx-csi-driver"] = self.fsx_csi_driver.addon
        self.addons["amazon-cloudwatch-observability"] = self.cloudwatch.addon
        # A DaemonSet on the host network that calls no AWS API (EKS acts on the node
        # conditions it sets): no role, and nothing to wait for.
        self.addons[NODE_MONITORING_AGENT] = eks.Addon(
            self,
            "NodeMonitoringAgent",
            cluster=cluster,
            addon_name=NODE_MONITORING_AGENT,
            addon_version=pins[NODE_MONITORING_AGENT],
        )

    def node_dependents(self) -> list[IDependable]:
        """What node groups must wait for: the add-ons that make a node ready."""
        return [self.addons[name] for name in self.NETWORKING]


def _construct_id(addon_name: str) -> str:
    return "".join(part.capitalize() for part in addon_name.split("-"))
