"""Issue 34's bad inputs for the settings: each one SettingsError naming the key, the value
and what is allowed (before, each was accepted silently, hung synth or gave a traceback)."""

from __future__ import annotations

import json
import os
import runpy
from pathlib import Path

import pytest

from ml_platform.config import Settings, SettingsError, settings_from_cdk_json
from ml_platform.limits import shown
from tests.support import ROOT, cdk_json_context
from tests.unit.test_settings_hardening import SEEDED, one_problem, problems


# -- duplicate keys ---------------------------------------------------------------------------
def test_a_duplicate_key_in_cdk_json_is_refused_naming_file_and_key(tmp_path: Path) -> None:
    """A second removal_policy used to win silently (Python's and Node's JSON.parse keep the
    last)."""
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(
        '{"app": "python3 app.py", "context": {"ml-platform": {"storage": '
        '{"removal_policy": "retain", "removal_policy": "destroy"}}}}'
    )
    with pytest.raises(SettingsError) as info:
        settings_from_cdk_json(str(cdk_json), check_az_context=False)
    assert info.value.problems == [
        f"{cdk_json}: key 'context.ml-platform.storage.removal_policy' appears 2 times in one "
        "object (values 'retain', 'destroy'); JSON keeps only the last: keep one"
    ]


def test_a_duplicate_key_in_the_c_flag_is_refused() -> None:
    found = one_problem('{"env": {"region": "us-west-2"}, "env": {"region": "eu-west-1"}}')
    assert found.startswith("ml-platform (-c ml-platform=...): key 'ml-platform.env' appears 2")


def test_app_py_refuses_a_duplicate_key_in_cdk_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CDK CLI hands the app cdk.json's context with the last value of a repeated key, so
    app.py reads the file again (in the folder the CLI runs it in)."""
    import ml_platform.app

    text = (ROOT / "cdk.json").read_text()
    data = json.loads(text)
    nested = json.dumps(data["context"]["ml-platform"])[1:-1]
    data["context"]["ml-platform"] = "<settings>"
    doubled = json.dumps(data).replace(
        '"<settings>"', "{" + nested + ', "cost_annotations": false, "cost_annotations": true}'
    )
    (tmp_path / "cdk.json").write_text(doubled)
    context = cdk_json_context()
    real = ml_platform.app.new_app
    monkeypatch.setattr(
        ml_platform.app, "new_app", lambda: real(context=context, outdir=str(tmp_path / "out"))
    )
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        runpy.run_path(str(ROOT / "app.py"), run_name="__main__")
    assert info.value.code == 1
    assert "cdk.json: key 'context.ml-platform.cost_annotations' appears 2 times" in (
        capsys.readouterr().err
    )


# -- upload_dir: only regular files are opened ----------------------------------------------
def test_upload_dir_with_a_fifo_does_not_hang_synth(tmp_path: Path) -> None:
    """Before: content_version opened the FIFO and blocked forever (no writer); the alarm
    turns such a hang into a failure."""
    import signal

    os.mkfifo(tmp_path / "model_a-v00000000.tar.gz")

    def hung(*_: object) -> None:
        raise TimeoutError("the settings check blocked on the FIFO")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        one_problem(
            {"inference": {"upload_dir": str(tmp_path)}},
            "model_a-v00000000.tar.gz is a FIFO (named pipe); only regular files are uploaded",
        )
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_upload_dir_with_a_folder_named_like_an_archive_is_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "model_a-v00000000.tar.gz").mkdir()
    os.symlink("/etc/passwd", tmp_path / "model_b-v00000000.tar.gz")
    found = problems({"inference": {"upload_dir": str(tmp_path)}})
    assert [p.split(": ", 1)[1] for p in found] == [
        "model_a-v00000000.tar.gz is a folder; only regular files are uploaded: remove it or "
        "replace it with the archive file",
        "model_b-v00000000.tar.gz is a symbolic link; only regular files are uploaded: remove "
        "it or replace it with the archive file",
    ]


# -- cluster.system_instance_type: a real EC2 type -------------------------------------------
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("m6i.largee", "m6i comes in large, xlarge, 2xlarge"),
        ("m99i.large", "no EC2 instance family 'm99i' (families starting with 'm': m1, "),
        ("zz9.large", "no EC2 instance family 'zz9'"),
    ],
)
def test_system_instance_type_must_be_an_ec2_instance_type(value: str, expected: str) -> None:
    one_problem(
        {"cluster": {"system_instance_type": value}},
        f"cluster.system_instance_type = {value!r}: {expected}",
    )


def test_a_real_system_instance_type_passes() -> None:
    Settings.from_context({"cluster": {"system_instance_type": "c7i.2xlarge"}}, known_azs=SEEDED)


# -- cluster.public_access_cidrs: public blocks with a prefix length --------------------------
@pytest.mark.parametrize(
    ("cidr", "expected"),
    [
        ("203.0.113.7", "no prefix length; write the block in full, e.g. '203.0.113.7/32'"),
        ("10.1.0.0/16", "a private or reserved range; the public endpoint sees only public"),
        ("192.168.1.0/24", "a private or reserved range"),
        ("100.64.0.0/10", "a private or reserved range"),
    ],
)
def test_public_access_cidr_must_be_a_public_block_with_a_prefix(cidr: str, expected: str) -> None:
    one_problem(
        {
            "cluster": {
                "endpoint_access": "public_and_private",
                "public_access_cidrs": [cidr],
            }
        },
        f"cluster.public_access_cidrs[0] = {cidr!r}: {expected}",
    )


# -- images.digests: only images the platform pulls ------------------------------------------
DIGEST = "sha256:" + "a" * 64


def test_a_digest_for_an_image_the_platform_never_pulls_is_refused() -> None:
    found = one_problem({"images": {"digests": {"docker.io/library/nginx:1.27": DIGEST}}})
    assert found.startswith(
        "images.digests.'docker.io/library/nginx:1.27': the platform never pulls this image "
        "with these settings; expected one of ["
    )
    assert "'nvcr.io/nvidia/tritonserver:" in found and "'docker.io/volcanosh/" in found


def test_a_digest_for_a_pulled_image_passes_and_recorded_ones_are_not_checked() -> None:
    """`mlp images resolve` records digests in cdk.context.json; an entry of an earlier release
    there stays harmless (only the settings' own entries are checked)."""
    settings = Settings.from_context(
        {"images": {"digests": {"public.ecr.aws/aws-cli/aws-cli:2.36.49": DIGEST}}},
        known_azs=SEEDED,
        recorded_digests={"nvcr.io/nvidia/tritonserver:23.01-py3": DIGEST},
    )
    assert settings.images.digests["public.ecr.aws/aws-cli/aws-cli:2.36.49"] == DIGEST


# -- a long value is shortened in the one-line error ----------------------------------------
def test_a_5000_character_value_is_shortened_in_its_error() -> None:
    value = "x" * 5000
    found = one_problem({"env": {"stack_prefix": value}}, "env.stack_prefix = ")
    assert len(found) < 400, found
    assert "(5000 characters)" in found


def test_shown_keeps_short_values_whole_and_marks_what_it_cuts() -> None:
    assert shown("abc") == "'abc'"
    long = shown("a" * 1000 + "END")
    assert long.endswith("aEND' (1003 characters)") and "[...]" in long and len(long) < 230
