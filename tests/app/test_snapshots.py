"""Normalized JSON snapshots of every synthesized template: reviewed output, pinned.

Update on purpose with `pytest --snapshot-update` and say why in the commit message.
"""

from __future__ import annotations

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from tests.support import SynthesizedPlatform, normalized


@pytest.fixture
def json_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JSONSnapshotExtension)


def test_template_snapshots(synth: SynthesizedPlatform, json_snapshot: SnapshotAssertion) -> None:
    for path in synth.template_paths():
        stack = path.name.removesuffix(".template.json")
        template = normalized(synth.template_json(stack.split("-", 1)[1]))
        assert template == json_snapshot(name=stack)


def test_normalization_only_hides_asset_hashes() -> None:
    h = "a" * 64
    assert normalized({"Key": f"{h}.zip", "Other": "abc"}) == {
        "Key": "<asset-hash>.zip",
        "Other": "abc",
    }
