"""The image ensemble's Python-defined DALI model (``dali/1/dali.py``).

* Run with DALI's CPU operators against a NumPy/Pillow reference of the same preprocessing
  (TF-slim Inception eval: central 87.5% crop, bilinear resize to 299x299, then the
  classifier's normalisation and layout), and through a small ONNX classifier with Inception
  v3's interface: the top-5 classes are identical on a set of generated images.
* Serialized the way Triton's DALI backend does it at load (``invoke_autoserialize`` in a
  ``python3 -c`` subprocess), with no GPU.
* Written against the DALI Python API of the oldest supported container's DALI only.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image

import ml_platform
from ml_platform.triton import TensorFormat, dali_pipeline_source
from ml_platform.triton.ensembles import DALI_PIPELINE_SOURCE
from ml_platform_cli.main import main
from tests.helpers.triton_support import (
    dali_on_cpu,
    encode_image,
    load_pipeline_module,
    tiny_inception,
)
from tests.helpers.triton_support import inception_reference as reference
from tests.helpers.triton_support import pattern_image as _pattern

SIZE = 299
ONE_LEVEL = 1 / 127.5  # one 8-bit grey level in the [-1, 1] output
# torchvision's ImageNet statistics on [0, 255] pixels, as an export from another framework
# would need them.
TORCHVISION_MEAN = (123.675, 116.28, 103.53)
TORCHVISION_STD = (58.395, 57.12, 57.375)


def run_on_cpu(module, images: list[np.ndarray]) -> list[np.ndarray]:
    """The module's preprocessing with CPU operators over PNG-encoded ``images``."""
    return dali_on_cpu(module, [_png(image) for image in images])


def _png(image: np.ndarray) -> bytes:
    return encode_image(image, "PNG")  # lossless: decoding is exact


IMAGES = {
    "downscale 640x480": _pattern(480, 640, 1),
    "upscale 150x120": _pattern(120, 150, 2),
    "solid colour": np.full((300, 400, 3), (200, 30, 90), dtype=np.uint8),
}
# The sample set of the top-5 comparison: sizes, aspect ratios and content vary.
SAMPLES = [
    _pattern(h, w, seed)
    for seed, (h, w) in enumerate(
        [
            (480, 640),
            (640, 480),
            (299, 299),
            (120, 150),
            (1000, 333),
            (256, 256),
            (375, 500),
            (600, 800),
            (200, 900),
            (333, 1000),
            (512, 384),
            (150, 151),
        ],
        start=10,
    )
]


@pytest.fixture(scope="module")
def default_module(tmp_path_factory):
    return load_pipeline_module(tmp_path_factory.mktemp("dali"), dali_pipeline_source())


@pytest.fixture(scope="module")
def outputs(default_module) -> dict[str, np.ndarray]:
    return dict(zip(IMAGES, run_on_cpu(default_module, list(IMAGES.values())), strict=False))


def test_the_shipped_file_is_the_tf_slim_default() -> None:
    """Rendering the defaults changes nothing: the asset itself is the TF-slim pipeline."""
    assert dali_pipeline_source() == DALI_PIPELINE_SOURCE.read_bytes()
    chw = dali_pipeline_source(TORCHVISION_MEAN, TORCHVISION_STD, TensorFormat.NCHW).decode()
    assert "MEAN = (123.675, 116.28, 103.53)\n" in chw and 'OUTPUT_LAYOUT = "CHW"\n' in chw
    with pytest.raises(ValueError, match="layout='NONE': expected NHWC or NCHW"):
        dali_pipeline_source(layout=TensorFormat.NONE)


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
    assert ours.shape == expected.shape == (SIZE, SIZE, 3)  # HWC, as TF-slim's input
    difference = np.abs(ours - expected)
    assert difference.max() <= ONE_LEVEL + 1e-6, difference.max()  # rounding only
    assert difference.mean() < 0.2 * ONE_LEVEL, difference.mean()
    # Not trivially close: without the central crop the result is far off.
    uncropped = (
        np.asarray(
            Image.fromarray(IMAGES[name]).resize((SIZE, SIZE), Image.Resampling.BILINEAR),
            dtype=np.float32,
        )
        / 127.5
        - 1
    )
    assert np.abs(ours - uncropped).mean() > 10 * ONE_LEVEL


def test_mean_std_and_chw_for_other_exports(tmp_path: Path) -> None:
    source = dali_pipeline_source(TORCHVISION_MEAN, TORCHVISION_STD, TensorFormat.NCHW)
    module = load_pipeline_module(tmp_path, source)
    (ours,) = run_on_cpu(module, [IMAGES["downscale 640x480"]])
    expected = reference(IMAGES["downscale 640x480"], TORCHVISION_MEAN, TORCHVISION_STD, "CHW")
    assert ours.shape == expected.shape == (3, SIZE, SIZE)
    one_level = 1 / min(TORCHVISION_STD)
    assert np.abs(ours - expected).max() <= one_level + 1e-5


def _top5(session: ort.InferenceSession, batch: np.ndarray) -> list[list[int]]:
    (scores,) = session.run(None, {session.get_inputs()[0].name: batch})
    return [list(row) for row in np.argsort(-scores, axis=1, kind="stable")[:, :5]]


@pytest.mark.parametrize(
    ("interface", "mean", "std"),
    [
        ({"classes": 1001, "layout": "NHWC"}, None, None),  # TF-slim: [-1, 1], HWC
        ({"classes": 1000, "layout": "NCHW"}, TORCHVISION_MEAN, TORCHVISION_STD),
    ],
    ids=["tf-slim-1001-nhwc", "torchvision-1000-nchw"],
)
def test_top5_matches_the_reference_path(tmp_path: Path, interface, mean, std) -> None:
    """DALI (CPU operators) + the classifier gives the same top-5 classes as Pillow/NumPy
    preprocessing + the same classifier in onnxruntime, on every sample image."""
    layout = TensorFormat(interface["layout"])
    kwargs = {} if mean is None else {"mean": mean, "std": std}
    module = load_pipeline_module(tmp_path, dali_pipeline_source(layout=layout, **kwargs))
    session = ort.InferenceSession(tiny_inception(**interface))
    ours = np.stack(run_on_cpu(module, SAMPLES))
    ref_args = ((127.5,) * 3, (127.5,) * 3) if mean is None else (mean, std)
    expected = np.stack([reference(image, *ref_args, layout[1:]) for image in SAMPLES])
    assert _top5(session, ours) == _top5(session, expected)
    # The comparison can fail: ImageNet statistics in place of the model's own change the
    # ranking of at least one sample.
    wrong = np.stack(
        [
            reference(
                image,
                *(
                    (TORCHVISION_MEAN, TORCHVISION_STD)
                    if mean is None
                    else ((127.5,) * 3, (127.5,) * 3)
                ),
                layout[1:],
            )
            for image in SAMPLES
        ]
    )
    assert _top5(session, wrong) != _top5(session, expected)


# The exact command Triton's DALI backend runs to serialize a Python-defined model
# (GenerateAutoserializeCmd in src/model_provider/model_provider.h, dali_backend r25.09).
BACKEND_AUTOSERIALIZE = """
import importlib, sys
from nvidia.dali._utils.autoserialize import invoke_autoserialize
spec = importlib.util.spec_from_file_location('autoserialize_mod', sys.argv[1])
head_module = importlib.util.module_from_spec(spec)
sys.modules['autoserialize_mod'] = head_module
spec.loader.exec_module(head_module)
invoke_autoserialize(head_module, sys.argv[2])
"""


# What the test harness runs instead on this CPU-only machine: the same module and pipeline
# function, with the device chosen by the harness (no GPU here), serialized the same way.
HARNESS_SERIALIZE = """
import importlib, sys
spec = importlib.util.spec_from_file_location('autoserialize_mod', sys.argv[1])
head_module = importlib.util.module_from_spec(spec)
sys.modules['autoserialize_mod'] = head_module
spec.loader.exec_module(head_module)
head_module.image_pipeline(device_id=None).serialize(filename=sys.argv[2])
"""


def _serialize(tmp_path: Path, command: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    model = tmp_path / "dali" / "1" / "dali.py"
    model.parent.mkdir(parents=True, exist_ok=True)
    model.write_bytes(dali_pipeline_source())
    target = tmp_path / "serialized.dali"
    result = subprocess.run(
        [sys.executable, "-c", command, str(model), str(target)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return result, target


def test_the_shipped_pipeline_runs_on_gpu_0(tmp_path: Path) -> None:
    """Observed with DALI 2.4 on this CPU-only machine: the backend's own command builds a GPU
    pipeline on device 0 (every GPU pipeline of dali_backend's examples and QA declares
    ``device_id=0``; the backend passes each instance's device when it deserializes), so
    without CUDA it stops exactly there. In the container it runs on the instance's GPU."""
    result, _ = _serialize(tmp_path, BACKEND_AUTOSERIALIZE)
    assert result.returncode != 0
    assert "You are trying to create a GPU DALI pipeline while CUDA is not available" in (
        result.stderr
    )
    assert "device_id=0)" in dali_pipeline_source().decode()


def test_the_harness_serializes_it_on_its_own_device(tmp_path: Path) -> None:
    result, target = _serialize(tmp_path, HARNESS_SERIALIZE)
    assert result.returncode == 0, result.stderr
    data = target.read_bytes()
    # The GPU decoder is kept for Triton; the device is chosen when the backend loads it.
    assert b"DALI_INPUT_0" in data and b"mixed" in data and b"CropMirrorNormalize" in data


# The DALI Python API dali.py may use: every operator and keyword below exists unchanged in
# DALI 1.31 (Triton 23.12-24.03, the oldest supported containers), 1.39 (24.09), 1.51.2
# (25.09, the default) and 2.1.0 (26.05): the operator reference of each release,
# https://docs.nvidia.com/deeplearning/dali/archives/index.html
# (fn.decoders.image, fn.resize, fn.crop_mirror_normalize, fn.external_source;
# nvidia.dali.plugin.triton.autoserialize). DALI 1.x is
# not on PyPI (its package there only redirects to NVIDIA's index), so this pins the API
# rather than running 1.51.2; a call or keyword outside it fails here.
CONTAINER_DALI_API = {
    "external_source": {"device", "name"},
    "decoders.image": {"device", "output_type"},
    "resize": {"resize_x", "resize_y", "roi_start", "roi_end", "roi_relative", "interp_type"},
    "crop_mirror_normalize": {"dtype", "output_layout", "mean", "std"},
}
CONTAINER_DALI_TYPES = {"RGB", "FLOAT", "INTERP_LINEAR"}
CONTAINER_DALI_IMPORTS = {
    "nvidia.dali.fn",
    "nvidia.dali.types",
    "nvidia.dali",
    "nvidia.dali.plugin.triton",
}
SCHEMAS = {
    "decoders.image": "decoders__Image",
    "resize": "Resize",
    "crop_mirror_normalize": "CropMirrorNormalize",
}


def dali_api_used(source: str) -> tuple[dict[str, set[str]], set[str], set[str]]:
    """``fn.<op>`` calls with their keywords, ``types.<name>`` uses, imported modules."""
    calls: dict[str, set[str]] = {}
    types_used: set[str] = set()
    imports: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name.startswith("fn."):
                calls.setdefault(name.removeprefix("fn."), set()).update(
                    k.arg for k in node.keywords
                )
        elif isinstance(node, ast.Attribute) and ast.unparse(node.value) == "types":
            types_used.add(node.attr)
        elif isinstance(node, ast.Import):
            imports.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imports.add(node.module)
    return calls, types_used, imports


def test_uses_only_the_api_of_the_containers_dali() -> None:
    calls, types_used, imports = dali_api_used(dali_pipeline_source().decode())
    assert set(calls) <= set(CONTAINER_DALI_API), calls
    for op, keywords in calls.items():
        assert keywords <= CONTAINER_DALI_API[op], (op, keywords - CONTAINER_DALI_API[op])
    assert types_used <= CONTAINER_DALI_TYPES
    assert imports <= CONTAINER_DALI_IMPORTS
    # pipeline_def's own arguments: those of DALI 1.x's Pipeline constructor.
    decorator = next(
        d
        for n in ast.walk(ast.parse(dali_pipeline_source().decode()))
        if isinstance(n, ast.FunctionDef) and n.name == "image_pipeline"
        for d in n.decorator_list
        if isinstance(d, ast.Call)
    )
    assert {k.arg for k in decorator.keywords} == {"batch_size", "num_threads", "device_id"}


def test_the_pinned_api_is_real_dali() -> None:
    """Each pinned keyword is an argument of the operator's schema in the installed DALI, so
    the list above describes DALI, and the scan sees a keyword it does not allow."""
    from nvidia.dali import backend

    for op, schema_name in SCHEMAS.items():
        schema = backend.GetSchema(schema_name)
        for keyword in CONTAINER_DALI_API[op] - {"device"}:
            assert schema.HasArgument(keyword), (op, keyword)
    calls, _, _ = dali_api_used("fn.resize(x, size=(1, 2), antialias=False)\n")
    assert calls["resize"] - CONTAINER_DALI_API["resize"] == {"size", "antialias"}


def test_package_ships_the_pipeline_as_python(tmp_path: Path, capsys) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "inception.onnx").write_bytes(tiny_inception())
    (tmp_path / "in" / "labels.txt").write_text("".join(f"c{i}\n" for i in range(1001)))
    code = main(
        [
            "models",
            "package",
            "--ensemble",
            "image",
            "--out",
            str(tmp_path / "out"),
            "--inception-onnx",
            str(tmp_path / "in" / "inception.onnx"),
            "--inception-labels",
            str(tmp_path / "in" / "labels.txt"),
        ]
    )
    assert code == 0, capsys.readouterr().err
    (archive,) = (tmp_path / "out").glob("model_tf_dali-v*.tar.gz")  # versioned by content
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        shipped = tar.extractfile("dali/1/dali.py").read()
        config = tar.extractfile("dali/config.pbtxt").read().decode()
    assert "dali/1/model.dali" not in names  # nothing serialized by the DALI installed here
    assert shipped == DALI_PIPELINE_SOURCE.read_bytes()
    # The DALI input takes ragged batches (JPEGs of different sizes batch together), as
    # tritonclient's ModelConfig reads the shipped config.
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2 as mc

    (dali_input,) = text_format.Parse(config, mc.ModelConfig()).input
    assert (dali_input.name, dali_input.allow_ragged_batch) == ("DALI_INPUT_0", True)
    assert str(Path(ml_platform.__file__).parent).encode() not in shipped


def test_dali_stays_out_of_synthesis_and_the_cli_import_path() -> None:
    """Nothing in the package imports DALI: only the shipped dali.py does, in the container,
    and the local server's DALI stand-in, in the server's own venv."""
    root = Path(ml_platform.__file__).parent.parent
    importers = set()
    # the library and the tooling beside it (the CLI and the local server's host side)
    for package in ("ml_platform", "ml_platform_cli", "ml_platform_pricing"):
        for path in sorted((root / package).rglob("*.py")):
            _, _, imports = dali_api_used(path.read_text("utf-8"))
            if any(name and name.split(".")[:2] == ["nvidia", "dali"] for name in imports):
                importers.add(path.relative_to(root).as_posix())
    assert importers == {
        "ml_platform/triton/assets/dali/dali.py",
        "ml_platform/triton/assets/standins/dali_model.py",
    }
