"""Fine-grained assertions on NetworkStack and StorageStack."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Match, Template

from ml_platform.app import new_app
from ml_platform.constructs import LustreStorage, ModelArtifactBucket, PlatformVpc
from ml_platform.constructs.network import PlatformVpcProps
from ml_platform.constructs.storage import LustreStorageProps, ModelArtifactBucketProps
from tests.support import GRANTS_ONLY_FOR_AWS_RESOURCES, SynthesizedPlatform

# Logical IDs of stateful resources: renaming one replaces (and loses) the resource.
STATEFUL_IDS = {
    "AWS::ECR::Repository": "TrainingImages84E3863B",
    "AWS::FSx::FileSystem": "LustreDCDAF745",
    "AWS::S3::Bucket": {"ModelsAccessLogs3743BCAB", "Models7F217E31"},
}


def test_vpc_spans_configured_azs_with_public_and_private_subnets(
    synth: SynthesizedPlatform,
) -> None:
    t = synth.template("Network")
    t.resource_count_is("AWS::EC2::VPC", 1)
    t.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": "10.0.0.0/16"})
    subnets = t.find_resources("AWS::EC2::Subnet")
    azs = {s["Properties"]["AvailabilityZone"] for s in subnets.values()}
    assert azs == set(synth.platform.settings.network.availability_zones)
    public = [s for s in subnets.values() if "PublicSubnet" in json.dumps(s["Properties"]["Tags"])]
    assert len(public) == len(subnets) // 2 == 3
    # Only NAT gateways live in the public subnets: no instance is given a public address
    # there (Control Tower CT.EC2.PR.11); private subnets never assign one.
    assert all(s["Properties"]["MapPublicIpOnLaunch"] is False for s in subnets.values())
    t.resource_count_is("AWS::EC2::NatGateway", 1)


def test_s3_gateway_endpoint_and_flow_logs(synth: SynthesizedPlatform) -> None:
    t = synth.template("Network")
    t.has_resource_properties(
        "AWS::EC2::VPCEndpoint",
        {"VpcEndpointType": "Gateway", "ServiceName": Match.object_like({})},
    )
    t.has_resource_properties(
        "AWS::EC2::FlowLog", {"TrafficType": "ALL", "LogDestinationType": "cloud-watch-logs"}
    )
    t.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 90})


def test_flow_logs_are_encrypted_with_their_own_rotating_retained_key(
    synth: SynthesizedPlatform,
) -> None:
    resources = synth.template_json("Network")["Resources"]
    group, key = resources["VpcFlowLogs3A4A3791"], resources["VpcFlowLogsKey4140EC14"]
    # The same (unnamed) group gains the key: an in-place update, no new group.
    assert "LogGroupName" not in group["Properties"]
    assert group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": ["VpcFlowLogsKey4140EC14", "Arn"]}
    assert (group["DeletionPolicy"], group["UpdateReplacePolicy"]) == (
        "RetainExceptOnCreate",
        "Retain",
    )
    assert key["Type"] == "AWS::KMS::Key"
    assert key["Properties"]["EnableKeyRotation"] is True
    assert (key["DeletionPolicy"], key["UpdateReplacePolicy"]) == ("RetainExceptOnCreate", "Retain")
    assert key["Properties"]["KeyPolicy"]["Statement"] == [
        {
            "Action": "kms:*",
            "Effect": "Allow",
            "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
            "Resource": "*",
        },
        {
            "Sid": "CloudWatchLogsOfThisAccount",
            "Action": [
                "kms:Decrypt*",
                "kms:Describe*",
                "kms:Encrypt*",
                "kms:GenerateDataKey*",
                "kms:ReEncrypt*",
            ],
            "Condition": {
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": "arn:aws:logs:us-west-2:123456789012:log-group:*"
                }
            },
            "Effect": "Allow",
            "Principal": {"Service": "logs.us-west-2.amazonaws.com"},
            "Resource": "*",
        },
        GRANTS_ONLY_FOR_AWS_RESOURCES,
    ]
    # Nothing but the flow-log group uses the key in this stack.
    users = [
        k for k, r in resources.items() if "VpcFlowLogsKey4140EC14" in str(r.get("Properties"))
    ]
    assert users == ["VpcFlowLogs3A4A3791"]


def test_flow_log_group_and_key_can_opt_out_of_retain() -> None:
    stack = cdk.Stack(
        new_app(), "S", env=cdk.Environment(account="123456789012", region="us-west-2")
    )
    PlatformVpc(
        stack,
        "Vpc",
        props=PlatformVpcProps(
            availability_zones=("us-west-2a", "us-west-2b"),
            trainium_az="us-west-2a",
            removal_policy=cdk.RemovalPolicy.DESTROY,
        ),
    )
    t = Template.from_stack(stack)
    t.has_resource("AWS::KMS::Key", {"DeletionPolicy": "Delete"})
    t.has_resource("AWS::Logs::LogGroup", {"DeletionPolicy": "Delete"})


def test_training_node_group_allows_all_traffic_within_itself(synth: SynthesizedPlatform) -> None:
    t = synth.template("Network")
    t.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {
            "IpProtocol": "-1",
            "GroupId": {"Fn::GetAtt": [Match.string_like_regexp("^TrainingNodes"), "GroupId"]},
            "SourceSecurityGroupId": {
                "Fn::GetAtt": [Match.string_like_regexp("^TrainingNodes"), "GroupId"]
            },
        },
    )


def test_no_security_group_is_open_to_the_world(synth: SynthesizedPlatform) -> None:
    for name in ("Network", "Storage"):
        tpl = synth.template_json(name)
        for resource in tpl["Resources"].values():
            props = resource.get("Properties", {})
            rules = props.get("SecurityGroupIngress", []) + [props] * (
                resource["Type"] == "AWS::EC2::SecurityGroupIngress"
            )
            for rule in rules:
                assert rule.get("CidrIp") != "0.0.0.0/0"
                assert rule.get("CidrIpv6") != "::/0"


def test_ecr_repository(synth: SynthesizedPlatform) -> None:
    t = synth.template("Storage")
    t.has_resource(
        "AWS::ECR::Repository",
        {
            "Properties": {
                "RepositoryName": "ml-platform/training",
                "ImageScanningConfiguration": {"ScanOnPush": True},
                "ImageTagMutability": "IMMUTABLE",
                "LifecyclePolicy": {
                    "LifecyclePolicyText": Match.string_like_regexp('"countNumber":30')
                },
            },
            "DeletionPolicy": "RetainExceptOnCreate",
            "UpdateReplacePolicy": "Retain",
        },
    )


def test_model_bucket_is_private_encrypted_versioned_tls_only(synth: SynthesizedPlatform) -> None:
    t = synth.template("Storage")
    t.has_resource(
        "AWS::S3::Bucket",
        {
            "Properties": Match.object_like(
                {
                    "VersioningConfiguration": {"Status": "Enabled"},
                    "BucketEncryption": {
                        "ServerSideEncryptionConfiguration": [
                            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                        ]
                    },
                    "PublicAccessBlockConfiguration": {
                        "BlockPublicAcls": True,
                        "BlockPublicPolicy": True,
                        "IgnorePublicAcls": True,
                        "RestrictPublicBuckets": True,
                    },
                    "LoggingConfiguration": Match.object_like({"LogFilePrefix": "model-bucket/"}),
                }
            ),
            "DeletionPolicy": "RetainExceptOnCreate",
        },
    )
    t.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        )
                    ]
                )
            }
        },
    )


def test_lustre_file_system(synth: SynthesizedPlatform) -> None:
    t = synth.template("Storage")
    t.has_resource(
        "AWS::FSx::FileSystem",
        {
            "Properties": Match.object_like(
                {
                    "FileSystemType": "LUSTRE",
                    "FileSystemTypeVersion": "2.15",
                    "StorageCapacity": 1200,
                    "LustreConfiguration": Match.object_like(
                        {"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250}
                    ),
                    "SubnetIds": [Match.object_like({"Fn::ImportValue": Match.any_value()})],
                }
            ),
            "DeletionPolicy": "RetainExceptOnCreate",
            "UpdateReplacePolicy": "Retain",
        },
    )


def test_lustre_ports_open_to_its_client_group_only(synth: SynthesizedPlatform) -> None:
    """FSx for Lustre has no client authentication: its ports are open to itself and to its
    own client group, never to another stack's group (the EFA group, the cluster group)."""
    tpl = synth.template_json("Storage")
    ingress = [
        r["Properties"]
        for r in tpl["Resources"].values()
        if r["Type"] == "AWS::EC2::SecurityGroupIngress"
    ]
    sources = {
        (i["SourceSecurityGroupId"]["Fn::GetAtt"][0], i["FromPort"], i["ToPort"])
        for i in ingress
        if i["GroupId"] == {"Fn::GetAtt": ["LustreSecurityGroupA46A9855", "GroupId"]}
    }
    assert sources == {
        (group, low, high)
        for group in ("LustreSecurityGroupA46A9855", "LustreClientSecurityGroup574AE97A")
        for low, high in ((988, 988), (1018, 1023))
    } | {("LustreSecurityGroupA46A9855", 988, 1023)}  # aws-cdk's own self rule
    assert all("Fn::ImportValue" not in json.dumps(i) for i in ingress)
    assert all(i["IpProtocol"] == "tcp" for i in ingress)
    assert all("CidrIp" not in i for i in ingress)


def test_lustre_is_in_the_trainium_subnet(synth: SynthesizedPlatform) -> None:
    network = synth.platform.network
    subnet = network.trainium_subnet
    assert subnet.availability_zone == synth.platform.settings.network.trainium_az
    fs = synth.template_json("Storage")["Resources"]["LustreDCDAF745"]["Properties"]
    (imported,) = fs["SubnetIds"]
    assert "Private" in imported["Fn::ImportValue"] and "Subnet3" in imported["Fn::ImportValue"]


def test_stateful_logical_ids_are_pinned(synth: SynthesizedPlatform) -> None:
    resources = synth.template_json("Storage")["Resources"]
    for rtype, ids in STATEFUL_IDS.items():
        found = {k for k, v in resources.items() if v["Type"] == rtype}
        assert found == (ids if isinstance(ids, set) else {ids}), rtype
        for logical_id in found:
            assert resources[logical_id]["DeletionPolicy"] == "RetainExceptOnCreate"


def test_teardown_retains_what_the_retained_file_system_needs(synth: SynthesizedPlatform) -> None:
    """`cdk destroy --all` ends cleanly with the defaults: the Storage stack deletes (no
    termination protection; its stateful resources are retained), the file system keeps its
    security groups and their rules (it still holds them, aws/aws-cdk#31521), and the Network
    stack keeps the VPC and the Trainium subnet that still hold the file system's interfaces;
    everything else in both stacks is deleted."""
    assert synth.platform.storage.termination_protection is False
    storage = synth.template_json("Storage")["Resources"]
    kept = {k for k, r in storage.items() if r.get("DeletionPolicy") == "RetainExceptOnCreate"}
    rules = {k for k, r in storage.items() if r["Type"].startswith("AWS::EC2::SecurityGroup")}
    assert len(rules) == 15  # 2 groups, 13 rules
    assert rules <= kept
    network = synth.template_json("Network")["Resources"]
    kept_network = {
        (r["Type"], k)
        for k, r in network.items()
        if r.get("DeletionPolicy") not in (None, "Delete")
    }
    subnet_id = synth.platform.network.trainium_subnet.node.default_child.logical_id
    vpc_id = synth.platform.network.vpc.node.default_child.logical_id
    resolve = synth.platform.network.resolve
    assert kept_network == {
        ("AWS::EC2::VPC", resolve(vpc_id)),
        ("AWS::EC2::Subnet", resolve(subnet_id)),
        ("AWS::Logs::LogGroup", "VpcFlowLogs3A4A3791"),
        ("AWS::KMS::Key", "VpcFlowLogsKey4140EC14"),
    }
    assert {network[k]["DeletionPolicy"] for _, k in kept_network} == {"RetainExceptOnCreate"}


def test_removal_policy_destroy_is_an_explicit_opt_out() -> None:
    stack = cdk.Stack(
        new_app(), "S", env=cdk.Environment(account="123456789012", region="us-west-2")
    )
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"])
    sg = ec2.SecurityGroup(stack, "Clients", vpc=vpc)
    LustreStorage(
        stack,
        "Fs",
        vpc=vpc,
        subnet=vpc.private_subnets[0],
        clients=[sg],
        props=LustreStorageProps(removal_policy=cdk.RemovalPolicy.DESTROY),
    )
    ModelArtifactBucket(
        stack, "Models", props=ModelArtifactBucketProps(removal_policy=cdk.RemovalPolicy.DESTROY)
    )
    t = Template.from_stack(stack)
    t.has_resource("AWS::FSx::FileSystem", {"DeletionPolicy": "Delete"})
    t.has_resource("AWS::S3::Bucket", {"DeletionPolicy": "Delete"})


def test_construct_validation_reports_all_problems() -> None:
    stack = cdk.Stack(
        new_app(), "S", env=cdk.Environment(account="123456789012", region="us-west-2")
    )
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"])
    # Lustre's sizes are aws-cdk's LustreFileSystem's to check (jsii raises its error).
    with pytest.raises(RuntimeError, match=r"storageCapacity must be 1,200, 2,400.*got 1000"):
        LustreStorage(
            stack,
            "Fs",
            vpc=vpc,
            subnet=vpc.private_subnets[0],
            props=LustreStorageProps(storage_capacity_gib=1000),
        )
    with pytest.raises(RuntimeError, match=r"perUnitStorageThroughput must be 125, 250.*got: 200"):
        LustreStorage(
            stack,
            "Fs2",
            vpc=vpc,
            subnet=vpc.private_subnets[0],
            props=LustreStorageProps(throughput_per_tib=200),
        )
    with pytest.raises(ValueError, match=r"availability_zones = \['a'\].*trainium_az = 'b'"):
        PlatformVpc(
            stack, "Bad", props=PlatformVpcProps(availability_zones=("a",), trainium_az="b")
        )
    with pytest.raises(ValueError, match=r"^S/Models: model_prefix = '/x': expected a relative"):
        ModelArtifactBucket(stack, "Models", props=ModelArtifactBucketProps(model_prefix="/x"))


def test_a_named_flow_log_group_gets_a_key_for_exactly_that_group() -> None:
    stack = cdk.Stack(
        new_app(), "S", env=cdk.Environment(account="123456789012", region="us-west-2")
    )
    vpc = PlatformVpc(
        stack,
        "Vpc",
        props=PlatformVpcProps(
            availability_zones=("us-west-2a", "us-west-2b"),
            trainium_az="us-west-2a",
            flow_log_group_name="/ml-platform/S/vpc-flow-logs",
        ),
    )
    resources = Template.from_stack(stack).to_json()["Resources"]
    group = resources[stack.get_logical_id(vpc.flow_log_group.node.default_child)]
    assert group["Properties"]["LogGroupName"] == "/ml-platform/S/vpc-flow-logs"
    key = resources[stack.get_logical_id(vpc.flow_log_key.node.default_child)]
    statement, grants = [s for s in key["Properties"]["KeyPolicy"]["Statement"] if "Sid" in s]
    assert grants == GRANTS_ONLY_FOR_AWS_RESOURCES
    assert statement["Sid"] == "CloudWatchLogsOfThisGroup"
    assert statement["Principal"] == {"Service": "logs.us-west-2.amazonaws.com"}
    assert statement["Condition"] == {
        "ArnEquals": {
            "kms:EncryptionContext:aws:logs:arn": {
                "Fn::Join": [
                    "",
                    [
                        "arn:",
                        {"Ref": "AWS::Partition"},
                        ":logs:us-west-2:123456789012:log-group:/ml-platform/S/vpc-flow-logs",
                    ],
                ]
            }
        }
    }
    azs = ("us-west-2a", "us-west-2b")
    with pytest.raises(ValueError, match=r"flow_log_group_name = 'aws/x': expected 1 to 512"):
        PlatformVpc(
            stack,
            "Bad",
            props=PlatformVpcProps(
                availability_zones=azs, trainium_az="us-west-2a", flow_log_group_name="aws/x"
            ),
        )
    with pytest.raises(ValueError, match=r"flow_log_group_name = 'a b'"):
        PlatformVpc(
            stack,
            "Bad2",
            props=PlatformVpcProps(
                availability_zones=azs, trainium_az="us-west-2a", flow_log_group_name="a b"
            ),
        )


def _storage_warnings(overrides: dict, readers: int) -> list[str]:
    from aws_cdk.assertions import Annotations as AssertAnnotations

    from ml_platform.config import Settings
    from ml_platform.stacks.network import NetworkStack
    from ml_platform.stacks.storage import StorageStack

    settings = Settings.from_context(overrides)
    app = new_app()
    env = cdk.Environment(account="123456789012", region="us-west-2")
    net = NetworkStack(app, "N", settings=settings.network, env=env)
    storage = StorageStack(
        app,
        "S",
        settings=settings.storage,
        image_repository_name="ml-platform/training",
        vpc=net.vpc,
        trainium_subnet=net.trainium_subnet,
        lustre_readers=readers,
        env=env,
    )
    return [
        w.entry.data
        for w in AssertAnnotations.from_stack(storage).find_warning(
            "*", Match.string_like_regexp("FSx for Lustre gives")
        )
    ]


def _fsx_provider_schema() -> dict:
    """AWS::FSx::FileSystem's CloudFormation provider schema as cfn-lint ships it."""
    import os

    import cfnlint

    folder = os.path.join(os.path.dirname(cfnlint.__file__), "data", "schemas", "resources")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            schema = json.load(f)
        if isinstance(schema, dict) and schema.get("typeName") == "AWS::FSx::FileSystem":
            return schema
    raise AssertionError("cfn-lint ships no AWS::FSx::FileSystem schema")


def test_the_default_throughput_meets_the_per_node_figure_and_updates_in_place() -> None:
    """Observed: the default settings' file system (1200 GiB at 250 MB/s/TiB, 293 MB/s) meets
    117 MB/s for each of the default 2 nodes, so no warning. From the provider schema: neither
    its throughput nor its capacity is create-only, so raising the default on a deployed
    file system updates it in place instead of replacing it (and its data)."""
    assert _storage_warnings({}, 2) == []
    create_only = _fsx_provider_schema()["createOnlyProperties"]
    assert not [p for p in create_only if "LustreConfiguration" in p or "StorageCapacity" in p]
    assert "/properties/FileSystemType" in create_only  # the schema is the one that says so


def test_lustre_throughput_below_the_samples_per_node_figure_warns() -> None:
    """1200 GiB at 125 MB/s/TiB is 146 MB/s; the Neuron sample gives each node 117 MB/s."""
    (text,) = _storage_warnings({"storage": {"fsx_throughput_per_tib": 125}}, 2)
    assert text.startswith(
        "FSx for Lustre gives 146 MB/s (storage.fsx_storage_gib = 1200 at "
        "storage.fsx_throughput_per_tib = 125 MB/s/TiB) for 2 Trainium nodes"
    )
    assert "117 MB/s per node (234 MB/s here)" in text
    # 250 MB/s/TiB: 293 MB/s for 2 nodes is enough, for 4 it is not.
    assert _storage_warnings({"storage": {"fsx_throughput_per_tib": 250}}, 2) == []
    assert len(_storage_warnings({"storage": {"fsx_throughput_per_tib": 250}}, 4)) == 1
    assert _storage_warnings({}, 0) == []  # no training cluster: nothing reads it


def test_the_app_counts_the_bert_jobs_nodes_as_lustre_readers() -> None:
    """A group scaled to 0 still runs its jobs on max_nodes (training.jobs.bert_nodes)."""
    from aws_cdk.assertions import Annotations as AssertAnnotations

    from ml_platform.app import _network_stack, _storage_stack
    from ml_platform.config import Settings

    settings = Settings.from_context(
        {
            "trainium": {"nodes": 0, "min_nodes": 0, "max_nodes": 4},
            "storage": {"fsx_throughput_per_tib": 250},
        }
    )
    app = new_app()
    env = cdk.Environment(account="123456789012", region="us-west-2")
    storage = _storage_stack(app, settings, _network_stack(app, settings, env), env)
    (warning,) = AssertAnnotations.from_stack(storage).find_warning(
        "*", Match.string_like_regexp("FSx for Lustre gives")
    )
    assert "for 4 Trainium nodes" in warning.entry.data


# -- the S3 gateway endpoint's policy and the default security group ---------------------------


def _endpoint_allows(policy: dict, action: str, arn: str, resource_account: str) -> bool:
    """IAM evaluation of an endpoint policy's Allow statements (no Deny statements in it):
    action and resource wildcards, and the aws:ResourceAccount condition."""
    from fnmatch import fnmatchcase

    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow" and statement["Principal"] == {"AWS": "*"}
        actions = (
            statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        )
        resources = (
            statement["Resource"]
            if isinstance(statement["Resource"], list)
            else [statement["Resource"]]
        )
        condition = statement.get("Condition", {})
        assert set(condition) <= {"StringEquals"}
        if condition and condition["StringEquals"] != {"aws:ResourceAccount": resource_account}:
            continue
        if any(fnmatchcase(action, a) for a in actions) and any(
            fnmatchcase(arn, r) for r in resources
        ):
            return True
    return False


@pytest.mark.parametrize(
    ("action", "arn", "account", "expected"),
    [
        # The platform's own buckets (model archives, CDK assets): anything.
        (
            "s3:GetObject",
            "arn:aws:s3:::mlplatform-storage-models/models/x.tar.gz",
            "123456789012",
            True,
        ),
        (
            "s3:PutObject",
            "arn:aws:s3:::cdk-hnb659fds-assets-123456789012-us-west-2/a.zip",
            "123456789012",
            True,
        ),
        # Another account's bucket: refused, read or write (exfiltration through the endpoint).
        ("s3:PutObject", "arn:aws:s3:::attacker-bucket/loot", "999999999999", False),
        ("s3:GetObject", "arn:aws:s3:::attacker-bucket/tool", "999999999999", False),
        # AWS-owned buckets the nodes read: ECR layers, AL2023 repos, SSM, the BERT dataset.
        (
            "s3:GetObject",
            "arn:aws:s3:::prod-us-west-2-starport-layer-bucket/sha256/ab",
            "602401143452",
            True,
        ),
        (
            "s3:PutObject",
            "arn:aws:s3:::prod-us-west-2-starport-layer-bucket/sha256/ab",
            "602401143452",
            False,
        ),
        (
            "s3:GetObject",
            "arn:aws:s3:::prod-eu-west-1-starport-layer-bucket/sha256/ab",
            "602401143452",
            False,
        ),
        (
            "s3:GetObject",
            "arn:aws:s3:::al2023-repos-us-west-2-de612dc2/core/mirrors",
            "137112412989",
            True,
        ),
        (
            "s3:GetObject",
            "arn:aws:s3:::amazon-ssm-us-west-2/latest/linux_amd64/amazon-ssm-agent.rpm",
            "1",
            True,
        ),
        ("s3:GetObject", "arn:aws:s3:::neuron-s3/training_datasets/x.tar", "1", True),
        ("s3:ListBucket", "arn:aws:s3:::neuron-s3", "1", False),
        # The kubectl provider's custom-resource responses to CloudFormation.
        (
            "s3:PutObject",
            "arn:aws:s3:::cloudformation-custom-resource-response-uswest2/arn%3Ax",
            "1",
            True,
        ),
        (
            "s3:GetObject",
            "arn:aws:s3:::cloudformation-custom-resource-response-uswest2/arn%3Ax",
            "1",
            False,
        ),
    ],
)
def test_s3_endpoint_allows_own_account_and_named_aws_buckets_only(
    synth: SynthesizedPlatform, action, arn, account, expected
) -> None:
    (endpoint,) = [
        r
        for r in synth.template_json("Network")["Resources"].values()
        if r["Type"] == "AWS::EC2::VPCEndpoint"
    ]
    policy = endpoint["Properties"]["PolicyDocument"]
    assert _endpoint_allows(policy, action, arn, account) is expected


def test_dataset_bucket_in_the_endpoint_policy_is_the_jobs_bucket() -> None:
    from ml_platform.constructs.network import DATASET_BUCKET
    from ml_platform.training.jobs import BERT_DATASET_URI

    assert BERT_DATASET_URI.startswith(f"s3://{DATASET_BUCKET}/")


def test_default_security_group_is_emptied(synth: SynthesizedPlatform) -> None:
    """Security Hub EC2.2, with aws-cdk's custom resource (network.restrict_default_security_group)."""
    resources = synth.template_json("Network")["Resources"]
    (restrict,) = [r for r in resources.values() if r["Type"] == "Custom::VpcRestrictDefaultSG"]
    (vpc_id,) = [k for k, r in resources.items() if r["Type"] == "AWS::EC2::VPC"]
    assert restrict["Properties"]["DefaultSecurityGroupId"] == {
        "Fn::GetAtt": [vpc_id, "DefaultSecurityGroup"]
    }
    app_off = PlatformVpc(
        cdk.Stack(
            new_app(), "Off", env=cdk.Environment(account="123456789012", region="eu-west-1")
        ),
        "Vpc",
        props=PlatformVpcProps(
            availability_zones=("eu-west-1a", "eu-west-1b"),
            trainium_az="eu-west-1a",
            restrict_default_security_group=False,
        ),
    )
    assert not Template.from_stack(cdk.Stack.of(app_off)).find_resources(
        "Custom::VpcRestrictDefaultSG"
    )
