"""Every service role the platform synthesizes trusts its service only for this account (and
resource) where the service supports source conditions, or is listed with why not
(tests/helpers/trust.py); the conditions change no stateful identity."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from ml_platform.app import new_app
from ml_platform.constructs.eks_cluster import TrainingEksCluster
from tests.helpers.trust import (
    ACCOUNT,
    CONDITIONED,
    REGION,
    UNCONDITIONED,
    service_trusts,
    trust_problems,
)
from tests.support import SynthesizedPlatform


def _stack(path) -> str:
    return path.name.removesuffix(".template.json").split("-", 1)[1]


def test_every_service_trust_is_conditioned_or_listed_with_a_reason(
    synth: SynthesizedPlatform,
) -> None:
    problems, used, seen = [], set(), set()
    for path in synth.template_paths():
        stack = _stack(path)
        template = synth.template_json(stack)
        found, matched = trust_problems(stack, template)
        problems += found
        used |= matched
        seen |= {(stack, logical_id) for logical_id, _, _ in service_trusts(template)}
    assert problems == []
    assert sorted(set(CONDITIONED) - seen) == []  # each expected condition was checked
    stale = [e for e in UNCONDITIONED if e.default_app and e not in used]
    assert stale == []
    assert all(len(e.reason) > 60 and e.source.startswith("https://") for e in UNCONDITIONED)


def _role(principal: dict, condition: dict | None = None, action="sts:AssumeRole") -> dict:
    statement = {"Effect": "Allow", "Principal": principal, "Action": action}
    if condition is not None:
        statement["Condition"] = condition
    return {
        "Type": "AWS::IAM::Role",
        "Properties": {"AssumeRolePolicyDocument": {"Statement": [statement]}},
    }


def test_the_walk_fails_on_a_new_or_weakened_role() -> None:
    sagemaker_id = "TritonEnsemblesExecutionRoleADDAC302"
    service, condition = CONDITIONED[("Inference", sagemaker_id)]
    template = {
        "Resources": {
            sagemaker_id: _role(
                {"Service": service}, {"StringEquals": {"aws:SourceAccount": ACCOUNT}}
            ),
            "NewRole1234": _role({"Service": ["states.amazonaws.com"]}, action=["sts:AssumeRole"]),
            "TritonEnsemblesScalingRoleABCD": _role(
                {"Service": "application-autoscaling.amazonaws.com"}
            ),
            "AccountRole": _role({"AWS": "arn:aws:iam::123456789012:root"}),
        }
    }
    problems, used = trust_problems("Inference", template)
    assert len(problems) == 2, problems
    assert problems[0].startswith(f"Inference/{sagemaker_id} (sagemaker.amazonaws.com)")
    assert problems[1].startswith("Inference/NewRole1234 (states.amazonaws.com): no source")
    assert [e.logical_id for e in used] == ["TritonEnsemblesScalingRole*"]
    template["Resources"][sagemaker_id] = _role({"Service": service}, condition)
    del template["Resources"]["NewRole1234"]
    assert trust_problems("Inference", template)[0] == []


def test_cluster_and_roles_keep_their_identity(synth: SynthesizedPlatform) -> None:
    """The conditions are in-place updates of the same roles: the cluster still uses the role
    of the same logical ID (a new RoleArn would replace the EKS cluster), and the model the
    same execution role."""
    cluster = synth.template_json("TrainingCluster")["Resources"]
    assert cluster["Cluster9EE0221C"]["Type"] == "AWS::EKS::Cluster"
    assert cluster["Cluster9EE0221C"]["Properties"]["RoleArn"] == {
        "Fn::GetAtt": ["ClusterRoleBDFCC860", "Arn"]
    }
    assert cluster["ClusterRoleBDFCC860"]["Type"] == "AWS::IAM::Role"
    inference = synth.template_json("Inference")["Resources"]
    (model,) = [r for r in inference.values() if r["Type"] == "AWS::SageMaker::Model"]
    assert model["Properties"]["ExecutionRoleArn"] == {
        "Fn::GetAtt": ["TritonEnsemblesExecutionRoleADDAC302", "Arn"]
    }


def test_an_unnamed_cluster_role_trusts_clusters_of_its_account_and_region() -> None:
    """Without a name CloudFormation names the cluster, so the source ARN is the account's
    and region's clusters; the role trust still references nothing of the cluster."""
    stack = cdk.Stack(new_app(), "S", env=cdk.Environment(account=ACCOUNT, region=REGION))
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"])
    built = TrainingEksCluster(stack, "Cluster", vpc=vpc)
    role_id = stack.get_logical_id(built.cluster.role.node.default_child)
    resources = Template.from_stack(stack).to_json()["Resources"]
    trust = resources[role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust == [
        {
            "Action": "sts:AssumeRole",
            "Effect": "Allow",
            "Principal": {"Service": "eks.amazonaws.com"},
            "Condition": {
                "StringEquals": {"aws:SourceAccount": ACCOUNT},
                "ArnLike": {
                    "aws:SourceArn": {
                        "Fn::Join": [
                            "",
                            [
                                "arn:",
                                {"Ref": "AWS::Partition"},
                                f":eks:{REGION}:{ACCOUNT}:cluster/*",
                            ],
                        ]
                    }
                },
            },
        }
    ]
