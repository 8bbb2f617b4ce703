"""What an archive records of the release it was built for, and which releases can load it
(``<ensemble>/mlp-archive.json`` and the configs; ml_platform/triton/archive_meta.py).

Per-release facts (TensorFlow backend up to 25.02, TensorRT per release, stub Python) are taken
from the sources cited in ml_platform/triton/releases.py; the archives are real packages."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ml_platform.config import Settings, SettingsError
from ml_platform.triton import package, text_ensemble
from ml_platform.triton.archive_meta import (
    ArchiveFacts,
    read_archive_facts,
    release_problems,
)
from ml_platform_cli.archives import version_archive
from tests.helpers.triton_support import MINILM_DIR, TENSORRT, fake_conda_pack, write_artifacts


def _onnx_with_env(tmp_path: Path, release: str, python: str) -> Path:
    artifacts = write_artifacts(tmp_path / "a")
    env = fake_conda_pack(tmp_path / "env.tar.gz", python=python)
    spec = text_ensemble(
        tokenizer_dir=MINILM_DIR,
        encoder_path=artifacts.onnx,
        encoder_format="onnx",
        execution_env_path=env,
        triton_version=release,
    )
    return package(spec, tmp_path / "out")


def test_an_archive_with_an_environment_records_its_python(tmp_path: Path) -> None:
    archive = _onnx_with_env(tmp_path, "24.09", "3.10")
    facts = read_archive_facts(archive)
    assert facts == ArchiveFacts(
        triton_release="24.09", backends=("onnxruntime", "python"), stub_python="3.10"
    )
    assert release_problems("x", facts, "24.09") == []
    # 25.09's stub is Python 3.12 (Ubuntu 24.04 from 24.11): the environment must be rebuilt.
    (problem,) = release_problems("x", facts, "25.09")
    assert problem == (
        "x: its execution environment is Python 3.10 (built for Triton 24.09); Triton 25.09's "
        "Python backend stub is Python 3.12: rebuild the environment with python=3.12 and "
        "package the archive again"
    )


def test_backends_and_plans_decide_too() -> None:
    graphdef = ArchiveFacts(backends=("dali", "tensorflow_graphdef"))
    assert release_problems("x", graphdef, "24.09") == []
    (problem,) = release_problems("x", graphdef, "25.04")
    assert "needs the TensorFlow backend, which Triton shipped last in 25.02" in problem
    unrecorded = ArchiveFacts(backends=("tensorrt_plan",), plan_without_version=True)
    (problem,) = release_problems("x", unrecorded, "25.09")
    assert "records no 'tensorrt_version'" in problem and "--tensorrt-version" in problem
    plan = ArchiveFacts(backends=("tensorrt_plan",), tensorrt="10.13.3.9")
    assert release_problems("x", plan, "25.09") == []  # major.minor.patch decides
    assert len(release_problems("x", plan, "24.09")) == 1
    # 26.05's TensorRT is not recorded from a source: not checked rather than guessed.
    assert release_problems("x", plan, "26.05") == []


def test_s3_metadata_round_trip() -> None:
    facts = ArchiveFacts("25.09", ("python", "tensorrt_plan"), TENSORRT, "3.12")
    assert ArchiveFacts.from_s3_metadata(facts.s3_metadata()) == facts
    assert ArchiveFacts.from_s3_metadata({"sha256": "ab"}) is None


def test_settings_refuse_an_upload_dir_archive_the_release_cannot_load(tmp_path: Path) -> None:
    folder = tmp_path / "upload"
    folder.mkdir()
    built = _onnx_with_env(tmp_path / "build", "24.09", "3.10")
    versioned, _ = version_archive(shutil.copy(built, folder / built.name))
    with pytest.raises(SettingsError) as error:
        Settings.from_context({"inference": {"upload_dir": str(folder)}})
    message = str(error.value)
    assert (
        f"inference.upload_dir = '{folder}': {versioned.name}: inference.triton_version "
        "'25.09': its execution environment is Python 3.10"
    ) in message
    # The release it was built for takes it.
    Settings.from_context({"inference": {"upload_dir": str(folder), "triton_version": "24.09"}})
