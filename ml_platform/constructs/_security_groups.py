"""Security-group plumbing of the node groups: EFA within a group, rules between two groups,
and the control-plane rules a node group with its own groups needs.

Private: the public surface is the constructs (:class:`~ml_platform.constructs.network.
TrainingNodeSecurityGroup`, :class:`~ml_platform.constructs.trainium.TrainiumNodeGroup`).
"""

from __future__ import annotations

from typing import cast

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from ml_platform.constructs._per_app import key_of, registry

# EC2 User Guide, "Get started with EFA", security group step
# (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html): an EFA security group
# must allow all inbound AND all outbound traffic to and from the group itself. A 0.0.0.0/0
# egress rule does not carry EFA (SRD) traffic.
EFA_SELF_EGRESS_ID = "EfaSelfEgress"
EFA_SELF_DESCRIPTION = "EFA and node-to-node traffic"


def allow_efa_within(group: ec2.ISecurityGroup) -> ec2.CfnSecurityGroupEgress:
    """Allow all traffic from ``group`` to itself, both ways, as EFA requires. Idempotent.

    The ingress rule goes through ``add_ingress_rule`` (which skips a rule it already made).
    The egress rule is an explicit ``CfnSecurityGroupEgress``: ``add_egress_rule`` silently
    drops the rule on a group with ``allow_all_outbound=True``. Both are created as children of
    the group (in the group's stack), so constructs that share a group (the platform's node
    group and a user's launch template) emit each rule once.

    Returns:
        The egress rule (the one already there when called again for the same group).
    """
    group.add_ingress_rule(group, ec2.Port.all_traffic(), EFA_SELF_DESCRIPTION)
    existing = group.node.try_find_child(EFA_SELF_EGRESS_ID)
    if isinstance(existing, ec2.CfnSecurityGroupEgress):
        return existing
    return ec2.CfnSecurityGroupEgress(
        cast(Construct, group),  # an ISecurityGroup is a construct; jsii types it IConstruct
        EFA_SELF_EGRESS_ID,
        group_id=group.security_group_id,
        ip_protocol="-1",
        destination_security_group_id=group.security_group_id,
        description=EFA_SELF_DESCRIPTION,
    )


def allow_between(
    scope: Construct,
    construct_id: str,
    group: ec2.ISecurityGroup,
    peer: ec2.ISecurityGroup,
    port: ec2.Port,
    description: str,
) -> None:
    """Let ``peer`` reach ``group`` on ``port``: an ingress rule on ``group`` and, when
    ``peer`` does not allow all outbound traffic, the matching egress rule on ``peer``.

    The rules are plain CloudFormation resources created under ``scope``, so groups of other
    stacks can be wired from the stack that needs the connection without reference cycles
    (``add_ingress_rule`` would put the rule in the group's own stack).
    """
    _rule_pair(scope, construct_id, _Side.of(group), _Side.of(peer), port, description)


class _Side:
    """What the rules read of a group, read once (each read is a call into jsii)."""

    def __init__(self, group_id: str, allows_all_outbound: bool) -> None:
        self.group_id = group_id
        self.allows_all_outbound = allows_all_outbound

    @classmethod
    def of(cls, group: ec2.ISecurityGroup) -> _Side:
        return cls(group.security_group_id, group.allow_all_outbound)


def _rule_pair(
    scope: Construct, construct_id: str, group: _Side, peer: _Side, port: ec2.Port, description: str
) -> None:
    """:func:`allow_between` on groups already read."""
    rule = port.to_rule_json()
    ip_protocol: str = rule["ipProtocol"]
    from_port: int | None = rule.get("fromPort")
    to_port: int | None = rule.get("toPort")
    pair = Construct(scope, construct_id)
    ec2.CfnSecurityGroupIngress(
        pair,
        "Ingress",
        group_id=group.group_id,
        source_security_group_id=peer.group_id,
        description=description,
        ip_protocol=ip_protocol,
        from_port=from_port,
        to_port=to_port,
    )
    if not peer.allows_all_outbound:
        ec2.CfnSecurityGroupEgress(
            pair,
            "Egress",
            group_id=peer.group_id,
            destination_security_group_id=group.group_id,
            description=description,
            ip_protocol=ip_protocol,
            from_port=from_port,
            to_port=to_port,
        )


_CONTROL_PLANE_RULES = "control-plane-rules"  # per (cluster group, node group) pair


def control_plane_rules(
    scope: Construct,
    cluster_sg: ec2.ISecurityGroup,
    node_sg: ec2.ISecurityGroup,
    nodes: str = "Trainium nodes",
) -> Construct:
    """The control-plane rules between ``cluster_sg`` and ``node_sg``, created in ``scope`` by
    the first caller and returned as they are to every later caller anywhere in the app, so
    each rule exists once per security group (EC2 rejects a duplicate rule). ``nodes`` names
    the nodes in the rules' descriptions."""
    cluster, node = _Side.of(cluster_sg), _Side.of(node_sg)
    made = registry(scope, _CONTROL_PLANE_RULES)
    key = " ".join(key_of(g, side.group_id) for g, side in ((cluster_sg, cluster), (node_sg, node)))
    existing: Construct | None = made.get(key)
    if existing is None:
        existing = made[key] = allow_control_plane(scope, cluster, node, nodes)
    return existing


def allow_control_plane(scope: Construct, cluster: _Side, node: _Side, nodes: str) -> Construct:
    """Open for nodes in the ``node`` group what EKS opens for nodes in the ``cluster`` group:
    443 and 1025-65535 both ways (API server, kubelet, webhooks), plus DNS from the nodes to
    CoreDNS, which runs on nodes in the cluster group. Returns the construct holding the rules,
    ``ControlPlaneRules`` in ``scope``. ``nodes`` names the nodes in the rules' descriptions.

    EKS user guide, "View Amazon EKS security group requirements for clusters"
    (https://docs.aws.amazon.com/eks/latest/userguide/sec-group-reqs.html)."""
    rules = Construct(scope, "ControlPlaneRules")
    for name, port in (
        ("Https", ec2.Port.tcp(443)),
        ("Ephemeral", ec2.Port.tcp_range(1025, 65535)),
    ):
        _rule_pair(
            rules,
            f"NodesFromCluster{name}",
            node,
            cluster,
            port,
            "EKS control plane and cluster-group nodes",
        )
        _rule_pair(rules, f"ClusterFromNodes{name}", cluster, node, port, nodes)
    for name, port in (("DnsTcp", ec2.Port.tcp(53)), ("DnsUdp", ec2.Port.udp(53))):
        _rule_pair(
            rules,
            f"ClusterFromNodes{name}",
            cluster,
            node,
            port,
            f"DNS from {nodes} to CoreDNS",
        )
    return rules
