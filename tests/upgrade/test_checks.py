"""Each check of tests/upgrade/checks.py on small templates: it fires on the break and stays
quiet on the safe variant.

Create-only properties come from cfn-lint's provider schemas (e.g. EKS
``/properties/AccessConfig/BootstrapClusterCreatorAdminPermissions``, S3 ``BucketName``).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import ROOT, SynthesizedPlatform
from tests.upgrade.checks import (
    breaking_changes,
    create_only_properties,
    normalized_template,
)
from tests.upgrade.test_upgrade import BASELINES, baseline_templates, last_release

SG = {"Type": "AWS::EC2::SecurityGroup", "Properties": {"GroupDescription": "d", "VpcId": "v"}}


def _ids(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return [f.id for f in breaking_changes(old, new)]


def _exporting() -> dict[str, Any]:
    return {
        "Storage": {
            "Resources": {"Lustre": SG},
            "Outputs": {
                "Out": {
                    "Value": {"Fn::GetAtt": ["Lustre", "GroupId"]},
                    "Export": {"Name": "Storage:LustreId"},
                }
            },
        },
        "Cluster": {
            "Resources": {
                "Rule": {
                    "Type": "AWS::EC2::SecurityGroupIngress",
                    "Properties": {
                        "GroupId": {"Fn::ImportValue": "Storage:LustreId"},
                        "IpProtocol": "tcp",
                        "FromPort": 988,
                        "ToPort": 988,
                        "CidrIp": "10.0.0.0/16",
                    },
                }
            }
        },
    }


def test_a_dropped_or_changed_export_in_use() -> None:
    old = _exporting()
    dropped = copy.deepcopy(old)
    del dropped["Storage"]["Outputs"]
    del dropped["Cluster"]["Resources"]["Rule"]
    assert "export-dropped Storage:LustreId imported by Cluster" in _ids(old, dropped)

    changed = copy.deepcopy(old)
    changed["Storage"]["Resources"]["Other"] = SG
    changed["Storage"]["Outputs"]["Out"]["Value"] = {"Fn::GetAtt": ["Other", "GroupId"]}
    assert "export-changed Storage:LustreId imported by Cluster" in _ids(old, changed)

    renamed = copy.deepcopy(old)  # same value under a new export name: only the rule matters
    renamed["Storage"]["Outputs"]["New"] = {
        "Value": {"Fn::GetAtt": ["Lustre", "GroupId"]},
        "Export": {"Name": "Storage:New"},
    }
    assert _ids(old, renamed) == []


def test_a_rule_removed_or_moved_to_another_peer() -> None:
    old = _exporting()
    new = copy.deepcopy(old)
    new["Cluster"]["Resources"]["Rule"]["Properties"]["CidrIp"] = "10.1.0.0/16"
    assert _ids(old, new) == ["sg-rule-removed Cluster/Rule ingress tcp:988-988"]
    # The same rule written inline on the group is the same rule.
    inline = copy.deepcopy(old)
    del inline["Cluster"]["Resources"]["Rule"]
    inline["Storage"]["Resources"]["Lustre"] = copy.deepcopy(SG)
    inline["Storage"]["Resources"]["Lustre"]["Properties"]["SecurityGroupIngress"] = [
        {"IpProtocol": "6", "FromPort": 988, "ToPort": 988, "CidrIp": "10.0.0.0/16"}
    ]
    assert [i for i in _ids(old, inline) if i.startswith("sg-rule-removed")] == []
    # A standalone rule under a new logical ID is created before the old one is deleted.
    moved = copy.deepcopy(old)
    moved["Cluster"]["Resources"]["Rule2"] = moved["Cluster"]["Resources"].pop("Rule")
    assert _ids(old, moved) == ["sg-rule-moved Cluster/Rule ingress tcp:988-988 to Cluster/Rule2"]


def _cluster(bootstrap: bool, name: str | None = "ml-platform") -> dict[str, Any]:
    props: dict[str, Any] = {
        "RoleArn": "r",
        "ResourcesVpcConfig": {"SubnetIds": ["s"]},
        "AccessConfig": {"BootstrapClusterCreatorAdminPermissions": bootstrap},
    }
    if name:
        props["Name"] = name
    return {"C": {"Resources": {"Cluster": {"Type": "AWS::EKS::Cluster", "Properties": props}}}}


def test_a_create_only_change_of_a_stateful_or_named_resource() -> None:
    assert "/properties/AccessConfig/BootstrapClusterCreatorAdminPermissions" in (
        create_only_properties("AWS::EKS::Cluster")
    )
    assert _ids(_cluster(True), _cluster(False)) == [
        "create-only C/Cluster /properties/AccessConfig/BootstrapClusterCreatorAdminPermissions"
    ]
    assert _ids(_cluster(True), _cluster(True)) == []
    # A role with a fixed name is replaced on a path change: refused for the name.
    role = {
        "Type": "AWS::IAM::Role",
        "Properties": {"RoleName": "x", "Path": "/a/", "AssumeRolePolicyDocument": {}},
    }
    moved = copy.deepcopy(role)
    moved["Properties"]["Path"] = "/b/"
    assert _ids({"S": {"Resources": {"R": role}}}, {"S": {"Resources": {"R": moved}}}) == [
        "create-only S/R /properties/Path"
    ]
    # Without the name, CloudFormation makes the new role before deleting the old: no finding.
    del role["Properties"]["RoleName"], moved["Properties"]["RoleName"]
    assert _ids({"S": {"Resources": {"R": role}}}, {"S": {"Resources": {"R": moved}}}) == []


def test_a_removed_stateful_resource_and_a_name_taken() -> None:
    bucket = {"Type": "AWS::S3::Bucket", "Properties": {}}
    assert _ids({"S": {"Resources": {"B": bucket}}}, {"S": {"Resources": {}}}) == [
        "stateful-removed S/B AWS::S3::Bucket"
    ]
    old = {
        "S": {
            "Resources": {
                "F": {
                    "Type": "AWS::Logs::MetricFilter",
                    "Properties": {
                        "LogGroupName": "/aws/x",
                        "FilterPattern": "",
                        "MetricTransformations": [],
                    },
                }
            }
        }
    }
    new = copy.deepcopy(old)
    new["S"]["Resources"]["G"] = {
        "Type": "AWS::Logs::LogGroup",
        "Properties": {"LogGroupName": "/aws/x"},
    }
    assert _ids(old, new) == ["name-taken S/G LogGroupName /aws/x"]


def test_the_baselines_are_normalized_and_find_nothing_against_themselves() -> None:
    _, folder = last_release()
    templates = baseline_templates(folder)
    assert {"Network", "Storage", "TrainingCluster"} <= set(templates)
    for template in templates.values():
        assert normalized_template(template) == template
    assert breaking_changes(templates, templates) == []
    for folder in BASELINES.iterdir():
        assert (folder / "SOURCE").read_text().strip(), f"{folder}: SOURCE says what it is"
    assert json.loads(json.dumps(templates)) == templates


def test_the_release_script_writes_a_normalized_baseline_once(
    synth: SynthesizedPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """scripts/upgrade_baseline.py on the session's templates: one file per stack, normalized,
    a SOURCE line, and no second write over a release's baseline."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import upgrade_baseline
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    monkeypatch.setattr(upgrade_baseline, "BASELINES", tmp_path)
    folder = upgrade_baseline.write(synth.outdir, "9.9.9", "commit test")
    written = baseline_templates(folder)
    assert set(written) == {
        p.name.split("-", 1)[1].removesuffix(".template.json") for p in synth.template_paths()
    }
    assert written["Storage"] == normalized_template(synth.template_json("Storage"))
    assert (folder / "SOURCE").read_text() == "commit test\n"
    with pytest.raises(SystemExit, match="exists: a release's baseline is not rewritten"):
        upgrade_baseline.write(synth.outdir, "9.9.9", "again")


def _node_group(release: str | None) -> dict[str, Any]:
    properties: dict[str, Any] = {"ClusterName": "c", "NodeRole": "r", "Subnets": ["s"]}
    if release is not None:
        properties["ReleaseVersion"] = release
    return {
        "Nodes": {"Resources": {"Trn": {"Type": "AWS::EKS::Nodegroup", "Properties": properties}}}
    }


@pytest.mark.parametrize(
    ("before", "after", "found"),
    [
        # No pin before: the group runs the newest AMI of its day, likely newer than any pin.
        (None, "1.35.4-20260505", ["release-pinned Nodes/Trn ReleaseVersion 1.35.4-20260505"]),
        # An earlier release than the pinned one: EKS refuses the rollback.
        (
            "1.35.6-20260625",
            "1.35.4-20260505",
            ["release-pinned Nodes/Trn ReleaseVersion 1.35.4-20260505"],
        ),
        (
            "1.35.4-20260505",
            "1.35.4-20260410",
            ["release-pinned Nodes/Trn ReleaseVersion 1.35.4-20260410"],
        ),
        # Forward from a pin, unchanged, or unpinned: EKS moves forward or leaves it.
        ("1.35.4-20260505", "1.35.6-20260625", []),
        ("1.35.4-20260505", "1.35.4-20260505", []),
        ("1.35.4-20260505", None, []),
        (None, None, []),
    ],
)
def test_a_node_group_pinned_to_a_release_it_may_be_past(
    before: str | None, after: str | None, found: list[str]
) -> None:
    assert _ids(_node_group(before), _node_group(after)) == found
