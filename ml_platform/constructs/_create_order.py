"""Create order: a resource that needs its security groups' rules at create time waits for them.

CloudFormation orders a resource after the security groups it references, not after those
groups' separate ``AWS::EC2::SecurityGroupIngress``/``Egress`` resources (aws/aws-cdk#14431,
https://github.com/aws/aws-cdk/issues/14431). FSx for Lustre checks its group's rules when the
file system is created and refuses with ``InvalidNetworkSettings`` when the Lustre rules are
not there yet (aws/aws-parallelcluster#1198,
https://github.com/aws/aws-parallelcluster/issues/1198); nodes whose EFA or control-plane rules
are missing fail to join or to talk. :func:`after_security_group_rules` adds the ``DependsOn``.
"""

from __future__ import annotations

from collections.abc import Sequence

import jsii
from aws_cdk import Aspects, CfnResource, IAspect, Stack
from aws_cdk import aws_ec2 as ec2
from constructs import IConstruct

_RULE_GROUP_FIELDS: dict[type[CfnResource], tuple[str, str]] = {
    ec2.CfnSecurityGroupIngress: ("group_id", "source_security_group_id"),
    ec2.CfnSecurityGroupEgress: ("group_id", "destination_security_group_id"),
}


@jsii.implements(IAspect)
class _RulesFirst:
    """Aspect on one resource: at synthesis (so rules added after the resource count too),
    make it depend on every rule in its stack that names one of ``group_ids``."""

    def __init__(self, resource: IConstruct, group_ids: Sequence[str]) -> None:
        self._resource = resource
        self._path = resource.node.path
        self._group_ids = frozenset(group_ids)

    def visit(self, node: IConstruct) -> None:
        # jsii may hand over another proxy of the same construct: compare paths.
        if node.node.path != self._path:
            return
        rules = security_group_rules(Stack.of(node), self._group_ids)
        if rules:
            self._resource.node.add_dependency(*rules)


def security_group_rules(stack: Stack, group_ids: frozenset[str]) -> list[CfnResource]:
    """The ingress/egress rule resources of ``stack`` whose group, source or destination is
    one of ``group_ids`` (``security_group_id`` values, tokens included)."""
    found: list[CfnResource] = []
    constructs = stack.node.find_all()  # the stack first, then its tree (nested stacks too)
    # Only a nested stack's constructs belong to another stack: without one, none need asking.
    nested = any(isinstance(c, Stack) for c in constructs[1:])
    for construct in constructs:
        if not isinstance(construct, (ec2.CfnSecurityGroupIngress, ec2.CfnSecurityGroupEgress)):
            continue
        fields = _RULE_GROUP_FIELDS[type(construct)]
        if nested and Stack.of(construct) is not stack:
            continue
        if any(getattr(construct, f) in group_ids for f in fields):
            found.append(construct)
    return found


def after_security_group_rules(resource: IConstruct, groups: Sequence[ec2.ISecurityGroup]) -> None:
    """Create ``resource`` only after every rule of ``groups`` in its own stack, including
    rules added later (``allow_client``, a user's ``add_ingress_rule``).

    Rules in other stacks are ordered by the stack dependencies their references create (a
    ``DependsOn`` cannot cross stacks); the platform's create-order test checks both.
    """
    Aspects.of(resource).add(_RulesFirst(resource, [g.security_group_id for g in groups]))
