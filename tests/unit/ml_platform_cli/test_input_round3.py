"""Issue 34's bad input to the operator CLI: ``mlp cost`` flags and files, ``mlp models
upload`` with a FIFO, ``mlp azs`` flags checked before any AWS call. Each message names the
flag (or file), the value and what is allowed."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

STACK = "MlPlatform-Storage"


def _assembly(folder: Path) -> Path:
    """A one-stack cloud assembly as `cdk synth` writes it (manifest.json + template)."""
    folder.mkdir()
    (folder / "manifest.json").write_text(
        json.dumps(
            {
                "version": "48.0.0",
                "artifacts": {
                    STACK: {
                        "type": "aws:cloudformation:stack",
                        "environment": "aws://123456789012/us-west-2",
                        "properties": {"templateFile": f"{STACK}.template.json"},
                    }
                },
            }
        )
    )
    template = {"Resources": {"Bucket": {"Type": "AWS::S3::Bucket", "Properties": {}}}}
    (folder / f"{STACK}.template.json").write_text(json.dumps(template))
    return folder


@pytest.fixture
def cdk_out(tmp_path: Path) -> Path:
    return _assembly(tmp_path / "cdk.out")


def test_cost_runs_on_the_small_assembly(cdk_out, mlp):
    result = mlp("cost", "--cdk-out", cdk_out)
    assert result.code == 0, result.err
    assert STACK in result.out


def test_cost_refuses_an_explicit_cdk_json_that_is_missing(cdk_out, tmp_path, mlp):
    """Before: --cdk-json was read only for endpoint names, and its errors were swallowed."""
    missing = tmp_path / "nope" / "cdk.json"
    result = mlp("--cdk-json", missing, "cost", "--cdk-out", cdk_out)
    assert (result.code, result.err.strip()) == (
        1,
        f"mlp: error: --cdk-json {missing}: no such file",
    )


def test_cost_refuses_an_explicit_cdk_json_that_is_invalid(cdk_out, tmp_path, mlp):
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text('{"context": {"ml-platform": {"env": {"region": 5}}}}')
    result = mlp("--cdk-json", cdk_json, "cost", "--cdk-out", cdk_out)
    assert result.code == 1
    assert result.err.startswith(f"mlp: error: {cdk_json}: Invalid 'ml-platform' settings")
    assert "env.region = 5: expected a string" in result.err


def test_cost_refuses_an_unknown_region(cdk_out, mlp):
    result = mlp("--region", "us-west-9", "cost", "--cdk-out", cdk_out)
    assert result.code == 1
    assert result.err.startswith("mlp: error: --region 'us-west-9': not an AWS region (in that ")


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        (
            "ml_platform!",
            "--stack-prefix 'ml_platform!': expected letters and digits, starting with a letter, "
            "at most 41 characters (as env.stack_prefix)",
        ),
        ("Other", f"--stack-prefix Other: no stack named Other-* in {{out}} (its stacks: {STACK})"),
    ],
)
def test_cost_refuses_a_stack_prefix_it_cannot_use(cdk_out, mlp, prefix, expected):
    result = mlp("--stack-prefix", prefix, "cost", "--cdk-out", cdk_out)
    assert (result.code, result.err.strip()) == (
        1,
        "mlp: error: " + expected.replace("{out}", str(cdk_out)),
    )
    assert mlp("--stack-prefix", "MlPlatform", "cost", "--cdk-out", cdk_out).code == 0


def test_cost_names_the_flag_and_file_of_a_corrupt_manifest(cdk_out, mlp):
    manifest = cdk_out / "manifest.json"
    manifest.write_text('{"artifacts": ')
    result = mlp("cost", "--cdk-out", cdk_out)
    assert result.code == 1
    assert result.err.startswith(
        f"mlp: error: --cdk-out {cdk_out}: {manifest}: not valid JSON (Expecting value"
    )
    assert "Traceback" not in result.err


# -- mlp models upload: a FIFO is called a FIFO, and never opened ----------------------------
def _no_hang() -> None:
    def hung(*_: object) -> None:
        raise TimeoutError("blocked opening a FIFO")

    signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)


def test_upload_calls_a_fifo_what_it_is(aws, project, tmp_path, mlp):
    fifo = tmp_path / "model_a-v00000000.tar.gz"
    os.mkfifo(fifo)
    _no_hang()
    try:
        given = mlp("--cdk-json", project, "models", "upload", fifo)
        folder = mlp("--cdk-json", project, "models", "upload", tmp_path)
    finally:
        signal.alarm(0)
    assert given.code == 1 and folder.code == 1
    why = "is a FIFO (named pipe), not a regular file; expected an archive file or a folder of them"
    assert f"{fifo}: {why}" in given.err, given.err
    assert f"{fifo}: {why}" in folder.err, folder.err
    assert "no such file" not in given.err


# -- mlp azs: flags before any AWS call ------------------------------------------------------
@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (
            ["--admin-role-arn", "arn:aws:iam::123:user/me"],
            "--admin-role-arn 'arn:aws:iam::123:user/me': expected an IAM role ARN",
        ),
        (
            ["--public-access-cidr", "10.0.0.0/8"],
            "--public-access-cidr '10.0.0.0/8': a private or reserved range",
        ),
        (
            ["--public-access-cidr", "203.0.113.7"],
            "--public-access-cidr '203.0.113.7': no prefix length",
        ),
        (["--public-access-cidr", "nonsense"], "--public-access-cidr 'nonsense': not a CIDR"),
    ],
)
def test_azs_checks_its_flags_before_any_aws_call(
    project, mlp, monkeypatch: pytest.MonkeyPatch, flags, expected
):
    from ml_platform_cli import aws

    def no_aws(*_: object, **__: object) -> None:
        raise AssertionError("an AWS client was made before the flags were checked")

    monkeypatch.setattr(aws.Context, "client", no_aws)
    monkeypatch.setattr(aws.Context, "session", no_aws)
    result = mlp("--cdk-json", project, "azs", *flags)
    assert result.code == 1
    assert result.err.startswith(f"mlp: error: {expected}"), result.err
    assert result.err.rstrip().endswith("nothing written")
    assert not project.with_name("cdk.context.json").exists()


def test_a_5000_character_flag_value_is_shortened_in_its_error(cdk_out, mlp):
    result = mlp("--region", "x" * 5000, "cost", "--cdk-out", cdk_out)
    assert result.code == 1
    assert len(result.err) < 500 and "(5000 characters)" in result.err, result.err
