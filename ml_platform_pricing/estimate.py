"""On-demand cost of a CloudFormation template, resource by resource.

The estimator reads a template (a synthesized file or the in-memory template at synth time)
and knows resource *types*, never stack names: node groups, endpoints and file systems are
found wherever they are. Each resource is one of:

- ``priced``: it bills by the hour or by provisioned size; its line carries the hourly and
  monthly figure, or a status ``missing`` (no price in the table for that region) or
  ``unknown`` (a value the template does not fix, such as a Ref to a parameter or a
  cross-stack import). Neither is ever counted as zero.
- ``usage-based``: it bills by use (requests, GB stored or ingested): listed, not guessed.
- ``free``: it has no charge of its own.

A type in none of these is ``unclassified``: the estimate lists it with the status
``unpriced`` and leaves the totals marked incomplete, so a construct that starts deploying a new
type shows up in ``mlp cost`` (and in a synth-time annotation) until the type gets a rule here;
nothing in the constructs or their tests has to name it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ml_platform.regions import DNS_SUFFIXES, partition_of
from ml_platform_pricing.table import (
    CLOUDWATCH_ALARM,
    CLOUDWATCH_DASHBOARD,
    CLOUDWATCH_METRIC,
    EBS_GP3,
    EC2,
    EKS_CLUSTER,
    FSX_LUSTRE_PERSISTENT2,
    GP3_BASELINE_IOPS,
    GP3_BASELINE_THROUGHPUT,
    HOURS_PER_MONTH,
    HOURS_PER_YEAR,
    KMS_KEY,
    NAT_GATEWAY,
    PUBLIC_IPV4,
    SAGEMAKER_HOSTING,
    SECRETS_MANAGER,
    VPC_INTERFACE_ENDPOINT,
    Price,
    PriceTable,
)

PRICED = "priced"
USAGE_BASED = "usage-based"
FREE = "free"
UNCLASSIFIED = "unclassified"

OK = "ok"
MISSING = "missing"  # no price for this region/key in the table
UNKNOWN = "unknown"  # the template does not fix a value the cost depends on
UNPRICED = "unpriced"  # an unclassified type: the estimator has no rule for it

# Resources without a charge of their own (their cost, if any, shows on another line).
FREE_TYPES: dict[str, str] = {
    "AWS::CDK::Metadata": "CDK metadata",
    "AWS::IAM::Role": "IAM",
    "AWS::IAM::Policy": "IAM",
    "AWS::IAM::ManagedPolicy": "IAM",
    "AWS::IAM::InstanceProfile": "IAM",
    "AWS::IAM::OIDCProvider": "IAM",
    "AWS::EC2::VPC": "VPC",
    "AWS::EC2::Subnet": "VPC",
    "AWS::EC2::RouteTable": "VPC",
    "AWS::EC2::Route": "VPC",
    "AWS::EC2::SubnetRouteTableAssociation": "VPC",
    "AWS::EC2::InternetGateway": "VPC (data transfer out bills by use)",
    "AWS::EC2::VPCGatewayAttachment": "VPC",
    "AWS::EC2::SecurityGroup": "VPC",
    "AWS::EC2::SecurityGroupIngress": "VPC",
    "AWS::EC2::SecurityGroupEgress": "VPC",
    "AWS::EC2::NetworkAcl": "VPC",
    "AWS::EC2::NetworkAclEntry": "VPC",
    "AWS::EC2::SubnetNetworkAclAssociation": "VPC",
    "AWS::EC2::LaunchTemplate": "billed through the node group that uses it",
    "AWS::EC2::PlacementGroup": "no charge",
    "AWS::EKS::AccessEntry": "no charge",
    "AWS::EKS::PodIdentityAssociation": "no charge",
    "AWS::EKS::Addon": "no charge for the add-on itself",
    "AWS::SageMaker::Model": "billed through the endpoint",
    "AWS::SageMaker::EndpointConfig": "billed through the endpoint that uses it",
    "AWS::ApplicationAutoScaling::ScalableTarget": "no charge (its maximum is the ceiling)",
    "AWS::ApplicationAutoScaling::ScalingPolicy": "no charge",
    "AWS::S3::BucketPolicy": "no charge",
    "AWS::SNS::TopicPolicy": "no charge",
    "AWS::SNS::Subscription": "deliveries bill on the topic",
    "AWS::KMS::Alias": "no charge",
    "AWS::Lambda::Permission": "no charge",
    "AWS::CloudFormation::CustomResource": "billed through its provider function",
    "AWS::CloudFormation::WaitConditionHandle": "no charge",
}
# Resources that bill by use: listed, not guessed.
USAGE_TYPES: dict[str, str] = {
    "AWS::S3::Bucket": "GB-month stored, requests, transfer",
    "AWS::ECR::Repository": "GB-month stored, transfer",
    "AWS::Logs::LogGroup": "GB ingested and stored",
    "AWS::EC2::FlowLog": "GB of flow logs delivered",
    "AWS::Lambda::Function": "requests and GB-seconds",
    "AWS::Lambda::LayerVersion": "storage of the layer",
    "AWS::SSM::Parameter": "standard parameters are free; advanced ones bill per month",
    "AWS::SNS::Topic": "requests and deliveries",
    "AWS::SQS::Queue": "requests",
    "AWS::Events::Rule": "events",
    "AWS::DynamoDB::Table": "requests and GB-month stored",
}
# Custom resources (``Custom::*``) run their provider function, which bills by use.
_CUSTOM = re.compile(r"^Custom::")

# Instance families that make a node group a training node group (Trainium, GPU trainers):
# trn1, trn1n, trn2, trn2u (the UltraServer variant), p4d, p5e, ...
_TRAINING_FAMILIES = re.compile(r"^(trn\d+[nu]?|p\d+[a-z]*)\.")
# A Capacity Block's price is charged up front, at purchase: EC2 API reference,
# CapacityBlockOffering.upfrontFee ("The total price to be paid up front",
# https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityBlockOffering.html) and the
# EC2 User Guide ("The price of a Capacity Block offering is charged up front",
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-extend.html).
CAPACITY_BLOCK_NOTE = (
    "Capacity Block: its price is charged up front at purchase (the offering's upfront fee), "
    "not this on-demand rate"
)


class Unresolvable(Exception):
    """A template value the estimator cannot turn into a literal (reason in the message)."""


@dataclass
class LineItem:
    """The cost of one resource."""

    stack: str
    logical_id: str
    type: str
    category: str
    description: str = ""
    status: str = OK
    hourly: float | None = None
    monthly: float | None = None
    ceiling_hourly: float | None = None  # at the autoscaling / node-group maximum
    ceiling_monthly: float | None = None
    prices: list[Price] = field(default_factory=list)
    reason: str = ""  # why missing/unknown, or what a usage-based resource bills by
    training: bool = False
    endpoint: dict[str, Any] | None = None  # for SageMaker endpoints

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "stack": self.stack,
            "logical_id": self.logical_id,
            "type": self.type,
            "category": self.category,
            "description": self.description,
            "status": self.status,
            "hourly_usd": _round(self.hourly),
            "monthly_usd": _round(self.monthly),
        }
        if self.ceiling_hourly is not None:
            out["ceiling_hourly_usd"] = _round(self.ceiling_hourly)
            out["ceiling_monthly_usd"] = _round(self.ceiling_monthly)
        if self.reason:
            out["reason"] = self.reason
        if self.prices:
            out["prices"] = [p.to_dict() for p in self.prices]
        if self.training:
            out["training"] = True
        if self.endpoint is not None:
            out["endpoint"] = self.endpoint
        return out


@dataclass
class StackEstimate:
    """Every resource of one stack, and its totals."""

    stack: str
    region: str
    items: list[LineItem] = field(default_factory=list)
    # Charges the template implies but cannot price (logs by volume, extended support later).
    not_estimated: list[str] = field(default_factory=list)

    @property
    def priced(self) -> list[LineItem]:
        return [i for i in self.items if i.category == PRICED]

    @property
    def incomplete(self) -> list[LineItem]:
        """What the totals leave out: priced resources whose cost is missing or unknown, and
        every resource of a type the estimator does not know (``unpriced``)."""
        return [i for i in self.items if i.status != OK and i.category in (PRICED, UNCLASSIFIED)]

    @property
    def hourly(self) -> float:
        return sum(i.hourly or 0.0 for i in self.priced if i.status == OK)

    @property
    def monthly(self) -> float:
        return sum(i.monthly or 0.0 for i in self.priced if i.status == OK)

    @property
    def ceiling_monthly(self) -> float:
        return sum(
            (i.ceiling_monthly if i.ceiling_monthly is not None else i.monthly) or 0.0
            for i in self.priced
            if i.status == OK
        )

    def unclassified_types(self) -> set[str]:
        return {i.type for i in self.items if i.category == UNCLASSIFIED}

    def summary(self) -> str:
        """One line for a review annotation."""
        text = (
            f"Estimated on-demand cost of {self.stack} in {self.region}: "
            f"${self.hourly:,.2f}/hour, ${self.monthly:,.2f}/month ({HOURS_PER_MONTH} h)"
        )
        if self.ceiling_monthly > self.monthly + 0.005:
            text += f", up to ${self.ceiling_monthly:,.2f}/month at the autoscaling maxima"
        if self.incomplete:
            names = ", ".join(f"{i.logical_id} ({i.status})" for i in self.incomplete)
            text += f"; not counted: {names}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "region": self.region,
            "hourly_usd": _round(self.hourly),
            "monthly_usd": _round(self.monthly),
            "ceiling_monthly_usd": _round(self.ceiling_monthly),
            "complete": not self.incomplete,
            "not_counted": [i.logical_id for i in self.incomplete],
            "not_estimated": list(self.not_estimated),
            "resources": [i.to_dict() for i in self.items],
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


# --- resolving template values ---------------------------------------------------------


def _is_intrinsic(key: str) -> bool:
    """``Ref``/``Fn::*``/``Condition``: the keys that make a one-key object a function."""
    return key in ("Ref", "Condition") or key.startswith("Fn::")


class _Template:
    """A template with the lookups the handlers need."""

    def __init__(
        self, template: Mapping[str, Any], region: str, account: str | None = None
    ) -> None:
        self.resources: Mapping[str, Any] = template.get("Resources", {}) or {}
        self.parameters: Mapping[str, Any] = template.get("Parameters", {}) or {}
        self.region = region
        partition = partition_of(region)
        # The pseudo parameters a template deployed in ``region`` (and ``account``) sees
        # (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/pseudo-parameter-reference.html).
        self.pseudo: dict[str, str] = {
            "AWS::Region": region,
            "AWS::Partition": partition,
            "AWS::URLSuffix": DNS_SUFFIXES[partition],
        }
        if account:
            self.pseudo["AWS::AccountId"] = account
        self.not_estimated: list[str] = []

    def props(self, logical_id: str) -> Mapping[str, Any]:
        return (self.resources.get(logical_id) or {}).get("Properties", {}) or {}

    def type_of(self, logical_id: str) -> str | None:
        return (self.resources.get(logical_id) or {}).get("Type")

    def of_type(self, type_: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
        for logical_id, resource in self.resources.items():
            if resource.get("Type") == type_:
                yield logical_id, resource.get("Properties", {}) or {}

    def resolve(self, value: Any) -> Any:
        """A literal for ``value``; a Ref/GetAtt to a resource becomes ``{Id.Attr}``."""
        if isinstance(value, str | int | float | bool) or value is None:
            return value
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if isinstance(value, dict) and len(value) == 1 and _is_intrinsic(next(iter(value))):
            ((fn, arg),) = value.items()
            if fn == "Ref":
                if arg in self.pseudo:
                    return self.pseudo[arg]
                if arg in self.parameters:
                    raise Unresolvable(f"Ref to parameter {arg}")
                if arg in self.resources:
                    return f"{{{arg}}}"
                raise Unresolvable(f"Ref to {arg}")
            if fn == "Fn::GetAtt":
                parts = arg if isinstance(arg, list) else str(arg).split(".", 1)
                return f"{{{parts[0]}.{parts[1]}}}"
            if fn == "Fn::Join":
                sep, items = arg
                return str(sep).join(str(self.resolve(i)) for i in items)
            if fn == "Fn::Sub":
                return self._sub(arg)
            if fn == "Fn::ImportValue":
                raise Unresolvable("a cross-stack import (Fn::ImportValue)")
            raise Unresolvable(f"the intrinsic {fn}")
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        raise Unresolvable(f"value {value!r}")

    def _sub(self, arg: Any) -> str:
        """``Fn::Sub`` in both forms: a string, or [string, {name: value}]."""
        text, names = (arg, {}) if isinstance(arg, str) else (arg[0], dict(arg[1]))
        if not isinstance(text, str):
            raise Unresolvable(f"Fn::Sub of {text!r}")

        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):  # ${!Literal} stands for the text ${Literal}
                return "${" + name[1:] + "}"
            if name in names:
                return str(self.resolve(names[name]))
            if "." in name:
                return str(self.resolve({"Fn::GetAtt": name.split(".", 1)}))
            return str(self.resolve({"Ref": name}))

        return re.sub(r"\$\{([^}]+)\}", one, text)

    def referenced(self, value: Any) -> str | None:
        """The logical id a Ref/GetAtt value points at, if it points at a resource here."""
        try:
            text = self.resolve(value)
        except Unresolvable:
            return None
        match = re.fullmatch(r"\{([^.}]+)(\.[^}]*)?\}", str(text))
        return match.group(1) if match and match.group(1) in self.resources else None


def _number(t: _Template, value: Any, what: str) -> float:
    if value is None:
        raise Unresolvable(f"{what} is not set")
    resolved = t.resolve(value)
    try:
        return float(resolved)
    except (TypeError, ValueError):
        raise Unresolvable(f"{what} = {resolved!r} is not a number") from None


def _string(t: _Template, value: Any, what: str) -> str:
    if value is None:
        raise Unresolvable(f"{what} is not set")
    resolved = t.resolve(value)
    if not isinstance(resolved, str) or "{" in resolved:
        raise Unresolvable(f"{what} = {resolved!r} is not fixed in the template")
    return resolved


# --- handlers of priced types -------------------------------------------------------------


def _hourly_item(
    item: LineItem,
    price: Price | None,
    quantity: float,
    what: str,
    ceiling_quantity: float | None = None,
) -> LineItem:
    if price is None:
        item.status, item.reason = MISSING, f"no price for {what} in the table"
        return item
    item.prices.append(price)
    item.hourly = quantity * price.usd
    item.monthly = item.hourly * HOURS_PER_MONTH
    if ceiling_quantity is not None and ceiling_quantity != quantity:
        item.ceiling_hourly = ceiling_quantity * price.usd
        item.ceiling_monthly = item.ceiling_hourly * HOURS_PER_MONTH
    return item


def _monthly_item(item: LineItem, price: Price | None, quantity: float, what: str) -> LineItem:
    """A fixed monthly fee of ``quantity`` units (keys, alarm metrics, dashboards)."""
    if price is None:
        item.status, item.reason = MISSING, what
        return item
    item.prices.append(price)
    item.monthly = quantity * price.usd
    item.hourly = item.monthly / HOURS_PER_MONTH
    return item


# EKS bills the control plane at the extended-support rate once its Kubernetes version leaves
# standard support, unless the upgrade policy says STANDARD; unset means EXTENDED
# (https://docs.aws.amazon.com/eks/latest/userguide/extended-support-control.html).
EKS_DEFAULT_SUPPORT_TYPE = "EXTENDED"
_EKS_VERSIONS_PAGE = "https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html"


def _eks_cluster(
    t: _Template, table: PriceTable, item: LineItem, props: Mapping[str, Any]
) -> LineItem:
    policy = props.get("UpgradePolicy") or {}
    stated = policy.get("SupportType")
    support = str(t.resolve(stated)) if stated is not None else EKS_DEFAULT_SUPPORT_TYPE
    version = str(t.resolve(props.get("Version", "")) or "?")
    item.description = f"EKS control plane (Kubernetes {version}, standard support)"
    standard = table.get(t.region, EKS_CLUSTER, "standard")
    if support == "STANDARD":
        item.reason = (
            f"support type STANDARD: EKS upgrades the control plane when {version} "
            f"leaves standard support ({_EKS_VERSIONS_PAGE}); no extended-support fee"
        )
    else:
        extended = table.get(t.region, EKS_CLUSTER, "extended")
        rate = (
            f"${extended.usd:.2f}/h"
            if extended is not None
            else "the extended-support rate (no price in the table)"
        )
        was = f" instead of ${standard.usd:.2f}/h" if standard is not None else ""
        how = "" if stated is not None else " (the default: the template sets no UpgradePolicy)"
        t.not_estimated.append(
            f"{item.logical_id}: {rate}{was} once Kubernetes {version} leaves standard support "
            f"({_EKS_VERSIONS_PAGE}): support type {support}{how}"
        )
    enabled = ((props.get("Logging") or {}).get("ClusterLogging") or {}).get("EnabledTypes") or []
    if enabled:
        kinds = ", ".join(str(t.resolve((e or {}).get("Type"))) for e in enabled)
        t.not_estimated.append(
            f"{item.logical_id}: CloudWatch Logs ingestion and storage of the "
            f"control-plane logs ({kinds}): bills by volume"
        )
    return _hourly_item(item, standard, 1, f"{EKS_CLUSTER} in {t.region}")


def _launch_template(
    t: _Template, props: Mapping[str, Any]
) -> tuple[str, Mapping[str, Any]] | None:
    """The launch template a node group names (its logical id and data), if it names one."""
    spec = props.get("LaunchTemplate")
    if not spec:
        return None
    template_id = t.referenced(spec.get("Id")) if spec.get("Id") is not None else None
    if template_id is None and spec.get("Name") is not None:
        name = t.resolve(spec["Name"])
        template_id = next(
            (
                lid
                for lid, p in t.of_type("AWS::EC2::LaunchTemplate")
                if t.resolve(p.get("LaunchTemplateName")) == name
            ),
            None,
        )
    if template_id is None or t.type_of(template_id) != "AWS::EC2::LaunchTemplate":
        raise Unresolvable("its launch template is not in this template")
    return template_id, t.props(template_id).get("LaunchTemplateData", {}) or {}


def _nodegroup_instance_types(t: _Template, props: Mapping[str, Any]) -> list[str]:
    if props.get("InstanceTypes"):
        types = t.resolve(props["InstanceTypes"])
        if all(isinstance(x, str) and "{" not in x for x in types):
            return list(types)
        raise Unresolvable(f"InstanceTypes = {types!r} is not fixed in the template")
    template = _launch_template(t, props)
    if template is None:
        raise Unresolvable("neither InstanceTypes nor a launch template is set")
    template_id, data = template
    return [_string(t, data.get("InstanceType"), f"{template_id}.InstanceType")]


def _gp3_monthly(
    t: _Template, table: PriceTable, ebs: Mapping[str, Any]
) -> tuple[float, str, list[Price]]:
    """Monthly price of one gp3 volume, its description and the prices used."""
    size = _number(t, ebs.get("VolumeSize"), "VolumeSize")
    iops = _number(t, ebs.get("Iops"), "Iops") if ebs.get("Iops") is not None else GP3_BASELINE_IOPS
    throughput = (
        _number(t, ebs.get("Throughput"), "Throughput")
        if ebs.get("Throughput") is not None
        else GP3_BASELINE_THROUGHPUT
    )
    wanted = [("storage", size)]
    if iops > GP3_BASELINE_IOPS:
        wanted.append(("iops", iops - GP3_BASELINE_IOPS))
    if throughput > GP3_BASELINE_THROUGHPUT:
        wanted.append(("throughput", throughput - GP3_BASELINE_THROUGHPUT))
    prices = []
    for key, _ in wanted:
        price = table.get(t.region, EBS_GP3, key)
        if price is None:
            raise LookupError(table.missing_reason(t.region, EBS_GP3, key))
        prices.append(price)
    monthly = sum(q * p.usd for (_, q), p in zip(wanted, prices, strict=True))
    text = f"{size:g} GiB gp3"
    if iops > GP3_BASELINE_IOPS or throughput > GP3_BASELINE_THROUGHPUT:
        text += f" at {iops:g} IOPS, {throughput:g} MiB/s"
    return monthly, text, prices


def _nodegroup_volumes(
    t: _Template,
    table: PriceTable,
    nodegroup: LineItem,
    props: Mapping[str, Any],
    desired: float,
    maximum: float,
) -> LineItem:
    """The node group's EBS volumes per node, at the desired and the maximum size."""
    item = LineItem(
        stack=nodegroup.stack,
        logical_id=nodegroup.logical_id,
        type=nodegroup.type,
        category=PRICED,
        training=nodegroup.training,
    )
    try:
        template = _launch_template(t, props)
        if template is None:
            raise Unresolvable(
                "the node group uses EKS's own launch template, whose volume type "
                "the template does not fix"
            )
        template_id, data = template
        mappings = [m for m in data.get("BlockDeviceMappings") or [] if (m or {}).get("Ebs")]
        if not mappings:
            raise Unresolvable(
                f"{template_id} maps no EBS volume (the AMI's root volume "
                "applies, whose size the template does not fix)"
            )
        per_node, parts = 0.0, []
        for mapping in mappings:
            ebs = mapping["Ebs"]
            kind = str(t.resolve(ebs.get("VolumeType", "unset")))
            if kind != "gp3":
                item.status = MISSING
                item.reason = (
                    f"{mapping.get('DeviceName', 'a volume')}: the table prices gp3 "
                    f"volumes only, not {kind}"
                )
                item.description = "EBS volumes"
                return item
            monthly, text, prices = _gp3_monthly(t, table, ebs)
            per_node += monthly
            parts.append(text)
            item.prices += [p for p in prices if p not in item.prices]
    except LookupError as why:
        item.status, item.reason, item.description = MISSING, str(why), "EBS volumes"
        return item
    except Unresolvable as why:
        item.status, item.reason, item.description = UNKNOWN, str(why), "EBS volumes"
        return item
    item.description = f"EBS {' + '.join(parts)} per node x {desired:g} (max {maximum:g})"
    item.monthly = per_node * desired
    item.hourly = item.monthly / HOURS_PER_MONTH
    if maximum != desired:
        item.ceiling_monthly = per_node * maximum
        item.ceiling_hourly = item.ceiling_monthly / HOURS_PER_MONTH
    item.reason = "snapshots bill by use"
    return item


def _nodegroup(
    t: _Template, table: PriceTable, item: LineItem, props: Mapping[str, Any]
) -> list[LineItem]:
    scaling = props.get("ScalingConfig") or {}
    types = _nodegroup_instance_types(t, props)
    desired = _number(t, scaling.get("DesiredSize"), "ScalingConfig.DesiredSize")
    maximum = (
        _number(t, scaling.get("MaxSize"), "ScalingConfig.MaxSize")
        if scaling.get("MaxSize") is not None
        else desired
    )
    item.training = any(_TRAINING_FAMILIES.match(x) for x in types)
    prices = [table.get(t.region, EC2, x) for x in types]
    item.description = f"node group {'/'.join(types)} x {desired:g} (max {maximum:g})"
    volumes = _nodegroup_volumes(t, table, item, props, desired, maximum)
    if any(p is None for p in prices):
        absent = [x for x, p in zip(types, prices, strict=True) if p is None]
        item.status = MISSING
        item.reason = table.missing_reason(t.region, EC2, ", ".join(absent))
        return [item, volumes]
    # With several instance types the bill depends on which launch: count the dearest.
    price = max((p for p in prices if p is not None), key=lambda p: p.usd)
    notes = []
    if len(types) > 1:
        notes.append(f"priced at the dearest of {len(types)} instance types")
    capacity_type = str(t.resolve(props.get("CapacityType", "ON_DEMAND")))
    if capacity_type == "SPOT":
        notes.append("on-demand price shown; Spot bills less")
    elif capacity_type == "CAPACITY_BLOCK":
        notes.append(CAPACITY_BLOCK_NOTE)
    notes.append("EBS volumes on their own line")
    item.reason = "; ".join(notes)
    return [_hourly_item(item, price, desired, "", maximum), volumes]


def _endpoint_config(t: _Template, props: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    ref = props.get("EndpointConfigName")
    config_id = t.referenced(ref) if ref is not None else None
    if config_id is None and ref is not None:
        try:
            name = t.resolve(ref)
        except Unresolvable:
            name = None
        config_id = next(
            (
                lid
                for lid, p in t.of_type("AWS::SageMaker::EndpointConfig")
                if name is not None and t.resolve(p.get("EndpointConfigName")) == name
            ),
            None,
        )
    if config_id is None or t.type_of(config_id) != "AWS::SageMaker::EndpointConfig":
        raise Unresolvable("its endpoint configuration is not in this template")
    return config_id, t.props(config_id)


def _scaling_maximum(
    t: _Template, endpoint_id: str, endpoint_name: str | None, variant: str
) -> float | None:
    wanted = {f"endpoint/{{{endpoint_id}.EndpointName}}/variant/{variant}"}
    if endpoint_name:
        wanted.add(f"endpoint/{endpoint_name}/variant/{variant}")
    for _, props in t.of_type("AWS::ApplicationAutoScaling::ScalableTarget"):
        try:
            if (
                t.resolve(props.get("ServiceNamespace")) == "sagemaker"
                and t.resolve(props.get("ResourceId")) in wanted
            ):
                return _number(t, props.get("MaxCapacity"), "MaxCapacity")
        except Unresolvable:
            continue
    return None


def _is_multi_model(t: _Template, model_ref: Any) -> bool:
    model_id = t.referenced(model_ref) if model_ref is not None else None
    if model_id is None:
        return False
    props = t.props(model_id)
    containers = [props.get("PrimaryContainer") or {}] + list(props.get("Containers") or [])
    return any((c or {}).get("Mode") == "MultiModel" for c in containers)


def _endpoint(
    t: _Template, table: PriceTable, item: LineItem, props: Mapping[str, Any]
) -> LineItem:
    _, config = _endpoint_config(t, props)
    try:
        name = _string(t, props.get("EndpointName"), "EndpointName")
    except Unresolvable:
        name = None
    variants = config.get("ProductionVariants") or []
    hourly = ceiling = 0.0
    found: list[dict[str, Any]] = []
    missing: list[str] = []
    for variant in variants:
        variant_name = str(t.resolve(variant.get("VariantName", "AllTraffic")))
        if variant.get("ServerlessConfig") is not None:
            found.append({"variant": variant_name, "serverless": True})
            continue
        instance_type = _string(t, variant.get("InstanceType"), f"{variant_name}.InstanceType")
        count = _number(
            t, variant.get("InitialInstanceCount"), f"{variant_name}.InitialInstanceCount"
        )
        maximum = _scaling_maximum(t, item.logical_id, name, variant_name)
        found.append(
            {
                "variant": variant_name,
                "instance_type": instance_type,
                "initial_instances": count,
                "max_instances": maximum,
                "multi_model": _is_multi_model(t, variant.get("ModelName")),
            }
        )
        price = table.get(t.region, SAGEMAKER_HOSTING, instance_type)
        if price is None:
            missing.append(instance_type)
            continue
        if price not in item.prices:
            item.prices.append(price)
        hourly += count * price.usd
        ceiling += (maximum if maximum is not None else count) * price.usd
    item.endpoint = {"name": name, "variants": found}
    shapes = ", ".join(
        f"{v['instance_type']} x {v['initial_instances']:g}"
        + (f" (max {v['max_instances']:g})" if v.get("max_instances") else "")
        for v in found
        if not v.get("serverless")
    )
    kind = "multi-model endpoint" if any(v.get("multi_model") for v in found) else "endpoint"
    item.description = f"SageMaker {kind} {name or item.logical_id}: {shapes}"
    if any(v.get("serverless") for v in found):
        item.reason = "serverless variants bill by use"
    if missing:
        item.status = MISSING
        item.reason = table.missing_reason(t.region, SAGEMAKER_HOSTING, ", ".join(missing))
        return item
    item.hourly, item.monthly = hourly, hourly * HOURS_PER_MONTH
    if ceiling != hourly:
        item.ceiling_hourly, item.ceiling_monthly = ceiling, ceiling * HOURS_PER_MONTH
    return item


def _file_system(
    t: _Template, table: PriceTable, item: LineItem, props: Mapping[str, Any]
) -> LineItem:
    fs_type = _string(t, props.get("FileSystemType"), "FileSystemType")
    lustre = props.get("LustreConfiguration") or {}
    deployment = str(t.resolve(lustre.get("DeploymentType", "SCRATCH_1")))
    capacity = _number(t, props.get("StorageCapacity"), "StorageCapacity")
    item.description = f"FSx {fs_type} {deployment} {capacity:g} GiB"
    if fs_type != "LUSTRE" or deployment != "PERSISTENT_2":
        item.status = MISSING
        item.reason = f"the table prices Lustre PERSISTENT_2 only, not {fs_type} {deployment}"
        return item
    tier = _number(t, lustre.get("PerUnitStorageThroughput"), "PerUnitStorageThroughput")
    item.description += f" at {tier:g} MB/s/TiB"
    price = table.get(t.region, FSX_LUSTRE_PERSISTENT2, f"{tier:g}")
    if price is None:
        item.status = MISSING
        item.reason = table.missing_reason(t.region, FSX_LUSTRE_PERSISTENT2, f"{tier:g} MB/s/TiB")
        return item
    item.prices.append(price)
    item.monthly = capacity * price.usd
    item.hourly = item.monthly / HOURS_PER_MONTH
    item.reason = "backups and data transfer bill by use"
    return item


def _nat_gateway(
    t: _Template, table: PriceTable, item: LineItem, props: Mapping[str, Any]
) -> LineItem:
    item.description = "NAT gateway (data processing bills by use)"
    return _hourly_item(
        item, table.get(t.region, NAT_GATEWAY, "hour"), 1, f"{NAT_GATEWAY} in {t.region}"
    )


def _eip(t: _Template, table: PriceTable, item: LineItem, props: Mapping[str, Any]) -> LineItem:
    item.description = "public IPv4 address"
    return _hourly_item(
        item, table.get(t.region, PUBLIC_IPV4, "hour"), 1, f"{PUBLIC_IPV4} in {t.region}"
    )


def _vpc_endpoint(
    t: _Template, table: PriceTable, item: LineItem, props: Mapping[str, Any]
) -> LineItem:
    kind = str(t.resolve(props.get("VpcEndpointType", "Gateway")))
    # The type decides the charge; the service name only labels the line.
    try:
        service = str(t.resolve(props["ServiceName"])) if props.get("ServiceName") else ""
    except Unresolvable:
        service = ""
    if kind == "Gateway":
        item.category, item.description = FREE, f"gateway endpoint {service}".strip()
        item.reason = "no charge"
        return item
    if kind != "Interface":
        item.status, item.reason = MISSING, f"no price for {kind} endpoints in the table"
        return item
    subnets = t.resolve(props.get("SubnetIds") or [])
    item.description = f"interface endpoint {service} in {len(subnets)} AZ(s)".replace("  ", " ")
    if not subnets:
        raise Unresolvable("SubnetIds is not set")
    item.reason = "data processing bills by use"
    return _hourly_item(
        item,
        table.get(t.region, VPC_INTERFACE_ENDPOINT, "az-hour"),
        len(subnets),
        f"{VPC_INTERFACE_ENDPOINT} in {t.region}",
    )


# --- fixed monthly fees (the per-request part bills by use) ---------------------------------


def _kms_key(t: _Template, table: PriceTable, item: LineItem, props: Mapping[str, Any]) -> LineItem:
    item.description = "KMS customer managed key"
    notes = ["requests bill by use"]
    if t.resolve(props.get("EnableKeyRotation")) in (True, "true"):
        notes.append("each yearly rotation adds $1/month for the key version it keeps")
    item.reason = "; ".join(notes)
    price = table.get(t.region, KMS_KEY, "month")
    return _monthly_item(item, price, 1, table.missing_reason(t.region, KMS_KEY, "month"))


def _alarm(t: _Template, table: PriceTable, item: LineItem, props: Mapping[str, Any]) -> LineItem:
    # Alarms bill per metric they evaluate: one for a metric alarm, one per MetricStat of a
    # metric-math alarm; a period under 60 s is high resolution
    # (https://aws.amazon.com/cloudwatch/pricing/, Alarms).
    if props.get("Metrics"):
        metrics = sum(1 for m in t.resolve(props["Metrics"]) if (m or {}).get("MetricStat"))
        periods = [
            (m.get("MetricStat") or {}).get("Period", 60) for m in t.resolve(props["Metrics"]) if m
        ]
    else:
        metrics, periods = 1, [t.resolve(props.get("Period", 60))]
    key = "high-resolution" if any(float(p) < 60 for p in periods) else "standard"
    item.description = f"CloudWatch alarm ({metrics} {key} alarm metric{'s' * (metrics != 1)})"
    item.reason = "the first 10 standard alarm metrics of an account are free"
    return _monthly_item(
        item,
        table.get(t.region, CLOUDWATCH_ALARM, key),
        metrics,
        table.missing_reason(t.region, CLOUDWATCH_ALARM, key),
    )


def _metric_filter(
    t: _Template, table: PriceTable, item: LineItem, props: Mapping[str, Any]
) -> LineItem:
    transformations = t.resolve(props.get("MetricTransformations") or [])
    count = len(transformations)
    item.description = f"metric filter publishing {count} custom metric{'s' * (count != 1)}"
    notes = ["a custom metric bills for the hours it receives data"]
    if any((x or {}).get("Dimensions") for x in transformations):
        notes.append("each distinct dimension value is a metric of its own (counted once)")
    item.reason = "; ".join(notes)
    return _monthly_item(
        item,
        table.get(t.region, CLOUDWATCH_METRIC, "custom"),
        count,
        table.missing_reason(t.region, CLOUDWATCH_METRIC, "custom"),
    )


def _dashboard(
    t: _Template, table: PriceTable, item: LineItem, props: Mapping[str, Any]
) -> LineItem:
    item.description = "CloudWatch dashboard"
    item.reason = "the first 3 dashboards of an account are free"
    return _monthly_item(
        item,
        table.get(t.region, CLOUDWATCH_DASHBOARD, "month"),
        1,
        table.missing_reason(t.region, CLOUDWATCH_DASHBOARD, "month"),
    )


def _secret(t: _Template, table: PriceTable, item: LineItem, props: Mapping[str, Any]) -> LineItem:
    item.description = "Secrets Manager secret"
    item.reason = "API calls bill by use"
    return _monthly_item(
        item,
        table.get(t.region, SECRETS_MANAGER, "month"),
        1,
        table.missing_reason(t.region, SECRETS_MANAGER, "month"),
    )


#: How one resource type is priced: its line item (or several) from the resource's properties.
_Handler = Callable[[_Template, PriceTable, LineItem, Mapping[str, Any]], LineItem | list[LineItem]]

HANDLERS: dict[str, _Handler] = {
    "AWS::EKS::Cluster": _eks_cluster,
    "AWS::EKS::Nodegroup": _nodegroup,
    "AWS::SageMaker::Endpoint": _endpoint,
    "AWS::FSx::FileSystem": _file_system,
    "AWS::EC2::NatGateway": _nat_gateway,
    "AWS::EC2::EIP": _eip,
    "AWS::EC2::VPCEndpoint": _vpc_endpoint,
    "AWS::KMS::Key": _kms_key,
    "AWS::CloudWatch::Alarm": _alarm,
    "AWS::Logs::MetricFilter": _metric_filter,
    "AWS::CloudWatch::Dashboard": _dashboard,
    "AWS::SecretsManager::Secret": _secret,
}

# Add-ons whose own charges no resource of the template shows.
_ADDON_CHARGES = {
    "amazon-cloudwatch-observability": (
        "Container Insights metrics and logs of the amazon-cloudwatch-observability add-on: "
        "bill by volume (https://aws.amazon.com/cloudwatch/pricing/, Container Insights)"
    ),
}


UNPRICED_REASON = "a resource type the cost estimator has no rule for (not counted)"


def classify(type_: str) -> str:
    """``priced``, ``usage-based``, ``free`` or ``unclassified`` for a resource type."""
    if type_ in HANDLERS:
        return PRICED
    if type_ in USAGE_TYPES:
        return USAGE_BASED
    if type_ in FREE_TYPES or _CUSTOM.match(type_):
        return FREE
    return UNCLASSIFIED


def estimate_template(
    template: Mapping[str, Any],
    *,
    stack: str,
    region: str,
    table: PriceTable,
    account: str | None = None,
) -> StackEstimate:
    """The cost of every resource of ``template`` deployed in ``region`` (and ``account``)."""
    t = _Template(template, region, account)
    estimate = StackEstimate(stack=stack, region=region)
    for logical_id, resource in t.resources.items():
        type_ = resource.get("Type", "")
        props = resource.get("Properties", {}) or {}
        item = LineItem(stack=stack, logical_id=logical_id, type=type_, category=classify(type_))
        items = [item]
        if item.category == PRICED:
            try:
                result = HANDLERS[type_](t, table, item, props)
                items = result if isinstance(result, list) else [result]
            except Unresolvable as why:
                item.status, item.reason = UNKNOWN, str(why)
        elif item.category == USAGE_BASED:
            item.reason = USAGE_TYPES[type_]
        elif item.category == UNCLASSIFIED:
            item.status, item.reason = UNPRICED, UNPRICED_REASON
        elif item.category == FREE:
            item.reason = FREE_TYPES.get(type_, "billed through its provider function")
            if type_ == "AWS::EKS::Addon":
                try:
                    name = t.resolve(props.get("AddonName"))
                except Unresolvable:
                    name = None
                if name in _ADDON_CHARGES:
                    t.not_estimated.append(f"{logical_id}: {_ADDON_CHARGES[name]}")
        estimate.items += items
    estimate.not_estimated = t.not_estimated
    return estimate


# --- multi-model comparison and training -------------------------------------------------


@dataclass(frozen=True)
class MultiModelComparison:
    """One multi-model endpoint against one single-model endpoint per archive."""

    endpoint: str
    instance_type: str
    instances: float
    archives: int
    price: Price
    at: str = "initial"  # "initial" (InitialInstanceCount) or "maximum" (autoscaling)

    @property
    def configured_hourly(self) -> float:
        return self.instances * self.price.usd

    @property
    def single_model_hourly(self) -> float:
        return self.archives * self.instances * self.price.usd

    @property
    def saving_hourly(self) -> float:
        return self.single_model_hourly - self.configured_hourly

    @property
    def saving_percent(self) -> float:
        return 100.0 * self.saving_hourly / self.single_model_hourly

    @property
    def saving_per_year(self) -> float:
        return self.saving_hourly * HOURS_PER_YEAR

    def to_dict(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint,
            "instance_type": self.instance_type,
            "at": self.at,
            "instances": self.instances,
            "archives": self.archives,
            "configured_hourly_usd": round(self.configured_hourly, 4),
            "single_model_endpoints_hourly_usd": round(self.single_model_hourly, 4),
            "saving_percent": round(self.saving_percent, 2),
            "saving_per_year_usd": round(self.saving_per_year, 2),
            "price": self.price.to_dict(),
        }


# What the single-model baseline assumes; the report prints it beside every comparison.
MULTI_MODEL_ASSUMPTION = (
    "assumes one single-model endpoint per archive, each with as many instances of the same "
    "type as the multi-model endpoint (archives x instances x price); archives with little "
    "traffic could run on fewer or smaller instances, which shrinks the saving"
)


def compare_multi_model(
    endpoint: str,
    instance_type: str,
    instances: float,
    archives: int,
    price: Price,
    at: str = "initial",
) -> MultiModelComparison:
    if archives < 1 or instances <= 0:
        raise ValueError(
            f"{endpoint}: archives={archives}, instances={instances}: "
            "need at least one archive and one instance"
        )
    return MultiModelComparison(endpoint, instance_type, instances, archives, price, at)


def training_hourly(estimates: list[StackEstimate]) -> tuple[float, list[LineItem]]:
    """Hourly cost of the training node groups, and the ones whose cost is not known."""
    items = [i for e in estimates for i in e.items if i.training]
    return (
        sum(i.hourly or 0.0 for i in items if i.status == OK),
        [i for i in items if i.status != OK],
    )
