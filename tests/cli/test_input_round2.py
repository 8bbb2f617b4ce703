"""Issue 22 point 5 and issue 19 point 6: bad input to the operator CLI, round 2. Each message
names the flag or setting the user gave, the value and what is allowed."""

from __future__ import annotations

import json

import pytest

from ml_platform.config import CONTEXT_KEY


def _written(project) -> dict:
    return json.loads(project.with_name("cdk.context.json").read_text())[CONTEXT_KEY]


def test_azs_refuses_a_type_that_is_not_trainium(aws, project, mlp):
    result = mlp("--cdk-json", project, "azs", "--instance-type", "p4d.24xlarge")
    assert result.code == 1
    assert result.err.strip() == (
        "mlp: error: --instance-type p4d.24xlarge: not a Trainium node type this platform runs; "
        "expected one of trn1.32xlarge, trn1n.32xlarge")
    assert not project.with_name("cdk.context.json").exists()


def test_azs_instance_type_is_written_as_the_node_groups_type(aws, project, mlp):
    result = mlp("--cdk-json", project, "azs", "--instance-type", "trn1n.32xlarge")
    assert result.code == 0, result.err
    written = _written(project)
    assert written["trainium"] == {"instance_type": "trn1n.32xlarge", "nodes": 2}
    assert written["network"]["trainium_az"] == "us-west-2d"  # trn1n's only AZ in moto's data


@pytest.mark.parametrize(("value", "expected"), [
    ('"not json"', "context key 'ml-platform' is a string that is not JSON"),
    ("5", "context key 'ml-platform' = 5: expected an object"),
    ("[1]", "context key 'ml-platform' = [1]: expected an object"),
])
def test_azs_names_the_file_and_key_of_a_context_that_is_not_an_object(
    aws, tmp_path, mlp, value, expected
):
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(f'{{"context": {{"ml-platform": {value}}}}}')
    result = mlp("--cdk-json", cdk_json, "azs")
    assert result.code == 1
    assert result.err.startswith(f"mlp: error: {cdk_json}: {expected}"), result.err
    assert "JSONDecodeError" not in result.err and "Traceback" not in result.err


def test_a_context_that_is_not_an_object_is_named(aws, tmp_path, mlp):
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text('{"context": 5}')
    result = mlp("--cdk-json", cdk_json, "azs")
    assert result.err.strip() == f"mlp: error: {cdk_json}: 'context' must be a JSON object"


@pytest.mark.parametrize("command", [("azs",), ("models", "list"), ("status",)])
def test_cdk_json_naming_a_folder_says_so(aws, project, mlp, command):
    result = mlp("--cdk-json", project.parent, *command)
    assert result.code == 1
    assert result.err.strip() == (
        f"mlp: error: --cdk-json {project.parent}: is a folder; expected the project's cdk.json "
        f"file ({project})")


def test_status_of_a_named_endpoint_needs_no_az_context(aws, tmp_path, mlp, monkeypatch):
    # Another CDK app's folder: its cdk.json has no ml-platform settings and no AZ context.
    (tmp_path / "cdk.json").write_text('{"app": "python3 app.py", "context": {}}')
    monkeypatch.chdir(tmp_path)
    result = mlp("status", "--endpoint", "someone-elses")
    assert result.code == 1
    assert "availability-zones" not in result.err
    assert "someone-elses" in result.err and "not found" in result.err, result.err


def test_unknown_region_flag_is_refused(aws, project, mlp):
    result = mlp("--cdk-json", project, "--region", "us-foo-1", "status")
    assert result.code == 1
    assert result.err.startswith("mlp: error: --region 'us-foo-1': not an AWS region"), result.err
