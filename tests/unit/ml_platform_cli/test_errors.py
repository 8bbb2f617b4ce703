"""Errors a user meets are one clear line, never a traceback; ``mlp --help`` stays light."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.cli import isolate_aws


@pytest.fixture
def no_credentials(monkeypatch, tmp_path):
    """No keys, no config files, no instance metadata: botocore finds nothing."""
    isolate_aws(monkeypatch, tmp_path, credentials=False)


@pytest.mark.parametrize(
    "command",
    [
        ("status",),
        ("models", "upload", "{archive}"),
        ("invoke", "--text", "hello"),
        ("azs",),
    ],
)
def test_missing_credentials(no_credentials, project, archives, mlp, command):
    argv = [a.format(archive=archives.image) for a in command]
    result = mlp("--cdk-json", project, *argv)
    assert result.code == 1
    assert result.out == ""
    assert result.err.startswith("mlp: error: no AWS credentials found: ")
    assert len(result.err.strip().splitlines()) == 1


def test_partial_credentials(no_credentials, project, monkeypatch, mlp):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAONLYTHEKEY")
    result = mlp("--cdk-json", project, "status")
    assert result.code == 1
    assert result.err.startswith("mlp: error: incomplete AWS credentials (")
    assert len(result.err.strip().splitlines()) == 1


def test_unknown_profile(no_credentials, project, mlp):
    result = mlp("--cdk-json", project, "--profile", "nope", "status")
    assert result.code == 1
    assert result.err.strip() == "mlp: error: --profile nope: no such profile in the AWS config"


def test_global_options_also_after_the_command(aws, project, mlp):
    result = mlp(
        "models", "upload", "--cdk-json", project, "--stack-prefix", "Other", project.parent
    )
    assert result.code == 1
    assert "no *.tar.gz archives" in result.err
    from tests.helpers.cli import ENSEMBLE, MODEL, write_tar

    archive = write_tar(
        project.parent / "model_x-v00000000.tar.gz",
        {"ensemble/config.pbtxt": ENSEMBLE, "encoder/config.pbtxt": MODEL},
    )
    result = mlp("models", "upload", "--cdk-json", project, "--stack-prefix", "Other", archive)
    assert "stack 'Other-Storage' not found in us-west-2" in result.err


def test_invalid_settings_are_listed(aws_env, project, mlp):
    data = json.loads(project.read_text())
    data["context"]["ml-platform"]["storage"]["fsx_storage_gib"] = 1000
    data["context"]["ml-platform"]["bogus"] = 1
    project.write_text(json.dumps(data))
    result = mlp("--cdk-json", project, "status")
    assert result.code == 1
    assert result.err.startswith(
        f"mlp: error: {project}: Invalid 'ml-platform' settings (2 problems):"
    )
    assert "storage.fsx_storage_gib = 1000" in result.err and "bogus: unknown setting" in result.err


def test_missing_cdk_json_given_explicitly(aws_env, tmp_path, mlp):
    result = mlp("--cdk-json", tmp_path / "cdk.json", "status")
    assert result.err.strip() == f"mlp: error: --cdk-json {tmp_path / 'cdk.json'}: no such file"


def test_without_cdk_json_the_defaults_apply(aws, tmp_path, monkeypatch, mlp):
    monkeypatch.chdir(tmp_path)
    result = mlp("status")
    assert result.err.strip() == (
        "mlp: error: endpoint 'triton-ensembles' not found in us-west-2 (no endpoints there)"
    )


def test_no_command_prints_help(mlp):
    result = mlp()
    assert result.code == 2 and "usage: mlp" in result.err
    result = mlp("models")
    assert result.code == 2 and "usage: mlp models" in result.err


def test_help_imports_nothing_heavy():
    code = (
        "import sys; from ml_platform_cli.main import build_parser; build_parser();"
        "print(sorted(m for m in ('boto3', 'botocore', 'rich', 'tritonclient', 'numpy',"
        " 'aws_cdk', 'ml_platform.config') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
