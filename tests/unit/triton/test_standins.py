"""How the local-server harness classifies each step of an archive (no server needed): real,
stand-in with the same interface, or not exercised, and never a silent pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from ml_platform.triton.archive_safety import extract_archive
from ml_platform.triton.pbtxt import read_pbtxt
from ml_platform.triton.standins import ARTIFACT_PARAMETER, STANDIN_ASSETS, Mode, prepare
from tests.helpers.triton_support import package_archives, write_artifacts


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("standins")
    fake = write_artifacts(folder / "inputs")
    packaged = package_archives(folder / "out", fake, fake.onnx)
    archives = {a.name.split("-v")[0]: a for a in packaged}
    archives["onnx_source"] = fake.onnx
    return archives


def _assert_same_interface(standin, archive: Path, model: str, tmp_path: Path):
    """The stand-in has the archive's own name, tensors, batch size and batching; returns the
    archive's config of ``model`` (the archive is unpacked under ``tmp_path / "plain"``)."""
    unpacked = tmp_path / "plain"
    unpacked.mkdir()
    extract_archive(archive, unpacked)
    shipped = read_pbtxt(unpacked / model)
    assert (standin.name, standin.max_batch_size) == (shipped.name, shipped.max_batch_size)
    assert list(standin.input) == list(shipped.input)
    assert list(standin.output) == list(shipped.output)
    assert standin.dynamic_batching == shipped.dynamic_batching
    return shipped


def _modes(prepared) -> dict[str, tuple[str, Mode]]:
    return {s.model: (s.kind, s.mode) for s in prepared.steps}


def test_onnx_step_becomes_a_python_stand_in_with_the_same_interface(
    built: dict[str, Path], tmp_path: Path
) -> None:
    ready = prepare(
        built["model_onnx_python"], tmp_path / "ready", server_has={"onnxruntime": True}
    )
    assert _modes(ready) == {
        "ensemble": ("ensemble", Mode.REAL),
        "bert-trt": ("onnxruntime", Mode.STANDIN),
        "preprocess": ("python", Mode.REAL),
        "postprocess": ("python", Mode.REAL),
    }
    assert ready.complete and ready.ensemble == "ensemble"
    standin = read_pbtxt(ready.root / "bert-trt")
    assert standin.backend == "python" and not standin.platform
    assert (ready.root / "bert-trt/1/model.py").read_bytes() == (
        STANDIN_ASSETS / "onnx_model.py"
    ).read_bytes()
    artifact = Path(standin.parameters[ARTIFACT_PARAMETER].string_value)
    assert artifact == (ready.root / "bert-trt/1/model.onnx").resolve() and artifact.is_file()
    _assert_same_interface(standin, built["model_onnx_python"], "bert-trt", tmp_path)


def test_a_step_without_a_runtime_is_not_exercised_and_neither_is_its_ensemble(
    built: dict[str, Path], tmp_path: Path
) -> None:
    ready = prepare(built["model_onnx_python"], tmp_path / "r", server_has={"onnxruntime": False})
    assert _modes(ready)["bert-trt"] == ("onnxruntime", Mode.NOT_EXERCISED)
    assert _modes(ready)["ensemble"] == ("ensemble", Mode.NOT_EXERCISED)
    assert not ready.complete and ready.ensemble is None
    assert not (ready.root / "bert-trt").exists() and not (ready.root / "ensemble").exists()
    assert "not exercised" in ready.report() and "needs bert-trt" in ready.report()


def test_a_plan_runs_only_with_the_onnx_it_was_built_from(
    built: dict[str, Path], tmp_path: Path
) -> None:
    without = prepare(
        built["model_trt_python_t4"], tmp_path / "a", server_has={"onnxruntime": True}
    )
    assert _modes(without)["bert-trt"] == ("tensorrt_plan", Mode.NOT_EXERCISED)
    assert not without.complete
    with_onnx = prepare(
        built["model_trt_python_t4"],
        tmp_path / "b",
        plan_onnx=built["onnx_source"],
        server_has={"onnxruntime": True},
    )
    assert _modes(with_onnx)["bert-trt"] == ("tensorrt_plan", Mode.STANDIN)
    assert with_onnx.complete
    parameter = read_pbtxt(with_onnx.root / "bert-trt").parameters[ARTIFACT_PARAMETER]
    # A copy inside the unpacked folder: the confined local server sees only that folder.
    artifact = Path(parameter.string_value)
    assert artifact == with_onnx.root / "bert-trt" / "standin-plan.onnx"
    assert artifact.read_bytes() == built["onnx_source"].read_bytes()


def test_a_dali_step_becomes_a_cpu_stand_in_running_the_archives_own_dali_py(
    built: dict[str, Path], tmp_path: Path
) -> None:
    # The image ensemble: the Python-defined DALI model and the ONNX classifier both run as
    # stand-ins, so the real ensemble can be invoked.
    ready = prepare(
        built["model_tf_dali"], tmp_path / "i", server_has={"onnxruntime": True, "dali": True}
    )
    assert _modes(ready) == {
        "ensemble_dali_inception": ("ensemble", Mode.REAL),
        "dali": ("dali", Mode.STANDIN),
        "inception_onnx": ("onnxruntime", Mode.STANDIN),
    }
    assert ready.complete and ready.ensemble == "ensemble_dali_inception"
    standin = read_pbtxt(ready.root / "dali")
    assert standin.backend == "python" and not standin.platform
    assert (ready.root / "dali/1/model.py").read_bytes() == (
        STANDIN_ASSETS / "dali_model.py"
    ).read_bytes()
    artifact = Path(standin.parameters[ARTIFACT_PARAMETER].string_value)
    assert artifact == (ready.root / "dali/1/dali.py").resolve()  # the archive's own file
    shipped = _assert_same_interface(standin, built["model_tf_dali"], "dali", tmp_path)
    assert artifact.read_bytes() == (tmp_path / "plain/dali/1/dali.py").read_bytes()
    assert shipped.backend == "dali"
    assert shipped.HasField("dynamic_batching")


def test_a_dali_step_without_dali_is_not_exercised_and_neither_is_its_ensemble(
    built: dict[str, Path], tmp_path: Path
) -> None:
    ready = prepare(built["model_tf_dali"], tmp_path / "i", server_has={"onnxruntime": True})
    assert _modes(ready) == {
        "ensemble_dali_inception": ("ensemble", Mode.NOT_EXERCISED),
        "dali": ("dali", Mode.NOT_EXERCISED),
        "inception_onnx": ("onnxruntime", Mode.STANDIN),
    }
    # The classifier alone can load; the ensemble cannot be invoked.
    assert ready.loadable and not ready.complete
    assert "DALI is not installed" in ready.report()
    assert not (ready.root / "dali").exists()


def test_a_serialized_dali_pipeline_is_not_exercised(
    built: dict[str, Path], tmp_path: Path
) -> None:
    """A model.dali fixes its decoder on the GPU (and the DALI backend prefers it over
    dali.py): no CPU stand-in, reported as such."""
    import tarfile

    unpacked = tmp_path / "plain"
    unpacked.mkdir()
    extract_archive(built["model_tf_dali"], unpacked)
    (unpacked / "dali/1/model.dali").write_bytes(b"serialized pipeline")
    archive = tmp_path / "serialized.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(unpacked.rglob("*")):
            tar.add(path, arcname=path.relative_to(unpacked).as_posix(), recursive=False)
    ready = prepare(archive, tmp_path / "i", server_has={"onnxruntime": True, "dali": True})
    assert _modes(ready)["dali"] == ("dali", Mode.NOT_EXERCISED)
    assert not ready.complete and "model.dali" in ready.report()


def test_the_unpacked_folder_must_be_fresh(built: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "used").mkdir()
    with pytest.raises(FileExistsError):
        prepare(built["model_onnx_python"], tmp_path / "used", server_has={})


def test_runtimes_are_probed_by_module_even_without_a_parent_package() -> None:
    from ml_platform.triton.standins import RUNTIME_MODULES, runtime_available

    assert RUNTIME_MODULES == {"onnxruntime": "onnxruntime", "dali": "nvidia.dali"}
    assert runtime_available("nvidia.dali")  # the project venv has DALI (requirements-dev)
    assert not runtime_available("no_such_namespace.dali")  # no ModuleNotFoundError
