"""mlp cost: the estimator over the real synthesized templates, the CLI, refresh and annotations."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from ml_platform.config import Settings
from ml_platform_cli.cost import build_report
from ml_platform_cli.main import main
from ml_platform_pricing import (
    FREE,
    MISSING,
    OK,
    PRICED,
    UNCLASSIFIED,
    UNKNOWN,
    UNPRICED,
    USAGE_BASED,
    Price,
    PriceTable,
    classify,
    compare_multi_model,
    estimate_template,
)
from ml_platform_pricing.assembly import read_assembly, template_in_memory
from ml_platform_pricing.refresh import Query, rebuild
from ml_platform_pricing.table import EC2, FSX_LUSTRE_PERSISTENT2, SAGEMAKER_HOSTING
from tests.support import cdk_json_context

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = PriceTable.load()


def _price(region: str, service: str, key: str, usd: float, unit: str = "hour") -> Price:
    return Price(region, service, key, usd, unit, "https://example.test/prices", "2026-12-01")


@pytest.fixture(scope="module")
def stacks(synth):
    return read_assembly(synth.outdir)


@pytest.fixture(scope="module")
def lustre_125(synth, tmp_path_factory):
    """The default cloud assembly's JSON (manifest and templates, not the assets) with the
    file system at 125 MB/s/TiB, the one Lustre tier the shipped table prices (us-east-1, a
    third-party figure): the default is 250 since 2026-12, which the table has no source for."""
    out = tmp_path_factory.mktemp("cdk.out.lustre125")
    for path in synth.outdir.glob("*.json"):
        text = path.read_text()
        if path.name.endswith(".template.json"):
            template = json.loads(text)
            for resource in template.get("Resources", {}).values():
                if resource["Type"] == "AWS::FSx::FileSystem":
                    resource["Properties"]["LustreConfiguration"]["PerUnitStorageThroughput"] = 125
            text = json.dumps(template)
        (out / path.name).write_text(text)
    return out


def _estimate(stacks, region, table=SHIPPED):
    return [estimate_template(s.template, stack=s.name, region=region, table=table) for s in stacks]


def _item(estimates, type_):
    return [i for e in estimates for i in e.items if i.type == type_]


# --- coverage of resource types --------------------------------------------------------


def test_the_billable_types_the_platform_deploys_are_priced(stacks):
    # Not "every synthesized type is classified": a type the estimator does not know is
    # reported as unpriced (next test), so a construct that adds one needs no edit here.
    types = {r["Type"] for s in stacks for r in s.template["Resources"].values()}
    for type_ in (
        "AWS::EKS::Cluster",
        "AWS::EKS::Nodegroup",
        "AWS::SageMaker::Endpoint",
        "AWS::FSx::FileSystem",
        "AWS::EC2::NatGateway",
        # a fixed monthly fee whatever the use
        "AWS::KMS::Key",
        "AWS::CloudWatch::Alarm",
        "AWS::Logs::MetricFilter",
    ):
        assert type_ in types and classify(type_) == PRICED
    for type_ in ("AWS::CloudWatch::Dashboard", "AWS::SecretsManager::Secret"):
        assert classify(type_) == PRICED
    for type_ in (
        "AWS::S3::Bucket",
        "AWS::ECR::Repository",
        "AWS::Logs::LogGroup",
        "AWS::Lambda::Function",
    ):
        assert type_ in types and classify(type_) == USAGE_BASED
    assert classify("AWS::IAM::Role") == FREE
    assert classify("AWS::Made::Up") == UNCLASSIFIED


def test_a_type_the_estimator_does_not_know_is_reported_unpriced_and_not_counted():
    from ml_platform_cli.cost import render_text
    from ml_platform_pricing.assembly import StackTemplate

    template = {
        "Resources": {
            "Nat": {"Type": "AWS::EC2::NatGateway", "Properties": {"SubnetId": "subnet-1"}},
            "Thing": {"Type": "AWS::Made::Up", "Properties": {}},
        }
    }
    (estimate,) = _estimate([StackTemplate("S", "us-east-1", template)], "us-east-1")
    (thing,) = _item([estimate], "AWS::Made::Up")
    assert (thing.category, thing.status) == (UNCLASSIFIED, UNPRICED)
    assert estimate.incomplete == [thing]
    assert estimate.monthly == pytest.approx(32.85)  # the NAT gateway alone
    # What a synth-time annotation says
    assert estimate.summary().endswith("; not counted: Thing (unpriced)")
    report = build_report(
        [StackTemplate("S", "us-east-1", template)],
        SHIPPED,
        region=None,
        archives={},
        training_hours=None,
    )
    assert report["total"]["complete"] is False
    assert report["total"]["not_counted"] == ["S/Thing (unpriced)"]
    assert report["unclassified_types"] == ["AWS::Made::Up"]
    lines = [line.strip() for line in render_text(report).splitlines()]
    (stack_line,) = [line for line in lines if line.startswith("S (us-east-1): ")]
    assert stack_line.endswith("[incomplete: see below]")
    assert "Not counted in the totals (missing price, unknown value or unpriced type):" in lines
    assert "unpriced (type unknown to the estimator): AWS::Made::Up" in lines
    assert "S/Thing (unpriced)" in lines
    assert (
        "Unpriced resource types (the estimator has no rule for them; their resources are "
        "not counted): AWS::Made::Up"
    ) in lines


# --- the default templates, priced --------------------------------------------------------


def test_default_templates_in_us_east_1(stacks):
    estimates = _estimate(stacks, "us-east-1")
    nodegroups = {i.description.split()[2]: i for i in _item(estimates, "AWS::EKS::Nodegroup")}
    trn = nodegroups["trn1.32xlarge"]
    # Instance type read from the launch template the node group references.
    assert trn.status == OK and trn.training
    assert trn.hourly == pytest.approx(2 * SHIPPED.get("us-east-1", EC2, "trn1.32xlarge").usd)
    assert trn.hourly == pytest.approx(43.0) and trn.monthly == pytest.approx(43.0 * 730)
    gpu = nodegroups["g5.2xlarge"]
    # Triton on EKS has no autoscaling: its node group's maximum is its desired size.
    assert gpu.hourly == pytest.approx(1.212) and gpu.ceiling_hourly is None
    assert not gpu.training
    assert "EBS volumes on their own line" in trn.reason
    (cluster,) = _item(estimates, "AWS::EKS::Cluster")
    assert cluster.hourly == pytest.approx(0.10)
    (fsx,) = _item(estimates, "AWS::FSx::FileSystem")
    # The default tier is 250 MB/s/TiB (the per-node figure); the shipped table has a
    # (third-party) us-east-1 price for 125 only: reported missing, not guessed.
    assert fsx.monthly is None and "250 MB/s/TiB in us-east-1" in fsx.reason
    (nat,) = _item(estimates, "AWS::EC2::NatGateway")
    assert nat.hourly == pytest.approx(0.045)
    (gateway_endpoint,) = _item(estimates, "AWS::EC2::VPCEndpoint")
    assert gateway_endpoint.category == FREE
    # Every priced line names where its price came from and when.
    for item in (trn, gpu, cluster, nat):
        assert item.prices and all(p.source.startswith("https://") and p.taken for p in item.prices)


def test_a_missing_price_is_reported_missing_and_left_out_of_the_total(stacks):
    inference = next(
        s
        for s in stacks
        if any(r["Type"] == "AWS::SageMaker::Endpoint" for r in s.template["Resources"].values())
    )
    table = PriceTable()  # nothing priced
    estimate = estimate_template(
        inference.template, stack=inference.name, region="us-east-1", table=table
    )
    (endpoint,) = _item([estimate], "AWS::SageMaker::Endpoint")
    assert endpoint.status == MISSING and endpoint.hourly is None
    assert "ml.g4dn.4xlarge" in endpoint.reason
    assert endpoint in estimate.incomplete and "not counted" in estimate.summary()
    assert estimate.monthly == 0  # nothing priced counts as zero
    table.add(_price("us-east-1", SAGEMAKER_HOSTING, "ml.g4dn.4xlarge", 1.505))
    estimate = estimate_template(
        inference.template, stack=inference.name, region="us-east-1", table=table
    )
    (endpoint,) = _item([estimate], "AWS::SageMaker::Endpoint")
    assert endpoint.status == OK and endpoint.hourly == pytest.approx(1.505)
    # The autoscaling target's maximum (2) is the ceiling.
    assert endpoint.ceiling_hourly == pytest.approx(2 * 1.505)
    assert endpoint.endpoint["variants"][0]["multi_model"] is True


TRN_EBS_MONTHLY = 2 * (500 * 0.08 + (16000 - 3000) * 0.005 + (1000 - 125) * 0.04)
"""The two Trainium root volumes a month: storage, IOPS and throughput above gp3's baseline."""


def _ebs_items(estimates):
    return {
        (i.stack, i.logical_id): i
        for i in _item(estimates, "AWS::EKS::Nodegroup")
        if i.description.startswith("EBS")
    }


@pytest.mark.parametrize("region", ["us-east-1", "us-west-2"])
def test_node_group_root_volumes_are_priced_per_node_at_desired_and_maximum(stacks, region):
    estimates = _estimate(stacks, region)
    volumes = _ebs_items(estimates)
    gp3 = SHIPPED.get(region, "ebs-gp3", "storage").usd
    assert gp3 == 0.08
    # 2 x 500 GiB Trainium (with 16000 IOPS and 1000 MiB/s: 13000 IOPS x $0.005 and
    # 875 MiB/s x $0.04 above gp3's baseline, $100 a node, = 1250 GiB-months at $0.08),
    # 2 x 50 GiB system, 1 x 50 GiB training helper, 1 x 100 GiB GPU.
    assert sorted(round(i.monthly / gp3) for i in volumes.values()) == [50, 100, 100, 3500]
    trn = next(i for i in volumes.values() if i.training)
    assert trn.description.startswith("EBS 500 GiB gp3")
    assert trn.monthly == pytest.approx(TRN_EBS_MONTHLY) and trn.hourly == pytest.approx(
        TRN_EBS_MONTHLY / 730
    )
    gpu = next(i for i in volumes.values() if i.description.startswith("EBS 100 GiB"))
    assert gpu.description == "EBS 100 GiB gp3 per node x 1 (max 1)"
    assert gpu.monthly == pytest.approx(8.0) and gpu.ceiling_monthly is None
    # 8 system + 4 training helper + 8 GPU.
    assert sum(i.monthly for i in volumes.values()) == pytest.approx(20.0 + TRN_EBS_MONTHLY)
    assert all(i.status == OK and i.prices for i in volumes.values())
    # A training run pays for its nodes' volumes too.
    from ml_platform_pricing import training_hourly

    assert training_hourly(estimates)[0] == pytest.approx(43.0 + TRN_EBS_MONTHLY / 730)


def _launch_template_group(ebs, **nodegroup):
    return {
        "Resources": {
            "Lt": {
                "Type": "AWS::EC2::LaunchTemplate",
                "Properties": {
                    "LaunchTemplateData": {
                        "InstanceType": "m6i.large",
                        "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": ebs}],
                    }
                },
            },
            "Ng": {
                "Type": "AWS::EKS::Nodegroup",
                "Properties": {
                    "ScalingConfig": {"DesiredSize": 2, "MaxSize": 3},
                    "LaunchTemplate": {"Id": {"Ref": "Lt"}},
                    **nodegroup,
                },
            },
        }
    }


def test_gp3_iops_and_throughput_above_the_baseline_bill_on_top():
    template = _launch_template_group(
        {"VolumeType": "gp3", "VolumeSize": 100, "Iops": 6000, "Throughput": 250}
    )
    estimate = estimate_template(template, stack="S", region="us-east-1", table=SHIPPED)
    (volumes,) = _ebs_items([estimate]).values()
    # 100 GiB x $0.08 + (6,000 - 3,000) IOPS x $0.005 + (250 - 125) MiB/s x $0.04 = $28/node.
    assert volumes.monthly == pytest.approx(2 * 28.0)
    assert volumes.ceiling_monthly == pytest.approx(3 * 28.0)
    assert volumes.description == ("EBS 100 GiB gp3 at 6000 IOPS, 250 MiB/s per node x 2 (max 3)")
    assert {p.key for p in volumes.prices} == {"storage", "iops", "throughput"}
    # At the baseline, only storage bills.
    base = estimate_template(
        _launch_template_group(
            {"VolumeType": "gp3", "VolumeSize": 100, "Iops": 3000, "Throughput": 125}
        ),
        stack="S",
        region="us-east-1",
        table=SHIPPED,
    )
    (volumes,) = _ebs_items([base]).values()
    assert volumes.monthly == pytest.approx(16.0) and [p.key for p in volumes.prices] == ["storage"]


def _group_line(estimate):
    """The node group's own line (its volumes have another)."""
    (line,) = [
        i
        for i in _item([estimate], "AWS::EKS::Nodegroup")
        if i.description.startswith("node group")
    ]
    return line


def _trainium_group(instance_type: str, **nodegroup):
    template = _launch_template_group({"VolumeType": "gp3", "VolumeSize": 500}, **nodegroup)
    template["Resources"]["Lt"]["Properties"]["LaunchTemplateData"]["InstanceType"] = instance_type
    return template


@pytest.mark.parametrize("instance_type", ["trn2.48xlarge", "trn2u.48xlarge"])
def test_a_trn2_node_group_is_training_and_missing_with_the_tables_reason(instance_type):
    from ml_platform_pricing import training_hourly

    estimate = estimate_template(
        _trainium_group(instance_type), stack="S", region="us-east-2", table=SHIPPED
    )
    group = _group_line(estimate)
    assert group.training  # trn2u too: the training line of the report counts it
    assert group.status == MISSING and group.hourly is None
    assert group.reason == SHIPPED.missing_reason("us-east-2", EC2, instance_type)
    assert "no On-Demand price found" in group.reason
    hourly, unknown = training_hourly([estimate])
    assert group in unknown and hourly == pytest.approx(500 * 0.08 * 2 / 730)  # volumes only


def test_a_capacity_block_node_group_says_the_on_demand_rate_is_not_its_bill():
    block = estimate_template(
        _trainium_group("trn1.32xlarge", CapacityType="CAPACITY_BLOCK"),
        stack="S",
        region="us-east-1",
        table=SHIPPED,
    )
    on_demand = estimate_template(
        _trainium_group("trn1.32xlarge"), stack="S", region="us-east-1", table=SHIPPED
    )
    group, plain = _group_line(block), _group_line(on_demand)
    assert group.hourly == plain.hourly == pytest.approx(2 * 21.5)
    assert "Capacity Block: its price is charged up front at purchase" in group.reason
    assert "Capacity Block" not in plain.reason


def test_mlp_cost_over_a_trn2_synthesis(trn2, capsys):
    """The whole app with trn2.48xlarge: its node group is MISSING with the reason, never $0."""
    assert main(["cost", "--cdk-out", str(trn2.outdir), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (group,) = [
        r
        for s in report["stacks"]
        for r in s["resources"]
        if r["description"].startswith("node group trn2.48xlarge")
    ]
    assert group["status"] == "missing" and group.get("hourly_usd") is None
    assert "no ec2 price for trn2.48xlarge in us-west-2 in the price table: " in group["reason"]


def test_volumes_the_table_cannot_price_are_missing_or_unknown_never_zero():
    gp2 = estimate_template(
        _launch_template_group({"VolumeType": "gp2", "VolumeSize": 100}),
        stack="S",
        region="us-east-1",
        table=SHIPPED,
    )
    (item,) = [i for i in gp2.items if i.description == "EBS volumes"]
    assert item.status == MISSING and "gp3 volumes only, not gp2" in item.reason
    assert item in gp2.incomplete
    sized_by_ami = estimate_template(
        _launch_template_group({"VolumeType": "gp3"}), stack="S", region="us-east-1", table=SHIPPED
    )
    (item,) = [i for i in sized_by_ami.items if i.description == "EBS volumes"]
    assert item.status == UNKNOWN and "VolumeSize is not set" in item.reason
    own_template = {
        "Resources": {
            "Ng": {
                "Type": "AWS::EKS::Nodegroup",
                "Properties": {
                    "ScalingConfig": {"DesiredSize": 1},
                    "InstanceTypes": ["m6i.large"],
                    "DiskSize": 20,
                },
            }
        }
    }
    estimate = estimate_template(own_template, stack="S", region="us-east-1", table=SHIPPED)
    compute, volumes = estimate.items
    assert compute.status == OK and volumes.status == UNKNOWN
    assert "EKS's own launch template" in volumes.reason
    no_gp3 = PriceTable(prices={k: v for k, v in SHIPPED.prices.items() if k[1] != "ebs-gp3"})
    estimate = estimate_template(
        _launch_template_group({"VolumeType": "gp3", "VolumeSize": 10}),
        stack="S",
        region="us-east-1",
        table=no_gp3,
    )
    (item,) = [i for i in estimate.items if i.description == "EBS volumes"]
    assert item.status == MISSING and "no ebs-gp3 price for storage in us-east-1" in item.reason


def test_fixed_monthly_fees_are_priced_and_their_use_stays_usage_based(stacks):
    estimates = _estimate(stacks, "us-west-2")
    keys = _item(estimates, "AWS::KMS::Key")
    alarms = _item(estimates, "AWS::CloudWatch::Alarm")
    filters = _item(estimates, "AWS::Logs::MetricFilter")
    assert keys and alarms and filters
    for key in keys:
        assert key.status == OK and key.monthly == 1.0 and "requests bill by use" in key.reason
        assert key.prices[0].source == "https://aws.amazon.com/kms/pricing/"
    # Every key of the platform rotates: the yearly rotation's fee is named.
    assert all("rotation adds $1/month" in k.reason for k in keys)
    for alarm in alarms:
        assert alarm.status == OK and alarm.monthly == pytest.approx(0.10)
        assert alarm.description == "CloudWatch alarm (1 standard alarm metric)"
    for metric_filter in filters:
        assert metric_filter.monthly == pytest.approx(0.30)
    fees = sum(i.monthly for i in keys + alarms + filters)
    assert fees == pytest.approx(len(keys) * 1.0 + len(alarms) * 0.10 + len(filters) * 0.30)
    # The alarms' and metrics' fees reach the stack totals.
    inference = next(e for e in estimates if any(i in e.items for i in alarms))
    assert inference.monthly == pytest.approx(
        sum(i.monthly for i in inference.items if i.category == PRICED and i.status == OK)
    )
    assert inference.monthly > 0


def test_alarm_metrics_resolution_dashboards_and_secrets():
    template = {
        "Resources": {
            "Math": {
                "Type": "AWS::CloudWatch::Alarm",
                "Properties": {
                    "Metrics": [
                        {"Id": "a", "MetricStat": {"Metric": {"MetricName": "A"}, "Period": 60}},
                        {"Id": "b", "MetricStat": {"Metric": {"MetricName": "B"}, "Period": 60}},
                        {"Id": "e", "Expression": "a + b"},
                    ]
                },
            },
            "Fast": {
                "Type": "AWS::CloudWatch::Alarm",
                "Properties": {"MetricName": "X", "Period": 10},
            },
            "Dash": {"Type": "AWS::CloudWatch::Dashboard", "Properties": {"DashboardBody": "{}"}},
            "Secret": {"Type": "AWS::SecretsManager::Secret", "Properties": {}},
            "Filter": {
                "Type": "AWS::Logs::MetricFilter",
                "Properties": {
                    "MetricTransformations": [
                        {
                            "MetricName": "A",
                            "MetricNamespace": "N",
                            "MetricValue": "1",
                            "Dimensions": [{"Key": "k", "Value": "$.k"}],
                        },
                        {"MetricName": "B", "MetricNamespace": "N", "MetricValue": "1"},
                    ]
                },
            },
        }
    }
    estimate = estimate_template(template, stack="S", region="us-east-2", table=SHIPPED)
    by_id = {i.logical_id: i for i in estimate.items}
    assert by_id["Math"].monthly == pytest.approx(0.20)  # two metrics, the expression is free
    assert by_id["Fast"].monthly == pytest.approx(0.30)  # 10 s: high resolution
    assert "high-resolution" in by_id["Fast"].description
    assert by_id["Dash"].monthly == 3.0 and "first 3 dashboards" in by_id["Dash"].reason
    assert by_id["Secret"].monthly == 0.40 and "API calls bill by use" in by_id["Secret"].reason
    assert by_id["Filter"].monthly == pytest.approx(0.60)
    assert "distinct dimension value" in by_id["Filter"].reason
    assert estimate.monthly == pytest.approx(0.20 + 0.30 + 3.0 + 0.40 + 0.60)
    # A region with no such fee in the table: missing, never zero.
    elsewhere = estimate_template(template, stack="S", region="eu-west-1", table=SHIPPED)
    assert {i.status for i in elsewhere.items} == {MISSING} and elsewhere.monthly == 0


def test_what_the_templates_imply_but_cannot_price_is_named_not_estimated(stacks, settings):
    estimates = _estimate(stacks, "us-west-2")
    notes = [n for e in estimates for n in e.not_estimated]
    version = settings.cluster.kubernetes_version
    (cluster,) = _item(estimates, "AWS::EKS::Cluster")
    # The template states the support type the settings chose (EKS's default, EXTENDED).
    assert settings.cluster.support_type == "EXTENDED"
    assert [n for n in notes if "extended support" in n.lower() or "standard support" in n] == [
        f"{cluster.logical_id}: $0.60/h instead of $0.10/h once Kubernetes {version} leaves "
        "standard support (https://docs.aws.amazon.com/eks/latest/userguide/"
        "kubernetes-versions.html): support type EXTENDED"
    ]
    assert any(
        "control-plane logs (api, audit, authenticator, controllerManager, scheduler)" in n
        for n in notes
    )
    assert any("amazon-cloudwatch-observability" in n and "Container Insights" in n for n in notes)

    # A cluster on STANDARD support has no such line; one with no UpgradePolicy says that
    # EKS's default applies.
    def cluster_template(policy):
        props = {"Version": "1.35", **({"UpgradePolicy": policy} if policy else {})}
        return {"Resources": {"C": {"Type": "AWS::EKS::Cluster", "Properties": props}}}

    standard = estimate_template(
        cluster_template({"SupportType": "STANDARD"}), stack="S", region="us-east-1", table=SHIPPED
    )
    assert standard.not_estimated == [] and "no extended-support fee" in standard.items[0].reason
    unset = estimate_template(cluster_template(None), stack="S", region="us-east-1", table=SHIPPED)
    assert unset.not_estimated == [
        "C: $0.60/h instead of $0.10/h once Kubernetes 1.35 leaves standard support "
        "(https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html): support "
        "type EXTENDED (the default: the template sets no UpgradePolicy)"
    ]
    extended = SHIPPED.get("us-east-1", "eks-cluster", "extended")
    assert extended.usd == 0.60 and "$0.60 per cluster per hour" in extended.note


def test_support_type_setting_is_validated_and_reaches_the_template(synth):
    from ml_platform.config import SettingsError

    with pytest.raises(
        SettingsError,
        match=r"cluster.support_type = 'LONG': expected one of "
        r"\['EXTENDED', 'STANDARD'\]",
    ):
        Settings.from_context({"cluster": {"support_type": "LONG"}})
    assert (
        Settings.from_context({"cluster": {"support_type": "STANDARD"}}).cluster.support_type
        == "STANDARD"
    )
    clusters = [
        r["Properties"]
        for s in read_assembly(synth.outdir)
        for r in s.template["Resources"].values()
        if r["Type"] == "AWS::EKS::Cluster"
    ]
    assert [c["UpgradePolicy"] for c in clusters] == [{"SupportType": "EXTENDED"}]


def test_pseudo_parameters_sub_and_join_resolve_as_cloudformation_would():
    template = {
        "Resources": {
            "SubGateway": {
                "Type": "AWS::EC2::VPCEndpoint",
                "Properties": {
                    "VpcEndpointType": "Gateway",
                    "ServiceName": {"Fn::Sub": "com.amazonaws.${AWS::Region}.s3"},
                },
            },
            "JoinGateway": {
                "Type": "AWS::EC2::VPCEndpoint",
                "Properties": {
                    "ServiceName": {"Fn::Join": [".", [{"Ref": "AWS::URLSuffix"}, "dynamodb"]]}
                },
            },
            "ImportedGateway": {
                "Type": "AWS::EC2::VPCEndpoint",
                "Properties": {
                    "VpcEndpointType": "Gateway",
                    "ServiceName": {"Fn::ImportValue": "x"},
                },
            },
            "Iface": {
                "Type": "AWS::EC2::VPCEndpoint",
                "Properties": {
                    "VpcEndpointType": "Interface",
                    "SubnetIds": ["s-1"],
                    "ServiceName": {
                        "Fn::Sub": [
                            "com.${Domain}.${AWS::Region}.ecr.${Api}${!Literal}",
                            {"Domain": "amazonaws", "Api": "api"},
                        ]
                    },
                },
            },
            "Lt": {
                "Type": "AWS::EC2::LaunchTemplate",
                "Properties": {"LaunchTemplateData": {"InstanceType": {"Fn::Sub": "m6i.${Size}"}}},
            },
            "Ng": {
                "Type": "AWS::EKS::Nodegroup",
                "Properties": {
                    "ScalingConfig": {"DesiredSize": 1},
                    "LaunchTemplate": {"Id": {"Ref": "Lt"}},
                },
            },
        },
        "Parameters": {"Size": {"Type": "String"}},
    }
    estimate = estimate_template(
        template, stack="S", region="cn-north-1", table=SHIPPED, account="123456789012"
    )
    by_id = {i.logical_id: i for i in estimate.items}
    assert by_id["SubGateway"].category == FREE
    assert by_id["SubGateway"].description == "gateway endpoint com.amazonaws.cn-north-1.s3"
    assert by_id["JoinGateway"].category == FREE
    assert by_id["JoinGateway"].description == "gateway endpoint amazonaws.com.cn.dynamodb"
    # The endpoint type decides the charge: a gateway is free whatever its name resolves to.
    assert by_id["ImportedGateway"].category == FREE
    assert by_id["Iface"].description == (
        "interface endpoint com.amazonaws.cn-north-1.ecr.api${Literal} in 1 AZ(s)"
    )
    # A Ref to a parameter inside Fn::Sub stays unknown.
    assert by_id["Ng"].status == UNKNOWN and "parameter Size" in by_id["Ng"].reason


def test_unresolvable_values_are_unknown_not_zero():
    template = {
        "Parameters": {"Size": {"Type": "Number"}},
        "Resources": {
            "Lt": {
                "Type": "AWS::EC2::LaunchTemplate",
                "Properties": {"LaunchTemplateData": {"InstanceType": "m6i.large"}},
            },
            "ByParam": {
                "Type": "AWS::EKS::Nodegroup",
                "Properties": {
                    "ScalingConfig": {"DesiredSize": {"Ref": "Size"}, "MaxSize": 3},
                    "LaunchTemplate": {"Id": {"Ref": "Lt"}},
                },
            },
            "ByName": {
                "Type": "AWS::EKS::Nodegroup",
                "Properties": {
                    "ScalingConfig": {"DesiredSize": 3},
                    "InstanceTypes": [{"Fn::ImportValue": "Other-InstanceType"}],
                },
            },
            "Fsx": {
                "Type": "AWS::FSx::FileSystem",
                "Properties": {
                    "FileSystemType": "LUSTRE",
                    "StorageCapacity": {"Ref": "Size"},
                    "LustreConfiguration": {
                        "DeploymentType": "PERSISTENT_2",
                        "PerUnitStorageThroughput": 125,
                    },
                },
            },
            "Elsewhere": {
                "Type": "AWS::SageMaker::Endpoint",
                "Properties": {"EndpointConfigName": {"Fn::ImportValue": "Other-Config"}},
            },
            "Iface": {
                "Type": "AWS::EC2::VPCEndpoint",
                "Properties": {
                    "VpcEndpointType": "Interface",
                    "ServiceName": "com.amazonaws.us-east-1.ecr.api",
                    "SubnetIds": ["subnet-1", "subnet-2"],
                },
            },
        },
    }
    estimate = estimate_template(template, stack="S", region="us-east-1", table=SHIPPED)
    by_id = {i.logical_id: i for i in estimate.items}
    assert by_id["ByParam"].status == UNKNOWN and "parameter Size" in by_id["ByParam"].reason
    assert by_id["ByName"].status == UNKNOWN and "import" in by_id["ByName"].reason
    assert by_id["Fsx"].status == UNKNOWN and by_id["Fsx"].monthly is None
    assert by_id["Elsewhere"].status == UNKNOWN
    assert by_id["Iface"].status == OK and by_id["Iface"].hourly == pytest.approx(2 * 0.01)
    assert estimate.hourly == pytest.approx(0.02)
    assert {i.logical_id for i in estimate.incomplete} == {"ByParam", "ByName", "Fsx", "Elsewhere"}


# Trn2 has no On-Demand price in any source found (prices.json's ec2 gaps say which were read).
TRN2_UNPRICED = ("trn2.48xlarge", "trn2u.48xlarge")


def test_shipped_table_prices_every_ec2_type_the_settings_allow_in_the_trainium_regions():
    from ml_platform.config import ClusterSettings
    from ml_platform.instances import EKS_GPU_INSTANCES, TRAINIUM_INSTANCES

    wanted = (
        set(TRAINIUM_INSTANCES) | set(EKS_GPU_INSTANCES) | {ClusterSettings().system_instance_type}
    )
    assert set(TRN2_UNPRICED) <= wanted
    for region in ("us-east-1", "us-east-2", "us-west-2"):
        missing = sorted(t for t in wanted if SHIPPED.get(region, EC2, t) is None)
        assert missing == list(TRN2_UNPRICED), f"{region}: no shipped price for {missing}"
        # ... and the report says why, naming the types and the sources searched.
        for t in TRN2_UNPRICED:
            why = SHIPPED.missing_reason(region, EC2, t)
            assert why.startswith(f"no ec2 price for {t} in {region} in the price table: ")
            assert "trn2.48xlarge, trn2u.48xlarge: no On-Demand price found" in why
            assert "skypilot-catalog/blob/00148f2a" in why and "mlp cost --refresh" in why


_NO_SOURCE = "no citable public source found on 2026-12-01 (mlp cost --refresh fetches it)"
_NO_HOSTING_SOURCE = (
    "no citable public source for SageMaker real-time inference prices in "
    "this region found on 2026-12-01 (mlp cost --refresh fetches it)"
)
_NO_TRN2_SOURCE = (
    "no On-Demand price in the open-source files built from the Price List API; Capacity "
    "Blocks price at purchase (mlp cost --refresh fetches one if the API has it)"
)
# Prices the settings can ask for that the shipped table lacks, each with the reason. The test
# below fails both ways: a missing price not listed here, and a listed one that is now shipped.
KNOWN_MISSING: dict[str, dict[tuple[str, str], str]] = {
    "us-west-2": {
        **{
            (SAGEMAKER_HOSTING, t): _NO_HOSTING_SOURCE
            for t in (
                "ml.g4dn.xlarge",
                "ml.g4dn.2xlarge",
                "ml.g4dn.4xlarge",
                "ml.g4dn.8xlarge",
                "ml.g4dn.16xlarge",
                "ml.g5.xlarge",
                "ml.g5.2xlarge",
                "ml.g5.4xlarge",
                "ml.g5.8xlarge",
                "ml.g5.16xlarge",
                "ml.p3.2xlarge",
            )
        },
        **{(FSX_LUSTRE_PERSISTENT2, t): _NO_SOURCE for t in ("125", "250", "500", "1000")},
        **{(EC2, t): _NO_TRN2_SOURCE for t in TRN2_UNPRICED},
    },
    "us-east-1": {
        (SAGEMAKER_HOSTING, "ml.g5.16xlarge"): _NO_SOURCE,
        **{(EC2, t): _NO_TRN2_SOURCE for t in TRN2_UNPRICED},
        **{(FSX_LUSTRE_PERSISTENT2, t): _NO_SOURCE for t in ("250", "500", "1000")},
    },
}


def _allowed_prices() -> set[tuple[str, str]]:
    """(service, key) of every price the settings can make the platform need."""
    from ml_platform.config import ClusterSettings
    from ml_platform.instances import (
        EKS_GPU_INSTANCES,
        SAGEMAKER_MME_GPU_INSTANCES,
        TRAINIUM_INSTANCES,
    )
    from ml_platform.limits import FSX_THROUGHPUTS

    ec2 = (
        set(TRAINIUM_INSTANCES) | set(EKS_GPU_INSTANCES) | {ClusterSettings().system_instance_type}
    )
    return (
        {(EC2, t) for t in ec2}
        | {(SAGEMAKER_HOSTING, t) for t in SAGEMAKER_MME_GPU_INSTANCES}
        | {(FSX_LUSTRE_PERSISTENT2, f"{t:g}") for t in FSX_THROUGHPUTS}
    )


@pytest.mark.parametrize("region", [Settings().env.region, "us-east-1"])
def test_every_price_the_settings_allow_is_shipped_or_listed_with_a_reason(region):
    allowed = _allowed_prices()
    # 4 Trainium + 15 GPU + 1 system EC2 types, 11 SageMaker MME GPU types, 4 Lustre tiers.
    assert len(allowed) == 20 + 11 + 4
    missing = {k for k in allowed if SHIPPED.get(region, *k) is None}
    listed = KNOWN_MISSING[region]
    assert sorted(missing - set(listed)) == [], f"{region}: unlisted missing prices"
    assert sorted(set(listed) - missing) == [], f"{region}: listed but now shipped or not allowed"
    assert all(reason for reason in listed.values())


def test_the_default_region_is_the_one_the_missing_list_was_written_for():
    assert Settings().env.region == "us-west-2"


from ml_platform_pricing.table import aws_owned as _aws_owned  # noqa: E402  (one rule, shared)


def test_service_prices_cite_aws_or_say_why_not():
    # The flat service prices (not the instance tables) cite an AWS-owned page; a third-party
    # source stays only with a note saying no AWS-owned page stating the figure was found.
    services = (
        "eks-cluster",
        "nat-gateway",
        "public-ipv4",
        "vpc-interface-endpoint",
        FSX_LUSTRE_PERSISTENT2,
    )
    rows = [p for p in SHIPPED.prices.values() if p.service in services]
    assert len(rows) == 14  # eks-cluster standard and extended in 3 regions, ...
    third_party = sorted((p.region, p.service, p.key) for p in rows if not _aws_owned(p.source))
    assert third_party == [("us-east-1", FSX_LUSTRE_PERSISTENT2, "125")]
    for price in rows:
        if not _aws_owned(price.source):
            assert re.search(r"no (other )?AWS-owned page", price.note, re.IGNORECASE), price
    for region in ("us-east-1", "us-east-2", "us-west-2"):
        eks = SHIPPED.get(region, "eks-cluster", "standard")
        assert eks.usd == 0.10 and eks.source == (
            "https://aws.amazon.com/blogs/containers/"
            "amazon-eks-extended-support-for-kubernetes-versions-pricing/"
        )
        assert "$0.10 per cluster per hour" in eks.note
        ipv4 = SHIPPED.get(region, "public-ipv4", "hour")
        assert ipv4.usd == 0.005 and ipv4.source.startswith("https://repost.aws/articles/")
        assert "$0.005 per IP per hour" in ipv4.note
        nat = SHIPPED.get(region, "nat-gateway", "hour")
        assert nat.usd == 0.045 and "0.045" in nat.note
    # us-east-1 network prices: the AWS Solutions cost page, which names the region.
    for service, quoted in (
        ("nat-gateway", "$0.045 per NAT Gateway Hour"),
        ("vpc-interface-endpoint", "$0.01 per AZ Hour"),
    ):
        price = next(p for p in rows if p.region == "us-east-1" and p.service == service)
        assert price.source.startswith("https://github.com/awslabs/clickstream-analytics-on-aws/")
        assert quoted in price.note and "us-east-1 region" in price.note
    # Elsewhere the NAT price comes from an AWS sample's per-region table, quoted whole.
    for region in ("us-east-2", "us-west-2"):
        note = SHIPPED.get(region, "nat-gateway", "hour").note
        assert f"'{region}': 0.045" in note
    assert not _aws_owned("https://aws.amazon.com.example.test/x")
    assert not _aws_owned("https://github.com/awsome/x")
    assert _aws_owned("https://repost.aws/knowledge-center/x")


def test_shipped_prices_are_positive_and_sourced():
    assert SHIPPED.prices
    for price in SHIPPED.prices.values():
        assert price.usd > 0 and price.source.startswith("https://") and price.taken
    for region in ("us-east-1", "us-east-2", "us-west-2"):
        assert region in SHIPPED.regions()
    with pytest.raises(ValueError, match="must be positive"):
        PriceTable.from_dict({"prices": [_price("us-east-1", EC2, "x", 0).to_dict()]})


# --- multi-model comparison and training ---------------------------------------------------


def test_two_archives_on_one_g4dn_4xlarge_reproduce_the_source_design():
    # The source design's figures from the SHIPPED table: ml.g4dn.4xlarge real-time inference
    # in us-east-1 at the price the design publishes, two archives on one instance.
    price = SHIPPED.get("us-east-1", SAGEMAKER_HOSTING, "ml.g4dn.4xlarge")
    assert price is not None and price.usd == 1.505 and price.unit == "hour"
    assert price.source.startswith("https://aws.amazon.com/blogs/machine-learning/deploy-thousands")
    comparison = compare_multi_model("triton-ensembles", "ml.g4dn.4xlarge", 1, 2, price)
    assert comparison.configured_hourly == 1.505
    assert comparison.single_model_hourly == 3.01
    assert comparison.saving_percent == 50.0
    assert round(comparison.saving_per_year, 2) == 13_183.80  # 1.505 x 8,760 h
    assert comparison.saving_per_year > 13_000
    assert comparison.to_dict()["saving_per_year_usd"] == 13_183.8


def test_multi_model_arithmetic_with_a_supplied_price():
    # The arithmetic alone, on a made-up price: three archives on two instances at $2/h.
    price = _price("us-east-1", SAGEMAKER_HOSTING, "ml.g5.xlarge", 2.0)
    comparison = compare_multi_model("e", "ml.g5.xlarge", 2, 3, price)
    assert comparison.configured_hourly == 4.0 and comparison.single_model_hourly == 12.0
    assert comparison.saving_hourly == 8.0 and comparison.saving_per_year == 8.0 * 8760
    assert round(comparison.saving_percent, 4) == 66.6667
    with pytest.raises(ValueError, match="at least one archive"):
        compare_multi_model("e", "ml.g4dn.4xlarge", 1, 0, price)
    with pytest.raises(ValueError, match="at least one archive"):
        compare_multi_model("e", "ml.g4dn.4xlarge", 0, 2, price)


def test_report_compares_each_multi_model_endpoint_and_prices_a_training_run(stacks):
    report = build_report(
        stacks, SHIPPED, region="us-east-1", archives={"triton-ensembles": 2}, training_hours=10
    )
    comparison, at_maximum = report["multi_model"]
    assert comparison["at"] == "initial" and comparison["instances"] == 1
    assert comparison["instance_type"] == "ml.g4dn.4xlarge"
    # At the autoscaling maximum (2 instances) each single-model endpoint scales alike.
    assert at_maximum["at"] == "maximum" and at_maximum["instances"] == 2
    assert at_maximum["configured_hourly_usd"] == 3.01
    assert at_maximum["single_model_endpoints_hourly_usd"] == 6.02
    assert at_maximum["saving_percent"] == 50.0
    assert "as many instances of the same type" in report["multi_model_assumption"]
    assert comparison["configured_hourly_usd"] == 1.505
    assert comparison["single_model_endpoints_hourly_usd"] == 3.01
    assert comparison["saving_percent"] == 50.0
    assert comparison["saving_per_year_usd"] == 13_183.8
    assert (
        comparison["price"]["source"]
        == SHIPPED.get("us-east-1", SAGEMAKER_HOSTING, "ml.g4dn.4xlarge").source
    )
    # Two trn1.32xlarge at $21.50/h plus their 2 x 500 GiB gp3 root volumes.
    hourly = 43.0 + TRN_EBS_MONTHLY / 730
    assert report["training"]["hourly_usd"] == pytest.approx(hourly, abs=1e-4)
    assert report["training"]["run_usd"] == pytest.approx(10 * hourly, abs=0.01)
    unknown = build_report(stacks, SHIPPED, region="us-east-1", archives={}, training_hours=None)
    assert (
        unknown["multi_model"] == [] and "archive count unknown" in unknown["multi_model_notes"][0]
    )
    # In a region without a shipped hosting price the comparison says so instead of guessing.
    elsewhere = build_report(
        stacks, SHIPPED, region="us-west-2", archives={"triton-ensembles": 2}, training_hours=None
    )
    assert elsewhere["multi_model"] == []
    assert elsewhere["multi_model_notes"] == [
        "triton-ensembles: no price for ml.g4dn.4xlarge in us-west-2"
    ]


def test_cli_json(synth, capsys):
    assert (
        main(
            [
                "cost",
                "--cdk-out",
                str(synth.outdir),
                "--json",
                "--region",
                "us-east-1",
                "--training-hours",
                "2",
                "--archives",
                "triton-ensembles=3",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert {s["region"] for s in report["stacks"]} == {"us-east-1"}
    assert report["training"]["run_usd"] == pytest.approx(
        2 * (43.0 + TRN_EBS_MONTHLY / 730), abs=0.01
    )
    # us-east-1 has a shipped price for everything the default settings deploy but the file
    # system's 250 MB/s/TiB tier (test_cli_json_complete_with_the_priced_lustre_tier).
    assert report["total"]["complete"] is False
    assert [n for n in report["total"]["not_counted"] if "Lustre" not in str(n)] == []
    (endpoint,) = [
        r
        for s in report["stacks"]
        for r in s["resources"]
        if r["type"] == "AWS::SageMaker::Endpoint"
    ]
    assert endpoint["status"] == "ok" and endpoint["hourly_usd"] == 1.505
    assert endpoint["ceiling_hourly_usd"] == 3.01
    assert [c["archives"] for c in report["multi_model"]] == [3, 3]
    assert report["multi_model"][0]["saving_per_year_usd"] == round(2 * 1.505 * 8760, 2)
    assert report["total"]["hourly_usd"] == pytest.approx(
        sum(s["hourly_usd"] for s in report["stacks"]), abs=1e-3
    )
    # Without --region, each stack's region comes from manifest.json.
    assert main(["cost", "--cdk-out", str(synth.outdir)]) == 0
    text = capsys.readouterr().out
    assert f"({synth.platform.settings.env.region})" in text and "MISSING" in text


def test_cli_text_prints_the_source_design_comparison_in_us_east_1(lustre_125, capsys):
    assert main(["cost", "--cdk-out", str(lustre_125), "--region", "us-east-1"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert (
        "Multi-model endpoint triton-ensembles (initial size): 2 archives on 1 x "
        "ml.g4dn.4xlarge = $1.505/h; one endpoint per archive = $3.010/h; saving 50%, "
        "$13,183.80/year"
    ) in lines
    assert (
        "Multi-model endpoint triton-ensembles (maximum size): 2 archives on 2 x "
        "ml.g4dn.4xlarge = $3.010/h; one endpoint per archive = $6.020/h; saving 50%, "
        "$26,367.60/year"
    ) in lines
    assert (
        "  The comparison assumes one single-model endpoint per archive, each with as many "
        "instances of the same type as the multi-model endpoint (archives x instances x "
        "price); archives with little traffic could run on fewer or smaller instances, which "
        "shrinks the saving."
    ) in lines
    assert "Not counted in the totals" not in text
    assert (
        "  https://aws.amazon.com/blogs/machine-learning/deploy-thousands-of-model-ensembles-"
        "with-amazon-sagemaker-multi-model-endpoints-on-gpu-to-minimize-your-hosting-costs/ "
        "(taken 2026-12-01)"
    ) in text.splitlines()


def test_cli_without_assembly(tmp_path, capsys):
    assert main(["cost", "--cdk-out", str(tmp_path)]) == 1
    assert "make synth" in capsys.readouterr().err


# --- refresh from the Price List API ---------------------------------------------------------


def _product(sku: str, usd: str, usagetype: str = "USE1-BoxUsage:trn1.32xlarge") -> str:
    return json.dumps(
        {
            "product": {"sku": sku, "attributes": {"usagetype": usagetype}},
            "terms": {
                "OnDemand": {
                    f"{sku}.T": {
                        "priceDimensions": {
                            f"{sku}.T.D": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}
                        }
                    }
                }
            },
        }
    )


def test_refresh_asks_for_trn2_and_a_found_price_replaces_the_gap():
    """`mlp cost --refresh` queries the Price List API for every Trainium row, Trn2 included;
    a price it finds is used and the shipped gap's reason goes with it."""
    from ml_platform_pricing.refresh import queries

    ec2 = {q.key: q for q in queries() if q.service == EC2}
    for t in TRN2_UNPRICED:
        assert ec2[t].filters["instanceType"] == t
        assert ec2[t].filters["operatingSystem"] == "Linux"
    found = PriceTable()
    found.add(Price("us-east-2", EC2, "trn2.48xlarge", 1.0, "hour", "test", "2026-12-02"))
    merged = SHIPPED.overlay(found)
    assert merged.get("us-east-2", EC2, "trn2.48xlarge").usd == 1.0
    assert ("us-east-2", EC2) not in merged.gaps
    assert ("us-west-2", EC2) in merged.gaps  # other regions keep their reason


def test_refresh_rebuilds_from_get_products_and_keeps_missing_prices_missing():
    client = boto3.client(
        "pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    ec2 = Query(EC2, "trn1.32xlarge", "hour", "AmazonEC2", {"instanceType": "trn1.32xlarge"})
    sm = Query(
        SAGEMAKER_HOSTING,
        "ml.g4dn.4xlarge",
        "hour",
        "AmazonSageMaker",
        {"instanceName": "ml.g4dn.4xlarge"},
        lambda a: "Host:" in a.get("usagetype", ""),
    )

    def expect(stubber, code, region, field, value, price_list, token=None, next_token=None):
        params = {
            "ServiceCode": code,
            "FormatVersion": "aws_v1",
            "MaxResults": 100,
            "Filters": [
                {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
                {"Type": "TERM_MATCH", "Field": field, "Value": value},
            ],
        }
        if token:
            params["NextToken"] = token
        response = {"PriceList": price_list, "FormatVersion": "aws_v1"}
        if next_token:
            response["NextToken"] = next_token
        stubber.add_response("get_products", response, params)

    with Stubber(client) as stubber:
        expect(
            stubber,
            "AmazonEC2",
            "us-east-1",
            "instanceType",
            "trn1.32xlarge",
            [_product("A", "21.5000000000")],
        )
        # SageMaker: a training product first (rejected), the hosting one on page two.
        expect(
            stubber,
            "AmazonSageMaker",
            "us-east-1",
            "instanceName",
            "ml.g4dn.4xlarge",
            [_product("B", "1.8", "USE1-Train:ml.g4dn.4xlarge")],
            next_token="p2",
        )
        expect(
            stubber,
            "AmazonSageMaker",
            "us-east-1",
            "instanceName",
            "ml.g4dn.4xlarge",
            [_product("C", "1.5050000000", "USE1-Host:ml.g4dn.4xlarge")],
            token="p2",
        )
        # us-west-2: the API has no EC2 product, and a zero-priced SageMaker one.
        expect(stubber, "AmazonEC2", "us-west-2", "instanceType", "trn1.32xlarge", [])
        expect(
            stubber,
            "AmazonSageMaker",
            "us-west-2",
            "instanceName",
            "ml.g4dn.4xlarge",
            [_product("D", "0.0000000000", "USW2-Host:ml.g4dn.4xlarge")],
        )
        table, missing = rebuild(
            client, ["us-east-1", "us-west-2"], today="2026-12-01", only=[ec2, sm]
        )
        stubber.assert_no_pending_responses()
    assert table.get("us-east-1", EC2, "trn1.32xlarge").usd == 21.5
    hosting = table.get("us-east-1", SAGEMAKER_HOSTING, "ml.g4dn.4xlarge")
    assert hosting.usd == 1.505 and "sku C" in hosting.note and hosting.taken == "2026-12-01"
    assert table.get("us-west-2", EC2, "trn1.32xlarge") is None
    assert table.get("us-west-2", SAGEMAKER_HOSTING, "ml.g4dn.4xlarge") is None
    assert missing == ["us-west-2/ec2/trn1.32xlarge", "us-west-2/sagemaker-hosting/ml.g4dn.4xlarge"]
    # The rebuilt table round-trips through the shipped format.
    assert PriceTable.from_dict(json.loads(json.dumps(table.to_dict()))).prices == table.prices


class _FakePricing:
    """A pricing client answering get_products from a dict {(region, value): usd}."""

    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def get_products(self, **kwargs):
        self.calls.append(kwargs)
        fields = {f["Field"]: f["Value"] for f in kwargs["Filters"]}
        for (region, value), usd in self.answers.items():
            if fields["regionCode"] == region and value in fields.values():
                return {"PriceList": [_product("F", usd)]}
        return {"PriceList": []}


def test_cli_refresh_writes_the_table_it_then_prices_with(synth, tmp_path, monkeypatch, capsys):
    from ml_platform_cli.aws import Context

    fake = _FakePricing({("us-east-1", "trn1.32xlarge"): "21.5000000000"})
    monkeypatch.setattr(Context, "client", lambda self, service, region=None, **kw: fake)
    target = tmp_path / "prices.json"
    assert (
        main(
            [
                "cost",
                "--cdk-out",
                str(synth.outdir),
                "--refresh",
                "--refresh-regions",
                "us-east-1",
                "--prices",
                str(target),
                "--region",
                "us-east-1",
                "--json",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert "not found (reported as missing)" in captured.err
    written = PriceTable.load(target)
    assert list(written.prices) == [("us-east-1", EC2, "trn1.32xlarge")]
    assert {c["ServiceCode"] for c in fake.calls} >= {
        "AmazonEC2",
        "AmazonSageMaker",
        "AmazonEKS",
        "AmazonFSx",
        "AmazonVPC",
    }
    report = json.loads(captured.out)
    statuses = {
        r["description"].split(" x ")[0]: r["status"]
        for s in report["stacks"]
        for r in s["resources"]
        if r["type"] == "AWS::EKS::Nodegroup"
    }
    assert statuses == {
        "node group trn1.32xlarge": "ok",
        "node group m6i.large": "missing",
        "node group g5.2xlarge": "missing",
        "EBS volumes": "missing",
    }


# --- synth-time annotations ------------------------------------------------------------------


def test_cost_annotations_setting_defaults_to_false():
    assert Settings().cost_annotations is False
    assert Settings.from_context({"cost_annotations": True}).cost_annotations is True


def test_in_memory_estimate_matches_the_synthesized_template_and_is_cheap(synth, stacks):
    by_name = {s.name: s for s in stacks}
    # Every resource, for the smallest stack (each jsii round trip costs; one stack shows it).
    smallest = min(
        synth.platform.stacks, key=lambda s: len(by_name[s.stack_name].template["Resources"])
    )
    for stack in [smallest]:
        name, region = stack.stack_name, by_name[stack.stack_name].region
        full = estimate_template(
            template_in_memory(stack), stack=name, region=region, table=SHIPPED
        )
        synthesized = estimate_template(
            by_name[name].template, stack=name, region=region, table=SHIPPED
        )
        assert full.summary() == synthesized.summary()
        assert {i.logical_id: i.type for i in full.items} == {
            i.logical_id: i.type for i in synthesized.items
        }
    # What `cdk synth` runs with cost_annotations on: only the types a total depends on.
    started = time.perf_counter()
    summaries = {
        s.stack_name: estimate_template(
            template_in_memory(s, priced_only=True),
            stack=s.stack_name,
            region=by_name[s.stack_name].region,
            table=SHIPPED,
        ).summary()
        for s in synth.platform.stacks
    }
    elapsed = time.perf_counter() - started
    for name, summary in summaries.items():
        assert (
            summary
            == estimate_template(
                by_name[name].template, stack=name, region=by_name[name].region, table=SHIPPED
            ).summary()
        )
    # 0.2-0.5 s for the platform's stacks on this 2-core machine under load; room to spare.
    assert elapsed < 3.0, f"synth-time estimates took {elapsed:.2f} s"


def test_annotate_costs_puts_the_estimate_on_each_stack(tmp_path):
    import aws_cdk as cdk
    from aws_cdk import aws_ec2 as ec2

    from ml_platform.app import new_app
    from ml_platform_pricing.annotate import annotate_costs

    app = new_app(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Nat", env=cdk.Environment(account="123456789012", region="us-east-1"))
    eip = ec2.CfnEIP(stack, "Eip")
    ec2.CfnNatGateway(stack, "Nat", subnet_id="subnet-1", allocation_id=eip.attr_allocation_id)
    agnostic = cdk.Stack(app, "Agnostic")
    ec2.CfnNatGateway(agnostic, "Nat", subnet_id="subnet-1")
    annotate_costs([stack, agnostic])
    assembly = app.synth()

    def infos(name):
        artifact = assembly.get_stack_by_name(name)
        return [m.entry.data for m in artifact.messages if m.entry.type == "aws:cdk:info"]

    assert infos("Nat") == [
        "Estimated on-demand cost of Nat in us-east-1: $0.05/hour, $36.50/month (730 h)"
    ]
    assert infos("Agnostic") == ["No cost estimate for Agnostic: the stack has no region"]


@pytest.mark.parametrize("on", [True, False])
def test_app_py_annotates_the_platform_s_stacks_when_the_setting_is_on(tmp_path, monkeypatch, on):
    # The library's build_platform never imports the estimator: the project's app.py wires it.
    import runpy
    from types import SimpleNamespace

    import aws_cdk as cdk
    from aws_cdk import aws_ec2 as ec2

    import ml_platform.app

    real_new_app = ml_platform.app.new_app

    def new_app():
        context = cdk_json_context()  # the repository's settings and AZ names, plus the switch
        context["ml-platform"] = {**context["ml-platform"], "cost_annotations": on}
        return real_new_app(context=context, outdir=str(tmp_path / "out"))

    def build_platform(app, settings, **kwargs):  # one small stack instead of the platform
        env = cdk.Environment(account="123456789012", region="us-east-1")
        stack = cdk.Stack(app, "Nat", env=env)
        eip = ec2.CfnEIP(stack, "Eip")
        ec2.CfnNatGateway(stack, "Nat", subnet_id="subnet-1", allocation_id=eip.attr_allocation_id)
        return SimpleNamespace(stacks=[stack])

    monkeypatch.setattr(ml_platform.app, "new_app", new_app)
    monkeypatch.setattr(ml_platform.app, "build_platform", build_platform)
    monkeypatch.chdir(tmp_path)  # no cdk.json here: nothing for app.py to cross-check
    runpy.run_path(str(ROOT / "app.py"), run_name="__main__")
    artifact = cdk.cx_api.CloudAssembly(str(tmp_path / "out")).get_stack_by_name("Nat")
    infos = [m.entry.data for m in artifact.messages if m.entry.type == "aws:cdk:info"]
    expected = "Estimated on-demand cost of Nat in us-east-1: $0.05/hour, $36.50/month (730 h)"
    assert infos == ([expected] if on else [])


def test_cost_doc_shows_the_real_output_for_the_default_settings(synth, capsys):
    page = (ROOT / "docs" / "cost.md").read_text()
    after = page.split("Output of `make synth && mlp cost`", 1)[1]
    shown = after.split("```text\n", 1)[1].split("\n```", 1)[0]
    assert main(["cost", "--cdk-out", str(synth.outdir)]) == 0
    printed = capsys.readouterr().out

    def priced(text: str) -> list[str]:
        # Counts of free and usage-based resources move with every stack change; the prices,
        # totals and sources are what the section documents.
        return [
            line.rstrip()
            for line in text.strip().splitlines()
            if not line.lstrip().startswith(("free:", "usage-based"))
        ]

    assert priced(printed) == priced(shown), (
        "docs/cost.md is stale: paste the output of `make synth && mlp cost`"
    )


# --- what the text report prints, the default region, the user's refreshed table -------------


@pytest.fixture(autouse=True)
def _own_data_home(tmp_path, monkeypatch):
    """`mlp cost` reads a refreshed table from $XDG_DATA_HOME: never the tester's own."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data-home"))


def test_text_report_prints_each_priced_lines_caveats(stacks, capsys):
    template = {
        "Resources": {
            "Two": {
                "Type": "AWS::EKS::Nodegroup",
                "Properties": {
                    "ScalingConfig": {"DesiredSize": 1},
                    "InstanceTypes": ["g5.xlarge", "g5.2xlarge"],
                },
            },
            "Iface": {
                "Type": "AWS::EC2::VPCEndpoint",
                "Properties": {
                    "VpcEndpointType": "Interface",
                    "ServiceName": "com.amazonaws.us-east-1.ecr.api",
                    "SubnetIds": ["s-1"],
                },
            },
        }
    }
    from ml_platform_cli.cost import render_text
    from ml_platform_pricing.assembly import StackTemplate

    report = build_report(
        [StackTemplate("S", "us-east-1", template)],
        SHIPPED,
        region=None,
        archives={},
        training_hours=None,
    )
    lines = [line.strip() for line in render_text(report).splitlines()]
    assert ("priced at the dearest of 2 instance types; EBS volumes on their own line") in lines
    assert "data processing bills by use" in lines
    # The default app's report: the node groups' and keys' caveats reach the text too.
    text = render_text(
        build_report(stacks, SHIPPED, region="us-east-1", archives={}, training_hours=None)
    )
    assert (
        "requests bill by use; each yearly rotation adds $1/month for the key version it "
        "keeps" in text
    )
    assert "the first 10 standard alarm metrics of an account are free" in text


def test_default_region_report_says_exactly_why_the_endpoint_and_lustre_are_not_priced(stacks):
    report = build_report(stacks, SHIPPED, region=None, archives={}, training_hours=None)
    assert {s["region"] for s in report["stacks"]} == {"us-west-2"}
    missing = {
        r["type"]: r["reason"]
        for s in report["stacks"]
        for r in s["resources"]
        if r["status"] == "missing"
    }
    assert set(missing) == {"AWS::SageMaker::Endpoint", "AWS::FSx::FileSystem"}
    for reason in missing.values():
        assert (
            "no public, dated source stating this price for this region was found on 2026-12-01"
            in reason
            and "mlp cost --refresh" in reason
        )
    assert "ml.g4dn.4xlarge in us-west-2" in missing["AWS::SageMaker::Endpoint"]
    assert "250 MB/s/TiB in us-west-2" in missing["AWS::FSx::FileSystem"]
    # Every recorded gap is a real one: its region and service lack a price the settings allow.
    for (region, service), why in SHIPPED.gaps.items():
        assert why and any(
            (service, key) in _allowed_prices() and SHIPPED.get(region, service, key) is None
            for key in {k for _, k in _allowed_prices()}
        ), (region, service)


def test_sources_are_marked_third_party_unless_aws_owned(lustre_125):
    from ml_platform_cli.cost import render_text
    from ml_platform_pricing.table import aws_owned

    stacks = read_assembly(lustre_125)
    report = build_report(stacks, SHIPPED, region="us-east-1", archives={}, training_hours=None)
    marked = {s["source"]: s["third_party"] for s in report["sources"]}
    assert marked and all(flag == (not aws_owned(src)) for src, flag in marked.items())
    third = [src for src, flag in marked.items() if flag]
    assert third  # the Lustre 125 figure
    text = render_text(report)
    for src in third:
        assert f"{src} (taken 2026-12-01) [third-party: replace with `mlp cost --refresh`]" in text
    assert aws_owned(
        "https://api.pricing.us-east-1.amazonaws.com (AWS Price List API, GetProducts)"
    )


def test_refresh_writes_the_users_table_not_the_package_and_later_runs_read_it(
    synth, tmp_path, monkeypatch, capsys
):
    import hashlib

    from ml_platform_cli.aws import Context
    from ml_platform_pricing.table import shipped_table_path, user_table_path

    shipped = hashlib.sha256(shipped_table_path().read_bytes()).hexdigest()

    class Hosting(_FakePricing):
        def get_products(self, **kwargs):
            fields = {f["Field"]: f["Value"] for f in kwargs["Filters"]}
            if (fields["regionCode"], fields.get("instanceName")) == (
                "us-west-2",
                "ml.g4dn.4xlarge",
            ):
                return {"PriceList": [_product("F", "1.5050000000", "USW2-Host:ml.g4dn.4xlarge")]}
            return super().get_products(**kwargs)

    fake = Hosting({})
    monkeypatch.setattr(Context, "client", lambda self, service, region=None, **kw: fake)
    assert (
        main(
            [
                "cost",
                "--cdk-out",
                str(synth.outdir),
                "--refresh",
                "--refresh-regions",
                "us-west-2",
                "--json",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    user = user_table_path()
    assert user == tmp_path / "data-home" / "ml-platform" / "prices.json" and user.is_file()
    assert hashlib.sha256(shipped_table_path().read_bytes()).hexdigest() == shipped
    written = PriceTable.load(user)
    price = written.get("us-west-2", SAGEMAKER_HOSTING, "ml.g4dn.4xlarge")
    # Where the figure came from and when: the API, its filters and SKU, today.
    assert price.source.startswith("https://api.pricing.us-east-1.amazonaws.com")
    assert "AmazonSageMaker instanceName=ml.g4dn.4xlarge sku F" in price.note and price.taken
    report = json.loads(captured.out)
    (endpoint,) = [
        r
        for s in report["stacks"]
        for r in s["resources"]
        if r["type"] == "AWS::SageMaker::Endpoint"
    ]
    assert endpoint["status"] == "ok" and endpoint["hourly_usd"] == 1.505
    # The shipped prices the refresh did not find stay, with their own sources.
    trn = [
        r
        for s in report["stacks"]
        for r in s["resources"]
        if r["description"].startswith("node group trn1")
    ]
    assert trn[0]["status"] == "ok"
    # A later run without --refresh reads the user's table over the shipped one, and says so.
    assert main(["cost", "--cdk-out", str(synth.outdir)]) == 0
    captured = capsys.readouterr()
    assert f"with {user} (from `mlp cost --refresh`) over it" in captured.err
    assert (
        "Multi-model comparison not possible: triton-ensembles: archive count unknown"
        not in captured.out
    )
    assert "MISSING" in captured.out  # Lustre in us-west-2 is still not priced


def test_refresh_converts_units_and_takes_the_first_tier():
    from ml_platform_pricing.refresh import queries

    def product(sku, usd, usagetype, unit, more=()):
        dimensions = {
            f"{sku}.D{i}": {"unit": unit, "pricePerUnit": {"USD": value}}
            for i, value in enumerate((usd, *more))
        }
        return json.dumps(
            {
                "product": {"sku": sku, "attributes": {"usagetype": usagetype}},
                "terms": {"OnDemand": {f"{sku}.T": {"priceDimensions": dimensions}}},
            }
        )

    answers = {
        ("cloudwatch-dashboard", "month"): product(
            "D", "0.0041095890", "USE1-DashboardsUsageHour", "Hrs"
        ),
        ("ebs-gp3", "throughput"): product(
            "T", "40.96", "USE1-EBS:VolumeP-Throughput.gp3", "GiBps-mo"
        ),
        # Tiers: the first 10,000 metrics at $0.30, then $0.10, $0.05, $0.02.
        ("cloudwatch-metric", "custom"): product(
            "M", "0.02", "USE1-CW:MetricMonitorUsage", "Metrics", ("0.30", "0.10", "0.05")
        ),
    }
    wanted = [q for q in queries() if (q.service, q.key) in answers]
    assert len(wanted) == 3

    class Client:
        """Every product of the service that matches the filters, as the API answers."""

        def get_products(self, **kwargs):
            return {
                "PriceList": [
                    answers[(q.service, q.key)]
                    for q in wanted
                    if q.service_code == kwargs["ServiceCode"]
                    and all(
                        {"Type": "TERM_MATCH", "Field": k, "Value": v} in kwargs["Filters"]
                        for k, v in q.filters.items()
                    )
                ]
            }

    table, missing = rebuild(Client(), ["us-east-1"], today="2026-12-01", only=wanted)
    assert missing == []
    assert table.get("us-east-1", "cloudwatch-dashboard", "month").usd == pytest.approx(3.0, 1e-6)
    assert table.get("us-east-1", "ebs-gp3", "throughput").usd == pytest.approx(0.04)
    assert table.get("us-east-1", "cloudwatch-metric", "custom").usd == pytest.approx(0.30)


@pytest.mark.parametrize(
    "value, message",
    [
        ("-1", "'-1': expected a number of hours above 0"),
        ("0", "'0': expected a number of hours above 0"),
        ("nan", "'nan': expected a number of hours above 0"),
        ("ten", "'ten' is not a number of hours"),
    ],
)
def test_training_hours_must_be_a_positive_number(synth, capsys, value, message):
    with pytest.raises(SystemExit) as exit_:
        main(["cost", "--cdk-out", str(synth.outdir), "--training-hours", value])
    assert exit_.value.code == 2
    assert f"argument --training-hours: {message}" in capsys.readouterr().err


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no such file"),
        ("dir", "is a directory, expected a prices.json file"),
        (
            "{not json",
            "not JSON (Expecting property name enclosed in double quotes at line 1, column 2)",
        ),
        (
            "[1, 2]",
            "not a price table: expected an object with a list 'prices' (the shipped format)",
        ),
        (
            '{"prices": [{"region": "us-east-1", "cost": 1}]}',
            "not a price table: prices[0]: got an unexpected keyword argument 'cost' (a row has the "
            "fields ['key', 'note', 'region', 'service', 'source', 'taken', 'unit', 'usd'])",
        ),
        (
            '{"prices": [{"region": "r", "service": "s", "key": "k", "usd": "1", "unit": "hour", '
            '"source": "https://x", "taken": "2026-12-01"}]}',
            "not a price table: prices[0].usd = '1': expected a number",
        ),
    ],
)
def test_a_bad_prices_file_is_one_line_naming_it(synth, tmp_path, capsys, content, message):
    path = tmp_path / "prices.json"
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    assert main(["cost", "--cdk-out", str(synth.outdir), "--prices", str(path)]) == 1
    assert capsys.readouterr().err.splitlines() == [f"mlp: error: --prices {path}: {message}"]
