"""The JSON Schema of the settings and docs/configuration.md: generated from the settings
dataclasses, committed, current, and in agreement with what the parser accepts."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import jsonschema
import pytest
from referencing import Registry, Resource

from ml_platform import settings_schema
from ml_platform.config import Settings, SettingsError
from tests.support import ROOT, cdk_json_context

SCHEMA = settings_schema.settings_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def test_generated_files_are_current() -> None:
    for relative, text in settings_schema.outputs().items():
        path = ROOT / relative
        assert path.is_file(), f"{relative} is missing: run `make schema`"
        assert path.read_text(encoding="utf-8") == text, f"{relative} is stale: run `make schema`"


def test_check_mode_fails_on_a_stale_file(tmp_path) -> None:
    assert settings_schema.main(["--root", str(tmp_path)]) == 0
    assert settings_schema.main(["--check", "--root", str(tmp_path)]) == 0
    (tmp_path / settings_schema.REFERENCE).write_text("# old\n", encoding="utf-8")
    assert settings_schema.main(["--check", "--root", str(tmp_path)]) == 1


def test_the_generator_runs_as_a_module() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ml_platform.settings_schema", "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_schema_is_valid_and_every_setting_is_described() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    sections = [SCHEMA, *SCHEMA["$defs"].values()]
    undescribed = [
        f"{section['title']}.{name}"
        for section in sections
        for name, prop in section["properties"].items()
        if settings_schema._ref(prop) is None and not prop.get("description")
    ]
    assert not undescribed
    assert all(d.get("description") for d in SCHEMA["$defs"].values())


def test_cdk_json_mapping_points_at_the_settings_schema() -> None:
    vscode = json.loads((ROOT / ".vscode/settings.json").read_text(encoding="utf-8"))
    (mapping,) = vscode["json.schemas"]
    assert mapping["fileMatch"] == ["cdk.json"]
    wrapper_path = (ROOT / mapping["url"]).resolve()
    assert wrapper_path == (ROOT / settings_schema.CDK_JSON_SCHEMA).resolve()
    wrapper = json.loads(wrapper_path.read_text(encoding="utf-8"))
    ref = wrapper["properties"]["context"]["properties"]["ml-platform"]["$ref"]
    assert (wrapper_path.parent / ref).resolve() == (ROOT / settings_schema.SCHEMA).resolve()
    # the repository's own cdk.json passes the wrapper (with its referenced schema)
    registry = Registry().with_resource(ref, Resource.from_contents(SCHEMA))
    validator = jsonschema.Draft202012Validator(wrapper, registry=registry)
    cdk_json = json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))
    validator.validate(cdk_json)
    cdk_json["context"]["ml-platform"]["storage"] = {"removal_policy": "snapshot"}
    assert not validator.is_valid(cdk_json)  # the settings schema is applied through the $ref


# Each value the parser refuses for its type or its rule, and the schema refuses too.
REFUSED = [
    ({"storage": {"fsx_throughput_per_tib": 300}}, "storage.fsx_throughput_per_tib"),
    ({"storage": {"ecr_max_images": 0}}, "storage.ecr_max_images"),
    ({"storage": {"fsx_storage_gib": 100}}, "storage.fsx_storage_gib"),
    ({"cluster": {"kubernetes_version": "1.29"}}, "cluster.kubernetes_version"),
    ({"cluster": {"system_nodes": 11}}, "cluster.system_nodes"),
    ({"cluster": {"name": "Bad_Name"}}, "cluster.name"),
    ({"trainium": {"instance_type": "p4d.24xlarge"}}, "trainium.instance_type"),
    ({"trainium": {"root_volume_gib": 10}}, "trainium.root_volume_gib"),
    ({"trainium": {"capacity_block_id": "cr-1"}}, "trainium.capacity_block_id"),
    ({"inference": {"log_retention_days": 2}}, "inference.log_retention_days"),
    (
        {"inference": {"model_load_gpu_limit_percent": 101}},
        "inference.model_load_gpu_limit_percent",
    ),
    ({"inference": {"endpoints": [{"name": "-x"}]}}, "inference.endpoints[0].name"),
    # the pattern alone would let repeated '-' run past SageMaker's 63 characters
    ({"inference": {"endpoints": [{"name": "a" + "-" * 70 + "b"}]}}, "endpoints[0].name"),
    ({"inference": {"endpoints": [{"instance_type": "ml.p4d.24xlarge"}]}}, "instance_type"),
    ({"training": {"image_tag": "-bad"}}, "training.image_tag"),
    ({"images": {"mirrors": {"ghcr.io": "x.example.com"}}}, "images.mirrors.ghcr.io"),
    ({"features": {"inference": "yes"}}, "features.inference"),
    ({"trainium": {"nodes": "2"}}, "trainium.nodes"),
    ({"bogus": 1}, "bogus"),
]


@pytest.mark.parametrize(("values", "key"), REFUSED, ids=[k for _, k in REFUSED])
def test_schema_and_parser_refuse_the_same_values(values: dict, key: str) -> None:
    context = cdk_json_context()
    merged = copy.deepcopy(context["ml-platform"])
    for section, inner in values.items():
        if isinstance(inner, dict) and isinstance(merged.get(section), dict):
            merged[section] = {**merged[section], **inner}
        else:
            merged[section] = inner
    assert not list(VALIDATOR.iter_errors(context["ml-platform"]))
    assert list(VALIDATOR.iter_errors(merged)), f"the schema accepts {values}"
    with pytest.raises(SettingsError) as info:
        Settings.from_context(merged, known_azs=context)
    assert any(key in p for p in info.value.problems), info.value.problems


def test_null_means_default_in_the_schema_as_in_the_parser() -> None:
    context = cdk_json_context()
    nulls = {"trainium": {"nodes": None}, "cluster": {"endpoint_access": None}, "images": None}
    assert VALIDATOR.is_valid(nulls)
    assert Settings.from_context(nulls, known_azs=context) == Settings.from_context(
        {}, known_azs=context
    )
    # null inside a list or as a mapping's value is an error for both
    for bad in (
        {"network": {"availability_zones": ["us-west-2a", None]}},
        {"images": {"mirrors": {"docker.io": None}}},
    ):
        assert not VALIDATOR.is_valid(bad)
        with pytest.raises(SettingsError):
            Settings.from_context(bad, known_azs=context)


def test_reference_lists_every_setting_with_its_default() -> None:
    text = (ROOT / settings_schema.REFERENCE).read_text(encoding="utf-8")
    assert "| `storage.fsx_throughput_per_tib` | integer | `250` |" in text
    assert "one of `125`, `250`, `500`, `1000`" in text
    assert "| `inference.endpoints[].max_instances` | integer | `2` |" in text
    assert "| `cluster.admin_role_arn` | string | none |" in text
    for section in ("env", "network", "storage", "cluster", "trainium", "training"):
        assert f"## `{section}`" in text
