"""cdk.json sets every aws-cdk feature flag, each at its recommended value or at the value
docs/design.md gives with its reason (so the CDK CLI reports no unconfigured flag).

Source: ``recommended-feature-flags.json`` of aws-cdk-lib, read from the package's jsii
tarball as installed from PyPI (the same file the CDK CLI's `cdk flags` compares against).
That the recommended values leave the templates unchanged is what the snapshot tests pin
(tests/app/test_snapshots.py); the design notes say how it was checked."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import Any

import aws_cdk

from tests.support import ROOT, cdk_json_context


def recommended_flags() -> dict[str, Any]:
    (tarball,) = (Path(aws_cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(tarball) as archive:
        member = archive.extractfile("package/recommended-feature-flags.json")
        assert member is not None
        flags: dict[str, Any] = json.load(member)
    return flags


def held_in_design_notes() -> dict[str, str]:
    """The design notes' table: flag -> the value column, as written."""
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    section = design[design.index("## aws-cdk feature flags") :].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `(@[^`]+)` \| (.+?) \| .+ \|$", section, re.M))


def test_every_recommended_flag_is_set() -> None:
    context = cdk_json_context()
    missing = sorted(set(recommended_flags()) - set(context))
    assert missing == []


def test_each_flag_is_recommended_or_held_with_a_reason() -> None:
    context = cdk_json_context()
    held = held_in_design_notes()
    differ = {k for k, v in recommended_flags().items() if context[k] != v}
    assert differ == set(held)
    for flag, written in held.items():
        if written.startswith("`"):
            assert f"`{json.dumps(context[flag])}`" == written, flag


def test_target_partitions_lists_every_partition_of_the_region_table() -> None:
    from aws_cdk.region_info import RegionInfo

    partitions = sorted({region.partition for region in RegionInfo.regions})
    assert cdk_json_context()["@aws-cdk/core:target-partitions"] == partitions
