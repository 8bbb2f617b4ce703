"""Archives for SageMaker multi-model endpoints: layout, contents, reproducibility, names."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from ml_platform.triton import (
    IMAGE_ARCHIVE,
    TEXT_ARCHIVE,
    EncoderFormat,
    ModelFile,
    image_ensemble,
    package,
    parse_pbtxt,
    read_pbtxt,
    text_ensemble,
    validate_target_model,
    write_repository,
)
from ml_platform.triton.ensembles import (
    ASSETS,
    DALI_PIPELINE_SOURCE,
    POOLING_SOURCE,
    WORDPIECE_SOURCE,
)
from tests.helpers.triton_support import (
    FAKE_ONNX,
    FAKE_PLAN,
    LABELS,
    MINILM_DIR,
    TENSORRT,
    Artifacts,
    tiny_ensemble,
    tiny_inception,
    write_artifacts,
)

IMAGE_ENTRIES = [
    "dali",
    "dali/1",
    "dali/1/dali.py",
    "dali/config.pbtxt",
    "ensemble_dali_inception",
    "ensemble_dali_inception/1",
    "ensemble_dali_inception/config.pbtxt",
    "inception_onnx",
    "inception_onnx/1",
    "inception_onnx/1/model.onnx",
    "inception_onnx/config.pbtxt",
    "inception_onnx/inception_labels.txt",
]
TOKENIZER = [
    "config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
]


def text_entries(encoder_file: str) -> list[str]:
    return [
        "bert-trt",
        "bert-trt/1",
        f"bert-trt/1/{encoder_file}",
        "bert-trt/config.pbtxt",
        "ensemble",
        "ensemble/1",
        "ensemble/config.pbtxt",
        "postprocess",
        "postprocess/1",
        "postprocess/1/model.py",
        "postprocess/1/pooling.py",
        "postprocess/config.pbtxt",
        "preprocess",
        "preprocess/1",
        "preprocess/1/model.py",
        "preprocess/1/tokenizer",
        *[f"preprocess/1/tokenizer/{name}" for name in TOKENIZER],
        "preprocess/1/wordpiece.py",
        "preprocess/config.pbtxt",
    ]


@pytest.fixture
def artifacts(tmp_path: Path) -> Artifacts:
    return write_artifacts(tmp_path / "artifacts")


def image(artifacts: Artifacts):
    return image_ensemble(classifier_path=artifacts.classifier, labels_path=artifacts.labels)


def text(artifacts: Artifacts, encoder_format: EncoderFormat = EncoderFormat.TENSORRT):
    encoder = artifacts.plan if encoder_format is EncoderFormat.TENSORRT else artifacts.onnx
    tensorrt = encoder_format is EncoderFormat.TENSORRT
    return text_ensemble(
        tokenizer_dir=MINILM_DIR,
        encoder_path=encoder,
        encoder_format=encoder_format,
        gpu_target="t4" if tensorrt else None,
        tensorrt_version=TENSORRT if tensorrt else None,
    )


def members(archive: Path) -> list[tarfile.TarInfo]:
    with tarfile.open(archive, "r:gz") as tar:
        return tar.getmembers()


def read_member(archive: Path, name: str) -> bytes:
    with tarfile.open(archive, "r:gz") as tar:
        handle = tar.extractfile(name)
        assert handle is not None
        return handle.read()


def test_image_archive_layout_and_contents(artifacts: Artifacts, tmp_path: Path) -> None:
    archive = package(image(artifacts), tmp_path / "out")
    assert archive == tmp_path / "out" / IMAGE_ARCHIVE
    infos = members(archive)
    assert [i.name for i in infos] == IMAGE_ENTRIES
    for info in infos:
        assert info.isdir() == (info.name.count("/") == 0 or info.name.endswith("/1"))
    assert read_member(archive, "dali/1/dali.py") == DALI_PIPELINE_SOURCE.read_bytes()
    assert read_member(archive, "inception_onnx/1/model.onnx") == tiny_inception()
    assert read_member(archive, "inception_onnx/inception_labels.txt") == LABELS.encode()
    ensemble = parse_pbtxt(read_member(archive, "ensemble_dali_inception/config.pbtxt").decode())
    assert ensemble.platform == "ensemble"
    # Exactly one folder is the ensemble: the one SageMaker serves.
    platforms = [
        parse_pbtxt(read_member(archive, f"{name}/config.pbtxt").decode()).platform
        for name in ("dali", "ensemble_dali_inception", "inception_onnx")
    ]
    assert platforms.count("ensemble") == 1


@pytest.mark.parametrize(
    ("encoder_format", "encoder_file", "content"),
    [
        (EncoderFormat.TENSORRT, "model.plan", FAKE_PLAN),
        (EncoderFormat.ONNX, "model.onnx", FAKE_ONNX),
    ],
)
def test_text_archive_layout_and_contents(
    artifacts: Artifacts, tmp_path: Path, encoder_format, encoder_file: str, content: bytes
) -> None:
    archive = package(text(artifacts, encoder_format), tmp_path)
    assert archive.name == (
        TEXT_ARCHIVE if encoder_format is EncoderFormat.TENSORRT else "model_onnx_python.tar.gz"
    )
    assert [i.name for i in members(archive)] == text_entries(encoder_file)
    assert read_member(archive, f"bert-trt/1/{encoder_file}") == content
    assert (
        read_member(archive, "preprocess/1/model.py")
        == (ASSETS / "preprocess" / "model.py").read_bytes()
    )
    assert read_member(archive, "postprocess/1/pooling.py") == POOLING_SOURCE.read_bytes()
    assert read_member(archive, "preprocess/1/wordpiece.py") == WORDPIECE_SOURCE.read_bytes()
    assert (
        read_member(archive, "preprocess/1/tokenizer/vocab.txt")
        == (MINILM_DIR / "vocab.txt").read_bytes()
    )


def test_packaging_is_byte_identical(artifacts: Artifacts, tmp_path: Path) -> None:
    first = package(text(artifacts), tmp_path / "a").read_bytes()
    second = package(text(artifacts), tmp_path / "b").read_bytes()
    assert hashlib.sha256(first).digest() == hashlib.sha256(second).digest()
    # gzip header: no embedded file name (flags 0) and modification time 0.
    assert first[3] == 0 and first[4:8] == b"\x00\x00\x00\x00"
    third = package(image(artifacts), tmp_path / "c").read_bytes()
    assert third == package(image(artifacts), tmp_path / "d").read_bytes()


# Runs `mlp models package` from a copy of the package: nothing but the copy's own code.
_PACKAGE_FROM_CHECKOUT = """
import sys
from ml_platform_cli.main import main
sys.exit(main(["models", "package", "--out", sys.argv[1], "--inception-onnx", sys.argv[2],
               "--inception-labels", sys.argv[3], "--encoder", sys.argv[4]]))
"""


def test_archives_are_identical_across_checkouts(artifacts: Artifacts, tmp_path: Path) -> None:
    """The same commit checked out in two places builds byte-identical archives, the image
    archive included (a serialized DALI pipeline embedded its defining file's path)."""
    import ml_platform
    import ml_platform_cli
    import ml_platform_pricing

    built = []
    for checkout in ("checkout-a", "somewhere/else/checkout-b"):
        root = tmp_path / checkout
        # the library and the tooling beside it (`mlp models package` is the CLI's)
        for top_level in (ml_platform, ml_platform_cli, ml_platform_pricing):
            shutil.copytree(
                Path(top_level.__file__).parent,
                root / top_level.__name__,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        out = tmp_path / f"out-{len(built)}"
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                _PACKAGE_FROM_CHECKOUT,
                str(out),
                str(artifacts.classifier),
                str(artifacts.labels),
                str(artifacts.onnx),
            ],
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        built.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert sorted(built[0]) == sorted(built[1])
    assert any(name.startswith("model_tf_dali-v") for name in built[0])
    assert built[0] == built[1]


def test_archive_headers_carry_no_time_or_owner(artifacts: Artifacts, tmp_path: Path) -> None:
    for info in members(package(image(artifacts), tmp_path)):
        assert (info.mtime, info.uid, info.gid, info.uname, info.gname) == (0, 0, 0, "", "")
        assert info.mode == (0o755 if info.isdir() else 0o644)


def test_content_change_changes_archive(artifacts: Artifacts, tmp_path: Path) -> None:
    before = package(image(artifacts), tmp_path / "a").read_bytes()
    artifacts.classifier.write_bytes(tiny_inception(seed=1))
    assert package(image(artifacts), tmp_path / "b").read_bytes() != before


def test_archive_name_override_and_validation(artifacts: Artifacts, tmp_path: Path) -> None:
    archive = package(image(artifacts), tmp_path, archive_name="v2/images.tar.gz")
    assert archive == tmp_path / "v2" / "images.tar.gz"
    with pytest.raises(ValueError, match=r"TargetModel '../x.tar.gz'"):
        package(image(artifacts), tmp_path, archive_name="../x.tar.gz")
    assert not (tmp_path.parent / "x.tar.gz").exists()


def test_missing_source_fails_before_writing(artifacts: Artifacts, tmp_path: Path) -> None:
    spec = image(artifacts)
    artifacts.classifier.unlink()
    with pytest.raises(ValueError, match=r"inception_onnx.*model.onnx"):
        package(spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_write_repository_matches_archive(artifacts: Artifacts, tmp_path: Path) -> None:
    spec = text(artifacts)
    repo = write_repository(spec, tmp_path / "repo")
    on_disk = sorted(str(p.relative_to(repo)) for p in repo.rglob("*"))
    assert on_disk == sorted(text_entries("model.plan"))
    archive = package(spec, tmp_path)
    for name in on_disk:
        if (repo / name).is_file():
            assert (repo / name).read_bytes() == read_member(archive, name), name
    with pytest.raises(FileExistsError, match="preprocess"):
        write_repository(spec, repo)


def test_repository_can_hold_several_ensembles(artifacts: Artifacts, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_repository(image(artifacts), repo)
    write_repository(text(artifacts), repo)
    assert {p.name for p in repo.iterdir()} == {
        "dali",
        "inception_onnx",
        "ensemble_dali_inception",
        "preprocess",
        "bert-trt",
        "postprocess",
        "ensemble",
    }
    assert read_pbtxt(repo / "ensemble").platform == "ensemble"


def test_inline_content_files_are_packaged(tmp_path: Path) -> None:
    from dataclasses import replace

    base = tiny_ensemble()
    pre = replace(base.models[0], files=(ModelFile("1/model.py", content=b"print('hi')\n"),))
    archive = package(replace(base, models=(pre, *base.models[1:])), tmp_path)
    assert read_member(archive, "pre/1/model.py") == b"print('hi')\n"
    assert archive.name == "tiny.tar.gz"
    with gzip.open(archive) as raw:
        assert raw.read(1)  # a valid gzip stream


@pytest.mark.parametrize(
    "name",
    [
        "model_tf_dali.tar.gz",
        "model_trt_python.tar.gz",
        "team-a/v1.2/model_1.tar.gz",
        "a" * 1017 + ".tar.gz",
    ],
)
def test_valid_target_models(name: str) -> None:
    assert validate_target_model(name) is None


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "non-empty"),
        ("/model.tar.gz", "no leading '/'"),
        ("../model.tar.gz", "'..' path segment"),
        ("a/../model.tar.gz", "'..' path segment"),
        ("a//model.tar.gz", "empty, '.' or '..'"),
        ("./model.tar.gz", "'..' path segment"),
        ("model.tgz", "must end with"),
        ("model.tar.gz/", "must end with"),
        (".tar.gz", "must end with"),
        ("dir/.tar.gz", "must end with"),
        ("my model.tar.gz", "characters outside"),
        ("model*.tar.gz", "characters outside"),
        ("a\\b.tar.gz", "characters outside"),
        ("mödel.tar.gz", "characters outside"),
        ("a" * 1018 + ".tar.gz", "1025 characters long"),
    ],
)
def test_invalid_target_models(name: str, fragment: str) -> None:
    error = validate_target_model(name)
    assert error is not None and fragment in error, error


def test_target_model_reports_every_broken_rule() -> None:
    error = validate_target_model("/a b/../x.zip")
    assert error is not None
    for fragment in ("leading '/'", "'..'", "characters outside", "must end with"):
        assert fragment in error


def test_configs_in_text_archive(artifacts: Artifacts, tmp_path: Path) -> None:
    archive = package(text(artifacts, EncoderFormat.ONNX), tmp_path)
    encoder = parse_pbtxt(read_member(archive, "bert-trt/config.pbtxt").decode())
    assert (encoder.backend, encoder.platform) == ("onnxruntime", "")
    assert encoder.instance_group[0].kind == mc.ModelInstanceGroup.KIND_GPU
