"""after_security_group_rules: a resource waits for its groups' rules in its own stack, rules
added later included, and never for rules of other groups or of a nested stack."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from ml_platform.app import new_app
from ml_platform.constructs._create_order import after_security_group_rules


def _rule(scope: cdk.Stack, construct_id: str, group_id: str) -> ec2.CfnSecurityGroupIngress:
    return ec2.CfnSecurityGroupIngress(
        scope,
        construct_id,
        group_id=group_id,
        ip_protocol="tcp",
        from_port=988,
        to_port=988,
        cidr_ip="10.0.0.0/16",
    )


def _depends_on(stack: cdk.Stack, logical_type: str) -> list[str]:
    resources = Template.from_stack(stack).find_resources(logical_type)
    ((resource,),) = [list(resources.values())]
    return sorted(resource.get("DependsOn", []))


def test_the_resource_waits_for_every_rule_of_its_groups_even_those_added_later() -> None:
    stack = cdk.Stack(new_app(), "S")
    vpc = ec2.Vpc(stack, "Vpc", nat_gateways=0, max_azs=1)
    group = ec2.SecurityGroup(stack, "Group", vpc=vpc)
    other = ec2.SecurityGroup(stack, "Other", vpc=vpc)
    waiting = cdk.CfnResource(stack, "Waiting", type="Custom::Waiting")
    _rule(stack, "Before", group.security_group_id)
    after_security_group_rules(waiting, [group])
    _rule(stack, "After", group.security_group_id)  # added after the call: still waited for
    _rule(stack, "OtherGroups", other.security_group_id)
    egress = ec2.CfnSecurityGroupEgress(
        stack,
        "Egress",
        group_id=other.security_group_id,
        ip_protocol="-1",
        destination_security_group_id=group.security_group_id,
    )
    del egress
    assert _depends_on(stack, "Custom::Waiting") == ["After", "Before", "Egress"]


def test_rules_in_a_nested_stack_are_not_depended_on() -> None:
    # A DependsOn cannot name a resource of another template: the rule in the nested stack is
    # ordered by the nested stack's own references, not by this resource.
    stack = cdk.Stack(new_app(), "S")
    vpc = ec2.Vpc(stack, "Vpc", nat_gateways=0, max_azs=1)
    group = ec2.SecurityGroup(stack, "Group", vpc=vpc)
    waiting = cdk.CfnResource(stack, "Waiting", type="Custom::Waiting")
    nested = cdk.NestedStack(stack, "Nested")
    _rule(nested, "InNested", group.security_group_id)
    _rule(stack, "InStack", group.security_group_id)
    after_security_group_rules(waiting, [group])
    depends_on = _depends_on(stack, "Custom::Waiting")
    assert depends_on == ["InStack"]
    nested_resource = Template.from_stack(stack).find_resources("AWS::CloudFormation::Stack")
    assert len(nested_resource) == 1 and not set(nested_resource) & set(depends_on)
