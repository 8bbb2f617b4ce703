"""Names the stacks and the ``mlp`` CLI share: which inference stack holds an endpoint and
the outputs carrying dashboard URLs. No aws-cdk import: the CLI loads this."""

from __future__ import annotations

__all__ = [
    "ENDPOINTS_DASHBOARD_OUTPUT",
    "ENDPOINTS_PER_STACK",
    "INFERENCE_FIXED_IDS",
    "STACK_RESOURCE_LIMIT",
    "TRAINING_CLUSTER_STACK",
    "TRAINING_DASHBOARD_OUTPUT",
    "endpoint_construct_id",
    "endpoint_groups",
    "endpoint_name_clashes",
    "inference_stack_short",
]

import re
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


def endpoint_construct_id(endpoint_name: str) -> str:
    """The construct id InferenceStack gives an endpoint: 'triton-ensembles' ->
    'TritonEnsembles'."""
    return "".join(part[:1].upper() + part[1:] for part in endpoint_name.split("-"))


# Construct ids InferenceStack uses beside the endpoints' ids and their '<id>Name' outputs.
INFERENCE_FIXED_IDS = (
    "ModelBucket",
    "UploadArchives",
    "AlarmTopic",
    "AlarmTopicArn",
    "EndpointsDashboard",
    "EndpointsDashboardUrl",
)


def endpoint_name_clashes(names: Sequence[tuple[str, str]]) -> list[str]:
    """Endpoint names (``(key, name)`` pairs) that InferenceStack would turn into one construct
    id, or into one of its own. The messages speak of names, never of the ids themselves (they
    are internal)."""
    # Each endpoint gives an id and '<id>Name' (its name output); the stack's own resources
    # have fixed ids, which read as these endpoint names.
    reserved = {cid: re.sub(r"(?<!^)([A-Z])", r"-\1", cid).lower() for cid in INFERENCE_FIXED_IDS}
    owners: dict[str, list[tuple[str, str]]] = {}
    for key, name in names:
        cid = endpoint_construct_id(name)
        owners.setdefault(cid, []).append((key, name))
        owners.setdefault(f"{cid}Name", []).append((key, name))
    out = []
    for cid, named in owners.items():
        named = sorted(set(named))
        listed = ", ".join(f"{key} = {name!r}" for key, name in named)
        if cid in reserved:
            out.append(
                f"{listed}: too close to the name the inference stack keeps for its own "
                f"{reserved[cid]!r}; reserved: {sorted(reserved.values())} (letter case and "
                "repeated '-' aside)"
            )
        elif len(named) > 1:
            out.append(
                f"{listed}: too alike, the stack derives one identifier from them (names "
                "must differ in more than letter case, repeated '-' and a trailing '-name'); "
                "choose distinct names"
            )
    return list(dict.fromkeys(out))  # a pair that clashes on both ids is one problem
