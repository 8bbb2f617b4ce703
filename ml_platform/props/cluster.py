"""The fields :class:`~ml_platform.constructs.eks_cluster.TrainingEksClusterProps` shares with
the ``cluster`` settings (:class:`~ml_platform.config.ClusterSettings`), and their rules."""

from dataclasses import dataclass
from typing import Annotated

from ml_platform import limits
from ml_platform._settings_parse import Between, OneOf, Problem, Section, json_pattern, setting
from ml_platform.ec2_instance_types import instance_type_problem
from ml_platform.versions import EKS_SUPPORT_TYPES, KUBERNETES_VERSIONS

# aws_eks_v2 (aws-cdk-lib 2.275.0, aws-eks-v2/lib/cluster.js) checks none of these: not the
# CIDRs of EndpointAccess.onlyFrom (only that the endpoint is public and private), nor the
# node counts (our ranges, not EKS's). Its checks of the same props are the VPC's (private
# subnets, DNS), which stay its own.


@dataclass(frozen=True, kw_only=True)
class TrainingEksClusterPropsBase(Section):
    """The value props of :class:`~ml_platform.constructs.eks_cluster.TrainingEksCluster` that
    the ``cluster`` settings take too."""

    kubernetes_version: Annotated[str, OneOf(KUBERNETES_VERSIONS)] = setting(
        limits.DEFAULT_KUBERNETES_VERSION
    )
    """Kubernetes version: the ones Volcano 1.15 supports, each with its own kube-proxy and
    CoreDNS pins (`ml_platform/versions.py`) and kubectl Lambda layer."""
    admin_role_arn: str | None = setting(None, pattern=json_pattern(limits.ROLE_ARN))
    """IAM role (in `env.region`'s partition) given cluster-admin by an EKS access entry.
    Default none: only the stack's kubectl provider can use the API. `mlp azs` writes the role
    named with `--admin-role-arn` or `--admin-role-mine`."""
    endpoint_access: Annotated[str, OneOf(limits.ENDPOINT_ACCESS)] = setting(
        limits.DEFAULT_ENDPOINT_ACCESS
    )
    """`private`: the Kubernetes API answers inside the VPC only (reach it from a VPN or peered
    network, with `mlp azs --public-access-mine`, or break-glass through Session Manager with
    `cluster.node_ssm_access`); or `public_and_private`. Private by default: Security Hub's
    EKS.1 control fails a cluster whose endpoint is public."""
    public_access_cidrs: tuple[str, ...] = setting(
        (), maxItems=limits.MAX_PUBLIC_ACCESS_CIDRS, uniqueItems=True
    )
    """CIDRs allowed to the public endpoint: 1 to 40 distinct IPv4 blocks with
    `public_and_private`, none with `private`. `mlp azs --public-access-mine` writes the
    caller's address as a /32."""
    public_access_from_anywhere: bool = setting(False)
    """Accept `0.0.0.0/0` in `public_access_cidrs` (with a synth-time warning); otherwise a /0
    block is a settings error."""
    kubectl_provider_guard: bool = setting(False)
    """Create a managed policy (the construct's `kubectl_provider_guard`, stack output
    `KubectlProviderGuardPolicyArn`) that denies
    invoking or changing aws-cdk's kubectl-provider functions, and passing the handler's role,
    to every principal but CloudFormation's execution role and the provider framework, and
    Session Manager sessions on the cluster's nodes. Both are cluster-admin (or root on a
    node): attach the policy (or its statements in a permissions boundary or SCP) to every
    role that is not a cluster administrator (docs/security.md)."""
    node_ssm_access: bool = setting(False)
    """`AmazonSSMManagedInstanceCore` on every node role: Session Manager shells and port
    forwarding to the nodes. Break-glass: turn it on to debug EFA or Neuron on a node or to
    reach a private API endpoint through a node, deploy (an in-place update of the node roles),
    and set it back afterwards. Whoever may start a session on a node gets root there: allow
    `ssm:StartSession` to administrators only (docs/security.md, residual risks)."""
    system_instance_type: str = setting(limits.DEFAULT_SYSTEM_INSTANCE_TYPE)
    """Instance type of the small system and training-helper node groups (x86_64: the AL2023
    standard AMI)."""
    system_nodes: Annotated[int, Between(limits.SYSTEM_NODES)] = setting(
        limits.DEFAULT_SYSTEM_NODES
    )
    """Nodes in the system node group, spread over the private subnets of every AZ in
    `network.availability_zones`."""
    helper_nodes: Annotated[int, Between(limits.HELPER_NODES)] = setting(
        limits.DEFAULT_HELPER_NODES
    )
    """Nodes in the training-helper node group: `system_instance_type` nodes with the system
    label, in `network.trainium_az`'s private subnet only, where FSx for Lustre is. The helper
    pods that mount FSx (the dataset Job, TensorBoard) are required to run in that AZ, and the
    system nodes may have none there, so 0 is refused (docs/training.md, "Where the pods
    run"). The construct makes this group only with its `helper_subnet`."""
    support_type: Annotated[str, OneOf(EKS_SUPPORT_TYPES)] = setting(limits.DEFAULT_SUPPORT_TYPE)
    """The cluster's upgrade policy: `EXTENDED` (EKS's own default: a version past standard
    support keeps running at the extended-support rate, which `mlp cost` reports) or
    `STANDARD` (EKS upgrades the control plane then)."""

    def problems(self) -> list[str | Problem]:
        """The admin role's format, the system nodes' instance type, and the public
        endpoint's CIDRs against ``endpoint_access`` and ``public_access_from_anywhere``."""
        out: list[str | Problem] = []
        if self.admin_role_arn is not None and not limits.ROLE_ARN.fullmatch(self.admin_role_arn):
            out.append(
                Problem(
                    {"admin_role_arn": self.admin_role_arn},
                    "expected an IAM role ARN (arn:<partition>:iam::<12-digit account>:role/<name>)",
                )
            )
        if problem := self._instance_type_problem():
            out.append(Problem({"system_instance_type": self.system_instance_type}, problem))
        out += [
            Problem(values, text)
            for values, text in limits.public_access_findings(
                self.endpoint_access,
                list(self.public_access_cidrs),
                self.public_access_from_anywhere,
            )
        ]
        return out

    def _instance_type_problem(self) -> str | None:
        instance = limits.INSTANCE_TYPE.fullmatch(self.system_instance_type)
        if not instance:
            return "expected an EC2 instance type such as 'm6i.large'"
        if "g" in instance.group(3) or instance.group(1) == "a":
            return (
                "the system nodes run the x86_64 AL2023 AMI; expected an x86_64 type such as "
                "'m6i.large'"
            )
        return instance_type_problem(self.system_instance_type)
