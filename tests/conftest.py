"""Session fixtures: the app is synthesized once per test session and shared."""

from __future__ import annotations

import os

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
    """The whole app with cdk.json's settings and cdk-nag on, synthesized once."""
    return synthesize(tmp_path_factory.mktemp("cdk.out"))
