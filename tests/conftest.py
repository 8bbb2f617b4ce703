"""Session fixtures: the app is synthesized once per test session and shared."""

from __future__ import annotations

import os
from pathlib import Path

# The Node of package.json (node_modules/.bin/node) first on PATH, before jsii starts its Node
# process (at the first jsii import) and for every subprocess: the CDK CLI (`#!/usr/bin/env
# node`), the apps it runs and their jsii. tests/app/test_node.py checks which Node runs.
_NODE_BIN = Path(__file__).resolve().parent.parent / "node_modules" / ".bin"
if (_NODE_BIN / "node").is_file():
    os.environ["PATH"] = os.pathsep.join([str(_NODE_BIN), os.environ.get("PATH", "")])
    os.environ["JSII_NODE"] = str(_NODE_BIN / "node")

import pytest  # noqa: E402 (after PATH and JSII_NODE)

from tests import jsii_guard  # noqa: E402

# A dict passed where jsii expects a struct loses its snake_case keys silently: make it an
# error in every test (see tests/jsii_guard.py).
jsii_guard.install()

# One botocore data loader per data path for the whole test process: every boto3 Session (each
# in-process `mlp` run makes one) otherwise parses the service models again, about 0.3 s for
# EC2's. The models are read-only data; what a client does with them is unchanged.
import functools  # noqa: E402

import botocore.loaders  # noqa: E402
import botocore.session  # noqa: E402

botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)  # type: ignore[assignment]

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
