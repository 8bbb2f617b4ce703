"""Fixtures of the training-cluster tests: the session's default synthesis (tests/conftest.py)
plus one synthesis with trn1n.32xlarge."""

from __future__ import annotations

import pytest

from tests.support import SynthesizedPlatform, synthesize


@pytest.fixture(scope="session")
def trn1n(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedPlatform:
    """The app with only the Trainium instance type changed (cdk-nag off: the default
    synthesis already runs it over the same constructs)."""
    return synthesize(
        tmp_path_factory.mktemp("cdk.out.trn1n"),
        {"trainium": {"instance_type": "trn1n.32xlarge"}},
        nag=False,
    )
