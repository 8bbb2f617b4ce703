"""The EKS cluster of the platform: native ``AWS::EKS::Cluster`` (aws_eks_v2), managed node
groups instead of Auto Mode, access entries, full control-plane logging, KMS-encrypted
secrets, and a small system node group for cluster services."""

from __future__ import annotations

__all__ = [
    "OPEN_TO_WORLD_WARNING",
    "TrainingEksCluster",
    "TrainingEksClusterProps",
    "as_icluster",
    "kubectl_layer",
]

import importlib
import ipaddress
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from aws_cdk import Annotations, DefaultStackSynthesizer, Fn, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from ml_platform import limits
from ml_platform.constructs._kms import restrict_grants
from ml_platform.constructs._l1 import default_child, find_child
from ml_platform.constructs._nag import (
    acknowledge,
    acknowledge_controls,
    acknowledge_each,
    managed_policy_finding,
    rendered_resource,
)

# Re-exported: the node-group building block's names that lived here (public module).
from ml_platform.constructs._nodegroup import (
    IMDS_HOP_LIMIT as IMDS_HOP_LIMIT,
)
from ml_platform.constructs._nodegroup import (
    NODE_AUTO_REPAIR,
    launch_template_spec,
)
from ml_platform.constructs._nodegroup import (
    NODE_ROLE_POLICIES as NODE_ROLE_POLICIES,
)
from ml_platform.constructs._nodegroup import (
    NODE_ROLE_REASONS as NODE_ROLE_REASONS,
)
from ml_platform.constructs._nodegroup import (
    SSM_NODE_POLICY as SSM_NODE_POLICY,
)
from ml_platform.constructs._nodegroup import (
    acknowledge_node_role as acknowledge_node_role,
)
from ml_platform.constructs._nodegroup import (
    configure_node_role as configure_node_role,
)
from ml_platform.constructs._nodegroup import (
    hardened_launch_template as hardened_launch_template,
)
from ml_platform.constructs._nodegroup import (
    node_role_policies as node_role_policies,
)
from ml_platform.constructs._props import check_props
from ml_platform.constructs.storage import RETAIN
from ml_platform.k8s_names import NODE_GROUP_LABEL, NODE_ROLE_LABEL, TRAINING_HELPERS
from ml_platform.props.cluster import TrainingEksClusterPropsBase

# The names are the settings' (limits.ENDPOINT_ACCESS), each mapped to its EKS value.
ENDPOINT_ACCESS = dict(
    zip(
        limits.ENDPOINT_ACCESS,
        (eks.EndpointAccess.PUBLIC_AND_PRIVATE, eks.EndpointAccess.PRIVATE),
        strict=True,
    )
)
KUBECTL_LAYERS = {
    "1.34": ("aws_cdk.lambda_layer_kubectl_v34", "KubectlV34Layer"),
    "1.35": ("aws_cdk.lambda_layer_kubectl_v35", "KubectlV35Layer"),
}
"""kubectl Lambda layer (module, class) per Kubernetes version: kubectl must be within one minor
version of the server. Imported lazily (:func:`kubectl_layer`), so synthesis loads one only."""
EKS_VERSIONS = {"1.34": eks.KubernetesVersion.V1_34, "1.35": eks.KubernetesVersion.V1_35}
"""aws_eks_v2's named version per Kubernetes version."""
OPEN_TO_WORLD_WARNING = "ml-platform:publicEndpointOpenToWorld"
ENDPOINT_DOCS = (
    "https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html; Security Hub EKS.1 "
    "https://docs.aws.amazon.com/securityhub/latest/userguide/eks-controls.html#eks-1"
)
"""Why the API endpoint is private by default: Security Hub's EKS.1 control fails a cluster
whose endpoint is publicly accessible, and a public endpoint open to 0.0.0.0/0 leaves only
IAM authentication between the internet and the Kubernetes API."""


def kubectl_layer(
    scope: Construct, construct_id: str, kubernetes_version: str
) -> lambda_.ILayerVersion:
    """The kubectl Lambda layer for ``kubernetes_version`` (a key of :data:`KUBECTL_LAYERS`)."""
    module, name = KUBECTL_LAYERS[kubernetes_version]
    layer: lambda_.ILayerVersion = getattr(importlib.import_module(module), name)(
        scope, construct_id
    )
    return layer


def as_icluster(cluster: eks.Cluster) -> eks.ICluster:
    """``cluster`` typed as the ``ICluster`` it implements: aws-cdk's jsii Python stubs leave
    the optional ``kubectl_provider_options`` of ``ICluster`` off the ``Cluster`` class, so a
    type checker does not see that ``Cluster`` is one."""
    return cast(eks.ICluster, cluster)


@dataclass(frozen=True, kw_only=True)
class TrainingEksClusterProps(TrainingEksClusterPropsBase):
    """The value props of :class:`TrainingEksCluster`: the ones the ``cluster`` settings share
    (:class:`~ml_platform.props.cluster.TrainingEksClusterPropsBase`, which holds their rules)
    and the construct's own."""

    cluster_name: str | None = None
    """Default: CloudFormation names the cluster (unique per stack and construct), so several
    clusters can share an account and region."""
    bootstrap_creator_admin: bool = False
    """``BootstrapClusterCreatorAdminPermissions``: give the principal that creates the cluster
    (CloudFormation's execution role) a permanent cluster-admin access entry. Default false:
    aws-cdk's kubectl provider has an access entry of its own (``ClusterAdminRoleAccess``),
    which is all the stack needs. Changing it replaces the cluster (CloudFormation: "Update
    requires: Replacement"), so a cluster deployed with the old default keeps it only by setting
    true. (The settings' ``cluster.bootstrap_creator_admin`` is ``bool | None``: unset warns.)"""
    removal_policy: RemovalPolicy | None = None
    """Applied to the cluster and its node groups. Default: CloudFormation's (delete)."""


def restrict_cluster_role_trust(cluster: eks.Cluster, cluster_name: str | None) -> None:
    """Confused-deputy guard on the cluster role aws-cdk made: only EKS acting for this
    account's cluster may assume it (``aws:SourceArn`` the cluster's ARN, ``aws:SourceAccount``
    the account), as the EKS user guide recommends for cluster roles.
    https://docs.aws.amazon.com/eks/latest/userguide/cross-service-confused-deputy-prevention.html

    The condition goes onto the SAME role's trust policy in place (updating
    ``AssumeRolePolicyDocument`` is "Update requires: No interruption", see
    docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-iam-role.html);
    passing another role would change the cluster's ``RoleArn`` and replace the cluster.
    The ARN is formatted from the name, not from ``cluster.cluster_arn``: the cluster
    references the role, so a reference back would be circular. Without a name
    CloudFormation names the cluster, so any cluster of the account and region matches.
    """
    stack = Stack.of(cluster)
    cluster_arn = stack.format_arn(
        service="eks", resource="cluster", resource_name=cluster_name or "*"
    )
    role = default_child(cluster.role, iam.CfnRole)
    role.add_property_override(
        "AssumeRolePolicyDocument.Statement.0.Condition",
        {
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnLike": {"aws:SourceArn": cluster_arn},
        },
    )


#: What the kubectl-provider guard denies on the provider's functions: running them (any
#: way Lambda offers: direct invocation, a function URL, a new resource-policy grant) and
#: changing the code, layers, environment or aliases they run with.
KUBECTL_PROVIDER_GUARDED_ACTIONS = (
    "lambda:InvokeFunction",
    "lambda:InvokeFunctionUrl",
    "lambda:UpdateFunctionCode",
    "lambda:UpdateFunctionConfiguration",
    "lambda:AddPermission",
    "lambda:CreateFunctionUrlConfig",
    "lambda:UpdateFunctionUrlConfig",
    "lambda:PublishVersion",
    "lambda:CreateAlias",
    "lambda:UpdateAlias",
)


class TrainingEksCluster(Construct):
    """An EKS cluster whose nodes live in the VPC's private subnets.

    - ``eks_v2.Cluster`` with managed node groups (not Auto Mode) and a kubectl provider, so
      manifests and Helm charts can be applied from the stack.
    - Authentication through EKS access entries only; ``admin_role_arn`` gets cluster-admin.
    - All five control-plane log types; secrets envelope-encrypted with a KMS key that rotates.
    - Self-managed add-ons are not bootstrapped: pinned managed add-ons
      (:class:`~ml_platform.constructs.addons.PlatformAddons`) install them.
    - A system node group (AL2023 standard AMI, label ``ml-platform/node-role=system``,
      encrypted gp3 root, IMDSv2) for CoreDNS, Volcano and helper pods, over the private
      subnets of every AZ.
    - With ``helper_subnet``, a training-helper node group: the same nodes (launch template,
      node role, AMI, instance type, label) in that one subnet, the Trainium AZ's, where FSx
      for Lustre is, so the helper pods that mount it can be required to run there.

    Args:
        vpc: The VPC; the control plane ENIs and all nodes use its private subnets. Required.
        props: The value props (:class:`TrainingEksClusterProps`, each described there).
            Default: all defaults (a private endpoint, no admin role).
        helper_subnet: Private subnet of the Trainium (FSx) AZ: the training-helper node
            group's only subnet. Default none: no such group.
        system_node_security_groups: Further groups of the system nodes besides the cluster
            security group (e.g. the Lustre client group: the helper pods that mount FSx run
            there). Default none.

    Attributes:
        cluster: The ``eks_v2.Cluster``.
        secrets_key: The KMS key encrypting Kubernetes secrets.
        system_nodes: The system ``eks_v2.Nodegroup``.
        helper_nodes: The training-helper ``eks_v2.Nodegroup`` (``None`` without
            ``helper_subnet``).
        system_node_groups: Both groups of system-role nodes (system, then training-helper).
        admin_access: The ``AccessEntry`` of ``admin_role_arn`` (``None`` without one).
        kubectl_provider_guard: The guard policy (``None`` unless asked for).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        props: TrainingEksClusterProps = TrainingEksClusterProps(),
        helper_subnet: ec2.ISubnet | None = None,
        system_node_security_groups: Sequence[ec2.ISecurityGroup] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        check_props(self, props, TrainingEksClusterPropsBase)
        #: The value props, as checked.
        self.props = props
        cluster_name = props.cluster_name
        removal_policy = props.removal_policy

        access = self._endpoint_access(props.endpoint_access, list(props.public_access_cidrs))

        self.secrets_key = kms.Key(
            self,
            "SecretsKey",
            description=f"Envelope encryption of Kubernetes secrets in EKS cluster "
            f"{cluster_name or self.node.path}",
            enable_key_rotation=True,
            removal_policy=RETAIN,  # a failed first create schedules it for deletion
        )
        restrict_grants(self.secrets_key)
        self.cluster = eks.Cluster(
            self,
            "Resource",
            cluster_name=cluster_name,
            version=EKS_VERSIONS[props.kubernetes_version],
            vpc=vpc,
            vpc_subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)],
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            bootstrap_self_managed_addons=False,
            # aws-cdk gives its kubectl provider role an access entry of its own
            # (ClusterAdminRoleAccess, which KubectlReadyBarrier waits for), so the creator's
            # permanent entry is not needed for anything the stack applies.
            bootstrap_cluster_creator_admin_permissions=props.bootstrap_creator_admin,
            endpoint_access=access,
            secrets_encryption_key=self.secrets_key,
            cluster_logging=list(eks.ClusterLoggingTypes),
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=kubectl_layer(self, "KubectlLayer", props.kubernetes_version)
            ),
            output_config_command=False,
            removal_policy=removal_policy,
        )
        # eks_v2.Cluster has no prop for it: set it on the AWS::EKS::Cluster itself.
        default_child(self.cluster, eks.CfnCluster).add_property_override(
            "UpgradePolicy.SupportType", props.support_type
        )
        restrict_cluster_role_trust(self.cluster, cluster_name)
        self.admin_access: eks.AccessEntry | None = None
        if props.admin_role_arn is not None:
            self.admin_access = self.cluster.grant_cluster_admin(
                "AdminAccess", props.admin_role_arn
            )

        self._system_node_group(
            props.system_instance_type,
            props.system_nodes,
            system_node_security_groups,
            removal_policy,
        )
        self.helper_nodes: eks.Nodegroup | None = None
        if helper_subnet is not None:
            self.helper_nodes = self._helper_node_group(
                props.system_instance_type, props.helper_nodes, helper_subnet, removal_policy
            )
        self._acknowledge_findings(props.node_ssm_access)
        self.kubectl_provider_guard: iam.ManagedPolicy | None = (
            self._kubectl_provider_guard() if props.kubectl_provider_guard else None
        )

    def _kubectl_provider_guard(self) -> iam.ManagedPolicy:
        """A managed policy denying what makes a principal act as aws-cdk's kubectl provider,
        which is cluster-admin (its role has an access entry, and ``KubernetesObjectValue`` reads
        any object back, Secrets included): invoking or changing the provider's two functions,
        and passing the handler's role to another function. Lambda function policies cannot
        deny, so the guard is on the identity side: attach it (or copy it into a permissions
        boundary or SCP) to every role that is not a cluster administrator. CloudFormation's
        execution role and the provider framework's own role, which invoke the functions during
        deploys, are exempt (``aws:PrincipalArn``). It also denies Session Manager sessions on
        the cluster's nodes (a root shell there), which stay break-glass for administrators."""
        provider = self.cluster.kubectl_provider
        if provider is None:  # eks_v2.Cluster always makes one
            raise TypeError(f"{self.node.path}: the cluster has no kubectl provider")
        handler = find_child(provider, "Handler", lambda_.Function)
        framework = find_child(
            provider.node.find_child("Provider"), "framework-onEvent", lambda_.Function
        )
        if handler.role is None or framework.role is None:
            raise TypeError(f"{provider.node.path}: a provider function has no role")
        stack = Stack.of(self)
        exempt = [framework.role.role_arn]
        if isinstance(stack.synthesizer, DefaultStackSynthesizer):
            exempt.append(Fn.sub(stack.synthesizer.cloud_formation_execution_role_arn))
        unless = {"ArnNotLike": {"aws:PrincipalArn": exempt}}
        functions = [
            f"{function.function_arn}{suffix}"
            for function in (handler, framework)
            for suffix in ("", ":*")
        ]
        return iam.ManagedPolicy(
            self,
            "KubectlProviderGuard",
            description="Deny acting as the cluster's kubectl provider (cluster-admin) to all "
            "but CloudFormation and the provider framework; attach to non-administrators",
            statements=[
                iam.PolicyStatement(
                    sid="NoKubectlProviderInvokeOrChange",
                    effect=iam.Effect.DENY,
                    actions=list(KUBECTL_PROVIDER_GUARDED_ACTIONS),
                    resources=functions,
                    conditions=unless,
                ),
                iam.PolicyStatement(
                    sid="NoKubectlProviderRoleForOtherFunctions",
                    effect=iam.Effect.DENY,
                    actions=["iam:PassRole"],
                    resources=[handler.role.role_arn],
                    conditions=unless,
                ),
                # The other way to everything on a node (root shell with the node role):
                # Session Manager, break-glass for administrators only. EKS tags managed
                # node-group instances with eks:cluster-name; StartSession takes the
                # instance's tags as ssm:resourceTag/<key>
                # (https://docs.aws.amazon.com/systems-manager/latest/userguide/getting-started-restrict-access-examples.html).
                iam.PolicyStatement(
                    sid="NoSessionsOnClusterNodes",
                    effect=iam.Effect.DENY,
                    actions=["ssm:StartSession"],
                    resources=[
                        stack.format_arn(service="ec2", resource="instance", resource_name="*")
                    ],
                    conditions={
                        "StringEquals": {
                            "ssm:resourceTag/eks:cluster-name": self.cluster.cluster_name
                        }
                    },
                ),
            ],
        )

    def _endpoint_access(self, endpoint_access: str, cidrs: list[str]) -> eks.EndpointAccess:
        """The API endpoint's access, warning when a public one is open to the world."""
        access = ENDPOINT_ACCESS[endpoint_access]
        if endpoint_access == "public_and_private":
            access = access.only_from(*cidrs)
            if any(ipaddress.ip_network(c).prefixlen == 0 for c in cidrs):
                Annotations.of(self).add_warning_v2(
                    OPEN_TO_WORLD_WARNING,
                    f"The EKS API endpoint of {self.node.path} is public to {cidrs}: set "
                    "public_access_cidrs to your networks, or endpoint_access to 'private'.",
                )
        return access

    def _system_node_group(
        self,
        instance_type: str,
        nodes: int,
        security_groups: Sequence[ec2.ISecurityGroup],
        removal_policy: RemovalPolicy | None,
    ) -> None:
        """The system node group (``system_nodes``) and its launch template."""
        extra_groups = [g.security_group_id for g in security_groups]
        self.system_launch_template = hardened_launch_template(
            self,
            "SystemLaunchTemplate",
            root_volume_gib=50,
            security_group_ids=(
                [self.cluster.cluster_security_group_id, *extra_groups] if extra_groups else None
            ),
        )
        self.system_nodes = eks.Nodegroup(
            self,
            "SystemNodes",
            cluster=as_icluster(self.cluster),
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
            instance_types=[ec2.InstanceType(instance_type)],
            launch_template_spec=launch_template_spec(self.system_launch_template),
            subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            min_size=nodes,
            desired_size=nodes,
            max_size=nodes,
            labels={NODE_ROLE_LABEL: "system"},
            removal_policy=removal_policy,
            enable_node_auto_repair=NODE_AUTO_REPAIR,
        )

    def _helper_node_group(
        self,
        instance_type: str,
        nodes: int,
        subnet: ec2.ISubnet,
        removal_policy: RemovalPolicy | None,
    ) -> eks.Nodegroup:
        """The training-helper node group: system nodes in ``subnet`` (the Trainium AZ's) only.

        FSx for Lustre lives in one AZ; its helper pods (dataset copy, TensorBoard) are required
        to run there (no cross-AZ traffic or latency), and the system group, spread over every
        AZ, may have no node in it. Everything but the subnet, the size and a label of its own
        is the system group's: the same launch template (so the same hardening and security
        groups), node role (so the same policies and SSM setting), AMI type, instance type,
        auto-repair and update settings (aws-cdk's defaults, as there)."""
        return eks.Nodegroup(
            self,
            "TrainingHelperNodes",
            cluster=as_icluster(self.cluster),
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
            instance_types=[ec2.InstanceType(instance_type)],
            launch_template_spec=launch_template_spec(self.system_launch_template),
            subnets=ec2.SubnetSelection(subnets=[subnet]),
            min_size=nodes,
            desired_size=nodes,
            max_size=nodes,
            node_role=self.system_nodes.role,
            labels={NODE_ROLE_LABEL: "system", NODE_GROUP_LABEL: TRAINING_HELPERS},
            removal_policy=removal_policy,
            enable_node_auto_repair=NODE_AUTO_REPAIR,
        )

    @property
    def system_node_groups(self) -> list[eks.Nodegroup]:
        """The node groups of system-role nodes: system, then training-helper (if any)."""
        return [self.system_nodes, *([self.helper_nodes] if self.helper_nodes else [])]

    def _acknowledge_findings(self, node_ssm_access: bool) -> None:
        """cdk-nag findings on roles and functions that aws-cdk or EKS dictate."""
        acknowledge(
            self.cluster.role,
            managed_policy_finding("AmazonEKSClusterPolicy"),
            "EKS requires the cluster role to carry this AWS-maintained policy; it holds only "
            "what the control plane itself needs.",
        )
        configure_node_role(self.system_nodes.role, node_ssm_access)

        # The kubectl provider (aws-cdk's custom-resource handler and its framework function).
        provider = self.cluster.kubectl_provider
        if provider is None:  # eks_v2.Cluster always makes one
            raise TypeError(f"{self.node.path}: the cluster has no kubectl provider")
        handler = find_child(provider, "Handler", lambda_.Function)
        reasons = {
            managed_policy_finding(policy): reason
            for policy, reason in (
                (
                    "service-role/AWSLambdaBasicExecutionRole",
                    "Log delivery of aws-cdk's kubectl provider functions, whose roles aws-cdk "
                    "creates.",
                ),
                (
                    "service-role/AWSLambdaVPCAccessExecutionRole",
                    "aws-cdk's kubectl provider runs in the private subnets to reach the private API "
                    "endpoint; this policy manages its network interfaces.",
                ),
                (
                    "AmazonEC2ContainerRegistryReadOnly",
                    "aws-cdk's kubectl handler may pull Helm charts from ECR registries (OCI); "
                    "read-only.",
                ),
            )
        }
        # aws-cdk adds ECR Public read access under a condition (partitions that have it).
        if handler.role is None:  # a Function without a role cannot run
            raise TypeError(f"{handler.node.path}: the kubectl handler has no role")
        handler_role = default_child(handler.role, iam.CfnRole)
        for arn in Stack.of(handler).resolve(handler_role.managed_policy_arns):
            if isinstance(arn, dict) and "Fn::If" in arn:
                reasons[f"AwsSolutions-IAM4[Policy::{json.dumps(arn, separators=(',', ':'))}]"] = (
                    "aws-cdk's kubectl handler may pull Helm charts from ECR Public; read-only."
                )
        reasons[
            f"AwsSolutions-IAM5[Resource::{rendered_resource(self, handler.function_arn)}:*]"
        ] = "The custom-resource framework invokes any version of the kubectl handler, only it."
        # aws-cdk makes both provider functions depend on their role explicitly although the
        # role is already referenced; cfn-lint flags that (W3005) on these two resources only.
        framework_id = "framework-onEvent"
        framework = find_child(provider.node.find_child("Provider"), framework_id, lambda_.Function)
        for function in (handler, framework):
            default_child(function, lambda_.CfnFunction).add_metadata(
                "cfn-lint", {"config": {"ignore_checks": ["W3005"]}}
            )
            acknowledge_controls(
                function,
                {
                    "CT.LAMBDA.PR.3": (
                        "Both kubectl-provider functions are in the VPC (private subnets, the "
                        "cluster security group): the rule accepts only subnet and group IDs "
                        "written out or made in the same template, and these come from the "
                        "Network stack (Fn::ImportValue) and from the EKS cluster's "
                        "ClusterSecurityGroupId attribute."
                    )
                },
            )
        reasons["AwsSolutions-L1"] = (
            "aws-cdk pins the kubectl handler's runtime to the one its bundled code and layers "
            "are built for."
        )
        acknowledge_each(provider, reasons)

    @property
    def cluster_security_group(self) -> ec2.ISecurityGroup:
        """The security group EKS made for the control plane and default nodes."""
        return self.cluster.cluster_security_group

    def grant_cluster_admin(self, construct_id: str, role: iam.IRole) -> eks.AccessEntry:
        """Give ``role`` cluster-admin through an access entry."""
        return self.cluster.grant_cluster_admin(construct_id, role.role_arn)
