"""Key-policy statements every key of the platform carries."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms

GRANTS_FOR_AWS_RESOURCES_SID = "GrantsOnlyForAwsResources"


def grants_for_aws_resources_only() -> iam.PolicyStatement:
    """Deny ``kms:CreateGrant`` unless an AWS service asks (``aws:PrincipalIsAWSService``) or a
    principal asks on behalf of an AWS resource (``kms:GrantIsForAWSResource``, which EKS sets
    when it grants itself the secrets key). The key policy's account-root statement gives IAM
    policies ``kms:*``; without this, any role allowed ``kms:CreateGrant`` could hand the key
    to a principal outside every IAM policy. The statement is Control Tower's CT.KMS.PR.3
    (https://docs.aws.amazon.com/controltower/latest/controlreference/kms-rules.html); both keys
    false under ``BoolIfExists`` means neither condition holds."""
    return iam.PolicyStatement(
        sid=GRANTS_FOR_AWS_RESOURCES_SID,
        effect=iam.Effect.DENY,
        principals=[iam.AnyPrincipal()],
        actions=["kms:CreateGrant"],
        resources=["*"],
        conditions={
            "BoolIfExists": {
                "kms:GrantIsForAWSResource": "false",
                "aws:PrincipalIsAWSService": "false",
            }
        },
    )


def restrict_grants(key: kms.Key) -> kms.Key:
    """Add :func:`grants_for_aws_resources_only` to ``key``'s policy (an in-place update of a
    deployed key: ``KeyPolicy`` is "Update requires: No interruption")."""
    key.add_to_resource_policy(grants_for_aws_resources_only())
    return key
