"""GpuNodeGroup names its own props in its errors (not the settings key of Triton on EKS)."""

from __future__ import annotations

import aws_cdk as cdk
import pytest

from ml_platform.app import new_app
from ml_platform.constructs.gpu_nodes import GpuNodeGroup, GpuNodeGroupProps


def test_bad_props_are_reported_together_under_their_own_names() -> None:
    stack = cdk.Stack(new_app(), "S")
    with pytest.raises(ValueError) as raised:
        # The props are checked before the cluster is touched.
        GpuNodeGroup(
            stack,
            "Gpu",
            cluster=None,
            props=GpuNodeGroupProps(
                instance_type="p9.large",
                desired_size=3,
                max_size=2,
                labels={"ml-platform/node-role": "x"},
            ),
        )
    message = str(raised.value)
    assert message.startswith("S/Gpu: instance_type = 'p9.large': expected one of [")
    assert "gpu_instance_type" not in message
    assert "min_size = 3, desired_size = 3, max_size = 2: expected" in message
    assert (
        "labels = {'ml-platform/node-role': 'x'}: 'ml-platform/node-role' is set by this "
        "construct" in message
    )


def test_the_props_object_holds_the_rules_and_the_construct_keeps_it() -> None:
    from ml_platform.constructs._props import shared_problems
    from ml_platform.constructs.gpu_nodes import GpuNodeGroupPropsBase

    bad = GpuNodeGroupProps(instance_type="p9.large", desired_size=3, max_size=2)
    assert [p.split(" = ", 1)[0] for p in shared_problems(bad, GpuNodeGroupPropsBase)] == [
        "instance_type"
    ]
    assert [p.split(":", 1)[0] for p in bad.construct_problems()] == [
        "min_size = 3, desired_size = 3, max_size = 2"
    ]
    assert GpuNodeGroupProps(desired_size=0, min_size=0, max_size=1).construct_problems() == []
    assert GpuNodeGroupProps(desired_size=3, max_size=4).resolved_min_size == 3
