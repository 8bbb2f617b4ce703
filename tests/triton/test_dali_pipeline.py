"""The image ensemble's DALI pipeline, run with DALI's CPU operators against a NumPy/Pillow
reference of the same preprocessing (TF-slim Inception eval: central 87.5% crop, bilinear
resize to 299x299, pixels scaled to [-1, 1]); and serialized without a GPU."""

from __future__ import annotations

import ast
import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import ml_platform
from ml_platform.cli.main import main
from ml_platform.triton.ensembles import DALI_PIPELINE_SCRIPT, serialize_dali_pipeline
from tests.triton.support import write_artifacts

SIZE = 299
ONE_LEVEL = 1 / 127.5  # one 8-bit grey level in the [-1, 1] output


def _load_pipeline_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_test_dali_pipeline", DALI_PIPELINE_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pattern(height: int, width: int, seed: int) -> np.ndarray:
    """Gradients, stripes and noise: resizing it wrongly shows."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    image = np.stack([x * 255 / width, y * 255 / height, ((x + y) % 64) * 4], axis=-1)
    return np.clip(image + rng.normal(0, 8, image.shape), 0, 255).astype(np.uint8)


def _png(image: np.ndarray) -> np.ndarray:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")  # lossless: decoding is exact
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def reference(image: np.ndarray) -> np.ndarray:
    """Central 87.5% crop, bilinear resize to 299x299, then x / 127.5 - 1."""
    height, width = image.shape[:2]
    margin = (1 - 0.875) / 2
    box = (width * margin, height * margin, width * (1 - margin), height * (1 - margin))
    resized = Image.fromarray(image).resize((SIZE, SIZE), Image.Resampling.BILINEAR, box=box)
    return np.asarray(resized, dtype=np.float32) / 127.5 - 1


IMAGES = {
    "downscale 640x480": _pattern(480, 640, 1),
    "upscale 150x120": _pattern(120, 150, 2),
    "solid colour": np.full((300, 400, 3), (200, 30, 90), dtype=np.uint8),
}


@pytest.fixture(scope="module")
def outputs() -> dict[str, np.ndarray]:
    module = _load_pipeline_module()
    pipe = module.build_pipeline(
        batch_size=len(IMAGES), num_threads=1, device_id=None, decoder_device="cpu"
    )
    pipe.build()
    pipe.feed_input(module.INPUT_NAME, [_png(image) for image in IMAGES.values()])
    (batch,) = pipe.run()
    return {name: np.array(batch[i]) for i, name in enumerate(IMAGES)}


def test_pixels_are_scaled_to_minus_one_one_not_imagenet_statistics(outputs) -> None:
    solid = outputs["solid colour"]
    assert solid.shape == (SIZE, SIZE, 3) and solid.dtype == np.float32
    expected = np.array([200, 30, 90], dtype=np.float32) / 127.5 - 1  # [0.569, -0.765, -0.294]
    np.testing.assert_allclose(solid, np.broadcast_to(expected, solid.shape), atol=1e-6)
    for output in outputs.values():
        assert -1.0 <= output.min() and output.max() <= 1.0


@pytest.mark.parametrize("name", ["downscale 640x480", "upscale 150x120"])
def test_resize_matches_the_pillow_reference(outputs, name: str) -> None:
    ours, expected = outputs[name], reference(IMAGES[name])
    assert ours.shape == expected.shape == (SIZE, SIZE, 3)  # HWC, as the graphdef's input
    difference = np.abs(ours - expected)
    assert difference.max() <= ONE_LEVEL + 1e-6, difference.max()  # rounding only
    assert difference.mean() < 0.2 * ONE_LEVEL, difference.mean()
    # Not trivially close: without the central crop the result is far off.
    uncropped = np.asarray(
        Image.fromarray(IMAGES[name]).resize((SIZE, SIZE), Image.Resampling.BILINEAR),
        dtype=np.float32,
    ) / 127.5 - 1
    assert np.abs(ours - uncropped).mean() > 10 * ONE_LEVEL


def test_serializes_without_a_gpu(tmp_path: Path) -> None:
    path = serialize_dali_pipeline(tmp_path / "model.dali", batch_size=8)
    data = path.read_bytes()
    # The GPU decoder is kept for Triton; the device is chosen when the backend loads it.
    assert b"DALI_INPUT_0" in data and b"mixed" in data and b"CropMirrorNormalize" in data


def test_package_serializes_the_pipeline_itself(tmp_path: Path, capsys) -> None:
    artifacts = write_artifacts(tmp_path / "in")
    code = main([
        "models", "package", "--ensemble", "image", "--out", str(tmp_path / "out"),
        "--inception-graphdef", str(artifacts.graphdef),
        "--inception-labels", str(artifacts.labels),
    ])
    assert code == 0, capsys.readouterr().err
    (archive,) = (tmp_path / "out").glob("model_tf_dali-v*.tar.gz")  # versioned by content
    with tarfile.open(archive) as tar:
        model = tar.extractfile("dali/1/model.dali").read()
    assert model == serialize_dali_pipeline(tmp_path / "again.dali", batch_size=256).read_bytes()


def test_dali_stays_out_of_synthesis_and_the_cli_import_path() -> None:
    """Only two functions import DALI, when called: nothing imports it at module load."""
    package_root = Path(ml_platform.__file__).parent
    importers = set()

    def visit(node: ast.AST, scope: str | None, path: Path) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                names = [child.module or ""]
            else:
                names = []
            if any(name.split(".")[:2] == ["nvidia", "dali"] for name in names):
                importers.add((path.relative_to(package_root).as_posix(), scope))
            inner = child.name if isinstance(child, ast.FunctionDef) else scope
            visit(child, inner, path)

    for path in sorted(package_root.rglob("*.py")):
        visit(ast.parse(path.read_text("utf-8")), None, path)
    assert importers == {
        ("triton/ensembles.py", "serialize_dali_pipeline"),
        ("triton/assets/dali/pipeline.py", "build_pipeline"),
    }
