"""Session fixtures: the app is synthesized once per test session and shared."""

from __future__ import annotations

import os
from pathlib import Path

# jsii prints an end-of-life banner on Node 20; tests run on Node 20.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import pytest

from tests import jsii_guard

# A dict passed where jsii expects a struct loses its snake_case keys silently: make it an
# error in every test (see tests/jsii_guard.py).
jsii_guard.install()

from ml_platform.config import Settings, settings_from_cdk_json  # noqa: E402 (after the guard)
from tests.support import CDK_JSON, SynthesizedPlatform, synthesize  # noqa: E402


@pytest.fixture(scope="session")
def settings() -> Settings:
    """The settings `make synth` uses (this repository's cdk.json)."""
    return settings_from_cdk_json(str(CDK_JSON))


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedPlatform:
    """The whole app with cdk.json's settings, cdk-nag and Control Tower's proactive controls
    on, synthesized once."""
    return synthesize(tmp_path_factory.mktemp("cdk.out"), control_tower=True)


_E2E = Path(__file__).resolve().parent / "e2e"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/e2e/ carries the ``e2e`` marker: ``-m 'not e2e'`` (or
    ``make test-unit``) leaves out the real servers, the moto deploy and torchrun."""
    for item in items:
        if item.path.is_relative_to(_E2E):
            item.add_marker(pytest.mark.e2e)
