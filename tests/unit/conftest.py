"""Fixtures of the training-cluster tests: the session's default synthesis (tests/conftest.py)
plus one synthesis with trn1n.32xlarge (and the optional capacity settings) and one with
trn2.48xlarge. Session fixtures are built on first use only, so a run that asks for neither
does not pay for them."""

from __future__ import annotations

import pytest

from tests.support import SynthesizedPlatform, synthesize

CAPACITY_BLOCK = "cr-02168da1478b509e0"


@pytest.fixture(scope="session")
def trn1n(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedPlatform:
    """The app with the Trainium node group changed: trn1n.32xlarge in a Capacity Block,
    scaling down to zero, and the break-glass Session Manager policy on the node roles
    (``cluster.node_ssm_access: true``; cdk-nag off: the default synthesis already runs it over
    the same constructs, and tests/unit/constructs/test_gpu_nodes.py over a role with SSM)."""
    return synthesize(
        tmp_path_factory.mktemp("cdk.out.trn1n"),
        {
            "trainium": {
                "instance_type": "trn1n.32xlarge",
                "capacity_block_id": CAPACITY_BLOCK,
                "min_nodes": 0,
            },
            "cluster": {"node_ssm_access": True},
        },
        nag=False,
    )


@pytest.fixture(scope="session")
def trn2(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedPlatform:
    """The app with ``trainium.instance_type: trn2.48xlarge`` and every other setting as in
    cdk.json (On-Demand, so a new cluster placement group). cdk-nag off, as for ``trn1n``: the
    default synthesis runs it over the same constructs."""
    return synthesize(
        tmp_path_factory.mktemp("cdk.out.trn2"),
        {"trainium": {"instance_type": "trn2.48xlarge"}},
        nag=False,
    )
