"""The platform VPC and the security group the training nodes share."""

from __future__ import annotations

__all__ = [
    "PlatformVpc",
    "PlatformVpcProps",
    "TrainingNodeSecurityGroup",
]

import re
from dataclasses import dataclass

from aws_cdk import ArnFormat, CfnResource, Fn, RemovalPolicy, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from ml_platform import limits
from ml_platform.constructs._kms import restrict_grants
from ml_platform.constructs._l1 import default_child, find_child
from ml_platform.constructs._nag import acknowledge_controls
from ml_platform.constructs._props import check_props
from ml_platform.constructs._security_groups import (
    EFA_SELF_DESCRIPTION as EFA_SELF_DESCRIPTION,
)
from ml_platform.constructs._security_groups import (
    EFA_SELF_EGRESS_ID as EFA_SELF_EGRESS_ID,
)
from ml_platform.constructs._security_groups import (
    allow_efa_within as allow_efa_within,  # re-exported: the public name of the EFA rules
)
from ml_platform.constructs.storage import RETAIN
from ml_platform.props.network import PlatformVpcPropsBase

DATASET_BUCKET = "neuron-s3"
"""The bucket of ``ml_platform.training.jobs.BERT_DATASET_URI`` (a test holds them equal; the
jobs module is not imported here, it loads TorchX)."""


@dataclass(frozen=True, kw_only=True)
class PlatformVpcProps(PlatformVpcPropsBase):
    """The value props of :class:`PlatformVpc`: the fields of
    :class:`~ml_platform.props.network.PlatformVpcPropsBase` (the settings' ``network``
    section inherits them too, with their rules) and the construct's own below."""

    availability_zones: tuple[str, ...]
    """Two or more distinct AZ names of the stack's region. Required."""
    trainium_az: str
    """The AZ, among ``availability_zones``, that offers the Trainium instances. Required."""
    removal_policy: RemovalPolicy = RETAIN
    """Of the flow-log group and its key. Default
    :data:`~ml_platform.constructs.storage.RETAIN` (RetainExceptOnCreate)."""
    flow_log_group_name: str | None = None
    """Names the flow-log group, which scopes its key to exactly that group (the ARN can then
    be formatted without a reference to the group). Default: CloudFormation names it and the
    key serves the account's log groups in the region. Setting or changing it on a deployed VPC
    replaces the group."""

    def construct_problems(self) -> list[str]:
        """The problems of the construct's own props (the shared ones are the base's). aws-cdk
        2.275 checks none of them: ``logs.LogGroup`` takes any name."""
        name = self.flow_log_group_name
        if name is None or Token.is_unresolved(name) or LOG_GROUP_NAME.fullmatch(name):
            return []
        return [
            f"flow_log_group_name = {limits.shown(name)}: expected 1 to 512 of "
            "A-Z a-z 0-9 . - _ / #, not starting with 'aws/'"
        ]


class PlatformVpc(Construct):
    """A VPC with public and private subnets in the given AZs, NAT, an S3 gateway endpoint and
    flow logs in a log group encrypted with its own rotating KMS key.

    One of the AZs is the Trainium AZ: EFA traffic never leaves an AZ, so the Trainium node
    group and the Lustre file system share its private subnet (:attr:`trainium_subnet`).

    Args:
        props: The value props (:class:`PlatformVpcProps`), checked all at once.

    Attributes:
        props: The value props, as checked.
        vpc: The ``ec2.Vpc``.
        s3_endpoint: The S3 gateway endpoint, whose policy is :func:`s3_endpoint_statements`.
        flow_log_group: The flow-log group.
        flow_log_key: The KMS key encrypting it.
        flow_log: The ``ec2.FlowLog``.
    """

    def __init__(self, scope: Construct, construct_id: str, *, props: PlatformVpcProps) -> None:
        super().__init__(scope, construct_id)
        self.props = props
        check_props(self, props, PlatformVpcPropsBase, *props.construct_problems())
        azs = list(props.availability_zones)
        cidr = props.cidr

        self.vpc = ec2.Vpc(
            self,
            "Resource",
            ip_addresses=ec2.IpAddresses.cidr(cidr),
            availability_zones=azs,
            nat_gateways=props.nat_gateways,
            subnet_configuration=[
                # The public subnets hold only the NAT gateways (Elastic IPs of their own): no
                # instance gets a public address there (Control Tower CT.EC2.PR.11); an in-place
                # update of deployed subnets (MapPublicIpOnLaunch is not create-only).
                ec2.SubnetConfiguration(
                    name="Public",
                    subnet_type=ec2.SubnetType.PUBLIC,
                    cidr_mask=24,
                    map_public_ip_on_launch=False,
                ),
                # Pods take VPC addresses (VPC CNI) and each Trainium node carries 8-16 EFA
                # interfaces, so the private subnets are large.
                ec2.SubnetConfiguration(
                    name="Private",
                    subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
                    cidr_mask=cidr_mask_for(cidr, len(azs)),
                ),
            ],
            gateway_endpoints={
                "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)
            },
            # Security Hub EC2.2: the default security group must allow no traffic.
            # https://docs.aws.amazon.com/securityhub/latest/userguide/ec2-controls.html#ec2-2
            restrict_default_security_group=props.restrict_default_security_group,
        )
        stack = Stack.of(self)
        self.s3_endpoint = find_child(self.vpc, "S3", ec2.GatewayVpcEndpoint)
        for statement in s3_endpoint_statements(stack):
            self.s3_endpoint.add_to_policy(statement)
        if props.restrict_default_security_group:
            _lint_restrict_default_sg_provider(stack)
        self._flow_logs(
            stack,
            retention_days(props.flow_log_retention_days),
            props.removal_policy,
            props.flow_log_group_name,
        )
        self.trainium_az = props.trainium_az
        self.trainium_subnet: ec2.ISubnet = self.vpc.select_subnets(
            subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, availability_zones=[props.trainium_az]
        ).subnets[0]

    def _flow_logs(
        self,
        stack: Stack,
        retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
        group_name: str | None,
    ) -> None:
        """Flow logs of all traffic into a log group encrypted with a key of its own."""
        self.flow_log_key = kms.Key(
            self,
            "FlowLogsKey",
            description=f"Encryption of the VPC flow logs of {self.node.path}",
            enable_key_rotation=True,
            removal_policy=removal_policy,
        )
        self.flow_log_key.add_to_resource_policy(flow_log_key_statement(stack, group_name))
        restrict_grants(self.flow_log_key)
        # Associating the key with the existing group is an in-place update (KmsKeyId: "Update
        # requires: No interruption"). By default the group keeps its CloudFormation-made name:
        # naming it (LogGroupName: "Update requires: Replacement") would replace the group of
        # every deployed VPC, so a name is opt-in. Both from the AWS::Logs::LogGroup reference:
        # https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-logs-loggroup.html
        self.flow_log_group = logs.LogGroup(
            self,
            "FlowLogs",
            log_group_name=group_name,
            retention=retention,
            encryption_key=self.flow_log_key,
            removal_policy=removal_policy,
        )
        days = default_child(self.flow_log_group, logs.CfnLogGroup).retention_in_days
        if isinstance(days, int) and days < FLOW_LOG_YEAR:
            acknowledge_controls(
                self.flow_log_group,
                {
                    "CT.CLOUDWATCH.PR.2": (
                        f"Flow logs of all traffic are kept {days} days "
                        "(network.flow_log_retention_days): long enough to investigate an "
                        "incident that alarms or GuardDuty raise within weeks; a year stores "
                        f"{FLOW_LOG_YEAR / days:.0f} times as much (billed per GB-month). "
                        f"Set {FLOW_LOG_YEAR} or more where a year of network evidence is "
                        "required (this acknowledgment then goes away)."
                    )
                },
            )
        self.flow_log = self.vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(self.flow_log_group),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )
        # Confused-deputy guard on the delivery role aws-cdk creates: only flow logs of this
        # account and region may assume it.
        # https://docs.aws.amazon.com/vpc/latest/userguide/flow-logs-iam-role.html
        role = default_child(find_child(self.flow_log, "IAMRole", iam.Role), iam.CfnRole)
        role.add_property_override(
            "AssumeRolePolicyDocument.Statement.0.Condition",
            {
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnLike": {
                    "aws:SourceArn": f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}"
                    ":vpc-flow-log/*"
                },
            },
        )


AWS_OWNED_READ_BUCKETS = (
    # ECR keeps image layers in this bucket: every image pull from ECR (EKS add-ons, the EFA
    # plugin, the training image) reads it through the gateway endpoint.
    # https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html
    # ("Minimum Amazon S3 bucket permissions for Amazon ECR")
    "prod-{region}-starport-layer-bucket",
    # The AL2023 package repositories (dnf on the nodes, break-glass installs).
    # https://docs.aws.amazon.com/linux/al2023/ug/managing-repos-os-updates.html
    "al2023-repos-{region}-de612dc2",
    # SSM Agent's updates, documents and Session Manager plugins.
    # https://docs.aws.amazon.com/systems-manager/latest/userguide/ssm-agent-minimum-s3-permissions.html
    "amazon-ssm-{region}",
    "amazon-ssm-packages-{region}",
    "{region}-birdwatcher-prod",
    "aws-ssm-{region}",
    "aws-ssm-document-attachments-{region}",
    "aws-ssm-distributor-file-{region}",
    "patch-baseline-snapshot-{region}",
    # The tutorial's public BERT dataset (us-west-2; from other regions it goes through NAT,
    # not the endpoint). The Neuron driver and runtime come with the AL2023 Neuron AMI and
    # the training image, so no Neuron package repository is read through the endpoint.
    DATASET_BUCKET,
)
"""AWS-owned buckets that nodes and pods read through the S3 gateway endpoint (objects only)."""
CLOUDFORMATION_RESPONSE_BUCKET = "cloudformation-custom-resource-response-{region_no_dashes}"
"""Where aws-cdk's Lambda-backed custom resources in the VPC (the kubectl provider) put their
responses to CloudFormation (a pre-signed URL), through the endpoint; plus the wait-condition
bucket. https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cfn-vpce-bucketnames.html"""
CLOUDFORMATION_WAIT_BUCKET = "cloudformation-waitcondition-{region}"


def s3_endpoint_statements(stack: Stack) -> list[iam.PolicyStatement]:
    """The S3 gateway endpoint's policy: any S3 action on buckets of this account
    (``aws:ResourceAccount``), object reads from :data:`AWS_OWNED_READ_BUCKETS`, and the
    CloudFormation response uploads of custom resources. Everything else through the
    endpoint (another account's bucket) is refused.
    https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-s3.html#edit-vpc-endpoint-policy-s3
    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-resourceaccount
    """
    region, partition = stack.region, stack.partition
    no_dashes = Fn.join("", Fn.split("-", region))

    def objects(pattern: str) -> str:
        name = pattern.format(region=region, region_no_dashes=no_dashes)
        return f"arn:{partition}:s3:::{name}/*"

    return [
        iam.PolicyStatement(
            sid="OwnAccountBuckets",
            principals=[iam.AnyPrincipal()],
            actions=["s3:*"],
            resources=["*"],
            conditions={"StringEquals": {"aws:ResourceAccount": stack.account}},
        ),
        iam.PolicyStatement(
            sid="AwsOwnedBucketsRead",
            principals=[iam.AnyPrincipal()],
            actions=["s3:GetObject"],
            resources=[objects(b) for b in AWS_OWNED_READ_BUCKETS],
        ),
        iam.PolicyStatement(
            sid="CloudFormationResponses",
            principals=[iam.AnyPrincipal()],
            actions=["s3:PutObject"],
            resources=[
                objects(CLOUDFORMATION_RESPONSE_BUCKET),
                objects(CLOUDFORMATION_WAIT_BUCKET),
            ],
        ),
    ]


def _lint_restrict_default_sg_provider(stack: Stack) -> None:
    """aws-cdk's provider for ``restrict_default_security_group`` (one per stack, a
    CfnResource-based function cdk-nag does not flag) makes its function depend on its role
    explicitly although the role is referenced; cfn-lint flags that (W3005) on it only."""
    provider = stack.node.try_find_child("Custom::VpcRestrictDefaultSGCustomResourceProvider")
    handler = provider.node.try_find_child("Handler") if provider is not None else None
    if isinstance(handler, CfnResource):
        handler.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})
        acknowledge_controls(
            handler,
            {
                "CT.LAMBDA.PR.3": (
                    "aws-cdk's restrict_default_security_group provider calls only the regional "
                    "EC2 API (revoke the default group's rules) when CloudFormation creates or "
                    "updates the VPC; in the VPC it would need the NAT gateways it is created "
                    "alongside."
                )
            },
        )


FLOW_LOG_YEAR = 365


def retention_days(days: int) -> logs.RetentionDays:
    """aws-cdk's ``RetentionDays`` member of ``days`` (one of ``limits.LOG_RETENTION_DAYS``)."""
    # The members are listed in the same order as the day counts limits accepts.
    members = list(logs.RetentionDays)[: len(limits.LOG_RETENTION_DAYS)]
    return dict(zip(limits.LOG_RETENTION_DAYS, members, strict=True))[days]


"""Retention (days) from which flow logs meet Control Tower CT.CLOUDWATCH.PR.2 (one year)."""

FLOW_LOG_KEY_ACTIONS = (
    "kms:Encrypt*",
    "kms:Decrypt*",
    "kms:ReEncrypt*",
    "kms:GenerateDataKey*",
    "kms:Describe*",
)
"""What CloudWatch Logs needs on a log group's key (the actions of the key policy in
https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html)."""


LOG_GROUP_NAME = re.compile(r"(?!aws/)[.\-_/#A-Za-z0-9]{1,512}")
"""A log group name CloudWatch Logs accepts (CreateLogGroup naming rules)."""


def flow_log_key_statement(stack: Stack, group_name: str | None = None) -> iam.PolicyStatement:
    """Key-policy statement letting CloudWatch Logs of the stack's region use the key, under the
    ``kms:EncryptionContext:aws:logs:arn`` condition of the CloudWatch Logs guide
    (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html): for
    the group ``group_name`` only, or without a name for the log groups of the stack's account
    and region.

    The exact ARN needs the name: the key policy cannot reference the group (the group
    references the key: circular), and naming a deployed group replaces it.
    """
    arn = stack.format_arn(
        service="logs",
        resource="log-group",
        resource_name=group_name or "*",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )
    return iam.PolicyStatement(
        sid="CloudWatchLogsOfThisGroup" if group_name else "CloudWatchLogsOfThisAccount",
        principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
        actions=list(FLOW_LOG_KEY_ACTIONS),
        resources=["*"],
        conditions={
            ("ArnEquals" if group_name else "ArnLike"): {"kms:EncryptionContext:aws:logs:arn": arn}
        },
    )


def cidr_mask_for(cidr: str, az_count: int) -> int:
    """Largest private-subnet mask that leaves room for the /24 public subnets."""
    prefix = int(cidr.split("/")[1])
    # Half the block goes to private subnets, split evenly over a power of two >= az_count.
    slots = 1
    while slots < az_count:
        slots *= 2
    return prefix + 1 + (slots.bit_length() - 1)


class TrainingNodeSecurityGroup(Construct):
    """Security group of the Trainium nodes' EFA interfaces.

    EFA requires all traffic to and from the group itself, in both directions
    (:func:`allow_efa_within`). Other resources open their ports to this group (the Lustre file
    system, the EKS control plane), so it exists before the cluster.

    Attributes:
        security_group: The group.
        efa_egress: Its explicit self egress rule.
    """

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc) -> None:
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self,
            "Resource",
            vpc=vpc,
            description="Trainium training nodes: EFA all-traffic within the group",
            allow_all_outbound=True,
        )
        self.efa_egress = allow_efa_within(self.security_group)
