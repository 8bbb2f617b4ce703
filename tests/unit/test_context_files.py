"""The context files merged as the CDK CLI merges them, and settings the merge would drop.

Taken from the CDK CLI's source (aws-cdk 2.1148, ``Configuration.loadConfigFiles`` and
``Context.all``): ~/.cdk.json's context < cdk.context.json < cdk.json's context, deep-merged
(objects key by key, anything else replaces). tests/e2e/ml_platform_cli/test_azs_cdk_cli.py observes the
real CLI giving the app the object :func:`cdk_context` computes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ml_platform.config import (
    CONTEXT_KEY,
    SettingsError,
    cdk_context,
    settings_from_cdk_json,
    shadowed_settings,
)
from tests.support import CDK_JSON


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "cdk.json").write_text(CDK_JSON.read_text())
    return folder / "cdk.json"


def _write(path: Path, value: dict) -> None:
    path.write_text(json.dumps(value))


def test_cdk_json_wins_key_by_key_over_cdk_context_json_and_the_user_file(project: Path) -> None:
    _write(
        Path.home() / ".cdk.json",
        {"context": {CONTEXT_KEY: {"training": {"queue": "home"}, "env": {"region": "eu-west-1"}}}},
    )
    _write(
        project.with_name("cdk.context.json"),
        {
            CONTEXT_KEY: {"storage": {"ecr_max_images": 50}, "training": {"queue": "local"}},
            "other": [1, 2],
        },
    )
    merged = cdk_context(project)
    ours = merged[CONTEXT_KEY]
    assert ours["env"] == {"account": "123456789012", "region": "us-west-2"}  # cdk.json wins
    assert ours["storage"] == {  # nested keys of both files
        "fsx_storage_gib": 1200,
        "removal_policy": "retain",
        "ecr_max_images": 50,
    }
    assert ours["training"] == {"queue": "local"}  # cdk.context.json over ~/.cdk.json
    assert merged["other"] == [1, 2]
    settings = settings_from_cdk_json(str(project))
    assert settings.storage.ecr_max_images == 50
    assert settings.training.queue == "local"


def test_a_value_cdk_json_overrides_is_an_error_naming_both_files(project: Path) -> None:
    _write(
        project.with_name("cdk.context.json"),
        {
            CONTEXT_KEY: {
                "env": {"account": "210987654321", "region": "us-west-2"},  # region: same
                "network": {"trainium_az": "us-west-2c"},
                "storage": {"ecr_max_images": 50},  # cdk.json has none: takes effect
            }
        },
    )
    problems = shadowed_settings(project)
    assert problems == [
        'cdk.context.json: ml-platform env.account = "210987654321" does not take effect: '
        'cdk.json\'s env.account = "123456789012", and the CDK CLI lets cdk.json win; set the '
        "value in cdk.json or remove it from cdk.context.json (`mlp azs` writes into cdk.json)",
        'cdk.context.json: ml-platform network.trainium_az = "us-west-2c" does not take '
        'effect: cdk.json\'s network.trainium_az = "us-west-2d", and the CDK CLI lets cdk.json '
        "win; set the value in cdk.json or remove it from cdk.context.json (`mlp azs` writes "
        "into cdk.json)",
    ]
    with pytest.raises(SettingsError) as info:
        settings_from_cdk_json(str(project))
    assert info.value.problems == problems


def test_bad_values_in_cdk_context_json_are_reported_with_the_shadowed_ones(project: Path) -> None:
    _write(
        project.with_name("cdk.context.json"),
        {
            CONTEXT_KEY: {
                "network": {"trainium_az": "us-west-2c"},
                "storage": {"ecr_max_images": "many"},
            }
        },
    )
    with pytest.raises(SettingsError) as info:
        settings_from_cdk_json(str(project))
    found = info.value.problems
    assert len(found) == 2
    assert found[0].startswith("cdk.context.json: ml-platform network.trainium_az")
    assert found[1] == "storage.ecr_max_images = 'many': expected an integer"


def test_same_values_and_empty_objects_are_no_conflict(project: Path) -> None:
    _write(
        project.with_name("cdk.context.json"),
        {CONTEXT_KEY: {"network": {"trainium_az": "us-west-2d"}, "cluster": {}}},
    )
    assert shadowed_settings(project) == []


def test_cdk_json_replacing_a_whole_object_drops_the_nested_key(project: Path) -> None:
    config = json.loads(project.read_text())
    config["context"][CONTEXT_KEY]["training"] = None
    project.write_text(json.dumps(config))
    _write(project.with_name("cdk.context.json"), {CONTEXT_KEY: {"training": {"queue": "q"}}})
    assert shadowed_settings(project) == [
        'cdk.context.json: ml-platform training.queue = "q" does not take effect: '
        "cdk.json's training.queue drops it, and the CDK CLI lets cdk.json win; set the value "
        "in cdk.json or remove it from cdk.context.json (`mlp azs` writes into cdk.json)"
    ]
