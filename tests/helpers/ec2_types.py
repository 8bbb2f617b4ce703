"""EC2's own description of instance types, as moto ships it: ``DescribeInstanceTypes`` answers
(moto's ``moto/ec2/resources/instance_types.json.gz``, a copy of the EC2 API's data) asked
through boto3, so tests read the fields the EC2 API names."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import boto3
from moto import mock_aws


def describe_instance_types(names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Each type's ``DescribeInstanceTypes`` entry, by name (moto's fake credentials)."""
    names = sorted(set(names))
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-2")
        answer = ec2.describe_instance_types(InstanceTypes=names)["InstanceTypes"]
    return {entry["InstanceType"]: entry for entry in answer}
