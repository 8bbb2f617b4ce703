"""`--execution-env` is checked against the Triton release that will run it: a conda-pack
archive (not any file), the Python of that release's Python-backend stub, and numpy < 2 for
releases before 24.11 (python_backend PR 384).

The stub Python per release is taken from the sources cited in ml_platform/triton/releases.py
(24.12 release notes "Ubuntu 24.04 including Python 3.12"; server build.py on ubuntu2404 from
r24.11); the 24.10 row is also observed: the local real server (pytriton 0.7.0, Triton 24.10)
runs its Python 3.10 stub in tests/e2e/triton."""

from __future__ import annotations

from pathlib import Path

import pytest

from ml_platform.sagemaker_images import TRITON_VERSIONS
from ml_platform.triton import EncoderFormat, text_ensemble
from ml_platform.triton.execution_env import execution_env_problems
from ml_platform.triton.releases import numpy_pin, stub_accepts_numpy2, stub_python
from ml_platform_cli.main import main
from tests.helpers.triton_support import MINILM_DIR, fake_conda_pack, write_artifacts


@pytest.mark.parametrize(
    ("release", "python", "numpy2"),
    [
        ("23.05", "3.10", False),
        ("24.09", "3.10", False),
        ("24.10", "3.10", False),
        ("24.11", "3.12", True),
        ("24.12", "3.12", True),
        ("25.09", "3.12", True),
        ("25.11", "3.12", True),
        ("25.12", "3.12", True),
        ("26.05", "3.12", True),
    ],
)
def test_stub_facts_per_release(release: str, python: str, numpy2: bool) -> None:
    assert stub_python(release) == python
    assert stub_accepts_numpy2(release) is numpy2
    assert numpy_pin(release) == ("numpy" if numpy2 else "numpy<2")


def test_every_sagemaker_release_has_a_stub_python() -> None:
    assert {v: stub_python(v) for v in TRITON_VERSIONS} == {
        "23.12": "3.10",
        "24.01": "3.10",
        "24.03": "3.10",
        "24.05": "3.10",
        "24.09": "3.10",
        "25.04": "3.12",
        "25.09": "3.12",
        "26.05": "3.12",
    }


def test_a_matching_environment_passes(tmp_path: Path) -> None:
    assert execution_env_problems(fake_conda_pack(tmp_path / "a.tar.gz"), "24.09") == []
    py312 = fake_conda_pack(tmp_path / "b.tar.gz", python="3.12", numpy="2.1.0")
    assert execution_env_problems(py312, "26.05") == []
    # The default release (25.09) runs Ubuntu 24.04's Python 3.12 stub: a 3.12 env passes.
    assert execution_env_problems(py312, "25.09") == []
    assert execution_env_problems(py312, "24.11") == []
    conda_numpy = fake_conda_pack(tmp_path / "c.tar.gz", numpy="1.26.4", numpy_from="conda")
    assert execution_env_problems(conda_numpy, "24.09") == []


def test_a_text_file_is_refused(tmp_path: Path) -> None:
    text = tmp_path / "env.tar.gz"
    text.write_text("pip install numpy\n")
    (problem,) = execution_env_problems(text, "24.09")
    assert "not a gzip-compressed tar archive as conda-pack writes it" in problem


def test_a_tarball_that_is_not_a_conda_environment_is_refused(tmp_path: Path) -> None:
    plain = fake_conda_pack(tmp_path / "venv.tar.gz", conda_meta=False)
    (problem,) = execution_env_problems(plain, "24.09")
    assert "no conda-meta/ folder, so not a conda-pack archive" in problem


def test_the_wrong_python_is_refused_with_the_stubs_version(tmp_path: Path) -> None:
    env = fake_conda_pack(tmp_path / "env.tar.gz", python="3.11")
    (problem,) = execution_env_problems(env, "24.09")
    assert "has Python 3.11; Triton 24.09's Python backend stub is Python 3.10" in problem
    (problem,) = execution_env_problems(fake_conda_pack(tmp_path / "e.tar.gz"), "26.05")
    assert "has Python 3.10; Triton 26.05's Python backend stub is Python 3.12" in problem
    # The old table accepted a 3.10 env for 25.09, whose stub cannot use it.
    (problem,) = execution_env_problems(fake_conda_pack(tmp_path / "f.tar.gz"), "25.09")
    assert "has Python 3.10; Triton 25.09's Python backend stub is Python 3.12" in problem


@pytest.mark.parametrize("numpy_from", ["pip", "conda"])
def test_numpy_2_is_refused_before_24_11_only(tmp_path: Path, numpy_from: str) -> None:
    env = fake_conda_pack(tmp_path / "env.tar.gz", numpy="2.1.3", numpy_from=numpy_from)
    (problem,) = execution_env_problems(env, "24.09")
    assert "has numpy 2" in problem and "python_backend PR 384" in problem
    assert "'numpy<2'" in problem
    py312 = fake_conda_pack(
        tmp_path / "py312.tar.gz", python="3.12", numpy="2.1.3", numpy_from=numpy_from
    )
    assert execution_env_problems(py312, "25.09") == []


def test_all_problems_at_once(tmp_path: Path) -> None:
    env = fake_conda_pack(tmp_path / "env.tar.gz", python="3.12", numpy="2.0.0")
    problems = execution_env_problems(env, "24.09")
    assert len(problems) == 2 and "Python 3.12" in problems[0] and "numpy 2" in problems[1]


def test_text_ensemble_refuses_a_bad_environment(tmp_path: Path) -> None:
    artifacts = write_artifacts(tmp_path / "a")
    bad = fake_conda_pack(tmp_path / "bad.tar.gz", python="3.12", numpy="2.2.0")
    with pytest.raises(ValueError, match="has numpy 2"):
        text_ensemble(
            tokenizer_dir=MINILM_DIR,
            encoder_path=artifacts.onnx,
            encoder_format=EncoderFormat.ONNX,
            execution_env_path=bad,
            triton_version="24.09",
        )
    spec = text_ensemble(
        tokenizer_dir=MINILM_DIR,
        encoder_path=artifacts.onnx,
        encoder_format=EncoderFormat.ONNX,
        execution_env_path=bad,
        triton_version="25.09",
    )
    assert spec.model("preprocess").parameters["EXECUTION_ENV_PATH"]


def test_mlp_models_package_checks_against_the_settings_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ml_platform.config import settings_from_cdk_json

    cdk_json = Path(__file__).resolve().parents[3] / "cdk.json"
    release = settings_from_cdk_json(str(cdk_json)).inference.triton_version
    artifacts = write_artifacts(tmp_path / "a")
    out = tmp_path / "out"
    base = [
        "models",
        "package",
        "--cdk-json",
        str(cdk_json),
        "--ensemble",
        "text",
        "--encoder",
        str(artifacts.onnx),
        "--out",
        str(out),
    ]
    text = tmp_path / "env.txt"
    text.write_text("numpy\n")
    assert main([*base, "--execution-env", str(text)]) == 1
    err = capsys.readouterr().err
    assert "refusing to package" in err and "not a gzip-compressed tar archive" in err
    assert not out.exists() or not list(out.iterdir())
    numpy2 = fake_conda_pack(
        tmp_path / "np2.tar.gz", python=stub_python(release) or "3.12", numpy="2.1.0"
    )
    # Without --triton-version: the settings' release (inference.triton_version).
    expected = 0 if stub_accepts_numpy2(release) else 1
    assert main([*base, "--execution-env", str(numpy2)]) == expected
    assert ("has numpy 2" in capsys.readouterr().err) is (expected == 1)
    py310 = fake_conda_pack(tmp_path / "py310.tar.gz", numpy="2.1.0")
    assert main([*base, "--execution-env", str(py310), "--triton-version", "24.09"]) == 1
    assert "Triton 24.09 (before 24.11)" in capsys.readouterr().err
    # 25.09's stub is Python 3.12: a 3.10 environment is refused, a 3.12 one packaged.
    assert main([*base, "--execution-env", str(py310), "--triton-version", "25.09"]) == 1
    assert "Triton 25.09's Python backend stub is Python 3.12" in capsys.readouterr().err
    py312 = fake_conda_pack(tmp_path / "py312.tar.gz", python="3.12", numpy="2.1.0")
    assert main([*base, "--execution-env", str(py312), "--triton-version", "25.09"]) == 0
    assert len(list(out.glob("model_onnx_python-v*.tar.gz"))) == 1


def test_postprocess_gets_an_environment_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the AWS sample gives postprocess its own EXECUTION_ENV_PATH: each Python model ships
    the environment it was given in its own folder, each checked against the release."""
    import tarfile

    from ml_platform.triton import parse_pbtxt

    artifacts = write_artifacts(tmp_path / "a")
    pre = fake_conda_pack(tmp_path / "pre.tar.gz", python="3.12")
    post = fake_conda_pack(tmp_path / "post.tar.gz", python="3.12", numpy="2.1.0")
    out = tmp_path / "out"
    base = ["models", "package", "--ensemble", "text", "--encoder", str(artifacts.onnx)]
    base += ["--out", str(out), "--triton-version", "25.09"]
    assert main([*base, "--execution-env", str(pre), "--postprocess-execution-env", str(post)]) == 0
    (archive,) = out.glob("model_onnx_python-v*.tar.gz")
    with tarfile.open(archive) as tar:
        shipped = {
            name: tar.extractfile(f"{name}/processing_env.tar.gz").read()
            for name in ("preprocess", "postprocess")
        }
        post_config = parse_pbtxt(tar.extractfile("postprocess/config.pbtxt").read().decode())
    assert shipped == {"preprocess": pre.read_bytes(), "postprocess": post.read_bytes()}
    assert post_config.parameters["EXECUTION_ENV_PATH"].string_value == (
        "$$TRITON_MODEL_DIRECTORY/processing_env.tar.gz"
    )
    capsys.readouterr()
    old = fake_conda_pack(tmp_path / "old.tar.gz")  # Python 3.10
    assert main([*base, "--postprocess-execution-env", str(old)]) == 1
    assert (
        f"--postprocess-execution-env {old}: has Python 3.10; Triton 25.09's Python backend "
        "stub is Python 3.12"
    ) in capsys.readouterr().err
