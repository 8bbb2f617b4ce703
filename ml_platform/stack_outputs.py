"""Names the stacks and the ``mlp`` CLI share: which inference stack holds an endpoint and
the outputs carrying dashboard URLs. No aws-cdk import: the CLI loads this."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

# A CloudFormation stack holds at most 500 resources
# (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html).
# An endpoint takes RESOURCES_PER_ENDPOINT of them (tests count them), the archive upload about
# a dozen: 30 endpoints per stack keep well below the limit; more go to further stacks.
STACK_RESOURCE_LIMIT = 500
ENDPOINTS_PER_STACK = 30
TRAINING_CLUSTER_STACK = "TrainingCluster"
TRAINING_DASHBOARD_OUTPUT = "TrainingDashboardUrl"
# Each inference stack's dashboard of its endpoints (a section per endpoint).
ENDPOINTS_DASHBOARD_OUTPUT = "EndpointsDashboardUrl"

T = TypeVar("T")


def endpoint_groups(endpoints: Sequence[T]) -> list[tuple[T, ...]]:
    """The endpoints of each inference stack, in settings order (appending endpoints to the
    settings never moves an existing one to another stack)."""
    return [
        tuple(endpoints[i : i + ENDPOINTS_PER_STACK])
        for i in range(0, len(endpoints), ENDPOINTS_PER_STACK)
    ] or [()]


def inference_stack_short(index: int) -> str:
    """Short name (without the prefix) of the ``index``-th inference stack (0-based)."""
    return f"Inference{index + 1 if index else ''}"
