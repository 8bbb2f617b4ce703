"""Which trust policies of the platform carry source conditions, and which service roles go
without one, each with why and the public AWS page that says so (tests/app/
test_trust_policies.py and the upload_dir test walk every role against this)."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

ACCOUNT, REGION = "123456789012", "us-west-2"  # cdk.json's env (the templates resolve them)


def pod_identity(namespace: str, service_account: str) -> dict[str, Any]:
    """The session-tag condition of a Pod Identity role of the platform's cluster."""
    return {
        "StringEquals": {
            "aws:RequestTag/eks-cluster-arn": {"Fn::GetAtt": ["Cluster9EE0221C", "Arn"]},
            "aws:RequestTag/kubernetes-namespace": namespace,
            "aws:RequestTag/kubernetes-service-account": service_account,
        }
    }


# (stack, logical ID) -> (service principal, the exact Condition of its sts:AssumeRole).
CONDITIONED: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {
    # https://docs.aws.amazon.com/sagemaker/latest/dg/security-confused-deputy-prevention.html
    ("Inference", "TritonEnsemblesExecutionRoleADDAC302"): (
        "sagemaker.amazonaws.com",
        {
            "StringEquals": {"aws:SourceAccount": ACCOUNT},
            "ArnLike": {"aws:SourceArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:*"},
        },
    ),
    # https://docs.aws.amazon.com/eks/latest/userguide/cross-service-confused-deputy-prevention.html
    ("TrainingCluster", "ClusterRoleBDFCC860"): (
        "eks.amazonaws.com",
        {
            "StringEquals": {"aws:SourceAccount": ACCOUNT},
            "ArnLike": {"aws:SourceArn": f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/ml-platform"},
        },
    ),
    # https://docs.aws.amazon.com/vpc/latest/userguide/flow-logs-iam-role.html
    ("Network", "VpcFlowLogIAMRole6DF5707F"): (
        "vpc-flow-logs.amazonaws.com",
        {
            "StringEquals": {"aws:SourceAccount": ACCOUNT},
            "ArnLike": {"aws:SourceArn": f"arn:aws:ec2:{REGION}:{ACCOUNT}:vpc-flow-log/*"},
        },
    ),
    # EKS Pod Identity sends session tags, not source keys; the roles trust one cluster,
    # namespace and service account.
    # https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html
    ("TrainingCluster", "AddonsVpcCniRoleB7C7293E"): (
        "pods.eks.amazonaws.com",
        pod_identity("kube-system", "aws-node"),
    ),
    ("TrainingCluster", "AddonsFsxCsiDriverRoleD4BE6E5A"): (
        "pods.eks.amazonaws.com",
        pod_identity("kube-system", "fsx-csi-controller-sa"),
    ),
    ("TrainingCluster", "AddonsCloudWatchRole91E8EEE8"): (
        "pods.eks.amazonaws.com",
        pod_identity("amazon-cloudwatch", "cloudwatch-agent"),
    ),
    ("TrainingCluster", "TritonPodRole23DF5911"): (
        "pods.eks.amazonaws.com",
        pod_identity("triton", "triton"),
    ),
}


@dataclass(frozen=True)
class Unconditioned:
    """Service roles whose trust carries no source condition, and why."""

    stack: str
    logical_id: str  # shell-style pattern (aws-cdk's logical IDs end in a hash)
    service: str
    reason: str
    source: str
    default_app: bool = True  # present in the default synthesis (stale if it matches nothing)

    def matches(self, stack: str, logical_id: str, service: str) -> bool:
        return (
            stack == self.stack
            and fnmatchcase(logical_id, self.logical_id)
            and service == self.service
        )


_EC2 = (
    "EC2 instance roles: EC2 documents no aws:SourceArn/aws:SourceAccount for the role of an "
    "instance profile, and the EKS node role page prescribes the trust policy without "
    "conditions. The node role is reached only through the instance profile EKS launches the "
    "managed node group with; pods off the host network cannot reach it (IMDS hop limit 1)."
)
_EC2_SOURCE = "https://docs.aws.amazon.com/eks/latest/userguide/create-node-role.html"
_LAMBDA = (
    "aws-cdk's Lambda execution role: Lambda documents only the lambda.amazonaws.com "
    "principal for an execution role's trust; aws:SourceArn applies to policies whose target "
    "is the function, not to the role Lambda assumes."
)
_LAMBDA_SOURCE = (
    "https://docs.aws.amazon.com/lambda/latest/dg/lambda-intro-execution-role.html and "
    "https://docs.aws.amazon.com/lambda/latest/dg/permissions-source-function-arn.html"
)

UNCONDITIONED: tuple[Unconditioned, ...] = (
    Unconditioned(
        "TrainingCluster",
        "ClusterSystemNodesNodeGroupRole*",
        "ec2.amazonaws.com",
        _EC2,
        _EC2_SOURCE,
    ),
    Unconditioned("TrainiumNodes", "TrainiumNodeRole*", "ec2.amazonaws.com", _EC2, _EC2_SOURCE),
    Unconditioned("GpuNodes", "GpuNodeGroupRole*", "ec2.amazonaws.com", _EC2, _EC2_SOURCE),
    Unconditioned(
        "TrainingCluster",
        "ClusterKubectlProviderHandlerServiceRole*",
        "lambda.amazonaws.com",
        _LAMBDA,
        _LAMBDA_SOURCE,
    ),
    Unconditioned(
        "TrainingCluster",
        "ClusterKubectlProviderframeworkonEventServiceRole*",
        "lambda.amazonaws.com",
        _LAMBDA,
        _LAMBDA_SOURCE,
    ),
    Unconditioned(
        "Network",
        "CustomVpcRestrictDefaultSGCustomResourceProviderRole*",
        "lambda.amazonaws.com",
        _LAMBDA + " (aws-cdk's provider that empties the VPC's default security group)",
        _LAMBDA_SOURCE,
    ),
    Unconditioned(
        "Inference",
        "EndpointScalingProviderHandlerServiceRole*",
        "lambda.amazonaws.com",
        _LAMBDA + " (the endpoint-scaling handler)",
        _LAMBDA_SOURCE,
    ),
    Unconditioned(
        "Inference",
        "EndpointScalingProviderframeworkonEventServiceRole*",
        "lambda.amazonaws.com",
        _LAMBDA,
        _LAMBDA_SOURCE,
    ),
    Unconditioned(
        "Inference",
        "UploadRole*",
        "lambda.amazonaws.com",
        _LAMBDA + " (BucketDeployment of inference.upload_dir)",
        _LAMBDA_SOURCE,
        default_app=False,
    ),
    Unconditioned(
        "Inference",
        "TritonEnsemblesScalingRole*",
        "application-autoscaling.amazonaws.com",
        "aws-cdk's ScalableTarget role: Application Auto Scaling documents no aws:SourceArn/"
        "aws:SourceAccount for a service role's trust (it lists service-linked roles, which "
        "SageMaker variants use).",
        "https://docs.aws.amazon.com/autoscaling/application/userguide/"
        "security_iam_service-with-iam.html",
    ),
)


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _plain(value: Any) -> Any:
    """``value`` with the partition resolved to ``aws`` (a stack outside the platform app
    leaves ``Fn::Join ["arn:", Ref AWS::Partition, ...]`` unresolved)."""
    if isinstance(value, dict):
        parts = value.get("Fn::Join", [None, None])[1]
        if (
            len(value) == 1
            and isinstance(parts, list)
            and all(isinstance(p, str) or p == {"Ref": "AWS::Partition"} for p in parts)
        ):
            return "".join("aws" if isinstance(p, dict) else p for p in parts)
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def service_trusts(template: dict[str, Any]) -> list[tuple[str, str, dict[str, Any] | None]]:
    """(logical ID, service principal, Condition) of every sts:AssumeRole statement that
    trusts an AWS service, over every AWS::IAM::Role of ``template``."""
    found = []
    for logical_id, resource in template.get("Resources", {}).items():
        if resource["Type"] != "AWS::IAM::Role":
            continue
        for statement in resource["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
            if statement["Effect"] != "Allow" or "sts:AssumeRole" not in _as_list(
                statement["Action"]
            ):
                continue
            for service in _as_list(statement.get("Principal", {}).get("Service", [])):
                found.append((logical_id, service, _plain(statement.get("Condition"))))
    return found


def trust_problems(stack: str, template: dict[str, Any]) -> tuple[list[str], set]:
    """What is wrong with the service trusts of one template, and which entries of
    :data:`UNCONDITIONED` matched (to find stale ones)."""
    problems, used = [], set()
    for logical_id, service, condition in service_trusts(template):
        expected = CONDITIONED.get((stack, logical_id))
        if expected is not None:
            if (service, condition) != expected:
                problems.append(
                    f"{stack}/{logical_id} ({service}): condition {condition!r}, "
                    f"expected {expected[1]!r} for {expected[0]}"
                )
            continue
        entry = next((e for e in UNCONDITIONED if e.matches(stack, logical_id, service)), None)
        if entry is None:
            problems.append(
                f"{stack}/{logical_id} ({service}): no source condition and not listed with a "
                "reason in tests/helpers/trust.py"
            )
        elif condition:
            problems.append(f"{stack}/{logical_id}: listed as unconditioned but has {condition!r}")
        else:
            used.add(entry)
    return problems, used
